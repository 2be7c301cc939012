"""The compiled shallow scan (``_speedups.scan_v2``) against the pure-Python one.

``kafkatool verify`` checks healthy v2 batches in C and hands every other batch to
Python. Whatever the damage, both paths must give the same findings, in the same order,
with the same positions, and the same summaries: these tests run verify twice on the same
files, once with the compiled scan switched off, and compare everything.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kafkatool.verify as verify_module
import kafkatool.verify.workers as verify_workers
from kafkatool.record.control import ControlType, encode_end_txn_marker
from kafkatool.record.v2 import RecordSpec, encode_batch
from kafkatool.segment.checkpoint import encode_leader_epoch_checkpoint
from kafkatool.segment.txnindex import AbortedTxn, encode_txn_index
from kafkatool.verify import VerifyOptions, verify_paths
from test_verify import control, fix_crc, index_files, v1, v2

pytestmark = pytest.mark.skipif(verify_workers.scan_v2 is None, reason="the compiled extension is not built")

LOG = "00000000000000000100.log"


def _partition() -> list[bytes]:
    """A partition at base 100 with every kind of batch the scan tells apart."""
    out = [v2(100, partition_leader_epoch=0), v2(103, partition_leader_epoch=0)]
    out.append(encode_batch([RecordSpec(106, 1_000_106, b"k", b"v")], producer_id=7, producer_epoch=0, base_sequence=0, partition_leader_epoch=1))
    out.append(encode_batch([RecordSpec(107, 1_000_107, b"t", b"x")], producer_id=9, producer_epoch=0, base_sequence=0, is_transactional=True, partition_leader_epoch=1))
    out.append(control(108, ControlType.ABORT, encode_end_txn_marker(0), producer_id=9, producer_epoch=0, is_transactional=True, partition_leader_epoch=1))
    out += [v2(109 + 3 * k, partition_leader_epoch=2) for k in range(6)]
    out.append(v2(127, n=1, log_append_time=2_000_000, partition_leader_epoch=2))
    out.append(encode_batch([], base_offset=128, last_offset_delta=1, delete_horizon_ms=3_000_000, partition_leader_epoch=2))
    out.append(v2(130, partition_leader_epoch=3))
    return out


BATCHES = _partition()
SEGMENT = b"".join(BATCHES)
STARTS = [sum(len(b) for b in BATCHES[:i]) for i in range(len(BATCHES))]
INDEX, TIMEINDEX = index_files(BATCHES, base=100)
TXNINDEX = encode_txn_index([AbortedTxn(0, 9, 107, 108, 107)])
EPOCHS = encode_leader_epoch_checkpoint([(0, 100), (1, 106), (2, 109), (3, 130)])


@pytest.fixture(autouse=True, params=["default", "small-buffer", "tiny-buffer"])
def scan_buffer(request, monkeypatch):
    """Every test runs with the compiled file scan's real buffer, and with buffers so small
    that its refills, its pauses (a budget of one byte: a return to Python after every read)
    and its hand-over of entries larger than the buffer to the generic walk all happen."""
    if request.param == "small-buffer":
        monkeypatch.setattr(verify_workers, "SCAN_BUFFER", 1000)
        monkeypatch.setattr(verify_workers, "SCAN_BUDGET", 1)
    elif request.param == "tiny-buffer":
        monkeypatch.setattr(verify_workers, "SCAN_BUFFER", 90)
    return request.param


def _run(paths: list[str], implementation: str, monkeypatch, **opts) -> list:
    with monkeypatch.context() as m:
        if implementation == "python":
            m.setattr(verify_workers, "scan_v2", None)
        return list(verify_paths(paths, VerifyOptions(**opts)))


def _both(paths: list[str], monkeypatch, **opts) -> tuple[list, list]:
    return _run(paths, "compiled", monkeypatch, **opts), _run(paths, "python", monkeypatch, **opts)


def _write(root: Path, log: bytes, index: bytes = INDEX, timeindex: bytes = TIMEINDEX) -> Path:
    d = root / "t-0"
    d.mkdir(exist_ok=True)
    (d / LOG).write_bytes(log)
    (d / LOG.replace(".log", ".index")).write_bytes(index)
    (d / LOG.replace(".log", ".timeindex")).write_bytes(timeindex)
    (d / LOG.replace(".log", ".txnindex")).write_bytes(TXNINDEX)
    (d / "leader-epoch-checkpoint").write_text(EPOCHS)
    return d


def test_the_clean_partition_is_clean_both_ways(tmp_path, monkeypatch):
    d = _write(tmp_path, SEGMENT)
    compiled, python = _both([str(d)], monkeypatch)
    assert compiled == python
    assert [i for i in compiled if isinstance(i, verify_module.Finding) and i.kind not in verify_module.INFO_KINDS] == []


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """One directory for every hypothesis example (a module-scoped fixture is allowed with @given)."""
    return tmp_path_factory.mktemp("compiled")


MUTATION = st.tuples(st.integers(0, len(SEGMENT) - 1), st.integers(1, 255))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    mutations=st.lists(MUTATION, min_size=1, max_size=3),
    recrc=st.booleans(),
    index_flip=st.none() | st.tuples(st.integers(0, len(INDEX) + len(TIMEINDEX) - 1), st.integers(1, 255)),
    deep=st.booleans(),
)
def test_any_damage_gives_the_same_findings_both_ways(work, monkeypatch, mutations, recrc, index_flip, deep):
    """Flip bytes (and with ``recrc`` make the damaged batches' CRCs valid again, so that
    only the header checks can tell), maybe in the indexes too: same output both ways."""
    log = bytearray(SEGMENT)
    for position, mask in mutations:
        log[position] ^= mask
    if recrc:
        for i, start in enumerate(STARTS):
            end = start + len(BATCHES[i])
            if any(start <= p < end for p, _ in mutations) and end <= len(log):
                log[start:end] = fix_crc(bytes(log[start:end]))
    index, timeindex = bytearray(INDEX), bytearray(TIMEINDEX)
    if index_flip is not None:
        at, mask = index_flip
        if at < len(index):
            index[at] ^= mask
        else:
            timeindex[at - len(index)] ^= mask
    d = _write(work, bytes(log), bytes(index), bytes(timeindex))
    compiled, python = _both([str(d)], monkeypatch, deep=deep)
    assert compiled == python


def test_offsets_going_backwards_then_forwards_both_ways(tmp_path, monkeypatch):
    """An offset anomaly checked in Python moves the index cursor; the compiled scan after it
    must still find the index entries behind the cursor."""
    batches = list(BATCHES)
    batches[6] = fix_crc(struct.pack(">q", 100) + batches[6][8:])  # batch 6 claims offset 100 again
    d = _write(tmp_path, b"".join(batches))
    compiled, python = _both([str(d)], monkeypatch)
    assert compiled == python
    assert any(getattr(i, "kind", None) == "offset_not_monotonic" for i in compiled)


@pytest.mark.parametrize("damage_at", [None, 1 << 20, (1 << 20) + 50, 3 << 19])
def test_a_segment_of_many_windows_both_ways(tmp_path, monkeypatch, damage_at):
    """Batches across several 1 MiB read windows, a bad byte at or just after a window edge."""
    batches = [v2(100 + 3 * k, partition_leader_epoch=k // 7000) for k in range(27_000)]
    log = bytearray(b"".join(batches))
    if damage_at is not None:
        log[damage_at] ^= 0x5A
    index, timeindex = index_files(batches[:2000], base=100)  # entries for the first part only
    d = _write(tmp_path, bytes(log), index, timeindex)
    compiled, python = _both([str(d)], monkeypatch)
    assert compiled == python
    summary = [i for i in compiled if isinstance(i, verify_module.FileSummary) and i.kind == "log"][0]
    assert summary.findings == (0 if damage_at is None else 1)


def test_legacy_batches_between_v2_batches_both_ways(tmp_path, monkeypatch):
    log = v2(100) + v2(103) + v1(106) + v1(107) + v2(108) + v2(111)
    d = tmp_path / "t-0"
    d.mkdir()
    (d / LOG).write_bytes(log)
    compiled, python = _both([str(d)], monkeypatch)
    assert compiled == python


def _last_offset(k: int) -> int:
    return struct.unpack_from(">q", BATCHES[k])[0] + struct.unpack_from(">i", BATCHES[k], 23)[0]


@pytest.mark.parametrize("k", [1, 5, 9])
@pytest.mark.parametrize(
    "new_base",
    [
        lambda k: _last_offset(k - 1),  # overlaps the previous batch by one offset
        lambda k: _last_offset(k - 1) - 1,
        lambda k: _last_offset(k - 1) + 2,  # a gap: legal
        lambda k: 99,  # below the segment's base offset
        lambda k: 100 + 2**31 - 1,  # past the int32 relative-offset range once lastOffsetDelta is added
        lambda k: 2**63 - 1,  # baseOffset + lastOffsetDelta overflows int64
    ],
    ids=["overlap-1", "overlap-2", "gap", "below-base", "past-int32", "int64-overflow"],
)
def test_edge_base_offsets_both_ways(tmp_path, monkeypatch, k, new_base):
    """Base offsets at the edges of the offset checks, the CRC valid (it does not cover them)."""
    batches = list(BATCHES)
    batches[k] = struct.pack(">q", new_base(k)) + batches[k][8:]
    d = _write(tmp_path, b"".join(batches))
    compiled, python = _both([str(d)], monkeypatch)
    assert compiled == python


@pytest.mark.parametrize(
    "field, fmt, value",
    [
        (23, ">i", -1),  # lastOffsetDelta
        (27, ">q", -2),  # baseTimestamp
        (35, ">q", -2),  # maxTimestamp
        (35, ">q", TS_BELOW := 5),  # maxTimestamp below baseTimestamp
        (43, ">q", -2),  # producerId
        (51, ">h", -2),  # producerEpoch
        (53, ">i", -2),  # baseSequence
        (57, ">i", -1),  # recordsCount
        (57, ">i", 4),  # recordsCount above lastOffsetDelta + 1
        (21, ">h", 0x0005),  # codec 5
        (21, ">h", 0x0010),  # transactional
        (21, ">h", 0x0008),  # LogAppendTime: maxTimestamp below base allowed
        (12, ">i", 7),  # a new partition leader epoch
        (16, ">b", 3),  # magic 3
    ],
)
def test_each_header_field_both_ways(tmp_path, monkeypatch, field, fmt, value):
    """One header field of batch 6 set to an edge value, the CRC fixed where it covers the field."""
    batches = list(BATCHES)
    b = bytearray(batches[6])
    struct.pack_into(fmt, b, field, value)
    batches[6] = fix_crc(bytes(b)) if field >= 21 else bytes(b)
    d = _write(tmp_path, b"".join(batches))
    compiled, python = _both([str(d)], monkeypatch)
    assert compiled == python


def test_scan_fd_stops_where_a_shrunken_file_ends(tmp_path):
    """A file shorter than the ``end`` it was asked for (a live broker truncated it) reads
    as if it ended there: the scan stops at the last complete batch, nothing is invented."""
    from kafkatool.record._speedups import scan_fd
    from kafkatool.record.batch import Batch
    from kafkatool.verify.batches import PartitionFacts, ScanState, SegmentFacts

    path = tmp_path / LOG
    whole = b"".join(BATCHES[:3])
    path.write_bytes(whole + BATCHES[3][:30])
    st = ScanState(PartitionFacts(), SegmentFacts(100, len(whole)), 100)
    buf = bytearray(4096)
    with open(path, "rb") as f:
        batch, data, nxt, status, buf_pos, buf_len = scan_fd(f.fileno(), 0, 1 << 20, Batch, st, buf, 0, 0, 0)
    assert batch is None and data is None
    assert nxt == len(whole)  # the partial batch after it is left for the generic walk
    assert st.batches == 3  # three batches checked
    assert (buf_pos, buf_len) == (len(whole), 30)  # what is held for the next call: the partial batch
