"""Names of the objects a placement becomes on a cluster.

Pod names are derived from (job id, task, replica, attempt) only, so a retried or repeated
create of the same replica always targets the same name and the API server's uniqueness check
prevents a second copy.
"""

from __future__ import annotations

import hashlib
import re

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
