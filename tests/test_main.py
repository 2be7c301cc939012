"""The process entry point (kafkatool.cli.main): Ctrl-C, a full disk, a closed pipe, ``--version``
and shell completion, each as a user meets it — real signals and real devices in a child process."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "fixtures" / "logdir" / "golden-0" / "00000000000000000000.log"
ALL_LOGS = sorted(str(p) for p in (REPO / "fixtures" / "logdir").glob("*/*.log"))


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KAFKATOOL_PURE", "KAFKATOOL_PURE_PYTHON", "_KAFKATOOL_COMPLETE")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def _kafkatool(*args: str, **kwargs) -> subprocess.CompletedProcess:
    kwargs.setdefault("stdout", subprocess.PIPE)
    return subprocess.run(
        [sys.executable, "-m", "kafkatool", *args],
        cwd=REPO, env=kwargs.pop("env", _env()), stderr=subprocess.PIPE, text=True, timeout=60, **kwargs,
    )


def _interrupt_when_ready(code: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a child; when it prints ``ready``, send it SIGINT (what Ctrl-C does)."""
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=REPO, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        line = child.stdout.readline()
        assert line == "ready\n", (line, child.stderr.read() if child.poll() is not None else "")
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    return subprocess.CompletedProcess(child.args, child.returncode, out, err)


# A finder that stops the import of click (the first thing the entry point loads that takes
# time) until the test interrupts it: a Ctrl-C in the middle of start-up.
_SLOW_CLICK = """
import importlib.abc, sys, time

class SlowClick(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "click":
            print("ready", flush=True)
            time.sleep(30)
        return None

sys.meta_path.insert(0, SlowClick())
"""


@pytest.mark.parametrize(
    "launch",
    [
        # what `python -m kafkatool` does
        'sys.argv = ["kafkatool", "--version"]\nimport runpy\nrunpy.run_module("kafkatool", run_name="__main__", alter_sys=True)',
        # what the console script pip writes does
        'sys.argv = ["kafkatool", "--version"]\nfrom kafkatool.cli.main import main\nsys.exit(main())',
    ],
    ids=["python-m", "console-script"],
)
def test_ctrl_c_during_start_up_is_one_line_and_130(launch: str) -> None:
    result = _interrupt_when_ready(_SLOW_CLICK + launch)
    assert "Traceback" not in result.stderr
    assert result.stderr == "kafkatool: interrupted\n"
    assert result.returncode == 130


def test_ctrl_c_during_a_command_is_one_line_and_130() -> None:
    result = _interrupt_when_ready(
        """
        import time
        from kafkatool.cli.main import cli, main

        def slow(**_params):
            print("ready", flush=True)
            time.sleep(30)

        cli.commands["verify"].callback = slow
        main(["verify", "fixtures/logdir"])
        """
    )
    assert "Traceback" not in result.stderr and "Aborted" not in result.stderr
    assert result.stderr == "kafkatool: interrupted\n"
    assert result.returncode == 130


def test_keyboard_interrupt_in_process(run, monkeypatch) -> None:
    from kafkatool.cli.main import cli

    def interrupted(**_params):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli.commands["dump"], "callback", interrupted)
    result = run("dump", str(GOLDEN))
    assert (result.code, result.err) == (130, "kafkatool: interrupted\n")


def test_exit_code_130_is_documented() -> None:
    from kafkatool.cli.main import ExitCode

    assert ExitCode.INTERRUPTED == 130
    page = (REPO / "man" / "kafkatool.1").read_text(encoding="utf-8")
    assert ".TP\n.B \\fB130\\fP\nInterrupted" in page  # docutils' manpage writer: a bold term


# --------------------------------------------------------------------------- OS errors


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full on this system")
@pytest.mark.parametrize("command", [["dump", "--print-data-log", str(GOLDEN)], ["verify", "--format", "jsonl", str(GOLDEN.parent)]])
def test_a_full_disk_never_prints_an_empty_file_name(command: list[str]) -> None:
    with open("/dev/full", "w") as full:
        result = _kafkatool(*command, stdout=full)
    assert "Traceback" not in result.stderr
    assert ": :" not in result.stderr and "error: :" not in result.stderr
    assert result.stderr == f"kafkatool: error: No space left on device (while running kafkatool {command[0]})\n"
    assert result.returncode == 2


@pytest.mark.parametrize(
    "error, message",
    [
        (OSError(errno.ENOSPC, "No space left on device"), "No space left on device (while running kafkatool dump)"),
        (OSError(errno.EACCES, "Permission denied", "/data/t-0/0.log"), "/data/t-0/0.log: Permission denied"),
        (OSError(errno.EXDEV, "Invalid cross-device link", "/a/x", None, "/b/x"), "/a/x -> /b/x: Invalid cross-device link"),
        (OSError(errno.EIO, "Input/output error", b"/data/t-\xff/0.log"), "/data/t-\\xff/0.log: Input/output error"),
    ],
    ids=["no-file", "file", "two-files", "bytes-name"],
)
def test_os_error_messages(run, monkeypatch, error: OSError, message: str) -> None:
    from kafkatool.cli.main import cli

    def failing(**_params):
        raise error

    monkeypatch.setattr(cli.commands["dump"], "callback", failing)
    result = run("dump", str(GOLDEN))
    assert (result.code, result.err) == (2, f"kafkatool: error: {message}\n")


def test_a_closed_pipe_exits_0_quietly() -> None:
    """`kafkatool dump ... | head -1` under `set -o pipefail`: exit 0, nothing on stderr (as ripgrep)."""
    child = subprocess.Popen(
        [sys.executable, "-m", "kafkatool", "dump", "--print-data-log", *ALL_LOGS * 4],
        cwd=REPO, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    assert child.stdout.readline().startswith(b"Dumping ")
    child.stdout.close()  # the reader goes away with more than a pipe buffer still to come
    err = child.stderr.read()
    assert child.wait(timeout=60) == 0, err
    assert err == b""


# --------------------------------------------------------------------------- --version


def test_version_says_whether_the_accelerator_is_in_use() -> None:
    from kafkatool import __version__
    from kafkatool.record import speedups

    result = _kafkatool("--version")  # the child runs without the switch (_env drops it)
    assert result.returncode == 0, result.stderr
    if speedups.switched_off_by() is None:  # else this process cannot tell what the child loads
        in_use, why = speedups.status()
        expected = "yes" if in_use else f"no, {why}"
        assert result.stdout.startswith(f"kafkatool {__version__} (compiled accelerator: {expected}; Python ")

    result = _kafkatool("--version", env=_env(KAFKATOOL_PURE_PYTHON="1"))
    assert result.stdout.startswith(
        f"kafkatool {__version__} (compiled accelerator: no, disabled by KAFKATOOL_PURE_PYTHON=1; Python "
    )


@pytest.mark.parametrize(
    "env, said",
    [
        ({"KAFKATOOL_PURE": "1"}, "no, disabled by KAFKATOOL_PURE=1"),
        ({"KAFKATOOL_PURE": "yes", "KAFKATOOL_PURE_PYTHON": "1"}, "no, disabled by KAFKATOOL_PURE=yes"),  # the documented name first
        ({"KAFKATOOL_PURE": "0", "KAFKATOOL_PURE_PYTHON": "1"}, "no, disabled by KAFKATOOL_PURE_PYTHON=1"),
    ],
)
def test_version_names_the_switch_that_turned_the_accelerator_off(env, said) -> None:
    """``KAFKATOOL_PURE=1`` is the switch (issue 10); ``KAFKATOOL_PURE_PYTHON=1``, its older name, still works."""
    from kafkatool import __version__

    result = _kafkatool("--version", env=_env(**env))
    assert result.stdout.startswith(f"kafkatool {__version__} (compiled accelerator: {said}; Python "), result.stdout


def test_pure_switch_at_zero_or_empty_leaves_the_accelerator_on() -> None:
    from kafkatool.record import speedups

    if not speedups.status()[0]:
        pytest.skip("the C extension is not in use here")
    result = _kafkatool("--version", env=_env(KAFKATOOL_PURE="0", KAFKATOOL_PURE_PYTHON=" "))
    assert "(compiled accelerator: yes; Python " in result.stdout, result.stdout


def test_version_says_why_when_the_extension_did_not_build() -> None:
    code = textwrap.dedent(
        """
        import importlib.abc, sys

        class NotBuilt(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path, target=None):
                if name == "kafkatool.record._speedups":
                    raise ImportError("No module named 'kafkatool.record._speedups'")

        sys.meta_path.insert(0, NotBuilt())
        from kafkatool.cli.main import main
        main(["--version"])
        """
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=_env(), capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "(compiled accelerator: no, not built (No module named 'kafkatool.record._speedups'); Python " in result.stdout


@pytest.mark.parametrize("switch", ["KAFKATOOL_PURE", "KAFKATOOL_PURE_PYTHON"])
def test_pure_python_switch_reaches_every_fast_path(switch) -> None:
    """Every module with a compiled path takes the pure-Python one under KAFKATOOL_PURE_PYTHON=1,
    and no module imports the extension but the loader."""
    probe = (
        "import kafkatool.verify as v, kafkatool.repair as r, kafkatool.segment.walk as w, kafkatool.record.v2 as v2;"
        "import kafkatool.record.crc as c, sys;"
        "print(v._scan_fd, v._scan_v2, r._index_v2, w._fast_walk, v2._fast_decode_records,"
        " getattr(c._crc32c, '__module__', None), 'kafkatool.record._speedups' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, env=_env(**{switch: "1"}),
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout.split()
    assert out[:5] == ["None"] * 5
    assert out[6] == "False", "the extension was imported although switched off"
    for path in (REPO / "kafkatool").rglob("*.py"):
        if path.name == "speedups.py":
            continue
        text = path.read_text(encoding="utf-8")
        assert "record._speedups import" not in text and "import _speedups" not in text, path


# --------------------------------------------------------------------------- shell completion


def test_bash_completion_script_and_answers() -> None:
    script = _kafkatool(env=_env(_KAFKATOOL_COMPLETE="bash_source"))
    assert script.returncode == 0, script.stderr
    assert "complete -o nosort -F _kafkatool_completion kafkatool" in script.stdout
    answer = _kafkatool(env=_env(_KAFKATOOL_COMPLETE="bash_complete", COMP_WORDS="kafkatool ve", COMP_CWORD="1"))
    assert answer.stdout.split() == ["plain,verify"]
    answer = _kafkatool(env=_env(_KAFKATOOL_COMPLETE="bash_complete", COMP_WORDS="kafkatool dump --print-d", COMP_CWORD="2"))
    assert answer.stdout.split() == ["plain,--print-data-log"]


@pytest.mark.parametrize("shell, marker", [("zsh_source", "#compdef kafkatool"), ("fish_source", "complete --no-files --command kafkatool")])
def test_zsh_and_fish_completion_scripts(shell: str, marker: str) -> None:
    script = _kafkatool(env=_env(_KAFKATOOL_COMPLETE=shell))
    assert script.returncode == 0 and marker in script.stdout, script
