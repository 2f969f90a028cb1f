"""Benchmark the whole cycle against a real database: seed, then time each phase.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/portal_bench \\
        python -m scheduler.adapters.bench_cycle --nodes 1000 --jobs 10000 --queues 50
    ... --backend kubernetes --foreign-pods 10000 --cycles 5

Prints one JSON object per cycle: snapshot/core/persist/reconcile milliseconds as the cycle
records them, their parts (list_nodes, list_pods, observe, snapshot_build, decisions_persist,
desired_pods), db_ms (everything but the core), binds and the (snapshot + persist) / core ratio;
then one summary line: first_cycle_seconds, steady_cycle_seconds (median of the cycles after
the first), observe_seconds (median time to read the cluster, list_nodes + list_pods, after the
first cycle) and, on kubernetes, cache_rss_mb. With --plan-busy, twice as many cycles again beside
the plan-ahead task running back to back in a process of its own (what its Celery worker does),
busy and paused in turn, and the summary's `plan_busy` compares this process's CPU per
cycle in both.

--backend kubernetes --kubeconfig PATH uses that API server instead (the local control plane
of `./dev cluster-up`, say): the bench makes the same nodes and --foreign-pods there through
the API and runs a fake kubelet for the portal's pods. --write-concurrency N sets
KUBERNETES_WRITE_CONCURRENCY (1: one write at a time); the first cycle's `pods_per_second`
(binds over the reconcile's time) shows what it buys.

--backend kubernetes serves an emulated API server (scheduler.adapters.cluster.testing, a
process of its own) with the same nodes and --foreign-pods running pods of other workloads,
and reads it through the watch cache; between cycles --churn of those pods are replaced through
the API, and the emulator's kubelets start the pods the cycle created. The simulated backend
has no API server: its nodes are seeded with what those --foreign-pods request on each node
(used_by_others, as the watch cache sums them), so both backends schedule onto the same free
capacity and do the same work (with --foreign-pods a multiple of --nodes, --churn replaces
each pod on its own node, so the sums hold). --backend both runs the simulated backend, then
the kubernetes one on the same seed, and ends with a comparison line: the kubernetes /
simulated steady cycle ratios, in wall time and in this process's CPU time (the emulator's
own work runs in its process and is not counted).

The database is migrated and emptied first (--reset is required when it already holds jobs), so
point it at a database of its own. DEBUG is off unless DJANGO_DEBUG says otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

GANG_MIX = ((1, 30), (2, 20), (4, 20), (8, 15), (16, 10), (32, 5))  # (GPUs, weight %)
GiB = 1024**3
BOTH = ("simulated", "kubernetes")
# Functions the cycle module calls, timed apart: cycle module attribute -> JSON key.
PARTS = {
    "cluster_observe": "observe_ms",
    "snapshot_build": "snapshot_build_ms",
    "decisions_persist": "decisions_persist_ms",
    "desired_pods": "desired_pods_ms",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=10000)
    parser.add_argument("--queues", type=int, default=50)
    parser.add_argument("--cycles", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--reset", action="store_true", help="empty a database that has data")
    parser.add_argument("--backend", choices=(*BOTH, "both"), default="simulated")
    parser.add_argument("--foreign-pods", type=int, default=0, help="kubernetes: other pods")
    parser.add_argument("--churn", type=int, default=5, help="kubernetes: pods replaced per cycle")
    parser.add_argument(
        "--kubeconfig",
        type=Path,
        help="kubernetes: this API server (an admin's kubeconfig, e.g. ./dev cluster-up's) "
        "instead of an emulated one; the bench registers its nodes and other workloads' pods "
        "there through the API, runs a fake kubelet for the portal's pods, and removes them all",
    )
    parser.add_argument(
        "--write-concurrency",
        type=int,
        help="kubernetes: writes in flight at once (KUBERNETES_WRITE_CONCURRENCY; 1: sequential)",
    )
    parser.add_argument(
        "--plan-busy",
        action="store_true",
        help="then twice as many cycles beside a plan-ahead worker (its own process, the "
        "estimate task in a loop), busy and paused in turn, and compare this process's "
        "CPU per cycle in both",
    )
    parser.add_argument(
        "--namespace-per-tenant",
        action="store_true",
        help="KUBERNETES_NAMESPACE_PER_TENANT: each tenant's jobs in a namespace of its own",
    )
    args = parser.parse_args(argv)

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.local")
    # As in production: with DEBUG on, Django also keeps the text of every query it runs.
    os.environ.setdefault("DJANGO_DEBUG", "false")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    if args.namespace_per_tenant:
        settings.KUBERNETES_NAMESPACE_PER_TENANT = True
    if args.write_concurrency is not None:
        settings.KUBERNETES_WRITE_CONCURRENCY = args.write_concurrency

    from portal.jobs.models import Job

    call_command("migrate", verbosity=0)
    if Job.objects.exists() and not args.reset:
        print("bench_cycle: the database holds jobs; pass --reset to empty it", file=sys.stderr)
        return 2
    summaries = {}
    for backend_name in BOTH if args.backend == "both" else (args.backend,):
        call_command("flush", interactive=False, verbosity=0)
        seed(
            nodes=args.nodes,
            jobs=args.jobs,
            queues=args.queues,
            rng=random.Random(args.seed),  # noqa: S311 - a seeded workload, not a secret
            foreign_pods=args.foreign_pods,
        )
        with cluster(backend_name, args) as (backend, between_cycles, extra):
            lines = []
            for number in range(1, args.cycles + 1):
                lines.append(run_once(number, backend))
                print(json.dumps(lines[-1], sort_keys=True), flush=True)
                if number < args.cycles:
                    between_cycles()
            summaries[backend_name] = summary(backend_name, lines, extra())
            if args.plan_busy:
                summaries[backend_name]["plan_busy"] = plan_busy_cycles(
                    args.cycles, backend, between_cycles, len(lines) + 1
                )
            print(json.dumps(summaries[backend_name], sort_keys=True), flush=True)
    if len(summaries) == 2:
        print(json.dumps(comparison(*summaries.values()), sort_keys=True), flush=True)
    return 0


def plan_busy_cycles(
    cycles: int, backend: Any, between_cycles: Callable[[], None], first: int
) -> dict[str, Any]:
    """2 x `cycles` more cycles beside the plan-ahead task running in a loop in a process of
    its own, as its worker does, alternately busy and paused. The worker pauses between two
    runs (SIGUSR1, acknowledged once its run has ended, so a paused cycle overlaps no plan and
    the worker holds no database lock; SIGUSR2 resumes it). Cycles that alternate share the
    machine's other load, so this process's CPU per cycle compares."""
    worker = subprocess.Popen(  # noqa: S603 - this interpreter, a fixed module
        [sys.executable, "-c", "from bench.cycle import plan_loop; plan_loop()"],
        stdout=subprocess.PIPE,
        text=True,
    )
    stdout = worker.stdout
    if stdout is None:
        raise RuntimeError("the plan worker's output is not piped")
    lines: dict[bool, list[dict]] = {True: [], False: []}
    planned = 0

    def paused() -> None:
        nonlocal planned
        worker.send_signal(signal.SIGUSR1)
        while (said := stdout.readline()) and said.strip() != "paused":
            planned += said.strip() == "planned"

    try:
        while stdout.readline().strip() != "ready":
            pass
        for number in range(2 * cycles):
            busy = number % 2 == 0
            if busy:
                worker.send_signal(signal.SIGUSR2)
            else:
                paused()
            between_cycles()
            line = {**run_once(first + number, backend), "plan_busy": busy}
            lines[busy].append(line)
            print(json.dumps(line, sort_keys=True), flush=True)
    finally:
        worker.terminate()
        rest, _ = worker.communicate(timeout=60)
        planned += rest.split().count("planned")

    def median(key: str, busy: bool) -> float:
        return statistics.median(x[key] for x in lines[busy]) / 1000

    return {
        "cycles_each": cycles,
        "steady_cycle_cpu_seconds_plan_paused": round(median("cpu_ms", False), 3),
        "steady_cycle_cpu_seconds_plan_busy": round(median("cpu_ms", True), 3),
        "cpu_ratio": _ratio(median("cpu_ms", True), median("cpu_ms", False)),
        "steady_cycle_seconds_plan_paused": round(median("total_ms", False), 3),
        "steady_cycle_seconds_plan_busy": round(median("total_ms", True), 3),
        "plan_runs": planned,
    }


def plan_loop() -> None:
    """The plan-ahead task back to back, saying 'planned' after each run; SIGUSR1 pauses it
    after the run under way (it says 'paused'), SIGUSR2 resumes it."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.local")
    os.environ.setdefault("DJANGO_DEBUG", "false")
    import django

    django.setup()
    from django.utils import timezone

    from scheduler.adapters.plan_ahead import plan_ahead_run

    pause = threading.Event()
    resume = threading.Event()
    signal.signal(signal.SIGUSR1, lambda *_: (resume.clear(), pause.set()))
    signal.signal(signal.SIGUSR2, lambda *_: resume.set())
    print("ready", flush=True)
    while True:
        if pause.is_set():
            pause.clear()
            print("paused", flush=True)
            resume.wait()
        plan_ahead_run(now=timezone.now())
        print("planned", flush=True)


def comparison(simulated: dict[str, Any], kubernetes: dict[str, Any]) -> dict[str, Any]:
    """kubernetes / simulated at the same sizes, in wall and in this process's CPU time."""
    return {
        "comparison": True,
        "steady_cycle_ratio": _ratio(kubernetes["steady_cycle_seconds"],
                                     simulated["steady_cycle_seconds"]),
        "steady_cycle_cpu_ratio": _ratio(kubernetes["steady_cycle_cpu_seconds"],
                                         simulated["steady_cycle_cpu_seconds"]),
    }  # fmt: skip


def _ratio(numerator: float, denominator: float) -> float | None:
    return round(numerator / denominator, 2) if denominator else None


def summary(backend: str, lines: list[dict], extra: dict[str, Any]) -> dict[str, Any]:
    steady = lines[1:] or lines
    return {
        "summary": True,
        "backend": backend,
        "cycles": len(lines),
        "first_cycle_seconds": round(lines[0]["total_ms"] / 1000, 3),
        "steady_cycle_seconds": round(statistics.median(x["total_ms"] for x in steady) / 1000, 3),
        # CPU of this process only (not the emulator's): steadier than wall time under load.
        "steady_cycle_cpu_seconds": round(
            statistics.median(x.get("cpu_ms", 0.0) for x in steady) / 1000, 3
        ),
        "observe_seconds": round(
            statistics.median(
                x.get("list_nodes_ms", 0.0) + x.get("list_pods_ms", 0.0) for x in steady
            )
            / 1000,
            3,
        ),
        **extra,
    }


@contextlib.contextmanager
def cluster(
    name: str, args: argparse.Namespace
) -> Iterator[tuple[Any, Callable[[], None], Callable]]:
    """(backend, what to do between two cycles, extra summary figures)."""
    if name == "simulated":
        from django.conf import settings

        from scheduler.adapters.cluster.simulated import SimulatedBackend

        backend = SimulatedBackend(default_run_seconds=settings.SIMULATED_DEFAULT_RUN_SECONDS)
        yield backend, lambda: None, dict
        return
    from portal.cluster.namespaces import job_namespaces

    # The namespaces a cluster admin would have made: every tenant's, and the shared one.
    namespaces = sorted(job_namespaces()) if args.namespace_per_tenant else []
    if args.kubeconfig is not None:
        with real_api_server(args.kubeconfig, args.nodes, args.foreign_pods, namespaces):
            yield from _kubernetes(args.kubeconfig, args)
        return
    with emulated_api_server(args.nodes, args.foreign_pods, namespaces) as kubeconfig:
        yield from _kubernetes(kubeconfig, args)


def _kubernetes(kubeconfig: Path, args: argparse.Namespace) -> Iterator:
    from django.conf import settings
    from kubernetes import client, config

    from jobspec.labels import owned_selector
    from portal.cluster.namespaces import job_namespaces
    from scheduler.adapters.cluster.kubernetes import KubernetesBackend
    from scheduler.adapters.cluster.testing.emulator import foreign_pod_object
    from scheduler.adapters.cluster.watch_cache import ClusterCache, manifests_translation

    configuration = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    backend = KubernetesBackend.from_configuration(
        configuration,
        settings.KUBERNETES_NAMESPACE,
        settings.GPU_RESOURCE_NAMES,
        write_concurrency=settings.KUBERNETES_WRITE_CONCURRENCY,
    )
    backend.namespaces = job_namespaces  # as backend_from_settings does
    # The first list of 100,000 pods can outlast the default wait on a loaded machine; a real
    # cycle would then fail with that reason and the next one find the cache ready.
    backend.cache = ClusterCache(
        backend.core_v1,
        manifests_translation(backend.instance),
        sync_timeout=1800,
        object_namespaces=(backend.namespace,),
        object_selector=owned_selector(backend.instance),
    )
    figures: dict[str, Any] = {
        "foreign_pods": args.foreign_pods,
        "namespace_per_tenant": settings.KUBERNETES_NAMESPACE_PER_TENANT,
        "api_server": "real" if args.kubeconfig else "emulated",
        "write_concurrency": backend.write_concurrency,
    }
    # Memory: RSS growth while the cache makes its first lists (the first list_nodes waits for
    # both). An upper bound: it includes the decoding's transient peak.
    first_read = backend.list_nodes

    def measured_first_read():
        if "cache_rss_mb" in figures:
            return first_read()
        before = _rss_mb()
        try:
            return first_read()
        finally:
            figures["cache_rss_mb"] = round(_rss_mb() - before, 1)

    backend.list_nodes = measured_first_read
    replaced = iter(range(args.foreign_pods, 10**9))
    nodes = max(args.nodes, 1)

    def churn() -> None:
        api = backend.core_v1
        for _ in range(min(args.churn, args.foreign_pods)):
            index = next(replaced)
            old = f"ds-{index - args.foreign_pods:06d}"
            api.delete_namespaced_pod(old, "kube-system", grace_period_seconds=0)
            new = foreign_pod_object(index, f"node-{index % nodes:05d}")
            if args.kubeconfig is not None:  # no such DaemonSet there: the GC would take it
                del new["metadata"]["ownerReferences"]
            api.create_namespaced_pod("kube-system", new)
        time.sleep(1.0)  # the time between two cycles: the watch delivers, the kubelets start pods

    try:
        yield backend, churn, lambda: {**figures, **_cache_counts(backend.cache)}
    finally:
        backend.cache.stop()


def _cache_counts(cache: Any) -> dict[str, Any]:
    stats = cache.stats()
    return {
        "cache_nodes": stats["nodes"],
        "cache_pods": stats["pods"],
        "cache_relists": stats["pods_reflector"]["lists"] - 1,
    }


@contextlib.contextmanager
def emulated_api_server(
    nodes: int, foreign_pods: int, namespaces: Sequence[str] = ()
) -> Iterator[Path]:
    """The emulator in a process of its own, so serving does not share this one's GIL."""
    with tempfile.TemporaryDirectory(prefix="bench-cycle-") as folder:
        kubeconfig = Path(folder) / "kubeconfig"
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        process = subprocess.Popen(  # noqa: S603 - our own module, fixed arguments
            [sys.executable, "-m", "scheduler.adapters.cluster.testing.emulator",
             "--port", str(port), "--kubeconfig", str(kubeconfig), "--nodes", str(nodes),
             "--foreign-pods", str(foreign_pods),
             *(["--namespaces", ",".join(namespaces)] if namespaces else [])],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            ready = process.stdout.readline() if process.stdout else ""
            if "serving" not in ready:
                raise RuntimeError(f"the emulated API server did not start: {ready!r}")
            yield kubeconfig
        finally:
            process.terminate()
            process.wait(timeout=30)


BENCH_KUBELET = "bench-cycle"


@contextlib.contextmanager
def real_api_server(
    kubeconfig: Path, nodes: int, foreign_pods: int, namespaces: Sequence[str] = ()
) -> Iterator[None]:
    """The emulator's nodes and other workloads' pods, made on a real API server through the
    API (`--write-concurrency` at a time), a fake kubelet running the portal's pods there, and
    all of it removed afterwards."""
    from concurrent.futures import ThreadPoolExecutor

    from kubernetes import client, config

    from scheduler.adapters.cluster.testing.emulator import foreign_pod_object
    from scheduler.adapters.cluster.testing.fake_kubelet import FakeKubelet

    configuration = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    configuration.connection_pool_maxsize = 16  # one per seeding thread
    api = client.CoreV1Api(client.ApiClient(configuration))
    kubelet = FakeKubelet(api, owner=BENCH_KUBELET)  # registers the nodes; its process runs them
    started = time.monotonic()
    for namespace in {"gpu-jobs", *namespaces}:
        with contextlib.suppress(client.ApiException):
            api.create_namespace({"metadata": {"name": namespace}})

    def node(index: int) -> None:
        kubelet.register_node(
            f"node-{index:05d}", gpus=8, cpu="96", memory="1024Gi", pods=250,
            labels={"topology.kubernetes.io/zone": f"rack-{index // 32}"},
        )  # fmt: skip

    def pod(index: int) -> None:
        body = foreign_pod_object(index, f"node-{index % max(nodes, 1):05d}")
        # Its DaemonSet does not exist here: the garbage collector would take the pod.
        del body["metadata"]["ownerReferences"]
        api.create_namespaced_pod("kube-system", body)

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(node, range(nodes)))
        list(pool.map(pod, range(foreign_pods)))
    print(
        json.dumps({"seeded_real_api_server_seconds": round(time.monotonic() - started, 1),
                    "nodes": nodes, "foreign_pods": foreign_pods}),
        flush=True,
    )  # fmt: skip
    # In a process of its own, as the emulator's kubelets run in the emulator's: the bench's
    # CPU figures are the portal's alone.
    agent = subprocess.Popen(  # noqa: S603 - our own module, fixed arguments
        [sys.executable, "-m", "scheduler.adapters.cluster.testing.fake_kubelet",
         "--kubeconfig", str(kubeconfig), "--owner", BENCH_KUBELET,
         "--pod-selector", "gpuportal.io/managed=true", "--start-seconds", "0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        yield
    finally:
        agent.terminate()
        agent.wait(timeout=30)
        names = [(p.metadata.namespace, p.metadata.name) for p in
                 api.list_pod_for_all_namespaces(label_selector="app=gpu-operator").items]  # fmt: skip
        for namespace in {"gpu-jobs", *namespaces}:
            names += [
                (namespace, p.metadata.name) for p in api.list_namespaced_pod(namespace).items
            ]
            api.delete_collection_namespaced_config_map(
                namespace, label_selector="gpuportal.io/managed=true"
            )
        with ThreadPoolExecutor(16) as pool:  # one by one: a collection of 20,000 times out
            list(pool.map(lambda ref: _force_delete(api, *ref), names))
        kubelet.remove_nodes()


def _force_delete(api: Any, namespace: str, name: str) -> None:
    from kubernetes import client

    with contextlib.suppress(client.ApiException):
        api.delete_namespaced_pod(name, namespace, grace_period_seconds=0)


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def others_usage(*, nodes: int, foreign_pods: int) -> list[dict[str, int]]:
    """What the emulator's other-workload pods request on each node (it spreads them round
    robin), as the watch cache sums them: the simulated half's nodes carry the same, so both
    halves schedule onto the same free capacity and make the same decisions."""
    if not foreign_pods:
        return [{} for _ in range(nodes)]
    from scheduler.adapters.cluster.manifests import parse_resources
    from scheduler.adapters.cluster.testing.emulator import foreign_pod_object

    per_pod = {"pods": 1}
    for container in foreign_pod_object(0, "node-00000")["spec"]["containers"]:
        for name, amount in parse_resources(container["resources"]["requests"]).items():
            per_pod[name] = per_pod.get(name, 0) + amount
    usage = []
    for index in range(nodes):
        count = foreign_pods // nodes + (1 if index < foreign_pods % nodes else 0)
        usage.append({name: amount * count for name, amount in per_pod.items()} if count else {})
    return usage


def seed(*, nodes: int, jobs: int, queues: int, rng: random.Random, foreign_pods: int = 0) -> None:
    from django.contrib.auth import get_user_model
    from django.db import transaction
    from django.utils import timezone

    from portal.cluster.models import Node
    from portal.jobs.models import Job, JobTask
    from portal.queues.models import Queue
    from portal.tenants.models import Tenant

    now = timezone.now()
    with transaction.atomic():
        user = get_user_model().objects.create(username="bench")
        tenants = Tenant.objects.bulk_create(
            [Tenant(name=f"team-{i}") for i in range(max(1, queues // 5))]
        )
        queue_rows = Queue.objects.bulk_create(
            [
                Queue(tenant=tenants[i % len(tenants)], name=f"q-{i:03d}", weight=1 + i % 4)
                for i in range(queues)
            ]
        )
        usage = others_usage(nodes=nodes, foreign_pods=foreign_pods)
        Node.objects.bulk_create(
            [
                Node(
                    name=f"node-{i:05d}",
                    gpu_count=8,
                    gpu_model="H100",
                    cpu_millis=96_000,
                    memory_bytes=1024 * GiB,
                    topology_labels={"topology.kubernetes.io/zone": f"rack-{i // 32}"},
                    pods_capacity=250,  # as the emulator's nodes report
                    used_by_others=usage[i],
                )
                for i in range(nodes)
            ],
            batch_size=1000,
        )
        sizes, weights = zip(*GANG_MIX)
        job_rows, shapes = [], []
        for i in range(jobs):
            queue = queue_rows[rng.randrange(queues)]
            gpus = rng.choices(sizes, weights)[0]
            replicas, per_pod = (gpus // 8, 8) if gpus > 8 else (1, gpus)
            shapes.append((replicas, per_pod))
            job_rows.append(
                Job(
                    tenant_id=queue.tenant_id,
                    queue=queue,
                    submitter=user,
                    name=f"job-{i}",
                    priority=rng.choice((0, 0, 0, 10)),
                    min_available=replicas,
                    status=Job.Status.PENDING,
                    submitted_at=now - timedelta(seconds=jobs - i),
                )
            )
        Job.objects.bulk_create(job_rows, batch_size=2000)
        JobTask.objects.bulk_create(
            [
                JobTask(
                    job=job,
                    name="worker",
                    replicas=replicas,
                    image="trainer:latest",
                    gpus=per_pod,
                    cpu_millis=8000 * per_pod,
                    memory_bytes=64 * GiB * per_pod,
                )
                for job, (replicas, per_pod) in zip(job_rows, shapes)
            ],
            batch_size=2000,
        )


def run_once(number: int, backend: Any) -> dict:
    from scheduler.adapters import orchestrator as cycle_module
    from scheduler.adapters.orchestrator import scheduling_cycle_run

    # The cycle records snapshot_ms as listing the pods + observe + snapshot_build, persist_ms
    # as re-checking the decisions + decisions_persist, reconcile_ms as desired_pods + plan +
    # apply. The parts are timed here by wrapping them where the cycle looks them up.
    parts: dict[str, float] = {}
    reads = {name: getattr(backend, name) for name in ("list_nodes", "list_pods")}
    for name, function in reads.items():
        setattr(backend, name, _timed(parts, f"{name}_ms", function))
    originals = {name: getattr(cycle_module, name) for name in PARTS if hasattr(cycle_module, name)}
    try:
        for name, function in originals.items():
            setattr(cycle_module, name, _timed(parts, PARTS[name], function))
        cpu_before = time.process_time()
        run = scheduling_cycle_run(backend=backend)
        cpu_ms = (time.process_time() - cpu_before) * 1000
    finally:
        for name, function in originals.items():
            setattr(cycle_module, name, function)
        for name, function in reads.items():
            setattr(backend, name, function)
    shell = run.snapshot_ms + run.persist_ms
    return {
        "cycle": number,
        "snapshot_ms": round(run.snapshot_ms, 1),
        **{name: round(ms, 1) for name, ms in parts.items()},
        "core_ms": round(run.core_ms, 1),
        "persist_ms": round(run.persist_ms, 1),
        "reconcile_ms": round(run.reconcile_ms, 1),
        # Everything but the core: what the database side of the cycle costs.
        "db_ms": round(shell + run.reconcile_ms, 1),
        "total_ms": round(shell + run.core_ms + run.reconcile_ms, 1),
        "cpu_ms": round(cpu_ms, 1),
        "binds": run.binds,
        "pods_per_second": round(run.binds / (run.reconcile_ms / 1000), 1)
        if run.reconcile_ms
        else None,
        "evictions": run.evictions,
        "pending_jobs": run.pending_jobs,
        "snapshot_plus_persist_over_core": round(shell / run.core_ms, 2) if run.core_ms else None,
        "error": run.error,
    }


def _timed(parts: dict[str, float], key: str, function: Callable) -> Callable:
    def timed(*args, **kwargs):
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            parts[key] = parts.get(key, 0.0) + (time.perf_counter() - start) * 1000

    return timed


if __name__ == "__main__":
    sys.exit(main())
