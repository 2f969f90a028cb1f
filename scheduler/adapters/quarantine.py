"""Failure isolation in the cycle: a job whose data makes a phase fail is quarantined, and the
cycle goes on for every other job.

Two ways to find the job at fault:

* Where a phase works job by job (the snapshot's JobInfo of each job, reconcile's desired pod
  of each placement), the failing job is caught on the spot (`Faults.call`) and left out.
* Where a phase works on the whole batch (the core's `run_cycle`, persist's one transaction),
  the culprit is found by bisecting the job set and re-running the phase on subsets
  (`find_culprits`). Sound for the core, which is pure and deterministic; persist's trials run
  in a transaction that is rolled back, on copies of the rows it updates in memory. After a
  persist culprit, the core runs again without it, so no decision made for its sake (an
  eviction to make room for it) is written.

A quarantined job (`portal.jobs.services.job_quarantine`, where job statuses change) has status
`quarantined` and a reason naming the phase and the error, shown on its page and in the API;
its pods are released. The snapshot leaves it out and holds its still-active placements'
resources off their nodes until the pods are gone. Its owner cancels it and submits a corrected
job; a site admin may release it back to pending.

Not isolated, because they say nothing about any job's data: the cycle's lost lock, a database
that cannot be reached or is locked, a task time limit, memory exhaustion. Nor is a failure that
a run without any job reproduces. Those fail the cycle.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, TypeVar

from celery.exceptions import SoftTimeLimitExceeded
from django.db import DatabaseError, InterfaceError, OperationalError, transaction

from jobspec.limits import JobLimits, job_limit_errors, task_limit_errors
from scheduler.adapters.lock import CycleAbandoned
from scheduler.adapters.portal_port import (
    Event,
    JobRow,
    Placement,
    PlacementRow,
    TaskRow,
    allows,
    job_quarantine,
    task_requests,
    transition,
)
from scheduler.core.resources import PODS, Resources
from scheduler.core.types import OCCUPYING_STATUSES, CycleResult, NodeInfo, Snapshot

if TYPE_CHECKING:  # the snapshot module calls this one while it builds
    from scheduler.adapters.snapshot import SnapshotBundle, SnapshotIndex

logger = logging.getLogger(__name__)

T = TypeVar("T")
# A phase gives up after this many culprits in one cycle: past that, something other than
# a job's data is more likely at fault, and every trial costs a (partial) re-run.
MAX_CULPRITS = 3
QUARANTINED_NOTE = "job {job} quarantined ({phase}: {error})"
NOT_ISOLATED = (
    CycleAbandoned,
    OperationalError,
    InterfaceError,
    SoftTimeLimitExceeded,
    MemoryError,
    RecursionError,
)


def isolatable(error: BaseException) -> bool:
    """Whether `error` may be a job's data at fault (worth looking for the job)."""
    return isinstance(error, Exception) and not isinstance(error, NOT_ISOLATED)


def describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


@dataclasses.dataclass(frozen=True, slots=True)
class Fault:
    job_id: int
    phase: str
    error: str


class Faults(list[Fault]):
    """The jobs a phase left out, in the order it met them."""

    def call(self, phase: str, job_id: int, build: Callable[..., T], *args: object) -> T | None:
        """`build(*args)`, or None (and a Fault) if it raises for this job's data."""
        try:
            return build(*args)
        except Exception as error:
            if not isolatable(error):
                raise
            logger.warning("scheduling %s failed on job %s", phase, job_id, exc_info=True)
            self.append(Fault(job_id=job_id, phase=phase, error=describe(error)))
            return None


class OverLimits(ValueError):
    """A stored job above the limits in force (stored before they existed, or above a limit an
    operator lowered since)."""


def within_limits(job: JobRow, tasks: Sequence[TaskRow], limits: JobLimits) -> None:
    """Raise OverLimits naming every limit the job's stored numbers break. The numbers that
    cost a cycle time or overflow are compared first, in plain comparisons: this runs for
    every job not placed yet, every cycle (0.2 us a job; building the messages costs 10)."""
    total = 0
    for task in tasks:
        total += task.replicas
        if (
            task.replicas > limits.replicas_per_task
            or task.gpus > limits.gpus_per_pod
            or task.cpu_millis > limits.cpu_millis_per_pod
            or task.memory_bytes > limits.memory_bytes_per_pod
        ):
            break
    else:
        if total <= limits.replicas_per_job:
            return
    errors: dict[str, list[str]] = {}
    for index, task in enumerate(tasks):
        errors |= task_limit_errors(task, limits=limits, prefix=f"tasks[{index}].")
    errors |= job_limit_errors(
        replicas=[task.replicas for task in tasks],
        priority=job.priority,
        expected_duration_seconds=None,
        limits=limits,
    )
    if errors:
        raise OverLimits("; ".join(f"{key}: {m}" for key, ms in errors.items() for m in ms))


# --- finding the culprit of a batch -----------------------------------------------------------


def find_culprits(
    fails: Callable[[Sequence[str]], Exception | None],
    keys: Sequence[str],
    *,
    limit: int = MAX_CULPRITS,
) -> list[tuple[str, Exception]]:
    """Jobs without which the batch stops failing, each with the error it caused.

    `fails(subset)` runs the phase on the jobs `subset` and returns its error, or None. Each
    culprit is found with at most 2 log2(n) runs; the search stops at the first run that
    succeeds without the culprits found so far, or gives up (returning none) when the phase
    fails without any job at all: then no job's data is to blame.
    """
    if fails(()) is not None:
        return []
    remaining = list(keys)
    found: list[tuple[str, Exception]] = []
    while len(found) < limit:
        error = fails(remaining)
        if error is None:
            break
        key, error = _one_culprit(fails, remaining, error)
        found.append((key, error))
        remaining.remove(key)
    return found


def _one_culprit(
    fails: Callable[[Sequence[str]], Exception | None], keys: list[str], error: Exception
) -> tuple[str, Exception]:
    """Halve the failing set while one half fails alone. When neither does, the failure
    needs jobs from both: keep the first half as context (it passed alone) and search the
    second. Invariant: `fails(context + candidates)` fails and `fails(context)` does not, so
    the last candidate left makes the difference."""
    context: list[str] = []
    candidates = keys
    while len(candidates) > 1:
        half = len(candidates) // 2
        left, right = candidates[:half], candidates[half:]
        if (failure := fails(context + left)) is not None:
            candidates, error = left, failure
        elif (failure := fails(context + right)) is not None:
            candidates, error = right, failure
        else:
            context, candidates = context + left, right
    return candidates[0], error


# --- the snapshot without some jobs -----------------------------------------------------------


def snapshot_without(snapshot: Snapshot, drop: set[str]) -> Snapshot:
    """`snapshot` without the jobs named in `drop`; the resources their placed tasks occupy are
    taken off their nodes, so nothing else is placed into them meanwhile."""
    held: dict[str, Resources] = {}
    jobs = []
    for job in snapshot.jobs:
        if job.name not in drop:
            jobs.append(job)
            continue
        for task in job.tasks:
            if task.node is not None and task.status in OCCUPYING_STATUSES:
                held[task.node] = held.get(task.node, Resources()).add(_one_pod(task.requests))
    return dataclasses.replace(
        snapshot, jobs=tuple(jobs), nodes=nodes_held_off(snapshot.nodes, held)
    )


def nodes_held_off(nodes: Iterable[NodeInfo], held: dict[str, Resources]) -> tuple[NodeInfo, ...]:
    return tuple(
        dataclasses.replace(
            node, allocatable=node.allocatable.sub(held[node.name]).clamp_non_negative()
        )
        if node.name in held
        else node
        for node in nodes
    )


def placements_held(
    placements: Iterable[PlacementRow], tasks: dict[int, TaskRow]
) -> dict[str, Resources]:
    """What the active placements of jobs left out of the snapshot hold, per node."""
    held: dict[str, Resources] = {}
    for placement in placements:
        if placement.state not in Placement.ACTIVE_STATES:
            continue
        task = tasks.get(placement.task_id)
        gpus = max(placement.gpu_milli / 1000, placement.gpus)  # what it holds on its node
        requests = Resources.of(
            {**(task_requests(task).explicit() if task is not None else {}), "gpu": gpus}
        )
        node = placement.node_name
        held[node] = held.get(node, Resources()).add(_one_pod(requests))
    return held


def _one_pod(requests: Resources) -> Resources:
    return requests.add(Resources({PODS: 1}))


def index_forget(index: SnapshotIndex, job_id: int) -> None:
    """Drop what a job left in `index` before its JobInfo failed half-way."""
    for name, replica in list(index.pending.items()):
        if replica.task.job_id == job_id:
            del index.pending[name]
            job = index.jobs.get(str(job_id))
            if job is not None and job.queue is not None:
                index.pending_gpus[job.queue.name] -= _gpus_asked(index, replica.task)
    for name, placement in list(index.placements.items()):
        if placement.job_id == job_id:
            del index.placements[name]


def bundle_without(bundle: SnapshotBundle, drop: set[str]) -> SnapshotBundle:
    """The bundle as if the jobs `drop` were not in it (quarantined ones, for the core and
    persist). Rows are shared: persist updates the kept ones in place, as it always does."""
    index = bundle.index
    kept_index = dataclasses.replace(
        index,
        jobs={key: job for key, job in index.jobs.items() if key not in drop},
        placements={name: p for name, p in index.placements.items() if str(p.job_id) not in drop},
        pending={name: r for name, r in index.pending.items() if str(r.task.job_id) not in drop},
        pending_gpus=_pending_gpus(index, drop),
    )
    return dataclasses.replace(
        bundle, snapshot=snapshot_without(bundle.snapshot, drop), index=kept_index
    )


def _pending_gpus(index: SnapshotIndex, drop: set[str]) -> dict[str, float]:
    gpus: dict[str, float] = defaultdict(float, index.pending_gpus)
    for replica in index.pending.values():
        key = str(replica.task.job_id)
        if key in drop and (job := index.jobs.get(key)) is not None and job.queue is not None:
            gpus[job.queue.name] -= _gpus_asked(index, replica.task)
    return gpus


def _gpus_asked(index: SnapshotIndex, task: TaskRow) -> float:
    """A pending replica's GPUs as the snapshot counted them in `pending_gpus`."""
    return task_requests(task, index.device_mib).get("gpu")


def bundle_copy_of(bundle: SnapshotBundle, keep: Sequence[str]) -> SnapshotBundle:
    """Only the jobs `keep`, with copies of every row persist updates in memory (job and
    placement rows), so a trial that is rolled back leaves the real ones as they were."""
    keep_set = set(keep)
    trial = bundle_without(bundle, set(bundle.index.jobs) - keep_set)
    index = trial.index
    index.jobs = {key: dataclasses.replace(job) for key, job in index.jobs.items()}
    index.placements = {name: dataclasses.replace(p) for name, p in index.placements.items()}
    return trial


def result_of(result: CycleResult, keep: Iterable[str]) -> CycleResult:
    """The decisions about the jobs `keep` only (an eviction also needs its preemptor kept)."""
    keep = set(keep)
    return dataclasses.replace(
        result,
        binds=tuple(bind for bind in result.binds if bind.job in keep),
        evictions=tuple(
            evict
            for evict in result.evictions
            if evict.job in keep and (evict.preemptor_job is None or evict.preemptor_job in keep)
        ),
        pipelined=tuple(p for p in result.pipelined if p.job in keep),
        pending_reasons={k: v for k, v in result.pending_reasons.items() if k in keep},
        phases={k: v for k, v in result.phases.items() if k in keep},
    )


# --- the cycle's phases, isolated -------------------------------------------------------------


class _RolledBack(Exception):
    pass


@dataclasses.dataclass
class Isolation:
    """One cycle's quarantines: applies them to the bundle and writes them, and keeps a note
    of each for the CycleRun."""

    now: Callable[[], datetime]
    notes: list[str] = dataclasses.field(default_factory=list)
    quarantined: set[str] = dataclasses.field(default_factory=set)

    def snapshot(self, build: Callable[..., SnapshotBundle]) -> SnapshotBundle:
        """`build(now=...)`, without the jobs it could not read (quarantined)."""
        bundle = build(now=self.now())
        return self.quarantine(bundle, bundle.faults)

    def quarantine(self, bundle: SnapshotBundle, faults: Iterable[Fault]) -> SnapshotBundle:
        """Write each fault's quarantine and return the bundle without those jobs."""
        drop: set[str] = set()
        for fault in faults:
            key = str(fault.job_id)
            drop.add(key)
            if key in self.quarantined:
                continue
            self.quarantined.add(key)
            self.notes.append(
                QUARANTINED_NOTE.format(job=fault.job_id, phase=fault.phase, error=fault.error)
            )
            try:
                job_quarantine(
                    job_id=fault.job_id, phase=fault.phase, error=fault.error, at=self.now()
                )
            except DatabaseError:
                # Left out of this cycle all the same; the next one meets the job again.
                logger.exception("could not quarantine job %s", fault.job_id)
            row = bundle.index.jobs.get(key)
            # The cycle's copy says so too: persist must not touch its reason.
            if row is not None and allows(row.status, Event.QUARANTINE):
                row.status = transition(row.status, Event.QUARANTINE).status
        return bundle_without(bundle, drop) if drop else bundle

    def core(
        self, bundle: SnapshotBundle, run: Callable[[Snapshot, object], CycleResult]
    ) -> tuple[SnapshotBundle, CycleResult]:
        """`run(snapshot, conf)`; on a failure, quarantine its culprits and run again."""
        try:
            return bundle, run(bundle.snapshot, bundle.conf)
        except Exception as error:
            if not isolatable(error):
                raise
            everyone = [job.name for job in bundle.snapshot.jobs]

            def fails(keys: Sequence[str]) -> Exception | None:
                drop = set(everyone) - set(keys)
                try:
                    run(snapshot_without(bundle.snapshot, drop), bundle.conf)
                except Exception as trial_error:
                    if not isolatable(trial_error):
                        raise
                    return trial_error
                return None

            culprits = find_culprits(fails, everyone)
            if not culprits:
                raise
            bundle = self.quarantine(bundle, self._faults("core", culprits))
            return bundle, run(bundle.snapshot, bundle.conf)

    def persist(
        self,
        bundle: SnapshotBundle,
        result: CycleResult,
        persist: Callable[[SnapshotBundle, CycleResult], T],
        decide: Callable[[], tuple[SnapshotBundle, CycleResult]],
    ) -> T:
        """`persist(bundle, result)`; on a failure (rolled back), find its culprits in trial
        transactions that are rolled back too, quarantine them, then `decide()` again (a
        fresh snapshot, which leaves them out, and the core) and persist that. Persist updates
        the rows of the bundle as it writes, so the failed attempt's rows are not reused."""
        try:
            return persist(bundle, result)
        except Exception as error:
            if not isolatable(error):
                raise
            everyone = list(bundle.index.jobs)

            def fails(keys: Sequence[str]) -> Exception | None:
                try:
                    with transaction.atomic():
                        persist(bundle_copy_of(bundle, keys), result_of(result, keys))
                        raise _RolledBack
                except _RolledBack:
                    return None
                except Exception as trial_error:
                    if not isolatable(trial_error):
                        raise
                    return trial_error

            culprits = find_culprits(fails, everyone)
            if not culprits:
                raise
            self.quarantine(bundle, self._faults("persist", culprits))
            return persist(*decide())

    @staticmethod
    def _faults(phase: str, culprits: list[tuple[str, Exception]]) -> list[Fault]:
        return [Fault(job_id=int(key), phase=phase, error=describe(err)) for key, err in culprits]
