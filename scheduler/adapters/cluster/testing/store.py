"""The state of an emulated Kubernetes API server: objects, resourceVersions, history, kubelets.

Strict where the portal's correctness depends on the server being strict, as the real one is:
- every write bumps one cluster-wide resourceVersion and is kept in a bounded history, so a watch
  resumes from any resourceVersion still in it and gets 410 Expired for an older one;
- lists honour `limit`/`continue` from a consistent snapshot; a token older than the compacted
  history answers 410 Expired, as etcd compaction does;
- validation a real server does at the door: DNS names, label syntax, namespace matching the
  URL, extended resources with limits equal to requests, immutable pod spec, resourceVersion
  preconditions, binding an assigned or terminating pod (409);
- graceful deletion: a bound pod gets deletionTimestamp and stays Terminating until its kubelet
  confirms (at once, or only when the grace period ends if the containers ignore SIGTERM);
  on a NotReady node it stays Terminating until force-deleted (grace 0);
- a kubelet per Ready node moves bound pods Pending -> Running (-> Succeeded for `sleep N`),
  rejects pods that do not fit what its admitted pods leave (phase Failed, reason OutOf<res>),
  and reports image pull failures on demand (ErrImagePull, then ImagePullBackOff);
- deleting an owner deletes its dependents (ownerReferences by uid), as the garbage collector does;
- pods/log answers a container's output (what `write_log` put there) as text, with `tailLines`
  and `container`, and refuses what the real server refuses: 404 for an unknown pod, 400 for an
  unknown or unnamed container (in a pod of several), one not started yet, one never restarted
  (`previous`), a pod not bound to a node.

Namespaces are objects only once `namespaces_enforced` is set (EmulatedCluster.add_namespace):
then creating into a namespace that does not exist answers 404 as a real server does; until
then any namespace is accepted, so tests that do not care need not create theirs.

- the pod garbage collector deletes the pods of a node gone for ORPHAN_QUARANTINE_SECONDS.

Left out, because nothing here depends on it: a namespace's deletion taking its objects with
it, a default scheduler (pods created without nodeName and never bound stay
Pending), admission webhooks, server-side apply.

No I/O and no asyncio: the HTTP handler (emulator.py) calls it from its event loop and pushes
the events it returns to open watches. Time is `now` (seconds), advanced by the caller.
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
import re
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from scheduler.adapters.cluster.testing.kubelet import (
    Kubelet,
    finished_status,
    kubelet_step,
    main_container,
    node_ready,
    parse_time,
    timestamp,
    usage_of,
)

Raw = dict[str, Any]
Key = tuple[str, str]  # (namespace or "", name)

DEFAULT_GRACE_SECONDS = 30
# The pod garbage collector deletes a pod bound to a node that no longer exists once the node
# has been gone this long (kube-controller-manager's podgc, its quarantine for orphans).
ORPHAN_QUARANTINE_SECONDS = 40
DEFAULT_HISTORY_LIMIT = 200_000
_MAX_LIST_SNAPSHOTS = 64
_NATIVE_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage", "hugepages-2Mi", "pods"})
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
# Pod fields an update may change (k8s.io/kubernetes pkg/apis/core/validation ValidatePodUpdate).
_MUTABLE_POD_SPEC = frozenset({"activeDeadlineSeconds", "tolerations", "schedulingGates"})
KINDS = {
    "pods": "Pod",
    "nodes": "Node",
    "services": "Service",
    "configmaps": "ConfigMap",
    "events": "Event",
    "namespaces": "Namespace",
    "networkpolicies": "NetworkPolicy",
    "secrets": "Secret",
}


class ApiError(Exception):
    """What the real server answers with a Status object: code, reason, message."""

    def __init__(self, code: int, reason: str, message: str, **details: Any) -> None:
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details


@dataclass(frozen=True, slots=True)
class WatchEvent:
    rv: int
    resource: str
    type: str  # ADDED | MODIFIED | DELETED
    object: Raw


@dataclass(slots=True)
class _ListSnapshot:
    rv: int
    items: list[Raw]


class ApiStore:
    def __init__(self, *, now: float = 1_800_000_000.0, history_limit: int = DEFAULT_HISTORY_LIMIT):
        self.now = now
        self.rv = 0
        self.compacted_rv = 0
        self.kubelet = Kubelet()
        self.objects: dict[str, dict[Key, Raw]] = {}
        self.history: deque[WatchEvent] = deque()
        self.history_limit = history_limit
        self._snapshots: dict[int, _ListSnapshot] = {}
        self._snapshot_ids = 0
        self._uids = 0
        self._generated = 0
        # Pods the kubelets still have work on (bound and not started, running with an end
        # time, terminating), and each node's pods: a tick must not walk 100,000 pods.
        self._kubelet_work: set[Key] = set()
        self._pods_by_node: dict[str, set[Key]] = {}
        self._admitted: set[Key] = set()
        self._pull_attempts: dict[Key, int] = {}
        self._dependents: dict[str, set[tuple[str, Key]]] = {}
        # pod -> container -> the lines it wrote (the kubelet's log files): gone with the pod.
        self.logs: dict[Key, dict[str, list[str]]] = {}
        self._nodes_gone: dict[str, float] = {}  # node name -> when it was deleted
        self.listeners: list[Callable[[WatchEvent], None]] = []
        self.namespaces_enforced = False

    # -- generic objects ---------------------------------------------------------------------

    def table(self, resource: str) -> dict[Key, Raw]:
        return self.objects.setdefault(resource, {})

    def get(self, resource: str, namespace: str | None, name: str) -> Raw:
        obj = self.table(resource).get((namespace or "", name))
        if obj is None:
            raise ApiError(
                404, "NotFound", f'{resource} "{name}" not found', name=name, kind=resource
            )
        return obj

    def create(
        self, resource: str, namespace: str | None, body: Any, *, validate: bool = True
    ) -> Raw:
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequest", "the body of the request was not a JSON object")
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        body_ns = meta.get("namespace")
        if namespace and body_ns and body_ns != namespace:
            raise ApiError(
                400,
                "BadRequest",
                "the namespace of the provided object does not "
                "match the namespace sent on the request",
            )
        if namespace:
            meta["namespace"] = namespace
            if self.namespaces_enforced and ("", namespace) not in self.table("namespaces"):
                raise ApiError(
                    404,
                    "NotFound",
                    f'namespaces "{namespace}" not found',
                    name=namespace,
                    kind="namespaces",
                )
        if not meta.get("name") and meta.get("generateName"):
            self._generated += 1
            meta["name"] = f"{meta['generateName']}{self._generated:05x}"
        kind = KINDS.get(resource, resource)
        if validate:
            _validate_meta(resource, kind, meta)
            if resource == "pods":
                _validate_pod_spec(kind, meta["name"], obj.get("spec") or {})
        key = (meta.get("namespace") or "", meta["name"])
        if key in self.table(resource):
            raise ApiError(
                409,
                "AlreadyExists",
                f'{resource} "{meta["name"]}" already exists',
                name=meta["name"],
                kind=resource,
            )
        self._uids += 1
        meta.setdefault("uid", f"00000000-0000-4000-8000-{self._uids:012d}")
        meta.setdefault("creationTimestamp", self.timestamp())
        obj.setdefault("apiVersion", "v1")
        obj.setdefault("kind", kind)
        if resource == "secrets" and obj.get("stringData"):
            # As the API server: stringData is merged into data (base64), never stored as is.
            encoded = {
                k: base64.b64encode(v.encode()).decode() for k, v in obj["stringData"].items()
            }
            obj["data"] = {**(obj.get("data") or {}), **encoded}
            del obj["stringData"]
        if resource == "pods":
            spec = obj.setdefault("spec", {})
            spec.setdefault("schedulerName", "default-scheduler")
            spec.setdefault("terminationGracePeriodSeconds", DEFAULT_GRACE_SECONDS)
            spec.setdefault("restartPolicy", "Always")
            obj.setdefault("status", {}).setdefault("phase", "Pending")
        self._write(resource, key, obj, "ADDED")
        self._track_created(resource, key, obj)
        return obj

    def _track_created(self, resource: str, key: Key, obj: Raw) -> None:
        """What the store indexes about a new object: owners' dependents, a node's return,
        a bound pod's kubelet work."""
        meta, spec = obj["metadata"], obj.get("spec") or {}
        if resource == "nodes":
            self._nodes_gone.pop(meta["name"], None)
        for owner in meta.get("ownerReferences") or []:
            self._dependents.setdefault(owner.get("uid", ""), set()).add((resource, key))
        if resource == "pods" and spec.get("nodeName"):
            self._pods_by_node.setdefault(spec["nodeName"], set()).add(key)
            if obj["status"].get("phase") == "Pending":
                self._kubelet_work.add(key)
            elif obj["status"].get("phase") == "Running":
                self._admitted.add(key)

    def patch(
        self, resource: str, namespace: str | None, name: str, body: Any, *, validate: bool = True
    ) -> Raw:
        if not isinstance(body, dict):
            raise ApiError(415, "UnsupportedMediaType", "only merge patches are emulated")
        current = self.get(resource, namespace, name)
        wanted_rv = (body.get("metadata") or {}).get("resourceVersion")
        if wanted_rv is not None and str(wanted_rv) != current["metadata"]["resourceVersion"]:
            raise ApiError(
                409,
                "Conflict",
                f"Operation cannot be fulfilled on {resource} "
                f'"{name}": the object has been modified; please apply your changes '
                "to the latest version and try again",
                name=name,
                kind=resource,
            )
        if validate and resource == "pods":
            changed = set(body.get("spec") or {}) - _MUTABLE_POD_SPEC
            if changed:
                raise ApiError(
                    422,
                    "Invalid",
                    f'Pod "{name}" is invalid: spec: Forbidden: pod '
                    "updates may not change fields other than "
                    "`spec.activeDeadlineSeconds`, `spec.tolerations`, "
                    f"`spec.schedulingGates` (tried {sorted(changed)})",
                    name=name,
                    kind=resource,
                )
        updated = _merge(copy.deepcopy(current), body)
        updated["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        key = (namespace or "", name)
        meta = updated["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self._remove(resource, key, updated)
            return updated
        self._write(resource, key, updated, "MODIFIED")
        return updated

    def delete(
        self, resource: str, namespace: str | None, name: str, grace_seconds: int | None = None
    ) -> Raw:
        current = self.get(resource, namespace, name)
        key = (namespace or "", name)
        if resource != "pods":
            if current["metadata"].get("finalizers"):
                return self._mark_deleted(resource, key, current, 0)
            self._remove(resource, key, current)
            return current
        spec = current.get("spec") or {}
        grace = (
            grace_seconds
            if grace_seconds is not None
            else spec.get("terminationGracePeriodSeconds", DEFAULT_GRACE_SECONDS)
        )
        meta = current["metadata"]
        if meta.get("deletionTimestamp"):
            if grace == 0 or grace < meta.get("deletionGracePeriodSeconds", grace):
                # A shorter grace period (force deletion at 0) overrides the running one.
                if grace == 0 and not meta.get("finalizers"):
                    self._remove(resource, key, current)
                    return current
                return self._mark_deleted(resource, key, current, grace)
            return current
        finished = (current.get("status") or {}).get("phase") in ("Succeeded", "Failed")
        if (not spec.get("nodeName") or grace == 0 or finished) and not meta.get("finalizers"):
            # The API server deletes at once what no kubelet has to stop.
            self._remove(resource, key, current)
            return current
        marked = self._mark_deleted(resource, key, current, grace)
        self._kubelet_work.add(key)
        self.tick()  # a kubelet whose containers stop on SIGTERM confirms right away
        return marked

    # -- logs --------------------------------------------------------------------------------

    def write_log(
        self, namespace: str, name: str, lines: Iterable[str], container: str = ""
    ) -> None:
        """A container of the pod writes `lines` (its first container when none is named)."""
        pod = self.get("pods", namespace, name)
        container = container or main_container(pod).get("name", "")
        self.logs.setdefault((namespace, name), {}).setdefault(container, []).extend(lines)

    def log(self, namespace: str, name: str, params: dict[str, str]) -> bytes:
        """GET pods/{name}/log: as the API server answers it (pkg/registry/core/pod LogLocation,
        then the kubelet): the text, or the Status it refuses with."""
        pod = self.get("pods", namespace, name)
        spec = pod.get("spec") or {}
        names = [c.get("name", "") for c in spec.get("containers") or []]
        init_names = [c.get("name", "") for c in spec.get("initContainers") or []]
        container = params.get("container") or ""
        if not container:
            if len(names) != 1:
                raise ApiError(
                    400,
                    "BadRequest",
                    f"a container name must be specified for pod {name}, choose one of: "
                    f"[{' '.join(names)}]",
                )
            container = names[0]
        if container not in names and container not in init_names:
            raise ApiError(400, "BadRequest", f"container {container} is not valid for pod {name}")
        if not spec.get("nodeName"):
            raise ApiError(400, "BadRequest", f"pod {name} does not have a host assigned")
        if params.get("previous") == "true":
            raise ApiError(
                400,
                "BadRequest",
                f'previous terminated container "{container}" in pod "{name}" not found',
            )
        statuses = {
            status.get("name"): status.get("state") or {}
            for kind in ("containerStatuses", "initContainerStatuses")
            for status in (pod.get("status") or {}).get(kind) or []
        }
        state = statuses.get(container) or {}
        if "running" not in state and "terminated" not in state:
            waiting = (state.get("waiting") or {}).get("reason") or "ContainerCreating"
            raise ApiError(
                400,
                "BadRequest",
                f'container "{container}" in pod "{name}" is waiting to start: {waiting}',
            )
        lines = self.logs.get((namespace, name), {}).get(container, [])
        tail = params.get("tailLines")
        if tail is not None:
            try:
                count = int(tail)
            except ValueError as exc:
                raise ApiError(400, "BadRequest", f"tailLines: invalid value {tail!r}") from exc
            if count < 0:
                raise ApiError(
                    422, "Invalid", f"PodLogOptions: tailLines: must be >= 0 (got {count})"
                )
            lines = lines[len(lines) - count :] if count else []
        return "".join(f"{line}\n" for line in lines).encode()

    def bind(self, namespace: str, name: str, body: Any) -> Raw:
        pod = self.get("pods", namespace, name)
        target = (body or {}).get("target") or {}
        node = target.get("name")
        if not node:
            raise ApiError(
                422,
                "Invalid",
                f'Binding "{name}" is invalid: target.name: Required value',
                name=name,
                kind="pods",
            )
        if pod["metadata"].get("deletionTimestamp"):
            raise ApiError(
                409,
                "Conflict",
                f"Operation cannot be fulfilled on pods/binding "
                f'"{name}": pod {name} is being deleted, cannot be assigned to a host',
                name=name,
                kind="pods/binding",
            )
        assigned = (pod.get("spec") or {}).get("nodeName")
        if assigned:
            raise ApiError(
                409,
                "Conflict",
                f"Operation cannot be fulfilled on pods/binding "
                f'"{name}": pod {name} is already assigned to node "{assigned}"',
                name=name,
                kind="pods/binding",
            )
        bound = copy.deepcopy(pod)
        bound["spec"]["nodeName"] = node
        conditions = bound.setdefault("status", {}).setdefault("conditions", [])
        conditions.append(
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": self.timestamp()}
        )
        key = (namespace, name)
        self._write("pods", key, bound, "MODIFIED")
        self._pods_by_node.setdefault(node, set()).add(key)
        self._kubelet_work.add(key)
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "code": 201,
        }

    # -- lists and watches -------------------------------------------------------------------

    def list(self, resource: str, namespace: str | None, params: dict[str, str]) -> Raw:
        kind = KINDS.get(resource, resource)
        limit = int(params.get("limit") or 0)
        token = params.get("continue")
        if token:
            snapshot_id, offset = self._read_token(token)
            snapshot = self._snapshots.get(snapshot_id)
            if snapshot is None or snapshot.rv < self.compacted_rv:
                self._snapshots.pop(snapshot_id, None)
                raise ApiError(
                    410,
                    "Expired",
                    "The provided continue parameter is too old to "
                    "display a consistent list result. You can start a new list "
                    "without the continue parameter.",
                )
        else:
            items = self.select(resource, namespace, params)
            snapshot_id, offset, snapshot = 0, 0, _ListSnapshot(self.rv, items)
        end = offset + limit if limit else len(snapshot.items)
        metadata: Raw = {"resourceVersion": str(snapshot.rv)}
        if end < len(snapshot.items):
            if not snapshot_id:
                snapshot_id = self._keep_snapshot(snapshot)
            metadata["continue"] = _token(snapshot_id, end)
            metadata["remainingItemCount"] = len(snapshot.items) - end
        elif snapshot_id:
            self._snapshots.pop(snapshot_id, None)
        return {
            "kind": f"{kind}List",
            "apiVersion": "v1",
            "metadata": metadata,
            "items": snapshot.items[offset:end],
        }

    def select(self, resource: str, namespace: str | None, params: dict[str, str]) -> list[Raw]:
        labels = params.get("labelSelector") or ""
        fields = params.get("fieldSelector") or ""
        table = self.table(resource)
        keys = sorted(table)
        return [
            table[key]
            for key in keys
            if (not namespace or key[0] == namespace)
            and (not labels or selects(labels, table[key]))
            and (not fields or field_selects(fields, table[key]))
        ]

    def events_since(self, resource: str, rv: int) -> list[WatchEvent]:
        if rv < self.compacted_rv:
            raise ApiError(410, "Expired", f"too old resource version: {rv} ({self.compacted_rv})")
        return [event for event in self.history if event.rv > rv and event.resource == resource]

    def compact(self) -> None:
        """Forget all history: every older watch resourceVersion and continue token is Gone."""
        self.history.clear()
        self.compacted_rv = self.rv
        self._snapshots.clear()

    # -- time and kubelets -------------------------------------------------------------------

    def timestamp(self, at: float | None = None) -> str:
        return timestamp(self.now if at is None else at)

    def advance(self, seconds: float) -> None:
        self.now += seconds
        self.tick()

    def tick(self) -> None:
        """Every kubelet of a Ready node does what is due at `now`, then the pod garbage
        collector takes the pods of nodes gone longer than its quarantine."""
        self._collect_orphans()
        for key in sorted(self._kubelet_work):
            pod = self.table("pods").get(key)
            if pod is None:
                self._kubelet_work.discard(key)
                continue
            node = self.table("nodes").get(("", pod["spec"].get("nodeName") or ""))
            if node is None or not node_ready(node):
                continue  # no kubelet answers for this pod
            if pod["metadata"].get("deletionTimestamp"):
                self._terminate(key, pod)
            else:
                self._run(key, pod, node)

    def _collect_orphans(self) -> None:
        for node_name, since in sorted(self._nodes_gone.items()):
            if self.now < since + ORPHAN_QUARANTINE_SECONDS:
                continue
            del self._nodes_gone[node_name]
            for key in sorted(self._pods_by_node.get(node_name, ())):
                pod = self.table("pods").get(key)
                if pod is not None and not pod["metadata"].get("finalizers"):
                    self._remove("pods", key, pod)

    def _terminate(self, key: Key, pod: Raw) -> None:
        meta = pod["metadata"]
        due = parse_time(meta["deletionTimestamp"])
        if (self.kubelet.honour_sigterm or self.now >= due) and not meta.get("finalizers"):
            self._remove("pods", key, pod)

    def _run(self, key: Key, pod: Raw, node: Raw) -> None:
        step = kubelet_step(
            pod,
            node,
            now=self.now,
            kubelet=self.kubelet,
            admitted=key in self._admitted,
            pull_attempts=self._pull_attempts.get(key, 0),
            node_usage=lambda: self._node_usage(pod["spec"]["nodeName"], key),
        )
        if step.admitted:
            self._admitted.add(key)
        if step.pull_attempts:
            self._pull_attempts[key] = step.pull_attempts
        for changes in step.writes:
            self._set_status(key, self.table("pods")[key], changes)
        if step.done:
            self._kubelet_work.discard(key)

    def finish(self, key: Key, *, exit_code: int) -> None:
        pod = self.table("pods")[key]
        self._set_status(key, pod, finished_status(pod, self.now, exit_code=exit_code))
        self._kubelet_work.discard(key)

    def _node_usage(self, node_name: str, key: Key) -> dict[str, int]:
        """What the node's other admitted (or running), unfinished pods request."""
        pods = self.table("pods")
        return usage_of(
            pods[other]
            for other in self._pods_by_node.get(node_name, ())
            if other != key
            and other in pods
            and (other in self._admitted or pods[other]["status"].get("phase") == "Running")
        )

    # -- internals ---------------------------------------------------------------------------

    def _set_status(self, key: Key, pod: Raw, changes: Raw) -> None:
        updated = dict(pod)
        updated["status"] = {**(pod.get("status") or {}), **changes}
        self._write("pods", key, updated, "MODIFIED")

    def _mark_deleted(self, resource: str, key: Key, current: Raw, grace: int) -> Raw:
        marked = copy.deepcopy(current)
        marked["metadata"]["deletionTimestamp"] = self.timestamp(self.now + grace)
        marked["metadata"]["deletionGracePeriodSeconds"] = grace
        self._write(resource, key, marked, "MODIFIED")
        return marked

    def _write(self, resource: str, key: Key, obj: Raw, kind: str) -> None:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.table(resource)[key] = obj
        self._record(WatchEvent(self.rv, resource, kind, obj))

    def _remove(self, resource: str, key: Key, obj: Raw) -> None:
        self.rv += 1
        gone = dict(obj)
        gone["metadata"] = {**obj["metadata"], "resourceVersion": str(self.rv)}
        self.table(resource).pop(key, None)
        if resource == "nodes":
            self._nodes_gone[key[1]] = self.now
        if resource == "pods":
            self._kubelet_work.discard(key)
            self._admitted.discard(key)
            self._pull_attempts.pop(key, None)
            self.logs.pop(key, None)
            node = (obj.get("spec") or {}).get("nodeName")
            if node:
                self._pods_by_node.get(node, set()).discard(key)
        self._record(WatchEvent(self.rv, resource, "DELETED", gone))
        self._collect_dependents(obj["metadata"].get("uid"))

    def _collect_dependents(self, uid: str | None) -> None:
        for resource, key in sorted(self._dependents.pop(uid or "", ())):
            if key in self.table(resource):
                self.delete(resource, key[0] or None, key[1])

    def _record(self, event: WatchEvent) -> None:
        self.history.append(event)
        while len(self.history) > self.history_limit:
            self.compacted_rv = self.history.popleft().rv
        for listener in self.listeners:
            listener(event)

    def _keep_snapshot(self, snapshot: _ListSnapshot) -> int:
        self._snapshot_ids += 1
        self._snapshots[self._snapshot_ids] = snapshot
        while len(self._snapshots) > _MAX_LIST_SNAPSHOTS:
            self._snapshots.pop(next(iter(self._snapshots)))
        return self._snapshot_ids

    def _read_token(self, token: str) -> tuple[int, int]:
        try:
            decoded = json.loads(base64.urlsafe_b64decode(token.encode()))
            return int(decoded["s"]), int(decoded["o"])
        except (ValueError, KeyError, TypeError, binascii.Error) as exc:
            raise ApiError(400, "BadRequest", f"invalid continue token: {exc}") from exc


# -- helpers ---------------------------------------------------------------------------------


def selects(selector: str, obj: Raw) -> bool:
    """Equality-based label selectors: k=v, k==v, k!=v, k, !k."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    for term in (t.strip() for t in selector.split(",") if t.strip()):
        if "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key.strip()) == value.strip():
                return False
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            if labels.get(key.strip()) != value.strip():
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


def field_selects(selector: str, obj: Raw) -> bool:
    """metadata.name, metadata.namespace, spec.nodeName, status.phase with = or !=."""
    for term in (t.strip() for t in selector.split(",") if t.strip()):
        negate = "!=" in term
        path, value = term.replace("!=", "=").replace("==", "=").split("=", 1)
        current: Any = obj
        for part in path.strip().split("."):
            current = (current or {}).get(part) if isinstance(current, dict) else None
        if ((current or "") == value.strip()) == negate:
            return False
    return True


def _validate_meta(resource: str, kind: str, meta: Raw) -> None:
    name = meta.get("name")
    if not name:
        raise ApiError(
            422,
            "Invalid",
            f"{kind} is invalid: metadata.name: Required value: name or generateName is required",
            kind=resource,
        )
    pattern = _DNS_LABEL if resource == "services" else _DNS_SUBDOMAIN
    limit = 63 if resource == "services" else 253
    if len(name) > limit or not pattern.match(name):
        raise ApiError(
            422,
            "Invalid",
            f'{kind} "{name}" is invalid: metadata.name: Invalid '
            f'value: "{name}": a lowercase RFC 1123 name must consist of lower case '
            "alphanumeric characters, '-' or '.', and must start and end with an "
            "alphanumeric character",
            name=name,
            kind=resource,
        )
    for key, value in (meta.get("labels") or {}).items():
        prefix, _, label = key.rpartition("/")
        value_ok = isinstance(value, str) and len(value) <= 63 and _LABEL_VALUE.match(value)
        key_ok = (
            len(label) <= 63
            and _LABEL_NAME.match(label)
            and (not prefix or (len(prefix) <= 253 and _DNS_SUBDOMAIN.match(prefix)))
        )
        if not (key_ok and value_ok):
            raise ApiError(
                422,
                "Invalid",
                f'{kind} "{name}" is invalid: metadata.labels: '
                f'Invalid value: "{key}={value}": a valid label must be an empty '
                "string or 63 characters or less, alphanumeric, '-', '_' or '.'",
                name=name,
                kind=resource,
            )


def _validate_pod_spec(kind: str, name: str, spec: Raw) -> None:
    containers = spec.get("containers") or []
    if not containers:
        raise ApiError(
            422,
            "Invalid",
            f'{kind} "{name}" is invalid: spec.containers: Required value',
            name=name,
            kind="pods",
        )
    for index, container in enumerate(containers):
        resources = container.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        for resource, amount in requests.items():
            if resource in _NATIVE_RESOURCES or "/" not in resource:
                continue
            if str(limits.get(resource)) != str(amount):
                raise ApiError(
                    422,
                    "Invalid",
                    f'{kind} "{name}" is invalid: spec.containers'
                    f"[{index}].resources.requests[{resource}]: Invalid value: "
                    f'"{amount}": must be equal to {resource} limit',
                    name=name,
                    kind="pods",
                )


def _merge(target: Raw, patch: Raw) -> Raw:
    """RFC 7386 JSON merge patch (strategic merge patches on maps behave the same)."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            target[key] = _merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)
    return target


def _token(snapshot_id: int, offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"s": snapshot_id, "o": offset}).encode()).decode()
