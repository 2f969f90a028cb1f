"""`python -m portal.cluster.rbac_for_tenant TENANT [TENANT ...] | --all`: print, as YAML, the
Namespace, Roles and RoleBindings a cluster admin applies for each tenant's jobs namespace
(deploy/tenant-namespace.yaml with the name the portal uses filled in), ready for
`kubectl apply -f -`. Reads the tenants and the namespace settings; touches no cluster."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TextIO

TEMPLATE = Path(__file__).resolve().parents[2] / "deploy" / "tenant-namespace.yaml"
PLACEHOLDER = "NAMESPACE"


def tenant_manifests(namespace: str) -> list[dict]:
    """The template's documents for `namespace`."""
    import yaml

    documents = [doc for doc in yaml.safe_load_all(TEMPLATE.read_text()) if doc]
    for doc in documents:
        meta = doc["metadata"]
        if doc["kind"] == "Namespace":
            meta["name"] = namespace
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

    from portal.cluster.namespaces import job_namespace
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
    documents = []
    for namespace in sorted({job_namespace(name) for name in names}):
        documents += tenant_manifests(namespace)
    yaml.safe_dump_all(documents, out, sort_keys=False, default_flow_style=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
