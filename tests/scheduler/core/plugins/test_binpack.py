import pytest

from scheduler.core.config import ConfigError
from scheduler.core.plugins import binpack
from scheduler.core.plugins.binpack import resource_binpacking_score


@pytest.mark.parametrize(
    ("requested", "capacity", "used", "weight", "expected"),
    [
        pytest.param(1, 8, 0, 20, 20 * 1 / 8, id="empty-node"),
        pytest.param(1, 8, 7, 20, 20.0, id="fills-node"),
        pytest.param(2, 8, 7, 20, None, id="does-not-fit"),
        pytest.param(1, 0, 0, 20, 0.0, id="no-capacity"),
        pytest.param(1, 8, 0, 0, 0.0, id="zero-weight"),
    ],
)
def test_resource_score_matches_volcano(requested, capacity, used, weight, expected):
    assert resource_binpacking_score(requested, capacity, used, weight) == expected


def test_vendor_gpu_name_weight_applies_to_gpu_dimension():
    plugin = binpack.build(
        {"binpack.resources": "mars-tech.com/gpu", "binpack.resources.mars-tech.com/gpu": 20}
    )
    assert plugin.resource_weights["gpu"] == 20


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        pytest.param({"binpack.weight": "x"}, "binpack.weight", id="weight"),
        pytest.param({"binpack.cpu": -1}, "binpack.cpu", id="negative"),
        pytest.param({"binpack.resources.gpu": 3}, "binpack.resources.gpu", id="unlisted"),
    ],
)
def test_bad_arguments_are_rejected(arguments, field):
    with pytest.raises(ConfigError) as info:
        binpack.build(arguments)
    assert info.value.field == field
