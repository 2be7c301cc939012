"""Rich tables for people at a terminal. Values are rendered as plain Text (no markup), so a
payload such as ``[red]`` prints as written."""

from __future__ import annotations

import sys

from kafkatool import dump as d
from kafkatool.record.compression import codec_name
from kafkatool.render.decoders import get_decoder
from kafkatool.render.text import control_suffix

__all__ = ["TableRenderer"]

_TS = {-1: "none", 0: "create", 1: "append"}
_ROWS_PER_TABLE = 500


class TableRenderer:
    """Renders dump items as Rich tables, one per file (split every few hundred rows so memory stays flat)."""

    def __init__(self, opts: d.DumpOptions, key_decoder: str = "string", value_decoder: str = "string", *, width: int | None = None, color: bool | None = None) -> None:
        from rich.console import Console

        self.opts = opts
        self.kd = get_decoder(key_decoder)
        self.vd = get_decoder(value_decoder)
        tty = sys.stdout.isatty()
        self.console = Console(
            # at a terminal use its width; into a pipe or file, wide enough not to fold every cell
            width=width if width is not None else (None if tty else 200),
            force_terminal=tty if color is None else color,
            no_color=not (tty if color is None else color),
            highlight=False,
            markup=False,
            emoji=False,
        )
        self.table = None
        self.kind = None
        self.title = ""
        self.rows = 0

    # ------------------------------------------------------------------ helpers
    def _capture(self, *renderables) -> str:
        with self.console.capture() as cap:
            for r in renderables:
                self.console.print(r)
        return cap.get()

    def _flush(self) -> str:
        if self.table is None or self.rows == 0:
            return ""
        from rich.text import Text

        parts = [self.table]
        if self.title:
            parts.insert(0, Text(self.title, style="bold"))
            self.title = ""  # once per file, not per chunk
        text = self._capture(*parts)
        self._new_table(self.kind)
        return text

    def _new_table(self, kind: str | None) -> None:
        from rich.table import Table

        self.kind = kind
        self.rows = 0
        t = Table(show_lines=False, expand=False)
        if kind == "log":
            for name, just in (
                ("position", "right"), ("offsets", "right"), ("count", "right"), ("magic", "right"),
                ("codec", "left"), ("timestamp", "right"), ("producer", "left"), ("flags", "left"),
                ("size", "right"), ("crc", "left"),
            ):
                t.add_column(name, justify=just, overflow="fold")
        elif kind == "records":
            for name in ("offset", "timestamp", "key", "value", "headers"):
                t.add_column(name, overflow="fold")
        elif kind == "index":
            t.add_column("offset", justify="right", overflow="fold")
            t.add_column("position", justify="right", overflow="fold")
        elif kind == "timeindex":
            t.add_column("timestamp", justify="right", overflow="fold")
            t.add_column("offset", justify="right", overflow="fold")
        else:
            t.add_column("entry", overflow="fold")
        self.table = t

    def _row(self, *cells, style: str | None = None) -> str:
        from rich.text import Text

        assert self.table is not None
        self.table.add_row(*[c if isinstance(c, Text) else Text(str(c)) for c in cells], style=style)
        self.rows += 1
        if self.rows >= _ROWS_PER_TABLE:
            return self._flush()
        return ""

    # ------------------------------------------------------------------ items
    def render(self, item: object) -> tuple[str, bool]:
        if isinstance(item, d.FileHeader):
            text = self._flush()
            self.title = f"{item.path}" + (f"  ({item.second_line})" if item.second_line else "")
            self._new_table({"log": "log", "index": "index", "timeindex": "timeindex"}.get(item.kind, "entries"))
            return text, False
        if isinstance(item, d.BatchItem):
            return self._batch(item), False
        if isinstance(item, d.BatchItems):
            return "".join(self._batch(i) for i in item.items), False
        if isinstance(item, d.Batches):
            return "".join(self._batch(d.BatchItem(item.path, b, None)) for b in item.batches), False
        if isinstance(item, d.IndexEntryItem):
            return self._row(item.offset, item.position), False
        if isinstance(item, d.TimeIndexEntryItem):
            return self._row(item.timestamp, item.offset), False
        if isinstance(item, (d.SnapshotEntryItem, d.TxnEntryItem, d.CheckpointItem)):
            from kafkatool.render.jsonl import _object

            obj = _object(item) or {}
            return self._row(" ".join(f"{k}={v}" for k, v in obj.items() if k not in ("type", "file"))), False
        # notes, errors, summaries: flush the table, then plain text on the right stream
        from kafkatool.render.text import TextRenderer

        text, to_err = TextRenderer(self.opts).render(item)
        flushed = self._flush()
        if to_err:
            return flushed + text, True if not flushed else False
        return flushed + text, False

    def _batch(self, item: d.BatchItem) -> str:
        b = item.batch
        flags = []
        if b.is_transactional:
            flags.append("txn")
        if b.is_control:
            flags.append("control")
        if b.has_delete_horizon:
            flags.append(f"horizon={b.base_timestamp}")
        producer = f"{b.producer_id}/{b.producer_epoch} seq {b.base_sequence}..{b.last_sequence}" if b.magic >= 2 else "-"
        first = item.base_offset if item.base_offset is not None else b.offset
        crc = "ok" if b.crc_valid else f"BAD {b.crc}!={b.computed_crc}"
        style = None if b.crc_valid else "bold red"
        if not self.opts.deep:
            return self._row(
                b.position, f"{first}..{b.last_offset}", "-" if b.count is None else b.count, b.magic,
                codec_name(b.attributes & 7), f"{_TS[b.timestamp_type]} {b.max_timestamp}", producer,
                ",".join(flags), b.size, crc, style=style,
            )
        # deep: one table per file; a batch is a bold row, its records follow it
        if self.kind != "records":
            text = self._flush()
            self._new_table("records")
        else:
            text = ""
        summary = " ".join(
            x for x in (
                f"batch @{b.position}", f"size {b.size}", f"v{b.magic}", codec_name(b.attributes & 7),
                "" if b.count is None else f"count {b.count}", producer if b.magic >= 2 else "", ",".join(flags),
            ) if x
        )
        text += self._row(
            f"{first}..{b.last_offset}", f"{_TS[b.timestamp_type]} {b.max_timestamp}", summary, f"crc {crc}", "",
            style=style or "bold",
        )
        for i, r in enumerate(item.records or ()):
            if b.is_control:
                c = item.controls[i] if item.controls and i < len(item.controls) else None
                key, value = "(control)", control_suffix(c).strip() if c else "(control)"
            else:
                key = "null" if r.key is None else self.kd(r.key)
                value = "null" if r.value is None else self.vd(r.value)
            headers = ", ".join(
                f"{k.decode('utf-8', 'replace')}={'null' if v is None else self.vd(v)}" for k, v in r.headers
            )
            text += self._row(f"  {r.offset}", r.timestamp, key, value, headers)
        return text

    def close(self) -> str:
        return self._flush()
