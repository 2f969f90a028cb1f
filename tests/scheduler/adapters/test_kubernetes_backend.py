"""KubernetesBackend driven through the official client over HTTP against kmock's emulator."""

from __future__ import annotations

import asyncio
import socket
from decimal import Decimal

import kmock
import pytest
from kubernetes import client

from jobspec import labels
from jobspec.notice import DEADLINE_ANNOTATION as DEADLINE
from jobspec.pods import DesiredPod
from scheduler.adapters.cluster.base import ClusterError, ObservedNode, TransientClusterError
from scheduler.adapters.cluster.kubernetes import KubernetesBackend, RetryPolicy
from scheduler.adapters.cluster.manifests import parse_resources, pod_manifest

# The same values the conftest fixtures use; conftest modules are not importable by name.
NAMESPACE = "gpu-jobs"
GPU_RESOURCE_NAMES = ("nvidia.com/gpu", "mars-tech.com/gpu")
NODES = kmock.resource("v1/nodes")
GiB = 2**30


def make_desired(
    job_id: int = 7,
    task: str = "worker",
    replica: int = 0,
    *,
    node: str = "gpu-a",
    gpus: int = 8,
    gpu_name: str = "nvidia.com/gpu",
) -> DesiredPod:
    return DesiredPod(
        name=labels.pod_name(job_id, task, replica),
        namespace=NAMESPACE,
        node_name=node,
        image="registry.local/train:1.4",
        command=["python", "train.py"],
        env={"RANK": str(replica), "WORLD_SIZE": "2"},
        requests={"cpu": 16000, "memory": 64 * GiB, gpu_name: gpus},
        labels=labels.replica_labels(
            job_id=job_id, task=task, replica=replica, queue="nlp", tenant="research"
        ),
        annotations=labels.replica_annotations(job_name="llama ft #3", queue="nlp", tenant="r&d"),
    )


def managed_pod(name: str, *, job_id: str = "99", **meta: object) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": labels.replica_labels(
                job_id=job_id, task="worker", replica=0, queue="q", tenant="t"
            ),
            **meta,
        },
        "spec": {"nodeName": "gpu-a", "containers": [{"name": "main", "image": "x"}]},
    }


def terminated_status(phase: str, exit_code: int, reason: str) -> dict:
    return {
        "status": {
            "phase": phase,
            "containerStatuses": [
                {
                    "name": "main",
                    "image": "registry.local/train:1.4",
                    "imageID": "",
                    "ready": False,
                    "restartCount": 0,
                    "state": {"terminated": {"exitCode": exit_code, "reason": reason}},
                }
            ],
        }
    }


# -- nodes -----------------------------------------------------------------------------------


def test_lists_nodes_with_gpus_under_each_configured_resource_name(cluster, backend):
    cluster.add_node(
        "gpu-a",
        {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": "8", "pods": "110"},
        labels={"gpu.model": "a100"},
    )
    cluster.add_node(
        "gpu-b",
        {"cpu": "96000m", "memory": "512Gi", "mars-tech.com/gpu": "8", "pods": "110"},
        taints=[{"key": "mars-tech.com/gpu", "effect": "NoSchedule"}],
        unschedulable=True,
    )

    assert backend.list_nodes() == [
        ObservedNode(
            name="gpu-a",
            allocatable={"cpu": 96000, "memory": 2**40, "nvidia.com/gpu": 8, "pods": 110},
            labels={"gpu.model": "a100"},
        ),
        ObservedNode(
            name="gpu-b",
            allocatable={"cpu": 96000, "memory": 512 * GiB, "mars-tech.com/gpu": 8, "pods": 110},
            unschedulable=True,
            taints=[{"key": "mars-tech.com/gpu", "effect": "NoSchedule"}],
        ),
    ]


@pytest.mark.parametrize(
    ("name", "quantity", "expected"),
    [
        ("cpu", "96", 96000),
        ("cpu", "96000m", 96000),
        ("cpu", "250m", 250),
        ("cpu", "0.5", 500),
        ("memory", "1Ti", 2**40),
        ("memory", "512Gi", 512 * GiB),
        ("memory", "1.5Gi", 3 * GiB // 2),
        ("memory", "128G", 128 * 10**9),
        ("nvidia.com/gpu", "8", 8),
        ("pods", "110", 110),
    ],
)
def test_parses_kubernetes_quantities_into_our_units(name, quantity, expected):
    assert parse_resources({name: quantity}) == {name: expected}


# -- creating pods ---------------------------------------------------------------------------


def test_creates_an_unbound_pod_for_the_portal_scheduler_with_labels_requests_and_limits(
    cluster, backend
):
    desired = make_desired(node="gpu-b", gpus=4, gpu_name="mars-tech.com/gpu")

    backend.create_pod(desired)

    stored = cluster.pod(NAMESPACE, "gp-7-worker-0")
    assert stored["metadata"]["labels"] == {
        "gpuportal.io/managed": "true",
        "gpuportal.io/instance": "gpuportal",
        "gpuportal.io/job-id": "7",
        "gpuportal.io/task": "worker",
        "gpuportal.io/replica": "0",
        "gpuportal.io/queue": "nlp",
        "gpuportal.io/tenant": "research",
    }
    assert stored["metadata"]["annotations"]["gpuportal.io/job-name"] == "llama ft #3"
    assert stored["metadata"]["annotations"]["gpuportal.io/target-node"] == "gpu-b"
    spec = stored["spec"]
    # kube-scheduler leaves pods of another scheduler alone; the kubelet starts nothing unbound.
    assert "nodeName" not in spec
    assert spec["schedulerName"] == backend.scheduler_name == "gpuportal"
    assert spec["restartPolicy"] == "Never"
    assert spec["tolerations"] == [
        {"key": "mars-tech.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    (container,) = spec["containers"]
    assert container["resources"] == {
        "requests": {"cpu": "16000m", "memory": str(64 * GiB), "mars-tech.com/gpu": "4"},
        # Extended resources are only valid with limits equal to requests.
        "limits": {"mars-tech.com/gpu": "4"},
    }
    assert container["env"] == [
        {"name": "RANK", "value": "0"},
        {"name": "WORLD_SIZE", "value": "2"},
    ]


def test_manifest_quantities_round_trip_through_the_official_parser():
    manifest = pod_manifest(make_desired(), GPU_RESOURCE_NAMES, "portal-a")
    requests = manifest.spec.containers[0].resources.requests
    spec = client.ApiClient().sanitize_for_serialization(manifest)["spec"]
    assert spec["schedulerName"] == "portal-a"
    assert parse_resources(requests) == {"cpu": 16000, "memory": 64 * GiB, "nvidia.com/gpu": 8}
    assert Decimal(requests["cpu"][:-1]) / 1000 == 16


def test_create_that_failed_after_the_server_stored_the_pod_is_retried_without_a_duplicate(
    cluster, backend, sleeps
):
    cluster.fail_next(
        kmock.action.CREATE,
        kmock.KubernetesError(status=500, reason="InternalError", message="etcd timeout"),
    )

    backend.create_pod(make_desired())

    assert cluster.pod_names() == ["gp-7-worker-0"]
    assert len(cluster.requests(kmock.action.CREATE)) == 2  # the retry got 409 ...
    assert len(cluster.requests(kmock.action.FETCH)) == 1  # ... read it, and accepted it
    assert sleeps == [0.1]


def test_create_retried_after_a_read_timeout_does_not_duplicate_the_pod(cluster, backend, sleeps):
    # The server stores the pod, then stalls longer than the client's read timeout.
    cluster.fail_next(kmock.action.CREATE, lambda: asyncio.sleep(2))

    backend.create_pod(make_desired())

    assert cluster.pod_names() == ["gp-7-worker-0"]
    assert len(cluster.requests(kmock.action.CREATE)) == 2
    assert sleeps == [0.1]


def test_creating_a_pod_that_already_exists_for_the_same_replica_is_success(cluster, backend):
    backend.create_pod(make_desired())
    backend.create_pod(make_desired())

    assert cluster.pod_names() == ["gp-7-worker-0"]


def test_name_held_by_another_replica_is_a_permanent_error_and_is_left_alone(
    cluster, backend, sleeps
):
    cluster.add_pod(managed_pod("gp-7-worker-0", job_id="99"))

    with pytest.raises(ClusterError) as raised:
        backend.create_pod(make_desired())

    # Whose it is, but nothing of the other job (its id, task or replica).
    assert str(raised.value) == (
        f"create pod {NAMESPACE}/gp-7-worker-0: name taken by an object of another job of "
        "this portal instance (a database restored from backup?)"
    )
    assert not isinstance(raised.value, TransientClusterError)
    assert cluster.pod(NAMESPACE, "gp-7-worker-0")["metadata"]["labels"]["gpuportal.io/job-id"] == (
        "99"
    )
    assert sleeps == []


def test_name_held_by_a_terminating_pod_is_retried_then_reported_as_transient(
    cluster, backend, sleeps
):
    cluster.add_pod(
        managed_pod(
            "gp-7-worker-0",
            job_id="7",
            deletionTimestamp="2025-01-01T00:00:00Z",
            finalizers=["example.com/hold"],
        )
    )

    with pytest.raises(TransientClusterError, match="terminating"):
        backend.create_pod(make_desired())

    assert sleeps == [0.1, 0.2, 0.4]


def test_rejected_create_fails_at_once_without_retrying(cluster, backend, sleeps):
    cluster.reject_create("gp-7-worker-0", status=403)

    with pytest.raises(ClusterError, match="HTTP 403") as raised:
        backend.create_pod(make_desired())

    assert not isinstance(raised.value, TransientClusterError)
    assert cluster.pod_names() == []
    assert len(cluster.requests(kmock.action.CREATE)) == 1
    assert sleeps == []


# -- reading pods back -----------------------------------------------------------------------


def test_lists_only_this_instances_pods_by_label_selector(cluster, backend):
    backend.create_pod(make_desired())
    cluster.add_pod(
        {
            "metadata": {"name": "someone-elses", "namespace": NAMESPACE, "labels": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "image": "x"}]},
        }
    )
    other = managed_pod("gp-8-worker-0", job_id="8")
    other["metadata"]["labels"][labels.INSTANCE] = "staging-portal"
    cluster.add_pod(other)
    legacy = managed_pod("gp-9-worker-0", job_id="9")
    del legacy["metadata"]["labels"][labels.INSTANCE]
    cluster.add_pod(legacy)

    pods = backend.list_pods()

    assert [pod.name for pod in pods] == ["gp-7-worker-0"]
    (list_request,) = cluster.requests(kmock.action.LIST)
    assert list_request.params["labelSelector"] == (
        "gpuportal.io/managed=true,gpuportal.io/instance=gpuportal"
    )


def test_reads_back_phase_exit_code_and_reason(cluster, backend):
    backend.create_pod(make_desired(replica=0))
    backend.create_pod(make_desired(replica=1))
    backend.create_pod(make_desired(replica=2))
    backend.bind_pod("gp-7-worker-2", NAMESPACE, "gpu-a")
    cluster.patch_pod(NAMESPACE, "gp-7-worker-0", terminated_status("Succeeded", 0, "Completed"))
    cluster.patch_pod(NAMESPACE, "gp-7-worker-1", terminated_status("Failed", 137, "OOMKilled"))
    cluster.patch_pod(NAMESPACE, "gp-7-worker-2", {"status": {"phase": "Running"}})

    observed = {pod.name: pod for pod in backend.list_pods()}

    done, oom, running = (observed[f"gp-7-worker-{i}"] for i in range(3))
    assert (done.phase, done.exit_code, done.reason) == ("Succeeded", 0, "Completed")
    assert (oom.phase, oom.exit_code, oom.reason) == ("Failed", 137, "OOMKilled")
    assert (running.phase, running.exit_code, running.node_name) == ("Running", None, "gpu-a")
    assert running.labels["gpuportal.io/replica"] == "2"


def test_pod_being_deleted_is_reported_as_deletion_requested(cluster, backend):
    cluster.add_pod(
        managed_pod(
            "gp-9-worker-0",
            deletionTimestamp="2025-01-01T00:00:00Z",
            finalizers=["example.com/hold"],
        )
    )

    (pod,) = backend.list_pods()

    assert pod.deletion_requested is True


# -- deleting pods ---------------------------------------------------------------------------


def test_evicting_deletes_the_pod_with_the_grace_period(cluster, backend):
    # A Ready node's kubelet confirms the deletion; without one the pod would stay Terminating.
    cluster.add_node("gpu-a", {"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": "8"})
    backend.create_pod(make_desired())

    backend.delete_pod("gp-7-worker-0", NAMESPACE, grace_seconds=45)

    assert cluster.pod_names() == []
    (delete,) = cluster.requests(kmock.action.DELETE)
    assert delete.params["gracePeriodSeconds"] == "45"
    assert delete.data["gracePeriodSeconds"] == 45


def test_deleting_a_pod_that_is_already_gone_is_success(cluster, backend, sleeps):
    backend.delete_pod("never-existed", NAMESPACE, grace_seconds=30)

    assert len(cluster.requests(kmock.action.DELETE)) == 1
    assert sleeps == []


def test_delete_that_failed_after_the_server_deleted_is_retried_to_success(
    cluster, backend, sleeps
):
    cluster.add_node("gpu-a", {"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": "8"})
    backend.create_pod(make_desired())
    cluster.fail_next(kmock.action.DELETE, 503)

    backend.delete_pod("gp-7-worker-0", NAMESPACE, grace_seconds=30)

    assert cluster.pod_names() == []
    assert len(cluster.requests(kmock.action.DELETE)) == 2  # the retry got 404: done
    assert sleeps == [0.1]


# -- annotating pods (the preemption notice) -------------------------------------------------


def test_annotating_a_pod_merges_into_its_annotations(cluster, backend):
    cluster.add_pod(managed_pod("gp-99-worker-0", annotations={"mine": "kept"}))

    backend.annotate_pod("gp-99-worker-0", NAMESPACE, {DEADLINE: "2026-12-01T12:05:00Z"})

    pod = cluster.pod(NAMESPACE, "gp-99-worker-0")
    assert pod["metadata"]["annotations"] == {"mine": "kept", DEADLINE: "2026-12-01T12:05:00Z"}
    (patch,) = cluster.requests(kmock.action.UPDATE)
    assert patch.headers["Content-Type"] == "application/merge-patch+json"
    (observed,) = backend.list_pods()
    assert observed.annotations[DEADLINE] == "2026-12-01T12:05:00Z"


def test_annotating_a_pod_that_is_gone_is_success(cluster, backend, sleeps):
    backend.annotate_pod("never-existed", NAMESPACE, {DEADLINE: "2026-12-01T12:05:00Z"})

    assert len(cluster.requests(kmock.action.UPDATE)) == 1
    assert sleeps == []


def test_an_annotation_the_server_refuses_is_an_error_naming_the_pod(cluster, backend, sleeps):
    cluster.add_pod(managed_pod("gp-99-worker-0"))
    cluster.fail_next(kmock.action.UPDATE, 403)

    with pytest.raises(ClusterError, match="annotate pod gpu-jobs/gp-99-worker-0: HTTP 403"):
        backend.annotate_pod("gp-99-worker-0", NAMESPACE, {DEADLINE: "2026-12-01T12:05:00Z"})
    assert sleeps == []


# -- retry policy ----------------------------------------------------------------------------


def test_throttling_honours_retry_after_up_to_the_cap(cluster, backend, sleeps):
    cluster.fail_next(kmock.action.LIST, 429, kmock.headers({"Retry-After": "7"}))

    assert backend.list_pods() == []

    # One backoff, capped at max_delay, and exactly two requests: urllib3 did not also retry.
    assert sleeps == [1.0]
    assert len(cluster.requests(kmock.action.LIST)) == 2


def test_persistent_server_errors_give_up_with_a_transient_error(cluster, backend, sleeps):
    cluster.fail_next(kmock.action.LIST, 500, times=10, resource=NODES)

    with pytest.raises(TransientClusterError, match="gave up after 4 attempts: HTTP 500"):
        backend.list_nodes()

    assert len(cluster.requests(kmock.action.LIST, NODES)) == 4
    assert sleeps == [0.1, 0.2, 0.4]


def test_unreachable_api_server_is_a_transient_error(sleeps):
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    backend = KubernetesBackend.from_configuration(
        client.Configuration(host=f"http://127.0.0.1:{port}"),
        NAMESPACE,
        GPU_RESOURCE_NAMES,
        RetryPolicy(attempts=3, base_delay=0.5, max_delay=0.8, sleep=sleeps.append),
    )

    with pytest.raises(TransientClusterError, match="gave up after 3 attempts"):
        backend.list_nodes()

    assert sleeps == [0.5, 0.8]


def test_retry_policy_needs_at_least_one_attempt():
    with pytest.raises(ValueError, match="attempts"):
        RetryPolicy(attempts=0)


# -- configuration ---------------------------------------------------------------------------


def test_from_config_reads_the_kubeconfig_named_by_the_environment(cluster, tmp_path, monkeypatch):
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        f"""
apiVersion: v1
kind: Config
clusters: [{{name: emu, cluster: {{server: "{cluster.url}"}}}}]
users: [{{name: portal, user: {{token: not-a-secret}}}}]
contexts: [{{name: emu, context: {{cluster: emu, user: portal}}}}]
current-context: emu
"""
    )
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    cluster.add_node("gpu-a", {"cpu": "8", "memory": "1Gi", "nvidia.com/gpu": "1"})

    backend = KubernetesBackend.from_config(NAMESPACE, GPU_RESOURCE_NAMES)

    assert [node.name for node in backend.list_nodes()] == ["gpu-a"]


def test_from_config_without_any_configuration_is_a_cluster_error(tmp_path, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)

    with pytest.raises(ClusterError, match="no usable Kubernetes configuration"):
        KubernetesBackend.from_config(NAMESPACE, GPU_RESOURCE_NAMES)


# -- naming ----------------------------------------------------------------------------------


def test_pod_names_are_deterministic_and_dns_safe():
    assert labels.pod_name(7, "worker", 0) == "gp-7-worker-0"
    long_name = labels.pod_name("x" * 80, "Worker_Role", 12)
    assert len(long_name) <= 63
    assert long_name == labels.pod_name("x" * 80, "Worker_Role", 12)
    assert long_name != labels.pod_name("x" * 80, "worker-role", 12)
    assert all(ch.isalnum() or ch == "-" for ch in long_name)


def test_label_values_that_need_mangling_stay_distinct():
    assert labels.label_value("nlp") == "nlp"
    assert labels.label_value("r&d") != labels.label_value("r-d")
    assert len(labels.label_value("q" * 100)) <= 63


# -- concurrent writes -----------------------------------------------------------------------


def concurrent_backend(cluster, sleeps, concurrency: int) -> KubernetesBackend:
    return KubernetesBackend.from_configuration(
        client.Configuration(host=cluster.url),
        NAMESPACE,
        GPU_RESOURCE_NAMES,
        RetryPolicy(attempts=2, base_delay=0.1, max_delay=1.0, sleep=sleeps.append),
        request_timeout=(2.0, 5.0),
        write_concurrency=concurrency,
    )


def test_concurrent_creates_give_each_pod_its_own_outcome_and_a_jobs_pods_in_order(cluster, sleeps):
    backend = concurrent_backend(cluster, sleeps, concurrency=4)
    pods = [make_desired(job_id, replica=replica) for job_id in (1, 2, 3) for replica in range(3)]
    cluster.reject_create("gp-2-worker-1", status=403)

    outcomes = backend.create_pods(pods)

    failed = [pod.name for pod, error in zip(pods, outcomes, strict=True) if error is not None]
    assert failed == ["gp-2-worker-1"]
    assert "HTTP 403" in str(outcomes[4])
    assert sorted(cluster.pod_names()) == sorted(pod.name for pod in pods if pod.name not in failed)
    created = [
        request.data["metadata"]["name"]
        for request in cluster.requests(kmock.action.CREATE)
        if request.resource is not None and request.resource.plural == "pods"
    ]
    for job_id in (1, 2, 3):  # each job's pods were sent one after the other, in order
        mine = [name for name in created if name.startswith(f"gp-{job_id}-")]
        assert mine == [f"gp-{job_id}-worker-{replica}" for replica in range(3)]


def test_concurrent_binds_and_deletes_answer_in_the_order_asked(cluster, sleeps):
    backend = concurrent_backend(cluster, sleeps, concurrency=3)
    pods = [make_desired(job_id) for job_id in range(1, 6)]
    assert backend.create_pods(pods) == [None] * 5
    cluster.reject_bind("gp-3-worker-0", status=409)

    outcomes = backend.bind_pods([(pod.name, pod.namespace, "gpu-a") for pod in pods])

    assert [error is None for error in outcomes] == [True, True, False, True, True]
    assert backend.delete_pods([(pod.name, pod.namespace) for pod in pods], 0) == [None] * 5
    assert cluster.pod_names() == []


def test_write_concurrency_must_be_at_least_one(cluster):
    with pytest.raises(ValueError, match="write_concurrency"):
        KubernetesBackend.from_configuration(
            client.Configuration(host=cluster.url), NAMESPACE, GPU_RESOURCE_NAMES,
            write_concurrency=0,
        )  # fmt: skip
