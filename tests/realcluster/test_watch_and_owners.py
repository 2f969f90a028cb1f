"""The real server's history and garbage collector: a watch from a resourceVersion the API
server no longer keeps (etcd compacted, the API server restarted) is 410 and the cache lists
again; deleting a job's owner ConfigMap lets the garbage collector take its pods and plugin
objects, and the portal requeues the job and starts it again under a new owner."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from kubernetes import client

from portal.cluster.models import Placement
from portal.jobs.models import Job
from portal.tenants.models import Membership
from scheduler.adapters.cluster.testing.control_plane import ControlPlane, etcd_compact
from scheduler.adapters.cluster.watch_cache import Reflector
from scheduler.adapters.observe import cluster_observe
from tests.factories import MembershipFactory, UserFactory
from tests.realcluster.conftest import KUBECONFIG, NAMESPACE
from tests.scheduler.conftest import submit_job, wait_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def user(nlp):
    researcher = UserFactory(username="alice")
    MembershipFactory(user=researcher, tenant=nlp, role=Membership.Role.RESEARCHER)
    return researcher


def test_a_watch_from_a_compacted_version_is_410_and_the_reflector_lists_again(admin, portal_api):
    plane = ControlPlane.of(Path(KUBECONFIG).parent)
    listed: list[list[dict]] = []
    reflector = Reflector(
        "pods",
        portal_api.list_pod_for_all_namespaces,
        replace=listed.append,
        apply=lambda kind, raw: None,
        watch_seconds=2,
    )
    reflector.list_once()
    old_version = reflector.resource_version
    body = {
        "metadata": {"name": "after-the-list"},
        "spec": {
            "automountServiceAccountToken": False,
            "containers": [{"name": "c", "image": "x"}],
        },
    }
    admin.create_namespaced_pod("default", body)
    try:
        etcd_compact(json.loads(plane.info_file.read_text())["etcd"])
        plane.restart_apiserver()

        reflector.watch_once()  # from old_version: 410 "too old resource version"

        assert reflector.resource_version is None
        reflector.list_once()
        assert reflector.resource_version != old_version
        assert "after-the-list" in {pod["metadata"]["name"] for pod in listed[-1]}
    finally:
        admin.delete_namespaced_pod("after-the-list", "default", grace_period_seconds=0)


def test_deleting_the_owner_lets_the_garbage_collector_take_the_job_which_is_requeued(
    kubelet, admin, backend, real_cycle, user, nlp_queue
):
    kubelet.register_node("owner-a", gpus=8)
    job = submit_job(user, nlp_queue, "ddp", gpus=4, replicas=2, plugins={"svc": []})
    real_cycle()
    owner = admin.read_namespaced_config_map(f"{job.object_name}", NAMESPACE)
    service = admin.read_namespaced_service(f"{job.object_name}", NAMESPACE)
    assert service.metadata.owner_references[0].uid == owner.metadata.uid
    names = sorted(Placement.objects.filter(job=job).values_list("pod_name", flat=True))

    # kubectl delete configmap gp-<id>: the garbage collector deletes its dependents.
    admin.delete_namespaced_config_map(f"{job.object_name}", NAMESPACE)
    wait_for(
        lambda: (
            not any(
                pod.metadata.name in names and pod.metadata.uid
                for pod in admin.list_namespaced_pod(NAMESPACE).items
                if pod.metadata.owner_references
                and pod.metadata.owner_references[0].uid == owner.metadata.uid
            )
            and not admin.list_namespaced_service(
                NAMESPACE, field_selector=f"metadata.name={job.object_name}"
            ).items
        ),
        "the garbage collector to delete the owner's pods and Service",
        timeout=60,
    )

    # The cycle's observe step on its own, so the requeue is seen before the job is placed
    # again in the same cycle.
    cluster_observe(
        pods=backend.list_pods(), now=datetime.now(tz=UTC), owners_gone=backend.owners_deleted()
    )
    job.refresh_from_db()
    assert job.status == Job.Status.PREEMPTED
    assert job.pending_reason == (
        f"owner object ConfigMap {NAMESPACE}/{job.object_name} was deleted, and the job's pods "
        "with it; the job was requeued"
    )

    def runs_again_under_a_new_owner() -> bool:
        real_cycle()
        job.refresh_from_db()
        try:
            fresh = admin.read_namespaced_config_map(f"{job.object_name}", NAMESPACE)
        except client.ApiException:
            return False
        return job.status == Job.Status.RUNNING and fresh.metadata.uid != owner.metadata.uid

    wait_for(runs_again_under_a_new_owner, "the job to run again under a new owner", timeout=60)
