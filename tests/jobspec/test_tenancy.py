"""What a tenant's job may name, tolerate and set on the cluster: the portal's own objects
never, other tenants' objects never in a shared namespace, taints and priority classes by an
admin's lists, reserved annotations and labels not at all."""

from __future__ import annotations

import pytest

from jobspec.podsecurity import BASELINE, PRIVILEGED
from jobspec.tenancy import ReferenceScope, TenantPolicy, task_policy_errors

GPU = ("nvidia.com/gpu",)
SHARED = ReferenceScope(prefix="nlp-", others=("nlp-ops-",), namespace="gpu-jobs")
T = "tasks[0]."


def _template(**spec):
    return {"spec": {"containers": [{"name": "main", "image": "trainer:1"}], **spec}}


def _errors(template=None, asked=None, **policy):
    policy = TenantPolicy(tenant="nlp", gpu_resource_names=GPU, **policy)
    return task_policy_errors(template=template, tolerations=asked, policy=policy, prefix=T)


REFERENCES = [
    ({"volumes": [{"name": "k", "secret": {"secretName": "{}"}}]},
     "spec.volumes[0].secret.secretName"),
    ({"volumes": [{"name": "k", "configMap": {"name": "{}"}}]}, "spec.volumes[0].configMap.name"),
    ({"volumes": [{"name": "k", "persistentVolumeClaim": {"claimName": "{}"}}]},
     "spec.volumes[0].persistentVolumeClaim.claimName"),
    ({"imagePullSecrets": [{"name": "{}"}]}, "spec.imagePullSecrets[0].name"),
    ({"containers": [{"name": "m", "image": "x", "envFrom": [{"secretRef": {"name": "{}"}}]}]},
     "spec.containers[0].envFrom[0].secretRef.name"),
    ({"initContainers": [{"name": "m", "image": "x", "env": [
        {"name": "T", "valueFrom": {"configMapKeyRef": {"name": "{}", "key": "k"}}}]}]},
     "spec.initContainers[0].env[0].valueFrom.configMapKeyRef.name"),
]  # fmt: skip


def _naming(spec, name):
    import json

    return _template(**json.loads(json.dumps(spec).replace("{}", name)))


@pytest.mark.parametrize(("spec", "path"), REFERENCES)
def test_the_portals_own_objects_are_never_a_templates_to_name(spec, path):
    for scope in (ReferenceScope(), SHARED):
        errors = _errors(_naming(spec, "gp-7-ssh"), references=scope)
        assert any("portal's own objects" in m for m in errors[f"{T}pod_template.{path}"])


@pytest.mark.parametrize(("spec", "path"), REFERENCES)
def test_in_a_shared_namespace_only_names_with_the_tenants_prefix_are_allowed(spec, path):
    key = f"{T}pod_template.{path}"
    assert _errors(_naming(spec, "nlp-hf-token"), references=SHARED) == {}
    outside = _errors(_naming(spec, "vision-hf-token"), references=SHARED)[key]
    assert any("start with nlp-" in m and "gpu-jobs" in m for m in outside)
    longer = _errors(_naming(spec, "nlp-ops-token"), references=SHARED)[key]
    assert any("another tenant's prefix" in m for m in longer)
    assert "vision" not in " ".join(longer)
    # In the tenant's own namespace every name but the portal's is its own.
    assert _errors(_naming(spec, "vision-hf-token"), references=ReferenceScope()) == {}


def test_tolerations_beyond_the_gpu_taints_need_an_admins_list():
    gpu = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    everything = {"operator": "Exists"}
    control_plane = {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists",
                     "effect": "NoSchedule"}  # fmt: skip
    assert _errors(asked=[gpu]) == {}
    errors = _errors(asked=[gpu, everything, control_plane])[f"{T}tolerations"]
    assert [m[:3] for m in errors] == ["[1]", "[2]"]
    assert "every taint" in errors[0]
    assert "nvidia.com/gpu:NoSchedule" in errors[0]
    assert "node-role.kubernetes.io/control-plane:NoSchedule" in errors[1]
    assert all("tenant nlp" in m and "site admin lists them" in m for m in errors)


def test_an_admins_list_covers_what_it_tolerates_and_no_more():
    listed = ({"key": "dedicated", "operator": "Equal", "value": "nlp", "effect": "NoSchedule"},)
    ok = {"key": "dedicated", "operator": "Equal", "value": "nlp", "effect": "NoSchedule"}
    other_value = {**ok, "value": "vision"}
    any_effect = {k: v for k, v in ok.items() if k != "effect"}
    any_value = {"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}
    errors = _errors(asked=[ok, other_value, any_effect, any_value], tolerations=listed)
    assert [m[:3] for m in errors[f"{T}tolerations"]] == ["[1]", "[2]", "[3]"]
    keyed = ({"key": "dedicated", "operator": "Exists"},)
    assert _errors(asked=[ok, other_value, any_effect, any_value], tolerations=keyed) == {}
    star = ({"operator": "Exists"},)
    assert _errors(asked=[{"operator": "Exists"}, ok], tolerations=star) == {}


def test_priority_classes_by_list_and_never_the_systems_without_one():
    def named(name, **policy):
        return _errors(_template(priorityClassName=name), **policy)

    key = f"{T}pod_template.spec.priorityClassName"
    assert named("research-high") == {}
    assert "reserved for the cluster" in named("system-cluster-critical")[key][0]
    assert "reserved for the cluster" in named("system-node-critical")[key][0]
    listed = {"priority_classes": ("research-high",)}
    assert named("research-high", **listed) == {}
    assert "research-high" in named("research-low", **listed)[key][0]


@pytest.mark.parametrize(
    ("key", "refused", "allowed"),
    [
        ("container.apparmor.security.beta.kubernetes.io/main", "the cluster's", ()),
        ("seccomp.security.alpha.kubernetes.io/pod", "the cluster's", ()),
        ("cluster-autoscaler.kubernetes.io/safe-to-evict", "the cluster's", ()),
        ("example.k8s.io/x", "the cluster's", ()),
        ("hami.io/vgpu-devices-to-allocate", "device", ("hami.io/",)),
        ("hami.io/bind-phase", "device", ()),
        ("volcano.sh/devices-to-allocate", "device", ()),
        ("gpuportal.io/target-node", "device", ()),
        ("portal.gpu/preemption-deadline", "device", ()),
    ],
)
def test_reserved_annotations_are_refused_and_device_keys_even_when_listed(key, refused, allowed):
    errors = _errors({**_template(), "metadata": {"annotations": {key: "x"}}}, annotations=allowed)
    assert any(refused in m for m in errors[f"{T}pod_template.metadata.annotations.{key}"])


def test_an_admin_may_allow_a_cluster_annotation_by_key_or_prefix():
    key = "kubectl.kubernetes.io/default-container"
    template = {**_template(), "metadata": {"annotations": {key: "main", "mine": "x"}}}
    assert _errors(template, annotations=(key,)) == {}
    assert _errors(template, annotations=("kubectl.kubernetes.io/",)) == {}
    assert _errors(template) != {}


def test_labels_the_sharing_stacks_and_the_portal_select_by_are_refused():
    labels = {"app.kubernetes.io/name": "ddp", "volcano.sh/queue-name": "x", "team": "nlp"}
    errors = _errors({**_template(), "metadata": {"labels": labels}})
    assert list(errors) == [f"{T}pod_template.metadata.labels.volcano.sh/queue-name"]


def test_the_pod_security_level_is_part_of_the_policy():
    template = _template(containers=[{"name": "m", "image": "x",
                                      "securityContext": {"privileged": True}}])  # fmt: skip
    assert _errors(template, level=PRIVILEGED) == {}
    key = f"{T}pod_template.spec.containers[0].securityContext.privileged"
    assert "level baseline" in _errors(template, level=BASELINE)[key][0]
