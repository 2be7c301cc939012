"""Rendering ``kafkatool groups`` results (:class:`~kafkatool.groups.PartitionRead`): JSON Lines (a
``partition`` object per ``__consumer_offsets`` partition replayed, then a ``group`` object per
group of it, then a final ``summary``), Rich tables (groups, members, committed offsets), and the
lines for standard error (replicas not used, damaged regions, undecodable records, the summary).

Pure functions of the result model; the tables are laid out here (:func:`table_lines`), cells
measured and folded as ``dump --format table`` does (:mod:`kafkatool.render.terminal`). JSON
names are camelCase and Kafka's where Kafka has one (``groupId``, ``protocolType``,
``generation``, ``leaderEpoch``, ``commitTimestamp``, ``expireTimestamp``, ``memberEpoch``); times
are epoch milliseconds in JSON, and also ISO 8601 UTC in tables. The schema is in kafkatool-groups(1).
"""

from __future__ import annotations

from typing import Iterable, Iterator

from kafkatool.groups import CommittedOffset, Group, Member, PartitionRead, TopicPartitions
from kafkatool.render.stats import dumps, problem_fields
from kafkatool.render.terminal import cell_len, fold
from kafkatool.render.times import iso_time

__all__ = [
    "dumps",
    "partition_object",
    "group_object",
    "summary_object",
    "notes",
    "error_lines",
    "summary_line",
    "assignment_text",
    "table_lines",
]


# ----------------------------------------------------------------------------- JSON Lines


def _tps(tps: list[TopicPartitions] | None) -> list | None:
    if tps is None:
        return None
    return [{"topic": t.topic, "topicId": t.topic_id, "partitions": list(t.partitions)} for t in tps]


def _member_object(m: Member) -> dict:
    return {
        "memberId": m.member_id,
        "groupInstanceId": m.group_instance_id,
        "clientId": m.client_id,
        "clientHost": m.client_host,
        "rackId": m.rack_id,
        "sessionTimeoutMs": m.session_timeout_ms,
        "rebalanceTimeoutMs": m.rebalance_timeout_ms,
        "subscribedTopics": m.subscribed_topics,
        "subscribedTopicRegex": m.subscribed_topic_regex,
        "serverAssignor": m.server_assignor,
        "assignment": _tps(m.assignment),
        "assignmentError": m.assignment_error,
        "memberEpoch": m.member_epoch,
        "previousMemberEpoch": m.previous_member_epoch,
        "memberState": m.member_state,
        "pendingRevocation": _tps(m.pending_revocation),
        "targetAssignment": _tps(m.target_assignment),
    }


def _offset_object(o: CommittedOffset) -> dict:
    return {
        "topic": o.topic,
        "partition": o.partition,
        "offset": o.offset,
        "leaderEpoch": o.leader_epoch,
        "metadata": o.metadata,
        "commitTimestamp": o.commit_timestamp,
        "expireTimestamp": o.expire_timestamp,
        "version": o.version,
        "recordOffset": o.record_offset,
        "producerId": o.producer_id,
        "logEndOffset": o.log_end_offset,
        "lag": o.lag,
    }


def partition_object(r: PartitionRead) -> dict:
    """One ``"type": "partition"`` object: the ``__consumer_offsets`` partition replayed."""
    return {
        "type": "partition",
        "partitionDir": r.path,
        "partition": r.partition,
        "logEndOffset": r.log_end_offset,
        "segments": r.segments,
        "batches": r.batches,
        "records": r.records,
        "groups": len(r.groups),
        "otherReplicas": [{"partitionDir": o.path, "logEndOffset": o.log_end_offset} for o in r.other_replicas],
        "problems": [problem_fields(p) for p in r.problems],
        "problemsNotListed": r.problems_not_listed,
        "undecodable": [{"file": u.file, "offset": u.offset, "message": u.message} for u in r.undecodable],
        "undecodableNotListed": r.undecodable_not_listed,
    }


def group_object(g: Group) -> dict:
    """One ``"type": "group"`` object."""
    return {
        "type": "group",
        "groupId": g.group_id,
        "groupType": g.group_type,
        "state": g.state,
        "partitionDir": g.partition_dir,
        "offsetsPartition": g.offsets_partition,
        "protocolType": g.protocol_type,
        "protocol": g.protocol,
        "generation": g.generation,
        "leader": g.leader,
        "currentStateTimestamp": g.current_state_timestamp,
        "epoch": g.epoch,
        "assignmentEpoch": g.assignment_epoch,
        "metadataOffset": g.metadata_offset,
        "deletedAt": g.deleted_at,
        "members": [_member_object(m) for m in g.members],
        "offsets": [_offset_object(o) for o in g.offsets],
        "pendingOffsets": [_offset_object(o) for o in g.pending_offsets],
    }


def summary_object(reads: list[PartitionRead], seconds: float) -> dict:
    """The final ``"type": "summary"`` object."""
    return {
        "type": "summary",
        "partitions": len(reads),
        "groups": sum(len(r.groups) for r in reads),
        "batches": sum(r.batches for r in reads),
        "records": sum(r.records for r in reads),
        "problems": sum(len(r.problems) + r.problems_not_listed for r in reads),
        "undecodable": sum(len(r.undecodable) + r.undecodable_not_listed for r in reads),
        "seconds": round(seconds, 3),
    }


# ----------------------------------------------------------------------------- standard error


def _plural(n: int, word: str, words: str | None = None) -> str:
    return f"{n} {word if n == 1 else (words or word + 's')}"


def _leo(n: int | None) -> str:
    return "unreadable" if n is None else f"log end {n}"


def notes(r: PartitionRead) -> list[str]:
    """``kafkatool: note: ...`` lines: which copy of a replicated partition was replayed."""
    if not r.other_replicas:
        return []
    others = ", ".join(f"{o.path} ({_leo(o.log_end_offset)})" for o in r.other_replicas)
    return [f"kafkatool: note: {r.path}: replayed this copy ({_leo(r.log_end_offset)}, the highest); "
            f"not replayed: {others}"]


def error_lines(r: PartitionRead) -> list[str]:
    """``kafkatool: error: ...`` lines: damaged regions and batches, records that could not be decoded."""
    out = [f"kafkatool: error: {p.verify_line()}" for p in r.problems]
    if r.problems_not_listed:
        out.append(f"kafkatool: error: {r.path}: and {_plural(r.problems_not_listed, 'more damaged region')}")
    out += [f"kafkatool: error: {u}" for u in r.undecodable]
    if r.undecodable_not_listed:
        out.append(f"kafkatool: error: {r.path}: and {_plural(r.undecodable_not_listed, 'more record')} "
                   "that could not be decoded")
    return out


def summary_line(reads: list[PartitionRead], seconds: float) -> str:
    """``Replayed 2 __consumer_offsets partitions (30 records) in 0.01 s: 3 groups; no problems``."""
    o = summary_object(reads, seconds)
    trouble = []
    if o["problems"]:
        trouble.append(_plural(o["problems"], "damaged region or batch", "damaged regions or batches"))
    if o["undecodable"]:
        trouble.append(_plural(o["undecodable"], "record") + " not decoded")
    return (f"Replayed {_plural(o['partitions'], '__consumer_offsets partition')} "
            f"({_plural(o['records'], 'record')}, {_plural(o['batches'], 'batch', 'batches')}) in {seconds:.2f} s: "
            f"{_plural(o['groups'], 'group')}; " + (", ".join(trouble) if trouble else "no problems"))


# ----------------------------------------------------------------------------- tables


def assignment_text(tps: list[TopicPartitions] | None) -> str:
    """``orders: 0,1; payments: 2`` (a topic id in brackets when the name is not known)."""
    if not tps:
        return "-" if tps is None else "(none)"
    return "; ".join(f"{t.topic if t.topic is not None else '[' + str(t.topic_id) + ']'}: "
                     f"{','.join(map(str, t.partitions))}" for t in tps)


def _time(ms: int | None) -> str | list[str]:
    """Epoch milliseconds, and ISO 8601 UTC on a second line."""
    if ms is None or ms < 0:
        return "-" if ms is None else str(ms)
    return [str(ms), iso_time(ms) or "?"]


def _none(v) -> str:
    return "-" if v is None else str(v)


def _group_row(g: Group) -> list:
    if g.group_type == "classic":
        protocol = f"{g.protocol_type or '(none)'} / {g.protocol or '-'}"
        gen = f"generation {_none(g.generation)}"
    else:
        protocol = "-"
        gen = f"epoch {g.epoch}, assignment epoch {g.assignment_epoch}"
    note = []
    if g.deleted_at is not None:
        note.append(f"metadata deleted at offset {g.deleted_at}")
    if g.current_state_timestamp is not None:
        note.append(f"state since {iso_time(g.current_state_timestamp)}")
    return [g.group_id, g.group_type, g.state, protocol, gen, _none(g.leader), str(len(g.members)),
            f"{len(g.offsets)}" + (f" (+{len(g.pending_offsets)} pending)" if g.pending_offsets else ""),
            str(g.offsets_partition), note]


def _member_row(g: Group, m: Member) -> list:
    timeouts = f"{_none(m.session_timeout_ms)} / {_none(m.rebalance_timeout_ms)}"
    if m.member_epoch is not None:
        epoch = f"epoch {m.member_epoch} (prev {m.previous_member_epoch}) {m.member_state or ''}".strip()
    else:
        epoch = ""
    assignment = assignment_text(m.assignment)
    if m.assignment_error:
        assignment = m.assignment_error
    extra = []
    if m.pending_revocation:
        extra.append("revoking " + assignment_text(m.pending_revocation))
    if m.target_assignment is not None:
        extra.append("target " + assignment_text(m.target_assignment))
    subscribed = ",".join(m.subscribed_topics) if m.subscribed_topics else (m.subscribed_topic_regex or "-")
    return [g.group_id, m.member_id, _none(m.group_instance_id), _none(m.client_id), _none(m.client_host),
            timeouts, subscribed, [assignment, *extra], epoch]


def _offset_row(g: Group, o: CommittedOffset, pending: bool, lag: bool = False) -> list:
    status = f"pending (producer {o.producer_id})" if pending else (
        "committed" if o.producer_id is None else f"committed (txn, producer {o.producer_id})")
    expire = "-" if o.expire_timestamp is None else _time(o.expire_timestamp)
    return [g.group_id, o.topic, str(o.partition), str(o.offset), str(o.leader_epoch), _time(o.commit_timestamp),
            expire, o.metadata, status, str(o.record_offset)] + ([_none(o.log_end_offset), _none(o.lag)] if lag else [])


# (header, right-justified, may fold to fit a terminal)
_GROUP_COLUMNS = (("group", False, True), ("type", False, False), ("state", False, False),
                  ("protocol type / protocol", False, True), ("generation / epoch", False, True),
                  ("leader", False, True), ("members", True, False), ("offsets", True, False),
                  ("partition", True, False), ("note", False, True))
_MEMBER_COLUMNS = (("group", False, True), ("member", False, True), ("instance", False, True),
                   ("client", False, True), ("host", False, True), ("session / rebalance ms", True, False),
                   ("subscribed", False, True), ("assigned partitions", False, True), ("epoch / state", False, True))
_OFFSET_COLUMNS = (("group", False, True), ("topic", False, True), ("partition", True, False),
                   ("offset", True, False), ("leader epoch", True, False), ("commit time (UTC)", False, True),
                   ("expire time (UTC)", False, True), ("metadata", False, True), ("status", False, True),
                   ("record offset", True, False))
_LAG_COLUMNS = (("log end", True, False), ("lag", True, False))
_RED, _YELLOW, _BOLD, _RESET = "\x1b[31m", "\x1b[33m", "\x1b[1m", "\x1b[0m"
_FOLD_MIN = 4
"""A column folded to fit a terminal keeps at least this many cells (its header folds too)."""


def table_lines(reads: Iterable[PartitionRead], *, width: int | None = None, color: bool = False) -> Iterator[str]:
    """Three tables, line by line: the groups, their members, their committed (and pending)
    offsets, groups by id across partitions; in Rich's heavy-head box style. ``width``: fold
    the text columns (never the numbers), widest first, to fit it where they can (a terminal's
    width); None never folds. ``color``: ANSI colour
    for Dead groups (red) and pending offsets (yellow).

    Laid out here rather than by a Rich ``Table``: Rich holds every rendered row (~12 KB and
    0.5 ms a row: 20,000 offsets took 12 s and 250 MB); these lines cost their strings only."""
    groups = sorted((g for r in reads for g in r.groups), key=lambda g: (g.group_id, g.offsets_partition or -1))
    rows = [(_group_row(g), _RED if g.state == "Dead" else None) for g in groups]
    yield from _table("Groups", _GROUP_COLUMNS, rows, width, color)
    rows = [(_member_row(g, m), None) for g in groups for m in g.members]
    if rows:
        yield from _table("Members", _MEMBER_COLUMNS, rows, width, color)
    lag = any(o.log_end_offset is not None for g in groups for o in (*g.offsets, *g.pending_offsets))
    rows = [(_offset_row(g, o, False, lag), None) for g in groups for o in g.offsets]
    rows += [(_offset_row(g, o, True, lag), _YELLOW) for g in groups for o in g.pending_offsets]
    if rows:
        rows.sort(key=lambda r: (r[0][0], r[1] is not None))  # by group (stable: its offsets in order), pending last
        yield from _table("Committed offsets", _OFFSET_COLUMNS + (_LAG_COLUMNS if lag else ()), rows, width, color)


def _table(title: str, columns, rows: list[tuple[list[str], str | None]], width: int | None,
           color: bool) -> Iterator[str]:
    # a cell is a string (one line) or a list of lines; every line escaped (data can hold anything)
    cells = [[[_printable(c)] if isinstance(c, str) else [_printable(x) for x in c] or [""] for c in row]
             for row, _style in rows]
    widths = [max([cell_len(h)] + [cell_len(line) for row in cells for line in row[i]]) for i, (h, _r, _f) in
              enumerate(columns)]
    if width is not None:
        widths = _fit(widths, [foldable for _h, _r, foldable in columns], width)
    yield f"{_BOLD}{title}{_RESET}" if color else title
    yield "┏" + "┳".join("━" * (w + 2) for w in widths) + "┓"
    heads = [fold(h, w) for (h, _r, _f), w in zip(columns, widths)]
    for k in range(max(len(h) for h in heads)):
        yield "┃ " + " ┃ ".join(_pad(h[k] if k < len(h) else "", w, right)
                                 for h, w, (_h, right, _f) in zip(heads, widths, columns)) + " ┃"
    yield "┡" + "╇".join("━" * (w + 2) for w in widths) + "┩"
    for row, (_cells, style) in zip(cells, rows):
        pieces = [[p for line in cell for p in fold(line, w)] for cell, w in zip(row, widths)]
        for k in range(max(len(p) for p in pieces)):
            line = "│ " + " │ ".join(_pad(p[k] if k < len(p) else "", w, right)
                                     for p, w, (_h, right, _f) in zip(pieces, widths, columns)) + " │"
            yield f"{style}{line}{_RESET}" if color and style else line
    yield "└" + "┴".join("─" * (w + 2) for w in widths) + "┘"


def _printable(text: str) -> str:
    """A line of a cell with control characters escaped (``\\n``, ``\\x1b``): a group id or a
    metadata string cannot break a row or drive the terminal."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _pad(text: str, width: int, right: bool) -> str:
    pad = " " * (width - cell_len(text))
    return pad + text if right else text + pad


def _fit(widths: list[int], foldable: list[bool], total: int) -> list[int]:
    """Narrow the widest foldable (text) column, one cell at a time, until the table (borders
    included) fits ``total`` cells or every foldable column is down to :data:`_FOLD_MIN`; the
    numbers are never folded."""
    widths = list(widths)
    excess = sum(widths) + 3 * len(widths) + 1 - total
    candidates = [i for i, f in enumerate(foldable) if f]
    while excess > 0 and candidates:
        i = max(candidates, key=lambda j: widths[j])
        if widths[i] <= _FOLD_MIN:
            break
        widths[i] -= 1
        excess -= 1
    return widths
