"""``convert --in-place`` through the safety layer (kafkatool/convert/inplace.py, and the ``build``
callback of kafkatool/safety/exchange.py's exchange_partition).

Fixtures: legacy v1 partitions written by kafka-python's LegacyRecordBatchBuilder (an
independent encoder). Until helper B's ``convert_partition_into`` lands, the conversion itself is
a stand-in (:func:`stand_in_convert`) that re-encodes each legacy entry as one v2 batch with
kafka-python's DefaultRecordBatchBuilder and writes the indexes ``kafkatool reindex`` plans for
the new ``.log``: the tests are about what the safety layer promises (lock, backup, exchange,
re-verification, SIGKILL at every step), which does not depend on who converts. The last tests
run the real converter when it is there.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest
from kafka.record import MemoryRecords
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from kafkatool.convert import inplace
from kafkatool.convert.inplace import InPlacePlan, apply_in_place, plan_in_place
from kafkatool.convert.options import ConvertOptions, Loss
from kafkatool.errors import KafkaToolError
from kafkatool.safety import (
    LiveBrokerError,
    NO_EXCHANGE_ENV,
    PartitionRefused,
    RepairError,
    exchange_partition,
    fault_point,
    is_staging_dir,
    reset_fault_count,
    staging_dir_name,
)

sys.path.insert(0, os.path.dirname(__file__))
from test_safety import LockHolder  # noqa: E402

SEG = "{:020d}"
V2 = ConvertOptions(magic=2)
REAL_CONVERT = inplace._convert_into  # the real ones, before the autouse fixture patches the stand-ins in
REAL_ANALYZE = inplace._analyze


# --------------------------------------------------------------------------- fixtures


def legacy_segment(base: int, n: int) -> bytes:
    """``n`` uncompressed v1 messages at offsets base.. (kafka-python's builder, one entry each)."""
    out = bytearray()
    for i in range(n):
        b = LegacyRecordBatchBuilder(magic=1, compression_type=0, batch_size=1 << 20)
        b.append(base + i, 1_600_000_000_000 + base + i, f"k{base + i}".encode(), f"value {base + i}".encode() * 3)
        out += b.build()
    return bytes(out)


def legacy_partition(part: Path | bytes, segments=((0, 5), (5, 4))) -> Path | bytes:
    """A v1 partition dir (two segments, leader-epoch-checkpoint, partition.metadata); modes differ."""
    p = os.fsencode(part)
    os.makedirs(p)
    for base, n in segments:
        with open(os.path.join(p, SEG.format(base).encode() + b".log"), "wb") as f:
            f.write(legacy_segment(base, n))
    with open(os.path.join(p, b"leader-epoch-checkpoint"), "wb") as f:
        f.write(b"0\n1\n0 0\n")
    with open(os.path.join(p, b"partition.metadata"), "wb") as f:
        f.write(b"version: 0\ntopic_id: vGzLUh0aQ6Sd3NCeLYxhgw\n")
    os.chmod(os.path.join(p, SEG.format(0).encode() + b".log"), 0o640)
    return part


def records_of(data: bytes) -> list[tuple[int, int, bytes, bytes]]:
    """(offset, timestamp, key, value) of every record, read with kafka-python."""
    mr = MemoryRecords(bytes(data))
    out = []
    while (batch := mr.next_batch()) is not None:
        out += [(r.offset, r.timestamp, r.key, r.value) for r in batch]
    return out


def stand_in_convert(partition_dir: str, out_dir: str, options: ConvertOptions) -> dict:
    """The conversion, by kafka-python (see the module doc): each legacy entry -> one v2 batch,
    ``.index``/``.timeindex`` as reindex plans them, the two metadata files copied, each file
    with the mode of the file it replaces; a fault point after every file, as a converter has."""
    from kafkatool.reindex import plan_reindex

    assert options.magic == 2 and os.listdir(out_dir) == []
    for n in sorted(os.listdir(partition_dir)):
        src = os.path.join(partition_dir, n)
        if n.endswith(".log"):
            mr = MemoryRecords(open(src, "rb").read())
            out = bytearray()
            while (batch := mr.next_batch()) is not None:
                recs = list(batch)
                b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                              producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
                for r in recs:
                    b.append(r.offset - recs[0].offset, r.timestamp, r.key, r.value, [])
                built = bytearray(b.build())
                struct.pack_into(">q", built, 0, recs[0].offset)  # the base offset: not under the CRC
                out += built
            dst = os.path.join(out_dir, n)
            with open(dst, "wb") as f:
                f.write(out)
            os.chmod(dst, stat.S_IMODE(os.stat(src).st_mode))
            fault_point("after converted segment")
            for c in plan_reindex(dst).changes:  # created: the .log's mode (reindex's rule)
                with open(c.path, "wb") as f:
                    f.write(c.data)
                os.chmod(c.path, stat.S_IMODE(os.stat(src).st_mode))
                fault_point("after converted index")
        elif n in ("leader-epoch-checkpoint", "partition.metadata"):
            with open(src, "rb") as f, open(os.path.join(out_dir, n), "wb") as g:
                g.write(f.read())
            fault_point("after copied file")
    return {"converted": partition_dir}


def stand_in_analyze(partition_dir: str, options: ConvertOptions) -> Loss:
    return Loss()


@pytest.fixture(autouse=True)
def stand_in(monkeypatch):
    """The stand-in converter (unless a test asks for the real one), and no leaked test switches."""
    monkeypatch.setattr(inplace, "_convert_into", stand_in_convert)
    monkeypatch.setattr(inplace, "_analyze", stand_in_analyze)
    monkeypatch.delenv(NO_EXCHANGE_ENV, raising=False)
    monkeypatch.delenv("KAFKATOOL_FAULT_AT", raising=False)


def whole_state(part: Path | bytes) -> dict[bytes, tuple[bytes, int]]:
    """Every entry of a partition dir: name -> (bytes, mode); regular files only."""
    p = os.fsencode(part)
    out = {}
    for n in sorted(os.listdir(p)):
        st = os.lstat(os.path.join(p, n))
        assert stat.S_ISREG(st.st_mode), n
        with open(os.path.join(p, n), "rb") as f:
            out[n] = (f.read(), stat.S_IMODE(st.st_mode))
    return out


def other_dirs(part: Path | bytes) -> list[bytes]:
    p = os.fsencode(part)
    parent = os.path.dirname(p)
    return sorted(n for n in os.listdir(parent) if os.path.isdir(os.path.join(parent, n))
                  and os.path.join(parent, n) != p)


def reference_new_state(tmp_path: Path, convert=stand_in_convert) -> dict[bytes, tuple[bytes, int]]:
    """The new state, made without the safety layer: the converter run into an empty dir."""
    src = legacy_partition(tmp_path / "refsrc" / "t-0")
    out = tmp_path / "refout"
    out.mkdir()
    convert(str(src), str(out), V2)
    return whole_state(out)


def run_forked(fn, fault_at: int | None = None, *, interrupt: bool = False) -> tuple[int, str]:
    """Run ``fn()`` in a forked child (the stand-in patched in, as in this process); ``fault_at``
    arms the SIGKILL at that write step (``interrupt``: a SIGINT, a Ctrl-C, instead). Returns
    (exit status or -signal, error text); 3 is a KafkaToolError, 4 anything else."""
    err = tempfile.TemporaryFile()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.environ.pop("KAFKATOOL_FAULT_AT", None)
            if fault_at is not None:
                os.environ["KAFKATOOL_FAULT_AT"] = str(fault_at)
            reset_fault_count()
            if interrupt:
                real_kill = os.kill
                signal.signal(signal.SIGINT, signal.default_int_handler)
                os.kill = lambda p, sig: real_kill(p, signal.SIGINT if sig == signal.SIGKILL else sig)
            fn()
        except BaseException as e:  # noqa: BLE001 - reported to the parent
            err.write(f"{type(e).__name__}: {e}".encode("utf-8", "surrogateescape"))
            err.flush()
            code = 3 if isinstance(e, KafkaToolError) else 4
        finally:
            os._exit(code)
    _pid, status = os.waitpid(pid, 0)
    err.seek(0)
    text = err.read().decode("utf-8", "surrogateescape")
    return (-os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)), text


def convert_in_place(target, backup: Path, options: ConvertOptions = V2) -> list:
    plans = plan_in_place([os.fsdecode(target)], options)
    return apply_in_place(plans, str(backup))


def restore(backup: Path) -> None:
    from kafkatool.restore import apply_restore, plan_restore

    plan = plan_restore(str(backup))
    assert not plan.problems, plan.problems
    apply_restore(plan)


# --------------------------------------------------------------------------- plan


def test_plan_reads_only_and_names_every_file(tmp_path: Path) -> None:
    part = legacy_partition(tmp_path / "logdir" / "t-0")
    before = whole_state(part)
    (plan,) = plan_in_place([str(part)], V2)
    assert plan.converts and plan.needs_changes and plan.refused is None and not plan.already
    assert [f.name for f in plan.files] == sorted(n.decode() for n in before)
    assert plan.segments == 2 and plan.bytes_in == sum(len(before[n][0]) for n in before if n.endswith(b".log"))
    assert whole_state(part) == before and other_dirs(part) == []
    # the log dir: each partition, staging dirs of kafkatool left out (reported by their partition)
    legacy_partition(tmp_path / "logdir" / "u-3")
    staging = tmp_path / "logdir" / staging_dir_name(str(part))
    staging.mkdir()
    plans = plan_in_place([str(tmp_path / "logdir")], V2)
    assert [os.path.basename(p.partition_dir) for p in plans] == ["t-0", "u-3"]
    assert plans[0].staging_leftovers == (str(staging),) and plans[1].staging_leftovers == ()


def test_apply_switches_keeps_a_backup_restore_gives_back_the_old_state_and_a_second_run_is_a_no_op(
        tmp_path: Path) -> None:
    part = legacy_partition(tmp_path / "logdir" / "t-0")
    (part / "00000000000000000005.snapshot").write_bytes(b"a snapshot the stand-in drops")
    old = whole_state(part)
    new = reference_new_state(tmp_path)
    assert new != old
    (report,) = convert_in_place(part, tmp_path / "bk")
    assert report.verified and report.method == "exchange" and report.backup_dir == str(tmp_path / "bk")
    assert whole_state(part) == new and other_dirs(part) == []
    assert set(report.written) == {n.decode() for n in new} and report.removed == ("00000000000000000005.snapshot",)
    # offsets, timestamps, keys and values kept (read with kafka-python on both sides)
    for n in (b"00000000000000000000.log", b"00000000000000000005.log"):
        assert records_of(whole_state(part)[n][0]) == records_of(old[n][0])
    # every old file whole in the backup, byte for byte, with its mode
    manifest = json.loads((tmp_path / "bk" / "MANIFEST.json").read_text())
    saved = {e["path"]: e for e in manifest["files"]}
    for n, (data, mode) in old.items():
        e = saved[f"t-0/{n.decode()}"]
        assert e["action"] == ("removed" if n.endswith(b".snapshot") else "rewritten")
        copy = tmp_path / "bk" / e["backupFile"]
        assert copy.read_bytes() == data and stat.S_IMODE(copy.stat().st_mode) == mode
    created = {p for p, e in saved.items() if e["action"] == "created"}
    assert created == {f"t-0/{n.decode()}" for n in new if n not in old}  # the new indexes
    assert (tmp_path / "bk" / "RESTORE.txt").exists()
    # a second run: every batch at the target already, nothing planned, nothing written
    (again,) = plan_in_place([str(part)], V2)
    assert again.already and not again.needs_changes and again.loss is None
    assert apply_in_place([again], str(tmp_path / "bk2")) == [] and not (tmp_path / "bk2").exists()
    assert whole_state(part) == new
    # the restore round trip: exactly the old state again
    restore(tmp_path / "bk")
    assert whole_state(part) == old


def test_a_codec_change_is_not_already_converted(tmp_path: Path) -> None:
    part = legacy_partition(tmp_path / "logdir" / "t-0")
    convert_in_place(part, tmp_path / "bk")
    assert plan_in_place([str(part)], ConvertOptions(magic=2, codec=0))[0].already
    assert plan_in_place([str(part)], ConvertOptions(magic=2, codec=1))[0].converts  # gzip asked: v2 none is not it
    assert plan_in_place([str(part)], ConvertOptions(magic=1))[0].converts


# --------------------------------------------------------------------------- refusals


def _refused(part, kind: str, options: ConvertOptions = V2, **kw) -> InPlacePlan:
    (plan,) = plan_in_place([os.fsdecode(part)], options, **kw)
    assert plan.refused_kind == kind, plan
    assert not plan.needs_changes and not plan.converts
    return plan


def test_a_broker_holding_the_lock_refuses_before_anything_is_written(tmp_path: Path) -> None:
    part = legacy_partition(tmp_path / "logdir" / "t-0")
    old = whole_state(part)
    plans = plan_in_place([str(part)], V2)
    with LockHolder(tmp_path / "logdir" / ".lock"):
        with pytest.raises(LiveBrokerError):
            apply_in_place(plans, str(tmp_path / "bk"))
    assert whole_state(part) == old and other_dirs(part) == [] and not (tmp_path / "bk").exists()


def test_a_symlinked_log_dir_locks_and_switches_the_real_one(tmp_path: Path) -> None:
    real = tmp_path / "real"
    part = legacy_partition(real / "t-0")
    old = whole_state(part)
    (tmp_path / "link").symlink_to(real)
    via = tmp_path / "link" / "t-0"
    plans = plan_in_place([str(via)], V2)
    assert plans[0].partition_dir == str(part)
    with LockHolder(real / ".lock"):  # the broker holds the real log dir's lock
        with pytest.raises(LiveBrokerError):
            apply_in_place(plans, str(tmp_path / "bk"))
    assert whole_state(part) == old
    (report,) = apply_in_place(plans, str(tmp_path / "bk"))
    assert report.verified and whole_state(part) == reference_new_state(tmp_path)
    assert (tmp_path / "link").is_symlink() and not (tmp_path / "link" / ".lock").is_symlink()
    assert other_dirs(part) == []
    # a symlinked partition dir too: the real dir is switched, the link stays a link
    part2 = legacy_partition(real / "u-1")
    (tmp_path / "plink-0").symlink_to(part2)
    (plan2,) = plan_in_place([str(tmp_path / "plink-0")], V2)
    assert plan2.partition_dir == str(part2) and plan2.converts
    apply_in_place([plan2], str(tmp_path / "bk"))
    assert (tmp_path / "plink-0").is_symlink() and whole_state(part2) == reference_new_state(tmp_path / "r2")


def test_a_non_utf8_partition_path_converts_and_restores(tmp_path: Path) -> None:
    logdir = os.path.join(os.fsencode(tmp_path), b"logdir\xff")
    part = os.path.join(logdir, b"t\xfe\xff-0")
    legacy_partition(part)
    old = whole_state(part)
    (report,) = convert_in_place(part, tmp_path / "bk")
    assert report.verified and whole_state(part) == reference_new_state(tmp_path) and other_dirs(part) == []
    restore(tmp_path / "bk")
    assert whole_state(part) == old


@pytest.mark.skipif(os.geteuid() != 0 or not sys.platform.startswith("linux"), reason="needs root to mount a tmpfs")
def test_a_read_only_file_system_is_an_error_and_nothing_changes(tmp_path: Path) -> None:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "none", str(mnt)], capture_output=True).returncode:
        pytest.skip("mount -t tmpfs is not permitted here")
    try:
        part = legacy_partition(mnt / "t-0")
        (mnt / ".lock").touch()
        old = whole_state(part)
        subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
        plans = plan_in_place([str(part)], V2)
        assert plans[0].converts  # planning reads only
        with pytest.raises(KafkaToolError) as e:
            apply_in_place(plans, str(tmp_path / "bk"))
        assert "Read-only file system" in str(e.value) and str(mnt) in str(e.value)
        assert whole_state(part) == old and other_dirs(part) == []
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_a_read_only_log_dir_for_the_running_user_changes_nothing(tmp_path: Path) -> None:
    # the staging dir cannot be made: an error naming the log dir, the old state untouched (as nobody)
    if os.geteuid() != 0:
        pytest.skip("needs root to run as another user")
    import shutil

    top = Path(tempfile.mkdtemp(prefix="kafkatool-ro-", dir="/tmp"))  # pytest's tmp dirs are 0700 root
    try:
        top.chmod(0o755)
        logdir = top / "logdir"
        part = legacy_partition(logdir / "t-0")
        (logdir / ".lock").touch()
        bk = top / "bk"
        bk.mkdir()
        for p in [bk, logdir, part, *part.iterdir(), logdir / ".lock"]:
            os.chown(p, 65534, 65534)
        logdir.chmod(0o555)
        old = whole_state(part)
        plans = plan_in_place([str(part)], V2)

        def as_nobody() -> None:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            apply_in_place(plans, str(bk))

        code, err = run_forked(as_nobody)
        assert code == 3 and "Permission denied" in err and str(logdir) in err and "nothing changed" in err, err
        assert ".lock" not in err, err  # the lock was taken: the staging dir is what failed
        assert whole_state(part) == old and other_dirs(part) == []
        assert not any(bk.iterdir())  # no backup written either
    finally:
        (top / "logdir").chmod(0o755)
        shutil.rmtree(top)


def test_hostile_side_files_are_refused_never_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    part = legacy_partition(tmp_path / "a" / "t-0")
    (part / f"{SEG.format(0)}.index").symlink_to(victim)
    plan = _refused(part, "not_regular")
    assert "symbolic link" in plan.refused and "00000000000000000000.index" in plan.refused
    assert apply_in_place([plan], str(tmp_path / "bk")) == []
    assert victim.read_bytes() == b"precious" and (part / f"{SEG.format(0)}.index").is_symlink()
    # a FIFO named like a segment file: refused at once (never opened: opening it would block)
    part = legacy_partition(tmp_path / "b" / "t-0")
    os.mkfifo(part / f"{SEG.format(5)}.timeindex")
    done: list = []
    t = threading.Thread(target=lambda: done.append(plan_in_place([str(part)], V2)), daemon=True)
    t.start()
    t.join(20)
    assert done and done[0][0].refused_kind == "not_regular" and "FIFO" in done[0][0].refused
    # a symlink named like the .log itself: refused, its target never read
    part = legacy_partition(tmp_path / "c" / "t-0")
    os.unlink(part / f"{SEG.format(5)}.log")
    (part / f"{SEG.format(5)}.log").symlink_to(victim)
    _refused(part, "not_regular")
    # a file no partition holds: never deleted
    part = legacy_partition(tmp_path / "d" / "t-0")
    (part / "notes.txt").write_text("mine")
    assert "notes.txt" in _refused(part, "unknown_file").refused
    part = legacy_partition(tmp_path / "e" / "t-0")
    (part / "sub").mkdir()
    _refused(part, "not_regular")


@pytest.mark.parametrize("leftover", [
    "kafkatool-truncate.kafkatool-journal", "00000000000000000000.kafkatool-journal",
    "00000000000000000000.index.kafkatool-tmp", "00000000000000000005.log.swap",
    "00000000000000000005.log.cleaned", "00000000000000000000.log.deleted",
])
def test_pending_state_of_other_commands_and_of_the_broker_is_refused(tmp_path: Path, leftover: str) -> None:
    part = legacy_partition(tmp_path / "logdir" / "t-0")
    (part / leftover).write_bytes(b"{}")
    old = whole_state(part)
    plan = _refused(part, "pending_kafka" if leftover.endswith((".swap", ".cleaned", ".deleted")) else "pending")
    assert leftover in plan.refused
    assert apply_in_place([plan], str(tmp_path / "bk")) == []
    assert whole_state(part) == old
    # pending state appearing between the plan and the lock: refused under the lock
    part2 = legacy_partition(tmp_path / "logdir2" / "u-0")
    plans = plan_in_place([str(part2)], V2)
    (part2 / leftover).write_bytes(b"{}")
    refused: list = []
    assert apply_in_place(plans, str(tmp_path / "bk"), on_refused=lambda ps, e: refused.append(e)) == []
    assert len(refused) == 1 and isinstance(refused[0], PartitionRefused)
    assert other_dirs(part2) == [] and not (part2 / "00000000000000000000.index").exists()


@pytest.mark.parametrize("state", ["delete", "future", "stray"])
def test_transitional_dirs_are_refused_unless_asked(tmp_path: Path, state: str) -> None:
    uid = "0123456789abcdef0123456789abcdef"
    name = f"t-0.{uid}-{state}" if state != "future" else f"t-0.{uid}-future"
    part = legacy_partition(tmp_path / "logdir" / name)
    plan = _refused(part, "transitional")
    assert f"-{state}" in plan.refused
    (plan,) = plan_in_place([str(part)], V2, allow_transitional=True)
    assert plan.converts


def test_a_partition_changed_since_its_plan_is_refused(tmp_path: Path) -> None:
    part = legacy_partition(tmp_path / "logdir" / "t-0")
    plans = plan_in_place([str(part)], V2)
    with open(part / f"{SEG.format(5)}.log", "ab") as f:  # a broker appended
        f.write(legacy_segment(9, 1))
    old = whole_state(part)
    with pytest.raises(PartitionRefused, match="changed since it was planned"):
        apply_in_place(plans, str(tmp_path / "bk"))
    assert whole_state(part) == old and other_dirs(part) == []


def test_without_the_exchange_in_place_is_refused_naming_why(tmp_path: Path, monkeypatch) -> None:
    part = legacy_partition(tmp_path / "logdir" / "t-0")
    old = whole_state(part)
    plans = plan_in_place([str(part)], V2)
    monkeypatch.setenv(NO_EXCHANGE_ENV, "1")
    plan = _refused(part, "no_exchange")
    assert NO_EXCHANGE_ENV in plan.refused and "convert SRC DEST" in plan.refused
    with pytest.raises(PartitionRefused) as e:  # planned while it was there, gone by the apply
        apply_in_place(plans, str(tmp_path / "bk"))
    assert e.value.kind == "no_exchange" and NO_EXCHANGE_ENV in str(e.value)
    assert whole_state(part) == old and other_dirs(part) == []
    assert not any((part / n).exists() for n in os.listdir(part) if n.endswith(".kafkatool-journal"))


def test_a_converted_segment_failing_verify_is_never_switched_in(tmp_path: Path, monkeypatch) -> None:
    part = legacy_partition(tmp_path / "logdir" / "t-0")
    old = whole_state(part)

    def broken(partition_dir: str, out_dir: str, options: ConvertOptions) -> dict:
        stand_in_convert(partition_dir, out_dir, options)
        p = os.path.join(out_dir, f"{SEG.format(5)}.log")
        data = bytearray(open(p, "rb").read())
        data[-3] ^= 0x55  # inside the last batch's records: its CRC fails
        open(p, "wb").write(data)
        return {}

    monkeypatch.setattr(inplace, "_convert_into", broken)
    with pytest.raises(RepairError, match="fails verify --deep.*nothing changed"):
        convert_in_place(part, tmp_path / "bk")
    assert whole_state(part) == old and other_dirs(part) == []


def test_a_strict_plan_with_a_loss_is_refused(tmp_path: Path, monkeypatch) -> None:
    part = legacy_partition(tmp_path / "logdir" / "t-0")
    monkeypatch.setattr(inplace, "_analyze", lambda d, o: Loss(timestamps_dropped=9))
    plan = _refused(part, "strict", ConvertOptions(magic=0, strict=True))
    assert plan.loss.timestamps_dropped == 9
    (plan,) = plan_in_place([str(part)], ConvertOptions(magic=0))
    assert plan.converts and plan.loss.timestamps_dropped == 9


# --------------------------------------------------------------------------- concurrency and crashes


def test_two_runs_at_once_end_in_one_clean_state(tmp_path: Path) -> None:
    new = reference_new_state(tmp_path)
    for i in range(3):
        part = legacy_partition(tmp_path / f"logdir{i}" / "t-0")
        old = whole_state(part)
        r, w = os.pipe()

        def both(k: int) -> None:
            os.read(r, 1)  # both start together
            convert_in_place(part, tmp_path / f"bk{i}-{k}")

        pids = []
        results: list = []
        threads = [threading.Thread(target=lambda k=k: results.append(run_forked(lambda: both(k)))) for k in (0, 1)]
        for t in threads:
            t.start()
        os.write(w, b"xx")
        for t in threads:
            t.join(60)
        os.close(r)
        os.close(w)
        assert len(results) == 2 and all(code in (0, 3) for code, _ in results), results
        assert any(code == 0 for code, _ in results), results
        for code, err in results:  # the other one: the lock is held, or the partition changed under it
            assert code == 0 or "lock" in err or "changed since it was planned" in err, err
        assert whole_state(part) == new and other_dirs(part) == [], (i, results)
        del pids, old


@pytest.mark.parametrize("converter", ["stand-in", "real"])
def test_sigkill_at_every_step_leaves_exactly_old_or_new_and_a_rerun_completes(tmp_path: Path, monkeypatch,
                                                                               converter: str) -> None:
    if converter == "real":
        _real_converter()
        monkeypatch.setattr(inplace, "_convert_into", REAL_CONVERT)
        monkeypatch.setattr(inplace, "_analyze", REAL_ANALYZE)
    new = reference_new_state(tmp_path, inplace._convert_into)
    seen: dict = {}
    n = 0
    while True:
        n += 1
        part = legacy_partition(tmp_path / f"run{n}" / "t-0")
        old = whole_state(part)
        bk, bk2 = tmp_path / f"bk{n}", tmp_path / f"bk{n}-again"
        code, err = run_forked(lambda: convert_in_place(part, bk), fault_at=n)
        if code == 0:
            break
        assert code == -signal.SIGKILL, (n, code, err)
        now = whole_state(part)
        assert now == old or now == new, f"step {n}: the partition dir is a mix of old and new"
        staging = other_dirs(part)
        assert staging in ([], [staging_dir_name(str(part)).encode()]), (n, staging)
        assert all(is_staging_dir(os.path.join(os.path.dirname(str(part)), s.decode())) for s in staging)
        seen[("new" if now == new else "old", bool(staging))] = seen.get(("new" if now == new else "old",
                                                                         bool(staging)), 0) + 1
        if staging:  # the plan names the leftover and reads only
            (dry,) = plan_in_place([str(part)], V2)
            assert dry.staging_leftovers and dry.needs_changes and whole_state(part) == now
        reports = convert_in_place(part, bk2)
        if now == old:
            (report,) = reports
            assert report.verified and report.method == "exchange", n
        elif staging:  # converted already: the rerun only removes the staging dir, and backs up nothing
            (report,) = reports
            assert report.method is None and report.removed_leftovers == (os.path.join(
                os.path.dirname(str(part)), staging[0].decode()),) and not bk2.exists(), n
        else:
            assert reports == [] and not bk2.exists(), n
        assert whole_state(part) == new and other_dirs(part) == [], n
        assert plan_in_place([str(part)], V2)[0].already
        # the backup of the run that switched restores the old state byte for byte (modes too)
        restore(bk if now == new else bk2)
        assert whole_state(part) == old, n
    assert whole_state(part) == new and other_dirs(part) == []
    assert n > 15, n  # every step of staging, backup, switch and clean-up was a kill point
    assert ("old", True) in seen and ("new", True) in seen and ("new", False) in seen, seen


# --------------------------------------------------------------------------- exchange_partition's build


def test_exchange_build_writes_straight_into_staging_and_checks_what_it_left(tmp_path: Path) -> None:
    part = tmp_path / "logdir" / "t-0"
    part.mkdir(parents=True)
    (part / "00000000000000000000.log").write_bytes(b"old log")
    (part / "leader-epoch-checkpoint").write_bytes(b"0\n0\n")
    seen_empty = []

    def build(staging: str) -> list[str]:
        seen_empty.append(os.listdir(staging))
        Path(staging, "00000000000000000000.log").write_bytes(b"new log")
        return ["00000000000000000000.log"]

    exchange_partition(str(part), build=build)  # keep_unbuilt: the checkpoint stays
    assert seen_empty == [[]]
    assert {p.name: p.read_bytes() for p in part.iterdir()} == {
        "00000000000000000000.log": b"new log", "leader-epoch-checkpoint": b"0\n0\n"}
    exchange_partition(str(part), build=build, keep_unbuilt=False)  # only what was built
    assert {p.name: p.read_bytes() for p in part.iterdir()} == {"00000000000000000000.log": b"new log"}

    def sloppy(extra: str, named: list[str]):
        def build(staging: str) -> list[str]:
            Path(staging, "00000000000000000000.log").write_bytes(b"newer")
            if extra == "link":
                os.symlink("/etc/passwd", os.path.join(staging, "00000000000000000000.index"))
            elif extra:
                Path(staging, extra).write_bytes(b"x")
            return named
        return build

    for build_fn, match in (
        (sloppy("00000000000000000000.log.kafkatool-tmp", ["00000000000000000000.log"]), "did not name"),
        (sloppy("", ["00000000000000000000.log", "00000000000000000000.index"]), "lacks"),
        (sloppy("link", ["00000000000000000000.log", "00000000000000000000.index"]), "symbolic link"),
        (sloppy("", ["../escape"]), "not a file name"),
        (sloppy("", ["00000000000000000000.log", "00000000000000000000.log"]), "twice"),
    ):
        with pytest.raises(RepairError, match=match):
            exchange_partition(str(part), build=build_fn, keep_unbuilt=False)
        assert {p.name: p.read_bytes() for p in part.iterdir()} == {"00000000000000000000.log": b"new log"}
        assert sorted(os.listdir(part.parent)) == ["t-0"]  # the partial staging dir removed
    with pytest.raises(RepairError, match="also written"):
        exchange_partition(str(part), build=sloppy("", ["00000000000000000000.log"]),
                           write={"00000000000000000000.log": b"w"})


def test_exchange_build_errors_before_the_backup_leave_the_old_state(tmp_path: Path) -> None:
    part = tmp_path / "logdir" / "t-0"
    part.mkdir(parents=True)
    (part / "00000000000000000000.log").write_bytes(b"old log")
    called = []

    def full_disk(staging: str) -> list[str]:
        Path(staging, "00000000000000000000.log").write_bytes(b"half")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with pytest.raises(RepairError, match="No space left on device.*nothing changed"):
        exchange_partition(str(part), build=full_disk, before_switch=lambda: called.append(1))
    assert called == [] and (part / "00000000000000000000.log").read_bytes() == b"old log"
    assert sorted(os.listdir(part.parent)) == ["t-0"]


# --------------------------------------------------------------------------- the real converter


def _real_converter() -> None:
    try:
        import kafkatool.convert.tree  # noqa: F401
    except ImportError:
        pytest.skip("kafkatool.convert.tree (helper B) is not there yet")


def test_real_converter_in_place_v1_to_v2_and_back(tmp_path: Path, monkeypatch) -> None:
    _real_converter()
    monkeypatch.setattr(inplace, "_convert_into", REAL_CONVERT)
    monkeypatch.setattr(inplace, "_analyze", REAL_ANALYZE)
    part = legacy_partition(tmp_path / "logdir" / "t-0")
    old = whole_state(part)
    (report,) = convert_in_place(part, tmp_path / "bk")
    assert report.verified
    now = whole_state(part)
    for n in (b"00000000000000000000.log", b"00000000000000000005.log"):
        assert now[n][0][16] == 2  # magic 2
        assert records_of(now[n][0]) == records_of(old[n][0])
    assert plan_in_place([str(part)], V2)[0].already
    (back,) = convert_in_place(part, tmp_path / "bk2", ConvertOptions(magic=1))
    assert back.verified
    for n in (b"00000000000000000000.log", b"00000000000000000005.log"):
        assert records_of(whole_state(part)[n][0]) == records_of(old[n][0])
    restore(tmp_path / "bk2")
    restore(tmp_path / "bk")
    assert whole_state(part) == old




def test_rename_noreplace_never_replaces_even_an_empty_dir(tmp_path: Path) -> None:
    from kafkatool.safety import rename_noreplace

    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    (src / "f").write_bytes(b"x")
    dst.mkdir()
    with pytest.raises(OSError) as e:
        rename_noreplace(str(src), str(dst))
    assert e.value.errno == errno.EEXIST and (src / "f").exists() and list(dst.iterdir()) == []
    dst.rmdir()
    rename_noreplace(str(src), str(dst))
    assert (dst / "f").read_bytes() == b"x" and not src.exists()
    with pytest.raises(FileNotFoundError):
        rename_noreplace(str(src), str(tmp_path / "other"))


def test_the_partition_dir_is_hashed_again_after_the_switch(tmp_path: Path, monkeypatch) -> None:
    # something changing a new file right after the switch (a disk, a stray writer) is found
    part = legacy_partition(tmp_path / "logdir" / "t-0")
    real = inplace.exchange_partition

    def then_damage(directory: str, **kw) -> None:
        real(directory, **kw)
        with open(os.path.join(directory, f"{SEG.format(5)}.index"), "ab") as f:
            f.write(b"\0" * 8)

    monkeypatch.setattr(inplace, "exchange_partition", then_damage)
    with pytest.raises(RepairError, match="re-verification failed") as e:
        convert_in_place(part, tmp_path / "bk")
    assert f"{SEG.format(5)}.index" in str(e.value)


def test_the_cli_passes_reindexs_sigkill_test(tmp_path: Path, monkeypatch) -> None:
    # the promise tests/crash_helpers.py checks for reindex and truncate, through the CLI (in a
    # forked child, as there): `kafkatool convert --in-place --execute` killed at every step, the
    # strict old-or-new state after each kill, the dry run naming a leftover, a rerun, the restore
    _real_converter()
    from crash_helpers import kafkatool

    monkeypatch.setattr(inplace, "_convert_into", REAL_CONVERT)
    monkeypatch.setattr(inplace, "_analyze", REAL_ANALYZE)
    cmd = ["convert", "--to-magic", "2", "--in-place", "--no-progress"]
    ref = legacy_partition(tmp_path / "ref" / "t-0")
    old = whole_state(ref)
    r = kafkatool(*cmd, "--execute", "--format", "jsonl", "--backup-dir", str(tmp_path / "ref-bk"), str(ref))
    assert r.returncode == 0, r
    new = whole_state(ref)
    assert new != old and other_dirs(ref) == []
    assert kafkatool(*cmd, str(ref)).returncode == 0  # converted already: nothing to change
    seen: set = set()
    n = 0
    while True:
        n += 1
        part = legacy_partition(tmp_path / f"run{n}" / "t-0")
        bk, bk2 = tmp_path / f"bk{n}", tmp_path / f"bk{n}-again"
        p = kafkatool(*cmd, "--execute", "--backup-dir", str(bk), str(part), fault_at=n)
        if p.returncode == 0:
            break
        assert p.returncode == -signal.SIGKILL, (n, p)
        now = whole_state(part)
        assert now == old or now == new, f"step {n}: the partition dir is neither the old state nor the new one"
        staging = other_dirs(part)
        assert staging in ([], [staging_dir_name(str(part)).encode()]), (n, staging)
        seen.add(("new" if now == new else "old", bool(staging)))
        if staging:
            dry = kafkatool(*cmd, str(part))
            assert dry.returncode == 1 and staging[0].decode() in dry.stdout, (n, dry)
            assert whole_state(part) == now and other_dirs(part) == staging
        again = kafkatool(*cmd, "--execute", "--backup-dir", str(bk2), str(part))
        assert again.returncode == 0, (n, again)
        assert whole_state(part) == new and other_dirs(part) == [], n
        assert kafkatool(*cmd, str(part)).returncode == 0, n
        restore(bk if now == new else bk2)
        assert whole_state(part) == old, n
    assert whole_state(part) == new and other_dirs(part) == []
    assert n > 15 and {("old", True), ("new", True), ("new", False)} <= seen, (n, seen)


def v2_segment(base: int, n: int) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i in range(n):
        b.append(i, 1_600_000_000_000 + i, None, f"metadata record {base + i}".encode() * 4, [])
    built = bytearray(b.build())
    struct.pack_into(">q", built, 0, base)
    return bytes(built)


def test_the_metadata_log_converts_at_v2_only_with_its_snapshots_and_quorum_state(tmp_path: Path, monkeypatch) -> None:
    part = tmp_path / "logdir" / "__cluster_metadata-0"
    part.mkdir(parents=True)
    (part / f"{SEG.format(0)}.log").write_bytes(v2_segment(0, 3))
    snapshot = f"{SEG.format(3)}-{0:010d}.checkpoint"
    (part / snapshot).write_bytes(v2_segment(0, 2))
    (part / "quorum-state").write_bytes(b'{"leaderId":1,"leaderEpoch":0,"data_version":0}')
    assert "below magic 2" in _refused(part, "metadata", ConvertOptions(magic=1)).refused
    # a KRaft snapshot anywhere else is no file of a partition: refused, never removed
    other = legacy_partition(tmp_path / "logdir2" / "t-0")
    (other / snapshot).write_bytes(b"x")
    _refused(other, "unknown_file")
    _real_converter()
    monkeypatch.setattr(inplace, "_convert_into", REAL_CONVERT)
    monkeypatch.setattr(inplace, "_analyze", REAL_ANALYZE)
    old = whole_state(part)
    gzip = ConvertOptions(magic=2, codec=1)
    (report,) = convert_in_place(part, tmp_path / "bk", gzip)
    now = whole_state(part)
    assert report.verified and now[snapshot.encode()] == old[snapshot.encode()]
    assert now[b"quorum-state"] == old[b"quorum-state"]
    log = now[f"{SEG.format(0)}.log".encode()][0]
    assert log != old[f"{SEG.format(0)}.log".encode()][0] and records_of(log) == records_of(
        old[f"{SEG.format(0)}.log".encode()][0])
    assert plan_in_place([str(part)], gzip)[0].already
    restore(tmp_path / "bk")
    assert whole_state(part) == old


def test_a_backup_dir_inside_the_log_dir_is_refused_and_an_earlier_backup_is_never_overwritten(
        tmp_path: Path) -> None:
    from kafkatool.safety import BackupLocationError

    part = legacy_partition(tmp_path / "logdir" / "t-0")
    old = whole_state(part)
    for inside in (tmp_path / "logdir" / "bk", part / "bk", tmp_path / "logdir"):
        with pytest.raises(BackupLocationError):
            convert_in_place(part, inside)
        assert whole_state(part) == old and other_dirs(part) == []
    bk = tmp_path / "bk"
    convert_in_place(part, bk)
    first = {p.relative_to(bk): p.read_bytes() for p in (bk / "t-0").iterdir()}
    restore(bk)
    assert whole_state(part) == old
    convert_in_place(part, bk)  # the same backup dir again: new names beside the first run's files
    after = {p.relative_to(bk): p.read_bytes() for p in (bk / "t-0").iterdir()}
    assert all(after[k] == v for k, v in first.items()) and len(after) == 2 * len(first)
    restore(bk)
    assert whole_state(part) == old


def test_a_damaged_segment_is_refused_with_the_located_error_by_the_real_analysis(tmp_path: Path,
                                                                                  monkeypatch) -> None:
    _real_converter()
    monkeypatch.setattr(inplace, "_analyze", REAL_ANALYZE)
    part = legacy_partition(tmp_path / "logdir" / "t-0")
    log = part / f"{SEG.format(5)}.log"
    data = bytearray(log.read_bytes())
    data[-1] ^= 0xFF  # the last message's value: its CRC fails
    log.write_bytes(data)
    plan = _refused(part, "damaged")
    assert str(log) in plan.refused
    # damage the analysis might not see (an offset field, outside a legacy message's CRC): the
    # conversion itself stops inside the staging dir, and nothing changes
    part2 = legacy_partition(tmp_path / "logdir3" / "t-0")
    log2 = part2 / f"{SEG.format(5)}.log"
    data = bytearray(log2.read_bytes())
    data[114] ^= 0xFF  # the first byte of the third message's offset (57-byte messages)
    log2.write_bytes(data)
    old = whole_state(part2)
    (plan2,) = plan_in_place([str(part2)], V2)
    if plan2.refused is None:
        monkeypatch.setattr(inplace, "_convert_into", REAL_CONVERT)
        with pytest.raises(KafkaToolError) as e:
            apply_in_place([plan2], str(tmp_path / "bk"))
        assert str(log2) in str(e.value)
    assert whole_state(part2) == old and other_dirs(part2) == []
    (plan,) = plan_in_place([str(part)], ConvertOptions(magic=2, skip_damaged=True))
    assert plan.converts and plan.loss.damaged_count == 1
    assert "zstd" in _refused(legacy_partition(tmp_path / "l2" / "t-0"), "refused",
                              ConvertOptions(magic=1, codec=4)).refused.lower()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give files another owner")
@pytest.mark.parametrize("converter", ["stand-in", "real"])
def test_owner_and_mode_are_kept_in_the_new_state_and_in_the_backup(tmp_path: Path, monkeypatch,
                                                                    converter: str) -> None:
    if converter == "real":
        _real_converter()
        monkeypatch.setattr(inplace, "_convert_into", REAL_CONVERT)
    part = legacy_partition(tmp_path / "logdir" / "t-0")
    os.chown(part, 1234, 2345)
    part.chmod(0o750)
    for p in part.iterdir():
        os.chown(p, 1234, 2345)
        p.chmod(0o600)
    (part / f"{SEG.format(5)}.log").chmod(0o640)
    old = {p.name: os.stat(p) for p in part.iterdir()}
    convert_in_place(part, tmp_path / "bk")
    st = os.stat(part)
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (1234, 2345, 0o750)
    for p in part.iterdir():
        st = os.stat(p)
        if p.name in old:  # replaced: the owner and mode of the file it replaces
            assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (
                1234, 2345, stat.S_IMODE(old[p.name].st_mode)), p.name
        else:  # created (an index): the partition's owner
            assert (st.st_uid, st.st_gid) == (1234, 2345), p.name
    for n, was in old.items():
        copy = os.stat(tmp_path / "bk" / "t-0" / n)
        assert (copy.st_uid, copy.st_gid, stat.S_IMODE(copy.st_mode), copy.st_mtime_ns) == (
            1234, 2345, stat.S_IMODE(was.st_mode), was.st_mtime_ns), n


def test_ctrl_c_at_every_step_leaves_old_or_new_and_cleans_up_before_the_switch(tmp_path: Path) -> None:
    new = reference_new_state(tmp_path)
    n = 0
    while True:
        n += 1
        part = legacy_partition(tmp_path / f"run{n}" / "t-0")
        old = whole_state(part)
        code, err = run_forked(lambda: convert_in_place(part, tmp_path / f"bk{n}"), fault_at=n, interrupt=True)
        if code == 0:
            break
        assert code == 4 and "KeyboardInterrupt" in err, (n, code, err)
        now = whole_state(part)
        assert now in (old, new), n
        if now == old:  # interrupted before the switch: the partial staging dir is removed on the way out
            assert other_dirs(part) == [], n
        convert_in_place(part, tmp_path / f"bk{n}-again")
        assert whole_state(part) == new and other_dirs(part) == [], n
    assert n > 15


def test_a_file_system_refusing_rename_exchange_is_found_by_the_probe_and_refused(tmp_path: Path,
                                                                                   monkeypatch) -> None:
    from kafkatool.safety import exchange as exchange_module

    def refused(a: str, b: str) -> None:
        raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))

    monkeypatch.setattr(exchange_module, "exchange_dirs", refused)
    monkeypatch.setattr(exchange_module, "_exchange_probed", {})
    part = legacy_partition(tmp_path / "logdir" / "t-0")
    old = whole_state(part)
    with pytest.raises(PartitionRefused) as e:
        convert_in_place(part, tmp_path / "bk")
    assert e.value.kind == "no_exchange" and "refuses renameat2(RENAME_EXCHANGE)" in str(e.value)
    assert whole_state(part) == old and other_dirs(part) == [] and not (tmp_path / "bk" / "t-0").exists()


def test_every_lock_is_taken_before_the_first_write_and_one_refused_partition_does_not_stop_the_others(
        tmp_path: Path) -> None:
    a = legacy_partition(tmp_path / "logdirA" / "t-0")
    b = legacy_partition(tmp_path / "logdirB" / "t-1")
    c = legacy_partition(tmp_path / "logdirA" / "u-0")
    (c / "00000000000000000000.kafkatool-journal").write_bytes(b"{}")  # reindex's, pending
    old = {p: whole_state(p) for p in (a, b, c)}
    plans = plan_in_place([str(tmp_path / "logdirA"), str(b)], V2)
    assert [(os.path.basename(p.partition_dir), p.refused_kind) for p in plans] == [
        ("t-0", None), ("u-0", "pending"), ("t-1", None)]
    with LockHolder(tmp_path / "logdirB" / ".lock"):  # the second log dir's broker is up: nothing written anywhere
        with pytest.raises(LiveBrokerError):
            apply_in_place(plans, str(tmp_path / "bk"))
    assert {p: whole_state(p) for p in (a, b, c)} == old and not (tmp_path / "bk").exists()
    reports = apply_in_place(plans, str(tmp_path / "bk"))
    assert [os.path.basename(r.plan.partition_dir) for r in reports] == ["t-0", "t-1"]
    new = reference_new_state(tmp_path)
    assert whole_state(a) == new and whole_state(b) == new and whole_state(c) == old[c]
    restore(tmp_path / "bk")  # one backup dir for both log dirs
    assert {p: whole_state(p) for p in (a, b, c)} == old
