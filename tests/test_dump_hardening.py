"""kafkatool dump against issue 9: what a new operator and a hostile tester found.

Expected values are derived by hand or read with kafka-python (an independent reader of the
same format), never with kafkatool's own encoder: the segments built here come from
kafka-python's builders, the real ones from ../shared/fixtures-real.
"""

from __future__ import annotations

import os
import stat
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from conftest import real_fixture, run_with_pty_stderr

REPO = Path(__file__).resolve().parents[1]
LOG = "00000000000000000000.log"
T0 = 1700000000000
TEST_TOPIC = "xpxwo100__bullShit/tmp/kafka-logs/TEST-TOPIC-0/00000000000000000000.log"
TOPIC1 = "xpxwo100__bullShit/tmp/kafka-logs/topic1-0/00000000000000000000.log"
HAMLET_GZIP = "asayers__kafkalite/tests/test-data/fs-data/hamlet-gzip-0/00000000000000000000.log"
QUORUM_STATE = "greenlemonT__kafka-temp/data/kafka3/__cluster_metadata-0/quorum-state"


# ---------------------------------------------------------------- helpers


def kp_messages(path: Path) -> list[list]:
    """kafka-python's view of a segment: per shallow entry, its records (offset, timestamp, key, value, crc)."""
    mr = MemoryRecords(path.read_bytes())
    out = []
    while mr.has_next():
        batch = mr.next_batch()
        out.append([(r.offset, r.timestamp, r.key, r.value, r.checksum) for r in batch])
    return out


def kp_v2_batch(base_offset: int, records: list[tuple[int, bytes | None, bytes | None]], **kw) -> bytes:
    """A v2 batch built by kafka-python: records are (timestamp, key, value); offsets from ``base_offset``."""
    b = DefaultRecordBatchBuilder(magic=2, compression_type=kw.get("codec", 0), is_transactional=False,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i, (ts, key, value) in enumerate(records):
        b.append(i, timestamp=ts, key=key, value=value, headers=kw.get("headers", []))
    data = bytearray(b.build())
    data[0:8] = struct.pack(">q", base_offset)  # baseOffset is outside the CRC (it covers attributes on)
    return bytes(data)


def kp_v1_wrapper(last_offset: int, records: list[tuple[int, bytes, bytes]], codec: int = 1) -> bytes:
    """A v1 compressed wrapper built by kafka-python, its offset set to the last inner offset as a
    broker writes it (the offset is outside the CRC); inner offsets are relative (0..n-1)."""
    b = LegacyRecordBatchBuilder(magic=1, compression_type=codec, batch_size=1 << 20)
    for i, (ts, key, value) in enumerate(records):
        b.append(i, timestamp=ts, key=key, value=value)
    data = bytearray(b.build())
    data[0:8] = struct.pack(">q", last_offset)
    return bytes(data)


def kafkatool(*args: str, cwd=None, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
    """The CLI in a child process (the repo under test on PYTHONPATH)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), **kw.pop("env", {})}
    return subprocess.run([sys.executable, "-m", "kafkatool", *args], capture_output=True, text=True,
                          cwd=cwd or REPO, env=env, timeout=timeout, **kw)


def run_as_nobody(args: list[str], warm: list[str]) -> tuple[int, str, str]:
    """Run ``kafkatool ARGS`` in a forked child that drops root for uid/gid 65534, so that file
    modes are enforced (root reads 0000 files). ``warm`` is run first, as root, on readable files,
    so that every module the run imports is loaded before the child can no longer read them."""
    from kafkatool.cli.main import main

    def _call(argv):
        try:
            main(argv)
        except SystemExit as e:
            return e.code if isinstance(e.code, int) else 1
        return 0

    out_fd, out_name = tempfile.mkstemp()
    err_fd, err_name = tempfile.mkstemp()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 3
        try:
            # pytest's capture replaced sys.stdout/sys.stderr: write to files of our own
            devnull = os.open(os.devnull, os.O_WRONLY)
            sys.stdout = sys.stderr = open(devnull, "w", encoding="utf-8", closefd=False)
            _call(warm)
            _call(["dump", "--no-such-option"])  # loads Click's usage formatting too
            sys.stdout.flush()
            sys.stdout = open(out_fd, "w", encoding="utf-8", closefd=False)
            sys.stderr = open(err_fd, "w", encoding="utf-8", closefd=False)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            code = _call(args)
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:
            import traceback

            os.write(err_fd, traceback.format_exc().encode())
        finally:
            os._exit(code)
    _pid, status = os.waitpid(pid, 0)
    os.close(out_fd)
    os.close(err_fd)
    out = Path(out_name).read_text()
    err = Path(err_name).read_text()
    os.unlink(out_name)
    os.unlink(err_name)
    return os.waitstatus_to_exitcode(status), out, err


@pytest.fixture
def world_dir():
    """A directory every user can enter (pytest's tmp_path is 0700 under root's)."""
    d = Path(tempfile.mkdtemp(prefix="kafkatool-dump-test-"))
    d.chmod(0o755)
    yield d
    for root, dirs, _files in os.walk(d):
        for n in dirs:
            os.chmod(os.path.join(root, n), 0o755)
    import shutil

    shutil.rmtree(d)


def three_batches() -> bytes:
    return b"".join(kp_v2_batch(2 * i, [(T0 + 2 * i, b"k", b"v"), (T0 + 2 * i + 1, b"k", b"w")]) for i in range(3))


@pytest.fixture
def part(tmp_path):
    p = tmp_path / "t-0"
    p.mkdir()
    (p / LOG).write_bytes(three_batches())
    return p


# ---------------------------------------------------------------- 1: --end-offset / --end-time on v0/v1


def test_readme_example_stops_at_end_offset_on_a_real_v1_segment(run):
    log = real_fixture(TEST_TOPIC)
    msgs = {m[0][0]: m[0] for m in kp_messages(log) if 1200 <= m[0][0] <= 1210}
    assert sorted(msgs) == list(range(1200, 1211))
    r = run("dump", "--print-data-log", "--start-offset", "1200", "--end-offset", "1210", str(log))
    expected = [f"Dumping {log}", "Log starting offset: 0"]
    for o in range(1200, 1211):
        _off, ts, key, value, crc = msgs[o]
        # every message of this segment is 62 bytes (12 + 4 + 1 + 1 + 8 + 4 + 4 + 4 + 24): position = 62 * offset
        expected.append(f"offset: {o} position: {62 * o} CreateTime: {ts} size: 62 magic: 1 compresscodec: none crc: {crc} isvalid: true")
        expected.append(f"| offset: {o} CreateTime: {ts} keySize: 4 valueSize: 24 isValid: true crc: {crc}}} key: {key.decode()} payload: {value.decode()}")
    assert r.lines == expected  # 24 lines, not 20,024
    assert r.code == 0


@pytest.mark.parametrize("deep", [False, True])
@pytest.mark.parametrize("start,end", [(250, 253), (250, 254), (254, 254), (300, 310), (0, 0), (5381, 6000)])
def test_end_offset_on_compressed_v0_wrappers(run, deep, start, end):
    log = real_fixture(HAMLET_GZIP)
    wrappers = kp_messages(log)
    # a wrapper shows when one of its inner offsets is in [start, end]; inner records likewise
    want_wrappers = [w[-1][0] for w in wrappers if any(start <= m[0] <= end for m in w)]
    want_inner = [m[0] for w in wrappers for m in w if start <= m[0] <= end]
    args = ["--deep-iteration"] if deep else []
    r = run("dump", *args, "--start-offset", str(start), "--end-offset", str(end), str(log))
    assert [int(l.split()[1]) for l in r.lines if l.startswith("offset:")] == want_wrappers
    if deep:
        assert [int(l.split()[2]) for l in r.lines if l.startswith("| offset:")] == want_inner
    assert r.code == 0


def test_hamlet_boundaries_by_hand(run):
    """The same, by hand: the first wrapper holds 0..253, the second 254..507 (SOURCE.md, wrapper offsets)."""
    log = real_fixture(HAMLET_GZIP)
    r = run("dump", "--start-offset", "250", "--end-offset", "253", str(log))
    assert [l.split()[1] for l in r.lines[2:]] == ["253"]
    r = run("dump", "--start-offset", "250", "--end-offset", "254", str(log))
    assert [l.split()[1] for l in r.lines[2:]] == ["253", "507"]


@pytest.mark.parametrize("deep", [False, True])
def test_end_time_on_a_real_v1_segment(run, deep):
    log = real_fixture(TOPIC1)
    msgs = [m[0] for m in kp_messages(log)]
    ts1 = msgs[1][1]
    for end_time in (ts1, ts1 - 1):
        want = [m[0] for m in msgs if m[1] <= end_time]
        args = ["--deep-iteration"] if deep else []
        r = run("dump", *args, "--end-time", str(end_time), str(log))
        assert [int(l.split()[1]) for l in r.lines if l.startswith("offset:")] == want
        if deep:
            assert [int(l.split()[2]) for l in r.lines if l.startswith("| offset:")] == want
    assert want == [0]  # the messages after offset 1 are newer: nothing after it prints


@pytest.mark.parametrize("deep", [False, True])
def test_end_time_and_offset_on_v1_gzip_wrappers(run, tmp_path, deep):
    # wrapper A: offsets 0..2 at T0+0..2; wrapper B: offsets 3..5 at T0+10..12 (kafka-python builds them)
    a = kp_v1_wrapper(2, [(T0 + i, b"k", b"a%d" % i) for i in range(3)])
    b = kp_v1_wrapper(5, [(T0 + 10 + i, b"k", b"b%d" % i) for i in range(3)])
    log = tmp_path / LOG
    log.write_bytes(a + b)
    args = ["--deep-iteration"] if deep else []
    r = run("dump", *args, "--end-time", str(T0 + 9), str(log))
    assert [l.split()[1] for l in r.lines if l.startswith("offset:")] == ["2"]  # B: every record is later
    r = run("dump", *args, "--end-time", str(T0 + 10), str(log))
    assert [l.split()[1] for l in r.lines if l.startswith("offset:")] == ["2", "5"]
    if deep:
        assert [l.split()[2] for l in r.lines if l.startswith("| offset:")] == ["0", "1", "2", "3"]
    r = run("dump", *args, "--end-offset", "2", str(log))
    assert [l.split()[1] for l in r.lines if l.startswith("offset:")] == ["2"]
    r = run("dump", *args, "--start-offset", "3", "--end-offset", "3", str(log))
    assert [l.split()[1] for l in r.lines if l.startswith("offset:")] == ["5"]


# ---------------------------------------------------------------- 2: paths that do not exist


@pytest.mark.parametrize("kind", ["missing", "loop", "dash", "files"])
def test_a_path_that_does_not_exist_is_a_usage_error(run, tmp_path, monkeypatch, kind):
    monkeypatch.chdir(tmp_path)
    os.symlink("loop", "loop")
    args = {
        "missing": ["nonexist.log"],
        "loop": ["loop"],
        "dash": ["-"],
        "files": ["--files", "nonexist.log"],
    }[kind]
    r = run("dump", *args)
    assert r.code == 2 and r.out == ""
    name = {"missing": "nonexist.log", "loop": "loop", "dash": "-", "files": "nonexist.log"}[kind]
    assert f"Path '{name}' does not exist." in r.err
    v = run("verify", name)  # the same words as the other commands
    assert v.code == 2 and f"Path '{name}' does not exist." in v.err


# ---------------------------------------------------------------- 3: an unreadable .log


def _unreadable_log_partition(d: Path) -> Path:
    p = d / "t-0"
    p.mkdir()
    p.chmod(0o755)
    (p / LOG).write_bytes(three_batches())
    (p / "00000000000000000000.index").write_bytes(b"")
    (p / "00000000000000000000.timeindex").write_bytes(struct.pack(">qi", T0 + 5, 5))
    for f in p.iterdir():
        f.chmod(0o644)
    return p


def _assert_the_log_is_named(p: Path, code: int, out: str, err: str) -> None:
    log = p / LOG
    errors = err.splitlines()
    assert code == 1
    assert errors, err
    for line in errors:
        # each error names the unreadable .log, never the readable index beside it
        assert line.startswith(f"kafkatool: error: {log}: cannot read file: Permission denied"), line
    assert any("needed to check" in line and line.endswith("00000000000000000000.timeindex)") for line in errors)
    assert "Dumping " + str(p / "00000000000000000000.timeindex") in out


def test_an_unreadable_log_is_named_monkeypatched(run, tmp_path, monkeypatch):
    import builtins
    import errno

    p = _unreadable_log_partition(tmp_path)
    log = str(p / LOG)
    real_os_open, real_open = os.open, builtins.open

    def deny(path):
        if os.fspath(path) == log:
            raise PermissionError(errno.EACCES, "Permission denied", log)

    def os_open(path, *a, **kw):
        if not isinstance(path, int):
            deny(path)
        return real_os_open(path, *a, **kw)

    def b_open(path, *a, **kw):
        if not isinstance(path, int):
            deny(path)
        return real_open(path, *a, **kw)

    monkeypatch.setattr(os, "open", os_open)
    monkeypatch.setattr(builtins, "open", b_open)
    r = run("dump", str(p / LOG), str(p / "00000000000000000000.timeindex"))
    _assert_the_log_is_named(p, r.code, r.out, r.err)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to another uid")
def test_an_unreadable_log_is_named_as_another_user(world_dir):
    p = _unreadable_log_partition(world_dir)
    warm = ["dump", "--index-sanity-check", str(p)]
    (p / LOG).chmod(0)
    code, out, err = run_as_nobody(["dump", str(p), str(p / "00000000000000000000.timeindex")], warm)
    _assert_the_log_is_named(p, code, out, err)
    # given by name, the unreadable .log is refused before any output, as by the other commands
    code, out, err = run_as_nobody(["dump", str(p / LOG)], warm)
    assert code == 2 and out == "" and f"Path '{p / LOG}' is not readable." in err


# ---------------------------------------------------------------- 4: nothing Kafka, log dirs, unreadable partitions


def test_an_empty_dir_is_refused(run, tmp_path):
    (tmp_path / "empty").mkdir()
    r = run("dump", str(tmp_path / "empty"))
    assert r.code == 2 and r.out == ""
    assert r.err == f"kafkatool: error: {tmp_path}/empty: nothing Kafka here: no segment, index, snapshot or checkpoint files, no partition directories and no log dirs below it\n"


def test_a_dir_of_other_files_is_refused(run, tmp_path):
    d = tmp_path / "etc"
    d.mkdir()
    (d / "passwd").write_text("root:x:0:0\n")
    (d / "rand.log").write_text("x")  # not a segment name: not a Kafka file in a listing
    (d / "dbus-1").mkdir()  # named like a partition dir, but with nothing in it
    (d / "dbus-1" / "system.conf").write_text("x")
    r = run("dump", str(d))
    assert r.code == 2 and r.out == "" and "nothing Kafka here" in r.err


def test_etc_is_refused(run):
    if not os.path.isdir("/etc"):
        pytest.skip("no /etc")
    r = run("dump", "/etc")
    assert r.code == 2 and r.out == "" and "/etc: nothing Kafka here" in r.err


def test_a_dir_of_log_dirs_is_descended(run, tmp_path, part):
    # tmp_path/data/{a,b}: two log dirs; a holds the partition t-0, b a meta.properties
    data = tmp_path / "data"
    (data / "a").mkdir(parents=True)
    (data / "b").mkdir()
    part.rename(data / "a" / "t-0")
    (data / "b" / "meta.properties").write_text("version=0\nbroker.id=1\n")
    r = run("dump", str(data))
    assert r.code == 0
    assert [l for l in r.lines if l.startswith("Dumping")] == [
        f"Dumping {data}/a/t-0/{LOG}", f"Dumping {data}/b/meta.properties"
    ]
    assert r.out.count("baseOffset:") == 3


def test_a_dir_of_empty_log_dirs_is_refused(run, tmp_path):
    (tmp_path / "data" / "a" / "t-0").mkdir(parents=True)
    r = run("dump", str(tmp_path / "data"))
    assert r.code == 2 and "nothing Kafka here" in r.err


def test_an_unreadable_partition_dir_is_reported_and_the_rest_dumped(run, tmp_path, monkeypatch):
    logdir = tmp_path / "logdir"
    logdir.mkdir()
    for name in ("a-0", "b-0", "c-0"):
        (logdir / name).mkdir()
        (logdir / name / LOG).write_bytes(three_batches())
    # b-0 cannot be listed, whichever call lists it (os.listdir or os.scandir)
    for call in ("listdir", "scandir"):
        def refuse(path=".", _real=getattr(os, call)):
            if os.fspath(path) == str(logdir / "b-0"):
                raise PermissionError(13, "Permission denied", os.fspath(path))
            return _real(path)

        monkeypatch.setattr(os, call, refuse)
    r = run("dump", str(logdir))
    assert r.code == 1
    assert [l for l in r.lines if l.startswith("Dumping")] == [f"Dumping {logdir}/a-0/{LOG}", f"Dumping {logdir}/c-0/{LOG}"]
    assert r.err == f"kafkatool: error: {logdir}/b-0: cannot read directory: Permission denied\n"


def test_a_symlink_loop_to_a_dir_above_is_not_followed(run, tmp_path):
    # logdir/a-0/up-0 -> logdir: named like a partition, it leads back above itself. Before
    # issue 10 dump followed it until the path grew too long, dumping every file again at each
    # level; the log dir's files are dumped once.
    logdir = tmp_path / "logdir"
    (logdir / "a-0").mkdir(parents=True)
    (logdir / "a-0" / LOG).write_bytes(three_batches())
    (logdir / "a-0" / "up-0").symlink_to(logdir)
    r = run("dump", str(logdir))
    assert r.code == 0 and r.err == ""
    assert [l for l in r.lines if l.startswith("Dumping")] == [f"Dumping {logdir}/a-0/{LOG}"]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to another uid")
def test_an_unreadable_partition_dir_as_another_user(world_dir):
    logdir = world_dir / "logdir"
    logdir.mkdir()
    logdir.chmod(0o755)
    for name in ("a-0", "b-0"):
        (logdir / name).mkdir()
        (logdir / name).chmod(0o755)
        (logdir / name / LOG).write_bytes(three_batches())
        (logdir / name / LOG).chmod(0o644)
    warm = ["dump", str(logdir)]
    (logdir / "b-0").chmod(0o700)
    code, out, err = run_as_nobody(["dump", str(logdir)], warm)
    assert code == 1
    assert out.count("baseOffset:") == 3 and f"Dumping {logdir}/a-0/{LOG}" in out
    assert err == f"kafkatool: error: {logdir}/b-0: cannot read directory: Permission denied\n"


# ---------------------------------------------------------------- 5: usage errors before any output


@pytest.mark.parametrize("args", [
    ["--start-offset", "10", "--end-offset", "5"],
    ["--start-time", str(T0 + 1), "--end-time", str(T0)],
    ["--start-time", "2024-05-01T12:00:00.001Z", "--end-time", "2024-05-01T12:00:00Z"],
    ["--start-offset", str(1 << 63)],
    ["--end-offset", str(1 << 63)],
    ["--start-offset", "-1"],
    ["--start-time", str(1 << 63)],
    ["--end-time", str(-(1 << 63) - 1)],
    ["--max-message-size", "0"],
    ["--max-message-size", "-1"],
])
def test_usage_errors_before_any_output(run, part, args):
    r = run("dump", *args, str(part / LOG))
    assert r.code == 2, r
    assert r.out == ""
    assert r.err.startswith("Usage: ") or "Error:" in r.err


@pytest.mark.parametrize("args", [
    ["--start-offset", "4", "--end-offset", "4"],
    ["--start-time", str(T0 + 4), "--end-time", str(T0 + 4)],
    ["--end-offset", str((1 << 63) - 1)],
    ["--max-message-size", "1"],
])
def test_the_boundaries_are_accepted(run, part, args):
    r = run("dump", *args, str(part / LOG))
    assert r.code == 0, r
    assert r.lines[0] == f"Dumping {part}/{LOG}"


# ---------------------------------------------------------------- 6: ISO 8601 times


@pytest.mark.parametrize("text,ms", [
    ("2024-05-01T12:00:00Z", 1714564800000),  # 19844 days * 86400 s + 12 h
    ("2024-05-01T12:00:00z", 1714564800000),
    ("2024-05-01T14:00:00+02:00", 1714564800000),
    ("2024-05-01T07:30:00-04:30", 1714564800000),
    ("2024-05-01T12:00:00.250Z", 1714564800250),
    ("2024-05-01T12:00:00.0019Z", 1714564800001),  # below a millisecond: rounded down
    ("2024-05-01T12:00:00", 1714564800000),  # no offset: UTC
    ("2024-05-01", 1714521600000),
    ("1969-12-31T23:59:59.999Z", -1),
    ("1714564800000", 1714564800000),
    ("-1", -1),
])
def test_parse_time(text, ms):
    from kafkatool.cli.dump import parse_time

    assert parse_time(text) == (ms, None)


@pytest.mark.parametrize("value,warned", [
    ("1000000000", False),  # 10^9 itself: not warned (the range is open)
    ("1000000001", True),
    ("1714564800", True),  # 2024-05-01T12:00:00Z in seconds
    ("99999999999", True),
    ("100000000000", False),  # 10^11 ms: 1973, a plausible millisecond value
    ("1714564800000", False),
])
def test_epoch_seconds_are_warned_about(run, part, value, warned):
    r = run("dump", "--start-time", value, str(part / LOG))
    assert r.code == 0
    assert ("looks like epoch seconds" in r.err) is warned
    if value == "1714564800":
        assert r.err.splitlines()[0] == (
            "kafkatool: warning: --start-time 1714564800 looks like epoch seconds (2024-05-01T12:00:00.000Z); "
            "timestamps are epoch milliseconds, so it means 1970-01-20T20:16:04.800Z "
            "(for the former, give 1714564800000 or an ISO 8601 time)"
        )


def test_iso_times_filter_like_milliseconds(run, part):
    # records at T0 .. T0+5 (2023-11-14T22:13:20.000Z ..005Z); keep T0+2 .. T0+3
    r = run("dump", "--deep-iteration", "--start-time", "2023-11-14T23:13:20.002+01:00",
            "--end-time", "2023-11-14T22:13:20.003Z", str(part / LOG))
    assert [int(l.split()[4]) for l in r.lines if l.startswith("| offset:")] == [T0 + 2, T0 + 3]


def test_a_bad_time_is_a_usage_error(run, part):
    r = run("dump", "--start-time", "yesterday", str(part / LOG))
    assert r.code == 2 and "ISO 8601" in r.err and r.out == ""


# ---------------------------------------------------------------- 7: FIFOs and other non-regular files


@pytest.mark.parametrize("name", [LOG, "00000000000000000000.index", "00000000000000000000.timeindex",
                                  "00000000000000000000.snapshot", "00000000000000000000.txnindex",
                                  "leader-epoch-checkpoint", "00000000000000000000-0000000001.checkpoint"])
def test_a_fifo_is_refused_not_read(tmp_path, name):
    d = tmp_path / "t-0"
    d.mkdir()
    if name != LOG:
        (d / LOG).write_bytes(three_batches())
    os.mkfifo(d / name)  # nobody writes to it: reading it would block for ever
    r = kafkatool("dump", str(d / name), timeout=20)
    assert r.returncode == 1
    assert f"kafkatool: error: {d / name}: is a FIFO, not a regular file: refusing to read it" in r.stderr
    # in a directory listing too: reported, not skipped, and the other files still dumped
    r = kafkatool("dump", str(d), timeout=20)
    assert r.returncode == 1 and "is a FIFO" in r.stderr


@pytest.mark.parametrize("side", [".index", ".timeindex"])
def test_a_fifo_index_beside_a_log_does_not_block_a_seek(tmp_path, side):
    d = tmp_path / "t-0"
    d.mkdir()
    (d / LOG).write_bytes(three_batches())
    for other in (".index", ".timeindex"):  # empty indexes pass the sanity check: the seek reads both
        (d / ("00000000000000000000" + other)).write_bytes(b"")
    os.unlink(d / ("00000000000000000000" + side))
    os.mkfifo(d / ("00000000000000000000" + side))
    r = kafkatool("dump", "--deep-iteration", "--start-offset", "2", "--start-time", str(T0), str(d / LOG), timeout=20)
    assert r.returncode == 0  # the index is unusable: the dump scans from the start
    assert [int(l.split()[2]) for l in r.stdout.splitlines() if l.startswith("| offset:")] == [2, 3, 4, 5]


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_a_device_is_refused(tmp_path):
    os.symlink("/dev/zero", tmp_path / LOG)
    r = kafkatool("dump", str(tmp_path / LOG), timeout=20)
    assert r.returncode == 1 and "is a character device, not a regular file" in r.stderr


def test_open_regular_refuses_a_fifo_that_replaced_the_file(tmp_path, monkeypatch):
    """The second guard: a FIFO swapped in between the check and the open is opened
    non-blocking and refused by fstat, never read."""
    from kafkatool import dump as d
    from kafkatool.errors import KafkaToolError

    p = tmp_path / LOG
    os.mkfifo(p)
    monkeypatch.setattr(d, "check_regular", lambda path, why="": None)
    with pytest.raises(KafkaToolError, match="is a FIFO"):
        d.open_regular(str(p))


# ---------------------------------------------------------------- 8: a .timeindex without its .index


def test_timeindex_without_index_prints_its_entries(run, part):
    ti = part / "00000000000000000000.timeindex"
    ti.write_bytes(struct.pack(">qi", T0 + 1, 1) + struct.pack(">qi", T0 + 5, 5))
    r = run("dump", str(ti))
    assert r.code == 0
    assert r.lines == [f"Dumping {ti}", f"timestamp: {T0 + 1} offset: 1", f"timestamp: {T0 + 5} offset: 5"]
    assert r.err == (
        f"kafkatool: warning: {ti}: the offset index {part}/00000000000000000000.index is missing, so the check of "
        "these entries against the offset index and the log was skipped (kafka-dump-log would create an empty one)\n"
    )
    assert not (part / "00000000000000000000.index").exists()


# ---------------------------------------------------------------- 9: a broken pipe


def test_a_broken_pipe_exits_quietly_with_0(tmp_path):
    log = tmp_path / LOG
    # enough output to overflow a pipe buffer many times over
    log.write_bytes(b"".join(kp_v2_batch(i * 10, [(T0 + j, b"k" * 20, b"v" * 200) for j in range(10)]) for i in range(400)))
    script = f"set -o pipefail; {sys.executable} -m kafkatool dump --print-data-log {log} | head -1"
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=REPO)
    assert r.stdout == f"Dumping {log}\n"
    assert r.stderr == ""
    assert r.returncode == 0


# ---------------------------------------------------------------- 10: --format table


def _many_records(path: Path, batches: int = 2000, per_batch: int = 10) -> Path:
    data = b"".join(
        kp_v2_batch(i * per_batch, [(T0 + i * per_batch + j, b"key-%d" % j, b'{"v":%d,"pad":"%s"}' % (j, b"x" * 40)) for j in range(per_batch)])
        for i in range(batches)
    )
    path.write_bytes(data)
    return path


def _best_time(args: list[str], runs: int = 2) -> float:
    """CPU seconds (user + system) of the whole process, start-up included; the best of ``runs``.
    CPU rather than wall time: a loaded machine stretches the wall time of one run and not the other."""
    import resource

    best = None
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        r = subprocess.run([sys.executable, "-m", "kafkatool", *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=REPO, timeout=300)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        assert r.returncode == 0, r.stderr
        used = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        best = used if best is None else min(best, used)
    return best


def test_table_is_at_least_a_quarter_of_the_text_speed(tmp_path):
    log = _many_records(tmp_path / LOG)  # 20,000 records, as the 21k
    for args in (["--print-data-log"], []):
        text = _best_time(["dump", *args, str(log)])
        table = _best_time(["dump", *args, "--format", "table", str(log)])
        # whole process, start-up included; the issue measured 11.7 s against 0.25 s
        assert table <= 4 * text, (args, table, text)


def test_table_streams_rows_while_the_file_is_read(part):
    from kafkatool.dump import DumpOptions, expand_paths, iter_dump
    from kafkatool.render.table import TableRenderer

    log = _many_records(part / LOG, batches=100)
    opts = DumpOptions(deep=True, print_data=True)
    renderer = TableRenderer(opts, color=False)
    out_before_close = 0
    for item in iter_dump(expand_paths([str(log)]), opts):
        text, _err = renderer.render(item)
        out_before_close += len(text)
    tail = renderer.close()
    assert out_before_close > 10 * len(tail)  # rows went out as they came, not at the end
    assert tail.endswith("┘\n")


def test_table_escapes_control_bytes_and_markup(run, tmp_path):
    log = tmp_path / LOG
    key = b"\x1b[2J\x1b[31mred\r\n\x00\x7f"
    value = "[bold]x[/bold] \u202eevil \u65e5\u672c".encode()
    log.write_bytes(kp_v2_batch(0, [(T0, key, value), (T0 + 1, b"k", b"plain")], headers=[("h\n", b"v\x07")]))
    r = run("dump", "--format", "table", "--print-data-log", str(log))
    assert r.code == 0
    assert "\x1b" not in r.out and "\r" not in r.out and "\x00" not in r.out and "\x7f" not in r.out
    assert "\\x1b[2J\\x1b[31mred\\r\\n\\x00\\x7f" in r.out
    assert "[bold]x[/bold] \\u202eevil \u65e5\u672c" in r.out  # markup as written, the bidi override escaped
    assert "h\\n=v\\x07" in r.out
    # every line of the table is as wide as its top border (the CJK characters count 2 columns)
    import unicodedata

    def cols(line):
        return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in line)

    table = [l for l in r.lines if l[:1] in "┏┃┡│└"]
    assert len({cols(l) for l in table}) == 1


def test_table_shows_iso_times_next_to_milliseconds(run, part):
    r = run("dump", "--format", "table", str(part / LOG))
    assert any(f"create {T0 + 1}" in l and "2023-11-14T22:13:20.001Z" in l for l in r.lines)
    r = run("dump", "--format", "table", "--deep-iteration", str(part / LOG))
    assert any(f"│   4 " in l and f"{T0 + 4}" in l and "2023-11-14T22:13:20.004Z" in l for l in r.lines)
    import json

    r = run("dump", "--format", "jsonl", "--deep-iteration", str(part / LOG))
    objs = [json.loads(l) for l in r.lines]
    assert [o["timestamp"] for o in objs if o["type"] == "record"] == [T0 + i for i in range(6)]  # numbers stay


def test_table_folds_only_at_a_terminal_width():
    from kafkatool.dump import DumpOptions, FileHeader, BatchItem
    from kafkatool.render.table import TableRenderer

    from kafkatool.segment.walk import SegmentWalker

    data = kp_v2_batch(0, [(T0, b"k", b"y" * 300)])
    batch, _ = next(iter(SegmentWalker(data)))
    opts = DumpOptions(deep=True, print_data=True)
    from kafkatool.record.records import decode_batch_records

    records = list(decode_batch_records(batch, data))
    for width in (None, 100):
        r = TableRenderer(opts, width=width, color=False)
        text = r.render(FileHeader("x.log", "log", None))[0] + r.render(BatchItem("x.log", batch, records))[0] + r.close()
        widest = max(len(l) for l in text.splitlines())
        if width is None:
            assert "y" * 300 in text  # into a file or pipe: never folded
        else:
            assert widest <= width and text.count("y") - text.count("key") == 300


# ---------------------------------------------------------------- 11: progress bar and -q


def test_progress_bar_on_a_terminal_stderr_when_stdout_is_a_file(tmp_path):
    log = _many_records(tmp_path / LOG, batches=4000)
    code, err = run_with_pty_stderr(["dump", "--print-data-log", str(log)], tmp_path / "out.txt")
    assert code == 0
    assert b"dump" in err and b"\x1b[" in err and "━".encode() in err  # Rich drew a bar
    with_bar = (tmp_path / "out.txt").read_bytes()
    plain = subprocess.run([sys.executable, "-m", "kafkatool", "dump", "--print-data-log", str(log)],
                           capture_output=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}).stdout
    assert with_bar == plain  # the bar never reaches the data
    code, err = run_with_pty_stderr(["dump", "-q", "--print-data-log", str(log)], tmp_path / "out.txt")
    assert code == 0 and err == b""
    code, err = run_with_pty_stderr(["dump", "--quiet", str(log)], tmp_path / "out.txt")
    assert code == 0 and err == b""


# ---------------------------------------------------------------- 12: no Rich unless something is drawn


@pytest.mark.parametrize("fmt", ["text", "jsonl", "table"])
def test_no_rich_import_when_stderr_is_not_a_terminal(tmp_path, fmt):
    log = tmp_path / LOG
    log.write_bytes(three_batches() + b"\x00" * 40)  # a failing file: an error on stderr too
    code = (
        "import sys\n"
        "from kafkatool.cli.main import main\n"
        "try:\n"
        f"    main(['dump', '--format', '{fmt}', '--deep-iteration', {str(log)!r}])\n"
        "except SystemExit as e:\n"
        "    sys.stdout.write('\\nCODE %s RICH %s\\n' % (int(e.code), any(m == 'rich' or m.startswith('rich.') for m in sys.modules)))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                       env={**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "80"})
    assert r.stdout.splitlines()[-1] == "CODE 1 RICH False"
    if fmt == "jsonl":  # errors are JSON objects on stdout there
        assert r.stderr == "" and '"type":"error"' in r.stdout
        return
    line = r.stderr.splitlines()
    assert len(line) == 1 and len(line[0]) > 80  # one long line, not wrapped at 80 columns


# ---------------------------------------------------------------- 13: side-file cosmetics


def test_quorum_state_prints_like_the_other_side_files(run, tmp_path):
    d = tmp_path / "__cluster_metadata-0"
    d.mkdir()
    (d / "quorum-state").write_text(
        '{"clusterId":"","leaderId":1,"leaderEpoch":190,"votedId":-1,"appliedOffset":0,'
        '"currentVoters":[{"voterId":1},{"voterId":2}],"data_version":0}'
    )
    r = run("dump", str(d / "quorum-state"))
    assert r.lines[1] == (
        'clusterId: "" leaderId: 1 leaderEpoch: 190 votedId: -1 appliedOffset: 0 '
        'currentVoters: [{"voterId":1},{"voterId":2}] data_version: 0'
    )


def test_real_quorum_state(run):
    path = real_fixture(QUORUM_STATE)
    r = run("dump", str(path))
    assert r.lines[1].startswith('clusterId: "" leaderId: 1 leaderEpoch: 190 ')
    assert "currentVoters: [{\"voterId\":1},{\"voterId\":2},{\"voterId\":3}]" in r.lines[1]
    assert "'" not in r.out


def test_plain_side_file_values_are_unchanged(run, part):
    (part / "partition.metadata").write_text("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ")
    (part / "leader-epoch-checkpoint").write_text("0\n1\n0 0\n")
    r = run("dump", str(part / "partition.metadata"), str(part / "leader-epoch-checkpoint"))
    assert r.lines[1] == "version: 0 topicId: AAAAAAAAAAAAAAAAAAAAAQ"
    assert r.lines[3] == "epoch: 0 startOffset: 0"


# ---------------------------------------------------------------- 14: the --format vocabulary


def test_format_vocabulary():
    from kafkatool.cli.dump import dump

    fmt = next(p for p in dump.params if p.name == "fmt")
    assert list(fmt.type.choices) == ["text", "jsonl", "table"]
    assert fmt.default == "text"
    quiet = next(p for p in dump.params if p.name == "quiet")
    assert "-q" in quiet.opts and "--quiet" in quiet.opts
