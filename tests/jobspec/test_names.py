"""Kubernetes' rules for names, keys and values (apimachinery's validation, the kubelet's image
reference grammar), as the portal applies them before the API server would."""

from __future__ import annotations

import pytest

from jobspec.names import (
    annotation_key_error,
    annotations_size_error,
    env_name_error,
    image_error,
    int64_error,
    label_key_error,
    label_value_error,
    nul_paths,
    object_name_error,
)


@pytest.mark.parametrize(
    "image",
    [
        "trainer:1",
        "ghcr.io/example/trainer:latest",
        "nvcr.io/nvidia/pytorch:24.05-py3",
        "localhost:5000/team/a_b__c-d:v1",
        "registry.example.org:443/x/y@sha256:" + "a" * 64,
        "[::1]:5000/img",
    ],
)
def test_image_references_the_kubelet_pulls_are_accepted(image):
    assert image_error(image) is None


@pytest.mark.parametrize(
    "image",
    ["", "trainer 1", "trainer:1\n", " trainer", "Trainer:1", "a//b", "x:" + "t" * 129,
     "a" * 256, "ghcr.io/x:tag@sha256:short"],
)  # fmt: skip
def test_image_references_the_kubelet_refuses_are_refused(image):
    assert image_error(image) is not None


@pytest.mark.parametrize(
    ("key", "ok"),
    [("team", True), ("app.kubernetes.io/name", True), ("a" * 63, True), ("a" * 64, False),
     ("bad key!", False), ("/x", False), ("a/b/c", False), ("-x", False), ("Ex.COM/x", False),
     ("example.com/" + "a" * 63, True), ("x" * 254 + "/a", False)],
)  # fmt: skip
def test_label_keys(key, ok):
    assert (label_key_error(key) is None) is ok


def test_annotation_keys_are_label_keys_in_any_case():
    assert annotation_key_error("Example.COM/Key") is None
    assert annotation_key_error("bad key") is not None


@pytest.mark.parametrize(
    ("value", "ok"),
    [("", True), ("v1.2_x-y", True), ("a b", False), ("-a", False), ("a" * 64, False)],
)
def test_label_values(value, ok):
    assert (label_value_error(value) is None) is ok


def test_annotations_hold_at_most_256_kib():
    assert annotations_size_error({"a": "x" * (256 * 1024 - 1)}) is None
    assert "256 KiB" in annotations_size_error({"a": "x" * (256 * 1024)})


@pytest.mark.parametrize(
    ("name", "ok"),
    [("EPOCHS", True), ("my.env-name", True), ("_x", True), ("A=B", False), ("", False),
     ("1X", False), (".", False), ("..", False), ("..x", False), ("a b", False)],
)  # fmt: skip
def test_environment_variable_names(name, ok):
    assert (env_name_error(name) is None) is ok


@pytest.mark.parametrize(
    ("name", "ok"),
    [("hf-token", True), ("a.b", True), ("a..b", False), ("A", False), ("a" * 254, False)],
)
def test_object_names(name, ok):
    assert (object_name_error(name) is None) is ok


def test_64_bit_integers():
    assert int64_error(2**63 - 1) is None
    assert int64_error(-(2**63)) is None
    assert int64_error(2**63) is not None


def test_nul_is_found_in_keys_and_values_under_the_root_named():
    data = [{"pod_template": {"spec": {"containers": [{"image": "x\x00"}]}, "k\x00": 1}}]
    assert nul_paths(data, "tasks") == [
        "tasks[0].pod_template.k\\0",
        "tasks[0].pod_template.spec.containers[0].image",
    ]
