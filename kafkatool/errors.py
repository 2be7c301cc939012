"""One error hierarchy for the whole package.

Every message reads ``PATH:POSITION: what (expected X, found Y)``. The record layer
raises errors that know only a position relative to the bytes it was given; the
segment layer (the choke point) re-raises them with the file path and the absolute
byte position via :meth:`KafkaToolError.at`.

``expected`` and ``found`` follow one convention everywhere (errors, verify findings, the
plans and reports of reindex and truncate, text and JSON alike):

* ``found`` is what is **on disk**: the stored field, the entry the file holds;
* ``expected`` is what a **valid file would hold**: the value computed from the bytes, or
  the rule the stored value breaks (``"> 41"``, ``"a batch start"``).

So for a checksum ``found`` is the stored CRC and ``expected`` the CRC computed over the
bytes, and messages name both explicitly: ``(stored crc 3953238404, computed crc 3953238405)``.

Every error also carries its ``kind``: what went wrong, as data a caller branches on (verify
reports it as its finding kind; reindex and truncate say why they refused). A class gives the
default (``CompressionError.kind == "decompression_failed"``); a raiser names a more precise
one with ``kind=`` (``"decompressed_too_large"``, ``"record_count_mismatch"``). The message is
for people: no caller classifies an error by its text.
"""

from __future__ import annotations

from typing import Any


class KafkaToolError(Exception):
    """Base class of every error kafkatool raises on bad input."""

    kind: str | None = None
    """What went wrong, as data (see the module docstring); None when nothing more precise
    than the class is known."""

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        position: int | None = None,
        expected: Any = None,
        found: Any = None,
        kind: str | None = None,
    ) -> None:
        self.message = message
        if kind is not None:  # else the class default
            self.kind = kind
        self.path = path
        self.position = position
        self.expected = expected
        self.found = found
        super().__init__(str(self))

    def __str__(self) -> str:
        where = ""
        if self.path is not None:
            where = f"{self.path}:"
            if self.position is not None:
                where += f"{self.position}:"
            where += " "
        elif self.position is not None:
            where = f"byte {self.position}: "
        detail = ""
        if self.expected is not None or self.found is not None:
            detail = f" (expected {self.expected}, found {self.found})"
        return f"{where}{self.message}{detail}"

    def at(self, path: str | None, base: int = 0) -> "KafkaToolError":
        """Return a copy located in ``path``, with ``base`` added to the position."""
        position = None if self.position is None else self.position + base
        if self.path is not None:  # already located: keep the innermost location
            return self
        err = type(self)(
            self.message,
            path=path,
            position=position if position is not None else (base if path else None),
            expected=self.expected,
            found=self.found,
        )
        err.kind = self.kind
        err.__cause__ = self.__cause__
        return err


class CorruptRecordError(KafkaToolError):
    """Checksum, size or end-of-data problems (Kafka's CorruptRecordException)."""

    kind = "invalid_record"


class InvalidRecordError(KafkaToolError):
    """Structural problems in records, wrappers or control records (InvalidRecordException)."""

    kind = "invalid_record"


class CompressionError(InvalidRecordError):
    """A compressed stream could not be decoded (Kafka: ``Failed to decompress record stream``)."""

    kind = "decompression_failed"


class CorruptIndexError(KafkaToolError):
    """An index file failed Kafka's sanity check or could not be read."""


class CorruptSnapshotError(KafkaToolError):
    """A producer-state snapshot failed validation."""


class CheckpointError(KafkaToolError):
    """A text checkpoint file is malformed."""


class FileNameError(KafkaToolError):
    """A file name that does not follow Kafka's naming rules."""


class MissingDependencyError(KafkaToolError):
    """A codec library needed for a batch is not installed."""
