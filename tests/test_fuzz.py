"""Garbage never escapes as anything but kafkatool's own error: random bytes, truncations and
mutations of valid segments give either output or a located KafkaToolError, never another
exception, a hang or unbounded memory (STYLE.md; h11's discipline).

Not raising is not enough: every example also checks what the output must satisfy.

- The walk (§3): batches start at 0 and follow each other without gaps, each inside the
  file; it stops at the end, at a tail (≤ 17 bytes, or an entry whose size runs past the end),
  or at an error located exactly where it stopped.
- Decoding: an error is located inside its batch; without one, a v2 batch yields exactly its
  header's count of records (§17 B.12: a count mismatch is an InvalidRecordException), an
  uncompressed legacy entry exactly one record at its offset, a v1 wrapper inner records ending
  at the wrapper's offset (§5.2); and a batch whose CRC checks (its bytes are those written)
  holds offsets inside its header's range and, for CreateTime, its header's max timestamp.
- The dump: every error names the file and a position inside it; its batch lines are the
  walk's batches; an invalid-bytes line covers exactly the bytes after the last batch.
- Truncation: the output for a prefix of a segment is a prefix of the output for the whole
  (the batches wholly inside it, then at most the invalid-bytes line).
- Mutation: every batch that ends before the first changed byte is walked and decoded as in
  the original.
"""

from __future__ import annotations

import re
import tempfile
import tracemalloc
import zlib
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kafkatool.dump import DumpOptions, FileError, iter_dump
from kafkatool.errors import KafkaToolError
from kafkatool.record.records import decode_batch_records
from kafkatool.render.jsonl import JsonlRenderer
from kafkatool.render.text import TextRenderer
from kafkatool.segment.walk import SegmentWalker, WalkStop

from conftest import FIXTURES

SEGMENTS = sorted(p for p in FIXTURES.rglob("*.log")) + sorted(FIXTURES.rglob("*.checkpoint"))
SEGMENT_BYTES = [p.read_bytes() for p in SEGMENTS]
DEEP = DumpOptions(deep=True, print_data=True)
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SEGMENT_NAME = "00000000000000000000.log"
# a batch line (§15.3): v2 "baseOffset: ... position: <p> ...", legacy "offset: <o> position: <p> ..."
BATCH_LINE = re.compile(r"^(?:baseOffset: -?\d+ .*|offset: -?\d+) position: (\d+) .* size: (\d+) magic: ")
INVALID_BYTES = re.compile(r"^Found (\d+) invalid bytes at the end of (.*)$")


class Dumped:
    """What one dump of a segment gave: the items, and the text renderer's stdout/stderr lines."""

    def __init__(self, items: list, out: list[str], err: list[str]) -> None:
        self.items = items
        self.out = out
        self.err = err

    @property
    def batch_lines(self) -> list[tuple[int, int]]:
        """(position, size) of every batch line on stdout."""
        return [(int(m.group(1)), int(m.group(2))) for m in map(BATCH_LINE.match, self.out) if m]

    @property
    def errors(self) -> list[KafkaToolError]:
        return [i.error for i in self.items if isinstance(i, FileError)]


def dump_everything(data: bytes, name: str = SEGMENT_NAME) -> Dumped:
    """Dump ``data`` as a segment with every renderer; check the output against the walk."""
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / name
        p.write_bytes(data)
        items = list(iter_dump([str(p)], DEEP))
        text, jsonl = TextRenderer(DEEP), JsonlRenderer(DEEP)
        out: list[str] = []
        err: list[str] = []
        for item in items:
            rendered, to_stderr = text.render(item)
            # (the temporary directory's name differs from one call to the next)
            (err if to_stderr else out).extend(rendered.replace(d, "<dir>").splitlines())
            jsonl.render(item)
        dumped = Dumped(items, out, err)
        for e in dumped.errors:
            assert isinstance(e, KafkaToolError)
            assert e.path and name in e.path, e  # names the file
            assert e.position is not None and 0 <= e.position <= len(data), e  # and a place in it
        assert len(dumped.errors) <= 1  # one file: the dump of it stops at its first error
        # the batch lines are the walk's batches, in order, back to back from byte 0
        walker = SegmentWalker(data)
        entries = [(b, bytes(view)) for b, view in walker]
        walked = [(b.position, b.size) for b, _ in entries]
        lines = dumped.batch_lines
        assert lines == walked[: len(lines)]
        if not dumped.errors:
            assert lines == walked
        else:
            # the error is where the walk stopped with an error, or in a batch that cannot be decoded
            # (the last one printed, or the next when its line cannot be completed, §15.3)
            (e,) = dumped.errors
            near = entries[max(0, len(lines) - 1) : len(lines) + 1]
            bad = [(b, raw) for b, raw in near if b.position <= e.position <= b.position + b.size]
            if bad and not (walker.stop is WalkStop.ERROR and e.position == walker.position):
                # (a control batch's records are decoded further: the control key and value, §15.3;
                # an error at a batch's end, e.g. premature EOF, touches the next batch's start)
                assert any(b.attributes & 0x07 > 4 or b.attributes & 0x20 or not decodes(b, raw) for b, raw in bad), e
            else:
                assert walker.stop is WalkStop.ERROR and e.position == walker.position and lines == walked, e
        end = lines[-1][0] + lines[-1][1] if lines else 0
        trailing = [m for m in map(INVALID_BYTES.match, out) if m]
        if trailing:
            (m,) = trailing
            assert (int(m.group(1)), m.group(2)) == (len(data) - end, name)
        elif not dumped.errors:
            assert end == len(data)
        return dumped


def decodes(batch, raw: bytes) -> bool:
    try:
        list(decode_batch_records(batch, raw))
    except KafkaToolError:
        return False
    return True


def walk_and_decode(data: bytes) -> list[tuple]:
    """Walk and deep-decode ``data``; check the §3 walk's and the decoders' output. Returns one
    ``(batch, records or error)`` per batch."""
    walker = SegmentWalker(data)
    out: list[tuple] = []
    expected_pos = 0
    for b, view in walker:
        assert b.position == expected_pos  # back to back from 0 (§3 step 6)
        assert b.size >= 12 + 14 and b.position + b.size <= len(data)
        if 2 <= b.magic < 128:
            assert b.size >= 61  # a v2 header is 61 bytes (§3 minimum sizes)
        expected_pos += b.size
        try:
            records = list(decode_batch_records(b, view))
        except KafkaToolError as e:
            assert e.position is not None and 0 <= e.position <= b.size, e  # inside its batch
            out.append((b, e))
            continue
        check_records(b, records)
        out.append((b, records))
    check_stop(walker, data, expected_pos)
    return out


def check_records(b, records: list) -> None:
    if b.magic >= 2:
        assert len(records) == b.count  # §17 B.12: a count mismatch raises
        if b.crc == b.computed_crc and records:  # the bytes the writer wrote
            offsets = [r.offset for r in records]
            assert all(b.offset <= o <= b.offset + b.last_offset_delta for o in offsets)
            assert offsets == sorted(set(offsets))
            stamps = [r.timestamp for r in records]
            if b.attributes & 0x08:  # LogAppendTime: every record carries the batch's time
                assert set(stamps) == {b.max_timestamp}
            elif not b.attributes & 0x40:  # (a delete horizon replaces the base timestamp)
                assert max(stamps) == b.max_timestamp
    elif b.attributes & 0x07 == 0:
        assert [r.offset for r in records] == [b.offset]  # the entry is its only record
    else:
        assert records  # §17 C: a wrapper with no inner records is an error
        if b.magic == 1:
            assert records[-1].offset == b.offset  # §5.2: inner offsets end at the wrapper's


def check_stop(walker: SegmentWalker, data: bytes, position: int) -> None:
    """How the §3 walk ended, checked against the bytes where it ended."""
    assert walker.position == position
    rest = len(data) - position
    size = int.from_bytes(data[position + 8 : position + 12], "big", signed=True) if rest >= 12 else None
    if walker.stop is WalkStop.END:
        assert rest == 0
    elif walker.stop is WalkStop.TAIL:
        # a tail of <= 17 bytes is never parsed; a longer one is an entry running past the end
        assert 0 < rest and (rest <= 17 or (size is not None and size >= 14 and 12 + size > rest))
    else:
        assert walker.stop is WalkStop.ERROR and rest > 17
        e = walker.error
        assert isinstance(e, KafkaToolError) and e.position == position  # where the walk stopped
        # size < 14 (step 3), or an entry that fits but cannot be read as its magic says
        assert size < 14 or 12 + size <= rest


# the §3 boundaries, always tried: a tail of exactly 17 bytes (never parsed) and 18 (a size-0
# header, an error); the smallest legal entry (a v0 message of size 14: null key and value)
V0_MINIMUM = bytes.fromhex("0000000000000000" "0000000e") + zlib.crc32(bytes.fromhex("0000ffffffffffffffff")).to_bytes(
    4, "big") + bytes.fromhex("0000ffffffffffffffff")


@FUZZ
@given(st.binary(max_size=4096))
@example(bytes(17))
@example(bytes(18))
@example(V0_MINIMUM)
@example(V0_MINIMUM + bytes(17))
def test_random_bytes(data):
    walk_and_decode(data)
    dump_everything(data)


@FUZZ
@given(st.sampled_from(range(len(SEGMENT_BYTES))), st.data())
def test_truncations(i, data):
    seg = SEGMENT_BYTES[i]
    cut = data.draw(st.integers(0, len(seg)))
    whole = walk_and_decode(seg)
    part = walk_and_decode(seg[:cut])
    # exactly the batches that end inside the prefix, decoded exactly as in the whole segment
    assert part == [x for x in whole if x[0].position + x[0].size <= cut]
    full = dump_everything(seg)
    dumped = dump_everything(seg[:cut])
    assert dumped.out  # always at least the header
    assert not full.errors and not dumped.errors  # a valid segment's prefix ends, it is not corrupt
    kept = [line for line in dumped.out if not INVALID_BYTES.match(line)]
    assert kept == full.out[: len(kept)]
    assert dumped.err == full.err[: len(dumped.err)] or not dumped.err


@FUZZ
@given(st.sampled_from(range(len(SEGMENT_BYTES))), st.data())
def test_mutations(i, data):
    original = SEGMENT_BYTES[i]
    seg = bytearray(original)
    first_change = len(seg)
    for _ in range(data.draw(st.integers(1, 6))):
        pos = data.draw(st.integers(0, len(seg) - 1))
        seg[pos] = data.draw(st.integers(0, 255))
        if seg[pos] != original[pos]:
            first_change = min(first_change, pos)
    if data.draw(st.booleans()):
        pos = data.draw(st.integers(0, len(seg)))
        insert = data.draw(st.binary(max_size=64))
        seg[pos:pos] = insert
        if insert:
            first_change = min(first_change, pos)
    mutated = walk_and_decode(bytes(seg))
    before = [x for x in walk_and_decode(original) if x[0].position + x[0].size <= first_change]
    assert mutated[: len(before)] == before  # the batches before the first changed byte survive
    dump_everything(bytes(seg))


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["00000000000000000000.index", "00000000000000000000.timeindex",
                        "00000000000000000000.txnindex", "00000000000000000000.snapshot",
                        "leader-epoch-checkpoint", "partition.metadata", "quorum-state",
                        "replication-offset-checkpoint", "00000000000000000000-0000000001.checkpoint",
                        "meta.properties"]),
       st.binary(max_size=512))
def test_random_side_files(name, data):
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "00000000000000000000.log").write_bytes(SEGMENT_BYTES[0])
        (Path(d) / "00000000000000000000.index").write_bytes(b"")
        p = Path(d) / name
        p.write_bytes(data)
        items = list(iter_dump([str(p)], DumpOptions()))
        for item in items:
            TextRenderer(DumpOptions()).render(item)
            JsonlRenderer(DumpOptions()).render(item)
        for item in items:
            if isinstance(item, FileError):
                e = item.error
                assert e.path and name in e.path, e  # names the file
                assert e.position is None or 0 <= e.position <= len(data), e


def test_huge_size_field_does_not_allocate(tmp_path):
    """A size field of 2^31-1 in a small file ends the walk without reading or allocating it."""
    seg = bytearray(SEGMENT_BYTES[0])
    seg[8:12] = (0x7FFFFFFF).to_bytes(4, "big")
    tracemalloc.start()
    dumped = dump_everything(bytes(seg))
    _cur, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 64 << 20
    assert any(type(i).__name__ == "TrailingBytes" for i in dumped.items)


def test_decompression_bomb_is_an_error_not_oom(tmp_path):
    """A gzip batch inflating past the cap is reported, with its position, without holding it all."""
    import zlib

    from kafkatool.record.compression import Codec
    from kafkatool.record.v2 import RecordSpec, encode_batch

    good = encode_batch([RecordSpec(0, 0, b"k", b"v")], codec=Codec.GZIP)
    co = zlib.compressobj(9, zlib.DEFLATED, 31)
    bomb = co.compress(b"\0" * (64 << 20)) + co.flush()
    batch = bytearray(good[:61]) + bomb
    batch[8:12] = (len(batch) - 12).to_bytes(4, "big")
    from kafkatool.record.crc import crc32c

    batch[17:21] = crc32c(bytes(batch[21:])).to_bytes(4, "big")
    p = tmp_path / "00000000000000000000.log"
    p.write_bytes(bytes(batch))
    items = list(iter_dump([str(p)], DumpOptions(deep=True, max_decompressed=8 << 20)))
    errors = [i for i in items if isinstance(i, FileError)]
    assert len(errors) == 1
    assert "exceeds the limit" in errors[0].error.message
    assert errors[0].error.position == 61


def test_every_error_names_file_and_position(run, tmp_path):
    seg = bytearray(SEGMENT_BYTES[0])
    seg += b"\0" * 64  # a zero-filled tail longer than 17 bytes: size 0
    p = tmp_path / "00000000000000000000.log"
    p.write_bytes(bytes(seg))
    r = run("dump", str(p), str(p))
    assert r.code == 1
    errors = r.err.splitlines()
    assert len(errors) == 2  # both files reported, the run went on
    assert errors[0].startswith(f"kafkatool: error: {p}:{len(SEGMENT_BYTES[0])}: Found record size 0 smaller than")
    assert r.out.count("Dumping ") == 2
