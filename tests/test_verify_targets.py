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
