"""The dry-run render (`python -m portal.jobs.render`, POST /api/v1/jobs/render/) of upstream
Volcano's example manifests (copied with their licence in volcano_examples/).

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
import subprocess
import sys
from http import HTTPStatus
from pathlib import Path

import pytest
import yaml
from django.test import override_settings
from rest_framework.test import APIClient

from jobspec.job_plugins import SSH_KEY_PLACEHOLDER
from portal.jobs.dry_run import job_render
from portal.jobs.models import Job
from portal.jobs.render import main

EXAMPLES = Path(__file__).parent / "volcano_examples"
TF = "integrations-tensorflow-dist-mnist-tf-dist-mnist-example.yaml"


def _load(name, *, queue=None):
    data = next(doc for doc in yaml.safe_load_all((EXAMPLES / name).read_text()) if doc)
    if queue is not None:
        # Upstream's admission webhook puts a job without a queue in "default"; the portal
        # needs one named.
        data["spec"].setdefault("queue", queue)
    return data


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
        ("ConfigMap", "gp-new-svc"),
        ("Service", "gp-new"),
        ("NetworkPolicy", "gp-new"),
        ("Pod", "gp-new-ps-0"),
        ("Pod", "gp-new-worker-0"),
        ("Pod", "gp-new-worker-1"),
    ]
    config_map, service, _, ps, worker0, worker1 = rendered.objects
    assert config_map["data"] == {
        "ps.host": "tensorflow-dist-mnist-ps-0.gp-new",
        "VC_PS_HOSTS": "tensorflow-dist-mnist-ps-0.gp-new",
        "VC_PS_NUM": "1",
        "worker.host": "tensorflow-dist-mnist-worker-0.gp-new\ntensorflow-dist-mnist-worker-1.gp-new",
        "VC_WORKER_HOSTS": "tensorflow-dist-mnist-worker-0.gp-new,tensorflow-dist-mnist-worker-1.gp-new",
        "VC_WORKER_NUM": "2",
    }
    assert service["spec"]["clusterIP"] == "None"
    assert service["metadata"]["namespace"] == "ml"
    for pod in (ps, worker0, worker1):
        assert pod["spec"]["subdomain"] == "gp-new"
        assert "nodeName" not in pod["spec"]  # the scheduler picks the node
        assert pod["spec"]["schedulerName"] == "gpuportal"
        assert pod["spec"]["restartPolicy"] == "Never"
        assert {"name": "gp-new-svc", "mountPath": "/etc/volcano"} in pod["spec"]["containers"][0][
            "volumeMounts"
        ]
        assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    assert worker1["spec"]["hostname"] == "tensorflow-dist-mnist-worker-1"
    env = _env(worker1)
    assert (env["VK_TASK_INDEX"], env["VC_TASK_INDEX"]) == ("1", "1")
    assert env["VC_PS_HOSTS"] == {"configMapKeyRef": {"key": "VC_PS_HOSTS", "name": "gp-new-svc"}}
    assert worker1["spec"]["containers"][0]["ports"] == [
        {"containerPort": 2222, "name": "tfjob-port"}
    ]
    assert worker1["spec"]["containers"][0]["command"][:2] == ["sh", "-c"]
    # what the portal does not honour is said, not silently dropped
    assert "spec.schedulerName is ignored by the portal" in rendered.warnings


@pytest.mark.parametrize(
    ("name", "path"),
    [
        (
            "integrations-paddlepaddle-ctr-paddlepaddle-on-volcano.yaml",
            "spec.tasks[0].template.spec.volumes[0].hostPath",
        ),
        ("kubecon-2019-china-gang-nginx.yaml", "kind"),
    ],  # fmt: skip
)
def test_what_the_portal_cannot_run_is_an_error_naming_the_field(name, path):
    rendered = job_render(_load(name, queue="default"))
    assert rendered.objects == []
    assert path in rendered.errors, rendered.errors


@override_settings(JOB_ALLOW_HOST_PATH=True)
def test_paddlepaddle_renders_where_host_paths_are_allowed_at_level_privileged():
    manifest = _load("integrations-paddlepaddle-ctr-paddlepaddle-on-volcano.yaml", queue="q")
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
        ("integrations-mxnet-train-train-mnist-cpu.yaml", 5),
        ("kubecon-2019-china-tf-sample-tf-example.yaml", 3),
        ("MindSpore-example-mindspore_cpu-mindspore-cpu.yaml", 8),
        ("MindSpore-example-mindspore_gpu-mindspore-gpu.yaml", 3),
    ],
)
def test_other_integrations_render_one_pod_per_replica(name, pods):
    data = _load(name, queue="default")
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
    assert {env["MASTER_ADDR"] for env in envs} == {"ddp-master-0.gp-new"}
    assert {env["WORLD_SIZE"] for env in envs} == {"3"}
    assert pods[0]["spec"]["hostname"] == "ddp-master-0"


def test_the_cli_prints_yaml_documents_and_warnings():
    out, err = io.StringIO(), io.StringIO()
    assert main([str(EXAMPLES / TF), "--namespace", "ml"], out=out, err=err) == 0
    documents = list(yaml.safe_load_all(out.getvalue()))
    assert [d["kind"] for d in documents].count("Pod") == 3
    assert "queue default is not checked" in err.getvalue()


def test_the_cli_exits_1_naming_the_fields(tmp_path):
    data = _load("docs-user-guide-how_to_use_mpi_plugin.yaml", queue="q")
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
    data = _load("docs-user-guide-how_to_use_mpi_plugin.yaml", queue="q")
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


MPI_DOC = "docs-user-guide-how_to_use_mpi_plugin.yaml"
MPI_HOSTS = ["lm-mpi-job-mpimaster-0", "lm-mpi-job-mpiworker-0", "lm-mpi-job-mpiworker-1"]
SSH_VOLUME = {
    "name": "gp-new-ssh",
    "secret": {
        "secretName": "gp-new-ssh",
        "items": [{"key": key, "path": f".ssh/{key}"}
                  for key in ("id_rsa", "id_rsa.pub", "authorized_keys", "config")],
        "defaultMode": 0o600,
    },
}  # fmt: skip


def test_the_mpi_plugin_example_renders_a_secret_hosts_and_mpi_host_on_the_master():
    """Upstream's MPI plugin guide: `mpi: [--master=mpimaster, --worker=mpiworker, --port=22]`
    and nothing else; the webhook adds svc and ssh."""
    rendered = job_render(_load(MPI_DOC, queue="default"))
    assert rendered.errors == {}
    assert [(o["kind"], o["metadata"]["name"]) for o in rendered.objects] == [
        ("Secret", "gp-new-ssh"),
        ("ConfigMap", "gp-new-svc"),
        ("Service", "gp-new"),
        ("NetworkPolicy", "gp-new"),
        ("Pod", "gp-new-mpimaster-0"),
        ("Pod", "gp-new-mpiworker-0"),
        ("Pod", "gp-new-mpiworker-1"),
    ]
    secret, config_map, *_, master, worker0, worker1 = rendered.objects
    config = "".join(f"Host {h}\n  HostName {h}.gp-new\n  Port 22\n" for h in MPI_HOSTS)
    assert secret["stringData"] == {
        "id_rsa": SSH_KEY_PLACEHOLDER,
        "id_rsa.pub": SSH_KEY_PLACEHOLDER,
        "authorized_keys": SSH_KEY_PLACEHOLDER,
        "config": "StrictHostKeyChecking no\nUserKnownHostsFile /dev/null\n" + config,
    }
    assert any("Secret gp-new-ssh (ssh plugin) is shown with placeholders" in w
               for w in rendered.warnings)  # fmt: skip
    assert config_map["data"]["VC_MPIWORKER_HOSTS"] == ",".join(
        f"{h}.gp-new" for h in MPI_HOSTS[1:]
    )
    container = master["spec"]["containers"][0]
    assert container["env"][-1] == {
        "name": "MPI_HOST",
        "value": "lm-mpi-job-mpiworker-0.gp-new,lm-mpi-job-mpiworker-1.gp-new",
    }
    for pod, host in zip((master, worker0, worker1), MPI_HOSTS, strict=True):
        spec = pod["spec"]
        assert (spec["hostname"], spec["subdomain"]) == (host, "gp-new")
        assert spec["containers"][0]["ports"] == [{"containerPort": 22, "name": "mpijob-port"}]
        assert spec["containers"][0]["volumeMounts"] == [
            {"mountPath": "/etc/volcano", "name": "gp-new-svc"},
            {"mountPath": "/root/.ssh", "name": "gp-new-ssh", "subPath": ".ssh"},
        ]
        assert spec["volumes"] == [
            {"configMap": {"name": "gp-new-svc"}, "name": "gp-new-svc"},
            SSH_VOLUME,
        ]
    assert "MPI_HOST" not in _env(worker0)
    # the render never shows a key
    assert "PRIVATE KEY" not in yaml.safe_dump_all(rendered.objects)


@pytest.mark.parametrize(
    "name", ["integrations-mpi-mpi-example.yaml", "kubecon-2019-china-mpi-sample-mpi-example.yaml"]
)
def test_the_ssh_and_svc_mpi_examples_render_with_the_keys_mounted(name):
    """Upstream's older MPI examples: `ssh: []` and `svc: []`, the master reads the workers
    from /etc/volcano/mpiworker.host; the port they declare (22) is not added twice."""
    rendered = job_render(_load(name, queue="default"))
    assert rendered.errors == {}
    pods = [o for o in rendered.objects if o["kind"] == "Pod"]
    assert [o["kind"] for o in rendered.objects if o["kind"] != "Pod"] == [
        "Secret", "ConfigMap", "Service", "NetworkPolicy"
    ]  # fmt: skip
    assert len(pods) == 3
    for pod in pods:
        container = pod["spec"]["containers"][0]
        assert container["ports"] == [{"containerPort": 22, "name": "mpijob-port"}]
        assert {"mountPath": "/root/.ssh", "name": "gp-new-ssh", "subPath": ".ssh"} in container[
            "volumeMounts"
        ]
        assert "MPI_HOST" not in _env(pod)  # no mpi plugin: the script builds it
    assert rendered.objects[1]["data"]["mpiworker.host"] == (
        "lm-mpi-job-mpiworker-0.gp-new\nlm-mpi-job-mpiworker-1.gp-new"
    )


def test_job_plugin_yaml_mounts_the_keys_at_its_path_readable():
    """`ssh: [--ssh-key-file-path=/home/user/.ssh]`: mode 0644 off /root/.ssh (ssh.go:175-178)."""
    rendered = job_render(_load("job-plugin.yaml"))
    assert rendered.errors == {}
    pods = [o for o in rendered.objects if o["kind"] == "Pod"]
    assert len(pods) == 3
    for pod in pods:
        volume = next(v for v in pod["spec"]["volumes"] if v["name"] == "gp-new-ssh")
        assert volume["secret"]["defaultMode"] == 0o644
        assert {"mountPath": "/home/user/.ssh", "name": "gp-new-ssh", "subPath": ".ssh"} in (
            pod["spec"]["containers"][0]["volumeMounts"]
        )
        assert _env(pod)["VC_TASK_INDEX"] == pod["metadata"]["labels"]["gpuportal.io/replica"]


def test_job_yaml_renders_its_ssh_secret():
    rendered = job_render(_load("job.yaml"))
    assert rendered.errors == {}
    assert rendered.objects[0]["kind"] == "Secret"
