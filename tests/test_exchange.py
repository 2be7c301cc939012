"""The whole-dir exchange of kafkatool.repair (reindex and truncate ``--execute``; spec §2.1, §12).

The SIGKILL-at-every-step tests are in test_reindex.py and test_truncate.py (driver in
crash_helpers.py). Here: the staging dir's name is Kafka's form of a partition being deleted,
a leftover is reported by a dry run and removed by the next run, owner and mode are kept,
unchanged segments are hard links (no copy), and every fallback to the journal is taken
when it must be, and says so.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import FIXTURES
from crash_helpers import kafkatool, other_dirs, whole_state
from kafkatool import repair
from kafkatool.safety import exchange
from kafkatool.repair import (
    NO_EXCHANGE_ENV,
    STAGING_TAG,
    find_staging_dirs,
    is_staging_dir,
    plan_reindex,
    staging_dir_name,
)
from kafkatool.segment import files as names
from test_truncate import INTERVAL, batches_of, build_partition, name

# LocalLog.DeleteDirPattern, and the uuid Kafka writes there (UUID.randomUUID without the dashes)
KAFKA_DELETE_DIR = re.compile(r"^(\S+)-(\S+)\.(\S+)-delete$")


@pytest.fixture(autouse=True)
def _exchange_on(monkeypatch):
    monkeypatch.delenv(NO_EXCHANGE_ENV, raising=False)
    monkeypatch.delenv("KAFKATOOL_FAULT_AT", raising=False)


def copy_fixture(tmp_path: Path, fixture: str = "golden-0", logdir: str = "logdir") -> Path:
    dst = tmp_path / logdir / fixture
    shutil.copytree(FIXTURES / fixture, dst)
    for p in dst.iterdir():
        p.chmod(0o644)
    dst.chmod(0o755)
    return dst


def damaged_partition(tmp_path: Path) -> Path:
    """build_partition with segment 18 cut at offset 27: a link, a cut, moves and rewrites."""
    part = build_partition(tmp_path)
    seg1 = part / name(18, ".log")
    data = bytearray(seg1.read_bytes())
    data[batches_of(bytes(data))[3][0] + 80] ^= 0x55
    seg1.write_bytes(bytes(data))
    return part


def leave_staging_dir(part: Path, command: list[str], backup: Path) -> Path:
    """Kill ``--execute`` right after its first staged file: the partition dir is old, the staging dir stays."""
    p = kafkatool(*command, "--execute", "--quiet", "--backup-dir", str(backup), str(part), fault_at=3)
    assert p.returncode < 0
    (staging,) = other_dirs(part)
    return staging


# --------------------------------------------------------------------------- the staging dir's name


@pytest.mark.parametrize("dirname", ["golden-0", "my.topic-with-dashes-12", "__consumer_offsets-49",
                                     "t" * 249 + "-2147483647", "golden-0.0123456789abcdef0123456789abcdef-delete"])
def test_staging_dir_name_is_kafkas_delete_form(dirname: str) -> None:
    staging = staging_dir_name(f"/data/{dirname}")
    assert staging is not None and len(staging) <= 255
    m = KAFKA_DELETE_DIR.match(staging)
    assert m is not None
    uid = staging[staging.rfind(".") + 1 : -len("-delete")]
    assert re.fullmatch(r"[0-9a-f]{32}", uid) and uid.startswith(STAGING_TAG)
    # the broker reads the topic-partition back from it (§2.1): the same partition, a topic cut short at most
    pd, own = names.parse_partition_dir(staging), names.parse_partition_dir(dirname)
    assert pd.state == "delete" and pd.partition == own.partition and own.topic.startswith(pd.topic)
    assert is_staging_dir(staging) and not is_staging_dir(dirname)
    assert staging_dir_name(f"/other/{dirname}") == staging  # fixed per partition name
    # Kafka's own -delete dirs (random uuids) are not kafkatool's
    assert not is_staging_dir("golden-0.0123456789abcdef0123456789abcdef-delete")
    assert staging_dir_name("/data/not a partition") is None


def test_leftover_staging_dir_reported_removed_and_harmless_to_verify(run, tmp_path: Path) -> None:
    part = copy_fixture(tmp_path)
    old = whole_state(part)
    staging = leave_staging_dir(part, ["reindex", "--all"], tmp_path / "bk")  # 4096, so the indexes change
    assert whole_state(part) == old
    assert KAFKA_DELETE_DIR.match(staging.name) and staging.name == staging_dir_name(str(part))
    assert find_staging_dirs(str(part)) == (str(staging),)
    # verify of the whole log dir reads it as a partition being deleted and does not crash
    r = run("verify", str(part.parent))
    assert r.code in (0, 1) and "Traceback" not in r.err, r
    # a dry run names it (text and JSON Lines) and changes nothing; a log dir argument is not refused for it
    r = run("reindex", "--index-interval-bytes", "128", str(part.parent))
    assert r.code == 1 and str(staging) in r.out and r.out.count(str(staging)) == 1, r
    r = run("reindex", "--format", "jsonl", "--index-interval-bytes", "128", str(part))
    assert json.loads(r.lines[0])["stagingLeftovers"] == [str(staging)]
    r = run("truncate", "--format", "jsonl", str(part))
    obj = json.loads(r.lines[0])
    assert r.code == 1 and obj.get("stagingLeftovers", obj.get("staging_leftovers")) == [str(staging)]
    assert staging.is_dir() and whole_state(part) == old
    # with nothing else to do, --execute only removes it (and makes no backup)
    r = run("reindex", "--execute", "--format", "jsonl", "--index-interval-bytes", "128",
            "--backup-dir", str(tmp_path / "bk2"), str(part.parent))
    assert r.code == 0 and json.loads(r.lines[0])["removed"] == [str(staging)], r
    assert other_dirs(part) == [] and whole_state(part) == old and not (tmp_path / "bk2").exists()
    assert run("reindex", "--index-interval-bytes", "128", str(part)).code == 0


def test_kafkas_own_delete_dir_of_the_partition_is_left_alone(run, tmp_path: Path) -> None:
    part = copy_fixture(tmp_path)
    kafkas = part.parent / "golden-0.0123456789abcdef0123456789abcdef-delete"
    shutil.copytree(part, kafkas)
    assert run("reindex", "--execute", "--backup-dir", str(tmp_path / "bk"), str(part)).code == 0
    assert other_dirs(part) == [kafkas] and whole_state(kafkas) == whole_state(FIXTURES / "golden-0")


def test_truncate_removes_a_leftover_before_its_own_exchange(run, tmp_path: Path) -> None:
    part = damaged_partition(tmp_path)
    staging = leave_staging_dir(part, ["truncate", "--index-interval-bytes", INTERVAL], tmp_path / "bk")
    r = run("truncate", "--execute", "--format", "jsonl", "--index-interval-bytes", INTERVAL,
            "--backup-dir", str(tmp_path / "bk2"), str(part))
    obj = json.loads(r.lines[0])
    assert r.code == 0 and obj["method"] == "exchange" and str(staging) in obj["removed"], r
    assert other_dirs(part) == []


# --------------------------------------------------------------------------- what the switch keeps


def test_unchanged_logs_are_the_same_inode_after_reindex(run, tmp_path: Path) -> None:
    part = build_partition(tmp_path)  # three segments, every index rebuilt with 4096
    logs = sorted(part.glob("*.log"))
    before = {p.name: os.stat(p) for p in logs}
    r = run("reindex", "--execute", "--all", "--format", "jsonl", "--backup-dir", str(tmp_path / "bk"), str(part))
    assert r.code == 0 and {json.loads(x).get("method") for x in r.lines} == {"exchange", None}, r
    for p in logs:
        st = os.stat(p)
        assert (st.st_ino, st.st_dev, st.st_mtime_ns) == (before[p.name].st_ino, before[p.name].st_dev,
                                                           before[p.name].st_mtime_ns), p
        assert st.st_nlink == 1  # the staging dir's link is gone with it
    assert other_dirs(part) == []


def test_truncate_links_unchanged_and_moved_logs_and_copies_the_rest(run, tmp_path: Path) -> None:
    part = damaged_partition(tmp_path)
    ino = {n: os.stat(part / n).st_ino for n in (name(0, ".log"), name(18, ".log"), name(36, ".log"), name(36, ".index"))}
    bk = tmp_path / "bk"
    r = run("truncate", "--execute", "--format", "jsonl", "--index-interval-bytes", INTERVAL, "--backup-dir", str(bk), str(part))
    assert r.code == 0 and json.loads(r.lines[0])["method"] == "exchange", r
    assert os.stat(part / name(0, ".log")).st_ino == ino[name(0, ".log")]  # untouched segment: the same file
    assert os.stat(part / name(18, ".log")).st_ino != ino[name(18, ".log")]  # the cut one: a new file
    # a moved .log went to the backup (same file system) as a hard link; its indexes as copies
    assert os.stat(bk / "t-0" / name(36, ".log")).st_ino == ino[name(36, ".log")]
    assert os.stat(bk / "t-0" / name(36, ".index")).st_ino != ino[name(36, ".index")]


@pytest.mark.parametrize("command", ["reindex", "truncate"])
def test_owner_and_mode_kept(run, tmp_path: Path, command: str) -> None:
    # reindex --all rewrites every index of an intact partition built with another interval
    part = damaged_partition(tmp_path) if command == "truncate" else build_partition(tmp_path)
    uid, gid = 4242, 4343
    part.chmod(0o750)
    modes = {}
    for i, p in enumerate(sorted(part.iterdir())):
        mode = (0o640, 0o600, 0o644)[i % 3]
        p.chmod(mode)
        modes[p.name] = mode
        if os.geteuid() == 0:
            os.chown(p, uid, gid)
    if os.geteuid() == 0:
        os.chown(part, uid, gid)
    mtimes = {p.name: p.stat().st_mtime_ns for p in part.iterdir()}
    r = run(command, "--execute", *(["--all"] if command == "reindex" else []), "--format", "jsonl",
            "--index-interval-bytes", "2048" if command == "reindex" else INTERVAL,
            "--backup-dir", str(tmp_path / "bk"), str(part))
    assert r.code == 0 and json.loads(r.lines[0])["method"] == "exchange", r
    st = part.stat()
    assert st.st_mode & 0o7777 == 0o750
    if os.geteuid() == 0:
        assert (st.st_uid, st.st_gid) == (uid, gid)
    changed = {w for x in r.lines for w in json.loads(x).get("written", ())}
    assert changed
    for p in part.iterdir():
        st = p.stat()
        assert st.st_mode & 0o7777 == modes[p.name], p  # rewritten, copied, cut or linked alike
        if os.geteuid() == 0:
            assert (st.st_uid, st.st_gid) == (uid, gid), p
        if str(p) not in changed:
            assert st.st_mtime_ns == mtimes[p.name], p  # an unchanged file keeps its times


def test_created_index_takes_after_its_log(run, tmp_path: Path) -> None:
    part = copy_fixture(tmp_path)
    log = part / f"{0:020d}.log"
    log.chmod(0o640)
    (part / f"{0:020d}.index").unlink()
    assert run("reindex", "--execute", "--index-interval-bytes", "128", "--backup-dir", str(tmp_path / "bk"), str(part)).code == 0
    assert (part / f"{0:020d}.index").stat().st_mode & 0o7777 == 0o640


# --------------------------------------------------------------------------- the journal fallback


def _methods(r) -> set[str]:
    return {m for m in (json.loads(x).get("method") for x in r.lines) if m}


def _check_truncate_result(part: Path, ref: dict[str, bytes], bk: Path) -> None:
    assert whole_state(part) == ref and other_dirs(part) == []
    manifest = json.loads((bk / "MANIFEST.json").read_text())
    assert len({e["backupFile"] for e in manifest["files"] if e["backupFile"]}) == len(
        [e for e in manifest["files"] if e["backupFile"]])  # nothing backed up twice


@pytest.fixture
def truncate_reference(run, tmp_path: Path) -> dict[str, bytes]:
    ref = damaged_partition(tmp_path / "ref")
    r = run("truncate", "--execute", "--quiet", "--index-interval-bytes", INTERVAL, "--backup-dir", str(tmp_path / "ref-bk"), str(ref))
    assert r.code == 0
    return whole_state(ref)


def test_forced_fallback_says_journal(run, tmp_path: Path, monkeypatch, truncate_reference) -> None:
    monkeypatch.setenv(NO_EXCHANGE_ENV, "1")
    part = damaged_partition(tmp_path / "x")
    bk = tmp_path / "bk"
    r = run("truncate", "--execute", "--format", "jsonl", "--index-interval-bytes", INTERVAL, "--backup-dir", str(bk), str(part))
    assert r.code == 0 and _methods(r) == {f"journal (${NO_EXCHANGE_ENV} is set)"}, r
    _check_truncate_result(part, truncate_reference, bk)
    r = run("truncate", "--execute", "--index-interval-bytes", INTERVAL, "--backup-dir", str(tmp_path / "bk2"), str(damaged_partition(tmp_path / "y")))
    assert "renamed one by one under a journal" in r.out


def test_refused_hard_link_falls_back_before_any_backup(run, tmp_path: Path, monkeypatch, truncate_reference) -> None:
    real_link = os.link

    def no_link(src, dst, **kw):
        if os.path.basename(os.path.dirname(dst)).endswith("-delete"):
            raise OSError(errno.EPERM, os.strerror(errno.EPERM), src)
        return real_link(src, dst, **kw)

    monkeypatch.setattr(os, "link", no_link)
    part = damaged_partition(tmp_path / "x")
    bk = tmp_path / "bk"
    r = run("truncate", "--execute", "--format", "jsonl", "--index-interval-bytes", INTERVAL, "--backup-dir", str(bk), str(part))
    assert r.code == 0 and _methods(r) == {f"journal (a hard link is refused ({os.strerror(errno.EPERM)}): "
                                           f"{part / name(0, '.log')})"}, r
    _check_truncate_result(part, truncate_reference, bk)


def test_refused_exchange_falls_back(run, tmp_path: Path, monkeypatch, truncate_reference) -> None:
    def refuse(a, b):
        raise OSError(errno.EINVAL, os.strerror(errno.EINVAL), a)

    monkeypatch.setattr(exchange, "exchange_dirs", refuse)
    monkeypatch.setattr(exchange, "_exchange_probed", {})
    part = damaged_partition(tmp_path / "x")
    bk = tmp_path / "bk"
    r = run("truncate", "--execute", "--format", "jsonl", "--index-interval-bytes", INTERVAL, "--backup-dir", str(bk), str(part))
    assert r.code == 0 and _methods(r) == {"journal (the file system refuses renameat2(RENAME_EXCHANGE) "
                                           f"({os.strerror(errno.EINVAL)}))"}, r
    _check_truncate_result(part, truncate_reference, bk)


def test_no_renameat2_falls_back(run, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(exchange, "_renameat2_cache", ["renameat2(RENAME_EXCHANGE) is Linux-only (this is darwin)"])
    part = copy_fixture(tmp_path)
    r = run("reindex", "--execute", "--all", "--format", "jsonl", "--backup-dir", str(tmp_path / "bk"), str(part))
    assert r.code == 0 and _methods(r) == {"journal (renameat2(RENAME_EXCHANGE) is Linux-only (this is darwin))"}, r
    assert not plan_reindex(str(part / f"{0:020d}.log")).needs_changes


def test_subdirectory_in_the_partition_dir_falls_back(run, tmp_path: Path) -> None:
    part = copy_fixture(tmp_path)
    (part / "stuff").mkdir()
    r = run("reindex", "--execute", "--all", "--format", "jsonl", "--backup-dir", str(tmp_path / "bk"), str(part))
    assert r.code == 0 and _methods(r) == {"journal (the partition dir holds 'stuff', which is not a regular file)"}, r
    assert (part / "stuff").is_dir()


def test_backup_restores_after_an_exchange(run, tmp_path: Path) -> None:
    part = damaged_partition(tmp_path)
    old = whole_state(part)
    bk = tmp_path / "bk"
    assert run("truncate", "--execute", "--index-interval-bytes", INTERVAL, "--backup-dir", str(bk), str(part)).code == 0
    assert whole_state(part) != old
    subprocess.run(["sh", str(bk / "RESTORE.txt")], check=True, capture_output=True)
    assert whole_state(part) == old


def test_a_leftover_is_named_once_per_partition(run, tmp_path: Path) -> None:
    part = build_partition(tmp_path)  # three segments
    staging = leave_staging_dir(part, ["reindex", "--all"], tmp_path / "bk")
    r = run("reindex", "--index-interval-bytes", INTERVAL, str(part))
    assert r.code == 1 and r.out.count(str(staging)) == 1, r
    r = run("reindex", "--execute", "--format", "jsonl", "--index-interval-bytes", INTERVAL, "--backup-dir", str(tmp_path / "bk2"), str(part))
    assert r.code == 0 and [json.loads(x).get("removed") for x in r.lines[:3]] == [[str(staging)], [], []], r
