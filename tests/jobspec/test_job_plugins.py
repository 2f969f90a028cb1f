"""jobspec.job_plugins: Volcano's svc, env, pytorch, tensorflow, ssh, mpi and ray job plugins
(pure).

Expected values are derived from upstream volcano-sh/volcano pkg/controllers/job/plugins:
env/env.go:45-59, svc/svc.go:76-131 and 309-345, pytorch/pytorch.go:74-231, ssh/ssh.go:144-200
(mountRsaKey) and 262-286 (generateSSHConfig), distributed-framework/mpi/mpi.go:80-170; the
webhook's defaults webhooks/admission/jobs/mutate/mutate_job.go:244-260."""

import pytest

from jobspec.job_plugins import (
    SSH_KEY_PLACEHOLDER,
    WAIT_MASTER_IMAGE,
    JobShape,
    hostname,
    hosts_data,
    job_objects,
    plugins_config,
    plugins_parse,
    pod_additions,
)

JOB = JobShape(job_id=42, name="ddp", tasks=(("master", 1), ("worker", 3)))
PLUGINS = {"pytorch": [], "svc": [], "env": []}


def _env(additions):
    return {item["name"]: item.get("value", item.get("valueFrom")) for item in additions.env}


def test_pytorch_gives_each_pod_its_rank_and_the_same_master():
    master = _env(pod_additions(PLUGINS, JOB, "master", 0))
    workers = [_env(pod_additions(PLUGINS, JOB, "worker", i)) for i in range(3)]
    assert master["RANK"] == "0"
    assert [w["RANK"] for w in workers] == ["1", "2", "3"]  # pytorch.go:117 index + 1
    assert {e["MASTER_ADDR"] for e in [master, *workers]} == {"ddp-master-0.gp-42"}
    assert {e["MASTER_PORT"] for e in [master, *workers]} == {"23456"}
    assert {e["WORLD_SIZE"] for e in [master, *workers]} == {"4"}


def test_env_gives_the_task_index_under_both_names():
    env = _env(pod_additions({"env": []}, JOB, "worker", 2))
    assert env == {"VK_TASK_INDEX": "2", "VC_TASK_INDEX": "2"}


def test_svc_sets_host_names_mounts_the_hosts_and_refers_to_them():
    additions = pod_additions({"svc": []}, JOB, "worker", 1)
    assert (additions.hostname, additions.subdomain) == ("ddp-worker-1", "gp-42")
    assert additions.volumes == ({"name": "gp-42-svc", "configMap": {"name": "gp-42-svc"}},)
    assert additions.mounts == ({"name": "gp-42-svc", "mountPath": "/etc/volcano"},)
    env = _env(additions)
    assert env["VC_WORKER_HOSTS"] == {
        "configMapKeyRef": {"name": "gp-42-svc", "key": "VC_WORKER_HOSTS"}
    }
    assert set(env) == {"VC_MASTER_HOSTS", "VC_MASTER_NUM", "VC_WORKER_HOSTS", "VC_WORKER_NUM"}


def test_svc_inject_hosts_env_false_leaves_the_variables_out():
    additions = pod_additions({"svc": ["--inject-hosts-env=false"]}, JOB, "worker", 0)
    assert additions.env == ()
    assert additions.mounts  # the files are still mounted


def test_the_hosts_config_map_is_generate_hosts():
    job = JobShape(job_id=7, name="tf", tasks=(("ps", 1), ("my-worker", 2)))
    assert hosts_data(job) == {
        "ps.host": "tf-ps-0.gp-7",
        "VC_PS_HOSTS": "tf-ps-0.gp-7",
        "VC_PS_NUM": "1",
        "my_worker.host": "tf-my-worker-0.gp-7\ntf-my-worker-1.gp-7",
        "VC_MY_WORKER_HOSTS": "tf-my-worker-0.gp-7,tf-my-worker-1.gp-7",
        "VC_MY_WORKER_NUM": "2",
    }


def test_job_objects_are_a_config_map_a_headless_service_and_a_network_policy():
    selector = {"gpuportal.io/job-id": "42"}
    objects = job_objects(PLUGINS, JOB, namespace="jobs", labels={"a": "b"}, selector=selector)
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [
        ("ConfigMap", "gp-42-svc"),
        ("Service", "gp-42"),
        ("NetworkPolicy", "gp-42"),
    ]
    service = objects[1]["spec"]
    assert service == {"clusterIP": "None", "selector": selector, "publishNotReadyAddresses": False}
    flags = {"svc": ["--disable-network-policy=true", "--publish-not-ready-addresses"]}
    objects = job_objects(flags, JOB, namespace="jobs", labels={}, selector=selector)
    assert [o["kind"] for o in objects] == ["ConfigMap", "Service"]
    assert objects[1]["spec"]["publishNotReadyAddresses"] is True


def test_pytorch_turns_svc_on_like_the_admission_webhook():
    stored, errors = plugins_parse({"pytorch": ["--port=29500"]}, task_names=["master", "worker"])
    assert errors == {}
    assert stored == {"pytorch": ["--port=29500"], "svc": []}
    assert plugins_config(stored).port == 29500


@pytest.mark.parametrize(
    ("raw", "path", "message"),
    [
        ({"ray": ["--head=chief"]}, "spec.plugins.ray", "named chief (set --head=<task>)"),
        ({"ray": ["--dashboardPort=0"]}, "spec.plugins.ray[0]", "--dashboardPort takes a port"),
        ({"ray": ["--headContainer=Head"]}, "spec.plugins.ray[0]", "takes a container name"),
        ({"ray": ["--dashboard-port=1"]}, "spec.plugins.ray[0]", "unknown flag --dashboard-port"),
        ({"tensorflow": ["--ps=Ps"]}, "spec.plugins.tensorflow[0]", "takes a task name"),
        ({"tensorflow": ["--port=0"]}, "spec.plugins.tensorflow[0]", "--port takes a port"),
        ({"tensorflow": ["--master=x"]}, "spec.plugins.tensorflow[0]", "unknown flag --master"),
        ({"hcclrank": []}, "spec.plugins.hcclrank", "not supported"),
        ({"mpi": ["--bogus=1"]}, "spec.plugins.mpi[0]", "unknown flag --bogus"),
        ({"mpi": ["--port=0"]}, "spec.plugins.mpi[0]", "--port takes a port"),
        ({"mpi": ["--master=chief"]}, "spec.plugins.mpi", "task named chief"),
        ({"ssh": ["--ssh-port=70000"]}, "spec.plugins.ssh[0]", "--ssh-port takes a port"),
        ({"ssh": ["--ssh-key-file-path=home/.ssh"]}, "spec.plugins.ssh[0]", "absolute path"),
        ({"ssh": ["--ssh-key-file-path=/a/../root"]}, "spec.plugins.ssh[0]", "absolute path"),
        ({"ssh": ["--ssh-private-key=-----BEGIN"]}, "spec.plugins.ssh[0]", "plain text"),
        ({"ssh": ["--ssh-public-key=ssh-rsa AAAA"]}, "spec.plugins.ssh[0]", "plain text"),
        ({"svc": ["--bogus"]}, "spec.plugins.svc[0]", "unknown flag --bogus"),
        ({"svc": ["--inject-hosts-env=maybe"]}, "spec.plugins.svc[0]", "true or false"),
        ({"pytorch": ["--port=99999"]}, "spec.plugins.pytorch[0]", "port"),
        ({"pytorch": ["--master=chief"]}, "spec.plugins.pytorch", "task named chief"),
        ({"pytorch": ["--wait-master-timeout=-5"]}, "spec.plugins.pytorch[0]", "seconds"),
        ({"pytorch": ["--wait-master-timeout=90000"]}, "spec.plugins.pytorch[0]", "seconds"),
        ({"pytorch": ["--wait-master-image="]}, "spec.plugins.pytorch[0]", "container image"),
        ({"pytorch": ["--wait-master-image=a b"]}, "spec.plugins.pytorch[0]", "container image"),
        ({"pytorch": ["--wait-master-enabled=perhaps"]}, "spec.plugins.pytorch[0]", "true or"),
        ({"env": "yes"}, "spec.plugins.env", "list of arguments"),
        (["svc"], "spec.plugins", "mapping"),
    ],
)
def test_what_the_portal_cannot_run_is_refused_naming_the_plugin(raw, path, message):
    stored, errors = plugins_parse(raw, task_names=["master", "worker", "head"])
    assert stored == {}
    assert path in errors, errors
    assert any(message in text for text in errors[path])


def test_host_names_stay_dns_labels():
    long = hostname("j" * 63, "t" * 63, 12)
    assert len(long) <= 63
    assert long.endswith("-12")
    assert long != hostname("j" * 63, "t" * 63, 13)
    assert hostname("ddp", "worker", 0) == "ddp-worker-0"


MPI_JOB = JobShape(job_id=9, name="lm", tasks=(("mpimaster", 1), ("mpiworker", 2)))
MPI = {"mpi": ["--master=mpimaster", "--worker=mpiworker"]}


def test_mpi_turns_svc_and_ssh_on_like_the_admission_webhook():
    stored, errors = plugins_parse(MPI, task_names=["mpimaster", "mpiworker"])
    assert errors == {}
    assert stored == {**MPI, "svc": [], "ssh": []}
    # A worker task is not required (validate/admit_job.go:134-141 checks the master only).
    stored, errors = plugins_parse({"mpi": []}, task_names=["master"])
    assert (errors, sorted(stored)) == ({}, ["mpi", "ssh", "svc"])


def test_mpi_gives_the_master_the_workers_hosts_and_opens_the_sshd_port_everywhere():
    stored, _ = plugins_parse(MPI, task_names=["mpimaster", "mpiworker"])
    master = pod_additions(stored, MPI_JOB, "mpimaster", 0)
    worker = pod_additions(stored, MPI_JOB, "mpiworker", 1)
    hosts = "lm-mpiworker-0.gp-9,lm-mpiworker-1.gp-9"  # mpi.go:116-149 generateTaskHosts
    assert _env(master)["MPI_HOST"] == hosts
    assert {"name": "MPI_HOST", "value": hosts} in master.init_env
    assert "MPI_HOST" not in _env(worker)
    port = {"name": "mpijob-port", "containerPort": 22}  # mpi.go:151-170
    for additions in (master, worker):
        assert additions.ports == (port,)
        assert additions.init_ports == (port,)
    custom = pod_additions({**stored, "mpi": ["--port=2222"]}, MPI_JOB, "mpiworker", 0)
    assert custom.ports == ({"name": "mpijob-port", "containerPort": 2222},)


def test_mpi_without_the_worker_task_leaves_the_master_alone_as_upstream_does():
    job = JobShape(job_id=9, name="lm", tasks=(("master", 1),))
    additions = pod_additions({"mpi": []}, job, "master", 0)
    assert (additions.env, additions.ports) == ((), ())


def test_ssh_mounts_the_jobs_secret_at_root_ssh_mode_0600():
    additions = pod_additions({"ssh": []}, MPI_JOB, "mpiworker", 0)
    volume = {
        "name": "gp-9-ssh",
        "secret": {
            "secretName": "gp-9-ssh",
            "items": [
                {"key": "id_rsa", "path": ".ssh/id_rsa"},
                {"key": "id_rsa.pub", "path": ".ssh/id_rsa.pub"},
                {"key": "authorized_keys", "path": ".ssh/authorized_keys"},
                {"key": "config", "path": ".ssh/config"},
            ],
            "defaultMode": 0o600,
        },
    }
    assert additions.volumes == (volume,)
    assert additions.mounts == ({"name": "gp-9-ssh", "mountPath": "/root/.ssh", "subPath": ".ssh"},)
    other = pod_additions({"ssh": ["--ssh-key-file-path=/home/user/.ssh"]}, MPI_JOB, "mpiworker", 0)
    assert other.volumes[0]["secret"]["defaultMode"] == 0o644  # ssh.go:175-178
    assert other.mounts[0]["mountPath"] == "/home/user/.ssh"


def test_the_ssh_secret_holds_placeholders_and_the_hosts_config():
    objects = job_objects({"ssh": ["--ssh-port=2222"]}, MPI_JOB, namespace="jobs",
                          labels={"a": "b"}, selector={})  # fmt: skip
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [("Secret", "gp-9-ssh")]
    data = objects[0]["stringData"]
    assert {data[key] for key in ("id_rsa", "id_rsa.pub", "authorized_keys")} == {
        SSH_KEY_PLACEHOLDER
    }
    assert data["config"] == (
        "StrictHostKeyChecking no\nUserKnownHostsFile /dev/null\n"
        "Host lm-mpimaster-0\n  HostName lm-mpimaster-0.gp-9\n  Port 2222\n"
        "Host lm-mpiworker-0\n  HostName lm-mpiworker-0.gp-9\n  Port 2222\n"
        "Host lm-mpiworker-1\n  HostName lm-mpiworker-1.gp-9\n  Port 2222\n"
    )
    assert objects[0]["metadata"]["labels"] == {"a": "b"}


def test_pytorch_and_mpi_flags_do_not_mix():
    stored, errors = plugins_parse(
        {"pytorch": ["--master=chief", "--port=29500"], "mpi": ["--master=launcher"]},
        task_names=["chief", "launcher", "worker"],
    )
    assert errors == {}
    config = plugins_config(stored)
    assert (config.master, config.port) == ("chief", 29500)
    assert (config.mpi_master, config.mpi_port) == ("launcher", 22)


RAY_JOB = JobShape(job_id=9, name="tune", tasks=(("head", 1), ("worker", 3)))


def test_ray_turns_svc_on_and_reads_upstreams_camel_case_flags():
    stored, errors = plugins_parse(
        {"ray": ["--port=6380", "--dashboardPort=8266", "--clientPort=10002"]},
        task_names=["head", "worker"],
    )
    assert errors == {}
    assert stored == {"ray": ["--port=6380", "--dashboardPort=8266", "--clientPort=10002"],
                      "svc": []}  # fmt: skip
    config = plugins_config(stored)
    assert (config.ray_port, config.ray_dashboard_port, config.ray_client_port) == (
        6380, 8266, 10002,
    )  # fmt: skip


def test_ray_starts_the_head_and_points_each_worker_at_it():
    stored = {"ray": [], "svc": []}
    head = pod_additions(stored, RAY_JOB, "head", 0)
    assert head.command_of == (
        "head",
        ("sh", "-c", "ray start --head --block --dashboard-host=0.0.0.0 --port=6379"
                     " --dashboard-port=8265 --ray-client-server-port=10001"),
    )  # fmt: skip
    assert head.ports_of == ("head", (
        {"name": "gcs", "containerPort": 6379},
        {"name": "dashboard", "containerPort": 8265},
        {"name": "client-server", "containerPort": 10001},
    ))  # fmt: skip
    worker = pod_additions(stored, RAY_JOB, "worker", 2)
    assert worker.command_of == (
        "worker", ("sh", "-c", "ray start --block --address=tune-head-0.gp-9:6379"),
    )  # fmt: skip
    assert worker.ports_of is None
    assert worker.hostname == "tune-worker-2"  # svc's names: the head's is resolvable


def test_ray_makes_a_service_of_the_head_pods_ports():
    objects = job_objects(
        {"ray": ["--headContainer=ray-head"], "svc": []},
        RAY_JOB,
        namespace="ns",
        labels={"managed": "true"},
        selector={"job": "9"},
        task_selector=lambda task: {"job": "9", "task": task},
    )
    (ray,) = [o for o in objects if o["metadata"]["name"] == "gp-9-ray"]
    assert ray["kind"] == "Service"
    assert ray["spec"]["selector"] == {"job": "9", "task": "head"}
    assert [(p["name"], p["port"], p["targetPort"]) for p in ray["spec"]["ports"]] == [
        ("gcs", 6379, "gcs"), ("dashboard", 8265, "dashboard"),
        ("client-server", 10001, "client-server"),
    ]  # fmt: skip
    assert "gp-9" in {o["metadata"]["name"] for o in objects if o["kind"] == "Service"}


def test_a_missing_task_is_said_with_the_flag_errors_not_after_they_are_fixed():
    stored, errors = plugins_parse(
        {"ray": ["--head=chief", "--dashboardPort=99999"]}, task_names=["head", "worker"]
    )
    assert stored == {}
    assert errors == {
        "spec.plugins.ray[1]": ["flag --dashboardPort takes a port number (1-65535)"],
        "spec.plugins.ray": ["the ray plugin needs a task named chief (set --head=<task>)"],
    }


WAIT = ["--wait-master-enabled=true", "--wait-master-timeout=600", "--port=29500"]


def test_pytorch_wait_master_gives_each_worker_an_init_container_waiting_for_the_master():
    """pytorch.go:74-85 (flags), 110-120 (workers only) and 173-231 (the init container)."""
    stored, errors = plugins_parse({"pytorch": WAIT}, task_names=["master", "worker"])
    assert errors == {}
    (init,) = pod_additions(stored, JOB, "worker", 1).init_containers
    assert (init["name"], init["image"], init["command"][:2]) == (
        "wait-for-master", WAIT_MASTER_IMAGE, ["sh", "-c"]
    )  # fmt: skip
    script = init["command"][2]
    assert "nc -z ddp-master-0.gp-42 29500" in script
    assert "-ge 600 ]" in script
    assert pod_additions(stored, JOB, "master", 0).init_containers == ()
    assert pod_additions({"pytorch": []}, JOB, "worker", 0).init_containers == ()
    image = plugins_parse({"pytorch": ["--wait-master-enabled", "--wait-master-image=alpine:3"]},
                          task_names=["master", "worker"])[0]  # fmt: skip
    (init,) = pod_additions(image, JOB, "worker", 0).init_containers
    assert init["image"] == "alpine:3"
    assert "-ge 300 ]" in init["command"][2]  # DefaultTimeout


def test_the_wait_for_master_container_goes_after_the_pods_own_unless_it_has_one():
    from jobspec.podspec import with_additions

    additions = pod_additions(plugins_parse({"pytorch": WAIT}, task_names=["master", "worker"])[0],
                              JOB, "worker", 0).as_dict()  # fmt: skip
    body = {"containers": [{"name": "t"}], "initContainers": [{"name": "fetch"}]}
    names = [c["name"] for c in with_additions(body, additions)["initContainers"]]
    assert names == ["fetch", "wait-for-master"]
    own = {"containers": [{"name": "t"}], "initContainers": [{"name": "wait-for-master"}]}
    assert with_additions(own, additions)["initContainers"] == [
        {"name": "wait-for-master", "env": additions["initEnv"],
         "volumeMounts": additions["volumeMounts"]}
    ]  # fmt: skip


TF_JOB = JobShape(job_id=7, name="train-123", tasks=(("ps", 2), ("worker", 2), ("chief", 1)))
TF_CLUSTER = (
    '{"cluster":{"ps":["train-123-ps-0.gp-7:5000","train-123-ps-1.gp-7:5000"],'
    '"worker":["train-123-worker-0.gp-7:5000","train-123-worker-1.gp-7:5000"],'
    '"chief":["train-123-chief-0.gp-7:5000"]},'
)


@pytest.mark.parametrize(("task", "index"), [("ps", 0), ("worker", 1), ("chief", 0)])
def test_tensorflow_gives_every_container_tf_config(task, index):
    """Upstream's tensorflow_test.go TestTensorflow, with the portal's subdomain (gp-<job id>)
    where upstream's is the job's name: Go's compact JSON, the roles in its struct's order
    (ps, worker, chief, evaluator), the pod's role and index (tensorflow.go OnPodCreate,
    generateTFClusterSpec)."""
    stored, errors = plugins_parse({"tensorflow": ["--port=5000"]}, task_names=["ps", "worker"])
    assert errors == {}
    assert stored == {"tensorflow": ["--port=5000"], "svc": []}  # mutate_job.go:244-254
    additions = pod_additions(stored, TF_JOB, task, index)
    expected = TF_CLUSTER + f'"task":{{"type":"{task}","index":{index}}}}}'
    assert _env(additions)["TF_CONFIG"] == expected
    assert "TF_CONFIG" not in {e["name"] for e in additions.init_env}  # containers only


def test_tensorflow_names_the_roles_by_flag_and_leaves_a_one_pod_job_alone():
    """--ps, --worker, --chief, --evaluator name the tasks of each role; a task of no role is
    its own type and in no list; a job of one task and one replica gets no TF_CONFIG."""
    job = JobShape(job_id=3, name="t", tasks=(("server", 1), ("trainer", 2), ("eval", 1)))
    flags = ["--ps=server", "--worker=trainer", "--evaluator=eval", "--port=2222"]
    stored, _ = plugins_parse({"tensorflow": flags}, task_names=["server", "trainer", "eval"])
    config = _env(pod_additions(stored, job, "eval", 0))["TF_CONFIG"]
    assert config == (
        '{"cluster":{"ps":["t-server-0.gp-3:2222"],'
        '"worker":["t-trainer-0.gp-3:2222","t-trainer-1.gp-3:2222"],'
        '"evaluator":["t-eval-0.gp-3:2222"]},"task":{"type":"evaluator","index":0}}'
    )
    other = JobShape(job_id=3, name="t", tasks=(("server", 1), ("loader", 1)))
    assert (
        '"task":{"type":"loader","index":0}'
        in _env(pod_additions(stored, other, "loader", 0))["TF_CONFIG"]
    )
    alone = JobShape(job_id=4, name="solo", tasks=(("worker", 1),))
    assert "TF_CONFIG" not in _env(pod_additions({"tensorflow": []}, alone, "worker", 0))
