"""Differential tests: the C ``walk_v2`` and ``crc32c`` against pure-Python references.

``walk_v2(buf, pos, end, file_position, batch_type)`` walks the complete v2 batches of
``buf[pos:end]`` (spec §3, §4.1) and returns ``(batches, next_pos, status)``. The
reference below is the contract: same Batch tuples, same next_pos, same status.
"""

from __future__ import annotations

import gc
import os
import random
import struct
import sys

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

crc32c_pkg = pytest.importorskip("crc32c")

from kafkatool.record.batch import Batch  # noqa: E402
from kafkatool.record.compression import Codec  # noqa: E402
from kafkatool.record.legacy import encode_message  # noqa: E402
from kafkatool.record.v2 import RecordSpec, encode_batch  # noqa: E402
from kafkatool.segment.walk import SegmentWalker, WalkStop  # noqa: E402

try:
    from kafkatool.record import _speedups
except ImportError:  # pragma: no cover - depends on the build
    _speedups = None

pytestmark = pytest.mark.skipif(
    _speedups is None or not hasattr(_speedups, "walk_v2"),
    reason="C extension kafkatool.record._speedups is not built or lacks walk_v2",
)

ref_crc = crc32c_pkg.crc32c
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

NEED_MORE, BAD_SIZE, LEGACY, SHORT_V2 = 0, 2, 3, 4
_HEADER = struct.Struct(">qiibIhiqqqhii")


# ----------------------------------------------------------------------------- reference


def ref_walk(buf, pos, end, file_position):
    """Pure-Python §3 walk of ``buf[pos:end]``: the contract of ``walk_v2``."""
    data = bytes(buf)[:end]  # never look at or past end
    out = []
    p = pos
    while True:
        if end - p <= 17:  # §3 step 1: a tail of <= 17 bytes is never parsed
            return out, p, NEED_MORE
        (size,) = struct.unpack_from(">i", data, p + 8)
        if size < 14:
            return out, p, BAD_SIZE
        total = size + 12
        if p + total > end:
            return out, p, NEED_MORE
        (magic,) = struct.unpack_from(">b", data, p + 16)
        if magic < 2:
            return out, p, LEGACY
        if total < 61:
            return out, p, SHORT_V2
        (b, _ln, ple, mg, crc, attrs, lod, bts, mts, pid, pep, bseq, cnt) = _HEADER.unpack_from(data, p)
        out.append(
            (file_position + p - pos, total, b, mg, crc, attrs & 0xFFFF, lod, bts, mts, pid, pep, bseq, cnt, ple,
             ref_crc(data[p + 21 : p + total]))
        )
        p += total


def c_walk(buf, pos, end, file_position=0):
    return _speedups.walk_v2(buf, pos, end, file_position, Batch)


def check(buf, pos=0, end=None, file_position=0):
    """Assert C == reference for bytes/bytearray/memoryview; return the outcome."""
    if end is None:
        end = len(buf)
    exp_batches, exp_next, exp_status = ref_walk(buf, pos, end, file_position)
    for b in (bytes(buf), bytearray(buf), memoryview(bytes(buf))):
        batches, nxt, status = c_walk(b, pos, end, file_position)
        assert type(batches) is list
        assert all(type(x) is Batch for x in batches)
        assert [tuple(x) for x in batches] == exp_batches, (bytes(buf).hex(), pos, end)
        assert (nxt, status) == (exp_next, exp_status), (bytes(buf).hex(), pos, end)
    # the same window with garbage around it: nothing outside [pos, end) may matter
    padded = os.urandom(7) + bytes(buf)[pos:end] + os.urandom(9)
    batches, nxt, status = c_walk(bytearray(padded), 7, 7 + end - pos, file_position)
    assert [tuple(x) for x in batches] == exp_batches
    assert (nxt - 7, status) == (exp_next - pos, exp_status)
    return exp_batches, exp_next, exp_status


# ----------------------------------------------------------------------------- builders


def v2_batch(offset=0, n=1, codec=Codec.NONE, **kw):
    recs = [RecordSpec(offset + i, 1_700_000_000_000 + i, b"k%d" % i, b"value-%d" % i * (i + 1)) for i in range(n)]
    return encode_batch(recs, codec=codec, **kw)


def segment(codecs=tuple(Codec), per=3):
    out = bytearray()
    off = 0
    for i, codec in enumerate(codecs):
        for j in range(per):
            out += v2_batch(
                off, n=j + 1, codec=codec, producer_id=1000 + i, producer_epoch=j, base_sequence=off,
                partition_leader_epoch=i, is_transactional=bool(j & 1),
            )
            off += j + 1
    return bytes(out)


def with_magic(batch: bytes, magic: int) -> bytes:
    b = bytearray(batch)
    b[16] = magic & 0xFF
    return bytes(b)


def with_size(batch: bytes, size: int) -> bytes:
    b = bytearray(batch)
    struct.pack_into(">i", b, 8, size)
    return bytes(b)


def short_v2(size: int) -> bytes:
    """An entry with magic 2 and 14 <= size < 49 (total < 61)."""
    return struct.pack(">qib", 5, size, 0)[:12] + b"\x00\x00\x00\x00" + b"\x02" + bytes(range(size - 5))


# ----------------------------------------------------------------------------- CRC


def test_crc_check_value():
    assert _speedups.crc32c(b"123456789") == 3808858755
    assert _speedups._crc32c_portable(b"123456789") == 3808858755
    assert _speedups.crc32c(b"") == 0
    assert isinstance(_speedups.crc32c_hardware, int)


def test_crc_every_length_and_alignment():
    rnd = random.Random(1234)
    data = bytes(rnd.getrandbits(8) for _ in range(400))
    for n in range(301):
        for off in (0, 1, 3, 7):
            piece = data[off : off + n]
            exp = ref_crc(piece)
            for obj in (piece, bytearray(piece), memoryview(data)[off : off + n]):
                assert _speedups.crc32c(obj) == exp, (n, off)
                assert _speedups._crc32c_portable(obj) == exp, (n, off)
            init = rnd.getrandbits(32)
            assert _speedups.crc32c(piece, init) == ref_crc(piece, init)
            assert _speedups.crc32c(piece, value=init) == ref_crc(piece, init)
            assert _speedups._crc32c_portable(piece, init) == ref_crc(piece, init)


@pytest.mark.parametrize("n", [767, 768, 769, 2303, 2304, 12287, 12288, 12289, 16384, 36865, 100_003, 1 << 20])
def test_crc_large(n):
    data = os.urandom(n + 5)
    for off in (0, 5):
        piece = memoryview(data)[off : off + n]
        assert _speedups.crc32c(piece) == ref_crc(piece)
        assert _speedups.crc32c(piece, 0xDEADBEEF) == ref_crc(piece, 0xDEADBEEF)
    assert _speedups._crc32c_portable(data[:n]) == ref_crc(data[:n])


def test_crc_incremental_and_value_masking():
    data = os.urandom(5000)
    crc = 0
    for i in range(0, 5000, 333):
        crc = _speedups.crc32c(data[i : i + 333], crc)
    assert crc == ref_crc(data)
    for v in (-1, 2**32, 2**32 + 5, 2**40, 0xFFFFFFFF):
        assert _speedups.crc32c(b"abc", v) == ref_crc(b"abc", v)


def test_crc_bad_arguments():
    with pytest.raises(TypeError):
        _speedups.crc32c("abc")
    with pytest.raises(TypeError):
        _speedups.crc32c()
    with pytest.raises(TypeError):
        _speedups.crc32c(b"a", 0, 1)
    with pytest.raises(TypeError):
        _speedups.crc32c(b"a", nope=1)
    with pytest.raises(TypeError):
        _speedups.crc32c(b"a", 1.5)


@SETTINGS
@given(st.binary(max_size=3000), st.integers(0, 2**32 - 1))
def test_crc_hypothesis(data, value):
    assert _speedups.crc32c(data, value) == ref_crc(data, value)
    assert _speedups._crc32c_portable(data, value) == ref_crc(data, value)


# ----------------------------------------------------------------------------- walk: valid


def test_valid_segment_every_codec():
    seg = segment()
    batches, nxt, status = check(seg, file_position=4096)
    assert (nxt, status) == (len(seg), NEED_MORE)
    assert len(batches) == 3 * len(Codec)
    assert all(b[4] == b[14] for b in batches)  # stored == computed CRC
    assert {b[5] & 7 for b in batches} == {int(c) for c in Codec}


def test_matches_segment_walker():
    """Same Batch values as the project's own Python walker."""
    seg = segment()
    with SegmentWalker(seg) as w:
        expected = [b for b, _ in w]
        assert w.stop is WalkStop.END
    got, nxt, status = c_walk(bytearray(seg), 0, len(seg))
    assert got == expected
    assert (nxt, status) == (len(seg), NEED_MORE)


def test_empty_and_tiny_windows():
    seg = segment(per=1)
    for pos in range(0, 40):
        for end in range(pos, min(pos + 18, len(seg) + 1)):  # at most 17 bytes
            batches, nxt, status = check(seg, pos, end)
            assert (batches, nxt, status) == ([], pos, NEED_MORE)


def test_windows_cut_at_every_position():
    seg = segment(codecs=(Codec.NONE, Codec.GZIP), per=3)
    starts = []
    p = 0
    while p < len(seg):
        starts.append(p)
        p += struct.unpack_from(">i", seg, p + 8)[0] + 12
    starts.append(len(seg))
    for end in range(len(seg) + 1):
        batches, nxt, status = check(seg, 0, end, file_position=100)
        assert status == NEED_MORE
        complete = [s for s in starts if s <= end]
        assert nxt == complete[-1]
        assert len(batches) == len(complete) - 1
    for pos in starts:
        for end in range(pos, len(seg) + 1, 7):
            check(seg, pos, end, file_position=pos * 3)


def test_positions_are_file_positions():
    seg = segment(codecs=(Codec.NONE,), per=4)
    buf = bytearray(b"\xff" * 50) + bytearray(seg)
    batches, nxt, status = c_walk(buf, 50, len(buf), 1 << 40)
    assert batches[0].position == 1 << 40
    assert batches[1].position == (1 << 40) + batches[0].size
    assert (nxt, status) == (len(buf), NEED_MORE)


# ----------------------------------------------------------------------------- walk: stops


@pytest.mark.parametrize("size", [-(2**31), -1, 0, 1, 13])
def test_size_below_14(size):
    a, b = v2_batch(0), v2_batch(1)
    seg = a + with_size(b, size) + b"\x00" * 80
    batches, nxt, status = check(seg)
    assert (len(batches), nxt, status) == (1, len(a), BAD_SIZE)


def test_size_below_14_in_a_17_byte_tail_is_a_tail():
    """§3: `position >= end - 17` stops first, so a 17-byte tail is never parsed."""
    a = v2_batch(0)
    tail = with_size(v2_batch(1), 3)[:17]
    assert check(a + tail)[1:] == (len(a), NEED_MORE)
    assert check(a + tail + b"\x00")[1:] == (len(a), BAD_SIZE)


def test_huge_size_is_need_more():
    a = v2_batch(0)
    seg = a + with_size(v2_batch(1), 2**31 - 1)
    assert check(seg)[1:] == (len(a), NEED_MORE)


@pytest.mark.parametrize("legacy_magic", [0, 1])
def test_legacy_entry_in_the_middle(legacy_magic):
    a, b = v2_batch(0, n=2), v2_batch(5)
    legacy = encode_message(3, legacy_magic, 1_700_000_000_000, b"k", b"v")
    seg = a + legacy + b
    batches, nxt, status = check(seg)
    assert (len(batches), nxt, status) == (1, len(a), LEGACY)
    # the caller decodes it and resumes after it
    batches, nxt, status = check(seg, len(a) + len(legacy), len(seg))
    assert (len(batches), nxt, status) == (1, len(seg), NEED_MORE)


@pytest.mark.parametrize("magic", [-1, -128, 0, 1])
def test_legacy_or_negative_magic(magic):
    a = v2_batch(0)
    seg = a + with_magic(v2_batch(1), magic) + v2_batch(2)
    assert check(seg)[1:] == (len(a), LEGACY)


@pytest.mark.parametrize("magic", [2, 3, 100, 127])
def test_magic_3_to_127_is_v2(magic):
    seg = v2_batch(0) + with_magic(v2_batch(1), magic)
    batches, nxt, status = check(seg)
    assert (len(batches), nxt, status) == (2, len(seg), NEED_MORE)
    assert batches[1][3] == magic


@pytest.mark.parametrize("size", [14, 20, 48])
def test_short_v2(size):
    a = v2_batch(0)
    seg = a + short_v2(size) + v2_batch(1)
    assert check(seg)[1:] == (len(a), SHORT_V2)


def test_short_legacy_size_is_legacy_not_short():
    a = v2_batch(0)
    entry = bytearray(short_v2(20))
    entry[16] = 1
    assert check(a + bytes(entry))[1:] == (len(a), LEGACY)


def test_exactly_61_bytes_zero_records():
    empty = encode_batch([], base_offset=7)
    assert len(empty) == 61
    batches, nxt, status = check(empty * 3)
    assert (len(batches), nxt, status) == (3, 183, NEED_MORE)
    assert batches[0][12] == 0


def test_bad_crc_still_returned():
    a = bytearray(v2_batch(0, n=3))
    a[-1] ^= 0x55  # corrupt a record byte
    b = bytearray(v2_batch(3))
    b[17] ^= 0x01  # corrupt the stored CRC
    c = bytearray(v2_batch(4))
    c[12] ^= 0xFF  # partitionLeaderEpoch is not covered: CRC stays valid
    batches, nxt, status = check(bytes(a + b + c))
    assert status == NEED_MORE and len(batches) == 3
    assert batches[0][4] != batches[0][14]
    assert batches[1][4] != batches[1][14]
    assert batches[2][4] == batches[2][14]


def test_field_extremes():
    """Sign handling: attributes as unsigned int16, producer epoch signed, CRC unsigned."""
    b = bytearray(v2_batch(0))
    struct.pack_into(">h", b, 21, -1)  # attributes 0xFFFF
    struct.pack_into(">h", b, 51, -32768)  # producerEpoch
    struct.pack_into(">q", b, 0, -(2**63))
    struct.pack_into(">q", b, 43, 2**63 - 1)
    struct.pack_into(">i", b, 12, -(2**31))
    struct.pack_into(">I", b, 17, 0xFFFFFFFF)
    check(bytes(b))
    (batch,), _, _ = c_walk(bytes(b), 0, len(b))
    assert batch.attributes == 0xFFFF
    assert batch.producer_epoch == -32768
    assert batch.offset == -(2**63)
    assert batch.producer_id == 2**63 - 1
    assert batch.partition_leader_epoch == -(2**31)
    assert batch.crc == 0xFFFFFFFF


# ----------------------------------------------------------------------------- walk: API


def test_bad_arguments():
    buf = bytearray(segment(per=1))
    n = len(buf)
    for pos, end in ((-1, n), (0, n + 1), (5, 4), (n + 1, n + 1), (0, -1)):
        with pytest.raises(ValueError):
            _speedups.walk_v2(buf, pos, end, 0, Batch)
        buf.append(0)  # the buffer was released even on the error path
        buf.pop()
    with pytest.raises(TypeError):
        _speedups.walk_v2(buf, 0, n, 0, list)
    with pytest.raises(TypeError):
        _speedups.walk_v2(buf, 0, n, 0, 5)
    with pytest.raises(TypeError):
        _speedups.walk_v2(buf, 0, n, 0)
    with pytest.raises(TypeError):
        _speedups.walk_v2("abc", 0, 0, 0, Batch)
    with pytest.raises(TypeError):
        _speedups.walk_v2(buf, 0.0, n, 0, Batch)
    with pytest.raises(OverflowError):
        _speedups.walk_v2(buf, 0, n, 2**63, Batch)
    batches, nxt, status = _speedups.walk_v2(buf, 0, n, 0, Batch)
    buf.extend(b"x")  # released after success too
    assert status == NEED_MORE and nxt == n


def test_plain_tuple_type_and_index_args():
    class Idx:
        def __init__(self, v):
            self.v = v

        def __index__(self):
            return self.v

    seg = segment(per=1)
    batches, nxt, status = _speedups.walk_v2(seg, Idx(0), Idx(len(seg)), Idx(10), tuple)
    assert [type(b) for b in batches] == [tuple] * len(batches)
    assert batches == ref_walk(seg, 0, len(seg), 10)[0]


def test_no_leaks():
    seg = bytearray(segment() + with_magic(v2_batch(99), 1))
    for _ in range(200):
        c_walk(seg, 0, len(seg))
    gc.collect()
    if hasattr(sys, "gettotalrefcount"):  # pragma: no cover - debug builds only
        before = sys.gettotalrefcount()
        for _ in range(200):
            c_walk(seg, 0, len(seg))
        assert sys.gettotalrefcount() - before < 50
    import tracemalloc

    tracemalloc.start()
    for _ in range(200):
        c_walk(seg, 0, len(seg))
    gc.collect()
    first, _ = tracemalloc.get_traced_memory()
    for _ in range(2000):
        c_walk(seg, 0, len(seg))
    gc.collect()
    second, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert second - first < 64 * 1024


# ----------------------------------------------------------------------------- hypothesis

_SEG = segment(per=2)
_PIECES = [
    v2_batch(0), v2_batch(1, n=3, codec=Codec.GZIP), encode_batch([], base_offset=9),
    encode_message(4, 0, -1, None, b"v"), encode_message(5, 1, 123, b"k", None),
    short_v2(14), short_v2(40), with_magic(v2_batch(2), 127), with_magic(v2_batch(3), -1),
    with_size(v2_batch(4), 3), with_size(v2_batch(4), 2**31 - 1), b"\x00" * 17, b"\xff" * 5,
]


@SETTINGS
@given(st.binary(max_size=400), st.data())
@example(b"\x00" * 8 + b"\x00\x00\x00\x31" + b"\x00" * 4 + b"\x02" + b"\x00" * 44, None)
def test_random_bytes(data, draw):
    end = len(data)
    pos = 0
    if draw is not None:
        pos = draw.draw(st.integers(0, len(data)))
        end = draw.draw(st.integers(pos, len(data)))
    check(data, pos, end, file_position=pos)


@SETTINGS
@given(st.lists(st.sampled_from(_PIECES), max_size=8), st.data())
def test_random_sequences(pieces, draw):
    data = b"".join(pieces)
    pos = draw.draw(st.integers(0, len(data)))
    end = draw.draw(st.integers(pos, len(data)))
    check(data, 0, len(data))
    check(data, pos, end, file_position=12345)


@SETTINGS
@given(st.lists(st.tuples(st.integers(0, len(_SEG) - 1), st.integers(0, 255)), min_size=1, max_size=6), st.data())
def test_mutations(edits, draw):
    b = bytearray(_SEG)
    for i, v in edits:
        b[i] = v
    check(bytes(b))
    pos = draw.draw(st.integers(0, len(b)))
    end = draw.draw(st.integers(pos, len(b)))
    check(bytes(b), pos, end, file_position=pos)


@SETTINGS
@given(st.integers(0, 255), st.integers(-(2**31), 2**31 - 1), st.sampled_from([b"", encode_batch([]), v2_batch(5)]))
def test_header_fields(magic, size, prefix):
    """Any magic byte and size field in an entry placed after some prefix."""
    b = bytearray(v2_batch(0, n=2))
    b[16] = magic
    struct.pack_into(">i", b, 8, size)
    data = prefix + bytes(b) + b"\x00" * 30
    check(data)


def test_gc_tracking():
    """Batches (no __dict__) are untracked like tuples of ints; a type with a __dict__ is not."""
    seg = segment(per=1)
    batches, _, _ = c_walk(seg, 0, len(seg))
    assert not any(gc.is_tracked(b) for b in batches)

    class WithDict(tuple):
        pass

    got, _, _ = _speedups.walk_v2(seg, 0, len(seg), 0, WithDict)
    assert all(type(b) is WithDict and gc.is_tracked(b) for b in got)
    assert [tuple(b) for b in got] == [tuple(b) for b in batches]
    got[0].extra = got  # a cycle through the instance dict is collectable
    del got
    gc.collect()
