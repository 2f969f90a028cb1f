"""How a cycle's interval of use is booked: the rules, with no database (the cycle's ledger
step, scheduler/adapters/ledger.py, reads the rows and writes the result).

* Interval. The ledger has booked every active placement up to `since` (LedgerClock); a cycle
  books each placement's part of (since, until], `until` being the cycle's time in whole
  seconds. A placement counts from its start to its end (or `until` while active), so over
  all cycles each placement is booked exactly its own duration, once.
* Month. Everything a cycle books goes to the UTC month of `until`: no cycle writes to a month
  before its own, so a past month never changes. The cost: the first cycle of a month books
  the few seconds since the previous cycle into the new month (all of them, if no cycle ran
  for a while).
* Within the guarantee, or borrowed. Per queue and resource, the cycle's line is
  min(guarantee, deserved) from that cycle's shares: the part of its guarantee the cycle
  could honour. Deserved alone would not do: it grows to the demand while others are idle,
  so use of lent capacity would count as within. The line covers the queue's placements
  oldest first; what is above it is borrowed. Reclaim takes the newest pods first, so the
  placements booked as borrowed are the ones reclaim would take back.
* Lost to preemption. A placement evicted in this cycle has its work from start to eviction
  thrown away; it is booked as lost (a part of its use, not in addition to it). A victim
  given a preemption notice keeps running until its deadline: it loses nothing if it ends by
  itself before then (it checkpointed, as the notice asked), and its work from start to
  deadline if it is still there when the deadline comes, booked by the cycle whose interval
  holds the deadline (`notice_losses`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime

MILLI = 1000  # milli-GPU per whole GPU


@dataclass(frozen=True, slots=True)
class OpenPlacement:
    """A placement with use to book: active, or ended after the ledger's `since`. Times are
    whole seconds since 1970 (UTC): integers all through, and read without parsing a
    timestamp per row."""

    id: int
    tenant_id: int
    queue_id: int
    user_id: int
    started_at: int
    ended_at: int | None
    gpu_milli: int
    cpu_milli: int
    # The preemption notice's deadline (seconds since 1970), and whether the pod ended before
    # it (by itself, or with its cancelled job); None / False without a notice.
    notice_deadline: int | None = None
    notice_ended_early: bool = False


@dataclass(frozen=True, slots=True)
class Line:
    """A queue's line between within-guarantee and borrowed for one cycle."""

    gpu_milli: float
    cpu_milli: float


@dataclass(slots=True)
class Amounts:
    gpu_milli_seconds_within: int = 0
    gpu_milli_seconds_borrowed: int = 0
    cpu_milli_seconds_within: int = 0
    cpu_milli_seconds_borrowed: int = 0
    gpu_milli_seconds_lost: int = 0
    cpu_milli_seconds_lost: int = 0

    def add(self, other: Amounts) -> Amounts:
        return Amounts(*(a + b for a, b in zip(self.values(), other.values(), strict=True)))

    def values(self) -> tuple[int, ...]:
        return (
            self.gpu_milli_seconds_within,
            self.gpu_milli_seconds_borrowed,
            self.cpu_milli_seconds_within,
            self.cpu_milli_seconds_borrowed,
            self.gpu_milli_seconds_lost,
            self.cpu_milli_seconds_lost,
        )


# (tenant_id, queue_id, user_id)
Key = tuple[int, int, int]


def booked_seconds(placement: OpenPlacement, since: int | None, until: int) -> int:
    """Whole seconds of `placement` inside (since, until] (seconds since 1970)."""
    start = placement.started_at if since is None else max(placement.started_at, since)
    end = until if placement.ended_at is None else min(placement.ended_at, until)
    return max(0, end - start)


def notice_losses(
    placements: Iterable[OpenPlacement], since: int | None, until: int
) -> dict[int, int]:
    """Placement id -> its deadline, for the placements under notice whose deadline falls in
    (since, until] and that had not ended before it: their work is thrown away now. The
    intervals of successive cycles meet end to end, so each deadline is booked once. (The
    caller keeps only the notices a preemption gave: a run-time limit's end is no loss to
    preemption.)"""
    return {
        p.id: p.notice_deadline
        for p in placements
        if p.notice_deadline is not None
        and not p.notice_ended_early
        and (since is None or p.notice_deadline > since)
        and p.notice_deadline <= until
    }


def book(
    placements: list[OpenPlacement],
    *,
    lines: dict[int, Line],
    lost: Mapping[int, int],
    since: int | None,
    until: int,
) -> dict[Key, Amounts]:
    """What one cycle adds to each tenant/queue/user. `lost`: placement id -> when its work
    was thrown away (its eviction's `until`, or its notice's deadline). A queue without a
    line (its shares unknown) books everything as borrowed."""
    by_queue: dict[int, list[OpenPlacement]] = defaultdict(list)
    for placement in placements:
        by_queue[placement.queue_id].append(placement)
    booked: dict[Key, Amounts] = defaultdict(Amounts)
    for queue_id, queue_placements in by_queue.items():
        line = lines.get(queue_id, Line(0, 0))
        gpu_left, cpu_left = line.gpu_milli, line.cpu_milli
        for placement in sorted(queue_placements, key=lambda p: (p.started_at, p.id)):
            key = (placement.tenant_id, placement.queue_id, placement.user_id)
            amounts = booked[key]
            if (thrown_away_at := lost.get(placement.id)) is not None:
                work = max(0, thrown_away_at - placement.started_at)
                amounts.gpu_milli_seconds_lost += placement.gpu_milli * work
                amounts.cpu_milli_seconds_lost += placement.cpu_milli * work
            seconds = booked_seconds(placement, since, until)
            if not seconds:
                continue
            gpu_within = int(min(placement.gpu_milli, max(0, gpu_left)))
            cpu_within = int(min(placement.cpu_milli, max(0, cpu_left)))
            gpu_left -= gpu_within
            cpu_left -= cpu_within
            amounts.gpu_milli_seconds_within += gpu_within * seconds
            amounts.gpu_milli_seconds_borrowed += (placement.gpu_milli - gpu_within) * seconds
            amounts.cpu_milli_seconds_within += cpu_within * seconds
            amounts.cpu_milli_seconds_borrowed += (placement.cpu_milli - cpu_within) * seconds
    return {key: amounts for key, amounts in booked.items() if any(amounts.values())}


def month_of(at: datetime) -> date:
    return at.astimezone(UTC).date().replace(day=1)


def epoch_seconds(at: datetime) -> int:
    return int(at.timestamp())


def from_epoch_seconds(seconds: int) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)
