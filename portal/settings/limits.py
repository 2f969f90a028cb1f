"""Job limits an operator may tune (imported at the end of base.py).

Read by `portal.jobs.limits`; `jobspec.limits` holds the rules every submission (form, API,
Volcano upload, CLI) is checked by against them; docs/api.md states them.
"""

import os


def _int(name: str, default: int) -> int:
    return int(os.environ.get(name, str(default)))


# Per pod (one replica of a task).
JOB_MAX_GPUS_PER_POD = _int("JOB_MAX_GPUS_PER_POD", 64)
JOB_MAX_CPU_MILLIS_PER_POD = _int("JOB_MAX_CPU_MILLIS_PER_POD", 1024 * 1000)  # 1,024 cores
JOB_MAX_MEMORY_BYTES_PER_POD = _int("JOB_MAX_MEMORY_BYTES_PER_POD", 16 * 1024**4)  # 16 TiB
# Per job: the cycle's cost grows with the pods it has to place.
JOB_MAX_TASKS = _int("JOB_MAX_TASKS", 16)
JOB_MAX_REPLICAS_PER_TASK = _int("JOB_MAX_REPLICAS_PER_TASK", 1024)
JOB_MAX_REPLICAS_PER_JOB = _int("JOB_MAX_REPLICAS_PER_JOB", 2048)
# Per tenant: pods waiting for a node, all its jobs together, so one tenant cannot make every
# tenant's cycle slow.
JOB_MAX_PENDING_PODS_PER_TENANT = _int("JOB_MAX_PENDING_PODS_PER_TENANT", 5000)
# Sizes of what a pod carries (the command with its arguments, the environment).
JOB_MAX_COMMAND_ITEMS = _int("JOB_MAX_COMMAND_ITEMS", 256)
JOB_MAX_COMMAND_CHARS = _int("JOB_MAX_COMMAND_CHARS", 16 * 1024)
JOB_MAX_ENV_VARS = _int("JOB_MAX_ENV_VARS", 128)
JOB_MAX_ENV_CHARS = _int("JOB_MAX_ENV_CHARS", 32 * 1024)

# Whether a job's pod template may mount a directory of the node (hostPath volume). Off: a
# tenant's pod could otherwise read or write any file of the node it lands on. On, it is
# honoured only for tenants whose pod security level is privileged (jobspec.podsecurity).
JOB_ALLOW_HOST_PATH = os.environ.get("JOB_ALLOW_HOST_PATH", "").lower() in ("1", "true", "yes")
# Annotation keys (or prefixes ending in "/") under kubernetes.io and k8s.io that a job's pod
# template may set, comma-separated, e.g. kubectl.kubernetes.io/default-container. Keys under
# hami.io, volcano.sh and gpuportal.io are never a template's (jobspec.tenancy).
JOB_ANNOTATIONS_ALLOWED = tuple(
    item.strip()
    for item in os.environ.get("JOB_ANNOTATIONS_ALLOWED", "").split(",")
    if item.strip()
)
