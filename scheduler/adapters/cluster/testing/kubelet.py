"""What a node agent does with a pod bound to its node, as data: one set of rules for the
emulated API server (store.ApiStore) and for the fake kubelet that drives pods on the local
real control plane (fake_kubelet.py), so both clusters start, refuse and end pods alike.

A kubelet here:
- admits a pod once, refusing it when the node's allocatable minus what its admitted,
  unfinished pods request does not cover it (phase Failed, reason OutOf<resource>, as
  predicates.GeneralPredicates at kubelet admission), or when the test broke the node's devices
  (`admission_failures`);
- reports image pull failures on demand (ErrImagePull, then ImagePullBackOff), of an init
  container's image as of a main container's (the init container's status says so, the
  others wait on PodInitializing);
- moves an admitted pod Pending -> Running after `start_seconds` (ContainerCreating before),
  and Running -> Succeeded after N seconds when its main container runs `sleep N`.

No I/O, no clock: the caller passes `now` (seconds since the epoch) and applies the status
writes `kubelet_step` returns, in order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import ROUND_CEILING, Decimal
from typing import Any

from kubernetes.utils import parse_quantity

Raw = dict[str, Any]
FINISHED_PHASES = frozenset({"Succeeded", "Failed"})


@dataclass
class Kubelet:
    """What the node agents do, cluster-wide. Seconds are the caller's clock."""

    start_seconds: float = 0.0  # ContainerCreating -> Running
    honour_sigterm: bool = True  # False: a deleted pod lasts its whole grace period
    image_pull_failures: set[str] = field(default_factory=set)
    # node -> resource its kubelet refuses to admit (a device plugin whose devices went
    # unhealthy after the node reported them allocatable): OutOf<resource>.
    admission_failures: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class KubeletStep:
    """The status writes a kubelet makes now (each merged into the pod's status, in order),
    whether the pod is admitted, its image pull attempts so far, and whether the kubelet has
    nothing more to do with it."""

    writes: tuple[Raw, ...] = ()
    admitted: bool = False
    pull_attempts: int = 0
    done: bool = False


def kubelet_step(
    pod: Raw,
    node: Raw,
    *,
    now: float,
    kubelet: Kubelet,
    admitted: bool,
    pull_attempts: int,
    node_usage: Callable[[], Mapping[str, int]],
) -> KubeletStep:
    """The next thing the kubelet of `node` does with bound `pod` at `now`. `node_usage`
    gives what the node's other admitted, unfinished pods request (asked only before
    admission)."""
    status = pod.get("status") or {}
    phase = status.get("phase")
    if phase in FINISHED_PHASES:
        return KubeletStep(admitted=admitted, pull_attempts=pull_attempts, done=True)
    if not admitted:
        refused = admission_refusal(pod, node, node_usage(), kubelet)
        if refused:
            resource, message = refused
            failed = {"phase": "Failed", "reason": f"OutOf{resource}", "message": message}
            return KubeletStep(writes=(failed,), done=True)
        admitted = True
    if failing := _failing_pull(pod, kubelet):
        attempts = pull_attempts + 1
        return KubeletStep(
            writes=(_pull_failed(pod, *failing, attempts),),
            admitted=True,
            pull_attempts=attempts,
        )
    if phase == "Pending":
        return _start(pod, status, now, kubelet, pull_attempts)
    if phase == "Running":
        run_seconds = sleep_seconds(pod)
        if run_seconds is None:
            return KubeletStep(admitted=True, pull_attempts=pull_attempts, done=True)
        running = container_state(pod).get("running") or {}
        began = parse_time(running.get("startedAt") or timestamp(now))
        if now >= began + run_seconds:
            return KubeletStep(
                writes=(finished_status(pod, now, exit_code=0),),
                admitted=True,
                pull_attempts=pull_attempts,
                done=True,
            )
    return KubeletStep(admitted=True, pull_attempts=pull_attempts)


def _failing_pull(pod: Raw, kubelet: Kubelet) -> tuple[str, str] | None:
    """("init" | "main", image) of the first container whose image cannot be pulled."""
    spec = pod.get("spec") or {}
    for which, key in (("init", "initContainers"), ("main", "containers")):
        for container in spec.get(key) or []:
            if (image := container.get("image", "")) in kubelet.image_pull_failures:
                return which, image
    return None


def _pull_failed(pod: Raw, which: str, image: str, attempts: int) -> Raw:
    reason = "ErrImagePull" if attempts == 1 else "ImagePullBackOff"
    waiting = {"waiting": {"reason": reason, "message": f'Back-off pulling image "{image}"'}}
    if which == "main":
        return {"phase": "Pending", "containerStatuses": container_statuses(pod, waiting)}
    initializing = {"waiting": {"reason": "PodInitializing"}}
    inits = (pod.get("spec") or {}).get("initContainers") or []
    return {
        "phase": "Pending",
        "initContainerStatuses": [
            _status_of(c, waiting if c.get("image") == image else initializing) for c in inits
        ],
        "containerStatuses": container_statuses(pod, initializing),
    }


def _status_of(container: Raw, state: Raw, ready: bool = False) -> Raw:
    return {
        "name": container.get("name", "main"),
        "image": container.get("image", ""),
        "imageID": "",
        "ready": ready,
        "restartCount": 0,
        "state": state,
    }


def _start(pod: Raw, status: Raw, now: float, kubelet: Kubelet, attempts: int) -> KubeletStep:
    writes: list[Raw] = []
    started = status.get("startTime")
    if started is None:
        creating = {"waiting": {"reason": "ContainerCreating"}}
        started = timestamp(now)
        writes.append(
            {"startTime": started, "containerStatuses": container_statuses(pod, creating)}
        )
    if now >= parse_time(started) + kubelet.start_seconds:
        running = {"running": {"startedAt": timestamp(now)}}
        writes.append(
            {
                "phase": "Running",
                "podIP": "10.0.0.1",
                "containerStatuses": container_statuses(pod, running, ready=True),
            }
        )
    return KubeletStep(writes=tuple(writes), admitted=True, pull_attempts=attempts)


def finished_status(pod: Raw, now: float, *, exit_code: int) -> Raw:
    """The status of a pod whose containers all exited with `exit_code`."""
    state = {
        "terminated": {
            "exitCode": exit_code,
            "reason": "Completed" if exit_code == 0 else "Error",
            "finishedAt": timestamp(now),
        }
    }
    phase = "Succeeded" if exit_code == 0 else "Failed"
    return {"phase": phase, "containerStatuses": container_statuses(pod, state)}


def admission_refusal(
    pod: Raw, node: Raw, used: Mapping[str, int], kubelet: Kubelet
) -> tuple[str, str] | None:
    """The kubelet's own fit check (predicates.GeneralPredicates at admission): the node's
    allocatable against what its admitted, unfinished pods (terminating ones included) use."""
    node_name = pod["spec"]["nodeName"]
    refused = kubelet.admission_failures.get(node_name)
    if refused and pod_requests(pod).get(refused):
        return refused, (
            f"Pod was rejected: Node didn't have enough resource: {refused}, devices unhealthy"
        )
    allocatable = parse_resources((node.get("status") or {}).get("allocatable") or {})
    for name, amount in sorted(pod_requests(pod).items()):
        have = allocatable.get(name, 0)
        if amount and used.get(name, 0) + amount > have:
            return name, (
                f"Pod was rejected: Node didn't have enough resource: {name}, "
                f"requested: {amount}, used: {used.get(name, 0)}, capacity: {have}"
            )
    return None


def usage_of(pods: Iterable[Raw]) -> dict[str, int]:
    """What `pods` request together, finished ones left out."""
    used: dict[str, int] = {}
    for pod in pods:
        if (pod.get("status") or {}).get("phase") in FINISHED_PHASES:
            continue
        for name, amount in pod_requests(pod).items():
            used[name] = used.get(name, 0) + amount
    return used


def node_ready(node: Raw) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def pod_requests(pod: Raw) -> dict[str, int]:
    total: dict[str, int] = {"pods": 1}
    for container in (pod.get("spec") or {}).get("containers") or []:
        requests = (container.get("resources") or {}).get("requests") or {}
        for name, amount in parse_resources(requests).items():
            total[name] = total.get(name, 0) + amount
    return total


def parse_resources(quantities: dict[str, Any]) -> dict[str, int]:
    parsed = {}
    for name, text in quantities.items():
        value = Decimal(parse_quantity(str(text)))
        if name == "cpu":
            value *= 1000
        parsed[name] = int(value.to_integral_value(rounding=ROUND_CEILING))
    return parsed


def timestamp(now: float) -> str:
    return datetime.fromtimestamp(now, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str) -> float:
    """RFC 3339 as the API server writes it (`...Z`) or as the client re-serialises it."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def main_container(pod: Raw) -> Raw:
    containers = (pod.get("spec") or {}).get("containers") or [{}]
    return containers[0]


def container_state(pod: Raw) -> Raw:
    statuses = (pod.get("status") or {}).get("containerStatuses") or [{}]
    return statuses[0].get("state") or {}


def container_statuses(pod: Raw, state: Raw, *, ready: bool = False) -> list[Raw]:
    """Every container of the pod in `state`: this kubelet starts and stops them together (the
    first one, the main container, decides the pod's outcome)."""
    containers = (pod.get("spec") or {}).get("containers") or [{}]
    return [_status_of(container, state, ready) for container in containers]


def sleep_seconds(pod: Raw) -> float | None:
    """`sleep N` (command or args) makes the container run N seconds, then succeed."""
    container = main_container(pod)
    words = [*(container.get("command") or []), *(container.get("args") or [])]
    for index, word in enumerate(words[:-1]):
        if word.rsplit("/", 1)[-1] == "sleep":
            try:
                return float(words[index + 1])
            except ValueError:
                return None
    return None
