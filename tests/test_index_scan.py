"""The compiled indexing loop's state by name (kafkatool.segment.index_scan.IndexScanState).

``_speedups.index_v2`` reads and writes an :class:`IndexScanState` by attribute: the walk must
stop at the batch Python has to handle, count what it indexed under the fields' names, and
build the index bytes :class:`IndexBuilder` builds batch by batch in Python (the reference,
which follows ``LogSegment.recover``).
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


def _reference(n: int, interval: int) -> IndexBuilder:
    """IndexBuilder fed batch by batch in Python, as recovery does: the reference."""
    builder = IndexBuilder(BASE, index_interval_bytes=interval)
    size = len(_segment(1))
    for k in range(n):
        builder.add_batch(k * size, size, BASE + 4 * k + 3, 1_000 + 3 * k + 3)
    return builder


@pytest.mark.parametrize("bad", [None, 0, 7, 29])
def test_the_compiled_walk_hands_the_bad_batch_back_with_its_state_by_name(bad):
    log = _segment(30, bad=bad)
    st = IndexBuilder(BASE, index_interval_bytes=1000).scan_state(take_transactional=True)
    assert isinstance(st, IndexScanState)
    batches, next_pos, _status = repair_module._index_v2(log, 0, len(log), 0, Batch, st)
    good = 30 if bad is None else bad
    size = len(_segment(1))
    assert (st.valid, st.batches) == (good * size, good)
    assert (st.first, st.last) == ((None, None) if good == 0 else (BASE, BASE + 4 * good - 1))
    if bad is None:
        assert batches == [] and next_pos == len(log)
    else:  # the batch Python must handle, and the walk goes on after it
        assert [b.position for b in batches] == [bad * size] and next_pos == (bad + 1) * size
    reference = _reference(good, 1000)
    assert bytes(st.offset_buf) == reference.finish()[0]


def test_the_state_object_builds_what_index_builder_builds():
    log = _segment(40)
    builder = IndexBuilder(BASE, index_interval_bytes=1500)
    st = builder.scan_state(take_transactional=True)
    batches, next_pos, _status = repair_module._index_v2(log, 0, len(log), 0, Batch, st)
    assert batches == [] and next_pos == len(log)
    assert bytes(st.offset_buf) == _reference(40, 1500).finish()[0]
    assert st.first == BASE and st.last == BASE + 4 * 40 - 1 and st.batches == 40


def test_a_wrong_state_is_a_type_error():
    st = IndexBuilder(BASE).scan_state(take_transactional=True)
    st.offset_buf = b"not a bytearray"
    with pytest.raises(TypeError):
        repair_module._index_v2(b"", 0, 0, 0, Batch, st)
    with pytest.raises(TypeError):
        repair_module._index_v2(b"", 0, 0, 0, Batch, object())
    with pytest.raises(TypeError):  # the slot list of before is gone
        repair_module._index_v2(b"", 0, 0, 0, Batch, [0] * 20)
