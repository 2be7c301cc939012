"""File and directory naming in a Kafka log dir (spec §2). Pure functions, no I/O.

Kafka names a segment's files after its base offset (``LogFileUtils``), a KRaft
snapshot after its end offset and epoch (``Snapshots``), and a partition directory
after its topic and partition (``LocalLog.parseTopicPartitionName``). Numbers are
parsed the way Java's ``Long.parseLong``/``Integer.parseInt`` parse them (an optional
sign, decimal digits, range-checked), so a name Kafka accepts is accepted here.
"""

from __future__ import annotations

import enum
import os
import re
from typing import NamedTuple

from kafkatool.errors import FileNameError

__all__ = [
    "FileKind",
    "PartitionDir",
    "classify",
    "file_suffix",
    "java_parse_int",
    "parse_base_offset",
    "parse_checkpoint_name",
    "parse_partition_dir",
    "SEGMENT_SUFFIX_RANK",
    "segment_file_name",
    "segment_order",
    "sibling",
    "split_temp_suffix",
]

# Suffixes (spec §2.1, LogFileUtils.java, Snapshots.java)
LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
PRODUCER_SNAPSHOT_SUFFIX = ".snapshot"
CHECKPOINT_SUFFIX = ".checkpoint"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"

# Fixed names (spec §2.1, §2.2)
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"
QUORUM_STATE = "quorum-state"
BOOTSTRAP_CHECKPOINT = "bootstrap.checkpoint"
CLEAN_SHUTDOWN = ".kafka_cleanshutdown"
LOCK = ".lock"
METADATA_TOPIC = "__cluster_metadata"
"""The KRaft controller's metadata log (its one partition is ``__cluster_metadata-0``)."""
META_PROPERTIES = "meta.properties"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
OFFSET_CHECKPOINTS = frozenset(
    {
        RECOVERY_POINT_CHECKPOINT,
        LOG_START_OFFSET_CHECKPOINT,
        REPLICATION_OFFSET_CHECKPOINT,
        CLEANER_OFFSET_CHECKPOINT,
    }
)

# Partition directory states (spec §2.1, LocalLog.scala)
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
STRAY_DIR_SUFFIX = "-stray"

_OFFSET_WIDTH = 20  # LogFileUtils.filenamePrefixFromOffset, Snapshots.OFFSET_WIDTH
_EPOCH_WIDTH = 10  # Snapshots.EPOCH_WIDTH

_SEGMENT_NAME = re.compile(r"([0-9]{20})(\.[a-z]+)", re.ASCII)
_CHECKPOINT_NAME = re.compile(r"([0-9]{20})-([0-9]{10})\.checkpoint", re.ASCII)
# LocalLog's DeleteDirPattern / FutureDirPattern / StrayDirPattern: ^(\S+)-(\S+)\.(\S+)<suffix>
# (Java's \S is ASCII-only: anything but [ \t\n\x0B\f\r]).
_JAVA_NON_SPACE = r"[^ \t\n\x0b\f\r]+"
_STATE_DIR = {
    state: re.compile(rf"({_JAVA_NON_SPACE})-({_JAVA_NON_SPACE})\.({_JAVA_NON_SPACE}){re.escape(suffix)}")
    for state, suffix in (
        ("delete", DELETE_DIR_SUFFIX),
        ("future", FUTURE_DIR_SUFFIX),
        ("stray", STRAY_DIR_SUFFIX),
    )
}

_INT_BOUNDS = {32: (-(1 << 31), (1 << 31) - 1), 64: (-(1 << 63), (1 << 63) - 1)}


def java_parse_int(text: str, bits: int = 64) -> int | None:
    """Parse ``text`` as Java's ``Long.parseLong`` (bits=64) or ``Integer.parseInt`` (32) do.

    An optional ``+``/``-`` then one or more decimal digits, nothing else (no spaces, no
    underscores), within the signed range. Returns None where Java would throw
    NumberFormatException. Like Java, non-ASCII decimal digits are accepted.
    """
    lo, hi = _INT_BOUNDS[bits]
    body = text[1:] if text[:1] in ("+", "-") else text
    if not body or not body.isdecimal():
        return None
    value = int(text)
    if value < lo or value > hi:
        return None
    return value


def _name(name: str | os.PathLike[str]) -> str:
    return os.path.basename(os.fspath(name))


def parse_base_offset(name: str | os.PathLike[str]) -> int:
    """The offset a file name encodes: the signed 64-bit decimal before the first ``.`` (§2.1).

    Works for segment files and their indexes, producer snapshots and temporary
    (``.deleted``/``.cleaned``/``.swap``) names. Only the final path component is used.
    Raises :class:`FileNameError` naming the file where Kafka would throw.
    """
    base = _name(name)
    dot = base.find(".")
    if dot < 0:
        raise FileNameError(
            "cannot read a base offset from a file name without '.'",
            path=os.fspath(name),
            expected="<offset>.<suffix>",
            found=repr(base),
        )
    offset = java_parse_int(base[:dot], 64)
    if offset is None:
        raise FileNameError(
            "file name does not start with a decimal offset",
            path=os.fspath(name),
            expected="a signed 64-bit decimal before the first '.'",
            found=repr(base[:dot]),
        )
    return offset


def segment_file_name(base_offset: int, suffix: str) -> str:
    """``<20-digit zero-padded base offset><suffix>``, e.g. ``(5, ".log")`` gives ``00000000000000000005.log``.

    ``suffix`` includes its dot (``".index"``, ``".log.deleted"``); a missing leading dot is
    added. Like Java's NumberFormat, a negative offset keeps 20 digits after the sign.
    """
    if suffix and not suffix.startswith("."):
        suffix = "." + suffix
    sign = "-" if base_offset < 0 else ""
    return f"{sign}{abs(base_offset):0{_OFFSET_WIDTH}d}{suffix}"


def parse_checkpoint_name(name: str | os.PathLike[str]) -> tuple[int, int]:
    """``(end_offset, epoch)`` of a KRaft snapshot named ``%020d-%010d.checkpoint`` (§2.1, §15.3).

    Raises :class:`FileNameError` for any other name, including ``bootstrap.checkpoint``.
    (Kafka's ``Snapshots.parse`` is laxer: it reads characters 0-19 and 21-30 without
    checking the separator; names it accepts that this rejects are never written by Kafka.)
    """
    base = _name(name)
    match = _CHECKPOINT_NAME.fullmatch(base)
    if match is None:
        raise FileNameError(
            "not a KRaft snapshot file name",
            path=os.fspath(name),
            expected="<20-digit end offset>-<10-digit epoch>.checkpoint",
            found=repr(base),
        )
    end_offset = java_parse_int(match.group(1), 64)
    epoch = java_parse_int(match.group(2), 32)
    if end_offset is None or epoch is None:
        raise FileNameError(
            "KRaft snapshot name holds a number out of range",
            path=os.fspath(name),
            expected="a 64-bit end offset and a 32-bit epoch",
            found=repr(base),
        )
    return end_offset, epoch


def file_suffix(name: str | os.PathLike[str]) -> str | None:
    """The part of the file name from its LAST ``.`` (DumpLogSegments' dispatch key, §15.2).

    ``00000000000000000000.log.deleted`` gives ``.deleted``; a name without a dot gives None
    (DumpLogSegments throws StringIndexOutOfBoundsException there).
    """
    base = _name(name)
    dot = base.rfind(".")
    return None if dot < 0 else base[dot:]


def split_temp_suffix(name: str | os.PathLike[str]) -> tuple[str, str | None]:
    """Split a ``.deleted``/``.cleaned``/``.swap`` suffix off a file name (§2.1, §12.3).

    ``00000000000000000000.log.swap`` gives ``("00000000000000000000.log", ".swap")``;
    other names give ``(name, None)``.
    """
    base = _name(name)
    for suffix in (DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX):
        if base.endswith(suffix) and len(base) > len(suffix):
            return base[: -len(suffix)], suffix
    return base, None


class FileKind(enum.Enum):
    """What a file in a log dir or partition dir is, by its exact Kafka name (§2)."""

    LOG = "log"
    CHECKPOINT_SNAPSHOT = "checkpoint-snapshot"
    """KRaft snapshot ``<end offset>-<epoch>.checkpoint``."""
    BOOTSTRAP_CHECKPOINT = "bootstrap-checkpoint"
    INDEX = "index"
    TIMEINDEX = "timeindex"
    TXNINDEX = "txnindex"
    PRODUCER_SNAPSHOT = "producer-snapshot"
    LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
    PARTITION_METADATA = "partition-metadata"
    QUORUM_STATE = "quorum-state"
    OFFSET_CHECKPOINT = "offset-checkpoint"
    """recovery-point-, log-start-, replication- or cleaner-offset-checkpoint."""
    CLEAN_SHUTDOWN = "clean-shutdown"
    LOCK = "lock"
    META_PROPERTIES = "meta-properties"
    DELETED = "deleted"
    CLEANED = "cleaned"
    SWAP = "swap"
    UNKNOWN = "unknown"


_FIXED_NAMES = {
    LEADER_EPOCH_CHECKPOINT: FileKind.LEADER_EPOCH_CHECKPOINT,
    PARTITION_METADATA: FileKind.PARTITION_METADATA,
    QUORUM_STATE: FileKind.QUORUM_STATE,
    BOOTSTRAP_CHECKPOINT: FileKind.BOOTSTRAP_CHECKPOINT,
    CLEAN_SHUTDOWN: FileKind.CLEAN_SHUTDOWN,
    LOCK: FileKind.LOCK,
    META_PROPERTIES: FileKind.META_PROPERTIES,
    **{name: FileKind.OFFSET_CHECKPOINT for name in OFFSET_CHECKPOINTS},
}

_SEGMENT_SUFFIXES = {
    LOG_SUFFIX: FileKind.LOG,
    INDEX_SUFFIX: FileKind.INDEX,
    TIME_INDEX_SUFFIX: FileKind.TIMEINDEX,
    TXN_INDEX_SUFFIX: FileKind.TXNINDEX,
    PRODUCER_SNAPSHOT_SUFFIX: FileKind.PRODUCER_SNAPSHOT,
}

_TEMP_KINDS = {DELETED_SUFFIX: FileKind.DELETED, CLEANED_SUFFIX: FileKind.CLEANED, SWAP_SUFFIX: FileKind.SWAP}


def classify(name: str | os.PathLike[str]) -> FileKind:
    """Classify a file by its exact Kafka name (§2.1, §2.2). Only the final component is used.

    Segment files need the 20-digit prefix Kafka writes (``00000000000000000000.log``).
    Any name ending in ``.deleted``/``.cleaned``/``.swap`` is DELETED/CLEANED/SWAP
    (including ``*.checkpoint.deleted``, which the broker's loader leaves to the KRaft
    code; use :func:`split_temp_suffix` to see what it was). ``*.checkpoint.part`` and
    ``*.tmp`` files are UNKNOWN.
    """
    base = _name(name)
    fixed = _FIXED_NAMES.get(base)
    if fixed is not None:
        return fixed
    _, temp = split_temp_suffix(base)
    if temp is not None:
        return _TEMP_KINDS[temp]
    match = _SEGMENT_NAME.fullmatch(base)
    if match is not None:
        return _SEGMENT_SUFFIXES.get(match.group(2), FileKind.UNKNOWN)
    if _CHECKPOINT_NAME.fullmatch(base) is not None:
        return FileKind.CHECKPOINT_SNAPSHOT
    return FileKind.UNKNOWN


class PartitionDir(NamedTuple):
    """A partition directory name, parsed as ``LocalLog.parseTopicPartitionName`` does."""

    topic: str
    partition: int
    state: str | None
    """None for a live partition, else ``"delete"``, ``"future"`` or ``"stray"``."""
    unique_id: str | None = None
    """The ``<uuid>`` of a ``topic-P.<uuid>-delete|future|stray`` name (32 hex digits as Kafka writes it)."""


def parse_partition_dir(name: str | os.PathLike[str]) -> PartitionDir | None:
    """Parse ``<topic>-<partition>`` or ``<topic>-<partition>.<uuid>-delete|-future|-stray`` (§2.1).

    The topic/partition split is at the LAST ``-`` (topics may contain ``-``); the partition
    is parsed like ``Integer.parseInt``. Returns None where Kafka would refuse the name
    (no ``-``, an empty topic or partition, a non-numeric partition, a state suffix that
    does not match Kafka's pattern).
    """
    dir_name = _name(name)
    if "-" not in dir_name:
        return None
    state: str | None = None
    unique_id: str | None = None
    for candidate, pattern in _STATE_DIR.items():
        if dir_name.endswith("-" + candidate):
            match = pattern.fullmatch(dir_name)
            if match is None:
                return None
            state = candidate
            # Kafka cuts at the last '.', which is where the uuid starts.
            stem = dir_name[: dir_name.rfind(".")]
            unique_id = dir_name[len(stem) + 1 : -len("-" + candidate)]
            break
    else:
        stem = dir_name
    cut = stem.rfind("-")
    if cut < 0:
        return None
    topic, partition_text = stem[:cut], stem[cut + 1 :]
    if not topic or not partition_text:
        return None
    partition = java_parse_int(partition_text, 32)
    if partition is None:
        return None
    return PartitionDir(topic, partition, state, unique_id)


def sibling(path: str | os.PathLike[str], suffix: str) -> str:
    """The file with the same prefix (name up to its first ``.``) and ``suffix``, in the same directory.

    This is how DumpLogSegments finds a ``.index``'s ``.log`` (§15.5):
    ``sibling("/d/t-0/00000000000000000000.index", ".log")`` is ``/d/t-0/00000000000000000000.log``.
    """
    directory, name = os.path.split(os.fspath(path))
    prefix = name.split(".", 1)[0]
    if suffix and not suffix.startswith("."):
        suffix = "." + suffix
    return os.path.join(directory, prefix + suffix)


#: Where each file of a segment sorts among the files with the same offset prefix: the
#: segment (or a KRaft ``.checkpoint`` snapshot) first, then its indexes, then the producer
#: snapshot named after the same offset. The one table behind "segment order".
SEGMENT_SUFFIX_RANK = {
    LOG_SUFFIX: 0,
    CHECKPOINT_SUFFIX: 0,
    INDEX_SUFFIX: 1,
    TIME_INDEX_SUFFIX: 2,
    TXN_INDEX_SUFFIX: 3,
    PRODUCER_SNAPSHOT_SUFFIX: 4,
}
_SNAPSHOT_RANK = SEGMENT_SUFFIX_RANK[PRODUCER_SNAPSHOT_SUFFIX]


def segment_order(name: str, *, snapshots_last: bool = False) -> tuple[int, int, int, str]:
    """Sort key of a file name in "segment order" (what dump and verify list a directory in).

    Files whose suffix (from the last ``.``) is in :data:`SEGMENT_SUFFIX_RANK` and whose name
    starts with decimal digits (up to the first ``.`` or ``-``) sort by that number, then by
    rank: ``00000000000000000000.log``, its ``.index``, ``.timeindex``, ``.txnindex``, then the
    next offset. Every other name sorts after them, by name. With ``snapshots_last`` the
    producer snapshots come after every segment (dump's order) rather than at their offset.
    """
    rank = SEGMENT_SUFFIX_RANK.get(file_suffix(name) or "")
    prefix = name.split(".", 1)[0].split("-", 1)[0]
    # isdecimal, not isdigit: int() reads every decimal digit, but not a superscript two
    if rank is not None and prefix.isdecimal():
        return (1 if snapshots_last and rank == _SNAPSHOT_RANK else 0, int(prefix), rank, name)
    return (2, 0, 0, name)
