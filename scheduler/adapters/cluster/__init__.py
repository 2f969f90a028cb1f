"""Cluster backends: the snapshot types and Protocol every backend speaks (base), the label
and naming scheme (labels), and the Kubernetes implementation (kubernetes, manifests).

The kubernetes modules are not imported here, so code that only needs the types (the simulated
backend, the reconciler) does not pull in the client library.
"""

from scheduler.adapters.cluster.base import (
    ClusterBackend,
    ClusterError,
    DesiredPod,
    ObservedNode,
    ObservedPod,
    TransientClusterError,
)

__all__ = [
    "ClusterBackend",
    "ClusterError",
    "DesiredPod",
    "ObservedNode",
    "ObservedPod",
    "TransientClusterError",
]
