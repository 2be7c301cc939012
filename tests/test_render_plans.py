"""render/plans.py: the plan and report lines the CLI of reindex, truncate and restore prints.

Expected strings are written out by hand from the command's documented output (one line per
item, the action word in a 9-character column); the whole outputs are also diffed against the
pre-refactor tree by bench/compare_outputs.py.
"""

from __future__ import annotations

from types import SimpleNamespace

from kafkatool.render.plans import done_line, method_phrase, plural, problem_line, problem_object, report_fields


def test_plural() -> None:
    assert [plural(0, "file"), plural(1, "file"), plural(2, "batch", "batches")] == ["0 files", "1 file", "2 batches"]


def test_done_line_names_the_method_and_the_backup() -> None:
    assert done_line("2 files written and re-verified", "exchange", "/bk", "originals") == (
        "  done      2 files written and re-verified (the partition dir switched at once); originals in /bk")
    assert done_line("1 file written", "journal (no renameat2)", None, "originals") == (
        "  done      1 file written (renamed one by one under a journal: no renameat2)")
    assert method_phrase("journal (a (nested) why)") == "renamed one by one under a journal: a (nested) why"


def test_problems() -> None:
    skipped = SimpleNamespace(path="/l/x", kind="skipped", message="a kafkatool backup dir")
    bad = SimpleNamespace(path="/l/y.log", kind="invalid_segment_name", message="not an offset")
    assert problem_line(skipped) == "/l/x: skipped: a kafkatool backup dir"
    assert problem_line(bad) == "/l/y.log: not an offset"
    assert problem_object("truncate", bad) == {"type": "truncate_problem", "path": "/l/y.log",
                                                "kind": "invalid_segment_name", "message": "not an offset"}


def test_report_fields_keep_each_commands_order() -> None:
    reindex = SimpleNamespace(written=("a",), removed_leftovers=(), backup_dir="/bk", method="exchange", verified=True)
    truncate = SimpleNamespace(written=("a",), moved=("b",), removed_leftovers=("c",), backup_dir="/bk",
                               completed_journal=False, method=None, verified=True)
    assert list(report_fields(reindex)) == ["written", "removed", "backupDir", "method", "verified"]
    assert list(report_fields(truncate)) == ["written", "moved", "removed", "backupDir", "completedInterruptedRun",
                                             "method", "verified"]
    assert report_fields(truncate)["moved"] == ["b"]
