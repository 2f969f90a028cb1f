"""What every cluster backend speaks: plain snapshots of nodes and pods, and the backend Protocol.

These types carry no client objects, so the reconciler and the snapshot builder can be tested
with lists of dataclasses; only a backend module knows what a V1Pod is.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from jobspec.pods import DesiredPod

if TYPE_CHECKING:
    from scheduler.adapters.cluster.watch_cache import ClusterCache

T = TypeVar("T")
PodPhase = Literal["Pending", "Running", "Succeeded", "Failed", "Unknown"]
FINISHED_PHASES: frozenset[str] = frozenset({"Succeeded", "Failed"})


class ClusterError(Exception):
    """The cluster refused or failed an operation; retrying the same call will not help."""


class RefusedClusterError(ClusterError):
    """The API server refused this object for good (403 forbidden, e.g. a ResourceQuota;
    422 invalid): the same request will be refused again. `message` is the server's."""

    def __init__(self, where: str, status: int, message: str) -> None:
        super().__init__(f"{where}: HTTP {status}: {message}")
        self.status = status
        self.message = message


class NameTakenError(ClusterError):
    """Another workload's object (another portal instance's, anyone's) holds the name of one
    of the job's objects: the job's pods cannot be made under that name while it is there."""


class NodeTakenError(ClusterError):
    """At bind time a node had no longer room for the gang's pods the cycle placed there:
    another scheduler's pod (or any pod the cycle's read did not see) was bound there since.
    Nothing of the gang was created. `words` says what was free against what was needed."""

    def __init__(self, node: str, pod: str, words: str, *, namespace: str = "") -> None:
        super().__init__(f"node {node} was taken before the bind of pod {pod}: {words}")
        self.node = node
        self.pod = pod
        self.namespace = namespace
        self.words = words


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
    # The kubelet's Ready condition: False when it is False or Unknown (node unreachable).
    ready: bool = True
    # What pods the portal does not own (DaemonSets, other schedulers' and other instances'
    # pods, any namespace) request on this node, in allocatable's units; "pods" counts them.
    used_by_others: dict[str, int] = field(default_factory=dict)
    # The GPU sharing stacks' card registrations (scheduler.adapters.cluster.gpushare).
    annotations: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class NodeRoom:
    """A node as the bind pass rechecks it, from the backend's freshest view: what it can
    hold, and what the pods bound there and not finished request (a terminating pod too, as the
    kubelet and kube-scheduler count it), other workloads' apart from the portal's own. Units
    as ObservedNode.allocatable; a GPU share's cards as others_usage counts them."""

    allocatable: dict[str, int]
    used_by_others: dict[str, int] = field(default_factory=dict)
    used_by_portal: dict[str, int] = field(default_factory=dict)

    def free(self, resource: str) -> int:
        return (
            self.allocatable.get(resource, 0)
            - self.used_by_others.get(resource, 0)
            - self.used_by_portal.get(resource, 0)
        )


@dataclass(frozen=True, slots=True)
class PodLog:
    """The last lines a pod's main container wrote, and how it ended if it did (what the
    portal's facade hands its pages: portal.scheduling.facade.PodLog)."""

    pod: str
    lines: list[str]
    phase: str | None = None  # None: the cluster has no such pod (any more)
    exit_code: int | None = None
    reason: str | None = None


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
    message: str | None = None  # what the kubelet said with the reason
    # When a graceful deletion's grace period ends (the API's deletionTimestamp).
    deletion_deadline: datetime | None = None

    @property
    def finished(self) -> bool:
        return self.phase in FINISHED_PHASES


@dataclass(frozen=True, slots=True)
class PodEvent:
    """A Kubernetes Event about one of the portal's pods, so `kubectl describe pod` tells the
    story the portal tells (bound, refused, evicted and why)."""

    name: str
    namespace: str
    reason: str  # CamelCase, like kube-scheduler's: Scheduled, FailedBinding, Preempted
    message: str
    type: str = "Normal"  # or "Warning"


class ClusterBackend(Protocol):
    """Every call the cycle and the portal make of a cluster; both backends (simulated and
    kubernetes) implement each (a test holds them to it). Writes must be idempotent, because
    reconcile re-runs them after partial failures and may run twice.

    The batch calls (`create_pods`, `delete_pods`, `bind_pods`) default to one call per pod
    for a backend that inherits this class (the tests' fakes).
    """

    # Whether list_nodes reports the cluster's own nodes, which the cycle writes into the Node
    # rows (Kubernetes), or those rows themselves (the simulated cluster, whose inventory they are).
    lists_cluster_nodes: bool
    # Whether it makes a job's objects besides its pods (the owner object, the plugins'
    # Services, ConfigMaps, NetworkPolicies and Secrets), which the reconcile sweeps (but the
    # Secrets, which go with their owner object).
    makes_job_objects: bool
    # The watch cache the backend reads from, kept from cycle to cycle (None: it lists the
    # cluster): what the cycle last wrote from its reads is remembered per source.
    cache: ClusterCache | None

    # -- reads -------------------------------------------------------------------------------

    def list_nodes(self) -> list[ObservedNode]: ...

    def list_pods(self) -> list[ObservedPod]:
        """Only the pods this portal manages (label gpuportal.io/managed=true)."""
        ...

    def owners_deleted(self) -> dict[str, str]:
        """job id -> why, for each job whose owner object someone else deleted since the
        previous list_pods (its pods went with it)."""
        ...

    def namespaces_missing(self, names: Iterable[str]) -> set[str]:
        """Which of `names` no namespace has (nothing of a job can be made there)."""
        ...

    def namespaces_refusing(self) -> set[str]:
        """Namespaces that refused this backend's lists (403: the portal's Roles are not there)."""
        ...

    def namespace_labels(self, names: Iterable[str]) -> dict[str, dict[str, str]]:
        """The labels of each of `names` that exists (its pod-security.kubernetes.io/enforce
        level among them)."""
        ...

    def pod_log(self, name: str, namespace: str, tail: int) -> PodLog:
        """The last `tail` lines of the pod's main container and how it ended."""
        ...

    def nodes_room(
        self, names: Sequence[str], ignore: Collection[tuple[str, str]] = ()
    ) -> dict[str, NodeRoom]:
        """Each of `names` as it is now, read just before the bind (a node it does not know
        is left out), not counting the pods `ignore` names ((namespace, name): the gangs
        being checked, which a cycle overlapping this one may have made already). A backend
        with no fresher view than the cycle's answers nothing, and the bind pass then binds
        on the cycle's view."""
        return {}

    # -- writes ------------------------------------------------------------------------------

    def create_pod(self, pod: DesiredPod) -> None:
        """Create the pod; an existing pod with the same name and replica identity is success."""
        ...

    def delete_pod(self, name: str, namespace: str, grace_seconds: int) -> None:
        """Request graceful deletion; a pod that is already gone is success."""
        ...

    def bind_pod(self, name: str, namespace: str, node_name: str) -> None:
        """Assign the created pod to `node_name`; a pod already on that node is success."""
        ...

    def record_events(self, events: Sequence[PodEvent]) -> None:
        """Best effort: an event that cannot be recorded is logged, never an error."""
        ...

    def annotate_pod(self, name: str, namespace: str, annotations: Mapping[str, str]) -> None:
        """Set `annotations` on the live pod (a merge: its other annotations stay); a pod that
        is already gone is success (it needs no annotation any more)."""
        ...

    def sweep_job_objects(
        self, keep: set[tuple[str, str, str]], wanted: Sequence[tuple[str, dict[str, Any]]] = ()
    ) -> list[str]:
        """Delete the job objects (owner objects, the plugins' Services, ConfigMaps and
        NetworkPolicies; Secrets go with their owner) not in `keep` (kind, namespace, name),
        make again each of `wanted` (owner object's name, manifest) that someone deleted;
        returns "Kind namespace/name" of each deleted."""
        ...

    def create_pods(self, pods: Sequence[DesiredPod]) -> list[Exception | None]:
        """Create each pod as create_pod would; one outcome per pod, in order: None when it was
        created (or was already there), else the error. One failure must not stop the rest."""
        return create_each(self, pods)

    def delete_pods(
        self, pods: Sequence[tuple[str, str]], grace_seconds: int
    ) -> list[Exception | None]:
        """Delete each (name, namespace) as delete_pod would; outcomes as in create_pods."""
        return delete_each(self, pods, grace_seconds)

    def bind_pods(self, pods: Sequence[tuple[str, str, str]]) -> list[Exception | None]:
        """Bind each (name, namespace, node) as bind_pod would; outcomes as in create_pods."""
        return bind_each(self, pods)


def create_each(backend: ClusterBackend, pods: Sequence[DesiredPod]) -> list[Exception | None]:
    return _each(backend.create_pod, pods)


def delete_each(
    backend: ClusterBackend, pods: Sequence[tuple[str, str]], grace_seconds: int
) -> list[Exception | None]:
    return _each(lambda pod: backend.delete_pod(pod[0], pod[1], grace_seconds), pods)


def bind_each(
    backend: ClusterBackend, pods: Sequence[tuple[str, str, str]]
) -> list[Exception | None]:
    return _each(lambda pod: backend.bind_pod(*pod), pods)


def _each(call: Callable[[T], None], items: Sequence[T]) -> list[Exception | None]:
    """`call(item)` for each item: None where it succeeded, else the error."""
    outcomes: list[Exception | None] = []
    for item in items:
        try:
            call(item)
        # Deliberately broad: each pod is an isolation boundary, one pod's failure (even a bug
        # in building its manifest) must not keep the other pods from converging.
        except Exception as exc:
            outcomes.append(exc)
        else:
            outcomes.append(None)
    return outcomes
