"""``--remote-log-metadata-decoder``: tiered storage's ``__remote_log_metadata`` (spec §14.5, §15.3).

The values are framed as the cluster metadata's (frame version, apiKey, version: see
:func:`kafkatool.record.topics.metadata.read_frame`) with the remote-log apiKeys
(``storage/src/main/resources/message/*.json``): 0 RemoteLogSegmentMetadataRecord,
1 RemoteLogSegmentMetadataUpdateRecord, 2 RemotePartitionDeleteMetadataRecord,
3 RemoteLogSegmentMetadataSnapshotRecord. ``RemoteLogMetadataSerde.deserialize`` turns each
into a Java object through its transform
(``storage/src/main/java/org/apache/kafka/server/log/remote/metadata/storage/serialization/``),
and kafka-dump-log (``DumpLogSegments.scala``, ``RemoteMetadataLogMessageParser``) prints
that object's ``toString()`` as the payload, no key, and for any exception
``Error at offset <o>, skipping. <getMessage()>``.

What the transforms and constructors check, in Kafka's order, and what they print, all
reproduced here (``storage/api/src/main/java/org/apache/kafka/server/log/remote/storage/``):

* ``RemoteLogSegmentMetadata``: built first in state COPY_SEGMENT_STARTED, which checks
  ``startOffset >= 0``, ``endOffset >= startOffset`` and a non-empty leader-epoch map
  (``IllegalArgumentException`` texts below), then updated with the record's state
  (``RemoteLogSegmentState.forId``: an unknown id is null, ``state can not be null``);
* ``RemoteLogSegmentMetadataUpdate``: the state check;
* ``RemotePartitionDeleteMetadata``: ``Objects.requireNonNull(state)`` without a message, so
  an unknown state prints ``... skipping. null``;
* ``RemoteLogSegmentMetadataSnapshot``: the state check, then the non-empty epoch map.

The leader-epoch entries go through a ``HashMap`` (a repeated epoch keeps its last offset)
into a ``TreeMap``, printed ``{0=0, 3=120}``; custom metadata is ``Optional.empty`` or
``Optional[CustomMetadata{<n> bytes}]``; a ``TopicIdPartition`` prints
``<topicId>:<topic>-<partition>``, a ``Uuid`` its base64url text.

``payload_json`` is the same object as a tree: ``{"type": <Java class name>, ...}`` with
the toString's fields under the same names and in its order (so a snapshot's has no brokerId
or eventTimestampMs either), ``remoteLogSegmentId`` as
``{"topicIdPartition": {"topicId", "topic", "partition"}, "id"}`` (``topicPartition`` of a
delete likewise), ``segmentLeaderEpochs`` as ``[{"leaderEpoch", "offset"}, ...]`` in epoch
order, ``customMetadata`` as the bytes in padded standard base64 (the toString gives their count) or
null, ``state`` the enum name.
"""

from __future__ import annotations

import base64
from typing import Any

from kafkatool.record.topics import Decoded, Message
from kafkatool.record.topics.metadata import FrameError, read_frame

__all__ = [
    "PARTITION_DELETE_STATES",
    "RejectedError",
    "SEGMENT_STATES",
    "decode",
    "to_text",
    "to_tree",
]

#: ``RemoteLogSegmentState`` ids.
SEGMENT_STATES: dict[int, str] = {
    0: "COPY_SEGMENT_STARTED",
    1: "COPY_SEGMENT_FINISHED",
    2: "DELETE_SEGMENT_STARTED",
    3: "DELETE_SEGMENT_FINISHED",
}

#: ``RemotePartitionDeleteState`` ids.
PARTITION_DELETE_STATES: dict[int, str] = {
    0: "DELETE_PARTITION_MARKED",
    1: "DELETE_PARTITION_STARTED",
    2: "DELETE_PARTITION_FINISHED",
}

# What kafka-dump-log prints for a null value: the JDK's "helpful" NullPointerException text
# (JDK 14+, on by default from 15) for ``record.value.remaining`` in the parser.
_NULL_VALUE = ('Cannot invoke "java.nio.ByteBuffer.remaining()" because the return value of '
               '"org.apache.kafka.common.record.Record.value()" is null')


class RejectedError(ValueError):
    """A record the serde reads but whose Java object cannot be built (the constructor's
    exception). ``kafka_message`` is its getMessage(), None for a message-less one."""

    def __init__(self, kafka_message: str | None) -> None:
        super().__init__(kafka_message)
        self.kafka_message = kafka_message


def _epochs(entries: list[dict]) -> list[tuple[int, int]]:
    """HashMap then TreeMap: the last offset of each epoch, in epoch order; empty is refused."""
    epochs: dict[int, int] = {}
    for e in entries:
        epochs[e["LeaderEpoch"]] = e["Offset"]
    if not epochs:
        raise RejectedError("segmentLeaderEpochs can not be null or empty")
    return sorted(epochs.items())


def _segment_state(state_id: int) -> str:
    name = SEGMENT_STATES.get(state_id)
    if name is None:
        raise RejectedError("state can not be null")
    return name


def _topic_id_partition(entry: dict) -> dict:
    return {"topicId": entry["Id"], "topic": entry["Name"], "partition": entry["Partition"]}


def _custom(raw: bytes | None) -> str | None:
    return None if raw is None else base64.b64encode(raw).decode("ascii")


def to_tree(msg: Message) -> dict:
    """The object ``RemoteLogMetadataSerde`` builds from a read record, as a JSON tree (see the
    module doc); raises :class:`RejectedError` where its constructors throw."""
    d = msg.data
    name = msg.name
    if name == "RemoteLogSegmentMetadataRecord":
        start, end = d["StartOffset"], d["EndOffset"]
        if start < 0:
            raise RejectedError(f"Unexpected start offset = {start}. StartOffset for a remote segment cannot be negative")
        if end < start:
            raise RejectedError(f"Unexpected end offset = {end}. EndOffset for a remote segment cannot be less "
                            f"than startOffset = {start}")
        epochs = _epochs(d["SegmentLeaderEpochs"])
        state = _segment_state(d["RemoteLogSegmentState"])
        return {
            "type": "RemoteLogSegmentMetadata",
            "remoteLogSegmentId": _segment_id(d["RemoteLogSegmentId"]),
            "startOffset": start,
            "endOffset": end,
            "brokerId": d["BrokerId"],
            "maxTimestampMs": d["MaxTimestampMs"],
            "eventTimestampMs": d["EventTimestampMs"],
            "segmentLeaderEpochs": [{"leaderEpoch": e, "offset": o} for e, o in epochs],
            "segmentSizeInBytes": d["SegmentSizeInBytes"],
            "customMetadata": _custom(d["CustomMetadata"]),
            "state": state,
        }
    if name == "RemoteLogSegmentMetadataUpdateRecord":
        return {
            "type": "RemoteLogSegmentMetadataUpdate",
            "remoteLogSegmentId": _segment_id(d["RemoteLogSegmentId"]),
            "customMetadata": _custom(d["CustomMetadata"]),
            "state": _segment_state(d["RemoteLogSegmentState"]),
            "eventTimestampMs": d["EventTimestampMs"],
            "brokerId": d["BrokerId"],
        }
    if name == "RemotePartitionDeleteMetadataRecord":
        state = PARTITION_DELETE_STATES.get(d["RemotePartitionDeleteState"])
        if state is None:
            raise RejectedError(None)  # Objects.requireNonNull(state): a message-less NPE
        return {
            "type": "RemotePartitionDeleteMetadata",
            "topicPartition": _topic_id_partition(d["TopicIdPartition"]),
            "state": state,
            "eventTimestampMs": d["EventTimestampMs"],
            "brokerId": d["BrokerId"],
        }
    # RemoteLogSegmentMetadataSnapshotRecord (read_frame knows no other apiKey)
    state = _segment_state(d["RemoteLogSegmentState"])
    epochs = _epochs(d["SegmentLeaderEpochs"])
    return {
        "type": "RemoteLogSegmentMetadataSnapshot",
        "segmentId": d["SegmentId"],
        "startOffset": d["StartOffset"],
        "endOffset": d["EndOffset"],
        "maxTimestampMs": d["MaxTimestampMs"],
        "segmentLeaderEpochs": [{"leaderEpoch": e, "offset": o} for e, o in epochs],
        "segmentSizeInBytes": d["SegmentSizeInBytes"],
        "customMetadata": _custom(d["CustomMetadata"]),
        "state": state,
    }


def _segment_id(entry: dict) -> dict:
    return {"topicIdPartition": _topic_id_partition(entry["TopicIdPartition"]), "id": entry["Id"]}


def _tip_text(t: dict) -> str:
    return f"{t['topicId']}:{t['topic']}-{t['partition']}"  # TopicIdPartition.toString


def _custom_text(b64: str | None) -> str:
    if b64 is None:
        return "Optional.empty"
    return f"Optional[CustomMetadata{{{len(base64.b64decode(b64))} bytes}}]"


def _epochs_text(epochs: list[dict]) -> str:
    return "{" + ", ".join(f"{e['leaderEpoch']}={e['offset']}" for e in epochs) + "}"


def _segment_id_text(s: dict) -> str:
    return f"RemoteLogSegmentId{{topicIdPartition={_tip_text(s['topicIdPartition'])}, id={s['id']}}}"


def to_text(tree: dict) -> str:
    """The Java ``toString()`` of the object :func:`to_tree` describes."""
    kind = tree["type"]
    if kind == "RemoteLogSegmentMetadata":
        return (f"RemoteLogSegmentMetadata{{remoteLogSegmentId={_segment_id_text(tree['remoteLogSegmentId'])}"
                f", startOffset={tree['startOffset']}, endOffset={tree['endOffset']}"
                f", brokerId={tree['brokerId']}, maxTimestampMs={tree['maxTimestampMs']}"
                f", eventTimestampMs={tree['eventTimestampMs']}"
                f", segmentLeaderEpochs={_epochs_text(tree['segmentLeaderEpochs'])}"
                f", segmentSizeInBytes={tree['segmentSizeInBytes']}"
                f", customMetadata={_custom_text(tree['customMetadata'])}, state={tree['state']}}}")
    if kind == "RemoteLogSegmentMetadataUpdate":
        return (f"RemoteLogSegmentMetadataUpdate{{remoteLogSegmentId={_segment_id_text(tree['remoteLogSegmentId'])}"
                f", customMetadata={_custom_text(tree['customMetadata'])}, state={tree['state']}"
                f", eventTimestampMs={tree['eventTimestampMs']}, brokerId={tree['brokerId']}}}")
    if kind == "RemotePartitionDeleteMetadata":
        return (f"RemotePartitionDeleteMetadata{{topicPartition={_tip_text(tree['topicPartition'])}"
                f", state={tree['state']}, eventTimestampMs={tree['eventTimestampMs']}"
                f", brokerId={tree['brokerId']}}}")
    # the snapshot's toString leaves brokerId and eventTimestampMs out
    return (f"RemoteLogSegmentMetadataSnapshot{{segmentId={tree['segmentId']}"
            f", startOffset={tree['startOffset']}, endOffset={tree['endOffset']}"
            f", maxTimestampMs={tree['maxTimestampMs']}"
            f", segmentLeaderEpochs={_epochs_text(tree['segmentLeaderEpochs'])}"
            f", segmentSizeInBytes={tree['segmentSizeInBytes']}"
            f", customMetadata={_custom_text(tree['customMetadata'])}, state={tree['state']}}}")


def decode(key: bytes | None, value: bytes | None, offset: int) -> Decoded:
    """``--remote-log-metadata-decoder`` on one record (never raises; the key is not read).

    Success: ``value`` the record's :class:`Message`, ``payload_text`` the object's Java
    toString, ``payload_json`` :func:`to_tree`'s tree. Failure: ``payload_text`` = ``error``
    = ``Error at offset <o>, skipping. <message>``, ``value``/``payload_json`` None, not fatal."""
    tree: Any = None
    try:
        if value is None:
            raise RejectedError(_NULL_VALUE)
        msg = read_frame(value, "remote-log-metadata")
        tree = to_tree(msg)
    except FrameError as e:
        message: str | None = e.kafka_message
    except RejectedError as e:
        message = e.kafka_message
    else:
        return Decoded(None, msg, None, to_text(tree), None, tree, None, False)
    text = f"Error at offset {offset}, skipping. {'null' if message is None else message}"  # Scala: null -> "null"
    return Decoded(None, None, None, text, None, None, text, False)
