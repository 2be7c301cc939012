"""The broker's recovery walk, offline: what ``reindex`` and ``truncate`` share (spec §12.2).

:func:`walk_as_recovery` is ``LogSegment.recover``'s loop: it walks a segment from a byte
position, feeds every batch recovery would keep to an
:class:`~kafkatool.segment.index.IndexBuilder`, and stops at the first batch recovery
refuses. Every batch that needs nothing more is indexed by the compiled loop
(``_speedups.index_v2``) when it is built, the others here.

Where things are: reindex planning and apply in :mod:`kafkatool.reindex`, truncate in
:mod:`kafkatool.truncate`; the lock, backup, exchange, journal and the apply driver they
share in :mod:`kafkatool.safety`; which segments a command line names in
:mod:`kafkatool.targets`. Every name this module held before the split is still importable
from it (module ``__getattr__`` below).
"""

from __future__ import annotations

from typing import Callable

from kafkatool.record.batch import Batch
from kafkatool.record.speedups import functions as _compiled  # the extension, unless not built or switched off
from kafkatool.segment.index import IndexAppendError, IndexBuilder
from kafkatool.segment.walk import SegmentWalker, WalkStop

(_index_v2,) = _compiled("index_v2")  # the compiled indexing loop, or None

__all__ = ["walk_as_recovery", "describe_stop"]


def describe_stop(walker: SegmentWalker, reason: str | None, position: int) -> str | None:
    """Why a walk ended before the end of its segment: ``reason`` (the batch recovery refused),
    else the walker's error, else a partial tail after ``position``; None when it reached the end."""
    if reason is not None:
        return reason
    if walker.stop is WalkStop.ERROR and walker.error is not None:
        return str(walker.error)
    if walker.stop is WalkStop.TAIL and walker.end > position:
        return f"{walker.path}:{position}: partial batch or short tail"
    return None


def walk_as_recovery(
    log_path: str,
    builder: IndexBuilder,
    *,
    start: int = 0,
    end: int | None = None,
    take_transactional: bool = True,
    check: Callable[[Batch], str | None] | None = None,
    on_batch: Callable[[Batch, object], None] | None = None,
    stop_after: Callable[[Batch, object], str | None] | None = None,
    on_refuse: Callable[[Batch, IndexAppendError | None], None] | None = None,
) -> tuple[SegmentWalker, int, int | None, int | None, tuple[int, str] | None]:
    """``LogSegment.recover``'s loop (§12.2) from ``start`` (to ``end``, a batch boundary, or the
    end of the file), feeding ``builder``: the batches go to its layout back to back after what
    it holds. Stops at the first batch recovery
    refuses: a CRC mismatch, ``check(batch)`` returning a reason, or one the index refuses
    (``on_refuse(batch, index error or None)`` is then called). ``stop_after(batch, data)``
    returning a reason stops the walk right after that batch, which is kept: recovery has
    already counted a batch whose producer-state update throws (a malformed transaction
    marker, §12.2 step 3); the bad position is then where the next batch starts.

    Every batch that needs nothing more is indexed by the compiled loop
    (``_speedups.index_v2``) when it is built; the others are handled here, with the loop's
    state synced around each. ``take_transactional=False`` keeps transactional batches here
    so that ``on_batch(batch, data)``, called for every batch indexed here, sees them all.

    Returns ``(walker, batches, first offset, last offset, (bad position, reason) or None)``;
    the walker (closed) says how the walk ended when no batch was refused.
    """
    batches, first, last = 0, None, None
    bad: tuple[int, str] | None = None
    shift = start - builder.valid_bytes  # file position minus the builder's layout position
    st = builder.scan_state(take_transactional) if _index_v2 is not None else None
    if st is not None:
        st.shift = shift
    window_scan = None if st is None else (lambda buf, rel, lim, file_pos, batch_type: _index_v2(buf, rel, lim, file_pos, batch_type, st))
    with SegmentWalker(log_path, start=start, end=end, window_scan=window_scan) as walker:
        for batch, data in walker:
            if st is not None:  # what the compiled loop did up to this batch
                builder.load_scan_state(st)
                batches, first, last = st.batches, st.first, st.last
            # one unpack instead of property calls (a legacy entry's lastOffsetDelta is 0, so
            # offset + delta is its last offset too)
            (position, size, offset, _magic, crc, _attrs, lod, _bts, mts, _pid, _pepoch, _bseq, _count, _ple, computed) = batch
            if crc != computed:
                reason = f"{log_path}:{position}: batch CRC mismatch (stored crc {crc}, computed crc {computed})"
            else:
                reason = None if check is None else check(batch)
            index_error = None
            if reason is None:
                try:
                    builder.add_batch(position - shift, size, offset + lod, mts)
                except IndexAppendError as e:  # the builder is left as it was
                    reason = f"{log_path}:{position}: {e.message}"
                    index_error = e
            if reason is not None:
                bad = (position, reason)
                if on_refuse is not None:
                    on_refuse(batch, index_error)
                break
            batches += 1
            if first is None:
                first = offset
            last = offset + lod
            if on_batch is not None:
                on_batch(batch, data)
            if stop_after is not None and (reason := stop_after(batch, data)) is not None:
                bad = (position + size, reason)
                break
            if st is not None:
                builder.store_scan_state(st)
                st.batches, st.first, st.last = batches, first, last
        else:  # the compiled loop may have gone on after the last batch handled here
            if st is not None:
                builder.load_scan_state(st)
                batches, first, last = st.batches, st.first, st.last
    return walker, batches, first, last, bad


# ----------------------------------------------------------------------------- the names that lived here

_MOVED = {
    "kafkatool.reindex": (
        "FileChange", "ReindexPlan", "ReindexReport", "plan_reindex", "plan_reindex_all", "apply_reindex",
        "apply_reindex_partition", "apply_all", "index_findings", "refused_plan", "COVERAGE_SLACK",
    ),
    "kafkatool.targets": ("scan_targets", "Targets", "TargetProblem", "find_segments"),
    "kafkatool.safety": (
        "RepairError", "LiveBrokerError", "TransitionalDirError", "PartitionRefused", "LogDirLock", "Backup",
        "replace_files", "write_atomically", "exchange_partition", "exchange_unavailable", "exchange_dirs",
        "ExchangeUnavailable", "staging_dir_name", "find_staging_dirs", "remove_staging_dirs", "is_staging_dir",
        "link_or_copy", "stage_file", "unlink_all", "STAGING_TAG", "NO_EXCHANGE_ENV", "find_pending_state",
        "apply_locked", "check_partition_dir", "default_backup_dir", "log_dir_of", "real_log_dir_of",
        "check_backup_location", "fault_point", "fsync_dir", "read_or_none", "sha256_hex", "take_owner",
        "TEMP_SUFFIX", "JOURNAL_SUFFIX", "FAULT_ENV",
    ),
}
_WHERE = {name: module for module, moved in _MOVED.items() for name in moved}


def __getattr__(name: str):
    """``kafkatool.repair.X`` for a name that moved (PEP 562): imported on first use, so that
    :mod:`kafkatool.reindex` can import this module without a cycle."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])
