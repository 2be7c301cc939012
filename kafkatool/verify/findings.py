"""What verify reports: the :class:`Finding` model, its kinds, and the per-file summary."""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from kafkatool.record.batch import Batch

__all__ = ["FindingKind", "KINDS", "INFO_KINDS", "Finding", "FileSummary", "FindingAdder"]


class FindingKind(StrEnum):
    """Every finding kind, with what it means (:attr:`description`).

    The names are stable: scripts match on them. A kind *is* its name as a string (a
    ``StrEnum``): it prints, formats and serialises as ``crc_mismatch``, so text and JSON
    output never show the enum.
    """

    description: str

    def __new__(cls, value: str, description: str) -> "FindingKind":
        member = str.__new__(cls, value)
        member._value_ = value
        member.description = description
        return member

    # framing (§3)
    INVALID_SIZE = ("invalid_size", "a batch size field below the minimum for its format (Kafka's walk throws), or pointing past the end of the file while valid batches follow")
    PARTIAL_BATCH = ("partial_batch", "the last batch runs past the end of the file (an interrupted write); Kafka's recovery truncates it")
    TRAILING_BYTES = ("trailing_bytes", "a tail too short to hold a batch header (at most 17 bytes) that is not all zeros")
    TRAILING_ZEROS = ("trailing_zeros", "a zero-filled tail: preallocated or never written space after the last batch")
    UNKNOWN_MAGIC = ("unknown_magic", "a magic byte other than 0, 1 or 2 (a v2 CRC does not cover it)")
    UNKNOWN_CODEC = ("unknown_codec", "compression codec id 5-7, or zstd in a v0/v1 message")
    CRC_MISMATCH = ("crc_mismatch", "the stored CRC does not match the bytes (CRC-32C for v2, CRC-32 for v0/v1)")
    # offsets, timestamps, producer fields
    OFFSET_DELTA_MISMATCH = ("offset_delta_mismatch", "a v2 header's record count exceeds lastOffsetDelta + 1, or is negative")
    OFFSET_NOT_MONOTONIC = ("offset_not_monotonic", "a batch's first offset is not above the previous batch's last offset (within or across segments)")
    OFFSET_BELOW_BASE = ("offset_below_base", "a batch offset below the segment's base offset (the file name)")
    OFFSET_OVERFLOW = ("offset_overflow", "an offset more than 2^31-1 above the segment's base offset")
    TIMESTAMP_INVALID = ("timestamp_invalid", "a timestamp below -1, or a CreateTime maxTimestamp below the base timestamp")
    PRODUCER_FIELDS_INVALID = ("producer_fields_invalid", "producer id, epoch and sequence that cannot go together")
    CONTROL_NOT_TRANSACTIONAL = ("control_not_transactional", "a control batch without the transactional flag")
    # deep (records)
    DECOMPRESSION_FAILED = ("decompression_failed", "the compressed records cannot be decompressed")
    DECOMPRESSED_TOO_LARGE = ("decompressed_too_large", "the records decompress past the configured cap (a decompression bomb)")
    RECORD_COUNT_MISMATCH = ("record_count_mismatch", "the records do not fill the batch exactly as its header count says")
    INVALID_RECORD = ("invalid_record", "a record's varints, lengths or headers are malformed")
    RECORD_OFFSET_INVALID = ("record_offset_invalid", "record offset deltas outside 0..lastOffsetDelta or not increasing")
    RECORD_TIMESTAMP_INVALID = ("record_timestamp_invalid", "a CreateTime record timestamp above the batch maxTimestamp")
    INNER_CRC_MISMATCH = ("inner_crc_mismatch", "a message inside a compressed v0/v1 wrapper fails its own CRC")
    INVALID_WRAPPER = ("invalid_wrapper", "a compressed v0/v1 wrapper that cannot be iterated (null value, no inner messages, nested compression, bad offsets)")
    INVALID_CONTROL_RECORD = ("invalid_control_record", "a control record whose key or marker value is malformed")
    # offset and time index (§8)
    INDEX_SANITY_FAILED = ("index_sanity_failed", "the .index fails Kafka's sanity check")
    INDEX_ENTRY_PAST_END = ("index_entry_past_end", "an index entry points at or past the end of the log")
    INDEX_ENTRY_NOT_BATCH_START = ("index_entry_not_batch_start", "an index entry's position is not the start of a batch")
    INDEX_OFFSET_MISMATCH = ("index_offset_mismatch", "an index entry's offset is not the last offset of a batch at or after its position")
    INDEX_NOT_MONOTONIC = ("index_not_monotonic", "index entries do not strictly increase")
    PREALLOCATED_INDEX_TAIL = ("preallocated_index_tail", "an index file with zero-filled preallocated slots (an unclean shutdown, or a live active segment)")
    TIMEINDEX_SANITY_FAILED = ("timeindex_sanity_failed", "the .timeindex fails Kafka's sanity check")
    TIMEINDEX_NOT_MONOTONIC = ("timeindex_not_monotonic", "time index timestamps or offsets do not strictly increase")
    TIMEINDEX_ENTRY_NOT_FOUND = ("timeindex_entry_not_found", "a time index offset is in no batch at all")
    TIMEINDEX_RECORD_OFFSET = ("timeindex_record_offset", "a time index offset that is a record inside a batch, as brokers <= 3.7 wrote for uncompressed batches (benign)")
    TIMEINDEX_TIMESTAMP_MISMATCH = ("timeindex_timestamp_mismatch", "a time index timestamp differs from the largest timestamp up to its batch")
    TIMEINDEX_ENTRY_PAST_END = ("timeindex_entry_past_end", "a time index offset is beyond the log's last offset")
    INDEX_MISSING = ("index_missing", "a segment without its .index (the broker rebuilds it on start)")
    ORPHAN_INDEX = ("orphan_index", "an index, time index or txn index file without its .log (the broker deletes it)")
    # transaction index, snapshots, checkpoints (§9-11)
    TXNINDEX_INVALID = ("txnindex_invalid", "a .txnindex with an unknown version or a partial entry")
    TXNINDEX_BELOW_BASE = ("txnindex_below_base", "a .txnindex entry whose lastOffset is below the segment base (the broker recovers the segment)")
    TXNINDEX_NO_ABORT_MARKER = ("txnindex_no_abort_marker", "a .txnindex entry with no ABORT marker of its producer at its lastOffset")
    TXNINDEX_MISSING_ENTRY = ("txnindex_missing_entry", "an ABORT marker completing a transaction whose entry is not in the .txnindex (when the segment holds the whole transaction)")
    SNAPSHOT_CRC_MISMATCH = ("snapshot_crc_mismatch", "a producer snapshot whose CRC-32C does not match")
    SNAPSHOT_INVALID = ("snapshot_invalid", "a producer snapshot that cannot be parsed")
    SNAPSHOT_BEYOND_LOG_END = ("snapshot_beyond_log_end", "a producer snapshot above the log end offset (the broker deletes it)")
    CHECKPOINT_INVALID = ("checkpoint_invalid", "a text checkpoint file Kafka cannot read (the broker takes the log dir offline)")
    LEADER_EPOCH_MISMATCH = ("leader_epoch_mismatch", "leader-epoch-checkpoint disagrees with the batches' partition leader epochs")
    # the files and directories themselves (§2, §12.1, §12.3)
    UNREADABLE = ("unreadable", "a file that cannot be read or a directory that cannot be listed (the broker's load fails with `Could not read file`)")
    NOT_REGULAR_FILE = ("not_regular_file", "a FIFO, socket, device or directory named like a Kafka file (.log, .index, ...): not opened")
    INVALID_FILE_NAME = ("invalid_file_name", "a .log, .index, .timeindex or .txnindex in a partition dir whose name does not start with a signed 64-bit offset (the broker throws NumberFormatException loading it)")
    NOT_A_PARTITION_DIR = ("not_a_partition_dir", "a directory in a log dir not named <topic>-<partition> (e.g. lost+found or a backup): the broker refuses to load the log dir")
    # what an interrupted kafkatool repair left (reindex/truncate --execute)
    PENDING_JOURNAL = ("pending_journal", "a kafkatool journal: a reindex or truncate --execute was interrupted after its commit point (the message says which and how to finish it)")
    KAFKATOOL_TEMP = ("kafkatool_temp", "a *.kafkatool-tmp file an interrupted kafkatool run left (the message says whether a journal still needs it)")
    KAFKATOOL_STAGING = ("kafkatool_staging", "the staging dir <topic>-<partition>.6b66746c...-delete of an interrupted reindex or truncate --execute")


#: Every finding kind name -> what it means (the man page's table, ``--fail-on`` validation).
KINDS: dict[str, str] = {k.value: k.description for k in FindingKind}

#: Kinds that describe a state rather than damage: reported, but they do not fail a run
#: unless ``--fail-on`` names them.
INFO_KINDS = frozenset({FindingKind.INDEX_MISSING, FindingKind.PREALLOCATED_INDEX_TAIL, FindingKind.TIMEINDEX_RECORD_OFFSET})


class Finding(NamedTuple):
    """One problem found. ``position``/``length`` locate it in ``file`` (bytes)."""

    file: str
    position: int | None
    length: int | None
    kind: FindingKind
    message: str
    batch_index: int | None = None
    first_offset: int | None = None
    last_offset: int | None = None
    expected: object = None
    found: object = None
    batches_after: int | None = None
    """For a bad region: how many good batches follow it in the file (Kafka's recovery drops them)."""


class FileSummary(NamedTuple):
    """What was checked in one file."""

    file: str
    kind: str
    bytes: int
    batches: int
    findings: int
    state: str | None = None
    """``delete``/``future``/``stray`` for a partition dir in that state."""


class FindingAdder:
    """Appends findings about one batch, located at the batch unless told otherwise."""

    __slots__ = ("out", "path", "b", "index")

    def __init__(self, out: list[Finding], path: str, b: Batch, index: int) -> None:
        self.out = out
        self.path = path
        self.b = b
        self.index = index

    def __call__(self, kind: FindingKind, message: str, expected=None, found=None, position=None, length=None) -> None:
        b = self.b
        if position is None:
            position = b.position
        elif position >= b.position + b.size:  # e.g. "premature EOF": the batch's last byte
            position = b.position + b.size - 1
        if length is None:  # to the end of the batch: a finding never runs past its batch
            length = max(1, b.position + b.size - position)
        self.out.append(
            Finding(
                self.path,
                position,
                length,
                kind,
                message,
                self.index,
                b.offset,
                b.last_offset,
                expected,
                found,
            )
        )
