"""Kubernetes' own rules for the names, keys and values a job hands to the API server, so that
the portal refuses at submit, naming the field, what the server would refuse at pod creation
(a job that is accepted and then fails to start every time). Pure.

The rules are the API server's, read in k8s.io/apimachinery v0.37.2 and k8s.io/kubernetes
v1.37.2 (the control plane the real-cluster tests run):

- label keys, annotation keys (qualified names): apimachinery
  pkg/api/validate/content/kube.go `IsLabelKey` (an optional DNS-1123 subdomain prefix of at
  most 253 characters and "/", then at most 63 alphanumerics, '-', '_' or '.', starting and
  ending with an alphanumeric); annotation keys the same, lower-cased first
  (pkg/api/validation/objectmeta.go `ValidateAnnotations`), and all annotations together at
  most 256 KiB (`TotalAnnotationSizeLimitB`);
- label values: kube.go `IsLabelValue` (empty, or like a key's name part);
- object names (Secrets, ConfigMaps, claims, priority classes): content/dns.go
  `IsDNS1123Subdomain`;
- environment variable names: pkg/util/validation/validation.go `IsEnvVarName` (with its
  `hasChDirPrefix`: not ".", "..", nor starting with ".."). Servers from 1.34 relax it to any
  printable ASCII but "=" (`IsRelaxedEnvVarName`); the strict rule is the one every server
  accepts, so a job runs on any of them;
- 64-bit integers (tolerationSeconds, ...): the API's int64 fields;
- image references: the server only refuses leading or trailing whitespace
  (pkg/apis/core/validation/validation.go `validateContainerOnlyForPod`), but the kubelet
  parses the reference before it pulls and fails the pod with InvalidImageName otherwise;
  the grammar is github.com/distribution/reference v0.6.0 regexp.go `ReferenceRegexp` (name
  components of lower-case alphanumerics and separators, an optional registry host and port,
  an optional tag and digest), with its 255-character limit on the name
  (reference.go `NameTotalLengthMax`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)
ANNOTATIONS_MAX_BYTES = 256 * 1024
NAME_PART_MAX = 63
SUBDOMAIN_MAX = 253
IMAGE_NAME_MAX = 255

_NAME_PART = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
SUBDOMAIN_RE = re.compile(rf"{_LABEL}(\.{_LABEL})*")
_ENV_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")

# github.com/distribution/reference regexp.go, assembled as there.
_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|[-]+)"
_PATH_COMPONENT = rf"{_ALNUM}(?:{_SEPARATOR}{_ALNUM})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_HOST = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[(?:[a-fA-F0-9:]+)\])"
_NAME = rf"(?:{_HOST}(?::[0-9]+)?/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*[:][0-9a-fA-F]{32,}"
_REFERENCE = re.compile(rf"(?P<name>{_NAME})(?::{_TAG})?(?:@{_DIGEST})?", re.ASCII)

BAD_LABEL_KEY = (
    "must be a label key (Kubernetes' rule): an optional DNS subdomain prefix and '/', then at "
    "most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
)
BAD_LABEL_VALUE = (
    "must be a label value (Kubernetes' rule): empty, or at most 63 letters, digits, '-', '_' "
    "or '.', starting and ending with a letter or digit"
)
BAD_OBJECT_NAME = (
    "must be a Kubernetes object name (a DNS subdomain: lowercase letters, digits, '-' and "
    "'.', at most 253)"
)
BAD_ENV_NAME = (
    "must be an environment variable name (Kubernetes' rule): letters, digits, '_', '-' or "
    "'.', not starting with a digit, nor '.' or '..' alone or at the start"
)
BAD_IMAGE = (
    "must be an image reference the kubelet can pull: [registry[:port]/]name[:tag][@digest], "
    "the name in lowercase letters, digits and separators ('.', '_', '__', '-'), no spaces"
)
ANNOTATIONS_TOO_LARGE = (
    "all annotations together may hold at most 256 KiB (Kubernetes' rule); these hold {size}"
)
# PostgreSQL's text and jsonb cannot hold U+0000: such a value would fail at INSERT (a 500).
STR_NUL = "must not contain NUL characters (\\0)"
NOT_INT64 = "must be an integer between -2^63 and 2^63-1 (a 64-bit field of the API)"


def label_key_error(key: str) -> str | None:
    """Why `key` is not a label key (IsLabelKey), or None."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > SUBDOMAIN_MAX or not SUBDOMAIN_RE.fullmatch(prefix)):
        return BAD_LABEL_KEY
    if len(name) > NAME_PART_MAX or not _NAME_PART.fullmatch(name):
        return BAD_LABEL_KEY
    return None


def annotation_key_error(key: str) -> str | None:
    """Why `key` is not an annotation key (a label key, lower-cased: ValidateAnnotations)."""
    return label_key_error(key.lower())


def label_value_error(value: str) -> str | None:
    if value == "" or (len(value) <= NAME_PART_MAX and _NAME_PART.fullmatch(value)):
        return None
    return BAD_LABEL_VALUE


def annotations_size_error(annotations: Mapping[str, str]) -> str | None:
    size = sum(len(key.encode()) + len(value.encode()) for key, value in annotations.items())
    if size <= ANNOTATIONS_MAX_BYTES:
        return None
    return ANNOTATIONS_TOO_LARGE.format(size=f"{size} bytes")


def object_name_error(name: str) -> str | None:
    if len(name) <= SUBDOMAIN_MAX and SUBDOMAIN_RE.fullmatch(name):
        return None
    return BAD_OBJECT_NAME


def env_name_error(name: str) -> str | None:
    if _ENV_NAME.fullmatch(name) and name not in (".", "..") and not name.startswith(".."):
        return None
    return BAD_ENV_NAME


def image_error(image: str) -> str | None:
    """Why `image` is no reference the kubelet can pull, or None."""
    match = _REFERENCE.fullmatch(image)
    if match is None or len(match.group("name")) > IMAGE_NAME_MAX:
        return BAD_IMAGE
    return None


def int64_error(value: int) -> str | None:
    return None if INT64_MIN <= value <= INT64_MAX else NOT_INT64


def nul_paths(data: Any, root: str = "") -> list[str]:
    """Paths (under `root`) of every string, key or value, holding U+0000, which PostgreSQL
    cannot store and no Kubernetes field takes.

    Iterative: an API body may be nested about as deep as the JSON parser's recursion allows.
    """
    found: list[str] = []
    stack: list[tuple[str, Any]] = [(root, data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, str):
            if "\x00" in value:
                found.append(path or "body")
        elif isinstance(value, dict):
            for key, item in value.items():
                name = str(key).replace("\x00", "\\0")
                child = f"{path}.{name}" if path else name
                if isinstance(key, str) and "\x00" in key:
                    found.append(child)
                stack.append((child, item))
        elif isinstance(value, list):
            stack.extend((f"{path}[{index}]", item) for index, item in enumerate(value))
    return sorted(found)
