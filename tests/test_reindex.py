"""``kafkatool reindex`` and the write-safety layer of kafkatool.repair (spec §8.3, §11.5, §12).

Every test works on copies under tmp_path; fixtures/ and ../shared are never written.
Fixture indexes were built with index.interval.bytes 1024 (128 for golden-0, 256 for txn-0),
see fixtures/make_fixtures.py; the real KRaft log's .index came from the broker's recovery.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import FIXTURES, REPO, real_fixture
from kafkatool.repair import (
    JOURNAL_SUFFIX,
    TEMP_SUFFIX,
    LiveBrokerError,
    LogDirLock,
    plan_reindex,
)
from kafkatool.segment.index import read_offset_index, read_time_index
from kafkatool.segment.walk import SegmentWalker

INTERVALS = {"golden-0": 128, "txn-0": 256}
PARTITIONS = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir())
SEG0 = "00000000000000000000"


def copy_partition(src: Path, tmp_path: Path, logdir: str = "logdir") -> Path:
    dst = tmp_path / logdir / src.name
    shutil.copytree(src, dst)
    for p in dst.iterdir():
        p.chmod(0o644)
    dst.chmod(0o755)
    return dst


def snapshot(d: Path) -> dict[str, tuple[int, str]]:
    return {
        p.name: (p.stat().st_size, hashlib.sha256(p.read_bytes()).hexdigest())
        for p in sorted(d.iterdir())
        if p.is_file()
    }


def index_files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in d.iterdir() if p.suffix in (".index", ".timeindex")}


# --------------------------------------------------------------------------- byte-exact reproduction


@pytest.mark.parametrize("name", PARTITIONS)
def test_plan_reproduces_fixture_indexes(name: str) -> None:
    part = FIXTURES / name
    for log in sorted(part.glob("*.log")):
        plan = plan_reindex(str(log), INTERVALS.get(name, 1024))
        assert {c.action for c in plan.changes} == {"unchanged"}, plan
        assert [c.kind for c in plan.changes][:2] == ["index", "timeindex"]
        assert not plan.needs_changes and plan.bad_tail is None
        assert plan.valid_bytes == log.stat().st_size


@pytest.mark.parametrize("name", ["golden-0", "txn-0", "v1-none-0", "v2-zstd-0", "__cluster_metadata-0"])
def test_deleted_indexes_are_recreated_byte_exact(run, tmp_path: Path, name: str) -> None:
    part = copy_partition(FIXTURES / name, tmp_path)
    want = index_files(part)
    for n in want:
        (part / n).unlink()
    interval = str(INTERVALS.get(name, 1024))
    r = run("reindex", "--index-interval-bytes", interval, str(part))
    assert r.code == 1 and "create" in r.out
    assert index_files(part) == {}  # the dry run changed nothing
    r = run("reindex", "--execute", "--index-interval-bytes", interval, "--backup-dir", str(tmp_path / "bk"), str(part))
    assert r.code == 0, r
    assert index_files(part) == want
    if name == "txn-0":
        assert "unchanged 00000000000000000100.txnindex: 34 bytes, 1 entry" in r.out
    # second run: nothing to do, nothing written
    before = snapshot(part)
    assert run("reindex", "--index-interval-bytes", interval, str(part)).code == 0
    r = run("reindex", "--execute", "--index-interval-bytes", interval, "--backup-dir", str(tmp_path / "bk2"), str(part))
    assert r.code == 0 and snapshot(part) == before and not (tmp_path / "bk2").exists()
    manifest = json.loads((tmp_path / "bk" / "MANIFEST.json").read_text())
    assert {e["action"] for e in manifest["files"]} == {"created"}


def test_txn_index_rebuilt_from_the_abort_markers(run, tmp_path: Path) -> None:
    part = copy_partition(FIXTURES / "txn-0", tmp_path)
    txn = part / "00000000000000000100.txnindex"
    want = txn.read_bytes()  # producer 6000's aborted transaction 103..113, LSO 114
    txn.unlink()
    r = run("reindex", "--execute", "--index-interval-bytes", "256", "--backup-dir", str(tmp_path / "bk"), str(part))
    assert r.code == 0, r
    assert txn.read_bytes() == want
    txn.write_bytes(want[:20] + bytes(14))  # damaged: rewritten from the log
    assert run("reindex", "--index-interval-bytes", "256", str(part)).code == 1
    run("reindex", "--execute", "--index-interval-bytes", "256", "--backup-dir", str(tmp_path / "bk2"), str(part))
    assert txn.read_bytes() == want


def test_txn_index_left_alone_when_the_producer_state_is_unknown(run, tmp_path: Path) -> None:
    # a second segment with no snapshot of its own, after a segment with a bad batch:
    # the transactions open at its base cannot be known, so its .txnindex is not touched
    from kafkatool.record.v2 import RecordSpec, encode_batch

    part = tmp_path / "t-0"
    part.mkdir()
    first = bytearray(encode_batch([RecordSpec(0, 1, b"k", b"v")]) + encode_batch([RecordSpec(1, 1, b"k", b"v")]))
    first[-1] ^= 1
    (part / f"{0:020d}.log").write_bytes(bytes(first))
    (part / f"{2:020d}.log").write_bytes(encode_batch([RecordSpec(2, 1, b"k", b"v")]))
    (part / f"{2:020d}.txnindex").write_bytes(b"\x00" * 34)
    plan = plan_reindex(str(part / f"{2:020d}.log"), 4096)
    assert plan.txn_unavailable and "bad batch" in plan.txn_unavailable
    assert "txnindex" not in [c.kind for c in plan.changes]
    r = run("reindex", str(part / f"{2:020d}.log"))
    assert "not rebuilt" in r.out


def test_real_kraft_index_reproduced(tmp_path: Path, run) -> None:
    src = real_fixture("greenlemonT__kafka-temp/data/kafka3/__cluster_metadata-0")
    plan = plan_reindex(str(src / f"{SEG0}.log"), 4096)
    index, timeindex = plan.changes
    assert index.action == "unchanged" and index.new_entries == 500
    # the time index differs from the broker's by its last entry only: check it is consistent
    part = copy_partition(src, tmp_path)
    original_index = (part / f"{SEG0}.index").read_bytes()
    r = run("reindex", "--execute", "--backup-dir", str(tmp_path / "bk"), str(part))
    assert r.code == 0, r
    assert (part / f"{SEG0}.index").read_bytes() == original_index
    assert_consistent(part / f"{SEG0}.log")
    assert run("reindex", str(part)).code == 0


def test_real_william_consumer_offsets_consistent(tmp_path: Path, run) -> None:
    # That broker indexed per produce request (live appends), not by recovery: the rebuilt
    # index differs from the broker's but must agree with the log, as the broker's does.
    src = real_fixture("William0423__kafka/kafka-logs/__consumer_offsets-28")
    assert_consistent(src / f"{SEG0}.log", check_final=False)  # the broker's own files
    plan = plan_reindex(str(src / f"{SEG0}.log"), 4096)
    assert not plan.needs_changes and {c.action for c in plan.changes} == {"keep"}  # verify finds them right
    plan = plan_reindex(str(src / f"{SEG0}.log"), 4096, rebuild_all=True)
    assert plan.needs_changes and plan.bad_tail is None
    part = copy_partition(src, tmp_path)
    assert run("reindex", "--execute", "--all", "--backup-dir", str(tmp_path / "bk"), str(part)).code == 0
    assert_consistent(part / f"{SEG0}.log")
    assert run("reindex", str(part)).code == 0


def assert_consistent(log: Path, check_final: bool = True) -> None:
    """Every .index entry names a batch start and that batch's last offset; the time index
    rises strictly and each entry's timestamp is reached by its offset; the last time entry is
    the segment's max timestamp at the first batch holding it (§8.1, §8.3)."""
    batches = {}
    max_ts, at = -1, None
    prefix_max = []  # (last offset, max timestamp so far)
    with SegmentWalker(log) as w:
        for b, _ in w:
            batches[b.position] = b.last_offset
            if b.max_timestamp > max_ts:
                max_ts, at = b.max_timestamp, b.last_offset
            prefix_max.append((b.last_offset, max_ts))
    oi = read_offset_index(log.with_suffix(".index"))
    offsets = [o for o, _ in oi.iter_absolute()]
    assert offsets == sorted(set(offsets))
    for o, pos in oi.iter_absolute():
        assert batches.get(pos) == o, (o, pos)
    ti = read_time_index(log.with_suffix(".timeindex"))
    entries = list(ti.iter_absolute())
    assert [t for t, _ in entries] == sorted({t for t, _ in entries})
    for ts, o in entries:
        reached = max((m for lo, m in prefix_max if lo <= o), default=-1)
        assert reached >= ts, (ts, o)
    if check_final:
        assert entries[-1] == (max_ts, at)


# --------------------------------------------------------------------------- dry run, exit codes, plan


def test_dry_run_exit_codes_and_jsonl(run, tmp_path: Path) -> None:
    part = copy_partition(FIXTURES / "v2-none-0", tmp_path)
    before = snapshot(part)
    r = run("reindex", "--index-interval-bytes", "1024", str(part))
    assert r.code == 0 and r.out == ""
    r = run("reindex", "--format", "jsonl", str(part))  # the default 4096 differs from 1024, both are right
    assert r.code == 0
    assert [f["action"] for f in json.loads(r.lines[0])["files"]] == ["keep", "keep"]
    r = run("reindex", "--all", "--format", "jsonl", str(part))
    assert r.code == 1
    objs = [json.loads(line) for line in r.lines]
    seg, summary = objs
    assert seg["type"] == "reindex_segment" and seg["needsChanges"]
    assert [f["action"] for f in seg["files"]] == ["rewrite", "rewrite"]
    assert seg["files"][0]["oldSize"] == 8 and seg["files"][0]["newSize"] == 0
    assert summary == summary | {"type": "reindex_summary", "execute": False, "needingChanges": 1}
    assert snapshot(part) == before
    assert not (tmp_path / ".lock").exists() and not (tmp_path / "logdir" / ".lock").exists()


def test_bad_tail_is_not_indexed_and_log_untouched(run, tmp_path: Path) -> None:
    part = copy_partition(FIXTURES / "v2-none-0", tmp_path)
    log = part / f"{SEG0}.log"
    with SegmentWalker(log) as w:
        last = [b.position for b, _ in w][-1]
    data = bytearray(log.read_bytes())
    data[last + 70] ^= 0xFF  # inside the records: the CRC fails
    log.write_bytes(bytes(data))
    plan = plan_reindex(str(log), 1024)
    assert plan.valid_bytes == last and "CRC" in plan.bad_tail
    # the .timeindex on disk indexes the damaged last batch: its rebuild would cover less of the log
    r = run("reindex", "--index-interval-bytes", "1024", str(part))
    assert r.code == 1 and "bad tail" in r.out and "kafkatool truncate" in r.out
    assert f"refused   nothing written: bad batch at byte {last}" in r.out
    before = snapshot(part)
    r = run("reindex", "--execute", "--index-interval-bytes", "1024", "--backup-dir", str(tmp_path / "b"), str(part))
    assert r.code == 1 and snapshot(part) == before and not (tmp_path / "b").exists()
    assert log.read_bytes() == bytes(data)
    (part / f"{SEG0}.timeindex").unlink()  # nothing to lose: created for the valid bytes
    r = run("reindex", "--execute", "--index-interval-bytes", "1024", "--backup-dir", str(tmp_path / "b"), str(part))
    assert r.code == 0, r
    assert log.read_bytes() == bytes(data)
    assert plan_reindex(str(log), 1024).changes[0].action == "unchanged"


def test_transitional_dir_refused(run, tmp_path: Path) -> None:
    src = FIXTURES / "golden-0"
    part = tmp_path / "logdir" / "golden-0.0123456789abcdef0123456789abcdef-delete"
    shutil.copytree(src, part)
    r = run("reindex", "--execute", str(part))
    assert r.code == 2 and "-delete" in r.err
    assert run("reindex", "--allow-transitional", "--index-interval-bytes", "128", str(part)).code == 0


# --------------------------------------------------------------------------- backups and restore


def test_backup_restores_original_bytes(run, tmp_path: Path) -> None:
    part = copy_partition(FIXTURES / "v1-none-0", tmp_path)
    original = snapshot(part)
    r = run("reindex", "--execute", "--all", str(part))  # 4096, so both files change
    assert r.code == 0, r
    assert snapshot(part) != original
    backups = list(tmp_path.glob("kafkatool-backup-logdir-*"))
    assert len(backups) == 1  # beside the log dir, not inside it
    bk = backups[0]
    manifest = json.loads((bk / "MANIFEST.json").read_text())
    for e in manifest["files"]:
        assert e["action"] == "rewritten"
        saved = (bk / e["backupFile"]).read_bytes()
        assert hashlib.sha256(saved).hexdigest() == e["original"]["sha256"] == original[Path(e["originalPath"]).name][1]
    assert len(manifest["files"]) == 2
    subprocess.run(["sh", "-e", str(bk / "RESTORE.txt")], check=True)
    assert snapshot(part) == original


# --------------------------------------------------------------------------- the .lock rule (§11.5)


HOLD_LOCK = textwrap.dedent(
    """
    import fcntl, os, sys
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("locked", flush=True)
    sys.stdin.read()
    """
)


def test_live_broker_lock_refuses_and_changes_nothing(run, tmp_path: Path) -> None:
    part = copy_partition(FIXTURES / "v2-none-0", tmp_path)
    logdir = part.parent
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(logdir / ".lock")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        before = snapshot(part), snapshot(logdir)
        r = run("reindex", "--execute", "--all", str(part))
        assert r.code == 2 and ".lock" in r.err and "broker" in r.err
        assert (snapshot(part), snapshot(logdir)) == before
        assert list(tmp_path.glob("kafkatool-backup-*")) == []
        with pytest.raises(LiveBrokerError):
            LogDirLock(str(logdir)).acquire()
        # --force is for a copy the operator knows is offline
        assert run("reindex", "--execute", "--all", "--force", "--backup-dir", str(tmp_path / "b"), str(part)).code == 0
    finally:
        holder.stdin.close()
        holder.wait(timeout=10)
    with LogDirLock(str(logdir)) as lock:  # once the holder is gone the lock is ours
        assert lock.path.endswith(".lock")


def test_missing_lock_file_is_created_and_held(tmp_path: Path) -> None:
    with LogDirLock(str(tmp_path)) as lock:
        assert lock.created and (tmp_path / ".lock").exists()
        probe = subprocess.run(
            [sys.executable, "-c", "import fcntl,os,sys; fd=os.open(sys.argv[1], os.O_RDWR); "
             "fcntl.lockf(fd, fcntl.LOCK_EX|fcntl.LOCK_NB)", str(tmp_path / ".lock")],
            capture_output=True,
        )
        assert probe.returncode != 0  # another process sees our POSIX lock


# --------------------------------------------------------------------------- crash safety


def test_sigkill_at_every_step_leaves_old_or_new(tmp_path: Path) -> None:
    # Three segments whose every index changes (built with 1024, rebuilt with the default
    # 4096), producer snapshots, a leader-epoch-checkpoint: after a kill at any step the
    # partition dir is exactly the old state or exactly the new one (the whole-dir exchange).
    from crash_helpers import sigkill_every_step_strictly
    from test_truncate import build_partition

    src = build_partition(tmp_path / "src")

    def fresh(label: str) -> Path:
        dst = tmp_path / label / "logdir" / src.name
        shutil.copytree(src, dst)
        return dst

    def restore(bk: Path) -> None:
        subprocess.run(["sh", "-e", str(bk / "RESTORE.txt")], check=True, capture_output=True)

    n, seen = sigkill_every_step_strictly(tmp_path, fresh, ["reindex", "--all"], restore)
    # staging dir, probe, small files, links, fsyncs, backups, exchange, removal, fsync
    assert n > 20
    assert seen["old", True] >= 10 and seen["new", True] >= 2 and seen["new", False] >= 1, seen


def test_journal_fallback_sigkill_at_every_step_leaves_old_new_or_a_journal(tmp_path: Path) -> None:
    # $KAFKATOOL_NO_EXCHANGE forces the journaled fallback (no renameat2, a file system that
    # refuses RENAME_EXCHANGE, ...): there a kill between two renames can leave a mix that
    # the journal records and the next run completes.
    src = FIXTURES / "v2-none-0"
    old = index_files(src)
    ref = copy_partition(src, tmp_path, "ref")
    env = dict(os.environ, PYTHONPATH=str(REPO), KAFKATOOL_NO_EXCHANGE="1")
    cmd = [sys.executable, "-m", "kafkatool", "reindex", "--all", "--execute", "--quiet"]
    subprocess.run([*cmd, "--backup-dir", str(tmp_path / "ref-bk"), str(ref)], check=True, env=env)
    new = index_files(ref)
    assert new.keys() == old.keys() and all(new[k] != old[k] for k in new)
    mixed = 0
    n = 0
    while True:
        n += 1
        part = copy_partition(src, tmp_path, f"run{n}")
        bk = tmp_path / f"bk{n}"
        p = subprocess.run([*cmd, "--backup-dir", str(bk), str(part)], env=dict(env, KAFKATOOL_FAULT_AT=str(n)),
                           capture_output=True)
        if p.returncode == 0:
            break
        assert p.returncode == -signal.SIGKILL, p
        assert [d for d in part.parent.iterdir() if d.is_dir()] == [part]  # no staging dir on this path
        now = index_files(part)
        assert now.keys() == old.keys()
        for k in now:  # never a partial file under a real name
            assert now[k] in (old[k], new[k]), (n, k)
        journal = (part / f"{SEG0}{JOURNAL_SUFFIX}").exists()
        if now != old and now != new:
            mixed += 1
            assert journal, f"step {n}: a mix of old and new without a committed journal"
        # the next normal run completes the repair and cleans up
        subprocess.run([*cmd, "--backup-dir", str(tmp_path / f"bk{n}-again"), str(part)], check=True, env=env)
        assert index_files(part) == new
        leftovers = [x.name for x in part.iterdir() if x.name.endswith((TEMP_SUFFIX, JOURNAL_SUFFIX))]
        assert leftovers == []
        # whatever was replaced has its original in one of the two backups
        saved = [e for d in (bk, tmp_path / f"bk{n}-again") if (d / "MANIFEST.json").exists()
                 for e in json.loads((d / "MANIFEST.json").read_text())["files"]]
        backed_up = {Path(e["originalPath"]).name for e in saved if e["action"] == "rewritten"}
        assert backed_up == set(old), (n, backed_up)
    assert n > 10  # backups, temp writes, fsyncs, journal, renames, directory fsync, journal removal
    assert mixed == 1  # only between the two renames, with the journal committed
    assert index_files(part) == new
