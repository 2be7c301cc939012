"""Shared test helpers: running the CLI in-process, fixture paths, real broker files."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Shared machines and CI run slower now and then: no per-example deadline (a slow example
# is not a failure), and no health check for slow data generation.
settings.register_profile("kafkatool", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("kafkatool")

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures" / "logdir"
SHARED = REPO.parent / "shared"
REAL = SHARED / "fixtures-real"
SPEC = SHARED / "spec" / "kafka-reference.md"


class Result:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code = code
        self.out = out
        self.err = err

    @property
    def lines(self) -> list[str]:
        return self.out.splitlines()

    def __repr__(self) -> str:
        return f"Result(code={self.code}, out={self.out[:300]!r}, err={self.err[:300]!r})"


@pytest.fixture
def run(capsys):
    """Run ``kafkatool ARGS...`` in-process; return code, stdout and stderr."""
    from kafkatool.cli.main import main

    def _run(*args: str) -> Result:
        capsys.readouterr()
        try:
            main(list(args))
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return _run


def real_fixture(rel: str) -> Path:
    """A file under ../shared/fixtures-real, or skip the test when it is not there."""
    path = REAL / rel
    if not path.exists():
        pytest.skip(f"real fixture {rel} is not available")
    return path


@pytest.fixture
def real():
    """The real broker-written files, or skip when ../shared/fixtures-real is absent."""
    if not REAL.is_dir():
        pytest.skip("../shared/fixtures-real is not present")
    return REAL


def pytest_report_header(config):
    return [f"kafkatool fixtures: {FIXTURES}", f"real fixtures: {REAL if REAL.is_dir() else 'absent'}"]


sys.path.insert(0, str(REPO))
