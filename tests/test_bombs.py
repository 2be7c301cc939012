"""Record-count bombs: memory must stay flat whatever a batch's record count (issue 9).

A few kilobytes of zstd can hold ten million seven-byte records (70 MB, under the
decompression cap); a gzip v0 wrapper of a few hundred kilobytes, millions of inner
messages. Decoded into one list, they took ``verify --deep`` to 2.4 GB and ``dump
--deep-iteration`` to 4.2 GB, and 60 M records ended in ``MemoryError``. The record layer
now streams them: these tests run the CLI on such files in a subprocess, output to
/dev/null, and hold its peak RSS under 100 MiB.

The bombs are built here by hand, independently of kafkatool's encoder: the v2 batch
header packed field by field (spec §4.1) with the ``crc32c`` package's CRC, legacy
messages per §5.1 with ``zlib.crc32``, payloads compressed with ``zstandard``, ``zlib``,
``lz4.frame`` and raw ``snappy`` blocks, alone or in xerial framing (§7), directly. The expected
record counts and last offsets of small bombs come from aiokafka's reading.

Peak RSS is measured through a small intermediate process: it spawns the CLI and reports
``ru_maxrss`` from ``wait4``. (Linux carries the pre-exec high-water mark across ``exec``,
and Python spawns with vfork, so a CLI spawned straight from this test process would
report at least pytest's own RSS.)

Run as a script to write bombs of any size for a measurement by hand::

    python tests/test_bombs.py DIR --records 10000000
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIMIT_KIB = 100 * 1024  # 100 MiB
SEGMENT = "00000000000000000000.log"
TS = 1_700_000_000_000

# --------------------------------------------------------------------------- hand-built bytes


def v2_batch(payload: bytes, *, count: int, codec: int, last_offset_delta: int, base_offset: int = 0) -> bytes:
    """A v2 batch around ``payload`` (§4.1), packed field by field; CRC-32C from the crc32c package."""
    import crc32c

    after_crc = struct.pack(
        ">hiqqqhii",
        codec,  # attributes: the codec, CreateTime, not transactional
        last_offset_delta,
        TS,  # baseTimestamp
        TS,  # maxTimestamp
        -1,  # producerId
        -1,  # producerEpoch
        -1,  # baseSequence
        count,  # recordsCount
    ) + payload
    # batchLength counts partitionLeaderEpoch (4), magic (1), crc (4) and what follows
    return struct.pack(">qiibI", base_offset, 9 + len(after_crc), 0, 2, crc32c.crc32c(after_crc)) + after_crc


def tiny_record(delta: int) -> bytes:
    """A 7-byte v2 record (§4.2): length 6, attributes 0, timestampDelta 0, offsetDelta
    ``delta`` (0..63: one zig-zag byte), null key, null value, no headers."""
    assert 0 <= delta < 64
    return bytes((0x0C, 0x00, 0x00, delta * 2, 0x01, 0x01, 0x00))


def record_pattern(n: int, period: int) -> tuple[bytes, int]:
    """``n`` tiny records whose offset deltas run 0, 1, .., period-1 and again: the bytes
    of one period (the stream repeats them) and how many full periods."""
    assert n % period == 0
    return b"".join(tiny_record(i) for i in range(period)), n // period


def _compress_repeated(co, unit: bytes, repeat: int) -> bytes:
    """``unit * repeat`` through the compressor object ``co``, a MiB at a time."""
    per_block = max(1, (1 << 20) // len(unit))
    block = unit * per_block
    parts = []
    left = repeat
    while left:
        k = min(left, per_block)
        parts.append(co.compress(block if k == per_block else unit * k))
        left -= k
    parts.append(co.flush())
    return b"".join(parts)


def zstd_payload(unit: bytes, repeat: int) -> bytes:
    import zstandard

    return _compress_repeated(zstandard.ZstdCompressor(level=3).compressobj(), unit, repeat)


def gzip_payload(unit: bytes, repeat: int) -> bytes:
    return _compress_repeated(zlib.compressobj(9, zlib.DEFLATED, 31), unit, repeat)


def lz4_payload(data: bytes) -> bytes:
    import lz4.frame

    # Kafka's framing (§7.4): 64 KiB independent blocks, no checksums, no content size
    return lz4.frame.compress(
        data, block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=False, content_checksum=False, store_size=False
    )


def snappy_xerial_payload(data: bytes) -> bytes:
    import snappy

    out = [bytes.fromhex("82534e41505059000000000100000001")]  # xerial header (§7.3)
    for i in range(0, len(data), 32768):
        block = snappy.compress(data[i : i + 32768])
        out.append(struct.pack(">i", len(block)) + block)
    return b"".join(out)


def v2_bomb(n: int, codec: str, period: int = 1) -> bytes:
    """One v2 batch of ``n`` tiny records, compressed with ``codec``."""
    unit, repeat = record_pattern(n, period)
    if codec == "zstd":
        payload, codec_id = zstd_payload(unit, repeat), 4
    elif codec == "gzip":
        payload, codec_id = gzip_payload(unit, repeat), 1
    elif codec == "lz4":
        payload, codec_id = lz4_payload(unit * repeat), 3
    elif codec == "snappy":
        payload, codec_id = snappy_xerial_payload(unit * repeat), 2
    elif codec == "snappy-raw":  # one raw block, as librdkafka writes snappy
        import snappy

        payload, codec_id = snappy.compress(unit * repeat), 2
    else:
        raise ValueError(codec)
    return v2_batch(payload, count=n, codec=codec_id, last_offset_delta=period - 1)


def legacy_message(offset: int, magic: int, attributes: int, timestamp: int, key: bytes | None, value: bytes | None) -> bytes:
    """A v0/v1 message with its log overhead (§5.1); CRC-32 from zlib."""
    body = struct.pack(">bb", magic, attributes)
    if magic == 1:
        body += struct.pack(">q", timestamp)
    body += struct.pack(">i", -1) if key is None else struct.pack(">i", len(key)) + key
    body += struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)) + value
    crc = zlib.crc32(body)
    return struct.pack(">qiI", offset, 4 + len(body), crc) + body


def legacy_bomb(n: int, magic: int = 0, *, distinct: bool = True) -> bytes:
    """A gzip wrapper of ``n`` empty inner messages (§5.2). ``distinct``: offsets 0..n-1 (v0
    absolute; v1 relative, the wrapper's offset the last one); else all n the same message
    at offset 0 (wrapper offset 0), which gzip packs some 400:1, as in the issue's bomb."""
    co = zlib.compressobj(9 if distinct else 6, zlib.DEFLATED, 31)
    tail = legacy_message(0, magic, 0, TS, None, None)[8:]  # size, crc, body: the same for every message
    parts = []
    if distinct:
        step = 1 << 15
        for start in range(0, n, step):
            parts.append(co.compress(b"".join(struct.pack(">q", o) + tail for o in range(start, min(n, start + step)))))
        parts.append(co.flush())
        payload = b"".join(parts)
    else:
        payload = gzip_payload(struct.pack(">q", 0) + tail, n)
    wrapper_ts = TS if magic == 1 else -1
    return legacy_message(n - 1 if distinct else 0, magic, 1, wrapper_ts, None, payload)


def write_segment(directory: Path, data: bytes) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / SEGMENT
    path.write_bytes(data)
    return path


# --------------------------------------------------------------------------- running the CLI

_RUNNER = r"""
import os, sys
out = os.open(os.devnull, os.O_WRONLY)
pid = os.posix_spawn(sys.executable, [sys.executable, "-m", "kafkatool", *sys.argv[1:]], os.environ,
                     file_actions=[(os.POSIX_SPAWN_DUP2, out, 1)])
_pid, status, usage = os.wait4(pid, 0)
sys.stderr.flush()
print("RESULT", os.waitstatus_to_exitcode(status), usage.ru_maxrss, file=sys.stderr)
"""


def run_measured(*args: str, cwd: Path = ROOT) -> tuple[int, int, str]:
    """Run ``kafkatool ARGS`` with stdout to /dev/null: ``(exit code, peak RSS in KiB, stderr)``."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(
        [sys.executable, "-c", _RUNNER, *args], cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        timeout=120,
    )
    err = proc.stderr.decode("utf-8", "replace")
    last = err.rstrip("\n").rsplit("\n", 1)[-1]
    assert last.startswith("RESULT "), err
    _tag, code, rss = last.split()
    return int(code), int(rss), err[: len(err) - len(last) - 1]


def run_output(*args: str) -> tuple[int, str, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(
        [sys.executable, "-m", "kafkatool", *args], cwd=ROOT, env=env, capture_output=True, timeout=120
    )
    return proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")


def aiokafka_offsets(data: bytes) -> list[int]:
    """Every record offset of the batches in ``data``, as aiokafka reads them."""
    from aiokafka.record.memory_records import MemoryRecords

    records = MemoryRecords(data)
    out: list[int] = []
    while True:
        batch = records.next_batch()
        if batch is None:
            return out
        out.extend(r.offset for r in batch)


# --------------------------------------------------------------------------- memory

# Before the fix, 0.5 M tiny records took verify --deep to 164 MiB and dump --deep-iteration to
# 265 MiB; 0.5 M inner messages of a v0 wrapper, 171 and 250 MiB.
N_V2 = 1_000_000
N_JSONL = 500_000  # (a JSON object per record is slower to write)
N_LEGACY = 500_000


@pytest.fixture(scope="module")
def bombs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("bombs")
    return {
        "zstd": write_segment(root / "zstd-0", v2_bomb(N_V2, "zstd")),
        "zstd-jsonl": write_segment(root / "zstdj-0", v2_bomb(N_JSONL, "zstd")),
        "gzip": write_segment(root / "gzip-0", v2_bomb(N_V2, "gzip")),
        "lz4": write_segment(root / "lz4-0", v2_bomb(N_V2, "lz4")),
        "snappy": write_segment(root / "snappy-0", v2_bomb(N_V2, "snappy")),
        "snappy-raw": write_segment(root / "snappyraw-0", v2_bomb(N_V2, "snappy-raw")),
        "v0": write_segment(root / "v0-0", legacy_bomb(N_LEGACY, magic=0, distinct=False)),
        "v1": write_segment(root / "v1-0", legacy_bomb(N_LEGACY, magic=1, distinct=False)),
    }


def assert_flat(args: tuple[str, ...], expected_exit: int) -> None:
    code, rss, err = run_measured(*args)
    assert code == expected_exit, err
    assert "Traceback" not in err and "internal error" not in err, err
    assert rss < LIMIT_KIB, f"peak RSS {rss / 1024:.0f} MiB for kafkatool {' '.join(args)}"


@pytest.mark.parametrize("codec", ["zstd", "gzip", "lz4", "snappy", "snappy-raw"])
def test_verify_deep_of_a_v2_record_count_bomb_stays_flat(bombs, codec):
    # exit 1: every record has offset delta 0 (record_offset_invalid), yet only memory is tested here
    assert_flat(("verify", "--deep", "-q", str(bombs[codec])), 1)


@pytest.mark.parametrize(
    "extra", [(), ("--print-data-log",), ("--format", "text", "--skip-record-metadata"), ("--format", "table")]
)
def test_dump_deep_iteration_of_a_zstd_record_count_bomb_stays_flat(bombs, extra):
    assert_flat(("dump", "--deep-iteration", *extra, str(bombs["zstd"])), 0)


def test_dump_print_data_log_alone_streams_too(bombs):
    assert_flat(("dump", "--print-data-log", str(bombs["gzip"])), 0)


def test_dump_jsonl_of_a_record_count_bomb_stays_flat(bombs):
    assert_flat(("dump", "--deep-iteration", "--format", "jsonl", str(bombs["zstd-jsonl"])), 0)


@pytest.mark.parametrize("magic", [0, 1])
def test_verify_deep_of_a_legacy_gzip_wrapper_bomb_stays_flat(bombs, magic):
    # exit 1: the inner messages all have offset 0 (record_offset_invalid)
    assert_flat(("verify", "--deep", "-q", str(bombs[f"v{magic}"])), 1)


@pytest.mark.parametrize("magic", [0, 1])
def test_dump_deep_iteration_of_a_legacy_gzip_wrapper_bomb_stays_flat(bombs, magic):
    assert_flat(("dump", "--deep-iteration", str(bombs[f"v{magic}"])), 0)


# --------------------------------------------------------------------------- the answers are still right


def test_a_small_bomb_reads_as_aiokafka_reads_it(tmp_path):
    n = 30_000
    data = v2_bomb(n, "zstd", period=50) + v2_bomb(n, "gzip", period=60)
    path = write_segment(tmp_path / "t-0", data)
    expected = aiokafka_offsets(data)
    assert len(expected) == 2 * n and expected[-1] == 59
    code, out, err = run_output("dump", "--deep-iteration", "--format", "jsonl", str(path))
    assert code == 0, err
    objs = [json.loads(line) for line in out.splitlines()]
    offsets = [o["offset"] for o in objs if o["type"] == "record"]
    assert offsets == expected
    batches = [o for o in objs if o["type"] == "batch"]
    assert [(b["count"], b["lastOffset"]) for b in batches] == [(n, 49), (n, 59)]
    # the text format: one batch line each, then one line per record
    code, out, err = run_output("dump", "--deep-iteration", str(path))
    assert code == 0, err
    lines = out.splitlines()
    assert sum(1 for l in lines if l.startswith("baseOffset:")) == 2
    record_lines = [l for l in lines if l.startswith("| offset:")]
    assert [int(l.split()[2]) for l in record_lines] == expected


def test_a_small_legacy_bomb_reads_as_aiokafka_reads_it(tmp_path):
    n = 20_000
    for magic in (0, 1):
        data = legacy_bomb(n, magic)
        path = write_segment(tmp_path / f"l{magic}-0", data)
        expected = aiokafka_offsets(data)
        assert expected == list(range(n))
        code, out, err = run_output("dump", "--deep-iteration", "--format", "jsonl", str(path))
        assert code == 0, err
        objs = [json.loads(line) for line in out.splitlines()]
        assert [o["offset"] for o in objs if o["type"] == "record"] == expected
        (batch,) = [o for o in objs if o["type"] == "batch"]
        assert (batch["baseOffset"], batch["lastOffset"]) == (0, n - 1)
        code, out, err = run_output("verify", "--deep", "-q", str(path))
        assert code == 0, err + out


def test_verify_deep_reports_the_same_finding_for_a_bomb(tmp_path):
    # every record of the bomb has offset delta 0: the second is "not increasing"
    path = write_segment(tmp_path / "f-0", v2_bomb(200_000, "zstd"))
    code, out, err = run_output("verify", "--deep", "--format", "jsonl", str(path))
    assert code == 1, err
    kinds = [json.loads(l)["kind"] for l in out.splitlines() if l.startswith("{") and '"kind"' in l]
    assert kinds == ["offset_delta_mismatch", "record_offset_invalid"]  # count 200000 with lastOffsetDelta 0


def test_a_streamed_batch_that_fails_late_reports_only_its_decoding_error(tmp_path):
    # 5000 records (streamed in chunks) whose offsets go wrong from the second one, and a
    # count one higher than the records there are: the records' findings of the chunks
    # checked before the failure are dropped; the decoding error is the batch's one finding
    # about its records (as when the records were decoded first).
    unit, repeat = record_pattern(5000, 1)
    for codec, payload in ((0, unit * repeat), (4, zstd_payload(unit, repeat))):
        path = write_segment(tmp_path / f"late{codec}-0", v2_batch(payload, count=5001, codec=codec, last_offset_delta=5000))
        code, out, err = run_output("verify", "--deep", "--format", "jsonl", str(path))
        assert code == 1, err
        found = [json.loads(l) for l in out.splitlines() if '"kind"' in l]
        assert [f["kind"] for f in found] == ["record_count_mismatch"], found
        assert "premature EOF" in found[0]["message"]


if __name__ == "__main__":  # write bombs for a measurement by hand
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--records", type=int, default=10_000_000)
    ap.add_argument("--legacy", type=int, default=5_000_000)
    a = ap.parse_args()
    for codec in ("zstd", "gzip", "lz4", "snappy", "snappy-raw"):
        p = write_segment(a.dir / f"{codec}-0", v2_bomb(a.records, codec))
        print(p, p.stat().st_size)
    for magic in (0, 1):
        p = write_segment(a.dir / f"v{magic}-0", legacy_bomb(a.legacy, magic, distinct=False))
        print(p, p.stat().st_size)
