"""The emulated Kubernetes API server (scheduler/adapters/cluster/testing) as fixtures: the real
`kubernetes` client code path (serialisation, URLs, query parameters, error mapping, timeouts)
runs unchanged against it over HTTP."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest
from kubernetes import client

from portal.scheduling.models import CycleRun
from scheduler.adapters.cluster.kubernetes import KubernetesBackend, RetryPolicy
from scheduler.adapters.cluster.testing.emulator import NODES, PODS, EmulatedCluster

NAMESPACE = "gpu-jobs"
GPU_RESOURCE_NAMES = ("nvidia.com/gpu", "mars-tech.com/gpu")
__all__ = ["GPU_RESOURCE_NAMES", "NAMESPACE", "NODES", "PODS", "EmulatedCluster"]


@pytest.fixture
def cluster() -> Iterator[EmulatedCluster]:
    emulated = EmulatedCluster()
    try:
        yield emulated
    finally:
        emulated.close()


@pytest.fixture
def sleeps() -> list[float]:
    """Backoff delays the backend asked for; recording instead of sleeping keeps tests fast."""
    return []


@pytest.fixture
def backend(cluster: EmulatedCluster, sleeps: list[float]) -> KubernetesBackend:
    configuration = client.Configuration(host=cluster.url)
    return KubernetesBackend.from_configuration(
        configuration,
        NAMESPACE,
        GPU_RESOURCE_NAMES,
        RetryPolicy(attempts=4, base_delay=0.1, max_delay=1.0, sleep=sleeps.append),
        # A read timeout short enough for the timeout tests (the emulator stalls 2 s), long
        # enough that an ordinary answer on a loaded machine is not taken for a timeout.
        request_timeout=(2.0, 1.0),
    )


class CycleClock:
    """A clock for whole cycles: five seconds pass on every reading."""

    def __init__(self) -> None:
        self.now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=5)
        return self.now


@pytest.fixture
def kube_cycle(backend: KubernetesBackend) -> Callable[..., CycleRun]:
    """One whole scheduling cycle against the emulated cluster; fails the test on a cycle
    error unless `errors=True`."""
    from scheduler.adapters.cycle import scheduling_cycle_run

    clock = CycleClock()

    def cycle(*, errors: bool = False) -> CycleRun:
        finished = scheduling_cycle_run(backend=backend, now=clock)
        if not errors:
            assert not finished.error, finished.error
        return finished

    return cycle
