"""Shared GPUs on Kubernetes: the pod's resources and device assignment per sharing stack, the
cards nodes register, and the pods the reconciler builds for a placed share."""

import json
from decimal import Decimal

import pytest
from django.test import override_settings

from portal.cluster.models import Node, Placement
from scheduler.adapters.cluster.base import ObservedNode
from scheduler.adapters.cluster.gpushare import (
    ShareSize,
    held_cards,
    registered_cards,
    share_annotations,
    share_resources,
    share_size,
    template_with_share,
)
from scheduler.adapters.cluster.node_sync import nodes_sync
from scheduler.adapters.desired import desired_pods
from tests.factories import NodeFactory, PlacementFactory
from tests.scheduler.conftest import submit_job


def test_share_size_holds_its_fraction_of_memory_and_cores():
    assert share_size(gpu_milli=250, gpu_memory_mib=0, device_memory_mib=81920) == ShareSize(
        20480, 25
    )
    assert share_size(gpu_milli=0, gpu_memory_mib=10240, device_memory_mib=40960) == ShareSize(
        10240, 25
    )
    assert share_size(gpu_milli=100, gpu_memory_mib=20480, device_memory_mib=81920) == ShareSize(
        20480, 10
    )
    assert share_size(gpu_milli=125, gpu_memory_mib=0, device_memory_mib=0) == ShareSize(0, 13)


def test_volcano_pod_resources_and_device_assignment():
    size = ShareSize(memory_mib=20480, cores_percent=25)
    assert share_resources("volcano", size) == {
        "volcano.sh/vgpu-number": 1,
        "volcano.sh/vgpu-memory": 20480,
        "volcano.sh/vgpu-cores": 25,
    }
    assert share_annotations("volcano", node="n1", device_uuid="GPU-a", size=size, now=7) == {
        "volcano.sh/vgpu-ids-new": "GPU-a,NVIDIA,20480,25:",
        "volcano.sh/devices-to-allocate": "GPU-a,NVIDIA,20480,25:",
        "volcano.sh/vgpu-node": "n1",
        "volcano.sh/vgpu-time": "7",
        "volcano.sh/bind-phase": "allocating",
        "volcano.sh/bind-time": "7",
    }


def test_hami_pod_resources_and_device_assignment():
    size = ShareSize(memory_mib=4096, cores_percent=30)
    assert share_resources("hami", size) == {
        "nvidia.com/gpu": 1,
        "nvidia.com/gpumem": 4096,
        "nvidia.com/gpucores": 30,
    }
    annotations = share_annotations("hami", node="n1", device_uuid="GPU-b", size=size, now=7)
    assert annotations["hami.io/vgpu-devices-to-allocate"] == "GPU-b,NVIDIA,4096,30:;"
    assert annotations["hami.io/vgpu-devices-allocated"] == "GPU-b,NVIDIA,4096,30:;"
    assert annotations["hami.io/vgpu-node"] == "n1"
    assert annotations["hami.io/bind-phase"] == "allocating"


HAMI_JSON = json.dumps(
    [
        {"id": "GPU-0", "count": 10, "devmem": 81920, "devcore": 100, "type": "NVIDIA-H100",
         "health": True, "mode": "hami-core"},
        {"id": "GPU-1", "index": 1, "count": 10, "devmem": 81920, "devcore": 100,
         "type": "NVIDIA-H100", "health": True, "mode": "hami-core"},
    ]
)  # fmt: skip


def test_registered_cards_hami_json_legacy_and_volcano():
    cards = registered_cards("hami", {"hami.io/node-nvidia-register": HAMI_JSON})
    assert [(c.uuid, c.index, c.memory_mib, c.model) for c in cards] == [
        ("GPU-0", 0, 81920, "NVIDIA-H100"),
        ("GPU-1", 1, 81920, "NVIDIA-H100"),
    ]
    legacy = "GPU-0,10,40960,100,NVIDIA-A100,0,true,0,hami-core:GPU-1,10,40960,100,NVIDIA-A100,0,true,1,hami-core:"
    assert [
        c.index for c in registered_cards("hami", {"hami.io/node-nvidia-register": legacy})
    ] == [0, 1]
    volcano = (
        "GPU-a,10,40960,NVIDIA-A100,true,hami-core:GPU-b,10,40960,NVIDIA-A100,false,hami-core:"
    )
    cards = registered_cards("volcano", {"volcano.sh/node-vgpu-register": volcano})
    assert [(c.uuid, c.healthy) for c in cards] == [("GPU-a", True), ("GPU-b", False)]
    assert registered_cards("hami", {"hami.io/node-nvidia-register": "garbage"}) is None
    assert registered_cards("hami", {}) is None


def test_a_template_speaks_the_clusters_stack():
    template = {"spec": {"containers": [{"name": "s", "image": "s:1", "resources": {
        "limits": {"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-cores": "25", "cpu": "1"}}}]}}  # fmt: skip
    out = template_with_share(template, "hami", ShareSize(20480, 25))
    assert out["spec"]["containers"][0]["resources"] == {
        "limits": {"cpu": "1", "nvidia.com/gpu": "1", "nvidia.com/gpumem": "20480",
                   "nvidia.com/gpucores": "25"}
    }  # fmt: skip


@pytest.mark.django_db
@override_settings(GPU_SHARING="hami")
def test_hami_nodes_take_their_cards_from_the_registration_not_allocatable():
    nodes_sync(
        [
            ObservedNode(
                name="n1",
                allocatable={"cpu": 1000, "memory": 2**30, "nvidia.com/gpu": 20},  # 2 cards x 10
                annotations={"hami.io/node-nvidia-register": HAMI_JSON},
            ),
            ObservedNode(
                name="n2", allocatable={"cpu": 1000, "memory": 2**30, "nvidia.com/gpu": 4}
            ),
        ]
    )
    n1, n2 = Node.objects.order_by("name")
    assert (n1.gpu_count, n1.gpu_memory_mib, n1.gpu_uuids, n1.gpu_model) == (
        2, 81920, ["GPU-0", "GPU-1"], "NVIDIA-H100",
    )  # fmt: skip
    assert (n2.gpu_count, n2.gpu_memory_mib, n2.gpu_uuids) == (4, 0, [])


@pytest.mark.django_db
@pytest.mark.parametrize("stack", ["volcano", "hami"])
def test_the_reconciler_builds_a_shared_pod_on_the_card_the_core_picked(
    researcher, nlp_queue, stack
):
    node = NodeFactory(name="n1", gpu_count=2, gpu_memory_mib=81920, gpu_uuids=["GPU-0", "GPU-1"])
    with override_settings(GPU_SHARING=stack):
        job = submit_job(researcher, nlp_queue, "infer", gpus=Decimal("0.25"))
        PlacementFactory(task=job.tasks.get(), node=node, pod_name="shared", gpus=0,
                         gpu_milli=250, gpu_devices=[1], state=Placement.State.BOUND)  # fmt: skip
        whole = submit_job(researcher, nlp_queue, "train", gpus=1)
        PlacementFactory(task=whole.tasks.get(), node=node, pod_name="whole", gpus=1,
                         gpu_milli=1000, gpu_devices=[0], state=Placement.State.BOUND)  # fmt: skip
        pods = {pod.name: pod for pod in desired_pods(gpu_resource_of={"n1": "nvidia.com/gpu"})}
    shared, trainer = pods["shared"], pods["whole"]
    ids = "volcano.sh/vgpu-ids-new" if stack == "volcano" else "hami.io/vgpu-devices-allocated"
    assert shared.annotations[ids].startswith("GPU-1,NVIDIA,20480,25:")
    count = "volcano.sh/vgpu-number" if stack == "volcano" else "nvidia.com/gpu"
    assert shared.requests[count] == 1
    assert {
        "key": "nvidia.com/gpu",
        "operator": "Exists",
        "effect": "NoSchedule",
    } in shared.tolerations
    # whole GPUs keep the device plugin's resource and no assignment
    assert trainer.requests["nvidia.com/gpu"] == 1
    assert ids not in trainer.annotations


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        # HAMi: each container ended by ";", the allocated list wins over the one to allocate
        (
            {
                "hami.io/vgpu-devices-allocated": "GPU-0,NVIDIA,20480,25:;GPU-0,NVIDIA,1024,5:GPU-1,NVIDIA,8192,10:;",
                "hami.io/vgpu-devices-to-allocate": ";",
            },
            {"GPU-0": (30, 21504), "GPU-1": (10, 8192)},
        ),
        # HAMi's device plugin empties what was to allocate: the next one present is read
        (
            {
                "hami.io/vgpu-devices-to-allocate": ";",
                "volcano.sh/vgpu-ids-new": "GPU-2,NVIDIA,4096,50:",
            },
            {"GPU-2": (50, 4096)},
        ),
        ({"volcano.sh/devices-to-allocate": "GPU-3,NVIDIA,81920,100:"}, {"GPU-3": (100, 81920)}),
        ({"hami.io/vgpu-devices-allocated": "GPU-0,NVIDIA,lots,25:;"}, {}),  # unreadable
        ({"hami.io/vgpu-devices-allocated": "GPU-0,NVIDIA,-5,25:;"}, {}),
        ({"other": "GPU-0,NVIDIA,1,1:"}, {}),
        (None, {}),
    ],
)
def test_held_cards_reads_what_hami_and_volcano_assigned(annotations, expected):
    assert held_cards(annotations) == expected


def test_another_schedulers_shared_pod_counts_by_its_cards_not_its_vgpu_count():
    from kubernetes import client

    from scheduler.adapters.cluster.manifests import usage_by_others

    def pod(name, annotations, gpus):
        return client.V1Pod.from_dict({
            "metadata": {"name": name, "namespace": "team", "annotations": annotations},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "x", "resources": {
                "limits": {"nvidia.com/gpu": str(gpus), "nvidia.com/gpumem": "20480"}}}]},
            "status": {"phase": "Running"},
        })  # fmt: skip

    pods = [
        pod("shared", {"hami.io/vgpu-devices-allocated": "GPU-0,NVIDIA,20480,25:;"}, 1),
        pod("plain", {}, 2),  # no assignment: its GPU count, cards unknown
    ]
    held = usage_by_others(pods, owns=lambda labels: False)["n1"]
    assert held["nvidia.com/gpu"] == 2
    assert (held["gpu-card-cores/GPU-0"], held["gpu-card-mib/GPU-0"]) == (25, 20480)

    # Volcano's vGPU pod: its volcano.sh/vgpu-number is the count its card replaces; a whole
    # GPU it also asks of the device plugin stays a whole GPU.
    volcano = client.V1Pod.from_dict({
        "metadata": {"name": "v", "namespace": "team",
                     "annotations": {"volcano.sh/vgpu-ids-new": "GPU-1,NVIDIA,8192,10:"}},
        "spec": {"nodeName": "n2", "containers": [{"name": "c", "image": "x", "resources": {
            "limits": {"volcano.sh/vgpu-number": "1", "nvidia.com/gpu": "1"}}}]},
        "status": {"phase": "Running"},
    })  # fmt: skip
    held = usage_by_others([volcano], owns=lambda labels: False)["n2"]
    assert "volcano.sh/vgpu-number" not in held
    assert (held["nvidia.com/gpu"], held["gpu-card-cores/GPU-1"]) == (1, 10)
