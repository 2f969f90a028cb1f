"""A synthetic day (or H hours) on the demo cluster, through the real scheduling cycle.

`python -m scheduler soak --hours H --seed S [--conf FILE] [--step SECONDS]` (the command sets
up a throwaway SQLite database and calls `soak`; see bench/cli/soak.py). Each step of the
simulated clock: the jobs that arrive are submitted through `job_submit`, impatient pending
jobs are cancelled through `job_cancel`, one node goes away for a while (its pods vanish, the
inventory marks it unschedulable) and comes back, and one cycle runs:
`scheduler.adapters.orchestrator.scheduling_cycle_run` with the simulated backend, both on the
simulated clock. Nothing else drives time: no Celery, no wall clock in any decision.

The report (one JSON object) holds what the issue asks to watch, with the targets:
rescheduling evicts a job at most once per hour; every job that can never run as submitted
says so; no evicted pod is placed back on the node it left within the rescheduling interval.
"Never" is checked against an independent oracle written from DESIGN.md's quota model (pod
sizes against node sizes, selectors against labels when the conf runs the predicates plugin,
the gang against the cluster, the queue's capability and what the guarantees and borrowing
limit leave it), not against the core's code. Also reported: the GPU-seconds during which
waiting jobs would have fit the idle capacity (``IdleOracle``, from the rows too), the GPU
utilisation and the evictions per hour.

``--before-after`` runs the day twice, once with the quota plugins' idle-capacity departures
off (``switches_off``: upstream's demand and shares) and once as the conf states them, and
``compare`` sets the two reports side by side against the targets for those departures.
"""

from __future__ import annotations

import math
import random
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import yaml

START = datetime(2026, 1, 5, 0, 0, tzinfo=UTC)  # a Monday; any fixed instant keeps runs equal
HOUR = 3600.0
ARRIVALS_PER_HOUR = 9.0  # mean; the rate follows the day (busier in working hours)
NEVER_SHARE = 0.04  # arrivals built never to fit (too big, unknown GPU model)
IMPATIENT_SHARE = 0.2  # arrivals cancelled if still waiting after their patience
NODE_AWAY = ("gpu-worker-2", 0.4, 0.6)  # goes away at 40% of the run, back at 60%
QUEUE_MIX = (  # queue, share of arrivals, submitter (a member of the queue's tenant)
    ("nlp-train", 0.35, "researcher"),
    ("nlp-interactive", 0.15, "lead"),
    ("vision-train", 0.25, "lead"),
    ("vision-batch", 0.15, "lead"),
    ("platform-infra", 0.10, "admin"),
)
GPUS_PER_POD = ((1, 0.35), (2, 0.2), (4, 0.25), (8, 0.2))
PODS = ((1, 0.6), (2, 0.25), (4, 0.15))
GIB = 1024**3


@dataclass
class Arrival:
    at: float  # seconds after START
    queue: str
    submitter: str
    name: str
    pods: int
    gpus: int
    seconds: int
    priority: int = 0
    selector: dict[str, str] = field(default_factory=dict)
    patience: float | None = None  # cancel if not started this many seconds after arrival


def workload(*, hours: float, seed: int) -> list[Arrival]:
    """Arrivals over `hours`, deterministic for `seed`."""
    rng = random.Random(seed)
    arrivals: list[Arrival] = []
    t = 0.0
    end = hours * HOUR
    while True:
        hour_of_day = (t / HOUR) % 24
        rate = ARRIVALS_PER_HOUR * (
            0.6 + 0.8 * max(0.0, math.sin(math.pi * (hour_of_day - 7) / 12))
        )
        t += rng.expovariate(rate / HOUR)
        if t >= end:
            return arrivals
        queue, submitter = _pick(rng, [((q, s), w) for q, w, s in QUEUE_MIX])
        gpus, pods = _pick(rng, GPUS_PER_POD), _pick(rng, PODS)
        seconds = int(min(max(rng.lognormvariate(math.log(1200), 0.9), 120), 4 * HOUR))
        arrival = Arrival(t, queue, submitter, f"soak-{len(arrivals)}", pods, gpus, seconds)
        arrival.priority = 10 if rng.random() < 0.15 else 0
        if rng.random() < 0.1:
            arrival.selector = {"gpu-model": rng.choice(["H100", "A100"])}
        if rng.random() < NEVER_SHARE:
            # Too wide for the cluster, a pod wider than any node, or a model it does not have.
            kind = rng.choice(["wide", "big-pod", "model"])
            if kind == "wide":
                arrival.pods, arrival.gpus = 5, 8
            elif kind == "big-pod":
                arrival.pods, arrival.gpus = 1, 16
            else:
                arrival.selector = {"gpu-model": "B200"}
        elif rng.random() < IMPATIENT_SHARE:
            arrival.patience = rng.uniform(0.5, 2.0) * HOUR
        arrivals.append(arrival)


def _pick(rng: random.Random, weighted):
    total = sum(weight for _, weight in weighted)
    point = rng.uniform(0, total)
    for value, weight in weighted:
        point -= weight
        if point <= 0:
            return value
    return weighted[-1][0]


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now

    @property
    def elapsed(self) -> float:
        return (self.now - START).total_seconds()


def soak(
    *,
    hours: float,
    seed: int,
    step: float,
    conf_text: str | None,
    cluster_faults: bool = False,
    plan_every: float = 300.0,
) -> dict[str, Any]:
    """Run the soak against the configured (empty, migrated) database; the report. With
    `cluster_faults`, the cluster says no as bench/soak_faults.py tells. Every ``plan_every``
    simulated seconds (0: never) the plan-ahead task's work runs on the same clock, and each
    job's first estimate is kept to compare with when it started."""
    from django.core.management import call_command

    import portal.jobs.services as job_services
    from portal.cluster.models import Node, Placement, SimulatedPod
    from portal.cluster.services import node_inventory_load, node_inventory_sync
    from portal.jobs.models import Job
    from portal.scheduling.models import SchedulerConfig
    from scheduler.adapters.orchestrator import scheduling_cycle_run

    # Cycles run here, on the simulated clock; a submission must not queue one on Celery.
    job_services.cycle_kick = lambda: None
    clock = Clock()
    call_command("seed_demo", stdout=_Null(), stderr=_Null())
    _forget_demo_history()
    Job.objects.update(submitted_at=START, pending_reason_at=START)
    if conf_text is not None:
        SchedulerConfig.objects.update(active=False)
        SchedulerConfig.objects.create(version=10_000, text=conf_text, active=True)
    from portal.scheduling.mapping import active_conf

    interval = _rescheduling_interval(active_conf())
    from django.conf import settings

    inventory = node_inventory_load(path=settings.SIMULATED_CLUSTER_FILE)
    backend, faults = _backend(seed, clock, cluster_faults=cluster_faults)
    arrivals = workload(hours=hours, seed=seed)
    users = _users()
    watch = _Watch()
    pending_arrivals = list(arrivals)
    impatient: list[tuple[float, int]] = []
    away_from, back_at = NODE_AWAY[1] * hours * HOUR, NODE_AWAY[2] * hours * HOUR
    node_state = "up"
    cycles = 0
    end = hours * HOUR
    while clock.elapsed <= end:
        now = clock.elapsed
        while pending_arrivals and pending_arrivals[0].at <= now:
            arrival = pending_arrivals.pop(0)
            job = _submit(arrival, users)
            Job.objects.filter(pk=job.pk).update(
                submitted_at=clock.now, pending_reason_at=clock.now
            )
            watch.submitted[job.pk] = clock.now
            watch.arrivals[job.pk] = arrival
            if arrival.patience is not None:
                impatient.append((now + arrival.patience, job.pk))
        for due, job_id in [item for item in impatient if item[0] <= now]:
            impatient.remove((due, job_id))
            _cancel_if_waiting(job_id, users)
        if node_state == "up" and now >= away_from:
            # The node goes away: its pods vanish with it, the inventory loses it.
            node_inventory_sync(nodes=[n for n in inventory if n["name"] != NODE_AWAY[0]])
            SimulatedPod.objects.filter(node_name=NODE_AWAY[0]).delete()
            node_state = "away"
        elif node_state == "away" and now >= back_at:
            node_inventory_sync(nodes=inventory)
            node_state = "back"
        scheduling_cycle_run(backend=backend, now=clock)
        cycles += 1
        watch.after_cycle(clock, Placement, Node, Job)
        _after_cycle(watch, faults, clock, now, plan_every)
        clock.now += timedelta(seconds=step)
    report = _report(
        watch=watch, hours=hours, seed=seed, step=step, cycles=cycles, interval=interval,
        conf="file" if conf_text is not None else "seed",
    )  # fmt: skip
    if faults is not None:
        faults.into(report, backend, _max_in_window)
    return report


def _after_cycle(watch, faults, clock: Clock, now: float, plan_every: float) -> None:
    """The fault watch's check, and a plan-ahead run when one is due."""
    from scheduler.adapters.plan_ahead import plan_ahead_run

    if faults is not None:
        faults.after_cycle(clock.now)
    if plan_every and now >= watch.next_plan:
        watch.planned(plan_ahead_run(now=clock.now))
        watch.next_plan = now + plan_every


def _backend(seed: int, clock: Clock, *, cluster_faults: bool):
    """The simulated cluster, and with `cluster_faults` its faults' watch (else None)."""
    from bench.soak_faults import FaultWatch, faulty_backend
    from scheduler.adapters.cluster.simulated import SimulatedBackend

    if not cluster_faults:
        return SimulatedBackend(default_run_seconds=600, now=clock), None
    return faulty_backend(seed=seed, default_run_seconds=600, now=clock), FaultWatch()


def _forget_demo_history() -> None:
    """The seed's story of the last hours (finished jobs, their evictions, usage samples, on
    the wall clock) is not part of the simulated day: the report and fairshare's past use
    start from nothing."""
    from portal.jobs.models import Job
    from portal.scheduling.models import PreemptionEvent, QueueUsageRollup, QueueUsageSample
    from portal.tenants.models import TenantUsageSample

    PreemptionEvent.objects.all().delete()
    for model in (QueueUsageSample, QueueUsageRollup, TenantUsageSample):
        model.objects.all().delete()
    Job.objects.filter(status__in=Job.TERMINAL_STATUSES).delete()


class _Null:
    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


def _users() -> dict[str, Any]:
    from django.contrib.auth import get_user_model

    return {user.username: user for user in get_user_model().objects.all()}


def _submit(arrival: Arrival, users: dict[str, Any]):
    from portal.jobs.services import job_submit
    from portal.queues.models import Queue

    task = {
        "name": "worker",
        "replicas": arrival.pods,
        "image": "ghcr.io/example/trainer:latest",
        "gpus": arrival.gpus,
        "cpu_millis": 8000 * arrival.gpus,
        "memory_bytes": 64 * GIB * arrival.gpus,
        "node_selector": arrival.selector,
    }
    return job_submit(
        submitter=users[arrival.submitter],
        queue=Queue.objects.get(name=arrival.queue),
        name=arrival.name,
        tasks=[task],
        priority=arrival.priority,
        min_available=arrival.pods,
        expected_duration_seconds=arrival.seconds,
    )


def _cancel_if_waiting(job_id: int, users: dict[str, Any]) -> None:
    from portal.jobs.models import Job
    from portal.jobs.services import job_cancel

    job = Job.objects.get(pk=job_id)
    if job.status == Job.Status.PENDING:
        job_cancel(job=job, actor=users["admin"])


def _rescheduling_interval(conf) -> float:
    from scheduler.core.plugins import rescheduling

    option = conf.plugin(rescheduling.PLUGIN_NAME)
    return rescheduling.build(option.arguments).interval if option else 0.0


class _Watch:
    """What the report needs that the rows do not keep on the simulated clock: when each
    placement was made, the GPUs in use, the jobs the core ever called never runnable."""

    def __init__(self) -> None:
        self.submitted: dict[int, datetime] = {}
        self.arrivals: dict[int, Arrival] = {}
        self.first_bind: dict[int, datetime] = {}
        self.binds: dict[tuple[int, int], list[tuple[datetime, str]]] = defaultdict(list)
        self.last_placement = 0
        self.used: list[float] = []
        self.ever_never: set[int] = set()
        self.idle_fitting_gpus: list[float] = []  # per cycle: GPUs waiting jobs could use now
        self.fitting_streak: dict[int, int] = {}  # job -> cycles in a row it fitted and waited
        self.longest_fitting_wait: dict[int, int] = {}
        self.fitting_reasons: dict[int, str] = {}  # job -> its reason when its streak was longest
        self.never_oracle: _NeverOracle | None = None
        # Each job's first estimate: (outlook, earliest, latest or how far the plan looked).
        self.estimates: dict[int, tuple[str, float | None, float]] = {}
        self.next_plan = 0.0

    def planned(self, plan) -> None:
        for name, estimate in plan.starts.items():
            if int(name) not in self.estimates:
                latest = estimate.latest if estimate.latest is not None else plan.until
                self.estimates[int(name)] = (estimate.outlook.value, estimate.earliest, latest)

    def estimate_report(self, step: float) -> dict[str, Any]:
        """How the first estimate of each job that started compares with its start: within
        the range (one cycle's step either side: starts happen at cycles, the plan's instants
        anywhere), and how many started although estimated 'later' or 'never'."""
        started = {
            job_id: self.first_bind[job_id].timestamp()
            for job_id in self.estimates
            if job_id in self.first_bind
        }
        ranged = [
            (self.estimates[job_id], at)
            for job_id, at in started.items()
            if self.estimates[job_id][0] == "starts"
        ]
        within = [
            earliest is not None and earliest - step <= at <= latest + step
            for (_, earliest, latest), at in ranged
        ]
        return {
            "jobs_estimated": len(self.estimates),
            "started_with_a_range": len(ranged),
            "started_within_estimated_range_share": (
                round(sum(within) / len(within), 3) if within else None
            ),
            "started_early": sum(
                1
                for (_, earliest, _), at in ranged
                if earliest is not None and at < earliest - step
            ),
            "started_late": sum(1 for (_, _, latest), at in ranged if at > latest + step),
            "started_though_later_or_never": sum(
                1 for job_id in started if self.estimates[job_id][0] != "starts"
            ),
        }

    def after_cycle(self, clock: Clock, Placement, Node, Job) -> None:
        rows = Placement.objects.filter(id__gt=self.last_placement).values_list(
            "id", "job_id", "task_id", "replica", "node_name"
        )
        for pk, job_id, task_id, replica, node in rows.order_by("id"):
            self.last_placement = pk
            self.binds[(task_id, replica)].append((clock.now, node))
            self.first_bind.setdefault(job_id, clock.now)
        busy = Placement.objects.filter(
            state__in=[Placement.State.BOUND, Placement.State.RUNNING]
        ).values_list("gpus", flat=True)
        capacity = sum(Node.objects.filter(schedulable=True).values_list("gpu_count", flat=True))
        self.used.append(sum(busy) / capacity if capacity else 0.0)
        self.ever_never.update(
            Job.objects.filter(pending_kind=Job.PendingKind.NEVER).values_list("id", flat=True)
        )
        if self.never_oracle is None:
            self.never_oracle = _NeverOracle(**_conf_facts())
        fitting = IdleOracle().fitting_jobs(self.never_oracle)
        self.idle_fitting_gpus.append(sum(gpus for _, gpus, _ in fitting))
        streak = {job: self.fitting_streak.get(job, 0) + 1 for job, _, _ in fitting}
        for job, _, reason in fitting:
            if streak[job] > self.longest_fitting_wait.get(job, 0):
                self.longest_fitting_wait[job] = streak[job]
                self.fitting_reasons[job] = reason
        self.fitting_streak = streak


def _report(
    *, watch: _Watch, hours: float, seed: int, step: float, cycles: int, interval: float, conf: str
) -> dict[str, Any]:
    from portal.jobs.models import Job, JobTask
    from portal.scheduling.models import PreemptionEvent

    events = list(
        PreemptionEvent.objects.order_by("occurred_at", "id").values_list(
            "victim_job_id", "victim_task_name", "node_name", "action", "occurred_at"
        )
    )
    by_action = Counter(action for _, _, _, action, _ in events)
    per_job = Counter(job for job, _, _, _, _ in events)
    rescheduled: dict[int, list[datetime]] = defaultdict(list)
    for job, _, _, action, at in events:
        if action == PreemptionEvent.Action.RESCHEDULING:
            rescheduled[job].append(at)
    per_hour = max((_max_in_window(times, HOUR) for times in rescheduled.values()), default=0)
    task_ids = {
        (job, name): pk for pk, job, name in JobTask.objects.values_list("id", "job", "name")
    }
    back = 0
    for job, replica_name, node, _, at in events:
        task, _, replica = replica_name.rpartition("-")
        key = (task_ids.get((job, task)), int(replica) if replica.isdigit() else -1)
        back += any(
            bound_node == node and at <= when < at + timedelta(seconds=interval)
            for when, bound_node in watch.binds.get(key, ())
        )
    statuses = Counter(Job.objects.values_list("status", flat=True))
    waiting = Job.objects.filter(status__in=[Job.Status.PENDING, Job.Status.PREEMPTED])
    oracle = _NeverOracle(**_conf_facts())
    missed = [job.pk for job in waiting if oracle.never(job) and job.pending_kind != "never"]
    wrongly = [job.pk for job in waiting if not oracle.never(job) and job.pending_kind == "never"]
    ran_after_never = sorted(pk for pk in watch.ever_never if pk in watch.first_bind)
    slow = [job for job, cycles in watch.longest_fitting_wait.items() if cycles > 2]
    named = [job for job in slow if _names_a_rule(watch.fitting_reasons[job])]
    waits = [
        (watch.first_bind[pk] - submitted).total_seconds()
        for pk, submitted in watch.submitted.items()
        if pk in watch.first_bind
    ]
    report = {
        "hours": hours,
        "seed": seed,
        "step_seconds": step,
        "conf": conf,
        "cycles": cycles,
        "jobs": {"submitted": sum(statuses.values()), **dict(sorted(statuses.items()))},
        "evictions": dict(sorted(by_action.items())),
        "max_evictions_per_job": max(per_job.values(), default=0),
        "max_rescheduling_evictions_per_job_per_hour": per_hour,
        "placed_back_on_the_same_node_within_interval": back,
        "never_runnable_without_never_reason": len(missed),
        "never_reason_but_runnable": len(wrongly) + len(ran_after_never),
        "never_runnable_waiting": len([1 for job in waiting if oracle.never(job)]),
        "gpu_utilisation": round(statistics.fmean(watch.used), 3) if watch.used else 0.0,
        "idle_gpu_seconds_while_fitting_job_waits": round(sum(watch.idle_fitting_gpus) * step),
        "evictions_per_hour": round(len(events) / hours, 2),
        "jobs_fitting_idle_gpus_longer_than_two_cycles": len(slow),
        "of_which_reason_names_the_rule": len(named),
        "mean_wait_seconds": round(statistics.fmean(waits), 1) if waits else None,
        "median_wait_seconds": round(statistics.median(waits), 1) if waits else None,
        "estimated_start": watch.estimate_report(step),
    }
    report["targets"] = {
        "max_rescheduling_evictions_per_job_per_hour <= 1": per_hour <= 1,
        "never_runnable_without_never_reason == 0": not missed,
        "placed_back_on_the_same_node_within_interval == 0": back == 0,
    }
    report["targets_met"] = all(report["targets"].values())
    return report


def _max_in_window(times: list[datetime], seconds: float) -> int:
    best, start = 0, 0
    for end, at in enumerate(times):
        while (at - times[start]).total_seconds() >= seconds:
            start += 1
        best = max(best, end - start + 1)
    return best


def _conf_facts() -> dict[str, bool]:
    """What the oracle needs to know of the conf the cycles ran: whether node selectors bind
    (the cycle adds the predicates plugin when a conf lacks it), and whether shares divide down
    the tenant tree (then a queue's guarantee holds back only what it asks for, so the
    guarantees are no fixed limit; the queue's and its tenant's capabilities are)."""
    from portal.scheduling.mapping import active_conf, wants_tree
    from scheduler.adapters.feasibility import conf_with_hard_feasibility

    conf = conf_with_hard_feasibility(active_conf())
    option = conf.plugin("predicates")
    return {
        "selectors_bind": option is not None and option.enabled("enablePredicate"),
        "tree": wants_tree(conf),
    }


class _NeverOracle:
    """Whether a job can never run as submitted, from the rows and DESIGN.md's quota model
    alone: a pod larger than every node its selector allows, a selector no node matches, a gang
    the matching nodes cannot hold at once, or a gang above the queue's (or its tenant's, in
    the tree) capability or, without the tree, above what the cluster less other queues'
    guarantees (and its borrowing limit) leaves it."""

    def __init__(self, *, selectors_bind: bool, tree: bool) -> None:
        self.selectors_bind = selectors_bind
        self.tree = tree
        from portal.cluster.models import Node
        from portal.queues.models import Queue

        self.nodes = list(Node.objects.all())
        self.queues = {queue.pk: queue for queue in Queue.objects.select_related("tenant")}
        self.cluster = sum(node.gpu_count for node in self.nodes)
        self.guarantees = sum(q.guarantee_gpus or 0 for q in self.queues.values())
        self.open_weight = sum(
            q.weight for q in self.queues.values() if q.state == Queue.State.OPEN
        )

    def never(self, job) -> bool:
        tasks = list(job.tasks.all())
        gang = sorted(task.gpus for task in tasks for _ in range(task.replicas))
        wanted = sum(gang[: job.min_available])
        for task in tasks:
            selector = task.node_selector if self.selectors_bind else {}
            nodes = [n for n in self.nodes if _matches(n, selector)]
            if not nodes or task.gpus > max(n.gpu_count for n in nodes):
                return True
            pods = sum(n.gpu_count // task.gpus for n in nodes) if task.gpus else math.inf
            if len(tasks) == 1 and pods < job.min_available:
                return True
        return wanted > self._ceiling(self.queues[job.queue_id]) or wanted > self.cluster

    def _ceiling(self, queue) -> float:
        if self.tree:
            caps = [queue.capability_gpus, queue.tenant.capability_gpus]
            return float(min((cap for cap in caps if cap is not None), default=math.inf))
        ceiling = float(self.cluster - self.guarantees + (queue.guarantee_gpus or 0))
        if queue.capability_gpus is not None:
            ceiling = min(ceiling, queue.capability_gpus)
        if queue.borrowing_limit_gpus is not None and self.open_weight:
            nominal = max(self.cluster * queue.weight / self.open_weight, queue.guarantee_gpus or 0)
            ceiling = min(ceiling, nominal + queue.borrowing_limit_gpus)
        return max(ceiling, queue.guarantee_gpus or 0)


def _matches(node, selector: dict[str, str]) -> bool:
    labels = {**node.labels, **node.topology_labels}
    if node.gpu_model:
        labels.setdefault("gpu-model", node.gpu_model)
    return all(labels.get(key) == value for key, value in selector.items())


def _names_a_rule(reason: str) -> bool:
    """Does a waiting job's reason own up to the idle GPUs it could use, naming what holds it?"""
    return "idle" in reason


class IdleOracle:
    """Which waiting jobs would fit the idle capacity now, from the rows alone (not the core's
    code): per node its free cpu, memory and milli-GPU per device (what active placements
    leave), a job's gang (its ``min_available`` largest-first pods) on the nodes its selector
    allows, best fit per pod, within the stated capabilities and borrowing limits of its queue
    and tenant (hard limits; a deserved share is not). Jobs are tried in submission order, each
    taking what it would use, so the GPUs counted are GPUs waiting jobs could hold at once."""

    WAITING = ("pending", "admitted", "preempted")

    def __init__(self) -> None:
        from portal.cluster.models import Node, Placement
        from portal.queues.models import Queue

        self.nodes = {n.name: n for n in Node.objects.filter(schedulable=True, in_cluster=True)}
        self.free: dict[str, dict[str, Any]] = {
            name: {
                "cpu": node.cpu_millis,
                "memory": node.memory_bytes,
                "devices": [1000] * node.gpu_count,
            }
            for name, node in self.nodes.items()
        }
        self.queues = {q.pk: q for q in Queue.objects.select_related("tenant")}
        self.held: dict[str, float] = defaultdict(float)  # queue or "tenant/<name>" -> GPUs
        active = Placement.objects.filter(state__in=Placement.ACTIVE_STATES).select_related(
            "task", "job"
        )
        for placement in active:
            queue = self.queues[placement.job.queue_id]
            gpus = placement.gpu_milli / 1000 if placement.gpu_milli else placement.gpus
            self.held[queue.name] += gpus
            self.held[f"tenant/{queue.tenant.name}"] += gpus
            free = self.free.get(placement.node_name)
            if free is None:
                continue
            free["cpu"] -= placement.task.cpu_millis
            free["memory"] -= placement.task.memory_bytes
            milli = placement.gpu_milli or placement.gpus * 1000
            devices = list(placement.gpu_devices) or sorted(
                range(len(free["devices"])), key=lambda i: -free["devices"][i]
            )
            for index in devices:
                if milli <= 0 or index >= len(free["devices"]):
                    break
                taken = min(milli, free["devices"][index]) if placement.gpus == 0 else 1000
                free["devices"][index] -= taken
                milli -= taken
        self.cluster = sum(node.gpu_count for node in self.nodes.values())

    def fitting_jobs(self, never: _NeverOracle) -> list[tuple[int, float, str]]:
        """(job id, GPUs, its reason) of the waiting jobs that fit, packed in submission order;
        ``never`` leaves out the jobs that can never run."""
        from portal.jobs.models import Job

        waiting = (
            Job.objects.filter(status__in=self.WAITING)
            .exclude(placements__state__in=("bound", "running", "releasing"))
            .prefetch_related("tasks")
            .order_by("submitted_at", "id")
        )
        found = []
        for job in waiting:
            if never.never(job):
                continue
            gpus = self._place(job)
            if gpus is not None:
                found.append((job.pk, gpus, job.pending_reason or ""))
        return found

    def _place(self, job) -> float | None:
        queue = self.queues[job.queue_id]
        pods = [task for task in job.tasks.all() for _ in range(task.replicas)]
        pods.sort(key=lambda t: (-(t.gpus * 1000 + t.gpu_milli), t.name))
        pods = pods[: job.min_available]
        trial = {
            name: {**free, "devices": list(free["devices"])} for name, free in self.free.items()
        }
        gpus = 0.0
        for task in pods:
            placed = self._fit(task, trial)
            if placed is None:
                return None
            gpus += placed
        if not self._within_caps(queue, gpus):
            return None
        self.free = trial
        self.held[queue.name] += gpus
        self.held[f"tenant/{queue.tenant.name}"] += gpus
        return gpus

    def _fit(self, task, trial: dict[str, dict[str, Any]]) -> float | None:
        """Best fit (fewest free GPUs left) for one pod; its GPUs, or None."""
        best = None
        for name in sorted(trial):
            node, free = self.nodes[name], trial[name]
            if not _matches(node, task.node_selector or {}):
                continue
            if free["cpu"] < task.cpu_millis or free["memory"] < task.memory_bytes:
                continue
            milli, devices = self._devices(task, node, free["devices"])
            if devices is None:
                continue
            left = sum(free["devices"]) - milli
            if best is None or left < best[0]:
                best = (left, name, milli, devices)
        if best is None:
            return None
        _, name, milli, devices = best
        free = trial[name]
        free["cpu"] -= task.cpu_millis
        free["memory"] -= task.memory_bytes
        for index in devices:
            free["devices"][index] -= 1000 if task.gpus else milli
        return milli / 1000

    @staticmethod
    def _devices(task, node, devices: list[int]) -> tuple[int, list[int] | None]:
        if task.gpus:
            whole = [i for i, left in enumerate(devices) if left == 1000]
            return task.gpus * 1000, whole[: task.gpus] if len(whole) >= task.gpus else None
        milli = task.gpu_milli
        if task.gpu_memory_mib:
            device = node.gpu_memory_mib or 0
            memory = math.ceil(task.gpu_memory_mib * 1000 / device) if device else 1000
            milli = max(milli, min(memory, 1000))
        if not milli:
            return 0, []
        fits = sorted((left, i) for i, left in enumerate(devices) if left >= milli)
        return milli, [fits[0][1]] if fits else None

    def _within_caps(self, queue, gpus: float) -> bool:
        tenant = queue.tenant
        for name, cap in (
            (queue.name, queue.capability_gpus),
            (f"tenant/{tenant.name}", tenant.capability_gpus),
            (queue.name, self._borrowing_ceiling(queue)),
            (f"tenant/{tenant.name}", self._tenant_borrowing_ceiling(tenant)),
        ):
            if cap is not None and self.held[name] + gpus > cap + 1e-6:
                return False
        return True

    def _tenant_nominal(self, tenant) -> float:
        tenants = {q.tenant.pk: q.tenant for q in self.queues.values()}
        weight = sum(t.weight for t in tenants.values())
        share = self.cluster * tenant.weight / weight if weight else 0.0
        return max(share, tenant.guarantee_gpus or 0)

    def _tenant_borrowing_ceiling(self, tenant) -> float | None:
        if tenant.borrowing_limit_gpus is None:
            return None
        return self._tenant_nominal(tenant) + tenant.borrowing_limit_gpus

    def _borrowing_ceiling(self, queue) -> float | None:
        if queue.borrowing_limit_gpus is None:
            return None
        siblings = [
            q for q in self.queues.values() if q.tenant_id == queue.tenant_id and q.state == "open"
        ]
        weight = sum(q.weight for q in siblings)
        share = self._tenant_nominal(queue.tenant) * queue.weight / weight if weight else 0.0
        return max(share, queue.guarantee_gpus or 0) + queue.borrowing_limit_gpus


# The quota plugins' arguments that keep idle GPUs from waiting work, at upstream's values.
UPSTREAM_SWITCHES = {
    "proportion": {"lendIdle": False, "excludeNeverRunnable": False},
    "capacity": {"excludeNeverRunnable": False},
}
IDLE_TARGET = 0.05  # the idle figure after: at most this fraction of the figure before


def switches_off(conf_text: str) -> str:
    """The conf with ``UPSTREAM_SWITCHES`` set on the plugins it names, everything else as it
    is: what the day would look like without the departures, the "before" of a comparison."""
    data = yaml.safe_load(conf_text)
    for tier in data.get("tiers") or []:
        for plugin in tier.get("plugins") or []:
            off = UPSTREAM_SWITCHES.get(plugin.get("name"))
            if off is not None:
                plugin["arguments"] = {**(plugin.get("arguments") or {}), **off}
    return yaml.safe_dump(data, sort_keys=False)


def compare(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The two reports' work-conservation figures side by side, and the targets: the idle
    figure at most ``IDLE_TARGET`` of what it was, utilisation not lower, no more evictions per
    hour (each leg's own targets count too)."""
    keys = (
        "idle_gpu_seconds_while_fitting_job_waits",
        "gpu_utilisation",
        "evictions_per_hour",
        "mean_wait_seconds",
        "jobs_fitting_idle_gpus_longer_than_two_cycles",
        "of_which_reason_names_the_rule",
    )
    out: dict[str, Any] = {key: {"before": before[key], "after": after[key]} for key in keys}
    idle_before = before["idle_gpu_seconds_while_fitting_job_waits"]
    idle_after = after["idle_gpu_seconds_while_fitting_job_waits"]
    out["idle_after_over_before"] = round(idle_after / idle_before, 4) if idle_before else None
    out["targets"] = {
        f"idle_gpu_seconds_while_fitting_job_waits after <= {IDLE_TARGET:g} x before": (
            idle_after <= IDLE_TARGET * idle_before
        ),
        "gpu_utilisation after >= before": after["gpu_utilisation"] >= before["gpu_utilisation"],
        "evictions_per_hour after <= before": (
            after["evictions_per_hour"] <= before["evictions_per_hour"]
        ),
        "each run meets its own targets": before["targets_met"] and after["targets_met"],
    }
    out["targets_met"] = all(out["targets"].values())
    return out
