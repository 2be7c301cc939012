"""Dependencies point one way (STYLE.md): errors <- record <- segment <- operations <- render <- cli.
Only cli imports click; only render and cli import rich; nothing but spark imports pyspark."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "kafkatool"

LAYER = {"errors": 0, "record": 1, "segment": 2, "operations": 3, "render": 4, "cli": 5}


def layer_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "kafkatool" or len(parts) == 1:
        return None
    head = parts[1]
    if head in ("errors", "record", "segment", "render", "cli"):
        return head
    if head in ("__init__", "__main__"):
        return None
    return "operations"  # dump.py, verify.py, repair.py, ...


def imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
    return out


def modules():
    for p in sorted(PKG.rglob("*.py")):
        rel = p.relative_to(PKG.parent).with_suffix("")
        yield pytest.param(p, ".".join(rel.parts), id=str(rel))


@pytest.mark.parametrize("path,name", list(modules()))
def test_dependencies_point_one_way(path: Path, name: str):
    mine = layer_of(name)
    for imported in imports(path):
        top = imported.split(".")[0]
        if top == "click":
            assert mine == "cli", f"{name} imports click"
        if top == "rich":
            assert mine in ("render", "cli"), f"{name} imports rich"
        if top == "pyspark":
            assert name.startswith("kafkatool.spark"), f"{name} imports pyspark"
        theirs = layer_of(imported)
        if mine is None or theirs is None:
            continue
        assert LAYER[theirs] <= LAYER[mine], f"{name} ({mine}) imports {imported} ({theirs})"
