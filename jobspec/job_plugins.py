"""Volcano job plugins the portal runs: `svc`, `env`, `pytorch`, `tensorflow`, `ssh`, `mpi`
and `ray`. Pure.

Each follows upstream volcano-sh/volcano pkg/controllers/job/plugins (the file and line cited at
each rule), so a training script written for Volcano finds the same variables and files:

- env: `VK_TASK_INDEX` and `VC_TASK_INDEX`, the pod's index within its task, in every container
  and init container (plugins/env/env.go:45-59, const.go).
- svc: a headless Service per job, each pod's `hostname` and `subdomain` set so that
  `<hostname>.<subdomain>` resolves to it, a ConfigMap of host lists mounted at `/etc/volcano`
  (`<task>.host`, one host a line), `VC_<TASK>_HOSTS` (comma-separated) and `VC_<TASK>_NUM` in
  every container from that ConfigMap, and a NetworkPolicy letting only the job's own pods in
  (plugins/svc/svc.go:76-131 OnPodCreate, 133-157 OnJobAdd, 194-217 mountConfigmap, 219-303
  the Service and NetworkPolicy, 309-345 GenerateHosts; const.go). Flags:
  `--publish-not-ready-addresses`, `--disable-network-policy`, `--inject-hosts-env`.
- pytorch: `MASTER_ADDR` (master pod 0's `<hostname>.<subdomain>`), `MASTER_PORT`,
  `WORLD_SIZE` (master + worker replicas) and `RANK` (0 for the master, index + 1 for a worker),
  and the port opened in every container (distributed-framework/pytorch/pytorch.go:91-206).
  Flags: `--master`, `--worker`, `--port`. With `--wait-master-enabled`, each worker pod
  gets an init container `wait-for-master` (image `--wait-master-image`, default
  busybox:1.36.1) that waits until the master's address answers on the port, at most
  `--wait-master-timeout` seconds (default 300; then it fails, and the pod with it), unless
  the pod has an init container of that name already (pytorch.go:74-85 addFlags, 173-231
  generateWaitForMasterScript and addWaitForMasterInitContainer). Like upstream's admission
  webhook (webhooks/admission/jobs/mutate/mutate_job.go:244-254) it turns `svc` on.
- tensorflow: `TF_CONFIG` in every container, Go's compact JSON of the cluster (each role's
  pods as `<hostname>.<subdomain>:<port>`, the roles in upstream's order ps, worker, chief,
  evaluator) and the pod's own task (its role, or its task's name when it has none, and its
  index); none for a job of one task and one replica (distributed-framework/tensorflow/
  tensorflow.go: addFlags, OnPodCreate, generateTFClusterSpec, getTaskType). Flags: `--ps`,
  `--worker`, `--chief`, `--evaluator` (the tasks of each role, named by default as the role),
  `--port` (default 2222). Like upstream's webhook it turns `svc` on (mutate_job.go:244-254).
- ssh: a Secret per job holding an RSA key pair (`id_rsa`, `id_rsa.pub`, `authorized_keys`) and
  an ssh `config` (`StrictHostKeyChecking no`, `UserKnownHostsFile /dev/null`, one `Host` entry
  per pod with its `<hostname>.<subdomain>` and port), mounted in every container and init
  container at `--ssh-key-file-path` (default `/root/.ssh`) through subPath `.ssh`, mode 0600
  there and 0644 at any other path (plugins/ssh/ssh.go:81-125 OnJobAdd/OnJobDelete, 144-200
  mountRsaKey, 202-233 generateRsaKey, 249-286 flags and generateSSHConfig; const.go). Flags:
  `--ssh-key-file-path`, `--ssh-port`.
- mpi: `MPI_HOST` (the worker task's `<hostname>.<subdomain>`, comma-separated) in every
  container and init container of the master task's pods, and the sshd port (`mpijob-port`,
  default 22) opened in every container and init container that lacks it
  (distributed-framework/mpi/mpi.go:66-170). Flags: `--master` (default `master`), `--worker`
  (default `worker`), `--port`. Like upstream's webhook it turns `svc` and `ssh` on
  (mutate_job.go:244-260) and refuses a job without its master task (validate/admit_job.go:
  134-141).
- ray: the head task's head container (`--head`, default `head`; `--headContainer`, default
  `head`) runs `ray start --head --block --dashboard-host=0.0.0.0 --port=<port>
  --dashboard-port=<dashboardPort> --ray-client-server-port=<clientPort>` as `sh -c`, with the
  ports `gcs`, `dashboard` and `client-server` opened where it lacks them; the worker task's
  worker container (`--worker`, `--workerContainer`, default `worker`) runs `ray start --block
  --address=<head pod 0's hostname.subdomain>:<port>`; a Service with the three ports selects
  the head task's pods (distributed-framework/ray/ray.go: addFlags, OnPodCreate,
  openHeadContainerPort, generateHeadAddr, createServiceIfNotExist). Defaults 6379, 8265 and
  10001. Like upstream's webhook it turns `svc` on (mutate_job.go:244-254).

Where the portal departs from upstream, and why:
- Object names are id-based (a job's name is not unique in the namespace, see
  jobspec.labels): the Service (and so the subdomain) and NetworkPolicy are the job's
  object name `gp-<instance tag>-<job id>` (`gp-<job id>` for a job from before names
  carried the instance), the ConfigMap `<object name>-svc`. Host names keep upstream's
  `<job name>-<task>-<index>` (jobhelpers.MakePodName), set explicitly since the pods' own
  names are id-based; a name longer than a DNS label is shortened with a hash.
- A pytorch job without its master task is refused (upstream logs an error and starts the
  pods without the variables, which then cannot rendezvous); so is an unknown flag (upstream
  logs it and ignores it), and a port out of range (upstream's ssh plugin falls back to 22).
  A ray job without its head task is refused too (upstream fails each pod's creation). Other
  plugins (hcclrank, Ascend NPU ranks) are refused naming `spec.plugins.<name>`.
- ray: its Service is `<object name>-ray`. Upstream names it after the job, the name the svc
  plugin's headless Service also takes, so whichever plugin ran first made it and the other's
  was skipped. In a pod the portal builds itself (no pod template), its one container is the
  head or worker container whatever the flags name: the container's name is the portal's, not
  the user's, and a ray job given by its tasks' fields would otherwise start no ray.
- ssh: the key pair is made by the reconcile when it creates the Secret on the cluster
  (scheduler.adapters.cluster.sshkeys), never here: the portal's database and the dry-run
  render only ever hold the Secret with placeholders (`SSH_KEY_PLACEHOLDER`). For the same
  reason upstream's `--ssh-private-key` and `--ssh-public-key` are refused: a key given in the
  job's spec would be stored in plain text with the job and shown on its page. The Secret is
  `<object name>-ssh` (upstream: `<job name>-ssh`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .labels import job_object_name

SVC, ENV, PYTORCH, SSH, MPI, RAY = "svc", "env", "pytorch", "ssh", "mpi", "ray"
TENSORFLOW = "tensorflow"
SUPPORTED = (ENV, MPI, PYTORCH, RAY, SSH, SVC, TENSORFLOW)
HOSTS_MOUNT_PATH = "/etc/volcano"  # svc/const.go ConfigMapMountPath
TASK_INDEX_VARS = ("VK_TASK_INDEX", "VC_TASK_INDEX")  # env/const.go
PYTORCH_PORT_NAME = "pytorchjob-port"  # pytorch.go openContainerPort
PYTORCH_DEFAULT_PORT = 23456
WAIT_MASTER_CONTAINER = "wait-for-master"  # pytorch.go addWaitForMasterInitContainer
WAIT_MASTER_IMAGE = "busybox:1.36.1"  # pytorch.go DefaultWaitMasterImage
WAIT_MASTER_TIMEOUT = 300  # pytorch.go DefaultTimeout, seconds
WAIT_MASTER_TIMEOUT_MAX = 86400
IMAGE_MAX = 500
MPI_PORT_NAME = "mpijob-port"  # mpi.go openContainerPort
MPI_DEFAULT_PORT = 22
MPI_HOST = "MPI_HOST"
TF_CONFIG = "TF_CONFIG"
TF_DEFAULT_PORT = 2222  # tensorflow.go DefaultPort
TF_ROLES = ("ps", "worker", "chief", "evaluator")  # tensorflow.go clusterInfo, in its order
# ray.go: the ports and their names
RAY_PORT, RAY_DASHBOARD_PORT, RAY_CLIENT_PORT = 6379, 8265, 10001
RAY_PORT_NAMES = ("gcs", "dashboard", "client-server")
# ssh/const.go: the Secret's keys, and where they are mounted.
SSH_PRIVATE_KEY, SSH_PUBLIC_KEY = "id_rsa", "id_rsa.pub"
SSH_AUTHORIZED_KEYS, SSH_CONFIG = "authorized_keys", "config"
SSH_KEYS = (SSH_PRIVATE_KEY, SSH_PUBLIC_KEY, SSH_AUTHORIZED_KEYS, SSH_CONFIG)
SSH_DEFAULT_PATH = "/root/.ssh"
SSH_SUB_PATH = ".ssh"
SSH_ROOT_MODE, SSH_OTHER_MODE = 0o600, 0o644  # ssh.go:151 and :176
SSH_DEFAULT_PORT = 22
SSH_KEY_PLACEHOLDER = (
    "(generated on the cluster when the job's pods are created; never stored by the portal)"
)
PATH_MAX = 255
ARGS_MAX = 16

NOT_SUPPORTED = "plugin {name} is not supported; the portal runs: " + ", ".join(SUPPORTED)
NOT_A_MAPPING = "must be a mapping of plugin names to lists of arguments"
NOT_ARGS = "must be a list of arguments (strings)"
UNKNOWN_FLAG = "unknown flag {flag}; {name} takes: {flags}"
BAD_BOOL = "flag {flag} takes true or false"
BAD_PORT = "flag {flag} takes a port number (1-65535)"
BAD_TASK_NAME = "flag {flag} takes a task name"
BAD_CONTAINER_NAME = "flag {flag} takes a container name"
BAD_SECONDS = f"flag {{flag}} takes a number of seconds (0-{WAIT_MASTER_TIMEOUT_MAX})"
BAD_IMAGE = "flag {flag} takes a container image (no spaces, at most 500 characters)"
NO_MASTER_TASK = "the {name} plugin needs a task named {master} (set --{flag}=<task>)"
KEY_IN_SPEC = (
    "flag {flag} is not taken: a key in the job's spec would be stored in plain text with the "
    "job; the portal generates the job's key pair on the cluster instead (leave the flag out)"
)
BAD_PATH = "flag {flag} takes an absolute path without '..' or ':'"
MOUNT_TAKEN = (
    "the {name} plugin mounts {path} in every container (the cluster would refuse the pod); "
    "mount this volume elsewhere"
)

_FLAG = re.compile(r"--?([a-zA-Z][a-zA-Z-]*)(?:=(.*))?", re.S)  # ray's flags are camelCase
_BOOL_FLAGS = {
    SVC: {
        "publish-not-ready-addresses": False,
        "disable-network-policy": False,
        "inject-hosts-env": True,
    },
    ENV: {},
    PYTORCH: {"wait-master-enabled": False},
    SSH: {},
    MPI: {},
    RAY: {},
    TENSORFLOW: {},
}
# Each plugin's value flags -> the Plugins field each sets.
_VALUE_FLAGS: dict[str, dict[str, str]] = {
    SVC: {},
    ENV: {},
    PYTORCH: {
        "master": "master",
        "worker": "worker",
        "port": "port",
        "wait-master-timeout": "wait_master_timeout",
        "wait-master-image": "wait_master_image",
    },
    SSH: {"ssh-key-file-path": "ssh_key_file_path", "ssh-port": "ssh_port"},
    MPI: {"master": "mpi_master", "worker": "mpi_worker", "port": "mpi_port"},
    RAY: {
        "head": "ray_head",
        "headContainer": "ray_head_container",
        "worker": "ray_worker",
        "workerContainer": "ray_worker_container",
        "port": "ray_port",
        "dashboardPort": "ray_dashboard_port",
        "clientPort": "ray_client_port",
    },
    TENSORFLOW: {
        "ps": "tf_ps",
        "worker": "tf_worker",
        "chief": "tf_chief",
        "evaluator": "tf_evaluator",
        "port": "tf_port",
    },
}
_PORT_FLAGS = {"port", "ssh-port", "dashboardPort", "clientPort"}
_SECONDS_FLAGS = {"wait-master-timeout"}
_IMAGE_FLAGS = {"wait-master-image"}
_REFUSED_FLAGS = {SSH: {"ssh-private-key", "ssh-public-key"}}


@dataclass(frozen=True)
class JobShape:
    """What the plugins read of a job: its id and name, its tasks' names and replicas in the
    job's order, and the prefix of its objects' names (jobspec.labels; none: a job from
    before names carried the instance)."""

    job_id: int | str
    name: str
    tasks: Sequence[tuple[str, int]]
    prefix: str | None = None

    @property
    def object_name(self) -> str:
        return job_object_name(self.job_id, self.prefix)


@dataclass(frozen=True)
class Plugins:
    svc: bool = False
    env: bool = False
    pytorch: bool = False
    ssh: bool = False
    mpi: bool = False
    publish_not_ready_addresses: bool = False
    network_policy: bool = True
    inject_hosts_env: bool = True
    master: str = "master"
    worker: str = "worker"
    port: int = PYTORCH_DEFAULT_PORT
    wait_master_enabled: bool = False
    wait_master_timeout: int = WAIT_MASTER_TIMEOUT
    wait_master_image: str = WAIT_MASTER_IMAGE
    ssh_key_file_path: str = SSH_DEFAULT_PATH
    ssh_port: int = SSH_DEFAULT_PORT
    mpi_master: str = "master"
    mpi_worker: str = "worker"
    mpi_port: int = MPI_DEFAULT_PORT
    ray: bool = False
    ray_head: str = "head"
    ray_head_container: str = "head"
    ray_worker: str = "worker"
    ray_worker_container: str = "worker"
    ray_port: int = RAY_PORT
    ray_dashboard_port: int = RAY_DASHBOARD_PORT
    ray_client_port: int = RAY_CLIENT_PORT
    tensorflow: bool = False
    tf_ps: str = "ps"
    tf_worker: str = "worker"
    tf_chief: str = "chief"
    tf_evaluator: str = "evaluator"
    tf_port: int = TF_DEFAULT_PORT


def plugins_parse(
    raw: Any, *, task_names: Sequence[str], path: str = "spec.plugins"
) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Check a job's `plugins` mapping; (the mapping to store, errors keyed by path). The stored
    mapping has `svc` added when `pytorch`, `tensorflow`, `mpi` or `ray` needs it, and `ssh` when
    `mpi` does."""
    errors: dict[str, list[str]] = {}
    if raw is None or raw == {}:
        return {}, errors
    if not isinstance(raw, dict):
        return {}, {path: [NOT_A_MAPPING]}
    stored: dict[str, list[str]] = {}
    valid: dict[str, list[str]] = {}  # the flags without an error, for the task checks below
    for name, args in raw.items():
        ppath = f"{path}.{name}"
        if name not in SUPPORTED:
            errors.setdefault(ppath, []).append(NOT_SUPPORTED.format(name=name))
            continue
        args = [] if args is None else args
        if (
            not isinstance(args, list)
            or not all(isinstance(a, str) for a in args)
            or len(args) > ARGS_MAX
        ):
            errors.setdefault(ppath, []).append(NOT_ARGS)
            continue
        valid[name] = []
        for index, arg in enumerate(args):
            if message := _flag_error(name, arg):
                errors.setdefault(f"{ppath}[{index}]", []).append(message)
            else:
                valid[name].append(arg)
        stored[name] = list(args)
    # Each task a plugin names must exist: said with any flag's error, not after it is fixed.
    config = plugins_config(valid)
    for name, master, flag in (
        (PYTORCH, config.master, "master"),
        (MPI, config.mpi_master, "master"),
        (RAY, config.ray_head, "head"),
    ):
        if name in valid and master not in task_names:
            errors.setdefault(f"{path}.{name}", []).append(
                NO_MASTER_TASK.format(name=name, master=master, flag=flag)
            )
    if PYTORCH in stored or TENSORFLOW in stored or MPI in stored or RAY in stored:
        stored.setdefault(SVC, [])
    if MPI in stored:
        stored.setdefault(SSH, [])
    return (stored if not errors else {}), errors


def plugin_mount_errors(
    stored: Mapping[str, Sequence[str]], templates: Sequence[Any], *, path: str = "tasks"
) -> dict[str, list[str]]:
    """A template's own volume mount at a path a plugin mounts (svc's /etc/volcano, ssh's key
    path): keyed `<path>[i].pod_template.spec.<containers>[j].volumeMounts[k].mountPath`.
    `templates` are the tasks' pod templates in order (None for a task without one)."""
    config = plugins_config(stored)
    taken = {HOSTS_MOUNT_PATH: SVC} if config.svc else {}
    if config.ssh:
        taken[config.ssh_key_file_path.rstrip("/")] = SSH
    errors: dict[str, list[str]] = {}
    for i, template in enumerate(templates):
        spec = template.get("spec") if isinstance(template, dict) else None
        for section in ("containers", "initContainers"):
            containers = spec.get(section) if isinstance(spec, dict) else None
            for j, container in enumerate(containers if isinstance(containers, list) else []):
                mounts = container.get("volumeMounts") if isinstance(container, dict) else None
                for k, mount in enumerate(mounts if isinstance(mounts, list) else []):
                    mount_path = mount.get("mountPath") if isinstance(mount, dict) else None
                    if isinstance(mount_path, str) and mount_path.rstrip("/") in taken:
                        key = f"{path}[{i}].pod_template.spec.{section}[{j}].volumeMounts[{k}]"
                        errors[f"{key}.mountPath"] = [
                            MOUNT_TAKEN.format(name=taken[mount_path.rstrip("/")], path=mount_path)
                        ]
    return errors


def _flag_error(plugin: str, arg: str) -> str | None:
    match = _FLAG.fullmatch(arg)
    flags = sorted({*_BOOL_FLAGS[plugin], *_VALUE_FLAGS[plugin]})
    known = ", ".join(f"--{flag}" for flag in flags) or "no flags"
    if match is None:
        return UNKNOWN_FLAG.format(flag=arg[:40], name=plugin, flags=known)
    flag, value = match.groups()
    if flag in _BOOL_FLAGS[plugin]:
        if value is not None and value.lower() not in ("true", "false", "1", "0"):
            return BAD_BOOL.format(flag=f"--{flag}")
        return None
    if flag in _REFUSED_FLAGS.get(plugin, ()):
        return KEY_IN_SPEC.format(flag=f"--{flag}")
    if flag not in _VALUE_FLAGS[plugin]:
        return UNKNOWN_FLAG.format(flag=f"--{flag}", name=plugin, flags=known)
    return _value_error(flag, value)


def _value_error(flag: str, value: str | None) -> str | None:
    if flag in _PORT_FLAGS:
        if value is None or not value.isdigit() or not 1 <= int(value) <= 65535:
            return BAD_PORT.format(flag=f"--{flag}")
        return None
    if flag in _SECONDS_FLAGS:
        if value is None or not value.isdigit() or int(value) > WAIT_MASTER_TIMEOUT_MAX:
            return BAD_SECONDS.format(flag=f"--{flag}")
        return None
    if flag in _IMAGE_FLAGS:
        if not value or len(value) > IMAGE_MAX or not value.isprintable() or " " in value:
            return BAD_IMAGE.format(flag=f"--{flag}")
        return None
    if flag == "ssh-key-file-path":
        parts = (value or "").split("/")
        if (
            not value
            or not value.startswith("/")
            or len(value) > PATH_MAX
            or ".." in parts
            or not value.isprintable()
            or ":" in value
        ):
            return BAD_PATH.format(flag=f"--{flag}")
        return None
    if not value or not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", value):
        what = BAD_CONTAINER_NAME if flag.endswith("Container") else BAD_TASK_NAME
        return what.format(flag=f"--{flag}")
    return None


def plugins_config(stored: Mapping[str, Sequence[str]]) -> Plugins:
    """The checked mapping (plugins_parse) as settings; flags as Go's flag package reads them."""
    values: dict[str, Any] = {name: True for name in stored if name in SUPPORTED}
    for name, args in stored.items():
        for arg in args:
            match = _FLAG.fullmatch(arg)
            if match is None:
                continue
            flag, value = match.groups()
            field = _VALUE_FLAGS.get(name, {}).get(flag)
            if flag in _BOOL_FLAGS.get(name, {}):
                values[flag.replace("-", "_")] = value is None or value.lower() in ("true", "1")
            elif field and value and flag in _PORT_FLAGS | _SECONDS_FLAGS:
                values[field] = int(value)
            elif field and value:
                values[field] = value
    if "disable_network_policy" in values:
        values["network_policy"] = not values.pop("disable_network_policy")
    return Plugins(**values)


# Each takes the job's object name (JobShape.object_name, jobspec.labels.job_object_name).


def service_name(object_name: str) -> str:
    return object_name


def hosts_config_map_name(object_name: str) -> str:
    return f"{object_name}-svc"  # upstream: <job name>-svc (svc.go cmName)


def ssh_secret_name(object_name: str) -> str:
    return f"{object_name}-ssh"  # upstream: <job name>-ssh (ssh.go secretName)


def ray_service_name(object_name: str) -> str:
    return f"{object_name}-ray"  # upstream: <job name>, the svc plugin's Service's name too


def hostname(job_name: str, task: str, index: int) -> str:
    """Upstream's pod name `<job>-<task>-<index>` (helpers.MakePodName) as the pod's host name;
    shortened with a hash of the three when longer than a DNS label."""
    plain = f"{job_name}-{task}-{index}"
    if len(plain) <= 63:
        return plain
    digest = hashlib.sha256(f"{job_name}\0{task}\0{index}".encode()).hexdigest()[:10]
    tail = f"-{task}-{index}"[-40:]
    return f"{job_name[: 63 - len(tail) - 11].rstrip('-')}-{digest}{tail}".lstrip("-")


def _env_key(task: str) -> str:
    return task.replace("-", "_").upper()  # svc.go:104 and :331


def hosts_data(job: JobShape) -> dict[str, str]:
    """The ConfigMap data: GenerateHosts (svc.go:309-345) with the portal's host names."""
    data: dict[str, str] = {}
    subdomain = service_name(job.object_name)
    for task, replicas in job.tasks:
        hosts = [f"{hostname(job.name, task, i)}.{subdomain}" for i in range(replicas)]
        key = task.replace("-", "_")
        data[f"{key}.host"] = "\n".join(hosts)
        data[f"VC_{_env_key(task)}_HOSTS"] = ",".join(hosts)
        data[f"VC_{_env_key(task)}_NUM"] = str(len(hosts))
    return data


def _task_hosts(job: JobShape, task: str) -> list[str]:
    """Every pod of `task` as `<hostname>.<subdomain>` (the svc plugin's names)."""
    replicas = dict(job.tasks).get(task, 0)
    subdomain = service_name(job.object_name)
    return [f"{hostname(job.name, task, i)}.{subdomain}" for i in range(replicas)]


def ssh_config(job: JobShape, port: int) -> str:
    """The Secret's `config`: generateSSHConfig (ssh.go:262-286) with the portal's host names,
    so `ssh <job>-<task>-<index>` reaches that pod."""
    lines = ["StrictHostKeyChecking no", "UserKnownHostsFile /dev/null"]
    for task, _ in job.tasks:
        for host in _task_hosts(job, task):
            lines += [f"Host {host.split('.')[0]}", f"  HostName {host}", f"  Port {port}"]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class PodAdditions:
    """What the plugins add to one pod, in Kubernetes' wire shape."""

    env: tuple[dict[str, Any], ...] = ()  # to every container
    init_env: tuple[dict[str, Any], ...] = ()  # to every init container
    volumes: tuple[dict[str, Any], ...] = ()
    mounts: tuple[dict[str, Any], ...] = ()  # to every container and init container
    ports: tuple[dict[str, Any], ...] = ()  # to every container that lacks the port
    init_ports: tuple[dict[str, Any], ...] = ()  # to every init container that lacks it
    hostname: str = ""
    subdomain: str = ""
    # ray: the command of one container, by name, and ports opened in it where it lacks them
    command_of: tuple[str, tuple[str, ...]] | None = None
    ports_of: tuple[str, tuple[dict[str, Any], ...]] | None = None
    # init containers added after the pod's own, unless it has one of the same name
    init_containers: tuple[dict[str, Any], ...] = ()

    def as_dict(self) -> dict[str, Any]:
        out = {
            "env": list(self.env),
            "initEnv": list(self.init_env),
            "volumes": list(self.volumes),
            "volumeMounts": list(self.mounts),
            "ports": list(self.ports),
            "initPorts": list(self.init_ports),
            "hostname": self.hostname,
            "subdomain": self.subdomain,
        }
        if self.command_of is not None:
            out["commandOf"] = {"container": self.command_of[0], "command": [*self.command_of[1]]}
        if self.ports_of is not None:
            out["portsOf"] = {"container": self.ports_of[0], "ports": list(self.ports_of[1])}
        if self.init_containers:
            out["initContainers"] = list(self.init_containers)
        return out


def pod_additions(
    stored: Mapping[str, Sequence[str]], job: JobShape, task: str, index: int
) -> PodAdditions:
    config = plugins_config(stored)
    env: list[dict[str, Any]] = []
    init_env: list[dict[str, Any]] = []
    volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    ports: list[dict[str, Any]] = []
    init_ports: list[dict[str, Any]] = []
    init_containers: list[dict[str, Any]] = []
    host = subdomain = ""
    if config.env:
        index_env = [{"name": name, "value": str(index)} for name in TASK_INDEX_VARS]
        env += index_env
        init_env += index_env
    if config.svc:
        host, subdomain = hostname(job.name, task, index), service_name(job.object_name)
        config_map = hosts_config_map_name(job.object_name)
        if config.inject_hosts_env:
            for name, _ in job.tasks:
                for suffix in ("HOSTS", "NUM"):
                    key = f"VC_{_env_key(name)}_{suffix}"
                    ref = {"configMapKeyRef": {"name": config_map, "key": key}}
                    env.append({"name": key, "valueFrom": ref})
                    init_env.append({"name": key, "valueFrom": ref})
        volumes.append({"name": config_map, "configMap": {"name": config_map}})
        mounts.append({"name": config_map, "mountPath": HOSTS_MOUNT_PATH})
    if config.pytorch:
        replicas = dict(job.tasks)
        if config.master in replicas:
            master = f"{hostname(job.name, config.master, 0)}.{service_name(job.object_name)}"
            world = replicas.get(config.master, 0) + replicas.get(config.worker, 0)
            env += [
                {"name": "MASTER_ADDR", "value": master},
                {"name": "MASTER_PORT", "value": str(config.port)},
                {"name": "WORLD_SIZE", "value": str(world)},
            ]
            if task == config.worker:
                env.append({"name": "RANK", "value": str(index + 1)})
                if config.wait_master_enabled:
                    init_containers.append(_wait_for_master(config, master))
            elif task == config.master:
                env.append({"name": "RANK", "value": "0"})
            ports.append({"name": PYTORCH_PORT_NAME, "containerPort": config.port})
    env += _tf_env(config, job, task, index)
    if config.ssh:
        secret = ssh_secret_name(job.object_name)
        volumes.append(
            {
                "name": secret,
                "secret": {
                    "secretName": secret,
                    "items": [{"key": key, "path": f"{SSH_SUB_PATH}/{key}"} for key in SSH_KEYS],
                    "defaultMode": (
                        SSH_ROOT_MODE
                        if config.ssh_key_file_path == SSH_DEFAULT_PATH
                        else SSH_OTHER_MODE
                    ),
                },
            }
        )
        mounts.append(
            {"name": secret, "mountPath": config.ssh_key_file_path, "subPath": SSH_SUB_PATH}
        )
    if config.mpi:
        workers = dict(job.tasks)
        is_master = task == config.mpi_master
        # mpi.go:84-88: a master pod of a job without the worker task gets nothing, not even
        # the port (upstream returns before opening it); followed as is.
        if not is_master or config.mpi_worker in workers:
            port = {"name": MPI_PORT_NAME, "containerPort": config.mpi_port}
            ports.append(port)
            init_ports.append(port)
        if is_master and config.mpi_worker in workers:
            mpi_host = {"name": MPI_HOST, "value": ",".join(_task_hosts(job, config.mpi_worker))}
            env.append(mpi_host)
            init_env.append(mpi_host)
    command_of, ports_of = _ray_additions(config, job, task) if config.ray else (None, None)
    return PodAdditions(
        env=tuple(env),
        init_env=tuple(init_env),
        volumes=tuple(volumes),
        mounts=tuple(mounts),
        ports=tuple(ports),
        init_ports=tuple(init_ports),
        hostname=host,
        subdomain=subdomain,
        command_of=command_of,
        ports_of=ports_of,
        init_containers=tuple(init_containers),
    )


def _tf_env(config: Plugins, job: JobShape, task: str, index: int) -> list[dict[str, Any]]:
    """The tensorflow plugin's TF_CONFIG as upstream marshals it; none without the plugin or
    for a job of one pod (OnPodCreate). A task named by two role flags is in the cluster under
    the first of ps, worker, chief, evaluator (generateTFClusterSpec's switch) and its type is
    the first of chief, worker, ps, evaluator (getTaskType's); a task of no role is in no
    list, its type its own name."""
    if not config.tensorflow or (len(job.tasks) == 1 and job.tasks[0][1] == 1):
        return []
    names = {
        "ps": config.tf_ps,
        "worker": config.tf_worker,
        "chief": config.tf_chief,
        "evaluator": config.tf_evaluator,
    }
    cluster: dict[str, list[str]] = {}
    for name, _ in job.tasks:
        role = next((r for r in TF_ROLES if names[r] == name), None)
        if role is not None:
            cluster[role] = [f"{host}:{config.tf_port}" for host in _task_hosts(job, name)]
    kind = next((r for r in ("chief", "worker", "ps", "evaluator") if names[r] == task), task)
    spec = {
        "cluster": {role: cluster[role] for role in TF_ROLES if cluster.get(role)},
        "task": {"type": kind, "index": index},
    }
    return [{"name": TF_CONFIG, "value": json.dumps(spec, separators=(",", ":"))}]


def _wait_for_master(config: Plugins, master: str) -> dict[str, Any]:
    """The worker's init container that waits for the master (pytorch.go:173-231): it polls
    `master:port` every 2 s with nc, or the shell's /dev/tcp where the image has no nc, and
    gives up after the timeout, failing the pod."""
    port, timeout = config.port, config.wait_master_timeout
    script = "\n".join(
        [
            f'echo "waiting for the master {master}:{port}, at most {timeout} s"',
            "waited=0",
            f"until {{ nc -z {master} {port} || echo > /dev/tcp/{master}/{port}; }} 2>/dev/null; do",
            f'  if [ "$waited" -ge {timeout} ]; then',
            f'    echo "the master did not answer within {timeout} s"',
            "    exit 1",
            "  fi",
            "  sleep 2",
            "  waited=$((waited + 2))",
            "done",
            'echo "the master answers"',
        ]
    )
    return {
        "name": WAIT_MASTER_CONTAINER,
        "image": config.wait_master_image,
        "command": ["sh", "-c", script],
    }


def _ray_additions(
    config: Plugins, job: JobShape, task: str
) -> tuple[tuple[str, tuple[str, ...]] | None, tuple[str, tuple[dict[str, Any], ...]] | None]:
    """ray.go OnPodCreate: the head's command and ports, a worker's command."""
    if config.ray_head not in dict(job.tasks):
        return None, None  # refused at submission; a job stored before cannot start ray
    if task == config.ray_head:
        start = (
            f"ray start --head --block --dashboard-host=0.0.0.0 --port={config.ray_port}"
            f" --dashboard-port={config.ray_dashboard_port}"
            f" --ray-client-server-port={config.ray_client_port}"
        )
        numbers = (config.ray_port, config.ray_dashboard_port, config.ray_client_port)
        opened = tuple(
            {"name": name, "containerPort": number}
            for name, number in zip(RAY_PORT_NAMES, numbers, strict=True)
        )
        return (config.ray_head_container, ("sh", "-c", start)), (config.ray_head_container, opened)
    if task == config.ray_worker:
        head = f"{hostname(job.name, config.ray_head, 0)}.{service_name(job.object_name)}"
        start = f"ray start --block --address={head}:{config.ray_port}"
        return (config.ray_worker_container, ("sh", "-c", start)), None
    return None, None


def job_objects(
    stored: Mapping[str, Sequence[str]],
    job: JobShape,
    *,
    namespace: str,
    labels: Mapping[str, str],
    selector: Mapping[str, str],
    task_selector: Callable[[str], Mapping[str, str]] | None = None,
) -> list[dict[str, Any]]:
    """The objects a job needs besides its pods (the svc, ssh and ray plugins'), in the order
    to create them. `labels` mark them as the portal's; `selector` picks the job's pods, and
    `task_selector(task)` one task's (needed with ray). The ssh Secret holds
    `SSH_KEY_PLACEHOLDER` where its keys go: the reconcile generates them."""
    config = plugins_config(stored)

    def meta(name: str) -> dict[str, Any]:
        return {"name": name, "namespace": namespace, "labels": dict(labels)}

    objects: list[dict[str, Any]] = []
    if config.ssh:
        keys = (SSH_PRIVATE_KEY, SSH_PUBLIC_KEY, SSH_AUTHORIZED_KEYS)
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": meta(ssh_secret_name(job.object_name)),
                "type": "Opaque",
                "stringData": {
                    **dict.fromkeys(keys, SSH_KEY_PLACEHOLDER),
                    SSH_CONFIG: ssh_config(job, config.ssh_port),
                },
            }
        )
    if not config.svc:
        return objects
    objects += [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": meta(hosts_config_map_name(job.object_name)),
            "data": hosts_data(job),
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": meta(service_name(job.object_name)),
            "spec": {
                "clusterIP": "None",
                "selector": dict(selector),
                "publishNotReadyAddresses": config.publish_not_ready_addresses,
            },
        },
    ]
    if config.network_policy:
        objects.append(
            {
                "apiVersion": "networking.k8s.io/v1",
                "kind": "NetworkPolicy",
                "metadata": meta(service_name(job.object_name)),
                "spec": {
                    "podSelector": {"matchLabels": dict(selector)},
                    "ingress": [{"from": [{"podSelector": {"matchLabels": dict(selector)}}]}],
                    "policyTypes": ["Ingress"],
                },
            }
        )
    if config.ray and task_selector is not None:
        numbers = (config.ray_port, config.ray_dashboard_port, config.ray_client_port)
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": meta(ray_service_name(job.object_name)),
                "spec": {
                    "selector": dict(task_selector(config.ray_head)),
                    "ports": [
                        {"name": name, "port": number, "targetPort": name, "protocol": "TCP"}
                        for name, number in zip(RAY_PORT_NAMES, numbers, strict=True)
                    ],
                },
            }
        )
    return objects
