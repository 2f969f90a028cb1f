"""The pod body from a task's template (podspec), as manifests.pod_manifest sends it."""

from __future__ import annotations

import dataclasses

import pytest
from kubernetes import client

from jobspec import labels
from jobspec.notice import DEADLINE_ANNOTATION, PODINFO_DIR, PODINFO_VOLUME
from jobspec.pods import DesiredPod
from jobspec.podsecurity import pod_security_errors
from jobspec.podspec import pod_spec_body
from jobspec.podtemplate import pod_template_parse
from portal.cluster.models import Placement
from scheduler.adapters.cluster.manifests import pod_manifest
from scheduler.adapters.desired import desired_pods
from tests.factories import JobTaskFactory, PlacementFactory

GPU_RESOURCE_NAMES = ("nvidia.com/gpu", "mars-tech.com/gpu")
TEMPLATE = pod_template_parse(
    {
        "metadata": {"labels": {"team": "nlp", labels.MANAGED: "no"}},
        "spec": {
            "containers": [
                {
                    "name": "trainer",
                    "image": "trainer:1",
                    "args": ["--epochs", "3"],
                    "env": [
                        {
                            "name": "HF_TOKEN",
                            "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}},
                        }
                    ],
                    "resources": {"limits": {"nvidia.com/gpu": 4, "cpu": "8"}},
                    "volumeMounts": [{"name": "shm", "mountPath": "/dev/shm"}],
                },
                {"name": "sidecar", "image": "exporter:1"},
            ],
            "initContainers": [{"name": "fetch", "image": "fetch:1"}],
            "volumes": [{"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}}],
            "imagePullSecrets": [{"name": "registry"}],
            "securityContext": {"runAsUser": 1000},
            "priorityClassName": "training",
            "restartPolicy": "OnFailure",
        },
    },
    allow_host_path=False,
).template


# The preemption deadline's file (jobspec.notice), in every pod.
PODINFO = {
    "name": PODINFO_VOLUME,
    "downwardAPI": {
        "items": [
            {
                "path": "preemption-deadline",
                "fieldRef": {"fieldPath": f"metadata.annotations['{DEADLINE_ANNOTATION}']"},
            }
        ]
    },
}
PODINFO_MOUNT = {"name": PODINFO_VOLUME, "mountPath": PODINFO_DIR, "readOnly": True}


def _desired(*, gpu_name: str = "mars-tech.com/gpu", template=TEMPLATE) -> DesiredPod:
    return DesiredPod(
        name=labels.pod_name(7, "worker", 0),
        namespace="gpu-jobs",
        node_name="gpu-b",
        image="trainer:1",
        command=["--epochs", "3"],
        env={},
        requests={"cpu": 8000, "memory": 0, gpu_name: 4},
        labels=labels.replica_labels(job_id=7, task="worker", replica=0, queue="q", tenant="t"),
        annotations={},
        template=template,
    )


def test_the_template_is_the_pod_body_with_the_nodes_gpu_name():
    body = pod_spec_body(_desired(), GPU_RESOURCE_NAMES)
    trainer, sidecar = body["containers"]
    assert trainer["resources"] == {"limits": {"mars-tech.com/gpu": "4", "cpu": "8"}}
    assert trainer["args"] == ["--epochs", "3"]
    assert "command" not in trainer
    assert sidecar == {"name": "sidecar", "image": "exporter:1", "volumeMounts": [PODINFO_MOUNT]}
    assert body["initContainers"] == [{"name": "fetch", "image": "fetch:1"}]
    assert body["restartPolicy"] == "OnFailure"
    # the stored template is not changed by building a pod from it
    assert TEMPLATE["spec"]["containers"][0]["resources"]["limits"] == {
        "nvidia.com/gpu": "4",
        "cpu": "8",
    }


def test_pod_manifest_carries_every_part_of_the_template():
    pod = pod_manifest(_desired(), GPU_RESOURCE_NAMES, "gpuportal")
    wire = client.ApiClient().sanitize_for_serialization(pod)
    spec = wire["spec"]
    assert "nodeName" not in spec  # bound later, through pods/binding
    assert wire["metadata"]["annotations"]["gpuportal.io/target-node"] == "gpu-b"
    assert [c["name"] for c in spec["containers"]] == ["trainer", "sidecar"]
    assert spec["containers"][0]["env"] == [
        {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}
    ]
    assert spec["containers"][0]["volumeMounts"] == [
        {"name": "shm", "mountPath": "/dev/shm"},
        PODINFO_MOUNT,
    ]
    assert spec["volumes"] == [
        {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}},
        PODINFO,
    ]
    assert spec["imagePullSecrets"] == [{"name": "registry"}]
    # With the defaults of the pod security level (baseline): a confined seccomp profile, and
    # no service-account token.
    assert spec["securityContext"] == {
        "runAsUser": 1000,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert spec["automountServiceAccountToken"] is False
    assert spec["priorityClassName"] == "training"
    assert spec["tolerations"] == [
        {"key": "mars-tech.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    # the template's own labels are kept, the portal's win
    assert wire["metadata"]["labels"]["team"] == "nlp"
    assert wire["metadata"]["labels"][labels.MANAGED] == "true"


def test_a_task_without_template_gets_one_container_from_its_fields():
    body = pod_spec_body(_desired(gpu_name="nvidia.com/gpu", template={}), GPU_RESOURCE_NAMES)
    assert body == {
        "restartPolicy": "Never",
        "containers": [
            {
                "name": "main",
                "image": "trainer:1",
                "command": ["--epochs", "3"],
                "resources": {
                    "requests": {"cpu": "8000m", "memory": "0", "nvidia.com/gpu": "4"},
                    "limits": {"nvidia.com/gpu": "4"},
                },
                "volumeMounts": [PODINFO_MOUNT],
            }
        ],
        "volumes": [PODINFO],
        "automountServiceAccountToken": False,
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
    }


@pytest.mark.django_db
def test_desired_pods_carry_the_tasks_template():
    task = JobTaskFactory(pod_template=TEMPLATE, gpus=4)
    PlacementFactory(task=task, state=Placement.State.BOUND)
    (pod,) = desired_pods(gpu_resource_of={})
    assert pod.template == TEMPLATE


@pytest.mark.django_db
@pytest.mark.parametrize("level", ["baseline", "restricted", "privileged"])
def test_the_cycles_pods_get_the_defaults_of_their_tenants_level(level):
    """What the cycle creates is what the dry run shows: the tenant's level decides."""
    task = JobTaskFactory(pod_template=TEMPLATE, gpus=4, job__queue__tenant__security_level=level)
    PlacementFactory(task=task, state=Placement.State.BOUND)
    (pod,) = desired_pods(gpu_resource_of={})
    assert pod.security_level == level
    spec = pod_spec_body(pod, GPU_RESOURCE_NAMES)
    # Every level's defaults (a privileged tenant's template may state otherwise).
    assert spec["automountServiceAccountToken"] is False
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert spec["securityContext"].get("runAsNonRoot") is (True if level == "restricted" else None)


def test_a_template_mounting_its_own_podinfo_keeps_it():
    """The deadline's file goes where nothing else is: a container that mounts something at
    /etc/podinfo keeps its own mount, and the other containers get the file."""
    spec = TEMPLATE["spec"]
    own = {"name": "shm", "mountPath": PODINFO_DIR + "/"}
    template = {
        **TEMPLATE,
        "spec": {**spec, "containers": [{**spec["containers"][0], "volumeMounts": [own]}]},
    }
    body = pod_spec_body(_desired(template=template), GPU_RESOURCE_NAMES)
    assert body["containers"][0]["volumeMounts"] == [own]
    assert body["volumes"][-1] == PODINFO


@pytest.mark.parametrize("level", ["privileged", "baseline", "restricted"])
def test_the_deadline_file_passes_every_pod_security_level(level):
    pod = dataclasses.replace(_desired(template={}), security_level=level)
    spec = pod_spec_body(pod, GPU_RESOURCE_NAMES)
    assert PODINFO in spec["volumes"]
    assert pod_security_errors({"metadata": {}, "spec": spec}, level=level) == {}
