"""Transaction index (``.txnindex``), spec §9.

A plain sequence of 34-byte aborted-transaction entries. Two reading quirks of
``TransactionIndex``/``AbortedTxn`` are kept: a trailing partial entry is ignored
(reported here as ``trailing_bytes``), and the version is read as ONE signed byte,
the high byte of the stored int16, so ``00 01`` reads as version 0 and ``01 00`` fails.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from typing import Iterable, Iterator, NamedTuple

from kafkatool.errors import CorruptIndexError

__all__ = [
    "AbortedTxn",
    "TxnIndex",
    "TXN_ENTRY_SIZE",
    "iter_txn_index",
    "decode_txn_index",
    "read_txn_index",
    "sanity_check_txn_index",
    "encode_txn_index",
]

# §9 entry layout, big-endian. Kafka writes version as an int16 but reads back only
# its first (high) byte; the low byte is skipped on read and written as 0.
TXN_ENTRY = struct.Struct(
    ">"
    "b"  # version: high byte of the int16 (AbortedTxn.version() reads one byte)
    "x"  # low byte of the int16 version, ignored
    "q"  # producerId
    "q"  # firstOffset: first offset of the aborted transaction
    "q"  # lastOffset: offset of the ABORT marker
    "q"  # lastStableOffset at the time of the abort
)
TXN_ENTRY_SIZE = TXN_ENTRY.size  # 34
CURRENT_VERSION = 0


class AbortedTxn(NamedTuple):
    """One ``.txnindex`` entry (``AbortedTxn.java``)."""

    version: int
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def kafka_str(self) -> str:
        """``AbortedTxn.toString()``, as it appears in Kafka's messages."""
        return (
            f"AbortedTxn(version={self.version}, producerId={self.producer_id}, "
            f"firstOffset={self.first_offset}, lastOffset={self.last_offset}, "
            f"lastStableOffset={self.last_stable_offset})"
        )


@dataclass(frozen=True, slots=True)
class TxnIndex:
    """A decoded ``.txnindex`` file."""

    entries: tuple[AbortedTxn, ...]
    trailing_bytes: int
    """Bytes after the last complete entry (silently ignored by Kafka, §17.F.47)."""
    file_length: int


def _version_error(version: int, path: str, position: int) -> CorruptIndexError:
    return CorruptIndexError(
        f"Unexpected aborted transaction version {version} in transaction index {path}, "
        f"current version is {CURRENT_VERSION}",
        position=position,
    )


def iter_txn_index(data: bytes | bytearray | memoryview, path: str = "<memory>") -> Iterator[AbortedTxn]:
    """Yield the complete entries of a ``.txnindex`` lazily, in file order.

    Raises :class:`CorruptIndexError` (with the entry's byte position) on the first entry
    whose version byte is > 0, after the earlier entries were yielded, as DumpLogSegments
    prints them before failing (§15.8). ``path`` is only used in the message text.
    """
    view = memoryview(data)
    whole = len(view) - len(view) % TXN_ENTRY_SIZE
    for i, fields in enumerate(TXN_ENTRY.iter_unpack(view[:whole])):
        entry = AbortedTxn(*fields)
        if entry.version > CURRENT_VERSION:
            raise _version_error(entry.version, path, i * TXN_ENTRY_SIZE)
        yield entry


def decode_txn_index(data: bytes | bytearray | memoryview, path: str = "<memory>") -> TxnIndex:
    """Decode a whole ``.txnindex`` (§9); see :func:`iter_txn_index` for the errors."""
    entries = tuple(iter_txn_index(data, path))
    return TxnIndex(entries, len(data) % TXN_ENTRY_SIZE, len(data))


def read_txn_index(path: str | os.PathLike[str]) -> TxnIndex:
    """Read and decode a ``.txnindex`` file; errors are located in the file."""
    spath = os.fspath(path)
    with open(spath, "rb") as f:
        data = f.read()
    try:
        return decode_txn_index(data, os.path.abspath(spath))
    except CorruptIndexError as err:
        raise err.at(spath) from None


def sanity_check_txn_index(entries: Iterable[AbortedTxn], base_offset: int, path: str | None = None) -> None:
    """``TransactionIndex.sanityCheck`` (§9), the check the broker runs at load.

    Raises :class:`CorruptIndexError` with Kafka's message for the first entry whose
    lastOffset is below the segment base offset. The error carries no path or position.
    """
    where = os.path.abspath(path) if path else "<memory>"
    for entry in entries:
        if entry.last_offset < base_offset:
            raise CorruptIndexError(
                f"Last offset of aborted transaction {entry.kafka_str()} in index {where} "
                f"is less than start offset {base_offset}"
            )


def encode_txn_index(entries: Iterable[AbortedTxn]) -> bytes:
    """The bytes of a ``.txnindex`` holding ``entries``.

    The version goes into the high byte and the low byte is 0, so it reads back unchanged;
    for version 0 this is exactly Kafka's ``putShort(0)``.
    """
    out = bytearray()
    for entry in entries:
        try:
            out += TXN_ENTRY.pack(*entry)
        except struct.error:
            raise CorruptIndexError(
                "aborted transaction does not fit a 34-byte entry",
                expected="int8 version and int64 offsets",
                found=tuple(entry),
            ) from None
    return bytes(out)
