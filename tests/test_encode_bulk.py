"""kafkatool.record.encode (the converter's bulk encoders) and the compiled loops behind it.

Expected bytes come from kafka-python's builders (``DefaultRecordBatchBuilder``,
``LegacyRecordBatchBuilder``) and hand-derived layouts (spec §4.2, §5.1); what is written is read
back with aiokafka's readers (its C extension). The compiled ``encode_v2_records`` /
``encode_legacy_messages`` / ``decode_legacy_inner`` are checked against the pure-Python
references (``py_v2_records``, ``py_legacy_messages``, ``legacy.decode_message``) on edge cases
and on generated inputs; each implementation is also checked against the oracles on its own.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import zlib

import pytest
from aiokafka.record.default_records import DefaultRecordBatch as AioDefaultRecordBatch
from aiokafka.record.memory_records import MemoryRecords as AioMemoryRecords
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from kafkatool.errors import KafkaToolError
from kafkatool.record import encode
from kafkatool.record.batch import Record
from kafkatool.record.legacy import decode_message
from kafkatool.record.v2 import RecordSpec

try:
    from kafkatool.record import _speedups
except ImportError:  # pragma: no cover - depends on the build
    _speedups = None

compiled = pytest.mark.skipif(
    _speedups is None or not hasattr(_speedups, "encode_v2_records"), reason="the C extension is not built"
)
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

#: Both implementations of each per-record loop, behind the same signature as the public function.
V2_IMPLS = {"public": encode.v2_records, "pure": encode.py_v2_records}
LEGACY_IMPLS = {"public": encode.legacy_messages, "pure": encode.py_legacy_messages}
if _speedups is not None and hasattr(_speedups, "encode_v2_records"):
    V2_IMPLS["compiled"] = lambda recs, bo, bt, *, headers=True: _speedups.encode_v2_records(recs, bo, bt, headers)
    LEGACY_IMPLS["compiled"] = lambda recs, magic, *, relative_to=None, timestamp=None, attributes=0: (
        _speedups.encode_legacy_messages(recs, magic, relative_to, timestamp, attributes)
    )

BIG = 1 << 40  # builder batch_size: never refuses a record

# Edge cases (offsets and timestamps absolute; base = the first record's).
T0 = 1_706_700_000_000
EDGE_RECORDS = [
    RecordSpec(100, T0, None, None),
    RecordSpec(101, T0, b"", b""),
    RecordSpec(102, T0 - 1, b"k", b"v", [("h", None)]),  # negative timestamp delta, null header value
    RecordSpec(103, T0 - 10**12, b"k" * 63, b"v" * 64, [("", b""), ("trace", b"x" * 200)]),  # 1/2-byte length varints
    RecordSpec(104, T0 + 2**40, b"k" * 8192, b"v" * (1 << 20), [("é", b"\x00")]),  # 3/4-byte length varints, utf-8 key
    RecordSpec(100 + 2**27, T0, None, b"x"),  # offset delta whose varint takes 5 bytes
    RecordSpec(100 + 2**31 - 1, -1, b"a", None),  # the largest offset delta; timestamp -1
]


def kafka_python_v2(records: list[RecordSpec]) -> bytes:
    """The whole v2 batch kafka-python's producer builder writes (baseOffset 0, leader epoch 0)."""
    b = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, BIG)
    base = records[0].offset
    for r in records:
        assert b.append(r.offset - base, r.timestamp, r.key, r.value, list(r.headers)) is not None
    return bytes(b.build())


def kafka_python_legacy(records: list[RecordSpec], magic: int, *, relative: bool = False) -> bytes:
    b = LegacyRecordBatchBuilder(magic, 0, BIG)
    first = records[0].offset
    for r in records:
        off = r.offset - first if relative else r.offset
        assert b.append(off, r.timestamp if magic else None, r.key, r.value) is not None
    return bytes(b.build())


def v2_batch_of(body: bytes, records: list[RecordSpec], *, base_offset: int = 0, leader_epoch: int = 0,
                codec: int = 0, count: int | None = None) -> bytes:
    base = records[0].offset
    return encode.v2_batch(
        body,
        base_offset=base_offset,
        last_offset_delta=records[-1].offset - base,
        base_timestamp=records[0].timestamp,
        max_timestamp=max(r.timestamp for r in records),
        attributes=codec,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        partition_leader_epoch=leader_epoch,
        count=len(records) if count is None else count,
    )


# --------------------------------------------------------------------------- v2 against kafka-python


@pytest.mark.parametrize("impl", sorted(V2_IMPLS))
@pytest.mark.parametrize("n", [1, 2, len(EDGE_RECORDS)])
def test_v2_records_equal_kafka_pythons_builder(impl: str, n: int) -> None:
    records = EDGE_RECORDS[:n]
    expected = kafka_python_v2(records)
    body = V2_IMPLS[impl](records, records[0].offset, records[0].timestamp)
    assert body == expected[61:]  # the records section
    assert v2_batch_of(body, records) == expected  # header, CRC-32C and all


@pytest.mark.parametrize("impl", sorted(V2_IMPLS))
def test_v2_records_read_back_by_aiokafka(impl: str) -> None:
    records = EDGE_RECORDS
    base = records[0].offset
    body = V2_IMPLS[impl](records, base, records[0].timestamp)
    batch = AioDefaultRecordBatch(v2_batch_of(body, records, base_offset=base, leader_epoch=7))
    assert batch.validate_crc()
    got = [(r.offset, r.timestamp, r.key, r.value, [(k, v) for k, v in r.headers]) for r in batch]
    assert got == [(r.offset, r.timestamp, r.key, r.value, [(k, v) for k, v in r.headers]) for r in records]
    assert batch.base_offset == base and batch.next_offset == records[-1].offset + 1


@pytest.mark.parametrize("impl", sorted(V2_IMPLS))
def test_v2_records_without_headers(impl: str) -> None:
    records = EDGE_RECORDS[2:4]
    stripped = [r._replace(headers=()) for r in records]
    expected = kafka_python_v2(stripped)[61:]
    assert V2_IMPLS[impl](records, records[0].offset, records[0].timestamp, headers=False) == expected
    # a decoded Record (header keys as bytes) encodes as a RecordSpec with str keys
    as_records = [Record(r.offset, r.timestamp, r.key, r.value, tuple((k.encode(), v) for k, v in r.headers)) for r in records]
    assert V2_IMPLS[impl](as_records, records[0].offset, records[0].timestamp) == kafka_python_v2(records)[61:]


@pytest.mark.parametrize("impl", sorted(V2_IMPLS))
def test_v2_records_varint_lengths_by_hand(impl: str) -> None:
    # offset delta 2**31 - 1: zig-zag 2**32 - 2 = fe ff ff ff 0f (5 bytes); timestamp delta -1: 01
    body = V2_IMPLS[impl]([RecordSpec(2**31 - 1, 9, None, b"")], 0, 10)
    rec = bytes([0]) + b"\x01" + b"\xfe\xff\xff\xff\x0f" + b"\x01" + b"\x00" + b"\x00"
    assert body == bytes([len(rec) * 2]) + rec
    # a 2**20-byte value: its length varint is zig-zag 2**21 = 80 80 80 01
    body = V2_IMPLS[impl]([RecordSpec(0, 0, None, b"v" * (1 << 20))], 0, 0)
    # length (4 bytes), attributes, timestamp delta, offset delta, null key, then the value length
    assert body[8:12] == b"\x80\x80\x80\x01" and len(body) == (1 << 20) + 13
    assert body[:4] == b"\x92\x80\x80\x01"  # record length 2**20 + 9 -> zig-zag 2**21 + 18 = 0x200012
    assert V2_IMPLS[impl]([], 5, 5) == b""


# --------------------------------------------------------------------------- legacy against kafka-python


LEGACY_RECORDS = [r._replace(headers=()) for r in EDGE_RECORDS if r.timestamp >= -1]


@pytest.mark.parametrize("impl", sorted(LEGACY_IMPLS))
@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_messages_equal_kafka_pythons_builder(impl: str, magic: int) -> None:
    fn = LEGACY_IMPLS[impl]
    assert fn(LEGACY_RECORDS, magic) == kafka_python_legacy(LEGACY_RECORDS, magic)
    first = LEGACY_RECORDS[0].offset
    assert fn(LEGACY_RECORDS, magic, relative_to=first) == kafka_python_legacy(LEGACY_RECORDS, magic, relative=True)


@pytest.mark.parametrize("impl", sorted(LEGACY_IMPLS))
def test_legacy_log_append_time_by_hand(impl: str) -> None:
    # v1, attributes 0x08 (LogAppendTime), timestamp overridden, null key, value "ab", offset 5 - 3
    got = LEGACY_IMPLS[impl]([RecordSpec(5, 123, None, b"ab")], 1, relative_to=3, timestamp=77, attributes=0x08)
    body = bytes([1, 0x08]) + struct.pack(">q", 77) + struct.pack(">i", -1) + struct.pack(">i", 2) + b"ab"
    assert got == struct.pack(">qiI", 2, len(body) + 4, zlib.crc32(body)) + body
    # v0 ignores the timestamp; attributes 0x88 is written as the byte 0x88
    got = LEGACY_IMPLS[impl]([RecordSpec(5, 123, b"", None)], 0, timestamp=77, attributes=0x88)
    body = bytes([0, 0x88]) + struct.pack(">i", 0) + struct.pack(">i", -1)
    assert got == struct.pack(">qiI", 5, len(body) + 4, zlib.crc32(body)) + body
    assert LEGACY_IMPLS[impl]([], 1) == b""


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_wrapper_equals_kafka_pythons(magic: int) -> None:
    b = LegacyRecordBatchBuilder(magic, 1, BIG)  # gzip: kafka-python's own wrapper
    for r in LEGACY_RECORDS[:3]:
        b.append(r.offset - 100 if magic else r.offset, r.timestamp if magic else None, r.key, r.value)  # v0: absolute
    theirs = bytes(b.build())
    value = theirs[34 if magic else 26 :]  # the compressed inner messages (null key before it)
    assert struct.unpack_from(">i", theirs, 30 if magic else 22)[0] == len(value)
    mine = encode.legacy_wrapper(value, magic=magic, offset=0, timestamp=0, attributes=1)
    assert mine == theirs
    # read back by aiokafka, offsets from a wrapper offset of 102 (v1: relative inner offsets)
    patched = encode.legacy_wrapper(value, magic=magic, offset=102, timestamp=T0, attributes=1)
    batch = AioMemoryRecords(patched).next_batch()
    assert batch.validate_crc()
    assert [(r.offset, r.key, r.value) for r in batch] == [(r.offset, r.key, r.value) for r in LEGACY_RECORDS[:3]]


def test_v2_batch_compressed_read_back_by_aiokafka() -> None:
    from kafkatool.record.compression import compress

    records = EDGE_RECORDS[:4]
    body = compress(3, encode.v2_records(records, records[0].offset, records[0].timestamp))
    batch = AioDefaultRecordBatch(v2_batch_of(body, records, base_offset=100, codec=3))
    assert batch.validate_crc() and batch.compression_type == 3
    assert [(r.offset, r.key, r.value) for r in batch] == [(r.offset, r.key, r.value) for r in records]


# --------------------------------------------------------------------------- compiled == pure

keys = st.one_of(st.none(), st.binary(max_size=40), st.binary(min_size=120, max_size=300))
headers = st.lists(st.tuples(st.one_of(st.text(max_size=8), st.binary(max_size=8)), st.one_of(st.none(), st.binary(max_size=20))), max_size=3)
int64 = st.one_of(st.integers(-70, 70), st.integers(-(2**31) - 2, 2**31 + 2), st.integers(-(2**63), 2**63 - 1))
records_st = st.lists(st.builds(RecordSpec, int64, int64, keys, keys, headers), max_size=8)


@compiled
@SETTINGS
@given(records_st, int64, int64, st.booleans())
def test_compiled_v2_records_equal_pure(records, base_offset, base_timestamp, with_headers) -> None:
    expected = encode.py_v2_records(records, base_offset, base_timestamp, headers=with_headers)
    try:
        got = _speedups.encode_v2_records(records, base_offset, base_timestamp, with_headers)
    except OverflowError:  # a timestamp delta past 64 bits: the public function runs the reference
        got = None
    assert got in (expected, None)
    assert encode.v2_records(records, base_offset, base_timestamp, headers=with_headers) == expected


def outcome(fn, *args, **kwargs):
    try:
        return ("ok", fn(*args, **kwargs))
    except Exception as e:  # noqa: BLE001 - the class and message must match
        return ("error", type(e), str(e))


@compiled
@SETTINGS
@given(records_st, st.sampled_from([0, 1]), st.one_of(st.none(), int64), st.one_of(st.none(), int64), st.integers(0, 255))
def test_compiled_legacy_messages_equal_pure(records, magic, relative_to, timestamp, attributes) -> None:
    records = [r._replace(headers=()) for r in records]
    expected = outcome(encode.py_legacy_messages, records, magic, relative_to=relative_to, timestamp=timestamp, attributes=attributes)
    try:
        got = ("ok", _speedups.encode_legacy_messages(records, magic, relative_to, timestamp, attributes))
        assert got == expected
    except OverflowError:  # a field out of its range: the public function runs the reference
        pass
    assert outcome(encode.legacy_messages, records, magic, relative_to=relative_to, timestamp=timestamp,
                   attributes=attributes) == expected


@compiled
def test_compiled_takes_what_the_reference_takes() -> None:
    # other buffer types, list records, lists of headers: same bytes (the fallback covers the rest)
    recs = [[7, 5, bytearray(b"k"), memoryview(b"val"), [("h", bytearray(b"v"))]], (8, 6, None, b"", ())]
    assert encode.v2_records(recs, 7, 5) == encode.py_v2_records(recs, 7, 5)
    assert encode.legacy_messages(recs, 1) == encode.py_legacy_messages(recs, 1)
    assert _speedups.encode_v2_records(recs, 7, 5, True) == encode.py_v2_records(recs, 7, 5)
    huge = [RecordSpec(2**70, 0, None, None)]  # past 64 bits: the reference's own answer
    assert encode.v2_records(huge, 2**70, 0) == encode.py_v2_records(huge, 2**70, 0)
    with pytest.raises(struct.error):
        encode.legacy_messages(huge, 1)
    with pytest.raises(TypeError):
        encode.v2_records([RecordSpec(0, 0, "str key", None)], 0, 0)
    with pytest.raises(KafkaToolError):
        encode.legacy_messages([], 2)


@compiled
@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 15, 16, 17, 100, 4099])
def test_compiled_crc32_is_zlibs(n: int) -> None:
    data = bytes((i * 37 + 11) & 0xFF for i in range(n + 8))
    for start in range(8):  # every alignment
        assert _speedups._crc32(data[start : start + n]) == zlib.crc32(data[start : start + n])
    assert _speedups._crc32(data, 0x12345678) == zlib.crc32(data, 0x12345678)


def test_pure_switch_takes_the_python_loops() -> None:
    code = "from kafkatool.record import encode as e; print(e._c_v2_records is None, e._c_legacy_messages is None)"
    env = {**os.environ, "KAFKATOOL_PURE": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "True"]


# --------------------------------------------------------------------------- decode_legacy_inner


def reference_inner(buf: bytes, pos: int, end: int, limit: int):
    """What legacy.iter_legacy_record_chunks's message-by-message loop sees: decode_message per
    complete message, stopping at a short tail (0), a size below 14 (1), or ``limit`` (2)."""
    out = []
    while True:
        if len(out) >= limit:
            return out, pos, 2
        if end - pos < 12:
            return out, pos, 0
        size = struct.unpack_from(">i", buf, pos + 8)[0]
        if size < 14:
            return out, pos, 1
        if pos + 12 + size > end:
            return out, pos, 0
        out.append(decode_message(buf, pos, end))
        pos += 12 + size


def inner_outcome(fn, *args):
    try:
        return ("ok", fn(*args))
    except KafkaToolError as e:
        return ("error", type(e), e.message, e.position, e.kind)


compiled_inner = pytest.mark.skipif(
    _speedups is None or not hasattr(_speedups, "decode_legacy_inner"), reason="the C extension is not built"
)


@compiled_inner
@pytest.mark.parametrize("magic", [0, 1])
def test_decode_legacy_inner_reads_kafka_pythons_messages(magic: int) -> None:
    buf = kafka_python_legacy(LEGACY_RECORDS, magic, relative=True)
    entries, pos, status = _speedups.decode_legacy_inner(buf, 0, len(buf), 1000)
    assert (pos, status) == (len(buf), 0)
    first = LEGACY_RECORDS[0].offset
    assert [(e[0], e[5], e[6], e[7], e[8], e[3]) for e in entries] == [
        (r.offset - first, r.timestamp if magic else -1, r.key, r.value, True, magic) for r in LEGACY_RECORDS
    ]
    assert entries == reference_inner(buf, 0, len(buf), 1000)[0]


def _message(magic: int, key_len: int | None = None, value_len: int | None = None, size: int | None = None) -> bytearray:
    m = bytearray(kafka_python_legacy([RecordSpec(3, T0, b"key", b"value")], magic))
    kl_at = 26 if magic else 18
    if key_len is not None:
        struct.pack_into(">i", m, kl_at, key_len)
    if value_len is not None:
        struct.pack_into(">i", m, kl_at + 4 + 3, value_len)
    if size is not None:
        struct.pack_into(">i", m, 8, size)
    return m


@compiled_inner
@pytest.mark.parametrize(
    "case",
    [
        {"key_len": 4},  # key runs past the value length field
        {"key_len": 1000},
        {"key_len": -7},  # any negative: null (then the value length is read at the key bytes)
        {"value_len": 6},  # one past the message end
        {"value_len": 5},  # exactly to the end: fine
        {"value_len": -1},
        {"size": 13},  # below RECORD_OVERHEAD_V0: status 1
        {"size": 14},  # the smallest accepted: key length runs past (v1: the timestamp fills it)
        {"size": 1000},  # incomplete: status 0
        {"magic": 2},
        {"magic": -1},
        {"crc": True},  # a bad CRC decodes, crc_valid False
    ],
)
@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("lead", [0, 1])
def test_decode_legacy_inner_errors_as_decode_message(case: dict, magic: int, lead: int) -> None:
    m = _message(magic, case.get("key_len"), case.get("value_len"), case.get("size"))
    if "magic" in case:
        m[16] = case["magic"] & 0xFF
    if case.get("crc"):
        m[12] ^= 1
    good = kafka_python_legacy([RecordSpec(1, T0, None, b"x")], magic)
    buf = bytes(good * lead + m + good)
    for end in (len(buf), len(buf) - len(good), len(buf) - 1):
        for limit in (1000, 1, lead):
            expected = inner_outcome(reference_inner, buf, 0, end, limit)
            assert inner_outcome(_speedups.decode_legacy_inner, buf, 0, end, limit) == expected, (case, end, limit)
            assert inner_outcome(_speedups.decode_legacy_inner, bytearray(buf), 0, end, limit) == expected


@compiled_inner
@SETTINGS
@given(st.lists(st.tuples(st.sampled_from([0, 1]), keys, keys), max_size=6), st.lists(st.tuples(st.integers(0, 400), st.integers(0, 255)), max_size=3), st.data())
def test_decode_legacy_inner_equals_decode_message(messages, damage, data) -> None:
    buf = bytearray()
    for i, (magic, key, value) in enumerate(messages):
        buf += encode.py_legacy_messages([RecordSpec(i, T0 + i, key, value)], magic)
    for at, byte in damage:
        if buf:
            buf[at % len(buf)] = byte
    buf = bytes(buf)
    pos = data.draw(st.integers(0, len(buf)))
    end = data.draw(st.integers(pos, len(buf)))
    limit = data.draw(st.integers(0, 8))
    assert inner_outcome(_speedups.decode_legacy_inner, buf, pos, end, limit) == inner_outcome(reference_inner, buf, pos, end, limit)


@compiled_inner
def test_decode_legacy_inner_arguments() -> None:
    with pytest.raises(ValueError):
        _speedups.decode_legacy_inner(b"x" * 20, 5, 4, 10)
    with pytest.raises(ValueError):
        _speedups.decode_legacy_inner(b"x" * 20, 0, 21, 10)
    with pytest.raises(TypeError):
        _speedups.decode_legacy_inner(b"", 0, 0)


# --------------------------------------------------------------------------- legacy_wrapper_as_v2


def slow_wrapper_as_v2(entry: bytes):
    """The general path: kafkatool's legacy reader, then v2_records over its records."""
    from kafkatool.record.legacy import decode_legacy_header
    from kafkatool.record.records import batch_record_chunks

    batch = decode_legacy_header(entry)
    records = [r for chunk in batch_record_chunks(batch, entry) for r in chunk]
    if any(r.crc_valid is False for r in records):
        return "inner crc"
    lat = batch.max_timestamp if batch.magic == 1 and batch.attributes & 0x08 else None
    body = encode.py_v2_records(records, records[0].offset, records[0].timestamp, headers=False)
    mts = lat if lat is not None else max(r.timestamp for r in records)
    return (body, len(records), records[0].offset, records[-1].offset, records[0].timestamp, mts, lat)


def kafka_python_wrapper(records: list[RecordSpec], magic: int, codec: int, *, offset: int, timestamp: int = 0,
                         attributes: int | None = None) -> bytes:
    """A wrapper built by kafka-python (inner messages and compression), then given its offset,
    timestamp and attributes with kafkatool's legacy_wrapper (the value kept as kafka-python made it)."""
    if magic == 0 and codec == 3:  # kafka-python's v0 lz4 needs xxhash: its messages, kafkatool's lz4 (magic 0 quirk)
        from kafkatool.record.compression import compress

        value = compress(3, kafka_python_legacy(records, 0), magic=0)
    else:
        b = LegacyRecordBatchBuilder(magic, codec, BIG)
        first = records[0].offset
        for r in records:
            b.append(r.offset - first if magic else r.offset, r.timestamp if magic else None, r.key, r.value)
        value = bytes(b.build())[34 if magic else 26 :]
    return encode.legacy_wrapper(value, magic=magic, offset=offset, timestamp=timestamp,
                                 attributes=codec if attributes is None else attributes)


fast_wrapper = pytest.mark.skipif(encode._c_inner_to_v2 is None, reason="the C extension is not built or switched off")


@fast_wrapper
@pytest.mark.parametrize("codec", [1, 2, 3])
@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("lat", [False, True])
def test_legacy_wrapper_as_v2_is_the_general_path(codec: int, magic: int, lat: bool) -> None:
    recs = [r for r in LEGACY_RECORDS if len(r.value or b"") < 1 << 20]  # the 1 MiB value: over the fast path's limit
    wrapper_offset = recs[-1].offset if magic else 0
    entry = kafka_python_wrapper(recs, magic, codec, offset=wrapper_offset, timestamp=T0 + 5,
                                 attributes=codec | (0x08 if lat else 0))
    fast = encode.legacy_wrapper_as_v2(entry, max_decompressed=1 << 30)
    assert fast is not None
    assert fast == slow_wrapper_as_v2(entry)
    # and aiokafka reads the v2 batch it makes: offsets, timestamps, keys, values of the source
    body, count, base, last, bts, mts, lat_ts = fast
    v2 = encode.v2_batch(body, base_offset=base, last_offset_delta=last - base, base_timestamp=bts, max_timestamp=mts,
                         attributes=0, producer_id=-1, producer_epoch=-1, base_sequence=-1, partition_leader_epoch=-1,
                         count=count)
    got = [(r.offset, r.timestamp, r.key, r.value) for r in AioDefaultRecordBatch(v2)]
    want_ts = [(-1 if magic == 0 else (T0 + 5 if lat else r.timestamp)) for r in recs]
    assert got == [(r.offset, t, r.key, r.value) for r, t in zip(recs, want_ts)]


@fast_wrapper
def test_legacy_wrapper_as_v2_leaves_the_unusual_to_the_general_path() -> None:
    recs = LEGACY_RECORDS[:3]
    good = kafka_python_wrapper(recs, 1, 1, offset=recs[-1].offset)
    assert encode.legacy_wrapper_as_v2(good, max_decompressed=1 << 30) is not None
    assert encode.legacy_wrapper_as_v2(good, max_decompressed=100) is None  # over the bomb guard
    # a v1 wrapper offset below the last inner (relative) offset: the reader's error, not ours
    assert encode.legacy_wrapper_as_v2(kafka_python_wrapper(recs, 1, 1, offset=1), max_decompressed=1 << 30) is None
    # an inner CRC that fails: refused (inner_crc_mismatch) or salvaged by the converter
    inner = bytearray(kafka_python_legacy(recs, 1, relative=True))
    inner[-1] ^= 0xFF
    from kafkatool.record.compression import compress

    bad = encode.legacy_wrapper(compress(1, bytes(inner), magic=1), magic=1, offset=recs[-1].offset, timestamp=0, attributes=1)
    assert encode.legacy_wrapper_as_v2(bad, max_decompressed=1 << 30) is None
    assert slow_wrapper_as_v2(bad) == "inner crc"
    # a truncated trailing inner message (Kafka drops it): left to the general path too
    cut = encode.legacy_wrapper(compress(1, bytes(inner[:-3]), magic=1), magic=1, offset=5, timestamp=0, attributes=1)
    assert encode.legacy_wrapper_as_v2(cut, max_decompressed=1 << 30) is None
    # an uncompressed message, a zstd "wrapper", garbage: None
    assert encode.legacy_wrapper_as_v2(kafka_python_legacy(recs[:1], 1), max_decompressed=1 << 30) is None
    assert encode.legacy_wrapper_as_v2(b"\x00" * 40, max_decompressed=1 << 30) is None
    assert encode.legacy_wrapper_as_v2(b"", max_decompressed=1 << 30) is None


@fast_wrapper
@SETTINGS
@given(st.lists(st.tuples(st.sampled_from([0, 1]), keys, keys, st.integers(-(2**40), 2**40)), min_size=1, max_size=6),
       st.sampled_from([0, 1]), st.sampled_from([1, 2, 3]), st.integers(0, 2**40), st.booleans(),
       st.lists(st.tuples(st.integers(0, 400), st.integers(0, 255)), max_size=2))
def test_legacy_wrapper_as_v2_equals_the_general_path(messages, magic, codec, wrapper_offset, lat, damage) -> None:
    from kafkatool.record.compression import compress

    inner = bytearray()
    for i, (imagic, key, value, ts) in enumerate(messages):
        inner += encode.py_legacy_messages([RecordSpec(i * 3, ts, key, value)], imagic)
    for at, byte in damage:
        inner[at % len(inner)] = byte
    entry = encode.legacy_wrapper(compress(codec, bytes(inner), magic=magic), magic=magic, offset=wrapper_offset,
                                  timestamp=7, attributes=codec | (0x08 if lat else 0))
    fast = encode.legacy_wrapper_as_v2(entry, max_decompressed=1 << 30)
    try:
        slow = slow_wrapper_as_v2(entry)
    except KafkaToolError:
        slow = "error"
    if fast is not None:
        assert fast == slow
    elif not damage:
        assert slow == "error" or (magic == 1 and wrapper_offset and wrapper_offset < 3 * (len(messages) - 1))
