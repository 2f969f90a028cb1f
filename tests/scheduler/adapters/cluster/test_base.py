"""ClusterBackend lists every call of a cluster backend, and both backends implement each one
with the Protocol's parameters: the cycle and the portal call them without asking first."""

import inspect

import pytest
from kubernetes import client

from scheduler.adapters.cluster.base import ClusterBackend
from scheduler.adapters.cluster.kubernetes import KubernetesBackend
from scheduler.adapters.cluster.simulated import SimulatedBackend

BACKENDS = [
    pytest.param(lambda: SimulatedBackend(default_run_seconds=60), id="simulated"),
    pytest.param(
        lambda: KubernetesBackend(client.CoreV1Api(), "gpu-jobs", ["nvidia.com/gpu"]),
        id="kubernetes",
    ),
]


def _protocol_methods() -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in vars(ClusterBackend).items()
        if inspect.isfunction(member) and not name.startswith("_")
    }


def _parameters(signature: inspect.Signature) -> list[tuple[str, object, object]]:
    """What a caller relies on: each parameter's name, kind and default."""
    return [(p.name, p.kind, p.default) for p in signature.parameters.values()]


@pytest.mark.parametrize("make", BACKENDS)
def test_a_backend_implements_every_call_of_the_protocol(make):
    backend = make()
    for name, expected in _protocol_methods().items():
        implemented = getattr(type(backend), name, None)
        assert callable(implemented), f"{type(backend).__name__} lacks {name}"
        assert _parameters(inspect.signature(implemented)) == _parameters(expected), name
    for name in ClusterBackend.__annotations__:
        assert hasattr(backend, name), f"{type(backend).__name__} lacks {name}"
    assert isinstance(backend.lists_cluster_nodes, bool)
    assert isinstance(backend.makes_job_objects, bool)


def test_every_call_both_backends_have_is_in_the_protocol():
    def public(cls: type) -> set[str]:
        return {
            name
            for name, member in inspect.getmembers(cls)
            if not name.startswith("_") and inspect.isfunction(member)
        }

    shared = public(SimulatedBackend) & public(KubernetesBackend)
    assert shared - set(_protocol_methods()) == set()
    assert set(_protocol_methods()) <= shared


def test_the_backends_say_where_their_nodes_come_from_and_what_they_make():
    assert SimulatedBackend.lists_cluster_nodes is False  # the Node rows are its inventory
    assert SimulatedBackend.makes_job_objects is False  # pods only
    assert KubernetesBackend.lists_cluster_nodes is True
    assert KubernetesBackend.makes_job_objects is True
