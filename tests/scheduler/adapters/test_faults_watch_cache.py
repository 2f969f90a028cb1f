"""Whole cycles on the Kubernetes backend reading the watch cache while the API server drops
watches, compacts its history (410 Gone), throttles and fails: no decision is lost, no GPU is
booked twice (the kubelets' own admission check would reject an overbooked pod), and once the
server behaves the cache agrees with a fresh list."""

from __future__ import annotations

import time

import kmock
import pytest
from kubernetes import client

from portal.cluster.models import Placement
from portal.jobs.models import Job
from portal.tenants.models import Membership
from scheduler.adapters.cluster.kubernetes import KubernetesBackend, RetryPolicy
from scheduler.adapters.cluster.testing.emulator import PODS, foreign_pod_object
from scheduler.adapters.cluster.testing.kubelet import pod_requests
from scheduler.adapters.cluster.watch_cache import ClusterCache, manifests_translation
from scheduler.adapters.orchestrator import scheduling_cycle_run
from tests.factories import MembershipFactory, UserFactory
from tests.scheduler.conftest import submit_job

pytestmark = pytest.mark.django_db
NAMESPACE = "gpu-jobs"
GPU = "nvidia.com/gpu"


@pytest.fixture
def alice(nlp):
    user = UserFactory(username="alice")
    MembershipFactory(user=user, tenant=nlp, role=Membership.Role.RESEARCHER)
    return user


def backend_on(cluster, cache=None):
    backend = KubernetesBackend.from_configuration(
        client.Configuration(host=cluster.url), NAMESPACE, (GPU,),
        RetryPolicy(attempts=3, base_delay=0.01, sleep=lambda _: None), request_timeout=(2.0, 5.0),
    )  # fmt: skip
    backend.cache = cache
    return backend


@pytest.fixture
def cache(cluster):
    listing = backend_on(cluster)
    cache = ClusterCache(listing.core_v1, manifests_translation(), page_size=2, watch_seconds=5)
    yield cache
    cache.stop()


def caught_up(cluster, cache):
    """Wait, as the time between two cycles does, until the cache shows what a list shows."""
    cached, listing = backend_on(cluster, cache), backend_on(cluster)
    deadline = time.monotonic() + 10
    while (cached.list_nodes(), cached.list_pods()) != (listing.list_nodes(), listing.list_pods()):
        assert time.monotonic() < deadline, "the cache never caught up"
        time.sleep(0.02)


def gpus_by_node(cluster) -> dict[str, int]:
    held: dict[str, int] = {}
    for (_ns, _name), pod in cluster.on_loop(lambda: dict(cluster.store.table("pods"))).items():
        if pod["spec"].get("nodeName") and pod["status"].get("phase") not in (
            "Failed",
            "Succeeded",
        ):
            node = pod["spec"]["nodeName"]
            held[node] = held.get(node, 0) + pod_requests(pod).get(GPU, 0)
    return held


def no_double_booking(cluster):
    assert all(gpus <= 8 for gpus in gpus_by_node(cluster).values()), gpus_by_node(cluster)
    rejected = [
        name for name in cluster.pod_names()
        if (cluster.pod(NAMESPACE, name) or {}).get("status", {}).get("reason", "").startswith("OutOf")
    ]  # fmt: skip
    assert rejected == []


def test_faults_under_the_cache_lose_no_decision_and_book_no_gpu_twice(
    cluster, cache, alice, nlp_queue
):
    for name in ("gpu-a", "gpu-b"):
        cluster.add_node(name, {"cpu": "96", "memory": "1Ti", GPU: "8", "pods": "110"})
    other_team = foreign_pod_object(1, "gpu-a", namespace="other-team")
    other_team["spec"]["containers"][0]["resources"] = {
        "requests": {GPU: "6"},
        "limits": {GPU: "6"},
    }
    cluster.add_pod(other_team)
    first = submit_job(alice, nlp_queue, "first", replicas=1, gpus=8, min_available=1)
    caught_up(cluster, cache)

    scheduling_cycle_run(backend=backend_on(cluster, cache))
    cluster.advance(1)
    assert dict(Placement.objects.values_list("pod_name", "node_name")) == {
        f"{first.object_name}-worker-0": "gpu-b"  # gpu-a has 2 GPUs left beside the other team's 6
    }

    # The watches drop, the history they would resume from is compacted, and the next lists
    # meet 503s and a 429: the cache relists; meanwhile a second job arrives.
    second = submit_job(alice, nlp_queue, "second", replicas=1, gpus=4, min_available=1)

    def outage():
        cluster.handler.drop_watches()
        cluster.store.compact()

    cluster.fail_next(kmock.action.LIST, kmock.KubernetesError(status=503, reason="Busy"), times=2)
    cluster.fail_next(kmock.action.LIST, kmock.KubernetesError(status=429, reason="Slow"))
    cluster.on_loop(outage)
    caught_up(cluster, cache)
    scheduling_cycle_run(backend=backend_on(cluster, cache))
    cluster.advance(1)

    # 4 GPUs fit nowhere: gpu-a has 2 left, gpu-b none. Nothing was placed on a stale view.
    assert Job.objects.get(pk=second.pk).status == Job.Status.PENDING
    no_double_booking(cluster)

    # The other team leaves; once the cache has seen it, the second job gets gpu-a.
    cluster.delete_pod("other-team", other_team["metadata"]["name"], grace_seconds=0)
    caught_up(cluster, cache)
    scheduling_cycle_run(backend=backend_on(cluster, cache))
    cluster.advance(1)
    caught_up(cluster, cache)
    scheduling_cycle_run(backend=backend_on(cluster, cache))

    placements = dict(Placement.objects.values_list("pod_name", "node_name"))
    assert placements == {
        f"{first.object_name}-worker-0": "gpu-b",
        f"{second.object_name}-worker-0": "gpu-a",
    }
    assert {n: cluster.pod(NAMESPACE, n)["spec"]["nodeName"] for n in cluster.pod_names()} == (
        placements
    )
    assert all(cluster.pod(NAMESPACE, n)["status"]["phase"] == "Running" for n in placements)
    no_double_booking(cluster)
    assert len(cluster.requests(kmock.action.CREATE, PODS)) == 2  # each pod created once
