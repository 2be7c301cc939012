"""``kafkatool truncate`` (kafkatool.truncate): recovery's cut, offline, with every removed byte kept.

Spec §3 (the walk), §9–§11 (the files that depend on the log end), §12.1–12.2 (recovery), §19.
Every test works on copies under tmp_path. Single-segment cases start from fixtures/logdir/v2-none-0
(4 batches of 10 records, see fixtures/README.md); multi-segment partitions are built here with
kafkatool's own v2 encoder (`encode_batch`, checked against §16.1 in test_record.py), and the results
are read back with kafka-python and aiokafka as independent implementations.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import FIXTURES
from test_reindex import HOLD_LOCK  # the same lock holder: a POSIX fcntl lock in another process
from kafkatool.repair import NO_EXCHANGE_ENV, TEMP_SUFFIX, plan_reindex
from kafkatool.record.v2 import RecordSpec, encode_batch
from kafkatool.segment.checkpoint import encode_leader_epoch_checkpoint, read_leader_epoch_checkpoint
from kafkatool.segment.snapshot import encode_producer_snapshot
from kafkatool.segment.txnindex import AbortedTxn, encode_txn_index, read_txn_index
from kafkatool.segment.walk import SegmentWalker
from kafkatool.truncate import TRUNCATE_JOURNAL, TruncateBackup, apply_truncate, plan_truncate

SEG0 = "00000000000000000000"
INTERVAL = "1024"


def indexes_agree(part) -> bool:
    """reindex finds nothing to change in the .index/.timeindex files (this module's synthetic
    .txnindex entries name no real ABORT marker, so reindex would rebuild those from the log)."""
    from kafkatool.repair import plan_reindex

    plans = [plan_reindex(str(log), int(INTERVAL)) for log in sorted(part.glob("*.log"))]
    return all(c.action == "unchanged" for p in plans for c in p.changes if c.kind in ("index", "timeindex"))


def name(base: int, suffix: str) -> str:
    return f"{base:020d}{suffix}"


def state(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.is_file()}


def batches_of(data: bytes) -> list[tuple[int, int, int, int]]:
    """(position, size, base offset, last offset) of every entry the §3 walk returns."""
    return [(b.position, b.size, b.offset, b.last_offset) for b, _ in SegmentWalker(data)]


def copy_fixture(tmp_path: Path, fixture: str = "v2-none-0") -> Path:
    dst = tmp_path / "logdir" / fixture
    shutil.copytree(FIXTURES / fixture, dst)
    for p in dst.iterdir():
        p.chmod(0o644)
    return dst


def encode_segment(base: int, nbatches: int, per_batch: int = 3, epoch: int = 0) -> bytes:
    out = bytearray()
    for i in range(nbatches):
        first = base + i * per_batch
        recs = [RecordSpec(o, 1_700_000_000_000 + o, b"k%d" % o, bytes((o * 7 + j) % 256 for j in range(150)))
                for o in range(first, first + per_batch)]
        out += encode_batch(recs, partition_leader_epoch=epoch)
    return bytes(out)


def write_indexes(log: Path) -> None:
    for c in plan_reindex(str(log), int(INTERVAL)).changes:
        Path(c.path).write_bytes(c.data)


def build_partition(root: Path) -> Path:
    """Three segments: offsets 0-17 (epochs 0 and 1), 18-35 (epoch 2), 36-47 (epoch 3), each with
    indexes; producer snapshots at 18, 36 and 48; aborted transactions ending at 20, 30 and 40."""
    part = root / "logdir" / "t-0"
    part.mkdir(parents=True)
    log0 = encode_segment(0, 3, epoch=0) + encode_segment(9, 3, epoch=1)
    for base, data in ((0, log0), (18, encode_segment(18, 6, epoch=2)), (36, encode_segment(36, 4, epoch=3))):
        (part / name(base, ".log")).write_bytes(data)
        write_indexes(part / name(base, ".log"))
    for off in (18, 36, 48):
        (part / name(off, ".snapshot")).write_bytes(encode_producer_snapshot([]))
    (part / "leader-epoch-checkpoint").write_text(encode_leader_epoch_checkpoint([(0, 0), (1, 9), (2, 18), (3, 36)]))
    (part / name(18, ".txnindex")).write_bytes(encode_txn_index([AbortedTxn(0, 7, 19, 20, 21), AbortedTxn(0, 8, 28, 30, 31)]))
    (part / name(36, ".txnindex")).write_bytes(encode_txn_index([AbortedTxn(0, 9, 38, 40, 41)]))
    (part / "partition.metadata").write_text("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ")
    return part


def restore(backup: Path) -> None:
    subprocess.run(["sh", str(backup / "RESTORE.txt")], check=True, capture_output=True)


def without_lock(files: dict[str, bytes]) -> dict[str, bytes]:
    return {k: v for k, v in files.items() if k != ".lock"}


# --------------------------------------------------------------------------- damaged single segments


def _flip_crc(data: bytearray, bs) -> int:
    data[bs[2][0] + 70] ^= 0xFF  # inside batch 2's records: its CRC fails
    return bs[2][0]


def _small_size(data: bytearray, bs) -> int:
    data[bs[1][0] + 8 : bs[1][0] + 12] = (5).to_bytes(4, "big")  # size < 14: CorruptRecordException
    return bs[1][0]


def _huge_size(data: bytearray, bs) -> int:
    data[bs[3][0] + 8 : bs[3][0] + 12] = (0x7FFFFF00).to_bytes(4, "big")  # runs past the end: walk stops
    return bs[3][0]


def _partial_tail(data: bytearray, bs) -> int:
    end = len(data)
    data += data[bs[0][0] : bs[0][0] + 40]  # a batch cut off mid-write
    return end


def _zero_tail(data: bytearray, bs) -> int:
    end = len(data)
    data += bytes(300)  # preallocated, never written
    return end


def _short_tail(data: bytearray, bs) -> int:
    end = len(data)
    data += b"\x01" * 10  # <= 17 bytes: never parsed
    return end


DAMAGE = {f.__name__.strip("_"): f for f in (_flip_crc, _small_size, _huge_size, _partial_tail, _zero_tail, _short_tail)}


@pytest.mark.parametrize("kind", sorted(DAMAGE))
def test_truncate_leaves_exactly_the_bytes_before_the_first_bad_batch(run, tmp_path: Path, kind: str) -> None:
    part = copy_fixture(tmp_path)
    log = part / f"{SEG0}.log"
    data = bytearray(log.read_bytes())
    cut = DAMAGE[kind](data, batches_of(bytes(data)))
    log.write_bytes(bytes(data))
    original = state(part)

    r = run("truncate", "--index-interval-bytes", INTERVAL, str(part))
    assert r.code == 1 and f"bytes [{cut}, {len(data)})" in r.out, r
    assert state(part) == original  # the dry run changed nothing
    r = run("truncate", "--format", "jsonl", "--index-interval-bytes", INTERVAL, str(part))
    obj, summary = (json.loads(x) for x in r.lines)
    assert obj["segments"][0]["removed"][0] | {"reason": ""} == {"start": cut, "end": len(data), "bytes": len(data) - cut, "reason": ""}
    assert summary["type"] == "truncate_summary" and summary["bytesRemoved"] == len(data) - cut

    bk = tmp_path / "bk"
    r = run("truncate", "--execute", "--index-interval-bytes", INTERVAL, "--backup-dir", str(bk), str(part))
    assert r.code == 0, r
    assert log.read_bytes() == bytes(data[:cut])
    assert (part / f"{SEG0}.index").read_bytes() == plan_reindex(str(log), int(INTERVAL)).changes[0].data
    manifest = json.loads((bk / "MANIFEST.json").read_text())
    (entry,) = [e for e in manifest["files"] if e["action"] == "cut"]
    (rng,) = entry["pieces"]
    assert (rng["start"], rng["end"]) == (cut, len(data))
    assert (bk / rng["file"]).read_bytes() == bytes(data[cut:])
    assert log.read_bytes() + (bk / rng["file"]).read_bytes() == bytes(data)

    # a second run is a no-op
    before = state(part)
    r = run("truncate", "--execute", "--index-interval-bytes", INTERVAL, "--backup-dir", str(tmp_path / "bk2"), str(part))
    assert r.code == 0 and r.out == "" and state(part) == before and not (tmp_path / "bk2").exists()
    assert run("reindex", "--index-interval-bytes", INTERVAL, str(part)).code == 0  # indexes agree with the new log

    restore(bk)
    assert without_lock(state(part)) == original
    restore(bk)  # twice is harmless
    assert without_lock(state(part)) == original


# --------------------------------------------------------------------------- the property


def _segment_and_damage(draw):
    n = draw(st.integers(2, 6))
    per = draw(st.lists(st.integers(1, 4), min_size=n, max_size=n))
    out, off = bytearray(), 0
    for k in per:
        out += encode_batch([RecordSpec(o, 1000 + o, b"k", b"v" * (o % 7)) for o in range(off, off + k)])
        off += k
    bs = batches_of(bytes(out))
    # bytes 0-7 (baseOffset), 12-15 (partitionLeaderEpoch) and 16 (magic: 2 -> 3 still parses as v2)
    # are outside the CRC-32C, which covers [21, end); every other byte is checked by the walk or the CRC
    positions = [p + i for p, s, _o, _l in bs for i in range(s) if not (i < 8 or 12 <= i <= 16)]
    pos = draw(st.sampled_from(positions))
    mask = draw(st.integers(1, 255))
    return bytes(out), bs, pos, mask


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.booleans())
def test_property_corrupt_one_byte_exactly_earlier_batches_survive(data, keep) -> None:
    original, bs, pos, mask = _segment_and_damage(data.draw)
    damaged = bytearray(original)
    damaged[pos] ^= mask
    k = next(i for i, (p, s, _o, _l) in enumerate(bs) if p <= pos < p + s)
    with tempfile.TemporaryDirectory() as tmp:
        part = Path(tmp) / "logdir" / "p-0"
        part.mkdir(parents=True)
        log = part / f"{SEG0}.log"
        log.write_bytes(bytes(damaged))
        plan = plan_truncate(str(part), keep_valid_after=keep)
        apply_truncate(plan, TruncateBackup(str(Path(tmp) / "bk")))
        result = log.read_bytes()
        if keep:  # every intact batch survives, at its own offsets
            p, s, _o, _l = bs[k]
            assert result == original[:p] + original[p + s :]
            assert [b[2:] for b in batches_of(result)] == [b[2:] for i, b in enumerate(bs) if i != k]
        else:  # exactly the batches before the damaged one
            assert result == original[: bs[k][0]]
        assert not plan_truncate(str(part), keep_valid_after=keep).needs_changes
        restore(Path(tmp) / "bk")
        assert log.read_bytes() == bytes(damaged)


# --------------------------------------------------------------------------- what depends on the log end


def test_dependent_files_trimmed_and_later_segments_moved(run, tmp_path: Path) -> None:
    part = build_partition(tmp_path)
    seg1 = part / name(18, ".log")
    data = bytearray(seg1.read_bytes())
    bs = batches_of(bytes(data))
    data[bs[3][0] + 80] ^= 0x55  # offsets 27-29: the new log end is 27
    seg1.write_bytes(bytes(data))
    original = state(part)

    r = run("truncate", "--index-interval-bytes", INTERVAL, str(part))
    assert r.code == 1
    assert "log end offset becomes 27" in r.out and "later segment" in r.out and "discard   2 intact batches (offsets 30-35)" in r.out
    bk = tmp_path / "bk"
    assert run("truncate", "--execute", "--index-interval-bytes", INTERVAL, "--backup-dir", str(bk), str(part)).code == 0
    now = state(part)
    assert now[name(18, ".log")] == bytes(data[: bs[3][0]])
    assert not any(n.startswith(name(36, "")) for n in now)  # the later segment and its files: moved
    assert name(18, ".snapshot") in now and name(48, ".snapshot") not in now
    assert [tuple(e) for e in read_leader_epoch_checkpoint(part / "leader-epoch-checkpoint")] == [(0, 0), (1, 9), (2, 18)]
    assert [t.last_offset for t in read_txn_index(part / name(18, ".txnindex")).entries] == [20]
    assert now[name(0, ".log")] == original[name(0, ".log")]
    for suffix in (".log", ".index", ".timeindex", ".txnindex", ".snapshot"):
        assert (bk / "t-0" / name(36, suffix)).read_bytes() == original[name(36, suffix)]
    assert (bk / "t-0" / name(48, ".snapshot")).read_bytes() == original[name(48, ".snapshot")]
    assert indexes_agree(part)
    assert run("truncate", "--index-interval-bytes", INTERVAL, str(part)).code == 0
    restore(bk)
    assert without_lock(state(part)) == original


def test_keep_valid_after_keeps_every_intact_batch(run, tmp_path: Path) -> None:
    part = build_partition(tmp_path)
    seg1 = part / name(18, ".log")
    data = bytearray(seg1.read_bytes())
    bs = batches_of(bytes(data))
    data[bs[1][0] + 30] ^= 0x01  # offsets 21-23
    data[bs[4][0] + 9 : bs[4][0] + 12] = b"\xff\xff\xf0"  # offsets 30-32: a size field past the end
    seg1.write_bytes(bytes(data))
    original = state(part)
    r = run("truncate", "--keep-valid-after", "--index-interval-bytes", INTERVAL, str(part))
    assert r.code == 1 and "offsets 21-23 are missing" in r.out and "offsets 30-32 are missing" in r.out
    assert "later segment" not in r.out
    bk = tmp_path / "bk"
    r = run("truncate", "--keep-valid-after", "--execute", "--index-interval-bytes", INTERVAL, "--backup-dir", str(bk), str(part))
    assert r.code == 0, r
    kept = [b for i, b in enumerate(bs) if i not in (1, 4)]
    assert seg1.read_bytes() == b"".join(bytes(data[p : p + s]) for p, s, _o, _l in kept)
    assert [b[2:] for b in batches_of(seg1.read_bytes())] == [b[2:] for b in kept]
    now = state(part)
    for n in original:  # later segment, snapshots, leader epochs and txn indexes: untouched
        if not n.startswith(name(18, "")) or n.endswith(".txnindex"):
            assert now[n] == original[n], n
    manifest = json.loads((bk / "MANIFEST.json").read_text())
    assert [(p["start"], p["end"]) for e in manifest["files"] if e["action"] == "cut" for p in e["pieces"]] == [
        (bs[1][0], bs[2][0]), (bs[4][0], bs[5][0])]
    assert run("truncate", "--keep-valid-after", "--index-interval-bytes", INTERVAL, str(part)).code == 0
    assert indexes_agree(part)
    read_with_kafka_python(seg1.read_bytes(), [o for _p, _s, b, last in kept for o in range(b, last + 1)])
    read_with_aiokafka(seg1.read_bytes(), [o for _p, _s, b, last in kept for o in range(b, last + 1)])
    restore(bk)
    assert without_lock(state(part)) == original


# --------------------------------------------------------------------------- independent readers


def read_with_kafka_python(data: bytes, offsets: list[int]) -> None:
    from kafka.record.memory_records import MemoryRecords

    mr, seen = MemoryRecords(data), []
    while (batch := mr.next_batch()) is not None:
        assert batch.validate_crc()
        seen += [r.offset for r in batch]
    assert seen == offsets


def read_with_aiokafka(data: bytes, offsets: list[int]) -> None:
    from aiokafka.record.memory_records import MemoryRecords

    mr, seen = MemoryRecords(data), []
    while (batch := mr.next_batch()) is not None:
        assert batch.validate_crc()
        seen += [r.offset for r in batch]
    assert seen == offsets


def test_cut_segment_readable_by_kafka_python_and_aiokafka(run, tmp_path: Path) -> None:
    part = copy_fixture(tmp_path)
    log = part / f"{SEG0}.log"
    data = bytearray(log.read_bytes())
    cut = _flip_crc(data, batches_of(bytes(data)))
    log.write_bytes(bytes(data) + bytes(50))
    assert run("truncate", "--execute", "--quiet", "--backup-dir", str(tmp_path / "bk"), str(part)).code == 0
    assert log.stat().st_size == cut
    read_with_kafka_python(log.read_bytes(), list(range(20)))
    read_with_aiokafka(log.read_bytes(), list(range(20)))


# --------------------------------------------------------------------------- refusals


def test_live_broker_lock_refuses_and_changes_nothing(run, tmp_path: Path) -> None:
    part = build_partition(tmp_path)
    seg1 = part / name(18, ".log")
    seg1.write_bytes(seg1.read_bytes()[:-5])
    logdir = part.parent
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(logdir / ".lock")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        before = state(part), state(logdir)
        r = run("truncate", "--execute", str(part))
        assert r.code == 2 and ".lock" in r.err and "broker" in r.err
        assert (state(part), state(logdir)) == before
        assert list(tmp_path.glob("kafkatool-backup-*")) == []
    finally:
        holder.stdin.close()
        holder.wait(timeout=10)
    r = run("truncate", "--execute", str(part))  # the default backup dir: beside the log dir
    assert r.code == 0 and len(list(tmp_path.glob("kafkatool-backup-logdir-*"))) == 1


def test_transitional_dir_refused(run, tmp_path: Path) -> None:
    part = tmp_path / "logdir" / "v2-none-0.0123456789abcdef0123456789abcdef-delete"
    shutil.copytree(FIXTURES / "v2-none-0", part)
    log = part / f"{SEG0}.log"
    log.chmod(0o644)
    log.write_bytes(log.read_bytes() + bytes(30))
    before = state(part)
    r = run("truncate", "--execute", str(part))
    assert r.code == 2 and "-delete" in r.err and state(part) == before
    assert run("truncate", "--allow-transitional", str(part)).code == 1


# --------------------------------------------------------------------------- crash safety


def test_sigkill_at_every_step_leaves_old_new_or_a_journal_the_next_run_completes(tmp_path: Path) -> None:
    # On the whole-dir exchange there is no journal to complete: after a kill at any step the
    # partition dir is exactly the old state or exactly the new one. Segment 18 is cut at
    # offset 27, so every kind of change happens at once: segment 0 stays (a hard link),
    # segment 18's .log is cut and its indexes and .txnindex rewritten, segment 36 and the
    # snapshots above 27 move to the backup, the leader-epoch-checkpoint is trimmed.
    from crash_helpers import sigkill_every_step_strictly

    src = build_partition(tmp_path / "src")
    seg1 = src / name(18, ".log")
    data = bytearray(seg1.read_bytes())
    data[batches_of(bytes(data))[3][0] + 80] ^= 0x55
    seg1.write_bytes(bytes(data))

    def fresh(label: str) -> Path:
        dst = tmp_path / label / "logdir" / "t-0"
        shutil.copytree(src, dst)
        return dst

    n, seen = sigkill_every_step_strictly(tmp_path, fresh, ["truncate", "--index-interval-bytes", INTERVAL], restore)
    assert n > 20
    assert seen["old", True] >= 15 and seen["new", True] >= 2 and seen["new", False] >= 1, seen


def test_journal_fallback_sigkill_at_every_step_leaves_old_new_or_a_journal_the_next_run_completes(
    run, tmp_path: Path, monkeypatch
) -> None:
    # $KAFKATOOL_NO_EXCHANGE forces the journaled fallback: a kill after the commit point can
    # leave a mix of old and new files, which the journal records and the next run completes.
    monkeypatch.setenv(NO_EXCHANGE_ENV, "1")
    src = build_partition(tmp_path / "src")
    seg0 = src / name(0, ".log")
    data = bytearray(seg0.read_bytes())
    data[batches_of(bytes(data))[4][0] + 100] ^= 0x10  # segment 0, offsets 12-14: two later segments go
    seg0.write_bytes(bytes(data))
    old = state(src)
    # the CLI in a forked child (crash_helpers.kafkatool): milliseconds instead of a fresh interpreter per step
    from crash_helpers import kafkatool

    cmd = ["truncate", "--execute", "--quiet", "--index-interval-bytes", INTERVAL]

    def fresh(label: str) -> Path:
        dst = tmp_path / label / "logdir" / "t-0"
        shutil.copytree(src, dst)
        return dst

    ref = fresh("ref")
    assert run("truncate", "--execute", "--quiet", "--index-interval-bytes", INTERVAL, "--backup-dir", str(tmp_path / "ref-bk"), str(ref)).code == 0
    new = without_lock(state(ref))
    n = journaled = 0
    while True:
        n += 1
        part = fresh(f"run{n}")
        bk, bk2 = tmp_path / f"bk{n}", tmp_path / f"bk{n}-again"
        p = kafkatool(*cmd, "--backup-dir", str(bk), str(part), fault_at=n, no_exchange=True)
        if p.returncode == 0:
            break
        assert p.returncode == -signal.SIGKILL, p
        assert [d for d in part.parent.iterdir() if d.is_dir()] == [part]  # no staging dir on this path
        now = {k: v for k, v in without_lock(state(part)).items() if not k.endswith(TEMP_SUFFIX)}
        journal = TRUNCATE_JOURNAL in now
        now.pop(TRUNCATE_JOURNAL, None)
        if journal:
            journaled += 1
            for k, v in now.items():  # each file is complete-old or complete-new, never partial
                assert v in (old.get(k), new.get(k)), (n, k)
        else:
            assert now in (old, new), f"step {n}: a mix of old and new without a committed journal"
        # the next run completes the truncate (roll forward) or does it afresh
        r = run("truncate", "--execute", "--quiet", "--index-interval-bytes", INTERVAL, "--backup-dir", str(bk2), str(part))
        assert r.code == 0, (n, r)
        assert without_lock(state(part)) == new, n
        assert run("truncate", "--index-interval-bytes", INTERVAL, str(part)).code == 0
        # and the backup that run used restores the original byte for byte
        restore(bk if journal or now == new else bk2)
        assert without_lock(state(part)) == old, n
    assert n > 20 and journaled >= 5
    assert without_lock(state(part)) == new
