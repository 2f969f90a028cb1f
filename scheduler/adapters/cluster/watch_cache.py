"""A list+watch cache of the cluster's nodes and pods, kept between cycles by the cycle worker.

Each resource has a reflector thread, as client-go's Reflector: list in pages (`limit` +
`continue`), then watch from the list's resourceVersion with bookmarks, resume the watch from
the last resourceVersion seen when it ends, list again on 410 Gone. A steady-state cycle then
reads memory: the nodes, the portal's own pods and the requests other pods hold per node.

What is kept is small on purpose: an event's object is decoded into the client's model once,
handed to the translation (manifests.py, one translation for the list path and this one), and
dropped. A pod the portal owns keeps its ObservedPod; any other pod keeps only the node it is
on and what it requests there, summed per node as events arrive (the portal's own pods are
summed apart, for the bind pass's recheck: `nodes_room`). 100,000 pods of other
workloads therefore cost a few tuples, not 100,000 decoded objects.

Staleness is explicit: reads wait for the first full list, and fail (TransientClusterError,
like an unreachable API server) when the watch has not heard from the server for
`max_staleness` seconds, so a cycle never decides on a picture it cannot vouch for.

Given the jobs namespaces (`object_namespaces`), the cache also keeps the portal's job objects
there (ConfigMaps, Services, NetworkPolicies carrying `object_selector`'s labels): only
their identity (kind, namespace, name, uid, labels), which is all the reconcile's sweep and the owner
bookkeeping read. The portal's own creates and deletes are noted at once (`object_made`,
`object_deleting`), as client-go's MutationCache overlays an informer, so the next cycle neither
makes nor deletes them again while the watch catches up. An owner object the portal did not
delete that disappears (a DELETED event, or missing from a relist) is reported once by
`owners_gone`.

The official client's informer module (kubernetes.informer.SharedInformer, in client 35+) is
not used: it lists without `limit`/`continue`, decodes every object into a model on every
list, does not ask for bookmarks, and tracks the resourceVersion only when it decodes, which
is the 14-second decode this cache exists to avoid. `kubernetes.watch.Watch` is used for the
stream itself, given a list function without a declared return type so that it yields the
raw objects; the resourceVersion is tracked here.
"""

from __future__ import annotations

import copy
import functools
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import urllib3
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from jobspec.labels import DEFAULT_INSTANCE, OWNER
from jobspec.notice import DEADLINE_ANNOTATION
from scheduler.adapters.cluster.base import (
    NodeRoom,
    ObservedNode,
    ObservedPod,
    TransientClusterError,
)
from scheduler.adapters.cluster.gpushare import HELD_CARDS_ANNOTATIONS

logger = logging.getLogger(__name__)

Raw = dict[str, Any]
DEFAULT_PAGE_SIZE = 500
# The server ends each watch after this long, so even a quiet cluster proves contact this often.
DEFAULT_WATCH_SECONDS = 50
DEFAULT_MAX_STALENESS = 90.0
REFUSED_MAX_DELAY = 60.0
DEFAULT_UNWATCH_AFTER = 600.0
# Connections the cache's pool keeps for reuse: one per reflector (nodes, pods, three kinds per
# jobs namespace) up to 250 namespaces. A cap, not an allocation: more are opened if needed.
WATCH_POOL_SIZE = 1024
DEFAULT_SYNC_TIMEOUT = 60.0
_RETRYABLE = frozenset({429, 500, 502, 503, 504})
STALE = "cluster cache: no word from the API server about {what} for {seconds:.0f} s ({error})"
NOT_SYNCED = "cluster cache: {what} not listed within {seconds:.0f} s ({error})"


@dataclass(frozen=True)
class Translation:
    """How decoded objects become what the cycle reads (manifests.py's functions).

    `usage(pod)`: what the pod holds on its node (None when it holds nothing: unbound or
    finished); summed per node for pods the portal does not own (`owns(labels)` is False),
    and apart for its own.
    """

    node: Callable[[client.V1Node, Mapping[str, int]], ObservedNode]
    pod: Callable[[client.V1Pod], ObservedPod]
    usage: Callable[[client.V1Pod], Mapping[str, int] | None]
    owns: Callable[[Mapping[str, str]], bool]


@dataclass(slots=True)
class _Node:
    rv: str
    model: client.V1Node
    observed: ObservedNode | None = None  # memo, cleared when the node or its usage changes


@dataclass(frozen=True, slots=True)
class _Pod:
    rv: str
    observed: ObservedPod | None  # pods the portal owns
    node: str | None  # where the pod holds `usage` (None: nowhere)
    usage: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class JobObject:
    """One of the portal's job objects, as much of it as the sweep and the owners need."""

    kind: str  # one of OBJECT_KINDS
    namespace: str
    name: str
    uid: str
    labels: Mapping[str, str]

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.kind, self.namespace, self.name)

    @property
    def is_owner(self) -> bool:
        return self.kind == "ConfigMap" and self.labels.get(OWNER) == "true"


# The ssh plugin's Secrets are not among them: the worker has no read on Secrets (see
# KubernetesBackend.sweep_job_objects).
OBJECT_KINDS = ("ConfigMap", "Service", "NetworkPolicy")


@dataclass
class ReflectorStats:
    lists: int = 0
    relists_after_410: int = 0
    watches: int = 0
    events: int = 0
    bookmarks: int = 0
    errors: int = 0
    last_error: str = ""
    resource_version: str | None = None


class Reflector:
    """List then watch one resource into `replace(raws)` and `apply(type, raw)`.

    `run(stop)` is the thread body; `list_once` and `watch_once` are its steps, public so the
    tests can drive them one at a time.
    """

    def __init__(
        self,
        what: str,
        list_fn: Callable[..., Any],
        *,
        replace: Callable[[list[Raw]], None],
        apply: Callable[[str, Raw], None],
        page_size: int = DEFAULT_PAGE_SIZE,
        watch_seconds: int = DEFAULT_WATCH_SECONDS,
        request_timeout: tuple[float, float] = (5.0, 30.0),
        base_delay: float = 0.2,
        max_delay: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.what = what
        self._list_fn = list_fn
        self._replace = replace
        self._apply = apply
        self.page_size = page_size
        self.watch_seconds = watch_seconds
        self.request_timeout = request_timeout
        self.base_delay, self.max_delay = base_delay, max_delay
        self.clock = clock
        self.resource_version: str | None = None
        self.last_contact: float | None = None
        self.synced = threading.Event()
        self.stats = ReflectorStats()
        self._watch: watch.Watch | None = None
        self.retired = threading.Event()
        self._reported = ""  # the failure last logged as a warning, until one succeeds

    def run(self, stop: threading.Event) -> None:
        failures = 0
        while not (stop.is_set() or self.retired.is_set()):
            try:
                if self.resource_version is None:
                    self.list_once()
                self.watch_once()
                failures = 0
                self._reported = ""
            except Exception as error:  # the thread must outlive any one failure
                if stop.is_set() or self.retired.is_set():
                    return  # stop() or retire() cut the connection: not a failure
                failures += 1
                self._failed(error)
                stop.wait(max(self._delay(failures, error), _retry_after(error) or 0.0))

    def retire(self) -> None:
        """End this reflector's thread (within its current wait): what it keeps is no longer
        wanted, as a namespace that left the jobs namespaces."""
        self.retired.set()
        self.stop_watch()

    def stop_watch(self) -> None:
        if self._watch is not None:
            self._watch.stop()

    def _delay(self, failures: int, error: Exception) -> float:
        # A namespace refusing the portal (403: its Roles not applied; 404: not made yet) may
        # stay so for days: asked less often than a server that is briefly away.
        refused = isinstance(error, ApiException) and error.status in (403, 404)
        ceiling = REFUSED_MAX_DELAY if refused else self.max_delay
        return min(ceiling, self.base_delay * 2 ** min(failures, 16))

    def list_once(self) -> None:
        """A full list into `replace`. An expired continue token (the list took longer than
        the server keeps its snapshot) starts the list again, once with pages and then in
        one request, as client-go's pager does (FullListIfExpired)."""
        for limit in (self.page_size, self.page_size, 0):
            try:
                items, rv = self._list_pages(limit)
            except ApiException as error:
                if error.status != 410:
                    raise
                self.stats.relists_after_410 += 1
                logger.info("%s: list expired mid-way (410), listing again", self.what)
                continue
            self._replace(items)
            self.resource_version = self.stats.resource_version = rv
            self.stats.lists += 1
            self.last_contact = self.clock()
            self.synced.set()
            return
        raise TransientClusterError(f"{self.what}: every list expired before it finished")

    def watch_once(self) -> None:
        """One watch connection from the current resourceVersion, until the server ends it. On
        410 (the version was compacted away) the next step lists again."""
        if self.retired.is_set():
            return  # retired while it listed: no watch to open
        self._watch = stream = watch.Watch()
        self.stats.watches += 1
        read_timeout = self.watch_seconds + self.request_timeout[1]
        try:
            for event in stream.stream(
                _untyped(self._list_fn),
                resource_version=self.resource_version,
                allow_watch_bookmarks=True,
                timeout_seconds=self.watch_seconds,
                _request_timeout=(self.request_timeout[0], read_timeout),
            ):
                self._on_event(event)
        except ApiException as error:
            if error.status == 410:
                logger.info("%s: watch version expired (410), listing again", self.what)
                self.resource_version = None
                return
            raise
        finally:
            self._watch = None
        self.last_contact = self.clock()  # ended by the server's timeout: it was there

    def _on_event(self, event: dict[str, Any]) -> None:
        kind, obj = event.get("type"), event.get("raw_object") or event.get("object") or {}
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        if kind == "BOOKMARK":
            self.stats.bookmarks += 1
        elif kind in ("ADDED", "MODIFIED", "DELETED"):
            self._apply(kind, obj)
            self.stats.events += 1
        if rv:
            self.resource_version = self.stats.resource_version = rv
        self.last_contact = self.clock()

    def _list_pages(self, limit: int) -> tuple[list[Raw], str]:
        items: list[Raw] = []
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {
                "_preload_content": False,
                "_request_timeout": self.request_timeout,
            }
            if limit:
                kwargs["limit"] = limit
            if token:
                kwargs["_continue"] = token
            response = self._list_fn(**kwargs)
            try:
                page = json.loads(response.data)
            finally:
                response.release_conn()
            items.extend(page.get("items") or [])
            meta = page.get("metadata") or {}
            token = meta.get("continue")
            if not token:
                return items, str(meta.get("resourceVersion") or "")

    def _failed(self, error: Exception) -> None:
        self.stats.errors += 1
        self.stats.last_error = _describe(error)
        # Said once until it changes or the reflector recovers, not on every retry.
        level = logging.DEBUG if self.stats.last_error == self._reported else logging.WARNING
        self._reported = self.stats.last_error
        logger.log(level, "%s: %s; retrying", self.what, self.stats.last_error)


class ClusterCache:
    """Nodes and pods of the whole cluster, each kept by a Reflector thread.

    Reads (`nodes`, `owned_pods`) start the threads on first use, wait for the first lists,
    and refuse to answer from a picture older than `max_staleness` seconds.
    """

    def __init__(
        self,
        core_v1: client.CoreV1Api,
        translation: Translation,
        *,
        page_size: int = DEFAULT_PAGE_SIZE,
        watch_seconds: int = DEFAULT_WATCH_SECONDS,
        request_timeout: tuple[float, float] = (5.0, 30.0),
        max_staleness: float = DEFAULT_MAX_STALENESS,
        sync_timeout: float = DEFAULT_SYNC_TIMEOUT,
        clock: Callable[[], float] = time.monotonic,
        object_namespaces: Sequence[str] = (),
        object_selector: str = "",
        unwatch_after: float = DEFAULT_UNWATCH_AFTER,
    ) -> None:
        core_v1 = _connections_of_its_own(core_v1)
        self.translation = translation
        self.max_staleness = max_staleness
        self.sync_timeout = sync_timeout
        self.clock = clock
        self._lock = threading.Lock()
        self._nodes: dict[str, _Node] = {}
        self._pods: dict[tuple[str, str], _Pod] = {}
        self._owned: dict[tuple[str, str], ObservedPod] = {}  # the portal's: a few of _pods
        self._usage: dict[str, dict[str, int]] = {}
        self._portal_usage: dict[str, dict[str, int]] = {}  # the same, of the portal's own pods
        self._objects: dict[tuple[str, str, str], JobObject] = {}
        # uid -> (kind, namespace) of each object the portal deleted and the watch has not
        # yet reported gone.
        self._deleting: dict[str, tuple[str, str]] = {}
        # uids of objects the portal made that no list or event has shown yet: missing from a
        # relist, they may be newer than its snapshot, so they are not reported gone (their
        # ADDED event follows if they exist).
        self._unconfirmed: set[str] = set()
        self._owners_gone: list[JobObject] = []
        self.decode_errors = 0
        self._reflector_options = common = {
            "page_size": page_size,
            "watch_seconds": watch_seconds,
            "request_timeout": request_timeout,
            "clock": clock,
        }
        self.node_reflector = Reflector(
            "nodes",
            core_v1.list_node,
            replace=self._replace_nodes,
            apply=self._apply_node,
            **common,
        )
        self.pod_reflector = Reflector(
            "pods",
            core_v1.list_pod_for_all_namespaces,
            replace=self._replace_pods,
            apply=self._apply_pod,
            **common,
        )
        self._listers = object_listers(core_v1)
        self._object_selector = object_selector
        self.unwatch_after = unwatch_after
        self._unwanted_since: dict[str, float] = {}  # namespace -> when it was first not named
        # (kind, namespace) -> the reflector keeping those objects; changed by watch_namespaces
        # (the cycle's thread) under _reflectors_lock, read by stop() from any thread.
        self._object_reflector: dict[tuple[str, str], Reflector] = {}
        self._reflectors_lock = threading.Lock()
        self._stop = threading.Event()
        # every reflector's thread, retired ones until they end (stop() waits for those too)
        self._threads: dict[Reflector, threading.Thread] = {}
        self._pid: int | None = None
        self.watch_namespaces(object_namespaces)

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        """Start the reflector threads (again, in a process forked after they started)."""
        if self._threads and self._pid == os.getpid():
            return
        self._pid = os.getpid()
        self._stop.clear()
        with self._reflectors_lock:
            self._threads = {r: self._thread(r) for r in self._reflectors()}

    def _thread(self, reflector: Reflector) -> threading.Thread:
        thread = threading.Thread(
            target=reflector.run, args=(self._stop,), name=f"watch-{reflector.what}", daemon=True
        )
        thread.start()
        return thread

    def _reflectors(self) -> list[Reflector]:
        return [self.node_reflector, self.pod_reflector, *self.object_reflectors]

    @property
    def object_reflectors(self) -> list[Reflector]:
        return list(self._object_reflector.values())

    @property
    def object_namespaces(self) -> tuple[str, ...]:
        """The namespaces whose job objects this cache keeps (watches), sorted."""
        return tuple(sorted({namespace for _kind, namespace in self._object_reflector}))

    def keeps_objects(self, namespace: str) -> bool:
        # A namespace's kinds are watched and let go together.
        return (OBJECT_KINDS[0], namespace) in self._object_reflector

    def watch_namespaces(self, namespaces: Iterable[str]) -> None:
        """Keep the job objects of exactly these namespaces from now on: a reflector per kind
        for each new one (started at once if the cache runs; read from the API until its first
        list), and the reflectors of each one that left retired, with what they kept. With a
        namespace per tenant the set grows with the tenants; fixed at construction, every
        tenant's objects were listed from the API by every cycle, three lists per tenant.
        A namespace is let go once it has gone unnamed for `unwatch_after` seconds: the set a
        cycle names can differ from call to call (the namespaces of pods the cycle has just
        listed), and a watch dropped and made again lists everything again.
        A cache without an `object_selector` keeps no job objects (it would watch every team's
        ConfigMaps there)."""
        wanted = set(namespaces) if self._object_selector else set()
        now = self.clock()
        with self._reflectors_lock:
            kept = {namespace for _kind, namespace in self._object_reflector}
            running = bool(self._threads) and self._pid == os.getpid()
            for namespace in wanted:
                self._unwanted_since.pop(namespace, None)
            for namespace in sorted(kept - wanted):
                since = self._unwanted_since.setdefault(namespace, now)
                if now - since < self.unwatch_after:
                    continue
                del self._unwanted_since[namespace]
                for kind in OBJECT_KINDS:
                    self._object_reflector.pop((kind, namespace)).retire()
                self._forget_objects_in(namespace)
            for namespace in sorted(wanted - kept):
                for kind in OBJECT_KINDS:
                    reflector = self._object_reflector[(kind, namespace)] = Reflector(
                        f"{kind} in {namespace}",
                        functools.partial(
                            self._listers[kind], namespace, label_selector=self._object_selector
                        ),
                        replace=functools.partial(self._replace_objects, kind, namespace),
                        apply=functools.partial(self._apply_object, kind),
                        **self._reflector_options,
                    )
                    if running:
                        self._threads[reflector] = self._thread(reflector)
            self._threads = {r: t for r, t in self._threads.items() if t.is_alive()}

    def _forget_objects_in(self, namespace: str) -> None:
        with self._lock:
            uids = {obj.uid for key, obj in self._objects.items() if key[1] == namespace}
            self._objects = {k: o for k, o in self._objects.items() if k[1] != namespace}
            self._unconfirmed -= uids
            self._deleting = {u: w for u, w in self._deleting.items() if w[1] != namespace}
            self._owners_gone = [o for o in self._owners_gone if o.namespace != namespace]

    def stop(self, timeout: float = 5.0) -> None:
        """Stop every reflector within `timeout` in all. A watch can only be cut once its
        response has arrived (Watch.stop shuts its socket down), and a reflector that was
        still listing opens its watch after the stop: so the watches are stopped again until
        every thread is gone. Stopping once left a cache stopped during its start-up blocked
        5 s per thread, until each watch's server timeout."""
        self._stop.set()
        deadline = time.monotonic() + timeout
        with self._reflectors_lock:
            threads = dict(self._threads)
        while True:
            for reflector in threads:
                reflector.stop_watch()
            for thread in threads.values():
                thread.join(timeout=0.05)
            threads = {r: t for r, t in threads.items() if t.is_alive()}
            if not threads or time.monotonic() >= deadline:
                break
        with self._reflectors_lock:
            self._threads = {}

    # -- reads -------------------------------------------------------------------------------

    def nodes(self) -> list[ObservedNode]:
        self._ensure_current()
        with self._lock:
            observed = []
            for name in sorted(self._nodes):
                entry = self._nodes[name]
                if entry.observed is None:
                    entry.observed = self.translation.node(entry.model, self._usage.get(name, {}))
                observed.append(entry.observed)
            return observed

    def owned_pods(self) -> list[ObservedPod]:
        self._ensure_current()
        with self._lock:
            return [self._owned[key] for key in sorted(self._owned)]

    def job_objects(self, kind: str, namespace: str) -> list[JobObject] | None:
        """The portal's objects of `kind` in `namespace`; None when this cache does not keep
        them, or cannot vouch for them now (not listed yet; watch refused, as by an RBAC file
        without `watch`, or silent): the caller lists them instead, as without a cache. Unlike
        nodes and pods, a cycle can do without them, so it never waits or fails for them."""
        if not self._objects_current(kind, namespace):
            return None
        with self._lock:
            return [
                obj
                for key, obj in sorted(self._objects.items())
                if key[0] == kind and key[1] == namespace
            ]

    def job_object(self, kind: str, namespace: str, name: str) -> JobObject | None:
        """The portal's object of that identity, if this cache vouches for its namespace's
        objects of that kind and has it (None: make it, and take a 409 as success)."""
        if not self._objects_current(kind, namespace):
            return None
        with self._lock:
            return self._objects.get((kind, namespace, name))

    def owners_gone(self, namespace: str) -> list[JobObject]:
        """Owner objects in `namespace` that disappeared without the portal deleting them since
        the previous call (each reported once)."""
        with self._lock:
            gone = [obj for obj in self._owners_gone if obj.namespace == namespace]
            self._owners_gone = [obj for obj in self._owners_gone if obj.namespace != namespace]
        return gone

    def object_made(self, kind: str, raw_meta: Mapping[str, Any]) -> None:
        """The portal created this object (its answer's metadata): known before the watch says."""
        obj = _job_object(kind, raw_meta)
        if not self.keeps_objects(obj.namespace):
            return
        with self._lock:
            self._objects[obj.key] = obj
            self._unconfirmed.add(obj.uid)

    def object_deleting(self, kind: str, namespace: str, name: str) -> JobObject | None:
        """The portal is about to delete this object: forget it, and do not take its DELETED
        event for someone else's deletion. Hand the answer to `object_kept` if the delete
        fails."""
        with self._lock:
            obj = self._objects.pop((kind, namespace, name), None)
            if obj is not None:
                self._deleting[obj.uid] = (kind, namespace)
            return obj

    def object_kept(self, obj: JobObject | None) -> None:
        """The delete announced by `object_deleting` failed: the object is still there."""
        if obj is None:
            return
        with self._lock:
            if self._deleting.pop(obj.uid, None) is not None:
                self._objects.setdefault(obj.key, obj)

    def nodes_room(
        self, names: Iterable[str], ignore: Iterable[tuple[str, str]] = ()
    ) -> dict[str, NodeRoom]:
        """Each of `names` the cache knows, as the watch last heard: its allocatable, what
        other workloads' and the portal's unfinished pods hold there, the portal's pods
        `ignore` names ((namespace, name)) left out. No request."""
        self._ensure_current()
        with self._lock:
            rooms = {}
            for name in sorted(set(names)):
                entry = self._nodes.get(name)
                if entry is None:
                    continue
                if entry.observed is None:
                    entry.observed = self.translation.node(entry.model, self._usage.get(name, {}))
                rooms[name] = NodeRoom(
                    allocatable=dict(entry.observed.allocatable),
                    used_by_others=dict(self._usage.get(name, {})),
                    used_by_portal=dict(self._portal_usage.get(name, {})),
                )
            for key in ignore:
                pod = self._pods.get(key)
                if pod is not None and pod.observed is not None and pod.node in rooms:
                    held = rooms[pod.node].used_by_portal
                    for resource, amount in pod.usage:
                        held[resource] = held.get(resource, 0) - amount
                        if held[resource] == 0:
                            del held[resource]
            return rooms

    def usage(self) -> dict[str, dict[str, int]]:
        """node -> what pods the portal does not own request there (a copy)."""
        with self._lock:
            return {node: dict(held) for node, held in self._usage.items() if held}

    def stats(self) -> dict[str, Any]:
        with self._lock:
            counts = {
                "nodes": len(self._nodes),
                "pods": len(self._pods),
                "owned_pods": len(self._owned),
            }
        return {
            **counts,
            "job_objects": len(self._objects),
            "job_object_namespaces": len(self.object_namespaces),
            "decode_errors": self.decode_errors,
            "nodes_reflector": vars(self.node_reflector.stats),
            "pods_reflector": vars(self.pod_reflector.stats),
        }

    def _objects_current(self, kind: str, namespace: str) -> bool:
        reflector = self._object_reflector.get((kind, namespace))
        if reflector is None:
            return False
        self.start()
        silent = self.clock() - (reflector.last_contact or 0.0)
        return reflector.synced.is_set() and silent <= self.max_staleness

    def _ensure_current(self) -> None:
        self.start()
        for reflector in (self.node_reflector, self.pod_reflector):
            if not reflector.synced.wait(self.sync_timeout):
                raise TransientClusterError(
                    NOT_SYNCED.format(
                        what=reflector.what,
                        seconds=self.sync_timeout,
                        error=reflector.stats.last_error or "no answer yet",
                    )
                )
            silent = self.clock() - (reflector.last_contact or 0.0)
            if silent > self.max_staleness:
                raise TransientClusterError(
                    STALE.format(
                        what=reflector.what,
                        seconds=silent,
                        error=reflector.stats.last_error or "watch silent",
                    )
                )

    # -- writes from the reflectors ----------------------------------------------------------

    def _replace_nodes(self, raws: list[Raw]) -> None:
        with self._lock:
            current = self._nodes
        entries = {}
        for raw in raws:
            meta = raw.get("metadata") or {}
            name, rv = meta.get("name"), str(meta.get("resourceVersion") or "")
            old = current.get(name)
            if old is not None and old.rv == rv:
                entries[name] = _Node(rv, old.model)
                continue
            model = self._decode(client.V1Node, raw)
            if model is not None:
                entries[name] = _Node(rv, model)
        with self._lock:
            self._nodes = entries

    def _apply_node(self, kind: str, raw: Raw) -> None:
        meta = raw.get("metadata") or {}
        name = meta.get("name")
        if kind == "DELETED":
            with self._lock:
                self._nodes.pop(name, None)
            return
        model = self._decode(client.V1Node, raw)
        if model is not None:
            with self._lock:
                self._nodes[name] = _Node(str(meta.get("resourceVersion") or ""), model)

    def _replace_pods(self, raws: list[Raw]) -> None:
        with self._lock:
            old = self._pods
        entries: dict[tuple[str, str], _Pod] = {}
        for raw in raws:
            key, rv = _pod_key(raw)
            previous = old.get(key)
            entry = previous if previous is not None and previous.rv == rv else self._pod(raw)
            if entry is not None:
                entries[key] = entry
        usage: dict[str, dict[str, int]] = {}
        portal: dict[str, dict[str, int]] = {}
        for entry in entries.values():
            _add_usage(usage if entry.observed is None else portal, entry, +1)
        with self._lock:
            changed = {
                n for n in set(usage) | set(self._usage) if usage.get(n) != self._usage.get(n)
            }
            self._pods, self._usage, self._portal_usage = entries, usage, portal
            self._owned = {k: e.observed for k, e in entries.items() if e.observed is not None}
            self._forget_nodes(changed)

    def _apply_pod(self, kind: str, raw: Raw) -> None:
        key, _rv = _pod_key(raw)
        entry = None if kind == "DELETED" else self._pod(raw)
        with self._lock:
            previous = self._pods.pop(key, None)
            self._owned.pop(key, None)
            if previous is not None:
                _add_usage(self._usage_of(previous), previous, -1)
            if entry is not None:
                self._pods[key] = entry
                _add_usage(self._usage_of(entry), entry, +1)
                if entry.observed is not None:
                    self._owned[key] = entry.observed
            # The nodes' memo holds other workloads' usage only.
            self._forget_nodes(
                {
                    e.node
                    for e in (previous, entry)
                    if e is not None and e.node and e.observed is None
                }
            )

    def _usage_of(self, entry: _Pod) -> dict[str, dict[str, int]]:
        return self._usage if entry.observed is None else self._portal_usage

    def _replace_objects(self, kind: str, namespace: str, raws: list[Raw]) -> None:
        fresh = {}
        for raw in raws:
            obj = _job_object(kind, raw.get("metadata") or {})
            fresh[obj.key] = obj
        listed = {obj.uid for obj in fresh.values()}
        with self._lock:
            for key, old in list(self._objects.items()):
                if key[0] != kind or key[1] != namespace:
                    continue
                del self._objects[key]
                if old.uid in self._unconfirmed:
                    self._unconfirmed.discard(old.uid)
                elif old.is_owner and old.uid not in listed and old.uid not in self._deleting:
                    self._owners_gone.append(old)  # gone while the watch was down
            # A deletion the list no longer shows is over; one it still shows is under way.
            for uid, where in list(self._deleting.items()):
                if where == (kind, namespace) and uid not in listed:
                    del self._deleting[uid]
            self._objects.update(
                (key, obj) for key, obj in fresh.items() if obj.uid not in self._deleting
            )

    def _apply_object(self, kind: str, event: str, raw: Raw) -> None:
        obj = _job_object(kind, raw.get("metadata") or {})
        with self._lock:
            self._unconfirmed.discard(obj.uid)
            current = self._objects.get(obj.key)
            if event == "DELETED":
                if current is not None and current.uid == obj.uid:
                    del self._objects[obj.key]
                if self._deleting.pop(obj.uid, None) is None and obj.is_owner:
                    self._owners_gone.append(obj)
            elif obj.uid not in self._deleting:  # a late event of what the portal deleted
                self._objects[obj.key] = obj

    def _pod(self, raw: Raw) -> _Pod | None:
        rv = str((raw.get("metadata") or {}).get("resourceVersion") or "")
        if self.translation.owns((raw.get("metadata") or {}).get("labels") or {}):
            model = self._decode(client.V1Pod, raw)
            if model is None:
                return None
            held = self.translation.usage(model)
            node = model.spec.node_name if held else None
            return _Pod(rv, self.translation.pod(model), node, tuple(sorted((held or {}).items())))
        # Another workload's pod: only what it holds on its node matters, and decoding just
        # those fields costs a fifth of decoding the whole pod (100,000 pods: seconds, not
        # a minute).
        model = self._decode(client.V1Pod, usage_view(raw))
        if model is None:
            return None
        held = self.translation.usage(model)
        if not held:
            return _Pod(rv, None, None)
        return _Pod(rv, None, model.spec.node_name, tuple(sorted(held.items())))

    def _forget_nodes(self, names: Iterable[str]) -> None:
        for name in names:
            entry = self._nodes.get(name)
            if entry is not None:
                entry.observed = None

    def _decode(self, model: Any, raw: Raw) -> Any:
        try:
            return model.from_dict(raw)
        except Exception as error:  # one malformed object must not stop the cache
            self.decode_errors += 1
            logger.warning(
                "cluster cache: cannot decode %s %s: %s",
                model.__name__,
                (raw.get("metadata") or {}).get("name"),
                error,
            )
            return None


# What usage_view leaves out: fields no resource accounting reads (manifests.others_usage and
# occupies_node read containers' resources, init containers, overhead, nodeName, phase and the
# annotations naming a shared GPU pod's cards), but the preemption deadline the reconcile
# compares with its placement's.
# Left out by name, so a field the accounting may come to read (pod-level resources, a
# sidecar's restartPolicy) stays in; test_watch_cache proves the view counts as the whole pod.
_UNUSED_POD_METADATA = ("annotations", "managedFields", "ownerReferences", "finalizers")
_UNUSED_POD_SPEC = ("volumes", "tolerations", "affinity", "topologySpreadConstraints",
                    "imagePullSecrets", "securityContext", "dnsConfig", "hostAliases",
                    "readinessGates", "schedulingGates")  # fmt: skip
_UNUSED_CONTAINER = ("env", "envFrom", "volumeMounts", "volumeDevices", "ports", "command",
                     "args", "livenessProbe", "readinessProbe", "startupProbe", "lifecycle",
                     "securityContext")  # fmt: skip
_UNUSED_POD_STATUS = ("conditions", "containerStatuses", "initContainerStatuses",
                      "ephemeralContainerStatuses", "podIPs", "hostIPs", "resourceClaimStatuses")  # fmt: skip


_KEPT_ANNOTATIONS = frozenset({*HELD_CARDS_ANNOTATIONS, DEADLINE_ANNOTATION})


def usage_view(raw: Raw) -> Raw:
    """The pod without the fields resource accounting never reads (a shallow copy)."""
    meta = {k: v for k, v in (raw.get("metadata") or {}).items() if k not in _UNUSED_POD_METADATA}
    # Of the annotations, only those naming the cards a shared GPU pod holds, and its
    # preemption deadline.
    cards = {
        k: v
        for k, v in ((raw.get("metadata") or {}).get("annotations") or {}).items()
        if k in _KEPT_ANNOTATIONS
    }
    if cards:
        meta["annotations"] = cards
    spec = {k: v for k, v in (raw.get("spec") or {}).items() if k not in _UNUSED_POD_SPEC}
    for kind in ("containers", "initContainers"):
        if spec.get(kind):
            spec[kind] = [
                {k: v for k, v in container.items() if k not in _UNUSED_CONTAINER}
                for container in spec[kind]
            ]
    status = {k: v for k, v in (raw.get("status") or {}).items() if k not in _UNUSED_POD_STATUS}
    return {**raw, "metadata": meta, "spec": spec, "status": status}


def _job_object(kind: str, meta: Mapping[str, Any]) -> JobObject:
    return JobObject(
        kind=kind,
        namespace=meta.get("namespace") or "",
        name=meta.get("name") or "",
        uid=meta.get("uid") or "",
        labels=dict(meta.get("labels") or {}),
    )


def _add_usage(usage: dict[str, dict[str, int]], entry: _Pod, sign: int) -> None:
    if not entry.node:
        return
    held = usage.setdefault(entry.node, {})
    for name, amount in entry.usage:
        held[name] = held.get(name, 0) + sign * amount
        if held[name] == 0:
            del held[name]
    if not held:
        del usage[entry.node]


def _pod_key(raw: Raw) -> tuple[tuple[str, str], str]:
    meta = raw.get("metadata") or {}
    key = (meta.get("namespace") or "", meta.get("name") or "")
    return key, str(meta.get("resourceVersion") or "")


def object_listers(core_v1: client.CoreV1Api) -> dict[str, Callable[..., Any]]:
    """Each kind of job object (OBJECT_KINDS) -> its namespaced list call (`watch=True`: its
    watch), on `core_v1`'s connection."""
    networking = client.NetworkingV1Api(core_v1.api_client)
    return {
        "ConfigMap": core_v1.list_namespaced_config_map,
        "Service": core_v1.list_namespaced_service,
        "NetworkPolicy": networking.list_namespaced_network_policy,
    }


def _connections_of_its_own(core_v1: client.CoreV1Api) -> client.CoreV1Api:
    """The same API server and credentials, in a connection pool of the cache's own. Each
    reflector holds a connection for its watch (with a namespace per tenant, three per tenant):
    in the cycle's pool (its size 5 per core by default) they crowded out the cycle's requests,
    and every watch that ended had its connection discarded ("Connection pool is full") and
    a new one, with its TLS handshake, made for the next."""
    configuration = copy.deepcopy(core_v1.api_client.configuration)
    configuration.connection_pool_maxsize = max(
        configuration.connection_pool_maxsize or 0, WATCH_POOL_SIZE
    )
    return client.CoreV1Api(client.ApiClient(configuration))


def _untyped(list_fn: Callable[..., Any]) -> Callable[..., Any]:
    """The same call, without the declared return type: Watch then yields raw objects instead
    of decoding each into a model (it finds the model through the return annotation)."""

    def call(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - no annotation on purpose
        return list_fn(*args, **kwargs)

    return call


def _retry_after(error: Exception) -> float | None:
    if isinstance(error, ApiException) and error.status == 429:
        try:
            return float((error.headers or {}).get("Retry-After") or 0) or None
        except ValueError:
            return None
    return None


def _describe(error: Exception) -> str:
    if isinstance(error, ApiException):
        return f"HTTP {error.status} {error.reason}"
    if isinstance(error, urllib3.exceptions.HTTPError | ConnectionError | TimeoutError):
        return f"{type(error).__name__}: {error}"
    return f"{type(error).__name__}: {error}"


def manifests_translation(instance: str = DEFAULT_INSTANCE) -> Translation:
    """The translation the list path uses (manifests.py), for the cache to hand objects to;
    the pods `instance` owns are the portal's, every other pod is another workload's."""
    from jobspec.labels import owned_by
    from scheduler.adapters.cluster.manifests import (
        observed_node_from,
        observed_pod_from,
        occupies_node,
        others_usage,
    )

    return Translation(
        node=observed_node_from,
        pod=observed_pod_from,
        usage=lambda pod: others_usage(pod) if occupies_node(pod) else None,
        owns=owned_by(instance),
    )


@dataclass
class _Registry:
    """One cache per process and API server: the cycle worker keeps it between tasks."""

    caches: dict[Any, ClusterCache] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


_registry = _Registry()


def shared_cache(key: Any, build: Callable[[], ClusterCache]) -> ClusterCache:
    with _registry.lock:
        cache = _registry.caches.get(key)
        if cache is None:
            cache = _registry.caches[key] = build()
        return cache


def forget_shared_caches() -> None:
    """Stop and drop every shared cache (tests; a settings change)."""
    with _registry.lock:
        caches, _registry.caches = list(_registry.caches.values()), {}
    for cache in caches:
        cache.stop()
