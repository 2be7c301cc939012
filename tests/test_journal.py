"""One journal format for every command that writes (kafkatool.safety.journal).

Where the whole-dir exchange cannot be used, reindex and truncate commit a journal before
their renames. Both now write the same version-2 record (``tool``, ``version``, ``backupDir``,
``replace`` with each file's identity before and after, ``move``); the identities are checked
here against ``os.lstat`` and ``hashlib`` of the files the killed run left, not against
kafkatool's own code. A reindex journal of an older kafkatool (``backup_dir``, no identities)
is still read for its backup dir, as before.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from pathlib import Path

from conftest import FIXTURES
from crash_helpers import kafkatool
from kafkatool.reindex import plan_reindex
from kafkatool.safety import JOURNAL_SUFFIX, TEMP_SUFFIX, TRUNCATE_JOURNAL
from test_exchange import damaged_partition

SEG0 = f"{0:020d}"


def _index_only_partition(tmp_path: Path) -> Path:
    """golden-0 without its .index and .timeindex: reindex creates both."""
    part = tmp_path / "logdir" / "golden-0"
    shutil.copytree(FIXTURES / "golden-0", part)
    for p in part.iterdir():
        p.chmod(0o644)
    for suffix in (".index", ".timeindex"):
        (part / f"{SEG0}{suffix}").unlink()
    return part


def _journal_of_a_killed_run(make, command: list[str], journal_name: str) -> tuple[Path, dict]:
    """Kill ``command --execute`` (journal path) at every step until one leaves a committed
    journal; return that partition dir and the journal as JSON."""
    for n in range(1, 60):
        part = make(n)
        r = kafkatool(*command, "--execute", "--quiet", "--backup-dir", str(part.parent.parent / f"bk{n}"), str(part),
                      fault_at=n, no_exchange=True)
        assert r.returncode != 0, f"step {n}: the run ended before any journal was committed"
        journal = part / journal_name
        if journal.exists():
            return part, json.loads(journal.read_bytes())
    raise AssertionError("no step left a committed journal")


def _identity_now(path: Path) -> dict:
    st = os.lstat(path)
    return {"size": st.st_size, "mtimeNs": st.st_mtime_ns, "ino": st.st_ino, "regular": stat.S_ISREG(st.st_mode),
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}


def _check_record(part: Path, record: dict, tool: str) -> None:
    assert set(record) == {"tool", "version", "backupDir", "replace", "move"}, record
    assert record["tool"] == tool and record["version"] == 2
    assert os.path.isabs(record["backupDir"])
    assert record["replace"], record
    for r in record["replace"]:
        assert r["temp"] == r["target"] + TEMP_SUFFIX
        temp = part / r["temp"]
        assert temp.exists(), "killed right after the commit: every temp file is still there"
        assert r["new"] == _identity_now(temp)
        target = part / r["target"]
        if r["old"] is None:
            assert not target.exists()
        else:
            assert r["old"] == _identity_now(target)


def test_reindex_writes_the_journal_format_truncate_writes(tmp_path: Path) -> None:
    def make(n: int) -> Path:
        return _index_only_partition(tmp_path / f"r{n}")

    part, record = _journal_of_a_killed_run(make, ["reindex"], f"{SEG0}{JOURNAL_SUFFIX}")
    _check_record(part, record, "kafkatool reindex")
    assert record["move"] == []
    assert {r["target"] for r in record["replace"]} == {f"{SEG0}.index", f"{SEG0}.timeindex"}
    # the next run re-derives the files and removes the journal and its temps
    plan = plan_reindex(str(part / f"{SEG0}.log"))
    assert plan.interrupted_backup == record["backupDir"]
    assert sorted(os.path.basename(p) for p in plan.leftovers) == sorted(
        [f"{SEG0}{JOURNAL_SUFFIX}"] + [r["temp"] for r in record["replace"]])
    r = kafkatool("reindex", "--execute", "--quiet", "--backup-dir", str(tmp_path / "again"), str(part))
    assert r.returncode == 0, r
    assert not [p for p in os.listdir(part) if p.endswith((TEMP_SUFFIX, JOURNAL_SUFFIX))]
    assert not plan_reindex(str(part / f"{SEG0}.log")).needs_changes


def test_truncate_journal_has_the_same_fields(tmp_path: Path) -> None:
    def make(n: int) -> Path:
        return damaged_partition(tmp_path / f"t{n}" / "logdir")

    part, record = _journal_of_a_killed_run(make, ["truncate"], TRUNCATE_JOURNAL)
    _check_record(part, record, "kafkatool truncate")
    assert record["move"] and all(os.path.isabs(m["dest"]) for m in record["move"])
    r = kafkatool("truncate", "--execute", "--quiet", str(part))
    assert r.returncode == 0, r
    assert not (part / TRUNCATE_JOURNAL).exists()


def test_an_older_reindex_journal_still_names_its_backup(tmp_path: Path) -> None:
    """The format a kafkatool before the one journal wrote (``backup_dir``, ``size``/``sha256``)."""
    part = _index_only_partition(tmp_path)
    index = b"\x00" * 8
    (part / f"{SEG0}.index{TEMP_SUFFIX}").write_bytes(index)
    (part / f"{SEG0}{JOURNAL_SUFFIX}").write_text(json.dumps({
        "tool": "kafkatool reindex", "backup_dir": "/somewhere/bk",
        "replace": [{"temp": f"{SEG0}.index{TEMP_SUFFIX}", "target": f"{SEG0}.index", "size": len(index),
                     "sha256": hashlib.sha256(index).hexdigest()}]}, indent=2) + "\n")
    plan = plan_reindex(str(part / f"{SEG0}.log"))
    assert plan.interrupted_backup == "/somewhere/bk"
    assert sorted(os.path.basename(p) for p in plan.leftovers) == [f"{SEG0}.index{TEMP_SUFFIX}", f"{SEG0}{JOURNAL_SUFFIX}"]
    r = kafkatool("reindex", "--execute", "--quiet", "--backup-dir", str(tmp_path / "bk"), str(part))
    assert r.returncode == 0, r
    assert not [p for p in os.listdir(part) if p.endswith((TEMP_SUFFIX, JOURNAL_SUFFIX))]
