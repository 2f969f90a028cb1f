"""The per-job owner object: one ConfigMap per job in the job's namespace, named as the job's
objects are (`gp-<instance tag>-<job id>`, or `gp-<job id>` for a job from before names carried
the instance: jobspec.labels.job_object_name), created before the job's first pod. Every pod of
the job, and the job's plugin objects (Service, NetworkPolicy, host-name ConfigMap), carries an
ownerReference to it, so `kubectl delete configmap <its name>` makes the cluster's garbage
collector delete them all: an operator's one handle on a job, without the portal.

A dedicated ConfigMap rather than the svc plugin's objects: every job has one under one name
(jobs without the svc plugin have no Service), and it holds no data a pod reads, so deleting it
never leaves a pod running with a broken mount. Same role as Volcano's PodGroup, which its job
controller makes each pod's controller owner (pkg/controllers/job), but a core/v1 kind, so the
portal needs no CRD. Pure: no I/O, the backend creates, lists and deletes these.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobspec.labels import (
    INSTANCE,
    JOB_ID,
    MANAGED,
    OWNER,
    job_object_name,
    label_value,
    owned_selector,
)

KIND = "ConfigMap"
OWNER_DELETED = (
    "owner object ConfigMap {namespace}/{name} was deleted, and the job's pods with it; "
    "the job was requeued"
)


def owner_name(job_id: str | int, prefix: str | None) -> str:
    """The job's owner's name: the job's object name."""
    return job_object_name(job_id, prefix)


def owner_job_id(name: str) -> str:
    """The job id an owner's name ends with (both `gp-<id>` and `gp-<tag>-<id>`)."""
    return name.rpartition("-")[2]


def owner_selector(instance: str) -> str:
    """The label selector of `instance`'s owner objects."""
    return f"{owned_selector(instance)},{OWNER}=true"


def owner_manifest(*, job_id: str, name: str, namespace: str, instance: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": KIND,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {
                MANAGED: "true",
                INSTANCE: label_value(instance),
                JOB_ID: label_value(job_id),
                OWNER: "true",
            },
        },
    }


def owner_reference(name: str, uid: str) -> dict[str, Any]:
    """Not a controller reference and without blockOwnerDeletion: the portal, not the owner,
    decides the pods' fate, and blocking would need update rights on the owner's finalizers."""
    return {"apiVersion": "v1", "kind": KIND, "name": name, "uid": uid}


def with_owner(obj: Mapping[str, Any], reference: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a job object (wire shape) whose metadata names `reference` as its owner."""
    metadata = {**obj["metadata"], "ownerReferences": [dict(reference)]}
    return {**obj, "metadata": metadata}
