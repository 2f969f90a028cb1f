"""docs/architecture.md against the code: its layers are the layers contract's, each contract
it names exists, and every module or function it names is there."""

import importlib
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "architecture.md").read_text()
CONTRACTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"][
    "contracts"
]
PACKAGES = ("jobspec", "portal", "scheduler")


def test_the_layers_drawn_are_the_layers_contract():
    (layers,) = [
        c["layers"] for c in CONTRACTS if c["type"] == "layers" and "One direction" in c["name"]
    ]
    drawing = DOC.split("```")[1]
    drawn = [
        line.split("  ")[0].strip() for line in drawing.splitlines() if line.startswith(PACKAGES)
    ]
    assert drawn == layers


def test_every_contract_named_exists():
    named = re.findall(r"(?<!\*)\*([A-Z][^*]+?)\*(?!\*)", DOC)
    assert named, "the page names the contracts it describes"
    for name in named:
        name = " ".join(name.split()).rstrip(". ")
        assert any(c["name"].startswith(name) for c in CONTRACTS), name


def _resolves(path: str) -> bool:
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(target, attribute):
                return False
            target = getattr(target, attribute)
        return True
    return False


def test_every_module_and_function_named_exists():
    names = {
        name.split("(")[0]
        for name in re.findall(r"`([a-z][\w.]*(?:\([^`]*\))?)`", DOC)
        if name.startswith(tuple(f"{p}." for p in PACKAGES))
    }
    assert len(names) > 30, names
    assert sorted(name for name in names if not _resolves(name)) == []
