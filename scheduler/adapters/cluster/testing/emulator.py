"""An emulated Kubernetes API server over real HTTP: kmock's server and routing, ApiStore's state.

kmock parses Kubernetes URLs, logs every request and lets a test install reactions (faults)
ahead of the default behaviour; its own emulator is lenient (no resourceVersion, no
pagination, immediate deletion), so the default behaviour here is ApiStore's. As in kmock,
a write is applied before any reaction runs: a faulted create behaves like a server that
stored the pod and then failed to answer.

Two ways to run it:
- in a test, `EmulatedCluster()` serves from a background thread on a manual clock
  (`advance(seconds)` moves time and runs the kubelets);
- as a process, `python -m scheduler.adapters.cluster.testing.emulator --port 8102
  --kubeconfig /tmp/kubeconfig [--nodes 100 --foreign-pods 1000]` on the wall clock, for
  `bench_cycle --backend kubernetes` and `deploy/smoke.sh` (KUBECONFIG pointing at it).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import signal
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TypeVar

import kmock
from kmock._internal import parsing as kmock_parsing

from scheduler.adapters.cluster.testing.store import (
    KINDS,
    ApiError,
    ApiStore,
    Raw,
    WatchEvent,
    field_selects,
    selects,
)

T = TypeVar("T")

PODS = kmock.resource("v1/pods")
NODES = kmock.resource("v1/nodes")
_DECLARED = {
    PODS: kmock.ResourceInfo(kind="Pod", namespaced=True),
    NODES: kmock.ResourceInfo(kind="Node", namespaced=False),
    kmock.resource("v1/services"): kmock.ResourceInfo(kind="Service", namespaced=True),
    kmock.resource("v1/configmaps"): kmock.ResourceInfo(kind="ConfigMap", namespaced=True),
    kmock.resource("v1/secrets"): kmock.ResourceInfo(kind="Secret", namespaced=True),
    kmock.resource("v1/events"): kmock.ResourceInfo(kind="Event", namespaced=True),
    kmock.resource("v1/namespaces"): kmock.ResourceInfo(kind="Namespace", namespaced=False),
    kmock.resource("networking.k8s.io/v1/networkpolicies"): kmock.ResourceInfo(
        kind="NetworkPolicy", namespaced=True
    ),
}
_BINDING_PATH = re.compile(r"/api/v1/namespaces/[^/]+/pods/[^/]+/binding")
_LOG_PATH = re.compile(r"/api/v1/namespaces/[^/]+/pods/[^/]+/log")
_kmock_parse_path = kmock_parsing.parse_path


def _parse_path(path: str) -> kmock_parsing.ParsedPath:
    """kmock reads /api/v1/namespaces[/NAME] as a namespace prefix missing its resource (and
    fails on the bare list); the API server serves the cluster-scoped Namespace objects there."""
    parts = path.split("?", 1)[0].strip("/").split("/")
    if parts[:3] == ["api", "v1", "namespaces"] and len(parts) in (3, 4):
        name = parts[3] if len(parts) == 4 else None
        return kmock_parsing.ParsedPath("", "v1", "namespaces", None, name, None)
    return _kmock_parse_path(path)


kmock_parsing.parse_path = _parse_path
_DROP = object()
REQUEST_LOG = 8  # requests a long-running emulator keeps in its log


class _Watcher:
    __slots__ = ("bookmarks", "fields", "labels", "namespace", "queue", "resource", "stalled")

    def __init__(self, resource: str, namespace: str | None, params: dict[str, str]) -> None:
        self.resource = resource
        self.namespace = namespace
        self.labels = params.get("labelSelector") or ""
        self.fields = params.get("fieldSelector") or ""
        self.bookmarks = params.get("allowWatchBookmarks") == "true"
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self.stalled = False  # the connection stays open and says nothing more

    def wants(self, event: WatchEvent) -> bool:
        obj = event.object
        return (
            event.resource == self.resource
            and (not self.namespace or obj["metadata"].get("namespace") == self.namespace)
            and (not self.labels or selects(self.labels, obj))
            and (not self.fields or field_selects(self.fields, obj))
        )


class StrictApiServer(kmock.KubernetesScaffold):
    """kmock's Kubernetes scaffold (discovery, errors, request log, reactions) over ApiStore.

    `bookmark_seconds`: a watch that asked for bookmarks gets one after this long without
    events (the real server sends them about every minute); None sends them only on
    `bookmark()`.

    `request_log_limit`: keep only about this many of the latest requests in kmock's log (None:
    all, for tests that count them). kmock finds the reaction for a request by scanning every
    request logged so far against each reaction's filters, so a long-running emulator (the
    benchmarks, the smoke script) would otherwise answer more slowly with every request served:
    0.26 s of CPU a request after a few thousand, more than a real API server's answer.
    """

    def __init__(
        self,
        store: ApiStore | None = None,
        *,
        request_log_limit: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.store = store or ApiStore()
        self.request_log_limit = request_log_limit
        self.bookmark_seconds: float | None = None
        # Pod name -> errors its next creates get, with nothing stored (admission, quota).
        self.rejections: dict[str, list[ApiError]] = {}
        # Pod name -> errors its next binds get, with nothing changed.
        self.bind_rejections: dict[str, list[ApiError]] = {}
        # id(request) -> what the store answered; request.id repeats once the log is trimmed.
        self._results: dict[int, Any] = {}
        self._watchers: set[_Watcher] = set()
        self.store.listeners.append(self._dispatch)
        for resource, info in _DECLARED.items():
            self.resources[resource] = info
        for action in (
            kmock.action.LIST,
            kmock.action.FETCH,
            kmock.action.CREATE,
            kmock.action.UPDATE,
            kmock.action.DELETE,
        ):
            self.fallback[action] << self._serve_result
        self.fallback["post", _BINDING_PATH] << self._serve_result
        # A log is text, as the real server sends it (the client refuses other content types);
        # ahead of the plain GET above.
        text = kmock.headers({"Content-Type": "text/plain; charset=utf-8"})
        (self.fallback**1)["get", _LOG_PATH] << text << self._serve_result
        self.fallback[kmock.action.WATCH] << self._serve_watch

    # -- requests ----------------------------------------------------------------------------

    async def _handle(self, request: kmock.Request) -> Any:
        self._trim_log()
        resource = _resource_name(request.resource)
        if resource is not None and request.action != kmock.action.WATCH:
            try:
                self._results[id(request)] = self._apply(request, resource)
            except ApiError as error:
                return await self._render_error(
                    kmock.KubernetesError(
                        status=error.code,
                        reason=error.reason,
                        message=error.message,
                        details={**error.details, "causes": []},
                    )
                )
        return await super()._handle(request)

    def _trim_log(self) -> None:
        """Forget all but the latest `request_log_limit` requests, in batches (amortised O(1)).
        The request being handled is the last one logged, so it stays for the match."""
        keep = self.request_log_limit
        if keep is None or len(self._requests) <= 2 * keep + 1:
            return
        del self._requests[: -(keep + 1)]
        for payload in self._payloads:
            del payload._requests[: -keep or None]

    def _apply(self, request: kmock.Request, resource: str) -> Any:
        store, action = self.store, request.action
        namespace, name = request.namespace, request.name
        if request.subresource == "binding" and request.method == kmock.method.POST:
            if pending := self.bind_rejections.get(name or ""):
                raise pending.pop(0)
            return store.bind(namespace or "", name or "", request.data)
        if request.subresource == "log" and action == kmock.action.FETCH:
            return store.log(namespace or "", name or "", dict(request.params))
        if action == kmock.action.LIST:
            return store.list(resource, namespace, dict(request.params))
        if action == kmock.action.FETCH:
            return store.get(resource, namespace, name or "")
        if action == kmock.action.CREATE:
            body = request.data if isinstance(request.data, dict) else None
            pod_name = ((body or {}).get("metadata") or {}).get("name")
            pending = self.rejections.get(pod_name or "") if resource == "pods" else None
            if pending:
                raise pending.pop(0)
            return store.create(resource, namespace, body)
        if action == kmock.action.UPDATE:
            return store.patch(resource, namespace, name or "", request.data)
        if action == kmock.action.DELETE:
            return store.delete(resource, namespace, name or "", _grace(request))
        return None

    async def _serve_result(self, request: kmock.Request) -> Any:
        return self._results.pop(id(request))

    async def _serve_watch(self, request: kmock.Request) -> AsyncIterator[Any]:
        resource = _resource_name(request.resource) or ""
        params = dict(request.params)
        watcher = _Watcher(resource, request.namespace, params)
        since = params.get("resourceVersion")
        yield b""  # the headers go out now, as a real server's do
        try:
            if since in (None, "", "0"):
                initial = [
                    {"type": "ADDED", "object": obj}
                    for obj in self.store.select(resource, request.namespace, params)
                ]
            else:
                initial = [
                    {"type": e.type, "object": e.object}
                    for e in self.store.events_since(resource, int(since))
                    if watcher.wants(e)
                ]
        except ApiError as error:
            yield {"type": "ERROR", "object": _status(error)}
            return
        self._watchers.add(watcher)  # no await since the read above: nothing slips between
        try:
            for event in initial:
                yield event
            timeout = float(params.get("timeoutSeconds") or 0) or None
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout if timeout else None
            while True:
                waits = [
                    w
                    for w in (
                        self.bookmark_seconds if watcher.bookmarks else None,
                        deadline - loop.time() if deadline else None,
                    )
                    if w is not None
                ]
                try:
                    item = await asyncio.wait_for(
                        watcher.queue.get(), min(waits) if waits else None
                    )
                except TimeoutError:
                    if deadline is not None and loop.time() >= deadline:
                        return
                    item = ("BOOKMARK", self.store.rv)  # queue empty: everything was sent
                if item is _DROP:
                    return
                if watcher.stalled:
                    deadline = None  # a hung proxy: not even the server's timeout ends it
                    continue
                if isinstance(item, tuple):
                    yield _bookmark(resource, item[1])
                else:
                    yield item
        finally:
            self._watchers.discard(watcher)

    # -- watches -----------------------------------------------------------------------------

    def _dispatch(self, event: WatchEvent) -> None:
        for watcher in self._watchers:
            if watcher.wants(event):
                watcher.queue.put_nowait({"type": event.type, "object": event.object})

    def bookmark(self) -> None:
        for watcher in self._watchers:
            if watcher.bookmarks:
                watcher.queue.put_nowait(("BOOKMARK", self.store.rv))

    def drop_watches(self) -> int:
        """End every open watch stream, as an API server restart or a proxy timeout does."""
        for watcher in self._watchers:
            watcher.queue.put_nowait(_DROP)
        return len(self._watchers)

    def stall_watches(self) -> int:
        """Every open watch goes silent without closing, as behind a hung proxy."""
        for watcher in self._watchers:
            watcher.stalled = True
        return len(self._watchers)

    @property
    def watch_count(self) -> int:
        return len(self._watchers)


def _resource_name(resource: Any) -> str | None:
    if resource is None or not getattr(resource, "plural", None):
        return None
    group = resource.group or ""
    return resource.plural if not group else f"{resource.plural}.{group}"


def _grace(request: kmock.Request) -> int | None:
    value = request.params.get("gracePeriodSeconds")
    if value is None and isinstance(request.data, dict):
        value = request.data.get("gracePeriodSeconds")
    return int(value) if value is not None else None


def _status(error: ApiError) -> Raw:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": error.message,
        "reason": error.reason,
        "code": error.code,
    }


def _bookmark(resource: str, rv: int) -> Raw:
    kind = KINDS.get(resource.split(".")[0], resource)
    return {
        "type": "BOOKMARK",
        "object": {"kind": kind, "apiVersion": "v1", "metadata": {"resourceVersion": str(rv)}},
    }


# -- running it ------------------------------------------------------------------------------


class EmulatedCluster:
    """The emulator served from a background thread, for tests and benchmarks. Everything done
    to its state is marshalled onto the server's loop, so the threads never share it."""

    def __init__(
        self,
        *,
        port: int | None = None,
        wall_clock: bool = False,
        tick_seconds: float = 0.5,
        request_log_limit: int | None = None,
    ) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.handler = StrictApiServer(request_log_limit=request_log_limit)
        self.store = self.handler.store
        self._server = kmock.Server(self.handler, port=port)
        self._await(self.handler.__aenter__())
        self._await(self._server.__aenter__())
        self.url = str(self._server.url).rstrip("/")
        self._ticker: asyncio.Task[None] | None = None
        if wall_clock:
            self.on_loop(lambda: self._start_ticker(tick_seconds))

    def _start_ticker(self, every: float) -> None:
        async def tick() -> None:
            while True:
                self.store.now = time.time()
                self.store.tick()
                await asyncio.sleep(every)

        self._ticker = self._loop.create_task(tick())

    def close(self) -> None:
        if self._ticker is not None:
            self.on_loop(self._ticker.cancel)
        self.on_loop(self.handler.drop_watches)
        self._await(self._server.__aexit__(None, None, None))
        self._await(self.handler.__aexit__(None, None, None))
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()

    def _await(self, coro: Any, timeout: float | None = 30.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=timeout)

    def on_loop(self, fn: Callable[[], T], *, timeout: float | None = 30.0) -> T:
        async def call() -> T:
            return fn()

        return self._await(call(), timeout)

    # -- seeding and inspecting --------------------------------------------------------------

    def add_node(
        self,
        name: str,
        allocatable: dict[str, str],
        *,
        labels: dict[str, str] | None = None,
        taints: list[dict[str, str]] | None = None,
        unschedulable: bool = False,
        ready: bool = True,
    ) -> None:
        self.on_loop(
            lambda: self.store.create(
                "nodes",
                None,
                node_object(
                    name,
                    allocatable,
                    labels=labels,
                    taints=taints,
                    unschedulable=unschedulable,
                    ready=ready,
                ),
                validate=False,
            )
        )

    def set_node_ready(self, name: str, ready: bool) -> None:
        """Ready=False is a kubelet that stopped reporting: its pods no longer change."""
        condition = {"type": "Ready", "status": "True" if ready else "Unknown"}
        self.on_loop(
            lambda: self.store.patch(
                "nodes", None, name, {"status": {"conditions": [condition]}}, validate=False
            )
        )

    def delete_node(self, name: str) -> None:
        self.on_loop(lambda: self.store.delete("nodes", None, name))

    def add_namespace(self, name: str) -> None:
        """From the first namespace added on, objects can only be created in namespaces that
        exist (404 otherwise), as on a real server."""

        def add() -> None:
            self.store.namespaces_enforced = True
            body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
            self.store.create("namespaces", None, body)

        self.on_loop(add)

    def add_pod(self, pod: dict[str, Any]) -> None:
        """Store a pod as given (no validation): other workloads, or a state to start from."""
        namespace = pod["metadata"]["namespace"]
        self.on_loop(lambda: self.store.create("pods", namespace, pod, validate=False))

    def patch_pod(self, namespace: str, name: str, changes: dict[str, Any]) -> None:
        self.on_loop(lambda: self.store.patch("pods", namespace, name, changes, validate=False))

    def delete_pod(self, namespace: str, name: str, grace_seconds: int | None = None) -> None:
        self.on_loop(lambda: self.store.delete("pods", namespace, name, grace_seconds))

    def write_log(self, namespace: str, name: str, lines: list[str], container: str = "") -> None:
        """The pod's container (its first when none is named) writes `lines` to its log."""
        self.on_loop(lambda: self.store.write_log(namespace, name, lines, container))

    def finish_pod(self, namespace: str, name: str, *, exit_code: int = 0) -> None:
        self.on_loop(lambda: self.store.finish((namespace, name), exit_code=exit_code))

    def pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.on_loop(lambda: self.store.table("pods").get((namespace, name)))

    def node(self, name: str) -> dict[str, Any] | None:
        return self.on_loop(lambda: self.store.table("nodes").get(("", name)))

    def pod_names(self) -> list[str]:
        return self.on_loop(lambda: sorted(name for _ns, name in self.store.table("pods")))

    def requests(self, action: Any, resource: Any = PODS) -> list[kmock.Request]:
        return self.on_loop(lambda: list(self.handler[action, resource]))

    # -- time and faults ---------------------------------------------------------------------

    def advance(self, seconds: float) -> None:
        """Move the emulator's clock; every Ready node's kubelet does what is then due."""
        self.on_loop(lambda: self.store.advance(seconds))

    def fail_image_pull(self, image: str) -> None:
        self.on_loop(lambda: self.store.kubelet.image_pull_failures.add(image))

    def fail_admission(self, node: str, resource: str) -> None:
        """The node's kubelet rejects every new pod asking for `resource` (OutOf<resource>)."""
        self.on_loop(lambda: self.store.kubelet.admission_failures.__setitem__(node, resource))

    def ignore_sigterm(self) -> None:
        """From now on a deleted pod stays Terminating for its whole grace period."""
        self.on_loop(lambda: setattr(self.store.kubelet, "honour_sigterm", False))

    def compact(self) -> None:
        """etcd compaction: older watch resourceVersions and continue tokens answer 410."""
        self.on_loop(self.store.compact)

    def drop_watches(self) -> int:
        return self.on_loop(self.handler.drop_watches)

    def bookmark(self) -> None:
        self.on_loop(self.handler.bookmark)

    def stall_watches(self) -> int:
        return self.on_loop(self.handler.stall_watches)

    def watch_count(self) -> int:
        return self.on_loop(lambda: self.handler.watch_count)

    def reject_create(
        self, name: str, *, status: int = 422, times: int = 1, message: str = "rejected"
    ) -> None:
        """Refuse the next `times` creates of pod `name` without storing anything, saying
        `message` after the API server's `pods "<name>" is forbidden: `."""
        reason = {403: "Forbidden", 422: "Invalid"}.get(status, "Rejected")
        error = ApiError(status, reason, f'pods "{name}" is forbidden: {message}')
        self.on_loop(lambda: self.handler.rejections.setdefault(name, []).extend([error] * times))

    def reject_bind(self, name: str, *, status: int = 403, times: int = 1) -> None:
        """Refuse the next `times` binds of pod `name`, changing nothing."""
        reason = {403: "Forbidden", 422: "Invalid"}.get(status, "InternalError")
        error = ApiError(status, reason, f'pods "{name}" binding refused')
        self.on_loop(
            lambda: self.handler.bind_rejections.setdefault(name, []).extend([error] * times)
        )

    def fail_next(self, action: Any, *payload: Any, times: int = 1, resource: Any = PODS) -> None:
        """Answer the next `times` matching requests with `payload` instead of the emulator.
        Writes are still applied first: a faulted create stored the pod and failed to reply."""

        def install() -> None:
            view = self.handler[action, resource]
            start = len(view)  # kmock slices count every matching request ever served
            reaction = view[start : start + times]
            for item in payload:
                reaction = reaction << item

        self.on_loop(install)


def node_object(
    name: str,
    allocatable: dict[str, str],
    *,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
    ready: bool = True,
) -> Raw:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"unschedulable": unschedulable, "taints": taints or []},
        "status": {
            "allocatable": allocatable,
            "capacity": allocatable,
            "conditions": [{"type": "Ready", "status": "True" if ready else "Unknown"}],
        },
    }


def foreign_pod_object(index: int, node: str, *, namespace: str = "kube-system") -> Raw:
    """A running pod of another workload, shaped like a DaemonSet's (device plugin, CNI): what
    a real cluster's pod list is mostly made of."""
    name = f"ds-{index:06d}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {
                "app": "gpu-operator",
                "controller-revision-hash": "5d4b7c9f8",
                "pod-template-generation": "3",
            },
            "annotations": {"kubectl.kubernetes.io/default-container": "agent"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "DaemonSet",
                    "name": "gpu-operator",
                    "uid": "ds-uid",
                    "controller": True,
                }
            ],
        },
        "spec": {
            "nodeName": node,
            "schedulerName": "default-scheduler",
            "restartPolicy": "Always",
            "tolerations": [{"operator": "Exists"}],
            "containers": [
                {
                    "name": "agent",
                    "image": "nvcr.io/nvidia/k8s-device-plugin:v0.15.0",
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                    "env": [
                        {
                            "name": "NODE_NAME",
                            "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}},
                        }
                    ],
                    "volumeMounts": [
                        {"name": "device-plugin", "mountPath": "/var/lib/kubelet/device-plugins"}
                    ],
                }
            ],
            "volumes": [
                {"name": "device-plugin", "hostPath": {"path": "/var/lib/kubelet/device-plugins"}}
            ],
        },
        "status": {
            "phase": "Running",
            "podIP": "10.0.0.2",
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [
                {
                    "name": "agent",
                    "ready": True,
                    "restartCount": 0,
                    "imageID": "",
                    "image": "nvcr.io/nvidia/k8s-device-plugin:v0.15.0",
                    "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
                }
            ],
        },
    }


def seed(
    store: ApiStore,
    *,
    nodes: int,
    gpus: int,
    foreign_pods: int,
    gpu_resource: str = "nvidia.com/gpu",
) -> None:
    for index in range(nodes):
        store.create(
            "nodes",
            None,
            node_object(
                f"node-{index:05d}",
                {"cpu": "96", "memory": "1024Gi", "pods": "250", gpu_resource: str(gpus)},
                labels={"topology.kubernetes.io/zone": f"rack-{index // 32}"},
            ),
            validate=False,
        )
    for index in range(foreign_pods):
        node = f"node-{index % max(nodes, 1):05d}"
        store.create("pods", "kube-system", foreign_pod_object(index, node), validate=False)


def write_kubeconfig(path: Path, url: str) -> None:
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters:\n- name: emulated\n  cluster:\n    server: {url}\n"
        "users:\n- name: emulated\n  user:\n    token: emulated\n"
        "contexts:\n- name: emulated\n  context:\n    cluster: emulated\n    user: emulated\n"
        "current-context: emulated\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Serve an emulated Kubernetes API server.")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--kubeconfig", type=Path, help="write a kubeconfig pointing here")
    parser.add_argument("--nodes", type=int, default=0)
    parser.add_argument("--gpus", type=int, default=8, help="GPUs per node")
    parser.add_argument("--foreign-pods", type=int, default=0)
    parser.add_argument("--bookmark-seconds", type=float, default=10.0)
    parser.add_argument(
        "--namespaces", default="", help="comma-separated: these exist, no other (404 elsewhere)"
    )
    args = parser.parse_args(argv)

    # Nobody reads a long-running emulator's request log: keep a little of it, so answering
    # does not slow down with every request served.
    cluster = EmulatedCluster(port=args.port, wall_clock=True, request_log_limit=REQUEST_LOG)
    cluster.on_loop(
        lambda: seed(
            cluster.store, nodes=args.nodes, gpus=args.gpus, foreign_pods=args.foreign_pods
        ),
        timeout=None,  # 100,000 pods take a while on a loaded machine
    )
    cluster.on_loop(lambda: setattr(cluster.handler, "bookmark_seconds", args.bookmark_seconds))
    for namespace in filter(None, args.namespaces.split(",")):
        cluster.add_namespace(namespace)
    if args.kubeconfig:
        write_kubeconfig(args.kubeconfig, cluster.url)
    print(f"emulator: serving {cluster.url}", flush=True)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
