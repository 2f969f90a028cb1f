"""Pod Security Standards as the portal checks them at submit: each check of
k8s.io/pod-security-admission refuses at its level and above, names the field and the level,
and the defaults every rendered pod gets pass the level they are made for."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from jobspec.podsecurity import (
    BASELINE,
    LEVELS,
    PRIVILEGED,
    RESTRICTED,
    least_restrictive,
    pod_security_errors,
    secured_spec,
)

C0 = "spec.containers[0]"


def _pod(**container_context: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "trainer:1"}
    if container_context:
        container["securityContext"] = container_context
    return {"spec": {"containers": [container]}}


def _with(template: dict[str, Any], **spec: Any) -> dict[str, Any]:
    template = copy.deepcopy(template)
    template["spec"].update(spec)
    return template


# (what the template says, the field named, the lowest level that refuses it, the check)
REFUSED = [
    (_pod(privileged=True), f"{C0}.securityContext.privileged", BASELINE, "privileged"),
    (_pod(capabilities={"add": ["SYS_ADMIN"]}), f"{C0}.securityContext.capabilities.add",
     BASELINE, "capabilities"),  # capabilities_restricted at restricted
    (_pod(capabilities={"add": ["NET_ADMIN", "ALL"]}), f"{C0}.securityContext.capabilities.add",
     BASELINE, "capabilities"),  # capabilities_restricted at restricted
    (_with(_pod(), volumes=[{"name": "root", "hostPath": {"path": "/"}}]),
     "spec.volumes[0].hostPath", BASELINE, "hostPathVolumes"),
    (_with(_pod(), hostNetwork=True), "spec.hostNetwork", BASELINE, "hostNamespaces"),
    (_pod(seccompProfile={"type": "Unconfined"}), f"{C0}.securityContext.seccompProfile.type",
     BASELINE, "seccompProfile_"),
    (_with(_pod(), securityContext={"seccompProfile": {"type": "Unconfined"}}),
     "spec.securityContext.seccompProfile.type", BASELINE, "seccompProfile_"),
    (_pod(appArmorProfile={"type": "Unconfined"}), f"{C0}.securityContext.appArmorProfile.type",
     BASELINE, "appArmorProfile"),
    (_with(_pod(), automountServiceAccountToken=True), "spec.automountServiceAccountToken",
     BASELINE, "service-account token"),
    (_pod(runAsUser=0), f"{C0}.securityContext.runAsUser", RESTRICTED, "runAsUser"),
    (_pod(runAsNonRoot=False), f"{C0}.securityContext.runAsNonRoot", RESTRICTED, "runAsNonRoot"),
    (_with(_pod(), securityContext={"runAsNonRoot": False}),
     "spec.securityContext.runAsNonRoot", RESTRICTED, "runAsNonRoot"),
    (_pod(allowPrivilegeEscalation=True), f"{C0}.securityContext.allowPrivilegeEscalation",
     RESTRICTED, "allowPrivilegeEscalation"),
    (_pod(capabilities={"add": ["CHOWN"]}), f"{C0}.securityContext.capabilities.add",
     RESTRICTED, "capabilities_restricted"),
    (_with(_pod(), volumes=[{"name": "n", "nfs": {"server": "x", "path": "/"}}]),
     "spec.volumes[0].nfs", RESTRICTED, "restrictedVolumes"),
]  # fmt: skip


@pytest.mark.parametrize(("template", "path", "lowest", "check"), REFUSED)
@pytest.mark.parametrize("level", LEVELS)
def test_each_check_refuses_at_its_level_and_above_naming_the_field_and_the_level(
    template, path, lowest, check, level
):
    errors = pod_security_errors(template, level=level, prefix="tasks[0].pod_template.")
    key = f"tasks[0].pod_template.{path}"
    if LEVELS.index(level) < LEVELS.index(lowest):
        assert key not in errors, errors
        return
    assert key in errors, errors
    assert any(f"pod security level {level}" in m and check in m for m in errors[key]), errors


def test_a_privileged_tenants_template_may_say_anything_the_template_can_say():
    template = _with(
        _pod(privileged=True, runAsUser=0, capabilities={"add": ["SYS_ADMIN"]}),
        volumes=[{"name": "root", "hostPath": {"path": "/"}}],
        automountServiceAccountToken=True,
        securityContext={"seccompProfile": {"type": "Unconfined"}},
    )
    assert pod_security_errors(template, level=PRIVILEGED) == {}


def test_baseline_lets_root_and_privilege_escalation_through_as_kubernetes_does():
    template = _pod(runAsUser=0, allowPrivilegeEscalation=True, capabilities={"add": ["CHOWN"]})
    assert pod_security_errors(template, level=BASELINE) == {}


@pytest.mark.parametrize("level", LEVELS)
def test_a_template_that_says_nothing_passes_every_level_with_the_defaults(level):
    template = {"spec": {"containers": [{"name": "a", "image": "x"}],
                         "initContainers": [{"name": "b", "image": "y"}]}}  # fmt: skip
    assert pod_security_errors(template, level=level) == {}


def test_the_defaults_are_what_each_level_needs_and_a_templates_own_word_is_kept():
    spec = {"containers": [{"name": "a", "image": "x",
                            "securityContext": {"capabilities": {"drop": ["NET_RAW"]}}}]}  # fmt: skip
    baseline = secured_spec(spec, BASELINE)
    assert baseline["automountServiceAccountToken"] is False
    assert baseline["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    assert baseline["containers"] == spec["containers"]
    restricted = secured_spec(spec, RESTRICTED)
    assert restricted["securityContext"]["runAsNonRoot"] is True
    assert restricted["containers"][0]["securityContext"] == {
        "capabilities": {"drop": ["NET_RAW", "ALL"]},
        "allowPrivilegeEscalation": False,
    }
    assert spec["containers"][0]["securityContext"] == {"capabilities": {"drop": ["NET_RAW"]}}
    localhost = {"containers": [], "securityContext": {"seccompProfile": {"type": "Localhost",
                                                                          "localhostProfile": "p"}}}  # fmt: skip
    assert secured_spec(localhost, BASELINE)["securityContext"] == localhost["securityContext"]


def test_restricted_names_only_the_profile_stated_wrong_not_the_containers_left_unset():
    template = _with(
        _pod(), securityContext={"seccompProfile": {"type": "Unconfined"}},
        initContainers=[{"name": "init", "image": "x"}],
    )  # fmt: skip
    errors = pod_security_errors(template, level=RESTRICTED)
    assert [k for k in errors if "seccomp" in k] == ["spec.securityContext.seccompProfile.type"]


def test_an_apparmor_annotation_is_checked_as_the_profile_is():
    template = {**_pod(), "metadata": {"annotations": {
        "container.apparmor.security.beta.kubernetes.io/main": "unconfined"}}}  # fmt: skip
    errors = pod_security_errors(template, level=BASELINE)
    assert "metadata.annotations.container.apparmor.security.beta.kubernetes.io/main" in errors
    template["metadata"]["annotations"] = {
        "container.apparmor.security.beta.kubernetes.io/main": "localhost/mine"
    }
    assert pod_security_errors(template, level=BASELINE) == {}


def test_the_least_restrictive_level_lets_every_tenant_of_a_shared_namespace_through():
    assert least_restrictive([RESTRICTED, BASELINE]) == BASELINE
    assert least_restrictive([RESTRICTED, PRIVILEGED, BASELINE]) == PRIVILEGED
    assert least_restrictive([]) == BASELINE


def test_an_unknown_level_is_a_programming_error():
    with pytest.raises(ValueError, match="unknown pod security level"):
        pod_security_errors(_pod(), level="lenient")
