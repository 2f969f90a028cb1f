"""The dry-run render (`python -m portal.jobs.render`, POST /api/v1/jobs/render/) of upstream
Volcano's example manifests: every Job example of volcano-sh/volcano's docs/user-guide/ and
every manifest file of its example/, copied with its licence under volcano_examples/ at its
upstream path (a guide's examples as <guide>/example-<n>.yaml): a Job renders or is refused
for a reason docs/api.md gives with the upstream file; other kinds are skipped by name.

Expected objects are derived by hand from upstream's controller: svc/svc.go GenerateHosts
(:309-345: `<task>.host` one host a line, `VC_<TASK>_HOSTS` comma-separated, `VC_<TASK>_NUM`),
OnPodCreate (:76-131: hostname, subdomain, the host variables from the ConfigMap in every
container), mountConfigmap (:194-217: `/etc/volcano`), createServiceIfNotExist (:219-254:
headless); env/env.go:45-59 (VK_TASK_INDEX, VC_TASK_INDEX); ssh/ssh.go:144-200 mountRsaKey (the
Secret's four keys under subPath `.ssh` at /root/.ssh, mode 0600, 0644 elsewhere) and 262-286
generateSSHConfig; distributed-framework/mpi/mpi.go:80-170 (MPI_HOST on the master, the
`mpijob-port` in every container) and webhooks/admission/jobs/mutate/mutate_job.go:244-260
(mpi turns svc and ssh on). The portal's departures (id-based object names, `new` for the id a
dry run does not have yet, placeholders for the keys only the reconcile makes) are
jobspec.job_plugins'.
"""

import io
import os
import re
import subprocess
import sys
from http import HTTPStatus
from pathlib import Path

import pytest
import yaml
from django.test import override_settings
from rest_framework.test import APIClient

from jobspec.job_plugins import SSH_KEY_PLACEHOLDER
from jobspec.labels import DEFAULT_INSTANCE, job_object_name, object_prefix
from jobspec.notice import PODINFO_DIR, PODINFO_VOLUME
from portal.jobs.dry_run import job_render
from portal.jobs.models import Job
from portal.jobs.render import main

# The names a job not stored yet is shown under, carrying the instance (the test settings').
NEW = job_object_name("new", object_prefix(DEFAULT_INSTANCE))
EXAMPLES = Path(__file__).parent / "volcano_examples"
MPI_DOC = "docs/user-guide/how_to_use_mpi_plugin/example-1.yaml"
API_DOCS = Path(__file__).resolve().parents[3] / "docs" / "api.md"
TF = "example/integrations/tensorflow/dist-mnist/tf-dist-mnist-example.yaml"
PADDLE = "example/integrations/paddlepaddle/ctr-paddlepaddle-on-volcano.yaml"


def _load(name):
    """The file's first Volcano Job."""
    documents = yaml.safe_load_all((EXAMPLES / name).read_text())
    return next(doc for doc in documents if doc and doc.get("kind") == "Job")


def _env(pod, container=0):
    return {
        e["name"]: e.get("value", e.get("valueFrom"))
        for e in pod["spec"]["containers"][container]["env"]
    }


def test_tf_dist_mnist_renders_a_host_list_a_headless_service_and_three_pods():
    rendered = job_render(_load(TF), namespace="ml")
    assert rendered.errors == {}
    kinds = [(o["kind"], o["metadata"]["name"]) for o in rendered.objects]
    assert kinds == [
        ("ConfigMap", f"{NEW}-svc"),
        ("Service", NEW),
        ("NetworkPolicy", NEW),
        ("Pod", f"{NEW}-ps-0"),
        ("Pod", f"{NEW}-worker-0"),
        ("Pod", f"{NEW}-worker-1"),
    ]
    config_map, service, _, ps, worker0, worker1 = rendered.objects
    assert config_map["data"] == {
        "ps.host": f"tensorflow-dist-mnist-ps-0.{NEW}",
        "VC_PS_HOSTS": f"tensorflow-dist-mnist-ps-0.{NEW}",
        "VC_PS_NUM": "1",
        "worker.host": f"tensorflow-dist-mnist-worker-0.{NEW}\ntensorflow-dist-mnist-worker-1.{NEW}",
        "VC_WORKER_HOSTS": f"tensorflow-dist-mnist-worker-0.{NEW},tensorflow-dist-mnist-worker-1.{NEW}",
        "VC_WORKER_NUM": "2",
    }
    assert service["spec"]["clusterIP"] == "None"
    assert service["metadata"]["namespace"] == "ml"
    for pod in (ps, worker0, worker1):
        assert pod["spec"]["subdomain"] == NEW
        assert "nodeName" not in pod["spec"]  # the scheduler picks the node
        assert pod["spec"]["schedulerName"] == "gpuportal"
        assert pod["spec"]["restartPolicy"] == "Never"
        assert {"name": f"{NEW}-svc", "mountPath": "/etc/volcano"} in pod["spec"]["containers"][0][
            "volumeMounts"
        ]
        assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    assert worker1["spec"]["hostname"] == "tensorflow-dist-mnist-worker-1"
    env = _env(worker1)
    assert (env["VK_TASK_INDEX"], env["VC_TASK_INDEX"]) == ("1", "1")
    assert env["VC_PS_HOSTS"] == {"configMapKeyRef": {"key": "VC_PS_HOSTS", "name": f"{NEW}-svc"}}
    assert worker1["spec"]["containers"][0]["ports"] == [
        {"containerPort": 2222, "name": "tfjob-port"}
    ]
    assert worker1["spec"]["containers"][0]["command"][:2] == ["sh", "-c"]
    # what the portal does not honour is said, not silently dropped
    assert "spec.schedulerName is ignored by the portal" in rendered.warnings


def test_the_tensorflow_plugin_gives_the_tf_example_tf_config_instead_of_its_script():
    """The dist-mnist example builds TF_CONFIG from the svc plugin's host files itself; with
    `tensorflow: []` each pod gets it from the plugin (tensorflow.go generateTFClusterSpec)."""
    data = _load(TF)
    data["spec"]["plugins"]["tensorflow"] = []
    rendered = job_render(data)
    assert rendered.errors == {}
    pods = {o["metadata"]["name"]: o for o in rendered.objects if o["kind"] == "Pod"}
    hosts = "tensorflow-dist-mnist-{}." + NEW + ":2222"
    cluster = (
        f'{{"cluster":{{"ps":["{hosts.format("ps-0")}"],'
        f'"worker":["{hosts.format("worker-0")}","{hosts.format("worker-1")}"]}},'
    )
    assert _env(pods[f"{NEW}-ps-0"])["TF_CONFIG"] == cluster + '"task":{"type":"ps","index":0}}'
    assert _env(pods[f"{NEW}-worker-1"])["TF_CONFIG"] == (
        cluster + '"task":{"type":"worker","index":1}}'
    )


def test_what_the_portal_cannot_run_is_an_error_naming_the_field():
    rendered = job_render(_load(PADDLE))
    assert rendered.objects == []
    assert "spec.tasks[0].template.spec.volumes[0].hostPath" in rendered.errors, rendered.errors
    nginx = yaml.safe_load((EXAMPLES / "example/kubecon-2019-china/gang/nginx.yaml").read_text())
    assert "kind" in job_render(nginx).errors  # a ReplicaSet given as a Job


@override_settings(JOB_ALLOW_HOST_PATH=True)
def test_paddlepaddle_renders_where_host_paths_are_allowed_at_level_privileged():
    manifest = _load(PADDLE)
    refused = job_render(manifest)
    path = "spec.tasks[0].template.spec.volumes[0].hostPath"
    assert "pod security level baseline" in refused.errors[path][0]
    rendered = job_render(manifest, security_level="privileged")
    assert rendered.errors == {}
    pods = [o for o in rendered.objects if o["kind"] == "Pod"]
    assert len(pods) == 4  # 2 pservers + 2 trainers
    assert pods[0]["spec"]["volumes"][0]["hostPath"]["path"].startswith("/")


@pytest.mark.parametrize(
    ("name", "pods"),
    [
        ("example/integrations/mxnet/train/train-mnist-cpu.yaml", 5),
        ("example/kubecon-2019-china/tf-sample/tf-example.yaml", 3),
        ("example/MindSpore-example/mindspore_cpu/mindspore-cpu.yaml", 8),
        ("example/MindSpore-example/mindspore_gpu/mindspore-gpu.yaml", 3),
    ],
)
def test_other_integrations_render_one_pod_per_replica(name, pods):
    data = _load(name)
    rendered = job_render(data)
    assert rendered.errors == {}
    rendered_pods = [o for o in rendered.objects if o["kind"] == "Pod"]
    assert len(rendered_pods) == sum(task["replicas"] for task in data["spec"]["tasks"]) == pods
    assert "ConfigMap" in [o["kind"] for o in rendered.objects]
    assert "Service" in [o["kind"] for o in rendered.objects]


def test_a_pytorch_job_renders_ranks_and_one_master_address():
    data = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "ddp"},
        "spec": {
            "queue": "q",
            "plugins": {"pytorch": []},
            "tasks": [
                {"name": name, "replicas": replicas,
                 "template": {"spec": {"containers": [{"name": "t", "image": "trainer:1"}]}}}
                for name, replicas in (("master", 1), ("worker", 2))
            ],
        },
    }  # fmt: skip
    pods = [o for o in job_render(data).objects if o["kind"] == "Pod"]
    envs = [_env(pod) for pod in pods]
    assert [env["RANK"] for env in envs] == ["0", "1", "2"]
    assert {env["MASTER_ADDR"] for env in envs} == {f"ddp-master-0.{NEW}"}
    assert {env["WORLD_SIZE"] for env in envs} == {"3"}
    assert pods[0]["spec"]["hostname"] == "ddp-master-0"


def test_the_cli_prints_yaml_documents_and_warnings():
    out, err = io.StringIO(), io.StringIO()
    assert main([str(EXAMPLES / TF), "--namespace", "ml"], out=out, err=err) == 0
    documents = list(yaml.safe_load_all(out.getvalue()))
    assert [d["kind"] for d in documents].count("Pod") == 3
    assert "queue default is not checked" in err.getvalue()


def test_the_cli_exits_1_naming_the_fields(tmp_path):
    data = _load(MPI_DOC)
    data["spec"]["plugins"]["mpi"].append("--np=2")
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    out, err = io.StringIO(), io.StringIO()
    assert main([str(path)], out=out, err=err) == 1
    assert out.getvalue() == ""
    assert "spec.plugins.mpi[3]: unknown flag --np; mpi takes: --master, --port, --worker" in (
        err.getvalue()
    )


def test_the_cli_runs_offline_without_a_database(tmp_path):
    """Pointed at a database that cannot be reached, the render still prints: it queries none."""
    env = {
        **os.environ,
        "DATABASE_URL": "postgres://nobody@127.0.0.1:1/none",
        "PORTAL_VAR_DIR": str(tmp_path),
        "DJANGO_SETTINGS_MODULE": "portal.settings.local",
    }
    result = subprocess.run(
        [sys.executable, "-m", "portal.jobs.render", str(EXAMPLES / TF)],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("kind: Pod") == 3


@pytest.mark.django_db
def test_the_api_renders_and_stores_nothing(researcher):
    api = APIClient()
    api.force_authenticate(researcher)
    text = (EXAMPLES / TF).read_text()
    response = api.post("/api/v1/jobs/render/", text, content_type="application/yaml")
    assert response.status_code == HTTPStatus.OK, response.json()
    body = response.json()
    assert [o["kind"] for o in body["objects"]].count("Pod") == 3
    assert body["objects"] == job_render(yaml.safe_load(text)).objects
    assert not Job.objects.exists()


@pytest.mark.django_db
def test_the_api_answers_400_naming_the_field(researcher):
    api = APIClient()
    api.force_authenticate(researcher)
    data = _load(MPI_DOC)
    data["spec"]["plugins"]["mpi"] = ["--hostfile=/etc/hosts"]
    response = api.post("/api/v1/jobs/render/", data, format="json")
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert "unknown flag --hostfile" in response.json()["errors"]["spec.plugins.mpi[0]"][0]


PER_TENANT = {"KUBERNETES_NAMESPACE_PER_TENANT": True, "KUBERNETES_NAMESPACE_PREFIX": "gpu-"}


def _namespaces(objects):
    return {o["metadata"]["namespace"] for o in objects}


def test_with_a_namespace_per_tenant_the_render_goes_to_the_tenants_namespace():
    with override_settings(**PER_TENANT):
        rendered = job_render(_load(TF), tenant_of={"default": "vision"}.get)
        assert _namespaces(rendered.objects) == {"gpu-vision"}
        assert {
            o["metadata"]["labels"]["gpuportal.io/tenant"]
            for o in rendered.objects
            if o["kind"] == "Pod"
        } == {"vision"}
        assert not any("namespace of its own" in w for w in rendered.warnings)

        unknown = job_render(_load(TF), tenant_of=lambda queue: None)
        assert _namespaces(unknown.objects) == {"gpu-jobs"}
        assert any("the tenant of queue default is not known" in w for w in unknown.warnings)

        out, err = io.StringIO(), io.StringIO()
        assert main([str(EXAMPLES / TF), "--tenant", "nlp"], out=out, err=err) == 0
        assert _namespaces(yaml.safe_load_all(out.getvalue())) == {"gpu-nlp"}
    off = job_render(_load(TF), tenant_of={"default": "vision"}.get)
    assert _namespaces(off.objects) == {"gpu-jobs"}


@pytest.mark.django_db
def test_the_api_renders_into_the_namespace_of_a_queue_the_caller_may_see(
    researcher, nlp_queue, vision_queue
):
    api = APIClient()
    api.force_authenticate(researcher)
    data = _load(TF)
    with override_settings(**PER_TENANT):
        for queue, namespace in ((nlp_queue, "gpu-nlp"), (vision_queue, "gpu-jobs")):
            data["spec"]["queue"] = queue.name
            response = api.post("/api/v1/jobs/render/", data, format="json")
            assert response.status_code == HTTPStatus.OK, response.json()
            assert _namespaces(response.json()["objects"]) == {namespace}, queue.name


MPI_HOSTS = ["lm-mpi-job-mpimaster-0", "lm-mpi-job-mpiworker-0", "lm-mpi-job-mpiworker-1"]
SSH_VOLUME = {
    "name": f"{NEW}-ssh",
    "secret": {
        "secretName": f"{NEW}-ssh",
        "items": [{"key": key, "path": f".ssh/{key}"}
                  for key in ("id_rsa", "id_rsa.pub", "authorized_keys", "config")],
        "defaultMode": 0o600,
    },
}  # fmt: skip


def test_the_mpi_plugin_example_renders_a_secret_hosts_and_mpi_host_on_the_master():
    """Upstream's MPI plugin guide: `mpi: [--master=mpimaster, --worker=mpiworker, --port=22]`
    and nothing else; the webhook adds svc and ssh."""
    rendered = job_render(_load(MPI_DOC))
    assert rendered.errors == {}
    assert [(o["kind"], o["metadata"]["name"]) for o in rendered.objects] == [
        ("Secret", f"{NEW}-ssh"),
        ("ConfigMap", f"{NEW}-svc"),
        ("Service", NEW),
        ("NetworkPolicy", NEW),
        ("Pod", f"{NEW}-mpimaster-0"),
        ("Pod", f"{NEW}-mpiworker-0"),
        ("Pod", f"{NEW}-mpiworker-1"),
    ]
    secret, config_map, *_, master, worker0, worker1 = rendered.objects
    config = "".join(f"Host {h}\n  HostName {h}.{NEW}\n  Port 22\n" for h in MPI_HOSTS)
    assert secret["stringData"] == {
        "id_rsa": SSH_KEY_PLACEHOLDER,
        "id_rsa.pub": SSH_KEY_PLACEHOLDER,
        "authorized_keys": SSH_KEY_PLACEHOLDER,
        "config": "StrictHostKeyChecking no\nUserKnownHostsFile /dev/null\n" + config,
    }
    assert any(f"Secret {NEW}-ssh (ssh plugin) is shown with placeholders" in w
               for w in rendered.warnings)  # fmt: skip
    assert config_map["data"]["VC_MPIWORKER_HOSTS"] == ",".join(f"{h}.{NEW}" for h in MPI_HOSTS[1:])
    container = master["spec"]["containers"][0]
    assert container["env"][-1] == {
        "name": "MPI_HOST",
        "value": f"lm-mpi-job-mpiworker-0.{NEW},lm-mpi-job-mpiworker-1.{NEW}",
    }
    for pod, host in zip((master, worker0, worker1), MPI_HOSTS, strict=True):
        spec = pod["spec"]
        assert (spec["hostname"], spec["subdomain"]) == (host, NEW)
        assert spec["containers"][0]["ports"] == [{"containerPort": 22, "name": "mpijob-port"}]
        assert spec["containers"][0]["volumeMounts"] == [
            {"mountPath": "/etc/volcano", "name": f"{NEW}-svc"},
            {"mountPath": "/root/.ssh", "name": f"{NEW}-ssh", "subPath": ".ssh"},
            # the preemption deadline's file (jobspec.notice), in every pod
            {"mountPath": PODINFO_DIR, "name": PODINFO_VOLUME, "readOnly": True},
        ]
        assert spec["volumes"][:2] == [
            {"configMap": {"name": f"{NEW}-svc"}, "name": f"{NEW}-svc"},
            SSH_VOLUME,
        ]
        assert spec["volumes"][2]["name"] == PODINFO_VOLUME
    assert "MPI_HOST" not in _env(worker0)
    # the render never shows a key
    assert "PRIVATE KEY" not in yaml.safe_dump_all(rendered.objects)


@pytest.mark.parametrize(
    "name",
    [
        "example/integrations/mpi/mpi-example.yaml",
        "example/kubecon-2019-china/mpi-sample/mpi-example.yaml",
    ],
)
def test_the_ssh_and_svc_mpi_examples_render_with_the_keys_mounted(name):
    """Upstream's older MPI examples: `ssh: []` and `svc: []`, the master reads the workers
    from /etc/volcano/mpiworker.host; the port they declare (22) is not added twice."""
    rendered = job_render(_load(name))
    assert rendered.errors == {}
    pods = [o for o in rendered.objects if o["kind"] == "Pod"]
    assert [o["kind"] for o in rendered.objects if o["kind"] != "Pod"] == [
        "Secret", "ConfigMap", "Service", "NetworkPolicy"
    ]  # fmt: skip
    assert len(pods) == 3
    for pod in pods:
        container = pod["spec"]["containers"][0]
        assert container["ports"] == [{"containerPort": 22, "name": "mpijob-port"}]
        assert {"mountPath": "/root/.ssh", "name": f"{NEW}-ssh", "subPath": ".ssh"} in container[
            "volumeMounts"
        ]
        assert "MPI_HOST" not in _env(pod)  # no mpi plugin: the script builds it
    assert rendered.objects[1]["data"]["mpiworker.host"] == (
        f"lm-mpi-job-mpiworker-0.{NEW}\nlm-mpi-job-mpiworker-1.{NEW}"
    )


def test_job_plugin_yaml_mounts_the_keys_at_its_path_readable():
    """`ssh: [--ssh-key-file-path=/home/user/.ssh]`: mode 0644 off /root/.ssh (ssh.go:175-178)."""
    rendered = job_render(_load("example/job-plugin.yaml"))
    assert rendered.errors == {}
    pods = [o for o in rendered.objects if o["kind"] == "Pod"]
    assert len(pods) == 3
    for pod in pods:
        volume = next(v for v in pod["spec"]["volumes"] if v["name"] == f"{NEW}-ssh")
        assert volume["secret"]["defaultMode"] == 0o644
        assert {"mountPath": "/home/user/.ssh", "name": f"{NEW}-ssh", "subPath": ".ssh"} in (
            pod["spec"]["containers"][0]["volumeMounts"]
        )
        assert _env(pod)["VC_TASK_INDEX"] == pod["metadata"]["labels"]["gpuportal.io/replica"]


def test_job_yaml_renders_its_ssh_secret():
    rendered = job_render(_load("example/job.yaml"))
    assert rendered.errors == {}
    assert rendered.objects[0]["kind"] == "Secret"


# Every file under volcano_examples/: what `python -m portal.jobs.render` makes of it.
# ("pods", n, skipped kinds): renders n pods; ("refused", {path: words}): exit 1 naming each
# path with those words, for a reason docs/api.md gives with the upstream file; ("skipped",
# kinds): no Volcano Job in it.
PRIORITY = "docs/user-guide/how_to_configure_priorityclass_for_job/example-1.yaml"
POLICY_3 = "docs/user-guide/how_to_use_job_policy/example-3.yaml"
TTL = "docs/user-guide/how_to_use_job_ttl/example-1.yaml"
TEMPLATE = "spec.tasks[{}].template.spec"
ARGO = "example/integrations/argo"
OUTCOMES = {
    PRIORITY: ("pods", 2, ["PriorityClass", "PriorityClass"]),
    "docs/user-guide/how_to_use_cdp_plugin/example-1.yaml": (
        "refused", {"spec.volumes": "the job's volumes"}
    ),
    # A fragment: `spec: ...  # below keep the same`.
    "docs/user-guide/how_to_use_cdp_plugin/example-2.yaml": ("refused", {"spec": "mapping"}),
    "docs/user-guide/how_to_use_cdp_plugin/example-3.yaml": (
        "refused", {"spec.volumes": "the job's volumes"}
    ),
    "docs/user-guide/how_to_use_dra_quota/example-1.yaml": (
        "refused", {f"{TEMPLATE.format(0)}.resourceClaims": "unsupported field"}
    ),
    "docs/user-guide/how_to_use_dra_quota/example-2.yaml": (
        "refused", {f"{TEMPLATE.format(0)}.resourceClaims": "unsupported field"}
    ),
    "docs/user-guide/how_to_use_env_plugin/example-1.yaml": ("pods", 3, []),
    "docs/user-guide/how_to_use_job_policy/example-1.yaml": ("pods", 3, []),
    "docs/user-guide/how_to_use_job_policy/example-2.yaml": ("pods", 3, []),
    # `events: PodFailed`: a string, where upstream's CRD schema wants a list.
    POLICY_3: ("refused", {"spec.tasks[0].policies[0].events": "list of events"}),
    # `imagePullPolicy` on the pod spec instead of the container.
    TTL: ("refused", {f"{TEMPLATE.format(0)}.imagePullPolicy": "unsupported field"}),
    MPI_DOC: ("pods", 3, []),
    "docs/user-guide/how_to_use_network_topology_aware_scheduling/example-1.yaml": ("pods", 8, []),
    "docs/user-guide/how_to_use_network_topology_aware_scheduling/example-2.yaml": ("pods", 8, []),
    "docs/user-guide/how_to_use_network_topology_aware_scheduling/example-3.yaml": ("pods", 2, []),
    "docs/user-guide/how_to_use_nodegroup_plugin/example-1.yaml": ("pods", 1, []),
    "docs/user-guide/how_to_use_nodegroup_plugin/example-2.yaml": ("pods", 1, []),
    "docs/user-guide/how_to_use_numa_aware/example-1.yaml": ("pods", 1, []),
    "docs/user-guide/how_to_use_numa_aware/example-2.yaml": ("pods", 1, []),
    "docs/user-guide/how_to_use_pytorch_plugin/example-1.yaml": ("pods", 3, []),
    "docs/user-guide/how_to_use_ray_plugin/example-1.yaml": ("pods", 3, []),
    # Pod annotations under volcano.sh are the portal's and the sharing stack's (jobspec.tenancy).
    "docs/user-guide/how_to_use_resource_strategy_fit_plugin/example-1.yaml": (
        "refused",
        {
            "spec.tasks[0].template.metadata.annotations.volcano.sh/resource-strategy-weight": (
                "keys under volcano.sh are the portal's"
            )
        },
    ),
    "docs/user-guide/how_to_use_resource_strategy_fit_plugin/example-2.yaml": (
        "refused",
        {
            "spec.tasks[0].template.metadata.annotations.volcano.sh/resource-strategy-weight": (
                "keys under volcano.sh are the portal's"
            )
        },
    ),
    "docs/user-guide/how_to_use_ssh_plugin/example-1.yaml": ("pods", 3, []),
    "docs/user-guide/how_to_use_svc_plugin/example-1.yaml": ("pods", 3, []),
    "docs/user-guide/how_to_use_vnpu/example-1.yaml": (
        "refused",
        {
            f"{TEMPLATE.format(0)}.containers[0].resources.limits.huawei.com/npu-core": (
                "unknown resource"
            ),
        },
    ),
    "example/MindSpore-example/mindspore_cpu/mindspore-cpu.yaml": ("pods", 8, []),
    "example/MindSpore-example/mindspore_gpu/mindspore-gpu.yaml": ("pods", 3, []),
    "example/cronjob/cronjob.yaml": ("skipped", ["CronJob"]),
    "example/deployment/deployment.yaml": ("skipped", ["Deployment"]),
    "example/deployment/queue.yaml": ("skipped", ["Queue"]),
    "example/hierarchical-jobs/jobs.yaml": ("pods", 24, []),
    "example/hierarchical-jobs/queues.yaml": ("skipped", ["Queue"] * 4),
    # Argo workflows whose steps create a Volcano Job: test_the_job_an_argo_step_creates.
    f"{ARGO}/10-job-step.yaml": ("skipped", ["Workflow"]),
    f"{ARGO}/20-job-DAG.yaml": ("skipped", ["Workflow"]),
    f"{ARGO}/mpi/hello-world.yaml": ("skipped", ["WorkflowTemplate"]),
    f"{ARGO}/mpi/rbac.yaml": ("skipped", ["Role", "RoleBinding"]),
    "example/integrations/mpi/mpi-example.yaml": ("pods", 3, []),
    "example/integrations/mxnet/train/train-mnist-cpu.yaml": ("pods", 5, []),
    PADDLE: ("refused", {f"{TEMPLATE.format(0)}.volumes[0].hostPath": "JOB_ALLOW_HOST_PATH"}),
    "example/integrations/ray/ray-example.yaml": ("pods", 3, []),
    "example/integrations/tensorflow/benchmark/tf-example.yaml": ("pods", 3, []),
    TF: ("pods", 3, []),
    # Refused by upstream's own admission webhook, as the names say.
    "example/invalid_jobs/duplicatedPolicyEvent-webhook-deny.yaml": (
        "refused", {"spec.policies[1].event": "event PodFailed is in another policy"}
    ),
    "example/invalid_jobs/duplicatedTaskName-webhook-deny.yaml": (
        "refused", {"spec.tasks[1].name": "task name task-1 is used twice"}
    ),
    "example/invalid_jobs/minAvailable-webhook-deny.yaml": (
        "refused", {"spec.minAvailable": "may not exceed the job's total replicas (4)"}
    ),
    "example/job-plugin.yaml": ("pods", 3, []),
    "example/job.yaml": ("pods", 6, []),
    "example/jobflow/JobFlow.yaml": ("skipped", ["JobFlow"]),
    "example/jobflow/JobTemplate.yaml": ("skipped", ["JobTemplate"] * 5),
    "example/kubecon-2019-china/drf/nginx-1.yaml": ("skipped", ["ReplicaSet"]),
    "example/kubecon-2019-china/drf/nginx-2.yaml": ("skipped", ["ReplicaSet"]),
    "example/kubecon-2019-china/drf/nginx.yaml": ("skipped", ["ReplicaSet"]),
    "example/kubecon-2019-china/gang/mpi-example.yaml": ("pods", 4, []),
    "example/kubecon-2019-china/gang/nginx.yaml": ("skipped", ["ReplicaSet"]),
    "example/kubecon-2019-china/horovod-sample/lm-horovod-tf-mnist-v0.5.yaml": ("pods", 4, []),
    "example/kubecon-2019-china/mpi-sample/mpi-example.yaml": ("pods", 3, []),
    "example/kubecon-2019-china/node-selector/nginx.yaml": ("skipped", ["ReplicaSet"]),
    "example/kubecon-2019-china/spark-sample/spark-pi.yaml": (
        "skipped", ["SparkApplication", "PodGroup"]
    ),
    # `priorityClass`, where Kubernetes' field is priorityClassName.
    "example/kubecon-2019-china/task-priority/elastic-job.yaml": (
        "refused", {f"{TEMPLATE.format(0)}.priorityClass": "unsupported field"}
    ),
    "example/kubecon-2019-china/task-priority/high-priority.yaml": ("skipped", ["PriorityClass"]),
    "example/kubecon-2019-china/task-priority/nginx.yaml": ("skipped", ["ReplicaSet"]),
    "example/kubecon-2019-china/task-priority/normal-priority.yaml": (
        "skipped", ["PriorityClass"]
    ),
    "example/kubecon-2019-china/tf-sample/tf-example.yaml": ("pods", 3, []),
    "example/sharding/sharding-config-configmap.yaml": ("skipped", ["ConfigMap"]),
    "example/task-start-dependency/job.yaml": ("pods", 11, []),
    "example/task-start-dependency/mpi.yaml": ("pods", 11, []),
}  # fmt: skip


def _upstream_file(example: str) -> str:
    """The upstream file a fixture was copied from: a guide's examples come from its .md."""
    if example.startswith("docs/user-guide/"):
        return example.rsplit("/", 1)[0] + ".md"
    return example


def test_every_fixture_has_its_outcome_and_says_where_it_comes_from():
    found = sorted(str(p.relative_to(EXAMPLES)) for p in EXAMPLES.rglob("*.yaml"))
    assert found == sorted(OUTCOMES)
    for example in found:
        first = (EXAMPLES / example).read_text().splitlines()[0]
        assert f"volcano-sh/volcano {_upstream_file(example)}" in first, example


@pytest.mark.parametrize("example", sorted(OUTCOMES))
def test_every_upstream_example_renders_or_is_refused_for_a_documented_reason(example):
    out, err = io.StringIO(), io.StringIO()
    code = main([str(EXAMPLES / example)], out=out, err=err)
    outcome, *expected = OUTCOMES[example]
    said = err.getvalue()
    skipped = re.findall(r"skipped: kind (\w+)", said)
    if outcome == "pods":
        pods, kinds = expected
        assert code == 0, said
        documents = list(yaml.safe_load_all(out.getvalue()))
        assert sum(d["kind"] == "Pod" for d in documents) == pods
        assert skipped == kinds
    elif outcome == "skipped":
        assert code == 1
        assert "holds no Volcano Job" in said
        assert skipped == expected[0]
    else:
        assert code == 1
        assert out.getvalue() == ""
        for path, words in expected[0].items():
            line = rf"^(document \d+: )?{re.escape(path)}: .*{re.escape(words)}"
            assert re.search(line, said, re.M), said
        assert _upstream_file(example) in API_DOCS.read_text(), "the refusal is not documented"


def test_the_job_policy_guides_restart_pod_and_timeout_render_once_events_is_a_list():
    """Its third example, as upstream's CRD would take it: RestartPod, and RestartJob after
    10 minutes (jobspec.policies)."""
    data = _load(POLICY_3)
    for policy in data["spec"]["tasks"][0]["policies"]:
        policy["events"] = [policy["events"]]
    rendered = job_render(data)
    assert rendered.errors == {}
    assert sum(o["kind"] == "Pod" for o in rendered.objects) == 3


def test_a_task_without_its_own_priority_class_takes_the_jobs():
    """how_to_configure_priorityclass_for_job.md: preempt-task keeps task-priority,
    non-preempt-task takes the job's job-priority (job_controller_util.go createJobPod)."""
    rendered = job_render(_load(PRIORITY))
    classes = {
        o["metadata"]["labels"]["gpuportal.io/task"]: o["spec"]["priorityClassName"]
        for o in rendered.objects
    }
    assert classes == {"preempt-task": "task-priority", "non-preempt-task": "job-priority"}
    assert any("spec.queue is not given" in w for w in rendered.warnings)


def test_generate_name_is_rendered_with_a_placeholder_and_said():
    data = _load(TTL)
    pod = data["spec"]["tasks"][0]["template"]["spec"]
    pod["containers"][0]["imagePullPolicy"] = pod.pop("imagePullPolicy")
    rendered = job_render(data)
    assert rendered.errors == {}
    assert rendered.objects[0]["metadata"]["annotations"]["gpuportal.io/job-name"] == (
        "test-job-xxxxx"
    )
    assert (
        "metadata.generateName: a submission names the job test-job- and 5 random characters; "
        "shown here as test-job-xxxxx"
    ) in rendered.warnings


def _argo_step_job(name: str) -> dict:
    """The Volcano Job an Argo workflow's resource step creates, Argo's {{...}} parameters
    filled in with a word, as Argo would before it creates it."""
    workflow = yaml.safe_load((EXAMPLES / ARGO / name).read_text())
    (manifest,) = [
        t["resource"]["manifest"] for t in workflow["spec"]["templates"] if "resource" in t
    ]
    return yaml.safe_load(re.sub(r"\{\{[^}]*\}\}", "hello", manifest))


@pytest.mark.parametrize("name", ["10-job-step.yaml", "20-job-DAG.yaml"])
def test_the_job_an_argo_step_creates_renders(name):
    """The portal runs no Argo: the Workflow is skipped, but the Job its step would create
    renders, its owner (the workflow) named as ignored."""
    rendered = job_render(_argo_step_job(name))
    assert rendered.errors == {}
    assert sum(o["kind"] == "Pod" for o in rendered.objects) == 2
    assert "metadata.ownerReferences is ignored by the portal" in rendered.warnings


def test_the_job_of_the_argo_mpi_example_is_refused_for_what_the_portal_does_not_run():
    """Its pods call the API server as the workflow's service account (kubectl wait), ask for
    an RDMA device and probe readiness."""
    errors = job_render(_argo_step_job("mpi/hello-world.yaml")).errors
    assert set(errors) == {
        f"{TEMPLATE.format(0)}.serviceAccountName",
        *(
            f"{TEMPLATE.format(t)}.containers[0].resources.{kind}.rdma/ib"
            for t in (0, 1)
            for kind in ("limits", "requests")
        ),
        f"{TEMPLATE.format(1)}.containers[0].readinessProbe",
    }
    assert f"{ARGO}/mpi/hello-world.yaml" in API_DOCS.read_text(), "the refusal is not documented"
