"""What every cluster backend speaks: plain snapshots of nodes and pods, and the backend Protocol.

These types carry no client objects, so the reconciler and the snapshot builder can be tested
with lists of dataclasses; only a backend module knows what a V1Pod is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

PodPhase = Literal["Pending", "Running", "Succeeded", "Failed", "Unknown"]
FINISHED_PHASES: frozenset[str] = frozenset({"Succeeded", "Failed"})


class ClusterError(Exception):
    """The cluster refused or failed an operation; retrying the same call will not help."""


class TransientClusterError(ClusterError):
    """The cluster could not be reached or asked us to back off; a later pass may succeed.

    A subclass, so callers that only care "did it work" can catch ClusterError alone.
    """


@dataclass(frozen=True, slots=True)
class ObservedNode:
    name: str
    # cpu in millicores, memory in bytes, extended resources (GPUs, "pods") as counts.
    allocatable: dict[str, int]
    labels: dict[str, str] = field(default_factory=dict)
    unschedulable: bool = False
    taints: list[dict[str, str]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class DesiredPod:
    name: str
    namespace: str
    node_name: str
    image: str
    command: list[str]
    env: dict[str, str]
    # cpu in millicores, memory in bytes, at most one GPU resource name -> device count.
    requests: dict[str, int]
    labels: dict[str, str]
    annotations: dict[str, str]


@dataclass(frozen=True, slots=True)
class ObservedPod:
    name: str
    namespace: str
    node_name: str | None
    phase: PodPhase
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    deletion_requested: bool = False
    exit_code: int | None = None
    reason: str | None = None

    @property
    def finished(self) -> bool:
        return self.phase in FINISHED_PHASES


class ClusterBackend(Protocol):
    """The four calls the cycle needs from a cluster. Implementations must make the writes
    idempotent, because reconcile re-runs them after partial failures and may run twice."""

    def list_nodes(self) -> list[ObservedNode]: ...

    def list_pods(self) -> list[ObservedPod]:
        """Only the pods this portal manages (label gpuportal.io/managed=true)."""
        ...

    def create_pod(self, pod: DesiredPod) -> None:
        """Create the pod; an existing pod with the same name and replica identity is success."""
        ...

    def delete_pod(self, name: str, namespace: str, grace_seconds: int) -> None:
        """Request graceful deletion; a pod that is already gone is success."""
        ...
