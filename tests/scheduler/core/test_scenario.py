import pytest

from scheduler.core.scenario import ScenarioError, load_scenario


def _base(**overrides):
    data = {
        "config": {"actions": "allocate", "tiers": [{"plugins": [{"name": "gang"}]}]},
        "nodes": [{"name": "n1", "allocatable": {"cpu": 1000, "nvidia.com/gpu": 8}}],
        "queues": [{"name": "q"}],
        "jobs": [{"name": "j", "queue": "q", "tasks": [{"name": "t", "requests": {"gpu": 1}}]}],
    }
    data.update(overrides)
    return data


def test_defaults_follow_volcano():
    snapshot, conf = load_scenario(_base())
    job = snapshot.jobs[0]
    assert (job.priority, job.min_available, job.tasks[0].priority) == (0, None, 1)
    assert snapshot.nodes[0].allocatable.get("gpu") == 8
    assert snapshot.queues[0].capability.get("gpu") == float("inf")


def test_queue_usage_is_read_in_resource_seconds():
    snapshot, _ = load_scenario(
        _base(queues=[{"name": "q", "usage": [{"at": -3600, "nvidia.com/gpu": 7200}]}])
    )
    (record,) = snapshot.queues[0].usage
    assert (record.at, record.used.get("gpu")) == (-3600, 7200)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        pytest.param(
            {
                "jobs": [
                    {"name": "j", "queue": "q", "tasks": [{"name": "t", "requests": {"gpu": -1}}]}
                ]
            },
            "jobs[0].tasks[0].requests.gpu",
            id="negative-request",
        ),
        pytest.param(
            {
                "jobs": [
                    {"name": "j", "queue": "q", "tasks": [{"name": "t", "requests": {"gpu": 1.5}}]}
                ]
            },
            "jobs[0].tasks[0].requests.gpu",
            id="whole-and-part-gpu",
        ),
        pytest.param(
            {"queues": [{"name": "q", "weight": 0}]}, "queues[0].weight", id="weight-range"
        ),
        pytest.param(
            {"nodes": [{"name": "n1", "taints": [{"key": "k", "effect": "Sometimes"}]}]},
            "nodes[0].taints[0].effect",
            id="taint-effect",
        ),
        pytest.param(
            {"jobs": [{"name": "j", "queue": "q", "tasks": [{"name": "t", "status": "Sleeping"}]}]},
            "jobs[0].tasks[0].status",
            id="status",
        ),
        pytest.param(
            {"config": {"actions": "allocate, dance", "tiers": []}}, "config.actions", id="config"
        ),
        pytest.param(
            {"nodes": [{"name": "n1"}, {"name": "n1"}]}, "nodes[1].name", id="duplicate-node"
        ),
        pytest.param(
            {"queues": [{"name": "q", "usage": [{"gpu": 3600}]}]},
            "queues[0].usage[0].at",
            id="usage-without-time",
        ),
        pytest.param(
            {"queues": [{"name": "q", "usage": [{"at": 0, "gpu": -1}]}]},
            "queues[0].usage[0].gpu",
            id="negative-usage",
        ),
    ],
)
def test_invalid_input_names_the_field(change, field):
    with pytest.raises(ScenarioError) as info:
        load_scenario(_base(**change))
    assert info.value.field == field
