"""A base for the tests' fake clusters: every call of ClusterBackend answered as a cluster with
no nodes, no namespaces missing and no objects but pods would, so a fake writes only the calls
its test is about (and gets the Protocol's pod-by-pod batch calls)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from scheduler.adapters.cluster.base import (
    ClusterBackend,
    ObservedNode,
    ObservedPod,
    PodEvent,
    PodLog,
)


class EmptyCluster(ClusterBackend):
    lists_cluster_nodes = True
    makes_job_objects = False
    cache = None

    def list_nodes(self) -> list[ObservedNode]:
        return []

    def list_pods(self) -> list[ObservedPod]:
        return []

    def owners_deleted(self) -> dict[str, str]:
        return {}

    def namespaces_missing(self, names: Iterable[str]) -> set[str]:
        return set()

    def namespaces_refusing(self) -> set[str]:
        return set()

    def namespace_labels(self, names: Iterable[str]) -> dict[str, dict[str, str]]:
        return {}

    def pod_log(self, name: str, namespace: str, tail: int) -> PodLog:
        return PodLog(pod=name, lines=[])

    def record_events(self, events: Sequence[PodEvent]) -> None:
        pass

    def annotate_pod(self, name: str, namespace: str, annotations: Mapping[str, str]) -> None:
        pass

    def sweep_job_objects(
        self, keep: set[tuple[str, str, str]], wanted: Sequence[tuple[str, dict[str, Any]]] = ()
    ) -> list[str]:
        return []
