"""A priority queue ordered by a session compare function, like Volcano's util.PriorityQueue.

Items are ordered when pushed (container/heap semantics); ties keep insertion order so the
result never depends on hashing. With ``key`` (an equivalent sort key, see Session.job_key_fn)
each item's key is computed once at push: only valid while queued items do not change state.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from scheduler.core.hooks import CompareFn, SortKeyFn

_T = TypeVar("_T")


class _Entry(Generic[_T]):
    __slots__ = ("compare", "item", "seq")

    def __init__(self, item: _T, compare: Callable[[_T, _T], int], seq: int):
        self.item, self.compare, self.seq = item, compare, seq

    def __lt__(self, other: _Entry[_T]) -> bool:
        result = self.compare(self.item, other.item)
        return result < 0 if result else self.seq < other.seq


class PriorityQueue(Generic[_T]):
    def __init__(
        self,
        compare: CompareFn[_T],
        items: Iterable[_T] = (),
        key: SortKeyFn[_T] | None = None,
    ) -> None:
        self._compare = compare
        self._key = key
        self._counter = itertools.count()
        if key is not None:
            # (key, seq) is a fixed total order, so heapify pops exactly what pushing one by
            # one would. Compare functions may read state that changes while items wait
            # (queue shares), so there the heap's shape matters: push one by one, as upstream.
            counter = self._counter
            # (key, seq, item) tuples with a key, else _Entry objects
            self._heap: list[Any] = [(key(item), next(counter), item) for item in items]
            heapq.heapify(self._heap)
        else:
            self._heap = []
            for item in items:
                self.push(item)

    def push(self, item: _T) -> None:
        if self._key is not None:
            # (key, seq, item): seq is unique, so items themselves are never compared.
            heapq.heappush(self._heap, (self._key(item), next(self._counter), item))
        else:
            heapq.heappush(self._heap, _Entry(item, self._compare, next(self._counter)))

    def pop(self) -> _T:
        entry = heapq.heappop(self._heap)
        item: _T = entry[2] if self._key is not None else entry.item
        return item

    def pushpop(self, item: _T) -> _T:
        """``push(item)`` then ``pop()``. With a key, one heap operation that hands ``item``
        straight back when it still comes first; (key, seq) is a total order, so what pops is
        the same either way."""
        if self._key is not None:
            entry = (self._key(item), next(self._counter), item)
            popped: _T = heapq.heappushpop(self._heap, entry)[2]
            return popped
        self.push(item)
        return self.pop()

    def __len__(self) -> int:
        return len(self._heap)

    def __bool__(self) -> bool:
        return bool(self._heap)

    def items(self) -> list[_T]:
        if self._key is not None:
            return [entry[2] for entry in self._heap]
        return [entry.item for entry in self._heap]
