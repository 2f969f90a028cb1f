"""A 2-pod MPI job on the emulated API server, whole cycles: the ssh plugin's Secret exists
before the pods with a key pair the reconcile generated (and that the portal's database does
not hold), every pod mounts it at /root/.ssh, the master's pod has MPI_HOST naming the worker,
and once the job ends the Secret goes with the job's owner object; the worker never reads a
Secret."""

from __future__ import annotations

import base64

import kmock
import pytest
from cryptography.hazmat.primitives import serialization

from jobspec.labels import INSTANCE, MANAGED, owned_selector
from portal.jobs.models import Job
from portal.jobs.services import job_cancel, job_submit
from portal.tenants.models import Membership
from scheduler.adapters.cluster.watch_cache import ClusterCache, manifests_translation
from scheduler.adapters.orchestrator import scheduling_cycle_run
from tests.factories import MembershipFactory, UserFactory
from tests.scheduler.adapters.test_job_objects_cache import fresh_backend

pytestmark = pytest.mark.django_db
NAMESPACE = "gpu-jobs"
GPU_NODE = {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8", "pods": "110"}
SECRETS = kmock.resource("v1/secrets")


def _task(name):
    return {"name": name, "replicas": 1, "image": "mpi:1", "gpus": 1, "cpu_millis": 1000}


def _secrets(cluster) -> dict:
    return cluster.on_loop(lambda: dict(cluster.store.table("secrets")))


def _reads(cluster) -> int:
    """Lists, watches and gets of Secrets."""
    return sum(
        len(cluster.requests(action, SECRETS))
        for action in (kmock.action.LIST, kmock.action.WATCH, kmock.action.FETCH)
    )


def _env(pod) -> dict:
    return {e["name"]: e.get("value") for e in pod["spec"]["containers"][0].get("env", [])}


@pytest.fixture
def mpi_job(cluster, kube_cycle, nlp, nlp_queue):
    user = UserFactory(username="alice")
    MembershipFactory(user=user, tenant=nlp, role=Membership.Role.RESEARCHER)
    cluster.add_node("gpu-a", GPU_NODE)
    job = job_submit(
        submitter=user,
        queue=nlp_queue,
        name="hello",
        tasks=[_task("master"), _task("worker")],
        plugins={"mpi": []},
    )
    kube_cycle()
    return user, job


def test_a_two_pod_mpi_job_gets_its_secret_the_mounts_and_mpi_host(cluster, mpi_job):
    _, job = mpi_job
    secret = _secrets(cluster)[(NAMESPACE, f"{job.object_name}-ssh")]
    data = {key: base64.b64decode(value).decode() for key, value in secret["data"].items()}
    assert set(data) == {"id_rsa", "id_rsa.pub", "authorized_keys", "config"}
    private = serialization.load_pem_private_key(data["id_rsa"].encode(), password=None)
    public = private.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    assert data["id_rsa"].startswith("-----BEGIN RSA PRIVATE" + " KEY-----")  # PKCS#1, as upstream
    assert data["id_rsa.pub"] == data["authorized_keys"] == public.decode() + "\n"
    assert (
        f"Host hello-worker-0\n  HostName hello-worker-0.{job.object_name}\n  Port 22\n"
        in (data["config"])
    )
    # Marked as the portal's and owned by the job's owner object, so kubectl delete of the
    # owner garbage-collects it.
    labels = secret["metadata"]["labels"]
    assert (labels[MANAGED], labels[INSTANCE]) == ("true", "gpuportal")
    assert secret["metadata"]["ownerReferences"][0]["name"] == f"{job.object_name}"
    # The database holds no key: the job's stored plugins are flags only.
    job.refresh_from_db()
    assert job.plugins == {"mpi": [], "svc": [], "ssh": []}
    assert "PRIVATE KEY" not in str(Job.objects.values_list("plugins", flat=True))

    pods = {p["metadata"]["labels"]["gpuportal.io/task"]: p
            for p in cluster.on_loop(lambda: list(cluster.store.table("pods").values()))}  # fmt: skip
    assert set(pods) == {"master", "worker"}
    for pod in pods.values():
        spec = pod["spec"]
        assert {"mountPath": "/root/.ssh", "name": f"{job.object_name}-ssh", "subPath": ".ssh"} in (
            spec["containers"][0]["volumeMounts"]
        )
        volume = next(v for v in spec["volumes"] if v["name"] == f"{job.object_name}-ssh")
        assert volume["secret"]["secretName"] == f"{job.object_name}-ssh"
        assert volume["secret"]["defaultMode"] == 0o600
        assert {"containerPort": 22, "name": "mpijob-port"} in spec["containers"][0]["ports"]
    worker = pods["worker"]["spec"]
    assert _env(pods["master"])["MPI_HOST"] == f"{worker['hostname']}.{worker['subdomain']}"
    assert "MPI_HOST" not in _env(pods["worker"])
    assert len(cluster.requests(kmock.action.CREATE, SECRETS)) == 1  # one key pair per job


def test_the_secret_goes_with_its_owner_once_the_job_ended(cluster, kube_cycle, mpi_job):
    """The garbage collector deletes it with the job's owner object: the worker neither
    lists nor deletes Secrets (it has no read on them)."""
    user, job = mpi_job
    assert (NAMESPACE, f"{job.object_name}-ssh") in _secrets(cluster)
    job_cancel(job=job, actor=user)
    kube_cycle()  # evicts the pods
    cluster.advance(60)
    kube_cycle()
    cluster.advance(60)
    kube_cycle()
    assert _secrets(cluster) == {}
    assert cluster.requests(kmock.action.DELETE, SECRETS) == []
    assert _reads(cluster) == 0


def test_a_secret_someone_deletes_is_not_seen_and_the_next_job_gets_keys_of_its_own(
    cluster, kube_cycle, mpi_job
):
    user, job = mpi_job
    key = (NAMESPACE, f"{job.object_name}-ssh")
    before = _secrets(cluster)[key]["data"]["id_rsa"]
    cluster.on_loop(lambda: cluster.store.delete("secrets", *key))
    kube_cycle()
    assert key not in _secrets(cluster)  # not seen: the worker cannot read Secrets
    # Its pods run on without it (its keys are mounted); a new job gets a Secret of its own.
    job_cancel(job=job, actor=user)
    kube_cycle()
    cluster.advance(60)
    kube_cycle()
    again = job_submit(submitter=user, queue=job.queue, name="again",
                       tasks=[_task("master"), _task("worker")], plugins={"mpi": []})  # fmt: skip
    kube_cycle()
    made = _secrets(cluster)[(NAMESPACE, f"{again.object_name}-ssh")]["data"]["id_rsa"]
    assert made != before
    assert _reads(cluster) == 0


def test_with_the_watch_cache_a_new_backend_each_cycle_makes_no_second_key_pair(
    cluster, backend, nlp, nlp_queue
):
    """The cycle worker's shape: a fresh backend per cycle over one cache. The Secret is made
    once, with its job's pods, and never listed or watched."""
    cache = ClusterCache(
        backend.core_v1, manifests_translation(backend.instance), watch_seconds=5,
        sync_timeout=10, object_namespaces=(NAMESPACE,),
        object_selector=owned_selector(backend.instance),
    )  # fmt: skip
    try:
        user = UserFactory(username="bob")
        MembershipFactory(user=user, tenant=nlp, role=Membership.Role.RESEARCHER)
        cluster.add_node("gpu-a", GPU_NODE)
        job = job_submit(submitter=user, queue=nlp_queue, name="hello",
                         tasks=[_task("master"), _task("worker")], plugins={"mpi": []})  # fmt: skip
        scheduling_cycle_run(backend=fresh_backend(cluster, cache))
        assert (NAMESPACE, f"{job.object_name}-ssh") in _secrets(cluster)
        for _ in range(3):
            cluster.advance(5)
            scheduling_cycle_run(backend=fresh_backend(cluster, cache))
        assert len(cluster.requests(kmock.action.CREATE, SECRETS)) == 1
        assert _reads(cluster) == 0
    finally:
        cache.stop()
