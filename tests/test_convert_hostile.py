"""convert to DEST never copies a file through a symbolic link: a side file linked to a file
elsewhere (a secret) is listed "not copied", or, where the segment needs it, refused by name;
the linked file's bytes never reach DEST."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from click.testing import CliRunner

from kafkatool.cli.main import cli

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "logdir"
SECRET = b"root:$6$not-a-kafka-file$:19000:0:99999:7:::\n"


def _run(*args: str):
    return CliRunner().invoke(cli, ["convert", *args], catch_exceptions=False)


def _all_bytes(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink())


def _secret(tmp_path: Path) -> Path:
    secret = tmp_path / "elsewhere" / "shadow"
    secret.parent.mkdir()
    secret.write_bytes(SECRET)
    return secret


def test_a_linked_leader_epoch_checkpoint_is_not_copied(tmp_path: Path) -> None:
    part = tmp_path / "src" / "v2-none-0"
    shutil.copytree(FIXTURES / "v2-none-0", part)
    (part / "leader-epoch-checkpoint").unlink()
    (part / "leader-epoch-checkpoint").symlink_to(_secret(tmp_path))
    result = _run("--to-magic", "1", "--compression", "gzip", str(part), str(tmp_path / "dest"))
    assert result.exit_code == 0, result.output
    assert "not copied leader-epoch-checkpoint (not a regular file (a symbolic link, never followed" in result.stderr
    assert not (tmp_path / "dest" / "leader-epoch-checkpoint").exists()
    assert SECRET not in _all_bytes(tmp_path / "dest")


def test_a_linked_checkpoint_of_a_log_dir_is_not_copied(tmp_path: Path) -> None:
    log_dir = tmp_path / "src"
    shutil.copytree(FIXTURES, log_dir)
    (log_dir / "recovery-point-offset-checkpoint").unlink()
    (log_dir / "recovery-point-offset-checkpoint").symlink_to(_secret(tmp_path))
    result = _run("--to-magic", "2", str(log_dir), str(tmp_path / "dest"))
    assert result.exit_code == 0, result.output
    assert "recovery-point-offset-checkpoint (not a regular file (a symbolic link, never followed" in result.stderr
    assert not os.path.lexists(tmp_path / "dest" / "recovery-point-offset-checkpoint")
    assert (tmp_path / "dest" / "replication-offset-checkpoint").is_file()  # its unlinked neighbour is copied
    assert SECRET not in _all_bytes(tmp_path / "dest")


def test_a_linked_producer_snapshot_is_not_copied(tmp_path: Path) -> None:
    part = tmp_path / "src" / "golden-0"
    shutil.copytree(FIXTURES / "golden-0", part)
    snap = part / "00000000000000000003.snapshot"
    snap.unlink()
    snap.symlink_to(_secret(tmp_path))
    result = _run("--to-magic", "2", "--compression", "zstd", str(part), str(tmp_path / "dest"))
    assert result.exit_code == 0, result.output
    assert "not copied 00000000000000000003.snapshot (not a regular file (a symbolic link, never followed" in result.stderr
    assert not os.path.lexists(tmp_path / "dest" / "00000000000000000003.snapshot")
    assert SECRET not in _all_bytes(tmp_path / "dest")


def test_a_linked_txnindex_is_refused_by_name_and_nothing_is_written(tmp_path: Path) -> None:
    """The segment's own .txnindex, which a v2 output copies, is a link: the run stops (exit 2)
    naming it, before DEST exists."""
    part = tmp_path / "src" / "txn-0"
    shutil.copytree(FIXTURES / "txn-0", part)
    txn = part / "00000000000000000100.txnindex"
    txn.unlink()
    txn.symlink_to(_secret(tmp_path))
    result = _run("--to-magic", "2", "--compression", "zstd", str(part), str(tmp_path / "dest"))
    assert result.exit_code == 2, result.output
    assert f"{txn}: a symbolic link where a side file belongs" in result.stderr
    assert not (tmp_path / "dest").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere", "src"]  # no temp dir left
