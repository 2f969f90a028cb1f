"""Scheduling-cycle kicks after submissions: coalesced per window, never lost.

The rule (scheduler.tasks._kick): per window, the first commit queues a cycle at once, the
second queues one for the window's end, the rest send nothing; in every case a cycle starts
after the commit. Eager Celery runs a cycle after every commit.
"""

import logging
from types import SimpleNamespace

import pytest
from django.core.cache import cache

from portal import celery_app
from portal.jobs.services import job_cancel, job_submit
from scheduler import tasks

pytestmark = pytest.mark.django_db

WINDOW = tasks.KICK_WINDOW_SECONDS


class Recorder:
    """Stands in for the task's delay/apply_async: what would have gone to the broker."""

    def __init__(self) -> None:
        self.sent: list[float] = []  # countdown of each message (0: at once)

    def delay(self) -> None:
        self.sent.append(0.0)

    def apply_async(self, countdown: float = 0.0) -> None:
        self.sent.append(countdown)


@pytest.fixture
def clock(monkeypatch):
    """Wall-clock time as scheduler.tasks sees it, set by the test."""
    now = [1000.0 * WINDOW + 0.25 * WINDOW]
    monkeypatch.setattr(tasks, "time", SimpleNamespace(time=lambda: now[0]))
    return now


@pytest.fixture
def eager():
    """Set Celery's task_always_eager for one test (Celery's settings object does not take
    monkeypatch's delattr on undo)."""
    previous = celery_app.conf.task_always_eager

    def set_eager(value: bool) -> None:
        celery_app.conf.task_always_eager = value

    yield set_eager
    celery_app.conf.task_always_eager = previous


@pytest.fixture
def broker(monkeypatch, clock, eager):
    """Queued (not eager) kicks recorded instead of sent; a fresh cache and process memo."""
    recorder = Recorder()
    eager(False)
    monkeypatch.setattr(tasks.scheduling_cycle_run, "delay", recorder.delay)
    monkeypatch.setattr(tasks.scheduling_cycle_run, "apply_async", recorder.apply_async)
    monkeypatch.setattr(tasks, "_trailing_window", None)
    cache.clear()
    yield recorder
    cache.clear()


def submit(user, queue, name):
    return job_submit(
        submitter=user,
        queue=queue,
        name=name,
        tasks=[{"name": "main", "image": "busybox", "gpus": 1}],
    )


def test_first_submission_of_a_window_kicks_at_once(
    broker, researcher, nlp_queue, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        submit(researcher, nlp_queue, "a")
    assert broker.sent == [0.0]


def test_second_submission_kicks_for_the_end_of_the_window(
    broker, clock, researcher, nlp_queue, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        submit(researcher, nlp_queue, "a")
    clock[0] += 0.5 * WINDOW
    with django_capture_on_commit_callbacks(execute=True):
        submit(researcher, nlp_queue, "b")
    assert broker.sent == [0.0, pytest.approx(0.25 * WINDOW)]


def test_later_submissions_of_the_window_send_nothing(
    broker, clock, researcher, nlp_queue, django_capture_on_commit_callbacks
):
    for name in ("a", "b", "c", "d"):
        with django_capture_on_commit_callbacks(execute=True):
            submit(researcher, nlp_queue, name)
        clock[0] += 0.1 * WINDOW
    # "c" and "d" (at 0.45 and 0.55 of the window) are covered by the trailing cycle
    assert broker.sent == [0.0, pytest.approx(0.65 * WINDOW)]


def test_next_window_kicks_at_once_again(
    broker, clock, researcher, nlp_queue, django_capture_on_commit_callbacks
):
    for name in ("a", "b", "c"):
        with django_capture_on_commit_callbacks(execute=True):
            submit(researcher, nlp_queue, name)
    clock[0] += WINDOW
    with django_capture_on_commit_callbacks(execute=True):
        submit(researcher, nlp_queue, "d")
    assert broker.sent == [0.0, pytest.approx(0.75 * WINDOW), 0.0]


def test_a_trailing_kick_queued_by_another_process_covers_this_one(
    broker, clock, researcher, nlp_queue, django_capture_on_commit_callbacks
):
    """The claims live in the shared cache: another web process took both this window."""
    cache.add(tasks.KICK_LEADING_KEY.format(window=1000), 1, timeout=2 * WINDOW)
    cache.add(tasks.KICK_TRAILING_KEY.format(window=1000), 1, timeout=2 * WINDOW)
    with django_capture_on_commit_callbacks(execute=True):
        submit(researcher, nlp_queue, "a")
    assert broker.sent == []


def test_cancel_kicks_like_a_submission(
    broker, clock, researcher, nlp_queue, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        job = submit(researcher, nlp_queue, "a")
    with django_capture_on_commit_callbacks(execute=True):
        job_cancel(job=job, actor=researcher)
    assert broker.sent == [0.0, pytest.approx(0.75 * WINDOW)]


def test_rolled_back_submission_sends_nothing(
    broker, researcher, nlp_queue, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        submit(researcher, nlp_queue, "a")
    # the hooks run only on commit; nothing was sent while the transaction was open
    assert len(callbacks) == 1
    assert broker.sent == []


def test_cache_outage_is_logged_not_raised(
    broker, monkeypatch, researcher, nlp_queue, django_capture_on_commit_callbacks, caplog
):
    def broken_add(*args, **kwargs):
        raise ConnectionError("cache down")

    monkeypatch.setattr(cache, "add", broken_add)
    with (
        caplog.at_level(logging.WARNING, logger="scheduler.tasks"),
        django_capture_on_commit_callbacks(execute=True),
    ):
        job = submit(researcher, nlp_queue, "a")
    assert job.pk is not None
    assert "beat will run one" in caplog.text
    assert broker.sent == []


def test_eager_celery_runs_a_cycle_after_every_submission(
    monkeypatch, eager, researcher, nlp_queue, django_capture_on_commit_callbacks
):
    runs = []
    eager(True)
    monkeypatch.setattr(tasks.scheduling_cycle_run, "delay", lambda: runs.append(1))
    for name in ("a", "b", "c"):
        with django_capture_on_commit_callbacks(execute=True):
            submit(researcher, nlp_queue, name)
    assert len(runs) == 3
