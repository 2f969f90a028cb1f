"""ClusterBackend over the official `kubernetes` client.

Every call goes through one retry loop: server errors, throttling, connection failures and
timeouts are retried with capped exponential backoff; everything else fails at once. Retrying a
create is safe because pod names are deterministic: if an earlier attempt reached the server
before failing, the retry gets 409 and the existing pod is accepted when it is the same replica.

Writes also share a circuit breaker: once `breaker_threshold` writes in a row gave up because
the API server failed or could not be reached, the remaining writes fail at once until a call
succeeds (the next cycle's list, at the latest). Without it, a reconcile pass of 1,000 pods
against a hung API server would hold the cycle lock for hours of timeouts and retries.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from jobspec.labels import (
    DEFAULT_INSTANCE,
    JOB_ID,
    name_holder,
    owned_by,
    owned_selector,
    replica_key,
)
from scheduler.adapters.cluster.base import (
    ClusterError,
    DesiredPod,
    NameTakenError,
    NodeRoom,
    ObservedNode,
    ObservedPod,
    PodEvent,
    PodLog,
    RefusedClusterError,
    TransientClusterError,
)
from scheduler.adapters.cluster.manifests import (
    nodes_observed,
    observed_node_from,
    observed_pod_from,
    occupies_node,
    others_usage,
    pod_manifest,
)
from scheduler.adapters.cluster.owner import (
    OWNER_DELETED,
    owner_job_id,
    owner_manifest,
    owner_reference,
    with_owner,
)
from scheduler.adapters.cluster.sshkeys import with_key_pair
from scheduler.adapters.cluster.watch_cache import OBJECT_KINDS, JobObject, object_listers

if TYPE_CHECKING:
    from scheduler.adapters.cluster.watch_cache import ClusterCache

T = TypeVar("T")
logger = logging.getLogger(__name__)

_RETRYABLE_STATUSES = frozenset({429, 500, 502, 503, 504})
_REFUSING_NAMESPACES: set[str] = set()  # warned about already (_job_objects_in)
_PAGE_SIZE = 500


@dataclass(frozen=True)
class RetryPolicy:
    """attempts counts the first try. Delays double from base_delay up to max_delay; no jitter,
    because one cycle runs at a time cluster-wide, so there is no herd to spread out."""

    attempts: int = 4
    base_delay: float = 0.2
    max_delay: float = 5.0
    sleep: Callable[[float], None] = time.sleep

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("RetryPolicy.attempts counts the first try and must be >= 1")

    def delay(self, retry_number: int, server_hint: float | None = None) -> float:
        backoff = min(self.max_delay, self.base_delay * (2**retry_number))
        if server_hint is not None:
            # Honour Retry-After from a throttling server, but never wait longer than our cap.
            backoff = min(self.max_delay, max(backoff, server_hint))
        return backoff


# (connect, read) seconds: a hung API server must not hold the cycle lock forever.
DEFAULT_REQUEST_TIMEOUT: tuple[float, float] = (5.0, 30.0)
DEFAULT_BREAKER_THRESHOLD = 3
DEFAULT_SCHEDULER_NAME = "gpuportal"
# Writes of one reconcile pass in flight at once (KUBERNETES_WRITE_CONCURRENCY): a cycle that
# starts a thousand pods waits on a thousand round trips, which overlap well; the API server's
# priority and fairness, not this number, is what protects it.
DEFAULT_WRITE_CONCURRENCY = 8
EVENT_MESSAGE_CHARS = 1024  # what the API server keeps of an Event's message
BREAKER_OPEN = "{where}: skipped, the API server failed {count} writes in a row this pass"


class ApiUnavailable(TransientClusterError):
    """A call gave up because the API server kept failing (5xx, 429) or could not be reached,
    as opposed to something about this one object (a predecessor pod still terminating)."""


class KubernetesBackend:
    lists_cluster_nodes = True
    makes_job_objects = True

    def __init__(
        self,
        core_v1: client.CoreV1Api,
        namespace: str,
        gpu_resource_names: Iterable[str],
        retry: RetryPolicy | None = None,
        *,
        request_timeout: float | tuple[float, float] = DEFAULT_REQUEST_TIMEOUT,
        breaker_threshold: int = DEFAULT_BREAKER_THRESHOLD,
        scheduler_name: str = DEFAULT_SCHEDULER_NAME,
        instance: str = DEFAULT_INSTANCE,
        write_concurrency: int = DEFAULT_WRITE_CONCURRENCY,
    ) -> None:
        if write_concurrency < 1:
            raise ValueError("write_concurrency must be at least 1 (1: one write at a time)")
        self.write_concurrency = write_concurrency
        self._breaker_lock = threading.Lock()
        self.scheduler_name = scheduler_name
        self.instance = instance
        self._owns = owned_by(instance)
        self.core_v1 = core_v1
        self.namespace = namespace
        self.gpu_resource_names = tuple(gpu_resource_names)
        self.retry = retry or RetryPolicy()
        self.request_timeout = request_timeout
        self.breaker_threshold = breaker_threshold
        self._writes_failed_in_a_row = 0
        # Job objects (svc plugin: Service, ConfigMap, NetworkPolicy; ssh: Secret) known to exist, so each
        # is created once per process rather than before every pod of its job.
        # -> the owner object (namespace, name) they were made under.
        self._objects_made: dict[tuple[str, str, str], tuple[str, str]] = {}
        # Owner objects (cluster.owner) known to exist: (namespace, name) -> uid, refreshed
        # from the API by every list_pods; one that vanished without the portal deleting it
        # is reported by owners_deleted().
        self._owners: dict[tuple[str, str], str] = {}
        self._owners_gone: dict[str, str] = {}  # job id -> why
        # With a watch cache (watch_cache.ClusterCache), reads come from memory.
        self.cache: ClusterCache | None = None
        # The other namespaces the portal's job objects may be in (a namespace per tenant;
        # jobs started under another setting): portal.cluster.namespaces.job_namespaces.
        self.namespaces: Callable[[], Iterable[str]] | None = None
        self._pod_namespaces: set[str] = set()  # where list_pods last found the portal's pods
        self._refusing: set[str] = set()  # namespaces that answered 403 to this backend's lists
        # node -> allocatable, as this backend last listed it (the cycle's phase 1).
        self._allocatable: dict[str, dict[str, int]] = {}

    @classmethod
    def from_config(
        cls,
        namespace: str,
        gpu_resource_names: Iterable[str],
        retry: RetryPolicy | None = None,
        *,
        context: str | None = None,
        request_timeout: float | tuple[float, float] = DEFAULT_REQUEST_TIMEOUT,
        scheduler_name: str = DEFAULT_SCHEDULER_NAME,
        instance: str = DEFAULT_INSTANCE,
        write_concurrency: int = DEFAULT_WRITE_CONCURRENCY,
    ) -> KubernetesBackend:
        """kubeconfig (KUBECONFIG or ~/.kube/config) when one exists, else the in-cluster
        service account. Uses its own Configuration so the process-wide default stays untouched."""
        configuration = client.Configuration()
        try:
            kubeconfig = _kubeconfig_path()
            if kubeconfig is not None:
                config.load_kube_config(
                    config_file=kubeconfig, context=context, client_configuration=configuration
                )
            else:
                config.load_incluster_config(client_configuration=configuration)
        except ConfigException as exc:
            raise ClusterError(f"no usable Kubernetes configuration: {exc}") from exc
        return cls.from_configuration(
            configuration,
            namespace,
            gpu_resource_names,
            retry,
            request_timeout=request_timeout,
            scheduler_name=scheduler_name,
            instance=instance,
            write_concurrency=write_concurrency,
        )

    @classmethod
    def from_configuration(
        cls,
        configuration: client.Configuration,
        namespace: str,
        gpu_resource_names: Iterable[str],
        retry: RetryPolicy | None = None,
        *,
        request_timeout: float | tuple[float, float] = DEFAULT_REQUEST_TIMEOUT,
        scheduler_name: str = DEFAULT_SCHEDULER_NAME,
        instance: str = DEFAULT_INSTANCE,
        write_concurrency: int = DEFAULT_WRITE_CONCURRENCY,
    ) -> KubernetesBackend:
        """A backend on an explicit client Configuration (tests point its host at an emulator).

        Switches off urllib3's own retries: left on, they silently repeat connection errors and
        sleep through 429/503 Retry-After underneath our policy, so neither the attempt count
        nor the time a cycle can spend waiting would be what RetryPolicy says.
        """
        configuration.retries = False
        # A connection per concurrent write, so none waits on the pool (urllib3's default
        # is cpu count x 5).
        configuration.connection_pool_maxsize = max(
            configuration.connection_pool_maxsize, write_concurrency + 2
        )
        api = client.CoreV1Api(client.ApiClient(configuration))
        return cls(
            api,
            namespace,
            gpu_resource_names,
            retry,
            request_timeout=request_timeout,
            scheduler_name=scheduler_name,
            instance=instance,
            write_concurrency=write_concurrency,
        )

    # -- reads -------------------------------------------------------------------------------

    def list_nodes(self) -> list[ObservedNode]:
        """Every node, with what pods the portal does not own hold on it: those pods are read
        in every namespace (DaemonSets, other schedulers, other portal instances)."""
        if self.cache is not None:
            return self.cache.nodes()
        nodes = self._list_all("list nodes", self.core_v1.list_node)
        pods = self._list_all(
            "list pods in all namespaces", self.core_v1.list_pod_for_all_namespaces
        )
        observed = nodes_observed(nodes, pods, self._owns)
        self._allocatable = {node.name: node.allocatable for node in observed}
        return observed

    def nodes_room(
        self, names: Sequence[str], ignore: Collection[tuple[str, str]] = ()
    ) -> dict[str, NodeRoom]:
        """From the watch cache when it runs (memory, no request); else one list of each
        node's pods (field selector spec.nodeName, `write_concurrency` nodes at a time)
        against the allocatable this backend listed (a node it has not listed: one list of
        that node first). Allocatable changes with the node's hardware, its pods with every
        bind: only the pods are read again."""
        if self.cache is not None:
            return self.cache.nodes_room(names, ignore)
        skipped = set(ignore)
        rooms: dict[str, NodeRoom] = {}
        errors: list[Exception] = []

        def one(name: str) -> None:
            try:
                room = self._node_room(name, skipped)
            # Deliberately broad, as _outcome: the caller hears of the first error.
            except Exception as error:
                errors.append(error)
                return
            if room is not None:
                rooms[name] = room

        self._concurrently(one, names)
        if errors:
            raise errors[0]
        return {name: rooms[name] for name in sorted(rooms)}

    def _node_room(self, name: str, skipped: set[tuple[str, str]]) -> NodeRoom | None:
        allocatable = self._allocatable.get(name)
        if allocatable is None:
            listed = self._list_all(
                f"list node {name}", self.core_v1.list_node, field_selector=f"metadata.name={name}"
            )
            if not listed:
                return None
            allocatable = observed_node_from(listed[0]).allocatable
        pods = self._list_all(
            f"list the pods on node {name}",
            self.core_v1.list_pod_for_all_namespaces,
            field_selector=f"spec.nodeName={name}",
        )
        room = NodeRoom(allocatable=dict(allocatable))
        for pod in pods:
            if not occupies_node(pod) or pod.spec.node_name != name:
                continue
            if (pod.metadata.namespace, pod.metadata.name) in skipped:
                continue
            owned = self._owns(pod.metadata.labels or {})
            held = room.used_by_portal if owned else room.used_by_others
            for resource, amount in others_usage(pod).items():
                held[resource] = held.get(resource, 0) + amount
        return room

    def list_pods(self) -> list[ObservedPod]:
        """This instance's pods in every namespace: its instance label, not a namespace, is
        what makes a pod the portal's, so pods of jobs started in another namespace (a
        namespace per tenant, switched on or off) are still seen, kept or cleaned up. Read
        cluster-wide, which the ClusterRole grants anyway for other workloads' usage."""
        self._owners_refresh()
        if self.cache is not None:
            managed = [pod for pod in self.cache.owned_pods() if self._owns(pod.labels)]
        else:
            items = self._list_all(
                "list the portal's pods in all namespaces",
                self.core_v1.list_pod_for_all_namespaces,
                label_selector=owned_selector(self.instance),
            )
            pods = (observed_pod_from(pod) for pod in items)
            # The selector already did this; filtering again means a proxy or API server that
            # ignores selectors can never make reconcile delete pods the portal does not own
            # (another workload's, another portal instance's).
            managed = sorted(
                (pod for pod in pods if self._owns(pod.labels)),
                key=lambda p: (p.namespace, p.name),
            )
        self._pod_namespaces = {pod.namespace for pod in managed}
        return managed

    def namespaces_missing(self, names: Iterable[str]) -> set[str]:
        """Which of `names` no namespace has, or has only while it is being deleted (nothing
        can be created there): one list of namespaces, which the ClusterRole grants."""
        wanted = set(names)
        if not wanted:
            return set()
        items = self._list_all("list namespaces", self.core_v1.list_namespace)
        usable = {
            item.metadata.name
            for item in items
            if not (item.status is not None and item.status.phase == "Terminating")
        }
        return wanted - usable

    def namespace_labels(self, names: Iterable[str]) -> dict[str, dict[str, str]]:
        """The labels of each of `names` that exists: one list of namespaces (the ClusterRole's
        grant), for the configuration check's comparison with the tenants' pod security
        levels."""
        wanted = set(names)
        if not wanted:
            return {}
        items = self._list_all("list namespaces", self.core_v1.list_namespace)
        return {
            item.metadata.name: dict(item.metadata.labels or {})
            for item in items
            if item.metadata.name in wanted
        }

    def namespaces_refusing(self) -> set[str]:
        """Namespaces that refused this backend's lists of the portal's objects (403): its
        Roles are not there, so nothing of a job could be made there either."""
        return set(self._refusing)

    def job_namespaces(self) -> list[str]:
        """Every namespace this instance's job objects may be in: the jobs namespace, the ones
        `namespaces` names, and wherever its pods and owner objects were last seen. Objects
        are listed in each by label (namespaced Roles, so never cluster-wide: that would
        need read access to every team's ConfigMaps and Services)."""
        found = {self.namespace, *self._pod_namespaces, *(ns for ns, _ in self._owners)}
        if self.namespaces is not None:
            found.update(self.namespaces())
        if self.cache is not None:
            self.cache.watch_namespaces(found)  # a new tenant's namespace is watched from now on
        return sorted(found)

    def _job_objects_in(self, kind: str, namespace: str) -> list[JobObject] | None:
        """_job_objects, or None when that namespace refuses us (403: its Roles are not there
        yet; 404): a tenant namespace an admin has not set up must not stop the others'."""
        try:
            return self._job_objects(kind, namespace)
        except RefusedClusterError as error:
            if error.status not in (403, 404):
                raise
            if error.status == 403:
                self._refusing.add(namespace)
            # Once per process and namespace: a tenant's namespace may wait days for its
            # admin, and the cycle asks every few seconds.
            level = logging.DEBUG if namespace in _REFUSING_NAMESPACES else logging.WARNING
            _REFUSING_NAMESPACES.add(namespace)
            logger.log(level, "%s: skipped: %s", namespace, error)
            return None

    def owners_deleted(self) -> dict[str, str]:
        """job id -> why, for each job whose owner object someone else deleted since the
        previous list_pods: the garbage collector takes its pods, so the job is lost."""
        gone, self._owners_gone = self._owners_gone, {}
        return gone

    def _owners_refresh(self) -> None:
        fresh: dict[tuple[str, str], str] = {}
        gone: set[tuple[str, str]] = set()
        for namespace in self.job_namespaces():
            objects = self._job_objects_in("ConfigMap", namespace)
            if objects is None:  # not readable now: what was known there stands
                fresh.update({key: uid for key, uid in self._owners.items() if key[0] == namespace})
                continue
            here = {
                (obj.namespace, obj.name): obj.uid
                for obj in objects
                if obj.is_owner and self._owns(obj.labels)
            }
            fresh.update(here)
            if self._objects_cached(namespace):
                # The cache saw each deletion, also between two cycles' backends.
                gone |= {
                    (obj.namespace, obj.name)
                    for obj in self.cache.owners_gone(namespace)  # type: ignore[union-attr]
                    if self._owns(obj.labels)
                }
            else:
                gone |= {
                    key
                    for key, uid in self._owners.items()
                    if key[0] == namespace and here.get(key) != uid
                }
        for key in sorted(gone):
            # Deleted (or deleted and made again) behind the portal's back: its dependents
            # are the garbage collector's now, and the ones the portal made must be made again.
            job_id = owner_job_id(key[1])
            self._owners_gone[job_id] = OWNER_DELETED.format(namespace=key[0], name=key[1])
            self._objects_made = {
                made: under for made, under in self._objects_made.items() if under != key
            }
        self._owners = fresh

    def _objects_cached(self, namespace: str | None = None) -> bool:
        namespace = namespace or self.namespace
        return self.cache is not None and self.cache.keeps_objects(namespace)

    def _job_objects(
        self, kind: str, namespace: str | None = None, *, from_api: bool = False
    ) -> list[JobObject]:
        """This instance's objects of `kind` (one of OBJECT_KINDS): from the watch cache when
        it keeps them, else listed by label."""
        namespace = namespace or self.namespace
        if self.cache is not None and not from_api:
            cached = self.cache.job_objects(kind, namespace)
            if cached is not None:
                return cached
        list_fn = object_listers(self.core_v1)[kind]
        items = self._list_all(
            f"list {kind} in {namespace}",
            list_fn,
            namespace,
            label_selector=owned_selector(self.instance),
        )
        return [
            JobObject(
                kind=kind,
                namespace=item.metadata.namespace,
                name=item.metadata.name,
                uid=item.metadata.uid,
                labels=item.metadata.labels or {},
            )
            for item in items
        ]

    def pod_log(self, name: str, namespace: str, tail: int) -> PodLog:
        """The pods/log subresource (the main container, its last `tail` lines) and the pod's
        outcome; a pod that is gone has no log left, nor one that has not started (an empty
        answer, not an error)."""
        try:
            pod = self._with_retries(
                f"read pod {namespace}/{name}",
                lambda: self.core_v1.read_namespaced_pod(
                    name, namespace, _request_timeout=self.request_timeout
                ),
            )
        except RefusedClusterError as exc:
            if exc.status == 404:
                return PodLog(pod=name, lines=[])
            raise
        observed = observed_pod_from(pod)
        containers = [c.name for c in (pod.spec.containers or [])] if pod.spec else []
        reason = observed.reason
        try:
            text = self._with_retries(
                f"read log of pod {namespace}/{name}",
                lambda: self.core_v1.read_namespaced_pod_log(
                    name,
                    namespace,
                    container=containers[0] if containers else None,
                    tail_lines=tail,
                    _request_timeout=self.request_timeout,
                ),
            )
        except RefusedClusterError as exc:
            if exc.status == 404:  # deleted since it was read
                return PodLog(pod=name, lines=[])
            # No log yet ("container "main" in pod "x" is waiting to start: ContainerCreating",
            # "pod x does not have a host assigned"): the server's words say why when the
            # pod's state does not.
            if exc.status != 400:
                raise
            text, reason = "", reason or exc.message
        return PodLog(
            pod=name,
            lines=str(text or "").splitlines()[-tail:],
            phase=observed.phase,
            exit_code=observed.exit_code,
            reason=reason,
        )

    # -- writes ------------------------------------------------------------------------------

    def create_pods(self, pods: Sequence[DesiredPod]) -> list[Exception | None]:
        """create_pod for each, up to `write_concurrency` at once. A job's pods are created in
        order by one worker (its owner object and plugin objects come first, once), so only
        different jobs' writes overlap. One outcome per pod, in the order given."""
        by_job: dict[str, list[int]] = {}
        for index, pod in enumerate(pods):
            by_job.setdefault(pod.labels.get(JOB_ID, ""), []).append(index)
        outcomes: list[Exception | None] = [None] * len(pods)

        def create_job(indices: list[int]) -> None:
            for index in indices:
                outcomes[index] = _outcome(functools.partial(self.create_pod, pods[index]))

        self._concurrently(create_job, by_job.values())
        return outcomes

    def bind_pods(self, pods: Sequence[tuple[str, str, str]]) -> list[Exception | None]:
        """bind_pod for each (name, namespace, node), up to `write_concurrency` at once."""
        return self._each_concurrently(lambda ref: self.bind_pod(*ref), pods)

    def delete_pods(
        self, pods: Sequence[tuple[str, str]], grace_seconds: int
    ) -> list[Exception | None]:
        """delete_pod for each (name, namespace), up to `write_concurrency` at once."""
        return self._each_concurrently(
            lambda ref: self.delete_pod(ref[0], ref[1], grace_seconds), pods
        )

    def _each_concurrently(
        self, write: Callable[[Any], None], refs: Sequence[Any]
    ) -> list[Exception | None]:
        outcomes: list[Exception | None] = [None] * len(refs)

        def one(index: int) -> None:
            outcomes[index] = _outcome(lambda: write(refs[index]))

        self._concurrently(one, range(len(refs)))
        return outcomes

    def _concurrently(self, work: Callable[[Any], None], items: Iterable[Any]) -> None:
        """`work(item)` for each item, `write_concurrency` at a time (in this thread when 1).
        `work` records its own outcome and never raises."""
        items = list(items)
        if self.write_concurrency == 1 or len(items) < 2:
            for item in items:
                work(item)
            return
        workers = min(self.write_concurrency, len(items))
        with ThreadPoolExecutor(workers, thread_name_prefix="kube-write") as pool:
            for done in [pool.submit(work, item) for item in items]:
                done.result()

    def create_pod(self, pod: DesiredPod) -> None:
        manifest = pod_manifest(pod, self.gpu_resource_names, self.scheduler_name)
        owner = self._ensure_owner(pod.labels[JOB_ID], pod.owner_object, pod.namespace)
        manifest.metadata.owner_references = [
            client.V1OwnerReference(
                api_version=owner["apiVersion"], kind=owner["kind"], name=owner["name"],
                uid=owner["uid"],
            )
        ]  # fmt: skip
        for obj in pod.job_objects:
            self._ensure_object(with_owner(obj, owner), owner["name"])
        where = f"create pod {pod.namespace}/{pod.name}"

        def attempt() -> None:
            try:
                # The answer (the pod as stored) is not read: decoding it into the client's
                # models costs more CPU than the request itself.
                answer = self.core_v1.create_namespaced_pod(
                    pod.namespace,
                    manifest,
                    _preload_content=False,
                    _request_timeout=self.request_timeout,
                )
                _discard(answer)
            except ApiException as exc:
                if exc.status != 409:
                    raise
                self._accept_existing(pod, where)

        self._write(where, attempt)

    def delete_pod(self, name: str, namespace: str, grace_seconds: int) -> None:
        where = f"delete pod {namespace}/{name}"

        def attempt() -> None:
            try:
                self.core_v1.delete_namespaced_pod(
                    name,
                    namespace,
                    grace_period_seconds=grace_seconds,
                    body=client.V1DeleteOptions(grace_period_seconds=grace_seconds),
                    _request_timeout=self.request_timeout,
                )
            except ApiException as exc:
                if exc.status != 404:  # already gone: exactly what was asked for
                    raise

        self._write(where, attempt)

    def bind_pod(self, name: str, namespace: str, node_name: str) -> None:
        """POST pods/binding, as kube-scheduler and Volcano bind. A 409 because the pod is
        already on `node_name` (an earlier attempt landed) is success; on another node, or
        being deleted, it is refused."""
        where = f"bind pod {namespace}/{name} to node {node_name}"
        body = client.V1Binding(
            api_version="v1",
            kind="Binding",
            metadata=client.V1ObjectMeta(name=name, namespace=namespace),
            target=client.V1ObjectReference(api_version="v1", kind="Node", name=node_name),
        )

        def attempt() -> None:
            try:
                # The generated client cannot decode the Status a bind answers with
                # (kubernetes-client/python#825): skip decoding, the status code says it all.
                answer = self.core_v1.create_namespaced_pod_binding(
                    name,
                    namespace,
                    body,
                    _preload_content=False,
                    _request_timeout=self.request_timeout,
                )
                _discard(answer)
            except ApiException as exc:
                if exc.status != 409:
                    raise
                existing = self.core_v1.read_namespaced_pod(
                    name, namespace, _request_timeout=self.request_timeout
                )
                if existing.spec is None or existing.spec.node_name != node_name:
                    raise

        self._write(where, attempt)

    def annotate_pod(self, name: str, namespace: str, annotations: Mapping[str, str]) -> None:
        """A JSON merge patch of the pod's annotations (RFC 7386: the others stay)."""
        where = f"annotate pod {namespace}/{name}"
        body = {"metadata": {"annotations": dict(annotations)}}

        def attempt() -> None:
            try:
                answer = self.core_v1.patch_namespaced_pod(
                    name,
                    namespace,
                    body,
                    _content_type="application/merge-patch+json",
                    _preload_content=False,
                    _request_timeout=self.request_timeout,
                )
                _discard(answer)
            except ApiException as exc:
                if exc.status != 404:  # gone: nothing is left to tell
                    raise

        self._write(where, attempt)

    def record_events(self, events: Sequence[PodEvent]) -> None:
        """One core/v1 Event per item, reported by the portal's scheduler name, one attempt
        each (`write_concurrency` at once): an event is a courtesy to `kubectl describe`, not
        worth a cycle's time."""
        if self._writes_failed_in_a_row >= self.breaker_threshold:
            return
        now = datetime.now(tz=UTC)
        self._each_concurrently(lambda event: self._record_event(event, now), events)

    def _record_event(self, event: PodEvent, now: datetime) -> None:
        body = client.CoreV1Event(
            metadata=client.V1ObjectMeta(
                name=f"{event.name}.{secrets.token_hex(8)}", namespace=event.namespace
            ),
            involved_object=client.V1ObjectReference(
                api_version="v1", kind="Pod", name=event.name, namespace=event.namespace
            ),
            reason=event.reason,
            message=event.message[:EVENT_MESSAGE_CHARS],
            type=event.type,
            source=client.V1EventSource(component=self.scheduler_name),
            reporting_component=self.scheduler_name,
            reporting_instance=self.instance,
            first_timestamp=now,
            last_timestamp=now,
            count=1,
        )
        try:
            answer = self.core_v1.create_namespaced_event(
                event.namespace, body, _preload_content=False, _request_timeout=self.request_timeout
            )
            _discard(answer)
        except (ApiException, urllib3.exceptions.HTTPError, ConnectionError, TimeoutError):
            logger.warning("event %s on pod %s/%s not recorded", event.reason,
                           event.namespace, event.name, exc_info=True)  # fmt: skip

    def _ensure_owner(self, job_id: str, name: str, namespace: str) -> dict[str, Any]:
        """The job's owner object `name` as an ownerReference, created first if it does not
        exist. A 409 means it exists: its uid is read back (by list, which RBAC grants) and
        used only if it is this instance's; another instance's or nobody's is refused."""
        key = (namespace, name)
        if key not in self._owners:
            body = owner_manifest(
                job_id=job_id, name=name, namespace=namespace, instance=self.instance
            )
            where = f"create ConfigMap {namespace}/{name}"

            def attempt() -> None:
                try:
                    made = self.core_v1.create_namespaced_config_map(
                        namespace, body, _request_timeout=self.request_timeout
                    )
                except ApiException as exc:
                    if exc.status != 409:
                        raise
                    self._owner_adopt(key, where)
                else:
                    self._owners[key] = made.metadata.uid
                    self._note_made("ConfigMap", made)

            self._write(where, attempt)
        return owner_reference(name, self._owners[key])

    def _owner_adopt(self, key: tuple[str, str], where: str) -> None:
        mine = self._own_object("ConfigMap", *key)
        if mine is None:
            raise self._name_taken("ConfigMap", *key, where=where)
        self._owners[key] = mine.uid

    def _own_object(self, kind: str, namespace: str, name: str) -> JobObject | None:
        """This instance's object of `kind` (one of OBJECT_KINDS) named `name`, or None. The
        cache may not have heard yet of one made a moment ago (by a restarted worker, or an
        attempt whose answer was lost): then the API server is asked."""
        for from_api in (False, True):
            for obj in self._job_objects(kind, namespace, from_api=from_api):
                if (obj.namespace, obj.name) == (namespace, name) and self._owns(obj.labels):
                    return obj
            if not self._objects_cached(namespace):
                break
        return None

    def _name_taken(self, kind: str, namespace: str, name: str, *, where: str) -> ClusterError:
        """The error for a name another object holds, saying whose it is: read by a list
        narrowed to that one name (the list RBAC grants on the job objects' kinds). Gone by
        then: the create is tried again."""
        holder: Mapping[str, str] | None = None
        try:
            items = self._list_all(
                f"list {kind} in {namespace}",
                object_listers(self.core_v1)[kind],
                namespace,
                field_selector=f"metadata.name={name}",
            )
        except ClusterError:
            pass  # whose it is stays untold; that it is not this instance's is known
        else:
            if not items:
                return TransientClusterError(f"{where}: name freed while checking")
            holder = items[0].metadata.labels or {}
        return NameTakenError(f"{where}: name taken by {name_holder(holder, self.instance)}")

    def _ensure_object(self, obj: dict[str, Any], owner: str) -> None:
        """Create one of a job's objects before its pods (they mount and resolve it). An
        existing one (409) is success when it is this instance's: its name is the job's. One
        another instance or anyone else holds is refused (NameTakenError), not shared. A
        Secret cannot be read (deploy/rbac.yaml): an existing one is taken as this job's, as
        its name carries the instance and the job's id."""
        kind, meta = obj["kind"], obj["metadata"]
        key = (kind, meta["namespace"], meta["name"])
        if key in self._objects_made:
            return
        if self.cache is not None and self.cache.job_object(*key) is not None:
            self._objects_made[key] = (meta["namespace"], owner)
            return
        create = {
            "ConfigMap": self.core_v1.create_namespaced_config_map,
            "Service": self.core_v1.create_namespaced_service,
            "NetworkPolicy": lambda namespace, body, **kw: client.NetworkingV1Api(
                self.core_v1.api_client
            ).create_namespaced_network_policy(namespace, body, **kw),
            "Secret": self.core_v1.create_namespaced_secret,
        }[kind]
        where = f"create {kind} {meta['namespace']}/{meta['name']}"
        if kind == "Secret":
            obj = with_key_pair(obj)  # the ssh plugin's keys exist from here on, and only there

        def attempt() -> None:
            try:
                made = create(meta["namespace"], obj, _request_timeout=self.request_timeout)
            except ApiException as exc:
                if exc.status != 409:
                    raise
                if kind in OBJECT_KINDS and self._own_object(*key) is None:
                    raise self._name_taken(*key, where=where) from exc
            else:
                self._note_made(kind, made)

        self._write(where, attempt)
        self._objects_made[key] = (meta["namespace"], owner)

    def _note_made(self, kind: str, made: Any) -> None:
        """Tell the watch cache about an object the portal just created (the API's answer)."""
        if self.cache is not None and getattr(made, "metadata", None) is not None:
            meta = made.metadata
            self.cache.object_made(
                kind,
                {"namespace": meta.namespace, "name": meta.name, "uid": meta.uid,
                 "labels": meta.labels or {}},
            )  # fmt: skip

    def sweep_job_objects(
        self, keep: set[tuple[str, str, str]], wanted: Sequence[tuple[str, dict[str, Any]]] = ()
    ) -> list[str]:
        """Delete the portal's job objects (owner objects, the svc plugin's ConfigMaps, Services
        and NetworkPolicies, by this instance's labels) that no desired pod needs any more: the
        job ended or waits; then make again each of `wanted` (the desired pods' job objects,
        wire shape, each with its owner object's name) that is missing because someone
        deleted it. `keep` holds (kind, namespace, name); returns "Kind namespace/name" of each
        deleted. An object another instance (or nobody) owns is never touched.

        The ssh plugin's Secrets are neither listed nor deleted: the worker has no read on
        Secrets (RBAC cannot narrow a list to the portal's own, and every other Secret of the
        namespace would be readable). Each is owned by its job's owner object, so the garbage
        collector deletes it with the owner; one someone deletes behind the portal's back is
        made again when its job is placed anew (its pods fail to start without it)."""
        networking = client.NetworkingV1Api(self.core_v1.api_client)
        # Owners (ConfigMaps) last: objects made before owner objects existed have none, so
        # the garbage collector would not take them.
        kinds = (
            ("Service", self.core_v1.delete_namespaced_service),
            ("NetworkPolicy", networking.delete_namespaced_network_policy),
            ("ConfigMap", self.core_v1.delete_namespaced_config_map),
        )
        deleted = []
        present: set[tuple[str, str, str]] = set()
        namespaces = self.job_namespaces()
        refused: set[str] = set()  # namespaces whose objects could not all be read
        for kind, delete_fn in kinds:
            found: list[JobObject] = []
            for namespace in namespaces:
                objects = self._job_objects_in(kind, namespace)
                if objects is None:
                    refused.add(namespace)
                else:
                    found += objects
            for obj in found:
                if obj.key in keep or not self._owns(obj.labels):
                    present.add(obj.key)
                    continue
                self._delete_object(kind, obj.namespace, obj.name, delete_fn)
                self._objects_made.pop(obj.key, None)
                if obj.is_owner:  # the portal deleted it, not someone else
                    self._owners.pop((obj.namespace, obj.name), None)
                    # Its dependents (the Secrets this cache never lists among them) go
                    # with it: made again when the job is placed anew.
                    self._objects_made = {
                        made: under
                        for made, under in self._objects_made.items()
                        if under != (obj.namespace, obj.name)
                    }
                deleted.append(f"{kind} {obj.namespace}/{obj.name}")
        for owner_object, manifest in wanted:
            meta = manifest["metadata"]
            key = (manifest["kind"], meta["namespace"], meta["name"])
            if manifest["kind"] not in OBJECT_KINDS:
                continue  # not listed (Secrets): whether it is missing cannot be seen
            if key in present or meta["namespace"] not in set(namespaces) - refused:
                continue
            job_id = (meta.get("labels") or {}).get(JOB_ID)
            if not job_id:
                continue
            present.add(key)
            self._objects_made.pop(key, None)
            owner = self._ensure_owner(job_id, owner_object, meta["namespace"])
            self._ensure_object(with_owner(manifest, owner), owner["name"])
        return deleted

    def _delete_object(
        self, kind: str, namespace: str, name: str, delete_fn: Callable[..., Any]
    ) -> None:
        def attempt() -> None:
            try:
                delete_fn(name, namespace, _request_timeout=self.request_timeout)
            except ApiException as exc:
                if exc.status != 404:
                    raise

        forgotten = self.cache.object_deleting(kind, namespace, name) if self.cache else None
        try:
            self._write(f"delete {kind} {namespace}/{name}", attempt)
        except ClusterError:
            if self.cache is not None:
                self.cache.object_kept(forgotten)
            raise

    # -- internals ---------------------------------------------------------------------------

    def _accept_existing(self, pod: DesiredPod, where: str) -> None:
        """A 409 on create: succeed if the pod there is this replica, retry if it may go away,
        fail if another replica holds the name for good."""
        try:
            existing = self.core_v1.read_namespaced_pod(
                pod.name, pod.namespace, _request_timeout=self.request_timeout
            )
        except ApiException as exc:
            if exc.status == 404:  # deleted between our create and read: create again
                raise TransientClusterError(f"{where}: name freed while checking") from exc
            raise
        observed = observed_pod_from(existing)
        same_replica = replica_key(observed.labels) == replica_key(pod.labels) and self._owns(
            observed.labels
        )
        if observed.deletion_requested:
            # An earlier incarnation is still terminating; creating over it must wait.
            raise TransientClusterError(f"{where}: previous pod with this name is terminating")
        if not same_replica:
            holder = name_holder(observed.labels, self.instance)
            raise NameTakenError(f"{where}: name taken by {holder}")

    def _list_all(self, where: str, list_fn: Callable[..., Any], *args: Any, **kwargs: Any) -> list:
        items: list = []
        token: str | None = None
        while True:
            page_kwargs = dict(kwargs, limit=_PAGE_SIZE, _request_timeout=self.request_timeout)
            if token:
                page_kwargs["_continue"] = token

            def fetch(page_kwargs: dict[str, Any] = page_kwargs) -> Any:
                return list_fn(*args, **page_kwargs)

            page = self._with_retries(where, fetch)
            self._writes_failed_in_a_row = 0  # the server answers again
            items.extend(page.items or [])
            token = page.metadata._continue if page.metadata is not None else None
            if not token:
                return items

    def _write(self, where: str, attempt: Callable[[], None]) -> None:
        if self._writes_failed_in_a_row >= self.breaker_threshold:
            raise ApiUnavailable(
                BREAKER_OPEN.format(where=where, count=self._writes_failed_in_a_row)
            )
        try:
            self._with_retries(where, attempt)
        except ApiUnavailable:
            with self._breaker_lock:  # writes run concurrently (create_pods and the like)
                self._writes_failed_in_a_row += 1
            raise
        except ClusterError:
            raise  # about this object, not the server's health: the count stands
        else:
            with self._breaker_lock:
                self._writes_failed_in_a_row = 0

    def _with_retries(self, where: str, attempt: Callable[[], T]) -> T:
        policy = self.retry
        for number in range(policy.attempts):
            try:
                return attempt()
            except TransientClusterError as exc:
                error: Exception = exc
                hint = None
            except ApiException as exc:
                if exc.status not in _RETRYABLE_STATUSES:
                    raise RefusedClusterError(where, exc.status, _api_message(exc)) from exc
                error, hint = exc, _retry_after(exc)
            except (urllib3.exceptions.HTTPError, ConnectionError, TimeoutError) as exc:
                # Timeouts and dropped connections: the request may or may not have landed,
                # which is fine only because every write here is idempotent.
                error, hint = exc, None
            if number + 1 < policy.attempts:
                policy.sleep(policy.delay(number, hint))
        gave_up = f"{where}: gave up after {policy.attempts} attempts: {_describe(error)}"
        if isinstance(error, TransientClusterError):
            raise TransientClusterError(gave_up) from error
        raise ApiUnavailable(gave_up) from error


def _discard(answer: Any) -> None:
    """Read a raw answer (`_preload_content=False`) to its end and hand its connection back
    to the pool: unread, the connection cannot be reused, and every write paid for a new TLS
    handshake."""
    answer.drain_conn()
    answer.release_conn()


def _outcome(write: Callable[[], None]) -> Exception | None:
    try:
        write()
    # The isolation boundary of a batch (as base.create_each): one pod's failure, whatever
    # it is, is that pod's outcome and never stops the others.
    except Exception as exc:
        return exc
    return None


def _kubeconfig_path() -> str | None:
    """KUBECONFIG (possibly a path list) or ~/.kube/config if any of it exists. Read here, not
    through the client's default, which freezes KUBECONFIG when the client is first imported."""
    value = os.environ.get("KUBECONFIG") or "~/.kube/config"
    paths = [os.path.expanduser(path) for path in value.split(os.pathsep) if path]
    return os.pathsep.join(paths) if any(os.path.exists(path) for path in paths) else None


def _retry_after(exc: ApiException) -> float | None:
    value = (exc.headers or {}).get("Retry-After")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _api_message(exc: ApiException) -> str:
    """The Status message the API server sent ("pods "x" is forbidden: exceeded quota: ..."),
    else the HTTP reason."""
    try:
        message = json.loads(exc.body or "").get("message")
    except (ValueError, AttributeError):
        message = None
    return message or str(exc.reason)


def _describe(exc: Exception) -> str:
    if isinstance(exc, ApiException):
        return f"HTTP {exc.status} {exc.reason}"
    return f"{type(exc).__name__}: {exc}"
