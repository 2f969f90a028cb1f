"""plotly.js from the installed plotly package, served as the static file
``vendor/plotly.min.js``: the same build the Python charts are made for, and no 4.7 MB copy in
the repository. Found by this finder in development and tests (whitenoise uses the finders
there) and copied by ``collectstatic`` for production like any other static file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.contrib.staticfiles.finders import BaseFinder
from django.core.files.storage import FileSystemStorage

STATIC_PATH = "vendor/plotly.min.js"


def plotly_js() -> Path:
    import plotly

    return Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js"


class PlotlyFinder(BaseFinder):
    def check(self, **kwargs: Any) -> list[Any]:
        if not plotly_js().is_file():
            from django.core.checks import Error

            return [Error(f"plotly.js missing from the plotly package: {plotly_js()}")]
        return []

    def find(self, path: str, find_all: bool = False, **kwargs: Any) -> str | list[str] | None:
        # Django 5.2 renamed ``all`` to ``find_all``; accept both.
        find_all = find_all or kwargs.get("all", False)
        if path == STATIC_PATH:
            return [str(plotly_js())] if find_all else str(plotly_js())
        return [] if find_all else None

    def list(self, ignore_patterns: Any) -> Any:
        storage = FileSystemStorage(location=str(plotly_js().parent))
        storage.prefix = "vendor"  # type: ignore[attr-defined]  # read by collectstatic
        yield "plotly.min.js", storage
