"""The backoff rules as functions of a job's start attempts (portal.jobs.backoff)."""

from datetime import UTC, datetime, timedelta

import pytest

from portal.jobs.backoff import (
    ATTEMPTS_KEPT,
    Attempt,
    BackoffSettings,
    Kind,
    attempts_of,
    attempts_with,
    backoff_bound_per_hour,
    capped,
    failed_reason,
    in_backoff,
    job_retry_at,
    nodes_avoided,
    quota_exceeded,
    waiting_kind,
    waiting_reason,
)

T0 = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
SETTINGS = BackoffSettings(base_seconds=10, max_seconds=300)


def attempt(kind: Kind, seconds: float = 0, node: str = "n1", **extra) -> Attempt:
    return Attempt(
        at=T0 + timedelta(seconds=seconds), kind=kind, node=node, pod="gp-1-w-0", **extra
    )


@pytest.mark.parametrize(
    ("failures", "seconds"), [(0, 0), (1, 10), (2, 20), (3, 40), (5, 160), (6, 300), (40, 300)]
)
def test_interval_doubles_from_base_to_max(failures, seconds):
    assert SETTINGS.interval(failures) == timedelta(seconds=seconds)


def test_job_backoff_counts_every_job_level_failure_and_ignores_node_refusals():
    attempts = [attempt(Kind.IMAGE_PULL), attempt(Kind.KUBELET_REFUSED, 5)]
    assert job_retry_at(attempts, SETTINGS) == T0 + timedelta(seconds=10)
    attempts.append(attempt(Kind.START_TIMEOUT, 30))
    assert job_retry_at(attempts, SETTINGS) == T0 + timedelta(seconds=50)
    assert in_backoff(attempts, SETTINGS, T0 + timedelta(seconds=49))
    assert not in_backoff(attempts, SETTINGS, T0 + timedelta(seconds=50))


def test_node_refusals_back_off_that_node_only_and_grow_per_node():
    attempts = [
        attempt(Kind.KUBELET_REFUSED, 0, "a"),
        attempt(Kind.KUBELET_REFUSED, 15, "a"),
        attempt(Kind.KUBELET_REFUSED, 16, "b"),
    ]
    now = T0 + timedelta(seconds=17)
    assert nodes_avoided(attempts, SETTINGS, now) == {
        "a": T0 + timedelta(seconds=35),
        "b": T0 + timedelta(seconds=26),
    }
    assert job_retry_at(attempts, SETTINGS) is None
    assert nodes_avoided(attempts, SETTINGS, T0 + timedelta(seconds=35)) == {}


def test_the_cap_counts_one_kind_and_never_ends_a_quota_wait():
    pulls = [attempt(Kind.IMAGE_PULL, i) for i in range(3)]
    assert not capped(pulls[:2], Kind.IMAGE_PULL, max_retry=3)
    assert capped(pulls, Kind.IMAGE_PULL, max_retry=3)
    assert not capped(pulls, Kind.START_TIMEOUT, max_retry=3)
    assert capped(pulls[:1], Kind.IMAGE_PULL, max_retry=0)  # maxRetry 0: no retry
    quotas = [attempt(Kind.QUOTA, i, quota="gpu-quota") for i in range(50)]
    assert not capped(quotas, Kind.QUOTA, max_retry=3)


def test_a_node_found_full_at_bind_time_backs_off_that_node_and_never_counts_toward_the_cap():
    words = "2 of 8 nvidia.com/gpu free, 4 needed (other workloads' pods hold 6, the portal's 0)"
    taken = [attempt(Kind.NODE_TAKEN, i * 400, "a", words=words) for i in range(10)]
    last = taken[-1].at

    assert not capped(taken, Kind.NODE_TAKEN, max_retry=1)
    assert job_retry_at(taken, SETTINGS) is None  # the job may be placed again at once
    assert nodes_avoided(taken, SETTINGS, last) == {"a": last + timedelta(seconds=300)}
    assert waiting_reason(taken[:1], SETTINGS, max_retry=3) == (
        f"node a's GPUs were taken before the bind of pod gp-1-w-0: {words} "
        "(avoiding node a until 12:00:10 UTC, other nodes may take it now)"
    )


def test_reasons_say_what_happened_when_the_next_try_is_and_the_count():
    attempts = [attempt(Kind.IMAGE_PULL, words='ErrImagePull: Back-off pulling image "x"')]
    assert waiting_reason(attempts, SETTINGS, max_retry=3) == (
        "pod gp-1-w-0 could not pull its image on node n1: ErrImagePull: Back-off pulling "
        'image "x" (will retry at 12:00:10 UTC; start failure 1 of 3)'
    )
    refused = [attempt(Kind.KUBELET_REFUSED, words="OutOfnvidia.com/gpu")]
    assert waiting_reason(refused, SETTINGS, max_retry=3) == (
        "the kubelet of node n1 refused pod gp-1-w-0: OutOfnvidia.com/gpu (avoiding node n1 "
        "until 12:00:10 UTC, other nodes may take it now; start failure 1 of 3)"
    )
    quota = [attempt(Kind.QUOTA, quota="gpu-quota", words="exceeded quota: gpu-quota, ...")]
    assert waiting_reason(quota, SETTINGS, max_retry=3) == (
        "namespace quota gpu-quota exceeded: exceeded quota: gpu-quota, ... "
        "(will retry at 12:00:10 UTC)"
    )
    assert failed_reason(attempts * 3, max_retry=3).endswith(
        "the job failed: 3 start failures of this kind (maxRetry 3)"
    )


def test_stored_attempts_round_trip_skip_junk_and_stay_bounded():
    stored = attempts_with([], attempt(Kind.QUOTA, quota="q", words="w"))
    assert attempts_of(stored) == [attempt(Kind.QUOTA, quota="q", words="w")]
    assert attempts_of([{"at": "not a time", "kind": "quota"}, 7, {"kind": "x"}]) == []
    assert attempts_of("junk") == []
    for i in range(ATTEMPTS_KEPT + 5):
        stored = attempts_with(stored, attempt(Kind.IMAGE_PULL, i))
    assert len(stored) == ATTEMPTS_KEPT


def test_a_403_is_a_quota_refusal_only_by_the_quota_admission_words():
    message = (
        'pods "gp-1-w-0" is forbidden: exceeded quota: gpu-quota, requested: '
        "requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=4, limited: "
        "requests.nvidia.com/gpu=4"
    )
    assert quota_exceeded(403, message) == "gpu-quota"
    assert quota_exceeded(422, message) is None
    pod_security = 'pods "x" is forbidden: violates PodSecurity "restricted:latest": ...'
    assert quota_exceeded(403, pod_security) is None
    rbac = 'pods is forbidden: User "system:serviceaccount:x" cannot create resource "pods"'
    assert quota_exceeded(403, rbac) is None


def test_waiting_kinds_of_the_kubelet():
    assert waiting_kind("ImagePullBackOff") is Kind.IMAGE_PULL
    assert waiting_kind("CreateContainerConfigError") is Kind.CONTAINER
    assert waiting_kind("ContainerCreating") is None
    assert waiting_kind(None) is None


def test_the_bound_per_hour_is_the_backoff_series_and_the_cap():
    # 1 + the waits 10, 20, 40, 80, 160 (310 s), then 10 of 300 s within the hour: 16.
    assert SETTINGS.attempts_per_hour() == 16
    assert backoff_bound_per_hour(SETTINGS, max_retry=3) == 19
