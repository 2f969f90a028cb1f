"""jobspec.affinity: the required node affinity and own-pod anti-affinity a template may
carry are kept; what the scheduler cannot honour is an error naming the field (pure)."""

import copy

import pytest

from jobspec.podtemplate import pod_template_parse

REQ = "requiredDuringSchedulingIgnoredDuringExecution"
PREF = "preferredDuringSchedulingIgnoredDuringExecution"
NODE_AFFINITY = {
    "nodeAffinity": {
        REQ: {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "gpu-model", "operator": "In", "values": ["H100", "A100"]},
                        {"key": "maintenance", "operator": "DoesNotExist"},
                        {"key": "nvlink-gen", "operator": "Gt", "values": ["2"]},
                    ]
                },
                {"matchExpressions": [{"key": "pool", "operator": "NotIn", "values": ["spot"]}]},
            ]
        }
    }
}
ANTI = {
    "podAntiAffinity": {
        REQ: [
            {
                "labelSelector": {"matchLabels": {"app": "ddp"}},
                "topologyKey": "kubernetes.io/hostname",
            }
        ]
    }
}


def _template(affinity):
    return {"metadata": {"labels": {"app": "ddp"}},
            "spec": {"containers": [{"name": "t", "image": "x"}], "affinity": affinity}}  # fmt: skip


def _parse(affinity):
    return pod_template_parse(_template(affinity), allow_host_path=False)


def test_required_node_affinity_and_own_pod_anti_affinity_are_kept():
    parsed = _parse(NODE_AFFINITY | ANTI)
    assert parsed.errors == {}
    assert parsed.template["spec"]["affinity"] == NODE_AFFINITY | ANTI


def test_an_empty_affinity_leaves_none_in_the_template():
    parsed = _parse({})
    assert parsed.errors == {}
    assert "affinity" not in parsed.template["spec"]


A = "spec.affinity"
NA = f"{A}.nodeAffinity.{REQ}.nodeSelectorTerms[0]"
PA = f"{A}.podAntiAffinity.{REQ}[0]"
BAD = [
    # (affinity, the path named, a piece of the message)
    ({"nodeAffinity": {PREF: []}}, f"{A}.nodeAffinity.{PREF}", "preferred terms"),
    ({"podAntiAffinity": {PREF: []}}, f"{A}.podAntiAffinity.{PREF}", "preferred terms"),
    ({"podAffinity": {REQ: []}}, f"{A}.podAffinity", "anti-affinity"),
    ({"nodeAffinity": {REQ: {"nodeSelectorTerms": [{"matchFields": []}]}}}, f"{NA}.matchFields",
     "not supported"),
    ({"nodeAffinity": {REQ: {"nodeSelectorTerms": []}}}, f"{A}.nodeAffinity.{REQ}.nodeSelectorTerms",
     "at least one term"),
    ({"nodeAffinity": {REQ: {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "gpu", "operator": "Near", "values": ["a"]}]}]}}}, f"{NA}.matchExpressions[0].operator",
     "Gt, Lt"),
    ({"nodeAffinity": {REQ: {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "gen", "operator": "Gt", "values": ["two"]}]}]}}}, f"{NA}.matchExpressions[0].values",
     "one integer"),
    ({"nodeAffinity": {REQ: {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "gen", "operator": "In"}]}]}}}, f"{NA}.matchExpressions[0].values", "at least one value"),
    ({"nodeAffinity": {REQ: {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "gen", "operator": "Exists", "values": ["1"]}]}]}}}, f"{NA}.matchExpressions[0].values",
     "takes no values"),
    ({"podAntiAffinity": {REQ: [{"labelSelector": {"matchLabels": {"app": "ddp"}},
                                  "topologyKey": "topology.kubernetes.io/zone"}]}}, f"{PA}.topologyKey",
     "kubernetes.io/hostname"),
    ({"podAntiAffinity": {REQ: [{"topologyKey": "kubernetes.io/hostname"}]}}, f"{PA}.labelSelector",
     "required"),
    ({"podAntiAffinity": {REQ: [{"labelSelector": {"matchLabels": {"app": "ddp"}}, "namespaces": ["x"],
                                  "topologyKey": "kubernetes.io/hostname"}]}}, f"{PA}.namespaces",
     "own pods"),
    ({"podAntiAffinity": {REQ: [{"labelSelector": {"matchExpressions": [
        {"key": "app", "operator": "Gt", "values": ["1"]}]}, "topologyKey": "kubernetes.io/hostname"}]}},
     f"{PA}.labelSelector.matchExpressions[0].operator", "Exists, DoesNotExist"),
    ("hostname", A, "mapping"),
]  # fmt: skip


@pytest.mark.parametrize(("affinity", "path", "message"), BAD)
def test_what_the_scheduler_cannot_honour_is_an_error_naming_the_field(affinity, path, message):
    errors = _parse(copy.deepcopy(affinity)).errors
    assert path in errors, errors
    assert any(message in text for text in errors[path]), errors[path]
