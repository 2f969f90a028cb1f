"""The config editor lists every problem of a conf, each with its line."""

import pytest
from django.core.exceptions import ValidationError

from portal.scheduling.conf_problems import conf_problems
from portal.scheduling.services import _validate_conf
from scheduler.core.config import DEFAULT_CONF_TEXT

BROKEN = """\
actions: "enqueue, alocate, backfil"
tiers:
- plugins:
  - name: priority
  - name: binpak
- plugins:
  - name: gang
    enableJobOrder: maybe
extra: 1
configurations:
- name: preempt
  arguments: 5
"""


def test_a_valid_conf_has_no_problems():
    assert conf_problems(DEFAULT_CONF_TEXT) == []


def test_yaml_errors_give_line_column_and_the_parsers_words():
    assert conf_problems("actions: [a\n") == [
        "line 2, column 1: not valid YAML: expected ',' or ']', but got '<stream end>', "
        "while parsing a flow sequence (line 1)"
    ]
    (tab,) = conf_problems("actions: a\n\tc: d\n")
    assert tab.startswith("line 2, column 1: not valid YAML: found character '\\t'")


def test_every_problem_is_listed_with_its_line_in_order():
    assert conf_problems(BROKEN) == [
        "line 1: actions: unknown action 'alocate' (known: allocate, backfill, enqueue, "
        "preempt, reclaim)",
        "line 1: actions: unknown action 'backfil' (known: allocate, backfill, enqueue, "
        "preempt, reclaim)",
        "line 5: tiers[0].plugins[1].name: unknown plugin 'binpak'",
        "line 8: tiers[1].plugins[0].enableJobOrder: expected true or false, got 'maybe'",
        "line 9: extra: unknown field",
        "line 12: configurations[0].arguments: expected a mapping, got int",
    ]


def test_plugin_arguments_with_dots_in_their_names_are_found():
    text = DEFAULT_CONF_TEXT.replace("binpack.weight: 10", "binpack.weight: ten")
    (problem,) = conf_problems(text)
    line = text.splitlines().index("      binpack.weight: ten") + 1
    assert problem.startswith(f"line {line}: tiers[1].plugins[1].arguments.binpack.weight")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("- a", "line 1: the configuration: expected a mapping, got list"),
        ("", "the configuration: expected a mapping, got nothing"),
        ("tiers: []", "line 1: actions: expected a string, got nothing"),
    ],
)
def test_the_shape_of_the_whole(text, problem):
    assert conf_problems(text) == [problem]


def test_the_service_refuses_with_every_problem_on_the_text_field():
    with pytest.raises(ValidationError) as info:
        _validate_conf(BROKEN)
    assert len(info.value.message_dict["text"]) == 6
