"""What interrupted kafkatool runs left in a partition dir: journals, temp files, a staging dir."""

from __future__ import annotations

import os

from kafkatool.segment import files as names
from kafkatool.safety.durable import JOURNAL_SUFFIX, TEMP_SUFFIX
from kafkatool.safety.exchange import find_staging_dirs
from kafkatool.safety.journal import journal_temps

__all__ = [
    "TRUNCATE_JOURNAL",
    "find_pending_state",
]


TRUNCATE_JOURNAL = "kafkatool-truncate" + JOURNAL_SUFFIX
"""The partition-level journal of ``kafkatool truncate``: present between its commit point and its last rename/move."""
TRUNCATE_JOURNAL_NAME = TRUNCATE_JOURNAL  # the name kafkatool.repair gave it


def find_pending_state(partition_dir: str) -> list[tuple[str, str]]:
    """What interrupted kafkatool runs left for ``partition_dir``: ``(path, what it is)`` pairs.

    * a committed journal, and whose: ``kafkatool-truncate.kafkatool-journal`` is truncate's
      (its next ``--execute`` completes it: the temp files it names are pending state no
      other command may remove); ``<base>.kafkatool-journal`` is reindex's (its next run
      re-derives the files, the journal only marks the unfinished repair);
    * an uncommitted journal (``*.kafkatool-journal.kafkatool-tmp``) and temp files
      (``*.kafkatool-tmp``): a run cut short before its commit point; the partition's files
      are the old state, complete;
    * the staging dir beside the partition dir (:func:`find_staging_dirs`).

    The second element starts with one of ``truncate journal``, ``reindex journal``,
    ``journal``, ``pending temp file``, ``temp file``, ``staging dir``. Reads only; a
    partition dir that cannot be listed gives ``[]``.
    """
    partition_dir = os.path.abspath(partition_dir)
    try:
        entries = sorted(os.listdir(partition_dir))
    except OSError:
        entries = []
    out: list[tuple[str, str]] = []
    pending: dict[str, str] = {}  # temp name -> the command whose committed journal names it
    for n in entries:
        if not n.endswith(JOURNAL_SUFFIX):
            continue
        p = os.path.join(partition_dir, n)
        if n == TRUNCATE_JOURNAL:
            out.append((p, "truncate journal: an interrupted `kafkatool truncate --execute` committed it; "
                           "`kafkatool truncate --execute` on this partition dir completes it"))
            pending.update(dict.fromkeys(journal_temps(p), "truncate"))
        elif names.sibling(n, "").isdigit():  # <base offset>.kafkatool-journal
            out.append((p, "reindex journal: an interrupted `kafkatool reindex --execute` committed it; "
                           "the next `kafkatool reindex --execute` rebuilds the files and removes it"))
        else:
            out.append((p, "journal: left by an interrupted kafkatool run"))
    for n in entries:
        if not n.endswith(TEMP_SUFFIX):
            continue
        p = os.path.join(partition_dir, n)
        if n.endswith(JOURNAL_SUFFIX + TEMP_SUFFIX):
            out.append((p, "temp file: an uncommitted journal of an interrupted kafkatool run (the partition's files are the old state)"))
        elif n in pending:
            out.append((p, f"pending temp file: named by the {pending[n]} journal, which puts it in place"))
        else:
            out.append((p, "temp file: left by an interrupted kafkatool run before its commit point"))
    for s in find_staging_dirs(partition_dir):
        out.append((s, "staging dir: of an interrupted kafkatool run, named like a partition being deleted; "
                       "the partition dir itself is complete"))
    return out
