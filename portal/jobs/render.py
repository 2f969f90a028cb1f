"""`python -m portal.jobs.render FILE.yaml [--namespace NS | --tenant NAME] [--security-level
LEVEL]`: print, as YAML documents, every Kubernetes object the portal would create for a Volcano
Job manifest (pods without a node, the job's Secret, Service, ConfigMap and NetworkPolicy), or
the errors naming the manifest's fields and exit 1. Offline: no database, no cluster (see portal.jobs.dry_run).
`-` reads stdin. --tenant puts them in that tenant's namespace (a namespace per tenant) and,
in a shared one, checks the names it gives objects against the tenant's prefix. The pods are
checked and rendered at the default pod security level, baseline, unless --security-level
names another (a tenant's level is its admins' to set).
A file of several documents renders each Volcano Job in it, as the upload page submits each,
and names every other kind it skips (a PriorityClass, a Queue, ...); one without a Job exits 1."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TextIO

from jobspec.podsecurity import DEFAULT_LEVEL, LEVELS


def main(
    argv: list[str] | None = None, *, out: TextIO = sys.stdout, err: TextIO = sys.stderr
) -> int:
    parser = argparse.ArgumentParser(prog="python -m portal.jobs.render", description=__doc__)
    parser.add_argument("file", help="a Volcano Job manifest (YAML or JSON); - for stdin")
    into = parser.add_mutually_exclusive_group()
    into.add_argument("--namespace", help="the namespace to render into (default: the portal's)")
    into.add_argument(
        "--tenant", help="the queue's tenant: its namespace, with a namespace per tenant"
    )
    parser.add_argument(
        "--security-level",
        choices=LEVELS,
        default=DEFAULT_LEVEL,
        help=f"the tenant's pod security level (default: {DEFAULT_LEVEL})",
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.local")
    import django  # settings must be chosen before Django loads

    django.setup()
    import yaml

    from jobspec.volcano import documents_split
    from portal.jobs.dry_run import job_render  # needs Django set up

    try:
        text = sys.stdin.read() if args.file == "-" else open(args.file, encoding="utf-8").read()  # noqa: SIM115
        documents = [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        print(f"render: cannot read {args.file}: {error}", file=err)
        return 1
    if not documents:
        print(f"render: {args.file} holds no document", file=err)
        return 1
    split = documents_split(documents)
    for skipped in split.skipped:
        print(f"warning: {skipped}", file=err)
    if not split.jobs:
        print(f"render: {args.file} holds no Volcano Job", file=err)
        return 1
    failed = False
    objects = []
    for number, data in split.jobs:
        where = split.where(number)  # several documents: each is named in what is said of it
        rendered = job_render(
            data,
            namespace=args.namespace,
            tenant_of=lambda _queue: args.tenant,
            security_level=args.security_level,
        )
        for warning in rendered.warnings:
            print(f"warning: {where}{warning}", file=err)
        for path, messages in rendered.errors.items():
            for message in messages:
                print(f"{where}{path}: {message}", file=err)
        failed = failed or bool(rendered.errors)
        objects += rendered.objects
    if failed:
        return 1
    yaml.safe_dump_all(objects, out, sort_keys=False, default_flow_style=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
