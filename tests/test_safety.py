"""The write-safety layer (kafkatool.safety): the log dir lock, where a backup may go, and what a
backup keeps (issue 9).

Every test drives the command line in a subprocess (``python -m kafkatool`` from this checkout,
so the same file runs against an older checkout), on partitions built here: three segments of
v2 batches (Kafka's record format, encode_batch), the first with a CRC broken by flipping the last
byte of its fourth batch, and a leader-epoch-checkpoint written by hand. What a test expects
comes from the files themselves (their bytes before the run, hashlib, ``sha256sum``, ``stat``),
never from kafkatool's own bookkeeping.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import io
import json
import os
import stat
import subprocess
import sys
import tempfile
import textwrap
import threading
import traceback
from pathlib import Path

import pytest

from kafkatool.record.v2 import RecordSpec, encode_batch

REPO = Path(__file__).resolve().parents[1]
OTHER_UID = 12345
"""A uid that owns nothing on the machine: the broker's user in the ownership tests."""


# --------------------------------------------------------------------------- helpers


def name(base: int, suffix: str) -> str:
    return f"{base:020d}{suffix}"


def segment_bytes(base: int, nbatches: int, *, epoch: int, damage: int | None = None) -> bytes:
    """``nbatches`` batches of 3 records from offset ``base``; batch number ``damage`` gets its last
    byte (inside a record value) flipped, so its CRC fails and recovery cuts there."""
    out = bytearray()
    for i in range(nbatches):
        first = base + 3 * i
        batch = bytearray(encode_batch(
            [RecordSpec(o, 1_700_000_000_000 + o, b"k%d" % o, bytes((o * 7 + j) % 256 for j in range(150)))
             for o in range(first, first + 3)],
            partition_leader_epoch=epoch))
        if damage == i:
            batch[-1] ^= 0xFF
        out += batch
    return bytes(out)


def build_partition(part: Path | bytes, *, damage: int | None = 3) -> Path | bytes:
    """Offsets 0-17 (epoch 0), 18-35 (epoch 1), 36-47 (epoch 2) in three segments, no indexes.

    With ``damage`` the first segment's batch ``damage`` is bad: truncate cuts the first segment
    there, moves the two later ones to the backup and rewrites the leader-epoch-checkpoint.
    """
    p = os.fsencode(part)
    os.makedirs(p)
    for base, n, epoch in ((0, 6, 0), (18, 6, 1), (36, 4, 2)):
        with open(os.path.join(p, name(base, ".log").encode()), "wb") as f:
            f.write(segment_bytes(base, n, epoch=epoch, damage=damage if base == 0 else None))
    with open(os.path.join(p, b"leader-epoch-checkpoint"), "wb") as f:
        f.write(b"0\n3\n0 0\n1 18\n2 36\n")  # version, count, then "epoch startOffset" lines
    return part


def files_of(part: Path | bytes) -> dict[bytes, bytes]:
    """Every file of a partition dir, name -> bytes (the dir holds regular files only)."""
    p = os.fsencode(part)
    out = {}
    for n in sorted(os.listdir(p)):
        with open(os.path.join(p, n), "rb") as f:
            out[n] = f.read()
    return out


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Run:
    def __init__(self, p: subprocess.CompletedProcess) -> None:
        self.code = p.returncode
        self.out = p.stdout.decode("utf-8", "surrogateescape")
        self.err = p.stderr.decode("utf-8", "surrogateescape")

    def __repr__(self) -> str:
        return f"Run(code={self.code}, out={self.out[-600:]!r}, err={self.err[-600:]!r})"


def kt_process(*args: str | bytes | Path, env: dict | None = None) -> Run:
    """``python -m kafkatool ARGS`` in a new interpreter, with this checkout's package first on the path."""
    e = dict(os.environ)
    e.pop("KAFKATOOL_FAULT_AT", None)
    e["PYTHONPATH"] = str(REPO) + os.pathsep + e.get("PYTHONPATH", "")
    e.update(env or {})
    argv = [sys.executable, "-m", "kafkatool", *(os.fsencode(a) for a in args)]
    return Run(subprocess.run(argv, cwd=REPO, capture_output=True, env=e, timeout=120))


def kt(*args: str | bytes | Path) -> Run:
    """``kafkatool ARGS`` in a forked child of this process (its modules are imported already:
    tens of milliseconds instead of an interpreter start), standard output and error captured
    as bytes; standard output is UTF-8 and strict, as for a pipe under a UTF-8 locale."""
    from kafkatool.cli.main import main

    out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 70
        try:
            os.dup2(out.fileno(), 1)
            os.dup2(err.fileno(), 2)
            sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8")
            sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace")
            os.environ.pop("KAFKATOOL_FAULT_AT", None)
            try:
                main([os.fsdecode(a) for a in args])
                code = 0
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:
            traceback.print_exc()
            code = 71
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except Exception:
                    pass
            os._exit(code)
    _pid, status = os.waitpid(pid, 0)
    code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    out.seek(0)
    err.seek(0)
    return Run(subprocess.CompletedProcess(args, code, out.read(), err.read()))


def restore_with_script(backup: Path | bytes) -> subprocess.CompletedProcess:
    return subprocess.run([b"sh", b"-e", os.path.join(os.fsencode(backup), b"RESTORE.txt")], capture_output=True)


def manifest_of(backup: Path | bytes) -> dict:
    with open(os.path.join(os.fsencode(backup), b"MANIFEST.json"), "rb") as f:
        return json.loads(f.read())


HOLD_LOCK = textwrap.dedent(
    """
    import fcntl, os, sys
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # what the broker's FileChannel.tryLock does
    print("locked", flush=True)
    sys.stdin.read()
    """
)


class LockHolder:
    """Another process holding a POSIX record lock on ``path`` (a stand-in for a live broker)."""

    def __init__(self, path: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(path)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "locked"
        self.pid = self.proc.pid

    def __enter__(self) -> "LockHolder":
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


def can_lock(path: Path) -> bool:
    """Whether another process can take the POSIX lock of ``path`` now."""
    probe = subprocess.run(
        [sys.executable, "-c", "import fcntl,os,sys; fd=os.open(sys.argv[1], os.O_RDWR); "
         "fcntl.lockf(fd, fcntl.LOCK_EX|fcntl.LOCK_NB)", str(path)], capture_output=True)
    return probe.returncode == 0


def needs_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root (chown to another uid, mount)")


# --------------------------------------------------------------------------- 1. the backup dir's location


def _reindex_ready(part: Path) -> None:
    build_partition(part, damage=None)  # no indexes at all: reindex creates them


@pytest.mark.parametrize("command", ["truncate", "reindex"])
@pytest.mark.parametrize("where", ["in the partition dir", "the log dir", "elsewhere in the log dir",
                                   "in the log dir through a symlink", "in the partition dir through a symlink"])
def test_backup_dir_inside_the_log_dir_is_refused_before_anything_is_written(tmp_path: Path, command: str, where: str) -> None:
    logdir = tmp_path / "logdir"
    part = logdir / "t-0"
    (build_partition if command == "truncate" else _reindex_ready)(part)
    alias = tmp_path / "alias"
    bk = {
        "in the partition dir": part / "bk",
        "the log dir": logdir,
        "elsewhere in the log dir": logdir / "kafkatool-backup",
        "in the log dir through a symlink": alias / "bk",
        "in the partition dir through a symlink": alias / "t-0" / "bk",
    }[where]
    alias.symlink_to(logdir)
    before = files_of(part)
    listing = sorted(os.listdir(logdir))
    r = kt(command, "--execute", "--backup-dir", bk, part)
    assert r.code == 2, r
    assert str(bk) in r.err and str(logdir) in r.err and "inside the log dir" in r.err or "is the log dir" in r.err, r
    assert files_of(part) == before
    assert sorted(os.listdir(logdir)) == listing  # not even a .lock
    assert not os.path.lexists(bk) or bk == logdir


def test_backup_dir_inside_another_log_dir_of_the_broker_is_refused(tmp_path: Path) -> None:
    part = build_partition(tmp_path / "disk1" / "t-0")
    other = tmp_path / "disk2"
    other.mkdir()
    (other / "meta.properties").write_text("version=1\nnode.id=1\n")  # what marks a Kafka log dir
    before = files_of(part)
    r = kt("truncate", "--execute", "--backup-dir", other / "backups" / "bk", part)
    assert r.code == 2 and str(other) in r.err and "log dir" in r.err, r
    assert files_of(part) == before and not (other / "backups").exists()


def test_backup_dir_beside_the_log_dir_is_fine(tmp_path: Path) -> None:
    part = build_partition(tmp_path / "logdir" / "t-0")
    r = kt("truncate", "--execute", "--backup-dir", tmp_path / "bk", part)
    assert r.code == 0, r
    assert (tmp_path / "bk" / "MANIFEST.json").exists()


# --------------------------------------------------------------------------- 2./3. the lock


def test_symlinked_partition_dir_takes_the_real_log_dirs_lock(tmp_path: Path) -> None:
    logdir = tmp_path / "data" / "logdir"
    part = build_partition(logdir / "t-0")
    links = tmp_path / "links"
    links.mkdir()
    (links / "t-0").symlink_to(part)
    before = files_of(part)
    (logdir / ".lock").touch()
    with LockHolder(logdir / ".lock") as broker:
        r = kt("truncate", "--execute", "--backup-dir", tmp_path / "bk", links / "t-0")
        assert r.code == 2, r
        assert str(broker.pid) in r.err and ".lock" in r.err, r
        assert files_of(part) == before
        assert not (links / ".lock").exists()  # never a .lock where no log dir is
        r = kt("reindex", "--execute", "--backup-dir", tmp_path / "bk", links / "t-0")
        assert r.code == 2 and str(broker.pid) in r.err, r
        assert files_of(part) == before and not (links / ".lock").exists()
    r = kt("truncate", "--execute", "--backup-dir", tmp_path / "bk", links / "t-0")
    assert r.code == 0, r
    assert files_of(part) != before and not (links / ".lock").exists()


def test_lock_refusal_names_the_process_holding_the_lock(tmp_path: Path) -> None:
    part = build_partition(tmp_path / "logdir" / "t-0")
    (part.parent / ".lock").touch()
    with LockHolder(part.parent / ".lock") as broker:
        r = kt("truncate", "--execute", "--backup-dir", tmp_path / "bk", part)
        assert r.code == 2, r
        assert f"PID {broker.pid}" in r.err and "python" in r.err, r  # /proc/<pid>/comm of the holder


def test_lock_holder(tmp_path: Path) -> None:
    from kafkatool.safety import LogDirLock, held_elsewhere, lock_holder

    logdir = tmp_path / "logdir"
    logdir.mkdir()
    assert lock_holder(str(logdir)) is None
    assert not (logdir / ".lock").exists()  # asking never creates it
    (logdir / ".lock").touch()
    assert lock_holder(str(logdir)) is None
    with LockHolder(logdir / ".lock") as broker:
        assert lock_holder(str(logdir)) == broker.pid
        (tmp_path / "via").symlink_to(logdir)
        assert lock_holder(str(tmp_path / "via")) == broker.pid
        assert held_elsewhere(str(tmp_path / "via")) == (
            f"PID {broker.pid} (python) holds the lock on this log dir ({logdir / '.lock'})")
    assert held_elsewhere(str(logdir)) is None
    assert lock_holder(str(logdir)) is None
    # a lock of this very process: reported, and still held afterwards (closing any descriptor of
    # the file would drop a POSIX lock)
    with LogDirLock(str(logdir)):
        assert lock_holder(str(logdir)) == os.getpid()
        assert not can_lock(logdir / ".lock")
    assert can_lock(logdir / ".lock")
    fd = os.open(logdir / ".lock", os.O_RDWR)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX)  # taken without LogDirLock
        assert lock_holder(str(logdir)) == os.getpid()
        assert held_elsewhere(str(logdir)) is None  # this process's own lock is nobody else's
        assert not can_lock(logdir / ".lock")
    finally:
        os.close(fd)


def test_two_locks_of_one_log_dir_in_one_process_keep_it_locked(tmp_path: Path) -> None:
    from kafkatool.safety import LogDirLock

    (tmp_path / "alias").symlink_to(tmp_path)
    a, b = LogDirLock(str(tmp_path)), LogDirLock(str(tmp_path / "alias"))
    a.acquire()
    b.acquire()
    assert a.path == b.path == str(tmp_path / ".lock")
    a.release()
    assert not can_lock(tmp_path / ".lock")  # b still holds it
    b.release()
    assert can_lock(tmp_path / ".lock")


# --------------------------------------------------------------------------- 4. a reused backup dir


def test_two_runs_into_one_backup_dir_keep_both(tmp_path: Path) -> None:
    logdir = tmp_path / "logdir"
    parts = [build_partition(logdir / "t-0"), build_partition(logdir / "u-1")]
    originals = [files_of(p) for p in parts]
    bk = tmp_path / "bk"
    for p in parts:
        assert kt("truncate", "--execute", "--backup-dir", bk, p).code == 0
    manifest = manifest_of(bk)
    assert {e["path"].split("/")[0] for e in manifest["files"]} == {"t-0", "u-1"}
    assert len(manifest["runs"]) == 2
    restored = restore_with_script(bk)
    assert restored.returncode == 0, restored
    assert [files_of(p) for p in parts] == originals


def test_reindex_then_truncate_of_one_partition_into_one_backup_dir_restores_the_first_original(tmp_path: Path) -> None:
    part = build_partition(tmp_path / "logdir" / "t-0")  # no indexes: reindex creates them, truncate then
    original = files_of(part)                             # rewrites or moves them (a chain of two entries)
    bk = tmp_path / "bk"
    r = kt("reindex", "--execute", "--backup-dir", bk, part)
    assert r.code == 0 and (part / name(18, ".index")).exists(), r
    reindexed = files_of(part)
    assert kt("truncate", "--execute", "--backup-dir", bk, part).code == 0
    assert files_of(part) != reindexed
    paths = [e["path"] for e in manifest_of(bk)["files"]]
    assert paths.count(f"t-0/{name(18, '.index')}") == 2
    restored = restore_with_script(bk)
    assert restored.returncode == 0, restored
    assert files_of(part) == original  # newest first: back to what reindex left, then to the original
    assert restore_with_script(bk).returncode == 0 and files_of(part) == original  # twice is harmless


def test_a_file_changed_between_two_runs_is_refused_by_the_script(tmp_path: Path) -> None:
    part = build_partition(tmp_path / "logdir" / "t-0")
    bk = tmp_path / "bk"
    assert kt("truncate", "--execute", "--backup-dir", bk, part).code == 0
    log = part / name(0, ".log")
    with log.open("ab") as f:  # a broker appended since
        f.write(segment_bytes(9, 1, epoch=0))
    now = files_of(part)
    restored = restore_with_script(bk)
    assert restored.returncode != 0 and b"refusing" in restored.stderr and os.fsencode(log) in restored.stderr
    assert files_of(part)[name(0, ".log").encode()] == now[name(0, ".log").encode()]


def test_two_runs_at_once_into_one_backup_dir(tmp_path: Path) -> None:
    parts = [build_partition(tmp_path / f"logdir{i}" / f"t-{i}") for i in range(4)]
    originals = [files_of(p) for p in parts]
    bk = tmp_path / "bk"
    results: list[Run] = [None] * len(parts)  # type: ignore[list-item]

    def go(i: int) -> None:
        results[i] = kt_process("truncate", "--execute", "--backup-dir", bk, parts[i])  # processes of their own

    threads = [threading.Thread(target=go, args=(i,)) for i in range(len(parts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r.code == 0 for r in results), results
    manifest = manifest_of(bk)
    assert len(manifest["runs"]) == len(parts)
    assert sorted({e["logDir"] for e in manifest["files"]}) == sorted(str(p.parent) for p in parts)
    seqs = [e["seq"] for e in manifest["files"]]
    assert sorted(seqs) == list(range(1, len(seqs) + 1))
    restored = restore_with_script(bk)
    assert restored.returncode == 0, restored
    assert [files_of(p) for p in parts] == originals


# --------------------------------------------------------------------------- 5. owner and mode


def test_owner_and_mode_kept_in_the_backup_and_on_restore(tmp_path: Path) -> None:
    needs_root()
    part = build_partition(tmp_path / "logdir" / "t-0")
    for p in part.iterdir():
        os.chown(p, OTHER_UID, OTHER_UID)
        p.chmod(0o600)
    os.chown(part, OTHER_UID, OTHER_UID)
    part.chmod(0o700)
    original = files_of(part)
    modes = {p.name: (p.stat().st_uid, p.stat().st_gid, stat.S_IMODE(p.stat().st_mode)) for p in part.iterdir()}
    bk = tmp_path / "bk"
    r = kt("truncate", "--execute", "--backup-dir", bk, part)
    assert r.code == 0, r
    for d in [bk, *[p for p in bk.rglob("*") if p.is_dir()]]:
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d  # nobody else reads the records
    saved = [p for p in bk.rglob("*") if p.is_file() and p.parent != bk]
    assert saved
    for p in saved:
        st = p.stat()
        assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (OTHER_UID, OTHER_UID, 0o600), p
    for e in manifest_of(bk)["files"]:
        if e["original"] is not None:
            assert (e["original"]["uid"], e["original"]["gid"], e["original"]["mode"]) == (OTHER_UID, OTHER_UID, "0600")
    script = (bk / "RESTORE.txt").read_text()
    assert f"chown {OTHER_UID}:{OTHER_UID} " in script and "chmod 0600 " in script
    # what the run left looks like the broker's too (the new files take the old ones' owner)
    restored = restore_with_script(bk)
    assert restored.returncode == 0, restored
    assert files_of(part) == original
    assert {p.name: (p.stat().st_uid, p.stat().st_gid, stat.S_IMODE(p.stat().st_mode)) for p in part.iterdir()} == modes


# --------------------------------------------------------------------------- 6. names that are not UTF-8


@pytest.mark.parametrize("logdir_name, part_name", [(b"log\xffdir", b"t-0"), (b"logdir", b"t\xe9x-0")])
def test_non_utf8_names_round_trip_through_the_backup(tmp_path: Path, logdir_name: bytes, part_name: bytes) -> None:
    logdir = os.path.join(os.fsencode(tmp_path), logdir_name)
    part = build_partition(os.path.join(logdir, part_name))
    original = files_of(part)
    bk = os.path.join(os.fsencode(tmp_path), b"bk")
    r = kt("truncate", "--execute", "--backup-dir", bk, part)
    assert r.code == 0, r
    assert "internal error" not in r.err
    manifest = manifest_of(bk)
    paths = {os.fsencode(e["originalPath"]) for e in manifest["files"]}
    assert os.path.join(part, name(0, ".log").encode()) in paths  # \udcXX escapes give back the bytes
    assert {os.fsencode(e["logDir"]) for e in manifest["files"]} == {logdir}
    with open(os.path.join(bk, b"RESTORE.txt"), "rb") as f:
        assert part_name in f.read()  # the name's own bytes, for sh
    assert files_of(part) != original
    restored = restore_with_script(bk)
    assert restored.returncode == 0, restored
    assert files_of(part) == original


# --------------------------------------------------------------------------- 7. checksums


def test_manifest_has_whole_file_sha256_and_sha256sums_checks_the_originals(tmp_path: Path) -> None:
    part = build_partition(tmp_path / "logdir" / "t-0")
    original = files_of(part)
    bk = tmp_path / "bk"
    assert kt("truncate", "--execute", "--backup-dir", bk, part).code == 0
    after = files_of(part)
    files = {e["path"]: e for e in manifest_of(bk)["files"]}
    cut = files["t-0/" + name(0, ".log")]
    log = name(0, ".log").encode()
    assert cut["original"]["sha256"] == sha(original[log]) and cut["original"]["size"] == len(original[log])
    assert cut["result"]["sha256"] == sha(after[log]) and cut["result"]["size"] == len(after[log])
    for base in (18, 36):  # the later segments moved to the backup whole
        moved = files["t-0/" + name(base, ".log")]
        assert moved["action"] == "moved" and moved["result"] is None
        assert moved["original"]["sha256"] == sha(original[name(base, ".log").encode()])
    lec = files["t-0/leader-epoch-checkpoint"]
    assert lec["original"]["sha256"] == sha(original[b"leader-epoch-checkpoint"])
    assert lec["result"]["sha256"] == sha(after[b"leader-epoch-checkpoint"])
    for e in files.values():
        if e["action"] == "created":
            assert e["original"] is None and e["result"]["sha256"] == sha(after[e["path"].split("/")[1].encode()])
    sums = (bk / "SHA256SUMS").read_text().splitlines()
    assert sorted(sums) == sorted(f"{sha(data)}  t-0/{n.decode()}" for n, data in original.items())
    check = ["sha256sum", "--quiet", "-c", str(bk / "SHA256SUMS")]
    assert subprocess.run(check, cwd=part.parent, capture_output=True).returncode != 0  # not restored yet
    assert "sh -e RESTORE.txt" in (bk / "RESTORE.txt").read_text()
    assert restore_with_script(bk).returncode == 0
    assert subprocess.run(check, cwd=part.parent, capture_output=True).returncode == 0


# --------------------------------------------------------------------------- 9. a full disk


@pytest.fixture
def small_tmpfs(tmp_path: Path):
    """A 64 KiB tmpfs mounted at ``tmp_path/full``; skips where mounting is not allowed."""
    needs_root()
    mnt = tmp_path / "full"
    mnt.mkdir()
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True)
    if p.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {p.stderr.decode(errors='replace').strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def big_damaged_partition(part: Path) -> Path:
    """One segment whose removed tail (~150 KiB) does not fit a 64 KiB file system."""
    part.mkdir(parents=True)
    (part / name(0, ".log")).write_bytes(segment_bytes(0, 300, epoch=0, damage=5))
    (part / "leader-epoch-checkpoint").write_bytes(b"0\n1\n0 0\n")
    return part


def test_full_disk_names_the_file_and_leaves_no_backup_that_looks_complete(tmp_path: Path, small_tmpfs: Path) -> None:
    part = big_damaged_partition(tmp_path / "logdir" / "t-0")
    original = files_of(part)
    bk = small_tmpfs / "bk"
    r = kt("truncate", "--execute", "--backup-dir", bk, part)
    assert r.code == 2, r
    assert "No space left on device" in r.err and f"{bk}/" in r.err, r  # the file, not ": No space left"
    assert files_of(part) == original
    manifest = manifest_of(bk) if (bk / "MANIFEST.json").exists() else {"files": []}
    for e in manifest["files"]:  # whatever the manifest names is there, whole
        for f in [e["backupFile"], *[p["file"] for p in e.get("pieces", [])]]:
            if f:
                assert (bk / f).exists()
    assert not [p for p in bk.rglob("*.bytes")]  # the partial range was removed
    # a later run with room completes into the same backup dir, and the backup restores the original
    subprocess.run(["mount", "-o", "remount,size=4m", str(small_tmpfs)], check=True)
    r = kt("truncate", "--execute", "--backup-dir", bk, part)
    assert r.code == 0, r
    assert files_of(part) != original
    assert restore_with_script(bk).returncode == 0
    assert files_of(part) == original


def test_write_errors_name_the_file(tmp_path: Path, monkeypatch) -> None:
    from kafkatool import safety

    real_write = os.write

    def full(fd: int, data) -> int:
        if os.readlink(f"/proc/self/fd/{fd}").startswith(str(tmp_path / "bk")):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data)

    part = build_partition(tmp_path / "logdir" / "t-0")
    backup = safety.TruncateBackup(str(tmp_path / "bk"))
    monkeypatch.setattr(os, "write", full)
    with pytest.raises(safety.WriteError) as e:
        backup.save_cut(str(part / name(0, ".log")), [(1632, 3272, "test")], 3272, 1632)
    assert str(e.value).startswith(str(tmp_path / "bk" / "t-0" / name(0, ".log"))) and "No space left" in str(e.value)
    assert isinstance(e.value, OSError) and e.value.errno == errno.ENOSPC
    assert os.listdir(tmp_path / "bk" / "t-0") == []


# --------------------------------------------------------------------------- 10. a hostile backup dir


def test_a_planted_symlink_in_the_backup_dir_is_never_followed(tmp_path: Path) -> None:
    part = build_partition(tmp_path / "logdir" / "t-0")
    original = files_of(part)
    victim = tmp_path / "victim"
    victim.write_bytes(b"do not touch")
    bk = tmp_path / "bk"
    (bk / "t-0").mkdir(parents=True, mode=0o700)
    bk.chmod(0o700)
    for n in ("leader-epoch-checkpoint", name(18, ".log"), f"{name(0, '.log')}.1632-3272.bytes"):
        (bk / "t-0" / n).symlink_to(victim)
    (bk / "MANIFEST.json.kafkatool-tmp").symlink_to(victim)
    (bk / "RESTORE.txt.kafkatool-tmp").symlink_to(victim)
    r = kt("truncate", "--execute", "--backup-dir", bk, part)
    assert r.code == 0, r
    assert victim.read_bytes() == b"do not touch"
    assert all((bk / "t-0" / n).is_symlink() for n in ("leader-epoch-checkpoint", name(18, ".log")))
    assert restore_with_script(bk).returncode == 0
    assert files_of(part) == original and victim.read_bytes() == b"do not touch"


def test_a_symlinked_partition_dir_in_the_backup_dir_is_refused(tmp_path: Path) -> None:
    part = build_partition(tmp_path / "logdir" / "t-0")
    original = files_of(part)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    bk = tmp_path / "bk"
    bk.mkdir(mode=0o700)
    (bk / "t-0").symlink_to(elsewhere)
    r = kt("truncate", "--execute", "--backup-dir", bk, part)
    assert r.code == 2 and str(bk / "t-0") in r.err and "symlink" in r.err, r
    assert os.listdir(elsewhere) == [] and files_of(part) == original


def test_a_backup_dir_others_can_write_is_refused(tmp_path: Path) -> None:
    part = build_partition(tmp_path / "logdir" / "t-0")
    original = files_of(part)
    bk = tmp_path / "bk"
    bk.mkdir()
    bk.chmod(0o777)
    r = kt("truncate", "--execute", "--backup-dir", bk, part)
    assert r.code == 2 and str(bk) in r.err and "others can write" in r.err, r
    assert files_of(part) == original


def test_a_read_only_backup_location_is_an_error_naming_it(tmp_path: Path) -> None:
    needs_root()
    ro = tmp_path / "ro"
    ro.mkdir()
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(ro)], capture_output=True)
    if p.returncode != 0:
        pytest.skip("cannot mount a read-only tmpfs")
    try:
        part = build_partition(tmp_path / "logdir" / "t-0")
        original = files_of(part)
        r = kt("truncate", "--execute", "--backup-dir", ro / "bk", part)
        assert r.code == 2 and str(ro / "bk") in r.err and "Read-only file system" in r.err, r
        assert files_of(part) == original
    finally:
        subprocess.run(["umount", "-l", str(ro)], capture_output=True)


def test_a_lock_file_that_cannot_be_opened_is_a_located_repair_error(tmp_path: Path) -> None:
    """A .lock that cannot be opened read-write (here a directory; a read-only file system is
    the same path) is refused with the lock file named, not an OSError traceback."""
    from kafkatool.safety.durable import RepairError
    from kafkatool.safety.lock import LogDirLock

    (tmp_path / ".lock").mkdir()
    with pytest.raises(RepairError) as e:
        LogDirLock(str(tmp_path)).acquire()
    assert e.value.path == str(tmp_path / ".lock")
    assert "cannot open the lock file to lock it: Is a directory" in str(e.value)


def test_backup_save_takes_the_result_as_size_and_sha256(tmp_path: Path) -> None:
    """``result=`` stands for the new bytes (a file too big to hold): the entry records it, the
    original is kept whole, and the action is 'rewritten'; without either, 'removed'."""
    import hashlib

    from kafkatool.safety.backup import Backup
    from kafkatool.safety.manifest import FileState

    logdir = tmp_path / "logdir"
    part = logdir / "t-0"
    part.mkdir(parents=True)
    (logdir / "meta.properties").write_text("version=1\n")
    old = part / "00000000000000000000.log"
    old.write_bytes(b"old bytes")
    gone = part / "00000000000000000000.index"
    gone.write_bytes(b"idx")
    new = b"the new, converted segment"
    backup = Backup(str(tmp_path / "bk"))
    entry = backup.save(str(old), None, "convert", result=FileState(len(new), hashlib.sha256(new).hexdigest()))
    assert entry.action == "rewritten"
    assert (entry.result.size, entry.result.sha256) == (len(new), hashlib.sha256(new).hexdigest())
    assert (entry.original.size, entry.original.sha256) == (9, hashlib.sha256(b"old bytes").hexdigest())
    assert (tmp_path / "bk" / entry.backup_file).read_bytes() == b"old bytes"
    assert backup.save(str(gone), None, "convert").action == "removed"
