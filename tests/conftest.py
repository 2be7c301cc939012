"""Shared test helpers: running the CLI in-process, fixture paths, real broker files.

Two kinds of tests depend on what is on the machine: the real-file tests need the broker-written
files of ``../shared/fixtures-real`` (or ``KAFKATOOL_REAL_FIXTURES=DIR``), the compiled-path tests
need the C extension. Without them those tests skip, and the run ends with one line per kind
saying so and why. Under CI (the environment variable ``CI`` set, as CI services do) a skip is not
enough: the run stops at start-up when either is missing (unless ``KAFKATOOL_PURE`` switched
the extension off on purpose), and a single missing real file fails its test.
"""

from __future__ import annotations

import os
import re
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
#: The real broker-written files: ``KAFKATOOL_REAL_FIXTURES`` (relative to the working directory),
#: else ``../shared/fixtures-real`` beside the repository.
REAL = Path(os.path.abspath(os.environ.get("KAFKATOOL_REAL_FIXTURES") or SHARED / "fixtures-real"))
#: Under CI a missing extension or missing real files fail the run instead of skipping tests.
IN_CI = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
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


def run_with_pty_stderr(args: list[str], stdout_path: Path) -> tuple[int, bytes]:
    """``kafkatool ARGS...`` as a process with standard output in ``stdout_path`` and standard
    error a terminal (so progress bars show), 100 columns: its exit code and what the terminal got."""
    import pty
    import subprocess

    master, slave = pty.openpty()
    with open(stdout_path, "wb") as out:
        p = subprocess.Popen([sys.executable, "-m", "kafkatool", *args], stdout=out, stderr=slave,
                             stdin=subprocess.DEVNULL, cwd=REPO,
                             env={**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "100", "TERM": "xterm"})
        os.close(slave)
        got = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            got += chunk
        code = p.wait(timeout=120)
    os.close(master)
    return code, got


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


#: Skip reasons that mean "this machine lacks the Spark extra or a JVM" (CI installs both: it fails instead).
_SPARK_SKIP = re.compile(r"Spark tests need")


def spark_missing() -> str | None:
    """Why the Spark tests cannot run here (pyspark/pyarrow not installed, no ``java``), or None."""
    import importlib.util
    import shutil

    for mod in ("pyspark", "pyarrow", "pandas"):
        if importlib.util.find_spec(mod) is None:
            return f"Spark tests need the spark extra ({mod} is not installed: pip install -e '.[test,spark]')"
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "Spark tests need a Java runtime (no java on PATH and JAVA_HOME unset)"
    return None


@pytest.fixture(scope="session")
def spark():
    """One ``local[2]`` SparkSession for the whole run, with the kafka_segments source registered.

    Skips (fails under CI) when the spark extra or Java is missing."""
    why = spark_missing()
    if why:
        pytest.skip(why)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("kafkatool-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    try:
        from kafkatool.spark import register
    except ImportError:
        register = None
    if register is not None:
        register(session)
    yield session
    session.stop()


def real_fixture(rel: str) -> Path:
    """A file under the real fixtures (:data:`REAL`), or skip the test when it is not there (fail under CI)."""
    path = REAL / rel
    if not path.exists():
        if IN_CI:
            pytest.fail(f"real fixture {rel} is missing from {REAL} (CI runs every real-file test)")
        pytest.skip(f"real fixture {rel} is not available")
    return path


@pytest.fixture
def real():
    """The real broker-written files, or skip when :data:`REAL` is absent."""
    if not REAL.is_dir():
        pytest.skip(f"real fixtures: {REAL} is not present")
    return REAL


def _extension() -> tuple[bool, str]:
    from kafkatool.record import speedups

    return speedups.status()


def _purposely_pure() -> bool:
    from kafkatool.record import speedups

    return speedups.switched_off_by() is not None


def pytest_report_header(config):
    in_use, why = _extension()
    return [
        f"kafkatool fixtures: {FIXTURES}",
        f"real fixtures: {REAL if REAL.is_dir() else f'absent ({REAL})'}",
        f"compiled extension: {'in use' if in_use else why}",
    ]


def pytest_configure(config):
    if not IN_CI:
        return
    problems = []
    in_use, why = _extension()
    if not in_use and not _purposely_pure():
        problems.append(
            f"the compiled extension kafkatool.record._speedups is not in use: {why}; its tests would be "
            "skipped. Build it (`python -m pip install -e .`, or `python setup.py build_ext --inplace`)."
        )
    if not REAL.is_dir():
        problems.append(
            f"the real broker files are missing: {REAL} is not a directory; the real-file tests would be "
            "skipped. Put ../shared beside the repository or set KAFKATOOL_REAL_FIXTURES=DIR."
        )
    if problems:
        raise pytest.UsageError("CI is set, and CI does not skip tests:\n  " + "\n  ".join(problems))


# Skip reasons that mean "this machine lacks something CI must have".
_REAL_SKIP = re.compile(r"real fixture|fixtures-real")
_COMPILED_SKIP = re.compile(r"compiled extension|C extension|_speedups")


def _skip_reason(report) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr or "")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not (IN_CI and report.skipped) or hasattr(report, "wasxfail"):
        return
    reason = _skip_reason(report)
    if (_REAL_SKIP.search(reason) or _SPARK_SKIP.search(reason)
            or (_COMPILED_SKIP.search(reason) and not _purposely_pure())):
        report.outcome = "failed"
        report.longrepr = f"CI does not skip: {reason}"


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """One line per kind of test this machine could not run, and why (never silent); after the
    short test summary, so it is the last thing before the counts."""
    try:
        return (yield)
    finally:
        _skip_summary(terminalreporter)


def _skip_summary(terminalreporter) -> None:
    reasons = [_skip_reason(r) for r in terminalreporter.stats.get("skipped", [])]
    real = sum(1 for r in reasons if _REAL_SKIP.search(r))
    compiled = sum(1 for r in reasons if _COMPILED_SKIP.search(r) and not _REAL_SKIP.search(r))
    if real:
        where = f"{REAL} is not present" if not REAL.is_dir() else f"some files are missing from {REAL}"
        terminalreporter.write_line(
            f"kafkatool: {real} real-file tests skipped: {where} "
            "(put ../shared beside the repository or set KAFKATOOL_REAL_FIXTURES=DIR)",
            yellow=True,
        )
    if compiled:
        _in_use, why = _extension()
        terminalreporter.write_line(
            f"kafkatool: {compiled} compiled-path tests skipped: the C extension is not in use ({why})", yellow=True
        )


sys.path.insert(0, str(REPO))
