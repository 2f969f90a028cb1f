"""Job-trace replay with queues: isolated VC partitions (FIFO/SJF) vs one shared cluster run by
the real core (``run_cycle``).

Traces: Microsoft Philly 2017 (Jeon et al., ATC '19; CC BY 4.0) with the virtual-cluster sizes
simulated by Helios (Hu et al., SC '21, S-Lab-System-Group/HeliosArtifact, MIT); Microsoft ITP
2021 (ElasticFlow, Gu et al., ASPLOS '23; MIT).

Model: 8-GPU nodes. A job of n GPUs is a gang of ceil(n/8) pods (8 GPUs each, the last takes
the rest). Isolated mode follows Helios' setting: each VC alone, non-preemptive, head-of-line
blocking, consolidated placement (a pod of < 8 GPUs goes to the fullest node that fits).
Shared mode: one cluster of all VCs' nodes, one queue per VC, weight = VC GPUs, guarantee = VC
GPUs (so reclaim never takes a queue below its own VC), driven by ``run_cycle`` with enqueue,
allocate, backfill, reclaim and priority, gang, conformance, proportion, binpack. A cycle runs
when jobs arrive or finish, events within ``step`` seconds coalesced. An evicted job loses its
progress and restarts from scratch when placed again; each eviction counts as one preemption.

Tenants: ``group_tenants`` splits the VCs into N groups of about equal GPUs. Tree mode is the
shared cluster with each group as a tenant (a parent queue: weight = its VCs' GPUs, guarantee =
its queues' guarantees) under the hierarchical proportion; every mode then also reports per
tenant, the flat shared run measured against the same tenants' guarantees.
"""

from __future__ import annotations

import csv
import heapq
import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Protocol

from scheduler.adapters.gc_pause import run_cycle_paused
from scheduler.core.config import parse_conf_text
from scheduler.core.resources import Resources
from scheduler.core.types import (
    JobInfo,
    NodeInfo,
    PodGroupPhase,
    QueueInfo,
    Snapshot,
    TaskInfo,
    TaskStatus,
)

GPUS_PER_NODE = 8
SHARED_CONF_TEXT = """\
actions: "enqueue, allocate, backfill, reclaim"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: proportion
  - name: binpack
    arguments:
      binpack.weight: 10
      binpack.cpu: 2
      binpack.memory: 2
      binpack.resources: nvidia.com/gpu
      binpack.resources.nvidia.com/gpu: 20
"""


TREE_CONF_TEXT = SHARED_CONF_TEXT.replace(
    "  - name: proportion\n", "  - name: proportion\n    enableHierarchy: true\n"
)


def conf_text(*, tree: bool, work_conserving: bool) -> str:
    """The shared (or tree) conf. Its proportion is upstream's (every pending job in demand, a
    queue held at its deserved share) unless ``work_conserving``: then as the seed conf runs
    it, lending idle capacity past a share (``lendIdle``) and leaving jobs that can never run
    out of demand (``excludeNeverRunnable``)."""
    text = TREE_CONF_TEXT if tree else SHARED_CONF_TEXT
    switches = "true" if work_conserving else "false"
    return text.replace(
        "  - name: binpack\n",
        f"    arguments:\n      lendIdle: {switches}\n      excludeNeverRunnable: {switches}\n"
        "  - name: binpack\n",
    )


@dataclass
class Job:
    name: str
    queue: str
    submit: float
    duration: float
    gpus: int
    start: float | None = None
    end: float | None = None
    first_start: float | None = None
    preemptions: int = 0

    def pods(self) -> list[int]:
        full, rest = divmod(self.gpus, GPUS_PER_NODE)
        return [GPUS_PER_NODE] * full + ([rest] if rest else [])


# loading ----------------------------------------------------------------------------------------
def _epoch(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S").timestamp()


def load_philly(path: Path, vcs: dict[str, int], window: tuple[str, str] | None, limit: int | None):
    jobs = []
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            ts = row["timestamp"]
            if window and not (window[0] <= ts[:10] <= window[1]):
                continue
            if row["cluster"] not in vcs:
                continue
            gpus = int(float(row["num_gpus"]))
            if gpus <= 0 or gpus > vcs[row["cluster"]]:
                continue
            jobs.append((ts, float(row["duration"]), gpus, row["cluster"]))
    jobs.sort()
    if limit:
        jobs = jobs[:limit]
    t0 = _epoch(jobs[0][0]) if jobs else 0.0
    return [
        Job(f"j{i}", vc, _epoch(ts) - t0, max(dur, 1.0), gpus)
        for i, (ts, dur, gpus, vc) in enumerate(jobs)
    ]


def load_vcs(path: Path, scale: float = 1.0) -> dict[str, int]:
    """VC sizes in GPUs; ``scale`` shrinks every VC (at least one node) to load the cluster
    harder with the same jobs (the Philly conversion used here runs Helios' VCs at ~14%)."""
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    return {r["vc"]: max(1, round(int(r["node num"]) * scale)) * GPUS_PER_NODE for r in rows}


def load_itp(path: Path, limit: int | None, gpus: int):
    rows = []
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            n = int(float(row["num_gpu"]))
            if 0 < n <= gpus:
                rows.append((float(row["submission_time"]), float(row["duration"]), n))
    rows.sort()
    if limit:
        rows = rows[:limit]
    t0 = rows[0][0] if rows else 0.0
    return [Job(f"j{i}", "itp", s - t0, max(d, 1.0), n) for i, (s, d, n) in enumerate(rows)]


def group_tenants(vcs: dict[str, int], count: int) -> dict[str, str]:
    """VC -> tenant (``t1``..``tN``): largest VCs first, each to the tenant with the fewest GPUs
    so far (ties to the lower number), so the tenants end up about the same size."""
    sizes = {f"t{k + 1}": 0 for k in range(count)}
    out = {}
    for vc, gpus in sorted(vcs.items(), key=lambda item: (-item[1], item[0])):
        tenant = min(sizes, key=lambda t: (sizes[t], t))
        sizes[tenant] += gpus
        out[vc] = tenant
    return out


# metrics ------------------------------------------------------------------------------------------
def jain(values) -> float:
    """Jain's fairness index (sum x)^2 / (n sum x^2); 1.0 for no or all-zero values."""
    xs = [float(v) for v in values]
    if not xs:
        return 1.0
    sq = sum(x * x for x in xs)
    return 1.0 if sq == 0 else sum(xs) ** 2 / (len(xs) * sq)


def percentile(values, q: float) -> float:
    xs = sorted(values)
    if not xs:
        return 0.0
    k = (len(xs) - 1) * q / 100
    lo, hi = math.floor(k), math.ceil(k)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def job_metrics(jobs: list[Job]) -> dict:
    done = [j for j in jobs if j.end is not None]
    queueing = [j.first_start - j.submit for j in done]
    jct = [j.end - j.submit for j in done]
    return {
        "jobs": len(jobs),
        "finished": len(done),
        "avg_jct_s": round(sum(jct) / len(jct), 1) if jct else None,
        "avg_queueing_s": round(sum(queueing) / len(queueing), 1) if queueing else None,
        "p99_queueing_s": round(percentile(queueing, 99), 1) if queueing else None,
        "preemptions": sum(j.preemptions for j in jobs),
    }


# isolated partitions --------------------------------------------------------------------------------
def place_consolidated(free: list[int], pods: list[int]) -> list[int] | None:
    """Nodes for a gang: whole free nodes for 8-GPU pods, fullest fitting node for the rest."""
    trial = list(free)
    chosen = []
    for need in sorted(pods, reverse=True):
        best = None
        for i, f in enumerate(trial):
            if f >= need and (best is None or f < trial[best]):
                best = i
        if best is None:
            return None
        trial[best] -= need
        chosen.append(best)
    free[:] = trial
    return chosen


def simulate_partition(jobs: list[Job], gpus: int, order: str = "fifo") -> dict:
    """One VC alone: non-preemptive, head-of-line blocking. ``order``: fifo | sjf."""
    free = [GPUS_PER_NODE] * (gpus // GPUS_PER_NODE)
    arrivals = sorted(jobs, key=lambda j: j.submit)
    waiting: list[Job] = []
    running: list[tuple[float, int, Job, list[int]]] = []
    busy_gpu_seconds, last_t, used = 0.0, 0.0, 0
    i, seq = 0, 0
    while i < len(arrivals) or waiting or running:
        next_arrival = arrivals[i].submit if i < len(arrivals) else math.inf
        next_finish = running[0][0] if running else math.inf
        t = min(next_arrival, next_finish)
        busy_gpu_seconds += used * (t - last_t)
        last_t = t
        while running and running[0][0] <= t:
            _, _, job, nodes = heapq.heappop(running)
            for node, need in zip(nodes, sorted(job.pods(), reverse=True)):
                free[node] += need
            used -= job.gpus
        while i < len(arrivals) and arrivals[i].submit <= t:
            waiting.append(arrivals[i])
            i += 1
        if order == "sjf":
            waiting.sort(key=lambda j: (j.duration, j.submit))
        while waiting:
            job = waiting[0]
            nodes = place_consolidated(free, job.pods())
            if nodes is None:
                break  # head-of-line blocking
            waiting.pop(0)
            job.start = job.first_start = t
            job.end = t + job.duration
            used += job.gpus
            seq += 1
            heapq.heappush(running, (job.end, seq, job, nodes))
    span = max((j.end for j in jobs), default=0.0) - min((j.submit for j in jobs), default=0.0)
    out = job_metrics(jobs)
    out["gpu_utilisation"] = round(busy_gpu_seconds / (gpus * span), 4) if span else 0.0
    return out


def per_tenant_jobs(jobs: list[Job], tenants: dict[str, str]) -> dict[str, dict]:
    """Job metrics of each tenant's jobs."""
    out = {}
    for tenant in sorted(set(tenants.values())):
        mine = [j for j in jobs if tenants.get(j.queue) == tenant]
        if mine:
            out[tenant] = job_metrics(mine)
    return out


def run_isolated(
    jobs: list[Job], vcs: dict[str, int], order: str, tenants: dict[str, str] | None = None
) -> dict:
    per_vc, all_jobs, busy, cap_time = {}, [], 0.0, 0.0
    start = min(j.submit for j in jobs)
    end_all = 0.0
    for vc, gpus in vcs.items():
        mine = [_copy(j) for j in jobs if j.queue == vc]
        if not mine:
            continue
        per_vc[vc] = simulate_partition(mine, gpus, order)
        all_jobs.extend(mine)
        span = max(j.end for j in mine) - min(j.submit for j in mine)
        busy += per_vc[vc]["gpu_utilisation"] * gpus * span
        end_all = max(end_all, max(j.end for j in mine))
    cap_time = sum(vcs.values()) * (end_all - start)
    out = job_metrics(all_jobs)
    out["gpu_utilisation"] = round(busy / cap_time, 4) if cap_time else 0.0
    out["per_queue"] = per_vc
    if tenants:
        out["per_tenant"] = per_tenant_jobs(all_jobs, tenants)
    return out


def _copy(job: Job) -> Job:
    return Job(job.name, job.queue, job.submit, job.duration, job.gpus)


# shared cluster through the core ---------------------------------------------------------------------
@dataclass
class SharedStats:
    """Time integrals of the shared run, kept per queue between consecutive events."""

    guarantees: dict
    cycles: int = 0
    cycle_seconds: list[float] = field(default_factory=list)
    jain_weighted: float = 0.0
    jain_time: float = 0.0
    busy_gpu_seconds: float = 0.0
    peak_gpus_in_use: int = 0
    # GPUs that waiting jobs would fit on idle nodes, as of the last cycle, and its integral
    fitting_idle_gpus: int = 0
    idle_gpu_seconds_while_fitting_job_waits: float = 0.0
    demand_seconds: dict = field(default_factory=dict)
    below_guarantee_seconds: dict = field(default_factory=dict)
    starved_seconds: dict = field(default_factory=dict)
    max_shortfall: dict = field(default_factory=dict)


class ReplayObserver(Protocol):
    """What a shared run tells an observer, and nothing more: never the duration of a job that
    has not finished."""

    def arrived(
        self,
        snapshot: Snapshot,
        arrivals: Iterable[tuple[int, str, float]],
        starts: Mapping[str, float],
    ) -> None:
        """A cycle at ``snapshot.now`` sees these (trace index, job, submit) first;
        ``starts`` are the running jobs' last starts."""

    def started(self, name: str, queue: str, submit: float, at: float) -> None:
        """A job first started."""

    def finished(self, queue: str, runtime: float, gpus: int) -> None:
        """A job of ``gpus`` GPUs finished after ``runtime`` seconds."""


@dataclass
class QueueState:
    """What the harness knows of one queue: GPUs of running jobs, and the pending jobs the
    scheduler saw at its last cycle (a job that arrived since is not demand it could act on)."""

    running_gpus: int = 0
    pending_gpus: int = 0
    smallest_pending: int | None = None
    deserved: float | None = None


def run_shared(  # noqa: C901, PLR0912, PLR0915 - the simulator's event loop
    jobs: list[Job],
    vcs: dict[str, int],
    step: float = 60.0,
    # Half of each VC is guaranteed: with every VC guaranteed whole, the guarantees add up to
    # the cluster and proportion caps each queue at its own VC, so nothing can be borrowed.
    guarantee_fraction: float = 0.5,
    max_cycles: int | None = None,
    tenants: dict[str, str] | None = None,
    tree: bool = False,
    observer: ReplayObserver | None = None,
    work_conserving: bool = False,
) -> dict:
    """``tenants`` (VC -> tenant) adds per-tenant figures; ``tree`` also makes the tenants
    parent queues of a hierarchical proportion (tree mode); ``observer`` is told what happens
    (bench.replay.estimate); ``work_conserving`` runs proportion as the seed conf does
    (``conf_text``)."""
    jobs = [_copy(j) for j in jobs]
    total_gpus = sum(vcs.values())
    nodes = tuple(
        NodeInfo(
            f"n{i:03d}",
            Resources.of({"cpu": 64000, "memory": 512 * 2**30, "nvidia.com/gpu": GPUS_PER_NODE}),
        )
        for i in range(total_gpus // GPUS_PER_NODE)
    )
    guarantees = {vc: int(gpus * guarantee_fraction) for vc, gpus in vcs.items()}
    # The most a queue may hold (flat proportion's real capability: the cluster less the other
    # queues' guarantees), for the idle figure; in the tree a guarantee holds back only what
    # its queue asks for, so there is no such fixed limit.
    ceilings = (
        None if tree else {vc: total_gpus - sum(guarantees.values()) + guarantees[vc] for vc in vcs}
    )
    tenants = tenants or {}
    tree = tree and bool(tenants)
    queues = tuple(
        QueueInfo(
            vc,
            weight=max(1, gpus),
            guarantee=Resources.of({"nvidia.com/gpu": guarantees[vc]}),
            parent=f"tenant/{tenants[vc]}" if tree else None,
        )
        for vc, gpus in vcs.items()
    )
    members = {t: [vc for vc in vcs if tenants.get(vc) == t] for t in sorted(set(tenants.values()))}
    tenant_guarantees = {t: sum(guarantees[vc] for vc in vcs_of) for t, vcs_of in members.items()}
    if tree:
        queues += tuple(
            QueueInfo(
                f"tenant/{t}",
                weight=max(1, sum(vcs[vc] for vc in vcs_of)),
                guarantee=Resources.of({"nvidia.com/gpu": tenant_guarantees[t]}),
            )
            for t, vcs_of in members.items()
        )
    conf = parse_conf_text(conf_text(tree=tree, work_conserving=work_conserving))
    arrivals = sorted(jobs, key=lambda j: j.submit)
    by_name = {j.name: j for j in jobs}
    pending: dict[str, Job] = {}
    running: dict[str, dict[str, str]] = {}  # job -> task -> node
    phases: dict[str, PodGroupPhase] = {}
    finish: list[tuple[float, str]] = []
    state = {vc: QueueState() for vc in vcs}
    stats = SharedStats(guarantees=guarantees)
    tenant_stats = SharedStats(guarantees=tenant_guarantees)
    tenant_deserved: dict[str, float | None] = {}

    def account(dt: float) -> None:
        _account(stats, state, dt)
        if members:
            _account(tenant_stats, _tenant_states(state, members, tenant_deserved), dt)

    i, t, last_cycle = 0, 0.0, None
    idle_cycles, evicted_last = 0, False
    wall = time.perf_counter()

    def advance(to: float) -> None:
        """Move the clock to ``to``, ending the jobs that finish on the way at their own time."""
        nonlocal t
        while finish and finish[0][0] <= to:
            end, name = heapq.heappop(finish)
            job = by_name[name]
            if name in running and job.end == end:
                account(end - t)
                t = end
                state[job.queue].running_gpus -= job.gpus
                del running[name]
                if observer is not None:
                    observer.finished(job.queue, job.duration, job.gpus)
        account(to - t)
        t = to

    while i < len(arrivals) or pending:
        if max_cycles is not None and stats.cycles >= max_cycles:
            break
        # A cycle runs on an arrival, on a finish while jobs wait, or right after a cycle that
        # evicted (the evicted GPUs are free for the jobs it reclaimed them for); never sooner
        # than ``step`` after the previous one. With nothing pending a cycle could neither bind
        # nor reclaim (reclaim only acts for pending jobs), so those are skipped.
        next_arrival = arrivals[i].submit if i < len(arrivals) else math.inf
        next_finish = finish[0][0] if (finish and pending) else math.inf
        t_next = min(next_arrival, next_finish)
        if evicted_last and pending:
            t_next = last_cycle
        if t_next == math.inf:
            if idle_cycles >= 3:
                break  # what is left can never fit
            t_next = t + step
        if last_cycle is not None:
            t_next = max(t_next, last_cycle + step)
        advance(t_next)
        arrived = []
        while i < len(arrivals) and arrivals[i].submit <= t:
            pending[arrivals[i].name] = arrivals[i]
            arrived.append((i, arrivals[i].name, arrivals[i].submit))
            i += 1
        snapshot = _snapshot(nodes, queues, pending, running, by_name, phases, t)
        if observer is not None and arrived:
            starts = {name: by_name[name].start for name in running}
            observer.arrived(snapshot, arrived, starts)
        started = time.perf_counter()
        result = run_cycle_paused(snapshot, conf)
        stats.cycle_seconds.append(time.perf_counter() - started)
        stats.cycles += 1
        last_cycle = t
        idle_cycles = 0 if (result.binds or result.evictions) else idle_cycles + 1
        evicted_last = bool(result.evictions)
        for name, phase in result.phases.items():
            phases[name] = PodGroupPhase(phase)
        for name in {e.job for e in result.evictions}:
            if name in running:
                job = by_name[name]
                job.preemptions += 1
                job.start = job.end = None
                state[job.queue].running_gpus -= job.gpus
                del running[name]
                pending[name] = job
                phases.pop(name, None)
        placed: dict[str, dict[str, str]] = {}
        for bind in result.binds:
            placed.setdefault(bind.job, {})[bind.task] = bind.node
        for name, tasks in placed.items():
            job = pending.get(name)
            if job is None or len(tasks) < len(job.pods()):
                continue  # partial gang: not started (the gang plugin should prevent this)
            del pending[name]
            running[name] = tasks
            job.start = t
            if job.first_start is None:
                job.first_start = t
                if observer is not None:
                    observer.started(name, job.queue, job.submit, t)
            job.end = t + job.duration
            state[job.queue].running_gpus += job.gpus
            heapq.heappush(finish, (job.end, name))
        stats.fitting_idle_gpus = fitting_idle_gpus(
            len(nodes),
            running,
            pending,
            by_name,
            ceilings,
            {vc: qs.running_gpus for vc, qs in state.items()},
        )
        for vc, qs in state.items():
            share = result.queues.get(vc)
            qs.deserved = share.deserved.get("gpu") if share is not None else None
            waiting = [j.gpus for j in pending.values() if j.queue == vc]
            qs.pending_gpus = sum(waiting)
            qs.smallest_pending = min(waiting) if waiting else None
        for tenant, vcs_of in members.items():
            share = result.queues.get(f"tenant/{tenant}")
            if share is not None:
                tenant_deserved[tenant] = share.deserved.get("gpu")
            else:  # flat: what its queues deserve together
                values = [state[vc].deserved for vc in vcs_of if state[vc].deserved is not None]
                tenant_deserved[tenant] = sum(values) if values else None
    if not pending and (max_cycles is None or stats.cycles < max_cycles):
        advance(max((j.end for j in jobs if j.end is not None), default=t))
    span = (max((j.end or t) for j in jobs) - min(j.submit for j in jobs)) if jobs else 0.0
    out = job_metrics(jobs)
    out["gpu_utilisation"] = round(stats.busy_gpu_seconds / (total_gpus * span), 4) if span else 0
    out["idle_gpu_seconds_while_fitting_job_waits"] = round(
        stats.idle_gpu_seconds_while_fitting_job_waits
    )
    out["peak_gpus_in_use"] = stats.peak_gpus_in_use
    out["cluster_gpus"] = total_gpus
    out["jain_satisfaction"] = (
        round(stats.jain_weighted / stats.jain_time, 4) if stats.jain_time else None
    )
    out["guarantee_fraction"] = guarantee_fraction
    out["per_queue"] = {}
    for vc in vcs:
        mine = [j for j in jobs if j.queue == vc]
        if mine:
            out["per_queue"][vc] = _guarantee_entry(stats, vc, mine, vcs[vc], guarantees[vc])
    if members:
        out["tree"] = tree
        out["per_tenant"] = {}
        for tenant, vcs_of in members.items():
            mine = [j for j in jobs if j.queue in vcs_of]
            if mine:
                gpus = sum(vcs[vc] for vc in vcs_of)
                entry = _guarantee_entry(
                    tenant_stats, tenant, mine, gpus, tenant_guarantees[tenant]
                )
                entry["queues"] = vcs_of
                out["per_tenant"][tenant] = entry
    cs = stats.cycle_seconds
    out["cycles"] = stats.cycles
    out["cycle_seconds_mean"] = round(sum(cs) / len(cs), 4) if cs else None
    out["cycle_seconds_p99"] = round(percentile(cs, 99), 4) if cs else None
    out["wall_seconds"] = round(time.perf_counter() - wall, 1)
    out["stopped_early"] = bool(pending or any(j.end is None for j in jobs))
    return out


def fitting_idle_gpus(
    node_count: int,
    running: dict[str, dict[str, str]],
    pending: dict[str, Job],
    by_name: dict[str, Job],
    ceilings: dict[str, float] | None = None,
    held: dict[str, int] | None = None,
) -> int:
    """GPUs of the waiting jobs that would fit the idle GPUs now: taken in submission order,
    each gang placed consolidated on what the ones before it left, and only within its queue's
    ceiling (``ceilings``, a hard limit, against the GPUs the queue ``held`` and what the jobs
    before it took): what waiting work could hold at once."""
    used: dict[str, int] = {}
    for name, tasks in running.items():
        for task, gpus in _tasks(by_name[name]):
            node = tasks.get(task)
            if node is not None:
                used[node] = used.get(node, 0) + gpus
    free = [GPUS_PER_NODE - used.get(f"n{i:03d}", 0) for i in range(node_count)]
    taken = dict(held or {})
    fitting = 0
    for job in sorted(pending.values(), key=lambda j: (j.submit, j.name)):
        ceiling = (ceilings or {}).get(job.queue)
        if ceiling is not None and taken.get(job.queue, 0) + job.gpus > ceiling:
            continue
        if place_consolidated(free, job.pods()) is None:  # takes the nodes from free
            continue
        taken[job.queue] = taken.get(job.queue, 0) + job.gpus
        fitting += job.gpus
    return fitting


def _guarantee_entry(stats: SharedStats, key: str, jobs: list[Job], gpus: int, guarantee: int):
    """Job metrics plus how well the guarantee held, for one queue or tenant."""
    demand = stats.demand_seconds.get(key, 0.0)
    entry = job_metrics(jobs)
    entry["gpus"] = gpus
    entry["guarantee_gpus"] = guarantee
    entry["demand_seconds"] = round(demand, 1)
    entry["below_guarantee_time_share"] = (
        round(stats.below_guarantee_seconds.get(key, 0.0) / demand, 4) if demand else None
    )
    entry["starved_within_guarantee_time_share"] = (
        round(stats.starved_seconds.get(key, 0.0) / demand, 4) if demand else None
    )
    entry["max_shortfall_gpus"] = stats.max_shortfall.get(key, 0)
    return entry


def _tenant_states(
    state: dict[str, QueueState], members: dict[str, list[str]], deserved: dict[str, float | None]
) -> dict[str, QueueState]:
    """Each tenant as one queue: its queues' running and pending GPUs summed, the smallest
    pending job among them, and its deserved share."""
    out = {}
    for tenant, vcs_of in members.items():
        smallest = [state[vc].smallest_pending for vc in vcs_of]
        smallest = [s for s in smallest if s is not None]
        out[tenant] = QueueState(
            running_gpus=sum(state[vc].running_gpus for vc in vcs_of),
            pending_gpus=sum(state[vc].pending_gpus for vc in vcs_of),
            smallest_pending=min(smallest) if smallest else None,
            deserved=deserved.get(tenant),
        )
    return out


def _account(stats: SharedStats, state: dict[str, QueueState], dt: float) -> None:
    """Add ``dt`` seconds of the current state to the time integrals.

    Demand of a queue = its running GPUs + the pending jobs seen at the last cycle. The
    guarantee check ("at least its guarantee when it has demand") is measured two ways:
    below = allocated < min(guarantee, demand), which a gang larger than the headroom also
    trips; starved = some waiting job would fit within the guarantee (allocated + its GPUs <=
    guarantee) and still waits: the case reclaim must fix.
    Jain's index is over the queues with demand of allocated / min(deserved, demand): a queue
    is satisfied when it has what it asked for or what proportion deems it deserves (deserved
    alone is floored at the guarantee even for a queue asking less, which would read as
    unfairness). With nothing pending anywhere every queue has its demand, so 1.0.
    """
    if dt <= 0:
        return
    in_use = sum(qs.running_gpus for qs in state.values())
    stats.busy_gpu_seconds += in_use * dt
    stats.idle_gpu_seconds_while_fitting_job_waits += stats.fitting_idle_gpus * dt
    stats.peak_gpus_in_use = max(stats.peak_gpus_in_use, in_use)
    anyone_waits = any(qs.pending_gpus for qs in state.values())
    ratios = []
    for vc, qs in state.items():
        demand = qs.running_gpus + qs.pending_gpus
        if demand <= 0:
            continue
        stats.demand_seconds[vc] = stats.demand_seconds.get(vc, 0.0) + dt
        guarantee = stats.guarantees[vc]
        floor = min(guarantee, demand)
        if qs.running_gpus < floor:
            stats.below_guarantee_seconds[vc] = stats.below_guarantee_seconds.get(vc, 0.0) + dt
            stats.max_shortfall[vc] = max(stats.max_shortfall.get(vc, 0), floor - qs.running_gpus)
        if qs.smallest_pending is not None and qs.running_gpus + qs.smallest_pending <= guarantee:
            stats.starved_seconds[vc] = stats.starved_seconds.get(vc, 0.0) + dt
        if anyone_waits and qs.deserved:
            ratios.append(qs.running_gpus / min(qs.deserved, demand))
        else:
            ratios.append(1.0 if not anyone_waits else qs.running_gpus / demand)
    if ratios:
        stats.jain_weighted += jain(ratios) * dt
        stats.jain_time += dt


def _snapshot(nodes, queues, pending, running, by_name, phases, now) -> Snapshot:
    jobs = []
    for name, tasks in running.items():
        job = by_name[name]
        infos = tuple(
            TaskInfo(task, _requests(gpus), status=TaskStatus.RUNNING, node=tasks[task])
            for task, gpus in _tasks(job)
        )
        jobs.append(
            JobInfo(name, job.queue, infos, created=job.submit, phase=PodGroupPhase.RUNNING)
        )
    for name, job in pending.items():
        infos = tuple(TaskInfo(task, _requests(gpus)) for task, gpus in _tasks(job))
        jobs.append(JobInfo(name, job.queue, infos, created=job.submit, phase=phases.get(name)))
    return Snapshot(nodes, queues, tuple(jobs), now=now)


def _tasks(job: Job):
    return [(f"{job.name}-{k}", gpus) for k, gpus in enumerate(job.pods())]


def _requests(gpus: int) -> Resources:
    return Resources.of({"cpu": 1000 * gpus, "memory": 8 * 2**30 * gpus, "nvidia.com/gpu": gpus})
