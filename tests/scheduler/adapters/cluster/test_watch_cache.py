"""The list+watch cache against the emulated API server: it answers what listing answers, reads
memory in the steady state, and survives dropped watches, 410 Gone and API errors."""

from __future__ import annotations

import time

import kmock
import pytest
from kubernetes import client

from jobspec import labels
from jobspec.notice import DEADLINE_ANNOTATION
from scheduler.adapters.cluster.base import TransientClusterError
from scheduler.adapters.cluster.kubernetes import KubernetesBackend, RetryPolicy
from scheduler.adapters.cluster.testing.emulator import NODES, PODS, foreign_pod_object
from scheduler.adapters.cluster.watch_cache import (
    ClusterCache,
    Reflector,
    manifests_translation,
    usage_view,
)

NS = "gpu-jobs"
GPU = "nvidia.com/gpu"


def node(cluster, name, gpus=8, **kwargs):
    cluster.add_node(
        name, {"cpu": "64", "memory": "512Gi", "pods": "110", GPU: str(gpus)}, **kwargs
    )


def own_pod(name, node_name, *, job_id=1, gpus=1):
    return {
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": labels.replica_labels(
                job_id=job_id, task="worker", replica=0, queue="q", tenant="t"
            ),
        },
        "spec": {
            "nodeName": node_name,
            "containers": [
                {
                    "name": "main",
                    "image": "train:1",
                    "resources": {"requests": {GPU: str(gpus)}, "limits": {GPU: str(gpus)}},
                }
            ],
        },
    }


def make_backend(cluster, **cache_options):
    configuration = client.Configuration(host=cluster.url)
    backend = KubernetesBackend.from_configuration(
        configuration,
        NS,
        (GPU,),
        RetryPolicy(attempts=2, base_delay=0.01, sleep=lambda _: None),
        request_timeout=(2.0, 5.0),
    )
    return backend


@pytest.fixture
def listing(cluster):
    return make_backend(cluster)


@pytest.fixture
def cached(cluster):
    backend = make_backend(cluster)
    backend.cache = ClusterCache(
        backend.core_v1, manifests_translation(), page_size=3, watch_seconds=5, sync_timeout=10
    )
    yield backend
    backend.cache.stop()


def eventually(check, timeout=10.0):
    """The cache follows the server asynchronously: wait until `check()` holds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            check()
            return
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def same_as_listing(cached, listing):
    def check():
        assert cached.list_nodes() == listing.list_nodes()
        assert cached.list_pods() == listing.list_pods()

    eventually(check)


def seed(cluster):
    for index in range(4):
        node(cluster, f"n{index}")
    for index in range(7):  # more than two pages of 3
        cluster.add_pod(foreign_pod_object(index, f"n{index % 4}"))
    cluster.add_pod(own_pod("gp-1-worker-0", "n0"))


def test_the_cache_answers_what_listing_answers_as_the_cluster_changes(cluster, cached, listing):
    seed(cluster)
    same_as_listing(cached, listing)

    cluster.add_pod(own_pod("gp-2-worker-0", "n1", job_id=2, gpus=4))
    cluster.add_pod(foreign_pod_object(100, "n2", namespace="other-team"))
    cluster.delete_pod("kube-system", "ds-000003", grace_seconds=0)
    cluster.patch_pod("kube-system", "ds-000001", {"status": {"phase": "Succeeded"}})
    cluster.set_node_ready("n3", False)
    cluster.delete_node("n2")
    node(cluster, "n9", taints=[{"key": "gpu", "effect": "NoSchedule"}])
    cluster.advance(1)  # kubelets start the portal's pods

    same_as_listing(cached, listing)
    used_cpu = {n.name: n.used_by_others.get("cpu", 0) for n in cached.list_nodes()}
    assert used_cpu["n1"] == 100  # ds-000005; ds-000001 finished
    assert [p.phase for p in cached.list_pods()] == ["Running", "Running"]


def test_the_bind_passs_node_rooms_from_memory_are_what_one_list_per_node_says(
    cluster, cached, listing
):
    seed(cluster)
    cluster.add_pod(own_pod("gp-2-worker-0", "n1", job_id=2, gpus=4))
    names = ["n0", "n1", "n2", "gone"]

    def check():
        assert cached.nodes_room(names) == listing.nodes_room(names)

    eventually(check)
    rooms = cached.nodes_room(names)
    assert sorted(rooms) == ["n0", "n1", "n2"]  # a node nobody has is left out
    assert rooms["n1"].allocatable[GPU] == 8
    assert rooms["n1"].used_by_portal[GPU] == 4
    assert rooms["n1"].used_by_others["cpu"] == 200  # ds-000001 and ds-000005
    assert rooms["n1"].free(GPU) == 4

    cluster.delete_pod(NS, "gp-2-worker-0", grace_seconds=0)
    cluster.patch_pod("kube-system", "ds-000001", {"status": {"phase": "Succeeded"}})
    cluster.add_pod(own_pod("gp-3-worker-0", "n0", job_id=3, gpus=2))
    eventually(check)
    rooms = cached.nodes_room(names)
    assert GPU not in rooms["n1"].used_by_portal
    assert rooms["n1"].used_by_others["cpu"] == 100
    assert rooms["n0"].used_by_portal[GPU] == 3  # gp-1's 1 and gp-3's 2


def test_the_rooms_leave_out_the_pods_the_bind_pass_is_checking(cluster, cached, listing):
    # A cycle overlapping the bind pass may have made and bound the gang's own pods: they
    # are the gang, not in its way.
    seed(cluster)
    cluster.add_pod(own_pod("gp-2-worker-0", "n1", job_id=2, gpus=4))
    ignore = [(NS, "gp-2-worker-0"), (NS, "gp-9-worker-0")]  # the second exists nowhere

    def check():
        assert cached.nodes_room(["n1"], ignore) == listing.nodes_room(["n1"], ignore)

    eventually(check)
    assert cached.nodes_room(["n1"])["n1"].free(GPU) == 4
    assert cached.nodes_room(["n1"], ignore)["n1"].free(GPU) == 8


def test_a_steady_cycle_reads_memory_not_the_api(cluster, cached, listing):
    seed(cluster)
    same_as_listing(cached, listing)
    lists_before = len(cluster.requests(kmock.action.LIST, PODS))
    node_lists_before = len(cluster.requests(kmock.action.LIST, NODES))

    for _ in range(3):
        cached.list_nodes()
        cached.list_pods()

    assert len(cluster.requests(kmock.action.LIST, PODS)) == lists_before
    assert len(cluster.requests(kmock.action.LIST, NODES)) == node_lists_before
    assert cached.cache.node_reflector.stats.lists == 1  # 4 nodes: 2 pages of 3


def test_a_dropped_watch_resumes_from_its_resource_version_without_listing_again(
    cluster, cached, listing
):
    seed(cluster)
    same_as_listing(cached, listing)
    pod_lists = cached.cache.pod_reflector.stats.lists

    eventually(lambda: _assert(cluster.watch_count() == 2))
    cluster.drop_watches()
    cluster.add_pod(own_pod("gp-3-worker-0", "n0", job_id=3))

    same_as_listing(cached, listing)
    assert cached.cache.pod_reflector.stats.lists == pod_lists
    assert cached.cache.pod_reflector.stats.watches >= 2


def test_a_watch_whose_version_was_compacted_lists_again(cluster, cached, listing):
    seed(cluster)
    same_as_listing(cached, listing)
    eventually(lambda: _assert(cluster.watch_count() == 2))

    def drop_write_compact():  # at once on the server's loop: no watch reconnects between
        cluster.handler.drop_watches()
        store = cluster.store
        store.create("pods", NS, own_pod("gp-4-worker-0", "n1", job_id=4), validate=False)
        store.delete("pods", "kube-system", "ds-000000", 0)
        store.compact()  # the versions the watches would resume from are gone

    cluster.on_loop(drop_write_compact)

    same_as_listing(cached, listing)
    assert cached.cache.pod_reflector.stats.lists >= 2


def test_a_list_whose_continue_token_expired_starts_again_and_misses_nothing(cluster):
    seed(cluster)
    api = make_backend(cluster).core_v1
    pages = []

    def list_then_compact(**kwargs):
        pages.append(kwargs.get("_continue"))
        response = api.list_pod_for_all_namespaces(**kwargs)
        if len(pages) == 1:
            cluster.add_pod(foreign_pod_object(50, "n0"))  # written between two pages
            cluster.compact()  # ... and the snapshot the token points at is gone
        return response

    got = []
    reflector = Reflector(
        "pods", list_then_compact, replace=got.extend, apply=lambda *_: None, page_size=3
    )
    reflector.list_once()

    names = sorted(p["metadata"]["name"] for p in got)
    assert names == sorted([f"ds-{i:06d}" for i in (*range(7), 50)] + ["gp-1-worker-0"])
    assert reflector.stats.relists_after_410 == 1


def test_server_errors_and_throttling_delay_the_first_list_but_lose_nothing(
    cluster, cached, listing
):
    seed(cluster)
    cluster.fail_next(
        kmock.action.LIST, kmock.KubernetesError(status=503, reason="Unavailable"), times=2
    )
    cluster.fail_next(
        kmock.action.LIST, kmock.KubernetesError(status=429, reason="TooMany"), resource=NODES
    )

    same_as_listing(cached, listing)
    assert cached.cache.pod_reflector.stats.errors == 2
    assert cached.cache.node_reflector.stats.errors == 1


def test_reads_fail_when_the_first_list_never_succeeds(cluster):
    backend = make_backend(cluster)
    cluster.fail_next(
        kmock.action.LIST,
        kmock.KubernetesError(status=500, reason="etcd"),
        times=1000,
        resource=NODES,
    )
    backend.cache = ClusterCache(backend.core_v1, manifests_translation(), sync_timeout=0.5)
    try:
        with pytest.raises(TransientClusterError, match="nodes not listed within"):
            backend.list_nodes()
    finally:
        backend.cache.stop()


def test_reads_fail_once_the_server_has_been_silent_too_long(cluster):
    seed(cluster)
    now = [1000.0]
    backend = make_backend(cluster)
    backend.cache = ClusterCache(
        backend.core_v1,
        manifests_translation(),
        max_staleness=90,
        watch_seconds=600,
        clock=lambda: now[0],
    )
    try:
        assert len(backend.list_nodes()) == 4
        eventually(lambda: _assert(cluster.watch_count() == 2))
        now[0] += 91  # no event, bookmark or watch end for longer than allowed

        with pytest.raises(TransientClusterError, match="no word from the API server"):
            backend.list_pods()
        cluster.bookmark()  # the server speaks again
        cluster.add_pod(own_pod("gp-5-worker-0", "n0", job_id=5))
        eventually(lambda: _assert(len(_pods_or_none(backend)) == 2))
    finally:
        backend.cache.stop()


def _assert(condition):
    assert condition


def _pods_or_none(backend):
    """Both watches must hear the bookmark before reads trust the cache again."""
    try:
        return backend.list_pods()
    except TransientClusterError:
        return []


def test_a_stalled_watch_is_given_up_after_its_read_timeout_and_resumed(cluster):
    seed(cluster)
    backend = make_backend(cluster)
    # The server ends each watch after 1 s; a stream silent for 1 + 1 s is taken as hung.
    backend.cache = ClusterCache(
        backend.core_v1, manifests_translation(), watch_seconds=1, request_timeout=(2.0, 1.0)
    )
    try:
        assert len(backend.list_pods()) == 1
        eventually(lambda: _assert(cluster.watch_count() == 2))
        cluster.stall_watches()
        cluster.add_pod(own_pod("gp-6-worker-0", "n2", job_id=6))

        eventually(lambda: _assert(len(_pods_or_none(backend)) == 2))
        stats = backend.cache.pod_reflector.stats
        assert "Timeout" in stats.last_error or "timed out" in stats.last_error
        assert stats.lists == 1  # resumed from its resourceVersion, not listed again
    finally:
        backend.cache.stop()


@pytest.mark.parametrize("settle_seconds", [0.0, 0.2])
def test_a_cache_stopped_while_starting_or_running_stops_at_once(cluster, settle_seconds):
    # Stopped at once, its reflectors are still listing (no watch to cut yet) or waiting
    # for their watch's answer; a little later, every watch is open and waiting for events.
    seed(cluster)
    backend = make_backend(cluster)
    cache = ClusterCache(backend.core_v1, manifests_translation(), watch_seconds=300)
    cache.start()
    time.sleep(settle_seconds)
    threads = list(cache._threads.values())

    started = time.monotonic()
    cache.stop()

    assert time.monotonic() - started < 2.0
    assert not any(thread.is_alive() for thread in threads)


def _everything_pod(phase="Running"):
    pod = foreign_pod_object(7, "n0")
    spec = pod["spec"]
    main = spec["containers"][0]
    main["resources"] = {"requests": {"cpu": "250m", "memory": "1Gi"},
                         "limits": {"cpu": "1", GPU: "2", "memory": "2Gi"}}  # fmt: skip
    main["ports"] = [{"containerPort": 80}]
    main["livenessProbe"] = {"httpGet": {"path": "/", "port": 80}}
    spec["containers"].append({"name": "sidecar", "image": "x", "resources": {
        "requests": {"cpu": "50m"}}})  # fmt: skip
    spec["initContainers"] = [
        {"name": "setup", "image": "x", "resources": {"requests": {"cpu": "2", "memory": "4Gi"}}},
        {"name": "proxy", "image": "x", "restartPolicy": "Always",
         "resources": {"requests": {"cpu": "100m"}}},
    ]  # fmt: skip
    spec["overhead"] = {"cpu": "10m", "memory": "64Mi"}
    spec["affinity"] = {"nodeAffinity": {}}
    pod["metadata"]["resourceVersion"] = "9"
    # A shared GPU pod of another scheduler: its cards count, its other annotations do not.
    pod["metadata"]["annotations"] = {
        "hami.io/vgpu-devices-allocated": "GPU-0,NVIDIA,20480,25:;",
        "kubectl.kubernetes.io/last-applied-configuration": "{" + "x" * 4000 + "}",
    }
    pod["status"]["phase"] = phase
    return pod


@pytest.mark.parametrize("phase", ["Running", "Pending", "Succeeded"])
def test_the_usage_view_of_a_pod_counts_what_the_whole_pod_counts(phase):
    translation = manifests_translation()
    whole = _everything_pod(phase)

    viewed = translation.usage(client.V1Pod.from_dict(usage_view(whole)))

    assert viewed == translation.usage(client.V1Pod.from_dict(whole))
    if phase != "Succeeded":
        assert viewed["gpu-card-cores/GPU-0"] == 25
    assert list(usage_view(whole)["metadata"]["annotations"]) == ["hami.io/vgpu-devices-allocated"]
    assert "env" not in usage_view(whole)["spec"]["containers"][0]
    assert "containerStatuses" not in usage_view(whole)["status"]


# -- the portal's job objects -----------------------------------------------------------------


def owner_config_map(name: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": {labels.MANAGED: "true", labels.INSTANCE: "gpuportal", labels.OWNER: "true"},
        },
    }


@pytest.fixture
def objects_cache(cluster):
    backend = make_backend(cluster)
    cache = ClusterCache(
        backend.core_v1,
        manifests_translation(),
        watch_seconds=5,
        sync_timeout=10,
        object_namespaces=(NS,),
        object_selector=labels.owned_selector("gpuportal"),
    )
    cache.nodes()  # started and listed
    # Every watch open (pods, nodes and the three object kinds): stall_watches() silences only
    # the open ones, so a test that stalls before a watch opened would still get its events.
    eventually(lambda: _assert(cluster.watch_count() == 5))
    yield cache
    cache.stop()


def until(predicate) -> None:
    def check():
        assert predicate()

    eventually(check)


def config_maps(cache) -> dict[str, str]:
    objects = cache.job_objects("ConfigMap", NS)
    return None if objects is None else {obj.name: obj.uid for obj in objects}


def store_create(cluster, body):
    return cluster.on_loop(lambda: cluster.store.create("configmaps", NS, body))


def test_job_objects_follow_the_cluster_and_only_this_instances(cluster, objects_cache):
    made = store_create(cluster, owner_config_map("gp-1"))
    other = owner_config_map("gp-2")
    other["metadata"]["labels"][labels.INSTANCE] = "other-portal"
    store_create(cluster, other)

    until(lambda: config_maps(objects_cache) == {"gp-1": made["metadata"]["uid"]})


def test_an_owner_someone_deletes_is_reported_once_and_the_portals_own_delete_never(
    cluster, objects_cache
):
    first = store_create(cluster, owner_config_map("gp-1"))
    store_create(cluster, owner_config_map("gp-2"))
    until(lambda: set(config_maps(objects_cache) or ()) == {"gp-1", "gp-2"})

    # The portal deletes gp-2 (announced to the cache first), someone else deletes gp-1.
    assert objects_cache.object_deleting("ConfigMap", NS, "gp-2") is not None
    assert set(config_maps(objects_cache)) == {"gp-1"}  # at once, before the watch says so
    cluster.on_loop(lambda: cluster.store.delete("configmaps", NS, "gp-2"))
    cluster.on_loop(lambda: cluster.store.delete("configmaps", NS, "gp-1"))
    until(lambda: config_maps(objects_cache) == {})

    gone = objects_cache.owners_gone(NS)
    assert [(obj.name, obj.uid) for obj in gone] == [("gp-1", first["metadata"]["uid"])]
    assert objects_cache.owners_gone(NS) == []


def test_an_owner_deleted_while_the_watch_was_down_is_reported_by_the_relist(
    cluster, objects_cache
):
    store_create(cluster, owner_config_map("gp-1"))
    remade = store_create(cluster, owner_config_map("gp-2"))
    until(lambda: set(config_maps(objects_cache) or ()) == {"gp-1", "gp-2"})
    cluster.stall_watches()  # what follows never reaches the cache by a watch
    cluster.on_loop(lambda: cluster.store.delete("configmaps", NS, "gp-1"))
    cluster.on_loop(lambda: cluster.store.delete("configmaps", NS, "gp-2"))
    remade = store_create(cluster, owner_config_map("gp-2"))  # deleted and made again
    cluster.compact()
    cluster.drop_watches()

    until(lambda: config_maps(objects_cache) == {"gp-2": remade["metadata"]["uid"]})
    assert sorted(obj.name for obj in objects_cache.owners_gone(NS)) == ["gp-1", "gp-2"]


def test_a_late_event_of_an_object_the_portal_deleted_does_not_bring_it_back(
    cluster, objects_cache
):
    made = store_create(cluster, owner_config_map("gp-1"))
    until(lambda: config_maps(objects_cache) == {"gp-1": made["metadata"]["uid"]})

    objects_cache.object_deleting("ConfigMap", NS, "gp-1")
    # What the watch thread does with a MODIFIED event sent before the delete landed.
    objects_cache._apply_object("ConfigMap", "MODIFIED", made)

    assert config_maps(objects_cache) == {}


def test_a_failed_delete_leaves_the_object_known_and_a_made_one_is_known_at_once(
    cluster, objects_cache
):
    made = store_create(cluster, owner_config_map("gp-1"))
    until(lambda: config_maps(objects_cache) == {"gp-1": made["metadata"]["uid"]})

    announced = objects_cache.object_deleting("ConfigMap", NS, "gp-1")
    objects_cache.object_kept(announced)  # the delete failed
    assert config_maps(objects_cache) == {"gp-1": made["metadata"]["uid"]}

    cluster.stall_watches()  # the cache learns of gp-3 only from the portal
    objects_cache.object_made("ConfigMap", {**owner_config_map("gp-3")["metadata"], "uid": "uid-3"})
    assert objects_cache.job_object("ConfigMap", NS, "gp-3").uid == "uid-3"


def test_a_relist_older_than_the_portals_create_does_not_take_its_owner_for_gone(
    cluster, objects_cache
):
    until(lambda: config_maps(objects_cache) == {})
    cluster.stall_watches()  # its ADDED event is still to come
    made = store_create(cluster, owner_config_map("gp-4"))  # the portal's create, answered
    objects_cache.object_made("ConfigMap", made["metadata"])
    # What the reflector does with a relist whose snapshot predates that create.
    objects_cache._replace_objects("ConfigMap", NS, [])

    assert objects_cache.owners_gone(NS) == []
    cluster.drop_watches()  # the watch resumes from before the create: ADDED comes
    until(lambda: config_maps(objects_cache) == {"gp-4": made["metadata"]["uid"]})


def test_namespaces_are_watched_from_when_they_are_named_and_forgotten_when_they_leave(
    cluster, objects_cache
):
    tenant = "gpu-nlp"
    made = cluster.on_loop(
        lambda: cluster.store.create(
            "configmaps", tenant, {**owner_config_map("gp-7"), "metadata": {
                **owner_config_map("gp-7")["metadata"], "namespace": tenant}},
        )
    )  # fmt: skip
    assert objects_cache.job_objects("ConfigMap", tenant) is None  # not kept: the caller lists

    objects_cache.watch_namespaces({NS, tenant})
    until(lambda: objects_cache.job_objects("ConfigMap", tenant) is not None)
    assert [obj.uid for obj in objects_cache.job_objects("ConfigMap", tenant)] == [
        made["metadata"]["uid"]
    ]
    assert objects_cache.object_namespaces == (NS, tenant)
    eventually(lambda: _assert(cluster.watch_count() == 8))  # three more watches

    retiring = [t for r, t in objects_cache._threads.items() if r.what.endswith(tenant)]
    assert len(retiring) == 3
    objects_cache.watch_namespaces({NS})  # unnamed once: kept for unwatch_after
    assert objects_cache.object_namespaces == (NS, tenant)
    objects_cache.unwatch_after = 0
    objects_cache.watch_namespaces({NS})
    assert objects_cache.job_objects("ConfigMap", tenant) is None
    assert objects_cache.object_namespaces == (NS,)
    eventually(lambda: _assert(cluster.watch_count() == 5))
    eventually(lambda: _assert(not any(thread.is_alive() for thread in retiring)))
    assert config_maps(objects_cache) == {}  # the jobs namespace is still kept


def test_a_refused_list_is_logged_once_however_often_it_is_retried(caplog):
    import threading

    from kubernetes.client.exceptions import ApiException

    calls = []

    def refuse(**kwargs):
        calls.append(kwargs)
        raise ApiException(status=403, reason="Forbidden")

    reflector = Reflector(
        "ConfigMap in gpu-nlp", refuse, replace=lambda raws: None,
        apply=lambda kind, raw: None, base_delay=0.0001,
    )  # fmt: skip
    stop = threading.Event()
    thread = threading.Thread(target=reflector.run, args=(stop,))
    with caplog.at_level("DEBUG", logger="scheduler.adapters.cluster.watch_cache"):
        thread.start()
        eventually(lambda: _assert(len(calls) >= 5))
        stop.set()
        thread.join(timeout=5)
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert [r.getMessage() for r in warnings] == [
        "ConfigMap in gpu-nlp: HTTP 403 Forbidden; retrying"
    ]
    assert reflector.stats.errors >= 5
    # Backing off, a refusal (403, 404) waits up to a minute, other failures up to max_delay.
    default = Reflector("ConfigMap in gpu-nlp", refuse, replace=print, apply=print)
    assert default._delay(20, ApiException(status=403)) == 60.0
    assert default._delay(20, ApiException(status=404)) == 60.0
    assert default._delay(20, ApiException(status=500)) == default.max_delay == 10.0


def test_watches_in_many_namespaces_use_a_pool_of_their_own(cluster, caplog):
    seed(cluster)
    backend = make_backend(cluster)
    namespaces = [f"gpu-tenant-{index}" for index in range(10)]  # 32 watches
    cache = ClusterCache(
        backend.core_v1,
        manifests_translation(),
        watch_seconds=5,
        object_namespaces=namespaces,
        object_selector=labels.owned_selector("gpuportal"),
    )
    with caplog.at_level("WARNING", logger="urllib3.connectionpool"):
        cache.nodes()
        eventually(lambda: _assert(cluster.watch_count() == 32))
        cache.stop()  # every watch's connection comes back at once
    # In the cycle's pool (5 per core) all but 10 on 2 cores were thrown away, each with a warning.
    assert [r.getMessage() for r in caplog.records] == []
    assert cache.node_reflector._list_fn.__self__.api_client is not backend.core_v1.api_client


def test_the_usage_view_keeps_a_pods_preemption_deadline():
    """The reconcile compares it with its placement's: without it in the cache, every cycle
    would annotate the pod (and record its Event) again."""
    whole = _everything_pod()
    whole["metadata"]["annotations"][DEADLINE_ANNOTATION] = "2026-12-01T12:05:00Z"

    kept = usage_view(whole)["metadata"]["annotations"]

    assert kept == {
        "hami.io/vgpu-devices-allocated": "GPU-0,NVIDIA,20480,25:;",
        DEADLINE_ANNOTATION: "2026-12-01T12:05:00Z",
    }
