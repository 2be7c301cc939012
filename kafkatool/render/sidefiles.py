"""DumpLogSegments lines for index, snapshot and txn-index files (spec §15.5-§15.8).

Pure functions of model objects; each returns one line without its newline. The
templates are Kafka's, character for character, quirks included.
"""

from __future__ import annotations

from kafkatool.segment.snapshot import ProducerSnapshotEntry
from kafkatool.segment.txnindex import AbortedTxn

__all__ = [
    "optional_long",
    "offset_index_line",
    "time_index_line",
    "snapshot_entry_line",
    "txn_entry_line",
    "checkpoint_value",
    "checkpoint_line",
]


def optional_long(value: int | None) -> str:
    """Java's ``OptionalLong.toString``: ``OptionalLong.empty`` or ``OptionalLong[<n>]``."""
    return "OptionalLong.empty" if value is None else f"OptionalLong[{value}]"


def offset_index_line(offset: int, position: int) -> str:
    """``.index`` entry line (§15.5): ``offset: <o> position: <p>``."""
    return f"offset: {offset} position: {position}"


def time_index_line(timestamp: int, offset: int) -> str:
    """``.timeindex`` entry line (§15.6): ``timestamp: <ts> offset: <o>``."""
    return f"timestamp: {timestamp} offset: {offset}"


def snapshot_entry_line(entry: ProducerSnapshotEntry) -> str:
    """Producer snapshot entry line (§15.7).

    Without batch metadata (stored lastOffset < 0) the line ends right after
    ``lastTimestamp: <ts> ``, trailing space included.
    """
    txn = optional_long(entry.current_txn_first_offset if entry.current_txn_first_offset >= 0 else None)
    line = (
        f"producerId: {entry.producer_id} producerEpoch: {entry.epoch} "
        f"coordinatorEpoch: {entry.coordinator_epoch} currentTxnFirstOffset: {txn} "
        f"lastTimestamp: {entry.timestamp} "
    )
    if entry.has_batch_metadata:
        line += (
            f"firstSequence: {entry.first_sequence} lastSequence: {entry.last_sequence} "
            f"lastOffset: {entry.last_offset} offsetDelta: {entry.offset_delta} timestamp: {entry.timestamp}"
        )
    return line


def txn_entry_line(entry: AbortedTxn) -> str:
    """``.txnindex`` entry line (§15.8)."""
    return (
        f"version: {entry.version} producerId: {entry.producer_id} firstOffset: {entry.first_offset} "
        f"lastOffset: {entry.last_offset} lastStableOffset: {entry.last_stable_offset}"
    )


def checkpoint_value(value: object) -> str:
    """A text checkpoint field's value as kafkatool prints it (Kafka's tool cannot read these files).

    Numbers and plain words print as they are (``leaderId: 1``, ``topicId: AAAAAAAAAAAAAAAAAAAAAQ``);
    anything that would not read back as one word (an empty string, spaces, a quote, a
    control character) is a JSON string (``clusterId: ""``); lists, objects, booleans and null
    are compact JSON (``currentVoters: [{"voterId":1}]``), as the file holds them.
    """
    if type(value) is int:
        return str(value)
    if type(value) is str and value and value.isprintable() and " " not in value and value[0] not in "\"[{":
        return value
    import json

    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def checkpoint_line(fields: tuple[tuple[str, object], ...]) -> str:
    """One entry of a text checkpoint file: ``name: value`` pairs joined by spaces."""
    return " ".join(f"{name}: {checkpoint_value(value)}" for name, value in fields)
