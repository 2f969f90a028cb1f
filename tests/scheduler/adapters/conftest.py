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
    """A clock for whole cycles: stands still within a cycle, `kube_cycle` moves it on."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def cycle_clock(cluster: EmulatedCluster) -> CycleClock:
    """Starts at the emulator's own time, so deletion deadlines and cycle times compare."""
    return CycleClock(datetime.fromtimestamp(cluster.store.now, tz=UTC))


@pytest.fixture
def kube_cycle(backend: KubernetesBackend, cycle_clock: CycleClock) -> Callable[..., CycleRun]:
    """One whole scheduling cycle against the emulated cluster; fails the test on a cycle
    error unless `errors=True`."""
    from scheduler.adapters.orchestrator import scheduling_cycle_run

    clock = cycle_clock

    def cycle(*, errors: bool = False, seconds: float = 5) -> CycleRun:
        """Runs a cycle at the clock's time, then moves the clock on by `seconds`."""
        finished = scheduling_cycle_run(backend=backend, now=clock)
        clock.now += timedelta(seconds=seconds)
        if not errors:
            assert not finished.error, finished.error
        return finished

    return cycle
