"""Real broker-written files (../shared/fixtures-real): everything dumps, and every CRC checks as
each folder's SOURCE.md / MANIFEST.json says. Skips when the folder is absent."""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import pytest

from kafkatool.record.records import decode_batch_records
from kafkatool.segment.walk import SegmentWalker, WalkStop

from conftest import REAL

pytestmark = pytest.mark.skipif(not REAL.is_dir(), reason="../shared/fixtures-real is not present")

SKIP_SUFFIXES = {".md", ".json", ".hex"}


def _manifest_batches():
    out = []
    if not REAL.is_dir():
        return out
    for manifest in sorted(REAL.glob("*/MANIFEST.json")):
        for f in json.loads(manifest.read_text())["files"]:
            if "batches" in f:
                out.append(pytest.param(manifest.parent / f["path"], f["batches"], id=f"{manifest.parent.name}/{f['path']}"))
    return out


def _real_files():
    if not REAL.is_dir():
        return []
    return [
        pytest.param(p, id=str(p.relative_to(REAL)))
        for p in sorted(REAL.rglob("*"))
        if p.is_file() and p.suffix not in SKIP_SUFFIXES and "golden" not in p.parts
    ]


@pytest.mark.parametrize("path", _real_files())
def test_every_real_file_dumps_without_error(run, path: Path):
    args = ["dump", "--deep-iteration", str(path)] if path.suffix in (".log", ".checkpoint") else ["dump", str(path)]
    r = run(*args)
    assert r.code == 0, r
    assert "error" not in r.err.replace("warning", ""), r.err
    assert "Mismatches" not in r.err and "not found" not in r.err and "mismatch" not in r.err, r.err
    assert r.lines[0] == f"Dumping {path}"


@pytest.mark.parametrize("path,expected", _manifest_batches())
def test_batches_and_crcs_match_manifest(path: Path, expected: dict):
    batches = records = crc_ok = crc_bad = control = txn = 0
    magics, codecs = set(), set()
    first = last = None
    with SegmentWalker(path) as walker:
        for b, data in walker:
            batches += 1
            crc_ok += b.crc_valid
            crc_bad += not b.crc_valid
            control += b.is_control
            txn += b.is_transactional
            magics.add(b.magic)
            codecs.add(b.codec_name)
            recs = decode_batch_records(b, data)
            if b.is_legacy:
                # MANIFEST.json counts legacy entries shallowly: a wrapper is one record
                records += 1
                first = b.offset if first is None else first
                last = b.offset
            else:
                records += len(recs)
                if recs:
                    first = recs[0].offset if first is None else first
                    last = recs[-1].offset
    assert walker.stop is WalkStop.END
    assert walker.trailing_bytes == expected["trailing"]
    assert batches == expected["batches"]
    assert records == expected["records"]
    assert crc_ok == expected["crc_ok"]
    assert crc_bad == expected["crc_bad"]
    assert control == expected["control"]
    assert txn == expected["transactional"]
    assert sorted(magics) == sorted(expected["magics"])
    assert sorted(codecs) == sorted(expected["codecs"])
    assert first == expected["first_offset"]
    assert last == expected["last_offset"]


def test_health_check_log_has_90_bad_crcs_and_intact_framing(run):
    path = REAL / "kaspersorensen__kafka-record-updater/src/test/resources/example-log-health-check.log"
    r = run("dump", "--files", str(path))
    # a non-numeric file name: kafka-dump-log would crash; kafkatool warns and dumps the batches
    assert r.code == 0 and "warning" in r.err and "decimal offset" in r.err
    assert sum(l.endswith("isvalid: false") for l in r.lines) == 90
    walker = SegmentWalker(path)
    bad = [b for b, _ in walker]
    assert len(bad) == 90 and not any(b.crc_valid for b in bad)
    assert walker.stop is WalkStop.END and walker.trailing_bytes == 0


def test_health_check_dump_reports_isvalid_false(run, tmp_path):
    src = REAL / "kaspersorensen__kafka-record-updater/src/test/resources/example-log-health-check.log"
    seg = tmp_path / "00000000000000000000.log"
    seg.write_bytes(src.read_bytes())
    r = run("dump", "--print-data-log", str(seg))
    assert r.code == 0
    batch_lines = [l for l in r.lines if l.startswith("offset: ")]
    assert len(batch_lines) == 90
    assert all(l.endswith("isvalid: false") for l in batch_lines)
    record_lines = [l for l in r.lines if l.startswith("| offset: ")]
    assert len(record_lines) == 90 and all("isValid: false" in l for l in record_lines)


_GOLDEN_LINE = re.compile(r'^(\d+): "(.*)"$')


@pytest.mark.parametrize("name", ["numbers-0", "hamlet-none-0", "hamlet-gzip-0", "hamlet-snappy-0"])
def test_kafkalite_golden_payloads(name: str):
    base = REAL / "asayers__kafkalite/tests/test-data"
    golden = {}
    for line in (base / "golden" / name).read_text(encoding="utf-8", errors="replace").splitlines():
        m = _GOLDEN_LINE.match(line)
        assert m, line
        golden[int(m.group(1))] = m.group(2)
    got = {}
    with SegmentWalker(base / "fs-data" / name / "00000000000000000000.log") as walker:
        for b, data in walker:
            assert b.crc_valid and b.magic == 0
            for rec in decode_batch_records(b, data):
                assert rec.crc_valid
                got[rec.offset] = rec.value.decode("utf-8", "replace")
    assert sorted(got) == sorted(golden)
    plain = [o for o, v in golden.items() if "\\" not in v]
    assert plain and all(got[o] == golden[o] for o in plain)


def _fetch_v10_records(raw: bytes) -> tuple[str, bytes]:
    """The records of the single partition of a Fetch v10 response (size-prefixed)."""
    pos = 4 + 4 + 4 + 2 + 4  # size, correlation id, throttle ms, error code, session id
    (ntopics,) = struct.unpack_from(">i", raw, pos)
    pos += 4
    assert ntopics == 1
    (tlen,) = struct.unpack_from(">h", raw, pos)
    topic = raw[pos + 2 : pos + 2 + tlen].decode()
    pos += 2 + tlen
    (nparts,) = struct.unpack_from(">i", raw, pos)
    assert nparts == 1
    pos += 4 + 4 + 2 + 8 + 8 + 8  # partition, error, high watermark, LSO, log start offset
    (naborted,) = struct.unpack_from(">i", raw, pos)
    pos += 4 + max(naborted, 0) * 16
    (rlen,) = struct.unpack_from(">i", raw, pos)
    return topic, raw[pos + 4 : pos + 4 + rlen]


_SEGMENTIO = {
    # file: (record-set bytes, batches, records, magics)
    "v1-v1.hex": (287, 4, 4, {1}),
    "v1c-v1c.hex": (346, 3, 3, {1}),
    "v1c-v1-v1c.hex": (492, 5, 5, {1}),
    "v2-v2.hex": (302, 2, 4, {2}),
    "v2c-v2c.hex": (268, 2, 4, {2}),
    "v2c-v2-v2c.hex": (422, 3, 6, {2}),
    "v2b-v1.hex": (293, 3, 4, {1, 2}),
    "v2bc-v1.hex": (277, 3, 4, {1, 2}),
    "v2bc-v1c.hex": (265, 2, 3, {1, 2}),
    "v2bc-v1-v1c.hex": (414, 4, 5, {1, 2}),
    "v1-v1c-v2-v2c-v2b-v2b-v2b-v2bc-v1b-v1bc.hex": (1647, 15, 19, {1, 2}),
}


@pytest.mark.parametrize("name", sorted(_SEGMENTIO))
def test_segmentio_fetch_record_sets(name: str):
    path = REAL / "segmentio__kafka-go/fixtures" / name
    if not path.is_file():
        pytest.skip(f"{name} not copied")
    size, nbatches, nrecords, magics = _SEGMENTIO[name]
    _topic, records = _fetch_v10_records(bytes.fromhex(path.read_text().strip()))
    assert len(records) == size
    walker = SegmentWalker(records)
    seen = []
    count = 0
    for b, data in walker:
        assert b.crc_valid
        seen.append(b.magic)
        recs = decode_batch_records(b, data)
        count += 1 if b.is_legacy else len(recs)  # SOURCE.md counts a legacy wrapper as one record
    assert walker.stop is WalkStop.END
    assert len(seen) == nbatches and count == nrecords and set(seen) == magics


def test_kraft_snapshot_header_and_control_records(run):
    path = REAL / "greenlemonT__kafka-temp/data/kafka3/__cluster_metadata-0/00000000000000028870-0000000189.checkpoint"
    r = run("dump", "--deep-iteration", str(path))
    assert r.lines[1] == "Snapshot end offset: 28870, epoch: 189"
    assert ' SnapshotHeader {"version":0,"lastContainedLogTimestamp":' in r.out
    assert ' SnapshotFooter {"version":0}' in r.out
    boot = REAL / "greenlemonT__kafka-temp/data/kafka3/bootstrap.checkpoint"
    assert run("dump", str(boot)).lines[1] == "KRaft bootstrap snapshot"


def test_kraft_leader_change_control_records(run):
    path = REAL / "greenlemonT__kafka-temp/data/kafka/__cluster_metadata-0/00000000000000000000.log"
    r = run("dump", "--deep-iteration", str(path))
    assert r.out.count(" controlType: LEADER_CHANGE(2)") == 4


def test_real_producer_snapshot(run):
    path = REAL / "greenlemonT__kafka-temp/data/kafka3/payment-create-request-0/00000000000000000001.snapshot"
    r = run("dump", str(path))
    assert len(r.lines) == 2
    assert r.lines[1].startswith("producerId: 0 producerEpoch: 0 ")
    assert r.err == ""


def test_real_index_dump_consistent(run):
    part = REAL / "William0423__kafka/kafka-logs/__consumer_offsets-28"
    r = run("dump", str(part / "00000000000000000000.index"), str(part / "00000000000000000000.timeindex"))
    assert r.code == 0 and r.err == ""
    assert sum(l.startswith("offset: ") for l in r.lines) == 254
    assert sum(l.startswith("timestamp: ") for l in r.lines) == 258
    r = run("dump", "--index-sanity-check", str(part / "00000000000000000000.index"))
    assert r.lines[-1].endswith("passed sanity check.")
