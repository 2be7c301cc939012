"""``kafkatool truncate`` hardening (issue 9): recovery's exact cut, resync that fits, stale journals,
zero tails, unreadable and non-Kafka targets, non-UTF-8 names, Ctrl-C, full disks, owners, output.

The segments here are built by hand (spec §4.1 header, §4.2 records, §6 control records) with
the CRC-32C of kafka-python, independently of kafkatool's encoder; every expected cut position is
derived from the lengths of those hand-built batches and Kafka's rules as the spec states them
(§8.3 append rules, §12.1, §12.2, §12.5), never from kafkatool's own output.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import stat
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO
from crash_helpers import kafkatool
from test_safety import LockHolder  # another process holding <log dir>/.lock, as a broker does
from kafka.record._crc32c import crc as crc32c

SEG0 = "00000000000000000000"
INT32_MAX = 2147483647
JOURNAL = "kafkatool-truncate.kafkatool-journal"
TMP = ".kafkatool-tmp"


# --------------------------------------------------------------------------- hand-built batches


def zigzag(n: int) -> bytes:
    """A zig-zag varint (§4.2)."""
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        b = z & 0x7F
        z >>= 7
        if not z:
            out.append(b)
            return bytes(out)
        out.append(b | 0x80)


def record(offset_delta: int, key: bytes | None, value: bytes | None) -> bytes:
    """One v2 record (§4.2): length, attributes, timestampDelta, offsetDelta, key, value, no headers."""
    body = b"\x00" + zigzag(0) + zigzag(offset_delta)
    body += zigzag(-1) if key is None else zigzag(len(key)) + key
    body += zigzag(-1) if value is None else zigzag(len(value)) + value
    body += zigzag(0)
    return zigzag(len(body)) + body


def batch(base_offset: int, records: list[bytes], *, last_offset_delta: int | None = None, attributes: int = 0,
          producer_id: int = -1, producer_epoch: int = -1, ts: int = 1_700_000_000_000, max_ts: int | None = None) -> bytes:
    """A v2 batch (§4.1): 61-byte header, CRC-32C over [21, end)."""
    lod = len(records) - 1 if last_offset_delta is None else last_offset_delta
    after_crc = struct.pack(">hiqqqhii", attributes, lod, ts, ts if max_ts is None else max_ts,
                            producer_id, producer_epoch, -1, len(records)) + b"".join(records)
    return struct.pack(">qiibI", base_offset, 9 + len(after_crc), 0, 2, crc32c(after_crc)) + after_crc


def data(first: int, n: int = 3, size: int = 40, ts: int = 1_700_000_000_000) -> bytes:
    """``n`` records at offsets first.., values of ``size`` bytes."""
    return batch(first, [record(i, b"k%d" % (first + i), bytes([(first + i) % 251]) * size) for i in range(n)],
                 ts=ts, max_ts=ts)


def marker(offset: int, key: bytes | None, value: bytes | None = b"\x00\x00\x00\x00\x00\x05", *,
           producer_id: int = 7, attributes: int = 0x30) -> bytes:
    """A control batch of one record; with key 00 00 00 0t and a 6-byte value, a transaction marker (§6)."""
    return batch(offset, [record(0, key, value)], attributes=attributes, producer_id=producer_id, producer_epoch=0)


def partition(root: Path, *segments: tuple[int, bytes], name: str = "t-0") -> Path:
    part = root / "logdir" / name
    part.mkdir(parents=True)
    for base, content in segments:
        (part / f"{base:020d}.log").write_bytes(content)
    return part


def files(part: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(part.iterdir()) if p.is_file()}


def jsonl(r) -> tuple[list[dict], dict]:
    objs = [json.loads(line) for line in r.out.splitlines()]
    return [o for o in objs if o["type"] == "truncate_partition"], objs[-1]


def cli(*args: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The CLI in a fresh interpreter (the code under test: this file's repository)."""
    e = dict(os.environ, PYTHONPATH=str(REPO), **(env or {}))
    return subprocess.run([sys.executable, "-m", "kafkatool", *args], env=e, capture_output=True, cwd=cwd, timeout=120)


# --------------------------------------------------------------------------- recovery's cut (§12.2 step 2.6)

B0 = data(0)  # offsets 0-2


@pytest.mark.parametrize("key,value,attributes,producer_id,cut", [
    # ControlRecordType.parseTypeId: a key of fewer than 4 bytes throws InvalidRecordException after
    # validBytes counted the batch: recovery keeps the marker and cuts right after it
    (b"\x00", None, 0x30, 7, "after"),
    (b"\x00\x00\x01", None, 0x30, 7, "after"),
    (b"\x00\x00\x00\x01", None, 0x30, 7, None),  # 4 bytes: a COMMIT, nothing to cut
    (b"\xff\xff\x00\x01", None, 0x30, 7, "after"),  # a negative key version
    (b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x05", 0x30, 7, "after"),  # a 5-byte marker value
    (b"\x00\x00\x00\x00", b"\xff\xff\x00\x00\x00\x05", 0x30, 7, "after"),  # a negative marker version
    (b"\x00", None, 0x30, -1, None),  # hasProducerId is producerId > -1: the marker is never read
    (b"\x00", None, 0x30, 0, "after"),  # ... and producer id 0 has one
    (b"\x00", None, 0x20, 7, "after"),  # isControlBatch alone decides, not the transactional bit
    (b"\x00", None, 0x10, 7, None),  # a transactional data batch: no marker
])
@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "python"])
def test_malformed_transaction_marker_is_kept_and_the_cut_comes_right_after_it(
        run, tmp_path: Path, key, value, attributes, producer_id, cut, pure) -> None:
    ctrl = marker(3, key, b"\x00\x00\x00\x00\x00\x05" if value is None else value,
                  producer_id=producer_id, attributes=attributes)
    after = data(4)
    part = partition(tmp_path, (0, B0 + ctrl + after))
    expected_cut = len(B0) + len(ctrl)  # the end of the control batch, by construction
    if pure:  # the pure-Python walk (the compiled loop hands control batches to it in the other run)
        r = cli("truncate", "--format", "jsonl", str(part), env={"KAFKATOOL_PURE_PYTHON": "1"})
        code, out = r.returncode, r.stdout.decode()
    else:
        res = run("truncate", "--format", "jsonl", str(part))
        code, out = res.code, res.out
    objs = [json.loads(line) for line in out.splitlines()]
    (plan,) = [o for o in objs if o["type"] == "truncate_partition"]
    if cut is None:
        assert code == 0 and plan["segments"] == [], plan
        return
    assert code == 1, out
    (seg,) = plan["segments"]
    assert seg["removed"][0]["start"] == expected_cut and seg["removed"][0]["end"] == len(B0 + ctrl + after)
    assert (seg["batchesKept"], seg["firstOffset"], seg["lastOffset"], seg["nextOffset"]) == (2, 0, 3, 4)
    assert (seg["batchesDiscarded"], seg["discardedOffsets"]) == (1, [4, 6])
    assert plan["newLogEnd"] == 4


def test_marker_cut_applied_and_stable(run, tmp_path: Path) -> None:
    ctrl = marker(3, b"\x00")
    part = partition(tmp_path, (0, B0 + ctrl + data(4)), (7, data(7)))
    r = run("truncate", "--execute", "--backup-dir", str(tmp_path / "bk"), str(part))
    assert r.code == 0, r
    assert (part / f"{SEG0}.log").read_bytes() == B0 + ctrl  # the marker stays, as recovery keeps it
    assert not (part / "00000000000000000007.log").exists()  # a later segment: moved (§12.1)
    # the malformed marker is now the last batch: recovery would cut nothing more, and neither does a second run
    assert run("truncate", str(part)).code == 0


def test_malformed_marker_at_the_end_of_the_segment_cuts_nothing(run, tmp_path: Path) -> None:
    part = partition(tmp_path, (0, B0 + marker(3, b"\x00")))
    r = run("truncate", str(part))
    assert r.code == 0 and r.out == "", r


@pytest.mark.parametrize("key,value,what", [
    (b"\x00\x00\x00\x02", b"\x00\x00\x00\x00\x00\x05", "LEADER_CHANGE"),  # not COMMIT/ABORT: IllegalArgumentException
    (None, b"\x00\x00\x00\x00\x00\x05", "without a key"),  # NullPointerException
    (b"\x00\x00\x00\x01", None, "without a value"),
])
def test_control_record_the_broker_cannot_load_is_refused(run, tmp_path: Path, key, value, what) -> None:
    ctrl = batch(3, [record(0, key, value)], attributes=0x30, producer_id=7, producer_epoch=0)
    part = partition(tmp_path, (0, B0 + ctrl + data(4)))
    before = files(part)
    r = run("truncate", "--execute", "--backup-dir", str(tmp_path / "bk"), str(part))
    assert r.code == 2, r
    assert what in r.err and f"{part / (SEG0 + '.log')}:{len(B0)}" in r.err and "refused" in r.err
    assert "does not load" in r.err and "--keep-valid-after" in r.err
    assert files(part) == before and not (tmp_path / "bk").exists()
    # --keep-valid-after removes just that batch
    r = run("truncate", "--keep-valid-after", "--format", "jsonl", str(part))
    (plan,), _ = jsonl(r)
    assert plan["segments"][0]["removed"] == [
        {"start": len(B0), "end": len(B0) + len(ctrl), "bytes": len(ctrl), "reason": plan["segments"][0]["removed"][0]["reason"]}]


# --------------------------------------------------------------------------- offsets a segment cannot hold (§12.5)


@pytest.mark.parametrize("rel,refused", [(INT32_MAX, False), (INT32_MAX + 1, True)])
def test_last_batch_beyond_the_int32_range_is_refused_not_cut(run, tmp_path: Path, rel: int, refused: bool) -> None:
    # the last batch's last offset is base + rel: at 2^31-1 it fits; one more and recovery
    # throws LogSegmentOffsetOverflowException, and the loader splits the segment, keeping it
    last = batch(rel - 2, [record(i, b"k", b"v") for i in range(3)])
    part = partition(tmp_path, (0, B0 + last))
    before = files(part)
    r = run("truncate", "--execute", "--backup-dir", str(tmp_path / "bk"), str(part))
    if not refused:
        assert r.code == 0 and r.out == "" and files(part) == before, r
        return
    assert r.code == 2, r
    assert f"offset {INT32_MAX + 1} does not fit a segment with base offset 0" in r.err and "splits" in r.err
    assert files(part) == before and not (tmp_path / "bk").exists()


def test_batch_below_the_base_offset_is_refused(run, tmp_path: Path) -> None:
    part = partition(tmp_path, (100, data(100) + data(90) + data(103)))
    before = files(part)
    r = run("truncate", "--format", "jsonl", str(part))
    assert r.code == 2
    (plan,), summary = jsonl(r)
    assert plan["refusals"][0]["position"] == len(data(100)) and "offset 92 does not fit" in plan["refusals"][0]["reason"]
    assert summary["refused"] == 1 and files(part) == before


# --------------------------------------------------------------------------- offsets going backwards (§8.3, §12.1)


def test_offset_index_going_backwards_empties_the_segment(run, tmp_path: Path) -> None:
    # interval 100: batch 1 (at byte 208 > 100) gets the entry (5, 208); batch 2 (208 bytes later)
    # would get one with its last offset 5, not larger than 5: OffsetIndex.append throws
    # InvalidOffsetException, and LogLoader truncates the segment to its base offset. The index
    # holds (5, 208) only: OffsetIndex.lookup(0) finds no entry <= 0 and answers position 0.
    b1, b2 = data(3), batch(4, [record(i, b"k", b"v" * 40) for i in range(2)])
    seg = B0 + b1 + b2 + data(6)
    assert len(B0) > 100 and len(b1) > 100
    part = partition(tmp_path, (0, seg), (9, data(9)))
    r = run("truncate", "--index-interval-bytes", "100", "--format", "jsonl", str(part))
    assert r.code == 1
    (plan,), _ = jsonl(r)
    (cut,) = plan["segments"]
    assert cut["removed"][0]["start"] == 0 and cut["removed"][0]["end"] == len(seg)
    assert f":{len(B0) + len(b1)}:" in cut["removed"][0]["reason"] and "InvalidOffsetException" in cut["removed"][0]["reason"]
    assert (cut["batchesKept"], cut["nextOffset"], plan["newLogEnd"]) == (0, 0, 0)
    assert [m["path"] for m in plan["moves"]] == [str(part / "00000000000000000009.log")]
    r = run("truncate", "--execute", "--index-interval-bytes", "100", "--backup-dir", str(tmp_path / "bk"), str(part))
    assert r.code == 0, r
    assert (part / f"{SEG0}.log").read_bytes() == b""
    # keep-valid-after removes just the batch whose offsets go backwards
    part2 = partition(tmp_path / "k", (0, seg))
    r = run("truncate", "--keep-valid-after", "--index-interval-bytes", "100", "--format", "jsonl", str(part2))
    (plan,), _ = jsonl(r)
    start = len(B0) + len(b1)
    assert [(x["start"], x["end"]) for x in plan["segments"][0]["removed"]] == [(start, start + len(b2))]


def test_offsets_going_backwards_between_index_entries_are_not_checked(run, tmp_path: Path) -> None:
    # the same batches with the default interval (4096): no entry is appended, recovery checks nothing
    seg = B0 + data(3) + batch(4, [record(i, b"k", b"v" * 40) for i in range(2)]) + data(6)
    part = partition(tmp_path, (0, seg))
    assert run("truncate", str(part)).code == 0


def test_first_index_entry_at_the_base_offset_keeps_the_bytes_before_it(run, tmp_path: Path) -> None:
    # three batches all at offset 0: the entry (0, len(d0)) is appended at batch 1; batch 2 throws.
    # OffsetIndex.lookup(0) finds that entry, so truncateTo(0) cuts at its position: batch 0 stays.
    d0, d1, d2 = (batch(0, [record(0, b"k", bytes([c]) * 150)]) for c in b"abc")
    part = partition(tmp_path, (0, d0 + d1 + d2))
    r = run("truncate", "--index-interval-bytes", "100", "--format", "jsonl", str(part))
    (plan,), _ = jsonl(r)
    (cut,) = plan["segments"]
    assert cut["kept"] == [[0, len(d0)]] and cut["nextOffset"] == 1


def test_time_index_offset_going_backwards_empties_the_segment(run, tmp_path: Path) -> None:
    # interval I = len(b1): b1 is indexed (at byte len(b0) > I; offset 10, ts 300); b2 is not (at
    # len(b1) = I bytes after that entry, not more) and brings the max timestamp 500 at offset 5;
    # b3 is indexed (len(b1) + len(b2) > I): its offset entry 11 is fine, but its time entry
    # (500, 5) has an offset below the last one (10): TimeIndex.maybeAppend throws
    # InvalidOffsetException. The offset index holds (10, ..), (11, ..): lookup(0) gives byte 0.
    b0 = batch(0, [record(0, b"k", b"a" * 150)], ts=100)
    b1 = batch(10, [record(0, b"k", b"b" * 100)], ts=300)
    b2 = batch(5, [record(0, b"k", b"c")], ts=500)
    b3 = batch(11, [record(0, b"k", b"d" * 100)], ts=400)
    interval = len(b1)
    assert len(b0) > interval >= len(b1) and len(b1) + len(b2) > interval
    part = partition(tmp_path, (0, b0 + b1 + b2 + b3))
    r = run("truncate", "--index-interval-bytes", str(interval), "--format", "jsonl", str(part))
    (plan,), _ = jsonl(r)
    (cut,) = plan["segments"]
    assert cut["kept"] == [] and cut["removed"][0]["start"] == 0, cut
    assert "InvalidOffsetException" in cut["removed"][0]["reason"]


@pytest.mark.parametrize("tail", ["", "bad batch after"])
def test_final_time_entry_refused_empties_the_segment(run, tmp_path: Path, tail: str) -> None:
    # interval I = len(b1): b1 is indexed (at byte len(b0) > I): time entry (300, offset 10); b2 is
    # not (I bytes after it, not more) and brings the max timestamp 500 at offset 5. recover()'s
    # last step, timeIndex.maybeAppend(500, 5, skipFullCheck), throws InvalidOffsetException
    # (5 < 10), outside its try: LogLoader truncates the segment to its base offset; lookup(0) over
    # the offset index [(10, len(b0))] finds no entry <= 0: byte 0, the segment is emptied. A bad
    # batch after b2 changes nothing: recover() had cut there before its last step threw.
    b0 = batch(0, [record(0, b"k", b"a" * 150)], ts=100)
    b1 = batch(10, [record(0, b"k", b"b" * 100)], ts=300)
    b2 = batch(5, [record(0, b"k", b"c")], ts=500)
    interval = len(b1)
    assert len(b0) > interval
    bad = bytearray(data(11))
    bad[90] ^= 1
    seg = b0 + b1 + b2 + (bytes(bad) if tail else b"")
    part = partition(tmp_path, (0, seg))
    r = run("truncate", "--index-interval-bytes", str(interval), "--format", "jsonl", str(part))
    assert r.code == 1, r
    (plan,), _ = jsonl(r)
    (cut,) = plan["segments"]
    assert cut["kept"] == [] and [(x["start"], x["end"]) for x in cut["removed"]] == [(0, len(seg))]
    assert "final time index entry" in cut["removed"][0]["reason"] and plan["newLogEnd"] == 0
    r = run("truncate", "--execute", "--index-interval-bytes", str(interval), "--backup-dir", str(tmp_path / "bk"),
            str(part))
    assert r.code == 0 and (part / f"{SEG0}.log").read_bytes() == b"", r
    # --keep-valid-after cannot keep these batches either: refused, nothing changed
    part2 = partition(tmp_path / "k", (0, seg))
    r = run("truncate", "--keep-valid-after", "--execute", "--index-interval-bytes", str(interval), str(part2))
    assert r.code == 2 and "final time index entry" in r.err and files(part2) == {f"{SEG0}.log": seg}, r


# --------------------------------------------------------------------------- --keep-valid-after: candidates that fit


def _damaged(first: int, inner: bytes, *, frame: str) -> bytes:
    """A batch at ``first`` whose second record's value is ``inner``; CRC broken; ``frame``:
    ``intact`` (size field right) or ``broken`` (size field past the end of the file)."""
    b = bytearray(batch(first, [record(0, b"k", b"x" * 20), record(1, b"e", inner), record(2, b"k", b"y" * 20)]))
    b[75] ^= 0x01  # inside the first record: the CRC fails
    if frame == "broken":
        b[8:12] = struct.pack(">i", 0x7FFFF000)
    return bytes(b)


def _keep(run, part: Path) -> dict:
    r = run("truncate", "--keep-valid-after", "--format", "jsonl", str(part))
    assert r.code == 1, r
    (plan,), _ = jsonl(r)
    return plan["segments"][0]


@pytest.mark.parametrize("frame", ["intact", "broken"])
def test_batches_embedded_in_a_record_value_are_not_kept(run, tmp_path: Path, frame: str) -> None:
    # two CRC-valid batches inside one record of a damaged batch. With its size field intact,
    # the damaged batch's extent ends where the next batch begins: anything inside is record
    # content. With it broken, the embedded copies (offsets 0-1) do not come after offset 2.
    inner = data(3, 1) + data(4, 1) if frame == "intact" else data(0, 1) + data(1, 1)
    d = _damaged(3, inner, frame=frame)
    n1, n2 = data(6), data(9)
    part = partition(tmp_path, (0, B0 + d + n1 + n2))
    seg = _keep(run, part)
    p = len(B0)
    assert seg["kept"] == [[0, p], [p + len(d), p + len(d) + len(n1) + len(n2)]]
    assert [(x["start"], x["end"]) for x in seg["removed"]] == [(p, p + len(d))]
    (rej,) = seg["rejected"]
    at = d.index(inner)  # where the embedded batches begin inside the damaged one
    assert (rej["start"], rej["end"], rej["batches"]) == (p + at, p + at + len(inner), 2)
    assert (rej["firstOffset"], rej["lastOffset"]) == ((3, 4) if frame == "intact" else (0, 1))
    assert seg["offsetGaps"] == [{"after": 2, "before": 6}]
    # applied, the segment holds exactly the real batches, and a second run finds nothing
    r = run("truncate", "--keep-valid-after", "--execute", "--backup-dir", str(tmp_path / "bk"), str(part))
    assert r.code == 0, r
    assert (part / f"{SEG0}.log").read_bytes() == B0 + n1 + n2
    assert run("truncate", "--keep-valid-after", str(part)).code == 0


def test_candidate_that_does_not_fit_before_the_next_intact_batch_is_not_kept(run, tmp_path: Path) -> None:
    # offsets 50-51 come after 2, but not before 6, the first offset of the intact batches after them
    inner = data(50, 1) + data(51, 1)
    d = _damaged(3, inner, frame="broken")
    n1, n2 = data(6), data(9)
    part = partition(tmp_path, (0, B0 + d + n1 + n2))
    seg = _keep(run, part)
    p = len(B0)
    assert seg["kept"] == [[0, p], [p + len(d), p + len(d) + len(n1) + len(n2)]]
    (rej,) = seg["rejected"]
    assert (rej["firstOffset"], rej["lastOffset"]) == (50, 51) and "do not fit" in rej["reason"]


def test_a_size_field_damaged_onto_a_later_batch_boundary_swallows_no_intact_batch(run, tmp_path: Path) -> None:
    # batch 1's size field grows by exactly batch 2's length: its declared extent ends where batch 3
    # begins, a valid batch. The resync candidate inside (batch 2) leads exactly there: it is kept.
    b1, b2, b3 = data(3), data(6), data(9)
    bad = bytearray(b1)
    bad[8:12] = struct.pack(">i", len(b1) + len(b2) - 12)
    part = partition(tmp_path, (0, B0 + bytes(bad) + b2 + b3))
    seg = _keep(run, part)
    p = len(B0)
    assert seg["kept"] == [[0, p], [p + len(b1), p + len(b1) + len(b2) + len(b3)]] and seg["rejected"] == []


# --------------------------------------------------------------------------- zero-filled preallocated tails


def test_a_1_gib_sparse_zero_tail_is_planned_in_well_under_2_s(tmp_path: Path) -> None:
    from kafkatool.truncate import plan_truncate

    part = partition(tmp_path, (0, B0))
    log = part / f"{SEG0}.log"
    with open(log, "r+b") as f:
        f.truncate(len(B0) + (1 << 30))  # a hole: log.preallocate=true after an unclean shutdown
    for keep in (False, True):
        t = time.perf_counter()
        plan = plan_truncate(str(part), keep_valid_after=keep)
        took = time.perf_counter() - t
        (cut,) = plan.cuts
        assert cut.kept == ((0, len(B0)),) and [(r.start, r.end) for r in cut.removed] == [(len(B0), len(B0) + (1 << 30))]
        assert cut.batches_dropped == 0 and cut.rejected == ()
        assert took < 2.0, f"{took:.2f} s (keep_valid_after={keep})"


def test_zero_run_skip_finds_an_entry_whose_first_11_bytes_are_zero(run, tmp_path: Path) -> None:
    # written zeros (not a hole), then a batch at base offset 0 with a size < 256: its first
    # non-zero byte is its 12th (offset: 8 zero bytes, size: 3 zero bytes first)
    b = data(0)
    assert b[:11] == bytes(11) and b[11] != 0
    zeros = bytes(3 << 20)
    part = partition(tmp_path, (0, zeros + b))
    r = run("truncate", "--format", "jsonl", str(part))
    (plan,), _ = jsonl(r)
    (seg,) = plan["segments"]
    assert seg["kept"] == [] and (seg["batchesDiscarded"], seg["discardedOffsets"]) == (1, [0, 2])
    seg = _keep(run, part)
    assert seg["kept"] == [[len(zeros), len(zeros) + len(b)]]


# --------------------------------------------------------------------------- stale journals (the broker appended)


def _journal_partition(root: Path) -> Path:
    """Segment 0 damaged at offsets 3-5 (the cut), segment 9 the active one (moved to the backup)."""
    bad = bytearray(data(3))
    bad[100] ^= 0x01
    return partition(root, (0, B0 + bytes(bad) + data(6)), (9, data(9) + data(12)))


def _all_bytes(*dirs: Path) -> bytes:
    out = b""
    for d in dirs:
        if d.exists():
            for p in sorted(d.rglob("*")):
                if p.is_file():
                    out += p.read_bytes()
    return out


def test_stale_journal_after_a_broker_append_is_refused_and_nothing_moves(tmp_path: Path) -> None:
    appended = data(100, 2, size=77)
    seen = 0
    for step in range(1, 40):
        root = tmp_path / f"s{step}"
        part = _journal_partition(root)
        bk = root / "bk"
        r = kafkatool("truncate", "--execute", "--quiet", "--backup-dir", str(bk), str(part), fault_at=step, no_exchange=True)
        if r.returncode == 0:
            break
        assert r.returncode == -signal.SIGKILL
        if not (part / JOURNAL).exists():
            continue
        journal = json.loads((part / JOURNAL).read_text())
        pending = [m["source"] for m in journal["move"] if (part / m["source"]).exists()]
        if not pending:
            continue  # nothing left to move (the renames are checked below)
        active = part / pending[-1]  # the broker starts and appends to its active segment
        with open(active, "ab") as f:
            f.write(appended)
        before = files(part)
        r = kafkatool("truncate", "--execute", "--backup-dir", str(root / "bk2"), str(part), no_exchange=True, stderr=True)
        assert r.returncode == 2, (step, r)
        assert f"{active}: changed since the interrupted truncate's journal recorded it" in r.stderr, r.stderr
        assert "size" in r.stderr and "rm -- " in r.stderr and "Nothing was changed" in r.stderr
        assert files(part) == before and appended in active.read_bytes()
        assert not any(appended in p.read_bytes() for p in bk.rglob("*") if p.is_file())
        # the way out: remove the journal and its temp files, then truncate plans afresh from the disk
        for p in part.iterdir():
            if p.name == JOURNAL or p.name.endswith(TMP):
                p.unlink()
        r = kafkatool("truncate", "--execute", "--quiet", "--backup-dir", str(root / "bk3"), str(part), no_exchange=True)
        assert r.returncode == 0, (step, r)
        assert appended in _all_bytes(part, root / "bk3")  # kept, or moved into the new backup: never lost
        seen += 1
    assert seen >= 2


@pytest.mark.parametrize("no_exchange", [False, True], ids=["exchange", "journal"])
def test_sigkill_at_every_step_then_a_broker_append_never_loses_the_appended_batch(tmp_path: Path, no_exchange: bool) -> None:
    # after each kill a broker starts on what is there and appends to its active segment; the
    # next --execute either completes the interrupted run (only when that cannot touch the new
    # batch), plans afresh, or refuses (exit 2) with the way out. The batch is never lost.
    appended = data(100, 2, size=77)
    outcomes: dict[str, int] = {}
    step = 0
    while True:
        step += 1
        root = tmp_path / f"s{step}"
        part = _journal_partition(root)
        r = kafkatool("truncate", "--execute", "--quiet", "--backup-dir", str(root / "bk"), str(part),
                      fault_at=step, no_exchange=no_exchange)
        if r.returncode == 0:
            break
        assert r.returncode == -signal.SIGKILL
        logs = sorted(p for p in part.iterdir() if p.name.endswith(".log"))
        with open(logs[-1], "ab") as f:
            f.write(appended)
        r = kafkatool("truncate", "--execute", "--backup-dir", str(root / "bk2"), str(part), no_exchange=no_exchange,
                      stderr=True)
        assert r.returncode in (0, 2), (step, r)
        refused = r.returncode == 2
        if refused:
            assert "changed since the interrupted truncate's journal recorded it" in r.stderr, (step, r.stderr)
            assert appended in logs[-1].read_bytes()
            for p in part.iterdir():
                if p.name == JOURNAL or p.name.endswith(TMP):
                    p.unlink()
            r = kafkatool("truncate", "--execute", "--quiet", "--backup-dir", str(root / "bk3"), str(part),
                          no_exchange=no_exchange)
            assert r.returncode == 0, (step, r)
        outcomes["refused" if refused else "completed"] = outcomes.get("refused" if refused else "completed", 0) + 1
        assert appended in _all_bytes(part, root / "bk2", root / "bk3"), step
        assert not (part / JOURNAL).exists() and not any(p.name.endswith(TMP) for p in part.iterdir())
        assert kafkatool("truncate", str(part), no_exchange=no_exchange).returncode == 0, step
    assert step > 10 and outcomes.get("completed", 0) > 0
    assert outcomes.get("refused", 0) > 0 if no_exchange else True


def test_symlinked_partition_dir_sigkill_at_every_step(tmp_path: Path) -> None:
    # the partition dir named through a symlink elsewhere: the real dir is switched (old or new
    # state after any kill, the staging dir beside the real one), and the next run finishes
    from crash_helpers import whole_state

    src = _journal_partition(tmp_path / "src")
    ref = _journal_partition(tmp_path / "ref")
    assert kafkatool("truncate", "--execute", "--quiet", "--backup-dir", str(tmp_path / "ref-bk"), str(ref)).returncode == 0
    old, new = whole_state(src), whole_state(ref)
    step = 0
    while True:
        step += 1
        real = _journal_partition(tmp_path / f"s{step}")
        link = tmp_path / f"s{step}" / "elsewhere" / "t-0"
        link.parent.mkdir()
        link.symlink_to(real)
        r = kafkatool("truncate", "--execute", "--quiet", "--backup-dir", str(tmp_path / f"bk{step}"), str(link),
                      fault_at=step)
        if r.returncode == 0:
            assert whole_state(real) == new
            break
        assert r.returncode == -signal.SIGKILL
        now = whole_state(real)
        assert now in (old, new), step
        assert [d.name for d in link.parent.iterdir()] == ["t-0"]  # nothing written beside the symlink
        r = kafkatool("truncate", "--execute", "--quiet", "--backup-dir", str(tmp_path / f"bk{step}-2"), str(link))
        assert r.returncode == 0 and whole_state(real) == new, step
        assert [d.name for d in real.parent.iterdir() if d.is_dir()] == ["t-0"], step  # no staging dir left
    assert step > 10


# --------------------------------------------------------------------------- targets: unreadable, not Kafka


def _world_readable_tree(root: Path) -> None:
    for p in [root, *root.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)


def test_an_unreadable_partition_dir_is_reported_and_the_others_are_planned(tmp_path: Path) -> None:
    import tempfile

    top = Path(tempfile.mkdtemp(prefix="kt-unreadable-", dir="/tmp"))
    try:
        good = partition(top, (0, B0 + b"\x00" * 40), name="a-0")
        bad = good.parent / "b-0"
        bad.mkdir()
        (bad / f"{SEG0}.log").write_bytes(B0)
        unreadable_log = good.parent / "c-0" / f"{SEG0}.log"
        unreadable_log.parent.mkdir()
        unreadable_log.write_bytes(B0)
        _world_readable_tree(top)
        bad.chmod(0)
        unreadable_log.chmod(0)
        user = 65534 if os.geteuid() == 0 else None  # root reads anything: run as nobody
        r = kafkatool("truncate", "--format", "jsonl", str(good.parent), stderr=True, user=user)
        assert r.returncode == 2, r
        objs = [json.loads(line) for line in r.stdout.splitlines()]
        plans = [o for o in objs if o["type"] == "truncate_partition"]
        assert [p["partitionDir"] for p in plans] == [str(good)] and plans[0]["needsChanges"]
        problems = {o["path"]: o["message"] for o in objs if o["type"] == "truncate_problem"}
        assert sorted(problems) == [str(bad), str(unreadable_log)] and "Permission denied" in problems[str(bad)]
        assert "Permission denied" in problems[str(unreadable_log)]
        assert f"{bad}: " in r.stderr and f"{unreadable_log}: " in r.stderr and "Permission denied" in r.stderr
        r = kafkatool("truncate", str(good.parent), stderr=True, user=user)
        assert r.returncode == 2 and f"{good}: 1 segment checked" in r.stdout and str(bad) in r.stderr
    finally:
        for p in [top, *top.rglob("*")] if top.exists() else []:
            try:
                p.chmod(0o755)
            except OSError:
                pass
        shutil.rmtree(top, ignore_errors=True)


def test_a_file_that_is_not_a_segment_is_refused(run, tmp_path: Path) -> None:
    rand = tmp_path / "rand.log"
    rand.write_bytes(B0)
    r = run("truncate", str(rand))
    assert r.code == 2 and f"{rand}: " in r.err and "offset" in r.err and r.out == "", r  # why: not a base offset
    other = tmp_path / "notes.txt"
    other.write_text("hello")
    r = run("truncate", "--execute", str(other))
    assert r.code == 2 and f"{other}: not a segment" in r.err


@pytest.mark.parametrize("kind", ["empty", "etc-like"])
def test_a_directory_with_nothing_kafka_in_it_is_exit_2(run, tmp_path: Path, kind: str) -> None:
    d = tmp_path / "d"
    d.mkdir()
    if kind == "etc-like":
        (d / "hosts").write_text("127.0.0.1 localhost\n")
        (d / "ssl").mkdir()
        (d / "ssl" / "openssl.cnf").write_text("[x]\n")
    r = run("truncate", str(d))
    assert r.code == 2 and "no Kafka segment found" in r.err and str(d) in r.err, r


def test_a_directory_of_log_dirs_is_searched(run, tmp_path: Path) -> None:
    part = partition(tmp_path / "disks" / "d1", (0, B0 + b"\x01" * 30))
    r = run("truncate", str(tmp_path / "disks"))
    assert r.code == 1 and f"{part}: 1 segment checked" in r.out, r


# --------------------------------------------------------------------------- names that are not UTF-8


@pytest.mark.parametrize("fmt", ["text", "jsonl"])
def test_non_utf8_log_and_partition_dir_names_end_to_end(tmp_path: Path, fmt: str) -> None:
    root = os.fsencode(str(tmp_path))
    part = root + b"/logdir-\xff/t\xfe-0"
    os.makedirs(part)
    bad = bytearray(data(3))
    bad[100] ^= 1
    with open(part + b"/" + SEG0.encode() + b".log", "wb") as f:
        f.write(B0 + bytes(bad))
    bk = tmp_path / "bk"
    r = cli("truncate", "--execute", "--format", fmt, "--backup-dir", str(bk), os.fsdecode(part),
            env={"LC_ALL": "C.UTF-8", "KAFKATOOL_NO_EXCHANGE": "0"})
    assert r.returncode == 0, r
    assert b"internal error" not in r.stderr
    if fmt == "text":
        assert part in r.stdout  # the name's own bytes, as the file system holds them
    else:
        (plan,) = [o for o in map(json.loads, r.stdout.splitlines()) if o["type"] == "truncate_partition"]
        assert os.fsencode(plan["partitionDir"]) == part and plan["verified"]
    with open(part + b"/" + SEG0.encode() + b".log", "rb") as f:
        assert f.read() == B0
    # the journal path too
    with open(part + b"/" + SEG0.encode() + b".log", "ab") as f:
        f.write(b"\x02" * 40)
    r = cli("truncate", "--execute", "--format", fmt, "--backup-dir", str(tmp_path / "bk2"), os.fsdecode(part),
            env={"LC_ALL": "C.UTF-8", "KAFKATOOL_NO_EXCHANGE": "1"})
    assert r.returncode == 0 and b"internal error" not in r.stderr, r


# --------------------------------------------------------------------------- Ctrl-C


def test_ctrl_c_while_planning_is_one_line_and_exit_130(run, tmp_path: Path, monkeypatch) -> None:
    import kafkatool.truncate as truncate_module

    def interrupted(*_a, **_k):
        raise KeyboardInterrupt

    monkeypatch.setattr(truncate_module, "_scan_segment", interrupted)
    part = partition(tmp_path, (0, B0 + b"\x00" * 30))
    r = run("truncate", "--execute", str(part))
    assert r.code == 130 and r.out == "", r
    assert r.err.count("\n") == 1 and "interrupted" in r.err and "nothing was changed" in r.err and "Traceback" not in r.err


@pytest.mark.parametrize("no_exchange", [False, True], ids=["exchange", "journal"])
def test_ctrl_c_at_every_step_of_execute_says_the_state_and_exits_130(tmp_path: Path, no_exchange: bool) -> None:
    from crash_helpers import whole_state

    ref = _journal_partition(tmp_path / "ref")
    old = whole_state(ref)
    assert kafkatool("truncate", "--execute", "--quiet", "--backup-dir", str(tmp_path / "ref-bk"), str(ref)).returncode == 0
    new = whole_state(ref)
    states = set()
    step = 0
    while True:
        step += 1
        part = _journal_partition(tmp_path / f"s{step}")
        r = kafkatool("truncate", "--execute", "--backup-dir", str(tmp_path / f"bk{step}"), str(part),
                      interrupt_at=step, no_exchange=no_exchange, stderr=True)
        if r.returncode == 0:
            break
        assert r.returncode == 130, (step, r)
        assert "Traceback" not in r.stderr and "interrupted during --execute" in r.stderr, (step, r.stderr)
        (line,) = [x for x in r.stderr.splitlines() if x.strip().startswith(str(part))]
        now = {k: v for k, v in whole_state(part).items() if not k.endswith(TMP) and k != JOURNAL}
        if (part / JOURNAL).exists():
            assert "committed but not complete" in line and "kafkatool truncate --execute" in line, line
            states.add("journal")
        elif now == old:
            assert "unchanged (the old state, complete)" in line, line
            states.add("old")
        else:
            assert now == new and "changed (the new state, complete)" in line, (step, line)
            states.add("new")
        r = kafkatool("truncate", "--execute", "--quiet", "--backup-dir", str(tmp_path / f"bk{step}-2"), str(part),
                      no_exchange=no_exchange)
        assert r.returncode == 0 and whole_state(part) == new, step
    assert "old" in states and ("journal" in states) == no_exchange, states


# --------------------------------------------------------------------------- full disks, read-only, owners, side files


def test_a_full_disk_names_the_file(run, tmp_path: Path, monkeypatch) -> None:
    # the system's error for a failed write names no file: truncate's own writes (the staging
    # copy of the cut .log, the journal's temp file) must name theirs
    real = os.copy_file_range

    def full(src, dst, count, *args):
        target = os.readlink(f"/proc/self/fd/{dst}")
        if target.endswith(TMP) or "-delete/" in target:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(src, dst, count, *args)

    for no_exchange, written in (("0", f"-delete/{SEG0}.log"), ("1", f"{SEG0}.log{TMP}")):
        part = _journal_partition(tmp_path / f"x{no_exchange}")
        before = files(part)
        monkeypatch.setenv("KAFKATOOL_NO_EXCHANGE", no_exchange)
        with monkeypatch.context() as m:
            m.setattr(os, "copy_file_range", full)
            r = run("truncate", "--execute", "--backup-dir", str(tmp_path / f"bk{no_exchange}"), str(part))
        assert r.code == 2, r
        (line,) = [x for x in r.err.splitlines() if "No space left on device" in x]
        assert written in line and "error: : " not in line, line
        assert files(part) == before
        assert [d.name for d in part.parent.iterdir() if d.is_dir()] == [part.name]  # no staging dir left


def _tmpfs(path: Path, size: str) -> bool:
    path.mkdir(parents=True)
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "none", str(path)],
                          capture_output=True).returncode == 0


@pytest.mark.skipif(os.geteuid() != 0 or not sys.platform.startswith("linux"), reason="needs root to mount a tmpfs")
@pytest.mark.parametrize("no_exchange", ["0", "1"], ids=["exchange", "journal"])
def test_a_really_full_disk_and_a_read_only_one(tmp_path: Path, no_exchange: str) -> None:
    mnt = tmp_path / "mnt"
    if not _tmpfs(mnt, "1m"):
        pytest.skip("mount -t tmpfs is not permitted here")
    try:
        big = data(0, 3, size=60_000)  # ~180 KiB kept: the new copy does not fit beside it and its backup
        part = partition(mnt, (0, big + data(3, 3, size=60_000)[:-1]), (6, data(6)))
        filler = mnt / "filler"
        free = os.statvfs(mnt).f_bavail * os.statvfs(mnt).f_frsize
        filler.write_bytes(b"\x01" * max(0, free - 100_000))
        before = files(part)
        r = cli("truncate", "--execute", "--backup-dir", str(tmp_path / "bk"), str(part),
                env={"KAFKATOOL_NO_EXCHANGE": no_exchange})
        assert r.returncode == 2, r
        err = r.stderr.decode()
        assert "No space left on device" in err and "error: : " not in err and str(mnt) in err, err
        assert files(part) == before
        filler.unlink()
        subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
        r = cli("truncate", str(part))
        assert r.returncode == 1  # the dry run reads
        r = cli("truncate", "--execute", "--backup-dir", str(tmp_path / "bk2"), str(part),
                env={"KAFKATOOL_NO_EXCHANGE": no_exchange})
        err = r.stderr.decode()
        assert r.returncode == 2 and "Read-only file system" in err and "internal error" not in err, err
        assert files(part) == before
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give files another owner")
def test_journal_fallback_keeps_the_owner_and_mode_of_what_it_replaces(tmp_path: Path) -> None:
    part = _journal_partition(tmp_path)
    (part / f"{SEG0}.index").write_bytes(b"")
    for p in part.iterdir():
        os.chown(p, 1234, 2345)
        p.chmod(0o600)
    r = kafkatool("truncate", "--execute", "--quiet", "--backup-dir", str(tmp_path / "bk"), str(part), no_exchange=True)
    assert r.returncode == 0, r
    for n in (f"{SEG0}.log", f"{SEG0}.index", f"{SEG0}.timeindex"):  # rewritten, rewritten, created
        st = (part / n).stat()
        assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (1234, 2345, 0o600), n


@pytest.mark.parametrize("no_exchange", [False, True], ids=["exchange", "journal"])
def test_a_hostile_temp_symlink_is_never_written_through(tmp_path: Path, no_exchange: bool) -> None:
    part = _journal_partition(tmp_path)
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    for n in (f"{SEG0}.log{TMP}", f"{SEG0}.index{TMP}", f"{JOURNAL}{TMP}"):
        (part / n).symlink_to(victim)
    r = kafkatool("truncate", "--execute", "--quiet", "--backup-dir", str(tmp_path / "bk"), str(part),
                  no_exchange=no_exchange)
    assert r.returncode == 0, r
    assert victim.read_bytes() == b"precious"
    assert not any(p.is_symlink() for p in part.iterdir())
    assert (part / f"{SEG0}.log").read_bytes() == B0


# --------------------------------------------------------------------------- output


def test_jsonl_is_compact_camel_case_and_text_says_one_segment(run, tmp_path: Path) -> None:
    bad = bytearray(data(3))
    bad[100] ^= 1
    part = partition(tmp_path, (0, B0 + bytes(bad) + data(6)))
    r = run("truncate", "--format", "jsonl", str(part))
    for line in r.out.splitlines():
        obj = json.loads(line)
        assert json.dumps(obj, separators=(",", ":")) == line
        for key in obj:
            assert "_" not in key, key
    (plan,), summary = jsonl(r)
    assert {"partitionDir", "segmentsChecked", "needsChanges"} <= plan.keys()
    assert {"oldSize", "newSize", "batchesKept", "nextOffset", "batchesDiscarded"} <= plan["segments"][0].keys()
    assert {"needingChanges", "bytesRemoved", "backupDirs"} <= summary.keys()
    r = run("truncate", str(part))
    assert f"{part}: 1 segment checked" in r.out
    assert f"create    {SEG0}.index (0 bytes)" in r.out and "missing ->" not in r.out
    assert "discard   1 intact batch (offsets 6-8)" in r.out
    assert "truncate (dry run): 1 partition, 1 need changes" in r.err


def test_gap_of_one_offset_is_worded_in_the_singular(run, tmp_path: Path) -> None:
    one = batch(3, [record(0, b"k", b"v" * 40)])  # offset 3 alone
    bad = bytearray(one)
    bad[70] ^= 1
    part = partition(tmp_path, (0, B0 + bytes(bad) + data(4)))
    r = run("truncate", "--keep-valid-after", str(part))
    assert "gap       offset 3 is missing between kept offsets 2 and 4" in r.out, r


def test_dry_run_warns_when_a_live_broker_holds_the_log_dir(run, tmp_path: Path) -> None:
    from test_reindex import HOLD_LOCK

    part = partition(tmp_path, (0, B0 + b"\x00" * 30))
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(part.parent / ".lock")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        r = run("truncate", str(part))
        assert r.code == 1 and f"PID {holder.pid}" in r.err and "warning" in r.err, r
    finally:
        holder.stdin.close()
        holder.wait(timeout=10)


# --------------------------------------------------------------------------- an adversary's partition dir


def _damaged_partition(root: Path) -> Path:
    bad = bytearray(data(3))
    bad[100] ^= 1
    return partition(root, (0, B0 + bytes(bad)))


@pytest.mark.parametrize("what", ["fifo later segment", "fifo index", "fifo leader-epoch-checkpoint", "symlinked log"])
def test_non_regular_files_are_refused_without_blocking(tmp_path: Path, what: str) -> None:
    part = _damaged_partition(tmp_path)
    if what == "fifo later segment":
        os.mkfifo(part / "00000000000000000009.log")  # a later segment would be moved: opening it would block
        named = part / "00000000000000000009.log"
    elif what == "fifo index":
        os.mkfifo(part / f"{SEG0}.index")
        named = part / f"{SEG0}.index"
    elif what == "fifo leader-epoch-checkpoint":
        os.mkfifo(part / "leader-epoch-checkpoint")
        named = part / "leader-epoch-checkpoint"
    else:
        real = tmp_path / "elsewhere.log"
        (part / f"{SEG0}.log").rename(real)
        (part / f"{SEG0}.log").symlink_to(real)
        named = part / f"{SEG0}.log"
    r = cli("truncate", "--execute", "--backup-dir", str(tmp_path / "bk"), str(part), env={"KAFKATOOL_NO_EXCHANGE": "1"})
    err = r.stderr.decode()
    assert r.returncode == 2 and f"{named}: " in err and "refused" in err, err
    assert "internal error" not in err and not (tmp_path / "bk").exists()
    if what == "symlinked log":
        assert (part / f"{SEG0}.log").is_symlink() and len(real.read_bytes()) == len(B0) + len(data(3))


@pytest.mark.parametrize("kind,why", [
    ("garbage", "cannot read this journal"),
    ("move outside its backup dir", "malformed"),
    ("rename outside the partition dir", "malformed"),
    ("written by the old format", "older kafkatool"),
])
def test_a_journal_that_cannot_be_trusted_is_refused_with_the_way_out(run, tmp_path: Path, kind: str, why: str) -> None:
    part = _damaged_partition(tmp_path)
    bk, outside = tmp_path / "journal-bk", tmp_path / "outside"
    (bk / part.name).mkdir(parents=True)
    outside.mkdir()
    content = {
        "garbage": "{{{",
        "move outside its backup dir": json.dumps({"version": 2, "backupDir": str(bk), "replace": [], "move": [
            {"source": f"{SEG0}.log", "dest": str(outside / "evil"), "old": None}]}),
        "rename outside the partition dir": json.dumps({"version": 2, "backupDir": str(bk), "move": [], "replace": [
            {"temp": "../../outside/x.kafkatool-tmp", "target": "../../outside/x", "old": None, "new": None}]}),
        "written by the old format": json.dumps({"backup_dir": str(bk), "replace": [], "move": [
            {"source": f"{SEG0}.log", "dest": str(bk / part.name / "x")}]}),
    }[kind]
    (part / JOURNAL).write_text(content)
    before = files(part)
    r = run("truncate", "--execute", "--backup-dir", str(tmp_path / "bk"), str(part))
    assert r.code == 2 and why in r.err and f"rm -- {part / JOURNAL}" in r.err, r
    assert files(part) == before and list(outside.iterdir()) == [] and list((bk / part.name).iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run as another user")
def test_another_users_partition_is_an_error_naming_the_file(tmp_path: Path) -> None:
    import tempfile

    top = Path(tempfile.mkdtemp(prefix="kt-owner-", dir="/tmp"))
    try:
        part = _damaged_partition(top)
        _world_readable_tree(top)
        before = files(part)
        for no_exchange in (False, True):
            r = kafkatool("truncate", "--execute", "--backup-dir", str(top / "bk"), str(part), stderr=True, user=65534,
                          no_exchange=no_exchange)
            assert r.returncode == 2 and "Permission denied" in r.stderr and str(part.parent) in r.stderr, r
            assert "internal error" not in r.stderr and files(part) == before
    finally:
        shutil.rmtree(top, ignore_errors=True)


def test_a_journal_in_progress_under_another_runs_lock_is_not_called_stale(tmp_path: Path) -> None:
    # CI caught this race: run B planned (without the lock) while run A was between its journal's
    # commit point and its last rename, found A's files "changed since the journal", and refused
    # the journal as stale. While another process holds the lock the journal is in progress.
    for step in range(1, 40):
        root = tmp_path / f"s{step}"
        part = _journal_partition(root)
        r = kafkatool("truncate", "--execute", "--quiet", "--backup-dir", str(root / "bk"), str(part), fault_at=step,
                      no_exchange=True)
        assert r.returncode == -signal.SIGKILL, (step, r)
        if not (part / JOURNAL).exists():
            continue
        journal = json.loads((part / JOURNAL).read_text())
        pending = [m["source"] for m in journal["move"] if (part / m["source"]).exists()]
        if pending:
            break
    else:
        raise AssertionError("no step leaves a journal with moves pending")
    with open(part / pending[-1], "ab") as f:  # what the run holding the lock did meanwhile, as the journal sees it
        f.write(data(100, 2, size=77))
    before = files(part)
    with LockHolder(part.parent / ".lock") as holder:
        r = kafkatool("truncate", "--execute", "--backup-dir", str(root / "bk2"), str(part), no_exchange=True, stderr=True)
        assert r.returncode == 2, r
        assert f"PID {holder.pid}" in r.stderr and "holds the lock on this log dir" in r.stderr, r.stderr
        assert str(part.parent / ".lock") in r.stderr and "changed since" not in r.stderr, r.stderr
        assert files(part) == before
    # once the lock is free the same journal is what it is: stale
    r = kafkatool("truncate", "--execute", "--backup-dir", str(root / "bk3"), str(part), no_exchange=True, stderr=True)
    assert r.returncode == 2 and "changed since the interrupted truncate's journal recorded it" in r.stderr, r.stderr


def test_a_file_gone_while_planning_names_the_run_holding_the_lock_or_is_planned_again(tmp_path: Path, monkeypatch) -> None:
    # CI caught this race too: run B listed segment 9, then run A (holding the lock) moved it into
    # its backup before B read it, and B said "cannot read: No such file or directory"
    import kafkatool.truncate as truncate_module

    part = _journal_partition(tmp_path / "p")
    real_plan = truncate_module.plan_truncate
    calls: list[str] = []

    def vanishing_once(d, *a, **kw):
        calls.append(d)
        if len(calls) == 1:
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(part / "00000000000000000009.log"))
        return real_plan(d, *a, **kw)

    monkeypatch.setattr(truncate_module, "plan_truncate", vanishing_once)
    errors: list[tuple[str, Exception]] = []
    plans = truncate_module.plan_truncate_paths([str(part)], on_error=lambda d, e: errors.append((d, e)))
    assert errors == [] and len(plans) == 1 and plans[0].cuts and len(calls) == 2  # nobody holds the lock: planned again
    calls.clear()
    with LockHolder(part.parent / ".lock") as holder:
        plans = truncate_module.plan_truncate_paths([str(part)], on_error=lambda d, e: errors.append((d, e)))
    assert plans == [] and len(calls) == 1 and len(errors) == 1
    (d, e), = errors
    assert isinstance(e, FileNotFoundError) and e.filename == str(part / "00000000000000000009.log")
    assert f"PID {holder.pid}" in e.strerror and str(part.parent / ".lock") in e.strerror, e.strerror


@pytest.mark.parametrize("no_exchange", ["0", "1"], ids=["exchange", "journal"])
def test_two_runs_at_once_end_in_one_clean_state(tmp_path: Path, no_exchange: str) -> None:
    from crash_helpers import whole_state

    ref = _journal_partition(tmp_path / "ref")
    assert kafkatool("truncate", "--execute", "--quiet", "--backup-dir", str(tmp_path / "ref-bk"), str(ref)).returncode == 0
    new = whole_state(ref)
    for attempt in range(3):
        part = _journal_partition(tmp_path / f"a{attempt}")
        env = dict(os.environ, PYTHONPATH=str(REPO), KAFKATOOL_NO_EXCHANGE=no_exchange)
        runs = [subprocess.Popen([sys.executable, "-m", "kafkatool", "truncate", "--execute", "--quiet", "--backup-dir",
                                  str(tmp_path / f"a{attempt}-bk{i}"), str(part)], env=env, stderr=subprocess.PIPE)
                for i in range(2)]
        results = [(p.wait(timeout=120), p.stderr.read().decode()) for p in runs]
        assert all(code in (0, 2) for code, _ in results) and any(code == 0 for code, _ in results), results
        for code, err in results:
            if code == 2:  # the other run held the lock, or had changed the partition since this one planned
                assert ".lock" in err or "since it was planned" in err, err
        assert {k: v for k, v in whole_state(part).items() if k != ".lock"} == new
        assert [d.name for d in part.parent.iterdir() if d.is_dir()] == [part.name]
        assert kafkatool("truncate", str(part)).returncode == 0
