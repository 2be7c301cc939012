"""convert_segment (kafkatool/convert/segment.py): one segment converted into a directory.

Oracles: kafka-python and aiokafka read the source and the output (offsets, keys, values,
timestamps, headers as spec §13 says); ``kafkatool reindex``'s planner, run with ``rebuild_all`` on
the output, must plan no change (the indexes are what reindex writes for the new file); the
side-file decisions follow spec §9/§10/§12.4 as the module docstring states them.
"""

from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path

import pytest
from aiokafka.errors import UnsupportedCodecError
from aiokafka.record.memory_records import MemoryRecords as AioMemoryRecords
from kafka.record import MemoryRecords as KpMemoryRecords
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from conftest import FIXTURES
from test_fixtures import old_kafka_lz4  # kafka-python reads magic-0 lz4 only with xxhash (or this stand-in)
from kafkatool.convert.options import ConvertOptions
from kafkatool.convert.segment import WRITE_BUFFER, convert_segment
from kafkatool.errors import KafkaToolError
from kafkatool.record.compression import Codec
from kafkatool.reindex import plan_reindex
from kafkatool.segment.logdir import Segment

PARTITIONS = sorted(d.name for d in FIXTURES.iterdir() if d.is_dir() and not d.name.startswith("__"))
SEGMENTS = [(p, log.name) for p in PARTITIONS for log in sorted((FIXTURES / p).glob("*.log"))]
CODECS = (None, Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD)


# ----------------------------------------------------------------------------- oracles


def _ts(value) -> int | None:
    return None if value is None or value == -1 else value


def kp_view(buf: bytes) -> tuple[list[tuple], set[int]]:
    """kafka-python: every non-control record (offset, key, value, timestamp, headers) and the magics."""
    out, magics = [], set()
    records = KpMemoryRecords(buf)
    with old_kafka_lz4():
        while (batch := records.next_batch()) is not None:
            magics.add(batch.magic)
            if getattr(batch, "is_control_batch", False):
                continue
            for r in batch:
                out.append((r.offset, r.key, r.value, _ts(r.timestamp), tuple(tuple(h) for h in (r.headers or ()))))
    return out, magics


def kp_control_records(buf: bytes) -> int:
    """kafka-python: how many control records (transaction markers) ``buf`` holds."""
    n = 0
    records = KpMemoryRecords(buf)
    with old_kafka_lz4():
        while (batch := records.next_batch()) is not None:
            if getattr(batch, "is_control_batch", False):
                n += sum(1 for _ in batch)
    return n


def aio_view(buf: bytes) -> list[tuple] | None:
    """aiokafka's view, as :func:`kp_view`; None when it refuses the codec (magic-0 lz4)."""
    out = []
    records = AioMemoryRecords(buf)
    try:
        while (batch := records.next_batch()) is not None:
            if getattr(batch, "is_control_batch", False):
                continue
            for r in batch:
                out.append((r.offset, r.key, r.value, _ts(r.timestamp), tuple(tuple(h) for h in (r.headers or ()))))
    except UnsupportedCodecError:
        return None
    return out


def expected_after(source: list[tuple], magic: int) -> list[tuple]:
    """What spec §13 keeps of the source records at ``magic``: v0 has no timestamps, v0/v1 no headers."""
    return [(o, k, v, None if magic == 0 else ts, () if magic < 2 else h) for o, k, v, ts, h in source]


def legal(source_has_zstd: bool, magic: int, codec) -> bool:
    if magic < 2 and (codec == Codec.ZSTD or (codec is None and source_has_zstd)):
        return False
    return True


def assert_reindex_unchanged(log: Path) -> None:
    """``kafkatool reindex --all`` would change nothing in the output segment."""
    plan = plan_reindex(str(log), rebuild_all=True)
    assert plan.refused is None, plan.refused
    assert plan.bad_tail is None, plan.bad_tail
    assert plan.valid_bytes == plan.log_size == log.stat().st_size
    changes = [(c.kind, c.action, c.why) for c in plan.changes if c.action != "unchanged"]
    assert changes == []


def has_zstd(path: Path) -> bool:
    from kafkatool.convert.tree import find_zstd_batch

    return find_zstd_batch(str(path)) is not None


# ----------------------------------------------------------------------------- every fixture segment


@pytest.mark.parametrize("magic", [0, 1, 2])
@pytest.mark.parametrize("part,log", SEGMENTS, ids=[p for p, _ in SEGMENTS])
def test_every_fixture_segment_to_every_magic_and_codec(tmp_path: Path, part: str, log: str, magic: int) -> None:
    src = FIXTURES / part / log
    source, _ = kp_view(src.read_bytes())
    zstd = has_zstd(src)
    for codec in CODECS:
        if not legal(zstd, magic, codec):
            continue
        out = tmp_path / f"{magic}-{codec}"
        out.mkdir()
        result = convert_segment(Segment.at(src), str(out), ConvertOptions(magic=magic, codec=codec))
        new = out / log
        assert result.out_path == str(new)
        data = new.read_bytes()
        assert result.bytes_out == len(data) and result.bytes_in == src.stat().st_size
        got, magics = kp_view(data)
        assert magics <= {magic}, (codec, magics)
        assert got == expected_after(source, magic), codec
        aio = aio_view(data)
        if aio is None:  # aiokafka refuses lz4 at magic 0 (fixtures/README, test_fixtures note)
            assert magic == 0 and (codec == Codec.LZ4 or codec is None)
        else:
            assert aio == got
        assert result.loss.records_out == len(got) + kp_control_records(data)
        assert_reindex_unchanged(new)
        # no temp file is left
        assert sorted(p.name for p in out.iterdir() if ".kafkatool-tmp" in p.name) == []


def test_zstd_batch_below_v2_is_a_located_error_of_the_converter(tmp_path: Path) -> None:
    """convert_segment alone (no plan) still never writes zstd below v2: the error names the
    batch, and no file is left in the output dir."""
    src = FIXTURES / "v2-zstd-0" / "00000000000000000000.log"
    with pytest.raises(KafkaToolError) as e:
        convert_segment(Segment.at(src), str(tmp_path), ConvertOptions(magic=1))
    assert e.value.path == str(src) and e.value.position == 0
    assert list(tmp_path.iterdir()) == []


# ----------------------------------------------------------------------------- generated, bigger segments


def v2_segment(batches: int, per_batch: int, base: int = 0, codec: int = 0) -> bytes:
    """A v2 segment built with kafka-python's builder (base offsets patched in: the builder writes 0)."""
    out = bytearray()
    offset = base
    for b in range(batches):
        builder = DefaultRecordBatchBuilder(2, codec, False, -1, -1, -1, 1 << 20)
        for i in range(per_batch):
            builder.append(i, 1700000000000 + offset + i, f"k{offset + i}".encode(), b"v" * (40 + (offset + i) % 50), [])
        raw = bytearray(builder.build())
        struct.pack_into(">q", raw, 0, offset)
        out += raw
        offset += per_batch
    return bytes(out)


def v1_segment(messages: int, base: int = 0) -> bytes:
    out = bytearray()
    for o in range(base, base + messages):
        builder = LegacyRecordBatchBuilder(1, 0, 1 << 20)
        builder.append(o, 1700000000000 + o, f"k{o}".encode(), b"w" * (30 + o % 70))
        out += builder.build()
    return bytes(out)


@pytest.mark.parametrize("kind", ["v2", "v1"])
@pytest.mark.parametrize("magic", [0, 1, 2])
def test_bigger_segment_indexes_equal_reindex(tmp_path: Path, kind: str, magic: int) -> None:
    """Many batches: the output's .index/.timeindex have entries, and reindex would write the same."""
    base = 1000
    data = v2_segment(150, 7, base) if kind == "v2" else v1_segment(1200, base)
    src_dir = tmp_path / "src-0"
    src_dir.mkdir()
    src = src_dir / "00000000000000001000.log"
    src.write_bytes(data)
    out = tmp_path / "out"
    out.mkdir()
    source, _ = kp_view(data)
    for codec in (None, Codec.GZIP):
        shutil.rmtree(out)
        out.mkdir()
        result = convert_segment(Segment.at(src), str(out), ConvertOptions(magic=magic, codec=codec))
        new = out / src.name
        got, magics = kp_view(new.read_bytes())
        assert magics == {magic}
        assert got == expected_after(source, magic)
        index = (out / "00000000000000001000.index").read_bytes()
        timeindex = (out / "00000000000000001000.timeindex").read_bytes()
        if kind == "v1" and magic == 2 and codec is None:
            # uncompressed legacy messages coalesce into v2 batches of up to 1 MiB: one batch here
            assert result.batches_out == 1 and index == b""
        elif codec is None:
            assert len(index) >= 8 * 10  # > 40 KiB of output at a 4096-byte interval
            if magic > 0:
                assert len(timeindex) >= 12 * 10
            else:  # v0: no timestamps, so no time-index entry at all (§8.3)
                assert timeindex == b""
        assert_reindex_unchanged(new)
        assert result.batches_out == len(list(entry_positions(new.read_bytes())))


def entry_positions(buf: bytes):
    pos = 0
    while pos + 12 <= len(buf):
        (size,) = struct.unpack_from(">i", buf, pos + 8)
        yield pos
        pos += 12 + size


def test_write_buffer_bound_is_crossed_and_file_is_whole(tmp_path: Path, monkeypatch) -> None:
    """A segment bigger than the write buffer (made small here) is written whole, in order."""
    import kafkatool.convert.segment as seg_mod

    monkeypatch.setattr(seg_mod, "WRITE_BUFFER", 1000)
    writes = []
    real_write_all = seg_mod.write_all

    def spy(fd, data, path):
        writes.append(len(data))
        real_write_all(fd, data, path)

    monkeypatch.setattr(seg_mod, "write_all", spy)
    data = v2_segment(40, 5)
    src = tmp_path / "00000000000000000000.log"
    src.write_bytes(data)
    out = tmp_path / "o"
    out.mkdir()
    convert_segment(Segment.at(src), str(out), ConvertOptions(magic=2))  # same codec: bytes copied
    assert (out / src.name).read_bytes() == data
    log_writes = writes[:-2]  # the two index files are written last
    assert len(log_writes) > 1 and max(log_writes) < 1000 + 2000 and sum(log_writes) == len(data)
    assert WRITE_BUFFER == 8 << 20


# ----------------------------------------------------------------------------- side files


def _copy_partition(name: str, tmp_path: Path) -> Path:
    dst = tmp_path / name
    shutil.copytree(FIXTURES / name, dst)
    return dst


def test_txnindex_copied_for_v2_output_and_equal_to_the_rebuild(tmp_path: Path) -> None:
    src = FIXTURES / "txn-0" / "00000000000000000100.log"
    out = tmp_path / "o"
    out.mkdir()
    r = convert_segment(Segment.at(src), str(out), ConvertOptions(magic=2, codec=Codec.GZIP))
    sides = {s.name: s for s in r.side_files}
    assert sides["00000000000000000100.txnindex"].action == "copied"
    assert sides["00000000000000000100.index"].action == sides["00000000000000000100.timeindex"].action == "rebuilt"
    assert (out / "00000000000000000100.txnindex").read_bytes() == (FIXTURES / "txn-0" / "00000000000000000100.txnindex").read_bytes()
    # one entry, spec §9 layout: version 0, producer 6000, first 103, last (the ABORT marker) 113, LSO 114
    assert struct.unpack(">hqqqq", (out / "00000000000000000100.txnindex").read_bytes()) == (0, 6000, 103, 113, 114)
    assert_reindex_unchanged(out / src.name)  # reindex rebuilds the same .txnindex from the markers


@pytest.mark.parametrize("magic", [0, 1])
def test_txnindex_dropped_below_v2(tmp_path: Path, magic: int) -> None:
    src = FIXTURES / "txn-0" / "00000000000000000100.log"
    out = tmp_path / "o"
    out.mkdir()
    r = convert_segment(Segment.at(src), str(out), ConvertOptions(magic=magic, codec=Codec.GZIP))
    side = {s.name: s for s in r.side_files}["00000000000000000100.txnindex"]
    assert side.action == "dropped" and "control batches" in side.reason
    assert not (out / "00000000000000000100.txnindex").exists()
    assert r.loss.control_batches_dropped == 2  # the COMMIT at 105 and the ABORT at 113
    assert r.loss.aborted_records_kept == 2  # 103-104 (producer 6000): readable now the ABORT is gone
    assert_reindex_unchanged(out / src.name)


def test_txnindex_dropped_with_drop_aborted(tmp_path: Path) -> None:
    src = FIXTURES / "txn-0" / "00000000000000000100.log"
    out = tmp_path / "o"
    out.mkdir()
    r = convert_segment(Segment.at(src), str(out), ConvertOptions(magic=2, drop_aborted=True))
    side = {s.name: s for s in r.side_files}["00000000000000000100.txnindex"]
    assert side.action == "dropped" and "--drop-aborted" in side.reason
    assert not (out / "00000000000000000100.txnindex").exists()
    got, _ = kp_view((out / src.name).read_bytes())
    assert [o for o, *_ in got if o in (103, 104)] == []  # producer 6000's aborted records
    assert r.loss.aborted_records_dropped == 2
    # the ABORT marker stays, but it ends an emptied transaction: the rebuild makes no entry either
    assert_reindex_unchanged(out / src.name)


@pytest.mark.parametrize("magic,action", [(2, "copied"), (1, "dropped"), (0, "dropped")])
def test_producer_snapshot_at_the_base(tmp_path: Path, magic: int, action: str) -> None:
    part = _copy_partition("golden-0", tmp_path)
    # golden-0's snapshot is named after offset 3 (its log end); give the segment one at its base
    shutil.copy(part / "00000000000000000003.snapshot", part / "00000000000000000000.snapshot")
    out = tmp_path / "o"
    out.mkdir()
    r = convert_segment(Segment.at(part / "00000000000000000000.log"), str(out), ConvertOptions(magic=magic))
    side = {s.name: s for s in r.side_files}["00000000000000000000.snapshot"]
    assert side.action == action
    if action == "copied":
        assert (out / side.name).read_bytes() == (part / side.name).read_bytes()
        assert "producer id" in side.reason
    else:
        assert not (out / side.name).exists()
        assert "no producer id" in side.reason


def test_modes_follow_the_source_files(tmp_path: Path) -> None:
    part = _copy_partition("v2-gzip-0", tmp_path)
    os.chmod(part / "00000000000000000000.log", 0o640)
    os.chmod(part / "00000000000000000000.index", 0o600)
    (part / "00000000000000000000.timeindex").unlink()  # absent: the .log's mode
    out = tmp_path / "o"
    out.mkdir()
    convert_segment(Segment.at(part / "00000000000000000000.log"), str(out), ConvertOptions(magic=1))
    modes = {p.name: p.stat().st_mode & 0o777 for p in out.iterdir()}
    assert modes == {"00000000000000000000.log": 0o640, "00000000000000000000.index": 0o600,
                     "00000000000000000000.timeindex": 0o640}


# ----------------------------------------------------------------------------- dry run, progress, errors


@pytest.mark.parametrize("magic", [0, 1, 2])
def test_dry_run_counts_what_the_real_run_loses_and_writes_nothing(tmp_path: Path, magic: int) -> None:
    src = FIXTURES / "txn-0" / "00000000000000000100.log"
    options = ConvertOptions(magic=magic, codec=Codec.LZ4)
    calls: list[int] = []
    dry = convert_segment(Segment.at(src), None, options, progress=calls.append)
    assert dry.out_path is None and dry.bytes_out == 0
    assert sum(calls) == src.stat().st_size
    out = tmp_path / "o"
    out.mkdir()
    real = convert_segment(Segment.at(src), str(out), options)
    assert dry.loss.as_dict() == real.loss.as_dict()
    assert dry.batches_out == real.batches_out
    assert [s.action for s in dry.side_files] == [s.action for s in real.side_files]


def test_a_bad_batch_stops_with_its_located_error_and_leaves_no_file(tmp_path: Path) -> None:
    data = bytearray(v2_segment(10, 3))
    bad = 0
    for i, pos in enumerate(entry_positions(bytes(data))):
        if i == 4:
            bad = pos
            data[pos + 70] ^= 0xFF  # inside the records: the CRC no longer holds
    src = tmp_path / "00000000000000000000.log"
    src.write_bytes(bytes(data))
    out = tmp_path / "o"
    out.mkdir()
    with pytest.raises(KafkaToolError) as e:
        convert_segment(Segment.at(src), str(out), ConvertOptions(magic=1))
    assert e.value.path == str(src) and e.value.position == bad
    assert list(out.iterdir()) == []
    # --skip-damaged converts around it: the batch's 3 records are gone, the range is listed
    r = convert_segment(Segment.at(src), str(out), ConvertOptions(magic=1, skip_damaged=True))
    got, _ = kp_view((out / src.name).read_bytes())
    assert [o for o, *_ in got] == [o for o in range(30) if not 12 <= o < 15]
    assert r.loss.damaged_count == 1 and r.loss.damaged[0].start == bad
    assert_reindex_unchanged(out / src.name)


@pytest.mark.parametrize("magic", [0, 1, 2])
def test_offsets_recovery_would_refuse_are_damage_in_the_dry_and_the_real_run(tmp_path: Path, magic: int) -> None:
    """An entry whose offsets lie below the file name's base (recovery's ``ensureOffsetInRange``,
    §12.2), or do not follow the previous entry's: the same located error from the analysis and
    the real run (at the entry's position), a damaged range with --skip-damaged."""
    first = v2_segment(1, 5, base=10)
    cases = {
        "offset_out_of_range": first + v2_segment(1, 5, base=3),  # 3-7 below the base 10
        "offset_out_of_order": first + v2_segment(1, 5, base=20) + v2_segment(1, 5, base=12),  # 12 after 24
    }
    for kind, data in cases.items():
        src = tmp_path / kind / "00000000000000000010.log"
        src.parent.mkdir()
        src.write_bytes(data)
        bad = list(entry_positions(data))[-1]
        out = tmp_path / kind / "o"
        out.mkdir()
        for where in (None, str(out)):
            with pytest.raises(KafkaToolError) as e:
                convert_segment(Segment.at(src), where, ConvertOptions(magic=magic))
            assert (e.value.kind, e.value.path, e.value.position) == (kind, str(src), bad)
        assert list(out.iterdir()) == []
        r = convert_segment(Segment.at(src), str(out), ConvertOptions(magic=magic, skip_damaged=True))
        assert [(d.start, d.end) for d in r.loss.damaged] == [(bad, len(data))]
        assert r.loss.damaged[0].reason.startswith(kind)
        got, _ = kp_view((out / src.name).read_bytes())
        assert [o for o, *_ in got] == [o for o in range(10, 15)] + ([20, 21, 22, 23, 24] if "order" in kind else [])
        assert_reindex_unchanged(out / src.name)


def test_a_flipped_legacy_offset_field_is_damage(tmp_path: Path) -> None:
    """The legacy CRC does not cover the offset field (§5.1): a flipped high byte makes a wild offset."""
    data = bytearray(v1_segment(20, base=5))
    pos = list(entry_positions(bytes(data)))[7]
    data[pos] ^= 0x80  # the offset's sign bit: far below the base
    src = tmp_path / "00000000000000000005.log"
    src.write_bytes(bytes(data))
    with pytest.raises(KafkaToolError) as e:
        convert_segment(Segment.at(src), None, ConvertOptions(magic=2))
    assert e.value.kind == "offset_out_of_range" and e.value.position == pos


def test_a_log_that_cannot_be_read_is_a_located_error_not_an_oserror(tmp_path: Path) -> None:
    src = tmp_path / "00000000000000000000.log"
    src.write_bytes(v2_segment(2, 2))
    segment = Segment.at(src)
    src.unlink()  # gone between the listing and the conversion
    for out in (None, str(tmp_path)):
        for magic in (1, 2):  # below v2 the aborted-transaction pre-pass meets it first, else the walk
            with pytest.raises(KafkaToolError) as e:
                convert_segment(segment, out, ConvertOptions(magic=magic, codec=Codec.GZIP))
            assert e.value.path == str(src) and "No such file" in str(e.value)
    assert list(tmp_path.iterdir()) == []


def test_index_fields_read_what_the_walk_reads() -> None:
    """The header fields the output's indexes are built from, for every entry of every fixture
    (v0, v1, wrappers, v2, control, empty): the walk's Batch says the same."""
    from kafkatool.convert.segment import index_fields
    from kafkatool.segment.walk import SegmentWalker

    seen = set()
    for log in sorted(FIXTURES.glob("*/*.log")):
        for batch, data in SegmentWalker(str(log)):
            assert index_fields(bytes(data)) == (batch.offset, batch.last_offset, batch.max_timestamp)
            seen.add(batch.magic)
    assert seen == {0, 1, 2}
