"""Guards against mutations the rest of the suite let through (issue 9, "Tests that would let
these regress"). Each rule below was broken on purpose, one change at a time, in a private copy
of the code, and the rest of the suite still passed when this module was written; the tests
named here fail on it.

=================================================================  ==================================
mutation                                                           caught by
=================================================================  ==================================
``_speedups.c`` ix_run ``valid - last_entry > interval`` → ``>=``  ``*_interval_boundary[compiled-*]``
(six 100-byte batches at interval 100: 5 entries, not 2)           (recovery walk, reindex, truncate)
truncate: epoch ``start_offset < new_end``, txn ``last_offset <    ``test_truncate_trims_exactly_at_the_new_log_end``
new_end`` → ``<=``; snapshot ``off > new_end`` → ``>=``
verify: no ``txnindex_missing_entry`` when ``.txnindex`` is absent ``test_verify_reports_each_abort_when_the_txnindex_is_absent``
dump: out-of-order detection (``prev_ts >= ts``) or its wording    ``test_dump_time_index_*``
IndexBuilder max timestamp ``>`` → ``>=`` (the final time entry)  ``test_*_final_time_entry_names_the_first_batch_holding_the_max``
legacy batch line ``isvalid`` / record ``isValid`` always true     ``test_dump_legacy_batch_lines_isvalid``
framing.frame_entry ``left <= 17`` → ``<`` (memory walk)           ``test_walk_never_parses_a_tail_of_17_bytes[*-memory]``
framing.frame_entry ``size < 14`` → ``<=`` (file walk)             ``test_walk_takes_an_entry_of_exactly_the_minimum_size[*-file]``
verify ``txnindex_below_base`` ``<`` → ``<=``                      ``test_verify_txnindex_entry_ending_exactly_at_the_segment_base``
verify ``index_entry_past_end`` ``>= valid_end`` → ``>``           ``test_verify_index_entry_at_exactly_the_end_of_the_valid_batches``
verify ``index_not_monotonic`` ``<=`` → ``<``                      ``test_verify_index_entry_with_an_equal_offset_is_not_monotonic``
verify ``timeindex_not_monotonic`` ``ts <=`` → ``<``               ``test_verify_time_index_entry_with_an_equal_timestamp_is_not_monotonic``
verify ``offset_overflow`` ``>`` → ``>=``                          ``test_verify_offset_at_exactly_int32_max_above_the_base[*-deep]``
verify ``offset_not_monotonic`` ``first <= prev`` → ``<``          ``test_verify_a_batch_starting_at_the_previous_last_offset``
verify wrapper ``offset_below_base`` ``<`` → ``<=``                ``test_verify_a_wrapper_whose_offset_is_the_segment_base``
truncate: offset fits ``rel > INT32_MAX`` → ``>=``                 ``test_truncate_keeps_a_last_offset_exactly_int32_max_above_the_base``
truncate: a tail ``position < end`` → ``< end - 1``                ``test_truncate_cuts_a_tail_of_any_length[*-1]``
IndexBuilder relative offset ``> INT32_MAX`` → ``>=``              ``test_index_entries_at_exactly_int32_max_relative_offset``
=================================================================  ==================================

Also here, for rules other tests catch too: IndexBuilder's interval, ix_run's max timestamp,
time append (``max_ts > last_time_ts``) and offset refusal (``lo <= last_offset``), verify's
17-byte tail, truncate's refused final time entry (a bug found while writing this module,
fixed in ceea65e).

Every expected value is derived by hand from the spec (/work/shared/spec/kafka-reference.md),
never from kafkatool's own builder: the index rules of §8.3/§12.2, the walk of §3, the trims of
§19, the templates of §15.3/§15.9 and the golden bytes of §16. The inputs are built with
kafkatool's v2 encoder (checked against §16.1 in test_record.py) or written out as the spec's hex.

Where both a compiled (``_speedups``) and a pure-Python implementation of a rule exist, the
test runs on both (the ``impl`` fixture); the compiled variant skips when the extension is not
built.
"""

from __future__ import annotations

import os
import shutil
import struct
import zlib
from pathlib import Path

import pytest

import kafkatool.repair as repair_module
import kafkatool.verify.workers as verify_workers
from conftest import FIXTURES
from kafkatool.dump import DumpOptions, TimeIndexProblems, iter_dump
from kafkatool.record.control import ControlType, encode_control_key, encode_end_txn_marker
from kafkatool.record.v2 import RecordSpec, encode_batch
from kafkatool.repair import plan_reindex, walk_as_recovery
from kafkatool.segment import walk as walk_module
from kafkatool.segment.checkpoint import encode_leader_epoch_checkpoint, read_leader_epoch_checkpoint
from kafkatool.segment.index import IndexAppendError, IndexBuilder, decode_offset_index, decode_time_index
from kafkatool.segment.snapshot import encode_producer_snapshot
from kafkatool.segment.txnindex import AbortedTxn, decode_txn_index, encode_txn_index
from kafkatool.segment.walk import SegmentWalker, WalkStop
from kafkatool.truncate import plan_truncate
from kafkatool.verify import Finding, VerifyOptions, verify_paths

T = 1_700_000_000_000  # §16: 1700000000000 = 0x18BCFE56800
BASE = 1000  # a segment base offset other than 0, so relative and absolute offsets differ


def seg(base: int) -> str:
    return f"{base:020d}"


@pytest.fixture(params=["compiled", "python"])
def impl(request, monkeypatch):
    """Run the test with the compiled loops (``_speedups``), then with the pure-Python ones."""
    if request.param == "python":
        monkeypatch.setattr(repair_module, "_index_v2", None)
        monkeypatch.setattr(verify_workers, "scan_v2", None)
        monkeypatch.setattr(walk_module, "_fast_walk", None)
    elif repair_module._index_v2 is None:
        pytest.skip("the compiled extension is not built")
    return request.param


# --------------------------------------------------------------------------- §8.3 the index interval


def hundred_byte_batch(k: int) -> bytes:
    """Batch ``k`` of the test segment: exactly 100 bytes, offsets BASE+2k and BASE+2k+1 (so a
    batch's last offset is not its base offset), record timestamps T+10k and T+10k+3 (max T+10k+3)."""
    b = encode_batch([RecordSpec(BASE + 2 * k, T + 10 * k, b"k", bytes(10)),
                      RecordSpec(BASE + 2 * k + 1, T + 10 * k + 3, None, bytes(14))])
    assert len(b) == 100
    return b


SIX = b"".join(hundred_byte_batch(k) for k in range(6))  # batches at 0, 100, ..., 500


def expected_for(positions: list[int]) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The entries for offset-index entries at ``positions`` (hand-derived, §8.3): the batch at p
    (k = p/100) has last offset BASE+2k+1 (relative 2k+1); the time entry written with it is
    (max timestamp so far, offset holding it) = (T+10k+3, 2k+1) since timestamps only rise; the
    final time entry (T+53, 11) of batch 5 is appended unless the last one already holds T+53."""
    offsets = [(2 * (p // 100) + 1, p) for p in positions]
    times = [(T + 10 * (p // 100) + 3, 2 * (p // 100) + 1) for p in positions]
    if not times or times[-1][0] != T + 53:
        times.append((T + 53, 11))
    return offsets, times


# §8.3/§12.2: "if p − lastIndexedPosition > index.interval.bytes" (strictly greater), the first
# batch (p = 0) never indexed. Batches are 100 bytes; interval = k * 100 exactly, and ±1.
#   interval 99:  100-0 > 99 at every batch after the first       -> 100, 200, 300, 400, 500
#   interval 100: 100 > 100 no; 200 > 100 yes; 300-200 no; 400-200 yes; 500-400 no -> 200, 400
#   interval 101: the same as 100; 199: 200 > 199 at 200 and 400  -> 200, 400
#   interval 200: 200 > 200 no; 300 > 200 yes; 500-300 = 200 no   -> 300
#   interval 201: 300 > 201 yes; 200 > 201 no                      -> 300
#   interval 299: 300; 300: 400 > 300 -> 400; 499: 500; 500 and 501: none (500 > 500 is false)
INTERVAL_POSITIONS = {
    0: [100, 200, 300, 400, 500],
    99: [100, 200, 300, 400, 500],
    100: [200, 400],
    101: [200, 400],
    199: [200, 400],
    200: [300],
    201: [300],
    299: [300],
    300: [400],
    301: [400],
    499: [500],
    500: [],
    501: [],
}


def entries(index: bytes, timeindex: bytes) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    return ([tuple(e) for e in decode_offset_index(index, BASE).entries],
            [tuple(e) for e in decode_time_index(timeindex, BASE).entries])


def test_hand_derived_interval_table_matches_the_spec_example() -> None:
    # the issue's own numbers: six 100-byte batches at interval 100 get 2 entries, not 5
    assert len(INTERVAL_POSITIONS[100]) == 2 and len(INTERVAL_POSITIONS[99]) == 5


@pytest.mark.parametrize("interval", sorted(INTERVAL_POSITIONS))
def test_index_builder_interval_boundary(interval: int) -> None:
    """The pure-Python builder, fed the batches directly."""
    builder = IndexBuilder(BASE, index_interval_bytes=interval)
    for k in range(6):
        builder.add_batch(100 * k, 100, BASE + 2 * k + 1, T + 10 * k + 3)
    assert entries(*builder.finish()) == expected_for(INTERVAL_POSITIONS[interval])


@pytest.mark.parametrize("interval", sorted(INTERVAL_POSITIONS))
def test_recovery_walk_interval_boundary(tmp_path: Path, impl: str, interval: int) -> None:
    """reindex's and truncate's shared recovery walk: batches 2-6 go through the compiled loop
    (``index_v2``) when it is built, every batch through IndexBuilder when not."""
    log = tmp_path / f"{seg(BASE)}.log"
    log.write_bytes(SIX)
    builder = IndexBuilder(BASE, index_interval_bytes=interval)
    walker, batches, first, last, bad = walk_as_recovery(str(log), builder)
    assert (batches, first, last, bad) == (6, BASE, BASE + 11, None)
    assert entries(*builder.finish()) == expected_for(INTERVAL_POSITIONS[interval])


@pytest.mark.parametrize("interval", [99, 100, 101, 200, 500])
def test_reindex_plan_interval_boundary(tmp_path: Path, impl: str, interval: int) -> None:
    """The default reindex path, for a segment whose indexes are missing (so any policy rebuilds them)."""
    log = tmp_path / "t-0" / f"{seg(BASE)}.log"
    log.parent.mkdir()
    log.write_bytes(SIX)
    plan = plan_reindex(str(log), interval)
    got = {c.kind: c.data for c in plan.changes}
    assert entries(got["index"], got["timeindex"]) == expected_for(INTERVAL_POSITIONS[interval])


@pytest.mark.parametrize("interval", [99, 100, 101, 200, 500])
def test_truncate_rebuilds_the_cut_segment_at_the_interval_boundary(tmp_path: Path, impl: str, interval: int) -> None:
    """truncate's index rebuild for the kept part: the six batches, then a seventh whose CRC fails."""
    bad = bytearray(encode_batch([RecordSpec(BASE + 12, T + 60, b"k", b"v")]))
    bad[-1] ^= 0xFF
    part = tmp_path / "t-0"
    part.mkdir()
    (part / f"{seg(BASE)}.log").write_bytes(SIX + bytes(bad))
    plan = plan_truncate(str(part), index_interval_bytes=interval)
    (cut,) = plan.cuts
    assert cut.kept == ((0, 600),) and plan.new_log_end == BASE + 12
    got = {r.kind: r.data for r in plan.rewrites}
    assert entries(got["index"], got["timeindex"]) == expected_for(INTERVAL_POSITIONS[interval])


# --------------------------------------------------------------------------- §8.3 the first batch holding the max


# Batch max timestamps T+50, T+20, T+50, T+50, T+10 (offsets 0-1, 2-3, ...): the maximum T+50 is
# first held by batch 0 (last offset 1). §8.3: maxTimestampSoFar is updated only when a batch's
# max is greater ("if largestTimestamp > maxTimestampSoFar"), so ties keep the first batch, and
# "every closed segment's time index ends with the segment's overall (max timestamp, lastOffset
# of the first batch holding it)". With an interval no batch reaches, that is the only entry.
TIES = [50, 20, 50, 50, 10]


def ties_segment() -> bytes:
    return b"".join(
        encode_batch([RecordSpec(BASE + 2 * k, T + ts - 1, b"k", b"a"), RecordSpec(BASE + 2 * k + 1, T + ts, b"k", b"b")])
        for k, ts in enumerate(TIES)
    )


def test_index_builder_final_time_entry_names_the_first_batch_holding_the_max() -> None:
    builder = IndexBuilder(BASE, index_interval_bytes=1 << 30)
    pos = 0
    for k, ts in enumerate(TIES):
        builder.add_batch(pos, 100, BASE + 2 * k + 1, T + ts)
        pos += 100
    assert entries(*builder.finish()) == ([], [(T + 50, 1)])


def test_recovery_walk_final_time_entry_names_the_first_batch_holding_the_max(tmp_path: Path, impl: str) -> None:
    log = tmp_path / f"{seg(BASE)}.log"
    log.write_bytes(ties_segment())
    builder = IndexBuilder(BASE, index_interval_bytes=1 << 30)
    walk_as_recovery(str(log), builder)
    assert entries(*builder.finish()) == ([], [(T + 50, 1)])


def test_recovery_walk_tie_after_an_entry(tmp_path: Path, impl: str) -> None:
    """Interval 0: every batch after the first gets an offset entry; the time entry at batch 1
    is (T+50, 1) and no later tie adds one (§8.3: maybeAppend appends only a greater timestamp)."""
    data = ties_segment()
    log = tmp_path / f"{seg(BASE)}.log"
    log.write_bytes(data)
    positions = [b.position for b, _ in SegmentWalker(data)]
    builder = IndexBuilder(BASE, index_interval_bytes=0)
    walk_as_recovery(str(log), builder)
    assert entries(*builder.finish()) == ([(2 * k + 1, positions[k]) for k in range(1, 5)], [(T + 50, 1)])


# --------------------------------------------------------------------------- §19 truncate's trims at the new log end


def three_record_batches(base: int, n: int) -> bytes:
    return b"".join(
        encode_batch([RecordSpec(base + 3 * i + j, T + base + 3 * i + j, b"k", b"v" * 20) for j in range(3)])
        for i in range(n)
    )


def test_truncate_trims_exactly_at_the_new_log_end(tmp_path: Path) -> None:
    """Offsets 0-11 in four good batches, then a batch with a bad CRC: the new log end is 12.
    §19: drop leader epochs with startOffset >= 12 and .txnindex entries with lastOffset >= 12;
    remove producer snapshots with offset > 12 (a snapshot *at* the log end is the one recovery
    itself takes, §12.2 step 7, and stays)."""
    part = tmp_path / "t-0"
    part.mkdir()
    bad = bytearray(three_record_batches(12, 1))
    bad[-1] ^= 0xFF
    (part / f"{seg(0)}.log").write_bytes(three_record_batches(0, 4) + bytes(bad))
    (part / "leader-epoch-checkpoint").write_text(encode_leader_epoch_checkpoint([(0, 0), (1, 11), (2, 12), (3, 13)]))
    txns = [AbortedTxn(0, 7, 9, 11, 12), AbortedTxn(0, 8, 10, 12, 13), AbortedTxn(0, 9, 10, 13, 14)]
    (part / f"{seg(0)}.txnindex").write_bytes(encode_txn_index(txns))
    for off in (11, 12, 13):
        (part / f"{seg(off)}.snapshot").write_bytes(encode_producer_snapshot([]))

    plan = plan_truncate(str(part))
    assert plan.new_log_end == 12
    (cut,) = plan.cuts
    assert cut.next_offset == 12 and cut.removed[0].start == 4 * len(three_record_batches(0, 1))
    rewrites = {os.path.basename(r.path): r.data for r in plan.rewrites}
    epochs = read_epochs(tmp_path, rewrites["leader-epoch-checkpoint"])
    assert [(e.epoch, e.start_offset) for e in epochs] == [(0, 0), (1, 11)]
    assert list(decode_txn_index(rewrites[f"{seg(0)}.txnindex"]).entries) == [txns[0]]
    assert sorted(os.path.basename(m.path) for m in plan.moves) == [f"{seg(13)}.snapshot"]


def read_epochs(tmp_path: Path, data: bytes):
    p = tmp_path / "leader-epoch-checkpoint.read"
    p.write_bytes(data)
    return read_leader_epoch_checkpoint(p)


# --------------------------------------------------------------------------- verify: .txnindex missing


def txn_log() -> bytes:
    """Producer 7: data at 0-2, ABORT at 3; producer 8: data at 4-5, ABORT at 6 (§6 marker bytes:
    key = version 0, type 0 ABORT; value = version 0, coordinator epoch 5)."""
    def data(pid: int, first: int, n: int) -> bytes:
        return encode_batch([RecordSpec(first + i, T + first + i, b"k", b"v") for i in range(n)],
                            producer_id=pid, producer_epoch=0, base_sequence=0, is_transactional=True)

    def abort(pid: int, offset: int) -> bytes:
        assert encode_control_key(ControlType.ABORT) == bytes.fromhex("00000000")
        assert encode_end_txn_marker(5) == bytes.fromhex("000000000005")
        return encode_batch([RecordSpec(offset, T + offset, bytes.fromhex("00000000"), bytes.fromhex("000000000005"))],
                            producer_id=pid, producer_epoch=0, is_transactional=True, is_control=True)

    return data(7, 0, 3) + abort(7, 3) + data(8, 4, 2) + abort(8, 6)


def findings(*paths: Path) -> list[Finding]:
    return [f for f in verify_paths([str(p) for p in paths], VerifyOptions()) if isinstance(f, Finding)]


def test_verify_reports_each_abort_when_the_txnindex_is_absent(tmp_path: Path, impl: str) -> None:
    """§9: only aborted transactions are indexed, in the segment holding the marker; both aborts
    here are whole in the segment, so a missing .txnindex misses both entries."""
    part = tmp_path / "t-0"
    part.mkdir()
    (part / f"{seg(0)}.log").write_bytes(txn_log())
    (part / f"{seg(0)}.index").write_bytes(b"")
    got = [(f.kind, os.path.basename(f.file), f.expected, f.found) for f in findings(part)]
    assert got == [
        ("txnindex_missing_entry", f"{seg(0)}.log", (7, 0, 3), None),
        ("txnindex_missing_entry", f"{seg(0)}.log", (8, 4, 6), None),
    ]
    # with both entries (§9 fields: version, producerId, firstOffset, lastOffset, lastStableOffset) it is clean
    (part / f"{seg(0)}.txnindex").write_bytes(encode_txn_index([AbortedTxn(0, 7, 0, 3, 4), AbortedTxn(0, 8, 4, 6, 7)]))
    assert findings(part) == []


# --------------------------------------------------------------------------- dump: time-index diagnostics (§15.6, §15.9)


def golden_copy(tmp_path: Path, timeindex: bytes) -> Path:
    part = tmp_path / "golden-0"
    shutil.copytree(FIXTURES / "golden-0", part)
    for p in part.iterdir():
        p.chmod(0o644)
    (part / f"{seg(0)}.timeindex").write_bytes(timeindex)
    return part


def time_entries(*pairs: tuple[int, int]) -> bytes:
    return b"".join(struct.pack(">qi", ts, rel) for ts, rel in pairs)


# golden-0 (§16.1-16.2): batches ending at offsets 1 (max ts T+5), 2 (T+10), 3 (T+20); its
# .index holds (3, 156). Entries: (T+10, 2) fine; (T+5, 1) fine against the log but not above
# the previous T+10; (T+5, 1) again: equal to the previous (§15.6: "if prevTimestamp >= entryTs");
# (T+20, 3) fine.
OUT_OF_ORDER = time_entries((T + 10, 2), (T + 5, 1), (T + 5, 1), (T + 20, 3))


def test_dump_time_index_out_of_order_detected(tmp_path: Path) -> None:
    part = golden_copy(tmp_path, OUT_OF_ORDER)
    items = list(iter_dump([str(part / f"{seg(0)}.timeindex")], DumpOptions()))
    problems = [(i.kind, list(i.pairs)) for i in items if isinstance(i, TimeIndexProblems)]
    assert problems == [("out_of_order", [(T + 5, T + 10), (T + 5, T + 5)])]


def test_dump_time_index_out_of_order_wording(run, tmp_path: Path) -> None:
    part = golden_copy(tmp_path, OUT_OF_ORDER)
    path = part / f"{seg(0)}.timeindex"
    r = run("dump", str(path))
    assert r.code == 0, r
    assert r.lines == [
        f"Dumping {path}",
        "timestamp: 1700000000010 offset: 2",
        "timestamp: 1700000000005 offset: 1",
        "timestamp: 1700000000005 offset: 1",
        "timestamp: 1700000000020 offset: 3",
    ]
    assert r.err == (
        f"Found out of order timestamp in :{path}\n"
        "  Index timestamp: 1700000000005, Previously indexed timestamp: 1700000000010\n"
        "  Index timestamp: 1700000000005, Previously indexed timestamp: 1700000000005\n"
    )


def test_dump_time_index_all_three_reports_in_the_spec_order(run, tmp_path: Path) -> None:
    """§15.9: mismatch files first, then out of order, then not found; §16.10's wording."""
    # (T+9, 2): timestamp mismatch (the batch ending at 2 has T+10); (T+5, 1): out of order after
    # T+9; (T+30, 7): no batch ends at or after offset 7, "not found" with log offset -1. (An
    # offset equal to the base would end the dump instead, §15.6 step 3.1.)
    part = golden_copy(tmp_path, time_entries((T + 9, 2), (T + 5, 1), (T + 30, 7)))
    path = part / f"{seg(0)}.timeindex"
    r = run("dump", str(path))
    assert r.code == 0, r
    assert r.err == (
        f"Found timestamp mismatch in :{path}\n"
        "  Index timestamp: 1700000000009, log timestamp: 1700000000010\n"
        f"Found out of order timestamp in :{path}\n"
        "  Index timestamp: 1700000000005, Previously indexed timestamp: 1700000000009\n"
        "The following indexed offsets are not found in the log.\n"
        "Indexed offset: 7, found log offset: -1\n"
    )


# --------------------------------------------------------------------------- dump: the legacy batch line (§15.3, §16.4)


V1_MESSAGE = bytes.fromhex(  # §16.4: v1, offset 5, CreateTime 1700000000000, key "k", value "hello", CRC 2854184825
    "0000000000000005 0000001c aa1f6779 01 00 0000018bcfe56800 00000001 6b 00000005 68656c6c6f".replace(" ", "")
)
V0_MESSAGE = bytes.fromhex(  # §16.4: v0, offset 6, null key, value "hello"; CRC 0x87a77ab2 = 2275900082
    "0000000000000006 00000013 87a77ab2 00 00 ffffffff 00000005 68656c6c6f".replace(" ", "")
)


def test_dump_legacy_batch_lines_isvalid(run, tmp_path: Path) -> None:
    """§15.3: legacy ``isvalid`` is the outer CRC-32 check; a bad CRC prints false and the walk goes on."""
    bad_v1 = V1_MESSAGE[:-1] + b"O"  # "hellO": the stored CRC no longer matches
    log = tmp_path / f"{seg(0)}.log"
    log.write_bytes(V1_MESSAGE + V0_MESSAGE + bad_v1)
    r = run("dump", str(log))
    assert r.lines == [
        f"Dumping {log}",
        "Log starting offset: 0",
        "offset: 5 position: 0 CreateTime: 1700000000000 size: 40 magic: 1 compresscodec: none crc: 2854184825 isvalid: true",
        "offset: 6 position: 40 NoTimestampType: -1 size: 31 magic: 0 compresscodec: none crc: 2275900082 isvalid: true",
        "offset: 5 position: 71 CreateTime: 1700000000000 size: 40 magic: 1 compresscodec: none crc: 2854184825 isvalid: false",
    ]
    # deep: the record line of an uncompressed legacy entry carries the entry's own CRC and validity (§15.3)
    r = run("dump", "--deep-iteration", str(log))
    records = [line for line in r.lines if line.startswith("| ")]
    assert records == [
        "| offset: 5 CreateTime: 1700000000000 keySize: 1 valueSize: 5 isValid: true crc: 2854184825}",
        "| offset: 6 NoTimestampType: -1 keySize: -1 valueSize: 5 isValid: true crc: 2275900082}",
        "| offset: 5 CreateTime: 1700000000000 keySize: 1 valueSize: 5 isValid: false crc: 2854184825}",
    ]


# --------------------------------------------------------------------------- §3 the walk's size boundaries


def v0_minimum(offset: int) -> bytes:
    """The smallest legal entry (§3: a v0 message is 14 bytes + 12 = 26 on disk): size 14, null
    key, null value; CRC-32 (zlib) over magic..value."""
    body = bytes.fromhex("00" "00" "ffffffff" "ffffffff")  # magic 0, attributes 0, key -1, value -1
    return struct.pack(">qiI", offset, 14, zlib.crc32(body)) + body


def walk_source(tmp_path: Path, data: bytes, source: str):
    if source == "memory":
        return SegmentWalker(data)
    path = tmp_path / f"{seg(0)}.log"
    path.write_bytes(data)
    return SegmentWalker(str(path))


@pytest.mark.parametrize("source", ["memory", "file"])
def test_walk_takes_an_entry_of_exactly_the_minimum_size(tmp_path: Path, impl: str, source: str) -> None:
    """§3 step 3: only ``size < 14`` is an error; size 14 is a v0 message."""
    data = v0_minimum(0) + v0_minimum(1)
    with walk_source(tmp_path, data, source) as walker:
        got = [(b.position, b.size, b.offset, b.magic, b.crc == b.computed_crc) for b, _ in walker]
    assert got == [(0, 26, 0, 0, True), (26, 26, 1, 0, True)]
    assert (walker.stop, walker.position, walker.error) == (WalkStop.END, 52, None)
    # one less: "Found record size 13 smaller than minimum record overhead (14)", at that entry
    short = bytearray(data)
    short[26 + 8 : 26 + 12] = struct.pack(">i", 13)
    with walk_source(tmp_path, bytes(short), source) as walker:
        assert [b.position for b, _ in walker] == [0]
    assert walker.stop is WalkStop.ERROR and walker.error.position == 26
    assert "Found record size 13 smaller than minimum record overhead (14)" in walker.error.message


@pytest.mark.parametrize("source", ["memory", "file"])
@pytest.mark.parametrize("tail, stop", [(17, WalkStop.TAIL), (18, WalkStop.ERROR)])
def test_walk_never_parses_a_tail_of_17_bytes(tmp_path: Path, impl: str, source: str, tail: int, stop: WalkStop) -> None:
    """§3 step 1: stop when ``position >= end - 17``; 17 zero bytes are trailing bytes, 18 are an
    entry whose size field (0) is below the minimum."""
    data = SIX + bytes(tail)
    with walk_source(tmp_path, data, source) as walker:
        assert len(list(walker)) == 6
    assert (walker.stop, walker.position, walker.trailing_bytes) == (stop, 600, tail)
    assert (walker.error is None) == (stop is WalkStop.TAIL)


@pytest.mark.parametrize("source", ["memory", "file"])
@pytest.mark.parametrize("missing, stop", [(0, WalkStop.END), (1, WalkStop.TAIL)])
def test_walk_takes_an_entry_that_ends_exactly_at_the_end(tmp_path: Path, impl: str, source: str, missing: int, stop: WalkStop) -> None:
    """§3 step 4: an entry fits when ``position <= end - 12 - size``; one byte short it is a partial tail."""
    data = SIX[: len(SIX) - missing]
    with walk_source(tmp_path, data, source) as walker:
        assert len(list(walker)) == 6 - missing
    assert (walker.stop, walker.position) == (stop, 600 - 100 * missing)


# --------------------------------------------------------------------------- §12.1 a refused final time entry


def test_truncate_when_recovery_refuses_the_final_time_entry(tmp_path: Path) -> None:
    """50 batches of 3 records (offsets 1000-1149, timestamps rising) give offset and time entries
    at the default interval; a last batch whose offsets go back to 1000-1002 with the highest
    timestamp needs no offset entry (its position is < 4096 bytes past the last one) but at the
    end of recover() ``timeIndex.maybeAppend(maxTs, 1002, skipFullCheck)`` throws
    InvalidOffsetException (1002 < the last entry's offset, §8.3); §12.1: "If recovery of a
    segment throws InvalidOffsetException ..., that segment is truncated to its base offset".
    (Found while writing this module: plan_truncate raised IndexAppendError, exit 2; fixed in
    ceea65e.)"""
    part = tmp_path / "t-0"
    part.mkdir()
    batches = [encode_batch([RecordSpec(BASE + 3 * k + j, T + 3 * k + j, b"k", bytes(40)) for j in range(3)])
               for k in range(50)]
    back = encode_batch([RecordSpec(BASE + j, T + 10_000 + j, b"k", bytes(40)) for j in range(3)])
    log = b"".join(batches) + back
    (part / f"{seg(BASE)}.log").write_bytes(log)
    plan = plan_truncate(str(part))
    (cut,) = plan.cuts
    assert cut.kept == () and cut.removed[0].start == 0 and cut.removed[-1].end == len(log)
    assert plan.new_log_end == BASE


# --------------------------------------------------------------------------- verify's boundaries


def test_verify_txnindex_entry_ending_exactly_at_the_segment_base(tmp_path: Path, impl: str) -> None:
    """§9: the load-time check wants ``lastOffset >= baseOffset``: an ABORT marker that is the
    first batch of a segment (its transaction began in the segment before) is indexed there with
    lastOffset = the base, and is fine; one below the base is not."""
    part = tmp_path / "t-0"
    part.mkdir()
    log = txn_log()  # producer 7: data 0-2, ABORT 3; producer 8: data 4-5, ABORT 6
    first, second = log[: _abort_start(log)], log[_abort_start(log) :]
    (part / f"{seg(0)}.log").write_bytes(first)
    (part / f"{seg(0)}.index").write_bytes(b"")
    (part / f"{seg(3)}.log").write_bytes(second)
    (part / f"{seg(3)}.index").write_bytes(b"")
    # lastStableOffset 4: the first offset after the marker, no other transaction open (§9)
    (part / f"{seg(3)}.txnindex").write_bytes(encode_txn_index([AbortedTxn(0, 7, 0, 3, 4), AbortedTxn(0, 8, 4, 6, 7)]))
    assert findings(part) == []
    (part / f"{seg(3)}.txnindex").write_bytes(encode_txn_index([AbortedTxn(0, 7, 0, 2, 3), AbortedTxn(0, 8, 4, 6, 7)]))
    assert [(f.kind, f.position) for f in findings(part)] == [("txnindex_below_base", 0)]


def _abort_start(log: bytes) -> int:
    """Position of producer 7's ABORT marker (offset 3) in txn_log()."""
    return next(b.position for b, _ in SegmentWalker(log) if b.offset == 3)


def six_partition(tmp_path: Path, extra: bytes = b"", index: bytes = b"") -> Path:
    """t-0 holding SIX (batches at 0, 100, ..., 500; last offsets 1001, 1003, ..., 1011) + ``extra``."""
    part = tmp_path / "t-0"
    part.mkdir(exist_ok=True)
    (part / f"{seg(BASE)}.log").write_bytes(SIX + extra)
    (part / f"{seg(BASE)}.index").write_bytes(index)
    return part


def index_findings(part: Path) -> list[tuple]:
    return [(f.kind, f.position, f.expected, f.found) for f in findings(part) if f.file.endswith(".index")]


def test_verify_index_entry_with_an_equal_offset_is_not_monotonic(tmp_path: Path, impl: str) -> None:
    """§8.1: entries are strictly increasing in offset; the same entry twice breaks it."""
    part = six_partition(tmp_path, index=struct.pack(">iiii", 3, 100, 3, 100))
    assert index_findings(part) == [("index_not_monotonic", 8, "> 1003", 1003)]
    (part / f"{seg(BASE)}.index").write_bytes(struct.pack(">iiii", 3, 100, 5, 200))
    assert index_findings(part) == []


def test_verify_index_entry_at_exactly_the_end_of_the_valid_batches(tmp_path: Path, impl: str) -> None:
    """An entry must point at a batch start before the end of the last valid batch: one pointing
    exactly there (600, where 30 bytes of a partial batch follow) is past the end."""
    part = six_partition(tmp_path, extra=b"\x01" * 30, index=struct.pack(">ii", 11, 600))
    assert index_findings(part) == [("index_entry_past_end", 0, "< 600", 600)]
    (part / f"{seg(BASE)}.index").write_bytes(struct.pack(">ii", 11, 500))
    assert index_findings(part) == []


@pytest.mark.parametrize("tail, kind", [(17, "trailing_bytes"), (18, "partial_batch")])
def test_verify_tail_of_17_bytes_is_trailing_bytes(tmp_path: Path, impl: str, tail: int, kind: str) -> None:
    """§3/§17 A.1: a tail of <= 17 bytes is never parsed (trailing bytes); 18 bytes are a header
    whose size (0x01010101) runs past the end (§17 A.2, a partial batch)."""
    part = six_partition(tmp_path, extra=b"\x01" * tail)
    got = [(f.kind, f.position, f.length) for f in findings(part)]
    assert got == [(kind, 600, tail)]


def test_verify_time_index_entry_with_an_equal_timestamp_is_not_monotonic(tmp_path: Path, impl: str) -> None:
    """§8.1: time entries are strictly increasing in timestamp (maybeAppend skips an equal one).
    Batch 2 of SIX ends at offset 1005 with max timestamp T+23."""
    part = six_partition(tmp_path)
    timeindex = part / f"{seg(BASE)}.timeindex"
    timeindex.write_bytes(struct.pack(">qiqi", T + 23, 5, T + 23, 5))
    got = [(f.kind, f.position) for f in findings(part) if f.file.endswith(".timeindex")]
    assert got == [("timeindex_not_monotonic", 12)]
    timeindex.write_bytes(struct.pack(">qiqi", T + 23, 5, T + 53, 11))
    assert findings(part) == []


def log_findings(tmp_path: Path, data: bytes, base: int = 0) -> list[tuple]:
    part = tmp_path / "t-0"
    part.mkdir(parents=True, exist_ok=True)
    (part / f"{seg(base)}.log").write_bytes(data)
    (part / f"{seg(base)}.index").write_bytes(b"")
    return [(f.kind, f.position, f.expected, f.found) for f in findings(part)]


def three(first: int) -> bytes:
    return encode_batch([RecordSpec(first + i, T + i, b"k", b"v") for i in range(3)])


def test_verify_a_batch_starting_at_the_previous_last_offset(tmp_path: Path, impl: str) -> None:
    """Offsets must rise: a batch whose first offset equals the previous batch's last (2) is
    reported at its own position; one starting right after (3) is fine."""
    first = three(0)
    assert log_findings(tmp_path, first + three(2)) == [("offset_not_monotonic", len(first), "> 2", 2)]
    assert log_findings(tmp_path, first + three(3)) == []


@pytest.mark.parametrize("deep", [False, True], ids=["shallow", "deep"])
@pytest.mark.parametrize("above, kinds", [(0, []), (1, ["offset_overflow"])])
def test_verify_offset_at_exactly_int32_max_above_the_base(tmp_path: Path, impl: str, above: int, kinds: list, deep: bool) -> None:
    """§3: ``0 <= offset - baseOffset <= 2147483647``; one more overflows the segment (§12.5).
    (Shallow, a healthy batch takes the scan's fast path; deep, every batch gets the full checks.)"""
    last = BASE + INT32_MAX + above
    batch = encode_batch([RecordSpec(last - 1, T, b"k", b"v"), RecordSpec(last, T + 1, b"k", b"v")])
    part = tmp_path / "t-0"
    part.mkdir()
    (part / f"{seg(BASE)}.log").write_bytes(batch)
    (part / f"{seg(BASE)}.index").write_bytes(b"")
    found = [f.kind for f in verify_paths([str(part)], VerifyOptions(deep=deep)) if isinstance(f, Finding)]
    assert found == kinds


INT32_MAX = 2**31 - 1


def test_verify_a_wrapper_whose_offset_is_the_segment_base(tmp_path: Path, impl: str) -> None:
    """§5.2: a v0/v1 wrapper's entry offset is its last inner offset; a one-message gzip wrapper
    at the segment's base offset is not below it (one below is)."""
    from kafkatool.record.compression import Codec
    from kafkatool.record.legacy import encode_legacy

    wrapper = encode_legacy([RecordSpec(BASE, T, b"k", b"v")], magic=1, codec=Codec.GZIP)
    assert struct.unpack_from(">qb", wrapper, 0)[0] == BASE and wrapper[17] & 0x07 == Codec.GZIP
    assert log_findings(tmp_path, wrapper, base=BASE) == []
    assert [k for k, *_ in log_findings(tmp_path / "below", wrapper, base=BASE + 1)] == ["offset_below_base"]


# --------------------------------------------------------------------------- truncate's cut position


@pytest.mark.parametrize("tail", [1, 17, 18])
def test_truncate_cuts_a_tail_of_any_length(tmp_path: Path, impl: str, tail: int) -> None:
    """§17 A.1/A.3: recovery truncates a short tail (1-17 bytes, never parsed) and a zero-filled
    one longer than 17 (size 0) alike: the kept bytes end exactly at the last batch."""
    part = six_partition(tmp_path, extra=bytes(tail))
    plan = plan_truncate(str(part))
    (cut,) = plan.cuts
    assert cut.kept == ((0, 600),)
    assert [(r.start, r.end) for r in cut.removed] == [(600, 600 + tail)]
    assert plan.new_log_end == BASE + 12


def test_truncate_keeps_a_last_offset_exactly_int32_max_above_the_base(tmp_path: Path, impl: str) -> None:
    """§3/§12.2 ensureOffsetInRange: ``lastOffset - base <= 2147483647`` is in range, nothing to cut."""
    part = tmp_path / "t-0"
    part.mkdir()
    last = BASE + INT32_MAX
    log = three(BASE) + encode_batch([RecordSpec(last - 1, T, b"k", b"v"), RecordSpec(last, T + 1, b"k", b"v")])
    (part / f"{seg(BASE)}.log").write_bytes(log)
    plan = plan_truncate(str(part))
    assert plan.cuts == () and plan.new_log_end is None
    assert not getattr(plan, "refusals", ()) and not plan.needs_changes
    # one more does not fit (§12.5: recovery would split the segment): not planned as fine
    (part / f"{seg(BASE)}.log").write_bytes(log[: len(three(BASE))] + encode_batch(
        [RecordSpec(last, T, b"k", b"v"), RecordSpec(last + 1, T + 1, b"k", b"v")]))
    plan = plan_truncate(str(part))
    assert getattr(plan, "refusals", ()) or plan.cuts


# --------------------------------------------------------------------------- the index builder's offset range


def test_index_entries_at_exactly_int32_max_relative_offset(tmp_path: Path, impl: str) -> None:
    """§8.3: an offset fits the index when ``0 <= offset - base <= 2^31-1``; the entry at the
    edge is written (interval 0: the second batch is indexed), one past it is refused."""
    last = BASE + INT32_MAX
    log = three(BASE) + encode_batch([RecordSpec(last - 1, T + 5, b"k", b"v"), RecordSpec(last, T + 6, b"k", b"v")])
    path = tmp_path / f"{seg(BASE)}.log"
    path.write_bytes(log)
    builder = IndexBuilder(BASE, index_interval_bytes=0)
    walker, batches, first, last_offset, bad = walk_as_recovery(str(path), builder)
    assert (batches, bad) == (2, None)
    first_size = len(three(BASE))
    assert entries(*builder.finish()) == ([(INT32_MAX, first_size)], [(T + 6, INT32_MAX)])
    builder = IndexBuilder(BASE, index_interval_bytes=0)
    builder.add_batch(0, 100, BASE + 2, T)
    with pytest.raises(IndexAppendError):
        builder.add_batch(100, 100, BASE + INT32_MAX + 1, T + 1)


def test_an_offset_entry_repeating_the_last_offset_is_refused(tmp_path: Path, impl: str) -> None:
    """§8.3 OffsetIndex.append: the offset must be greater than the last one (InvalidOffsetException):
    at interval 0 the third batch (a copy of the second, last offset 1003 again) is refused, and
    the walk stops there with the entry of the second batch only."""
    log = SIX[:200] + SIX[100:200] + SIX[200:]
    path = tmp_path / f"{seg(BASE)}.log"
    path.write_bytes(log)
    builder = IndexBuilder(BASE, index_interval_bytes=0)
    walker, batches, first, last, bad = walk_as_recovery(str(path), builder)
    assert batches == 2 and bad is not None and bad[0] == 200
    assert "no larger than the last offset appended (1003)" in bad[1]
    assert entries(*builder.finish()) == ([(3, 100)], [(T + 13, 3)])
