"""A portal deletes only its own instance's objects: another instance's pods (sharing the
namespace, or left by a portal whose database was restored) and pods from before the instance
label are never cleaned up, and count as other workloads' use of their node."""

from __future__ import annotations

import pytest

from jobspec import labels
from portal.cluster.models import Node

pytestmark = pytest.mark.django_db
NAMESPACE = "gpu-jobs"
GPU_NODE = {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8", "pods": "110"}


def portal_pod(name: str, job_id: int, *, instance: str | None) -> dict:
    pod_labels = labels.replica_labels(
        job_id=job_id, task="worker", replica=0, queue="q", tenant="t"
    )
    if instance is None:
        del pod_labels[labels.INSTANCE]
    else:
        pod_labels[labels.INSTANCE] = instance
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": pod_labels},
        "spec": {
            "nodeName": "gpu-a",
            "containers": [
                {
                    "name": "main",
                    "image": "x",
                    "resources": {
                        "requests": {"nvidia.com/gpu": "2"},
                        "limits": {"nvidia.com/gpu": "2"},
                    },
                }
            ],
        },
        "status": {"phase": "Running"},
    }


def test_an_empty_database_never_cleans_up_another_instances_pods(cluster, kube_cycle):
    cluster.add_node("gpu-a", GPU_NODE)
    cluster.add_pod(portal_pod("gp-41-worker-0", 41, instance="staging"))
    cluster.add_pod(portal_pod("gp-42-worker-0", 42, instance=None))  # before the label

    for _ in range(3):
        kube_cycle()

    assert cluster.pod(NAMESPACE, "gp-41-worker-0") is not None
    assert cluster.pod(NAMESPACE, "gp-42-worker-0") is not None
    assert not cluster.pod(NAMESPACE, "gp-41-worker-0")["metadata"].get("deletionTimestamp")
    assert Node.objects.get(name="gpu-a").used_by_others["nvidia.com/gpu"] == 4


def test_an_orphan_of_this_instance_is_cleaned_up(cluster, kube_cycle):
    cluster.add_node("gpu-a", GPU_NODE)
    cluster.add_pod(portal_pod("gp-43-worker-0", 43, instance=labels.DEFAULT_INSTANCE))

    kube_cycle()

    pod = cluster.pod(NAMESPACE, "gp-43-worker-0")
    assert pod is None or pod["metadata"].get("deletionTimestamp")
