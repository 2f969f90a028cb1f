"""Walking nested dicts and lists by paths of keys and indexes (the fuzz tests mutate a valid
document at one path)."""

import copy
from collections.abc import Iterator
from typing import Any

Path = tuple[Any, ...]


def paths(data: Any, path: Path = ()) -> Iterator[Path]:
    """Every path below `data`, parents before children; `()` (the whole) excluded."""
    if isinstance(data, dict):
        items = data.items()
    elif isinstance(data, list):
        items = enumerate(data)
    else:
        return
    for key, value in items:
        yield (*path, key)
        yield from paths(value, (*path, key))


def copy_at(data: Any, path: Path) -> tuple[Any, Any]:
    """A deep copy of `data`, and the container in the copy that holds `path`'s last step."""
    copied = copy.deepcopy(data)
    parent = copied
    for step in path[:-1]:
        parent = parent[step]
    return copied, parent
