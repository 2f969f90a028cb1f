"""Memory the watch cache keeps for a cluster's pods, measured with tracemalloc.

    .venv/bin/python -m bench.cache_memory --nodes 5000 --foreign-pods 100000 --own-pods 600

Feeds the cache's list step the same objects the emulated API server serves (DaemonSet-like
pods of other workloads, portal pods), drops the list, and prints what stays allocated: the
cache's retained size, without the transient peak of decoding that RSS figures include.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tracemalloc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--foreign-pods", type=int, default=100000)
    parser.add_argument("--own-pods", type=int, default=600)
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.local")

    from kubernetes import client

    from jobspec import labels
    from scheduler.adapters.cluster.testing.emulator import foreign_pod_object, node_object
    from scheduler.adapters.cluster.watch_cache import ClusterCache, manifests_translation

    def raw_pods():
        for index in range(args.foreign_pods):
            pod = foreign_pod_object(index, f"node-{index % args.nodes:05d}")
            pod["metadata"]["resourceVersion"] = str(index + 1)
            yield pod
        for index in range(args.own_pods):
            pod = foreign_pod_object(index, f"node-{index % args.nodes:05d}", namespace="gpu-jobs")
            pod["metadata"]["name"] = f"gp-{index}-worker-0"
            pod["metadata"]["labels"] = labels.replica_labels(
                job_id=index, task="worker", replica=0, queue="q", tenant="t"
            )
            yield pod

    cache = ClusterCache(client.CoreV1Api(client.ApiClient()), manifests_translation())
    nodes = [node_object(f"node-{i:05d}", {"cpu": "96", "memory": "1024Gi", "pods": "250",
                                            "nvidia.com/gpu": "8"}) for i in range(args.nodes)]  # fmt: skip
    for index, node in enumerate(nodes):
        node["metadata"]["resourceVersion"] = str(index + 1)
    gc.collect()
    tracemalloc.start()
    cache._replace_nodes(nodes)  # noqa: SLF001 - the reflector's own step, without HTTP
    del nodes
    cache._replace_pods(list(raw_pods()))  # noqa: SLF001
    gc.collect()
    retained, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    stats = cache.stats()
    print(json.dumps({
        "nodes": stats["nodes"], "pods": stats["pods"], "owned_pods": stats["owned_pods"],
        "retained_mb": round(retained / 2**20, 1), "peak_mb": round(peak / 2**20, 1),
        "retained_bytes_per_pod": round(retained / max(stats["pods"], 1)),
    }, sort_keys=True))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
