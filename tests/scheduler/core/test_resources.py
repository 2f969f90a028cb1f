import math

import pytest

from scheduler.core.resources import Resources, canonical_name


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        pytest.param("gpu", "gpu", id="plain"),
        pytest.param("nvidia.com/gpu", "gpu", id="nvidia"),
        pytest.param("mars-tech.com/gpu", "gpu", id="vendor"),
        pytest.param("nvidia.com/A100", "nvidia.com/A100", id="model-is-not-folded"),
        pytest.param("cpu", "cpu", id="cpu"),
    ],
)
def test_gpu_names_fold_into_one_dimension(name, expected):
    assert canonical_name(name) == expected


@pytest.mark.parametrize(
    ("left", "right", "missing", "expected"),
    [
        pytest.param({"cpu": 1000}, {"cpu": 1000}, None, True, id="equal"),
        pytest.param({"cpu": 1000.05}, {"cpu": 1000}, None, True, id="within-tolerance"),
        pytest.param({"cpu": 1001}, {"cpu": 1000}, None, False, id="over"),
        pytest.param({"gpu": 1}, {"cpu": 1000}, None, False, id="missing-scalar-is-zero"),
        pytest.param({"gpu": 1}, {"cpu": 1000}, math.inf, True, id="missing-scalar-infinite"),
    ],
)
def test_less_equal_follows_volcano(left, right, missing, expected):
    assert Resources(left).less_equal(Resources(right), missing=missing) is expected


def test_a_cap_leaves_unnamed_resources_unlimited():
    cap = Resources.unlimited({"gpu": 4})
    assert Resources({"gpu": 4, "cpu": 10**9}).less_equal(cap)
    assert not Resources({"gpu": 5}).less_equal(cap)


def test_less_equal_with_dimension_checks_only_requested_names():
    used = Resources({"cpu": 5000, "memory": 100})
    deserved = Resources({"cpu": 1000, "memory": 1000})
    assert used.less_equal_with_dimension(deserved, Resources({"memory": 1}))
    assert not used.less_equal_with_dimension(deserved, Resources({"cpu": 1}))


def test_arithmetic_returns_new_values():
    a = Resources({"cpu": 1000, "gpu": 2})
    b = a.add(Resources({"gpu": 1}))
    assert a.get("gpu") == 2
    assert b.get("gpu") == 3
    assert b.sub(Resources({"cpu": 1000})).get("cpu") == 0


def test_the_pod_slot_alone_is_best_effort():
    assert Resources({"pods": 1}).is_empty()
    assert not Resources({"pods": 1, "cpu": 1}).is_empty()
