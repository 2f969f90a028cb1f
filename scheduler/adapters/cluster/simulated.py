"""The simulated cluster: the embedded default, so every feature can be seen on a laptop.

Nodes are the portal's Node inventory (seeded from a YAML file, editable in the admin). Pods are
SimulatedPod rows, so every worker process sees the same cluster. Each observation plays the
kubelet's part: a pending pod starts running, a running pod succeeds once its run time is over,
and a pod whose deletion was requested disappears when its grace period ends (until then it
still holds its node's resources, like a terminating pod).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from jobspec.labels import is_managed, replica_key
from jobspec.pods import RUN_SECONDS, DesiredPod
from jobspec.podspec import pod_spec_body
from scheduler.adapters.bulk import rows_insert
from scheduler.adapters.cluster.base import (
    FINISHED_PHASES,
    ClusterError,
    NameTakenError,
    NodeRoom,
    ObservedNode,
    ObservedPod,
    PodEvent,
    PodLog,
    create_each,
)
from scheduler.adapters.portal_port import GPU_MODEL_LABEL, Node, SimulatedPod, node_seen_mark

BATCH = 1000


class SimulatedBackend:
    # Its nodes are the Node rows themselves (the inventory), read anew each time; its pods
    # are all it makes.
    lists_cluster_nodes = False
    makes_job_objects = False
    cache = None

    def __init__(
        self,
        *,
        default_run_seconds: int,
        now: Callable[[], datetime] = timezone.now,
    ) -> None:
        self._default_run_seconds = default_run_seconds
        self._now = now

    def list_nodes(self) -> list[ObservedNode]:
        return [node_observed(node) for node in Node.objects.order_by("name")]

    def list_pods(self) -> list[ObservedPod]:
        self.advance()
        # Plain rows: every cycle lists every pod, and model instances cost several times more.
        rows = SimulatedPod.objects.order_by("namespace", "name").values_list(*_POD_COLUMNS)
        return [_observed(*row) for row in rows if is_managed(row[_LABELS])]

    def nodes_room(
        self, names: Sequence[str], ignore: Collection[tuple[str, str]] = ()
    ) -> dict[str, NodeRoom]:
        """The Node rows as now (their inventory, what the admin says others hold), less the
        unfinished pods on them: the portal's, and any other SimulatedPod (another
        workload's, made by hand or by a test); two queries."""
        rooms = {
            node.name: NodeRoom(
                allocatable=node_observed(node).allocatable,
                used_by_others=dict(node.used_by_others or {}),
            )
            for node in Node.objects.filter(name__in=names)
        }
        pods = (
            SimulatedPod.objects.filter(node_name__in=list(rooms))
            .exclude(phase__in=FINISHED_PHASES)
            .values_list("namespace", "name", "node_name", "labels", "requests")
        )
        skipped = set(ignore)
        for namespace, name, node_name, labels, requests in pods:
            if (namespace, name) in skipped:
                continue
            room = rooms[node_name]
            held = room.used_by_portal if is_managed(labels) else room.used_by_others
            for resource, amount in (requests or {}).items():
                held[resource] = held.get(resource, 0) + int(amount)
        return rooms

    def owners_deleted(self) -> dict[str, str]:
        """The simulation makes no owner objects, so none can be deleted under it."""
        return {}

    def namespaces_missing(self, names: Iterable[str]) -> set[str]:
        """Every namespace exists in the simulation."""
        return set()

    def namespaces_refusing(self) -> set[str]:
        return set()

    def namespace_labels(self, names: Iterable[str]) -> dict[str, dict[str, str]]:
        """The simulation's namespaces carry no labels: nothing admits or refuses its pods."""
        return {}

    def create_pod(self, pod: DesiredPod) -> None:
        existing = SimulatedPod.objects.filter(name=pod.name, namespace=pod.namespace).first()
        if existing is not None:
            if replica_key(existing.labels) != replica_key(pod.labels):
                raise NameTakenError(f"pod {pod.name} already exists for another replica")
            return
        self._new_pod(pod).save(force_insert=True)

    def pod_log(self, name: str, namespace: str, tail: int) -> PodLog:
        """Lines the simulation writes for a pod: what it would run (image, command, the
        environment its plugins gave it, references shown as references) and what became of
        it, since a simulated pod runs nothing."""
        self.advance()
        pod = SimulatedPod.objects.filter(name=name, namespace=namespace).first()
        if pod is None:
            return PodLog(pod=name, lines=[])
        lines = [f"[simulated] pod {name} created on node {pod.node_name} at "
                 f"{pod.created_at:%Y-%m-%dT%H:%M:%SZ}"]  # fmt: skip
        for container in pod.spec.get("containers", []):
            command, args = container.get("command", []), container.get("args", [])
            run = " ".join(command) if command else "the image's entrypoint"
            if args:
                run += f" with arguments {' '.join(args)}"
            lines.append(
                f"[simulated] container {container.get('name')}: image "
                f"{container.get('image')}, runs {run}"
            )
            for item in container.get("env", []):
                value = item.get("value") if "value" in item else _reference(item.get("valueFrom"))
                lines.append(f"[simulated]   {item.get('name')}={value}")
        if pod.started_at is not None:
            lines.append(f"[simulated] running since {pod.started_at:%Y-%m-%dT%H:%M:%SZ}")
        if pod.phase in FINISHED_PHASES:
            lines.append(f"[simulated] {pod.phase.lower()}, exit code {pod.exit_code}")
        observed = _observed(*(getattr(pod, column) for column in _POD_COLUMNS))
        return PodLog(
            pod=name,
            lines=lines[-tail:],
            phase=pod.phase,
            exit_code=observed.exit_code,
            reason=observed.reason,
        )

    def create_pods(self, pods: Sequence[DesiredPod]) -> list[Exception | None]:
        """create_pod for many pods, in two queries per BATCH pods: which names exist, then one
        insert of the new ones."""
        outcomes: list[Exception | None] = []
        for start in range(0, len(pods), BATCH):
            outcomes.extend(self._create_batch(pods[start : start + BATCH]))
        return outcomes

    def _create_batch(self, pods: Sequence[DesiredPod]) -> list[Exception | None]:
        taken = {
            name: (namespace, replica_key(labels))
            for name, namespace, labels in SimulatedPod.objects.filter(
                name__in={pod.name for pod in pods}
            ).values_list("name", "namespace", "labels")
        }
        outcomes: list[Exception | None] = []
        new: list[SimulatedPod] = []
        for pod in pods:
            holder = taken.get(pod.name)
            if holder is None:
                taken[pod.name] = (pod.namespace, replica_key(pod.labels))
                new.append(self._new_pod(pod))
                outcomes.append(None)
            elif holder[0] != pod.namespace:
                outcomes.append(NameTakenError(f"pod name {pod.name} is taken in {holder[0]}"))
            elif holder[1] == replica_key(pod.labels):
                outcomes.append(None)  # already there: success, as in create_pod
            else:
                outcomes.append(
                    NameTakenError(f"pod {pod.name} already exists for another replica")
                )
        try:
            with transaction.atomic():
                rows_insert(SimulatedPod, new)
        except IntegrityError:
            # Someone created one of these names since the read: sort it out pod by pod.
            return create_each(self, pods)
        return outcomes

    def _new_pod(self, pod: DesiredPod) -> SimulatedPod:
        run_seconds = int(pod.annotations.get(RUN_SECONDS) or self._default_run_seconds)
        return SimulatedPod(
            name=pod.name,
            namespace=pod.namespace,
            node_name=pod.node_name,
            labels=dict(pod.labels),
            annotations=dict(pod.annotations),
            requests=dict(pod.requests),
            phase="Pending",
            run_seconds=run_seconds,
            spec=pod_spec_body(pod, (name for name in pod.requests if name.endswith("/gpu"))),
        )

    def delete_pod(self, name: str, namespace: str, grace_seconds: int) -> None:
        now = self._now()
        pod = SimulatedPod.objects.filter(name=name, namespace=namespace).first()
        if pod is None or pod.delete_after is not None:
            return
        if grace_seconds <= 0 or pod.phase in FINISHED_PHASES:
            pod.delete()
            return
        pod.delete_after = now + timedelta(seconds=grace_seconds)
        pod.save(update_fields=["delete_after"])

    def bind_pod(self, name: str, namespace: str, node_name: str) -> None:
        if (error := self.bind_pods([(name, namespace, node_name)])[0]) is not None:
            raise error

    def bind_pods(self, pods: Sequence[tuple[str, str, str]]) -> list[Exception | None]:
        """Simulated pods are created on their node (there is no other scheduler to keep
        away) and start at the next observation, after the whole gang was created: binding
        only checks that each pod is there, in one query per BATCH."""
        outcomes: list[Exception | None] = []
        for start in range(0, len(pods), BATCH):
            chunk = pods[start : start + BATCH]
            there = set(
                SimulatedPod.objects.filter(name__in={name for name, _, _ in chunk}).values_list(
                    "name", "namespace", "node_name"
                )
            )
            outcomes.extend(
                None if pod in there else ClusterError(f"bind pod {pod[1]}/{pod[0]}: not found")
                for pod in chunk
            )
        return outcomes

    def delete_pods(
        self, pods: Sequence[tuple[str, str]], grace_seconds: int
    ) -> list[Exception | None]:
        """delete_pod for many (name, namespace) pairs, in at most three queries per BATCH."""
        now = self._now()
        for start in range(0, len(pods), BATCH):
            wanted = set(pods[start : start + BATCH])
            rows = SimulatedPod.objects.filter(
                name__in={name for name, _ in wanted}, delete_after__isnull=True
            ).values_list("pk", "name", "namespace", "phase")
            gone, graceful = [], []
            for pk, name, namespace, phase in rows:
                if (name, namespace) not in wanted:
                    continue
                if grace_seconds <= 0 or phase in FINISHED_PHASES:
                    gone.append(pk)
                else:
                    graceful.append(pk)
            with transaction.atomic():
                SimulatedPod.objects.filter(pk__in=gone).delete()
                SimulatedPod.objects.filter(pk__in=graceful).update(
                    delete_after=now + timedelta(seconds=grace_seconds)
                )
        return [None] * len(pods)

    def annotate_pod(self, name: str, namespace: str, annotations: Mapping[str, str]) -> None:
        with transaction.atomic():
            pod = (
                SimulatedPod.objects.select_for_update()
                .filter(name=name, namespace=namespace)
                .first()
            )
            if pod is None:
                return
            pod.annotations = {**pod.annotations, **annotations}
            pod.save(update_fields=["annotations"])

    def record_events(self, events: Sequence[PodEvent]) -> None:
        """The simulation keeps no Kubernetes Events: the portal's own pages tell the story."""

    def sweep_job_objects(
        self, keep: set[tuple[str, str, str]], wanted: Sequence[tuple[str, dict[str, Any]]] = ()
    ) -> list[str]:
        """The simulation makes no job objects (Services, ConfigMaps, ...): nothing to sweep."""
        return []

    @transaction.atomic
    def advance(self) -> None:
        """One kubelet tick: start pending pods, finish those whose time is up, drop deleted.
        A pending pod with a reason cannot start (an image it cannot pull): it stays pending."""
        now = self._now()
        SimulatedPod.objects.filter(delete_after__lte=now).delete()
        SimulatedPod.objects.filter(phase="Pending", delete_after__isnull=True, reason="").update(
            phase="Running", started_at=now
        )
        finished = [
            pk
            for pk, started_at, run_seconds in SimulatedPod.objects.filter(
                phase="Running", delete_after__isnull=True
            )
            .exclude(run_seconds__isnull=True)
            .values_list("pk", "started_at", "run_seconds")
            if started_at + timedelta(seconds=run_seconds) <= now
        ]
        SimulatedPod.objects.filter(pk__in=finished).update(phase="Succeeded", exit_code=0)
        node_seen_mark(at=now)  # every simulated node's kubelet reports on every tick


def node_observed(node: Node) -> ObservedNode:
    labels = {**node.labels, **node.topology_labels}
    if node.gpu_model:
        labels.setdefault(GPU_MODEL_LABEL, node.gpu_model)
    return ObservedNode(
        name=node.name,
        allocatable={
            "cpu": node.cpu_millis,
            "memory": node.memory_bytes,
            node.gpu_resource_name: node.gpu_count,
            "pods": node.pods_capacity,
        },
        labels=labels,
        unschedulable=not node.schedulable,
    )


_POD_COLUMNS = (
    "name",
    "namespace",
    "node_name",
    "phase",
    "labels",
    "annotations",
    "delete_after",
    "exit_code",
    "reason",
)
_LABELS = _POD_COLUMNS.index("labels")


def _observed(
    name: str,
    namespace: str,
    node_name: str,
    phase: str,
    labels: dict[str, str],
    annotations: dict[str, str],
    delete_after: datetime | None,
    exit_code: int | None,
    reason: str = "",
) -> ObservedPod:
    return ObservedPod(
        name=name,
        namespace=namespace,
        node_name=node_name,
        phase=phase,
        labels=dict(labels),
        annotations=dict(annotations),
        deletion_requested=delete_after is not None,
        exit_code=exit_code,
        # As the kubelet words an evicted pod or a terminated container (OOMKilled, ...).
        reason=reason or ("Completed" if phase == "Succeeded" else None),
    )


# An env value a pod reads from elsewhere, as Kubernetes names its sources (EnvVarSource).
_REFERENCE_KINDS = {"configMapKeyRef": "ConfigMap", "secretKeyRef": "Secret"}


def _reference(value_from: object) -> str:
    """Where an env value comes from, in words ("(from ConfigMap gp-7-svc, key hosts)"), not
    the reference's Python text: the simulation does not resolve it."""
    if isinstance(value_from, dict):
        for field, kind in _REFERENCE_KINDS.items():
            ref = value_from.get(field)
            if isinstance(ref, dict):
                return f"(from {kind} {ref.get('name', '?')}, key {ref.get('key', '?')})"
        if isinstance(field_ref := value_from.get("fieldRef"), dict):
            return f"(from the pod's field {field_ref.get('fieldPath', '?')})"
        if isinstance(resource := value_from.get("resourceFieldRef"), dict):
            return f"(from the container's {resource.get('resource', '?')})"
    return "(from a reference)"
