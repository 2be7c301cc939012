"""``kafkatool restore BACKUP_DIR`` (issue 9): the plan, --execute, its refusals, and SIGKILL at every
step of a backup into a shared backup dir and of the restore itself.

Partitions are built as in test_safety.py (v2 batches, a CRC broken by hand); the expected state
after a restore is always the partition's own bytes (and owner and mode) from before the run.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from crash_helpers import kafkatool as forked
from kafkatool.cli.main import cli
from kafkatool.repair import is_staging_dir
from test_safety import (
    OTHER_UID,
    LockHolder,
    build_partition,
    files_of,
    kt,
    manifest_of,
    name,
    needs_root,
    restore_with_script,
    segment_bytes,
)


def cut_partition(tmp_path: Path, part_name: str = "t-0") -> tuple[Path, Path, dict[bytes, bytes]]:
    """A damaged partition truncated into ``tmp_path/bk``: (partition dir, backup dir, original files)."""
    part = build_partition(tmp_path / "logdir" / part_name)
    original = files_of(part)
    bk = tmp_path / "bk"
    r = kt("truncate", "--execute", "--backup-dir", bk, part)
    assert r.code == 0, r
    assert files_of(part) != original
    return part, bk, original


# --------------------------------------------------------------------------- plan and execute


def test_restore_plans_then_puts_everything_back_then_has_nothing_to_do(tmp_path: Path) -> None:
    part, bk, original = cut_partition(tmp_path)
    left = files_of(part)
    dry = kt("restore", bk)
    assert dry.code == 1, dry
    assert files_of(part) == left  # a dry run writes nothing
    assert f"{part / name(0, '.log')}:" in dry.out and "splice" in dry.out
    assert f"{part / name(18, '.log')}:" in dry.out and "copy" in dry.out
    assert "to put back" in dry.err and "--execute" in dry.err
    done = kt("restore", "--execute", bk)
    assert done.code == 0, done
    assert files_of(part) == original
    needing = [line for line in dry.out.splitlines() if not line.startswith(" ")]
    assert len(needing) == len({e["path"] for e in manifest_of(bk)["files"]})
    assert done.out.count("the original is back (sha256 verified)") == len(needing)
    again = kt("restore", bk)
    assert again.code == 0 and again.out == "" and "0 to put back" in again.err, again
    assert kt("restore", "--execute", bk).code == 0 and files_of(part) == original  # twice is harmless


def test_restore_jsonl(tmp_path: Path) -> None:
    part, bk, original = cut_partition(tmp_path)
    r = kt("restore", "--format", "jsonl", bk)
    assert r.code == 1, r
    lines = r.out.splitlines()
    assert all(", " not in line and '": ' not in line for line in lines)  # compact
    objs = [json.loads(line) for line in lines]
    files = [o for o in objs if o["type"] == "restore_file"]
    (summary,) = [o for o in objs if o["type"] == "restore_summary"]
    assert {o["relativePath"] for o in files} == {e["path"] for e in manifest_of(bk)["files"]}
    log = next(o for o in files if o["relativePath"] == f"t-0/{name(0, '.log')}")
    assert log["needsChanges"] and [s["action"] for s in log["steps"]] == ["splice"]
    assert log["path"] == str(part / name(0, ".log")) and log["logDir"] == str(part.parent)
    assert summary["needingChanges"] == sum(o["needsChanges"] for o in files) and summary["execute"] is False
    r = kt("restore", "--execute", "--format", "jsonl", "-q", bk)
    assert r.code == 0 and r.err == "", r
    assert all(o["restored"] == o["needsChanges"] for o in map(json.loads, r.out.splitlines()) if o["type"] == "restore_file")
    assert files_of(part) == original


def test_restore_after_reindex_removes_the_files_it_created(tmp_path: Path) -> None:
    part = build_partition(tmp_path / "logdir" / "t-0", damage=None)  # no indexes
    original = files_of(part)
    bk = tmp_path / "bk"
    assert kt("reindex", "--execute", "--backup-dir", bk, part).code == 0
    assert (part / name(0, ".index")).exists()
    r = kt("restore", "--execute", bk)
    assert r.code == 0 and "remove" in r.out, r
    assert files_of(part) == original


def test_restore_keeps_owner_and_mode(tmp_path: Path) -> None:
    needs_root()
    part = build_partition(tmp_path / "logdir" / "t-0")
    for p in part.iterdir():
        os.chown(p, OTHER_UID, OTHER_UID)
        p.chmod(0o600)
    original = files_of(part)
    owners = {p.name: (p.stat().st_uid, p.stat().st_gid, stat.S_IMODE(p.stat().st_mode), p.stat().st_mtime_ns)
              for p in part.iterdir()}
    bk = tmp_path / "bk"
    assert kt("truncate", "--execute", "--backup-dir", bk, part).code == 0
    assert kt("restore", "--execute", bk).code == 0
    assert files_of(part) == original
    assert {p.name: (p.stat().st_uid, p.stat().st_gid, stat.S_IMODE(p.stat().st_mode), p.stat().st_mtime_ns)
            for p in part.iterdir()} == owners


def test_restore_into_a_log_dir_that_moved(tmp_path: Path) -> None:
    part, bk, original = cut_partition(tmp_path)
    moved = tmp_path / "new-mount"
    part.parent.rename(moved)
    r = kt("restore", "--execute", bk)
    assert r.code == 2 and "--log-dir" in r.err and str(part) in r.err, r
    r = kt("restore", "--execute", "--log-dir", moved, bk)
    assert r.code == 0, r
    assert files_of(moved / part.name) == original
    check = subprocess.run(["sha256sum", "--quiet", "-c", str(bk / "SHA256SUMS")], cwd=moved, capture_output=True)
    assert check.returncode == 0, check  # SHA256SUMS holds paths relative to the log dir


def test_restore_script_into_a_log_dir_that_moved(tmp_path: Path) -> None:
    part, bk, original = cut_partition(tmp_path)
    moved, bk2 = tmp_path / "new-mount", tmp_path / "bk-moved"
    part.parent.rename(moved)
    bk.rename(bk2)
    p = subprocess.run(["sh", "-e", str(bk2 / "RESTORE.txt")], capture_output=True,
                       env=dict(os.environ, LOG_DIR=str(moved), BACKUP=str(bk2)))
    assert p.returncode == 0, p
    assert files_of(moved / part.name) == original


# --------------------------------------------------------------------------- refusals


def test_restore_refuses_a_file_that_changed_since_and_writes_nothing(tmp_path: Path) -> None:
    part, bk, original = cut_partition(tmp_path)
    log = part / name(0, ".log")
    with log.open("ab") as f:  # the broker appended after the truncate
        f.write(segment_bytes(9, 1, epoch=0))
    now = files_of(part)
    for args in ((), ("--execute",)):
        r = kt("restore", *args, bk)
        assert r.code == 2, r
        assert f"{log}: is neither the original nor what kafkatool truncate left" in r.err, r
        assert "nothing was written" in r.err
        assert files_of(part) == now  # not even the moved segments came back


def test_restore_refuses_a_damaged_backup_and_writes_nothing(tmp_path: Path) -> None:
    part, bk, original = cut_partition(tmp_path)
    (piece,) = bk.glob("t-0/*.bytes")
    data = bytearray(piece.read_bytes())
    data[10] ^= 1
    piece.write_bytes(bytes(data))
    (bk / "t-0" / name(36, ".log")).unlink()
    now = files_of(part)
    r = kt("restore", "--execute", bk)
    assert r.code == 2, r
    assert f"{piece}: the backup file of t-0/{name(0, '.log')} does not match the manifest" in r.err, r
    assert f"{bk / 't-0' / name(36, '.log')}: the backup file of t-0/{name(36, '.log')} is missing" in r.err, r
    assert files_of(part) == now


def test_restore_refuses_while_a_broker_holds_the_log_dir(tmp_path: Path) -> None:
    part, bk, original = cut_partition(tmp_path)
    now = files_of(part)
    with LockHolder(part.parent / ".lock") as broker:
        r = kt("restore", "--execute", bk)
        assert r.code == 2 and f"PID {broker.pid}" in r.err and ".lock" in r.err, r
        assert files_of(part) == now
        dry = kt("restore", bk)
        assert dry.code == 1 and f"PID {broker.pid}" in dry.err and "warning" in dry.err, dry  # no lock taken
        r = kt("restore", "--execute", "--force", bk)  # only for a copy known to be offline
        assert r.code == 0, r
    assert files_of(part) == original


def test_restore_of_a_backup_dir_without_a_manifest(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    r = kt("restore", tmp_path / "empty")
    assert r.code == 2 and "no MANIFEST.json" in r.err, r
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "MANIFEST.json").write_text('{"tool": "kafkatool", "files": []}')
    r = kt("restore", tmp_path / "old")
    assert r.code == 2 and "older kafkatool" in r.err and "RESTORE.txt" in r.err, r


@pytest.mark.parametrize("field, value", [("path", "../../../../etc/kafkatool-victim"), ("path", "/etc/victim"),
                                          ("backupFile", "../../victim"), ("logDir", "relative/logdir")])
def test_restore_refuses_a_manifest_that_points_elsewhere(tmp_path: Path, field: str, value: str) -> None:
    part, bk, original = cut_partition(tmp_path)
    now = files_of(part)
    text = (bk / "MANIFEST.json").read_text()
    manifest = json.loads(text)
    entry = next(e for e in manifest["files"] if e["backupFile"])
    entry[field] = value
    (bk / "MANIFEST.json").write_text(json.dumps(manifest))
    r = kt("restore", "--execute", bk)
    assert r.code == 2 and "MANIFEST.json" in r.err and "malformed" in r.err, r
    assert files_of(part) == now


def test_restore_refuses_a_partition_with_a_pending_journal(tmp_path: Path) -> None:
    part = build_partition(tmp_path / "logdir" / "t-0")
    original = files_of(part)
    bk = tmp_path / "bk"
    # a journal-mode truncate killed at the step right after its commit point
    n = 1
    while True:
        p = forked("truncate", "--execute", "--quiet", "--backup-dir", str(bk), str(part), fault_at=n, no_exchange=True)
        if p.returncode == 0:
            pytest.skip("no step left a committed journal")
        assert p.returncode == -signal.SIGKILL, p
        if any(f.endswith(".kafkatool-journal") for f in os.listdir(part)):
            break
        shutil.rmtree(part.parent)
        shutil.rmtree(bk, ignore_errors=True)
        build_partition(part)
        n += 1
    r = kt("restore", "--execute", bk)
    assert r.code == 2 and "journal" in r.err, r
    # the way out: complete the run, then restore
    assert kt("truncate", "--execute", "--backup-dir", bk, part).code == 0
    assert kt("restore", "--execute", bk).code == 0
    assert files_of(part) == original


# --------------------------------------------------------------------------- SIGKILL


@pytest.fixture
def fast_tmp(tmp_path: Path):
    """A directory on a tmpfs (/dev/shm) where there is one: the SIGKILL loops run hundreds of
    fsyncing commands, and fsync costs nothing there; else ``tmp_path``."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield tmp_path
        return
    d = Path(tempfile.mkdtemp(prefix="kafkatool-test-restore-", dir=shm))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def fk(*args: str | Path, fault_at: int | None = None, no_exchange: bool = False):
    """The CLI in a forked child (crash_helpers): milliseconds per run instead of an interpreter start."""
    p = forked(*map(str, args), fault_at=fault_at, no_exchange=no_exchange)
    p.code, p.err = p.returncode, ""  # the child's stderr goes to /dev/null
    return p


class Scene:
    """Two damaged partitions t-0 and u-1 in one log dir under ``root/work``, their originals, and a
    saved copy of a prepared state that :meth:`reset` puts back at the same path (the backup
    records absolute paths), so a SIGKILL loop prepares it once instead of once per step."""

    def __init__(self, root: Path, prepare) -> None:
        self.work, self.saved = root / "work", root / "saved"
        self.t0 = build_partition(self.work / "logdir" / "t-0")
        self.u1 = build_partition(self.work / "logdir" / "u-1")
        self.bk = self.work / "bk"
        self.originals = files_of(self.t0), files_of(self.u1)
        prepare(self)
        shutil.copytree(self.work, self.saved, symlinks=True)

    def reset(self) -> None:
        shutil.rmtree(self.work)
        shutil.copytree(self.saved, self.work, symlinks=True)

    def is_original(self) -> bool:
        return (files_of(self.t0), files_of(self.u1)) == self.originals


# the commands' modules imported here once, not in every forked child
for _command in ("truncate", "restore"):
    if _command in cli.commands:
        cli.commands[_command]


@pytest.mark.parametrize("journal", [False, True], ids=["exchange", "journal"])
def test_sigkill_at_every_step_into_a_shared_backup_dir_keeps_everything_restorable(fast_tmp: Path, journal: bool) -> None:
    """t-0 is truncated into the backup dir; then u-1 into the same dir is killed at step n, for every n.
    Afterwards the manifest still covers every byte removed so far: restoring puts back both originals
    (by kafkatool restore and, every third step, by the script)."""
    scene = Scene(fast_tmp, lambda sc: fk("truncate", "--execute", "--backup-dir", sc.bk, sc.t0))
    bk, u1 = scene.bk, scene.u1
    n = 0
    while True:
        n += 1
        scene.reset()
        p = forked("truncate", "--execute", "--quiet", "--backup-dir", str(bk), str(u1), fault_at=n, no_exchange=journal)
        if p.returncode == 0:
            break
        assert p.returncode == -signal.SIGKILL, (n, p)
        manifest = manifest_of(bk)  # whole and parseable after every kill
        assert len([e for e in manifest["files"] if e["path"].startswith("t-0/")]) >= 3
        if any(f.endswith(".kafkatool-journal") for f in os.listdir(u1)):
            r = fk("restore", bk)
            assert r.code == 2, (n, r)
            assert fk("truncate", "--execute", "--backup-dir", bk, u1).code == 0, n  # completes the journal
        by_script = n % 3 == 0  # the script costs a python3 and a sha256sum per file: every third step
        if not by_script:
            r = fk("restore", "--execute", bk)
            assert r.code == 0, (n, r)
        else:
            r = restore_with_script(bk)
            assert r.returncode == 0, (n, r)
        assert scene.is_original(), n
        if by_script:  # the script leaves a staging dir (a broker deletes it, as any -delete dir): restore removes it
            assert fk("restore", "--execute", bk).code == 0, n
        assert fk("restore", bk).code == 0, n  # nothing left to do
        # a staging dir is left only by a run killed before it recorded anything of u-1 (harmless: a
        # broker deletes any -delete dir, and the next reindex or truncate --execute removes it)
        logdir = u1.parent
        others = sorted(d.name for d in logdir.iterdir() if d.name not in (".lock", "t-0", "u-1"))
        assert others == [] or (all(is_staging_dir(str(logdir / d)) for d in others)
                                and not [e for e in manifest_of(bk)["files"] if e["path"].startswith("u-1/")]), n
    assert n > 10, n


def test_sigkill_at_every_step_of_one_run_over_two_partitions(fast_tmp: Path) -> None:
    scene = Scene(fast_tmp, lambda sc: None)
    n = 0
    while True:
        n += 1
        scene.reset()
        p = forked("truncate", "--execute", "--quiet", "--backup-dir", str(scene.bk), str(scene.t0), str(scene.u1),
                   fault_at=n)
        if p.returncode == 0:
            break
        assert p.returncode == -signal.SIGKILL, (n, p)
        if (scene.bk / "MANIFEST.json").exists():
            r = fk("restore", "--execute", scene.bk)
            assert r.code == 0, (n, r)
        assert scene.is_original(), n
    assert n > 10, n


def test_sigkill_at_every_step_of_the_restore(fast_tmp: Path) -> None:
    scene = Scene(fast_tmp, lambda sc: fk("truncate", "--execute", "--backup-dir", sc.bk, sc.t0, sc.u1))
    n = 0
    while True:
        n += 1
        scene.reset()
        p = forked("restore", "--execute", "--quiet", str(scene.bk), fault_at=n)
        if p.returncode == 0:
            assert scene.is_original()
            break
        assert p.returncode == -signal.SIGKILL, (n, p)
        r = fk("restore", "--execute", scene.bk)
        assert r.code == 0, (n, r)
        assert scene.is_original(), n
        assert not [f for part in (scene.t0, scene.u1) for f in os.listdir(part) if f.endswith(".kafkatool-tmp")], n
    assert n > 10, n


def test_ctrl_c_during_the_restore_says_how_to_finish(fast_tmp: Path) -> None:
    scene = Scene(fast_tmp, lambda sc: fk("truncate", "--execute", "--backup-dir", sc.bk, sc.t0, sc.u1))
    p = forked("restore", "--execute", "--quiet", str(scene.bk), interrupt_at=3, stderr=True)
    assert p.returncode == 130, p
    assert "interrupted during --execute" in p.stderr and "run the same command again" in p.stderr, p
    assert "Traceback" not in p.stderr
    assert fk("restore", "--execute", scene.bk).code == 0
    assert scene.is_original()
