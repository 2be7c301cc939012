"""``kafkatool convert``'s command line: every option and usage error, the exit codes, what goes to
standard output and what to standard error, the loss report (text and the JSON Lines schema of
kafkatool-convert(1)), --strict, the damage options, the progress bar, names that are not UTF-8,
``--in-place`` (plan, --execute, the lock, restore), and the man page's EXAMPLES run as printed.

The conversion's correctness (every fixture x magic x codec against kafka-python and aiokafka) is
tests/test_convert_matrix.py's; here expected values come from the fixtures' README (40 records,
14 with two headers each, 4 batches of 10 in every v2 partition), from the bytes of the files
(lengths and CRCs read with ``struct``/``zlib``), and from kafka-python reading the output.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from conftest import FIXTURES, REAL, REPO

V2 = FIXTURES / "v2-none-0"
V2_LOG = V2 / "00000000000000000000.log"
#: fixtures/README.md: 40 records per partition; v2 records i % 3 == 0 carry two headers.
RECORDS = 40
WITH_HEADERS = len(range(0, RECORDS, 3))  # 14
HEADERS = 2 * WITH_HEADERS  # 28
BAD_CRC = "kaspersorensen__kafka-record-updater/src/test/resources/example-log-health-check.log"


def entries(path: Path) -> list[tuple[int, int, int, int]]:
    """``(position, offset, size, magic)`` of every entry of a ``.log``, read with struct (§3)."""
    data = path.read_bytes()
    out, pos = [], 0
    while pos + 17 <= len(data):
        offset, length = struct.unpack_from(">qi", data, pos)
        out.append((pos, offset, 12 + length, data[pos + 16]))
        pos += 12 + length
    return out


def offsets_read_by_kafka_python(path: Path) -> list[int]:
    """Every record offset of a ``.log``, as kafka-python reads it."""
    from kafka.record.memory_records import MemoryRecords

    records = MemoryRecords(path.read_bytes())
    out = []
    while records.has_next():
        batch = records.next_batch()
        out += [r.offset for r in batch]
    return out


def snapshot(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory``, by relative path (to prove nothing changed)."""
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def jsonl(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines()]


def copy_partition(src: Path, tmp_path: Path, name: str | None = None) -> Path:
    """A copy of a fixture partition inside a log dir of its own under ``tmp_path``."""
    log_dir = tmp_path / "data"
    log_dir.mkdir(exist_ok=True)
    dst = log_dir / (name or src.name)
    shutil.copytree(src, dst)
    return dst


# --------------------------------------------------------------------------- usage errors (exit 2)


@pytest.mark.parametrize(("args", "message"), [
    (["--to-magic", "2", str(V2)], "expected SRC and DEST, got 1 path"),
    (["--to-magic", "2", str(V2), "/tmp/a", "/tmp/b"], "expected SRC and DEST, got 3 paths"),
    (["--to-magic", "2"], "expected SRC and DEST, got 0 paths"),
    (["--to-magic", "2", "--in-place"], "--in-place needs at least one SRC"),
    (["--to-magic", "2", "--execute", str(V2), "DEST"], "--execute goes with --in-place"),
    (["--to-magic", "2", "--backup-dir", "/tmp/b", str(V2), "DEST"], "--backup-dir goes with --in-place"),
    (["--to-magic", "2", "--force", str(V2), "DEST"], "--force goes with --in-place"),
    (["--to-magic", "2", "--allow-transitional", str(V2), "DEST"], "--allow-transitional goes with --in-place"),
    (["--to-magic", "2", "--skip-damaged", "--salvage", str(V2), "DEST"], "--skip-damaged or --salvage, not both"),
    (["--to-magic", "2", "--level", "5", str(V2), "DEST"], "needs --compression"),
    (["--to-magic", "2", "--compression", "snappy", "--level", "1", str(V2), "DEST"], "snappy takes no compression level"),
    (["--to-magic", "2", "--compression", "none", "--level", "1", str(V2), "DEST"], "none takes no compression level"),
    (["--to-magic", "2", "--compression", "gzip", "--level", "0", str(V2), "DEST"], "0 is not a gzip level (1 to 9)"),
    (["--to-magic", "2", "--compression", "gzip", "--level", "10", str(V2), "DEST"], "10 is not a gzip level (1 to 9)"),
    (["--to-magic", "2", "--compression", "lz4", "--level", "0", str(V2), "DEST"], "0 is not a lz4 level (1 to 17)"),
    (["--to-magic", "2", "--compression", "lz4", "--level", "18", str(V2), "DEST"], "18 is not a lz4 level (1 to 17)"),
    (["--to-magic", "2", "--compression", "zstd", "--level", "23", str(V2), "DEST"], "23 is not a zstd level (-131072 to 22)"),
    (["--to-magic", "2", "--compression", "zstd", "--level", "-131073", str(V2), "DEST"], "-131073 is not a zstd level"),
    (["--to-magic", "1", "--compression", "zstd", str(V2), "DEST"], "zstd exists only in magic 2"),
    (["--to-magic", "0", "--compression", "zstd", "--in-place", str(V2)], "zstd exists only in magic 2"),
    (["--to-magic", "3", str(V2), "DEST"], "'3' is not one of '0', '1', '2'"),
    ([str(V2), "DEST"], "Missing option '--to-magic'"),
    (["--to-magic", "2", "--max-batch-bytes", "0", str(V2), "DEST"], "--max-batch-bytes"),
    (["--to-magic", "2", "--compression", "brotli", str(V2), "DEST"], "'brotli' is not one of"),
    (["--to-magic", "2", "--format", "table", str(V2), "DEST"], "'table' is not one of"),
    (["--to-magic", "2", "/nonexistent/orders-3", "DEST"], "/nonexistent/orders-3: no such file or directory"),
    (["--to-magic", "2", "--in-place", str(V2), "/nonexistent/orders-3"], "/nonexistent/orders-3: no such file"),
])
def test_usage_errors_exit_2_before_anything_is_read(run, tmp_path, monkeypatch, args, message) -> None:
    monkeypatch.chdir(tmp_path)  # a relative DEST would land here
    r = run("convert", *args)
    assert r.code == 2, r
    assert message in r.err, r.err
    assert r.out == "" and "Traceback" not in r.err
    assert not (tmp_path / "DEST").exists()


@pytest.mark.parametrize(("codec", "level"), [("gzip", 1), ("gzip", 9), ("lz4", 1), ("lz4", 17), ("zstd", 22),
                                              ("zstd", -131072), ("zstd", 1)])
def test_every_level_in_range_converts(run, tmp_path, codec, level) -> None:
    """Both bounds of each codec's range are accepted by the command and by its library."""
    r = run("convert", "--to-magic", "2", "--compression", codec, "--level", str(level), str(V2), str(tmp_path / "out"))
    assert r.code == 0, r
    assert offsets_read_by_kafka_python(tmp_path / "out" / V2_LOG.name) == list(range(RECORDS))
    codec_id = {"gzip": 1, "lz4": 3, "zstd": 4}[codec]
    data = (tmp_path / "out" / V2_LOG.name).read_bytes()
    for pos, _o, _s, magic in entries(tmp_path / "out" / V2_LOG.name):
        assert magic == 2 and struct.unpack_from(">h", data, pos + 21)[0] & 7 == codec_id


# --------------------------------------------------------------------------- refusals before writing


def test_dest_not_empty_is_refused_and_left_alone(run, tmp_path) -> None:
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "keep.txt").write_text("mine")
    r = run("convert", "--to-magic", "2", str(V2), str(dest))
    assert r.code == 2, r
    assert str(dest) in r.err and r.err.startswith("kafkatool: error: ")
    assert snapshot(dest) == {"keep.txt": b"mine"}
    assert [p.name for p in tmp_path.iterdir()] == ["dest"]  # no temp dir left beside it


def test_an_empty_dest_is_filled(run, tmp_path) -> None:
    dest = tmp_path / "dest"
    dest.mkdir()
    r = run("convert", "--to-magic", "2", str(V2), str(dest))
    assert r.code == 0, r
    assert (dest / V2_LOG.name).is_file()


def test_dest_inside_src_is_refused(run, tmp_path) -> None:
    part = copy_partition(V2, tmp_path)
    before = snapshot(part)
    r = run("convert", "--to-magic", "1", str(part), str(part / "out"))
    assert r.code == 2, r
    assert snapshot(part) == before


@pytest.mark.parametrize("magic", ["0", "1"])
def test_a_zstd_batch_below_magic_2_is_refused_naming_file_and_position(run, tmp_path, magic) -> None:
    src = FIXTURES / "v2-zstd-0"
    r = run("convert", "--to-magic", magic, str(src), str(tmp_path / "out"))
    assert r.code == 2, r
    first = entries(src / V2_LOG.name)[0][0]
    assert f"{src / V2_LOG.name}:{first}: " in r.err and "zstd" in r.err
    assert "nothing was written" in r.err
    assert not (tmp_path / "out").exists() and list(tmp_path.iterdir()) == []
    # another codec asked: allowed
    r = run("convert", "--to-magic", magic, "--compression", "gzip", str(src), str(tmp_path / "out"))
    assert r.code == 0, r


# --------------------------------------------------------------------------- the text report


def test_down_conversion_reports_each_loss_on_stderr_and_nothing_on_stdout(run, tmp_path) -> None:
    dest = tmp_path / "v1"
    r = run("convert", "--to-magic", "1", str(V2), str(dest))
    assert r.code == 0, r
    assert r.out == ""
    err = r.err.splitlines()
    assert err[0] == f"convert: {V2} -> {dest} (partition; to magic 1, each batch's own codec)"
    assert err[1].startswith(f"{V2} -> {dest}: 1 segment, 4 batches -> {RECORDS}, {RECORDS} records -> {RECORDS}, ")
    assert f"  lost      {WITH_HEADERS} records lost their headers ({HEADERS} headers)" in err
    assert any(line.startswith("  lost      4 batches lost producer fields") for line in err)
    assert not any("timestamp" in line for line in err)  # magic 1 keeps them
    assert any(line.startswith("  rebuilt   00000000000000000000.index, 00000000000000000000.timeindex") for line in err)
    assert any(line.startswith("  copied    leader-epoch-checkpoint") for line in err)
    assert re.fullmatch(rf"convert: 1 partition, 1 segment, 4 batches -> {RECORDS}, {RECORDS} records -> {RECORDS}, "
                        rf"\d+ -> \d+ bytes, written to {re.escape(str(dest))} in [\d.]+ s; 2 kinds of loss \(listed above\)",
                        err[-1]), err[-1]
    assert offsets_read_by_kafka_python(dest / V2_LOG.name) == list(range(RECORDS))
    assert {m for *_x, m in entries(dest / V2_LOG.name)} == {1}


def test_magic_0_loses_every_timestamp(run, tmp_path) -> None:
    r = run("convert", "--to-magic", "0", str(V2_LOG), str(tmp_path / "v0"))
    assert r.code == 0, r
    assert any(line.startswith(f"  lost      {RECORDS} records lost their timestamp") for line in r.err.splitlines())
    assert r.err.splitlines()[0].endswith("(segment; to magic 0, each batch's own codec)")
    assert sorted(os.listdir(tmp_path / "v0")) == ["00000000000000000000.index", V2_LOG.name, "00000000000000000000.timeindex"]


def test_up_conversion_loses_nothing(run, tmp_path) -> None:
    r = run("convert", "--to-magic", "2", "--strict", str(FIXTURES / "v1-gzip-0"), str(tmp_path / "v2"))
    assert r.code == 0, r
    assert r.err.rstrip().endswith("; nothing lost")
    assert "lost " not in r.err
    assert offsets_read_by_kafka_python(tmp_path / "v2" / V2_LOG.name) == list(range(RECORDS))


def test_a_log_dir_lists_its_own_side_files(run, tmp_path) -> None:
    r = run("convert", "--to-magic", "2", "--compression", "zstd", str(FIXTURES), str(tmp_path / "x"))
    assert r.code == 0, r
    lines = r.err.splitlines()
    assert f"{FIXTURES}:" in lines
    tail = lines[lines.index(f"{FIXTURES}:") + 1:-1]
    assert any("meta.properties" in line for line in tail)
    assert any("recovery-point-offset-checkpoint" in line for line in tail)
    assert (tmp_path / "x" / "meta.properties").read_bytes() == (FIXTURES / "meta.properties").read_bytes()


# --------------------------------------------------------------------------- --strict


def test_strict_with_a_loss_writes_nothing_and_names_every_loss(run, tmp_path) -> None:
    dest = tmp_path / "out"
    r = run("convert", "--to-magic", "0", "--strict", str(V2), str(dest))
    assert r.code == 1, r
    assert r.out == ""
    last = r.err.splitlines()[-1]
    assert last.startswith("kafkatool: error: --strict: the conversion would lose data: ")
    for item in (f"{WITH_HEADERS} records lost their headers ({HEADERS} headers)", "4 batches lost producer fields",
                 f"{RECORDS} records lost their timestamp"):
        assert item in last
    assert last.endswith("; nothing was written")
    assert not dest.exists() and list(tmp_path.iterdir()) == []


def test_strict_jsonl_says_strict_failed(run, tmp_path) -> None:
    r = run("convert", "--to-magic", "1", "--strict", "--format", "jsonl", str(V2), str(tmp_path / "out"))
    assert r.code == 1, r
    (summary,) = jsonl(r.out)
    assert summary["type"] == "convert_summary" and summary["strictFailed"] is True and summary["written"] is False
    assert summary["loss"]["headersDropped"] == WITH_HEADERS and summary["loss"]["lossless"] is False
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------- JSON Lines


SEGMENT_KEYS = ["type", "segment", "output", "baseOffset", "bytesIn", "bytesOut", "batchesOut", "sideFiles", "loss"]
PARTITION_KEYS = ["type", "partitionDir", "dest", "topic", "partition", "segments", "bytesIn", "bytesOut",
                  "sideFiles", "loss"]
SUMMARY_KEYS = ["type", "src", "dest", "kind", "inPlace", "execute", "toMagic", "compression", "level",
                "maxBatchBytes", "dropAborted", "skipDamaged", "salvage", "strict", "partitions", "segments",
                "bytesIn", "bytesOut", "written", "strictFailed", "sideFiles", "loss", "seconds"]
LOSS_KEYS = ["batchesIn", "batchesOut", "recordsIn", "recordsOut", "headersDropped", "headerCount",
             "producerFieldsDropped", "controlBatchesDropped", "controlRecordsDropped", "timestampsDropped",
             "emptyBatchesDropped", "abortedRecordsKept", "abortedRecordsDropped", "damagedCount", "damaged",
             "salvagedCount", "salvaged", "lossless"]


def _check_loss(loss: dict) -> None:
    assert list(loss) == LOSS_KEYS
    assert all(type(loss[k]) is int for k in LOSS_KEYS if k not in ("damaged", "salvaged", "lossless"))


def test_jsonl_schema_of_a_log_dir(run, tmp_path) -> None:
    dest = tmp_path / "x"
    r = run("convert", "--to-magic", "1", "--compression", "gzip", "--level", "6", "--format", "jsonl",
            str(FIXTURES), str(dest))
    assert r.code == 0, r
    objs = jsonl(r.out)
    assert [o["type"] for o in objs][-1] == "convert_summary"
    assert len(r.err.splitlines()) == 1 and r.err.startswith("convert: ")  # only the summary line on stderr
    pending: list[dict] = []
    partitions = []
    for o in objs[:-1]:
        if o["type"] == "convert_segment":
            assert list(o) == SEGMENT_KEYS
            _check_loss(o["loss"])
            assert Path(o["output"]).is_file() and Path(o["output"]).parent.parent == dest
            assert o["bytesIn"] == os.path.getsize(o["segment"]) and o["bytesOut"] == os.path.getsize(o["output"])
            assert all(list(f) == ["name", "action", "reason"] for f in o["sideFiles"])
            pending.append(o)
        else:
            assert o["type"] == "convert_partition" and list(o) == PARTITION_KEYS
            _check_loss(o["loss"])
            assert o["segments"] == len(pending) and pending  # its segments came just before it
            assert all(Path(s["segment"]).parent == Path(o["partitionDir"]) for s in pending)
            assert o["bytesOut"] == sum(s["bytesOut"] for s in pending)
            assert o["loss"]["recordsIn"] == sum(s["loss"]["recordsIn"] for s in pending)
            partitions.append(o)
            pending = []
    assert not pending
    summary = objs[-1]
    assert list(summary) == SUMMARY_KEYS
    _check_loss(summary["loss"])
    assert summary["kind"] == "log_dir" and summary["toMagic"] == 1 and summary["compression"] == "gzip"
    assert summary["level"] == 6 and summary["written"] is True and summary["strictFailed"] is False
    assert summary["partitions"] == len(partitions)
    assert {Path(p["partitionDir"]).name for p in partitions} == {
        d.name for d in FIXTURES.iterdir() if d.is_dir() and d.name != "__cluster_metadata-0"}
    assert summary["bytesOut"] == sum(p["bytesOut"] for p in partitions)
    for key in ("recordsIn", "headersDropped", "controlBatchesDropped"):
        assert summary["loss"][key] == sum(p["loss"][key] for p in partitions)
    assert any(f["name"] == "meta.properties" for f in summary["sideFiles"])
    v2 = next(p for p in partitions if p["topic"] == "v2-none")
    assert v2["partition"] == 0 and v2["loss"]["headersDropped"] == WITH_HEADERS
    assert v2["loss"]["headerCount"] == HEADERS and v2["loss"]["recordsOut"] == RECORDS


@pytest.mark.parametrize("drop", [False, True])
def test_jsonl_counts_aborted_records(run, tmp_path, drop) -> None:
    """txn-0 (fixtures/README.md): 10 batches, 49 records; offsets 103-104 an aborted transaction
    (ABORT at 113), two control batches (105, 113), one batch emptied by compaction (119-121)."""
    args = ["--drop-aborted"] if drop else []
    r = run("convert", "--to-magic", "1", "--compression", "gzip", *args, "--format", "jsonl",
            str(FIXTURES / "txn-0"), str(tmp_path / "t"))
    assert r.code == 0, r
    summary = jsonl(r.out)[-1]
    loss = summary["loss"]
    assert (loss["batchesIn"], loss["recordsIn"]) == (10, 49)
    assert (loss["controlBatchesDropped"], loss["controlRecordsDropped"], loss["emptyBatchesDropped"]) == (2, 2, 1)
    assert (loss["abortedRecordsKept"], loss["abortedRecordsDropped"]) == ((0, 2) if drop else (2, 0))
    assert loss["recordsOut"] == 49 - 2 - (2 if drop else 0)
    assert summary["dropAborted"] is drop
    if not drop:
        r = run("convert", "--to-magic", "1", "--compression", "gzip", str(FIXTURES / "txn-0"), str(tmp_path / "u"))
        assert ("  lost      2 records of aborted transactions kept and now readable (use --drop-aborted to leave "
                "them out)") in r.err.splitlines()


# --------------------------------------------------------------------------- damage


def _flip_in_second_batch(tmp_path: Path) -> tuple[Path, int]:
    part = copy_partition(V2, tmp_path)
    log = part / V2_LOG.name
    pos, _o, size, _m = entries(log)[1]
    data = bytearray(log.read_bytes())
    data[pos + size - 5] ^= 0x01  # a value byte: the CRC no longer matches, the records still decode
    log.write_bytes(bytes(data))
    return part, pos


def test_a_damaged_batch_stops_with_its_file_and_position(run, tmp_path) -> None:
    part, pos = _flip_in_second_batch(tmp_path)
    r = run("convert", "--to-magic", "2", "--compression", "gzip", str(part), str(tmp_path / "out"))
    assert r.code == 1, r
    assert f"kafkatool: error: {part / V2_LOG.name}:{pos}: " in r.err
    assert r.err.splitlines()[-1] == f"kafkatool convert: nothing was written: {tmp_path / 'out'} does not exist"
    assert not (tmp_path / "out").exists() and sorted(p.name for p in tmp_path.iterdir()) == ["data"]


def test_skip_damaged_and_salvage_list_what_they_did(run, tmp_path) -> None:
    part, pos = _flip_in_second_batch(tmp_path)
    size = entries(part / V2_LOG.name)[1][2]
    r = run("convert", "--to-magic", "2", "--skip-damaged", "--format", "jsonl", str(part), str(tmp_path / "a"))
    assert r.code == 0, r
    loss = jsonl(r.out)[-1]["loss"]
    assert loss["damagedCount"] == 1 and loss["salvagedCount"] == 0 and loss["lossless"] is False
    (d,) = loss["damaged"]
    assert (d["path"], d["start"], d["end"]) == (str(part / V2_LOG.name), pos, pos + size)
    assert offsets_read_by_kafka_python(tmp_path / "a" / V2_LOG.name) == [*range(10), *range(20, RECORDS)]

    r = run("convert", "--to-magic", "2", "--salvage", str(part), str(tmp_path / "b"))
    assert r.code == 0, r
    assert "  lost      1 batch salvaged despite a bad CRC" in r.err.splitlines()
    assert f"{part / V2_LOG.name}:{pos}: offset 10 (stored crc " in r.err
    assert offsets_read_by_kafka_python(tmp_path / "b" / V2_LOG.name) == list(range(RECORDS))


def test_skip_damaged_lists_a_truncated_tail(run, tmp_path) -> None:
    part = copy_partition(V2, tmp_path)
    log = part / V2_LOG.name
    last_pos = entries(log)[-1][0]
    full = log.stat().st_size
    with open(log, "r+b") as f:
        f.truncate(full - 10)
    r = run("convert", "--to-magic", "2", "--skip-damaged", "--format", "jsonl", str(part), str(tmp_path / "a"))
    assert r.code == 0, r
    (d,) = jsonl(r.out)[-1]["loss"]["damaged"]
    assert (d["start"], d["end"]) == (last_pos, full - 10)


def test_the_real_bad_crc_segment(run, tmp_path) -> None:
    """kafka-record-updater's test log: 90 v1 messages, every stored CRC wrong, every record readable."""
    src = REAL / BAD_CRC
    if not src.is_file():
        pytest.skip(f"real fixture {BAD_CRC} is not available")
    part = tmp_path / "bad-0"
    part.mkdir()
    log = part / V2_LOG.name
    shutil.copyfile(src, log)
    data = log.read_bytes()
    found = entries(log)
    assert len(found) == 90
    # the CRCs by hand: stored at message byte 0, computed (CRC-32) over the rest (§5.1)
    crcs = [(struct.unpack_from(">I", data, p + 12)[0], zlib.crc32(data[p + 16:p + s])) for p, _o, s, _m in found]
    assert all(stored != computed for stored, computed in crcs)

    r = run("convert", "--to-magic", "2", str(part), str(tmp_path / "stop"))
    assert r.code == 1 and f"{log}:0: " in r.err, r

    r = run("convert", "--to-magic", "2", "--skip-damaged", "--format", "jsonl", str(part), str(tmp_path / "skip"))
    assert r.code == 0, r
    loss = jsonl(r.out)[-1]["loss"]
    assert loss["damagedCount"] == 90 and loss["recordsOut"] == 0
    assert [(d["start"], d["end"]) for d in loss["damaged"]] == [(p, p + s) for p, _o, s, _m in found]

    r = run("convert", "--to-magic", "2", "--salvage", "--format", "jsonl", str(part), str(tmp_path / "salvage"))
    assert r.code == 0, r
    loss = jsonl(r.out)[-1]["loss"]
    assert loss["salvagedCount"] == 90 and loss["recordsOut"] == 90
    assert [(s["position"], s["offset"], s["storedCrc"], s["computedCrc"]) for s in loss["salvaged"]] == [
        (p, o, stored, computed) for (p, o, _s, _m), (stored, computed) in zip(found, crcs)]
    assert offsets_read_by_kafka_python(tmp_path / "salvage" / V2_LOG.name) == [o for _p, o, _s, _m in found]


# --------------------------------------------------------------------------- errors, Ctrl-C


def test_ctrl_c_leaves_no_dest(run, tmp_path, monkeypatch) -> None:
    from kafkatool.convert import tree

    def interrupted(plan, progress=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(tree, "convert_to_dest", interrupted)
    r = run("convert", "--to-magic", "2", str(V2), str(tmp_path / "out"))
    assert r.code == 130, r
    assert r.err.strip() == f"kafkatool convert: interrupted; nothing was written: {tmp_path / 'out'} does not exist"


def test_an_io_error_is_one_line_exit_2(run, tmp_path, monkeypatch) -> None:
    from kafkatool.convert import tree

    target = str(tmp_path / "out" / V2_LOG.name)

    def full_disk(plan, progress=None):
        raise OSError(28, "No space left on device", target)

    monkeypatch.setattr(tree, "convert_to_dest", full_disk)
    r = run("convert", "--to-magic", "2", str(V2), str(tmp_path / "out"))
    assert r.code == 2, r
    assert r.err.splitlines()[0] == f"kafkatool: error: {target}: No space left on device"
    assert "Traceback" not in r.err


# --------------------------------------------------------------------------- names that are not UTF-8


def test_names_that_are_not_utf8(tmp_path) -> None:
    base = os.fsencode(tmp_path)
    part = base + b"/log\xff/v2-none-0"
    os.makedirs(part)
    for f in V2.iterdir():
        shutil.copyfile(f, part + b"/" + os.fsencode(f.name))
    dest = base + b"/out\xfe"
    cmd = [sys.executable, "-m", "kafkatool", "convert", "--to-magic", "1"]
    p = subprocess.run([*cmd, part, dest], cwd=REPO, capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert part + b" -> " + dest in p.stderr  # the names' own bytes
    assert os.path.isfile(dest + b"/00000000000000000000.log")

    p = subprocess.run([*cmd, "--format", "jsonl", part, base + b"/j\xfe"], cwd=REPO, capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr
    objs = [json.loads(line) for line in p.stdout.decode("utf-8").splitlines()]  # strict UTF-8
    assert os.fsencode(objs[-1]["src"]) == part and os.fsencode(objs[-1]["dest"]) == base + b"/j\xfe"
    assert os.fsencode(objs[0]["segment"]) == part + b"/00000000000000000000.log"

    p = subprocess.run([*cmd, base + b"/missing\xff", base + b"/x"], cwd=REPO, capture_output=True, timeout=120)
    assert p.returncode == 2 and b"missing\\xff: no such file or directory" in p.stderr, p.stderr
    assert b"Traceback" not in p.stderr

    p = subprocess.run([*cmd, part, dest], cwd=REPO, capture_output=True, timeout=120)  # DEST now not empty
    assert p.returncode == 2 and dest in p.stderr and b"Traceback" not in p.stderr, p.stderr


# --------------------------------------------------------------------------- progress


def test_when_the_bar_is_drawn(monkeypatch) -> None:
    from kafkatool.cli import convert as command

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    limit = command.PROGRESS_MIN_BYTES
    assert command.show_progress(True, limit)
    assert not command.show_progress(True, limit - 1)
    assert not command.show_progress(False, limit)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    assert not command.show_progress(True, limit)


@pytest.mark.parametrize("strict", [False, True])
def test_the_bar_advances_over_every_source_byte(run, tmp_path, monkeypatch, strict) -> None:
    from contextlib import contextmanager

    from kafkatool.cli import convert as command

    seen: list[tuple[str, int, bool, int]] = []

    @contextmanager
    def recording(label, total, shown):
        done = [0]
        yield lambda n: done.__setitem__(0, done[0] + n)
        seen.append((label, total, shown, done[0]))

    monkeypatch.setattr(command, "_progress", recording)
    args = ["--strict"] if strict else []
    r = run("convert", "--to-magic", "2", *args, str(FIXTURES / "v1-none-0"), str(tmp_path / "o"))
    assert r.code == 0, r
    size = (FIXTURES / "v1-none-0" / V2_LOG.name).stat().st_size
    labels = ["convert: analysing", "convert"] if strict else ["convert"]
    assert seen == [(label, size, False, size) for label in labels]  # not a terminal: no bar


def test_a_drawn_bar_goes_to_stderr_only_and_no_progress_silences_it(run, tmp_path, monkeypatch) -> None:
    from kafkatool.cli import convert as command

    monkeypatch.setattr(command, "PROGRESS_MIN_BYTES", 0)
    monkeypatch.setattr(command, "show_progress", lambda enabled, total: enabled)
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setenv("FORCE_COLOR", "1")
    r = run("convert", "--to-magic", "2", "--format", "jsonl", str(V2), str(tmp_path / "a"))
    assert r.code == 0, r
    assert "\x1b[" in r.err  # Rich drew on stderr
    assert "\x1b" not in r.out and [o["type"] for o in jsonl(r.out)][-1] == "convert_summary"
    r = run("convert", "--to-magic", "2", "--no-progress", "--format", "jsonl", str(V2), str(tmp_path / "b"))
    assert r.code == 0 and "\x1b" not in r.err, r


# --------------------------------------------------------------------------- --in-place


def test_in_place_plan_then_execute_then_restore(run, tmp_path) -> None:
    part = copy_partition(FIXTURES / "v0-gzip-0", tmp_path)
    same = copy_partition(V2, tmp_path)
    before = snapshot(tmp_path / "data")

    r = run("convert", "--in-place", "--to-magic", "2", str(part), str(same))
    assert r.code == 1, r  # something to convert
    assert snapshot(tmp_path / "data") == before
    lines = r.out.splitlines()
    assert lines[0].startswith(f"{part}: 1 segment, ") and "  convert   to magic 2, each batch's own codec" in lines
    assert f"{same}: 1 segment, {V2_LOG.stat().st_size} bytes" in lines
    assert "  unchanged every batch is at magic 2 and each batch's own codec already" in lines
    assert r.err.splitlines()[-1].startswith("convert --in-place (dry run): 2 partitions, 1 to convert; nothing lost")

    backup = tmp_path / "backup"
    r = run("convert", "--in-place", "--execute", "--backup-dir", str(backup), "--to-magic", "2", str(part), str(same))
    assert r.code == 0, r
    assert any(line.startswith("  done      converted, ") and str(backup) in line for line in r.out.splitlines())
    assert {m for *_x, m in entries(part / V2_LOG.name)} == {2}
    assert offsets_read_by_kafka_python(part / V2_LOG.name) == list(range(RECORDS))
    assert (backup / "RESTORE.txt").is_file()
    assert snapshot(same) == {k.split("/", 1)[1]: v for k, v in before.items() if k.startswith("v2-none-0/")}

    r = run("convert", "--in-place", "--to-magic", "2", str(part))
    assert r.code == 0 and "  unchanged " in r.out, r  # a second run changes nothing

    r = run("restore", "--execute", str(backup))
    assert r.code == 0, r
    restored = snapshot(tmp_path / "data")
    assert restored.pop(".lock") == b""  # the lock --execute took (created: the copy had none)
    assert restored == before


def test_in_place_jsonl(run, tmp_path) -> None:
    part = copy_partition(V2, tmp_path)
    r = run("convert", "--in-place", "--to-magic", "1", "--format", "jsonl", str(tmp_path / "data"))
    assert r.code == 1, r
    plan, summary = jsonl(r.out)
    assert list(plan) == ["type", "partitionDir", "src", "dest", "inPlace", "segments", "bytesIn", "files", "already",
                          "loss", "stagingLeftovers", "refused", "needsChanges"]
    assert plan["type"] == "convert_partition" and plan["inPlace"] is True and plan["needsChanges"] is True
    assert plan["partitionDir"] == os.path.realpath(part) and plan["bytesIn"] == V2_LOG.stat().st_size
    assert sorted(plan["files"]) == sorted(os.listdir(part))
    _check_loss(plan["loss"])
    assert plan["loss"]["headersDropped"] == WITH_HEADERS
    assert summary["type"] == "convert_summary" and summary["kind"] == "in_place" and summary["execute"] is False
    assert summary["needingChanges"] == 1 and summary["changed"] == 0 and summary["refused"] == 0

    r = run("convert", "--in-place", "--execute", "--to-magic", "1", "--format", "jsonl",
            "--backup-dir", str(tmp_path / "bk"), str(part))
    assert r.code == 0, r
    plan, summary = jsonl(r.out)
    assert plan["verified"] is True and plan["backupDir"] == str(tmp_path / "bk") and plan["method"] == "exchange"
    assert summary["changed"] == 1 and summary["backupDirs"] == [str(tmp_path / "bk")]


def test_in_place_strict_refuses_with_exit_1(run, tmp_path) -> None:
    part = copy_partition(V2, tmp_path)
    before = snapshot(part)
    r = run("convert", "--in-place", "--execute", "--strict", "--to-magic", "0", "--backup-dir", str(tmp_path / "bk"),
            str(part))
    assert r.code == 1, r
    assert "--strict" in r.err and f"{WITH_HEADERS} records lost their headers" in r.err
    assert snapshot(part) == before and not (tmp_path / "bk").exists()


def test_in_place_execute_refuses_while_a_broker_holds_the_lock(run, tmp_path) -> None:
    from test_safety import LockHolder

    part = copy_partition(FIXTURES / "v1-none-0", tmp_path)
    lock = tmp_path / "data" / ".lock"
    lock.touch()
    before = snapshot(part)
    with LockHolder(lock) as holder:
        r = run("convert", "--in-place", "--to-magic", "2", str(part))
        assert r.code == 1 and str(holder.pid) in r.err and "warning" in r.err, r  # the plan warns
        r = run("convert", "--in-place", "--execute", "--to-magic", "2", "--backup-dir", str(tmp_path / "bk"), str(part))
        assert r.code == 2, r
        assert str(holder.pid) in r.err
    assert snapshot(part) == before


def test_in_place_refuses_a_transitional_dir_unless_allowed(run, tmp_path) -> None:
    part = copy_partition(FIXTURES / "v1-none-0", tmp_path, "v1-none-0.0123456789abcdef0123456789abcdef-future")
    r = run("convert", "--in-place", "--to-magic", "2", str(part))
    assert r.code == 2 and "--allow-transitional" in r.err, r
    r = run("convert", "--in-place", "--allow-transitional", "--to-magic", "2", str(part))
    assert r.code == 1, r


# --------------------------------------------------------------------------- the examples, as printed


def _unroff(line: str) -> str:
    line = re.sub(r"\\f[BIRP]", "", line).replace("\\&", "")
    for roff, char in (("\\(aq", "'"), ("\\(dq", '"'), ("\\(ga", "`"), ("\\-", "-"), ("\\e", "\\")):
        line = line.replace(roff, char)
    return line


def _example_lines() -> list[str]:
    """Every command line of the EXAMPLES section of man/kafkatool-convert.1, as a reader sees it."""
    page = (REPO / "man" / "kafkatool-convert.1").read_text(encoding="utf-8")
    section = page.split("\n.SH EXAMPLES\n", 1)[1].split("\n.SH ", 1)[0]
    lines, verbatim = [], False
    for line in section.splitlines():
        if line == ".nf":
            verbatim = True
        elif line == ".fi":
            verbatim = False
        elif verbatim and _unroff(line).strip() and not line.startswith("."):  # .ft C/.ft P: the writer's font
            lines.append(_unroff(line).strip())
    return lines


def _expected_status(line: str) -> int:
    """What the page says each example exits with: 1 for the --strict refusal and an in-place plan."""
    if "--strict" in line and "v2-none-0" in line:
        return 1
    if "--in-place" in line and "--execute" not in line:
        return 1
    return 0


def test_the_man_page_examples_run_as_printed(tmp_path) -> None:
    """Each EXAMPLES line runs in the source tree, on the shipped fixtures, with only ``/tmp/``
    moved to a fresh directory (so runs do not collide); the lines of a block run in order."""
    lines = _example_lines()
    assert len(lines) >= 8, lines
    assert all(line.startswith(("kafkatool ", "cp ")) for line in lines), lines
    assert {"--in-place", "--strict", "--level", "--format"} <= {w for line in lines for w in line.split()}
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "kafkatool").write_text(f"#!/bin/sh\nexec {sys.executable} -m kafkatool \"$@\"\n")
    (bin_dir / "kafkatool").chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    work = tmp_path / "tmp"
    work.mkdir()
    if shutil.which("jq") is None and any("| jq" in line for line in lines):
        pytest.skip("jq is not installed")
    for line in lines:
        shell = line.replace("/tmp/", f"{work}/")
        p = subprocess.run(["bash", "-o", "pipefail", "-c", shell], cwd=REPO, env=env, capture_output=True,
                           text=True, timeout=300)
        assert p.returncode == _expected_status(line), f"{line}\n{p.stdout}\n{p.stderr}"
        assert "Traceback" not in p.stderr
    assert (work / "logdir-v2" / "meta.properties").is_file()
    restored = {k: v for k, v in snapshot(work / "logdir-copy").items() if k != ".lock"}
    assert restored == snapshot(FIXTURES)  # restored: the copy is the fixtures again


def test_the_readme_convert_lines_on_fixtures_run(tmp_path) -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```sh\n(.*?)```", readme, re.S)
    lines = [ln.split("  #")[0].strip() for b in blocks for ln in b.splitlines()
             if ln.startswith("kafkatool convert ") and "fixtures/" in ln]
    assert len(lines) >= 3, lines
    if shutil.which("jq") is None:
        lines = [ln for ln in lines if "| jq" not in ln]  # the rest still runs
    for line in lines:
        # /tmp/ first: the interpreter's own path may be under /tmp (a CI venv)
        shell = line.replace("/tmp/", f"{tmp_path}/").replace("kafkatool ", f"{sys.executable} -m kafkatool ", 1)
        p = subprocess.run(["bash", "-o", "pipefail", "-c", shell], cwd=REPO, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, f"{line}\n{p.stderr}"


def test_in_place_refusals_damaged_is_1_unknown_file_is_2(run, tmp_path) -> None:
    part, pos = _flip_in_second_batch(tmp_path)
    r = run("convert", "--in-place", "--to-magic", "2", "--compression", "gzip", str(part))
    assert r.code == 1, r
    assert "  refused   nothing written: " in r.out and f":{pos}: " in r.out
    assert f"kafkatool: error: {os.path.realpath(part)}: refused: " in r.err
    other = copy_partition(FIXTURES / "v1-none-0", tmp_path)
    (other / "notes.txt").write_text("mine")
    before = snapshot(other)
    r = run("convert", "--in-place", "--execute", "--to-magic", "2", "--backup-dir", str(tmp_path / "bk"), str(other))
    assert r.code == 2, r
    assert "notes.txt" in r.err and snapshot(other) == before


def test_a_reason_is_printed_once_per_report(run, tmp_path) -> None:
    r = run("convert", "--to-magic", "1", "--compression", "gzip", str(FIXTURES), str(tmp_path / "x"))
    assert r.code == 0, r
    lines = r.err.splitlines()
    rebuilt = [line for line in lines if line.startswith("  rebuilt   ")]
    assert len(rebuilt) == len([d for d in FIXTURES.iterdir() if d.is_dir() and d.name != "__cluster_metadata-0"])
    assert rebuilt[0].endswith(")") and "(" in rebuilt[0] and all("(" not in line for line in rebuilt[1:])
    snapshots = [line for line in lines if line.startswith("  dropped   ") and ".snapshot" in line]
    assert snapshots[0].startswith("  dropped   00000000000000000003.snapshot: magic 1 ")  # golden-0 comes first
    assert snapshots[1] == "  dropped   00000000000000000152.snapshot: as for 00000000000000000003.snapshot above"


def test_converting_from_a_live_brokers_log_dir_warns(run, tmp_path) -> None:
    from test_safety import LockHolder

    part = copy_partition(FIXTURES / "v1-none-0", tmp_path)
    lock = tmp_path / "data" / ".lock"
    lock.touch()
    with LockHolder(lock) as holder:
        r = run("convert", "--to-magic", "2", str(part), str(tmp_path / "out"))
    assert r.code == 0, r
    (warning,) = [line for line in r.err.splitlines() if "warning" in line]
    assert warning.startswith("kafkatool convert: warning: ") and str(holder.pid) in warning and str(lock) in warning
    r = run("convert", "--to-magic", "2", str(part), str(tmp_path / "out2"))
    assert r.code == 0 and "warning" not in r.err, r


def _run_on_a_terminal(args: list[str]) -> tuple[int, bytes, bytes]:
    """Run kafkatool with standard error on a pseudo-terminal; return (status, stdout, stderr)."""
    import pty

    master, slave = pty.openpty()
    p = subprocess.Popen([sys.executable, "-m", "kafkatool", *args], cwd=REPO, stdout=subprocess.PIPE, stderr=slave,
                         env=dict(os.environ, TERM="xterm", COLUMNS="100"))
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not chunk:
            break
        chunks.append(chunk)
    out = p.stdout.read()
    p.wait(timeout=120)
    os.close(master)
    return p.returncode, out, b"".join(chunks)


def test_a_large_input_on_a_terminal_gets_a_bar(tmp_path) -> None:
    """17 batches of 1 MiB (built with kafka-python): above the 16 MiB threshold."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    from kafkatool.cli.convert import PROGRESS_MIN_BYTES

    part = tmp_path / "big-0"
    part.mkdir()
    data = bytearray()
    for offset in range(17):
        builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                           producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
        builder.append(0, timestamp=1700000000000 + offset, key=b"k", value=b"v" * (1 << 20), headers=[])
        batch = builder.build()
        batch[0:8] = offset.to_bytes(8, "big")  # baseOffset
        data += batch
    assert len(data) >= PROGRESS_MIN_BYTES
    (part / V2_LOG.name).write_bytes(bytes(data))
    code, out, err = _run_on_a_terminal(["convert", "--to-magic", "2", "--format", "jsonl", str(part), str(tmp_path / "a")])
    assert code == 0, err
    assert b"\x1b[?25l" in err and b"/17.8 MB" in err  # Rich hid the cursor and drew the bar over the bytes
    assert b"\x1b" not in out and json.loads(out.splitlines()[-1])["loss"]["recordsOut"] == 17
    code, out, err = _run_on_a_terminal(["convert", "--to-magic", "2", "--no-progress", str(part), str(tmp_path / "b")])
    assert code == 0 and b"\x1b" not in err, err
    assert offsets_read_by_kafka_python(tmp_path / "b" / V2_LOG.name) == list(range(17))


def test_ctrl_c_during_in_place_execute_names_the_command_that_finishes_it(run, tmp_path, monkeypatch) -> None:
    from kafkatool.convert import inplace

    part = copy_partition(FIXTURES / "v1-none-0", tmp_path)
    untouched = copy_partition(FIXTURES / "v0-none-0", tmp_path)

    def interrupted(plans, backup_dir, *, on_start, **kw):
        on_start(plans[0].partition_dir)
        raise KeyboardInterrupt

    monkeypatch.setattr(inplace, "apply_in_place", interrupted)
    r = run("convert", "--in-place", "--execute", "--to-magic", "2", "--compression", "lz4", "--level", "9",
            str(part), str(untouched))
    assert r.code == 130, r
    lines = r.err.splitlines()
    assert lines[0] == "kafkatool convert: interrupted during --execute; the partition dirs are in these states:"
    real = os.path.realpath(part)
    assert (f"  {real}: interrupted, nothing left over: it holds the old state or the new one, complete; run "
            f"`kafkatool convert --in-place --to-magic 2 --compression lz4 --level 9 --execute {real}` again to "
            "finish or confirm") in lines
    assert f"  {os.path.realpath(untouched)}: untouched" in lines


def test_the_command_that_finishes_an_interrupted_run_keeps_every_option_that_changes_the_output(
        run, tmp_path, monkeypatch) -> None:
    """A rerun without --max-batch-bytes would batch the partition differently, one without
    --skip-damaged would stop at the damage the first run converted around."""
    from kafkatool.convert import inplace

    part = copy_partition(FIXTURES / "v1-none-0", tmp_path)

    def interrupted(plans, backup_dir, *, on_start, **kw):
        on_start(plans[0].partition_dir)
        raise KeyboardInterrupt

    monkeypatch.setattr(inplace, "apply_in_place", interrupted)
    r = run("convert", "--in-place", "--execute", "--to-magic", "2", "--max-batch-bytes", "1", "--skip-damaged",
            "--strict", "--jobs", "1", str(part))
    assert r.code == 130, r
    real = os.path.realpath(part)
    assert (f"run `kafkatool convert --in-place --to-magic 2 --max-batch-bytes 1 --skip-damaged --strict --execute "
            f"{real}` again") in r.err

