"""Plan ahead: the core run forward at the instants running jobs end gives each pending job an
estimated start, as a range, or says "later" (not within the horizon) or "never"."""

import math
import random
from dataclasses import replace

import pytest

from scheduler.core.config import parse_conf
from scheduler.core.plan import Outlook, PlanLimits, StartEstimate, next_start, plan_starts
from scheduler.core.runtimes import Span
from scheduler.core.types import Snapshot
from tests.scheduler.core.builders import SEED_TIERS, make_job, make_node, make_queue, make_task

HOUR = 3600.0
NOW = 1_000_000.0
CONF = parse_conf({"actions": "enqueue, allocate, backfill, preempt, reclaim", "tiers": SEED_TIERS})


def _running(name, node, gpus=8, queue="q", created=0):
    return make_job(
        name, queue, [make_task(f"{name}-0", gpu=gpus, status="Running", node=node)], created
    )


def _gang(name, pods, gpus, queue="q", created=1):
    tasks = [make_task(f"{name}-{i}", gpu=gpus) for i in range(pods)]
    return make_job(name, queue, tasks, created)


def _plan(nodes, jobs, queues=None, **kw):
    snapshot = Snapshot(tuple(nodes), tuple(queues or [make_queue("q")]), tuple(jobs), now=NOW)
    return plan_starts(snapshot, CONF, **kw)


def test_a_job_starts_when_the_running_job_holding_its_node_ends():
    plan = _plan(
        [make_node("n1")],
        [_running("a", "n1"), _gang("b", 1, 8)],
        ends={"a": Span(NOW + HOUR, NOW + 2 * HOUR, NOW + 3 * HOUR)},
        durations={"b": Span.exactly(HOUR)},
    )
    assert plan.starts == {
        "b": StartEstimate(Outlook.STARTS, NOW + HOUR, NOW + 2 * HOUR, NOW + 3 * HOUR)
    }


def test_what_fits_now_starts_now():
    plan = _plan([make_node("n1")], [_running("a", "n1", gpus=4), _gang("b", 1, 4)])
    assert plan.starts["b"] == StartEstimate(Outlook.STARTS, NOW, NOW, NOW)


def test_a_gang_waits_for_the_second_of_the_two_ends_it_needs():
    ends = {
        "a": Span.exactly(NOW + HOUR),
        "c": Span.exactly(NOW + 5 * HOUR),
        "d": Span.exactly(NOW + 20 * HOUR),
    }
    nodes = [make_node("n1"), make_node("n2"), make_node("n3")]
    jobs = [_running("a", "n1"), _running("c", "n2"), _running("d", "n3"), _gang("g", 2, 8)]
    plan = _plan(nodes, jobs, ends=ends)
    assert plan.starts["g"] == StartEstimate(
        Outlook.STARTS, NOW + 5 * HOUR, NOW + 5 * HOUR, NOW + 5 * HOUR
    )


def test_a_job_placed_in_the_simulation_holds_its_node_until_its_own_end():
    # b takes n1 when a ends, for its own two hours; c, behind it in line, starts after b.
    jobs = [_running("a", "n1"), _gang("b", 1, 8, created=1), _gang("c", 1, 8, created=2)]
    plan = _plan(
        [make_node("n1")],
        jobs,
        ends={"a": Span.exactly(NOW + HOUR)},
        durations={"b": Span(HOUR, 2 * HOUR, 4 * HOUR), "c": Span.exactly(HOUR)},
    )
    assert plan.starts["b"] == StartEstimate(Outlook.STARTS, NOW + HOUR, NOW + HOUR, NOW + HOUR)
    assert plan.starts["c"] == StartEstimate(
        Outlook.STARTS, NOW + 2 * HOUR, NOW + 3 * HOUR, NOW + 5 * HOUR
    )


def test_a_job_that_can_never_run_is_said_so_with_the_cores_sentence():
    plan = _plan([make_node("n1")], [_gang("big", 1, 16)])
    estimate = plan.starts["big"]
    assert estimate.outlook is Outlook.NEVER
    assert estimate.reason.startswith("can never run as submitted: ")
    assert (estimate.earliest, estimate.likely, estimate.latest) == (None, None, None)


def test_a_job_behind_ends_beyond_the_horizon_starts_later():
    plan = _plan(
        [make_node("n1")],
        [_running("a", "n1"), _gang("b", 1, 8)],
        ends={"a": Span.exactly(NOW + 8 * 24 * HOUR)},
    )
    assert plan.starts["b"] == StartEstimate(Outlook.LATER)
    assert plan.until == NOW + 7 * 24 * HOUR


def test_the_latest_end_beyond_the_horizon_leaves_the_range_open():
    plan = _plan(
        [make_node("n1")],
        [_running("a", "n1"), _gang("b", 1, 8)],
        ends={"a": Span(NOW + HOUR, NOW + 2 * HOUR, NOW + 10 * 24 * HOUR)},
    )
    assert plan.starts["b"] == StartEstimate(Outlook.STARTS, NOW + HOUR, NOW + 2 * HOUR, None)


def test_a_running_job_without_any_estimate_gives_a_range_not_a_time():
    # Nothing is known of a: it may end at once, or not within the horizon.
    plan = _plan([make_node("n1")], [_running("a", "n1"), _gang("b", 1, 8)])
    estimate = plan.starts["b"]
    assert estimate.outlook is Outlook.STARTS
    assert estimate.likely is None
    assert estimate.latest is None
    assert NOW < estimate.earliest <= NOW + 2 * 60


def test_an_unknown_end_bounded_by_a_limit_still_gives_no_likely_time():
    # a's end is only bounded (say by its queue's run-time limit): the likely run uses the
    # bound, and a start that follows it is a range, not a likely time.
    plan = _plan(
        [make_node("n1")],
        [_running("a", "n1"), _gang("b", 1, 8)],
        ends={"a": Span.unknown(3 * HOUR).shifted(NOW)},
    )
    assert plan.starts["b"] == StartEstimate(Outlook.STARTS, NOW + 60, None, NOW + 3 * HOUR)


def test_a_job_started_in_the_simulation_without_a_run_time_makes_later_starts_ranges():
    jobs = [_running("a", "n1"), _gang("b", 1, 8, created=1), _gang("c", 1, 8, created=2)]
    plan = _plan(
        [make_node("n1")],
        jobs,
        ends={"a": Span.exactly(NOW + HOUR)},
        durations={"b": Span.unknown(4 * HOUR)},
    )
    assert plan.starts["b"].likely == NOW + HOUR
    assert plan.starts["c"].likely is None
    assert plan.starts["c"].latest == NOW + 5 * HOUR


def test_ends_close_together_are_one_instant_at_the_last_of_them():
    # Ends 30 s apart are within the 60-s resolution: one core run when both have ended.
    nodes = [make_node("n1"), make_node("n2")]
    ends = {"a": Span.exactly(NOW + HOUR), "c": Span.exactly(NOW + HOUR + 30)}
    jobs = [_running("a", "n1"), _running("c", "n2"), _gang("b", 1, 8)]
    plan = _plan(nodes, jobs, ends=ends)
    assert plan.starts["b"].likely == NOW + HOUR + 30
    assert plan.instants == 1 + 3  # the snapshot's instant, then one per run


def test_an_instant_where_nothing_could_fit_does_not_run_the_core():
    # a frees 4 GPUs, too few for b: only c's end runs the core.
    nodes = [make_node("n1"), make_node("n2")]
    ends = {
        "a": Span.exactly(NOW + HOUR),
        "c": Span.exactly(NOW + 3 * HOUR),
        "e": Span.exactly(NOW + 10 * HOUR),
    }
    jobs = [
        _running("a", "n1", gpus=4),
        _running("e", "n1", gpus=4),
        _running("c", "n2"),
        _gang("b", 1, 8),
    ]
    plan = _plan(nodes, jobs, ends=ends)
    assert plan.starts["b"].likely == NOW + 3 * HOUR
    assert plan.instants == 1 + 3


def test_the_instant_cap_stops_a_run_and_says_how_far_it_looked():
    nodes = [make_node("n1")]
    jobs = [_running("a", "n1")] + [_gang(f"b{i}", 1, 8, created=i) for i in range(1, 6)]
    durations = {f"b{i}": Span.exactly(HOUR) for i in range(1, 6)}
    plan = _plan(
        nodes,
        jobs,
        ends={"a": Span.exactly(NOW + HOUR)},
        durations=durations,
        limits=PlanLimits(max_instants=2),
    )
    assert [plan.starts[f"b{i}"].likely for i in range(1, 4)] == [NOW + HOUR, NOW + 2 * HOUR, None]
    assert plan.starts["b3"].outlook is Outlook.LATER
    assert plan.until == NOW + 2 * HOUR


def test_a_queue_at_its_capability_waits_for_its_own_jobs_to_end():
    # Room on the nodes, none in the queue: b starts when a (same queue) ends, not before.
    queues = [make_queue("q", capability={"gpu": 8}), make_queue("other")]
    plan = _plan(
        [make_node("n1"), make_node("n2")],
        [_running("a", "n1"), _gang("b", 1, 8)],
        queues,
        ends={"a": Span.exactly(NOW + 2 * HOUR)},
    )
    assert plan.starts["b"].likely == NOW + 2 * HOUR


def _random_snapshot(seed: int) -> tuple[Snapshot, dict[str, Span], dict[str, Span]]:
    rng = random.Random(seed)
    nodes = [make_node(f"n{i}") for i in range(6)]
    queues = [make_queue("q1", weight=2), make_queue("q2")]
    jobs, ends, durations = [], {}, {}
    free = {node.name: 8 for node in nodes}
    for i in range(30):
        gpus = rng.choice((1, 2, 4, 8))
        queue = rng.choice(("q1", "q2"))
        node = next((n for n, left in free.items() if left >= gpus), None)
        if node is not None and rng.random() < 0.5:
            free[node] -= gpus
            jobs.append(_running(f"j{i}", node, gpus, queue, created=i))
            end = NOW + rng.uniform(0, 10 * HOUR)
            ends[f"j{i}"] = Span(end - HOUR, end, end + HOUR)
        else:
            jobs.append(_gang(f"j{i}", rng.choice((1, 2)), gpus, queue, created=i))
            length = rng.uniform(HOUR, 5 * HOUR)
            durations[f"j{i}"] = Span(length / 2, length, length * 2)
    return Snapshot(tuple(nodes), tuple(queues), tuple(jobs), now=NOW), ends, durations


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_same_input_in_any_order_gives_the_same_plan(seed):
    snapshot, ends, durations = _random_snapshot(seed)
    plan = plan_starts(snapshot, CONF, ends=ends, durations=durations)
    shuffled = list(snapshot.jobs)
    random.Random(seed).shuffle(shuffled)
    again = plan_starts(
        replace(snapshot, jobs=tuple(shuffled)),
        CONF,
        ends=dict(reversed(list(ends.items()))),
        durations=durations,
    )
    assert again == plan
    assert plan_starts(snapshot, CONF, ends=ends, durations=durations) == plan


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_estimate_is_an_ordered_range_within_the_horizon(seed):
    snapshot, ends, durations = _random_snapshot(seed)
    plan = plan_starts(snapshot, CONF, ends=ends, durations=durations)
    assert plan.starts
    for estimate in plan.starts.values():
        if estimate.outlook is not Outlook.STARTS:
            continue
        assert NOW <= estimate.earliest <= plan.until
        if estimate.likely is not None:
            assert estimate.earliest <= estimate.likely
            assert estimate.latest is None or estimate.likely <= estimate.latest


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("horizon", 0, "horizon: must be a positive number of seconds"),
        ("resolution", math.inf, "resolution: must be a positive number of seconds"),
        ("growth", -1, "growth: must be >= 0"),
        ("max_instants", 0, "max_instants: must be at least 1"),
    ],
)
def test_bad_limits_name_the_field(field, value, message):
    with pytest.raises(ValueError, match=message):
        PlanLimits(**{field: value})


def test_with_few_instants_left_windows_widen_to_reach_the_horizon_and_starts_come_late():
    # Ten ends an hour apart, three instants per run: wider windows, every job still placed
    # within the horizon, none before the end that freed its node.
    nodes = [make_node(f"n{i:02d}") for i in range(10)]
    jobs = [_running(f"a{i:02d}", f"n{i:02d}", created=i) for i in range(10)]
    jobs += [_gang(f"b{i:02d}", 1, 8, created=10 + i) for i in range(10)]
    ends = {f"a{i:02d}": Span.exactly(NOW + (i + 1) * HOUR) for i in range(10)}
    plan = _plan(nodes, jobs, ends=ends, limits=PlanLimits(max_instants=3))
    exact = _plan(nodes, jobs, ends=ends, limits=PlanLimits(growth=0, max_instants=50))
    assert plan.until == NOW + 7 * 24 * HOUR
    assert plan.instants <= 1 + 3 * 3
    assert [exact.starts[f"b{i:02d}"].likely for i in range(10)] == [
        NOW + (i + 1) * HOUR for i in range(10)
    ]
    for i in range(10):
        assert plan.starts[f"b{i:02d}"].likely >= NOW + (i + 1) * HOUR


def test_a_queues_next_start_is_its_soonest_likely_start():
    nodes = [make_node("n1"), make_node("n2")]
    jobs = [
        _running("a", "n1"),
        _running("c", "n2"),
        _gang("b", 1, 8, created=1),
        _gang("d", 1, 16, created=2),  # never
    ]
    ends = {
        "a": Span.exactly(NOW + 3 * HOUR),
        "c": Span(NOW + HOUR, NOW + 2 * HOUR, NOW + 5 * HOUR),
    }
    plan = _plan(nodes, jobs, ends=ends)
    assert next_start(plan, ["b", "d"]) == plan.starts["b"]
    assert plan.starts["b"].likely == NOW + 2 * HOUR
    assert next_start(plan, ["d"]) is None
    assert next_start(plan, []) is None


def test_a_preemptor_starts_when_its_victims_pods_are_released_not_when_another_job_ends():
    """The victim's pod is releasing on n1 (under a notice until NOW + 300 s); n2 is busy for
    five hours. The preemptor gets n1 once the pod is gone; the victim, placed again, after
    the preemptor's own hour."""
    victim = make_job("v", "q", [make_task("v-0", gpu=8, status="Releasing", node="n1")], 0)
    preemptor = make_job("b", "q", [make_task("b-0", gpu=8)], 1, priority=100)
    nodes = [make_node("n1"), make_node("n2")]
    jobs = [victim, preemptor, _running("o", "n2")]
    runs = {"o": Span.exactly(NOW + 5 * HOUR)}
    durations = {"b": Span.exactly(HOUR), "v": Span.exactly(HOUR)}
    notice = Span(NOW, NOW + 300, NOW + 330)
    plan = _plan(nodes, jobs, ends=runs, durations=durations, releases={"v-0": notice})
    assert plan.starts["b"] == StartEstimate(Outlook.STARTS, NOW + 60, NOW + 300, NOW + 330)
    assert plan.starts["v"] == StartEstimate(
        Outlook.STARTS, NOW + 60 + HOUR, NOW + 300 + HOUR, NOW + 330 + HOUR
    )
    # Without an instant of its own, a releasing pod is gone by the next instant.
    plan = _plan(nodes, jobs, ends=runs, durations=durations)
    assert plan.starts["b"] == StartEstimate(Outlook.STARTS, NOW + 60, NOW + 60, NOW + 60)


def test_an_elastic_jobs_released_pod_frees_room_while_the_job_runs_on():
    elastic = make_job(
        "e", "q",
        [
            make_task("e-0", gpu=4, status="Running", node="n1"),
            make_task("e-1", gpu=4, status="Releasing", node="n1"),
        ],
        0, min_available=1,
    )  # fmt: skip
    preemptor = make_job("b", "q", [make_task("b-0", gpu=4)], 1, priority=100)
    plan = _plan(
        [make_node("n1")],
        [elastic, preemptor],
        ends={"e": Span.exactly(NOW + 10 * HOUR)},
        durations={"b": Span.exactly(HOUR)},
        releases={"e-1": Span.exactly(NOW + 120)},
    )
    assert plan.starts["b"] == StartEstimate(Outlook.STARTS, NOW + 120, NOW + 120, NOW + 120)
