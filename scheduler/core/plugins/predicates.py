"""predicates: can this task run on this node at all?

Source: volcano-sh/volcano pkg/scheduler/plugins/predicates/predicates.go, which runs the
kube-scheduler filters. Implemented: node unschedulable, node selector, required node affinity,
NoSchedule/NoExecute taints vs tolerations, and required pod (anti-)affinity over a topology
key (including the symmetric check against running pods' anti-affinity). Resource fit (with the
``pods`` slot) is checked by the actions against FutureIdle, as Volcano's allocate does.

Anti-affinity conflicts may be resolvable: kube-scheduler's InterPodAffinity filter reports them
as Unschedulable (evicting the other pod resolves them), pod affinity and the node filters as
UnschedulableAndUnresolvable, and preempt/reclaim keep only nodes without the latter
(Session.predicate_for_preempt). Here a conflict counts as resolvable only when every pod in the
way runs at a lower pod priority than the newcomer, the pods kube-scheduler's preemption may
take. A pod evicted in this session no longer counts for pod
(anti-)affinity, as upstream's deallocate handler removes it from the plugin's node snapshot
(volcano-sh/volcano pkg/scheduler/plugins/predicates/predicates.go); a pod already terminating
when the session opened still counts, like any pod on the node.

A node whose kubelet refused the job's pod lately (TaskInfo.avoid_nodes, the shell's backoff)
is filtered out until the time given, like a cordon: the job waits for it rather than never
runs, and no eviction makes it fit sooner. Upstream has no such filter: kube-scheduler backs
off the pod, not the node (pkg/scheduler/backend/queue), and Volcano re-binds a pod the kubelet
refused wherever it fits.

Node-only filters depend on the node and the task's scheduling signature alone, so their result
is cached per (signature, node): identical pods of a large job pay for them once.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from scheduler.core.hooks import EventHandler, FitError
from scheduler.core.session import Session
from scheduler.core.state import Node, Task
from scheduler.core.types import OCCUPYING_STATUSES, TaskStatus, Toleration

PLUGIN_NAME = "predicates"
_HOLDING = OCCUPYING_STATUSES | {TaskStatus.PIPELINED}
_EVICTABLE = frozenset({TaskStatus.RUNNING, TaskStatus.BOUND})
_UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
NODE_AVOIDED = "node refused this job's pod recently; it may be tried again at {at}"


def build(arguments: dict[str, Any]) -> PredicatesPlugin:
    return PredicatesPlugin()


def _signature(task: Task) -> tuple[object, ...]:
    info = task.info
    return (
        info.node_selector,
        info.tolerations,
        repr(_node_affinity(info.affinity)),
        info.avoid_nodes,
    )


def _utc_clock(seconds: float) -> str:
    """HH:MM:SS UTC of a time in seconds since 1970 (UTC days have 86,400 seconds)."""
    minutes, second = divmod(int(seconds) % 86400, 60)
    return f"{minutes // 60:02d}:{minutes % 60:02d}:{second:02d} UTC"


def _avoided_until(avoid: tuple[tuple[str, float], ...], node: str) -> float | None:
    for name, until in avoid:
        if name == node:
            return until
    return None


def _node_affinity(affinity: Any) -> Any:
    if not isinstance(affinity, dict):
        return None
    node = affinity.get("nodeAffinity") or {}
    return node.get("requiredDuringSchedulingIgnoredDuringExecution")


def match_expression(labels: dict[str, str], expr: dict[str, Any]) -> bool:
    key, operator = expr.get("key", ""), expr.get("operator", "In")
    values = expr.get("values") or []
    if operator == "In":
        return key in labels and labels[key] in values
    if operator == "NotIn":
        return labels.get(key) not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    if operator in ("Gt", "Lt") and key in labels and values:
        try:
            left, right = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return left > right if operator == "Gt" else left < right
    return False


def match_label_selector(labels: dict[str, str], selector: dict[str, Any] | None) -> bool:
    if not selector:
        return False  # a nil selector matches nothing in pod affinity terms
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    return all(match_expression(labels, e) for e in selector.get("matchExpressions") or [])


def node_selector_terms(affinity: Any) -> list[dict[str, Any]]:
    """The nodeSelectorTerms of a pod's required node affinity ([] when it states none)."""
    required = _node_affinity(affinity)
    return list((required or {}).get("nodeSelectorTerms") or [])


def node_affinity_matches(affinity: Any, labels: dict[str, str]) -> bool:
    """Required node affinity: some nodeSelectorTerm whose expressions all match the labels
    (none stated: every node)."""
    terms = node_selector_terms(affinity)
    return not terms or any(
        all(match_expression(labels, e) for e in term.get("matchExpressions") or [])
        for term in terms
    )


def _tolerated(tolerations: tuple[Toleration, ...], taint: Any) -> bool:
    return any(t.tolerates(taint) for t in tolerations)


def _pod_terms(affinity: Any, kind: str) -> list[dict[Any, Any]]:
    if not isinstance(affinity, dict):
        return []
    section = affinity.get(kind) or {}
    return list(section.get("requiredDuringSchedulingIgnoredDuringExecution") or [])


class PredicatesPlugin:
    name = PLUGIN_NAME

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        self.cache: dict[tuple[object, ...], FitError | None] = {}
        # Only pods that carry anti-affinity can reject a newcomer; usually there are none.
        self.anti_affine = []
        for task in ssn.tasks.values():
            info = task.info
            if info.affinity and _pod_terms(info.affinity, "podAntiAffinity"):
                self.anti_affine.append(task)
            if info.avoid_nodes:
                # Judged by its own nodes: no node class or signature may answer for it.
                ssn.unique_predicates.add(info.name)
        # Pods this session evicted (a discarded eviction brings its pod back).
        self.evicted: set[str] = set()
        ssn.add_predicate_fn(
            self.name,
            self.predicate,
            reads_pods=bool(self.anti_affine),
            lasting=self.lasting_misfit,
        )
        ssn.add_event_handler(EventHandler(self._on_allocate, self._on_deallocate))

    def _on_allocate(self, task: Task) -> None:
        self.evicted.discard(task.name)

    def _on_deallocate(self, task: Task) -> None:
        if task.status is TaskStatus.RELEASING:
            self.evicted.add(task.name)

    def predicate(self, task: Task, node: Node) -> FitError | None:
        key = (_signature(task), node.name)
        if key not in self.cache:
            self.cache[key] = self._node_filters(task, node)
        error = self.cache[key]
        if error is not None:
            return error
        return self._pod_affinity(task, node)

    def lasting_misfit(self, task: Task, node: Node) -> FitError | None:
        """The node filters that only a change to the pod or the node's own settings resolves
        (selector, node affinity, taints), not a cordon: an admin uncordons nodes, so a pod
        that fits only cordoned nodes waits rather than never runs."""
        key = (_signature(task), node.name, "lasting")
        if key not in self.cache:
            self.cache[key] = self._node_filters(task, node, cordon=False)
        return self.cache[key]

    def _node_filters(self, task: Task, node: Node, cordon: bool = True) -> FitError | None:
        info = task.info
        if (
            cordon
            and node.info.unschedulable
            and not any(
                t.key == _UNSCHEDULABLE_TAINT or (not t.key and t.operator == "Exists")
                for t in info.tolerations
            )
        ):
            return FitError("node is unschedulable", resolvable=False)
        if (
            cordon
            and info.avoid_nodes
            and (until := _avoided_until(info.avoid_nodes, node.name)) is not None
        ):
            return FitError(NODE_AVOIDED.format(at=_utc_clock(until)), resolvable=False)
        labels = node.labels
        for key, value in info.node_selector:
            if labels.get(key) != value:
                selector = ",".join(f"{k}={v}" for k, v in info.node_selector)
                return FitError(f"node selector {selector} does not match", resolvable=False)
        if not node_affinity_matches(info.affinity, labels):
            return FitError("node affinity does not match", resolvable=False)
        for taint in node.info.taints:
            if taint.effect in ("NoSchedule", "NoExecute") and not _tolerated(
                info.tolerations, taint
            ):
                return FitError(f"untolerated taint {taint.key}", resolvable=False)
        return None

    def _pod_affinity(self, task: Task, node: Node) -> FitError | None:
        affinity = task.info.affinity
        anti_terms = _pod_terms(affinity, "podAntiAffinity")
        affinity_terms = _pod_terms(affinity, "podAffinity")
        own_labels = dict(task.info.labels)
        blockers = [
            other
            for term in anti_terms
            for other in self._pods_in_domain(node, term.get("topologyKey", ""))
            if other is not task
            and match_label_selector(dict(other.info.labels), term.get("labelSelector"))
        ]
        reason = "pod anti-affinity rules do not match"
        # Symmetry: running pods whose anti-affinity rejects this pod.
        if not blockers:
            reason = "existing pods' anti-affinity rules do not match"
            for other in self.anti_affine:
                other_node = self.ssn.nodes.get(other.node) if other.node else None
                if (
                    other is task
                    or other.status not in _HOLDING
                    or other_node is None
                    or other.name in self.evicted
                ):
                    continue
                for term in _pod_terms(other.info.affinity, "podAntiAffinity"):
                    key = term.get("topologyKey", "")
                    if (
                        key in node.labels
                        and other_node.labels.get(key) == node.labels[key]
                        and match_label_selector(own_labels, term.get("labelSelector"))
                    ):
                        blockers.append(other)
                        break
        if blockers:
            # Evicting resolves the conflict only when every pod in the way may be evicted for
            # this one: running, and of a lower pod priority (kube-scheduler's preemption picks
            # its potential victims among lower-priority pods only, DefaultPreemption
            # SelectVictimsOnNode).
            resolvable = all(
                other.status in _EVICTABLE and other.priority < task.priority for other in blockers
            )
            return FitError(reason, resolvable=resolvable)
        for term in affinity_terms:
            key = term.get("topologyKey", "")
            selector = term.get("labelSelector")
            if any(
                other is not task and match_label_selector(dict(other.info.labels), selector)
                for other in self._pods_in_domain(node, key)
            ):
                continue
            # Kubernetes lets the first pod of a self-matching group start anywhere.
            anywhere = any(
                other is not task
                and other.status in _HOLDING
                and other.name not in self.evicted
                and match_label_selector(dict(other.info.labels), selector)
                for n in self.ssn.node_list
                for other in n.tasks.values()
            )
            if anywhere or not match_label_selector(own_labels, selector):
                return FitError("pod affinity rules do not match", resolvable=False)
        return None

    def _pods_in_domain(self, node: Node, topology_key: str) -> Iterator[Task]:
        if topology_key not in node.labels:
            return
        value = node.labels[topology_key]
        for other_node in self.ssn.node_list:
            if other_node.labels.get(topology_key) != value:
                continue
            for other in other_node.tasks.values():
                if other.status in _HOLDING and other.name not in self.evicted:
                    yield other
