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


def _tree(jobs, capability=24, lend=True):
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
                    "arguments": {"lendIdle": lend},
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
