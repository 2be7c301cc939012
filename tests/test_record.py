"""The record layer: varints, CRCs, codecs, v2 and legacy decoding (spec §1, §4, §5, §7)."""

from __future__ import annotations

import gzip
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkatool.errors import CompressionError, InvalidRecordError, KafkaToolError
from kafkatool.record.batch import increment_sequence
from kafkatool.record.compression import Codec, compress, decompress, lz4_header_checksum, xxh32, zstd_output_bound
from kafkatool.record.crc import crc32, crc32c
from kafkatool.record.v2 import RecordSpec, decode_header, decode_records, encode_batch, iter_batch_records
from kafkatool.record.varint import (
    decode_uvarint,
    decode_varint,
    decode_varlong,
    encode_uvarint,
    encode_varint,
    encode_varlong,
    size_of_varint,
    size_of_varlong,
)


def test_crc_vectors():
    assert crc32c(b"123456789") == 3808858755
    assert crc32(b"123456789") == 0xCBF43926
    assert xxh32(b"") == 0x02CC5D05


@given(st.integers(-(2**31), 2**31 - 1))
def test_varint_roundtrip(n):
    b = encode_varint(n)
    assert decode_varint(b, 0) == (n, len(b)) and size_of_varint(n) == len(b)


@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_roundtrip(n):
    b = encode_varlong(n)
    assert decode_varlong(b, 0) == (n, len(b)) and size_of_varlong(n) == len(b)


def test_varlong_sizes_at_the_byte_boundaries():
    """Zig-zag 63 -> 126 fits 7 bits, 64 -> 128 does not; -64 -> 127, -65 -> 129; the extremes take 10 bytes."""
    assert [size_of_varlong(v) for v in (0, 63, 64, -64, -65)] == [1, 1, 2, 1, 2]
    assert size_of_varlong(2**63 - 1) == size_of_varlong(-(2**63)) == 10


@given(st.integers(0, 2**35))
def test_uvarint_roundtrip(n):
    b = encode_uvarint(n)
    assert decode_uvarint(b, 0, max_bytes=10) == (n, len(b))


def test_varint_errors():
    with pytest.raises(InvalidRecordError, match="5th byte"):
        decode_varint(b"\xff\xff\xff\xff\xff\x01", 0)
    with pytest.raises(InvalidRecordError, match="10th byte"):
        decode_varlong(b"\xff" * 10 + b"\x01", 0)
    with pytest.raises(InvalidRecordError):
        decode_varint(b"\x80", 0)
    # only the top bit of the 5th byte is checked; higher bits overflow silently (§1)
    assert decode_varint(b"\xff\xff\xff\xff\x7f", 0)[1] == 5


def test_sequence_wrap():
    assert increment_sequence(2147483647, 1) == 0
    assert increment_sequence(2147483647, 2) == 1
    assert increment_sequence(5, 3) == 8


@pytest.mark.parametrize("codec,magic", [(c, m) for c in (1, 2, 3, 4) for m in (0, 1, 2) if not (c == 4 and m < 2)])
@pytest.mark.parametrize("data", [b"", b"x", os.urandom(5000), b"abc" * 40000])
def test_codec_roundtrip(codec, magic, data):
    assert decompress(codec, compress(codec, data, magic=magic), magic=magic) == data


def test_lz4_headers_by_magic():
    assert compress(Codec.LZ4, b"hi", magic=1)[:7] == bytes.fromhex("04224d18604082")
    assert compress(Codec.LZ4, b"hi", magic=0)[:7] == bytes.fromhex("04224d1860401a")
    assert lz4_header_checksum(bytes.fromhex("6040")) == 0x82
    assert lz4_header_checksum(bytes.fromhex("04224d186040")) == 0x1A


def test_lz4_kafka_rejections():
    import lz4.frame

    linked = bytearray(compress(Codec.LZ4, b"x" * 1000))
    linked[4] &= ~0x20  # clear block independence
    linked[6] = lz4_header_checksum(bytes(linked[4:6]))
    linked = bytes(linked)
    with pytest.raises(CompressionError, match="Dependent block stream is unsupported"):
        decompress(Codec.LZ4, linked)
    good = bytearray(compress(Codec.LZ4, b"x" * 1000, magic=2))
    good[6] ^= 0xFF
    with pytest.raises(CompressionError, match="Stream frame descriptor corrupted"):
        decompress(Codec.LZ4, bytes(good), magic=2)
    assert decompress(Codec.LZ4, bytes(good), magic=0) == b"x" * 1000  # HC skipped for magic 0
    with pytest.raises(CompressionError, match="invalid magic"):
        decompress(Codec.LZ4, b"\x00" * 10)
    with pytest.raises(CompressionError, match="Stream ended prematurely"):
        decompress(Codec.LZ4, b"\x04\x22")
    checksummed = lz4.frame.compress(b"y" * 100000, block_linked=False, block_checksum=True, block_size=lz4.frame.BLOCKSIZE_MAX64KB)
    assert decompress(Codec.LZ4, checksummed) == b"y" * 100000
    bad = bytearray(checksummed)
    bad[-8] ^= 1
    with pytest.raises(CompressionError):
        decompress(Codec.LZ4, bytes(bad))


def test_snappy_framings():
    import snappy

    data = b"hello " * 20000
    xerial = compress(Codec.SNAPPY, data)
    assert xerial[:16] == bytes.fromhex("82534e41505059000000000100000001")
    assert decompress(Codec.SNAPPY, xerial) == data
    assert decompress(Codec.SNAPPY, xerial + xerial) == data * 2  # concatenated streams
    assert decompress(Codec.SNAPPY, snappy.compress(data)) == data  # raw snappy accepted
    with pytest.raises(CompressionError, match="empty stream"):
        decompress(Codec.SNAPPY, b"")
    with pytest.raises(CompressionError):
        decompress(Codec.SNAPPY, xerial[:-3])


def test_gzip_multi_member_and_flags():
    a = gzip.compress(b"first ")
    b = gzip.compress(b"second", mtime=0)
    assert decompress(Codec.GZIP, a + b) == b"first second"
    with pytest.raises(CompressionError):
        decompress(Codec.GZIP, a[:-4])


def test_zstd_bound_and_bombs():
    import zstandard

    bomb = zstandard.ZstdCompressor().compress(b"\0" * (32 << 20))
    assert zstd_output_bound(bomb) >= 32 << 20
    with pytest.raises(CompressionError, match="exceeds the limit"):
        decompress(Codec.ZSTD, bomb, max_output=1 << 20)
    assert len(decompress(Codec.ZSTD, bomb)) == 32 << 20
    x = compress(Codec.ZSTD, b"data" * 1000)
    for cut in range(0, len(x), 7):
        with pytest.raises(CompressionError):
            decompress(Codec.ZSTD, x[:cut])


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.LZ4, Codec.SNAPPY])
def test_bombs_capped(codec):
    data = compress(codec, b"\0" * (8 << 20))
    with pytest.raises(CompressionError, match="exceeds the limit"):
        decompress(codec, data, max_output=1 << 20)


def test_unknown_codec():
    with pytest.raises(InvalidRecordError, match="Unknown compression type id: 6"):
        decompress(6, b"x")
    with pytest.raises(InvalidRecordError, match="ZStandard compression is not supported for magic 1"):
        compress(Codec.ZSTD, b"x", magic=1)


# ---------------------------------------------------------------- v2 records


def _batch(n=3, **kw):
    return encode_batch([RecordSpec(i, 1000 + i, b"k%d" % i, b"v" * i, [("h", b"x")] if i % 2 else []) for i in range(n)], **kw)


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_v2_roundtrip(codec):
    data = _batch(5, codec=codec, producer_id=7, producer_epoch=1, base_sequence=10)
    b = decode_header(data)
    assert b.crc_valid and b.count == 5 and b.last_offset == 4 and b.codec == codec
    recs = iter_batch_records(b, data)
    assert [r.offset for r in recs] == list(range(5))
    assert [r.sequence for r in recs] == list(range(10, 15))
    assert recs[1].headers == ((b"h", b"x"),)


def test_decode_records_every_prefix_and_trailing_bytes():
    """h11 discipline: the whole buffer, every prefix, and with trailing bytes."""
    data = _batch(4)
    buf = data[61:]
    assert len(decode_records(buf, 0, len(buf), 4)) == 4
    for cut in range(len(buf)):
        with pytest.raises(InvalidRecordError):
            decode_records(buf, 0, cut, 4)
    with pytest.raises(InvalidRecordError, match="records still remaining"):
        decode_records(buf + b"\x00", 0, len(buf) + 1, 4)


@settings(max_examples=300)
@given(st.binary(max_size=200), st.integers(-2, 20))
def test_decode_records_garbage_only_our_error(buf, count):
    try:
        decode_records(buf, 0, len(buf), count)
    except KafkaToolError as e:
        assert e.position is not None


# ---------------------------------------------------------------- streamed records (issue 9: record-count bombs)
#
# A batch's records are decoded a chunk at a time from a decompressed stream, so that memory
# stays flat whatever its record count says. The contract: the chunks joined, or the error,
# are exactly what one decode of the whole decompressed buffer gives, for every way the
# stream can be cut; and the C and Python chunk decoders agree on every input.

import itertools  # noqa: E402
import struct  # noqa: E402
import zlib  # noqa: E402

from kafkatool.errors import CorruptRecordError  # noqa: E402
from kafkatool.record import compression as compression_mod  # noqa: E402
from kafkatool.record import legacy as legacy_mod  # noqa: E402
from kafkatool.record import v2 as v2_mod  # noqa: E402
from kafkatool.record.batch import Batch, Record  # noqa: E402
from kafkatool.record.compression import iter_decompress  # noqa: E402
from kafkatool.record.legacy import decode_message, encode_legacy, iter_legacy_record_chunks  # noqa: E402
from kafkatool.record.records import batch_record_chunks, decode_batch_records  # noqa: E402
from kafkatool.record.v2 import decode_records_part, encode_record, iter_batch_record_chunks  # noqa: E402

try:
    from kafkatool.record import _speedups
except ImportError:  # pragma: no cover - depends on the build (CI stops earlier without it)
    _speedups = None

PART_DECODERS = [pytest.param(decode_records_part, id="python")] + (
    [pytest.param(_speedups.decode_records_part, id="c")] if _speedups is not None else []
)


def _outcome(fn, *args):
    try:
        return ("ok", fn(*args))
    except KafkaToolError as e:
        return ("error", type(e), e.message, e.position)
    except ValueError as e:
        return ("value", str(e))


_record = st.builds(
    encode_record,
    st.integers(-70, 70),
    st.integers(-70, 70) | st.integers(-(2**40), 2**40),
    st.none() | st.binary(max_size=12),
    st.none() | st.binary(max_size=12),
    st.lists(st.tuples(st.binary(max_size=4), st.none() | st.binary(max_size=4)), max_size=2),
)


@st.composite
def record_bytes(draw):
    """Valid records, often damaged: a byte flipped, cut short, bytes inserted or appended."""
    buf = bytearray(b"".join(draw(st.lists(_record, max_size=6))))
    for _ in range(draw(st.integers(0, 2))):
        how = draw(st.sampled_from(["flip", "cut", "insert", "append"]))
        if how == "flip" and buf:
            buf[draw(st.integers(0, len(buf) - 1))] = draw(st.integers(0, 255))
        elif how == "cut" and buf:
            del buf[draw(st.integers(0, len(buf) - 1)) :]
        elif how == "insert":
            at = draw(st.integers(0, len(buf)))
            buf[at:at] = draw(st.binary(min_size=1, max_size=5))
        else:
            buf += draw(st.binary(min_size=1, max_size=5))
    return bytes(buf)


@pytest.mark.skipif(_speedups is None, reason="C extension kafkatool.record._speedups is not built")
@settings(max_examples=200)
@given(record_bytes(), st.data())
def test_decode_records_part_c_matches_python(buf, data):
    pos = data.draw(st.integers(0, len(buf)))
    end = data.draw(st.integers(pos, len(buf)))
    limit = data.draw(st.integers(0, 8))
    budget = data.draw(st.integers(0, 40) | st.just(1 << 40))
    final = data.draw(st.booleans())
    expected = _outcome(decode_records_part, buf, pos, end, limit, budget, final)
    for b in (buf, bytearray(buf), memoryview(buf)):
        assert _outcome(_speedups.decode_records_part, b, pos, end, limit, budget, final) == expected


@pytest.mark.parametrize("part", PART_DECODERS)
def test_decode_records_part_arguments(part):
    one = encode_record(0, 0, None, None)
    assert part(one * 3, 0, 3 * len(one), 2, 1 << 30, True)[1:] == (2 * len(one), 0)
    assert part(one * 3, 0, 3 * len(one), 9, len(one), True)[1:] == (len(one), 0)  # the budget stops it
    assert part(b"", 0, 0, 0, 0, True) == ([], 0, 0)
    for bad in ((b"", 0, 0, -1, 0, True), (b"", 0, 0, 0, -1, True), (b"", 0, 1, 1, 1, True)):
        with pytest.raises(ValueError):
            part(*bad)


def _v2_batch_model(codec: int = 0, count: int = 0) -> Batch:
    # the header fields _records reads: offset 100, CreateTime, base timestamp 1000, sequences from 5
    return Batch(0, 61, 100, 2, 0, codec, 0, 1000, 1000, 7, 0, 5, count, 0, 0)


def _whole(buf: bytes, count: int):
    """The reference: one decode_records call over the whole decompressed stream."""
    try:
        return ("ok", v2_mod._records(_v2_batch_model(1, count), decode_records(buf, 0, len(buf), count)))
    except InvalidRecordError as e:
        return ("error", InvalidRecordError, f"{e.message} (at byte {e.position} of the decompressed records)", 61)


def _streamed(buf: bytes, count: int, cuts: list[int], chunk_records: int, chunk_bytes: int, tail_error=None):
    pieces = [buf[a:b] for a, b in zip([0, *cuts], [*cuts, len(buf)])]

    def stream():
        yield from (p for p in pieces if p)
        if tail_error is not None:
            raise tail_error

    out: list[Record] = []
    try:
        for chunk in v2_mod._stream_records(_v2_batch_model(1, count), stream(), count, chunk_records, chunk_bytes):
            assert 0 < len(chunk) <= chunk_records
            out.extend(chunk)
    except KafkaToolError as e:
        return ("error", type(e), e.message, e.position)
    return ("ok", out)


@pytest.mark.parametrize("part", PART_DECODERS)
@settings(max_examples=150)
@given(record_bytes(), st.data())
def test_streamed_records_equal_one_decode_however_the_stream_is_cut(part, buf, data):
    count = data.draw(st.integers(1, 8))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(buf)), max_size=6)))
    chunk_records = data.draw(st.integers(1, 4))
    chunk_bytes = data.draw(st.integers(0, 30))
    original = v2_mod._decode_part
    v2_mod._decode_part = part
    try:
        assert _streamed(buf, count, cuts, chunk_records, chunk_bytes) == _whole(buf, count)
        # a stream that fails at its end is what is reported, whatever the records hold
        failing = CompressionError("Failed to decompress record stream (test)")
        assert _streamed(buf, count, cuts, chunk_records, chunk_bytes, failing)[:3] == (
            "error", CompressionError, "Failed to decompress record stream (test)"
        )
    finally:
        v2_mod._decode_part = original


# Records that read past their own end: a tsd varlong running to the record's end, then the
# one-byte fast paths of offsetDelta, keyLength, valueLength and headerCount read the 4 bytes
# after it (so the answer depends on whether those bytes exist: the decoder must wait for them).
_OVERREADS = [
    encode_varint(6) + b"\x00" + b"\x80\x80\x80\x80\x00" + b"\x00\x01\x01\x00",  # read 10 of 6 bytes
    encode_varint(6) + b"\x00" + b"\x80\x80\x80\x80\x00" + b"\x00\x01\x01",  # ends inside the over-read
    encode_varint(7) + b"\x00" + b"\x80\x80\x80\x80\x00" + b"\x00" + b"\x01\x01\x02",  # hc 1 past the end
    encode_varint(6) + b"\x00\x00\x00\x01\x01\x00" + b"\x05",  # a good record, then a cut-off one
]


@pytest.mark.parametrize("part", PART_DECODERS)
@pytest.mark.parametrize("tail", _OVERREADS)
def test_a_record_that_reads_past_its_end_decodes_the_same_wherever_the_stream_is_cut(part, tail, monkeypatch):
    monkeypatch.setattr(v2_mod, "_decode_part", part)
    good = encode_record(0, 0, b"k", b"v")
    for buf in (tail, good + tail, good * 3 + tail + good):
        for count in (1, 2, 4, 5):
            expected = _whole(buf, count)
            for cut in range(len(buf) + 1):
                assert _streamed(buf, count, [cut], 2, 5) == expected, (buf.hex(), count, cut)
            assert _streamed(buf, count, list(range(1, len(buf))), 1, 0) == expected


def test_a_negative_record_length_names_the_bytes_left_in_the_whole_stream():
    # the length varint of the second record is -3: the error counts the bytes to the stream's end
    good = encode_record(0, 0, None, b"v")
    buf = good + encode_varint(-3) + bytes(5000)
    expected = _whole(buf, 3)
    assert "but instead the buffer has only 5000 remaining bytes." in expected[2]
    for cuts in ([], [len(good) + 1], list(range(1, len(buf), 97))):
        assert _streamed(buf, 3, cuts, 2, 8) == expected


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD])
def test_compressed_batches_stream_their_records(codec, monkeypatch):
    monkeypatch.setattr(compression_mod, "STREAM_CHUNK", 1000)  # many small output chunks
    specs = [RecordSpec(i, 1000 + i, b"k%d" % i, b"v" * (i % 50), [("h", b"x")] if i % 3 else []) for i in range(5000)]
    data = encode_batch(specs, codec=codec, base_sequence=2147483640)
    b = decode_header(data)
    chunks = list(iter_batch_record_chunks(b, data, chunk_records=700))
    assert len(chunks) > 7 and all(0 < len(c) <= 700 for c in chunks)
    records = [r for c in chunks for r in c]
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records] == [
        (s.offset, s.timestamp, s.key, s.value, tuple((k.encode(), v) for k, v in s.headers)) for s in specs
    ]
    assert records[-1].sequence == increment_sequence(2147483640, 4999)
    assert records == iter_batch_records(b, data) == decode_batch_records(b, data)


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.ZSTD])
def test_a_record_error_waits_for_the_stream_to_fail_first(codec, monkeypatch):
    """A whole decompression found a broken stream before any record: streamed, the rest of
    the stream is read when a record fails, and a broken stream is still what is reported."""
    monkeypatch.setattr(compression_mod, "STREAM_CHUNK", 512)
    bad_records = encode_varint(-5) + bytes(20000)  # the first record's length is negative
    payload = bytearray(compress(codec, bad_records))
    payload[-2] ^= 0xFF  # gzip: the ISIZE trailer; zstd: the last block
    data = bytearray(_batch(1))
    b = decode_header(bytes(data))
    raw = bytes(data[:61]) + bytes(payload)
    b = b._replace(size=len(raw), attributes=codec, count=3)
    with pytest.raises(CompressionError) as e1:
        decompress(codec, bytes(payload))
    with pytest.raises(CompressionError) as e2:
        for _chunk in iter_batch_record_chunks(b, raw):
            pass
    assert (e2.value.message, e2.value.position) == (e1.value.message, 61)


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD])
@pytest.mark.parametrize("magic", [0, 1, 2])
def test_iter_decompress_chunks_join_to_decompress(codec, magic):
    if codec == Codec.ZSTD and magic < 2:
        return
    rng = __import__("random").Random(codec * 10 + magic)
    data = bytes(rng.randrange(4) for _ in range(300_000)) + b"z" * 200_000
    c = compress(codec, data, magic=magic)
    variants = [c, c[:-1], c[: len(c) // 2], c + b"\x00\x00"]
    for _ in range(10):
        m = bytearray(c)
        m[rng.randrange(len(m))] ^= 1 << rng.randrange(8)
        variants.append(bytes(m))
    for v in variants:
        for cap in (1000, 250_000, 1 << 30):
            try:
                whole = ("ok", decompress(codec, v, magic=magic, max_output=cap))
            except CompressionError as e:
                whole = ("error", e.message)
            got = []
            try:
                for chunk in iter_decompress(codec, v, magic=magic, max_output=cap, chunk_size=4096):
                    # (lz4 and snappy yield whole blocks, zstd at least one block of <= 128 KiB)
                    assert chunk and len(chunk) <= {Codec.GZIP: 4096, Codec.ZSTD: 128 << 10}.get(codec, 4 << 20)
                    got.append(chunk)
                streamed = ("ok", b"".join(got))
            except CompressionError as e:
                streamed = ("error", e.message)
            assert streamed == whole
    assert b"".join(iter_decompress(codec, c, magic=magic, chunk_size=4096)) == data


def test_the_snappy_limit_message_names_the_cap():
    """Issue 9: a xerial stream that passes the cap in its second chunk named what was left
    of the cap ("the limit of 0 bytes"), not the cap."""
    import snappy

    header = bytes.fromhex("82534e41505059000000000100000001")
    chunk = snappy.compress(b"\0" * 30000)
    stream = header + (struct.pack(">i", len(chunk)) + chunk) * 2
    with pytest.raises(CompressionError) as e:
        decompress(Codec.SNAPPY, stream, max_output=40000)
    assert e.value.message == "Decompressed size exceeds the limit of 40000 bytes (snappy)"
    assert decompress(Codec.SNAPPY, stream, max_output=60000) == b"\0" * 60000


def test_a_huge_record_count_is_never_preallocated():
    import tracemalloc

    data = _batch(3)
    b = decode_header(data)._replace(count=2**31 - 1)
    for compressed in (False, True):
        raw = data if not compressed else encode_batch([RecordSpec(0, 0, None, b"x")], codec=Codec.ZSTD)
        bb = b if not compressed else decode_header(raw)._replace(count=2**31 - 1)
        tracemalloc.start()
        try:
            with pytest.raises(InvalidRecordError, match="premature EOF"):
                for _chunk in batch_record_chunks(bb, raw):
                    pass
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 1 << 20


# ---------------------------------------------------------------- legacy wrappers, streamed


def _legacy_reference(batch: Batch, data: bytes) -> list[Record]:
    """Deep iteration of a legacy entry as it was before streaming (spec §5.2, step by step):
    the wrapper's whole value decompressed, every inner message decoded, then the records."""
    offset, size, crc, magic, attrs, ts, key, value, valid = decode_message(data, 0, batch.size)
    codec = attrs & 0x07
    if codec == Codec.NONE:
        return [Record(offset, ts, key, value, (), -1, attrs, crc, valid, magic)]
    if codec == Codec.ZSTD:
        raise InvalidRecordError(f"Invalid wrapper compressionType found in legacy deep record iterator {magic}", position=0)
    if value is None:
        raise InvalidRecordError(f"Found invalid compressed record set with null value (magic = {magic})", position=0)
    value_start = batch.size - len(value)
    try:
        inner = decompress(codec, value, magic=magic)
    except CompressionError as e:
        raise CompressionError(e.message, position=value_start) from None
    entries, pos, end = [], 0, len(inner)
    while end - pos >= 12:
        (isize,) = struct.unpack_from(">i", inner, pos + 8)
        if isize < 14:
            raise CorruptRecordError(
                f"Record size is less than the minimum record overhead (14) (inner message at byte {pos} of the decompressed wrapper)",
                position=value_start,
            )
        if pos + 12 + isize > end:
            break
        try:
            entries.append(decode_message(inner, pos, end))
        except (InvalidRecordError, CorruptRecordError) as e:
            raise type(e)(f"{e.message} (inner message at byte {e.position} of the decompressed wrapper)", position=value_start) from None
        pos += 12 + isize
    if not entries:
        raise InvalidRecordError("Found invalid compressed record set with no inner records", position=value_start)
    base = 0
    if magic == 1 and offset != 0:
        last_rel = entries[-1][0]
        if offset < last_rel:
            raise InvalidRecordError(
                f"Found invalid wrapper offset in compressed v1 message set, wrapper offset '{offset}' is less than the last inner message offset '{last_rel}' and it is not zero.",
                position=0,
            )
        base = offset - last_rel
    out = []
    for ioff, _s, icrc, imagic, iattrs, its, ikey, ivalue, ivalid in entries:
        if iattrs & 0x07:
            raise InvalidRecordError("Inner messages must not be compressed", position=value_start)
        rts = -1 if imagic == 0 else (ts if magic == 1 and attrs & 0x08 else its)
        out.append(Record(base + ioff if magic == 1 else ioff, rts, ikey, ivalue, (), -1, iattrs, icrc, ivalid, imagic))
    return out


def _wrapper(magic: int, codec: int, inner: bytes, offset: int, ts_type_bit: int = 0, damage=None) -> bytes:
    body = struct.pack(">bbq" if magic == 1 else ">bb", magic, codec | ts_type_bit, *((1234,) if magic == 1 else ()))
    value = compress(codec, inner, magic=magic)
    if damage is not None:  # (at, xor): a compressed stream that fails, somewhere
        value = bytearray(value)
        value[damage[0] % len(value)] ^= damage[1]
        value = bytes(value)
    body += struct.pack(">i", -1) + struct.pack(">i", len(value)) + value
    return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body)) + body


@st.composite
def inner_stream(draw):
    """Inner messages of a wrapper, often damaged."""
    magic = draw(st.sampled_from([0, 1]))
    n = draw(st.integers(0, 6))
    offsets = draw(st.lists(st.integers(-3, 50), min_size=n, max_size=n))
    buf = bytearray()
    for o in offsets:
        buf += encode_legacy([RecordSpec(o, 5, draw(st.none() | st.binary(max_size=6)), draw(st.none() | st.binary(max_size=6)))], magic=draw(st.sampled_from([0, 1])))
    if draw(st.booleans()) and buf:
        buf[draw(st.integers(0, len(buf) - 1))] = draw(st.integers(0, 255))
    if draw(st.booleans()):
        buf += draw(st.binary(max_size=30))
    return magic, bytes(buf)


@settings(max_examples=150)
@given(inner_stream(), st.sampled_from([Codec.GZIP, Codec.SNAPPY, Codec.LZ4]), st.integers(-1, 60), st.booleans(), st.data())
def test_streamed_legacy_records_equal_the_whole_decode(inner, codec, offset, lat, data):
    magic, buf = inner
    if not buf:
        buf = b"\x00"  # (compressors need something)
    damage = data.draw(st.none() | st.tuples(st.integers(0, 10**6), st.integers(1, 255)))
    raw = _wrapper(magic, codec, buf, offset, 0x08 if lat else 0, damage)
    b = Batch(0, len(raw), offset, magic, 0, (codec | (0x08 if lat else 0)), 0, 1234, 1234, -1, -1, -1, None, -1, 0)
    expected = _outcome(_legacy_reference, b, raw)
    saved = (compression_mod.STREAM_CHUNK, legacy_mod.KEEP_INNER_MESSAGES)
    try:
        compression_mod.STREAM_CHUNK = data.draw(st.integers(1, 64))  # gzip output cut anywhere
        legacy_mod.KEEP_INNER_MESSAGES = data.draw(st.sampled_from([0, 2, 4096]))  # kept, or decompressed twice
        chunk_records = data.draw(st.integers(1, 3))
        try:
            got = ("ok", [r for c in iter_legacy_record_chunks(b, raw, chunk_records=chunk_records) for r in c])
        except KafkaToolError as e:
            got = ("error", type(e), e.message, e.position)
    finally:
        compression_mod.STREAM_CHUNK, legacy_mod.KEEP_INNER_MESSAGES = saved
    assert got == expected


def test_a_legacy_wrapper_of_many_inner_messages_is_read_twice_not_kept(monkeypatch):
    monkeypatch.setattr(compression_mod, "STREAM_CHUNK", 4096)
    specs = [RecordSpec(i, 1000 + i, b"k", b"v%d" % i) for i in range(10_000)]
    for magic in (0, 1):
        raw = encode_legacy(specs, magic=magic, codec=Codec.GZIP)
        from kafkatool.record.legacy import decode_legacy_header

        b = decode_legacy_header(raw)
        calls = []
        real = legacy_mod.iter_decompress
        monkeypatch.setattr(legacy_mod, "iter_decompress", lambda *a, **k: calls.append(1) or real(*a, **k))
        chunks = list(iter_legacy_record_chunks(b, raw))
        assert len(calls) == 2  # larger than KEEP_INNER_MESSAGES: decompressed again for pass 2
        assert max(len(c) for c in chunks) <= legacy_mod.CHUNK_RECORDS
        assert [(r.offset, r.value) for c in chunks for r in c] == [(s.offset, s.value) for s in specs]
        assert [r for c in chunks for r in c] == _legacy_reference(b, raw)
        monkeypatch.setattr(legacy_mod, "iter_decompress", real)


def test_a_zstd_window_beyond_kafkas_limit_is_refused():
    """The window a zstd frame declares is memory its decoder needs (as far as the output
    goes): up to 128 MiB (windowLog 27, libzstd's default limit, which Kafka's reader keeps)
    is decoded, more fails as it does in Kafka, instead of growing to 2 GiB."""
    import zstandard

    data = b"0123456789" * 1000
    for window_log, ok in ((27, True), (28, False), (31, False)):
        params = zstandard.ZstdCompressionParameters.from_level(3, window_log=window_log, write_content_size=False)
        co = zstandard.ZstdCompressor(compression_params=params).compressobj()
        frame = co.compress(data) + co.flush()  # streamed, as Kafka writes: no content size
        assert zstandard.get_frame_parameters(frame).window_size == 1 << window_log
        if ok:
            assert decompress(Codec.ZSTD, frame) == data
        else:
            with pytest.raises(CompressionError, match="Frame requires too much memory"):
                decompress(Codec.ZSTD, frame)


@st.composite
def snappy_blocks(draw):
    """Raw snappy blocks (python-snappy's compressor), often damaged."""
    kind = draw(st.sampled_from(["random", "few", "periodic"]))
    size = draw(st.integers(0, 2500))
    if kind == "random":
        data = draw(st.binary(min_size=size, max_size=size))
    elif kind == "few":
        data = bytes(draw(st.lists(st.integers(0, 2), min_size=size, max_size=size)))
    else:
        data = (draw(st.binary(min_size=1, max_size=9)) * size)[:size]
    import snappy

    block = bytearray(snappy.compress(data))
    for _ in range(draw(st.integers(0, 2))):
        if not block:
            break
        if draw(st.booleans()):
            block[draw(st.integers(0, len(block) - 1))] = draw(st.integers(0, 255))
        else:
            del block[draw(st.integers(0, len(block) - 1)) :]
    return bytes(block)


@settings(max_examples=150)
@given(snappy_blocks(), st.integers(1, 300), st.sampled_from([64, 1000, 1 << 20]))
def test_a_large_raw_snappy_block_streams_as_the_library_decodes_it(block, chunk_size, window):
    """A raw block beyond 4 MiB (librdkafka writes raw snappy) is decoded element by element,
    keeping a window for its copies; what it cannot decode (damage, a copy from beyond the
    window) goes to the library. Here every block takes that path, with small windows."""
    import snappy

    try:
        expected = ("ok", snappy.uncompress(block))
    except Exception:
        expected = ("error",)
    saved = (compression_mod._SNAPPY_WHOLE, compression_mod._SNAPPY_WINDOW)
    compression_mod._SNAPPY_WHOLE, compression_mod._SNAPPY_WINDOW = 0, window
    try:
        chunks = list(iter_decompress(Codec.SNAPPY, block, chunk_size=chunk_size)) if block else []
        got = ("ok", b"".join(chunks))
    except CompressionError:
        got = ("error",)
    finally:
        compression_mod._SNAPPY_WHOLE, compression_mod._SNAPPY_WINDOW = saved
    if block:
        assert got == expected


def test_a_large_raw_snappy_block_is_never_held_whole(monkeypatch):
    import hashlib
    import random
    import tracemalloc

    import snappy

    monkeypatch.setattr(compression_mod, "_SNAPPY_WINDOW", 64 << 10)
    monkeypatch.setattr(compression_mod, "STREAM_CHUNK", 64 << 10)
    data = random.Random(1).randbytes(5 << 20) + bytes(range(7)) * 50_000  # > 4 MiB: one raw block, streamed
    block = snappy.compress(data)
    tracemalloc.start()
    try:
        digest = hashlib.sha256()
        for chunk in iter_decompress(Codec.SNAPPY, block):
            digest.update(chunk)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert digest.digest() == hashlib.sha256(data).digest()
    assert peak < 1 << 20  # a window and a chunk, not the 5.3 MiB


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD])
def test_a_view_of_signed_bytes_decompresses_as_its_bytes(codec):
    # a pyarrow Buffer's memoryview has format 'b': indexing it gives -128..127, which misread
    # the lz4 frame descriptor ("Stream frame descriptor corrupted")
    payload = bytes(range(256)) * 40
    packed = compress(codec, payload, magic=2)
    signed = memoryview(bytearray(packed)).cast("b")
    assert decompress(codec, signed, magic=2) == payload
    assert b"".join(iter_decompress(codec, signed, magic=2)) == payload
