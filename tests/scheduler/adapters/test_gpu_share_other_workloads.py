"""Shared GPUs next to another scheduler's shared GPU pods (HAMi's here), against the emulated
API server: the portal reads which cards those pods hold from their device assignment and puts
its own shares on the cards they left, as HAMi's scheduler would."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from django.test import override_settings

from jobspec import labels
from portal.cluster.models import Node
from scheduler.adapters.cluster.testing.emulator import node_object
from tests.scheduler.conftest import submit_job

pytestmark = pytest.mark.django_db
CARDS = json.dumps(
    [
        {"id": f"GPU-{index}", "index": index, "count": 10, "devmem": 81920, "devcore": 100,
         "type": "NVIDIA-H100", "health": True, "mode": "hami-core"}
        for index in range(2)
    ]
)  # fmt: skip
ASSIGNED = "hami.io/vgpu-devices-allocated"


def hami_node(cluster, name: str) -> None:
    node = node_object(name, {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "20",
                              "pods": "110"})  # fmt: skip
    node["metadata"]["annotations"] = {"hami.io/node-nvidia-register": CARDS}
    cluster.on_loop(lambda: cluster.store.create("nodes", None, node, validate=False))


def others_share(name: str, node: str, card: str, cores: int, memory_mib: int) -> dict:
    """A pod HAMi's scheduler placed: one vGPU, and the card it gave it."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "inference",
            "annotations": {ASSIGNED: f"{card},NVIDIA,{memory_mib},{cores}:;"},
        },
        "spec": {
            "nodeName": node,
            "schedulerName": "hami-scheduler",
            "containers": [{"name": "serve", "image": "vllm", "resources": {"limits": {
                "nvidia.com/gpu": "1", "nvidia.com/gpumem": str(memory_mib),
                "nvidia.com/gpucores": str(cores)}}}],
        },
        "status": {"phase": "Running"},
    }  # fmt: skip


def portal_pods(cluster) -> list[dict]:
    found = cluster.on_loop(lambda: dict(cluster.store.table("pods")))
    return [pod for pod in found.values() if labels.JOB_ID in pod["metadata"].get("labels", {})]


@override_settings(GPU_SHARING="hami")
def test_a_share_goes_to_the_card_another_scheduler_left(
    cluster, kube_cycle, researcher, nlp_queue
):
    hami_node(cluster, "gpu-a")
    cluster.add_pod(others_share("vllm-0", "gpu-a", "GPU-0", cores=80, memory_mib=65536))
    job = submit_job(researcher, nlp_queue, "infer", gpus=Decimal("0.5"))

    kube_cycle()

    (pod,) = portal_pods(cluster)
    assert pod["metadata"]["annotations"][ASSIGNED].startswith("GPU-1,NVIDIA,40960,50:")
    node = Node.objects.get(name="gpu-a")
    assert node.used_by_others["gpu-card-cores/GPU-0"] == 80
    assert "nvidia.com/gpu" not in node.used_by_others  # a share of a card, not a card
    job.refresh_from_db()
    assert job.status in ("admitted", "running")


@override_settings(GPU_SHARING="hami")
def test_a_share_waits_while_other_schedulers_fill_every_card(
    cluster, kube_cycle, researcher, nlp_queue
):
    hami_node(cluster, "gpu-a")
    for index in range(2):
        cluster.add_pod(others_share(f"vllm-{index}", "gpu-a", f"GPU-{index}", 70, 40960))
    job = submit_job(researcher, nlp_queue, "infer", gpus=Decimal("0.5"))

    kube_cycle()

    assert portal_pods(cluster) == []
    job.refresh_from_db()
    assert job.status == "pending"
