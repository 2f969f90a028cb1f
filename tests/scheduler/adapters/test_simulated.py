"""The simulated backend's batch calls do what one create_pod/delete_pod per pod would, in a
fixed number of queries; reconcile.apply uses them and still reports per pod."""

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from django.db import IntegrityError, connection
from django.test.utils import CaptureQueriesContext

from jobspec import labels
from jobspec.notice import DEADLINE_ANNOTATION
from jobspec.pods import RUN_SECONDS, DesiredPod
from portal.cluster.models import SimulatedPod
from scheduler.adapters.cluster import simulated
from scheduler.adapters.cluster.base import ClusterBackend, ClusterError
from scheduler.adapters.cluster.simulated import SimulatedBackend
from scheduler.adapters.reconcile import ReconcilePlan, apply, plan

pytestmark = pytest.mark.django_db
NAMESPACE = "gpu-jobs"
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def desired(job_id: int, replica: int = 0, **changes) -> DesiredPod:
    pod = DesiredPod(
        name=labels.pod_name(job_id, "worker", replica),
        namespace=NAMESPACE,
        node_name="gpu-a",
        image="train:1",
        command=["train"],
        env={},
        requests={"cpu": 1000, "memory": 2**30, "nvidia.com/gpu": 1},
        labels=labels.replica_labels(
            job_id=job_id, task="worker", replica=replica, queue="q", tenant="t"
        ),
        annotations={labels.JOB_NAME: f"job-{job_id}"},
    )
    return replace(pod, **changes)


@pytest.fixture
def backend():
    return SimulatedBackend(default_run_seconds=600, now=lambda: NOW)


def stored() -> list[tuple]:
    return list(
        SimulatedPod.objects.order_by("name").values_list(
            "name",
            "namespace",
            "node_name",
            "labels",
            "annotations",
            "requests",
            "phase",
            "run_seconds",
            "delete_after",
        )
    )


def test_create_pods_stores_what_create_pod_stores(backend):
    pods = [desired(1), desired(2, annotations={RUN_SECONDS: "60"}), desired(3, node_name="gpu-b")]
    for pod in pods:
        backend.create_pod(pod)
    one_by_one = stored()
    SimulatedPod.objects.all().delete()

    assert backend.create_pods(pods) == [None, None, None]
    assert stored() == one_by_one
    assert [row[7] for row in one_by_one] == [600, 60, 600]


def test_create_pods_accepts_existing_replicas_and_refuses_taken_names(backend):
    backend.create_pod(desired(1))
    taken = desired(2, name=desired(1).name)  # same name, another replica

    outcomes = backend.create_pods([desired(1), taken, desired(3), desired(3)])

    assert [outcomes[0], outcomes[2], outcomes[3]] == [None, None, None]
    assert isinstance(outcomes[1], ClusterError)
    assert "another replica" in str(outcomes[1])
    assert [row[0] for row in stored()] == [desired(1).name, desired(3).name]


def test_create_pods_queries_do_not_grow_with_the_number_of_pods(backend):
    with CaptureQueriesContext(connection) as few:
        backend.create_pods([desired(i) for i in range(2)])
    with CaptureQueriesContext(connection) as many:
        backend.create_pods([desired(i) for i in range(100, 140)])

    assert len(many) == len(few)
    assert SimulatedPod.objects.count() == 42


def test_create_pods_falls_back_to_one_by_one_when_the_batch_insert_conflicts(backend, monkeypatch):
    real_insert = simulated.rows_insert
    calls = []

    def racing_insert(model, objs):
        calls.append(len(objs))
        if len(calls) == 1:  # another worker created one of the names since the read
            raise IntegrityError("duplicate key value violates unique constraint")
        return real_insert(model, objs)

    monkeypatch.setattr(simulated, "rows_insert", racing_insert)

    outcomes = backend.create_pods([desired(1), desired(2)])

    assert outcomes == [None, None]
    assert calls == [2]  # the fallback went through create_pod
    assert [row[0] for row in stored()] == [desired(1).name, desired(2).name]


def test_delete_pods_does_what_delete_pod_does(backend):
    backend.create_pods([desired(i) for i in range(1, 5)])
    SimulatedPod.objects.filter(name=desired(2).name).update(phase="Succeeded")
    earlier = NOW - timedelta(seconds=5)
    SimulatedPod.objects.filter(name=desired(3).name).update(delete_after=earlier)

    outcomes = backend.delete_pods(
        [
            (desired(1).name, NAMESPACE),
            (desired(2).name, NAMESPACE),
            (desired(3).name, NAMESPACE),
            ("never-existed", NAMESPACE),
            (desired(4).name, "another-namespace"),
        ],
        grace_seconds=30,
    )

    assert outcomes == [None] * 5
    after = {row[0]: row[8] for row in stored()}
    assert after == {
        desired(1).name: NOW + timedelta(seconds=30),  # running: graceful
        desired(3).name: earlier,  # already being deleted: untouched
        desired(4).name: None,  # other namespace: not this pod
    }  # finished pod 2 is gone at once


def test_delete_pods_without_grace_removes_at_once(backend):
    backend.create_pods([desired(1), desired(2)])

    backend.delete_pods([(desired(1).name, NAMESPACE)], grace_seconds=0)

    assert [row[0] for row in stored()] == [desired(2).name]


def test_apply_creates_and_deletes_in_batches_and_converges(backend):
    backend.create_pods([desired(99)])
    want = [desired(i) for i in range(1, 31)]

    reconcile_plan = plan(want, backend.list_pods())

    with CaptureQueriesContext(connection) as queries:
        report = apply(reconcile_plan, backend, grace_seconds=0)

    assert report.ok
    assert report.deleted == [f"{NAMESPACE}/{desired(99).name}"]
    assert report.created == sorted(f"{NAMESPACE}/{pod.name}" for pod in want)
    assert len(queries) <= 10  # a few per batch call, not one or two per pod
    assert plan(want, backend.list_pods()).empty


class BatchRefusing:
    """A backend whose batch call breaks as a whole."""

    def list_pods(self):
        return []

    def create_pod(self, pod):
        raise AssertionError("apply must use the batch call")

    def create_pods(self, pods):
        raise ClusterError("API server gone")


def test_apply_reports_every_pod_of_a_batch_that_breaks():
    report = apply(ReconcilePlan(create=[desired(1), desired(2)]), BatchRefusing())

    assert report.created == []
    assert report.errors == [
        f"create {NAMESPACE}/{desired(1).name}: API server gone",
        f"create {NAMESPACE}/{desired(2).name}: API server gone",
    ]


class OneByOne(ClusterBackend):
    """Inherits the default batch calls, which go through create_pod/delete_pod."""

    def __init__(self):
        self.calls = []

    def create_pod(self, pod):
        self.calls.append(("create", pod.name))
        if pod.name == desired(2).name:
            raise ClusterError("quota exceeded")

    def delete_pod(self, name, namespace, grace_seconds):
        self.calls.append(("delete", name))


def test_the_default_batch_calls_go_pod_by_pod_and_isolate_failures():
    backend = OneByOne()

    outcomes = backend.create_pods([desired(1), desired(2), desired(3)])
    deleted = backend.delete_pods([("old", NAMESPACE)], 10)

    assert [type(o).__name__ if o else None for o in outcomes] == [None, "ClusterError", None]
    assert deleted == [None]
    assert backend.calls == [
        ("create", desired(1).name),
        ("create", desired(2).name),
        ("create", desired(3).name),
        ("delete", "old"),
    ]


def test_integrity_error_is_what_the_racing_insert_raises(backend):
    """Guards the fallback above: a duplicate name really fails the batch insert."""
    backend.create_pods([desired(1)])
    with pytest.raises(IntegrityError):
        simulated.rows_insert(SimulatedPod, [backend._new_pod(desired(1))])


def test_a_simulated_pods_log_names_env_references_in_words():
    """A value read from a ConfigMap, a Secret or the pod's fields is said as Kubernetes names
    it, not as the reference's Python text ("<from {'configMapKeyRef': ...}>")."""
    SimulatedPod.objects.create(
        name="gp-7-master-0",
        namespace=NAMESPACE,
        node_name="gpu-a",
        spec={
            "containers": [
                {
                    "name": "main",
                    "image": "train:1",
                    "env": [
                        {"name": "PLAIN", "value": "1"},
                        {
                            "name": "VC_MASTER_HOSTS",
                            "valueFrom": {"configMapKeyRef": {"name": "gp-7-svc", "key": "hosts"}},
                        },
                        {
                            "name": "TOKEN",
                            "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}},
                        },
                        {
                            "name": "POD_IP",
                            "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}},
                        },
                        {"name": "ODD", "valueFrom": {"unknownRef": {}}},
                    ],
                }
            ]
        },
    )
    lines = (
        SimulatedBackend(default_run_seconds=600, now=lambda: NOW)
        .pod_log("gp-7-master-0", NAMESPACE, tail=50)
        .lines
    )
    env = [
        line.removeprefix("[simulated]   ") for line in lines if line.startswith("[simulated]   ")
    ]
    assert env == [
        "PLAIN=1",
        "VC_MASTER_HOSTS=(from ConfigMap gp-7-svc, key hosts)",
        "TOKEN=(from Secret creds, key token)",
        "POD_IP=(from the pod's field status.podIP)",
        "ODD=(from a reference)",
    ]
    assert "{" not in "\n".join(lines)


def test_annotating_a_simulated_pod_merges_and_a_gone_pod_is_success():
    backend = SimulatedBackend(default_run_seconds=60)
    SimulatedPod.objects.create(
        name="gp-1-worker-0", namespace="gpu-jobs", annotations={"mine": "kept"}
    )

    backend.annotate_pod("gp-1-worker-0", "gpu-jobs", {DEADLINE_ANNOTATION: "x"})
    backend.annotate_pod("gone", "gpu-jobs", {DEADLINE_ANNOTATION: "x"})

    pod = SimulatedPod.objects.get()
    assert pod.annotations == {"mine": "kept", DEADLINE_ANNOTATION: "x"}
