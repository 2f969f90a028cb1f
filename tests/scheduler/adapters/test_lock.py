"""The cycle lock: a Redis key kept alive while its cycle works, or a file lock without Redis.

Redis tests run against a private redis-server (tests/scheduler/conftest.py). The heartbeat
reads a fake clock and the tests call its beats themselves; time passing on the server is a
shortened expiry (PEXPIRE), so nothing sleeps through TTLs.
"""

import threading

import pytest
import redis
from django.conf import settings
from django.db import transaction

from scheduler.adapters.lock import (
    CycleLease,
    Heartbeat,
    LeaseLost,
    cycle_lock,
    cycle_write_lock,
)
from tests.scheduler.conftest import free_port, wait_for

TTL = 30.0  # long enough that the real heartbeat thread never beats during a test
KEY = f"gpuportal:{settings.SCHEDULER_LOCK_NAME}"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def redis_lock(settings, private_redis):
    settings.REDIS_URL = private_redis.url
    return private_redis


@pytest.fixture
def held(redis_lock):
    """A lock held as cycle_lock holds it, with a heartbeat on a fake clock: (lease, heartbeat,
    clock, client)."""
    client = redis.Redis.from_url(redis_lock.url, socket_timeout=1, socket_connect_timeout=1)
    lock = client.lock(KEY, timeout=TTL, blocking=False, thread_local=False)
    assert lock.acquire()
    clock = FakeClock()
    lease = CycleLease(True)
    yield lease, Heartbeat(lock, lease, TTL, 4 * TTL, clock), clock, client
    client.close()


def held_elsewhere(**kwargs) -> bool:
    """Whether another worker would get the lock now (tried from another thread)."""
    answer = []

    def attempt():
        with cycle_lock(**kwargs) as lease:
            answer.append(bool(lease))

    thread = threading.Thread(target=attempt)
    thread.start()
    thread.join(timeout=10)
    return not answer[0]


@pytest.mark.redis
def test_a_cycle_longer_than_the_ttl_keeps_the_lock(held):
    lease, heartbeat, clock, client = held
    for _ in range(9):  # three TTLs of beats
        client.pexpire(KEY, 200)  # the key is about to expire on the server...
        clock.now += TTL / 3
        assert heartbeat.beat()
        assert client.pttl(KEY) > (TTL - 5) * 1000  # ...and each beat renews it in full
    assert held_elsewhere(ttl_seconds=TTL)
    lease.check()


@pytest.mark.redis
def test_cycle_lock_holds_the_key_and_frees_it_at_the_end(redis_lock):
    with cycle_lock(ttl_seconds=TTL) as lease:
        assert lease
        assert held_elsewhere(ttl_seconds=TTL)
        lease.check()
    assert not held_elsewhere(ttl_seconds=TTL)


@pytest.mark.redis
def test_a_lock_lost_to_a_redis_restart_is_reported(held, redis_lock):
    lease, heartbeat, clock, _ = held
    redis_lock.stop()
    redis_lock.start()  # nothing saved: the key is gone
    clock.now += TTL / 3
    assert not heartbeat.beat()
    with pytest.raises(LeaseLost, match="expired or was lost"):
        lease.check()
    # Another worker may take the lock now; this one must stop at its next checkpoint.
    with cycle_lock(ttl_seconds=TTL) as other:
        assert other


@pytest.mark.redis
def test_a_lock_is_lost_when_redis_stays_unreachable_for_a_ttl(held, redis_lock):
    lease, heartbeat, clock, _ = held
    redis_lock.stop()
    clock.now += TTL / 3
    assert heartbeat.beat()  # one failed renewal is a blip: retried at the next beat
    lease.check()
    clock.now += TTL / 3
    assert heartbeat.beat()
    clock.now += TTL / 3
    assert not heartbeat.beat()
    with pytest.raises(LeaseLost, match="unreachable"):
        lease.check()


@pytest.mark.redis
def test_a_cycle_past_its_longest_hold_gives_the_lock_up(held):
    lease, heartbeat, clock, client = held
    clock.now += 4 * TTL - 1
    assert heartbeat.beat()
    clock.now += 1
    assert not heartbeat.beat()
    with pytest.raises(LeaseLost, match="ran past"):
        lease.check()
    # Left to expire, not deleted: another worker gets it once the server's expiry passes.
    assert client.exists(KEY)
    client.pexpire(KEY, 1)
    wait_for(lambda: not client.exists(KEY), "the key to expire", timeout=5)
    assert not held_elsewhere(ttl_seconds=TTL)


@pytest.mark.redis
def test_a_second_worker_is_refused_while_the_first_holds_the_lock(redis_lock):
    with cycle_lock(ttl_seconds=TTL) as first, cycle_lock(ttl_seconds=TTL) as second:
        assert first
        assert not second


def test_redis_down_at_the_start_skips_the_cycle_instead_of_failing(settings):
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"  # nobody listens there
    with cycle_lock(ttl_seconds=TTL) as lease:
        assert not lease


def test_without_redis_a_file_lock_lets_one_holder_in(settings, tmp_path):
    settings.REDIS_URL = ""
    settings.VAR_DIR = tmp_path
    with cycle_lock() as first:
        with cycle_lock() as second:
            assert first
            assert not second
        first.check()  # a kernel lock cannot be lost while its holder lives
    with cycle_lock() as again:
        assert again


def test_a_lease_check_raises_only_once_lost():
    lease = CycleLease(True)
    lease.check()
    lease.lose("test")
    lease.lose("a second reason is not recorded")
    with pytest.raises(LeaseLost, match="lost the cycle lock: test$"):
        lease.check()


@pytest.mark.django_db(transaction=True)
def test_the_write_lock_needs_a_transaction():
    with pytest.raises(RuntimeError, match=r"inside transaction.atomic\(\)"):
        cycle_write_lock()
    with transaction.atomic():
        cycle_write_lock()
