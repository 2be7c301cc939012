"""Rendering verify results: plain lines, JSON Lines, a Rich findings table, and the summary
(plain lines, or Rich on a terminal).

Only :func:`render_table` and :func:`render_summary` import Rich, when called: the plain
renderers are what scripts and pipes get, and a short run should not pay Rich's start-up.
"""

from __future__ import annotations

from typing import Iterable

from kafkatool.verify import FileSummary, Finding, FindingKind

__all__ = ["finding_object", "summary_object", "finding_line", "summary_line", "finding_text", "summary_lines", "render_table", "render_summary"]

_encode = None


def _dumps(obj) -> str:
    """Compact JSON (json is imported on first use: a text report never needs it)."""
    global _encode
    if _encode is None:
        import json

        _encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str).encode
    return _encode(obj)


def _jsonable(v):
    if isinstance(v, tuple):
        return list(v)
    return v


def finding_object(f: Finding) -> dict:
    """One ``"type": "finding"`` object (schema in kafkatool-verify(1))."""
    return {
        "type": "finding",
        "file": f.file,
        "position": f.position,
        "length": f.length,
        "kind": f.kind,
        "batchIndex": f.batch_index,
        "offset": None if f.first_offset is None else {"first": f.first_offset, "last": f.last_offset},
        "expected": _jsonable(f.expected),
        "found": _jsonable(f.found),
        "message": f.message,
        "batchesAfter": f.batches_after,
    }


def summary_object(files: int, bytes_: int, batches: int, counts: dict[str, int], failing: int, seconds: float, states: dict[str, int]) -> dict:
    """The final ``"type": "summary"`` object."""
    return {
        "type": "summary",
        "files": files,
        "bytes": bytes_,
        "batches": batches,
        "findings": sum(counts.values()),
        "failing": failing,
        "kinds": dict(sorted(counts.items())),
        "partitionStates": states,
        "seconds": round(seconds, 3),
    }


def finding_line(f: Finding) -> str:
    return _dumps(finding_object(f))


def summary_line(files: int, bytes_: int, batches: int, counts: dict[str, int], failing: int, seconds: float, states: dict[str, int]) -> str:
    """The final JSON line (:func:`summary_object`)."""
    return _dumps(summary_object(files, bytes_, batches, counts, failing, seconds, states))


def finding_text(f: Finding) -> str:
    """``path:position: kind: message`` — one line, grep-friendly."""
    where = f"{f.file}:{f.position}" if f.position is not None else f.file
    extra = ""
    if f.batches_after:
        extra = f" ({f.batches_after} good batches follow)"
    return f"{where}: {f.kind}: {f.message}{extra}"


#: Kinds whose ``expected``/``found`` are epoch milliseconds (a table shows them as ISO 8601 too).
_TIME_KINDS = frozenset({FindingKind.TIMESTAMP_INVALID, FindingKind.RECORD_TIMESTAMP_INVALID, FindingKind.TIMEINDEX_TIMESTAMP_MISMATCH})


def _times(f: Finding) -> str:
    """``found <ms> (<ISO>), expected <ms> (<ISO>)`` for a finding about timestamps, else ''."""
    if f.kind not in _TIME_KINDS:
        return ""
    from kafkatool.render.table import iso_time

    parts = []
    for label, value in (("found", f.found), ("expected", f.expected)):
        values = value if isinstance(value, tuple) else (value,)
        shown = [f"{v} ({iso_time(v)})" if isinstance(v, int) and iso_time(v) else str(v) for v in values if v is not None]
        if shown:
            parts.append(f"{label} {', '.join(shown)}")
    return "; ".join(parts)


def render_table(console, findings: Iterable[Finding], fail_kinds) -> None:
    from rich.table import Table
    from rich.text import Text

    t = Table(title="Findings", title_justify="left")
    for col, just in (("file", "left"), ("position", "right"), ("length", "right"), ("kind", "left"),
                      ("offsets", "right"), ("message", "left")):
        t.add_column(col, justify=just, overflow="fold")
    for f in findings:
        style = "red" if f.kind in fail_kinds else "yellow"
        offsets = "" if f.first_offset is None else f"{f.first_offset}..{f.last_offset}"
        msg = f.message + (f" ({f.batches_after} good batches follow)" if f.batches_after else "")
        times = _times(f)
        if times:
            msg += f"\n{times}"
        t.add_row(Text(f.file), Text("" if f.position is None else str(f.position)),
                  Text("" if f.length is None else str(f.length)), Text(f.kind, style=style), Text(offsets), Text(msg))
    console.print(t)


def _plural(n: int, word: str, many: str | None = None) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {many or word + 's'}"


def _size(n: int) -> str:
    """A byte count for people: ``545 bytes``, ``12.3 kB``, ``2147.5 MB`` (decimal units)."""
    if n < 1000:
        return _plural(n, "byte")
    if n < 1_000_000:
        return f"{n / 1e3:.1f} kB"
    return f"{n / 1e6:.1f} MB"


def _summary_parts(summaries: list[FileSummary], counts: dict[str, int], failing: int, seconds: float):
    """(head, verdict, states line or None, [(kind, count)]) of a run's summary."""
    total_bytes = sum(s.bytes for s in summaries)
    batches = sum(s.batches for s in summaries)
    logs = sum(1 for s in summaries if s.kind == "log")
    states: dict[str, int] = {}
    for s in summaries:
        if s.state:
            states[s.state] = states.get(s.state, 0) + 1
    head = (f"Checked {_plural(len(summaries), 'file')} ({_plural(logs, 'segment')}, {_plural(batches, 'batch', 'batches')}, "
            f"{_size(total_bytes)}) in {seconds:.2f} s: ")
    verdict = (f"{_plural(failing, 'finding')} that {'fails' if failing == 1 else 'fail'} the check"
               if failing else "no failing findings")
    state_line = ("Partition directories in transition: " + ", ".join(f"{n} {k}" for k, n in sorted(states.items()))) if states else None
    rows = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return head, verdict, state_line, rows


def summary_lines(summaries: list[FileSummary], counts: dict[str, int], failing: int, seconds: float) -> list[str]:
    """The summary as plain lines (never wrapped): what standard error gets when it is not a terminal.

    The first line is ``Checked <n> files (...) in <t> s: no failing findings`` or
    ``...: <n> findings that fail the check`` (``1 finding that fails``); then the partition states, if any; then one
    ``  <kind>  <count>`` line per kind found.
    """
    head, verdict, state_line, rows = _summary_parts(summaries, counts, failing, seconds)
    out = [head + verdict]
    if state_line:
        out.append(state_line)
    width = max((len(k) for k, _ in rows), default=0)
    out.extend(f"  {k:<{width}}  {n}" for k, n in rows)
    return out


def render_summary(console, summaries: list[FileSummary], counts: dict[str, int], failing: int, seconds: float) -> None:
    """The summary for a terminal (Rich: colours, a table of kinds)."""
    from rich.table import Table
    from rich.text import Text

    head, verdict, state_line, rows = _summary_parts(summaries, counts, failing, seconds)
    text = Text(head)
    text.append(verdict, style="bold red" if failing else "bold green")
    console.print(text)
    if state_line:
        console.print(Text(state_line, style="yellow"))
    if rows:
        t = Table(show_header=True, box=None)
        t.add_column("kind")
        t.add_column("count", justify="right")
        for k, n in rows:
            t.add_row(Text(k), Text(str(n)))
        console.print(t)
