"""Digests of a cycle's outcome, so "the same decisions" between two versions or two runs is
checked, not assumed (`python -m scheduler bench --digest`, `bench.core_instructions`).

`decisions` covers what the cycle does to the cluster: every bind (job, task, node, devices),
eviction and pipelined task; `reasons` covers what it tells users: every pending job's reason
and its kind. Both read the result's fields by name, so they work on older checkouts' results
too (a field a version lacks counts as empty).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, is_dataclass
from typing import Any

DIGEST_CHARS = 16


def decisions_digest(result: Any) -> str:
    return _digest(
        {
            name: sorted(_row(item) for item in getattr(result, name, ()))
            for name in ("binds", "evictions", "pipelined")
        }
    )


def reasons_digest(result: Any) -> str:
    return _digest(
        {
            "reasons": sorted(getattr(result, "pending_reasons", {}).items()),
            "kinds": sorted(getattr(result, "pending_kinds", {}).items()),
        }
    )


def _row(item: Any) -> str:
    fields = asdict(item) if is_dataclass(item) and not isinstance(item, type) else vars(item)
    return json.dumps(fields, sort_keys=True, default=str)


def _digest(data: dict[str, Any]) -> str:
    text = json.dumps(data, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:DIGEST_CHARS]
