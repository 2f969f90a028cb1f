"""The names and labels that tie Kubernetes objects back to the portal's jobs: each replica's pod,
each tenant's namespace.

Pod names are derived from (job id, task, replica, attempt) only, so a retried or repeated
create of the same replica always targets the same name and the API server's uniqueness check
prevents a second copy. Labels carry the identity for selectors; annotations carry free text
(job names, queue and tenant names) that may not be valid label values.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable, Mapping

PREFIX = "gpuportal.io/"
MANAGED = PREFIX + "managed"
JOB_ID = PREFIX + "job-id"
TASK = PREFIX + "task"
REPLICA = PREFIX + "replica"
QUEUE = PREFIX + "queue"
TENANT = PREFIX + "tenant"
JOB_NAME = PREFIX + "job-name"
# Which portal installation owns the object: a portal deletes only its own instance's objects,
# so two portals (or one restored from an old database) sharing a cluster never clean up each
# other's pods. Pods from before the label existed belong to no instance: they are left alone.
INSTANCE = PREFIX + "instance"
DEFAULT_INSTANCE = "gpuportal"
# Marks a job's owner object (cluster.owner), apart from the job's plugin objects.
OWNER = PREFIX + "owner"

MANAGED_SELECTOR = f"{MANAGED}=true"

ReplicaKey = tuple[str, str, str]

_LABEL_VALUE_MAX = 63
_NOT_LABEL_CHARS = re.compile(r"[^A-Za-z0-9._-]+")
_POD_NAME_MAX = 63  # pod names also become hostnames, which are DNS labels
_NOT_NAME_CHARS = re.compile(r"[^a-z0-9-]+")


def pod_name(job_id: str | int, task: str, replica: int, attempt: int = 0) -> str:
    """The one name a replica's pod may have: deterministic, DNS-1123 label safe, and unique.

    Only ids and the task name (unique within its job) go in, never the job's free-text name:
    with `<job name>-<job id>-<task>-<replica>`, job `p` task `t-10-u` and job `p-9-t` task `u`
    both gave `p-9-t-10-u-0`, and the unique constraint then failed every cycle for everyone.
    A re-placed replica (attempt > 0) gets `-a<attempt>` so its new pod never reuses a name the
    API server may still hold for the old one while it terminates."""
    plain = f"gp-{job_id}-{task}-{replica}" + (f"-a{attempt}" if attempt else "")
    base = _NOT_NAME_CHARS.sub("-", plain.lower()).strip("-")
    if len(base) <= _POD_NAME_MAX and base == plain:
        return base
    key = f"{job_id}\0{task}\0{replica}" + (f"\0{attempt}" if attempt else "")
    digest = hashlib.sha256(key.encode()).hexdigest()[:10]
    return f"{base[: _POD_NAME_MAX - 11].rstrip('-')}-{digest}"


def label_value(text: str) -> str:
    """A valid label value for arbitrary text; long or mangled values get a hash suffix so two
    different inputs cannot collapse to the same value."""
    cleaned = _NOT_LABEL_CHARS.sub("-", text).strip("-._")
    if cleaned == text and len(text) <= _LABEL_VALUE_MAX:
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    return f"{cleaned[: _LABEL_VALUE_MAX - 9].rstrip('-._')}-{digest}".lstrip("-")


def replica_labels(
    *,
    job_id: str | int,
    task: str,
    replica: int,
    queue: str,
    tenant: str,
    instance: str = DEFAULT_INSTANCE,
) -> dict[str, str]:
    return {
        MANAGED: "true",
        INSTANCE: label_value(instance),
        JOB_ID: label_value(str(job_id)),
        TASK: label_value(task),
        REPLICA: str(replica),
        QUEUE: label_value(queue),
        TENANT: label_value(tenant),
    }


def replica_annotations(*, job_name: str, queue: str, tenant: str) -> dict[str, str]:
    return {JOB_NAME: job_name, QUEUE: queue, TENANT: tenant}


def replica_key(labels: Mapping[str, str]) -> ReplicaKey | None:
    """(job id, task, replica) from a pod's labels, or None if it does not carry all three."""
    try:
        return (labels[JOB_ID], labels[TASK], labels[REPLICA])
    except KeyError:
        return None


def is_managed(labels: Mapping[str, str]) -> bool:
    return labels.get(MANAGED) == "true"


def owned_selector(instance: str) -> str:
    """The label selector of the objects `instance` owns."""
    return f"{MANAGED_SELECTOR},{INSTANCE}={label_value(instance)}"


def is_owned(labels: Mapping[str, str], instance: str) -> bool:
    """Managed by a portal, and by this instance of it: the only objects it may delete."""
    return is_managed(labels) and labels.get(INSTANCE) == label_value(instance)


def owned_by(instance: str) -> Callable[[Mapping[str, str]], bool]:
    return functools.partial(_owned, label_value(instance))


def _owned(instance_value: str, labels: Mapping[str, str]) -> bool:
    return labels.get(MANAGED) == "true" and labels.get(INSTANCE) == instance_value


_NAMESPACE_MAX = 63  # namespaces are DNS labels
_PREFIX = re.compile(r"^([a-z0-9][-a-z0-9]*)?$")
NAMESPACE_PREFIX_INVALID = (
    "KUBERNETES_NAMESPACE_PREFIX must be empty or lowercase letters, digits and '-', starting "
    "with a letter or digit, at most 40 characters: {prefix!r}"
)


def tenant_namespace(tenant: str, prefix: str) -> str:
    """The namespace of `tenant`'s jobs: `<prefix><tenant>` when that is a DNS label, else its
    first characters and a hash of the tenant's name, so two tenants never share one (tenant
    names are unique DNS labels of up to 63 characters, so the prefix can overflow them)."""
    if len(prefix) > 40 or not _PREFIX.fullmatch(prefix):
        raise ValueError(NAMESPACE_PREFIX_INVALID.format(prefix=prefix))
    plain = f"{prefix}{tenant}"
    base = _NOT_NAME_CHARS.sub("-", plain.lower()).strip("-")
    if len(base) <= _NAMESPACE_MAX and base == plain:
        return base
    digest = hashlib.sha256(tenant.encode()).hexdigest()[:10]
    return f"{base[: _NAMESPACE_MAX - 11].rstrip('-')}-{digest}"
