"""A namespace per tenant against the emulated API server: each tenant's gangs are made, bound
whole, evicted and cleaned up in its own namespace; only this instance's objects are ever
deleted there; logs are read where the pod is; changing the setting with jobs running moves,
orphans or deletes nothing; a job whose namespace does not exist waits, saying so, without a
create a cycle."""

from __future__ import annotations

import time

import kmock
import pytest
from django.test import override_settings
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from jobspec import labels
from portal.cluster.models import Placement
from portal.cluster.namespaces import NAMESPACE_FORBIDDEN, NAMESPACE_MISSING, job_namespaces
from portal.jobs.models import Job
from portal.jobs.services import job_cancel
from portal.tenants.models import Membership
from scheduler.adapters.cluster.kubernetes import KubernetesBackend
from scheduler.adapters.cluster.testing.emulator import write_kubeconfig
from scheduler.adapters.cluster.watch_cache import ClusterCache, manifests_translation
from scheduler.adapters.pod_logs import pod_log_read
from tests.factories import MembershipFactory, UserFactory
from tests.scheduler.conftest import submit_job

pytestmark = pytest.mark.django_db
GPU_NODE = {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8", "pods": "110"}
PER_TENANT = {"KUBERNETES_NAMESPACE_PER_TENANT": True, "KUBERNETES_NAMESPACE_PREFIX": "gpu-"}


@pytest.fixture
def alice(nlp, vision):
    user = UserFactory(username="alice")
    for tenant in (nlp, vision):
        MembershipFactory(user=user, tenant=tenant, role=Membership.Role.RESEARCHER)
    return user


@pytest.fixture
def tenants_cluster(cluster, backend):
    """Two 8-GPU nodes; the backend knows the portal's namespaces as the worker's does."""
    backend.namespaces = job_namespaces
    for node in ("gpu-a", "gpu-b"):
        cluster.add_node(node, GPU_NODE)
    return cluster


@pytest.fixture
def namespaced(tenants_cluster):
    """The shared namespace and both tenants' exist."""
    for namespace in ("gpu-jobs", "gpu-nlp", "gpu-vision"):
        tenants_cluster.add_namespace(namespace)
    return tenants_cluster


def pods_of(cluster, job: Job) -> dict[tuple[str, str], dict]:
    found = cluster.on_loop(lambda: dict(cluster.store.table("pods")))
    return {
        key: pod
        for key, pod in found.items()
        if pod["metadata"]["labels"].get(labels.JOB_ID) == str(job.id)
    }


def owners(cluster) -> set[tuple[str, str]]:
    maps = cluster.on_loop(lambda: dict(cluster.store.table("configmaps")))
    return {
        key for key, obj in maps.items() if obj["metadata"]["labels"].get(labels.OWNER) == "true"
    }


def running(cluster, job: Job, namespace: str) -> bool:
    pods = pods_of(cluster, job)
    return bool(pods) and all(
        key[0] == namespace
        and pod["spec"].get("nodeName")
        and not pod["metadata"].get("deletionTimestamp")
        for key, pod in pods.items()
    )


def served(cluster) -> list:
    return cluster.on_loop(lambda: list(cluster.handler._requests))


def creates_in(requests: list, namespace: str) -> list:
    return [r for r in requests if r.namespace == namespace and r.method == kmock.method.POST]


def foreign_pod(name: str, namespace: str, *, instance: str) -> dict:
    pod_labels = labels.replica_labels(
        job_id=999, task="worker", replica=0, queue="q", tenant="t", instance=instance
    )
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": pod_labels},
        "spec": {"nodeName": "gpu-b", "containers": [{"name": "main", "image": "x"}]},
        "status": {"phase": "Running"},
    }


def test_each_tenants_gang_is_made_and_bound_whole_in_its_own_namespace(
    namespaced, kube_cycle, alice, nlp_queue, vision_queue
):
    cluster = namespaced
    with override_settings(**PER_TENANT):
        bert = submit_job(alice, nlp_queue, "bert", replicas=2, gpus=2)
        resnet = submit_job(alice, vision_queue, "resnet", replicas=2, gpus=2)
        # vision's second pod cannot be made for now: its gang stays unbound, nlp's runs.
        cluster.reject_create(f"{resnet.object_name}-worker-1", status=500, times=4)
        kube_cycle(errors=True)

        assert running(cluster, bert, "gpu-nlp")
        resnet_pods = pods_of(cluster, resnet)
        assert set(resnet_pods) == {("gpu-vision", f"{resnet.object_name}-worker-0")}
        assert not any(pod["spec"].get("nodeName") for pod in resnet_pods.values())

        kube_cycle()
        assert running(cluster, resnet, "gpu-vision")
    assert owners(cluster) == {
        ("gpu-nlp", f"{bert.object_name}"),
        ("gpu-vision", f"{resnet.object_name}"),
    }
    assert dict(Placement.objects.values_list("job_id", "namespace").distinct()) == {
        bert.id: "gpu-nlp",
        resnet.id: "gpu-vision",
    }


def test_eviction_and_cleanup_touch_only_this_instances_objects_in_each_namespace(
    namespaced, kube_cycle, alice, nlp_queue, vision_queue
):
    cluster = namespaced
    with override_settings(**PER_TENANT, FINISHED_POD_RETENTION_SECONDS=0):
        bert = submit_job(alice, nlp_queue, "bert", replicas=2, gpus=2)
        resnet = submit_job(alice, vision_queue, "resnet", replicas=2, gpus=2)
        kube_cycle()
        vision_pod = f"{resnet.object_name}-worker-0"
        # Another instance's pod in vision's namespace, and one of the same name as vision's
        # own pod in nlp's; an orphan of this instance in vision's namespace.
        cluster.add_pod(foreign_pod("gp-999-worker-0", "gpu-vision", instance="staging"))
        cluster.add_pod(foreign_pod(vision_pod, "gpu-nlp", instance="staging"))
        cluster.add_pod(foreign_pod("gp-998-worker-0", "gpu-vision", instance="gpuportal"))

        job_cancel(job=resnet, actor=alice)
        for _ in range(3):
            kube_cycle()
            cluster.advance(1)

    assert pods_of(cluster, resnet) == {}
    assert running(cluster, bert, "gpu-nlp")
    assert cluster.pod("gpu-vision", "gp-999-worker-0") is not None
    assert cluster.pod("gpu-nlp", vision_pod) is not None
    assert cluster.pod("gpu-vision", "gp-998-worker-0") is None  # its own orphan: gone
    assert owners(cluster) == {("gpu-nlp", f"{bert.object_name}")}


def test_a_pods_log_is_read_in_its_tenants_namespace(
    namespaced, kube_cycle, alice, vision_queue, tmp_path, monkeypatch
):
    cluster = namespaced
    with override_settings(**PER_TENANT):
        submit_job(alice, vision_queue, "resnet", gpus=1)
        kube_cycle()
    cluster.advance(1)
    kubeconfig = tmp_path / "kubeconfig"
    write_kubeconfig(kubeconfig, cluster.url)
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    pod = Placement.objects.get().pod_name
    before = len(served(cluster))

    with override_settings(CLUSTER_BACKEND="kubernetes"):
        log = pod_log_read(pod_name=pod, tail=10)

    assert log.phase == "Running"
    reads = {(r.namespace, r.name, r.subresource) for r in served(cluster)[before:]}
    assert ("gpu-vision", pod, "log") in reads


def test_changing_the_setting_with_jobs_running_moves_orphans_and_deletes_nothing(
    namespaced, kube_cycle, alice, nlp_queue
):
    cluster = namespaced
    with override_settings(**PER_TENANT):
        bert = submit_job(alice, nlp_queue, "bert", replicas=2, gpus=2)
        kube_cycle()
    assert running(cluster, bert, "gpu-nlp")

    # Off: bert stays in gpu-nlp, a new job goes to the shared namespace.
    gpt = submit_job(alice, nlp_queue, "gpt", replicas=2, gpus=2)
    for _ in range(3):
        kube_cycle()
        cluster.advance(1)
    assert running(cluster, bert, "gpu-nlp")
    assert running(cluster, gpt, "gpu-jobs")
    assert owners(cluster) == {
        ("gpu-nlp", f"{bert.object_name}"),
        ("gpu-jobs", f"{gpt.object_name}"),
    }

    # bert ends where it ran: its pods and its owner there are cleaned up.
    with override_settings(FINISHED_POD_RETENTION_SECONDS=0):
        for namespace, name in pods_of(cluster, bert):
            cluster.finish_pod(namespace, name)
        for _ in range(3):
            kube_cycle()
            cluster.advance(1)
    assert Job.objects.get(pk=bert.pk).status == Job.Status.SUCCEEDED
    assert pods_of(cluster, bert) == {}
    assert owners(cluster) == {("gpu-jobs", f"{gpt.object_name}")}

    # On again: gpt keeps running in the shared namespace.
    with override_settings(**PER_TENANT):
        for _ in range(2):
            kube_cycle()
            cluster.advance(1)
    assert running(cluster, gpt, "gpu-jobs")


def test_a_job_whose_namespace_does_not_exist_waits_saying_so_without_a_create(
    tenants_cluster, kube_cycle, alice, nlp_queue, vision_queue
):
    cluster = tenants_cluster
    for namespace in ("gpu-jobs", "gpu-nlp"):
        cluster.add_namespace(namespace)
    with override_settings(**PER_TENANT):
        bert = submit_job(alice, nlp_queue, "bert", gpus=2)
        resnet = submit_job(alice, vision_queue, "resnet", replicas=2, gpus=2)
        for _ in range(3):
            kube_cycle()

        resnet.refresh_from_db()
        assert resnet.status == Job.Status.PENDING
        assert resnet.pending_reason == NAMESPACE_MISSING.format(
            namespace="gpu-vision", tenant="vision"
        )
        assert resnet.pending_reason.startswith(
            "namespace gpu-vision does not exist; ask the cluster admin"
        )
        assert resnet.pending_kind == "waits"
        assert not Placement.objects.filter(job=resnet).exists()
        assert creates_in(served(cluster), "gpu-vision") == []
        assert running(cluster, bert, "gpu-nlp")

        cluster.add_namespace("gpu-vision")
        kube_cycle()
        kube_cycle()
    assert running(cluster, resnet, "gpu-vision")
    assert Job.objects.get(pk=resnet.pk).pending_reason == ""


def test_a_namespace_gone_before_the_create_requeues_the_job_instead_of_failing_it(
    tenants_cluster, kube_cycle, alice, vision_queue, monkeypatch
):
    cluster = tenants_cluster
    cluster.add_namespace("gpu-jobs")
    with override_settings(**PER_TENANT):
        resnet = submit_job(alice, vision_queue, "resnet", replicas=2, gpus=2)
        # The check saw the namespace (it was deleted right after): the create answers 404.
        monkeypatch.setattr(KubernetesBackend, "namespaces_missing", lambda self, names: set())
        kube_cycle(errors=True)
        resnet.refresh_from_db()
        assert resnet.status == Job.Status.PREEMPTED  # pending again once released
        assert resnet.pending_reason.startswith("namespace gpu-vision does not exist")
        assert not Placement.objects.filter(
            job=resnet, state__in=[Placement.State.BOUND, Placement.State.RUNNING]
        ).exists()

        monkeypatch.undo()
        before = len(served(cluster))
        for _ in range(2):
            kube_cycle()
        assert creates_in(served(cluster)[before:], "gpu-vision") == []
    resnet.refresh_from_db()
    assert resnet.status == Job.Status.PENDING
    assert resnet.pending_reason.startswith("namespace gpu-vision does not exist")


def test_a_namespace_being_deleted_counts_as_missing(
    tenants_cluster, kube_cycle, alice, vision_queue
):
    cluster = tenants_cluster
    for namespace in ("gpu-jobs", "gpu-vision"):
        cluster.add_namespace(namespace)
    cluster.on_loop(
        lambda: cluster.store.patch(
            "namespaces", None, "gpu-vision", {"status": {"phase": "Terminating"}}, validate=False
        )
    )
    with override_settings(**PER_TENANT):
        resnet = submit_job(alice, vision_queue, "resnet", gpus=1)
        kube_cycle()
    resnet.refresh_from_db()
    assert resnet.pending_reason.startswith("namespace gpu-vision does not exist")
    assert creates_in(served(cluster), "gpu-vision") == []


def test_a_tenant_namespace_that_refuses_the_portal_does_not_stop_the_others(
    namespaced, backend, kube_cycle, alice, nlp_queue, vision_queue, monkeypatch
):
    """vision's namespace exists, but an admin has not applied the portal's Roles there: every
    list of the portal's objects in it answers 403. nlp's jobs are scheduled all the same."""

    def refusing(real):
        def call(self_or_namespace, *args, **kwargs):
            namespace = (
                args[0]
                if isinstance(self_or_namespace, client.NetworkingV1Api)
                else self_or_namespace
            )
            if namespace == "gpu-vision":
                raise ApiException(status=403, reason="Forbidden")
            return real(self_or_namespace, *args, **kwargs)

        return call

    for name in ("list_namespaced_config_map", "list_namespaced_service"):
        monkeypatch.setattr(backend.core_v1, name, refusing(getattr(backend.core_v1, name)))
    monkeypatch.setattr(
        client.NetworkingV1Api,
        "list_namespaced_network_policy",
        refusing(client.NetworkingV1Api.list_namespaced_network_policy),
    )
    with override_settings(**PER_TENANT):
        bert = submit_job(alice, nlp_queue, "bert", replicas=2, gpus=2)
        resnet = submit_job(alice, vision_queue, "resnet", gpus=2)
        for _ in range(2):
            kube_cycle()
    assert running(namespaced, bert, "gpu-nlp")
    # vision's job waits for the Roles instead of failing on a refused create.
    resnet.refresh_from_db()
    assert resnet.status == Job.Status.PENDING
    assert resnet.pending_reason == NAMESPACE_FORBIDDEN.format(
        namespace="gpu-vision", tenant="vision"
    )
    assert creates_in(served(namespaced), "gpu-vision") == []


def test_with_a_watch_cache_steady_cycles_list_no_tenants_objects(
    namespaced, backend, kube_cycle, alice, nlp_queue, vision_queue
):
    """Each tenant's namespace is watched from the cycle that first names it: then a cycle reads
    the portal's objects there from memory instead of listing four kinds per tenant."""
    cluster = namespaced
    cache = ClusterCache(
        backend.core_v1,
        manifests_translation(backend.instance),
        watch_seconds=5,
        sync_timeout=10,
        object_namespaces=("gpu-jobs",),
        object_selector=labels.owned_selector(backend.instance),
    )
    backend.cache = cache
    namespaces = ("gpu-jobs", "gpu-nlp", "gpu-vision")
    kinds = [kmock.resource(r) for r in ("v1/configmaps", "v1/services", "v1/secrets")]
    kinds.append(kmock.resource("networking.k8s.io/v1/networkpolicies"))

    def lists() -> int:
        return sum(
            1
            for kind in kinds
            for r in cluster.requests(kmock.action.LIST, kind)
            if r.params.get("watch") != "true"
        )

    try:
        with override_settings(**PER_TENANT):
            bert = submit_job(alice, nlp_queue, "bert", replicas=2, gpus=2, plugins={"svc": []})
            kube_cycle()
            assert cache.object_namespaces == namespaces
            for _ in range(100):  # every reflector has listed once
                if all(cache.job_objects("ConfigMap", ns) is not None for ns in namespaces):
                    break
                time.sleep(0.05)
            before = lists()
            for _ in range(3):
                kube_cycle()
                cluster.advance(1)
            assert lists() == before
        assert running(cluster, bert, "gpu-nlp")
        assert {obj.name for obj in cache.job_objects("Service", "gpu-nlp")} == {
            f"{bert.object_name}"
        }
    finally:
        cache.stop()
