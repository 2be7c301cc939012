"""kafkatool.record.columns: v2 records straight into Arrow-layout buffers, compiled and pure.

Every test runs on both implementations of ``RecordColumns.add_v2``: the C one
(``_speedups.decode_columns_v2``) and the pure-Python one (``KAFKATOOL_PURE=1``, or no extension).
Expected values come from elsewhere: kafkatool's record decoder (``v2.decode_records`` and
``iter_batch_records``, the reader the rest of kafkatool uses), kafka-python's
``DefaultRecordBatch`` (an independent reader), Java itself for the UTF-8 replacement, and
bitmaps written out by hand.
"""

from __future__ import annotations

import contextlib
import shutil
import struct
import subprocess
import time
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkatool.errors import InvalidRecordError
from kafkatool.record import columns as columns_module
from kafkatool.record import v2
from kafkatool.record.batch import Record
from kafkatool.record.columns import RecordColumns, java_utf8
from kafkatool.record.encode import v2_batch
from kafkatool.record.v2 import encode_record

_COMPILED = columns_module._fast_columns

IMPLS = [
    pytest.param("compiled", marks=pytest.mark.skipif(_COMPILED is None, reason="the compiled extension is not built")),
    "pure",
]

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@contextlib.contextmanager
def implementation(name: str):
    """Run add_v2 through the C function or the pure-Python twin."""
    saved = columns_module._fast_columns
    columns_module._fast_columns = _COMPILED if name == "compiled" else None
    try:
        yield
    finally:
        columns_module._fast_columns = saved


def wrap64(v: int) -> int:
    return ((v + 2**63) % 2**64) - 2**63


def wrap32(v: int) -> int:
    return ((v + 2**31) % 2**32) - 2**31


def snapshot(cols: RecordColumns):
    return (tuple(bytes(b) for b in cols._buffers()), cols._counts(), cols.header_null_count)


def check_layout(cols: RecordColumns) -> None:
    """The Arrow invariants: lengths, offsets starting at 0 and ending at the data, bits past n zero."""
    n = cols.n
    assert len(cols.offsets) == len(cols.timestamps) == 8 * n
    assert len(cols.sequences) == 4 * n
    hn = len(cols.header_keys)
    for col, rows in ((cols.keys, n), (cols.values, n), (cols.header_keys, hn), (cols.header_values, hn)):
        offs = struct.unpack(f"<{rows + 1}i", col.offsets)
        assert offs[0] == 0 and offs[-1] == len(col.data) and list(offs) == sorted(offs)
        assert len(col.validity) == (rows + 7) // 8
        if rows & 7:
            assert col.validity[-1] >> (rows & 7) == 0, "bits past the last row must be zero"
        assert col.null_count == rows - sum(bin(b).count("1") for b in col.validity)
    assert cols.header_keys.null_count == 0
    hoffs = struct.unpack(f"<{n + 1}i", cols.header_offsets)
    assert hoffs[0] == 0 and hoffs[-1] == hn and list(hoffs) == sorted(hoffs)
    assert len(cols.header_validity) == (n + 7) // 8
    if n & 7:
        assert cols.header_validity[-1] >> (n & 7) == 0
    assert cols.header_null_count == n - sum(bin(b).count("1") for b in cols.header_validity)
    for hk in cols.header_keys.to_list():
        hk.decode("utf-8")  # strict: the string column is valid UTF-8


def to_arrow(cols: RecordColumns):
    """The columns as pyarrow arrays, the way the Spark rows are built, fully validated."""
    pa = pytest.importorskip("pyarrow")
    n = cols.n

    def binary(col, typ, rows):
        return pa.Array.from_buffers(typ, rows, [pa.py_buffer(bytes(col.validity)), pa.py_buffer(bytes(col.offsets)),
                                                 pa.py_buffer(bytes(col.data))], null_count=col.null_count)

    hn = len(cols.header_keys)
    struct_arr = pa.StructArray.from_arrays(
        [binary(cols.header_keys, pa.string(), hn), binary(cols.header_values, pa.binary(), hn)], names=["key", "value"]
    )
    headers = pa.Array.from_buffers(
        pa.list_(struct_arr.type), n, [pa.py_buffer(bytes(cols.header_validity)), pa.py_buffer(bytes(cols.header_offsets))],
        null_count=cols.header_null_count, children=[struct_arr],
    )
    arrays = {
        "offset": pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(bytes(cols.offsets))]),
        "timestamp": pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(bytes(cols.timestamps))]),
        "sequence": pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(bytes(cols.sequences))]),
        "key": binary(cols.keys, pa.binary(), n),
        "value": binary(cols.values, pa.binary(), n),
        "headers": headers,
    }
    for a in arrays.values():
        a.validate(full=True)
    return arrays


# --------------------------------------------------------------------------- the reference


def reference_rows(records: bytes, count: int, base_offset: int, base_ts: int, bseq: int, lat: int | None,
                   include_headers: bool = True):
    """What kafkatool's record reader gives for these records, framed as a batch: Record tuples
    from iter_batch_records (LogAppendTime and sequences included), as rows."""
    if count == 0:
        return []
    attrs = 0x08 if lat is not None else 0
    batch_bytes = v2_batch(records, base_offset=base_offset, last_offset_delta=0, base_timestamp=base_ts,
                           max_timestamp=lat if lat is not None else -1, attributes=attrs, producer_id=-1,
                           producer_epoch=-1, base_sequence=bseq, partition_leader_epoch=-1, count=count)
    batch = v2.decode_header(batch_bytes)
    rows = []
    for r in v2.iter_batch_records(batch, batch_bytes):
        if include_headers and r.headers:
            hdrs = tuple((java_utf8(k).decode("utf-8"), v) for k, v in r.headers)
        else:
            hdrs = None
        rows.append((wrap64(r.offset), wrap64(r.timestamp), r.key, r.value, hdrs, wrap32(r.sequence)))
    return rows


def outcome(fn, *args):
    try:
        return ("ok", fn(*args))
    except InvalidRecordError as e:
        return ("invalid", type(e), e.message, e.position, e.kind, e.__suppress_context__)


def reference_decode(records, count):
    """The pure-Python reference decoder on the whole records section (count 0: nothing read)."""
    if count == 0:
        return []
    return v2.decode_records(records, 0, len(records), count)


# --------------------------------------------------------------------------- strategies

int32 = st.one_of(st.integers(-70, 70), st.integers(-(2**31), 2**31 - 1))
int64 = st.one_of(st.integers(-70, 70), st.integers(-(2**31), 2**31), st.integers(-(2**63), 2**63 - 1))
blob = st.one_of(st.binary(max_size=12), st.binary(min_size=120, max_size=400),  # 1-, 2- and 3-byte lengths
                st.integers(16384, 17000).map(lambda n: bytes([n % 251]) * n))
header = st.tuples(st.one_of(st.binary(max_size=8), st.text(max_size=4).map(str.encode)), st.none() | st.binary(max_size=8))
headers = st.one_of(st.just([]), st.lists(header, max_size=3), st.lists(header, min_size=60, max_size=70))
record = st.tuples(int32, int64, st.none() | blob, st.none() | blob, headers, st.integers(0, 255))
base_sequence = st.one_of(st.just(-1), st.integers(0, 5), st.integers(2**31 - 6, 2**31 - 1), int32)
log_append_time = st.none() | int64


def encode(recs) -> bytes:
    return b"".join(encode_record(od, tsd, k, v, h, a) for (od, tsd, k, v, h, a) in recs)


def prefilled(include_headers: bool, k: int) -> RecordColumns:
    """Columns already holding ``k`` rows (so new rows start mid-byte in the bitmaps)."""
    cols = RecordColumns(include_headers=include_headers)
    if k:
        recs = [(j, 0, None if j % 3 == 0 else b"k", b"v" if j % 2 else None, [(b"h", None)] if j % 4 == 1 else [], 0)
                for j in range(k)]
        cols.add_v2(encode(recs), k, 0, 0, -1, None)
    return cols


# --------------------------------------------------------------------------- equal to the reference


@pytest.mark.parametrize("impl", IMPLS)
@SETTINGS
@given(recs=st.lists(record, max_size=12), base_offset=int64, base_ts=int64, bseq=base_sequence, lat=log_append_time,
       include_headers=st.booleans(), before=st.integers(0, 10), chunks=st.integers(1, 3))
def test_rows_equal_reference_decoder(impl, recs, base_offset, base_ts, bseq, lat, include_headers, before, chunks):
    with implementation(impl):
        cols = prefilled(include_headers, before)
        expected = cols.rows()
        step = max(1, -(-len(recs) // chunks))
        for j in range(0, max(len(recs), 1), step):  # several add_v2 calls, one batch each
            part = recs[j : j + step]
            body = encode(part)
            cols.add_v2(body, len(part), base_offset, base_ts, bseq, lat)
            expected += reference_rows(body, len(part), base_offset, base_ts, bseq, lat, include_headers)
        assert cols.rows() == expected
        check_layout(cols)


@pytest.mark.parametrize("impl", IMPLS)
def test_rows_as_arrow(impl):
    """The buffers make valid Arrow arrays holding exactly the records (values written out)."""
    body = encode([
        (0, 0, b"k0", b"v0", [(b"a", b"1"), (b"b", None)], 0),
        (1, 7, None, None, [], 0),
        (2, -5, b"", b"", [(b"\xff", b"x")], 0),
    ])
    with implementation(impl):
        cols = RecordColumns()
        cols.add_v2(body, 3, 1000, 1_700_000_000_000, 41, None)
        arrays = to_arrow(cols)
    assert arrays["offset"].to_pylist() == [1000, 1001, 1002]
    assert arrays["timestamp"].to_pylist() == [1_700_000_000_000, 1_700_000_000_007, 1_699_999_999_995]
    assert arrays["sequence"].to_pylist() == [41, 42, 43]
    assert arrays["key"].to_pylist() == [b"k0", None, b""]
    assert arrays["value"].to_pylist() == [b"v0", None, b""]
    assert arrays["headers"].to_pylist() == [
        [{"key": "a", "value": b"1"}, {"key": "b", "value": None}],
        None,  # no headers: a NULL list, as Spark's Kafka source gives
        [{"key": "\ufffd", "value": b"x"}],
    ]


@pytest.mark.parametrize("impl", IMPLS)
def test_log_append_time_sequences_and_wrapping(impl):
    """Hand-derived: LogAppendTime replaces every timestamp; sequences wrap past Int.MAX to 0 as
    DefaultRecordBatch.incrementSequence; -1 base sequence stays -1; int64 sums wrap as Java longs."""
    body = encode([(0, 5, b"a", b"b", [], 0), (1, -9, b"a", b"b", [], 0), (2, 0, b"a", b"b", [], 0),
                   (3, 0, b"a", b"b", [], 0)])
    with implementation(impl):
        cols = RecordColumns()
        cols.add_v2(body, 4, 10, 100, 2**31 - 2, 555)
        assert [(r[0], r[1], r[5]) for r in cols.rows()] == [(10, 555, 2**31 - 2), (11, 555, 2**31 - 1), (12, 555, 0),
                                                           (13, 555, 1)]
        cols.clear()
        cols.add_v2(body, 4, 2**63 - 2, -(2**63), -1, None)
        assert [(r[0], r[1], r[5]) for r in cols.rows()] == [(2**63 - 2, -(2**63) + 5, -1), (2**63 - 1, 2**63 - 9, -1),
                                                           (-(2**63), -(2**63), -1), (-(2**63) + 1, -(2**63), -1)]


# --------------------------------------------------------------------------- kafka-python as the oracle

try:
    import kafka.record.default_records as kp
except ImportError:  # pragma: no cover - kafka-python is a test dependency
    kp = None

kp_header = st.tuples(st.text(max_size=6), st.none() | st.binary(max_size=8))
kp_record = st.tuples(st.integers(0, 3), st.integers(-50, 50), st.none() | blob, st.none() | blob,
                      st.lists(kp_header, max_size=4))


@pytest.mark.skipif(kp is None, reason="kafka-python (the independent oracle) is not installed")
@pytest.mark.parametrize("impl", IMPLS)
@SETTINGS
@given(recs=st.lists(kp_record, min_size=1, max_size=10), base_offset=st.integers(0, 2**62),
       first_ts=st.integers(0, 2**41), bseq=st.one_of(st.just(-1), st.integers(0, 2**31 - 1), st.integers(2**31 - 8, 2**31 - 1)),
       lat=st.none() | st.integers(0, 2**41))
def test_rows_equal_kafka_python(impl, recs, base_offset, first_ts, bseq, lat):
    builder = kp.DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                           producer_id=-1 if bseq == -1 else 7, producer_epoch=-1 if bseq == -1 else 0,
                                           base_sequence=bseq, batch_size=1 << 30)
    offset = 0
    for gap, tsd, k, v, h in recs:
        builder.append(offset, first_ts + tsd, k, v, h)
        offset += gap  # equal offsets too: kafka-python writes what it is given
    buf = bytearray(builder.build())
    struct.pack_into(">q", buf, 0, base_offset)
    if lat is not None:  # LogAppendTime: the attribute bit and the batch maxTimestamp
        buf[22] |= 0x08
        struct.pack_into(">q", buf, 35, lat)
    batch = kp.DefaultRecordBatch(bytes(buf))
    expected = [
        (r.offset, r.timestamp, r.key, r.value, tuple(r.headers) or None,
         -1 if bseq == -1 else batch._increment_sequence(bseq, r.offset - base_offset))
        for r in batch
    ]
    with implementation(impl):
        cols = RecordColumns()
        cols.add_v2(memoryview(buf)[61:], batch.records_count,
                    batch.base_offset, batch.first_timestamp, batch.base_sequence,
                    batch.max_timestamp if batch.timestamp_type == 1 else None)
    assert cols.rows() == expected
    check_layout(cols)


# --------------------------------------------------------------------------- errors


def mutate(data: bytes, edits) -> bytes:
    out = bytearray(data)
    for kind, where, byte in edits:
        if not out:
            out.append(byte)
            continue
        j = where % len(out)
        if kind == 0:
            out[j] = byte
        elif kind == 1:
            del out[j:]
        elif kind == 2:
            out.insert(j, byte)
        else:
            del out[j]
    return bytes(out)


edits = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2**16), st.integers(0, 255)), min_size=1, max_size=4)


@pytest.mark.parametrize("impl", IMPLS)
@SETTINGS
@given(recs=st.lists(record, max_size=6), edit=edits, count_shift=st.sampled_from([0, 0, 0, -1, 1, 2, 2**31 - 1]),
       include_headers=st.booleans(), before=st.integers(0, 9), bseq=base_sequence)
def test_errors_equal_reference_and_columns_unchanged(impl, recs, edit, count_shift, include_headers, before, bseq):
    data = mutate(encode(recs), edit)
    count = len(recs) + count_shift if count_shift != 2**31 - 1 else count_shift
    expected = outcome(reference_decode, data, count)
    with implementation(impl):
        cols = prefilled(include_headers, before)
        before_state = snapshot(cols)
        got = outcome(cols.add_v2, data, count, 5, 6, bseq, None)
        if expected[0] == "ok":
            assert got == ("ok", None)
            assert cols.rows()[before:] == reference_rows(data, count, 5, 6, bseq, None, include_headers)
        else:
            assert got == expected, data.hex()
            assert snapshot(cols) == before_state  # atomic: nothing of the failed call stays
        check_layout(cols)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("data,count,message,position", [
    (b"", 1, "Incorrect declared batch size, premature EOF reached", 0),
    (b"\x0c\x00\x00\x00\x0c\x00\x00", 1, "Found invalid record structure", 0),  # key length 6, 2 bytes left
    (b"\x0c\x00\x00\x00\x00\x00\x00\xaa", 1, "Incorrect declared batch size, records still remaining in file", 7),
    (b"\x0c\x00\x00\x00\x00\x00\x01", 1, "Found invalid number of record headers -1", 0),
    (b"\x01", 1, "Invalid record size: expected -1 bytes in record payload, but instead the buffer has only 0 remaining bytes.", 0),
    (b"abc", -3, "Found invalid record count -3 in magic v2 batch", 0),
])
def test_error_examples(impl, data, count, message, position):
    """Hand-made bad records (the reference gives the same: checked too)."""
    with implementation(impl):
        cols = prefilled(True, 3)
        state = snapshot(cols)
        with pytest.raises(InvalidRecordError) as info:
            cols.add_v2(data, count, 0, 0, -1, None)
        assert (info.value.message, info.value.position) == (message, position)
        assert snapshot(cols) == state
    with pytest.raises(InvalidRecordError) as ref:
        reference_decode(data, count)
    assert (ref.value.message, ref.value.position, ref.value.kind) == (message, position, info.value.kind)


@pytest.mark.parametrize("impl", IMPLS)
def test_error_in_a_later_record_undoes_the_whole_call(impl):
    """Nine good records (a bitmap byte and a bit), then a bad one: nothing of the nine stays."""
    good = encode([(j, j, b"key", None, [(b"h", b"v")], 0) for j in range(9)])
    bad = good + b"\x0c\x00\x00\x00\x00\x00\x01"  # header count -1
    with implementation(impl):
        cols = prefilled(True, 5)
        state = snapshot(cols)
        with pytest.raises(InvalidRecordError, match="Found invalid number of record headers -1") as info:
            cols.add_v2(bad, 10, 0, 0, 0, None)
        assert info.value.position == len(good)
        assert snapshot(cols) == state
        cols.add_v2(good, 9, 0, 0, 0, None)  # and the columns still work
        assert cols.n == 14
        check_layout(cols)


@pytest.mark.parametrize("impl", IMPLS)
def test_hostile_count_fails_fast_without_allocating_for_it(impl):
    small = encode([(0, 0, b"k", b"v", [], 0)])
    big = encode([(j, 0, b"k" * 50, b"v" * 50, [], 0) for j in range(20000)])  # ~2 MB of good records
    with implementation(impl):
        truncated = b"\x0c\x00"
        for data in (truncated, small, big):
            cols = RecordColumns()
            tracemalloc.start()
            t0 = time.perf_counter()
            try:
                got = outcome(cols.add_v2, data, 2**31 - 1, 0, 0, -1, None)
                elapsed = time.perf_counter() - t0
                _cur, peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
            assert got == outcome(reference_decode, data, 2**31 - 1)
            if data is not truncated:
                assert got[2:5] == ("Incorrect declared batch size, premature EOF reached", len(data), "record_count_mismatch")
            assert cols.n == 0 and len(cols.offsets) == 0
            # bounded by the input, not by the count (2**31 rows would be > 16 GiB of offsets alone)
            assert peak < 40 * len(data) + 2_000_000, peak
            assert elapsed < 10


@pytest.mark.parametrize("impl", IMPLS)
def test_exported_buffer_refused_unchanged(impl):
    """A bytearray Arrow still views cannot grow: BufferError before anything changes; after
    clear() the columns have new buffers and the viewed ones keep their bytes."""
    body = encode([(0, 0, b"k", b"v", [(b"h", b"x")], 0)])
    with implementation(impl):
        cols = prefilled(True, 3)
        for j in range(len(cols._buffers())):
            state = snapshot(cols)
            view = memoryview(cols._buffers()[j])
            with pytest.raises(BufferError, match="exported"):
                cols.add_v2(body, 1, 0, 0, -1, None)
            assert snapshot(cols) == state, j
            view.release()
        old = bytes(cols.keys.data)
        view = memoryview(cols.keys.data)
        cols.clear()
        cols.add_v2(body, 1, 0, 0, -1, None)
        assert bytes(view) == old and cols.rows()[0][2] == b"k"


# --------------------------------------------------------------------------- headers and UTF-8


# (input, what Java's new String(bytes, UTF_8).getBytes(UTF_8) gives; checked with JDK 17)
R = "\ufffd".encode()
JAVA_UTF8 = [
    (b"plain", b"plain"),
    ("é€😀".encode(), "é€😀".encode()),
    (b"\xff", R),
    (b"a\xc3", b"a" + R),  # truncated at the end
    (b"\xc3(", R + b"("),
    (b"\xe2\x82", R),  # a truncated 3-byte sequence at the end: one replacement
    (b"\xe2\x82(", R + b"("),
    (b"\xed\xa0\x80", R),  # an encoded surrogate: one replacement in Java (three in Python)
    (b"\xed\xa0A", R + b"A"),  # Java: one (Python: two)
    (b"\xc0\xaf", R + R),  # overlong
    (b"\xf0\x80\x80\x80", R + R + R + R),
    (b"\xf4\x90\x80\x80", R + R + R + R),  # past U+10FFFF
    (b"\xf0\x9f\x98", R),
    (b"\xf0\x9f(", R + b"("),
]


@pytest.mark.parametrize("data,expected", JAVA_UTF8)
def test_java_utf8_examples(data, expected):
    assert java_utf8(data) == expected


@pytest.mark.parametrize("impl", IMPLS)
def test_invalid_utf8_header_key_becomes_replacement_character(impl):
    keys = [d for d, _e in JAVA_UTF8]
    body = encode([(0, 0, None, None, [(k, b"v") for k in keys], 0)])
    with implementation(impl):
        cols = RecordColumns()
        cols.add_v2(body, 1, 0, 0, -1, None)
    assert cols.header_keys.to_list() == [e for _d, e in JAVA_UTF8]
    assert [k for k, _v in cols.rows()[0][4]][2] == "\ufffd"
    check_layout(cols)


@pytest.mark.skipif(shutil.which("java") is None, reason="java is not on PATH (the UTF-8 oracle)")
def test_java_utf8_equals_java(tmp_path):
    """The port against the JVM itself, on the examples and on random byte strings."""
    import random

    rng = random.Random(12)
    alphabet = [0x41, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE1, 0xED, 0xEF, 0xF0,
                0xF4, 0xF5, 0xF7, 0xF8, 0xFF]
    cases = [d for d, _e in JAVA_UTF8]
    cases += [bytes(rng.choice(alphabet) if rng.random() < 0.8 else rng.randrange(256) for _ in range(rng.randint(1, 7)))
              for _ in range(5000)]
    src = tmp_path / "Utf8.java"
    src.write_text(
        "import java.io.*; import java.nio.charset.StandardCharsets;\n"
        "public class Utf8 { public static void main(String[] a) throws Exception {\n"
        " BufferedReader r = new BufferedReader(new InputStreamReader(System.in)); StringBuilder o = new StringBuilder();\n"
        " for (String l; (l = r.readLine()) != null;) { byte[] b = new byte[l.length() / 2];\n"
        "  for (int i = 0; i < b.length; i++) b[i] = (byte) Integer.parseInt(l.substring(2 * i, 2 * i + 2), 16);\n"
        "  for (byte x : new String(b, StandardCharsets.UTF_8).getBytes(StandardCharsets.UTF_8)) o.append(String.format(\"%02x\", x & 0xff));\n"
        "  o.append('\\n'); }\n System.out.print(o); } }\n"
    )
    run = subprocess.run(["java", str(src)], input="\n".join(c.hex() for c in cases) + "\n", capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    java = run.stdout.split("\n")
    for c, j in zip(cases, java):
        assert java_utf8(c).hex() == j, c.hex()
    # and the C path gives the same as the port, key by key
    if _COMPILED is not None:
        body = encode([(0, 0, None, None, [(c, None) for c in cases[i : i + 500]], 0) for i in range(0, len(cases), 500)])
        with implementation("compiled"):
            cols = RecordColumns()
            cols.add_v2(body, -(-len(cases) // 500), 0, 0, -1, None)
        assert [k.hex() for k in cols.header_keys.to_list()] == java[: len(cases)]


@pytest.mark.parametrize("impl", IMPLS)
def test_include_headers_false(impl):
    """Every headers slot NULL, no header bytes kept; the headers are still checked."""
    body = encode([(0, 0, b"k", b"v", [(b"h", b"x"), (b"\xff", None)], 0), (1, 0, b"k", b"v", [], 0)])
    with implementation(impl):
        cols = RecordColumns(include_headers=False)
        cols.add_v2(body, 2, 0, 0, -1, None)
        assert [r[4] for r in cols.rows()] == [None, None]
        assert cols.header_null_count == 2 and len(cols.header_keys) == 0 and cols.header_keys.data == b""
        bad = encode([(0, 0, b"k", b"v", [(b"h", b"x")], 0)])
        bad = bad[:-2] + b"\x63" + bad[-1:]  # the header value length made 0x63 (-50)... then too short
        expected = outcome(reference_decode, bad, 1)
        assert expected[0] == "invalid"
        state = snapshot(cols)
        assert outcome(cols.add_v2, bad, 1, 0, 0, -1, None) == expected
        assert snapshot(cols) == state
        check_layout(cols)


# --------------------------------------------------------------------------- bitmaps


def bits_to_bytes(bits) -> bytes:
    out = bytearray((len(bits) + 7) // 8)
    for i, b in enumerate(bits):
        if b:
            out[i >> 3] |= 1 << (i & 7)
    return bytes(out)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("sizes", [[7], [8], [9], [7, 1], [7, 2], [8, 1], [1, 7, 1], [3, 3, 3], [1] * 9, [4, 5]])
def test_bitmaps_at_7_8_9_rows(impl, sizes):
    """Keys null every third row, values every other, headers on every fourth, over several
    add_v2 calls: bitmaps written out by hand, padding zero."""
    n_total = sum(sizes)
    keys = [None if j % 3 == 0 else b"k%d" % j for j in range(n_total)]
    values = [None if j % 2 else b"v" for j in range(n_total)]
    hdrs = [[(b"h", None if j % 8 == 1 else b"x")] if j % 4 == 1 else [] for j in range(n_total)]
    with implementation(impl):
        cols = RecordColumns()
        start = 0
        for size in sizes:
            body = encode([(j, 0, keys[start + j], values[start + j], hdrs[start + j], 0) for j in range(size)])
            cols.add_v2(body, size, start, 0, -1, None)
            start += size
    assert bytes(cols.keys.validity) == bits_to_bytes([k is not None for k in keys])
    assert bytes(cols.values.validity) == bits_to_bytes([v is not None for v in values])
    assert bytes(cols.header_validity) == bits_to_bytes([bool(h) for h in hdrs])
    hv = [v for h in hdrs for _k, v in h]
    assert bytes(cols.header_values.validity) == bits_to_bytes([v is not None for v in hv])
    assert (cols.keys.null_count, cols.values.null_count, cols.header_null_count) == (
        keys.count(None), values.count(None), sum(1 for h in hdrs if not h))
    if n_total == 9:  # by hand: rows 0,3,6 null -> 0b10110110, then row 8 set -> 0b1
        assert bytes(cols.keys.validity) == b"\xb6\x01"
        assert bytes(cols.values.validity) == b"\x55\x01"
        assert bytes(cols.header_validity) == b"\x22\x00"
    check_layout(cols)
    to_arrow(cols)


# --------------------------------------------------------------------------- add_records, clear


@pytest.mark.parametrize("impl", IMPLS)
def test_add_records_and_add_v2_mix(impl):
    legacy = [Record(5, 100, b"k", None, (), -1, 0, 123, True, 1), Record(6, -1, None, b"v", (), -1, 0, 1, True, 0)]
    body = encode([(0, 3, b"a", b"b", [(b"h", None)], 0)])
    with implementation(impl):
        cols = RecordColumns()
        cols.add_records(legacy)
        cols.add_v2(body, 1, 7, 10, 3, None)
        cols.add_records([Record(8, 1, b"x", b"y", ((b"\xffk", b"z"),), 9)])
    assert cols.rows() == [(5, 100, b"k", None, None, -1), (6, -1, None, b"v", None, -1),
                           (7, 13, b"a", b"b", (("h", None),), 3), (8, 1, b"x", b"y", (("\ufffdk", b"z"),), 9)]
    check_layout(cols)
    state = snapshot(cols)
    with pytest.raises(OverflowError):
        cols.add_records([Record(9, 0, None, None), Record(2**63, 0, None, None)])
    assert snapshot(cols) == state


def test_clear_rebinds_fresh_buffers():
    cols = prefilled(True, 9)
    old = cols._buffers()
    snap = tuple(bytes(b) for b in old)
    cols.clear()
    assert cols.n == 0 and cols.rows() == [] and cols._counts() == (0, 0, 0, 0, 0, 0)
    assert all(a is not b for a, b in zip(old, cols._buffers()))
    cols.add_v2(encode([(0, 0, b"k", b"v", [], 0)]), 1, 0, 0, -1, None)
    assert tuple(bytes(b) for b in old) == snap
    check_layout(cols)


@pytest.mark.skipif(_COMPILED is None, reason="the compiled extension is not built")
def test_compiled_refuses_inconsistent_buffers():
    cols = prefilled(True, 3)
    cols.keys.data += b"x"  # the offsets no longer end at the data
    with pytest.raises(ValueError, match="do not match the counts"):
        cols.add_v2(encode([(0, 0, b"k", b"v", [], 0)]), 1, 0, 0, -1, None)


def test_pure_append_failing_midway_restores(monkeypatch):
    """The pure path decodes first and appends after; a failure while appending (here the header
    key conversion, after the fixed-width columns and keys were appended) puts every buffer back."""
    cols = prefilled(True, 5)
    state = snapshot(cols)

    def boom(data):
        raise MemoryError("simulated")

    monkeypatch.setattr(columns_module, "java_utf8", boom)
    body = encode([(0, 0, b"k", b"v", [(b"h", b"x")], 0)] * 4)
    with implementation("pure"), pytest.raises(MemoryError):
        cols.add_v2(body, 4, 0, 0, -1, None)
    assert snapshot(cols) == state
    with pytest.raises(MemoryError):
        cols.add_records([Record(1, 2, b"k", b"v", ((b"h", None),))])
    assert snapshot(cols) == state
    check_layout(cols)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("args,message", [
    ((2**63, 0, -1, None), "add_v2: base_offset must be int64"),
    ((0, -(2**63) - 1, -1, None), "add_v2: base_timestamp must be int64"),
    ((0, 0, 2**31, None), "add_v2: base_sequence must be int32"),
    ((0, 0, -(2**31) - 1, None), "add_v2: base_sequence must be int32"),
    ((0, 0, -1, 2**63), "add_v2: log_append_time must be int64"),
])
def test_header_fields_out_of_range(impl, args, message):
    with implementation(impl):
        cols = prefilled(True, 2)
        state = snapshot(cols)
        with pytest.raises(OverflowError, match=message):
            cols.add_v2(encode([(0, 0, b"k", b"v", [], 0)]), 1, *args)
        assert snapshot(cols) == state


@pytest.mark.parametrize("impl", IMPLS)
def test_zero_count_reads_nothing(impl):
    """As iter_batch_records (§17 B.11): a zero count appends nothing and never looks at the bytes,
    even garbage, even with a buffer exported."""
    with implementation(impl):
        cols = prefilled(True, 3)
        state = snapshot(cols)
        view = memoryview(cols.offsets)
        cols.add_v2(b"\xff\xff garbage", 0, 0, 0, -1, None)
        view.release()
        assert snapshot(cols) == state
