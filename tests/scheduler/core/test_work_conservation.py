"""Demand that can be met, idle capacity lent or explained, reclaim that says why it waits."""

import json
from pathlib import Path

import pytest

from scheduler.core.config import ConfigError, parse_conf
from scheduler.core.cycle import run_cycle
from scheduler.core.scenario import load_scenario
from scheduler.core.types import Snapshot
from tests.scheduler.core.builders import make_job, make_node, make_queue, make_task

SCENARIOS = Path(__file__).resolve().parents[3] / "scheduler" / "scenarios"
GI = 1024**3


def _scenario(name: str, **proportion_arguments):
    data = json.loads((SCENARIOS / f"{name}.json").read_text())
    if proportion_arguments:
        for tier in data["config"]["tiers"]:
            for plugin in tier["plugins"]:
                if plugin["name"] == "proportion":
                    plugin["arguments"] = {**plugin.get("arguments", {}), **proportion_arguments}
    return run_cycle(*load_scenario(data))


def _gpu(result, queue, field):
    return getattr(result.queues[queue], field).get("gpu")


def test_a_job_that_can_never_run_takes_no_share():
    result = _scenario("proportion-never-runnable-takes-no-share")
    assert result.pending_kinds["a-huge"] == "never"
    assert (_gpu(result, "a", "request"), _gpu(result, "a", "deserved")) == (2, 2)
    assert _gpu(result, "b", "deserved") == 14
    assert sorted(b.job for b in result.binds) == ["a-one", "b-1", "b-2", "b-3"]


def test_exclude_never_runnable_false_is_upstream():
    result = _scenario("proportion-never-runnable-takes-no-share", excludeNeverRunnable=False)
    assert _gpu(result, "a", "request") == 18
    assert (_gpu(result, "a", "deserved"), _gpu(result, "b", "deserved")) == (8, 8)
    assert sorted(b.job for b in result.binds) == ["a-one", "b-1", "b-2"]


def test_idle_capacity_is_lent_to_a_job_its_share_holds_back():
    result = _scenario("proportion-lend-idle-to-a-job-that-fits")
    assert [(b.task, b.node) for b in result.binds] == [("b-small-0", "n1")]
    assert result.work_conservation.lent == ("b-small",)
    assert result.evictions == ()


def test_without_lending_the_reason_and_the_cycle_record_name_the_idle_gpus():
    result = _scenario("proportion-lend-idle-to-a-job-that-fits", lendIdle=False)
    assert result.binds == ()
    assert result.pending_reasons["b-small"].endswith(
        "GPUs idle: 4, enough for it now; held back only by the deserved share of queue b "
        "(this conf lends no idle capacity: proportion's lendIdle is off)"
    )
    assert result.work_conservation.held_with_idle_room == ("b-small",)
    assert result.work_conservation.idle_gpus == 4
    # a-big fits no node's idle GPUs: no such note
    assert "GPUs idle" not in result.pending_reasons["a-big"]


def test_a_reclaim_that_waits_says_why_and_what_releases_it():
    result = _scenario("reclaim-waits-explained-gang-across-nodes")
    assert result.evictions == ()
    assert result.pending_reasons["notebook"].endswith(
        "queue a holds 12 GPUs against a deserved share of 10, but reclaim takes nothing from "
        "it for this job: the pods that would make room belong to gang train (12 GPUs on 3 "
        "nodes), and reclaim evicts a gang only whole, from the one node it makes room on for "
        "a pod of 2 GPUs; it starts when running pods of queue a end"
    )
    assert result.work_conservation.reclaim_waits == ("notebook",)


def test_a_queue_that_is_not_reclaimable_is_named():
    data = json.loads((SCENARIOS / "reclaim-waits-explained-gang-across-nodes.json").read_text())
    data["queues"][0]["reclaimable"] = False
    result = run_cycle(*load_scenario(data))
    assert (
        "reclaim takes nothing from it for this job: queue a is not reclaimable"
        in (result.pending_reasons["notebook"])
    )


def _tree(jobs, capability=24, **arguments):
    """The demo's shape: tenant nlp (capped) with a training and an interactive queue, tenant
    vision with one queue, four 8-GPU nodes; proportion with ``enableHierarchy``, lending by
    default (as the seed conf), ``arguments`` on top."""
    queues = [
        make_queue("tenant/nlp", capability={"gpu": capability}),
        make_queue("nlp-train", parent="tenant/nlp", weight=4),
        make_queue("nlp-interactive", parent="tenant/nlp", weight=1),
        make_queue("tenant/vision"),
        make_queue("vision-train", parent="tenant/vision"),
    ]
    tiers = [
        {"plugins": [{"name": "priority"}, {"name": "gang"}, {"name": "conformance"}]},
        {
            "plugins": [
                {"name": "predicates"},
                {
                    "name": "proportion",
                    "enableHierarchy": True,
                    "arguments": {"lendIdle": True, **arguments},
                },
            ]
        },
    ]
    conf = parse_conf({"actions": "enqueue, allocate, backfill, reclaim", "tiers": tiers})
    nodes = [make_node(f"gpu-worker-{i}") for i in range(1, 5)]
    return run_cycle(Snapshot(tuple(nodes), tuple(queues), tuple(jobs)), conf)


def test_in_the_tree_a_gang_above_its_tenants_capability_takes_no_share():
    # bert-pretrain (32 GPUs) can never run in a tenant capped at 24: the vision queue's
    # 16-GPU job gets the share it would have taken.
    bert = make_job("bert", "nlp-train", [make_task(f"bert-{i}", gpu=8) for i in range(4)], 1)
    tok = make_job("tok", "nlp-interactive", [make_task("tok-0", gpu=4)], 2)
    detr = make_job("detr", "vision-train", [make_task(f"detr-{i}", gpu=8) for i in range(2)], 3)
    result = _tree([bert, tok, detr])
    assert result.pending_kinds["bert"] == "never"
    assert _gpu(result, "tenant/nlp", "request") == 4
    assert sorted(b.job for b in result.binds) == ["detr", "detr", "tok"]


def test_in_the_tree_exclude_never_runnable_false_is_upstream():
    # bert's 32 GPUs count in tenant nlp's demand: the tenant's share is split by weight
    # between its queues, and tok (4 GPUs) waits on nlp-interactive's 3.2, the case.
    bert = make_job("bert", "nlp-train", [make_task(f"bert-{i}", gpu=8) for i in range(4)], 1)
    tok = make_job("tok", "nlp-interactive", [make_task("tok-0", gpu=4)], 2)
    detr = make_job("detr", "vision-train", [make_task(f"detr-{i}", gpu=8) for i in range(2)], 3)
    result = _tree([bert, tok, detr], excludeNeverRunnable=False, lendIdle=False)
    assert result.pending_kinds["bert"] == "never"
    assert _gpu(result, "tenant/nlp", "request") == 36
    assert _gpu(result, "nlp-interactive", "deserved") == pytest.approx(3.2)
    assert sorted(b.job for b in result.binds) == ["detr", "detr"]
    assert result.pending_kinds["tok"] == "waits"


def _tree_at_its_share():
    """Tenant nlp at its share of 16 (12 + 4 running); gpt (8 GPUs, nlp-train) fits the idle
    gpu-worker-3 but the tenant's share holds it back; vision's 2 x 8 gang fits no two nodes."""
    running = [
        make_task("train-run-0", gpu=8, status="Running", node="gpu-worker-1"),
        make_task("train-run-1", gpu=4, status="Running", node="gpu-worker-2"),
    ]
    return [
        make_job("vis-run", "vision-train", [
            make_task("vis-run-0", gpu=8, status="Running", node="gpu-worker-4")], 0),
        make_job("detr", "vision-train", [make_task(f"detr-{i}", gpu=8) for i in range(2)], 3),
        make_job("train-run", "nlp-train", running, 0),
        make_job("gpt", "nlp-train", [make_task("gpt-0", gpu=8)], 4),
        make_job("nb-run", "nlp-interactive", [
            make_task("nb-run-0", gpu=3, status="Running", node="gpu-worker-2")], 0),
        make_job("tok", "nlp-interactive", [make_task("tok-0", gpu=1)], 5),
    ]  # fmt: skip


def test_in_the_tree_idle_capacity_is_lent_within_the_tenants_capability():
    result = _tree(_tree_at_its_share(), capability=24)
    assert ("gpt-0", "gpu-worker-3") in [(b.task, b.node) for b in result.binds]
    assert result.work_conservation.lent == ("gpt",)
    assert _gpu(result, "tenant/nlp", "allocated") == 24
    assert _gpu(result, "tenant/nlp", "deserved") == 16


def test_in_the_tree_lending_stops_at_an_ancestors_capability():
    result = _tree(_tree_at_its_share(), capability=23)
    assert "gpt" not in [b.job for b in result.binds]
    assert result.work_conservation.lent == ()
    assert result.pending_reasons["gpt"].endswith(
        "GPUs idle: 8, enough for it now, but beyond what queue nlp-train may hold (its "
        "capability, borrowing limit, or what other queues' guarantees keep for them)"
    )


def test_in_the_tree_without_lending_the_reason_names_the_idle_gpus():
    result = _tree(_tree_at_its_share(), lendIdle=False)
    assert "gpt" not in [b.job for b in result.binds]
    assert result.pending_reasons["gpt"].endswith(
        "GPUs idle: 8, enough for it now; held back only by the deserved share of queue "
        "nlp-train (this conf lends no idle capacity: proportion's lendIdle is off)"
    )
    assert result.work_conservation.held_with_idle_room == ("gpt",)
    assert result.work_conservation.idle_gpus == 8


def test_a_lent_pod_is_the_first_reclaimed_when_the_lenders_queue_needs_it():
    # Cycle 1: a (weight 3) waits on a gang that fits nowhere; b (weight 1) is above its share,
    # and b-small is lent n1's 2 idle GPUs. Cycle 2: a's gang is gone and a-new (2 GPUs, within
    # a's share) finds both nodes full: reclaim takes the lent pod, not b's older one beside it.
    nodes = [make_node("n1"), make_node("n2")]
    queues = [make_queue("a", weight=3), make_queue("b", weight=1)]
    a_run = make_job("a-run", "a", [make_task("a-run-0", gpu=8, status="Running", node="n2")], 0)
    b_run = make_job("b-run", "b", [make_task("b-run-0", gpu=6, status="Running", node="n1")], 1)
    tiers = [
        {"plugins": [{"name": "priority"}, {"name": "gang"}, {"name": "conformance"}]},
        {"plugins": [{"name": "proportion", "arguments": {"lendIdle": True}}]},
    ]
    conf = parse_conf({"actions": "enqueue, allocate, backfill, reclaim", "tiers": tiers})
    gang = make_job("a-gang", "a", [make_task(f"a-gang-{i}", gpu=8) for i in range(2)], 2)
    small = make_job("b-small", "b", [make_task("b-small-0", gpu=2)], 4)
    first = run_cycle(Snapshot(tuple(nodes), tuple(queues), (a_run, b_run, gang, small)), conf)
    assert [(b.task, b.node) for b in first.binds] == [("b-small-0", "n1")]
    assert first.work_conservation.lent == ("b-small",)

    lent = make_job("b-small", "b", [
        make_task("b-small-0", gpu=2, status="Running", node="n1")], 4)  # fmt: skip
    a_new = make_job("a-new", "a", [make_task("a-new-0", gpu=2)], 5)
    second = run_cycle(Snapshot(tuple(nodes), tuple(queues), (a_run, b_run, lent, a_new)), conf)
    assert [e.task for e in second.evictions] == ["b-small-0"]
    # b is back at its share once the lent pod goes
    assert _gpu(second, "b", "allocated") == _gpu(second, "b", "deserved") == 6


@pytest.mark.parametrize("tree", [False, True], ids=["flat", "tree"])
@pytest.mark.parametrize("exclude", [True, False], ids=["excluded", "upstream"])
def test_capacity_reports_demand_without_jobs_that_can_never_run(tree, exclude):
    # b200 asks for a GPU model no node has: can never run. Capacity's shares are stated, so
    # the request only changes what the queue (and its parent) report.
    parent = "root" if tree else None
    queues = [
        make_queue("a", deserved={"gpu": 16}, parent=parent),
        make_queue("b", deserved={"gpu": 16}, parent=parent),
        *([make_queue("root")] if tree else []),
    ]
    b200 = (("gpu-model", "B200"),)
    jobs = [
        make_job("b200", "a", [
            make_task(f"b200-{i}", gpu=8, node_selector=b200) for i in range(2)], 1),
        make_job("small", "a", [make_task("small-0", gpu=2)], 2),
    ]  # fmt: skip
    plugin = {"name": "capacity", "arguments": {"excludeNeverRunnable": exclude}}
    if tree:
        plugin["enableHierarchy"] = True
    tiers = [
        {"plugins": [{"name": "priority"}, {"name": "gang"}, {"name": "conformance"}]},
        {"plugins": [{"name": "predicates"}, plugin]},
    ]
    conf = parse_conf({"actions": "enqueue, allocate, backfill, reclaim", "tiers": tiers})
    nodes = [make_node(f"n{i}") for i in range(1, 5)]
    result = run_cycle(Snapshot(tuple(nodes), tuple(queues), tuple(jobs)), conf)
    assert result.pending_kinds["b200"] == "never"
    assert [b.job for b in result.binds] == ["small"]
    expected = 2 if exclude else 18
    assert _gpu(result, "a", "request") == expected
    if tree:
        assert _gpu(result, "root", "request") == expected


def test_a_capacity_queue_at_its_capability_is_not_said_to_be_held_by_a_share():
    # Capacity's allocatable is the real capability, a hard limit, never a share alone.
    queues = [make_queue("a", deserved={"gpu": 4}, capability={"gpu": 4}), make_queue("b")]
    jobs = [
        make_job("a-run", "a", [make_task("a-run-0", gpu=4, status="Running", node="n1")], 0),
        make_job("a-more", "a", [make_task("a-more-0", gpu=2)], 1),
    ]
    tiers = [{"plugins": [{"name": "gang"}, {"name": "capacity"}]}]
    conf = parse_conf({"actions": "enqueue, allocate, backfill", "tiers": tiers})
    result = run_cycle(Snapshot((make_node("n1"),), tuple(queues), tuple(jobs)), conf)
    assert result.binds == ()
    assert result.pending_reasons["a-more"].endswith(
        "GPUs idle: 4, enough for it now, but beyond what queue a may hold (its capability, "
        "borrowing limit, or what other queues' guarantees keep for them)"
    )
    assert "deserved share" not in result.pending_reasons["a-more"]


def test_a_share_of_a_card_counts_as_its_fraction():
    # One card: a runs a quarter of it, and its two more quarter-card jobs deserve 0.5 in all
    # with b's whole-card jobs in demand: one binds, the other waits with 0.5 of the card idle.
    quarter = {"cpu": 1000, "memory": GI, "gpu": 0.25}
    whole = {"cpu": 1000, "memory": GI, "gpu": 1}
    data = {
        "config": {
            "actions": "enqueue, allocate, backfill",
            "tiers": [{"plugins": [{"name": "gang"}, {"name": "proportion"}]}],
        },
        "nodes": [{"name": "n1", "allocatable": {"cpu": 8000, "memory": 64 * GI, "gpu": 1}}],
        "queues": [{"name": "a"}, {"name": "b"}],
        "jobs": [
            {"name": "a-run", "queue": "a", "created": 0, "tasks": [
                {"name": "a-run-0", "requests": quarter, "status": "Running", "node": "n1"}]},
            {"name": "a-1", "queue": "a", "created": 1, "tasks": [
                {"name": "a-1-0", "requests": quarter}]},
            {"name": "a-2", "queue": "a", "created": 2, "tasks": [
                {"name": "a-2-0", "requests": quarter}]},
            {"name": "b-1", "queue": "b", "created": 3, "tasks": [
                {"name": "b-1-0", "requests": whole}]},
            {"name": "b-2", "queue": "b", "created": 4, "tasks": [
                {"name": "b-2-0", "requests": whole}]},
        ],
    }  # fmt: skip
    result = run_cycle(*load_scenario(data))
    assert [b.job for b in result.binds] == ["a-1"]
    reason = result.pending_reasons["a-2"]
    assert reason.startswith("job needs 0.25 GPUs; queue a deserves 0.5 GPUs")
    assert reason.endswith(
        "GPUs idle: 0.5, enough for it now; held back only by the deserved share of queue a "
        "(this conf lends no idle capacity: proportion's lendIdle is off)"
    )


@pytest.mark.parametrize(
    ("plugin", "key"),
    [
        ("proportion", "lendIdle"),
        ("proportion", "excludeNeverRunnable"),
        ("capacity", "excludeNeverRunnable"),
    ],
)
def test_a_switch_that_is_not_true_or_false_is_refused_by_name(plugin, key):
    tiers = [{"plugins": [{"name": plugin, "arguments": {key: "yes"}}]}]
    with pytest.raises(ConfigError, match=f"arguments.{key}: expected true or false"):
        parse_conf({"actions": "allocate", "tiers": tiers})
