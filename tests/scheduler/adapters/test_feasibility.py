"""The node checks the kubelet enforces apply whatever the conf says: the cycle adds the
predicates plugin to a conf without one (the core alone keeps Volcano's semantics)."""

from datetime import UTC, datetime

import pytest

from portal.cluster.models import Placement
from portal.jobs.models import Job
from scheduler.adapters.cluster.simulated import SimulatedBackend
from scheduler.adapters.feasibility import conf_with_hard_feasibility
from scheduler.adapters.orchestrator import scheduling_cycle_run
from scheduler.adapters.snapshot import snapshot_build
from scheduler.core.config import default_conf, parse_conf
from scheduler.core.cycle import run_cycle
from tests.factories import JobFactory, JobTaskFactory, NodeFactory

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _names(conf):
    return [[option.name for option in tier] for tier in conf.tiers]


def test_the_seed_conf_gets_predicates_in_its_last_tier():
    seed = default_conf()
    assert seed.plugin("predicates") is None
    conf = conf_with_hard_feasibility(seed)
    assert _names(conf) == [*_names(seed)[:-1], [*_names(seed)[-1], "predicates"]]
    assert seed.plugin("predicates") is None  # the parsed conf itself is left as it was
    assert conf.actions == seed.actions


def test_a_conf_with_predicates_is_run_as_written():
    conf = parse_conf({"actions": "allocate", "tiers": [{"plugins": [{"name": "predicates"}]}]})
    assert conf_with_hard_feasibility(conf) is conf


def test_a_disabled_predicate_is_enabled_and_its_other_flags_kept():
    conf = parse_conf(
        {
            "actions": "allocate",
            "tiers": [
                {"plugins": [{"name": "gang"}]},
                {
                    "plugins": [
                        {"name": "predicates", "enablePredicate": False, "enableNodeOrder": False}
                    ]
                },
            ],
        }
    )
    option = conf_with_hard_feasibility(conf).plugin("predicates")
    assert option.enabled("enablePredicate")
    assert option.flags == {"enableNodeOrder": False}
    assert _names(conf_with_hard_feasibility(conf)) == [["gang"], ["predicates"]]


def test_a_conf_without_tiers_gets_one():
    conf = parse_conf({"actions": "allocate"})
    assert _names(conf_with_hard_feasibility(conf)) == [["predicates"]]


@pytest.mark.django_db
def test_a_selector_no_node_has_stays_pending_with_a_reason_under_the_seed_conf(nlp_queue):
    NodeFactory(name="gpu-1", gpu_model="A100")
    lost = JobFactory(queue=nlp_queue, name="lost")
    JobTaskFactory(job=lost, name="worker", gpus=1, node_selector={"gpu-model": "H100"})
    fine = JobFactory(queue=nlp_queue, name="fine")
    JobTaskFactory(job=fine, name="worker", gpus=1)

    # Volcano's semantics, the core alone: the seed conf has no predicates, so it would bind.
    bundle = snapshot_build(now=NOW)
    raw = run_cycle(bundle.snapshot, default_conf())
    assert {bind.job for bind in raw.binds} == {str(lost.pk), str(fine.pk)}

    run = scheduling_cycle_run(backend=SimulatedBackend(default_run_seconds=60), now=lambda: NOW)

    assert run.error == ""
    lost.refresh_from_db()
    assert lost.status == Job.Status.PENDING
    assert lost.pending_reason == (
        "can never run as submitted: no node matches its node selector gpu-model=H100; "
        "change or drop the selector"
    )
    assert lost.pending_kind == Job.PendingKind.NEVER
    assert not Placement.objects.filter(job=lost).exists()
    assert Placement.objects.filter(job=fine).count() == 1
