"""How long a job will run, or how much longer a running one will: a range from the run times
of the jobs that finished before it.

A history is the (key, run time in seconds) of finished jobs and the (key, seconds run so far)
of running ones. A key is a tuple read from its most general part to its most specific: the
portal's usage ledger keys a job by ``(queue, user, image)``, the traces only by ``(queue,)``.
Run times are estimated as survival data (Kaplan-Meier): a running job counts as one that ran
at least this long, so the long jobs still running weigh in and the estimate is not biased
toward the short ones that have already finished.

A prediction uses the most specific prefix of the job's key (the empty prefix is every job)
with at least ``min_samples`` jobs that ran longer than this one has so far and whose median
is known, so a user's own habits count once there are enough of them, and a job that has
outlived most of its peers is judged by the ones that ran longer still. The range is three
quantiles (by default the 25th, 50th and 75th) of the run time given what has run, less what
has run, bounded by a run-time limit when there is one (the cycle ends a job at its limit). A
quantile the data cannot give (the longest jobs still run) is unknown: no likely value, or no
bound but the limit, never an invented one. Pure: the caller reads the ledger; no clock.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from dataclasses import dataclass

Key = tuple[str, ...]

DEFAULT_QUANTILES = (0.25, 0.5, 0.75)
DEFAULT_MIN_SAMPLES = 5


@dataclass(frozen=True, slots=True)
class Span:
    """An uncertain time or length: ``low`` <= ``likely`` <= ``high``. ``likely`` is None when
    nothing supports a single value; ``high`` is ``math.inf`` when nothing bounds it."""

    low: float
    likely: float | None
    high: float

    def __post_init__(self) -> None:
        for name in ("low", "high"):
            if math.isnan(getattr(self, name)):
                raise ValueError(f"{name}: must be a number, got nan")
        if self.likely is not None and math.isnan(self.likely):
            raise ValueError("likely: must be a number or None, got nan")
        if self.low > self.high:
            raise ValueError(f"low: {self.low} is above high ({self.high})")
        if self.likely is not None and not self.low <= self.likely <= self.high:
            raise ValueError(f"likely: {self.likely} is outside [{self.low}, {self.high}]")

    @classmethod
    def exactly(cls, value: float) -> Span:
        return cls(value, value, value)

    @classmethod
    def unknown(cls, high: float = math.inf) -> Span:
        """Anything from nothing to ``high``."""
        return cls(0.0, None, high)

    def shifted(self, by: float) -> Span:
        """The same span ``by`` later: a run time turned into an end time."""
        likely = None if self.likely is None else self.likely + by
        return Span(self.low + by, likely, self.high + by)


class RuntimeHistory:
    """Run times of finished jobs, and what running jobs have run so far, indexed by every
    prefix of their keys."""

    __slots__ = ("_by_prefix", "min_samples", "quantiles")

    def __init__(
        self,
        finished: Iterable[tuple[Key, float]],
        running: Iterable[tuple[Key, float]] = (),
        *,
        min_samples: int = DEFAULT_MIN_SAMPLES,
        quantiles: tuple[float, float, float] = DEFAULT_QUANTILES,
    ):
        if min_samples < 1:
            raise ValueError(f"min_samples: must be at least 1, got {min_samples}")
        if not 0 <= quantiles[0] <= quantiles[1] <= quantiles[2] <= 1:
            raise ValueError(f"quantiles: must rise within [0, 1], got {quantiles}")
        self.min_samples = min_samples
        self.quantiles = quantiles
        rows: dict[Key, list[tuple[float, bool]]] = {}
        for name, pairs, ended in (("run time", finished, True), ("elapsed", running, False)):
            for key, seconds in pairs:
                if not 0 <= seconds < math.inf:
                    raise ValueError(f"{name}: must be a finite number >= 0, got {seconds}")
                for size in range(len(key) + 1):
                    rows.setdefault(key[:size], []).append((float(seconds), ended))
        self._by_prefix = {prefix: _Survival(values) for prefix, values in rows.items()}

    def remaining(self, key: Key, *, elapsed: float = 0.0, limit: float | None = None) -> Span:
        """Seconds left for a job of ``key`` that has run ``elapsed`` seconds (0: not started),
        within ``limit`` seconds of run time in all when given."""
        if not 0 <= elapsed < math.inf:
            raise ValueError(f"elapsed: must be a finite number >= 0, got {elapsed}")
        if limit is not None and not limit > 0:
            raise ValueError(f"limit: must be > 0, got {limit}")
        left = math.inf if limit is None else max(limit - elapsed, 0.0)
        for size in range(len(key), -1, -1):
            survival = self._by_prefix.get(key[:size])
            if survival is None or survival.at_risk(elapsed) < self.min_samples:
                continue
            low, likely, high = (survival.quantile_after(elapsed, q) for q in self.quantiles)
            if likely is None or low is None:
                continue  # its jobs that ran this long mostly still run: ask a broader key
            return Span(
                min(low - elapsed, left),
                min(likely - elapsed, left),
                left if high is None else min(high - elapsed, left),
            )
        return Span.unknown(left)


class _Survival:
    """Kaplan-Meier estimate of the share of jobs still running after each run time, from
    finished run times and the censored times of jobs still running (a history of finished
    jobs alone is too short: the long ones have not finished yet)."""

    __slots__ = ("_observed", "_times", "_falling")

    def __init__(self, rows: list[tuple[float, bool]]):
        rows.sort()
        self._observed = [seconds for seconds, _ in rows]
        self._times: list[float] = []  # distinct run times at which some job finished
        self._falling: list[float] = []  # minus the share still running after each of them
        survival, at_risk, index = 1.0, len(rows), 0
        while index < len(rows):
            seconds, ended, left = rows[index][0], 0, 0
            while index < len(rows) and rows[index][0] == seconds:
                ended += rows[index][1]
                left += 1
                index += 1
            if ended:
                survival *= 1 - ended / at_risk
                self._times.append(seconds)
                self._falling.append(-survival)
            at_risk -= left

    def at_risk(self, elapsed: float) -> int:
        """How many jobs ran (or have run so far) longer than ``elapsed``."""
        return len(self._observed) - bisect_right(self._observed, elapsed)

    def quantile_after(self, elapsed: float, q: float) -> float | None:
        """The run time by which a share ``q`` of the jobs that outlast ``elapsed`` have
        finished; None when too many of them still run to say."""
        first = bisect_right(self._times, elapsed)
        alive = -self._falling[first - 1] if first else 1.0
        target = alive * (1 - q) + 1e-12
        found = bisect_left(self._falling, -target, lo=first)
        return self._times[found] if found < len(self._times) else None


__all__ = ["DEFAULT_QUANTILES", "Key", "RuntimeHistory", "Span"]
