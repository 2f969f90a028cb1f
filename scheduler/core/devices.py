"""GPU devices: which cards of a node a pod gets, whole or a share of one.

A node's ``gpu`` resource says how many cards are free in sum; this ledger says which. Whole
cards go only to devices nothing holds; a share (milli-GPU, and/or GPU memory) goes to one
device with that much left. Volcano keeps the same per-device books in its deviceshare plugin
(pkg/scheduler/api/devices/nvidia/gpushare and vgpu: ``GPUDevice.UsedMem``/``UsedCore``),
outside the node's resource vectors; here they sit beside ``Node.idle`` and change with it
(statement allocate, pipeline, evict and their undo).

Two books per device, in milli-GPU and bytes: ``now`` (what occupying pods hold, releasing ones
included: they have not left yet) and ``future`` (what stays once releasing pods leave, plus
what pipelined pods were promised): Volcano's Idle and FutureIdle, per device. Allocating needs
room ``now`` and pipelining room in ``future``, exactly as the node's vectors are checked, so
with whole cards only the device books always agree with the GPU counts (and are not asked).

Departure from Volcano: upstream's gpushare picks the first device with enough memory; here
a share goes to the device it fills most (then the lowest index), so shares pack onto cards
already shared and whole cards stay whole. Whole-card pods take the lowest free indices, as
the NVIDIA device plugin does by default.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.core.resources import GPU, MILLI_PER_GPU, gpu_milli
from scheduler.core.types import GpuDevice, NodeInfo

FULL = MILLI_PER_GPU


@dataclass(frozen=True, slots=True)
class GpuNeed:
    """What one pod asks of a node's devices: ``whole`` cards, or one card's ``milli`` share
    with ``memory`` bytes of it. ``invalid`` says why no device can ever hold it."""

    whole: int = 0
    milli: int = 0
    memory: int = 0
    invalid: str = ""

    @property
    def shared(self) -> bool:
        return self.whole == 0


def gpu_need(gpu: float, memory: int) -> GpuNeed | None:
    """The device request of a pod asking ``gpu`` cards and ``memory`` bytes of GPU memory;
    None when it asks for no GPU."""
    if gpu <= 0 and memory <= 0:
        return None
    milli = gpu_milli(gpu)
    if memory <= 0 and milli % FULL == 0:
        return GpuNeed(whole=milli // FULL)
    if milli > FULL:
        return GpuNeed(invalid=f"{gpu:g} GPUs is neither whole cards nor a share of one card")
    # A memory request's cost is in ``gpu`` already (the snapshot's edge works it out from
    # the device memory); one without a cost still takes a milli-GPU of its card.
    return GpuNeed(milli=max(milli, 1), memory=max(memory, 0))


def node_devices(
    info: NodeInfo, by_count: dict[int, tuple[GpuDevice, ...]] | None = None
) -> tuple[GpuDevice, ...]:
    """The node's cards: as listed, or ``allocatable``'s whole GPU count numbered from 0
    (``by_count``: those tuples already made, shared by the nodes with that count)."""
    if info.gpus:
        return tuple(sorted(info.gpus, key=lambda d: d.index))
    count = int(info.allocatable.get(GPU) + 1e-9)
    found = by_count.get(count) if by_count is not None else None
    if found is None:
        found = tuple(GpuDevice(i) for i in range(count))
        if by_count is not None:
            by_count[count] = found
    return found


# What a ledger derives from its cards alone: (position by index, memories, kinds)
LedgerLayout = tuple[dict[int, int], tuple[int, ...], tuple[object, ...]]


def ledger_layout(devices: tuple[GpuDevice, ...]) -> LedgerLayout:
    memories = tuple(device.memory for device in devices)
    models = tuple(device.model for device in devices)
    # what the cards are, whatever holds them: () for cards of unknown model and memory
    kinds: tuple[object, ...] = (memories, models) if any(memories) or any(models) else ()
    return {device.index: i for i, device in enumerate(devices)}, memories, kinds


class DeviceLedger:
    """Per-device milli-GPU and memory held on one node (positions follow ``devices``)."""

    __slots__ = (
        "devices",
        "position",
        "now",
        "future",
        "mem_now",
        "mem_future",
        "kinds",
        "memories_all",
        "_key",
        "_partly",
    )

    def __init__(self, devices: tuple[GpuDevice, ...], layout: LedgerLayout | None = None):
        """``layout``: ``ledger_layout(devices)``, shared read-only by nodes with the same
        cards (a session opens thousands of ledgers over a few kinds of node)."""
        self.devices = devices
        self.position, self.memories_all, self.kinds = layout or ledger_layout(devices)
        count = len(devices)
        self.now = [0] * count
        self.future = [0] * count
        self.mem_now = [0] * count
        self.mem_future = [0] * count
        self._key: tuple[object, ...] | None = None
        self._partly = 0  # cards partly held now or later, kept by _apply (none held yet)

    # questions ----------------------------------------------------------------------------
    def largest_share(self, future_only: bool) -> float:
        """The most any one card has free, in cards (0.75): what a share of a card can get
        here. ``future_only``: once releasing pods leave."""
        held = self.future if future_only else self.now
        return max((FULL - value for value in held), default=0) / FULL

    def shared(self) -> bool:
        """Some card is partly held (now or later): GPU counts alone no longer tell fits."""
        return self._partly > 0

    def key(self) -> tuple[object, ...]:
        """What tells this node's cards apart from another's for any pod: their memories and
        models (() when unknown) while no card is shared, else every card's books, sorted, so
        nodes in equal states compare equal (node classes, score memos)."""
        if self._key is None:
            if not self.shared():
                self._key = self.kinds
            else:
                books = zip(
                    self.now,
                    self.future,
                    self.mem_now,
                    self.mem_future,
                    self.memories_all,
                    strict=True,
                )
                self._key = (self.kinds, tuple(sorted(books)))
        return self._key

    def pick(self, need: GpuNeed, future_only: bool) -> tuple[int, ...] | None:
        """Device indices for ``need`` (None: no fit). ``future_only``: room once releasing
        pods leave (pipelining); otherwise room now (allocating)."""
        if need.invalid:
            return None
        held = self.future if future_only else self.now
        count = len(held)
        if not need.shared:
            free = [i for i in range(count) if held[i] == 0]
            if len(free) < need.whole:
                return None
            return tuple(self.devices[i].index for i in free[: need.whole])
        best, best_left = -1, FULL + 1
        milli, memory = need.milli, need.memory
        mem_held = self.mem_future if future_only else self.mem_now
        for i in range(count):
            left = FULL - held[i] - milli
            if left < 0 or left >= best_left:
                continue
            if memory and mem_held[i] + memory > self.devices[i].memory:
                continue
            best, best_left = i, left
        return None if best < 0 else (self.devices[best].index,)

    def fits(self, need: GpuNeed, future_only: bool) -> bool:
        return self.pick(need, future_only) is not None

    # changes ----------------------------------------------------------------------------------
    def _apply(
        self, need: GpuNeed, indices: tuple[int, ...], sign: int, now: bool, future: bool
    ) -> None:
        milli = FULL if not need.shared else need.milli
        memory = need.memory if need.shared else 0
        held_now, held_future = self.now, self.future
        for index in indices:
            i = self.position.get(index)
            if i is None:
                continue  # a device the node no longer lists: nothing to book
            was = 0 < held_now[i] < FULL or 0 < held_future[i] < FULL
            if now:
                held_now[i] += sign * milli
                self.mem_now[i] += sign * memory
            if future:
                held_future[i] += sign * milli
                self.mem_future[i] += sign * memory
            self._partly += (0 < held_now[i] < FULL or 0 < held_future[i] < FULL) - was
        self._key = None

    def hold(self, need: GpuNeed, indices: tuple[int, ...], sign: int = 1) -> None:
        """An occupying pod (allocated or running) on ``indices``; sign -1 takes it back."""
        self._apply(need, indices, sign, True, True)

    def promise(self, need: GpuNeed, indices: tuple[int, ...], sign: int = 1) -> None:
        """A pipelined pod: held once the releasing pods leave."""
        self._apply(need, indices, sign, False, True)

    def release(self, need: GpuNeed, indices: tuple[int, ...], sign: int = 1) -> None:
        """An occupying pod starts leaving: still held now, free later."""
        self._apply(need, indices, -sign, False, True)


def devices_fit(need: GpuNeed | None, ledger: DeviceLedger | None, future_only: bool) -> bool:
    """Whether a pod's device request fits a node whose resource vectors already fit it.

    Whole cards on a node where no card is shared fit exactly when the GPU count does (the
    caller's vector check): the usual case answers without looking at the cards."""
    if need is None:
        return True
    if ledger is None:
        return False
    if not need.shared and not need.invalid and not ledger.shared():
        return True
    return ledger.pick(need, future_only) is not None
