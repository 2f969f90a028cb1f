"""The booking rules alone: interval, month, the guarantee line, lost work."""

from datetime import UTC, date, datetime

from portal.accounting.booking import Amounts, Line, OpenPlacement, book, booked_seconds, month_of

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
        evicted=set(),
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
        evicted=set(),
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
        evicted={1},
        since=T0 + 290,
        until=until,
    )
    amounts = booked[(3, 1, 7)]
    assert (amounts.gpu_milli_seconds_lost, amounts.cpu_milli_seconds_lost) == (600_000, 150_000)
    assert amounts.gpu_milli_seconds_borrowed == 2000 * 10


def test_nothing_to_book_books_nothing():
    assert book([_placement(1, start=50)], lines={}, evicted=set(), since=T0, until=T0) == {}


def test_the_month_is_the_utc_month():
    assert month_of(datetime(2026, 12, 1, 0, 0, 1, tzinfo=UTC)) == date(2026, 12, 1)
    assert month_of(datetime(2026, 11, 30, 23, 59, 59, tzinfo=UTC)) == date(2026, 11, 1)
