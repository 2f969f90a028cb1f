"""Run-time predictions: quantiles of the most specific history with enough samples, of the
jobs that ran longer than the job has so far, within its run-time limit."""

import math

import pytest

from scheduler.core.runtimes import RuntimeHistory, Span, quantile


def _history(**kw):
    samples = [(("cv",), float(s)) for s in (100, 200, 300, 400, 500)]
    samples += [(("cv", "ana"), float(s)) for s in (1000, 1100, 1200, 1300, 1400)]
    samples += [(("nlp",), 10_000.0)] * 3
    return RuntimeHistory(samples, **kw)


def test_the_most_specific_key_with_enough_samples_decides():
    history = _history()
    assert history.remaining(("cv", "ana", "img:1")) == Span(1100, 1200, 1300)
    # 10 under "cv" in all (five of ana's among them)
    assert history.remaining(("cv", "bob")) == Span(
        quantile(sorted([100, 200, 300, 400, 500, 1000, 1100, 1200, 1300, 1400]), 0.25),
        quantile(sorted([100, 200, 300, 400, 500, 1000, 1100, 1200, 1300, 1400]), 0.5),
        quantile(sorted([100, 200, 300, 400, 500, 1000, 1100, 1200, 1300, 1400]), 0.75),
    )


def test_too_few_samples_fall_back_to_the_broader_key():
    # nlp has 3 samples (< 5): every finished job counts
    history = _history()
    everything = sorted([100, 200, 300, 400, 500, 1000, 1100, 1200, 1300, 1400] + [10_000] * 3)
    assert history.remaining(("nlp",)).likely == quantile(everything, 0.5)


def test_a_running_job_is_judged_by_the_jobs_that_ran_longer():
    history = _history()
    # ana's job has run 1150 s: three of her runs were longer, and still only those three
    # under "cv" (3 < 5), so every finished job that ran longer decides: those and nlp's
    span = history.remaining(("cv", "ana"), elapsed=1150)
    above = [1200.0, 1300.0, 1400.0, 10_000.0, 10_000.0, 10_000.0]
    assert span == Span(
        quantile(above, 0.25) - 1150, quantile(above, 0.5) - 1150, quantile(above, 0.75) - 1150
    )


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


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"elapsed": -1}, "elapsed: must be >= 0"), ({"limit": 0}, "limit: must be > 0")],
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
