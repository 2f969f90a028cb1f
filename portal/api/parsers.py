"""Request body parsers with a size limit: JSON and YAML (safe loading, no aliases)."""

import json
from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser

from jobspec.volcano import DOCUMENTS_MAX
from portal.common.yamlsafe import UntrustedYAMLError, yaml_load_all_untrusted

from .errors import PayloadTooLarge

DEFAULT_MAX_BODY_BYTES = 256 * 1024
BODY_TOO_LARGE = "the request body is larger than {limit} bytes"
BODY_NOT_UTF8 = "the request body is not valid UTF-8"
BODY_INVALID_JSON = "malformed JSON: {error}"
BODY_TOO_DEEP = "the request body is nested too deeply"
BODY_INVALID_YAML = "malformed YAML: {error}"


def max_body_bytes() -> int:
    return int(getattr(settings, "API_MAX_BODY_BYTES", DEFAULT_MAX_BODY_BYTES))


def read_limited(stream: Any) -> str:
    """Read at most the configured limit (413 beyond it) and decode it as UTF-8."""
    limit = max_body_bytes()
    raw = stream.read(limit + 1) if stream is not None else b""
    if len(raw) > limit:
        raise PayloadTooLarge(BODY_TOO_LARGE.format(limit=limit))
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ParseError(BODY_NOT_UTF8) from error


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not a valid JSON number")


class LimitedJSONParser(BaseParser):
    media_type = "application/json"

    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        text = read_limited(stream)
        try:
            return json.loads(text, parse_constant=_reject_constant)
        except RecursionError as error:
            raise ParseError(BODY_TOO_DEEP) from error
        except ValueError as error:
            raise ParseError(BODY_INVALID_JSON.format(error=error)) from error


class YAMLDocuments(list):
    """A YAML body of several documents (`---` apart), in order: a Volcano Job with the
    PriorityClass or Queue it was written beside, say. A body of one document is that
    document itself."""


def yaml_load(text: str) -> Any:
    """Plain data (no aliases or application tags, bounded depth), else 400: one document as
    it is, several as YAMLDocuments."""
    try:
        documents = yaml_load_all_untrusted(text, max_documents=DOCUMENTS_MAX)
    except UntrustedYAMLError as error:
        raise ParseError(BODY_INVALID_YAML.format(error=error.message)) from error
    if len(documents) > 1:
        return YAMLDocuments(documents)
    return documents[0] if documents else None


class YAMLParser(BaseParser):
    """`application/yaml`, `text/yaml` (and the older x- spellings)."""

    media_type = "application/yaml"

    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        return yaml_load(read_limited(stream))


class TextYAMLParser(YAMLParser):
    media_type = "text/yaml"


class XYAMLParser(YAMLParser):
    media_type = "application/x-yaml"


YAML_PARSERS = [YAMLParser, TextYAMLParser, XYAMLParser]
