"""The verify operation: every damaged region of segments, partitions and log dirs.

:func:`verify_paths` yields :class:`Finding` items (and one :class:`FileSummary` per file)
for segment files, side files, partition directories and whole log dirs. It is
read-only: nothing is written or created, and a directory a live broker holds can be
checked.

Checks (stable kind names in :data:`KINDS`):

* per batch, shallow: the §3 framing, size bounds, magic, codec id, CRC-32C / CRC-32,
  offsets (lastOffsetDelta vs count, monotonic within and across segments, inside the
  segment's base offset and the int32 relative range), timestamps, producer fields;
* ``deep``: every record decoded (count, varints, lengths, offset and timestamp deltas,
  headers, legacy inner CRCs, control records), with a cap on decompressed size;
* after a bad region the walk *resynchronises*: it searches forward for the next position
  where a batch with a valid CRC begins, reports the bad region's start and length, and
  goes on, counting the good batches Kafka's recovery would throw away;
* side files: ``.index``/``.timeindex`` (Kafka's sanity check and a full check against the
  log), ``.txnindex`` against the ABORT markers, producer ``.snapshot`` files,
  ``leader-epoch-checkpoint`` against the batches' leader epochs, text checkpoints;
* the files and directories themselves: what cannot be read, names the broker cannot parse,
  non-regular files with Kafka names, directories a log dir must not hold, and what an
  interrupted ``reindex``/``truncate --execute`` left (journals, temp files, staging dirs).

A zero-filled tail (``log.preallocate=true``) is passed at memory speed (``segment.zeros``).

The package, by concern: ``findings`` (:class:`Finding`, :class:`FindingKind`,
:class:`FileSummary`), ``options`` (:class:`VerifyOptions`, the ``--max-rate`` clock),
``discovery`` (command-line paths to targets, on :mod:`kafkatool.segment.logdir`), ``batches``
(the shallow per-batch checks, the ``Scanner`` and its ``ScanState``), ``deep`` (the record
checks of ``--deep``), ``segments`` (one ``.log`` whole: bad regions and what follows them),
``resync``, ``sidefiles`` (indexes, snapshots, checkpoints) and ``workers`` (the compiled scan,
``--jobs``). This module runs a partition's files through them in order.
"""

from __future__ import annotations

import os
from typing import Iterable, Iterator

from kafkatool.segment import files as names
from kafkatool.verify.discovery import PENDING_MARK, Target, expand_targets  # noqa: F401 - PENDING_MARK: read by the tests
from kafkatool.verify.findings import INFO_KINDS, KINDS, FileSummary, Finding, FindingKind
from kafkatool.verify.options import VerifyOptions, start_rate_clock
from kafkatool.verify.batches import PartitionFacts
from kafkatool.verify.resync import resync
from kafkatool.verify.segments import verify_log
from kafkatool.verify.sidefiles import verify_side_file
from kafkatool.verify.workers import SPLIT_MIN_BYTES
from kafkatool.verify.workers import scan_fd as _scan_fd  # (read by the pure-Python switch's test)
from kafkatool.verify.workers import scan_v2 as _scan_v2

__all__ = [
    "KINDS", "INFO_KINDS", "FindingKind", "Finding", "FileSummary", "VerifyOptions", "SPLIT_MIN_BYTES",
    "verify_paths", "verify_group", "expand_targets", "start_rate_clock", "resync",
]


def verify_paths(paths: Iterable[str], opts: VerifyOptions, on_bytes=None) -> Iterator[Finding | FileSummary]:
    """Check every file under ``paths``; yield findings, then a summary, per file.

    ``on_bytes(n)`` (optional) is called as segment bytes are checked, for progress bars.
    """
    start_rate_clock()
    for group in expand_targets(paths):
        yield from verify_group(group, opts, on_bytes)


def verify_group(group: list[Target], opts: VerifyOptions, on_bytes=None) -> Iterator[Finding | FileSummary]:
    """Check the files of one partition directory (or loose files) in segment order."""
    part = PartitionFacts()
    part.on_bytes = on_bytes
    present: set[str] = set()
    for d in {os.path.dirname(t.path) for t in group if t.problem is None}:
        try:
            present.update(os.listdir(d or "."))
        except OSError:
            pass
    # Each segment, then at once its own index files (while its facts are at hand: they are
    # dropped afterwards, so memory does not grow with the number of segments); then the rest
    # (snapshots and checkpoints, which need the whole partition's log end and epochs).
    logs = [t for t in group if t.problem is None and names.file_suffix(os.path.basename(t.path)) == ".log"]
    side: dict[str, list[Target]] = {}
    others = []
    log_paths = {t.path for t in logs}
    for t in group:
        if t in logs or t.problem is not None:
            continue
        log = names.sibling(t.path, names.LOG_SUFFIX)  # the segment the file belongs to
        if names.file_suffix(os.path.basename(t.path)) in (".index", ".timeindex", ".txnindex") and log in log_paths:
            side.setdefault(log, []).append(t)
        else:
            others.append(t)
    for t in group:
        if t.problem is not None:
            kind, message = t.problem
            yield Finding(t.path, None, None, kind, message)
            yield FileSummary(t.path, kind, 0, 0, 1, t.state)
    for t in logs:
        yield from _guard(t, lambda t=t: verify_log(t, opts, part, present))
        for s in side.get(names.sibling(t.path, names.LOG_SUFFIX), ()):
            yield from _guard(s, lambda s=s: verify_side_file(s, opts, part, present))
        for facts in part.segments.values():
            facts.release()
    for t in others:
        yield from _guard(t, lambda t=t: verify_side_file(t, opts, part, present))


def _guard(t: Target, fn) -> Iterator[Finding | FileSummary]:
    try:
        yield from fn()
    except OSError as e:
        yield Finding(t.path, None, None, FindingKind.UNREADABLE, f"cannot read the file: {e.strerror or e}")
        yield FileSummary(t.path, FindingKind.UNREADABLE, 0, 0, 1, t.state)
