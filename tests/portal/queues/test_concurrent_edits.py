"""Concurrent edits of one queue through `queue_update`, each thread on its own connection.

The audit trail must read as one history: replayed in insertion order, every entry starts
from the value the previous entry of that field ended with, and the last entry of each field
is what the queue holds now. A lost update (two edits reading the same old value) breaks the
chain, so the check fails if the service stops serialising edits of a queue.
"""

import random
import threading
from collections import defaultdict

import pytest
from django.db import close_old_connections, connection

from portal.queues.models import Queue, QueueChange
from portal.queues.services import queue_update

pytestmark = pytest.mark.django_db(transaction=True)
THREADS = 6
EDITS_PER_THREAD = 8
JOIN_SECONDS = 120


def run_threads(target, count: int) -> list[BaseException]:
    errors: list[BaseException] = []
    barrier = threading.Barrier(count)

    def body(index: int) -> None:
        try:
            barrier.wait(timeout=30)
            target(index)
        except BaseException as error:  # reported by the test, not swallowed
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=body, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=JOIN_SECONDS)
    assert not any(thread.is_alive() for thread in threads), "an edit thread hung"
    return errors


def test_concurrent_edits_leave_a_gapless_audit_chain_matching_the_queue(nlp_queue, lead, cluster):
    nlp_queue.tenant.guarantee_gpus = 8  # room for the guarantees the threads set
    nlp_queue.tenant.save()
    close_old_connections()
    edits: list[dict[str, int]] = []

    def edit(index: int) -> None:
        rng = random.Random(index)
        for _ in range(EDITS_PER_THREAD):
            # Values differ from what this thread last read, so most edits change both fields.
            current = Queue.objects.get(pk=nlp_queue.pk)
            change = {
                "weight": rng.choice([w for w in range(1, 50) if w != current.weight]),
                "guarantee_gpus": rng.choice(
                    [g for g in range(0, 9) if g != current.guarantee_gpus]
                ),
            }
            queue_update(queue=nlp_queue, actor=lead, **change)
            edits.append(change)

    errors = run_threads(edit, THREADS)

    assert errors == []
    queue = Queue.objects.get(pk=nlp_queue.pk)
    audit = list(QueueChange.objects.filter(queue=queue).order_by("id"))
    by_field: dict[str, list[QueueChange]] = defaultdict(list)
    for entry in audit:
        by_field[entry.field].append(entry)
    assert set(by_field) == {"weight", "guarantee_gpus"}
    initial = {"weight": "2", "guarantee_gpus": "0"}  # nlp_queue fixture
    for field, entries in by_field.items():
        # Edits computed from a stale read may coincide with the value the queue already
        # holds, and an unchanged field writes no row: at most one row per edit, never more.
        assert 0 < len(entries) <= len(edits), field
        assert entries[0].old_value == initial[field]
        for previous, entry in zip(entries, entries[1:]):
            assert entry.old_value == previous.new_value, (field, previous.id, entry.id)
            assert entry.old_value != entry.new_value
        assert entries[-1].new_value == str(getattr(queue, field))
