"""Issue 9 hardening of ``kafkatool reindex`` and the shared repair machinery (kafkatool.repair).

Every test works on copies under tmp_path; fixtures/ and ../shared are never written.
Expected values come from the broker's own files (../shared/fixtures-real), from the
spec's rules worked by hand, or from byte counts of the files written here.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, real_fixture
from crash_helpers import kafkatool
from test_reindex import HOLD_LOCK  # a process holding <log dir>/.lock as the broker does
from kafkatool import reindex, repair
from kafkatool.safety import apply, exchange
from kafkatool.record.v2 import RecordSpec, encode_batch

SEG0 = "00000000000000000000"
TRUNCATE_JOURNAL = "kafkatool-truncate.kafkatool-journal"


# --------------------------------------------------------------------------- find_pending_state


def test_find_pending_state_names_each_journal_temp_and_staging_dir(tmp_path: Path) -> None:
    part = tmp_path / "logdir" / "t-0"
    part.mkdir(parents=True)
    (part / f"{SEG0}.log").write_bytes(b"")
    (part / f"{SEG0}.log.kafkatool-tmp").write_bytes(b"new")          # named by truncate's journal
    (part / "leader-epoch-checkpoint.kafkatool-tmp").write_bytes(b"")  # not named: an uncommitted temp
    (part / TRUNCATE_JOURNAL).write_text(json.dumps(
        {"tool": "kafkatool truncate", "replace": [{"temp": f"{SEG0}.log.kafkatool-tmp", "target": f"{SEG0}.log"}],
         "move": []}))
    (part / f"{SEG0}.kafkatool-journal").write_text("{}")
    (part / f"{SEG0}.kafkatool-journal.kafkatool-tmp").write_text("{")
    staging = tmp_path / "logdir" / repair.staging_dir_name(str(part))
    staging.mkdir()
    got = {os.path.basename(p): what.split(":", 1)[0] for p, what in repair.find_pending_state(str(part))}
    assert got == {
        TRUNCATE_JOURNAL: "truncate journal",
        f"{SEG0}.kafkatool-journal": "reindex journal",
        f"{SEG0}.log.kafkatool-tmp": "pending temp file",
        "leader-epoch-checkpoint.kafkatool-tmp": "temp file",
        f"{SEG0}.kafkatool-journal.kafkatool-tmp": "temp file",
        staging.name: "staging dir",
    }
    assert repair.find_pending_state(str(tmp_path / "nonexistent-0")) == []


# --------------------------------------------------------------------------- helpers

BATCH = 205  # bytes of one 1-record batch with a 134-byte value (12-byte log overhead included)


def tree(d: Path) -> dict[str, bytes]:
    """Every regular file under ``d`` (relative name -> bytes)."""
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file() and p.name != ".lock"}


def copy_real(tmp_path: Path, rel: str, name: str = "logdir") -> Path:
    """A copy of a real broker dir (``KAFKATOOL_REAL_FIXTURES`` or ../shared/fixtures-real)."""
    env = os.environ.get("KAFKATOOL_REAL_FIXTURES")
    src = Path(env) / rel if env and (Path(env) / rel).exists() else real_fixture(rel)
    dst = tmp_path / name
    shutil.copytree(src, dst)
    for p in dst.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    return dst


def batch_positions(data: bytes) -> list[tuple[int, int]]:
    """(position, size) of each entry of a log, from the 12-byte frame alone (spec §3), not kafkatool's walker."""
    out, pos = [], 0
    while pos + 12 <= len(data):
        size = 12 + struct.unpack_from(">i", data, pos + 8)[0]
        if size < 26 or pos + size > len(data):
            break
        out.append((pos, size))
        pos += size
    return out


def uniform_segment(n: int) -> bytes:
    """``n`` batches of exactly BATCH bytes, offset i and timestamp 1000 + i."""
    out = b"".join(encode_batch([RecordSpec(i, 1000 + i, b"k", b"v" * 134)], base_offset=i) for i in range(n))
    assert len(out) == n * BATCH
    return out


def hand_index(entries: list[tuple[int, int]]) -> bytes:
    """An offset index (§8.1: relative offset int32, position int32) written by hand."""
    return b"".join(struct.pack(">ii", off, pos) for off, pos in entries)


def cli(*args: str, env: dict | None = None, timeout: float = 60, cwd: str | None = None) -> subprocess.CompletedProcess:
    """The CLI in a fresh interpreter of the repo under test (stdout a pipe: strict UTF-8 by default)."""
    full = dict(os.environ, PYTHONPATH=str(REPO), **(env or {}))
    full.pop("PYTHONIOENCODING", None)
    return subprocess.run([sys.executable, "-m", "kafkatool", *args], capture_output=True, env=full,
                          timeout=timeout, cwd=cwd)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    monkeypatch.delenv(repair.NO_EXCHANGE_ENV, raising=False)
    monkeypatch.delenv("KAFKATOOL_FAULT_AT", raising=False)


# --------------------------------------------------------------------------- 1. exit 1 means an index is wrong


REAL_LOG_DIRS = ["William0423__kafka/kafka-logs", "greenlemonT__kafka-temp/data/kafka3",
                 "greenlemonT__kafka-temp/data/kafka"]


@pytest.mark.parametrize("rel", REAL_LOG_DIRS)
def test_healthy_broker_dir_dry_run_exits_0_and_execute_changes_nothing(run, tmp_path: Path, rel: str) -> None:
    # the brokers indexed per append; a recovery rebuild indexes per batch: both right, verify agrees
    logdir = copy_real(tmp_path, rel)
    assert run("verify", str(logdir)).code == 0
    before = tree(logdir)
    r = run("reindex", str(logdir))
    assert r.code == 0, r
    assert "need changes" in r.err and " 0 need changes" in r.err
    r = run("reindex", "--execute", "--backup-dir", str(tmp_path / "bk"), str(logdir))
    assert r.code == 0 and tree(logdir) == before and not (tmp_path / "bk").exists(), r
    # --all is today's rebuild: the broker's files differ from it
    assert run("reindex", "--all", str(logdir)).code == 1


def test_a_damaged_index_in_a_real_broker_dir_is_the_only_file_rewritten(run, tmp_path: Path) -> None:
    logdir = copy_real(tmp_path, "William0423__kafka/kafka-logs")
    part = logdir / "__consumer_offsets-28"
    index = part / f"{SEG0}.index"
    original = index.read_bytes()
    damaged = bytearray(original)
    damaged[100 * 8 + 4: 100 * 8 + 8] = struct.pack(">i", struct.unpack_from(">i", original, 100 * 8 + 4)[0] + 1)
    index.write_bytes(bytes(damaged))  # entry 100 points one byte past a batch start
    others = {k: v for k, v in tree(logdir).items() if not k.endswith(f"{SEG0}.index") or "__consumer" not in k}
    r = run("reindex", str(logdir))
    assert r.code == 1, r
    assert f"rewrite   {SEG0}.index" in r.out and "index_entry_not_batch_start" in r.out
    assert f"keep      {SEG0}.timeindex" in r.out and r.out.count("  rewrite   ") == 1
    r = run("reindex", "--execute", "--backup-dir", str(tmp_path / "bk"), str(logdir))
    assert r.code == 0, r
    after = tree(logdir)
    assert {k: v for k, v in after.items() if k in others} == others  # nothing else touched
    assert index.read_bytes() != bytes(damaged)
    # the rewritten index agrees with the log: every entry a batch start holding that offset's batch end
    positions = {p for p, _s in batch_positions((part / f"{SEG0}.log").read_bytes())}
    entries = list(struct.iter_unpack(">ii", index.read_bytes()))
    assert entries and all(pos in positions for _o, pos in entries)
    assert run("verify", str(logdir)).code == 0
    assert run("reindex", str(logdir)).code == 0


def test_missing_timeindex_is_created_the_rest_kept(run, tmp_path: Path) -> None:
    logdir = copy_real(tmp_path, "William0423__kafka/kafka-logs")
    (logdir / "debug_topic-0" / f"{SEG0}.timeindex").unlink()
    r = run("reindex", "--format", "jsonl", str(logdir))
    assert r.code == 1
    objs = [json.loads(x) for x in r.lines]
    actions = {(Path(o["segment"]).parent.name, f["kind"]): (f["action"], f["why"])
               for o in objs if o["type"] == "reindex_segment" for f in o["files"]}
    assert actions[("debug_topic-0", "timeindex")] == ("create", "missing")
    assert actions[("__consumer_offsets-28", "index")][0] == "keep"


def _coverage_partition(tmp_path: Path, kept_entries: int) -> Path:
    """5501 batches of 205 bytes; at index.interval.bytes 1024 recovery indexes every 5th batch
    (position 1025 j, offset 5 j, j = 1..1100). The .index on disk is its first ``kept_entries``
    entries, written by hand: a valid prefix verify has nothing against."""
    part = tmp_path / "logdir" / "c-0"
    part.mkdir(parents=True)
    (part / f"{SEG0}.log").write_bytes(uniform_segment(5501))
    (part / f"{SEG0}.index").write_bytes(hand_index([(5 * j, 1025 * j) for j in range(1, kept_entries + 1)]))
    return part


@pytest.mark.parametrize(("kept", "action"), [(76, "keep"), (75, "rewrite")])
def test_an_index_not_covering_the_log_is_rewritten_at_the_exact_boundary(tmp_path: Path, kept: int, action: str) -> None:
    # rebuilt last entry at 1025 * 1100; kept 76: 1025 * 1024 = 1049600 bytes short, exactly
    # index.interval.bytes (1024) + COVERAGE_SLACK (1 MiB): still covering. 75: one entry more, not.
    assert repair.COVERAGE_SLACK == 1 << 20
    part = _coverage_partition(tmp_path, kept)
    plan = repair.plan_reindex(str(part / f"{SEG0}.log"), 1024)
    (index,) = [c for c in plan.changes if c.kind == "index"]
    assert index.action == action, index.why
    if action == "rewrite":
        assert index.why.startswith("index_not_covering") and "byte 76875" in index.why and "byte 1127500" in index.why
        assert index.data == hand_index([(5 * j, 1025 * j) for j in range(1, 1101)])


# --------------------------------------------------------------------------- 2. never cover less


def _damage_middle(part: Path) -> int:
    """Flip a byte inside the records of the middle batch: its CRC fails. Returns its position."""
    log = part / f"{SEG0}.log"
    data = bytearray(log.read_bytes())
    pos, _size = batch_positions(bytes(data))[len(batch_positions(bytes(data))) // 2]
    data[pos + 70] ^= 0xFF
    log.write_bytes(bytes(data))
    return pos


def test_a_bad_batch_in_the_middle_never_shrinks_the_brokers_index(run, tmp_path: Path) -> None:
    logdir = copy_real(tmp_path, "William0423__kafka/kafka-logs")
    part = logdir / "__consumer_offsets-28"
    bad = _damage_middle(part)
    (logdir / "debug_topic-0" / f"{SEG0}.timeindex").unlink()  # another partition with work to do
    index = part / f"{SEG0}.index"
    before = index.read_bytes()
    assert len(before) == 254 * 8
    # default: the broker's index passes verify's index checks; it is kept, the other partition done
    r = run("reindex", "--execute", "--backup-dir", str(tmp_path / "bk"), str(logdir))
    assert r.code == 0, r
    assert index.read_bytes() == before and (logdir / "debug_topic-0" / f"{SEG0}.timeindex").exists()
    assert f"bad tail  bytes [{bad}, " in r.out
    # --all would rebuild it covering [0, bad) only: refused, with the way out; exit 1
    r = run("reindex", "--all", "--execute", "--backup-dir", str(tmp_path / "bk2"), str(logdir))
    assert r.code == 1, r
    assert index.read_bytes() == before and (part / f"{SEG0}.timeindex").exists()
    assert f"refused   nothing written: bad batch at byte {bad} (batch CRC mismatch (stored crc" in r.out
    assert f"run `kafkatool truncate --execute {part.resolve()}` first" in r.out
    assert "1 refused" in r.err


def _prefix_partition(tmp_path: Path, index_entries: list[tuple[int, int]]) -> tuple[Path, int]:
    """20 batches of 205 bytes, batch 12 with a bad CRC; interval 1024: recovery indexes batches 5 and 10."""
    part = tmp_path / "logdir" / "p-0"
    part.mkdir(parents=True)
    data = bytearray(uniform_segment(20))
    bad = 12 * BATCH
    data[bad + 70] ^= 0xFF
    (part / f"{SEG0}.log").write_bytes(bytes(data))
    (part / f"{SEG0}.index").write_bytes(hand_index(index_entries))
    return part, bad


@pytest.mark.parametrize(("last_entry", "refused"), [((12, 12 * BATCH), True), ((11, 11 * BATCH), False)])
def test_refusal_boundary_an_entry_at_the_bad_batch(tmp_path: Path, last_entry, refused: bool) -> None:
    # entry 0 is wrong (byte 1 is no batch start: index_entry_not_batch_start), so the file is rewritten;
    # whether that is allowed depends on its last entry: one pointing at the bad batch (byte 2460)
    # describes it, one at byte 2255 does not
    part, bad = _prefix_partition(tmp_path, [(3, 1), last_entry])
    plan = repair.plan_reindex(str(part / f"{SEG0}.log"), 1024)
    (index,) = [c for c in plan.changes if c.kind == "index"]
    assert index.action == "rewrite" and plan.valid_bytes == bad
    assert (plan.refused is not None) is refused, plan.refused
    if refused:
        assert plan.refused_kind == "bad_batch" and f"bad batch at byte {bad}" in plan.refused
        assert not plan.needs_changes
    else:
        assert index.data == hand_index([(5, 5 * BATCH), (10, 10 * BATCH)])


# --------------------------------------------------------------------------- 3. another command's pending journal


def _interrupted_truncate(tmp_path: Path) -> Path:
    """A journal-mode truncate killed right after its commit point: the truncate journal and the
    temp files it names are in the partition dir."""
    from test_truncate import build_partition, name as seg_name

    n = 0
    while True:
        n += 1
        part = build_partition(tmp_path / f"t{n}")
        data = bytearray((part / seg_name(18, ".log")).read_bytes())
        data[batch_positions(bytes(data))[3][0] + 80] ^= 0x55
        (part / seg_name(18, ".log")).write_bytes(bytes(data))
        p = kafkatool("truncate", "--execute", "--quiet", "--index-interval-bytes", "1024",
                      "--backup-dir", str(tmp_path / f"tbk{n}"), str(part), fault_at=n, no_exchange=True)
        assert p.returncode != 0 and n < 200, (n, p)
        if (part / TRUNCATE_JOURNAL).exists() and any(x.name.endswith(".kafkatool-tmp") for x in part.iterdir()):
            return part


def test_reindex_refuses_a_partition_with_a_pending_truncate_and_truncate_still_completes(run, tmp_path: Path) -> None:
    part = _interrupted_truncate(tmp_path)
    pending = {x.name: x.read_bytes() for x in part.iterdir() if x.name.endswith((".kafkatool-tmp", ".kafkatool-journal"))}
    assert TRUNCATE_JOURNAL in pending and len(pending) >= 2
    kinds = {what.split(":", 1)[0] for _p, what in repair.find_pending_state(str(part))}
    assert {"truncate journal", "pending temp file"} <= kinds
    for args in ([], ["--all"], ["--execute", "--all", "--backup-dir", str(tmp_path / "rbk")]):
        r = run("reindex", *args, str(part))
        assert r.code == 1, (args, r)
        assert f"run `kafkatool truncate --execute {part.resolve()}` to finish the interrupted truncate" in r.out
        now = {x.name: x.read_bytes() for x in part.iterdir() if x.name.endswith((".kafkatool-tmp", ".kafkatool-journal"))}
        assert now == pending, args  # not one byte of truncate's pending state removed
    r = run("truncate", "--execute", "--index-interval-bytes", "1024", "--backup-dir", str(tmp_path / "tbk-again"), str(part))
    assert r.code == 0, r
    assert not [x for x in part.iterdir() if x.name.endswith((".kafkatool-tmp", ".kafkatool-journal"))]
    r = run("reindex", "--index-interval-bytes", "1024", str(part))
    assert "refused" not in r.out and "pending" not in r.out, r  # (build_partition's txnindex has no real markers)


# --------------------------------------------------------------------------- 4. a stray name


def test_a_stray_segment_name_is_reported_and_the_rest_planned(run, tmp_path: Path) -> None:
    from test_truncate import build_partition, name as seg_name

    part = build_partition(tmp_path)  # segments 0, 18, 36
    (part / "99999999999999999999999.log").write_bytes(b"")
    (part / seg_name(36, ".index")).unlink()
    r = run("reindex", "--index-interval-bytes", "1024", str(part.parent))
    assert r.code == 1, r
    assert f"{part.resolve()}/99999999999999999999999.log: the name is not a base offset" in r.out
    assert f"create    {seg_name(36, '.index')}" in r.out
    r = run("reindex", "--format", "jsonl", "--index-interval-bytes", "1024", str(part.parent))
    problems = [json.loads(x) for x in r.lines if json.loads(x)["type"] == "reindex_problem"]
    assert [(Path(p["path"]).name, p["kind"]) for p in problems] == [("99999999999999999999999.log", "invalid_segment_name")]
    r = run("reindex", "--execute", "--index-interval-bytes", "1024", "--backup-dir", str(tmp_path / "bk"), str(part.parent))
    assert r.code == 1 and (part / seg_name(36, ".index")).exists(), r  # done, and the finding still reported


# --------------------------------------------------------------------------- 5. targets


def test_a_file_that_is_not_a_segment_is_refused(run, tmp_path: Path) -> None:
    for n in ("rand.log", "99999999999999999999999.log", "notes.txt", f"{SEG0}.snapshot"):
        (tmp_path / n).write_bytes(b"x" * 100)
        r = run("reindex", str(tmp_path / n))
        assert r.code == 2 and str(tmp_path / n) in r.err and "segment" in r.err, (n, r)
    r = run("reindex", str(tmp_path / f"{SEG0}.index"))  # does not exist: click's usage error
    assert r.code == 2


@pytest.mark.parametrize("layout", ["empty", "etc-like", "only-backups"])
def test_a_target_with_nothing_kafka_in_it_says_so(run, tmp_path: Path, layout: str) -> None:
    root = tmp_path / "t"
    root.mkdir()
    if layout == "etc-like":
        (root / "passwd").write_text("root:x:0:0\n")
        (root / "ssh").mkdir()
        (root / "ssh" / "sshd_config").write_text("Port 22\n")
    elif layout == "only-backups":
        bk = root / "kafkatool-backup-data-20250101T000000000000Z" / "orders-3"
        bk.mkdir(parents=True)
        (bk.parent / "MANIFEST.json").write_text("{}")
        (bk.parent / "RESTORE.txt").write_text("")
        (bk / f"{SEG0}.log").write_bytes(uniform_segment(3))
    r = run("reindex", str(root))
    assert r.code == 2 and "no Kafka segment found" in r.err, r


def test_a_dir_of_log_dirs_is_searched_and_backup_dirs_skipped(run, tmp_path: Path) -> None:
    top = tmp_path / "disks"
    for d in ("data1", "data2"):
        part = top / d / "orders-0"
        part.mkdir(parents=True)
        (part / f"{SEG0}.log").write_bytes(uniform_segment(10))
    # truncate's backup of a moved segment: a .log without indexes that must never be indexed in place
    bk = top / "kafkatool-backup-data1-20250101T000000000000Z" / "orders-0"
    bk.mkdir(parents=True)
    (bk.parent / "MANIFEST.json").write_text("{}")
    (bk.parent / "RESTORE.txt").write_text("")
    (bk / f"{SEG0}.log").write_bytes(uniform_segment(10))
    r = run("reindex", "--execute", "--backup-dir", str(tmp_path / "rbk"), str(top))
    assert r.code == 0, r
    assert (top / "data1" / "orders-0" / f"{SEG0}.index").exists() and (top / "data2" / "orders-0" / f"{SEG0}.index").exists()
    assert sorted(p.name for p in bk.iterdir()) == [f"{SEG0}.log"]
    assert "skipped: a kafkatool backup dir" in r.out


def test_one_unreadable_partition_dir_is_reported_and_the_rest_done(run, tmp_path: Path, monkeypatch) -> None:
    logdir = tmp_path / "logdir"
    for t in ("a-0", "b-0"):
        (logdir / t).mkdir(parents=True)
        (logdir / t / f"{SEG0}.log").write_bytes(uniform_segment(10))
    locked = str((logdir / "a-0").resolve())
    real_listdir = os.listdir

    def listdir(path="."):  # as for a directory of mode 000 and a user who is not root
        if os.fspath(path) == locked:
            raise PermissionError(13, "Permission denied", path)
        return real_listdir(path)

    real_scandir = os.scandir

    def scandir(path="."):  # the log-dir model lists with scandir
        if os.fspath(path) == locked:
            raise PermissionError(13, "Permission denied", path)
        return real_scandir(path)

    monkeypatch.setattr(os, "listdir", listdir)
    monkeypatch.setattr(os, "scandir", scandir)
    r = run("reindex", "--execute", "--backup-dir", str(tmp_path / "bk"), str(logdir))
    assert r.code == 1, r
    assert f"{locked}: cannot list the directory: Permission denied" in r.out
    assert (logdir / "b-0" / f"{SEG0}.index").exists()


# --------------------------------------------------------------------------- 6. names that are not UTF-8


@pytest.mark.parametrize("journal", [False, True])
def test_non_utf8_log_and_partition_dir_names_end_to_end(tmp_path: Path, journal: bool) -> None:
    root = os.fsencode(str(tmp_path)) + b"/log\xff-dir"
    part = root + b"/caf\xe9-0"
    os.makedirs(part)
    with open(part + b"/" + SEG0.encode() + b".log", "wb") as f:
        f.write(uniform_segment(30))
    env = {repair.NO_EXCHANGE_ENV: "1"} if journal else {}
    bk = os.fsdecode(os.fsencode(str(tmp_path)) + b"/bk\xfe")
    for fmt in ("text", "jsonl"):
        p = cli("reindex", "--format", fmt, os.fsdecode(root), env=env)
        assert p.returncode == 1 and b"Traceback" not in p.stderr and b"UnicodeEncodeError" not in p.stderr, p
    p = cli("reindex", "--execute", "--backup-dir", bk, os.fsdecode(root), env=env)
    assert p.returncode == 0, p
    assert b"/log\xff-dir/caf\xe9-0/" + SEG0.encode() + b".log" in p.stdout  # the name's own bytes
    assert (b"under a journal" in p.stdout) is journal
    assert os.path.exists(part + b"/" + SEG0.encode() + b".index")
    assert not [n for n in os.listdir(part) if n.endswith((b".kafkatool-tmp", b".kafkatool-journal"))]
    p = cli("reindex", "--format", "jsonl", os.fsdecode(root), env=env)
    assert p.returncode == 0, p
    seg = json.loads(p.stdout.splitlines()[0])
    assert os.fsencode(seg["segment"]).endswith(b"/caf\xe9-0/" + SEG0.encode() + b".log")


# --------------------------------------------------------------------------- 7. Ctrl-C


def _three_partitions(tmp_path: Path) -> Path:
    logdir = tmp_path / "logdir"
    for t in ("a-0", "b-0", "c-0"):
        (logdir / t).mkdir(parents=True)
        (logdir / t / f"{SEG0}.log").write_bytes(uniform_segment(30))
    return logdir


def test_ctrl_c_while_planning_is_one_line_and_130(run, tmp_path: Path, monkeypatch) -> None:
    logdir = _three_partitions(tmp_path)

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(reindex, "plan_reindex_all", interrupted)
    r = run("reindex", "--execute", str(logdir))
    assert r.code == 130, r
    assert r.err.strip().splitlines() == ["kafkatool reindex: interrupted while planning; nothing was changed"]


def test_ctrl_c_during_execute_says_the_state_of_each_partition(run, tmp_path: Path, monkeypatch) -> None:
    logdir = _three_partitions(tmp_path)
    real_fault_point = exchange.fault_point
    seen = []

    def fault_point(label: str) -> None:  # Ctrl-C in the second partition, right after its exchange
        seen.append(label)
        if label == "after exchange" and seen.count("after exchange") == 2:
            raise KeyboardInterrupt
        real_fault_point(label)

    monkeypatch.setattr(exchange, "fault_point", fault_point)
    r = run("reindex", "--execute", "--backup-dir", str(tmp_path / "bk"), str(logdir))
    assert r.code == 130, r
    lines = r.err.strip().splitlines()
    assert lines[0] == "kafkatool reindex: interrupted during --execute; the partition dirs are in these states:"
    a, b, c = (str((logdir / t).resolve()) for t in ("a-0", "b-0", "c-0"))
    assert lines[1] == f"  {a}: done"
    staging = repair.staging_dir_name(b)
    assert lines[2].startswith(f"  {b}: interrupted, the partition's files are complete (old or new state); left over: ")
    assert staging in lines[2] and "(staging dir)" in lines[2]
    assert lines[2].endswith(f"`kafkatool reindex --execute {b}` completes or removes them")
    assert lines[3] == f"  {c}: untouched"
    assert (logdir / "a-0" / f"{SEG0}.index").exists() and (logdir / "b-0" / f"{SEG0}.index").exists()
    assert not (logdir / "c-0" / f"{SEG0}.index").exists()
    monkeypatch.setattr(exchange, "fault_point", real_fault_point)
    r = run("reindex", "--execute", "--backup-dir", str(tmp_path / "bk2"), str(logdir))
    assert r.code == 0 and not (logdir / staging).exists() and (logdir / "c-0" / f"{SEG0}.index").exists(), r


# --------------------------------------------------------------------------- 8. a full disk


def _fsync_fails_for(monkeypatch, predicate) -> None:
    """os.fsync raises ENOSPC (no file name, as the kernel reports it) for a file whose path matches."""
    real_fsync = os.fsync

    def fsync(fd):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            target = ""
        if predicate(target):
            raise OSError(28, "No space left on device")
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
def test_full_disk_while_staging_names_the_file_and_removes_the_staging_dir(run, tmp_path: Path, monkeypatch) -> None:
    logdir = _three_partitions(tmp_path)
    before = tree(logdir)
    _fsync_fails_for(monkeypatch, lambda t: "-delete/" in t and t.endswith(".timeindex"))
    r = run("reindex", "--execute", "--backup-dir", str(tmp_path / "bk"), str(logdir / "a-0"))
    assert r.code == 2, r
    staging = repair.staging_dir_name(str((logdir / "a-0").resolve()))
    assert f"{staging}/{SEG0}.timeindex: No space left on device (while the new partition dir was built)" in r.err
    assert "the partial staging dir was removed" in r.err
    assert tree(logdir) == before and sorted(p.name for p in logdir.iterdir()) == [".lock", "a-0", "b-0", "c-0"]


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
def test_full_disk_on_the_journal_path_names_the_temp_file_and_leaves_the_old_state(run, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(repair.NO_EXCHANGE_ENV, "1")
    logdir = _three_partitions(tmp_path)
    before = tree(logdir)
    _fsync_fails_for(monkeypatch, lambda t: t.endswith(".timeindex.kafkatool-tmp"))
    r = run("reindex", "--execute", "--backup-dir", str(tmp_path / "bk"), str(logdir / "a-0"))
    assert r.code == 2, r
    assert f"a-0/{SEG0}.timeindex.kafkatool-tmp: No space left on device" in r.err
    assert tree(logdir) == before  # the temp files written so far were removed, no journal


# --------------------------------------------------------------------------- 9. output


def test_jsonl_is_compact_camel_case(run, tmp_path: Path) -> None:
    logdir = _three_partitions(tmp_path)
    for args in ([], ["--execute", "--backup-dir", str(tmp_path / "bk")]):
        r = run("reindex", "--format", "jsonl", *args, str(logdir))
        assert r.lines
        for line in r.lines:
            assert json.dumps(json.loads(line), separators=(",", ":")) == line

            def keys(o):
                if isinstance(o, dict):
                    for k, v in o.items():
                        yield k
                        yield from keys(v)
                elif isinstance(o, list):
                    for v in o:
                        yield from keys(v)

            bad = [k for k in keys(json.loads(line)) if "_" in k]
            assert not bad, (line[:100], bad)
    summary = json.loads(r.lines[-1])
    assert summary["type"] == "reindex_summary" and summary["filesWritten"] == 6 and summary["needingChanges"] == 3


def test_text_cosmetics(run, tmp_path: Path) -> None:
    part = tmp_path / "logdir" / "x-0"
    part.mkdir(parents=True)
    (part / f"{SEG0}.log").write_bytes(uniform_segment(30))  # 6150 bytes: one entry at 4096
    (part / f"{SEG0}.index").write_bytes(b"")
    (part / f"{SEG0}.timeindex").write_bytes(b"")
    r = run("reindex", "--all", str(part))
    assert r.code == 1
    assert f"rewrite   {SEG0}.index: 0 -> 8 bytes, 0 -> 1 entry (--all)" in r.out
    assert "bytes [0, 0)" not in r.out and "1 entries" not in r.out
    assert r.err == "reindex (dry run): 1 segment, 1 need changes (2 files); run again with --execute to apply\n"
    assert ".txnindex" in run("reindex", "--help").out


def test_dry_run_warns_when_a_live_broker_holds_the_log_dir(run, tmp_path: Path) -> None:
    logdir = _three_partitions(tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(logdir / ".lock")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        r = run("reindex", str(logdir))
        assert r.code == 1
        assert f"warning: PID {holder.pid} " in r.err and f" holds {logdir.resolve()}/.lock" in r.err
    finally:
        holder.stdin.close()
        holder.wait(timeout=10)
    assert "warning" not in run("reindex", str(logdir)).err


# --------------------------------------------------------------------------- 10. an adversary


def test_a_planted_temp_symlink_is_never_written_through(tmp_path: Path) -> None:
    part = tmp_path / "logdir" / "x-0"
    part.mkdir(parents=True)
    target = part / f"{SEG0}.index"
    target.write_bytes(b"old")
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    (part / f"{SEG0}.index.kafkatool-tmp").symlink_to(victim)
    repair.replace_files([(str(target), b"new index bytes")], repair.Backup(str(tmp_path / "bk")))
    assert victim.read_bytes() == b"precious"
    assert target.read_bytes() == b"new index bytes" and not target.is_symlink()
    assert not (part / f"{SEG0}.index.kafkatool-tmp").exists()


def test_a_temp_symlink_planted_after_the_plan_is_not_followed(run, tmp_path: Path, monkeypatch) -> None:
    # the plan saw no leftover; a symlink appears under the temp name before apply writes it
    monkeypatch.setenv(repair.NO_EXCHANGE_ENV, "1")
    part = tmp_path / "logdir" / "x-0"
    part.mkdir(parents=True)
    (part / f"{SEG0}.log").write_bytes(uniform_segment(30))
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    real_lock = repair.LogDirLock

    class PlantingLock(real_lock):
        def acquire(self) -> None:
            super().acquire()
            os.symlink(victim, part / f"{SEG0}.index.kafkatool-tmp")

    monkeypatch.setattr(apply, "LogDirLock", PlantingLock)
    r = run("reindex", "--execute", "--backup-dir", str(tmp_path / "bk"), str(part))
    assert r.code == 0, r
    assert victim.read_bytes() == b"precious"
    assert (part / f"{SEG0}.index").is_file() and not (part / f"{SEG0}.index").is_symlink()


def test_an_index_that_is_a_symlink_is_refused_not_read_through(run, tmp_path: Path) -> None:
    part = tmp_path / "logdir" / "x-0"
    part.mkdir(parents=True)
    (part / f"{SEG0}.log").write_bytes(uniform_segment(30))
    secret = tmp_path / "secret"
    secret.write_bytes(b"s" * 16)  # not an index: a rewrite would copy it into the backup
    (part / f"{SEG0}.index").symlink_to(secret)
    r = run("reindex", "--execute", "--backup-dir", str(tmp_path / "bk"), str(part))
    assert r.code == 1 and "a symbolic link: reindex reads and replaces regular files only" in r.out, r
    assert (part / f"{SEG0}.index").is_symlink() and secret.read_bytes() == b"s" * 16
    assert not (tmp_path / "bk").exists()


def test_a_fifo_named_like_a_segment_is_reported_never_opened(tmp_path: Path) -> None:
    part = tmp_path / "logdir" / "x-0"
    part.mkdir(parents=True)
    (part / f"{SEG0}.log").write_bytes(uniform_segment(30))
    os.mkfifo(part / f"{20:020d}.log")  # opening it for reading would block forever
    p = cli("reindex", "--execute", "--backup-dir", str(tmp_path / "bk"), str(part), timeout=30)
    assert p.returncode == 1, p
    assert f"{20:020d}.log: a .log that is not a regular file".encode() in p.stdout
    assert (part / f"{SEG0}.index").exists()
    p = cli("reindex", str(part / f"{20:020d}.log"), timeout=30)
    assert p.returncode == 1 and b"not a regular file" in p.stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
def test_journal_path_keeps_the_brokers_owner_and_mode(run, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(repair.NO_EXCHANGE_ENV, "1")
    part = tmp_path / "logdir" / "x-0"
    part.mkdir(parents=True)
    log = part / f"{SEG0}.log"
    log.write_bytes(uniform_segment(30))
    (part / f"{SEG0}.timeindex").write_bytes(b"\x00" * 11)  # corrupt: rewritten
    for p in (log, part / f"{SEG0}.timeindex"):
        os.chown(p, 4242, 4343)
        p.chmod(0o600)
    r = run("reindex", "--execute", "--backup-dir", str(tmp_path / "bk"), str(part))
    assert r.code == 0 and "under a journal" in r.out, r
    for n in (".index", ".timeindex"):  # rewritten, and created after its .log
        st = (part / f"{SEG0}{n}").stat()
        assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (4242, 4343, 0o600), n


@pytest.mark.parametrize("change", ["index rewritten by another run", "broker appended"])
def test_a_partition_that_changed_between_plan_and_lock_is_refused_the_others_done(run, tmp_path: Path, monkeypatch, change: str) -> None:
    logdir = _three_partitions(tmp_path)
    (logdir / "a-0" / f"{SEG0}.index").write_bytes(b"\x00" * 7)  # a corrupt index: rewritten
    real_lock = repair.LogDirLock

    class RacingLock(real_lock):
        def acquire(self) -> None:  # what happens while the plan was shown: another writer finishes
            if change == "broker appended":
                with open(logdir / "a-0" / f"{SEG0}.log", "ab") as f:
                    f.write(encode_batch([RecordSpec(30, 1030, b"k", b"v")], base_offset=30))
            else:
                (logdir / "a-0" / f"{SEG0}.index").write_bytes(b"")
            super().acquire()

    monkeypatch.setattr(apply, "LogDirLock", RacingLock)
    r = run("reindex", "--execute", "--backup-dir", str(tmp_path / "bk"), str(logdir))
    assert r.code == 1, r
    assert "changed since it was planned" in r.out and "run again" in r.out
    assert (logdir / "b-0" / f"{SEG0}.index").exists() and (logdir / "c-0" / f"{SEG0}.index").exists()
    monkeypatch.setattr(apply, "LogDirLock", real_lock)
    assert run("reindex", "--execute", "--backup-dir", str(tmp_path / "bk2"), str(logdir)).code == 0


def test_a_symlinked_partition_dir_locks_and_switches_the_real_one(run, tmp_path: Path) -> None:
    real_logdir = tmp_path / "disk" / "logdir"
    (real_logdir / "x-0").mkdir(parents=True)
    (real_logdir / "x-0" / f"{SEG0}.log").write_bytes(uniform_segment(30))
    elsewhere = tmp_path / "links"
    elsewhere.mkdir()
    (elsewhere / "x-0").symlink_to(real_logdir / "x-0")
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(real_logdir / ".lock")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        r = run("reindex", "--execute", "--backup-dir", str(tmp_path / "bk"), str(elsewhere / "x-0"))
        assert r.code == 2 and ".lock" in r.err, r  # the live broker's lock is on the real log dir
        assert not (elsewhere / ".lock").exists() and not (real_logdir / "x-0" / f"{SEG0}.index").exists()
    finally:
        holder.stdin.close()
        holder.wait(timeout=10)
    r = run("reindex", "--execute", "--format", "jsonl", "--backup-dir", str(tmp_path / "bk"), str(elsewhere / "x-0"))
    assert r.code == 0 and json.loads(r.lines[0])["method"] == "exchange", r
    assert (elsewhere / "x-0").is_symlink() and (real_logdir / "x-0" / f"{SEG0}.index").is_file()
    assert sorted(p.name for p in elsewhere.iterdir()) == ["x-0"]


def test_sigkill_at_every_step_through_a_symlinked_partition_dir(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / f"{SEG0}.log").write_bytes(uniform_segment(60))
    (src / f"{SEG0}.index").write_bytes(b"\x00" * 5)  # corrupt: rewritten; the .timeindex is created
    old = {p.name: p.read_bytes() for p in src.iterdir()}
    ref = tmp_path / "ref" / "logdir" / "x-0"
    shutil.copytree(src, ref)
    assert kafkatool("reindex", "--execute", "--quiet", "--backup-dir", str(tmp_path / "ref-bk"), str(ref)).returncode == 0
    new = {p.name: p.read_bytes() for p in ref.iterdir()}
    assert new != old
    n = 0
    while True:
        n += 1
        real = tmp_path / f"run{n}" / "logdir"
        shutil.copytree(src, real / "x-0")
        (tmp_path / f"run{n}" / "links").mkdir()
        link = tmp_path / f"run{n}" / "links" / "x-0"
        link.symlink_to(real / "x-0")
        p = kafkatool("reindex", "--execute", "--quiet", "--backup-dir", str(tmp_path / f"bk{n}"), str(link), fault_at=n)
        now = {q.name: q.read_bytes() for q in (real / "x-0").iterdir()}
        assert sorted(q.name for q in link.parent.iterdir()) == ["x-0"], n  # no lock, no staging dir there
        if p.returncode == 0:
            assert now == new
            break
        assert p.returncode == -9, (n, p)
        assert now in (old, new), f"step {n}: the real partition dir is neither the old state nor the new one"
        again = kafkatool("reindex", "--execute", "--quiet", "--backup-dir", str(tmp_path / f"bk{n}b"), str(link))
        assert again.returncode == 0, (n, again)
        assert {q.name: q.read_bytes() for q in (real / "x-0").iterdir()} == new, n
        assert sorted(q.name for q in real.iterdir()) == [".lock", "x-0"], n  # the staging dir removed
    assert n > 10


def test_runs_at_once_each_refuse_or_finish_and_leave_one_clean_state(tmp_path: Path) -> None:
    logdir = _three_partitions(tmp_path)
    procs = [subprocess.Popen([sys.executable, "-m", "kafkatool", "reindex", "--execute", "--quiet",
                               "--backup-dir", str(tmp_path / f"bk{i}"), str(logdir)],
                              env=dict(os.environ, PYTHONPATH=str(REPO)), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE) for i in range(4)]
    results = [(p.wait(timeout=120), p.stderr.read().decode()) for p in procs]
    for p in procs:
        p.stdout.close()
        p.stderr.close()
    assert all(code in (0, 1, 2) for code, _err in results), results
    assert any(code == 0 for code, _err in results), results
    for code, err in results:  # a loser says why: the lock (naming its holder) or a change since its plan
        assert code == 0 or ".lock" in err or "changed since it was planned" in err or "refused" in err, err
    assert sorted(p.name for p in logdir.iterdir()) == [".lock", "a-0", "b-0", "c-0"]  # no staging dir left
    for t in ("a-0", "b-0", "c-0"):
        assert sorted(p.name for p in (logdir / t).iterdir()) == [f"{SEG0}.index", f"{SEG0}.log", f"{SEG0}.timeindex"]
    assert cli("reindex", str(logdir)).returncode == 0
    assert cli("verify", str(logdir)).returncode == 0


def test_a_broker_appending_between_two_runs(run, tmp_path: Path) -> None:
    part = tmp_path / "logdir" / "x-0"
    part.mkdir(parents=True)
    log = part / f"{SEG0}.log"
    log.write_bytes(uniform_segment(100))
    assert run("reindex", "--execute", "--backup-dir", str(tmp_path / "bk"), str(part)).code == 0
    index = (part / f"{SEG0}.index").read_bytes()
    with open(log, "ab") as f:  # a little more: the index still covers the log (a live broker's would too)
        f.write(b"".join(encode_batch([RecordSpec(i, 1000 + i, b"k", b"v" * 134)], base_offset=i) for i in range(100, 120)))
    r = run("reindex", str(part))
    assert r.code == 0 and (part / f"{SEG0}.index").read_bytes() == index, r
    with open(log, "ab") as f:  # 1.1 MB more: the old index no longer covers it
        f.write(b"".join(encode_batch([RecordSpec(i, 1000 + i, b"k", b"v" * 134)], base_offset=i) for i in range(120, 5600)))
    r = run("reindex", str(part))
    assert r.code == 1 and "index_not_covering" in r.out, r
    assert run("reindex", "--execute", "--backup-dir", str(tmp_path / "bk2"), str(part)).code == 0
    assert run("reindex", str(part)).code == 0 and run("verify", str(part)).code == 0


def test_a_stray_server_log_in_a_log_dir_does_not_hide_its_partitions(run, tmp_path: Path) -> None:
    logdir = _three_partitions(tmp_path)
    (logdir / "server.log").write_text("[2025-01-01 00:00:00,000] INFO started\n")  # log.dirs beside logs/
    r = run("reindex", str(logdir))
    assert r.code == 1 and r.out.count("create    ") == 6 and "server.log" not in r.out, r
