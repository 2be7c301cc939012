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


# --------------------------------------------------------------------------- what start-up imports


def _modules_after(code: str) -> set[str]:
    """Top-level names of the modules a fresh interpreter holds after running ``code``."""
    import os
    import subprocess
    import sys

    probe = f"{code}\nimport sys\nprint(' '.join(sorted({{m.split('.')[0] for m in sys.modules}})))"
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=PKG.parent, capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": str(PKG.parent)},
    )
    assert result.returncode == 0, result.stderr
    return set(result.stdout.split())


def test_the_entry_point_module_imports_only_the_standard_library() -> None:
    """``from kafkatool.cli.main import main`` (the console script's first line) loads no Click: a
    Ctrl-C during the imports then happens inside main(), which turns it into exit status 130."""
    loaded = _modules_after("import kafkatool.cli.main")
    assert not loaded & {"click", "rich", "lz4", "zstandard", "snappy", "crc32c"}, sorted(loaded)


def test_version_does_not_load_rich_or_the_codecs() -> None:
    loaded = _modules_after(
        "from kafkatool.cli.main import main\ntry:\n    main(['--version'])\nexcept SystemExit:\n    pass"
    )
    assert "click" in loaded
    assert not loaded & {"rich", "lz4", "zstandard", "snappy"}, sorted(loaded)
