"""The names and labels that tie Kubernetes objects back to the portal's jobs: each replica's pod,
each tenant's namespace.

Every object a job has (its owner ConfigMap, its plugins' objects, its pods) is named from the
job's object name, `<prefix>-<job id>`: the prefix `gp-<tag>` carries the portal instance as a
short hash (`instance_tag`), so two instances sharing a namespace, whose job ids overlap,
never ask for the same name. A job keeps the prefix it was given at submission
(`Job.object_prefix`); a job made before names carried the instance has none (empty) and
keeps the names it started with, `gp-<job id>` (`LEGACY_PREFIX`).

Pod names are derived from (object name, task, replica, attempt) only, so a retried or
repeated create of the same replica always targets the same name and the API server's
uniqueness check prevents a second copy. Labels carry the identity for selectors; annotations
carry free text (job names, queue and tenant names) that may not be valid label values.
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


LEGACY_PREFIX = "gp"
_TAG_CHARS = 6
_BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz"


def instance_tag(instance: str) -> str:
    """The instance as 6 characters of a hash (a letter, then base-36 digits): short enough
    for every name to keep its room, and starting with a letter, so `gp-<tag>-<id>` never
    reads as the legacy `gp-<id>` of another job."""
    number = int.from_bytes(hashlib.sha256(instance.encode()).digest()[:8], "big")
    chars = [_BASE36[10 + number % 26]]
    number //= 26
    while len(chars) < _TAG_CHARS:
        number, digit = divmod(number, 36)
        chars.append(_BASE36[digit])
    return "".join(chars)


def object_prefix(instance: str) -> str:
    """The prefix of the names of the jobs `instance` submits (stored on each job)."""
    return f"{LEGACY_PREFIX}-{instance_tag(instance)}"


def job_object_name(job_id: str | int, prefix: str | None) -> str:
    """The job's object name: its owner ConfigMap's and svc Service's, and the start of its
    other objects' and its pods' names. No `prefix` (None or empty): a job from before names
    carried the instance."""
    return f"{prefix or LEGACY_PREFIX}-{job_id}"


def pod_name(
    job_id: str | int, task: str, replica: int, attempt: int = 0, *, prefix: str | None = None
) -> str:
    """The one name a replica's pod may have: deterministic, DNS-1123 label safe, and unique.

    Only ids and the task name (unique within its job) go in, never the job's free-text name:
    with `<job name>-<job id>-<task>-<replica>`, job `p` task `t-10-u` and job `p-9-t` task `u`
    both gave `p-9-t-10-u-0`, and the unique constraint then failed every cycle for everyone.
    A re-placed replica (attempt > 0) gets `-a<attempt>` so its new pod never reuses a name the
    API server may still hold for the old one while it terminates. A name longer than a DNS
    label keeps its start and ends with a hash of what it stands for (the prefix included,
    so two instances' long names differ too)."""
    plain = f"{job_object_name(job_id, prefix)}-{task}-{replica}" + (
        f"-a{attempt}" if attempt else ""
    )
    base = _NOT_NAME_CHARS.sub("-", plain.lower()).strip("-")
    if len(base) <= _POD_NAME_MAX and base == plain:
        return base
    key = f"{job_id}\0{task}\0{replica}" + (f"\0{attempt}" if attempt else "")
    if prefix:  # the legacy names' hashes stand as they were
        key = f"{prefix}\0{key}"
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


def name_holder(labels: Mapping[str, str] | None, instance: str) -> str:
    """Who holds a name the portal asked for, from the holder's labels (None: it could not be
    read), in words that tell no more of another tenant's job than which portal made it."""
    if labels is None:
        return "an object this portal may not read"
    if not is_managed(labels):
        return "an object no portal made"
    holder = labels.get(INSTANCE)
    if holder is None:
        return "a portal's object from before objects carried their instance"
    if holder == label_value(instance):
        return "an object of another job of this portal instance (a database restored from backup?)"
    return f"an object of portal instance {holder}"


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
