"""The driver every plan/apply command shares: one lock per log dir, every lock taken before
the first write, one backup per backup dir, one partition dir at a time."""

from __future__ import annotations

import os
from typing import Callable, Sequence

from kafkatool.segment import files as names
from kafkatool.safety.backup import check_backup_location
from kafkatool.safety.durable import PartitionRefused, TransitionalDirError, real_log_dir_of
from kafkatool.safety.lock import LogDirLock

__all__ = [
    "apply_locked",
    "check_partition_dir",
]


def check_partition_dir(partition_dir: str, allow_transitional: bool = False) -> None:
    """Refuse a ``-delete``/``-future``/``-stray`` partition dir unless asked (§2.1, §19)."""
    pd = names.parse_partition_dir(os.path.basename(os.path.abspath(partition_dir)))
    if pd is not None and pd.state is not None and not allow_transitional:
        raise TransitionalDirError(
            f"partition dir is marked '-{pd.state}' (being deleted, moved or stray); "
            "pass --allow-transitional to repair it anyway",
            path=partition_dir,
        )


def apply_locked(
    plans: Sequence,
    backup_dir: Callable[[str], str] | str,
    apply: Callable,
    new_backup: Callable[[str], object],
    *,
    force: bool = False,
    allow_transitional: bool = False,
    on_report: Callable | None = None,
    on_start: Callable[[str], None] | None = None,
    on_refused: Callable[[Sequence, "PartitionRefused"], None] | None = None,
) -> list:
    """Apply the plans that need changes under one lock per log dir, every lock taken before
    the first write and held until the last (shared by reindex and truncate).

    ``apply(plans, backup)`` applies the plans of one partition dir (one exchange for all
    of them) and returns their reports; ``new_backup(root)`` makes the backup of a backup
    directory; ``backup_dir`` is a directory, or a function of the log dir giving one.
    ``on_start(partition_dir)`` is called before each partition is applied (for a report of
    what an interrupted run left where: :func:`kafkatool.cli.options.apply_states`). With
    ``on_refused``, a :class:`PartitionRefused` of one partition is handed to it with that
    partition's plans and the others go on; without it, it propagates.
    """
    for p in plans:
        check_partition_dir(p.partition_dir, allow_transitional)
    by_logdir: dict[str, list] = {}
    for p in plans:
        if p.needs_changes:
            by_logdir.setdefault(real_log_dir_of(p.partition_dir), []).append(p)  # symlinks resolved: the real .lock
    roots = {d: backup_dir(d) if callable(backup_dir) else backup_dir for d in by_logdir}
    for root in dict.fromkeys(roots.values()):
        check_backup_location(root, by_logdir)  # before anything is written, .lock included
    reports = []
    locks = [LogDirLock(d, force=force) for d in by_logdir]
    try:
        for lock in locks:  # every lock before the first write
            lock.acquire()
        backups: dict[str, object] = {}
        for log_dir, group in by_logdir.items():
            root = roots[log_dir]
            by_partition: dict[str, list] = {}
            for p in group:
                by_partition.setdefault(p.partition_dir, []).append(p)
            for partition_dir, partition_plans in by_partition.items():
                backup = backups.get(root)
                if backup is None:  # made on first use: a run that refuses everything leaves no backup dir
                    backup = backups[root] = new_backup(root)
                if on_start is not None:
                    on_start(partition_dir)
                try:
                    done = apply(partition_plans, backup)
                except PartitionRefused as e:
                    if on_refused is None:
                        raise
                    on_refused(partition_plans, e)
                    continue
                for report in done:
                    reports.append(report)
                    if on_report is not None:
                        on_report(report)
    finally:
        for lock in locks:
            lock.release()
    return reports
