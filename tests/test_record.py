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
    assert decode_varlong(b, 0) == (n, len(b))


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
