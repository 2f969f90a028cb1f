"""Errors raised by services that are not plain input validation."""

from typing import Any


class ApplicationError(Exception):
    """A business rule was broken in a way that is not tied to one input field."""

    def __init__(self, message: str, extra: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.extra = extra or {}
