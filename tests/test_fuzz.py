"""Garbage never escapes as anything but kafkatool's own error: random bytes, truncations and
mutations of valid segments give either output or a located KafkaToolError, never another
exception, a hang or unbounded memory (STYLE.md; h11's discipline)."""

from __future__ import annotations

import tempfile
import tracemalloc
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkatool.dump import DumpOptions, FileError, iter_dump
from kafkatool.errors import KafkaToolError
from kafkatool.record.records import decode_batch_records
from kafkatool.render.jsonl import JsonlRenderer
from kafkatool.render.text import TextRenderer
from kafkatool.segment.walk import SegmentWalker

from conftest import FIXTURES

SEGMENTS = sorted(p for p in FIXTURES.rglob("*.log")) + sorted(FIXTURES.rglob("*.checkpoint"))
SEGMENT_BYTES = [p.read_bytes() for p in SEGMENTS]
DEEP = DumpOptions(deep=True, print_data=True)
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def dump_everything(data: bytes, name: str = "00000000000000000000.log") -> list:
    """Dump ``data`` as a segment with every renderer; return the items."""
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / name
        p.write_bytes(data)
        items = list(iter_dump([str(p)], DEEP))
        text, jsonl = TextRenderer(DEEP), JsonlRenderer(DEEP)
        for item in items:
            text.render(item)
            jsonl.render(item)
        for item in items:
            if isinstance(item, FileError):
                e = item.error
                assert isinstance(e, KafkaToolError)
                assert e.path and str(p.name) in e.path
        return items


def walk_and_decode(data: bytes) -> None:
    walker = SegmentWalker(data)
    for b, view in walker:
        try:
            decode_batch_records(b, view)
        except KafkaToolError as e:
            assert e.position is not None
    if walker.error is not None:
        assert isinstance(walker.error, KafkaToolError) and walker.error.position is not None


@FUZZ
@given(st.binary(max_size=4096))
def test_random_bytes(data):
    walk_and_decode(data)
    dump_everything(data)


@FUZZ
@given(st.sampled_from(range(len(SEGMENT_BYTES))), st.data())
def test_truncations(i, data):
    seg = SEGMENT_BYTES[i]
    cut = data.draw(st.integers(0, len(seg)))
    items = dump_everything(seg[:cut])
    walk_and_decode(seg[:cut])
    assert items  # always at least the header


@FUZZ
@given(st.sampled_from(range(len(SEGMENT_BYTES))), st.data())
def test_mutations(i, data):
    seg = bytearray(SEGMENT_BYTES[i])
    for _ in range(data.draw(st.integers(1, 6))):
        pos = data.draw(st.integers(0, len(seg) - 1))
        seg[pos] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        pos = data.draw(st.integers(0, len(seg)))
        seg[pos:pos] = data.draw(st.binary(max_size=64))
    walk_and_decode(bytes(seg))
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


def test_huge_size_field_does_not_allocate(tmp_path):
    """A size field of 2^31-1 in a small file ends the walk without reading or allocating it."""
    seg = bytearray(SEGMENT_BYTES[0])
    seg[8:12] = (0x7FFFFFFF).to_bytes(4, "big")
    tracemalloc.start()
    items = dump_everything(bytes(seg))
    _cur, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 64 << 20
    assert any(type(i).__name__ == "TrailingBytes" for i in items)


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
