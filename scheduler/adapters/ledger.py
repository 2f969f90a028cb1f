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
    book,
    epoch_seconds,
    from_epoch_seconds,
    month_of,
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
)


def ledger_book(
    *, bundle: SnapshotBundle, result: CycleResult, evicted: set[int], now: datetime
) -> None:
    clock = LedgerClock.objects.select_for_update().first()
    since = epoch_seconds(clock.booked_until) if clock is not None else None
    until = epoch_seconds(now) if since is None else max(epoch_seconds(now), since)
    open_now = Q(state__in=Placement.ACTIVE_STATES)
    if since is not None:
        open_now |= Q(ended_at__gt=from_epoch_seconds(since))
    booked = book(
        _open_placements(open_now),
        lines=_lines(bundle, result),
        evicted=evicted,
        since=since,
        until=until,
    )
    booked_until = from_epoch_seconds(until)
    _entries_add(month_of(booked_until), booked)
    if clock is None:
        LedgerClock.objects.create(booked_until=booked_until)
    else:
        LedgerClock.objects.filter(pk=clock.pk).update(booked_until=booked_until)


def _open_placements(open_now: Q) -> list[OpenPlacement]:
    """One read, times as whole seconds since 1970 computed by the database where it can:
    parsing a timestamp per row was most of the step's time at a few thousand pods."""
    placements = Placement.objects.filter(open_now).order_by()
    if connection.vendor in EpochSeconds.VENDORS:
        rows = placements.annotate(
            start=EpochSeconds("started_at"), end=EpochSeconds("ended_at")
        ).values_list(*PLACEMENT_COLUMNS, "start", "end")
    else:
        rows = (
            (*row[:-2], epoch_seconds(row[-2]), row[-1] and epoch_seconds(row[-1]))
            for row in placements.values_list(*PLACEMENT_COLUMNS, "started_at", "ended_at")
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
        )
        for pk, tenant_id, queue_id, user_id, gpus, gpu_milli, cpu_millis, start, end in rows
    ]


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
