"""What counts as "something Kafka" when verify searches a tree (issue 9: `verify /etc` said clean)."""

from __future__ import annotations

import shutil
from pathlib import Path

from click.testing import CliRunner

from kafkatool.cli.main import cli

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "logdir" / "golden-0" / "00000000000000000000.log"


def _verify(*args: str):
    return CliRunner().invoke(cli, ["verify", *args])


def test_a_tree_whose_only_partition_like_dir_holds_nothing_kafka_is_refused(tmp_path):
    # like /etc: config files, and dbus-1 (named like partition 1 of a topic "dbus") holding none of Kafka's files
    (tmp_path / "adduser.conf").write_text("x\n")
    (tmp_path / "dbus-1").mkdir()
    (tmp_path / "dbus-1" / "session.conf").write_text("x\n")
    r = _verify(str(tmp_path))
    assert r.exit_code == 2, r.output
    assert "nothing Kafka found" in r.output


def test_the_same_dir_with_a_segment_in_it_is_verified(tmp_path):
    (tmp_path / "adduser.conf").write_text("x\n")
    (tmp_path / "dbus-1").mkdir()
    shutil.copyfile(GOLDEN, tmp_path / "dbus-1" / GOLDEN.name)
    r = _verify("--format", "text", str(tmp_path))
    assert r.exit_code in (0, 1), r.output
    assert "nothing Kafka" not in r.output


def test_an_empty_partition_dir_given_by_name_is_kafka(tmp_path):
    (tmp_path / "orders-3").mkdir()
    r = _verify(str(tmp_path / "orders-3"))
    assert "nothing Kafka found" not in r.output


def test_a_log_dir_of_many_partitions_tests_each_dir_once(tmp_path, monkeypatch):
    # expand_targets once tested "is this directory a partition" for every entry a directory held:
    # quadratic in a log dir's partition count (4,000 partitions: 16 M name tests, ~15 s)
    from kafkatool.verify import discovery

    log_dir = tmp_path / "data"
    log_dir.mkdir()
    (log_dir / "meta.properties").write_text("version=1\n")
    for i in range(300):
        (log_dir / f"t-{i}").mkdir()
    calls = []
    real = discovery._is_partition
    monkeypatch.setattr(discovery, "_is_partition", lambda t: calls.append(t) or real(t))
    groups = discovery.expand_targets([str(log_dir)])
    assert len(groups) >= 300
    per_dir: dict[int, int] = {}
    for t in calls:
        per_dir[id(t)] = per_dir.get(id(t), 0) + 1
    assert max(per_dir.values()) <= 2, f"a directory tested {max(per_dir.values())} times"  # the search, the walk
