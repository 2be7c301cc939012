"""kafka-dump-log's text output, template for template (spec §15, newest version).

Pure functions of the dump model: each returns the text to write (lines joined, ending
in a newline) and whether it goes to stdout or stderr. The quirks are kept on purpose:
the stray ``}`` after a legacy record's crc, ``OptionalLong.empty``, the empty line for
a control record under ``--skip-record-metadata``.
"""

from __future__ import annotations

from typing import Callable

from kafkatool import dump as d
from kafkatool.record.batch import TIMESTAMP_TYPE_NAMES, Batch, Record, increment_sequence
from kafkatool.record.compression import codec_name, decompress
from kafkatool.record.control import control_type_name, kafka_json
from kafkatool.record.javautf8 import JAVA_UTF8_ERRORS
from kafkatool.record.layout import CODEC_MASK, CONTROL_BIT, DELETE_HORIZON_BIT, TIMESTAMP_TYPE_BIT, TRANSACTIONAL_BIT
from kafkatool.record.speedups import functions as _compiled  # the extension, unless not built or switched off
from kafkatool.record.topics import Decoded
from kafkatool.render.decoders import DECODERS, get_decoder
from kafkatool.render.sidefiles import (
    checkpoint_line,
    offset_index_line,
    snapshot_entry_line,
    time_index_line,
    txn_entry_line,
)

__all__ = ["CODEC_NAMES", "TextRenderer", "batch_line", "record_line"]

_BOOL = {True: "true", False: "false"}
_TS = TIMESTAMP_TYPE_NAMES


_string_decoder = DECODERS["string"]

# The whole text of a v2 data batch (batch line and record lines, string decoders) in one
# compiled call, compressed batches included; None for anything else, which then goes through
# the model items and the functions below. None under KAFKATOOL_PURE=1 or without the extension.
(_v2_text_formatter,) = _compiled("v2_text_formatter")

#: The most a compressed batch may decompress to on the compiled path (memory per batch);
#: larger ones take the streaming Python path.
_TEXT_DECOMPRESS_LIMIT = 8 << 20


def _decompress_records(codec: int, payload, limit: int) -> bytes:
    """A compressed batch's records section for the compiled text (raises as the streaming path would)."""
    return decompress(codec, payload, max_output=limit)


_V2_LINE = (
    "baseOffset: %d lastOffset: %d count: %d baseSequence: %d lastSequence: %d producerId: %d"
    " producerEpoch: %d partitionLeaderEpoch: %d isTransactional: %s isControl: %s deleteHorizonMs: %s"
    " position: %d %s: %d size: %d magic: %d compresscodec: %s crc: %d isvalid: %s"
)
_LEGACY_LINE = "offset: %d position: %d %s: %d size: %d magic: %d compresscodec: %s crc: %d isvalid: %s"
_FLAG = ("false", "true")
CODEC_NAMES: tuple[str, ...] = tuple(codec_name(i) for i in range(5))
"""The names of codec ids 0-4 by id (a batch with another id is rejected before it is rendered)."""


def batch_line(b: Batch) -> str:
    """The one line DumpLogSegments prints per batch (v2 and higher magic) or legacy entry.

    The caller has rejected codec ids 5-7 (Kafka fails on them before the line is done).
    Unpacking the tuple and %-formatting is the cheapest way to build it (a 1 GiB dump
    prints 65 k of these).
    """
    (position, size, offset, magic, crc, attrs, lod, bts, mts, pid, pepoch, bseq, count, ple, computed) = b
    if magic >= 2:
        return _V2_LINE % (
            offset, offset + lod, count, bseq,
            -1 if bseq == -1 else increment_sequence(bseq, lod),
            pid, pepoch, ple, _FLAG[(attrs & TRANSACTIONAL_BIT) != 0], _FLAG[(attrs & CONTROL_BIT) != 0],
            "OptionalLong[%d]" % bts if attrs & DELETE_HORIZON_BIT else "OptionalLong.empty",
            position, "LogAppendTime" if attrs & TIMESTAMP_TYPE_BIT else "CreateTime", mts, size, magic,
            CODEC_NAMES[attrs & CODEC_MASK], crc, _FLAG[crc == computed],
        )
    return _LEGACY_LINE % (
        offset, position, _TS[b.timestamp_type], mts, size, magic, CODEC_NAMES[attrs & CODEC_MASK], crc, _FLAG[crc == computed],
    )


def control_suffix(c: d.Control) -> str:
    """The control-record part of a record line (§15.3)."""
    if c.coordinator_epoch is not None:
        return f" endTxnMarker: {control_type_name(c.type_id)} coordinatorEpoch: {c.coordinator_epoch}"
    if c.label is not None:
        return f" {c.label} {kafka_json(c.fields)}"
    return f" controlType: {control_type_name(c.type_id)}({c.type_id})"


def record_line(
    b: Batch,
    r: Record,
    *,
    print_data: bool,
    skip_metadata: bool,
    control: d.Control | None = None,
    key_decoder: Callable[[bytes], str],
    value_decoder: Callable[[bytes], str],
    decoded: Decoded | None = None,
) -> str:
    """One ``| offset: ...`` line (spec §15.3).

    ``decoded``: an internal-topic decoder's result for the record, whose texts replace the
    key and payload; one kafka-dump-log would have crashed at prints `` error: <message>``
    after the metadata (what Kafka had printed when it stopped)."""
    if decoded is not None:
        # Kafka's prefix: "| " until the metadata is printed, then " " (DumpLogSegments.dumpLog)
        data = _decoded_data(decoded, "| " if skip_metadata else " ")
        if skip_metadata:
            return data
    else:
        data = ""
        if print_data and not b.is_control:
            if r.key is not None:
                data = f" key: {key_decoder(r.key)}"
            if r.value is not None:
                data += f" payload: {value_decoder(r.value)}"
        if skip_metadata:
            return "|" + data if r.key is not None and data else data
    key = r.key
    value = r.value
    head = (
        f"| offset: {r.offset} {_TS[b.timestamp_type]}: {r.timestamp}"
        f" keySize: {-1 if key is None else len(key)} valueSize: {-1 if value is None else len(value)}"
    )
    if b.magic >= 2:
        hk = ",".join(k.decode("utf-8", JAVA_UTF8_ERRORS) for k, _v in r.headers)
        head += f" sequence: {r.sequence} headerKeys: [{hk}]"
    else:
        head += f" isValid: {_BOOL[bool(r.crc_valid)]} crc: {r.crc}}}"
    if control is not None:
        head += control_suffix(control)
    return head + data


def _decoded_data(decoded: Decoded, prefix: str) -> str:
    """The part of a record line an internal-topic decoder prints: `` key: ...`` and `` payload: ...``,
    or `` error: <message>`` where kafka-dump-log would have crashed; ``prefix`` is what comes
    before the first field (``"| "`` when the metadata is skipped, else ``" "``)."""
    if decoded.fatal:
        return f"{prefix}error: {decoded.error}"
    key_text = decoded.key_text
    data = "" if key_text is None else f"{prefix}key: {key_text}"
    if decoded.payload_text is not None:
        data += f" payload: {decoded.payload_text}"
    return data


class TextRenderer:
    """Renders dump items as kafka-dump-log text. :meth:`render` returns ``(text, to_stderr)``."""

    def __init__(self, opts: d.DumpOptions, key_decoder: str = "string", value_decoder: str = "string") -> None:
        self.opts = opts
        self.kd = get_decoder(key_decoder)
        self.vd = get_decoder(value_decoder)
        #: For ``iter_dump(..., batch_text=)``: the compiled whole-batch text when it prints
        #: what this renderer would (a deep dump with record metadata and the string
        #: decoders, no internal-topic decoder), else None.
        self.batch_text: d.BatchText | None = (
            _v2_text_formatter(_decompress_records, min(opts.max_decompressed, _TEXT_DECOMPRESS_LIMIT))
            if _v2_text_formatter is not None
            and opts.deep
            and not opts.skip_record_metadata
            and opts.decoder is None
            and self.kd is _string_decoder
            and self.vd is _string_decoder
            else None
        )

    def render(self, item: object) -> tuple[str, bool]:
        t = type(item)
        if t is d.Batches:
            return "\n".join([batch_line(b) for b in item.batches]) + "\n", False  # type: ignore[attr-defined]
        if t is d.Rendered:
            return "".join(item.texts), False  # type: ignore[attr-defined]
        if t is d.BatchItems:
            lines: list[str] = []
            add = self._add_batch
            for i in item.items:  # type: ignore[attr-defined]
                add(i, lines)
            lines.append("")
            return "\n".join(lines), False
        if t is d.BatchItem:
            return self.batch(item), False  # type: ignore[arg-type]
        fn = _DISPATCH.get(t)
        if fn is None:
            return "", False
        return fn(self, item)

    def batch(self, item: d.BatchItem) -> str:
        """The batch line and its record lines, newline-terminated."""
        lines: list[str] = []
        self._add_batch(item, lines)
        lines.append("")
        return "\n".join(lines)

    def _add_batch(self, item: d.BatchItem, lines: list[str]) -> None:
        b = item.batch
        if not item.continued:  # (continued: more records of the batch before)
            lines.append(batch_line(b))
        records = item.records
        if not records:
            return
        opts = self.opts
        skip = opts.skip_record_metadata
        decoded = item.decoded
        if decoded is not None:  # an internal-topic decoder (data batches only)
            if b.magic >= 2 and not skip:
                # the metadata parts from the hot loop, then the decoder's part of each line
                heads: list[str] = []
                _fast_v2_lines(b, records, False, self.kd, self.vd, heads.append)
                for head, dec in zip(heads, decoded):
                    lines.append(head + _decoded_data(dec, " "))
                return
            for r, dec in zip(records, decoded):
                lines.append(
                    record_line(b, r, print_data=True, skip_metadata=skip, key_decoder=self.kd, value_decoder=self.vd, decoded=dec)
                )
            return
        if b.magic >= 2 and not b.attributes & CONTROL_BIT and not skip:
            _fast_v2_lines(b, records, opts.print_data, self.kd, self.vd, lines.append)
            return
        controls = item.controls
        for i, r in enumerate(records):
            lines.append(
                record_line(
                    b,
                    r,
                    print_data=opts.print_data,
                    skip_metadata=skip,
                    control=controls[i] if controls is not None and i < len(controls) else None,
                    key_decoder=self.kd,
                    value_decoder=self.vd,
                )
            )


def _fast_v2_lines(b: Batch, records: list[Record], print_data: bool, kd, vd, append) -> None:
    """Record lines of a v2 data batch: the hot loop of a deep dump, kept flat."""
    tst = "LogAppendTime" if b.attributes & TIMESTAMP_TYPE_BIT else "CreateTime"
    string_keys = kd is _string_decoder
    string_values = vd is _string_decoder
    for offset, ts, key, value, headers, seq, _a, _c, _v, _m in records:
        if headers:
            hk = ",".join([k.decode("utf-8", JAVA_UTF8_ERRORS) for k, _hv in headers])
        else:
            hk = ""
        if key is None:
            line = f"| offset: {offset} {tst}: {ts} keySize: -1"
        else:
            line = f"| offset: {offset} {tst}: {ts} keySize: {len(key)}"
        if value is None:
            line = f"{line} valueSize: -1 sequence: {seq} headerKeys: [{hk}]"
        else:
            line = f"{line} valueSize: {len(value)} sequence: {seq} headerKeys: [{hk}]"
        if print_data:
            if key is not None:
                line = f"{line} key: {key.decode('utf-8', JAVA_UTF8_ERRORS) if string_keys else kd(key)}"
            if value is not None:
                line = f"{line} payload: {value.decode('utf-8', JAVA_UTF8_ERRORS) if string_values else vd(value)}"
        append(line)


def _header(self: TextRenderer, item: d.FileHeader) -> tuple[str, bool]:
    text = f"Dumping {item.path}\n"
    if item.second_line is not None:
        text += item.second_line + "\n"
    return text, False


def _note(self: TextRenderer, item: d.Note) -> tuple[str, bool]:
    return item.text + "\n", item.stderr


def _index_entry(self: TextRenderer, item: d.IndexEntryItem) -> tuple[str, bool]:
    return offset_index_line(item.offset, item.position) + "\n", False


def _time_entry(self: TextRenderer, item: d.TimeIndexEntryItem) -> tuple[str, bool]:
    return time_index_line(item.timestamp, item.offset) + "\n", False


def _snapshot_entry(self: TextRenderer, item: d.SnapshotEntryItem) -> tuple[str, bool]:
    return snapshot_entry_line(item.entry) + "\n", False


def _txn_entry(self: TextRenderer, item: d.TxnEntryItem) -> tuple[str, bool]:
    return txn_entry_line(item.entry) + "\n", False


def _checkpoint(self: TextRenderer, item: d.CheckpointItem) -> tuple[str, bool]:
    return checkpoint_line(item.fields) + "\n", False


def _trailing(self: TextRenderer, item: d.TrailingBytes) -> tuple[str, bool]:
    return f"Found {item.length} invalid bytes at the end of {item.name}\n", False


def _error(self: TextRenderer, item: d.FileError) -> tuple[str, bool]:
    return f"kafkatool: error: {item.error}\n", True


def decode_failures_line(item: d.DecodeFailures) -> str:
    """The ``kafkatool: error:`` line after a file some of whose records did not decode."""
    records = "1 record" if item.count == 1 else f"{item.count} records"
    text = (
        f"kafkatool: error: {item.path}: {records} could not be decoded with --{item.decoder}-decoder "
        f"(first at offset {item.first_offset}: {item.first_error})"
    )
    if item.first_fatal_offset is not None:
        text += f"; kafka-dump-log would have stopped at offset {item.first_fatal_offset}"
    return text


def _decode_failures(self: TextRenderer, item: d.DecodeFailures) -> tuple[str, bool]:
    return decode_failures_line(item) + "\n", True


def _mismatches(self: TextRenderer, item: d.IndexMismatches) -> tuple[str, bool]:
    lines = [f"Mismatches in :{item.abs_path}"]
    lines += [f"  Index offset: {i}, log offset: {lo}" for i, lo in item.pairs]
    return "\n".join(lines) + "\n", True


def _ts_problems(self: TextRenderer, item: d.TimeIndexProblems) -> tuple[str, bool]:
    if item.kind == "mismatch":
        lines = [f"Found timestamp mismatch in :{item.abs_path}"]
        lines += [f"  Index timestamp: {a}, log timestamp: {b}" for a, b in item.pairs]
    elif item.kind == "out_of_order":
        lines = [f"Found out of order timestamp in :{item.abs_path}"]
        lines += [f"  Index timestamp: {a}, Previously indexed timestamp: {b}" for a, b in item.pairs]
    else:
        lines = ["The following indexed offsets are not found in the log."]
        lines += [f"Indexed offset: {a}, found log offset: {b}" for a, b in item.pairs]
    return "\n".join(lines) + "\n", True


def _non_consecutive(self: TextRenderer, item: d.NonConsecutive) -> tuple[str, bool]:
    lines = [f"Non-consecutive offsets in {item.abs_path}"]
    lines += [f"  {a} is followed by {b}" for a, b in item.pairs]
    if item.omitted:
        lines.append(f"  ... and {item.omitted} earlier pairs, not kept (kafkatool keeps the last {d.MAX_PAIRS})")
    return "\n".join(lines) + "\n", True


_DISPATCH = {
    d.FileHeader: _header,
    d.Note: _note,
    d.IndexEntryItem: _index_entry,
    d.TimeIndexEntryItem: _time_entry,
    d.SnapshotEntryItem: _snapshot_entry,
    d.TxnEntryItem: _txn_entry,
    d.CheckpointItem: _checkpoint,
    d.TrailingBytes: _trailing,
    d.FileError: _error,
    d.DecodeFailures: _decode_failures,
    d.IndexMismatches: _mismatches,
    d.TimeIndexProblems: _ts_problems,
    d.NonConsecutive: _non_consecutive,
}
