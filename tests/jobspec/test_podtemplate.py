"""jobspec.podtemplate: a task's pod template checked and summarised (pure, no database)."""

import copy

import pytest

from jobspec import podtemplate
from jobspec.podtemplate import pod_template_parse

DDP = {
    "metadata": {"name": "ignored", "labels": {"team": "nlp"}},
    "spec": {
        "containers": [
            {
                "name": "trainer",
                "image": "trainer:1",
                "args": ["--epochs", "3"],
                "env": [
                    {"name": "EPOCHS", "value": 3},
                    {
                        "name": "HF_TOKEN",
                        "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}},
                    },
                    {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                ],
                "ports": [{"name": "nccl", "containerPort": 29500}],
                "resources": {
                    "limits": {"nvidia.com/gpu": 4, "cpu": "8", "memory": "64Gi"},
                },
                "volumeMounts": [
                    {"name": "shm", "mountPath": "/dev/shm"},
                    {"name": "data", "mountPath": "/data", "readOnly": True},
                ],
            },
            {
                "name": "metrics",
                "image": "exporter:1",
                "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}},
            },
        ],
        "initContainers": [
            {"name": "fetch", "image": "fetch:1", "resources": {"requests": {"cpu": "16"}}},
        ],
        "volumes": [
            {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}},
            {"name": "data", "persistentVolumeClaim": {"claimName": "imagenet"}},
            {"name": "cfg", "configMap": {"name": "train-cfg"}},
            {"name": "creds", "secret": {"secretName": "s3"}},
        ],
        "imagePullSecrets": [{"name": "registry"}],
        "securityContext": {"runAsUser": 1000, "fsGroup": 1000},
        "nodeSelector": {"gpu-model": "H100"},
        "priorityClassName": "training",
        "restartPolicy": "OnFailure",
    },
}


def _parse(template, *, allow_host_path=False):
    return pod_template_parse(template, allow_host_path=allow_host_path)


def test_a_ddp_template_is_kept_whole_and_summarised():
    parsed = _parse(DDP)
    assert parsed.errors == {}
    spec = parsed.template["spec"]
    assert [c["name"] for c in spec["containers"]] == ["trainer", "metrics"]
    assert spec["containers"][0]["args"] == ["--epochs", "3"]
    assert "command" not in spec["containers"][0]  # args alone keep the image's ENTRYPOINT
    assert spec["volumes"][0] == {
        "name": "shm",
        "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"},
    }
    assert spec["imagePullSecrets"] == [{"name": "registry"}]
    assert spec["priorityClassName"] == "training"
    assert parsed.template["metadata"] == {"labels": {"team": "nlp"}}
    summary = parsed.summary
    assert (summary.image, summary.command) == ("trainer:1", ["--epochs", "3"])
    assert summary.env == {"EPOCHS": "3"}  # literal values only: references stay references
    assert summary.node_selector == {"gpu-model": "H100"}
    assert summary.gpus == 4
    assert summary.memory_bytes == 64 * 2**30 + 256 * 2**20
    # cpu: 8 + 0.5 for the app containers, but the init container alone asks for 16
    assert summary.cpu_millis == 16000


def test_value_from_stays_a_reference():
    env = _parse(DDP).template["spec"]["containers"][0]["env"]
    assert env[1] == {
        "name": "HF_TOKEN",
        "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}},
    }
    assert "value" not in env[1]


def test_gpus_are_summed_over_containers_and_init_containers_take_the_max():
    template = {
        "spec": {
            "containers": [
                {"name": "a", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 2}}},
                {"name": "b", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 3}}},
            ],
            "initContainers": [
                {"name": "i", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 4}}},
            ],
        }
    }
    assert _parse(template).summary.gpus == 5
    template["spec"]["initContainers"][0]["resources"]["limits"]["nvidia.com/gpu"] = 6
    assert _parse(template).summary.gpus == 6


def _with(path, value):
    template = copy.deepcopy(DDP)
    target = template
    keys = path.split("/")
    for key in keys[:-1]:
        target = target[int(key)] if isinstance(target, list) else target[key]
    if isinstance(target, list):
        target[int(keys[-1])] = value
    else:
        target[keys[-1]] = value
    return template


C0 = "spec.containers[0]"
BAD = [
    # (where, value, the path named, a piece of the message)
    ("spec/containers", [{"name": f"c{i}", "image": "x"} for i in range(100)], "spec.containers",
     "at most 16 containers"),
    ("spec/volumes/1", {"name": "data", "hostPath": {"path": "/var"}}, "spec.volumes[1].hostPath",
     "JOB_ALLOW_HOST_PATH"),
    ("spec/containers/0/volumeMounts/1", {"name": "nope", "mountPath": "/x"},
     f"{C0}.volumeMounts[1].name", "not declared"),
    ("spec/volumes/0/emptyDir/sizeLimit", "-1Gi", "spec.volumes[0].emptyDir.sizeLimit",
     "negative"),
    ("spec/containers/0/env/1/valueFrom/secretKeyRef/namespace", "kube-system",
     f"{C0}.env[1].valueFrom.secretKeyRef.namespace", "another namespace"),
    ("spec/affinity", {"podAffinity": {}}, "spec.affinity.podAffinity", "not supported"),
    ("spec/hostNetwork", True, "spec.hostNetwork", "not supported"),
    ("spec/restartPolicy", "Always", "spec.restartPolicy", "Never, OnFailure"),
    ("spec/containers/0/livenessProbe", {}, f"{C0}.livenessProbe", "unknown"),
    # The API server's rules (jobspec.names): whether a pod security level allows what a
    # container says of its security is jobspec.podsecurity's.
    ("spec/containers/0/image", "trainer 1\n", f"{C0}.image", "image reference"),
    ("spec/containers/0/image", "Ghcr.io/Example/Trainer:1", f"{C0}.image", "image reference"),
    ("spec/containers/0/env/0/name", "A=B", f"{C0}.env[0].name", "environment variable name"),
    ("spec/containers/0/env/0/name", "..x", f"{C0}.env[0].name", "environment variable name"),
    ("spec/containers/0/envFrom", [{"configMapRef": {"name": "cfg"}, "prefix": "1=2"}],
     f"{C0}.envFrom[0].prefix", "environment variable name"),
    ("metadata", {"labels": {"bad key!": "x"}}, "metadata.labels.bad key!", "label key"),
    ("metadata", {"labels": {"team": "a b"}}, "metadata.labels.team", "label value"),
    ("metadata", {"annotations": {"-bad/x": "y"}}, "metadata.annotations.-bad/x", "label key"),
    ("metadata", {"annotations": {"big": "x" * 300_000}}, "metadata.annotations", "256 KiB"),
    ("spec/volumes/1", {"name": "token", "projected": {"sources": []}}, "spec.volumes[1].projected",
     "service-account token"),
    ("spec/containers/0/securityContext", {"seccompProfile": {"type": "Loose"}},
     f"{C0}.securityContext.seccompProfile.type", "must be one of"),
    ("spec/securityContext", {"seccompProfile": {"type": "Localhost"}},
     "spec.securityContext.seccompProfile.localhostProfile", "required with type Localhost"),
    ("spec/imagePullSecrets", [{"name": "a..b"}], "spec.imagePullSecrets[0].name", "object name"),
    ("spec/containers/0/env/0", {"name": "A", "value": "1", "valueFrom": {}}, f"{C0}.env[0]",
     "exactly one"),
    ("spec/containers/0/volumeMounts/0/mountPath", "dev/shm", f"{C0}.volumeMounts[0].mountPath",
     "absolute"),
    ("spec/containers/0/resources/limits/example.com~fpga", 1, f"{C0}.resources.limits.example.com~fpga",
     "unknown resource"),
    ("spec/containers/1/name", "trainer", "spec.containers[1].name", "used twice"),
    ("spec/containers/0/ports/0/containerPort", 70000, f"{C0}.ports[0].containerPort", "between"),
    ("spec/containers/0/env/2/valueFrom/fieldRef/fieldPath", "spec.containers",
     f"{C0}.env[2].valueFrom.fieldRef.fieldPath", "must be one of"),
]  # fmt: skip


@pytest.mark.parametrize(("where", "value", "path", "message"), BAD)
def test_what_cannot_be_honoured_is_an_error_naming_the_field(where, value, path, message):
    where = where.replace("~", "/") if "fpga" not in where else where
    if "fpga" in where:
        template = copy.deepcopy(DDP)
        template["spec"]["containers"][0]["resources"]["limits"]["example.com/fpga"] = value
        path = path.replace("~", "/")
    else:
        template = _with(where, value)
    errors = _parse(template).errors
    assert path in errors, errors
    assert any(message in text for text in errors[path]), errors[path]


def test_host_path_is_accepted_when_the_setting_allows_it():
    template = _with("spec/volumes/1", {"name": "data", "hostPath": {"path": "/mnt/datasets"}})
    parsed = _parse(template, allow_host_path=True)
    assert parsed.errors == {}
    assert parsed.template["spec"]["volumes"][1] == {
        "name": "data",
        "hostPath": {"path": "/mnt/datasets"},
    }


def test_every_problem_is_reported_at_once_under_the_prefix():
    template = _with("spec/restartPolicy", "Always")
    template["spec"]["volumes"][0]["emptyDir"]["sizeLimit"] = "-1"
    errors = pod_template_parse(
        template, allow_host_path=False, prefix="tasks[0].pod_template."
    ).errors
    assert set(errors) == {
        "tasks[0].pod_template.spec.restartPolicy",
        "tasks[0].pod_template.spec.volumes[0].emptyDir.sizeLimit",
    }


@pytest.mark.parametrize("raw", [None, [], "pod", {"spec": None}, {"spec": {"containers": []}}])
def test_shapes_that_are_no_template_are_errors_not_crashes(raw):
    assert _parse(raw).errors


def test_a_normalised_template_parses_to_itself():
    once = _parse(DDP).template
    again = _parse(once)
    assert again.errors == {}
    assert again.template == once


def test_the_limits_of_a_template_are_the_fixed_ones_named_in_the_module():
    assert podtemplate.CONTAINERS_MAX == 16


def test_a_share_of_one_gpu_is_one_containers():
    """Each container stating a share would be given the whole share on the card (the
    sharing stacks read each container's), while the pod is booked for one."""
    share = {"limits": {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 20480}}
    template = {"spec": {"containers": [
        {"name": "main", "image": "x", "resources": share},
        {"name": "sidecar", "image": "x", "resources": share},
    ]}}  # fmt: skip
    errors = _parse(template).errors
    assert any("one container's" in m and "main, sidecar" in m for m in errors["spec"]), errors
    template["spec"]["containers"][1]["resources"] = {"limits": {"cpu": "1"}}
    assert _parse(template).errors == {}
