"""`python -m portal.cluster.rbac_for_tenant TENANT [TENANT ...] | --all`: print, as YAML, the
Namespace, Roles and RoleBindings a cluster admin applies for each tenant's jobs namespace
(deploy/tenant-namespace.yaml with the name the portal uses and the tenant's pod security level
filled in: the namespace's `pod-security.kubernetes.io/enforce` label), ready for
`kubectl apply -f -`. Reads the tenants and the namespace settings; touches no cluster. Rerun it
when a tenant's level changes."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TextIO

from jobspec.podsecurity import DEFAULT_LEVEL

TEMPLATE = Path(__file__).resolve().parents[2] / "deploy" / "tenant-namespace.yaml"
PLACEHOLDER = "NAMESPACE"
LEVEL_PLACEHOLDER = "LEVEL"


def tenant_manifests(namespace: str, level: str = DEFAULT_LEVEL) -> list[dict]:
    """The template's documents for `namespace`, enforcing pod security level `level`."""
    import yaml

    documents = [doc for doc in yaml.safe_load_all(TEMPLATE.read_text()) if doc]
    for doc in documents:
        meta = doc["metadata"]
        if doc["kind"] == "Namespace":
            meta["name"] = namespace
            labels = meta["labels"]
            labels.update({k: level for k, v in labels.items() if v == LEVEL_PLACEHOLDER})
        else:
            meta["namespace"] = namespace
    return documents


def main(
    argv: list[str] | None = None, *, out: TextIO = sys.stdout, err: TextIO = sys.stderr
) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m portal.cluster.rbac_for_tenant", description=__doc__
    )
    parser.add_argument("tenants", nargs="*", help="tenant names")
    parser.add_argument("--all", action="store_true", help="every tenant")
    args = parser.parse_args(argv)
    if bool(args.tenants) == args.all:
        parser.error("name one or more tenants, or --all")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.local")
    import django  # settings must be chosen before Django loads

    django.setup()
    import yaml
    from django.conf import settings

    from portal.cluster.namespaces import job_namespace, namespace_levels
    from portal.tenants.models import Tenant

    known = set(Tenant.objects.values_list("name", flat=True))
    names = sorted(known) if args.all else args.tenants
    unknown = [name for name in names if name not in known]
    if unknown:
        print(f"rbac_for_tenant: no tenant named {', '.join(unknown)}", file=err)
        return 1
    if not settings.KUBERNETES_NAMESPACE_PER_TENANT:
        print(
            "rbac_for_tenant: KUBERNETES_NAMESPACE_PER_TENANT is off: every tenant's jobs run in "
            f"{settings.KUBERNETES_NAMESPACE}, which deploy/rbac.yaml sets up",
            file=err,
        )
    levels = namespace_levels()
    documents = []
    for namespace in sorted({job_namespace(name) for name in names}):
        level, _whose = levels.get(namespace, (DEFAULT_LEVEL, ""))
        documents += tenant_manifests(namespace, level)
    yaml.safe_dump_all(documents, out, sort_keys=False, default_flow_style=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
