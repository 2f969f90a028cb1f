"""The smoke check's watch step against the emulated API server: the portal's objects watched in
the namespace, or a warning naming the kinds whose watch the Roles refuse (the portal then lists
them each cycle, so the check still passes)."""

from __future__ import annotations

import kmock
from kubernetes import client

from scheduler.adapters.cluster.kubernetes import KubernetesBackend
from scheduler.adapters.cluster.smoke import watches_check


def _backend(cluster) -> KubernetesBackend:
    return KubernetesBackend.from_configuration(
        client.Configuration(host=cluster.url), "gpu-vision", ("nvidia.com/gpu",)
    )


def test_watching_the_portals_objects_is_said_when_allowed(cluster):
    said: list[str] = []
    watches_check(_backend(cluster), said.append)
    assert said == ["watched: the portal's ConfigMaps, Services, NetworkPolicies in gpu-vision"]


def test_a_refused_watch_is_a_warning_naming_the_kinds(cluster):
    refused = kmock.KubernetesError(status=403, reason="Forbidden", message="watch forbidden")
    for resource in ("v1/configmaps", "v1/services"):
        cluster.fail_next(kmock.action.WATCH, refused, times=5, resource=kmock.resource(resource))
    said: list[str] = []
    watches_check(_backend(cluster), said.append)
    (line,) = said
    assert line.startswith(
        "warning: watching ConfigMaps, Services in gpu-vision is refused (403), so the cycle "
        "lists them every time instead"
    )
