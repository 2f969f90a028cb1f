import pytest

from scheduler.core.config import ConfigError, parse_conf
from scheduler.core.cycle import open_session
from scheduler.core.plugins import fairshare
from scheduler.core.resources import Resources
from scheduler.core.types import Snapshot, UsageRecord
from tests.scheduler.core.builders import make_node, make_queue

DAY = 86400.0


def _usage(*pairs):
    return tuple(UsageRecord(at, Resources({"gpu": gpu_seconds})) for at, gpu_seconds in pairs)


def _session(queues, now=10 * DAY, hours=24):
    conf = parse_conf(
        {
            "actions": "enqueue",
            "tiers": [
                {"plugins": [{"name": "fairshare", "arguments": {fairshare.HALF_LIFE: hours}}]}
            ],
        }
    )
    return open_session(Snapshot((make_node("n1"),), tuple(queues), (), now), conf)


def test_a_period_one_half_life_old_counts_half_and_a_future_one_in_full():
    records = _usage((0.0, 100.0), (-DAY, 100.0), (DAY, 100.0))
    assert fairshare.decayed(records, now=0.0, half_life=DAY) == {"gpu": 100 + 50 + 100}


@pytest.mark.parametrize("hours", [0, -1, "soon", float("inf")])
def test_half_life_must_be_a_positive_number_of_hours(hours):
    with pytest.raises(ConfigError) as info:
        parse_conf(
            {
                "actions": "enqueue",
                "tiers": [
                    {"plugins": [{"name": "fairshare", "arguments": {fairshare.HALF_LIFE: hours}}]}
                ],
            }
        )
    assert info.value.field == f"config.tiers[0].plugins[0].arguments.{fairshare.HALF_LIFE}"


def test_the_queue_that_used_less_than_its_share_goes_first():
    now = 10 * DAY
    ssn = _session(
        [
            make_queue("heavy", usage=_usage((now - DAY, 8 * DAY))),
            make_queue("light", usage=_usage((now - DAY, 1 * DAY))),
        ]
    )
    ordered = sorted(ssn.queues.values(), key=ssn.queue_key_fn())
    assert [q.name for q in ordered] == ["light", "heavy"]
    assert ssn.queue_compare(ssn.queues["light"], ssn.queues["heavy"]) == -1


def test_weights_scale_the_share_a_queue_may_use():
    # Same use, but "big" is entitled to three times as much.
    now = 10 * DAY
    ssn = _session(
        [
            make_queue("big", weight=3, usage=_usage((now, 4 * DAY))),
            make_queue("small", weight=1, usage=_usage((now, 4 * DAY))),
        ],
        now=now,
    )
    assert ssn.plugins["fairshare"].ratio == {"big": pytest.approx(2 / 3), "small": 2.0}


def test_old_use_fades_with_the_half_life():
    # "old" used four times as much, four half-lives ago: it now counts a quarter of "new".
    now = 10 * DAY
    ssn = _session(
        [
            make_queue("old", usage=_usage((now - 4 * DAY, 4 * DAY))),
            make_queue("new", usage=_usage((now, 1 * DAY))),
        ],
        now=now,
    )
    plugin = ssn.plugins["fairshare"]
    assert plugin.ratio["old"] < plugin.ratio["new"]


def test_tenants_are_compared_before_their_queues():
    now = 10 * DAY
    queues = [
        make_queue("tenant/a"),
        make_queue("tenant/b"),
        # a2 used nothing, but its tenant used more than b: b's queues go first.
        make_queue("a1", parent="tenant/a", usage=_usage((now, 10 * DAY))),
        make_queue("a2", parent="tenant/a"),
        make_queue("b1", parent="tenant/b", usage=_usage((now, 2 * DAY))),
    ]
    ssn = _session(queues, now=now)
    leaves = [ssn.queues[n] for n in ("a1", "a2", "b1")]
    ordered = sorted(leaves, key=ssn.queue_key_fn())
    assert [q.name for q in ordered] == ["b1", "a2", "a1"]


def test_no_history_leaves_the_order_to_the_next_plugin():
    ssn = _session([make_queue("a"), make_queue("b")])
    assert ssn.plugins["fairshare"].queue_order(ssn.queues["a"], ssn.queues["b"]) == 0
