"""jobspec.volcano: a Volcano Job manifest -> a job submission (pure, no database)."""

import copy
from decimal import Decimal

import pytest
import yaml

from jobspec.volcano import (
    JOB_VOLUMES_REFUSED,
    ManifestError,
    documents_split,
    generated_name,
    manifest_path,
    parse_quantity,
    volcano_job_parse,
)

MANIFEST = yaml.safe_load(
    """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: bert-large
  annotations: {priority: "10", gpuq/expected-duration-seconds: "3600"}
spec:
  queue: nlp-train
  minAvailable: 3
  schedulerName: volcano
  priorityClassName: high
  tasks:
    - name: master
      replicas: 1
      template:
        spec:
          containers:
            - image: trainer:1
              command: [python, train.py]
              args: [--epochs, "3"]
              env: [{name: A, value: "1"}, {name: B, value: 2}]
              resources:
                requests: {cpu: "4", memory: 16Gi}
                limits: {nvidia.com/gpu: 8}
    - name: worker
      replicas: 2
      template:
        spec:
          nodeSelector: {gpu-model: H100}
          containers:
            - image: trainer:1
              resources:
                limits: {mars-tech.com/gpu: "4", cpu: 500m, memory: 512Mi}
            - image: sidecar:1
              resources:
                requests: {cpu: 100m, memory: 64Mi}
"""
)


def test_maps_a_full_manifest():
    spec = volcano_job_parse(MANIFEST)
    assert (spec.name, spec.queue, spec.min_available) == ("bert-large", "nlp-train", 3)
    assert (spec.priority, spec.expected_duration_seconds) == (10, 3600)
    assert spec.ignored == ["spec.schedulerName"]
    master, worker = spec.tasks
    assert master == {
        "name": "master",
        "replicas": 1,
        "pod_template": {
            "spec": {
                "containers": [
                    {
                        "name": "main",
                        "image": "trainer:1",
                        # command and args stay apart: args alone keep the image's ENTRYPOINT
                        "command": ["python", "train.py"],
                        "args": ["--epochs", "3"],
                        "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                        "resources": {
                            "requests": {"cpu": "4", "memory": "16Gi"},
                            "limits": {"nvidia.com/gpu": "8"},
                        },
                    }
                ],
                # the job's priorityClassName, which the task does not set itself
                "priorityClassName": "high",
            }
        },
    }
    assert [c["image"] for c in worker["pod_template"]["spec"]["containers"]] == [
        "trainer:1",
        "sidecar:1",
    ]
    assert worker["pod_template"]["spec"]["nodeSelector"] == {"gpu-model": "H100"}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("4", Decimal(4)),
        ("500m", Decimal("0.5")),
        (2, Decimal(2)),
        (0.25, Decimal("0.25")),
        ("16Gi", Decimal(16 * 2**30)),
        ("1G", Decimal(10**9)),
        ("1.5Ki", Decimal(1536)),
        ("1e3", Decimal(1000)),
    ],
)
def test_parses_kubernetes_quantities(value, expected):
    assert parse_quantity(value) == expected


@pytest.mark.parametrize(
    "value",
    ["", "four", "-1", "1Qi", "1e999", float("inf"), float("nan"), True, None, [1], "9" * 80],
)
def test_rejects_bad_quantities(value):
    with pytest.raises(ValueError):
        parse_quantity(value)


_DELETE = object()
C0 = "spec.tasks[0].template.spec.containers[0]"

# Malformed manifests. Numbers of the right shape but out of bounds (replicas 0 or 10**9,
# 100,000 GPUs) are job_submit's to refuse, by the same manifest paths: test_limits_entry_points.
BAD = [
    ("apiVersion", "v1", "apiVersion"),
    ("kind", "Pod", "kind"),
    ("metadata", _DELETE, "metadata"),
    ("metadata/name", 7, "metadata.name"),
    ("metadata/annotations/priority", "urgent", "metadata.annotations.priority"),
    ("spec/queue", 5, "spec.queue"),
    ("metadata/name", _DELETE, "metadata.name"),
    ("spec/runningEstimate", "an hour", "spec.runningEstimate"),
    ("spec/priorityClassName", ["high"], "spec.priorityClassName"),
    ("spec/tasks/0/minAvailable", "one", "spec.tasks[0].minAvailable"),
    ("spec/minAvailable", "three", "spec.minAvailable"),
    ("spec/tasks", [], "spec.tasks"),
    ("spec/tasks", {"name": "x"}, "spec.tasks"),
    ("spec/tasks/0", "master", "spec.tasks[0]"),
    ("spec/tasks/0/template", _DELETE, "spec.tasks[0].template"),
    ("spec/tasks/0/template/spec/containers", [], "spec.tasks[0].template.spec.containers"),
    ("spec/tasks/0/template/spec/containers/0/image", _DELETE, f"{C0}.image"),
    ("spec/tasks/0/template/spec/containers/0/command", "python train.py", f"{C0}.command"),
    ("spec/tasks/0/template/spec/containers/0/env", {"A": "1"}, f"{C0}.env"),
    (
        "spec/tasks/0/template/spec/containers/0/env/0",
        {"name": "A", "valueFrom": {}},
        f"{C0}.env[0].valueFrom",
    ),
    (
        "spec/tasks/0/template/spec/containers/0/resources/limits/nvidia.com~gpu",
        "0.5",
        f"{C0}.resources.limits.nvidia.com/gpu",
    ),
    (
        "spec/tasks/0/template/spec/containers/0/resources/limits/nvidia.com~gpu",
        -1,
        f"{C0}.resources.limits.nvidia.com/gpu",
    ),
    (
        "spec/tasks/0/template/spec/containers/0/resources/requests/cpu",
        "lots",
        f"{C0}.resources.requests.cpu",
    ),
    (
        "spec/tasks/0/template/spec/containers/0/resources/requests/memory",
        "16Gb",
        f"{C0}.resources.requests.memory",
    ),
    (
        "spec/tasks/1/template/spec/nodeSelector",
        ["gpu-model=H100"],
        "spec.tasks[1].template.spec.nodeSelector",
    ),
]


@pytest.mark.parametrize(("path", "value", "error_path"), BAD)
def test_errors_name_the_manifest_path(path, value, error_path):
    manifest = _set_raw(path, value)
    with pytest.raises(ManifestError) as info:
        volcano_job_parse(manifest)
    assert error_path in info.value.errors, info.value.errors


def _set_raw(path, value):
    """Like `_with`, but `~` in a key stands for `/` (resource names contain slashes)."""
    manifest = copy.deepcopy(MANIFEST)
    target = manifest
    keys = [key.replace("~", "/") for key in path.split("/")]
    for key in keys[:-1]:
        target = target[int(key)] if isinstance(target, list) else target[key]
    last = keys[-1]
    if value is _DELETE:
        del target[last]
    elif isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value
    return manifest


def test_gpu_request_must_match_limit():
    manifest = _set_raw(
        "spec/tasks/0/template/spec/containers/0/resources/requests/nvidia.com~gpu", 4
    )
    with pytest.raises(ManifestError) as info:
        volcano_job_parse(manifest)
    assert f"{C0}.resources.requests" in info.value.errors


def test_two_gpu_names_in_one_container_is_an_error():
    manifest = _set_raw("spec/tasks/0/template/spec/containers/0/resources/limits/amd.com~gpu", 1)
    with pytest.raises(ManifestError) as info:
        volcano_job_parse(manifest)
    assert f"{C0}.resources" in info.value.errors


def test_reports_every_problem_at_once():
    manifest = _set_raw("kind", "Deployment")
    manifest["spec"]["queue"] = 5
    with pytest.raises(ManifestError) as info:
        volcano_job_parse(manifest)
    assert {"kind", "spec.queue"} <= set(info.value.errors)


@pytest.mark.parametrize("data", [None, [], "Job", 5, {"apiVersion": None}])
def test_non_manifests_are_errors_not_crashes(data):
    with pytest.raises(ManifestError):
        volcano_job_parse(data)


@pytest.mark.parametrize(
    ("service_path", "expected"),
    [
        ("name", "metadata.name"),
        ("min_available", "spec.minAvailable"),
        ("tasks[2].image", "spec.tasks[2].template.spec.containers[0].image"),
        ("tasks[0].name", "spec.tasks[0].name"),
        ("tasks[1]", "spec.tasks[1]"),
        ("queue", "spec.queue"),
    ],
)
def test_service_error_paths_translate_to_manifest_paths(service_path, expected):
    assert manifest_path(service_path) == expected


def test_a_refused_task_count_is_reported_before_any_task_is_mapped():
    manifest = copy.deepcopy(MANIFEST)
    manifest["spec"]["tasks"] = ["not a task"] * 5000
    counted = []

    def too_many(count):
        counted.append(count)
        return "at most 16 tasks per job"

    with pytest.raises(ManifestError) as info:
        volcano_job_parse(manifest, too_many_tasks=too_many)
    assert counted == [5000]
    assert info.value.errors == {"spec.tasks": ["at most 16 tasks per job"]}


def _manifest(**spec_changes):
    manifest = copy.deepcopy(MANIFEST)
    manifest["spec"].update(spec_changes)
    return manifest


def test_a_job_without_a_queue_leaves_it_to_the_caller():
    """upstream's webhook puts it in `default` (mutate_job.go patchDefaultQueue); the portal's
    service picks the submitter's default queue."""
    manifest = _manifest()
    del manifest["spec"]["queue"]
    assert volcano_job_parse(manifest).queue is None
    assert volcano_job_parse(_manifest(queue="")).queue is None


def test_generate_name_is_the_names_prefix_and_a_name_wins_over_it():
    manifest = _manifest()
    manifest["metadata"] = {"generateName": "sweep-"}
    spec = volcano_job_parse(manifest)
    assert (spec.name, spec.generate_name) == ("", "sweep-")
    assert spec.job_fields(name="sweep-x2b4z")["name"] == "sweep-x2b4z"
    assert spec.path_of("name") == "metadata.generateName"
    manifest["metadata"]["name"] = "fixed"
    spec = volcano_job_parse(manifest)
    assert (spec.name, spec.generate_name) == ("fixed", None)
    assert spec.path_of("name") == "metadata.name"
    manifest["metadata"] = {"labels": {"a": "b"}}
    with pytest.raises(ManifestError) as info:
        volcano_job_parse(manifest)
    assert info.value.errors["metadata.name"] == ["give metadata.name or metadata.generateName"]


def test_a_generated_name_is_cut_like_the_api_servers():
    """names.SimpleNameGenerator: at most 58 characters of the prefix, then 5 random ones."""
    assert generated_name("a" * 70, "bcdfg") == "a" * 58 + "bcdfg"
    assert len(generated_name("a" * 70, "bcdfg")) == 63


def test_the_jobs_priority_class_goes_to_tasks_without_their_own():
    """job_controller_util.go createJobPod: a pod takes the job's priorityClassName when its
    template has none (docs/user-guide/how_to_configure_priorityclass_for_job.md)."""
    manifest = _manifest(priorityClassName="job-priority")
    manifest["spec"]["tasks"][0]["template"]["spec"]["priorityClassName"] = "task-priority"
    master, worker = volcano_job_parse(manifest).tasks
    assert master["pod_template"]["spec"]["priorityClassName"] == "task-priority"
    assert worker["pod_template"]["spec"]["priorityClassName"] == "job-priority"
    assert "priorityClassName" not in MANIFEST["spec"]["tasks"][1]["template"]["spec"]


def test_a_templates_scheduler_name_is_ignored_and_said():
    manifest = _manifest()
    manifest["spec"]["tasks"][1]["template"]["spec"]["schedulerName"] = "volcano"
    spec = volcano_job_parse(manifest)
    assert "schedulerName" not in spec.tasks[1]["pod_template"]["spec"]
    assert "spec.tasks[1].template.spec.schedulerName" in spec.ignored


def test_min_available_defaults_to_the_tasks_own_summed_like_the_webhook():
    """mutate_job.go patchDefaultMinAvailable: each task's minAvailable, else its replicas."""
    manifest = _manifest()
    del manifest["spec"]["minAvailable"]
    assert volcano_job_parse(manifest).min_available is None  # job_submit: every replica
    manifest["spec"]["tasks"][1]["minAvailable"] = 1
    spec = volcano_job_parse(manifest)
    assert spec.min_available == 2  # master 1 (its replicas) + worker's own 1
    assert any("spec.tasks[1].minAvailable counts" in note for note in spec.notes)
    assert volcano_job_parse(_manifest(minAvailable=0)).min_available is None


def test_a_nameless_task_is_named_default_and_its_index():
    manifest = _manifest()
    del manifest["spec"]["tasks"][1]["name"]
    assert [t["name"] for t in volcano_job_parse(manifest).tasks] == ["master", "default1"]


def test_max_retry_zero_is_the_default_like_the_webhook():
    assert volcano_job_parse(_manifest(maxRetry=0)).max_retry is None
    assert volcano_job_parse(_manifest(maxRetry=5)).max_retry == 5


def test_the_jobs_volumes_are_refused():
    manifest = _manifest(volumes=[{"mountPath": "/data", "volumeClaimName": "data"}])
    with pytest.raises(ManifestError) as info:
        volcano_job_parse(manifest)
    assert info.value.errors["spec.volumes"] == [JOB_VOLUMES_REFUSED]


def test_running_estimate_is_the_expected_duration_unless_the_annotation_says():
    manifest = _manifest(runningEstimate="1h30m")
    assert volcano_job_parse(manifest).expected_duration_seconds == 3600  # the annotation
    del manifest["metadata"]["annotations"]["gpuq/expected-duration-seconds"]
    assert volcano_job_parse(manifest).expected_duration_seconds == 5400


def test_metadata_the_portal_decides_is_named_back():
    """Every metadata field but the name and the annotations the portal reads: the ones a
    user sets (namespace, labels) and the ones another controller does (an Argo workflow
    step's ownerReferences, example/integrations/argo/10-job-step.yaml)."""
    manifest = _manifest()
    manifest["metadata"].update(
        namespace="ml",
        labels={"team": "nlp"},
        ownerReferences=[{"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow"}],
        finalizers=["x.io/keep"],
    )
    manifest["metadata"]["annotations"]["volcano.sh/preemptable"] = "true"
    assert volcano_job_parse(manifest).ignored == [
        "metadata.namespace",
        "metadata.labels",
        "metadata.ownerReferences",
        "metadata.finalizers",
        "metadata.annotations.volcano.sh/preemptable",
        "spec.schedulerName",
    ]


def test_other_kinds_in_a_file_are_skipped_naming_them():
    """docs/user-guide/how_to_configure_priorityclass_for_job.md: two PriorityClasses, then
    the Job."""
    documents = [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
         "metadata": {"name": "job-priority"}},
        {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue"},
        MANIFEST,
        {"spec": {}},
    ]  # fmt: skip
    split = documents_split(documents)
    assert split.jobs == [(3, MANIFEST), (4, {"spec": {}})]
    assert split.skipped == [
        "document 1: skipped: kind PriorityClass (job-priority) (only Volcano Jobs are submitted)",
        "document 2: skipped: kind Queue (only Volcano Jobs are submitted)",
    ]
    assert split.where(3) == "document 3: "
    assert documents_split([MANIFEST]).where(1) == ""
