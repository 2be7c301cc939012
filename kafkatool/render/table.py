"""Tables for people at a terminal (``--format table``), streamed.

Rows go out as they come, a few hundred at a time, drawn by a small fixed-width formatter
in the box style of Rich's default table: laying out a Rich ``Table`` per chunk cost ~0.5 ms
per row (11.7 s for 21 k records), and one table for a whole file holds every row in memory.
A file's table stays open while its rows fit the column widths it has; a row that needs wider
columns closes it and opens a wider one (the header is drawn again). At a terminal the
columns are fitted to its width and long cells fold onto more lines; into a pipe or a file
nothing is folded.

Cells are plain text, never markup (a payload such as ``[red]`` prints as written), and
control characters are escaped (``\\n``, ``\\x1b``) so that a binary key cannot break a row or
drive the terminal. Timestamps show as milliseconds and, next to them, ISO 8601 UTC.
"""

from __future__ import annotations

import os
import sys

from kafkatool import dump as d
from kafkatool.record.javautf8 import JAVA_UTF8_ERRORS
from kafkatool.record.layout import CODEC_MASK, CONTROL_BIT, DELETE_HORIZON_BIT, TIMESTAMP_TYPE_BIT, TRANSACTIONAL_BIT
from kafkatool.record.topics import Decoded
from kafkatool.render.decoders import DECODERS, get_decoder
from kafkatool.render.sidefiles import checkpoint_value
from kafkatool.render.terminal import cell_len, fold, is_terminal, terminal_width
from kafkatool.render.times import iso_time
from kafkatool.render.text import CODEC_NAMES, control_suffix

__all__ = ["TableRenderer", "escape", "iso_time"]

_TS = {-1: "none", 0: "create", 1: "append"}
_FLAG_BITS = TRANSACTIONAL_BIT | CONTROL_BIT | DELETE_HORIZON_BIT  # what _flags shows
_ROWS_PER_CHUNK = 256
"""Rows formatted together: the column widths are measured over a chunk."""

_LEFT, _RIGHT = 0, 1
_string_decoder = DECODERS["string"]
_FOLDABLE_MIN = 8

_COLUMNS: dict[str, tuple[tuple[str, int, bool], ...]] = {
    # (header, justification, may fold at a terminal)
    "log": (
        ("position", _RIGHT, False), ("offsets", _RIGHT, False), ("count", _RIGHT, False), ("magic", _RIGHT, False),
        ("codec", _LEFT, False), ("timestamp", _RIGHT, False), ("time (UTC)", _LEFT, False),
        ("producer", _LEFT, True), ("flags", _LEFT, True), ("size", _RIGHT, False), ("crc", _LEFT, True),
    ),
    "records": (
        ("offset", _LEFT, False), ("timestamp", _LEFT, False), ("time (UTC)", _LEFT, False),
        ("key", _LEFT, True), ("value", _LEFT, True), ("headers", _LEFT, True),
    ),
    "index": (("offset", _RIGHT, False), ("position", _RIGHT, False)),
    "timeindex": (("timestamp", _RIGHT, False), ("time (UTC)", _LEFT, False), ("offset", _RIGHT, False)),
    "entries": (("entry", _LEFT, True),),
}

# Rich's box.HEAVY_HEAD: a heavy frame around the header, light lines below it.
_HEAD_TOP = ("┏", "━", "┳", "┓")
_HEAD_ROW = ("┃", "┃", "┃")
_HEAD_BOTTOM = ("┡", "━", "╇", "┩")
_ROW = ("│", "│", "│")
_BOTTOM = ("└", "─", "┴", "┘")

_BOLD = "\x1b[1m"
_BOLD_RED = "\x1b[1;31m"
_RESET = "\x1b[0m"

_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def escape(text: str) -> str:
    """``text`` with every non-printable character escaped (``\\n``, ``\\x1b``, ``\\u202e``), so that
    a cell stays on its line and cannot send the terminal control sequences."""
    if text.isprintable():
        return text
    out = []
    for ch in text:
        if ch.isprintable():
            out.append(ch)
        else:
            e = _ESCAPES.get(ch)
            if e is None:
                o = ord(ch)
                e = f"\\x{o:02x}" if o < 0x100 else (f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}")
            out.append(e)
    return "".join(out)


class TableRenderer:
    """Renders dump items as tables. :meth:`render` returns ``(text, to_stderr)``; when the text
    is for stderr, :meth:`drain` gives the table text that must reach stdout before it."""

    def __init__(
        self,
        opts: d.DumpOptions,
        key_decoder: str = "string",
        value_decoder: str = "string",
        *,
        width: int | None = None,
        color: bool | None = None,
    ) -> None:
        self.opts = opts
        self.kd = get_decoder(key_decoder)
        self.vd = get_decoder(value_decoder)
        tty = is_terminal(sys.stdout)
        if width is None and tty:
            width = terminal_width()
        self.width = width  # None: never fold
        if color is None:
            color = tty and not os.environ.get("NO_COLOR")
        self.color = color
        self.kind: str | None = None
        self.columns: tuple = ()
        self.rows: list[tuple[tuple[str, ...], str | None]] = []
        self.widths: list[int] | None = None  # of the open table; None: no table open
        self._stdout_pending = ""

    # ------------------------------------------------------------------ the table
    def _open(self, kind: str) -> str:
        """Switch to a table of ``kind`` (closing the one open)."""
        text = self._close()
        self.kind = kind
        self.columns = _COLUMNS[kind]
        return text

    def _close(self) -> str:
        """Everything pending, and the bottom line of the open table."""
        text = self._flush_rows()
        if self.widths is not None:
            text += _rule(_BOTTOM, self.widths) + "\n"
            self.widths = None
        return text

    def _add(self, cells: tuple[str, ...], style: str | None = None) -> str:
        self.rows.append((cells, style))
        if len(self.rows) >= _ROWS_PER_CHUNK:
            return self._flush_rows()
        return ""

    def _flush_rows(self) -> str:
        rows = self.rows
        if not rows:
            return ""
        self.rows = []
        columns = self.columns
        n = len(columns)
        # widths column by column, in C where the column is ASCII (nearly always)
        need = []
        ascii_columns = True
        for i, col in enumerate(zip(*[r[0] for r in rows])):
            h = cell_len(columns[i][0])
            if "".join(col).isascii():
                need.append(max(h, max(map(len, col))))
            else:
                ascii_columns = False
                need.append(max(h, max(map(cell_len, col))))
        out: list[str] = []
        widths = self.widths
        if widths is None or any(need[i] > widths[i] for i in range(n)):
            if widths is not None:  # the rows need wider columns: a new table
                out.append(_rule(_BOTTOM, widths))
                need = [max(a, b) for a, b in zip(need, widths)]
            widths = self._fit(need)
            self.widths = widths
            out.extend(self._head(widths))
        folding = any(need[i] > widths[i] for i in range(n))
        formats: dict[str | None, str] = {}
        for cells, style in rows:
            if (ascii_columns or "".join(cells).isascii()) and not (
                folding and any(len(cells[i]) > widths[i] for i in range(n))
            ):
                fmt = formats.get(style)
                if fmt is None:
                    fmt = formats[style] = self._row_format(widths, style)
                out.append(fmt % cells)
            else:
                out.extend(self._wide_row(cells, widths, style))
        out.append("")
        return "\n".join(out)

    def _row_format(self, widths: list[int], style: str | None) -> str:
        """A %-format for an ASCII row that fits: ``│ %-6s │ %12s │``."""
        cells = []
        for (_h, just, _f), w in zip(self.columns, widths):
            spec = f"%{w}s" if just else f"%-{w}s"
            cells.append(f"{style}{spec}{_RESET}" if self.color and style else spec)
        return "│ " + " │ ".join(cells) + " │"

    def _fit(self, need: list[int]) -> list[int]:
        """Column widths: what the cells need, the foldable columns narrowed to fit the terminal."""
        widths = list(need)
        if self.width is None:
            return widths
        excess = sum(widths) + 3 * len(widths) + 1 - self.width
        foldable = [i for i, col in enumerate(self.columns) if col[2]]
        while excess > 0 and foldable:
            i = max(foldable, key=lambda j: widths[j])
            floor = max(_FOLDABLE_MIN, cell_len(self.columns[i][0]))
            if widths[i] <= floor:
                break
            others = sorted((widths[j] for j in foldable if j != i), reverse=True)
            target = max(floor, others[0] if others else floor, widths[i] - excess)
            if target >= widths[i]:
                target = widths[i] - 1
            excess -= widths[i] - target
            widths[i] = target
        return widths

    def _head(self, widths: list[int]) -> list[str]:
        names = []
        for (header, just, _f), w in zip(self.columns, widths):
            cell = header.rjust(w) if just else header.ljust(w)
            names.append(f"{_BOLD}{cell}{_RESET}" if self.color else cell)
        return [_rule(_HEAD_TOP, widths), "┃ " + " ┃ ".join(names) + " ┃", _rule(_HEAD_BOTTOM, widths)]

    def _wide_row(self, cells: tuple[str, ...], widths: list[int], style: str | None) -> list[str]:
        """A row with wide characters or cells to fold: one or more lines."""
        folded = [fold(c, w) if cell_len(c) > w else [c] for c, w in zip(cells, widths)]
        height = max(len(f) for f in folded)
        lines = []
        for k in range(height):
            parts = []
            for i, (pieces, w) in enumerate(zip(folded, widths)):
                piece = pieces[k] if k < len(pieces) else ""
                pad = " " * (w - cell_len(piece))
                cell = pad + piece if self.columns[i][1] else piece + pad
                parts.append(f"{style}{cell}{_RESET}" if self.color and style else cell)
            lines.append("│ " + " │ ".join(parts) + " │")
        return lines

    # ------------------------------------------------------------------ items
    def render(self, item: object) -> tuple[str, bool]:
        t = type(item)
        if t is d.BatchItems:
            return "".join([self._batch(i) for i in item.items]), False  # type: ignore[attr-defined]
        if t is d.Batches:
            return self._batches(item.batches), False  # type: ignore[attr-defined]
        if t is d.BatchItem:
            return self._batch(item), False  # type: ignore[arg-type]
        if t is d.IndexEntryItem:
            return self._add((str(item.offset), str(item.position))), False  # type: ignore[attr-defined]
        if t is d.TimeIndexEntryItem:
            ts = item.timestamp  # type: ignore[attr-defined]
            return self._add((str(ts), iso_time(ts), str(item.offset))), False  # type: ignore[attr-defined]
        if t in (d.SnapshotEntryItem, d.TxnEntryItem, d.CheckpointItem):
            from kafkatool.render.jsonl import item_object

            obj = item_object(item) or {}
            entry = " ".join(f"{k}={checkpoint_value(v)}" for k, v in obj.items() if k not in ("type", "file"))
            return self._add((escape(entry),)), False
        if t is d.FileHeader:
            text = self._close()
            kind = {"log": "log", "index": "index", "timeindex": "timeindex"}.get(item.kind, "entries")  # type: ignore[attr-defined]
            if kind == "log" and self.opts.deep:
                kind = "records"
            self.kind = kind
            self.columns = _COLUMNS[kind]
            title = escape(item.path) + (f"  ({item.second_line})" if item.second_line else "")  # type: ignore[attr-defined]
            return text + (f"{_BOLD}{title}{_RESET}" if self.color else title) + "\n", False
        # notes, errors, summaries: close the table, then plain text on the right stream
        from kafkatool.render.text import TextRenderer

        text, to_err = TextRenderer(self.opts).render(item)
        closed = self._close()
        if to_err:
            self._stdout_pending += closed
            return text, True
        return closed + text, False

    def drain(self) -> str:
        """Table text to write to stdout before the stderr text :meth:`render` just returned."""
        text, self._stdout_pending = self._stdout_pending, ""
        return text

    def close(self) -> str:
        return self.drain() + self._close()

    def _batches(self, batches: list) -> str:
        """Shallow dumps: one row per batch, built flat (the hot loop of a table of 1-record batches)."""
        out = []
        add = self._add
        for b in batches:
            (position, size, offset, magic, crc, attrs, lod, _bts, mts, pid, pepoch, bseq, count, _ple, computed) = b
            ok = crc == computed
            if magic >= 2:
                last = offset + lod
                producer = f"{pid}/{pepoch} seq {bseq}..{b.last_sequence}"
                flags = _flags(b) if attrs & _FLAG_BITS else ""
                tst = "append" if attrs & TIMESTAMP_TYPE_BIT else "create"
            else:
                last = offset
                producer = "-"
                flags = ""
                tst = _TS[b.timestamp_type]
            text = add(
                (
                    str(position), f"{offset}..{last}", "-" if count is None else str(count), str(magic),
                    CODEC_NAMES[attrs & CODEC_MASK], f"{tst} {mts}", iso_time(mts), producer, flags, str(size),
                    "ok" if ok else f"BAD {crc}!={computed}",
                ),
                None if ok else _BOLD_RED,
            )
            if text:
                out.append(text)
        return "".join(out)

    def _batch(self, item: d.BatchItem) -> str:
        """Deep dumps: the batch as a bold row, its records under it (the hot loop, kept flat)."""
        b = item.batch
        if not self.opts.deep:
            return self._batches([b])
        (position, size, offset, magic, crc, attrs, lod, _bts, mts, pid, pepoch, bseq, count, _ple, computed) = b
        ok = crc == computed
        if magic >= 2:
            last = offset + lod
            summary = (
                f"batch @{position} size {size} v{magic} {CODEC_NAMES[attrs & CODEC_MASK]} count {count} "
                f"{pid}/{pepoch} seq {bseq}..{b.last_sequence}"
            )
            if attrs & _FLAG_BITS:
                summary = f"{summary} {_flags(b)}"
            tst = "append" if attrs & TIMESTAMP_TYPE_BIT else "create"
        else:
            last = offset
            summary = f"batch @{position} size {size} v{magic} {CODEC_NAMES[attrs & CODEC_MASK]}"
            tst = _TS[b.timestamp_type]
        first = item.base_offset if item.base_offset is not None else offset
        rows = self.rows
        append = rows.append
        if not item.continued:  # (continued: more records of the batch before)
            append(
                (
                    (f"{first}..{last}", f"{tst} {mts}", iso_time(mts), summary,
                     "crc ok" if ok else f"crc BAD {crc}!={computed}", ""),
                    _BOLD if ok else _BOLD_RED,
                )
            )
        records = item.records
        if records is not None:
            if attrs & CONTROL_BIT and magic >= 2:
                controls = item.controls
                for i, r in enumerate(records):
                    c = controls[i] if controls and i < len(controls) else None
                    value = control_suffix(c).strip() if c else "(control)"
                    append(((f"  {r.offset}", str(r.timestamp), iso_time(r.timestamp), "(control)", escape(value), ""), None))
            elif item.decoded is not None:
                vd = self.vd
                for r, dec in zip(records, item.decoded):
                    append(_decoded_row(r, dec, vd))
            else:
                kd, vd = self.kd, self.vd
                string_keys = kd is _string_decoder
                string_values = vd is _string_decoder
                for roff, ts, key, value, headers, _s, _a, _c, _v, _m in records:
                    k = _data_cell(key, string_keys, kd)
                    v = _data_cell(value, string_values, vd)
                    h = _headers_cell(headers, vd) if headers else ""
                    append(((f"  {roff}", str(ts), iso_time(ts), k, v, h), None))
        if len(rows) >= _ROWS_PER_CHUNK:
            return self._flush_rows()
        return ""


def _headers_cell(headers, vd) -> str:
    if not headers:
        return ""
    return escape(", ".join([f"{hk.decode('utf-8', JAVA_UTF8_ERRORS)}={'null' if hv is None else vd(hv)}" for hk, hv in headers]))


def _decoded_row(r, dec: Decoded, vd) -> tuple[tuple[str, ...], str | None]:
    """A record row with an internal-topic decoder's text (kafka-dump-log's compact JSON, or the
    text of the text decoders) as its key and value cells; red when the record did not decode.

    The key cell is ``null`` for a null key and ``-`` when the decoder prints no key (a
    ``--cluster-metadata-decoder`` record with a key); the value cell is ``-`` when it prints no
    payload (an error reported in the key, as kafka-dump-log does), ``error: <message>`` where
    kafka-dump-log would have stopped."""
    if dec.key_text is not None:
        k = dec.key_text
    else:
        k = "null" if r.key is None else "-"
    if dec.fatal:
        v = f"error: {dec.error}"
    else:
        v = dec.payload_text if dec.payload_text is not None else "-"
    ts = r.timestamp
    return (
        (f"  {r.offset}", str(ts), iso_time(ts), escape(k), escape(v), _headers_cell(r.headers, vd)),
        None if dec.error is None else _BOLD_RED,
    )


def _data_cell(data: bytes | None, is_string: bool, decode) -> str:
    """A key or value cell: ``null``, or the decoded text with what does not print escaped."""
    if data is None:
        return "null"
    text = data.decode("utf-8", JAVA_UTF8_ERRORS) if is_string else decode(data)
    return text if text.isprintable() else escape(text)


def _flags(b) -> str:
    flags = []
    if b.is_transactional:
        flags.append("txn")
    if b.is_control:
        flags.append("control")
    if b.has_delete_horizon:
        flags.append(f"horizon={b.base_timestamp}")
    return ",".join(flags)


def _rule(chars: tuple[str, str, str, str], widths: list[int]) -> str:
    left, line, cross, right = chars
    return left + cross.join(line * (w + 2) for w in widths) + right
