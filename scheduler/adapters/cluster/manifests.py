"""Pure translation between our pod/node snapshots and the official client's V1 models.

No I/O here: the backend module calls the API, these functions only build and read objects,
so the mapping is tested without a server.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from decimal import ROUND_CEILING, Decimal
from typing import Any

from kubernetes import client
from kubernetes.utils import parse_quantity

from jobspec.gpushare import CARD_CORES, CARD_MIB
from jobspec.pods import DesiredPod, pod_object
from jobspec.podspec import CONTAINER_NAME
from scheduler.adapters.cluster.base import ObservedNode, ObservedPod
from scheduler.adapters.cluster.gpushare import (
    REGISTER_ANNOTATION,
    held_cards,
    vgpu_count_name,
)

_PHASES = {"Pending", "Running", "Succeeded", "Failed", "Unknown"}
_API = client.ApiClient()


def pod_manifest(
    desired: DesiredPod, gpu_resource_names: Iterable[str], scheduler_name: str
) -> client.V1Pod:
    """The unbound pod to create (jobspec.pods.pod_object) as the client's V1Pod."""
    return model_from_wire(pod_object(desired, gpu_resource_names, scheduler_name), "V1Pod")


def model_from_wire(data: Any, model: str) -> Any:
    """The client's model (`V1PodSpec`, ...) for an object in the API's JSON shape: the
    client's own deserializer, so every camelCase field maps exactly as it does for a response."""
    return _API.deserialize(json.dumps(data), model, "application/json")


def observed_pod_from(pod: client.V1Pod) -> ObservedPod:
    meta = pod.metadata
    status = pod.status
    phase = status.phase if status is not None and status.phase in _PHASES else "Pending"
    exit_code, container_reason, container_message = _containers_outcome(status)
    pod_reason = status.reason if status is not None else None
    pod_message = status.message if status is not None else None
    return ObservedPod(
        name=meta.name,
        namespace=meta.namespace,
        node_name=pod.spec.node_name if pod.spec is not None else None,
        phase=phase,
        labels=dict(meta.labels or {}),
        annotations=dict(meta.annotations or {}),
        deletion_requested=meta.deletion_timestamp is not None,
        exit_code=exit_code,
        # The pod-level reason (Evicted, OutOfgpu, ...) explains more than a container's.
        reason=pod_reason or container_reason,
        message=(pod_message if pod_reason else container_message) or None,
        deletion_deadline=meta.deletion_timestamp,
    )


def observed_node_from(
    node: client.V1Node, used_by_others: Mapping[str, int] | None = None
) -> ObservedNode:
    status = node.status
    allocatable = status.allocatable if status is not None and status.allocatable else {}
    spec = node.spec
    return ObservedNode(
        name=node.metadata.name,
        allocatable=parse_resources(allocatable),
        labels=dict(node.metadata.labels or {}),
        unschedulable=bool(spec.unschedulable) if spec is not None else False,
        taints=[_taint_dict(t) for t in (spec.taints or [])] if spec is not None else [],
        ready=node_ready(node),
        used_by_others=dict(used_by_others or {}),
        annotations={
            key: value
            for key, value in (node.metadata.annotations or {}).items()
            if key in REGISTER_ANNOTATION.values()
        },
    )


def nodes_observed(
    nodes: Iterable[client.V1Node],
    pods: Iterable[client.V1Pod],
    owns: Callable[[Mapping[str, str]], bool],
) -> list[ObservedNode]:
    """The cluster's nodes as the snapshot needs them, from every node and every pod of the
    cluster (any namespace): what pods the portal does not own (`owns(labels)` is False) hold
    on each node is taken off that node's idle. One translation for the list path and the
    watch cache alike."""
    usage = usage_by_others(pods, owns)
    return sorted(
        (observed_node_from(node, usage.get(node.metadata.name)) for node in nodes),
        key=lambda n: n.name,
    )


def node_ready(node: client.V1Node) -> bool:
    """The Ready condition is True. A node that reports no Ready condition has not been
    heard from; like kube-scheduler and Volcano, nothing is placed there until it has."""
    conditions = (node.status.conditions if node.status is not None else None) or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def usage_by_others(
    pods: Iterable[client.V1Pod], owns: Callable[[Mapping[str, str]], bool]
) -> dict[str, dict[str, int]]:
    """node name -> summed requests of the pods on it that the portal does not own."""
    usage: dict[str, dict[str, int]] = {}
    for pod in pods:
        if not occupies_node(pod) or owns(pod.metadata.labels or {}):
            continue
        held = usage.setdefault(pod.spec.node_name, {})
        for name, amount in others_usage(pod).items():
            held[name] = held.get(name, 0) + amount
    return usage


def others_usage(pod: client.V1Pod) -> dict[str, int]:
    """What another workload's pod holds on its node: its requests, and for a pod whose GPU
    sharing stack (HAMi, Volcano's vGPU) names its cards, each card's cores and memory in
    their place of its vGPU count (a vGPU is a share of a card, not a card): the portal then
    keeps its own shares off the cards others fill, and counts those by what they hold."""
    requests = pod_requests(pod)
    annotations = pod.metadata.annotations if pod.metadata is not None else None
    cards = held_cards(annotations)
    if not cards:
        return requests
    requests.pop(vgpu_count_name(annotations), None)
    for uuid, (cores, memory) in cards.items():
        requests[CARD_CORES + uuid] = cores
        requests[CARD_MIB + uuid] = memory
    return requests


def occupies_node(pod: client.V1Pod) -> bool:
    """Bound and not finished: a terminating pod still holds its requests until it is gone,
    and a Succeeded or Failed one holds nothing (kube-scheduler counts the same pods)."""
    if pod.spec is None or not pod.spec.node_name:
        return False
    phase = pod.status.phase if pod.status is not None else None
    return phase not in ("Succeeded", "Failed")


def pod_requests(pod: client.V1Pod) -> dict[str, int]:
    """The pod's effective requests, as the kubelet admits it and kube-scheduler counts it:
    per resource the larger of the containers' sum and the largest init container, plus the
    pod overhead; one "pods" slot. A limit stands in for an absent request (Kubernetes
    defaults a container's requests to its limits)."""
    spec = pod.spec
    total: dict[str, int] = {}
    for container in spec.containers or []:
        for name, amount in _container_requests(container).items():
            total[name] = total.get(name, 0) + amount
    for container in spec.init_containers or []:
        for name, amount in _container_requests(container).items():
            total[name] = max(total.get(name, 0), amount)
    for name, amount in parse_resources(spec.overhead or {}).items():
        total[name] = total.get(name, 0) + amount
    total["pods"] = 1
    return total


def _container_requests(container: client.V1Container) -> dict[str, int]:
    resources = container.resources
    if resources is None:
        return {}
    quantities = dict(resources.limits or {})
    quantities.update(resources.requests or {})
    return parse_resources(quantities)


def parse_resources(quantities: Mapping[str, str]) -> dict[str, int]:
    """cpu -> millicores, everything else -> integer units (bytes for memory). Rounded up,
    because a fraction of a unit the node reports is still usable by nobody but the node."""
    parsed: dict[str, int] = {}
    for name, text in quantities.items():
        value = Decimal(parse_quantity(text))
        if name == "cpu":
            value *= 1000
        parsed[name] = int(value.to_integral_value(rounding=ROUND_CEILING))
    return parsed


# What an init container waits on while it is fine: its own turn to start.
_INIT_WAITING_FINE = frozenset({"PodInitializing", "ContainerCreating"})


def _containers_outcome(status: Any) -> tuple[int | None, str | None, str | None]:
    """(exit code, reason, message) of the first init container that is stuck or failed (an
    image it cannot pull, a nonzero exit: the main container then only says PodInitializing),
    else of the main container (else the first)."""
    for init in (status.init_container_statuses if status is not None else None) or []:
        state = init.state
        if state is None:
            continue
        where = f"init container {init.name}"
        if state.waiting is not None and state.waiting.reason not in _INIT_WAITING_FINE:
            message = state.waiting.message
            return None, state.waiting.reason, f"{where}: {message}" if message else where
        failed = state.terminated
        if failed is not None and failed.exit_code:
            message = failed.message or f"exit code {failed.exit_code}"
            return failed.exit_code, failed.reason or "Error", f"{where}: {message}"
    return _main_container_outcome(status)


def _main_container_outcome(status: Any) -> tuple[int | None, str | None, str | None]:
    """(exit code, reason, message) of the main container (else the first)."""
    statuses = (status.container_statuses if status is not None else None) or []
    ours = [s for s in statuses if s.name == CONTAINER_NAME] or statuses[:1]
    if not ours or ours[0].state is None:
        return None, None, None
    state = ours[0].state
    if state.terminated is not None:
        return state.terminated.exit_code, state.terminated.reason, state.terminated.message
    if state.waiting is not None:
        return None, state.waiting.reason, state.waiting.message
    return None, None, None


def _taint_dict(taint: client.V1Taint) -> dict[str, str]:
    taint_dict = {"key": taint.key, "effect": taint.effect}
    if taint.value is not None:
        taint_dict["value"] = taint.value
    return taint_dict
