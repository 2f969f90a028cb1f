"""Hostile scheduler confs: any text gives a SchedulerConf or a ConfigError naming a field.

The admin config editor and the API pass user text straight to `parse_conf_text`; any other
exception there is a 500. Three sources of input: arbitrary text, valid YAML of random
shape, and valid confs with one part replaced, deleted or added (the likely typos).
"""

import math

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from scheduler.core.config import (
    DEFAULT_CONF_TEXT,
    ConfigError,
    SchedulerConf,
    parse_conf,
    parse_conf_text,
)
from tests.nested import copy_at, paths

FUZZ = settings(
    database=None,
    derandomize=True,
    deadline=None,
    max_examples=100,
    suppress_health_check=[HealthCheck.too_slow],
)

# Words the parser and its plugins look for, so random data often reaches deep branches.
WORDS = [
    "actions",
    "tiers",
    "plugins",
    "name",
    "arguments",
    "configurations",
    "enableJobReady",
    "enableHierarchy",
    "enableJobEnqueueable",
    "priority",
    "gang",
    "binpack",
    "proportion",
    "rescheduling",
    "network-topology-aware",
    "nodeorder",
    "overcommit",
    "binpack.weight",
    "binpack.resources",
    "binpack.resources.nvidia.com/gpu",
    "overcommit-factor",
    "topology-keys",
    "interval",
    "strategies",
    "lowNodeUtilization",
    "thresholds",
    "enqueue, allocate",
    "5m",
    "nan",
    "inf",
    "1e400",
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(WORDS),
)
keys = st.one_of(st.sampled_from(WORDS), st.text(max_size=8), st.integers(), st.booleans())
plain_data = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(keys, children, max_size=4)
    ),
    max_leaves=16,
)

DEFAULT_DATA = yaml.safe_load(DEFAULT_CONF_TEXT)


DEFAULT_PATHS = list(paths(DEFAULT_DATA))


def _assert_names_field(error: ConfigError) -> None:
    assert error.field, error
    assert error.field == "config_yaml" or error.field.split(".")[0].split("[")[0] == "config"
    assert str(error) == f"{error.field}: {error.message}"
    assert error.message


def _parse_or_config_error(text: str) -> SchedulerConf | None:
    try:
        conf = parse_conf_text(text)
    except ConfigError as error:
        _assert_names_field(error)
        return None
    assert isinstance(conf, SchedulerConf)
    return conf


@FUZZ
@given(st.text(max_size=400))
@example("")
@example("actions: [")
@example("actions: " + "[" * 1000 + "]" * 1000)
@example("actions: " + "9" * 5000)
@example("a: !!python/object/apply:os.system ['true']")
@example("actions: allocate\n---\nactions: enqueue\n")
@example("\x00")
def test_any_text_parses_or_names_a_field(text):
    _parse_or_config_error(text)


@FUZZ
@given(plain_data)
@example({1: "x", "b": 2})
@example(
    {"actions": "allocate", "tiers": [{"plugins": [{"name": "binpack", "arguments": {1: 2}}]}]}
)
def test_any_yaml_shape_parses_or_names_a_field(data):
    _parse_or_config_error(yaml.safe_dump(data))


MUTATIONS = ("replace", "delete", "add")


@FUZZ
@given(
    st.sampled_from(DEFAULT_PATHS),
    st.sampled_from(MUTATIONS),
    plain_data,
    keys,
)
@example(("tiers", 1, "plugins", 1, "arguments", "binpack.weight"), "replace", math.nan, "x")
@example(("tiers", 1, "plugins", 1, "arguments", "binpack.cpu"), "replace", "inf", "x")
@example(("tiers", 1, "plugins", 1, "arguments", "binpack.memory"), "replace", 10**400, "x")
@example(("tiers", 1, "plugins", 1, "arguments"), "add", 2, 1)
def test_mutated_valid_conf_parses_or_names_a_field(path, mutation, value, key):
    data, parent = copy_at(DEFAULT_DATA, path)
    target = path[-1]
    if mutation == "replace":
        parent[target] = value
    elif mutation == "delete":
        del parent[target]
    elif isinstance(parent[target], dict):
        parent[target][key] = value
    elif isinstance(parent[target], list):
        parent[target].append(value)
    else:
        parent[target] = [parent[target], value]
    conf = _parse_or_config_error(yaml.safe_dump(data))
    if conf is not None:
        # The same data given as a dict (the scenario files' form) means the same conf.
        assert parse_conf(data) == conf


@pytest.mark.parametrize(
    ("text", "field", "words"),
    [
        # Past the recursion limit of PyYAML's composer (about 330 levels, fewer under a deep stack).
        pytest.param("actions: " + "[" * 1000, "config_yaml", "YAML", id="deep-unclosed"),
        pytest.param(
            "actions: " + "[" * 1000 + "]" * 1000, "config_yaml", "nested", id="deep-closed"
        ),
        pytest.param("actions: " + "9" * 5000, "config_yaml", "YAML", id="huge-int"),
        pytest.param(
            "actions: allocate\n1: x\nb: 2\n", "config.1", "unknown field", id="numeric-key"
        ),
        pytest.param(
            "actions: allocate\ntiers:\n- plugins:\n  - name: binpack\n    arguments: {1: 2}\n",
            "config.tiers[0].plugins[0].arguments",
            "strings",
            id="numeric-argument-name",
        ),
        pytest.param(
            "actions: allocate\ntiers:\n- plugins:\n  - name: binpack\n"
            "    arguments: {binpack.weight: .nan}\n",
            "config.tiers[0].plugins[0].arguments.binpack.weight",
            "integer",
            id="nan-weight",
        ),
        pytest.param(
            "actions: allocate\ntiers:\n- plugins:\n  - name: nodeorder\n"
            "    arguments: {leastrequested.weight: '1e400'}\n",
            "config.tiers[0].plugins[0].arguments.leastrequested.weight",
            "integer",
            id="infinite-weight-string",
        ),
        pytest.param(
            "actions: allocate\ntiers:\n- plugins:\n  - name: binpack\n"
            f"    arguments: {{binpack.weight: {10**30}}}\n",
            "config.tiers[0].plugins[0].arguments.binpack.weight",
            "64-bit",
            id="weight-beyond-int64",
        ),
    ],
)
def test_hostile_confs_found_by_fuzzing_name_their_field(text, field, words):
    with pytest.raises(ConfigError) as info:
        parse_conf_text(text)
    assert info.value.field == field
    assert words in info.value.message


def test_weights_within_int64_still_parse():
    conf = parse_conf_text(
        "actions: allocate\ntiers:\n- plugins:\n  - name: binpack\n"
        f"    arguments: {{binpack.weight: {2**63 - 1}, binpack.cpu: '3'}}\n"
    )
    assert conf.plugin("binpack").arguments == {"binpack.weight": 2**63 - 1, "binpack.cpu": "3"}
