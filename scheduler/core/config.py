"""Parser for Volcano's ``volcano-scheduler.conf`` (YAML text or the already-parsed dict).

Follows volcano-sh/volcano pkg/scheduler/conf/scheduler_conf.go and util.go (UnmarshalSchedulerConf):
``actions`` is a comma-separated string, ``tiers`` a list of ``{plugins: [...]}``, each plugin
``{name, arguments, enableXxx flags}``, and ``configurations`` per-action arguments. Unset enable
flags mean enabled, except ``enableHierarchy`` (off unless true), as in Volcano's ApplyPluginConfDefaults.
Every error names the offending field, e.g. ``tiers[1].plugins[2].arguments.binpack.weight``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

ENABLE_FLAGS = (
    "enableJobOrder",
    "enableTaskOrder",
    "enableJobReady",
    "enableJobPipelined",
    "enableJobEnqueued",
    "enableJobStarving",
    "enablePreemptable",
    "enableReclaimable",
    "enablePreemptive",
    "enableQueueOrder",
    "enabledOverused",
    "enabledAllocatable",
    "enablePredicate",
    "enableNodeOrder",
    "enableBestNode",
    "enableTargetJob",
    "enableReservedNodes",
    "enableVictim",
    "enableHierarchy",
    "enableNamespaceOrder",
    "enableClusterOrder",
    "enabledHyperNodeOrder",
    "enableSubJobOrder",
)
_FLAG_ALIASES = {"enableJobEnqueueable": "enableJobEnqueued"}
INT64_MAX = 2**63 - 1


class ConfigError(ValueError):
    """A malformed scheduler configuration; ``field`` names the offending path."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True, slots=True)
class PluginOption:
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    flags: dict[str, bool] = field(default_factory=dict)

    def enabled(self, flag: str) -> bool:
        value = self.flags.get(flag)
        if flag == "enableHierarchy":
            return value is True
        return value is not False


@dataclass(frozen=True, slots=True)
class SchedulerConf:
    actions: tuple[str, ...]
    tiers: tuple[tuple[PluginOption, ...], ...]
    configurations: dict[str, dict[str, Any]] = field(default_factory=dict)

    def action_arguments(self, action: str) -> dict[str, Any]:
        return self.configurations.get(action, {})

    def plugin(self, name: str) -> PluginOption | None:
        for tier in self.tiers:
            for option in tier:
                if option.name == name:
                    return option
        return None


DEFAULT_CONF_TEXT = """\
actions: "enqueue, allocate, backfill, preempt, reclaim"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
  - name: cdp
- plugins:
  - name: proportion
    enableHierarchy: true
    arguments:
      lendIdle: true
  - name: binpack
    arguments:
      binpack.weight: 10
      binpack.cpu: 2
      binpack.memory: 2
      binpack.resources: mars-tech.com/gpu
      binpack.resources.mars-tech.com/gpu: 20
  - name: network-topology-aware
    arguments:
      weight: 10
  - name: rescheduling
    arguments:
      interval: 5m
      loopGuards: true
      evictionBudgetWindow: 1h
"""


def parse_conf_text(text: str) -> SchedulerConf:
    """Parse the text of a volcano-scheduler.conf."""
    import yaml  # PyYAML is a parser, not a framework; imported lazily to keep core light.

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError("config_yaml", f"not valid YAML ({exc.__class__.__name__})") from exc
    except RecursionError as exc:
        raise ConfigError("config_yaml", "not valid YAML (nested too deeply)") from exc
    except (ValueError, OverflowError) as exc:
        # A scalar safe_load cannot convert, e.g. an integer past Python's digit limit.
        raise ConfigError("config_yaml", f"not valid YAML ({exc.__class__.__name__})") from exc
    return parse_conf(data)


def parse_conf(data: Any, path: str = "config") -> SchedulerConf:
    """Validate a conf given as plain data (the dict form the scenario files use)."""
    from scheduler.core.actions import ACTIONS
    from scheduler.core.plugins import PLUGINS

    if not isinstance(data, dict):
        raise ConfigError(path, f"expected a mapping, got {_kind(data)}")
    # key=str: YAML keys may be numbers or booleans, which do not sort against strings.
    unknown = sorted(set(data) - {"actions", "tiers", "configurations"}, key=str)
    if unknown:
        raise ConfigError(f"{_join(path, unknown[0])}", "unknown field")
    actions_raw = data.get("actions")
    if not isinstance(actions_raw, str):
        raise ConfigError(_join(path, "actions"), f"expected a string, got {_kind(actions_raw)}")
    actions = tuple(a.strip() for a in actions_raw.split(",") if a.strip())
    for action in actions:
        if action not in ACTIONS:
            known = ", ".join(sorted(ACTIONS))
            raise ConfigError(_join(path, "actions"), f"unknown action {action!r} (known: {known})")
    tiers_raw = data.get("tiers", [])
    if not isinstance(tiers_raw, list):
        raise ConfigError(_join(path, "tiers"), f"expected a list, got {_kind(tiers_raw)}")
    tiers = []
    for t_index, tier in enumerate(tiers_raw):
        t_path = f"{_join(path, 'tiers')}[{t_index}]"
        if not isinstance(tier, dict) or not isinstance(tier.get("plugins"), list):
            raise ConfigError(f"{t_path}.plugins", "expected a list of plugins")
        options = []
        for p_index, plugin in enumerate(tier["plugins"]):
            options.append(_parse_plugin(plugin, f"{t_path}.plugins[{p_index}]", PLUGINS))
        tiers.append(tuple(options))
    configurations: dict[str, dict[str, Any]] = {}
    raw_confs = data.get("configurations") or []
    if not isinstance(raw_confs, list):
        raise ConfigError(_join(path, "configurations"), f"expected a list, got {_kind(raw_confs)}")
    for c_index, entry in enumerate(raw_confs):
        c_path = f"{_join(path, 'configurations')}[{c_index}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise ConfigError(f"{c_path}.name", "expected an action name")
        arguments = entry.get("arguments") or {}
        if not isinstance(arguments, dict):
            raise ConfigError(f"{c_path}.arguments", f"expected a mapping, got {_kind(arguments)}")
        configurations[entry["name"]] = dict(arguments)
    return SchedulerConf(tuple(actions), tuple(tiers), configurations)


def _parse_plugin(plugin: Any, path: str, registry: dict[str, Any]) -> PluginOption:
    if not isinstance(plugin, dict):
        raise ConfigError(path, f"expected a mapping, got {_kind(plugin)}")
    name = plugin.get("name")
    if not isinstance(name, str):
        raise ConfigError(f"{path}.name", f"expected a string, got {_kind(name)}")
    if name not in registry:
        raise ConfigError(f"{path}.name", f"unknown plugin {name!r}")
    flags: dict[str, bool] = {}
    for key, value in plugin.items():
        if key in ("name", "arguments"):
            continue
        flag = _FLAG_ALIASES.get(key, key)
        if flag not in ENABLE_FLAGS:
            raise ConfigError(f"{path}.{key}", "unknown field")
        if value is None:
            continue
        if not isinstance(value, bool):
            raise ConfigError(f"{path}.{key}", f"expected true or false, got {_kind(value)}")
        flags[flag] = value
    arguments = plugin.get("arguments") or {}
    if not isinstance(arguments, dict):
        raise ConfigError(f"{path}.arguments", f"expected a mapping, got {_kind(arguments)}")
    try:
        registry[name].build(arguments)
    except ConfigError as exc:
        raise ConfigError(f"{path}.arguments.{exc.field}", exc.message) from exc
    except (TypeError, AttributeError, ValueError, OverflowError) as exc:
        # A plugin's build met a shape it does not expect (e.g. a numeric argument name):
        # still the user's conf at fault, so name the field rather than fail the request.
        odd_keys = [key for key in arguments if not isinstance(key, str)]
        if odd_keys:
            message = f"argument names must be strings, got {odd_keys[0]!r}"
        else:
            message = f"cannot be read ({exc})"
        raise ConfigError(f"{path}.arguments", message) from exc
    return PluginOption(name, dict(arguments), flags)


def default_conf() -> SchedulerConf:
    return parse_conf_text(DEFAULT_CONF_TEXT)


# argument helpers shared by plugins --------------------------------------------------------
def number_arg(arguments: dict[str, Any], key: str, default: float) -> float:
    value = arguments.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        raise ConfigError(key, f"expected a number, got {value!r}")
    return value


def bool_arg(arguments: dict[str, Any], key: str, default: bool) -> bool:
    """A true/false plugin argument; anything else is an error naming the key."""
    value = arguments.get(key, default)
    if not isinstance(value, bool):
        raise ConfigError(key, f"expected true or false, got {value!r}")
    return value


def int_arg(arguments: dict[str, Any], key: str, default: int) -> int:
    value = number_arg(arguments, key, default)
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(key, f"expected an integer, got {value!r}")
    if value != int(value):
        raise ConfigError(key, f"expected an integer, got {value!r}")
    if not -INT64_MAX - 1 <= value <= INT64_MAX:
        # Volcano reads these into Go ints; beyond 64 bits scoring arithmetic overflows.
        raise ConfigError(key, f"expected a 64-bit integer, got {value!r}")
    return int(value)


def str_arg(arguments: dict[str, Any], key: str, default: str) -> str:
    value = arguments.get(key, default)
    if not isinstance(value, str):
        raise ConfigError(key, f"expected a string, got {value!r}")
    return value


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _kind(value: Any) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, str):
        return repr(value)
    return type(value).__name__
