"""Fractional GPUs: the units and the one cost rule every part of the portal counts with.

A pod asks for whole GPUs (`JobTask.gpus`, the device plugin's resource), or for part of ONE
device: `gpu_milli` (thousandths of its compute, 250 = a quarter) and/or `gpu_memory_mib`
(MiB of its memory). Never both: a fraction is a share of a single device (Volcano's
deviceshare and HAMi place a shared request on one card per `vgpu-number`, and the portal asks
for one).

Quotas, usage and accounting count milli-GPU (1000 = one card) exactly. A memory request
costs ceil(memory / device memory x 1000) milli-GPU of the device it lands on; the share of
compute and the share of memory are both held, so a request with both costs the larger.

Pure functions, no Django, so the scheduler adapters and the CLI-facing parsers share them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

MILLI_PER_GPU = 1000

# GPU_SHARING values (portal/settings/base.py).
SHARING_NONE = "none"
SHARING_VOLCANO = "volcano"
SHARING_HAMI = "hami"
SHARING_STACKS = (SHARING_NONE, SHARING_VOLCANO, SHARING_HAMI)


def milli_cost(*, gpus: int, gpu_milli: int, gpu_memory_mib: int, device_memory_mib: int) -> int:
    """Milli-GPU one pod holds on a device of `device_memory_mib` (0: unknown, then a memory
    request costs a whole card, the most it could)."""
    if gpus:
        return gpus * MILLI_PER_GPU
    memory_milli = 0
    if gpu_memory_mib:
        if device_memory_mib <= 0:
            memory_milli = MILLI_PER_GPU
        else:
            memory_milli = min(
                MILLI_PER_GPU, math.ceil(gpu_memory_mib * MILLI_PER_GPU / device_memory_mib)
            )
    return max(gpu_milli, memory_milli)


def is_shared(task: Any) -> bool:
    """Whether a task (a JobTask or a row with its GPU fields) asks for part of a device."""
    return bool(getattr(task, "gpu_milli", 0) or getattr(task, "gpu_memory_mib", 0))


@dataclass(frozen=True, slots=True)
class GpuAsk:
    """What a job, or one of its pods, asks of GPUs, as every page, the API and the CLI show
    it: `milli` as the scheduler counts it before placement (a GPU-memory request at its cost
    on a card of `device_mib`, the cycle's rule), and the GPU memory asked for in all."""

    milli: int
    memory_mib: int = 0
    device_mib: int = 0

    @property
    def number(self) -> int | float:
        """As JSON: 4, or 0.25."""
        return gpus_number(self.milli)

    @property
    def text(self) -> str:
        """ "4", "0.25", or "0.25 (10 GiB GPU memory)": a memory request says what it asked."""
        amount = gpus_text(self.milli)
        if not self.memory_mib:
            return amount
        return f"{amount} ({mib_text(self.memory_mib)} GPU memory)"

    @property
    def note(self) -> str:
        """How a GPU-memory request is counted until placed ("" without one)."""
        if not self.memory_mib:
            return ""
        if not self.device_mib:
            return "no GPU in the cluster reports its memory: GPU memory counts as whole GPUs"
        return (
            f"GPU memory counts as its share of a {mib_text(self.device_mib)} GPU, the "
            "smallest in the cluster, until a pod is placed on a GPU of its own"
        )

    def __str__(self) -> str:
        return self.text


def gpu_ask(tasks: Iterable[Any], device_mib: int) -> GpuAsk:
    """The GPUs `tasks` (JobTasks, or rows with their GPU fields and `replicas`) ask for in all,
    each pod costed as the cycle costs it before placement (milli_cost on a card of
    `device_mib`: portal.scheduling.mapping.device_memory_mib)."""
    milli = memory = 0
    for task in tasks:
        pod = pod_gpu_ask(task, device_mib)
        milli += task.replicas * pod.milli
        memory += task.replicas * pod.memory_mib
    return GpuAsk(milli=milli, memory_mib=memory, device_mib=device_mib)


def pod_gpu_ask(task: Any, device_mib: int) -> GpuAsk:
    """What one pod of `task` asks of GPUs (gpu_ask of a single replica)."""
    milli = milli_cost(
        gpus=int(task.gpus or 0),
        gpu_milli=int(task.gpu_milli or 0),
        gpu_memory_mib=int(task.gpu_memory_mib or 0),
        device_memory_mib=device_mib,
    )
    return GpuAsk(milli=milli, memory_mib=int(task.gpu_memory_mib or 0), device_mib=device_mib)


def milli_asked(task: Any) -> int:
    """Milli-GPU per pod that is known before placement: whole GPUs and a compute share.
    A memory-only request's cost depends on the device it gets (0 until then)."""
    return int(task.gpus or 0) * MILLI_PER_GPU + int(getattr(task, "gpu_milli", 0) or 0)


def gpus_decimal(value: Any) -> Decimal | None:
    """`value` as an exact decimal number of GPUs (2, 0.25, "0.5"), or None if it is not a
    finite number. A float is read by its shortest repr (0.1 is 0.1, not 0.1000000000000000055)."""
    if isinstance(value, bool):
        return None
    try:
        number = Decimal(repr(value)) if isinstance(value, float) else Decimal(str(value))
    except (InvalidOperation, ValueError):
        return None
    return number if number.is_finite() else None


def gpus_split(number: Decimal) -> tuple[int, int]:
    """A number of GPUs as (whole GPUs, milli-GPU of one device): 2 -> (2, 0), 0.25 -> (0, 250).
    Callers check first that it is whole or below one (`jobspec.limits.gpus_number_error`)."""
    if number == number.to_integral_value():
        return int(number), 0
    return 0, int(number * MILLI_PER_GPU)


def gpus_text(milli: int | float) -> str:
    """Milli-GPU as pages show GPUs: 8000 -> "8", 250 -> "0.25", 1500 -> "1.5"."""
    text = f"{Decimal(int(round(milli))) / MILLI_PER_GPU:f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def gpus_number(milli: int | float) -> int | float:
    """Milli-GPU as a JSON number of GPUs: an int when whole (8), else a float (0.25)."""
    milli = int(round(milli))
    if milli % MILLI_PER_GPU == 0:
        return milli // MILLI_PER_GPU
    return milli / MILLI_PER_GPU


SAMPLE_GPUS_MAX = float(2**31 - 1)  # what the samples' integer columns held before shares


def gpus_sample(value: float) -> float:
    """GPUs for a usage sample: shares of a card exact to the milli-GPU (3 decimals), never
    negative, saturating (inf and NaN never reach a row)."""
    if math.isnan(value):
        return 0.0
    return round(min(max(0.0, value), SAMPLE_GPUS_MAX), 3)


def request_text(*, gpus: int, gpu_milli: int, gpu_memory_mib: int) -> str:
    """One pod's GPU request in words: "2 GPUs", "0.25 GPU", "10 GiB GPU memory",
    "0.25 GPU + 10 GiB GPU memory", "no GPU"."""
    if gpus:
        return f"{gpus} GPU" + ("s" if gpus != 1 else "")
    parts = []
    if gpu_milli:
        parts.append(f"{gpus_text(gpu_milli)} GPU")
    if gpu_memory_mib:
        parts.append(f"{mib_text(gpu_memory_mib)} GPU memory")
    return " + ".join(parts) or "no GPU"


def held_text(milli: int, devices: list[int] | tuple[int, ...]) -> str:
    """What a pod holds, for pages: "2 on GPUs 0, 1", "0.25 of GPU 3", "1" (cards unknown)."""
    amount = gpus_text(milli)
    if not devices:
        return amount
    cards = ", ".join(str(index) for index in devices)
    if milli < MILLI_PER_GPU:
        return f"{amount} of GPU {cards}"
    return f"{amount} on GPU{'s' if len(devices) > 1 else ''} {cards}"


def mib_text(mib: int) -> str:
    if mib % 1024 == 0:
        return f"{mib // 1024} GiB"
    if mib >= 1024:
        return f"{mib / 1024:.1f} GiB"
    return f"{mib} MiB"


# Shared-GPU resource names in a pod (a share of one device per container), as Volcano's
# deviceshare vGPU names them (volcano pkg/scheduler/api/devices/config/vgpu.go) and HAMi
# (charts/hami/values.yaml: resourceMem, resourceMemPercentage, resourceCores; HAMi's count is
# nvidia.com/gpu itself). Memory in MiB; cores and memory percentage in percent of one device.
VGPU_NUMBER = "volcano.sh/vgpu-number"
GPU_MEMORY_NAMES = ("volcano.sh/vgpu-memory", "nvidia.com/gpumem")
GPU_MEMORY_PERCENT_NAMES = ("volcano.sh/vgpu-memory-percentage", "nvidia.com/gpumem-percentage")
GPU_CORES_NAMES = ("volcano.sh/vgpu-cores", "nvidia.com/gpucores")
SHARE_NAMES = (*GPU_MEMORY_NAMES, *GPU_MEMORY_PERCENT_NAMES, *GPU_CORES_NAMES)
GPU_SHARE_ON_MANY = (
    "{count} GPUs with a share of each ({names}): a share is of one device; ask for 1 GPU "
    "with a share, or for {count} whole GPUs without one"
)
PERCENT_ABOVE_100 = "at most 100 (percent of one GPU)"


def is_gpu_count_name(name: str) -> bool:
    """A resource that counts GPU devices: the device plugin's */gpu or Volcano's vGPU count."""
    return name.endswith("/gpu") or name == VGPU_NUMBER


def share_from_resources(
    gpus: int, amounts: dict[str, Decimal]
) -> tuple[tuple[int, int, int], str | None]:
    """(gpus, gpu_milli, gpu_memory_mib) of one container from its device count and its share
    resources (`amounts`: name -> quantity, the SHARE_NAMES it states), and a refusal or None.

    No share: `gpus` whole devices (HAMi and Volcano give a count alone whole memory). A share
    without a count is one device (their default vGPU number); percent of cores or of memory
    -> thousandths (25 -> 250, the larger of the two); all of one device and no MiB -> 1 GPU.
    """
    if not amounts:
        return (gpus, 0, 0), None
    error = None
    if gpus > 1:
        names = ", ".join(sorted(amounts))
        error = GPU_SHARE_ON_MANY.format(count=gpus, names=names)
    percent = max(
        (amount for name, amount in amounts.items() if name not in GPU_MEMORY_NAMES),
        default=Decimal(0),
    )
    milli = math.ceil(percent * 10)
    memory = max(
        (math.ceil(amount) for name, amount in amounts.items() if name in GPU_MEMORY_NAMES),
        default=0,
    )
    if milli >= MILLI_PER_GPU and not memory:
        return (1, 0, 0), error
    return (0, milli, memory), error


# Keys of a node's used_by_others that hold other workloads' use of one card, by its UUID
# (scheduler.adapters.cluster.gpushare.held_cards reads it from their pods): percent of its
# cores and MiB of its memory, summed over the pods there.
CARD_CORES = "gpu-card-cores/"
CARD_MIB = "gpu-card-mib/"


def others_on_cards(
    used_by_others: dict[str, int], uuids: list[str], device_memory_mib: int
) -> tuple[dict[int, tuple[int, int]], int]:
    """What other workloads hold on each card: ({card index: (milli-GPU, MiB)} for the cards
    `uuids` registers, the milli-GPU held on every card named, registered or not). A card's
    milli-GPU is the larger of its cores and its memory's share of the card, the cost rule
    above, over the sums of the pods there."""
    index_of = {uuid: index for index, uuid in enumerate(uuids)}
    held: dict[int, tuple[int, int]] = {}
    total = 0
    for key, cores in sorted(used_by_others.items()):
        if not key.startswith(CARD_CORES):
            continue
        uuid = key.removeprefix(CARD_CORES)
        memory = used_by_others.get(CARD_MIB + uuid, 0)
        milli = cores * MILLI_PER_GPU // 100
        if device_memory_mib > 0:
            milli = max(milli, math.ceil(memory * MILLI_PER_GPU / device_memory_mib))
        total += milli
        if uuid in index_of:
            held[index_of[uuid]] = (milli, memory)
    return held, total


def others_gpu_milli(
    used_by_others: dict[str, int],
    gpu_resource_name: str,
    uuids: list[str],
    device_memory_mib: int,
) -> tuple[dict[int, tuple[int, int]], int]:
    """What other workloads hold of a node's GPUs: per registered card (others_on_cards), and
    in all in milli-GPU: their whole GPUs of unnamed cards and their shares of named ones. The
    one rule the scheduler's snapshot and the nodes page count others by."""
    on_cards, shares = others_on_cards(used_by_others, uuids, device_memory_mib)
    return on_cards, used_by_others.get(gpu_resource_name, 0) * MILLI_PER_GPU + shares
