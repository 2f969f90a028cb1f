from hypothesis import given
from hypothesis import strategies as st

from scheduler.core.actions._queue import PriorityQueue


def _compare(left: tuple, right: tuple) -> int:
    return (left[0] > right[0]) - (left[0] < right[0])


def _drain(queue: PriorityQueue) -> list:
    return [queue.pop() for _ in range(len(queue))]


@given(
    items=st.lists(st.tuples(st.integers(0, 3), st.integers()), max_size=12),
    extra=st.tuples(st.integers(0, 3), st.integers()),
    keyed=st.booleans(),
)
def test_pushpop_pops_what_push_then_pop_would(items, extra, keyed):
    # Ties on the first field are broken by insertion order, so equal keys exercise it.
    key = (lambda item: item[0]) if keyed else None
    one = PriorityQueue(_compare, items, key=key)
    two = PriorityQueue(_compare, items, key=key)
    one.push(extra)
    first = one.pop()
    assert two.pushpop(extra) is first
    assert _drain(two) == _drain(one)
