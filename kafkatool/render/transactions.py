"""Rendering ``kafkatool transactions`` reports (:class:`~kafkatool.transactions.TransactionsReport`):
JSON Lines (one object per transactional id, open transaction, partition, problem, and a
summary), Rich tables, the abort commands, and the lines for standard error.

Pure functions of the report; only :func:`render_tables` imports Rich, when called. JSON names
are camelCase, Kafka's where Kafka has one (``producerId``, ``producerEpoch``,
``transactionTimeoutMs``); the schema is in kafkatool-transactions(1).
"""

from __future__ import annotations

import shlex
from typing import Iterator

from kafkatool.render.stats import dumps, problem_fields
from kafkatool.render.times import iso_time
from kafkatool.transactions import (
    OpenPartition, OpenTransaction, PartitionScan, Problem, TransactionsReport, TxnState, Verdict,
)

__all__ = [
    "BOOTSTRAP_PLACEHOLDER",
    "dumps",
    "abort_command",
    "find_hanging_command",
    "state_object",
    "open_object",
    "partition_object",
    "problem_object",
    "summary_object",
    "json_lines",
    "duration",
    "summary_line",
    "replica_lines",
    "problem_lines",
    "command_lines",
    "render_tables",
]

BOOTSTRAP_PLACEHOLDER = "BROKER:9092"
"""Where the commands printed say which broker to reach (the operator puts a live broker there)."""



def _ts(ms: int | None) -> int | None:
    return None if ms is None or ms < 0 else ms


def abort_command(op: OpenPartition) -> str:
    """``kafka-transactions.sh`` abort of one partition's open transaction (brokers 3.0 and later:
    the transaction is named by its first offset, the broker looks up its producer)."""
    return (f"kafka-transactions.sh --bootstrap-server {BOOTSTRAP_PLACEHOLDER} abort --topic {shlex.quote(op.topic)} "
            f"--partition {op.partition} --start-offset {op.first_offset}")


def find_hanging_command(op: OpenPartition) -> str:
    """``kafka-transactions.sh find-hanging`` for one partition: the live cluster's view to confirm with."""
    return (f"kafka-transactions.sh --bootstrap-server {BOOTSTRAP_PLACEHOLDER} find-hanging --topic "
            f"{shlex.quote(op.topic)} --partition {op.partition}")


# ----------------------------------------------------------------------------- JSON Lines


def state_object(s: TxnState) -> dict:
    """One ``"type": "transactionalId"`` object."""
    return {
        "type": "transactionalId",
        "transactionalId": s.transactional_id,
        "state": s.state,
        "producerId": s.producer_id,
        "producerEpoch": s.producer_epoch,
        "previousProducerId": s.previous_producer_id,
        "nextProducerId": s.next_producer_id,
        "transactionTimeoutMs": s.timeout_ms,
        "partitions": [{"topic": t, "partition": p} for t, p in s.partitions],
        "startTimestamp": _ts(s.start_timestamp),
        "lastUpdateTimestamp": _ts(s.last_update_timestamp),
        "clientTransactionVersion": s.client_transaction_version,
        "valueVersion": s.version,
        "partitionDir": s.partition_dir,
        "offset": s.offset,
    }


def _open_partition_object(op: OpenPartition) -> dict:
    return {
        "topic": op.topic,
        "partition": op.partition,
        "partitionDir": op.partition_dir,
        "firstOffset": op.first_offset,
        "lastOffset": None if op.last_offset < 0 else op.last_offset,
        "firstTimestamp": _ts(op.first_timestamp),
        "lastTimestamp": _ts(op.last_timestamp),
        "batches": op.batches,
        "records": op.records,
        "producerEpoch": op.producer_epoch,
        "firstProducerEpoch": op.first_epoch,
        "coordinatorEpoch": op.coordinator_epoch,
        "fromSnapshot": op.from_snapshot,
        "startUncertain": op.start_uncertain,
        "logStartOffset": op.log_start_offset,
        "logEndOffset": op.log_end_offset,
        "verdict": op.verdict,
        "reason": op.reason,
        "abortCommand": abort_command(op),
    }


def open_object(t: OpenTransaction) -> dict:
    """One ``"type": "openTransaction"`` object: a producer id's open transaction over its partitions."""
    return {
        "type": "openTransaction",
        "producerId": t.producer_id,
        "producerEpoch": t.producer_epoch,
        "transactionalId": t.transactional_id,
        "coordinatorState": None if t.coordinator is None else t.coordinator.state,
        "verdict": t.verdict,
        "firstTimestamp": _ts(t.first_timestamp),
        "lastTimestamp": _ts(t.last_timestamp),
        "ageMs": t.age_ms,
        "idleMs": t.idle_ms,
        "ageAtNewestMs": t.age_at_newest_ms,
        "partitions": [_open_partition_object(op) for op in t.partitions],
    }


def partition_object(s: PartitionScan) -> dict:
    """One ``"type": "partition"`` object."""
    return {
        "type": "partition",
        "topic": s.topic,
        "partition": s.partition,
        "partitionDir": s.partition_dir,
        "logStartOffset": s.log_start_offset,
        "logEndOffset": s.log_end_offset,
        "batches": s.batches,
        "transactionalBatches": s.transactional_batches,
        "committed": s.committed,
        "aborted": s.aborted,
        "fenced": s.fenced,
        "markersWithoutData": s.markers_without_data,
        "open": s.open,
        "newestTimestamp": s.newest_timestamp,
        "otherCopies": [{"partitionDir": d, "logEndOffset": end} for d, end in s.other_copies],
    }


def problem_object(p: Problem) -> dict:
    """One ``"type": "problem"`` object."""
    return {"type": "problem", **problem_fields(p)}


def summary_object(r: TransactionsReport) -> dict:
    """The final ``"type": "summary"`` object."""
    return {
        "type": "summary",
        "now": r.now_ms,
        "newestTimestamp": r.newest_timestamp,
        "partitions": len(r.partitions),
        "coordinatorPartitions": r.coordinator_partitions,
        "coordinatorPartitionsMissing": r.coordinator_partitions_missing,
        "transactionalIds": r.transactional_ids,
        "transactionalIdsShown": len(r.states),
        "openTransactions": len(r.open),
        "hanging": sum(1 for t in r.open if t.verdict == Verdict.HANGING),
        "batches": r.batches,
        "bytes": r.bytes,
        "problems": len(r.problems),
        "seconds": round(r.seconds, 3),
    }


def _shown_partitions(r: TransactionsReport) -> list[PartitionScan]:
    """The partitions worth a line: with transactional batches, an open transaction, or other copies."""
    return [s for s in r.partitions if s.transactional_batches or s.open or s.other_copies
            or s.topic == "__transaction_state"]


def json_lines(r: TransactionsReport) -> Iterator[str]:
    """Every line of ``--format jsonl``, in order: transactional ids, open transactions,
    partitions, problems, the summary."""
    for s in r.states:
        yield dumps(state_object(s))
    for t in r.open:
        yield dumps(open_object(t))
    for p in _shown_partitions(r):
        yield dumps(partition_object(p))
    for pr in r.problems:
        yield dumps(problem_object(pr))
    yield dumps(summary_object(r))


# ----------------------------------------------------------------------------- text


def duration(ms: int | None) -> str:
    """``3d 04:05:06`` / ``04:05:06`` / ``-`` for None; a negative duration (a time after ``--now``) gets a ``-``."""
    if ms is None:
        return "-"
    sign = "-" if ms < 0 else ""
    s = abs(ms) // 1000
    days, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    return f"{sign}{days}d {h:02d}:{m:02d}:{s:02d}" if days else f"{sign}{h:02d}:{m:02d}:{s:02d}"


def _when(ms: int | None) -> str:
    if ms is None or ms < 0:
        return "-"
    return f"{ms} ({iso_time(ms) or '?'})"


def _plural(n: int, word: str, words: str | None = None) -> str:
    return f"{n} {word if n == 1 else (words or word + 's')}"


def summary_line(r: TransactionsReport) -> str:
    """``Read 4 partitions (1 of __transaction_state; 40 batches, 3.2 kB) in 0.01 s: 5 transactional
    ids, 3 open transactions (2 hanging); newest timestamp ...``"""
    o = summary_object(r)
    size = o["bytes"]
    shown = _plural(size, "byte") if size < 1000 else f"{size / 1e3:.1f} kB" if size < 1_000_000 else f"{size / 1e6:.1f} MB"
    expected = o["coordinatorPartitions"] + len(o["coordinatorPartitionsMissing"])
    coord = f"{o['coordinatorPartitions']} of __transaction_state's {expected}" if o["coordinatorPartitions"] else \
        "no __transaction_state"
    verdict = f"{_plural(o['transactionalIds'], 'transactional id')}, {_plural(o['openTransactions'], 'open transaction')}"
    if o["openTransactions"]:
        verdict += f" ({o['hanging']} hanging)"
    if o["problems"]:
        verdict += f", {_plural(o['problems'], 'problem')}"
    newest = f"; newest timestamp {_when(r.newest_timestamp)}" if r.newest_timestamp is not None else ""
    return (f"Read {_plural(o['partitions'], 'partition')} ({coord}; {_plural(o['batches'], 'batch', 'batches')}, "
            f"{shown}) in {r.seconds:.2f} s: {verdict}{newest}")


def replica_lines(r: TransactionsReport) -> list[str]:
    """A line per partition held by several log dirs: which copy was read, and why."""
    out = []
    for s in r.partitions:
        if s.other_copies:
            others = ", ".join(f"{d} (log end {'?' if end is None else end})" for d, end in s.other_copies)
            out.append(f"{s.topic}-{s.partition}: {len(s.other_copies) + 1} copies; read {s.partition_dir} "
                       f"(log end {'?' if s.log_end_offset is None else s.log_end_offset}, the highest), not {others}")
    return out


def problem_lines(r: TransactionsReport) -> list[str]:
    """Each problem as ``file:position: kind: message`` (``kafkatool verify``'s lines)."""
    return [p.verify_line() for p in r.problems]


def command_lines(r: TransactionsReport) -> list[str]:
    """What to run against the live cluster for each hanging transaction's partition: confirm
    with ``find-hanging``, then abort by its first offset."""
    out: list[str] = []
    checked: set[tuple[str, int]] = set()
    for t in r.open:
        for op in t.partitions:
            if op.verdict == Verdict.HANGING:
                if (op.topic, op.partition) not in checked:
                    checked.add((op.topic, op.partition))
                    out.append(find_hanging_command(op))
                out.append(abort_command(op))
    return out


# ----------------------------------------------------------------------------- tables


def render_tables(console, r: TransactionsReport) -> None:
    """The transactional ids, the open transactions (a row per partition) and the partitions with
    transactions, as Rich tables; then the newest timestamp, ``now`` and the abort commands."""
    from rich.table import Table
    from rich.text import Text

    if r.states:
        t = Table(title="Transactional ids (__transaction_state)", title_justify="left")
        for col, just in (("transactional id", "left"), ("state", "left"), ("producer id", "right"),
                          ("epoch", "right"), ("timeout ms", "right"), ("partitions", "left"),
                          ("started (UTC)", "left"), ("last update (UTC)", "left")):
            t.add_column(col, justify=just, overflow="fold")
        for s in r.states:
            parts = ", ".join(f"{topic}-{p}" for topic, p in s.partitions) or "-"
            t.add_row(Text(s.transactional_id), Text(s.state, style="yellow" if s.state != "CompleteCommit"
                                                     and s.state != "CompleteAbort" and s.state != "Empty" else ""),
                      Text(str(s.producer_id)), Text(str(s.producer_epoch)), Text(str(s.timeout_ms)), Text(parts),
                      Text(_when(s.start_timestamp)), Text(_when(s.last_update_timestamp)))
        console.print(t)
    if r.open:
        t = Table(title="Open transactions (data after the last marker)", title_justify="left")
        for col, just in (("producer id / epoch", "left"), ("transactional id / coordinator", "left"),
                          ("verdict", "left"), ("partition", "left"), ("first offset (LSO)", "right"),
                          ("last offset", "right"), ("batches / records", "right"), ("first / last time (UTC)", "left"),
                          ("age / idle", "left"), ("why", "left")):
            t.add_column(col, justify=just, overflow="fold")
        for tx in r.open:
            owner = "-" if tx.transactional_id is None else tx.transactional_id
            if tx.coordinator is not None:
                owner += f"\n{tx.coordinator.state}"
            for i, op in enumerate(tx.partitions):
                first = str(op.first_offset) + (" (snapshot)" if op.from_snapshot else "") + \
                    (" (or earlier)" if op.start_uncertain else "")
                times = f"{iso_time(op.first_timestamp) or '-'}\n{iso_time(op.last_timestamp) or '-'}"
                ages = f"{duration(tx.age_ms)}\n{duration(tx.idle_ms)}" if i == 0 else ""
                t.add_row(Text(f"{tx.producer_id} / {tx.producer_epoch}" if i == 0 else ""),
                          Text(owner if i == 0 else ""),
                          Text(op.verdict, style="red" if op.verdict == Verdict.HANGING else "yellow"),
                          Text(f"{op.topic}-{op.partition}"), Text(first),
                          Text("-" if op.last_offset < 0 else str(op.last_offset)),
                          Text(f"{op.batches} / {op.records}"), Text(times), Text(ages), Text(op.reason))
        console.print(t)
    shown = _shown_partitions(r)
    if shown:
        t = Table(title="Partitions with transactions", title_justify="left")
        for col, just in (("partition dir", "left"), ("log start / end", "right"), ("transactional batches", "right"),
                          ("committed", "right"), ("aborted (fenced)", "right"), ("markers without data", "right"),
                          ("open", "right"), ("other copies", "left")):
            t.add_column(col, justify=just, overflow="fold")
        for s in shown:
            offsets = f"{'-' if s.log_start_offset is None else s.log_start_offset} / " \
                      f"{'-' if s.log_end_offset is None else s.log_end_offset}"
            others = "\n".join(f"{d} (end {'?' if e is None else e})" for d, e in s.other_copies)
            t.add_row(Text(s.partition_dir), Text(offsets), Text(str(s.transactional_batches)), Text(str(s.committed)),
                      Text(f"{s.aborted} ({s.fenced})"), Text(str(s.markers_without_data)),
                      Text(str(s.open), style="red" if s.open else ""), Text(others))
        console.print(t)
    console.print(Text(f"now: {_when(r.now_ms)}; newest timestamp in the log dirs: {_when(r.newest_timestamp)}"))
    commands = command_lines(r)
    if commands:
        console.print(Text("Hanging: confirm on the running cluster, then abort (replace " + BOOTSTRAP_PLACEHOLDER
                           + " with a broker):"))
        for c in commands:
            console.print(Text("  " + c))
    elif not r.open:
        console.print(Text("No open transaction: nothing holds back the last stable offset of the partitions read."))
