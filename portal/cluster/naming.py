"""The namespace a tenant's jobs run in on a cluster (pods are named by jobspec.labels)."""

from __future__ import annotations

import hashlib
import re

_NOT_NAME_CHARS = re.compile(r"[^a-z0-9-]+")
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
