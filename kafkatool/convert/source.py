"""The source side of ``convert``: one segment's entries walked, damage handled, the converter fed.

:func:`converted_entries` walks a ``.log`` with the log-dir model (:meth:`Segment.batches
<kafkatool.segment.logdir.Segment.batches>`), hands each entry to a
:class:`~kafkatool.convert.rules.BatchConverter` and yields the output entries it returns, in
order, then those of :meth:`~kafkatool.convert.rules.BatchConverter.flush`. Memory holds one
source entry at a time (plus what the converter decompresses), whatever the segment's size.

What counts as damage, and where a damaged range starts and ends, is what ``kafkatool verify``
reports for the same file (``kafkatool/verify/segments.py``), in the same words:

* an entry the walk cannot frame (a size below 14, a negative magic): from its position to the
  next valid batch :func:`~kafkatool.segment.resync.resync` finds (verify's ``invalid_size`` or
  ``unknown_magic``); none found: to the end of the file;
* a tail the walk leaves (a size pointing past the end of the file, a tail too short for a
  header, a zero-filled tail): to the end of the file (``partial_batch``, ``trailing_bytes``,
  ``trailing_zeros``), or, when a valid batch starts further on, to that batch
  (``invalid_size``: the size field was damaged);
* a batch whose stored CRC does not match its bytes (``crc_mismatch``): the batch, as its size
  field frames it (verify does the same; a damaged size field that still frames swallows the
  bytes it claims, and the walk goes on after them);
* a magic byte above 2 (``unknown_magic``: the v2 CRC does not cover the magic, so nothing shows
  the entry is a v2 batch);
* an entry larger than ``options.max_decompressed_bytes`` (``decompressed_too_large``: not read);
* a batch whose records do not decode (the converter's located error, its kind kept).

Without ``skip_damaged`` the first of these raises its located
:class:`~kafkatool.errors.KafkaToolError` (``PATH:POSITION: ...``, its ``kind`` set). With it,
each is added to :attr:`Loss.damaged <kafkatool.convert.options.Loss.damaged>` as a
:class:`~kafkatool.convert.options.DamagedRange` whose reason is ``"<kind>: <message>"``, and the
walk resumes after it. With ``salvage`` a batch whose CRC fails but whose records decode is
converted (``salvaged=True``, so it gets a new CRC) and listed as
:class:`~kafkatool.convert.options.Salvaged`; one whose records do not decode is a damaged range.

Legacy v0/v1 entries: a wrapper's outer CRC-32 is its batch CRC (the one Kafka's recovery
checks, spec §12.2). The CRCs of the messages inside a compressed wrapper are checked by no
broker path (§5.2, §17 C.30) but by every consumer with ``check.crcs`` (the default), so a
wrapper whose outer CRC holds but whose inner CRCs do not is damage too, found where the
records are decoded: the converter raises ``inner_crc_mismatch`` for it. It then stops the
conversion, is a damaged range with ``skip_damaged``, and with ``salvage`` is converted and
listed as salvaged (its ``stored_crc``/``computed_crc`` the inner message's, as the converter's
error gives them: ``found``/``expected``, -1 when not known). An entry copied byte for byte (same
magic and codec) is not decoded, so its inner CRCs stay as they were, neither checked nor
laundered.

``progress(n)`` is told ``n`` more source bytes are done (every entry converted, dropped or
skipped, and every damaged range): the calls add up to the file's size as it was when the walk
began.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Callable, Iterator

from kafkatool.convert.options import DamagedRange, Salvaged
from kafkatool.errors import CorruptRecordError, InvalidRecordError, KafkaToolError
from kafkatool.segment.logdir import batches_and_regions, open_log
from kafkatool.segment.resync import BadRegion
from kafkatool.segment.walk import DEFAULT_MAX_BATCH_BYTES

if TYPE_CHECKING:
    from kafkatool.convert.options import ConvertOptions, Loss
    from kafkatool.convert.rules import BatchConverter
    from kafkatool.record.batch import Batch
    from kafkatool.segment.logdir import Segment

__all__ = ["converted_entries", "PROGRESS_STEP"]

PROGRESS_STEP = 1 << 20
"""Source bytes gathered before ``progress`` is called (one call per batch would cost more than
a bar shows); the rest is reported at the end."""

INNER_CRC_MISMATCH = "inner_crc_mismatch"
"""The kind of the converter's error for a legacy wrapper whose inner messages fail their CRC."""


class _Damage(Exception):
    """A damaged range found at ``start`` (internal: turned into an error or a DamagedRange)."""

    def __init__(self, start: int, end: int, kind: str, message: str, error: KafkaToolError | None = None) -> None:
        super().__init__(message)
        self.start, self.end, self.kind, self.message, self.error = start, end, kind, message, error


def converted_entries(
    segment: Segment,
    converter: BatchConverter,
    options: ConvertOptions,
    loss: Loss,
    *,
    progress: Callable[[int], None] | None = None,
) -> Iterator[bytes]:
    """The output entries of ``segment`` converted by ``converter``, in order (its ``flush()``
    included), with the damage policy of ``options`` (see the module docstring).

    Raises the located :class:`~kafkatool.errors.KafkaToolError` of the first damaged entry
    unless ``options.skip_damaged``/``options.salvage``; damaged ranges and salvaged batches
    go to ``loss``. A file that cannot be read, a codec library that is missing, or any other
    error that is not about the bytes of an entry always stops the walk.
    """
    path = segment.log_path
    skip = options.skips_damaged
    cap = options.max_decompressed_bytes
    # an entry larger than the walk's window is handed over with data None (its CRC streamed);
    # one above the cap is never read
    window_cap = max(1, min(DEFAULT_MAX_BATCH_BYTES, cap))
    f = open_log(path)  # (a FIFO named like a segment is refused, never opened blocking)
    done = pending = 0  # source bytes reported to progress; done since the last report

    def advance(n: int) -> None:
        nonlocal done, pending
        pending += n
        if pending >= PROGRESS_STEP and progress is not None:
            progress(pending)
            done += pending
            pending = 0

    try:
        fd = f.fileno()
        size = os.fstat(fd).st_size  # the walk's end: bytes appended meanwhile are not read
        for item in batches_and_regions(segment, fd, 0, size, size, max_batch_bytes=window_cap):
            if isinstance(item, BadRegion):
                d = _Damage(item.start, item.end, item.kind, item.message, item.error)
                if not skip:
                    raise _error(path, d)
                loss.add_damaged(DamagedRange(path, d.start, d.end, f"{d.kind}: {d.message}"))
                advance(d.end - d.start)
                continue
            batch, data = item
            try:
                out = _convert(batch, data, fd, path, converter, options, loss, cap)
            except _Damage as d:
                if not skip:
                    raise _error(path, d) from None
                loss.add_damaged(DamagedRange(path, d.start, d.end, f"{d.kind}: {d.message}"))
                out = ()
            yield from out
            advance(batch.size)
    finally:
        f.close()
    yield from converter.flush()
    if progress is not None and size - done > 0:
        progress(size - done)


def _convert(batch: Batch, data, fd: int, path: str, converter: BatchConverter, options: ConvertOptions,
             loss: Loss, cap: int) -> list[bytes]:
    """The converter's output for one framed entry; raises :class:`_Damage` for a damaged one."""
    position, total = batch.position, batch.size
    end = position + total
    if batch.magic > 2:
        # (verify's unknown_magic wording)
        raise _Damage(position, end, "unknown_magic",
                      f"magic byte {batch.magic} (Kafka parses it as v2; the CRC does not cover it)")
    if total > cap:
        raise _Damage(position, end, "decompressed_too_large",
                      f"a batch of {total} bytes is too large to decode in memory (larger than "
                      f"max_decompressed_bytes, {cap})")
    if data is None:  # larger than the walk's window, within the cap: read it whole
        data = _read_entry(fd, path, position, total)
    crc_ok = batch.crc == batch.computed_crc
    if not crc_ok:
        message = (f"the batch's bytes do not match its CRC (stored crc {batch.crc}, computed crc "
                   f"{batch.computed_crc}; the batch spans {total} bytes)")
        if not options.salvage:
            raise _Damage(position, end, "crc_mismatch", message)
        try:
            out = converter.feed(batch, data, salvaged=True)
        except KafkaToolError as e:
            if not _is_damage(e):
                raise
            raise _Damage(position, end, "crc_mismatch", f"{message}, and its records do not decode: {e.message}") from None
        loss.add_salvaged(Salvaged(path, position, batch.offset, batch.crc, batch.computed_crc))
        return out
    try:
        return converter.feed(batch, data)
    except KafkaToolError as e:
        if not _is_damage(e):
            raise
        if e.kind == INNER_CRC_MISMATCH and options.salvage:
            try:
                out = converter.feed(batch, data, salvaged=True)
            except KafkaToolError as e2:
                if not _is_damage(e2):
                    raise
                raise _Damage(position, end, e2.kind or "invalid_record", e2.message, e2) from None
            stored = e.found if isinstance(e.found, int) else -1
            computed = e.expected if isinstance(e.expected, int) else -1
            loss.add_salvaged(Salvaged(path, position, batch.offset, stored, computed))
            return out
        raise _Damage(position, end, e.kind or "invalid_record", e.message, e) from None


def _is_damage(e: KafkaToolError) -> bool:
    """Whether the converter's error is about the entry's bytes (records that do not decode, a
    decompression failure, inner CRCs), not a refusal, a missing codec library or a read error."""
    return isinstance(e, (InvalidRecordError, CorruptRecordError)) or e.kind == INNER_CRC_MISMATCH


def _read_entry(fd: int, path: str, position: int, total: int) -> bytes:
    """The ``total`` bytes of the entry at ``position`` (one larger than the walk's window)."""
    try:
        data = os.pread(fd, total, position)
    except OSError as e:
        err = KafkaToolError(f"cannot read the file: {e.strerror or e}", path=path, position=position)
        err.__cause__ = e
        raise err from None
    if len(data) != total:  # the file shrank since the walk framed the entry
        raise _Damage(position, position + total, "partial_batch",
                      f"a batch of {total} bytes starts at {position} but only {len(data)} bytes remain")
    return data


def _error(path: str, d: _Damage) -> KafkaToolError:
    """The located error that stops a conversion at damaged range ``d``."""
    if d.error is not None and d.error.kind == d.kind:  # the walk's or the converter's own error
        return d.error.at(path, d.start)
    cls = InvalidRecordError if d.kind == "unknown_magic" else CorruptRecordError
    return cls(d.message, path=path, position=d.start, kind=d.kind)
