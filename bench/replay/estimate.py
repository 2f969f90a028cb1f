"""How well plan-ahead start estimates match the starts of a queue replay.

At each sampled submission the shared-cluster replay hands over the snapshot its cycle is about
to run on; ``scheduler.core.plan`` estimates every pending job's start from it, and the
sampled job's estimate is kept until the replay has started it. The error is the distance
between its likely start and the replay's first start.

No oracle: the trace's duration of a job that has not finished is never read. A running job's
end comes from the run times of the jobs that finished before the snapshot and how long the
running ones have run so far, given how long it has run itself; a pending job's run time from
the same history. The traces have no user or image: a job is keyed by its queue and its size
class (its GPUs rounded up to a power of two, known at submission), ``(queue, size)``, the
queue alone when a size has too few jobs (in ITP the 8-64 GPU jobs run far longer than the
1-GPU ones, and one queue's run times alone predicted their ends hours early). The replay itself knows the real durations (it ends jobs at
them) but gives this module only the snapshot, the jobs' last starts, and the run time of each
job once it has finished.

Baseline: the job starts its queue's median wait later than its submission, that median over
the queue's jobs that first started in the 24 hours before the snapshot (no wait when none
did).

A likely start the plan cannot give (a range only, or not within the horizon) counts as the
latest start when known, else the end of the horizon: the error of that choice is in the
figures too.
"""

from __future__ import annotations

import statistics
import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from bench.replay.queues import percentile
from scheduler.adapters.gc_pause import gc_paused
from scheduler.core.config import SchedulerConf
from scheduler.core.plan import PlanLimits, plan_starts
from scheduler.core.runtimes import RuntimeHistory, Span
from scheduler.core.types import JobInfo, Snapshot

BASELINE_WINDOW = 86400.0
WITHIN = 1800.0  # "within ±30 min"


@dataclass
class Sample:
    job: str
    queue: str
    submit: float
    at: float  # the snapshot the estimate was made from
    outlook: str
    earliest: float | None
    likely: float | None
    latest: float | None
    until: float
    baseline: float

    @property
    def predicted(self) -> float:
        """The likely start, else the latest, else the end of the horizon."""
        for value in (self.likely, self.latest):
            if value is not None:
                return value
        return self.until


@dataclass
class StartEstimates:
    """Collects estimates during a shared replay (``queues.run_shared``'s observer)."""

    conf: SchedulerConf
    every: int = 1  # estimate one submission in ``every`` (by trace order)
    limits: PlanLimits = field(default_factory=PlanLimits)
    min_samples: int = 5
    samples: dict[str, Sample] = field(default_factory=dict)
    _finished: list[tuple[tuple[str, ...], float]] = field(default_factory=list)
    # per queue, (first start, wait) of its jobs, oldest first (the baseline's window)
    _recent_starts: dict[str, deque[tuple[float, float]]] = field(default_factory=dict)
    _first_start: dict[str, float] = field(default_factory=dict)
    _cpu_seconds: list[float] = field(default_factory=list)
    _instants: list[int] = field(default_factory=list)

    # what the replay reports --------------------------------------------------------------
    def finished(self, queue: str, runtime: float, gpus: int) -> None:
        """A job of ``queue`` and ``gpus`` GPUs has finished after running ``runtime``
        seconds."""
        self._finished.append(((queue, size_class(gpus)), runtime))

    def started(self, name: str, queue: str, submit: float, at: float) -> None:
        """Job ``name`` of ``queue``, submitted at ``submit``, first started at ``at``."""
        self._recent_starts.setdefault(queue, deque()).append((at, at - submit))
        self._first_start[name] = at

    def arrived(
        self,
        snapshot: Snapshot,
        arrivals: Iterable[tuple[int, str, float]],
        starts: Mapping[str, float],
    ) -> None:
        """The cycle at ``snapshot.now`` sees these (trace index, job, submit) for the first
        time; ``starts`` are the running jobs' last starts."""
        chosen = [(name, submit) for index, name, submit in arrivals if index % self.every == 0]
        if not chosen:
            return
        queues = {job.name: job.queue for job in snapshot.jobs}
        keys = {job.name: (job.queue, size_class(_gpus(job))) for job in snapshot.jobs}
        now = snapshot.now
        elapsed = {name: now - start for name, start in starts.items()}
        history = RuntimeHistory(
            self._finished,
            [(keys[name], seconds) for name, seconds in elapsed.items()],
            min_samples=self.min_samples,
        )
        ends = {
            name: history.remaining(keys[name], elapsed=seconds).shifted(now)
            for name, seconds in elapsed.items()
        }
        durations: dict[str, Span] = {
            job.name: history.remaining(keys[job.name])
            for job in snapshot.jobs
            if job.name not in starts
        }
        began = time.process_time()
        with gc_paused():
            plan = plan_starts(
                snapshot, self.conf, ends=ends, durations=durations, limits=self.limits
            )
        self._cpu_seconds.append(time.process_time() - began)
        self._instants.append(plan.instants)
        for name, submit in chosen:
            estimate = plan.starts[name]
            queue = queues[name]
            self.samples[name] = Sample(
                name,
                queue,
                submit,
                snapshot.now,
                estimate.outlook.value,
                estimate.earliest,
                estimate.likely,
                estimate.latest,
                plan.until,
                submit + self._median_wait(queue, snapshot.now),
            )

    def _median_wait(self, queue: str, now: float) -> float:
        recent = self._recent_starts.get(queue, deque())
        while recent and recent[0][0] < now - BASELINE_WINDOW:
            recent.popleft()
        return statistics.median(wait for _, wait in recent) if recent else 0.0

    # the figures --------------------------------------------------------------------------
    def report(self) -> dict:
        """Errors against the replay's first starts (samples of jobs that never started are
        counted apart), over every sample and over those that did not start at the snapshot's
        own cycle (the ones that waited)."""
        rows = [(s, self._first_start.get(s.job)) for s in self.samples.values()]
        done = [(s, actual) for s, actual in rows if actual is not None]
        covered = [
            s.earliest is not None
            and s.earliest - 1e-6 <= actual <= (s.latest if s.latest is not None else s.until)
            for s, actual in done
        ]
        out = {
            "every": self.every,
            "samples": len(rows),
            "never_started": len(rows) - len(done),
            "mean_wait_s": _mean([a - s.submit for s, a in done]),
            **_accuracy(done),
            "waited": {
                "samples": sum(1 for s, a in done if a > s.at),
                **_accuracy([(s, a) for s, a in done if a > s.at]),
            },
            "range_coverage": round(sum(covered) / len(covered), 3) if covered else None,
            "outlooks": _counts(s.outlook for s, _ in done),
            "likely_missing": sum(1 for s, _ in done if s.likely is None),
            "limits": {
                "horizon_s": self.limits.horizon,
                "resolution_s": self.limits.resolution,
                "growth": self.limits.growth,
                "max_instants": self.limits.max_instants,
            },
            "plans": len(self._cpu_seconds),
            "plan_cpu_seconds_mean": _mean(self._cpu_seconds, 4),
            "plan_cpu_seconds_p99": round(percentile(self._cpu_seconds, 99), 4),
            "plan_instants_mean": _mean(self._instants),
        }
        return out


def size_class(gpus: float) -> str:
    """A job's GPUs rounded up to a power of two: "1", "2", "4", "8", "16", ..."""
    size = 1
    while size < gpus:
        size *= 2
    return str(size)


def _gpus(job: JobInfo) -> float:
    return sum(task.requests.get("gpu") for task in job.tasks)


def _accuracy(done: list[tuple[Sample, float]]) -> dict:
    ours = [s.predicted - actual for s, actual in done]
    base = [s.baseline - actual for s, actual in done]
    ratio = None
    ours_abs, base_abs = [abs(v) for v in ours], [abs(v) for v in base]
    if ours and percentile(base_abs, 50) > 0:
        ratio = round(percentile(ours_abs, 50) / percentile(base_abs, 50), 3)
    return {
        "estimate": _errors(ours),
        "baseline": _errors(base),
        "median_abs_error_ratio_to_baseline": ratio,
    }


def _errors(signed: list[float]) -> dict:
    """Of predicted - actual: the median and p90 of its size, the share within 30 min, and
    its median (below 0: too early)."""
    if not signed:
        return {
            "median_abs_error_s": None,
            "p90_abs_error_s": None,
            "within_30min_share": None,
            "median_error_s": None,
        }
    values = [abs(v) for v in signed]
    return {
        "median_error_s": round(percentile(signed, 50), 1),
        "median_abs_error_s": round(percentile(values, 50), 1),
        "p90_abs_error_s": round(percentile(values, 90), 1),
        "within_30min_share": round(sum(v <= WITHIN for v in values) / len(values), 3),
    }


def _counts(values: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for value in values:
        out[value] = out.get(value, 0) + 1
    return dict(sorted(out.items()))


def _mean(values: list[float] | list[int], digits: int = 1) -> float | None:
    return round(statistics.fmean(values), digits) if values else None


__all__ = ["Sample", "StartEstimates"]
