"""The soak's cluster faults: the simulated backend says no as a real cluster does (a quota's
403 in the server's words, a kubelet's refusal, an image or an init container that cannot
start), each pod's fault drawn from the seed and its name, and the report's figures."""

from datetime import UTC, datetime, timedelta

import pytest

from bench.soak_faults import BAD_IMAGE_JOBS, RATES, FaultWatch, fault_of, faulty_backend
from jobspec import labels
from jobspec.pods import DesiredPod
from portal.cluster.models import SimulatedPod
from portal.jobs.backoff import quota_exceeded
from portal.jobs.models import Job
from scheduler.adapters.cluster.base import RefusedClusterError

NAMESPACE = "gpu-jobs"
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
SEED = 1


def desired(job_id: int, replica: int = 0) -> DesiredPod:
    return DesiredPod(
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


def first_job_with(fault: str | None) -> int:
    """The first job id whose first pod meets `fault` under SEED."""
    return next(job for job in range(1, 10_000) if fault_of(SEED, desired(job).name) == fault)


def test_faults_are_drawn_from_the_seed_and_the_pod_name_at_the_rates():
    names = [
        labels.pod_name(job, "worker", 0, attempt) for job in range(4000) for attempt in (0, 1)
    ]
    drawn = [fault_of(SEED, name) for name in names]
    assert drawn == [fault_of(SEED, name) for name in names]
    assert drawn != [fault_of(SEED + 1, name) for name in names]
    for fault, rate in RATES:
        share = drawn.count(fault) / len(drawn)
        expected = rate + (BAD_IMAGE_JOBS if fault == "image" else 0.0)
        assert abs(share - expected) < 0.02, (fault, share)


def test_a_job_with_an_image_no_registry_has_fails_every_attempt():
    bad = [
        job
        for job in range(2000)
        if all(fault_of(SEED, labels.pod_name(job, "worker", 0, a)) == "image" for a in range(6))
    ]
    # Six independent draws would all be image faults far more rarely than BAD_IMAGE_JOBS.
    assert len(bad) / 2000 == pytest.approx(BAD_IMAGE_JOBS, abs=0.015)


@pytest.mark.django_db
def test_the_faulty_backend_refuses_as_a_cluster_does():
    backend = faulty_backend(seed=SEED, default_run_seconds=600, now=lambda: NOW)
    quota, refused, image, init, fine = (
        first_job_with(fault) for fault in ("quota", "refused", "image", "init", None)
    )
    pods = [desired(job) for job in (quota, refused, image, init, fine)]

    outcomes = backend.create_pods(pods)

    assert isinstance(outcomes[0], RefusedClusterError)
    assert outcomes[0].status == 403
    assert quota_exceeded(outcomes[0].status, outcomes[0].message) == "gpu-quota"
    assert outcomes[1:] == [None, None, None, None]
    assert not SimulatedPod.objects.filter(name=pods[0].name).exists()

    backend.advance()
    backend.advance()  # a pod that cannot start stays as the kubelet left it

    phases = dict(SimulatedPod.objects.values_list("name", "phase"))
    reasons = dict(SimulatedPod.objects.values_list("name", "reason"))
    assert phases == {
        pods[1].name: "Failed",
        pods[2].name: "Pending",
        pods[3].name: "Pending",
        pods[4].name: "Running",
    }
    assert [reasons[pod.name] for pod in pods[1:4]] == [
        "OutOfnvidia.com/gpu",
        "ErrImagePull",
        "CreateContainerConfigError",
    ]
    assert backend.injected == {"image": 1, "init": 1, "quota": 1, "refused": 1}


@pytest.mark.django_db
def test_the_watch_counts_blank_reasons_gpus_held_in_backoff_and_the_most_attempts_in_an_hour(
    nlp_queue,
):
    from bench.soak import _max_in_window
    from portal.cluster.models import Placement
    from portal.jobs.backoff import backoff_bound_per_hour
    from portal.jobs.limits import start_backoff
    from tests.factories import JobFactory, JobTaskFactory, PlacementFactory

    attempts = [
        {"at": (NOW + timedelta(minutes=minutes)).isoformat(), "kind": "image-pull"}
        for minutes in (0, 10, 50, 70)
    ]
    failed = JobFactory(
        queue=nlp_queue, status=Job.Status.PENDING, pending_reason="", start_attempts=attempts
    )
    JobFactory(queue=nlp_queue, status=Job.Status.PENDING, pending_reason="waits for 4 GPUs")
    # Still holding GPUs while it waits its backoff (80 s after its 4th failure).
    PlacementFactory(task=JobTaskFactory(job=failed), state=Placement.State.BOUND)
    watch = FaultWatch()
    watch.after_cycle(NOW + timedelta(minutes=70, seconds=30))
    watch.after_cycle(NOW + timedelta(minutes=72))  # its backoff is over: it may hold them
    backend = faulty_backend(seed=SEED, default_run_seconds=600, now=lambda: NOW)

    figures = watch.report(backend, _max_in_window)

    assert figures["blank_reasons_while_waiting"] == 2
    assert figures["gpus_held_while_backing_off"] == 1
    assert figures["max_start_attempts_per_job_per_hour"] == 3
    assert figures["start_failures"] == {"image-pull": 4}
    assert figures["backoff_bound_per_hour"] == backoff_bound_per_hour(start_backoff(), 3)


@pytest.mark.django_db
def test_nodes_found_full_at_bind_time_are_no_starts_in_the_hourly_count(nlp_queue):
    from bench.soak import _max_in_window
    from tests.factories import JobFactory

    at = [(NOW + timedelta(seconds=s)).isoformat() for s in range(0, 1200, 60)]
    attempts = [{"at": t, "kind": "node-taken", "node": "gpu-a"} for t in at]
    attempts += [{"at": at[0], "kind": "image-pull"}, {"at": at[-1], "kind": "image-pull"}]
    JobFactory(queue=nlp_queue, status=Job.Status.PENDING, start_attempts=attempts)
    backend = faulty_backend(seed=SEED, default_run_seconds=600, now=lambda: NOW)

    figures = FaultWatch().report(backend, _max_in_window)

    assert figures["max_start_attempts_per_job_per_hour"] == 2
    assert figures["start_failures"] == {"image-pull": 2, "node-taken": 20}
