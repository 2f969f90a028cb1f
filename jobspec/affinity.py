"""The part of a pod template's `spec.affinity` the portal's scheduler honours. Pure.

Accepted, because scheduler/core's predicates plugin checks it the way kube-scheduler's
NodeAffinity and InterPodAffinity filters do:
- nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[].
  matchExpressions with In, NotIn, Exists, DoesNotExist, Gt, Lt (terms are ORed, a term's
  expressions ANDed);
- podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[] with topologyKey
  kubernetes.io/hostname and a labelSelector over the job's own pods: the portal confines each
  selector to the job (jobspec.podspec.affinity_for_job adds the job-id
  label), so one tenant's anti-affinity never repels, or is repelled by, another's pods.

Refused naming the field: preferred terms (the core does not score them), podAffinity,
matchFields, namespaces/namespaceSelector, other topology keys.
"""

from __future__ import annotations

import re
from typing import Any, Protocol

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
HOSTNAME = "kubernetes.io/hostname"
TERMS_MAX = 16
EXPRESSIONS_MAX = 16
VALUES_MAX = 64

NODE_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
POD_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
WHY = {
    PREFERRED: "preferred terms are not scored by the portal's scheduler; use required terms",
    "podAffinity": "only pod anti-affinity among the job's own pods is honoured",
    "matchFields": "use matchExpressions on node labels",
    "namespaces": "anti-affinity applies among the job's own pods",
    "namespaceSelector": "anti-affinity applies among the job's own pods",
    "mismatchLabelKeys": "anti-affinity applies among the job's own pods",
    "matchLabelKeys": "anti-affinity applies among the job's own pods",
}
NEEDS_VALUES = "operator {operator} needs at least one value"
NO_VALUES = "operator {operator} takes no values"
ONE_INTEGER = "operator {operator} needs exactly one integer value"
HOSTNAME_ONLY = f"only {HOSTNAME} (one pod per node) is supported"
_LABEL_KEY = re.compile(
    r"([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
)
BAD_LABEL_KEY = "must be a label key"


class Walk(Protocol):
    """jobspec.podtemplate's error collector (typed reads keyed by path)."""

    def add(self, path: str, message: str) -> None: ...
    def mapping(self, value: Any, path: str, allowed: tuple[str, ...]) -> dict[str, Any] | None: ...
    def items(self, value: Any, path: str, limit: int, what: str) -> list[Any]: ...
    def string(self, value: Any, path: str, **kwargs: Any) -> str | None: ...
    def string_map(self, value: Any, path: str) -> dict[str, str] | None: ...


def affinity_parse(w: Walk, raw: Any, path: str) -> dict[str, Any] | None:
    """The checked affinity (only the honoured parts, normalised), or None."""
    if raw is None:
        return None
    top = _mapping(w, raw, path, ("nodeAffinity", "podAntiAffinity"))
    if top is None:
        return None
    out: dict[str, Any] = {}
    if top.get("nodeAffinity") is not None:
        npath = f"{path}.nodeAffinity"
        node = _mapping(w, top["nodeAffinity"], npath, (REQUIRED,))
        if node is not None and node.get(REQUIRED) is not None:
            rpath = f"{npath}.{REQUIRED}"
            required = _mapping(w, node[REQUIRED], rpath, ("nodeSelectorTerms",))
            if required is not None:
                terms = _node_terms(
                    w, required.get("nodeSelectorTerms"), f"{rpath}.nodeSelectorTerms"
                )
                if terms:
                    out["nodeAffinity"] = {REQUIRED: {"nodeSelectorTerms": terms}}
    if top.get("podAntiAffinity") is not None:
        apath = f"{path}.podAntiAffinity"
        anti = _mapping(w, top["podAntiAffinity"], apath, (REQUIRED,))
        if anti is not None and anti.get(REQUIRED) is not None:
            terms = _pod_terms(w, anti[REQUIRED], f"{apath}.{REQUIRED}")
            if terms:
                out["podAntiAffinity"] = {REQUIRED: terms}
    return out or None


def _mapping(w: Walk, value: Any, path: str, allowed: tuple[str, ...]) -> dict[str, Any] | None:
    """w.mapping, with the reason an affinity field is refused instead of 'unknown field'."""
    if isinstance(value, dict):
        for key in value:
            if key in WHY:
                w.add(f"{path}.{key}", f"not supported by the portal ({WHY[key]})")
        return w.mapping({k: v for k, v in value.items() if k not in WHY}, path, allowed)
    return w.mapping(value, path, allowed)


def _node_terms(w: Walk, raw: Any, path: str) -> list[dict[str, Any]]:
    items = w.items(raw, path, TERMS_MAX, "node selector terms")
    if raw is None or (isinstance(raw, list) and not raw):
        w.add(path, "at least one term is required")
    terms = []
    for index, item in enumerate(items):
        tpath = f"{path}[{index}]"
        term = _mapping(w, item, tpath, ("matchExpressions",))
        if term is None:
            continue
        expressions = _expressions(w, term.get("matchExpressions"), f"{tpath}.matchExpressions",
                                   NODE_OPERATORS)  # fmt: skip
        if not expressions:
            w.add(f"{tpath}.matchExpressions", "at least one expression is required")
            continue
        terms.append({"matchExpressions": expressions})
    return terms


def _pod_terms(w: Walk, raw: Any, path: str) -> list[dict[str, Any]]:
    terms = []
    for index, item in enumerate(w.items(raw, path, TERMS_MAX, "pod anti-affinity terms")):
        tpath = f"{path}[{index}]"
        term = _mapping(w, item, tpath, ("labelSelector", "topologyKey"))
        if term is None:
            continue
        key = w.string(term.get("topologyKey"), f"{tpath}.topologyKey", required=True)
        if key is not None and key != HOSTNAME:
            w.add(f"{tpath}.topologyKey", HOSTNAME_ONLY)
        spath = f"{tpath}.labelSelector"
        if term.get("labelSelector") is None:
            w.add(spath, "this field is required")
            continue
        selector = _mapping(w, term["labelSelector"], spath, ("matchLabels", "matchExpressions"))
        if selector is None:
            continue
        out: dict[str, Any] = {}
        labels = w.string_map(selector.get("matchLabels"), f"{spath}.matchLabels")
        if labels:
            out["matchLabels"] = labels
        expressions = _expressions(w, selector.get("matchExpressions"),
                                   f"{spath}.matchExpressions", POD_OPERATORS)  # fmt: skip
        if expressions:
            out["matchExpressions"] = expressions
        if key == HOSTNAME:
            terms.append({"labelSelector": out, "topologyKey": HOSTNAME})
    return terms


def _expressions(w: Walk, raw: Any, path: str, operators: tuple[str, ...]) -> list[dict[str, Any]]:
    expressions = []
    for index, item in enumerate(w.items(raw, path, EXPRESSIONS_MAX, "expressions")):
        epath = f"{path}[{index}]"
        expr = _mapping(w, item, epath, ("key", "operator", "values"))
        if expr is None:
            continue
        key = w.string(expr.get("key"), f"{epath}.key", required=True, pattern=_LABEL_KEY,
                       message=BAD_LABEL_KEY)  # fmt: skip
        operator = w.string(expr.get("operator"), f"{epath}.operator", required=True)
        if operator is not None and operator not in operators:
            w.add(f"{epath}.operator", f"must be one of: {', '.join(operators)}")
            operator = None
        values = expr.get("values")
        vpath = f"{epath}.values"
        if values is not None and (
            not isinstance(values, list) or not all(isinstance(v, str) for v in values)
        ):
            w.add(vpath, "must be a list of strings")
            continue
        values = list(values or [])
        if len(values) > VALUES_MAX:
            w.add(vpath, f"at most {VALUES_MAX} values; this has {len(values)}")
            continue
        if operator in ("In", "NotIn") and not values:
            w.add(vpath, NEEDS_VALUES.format(operator=operator))
            continue
        if operator in ("Exists", "DoesNotExist") and values:
            w.add(vpath, NO_VALUES.format(operator=operator))
            continue
        if operator in ("Gt", "Lt") and (
            len(values) != 1 or not re.fullmatch(r"[+-]?\d{1,18}", values[0])
        ):
            w.add(vpath, ONE_INTEGER.format(operator=operator))
            continue
        if key is None or operator is None:
            continue
        entry: dict[str, Any] = {"key": key, "operator": operator}
        if values:
            entry["values"] = values
        expressions.append(entry)
    return expressions
