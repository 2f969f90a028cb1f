"""reconcile.plan is pure (plain lists in, plan out); reconcile.apply is checked against a
recording fake and end to end against the kmock emulator through KubernetesBackend."""

from __future__ import annotations

import random
from dataclasses import replace

import kmock
import pytest

from jobspec import labels
from jobspec.pods import DesiredPod
from scheduler.adapters.cluster.base import ObservedPod, TransientClusterError
from scheduler.adapters.reconcile import ReconcilePlan, apply, plan
from tests.scheduler.adapters.cluster.fakes import EmptyCluster

NAMESPACE = "gpu-jobs"  # the namespace the conftest backend fixture manages


def desired(job_id: int, replica: int = 0, *, task: str = "worker", node: str = "gpu-a"):
    return DesiredPod(
        name=labels.pod_name(job_id, task, replica),
        namespace=NAMESPACE,
        node_name=node,
        image="train:1",
        command=["train"],
        env={},
        requests={"cpu": 1000, "memory": 2**30, "nvidia.com/gpu": 1},
        labels=labels.replica_labels(
            job_id=job_id, task=task, replica=replica, queue="q", tenant="t"
        ),
        annotations={},
    )


def observed(pod: DesiredPod, **changes) -> ObservedPod:
    """What the backend would report for `pod` once it exists."""
    base = ObservedPod(
        name=pod.name,
        namespace=pod.namespace,
        node_name=pod.node_name,
        phase="Running",
        labels=dict(pod.labels),
    )
    return replace(base, **changes)


def names(pods) -> list[str]:
    return [pod.name for pod in pods]


# -- plan ------------------------------------------------------------------------------------


def test_plan_creates_missing_pods_and_deletes_undesired_ones_sorted():
    keep, new_b, new_a, gone = desired(1), desired(3), desired(2), desired(4)

    result = plan([new_b, keep, new_a], [observed(gone), observed(keep)])

    assert result == ReconcilePlan(create=[new_a, new_b], delete=[observed(gone)], present={"1": 1})


def test_plan_is_empty_when_the_cluster_matches():
    pods = [desired(1), desired(1, 1), desired(2)]

    assert plan(pods, [observed(p) for p in pods]).empty


def test_plan_does_not_depend_on_input_order():
    want = [desired(i, r) for i in range(5) for r in range(2)]
    have = [observed(desired(i, r)) for i in range(3, 8) for r in range(2)]
    expected = plan(want, have)

    shuffled_want, shuffled_have = want[:], have[:]
    random.Random(4).shuffle(shuffled_want)
    random.Random(5).shuffle(shuffled_have)

    assert plan(shuffled_want, shuffled_have) == expected


def test_plan_leaves_pods_that_are_already_terminating():
    terminating = observed(desired(1), deletion_requested=True)

    assert plan([], [terminating]).empty


def test_plan_keeps_finished_pods_until_the_caller_has_read_them():
    succeeded = observed(desired(1), phase="Succeeded", exit_code=0)
    failed = observed(desired(2), phase="Failed", exit_code=1)
    running = observed(desired(3))

    assert plan([], [succeeded, failed, running]).delete == [running]
    assert plan([], [succeeded, failed, running], delete_finished=True).delete == [
        succeeded,
        failed,
        running,
    ]


def test_plan_never_creates_a_second_pod_for_a_replica_served_under_another_name():
    want = desired(1)
    legacy = replace(observed(want), name="legacy-name-for-job-1")

    result = plan([want], [legacy])

    # The old pod goes now; the new one is created by a later pass once the old one is gone.
    assert result == ReconcilePlan(create=[], delete=[legacy])
    assert plan([want], [replace(legacy, deletion_requested=True)]).empty
    assert plan([want], []).create == [want]


def test_plan_moves_a_pod_bound_to_the_wrong_node_in_two_passes():
    want = desired(1, node="gpu-b")
    stale = observed(desired(1, node="gpu-a"))

    assert plan([want], [stale]) == ReconcilePlan(create=[], delete=[stale])
    assert plan([want], [replace(stale, deletion_requested=True)]).empty


def test_plan_ignores_pods_it_does_not_manage():
    foreign = ObservedPod(
        name="someone-elses", namespace=NAMESPACE, node_name="gpu-a", phase="Running"
    )

    assert plan([], [foreign]).empty


def test_plan_refuses_two_desired_pods_for_one_replica():
    first = desired(1)
    second = replace(first, name="other-name")

    with pytest.raises(ValueError, match="desired as both"):
        plan([first, second], [])
    with pytest.raises(ValueError, match="desired twice"):
        plan([first, first], [])


# -- apply against a fake --------------------------------------------------------------------


class RecordingBackend(EmptyCluster):
    """Keeps pods in a dict and fails the operations listed in `failures` once each."""

    def __init__(self, failures: dict[str, Exception] | None = None) -> None:
        self.pods: dict[str, DesiredPod] = {}
        self.calls: list[tuple[str, str, int | None]] = []
        self.failures = dict(failures or {})

    def list_pods(self) -> list[ObservedPod]:
        return [observed(pod) for pod in self.pods.values()]

    def create_pod(self, pod: DesiredPod) -> None:
        self.calls.append(("create", pod.name, None))
        self._maybe_fail(f"create {pod.name}")
        self.pods[pod.name] = pod

    def delete_pod(self, name: str, namespace: str, grace_seconds: int) -> None:
        self.calls.append(("delete", name, grace_seconds))
        self._maybe_fail(f"delete {name}")
        self.pods.pop(name, None)

    def bind_pod(self, name: str, namespace: str, node_name: str) -> None:
        self.calls.append(("bind", name, None))
        self._maybe_fail(f"bind {name}")

    def _maybe_fail(self, operation: str) -> None:
        if operation in self.failures:
            raise self.failures.pop(operation)


def test_apply_deletes_before_creating_with_the_grace_period():
    fake = RecordingBackend()
    fake.pods["gp-9-worker-0"] = desired(9)

    report = apply(plan([desired(1)], fake.list_pods()), fake, grace_seconds=15)

    assert fake.calls == [
        ("delete", "gp-9-worker-0", 15),
        ("create", "gp-1-worker-0", None),
        ("bind", "gp-1-worker-0", None),
    ]
    assert (report.created, report.deleted, report.errors) == (
        [f"{NAMESPACE}/gp-1-worker-0"],
        [f"{NAMESPACE}/gp-9-worker-0"],
        [],
    )


def test_apply_carries_on_past_failing_pods_and_a_rerun_converges():
    want = [desired(1), desired(2), desired(3)]
    fake = RecordingBackend(
        failures={
            "create gp-2-worker-0": TransientClusterError("API server unavailable"),
            "create gp-3-worker-0": ValueError("bug while building the manifest"),
        }
    )

    first = apply(plan(want, fake.list_pods()), fake)

    assert first.created == [f"{NAMESPACE}/gp-1-worker-0"]
    assert first.errors == [
        f"create {NAMESPACE}/gp-2-worker-0: API server unavailable",
        f"create {NAMESPACE}/gp-3-worker-0: bug while building the manifest",
    ]
    assert not first.ok

    second = apply(plan(want, fake.list_pods()), fake)

    assert second.created == [f"{NAMESPACE}/gp-2-worker-0", f"{NAMESPACE}/gp-3-worker-0"]
    assert second.ok
    assert plan(want, fake.list_pods()).empty


# -- plan + apply end to end over the emulator -----------------------------------------------


def test_reconcile_creates_then_does_nothing_on_a_second_pass(cluster, backend):
    want = [desired(1, 0), desired(1, 1, node="gpu-b"), desired(2, task="master")]

    first = apply(plan(want, backend.list_pods()), backend)
    second_plan = plan(want, backend.list_pods())
    second = apply(second_plan, backend)

    assert first.created == sorted(f"{NAMESPACE}/{p.name}" for p in want)
    assert second_plan.empty
    assert (second.created, second.deleted, second.errors) == ([], [], [])
    assert cluster.pod_names() == sorted(p.name for p in want)
    assert cluster.pod(NAMESPACE, "gp-1-worker-1")["spec"]["nodeName"] == "gpu-b"


def test_applying_the_same_plan_twice_leaves_one_pod_per_replica(cluster, backend):
    cluster.add_node("gpu-a", {"cpu": "8", "memory": "16Gi", "nvidia.com/gpu": "8"})
    keep, evict = desired(1), desired(2)
    apply(plan([keep, evict], []), backend)
    same_plan = plan([keep, desired(3)], backend.list_pods())

    first = apply(same_plan, backend, grace_seconds=10)
    second = apply(same_plan, backend, grace_seconds=10)

    # The repeat answers 409 (same replica: accepted) and 404 (already gone): both success.
    assert first.ok
    assert second.ok
    assert cluster.pod_names() == ["gp-1-worker-0", "gp-3-worker-0"]


def test_eviction_deletes_the_pod_gracefully(cluster, backend):
    cluster.add_node("gpu-a", {"cpu": "8", "memory": "16Gi", "nvidia.com/gpu": "8"})
    running = [desired(1), desired(2)]
    apply(plan(running, []), backend)

    report = apply(plan([desired(1)], backend.list_pods()), backend, grace_seconds=60)

    assert report.deleted == [f"{NAMESPACE}/gp-2-worker-0"]
    assert cluster.pod_names() == ["gp-1-worker-0"]
    (delete,) = cluster.requests(kmock.action.DELETE)
    assert delete.params["gracePeriodSeconds"] == "60"


def test_partial_failure_is_reported_and_the_next_pass_converges(cluster, backend):
    want = [desired(1), desired(2), desired(3)]
    cluster.reject_create("gp-2-worker-0", status=422)
    # Stored by the server, then a 500: the backend's own retry sees 409 and accepts it.
    cluster.fail_next(
        kmock.action.CREATE, kmock.KubernetesError(status=500, reason="InternalError")
    )

    first = apply(plan(want, backend.list_pods()), backend)

    assert first.created == [f"{NAMESPACE}/gp-1-worker-0", f"{NAMESPACE}/gp-3-worker-0"]
    assert len(first.errors) == 1
    assert first.errors[0].startswith(f"create {NAMESPACE}/gp-2-worker-0: ")
    assert cluster.pod_names() == ["gp-1-worker-0", "gp-3-worker-0"]

    second = apply(plan(want, backend.list_pods()), backend)

    assert (second.created, second.errors) == ([f"{NAMESPACE}/gp-2-worker-0"], [])
    assert plan(want, backend.list_pods()).empty
    assert cluster.pod_names() == ["gp-1-worker-0", "gp-2-worker-0", "gp-3-worker-0"]


def test_a_name_conflict_is_an_error_for_that_pod_only(cluster, backend):
    want = [desired(1), desired(2)]
    cluster.add_pod(
        {
            "metadata": {"name": "gp-1-worker-0", "namespace": NAMESPACE, "labels": {}},
            "spec": {"containers": [{"name": "c", "image": "x"}]},
        }
    )

    report = apply(plan(want, backend.list_pods()), backend)

    assert report.created == [f"{NAMESPACE}/gp-2-worker-0"]
    assert len(report.errors) == 1
    assert "name taken by an object no portal made" in report.errors[0]


def test_finished_pods_kept_for_their_logs_stay_and_do_not_block_a_new_attempt():
    old = desired(7)
    finished = observed(old, phase="Failed", exit_code=137)
    new_attempt = replace(old, name=labels.pod_name(7, "worker", 0, attempt=1))
    key = (finished.namespace, finished.name)

    kept = plan([new_attempt], [finished], delete_finished=True, keep_finished=frozenset({key}))
    assert names(kept.delete) == []
    assert names(kept.create) == [new_attempt.name]  # a finished pod runs nothing

    expired = plan([new_attempt], [finished], delete_finished=True)
    assert names(expired.delete) == [finished.name]
