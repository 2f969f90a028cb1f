"""Book the cycle's use into the permanent ledger, in the cycle's persist transaction.

The rules (interval, month, within the guarantee or borrowed, lost to preemption) are in
portal/accounting/booking.py; this reads the placements and shares they need and writes the
sums: one read of the placements with use to book, one of the month's ledger rows they touch,
one update and one insert.
"""

from __future__ import annotations

from datetime import datetime

from django.db import connection
from django.db.models import Q
from django.utils import timezone

from scheduler.adapters.bulk import rows_update
from scheduler.adapters.portal_port import (
    MILLI,
    Amounts,
    EpochSeconds,
    LedgerClock,
    LedgerEntry,
    Line,
    OpenPlacement,
    Placement,
    PreemptionEvent,
    book,
    epoch_seconds,
    from_epoch_seconds,
    month_of,
    notice_losses,
    whole_second,
)
from scheduler.adapters.snapshot import SnapshotBundle
from scheduler.core.types import CycleResult

PLACEMENT_COLUMNS = (
    "id",
    "job__tenant_id",
    "job__queue_id",
    "job__submitter_id",
    "gpus",
    "gpu_milli",
    "task__cpu_millis",
    "notice_end",
)
# How a pod under notice ended before its deadline: nothing of its work was thrown away.
ENDED_EARLY = (Placement.NoticeEnd.ITSELF, Placement.NoticeEnd.EARLY)


def ledger_book(
    *, bundle: SnapshotBundle, result: CycleResult, evicted: set[int], now: datetime
) -> None:
    """`evicted`: the placements this cycle evicted without a notice (their work is thrown
    away now); a victim given a notice loses its work at its deadline, if it is still there."""
    clock = LedgerClock.objects.select_for_update().first()
    since = epoch_seconds(clock.booked_until) if clock is not None else None
    until = epoch_seconds(now) if since is None else max(epoch_seconds(now), since)
    open_now = Q(state__in=Placement.ACTIVE_STATES)
    if since is not None:
        open_now |= Q(ended_at__gt=from_epoch_seconds(since))
    placements = _open_placements(open_now)
    lost = _preemption_deadlines(notice_losses(placements, since, until))
    lost.update(dict.fromkeys(evicted, until))
    booked = book(
        placements,
        lines=_lines(bundle, result),
        lost=lost,
        since=since,
        until=until,
    )
    booked_until = from_epoch_seconds(until)
    _entries_add(month_of(booked_until), booked)
    if clock is None:
        LedgerClock.objects.create(booked_until=booked_until)
    else:
        LedgerClock.objects.filter(pk=clock.pk).update(booked_until=booked_until)


def _preemption_deadlines(deadlines: dict[int, int]) -> dict[int, int]:
    """The deadlines a preemption gave (its event points at the placement), not a run-time
    limit's: one query, only in a cycle that holds a deadline."""
    if not deadlines:
        return {}
    preempted = PreemptionEvent.objects.filter(placement_id__in=deadlines).values_list(
        "placement_id", flat=True
    )
    return {placement_id: deadlines[placement_id] for placement_id in set(preempted)}


def _open_placements(open_now: Q) -> list[OpenPlacement]:
    """One read, times as whole seconds since 1970 computed by the database where it can:
    parsing a timestamp per row was most of the step's time at a few thousand pods."""
    placements = Placement.objects.filter(open_now).order_by()
    if connection.vendor in EpochSeconds.VENDORS:
        rows = placements.annotate(
            start=EpochSeconds("started_at"),
            end=EpochSeconds("ended_at"),
            deadline=EpochSeconds("notice_deadline"),
        ).values_list(*PLACEMENT_COLUMNS, "start", "end", "deadline")
    else:
        rows = (
            (*row[:-3], *(at and epoch_seconds(at) for at in row[-3:]))
            for row in placements.values_list(
                *PLACEMENT_COLUMNS, "started_at", "ended_at", "notice_deadline"
            )
        )
    return [
        OpenPlacement(
            id=pk,
            tenant_id=tenant_id,
            queue_id=queue_id,
            user_id=user_id,
            started_at=start,
            ended_at=end,
            # A share of a device holds its milli-GPU; rows from before shares, whole GPUs.
            gpu_milli=max(gpu_milli, gpus * MILLI),
            cpu_milli=cpu_millis,
            notice_deadline=deadline,
            notice_ended_early=notice_end in ENDED_EARLY,
        )
        for (
            pk, tenant_id, queue_id, user_id, gpus, gpu_milli, cpu_millis, notice_end,
            start, end, deadline,
        ) in rows
    ]  # fmt: skip


def _lines(bundle: SnapshotBundle, result: CycleResult) -> dict[int, Line]:
    """Each queue's min(guarantee, deserved) this cycle. A conf without proportion or capacity
    reports no shares: the queue's own guarantee then."""
    lines = {}
    for name, queue in bundle.index.queues.items():
        share = result.queues.get(name)
        if share is None:
            lines[queue.id] = Line(queue.guarantee_gpus * MILLI, queue.guarantee_cpu_millis)
            continue
        # The core counts whole GPUs; CPU in millicores.
        gpu = min(share.guarantee.get("gpu"), share.deserved.get("gpu")) * MILLI
        cpu = min(share.guarantee.get("cpu"), share.deserved.get("cpu"))
        lines[queue.id] = Line(gpu, cpu)
    return lines


def _entries_add(month, booked: dict[tuple[int, int, int], Amounts]) -> None:
    if not booked:
        return
    existing = {
        (entry.queue_id, entry.user_id): entry
        for entry in LedgerEntry.objects.filter(
            month=month, queue_id__in={queue_id for _, queue_id, _ in booked}
        ).only("id", "queue_id", "user_id", *LedgerEntry.AMOUNTS)
    }
    updates, inserts = [], []
    for (tenant_id, queue_id, user_id), amounts in sorted(booked.items()):
        entry = existing.get((queue_id, user_id))
        if entry is None:
            inserts.append(
                LedgerEntry(
                    month=month,
                    tenant_id=tenant_id,
                    queue_id=queue_id,
                    user_id=user_id,
                    **dict(zip(LedgerEntry.AMOUNTS, amounts.values(), strict=True)),
                )
            )
            continue
        before = Amounts(*(getattr(entry, field) for field in LedgerEntry.AMOUNTS))
        updates.append((entry.id, *before.add(amounts).values()))
    rows_update(LedgerEntry, LedgerEntry.AMOUNTS, updates, same={"updated_at": timezone.now()})
    LedgerEntry.objects.bulk_create(inserts)


def placement_end(now: datetime) -> datetime:
    """When a placement that leaves the active states now ended: never before what the ledger
    has already booked for it (a worker whose clock lags another's), so that its own duration
    is what was booked."""
    booked = LedgerClock.objects.values_list("booked_until", flat=True).first()
    end = whole_second(now)
    return end if booked is None else max(end, booked)
