"""Plan-ahead accuracy on a queue replay: what the estimator sees (never an unfinished job's
duration), the baseline, and the figures."""

from bench.replay import queues
from bench.replay.estimate import Sample, StartEstimates, size_class
from scheduler.core.config import parse_conf_text

CONF = parse_conf_text(queues.SHARED_CONF_TEXT)


def _trace(long_duration):
    # Five short jobs one after the other make a history; x (long) then holds the whole
    # cluster, and y arrives while x runs.
    jobs = [queues.Job(f"s{i}", "vc", i * 200.0, 100.0, 8) for i in range(5)]
    jobs.append(queues.Job("x", "vc", 1000.0, long_duration, 8))
    jobs.append(queues.Job("y", "vc", 1050.0, 100.0, 8))
    return jobs


def _replay(jobs, every=1):
    observer = StartEstimates(CONF, every=every)
    out = queues.run_shared(jobs, {"vc": 8}, step=1.0, observer=observer)
    return observer, out


def test_an_estimate_never_reads_the_duration_of_a_job_still_running():
    short, _ = _replay(_trace(1000.0))
    long, _ = _replay(_trace(5000.0))
    # y waits for x in both replays, for a different time; its estimate is the same: x, 50 s
    # in, is expected to run as long as the five jobs before it (100 s)
    assert short._first_start["y"] != long._first_start["y"]
    assert short.samples["y"] == long.samples["y"]
    assert short.samples["y"].likely == 1100.0


def test_observing_leaves_the_replay_as_it_was():
    jobs = _trace(1000.0)
    _, watched = _replay(jobs)
    plain = queues.run_shared(jobs, {"vc": 8}, step=1.0)
    for key in ("avg_jct_s", "avg_queueing_s", "cycles", "preemptions", "gpu_utilisation"):
        assert watched[key] == plain[key]


def test_one_submission_in_every_n_is_estimated():
    observer, _ = _replay(_trace(1000.0), every=3)
    assert sorted(observer.samples) == ["s0", "s3", "y"]  # trace indices 0, 3, 6


def test_the_baseline_is_the_median_wait_of_the_queues_starts_of_the_past_day():
    observer = StartEstimates(CONF)
    observer.started("old", "vc", submit=0.0, at=5000.0)  # more than a day before
    for name, wait in (("a", 100.0), ("b", 300.0), ("c", 900.0)):
        observer.started(name, "vc", submit=100_000.0 - wait, at=100_000.0)
    assert observer._median_wait("vc", 100_000.0) == 300.0
    assert observer._median_wait("other", 100_000.0) == 0.0


def _sample(name, likely, latest=None, baseline=0.0, earliest=0.0):
    return Sample(name, "vc", 0.0, 0.0, "starts", earliest, likely, latest, 1e6, baseline)


def test_the_report_compares_the_likely_start_with_the_actual_one_and_the_baseline():
    observer = StartEstimates(CONF)
    observer.samples = {
        "a": _sample("a", likely=100.0, latest=500.0, baseline=4000.0),
        "b": _sample("b", likely=None, latest=2000.0, baseline=0.0),
        "c": _sample("c", likely=3000.0, baseline=1000.0),
    }
    observer._first_start = {"a": 0.0, "b": 2100.0, "c": 3000.0}
    report = observer.report()
    # errors: a 100, b 100 (its latest stands in), c 0; baseline 4000, 2100, 2000
    assert report["estimate"]["median_abs_error_s"] == 100.0
    assert report["baseline"]["median_abs_error_s"] == 2100.0
    assert report["median_abs_error_ratio_to_baseline"] == round(100 / 2100, 3)
    assert report["estimate"]["within_30min_share"] == 1.0
    assert report["likely_missing"] == 1
    assert report["range_coverage"] == round(2 / 3, 3)  # b started after its latest
    assert report["waited"]["samples"] == 2


def test_run_times_are_predicted_from_jobs_of_the_same_size_class():
    # Five 1-GPU jobs of 100 s, five 8-GPU jobs of 1,000 s one after the other; then x (8
    # GPUs) holds the cluster and y arrives 50 s later. The queue's median run time is 100 s;
    # the 8-GPU jobs' is 1,000 s, and x is one of them.
    jobs = [queues.Job(f"s{i}", "vc", i * 10.0, 100.0, 1) for i in range(5)]
    jobs += [queues.Job(f"l{i}", "vc", 200.0 + i * 1100.0, 1000.0, 8) for i in range(5)]
    jobs.append(queues.Job("x", "vc", 6000.0, 1000.0, 8))
    jobs.append(queues.Job("y", "vc", 6050.0, 100.0, 8))
    observer, _ = _replay(jobs)
    assert observer._first_start["x"] == 6000.0
    assert observer.samples["y"].likely == 7000.0


def test_size_classes_are_powers_of_two():
    assert [size_class(g) for g in (0.5, 1, 2, 3, 8, 9, 64)] == [
        "1", "1", "2", "4", "8", "16", "64"
    ]  # fmt: skip
