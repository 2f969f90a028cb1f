"""Cluster backends: the snapshot types and Protocol every backend speaks (base), and the
Kubernetes implementation (kubernetes, manifests); the pods they are asked for are built by
jobspec.pods.

The kubernetes modules are not imported here, so code that only needs the types (the simulated
backend, the reconciler) does not pull in the client library.
"""

from scheduler.adapters.cluster.base import (
    ClusterBackend,
    ClusterError,
    ObservedNode,
    ObservedPod,
    TransientClusterError,
)

__all__ = [
    "ClusterBackend",
    "ClusterError",
    "ObservedNode",
    "ObservedPod",
    "TransientClusterError",
]
