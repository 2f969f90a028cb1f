"""Run-time predictions: quantiles of the run time (Kaplan-Meier, running jobs as censored)
under the most specific key with enough jobs that ran longer than this one has so far, within
its run-time limit."""

import math

import pytest

from scheduler.core.runtimes import RuntimeHistory, Span


def _history(running=(), **kw):
    samples = [(("cv",), float(s)) for s in (100, 200, 300, 400, 500)]
    samples += [(("cv", "ana"), float(s)) for s in (1000, 1100, 1200, 1300, 1400)]
    samples += [(("nlp",), 10_000.0)] * 3
    return RuntimeHistory(samples, running, **kw)


def test_the_most_specific_key_with_enough_samples_decides():
    history = _history()
    # ana's five runs: a quarter had finished by 1100 s, half by 1200, three quarters by 1300
    assert history.remaining(("cv", "ana", "img:1")) == Span(1100, 1200, 1300)
    # bob has none: the ten runs under "cv"
    assert history.remaining(("cv", "bob")) == Span(300, 500, 1200)


def test_too_few_samples_fall_back_to_the_broader_key():
    # nlp has 3 runs (< 5): all 13 decide; the 7th shortest (1100 s) is where half are done
    assert _history().remaining(("nlp",)).likely == 1100


def test_a_running_job_is_judged_by_the_jobs_that_ran_longer():
    # 1150 s in: three of ana's runs, and still only those under "cv", ran longer (3 < 5), so
    # all six that did decide: 1200, 1300, 1400 and nlp's three of 10,000 s
    assert _history().remaining(("cv", "ana"), elapsed=1150) == Span(150, 250, 8850)


def test_jobs_still_running_lengthen_what_is_expected():
    finished = [(("q",), 100.0)] * 5
    assert RuntimeHistory(finished).remaining(("q",)) == Span(100, 100, 100)
    # five more have run 1000 s and still run: a quarter of all may run longer than anything
    # seen finish, so the high end is unknown
    running = [(("q",), 1000.0)] * 5
    assert RuntimeHistory(finished, running).remaining(("q",)) == Span(100, 100, math.inf)


def test_a_median_hidden_by_jobs_still_running_is_unknown():
    finished = [(("q",), 100.0)] * 2
    running = [(("q",), 1000.0)] * 8
    assert RuntimeHistory(finished, running).remaining(("q",)) == Span(0.0, None, math.inf)


def test_a_job_that_outlived_every_sample_has_no_likely_end():
    assert _history().remaining(("cv",), elapsed=20_000) == Span(0.0, None, math.inf)


def test_an_empty_history_knows_nothing_but_the_limit():
    assert RuntimeHistory([]).remaining(("q",), limit=3600) == Span(0.0, None, 3600)


def test_the_limit_bounds_every_value():
    span = _history().remaining(("cv", "ana"), elapsed=100, limit=1250)
    assert span == Span(1000, 1100, 1150)


def test_a_job_past_its_limit_ends_now():
    assert _history().remaining(("cv",), elapsed=5000, limit=4000) == Span(0.0, None, 0.0)


def test_quantiles_and_minimum_samples_are_settings():
    history = _history(quantiles=(0.0, 0.5, 1.0), min_samples=1)
    assert history.remaining(("nlp",)) == Span(10_000, 10_000, 10_000)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"min_samples": 0}, "min_samples: must be at least 1"),
        ({"quantiles": (0.5, 0.25, 0.75)}, "quantiles: must rise within"),
    ],
)
def test_bad_settings_name_the_field(kwargs, message):
    with pytest.raises(ValueError, match=message):
        _history(**kwargs)


@pytest.mark.parametrize("seconds", [-1.0, math.inf, math.nan])
def test_a_bad_run_time_is_refused(seconds):
    with pytest.raises(ValueError, match="run time: must be a finite number >= 0"):
        RuntimeHistory([(("q",), seconds)])
    with pytest.raises(ValueError, match="elapsed: must be a finite number >= 0"):
        RuntimeHistory([], [(("q",), seconds)])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"elapsed": -1}, "elapsed: must be a finite number >= 0"),
        ({"limit": 0}, "limit: must be > 0"),
    ],
)
def test_bad_arguments_name_the_field(kwargs, message):
    with pytest.raises(ValueError, match=message):
        _history().remaining(("cv",), **kwargs)


def test_a_span_must_be_ordered():
    with pytest.raises(ValueError, match="likely: 5 is outside"):
        Span(1, 5, 4)
    with pytest.raises(ValueError, match="low: 3 is above high"):
        Span(3, None, 2)
    assert Span(1, 2, 3).shifted(10) == Span(11, 12, 13)
    assert Span.unknown().shifted(10) == Span(10, None, math.inf)
