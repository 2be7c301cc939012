"""``kafkatool convert`` on real broker-written segments (``../shared/fixtures-real``).

Every ``.log`` there (the ``segmentio__kafka-go`` record sets are hex Fetch responses, not
segments, and are not walked) converts to v2 zstd and back to its own magic and codec, record for
record as kafka-python and aiokafka read them (``tests/convert_oracles.py``); an uncompressed
source comes back byte for byte (v2 → v2 changes only the codec and the records section, §13 and
the issue; a legacy message re-encoded at its own magic is the same message).

The 90-message v1 log of ``kaspersorensen__kafka-record-updater`` whose CRCs are all wrong
(``example-log-health-check.log``) is the damaged-input case: without ``--skip-damaged`` or
``--salvage`` the conversion stops with a located error (exit 1, nothing written); ``--salvage``
keeps every record with a new CRC and lists each batch (position, offset, stored and computed CRC,
computed here with zlib); ``--skip-damaged`` keeps nothing and lists the bad range.

The files skip when absent (fail under CI, as conftest decides).
"""

from __future__ import annotations

import os
import shutil
import struct
import sys
import zlib
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import convert_oracles as o  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
REAL = Path(os.path.abspath(os.environ.get("KAFKATOOL_REAL_FIXTURES") or REPO.parent / "shared" / "fixtures-real"))
BAD_CRC = "kaspersorensen__kafka-record-updater/src/test/resources/example-log-health-check.log"
NOT_SEGMENTS = ("segmentio__kafka-go",)  # hex Fetch responses
CODEC_NAMES = {v: k for k, v in o.CODECS.items()}


def _real_logs() -> list[str]:
    if not REAL.is_dir():
        return []
    return sorted(
        str(p.relative_to(REAL)) for p in REAL.rglob("*.log")
        if p.is_file() and p.parts[len(REAL.parts)] not in NOT_SEGMENTS and str(p.relative_to(REAL)) != BAD_CRC
    )


LOGS = _real_logs()


def real_file(rel: str) -> Path:
    path = REAL / rel
    if not path.is_file():
        pytest.skip(f"real fixture {rel} is not available ({REAL})")
    return path


def convert(src: Path, dest: Path, magic: int, codec: str | None, *extra: str) -> o.Result:
    args = ["convert", "--to-magic", str(magic)]
    if codec is not None:
        args += ["--compression", codec]
    return o.kt(*args, "--format", "jsonl", "--no-progress", *extra, src, dest)


def test_real_fixtures_present():
    if not LOGS:
        pytest.skip(f"real fixtures: {REAL} is not present")
    assert len(LOGS) >= 15, LOGS  # 19 segments in fixtures-real (README)


def _check_output(out_log: Path, src: list[o.Entry], magic: int, codec: int, where: str) -> list[o.Entry]:
    buf = out_log.read_bytes()
    out = o.kp_read(buf)
    assert {e.magic for e in out} == {magic}, where
    assert {e.codec for e in out if not e.is_control} == {codec}, where
    assert all(e.codec == 0 for e in out if e.is_control), where
    assert all(e.crc_valid for e in out), where
    expected = o.expected_records(src, magic)
    assert o.tuples(o.all_records(out)) == o.tuples(expected), where
    aio = [r for rs in o.aio_read(buf) for r in rs]
    assert o.tuples(aio, ts_type=False) == o.tuples(expected, ts_type=False), f"{where} (aiokafka)"
    index, timeindex = o.expected_indexes(buf, int(out_log.name[:20]))
    assert out_log.with_suffix(".index").read_bytes() == index, where
    assert out_log.with_suffix(".timeindex").read_bytes() == timeindex, where
    return out


@pytest.mark.parametrize("rel", LOGS or [pytest.param(None, marks=pytest.mark.skip(
    reason=f"real fixtures: {REAL} is not present"))])
def test_real_to_v2_zstd_and_back(rel, tmp_path):
    path = real_file(rel)
    source = path.read_bytes()
    src = o.kp_read(source)
    magics = {e.magic for e in src}
    codecs = {e.codec for e in src}
    assert len(magics) == 1 and len(codecs) == 1, (rel, magics, codecs)  # true of every real segment
    (magic,), (codec,) = magics, codecs

    # to v2 zstd
    zdir = tmp_path / "zstd"
    result = convert(path, zdir, 2, "zstd")
    assert result.code == 0, result
    zlog = zdir / path.name
    mid = _check_output(zlog, src, 2, o.CODECS["zstd"], f"{rel} -> v2 zstd")
    if magic == 2:  # one batch per source batch, every header field kept
        assert [e.v2 for e in mid] == [e.v2 for e in src], rel
    assert o.kt("verify", "--deep", "--format", "text", zlog).code == 0

    # and back to its own magic and codec
    bdir = tmp_path / "back"
    result = convert(zlog, bdir, magic, CODEC_NAMES[codec])
    assert result.code == 0, result
    blog = bdir / path.name
    back = _check_output(blog, src, magic, codec, f"{rel} -> v2 zstd -> v{magic} {CODEC_NAMES[codec]}")
    assert o.tuples(o.all_records(back)) == o.tuples(o.all_records(src)), rel  # record for record
    if codec == 0:
        assert blog.read_bytes() == source, f"{rel}: an uncompressed source comes back byte for byte"
    else:  # one wrapper per source wrapper
        assert [[r.offset for r in e.records] for e in back] == [[r.offset for r in e.records] for e in src]
    assert o.kt("verify", "--deep", "--format", "text", blog).code == 0


# --------------------------------------------------------------------------- the bad-CRC segment


@pytest.fixture
def bad_crc(tmp_path) -> Path:
    """The 90-message bad-CRC log, copied under a segment name into a partition dir."""
    path = real_file(BAD_CRC)
    part = tmp_path / "health-0"
    part.mkdir()
    log = part / "00000000000000000000.log"
    shutil.copyfile(path, log)
    return log


def _bad_entries(buf: bytes) -> list[tuple[int, int, int, int]]:
    """(position, offset, stored CRC, CRC-32 of magic..end) of every legacy message (§5.1), by hand."""
    out = []
    for e in o.raw_entries(buf):
        (stored,) = struct.unpack_from(">I", buf, e.position + 12)
        computed = zlib.crc32(buf[e.position + 16 : e.position + e.size])
        out.append((e.position, e.first_offset, stored, computed))
    return out


def test_bad_crc_source_is_what_the_readme_says(bad_crc):
    entries = _bad_entries(bad_crc.read_bytes())
    assert len(entries) == 90
    assert all(stored != computed for _p, _o, stored, computed in entries)
    src = o.kp_read(bad_crc.read_bytes())
    assert not any(e.crc_valid for e in src) and len(o.all_records(src)) == 90


@pytest.mark.parametrize("magic,codec", [(2, "zstd"), (1, None), (0, "gzip")])
def test_bad_crc_without_flags_stops_located(bad_crc, tmp_path, magic, codec):
    dest = tmp_path / "out"
    result = convert(bad_crc.parent, dest, magic, codec)
    assert result.code == 1, result
    assert f"{bad_crc}:0:" in result.err, result  # PATH:POSITION of the first bad message
    assert "crc" in result.err.lower(), result
    assert not dest.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["health-0"]  # no temp dir left


@pytest.mark.parametrize("magic,codec", [(2, "zstd"), (1, None), (2, None)])
def test_bad_crc_salvage(bad_crc, tmp_path, magic, codec):
    buf = bad_crc.read_bytes()
    src = o.kp_read(buf)
    dest = tmp_path / "out"
    result = convert(bad_crc.parent, dest, magic, codec, "--salvage")
    assert result.code == 0, result
    out_log = dest / bad_crc.name
    out = o.kp_read(out_log.read_bytes())
    assert all(e.crc_valid for e in out)  # new CRCs
    assert o.tuples(o.all_records(out)) == o.tuples(o.expected_records(src, magic))
    aio = [r for rs in o.aio_read(out_log.read_bytes()) for r in rs]
    assert o.tuples(aio, ts_type=False) == o.tuples(o.expected_records(src, magic), ts_type=False)
    loss = o.summary_loss(result.out)
    assert loss["salvaged_count"] == 90 and loss["damaged_count"] == 0, loss
    listed = [(s["position"], s["offset"], s["stored_crc"], s["computed_crc"]) for s in
              [{o.snake(k): v for k, v in x.items()} for x in loss["salvaged"]]]
    assert listed == _bad_entries(buf)
    assert all(os.path.samefile(x["path"], bad_crc) for x in loss["salvaged"])
    assert o.kt("verify", "--deep", "--format", "text", dest).code == 0
    index, timeindex = o.expected_indexes(out_log.read_bytes(), 0)
    assert out_log.with_suffix(".index").read_bytes() == index
    assert out_log.with_suffix(".timeindex").read_bytes() == timeindex


def test_bad_crc_salvage_text_report(bad_crc, tmp_path):
    result = o.kt("convert", "--to-magic", "2", "--salvage", "--no-progress", bad_crc.parent, tmp_path / "out")
    assert result.code == 0, result
    first = _bad_entries(bad_crc.read_bytes())[0]
    assert str(first[2]) in result.err or f"{first[2]:08x}" in result.err.lower(), result  # the stored CRC


def test_bad_crc_skip_damaged(bad_crc, tmp_path):
    """--skip-damaged alone converts around the bad range: nothing valid is left, the range is listed."""
    size = bad_crc.stat().st_size
    dest = tmp_path / "out"
    result = convert(bad_crc.parent, dest, 2, "zstd", "--skip-damaged")
    assert result.code == 0, result
    assert (dest / bad_crc.name).read_bytes() == b""
    loss = o.summary_loss(result.out)
    assert loss["salvaged_count"] == 0 and loss["damaged_count"] >= 1, loss
    ranges = sorted((d["start"], d["end"]) for d in loss["damaged"])
    assert ranges[0][0] == 0 and ranges[-1][1] == size, ranges
    assert all(a[1] <= b[0] for a, b in zip(ranges, ranges[1:])), ranges


def test_bad_crc_strict_salvage_refused(bad_crc, tmp_path):
    """A salvaged batch is a loss for --strict: exit 1, nothing written."""
    dest = tmp_path / "out"
    result = convert(bad_crc.parent, dest, 2, "zstd", "--salvage", "--strict")
    assert result.code == 1, result
    assert not dest.exists()


# --------------------------------------------------------------------------- whole real log dirs

REAL_LOG_DIRS = [
    "William0423__kafka/kafka-logs",
    "greenlemonT__kafka-temp/data/kafka",
    "greenlemonT__kafka-temp/data/kafka3",
    "xpxwo100__bullShit/tmp/kafka-logs",
]


@pytest.mark.parametrize("target", [(2, "zstd"), (1, "gzip")], ids=["v2-zstd", "v1-gzip"])
@pytest.mark.parametrize("rel", REAL_LOG_DIRS)
def test_real_log_dir(rel, target, tmp_path):
    """A real broker's log dir converts as a whole: every segment under its own name with its
    records (kafka-python), the root files copied, and verify --deep / reindex --all find nothing."""
    magic, codec = target
    src = REAL / rel
    if not (src / "meta.properties").is_file():
        pytest.skip(f"real fixture {rel} is not available ({REAL})")
    dest = tmp_path / "out"
    result = convert(src, dest, magic, codec)
    assert result.code == 0, result
    logs = sorted(p.relative_to(src) for p in src.rglob("*.log"))
    assert sorted(p.relative_to(dest) for p in dest.rglob("*.log")) == logs
    for log in logs:
        source = o.kp_read((src / log).read_bytes())
        out_buf = (dest / log).read_bytes()
        if magic < 2 and log.parts[0].startswith("__cluster_metadata"):
            assert out_buf == (src / log).read_bytes(), f"{log}: the metadata log stays v2, copied unchanged"
            continue
        out = o.kp_read(out_buf)
        assert o.tuples(o.all_records(out)) == o.tuples(o.expected_records(source, magic)), log
    assert (dest / "meta.properties").read_bytes() == (src / "meta.properties").read_bytes()
    r = o.kt("verify", "--deep", "--format", "text", dest)
    assert r.code == 0 and "index_missing" not in r.out, r
    # converted partitions: indexes exactly as a rebuild; the metadata log copied below v2 keeps the
    # broker's own (one entry per append), which only `reindex --all` would respace
    r = o.kt("reindex", "-q", dest)
    assert r.code == 0, r
    for part in sorted(p for p in dest.iterdir() if p.is_dir()):
        if magic == 2 or not part.name.startswith("__cluster_metadata"):
            r = o.kt("reindex", "--all", "-q", part)
            assert r.code == 0, r
