"""The compiled indexing loop (``_speedups.index_v2``) against the pure-Python one.

``kafkatool reindex`` (and truncate's index rebuild) index every batch that needs nothing
more in C and hand every other batch to :class:`~kafkatool.segment.index.IndexBuilder` in
Python. Whatever the batches, their timestamps, the damage, the index interval or the index
size, both ways must build the same files byte for byte and stop at the same batch.
"""

from __future__ import annotations

import struct
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kafkatool.repair as repair_module
from kafkatool.errors import KafkaToolError
from kafkatool.record.batch import Batch
from kafkatool.record.control import ControlType, encode_end_txn_marker
from kafkatool.record.v2 import RecordSpec, encode_batch
from kafkatool.segment.index import IndexAppendError, IndexBuilder
from kafkatool.segment.walk import SegmentWalker
from test_verify import control, fix_crc

pytestmark = pytest.mark.skipif(repair_module._index_v2 is None, reason="the compiled extension is not built")

BASE = 1000


def _batch(first: int, n: int, ts: int, *, step: int = 1, size: int = 10, **kw) -> bytes:
    recs = [RecordSpec(first + i, ts + i * step, b"k%d" % i, bytes(size)) for i in range(n)]
    return encode_batch(recs, **kw)


def build(log: bytes, interval: int, max_index_size: int, compiled: bool, take_txn: bool = True, window: int = 1 << 20):
    """Index ``log`` as plan_reindex does, compiled or not; return everything the builder knows."""
    builder = IndexBuilder(BASE, index_interval_bytes=interval, max_index_size=max_index_size)
    st = builder.scan_state(take_transactional=take_txn) if compiled else None
    scan = None if st is None else (lambda b, r, lim, fp, bt: repair_module._index_v2(b, r, lim, fp, bt, st))
    with tempfile.NamedTemporaryFile(suffix=".log") as f:
        f.write(log)
        f.flush()
        return _build(f.name, builder, st, scan, window)


def _build(path: str, builder: IndexBuilder, st, scan, window: int):
    batches, first, last, error = 0, None, None, None
    # one window holds a whole test segment: the compiled loop sees every batch but the first
    # (the walk decodes that one while it fills the window); a small one: batches across
    # window edges, which the walk decodes in Python, the compiled loop called many times
    with SegmentWalker(path, window=window, window_scan=scan) as walker:
        assert st is None or walker.window_scan is scan
        for batch, _data in walker:
            if st is not None:
                builder.load_scan_state(st)
                batches, first, last = st.batches, st.first, st.last
            if batch.crc != batch.computed_crc:
                error = ("crc", batch.position)
                break
            try:
                builder.add_batch(batch.position, batch.size, batch.offset + batch.last_offset_delta, batch.max_timestamp)
            except IndexAppendError as e:
                error = (e.message, batch.position)
                break
            batches += 1
            first = batch.offset if first is None else first
            last = batch.offset + batch.last_offset_delta
            if st is not None:
                builder.store_scan_state(st)
                st.batches, st.first, st.last = batches, first, last
        else:
            if st is not None:
                builder.load_scan_state(st)
                batches, first, last = st.batches, st.first, st.last
    try:
        index, timeindex = builder.finish()
    except IndexAppendError as e:  # the final time entry can be refused too (an offset gone backwards)
        index, timeindex = bytes(builder._offset), ("finish", e.message)
    return index, timeindex, builder.valid_bytes, batches, first, last, error


def both(log: bytes, interval: int = 4096, max_index_size: int = 10 << 20, take_txn: bool = True, window: int = 1 << 20):
    a = build(log, interval, max_index_size, True, take_txn, window)
    b = build(log, interval, max_index_size, False, take_txn, window)
    assert a == b
    return a


BATCH = st.tuples(
    st.integers(1, 5),  # records
    st.integers(-3, 40),  # timestamp step from the previous batch (negative: out of order)
    st.integers(0, 300),  # value size
    st.integers(0, 3),  # 0 CreateTime, 1 LogAppendTime, 2 transactional, 3 offset gap
)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    specs=st.lists(BATCH, min_size=0, max_size=40),
    interval=st.sampled_from([0, 1, 100, 500, 4096]),
    max_entries=st.sampled_from([2, 3, 5, 1000]),
    flip=st.none() | st.tuples(st.integers(0, 1 << 16), st.integers(1, 255)),
    take_txn=st.booleans(),
    window=st.sampled_from([4096, 1 << 20]),
)
def test_any_segment_indexes_the_same_both_ways(specs, interval, max_entries, flip, take_txn, window):
    out, offset, ts = [], BASE, 1_700_000_000_000
    for n, step, size, kind in specs:
        ts += step
        if kind == 3:
            offset += 7
        kw = {}
        if kind == 1:
            kw["log_append_time"] = ts + 5
        elif kind == 2:
            kw.update(producer_id=4, producer_epoch=0, base_sequence=0, is_transactional=True)
        out.append(_batch(offset, n, ts, size=size, **kw))
        offset += n
    log = bytearray(b"".join(out))
    if flip is not None and log:
        log[flip[0] % len(log)] ^= flip[1]
    # max_index_size in bytes: room for max_entries time entries (12 bytes) and some more offset entries
    both(bytes(log), interval, max_entries * 12, take_txn, window)


def test_a_clean_segment_of_many_windows(tmp_path):
    log = b"".join(_batch(BASE + 3 * k, 3, 1_000 + k, size=200) for k in range(3000))
    index, timeindex, valid, batches, first, last, error = both(log, interval=4096, window=4096)
    assert (valid, batches, first, last, error) == (len(log), 3000, BASE, BASE + 8999, None)
    assert len(index) > 8 * 100 and len(timeindex) > 12 * 100


@pytest.mark.parametrize("interval", [1000, 10**9], ids=["indexing", "not-indexing"])
@pytest.mark.parametrize(
    "bad",
    ["crc", "below-base", "past-int32", "past-int32-low-ts", "offset-back", "offset-back-low-ts", "int64-overflow",
     "ts-back-after-entries", "legacy"],
)
def test_each_handover_stops_or_goes_on_like_python(bad, interval):
    batches = [_batch(BASE + 3 * k, 3, 10_000 + 10 * k, size=400) for k in range(40)]
    k = 25
    if bad == "crc":
        b = bytearray(batches[k]); b[-1] ^= 1; batches[k] = bytes(b)
    elif bad == "below-base":
        batches[k] = struct.pack(">q", BASE - 10) + batches[k][8:]
    elif bad == "past-int32":
        batches[k] = struct.pack(">q", BASE + 2**31) + batches[k][8:]
    elif bad == "past-int32-low-ts":  # the max timestamp (and its offset) stay where they were
        batches[k] = _batch(BASE + 2**31, 3, 5, size=400)
    elif bad == "offset-back":
        batches[k] = struct.pack(">q", BASE) + batches[k][8:]  # not covered by the CRC
    elif bad == "offset-back-low-ts":
        batches[k] = _batch(BASE, 3, 5, size=400)
    elif bad == "int64-overflow":
        batches[k] = struct.pack(">q", 2**63 - 1) + batches[k][8:]
    elif bad == "ts-back-after-entries":
        batches[k] = fix_crc(batches[k][:35] + struct.pack(">q", 5) + batches[k][43:])
    elif bad == "legacy":
        from test_verify import v1

        batches[k] = v1(BASE + 3 * k)
    both(b"".join(batches), interval=interval)


def test_transactional_batches_go_to_python_when_transactions_are_tracked():
    log = b"".join([
        _batch(BASE, 2, 100),
        _batch(BASE + 2, 2, 101, producer_id=4, producer_epoch=0, base_sequence=0, is_transactional=True),
        control(BASE + 4, ControlType.ABORT, encode_end_txn_marker(0), producer_id=4, producer_epoch=0, is_transactional=True),
        _batch(BASE + 5, 2, 102),
    ])
    assert both(log, interval=0, take_txn=False) == both(log, interval=0, take_txn=True)


def test_plan_reindex_is_the_same_both_ways(tmp_path, monkeypatch):
    d = tmp_path / "t-0"
    d.mkdir()
    log = d / f"{BASE:020d}.log"
    log.write_bytes(b"".join(_batch(BASE + 2 * k, 2, 50 + (k % 7), size=300) for k in range(500)))
    compiled = repair_module.plan_reindex(str(log), 1024)
    monkeypatch.setattr(repair_module, "_index_v2", None)
    python = repair_module.plan_reindex(str(log), 1024)
    assert compiled == python
    assert compiled.batches == 500 and compiled.changes[0].new_entries > 100


def test_state_errors_are_type_errors_not_crashes():
    with pytest.raises(TypeError):
        repair_module._index_v2(b"", 0, 0, 0, Batch, [])
    builder = IndexBuilder(BASE)
    st = builder.scan_state(take_transactional=True)
    st.offset_buf = b"not a bytearray"
    with pytest.raises(TypeError):
        repair_module._index_v2(b"", 0, 0, 0, Batch, st)
    with pytest.raises((ValueError, KafkaToolError)):
        repair_module._index_v2(b"abc", 2, 1, 0, Batch, builder.scan_state(take_transactional=True))


@pytest.mark.parametrize("ts_step", [0, 1], ids=["offset-index-fills-first", "time-index-fills-first"])
def test_a_full_index_is_refused_like_python(ts_step):
    """A small ``segment.index.bytes``: whichever index fills first, the batch it refuses is
    handed to Python, which raises Kafka's error there (equal timestamps add no time entry,
    so the offset index fills first)."""
    log = b"".join(_batch(BASE + 3 * k, 3, 500 + ts_step * k, size=100) for k in range(30))
    *_rest, error = both(log, interval=0, max_index_size=96)
    assert error is not None and "full" in error[0]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(1, 60),
    flips=st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(1, 255)), max_size=3),
    keep=st.booleans(),
    interval=st.sampled_from([0, 300, 4096]),
    offset_jump=st.none() | st.integers(0, 59),
)
def test_truncate_scan_is_the_same_both_ways(n, flips, keep, interval, offset_jump):
    """truncate's segment scan (cut, kept ranges, gaps, dropped batches, rebuilt indexes) with
    the compiled loop and without, over damage anywhere, including offsets an index refuses."""
    import kafkatool.truncate as truncate_module

    batches = [_batch(BASE + 3 * k, 3, 7_000 + (k * 37) % 50, size=30 + 7 * (k % 5)) for k in range(n)]
    if offset_jump is not None and offset_jump < n:  # offsets going backwards: refused by the offset index
        k = offset_jump
        batches[k] = struct.pack(">q", BASE) + batches[k][8:]
    log = bytearray(b"".join(batches))
    for at, mask in flips:
        log[at % len(log)] ^= mask
    with tempfile.TemporaryDirectory() as tmp:
        path = f"{tmp}/{BASE:020d}.log"
        with open(path, "wb") as f:
            f.write(log)
        compiled = truncate_module._scan_segment(path, keep, interval)
        saved = repair_module._index_v2
        repair_module._index_v2 = None
        try:
            python = truncate_module._scan_segment(path, keep, interval)
        finally:
            repair_module._index_v2 = saved
    assert compiled == python
