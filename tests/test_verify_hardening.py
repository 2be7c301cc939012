"""verify hardened for issue 9: zero runs at memory speed (segment.zeros), stray and
non-regular files, unreadable partition dirs, targets with nothing Kafka in them, pending
kafkatool journals and temp files, the --format vocabulary and the stderr summary, and the
stored/computed CRC wording.

Expected values are hand-derived (byte positions chosen at chunk boundaries, sizes of
files written here), never taken from kafkatool's own output.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

import kafkatool.verify as verify_module
import kafkatool.verify.workers as verify_workers
from kafkatool.verify import FileSummary, Finding, VerifyOptions, verify_paths
from test_verify import BATCH, INDEX, LOG, segment, v2, where

MIB = 1 << 20
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(params=["compiled", "python"])
def scan(request, monkeypatch):
    """Run a test with the compiled shallow scan, and with the pure-Python one."""
    if request.param == "python":
        monkeypatch.setattr(verify_workers, "scan_v2", None)
    elif verify_workers.scan_v2 is None:
        pytest.skip("the compiled extension is not built")
    return request.param


def findings(*paths, **opts) -> list[Finding]:
    return [i for i in verify_paths([str(p) for p in paths], VerifyOptions(**opts)) if isinstance(i, Finding)]


def partition(root: Path, files: dict[str, bytes], name: str = "t-0") -> Path:
    d = root / name
    d.mkdir(parents=True, exist_ok=True)
    for n, data in files.items():
        (d / n).write_bytes(data)
    return d


# --------------------------------------------------------------------------- zero_run_end
# (imported here, not at the top: the verify tests below also run against the code from
# before issue 9, which has no segment.zeros)


def zero_run_end(fd: int, start: int, end: int) -> int:
    from kafkatool.segment.zeros import zero_run_end as real

    return real(fd, start, end)


def _file(tmp_path, size: int, nonzero: dict[int, int] | None = None, sparse: bool = True):
    p = tmp_path / "z.bin"
    with open(p, "wb") as f:
        if sparse:
            f.truncate(size)
        else:
            f.write(bytes(size))
        for at, value in (nonzero or {}).items():
            f.seek(at)
            f.write(bytes([value]))
    return p


@pytest.mark.parametrize("sparse", [True, False])
@pytest.mark.parametrize(
    "start, at",
    [
        (0, 0),  # the first byte itself
        (0, 1),
        (0, MIB - 1),  # the last byte of the first chunk
        (0, MIB),  # the first byte of the second chunk
        (0, MIB + 1),
        (5, 5),  # non-zero exactly at an unaligned start
        (5, MIB + 4),  # start+1MiB-1 from an unaligned start
        (5, MIB + 5),  # start+1MiB
        (3 * MIB - 7, 3 * MIB - 1),  # end-1
    ],
)
def test_zero_run_end_finds_the_first_nonzero_byte(tmp_path, sparse, start, at):
    end = 3 * MIB
    p = _file(tmp_path, end, {at: 0x80}, sparse)
    fd = os.open(p, os.O_RDONLY)
    try:
        assert zero_run_end(fd, start, end) == at
        # a byte before start is not seen; one at or after end is not reported
        assert zero_run_end(fd, start, at) == at
        if at + 1 < end:
            assert zero_run_end(fd, at + 1, end) == end
    finally:
        os.close(fd)


@pytest.mark.parametrize("sparse", [True, False])
def test_zero_run_end_all_zeros(tmp_path, sparse):
    size = 2 * MIB + 3
    p = _file(tmp_path, size, sparse=sparse)
    fd = os.open(p, os.O_RDONLY)
    try:
        assert zero_run_end(fd, 0, size) == size
        assert zero_run_end(fd, 17, size) == size
        assert zero_run_end(fd, size, size) == size  # empty range
        assert zero_run_end(fd, size - 1, size) == size
    finally:
        os.close(fd)


def test_zero_run_end_stops_at_a_byte_before_a_hole_and_after_one(tmp_path):
    # data, a hole of 8 MiB, data: the hole is skipped, the data after it is found
    p = tmp_path / "holes.bin"
    with open(p, "wb") as f:
        f.write(bytes(100))  # written zeros
        f.seek(8 * MIB + 12345)
        f.write(b"\0\0\x07")
        f.seek(16 * MIB)
        f.write(b"\x01")
    fd = os.open(p, os.O_RDONLY)
    try:
        assert zero_run_end(fd, 0, 16 * MIB + 1) == 8 * MIB + 12347
        assert zero_run_end(fd, 8 * MIB + 12348, 16 * MIB + 1) == 16 * MIB
        assert zero_run_end(fd, 8 * MIB + 12348, 16 * MIB) == 16 * MIB
    finally:
        os.close(fd)


def test_zero_run_end_past_the_end_of_the_file(tmp_path):
    p = _file(tmp_path, 1000)
    fd = os.open(p, os.O_RDONLY)
    try:
        # the file ends before `end`: the run ends at the file's size
        assert zero_run_end(fd, 0, 5000) == 1000
        assert zero_run_end(fd, 10, 5000) == 1000
    finally:
        os.close(fd)
    p2 = tmp_path / "data.bin"
    p2.write_bytes(bytes(1000))
    fd = os.open(p2, os.O_RDONLY)
    try:
        assert zero_run_end(fd, 0, 5000) == 1000
    finally:
        os.close(fd)


def test_zero_run_end_is_fast_on_a_large_hole(tmp_path):
    import time

    size = 8 << 30
    p = _file(tmp_path, size)
    fd = os.open(p, os.O_RDONLY)
    try:
        t = time.monotonic()
        assert zero_run_end(fd, 0, size) == size
        assert time.monotonic() - t < 1.0
    finally:
        os.close(fd)


def test_zero_run_end_leaves_the_file_offset_alone(tmp_path):
    # verify's resync reads through a buffered file object over the same descriptor
    p = _file(tmp_path, 3 * MIB, {2 * MIB: 9})
    with open(p, "rb") as f:
        f.seek(123)
        assert zero_run_end(f.fileno(), 0, 3 * MIB) == 2 * MIB
        assert f.tell() == 123 and os.lseek(f.fileno(), 0, os.SEEK_CUR) == 123
        f.seek(2 * MIB)
        assert f.read(1) == b"\x09"


@pytest.mark.parametrize("at", [0, 1, 63, 64, 65, 191, 192, 4095, 4096, 9999])
def test_zero_run_end_in_a_buffer(at):
    from kafkatool.segment.zeros import zero_run_end_in

    buf = bytearray(10000)
    buf[at] = 0x42
    assert zero_run_end_in(buf, 0, 10000) == at
    assert zero_run_end_in(memoryview(buf), 0, 10000) == at
    assert zero_run_end_in(bytes(buf), 0, at) == at  # the end is exclusive
    assert zero_run_end_in(buf, at, 10000) == at
    assert zero_run_end_in(buf, at + 1, 10000) == 10000
    assert zero_run_end_in(buf, 10000, 10000) == 10000


def test_zero_run_end_chunk_is_one_mib():
    from kafkatool.segment import zeros

    assert zeros.CHUNK == MIB


def test_zero_run_end_without_seek_data(tmp_path, monkeypatch):
    from kafkatool.segment import zeros

    # a platform or file system without SEEK_DATA reads everything: same answers
    monkeypatch.setattr(zeros, "_SEEK_DATA", None)
    p = _file(tmp_path, 3 * MIB, {MIB: 1})
    fd = os.open(p, os.O_RDONLY)
    try:
        assert zero_run_end(fd, 0, 3 * MIB) == MIB
        assert zero_run_end(fd, MIB + 1, 3 * MIB) == 3 * MIB
        assert zero_run_end(fd, MIB + 1, 5 * MIB) == 3 * MIB
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- verify over zero runs

HEALTHY = b"".join(segment())  # five batches of 109 bytes: 545 bytes, offsets 0-14
assert len(HEALTHY) == 5 * BATCH == 545


def test_a_2gib_sparse_preallocated_tail_is_verified_in_under_2s(tmp_path, scan):
    # log.preallocate=true after an unclean shutdown: the segment keeps its full size, the
    # tail a hole; before issue 9 verify took ~17-26 s (and read the whole tail into memory)
    d = partition(tmp_path, {INDEX: b""})
    size = 2 << 30
    with open(d / LOG, "wb") as f:
        f.write(HEALTHY)
        f.truncate(size)
    t = time.monotonic()
    got = findings(d)
    took = time.monotonic() - t
    assert where(got) == [("trailing_zeros", 545, size - 545)]
    assert got[0].message == f"{size - 545} zero bytes after the last batch (preallocated or never written)"
    assert got[0].batches_after == 0
    assert took < 2.0, took


def test_a_64mib_written_zero_tail_at_memory_speed(tmp_path, scan):
    d = partition(tmp_path, {INDEX: b"", LOG: HEALTHY + bytes(64 * MIB)})
    t = time.monotonic()
    got = findings(d)
    took = time.monotonic() - t
    assert where(got) == [("trailing_zeros", 545, 64 * MIB)]
    assert took < 0.15, took  # ~0.01 s; 0.32 s before issue 9


def test_a_64mib_zero_gap_between_batches(tmp_path, scan):
    # zeros in the middle, then valid batches: one bad region, exactly the zeros, and the
    # batches after it are checked and counted
    later = b"".join(segment(3, first=15))
    d = partition(tmp_path, {INDEX: b"", LOG: HEALTHY + bytes(64 * MIB) + later})
    t = time.monotonic()
    got = findings(d)
    took = time.monotonic() - t
    assert where(got) == [("invalid_size", 545, 64 * MIB)]
    assert got[0].batches_after == 3
    assert got[0].message.endswith(f"; {64 * MIB} unreadable bytes before the next valid batch at {545 + 64 * MIB}")
    assert took < 0.3, took


@pytest.mark.parametrize("gap", [1, 15, 16, 17, 4096, MIB - 1, MIB, MIB + 1])
def test_a_zero_gap_before_a_batch_whose_first_nonzero_byte_is_at_11(tmp_path, scan, gap):
    # a batch at offset 0 of under 256 bytes: bytes 0-10 are zero, byte 11 (the low byte of
    # its size field) is the first non-zero one: the resync must still find it at `gap`
    first = v2(0)
    assert first[:11] == bytes(11) and first[11] != 0
    d = partition(tmp_path, {INDEX: b"", LOG: bytes(gap) + first + b"".join(segment(2, first=3))})
    got = findings(d)
    assert where(got) == [("invalid_size", 0, gap)]
    assert got[0].batches_after == 3


def test_a_zero_tail_with_jobs(tmp_path, scan):
    # --jobs splits a large segment at resync points; inside a zero tail there are none
    d = partition(tmp_path, {INDEX: b""})
    size = 256 * MIB
    with open(d / LOG, "wb") as f:
        f.write(HEALTHY * 1)
        f.truncate(size)
    assert where(findings(d, workers=2)) == [("trailing_zeros", 545, size - 545)]


def test_zeros_then_garbage_is_not_trailing_zeros(tmp_path, scan):
    # a zero run followed by a non-zero byte is not a zero tail: the last byte counts
    d = partition(tmp_path, {INDEX: b"", LOG: HEALTHY + bytes(2 * MIB) + b"\x01"})
    got = findings(d)
    assert [(f.kind, f.position, f.length) for f in got] == [("invalid_size", 545, 2 * MIB + 1)]
    d2 = partition(tmp_path, {INDEX: b"", LOG: HEALTHY + bytes(5) + b"\x01"}, name="t-1")
    assert where(findings(d2)) == [("trailing_bytes", 545, 6)]


# --------------------------------------------------------------------------- files Kafka cannot load


def kinds(items) -> list[tuple[str, str]]:
    return [(os.path.basename(f.file), f.kind) for f in items]


@pytest.mark.parametrize("name", ["99999999999999999999999.log", "09223372036854775808.log", "foo.log",
                                  "99999999999999999999999.index", "1e3.timeindex", "x.txnindex"])
def test_a_stray_segment_name_kafka_cannot_parse(run, tmp_path, name):
    # §2.1: the offset before the first '.' is read as a Java long; 2^63 is one too many
    d = partition(tmp_path, {LOG: HEALTHY, INDEX: b"", name: b""})
    got = findings(d)
    assert kinds(got) == [(name, "invalid_file_name")]
    assert "NumberFormatException" in got[0].message and got[0].found == name.split(".", 1)[0]
    r = run("verify", "--format", "text", str(d))
    assert r.code == 1 and f"{name}: invalid_file_name: " in r.out, r


def test_the_largest_offset_kafka_can_parse_is_a_name_it_loads(tmp_path):
    d = partition(tmp_path, {LOG: HEALTHY, INDEX: b"", "09223372036854775807.log": b"", "09223372036854775807.index": b"",
                             "-0000000000000000001.timeindex": b""})
    assert "invalid_file_name" not in [f.kind for f in findings(d)]


def test_a_copy_under_any_name_outside_a_partition_dir_is_checked_as_it_is(tmp_path):
    (tmp_path / "copy.log").write_bytes(HEALTHY)
    assert findings(tmp_path / "copy.log") == []
    # given directly, but inside a partition dir, the name still matters to the broker
    d = partition(tmp_path, {LOG: HEALTHY, INDEX: b"", "99999999999999999999999.log": HEALTHY})
    assert kinds(findings(d / "99999999999999999999999.log")) == [("99999999999999999999999.log", "invalid_file_name")]


def _listdir_refusing(monkeypatch, refused: Path) -> None:
    """``refused`` cannot be listed, whichever call lists it (``os.listdir`` or ``os.scandir``)."""
    for name in ("listdir", "scandir"):
        real = getattr(os, name)

        def refusing(path=".", real=real):
            if os.path.abspath(os.fspath(path)) == str(refused):
                raise PermissionError(13, "Permission denied", os.fspath(path))
            return real(path)

        monkeypatch.setattr(os, name, refusing)


def test_an_unreadable_partition_dir_is_a_finding_and_the_others_are_checked(run, tmp_path, monkeypatch):
    # (as root a chmod 000 would not stop the listing: os.listdir refuses instead)
    logdir = tmp_path / "logdir"
    partition(logdir, {LOG: HEALTHY, INDEX: b""}, name="a-0")
    bad = partition(logdir, {LOG: HEALTHY, INDEX: b""}, name="b-0")
    partition(logdir, {LOG: HEALTHY + b"\x01" * 5, INDEX: b""}, name="c-0")
    _listdir_refusing(monkeypatch, bad)
    r = run("verify", "--format", "text", str(logdir))
    assert r.code == 1, r
    assert r.lines == [
        f"{bad}: unreadable: cannot list the directory: Permission denied (the broker cannot load it either: `Could not read file`)",
        f"{logdir / 'c-0' / LOG}:545: trailing_bytes: 5 bytes at the end are too short for a batch header",
    ]
    # the partition dir given alone: the same finding, exit 1
    r = run("verify", "--format", "text", str(bad))
    assert r.code == 1 and r.lines == [f"{bad}: unreadable: cannot list the directory: Permission denied (the broker cannot load it either: `Could not read file`)"], r
    # a log dir given that cannot be listed: a finding too (not "nothing Kafka")
    _listdir_refusing(monkeypatch, logdir)
    r = run("verify", "--format", "text", str(logdir))
    assert r.code == 1 and [x.split(": ")[1] for x in r.lines] == ["unreadable"], r
    # one found while searching a tree, not named like a partition: reported beside the rest
    other = tmp_path / "other"  # not a log dir itself: it holds one, and a directory that is not
    partition(other / "logs", {LOG: HEALTHY, INDEX: b""}, name="x-0")
    (other / "private").mkdir()
    _listdir_refusing(monkeypatch, other / "private")
    r = run("verify", "--format", "text", str(other))
    assert r.code == 1 and r.lines == [f"{other / 'private'}: unreadable: cannot list the directory: Permission denied (the broker cannot load it either: `Could not read file`)"], r


@pytest.mark.skipif(os.geteuid() == 0, reason="root lists any directory")
def test_an_unreadable_partition_dir_for_real(run, tmp_path):
    logdir = tmp_path / "logdir"
    partition(logdir, {LOG: HEALTHY, INDEX: b""}, name="a-0")
    bad = partition(logdir, {LOG: HEALTHY, INDEX: b""}, name="b-0")
    bad.chmod(0)
    try:
        r = run("verify", "--format", "text", str(logdir))
    finally:
        bad.chmod(0o755)
    assert r.code == 1 and [line.split(": ")[1] for line in r.lines] == ["unreadable"], r


def _cli(*args: str, timeout: float = 60) -> "subprocess.CompletedProcess[str]":
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "kafkatool", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONPATH": str(REPO)})


def test_a_fifo_named_like_a_segment_is_reported_never_opened(tmp_path):
    d = partition(tmp_path, {INDEX: b"", "00000000000000000015.log": b"".join(segment(1, first=15)),
                             "00000000000000000015.index": b""})
    os.mkfifo(d / LOG)  # nobody writes to it: opening it for reading would block for ever
    r = _cli("verify", "--format", "text", str(d))
    assert r.returncode == 1 and r.stdout.splitlines() == [
        f"{d / LOG}: not_regular_file: a FIFO named like a Kafka file: not opened (the broker does not load it either)",
    ], r
    r = _cli("verify", "--format", "text", str(d / LOG))
    assert r.returncode == 1 and r.stdout.splitlines() == [
        f"{d / LOG}: not_regular_file: a FIFO, not a regular file: not opened",
    ], r


def test_a_directory_named_like_a_segment_in_a_partition_dir(tmp_path):
    d = partition(tmp_path, {LOG: HEALTHY, INDEX: b""})
    (d / "00000000000000000015.log").mkdir()
    assert kinds(findings(d)) == [("00000000000000000015.log", "not_regular_file")]


def test_a_directory_in_a_log_dir_that_is_not_a_partition(tmp_path):
    # LogManager refuses the whole log dir ("... is not in the form of topic-partition"):
    # lost+found at a mount point, or a backup dir put inside the log dir
    logdir = tmp_path / "logdir"
    partition(logdir, {LOG: HEALTHY, INDEX: b""}, name="t-0")
    (logdir / "meta.properties").write_text("version=1\nbroker.id=0\ncluster.id=abc\n")
    (logdir / "lost+found").mkdir()
    (logdir / "remote-log-index-cache").mkdir()  # tiered storage's: the broker skips it
    partition(logdir, {INDEX: b"", "00000000000000000000.timeindex": b""}, name="kafkatool-backup")
    got = findings(logdir)
    assert sorted(kinds(got)) == [("kafkatool-backup", "not_a_partition_dir"), ("lost+found", "not_a_partition_dir")]
    # a directory of log dirs (one level too high) is not a log dir: each child is searched
    top = tmp_path
    assert sorted(kinds(findings(top))) == [("kafkatool-backup", "not_a_partition_dir"), ("lost+found", "not_a_partition_dir")]
    # a directory holding copies of partition dirs, not a broker's log dir (no meta.properties):
    # what else it holds is nobody's business
    (logdir / "meta.properties").unlink()
    assert sorted(kinds(findings(logdir))) == [(INDEX, "orphan_index"), ("00000000000000000000.timeindex", "orphan_index")]


# --------------------------------------------------------------------------- nothing Kafka


def test_an_empty_dir_is_not_clean_it_is_nothing(run, tmp_path):
    e = tmp_path / "emptydir"
    e.mkdir()
    r = run("verify", str(e))
    assert r.code == 2 and "no failing findings" not in r.err, r
    assert r.err == f"kafkatool: error: {e}: nothing Kafka found here (no partition directory, segment, index, snapshot or checkpoint file)\n", r


def test_a_dir_without_kafka_files_is_nothing(run, tmp_path):
    etc = tmp_path / "etc"
    (etc / "ssl").mkdir(parents=True)
    (etc / "hosts").write_text("127.0.0.1 localhost\n")
    (etc / "ssl" / "openssl.cnf").write_text("[x]\n")
    r = run("verify", "--format", "jsonl", str(etc))
    assert r.code == 2 and r.out == "" and "nothing Kafka found here" in r.err, r
    # a file given by name that is not a Kafka file
    r = run("verify", str(etc / "hosts"))
    assert r.code == 2 and "nothing Kafka found here" in r.err, r
    # with a real partition beside it, the empty path is still an error, named
    d = partition(tmp_path, {LOG: HEALTHY, INDEX: b""})
    r = run("verify", str(d), str(etc))
    assert r.code == 2 and str(etc) in r.err and str(d) not in r.err, r


def test_what_counts_as_kafka(run, tmp_path):
    # a fresh log dir (meta.properties only) and an empty partition dir are Kafka, and clean
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / "meta.properties").write_text("version=1\nbroker.id=0\ncluster.id=abc\n")
    assert run("verify", "-q", str(fresh)).code == 0
    (tmp_path / "t-0").mkdir()
    assert run("verify", "-q", str(tmp_path / "t-0")).code == 0


def test_a_dir_of_log_dirs_is_searched(run, tmp_path):
    top = tmp_path / "disks"
    for n, tail in (("d1", b""), ("d2", b"\x01" * 5)):
        partition(top / n / "kafka-logs", {LOG: HEALTHY + tail, INDEX: b""}, name="orders-0")
        (top / n / "kafka-logs" / "meta.properties").write_text("version=1\nbroker.id=0\ncluster.id=abc\n")
    r = run("verify", "--format", "text", str(top))
    assert r.code == 1 and r.lines == [f"{top / 'd2' / 'kafka-logs' / 'orders-0' / LOG}:545: trailing_bytes: 5 bytes at the end are too short for a batch header"], r
    assert "2 segments" in r.err


# --------------------------------------------------------------------------- what interrupted repairs left

SEG0 = "00000000000000000000"


def _pending_partition(logdir: Path) -> Path:
    from kafkatool.repair import staging_dir_name

    d = partition(logdir, {LOG: HEALTHY, INDEX: b""})
    (d / f"{SEG0}.log.kafkatool-tmp").write_bytes(HEALTHY[:BATCH])  # named by truncate's journal
    (d / "kafkatool-truncate.kafkatool-journal").write_text(json.dumps(
        {"tool": "kafkatool truncate", "replace": [{"temp": f"{SEG0}.log.kafkatool-tmp", "target": LOG}], "move": []}))
    (d / f"{SEG0}.index.kafkatool-tmp").write_bytes(b"")  # named by no journal
    staging = logdir / staging_dir_name(str(d))
    staging.mkdir()
    (staging / LOG).write_bytes(HEALTHY[:100])  # not checked: it is not a partition, whatever it holds
    return d


def test_a_pending_journal_its_temp_files_and_the_staging_dir(run, tmp_path):
    logdir = tmp_path / "logdir"
    d = _pending_partition(logdir)
    staging = next(p for p in logdir.iterdir() if p.name.endswith("-delete"))
    for target in (logdir, d):  # the log dir, or the partition dir alone: each reported once
        got = findings(target)
        assert sorted(kinds(got)) == sorted([
            ("kafkatool-truncate.kafkatool-journal", "pending_journal"),
            (f"{SEG0}.log.kafkatool-tmp", "kafkatool_temp"),
            (f"{SEG0}.index.kafkatool-tmp", "kafkatool_temp"),
            (staging.name, "kafkatool_staging"),
        ]), target
        by_kind = {(os.path.basename(f.file), f.kind): f.message for f in got}
        assert "kafkatool truncate --execute" in by_kind[("kafkatool-truncate.kafkatool-journal", "pending_journal")]
        assert "do not remove it" in by_kind[(f"{SEG0}.log.kafkatool-tmp", "kafkatool_temp")]
        assert "`--execute` removes it" in by_kind[(f"{SEG0}.index.kafkatool-tmp", "kafkatool_temp")]
        assert "run that command again" in by_kind[(staging.name, "kafkatool_staging")]
        r = run("verify", "-q", str(target))
        assert r.code == 1, r


def test_a_reindex_journal(tmp_path):
    d = partition(tmp_path, {LOG: HEALTHY, INDEX: b"", f"{SEG0}.kafkatool-journal": b"{}"})
    got = findings(d)
    assert kinds(got) == [(f"{SEG0}.kafkatool-journal", "pending_journal")]
    assert "kafkatool reindex --execute" in got[0].message


def test_pending_marks_match_the_repair_constants():
    from kafkatool import safety

    assert safety.TEMP_SUFFIX.startswith(verify_module.PENDING_MARK)
    assert safety.JOURNAL_SUFFIX.startswith(verify_module.PENDING_MARK)


# --------------------------------------------------------------------------- output people and scripts read


def _damaged(root: Path, name: str = "t-0") -> Path:
    """A bad CRC in the third batch (position 218; two good batches follow)."""
    data = bytearray(HEALTHY)
    data[218 + 70] ^= 0x01
    return partition(root, {INDEX: b"", LOG: bytes(data)}, name=name)


def test_crc_findings_say_stored_and_computed_and_follow_the_convention(tmp_path, scan):
    import crc32c  # an independent CRC-32C (the crc32c package, not kafkatool's)

    d = _damaged(tmp_path)
    data = (d / LOG).read_bytes()[218 : 218 + BATCH]
    stored = int.from_bytes(data[17:21], "big")
    computed = crc32c.crc32c(data[21:])
    (f,) = findings(d)
    assert f.kind == "crc_mismatch" and f.position == 218
    assert f"(stored crc {stored}, computed crc {computed}; the batch spans {BATCH} bytes)" in f.message
    # found = what is on disk, expected = what a valid file would hold (errors.py)
    assert (f.found, f.expected) == (stored, computed)


def test_snapshot_crc_message_names_stored_and_computed(tmp_path):
    import crc32c

    from kafkatool.segment.snapshot import ProducerSnapshotEntry, encode_producer_snapshot

    snap = bytearray(encode_producer_snapshot([ProducerSnapshotEntry(7, 0, 0, 14, 0, 1_000_014, 0, -1)]))
    snap[-1] ^= 0x01  # a byte the CRC covers (it covers [6, end))
    stored = int.from_bytes(snap[2:6], "big")
    d = partition(tmp_path, {LOG: HEALTHY, INDEX: b"", "00000000000000000015.snapshot": bytes(snap)})
    (f,) = findings(d)
    assert f.kind == "snapshot_crc_mismatch"
    assert f.message.endswith(f"(stored crc {stored}, computed crc {crc32c.crc32c(bytes(snap[6:]))})")
    assert f.found == stored


def test_the_summary_is_one_unwrapped_line_without_rich_when_stderr_is_not_a_terminal(tmp_path):
    # `verify ... 2>&1 | grep "no failing findings"` found nothing: Rich wrapped at 80 columns
    d = partition(tmp_path / ("a-long-directory-name-" * 4), {LOG: HEALTHY, INDEX: b""}, name="orders-0")
    r = _cli("verify", str(d))
    assert r.returncode == 0 and r.stdout == "", r
    assert r.stderr.splitlines() == ["Checked 2 files (1 segment, 5 batches, 545 bytes) in " + r.stderr.split(" in ", 1)[1].split(" s:")[0] + " s: no failing findings"], r
    r = _cli("verify", str(_damaged(tmp_path)))
    lines = r.stderr.splitlines()
    assert r.returncode == 1 and lines[0].endswith(" s: 1 finding that fails the check") and lines[1:] == ["  crc_mismatch  1"], r
    # and Rich is not imported for it
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-X", "importtime", "-m", "kafkatool", "verify", str(d)], cwd=REPO,
                       capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=60)
    imported = [line.rsplit("|", 1)[1].strip() for line in p.stderr.splitlines() if line.startswith("import time:")]
    assert p.returncode == 0 and "no failing findings" in p.stderr
    assert [m for m in imported if m == "rich" or m.startswith("rich.")] == []


def test_quiet_means_no_summary(tmp_path):
    r = _cli("verify", "-q", str(_damaged(tmp_path)))
    assert r.returncode == 1 and r.stderr == "" and r.stdout.count("crc_mismatch") == 1, r


def test_one_format_vocabulary(run, tmp_path):
    d = _damaged(tmp_path)
    line = f"{d / LOG}:218: crc_mismatch: "
    # text: plain lines (the default when stdout is not a terminal)
    for args in ((), ("--format", "text")):
        r = run("verify", "-q", *args, str(d))
        assert r.code == 1 and len(r.lines) == 1 and r.lines[0].startswith(line) and r.lines[0].endswith(" (2 good batches follow)"), r
    # lines: the old name of text, still accepted
    r = run("verify", "--format", "lines", str(d))
    assert r.code == 1 and r.lines[0].startswith(line) and "--format lines is now called --format text" in r.err, r
    # table: the Rich table
    r = run("verify", "-q", "--format", "table", str(d))
    assert r.code == 1 and r.lines[0].startswith("Findings") and "┃ file" in r.out and not any(x.startswith(line) for x in r.lines), r
    # jsonl: compact camelCase objects and a summary
    r = run("verify", "-q", "--format", "jsonl", str(d))
    finding, summary = (json.loads(x) for x in r.lines)
    assert r.lines[0] == json.dumps(finding, separators=(",", ":"), ensure_ascii=False)
    assert list(finding) == ["type", "file", "position", "length", "kind", "batchIndex", "offset", "expected", "found", "message", "batchesAfter"]
    assert summary["type"] == "summary" and "partitionStates" in summary and summary["failing"] == 1
    # help shows the three, not the alias
    r = run("verify", "--help")
    assert "[text|table|jsonl]" in r.out and "lines" not in r.out.split("--format", 1)[1].split("--fail-on")[0]
    assert run("verify", "--format", "rich", str(d)).code == 2


def test_tables_show_times_as_iso_8601_next_to_the_milliseconds(run, tmp_path):
    from test_verify import patch

    # a CreateTime maxTimestamp (batch bytes 35-42) below the baseTimestamp (1,000,006)
    bad = patch(v2(6), 35, ">q", 999_000)
    d = partition(tmp_path, {INDEX: b"", LOG: HEALTHY[: 2 * BATCH] + bad})
    r = run("verify", "-q", "--format", "table", str(d))
    assert r.code == 1 and "timestamp_invalid" in r.out, r
    assert "999000 (1970-01-01T00:16:39.000Z)" in r.out, r
    r = run("verify", "-q", "--format", "jsonl", str(d))
    assert json.loads(r.lines[0])["found"] == 999000  # jsonl keeps the number


def test_the_inner_crc_message_names_the_stored_crc(tmp_path):
    from test_verify import _inner_crc

    damaged = _inner_crc()
    d = partition(tmp_path, {INDEX: b"", LOG: damaged.data})
    (f,) = [f for f in findings(d, deep=True) if f.kind == "inner_crc_mismatch"]
    # the inner message at offset 1 of the wrapper; its CRC (bytes 12-15) had byte 13 flipped
    import zlib

    from kafkatool.record.legacy import encode_message

    good = encode_message(1, 1, 1_000_001, b"k", b"v")
    stored = int.from_bytes(good[12:16], "big") ^ (0xFF << 16)
    assert zlib.crc32(good[16:]) == int.from_bytes(good[12:16], "big")  # the undamaged one is valid
    assert f"(stored crc {stored}, " in f.message and f.found == stored
