"""backend_from_settings: a fresh Kubernetes backend per cycle, one watch cache per process."""

from __future__ import annotations

import pytest

from scheduler.adapters.backends import backend_from_settings
from scheduler.adapters.cluster.testing.emulator import write_kubeconfig
from scheduler.adapters.cluster.watch_cache import forget_shared_caches


@pytest.fixture
def kubernetes_settings(settings, cluster, tmp_path, monkeypatch):
    kubeconfig = tmp_path / "kubeconfig"
    write_kubeconfig(kubeconfig, cluster.url)
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    settings.CLUSTER_BACKEND = "kubernetes"
    yield settings
    forget_shared_caches()


def test_each_cycle_gets_a_fresh_backend_sharing_one_watch_cache(kubernetes_settings, cluster):
    cluster.add_node("gpu-a", {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "8"})

    first, second = backend_from_settings(), backend_from_settings()

    assert first is not second
    assert first.cache is second.cache
    assert [node.name for node in second.list_nodes()] == ["gpu-a"]


def test_the_cache_can_be_switched_off(kubernetes_settings):
    kubernetes_settings.KUBERNETES_WATCH_CACHE = False

    assert backend_from_settings().cache is None
