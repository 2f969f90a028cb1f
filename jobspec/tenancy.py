"""What a tenant's job may do on the cluster besides its pod security level
(jobspec.podsecurity): the objects its template may name, the taints it may tolerate, the
priority classes and the annotations and labels it may set. Pure: the policy in force comes in
as a `TenantPolicy` (portal.jobs.policy builds it from the tenant's and queue's rows and the
settings), a stored or submitted task's template and tolerations go in, errors keyed by the
field at fault come out, each naming the rule.

- References: a template names Secrets, ConfigMaps, PersistentVolumeClaims and pull secrets of
  the namespace its pods run in (volumes, `imagePullSecrets`, `envFrom`, `env[].valueFrom`;
  jobspec.podtemplate already refuses any other namespace and projected volumes). The portal's
  own objects there (`gp-*`: a job's owner, its ssh keys, its host list) are never a
  template's to name. In a namespace shared by several tenants, a template names only objects
  whose names start with `<tenant>-`, and none under the prefix of a longer tenant's name
  (tenant `a` may not name `a-b-token`, which tenant `a-b` owns).
- Tolerations: the taints an admin lists for the tenant or for the queue, and the NoSchedule
  taint of each GPU resource name (GPU nodes carry it, and the portal adds it to every GPU
  pod itself). A toleration is allowed when a listed one tolerates at least all it does:
  `operator: Exists` without a key tolerates every taint, a control-plane node's too, so
  only a listed `*` allows it.
- Priority classes: those an admin lists for the tenant or queue; with no list, any class but
  the `system-` ones, which Kubernetes reserves for the cluster's own critical pods.
- Annotations: keys under `kubernetes.io`, `k8s.io` (and their subdomains: the AppArmor and
  seccomp keys, kubelet's and controllers' keys) are refused unless an admin allows the key;
  keys under `hami.io`, `volcano.sh`, `gpuportal.io` and `portal.gpu` never: the sharing
  stacks' device plugins read their device assignment there (a pod claiming a card another
  tenant holds), and the portal writes its own (the preemption deadline among them). Labels
  under those are refused too (their controllers select pods by them); Kubernetes'
  recommended `app.kubernetes.io/*` labels are fine.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from .podsecurity import DEFAULT_LEVEL, pod_security_errors, template_section
from .tolerations import tolerations_text

PORTAL_PREFIX = "gp-"
SYSTEM_PRIORITY_PREFIX = "system-"
# Reserved to the cluster: an admin may allow a key under these.
CLUSTER_DOMAINS = ("kubernetes.io", "k8s.io")
# The sharing stacks' and the portal's own: never a template's to set.
DEVICE_DOMAINS = ("hami.io", "volcano.sh", "gpuportal.io", "portal.gpu")

PORTAL_OBJECT = (
    "{name} is one of the portal's own objects (gp-*: a job's owner, ssh keys or host list); "
    "a template may not name them"
)
OUTSIDE_TENANT = (
    "{name} is not tenant {tenant}'s: its jobs share namespace {namespace} with other "
    "tenants, so a template names only objects whose names start with {prefix} (e.g. "
    "{prefix}{name})"
)
OTHER_TENANTS_PREFIX = (
    "{name} falls under another tenant's prefix (a longer tenant name that starts with "
    "{prefix}); rename the object"
)
TOLERATION_NOT_ALLOWED = (
    "[{index}] {what}: not among the taints tenant {tenant}'s jobs may tolerate ({allowed}); "
    "a site admin lists them for the tenant or the queue"
)
TOLERATES_EVERYTHING = (
    "tolerates every taint (operator Exists without a key), a control-plane node's too"
)
PRIORITY_CLASS_SYSTEM = (
    "{name} is reserved for the cluster's own pods (system-*); a site admin lists the "
    "priority classes a tenant or queue may use"
)
PRIORITY_CLASS_NOT_LISTED = (
    "{name} is not among the priority classes tenant {tenant}'s jobs may use ({allowed})"
)
ANNOTATION_RESERVED = (
    "annotations under {domain} are the cluster's (AppArmor, seccomp, the kubelet's and "
    "controllers'); a site admin may allow a key (JOB_ANNOTATIONS_ALLOWED)"
)
DEVICE_KEY_RESERVED = (
    "keys under {domain} are the portal's and the GPU sharing stack's own (device "
    "assignment); a template may not set them"
)


@dataclass(frozen=True)
class ReferenceScope:
    """Which object names a tenant's template may use. `prefix` None: the tenant's own
    namespace (any name but the portal's); else every name starts with it, and none with one
    of `others` (longer tenants' prefixes that start with it)."""

    prefix: str | None = None
    others: tuple[str, ...] = ()
    namespace: str = ""


@dataclass(frozen=True)
class TenantPolicy:
    """What a tenant's (and one of its queues') jobs may do on the cluster."""

    tenant: str = ""
    level: str = DEFAULT_LEVEL
    # Tolerations an admin allows (Kubernetes' toleration fields), beyond the GPU taints.
    tolerations: tuple[Mapping[str, Any], ...] = ()
    gpu_resource_names: tuple[str, ...] = ()
    priority_classes: tuple[str, ...] = ()
    # Annotation keys (or prefixes ending in "/") an admin allows under CLUSTER_DOMAINS.
    annotations: tuple[str, ...] = ()
    references: ReferenceScope = field(default_factory=ReferenceScope)

    def allowed_tolerations(self) -> list[Mapping[str, Any]]:
        gpu = [
            {"key": n, "operator": "Exists", "effect": "NoSchedule"}
            for n in self.gpu_resource_names
        ]
        return [*gpu, *self.tolerations]


def task_policy_errors(
    *, template: Any, tolerations: Any, policy: TenantPolicy, prefix: str
) -> dict[str, list[str]]:
    """Everything `policy` refuses in one task, a submitted or a stored one: its normalised
    pod template (keyed `<prefix>pod_template.<path>`) and its tolerations
    (`<prefix>tolerations`)."""
    errors: dict[str, list[str]] = {}
    if isinstance(template, Mapping) and template:
        where = f"{prefix}pod_template."
        errors.update(pod_security_errors(template, level=policy.level, prefix=where))
        for path, message in _template_problems(template, policy):
            errors.setdefault(where + path, []).append(message)
    if isinstance(tolerations, list):
        messages = toleration_policy_errors(tolerations, policy)
        if messages:
            errors.setdefault(f"{prefix}tolerations", []).extend(messages)
    return errors


def _template_problems(
    template: Mapping[str, Any], policy: TenantPolicy
) -> Iterator[tuple[str, str]]:
    spec, meta = template_section(template, "spec"), template_section(template, "metadata")
    for path, name in references(spec):
        if (message := reference_error(name, policy)) is not None:
            yield path, message
    priority = spec.get("priorityClassName")
    if isinstance(priority, str) and (message := priority_class_error(priority, policy)):
        yield "spec.priorityClassName", message
    for key in sorted(meta.get("annotations") or {}):
        if (message := annotation_error(key, policy.annotations)) is not None:
            yield f"metadata.annotations.{key}", message
    for key in sorted(meta.get("labels") or {}):
        if (domain := _under(key, DEVICE_DOMAINS)) is not None:
            yield f"metadata.labels.{key}", DEVICE_KEY_RESERVED.format(domain=domain)


def references(spec: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(path, object name) of every object of the namespace a pod spec names."""
    for index, volume in enumerate(spec.get("volumes") or []):
        for source, key in (("secret", "secretName"), ("configMap", "name"),
                            ("persistentVolumeClaim", "claimName")):  # fmt: skip
            name = (volume.get(source) or {}).get(key)
            if isinstance(name, str):
                yield f"spec.volumes[{index}].{source}.{key}", name
    for index, secret in enumerate(spec.get("imagePullSecrets") or []):
        if isinstance(secret.get("name"), str):
            yield f"spec.imagePullSecrets[{index}].name", secret["name"]
    for section in ("initContainers", "containers"):
        for cindex, container in enumerate(spec.get(section) or []):
            cpath = f"spec.{section}[{cindex}]"
            for index, source in enumerate(container.get("envFrom") or []):
                for kind in ("configMapRef", "secretRef"):
                    name = (source.get(kind) or {}).get("name")
                    if isinstance(name, str):
                        yield f"{cpath}.envFrom[{index}].{kind}.name", name
            for index, variable in enumerate(container.get("env") or []):
                for kind, ref in (variable.get("valueFrom") or {}).items():
                    if kind in ("secretKeyRef", "configMapKeyRef") and isinstance(
                        (ref or {}).get("name"), str
                    ):
                        yield f"{cpath}.env[{index}].valueFrom.{kind}.name", ref["name"]


def reference_error(name: str, policy: TenantPolicy) -> str | None:
    scope = policy.references
    if name.startswith(PORTAL_PREFIX):
        return PORTAL_OBJECT.format(name=name)
    if scope.prefix is None:
        return None
    if not name.startswith(scope.prefix):
        return OUTSIDE_TENANT.format(
            name=name, tenant=policy.tenant, namespace=scope.namespace, prefix=scope.prefix
        )
    if any(name.startswith(other) for other in scope.others):
        return OTHER_TENANTS_PREFIX.format(name=name, prefix=scope.prefix)
    return None


def priority_class_error(name: str, policy: TenantPolicy) -> str | None:
    if policy.priority_classes:
        if name in policy.priority_classes:
            return None
        return PRIORITY_CLASS_NOT_LISTED.format(
            name=name, tenant=policy.tenant, allowed=", ".join(policy.priority_classes)
        )
    if name.startswith(SYSTEM_PRIORITY_PREFIX):
        return PRIORITY_CLASS_SYSTEM.format(name=name)
    return None


def annotation_error(key: str, allowed: tuple[str, ...]) -> str | None:
    if (domain := _under(key, DEVICE_DOMAINS)) is not None:
        return DEVICE_KEY_RESERVED.format(domain=domain)
    domain = _under(key, CLUSTER_DOMAINS)
    if domain is None or any(
        key == item or (item.endswith("/") and key.startswith(item)) for item in allowed
    ):
        return None
    return ANNOTATION_RESERVED.format(domain=domain)


def _under(key: str, domains: tuple[str, ...]) -> str | None:
    """The domain of `domains` whose keys `key` is one of (its prefix is the domain or a
    subdomain of it), or None."""
    prefix, slash, _ = key.lower().partition("/")
    if not slash:
        return None
    return next((d for d in domains if prefix == d or prefix.endswith("." + d)), None)


def toleration_policy_errors(tolerations: list[Any], policy: TenantPolicy) -> list[str]:
    """A message for each toleration no allowed one covers (tolerations the API would refuse
    are jobspec.tolerations' to report)."""
    allowed = policy.allowed_tolerations()
    messages = []
    for index, item in enumerate(tolerations):
        if not isinstance(item, Mapping) or any(_covers(rule, item) for rule in allowed):
            continue
        messages.append(
            TOLERATION_NOT_ALLOWED.format(
                index=index,
                what=_described(item),
                tenant=policy.tenant,
                allowed=", ".join(_described(rule) for rule in allowed) or "none",
            )
        )
    return messages


def _covers(rule: Mapping[str, Any], item: Mapping[str, Any]) -> bool:
    """Whether toleration `rule` tolerates every taint toleration `item` does."""
    if rule.get("effect") and rule.get("effect") != item.get("effect"):
        return False  # an item without an effect tolerates every effect
    if (rule.get("operator") or "Equal") == "Exists" and not rule.get("key"):
        return True
    if not item.get("key") or item.get("key") != rule.get("key"):
        return False
    if (rule.get("operator") or "Equal") == "Exists":
        return True
    return (item.get("operator") or "Equal") == "Equal" and item.get("value", "") == rule.get(
        "value", ""
    )


def _described(toleration: Mapping[str, Any]) -> str:
    """A toleration as the form writes it (key[=value][:Effect], * for every taint)."""
    text = tolerations_text([dict(toleration)])
    if text == "*":
        return f"* ({TOLERATES_EVERYTHING})"
    return text
