"""Resource vectors with Volcano's comparison semantics.

Mirrors volcano-sh/volcano pkg/scheduler/api/resource_info.go: cpu (millicores) and memory
(bytes) always exist; every other name is a scalar. Comparisons tolerate a difference below
``MIN_RESOURCE`` (Volcano's ``minResource``), and a name missing on the right-hand side takes
that side's default: 0 for requests/allocations, infinity for caps such as a queue capability.

GPU names (``gpu``, ``nvidia.com/gpu``, ``mars-tech.com/gpu``, ``*/gpu``) are folded into one
``gpu`` dimension when parsed. It counts cards (1 = one device) and may hold a fraction of one
card in whole milli-GPU (0.25 = 250 milli-GPU). Volcano counts scalar resources in milli-units
(``Quantity.MilliValue``), so its ``minResource`` tolerance of 0.1 is a ten-thousandth of a card
there: comparisons on ``gpu`` use that tolerance (``GPU_TOLERANCE``), so a queue at 0.95 of a
one-GPU cap cannot take 0.1 more. Per-device placement lives in ``scheduler.core.devices``
(docs/design/gpu-sharing.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable, ItemsView, Iterable, Mapping

CPU = "cpu"
MEMORY = "memory"
GPU = "gpu"
PODS = "pods"
INFINITY = math.inf
MIN_RESOURCE = 0.1  # volcano api.minResource
MILLI_PER_GPU = 1000
# volcano's minResource on the milli-GPU values it compares, in cards
GPU_TOLERANCE = MIN_RESOURCE / MILLI_PER_GPU
_BASE = (CPU, MEMORY)


def canonical_name(name: str) -> str:
    """Fold every GPU spelling into the single ``gpu`` dimension."""
    if name == GPU or name.endswith("/gpu"):
        return GPU
    return name


def _le(left: float, right: float) -> bool:
    return left < right or abs(left - right) < MIN_RESOURCE


def _le_gpu(left: float, right: float) -> bool:
    return left < right or abs(left - right) < GPU_TOLERANCE


def tolerance(name: str) -> float:
    """Volcano's minResource for the values of resource ``name``: ``GPU_TOLERANCE`` on GPUs
    (cards, so a quarter of one counts as a quarter, not as nothing), ``MIN_RESOURCE`` else."""
    return GPU_TOLERANCE if name == GPU else MIN_RESOURCE


def le_named(name: str, left: float, right: float) -> bool:
    """Volcano's tolerant ``left <= right`` for the values of resource ``name``."""
    return _le_gpu(left, right) if name == GPU else _le(left, right)


def gpu_milli(cards: float) -> int:
    """A ``gpu`` value in whole milli-GPU (the exact count at the core's edges)."""
    return round(cards * MILLI_PER_GPU)


def memory_cost_milli(memory: int, device_memory: int) -> int:
    """What asking for ``memory`` bytes of one device costs: ceil(memory / device memory x
    1000) milli-GPU, at least 1 and at most a whole card."""
    if memory <= 0 or device_memory <= 0:
        return 0
    return max(1, min(MILLI_PER_GPU, -(-memory * MILLI_PER_GPU // device_memory)))


class Resources:
    """An immutable resource vector; operations return new vectors."""

    __slots__ = ("_values", "default", "_hash")

    def __init__(self, values: Mapping[str, float] | None = None, default: float = 0.0):
        self._values: dict[str, float] = dict(values) if values else {}
        self.default = default
        self._hash: int | None = None

    # construction -------------------------------------------------------------------------
    @classmethod
    def of(cls, values: Mapping[str, float] | None = None, **kw: float) -> Resources:
        merged: dict[str, float] = {}
        for name, value in {**(values or {}), **kw}.items():
            key = canonical_name(name)
            merged[key] = merged.get(key, 0) + value
        return cls(merged)

    @classmethod
    def unlimited(cls, values: Mapping[str, float] | None = None) -> Resources:
        """A cap: names not given are unlimited."""
        return cls(values, default=INFINITY)

    # access ---------------------------------------------------------------------------------
    def get(self, name: str) -> float:
        return self._values.get(name, self.default)

    def names(self) -> list[str]:
        """Explicit names plus cpu and memory, sorted for deterministic iteration."""
        return sorted(set(self._values) | set(_BASE))

    def explicit(self) -> dict[str, float]:
        return dict(self._values)

    def explicit_items(self) -> ItemsView[str, float]:
        """The explicit (name, value) pairs, without copying (read only)."""
        return self._values.items()

    def is_empty(self) -> bool:
        """Volcano IsEmpty: no cpu, memory or scalar (the implicit pod slot does not count)."""
        return not any(
            not v < (GPU_TOLERANCE if k == GPU else MIN_RESOURCE) and k != PODS
            for k, v in self._values.items()
        )

    # arithmetic -----------------------------------------------------------------------------
    @classmethod
    def _make(cls, values: dict[str, float], default: float) -> Resources:
        """Wrap a freshly built dict without copying it."""
        res = object.__new__(cls)
        res._values = values
        res.default = default
        res._hash = None
        return res

    def _combine(self, other: Resources, op: Callable[[float, float], float]) -> Resources:
        keys = set(self._values) | set(other._values)
        return Resources(
            {k: op(self.get(k), other.get(k)) for k in keys}, op(self.default, other.default)
        )

    def add(self, other: Resources) -> Resources:
        # The same sums as ``_combine(other, +)``, names missing on one side taking its default.
        left, right = self._values, other._values
        left_default, right_default = self.default, other.default
        out = {k: v + right_default for k, v in left.items()}
        for k, v in right.items():
            out[k] = left.get(k, left_default) + v
        return Resources._make(out, left_default + right_default)

    def sub(self, other: Resources) -> Resources:
        # ``_combine`` with a minus that keeps an infinite left side infinite.
        left, right = self._values, other._values
        left_default, right_default = self.default, other.default
        out = {}
        for k, v in left.items():
            out[k] = INFINITY if v == INFINITY else v - right.get(k, right_default)
        for k, v in right.items():
            if k not in left:
                out[k] = INFINITY if left_default == INFINITY else left_default - v
        default = INFINITY if left_default == INFINITY else left_default - right_default
        return Resources._make(out, default)

    def multi(self, ratio: float) -> Resources:
        return Resources({k: v * ratio for k, v in self._values.items()}, self.default * ratio)

    def min_dimension(self, cap: Resources) -> Resources:
        """Per-name minimum with ``cap``; names missing in ``cap`` take its default."""
        keys = set(self._values) | set(cap._values) | set(_BASE)
        return Resources({k: min(self.get(k), cap.get(k)) for k in keys}, self.default)

    def max_dimension(self, other: Resources) -> Resources:
        keys = set(self._values) | set(other._values)
        return Resources({k: max(self.get(k), other.get(k)) for k in keys}, self.default)

    def exceeded_part(self, other: Resources) -> Resources:
        """Volcano ExceededPart: the positive part of self - other."""
        keys = set(self._values) | set(other._values)
        return Resources({k: max(self.get(k) - other.get(k), 0.0) for k in keys})

    def clamp_non_negative(self) -> Resources:
        return Resources({k: max(v, 0.0) for k, v in self._values.items()}, self.default)

    def sub_clamped(self, other: Resources) -> Resources:
        """``self.sub(other).clamp_non_negative()``; ``self`` itself (vectors are immutable)
        when ``other`` is empty and nothing here is negative, as on most nodes when a session
        opens (what other schedulers' pods use)."""
        if not other._values and other.default == 0 and min(self._values.values(), default=0) >= 0:
            return self
        return self.sub(other).clamp_non_negative()

    # comparisons ----------------------------------------------------------------------------
    def less_equal(self, other: Resources, missing: float | None = None) -> bool:
        """Volcano LessEqual; ``missing`` overrides ``other``'s default for absent scalars.

        Hot path of every fit check, hence the flat loop: ``left - right >= MIN_RESOURCE`` is
        Volcano's ``!(l < r || |l - r| < minResource)`` (and lets inf - inf pass); ``gpu``
        takes the finer ``GPU_TOLERANCE``, tested only when the difference is positive.
        """
        values, right_values = self._values, other._values
        absent = other.default if missing is None else missing
        for name in _BASE:
            if (
                name not in values
                and self.default - right_values.get(name, other.default) >= MIN_RESOURCE
            ):
                return False
        for name, left in values.items():
            right = right_values.get(name)
            if right is None:
                right = other.default if name in _BASE else absent
            excess = left - right
            if excess >= MIN_RESOURCE or (excess >= GPU_TOLERANCE and name == GPU):
                return False
        return True

    def less_equal_with_dimension(self, other: Resources, req: Resources) -> bool:
        """Volcano LessEqualWithDimension: compare only the names ``req`` asks for."""
        for name, value in req._values.items():
            if value <= 0:
                continue
            if not le_named(name, self.get(name), other.get(name)):
                return False
        return True

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Resources):
            return NotImplemented
        if self._values == other._values:
            return self.default == other.default
        keys = set(self._values) | set(other._values)
        return self.default == other.default and all(self.get(k) == other.get(k) for k in keys)

    def __hash__(self) -> int:
        # Requests key several memo tables and are looked up once per placement: hash once.
        # A name stated at the default equals the name left out (``__eq__``), so it must not
        # change the hash either: ``Resources({})`` and ``Resources({"gpu": 0})`` are one key.
        if self._hash is None:
            default, values = self.default, self._values
            if default in values.values():  # rare: most vectors state no name at the default
                stated = sorted((k, v) for k, v in values.items() if v != default)
            else:
                stated = sorted(values.items())
            self._hash = hash((tuple(stated), default))
        return self._hash

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v:g}" for k, v in sorted(self._values.items()))
        return f"Resources({inner})"


def exact_gpu(res: Resources) -> Resources:
    """``res`` with its ``gpu`` snapped to whole milli-GPU: sums of shares (0.1 + 0.2 + ...)
    drift by an ulp, and binpack's "does it still fit" (used + request > capacity) must see
    2.0, not 2.0000000000000004, as Volcano's integer milli values do."""
    value = res._values.get(GPU)
    if value is None or value == INFINITY:
        return res
    snapped = round(value * MILLI_PER_GPU) / MILLI_PER_GPU
    if snapped == value:
        return res
    values = dict(res._values)
    values[GPU] = snapped
    return Resources._make(values, res.default)


def total(items: Iterable[Resources]) -> Resources:
    acc = Resources()
    for item in items:
        acc = acc.add(item)
    return acc


EMPTY = Resources()


def add_into(acc: dict[str, float], vector: Resources, sign: int = 1) -> None:
    """``acc += sign * vector`` on a plain dict: summing many vectors this way builds one dict
    instead of one vector per term (values are whole numbers, so the sums are exact)."""
    for name, value in vector.explicit_items():
        acc[name] = acc.get(name, 0.0) + sign * value
