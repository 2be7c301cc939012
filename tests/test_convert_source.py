"""convert.source: the walk of a segment for ``convert``, and its damage policy.

The converter here is a stub that copies each entry (so the output of an undamaged range is the
source's own bytes) and decodes its records with kafkatool's decoder to fail as the real
converter does on records that do not decode. Damaged copies of fixtures/logdir segments are
made by hand; the batch positions and sizes they are checked against were read with
kafka-python's framing (offset, size of each entry: v2-none-0 is 4 batches at 0, 930, 1886, 2879
of 930, 956, 993, 975 bytes in 3854; v1-none-0's 6th message is at 560, 92 bytes; v1-gzip-0 is
4 wrappers at 0, 721, 1455, 2206), CRCs recomputed with kafka-python's ``calc_crc32c`` and
zlib's ``crc32``. Every damaged range is also compared with what ``kafkatool verify`` finds in
the same file.
"""

from __future__ import annotations

import gzip
import os
import shutil
import signal
import struct
import zlib

import pytest
from kafka.record.util import calc_crc32c

from kafkatool.convert import source
from kafkatool.convert.options import ConvertOptions, Loss
from kafkatool.convert.source import converted_entries
from kafkatool.errors import KafkaToolError, MissingDependencyError
from kafkatool.record.records import decode_batch_records
from kafkatool.segment.logdir import Segment

HERE = os.path.dirname(os.path.abspath(__file__))
LOGDIR = os.path.join(HERE, "..", "fixtures", "logdir")
REAL_BAD_CRC = "/work/shared/fixtures-real/kaspersorensen__kafka-record-updater/src/test/resources/example-log-health-check.log"
SEG = "00000000000000000000.log"

# v2-none-0, from kafka-python's framing: (position, size, base offset)
V2_BATCHES = [(0, 930, 0), (930, 956, 10), (1886, 993, 20), (2879, 975, 30)]
V2_SIZE = 3854

DAMAGE_KINDS = {"crc_mismatch", "invalid_size", "partial_batch", "trailing_bytes", "trailing_zeros", "unknown_magic"}


@pytest.fixture(autouse=True)
def _no_hang():
    """Every test here ends within 30 s (a resync or walk that loops fails the test)."""
    def boom(*_a):
        raise TimeoutError("test took too long: a walk that does not end?")

    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(30)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


class StubConverter:
    """Copies every entry; decodes its records first and fails as the real converter does."""

    def __init__(self, *, fail_with: KafkaToolError | None = None) -> None:
        self.fed: list[tuple[int, bool]] = []  # (position, salvaged)
        self.flushed = 0
        self.fail_with = fail_with

    def feed(self, batch, data, *, salvaged: bool = False) -> list[bytes]:
        if self.fail_with is not None:
            raise self.fail_with
        try:
            records = list(decode_batch_records(batch, data))
        except KafkaToolError as e:
            raise e.at("stub", batch.position) from None
        if not salvaged:
            for r in records:
                if r.crc_valid is False:
                    # (a plain KafkaToolError, as rules.py raises it)
                    raise KafkaToolError(f"inner message {r.offset} fails its CRC (stored crc {r.crc})",
                                         path="stub", position=batch.position, kind="inner_crc_mismatch",
                                         found=r.crc, expected=12345)
        self.fed.append((batch.position, salvaged))
        return [bytes(data)]

    def flush(self) -> list[bytes]:
        self.flushed += 1
        return [b"<flushed>"]


def run(path: str, *, base: int = 0, converter=None, **opts):
    """(output bytes without the flush marker, loss, progress calls, converter)."""
    converter = converter or StubConverter()
    loss = Loss()
    calls: list[int] = []
    out = list(converted_entries(Segment.at(path, base_offset=base), converter, ConvertOptions(magic=2, **opts),
                                 loss, progress=calls.append))
    assert out[-1] == b"<flushed>" and converter.flushed == 1
    return b"".join(out[:-1]), loss, calls, converter


def copy_of(tmp_path, name: str = "v2-none-0") -> str:
    dst = tmp_path / SEG
    shutil.copyfile(os.path.join(LOGDIR, name, SEG), dst)
    os.chmod(dst, 0o644)
    return str(dst)


def patch(path: str, at: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(at)
        f.write(data)


def batch_bytes(path: str, *indexes: int, batches=V2_BATCHES) -> bytes:
    raw = open(path, "rb").read()
    return b"".join(raw[batches[i][0] : batches[i][0] + batches[i][1]] for i in indexes)


def ranges(loss: Loss) -> list[tuple[int, int, str]]:
    return [(d.start, d.end, d.reason.split(":", 1)[0]) for d in loss.damaged]


def verify_ranges(path: str) -> list[tuple[int, int, str]]:
    """The bad regions ``kafkatool verify`` finds in ``path``: (start, end, kind)."""
    from kafkatool.verify import Finding, VerifyOptions, verify_paths

    out = []
    for f in verify_paths([path], VerifyOptions()):
        if isinstance(f, Finding) and f.kind in DAMAGE_KINDS:
            if f.kind == "unknown_magic" and f.length == 1:  # verify points at the magic byte of a framed batch
                start = f.position - 16
                with open(path, "rb") as fh:
                    fh.seek(start + 8)
                    (size,) = struct.unpack(">i", fh.read(4))
                out.append((start, start + 12 + size, str(f.kind)))
            else:
                out.append((f.position, f.position + f.length, str(f.kind)))
    return out


def located(e: KafkaToolError, path: str, position: int, kind: str) -> None:
    assert e.path == path and e.position == position and e.kind == kind, (e.path, e.position, e.kind, str(e))
    assert str(e).startswith(f"{path}:{position}: ")


# ---------------------------------------------------------------- undamaged


@pytest.mark.parametrize("name", sorted(n for n in os.listdir(LOGDIR) if os.path.isfile(os.path.join(LOGDIR, n, SEG))))
def test_undamaged_segment_is_copied_whole(name):
    path = os.path.join(LOGDIR, name, SEG)
    out, loss, calls, conv = run(path)
    assert out == open(path, "rb").read()
    assert sum(calls) == os.path.getsize(path)
    assert loss.damaged_count == 0 and loss.salvaged_count == 0
    assert all(not s for _p, s in conv.fed)


def test_progress_in_steps(tmp_path, monkeypatch):
    monkeypatch.setattr(source, "PROGRESS_STEP", 1886)
    out, loss, calls, _ = run(copy_of(tmp_path))
    # 930 + 956 reaches the step exactly, 993 + 975 passes it: two calls, nothing left for the end
    assert calls == [1886, 1968]


def test_progress_per_entry_and_range(tmp_path, monkeypatch):
    """With a step of 1 byte, one call per entry converted and per damaged range, each its size."""
    monkeypatch.setattr(source, "PROGRESS_STEP", 1)
    path = copy_of(tmp_path)
    patch(path, 930 + 8, struct.pack(">i", 5000))  # batch 1's size past the end: [930, 1886) skipped
    os.truncate(path, V2_SIZE - 100)  # and the last batch cut: [2879, 3754)
    out, loss, calls, _ = run(path, skip_damaged=True)
    assert ranges(loss) == [(930, 1886, "invalid_size"), (2879, 3754, "partial_batch")] == verify_ranges(path)
    assert calls == [930, 956, 993, 875]


def test_read_error_is_not_damage(tmp_path, monkeypatch):
    """A read error in the middle of the walk stops the conversion even with --salvage."""
    from kafkatool.segment import walk

    real = walk.SegmentWalker._walk_file

    def failing(self):
        for i, item in enumerate(real(self)):
            if i == 1:
                raise OSError(5, "Input/output error")
            yield item

    monkeypatch.setattr(walk.SegmentWalker, "_walk_file", failing)
    with pytest.raises(KafkaToolError) as ei:
        run(copy_of(tmp_path), salvage=True)
    assert "cannot read the file: Input/output error" in str(ei.value)


def _kafka_python_batch(offset: int, values: list[bytes]) -> bytes:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    for i, v in enumerate(values):
        b.append(i, timestamp=1700000000000 + i, key=b"k%d" % i, value=v, headers=[])
    raw = bytearray(b.build())
    raw[0:8] = struct.pack(">q", offset)  # the base offset is outside the CRC
    return bytes(raw)


def test_entry_larger_than_the_window_is_read_whole(tmp_path, monkeypatch):
    """An entry past the walk's window (data None: its CRC streamed) is read whole, once."""
    monkeypatch.setattr(source, "DEFAULT_MAX_BATCH_BYTES", 1 << 20)
    entries = [_kafka_python_batch(0, [b"a"]), _kafka_python_batch(1, [b"x" * (3 << 20)]), _kafka_python_batch(2, [b"b"])]
    path = str(tmp_path / SEG)
    with open(path, "wb") as f:
        f.write(b"".join(entries))

    class Spy(StubConverter):
        def feed(self, batch, data, *, salvaged=False):
            self.types = getattr(self, "types", []) + [type(data).__name__]
            return super().feed(batch, data, salvaged=salvaged)

    out, loss, calls, conv = run(path, converter=Spy())
    assert out == b"".join(entries) and not loss.damaged and sum(calls) == len(out)
    assert conv.types == ["memoryview", "bytes", "memoryview"]
    # the cap applies to it too, at its exact size
    big = len(entries[1])
    out, loss, _c, _ = run(path, skip_damaged=True, max_decompressed_bytes=big - 1)
    assert ranges(loss) == [(len(entries[0]), len(entries[0]) + big, "decompressed_too_large")]
    out, loss, _c, _ = run(path, skip_damaged=True, max_decompressed_bytes=big)
    assert out == b"".join(entries) and not loss.damaged


# ---------------------------------------------------------------- CRC


def test_crc_flip_default_stops_located(tmp_path):
    path = copy_of(tmp_path)
    patch(path, 930 + 17, b"\x00\x00\x00\x00")  # batch 1's stored CRC-32C
    computed = calc_crc32c(open(path, "rb").read()[930 + 21 : 930 + 956])
    with pytest.raises(KafkaToolError) as ei:
        run(path)
    located(ei.value, path, 930, "crc_mismatch")
    assert f"(stored crc 0, computed crc {computed}; the batch spans 956 bytes)" in str(ei.value)


def test_crc_flip_skipped_and_salvaged(tmp_path):
    path = copy_of(tmp_path)
    raw = open(path, "rb").read()
    patch(path, 930 + 17, b"\x00\x00\x00\x00")
    computed = calc_crc32c(raw[930 + 21 : 930 + 956])
    assert computed == int.from_bytes(raw[930 + 17 : 930 + 21], "big")  # the CRC the flip replaced

    out, loss, calls, conv = run(path, skip_damaged=True)
    assert ranges(loss) == [(930, 1886, "crc_mismatch")] == verify_ranges(path)
    assert out == batch_bytes(path, 0, 2, 3)
    assert sum(calls) == V2_SIZE and loss.salvaged_count == 0

    out, loss, calls, conv = run(path, salvage=True)
    assert out == open(path, "rb").read() and not loss.damaged
    assert [(s.position, s.offset, s.stored_crc, s.computed_crc) for s in loss.salvaged] == [(930, 10, 0, computed)]
    assert conv.fed == [(0, False), (930, True), (1886, False), (2879, False)]
    assert sum(calls) == V2_SIZE


def test_record_body_flip(tmp_path):
    """A flipped byte inside a value: the CRC fails, the records still decode (salvaged)."""
    path = copy_of(tmp_path)
    raw = open(path, "rb").read()
    at = raw.index(b"value-21 ") + 6  # the '2' of value-21, inside batch 2 (1886..2879)
    assert 1886 < at < 2879
    patch(path, at, b"X")
    out, loss, _c, _ = run(path, skip_damaged=True)
    assert ranges(loss) == [(1886, 2879, "crc_mismatch")] == verify_ranges(path)
    assert out == batch_bytes(path, 0, 1, 3)
    out, loss, _c, _ = run(path, salvage=True)
    assert [s.position for s in loss.salvaged] == [1886] and out == open(path, "rb").read()


def test_salvage_of_records_that_do_not_decode_is_a_damaged_range(tmp_path):
    path = copy_of(tmp_path)
    patch(path, 2879 + 57, struct.pack(">i", 11))  # batch 3's record count: 11 declared, 10 there
    out, loss, calls, _ = run(path, salvage=True)
    assert ranges(loss) == [(2879, 3854, "crc_mismatch")] == verify_ranges(path)
    assert "its records do not decode" in loss.damaged[0].reason
    assert not loss.salvaged and out == batch_bytes(path, 0, 1, 2) and sum(calls) == V2_SIZE


def test_records_that_do_not_decode_with_a_valid_crc(tmp_path):
    """The count field changed and the CRC recomputed: only decoding finds it (the converter)."""
    path = copy_of(tmp_path)
    patch(path, 930 + 57, struct.pack(">i", 11))
    body = open(path, "rb").read()[930 + 21 : 930 + 956]
    patch(path, 930 + 17, struct.pack(">I", calc_crc32c(body)))
    assert verify_ranges(path) == []  # shallow verify cannot see it
    with pytest.raises(KafkaToolError) as ei:
        run(path)
    # (the record layer locates the error where decoding stopped: here the batch's end)
    assert 930 <= ei.value.position <= 1886 and ei.value.kind == "record_count_mismatch", ei.value.kind
    out, loss, _c, _ = run(path, skip_damaged=True)
    assert ranges(loss) == [(930, 1886, "record_count_mismatch")]
    assert out == batch_bytes(path, 0, 2, 3)


def test_errors_that_are_not_damage_always_stop(tmp_path):
    conv = StubConverter(fail_with=MissingDependencyError("no lz4 here", path="x", position=0))
    with pytest.raises(MissingDependencyError):
        run(copy_of(tmp_path), converter=conv, salvage=True)


def test_real_bad_crc_segment():
    """The real segment whose 90 v1 messages all fail their CRC-32 (SOURCE.md)."""
    if not os.path.exists(REAL_BAD_CRC):
        pytest.skip("fixtures-real not present")
    raw = open(REAL_BAD_CRC, "rb").read()
    entries, pos = [], 0
    while pos < len(raw):  # the framing by hand: offset, size
        off, size = struct.unpack_from(">qi", raw, pos)
        stored = struct.unpack_from(">I", raw, pos + 12)[0]
        entries.append((pos, 12 + size, off, stored, zlib.crc32(raw[pos + 16 : pos + 12 + size])))
        pos += 12 + size
    assert len(entries) == 90 and all(s != c for *_x, s, c in entries)

    with pytest.raises(KafkaToolError) as ei:
        run(REAL_BAD_CRC)
    located(ei.value, REAL_BAD_CRC, 0, "crc_mismatch")

    out, loss, calls, _ = run(REAL_BAD_CRC, skip_damaged=True)
    assert out == b"" and sum(calls) == len(raw)
    assert ranges(loss) == [(p, p + n, "crc_mismatch") for p, n, *_r in entries] == verify_ranges(REAL_BAD_CRC)

    out, loss, calls, conv = run(REAL_BAD_CRC, salvage=True)
    assert out == raw and not loss.damaged and sum(calls) == len(raw)
    assert [(s.position, s.offset, s.stored_crc, s.computed_crc) for s in loss.salvaged] == [
        (p, off, stored, computed) for p, _n, off, stored, computed in entries]


def test_legacy_message_crc(tmp_path):
    path = copy_of(tmp_path, "v1-none-0")
    patch(path, 560 + 12, b"\xde\xad\xbe\xef")  # the 6th message's CRC-32
    out, loss, _c, _ = run(path, skip_damaged=True)
    assert ranges(loss) == [(560, 652, "crc_mismatch")] == verify_ranges(path)
    raw = open(path, "rb").read()
    assert out == raw[:560] + raw[652:]


def _wrapper_with_bad_inner_crc(src: str, dst: str) -> int:
    """dst = src (v1-gzip-0) with wrapper 1's 3rd inner message's CRC broken, the outer CRC
    recomputed; returns the wrapper's new size."""
    raw = open(src, "rb").read()
    pos, size = 721, 734
    ts = raw[pos + 18 : pos + 26]
    (klen,) = struct.unpack_from(">i", raw, pos + 26)
    assert klen == -1
    (vlen,) = struct.unpack_from(">i", raw, pos + 30)
    inner = bytearray(gzip.decompress(raw[pos + 34 : pos + 34 + vlen]))
    p = 0
    for _ in range(2):
        p += 12 + struct.unpack_from(">i", inner, p + 8)[0]
    inner[p + 12 : p + 16] = b"\x00\x00\x00\x00"
    value = gzip.compress(bytes(inner))
    body = bytes([1, raw[pos + 17]]) + ts + struct.pack(">i", -1) + struct.pack(">i", len(value)) + value
    msg = struct.pack(">I", zlib.crc32(body)) + body
    wrapper = raw[pos : pos + 8] + struct.pack(">i", len(msg)) + msg
    with open(dst, "wb") as f:
        f.write(raw[:pos] + wrapper + raw[pos + size :])
    return len(wrapper)


def test_legacy_inner_crc(tmp_path):
    path = str(tmp_path / SEG)
    n = _wrapper_with_bad_inner_crc(os.path.join(LOGDIR, "v1-gzip-0", SEG), path)
    raw = open(path, "rb").read()
    assert verify_ranges(path) == []  # the outer CRC holds
    with pytest.raises(KafkaToolError) as ei:
        run(path)
    assert ei.value.position == 721 and ei.value.kind == "inner_crc_mismatch"
    out, loss, calls, _ = run(path, skip_damaged=True)
    assert ranges(loss) == [(721, 721 + n, "inner_crc_mismatch")] and sum(calls) == len(raw)
    assert out == raw[:721] + raw[721 + n :]
    out, loss, _c, conv = run(path, salvage=True)
    assert out == raw and not loss.damaged
    assert [(s.position, s.offset, s.stored_crc, s.computed_crc) for s in loss.salvaged] == [(721, 19, 0, 12345)]
    assert (721, True) in conv.fed


# ---------------------------------------------------------------- framing


def test_truncated_tail(tmp_path):
    path = copy_of(tmp_path)
    os.truncate(path, V2_SIZE - 100)
    with pytest.raises(KafkaToolError) as ei:
        run(path)
    located(ei.value, path, 2879, "partial_batch")
    assert "a batch of 975 bytes starts at 2879 but only 875 bytes remain" in str(ei.value)
    out, loss, calls, _ = run(path, skip_damaged=True)
    assert ranges(loss) == [(2879, V2_SIZE - 100, "partial_batch")] == verify_ranges(path)
    assert out == batch_bytes(path, 0, 1, 2) and sum(calls) == V2_SIZE - 100


@pytest.mark.parametrize("tail, kind", [(b"\x01" * 17, "trailing_bytes"), (b"\x01" * 5, "trailing_bytes"),
                                        (bytes(100), "trailing_zeros"), (bytes(10), "trailing_zeros")])
def test_short_and_zero_tails(tmp_path, tail, kind):
    path = copy_of(tmp_path)
    with open(path, "ab") as f:
        f.write(tail)
    with pytest.raises(KafkaToolError) as ei:
        run(path)
    located(ei.value, path, V2_SIZE, kind)
    out, loss, calls, _ = run(path, skip_damaged=True)
    assert ranges(loss) == [(V2_SIZE, V2_SIZE + len(tail), kind)] == verify_ranges(path)
    assert out == batch_bytes(path, 0, 1, 2, 3) and sum(calls) == V2_SIZE + len(tail)


@pytest.mark.parametrize("at, junk, words", [
    (1886, b"\xff" * 50, "Found record size -1 smaller than minimum record overhead (14)"),  # size field -1
    (930, bytes(3000), "Found record size 0 smaller than minimum record overhead (14)"),  # a zero run
])
def test_garbage_in_the_middle(tmp_path, at, junk, words):
    path = copy_of(tmp_path)
    raw = open(path, "rb").read()
    with open(path, "wb") as f:
        f.write(raw[:at] + junk + raw[at:])
    with pytest.raises(KafkaToolError) as ei:
        run(path)
    located(ei.value, path, at, "invalid_size")
    assert words in str(ei.value)
    out, loss, calls, _ = run(path, skip_damaged=True)
    assert ranges(loss) == [(at, at + len(junk), "invalid_size")] == verify_ranges(path)
    assert f"{len(junk)} unreadable bytes before the next valid batch at {at + len(junk)}" in loss.damaged[0].reason
    assert out == raw and sum(calls) == V2_SIZE + len(junk)


def test_empty_and_tiny_files(tmp_path):
    path = str(tmp_path / SEG)
    open(path, "wb").close()
    out, loss, calls, _ = run(path)
    assert out == b"" and calls == [] and not loss.damaged
    with open(path, "wb") as f:
        f.write(b"\x07" * 12)
    out, loss, calls, _ = run(path, skip_damaged=True)
    assert ranges(loss) == [(0, 12, "trailing_bytes")] == verify_ranges(path) and calls == [12]


@pytest.mark.parametrize("declared", [0x7FFFFFFF, 2975, 10 << 20])
def test_size_field_past_eof(tmp_path, declared):
    """Batch 1's size field points past the end: verify's invalid_size up to batch 2."""
    path = copy_of(tmp_path)
    patch(path, 930 + 8, struct.pack(">i", declared))
    with pytest.raises(KafkaToolError) as ei:
        run(path)
    located(ei.value, path, 930, "invalid_size")
    assert "points past the end of the file, but a valid batch starts at 1886" in str(ei.value)
    out, loss, calls, _ = run(path, skip_damaged=True)
    assert ranges(loss) == [(930, 1886, "invalid_size")] == verify_ranges(path)
    assert out == batch_bytes(path, 0, 2, 3) and sum(calls) == V2_SIZE


def test_last_size_field_past_eof(tmp_path):
    path = copy_of(tmp_path)
    patch(path, 2879 + 8, struct.pack(">i", 5000))
    out, loss, calls, _ = run(path, skip_damaged=True)
    assert ranges(loss) == [(2879, V2_SIZE, "partial_batch")] == verify_ranges(path)
    assert out == batch_bytes(path, 0, 1, 2)


def test_size_field_smaller_but_framing(tmp_path):
    """Batch 1's size says 200 bytes: a CRC-failed "batch" of 212, then unframeable bytes up to batch 2."""
    path = copy_of(tmp_path)
    patch(path, 930 + 8, struct.pack(">i", 200))
    out, loss, calls, _ = run(path, salvage=True)
    assert ranges(loss)[0] == (930, 1142, "crc_mismatch")
    assert ranges(loss) == verify_ranges(path) and ranges(loss)[-1][1] == 1886
    assert out == batch_bytes(path, 0, 2, 3) and sum(calls) == V2_SIZE


def test_size_field_that_frames_within_the_file(tmp_path):
    """Batch 0's size claims everything up to batch 3: a CRC-failed "batch" of 2879 bytes that
    swallows batches 1 and 2, as verify reports it (the walk trusts a size that frames)."""
    path = copy_of(tmp_path)
    patch(path, 8, struct.pack(">i", 2879 - 12))
    out, loss, calls, _ = run(path, skip_damaged=True)
    assert ranges(loss) == [(0, 2879, "crc_mismatch")] == verify_ranges(path)
    assert out == batch_bytes(path, 3) and sum(calls) == V2_SIZE


def test_unknown_magic(tmp_path):
    path = copy_of(tmp_path)
    patch(path, 930 + 16, b"\x03")  # outside the v2 CRC
    with pytest.raises(KafkaToolError) as ei:
        run(path)
    located(ei.value, path, 930, "unknown_magic")
    out, loss, _c, _ = run(path, salvage=True)
    assert ranges(loss) == [(930, 1886, "unknown_magic")] == verify_ranges(path)
    assert out == batch_bytes(path, 0, 2, 3)


def test_entry_above_the_decompression_cap(tmp_path):
    path = copy_of(tmp_path)
    with pytest.raises(KafkaToolError) as ei:
        run(path, max_decompressed_bytes=950)
    located(ei.value, path, 930, "decompressed_too_large")
    out, loss, calls, conv = run(path, skip_damaged=True, max_decompressed_bytes=992)  # batch 2 (993) only
    assert ranges(loss) == [(1886, 2879, "decompressed_too_large")]
    assert out == batch_bytes(path, 0, 1, 3) and sum(calls) == V2_SIZE
    assert [p for p, _s in conv.fed] == [0, 930, 2879]
    out, loss, calls, conv = run(path, max_decompressed_bytes=993)  # exactly the largest entry: no damage
    assert out == open(path, "rb").read()


def test_damaged_list_is_capped(tmp_path, monkeypatch):
    import kafkatool.convert.options as options

    monkeypatch.setattr(options, "MAX_LISTED", 10)
    if not os.path.exists(REAL_BAD_CRC):
        pytest.skip("fixtures-real not present")
    _out, loss, _c, _ = run(REAL_BAD_CRC, skip_damaged=True)
    assert loss.damaged_count == 90 and len(loss.damaged) == 10


def test_fifo_named_like_a_segment_is_refused(tmp_path):
    path = str(tmp_path / SEG)
    os.mkfifo(path)
    with pytest.raises(KafkaToolError) as ei:
        run(path)
    assert ei.value.path == path and "not a regular file" in str(ei.value)


def test_abandoned_walk_closes_its_files(tmp_path):
    path = copy_of(tmp_path)
    before = len(os.listdir("/proc/self/fd"))
    it = converted_entries(Segment.at(path), StubConverter(), ConvertOptions(magic=2), Loss())
    next(it)
    it.close()
    assert len(os.listdir("/proc/self/fd")) == before


# ---------------------------------------------------------------- random damage


@pytest.mark.parametrize("seed", range(40))
def test_random_damage_matches_verify(tmp_path, seed):
    """Random corruption of a fixture: the walk ends, progress adds up to the size, the damaged
    ranges are verify's bad regions (but for batches whose CRC holds and whose records do not
    decode, which only decoding finds), and damaged ranges and converted batches tile the file
    exactly."""
    import random

    rng = random.Random(seed)
    name = rng.choice(["v2-none-0", "v2-gzip-0", "v1-none-0", "v0-gzip-0", "v1-lz4-0"])
    path = copy_of(tmp_path, name)
    raw = bytearray(open(path, "rb").read())
    for _ in range(rng.randint(1, 4)):
        what = rng.random()
        at = rng.randrange(len(raw))
        if what < 0.5:
            raw[at] ^= 1 << rng.randrange(8)
        elif what < 0.7:
            raw[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 40)))
        elif what < 0.85:
            del raw[at : at + rng.randint(1, 200)]
        else:
            raw[at : at + 4] = struct.pack(">i", rng.choice([-5, 0, 13, 0x7FFFFFFF, rng.randrange(1 << 20)]))
    with open(path, "wb") as f:
        f.write(raw)
    conv = StubConverter()
    out, loss, calls, conv = run(path, salvage=True, converter=conv)
    assert sum(calls) == len(raw)
    extents = [(d.start, d.end) for d in loss.damaged]
    pieces = [p for p, _s in conv.fed]
    # every converted batch is its source bytes, in order, and with the damaged ranges tiles the file
    tiles = sorted(extents + [(p, p + len(c)) for p, c in zip(pieces, _split(out, pieces, raw))])
    at = 0
    for s, e in tiles:
        assert s == at and e > s
        at = e
    assert at == len(raw)
    shallow = {(s, e) for s, e, k in verify_ranges(path)}
    crc_kinds = {"crc_mismatch", "invalid_size", "partial_batch", "trailing_bytes", "trailing_zeros", "unknown_magic"}
    ours = {(d.start, d.end) for d in loss.damaged if d.reason.split(":", 1)[0] in crc_kinds}
    salvaged = {s.position for s in loss.salvaged}
    # verify's CRC findings that salvage kept are not damaged ranges here
    assert ours == {(s, e) for s, e in shallow if s not in salvaged}


def _split(out: bytes, positions: list[int], raw: bytes) -> list[bytes]:
    """The output cut back into the entries fed (each the source's bytes at its position)."""
    chunks, i = [], 0
    for p in positions:
        size = 12 + struct.unpack_from(">i", raw, p + 8)[0]
        assert out[i : i + size] == raw[p : p + size]
        chunks.append(out[i : i + size])
        i += size
    assert i == len(out)
    return chunks


# ---------------------------------------------------------------- with the real converter (rules.py)


def _kafka_python_records(data: bytes) -> list[tuple]:
    """(offset, key, value) of every record in ``data``, read by kafka-python."""
    from kafka.record import MemoryRecords

    out = []
    records = MemoryRecords(data)
    while True:
        batch = records.next_batch()
        if batch is None:
            return out
        out += [(r.offset, r.key, r.value) for r in batch]


def _real(path: str, magic: int, codec, **opts):
    from kafkatool.convert.rules import BatchConverter

    loss = Loss()
    options = ConvertOptions(magic=magic, codec=codec, **opts)
    calls: list[int] = []
    out = b"".join(converted_entries(Segment.at(path, base_offset=0), BatchConverter(options, loss, path=path),
                                     options, loss, progress=calls.append))
    return out, loss, calls


@pytest.mark.parametrize("magic, codec", [(2, 1), (1, 0), (0, 2), (2, 0)])
def test_real_converter_around_a_bad_crc(tmp_path, magic, codec):
    path = copy_of(tmp_path)
    patch(path, 930 + 17, b"\x00\x00\x00\x00")
    with pytest.raises(KafkaToolError) as ei:
        _real(path, magic, codec)
    located(ei.value, path, 930, "crc_mismatch")
    expected_kept = _kafka_python_records(batch_bytes(path, 0, 2, 3))
    out, loss, calls = _real(path, magic, codec, skip_damaged=True)
    assert _kafka_python_records(out) == expected_kept and [o for o, *_r in expected_kept] == [*range(10), *range(20, 40)]
    assert ranges(loss) == [(930, 1886, "crc_mismatch")] and sum(calls) == V2_SIZE
    out, loss, calls = _real(path, magic, codec, salvage=True)
    assert _kafka_python_records(out) == _kafka_python_records(open(os.path.join(LOGDIR, "v2-none-0", SEG), "rb").read())
    assert [s.position for s in loss.salvaged] == [930] and not loss.damaged


def test_real_converter_inner_crc(tmp_path):
    path = str(tmp_path / SEG)
    n = _wrapper_with_bad_inner_crc(os.path.join(LOGDIR, "v1-gzip-0", SEG), path)
    with pytest.raises(KafkaToolError) as ei:
        _real(path, 2, None)
    assert ei.value.path == path and ei.value.position == 721 and ei.value.kind == "inner_crc_mismatch"
    out, loss, _c = _real(path, 2, None, skip_damaged=True)
    assert ranges(loss) == [(721, 721 + n, "inner_crc_mismatch")]
    assert [o for o, *_r in _kafka_python_records(out)] == [*range(10), *range(20, 40)]
    out, loss, _c = _real(path, 2, None, salvage=True)
    assert [o for o, *_r in _kafka_python_records(out)] == list(range(40)) and not loss.damaged
    assert [(s.position, s.offset, s.stored_crc, s.computed_crc) for s in loss.salvaged] == [(721, 19, 0, -1)]


def test_real_converter_real_bad_crc_segment():
    if not os.path.exists(REAL_BAD_CRC):
        pytest.skip("fixtures-real not present")
    from kafka.record.legacy_records import LegacyRecordBatch

    raw = open(REAL_BAD_CRC, "rb").read()
    want, pos = [], 0
    while pos < len(raw):  # kafka-python reads each message (it does not check the CRC here)
        (size,) = struct.unpack_from(">i", raw, pos + 8)
        want += [(r.offset, r.key, r.value) for r in LegacyRecordBatch(raw[pos : pos + 12 + size], 1)]
        pos += 12 + size
    assert len(want) == 90
    out, loss, calls = _real(REAL_BAD_CRC, 2, 4, salvage=True)  # v1 none -> v2 zstd
    assert _kafka_python_records(out) == want and loss.salvaged_count == 90 and sum(calls) == len(raw)
    out, loss, calls = _real(REAL_BAD_CRC, 2, 4, skip_damaged=True)
    assert out == b"" and loss.damaged_count == 90
