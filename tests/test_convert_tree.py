"""plan_convert / analyze / convert_to_dest / convert_partition_into (kafkatool/convert/tree.py):
partitions and whole log dirs converted into a new DEST, at the API level (the CLI matrix is
test_cli_convert's).

Oracles: kafka-python and aiokafka read every output ``.log`` (offsets, keys, values, timestamps,
headers as spec §13 says, from the source as kafka-python reads it); reindex's planner with
``rebuild_all`` plans no change on every output segment; side files byte-compared with the source.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import FIXTURES, REPO
from kafkatool.convert.options import ConvertOptions
from kafkatool.convert.tree import (
    analyze,
    convert_partition_into,
    convert_to_dest,
    plan_convert,
    stale_temp_dirs,
    temp_dir_for,
)
from kafkatool.errors import KafkaToolError
from kafkatool.record.compression import Codec
from kafkatool.segment.logdir import Partition
from test_convert_segment import (
    v2_segment,
    aio_view,
    assert_reindex_unchanged,
    expected_after,
    has_zstd,
    kp_view,
)

PARTITIONS = sorted(d.name for d in FIXTURES.iterdir() if d.is_dir() and not d.name.startswith("__"))
LOG_DIR_FILES = {"bootstrap.checkpoint", "log-start-offset-checkpoint", "meta.properties",
                 "recovery-point-offset-checkpoint", "replication-offset-checkpoint", ".kafka_cleanshutdown"}


def listing(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir())


def assert_partition_converted(src: Path, dest: Path, magic: int) -> None:
    """Every segment of ``src`` is in ``dest`` at ``magic``, record for record, indexed as reindex would."""
    logs = sorted(src.glob("*.log"))
    assert sorted(p.name for p in dest.glob("*.log")) == [p.name for p in logs]
    for log in logs:
        source, _ = kp_view(log.read_bytes())
        data = (dest / log.name).read_bytes()
        got, magics = kp_view(data)
        assert magics <= {magic}
        assert got == expected_after(source, magic), log
        aio = aio_view(data)
        assert aio is None or aio == got
        assert_reindex_unchanged(dest / log.name)
    for name in ("leader-epoch-checkpoint", "partition.metadata"):
        if (src / name).exists():
            assert (dest / name).read_bytes() == (src / name).read_bytes()


def no_temp_dirs(parent: Path) -> bool:
    return not [p for p in parent.iterdir() if ".kafkatool-tmp" in p.name]


# ----------------------------------------------------------------------------- partitions


@pytest.mark.parametrize("magic", [0, 1, 2])
@pytest.mark.parametrize("part", PARTITIONS)
def test_every_fixture_partition_to_every_magic(tmp_path: Path, part: str, magic: int) -> None:
    src = FIXTURES / part
    codec = Codec.GZIP if magic < 2 and any(has_zstd(p) for p in src.glob("*.log")) else None
    dest = tmp_path / "dest"
    calls: list[int] = []
    plan = plan_convert(str(src), str(dest), ConvertOptions(magic=magic, codec=codec))
    assert plan.kind == "partition" and [p.path for p in plan.partitions] == [str(src)]
    report = convert_to_dest(plan, progress=calls.append)
    assert sum(calls) == plan.total_bytes == sum(p.stat().st_size for p in src.glob("*.log"))
    assert_partition_converted(src, dest, magic)
    (result,) = report.partitions
    assert result.dest == str(dest) and result.topic == part.rsplit("-", 1)[0] and result.partition == 0
    assert [s.out_path for s in result.segments] == [str(dest / p.name) for p in sorted(src.glob("*.log"))]
    snapshots = sorted(p.name for p in src.glob("*.snapshot"))
    assert sorted(p.name for p in dest.glob("*.snapshot")) == (snapshots if magic == 2 else [])
    txn = sorted(p.name for p in src.glob("*.txnindex"))
    assert sorted(p.name for p in dest.glob("*.txnindex")) == (txn if magic == 2 else [])
    assert no_temp_dirs(tmp_path)
    assert report.loss.as_dict() == analyze(plan).as_dict()


def test_metadata_partition_converts_at_v2(tmp_path: Path) -> None:
    src = FIXTURES / "__cluster_metadata-0"
    dest = tmp_path / "dest"
    report = convert_to_dest(plan_convert(str(src), str(dest), ConvertOptions(magic=2, codec=Codec.ZSTD)))
    assert_partition_converted(src, dest, 2)
    assert report.loss.control_batches_dropped == 0 and not report.loss.any()
    sides = {s.name: s.action for s in report.partitions[0].side_files}
    assert sides["00000000000000000005-0000000001.checkpoint"] == sides["quorum-state"] == "copied"


@pytest.mark.parametrize("magic", [0, 1])
def test_aborted_records_made_readable_below_v2_are_counted(tmp_path: Path, magic: int) -> None:
    """Without --drop-aborted, producer 6000's aborted records (103-104, ABORT at 113) stay and lose
    the marker that hid them: counted, in the analysis as in the run."""
    plan = plan_convert(str(FIXTURES / "txn-0"), str(tmp_path / "dest"), ConvertOptions(magic=magic, codec=Codec.GZIP))
    assert analyze(plan).aborted_records_kept == 2
    report = convert_to_dest(plan)
    assert report.loss.aborted_records_kept == 2 and report.loss.aborted_records_dropped == 0
    got, _ = kp_view((tmp_path / "dest" / "00000000000000000100.log").read_bytes())
    assert {103, 104} <= {o for o, *_ in got}


def test_partition_side_files_not_copied_with_reasons(tmp_path: Path) -> None:
    src = tmp_path / "t-0"
    shutil.copytree(FIXTURES / "golden-0", src)
    (src / "notes.txt").write_text("mine")
    (src / "00000000000000000999.index").write_bytes(b"")  # an orphan index: no .log
    (src / "00000000000000000000.log.deleted").write_bytes(b"x")
    (src / "00000000000000000007.log.swap").write_bytes(b"x")
    (src / "sub").mkdir()
    os.symlink("nowhere", src / "dangling")
    dest = tmp_path / "dest"
    report = convert_to_dest(plan_convert(str(src), str(dest), ConvertOptions(magic=2)))
    sides = {s.name: s for s in report.partitions[0].side_files}
    assert {n: s.action for n, s in sides.items()} == {
        "00000000000000000003.snapshot": "copied",
        "leader-epoch-checkpoint": "copied",
        "partition.metadata": "copied",
        "notes.txt": "not copied",
        "00000000000000000999.index": "not copied",
        "00000000000000000000.log.deleted": "not copied",
        "00000000000000000007.log.swap": "not copied",
        "sub": "not copied",
        "dangling": "not copied",
    }
    assert "without its .log" in sides["00000000000000000999.index"].reason
    assert "deletion" in sides["00000000000000000000.log.deleted"].reason
    assert "not a regular file" in sides["sub"].reason and "not a regular file" in sides["dangling"].reason
    assert "not a file Kafka reads" in sides["notes.txt"].reason
    assert listing(dest) == sorted(["00000000000000000000.log", "00000000000000000000.index",
                                    "00000000000000000000.timeindex", "00000000000000000003.snapshot",
                                    "leader-epoch-checkpoint", "partition.metadata"])


def test_drop_aborted_partition(tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    report = convert_to_dest(plan_convert(str(FIXTURES / "txn-0"), str(dest), ConvertOptions(magic=2, drop_aborted=True)))
    got, _ = kp_view((dest / "00000000000000000100.log").read_bytes())
    offsets = [o for o, *_ in got]
    assert 103 not in offsets and 104 not in offsets and 100 in offsets and 106 in offsets
    assert report.loss.aborted_records_dropped == 2
    assert not (dest / "00000000000000000100.txnindex").exists()
    assert_reindex_unchanged(dest / "00000000000000000100.log")


def test_convert_partition_into_an_existing_dir_keeps_modes(tmp_path: Path) -> None:
    src = tmp_path / "t-3"
    shutil.copytree(FIXTURES / "v1-gzip-0", src)
    os.chmod(src / "00000000000000000000.log", 0o604)
    os.chmod(src / "leader-epoch-checkpoint", 0o600)
    out = tmp_path / "stage"
    out.mkdir()
    r = convert_partition_into(Partition(str(src)), str(out), ConvertOptions(magic=2), like_owner=True)
    assert r.topic == "t" and r.partition == 3 and r.dest == str(out)
    assert (out / "00000000000000000000.log").stat().st_mode & 0o777 == 0o604
    assert (out / "leader-epoch-checkpoint").stat().st_mode & 0o777 == 0o600
    assert_partition_converted(src, out, 2)


def test_dest_dir_takes_the_partition_dirs_mode(tmp_path: Path) -> None:
    src = tmp_path / "t-0"
    shutil.copytree(FIXTURES / "v2-none-0", src)
    os.chmod(src, 0o750)
    dest = tmp_path / "dest"
    convert_to_dest(plan_convert(str(src), str(dest), ConvertOptions(magic=1)))
    assert dest.stat().st_mode & 0o777 == 0o750


# ----------------------------------------------------------------------------- log dirs


@pytest.mark.parametrize("magic,codec", [(2, None), (1, Codec.GZIP), (0, Codec.SNAPPY), (2, Codec.ZSTD)])
def test_whole_log_dir(tmp_path: Path, magic: int, codec) -> None:
    src = tmp_path / "logs"
    shutil.copytree(FIXTURES, src)
    shutil.copytree(FIXTURES / "v2-none-0", src / "v2-none-0.0123456789abcdef0123456789abcdef-delete")
    shutil.copytree(FIXTURES / "v2-none-0", src / "v2-none-1.0123456789abcdef0123456789abcdef-future")
    (src / ".lock").write_bytes(b"")
    (src / "remote-log-index-cache").mkdir()
    (src / "junk.txt").write_text("x")
    dest = tmp_path / "dest"
    options = ConvertOptions(magic=magic, codec=codec)
    plan = plan_convert(str(src), str(dest), options)
    assert plan.kind == "log_dir"
    expected = PARTITIONS + (["__cluster_metadata-0"] if magic == 2 else [])
    assert [os.path.basename(p.path) for p in plan.partitions] == sorted(expected, key=lambda n: (n.rsplit("-", 1)[0], n))
    loss = analyze(plan)
    calls: list[int] = []
    report = convert_to_dest(plan, progress=calls.append)
    assert sum(calls) == plan.total_bytes
    assert report.loss.as_dict() == loss.as_dict()
    assert listing(dest) == sorted(PARTITIONS + ["__cluster_metadata-0"] + list(LOG_DIR_FILES))
    for part in PARTITIONS:
        assert_partition_converted(src / part, dest / part, magic)
    for name in LOG_DIR_FILES:
        assert (dest / name).read_bytes() == (src / name).read_bytes()
    meta = src / "__cluster_metadata-0"
    assert listing(dest / "__cluster_metadata-0") == listing(meta)
    if magic < 2:  # the metadata log: not converted, copied unchanged, file for file
        for p in meta.iterdir():
            assert (dest / "__cluster_metadata-0" / p.name).read_bytes() == p.read_bytes()
        assert "not converted" in {s.name: s for s in report.side_files}["__cluster_metadata-0"].reason
    else:  # converted like any v2 partition; its KRaft snapshot and quorum state copied unchanged
        assert_partition_converted(meta, dest / "__cluster_metadata-0", 2)
        for name in ("00000000000000000005-0000000001.checkpoint", "quorum-state"):
            assert (dest / "__cluster_metadata-0" / name).read_bytes() == (meta / name).read_bytes()
        assert "__cluster_metadata-0" in {os.path.basename(p.path) for p in plan.partitions}
    sides = {s.name: s for s in report.side_files}
    assert sides["v2-none-0.0123456789abcdef0123456789abcdef-delete"].action == "not copied"
    assert "deleted" in sides["v2-none-0.0123456789abcdef0123456789abcdef-delete"].reason
    assert "replica move" in sides["v2-none-1.0123456789abcdef0123456789abcdef-future"].reason
    assert sides[".lock"].action == sides["junk.txt"].action == sides["remote-log-index-cache"].action == "not copied"
    assert sides[".kafka_cleanshutdown"].action == "copied"
    assert magic == 2 or sides["__cluster_metadata-0"].action == "copied"
    assert no_temp_dirs(tmp_path)


def test_clean_shutdown_marker_left_out_after_a_skipped_damaged_range(tmp_path: Path) -> None:
    src = tmp_path / "logs"
    src.mkdir()
    (src / ".kafka_cleanshutdown").write_text('{"version":0,"brokerEpoch":7}')
    (src / "meta.properties").write_text("version=1\nnode.id=1\ncluster.id=x\n")
    part = src / "t-0"
    part.mkdir()
    data = bytearray(v2_segment(6, 2))
    data[200] ^= 0xFF  # the second batch fails its CRC
    (part / "00000000000000000000.log").write_bytes(bytes(data))
    with pytest.raises(KafkaToolError):
        convert_to_dest(plan_convert(str(src), str(tmp_path / "d1"), ConvertOptions(magic=2)))
    assert not (tmp_path / "d1").exists() and no_temp_dirs(tmp_path)
    report = convert_to_dest(plan_convert(str(src), str(tmp_path / "d2"), ConvertOptions(magic=2, skip_damaged=True)))
    side = {s.name: s for s in report.side_files}[".kafka_cleanshutdown"]
    assert side.action == "not copied" and "damaged" in side.reason
    assert listing(tmp_path / "d2") == ["meta.properties", "t-0"]
    assert report.loss.damaged_count == 1
    report = convert_to_dest(plan_convert(str(src / "t-0"), str(tmp_path / "d3"), ConvertOptions(magic=2, salvage=True)))
    assert report.loss.salvaged_count == 1


# ----------------------------------------------------------------------------- segments


def test_segment_src_goes_into_dest_under_its_own_name(tmp_path: Path) -> None:
    src = FIXTURES / "txn-0" / "00000000000000000100.log"
    dest = tmp_path / "dest"
    plan = plan_convert(str(src), str(dest), ConvertOptions(magic=2, codec=Codec.LZ4))
    assert plan.kind == "segment" and plan.partitions == [] and plan.total_bytes == src.stat().st_size
    report = convert_to_dest(plan)
    assert listing(dest) == ["00000000000000000100.index", "00000000000000000100.log",
                             "00000000000000000100.timeindex", "00000000000000000100.txnindex"]
    (result,) = report.partitions
    assert result.topic == "txn" and result.segments[0].out_path == str(dest / "00000000000000000100.log")
    assert_reindex_unchanged(dest / "00000000000000000100.log")


# ----------------------------------------------------------------------------- DEST refusals


def _refused(src, dest, options=None, match: str = "") -> KafkaToolError:
    with pytest.raises(KafkaToolError) as e:
        plan = plan_convert(str(src), str(dest), options or ConvertOptions(magic=2))
        convert_to_dest(plan)
    assert e.value.kind == "refused", e.value
    assert match in str(e.value)
    return e.value


def test_refusals_write_nothing(tmp_path: Path) -> None:
    part = tmp_path / "src" / "t-0"
    shutil.copytree(FIXTURES / "v2-zstd-0", part)
    before = {str(p): p.stat().st_mtime_ns for p in tmp_path.rglob("*")}

    full = tmp_path / "full"
    full.mkdir()
    (full / "x").write_text("x")
    _refused(part, full, match="not empty")
    afile = tmp_path / "afile"
    afile.write_text("x")
    _refused(part, afile, match="not a directory")
    _refused(part, part / "inner", match="inside SRC")
    _refused(tmp_path / "src", tmp_path / "src" / "t-0" / "deeper", match="inside SRC")
    e = _refused(part, tmp_path / "src", match="SRC lies inside DEST")
    assert e.path == str(tmp_path / "src")
    _refused(part, tmp_path / "dest", ConvertOptions(magic=1, codec=Codec.ZSTD), match="zstd")
    e = _refused(part, tmp_path / "dest", ConvertOptions(magic=0), match="zstd")
    assert e.path == str(part / "00000000000000000000.log") and e.position == 0
    (tmp_path / "empty").mkdir()
    os.symlink(tmp_path / "empty", tmp_path / "link")
    _refused(part, tmp_path / "link", match="symbolic link")
    _refused(part, tmp_path / "no" / "such" / "dest", match="does not exist")
    _refused(part / "00000000000000000000.log", part / "out", match="partition dir that holds SRC")
    _refused(FIXTURES / "__cluster_metadata-0", tmp_path / "dest", ConvertOptions(magic=1), match="metadata")
    _refused(FIXTURES / "__cluster_metadata-0" / "00000000000000000000.log", tmp_path / "dest",
             ConvertOptions(magic=0, codec=Codec.GZIP), match="metadata")
    _refused(afile, tmp_path / "dest", match="not a segment")
    _refused(tmp_path / "empty", tmp_path / "dest", match="not a segment")
    _refused(tmp_path / "missing", tmp_path / "dest", match="does not exist")

    after = {str(p): p.stat().st_mtime_ns for p in tmp_path.rglob("*")}
    assert after == before | {str(tmp_path / n): after[str(tmp_path / n)] for n in ("full", "full/x", "afile", "empty", "link")}
    assert not (tmp_path / "dest").exists() and listing(tmp_path / "empty") == [] and no_temp_dirs(tmp_path)


def test_an_empty_existing_dest_is_replaced(tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    dest.mkdir()
    convert_to_dest(plan_convert(str(FIXTURES / "v0-gzip-0"), str(dest), ConvertOptions(magic=2)))
    assert_partition_converted(FIXTURES / "v0-gzip-0", dest, 2)


def test_dest_filled_by_someone_else_meanwhile_is_refused(tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    plan = plan_convert(str(FIXTURES / "v1-none-0"), str(dest), ConvertOptions(magic=2))

    def other_run(_n: int) -> None:
        if not dest.exists():
            dest.mkdir()
            (dest / "theirs").write_text("theirs")

    with pytest.raises(KafkaToolError) as e:
        convert_to_dest(plan, progress=other_run)
    assert e.value.kind == "refused" and "while this run built it" in str(e.value)
    assert listing(dest) == ["theirs"] and no_temp_dirs(tmp_path)


def test_dest_that_appeared_empty_meanwhile_is_replaced(tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    plan = plan_convert(str(FIXTURES / "v1-none-0"), str(dest), ConvertOptions(magic=2))
    convert_to_dest(plan, progress=lambda _n: dest.mkdir(exist_ok=True))
    assert_partition_converted(FIXTURES / "v1-none-0", dest, 2)


# ----------------------------------------------------------------------------- temp dirs


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_stale_temp_dir_of_a_dead_run_is_removed_a_live_ones_kept(tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    dead = Path(temp_dir_for(str(dest), _dead_pid()))
    dead.mkdir()
    (dead / "00000000000000000000.log.kafkatool-tmp").write_bytes(b"partial")
    live = Path(temp_dir_for(str(dest), 1))  # pid 1 is alive
    live.mkdir()
    other = tmp_path / ".other.kafkatool-tmp-1"
    other.mkdir()
    assert dead.name.startswith(".dest.kafkatool-tmp-")
    assert stale_temp_dirs(str(dest)) == [str(dead)]
    convert_to_dest(plan_convert(str(FIXTURES / "v2-gzip-0"), str(dest), ConvertOptions(magic=1)))
    assert not dead.exists() and live.exists() and other.exists()
    assert_partition_converted(FIXTURES / "v2-gzip-0", dest, 1)


def test_an_error_mid_conversion_removes_the_temp_dir(tmp_path: Path) -> None:
    src = tmp_path / "logs"
    shutil.copytree(FIXTURES, src)
    log = src / "v2-none-0" / "00000000000000000000.log"
    data = bytearray(log.read_bytes())
    data[100] ^= 0xFF
    log.write_bytes(bytes(data))
    with pytest.raises(KafkaToolError) as e:
        convert_to_dest(plan_convert(str(src), str(tmp_path / "dest"), ConvertOptions(magic=2, codec=Codec.GZIP)))
    assert e.value.path == str(log) and e.value.position == 0
    assert not (tmp_path / "dest").exists() and no_temp_dirs(tmp_path)


_KILL_CHILD = textwrap.dedent("""
    import sys, time
    from kafkatool.convert.options import ConvertOptions
    from kafkatool.convert.tree import plan_convert, convert_to_dest
    from kafkatool.record.compression import Codec
    done = 0
    def progress(n):
        global done
        done += n
        print(done, flush=True)
        time.sleep(0.2)
    convert_to_dest(plan_convert(sys.argv[1], sys.argv[2], ConvertOptions(magic=2, codec=Codec.GZIP)), progress=progress)
    print("finished", flush=True)
""")


def test_sigkill_mid_write_leaves_dest_absent_and_a_recognisable_temp_dir(tmp_path: Path) -> None:
    src = tmp_path / "big-0"
    src.mkdir()
    import random
    import struct

    from kafka.record.default_records import DefaultRecordBatchBuilder

    rng = random.Random(11)

    with open(src / "00000000000000000000.log", "wb") as f:
        for b in range(400):  # ~25 MiB: past the 8 MiB write buffer before the kill
            builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
            for i in range(1):
                # 64 KiB that gzip cannot shrink: the output passes the write buffer before the kill
                builder.append(i, 1700000000000 + b, b"k%d" % b, rng.randbytes(1 << 16), [])
            raw = bytearray(builder.build())
            struct.pack_into(">q", raw, 0, b)
            f.write(raw)
    dest = tmp_path / "dest"
    child = subprocess.Popen([sys.executable, "-c", _KILL_CHILD, str(src), str(dest)], cwd=REPO,
                             stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        for line in child.stdout:
            if line.strip() == "finished" or int(line) >= 20 << 20:
                break
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL
    assert not dest.exists()
    temps = [p for p in tmp_path.iterdir() if p.name.startswith(".dest.kafkatool-tmp-")]
    assert [p.name for p in temps] == [f".dest.kafkatool-tmp-{child.pid}"]
    partial = temps[0] / "00000000000000000000.log.kafkatool-tmp"
    assert partial.exists() and partial.stat().st_size > 0  # killed mid-write, past a buffer flush
    # the next run to the same DEST removes it and finishes
    convert_to_dest(plan_convert(str(src), str(dest), ConvertOptions(magic=1)))
    assert no_temp_dirs(tmp_path)
    got, magics = kp_view((dest / "00000000000000000000.log").read_bytes())
    assert magics == {1} and [o for o, *_ in got] == list(range(400))


# ----------------------------------------------------------------------------- names and links


def test_non_utf8_names(tmp_path: Path) -> None:
    root = os.fsencode(tmp_path)
    src = os.fsdecode(root + b"/caf\xe9-0")
    shutil.copytree(FIXTURES / "v2-gzip-0", src)
    dest = os.fsdecode(root + b"/out\xff")
    report = convert_to_dest(plan_convert(src, dest, ConvertOptions(magic=1, codec=Codec.LZ4)))
    assert report.partitions[0].topic == os.fsdecode(b"caf\xe9")
    assert_partition_converted(Path(src), Path(dest), 1)
    assert os.listdir(root) == [b"caf\xe9-0", b"out\xff"] or sorted(os.listdir(root)) == sorted([b"caf\xe9-0", b"out\xff"])


def test_symlinked_src_partition_and_segment(tmp_path: Path) -> None:
    real = tmp_path / "data" / "t-0"
    shutil.copytree(FIXTURES / "v1-snappy-0", real)
    link = tmp_path / "link"
    os.symlink(real, link)
    report = convert_to_dest(plan_convert(str(link), str(tmp_path / "d1"), ConvertOptions(magic=2)))
    assert report.plan.kind == "partition" and report.partitions[0].topic == "t"
    assert_partition_converted(real, tmp_path / "d1", 2)
    # a segment file that is a symbolic link into another directory
    part = tmp_path / "u-0"
    part.mkdir()
    elsewhere = tmp_path / "elsewhere.bin"
    shutil.copy(FIXTURES / "v1-snappy-0" / "00000000000000000000.log", elsewhere)
    os.symlink(elsewhere, part / "00000000000000000000.log")
    convert_to_dest(plan_convert(str(part), str(tmp_path / "d2"), ConvertOptions(magic=0)))
    out = tmp_path / "d2" / "00000000000000000000.log"
    assert not out.is_symlink()
    source, _ = kp_view(elsewhere.read_bytes())
    got, _ = kp_view(out.read_bytes())
    assert got == expected_after(source, 0)
    assert_reindex_unchanged(out)


# ----------------------------------------------------------------------------- the package's names


def test_package_exports_resolve_lazily() -> None:
    import subprocess as sp

    import kafkatool.convert as pkg

    assert sorted(pkg.__all__) == sorted(pkg._EXPORTS)
    for name in pkg.__all__:
        value = getattr(pkg, name)
        assert value.__module__ == pkg._EXPORTS[name] and value.__doc__, name
    with pytest.raises(AttributeError):
        pkg.no_such_name  # noqa: B018
    probe = "import sys, kafkatool.convert; print(sorted(m for m in sys.modules if m.startswith('kafkatool.')))"
    out = sp.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['kafkatool.convert']"
    from kafkatool.convert import options, tree  # submodules still import through the package

    assert tree.plan_convert is pkg.plan_convert and options.Loss is pkg.Loss


def test_package_docstring_example(tmp_path: Path) -> None:
    from kafkatool.convert import ConvertOptions as Options
    from kafkatool.convert import analyze as analyse
    from kafkatool.convert import convert_to_dest as to_dest
    from kafkatool.convert import plan_convert as plan_it

    plan = plan_it(str(FIXTURES / "v2-none-0"), str(tmp_path / "orders-0-v1"), Options(magic=1))
    # fixtures/README: 14 records with 2 headers each; 4 batches of partition leader epoch 0
    assert analyse(plan).lines() == [
        "14 records lost their headers (28 headers)",
        "4 batches lost producer fields (producer id/epoch, base sequence, leader epoch, transactional flag)",
    ]
    assert to_dest(plan).dest == str(tmp_path / "orders-0-v1")


def test_rename_into_place_uses_renameat2_noreplace_and_falls_back(tmp_path: Path, monkeypatch) -> None:
    import errno

    from kafkatool.safety import exchange

    calls = []
    real = exchange.rename_noreplace

    def spy(old, new):
        calls.append((old, new))
        real(old, new)

    monkeypatch.setattr(exchange, "rename_noreplace", spy)
    dest = tmp_path / "d1"
    convert_to_dest(plan_convert(str(FIXTURES / "v2-gzip-0"), str(dest), ConvertOptions(magic=2)))
    assert calls == [(temp_dir_for(str(dest)), str(dest))] and listing(dest)

    def unavailable(old, new):
        raise exchange.ExchangeUnavailable("no renameat2 here")

    monkeypatch.setattr(exchange, "rename_noreplace", unavailable)
    convert_to_dest(plan_convert(str(FIXTURES / "v2-gzip-0"), str(tmp_path / "d2"), ConvertOptions(magic=2)))
    assert_partition_converted(FIXTURES / "v2-gzip-0", tmp_path / "d2", 2)

    def raced(old, new, filled: bool):
        os.mkdir(new)  # another run made DEST between the check and the rename
        if filled:
            Path(new, "theirs").write_text("x")
        raise OSError(errno.EEXIST, os.strerror(errno.EEXIST), old, None, new)

    monkeypatch.setattr(exchange, "rename_noreplace", lambda o, n: raced(o, n, False))
    convert_to_dest(plan_convert(str(FIXTURES / "v2-gzip-0"), str(tmp_path / "d3"), ConvertOptions(magic=2)))
    assert_partition_converted(FIXTURES / "v2-gzip-0", tmp_path / "d3", 2)  # an empty DEST is replaced
    monkeypatch.setattr(exchange, "rename_noreplace", lambda o, n: raced(o, n, True))
    with pytest.raises(KafkaToolError) as e:
        convert_to_dest(plan_convert(str(FIXTURES / "v2-gzip-0"), str(tmp_path / "d4"), ConvertOptions(magic=2)))
    assert e.value.kind == "refused" and listing(tmp_path / "d4") == ["theirs"] and no_temp_dirs(tmp_path)


def test_directories_that_only_look_like_partitions_are_not_kafka(tmp_path: Path) -> None:
    """/etc holds dbus-1 and polkit-1: partition-named dirs without a Kafka file, in a directory with
    no meta.properties or offset checkpoint. Not a log dir, not partitions (as stats and verify say)."""
    etc = tmp_path / "etc"
    (etc / "dbus-1").mkdir(parents=True)
    (etc / "dbus-1" / "system.conf").write_text("<busconfig/>")
    (etc / "polkit-1").mkdir()
    _refused(etc, tmp_path / "dest", match="not a segment (.log), a partition dir")
    _refused(etc / "dbus-1", tmp_path / "dest", match="holds no Kafka file")
    assert not (tmp_path / "dest").exists() and no_temp_dirs(tmp_path)
    # one real partition beside them: the log dir is that partition; the look-alikes are listed
    shutil.copytree(FIXTURES / "v2-none-0", etc / "t-0")
    report = convert_to_dest(plan_convert(str(etc), str(tmp_path / "dest"), ConvertOptions(magic=1)))
    assert listing(tmp_path / "dest") == ["t-0"]
    sides = {s.name: s for s in report.side_files}
    assert sides["dbus-1"].action == sides["polkit-1"].action == "not copied"
    assert "holds no Kafka file" in sides["dbus-1"].reason
    # with meta.properties it is a log dir: every partition-named dir is a partition (an empty one too)
    (etc / "meta.properties").write_text("version=1\n")
    plan = plan_convert(str(etc), str(tmp_path / "dest2"), ConvertOptions(magic=1))
    assert [os.path.basename(p.path) for p in plan.partitions] == ["dbus-1", "polkit-1", "t-0"]
