"""Pod Security Standards for job pods: the level a tenant's pods run at, what each level
refuses (checked by the portal at submit, naming the field and the level), and what every pod
the portal renders gets unless its level lets the template say otherwise. Pure.

The levels and their checks are Kubernetes' own, as the API server's PodSecurity admission
applies them (k8s.io/pod-security-admission v0.37.2, policy/check_*.go, the newest version of
each check; the real-cluster tests run that server). A namespace labelled
`pod-security.kubernetes.io/enforce: <level>` refuses the same pods a second time.

- `privileged`: nothing refused (an admin's explicit choice for a tenant it trusts with its
  nodes).
- `baseline` (the default): check_privileged.go, check_capabilities_baseline.go (only the
  default set may be added), check_hostPathVolumes.go, check_hostNamespaces.go,
  check_hostPorts.go, check_appArmorProfile.go, check_seccompProfile_baseline.go.
- `restricted`: baseline, and check_restrictedVolumes.go, check_allowPrivilegeEscalation.go,
  check_runAsNonRoot.go, check_runAsUser.go, check_seccompProfile_restricted.go and
  check_capabilities_restricted.go (drop ALL, add at most NET_BIND_SERVICE), the last two in
  place of their baseline versions (their OverrideCheckIDs).

The checks on fields a template cannot carry at all (seLinuxOptions, procMount, sysctls,
windowsOptions, probes, host namespaces and host ports: jobspec.podtemplate refuses those
fields at every level) need no code here; those that can be stated are below. One rule of the
portal's own sits with them: a pod mounts no service-account token below `privileged`, since
the token would let a researcher's code call the API server as the namespace's account.

Defaults (`secured_spec`), applied to every rendered pod: `automountServiceAccountToken:
false` and a pod-level seccomp profile `RuntimeDefault` unless the template states one;
`restricted` also sets `runAsNonRoot: true`, and in every container
`allowPrivilegeEscalation: false` and `ALL` among the dropped capabilities, which a template
cannot undo (a template that states the opposite is refused at submit). Images that must run
as root (sshd for the mpi and ssh plugins, many vLLM and NGC images) fail under `restricted`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping
from typing import Any

PRIVILEGED = "privileged"
BASELINE = "baseline"
RESTRICTED = "restricted"
LEVELS = (PRIVILEGED, BASELINE, RESTRICTED)  # from the least restrictive to the most
DEFAULT_LEVEL = BASELINE
# The namespace label the API server's PodSecurity admission enforces.
ENFORCE_LABEL = "pod-security.kubernetes.io/enforce"

UNKNOWN_LEVEL = "must be one of: " + ", ".join(LEVELS)
AT_LEVEL = "{detail} at pod security level {level} (Pod Security Standards: {check})"
AUTOMOUNT_REFUSED = (
    "may not be true at pod security level {level}: a job pod mounts no service-account "
    "token below level privileged (the portal's rule)"
)
AUTOMOUNT_CHECK = "automountServiceAccountToken"

# check_capabilities_baseline.go: the container runtime's default set.
BASELINE_CAPABILITIES = frozenset(
    {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
     "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}
)  # fmt: skip
RESTRICTED_CAPABILITIES = frozenset({"NET_BIND_SERVICE"})
# check_seccompProfile_*.go and check_appArmorProfile.go: the profile types allowed.
CONFINED_PROFILES = ("RuntimeDefault", "Localhost")
# check_restrictedVolumes.go: the inline volume sources restricted allows.
RESTRICTED_VOLUMES = frozenset(
    {"configMap", "downwardAPI", "emptyDir", "projected", "secret", "csi",
     "persistentVolumeClaim", "ephemeral", "image"}
)  # fmt: skip
APPARMOR_ANNOTATION_PREFIX = "container.apparmor.security.beta.kubernetes.io/"

Problem = tuple[str, str]  # (path, what is wrong)
Check = Callable[[Mapping[str, Any], Mapping[str, Any]], Iterator[Problem]]


def template_section(template: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """The template's `spec` or `metadata`, empty when it has none that is a mapping."""
    value = template.get(key)
    return value if isinstance(value, Mapping) else {}


def level_rank(level: str) -> int:
    """0 for privileged, 1 baseline, 2 restricted: a higher level allows less."""
    return LEVELS.index(level)


def least_restrictive(levels: list[str]) -> str:
    """The level that lets every one of `levels` through (the default with none)."""
    return min(levels, key=level_rank) if levels else DEFAULT_LEVEL


def _containers(spec: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(path, container) of every app and init container (visitContainers)."""
    for section in ("initContainers", "containers"):
        for index, container in enumerate(spec.get(section) or []):
            if isinstance(container, Mapping):
                yield f"spec.{section}[{index}]", container


def _context(holder: Mapping[str, Any]) -> Mapping[str, Any]:
    context = holder.get("securityContext")
    return context if isinstance(context, Mapping) else {}


def _contexts(spec: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(path, securityContext) of the pod and of each container."""
    yield "spec.securityContext", _context(spec)
    for path, container in _containers(spec):
        yield f"{path}.securityContext", _context(container)


def _quoted(items: Any) -> str:
    return ", ".join(str(item) for item in sorted(items))


# --- baseline ------------------------------------------------------------------------------


def _privileged(spec: Mapping[str, Any], _meta: Mapping[str, Any]) -> Iterator[Problem]:
    """check_privileged.go: securityContext.privileged false or unset."""
    for path, container in _containers(spec):
        if _context(container).get("privileged") is True:
            yield f"{path}.securityContext.privileged", "may not be true"


def _capabilities_baseline(spec: Mapping[str, Any], _meta: Mapping[str, Any]) -> Iterator[Problem]:
    """check_capabilities_baseline.go: only the default set may be added."""
    for path, container in _containers(spec):
        added = (_context(container).get("capabilities") or {}).get("add") or []
        extra = set(added) - BASELINE_CAPABILITIES
        if extra:
            yield (
                f"{path}.securityContext.capabilities.add",
                f"may not add {_quoted(extra)} (only {_quoted(BASELINE_CAPABILITIES)})",
            )


def _host_path(spec: Mapping[str, Any], _meta: Mapping[str, Any]) -> Iterator[Problem]:
    """check_hostPathVolumes.go: no hostPath volume."""
    for index, volume in enumerate(spec.get("volumes") or []):
        if isinstance(volume, Mapping) and volume.get("hostPath") is not None:
            yield f"spec.volumes[{index}].hostPath", "a node's directory may not be mounted"


def _host_namespaces(spec: Mapping[str, Any], _meta: Mapping[str, Any]) -> Iterator[Problem]:
    """check_hostNamespaces.go: hostNetwork, hostPID, hostIPC false or unset."""
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(key) is True:
            yield f"spec.{key}", "may not be true"


def _host_ports(spec: Mapping[str, Any], _meta: Mapping[str, Any]) -> Iterator[Problem]:
    """check_hostPorts.go: hostPort 0 or unset."""
    for path, container in _containers(spec):
        for index, port in enumerate(container.get("ports") or []):
            if isinstance(port, Mapping) and port.get("hostPort"):
                yield f"{path}.ports[{index}].hostPort", "may not be set"


def _profile_types(spec: Mapping[str, Any], field: str, *, required: bool) -> Iterator[Problem]:
    """A seccomp or AppArmor profile type of the pod or a container outside CONFINED_PROFILES;
    `required` and none stated so: each container with none, under a pod with none (as
    admission does, the missing ones are named only when no stated one is wrong)."""
    stated_wrong = False
    for path, context in _contexts(spec):
        stated = (context.get(field) or {}).get("type")
        if stated is not None and stated not in CONFINED_PROFILES:
            stated_wrong = True
            yield (
                f"{path}.{field}.type",
                f"may not be {stated} (only {', '.join(CONFINED_PROFILES)})",
            )
    if not required or stated_wrong or (_context(spec).get(field) or {}).get("type") is not None:
        return
    for path, container in _containers(spec):
        if (_context(container).get(field) or {}).get("type") is None:
            yield (
                f"{path}.securityContext.{field}.type",
                f"must be {' or '.join(CONFINED_PROFILES)}, here or for the pod",
            )


def _seccomp_baseline(spec: Mapping[str, Any], _meta: Mapping[str, Any]) -> Iterator[Problem]:
    """check_seccompProfile_baseline.go (1.19+): RuntimeDefault, Localhost or unset."""
    yield from _profile_types(spec, "seccompProfile", required=False)


def _apparmor(spec: Mapping[str, Any], meta: Mapping[str, Any]) -> Iterator[Problem]:
    """check_appArmorProfile.go: profile types RuntimeDefault, Localhost or unset, and the
    beta annotations runtime/default, localhost/* or empty."""
    yield from _profile_types(spec, "appArmorProfile", required=False)
    for key, value in sorted((meta.get("annotations") or {}).items()):
        if key.startswith(APPARMOR_ANNOTATION_PREFIX) and not (
            value in ("", "runtime/default") or value.startswith("localhost/")
        ):
            yield f"metadata.annotations.{key}", f"may not be {value}"


def _automount(spec: Mapping[str, Any], _meta: Mapping[str, Any]) -> Iterator[Problem]:
    """The portal's own rule (see the module's docstring)."""
    if spec.get("automountServiceAccountToken") is True:
        yield "spec.automountServiceAccountToken", AUTOMOUNT_REFUSED


# --- restricted ----------------------------------------------------------------------------


def _restricted_volumes(spec: Mapping[str, Any], _meta: Mapping[str, Any]) -> Iterator[Problem]:
    """check_restrictedVolumes.go: only the listed inline sources (hostPath is baseline's)."""
    for index, volume in enumerate(spec.get("volumes") or []):
        if not isinstance(volume, Mapping):
            continue
        for source in sorted(set(volume) - {"name", "hostPath"} - RESTRICTED_VOLUMES):
            yield f"spec.volumes[{index}].{source}", "this kind of volume is not allowed"


def _privilege_escalation(spec: Mapping[str, Any], _meta: Mapping[str, Any]) -> Iterator[Problem]:
    """check_allowPrivilegeEscalation.go: false in every container."""
    for path, container in _containers(spec):
        if _context(container).get("allowPrivilegeEscalation") is not False:
            yield f"{path}.securityContext.allowPrivilegeEscalation", "must be false"


def _run_as_non_root(spec: Mapping[str, Any], _meta: Mapping[str, Any]) -> Iterator[Problem]:
    """check_runAsNonRoot.go: true for the pod, or for every container; false nowhere."""
    pod = _context(spec).get("runAsNonRoot")
    if pod is False:
        yield "spec.securityContext.runAsNonRoot", "may not be false"
    for path, container in _containers(spec):
        stated = _context(container).get("runAsNonRoot")
        if stated is False:
            yield f"{path}.securityContext.runAsNonRoot", "may not be false"
        elif stated is None and pod is not True:
            yield f"{path}.securityContext.runAsNonRoot", "must be true, here or for the pod"


def _run_as_user(spec: Mapping[str, Any], _meta: Mapping[str, Any]) -> Iterator[Problem]:
    """check_runAsUser.go: runAsUser never 0 (root)."""
    for path, context in _contexts(spec):
        if context.get("runAsUser") == 0:
            yield f"{path}.runAsUser", "may not be 0 (root)"


def _seccomp_restricted(spec: Mapping[str, Any], _meta: Mapping[str, Any]) -> Iterator[Problem]:
    """check_seccompProfile_restricted.go: RuntimeDefault or Localhost, for the pod or for
    every container."""
    yield from _profile_types(spec, "seccompProfile", required=True)


def _capabilities_restricted(
    spec: Mapping[str, Any], _meta: Mapping[str, Any]
) -> Iterator[Problem]:
    """check_capabilities_restricted.go: drop ALL, add at most NET_BIND_SERVICE."""
    for path, container in _containers(spec):
        capabilities = _context(container).get("capabilities") or {}
        if "ALL" not in (capabilities.get("drop") or []):
            yield f"{path}.securityContext.capabilities.drop", "must include ALL"
        extra = set(capabilities.get("add") or []) - RESTRICTED_CAPABILITIES
        if extra:
            yield (
                f"{path}.securityContext.capabilities.add",
                f"may not add {_quoted(extra)} (only NET_BIND_SERVICE)",
            )


# (check, the Pod Security Standards' name of it, the lowest level that applies it, the
# checks it replaces at that level).
_CHECKS: tuple[tuple[Check, str, str, tuple[str, ...]], ...] = (
    (_privileged, "privileged", BASELINE, ()),
    (_capabilities_baseline, "capabilities_baseline", BASELINE, ()),
    (_host_path, "hostPathVolumes", BASELINE, ()),
    (_host_namespaces, "hostNamespaces", BASELINE, ()),
    (_host_ports, "hostPorts", BASELINE, ()),
    (_apparmor, "appArmorProfile", BASELINE, ()),
    (_seccomp_baseline, "seccompProfile_baseline", BASELINE, ()),
    (_automount, AUTOMOUNT_CHECK, BASELINE, ()),
    (_restricted_volumes, "restrictedVolumes", RESTRICTED, ()),
    (_privilege_escalation, "allowPrivilegeEscalation", RESTRICTED, ()),
    (_run_as_non_root, "runAsNonRoot", RESTRICTED, ()),
    (_run_as_user, "runAsUser", RESTRICTED, ()),
    (_seccomp_restricted, "seccompProfile_restricted", RESTRICTED, ("seccompProfile_baseline",)),
    (_capabilities_restricted, "capabilities_restricted", RESTRICTED, ("capabilities_baseline",)),
)


def pod_security_errors(
    template: Mapping[str, Any], *, level: str, prefix: str = ""
) -> dict[str, list[str]]:
    """What `level` refuses in a pod template or pod (`{metadata, spec}`, wire shape), keyed
    `<prefix><path>` at each field at fault, each message naming the level and the check.
    Checked after `secured_spec` (as the API server sees the pod): what the defaults set
    passes, what the template says against them is refused."""
    if level not in LEVELS:
        raise ValueError(f"unknown pod security level {level!r}")
    spec, meta = template_section(template, "spec"), template_section(template, "metadata")
    secured = secured_spec(spec, level)
    if level == PRIVILEGED:
        return {}
    rank = level_rank(level)
    in_force = [entry for entry in _CHECKS if level_rank(entry[2]) <= rank]
    replaced = {old for *_, olds in in_force for old in olds}
    errors: dict[str, list[str]] = {}
    for check, name, _lowest, _olds in in_force:
        if name in replaced:
            continue
        for path, detail in check(secured, meta):
            if name == AUTOMOUNT_CHECK:
                message = detail.format(level=level)
            else:
                message = AT_LEVEL.format(detail=detail, level=level, check=name)
            errors.setdefault(prefix + path, []).append(message)
    return errors


def secured_spec(spec: Mapping[str, Any], level: str) -> dict[str, Any]:
    """A copy of pod spec `spec` (wire shape) with the defaults `level` sets (see the module's
    docstring); what the spec states itself is kept."""
    out = copy.deepcopy(dict(spec))
    out.setdefault("automountServiceAccountToken", False)
    pod = out.setdefault("securityContext", {})
    pod.setdefault("seccompProfile", {"type": "RuntimeDefault"})
    if level != RESTRICTED:
        return out
    pod.setdefault("runAsNonRoot", True)
    for section in ("initContainers", "containers"):
        for container in out.get(section) or []:
            context = container.setdefault("securityContext", {})
            context.setdefault("allowPrivilegeEscalation", False)
            capabilities = context.setdefault("capabilities", {})
            dropped = capabilities.setdefault("drop", [])
            if "ALL" not in dropped:
                dropped.append("ALL")
    return out
