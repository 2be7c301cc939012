"""The conversion rules of :class:`kafkatool.convert.rules.BatchConverter` (spec §13, issue 11).

Inputs are built with kafka-python's builders (``DefaultRecordBatchBuilder``,
``LegacyRecordBatchBuilder``), patched by hand where a builder cannot say something (leader epoch,
LogAppendTime, control flag, delete horizon), with the CRCs recomputed by kafka-python's
``calc_crc32c`` and zlib. Outputs are read back with kafka-python and aiokafka, and their header
fields with :mod:`struct` from the spec's layout (§4.1, §5.1); expected sizes come from
kafka-python's builders. kafkatool's encoders never decide an expected value.
"""

from __future__ import annotations

import glob
import gzip
import os
import struct
import zlib

import pytest
from aiokafka.record.memory_records import MemoryRecords as AioMemoryRecords
from kafka.record import MemoryRecords as KpMemoryRecords
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.util import calc_crc32c

from kafkatool.convert.aborted import AbortedSet, find_aborted
from kafkatool.convert.options import ConvertOptions, Loss
from kafkatool.convert.rules import BatchConverter
from kafkatool.errors import KafkaToolError
from kafkatool.segment.logdir import Segment

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "logdir")

# spec §4.1: baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta,
# baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, recordsCount
V2H = struct.Struct(">qiibIhiqqqhii")
V2_FIELDS = ("base_offset", "length", "leader_epoch", "magic", "crc", "attributes", "last_offset_delta",
             "base_timestamp", "max_timestamp", "producer_id", "producer_epoch", "base_sequence", "count")
# spec §5.1: offset, size, crc, magic, attributes (+ int64 timestamp for v1)
LEG = struct.Struct(">qiIbb")
T0 = 1_700_000_000_000
NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4


# --------------------------------------------------------------------------- building inputs


def v2_header(buf: bytes, pos: int = 0) -> dict:
    return dict(zip(V2_FIELDS, V2H.unpack_from(buf, pos)))


def kp_v2(records, *, base_offset: int, codec: int = NONE, transactional: bool = False, producer_id: int = -1,
          producer_epoch: int = -1, base_sequence: int = -1, leader_epoch: int = 0, attrs_or: int = 0,
          last_offset_delta: int | None = None, max_timestamp: int | None = None,
          base_timestamp: int | None = None) -> bytes:
    """A v2 batch from kafka-python's builder; ``records`` are (offset, ts, key, value, headers)."""
    b = DefaultRecordBatchBuilder(2, codec, transactional, producer_id, producer_epoch, base_sequence, 1 << 22)
    for off, ts, k, v, h in records:
        b.append(off - base_offset, ts, k, v, list(h))
    buf = bytearray(b.build())
    assert buf[22] & 7 == codec, "kafka-python left it uncompressed (not smaller): use larger values"
    struct.pack_into(">q", buf, 0, base_offset)  # set by the broker, not under the CRC
    struct.pack_into(">i", buf, 12, leader_epoch)
    if attrs_or or last_offset_delta is not None or max_timestamp is not None or base_timestamp is not None:
        h = list(V2H.unpack_from(buf, 0))
        h[5] |= attrs_or
        if last_offset_delta is not None:
            h[6] = last_offset_delta
        if base_timestamp is not None:
            h[7] = base_timestamp
        if max_timestamp is not None:
            h[8] = max_timestamp
        V2H.pack_into(buf, 0, *h)
        struct.pack_into(">I", buf, 17, calc_crc32c(bytes(buf[21:])))
    return bytes(buf)


def control_batch(offset: int, producer_id: int, marker_type: int, *, epoch: int = 0) -> bytes:
    """A transaction marker (spec §6): key (version 0, type), value (version 0, coordinator epoch 7)."""
    key = struct.pack(">hh", 0, marker_type)
    value = struct.pack(">hi", 0, 7)
    return kp_v2([(offset, T0, key, value, ())], base_offset=offset, transactional=True, producer_id=producer_id,
                 producer_epoch=epoch, attrs_or=0x20)


def kp_legacy(magic: int, records, *, codec: int = NONE) -> bytes:
    """Legacy messages (codec none) or one wrapper from kafka-python; ``records`` (offset, ts, key, value)."""
    b = LegacyRecordBatchBuilder(magic, codec, 1 << 22)
    for off, ts, k, v in records:
        b.append(off, ts, k, v)
    buf = bytes(b.build())
    assert buf[17] & 7 == codec
    return buf


def set_legacy_lat(entry: bytes, timestamp: int) -> bytes:
    """A v1 entry with attribute bit 3 (LogAppendTime) and ``timestamp``, its CRC-32 redone (§5.1)."""
    buf = bytearray(entry)
    buf[17] |= 0x08
    struct.pack_into(">q", buf, 18, timestamp)
    struct.pack_into(">I", buf, 12, zlib.crc32(bytes(buf[16:])))
    return bytes(buf)


def legacy_entries(buf: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos < len(buf):
        size = struct.unpack_from(">i", buf, pos + 8)[0]
        out.append(buf[pos : pos + 12 + size])
        pos += 12 + size
    return out


# --------------------------------------------------------------------------- running the converter


def run(tmp_path, buf: bytes, options: ConvertOptions, *, dry: bool = False, aborted=None, salvaged=False,
        name: str = "00000000000000000000.log"):
    path = tmp_path / name
    path.write_bytes(buf)
    loss = Loss()
    conv = BatchConverter(options, loss, aborted=aborted, path=str(path), dry=dry)
    reader = Segment.at(str(path)).batches()
    out: list[bytes] = []
    for batch in reader:
        out += conv.feed(batch, reader.data, salvaged=salvaged)
    out += conv.flush()
    return out, loss


def _ts(value) -> int:
    return -1 if value is None else value  # kafka-python: None for a v0 message


def kp_read(buf: bytes) -> list[tuple[object, list[tuple]]]:
    """(batch, [(offset, timestamp, timestamp_type, key, value, headers)]) by kafka-python, CRCs checked."""
    mr = KpMemoryRecords(bytes(buf))
    out = []
    while True:
        b = mr.next_batch()
        if b is None:
            return out
        assert b.validate_crc()
        out.append((b, [(r.offset, _ts(r.timestamp), r.timestamp_type, r.key, r.value, tuple(r.headers)) for r in b]))


def aio_read(buf: bytes) -> list[list[tuple]]:
    mr = AioMemoryRecords(bytes(buf))
    out = []
    while mr.has_next():
        b = mr.next_batch()
        assert b.validate_crc()
        out.append([(r.offset, _ts(r.timestamp), r.timestamp_type, r.key, r.value, tuple(r.headers or ())) for r in b])
    return out


def flat(entries) -> list[tuple]:
    return [r for _b, recs in entries for r in recs]


def sample(n: int, *, base: int = 0, headers: bool = False, gap: int = 1):
    out = []
    for i in range(n):
        off = base + i * gap
        h = (("trace", b"t%d" % off), ("empty", None)) if headers and i % 2 == 0 else ()
        key = None if i % 5 == 3 else b"key-%d" % off
        value = None if i % 7 == 6 else b"value-%d " % off + b"abc" * (10 + i % 9)
        out.append((off, T0 + 10 * off + i % 3, key, value, h))
    return out


# --------------------------------------------------------------------------- v2 -> v2


@pytest.mark.parametrize("codec", [NONE, GZIP, SNAPPY, LZ4, ZSTD])
@pytest.mark.parametrize("source_codec", [NONE, GZIP, ZSTD])
def test_v2_recodec_keeps_every_header_field(tmp_path, codec, source_codec):
    recs = sample(6, base=500, headers=True, gap=2)
    # transactional, producer fields, leader epoch 9, delete horizon (bit 6), lastOffsetDelta past the
    # last record (a compacted tail), hand-set base/max timestamps
    src = kp_v2(recs, base_offset=500, codec=source_codec, transactional=True, producer_id=4242, producer_epoch=3,
                base_sequence=77, leader_epoch=9, attrs_or=0x40, last_offset_delta=15,
                base_timestamp=T0 - 5, max_timestamp=T0 + 99_999)
    out, loss = run(tmp_path, src, ConvertOptions(magic=2, codec=codec))
    assert len(out) == 1
    if codec == source_codec:
        assert out[0] == src
    a, b = v2_header(src), v2_header(out[0])
    for name in V2_FIELDS:
        if name in ("length", "crc", "attributes"):
            continue
        assert b[name] == a[name], name
    assert b["attributes"] == (a["attributes"] & ~7) | codec
    assert b["length"] == len(out[0]) - 12
    assert b["crc"] == calc_crc32c(out[0][21:])
    got = kp_read(out[0])
    assert got[0][0].compression_type == codec
    assert flat(got) == flat(kp_read(src))
    assert aio_read(out[0]) == aio_read(src)
    assert (loss.records_in, loss.records_out, loss.batches_in, loss.batches_out) == (6, 6, 1, 1)
    assert not loss.any()


def test_v2_same_codec_copies_bytes_and_control_batches_stay_uncompressed(tmp_path):
    data = kp_v2(sample(3, base=0), base_offset=0, transactional=True, producer_id=9, producer_epoch=0)
    marker = control_batch(3, 9, 1)
    src = data + marker
    out, _ = run(tmp_path, src, ConvertOptions(magic=2, codec=LZ4))
    assert v2_header(out[0])["attributes"] & 7 == LZ4
    assert out[1] == marker  # control: uncompressed, bytes unchanged
    out, _ = run(tmp_path, src, ConvertOptions(magic=2))
    assert out == [data, marker]


def test_v2_empty_compacted_batch_keeps_its_header(tmp_path):
    # a zero-count header (compaction emptied it): Kafka's writeEmptyHeader, built by hand (§4.1)
    body = V2H.pack(40, 49, 2, 2, 0, 0x40 | GZIP, 4, T0 + 86_400_000, T0 + 7, 5, 1, 3, 0)
    src = bytearray(body)
    struct.pack_into(">I", src, 17, calc_crc32c(bytes(src[21:])))
    # (a source with gzip bits over no records section: Kafka writes codec none, so does convert)
    out, loss = run(tmp_path, bytes(src), ConvertOptions(magic=2, codec=ZSTD))
    h = v2_header(out[0])
    assert (h["base_offset"], h["last_offset_delta"], h["count"], h["attributes"]) == (40, 4, 0, 0x40)
    assert (h["base_timestamp"], h["max_timestamp"], h["producer_id"], h["base_sequence"]) == (T0 + 86_400_000, T0 + 7, 5, 3)
    assert len(out[0]) == 61 and h["crc"] == calc_crc32c(out[0][21:])
    assert kp_read(out[0])[0][1] == [] and aio_read(out[0]) == [[]]
    none = bytearray(src)
    none[22] = 0x40
    struct.pack_into(">I", none, 17, calc_crc32c(bytes(none[21:])))
    for codec in (SNAPPY, LZ4, ZSTD):  # an uncompressed empty batch stays as it is
        assert run(tmp_path, bytes(none), ConvertOptions(magic=2, codec=codec))[0] == [bytes(none)]
    # down: skipped and counted
    out, loss = run(tmp_path, bytes(src), ConvertOptions(magic=1))
    assert out == [] and loss.empty_batches_dropped == 1


# --------------------------------------------------------------------------- v2 -> v0/v1


def gunzip_inner(entry: bytes, magic: int) -> list[tuple[int, int, int]]:
    """(offset, attributes, timestamp) of each inner message of a gzip wrapper, read by hand (§5.2)."""
    klen_at = 18 + (8 if magic == 1 else 0)
    klen = struct.unpack_from(">i", entry, klen_at)[0]
    assert klen == -1
    vlen = struct.unpack_from(">i", entry, klen_at + 4)[0]
    inner = gzip.decompress(entry[klen_at + 8 : klen_at + 8 + vlen])
    out = []
    for m in legacy_entries(inner):
        off, _size, _crc, mg, attrs = LEG.unpack_from(m, 0)
        ts = struct.unpack_from(">q", m, 18)[0] if mg == 1 else None
        out.append((off, attrs, ts))
    return out


@pytest.mark.parametrize("magic", [0, 1])
def test_v2_to_legacy_one_wrapper_per_batch_relative_v1_absolute_v0(tmp_path, magic):
    recs = sample(5, base=1000, gap=3)  # offsets 1000, 1003, ... 1012 (compacted gaps)
    src = kp_v2(recs, base_offset=1000, codec=SNAPPY) + kp_v2(sample(2, base=1013), base_offset=1013)
    out, loss = run(tmp_path, src, ConvertOptions(magic=magic, codec=GZIP))
    assert len(out) == 2
    off, _size, _crc, mg, attrs = LEG.unpack_from(out[0], 0)
    assert (off, mg, attrs & 7) == (1012, magic, GZIP)  # wrapper offset: the last record's
    inner = gunzip_inner(out[0], magic)
    expected = [o - 1000 for o, *_ in recs] if magic == 1 else [o for o, *_ in recs]
    assert [o for o, _a, _t in inner] == expected
    if magic == 1:  # CreateTime: wrapper timestamp = max inner timestamp
        assert struct.unpack_from(">q", out[0], 18)[0] == max(r[1] for r in recs)
        assert [t for _o, _a, t in inner] == [r[1] for r in recs]
    got = flat(kp_read(b"".join(out)))
    want_ts = [r[1] if magic == 1 else -1 for r in recs + sample(2, base=1013)]
    assert [(o, t, k, v) for o, t, _tt, k, v, _h in got] == [
        (r[0], ts, r[2], r[3]) for r, ts in zip(recs + sample(2, base=1013), want_ts)
    ]
    assert [r[:5] for b in aio_read(b"".join(out)) for r in b] == [g[:5] for g in got]
    assert loss.timestamps_dropped == (7 if magic == 0 else 0)
    assert loss.producer_fields_dropped == 2  # leader epoch 0 is a producer-side field lost too


@pytest.mark.parametrize("magic", [0, 1])
def test_v2_to_legacy_uncompressed_one_message_per_record(tmp_path, magic):
    recs = sample(4, base=7, headers=True)
    src = kp_v2(recs, base_offset=7, codec=LZ4, leader_epoch=-1)
    out, loss = run(tmp_path, src, ConvertOptions(magic=magic, codec=NONE))
    assert len(out) == 4
    for entry, r in zip(out, recs):
        off, size, crc, mg, attrs = LEG.unpack_from(entry, 0)
        assert (off, mg, attrs, size + 12) == (r[0], magic, 0, len(entry))
        assert crc == zlib.crc32(entry[16:])
    assert [g[0] for g in flat(kp_read(b"".join(out)))] == [r[0] for r in recs]
    assert (loss.headers_dropped, loss.header_count) == (2, 4)
    assert loss.producer_fields_dropped == 0  # no producer id, epoch, sequence; leader epoch -1


@pytest.mark.parametrize("codec", [NONE, GZIP])
def test_v2_log_append_time_to_v1(tmp_path, codec):
    lat = T0 + 5000
    recs = sample(3, base=20)
    src = kp_v2(recs, base_offset=20, attrs_or=0x08, max_timestamp=lat)
    out, _ = run(tmp_path, src, ConvertOptions(magic=1, codec=codec))
    if codec == NONE:
        for entry in out:
            _o, _s, _c, _m, attrs = LEG.unpack_from(entry, 0)
            assert attrs == 0x08 and struct.unpack_from(">q", entry, 18)[0] == lat
    else:
        (entry,) = out
        _o, _s, _c, _m, attrs = LEG.unpack_from(entry, 0)
        assert attrs == 0x08 | GZIP and struct.unpack_from(">q", entry, 18)[0] == lat
        assert [(a, t) for _o, a, t in gunzip_inner(entry, 1)] == [(0x08, lat)] * 3
    got = flat(kp_read(b"".join(out)))
    assert [(o, t, tt) for o, t, tt, *_ in got] == [(r[0], lat, 1) for r in recs]
    assert [(r[0], r[1], r[2]) for b in aio_read(b"".join(out)) for r in b] == [(r[0], lat, 1) for r in recs]


def test_v2_to_legacy_drops_control_batches(tmp_path):
    src = (kp_v2(sample(2), base_offset=0, transactional=True, producer_id=1, producer_epoch=0)
           + control_batch(2, 1, 1) + kp_v2(sample(1, base=3), base_offset=3))
    out, loss = run(tmp_path, src, ConvertOptions(magic=1))
    assert [g[0] for g in flat(kp_read(b"".join(out)))] == [0, 1, 3]
    assert (loss.control_batches_dropped, loss.control_records_dropped) == (1, 1)
    assert loss.producer_fields_dropped == 2  # the transactional batch, and the other (leader epoch 0)


def test_zstd_below_v2_is_refused_located(tmp_path):
    src = kp_v2(sample(2), base_offset=0) + kp_v2(sample(2, base=2), base_offset=2, codec=ZSTD)
    with pytest.raises(KafkaToolError) as e:
        run(tmp_path, src, ConvertOptions(magic=1))
    assert e.value.kind == "refused" and e.value.position == len(kp_v2(sample(2), base_offset=0))
    assert e.value.path.endswith(".log")
    with pytest.raises(KafkaToolError) as e:
        run(tmp_path, kp_legacy(1, [(0, T0, b"k", b"v")]), ConvertOptions(magic=0, codec=ZSTD))
    assert e.value.kind == "refused"


# --------------------------------------------------------------------------- v0/v1 -> v2


def kp_v2_size(records) -> int:
    """The size kafka-python's builder gives the v2 batch of ``records`` (uncompressed, no headers)."""
    b = DefaultRecordBatchBuilder(2, NONE, False, -1, -1, -1, 1 << 30)
    base = records[0][0]
    for off, ts, k, v in records:
        b.append(off - base, ts, k, v, [])
    return len(b.build())


def test_coalescing_boundary_is_exactly_max_batch_bytes(tmp_path):
    recs = [(100 + i, T0 + i, b"k%d" % i, b"v" * (10 + i)) for i in range(6)]
    src = kp_legacy(1, recs)
    whole = kp_v2_size(recs)
    out, loss = run(tmp_path, src, ConvertOptions(magic=2, max_batch_bytes=whole))
    assert len(out) == 1 and len(out[0]) == whole  # == fits
    assert loss.batches_out == 1
    out, loss = run(tmp_path, src, ConvertOptions(magic=2, max_batch_bytes=whole - 1))
    assert [len(e) for e in out] == [kp_v2_size(recs[:5]), kp_v2_size(recs[5:])]  # one byte less: splits
    assert loss.batches_out == 2
    got = flat(kp_read(b"".join(out)))
    assert [(o, t, tt, k, v) for o, t, tt, k, v, _h in got] == [(o, t, 0, k, v) for o, t, k, v in recs]
    for e in out:
        h = v2_header(e)
        assert (h["producer_id"], h["producer_epoch"], h["base_sequence"], h["leader_epoch"]) == (-1, -1, -1, -1)
        assert h["attributes"] == 0
    # dry counts the same batches
    _, dry = run(tmp_path, src, ConvertOptions(magic=2, max_batch_bytes=whole - 1), dry=True)
    assert dry.as_dict() == loss.as_dict()


def test_run_ends_at_magic_and_timestamp_type_change(tmp_path):
    v0 = kp_legacy(0, [(0, -1, b"a", b"x"), (1, -1, b"b", b"y")])
    v1 = kp_legacy(1, [(2, T0 + 2, b"c", b"z"), (3, T0 + 3, b"d", b"w")])
    lat = b"".join(set_legacy_lat(e, T0 + 50) for e in legacy_entries(kp_legacy(1, [(4, T0, b"e", b"q"), (5, T0, b"f", b"r")])))
    lat2 = set_legacy_lat(kp_legacy(1, [(6, T0, b"g", b"s")]), T0 + 60)  # another log-append time
    out, loss = run(tmp_path, v0 + v1 + lat + lat2, ConvertOptions(magic=2))
    assert [v2_header(e)["count"] for e in out] == [2, 2, 2, 1]
    got = kp_read(b"".join(out))
    assert [b.timestamp_type for b, _ in got] == [0, 0, 1, 1]
    assert [(o, t) for o, t, *_ in flat(got)] == [(0, -1), (1, -1), (2, T0 + 2), (3, T0 + 3), (4, T0 + 50), (5, T0 + 50), (6, T0 + 60)]
    assert v2_header(out[2])["max_timestamp"] == T0 + 50
    assert loss.any() is False and loss.records_out == 7


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [None, LZ4])
def test_legacy_wrapper_becomes_one_v2_batch(tmp_path, magic, codec):
    recs = [(10 + i, T0 + 7 * i, b"k", b"value %d" % i * 3) for i in range(4)]
    src = kp_legacy(magic, recs, codec=GZIP) + kp_legacy(magic, [(14, T0 + 99, None, b"x")], codec=GZIP)
    out, _ = run(tmp_path, src, ConvertOptions(magic=2, codec=codec))
    assert len(out) == 2
    h = v2_header(out[0])
    assert (h["base_offset"], h["last_offset_delta"], h["count"], h["attributes"] & 7) == (10, 3, 4, GZIP if codec is None else codec)
    if magic == 1:
        assert (h["base_timestamp"], h["max_timestamp"]) == (T0, T0 + 21)
    else:
        assert (h["base_timestamp"], h["max_timestamp"]) == (-1, -1)
    got = flat(kp_read(b"".join(out)))
    assert [(o, t, k, v) for o, t, _tt, k, v, _h in got] == [
        (o, t if magic == 1 else -1, k, v) for o, t, k, v in recs + [(14, T0 + 99, None, b"x")]
    ]


def test_v1_log_append_time_wrapper_to_v2(tmp_path):
    recs = [(0, T0 + 1, b"a", b"x" * 30), (1, T0 + 2, b"b", b"y" * 30)]
    src = set_legacy_lat(kp_legacy(1, recs, codec=GZIP), T0 + 777)
    out, _ = run(tmp_path, src, ConvertOptions(magic=2))
    h = v2_header(out[0])
    assert h["attributes"] & 0x08 and h["max_timestamp"] == T0 + 777
    assert [(o, t, tt) for o, t, tt, *_ in flat(kp_read(out[0]))] == [(0, T0 + 777, 1), (1, T0 + 777, 1)]


# --------------------------------------------------------------------------- v0 <-> v1


def test_v0_v1_conversions(tmp_path):
    recs = [(5, T0, b"a", b"1"), (6, T0 + 1, None, b"2")]
    v0 = kp_legacy(0, recs)
    out, loss = run(tmp_path, v0, ConvertOptions(magic=0))
    assert b"".join(out) == v0  # same magic and codec: unchanged
    out, loss = run(tmp_path, v0, ConvertOptions(magic=1))
    got = flat(kp_read(b"".join(out)))
    assert [(o, t, tt, k, v) for o, t, tt, k, v, _ in got] == [(5, -1, 0, b"a", b"1"), (6, -1, 0, None, b"2")]
    assert all(LEG.unpack_from(e, 0)[3] == 1 for e in out)
    v1 = kp_legacy(1, recs, codec=SNAPPY)
    out, loss = run(tmp_path, v1, ConvertOptions(magic=0))
    assert loss.timestamps_dropped == 2
    (entry,) = out
    assert LEG.unpack_from(entry, 0)[:1] == (6,) and LEG.unpack_from(entry, 0)[3:] == (0, SNAPPY)
    assert [(o, t) for o, t, *_ in flat(kp_read(entry))] == [(5, -1), (6, -1)]
    # uncompressed messages into a codec: coalesced into one wrapper
    out, loss = run(tmp_path, kp_legacy(1, recs), ConvertOptions(magic=1, codec=GZIP))
    assert len(out) == 1 and [o for o, _a, _t in gunzip_inner(out[0], 1)] == [0, 1]
    assert [(o, t) for o, t, *_ in flat(kp_read(out[0]))] == [(5, T0), (6, T0 + 1)]


# --------------------------------------------------------------------------- aborted, dry, salvage, errors


def test_drop_aborted_and_aborted_kept_counts(tmp_path):
    src = (kp_v2(sample(2), base_offset=0, transactional=True, producer_id=1, producer_epoch=0)
           + control_batch(2, 1, 0)  # ABORT
           + kp_v2(sample(1, base=3), base_offset=3))
    seg = tmp_path / "00000000000000000000.log"
    seg.write_bytes(src)
    aborted = find_aborted([Segment.at(str(seg))])
    out, loss = run(tmp_path, src, ConvertOptions(magic=1), aborted=aborted)
    assert loss.aborted_records_kept == 2 and [g[0] for g in flat(kp_read(b"".join(out)))] == [0, 1, 3]
    out, loss = run(tmp_path, src, ConvertOptions(magic=1, drop_aborted=True), aborted=aborted)
    assert loss.aborted_records_dropped == 2 and [g[0] for g in flat(kp_read(b"".join(out)))] == [3]
    out, loss = run(tmp_path, src, ConvertOptions(magic=2, codec=GZIP, drop_aborted=True), aborted=aborted)
    assert len(out) == 2 and v2_header(out[0])["base_offset"] == 2  # the marker stays
    out, loss = run(tmp_path, src, ConvertOptions(magic=2, codec=GZIP), aborted=AbortedSet())
    assert len(out) == 3 and loss.aborted_records_kept == 0


FIXTURE_LOGS = sorted(glob.glob(os.path.join(FIXTURES, "*", "*.log")))


@pytest.mark.parametrize("log", FIXTURE_LOGS, ids=lambda p: os.path.basename(os.path.dirname(p)))
def test_dry_counts_equal_real_counts(tmp_path, log):
    src = open(log, "rb").read()
    aborted = find_aborted([Segment.at(log)])
    for magic in (0, 1, 2):
        for codec in (None, NONE, GZIP, LZ4, ZSTD):
            for drop in (False, True):
                opts = ConvertOptions(magic=magic, codec=codec, drop_aborted=drop, max_batch_bytes=300)
                try:
                    out, real = run(tmp_path, src, opts, aborted=aborted)
                except KafkaToolError as e:
                    assert e.kind == "refused"
                    with pytest.raises(KafkaToolError):
                        run(tmp_path, src, opts, aborted=aborted, dry=True)
                    continue
                dout, dry = run(tmp_path, src, opts, aborted=aborted, dry=True)
                assert dout == []
                assert dry.as_dict() == real.as_dict(), (magic, codec, drop)
                assert real.batches_out == len(out)


def test_salvaged_batch_gets_a_new_crc(tmp_path):
    good = kp_v2(sample(3, base=0), base_offset=0, codec=GZIP)
    bad = bytearray(good)
    bad[17] ^= 0xFF  # the stored CRC only
    out, loss = run(tmp_path, bytes(bad), ConvertOptions(magic=2, salvage=True), salvaged=True)
    assert out == [good]  # same codec: the records section kept, the CRC computed again
    out, _ = run(tmp_path, bytes(bad), ConvertOptions(magic=2, codec=LZ4, salvage=True), salvaged=True)
    assert v2_header(out[0])["crc"] == calc_crc32c(out[0][21:])
    v1 = bytearray(kp_legacy(1, [(0, T0, b"k", b"v")]))
    v1[12] ^= 0x01
    out, _ = run(tmp_path, bytes(v1), ConvertOptions(magic=1, salvage=True), salvaged=True)
    assert out == [kp_legacy(1, [(0, T0, b"k", b"v")])]


def test_records_that_do_not_decode_raise_located_and_feed_is_atomic(tmp_path):
    good = kp_v2(sample(3, base=0), base_offset=0)
    bad = bytearray(good)
    bad[61] = 0x7E  # first record's length varint: 63 bytes, past the batch end
    struct.pack_into(">I", bad, 17, calc_crc32c(bytes(bad[21:])))
    msgs = kp_legacy(1, [(10, T0, b"a", b"x"), (11, T0, b"b", b"y")])
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(msgs + bytes(bad))
    loss = Loss()
    # v2 -> v2 never decodes records (the fast path): a legacy target does
    conv = BatchConverter(ConvertOptions(magic=1, codec=GZIP), loss, path=str(path))
    reader = Segment.at(str(path)).batches()
    batches = [(b, bytes(reader.data)) for b in reader]
    assert conv.feed(*batches[0]) == [] and conv.feed(*batches[1]) == []  # a run pending
    before = loss.as_dict()
    with pytest.raises(KafkaToolError) as e:
        conv.feed(*batches[2])  # the v2 batch: flushes the run, then fails
    assert e.value.path == str(path) and e.value.position == len(msgs) + 61  # its first record
    assert loss.as_dict() == before  # nothing of the failed entry counted
    (entry,) = conv.flush()  # the run is still there
    assert [g[0] for g in flat(kp_read(entry))] == [10, 11]


def test_decompressed_size_cap(tmp_path):
    src = kp_v2([(0, T0, None, b"a" * 100_000, ())], base_offset=0, codec=GZIP)
    with pytest.raises(KafkaToolError) as e:
        run(tmp_path, src, ConvertOptions(magic=2, codec=LZ4, max_decompressed_bytes=50_000))
    assert e.value.kind == "decompressed_too_large" and e.value.position == 61
    out, _ = run(tmp_path, src, ConvertOptions(magic=2, codec=LZ4, max_decompressed_bytes=200_000))
    assert flat(kp_read(out[0]))[0][4] == b"a" * 100_000


def test_inner_crc_mismatch_refused_unless_salvaged(tmp_path):
    inner = bytearray(kp_legacy(1, [(0, T0, b"a", b"x"), (1, T0, b"b", b"y")]))
    inner[12] ^= 0x01  # first inner message's CRC
    payload = gzip.compress(bytes(inner))
    body = struct.pack(">bbq", 1, GZIP, T0) + struct.pack(">i", -1) + struct.pack(">i", len(payload)) + payload
    wrapper = struct.pack(">qiI", 1, len(body) + 4, zlib.crc32(body)) + body
    with pytest.raises(KafkaToolError) as e:
        run(tmp_path, wrapper, ConvertOptions(magic=2))
    assert e.value.kind == "inner_crc_mismatch" and e.value.position == 0
    out, _ = run(tmp_path, wrapper, ConvertOptions(magic=1))  # same magic and codec: copied, nothing re-encoded
    assert out == [wrapper]
    out, _ = run(tmp_path, wrapper, ConvertOptions(magic=2), salvaged=True)
    assert [g[0] for g in flat(kp_read(out[0]))] == [0, 1]


# --------------------------------------------------------------------------- the Loss report


def test_loss_lists_are_capped_and_merge_adds_up():
    from kafkatool.convert.options import MAX_LISTED, DamagedRange, Salvaged

    a, b = Loss(headers_dropped=2, header_count=3), Loss(records_in=5, timestamps_dropped=1)
    for i in range(MAX_LISTED + 5):
        a.add_damaged(DamagedRange("x.log", i, i + 1, "bad"))
    b.add_damaged(DamagedRange("y.log", 0, 9, "bad"))
    b.add_salvaged(Salvaged("y.log", 0, 7, 1, 2))
    a.merge(b)
    assert len(a.damaged) == MAX_LISTED and a.damaged_count == MAX_LISTED + 6
    assert (a.salvaged_count, len(a.salvaged), a.records_in, a.timestamps_dropped) == (1, 1, 5, 1)
    assert Loss(records_in=9, batches_out=3).any() is False
    assert Loss(aborted_records_kept=1).any() and Loss(salvaged_count=1).any()
    d = a.as_dict()
    assert list(d)[:4] == ["batches_in", "batches_out", "records_in", "records_out"]
    assert d["damaged"][0] == {"path": "x.log", "start": 0, "end": 1, "reason": "bad"}
    lines = a.lines()
    assert lines[0] == "2 records lost their headers (3 headers)"
    assert "1 record lost its timestamp (magic 0 has none)" in lines
    assert lines.count("  … and 6 more") == 1


def test_a_level_asked_recompresses_the_same_codec(tmp_path):
    recs = [(i, T0, None, b"abcdefgh" * 40 + bytes([i])) for i in range(30)]
    src = kp_v2([r + ((),) for r in recs], base_offset=0, codec=GZIP)
    out, _ = run(tmp_path, src, ConvertOptions(magic=2, codec=GZIP))
    assert out == [src]
    fast, _ = run(tmp_path, src, ConvertOptions(magic=2, codec=GZIP, level=1))
    best, _ = run(tmp_path, src, ConvertOptions(magic=2, codec=GZIP, level=9))
    assert len(fast[0]) > len(best[0])  # zlib: level 1 compresses this input less than level 9
    for out in (fast, best):
        assert v2_header(out[0])["attributes"] & 7 == GZIP
        assert [g[4] for g in flat(kp_read(out[0]))] == [r[3] for r in recs]
    legacy = kp_legacy(1, recs, codec=GZIP)
    assert run(tmp_path, legacy, ConvertOptions(magic=1, codec=GZIP))[0] == [legacy]
    (wrapper,) = run(tmp_path, legacy, ConvertOptions(magic=1, codec=GZIP, level=1))[0]
    assert wrapper != legacy and [g[4] for g in flat(kp_read(wrapper))] == [r[3] for r in recs]


def test_coalescing_into_a_legacy_wrapper_boundary(tmp_path):
    # uncompressed v1 messages asked into gzip: one wrapper per run, measured on the uncompressed
    # inner messages plus the wrapper's own overhead (12 + 22 bytes for v1, spec §5.1)
    recs = [(i, T0 + i, b"k", b"v" * (20 + i)) for i in range(5)]
    sizes = [LegacyRecordBatchBuilder(1, NONE, 1 << 20).size_in_bytes(o, t, k, v) for o, t, k, v in recs]
    whole = 12 + 22 + sum(sizes)
    out, _ = run(tmp_path, kp_legacy(1, recs), ConvertOptions(magic=1, codec=GZIP, max_batch_bytes=whole))
    assert len(out) == 1 and [o for o, _a, _t in gunzip_inner(out[0], 1)] == [0, 1, 2, 3, 4]
    out, _ = run(tmp_path, kp_legacy(1, recs), ConvertOptions(magic=1, codec=GZIP, max_batch_bytes=whole - 1))
    assert [LEG.unpack_from(e, 0)[0] for e in out] == [3, 4]  # wrapper offsets: the last inner ones
    assert [(o, t) for o, t, *_ in flat(kp_read(b"".join(out)))] == [(o, t) for o, t, _k, _v in recs]


def test_run_ends_where_offsets_do_not_follow(tmp_path):
    # offsets 5, 6, then 6 again and 3 (a log no broker writes): each out-of-order message starts a batch
    msgs = b"".join(kp_legacy(1, [(o, T0, b"k", b"v")]) for o in (5, 6, 6, 3))
    out, loss = run(tmp_path, msgs, ConvertOptions(magic=2))
    assert [(v2_header(e)["base_offset"], v2_header(e)["count"]) for e in out] == [(5, 2), (6, 1), (3, 1)]


@pytest.mark.parametrize("timestamps", [(T0, 0, T0 * 3, -1, T0 - 1), (-1, -1, -1, -1, -1)])
def test_coalescing_boundary_with_wide_timestamp_deltas(tmp_path, timestamps):
    # deltas of 8-9 varlong bytes (and negative ones): the size is kafka-python's, to the byte
    recs = [(300 + i * 200, ts, b"k" * 130, b"v" * (i * 70)) for i, ts in enumerate(timestamps)]
    src = kp_legacy(1, recs)
    whole = kp_v2_size(recs)
    assert len(run(tmp_path, src, ConvertOptions(magic=2, max_batch_bytes=whole))[0]) == 1
    out, _ = run(tmp_path, src, ConvertOptions(magic=2, max_batch_bytes=whole - 1))
    assert [len(e) for e in out] == [kp_v2_size(recs[:4]), kp_v2_size(recs[4:])]
    assert [(o, t) for o, t, *_ in flat(kp_read(b"".join(out)))] == [(o, t) for o, t, _k, _v in recs]
