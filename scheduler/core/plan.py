"""Plan ahead: when each pending job is likely to start, by running the core forward in time.

Model. Take one cycle's snapshot. Every running job ends at its expected end, an uncertain
time (``runtimes.Span``: low, likely, high); a job the simulation starts ends its own expected
run time after it starts. At the future instants when jobs end, the same core places pending
jobs (the conf's placing actions only: enqueue, allocate, backfill; nothing is evicted), the
jobs it binds start there and hold their nodes until their own end, until every pending job
has started or the horizon (7 days by default) has passed. That is done three times: with
every end at its low value (``earliest``), its likely value (``likely``) and its high value
(``latest``). The three runs share the snapshot's own instant, where the cycle itself would
place what fits now.

What a pending job gets (``StartEstimate``): ``never`` when the core's own verdict says it can
never run as submitted (with its sentence); ``later`` when not even the earliest run starts it
within the horizon; otherwise ``starts`` with the range. ``likely`` is None when the likely run
does not start it within reach, or starts it only after the end of a job whose likely run time
was unknown (a job with no estimate anywhere runs until its bound in that run, and any start
that follows such an end rests on a guess, so only the range is said); ``latest`` is None when
the latest run does not start it within reach (``Plan.until``).

Cost. Ends are coalesced: an instant takes the first end left and every end within
``resolution`` seconds of it or ``growth`` times its distance from the snapshot, whichever is
wider, and runs when the last of those has ended: fine near now, coarse days ahead, so a job's
start may be late by up to that window, never early. Each run has ``max_instants`` instants;
when ends are dense, windows widen further so that the instants left, growing by one factor,
reach the horizon (the last takes every end up to it). An instant where no waiting pod could
fit the cluster's free resources summed over nodes is skipped without running the core
(nothing could be placed there). So a plan runs the core at most 1 + 3 x ``max_instants``
times, each time building a session from a snapshot exactly as a cycle does, with the placing
actions only. Jobs the last instant leaves waiting are "not before ``Plan.until``".

Releasing pods (evicted, deleted with their grace period or kept until a preemption notice's
deadline) leave their nodes at their own instants (``releases``), and the replica waits to be
placed again, as the shell makes a new pod for it: a preemptor waiting for a victim's
resources starts when they are free, not when some other job ends.

What it cannot know: jobs submitted later (they may take a queue's share or the free room
first), evictions (preempt and reclaim do not run), jobs cancelled early, nodes coming and
going; and run times only as well as the history predicts them.

Pure and deterministic: times are the snapshot's; no clock.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum

from scheduler.core.actions import ACTIONS
from scheduler.core.config import SchedulerConf
from scheduler.core.cycle import open_session
from scheduler.core.resources import Resources, add_into
from scheduler.core.runtimes import Span
from scheduler.core.state import READY_STATUSES
from scheduler.core.types import (
    OCCUPYING_STATUSES,
    Bind,
    JobInfo,
    PodGroupPhase,
    Snapshot,
    TaskInfo,
    TaskStatus,
)
from scheduler.core.verdict import never_reason

DAY = 86400.0
DEFAULT_HORIZON = 7 * DAY
# The actions that place pods without evicting any, in the order the conf lists them.
PLACING_ACTIONS = frozenset({"enqueue", "allocate", "backfill"})


class Outlook(StrEnum):
    STARTS = "starts"  # at least the earliest run starts it within reach
    LATER = "later"  # not within reach even if every job ends at its earliest
    NEVER = "never"  # the core's verdict: it can never run as submitted


class Scenario(StrEnum):
    EARLIEST = "low"
    LIKELY = "likely"
    LATEST = "high"


@dataclass(frozen=True, slots=True)
class PlanLimits:
    """How far and how finely to look ahead; the cost bound."""

    horizon: float = DEFAULT_HORIZON
    resolution: float = 60.0
    growth: float = 0.25
    max_instants: int = 14

    def __post_init__(self) -> None:
        for name in ("horizon", "resolution"):
            value = getattr(self, name)
            if not 0 < value < math.inf:
                raise ValueError(f"{name}: must be a positive number of seconds, got {value}")
        if not 0 <= self.growth < math.inf:
            raise ValueError(f"growth: must be >= 0, got {self.growth}")
        if self.max_instants < 1:
            raise ValueError(f"max_instants: must be at least 1, got {self.max_instants}")


@dataclass(frozen=True, slots=True)
class StartEstimate:
    outlook: Outlook
    earliest: float | None = None
    likely: float | None = None
    latest: float | None = None
    reason: str = ""  # the core's sentence for "never"


@dataclass(frozen=True, slots=True)
class Plan:
    now: float
    until: float  # how far every run looked: now + horizon, unless the instant cap cut one
    starts: dict[str, StartEstimate]  # per job that was pending in the snapshot
    instants: int  # core runs in all (the cost)


def plan_starts(
    snapshot: Snapshot,
    conf: SchedulerConf,
    *,
    ends: Mapping[str, Span] | None = None,
    durations: Mapping[str, Span] | None = None,
    releases: Mapping[str, Span] | None = None,
    limits: PlanLimits | None = None,
) -> Plan:
    """Estimated starts of the snapshot's pending jobs.

    ``ends``: per running job, when it ends (snapshot times). ``durations``: per pending job,
    its run time in seconds once started. A job missing from both is unknown: it may end at
    once, or not within the horizon. ``releases``: per releasing pod (task name), when it is
    gone (snapshot times); one missing from it is gone by the next instant, ``resolution``
    after the snapshot."""
    limits = limits or PlanLimits()
    ends, durations, releases = ends or {}, durations or {}, releases or {}
    placing = replace(conf, actions=tuple(a for a in conf.actions if a in PLACING_ACTIONS))
    now = snapshot.now
    world = _World.of(snapshot)
    pending = sorted(world.waiting)
    first = _instant(world, placing, now, with_never=True)
    # Those can start in no run: out of the count of jobs left to start, though the core still
    # sees them (they may weigh in its shares).
    world.waiting.difference_update(first.never)
    # jobs whose likely end is unknown: what starts after one of them ends has no likely time
    guessed = {
        name
        for name in world.running
        if _unknown(durations.get(name) if name in first.started else ends.get(name))
    }
    releasing = world.releasing()
    gone = Span.exactly(now)  # a releasing pod without its own instant: gone by the next
    runs: dict[Scenario, _Run] = {}
    for scenario in Scenario:
        heap = [
            (_end_at(ends.get(name), scenario, now, limits), name, "") for name in world.running
        ]
        heap += [(now + _value(durations.get(name), scenario), name, "") for name in first.started]
        heap += [
            (_end_at(releases.get(task, gone), scenario, now, limits), job, task)
            for task, job in releasing
        ]
        runs[scenario] = _simulate(
            world.copy(), placing, heap, scenario, limits, durations, set(guessed)
        )
    estimates: dict[str, StartEstimate] = {}
    for name in pending:
        if name in first.never:
            estimates[name] = StartEstimate(Outlook.NEVER, reason=first.never[name])
        elif name in first.started:
            estimates[name] = StartEstimate(Outlook.STARTS, now, now, now)
        else:
            estimates[name] = _estimate(name, runs)
    until = min(run.until for run in runs.values())
    instants = 1 + sum(run.instants for run in runs.values())
    return Plan(now=now, until=until, starts=estimates, instants=instants)


def next_start(plan: Plan, jobs: Iterable[str]) -> StartEstimate | None:
    """The soonest start among ``jobs`` (a queue's "next start"): by likely start, a job with
    none after those with one, then by earliest; None when none of them may start."""
    found = [plan.starts[name] for name in jobs if name in plan.starts]
    starting = [e for e in found if e.outlook is Outlook.STARTS]
    if not starting:
        return None
    return min(
        starting,
        key=lambda e: (e.likely is None, e.likely or 0.0, e.earliest or 0.0, e.latest or math.inf),
    )


def _estimate(name: str, runs: dict[Scenario, _Run]) -> StartEstimate:
    found = [run.starts[name] for run in runs.values() if name in run.starts]
    if not found:
        return StartEstimate(Outlook.LATER)
    likely_run = runs[Scenario.LIKELY]
    likely = likely_run.starts.get(name)
    if likely is not None and likely >= likely_run.guessed_from:
        likely = None  # follows the end of a job nothing could estimate
    latest = max(found) if len(found) == len(runs) else None
    return StartEstimate(Outlook.STARTS, min(found), likely, latest)


# one run -----------------------------------------------------------------------------------
@dataclass(slots=True)
class _Run:
    starts: dict[str, float]
    until: float
    instants: int
    last: float = 0.0  # the last instant the core ran at
    # the first instant at which a job whose likely end was unknown had ended (likely run)
    guessed_from: float = math.inf


def _value(span: Span | None, scenario: Scenario) -> float:
    """A run time or end under ``scenario``; an unknown likely value takes the high one."""
    span = span or Span.unknown()
    if scenario is Scenario.EARLIEST:
        return span.low
    if scenario is Scenario.LATEST or span.likely is None:
        return span.high
    return span.likely


def _end_at(span: Span | None, scenario: Scenario, now: float, limits: PlanLimits) -> float:
    """A running job's end; one already due (overdue, or that may end at once) ends
    ``resolution`` after the snapshot, the earliest a next cycle would see it gone."""
    end = _value(span or Span.unknown().shifted(now), scenario)
    return end if end > now else now + limits.resolution


def _simulate(
    world: _World,
    conf: SchedulerConf,
    heap: list[tuple[float, str, str]],
    scenario: Scenario,
    limits: PlanLimits,
    durations: Mapping[str, Span],
    guessed: set[str],
) -> _Run:
    """Advance from instant to instant until no pending job is left to start, the horizon
    passes, or the instant cap is reached."""
    heapq.heapify(heap)
    now = world.snapshot.now
    horizon_end = now + limits.horizon
    run = _Run(starts={}, until=horizon_end, instants=0)
    while world.waiting and heap and heap[0][0] <= horizon_end:
        if run.instants >= limits.max_instants:
            run.until = run.last  # jobs started after the last window's ends went unseen
            break
        window = _window(heap[0][0], now, limits, limits.max_instants - run.instants)
        at = heap[0][0]
        while heap and heap[0][0] <= window:
            at, name, task = heapq.heappop(heap)
            if task:
                world.release(name, task)
                continue
            world.end(name)
            if scenario is Scenario.LIKELY and name in guessed:
                run.guessed_from = min(run.guessed_from, at)
        if not world.anything_fits():
            continue
        run.instants += 1
        run.last = at
        for name in _instant(world, conf, at).started:
            run.starts[name] = at
            span = durations.get(name)
            if _unknown(span):
                guessed.add(name)
            heapq.heappush(heap, (at + _value(span, scenario), name, ""))
    return run


def _window(first: float, now: float, limits: PlanLimits, left: int) -> float:
    """The last end the instant after ``first`` takes: within ``resolution`` or ``growth``
    times the distance from now of ``first``, widened so that ``left`` instants whose windows
    grow by the same factor reach the horizon (the last one takes every end up to it)."""
    distance = max(first - now, limits.resolution)
    reach = (limits.horizon / distance) ** (1 / left) if limits.horizon > distance else 1.0
    wide = now + distance * reach
    return min(
        max(first + limits.resolution, first + limits.growth * distance, wide), now + limits.horizon
    )


def _unknown(span: Span | None) -> bool:
    return span is None or span.likely is None


# the state between instants ------------------------------------------------------------------
@dataclass(slots=True)
class _Step:
    started: list[str]
    never: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class _World:
    """The cluster between two instants: nodes and queues as in the snapshot, and its jobs as
    snapshot records, those that hold resources apart from those that wait."""

    snapshot: Snapshot
    running: dict[str, JobInfo]
    pending: dict[str, JobInfo]
    waiting: set[str]  # pending jobs that may still start
    free: dict[str, float]  # allocatable left, summed over all nodes
    needs: dict[str, Resources]  # per job with pods to place, the least it needs to start

    @classmethod
    def of(cls, snapshot: Snapshot) -> _World:
        free: dict[str, float] = {}
        for node in snapshot.nodes:
            add_into(free, node.allocatable)
            add_into(free, node.used_by_others, -1)
        world = cls(snapshot, {}, {}, set(), free, {})
        for job in snapshot.jobs:
            world.add(job)
        world.waiting = set(world.pending)
        return world

    def copy(self) -> _World:
        return _World(
            self.snapshot,
            dict(self.running),
            dict(self.pending),
            set(self.waiting),
            dict(self.free),
            dict(self.needs),
        )

    def add(self, job: JobInfo) -> None:
        for task in job.tasks:
            if task.status in OCCUPYING_STATUSES and task.node is not None:
                add_into(self.free, task.requests, -1)
        if _started(job):
            self.running[job.name] = job
            self.pending.pop(job.name, None)
            self.waiting.discard(job.name)
        else:
            self.pending[job.name] = job
        self._need_update(job)

    def _need_update(self, job: JobInfo) -> None:
        need = _least_need(job)
        if need is None:
            self.needs.pop(job.name, None)
        else:
            self.needs[job.name] = need

    def end(self, name: str) -> None:
        """A running job ends: its pods leave their nodes."""
        job = self.running.pop(name, None)
        if job is None:
            return
        for task in job.tasks:
            if task.status in OCCUPYING_STATUSES and task.node is not None:
                add_into(self.free, task.requests)
        self.needs.pop(name, None)

    def releasing(self) -> list[tuple[str, str]]:
        """(task, job) of every releasing pod on a node, in name order."""
        return sorted(
            (task.name, job.name)
            for job in self.jobs()
            for task in job.tasks
            if task.status is TaskStatus.RELEASING and task.node is not None
        )

    def release(self, name: str, task_name: str) -> None:
        """A releasing pod is gone: its node's resources are free and its replica waits to be
        placed again (a job that has ended meanwhile freed them already)."""
        pool = self.running if name in self.running else self.pending
        job = pool.get(name)
        if job is None:
            return
        tasks = []
        for task in job.tasks:
            if task.name == task_name and task.status is TaskStatus.RELEASING and task.node:
                add_into(self.free, task.requests)
                task = replace(
                    task, status=TaskStatus.PENDING, node=None, gpu_indices=(), started=None
                )
            tasks.append(task)
        pool[name] = job = replace(job, tasks=tuple(tasks))
        self._need_update(job)

    def place(self, binds: list[Bind]) -> None:
        """Bound pods run on their nodes from now on; the jobs they complete have started."""
        by_job: dict[str, dict[str, Bind]] = {}
        for bind in binds:
            by_job.setdefault(bind.job, {})[bind.task] = bind
        for name, bound in sorted(by_job.items()):
            job = self.running.pop(name, None) or self.pending.pop(name)
            for task in job.tasks:
                if task.status in OCCUPYING_STATUSES and task.node is not None:
                    add_into(self.free, task.requests)  # added back by ``add``
            tasks = tuple(_bound(task, bound.get(task.name)) for task in job.tasks)
            # a job that starts takes the phase its pods give it
            phase = job.phase if job.phase is PodGroupPhase.RUNNING else None
            self.add(replace(job, tasks=tasks, phase=phase))

    def admit(self, phases: Mapping[str, PodGroupPhase]) -> None:
        """Pending jobs keep the phase the session gave them (enqueue's admission)."""
        for name, phase in phases.items():
            job = self.pending.get(name)
            if job is not None and job.phase is not phase:
                self.pending[name] = replace(job, phase=phase)

    def anything_fits(self) -> bool:
        """Whether some waiting pod could fit the free resources summed over all nodes: when
        none can, the core would place nothing (each pod needs room on one node)."""
        free = Resources(self.free)
        return any(need.less_equal(free) for need in set(self.needs.values()))

    def jobs(self) -> tuple[JobInfo, ...]:
        return tuple(self.running.values()) + tuple(self.pending.values())


def _ready_and_need(job: JobInfo) -> tuple[int, int]:
    ready = sum(1 for task in job.tasks if task.status in READY_STATUSES)
    return ready, len(job.tasks) if job.min_available is None else job.min_available


def _started(job: JobInfo) -> bool:
    ready, need = _ready_and_need(job)
    return ready >= need and ready > 0


def _least_need(job: JobInfo) -> Resources | None:
    """Per resource, the least the pods it still waits for ask for together: its missing gang
    members for a job that waits, one pod for a running job with pods left to place; None
    when it has none."""
    waiting = [t for t in job.tasks if t.status is TaskStatus.PENDING]
    if not waiting:
        return None
    ready, need = _ready_and_need(job)
    count = min(max(need - ready, 1), len(waiting))
    names = sorted({name for task in waiting for name in task.requests.explicit()})
    return Resources(
        {name: sum(sorted(t.requests.get(name) for t in waiting)[:count]) for name in names}
    )


def _bound(task: TaskInfo, bind: Bind | None) -> TaskInfo:
    if bind is None:
        return task
    return replace(task, status=TaskStatus.RUNNING, node=bind.node, gpu_indices=bind.gpus)


def _instant(world: _World, conf: SchedulerConf, at: float, with_never: bool = False) -> _Step:
    """Run the placing actions once at ``at``, as a cycle would; the world takes what they
    bound. With ``with_never``, the core's never-runnable verdicts on what still waits."""
    snapshot = replace(world.snapshot, jobs=world.jobs(), now=at)
    ssn = open_session(snapshot, conf)
    for action in conf.actions:
        ACTIONS[action].execute(ssn)
    step = _Step(started=[])
    phases: dict[str, PodGroupPhase] = {}
    for name in sorted(world.waiting):
        job = ssn.jobs[name]
        if job.ready_task_num() >= job.min_available and job.ready_task_num() > 0:
            step.started.append(name)
            continue
        phases[name] = job.phase
        if with_never:
            sentence = never_reason(ssn, job)
            if sentence is not None:
                step.never[name] = sentence
    binds = list(ssn.binds)
    ssn.release()
    world.place(binds)
    world.admit(phases)
    return step


__all__ = [
    "DEFAULT_HORIZON",
    "Outlook",
    "Plan",
    "PlanLimits",
    "StartEstimate",
    "next_start",
    "plan_starts",
]
