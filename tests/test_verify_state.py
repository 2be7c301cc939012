"""Issue 10's verify model: finding kinds as an enum, errors that carry their kind as data, and
the compiled scan's state as an object read and written by attribute (``ScanState``).

Batches come from kafka-python's builder (an independent encoder); expected offsets and counts
are derived by hand from what was built.
"""

from __future__ import annotations

import gzip
import json

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

import kafkatool.verify.workers as verify_workers
from kafkatool.errors import CompressionError, InvalidRecordError, KafkaToolError
from kafkatool.record.batch import Batch
from kafkatool.record.compression import Codec, decompress
from kafkatool.verify import KINDS, FindingKind, VerifyOptions, verify_paths
from kafkatool.verify.batches import PartitionFacts, ScanState, Scanner, SegmentFacts
from kafkatool.verify.deep import error_kind
from kafkatool.verify.workers import walk_segment

LOG = "00000000000000000100.log"


def kafka_python_batch(base_offset: int, n: int, *, epoch: int = 5) -> bytes:
    """A v2 batch of ``n`` uncompressed records from ``base_offset``, built by kafka-python."""
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i in range(n):
        b.append(i, timestamp=1_700_000_000_000 + i, key=b"k%d" % i, value=b"v%d" % i, headers=[])
    raw = bytearray(b.build())
    raw[0:8] = base_offset.to_bytes(8, "big")  # baseOffset and partitionLeaderEpoch are outside the CRC
    raw[12:16] = epoch.to_bytes(4, "big")
    return bytes(raw)


# --------------------------------------------------------------------------- finding kinds


def test_a_finding_kind_is_its_name_in_text_and_json() -> None:
    k = FindingKind.DECOMPRESSED_TOO_LARGE
    assert k == "decompressed_too_large" and str(k) == "decompressed_too_large" and f"{k:<24}|" == "decompressed_too_large  |"
    assert json.dumps({"kind": k}) == '{"kind": "decompressed_too_large"}'
    assert FindingKind("crc_mismatch") is FindingKind.CRC_MISMATCH
    # the table scripts match on: every kind name is its member's name, lower-cased
    assert all(KINDS[k.value] == k.description and k.name.lower() == k.value for k in FindingKind)


# --------------------------------------------------------------------------- errors carry their kind


def test_an_error_carries_its_kind_through_at() -> None:
    assert InvalidRecordError("x").kind == "invalid_record"
    assert CompressionError("x").kind == "decompression_failed"
    assert KafkaToolError("x").kind is None
    e = InvalidRecordError("bad", position=3, kind="record_count_mismatch")
    located = e.at("/data/0.log", 100)
    assert (located.kind, located.position, located.path) == ("record_count_mismatch", 103, "/data/0.log")
    assert type(located) is InvalidRecordError


def test_a_decompression_bomb_is_classified_by_kind_not_text() -> None:
    bomb = gzip.compress(bytes(1 << 20))
    with pytest.raises(CompressionError) as info:
        decompress(Codec.GZIP, bomb, max_output=4096)
    assert info.value.kind == "decompressed_too_large"
    assert error_kind(info.value) is FindingKind.DECOMPRESSED_TOO_LARGE
    # the message is for people: a kind set at the raise wins over what the text says
    assert error_kind(CompressionError("Decompressed size exceeds the limit", kind="decompression_failed")) is FindingKind.DECOMPRESSION_FAILED
    assert error_kind(InvalidRecordError("anything", kind="invalid_wrapper")) is FindingKind.INVALID_WRAPPER
    assert error_kind(InvalidRecordError("anything", kind="no_such_kind")) is FindingKind.INVALID_RECORD


# --------------------------------------------------------------------------- the compiled scan's state


@pytest.mark.skipif(verify_workers.scan_v2 is None, reason="the compiled extension is not built")
def test_the_compiled_scan_reads_and_writes_the_state_by_attribute() -> None:
    data = kafka_python_batch(100, 3) + kafka_python_batch(103, 2, epoch=6)
    st = ScanState(PartitionFacts(), SegmentFacts(100, len(data)), 100)
    batches, nxt, _status = verify_workers.scan_v2(data, 0, len(data), 0, Batch, st)
    assert batches == [] and nxt == len(data)
    # two healthy batches: offsets 100..102 and 103..104
    assert (st.batches, st.good, st.prev_last, st.first_offset, st.first_last) == (2, 2, 104, 100, 102)
    assert st.max_ts == 1_700_000_000_002 and st.epochs == {5: 100, 6: 103}  # the first batch: records 0..2
    with pytest.raises(AttributeError):  # the old positional list is refused
        verify_workers.scan_v2(data, 0, len(data), 0, Batch, [None, 100, 0, -1, None, None, {}, None, 0, {}, None, 0, {}, {}, 0])


@pytest.mark.parametrize("compiled", [True, False])
def test_both_scans_leave_the_same_state(tmp_path, monkeypatch, compiled: bool) -> None:
    if not compiled:
        monkeypatch.setattr(verify_workers, "scan_v2", None)
    elif verify_workers.scan_v2 is None:
        pytest.skip("the compiled extension is not built")
    data = kafka_python_batch(100, 3) + kafka_python_batch(103, 4, epoch=7) + kafka_python_batch(107, 1, epoch=7)
    path = tmp_path / LOG
    path.write_bytes(data)
    part, facts = PartitionFacts(), SegmentFacts(100, len(data))
    scan = Scanner(str(path), 100, VerifyOptions(), part, facts, [])
    walk_segment(scan, str(path), 0, len(data))
    st = scan.state
    assert (st.batches, st.good, st.max_ts) == (3, 3, 1_700_000_000_003)
    assert (part.last_offset, facts.first_offset, facts.first_last, facts.last_offset) == (107, 100, 102, 107)
    assert part.epochs == {5: 100, 7: 103}
    summary = [i for i in verify_paths([str(path)], VerifyOptions()) if not hasattr(i, "message")]
    assert summary[0].batches == 3
