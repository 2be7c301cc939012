"""Spec §16: the golden vectors give exactly the spec's bytes and kafka-dump-log lines."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kafkatool.record.control import ControlType, encode_control_key, encode_end_txn_marker
from kafkatool.record.legacy import encode_message
from kafkatool.record.v2 import RecordSpec, encode_batch

T0 = 1700000000000

# §16.1, byte for byte (header + two records).
B0_HEX = (
    "0000000000000000" "0000004a" "00000000" "02" "5ee43a09" "0000" "00000001"
    "0000018bcfe56800" "0000018bcfe56805" "ffffffffffffffff" "ffff" "ffffffff" "00000002"
    "14000000046b3104763100" "1a000a0201047632020468310278"
)
# §16.4
V1_HEX = "0000000000000005 0000001c aa1f6779 01 00 0000018bcfe56800 00000001 6b 00000005 68656c6c6f"
V0_HEX = "0000000000000006 00000013 87a77ab2 00 00 ffffffff 00000005 68656c6c6f"

GOLDEN_162 = """\
Dumping 00000000000000000000.log
Log starting offset: 0
baseOffset: 0 lastOffset: 1 count: 2 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1700000000005 size: 86 magic: 2 compresscodec: none crc: 1592015369 isvalid: true
| offset: 0 CreateTime: 1700000000000 keySize: 2 valueSize: 2 sequence: -1 headerKeys: [] key: k1 payload: v1
| offset: 1 CreateTime: 1700000000005 keySize: -1 valueSize: 2 sequence: -1 headerKeys: [h1] payload: v2
baseOffset: 2 lastOffset: 2 count: 1 baseSequence: 0 lastSequence: 0 producerId: 1000 producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: true isControl: false deleteHorizonMs: OptionalLong.empty position: 86 CreateTime: 1700000000010 size: 70 magic: 2 compresscodec: none crc: 2408550096 isvalid: true
| offset: 2 CreateTime: 1700000000010 keySize: -1 valueSize: 2 sequence: 0 headerKeys: [] payload: tx
baseOffset: 3 lastOffset: 3 count: 1 baseSequence: -1 lastSequence: -1 producerId: 1000 producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: true isControl: true deleteHorizonMs: OptionalLong.empty position: 156 CreateTime: 1700000000020 size: 78 magic: 2 compresscodec: none crc: 2627399116 isvalid: true
| offset: 3 CreateTime: 1700000000020 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] endTxnMarker: COMMIT coordinatorEpoch: 5
"""

GOLDEN_164 = """\
Dumping 00000000000000000005.log
Log starting offset: 5
offset: 5 position: 0 CreateTime: 1700000000000 size: 40 magic: 1 compresscodec: none crc: 2854184825 isvalid: true
| offset: 5 CreateTime: 1700000000000 keySize: 1 valueSize: 5 isValid: true crc: 2854184825} key: k payload: hello
offset: 6 position: 40 NoTimestampType: -1 size: 31 magic: 0 compresscodec: none crc: 2275900082 isvalid: true
| offset: 6 NoTimestampType: -1 keySize: -1 valueSize: 5 isValid: true crc: 2275900082} payload: hello
"""


def h(s: str) -> bytes:
    return bytes.fromhex(s.replace(" ", ""))


def golden_log() -> bytes:
    b0 = h(B0_HEX)
    b1 = encode_batch([RecordSpec(2, T0 + 10, None, b"tx")], producer_id=1000, producer_epoch=0,
                      base_sequence=0, is_transactional=True, partition_leader_epoch=0)
    b2 = encode_batch([RecordSpec(3, T0 + 20, encode_control_key(ControlType.COMMIT), encode_end_txn_marker(5))],
                      producer_id=1000, producer_epoch=0, is_transactional=True, is_control=True,
                      partition_leader_epoch=0)
    return b0 + b1 + b2


@pytest.fixture
def tdir(tmp_path, monkeypatch):
    d = tmp_path / "t-0"
    d.mkdir()
    monkeypatch.chdir(d)
    (d / "00000000000000000000.log").write_bytes(golden_log())
    return d


def test_encoder_reproduces_161_bytes():
    b = encode_batch([RecordSpec(0, T0, b"k1", b"v1"), RecordSpec(1, T0 + 5, None, b"v2", [("h1", b"x")])],
                     partition_leader_epoch=0)
    assert b == h(B0_HEX)
    assert len(b) == 86


def test_162_batch_sizes_and_crcs():
    log = golden_log()
    assert len(log) == 86 + 70 + 78
    # the marker record, §16.2
    assert log[156 + 61:].hex() == "2000000008000000010c00000000000500"


def test_162_print_data_log(run, tdir):
    r = run("dump", "--print-data-log", "--files", "00000000000000000000.log")
    assert r.code == 0
    assert r.out == GOLDEN_162
    assert r.err == ""


def test_162_no_flags_prints_batch_lines_only(run, tdir):
    r = run("dump", "--files", "00000000000000000000.log")
    expected = [l for l in GOLDEN_162.splitlines() if not l.startswith("|")]
    assert r.lines == expected


def test_162_deep_iteration_has_no_data(run, tdir):
    r = run("dump", "--deep-iteration", "00000000000000000000.log")
    expected = [l.split(" key: ")[0].split(" payload: ")[0] for l in GOLDEN_162.splitlines()]
    assert r.lines == expected


def test_162_skip_record_metadata(run, tdir):
    r = run("dump", "--print-data-log", "--skip-record-metadata", "00000000000000000000.log")
    records = [l for l in r.lines[2:] if not l.startswith("baseOffset:")]
    assert records == ["| key: k1 payload: v1", " payload: v2", " payload: tx", ""]


def test_163_indexes_with_interval_128(run, tdir):
    from kafkatool.segment.index import IndexBuilder
    from kafkatool.segment.walk import SegmentWalker

    builder = IndexBuilder(0, index_interval_bytes=128)
    for b, _ in SegmentWalker(golden_log()):
        builder.add_batch(b.position, b.size, b.last_offset, b.max_timestamp)
    oidx, tidx = builder.finish()
    assert oidx == h("00000003 0000009c")
    assert tidx == h("0000018bcfe56814 00000003")
    (tdir / "00000000000000000000.index").write_bytes(oidx)
    (tdir / "00000000000000000000.timeindex").write_bytes(tidx)
    r = run("dump", "--files", "00000000000000000000.index,00000000000000000000.timeindex")
    assert r.out == (
        "Dumping 00000000000000000000.index\noffset: 3 position: 156\n"
        "Dumping 00000000000000000000.timeindex\ntimestamp: 1700000000020 offset: 3\n"
    )
    assert r.err == ""
    r = run("dump", "--index-sanity-check", f"{tdir}/00000000000000000000.index")
    assert r.out == (
        f"Dumping {tdir}/00000000000000000000.index\n{tdir}/00000000000000000000.index passed sanity check.\n"
    )


def test_163_default_interval_gives_empty_index(run, tdir):
    from kafkatool.segment.index import IndexBuilder
    from kafkatool.segment.walk import SegmentWalker

    builder = IndexBuilder(0)
    for b, _ in SegmentWalker(golden_log()):
        builder.add_batch(b.position, b.size, b.last_offset, b.max_timestamp)
    oidx, tidx = builder.finish()
    assert oidx == b""
    assert tidx == h("0000018bcfe56814 00000003")
    (tdir / "00000000000000000000.index").write_bytes(oidx)
    r = run("dump", "00000000000000000000.index")
    assert r.out == "Dumping 00000000000000000000.index\n00000000000000000000.index is empty.\n"


def test_164_legacy(run, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    v1, v0 = h(V1_HEX), h(V0_HEX)
    assert encode_message(5, 1, T0, b"k", b"hello") == v1
    assert encode_message(6, 0, -1, None, b"hello") == v0
    (tmp_path / "00000000000000000005.log").write_bytes(v1 + v0)
    r = run("dump", "--print-data-log", "00000000000000000005.log")
    assert r.code == 0
    assert r.out == GOLDEN_164


def test_165_snapshot(run, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    data = h("0001 c5e8776b 00000001 00000000000003e8 0000 00000000 0000000000000002 00000000 "
             "0000018bcfe5680a 00000005 ffffffffffffffff")
    (tmp_path / "00000000000000000003.snapshot").write_bytes(data)
    r = run("dump", "00000000000000000003.snapshot")
    assert r.out.splitlines()[1] == (
        "producerId: 1000 producerEpoch: 0 coordinatorEpoch: 5 currentTxnFirstOffset: OptionalLong.empty "
        "lastTimestamp: 1700000000010 firstSequence: 0 lastSequence: 0 lastOffset: 2 offsetDelta: 0 "
        "timestamp: 1700000000010"
    )


def test_166_txnindex(run, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "00000000000000000000.txnindex").write_bytes(
        h("0000 00000000000003e8 000000000000000a 0000000000000014 000000000000000a") + b"\x00" * 10
    )
    r = run("dump", "00000000000000000000.txnindex")
    assert r.out.splitlines()[1:] == ["version: 0 producerId: 1000 firstOffset: 10 lastOffset: 20 lastStableOffset: 10"]


# ---------------------------------------------------------------- §16.10 diagnostics


def test_16_10_invalid_bytes(run, tdir):
    (tdir / "00000000000000000000.log").write_bytes(golden_log() + b"garbage!!!")
    r = run("dump", "00000000000000000000.log")
    assert r.lines[-1] == "Found 10 invalid bytes at the end of 00000000000000000000.log"
    assert r.code == 0


def test_16_10_index_mismatch(run, tdir):
    (tdir / "00000000000000000000.index").write_bytes(h("00000002 00000000"))
    r = run("dump", f"{tdir}/00000000000000000000.index")
    assert r.out == f"Dumping {tdir}/00000000000000000000.index\noffset: 2 position: 0\n"
    assert r.err == f"Mismatches in :{tdir}/00000000000000000000.index\n  Index offset: 2, log offset: 1\n"


def test_16_10_timeindex_mismatch(run, tdir):
    (tdir / "00000000000000000000.index").write_bytes(b"")
    (tdir / "00000000000000000000.timeindex").write_bytes(h("0000018bcfe5680a 00000003"))
    r = run("dump", f"{tdir}/00000000000000000000.timeindex")
    assert r.out.splitlines()[1] == "timestamp: 1700000000010 offset: 3"
    assert r.err == (
        f"Found timestamp mismatch in :{tdir}/00000000000000000000.timeindex\n"
        "  Index timestamp: 1700000000010, log timestamp: 1700000000020\n"
    )


def test_16_10_timeindex_not_found(run, tdir):
    (tdir / "00000000000000000000.index").write_bytes(b"")
    (tdir / "00000000000000000000.timeindex").write_bytes(h("0000018bcfe56800 00000000"))
    r = run("dump", "00000000000000000000.timeindex")
    assert r.err == "The following indexed offsets are not found in the log.\nIndexed offset: 0, found log offset: 1\n"


def test_16_10_non_consecutive(run, tmp_path):
    d = tmp_path / "t-0"
    d.mkdir()
    log = encode_batch([RecordSpec(0, T0, b"a", b"1"), RecordSpec(1, T0, b"b", b"2")]) + encode_batch(
        [RecordSpec(5, T0, b"c", b"3")]
    )
    (d / "00000000000000000000.log").write_bytes(log)
    r = run("dump", "--deep-iteration", str(d / "00000000000000000000.log"))
    assert r.err == f"Non-consecutive offsets in {d}/00000000000000000000.log\n  1 is followed by 5\n"


def test_16_10_deleted_is_ignored(run, tdir):
    os.rename(tdir / "00000000000000000000.log", tdir / "00000000000000000000.log.deleted")
    r = run("dump", f"{tdir}/00000000000000000000.log.deleted")
    assert r.code == 0
    assert r.out == f"Dumping {tdir}/00000000000000000000.log.deleted\n"
    assert r.err == f"Ignoring unknown file {tdir}/00000000000000000000.log.deleted\n"


def test_spec_file_agrees_with_these_vectors():
    """The vectors above were copied from the spec: check they are still there, verbatim."""
    spec = Path(__file__).resolve().parents[2] / "shared" / "spec" / "kafka-reference.md"
    if not spec.is_file():
        pytest.skip("spec not present")
    text = spec.read_text()
    for line in GOLDEN_162.splitlines()[2:] + GOLDEN_164.splitlines()[2:]:
        assert line in text, line
