"""Who pauses the cyclic garbage collector: the processes that run big cycles, around the core."""

import gc

import pytest

from scheduler.adapters.cluster.simulated import SimulatedBackend
from scheduler.adapters.gc_pause import gc_paused, run_cycle_paused
from scheduler.adapters.orchestrator import scheduling_cycle_run
from scheduler.core import cycle as core_cycle
from scheduler.core.config import default_conf
from scheduler.core.synthetic import synthetic_snapshot
from tests.scheduler.conftest import submit_job


@pytest.fixture
def collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_the_pause_restores_the_collector_as_it_found_it(collector_on):
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    with gc_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()  # left off: the caller had turned it off


def test_the_pause_ends_when_the_cycle_raises(collector_on):
    with pytest.raises(RuntimeError), gc_paused():
        raise RuntimeError("a bug in a plugin")
    assert gc.isenabled()


def test_run_cycle_paused_runs_the_core_with_the_collector_off(collector_on, monkeypatch):
    seen = []
    real = core_cycle.open_session

    def spy(snapshot, conf):
        seen.append(gc.isenabled())
        return real(snapshot, conf)

    monkeypatch.setattr(core_cycle, "open_session", spy)
    result = run_cycle_paused(synthetic_snapshot(4, 10, 2, seed=1), default_conf())
    assert seen == [False]
    assert gc.isenabled()
    assert result == core_cycle.run_cycle(synthetic_snapshot(4, 10, 2, seed=1), default_conf())


@pytest.mark.django_db
def test_the_cycle_worker_runs_its_core_with_the_collector_off(
    collector_on, monkeypatch, nlp, nlp_queue
):
    from portal.tenants.models import Membership
    from tests.factories import MembershipFactory, NodeFactory, UserFactory

    seen = []
    real = core_cycle.open_session

    def spy(snapshot, conf):
        seen.append(gc.isenabled())
        return real(snapshot, conf)

    monkeypatch.setattr(core_cycle, "open_session", spy)
    user = UserFactory()
    MembershipFactory(user=user, tenant=nlp, role=Membership.Role.RESEARCHER)
    NodeFactory(name="gpu-worker-1")
    submit_job(user, nlp_queue, "train", replicas=1, gpus=1)
    run = scheduling_cycle_run(backend=SimulatedBackend(default_run_seconds=600))
    assert run.error == ""
    assert run.binds == 1
    assert seen == [False]
    assert gc.isenabled()
