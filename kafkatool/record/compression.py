"""Compression codecs with Kafka's exact framing (spec §7).

A codec registry in the fastavro manner: each codec's library is imported only when a
batch needs it, and a missing library fails with an install hint. Every decoder takes
``max_output`` so a decompression bomb becomes a :class:`CompressionError`, not an
out-of-memory.

:func:`iter_decompress` reads a stream chunk by chunk (gzip and zstd in output chunks of
``chunk_size``, lz4 and xerial snappy block by block), so that what a batch decompresses
to is never held whole; :func:`decompress` is the same stream joined.
"""

from __future__ import annotations

import struct
import zlib
from enum import IntEnum
from typing import Callable, Iterator

from kafkatool.errors import CompressionError, InvalidRecordError, MissingDependencyError

__all__ = [
    "Codec",
    "codec_name",
    "compress",
    "decompress",
    "iter_decompress",
    "xxh32",
    "DEFAULT_MAX_DECOMPRESSED",
    "STREAM_CHUNK",
    "StreamBuffer",
]

#: Default cap on one batch's decompressed size: far above Kafka's largest legal batch
#: (``message.max.bytes`` is an int). Streamed, a batch never holds this much at once;
#: the cap bounds the time a bomb costs.
DEFAULT_MAX_DECOMPRESSED = 512 * 1024 * 1024

#: Output chunk of :func:`iter_decompress` for gzip, zstd and large snappy blocks (lz4
#: yields whole blocks: at most 4 MiB).
STREAM_CHUNK = 1 << 20
_FEED = 64 * 1024  # compressed bytes given to zlib per call: its unconsumed tail stays small


def _exceeds(max_output: int, codec: str) -> CompressionError:
    return CompressionError(f"Decompressed size exceeds the limit of {max_output} bytes ({codec})", kind="decompressed_too_large")


class Codec(IntEnum):
    """Compression codec ids, attribute bits 0-2 (§7.1)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def codec_name(codec_id: int) -> str:
    """Kafka's lowercase codec name; ids 5-7 raise like ``CompressionType.forId``."""
    try:
        return _NAMES[codec_id]
    except KeyError:
        raise InvalidRecordError(f"Unknown compression type id: {codec_id}") from None


_MODULES: dict[str, object] = {}


def _require(module: str, package: str):
    """The codec library ``module``, imported once; a missing one fails with an install hint."""
    mod = _MODULES.get(module)
    if mod is None:
        import importlib

        try:
            mod = _MODULES[module] = importlib.import_module(module)
        except ImportError:  # pragma: no cover - exercised only where a codec library is absent
            raise MissingDependencyError(
                f"this batch needs the {module!r} module: install it with `pip install {package}`"
            ) from None
    return mod


# --------------------------------------------------------------------------- gzip (§7.2)


def _gzip_compress(data: bytes, level: int | None, magic: int) -> bytes:
    co = zlib.compressobj(6 if level is None or level < 0 else level, zlib.DEFLATED, 31)
    return co.compress(data) + co.flush()


def _gzip_chunks(data: bytes | memoryview, max_output: int, chunk_size: int) -> Iterator[bytes]:
    # JDK GZIPInputStream accepts concatenated members: loop over them. The input goes to
    # zlib in _FEED pieces and the output comes back in chunk_size pieces, so neither the
    # unconsumed input tail nor the output is ever the whole stream.
    mv = memoryview(data)
    n = len(mv)
    if not n:
        raise CompressionError("Failed to decompress record stream (gzip: empty stream)")
    total = 0
    start = 0
    while start < n:
        d = zlib.decompressobj(31)
        ip = start
        feed: bytes | memoryview = b""
        while True:
            if not feed and ip < n:
                feed = mv[ip : ip + _FEED]
                ip += len(feed)
            limit = min(chunk_size, max_output - total + 1)
            try:
                chunk = d.decompress(feed, limit)
            except zlib.error as e:
                raise CompressionError(f"Failed to decompress record stream (gzip: {e})") from None
            total += len(chunk)
            if total > max_output:
                raise _exceeds(max_output, "gzip")
            if chunk:
                yield chunk
            if d.eof:
                break
            feed = d.unconsumed_tail
            if not feed and ip >= n and len(chunk) < limit:
                raise CompressionError("Failed to decompress record stream (gzip: truncated stream)")
        start = ip - len(d.unused_data)
        # JDK tolerates trailing zero padding / garbage after a member only if it is not a gzip header.
        if start < n and bytes(mv[start : start + 2]) != b"\x1f\x8b":
            break


# --------------------------------------------------------------------------- snappy (§7.3)

_SNAPPY_MAGIC = b"\x82SNAPPY\x00"
_SNAPPY_HEADER = _SNAPPY_MAGIC + b"\x00\x00\x00\x01\x00\x00\x00\x01"
_SNAPPY_BLOCK = 32 * 1024
_I32BE = struct.Struct(">i")


def _snappy_compress(data: bytes, level: int | None, magic: int) -> bytes:
    snappy = _require("snappy", "python-snappy")
    parts = [_SNAPPY_HEADER]
    mv = memoryview(data)
    for i in range(0, len(data), _SNAPPY_BLOCK):
        block = snappy.compress(bytes(mv[i : i + _SNAPPY_BLOCK]))
        parts.append(_I32BE.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_whole(snappy, block: bytes | memoryview) -> bytes:
    try:
        return bytes(snappy.uncompress(bytes(block)))
    except Exception as e:  # python-snappy/cramjam raise their own error types
        raise CompressionError(f"Failed to decompress record stream (snappy: {e})") from None


#: A raw snappy block that says it holds more than this is decoded as a stream, its output
#: in chunks, keeping the last _SNAPPY_WINDOW bytes for its copies to refer to (the snappy
#: compressors work in 64 KiB blocks: their copies never reach further back).
_SNAPPY_WHOLE = 4 << 20
_SNAPPY_WINDOW = 1 << 20


def _snappy_block_chunks(snappy, block: bytes | memoryview, budget: int, max_output: int, chunk_size: int) -> Iterator[bytes]:
    """One raw snappy block in chunks, refused before it is inflated when it would take the
    output past ``budget`` (what is left of the cap ``max_output``, which the message names)."""
    n, start = _uncompressed_length_snappy(block)
    if n > budget:
        raise _exceeds(max_output, "snappy")
    if n <= _SNAPPY_WHOLE:
        out = _snappy_whole(snappy, block)
        if out:
            yield out
        return
    # A large block is either a bomb or a rare big batch: decoded here, element by element
    # (format_description.txt of google/snappy), so that its output is never held whole.
    # Whatever this loop cannot decode (a malformed block, a copy from beyond the window)
    # goes to the library whole, for its error or, if it does decode, for the rest.
    mv = memoryview(block)
    end = len(mv)
    i = start
    hist = bytearray()  # the window, then the output not yielded yet (the last `pending` bytes)
    pending = produced = 0
    window = _SNAPPY_WINDOW
    from_bytes = int.from_bytes
    while i < end:
        tag = mv[i]
        i += 1
        kind = tag & 3
        if kind == 0:  # literal
            length = (tag >> 2) + 1
            if length > 60:
                k = length - 60
                if i + k > end:
                    break
                length = from_bytes(mv[i : i + k], "little") + 1
                i += k
            if i + length > end or produced + length > n:
                break
            hist += mv[i : i + length]
            i += length
        else:
            if kind == 1:
                if i >= end:
                    break
                length = ((tag >> 2) & 7) + 4
                offset = ((tag >> 5) << 8) | mv[i]
                i += 1
            elif kind == 2:
                if i + 2 > end:
                    break
                length = (tag >> 2) + 1
                offset = mv[i] | (mv[i + 1] << 8)
                i += 2
            else:
                if i + 4 > end:
                    break
                length = (tag >> 2) + 1
                offset = from_bytes(mv[i : i + 4], "little")
                i += 4
            if offset == 0 or offset > len(hist) or produced + length > n:
                break
            at = len(hist) - offset
            if length <= offset:
                hist += hist[at : at + length]
            else:  # overlapping: the last `offset` bytes repeat
                hist += (hist[at:] * (length // offset + 1))[:length]
        produced += length
        pending += length
        if pending >= chunk_size:
            yield bytes(memoryview(hist)[len(hist) - pending :])
            pending = 0
            if len(hist) > 2 * window:
                del hist[: len(hist) - window]
    else:
        if produced == n:
            if pending:
                yield bytes(memoryview(hist)[len(hist) - pending :])
            return
    out = _snappy_whole(snappy, block)  # raises the library's error, or decodes what this could not
    done = produced - pending
    if len(out) > done:
        yield out[done:]


def _uncompressed_length_snappy(block: bytes | memoryview) -> tuple[int, int]:
    # A raw snappy block starts with its uncompressed length as an unsigned varint:
    # (length, where the elements start).
    raw = 0
    shift = 0
    for i in range(min(5, len(block))):
        b = block[i]
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            return raw, i + 1
        shift += 7
    raise CompressionError("Failed to decompress record stream (snappy: bad block length)")


def _snappy_chunks(data: bytes | memoryview, max_output: int, chunk_size: int) -> Iterator[bytes]:
    # One xerial chunk at a time (Kafka's are 32 KiB). A stream that is not xerial-framed is
    # one raw block (librdkafka writes those), streamed when it is large.
    snappy = _require("snappy", "python-snappy")
    data = memoryview(data)
    if len(data) == 0:
        raise CompressionError("Failed to decompress record stream (Cannot decompress empty stream)")
    # xerial's reader: shorter than the header, or a different magic -> one raw block.
    if len(data) < 16 or bytes(data[:8]) != _SNAPPY_MAGIC:
        yield from _snappy_block_chunks(snappy, data, max_output, max_output, chunk_size)
        return
    total = 0
    pos = 16
    end = len(data)
    while pos < end:
        if end - pos < 4:
            raise CompressionError("Failed to decompress record stream (snappy: truncated chunk length)")
        (n,) = _I32BE.unpack_from(data, pos)
        if n == 0x82534E41 - 2**32 and bytes(data[pos : pos + 8]) == _SNAPPY_MAGIC:
            pos += 16  # a concatenated stream: a new header follows
            continue
        if n < 0:
            raise CompressionError(f"Failed to decompress record stream (chunkSize is too big or negative : {n})")
        pos += 4
        if pos + n > end:
            raise CompressionError("Failed to decompress record stream (snappy: truncated chunk)")
        for block in _snappy_block_chunks(snappy, data[pos : pos + n], max_output - total, max_output, chunk_size):
            total += len(block)
            yield block
        pos += n


# --------------------------------------------------------------------------- lz4 (§7.4)

_LZ4_MAGIC = 0x184D2204
_U32LE = struct.Struct("<I")
_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes, seed: int = 0) -> int:
    """XXH32, as used for LZ4 frame header and block checksums (pure Python; only small inputs)."""
    n = len(data)
    i = 0
    if n >= 16:
        v1 = (seed + _P1 + _P2) & _M32
        v2 = (seed + _P2) & _M32
        v3 = seed & _M32
        v4 = (seed - _P1) & _M32
        while i <= n - 16:
            a, b, c, d = struct.unpack_from("<4I", data, i)
            v1 = (_rotl((v1 + a * _P2) & _M32, 13) * _P1) & _M32
            v2 = (_rotl((v2 + b * _P2) & _M32, 13) * _P1) & _M32
            v3 = (_rotl((v3 + c * _P2) & _M32, 13) * _P1) & _M32
            v4 = (_rotl((v4 + d * _P2) & _M32, 13) * _P1) & _M32
            i += 16
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while i <= n - 4:
        (k,) = _U32LE.unpack_from(data, i)
        h = (_rotl((h + k * _P3) & _M32, 17) * _P4) & _M32
        i += 4
    while i < n:
        h = (_rotl((h + data[i] * _P5) & _M32, 11) * _P1) & _M32
        i += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


def lz4_header_checksum(descriptor: bytes) -> int:
    """The frame header checksum byte: second byte of XXH32 of ``descriptor``."""
    return (xxh32(descriptor) >> 8) & 0xFF


def _lz4_compress(data: bytes, level: int | None, magic: int) -> bytes:
    lz4frame = _require("lz4.frame", "lz4")
    out = bytearray(
        lz4frame.compress(
            data,
            compression_level=0 if level is None else level,
            block_size=lz4frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            block_checksum=False,
            store_size=False,
        )
    )
    if magic == 0:
        # KIP-57: magic-0 writers checksum magic||FLG||BD instead of FLG||BD (§7.4).
        out[6] = lz4_header_checksum(bytes(out[0:6]))
    return bytes(out)


def _lz4_chunks(data: bytes | memoryview, max_output: int, magic: int, chunk_size: int) -> Iterator[bytes]:
    lz4block = _require("lz4.block", "lz4")
    data = memoryview(data)
    if len(data) < 6:
        raise CompressionError("Failed to decompress record stream (Stream ended prematurely)")
    if _U32LE.unpack_from(data, 0)[0] != _LZ4_MAGIC:
        raise CompressionError("Failed to decompress record stream (Stream unsupported (invalid magic bytes))")
    flg = data[4]
    bd = data[5]
    version = (flg >> 6) & 3
    if version != 1:
        raise CompressionError(f"Failed to decompress record stream (Version {version} is unsupported)")
    if flg & 0x03:
        raise CompressionError("Failed to decompress record stream (Reserved bits must be 0)")
    if not flg & 0x20:
        raise CompressionError("Failed to decompress record stream (Dependent block stream is unsupported)")
    if bd & 0x80:
        raise CompressionError("Failed to decompress record stream (Reserved2 field must be 0)")
    if bd & 0x0F:
        raise CompressionError("Failed to decompress record stream (Reserved3 field must be 0)")
    size_code = (bd >> 4) & 7
    if size_code < 4:
        raise CompressionError("Failed to decompress record stream (Block size value must be between 4 and 7)")
    max_block = 1 << (2 * size_code + 8)
    block_checksum = bool(flg & 0x10)
    pos = 6
    if flg & 0x08:
        pos += 8  # content size: skipped, not checked
    if pos >= len(data):
        raise CompressionError("Failed to decompress record stream (Stream ended prematurely)")
    if magic != 0 and data[pos] != lz4_header_checksum(bytes(data[4:pos])):
        raise CompressionError("Failed to decompress record stream (Stream frame descriptor corrupted)")
    pos += 1  # magic 0: the HC byte is skipped entirely (KIP-57)
    if magic != 0 and not block_checksum and len(data) * 256 <= max_output:
        # The header passed Kafka's checks and LZ4 cannot inflate more than 255x, so the
        # whole frame fits the cap: let the C decoder do it, chunk_size bytes per call
        # (only the first frame, like Kafka).
        lz4frame = _require("lz4.frame", "lz4")
        dctx = lz4frame.LZ4FrameDecompressor()
        feed = bytes(data)
        # (python-lz4 allocates max_length up front: a small one costs less per batch)
        limit = min(chunk_size, 1 << 18)
        while True:
            try:
                out = dctx.decompress(feed, max_length=limit)
            except Exception as e:
                raise CompressionError(f"Failed to decompress record stream (lz4: {e})") from None
            feed = b""
            if out:
                yield out
            if dctx.eof:
                return
            if dctx.needs_input:
                raise CompressionError("Failed to decompress record stream (Stream ended prematurely)")
    total = 0
    end = len(data)
    while True:
        if end - pos < 4:
            raise CompressionError("Failed to decompress record stream (Stream ended prematurely)")
        (word,) = _U32LE.unpack_from(data, pos)
        pos += 4
        if word == 0:
            return  # end mark; a content checksum after it is read but not verified
        raw = bool(word & 0x80000000)
        n = word & 0x7FFFFFFF
        if n > max_block:
            raise CompressionError(f"Failed to decompress record stream (Block size {n} exceeded max: {max_block})")
        if end - pos < n:
            raise CompressionError("Failed to decompress record stream (Stream ended prematurely)")
        block = data[pos : pos + n]
        pos += n
        if block_checksum:
            if end - pos < 4:
                raise CompressionError("Failed to decompress record stream (Stream ended prematurely)")
            if _U32LE.unpack_from(data, pos)[0] != xxh32(bytes(block)):
                raise CompressionError("Failed to decompress record stream (Block checksum mismatch)")
            pos += 4
        if raw:
            out = bytes(block)
        else:
            try:
                out = lz4block.decompress(bytes(block), uncompressed_size=max_block)
            except Exception as e:
                raise CompressionError(f"Failed to decompress record stream (lz4: {e})") from None
        total += len(out)
        if total > max_output:
            raise _exceeds(max_output, "lz4")
        if out:
            yield out


# --------------------------------------------------------------------------- zstd (§7.5)


def _zstd_compress(data: bytes, level: int | None, magic: int) -> bytes:
    zstandard = _require("zstandard", "zstandard")
    # Streaming API, no content size pledged: the frames Kafka (zstd-jni) writes.
    co = zstandard.ZstdCompressor(level=3 if level is None else level, write_content_size=False).compressobj()
    return co.compress(data) + co.flush()


#: The largest zstd window a frame may declare: libzstd's default limit (windowLog 27), which
#: Kafka's reader (zstd-jni's ZstdInputStreamNoFinalizer, no limit set) keeps, so a frame
#: that needs more fails in Kafka too. The decoder's window buffer is the one buffer of a
#: streamed batch that can grow past a few MiB (as far as the batch's output goes).
ZSTD_MAX_WINDOW = 1 << 27

_ZSTD_IDLE: list = []


def _zstd_dctx_take():
    # Decompression contexts are reused (creating one per batch costs more than
    # decompressing a 16 KiB batch), but never shared by two live streams: a new
    # decompressobj resets its context, and a streamed batch may be read while
    # another stream is still open.
    if _ZSTD_IDLE:
        return _ZSTD_IDLE.pop()
    zstandard = _require("zstandard", "zstandard")
    return zstandard.ZstdDecompressor(max_window_size=ZSTD_MAX_WINDOW)


def _zstd_dctx_give_back(dctx) -> None:
    if len(_ZSTD_IDLE) < 4:
        _ZSTD_IDLE.append(dctx)


_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_BLOCK_MAX = 128 * 1024
_FCS_SIZES = (0, 2, 4, 8)
_DICT_SIZES = (0, 1, 2, 4)


def _zstd_blocks(mv: memoryview) -> Iterator[tuple[int, int, int, bool]]:
    """The blocks of the zstd frames in ``mv`` (RFC 8878 §3.1), skippable frames passed over:
    ``(start, end, bound, last)`` for each, where ``bound`` is the most it decompresses to,
    a frame's first block starts at the frame header and its last one (``last``) ends
    after the checksum. A truncated or malformed stream raises where it is found."""
    n = len(mv)
    pos = 0
    while pos < n:
        if n - pos < 4:
            raise CompressionError("Failed to decompress record stream (zstd: truncated frame header)")
        (magic,) = _U32LE.unpack_from(mv, pos)
        if 0x184D2A50 <= magic <= 0x184D2A5F:  # skippable frame
            if n - pos < 8:
                raise CompressionError("Failed to decompress record stream (zstd: truncated skippable frame)")
            pos += 8 + _U32LE.unpack_from(mv, pos + 4)[0]
            if pos > n:
                raise CompressionError("Failed to decompress record stream (zstd: truncated skippable frame)")
            continue
        if magic != _ZSTD_MAGIC:
            raise CompressionError(f"Failed to decompress record stream (zstd: unknown frame magic 0x{magic:08x})")
        if n - pos < 5:
            raise CompressionError("Failed to decompress record stream (zstd: truncated frame header)")
        fhd = mv[pos + 4]
        single_segment = (fhd >> 5) & 1
        fcs_size = _FCS_SIZES[fhd >> 6] or (1 if single_segment else 0)
        header = 5 + (0 if single_segment else 1) + _DICT_SIZES[fhd & 3] + fcs_size
        checksum = 4 if fhd & 0x04 else 0
        start = pos
        pos += header
        while True:
            if n - pos < 3:
                raise CompressionError("Failed to decompress record stream (zstd: truncated block header)")
            bh = mv[pos] | (mv[pos + 1] << 8) | (mv[pos + 2] << 16)
            pos += 3
            last = bh & 1
            btype = (bh >> 1) & 3
            bsize = bh >> 3
            if btype == 0:  # raw
                bound = bsize
                pos += bsize
            elif btype == 1:  # RLE: one byte, repeated bsize times
                bound = bsize
                pos += 1
            elif btype == 2:  # compressed
                bound = _ZSTD_BLOCK_MAX
                pos += bsize
            else:
                raise CompressionError("Failed to decompress record stream (zstd: reserved block type)")
            if pos > n:
                raise CompressionError("Failed to decompress record stream (zstd: truncated block)")
            if last:
                pos += checksum
                if pos > n:
                    raise CompressionError("Failed to decompress record stream (zstd: truncated checksum)")
                yield start, pos, bound, True
                break
            yield start, pos, bound, False
            start = pos


def zstd_output_bound(data: bytes | memoryview) -> int:
    """An upper bound on what the zstd frames in ``data`` decompress to, from their block headers.

    Walks every frame and block (RFC 8878 §3.1), so a truncated or malformed stream is
    found here, before anything is inflated; and a decompression bomb is known by its
    size before it is decompressed. Skippable frames are passed over.
    """
    return sum(bound for _s, _e, bound, _last in _zstd_blocks(memoryview(data)))


def _zstd_chunks(data: bytes | memoryview, max_output: int, chunk_size: int) -> Iterator[bytes]:
    zstandard = _require("zstandard", "zstandard")
    mv = memoryview(data)
    if not len(mv):
        raise CompressionError("Failed to decompress record stream (zstd: empty stream)")
    # Kafka's frames carry no content size; the block walk bounds the output (and finds a
    # malformed stream before anything is inflated). The decoder is then fed whole blocks,
    # at most chunk_size bytes of output at a time.
    bound = zstd_output_bound(mv)
    dctx = _zstd_dctx_take()
    try:
        if bound <= chunk_size and bound <= max_output:  # the usual batch: a frame at a time
            out = []
            rest = bytes(mv)
            while rest:
                if 0x184D2A50 <= _U32LE.unpack_from(rest, 0)[0] <= 0x184D2A5F:
                    rest = rest[8 + _U32LE.unpack_from(rest, 4)[0] :]
                    continue
                dobj = dctx.decompressobj()
                out.append(dobj.decompress(rest))
                if not dobj.eof:
                    raise CompressionError("Failed to decompress record stream (zstd: truncated frame)")
                rest = dobj.unused_data
            joined = b"".join(out)
            if joined:
                yield joined
            return
        total = 0
        dobj = None
        feed_start = feed_end = 0
        feed_bound = 0
        for start, end, block_bound, last in _zstd_blocks(mv):
            if dobj is None:
                dobj = dctx.decompressobj()
                feed_start, feed_bound = start, 0
            elif feed_bound + block_bound > chunk_size or total + feed_bound + block_bound > max_output:
                out = dobj.decompress(mv[feed_start:feed_end])
                total += len(out)
                if total > max_output:
                    raise _exceeds(max_output, "zstd")
                if out:
                    yield out
                feed_start, feed_bound = start, 0
            feed_end = end
            feed_bound += block_bound
            if last:
                out = dobj.decompress(mv[feed_start:feed_end])
                total += len(out)
                if total > max_output:
                    raise _exceeds(max_output, "zstd")
                if out:
                    yield out
                if not dobj.eof:
                    raise CompressionError("Failed to decompress record stream (zstd: truncated frame)")
                dobj = None
    except zstandard.ZstdError as e:
        raise CompressionError(f"Failed to decompress record stream (zstd: {e})") from None
    finally:
        _zstd_dctx_give_back(dctx)


_COMPRESSORS: dict[int, Callable[[bytes, int | None, int], bytes]] = {
    Codec.GZIP: _gzip_compress,
    Codec.SNAPPY: _snappy_compress,
    Codec.LZ4: _lz4_compress,
    Codec.ZSTD: _zstd_compress,
}


def compress(codec: int, data: bytes, *, magic: int = 2, level: int | None = None) -> bytes:
    """Compress ``data`` with Kafka's framing for ``codec`` as written by a ``magic`` producer."""
    if codec == Codec.NONE:
        return bytes(data)
    if codec == Codec.ZSTD and magic < 2:
        raise InvalidRecordError(f"ZStandard compression is not supported for magic {magic}")
    try:
        fn = _COMPRESSORS[codec]
    except KeyError:
        raise InvalidRecordError(f"Unknown compression type id: {codec}") from None
    return fn(bytes(data), level, magic)


def iter_decompress(
    codec: int,
    data: bytes | memoryview,
    *,
    magic: int = 2,
    max_output: int = DEFAULT_MAX_DECOMPRESSED,
    chunk_size: int | None = None,
) -> Iterator[bytes]:
    """Decompress one Kafka compressed stream chunk by chunk (non-empty chunks).

    gzip chunks are at most ``chunk_size`` bytes (default :data:`STREAM_CHUNK`, read at
    the call), zstd ones too or one block (at most 128 KiB); lz4 yields whole blocks (at
    most 4 MiB), snappy whole xerial chunks or raw blocks up to 4 MiB (larger ones in
    chunks too). A failure raises :class:`CompressionError` after the chunks before it, so
    the chunks joined, or the error, are exactly what :func:`decompress` returns or
    raises. Nothing is decompressed until the first chunk is asked for.
    """
    if chunk_size is None:
        chunk_size = STREAM_CHUNK
    if isinstance(data, memoryview) and data.format != "B":
        data = data.cast("B")  # a view of signed bytes (a pyarrow Buffer's) reads data[i] < 0
    if codec == Codec.NONE:
        return iter((bytes(data),) if len(data) else ())
    if codec == Codec.GZIP:
        return _gzip_chunks(data, max_output, chunk_size)
    if codec == Codec.SNAPPY:
        return _snappy_chunks(data, max_output, chunk_size)
    if codec == Codec.LZ4:
        return _lz4_chunks(data, max_output, magic, chunk_size)
    if codec == Codec.ZSTD:
        return _zstd_chunks(data, max_output, chunk_size)
    raise InvalidRecordError(f"Unknown compression type id: {codec}")


class StreamBuffer:
    """A carry-over buffer over a decompressed stream: ``buf[pos:]`` is what is read and not
    consumed yet, and ``buf[0]`` is byte ``base`` of the stream. A reader consumes from
    ``buf`` (moving ``pos``) and calls :meth:`read_more` when what is left is not enough;
    ``final`` says the stream has ended, so ``buf`` holds all there is."""

    __slots__ = ("stream", "buf", "base", "pos", "final")

    def __init__(self, stream: Iterator[bytes]) -> None:
        self.stream = stream
        first = next(stream, b"")
        second = next(stream, None)
        self.final = second is None  # the usual batch: one chunk, used as it is
        self.buf: bytes | bytearray = first if self.final else bytearray(first) + second
        self.base = 0
        self.pos = 0

    def read_more(self) -> None:
        """Drop what is consumed and append the next chunk, or set ``final``."""
        chunk = next(self.stream, None)
        if chunk is None:
            self.final = True
            return
        buf = self.buf
        if type(buf) is not bytearray:
            buf = self.buf = bytearray(buf)
        if self.pos:
            del buf[: self.pos]
            self.base += self.pos
            self.pos = 0
        buf += chunk

    def drain(self) -> int:
        """Read the stream to its end, raising what it raises: how many bytes were not consumed."""
        n = len(self.buf) - self.pos
        for chunk in self.stream:
            n += len(chunk)
        return n


def decompress(
    codec: int,
    data: bytes | memoryview,
    *,
    magic: int = 2,
    max_output: int = DEFAULT_MAX_DECOMPRESSED,
) -> bytes:
    """Decompress one Kafka compressed stream; raise :class:`CompressionError` on failure."""
    if codec == Codec.NONE:
        return bytes(data)
    return b"".join(iter_decompress(codec, data, magic=magic, max_output=max_output))
