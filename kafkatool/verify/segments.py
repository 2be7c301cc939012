"""One segment (``.log``, or a KRaft ``.checkpoint``) checked whole: every batch, then each bad
region located, resynchronised past, and counted against the good batches beyond it."""

from __future__ import annotations

import os
from typing import Iterator

from kafkatool.errors import KafkaToolError
from kafkatool.record.layout import HEADER_SIZE_UP_TO_MAGIC, LOG_OVERHEAD, MAGIC_OFFSET, V2
from kafkatool.segment import files as names
from kafkatool.segment.walk import SegmentWalker, WalkStop
from kafkatool.segment.zeros import zero_run_end
from kafkatool.verify.batches import PartitionFacts, Scanner, SegmentFacts, read_wanted
from kafkatool.verify.discovery import Target, offset_name_finding
from kafkatool.verify.findings import FileSummary, Finding, FindingKind
from kafkatool.verify.options import VerifyOptions
from kafkatool.verify.resync import resync
from kafkatool.verify.workers import SPLIT_MIN_BYTES, scan_chunks, walk_segment

__all__ = ["verify_log"]


def verify_log(t: Target, opts: VerifyOptions, part: PartitionFacts, present: set[str]) -> Iterator[Finding | FileSummary]:
    """Check one segment: its findings, then its summary. What later files need (offsets,
    epochs, the batches its index files name) is left in ``part``."""
    path = t.path
    name = os.path.basename(path)
    size = os.path.getsize(path)
    findings: list[Finding] = []
    try:
        base = names.parse_base_offset(name)
    except KafkaToolError:
        base = None
    index_name = os.path.basename(names.sibling(name, names.INDEX_SUFFIX))
    txnindex_name = os.path.basename(names.sibling(name, names.TXN_INDEX_SUFFIX))
    if base is not None and t.partition is not None and index_name not in present:
        findings.append(Finding(path, None, None, FindingKind.INDEX_MISSING, f"{index_name} is missing: the broker will recover (rebuild and truncate) this segment at start"))
    bad_name = offset_name_finding(t)
    if bad_name is not None:
        findings.append(bad_name)
    facts = SegmentFacts(base or 0, size)
    if base is not None:
        read_wanted(path, base, facts)
    scan = Scanner(path, base, opts, part, facts, findings)
    pos = 0
    if opts.workers > 1 and size >= SPLIT_MIN_BYTES and not opts.max_rate:
        pos = scan_chunks(scan, size)
    while pos < size:
        walker = walk_segment(scan, path, pos, size)
        pos = walker.position
        if walker.stop is WalkStop.END:
            break
        # the walk stopped short of the end: a bad region starts at pos
        region_kind, message = _stop_reason(walker, path, pos, size)
        # a zero run (a preallocated tail, gigabytes of it, often a hole) is passed at memory
        # speed; no batch starts inside it: a batch's size field (bytes 8-11) is never zero
        zeros_end = _zero_run_end(path, pos, size)
        if zeros_end >= size:
            scan.bad_regions.append((len(findings), scan.state.good))
            findings.append(Finding(path, pos, size - pos, FindingKind.TRAILING_ZEROS, f"{size - pos} zero bytes after the last batch (preallocated or never written)"))
            break
        nxt = resync(path, max(pos + 1, zeros_end - MAGIC_OFFSET), size)
        if nxt is None:
            scan.bad_regions.append((len(findings), scan.state.good))
            if region_kind == FindingKind.PARTIAL_BATCH or size - pos <= HEADER_SIZE_UP_TO_MAGIC:
                kind = FindingKind.TRAILING_BYTES if size - pos <= HEADER_SIZE_UP_TO_MAGIC else FindingKind.PARTIAL_BATCH
                findings.append(Finding(path, pos, size - pos, kind, message))
            else:
                findings.append(Finding(path, pos, size - pos, region_kind, message))
            break
        if region_kind == FindingKind.PARTIAL_BATCH:
            region_kind = FindingKind.INVALID_SIZE
            message = f"the size field at {pos} points past the end of the file, but a valid batch starts at {nxt}"
        scan.bad_regions.append((len(findings), scan.state.good))
        findings.append(Finding(path, pos, nxt - pos, region_kind, f"{message}; {nxt - pos} unreadable bytes before the next valid batch at {nxt}"))
        if facts.valid_end == 0:
            facts.valid_end = pos
        pos = nxt
    # how many good batches lie beyond each bad region: data Kafka's recovery would drop
    for fi, good_before in scan.bad_regions:
        findings[fi] = findings[fi]._replace(batches_after=scan.state.good - good_before)
    if part.on_bytes is not None:
        part.on_bytes(size - scan.reported)
    if facts.valid_end == 0:
        facts.valid_end = pos
    if facts.expected_aborts and t.partition is not None and txnindex_name not in present:
        for pid, began, marker in facts.expected_aborts:
            findings.append(Finding(path, None, None, FindingKind.TXNINDEX_MISSING_ENTRY, f"producer {pid}'s transaction {began}..{marker} was aborted in this segment but {txnindex_name} does not exist", expected=(pid, began, marker), found=None))
    part.segments[facts.base] = facts
    if facts.last_offset is not None:
        part.log_end = facts.last_offset + 1
    yield from findings
    yield FileSummary(path, "log", size, scan.state.batches, len(findings), t.state)



def _stop_reason(walker: SegmentWalker, path: str, pos: int, size: int) -> tuple[str, str]:
    """The kind and message of the bad region where ``walker`` stopped, at ``pos``."""
    if walker.stop is WalkStop.ERROR and walker.error is not None:
        err = walker.error
        # a negative magic is unknown_magic; any other entry the walk cannot frame is a bad size
        if err.kind == FindingKind.UNKNOWN_MAGIC:
            return FindingKind.UNKNOWN_MAGIC, err.message
        return FindingKind.INVALID_SIZE, err.message
    header = _read(path, pos, LOG_OVERHEAD)
    if len(header) == LOG_OVERHEAD:
        declared = int.from_bytes(header[V2.BATCH_LENGTH : LOG_OVERHEAD], "big", signed=True)
        return FindingKind.PARTIAL_BATCH, f"a batch of {declared + LOG_OVERHEAD} bytes starts at {pos} but only {size - pos} bytes remain"
    return FindingKind.PARTIAL_BATCH, f"{size - pos} bytes at the end are too short for a batch header"


def _read(path: str, pos: int, n: int) -> bytes:
    with open(path, "rb") as f:
        f.seek(pos)
        return f.read(n)


def _zero_run_end(path: str, start: int, end: int) -> int:
    """The first non-zero byte at or after ``start`` in ``path`` (``end`` if none)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return zero_run_end(fd, start, end)
    finally:
        os.close(fd)

