"""The decision digests tell two cycles apart exactly when their decisions (or reasons) differ."""

from bench.digest import decisions_digest, reasons_digest
from scheduler.core.config import default_conf
from scheduler.core.cycle import run_cycle
from scheduler.core.synthetic import synthetic_snapshot


def test_the_same_snapshot_gives_the_same_digests_and_another_does_not():
    conf = default_conf()
    first = run_cycle(synthetic_snapshot(20, 200, 4, 0, 0.0), conf)
    again = run_cycle(synthetic_snapshot(20, 200, 4, 0, 0.0), conf)
    other = run_cycle(synthetic_snapshot(20, 200, 4, 1, 0.0), conf)

    assert decisions_digest(first) == decisions_digest(again)
    assert reasons_digest(first) == reasons_digest(again)
    assert decisions_digest(first) != decisions_digest(other)


def test_a_single_changed_bind_changes_the_decisions_digest_only():
    from dataclasses import replace

    result = run_cycle(synthetic_snapshot(20, 200, 4, 0, 0.0), default_conf())
    moved = replace(result.binds[0], node="somewhere-else")
    changed = replace(result, binds=(moved, *result.binds[1:]))

    assert decisions_digest(changed) != decisions_digest(result)
    assert reasons_digest(changed) == reasons_digest(result)
