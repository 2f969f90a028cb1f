"""ApiScopedRateThrottle on a Redis cache: DRF's sliding window, atomic across processes."""

import os
import threading
from http import HTTPStatus
from types import SimpleNamespace

import pytest
from django.core.cache import caches
from django.test import override_settings

from portal.api.throttling import ApiScopedRateThrottle

REDIS_URL = os.environ.get(
    "LOAD_TEST_REDIS_URL", os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/15"
)


def _redis_client():
    try:
        import redis

        client = redis.Redis.from_url(REDIS_URL, socket_timeout=2)
        client.ping()
        return client
    except Exception:  # noqa: BLE001 - any failure means "skip"
        return None


pytestmark = [
    pytest.mark.redis,
    pytest.mark.skipif(_redis_client() is None, reason=f"no Redis at {REDIS_URL}"),
]


@pytest.fixture
def redis_cache():
    """The default cache on Redis, under a key prefix of this test's own (no FLUSHDB: the
    Redis database may be shared), with a job_create limit of 3 per minute."""
    prefix = f"throttle-test-{os.getpid()}-{os.urandom(4).hex()}"
    cache_settings = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": prefix,
        }
    }
    with override_settings(CACHES=cache_settings, API_THROTTLE_RATES={"job_create": "3/min"}):
        yield caches["default"]
    client = _redis_client()
    keys = list(client.scan_iter(f"{prefix}:*"))
    if keys:
        client.delete(*keys)


def _request(user_id: int = 42):
    return SimpleNamespace(user=SimpleNamespace(is_authenticated=True, pk=user_id), META={})


VIEW = SimpleNamespace(throttle_scope="job_create")


def _throttle(now: float) -> ApiScopedRateThrottle:
    throttle = ApiScopedRateThrottle()
    throttle.timer = lambda: now
    return throttle


def test_at_most_the_limit_in_any_window(redis_cache):
    answers = [_throttle(1000.0 + i).allow_request(_request(), VIEW) for i in range(4)]
    assert answers == [True, True, True, False]
    # the first request leaves the window 60 s after it was made, not before
    assert _throttle(1059.9).allow_request(_request(), VIEW) is False
    assert _throttle(1060.0).allow_request(_request(), VIEW) is True
    assert _throttle(1060.5).allow_request(_request(), VIEW) is False


def test_refusal_says_when_to_come_back(redis_cache):
    for i in range(3):
        assert _throttle(1000.0 + i).allow_request(_request(), VIEW)
    refused = _throttle(1010.0)
    assert refused.allow_request(_request(), VIEW) is False
    assert refused.wait() == pytest.approx(50.0)  # the oldest (t=1000) expires at t=1060


def test_users_have_windows_of_their_own(redis_cache):
    for _ in range(3):
        assert _throttle(1000.0).allow_request(_request(1), VIEW)
    assert _throttle(1000.0).allow_request(_request(1), VIEW) is False
    assert _throttle(1000.0).allow_request(_request(2), VIEW) is True


def test_concurrent_requests_cannot_overshoot_the_limit(redis_cache):
    """Twenty requests of one user at once (as from several gunicorn workers): three pass."""
    barrier = threading.Barrier(20)
    answers: list[bool] = []

    def one() -> None:
        throttle = _throttle(1000.0)
        barrier.wait()
        answers.append(throttle.allow_request(_request(), VIEW))

    threads = [threading.Thread(target=one) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(answers) == [False] * 17 + [True] * 3


@pytest.mark.django_db
def test_the_api_answers_429_with_retry_after(redis_cache, api_for, nlp_queue):
    client = api_for("researcher")
    body = {"queue": "nlp-train", "tasks": [{"name": "w", "image": "busybox", "replicas": 1}]}
    statuses = [
        client.post("/api/v1/jobs/", {**body, "name": f"j{i}"}, format="json") for i in range(4)
    ]
    assert [answer.status_code for answer in statuses] == [HTTPStatus.CREATED] * 3 + [
        HTTPStatus.TOO_MANY_REQUESTS
    ]
    assert 0 < int(statuses[-1]["Retry-After"]) <= 60
