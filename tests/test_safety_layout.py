"""Where the write-safety layer lives, and that the old names still import.

Issue 10 split ``kafkatool/repair.py`` (lock glue, backup, journal, exchange, fault injection and
reindex planning) and made ``kafkatool/safety.py`` a package. A caller of the old modules (a
script, a notebook) keeps working: every name the old ``repair.__all__`` and ``safety.py``
offered is still importable from there, and is the very object of its new home.
"""

from __future__ import annotations

import importlib

import pytest

# kafkatool/repair.py's __all__ before the split (commit 0c3e9d3), and where each name went
OLD_REPAIR = {
    "kafkatool.safety": [
        "RepairError", "LiveBrokerError", "TransitionalDirError", "LogDirLock", "Backup", "replace_files",
        "write_atomically", "exchange_partition", "exchange_unavailable", "ExchangeUnavailable", "staging_dir_name",
        "find_staging_dirs", "remove_staging_dirs", "is_staging_dir", "link_or_copy", "STAGING_TAG", "NO_EXCHANGE_ENV",
        "find_pending_state", "PartitionRefused", "apply_locked", "check_partition_dir", "default_backup_dir",
        "log_dir_of", "TEMP_SUFFIX", "JOURNAL_SUFFIX", "FAULT_ENV", "stage_file", "unlink_all",
    ],
    "kafkatool.reindex": [
        "FileChange", "ReindexPlan", "ReindexReport", "plan_reindex", "plan_reindex_all", "apply_reindex",
        "apply_reindex_partition", "index_findings", "refused_plan", "apply_all", "COVERAGE_SLACK",
    ],
    "kafkatool.targets": ["find_segments", "scan_targets", "Targets", "TargetProblem"],
    "kafkatool.repair": ["walk_as_recovery"],
}

# kafkatool/safety.py's public names before it became a package
OLD_SAFETY = [
    "TEMP_SUFFIX", "JOURNAL_SUFFIX", "FAULT_ENV", "COPY_CHUNK", "RepairError", "LiveBrokerError", "TransitionalDirError",
    "fault_point", "WriteError", "write_error", "fsync_dir", "sha256_hex", "read_or_none", "write_all", "fsync_fd",
    "write_durably", "hash_file", "iter_range", "log_dir_of", "real_log_dir_of", "lock_holder", "describe_pid",
    "LogDirLock", "MANIFEST", "RESTORE_SCRIPT", "SUMS", "MANIFEST_FORMAT", "DIR_MODE", "default_backup_dir",
    "BackupLocationError", "check_backup_location", "FileState", "Piece", "ACTIONS", "BackupEntry", "Manifest",
    "parse_manifest", "read_manifest", "take_owner", "Backup", "TruncateBackup", "render_restore_script", "render_sums",
]


@pytest.mark.parametrize("home,name", [(h, n) for h, ns in OLD_REPAIR.items() for n in ns])
def test_every_old_repair_name_still_imports_and_is_its_new_home(home: str, name: str) -> None:
    repair = importlib.import_module("kafkatool.repair")
    assert getattr(repair, name) is getattr(importlib.import_module(home), name)


def test_an_unknown_repair_name_is_an_attribute_error() -> None:
    repair = importlib.import_module("kafkatool.repair")
    with pytest.raises(AttributeError):
        repair.no_such_name  # noqa: B018
    with pytest.raises(ImportError):
        exec("from kafkatool.repair import no_such_name", {})


@pytest.mark.parametrize("name", OLD_SAFETY)
def test_every_old_safety_name_still_imports(name: str) -> None:
    safety = importlib.import_module("kafkatool.safety")
    assert name in safety.__all__
    assert getattr(safety, name) is not None


def test_the_copy_chunk_of_the_backup_is_the_old_one() -> None:
    """Two COPY_CHUNKs existed (safety: 1 MiB for backups, repair: 8 MiB for staging); the
    package's is the backup's, as ``from kafkatool.safety import COPY_CHUNK`` gave before."""
    from kafkatool.safety import COPY_CHUNK
    from kafkatool.safety.exchange import STAGE_CHUNK

    assert (COPY_CHUNK, STAGE_CHUNK) == (1 << 20, 8 << 20)
