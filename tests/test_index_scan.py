"""The compiled indexing loop's state by name (kafkatool.segment.index_scan.IndexScanState).

``_speedups.index_v2`` reads and writes an :class:`IndexScanState` by attribute; the same walk
with the state in the older slot list must give the same batches back, the same index bytes
and the same counters, and both must equal what :class:`IndexBuilder` builds batch by batch in
Python (the reference, which follows ``LogSegment.recover``).
"""

from __future__ import annotations

import pytest

import kafkatool.repair as repair_module
from kafkatool.record.batch import Batch
from kafkatool.record.v2 import RecordSpec, encode_batch
from kafkatool.segment.index import IndexBuilder
from kafkatool.segment.index_scan import IndexScanState

pytestmark = pytest.mark.skipif(repair_module._index_v2 is None, reason="the compiled extension is not built")

BASE = 500


def _segment(n: int, *, bad: int | None = None) -> bytes:
    out = bytearray()
    for k in range(n):
        first = BASE + 4 * k
        b = bytearray(encode_batch([RecordSpec(first + i, 1_000 + 3 * k + i, b"k", bytes(200)) for i in range(4)]))
        if k == bad:
            b[-1] ^= 1  # a CRC mismatch: handed to Python
        out += b
    return bytes(out)


def _as_object(slots: list) -> IndexScanState:
    return IndexScanState(**dict(zip(IndexScanState.__slots__, slots)))


def _fields(st) -> dict:
    if isinstance(st, list):
        st = _as_object(st)
    return {n: (bytes(v) if isinstance(v, bytearray) else v) for n in IndexScanState.__slots__ for v in [getattr(st, n)]}


@pytest.mark.parametrize("bad", [None, 0, 7, 29])
def test_the_state_object_and_the_slot_list_walk_alike(bad):
    log = _segment(30, bad=bad)
    results = []
    for make in (list, _as_object):
        st = make(IndexBuilder(BASE, index_interval_bytes=1000).scan_state(take_transactional=True))
        got = repair_module._index_v2(log, 0, len(log), 0, Batch, st)
        results.append((got, _fields(st)))
    (list_got, list_state), (obj_got, obj_state) = results
    assert obj_got == list_got
    assert obj_state == list_state
    stop = len(log) if bad is None else sum(len(_segment(1)) for _ in range(bad))
    assert obj_state["valid"] == stop and obj_state["batches"] == (30 if bad is None else bad)


def test_the_state_object_builds_what_index_builder_builds():
    log = _segment(40)
    builder = IndexBuilder(BASE, index_interval_bytes=1500)
    st = _as_object(builder.scan_state(take_transactional=True))
    batches, next_pos, _status = repair_module._index_v2(log, 0, len(log), 0, Batch, st)
    assert batches == [] and next_pos == len(log)
    reference = IndexBuilder(BASE, index_interval_bytes=1500)
    size = len(_segment(1))
    for k in range(40):  # one add_batch per batch, as recovery does
        reference.add_batch(k * size, size, BASE + 4 * k + 3, 1_000 + 3 * k + 3)
    assert bytes(st.offset_buf) == reference.finish()[0]
    assert st.first == BASE and st.last == BASE + 4 * 40 - 1 and st.batches == 40


def test_a_wrong_state_is_a_type_error():
    st = _as_object(IndexBuilder(BASE).scan_state(take_transactional=True))
    st.offset_buf = b"not a bytearray"
    with pytest.raises(TypeError):
        repair_module._index_v2(b"", 0, 0, 0, Batch, st)
    with pytest.raises(TypeError):
        repair_module._index_v2(b"", 0, 0, 0, Batch, object())
