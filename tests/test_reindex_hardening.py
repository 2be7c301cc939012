"""Issue 9 hardening of ``kafkatool reindex`` and the shared repair machinery (kafkatool.repair).

Every test works on copies under tmp_path; fixtures/ and ../shared are never written.
Expected values come from the broker's own files (../shared/fixtures-real), from the
spec's rules worked by hand, or from byte counts of the files written here.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kafkatool import repair

SEG0 = "00000000000000000000"
TRUNCATE_JOURNAL = "kafkatool-truncate.kafkatool-journal"


# --------------------------------------------------------------------------- find_pending_state


def test_find_pending_state_names_each_journal_temp_and_staging_dir(tmp_path: Path) -> None:
    part = tmp_path / "logdir" / "t-0"
    part.mkdir(parents=True)
    (part / f"{SEG0}.log").write_bytes(b"")
    (part / f"{SEG0}.log.kafkatool-tmp").write_bytes(b"new")          # named by truncate's journal
    (part / "leader-epoch-checkpoint.kafkatool-tmp").write_bytes(b"")  # not named: an uncommitted temp
    (part / TRUNCATE_JOURNAL).write_text(json.dumps(
        {"tool": "kafkatool truncate", "replace": [{"temp": f"{SEG0}.log.kafkatool-tmp", "target": f"{SEG0}.log"}],
         "move": []}))
    (part / f"{SEG0}.kafkatool-journal").write_text("{}")
    (part / f"{SEG0}.kafkatool-journal.kafkatool-tmp").write_text("{")
    staging = tmp_path / "logdir" / repair.staging_dir_name(str(part))
    staging.mkdir()
    got = {os.path.basename(p): what.split(":", 1)[0] for p, what in repair.find_pending_state(str(part))}
    assert got == {
        TRUNCATE_JOURNAL: "truncate journal",
        f"{SEG0}.kafkatool-journal": "reindex journal",
        f"{SEG0}.log.kafkatool-tmp": "pending temp file",
        "leader-epoch-checkpoint.kafkatool-tmp": "temp file",
        f"{SEG0}.kafkatool-journal.kafkatool-tmp": "temp file",
        staging.name: "staging dir",
    }
    assert repair.find_pending_state(str(tmp_path / "nonexistent-0")) == []
