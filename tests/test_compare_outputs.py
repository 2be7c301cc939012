"""bench/compare_outputs.py, the before/after output check of issue 10, can fail.

Its normalization hides only what differs between any two runs (the scratch root, UTC stamps,
pids, elapsed seconds), and a tree that prints one character differently is reported.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SPEC = importlib.util.spec_from_file_location("compare_outputs", ROOT / "bench" / "compare_outputs.py")
compare_outputs = importlib.util.module_from_spec(SPEC)
sys.modules["compare_outputs"] = compare_outputs
SPEC.loader.exec_module(compare_outputs)


def test_normalizer_hides_run_specific_values_only():
    work = Path("/tmp/kt-compare-abc123")
    normalize = compare_outputs.normalizer(work)
    out = normalize(
        b"originals in /tmp/kt-compare-abc123/scn/x/kafkatool-backup-logdir-20261125T172336059182Z\n"
        b'{"run":"20261125T172336059715Z-11699-1","pid":11699,"started":"2026-11-25T17:23:36Z","seconds":0.035}\n'
        b"Checked 78 files (18 segments) in 0.03 s: no failing findings\n"
        b"offset: 20261125 position: 11699 CreateTime: 1700000000091 size: 930\n"
    )
    assert out == (
        b"originals in <WORK>/scn/x/kafkatool-backup-logdir-<STAMP>\n"
        b'{"run":"<STAMP>-<PID>-1","pid":<PID>,"started":"<TIME>","seconds":<SECONDS>}\n'
        b"Checked 78 files (18 segments) in <SECONDS>: no failing findings\n"
        b"offset: 20261125 position: 11699 CreateTime: 1700000000091 size: 930\n"
    )


def test_first_difference_names_the_stream():
    same = compare_outputs.Result(0, b"a\n", b"")
    assert compare_outputs.first_difference(same, compare_outputs.Result(0, b"a\n", b""), bytes) is None
    diff = compare_outputs.first_difference(same, compare_outputs.Result(1, b"a\n", b""), bytes)
    assert "exit status" in diff and "-0" in diff and "+1" in diff
    diff = compare_outputs.first_difference(same, compare_outputs.Result(0, b"a", b""), bytes)
    assert "stdout" in diff  # only the final newline differs
    old = compare_outputs.Result(0, b"", b"", tree=b"x file 644 3\n")
    assert "files" in compare_outputs.first_difference(old, compare_outputs.Result(0, b"", b"", tree=b"x file 600 3\n"), bytes)


def _tree(tmp_path: Path, name: str) -> Path:
    tree = tmp_path / name
    shutil.copytree(ROOT / "kafkatool", tree / "kafkatool", ignore=shutil.ignore_patterns("__pycache__"))
    return tree


@pytest.mark.skipif(not (ROOT / "fixtures" / "logdir").is_dir(), reason="no sample log dir")
def test_a_changed_output_string_is_reported(tmp_path, capsys):
    old, new = _tree(tmp_path, "old"), _tree(tmp_path, "new")
    cli = new / "kafkatool" / "cli" / "verify.py"
    text = cli.read_text()
    assert "Read-only: nothing is written" in text
    cli.write_text(text.replace("Read-only: nothing is written", "Read-only: nothing is  written"))
    args = ["--sample", str(ROOT / "fixtures" / "logdir"), "--real", str(tmp_path / "none"), "-j", "1",
            "-k", "verify --help", "-k", "dump --help"]

    assert compare_outputs.main([str(old), str(new), *args]) == 1
    out = capsys.readouterr().out
    assert "same  dump --help" in out
    assert "DIFF  verify --help" in out
    assert "-  Read-only: nothing is written" in out and "+  Read-only: nothing is  written" in out
    assert out.rstrip().splitlines()[-1].startswith("2 cases (2 read-only commands, 0 writing scenarios) in ")
    assert "1 same, 1 differ" in out

    assert compare_outputs.main([str(old), str(old), *args]) == 0
    assert "0 differ" in capsys.readouterr().out


@pytest.mark.skipif(not (ROOT / "fixtures" / "logdir").is_dir(), reason="no sample log dir")
def test_a_changed_written_file_is_reported(tmp_path, capsys):
    old, new = _tree(tmp_path, "old"), _tree(tmp_path, "new")
    # the new tree writes the rebuilt .index one byte longer: only the file tree differs
    main = new / "kafkatool" / "__main__.py"
    main.write_text(
        "import atexit, glob, os, sys\n"
        "def _grow():\n"
        "    if '--execute' in sys.argv and sys.argv[1:2] == ['reindex']:\n"
        "        for p in glob.glob(sys.argv[-1] + '/v0-none-0/*.index'):\n"
        "            open(p, 'ab').write(b'\\0')\n"
        "atexit.register(_grow)\n" + main.read_text()
    )
    args = ["--sample", str(ROOT / "fixtures" / "logdir"), "--real", str(tmp_path / "none"), "-j", "1",
            "-k", "reindex-damaged"]
    assert compare_outputs.main([str(old), str(new), *args]) == 1
    out = capsys.readouterr().out
    assert "DIFF  reindex-damaged #1: reindex --execute --format jsonl {root}/logdir\n--- old files\n+++ new files" in out
    assert "logdir/v0-none-0/00000000000000000000.index file 644" in out
