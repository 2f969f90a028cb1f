"""GPU devices in the core: whole cards and shares of one card, placed on device indices."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core.cycle import run_cycle
from scheduler.core.devices import DeviceLedger, GpuNeed, gpu_need
from scheduler.core.resources import Resources, memory_cost_milli
from scheduler.core.scenario import ScenarioError, load_scenario, result_to_dict
from scheduler.core.types import GpuDevice

GI = 1024**3
SEED = {
    "actions": "enqueue, allocate",
    "tiers": [
        {"plugins": [{"name": "priority"}, {"name": "gang"}]},
        {"plugins": [{"name": "predicates"}, {"name": "proportion"}, {"name": "binpack"}]},
    ],
}


def _node(name="n1", gpus=4, memory=80 * GI):
    return {
        "name": name,
        "allocatable": {"cpu": 64000, "memory": 256 * GI, "gpu": gpus},
        "gpus": [{"index": i, "model": "A100", "memory": memory} for i in range(gpus)],
    }


def _job(name, *tasks, created=0, queue="q", **extra):
    return {"name": name, "queue": queue, "created": created, "tasks": list(tasks), **extra}


def _task(name, gpu=None, **extra):
    requests = {"cpu": 1000}
    if gpu is not None:
        requests["gpu"] = gpu
    return {"name": name, "requests": requests, **extra}


def _run(jobs, nodes=None, queues=None, config=None):
    data = {
        "config": config or SEED,
        "nodes": nodes or [_node()],
        "queues": queues or [{"name": "q"}],
        "jobs": jobs,
    }
    snapshot, conf = load_scenario(data)
    return result_to_dict(run_cycle(snapshot, conf))


def test_shares_pack_onto_a_shared_card_and_whole_cards_take_free_ones():
    out = _run(
        [
            _job("a", _task("a-0", 0.5, status="Running", node="n1", gpu_indices=[2])),
            _job("b", _task("b-0", 0.25), created=1),
            _job("c", _task("c-0", 2), created=2),
            _job("d", _task("d-0", 0.5), created=3),
        ]
    )
    assert out["devices"] == {"b-0": [2], "c-0": [0, 1], "d-0": [3]}
    assert out["queues"]["q"]["allocated"]["gpu"] == 3.25


def test_whole_cards_need_wholly_free_devices_not_just_a_free_count():
    # 2.0 GPUs are idle in sum, spread as halves over four cards: no whole card is free
    running = [_task(f"r-{i}", 0.5, status="Running", node="n1", gpu_indices=[i]) for i in range(4)]
    out = _run([_job("r", *running), _job("w", _task("w-0", 1), created=1)])
    assert "w-0" not in out["bind"]
    assert "w" in out["pending"]


def test_gpu_memory_needs_that_memory_free_on_one_card():
    nodes = [_node(gpus=2, memory=40 * GI)]
    out = _run(
        [
            _job("a", _task("a-0", gpu_memory=30 * GI), created=0),
            _job("b", _task("b-0", gpu_memory=30 * GI), created=1),
            _job("c", _task("c-0", gpu_memory=20 * GI), created=2),
        ],
        nodes=nodes,
    )
    # 30 GiB of a 40 GiB card costs 750 milli-GPU; two of them take both cards, 20 GiB
    # (500 milli-GPU) then fits on neither
    assert out["devices"] == {"a-0": [0], "b-0": [1]}
    assert out["queues"]["q"]["allocated"]["gpu"] == 1.5
    assert "c" in out["pending"]


def test_a_gpu_memory_request_costs_its_share_of_the_smallest_card():
    assert memory_cost_milli(10 * GI, 80 * GI) == 125
    assert memory_cost_milli(1, 80 * GI) == 1  # ceil, never free
    assert memory_cost_milli(100 * GI, 80 * GI) == 1000
    snapshot, _ = load_scenario(
        {
            "nodes": [_node("big", memory=80 * GI), _node("small", memory=24 * GI)],
            "queues": [{"name": "q"}],
            "jobs": [_job("a", _task("a-0", gpu_memory=12 * GI))],
        }
    )
    assert snapshot.jobs[0].tasks[0].requests.get("gpu") == 0.5


def test_a_queue_cap_counts_shares_exactly():
    # 0.75 held; 0.25 more reaches the one-GPU cap exactly, 0.3 more would pass it by 0.05,
    # which Volcano's 0.1 tolerance on whole GPUs would have let through
    queues = [{"name": "q", "capability": {"gpu": 1}}]
    held = _job("a", _task("a-0", 0.75, status="Running", node="n1"))
    over = _run([held, _job("b", _task("b-0", 0.3), created=1)], queues=queues)
    exact = _run([held, _job("b", _task("b-0", 0.25), created=1)], queues=queues)
    assert over["bind"] == {}
    assert exact["bind"] == {"b-0": "n1"}


def test_a_gang_that_does_not_fit_gives_its_devices_back():
    out = _run(
        [
            _job("g", _task("g-0", 0.5), _task("g-1", 4), created=0),
            _job("h", _task("h-0", 1), created=1),
        ]
    )
    assert out["devices"] == {"h-0": [0]}


def test_running_pods_without_device_ids_get_the_lowest_free_cards():
    out = _run(
        [
            _job("named", _task("n-0", 1, status="Running", node="n1", gpu_indices=[0])),
            _job("unnamed", _task("u-0", 1, status="Running", node="n1"), created=1),
            _job("new", _task("w-0", 1), created=2),
        ]
    )
    assert out["devices"] == {"w-0": [2]}


def test_preempt_frees_a_whole_card_when_the_free_count_is_split_over_two():
    # one GPU is free in sum, as halves of cards 1 and 3: the count fits, no card does
    config = {**SEED, "actions": "enqueue, allocate, preempt"}
    held = [(0, 1), (2, 1), (1, 0.5), (3, 0.5)]
    low = [
        _task(f"low-{n}", gpu, status="Running", node="n1", gpu_indices=[card])
        for n, (card, gpu) in enumerate(held)
    ]
    out = _run(
        [
            _job("low", *low, priority=1, min_available=1),
            _job("high", _task("high-0", 1), priority=10, created=1),
        ],
        config=config,
    )
    assert out["bind"] == {}
    assert [(e["task"], e["gpus"]) for e in out["evictions"]] == [("low-3", [3])]
    assert out["pipelined"] == {"high-0": "n1"}
    assert out["devices"] == {"high-0": [3]}


@pytest.mark.parametrize(
    ("gpu", "memory", "expected"),
    [
        pytest.param(2, 0, GpuNeed(whole=2), id="whole"),
        pytest.param(0.25, 0, GpuNeed(milli=250), id="share"),
        pytest.param(0.25, 5 * GI, GpuNeed(milli=250, memory=5 * GI), id="share+memory"),
        pytest.param(0, 0, None, id="none"),
    ],
)
def test_gpu_need_reads_whole_cards_and_shares(gpu, memory, expected):
    assert gpu_need(gpu, memory) == expected


def test_a_whole_and_a_part_is_never_placeable():
    need = gpu_need(1.5, 0)
    assert need.invalid
    ledger = DeviceLedger(tuple(GpuDevice(i) for i in range(4)))
    assert ledger.pick(need, False) is None


def test_ledger_books_now_and_later_like_idle_and_future_idle():
    ledger = DeviceLedger((GpuDevice(0), GpuDevice(1)))
    whole = GpuNeed(whole=1)
    ledger.hold(whole, (0,))
    ledger.release(whole, (0,))  # leaving: busy now, free later
    assert ledger.pick(GpuNeed(whole=2), False) is None
    assert ledger.pick(GpuNeed(whole=2), True) == (0, 1)
    ledger.promise(GpuNeed(milli=500), (1,))
    assert ledger.shared()
    assert ledger.pick(GpuNeed(milli=600), True) == (0,)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        pytest.param({"gpu": 1.5}, "jobs[0].tasks[0].requests.gpu", id="whole-and-part"),
        pytest.param({"gpu": 0.0005}, "jobs[0].tasks[0].requests.gpu", id="below-milli"),
    ],
)
def test_bad_gpu_requests_name_the_field(change, field):
    data = {
        "nodes": [_node()],
        "queues": [{"name": "q"}],
        "jobs": [_job("a", {"name": "a-0", "requests": change})],
    }
    with pytest.raises(ScenarioError) as info:
        load_scenario(data)
    assert info.value.field == field


def test_gpu_memory_without_known_card_memory_names_the_field():
    data = {
        "nodes": [{"name": "n1", "allocatable": {"gpu": 2}}],
        "queues": [{"name": "q"}],
        "jobs": [_job("a", _task("a-0", gpu_memory=GI))],
    }
    with pytest.raises(ScenarioError) as info:
        load_scenario(data)
    assert info.value.field == "jobs[0].tasks[0].gpu_memory"


def test_a_node_listing_fewer_cards_than_it_allocates_names_the_field():
    node = _node()
    node["gpus"] = node["gpus"][:3]
    with pytest.raises(ScenarioError) as info:
        load_scenario({"nodes": [node], "queues": [], "jobs": []})
    assert info.value.field == "nodes[0].gpus"


def test_gpu_comparisons_tolerate_only_a_ten_thousandth_of_a_card():
    cap = Resources.unlimited({"gpu": 1})
    assert Resources({"gpu": 1.00005}).less_equal(cap)
    assert not Resources({"gpu": 1.05}).less_equal(cap)
    assert Resources({"cpu": 1000.05}).less_equal(Resources({"cpu": 1000}))


def test_shares_go_to_the_cards_other_workloads_left():
    """Another scheduler's pods hold all of card 0 and 70% of card 1 (gpus_used_by_others, their
    sum in used_by_others): a half goes to card 2, a quarter fills card 1, one whole card is
    left for a whole-card pod and none for a pair."""
    import dataclasses

    data = {
        "config": SEED,
        "nodes": [_node()],
        "queues": [{"name": "q"}],
        "jobs": [
            _job("half", _task("half-0", 0.5)),
            _job("quarter", _task("quarter-0", 0.25), created=1),
            _job("pair", _task("pair-0", 2), created=2),
            _job("more", _task("more-0", 1), created=3),
        ],
    }
    snapshot, conf = load_scenario(data)
    (node,) = snapshot.nodes
    held = dataclasses.replace(
        node,
        used_by_others=Resources({"gpu": 1.7}),
        gpus_used_by_others=((0, 1000, 80 * GI), (1, 700, 10 * GI)),
    )
    out = result_to_dict(run_cycle(dataclasses.replace(snapshot, nodes=(held,)), conf))
    assert out["devices"] == {"half-0": [2], "quarter-0": [1], "more-0": [3]}
    assert "pair" in out["pending"]  # 1.55 GPUs were left: one whole card and a half


_BOOKINGS = st.lists(
    st.tuples(
        st.sampled_from(["hold", "promise", "release"]),
        st.sampled_from(
            [GpuNeed(whole=1), GpuNeed(whole=2), GpuNeed(milli=250), GpuNeed(milli=500)]
        ),
        st.lists(st.integers(0, 4), min_size=1, max_size=2, unique=True),  # 4: not listed
        st.sampled_from([1, -1]),
    ),
    max_size=30,
)


@settings(max_examples=200, deadline=None)
@given(bookings=_BOOKINGS)
def test_the_ledger_knows_a_card_is_partly_held_as_a_look_at_every_card_would(bookings):
    ledger = DeviceLedger(tuple(GpuDevice(i) for i in range(4)))
    for change, need, indices, sign in bookings:
        getattr(ledger, change)(need, tuple(indices), sign)
        partly = any(0 < v < 1000 for v in ledger.now) or any(0 < v < 1000 for v in ledger.future)
        assert ledger.shared() is partly
