"""YAML from untrusted users (manifest uploads, API bodies): plain data or one clear error.

`yaml.safe_load` already refuses to run code, but on hostile text it still raises things
that are not `YAMLError` (RecursionError for deep nesting, ValueError for integers past
Python's digit limit) and it expands anchors/aliases into shared references that later
walks (and JSON encoders) multiply. This loader keeps safe_load's types and adds:
- no aliases (billion-laughs documents are refused before anything is built),
- a nesting limit checked on the parser's events before anything is composed, so no
  recursion limit is ever reached,
- one document per text (`yaml_load_untrusted`), or a bounded number of them
  (`yaml_load_all_untrusted`),
- a message for every failure, for the caller to put on a form field or an API `errors.body`
  entry (behind its own "not valid YAML:" style prefix).
"""

from typing import Any

import yaml

MAX_DEPTH = 64

YAML_ALIASES_FORBIDDEN = "YAML anchors and aliases are not supported"
YAML_TOO_DEEP = "the YAML is nested more than {limit} levels deep"
YAML_TAG_FORBIDDEN = "the YAML tag {tag} is not allowed: use plain mappings, lists and scalars"
YAML_MULTIPLE_DOCUMENTS = "the text must hold a single YAML document (found a second one)"
YAML_TOO_MANY_DOCUMENTS = "the text holds more than {limit} YAML documents"
YAML_SYNTAX = "{problem}"
YAML_SYNTAX_AT = "{problem} (line {line}, column {column})"
YAML_VALUE_INVALID = "a value cannot be read: {error}"


class UntrustedYAMLError(ValueError):
    """The text is not acceptable YAML; `message` says why in one sentence."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class _TagRefused(yaml.YAMLError):
    def __init__(self, tag: str) -> None:
        super().__init__(tag)
        self.tag = tag


# libyaml when installed: the pure-Python scanner is quadratic on some hostile inputs
# (thousands of "[" on one line cost seconds), libyaml stays in milliseconds.
_SafeBase: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _UntrustedLoader(_SafeBase):  # type: ignore[misc, valid-type]
    """safe_load's constructor, with a named error for tags it does not know."""

    def construct_undefined(self, node: Any) -> Any:
        raise _TagRefused(node.tag)


_UntrustedLoader.add_constructor(None, _UntrustedLoader.construct_undefined)

_OPEN = (yaml.SequenceStartEvent, yaml.MappingStartEvent)
_CLOSE = (yaml.SequenceEndEvent, yaml.MappingEndEvent)


def _shape_check(text: str, max_depth: int, max_documents: int = 1) -> str | None:
    """First pass over the parser's events (no objects built): the reason to refuse, or None.

    Composing nodes recurses once per nesting level, so depth is checked here, before it.
    """
    depth = 0
    documents = 0
    for event in yaml.parse(text, Loader=_SafeBase):
        if isinstance(event, yaml.AliasEvent):
            return YAML_ALIASES_FORBIDDEN
        if isinstance(event, yaml.DocumentStartEvent):
            documents += 1
            if documents > max_documents:
                if max_documents == 1:
                    return YAML_MULTIPLE_DOCUMENTS
                return YAML_TOO_MANY_DOCUMENTS.format(limit=max_documents)
        elif isinstance(event, _OPEN):
            depth += 1
            if depth > max_depth:
                return YAML_TOO_DEEP.format(limit=max_depth)
        elif isinstance(event, _CLOSE):
            depth -= 1
    return None


def _tag_for_humans(tag: str) -> str:
    prefix = "tag:yaml.org,2002:"
    return "!!" + tag[len(prefix) :] if tag.startswith(prefix) else tag


def _syntax_message(error: yaml.YAMLError) -> str:
    problem = getattr(error, "problem", None) or getattr(error, "context", None)
    if not problem:
        lines = str(error).splitlines()
        problem = lines[0] if lines else "unreadable"
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    if mark is None:
        return YAML_SYNTAX.format(problem=problem)
    return YAML_SYNTAX_AT.format(problem=problem, line=mark.line + 1, column=mark.column + 1)


def yaml_load_untrusted(text: str, *, max_depth: int = MAX_DEPTH) -> Any:
    """Parse one YAML document of plain data; raise UntrustedYAMLError otherwise."""
    documents = _load(text, max_depth, 1)
    return documents[0] if documents else None


def yaml_load_all_untrusted(
    text: str, *, max_documents: int, max_depth: int = MAX_DEPTH
) -> list[Any]:
    """Parse up to `max_documents` YAML documents of plain data (`---` apart), empty ones left
    out; raise UntrustedYAMLError otherwise."""
    return [document for document in _load(text, max_depth, max_documents) if document is not None]


def _load(text: str, max_depth: int, max_documents: int) -> list[Any]:
    try:
        refusal = _shape_check(text, max_depth, max_documents)
        if refusal is None:
            return list(yaml.load_all(text, Loader=_UntrustedLoader))  # noqa: S506 (a SafeLoader)
    except _TagRefused as error:
        raise UntrustedYAMLError(
            YAML_TAG_FORBIDDEN.format(tag=_tag_for_humans(error.tag))
        ) from error
    except yaml.YAMLError as error:
        raise UntrustedYAMLError(_syntax_message(error)) from error
    except RecursionError as error:  # a safety net: the depth check should come first
        raise UntrustedYAMLError(YAML_TOO_DEEP.format(limit=max_depth)) from error
    except (ValueError, TypeError, OverflowError) as error:
        # e.g. an integer longer than Python's int/str conversion limit, a bad !!binary.
        first_clause = str(error).split(";")[0]
        raise UntrustedYAMLError(YAML_VALUE_INVALID.format(error=first_clause)) from error
    raise UntrustedYAMLError(refusal)
