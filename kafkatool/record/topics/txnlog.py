"""``--transaction-log-decoder``: ``__transaction_state`` records as kafka-dump-log prints them.

``TransactionLog.formatRecordKeyAndValue`` (``TransactionLog.scala``, spec §14.2, §15.3) at
the spec's Kafka commit:

* key = int16 version, then TransactionLogKey. Version 0 prints
  ``transaction_metadata::transactionalId=<id>``; any other version prints
  ``unknown::version=<v>`` and no payload (``error`` is that text too: the record was not
  decoded; not fatal).
* value = int16 version (0, or 1 = flexible), then TransactionLogValue; printed as
  ``producerId:<pid>,producerEpoch:<e>,state=<State>,partitions=[<t>-<p>,...],
  txnLastUpdateTimestamp=<ms>,txnTimeoutMs=<ms>``. A tombstone prints ``<DELETE>``. In
  state Empty the stored partitions are ignored (``partitions=[]``).
* Partition order: Kafka prints a Scala ``mutable.HashSet[TopicPartition]`` filled one
  topic at a time (``addPartitions(... .toSet)``), so the order is the set's table order.
  :func:`partitions_in_kafka_order` reproduces it exactly (Scala 2.13.15's HashSet:
  bucket = improved hash & (table length - 1), buckets sorted by hash, the table grown by
  each ``++=``'s size hint and by single adds of small sets; ``TopicPartition.hashCode`` =
  31 * (31 + partition) + Java ``String.hashCode`` of the topic). Ties (equal 32-bit
  hashes of different partitions) keep the stored order. Checked against scala-library's
  own HashSet on a JVM (3,000 random partition lists, identical text).

Where kafka-dump-log stops with an uncaught exception (exit 1) the result is ``fatal``,
with no key or payload text and ``error`` = the exception's ``getMessage()`` (for a
message-less exception its class name, as the JVM's stack trace starts with it):

* a null key: ``NullPointerException``. Kafka runs on JDK 17+, whose helpful NPE message
  names the call and the parameter (scalac keeps local variable names):
  ``Cannot invoke "java.nio.ByteBuffer.getShort()" because "buffer" is null``;
* a key or value shorter than its int16 version, or a body running out of bytes in a
  fixed-width field: ``java.nio.BufferUnderflowException``;
* a body the generated reader rejects: its message (the codec's ``kafka_cause``);
* a value version other than 0 and 1: ``Unknown version <v> from the transaction log
  message value``;
* a state id outside 0-7: ``Unknown transaction state id <id> from the transaction status
  message``;
* a ClientTransactionVersion (v1 tag 2) outside 0-2 (``TransactionVersion.fromFeatureLevel``):
  ``No feature:transaction.version with feature level <n>``;
* null partitions in a state other than Empty: the NPE of ``transactionPartitions.forEach``:
  ``Cannot invoke "java.util.List.forEach(java.util.function.Consumer)" because the return
  value of "org.apache.kafka.coordinator.transaction.generated.TransactionLogValue.
  transactionPartitions()" is null`` (one line).

All texts, fatal messages included, were checked against Kafka's own generated
TransactionLogKey/Value classes with formatRecordKeyAndValue's logic on a JVM (random valid and
mutated records: the same text).

``Decoded.key``/``.value`` carry what was read (also on a fatal error after it, e.g. a
value with an unknown state id). The JSON trees: ``key_json`` = TransactionLogKey's
JsonConverter tree (``{"transactionalId": "tx1"}``); ``payload_json`` =
``{"version": <v>, "state": "<State>", "partitions": ["<t>-<p>", ...], "data": <the value's
JsonConverter tree>}`` with the partitions as printed; None on any error and for a tombstone.
"""

from __future__ import annotations

import struct
from functools import lru_cache
from typing import Iterable

from kafkatool.errors import InvalidRecordError
from kafkatool.record import message
from kafkatool.record.topics import Decoded, Message

__all__ = ["decode", "STATES", "partitions_in_kafka_order", "java_string_hash"]

_INT16 = struct.Struct(">h").unpack_from

#: ``TransactionState.fromId``: state id -> the name kafka-dump-log prints.
STATES: dict[int, str] = {
    0: "Empty",
    1: "Ongoing",
    2: "PrepareCommit",
    3: "PrepareAbort",
    4: "CompleteCommit",
    5: "CompleteAbort",
    6: "Dead",
    7: "PrepareEpochFence",
}

_CLIENT_TXN_VERSIONS = (0, 1, 2)  # TransactionVersion TV_0..TV_2

_UNDERFLOW = "java.nio.BufferUnderflowException"
_NULL_KEY = 'Cannot invoke "java.nio.ByteBuffer.getShort()" because "buffer" is null'
_NULL_PARTITIONS = (
    'Cannot invoke "java.util.List.forEach(java.util.function.Consumer)" because the return value of '
    '"org.apache.kafka.coordinator.transaction.generated.TransactionLogValue.transactionPartitions()" is null'
)


def _int32(n: int) -> int:
    n &= 0xFFFFFFFF
    return n - 0x100000000 if n & 0x80000000 else n


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode()``: over UTF-16 code units, 32-bit signed."""
    h = 0
    if s.isascii():
        for c in s.encode("ascii"):
            h = (31 * h + c) & 0xFFFFFFFF
    else:
        units = s.encode("utf-16-be", "surrogatepass")
        for i in range(0, len(units), 2):
            h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return _int32(h)


_topic_hash = lru_cache(maxsize=1024)(java_string_hash)
"""java_string_hash of topic names, which repeat from record to record (only names of a valid
topic's length, at most 249 characters, are kept: the cache stays small whatever the data)."""


def _table_size_for(capacity: int) -> int:
    # scala.collection.mutable.HashSet.tableSizeFor
    n = max(capacity - 1, 4)
    return min((1 << (n.bit_length() - 1)) * 2, 1 << 30)


def partitions_in_kafka_order(entries: Iterable[tuple[str, list[int]]]) -> list[tuple[str, int]]:
    """The (topic, partition) pairs of the stored ``(Topic, PartitionIds)`` entries in the order
    kafka-dump-log prints them (the module docstring says how); duplicates once."""
    length = 16  # HashSet.defaultInitialCapacity
    threshold = 12  # length * defaultLoadFactor 0.75
    seen: set[tuple[str, int]] = set()
    nodes: list[tuple[int, int, tuple[str, int]]] = []
    for topic, ids in entries:
        th = (_topic_hash(topic) if len(topic) <= 249 else java_string_hash(topic)) + 961
        # (TopicPartition.hashCode = 31 * (31 + p) + the topic's hash)
        distinct = list(dict.fromkeys(ids))  # .toSet: an immutable Set; Set1-Set4 keep insertion order
        size = len(distinct)
        target = _table_size_for(int((size + 1) / 0.75))  # addAll's sizeHint(xs.knownSize)
        if target > length:
            length = target
            threshold = int(length * 0.75)
        small = size <= 4  # Set1..Set4 go through add() (grows on the way); a HashSet through addElem
        for p in distinct:
            if small and len(seen) + 1 >= threshold:
                length *= 2
                threshold = int(length * 0.75)
            tp = (topic, p)
            if tp in seen:
                continue
            seen.add(tp)
            h = (31 * p + th) & 0xFFFFFFFF
            h ^= h >> 16  # improveHash
            # the bucket's order is by signed hash: flipping the sign bit orders unsigned ints the same way
            nodes.append((h, h ^ 0x80000000, len(nodes), tp))
    mask = length - 1
    nodes.sort(key=lambda n: (n[0] & mask, n[1], n[2]))
    return [n[3] for n in nodes]


def _fatal(text: str, key: Message | None = None, value: Message | None = None) -> Decoded:
    return Decoded(key, value, None, None, None, None, text, True)


def _cause(err: InvalidRecordError) -> str:
    cause = getattr(err, "kafka_cause", None)
    return _UNDERFLOW if cause is None else cause


def decode(key: bytes | None, value: bytes | None, offset: int) -> Decoded:
    """One ``__transaction_state`` record as ``kafka-dump-log --transaction-log-decoder`` prints it
    (``offset`` is not part of any text here: Kafka's messages do not name it)."""
    if key is None:
        return _fatal(_NULL_KEY)
    if len(key) < 2:
        return _fatal(_UNDERFLOW)
    key_version = _INT16(key)[0]
    if key_version != 0:  # TransactionLogKey LOWEST..HIGHEST_SUPPORTED_VERSION = 0..0
        text = f"unknown::version={key_version}"
        return Decoded(None, None, text, None, None, None, text, False)
    try:
        key_data, _ = message.decode("TransactionLogKey", key, 0, pos=2)
    except InvalidRecordError as e:
        return _fatal(_cause(e))
    key_msg = Message("TransactionLogKey", 0, key_data)
    key_text = f"transaction_metadata::transactionalId={key_data['TransactionalId']}"
    key_json = message.to_json("TransactionLogKey", key_data, 0)
    if value is None:
        return Decoded(key_msg, None, key_text, "<DELETE>", key_json, None)
    if len(value) < 2:
        return _fatal(_UNDERFLOW, key_msg)
    version = _INT16(value)[0]
    if not 0 <= version <= 1:
        return _fatal(f"Unknown version {version} from the transaction log message value", key_msg)
    try:
        data, _ = message.decode("TransactionLogValue", value, version, pos=2)
    except InvalidRecordError as e:
        return _fatal(_cause(e), key_msg)
    value_msg = Message("TransactionLogValue", version, data)
    status = data["TransactionStatus"]
    state = STATES.get(status)
    if state is None:
        return _fatal(f"Unknown transaction state id {status} from the transaction status message",
                      key_msg, value_msg)
    if data["ClientTransactionVersion"] not in _CLIENT_TXN_VERSIONS:
        return _fatal(f"No feature:transaction.version with feature level {data['ClientTransactionVersion']}",
                      key_msg, value_msg)
    stored = data["TransactionPartitions"]
    if state == "Empty":
        partitions: list[str] = []
    elif stored is None:
        return _fatal(_NULL_PARTITIONS, key_msg, value_msg)
    else:
        partitions = [f"{t}-{p}" for t, p in partitions_in_kafka_order(
            (e["Topic"], e["PartitionIds"]) for e in stored)]
    payload_text = (f"producerId:{data['ProducerId']},producerEpoch:{data['ProducerEpoch']},state={state},"
                    f"partitions=[{','.join(partitions)}],"
                    f"txnLastUpdateTimestamp={data['TransactionLastUpdateTimestampMs']},"
                    f"txnTimeoutMs={data['TransactionTimeoutMs']}")
    payload_json = {"version": version, "state": state, "partitions": partitions,
                    "data": message.to_json("TransactionLogValue", data, version)}
    return Decoded(key_msg, value_msg, key_text, payload_text, key_json, payload_json)
