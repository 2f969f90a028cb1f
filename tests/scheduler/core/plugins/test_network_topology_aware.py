"""network-topology-aware keeps its per-domain free sums while no node changed; that cache must
decide exactly like summing the cluster on every question."""

import pytest

from scheduler.core.config import default_conf
from scheduler.core.cycle import run_cycle
from scheduler.core.plugins import network_topology_aware
from scheduler.core.synthetic import synthetic_snapshot


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("running", [0.0, 0.5, 0.8])
def test_cached_domain_sums_decide_like_a_full_sum(seed, running, monkeypatch):
    snapshot = synthetic_snapshot(64, 300, 4, seed, running)  # zones of 32 nodes
    conf = default_conf()
    cached = run_cycle(snapshot, conf)

    original = network_topology_aware.NetworkTopologyPlugin._free_per_domain

    def uncached(self):
        self._free_cache = None
        return original(self)

    monkeypatch.setattr(network_topology_aware.NetworkTopologyPlugin, "_free_per_domain", uncached)
    assert run_cycle(snapshot, conf) == cached
