"""The node checks the kubelet itself enforces apply whatever the scheduler conf says.

A pod bound to a node whose labels miss its node selector or required node affinity, or whose
NoSchedule/NoExecute taints it does not tolerate, is rejected by the kubelet on a real cluster.
Resources and the pod count are checked by the core's actions in any case; the rest is the
`predicates` plugin's. So when the active conf has no predicates plugin, or disables its
predicate, the adapter adds it (enabled) to the conf the cycle runs.

Upstream Volcano checks only what the conf asks for. The core keeps that semantics (so
`python -m scheduler scenario` still runs a conf exactly as written); only the portal's cycle
adds the plugin. The scheduler config editor says so (portal.scheduling.services).
"""

from __future__ import annotations

import dataclasses

from scheduler.adapters.portal_port import conf_lacks_predicates
from scheduler.core.config import PluginOption, SchedulerConf
from scheduler.core.plugins.predicates import PLUGIN_NAME

ENABLE_PREDICATE = "enablePredicate"


def conf_with_hard_feasibility(conf: SchedulerConf) -> SchedulerConf:
    """`conf` itself when its predicates plugin is there and enabled; otherwise a copy with it
    enabled where it was, or added to the last tier (where Volcano's default conf has it)."""
    if not conf_lacks_predicates(conf):
        return conf
    tiers = [list(tier) for tier in conf.tiers] or [[]]
    found = False
    for tier in tiers:
        for index, option in enumerate(tier):
            if option.name == PLUGIN_NAME:
                flags = {k: v for k, v in option.flags.items() if k != ENABLE_PREDICATE}
                tier[index] = dataclasses.replace(option, flags=flags)
                found = True
    if not found:
        tiers[-1].append(PluginOption(PLUGIN_NAME))
    return dataclasses.replace(conf, tiers=tuple(tuple(tier) for tier in tiers))
