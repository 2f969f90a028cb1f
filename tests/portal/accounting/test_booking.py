"""The booking rules alone: interval, month, the guarantee line, lost work."""

from dataclasses import replace
from datetime import UTC, date, datetime

from portal.accounting.booking import (
    Amounts,
    Line,
    OpenPlacement,
    book,
    booked_seconds,
    month_of,
    notice_losses,
)

T0 = int(datetime(2026, 11, 10, 12, 0, tzinfo=UTC).timestamp())


def _placement(pk, *, start=0, end=None, gpus=1, cpu=1000, queue=1, user=7):
    return OpenPlacement(
        id=pk,
        tenant_id=3,
        queue_id=queue,
        user_id=user,
        started_at=T0 + start,
        ended_at=None if end is None else T0 + end,
        gpu_milli=gpus * 1000,
        cpu_milli=cpu,
    )


def test_a_placement_is_booked_only_inside_the_interval():
    since, until = T0 + 100, T0 + 160
    assert booked_seconds(_placement(1, start=0), since, until) == 60
    assert booked_seconds(_placement(1, start=130), since, until) == 30
    assert booked_seconds(_placement(1, start=0, end=110), since, until) == 10
    assert booked_seconds(_placement(1, start=0, end=400), since, until) == 60
    assert booked_seconds(_placement(1, start=170), since, until) == 0
    assert booked_seconds(_placement(1, start=40), None, until) == 120  # the ledger's first


def test_the_line_covers_the_oldest_placements_first():
    placements = [_placement(2, start=10, gpus=4), _placement(1, start=0, gpus=2)]
    booked = book(
        placements,
        lines={1: Line(gpu_milli=3000, cpu_milli=1500)},
        lost={},
        since=T0 + 10,
        until=T0 + 20,
    )
    # Placement 1 (oldest): 2 GPUs and 1 core within. Placement 2: 1 GPU and 0.5 core within.
    assert booked == {
        (3, 1, 7): Amounts(
            gpu_milli_seconds_within=(2000 + 1000) * 10,
            gpu_milli_seconds_borrowed=3000 * 10,
            cpu_milli_seconds_within=1500 * 10,
            cpu_milli_seconds_borrowed=500 * 10,
        )
    }


def test_a_queue_without_a_line_borrows_everything_and_users_are_kept_apart():
    booked = book(
        [_placement(1, user=7), _placement(2, user=8, queue=2)],
        lines={1: Line(gpu_milli=float("inf"), cpu_milli=0)},
        lost={},
        since=T0,
        until=T0 + 5,
    )
    assert booked[(3, 1, 7)].gpu_milli_seconds_within == 5000
    assert booked[(3, 1, 7)].cpu_milli_seconds_borrowed == 5000
    assert booked[(3, 2, 8)].gpu_milli_seconds_borrowed == 5000
    assert booked[(3, 2, 8)].gpu_milli_seconds_within == 0


def test_an_evicted_placement_loses_its_work_from_its_start():
    until = T0 + 300
    booked = book(
        [_placement(1, start=0, gpus=2, cpu=500)],
        lines={},
        lost={1: until},
        since=T0 + 290,
        until=until,
    )
    amounts = booked[(3, 1, 7)]
    assert (amounts.gpu_milli_seconds_lost, amounts.cpu_milli_seconds_lost) == (600_000, 150_000)
    assert amounts.gpu_milli_seconds_borrowed == 2000 * 10


def test_nothing_to_book_books_nothing():
    assert book([_placement(1, start=50)], lines={}, lost={}, since=T0, until=T0) == {}


def test_the_month_is_the_utc_month():
    assert month_of(datetime(2026, 12, 1, 0, 0, 1, tzinfo=UTC)) == date(2026, 12, 1)
    assert month_of(datetime(2026, 11, 30, 23, 59, 59, tzinfo=UTC)) == date(2026, 11, 1)


def test_a_victim_under_notice_loses_its_work_in_the_one_interval_that_holds_its_deadline():
    deadline = T0 + 300
    told = replace(_placement(1, start=0, gpus=2), notice_deadline=deadline)
    checkpointed = replace(told, id=2, notice_ended_early=True)
    untold = _placement(3, start=0)
    placements = [told, checkpointed, untold]
    # Successive cycles' intervals meet end to end: exactly one holds the deadline.
    edges = [None, T0 + 100, T0 + 295, T0 + 300, T0 + 305, T0 + 900]
    found = [notice_losses(placements, a, b) for a, b in zip(edges, edges[1:], strict=False)]
    assert found == [{}, {}, {1: deadline}, {}, {}]
    booked = book(placements, lines={}, lost=found[2], since=T0 + 295, until=T0 + 300)
    amounts = booked[(3, 1, 7)]
    assert amounts.gpu_milli_seconds_lost == 2000 * 300
    assert amounts.gpu_milli_seconds_borrowed == (2000 + 2000 + 1000) * 5  # all still run
