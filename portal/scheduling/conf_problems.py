"""Every problem in a volcano-scheduler.conf, each with where it is, for the config editor.

The core's parser (scheduler.core.config) stops at the first problem and, for YAML it cannot
read, names only the exception class. An editor should point at the line and list everything
to fix in one go, so:

* YAML the parser cannot read: the line, the column and PyYAML's own words (a syntax error
  stops the YAML parser, so there is one such problem at most);
* readable YAML: the core's parser runs on each part separately (every top-level key, every
  action, every plugin, every per-action configuration), and each problem it reports keeps
  the core's field path and gains the line it is on.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from scheduler.core.config import ConfigError, parse_conf

ROOT = "config"
TOP_LEVEL = ("actions", "tiers", "configurations")


def conf_problems(text: str) -> list[str]:
    """Messages like "line 7: tiers[1].plugins[0].name: unknown plugin 'binpak'"; [] if the
    conf is valid."""
    try:
        data = yaml.safe_load(text)
        tree = yaml.compose(text)
    except yaml.MarkedYAMLError as error:
        return [_yaml_problem(error)]
    except yaml.YAMLError as error:
        return [f"not valid YAML: {error}"]
    except RecursionError:
        return ["not valid YAML: nested too deeply"]
    except (ValueError, OverflowError) as error:
        return [f"not valid YAML: a value cannot be read ({error})"]
    try:
        parse_conf(data, ROOT)
    except ConfigError as whole:
        errors = _part_errors(data) or [whole]
    else:
        return []
    located = sorted((_located(tree, error) for error in errors), key=lambda found: found[0])
    return [message for _, message in located]


def _yaml_problem(error: yaml.MarkedYAMLError) -> str:
    mark = error.problem_mark or error.context_mark
    words = error.problem or "not valid YAML"
    if error.context:
        context = error.context
        if error.context_mark is not None and error.context_mark is not mark:
            context += f" (line {error.context_mark.line + 1})"
        words = f"{words}, {context}"
    if mark is None:
        return f"not valid YAML: {words}"
    return f"line {mark.line + 1}, column {mark.column + 1}: not valid YAML: {words}"


def _part_errors(data: Any) -> list[ConfigError]:
    """The core's verdict on each part of the conf on its own."""
    if not isinstance(data, dict):
        return [_error_of(data)]
    errors = [ConfigError(f"{ROOT}.{key}", "unknown field") for key in data if key not in TOP_LEVEL]
    actions = data.get("actions")
    if isinstance(actions, str):
        for action in (a.strip() for a in actions.split(",")):
            if action:
                errors += _errors_of({"actions": action})
    else:
        errors += _errors_of({"actions": actions})
    tiers = data.get("tiers", [])
    if not isinstance(tiers, list):
        errors += _errors_of({"actions": "", "tiers": tiers})
    for t_index, tier in enumerate(tiers if isinstance(tiers, list) else []):
        if not isinstance(tier, dict) or not isinstance(tier.get("plugins"), list):
            errors += _moved(_errors_of({"actions": "", "tiers": [tier]}), "tiers", 0, t_index)
            continue
        for p_index, plugin in enumerate(tier["plugins"]):
            found = _errors_of({"actions": "", "tiers": [{"plugins": [plugin]}]})
            found = _moved(found, "tiers", 0, t_index)
            errors += _moved(found, f"tiers[{t_index}].plugins", 0, p_index)
    configurations = data.get("configurations") or []
    if not isinstance(configurations, list):
        errors += _errors_of({"actions": "", "configurations": configurations})
    for c_index, entry in enumerate(configurations if isinstance(configurations, list) else []):
        found = _errors_of({"actions": "", "configurations": [entry]})
        errors += _moved(found, "configurations", 0, c_index)
    return errors


def _error_of(data: Any) -> ConfigError:
    try:
        parse_conf(data, ROOT)
    except ConfigError as error:
        return error
    raise AssertionError("parse_conf accepted a conf it refused as a whole")  # pragma: no cover


def _errors_of(part: dict[str, Any]) -> list[ConfigError]:
    try:
        parse_conf(part, ROOT)
    except ConfigError as error:
        return [error]
    return []


def _moved(errors: list[ConfigError], list_path: str, old: int, new: int) -> list[ConfigError]:
    """Re-index a part checked on its own to where it sits in the whole conf."""
    before, after = f"{ROOT}.{list_path}[{old}]", f"{ROOT}.{list_path}[{new}]"
    return [
        ConfigError(after + error.field[len(before) :], error.message)
        if error.field.startswith(before)
        else error
        for error in errors
    ]


def _located(tree: yaml.Node | None, error: ConfigError) -> tuple[int, str]:
    """(line, message): the message starts with the line when the path is in the text."""
    path = error.field[len(ROOT) + 1 :] if error.field.startswith(f"{ROOT}.") else error.field
    node = _node_at(tree, path) if path and path != ROOT else tree
    shown = path if path and path != ROOT else "the configuration"
    if node is None:
        return 0, f"{shown}: {error.message}"
    line = node.start_mark.line + 1
    return line, f"line {line}: {shown}: {error.message}"


INDEX = re.compile(r"\[(\d+)\]")


def _node_at(node: yaml.Node | None, path: str) -> yaml.Node | None:
    """The YAML node a core field path names (keys may hold dots: `binpack.weight`); the
    deepest node found on the way when the path runs past the document."""
    while path and node is not None:
        if path.startswith("["):
            match = INDEX.match(path)
            if match is None or not isinstance(node, yaml.SequenceNode):
                return node
            index = int(match.group(1))
            if index >= len(node.value):
                return node
            node, path = node.value[index], path[match.end() :].removeprefix(".")
            continue
        if not isinstance(node, yaml.MappingNode):
            return node
        found = None
        for key, value in sorted(node.value, key=lambda pair: -len(str(pair[0].value))):
            name = str(key.value)
            rest = path[len(name) :]
            if path.startswith(name) and (not rest or rest[0] in ".["):
                found = (key, value, rest.removeprefix("."))
                break
        if found is None:
            return node
        key, value, path = found
        node = value if path else key
    return node
