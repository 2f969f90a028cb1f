"""fairshare: queues (and tenants) that used less than their share lately go first.

Not an upstream Volcano plugin. The idea is Slurm's fair-share factor (usage decayed by
``PriorityDecayHalfLife``, compared with the configured shares; slurm.schedmd.com
priority_multifactor) and Kueue's admission fair sharing (usage with a half-life,
``usageHalfLifeTime``; kubernetes-sigs/kueue pkg/cache/scheduler fair sharing).

Each queue's past use comes in the snapshot (``QueueInfo.usage``, resource-seconds per period,
the portal reads it from its usage rollups), so the core stays pure. A period ``age`` seconds
before ``snapshot.now`` counts ``0.5 ** (age / half-life)``; a parent queue's use is its own
plus its children's. Among the children of one parent (the top-level queues, the queues of one
tenant) a queue's usage ratio is its dominant share of their decayed use, divided by its share
of their weights. Queue order compares level by level from the top priority (higher first)
then the usage ratio (lower first): tenants before queues, and a queue that used much more
than its share borrows after one that did not. Equal ratios all the way down (no history)
leave the order to the next plugin (proportion's shares).

Arguments: ``fairshare.halfLifeHours`` (default 168, a week). Put the plugin in a tier before
``proportion`` to let it order queues; it changes no share, cap or eviction rule.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from scheduler.core.config import ConfigError, number_arg
from scheduler.core.plugins._tree import effective_parents, paths
from scheduler.core.resources import PODS
from scheduler.core.session import Session
from scheduler.core.state import Queue
from scheduler.core.types import UsageRecord

PLUGIN_NAME = "fairshare"
HALF_LIFE = "fairshare.halfLifeHours"
DEFAULT_HALF_LIFE_HOURS = 168


def build(arguments: dict[str, Any]) -> FairSharePlugin:
    hours = number_arg(arguments, HALF_LIFE, DEFAULT_HALF_LIFE_HOURS)
    if not math.isfinite(hours) or hours <= 0:
        raise ConfigError(HALF_LIFE, f"expected a number of hours above 0, got {hours!r}")
    return FairSharePlugin(hours * 3600.0)


def decayed(records: Iterable[UsageRecord], now: float, half_life: float) -> dict[str, float]:
    """Resource-seconds, each period weighted by 0.5 ** (age / half-life); future periods
    count in full."""
    total: dict[str, float] = {}
    for record in records:
        weight = 0.5 ** (max(now - record.at, 0.0) / half_life)
        for name, value in record.used.explicit_items():
            if name != PODS:
                total[name] = total.get(name, 0.0) + value * weight
    return total


class FairSharePlugin:
    name = PLUGIN_NAME

    def __init__(self, half_life_seconds: float):
        self.half_life = half_life_seconds

    def on_session_open(self, ssn: Session) -> None:
        infos = {name: queue.info for name, queue in ssn.queues.items()}
        parents = effective_parents(infos)
        self.paths = paths(parents)
        usage = {name: decayed(info.usage, ssn.now, self.half_life) for name, info in infos.items()}
        for name in sorted(infos, key=lambda n: (-len(self.paths[n]), n)):
            parent = parents[name]
            if parent is not None:
                into = usage[parent]
                for resource, value in usage[name].items():
                    into[resource] = into.get(resource, 0.0) + value
        siblings: dict[str | None, list[str]] = {}
        for name in sorted(infos):
            siblings.setdefault(parents[name], []).append(name)
        self.ratio: dict[str, float] = {}
        for group in siblings.values():
            weights = sum(infos[n].weight for n in group)
            totals: dict[str, float] = {}
            for name in group:
                for resource, value in usage[name].items():
                    totals[resource] = totals.get(resource, 0.0) + value
            for name in group:
                used = max(
                    (value / totals[r] for r, value in usage[name].items() if totals[r] > 0),
                    default=0.0,
                )
                entitled = infos[name].weight / weights if weights else 0.0
                self.ratio[name] = used / entitled if entitled else 0.0
        self.priority = {name: info.priority for name, info in infos.items()}
        # History is fixed for the session, so the order is a plain sort key.
        self._keys = {
            name: tuple((-self.priority[n], self.ratio[n]) for n in path)
            for name, path in self.paths.items()
        }
        ssn.add_queue_order_fn(self.name, self.queue_order, key=self.queue_key)

    def queue_key(self, queue: Queue) -> tuple[object, ...]:
        return self._keys[queue.name]

    def queue_order(self, left: Queue, right: Queue) -> int:
        """Level by level from the top: higher priority, then the lower ratio."""
        lkey, rkey = self._keys[left.name], self._keys[right.name]
        return -1 if lkey < rkey else (1 if lkey > rkey else 0)
