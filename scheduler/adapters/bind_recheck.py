"""The bind pass's last look at the nodes: a gang is bound only where its nodes still have room
in the backend's freshest view, read just before its pods are created.

The cycle decides on the nodes and pods it read in its first phases; another scheduler may
bind a pod onto one of those nodes before the portal binds there, and then only the kubelet's
OutOf<resource> refusal would stop a double booking. kube-scheduler keeps such races out with
its assume cache (pkg/scheduler/backend/cache, every bind is assumed into the one cache the
next decision reads); the portal shares no cache with other schedulers, so it looks again.

Pure: the rooms come from the backend (ClusterBackend.nodes_room), the answer is which jobs'
gangs must not be bound this pass and why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from jobspec.pods import DesiredPod
from scheduler.adapters.cluster.base import NodeRoom, NodeTakenError

WORDS = (
    "{free} of {allocatable} {resource} free, {needed} needed (other workloads' pods hold "
    "{others}, the portal's {portal}{earlier})"
)
EARLIER = ", gangs bound before it this pass {reserved}"


def checked(resource: str, room: NodeRoom) -> bool:
    """The resources the recheck compares: the extended ones (a GPU, a share of one) that the
    node advertises. The kubelet, too, ignores an extended resource its node does not
    advertise (pkg/kubelet/lifecycle/predicate.go, removeMissingExtendedResources); cpu and
    memory are the cycle's view's alone."""
    return "/" in resource and resource in room.allocatable


def gangs_taken(
    gangs: Mapping[str, Sequence[DesiredPod]], rooms: Mapping[str, NodeRoom]
) -> dict[str, NodeTakenError]:
    """job id -> why its gang must not be bound now, for each gang (`gangs`: job id -> its pods
    to bind this pass, none bound yet) that one of its nodes has no room for. The gangs that
    fit are reserved in job order, so two gangs never both count on a node's last GPUs. A node
    without a room (unknown to the backend) is not rechecked."""
    left: dict[str, dict[str, int]] = {}  # node -> resource -> free after the gangs so far
    taken: dict[str, NodeTakenError] = {}
    for job in sorted(gangs):
        needs: dict[str, dict[str, int]] = {}
        first: dict[str, DesiredPod] = {}
        for pod in gangs[job]:
            room = rooms.get(pod.node_name)
            if room is None:
                continue
            first.setdefault(pod.node_name, pod)
            need = needs.setdefault(pod.node_name, {})
            for resource, amount in pod.requests.items():
                if checked(resource, room) and amount > 0:
                    need[resource] = need.get(resource, 0) + amount
        error = _short(needs, rooms, left, first)
        if error is not None:
            taken[job] = error
            continue
        for node, need in needs.items():
            free = left.setdefault(node, {})
            for resource, amount in need.items():
                free[resource] = free.get(resource, rooms[node].free(resource)) - amount
    return taken


def _short(
    needs: dict[str, dict[str, int]],
    rooms: Mapping[str, NodeRoom],
    left: dict[str, dict[str, int]],
    first: dict[str, DesiredPod],
) -> NodeTakenError | None:
    """The first node (by name) one of whose resources falls short of the gang's need there."""
    for node in sorted(needs):
        room = rooms[node]
        for resource in sorted(needs[node]):
            free = left.get(node, {}).get(resource, room.free(resource))
            needed = needs[node][resource]
            if needed <= free:
                continue
            reserved = room.free(resource) - free
            words = WORDS.format(
                free=max(free, 0),
                allocatable=room.allocatable.get(resource, 0),
                resource=resource,
                needed=needed,
                others=room.used_by_others.get(resource, 0),
                portal=room.used_by_portal.get(resource, 0),
                earlier=EARLIER.format(reserved=reserved) if reserved else "",
            )
            return NodeTakenError(node, first[node].name, words, namespace=first[node].namespace)
    return None
