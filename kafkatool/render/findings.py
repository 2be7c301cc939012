"""Rendering verify results: JSON Lines, a Rich findings table and a Rich summary."""

from __future__ import annotations

from typing import Iterable

from kafkatool.verify import FileSummary, Finding

__all__ = ["finding_object", "summary_object", "finding_line", "render_table", "render_summary"]

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


def finding_text(f: Finding) -> str:
    """``path:position: kind: message`` — one line, grep-friendly."""
    where = f"{f.file}:{f.position}" if f.position is not None else f.file
    extra = ""
    if f.batches_after:
        extra = f" ({f.batches_after} good batches follow)"
    return f"{where}: {f.kind}: {f.message}{extra}"


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
        t.add_row(Text(f.file), Text("" if f.position is None else str(f.position)),
                  Text("" if f.length is None else str(f.length)), Text(f.kind, style=style), Text(offsets), Text(msg))
    console.print(t)


def render_summary(console, summaries: list[FileSummary], counts: dict[str, int], failing: int, seconds: float) -> None:
    from rich.table import Table
    from rich.text import Text

    total_bytes = sum(s.bytes for s in summaries)
    batches = sum(s.batches for s in summaries)
    logs = sum(1 for s in summaries if s.kind == "log")
    states: dict[str, int] = {}
    for s in summaries:
        if s.state:
            states[s.state] = states.get(s.state, 0) + 1
    head = Text()
    head.append(f"Checked {len(summaries)} files ({logs} segments, {batches} batches, {total_bytes / 1e6:.1f} MB) in {seconds:.2f} s: ")
    if failing:
        head.append(f"{failing} finding(s) that fail the check", style="bold red")
    else:
        head.append("no failing findings", style="bold green")
    console.print(head)
    if states:
        console.print(Text("Partition directories in transition: " + ", ".join(f"{n} {k}" for k, n in sorted(states.items())), style="yellow"))
    if counts:
        t = Table(show_header=True, box=None)
        t.add_column("kind")
        t.add_column("count", justify="right")
        for k, n in sorted(counts.items(), key=lambda kv: -kv[1]):
            t.add_row(Text(k), Text(str(n)))
        console.print(t)
