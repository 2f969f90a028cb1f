"""How long a job will run, or how much longer a running one will: a range from the run times
of the jobs that finished before it.

A history is a list of (key, run time in seconds) of finished jobs. A key is a tuple read from
its most general part to its most specific: the portal's usage ledger keys a job by
``(queue, user, image)``, the traces only by ``(queue,)``. A prediction uses the most specific
prefix of the job's key that holds at least ``min_samples`` run times longer than what the job
has already run (the empty prefix is every finished job), so a user's own habits count once
there are enough of them, and a job that has outlived most of its peers is judged by the ones
that ran longer still. Nothing to go on gives an unknown likely value, never an invented one.

The range is three quantiles of those run times (by default the 25th, 50th and 75th), less
what has run already, and bounded by a run-time limit when there is one: the cycle ends a job
at its limit. Pure: the caller reads the ledger; there is no clock here.
"""

from __future__ import annotations

import math
from bisect import bisect_right
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
    """Finished jobs' run times indexed by every prefix of their keys."""

    __slots__ = ("_by_prefix", "min_samples", "quantiles")

    def __init__(
        self,
        samples: Iterable[tuple[Key, float]],
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
        by_prefix: dict[Key, list[float]] = {}
        for key, seconds in samples:
            if not seconds >= 0 or seconds == math.inf:
                raise ValueError(f"run time: must be a finite number >= 0, got {seconds}")
            for size in range(len(key) + 1):
                by_prefix.setdefault(key[:size], []).append(float(seconds))
        for values in by_prefix.values():
            values.sort()
        self._by_prefix = by_prefix

    def __len__(self) -> int:
        return len(self._by_prefix.get((), ()))

    def remaining(self, key: Key, *, elapsed: float = 0.0, limit: float | None = None) -> Span:
        """Seconds left for a job of ``key`` that has run ``elapsed`` seconds (0: not started),
        within ``limit`` seconds of run time in all when given."""
        if elapsed < 0:
            raise ValueError(f"elapsed: must be >= 0, got {elapsed}")
        if limit is not None and not limit > 0:
            raise ValueError(f"limit: must be > 0, got {limit}")
        left = math.inf if limit is None else max(limit - elapsed, 0.0)
        longer = self._longer_than(key, elapsed)
        if longer is None:
            return Span.unknown(left)
        low, likely, high = (min(quantile(longer, q) - elapsed, left) for q in self.quantiles)
        return Span(max(low, 0.0), max(likely, 0.0), max(high, 0.0))

    def _longer_than(self, key: Key, elapsed: float) -> list[float] | None:
        """The run times above ``elapsed`` under the most specific prefix of ``key`` with
        enough of them, or None."""
        for size in range(len(key), -1, -1):
            values = self._by_prefix.get(key[:size])
            if values is None:
                continue
            above = values[bisect_right(values, elapsed) :]
            if len(above) >= self.min_samples:
                return above
        return None


def quantile(values: list[float], q: float) -> float:
    """The ``q`` quantile of sorted ``values``, interpolated between neighbours."""
    position = (len(values) - 1) * q
    lower = math.floor(position)
    upper = min(lower + 1, len(values) - 1)
    return values[lower] + (values[upper] - values[lower]) * (position - lower)


__all__ = ["DEFAULT_QUANTILES", "Key", "RuntimeHistory", "Span", "quantile"]
