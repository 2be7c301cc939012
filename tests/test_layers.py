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


# --------------------------------------------------------------------------- private names stay private


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


#: The one sanctioned private import: the loader of the optional compiled extension (record/speedups.py).
PRIVATE_MODULE_LOADERS = {("kafkatool.record.speedups", "kafkatool.record._speedups")}


def private_uses(path: Path, name: str) -> list[str]:
    """Every ``_name`` of another kafkatool module that ``path`` (module ``name``) imports or reads."""
    tree = ast.parse(path.read_text())
    package = name.rsplit(".", 1)[0] if path.name != "__init__.py" else name
    found: list[str] = []
    modules: dict[str, str] = {}  # local name -> kafkatool module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if not source.startswith("kafkatool"):
                continue
            for alias in node.names:
                full = f"{source}.{alias.name}"
                if (name, full) in PRIVATE_MODULE_LOADERS:
                    continue
                if _private(alias.name) or any(_private(p) for p in source.split(".")):
                    found.append(f"line {node.lineno}: from {source} import {alias.name}")
                modules[alias.asname or alias.name] = full
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("kafkatool"):
                    if any(_private(p) for p in alias.name.split(".")):
                        found.append(f"line {node.lineno}: import {alias.name}")
                    modules[alias.asname or alias.name.split(".")[0]] = alias.asname and alias.name or "kafkatool"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr) and isinstance(node.value, ast.Name):
            if node.value.id in modules:
                found.append(f"line {node.lineno}: {node.value.id}.{node.attr} ({modules[node.value.id]})")
    return found


@pytest.mark.parametrize("path,name", list(modules()))
def test_no_module_uses_another_modules_private_name(path: Path, name: str) -> None:
    uses = private_uses(path, name)
    assert not uses, f"{name} uses private names of other modules: {uses}"


def test_the_private_name_check_catches_what_it_guards(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from kafkatool.repair import _secret, public\n"
        "from .walk import _decode_entry\n"
        "from kafkatool.segment import files as names\n"
        "import kafkatool.record._speedups\n"
        "x = names._name('a')\n"
        "y = names.parse_base_offset('a')\n"
    )
    uses = private_uses(probe, "kafkatool.segment.probe")
    assert len(uses) == 4, uses
    assert any("_secret" in u for u in uses) and any("kafkatool.segment.walk" in u for u in uses)
    assert any("names._name" in u for u in uses) and any("import kafkatool.record._speedups" in u for u in uses)
