"""The cycle lock: a Redis key kept alive while its cycle works, or a file lock without Redis.

Redis tests run against a private redis-server (tests/scheduler/conftest.py) with a TTL of one
second, so "a cycle longer than the TTL" takes seconds, not minutes.
"""

import threading
import time

import pytest
from django.db import transaction

from scheduler.adapters.lock import CycleLease, LeaseLost, cycle_lock, cycle_write_lock
from tests.scheduler.conftest import free_port, wait_for

TTL = 1.0


@pytest.fixture
def redis_lock(settings, private_redis):
    settings.REDIS_URL = private_redis.url
    return private_redis


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
def test_a_cycle_longer_than_the_ttl_keeps_the_lock(redis_lock):
    with cycle_lock(ttl_seconds=TTL) as lease:
        assert lease
        time.sleep(TTL * 3)  # three TTLs: without renewal the key would have expired twice
        assert held_elsewhere(ttl_seconds=TTL)
        lease.check()
    assert not held_elsewhere(ttl_seconds=TTL)  # released at the end


@pytest.mark.redis
def test_a_lock_lost_to_a_redis_restart_is_reported(redis_lock):
    with cycle_lock(ttl_seconds=TTL) as lease:
        redis_lock.stop()
        redis_lock.start()  # nothing saved: the key is gone
        wait_for(lambda: lease.lost, "the lease to notice", timeout=TTL * 5)
        with pytest.raises(LeaseLost, match="expired or was lost"):
            lease.check()
        # Another worker may take the lock now; this one must stop at its next checkpoint.
        with cycle_lock(ttl_seconds=TTL) as other:
            assert other


@pytest.mark.redis
def test_a_lock_is_lost_when_redis_stays_unreachable_for_a_ttl(redis_lock):
    with cycle_lock(ttl_seconds=TTL) as lease:
        redis_lock.stop()
        wait_for(lambda: lease.lost, "the lease to notice", timeout=TTL * 10)
        with pytest.raises(LeaseLost, match="unreachable"):
            lease.check()


@pytest.mark.redis
def test_a_cycle_past_its_longest_hold_gives_the_lock_up(redis_lock):
    with cycle_lock(ttl_seconds=TTL, max_hold_seconds=TTL) as lease:
        wait_for(lambda: lease.lost, "the lease to expire", timeout=TTL * 10)
        with pytest.raises(LeaseLost, match="ran past"):
            lease.check()
        wait_for(lambda: not held_elsewhere(ttl_seconds=TTL), "the key to expire", timeout=5)


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
