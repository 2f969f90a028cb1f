"""CPU of the cycle's node sync (nodes_sync + the seen mark) at thousands of nodes, with and
without the per-backend memo of what was last synced.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/portal_bench \\
        .venv/bin/python -m bench.node_sync --nodes 5000 --changed 5

Empties the database's node table, syncs --nodes observed nodes once, then times --rounds
syncs of the same nodes ("steady") and of nodes where --changed of them report a different
usage ("changed"), each with and without the memo. Prints one JSON line per case (median
wall and CPU milliseconds).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

GiB = 1024**3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--changed", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.local")
    os.environ.setdefault("DJANGO_DEBUG", "false")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import transaction
    from django.utils import timezone

    from portal.cluster.models import Node
    from portal.cluster.services import node_seen_mark
    from scheduler.adapters.cluster.base import ObservedNode
    from scheduler.adapters.cluster.node_sync import NodeSyncMemo, nodes_sync

    call_command("migrate", verbosity=0)
    Node.objects.all().delete()

    def observed(round_: int) -> list[ObservedNode]:
        changed = {(round_ * 7919 + i * 104729) % args.nodes for i in range(args.changed)}
        return [
            ObservedNode(
                name=f"node-{i:05d}",
                allocatable={"cpu": 96000, "memory": 1024 * GiB, "nvidia.com/gpu": 8, "pods": 250},
                labels={"topology.kubernetes.io/zone": f"rack-{i // 32}"},
                used_by_others={"cpu": 2000 + (round_ if i in changed else 0), "pods": 20},
            )
            for i in range(args.nodes)
        ]

    def sync(nodes: list[ObservedNode], memo: NodeSyncMemo | None) -> tuple[float, float]:
        wall, cpu = time.perf_counter(), time.process_time()
        with transaction.atomic():
            nodes_sync(nodes, memo=memo)
            node_seen_mark(in_cluster=True, at=timezone.now())
        return (time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000

    for memo in (None, NodeSyncMemo()):
        sync(observed(0), memo)
        for case in ("steady", "changed"):
            times = []
            for round_ in range(1, args.rounds + 1):
                nodes = observed(0 if case == "steady" else round_)
                times.append(sync(nodes, memo))
            print(
                json.dumps(
                    {
                        "nodes": args.nodes,
                        "case": case,
                        "changed": 0 if case == "steady" else args.changed,
                        "memo": memo is not None,
                        "wall_ms": round(statistics.median(t[0] for t in times), 1),
                        "cpu_ms": round(statistics.median(t[1] for t in times), 1),
                    }
                ),
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
