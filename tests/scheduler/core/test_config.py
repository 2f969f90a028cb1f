import pytest

from scheduler.core.config import (
    ConfigError,
    default_conf,
    parse_conf,
    parse_conf_text,
)

TIERS = [{"plugins": [{"name": "gang"}]}]


def test_default_conf_is_the_seed_deployment():
    conf = default_conf()
    assert conf.actions == ("enqueue", "allocate", "backfill", "preempt", "reclaim")
    assert [[p.name for p in tier] for tier in conf.tiers] == [
        ["priority", "gang", "conformance", "cdp"],
        ["proportion", "binpack", "network-topology-aware", "rescheduling"],
    ]


def test_conf_text_parses_volcano_format():
    conf = parse_conf_text(
        'actions: "enqueue, allocate"\n'
        "tiers:\n- plugins:\n  - name: gang\n    enableJobReady: false\n"
        "configurations:\n- name: preempt\n  arguments: {enableTopologyAwarePreemption: true}\n"
    )
    assert conf.actions == ("enqueue", "allocate")
    assert conf.tiers[0][0].enabled("enableJobReady") is False
    assert conf.tiers[0][0].enabled("enableJobOrder") is True
    assert conf.tiers[0][0].enabled("enableHierarchy") is False
    assert conf.action_arguments("preempt") == {"enableTopologyAwarePreemption": True}


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        pytest.param(
            {"actions": 3, "tiers": TIERS}, "config.actions", "expected a string", id="actions-type"
        ),
        pytest.param(
            {"actions": "allocate, shuffle", "tiers": TIERS},
            "config.actions",
            "unknown action 'shuffle'",
            id="unknown-action",
        ),
        pytest.param(
            {"actions": "allocate", "tiers": [{"plugins": [{"name": "sla"}]}]},
            "config.tiers[0].plugins[0].name",
            "unknown plugin 'sla'",
            id="unknown-plugin",
        ),
        pytest.param(
            {
                "actions": "allocate",
                "tiers": [{"plugins": [{"name": "gang", "enableJobReady": "yes"}]}],
            },
            "config.tiers[0].plugins[0].enableJobReady",
            "expected true or false",
            id="flag-type",
        ),
        pytest.param(
            {
                "actions": "allocate",
                "tiers": [
                    {"plugins": [{"name": "gang"}]},
                    {
                        "plugins": [
                            {"name": "drf"},
                            {"name": "gang"},
                            {"name": "binpack", "arguments": {"binpack.weight": "x"}},
                        ]
                    },
                ],
            },
            "config.tiers[1].plugins[2].arguments.binpack.weight",
            "expected a number, got 'x'",
            id="plugin-argument",
        ),
        pytest.param(
            {"actions": "allocate", "tiers": "gang"},
            "config.tiers",
            "expected a list",
            id="tiers-type",
        ),
    ],
)
def test_bad_conf_names_the_field(data, field, message):
    with pytest.raises(ConfigError) as info:
        parse_conf(data)
    assert info.value.field == field
    assert message in str(info.value)
