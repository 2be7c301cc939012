"""The side files of a partition checked against its log: ``.index``/``.timeindex`` (Kafka's
sanity check and a full check against the batches), ``.txnindex`` against the ABORT markers,
producer ``.snapshot`` files, ``leader-epoch-checkpoint`` and the text checkpoints."""

from __future__ import annotations

import os
from typing import Iterator

from kafkatool.errors import KafkaToolError
from kafkatool.segment import files as names
from kafkatool.verify.batches import PartitionFacts, SegmentFacts
from kafkatool.verify.discovery import Target, offset_name_finding
from kafkatool.verify.findings import FileSummary, Finding, FindingKind
from kafkatool.verify.options import VerifyOptions
from kafkatool.verify.segments import verify_log

__all__ = ["verify_side_file"]


def verify_side_file(t: Target, opts: VerifyOptions, part: PartitionFacts, present: set[str]) -> Iterator[Finding | FileSummary]:
    """Check a file of a partition that is not a ``.log``: its findings, then its summary. A segment's
    index files are checked against the facts its walk left in ``part``; ``present`` is what the
    partition dir holds."""
    from kafkatool.segment import checkpoint as ckpt

    path = t.path
    name = os.path.basename(path)
    suffix = names.file_suffix(name)
    kind = names.classify(name)
    K = names.FileKind
    findings: list[Finding] = []
    size = os.path.getsize(path)
    label = kind.value
    bad_name = offset_name_finding(t) if suffix in (".index", ".timeindex", ".txnindex") else None
    if bad_name is not None:
        findings.append(bad_name)  # Kafka throws before it would delete it as an orphan
    elif suffix in (".index", ".timeindex", ".txnindex"):
        log_name = os.path.basename(names.sibling(name, names.LOG_SUFFIX))
        if log_name not in present:
            findings.append(Finding(path, None, None, FindingKind.ORPHAN_INDEX, f"{log_name} does not exist: the broker deletes this file at start"))
        else:
            try:
                base = names.parse_base_offset(name)
            except KafkaToolError as e:
                findings.append(Finding(path, None, None, FindingKind.INVALID_FILE_NAME, f"{e.message}: its entries cannot be checked without the base offset", expected=e.expected, found=e.found))
                base = None
            facts = part.segments.get(base) if base is not None else None
            if facts is not None:
                if suffix == ".index":
                    _check_offset_index(path, facts, findings, opts)
                elif suffix == ".timeindex":
                    _check_time_index(path, facts, findings)
                else:
                    _check_txn_index(path, facts, findings)
    elif suffix == ".snapshot":
        _check_snapshot(path, part, findings)
    elif suffix == ".checkpoint":
        # KRaft snapshots and bootstrap.checkpoint are batch sequences: verify them as logs
        sub = PartitionFacts()
        yield from verify_log(Target(path, None, t.state), opts, sub, set())
        return
    elif kind is K.LEADER_EPOCH_CHECKPOINT:
        _check_leader_epochs(path, part, findings)
    elif kind in (K.OFFSET_CHECKPOINT, K.PARTITION_METADATA, K.QUORUM_STATE, K.META_PROPERTIES):
        reader = {
            K.OFFSET_CHECKPOINT: ckpt.read_offset_checkpoint,
            K.PARTITION_METADATA: ckpt.read_partition_metadata,
            K.QUORUM_STATE: ckpt.read_quorum_state,
            K.META_PROPERTIES: ckpt.read_meta_properties,
        }[kind]
        try:
            reader(path)
        except KafkaToolError as e:
            findings.append(Finding(path, e.position, None, FindingKind.CHECKPOINT_INVALID, e.message))
    else:
        label = "skipped"
    yield from findings
    yield FileSummary(path, label, size, 0, len(findings), t.state)


def _real_entries(data: bytes, entry_size: int) -> int:
    """Entries before the zero-filled preallocated tail (every slot after them all zeros)."""
    whole = len(data) - len(data) % entry_size
    used = len(data[:whole].rstrip(b"\x00"))
    return -(-used // entry_size)


def _index_entries(path: str, index, entry_size: int, decode, sanity, sanity_kind: str, out: list[Finding]) -> tuple[list, int]:
    """The entries of an offset or time index and how many precede its zero-filled tail.

    Kafka's sanity check runs on the entries a broker wrote: a live or crashed broker's
    index keeps its preallocated zero tail (an untrimmed time index always fails the check,
    §8.4, which the broker has not run since 2.3): that tail is a state, reported as such.
    """
    entries = list(index.iter_absolute())
    real = _real_entries(index.data, entry_size)
    checked = index if real == len(entries) else decode(index.data[: real * entry_size], index.base_offset, path)
    try:
        sanity(checked, path=path)
    except KafkaToolError as e:
        out.append(Finding(path, 0, index.file_length, sanity_kind, e.message))
    if real < len(entries):
        out.append(Finding(path, real * entry_size, (len(entries) - real) * entry_size, FindingKind.PREALLOCATED_INDEX_TAIL, f"{len(entries) - real} zero-filled preallocated slots after {real} entries"))
    return entries, real


def _check_offset_index(path: str, facts: SegmentFacts, out: list[Finding], opts: VerifyOptions) -> None:
    from kafkatool.segment import index as idx

    index = idx.read_offset_index(path, facts.base)
    entries, real = _index_entries(path, index, idx.OFFSET_ENTRY_SIZE, idx.decode_offset_index, idx.sanity_check_offset_index, FindingKind.INDEX_SANITY_FAILED, out)
    prev = None
    for i, (offset, position) in enumerate(entries[:real]):
        where = i * idx.OFFSET_ENTRY_SIZE
        if prev is not None and offset <= prev:
            out.append(Finding(path, where, idx.OFFSET_ENTRY_SIZE, FindingKind.INDEX_NOT_MONOTONIC, f"entry {i} offset {offset} is not above the previous {prev}", expected=f"> {prev}", found=offset))
        prev = offset
        if position >= facts.valid_end or position >= facts.size:
            out.append(Finding(path, where, idx.OFFSET_ENTRY_SIZE, FindingKind.INDEX_ENTRY_PAST_END, f"entry {i} (offset {offset}) points at position {position}, past the last valid batch (log ends at {facts.valid_end})", expected=f"< {facts.valid_end}", found=position))
            continue
        batch_last = facts.at_position.get(position)
        if batch_last is None:
            out.append(Finding(path, where, idx.OFFSET_ENTRY_SIZE, FindingKind.INDEX_ENTRY_NOT_BATCH_START, f"entry {i} (offset {offset}) points at position {position}, which is not a batch start", expected="a batch start", found=position))
            continue
        if batch_last != offset:
            # follower appends index the first batch's position with the chunk's last offset (§17 E.42)
            later = facts.by_last_offset.get(offset)
            if later is not None and later[0] > position:
                continue
            out.append(Finding(path, where, idx.OFFSET_ENTRY_SIZE, FindingKind.INDEX_OFFSET_MISMATCH, f"entry {i} says offset {offset} at position {position}, the batch there ends at {batch_last}", expected=batch_last, found=offset))


def _check_time_index(path: str, facts: SegmentFacts, out: list[Finding]) -> None:
    from kafkatool.segment import index as idx

    tindex = idx.read_time_index(path, facts.base)
    entries, real = _index_entries(path, tindex, idx.TIME_ENTRY_SIZE, idx.decode_time_index, idx.sanity_check_time_index, FindingKind.TIMEINDEX_SANITY_FAILED, out)
    prev_ts = prev_off = None
    for i, (ts, offset) in enumerate(entries[:real]):
        where = i * idx.TIME_ENTRY_SIZE
        if prev_ts is not None and (ts <= prev_ts or offset < prev_off):
            out.append(Finding(path, where, idx.TIME_ENTRY_SIZE, FindingKind.TIMEINDEX_NOT_MONOTONIC, f"entry {i} ({ts}, {offset}) does not follow ({prev_ts}, {prev_off})", expected=f"> ({prev_ts}, {prev_off})", found=(ts, offset)))
        prev_ts, prev_off = ts, offset
        if facts.last_offset is None or offset > facts.last_offset:
            out.append(Finding(path, where, idx.TIME_ENTRY_SIZE, FindingKind.TIMEINDEX_ENTRY_PAST_END, f"entry {i} offset {offset} is beyond the log's last offset {facts.last_offset}", expected=f"<= {facts.last_offset}", found=offset))
            continue
        found = facts.by_last_offset.get(offset)
        if found is None:
            inside = facts.containing.get(offset)
            if inside is not None:
                # brokers <= 3.7 indexed the max-timestamp record itself (§17 E.43): benign
                out.append(Finding(path, where, idx.TIME_ENTRY_SIZE, FindingKind.TIMEINDEX_RECORD_OFFSET, f"entry {i} offset {offset} is a record inside the batch ending at {inside[1]} (written by a broker <= 3.7)", expected=inside[1], found=offset))
                if inside[2] != ts:
                    out.append(Finding(path, where, idx.TIME_ENTRY_SIZE, FindingKind.TIMEINDEX_TIMESTAMP_MISMATCH, f"entry {i} timestamp {ts} differs from the largest timestamp up to the batch holding offset {offset}, {inside[2]}", expected=inside[2], found=ts))
                continue
            out.append(Finding(path, where, idx.TIME_ENTRY_SIZE, FindingKind.TIMEINDEX_ENTRY_NOT_FOUND, f"entry {i} offset {offset} is not in any batch", expected="a batch's last offset", found=offset))
            continue
        if found[1] != ts:
            out.append(Finding(path, where, idx.TIME_ENTRY_SIZE, FindingKind.TIMEINDEX_TIMESTAMP_MISMATCH, f"entry {i} timestamp {ts} differs from the largest timestamp up to offset {offset}, {found[1]}", expected=found[1], found=ts))


def _check_txn_index(path: str, facts: SegmentFacts, out: list[Finding]) -> None:
    from kafkatool.segment import txnindex as txn

    with open(path, "rb") as f:
        data = f.read()
    try:
        entries = list(txn.iter_txn_index(data, os.path.abspath(path)))
    except KafkaToolError as e:
        out.append(Finding(path, e.position, txn.TXN_ENTRY_SIZE, FindingKind.TXNINDEX_INVALID, e.message))
        return
    if len(data) % txn.TXN_ENTRY_SIZE:
        out.append(Finding(path, len(data) - len(data) % txn.TXN_ENTRY_SIZE, len(data) % txn.TXN_ENTRY_SIZE, FindingKind.TXNINDEX_INVALID, f"{len(data) % txn.TXN_ENTRY_SIZE} bytes of a partial entry at the end (ignored by Kafka)"))
    for i, e in enumerate(entries):
        where = i * txn.TXN_ENTRY_SIZE
        if e.last_offset < facts.base:
            out.append(Finding(path, where, txn.TXN_ENTRY_SIZE, FindingKind.TXNINDEX_BELOW_BASE, f"entry {i} lastOffset {e.last_offset} is below the segment base {facts.base}", expected=f">= {facts.base}", found=e.last_offset))
        elif (e.producer_id, e.last_offset) not in facts.abort_markers:
            out.append(Finding(path, where, txn.TXN_ENTRY_SIZE, FindingKind.TXNINDEX_NO_ABORT_MARKER, f"entry {i}: no ABORT marker of producer {e.producer_id} at offset {e.last_offset}", expected="an ABORT marker", found=e.last_offset))
    listed = {(e.producer_id, e.last_offset) for e in entries}
    for pid, began, marker in facts.expected_aborts:
        if (pid, marker) not in listed:
            out.append(Finding(path, None, None, FindingKind.TXNINDEX_MISSING_ENTRY, f"producer {pid}'s transaction {began}..{marker} was aborted in this segment but has no entry", expected=(pid, began, marker), found=None))


def _check_snapshot(path: str, part: PartitionFacts, out: list[Finding]) -> None:
    from kafkatool.segment import snapshot as snap

    name = os.path.basename(path)
    try:
        s = snap.read_producer_snapshot(path, verify_crc=False)
    except KafkaToolError as e:
        out.append(Finding(path, e.position, None, FindingKind.SNAPSHOT_INVALID, e.message))
        return
    if not s.crc_valid:
        out.append(Finding(path, snap.CRC_OFFSET, snap.ENTRIES_OFFSET - snap.CRC_OFFSET, FindingKind.SNAPSHOT_CRC_MISMATCH, f"Snapshot is corrupt (CRC is no longer valid) (stored crc {s.crc}, computed crc {s.computed_crc})", expected=s.computed_crc, found=s.crc))
    try:
        at = names.parse_base_offset(name)
    except KafkaToolError:
        return
    if part.log_end is not None and at > part.log_end:
        out.append(Finding(path, None, None, FindingKind.SNAPSHOT_BEYOND_LOG_END, f"snapshot at offset {at} is above the log end offset {part.log_end} (the broker deletes it)", expected=f"<= {part.log_end}", found=at))


def _check_leader_epochs(path: str, part: PartitionFacts, out: list[Finding]) -> None:
    from kafkatool.segment import checkpoint as ckpt

    try:
        entries = ckpt.read_leader_epoch_checkpoint(path)
    except KafkaToolError as e:
        out.append(Finding(path, e.position, None, FindingKind.CHECKPOINT_INVALID, e.message))
        return
    prev = None
    for e in entries:
        if prev is not None and (e.epoch <= prev.epoch or e.start_offset < prev.start_offset):
            out.append(Finding(path, None, None, FindingKind.LEADER_EPOCH_MISMATCH, f"entries not increasing: epoch {prev.epoch}@{prev.start_offset} then {e.epoch}@{e.start_offset}"))
        prev = e
        seen = part.epochs.get(e.epoch)
        if seen is not None and seen != e.start_offset and e.start_offset >= min(part.epochs.values()):
            out.append(Finding(path, None, None, FindingKind.LEADER_EPOCH_MISMATCH, f"epoch {e.epoch} starts at offset {e.start_offset} in the checkpoint, but its first batch in the log is at {seen}", expected=seen, found=e.start_offset))
    known = {e.epoch for e in entries}
    for epoch, first in sorted(part.epochs.items()):
        if epoch not in known and entries and epoch > entries[0].epoch:
            out.append(Finding(path, None, None, FindingKind.LEADER_EPOCH_MISMATCH, f"batches carry leader epoch {epoch} (from offset {first}) but the checkpoint has no entry for it", expected=None, found=epoch))
