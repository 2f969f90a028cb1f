"""The svc plugin's objects and the owner objects read from the watch cache: a steady cycle lists
none of them, the portal's own creates and deletes are not repeated, one someone else deletes
is made again (or, for an owner, reported), and a dropped or expired watch lists again. Whole
cycles against the emulated API server."""

from __future__ import annotations

import time

import kmock
import pytest
from kubernetes import client

from jobspec.labels import owned_selector
from portal.jobs.models import Job
from portal.jobs.services import job_cancel
from portal.tenants.models import Membership
from scheduler.adapters.cluster.kubernetes import KubernetesBackend, RetryPolicy
from scheduler.adapters.cluster.testing.emulator import EmulatedCluster
from scheduler.adapters.cluster.watch_cache import ClusterCache, manifests_translation
from scheduler.adapters.orchestrator import scheduling_cycle_run
from tests.factories import MembershipFactory, UserFactory
from tests.scheduler.conftest import submit_job

pytestmark = pytest.mark.django_db
NAMESPACE = "gpu-jobs"
GPU_NODE = {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8", "pods": "110"}
KINDS = {
    "ConfigMap": kmock.resource("v1/configmaps"),
    "Service": kmock.resource("v1/services"),
    "NetworkPolicy": kmock.resource("networking.k8s.io/v1/networkpolicies"),
}
STORE_TABLES = {
    "ConfigMap": "configmaps",
    "Service": "services",
    "NetworkPolicy": "networkpolicies.networking.k8s.io",
}


@pytest.fixture
def alice(nlp):
    user = UserFactory(username="alice")
    MembershipFactory(user=user, tenant=nlp, role=Membership.Role.RESEARCHER)
    return user


@pytest.fixture
def cache(cluster, backend):
    cache = ClusterCache(
        backend.core_v1,
        manifests_translation(backend.instance),
        watch_seconds=5,
        sync_timeout=10,
        object_namespaces=(NAMESPACE,),
        object_selector=owned_selector(backend.instance),
    )
    backend.cache = cache
    yield cache
    cache.stop()


def fresh_backend(cluster, cache) -> KubernetesBackend:
    """What the cycle worker does: a new backend every cycle, the same cache."""
    backend = KubernetesBackend.from_configuration(
        client.Configuration(host=cluster.url), NAMESPACE, ("nvidia.com/gpu",),
        RetryPolicy(attempts=3, base_delay=0.01, sleep=lambda _: None), request_timeout=(2.0, 5.0),
    )  # fmt: skip
    backend.cache = cache
    return backend


def requests_of(cluster, kind: str, action) -> list:
    return [
        r
        for r in cluster.requests(action, KINDS[kind])
        if r.params.get("watch") != "true" and r.action != kmock.action.WATCH
    ]


def counts(cluster) -> dict[tuple[str, str], int]:
    return {
        (kind, action.name): len(requests_of(cluster, kind, action))
        for kind in KINDS
        for action in (kmock.action.LIST, kmock.action.CREATE, kmock.action.DELETE)
    }


def stored(cluster, kind: str) -> dict:
    return cluster.on_loop(lambda: dict(cluster.store.table(STORE_TABLES[kind])))


def eventually(check, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "the cache never caught up"
        time.sleep(0.02)


def cached_names(cache, kind: str) -> set[str] | None:
    """None while the cache cannot vouch for that kind (the backend then lists them)."""
    objects = cache.job_objects(kind, NAMESPACE)
    return None if objects is None else {obj.name for obj in objects}


def pods_running(cache, count: int = 2) -> None:
    eventually(lambda: [p.phase for p in cache.owned_pods()] == ["Running"] * count)


def running_job_with_svc(cluster, cache, kube_cycle, alice, nlp_queue) -> Job:
    cluster.add_node("gpu-a", GPU_NODE)
    job = submit_job(alice, nlp_queue, "ddp", gpus=4, replicas=2, plugins={"svc": []})
    kube_cycle()
    cluster.advance(1)
    pods_running(cache)
    kube_cycle()
    job.refresh_from_db()
    assert job.status == Job.Status.RUNNING
    return job


def test_a_steady_cycle_lists_makes_and_deletes_no_job_object(
    cluster, cache, kube_cycle, alice, nlp_queue
):
    job = running_job_with_svc(cluster, cache, kube_cycle, alice, nlp_queue)
    eventually(lambda: cached_names(cache, "Service") == {f"{job.object_name}"})
    before = counts(cluster)

    for _ in range(3):
        kube_cycle()

    assert counts(cluster) == before
    # The objects are there, and the cache knows them all.
    assert cached_names(cache, "ConfigMap") == {f"{job.object_name}", f"{job.object_name}-svc"}
    assert cached_names(cache, "NetworkPolicy") == {f"{job.object_name}"}


def test_objects_the_portal_deletes_are_not_deleted_again_by_the_next_cycle(
    cluster, cache, kube_cycle, alice, nlp_queue
):
    job = running_job_with_svc(cluster, cache, kube_cycle, alice, nlp_queue)
    eventually(lambda: cached_names(cache, "Service") == {f"{job.object_name}"})
    job_cancel(job=job, actor=alice)
    kube_cycle()  # evicts the pods
    cluster.advance(60)
    for _ in range(3):
        kube_cycle()
        cluster.advance(60)
    assert stored(cluster, "Service") == {}
    assert stored(cluster, "ConfigMap") == {}
    assert len(requests_of(cluster, "Service", kmock.action.DELETE)) == 1
    configmap_deletes = [r.name for r in requests_of(cluster, "ConfigMap", kmock.action.DELETE)]
    assert sorted(configmap_deletes) == [f"{job.object_name}", f"{job.object_name}-svc"]
    # The portal's own deletion of the owner is not someone else's.
    job.refresh_from_db()
    assert job.status == Job.Status.CANCELLED
    assert cache.owners_gone(NAMESPACE) == []


def test_a_service_someone_deletes_is_made_again_under_the_jobs_owner(
    cluster, cache, kube_cycle, alice, nlp_queue
):
    job = running_job_with_svc(cluster, cache, kube_cycle, alice, nlp_queue)
    owner_uid = stored(cluster, "ConfigMap")[(NAMESPACE, f"{job.object_name}")]["metadata"]["uid"]

    # kubectl delete service gp-<id>: the pods stay (the Service owns nothing).
    cluster.on_loop(lambda: cluster.store.delete("services", NAMESPACE, f"{job.object_name}"))
    eventually(lambda: cached_names(cache, "Service") == set())
    kube_cycle()

    service = stored(cluster, "Service")[(NAMESPACE, f"{job.object_name}")]
    assert service["metadata"]["ownerReferences"][0]["uid"] == owner_uid
    job.refresh_from_db()
    assert job.status == Job.Status.RUNNING
    # Made once: the next cycles see it in the cache.
    creates = len(requests_of(cluster, "Service", kmock.action.CREATE))
    kube_cycle()
    kube_cycle()
    assert len(requests_of(cluster, "Service", kmock.action.CREATE)) == creates


def test_an_owner_deleted_between_two_cycles_backends_is_reported_once(
    cluster, cache, alice, nlp_queue, cycle_clock
):
    """The cycle worker builds a new backend every cycle: the deletion is the cache's to tell
    (cluster_observe requeues the job it names: test_owner_objects)."""
    from datetime import timedelta

    cluster.add_node("gpu-a", GPU_NODE)
    job = submit_job(alice, nlp_queue, "train", gpus=4, replicas=2)

    def cycle():
        run = scheduling_cycle_run(backend=fresh_backend(cluster, cache), now=cycle_clock)
        cycle_clock.now += timedelta(seconds=5)
        assert not run.error, run.error

    cycle()
    cluster.advance(1)
    pods_running(cache)
    cycle()
    job.refresh_from_db()
    assert job.status == Job.Status.RUNNING

    cluster.on_loop(lambda: cluster.store.delete("configmaps", NAMESPACE, f"{job.object_name}"))
    eventually(lambda: f"{job.object_name}" not in cached_names(cache, "ConfigMap"))
    backend = fresh_backend(cluster, cache)
    backend.list_pods()

    assert backend.owners_deleted() == {
        str(job.pk): f"owner object ConfigMap {NAMESPACE}/{job.object_name} was deleted, and the "
        "job's pods with it; the job was requeued"
    }
    assert fresh_backend(cluster, cache).owners_deleted() == {}


def test_a_dropped_or_expired_watch_lists_the_objects_again(
    cluster, cache, kube_cycle, alice, nlp_queue
):
    job = running_job_with_svc(cluster, cache, kube_cycle, alice, nlp_queue)
    eventually(lambda: cached_names(cache, "Service") == {f"{job.object_name}"})
    reflector = next(r for r in cache.object_reflectors if r.what == f"Service in {NAMESPACE}")
    lists = reflector.stats.lists

    # Changes the watches do not pass on (a hung proxy), the history compacted, then the
    # connections drop: resuming from the last version seen answers 410.
    assert cluster.stall_watches() > 0
    cluster.on_loop(lambda: cluster.store.delete("services", NAMESPACE, f"{job.object_name}"))
    foreign = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "gp-9999", "namespace": NAMESPACE,
                     "labels": {"gpuportal.io/managed": "true",
                                "gpuportal.io/instance": "gpuportal"}},
        "spec": {"clusterIP": "None"},
    }  # fmt: skip
    cluster.on_loop(lambda: cluster.store.create("services", NAMESPACE, foreign))
    cluster.compact()
    cluster.drop_watches()

    eventually(lambda: reflector.stats.lists > lists)
    eventually(lambda: cached_names(cache, "Service") == {"gp-9999"})
    kube_cycle()  # the job's Service made again, the stray one swept
    assert set(stored(cluster, "Service")) == {(NAMESPACE, f"{job.object_name}")}


def test_without_a_watch_on_services_the_cycle_lists_them_as_before(
    cluster: EmulatedCluster, backend, alice, nlp_queue, kube_cycle
):
    """An RBAC file from before the cache watched job objects grants list but not watch: the
    cache cannot vouch for Services, so the sweep lists them, and the cycle goes on."""
    refused = kmock.KubernetesError(status=403, reason="Forbidden", message="watch forbidden")
    cluster.fail_next(kmock.action.WATCH, refused, times=10_000, resource=KINDS["Service"])
    # Every watch that works says so often (bookmarks), so only the refused one goes stale.
    cluster.on_loop(lambda: setattr(cluster.handler, "bookmark_seconds", 0.1))
    cache = ClusterCache(
        backend.core_v1,
        manifests_translation(backend.instance),
        watch_seconds=5,
        sync_timeout=10,
        max_staleness=0.5,
        object_namespaces=(NAMESPACE,),
        object_selector=owned_selector(backend.instance),
    )
    backend.cache = cache
    try:
        job = running_job_with_svc(cluster, cache, kube_cycle, alice, nlp_queue)
        time.sleep(0.6)  # the one list of Services is older than max_staleness now
        assert cached_names(cache, "Service") is None
        assert cached_names(cache, "NetworkPolicy") == {f"{job.object_name}"}
        lists = len(requests_of(cluster, "Service", kmock.action.LIST))

        cluster.on_loop(lambda: cluster.store.delete("services", NAMESPACE, f"{job.object_name}"))
        kube_cycle()

        assert len(requests_of(cluster, "Service", kmock.action.LIST)) == lists + 1
        assert (NAMESPACE, f"{job.object_name}") in stored(cluster, "Service")  # made again
    finally:
        cache.stop()
