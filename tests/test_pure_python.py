"""The suite in the configurations CI must cover besides the default one, each in a child pytest:

- without the compiled extension (``KAFKATOOL_PURE=1``): the tests of every operation whose
  hot loop has a C twin (the walk, the record decoder, the indexing loop, the CRC) pass on the
  pure-Python paths too, against the same independent expectations (golden files, kafka-python,
  real broker files). ``tests/test_verify.py`` already runs every check on both scan paths and
  ``tests/test_index_compiled.py`` compares the two indexing loops, so they are not repeated here;
- the harness itself: under CI a missing extension or missing real files stop the run instead of
  skipping hundreds of tests, and outside CI the run ends saying what it skipped and why.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kafkatool.record import speedups

REPO = Path(__file__).resolve().parents[1]

#: Run again without the extension: every file whose tests go through a compiled fast path
#: end to end and compare with an expectation that does not come from that path.
PURE_PYTHON_FILES = [
    "tests/test_record.py",
    "tests/test_fixtures.py",
    "tests/test_dump_golden.py",
    "tests/test_dump_edges.py",
    "tests/test_index.py",
    "tests/test_independent_indexes.py",
    "tests/test_txnindex_snapshot.py",
    "tests/test_reindex.py",
    "tests/test_reindex_hardening.py",
    "tests/test_truncate.py",
    "tests/test_truncate_hardening.py",
    "tests/test_real_fixtures.py",
    "tests/test_fuzz.py",
    "tests/test_framing.py",
    "tests/test_logdir.py",
    "tests/test_encode_bulk.py",
    "tests/test_convert_rules.py",
    "tests/test_convert_real.py",
]
#: Left out of the pure-Python run: the SIGKILL-at-every-step tests check the crash safety of the
#: apply step (the same code on both paths) and take half a minute; the speed tests measure the
#: compiled paths. Both run once, with the extension, in the main run.
PURE_PYTHON_DESELECT = "not sigkill and not speed"


def _env(*, ci: bool | None = None, **extra: str) -> dict[str, str]:
    """The environment for a child pytest; ``ci`` None keeps the parent's ``CI``."""
    env = {k: v for k, v in os.environ.items() if k not in (*speedups.ENV_VARS, "PYTEST_ADDOPTS")}
    if ci is False:
        env.pop("CI", None)
    elif ci:
        env["CI"] = "true"
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def _pytest(
    args: list[str], env: dict[str, str], prelude: str = "", timeout: float = 600, quiet: bool = True
) -> subprocess.CompletedProcess:
    code = textwrap.dedent(prelude) + "\nimport sys, pytest\nsys.exit(pytest.main(sys.argv[1:]))\n"
    return subprocess.run(
        [sys.executable, "-c", code, *(["-q"] if quiet else []), "-p", "no:cacheprovider", *args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout,
    )


def _tail(result: subprocess.CompletedProcess, lines: int = 40) -> str:
    return "\n".join((result.stdout + result.stderr).splitlines()[-lines:])


# --------------------------------------------------------------------------- without the extension


@pytest.mark.skipif(not speedups.status()[0], reason="this run is pure Python already: nothing to compare")
def test_the_operations_pass_without_the_extension() -> None:
    args = [*PURE_PYTHON_FILES, "-k", PURE_PYTHON_DESELECT]
    result = _pytest(args, _env(KAFKATOOL_PURE="1"), quiet=False)
    assert result.returncode == 0, f"pure-Python run failed:\n{_tail(result)}"
    # the child really ran without it: its header says so
    assert "compiled extension: disabled by KAFKATOOL_PURE=1" in result.stdout, _tail(result)


def test_the_pure_python_files_exist() -> None:
    """A renamed test file must not silently drop out of the pure-Python run."""
    missing = [f for f in PURE_PYTHON_FILES if not (REPO / f).is_file()]
    assert not missing


# --------------------------------------------------------------------------- the harness under CI

# Makes ``kafkatool.record._speedups`` unimportable, as on a machine where it did not build.
_NO_EXTENSION = """
import importlib.abc, sys

class NotBuilt(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "kafkatool.record._speedups":
            raise ImportError("No module named 'kafkatool.record._speedups' (blocked by the test)")
        return None

sys.meta_path.insert(0, NotBuilt())
"""


def test_ci_stops_when_the_extension_did_not_build() -> None:
    result = _pytest(["tests/test_layers.py"], _env(ci=True), prelude=_NO_EXTENSION)
    assert result.returncode != 0, _tail(result)
    assert "the compiled extension kafkatool.record._speedups is not in use" in result.stderr, _tail(result)


def test_ci_stops_when_the_real_files_are_missing(tmp_path: Path) -> None:
    result = _pytest(["tests/test_layers.py"], _env(ci=True, KAFKATOOL_REAL_FIXTURES=str(tmp_path / "absent")))
    assert result.returncode != 0, _tail(result)
    assert f"{tmp_path / 'absent'} is not a directory" in result.stderr, _tail(result)


def test_ci_accepts_a_pure_python_run_on_purpose() -> None:
    """The pure-Python run above also runs under CI: switching the extension off is not a failure."""
    result = _pytest(["tests/test_layers.py"], _env(ci=True, KAFKATOOL_PURE="1"))
    assert result.returncode == 0 or "real broker files are missing" in result.stderr, _tail(result)
    assert "compiled extension kafkatool.record._speedups is not in use" not in result.stderr


def test_ci_fails_a_single_missing_real_file(tmp_path: Path) -> None:
    """The real-fixture directory exists but lacks a file a test needs: under CI that test fails."""
    (tmp_path / "real").mkdir()
    env = _env(ci=True, KAFKATOOL_REAL_FIXTURES=str(tmp_path / "real"))
    result = _pytest(["tests/test_index.py", "-k", "test_real_"], env)
    assert result.returncode == 1, _tail(result)
    assert "is missing from" in result.stdout and " skipped" not in result.stdout.splitlines()[-1], _tail(result)


# --------------------------------------------------------------------------- outside CI: skipped, and said so


def test_without_real_files_the_run_says_what_it_skipped(tmp_path: Path) -> None:
    absent = tmp_path / "absent"
    result = _pytest(["tests/test_real_fixtures.py", "tests/test_index.py"], _env(ci=False, KAFKATOOL_REAL_FIXTURES=str(absent)))
    assert result.returncode == 0, _tail(result)
    last = result.stdout.rstrip().splitlines()
    assert " skipped" in last[-1]
    assert last[-2].startswith("kafkatool: ") and f"real-file tests skipped: {absent} is not present" in last[-2], _tail(result)


def test_real_fixtures_can_live_elsewhere(tmp_path: Path) -> None:
    """``KAFKATOOL_REAL_FIXTURES=DIR`` is where the real-file tests look (here: a link to the usual place)."""
    from conftest import REAL

    if not REAL.is_dir():
        pytest.skip(f"real fixtures: {REAL} is not present")
    (tmp_path / "elsewhere").symlink_to(REAL, target_is_directory=True)
    env = _env(ci=False, KAFKATOOL_REAL_FIXTURES=str(tmp_path / "elsewhere"))
    result = _pytest(["tests/test_real_fixtures.py"], env, quiet=False)
    assert result.returncode == 0 and "skipped" not in result.stdout, _tail(result)
    assert f"real fixtures: {tmp_path / 'elsewhere'}" in result.stdout


def test_without_the_extension_the_run_says_what_it_skipped() -> None:
    result = _pytest(["tests/test_index_compiled.py"], _env(ci=False), prelude=_NO_EXTENSION)
    assert result.returncode == 0, _tail(result)
    last = result.stdout.rstrip().splitlines()
    assert last[-2].startswith("kafkatool: ") and "compiled-path tests skipped: the C extension is not in use (not built" in last[-2], _tail(result)
