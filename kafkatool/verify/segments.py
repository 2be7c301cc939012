"""One segment (``.log``, or a KRaft ``.checkpoint``) checked whole: every batch, then each bad
region located, resynchronised past, and counted against the good batches beyond it."""

from __future__ import annotations

import os
from typing import Iterator

from kafkatool.errors import KafkaToolError
from kafkatool.segment import files as names
from kafkatool.segment.resync import BadRegion, bad_region
from kafkatool.segment.walk import SegmentWalker, WalkStop
from kafkatool.verify.batches import PartitionFacts, Scanner, SegmentFacts, read_wanted
from kafkatool.verify.discovery import Target, offset_name_finding
from kafkatool.verify.findings import FileSummary, Finding, FindingKind
from kafkatool.verify.options import VerifyOptions
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
        region = _bad_region(walker, path, pos, size)
        scan.bad_regions.append((len(findings), scan.state.good))
        findings.append(Finding(path, pos, region.end - pos, FindingKind(region.kind), region.message))
        if region.end >= size:
            break
        if facts.valid_end == 0:
            facts.valid_end = pos
        pos = region.end
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



def _bad_region(walker: SegmentWalker, path: str, pos: int, size: int) -> BadRegion:
    """The bad region where ``walker`` stopped, at ``pos`` (:func:`kafkatool.segment.resync.bad_region`)."""
    error = walker.error if walker.stop is WalkStop.ERROR else None
    fd = os.open(path, os.O_RDONLY)
    try:
        return bad_region(fd, path, pos, size, error)
    finally:
        os.close(fd)


