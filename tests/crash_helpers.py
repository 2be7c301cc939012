"""The SIGKILL-at-every-step driver shared by the reindex and truncate crash tests.

``KAFKATOOL_FAULT_AT=n`` makes the n-th write step of an ``--execute`` run kill its own
process with SIGKILL (kafkatool.safety.fault_point). The driver runs the command once per
n on a fresh copy of the old state until a run gets through, and after each kill checks the
promise of the whole-dir exchange: the partition dir is, file names and bytes, exactly the
complete old state or exactly the complete new one, and the log dir holds nothing else but
kafkatool's staging dir (named like a partition being deleted).
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Callable

from kafkatool.repair import NO_EXCHANGE_ENV, is_staging_dir, staging_dir_name


def whole_state(part: Path) -> dict[str, bytes]:
    """Every entry of a partition dir, name -> bytes; it must hold regular files only."""
    out = {}
    for p in sorted(part.iterdir()):
        assert p.is_file() and not p.is_symlink(), f"{p} is not a regular file"
        out[p.name] = p.read_bytes()
    return out


def other_dirs(part: Path) -> list[Path]:
    """The directories of the log dir other than the partition dir."""
    return sorted(d for d in part.parent.iterdir() if d.is_dir() and d != part)


def kafkatool(*args: str, fault_at: int | None = None, no_exchange: bool = False, interrupt_at: int | None = None,
              stderr: bool = False, user: int | None = None) -> subprocess.CompletedProcess:
    """Run the CLI in a forked child of the test process (the modules are already imported:
    milliseconds instead of a fresh interpreter per step); ``fault_at`` arms the SIGKILL,
    ``interrupt_at`` a SIGINT (a Ctrl-C) at that step instead. ``stderr``: capture it too (else
    it goes to /dev/null); ``user``: run as that uid (and gid), for permission tests as root.
    Returns the child's exit status (negative: killed by that signal) and its output."""
    import importlib
    import tempfile

    from kafkatool import safety
    from kafkatool.cli.main import main

    if user is not None:  # another user may not read this interpreter's site-packages: import first
        for module in ("click", "kafkatool.cli.group", f"kafkatool.cli.{args[0]}", "kafkatool.truncate",
                       "kafkatool.repair", "kafkatool.verify", "kafkatool.segment.zeros"):
            importlib.import_module(module)

    out_r, out_w = os.pipe()
    err_file = tempfile.TemporaryFile() if stderr else None
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 70
        try:
            os.close(out_r)
            os.dup2(out_w, 1)
            os.dup2(err_file.fileno() if err_file is not None else os.open(os.devnull, os.O_WRONLY), 2)
            # pytest's capture replaced sys.stdout/sys.stderr: write to the real descriptors
            sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8")
            sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8")
            os.environ.pop("KAFKATOOL_FAULT_AT", None)
            os.environ.pop(NO_EXCHANGE_ENV, None)
            step = interrupt_at if interrupt_at is not None else fault_at
            if step is not None:
                os.environ["KAFKATOOL_FAULT_AT"] = str(step)
            if interrupt_at is not None:  # the fault point's SIGKILL of itself becomes a Ctrl-C
                real_kill = os.kill
                signal.signal(signal.SIGINT, signal.default_int_handler)
                os.kill = lambda p, sig: real_kill(p, signal.SIGINT if sig == signal.SIGKILL else sig)
            if no_exchange:
                os.environ[NO_EXCHANGE_ENV] = "1"
            if user is not None:
                os.setgroups([])
                os.setgid(user)
                os.setuid(user)
            safety.reset_fault_count()
            try:
                main(list(args))
                code = 0
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    os.close(out_w)
    with os.fdopen(out_r, "r", encoding="utf-8", errors="surrogateescape") as f:
        out = f.read()
    _pid, status = os.waitpid(pid, 0)
    code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    err = ""
    if err_file is not None:
        err_file.seek(0)
        err = err_file.read().decode("utf-8", "surrogateescape")
        err_file.close()
    return subprocess.CompletedProcess(args, code, out, err)


def sigkill_every_step_strictly(
    tmp_path: Path,
    fresh: Callable[[str], Path],
    command: list[str],
    restore: Callable[[Path], None],
) -> tuple[int, Counter]:
    """Kill ``kafkatool <command> --execute`` at every step; after each kill assert the strict
    old-or-new promise, then that a second run removes the staging leftover and ends in the
    new state, and that the backup restores the original byte for byte.

    ``fresh(label)`` makes a copy of the old state (a partition dir in a log dir of its own).
    Returns the number of steps and a count of the ``(state, staging dir left)`` seen.
    """
    ref = fresh("ref")
    old = whole_state(ref)
    r = kafkatool(*command, "--execute", "--format", "jsonl", "--backup-dir", str(tmp_path / "ref-bk"), str(ref))
    assert r.returncode == 0, r
    methods = {json.loads(line).get("method") for line in r.stdout.splitlines()} - {None}
    assert methods == {"exchange"}, methods
    new = whole_state(ref)
    assert new != old and other_dirs(ref) == []
    seen: Counter = Counter()
    n = 0
    while True:
        n += 1
        part = fresh(f"run{n}")
        bk, bk2 = tmp_path / f"bk{n}", tmp_path / f"bk{n}-again"
        p = kafkatool(*command, "--execute", "--quiet", "--backup-dir", str(bk), str(part), fault_at=n)
        if p.returncode == 0:
            break
        assert p.returncode == -signal.SIGKILL, (n, p)
        now = whole_state(part)
        assert now == old or now == new, f"step {n}: the partition dir is neither the old state nor the new one"
        staging = other_dirs(part)
        assert [d.name for d in staging] in ([], [staging_dir_name(str(part))]), (n, staging)
        assert all(is_staging_dir(str(d)) for d in staging)
        seen["new" if now == new else "old", bool(staging)] += 1
        if staging:  # the dry run reports the leftover and changes nothing
            dry = kafkatool(*command, str(part))
            assert dry.returncode == 1 and str(staging[0]) in dry.stdout, (n, dry)
            assert whole_state(part) == now and other_dirs(part) == staging
        again = kafkatool(*command, "--execute", "--quiet", "--backup-dir", str(bk2), str(part))
        assert again.returncode == 0, (n, again)
        assert whole_state(part) == new, n
        assert other_dirs(part) == [], n
        assert kafkatool(*command, str(part)).returncode == 0, n
        # the backup of the run that switched the partition dir restores the original byte for byte
        if now == new:
            assert not bk2.exists(), n  # the second run only removed the staging dir
        restore(bk if now == new else bk2)
        assert whole_state(part) == old, n
    assert whole_state(part) == new and other_dirs(part) == []
    return n, seen
