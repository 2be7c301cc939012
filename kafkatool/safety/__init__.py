"""The write-safety layer every command that writes goes through (spec §2.1, §11.5, §12.3).

A command plans (reads only), then applies through :func:`apply_locked`, which takes the
log dirs' locks and hands each partition dir to the command's apply function. That function
writes with the pieces here, and with nothing else:

* :mod:`~kafkatool.safety.lock` — :class:`LogDirLock` refuses to touch a log dir a live
  broker holds (a POSIX ``fcntl`` lock on ``<logdir>/.lock``, held for the whole write);
* :mod:`~kafkatool.safety.backup` — :class:`Backup` keeps every byte a command removes or
  replaces, outside the log dir, with a ``MANIFEST.json`` (:mod:`~kafkatool.safety.manifest`),
  a ``RESTORE.txt`` and a ``SHA256SUMS`` (:mod:`~kafkatool.safety.restore_script`);
  :class:`TruncateBackup` adds removed byte ranges and whole moved files;
* :mod:`~kafkatool.safety.exchange` — :func:`exchange_partition` builds the partition dir's
  new state beside it and switches the two in one ``renameat2(RENAME_EXCHANGE)``;
* :mod:`~kafkatool.safety.journal` — the fallback when the exchange cannot be used: temp
  files, one journal format (the commit point), renames, and :func:`roll_forward` to
  complete an interrupted one;
* :mod:`~kafkatool.safety.pending` — :func:`find_pending_state`: what interrupted runs left;
* :mod:`~kafkatool.safety.durable` — the errors, durable small writes and the crash-test
  hook :func:`fault_point` (every write step is one, so a test can SIGKILL a run at each).

``from kafkatool.safety import X`` works for every name of these modules' public surface.
No click and no rich here.
"""

from kafkatool.safety.durable import (
    COPY_CHUNK,
    FAULT_ENV,
    JOURNAL_SUFFIX,
    TEMP_SUFFIX,
    LiveBrokerError,
    PartitionRefused,
    RepairError,
    TransitionalDirError,
    WriteError,
    fault_point,
    fsync_dir,
    fsync_fd,
    hash_file,
    iter_range,
    log_dir_of,
    read_or_none,
    real_log_dir_of,
    reset_fault_count,
    sha256_hex,
    take_owner,
    write_all,
    write_durably,
    write_error,
)
from kafkatool.safety.lock import LogDirLock, describe_pid, lock_holder
from kafkatool.safety.manifest import (
    ACTIONS,
    DIR_MODE,
    MANIFEST,
    MANIFEST_FORMAT,
    RESTORE_SCRIPT,
    SUMS,
    BackupEntry,
    FileState,
    Manifest,
    Piece,
    mode_text,
    parse_manifest,
    read_manifest,
)
from kafkatool.safety.restore_script import render_restore_script, render_sums
from kafkatool.safety.backup import Backup, BackupLocationError, TruncateBackup, check_backup_location, default_backup_dir
from kafkatool.safety.exchange import (
    NO_EXCHANGE_ENV,
    STAGING_TAG,
    ExchangeUnavailable,
    exchange_dirs,
    exchange_partition,
    exchange_unavailable,
    find_staging_dirs,
    is_staging_dir,
    link_or_copy,
    naming,
    new_file,
    remove_staging_dirs,
    stage_file,
    staging_dir_name,
    stat_or_none,
    unlink_all,
)
from kafkatool.safety.journal import (
    JOURNAL_VERSION,
    StaleJournalError,
    commit_journal,
    describe_identity,
    differs,
    identity,
    journal_backup_dir,
    journal_path,
    journal_record,
    journal_temps,
    journal_work,
    make_temp,
    move_file,
    named,
    plain_name,
    read_journal,
    replace_files,
    roll_forward,
    sha256_nofollow,
    way_out,
    write_atomically,
)
from kafkatool.safety.pending import TRUNCATE_JOURNAL, find_pending_state
from kafkatool.safety.apply import apply_locked, check_partition_dir

__all__ = [
    # durable
    "COPY_CHUNK", "FAULT_ENV", "JOURNAL_SUFFIX", "TEMP_SUFFIX", "LiveBrokerError", "PartitionRefused", "RepairError",
    "TransitionalDirError", "WriteError", "fault_point", "fsync_dir", "fsync_fd", "hash_file", "iter_range",
    "log_dir_of", "read_or_none", "real_log_dir_of", "reset_fault_count", "sha256_hex", "take_owner", "write_all",
    "write_durably", "write_error",
    # lock
    "LogDirLock", "describe_pid", "lock_holder",
    # backup
    "ACTIONS", "DIR_MODE", "MANIFEST", "MANIFEST_FORMAT", "RESTORE_SCRIPT", "SUMS", "Backup", "BackupEntry",
    "BackupLocationError", "FileState", "Manifest", "Piece", "TruncateBackup", "check_backup_location",
    "default_backup_dir", "mode_text", "parse_manifest", "read_manifest", "render_restore_script", "render_sums",
    # exchange
    "NO_EXCHANGE_ENV", "STAGING_TAG", "ExchangeUnavailable", "exchange_dirs", "exchange_partition",
    "exchange_unavailable", "find_staging_dirs", "is_staging_dir", "link_or_copy", "naming", "new_file",
    "remove_staging_dirs", "stage_file", "staging_dir_name", "stat_or_none", "unlink_all",
    # journal
    "JOURNAL_VERSION", "StaleJournalError", "commit_journal", "describe_identity", "differs", "identity", "named",
    "plain_name", "sha256_nofollow", "way_out", "journal_backup_dir", "journal_path", "journal_record",
    "journal_temps", "journal_work", "make_temp", "move_file", "read_journal", "replace_files", "roll_forward",
    "write_atomically",
    # pending, apply
    "TRUNCATE_JOURNAL", "find_pending_state", "apply_locked", "check_partition_dir",
]
