"""A log dir whose own name looks like a partition dir's (``kafka-logs-1``, ``data-2``, a case
bundle ``case-7``) and that holds partition dirs is read as a log dir by every command, never as
one empty partition: that would be a false all-clear (``transactions`` saying nothing is open,
``stats``/``verify`` checking zero segments). Without ``meta.properties`` only its contents tell."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kafkatool.segment.logdir import expand, iter_partitions

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "logdir"


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    """Two partition dirs copied into ``kafka-logs-1`` (no meta.properties, no checkpoints)."""
    root = tmp_path / "kafka-logs-1"
    root.mkdir()
    for name in ("golden-0", "txn-0"):
        shutil.copytree(FIXTURES / name, root / name)
    return root


def test_iter_partitions_goes_into_it(bundle: Path) -> None:
    assert sorted(p.path for p in iter_partitions(expand([str(bundle)]))) == [
        str(bundle / "golden-0"), str(bundle / "txn-0")]


def test_an_empty_partition_dir_named_like_one_is_still_a_partition(tmp_path: Path) -> None:
    """The rule keys on partition dirs inside, not on the name: a new, empty ``orders-3`` stays a partition."""
    (tmp_path / "orders-3").mkdir()
    assert [p.path for p in iter_partitions(expand([str(tmp_path / "orders-3")]))] == [str(tmp_path / "orders-3")]


def test_stats_reads_its_partitions(run, bundle: Path) -> None:
    res = run("stats", "--format", "jsonl", "-q", str(bundle))
    assert res.code == 0, res.err
    parts = sorted(o["partitionDir"] for o in map(json.loads, res.out.splitlines()) if o.get("type") == "partition")
    assert parts == [str(bundle / "golden-0"), str(bundle / "txn-0")]


def test_verify_checks_its_segments(run, bundle: Path) -> None:
    res = run("verify", str(bundle))
    assert res.code == 0, res.out + res.err
    assert "(2 segments, 13 batches," in res.err, res.out + res.err


def test_transactions_reads_its_partitions(run, bundle: Path) -> None:
    res = run("transactions", "-q", "--format", "jsonl", str(bundle))
    parts = sorted(o["partitionDir"] for o in map(json.loads, res.out.splitlines()) if o["type"] == "partition")
    assert parts == [str(bundle / "golden-0"), str(bundle / "txn-0")]
