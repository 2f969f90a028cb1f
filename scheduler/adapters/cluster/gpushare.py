"""Shared GPUs on Kubernetes: what a pod with a share of one card asks for, the device
assignment the sharing stack's device plugin reads, and the cards a node registers.

Pure functions (no I/O). Whole GPUs keep the device plugin's resource (`nvidia.com/gpu`); a
share of a card goes through the cluster's sharing stack (settings.GPU_SHARING):

- volcano: Volcano's deviceshare vGPU (volcano pkg/scheduler/api/devices/nvidia/vgpu:
  type.go, device_info.go `Allocate`, utils.go `encodePodDevices`/`decodeNodeDevices`;
  names in pkg/scheduler/api/devices/config/vgpu.go). The pod asks for
  `volcano.sh/vgpu-number: 1` with `volcano.sh/vgpu-memory` (MiB) and `volcano.sh/vgpu-cores`
  (percent); the scheduler writes `volcano.sh/vgpu-ids-new` and
  `volcano.sh/devices-to-allocate` ("UUID,NVIDIA,<MiB>,<cores>:" per container, containers
  joined by ";"), `volcano.sh/vgpu-node`, `volcano.sh/vgpu-time`, `volcano.sh/bind-phase:
  allocating` and `volcano.sh/bind-time`; the vgpu device plugin allocates from them and sets
  the container's environment (CUDA_DEVICE_MEMORY_LIMIT_*, CUDA_DEVICE_SM_LIMIT, the visible
  device). Nodes register their cards in `volcano.sh/node-vgpu-register`
  ("UUID,count,MiB,type,health,mode:" per card).
- hami: HAMi (Project-HAMi/HAMi pkg/device/nvidia/device.go: `RegisterAnnos`,
  `InitNvidiaDevice`, `PatchAnnotations`; pkg/device/devices.go `EncodePodSingleDevice`,
  `UnMarshalNodeDevices`; pkg/util/types.go). The pod asks for `nvidia.com/gpu: 1` (a vGPU)
  with `nvidia.com/gpumem` (MiB) and `nvidia.com/gpucores` (percent); the scheduler writes
  `hami.io/vgpu-devices-to-allocate` and `hami.io/vgpu-devices-allocated` (the same
  "UUID,NVIDIA,<MiB>,<cores>:" per container, each container ended by ";"),
  `hami.io/vgpu-node`, `hami.io/vgpu-time`, `hami.io/bind-phase: allocating` and
  `hami.io/bind-time`. Nodes register their cards in `hami.io/node-nvidia-register` (JSON
  list of {id, index, count, devmem, devcore, type, health, mode}; older releases wrote the
  colon form). HAMi inflates allocatable `nvidia.com/gpu` (cards x split count), so the card
  count comes from the registration, never from allocatable.

The portal picks the card itself (the core's device books), as Volcano's and HAMi's
schedulers do in their Filter/Bind: it is the scheduler of its pods.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

from jobspec.gpushare import MILLI_PER_GPU, SHARING_HAMI, SHARING_VOLCANO, VGPU_NUMBER

VOLCANO_VGPU_MEMORY = "volcano.sh/vgpu-memory"
VOLCANO_VGPU_CORES = "volcano.sh/vgpu-cores"
VOLCANO_NODE_REGISTER = "volcano.sh/node-vgpu-register"
HAMI_GPU = "nvidia.com/gpu"
HAMI_GPU_MEMORY = "nvidia.com/gpumem"
HAMI_GPU_CORES = "nvidia.com/gpucores"
HAMI_NODE_REGISTER = "hami.io/node-nvidia-register"
DEVICE_TYPE = "NVIDIA"  # the vendor word both stacks write in a pod's device list

_POD_ANNOTATIONS = {
    SHARING_VOLCANO: {
        "ids": ("volcano.sh/vgpu-ids-new", "volcano.sh/devices-to-allocate"),
        "node": "volcano.sh/vgpu-node",
        "time": "volcano.sh/vgpu-time",
        "phase": "volcano.sh/bind-phase",
        "bind_time": "volcano.sh/bind-time",
    },
    SHARING_HAMI: {
        "ids": ("hami.io/vgpu-devices-to-allocate", "hami.io/vgpu-devices-allocated"),
        "node": "hami.io/vgpu-node",
        "time": "hami.io/vgpu-time",
        "phase": "hami.io/bind-phase",
        "bind_time": "hami.io/bind-time",
    },
}
_RESOURCES = {
    SHARING_VOLCANO: (VGPU_NUMBER, VOLCANO_VGPU_MEMORY, VOLCANO_VGPU_CORES),
    SHARING_HAMI: (HAMI_GPU, HAMI_GPU_MEMORY, HAMI_GPU_CORES),
}
REGISTER_ANNOTATION = {SHARING_VOLCANO: VOLCANO_NODE_REGISTER, SHARING_HAMI: HAMI_NODE_REGISTER}


@dataclass(frozen=True, slots=True)
class ShareSize:
    """A share of one card as the sharing stacks count it: MiB of memory, percent of cores."""

    memory_mib: int
    cores_percent: int


def share_size(*, gpu_milli: int, gpu_memory_mib: int, device_memory_mib: int) -> ShareSize:
    """The memory and cores a share holds on a card of `device_memory_mib`: what it asked for,
    and at least its fraction of each (a compute share without a memory figure would get the
    whole card's memory from both stacks, their default, and keep others off the card)."""
    memory = max(gpu_memory_mib, device_memory_mib * gpu_milli // MILLI_PER_GPU)
    if device_memory_mib:
        memory = min(memory, device_memory_mib)
    cores = max(1, math.ceil(gpu_milli / 10)) if gpu_milli else 0
    if not cores and device_memory_mib:
        cores = max(1, math.ceil(100 * memory / device_memory_mib))
    return ShareSize(memory_mib=memory, cores_percent=min(cores, 100))


def share_resources(stack: str, size: ShareSize) -> dict[str, int]:
    """The container resources of a share under `stack` (one vGPU of the card)."""
    count, memory, cores = _RESOURCES[stack]
    return {count: 1, memory: size.memory_mib, cores: size.cores_percent}


def share_annotations(
    stack: str, *, node: str, device_uuid: str, size: ShareSize, now: int
) -> dict[str, str]:
    """The device assignment of a one-container pod on card `device_uuid` of `node`, as the
    stack's scheduler writes it for its device plugin (`now`: seconds since 1970)."""
    names = _POD_ANNOTATIONS[stack]
    device = f"{device_uuid},{DEVICE_TYPE},{size.memory_mib},{size.cores_percent}:"
    # Volcano joins containers with ";"; HAMi ends each container with it.
    ids = device if stack == SHARING_VOLCANO else f"{device};"
    annotations = dict.fromkeys(names["ids"], ids)
    annotations[names["node"]] = node
    annotations[names["time"]] = str(now)
    annotations[names["phase"]] = "allocating"
    annotations[names["bind_time"]] = str(now)
    return annotations


# Where a pod another scheduler placed says which cards it holds and how much of each: HAMi's
# scheduler and Volcano's deviceshare write "UUID,NVIDIA,<MiB>,<cores>:" per device, ";"
# between containers. The first present wins: what was allocated, then what is to be.
HELD_CARDS_ANNOTATIONS = (
    "hami.io/vgpu-devices-allocated",
    "hami.io/vgpu-devices-to-allocate",
    "volcano.sh/vgpu-ids-new",
    "volcano.sh/devices-to-allocate",
)


def vgpu_count_name(annotations: dict[str, str] | None) -> str:
    """The resource that counts the vGPUs (not cards) of a pod whose device assignment names
    its cards: its cards say what it holds instead. "" for a pod without one."""
    key, _text = _assignment(annotations)
    return {"hami.io": HAMI_GPU, "volcano.sh": VGPU_NUMBER}.get(key.split("/")[0], "")


def _assignment(annotations: dict[str, str] | None) -> tuple[str, str]:
    # An emptied list (";") is what HAMi's device plugin leaves once it has allocated.
    for key in HELD_CARDS_ANNOTATIONS:
        value = (annotations or {}).get(key, "")
        if value.strip(";: "):
            return key, value
    return "", ""


def held_cards(annotations: dict[str, str] | None) -> dict[str, tuple[int, int]]:
    """card UUID -> (percent of cores, MiB) a pod's device annotations say it holds; {} when
    it has none or they cannot be read (its GPU count then counts, cards unknown)."""
    _key, text = _assignment(annotations)
    held: dict[str, tuple[int, int]] = {}
    for device in text.replace(";", ":").split(":"):
        items = [item.strip() for item in device.split(",")]
        if len(items) < 4 or not items[0]:
            continue
        try:
            memory, cores = int(items[2]), int(items[3])
        except ValueError:
            return {}
        if memory < 0 or cores < 0:
            return {}
        old = held.get(items[0], (0, 0))
        held[items[0]] = (old[0] + cores, old[1] + memory)
    return held


@dataclass(frozen=True, slots=True)
class RegisteredCard:
    uuid: str
    index: int
    memory_mib: int
    model: str
    healthy: bool


def registered_cards(stack: str, annotations: dict[str, str]) -> list[RegisteredCard] | None:
    """The cards a node registered with `stack` (by index), or None when it registered none
    or the annotation cannot be read (the node then counts as it did without sharing)."""
    text = annotations.get(REGISTER_ANNOTATION.get(stack, ""), "")
    if not text:
        return None
    try:
        cards = _json_cards(text) if text.lstrip().startswith("[") else _colon_cards(stack, text)
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
    return sorted(cards, key=lambda card: card.index) or None


def _json_cards(text: str) -> list[RegisteredCard]:
    # HAMi's MarshalNodeDevices: omitempty drops index 0 and health false.
    return [
        RegisteredCard(
            uuid=str(item["id"]),
            index=int(item.get("index", position)),
            memory_mib=int(item.get("devmem", 0)),
            model=str(item.get("type", "")),
            healthy=bool(item.get("health", False)),
        )
        for position, item in enumerate(json.loads(text))
    ]


def _colon_cards(stack: str, text: str) -> list[RegisteredCard]:
    """Volcano: "UUID,count,MiB,type,health,mode:"; HAMi before JSON:
    "UUID,count,MiB,cores,type,numa,health[,index,mode]:"."""
    cards = []
    for position, entry in enumerate(part for part in text.split(":") if "," in part):
        items = entry.split(",")
        if stack == SHARING_VOLCANO:
            uuid, memory, model, health, index = items[0], items[2], items[3], items[4], position
        else:
            uuid, memory, model, health = items[0], items[2], items[4], items[6]
            index = int(items[7]) if len(items) >= 9 else position
        cards.append(
            RegisteredCard(
                uuid=uuid,
                index=int(index),
                memory_mib=int(memory),
                model=model,
                healthy=health.strip().lower() == "true",
            )
        )
    return cards


def template_with_share(template: dict, stack: str, size: ShareSize) -> dict:
    """`template` with each container's share of a card in `stack`'s names and sizes (a
    manifest may spell it in the other stack's names; the cluster runs one of them)."""
    spec = template.get("spec") if isinstance(template, dict) else None
    if not isinstance(spec, dict):
        return template
    containers = []
    for container in spec.get("containers") or []:
        resources = container.get("resources") or {}
        stated = {
            name
            for section in ("limits", "requests")
            for name in (resources.get(section) or {})
            if name in _SHARE_NAMES_ALL or name == HAMI_GPU
        }
        if not stated & _SHARE_NAMES_ALL - {HAMI_GPU}:
            containers.append(container)
            continue
        kept = {
            section: {
                name: amount
                for name, amount in (resources.get(section) or {}).items()
                if name not in stated
            }
            for section in ("limits", "requests")
        }
        kept["limits"].update({k: str(v) for k, v in share_resources(stack, size).items()})
        containers.append({**container, "resources": {k: v for k, v in kept.items() if v}})
    return {**template, "spec": {**spec, "containers": containers}}


_SHARE_NAMES_ALL = frozenset(
    {VGPU_NUMBER, VOLCANO_VGPU_MEMORY, VOLCANO_VGPU_CORES, HAMI_GPU_MEMORY, HAMI_GPU_CORES,
     "volcano.sh/vgpu-memory-percentage", "nvidia.com/gpumem-percentage", HAMI_GPU}
)  # fmt: skip
