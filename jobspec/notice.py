"""The preemption notice as a pod sees it: an annotation with the instant its pods are deleted
at, and a file holding that annotation. Pure.

Every pod the portal makes mounts a downward API volume of the annotation at
`/etc/podinfo/preemption-deadline` (PREEMPTION_DEADLINE):

- empty or absent: no preemption is pending;
- an instant (RFC 3339, UTC, e.g. `2026-12-01T12:05:00Z`): the pod is deleted then (the
  kubelet sends SIGTERM at that instant); checkpoint and exit before it.

The kubelet rewrites the file when the annotation appears (within its sync period, about a
minute at most), so a training loop polls the file, say once per step. The scheduler's shell
(scheduler.adapters.notice) writes the annotation; docs/design/preemption-notice.md tells the
whole protocol.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

DEADLINE_ANNOTATION = "portal.gpu/preemption-deadline"
PODINFO_VOLUME = "portal-podinfo"
PODINFO_DIR = "/etc/podinfo"
DEADLINE_FILE = "preemption-deadline"
DEADLINE_PATH = f"{PODINFO_DIR}/{DEADLINE_FILE}"


def deadline_text(deadline: datetime) -> str:
    """The annotation's value: RFC 3339 in UTC, whole seconds."""
    return deadline.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def with_deadline_volume(body: dict[str, Any]) -> dict[str, Any]:
    """`body` (a pod spec) with the downward API volume of the deadline annotation, mounted
    read-only in each container. A template that already has a volume of that name, or a
    container that mounts something at /etc/podinfo, keeps its own (no file there)."""
    volumes = body.get("volumes") or []
    if any(volume.get("name") == PODINFO_VOLUME for volume in volumes):
        return body
    field = f"metadata.annotations['{DEADLINE_ANNOTATION}']"
    item = {"path": DEADLINE_FILE, "fieldRef": {"fieldPath": field}}
    body["volumes"] = [*volumes, {"name": PODINFO_VOLUME, "downwardAPI": {"items": [item]}}]
    mount = {"name": PODINFO_VOLUME, "mountPath": PODINFO_DIR, "readOnly": True}
    for container in body.get("containers", []):
        mounts = container.get("volumeMounts") or []
        if all(m.get("mountPath", "").rstrip("/") != PODINFO_DIR for m in mounts):
            container["volumeMounts"] = [*mounts, dict(mount)]
    return body
