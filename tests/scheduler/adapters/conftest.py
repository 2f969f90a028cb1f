"""A kmock KubernetesEmulator served over real HTTP from a background thread.

kmock is asyncio/aiohttp; the official `kubernetes` client is synchronous urllib3. Running the
emulator's event loop in its own thread lets the real client code path (serialisation, URLs,
query parameters, error mapping, timeouts) run unchanged against it. Everything the test thread
does to the emulator (seeding objects, installing faults, reading requests) is marshalled onto
that loop so the two threads never touch kmock's state at the same time.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import kmock
import pytest
from kubernetes import client

from scheduler.adapters.cluster.kubernetes import KubernetesBackend, RetryPolicy

T = TypeVar("T")

NAMESPACE = "gpu-jobs"
GPU_RESOURCE_NAMES = ("nvidia.com/gpu", "mars-tech.com/gpu")
PODS = kmock.resource("v1/pods")
NODES = kmock.resource("v1/nodes")


class SelectorAwareEmulator(kmock.KubernetesEmulator):
    """Two behaviours of a real API server that kmock leaves out:

    * kmock lists every object of a resource; a real server applies ?labelSelector=. Equality
      selectors (k=v, k!=v, bare k) are all the backend sends, so that is all we add.
    * kmock stores a created object before any reaction runs, so a faulted create always
      "half-succeeds". `rejections` makes a create fail the way admission or validation does:
      nothing stored.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rejections: dict[str, list[kmock.KubernetesError]] = {}

    async def _handle(self, request: kmock.Request) -> Any:
        if request.action == kmock.action.CREATE and request.resource == PODS:
            name = (request.data or {}).get("metadata", {}).get("name")
            pending = self.rejections.get(name)
            if pending:
                raise pending.pop(0)
        return await super()._handle(request)

    async def _serve_list(self, request: kmock.Request) -> Any:
        payload = await super()._serve_list(request)
        selector = (request.params or {}).get("labelSelector")
        if selector:
            payload["items"] = [o for o in payload["items"] if _selects(selector, o)]
        return payload


def _selects(selector: str, obj: dict[str, Any]) -> bool:
    labels = obj.get("metadata", {}).get("labels") or {}
    for term in selector.split(","):
        if "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key.strip()) == value.strip():
                return False
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            if labels.get(key.strip()) != value.strip():
                return False
        elif term.strip() not in labels:
            return False
    return True


class EmulatedCluster:
    """Handle on a running emulator: its URL, its stored objects, its request log, faults."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.handler = SelectorAwareEmulator()
        self._server = kmock.Server(self.handler)
        self._await(self.handler.__aenter__())
        self._await(self._server.__aenter__())
        self.url = str(self._server.url).rstrip("/")
        self.on_loop(self._declare_resources)

    def _declare_resources(self) -> None:
        self.handler.resources[PODS] = kmock.ResourceInfo(kind="Pod", namespaced=True)
        self.handler.resources[NODES] = kmock.ResourceInfo(kind="Node", namespaced=False)

    def close(self) -> None:
        self._await(self._server.__aexit__(None, None, None))
        self._await(self.handler.__aexit__(None, None, None))
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()

    # -- plumbing ----------------------------------------------------------------------------

    def _await(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=10)

    def on_loop(self, fn: Callable[[], T]) -> T:
        async def call() -> T:
            return fn()

        return self._await(call())

    # -- seeding and inspecting state --------------------------------------------------------

    def add_node(
        self,
        name: str,
        allocatable: dict[str, str],
        *,
        labels: dict[str, str] | None = None,
        taints: list[dict[str, str]] | None = None,
        unschedulable: bool = False,
    ) -> None:
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels or {}},
            "spec": {"unschedulable": unschedulable, "taints": taints or []},
            "status": {"allocatable": allocatable, "capacity": allocatable},
        }
        self.on_loop(lambda: self.handler.objects.__setitem__((NODES, None, name), node))

    def add_pod(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        key = (PODS, meta["namespace"], meta["name"])
        self.on_loop(lambda: self.handler.objects.__setitem__(key, pod))

    def patch_pod(self, namespace: str, name: str, changes: dict[str, Any]) -> None:
        self.on_loop(lambda: self.handler.objects[PODS, namespace, name].patch(changes))

    def pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        def read() -> dict[str, Any] | None:
            key = (PODS, namespace, name)
            if key not in self.handler.objects or self.handler.objects[key].deleted:
                return None
            return self.handler.objects[key].raw

        return self.on_loop(read)

    def pod_names(self) -> list[str]:
        def read() -> list[str]:
            return sorted(
                name
                for (resource, _ns, name), obj in self.handler.objects.items()
                if resource == PODS and not obj.deleted
            )

        return self.on_loop(read)

    def requests(self, action: kmock.action, resource: Any = PODS) -> list[kmock.Request]:
        return self.on_loop(lambda: list(self.handler[action, resource]))

    def reject_create(self, name: str, *, status: int = 422, times: int = 1) -> None:
        """Refuse the next `times` creates of pod `name` without storing anything."""
        error = kmock.KubernetesError(status=status, reason="Invalid", message="rejected")
        self.on_loop(lambda: self.handler.rejections.setdefault(name, []).extend([error] * times))

    def fail_next(
        self, action: kmock.action, *payload: Any, times: int = 1, resource: Any = PODS
    ) -> None:
        """Answer the next `times` matching requests with `payload` instead of the emulator.

        Writes are still applied first (kmock stores a create/delete before any reaction), so
        a faulted create behaves like a server that committed the pod and then failed to reply.
        """

        def install() -> None:
            view = self.handler[action, resource]
            start = len(view)  # kmock slices count every matching request ever served
            reaction = view[start : start + times]
            for item in payload:
                reaction = reaction << item

        self.on_loop(install)


@pytest.fixture
def cluster() -> Iterator[EmulatedCluster]:
    emulated = EmulatedCluster()
    try:
        yield emulated
    finally:
        emulated.close()


@pytest.fixture
def sleeps() -> list[float]:
    """Backoff delays the backend asked for; recording instead of sleeping keeps tests fast."""
    return []


@pytest.fixture
def backend(cluster: EmulatedCluster, sleeps: list[float]) -> KubernetesBackend:
    configuration = client.Configuration(host=cluster.url)
    return KubernetesBackend.from_configuration(
        configuration,
        NAMESPACE,
        GPU_RESOURCE_NAMES,
        RetryPolicy(attempts=4, base_delay=0.1, max_delay=1.0, sleep=sleeps.append),
        # A read timeout short enough for the timeout tests (the emulator stalls 2 s), long
        # enough that an ordinary answer on a loaded machine is not taken for a timeout.
        request_timeout=(2.0, 1.0),
    )
