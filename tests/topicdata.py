"""Builders of internal-topic log dirs for tests: real segment files written with kafkatool's encoders.

Shared by the tests of ``kafkatool groups`` (``__consumer_offsets``), ``kafkatool transactions``
(``__transaction_state`` and data partitions with transaction markers) and any other test that
needs coordinator records on disk. Everything here writes what a broker writes:

* record payloads are Kafka's coordinator framing (spec §14): an int16 record type (keys) or
  value version (values), then the message at that version, encoded by
  :func:`kafkatool.record.message.encode` from the checked-in schemas; the consumer-protocol
  subscription/assignment bytes inside a ``GroupMetadataValue`` member carry their own int16
  version prefix;
* batches are v2 batches from :func:`kafkatool.record.v2.encode_batch` (transactional ones with
  the transactional bit and a producer id/epoch), and COMMIT/ABORT markers are control batches
  whose one record has :func:`kafkatool.record.control.encode_control_key` as key and
  :func:`kafkatool.record.control.encode_end_txn_marker` as value (spec §6);
* :class:`LogBuilder` hands out offsets in order and writes one or more ``<20 digits>.log``
  segments into a ``<topic>-<partition>`` directory.

The expected values of a test come from what it built (and, for the byte layout, from the
spec's golden vectors: see ``tests/test_groups.py::test_builders_match_spec_golden_bytes``).
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Iterable, Sequence

from kafkatool.record import message
from kafkatool.record.control import ControlType, encode_control_key, encode_end_txn_marker
from kafkatool.record.v2 import RecordSpec, encode_batch

__all__ = [
    "OFFSETS_TOPIC",
    "TXN_TOPIC",
    "coordinator_key",
    "coordinator_value",
    "offset_commit_key",
    "offset_commit_value",
    "group_metadata_key",
    "group_metadata_value",
    "classic_member",
    "consumer_subscription",
    "consumer_assignment",
    "txn_log_key",
    "txn_log_value",
    "LogBuilder",
    "partition_dir",
    "write_segment",
]

OFFSETS_TOPIC = "__consumer_offsets"
TXN_TOPIC = "__transaction_state"
_I16 = struct.Struct(">h")

# ----------------------------------------------------------------------------- coordinator payloads


def coordinator_key(record_type: int, data: dict) -> bytes:
    """A ``__consumer_offsets`` key: int16 record type, then the key message at version = type."""
    name = message.find("group-coordinator", record_type, value=False)
    if name is None:
        raise ValueError(f"no group-coordinator key for record type {record_type}")
    return _I16.pack(record_type) + message.encode(name, data, record_type)


def coordinator_value(record_type: int, data: dict, version: int = 0) -> bytes:
    """A ``__consumer_offsets`` value: int16 value version, then the value message of ``record_type``."""
    name = message.find("group-coordinator", record_type, value=True)
    if name is None:
        raise ValueError(f"no group-coordinator value for record type {record_type}")
    return _I16.pack(version) + message.encode(name, data, version)


def offset_commit_key(group: str, topic: str, partition: int, record_type: int = 1) -> bytes:
    """OffsetCommitKey (record type 1; 0 is the pre-0.10 form, the same layout)."""
    return coordinator_key(record_type, {"group": group, "topic": topic, "partition": partition})


def offset_commit_value(offset: int, commit_timestamp: int, *, metadata: str = "", leader_epoch: int = -1,
                        expire_timestamp: int = -1, version: int = 3) -> bytes:
    """OffsetCommitValue at ``version`` (0-4): ``leader_epoch`` is written from v3, ``expire_timestamp`` in v1 only."""
    return coordinator_value(1, {"offset": offset, "leaderEpoch": leader_epoch, "metadata": metadata,
                                 "commitTimestamp": commit_timestamp, "expireTimestamp": expire_timestamp}, version)


def group_metadata_key(group: str) -> bytes:
    return coordinator_key(2, {"group": group})


def consumer_subscription(topics: Sequence[str], *, version: int = 1, user_data: bytes | None = None,
                          owned: dict[str, list[int]] | None = None, generation: int = -1,
                          rack: str | None = None) -> bytes:
    """ConsumerProtocolSubscription with its int16 version prefix (as a classic consumer sends it)."""
    value = {"Topics": list(topics), "UserData": user_data,
             "OwnedPartitions": [{"Topic": t, "Partitions": p} for t, p in (owned or {}).items()],
             "GenerationId": generation, "RackId": rack}
    return _I16.pack(version) + message.encode("ConsumerProtocolSubscription", value, version)


def consumer_assignment(partitions: dict[str, list[int]], *, version: int = 1, user_data: bytes | None = None) -> bytes:
    """ConsumerProtocolAssignment with its int16 version prefix."""
    value = {"AssignedPartitions": [{"Topic": t, "Partitions": p} for t, p in partitions.items()],
             "UserData": user_data}
    return _I16.pack(version) + message.encode("ConsumerProtocolAssignment", value, version)


def classic_member(member_id: str, *, client_id: str = "consumer-1", client_host: str = "/10.0.0.1",
                   session_timeout: int = 45000, rebalance_timeout: int = 300000, group_instance_id: str | None = None,
                   subscription: bytes = b"", assignment: bytes = b"") -> dict:
    """One ``GroupMetadataValue`` member (the fields of ``MemberMetadata``)."""
    return {"memberId": member_id, "groupInstanceId": group_instance_id, "clientId": client_id,
            "clientHost": client_host, "rebalanceTimeout": rebalance_timeout, "sessionTimeout": session_timeout,
            "subscription": subscription, "assignment": assignment}


def group_metadata_value(*, protocol_type: str = "consumer", generation: int = 1, protocol: str | None = "range",
                         leader: str | None = None, members: Iterable[dict] = (), current_state_timestamp: int = -1,
                         version: int = 3) -> bytes:
    """GroupMetadataValue at ``version`` (0-4)."""
    return coordinator_value(2, {"protocolType": protocol_type, "generation": generation, "protocol": protocol,
                                 "leader": leader, "currentStateTimestamp": current_state_timestamp,
                                 "members": list(members)}, version)


# ----------------------------------------------------------------------------- __transaction_state payloads


def txn_log_key(transactional_id: str, version: int = 0) -> bytes:
    """TransactionLogKey: int16 version (0), then the transactional id."""
    return _I16.pack(version) + message.encode("TransactionLogKey", {"TransactionalId": transactional_id}, 0)


def txn_log_value(producer_id: int, producer_epoch: int, state: int, *, timeout_ms: int = 60000,
                  partitions: dict[str, list[int]] | None = None, last_update: int = 0, start: int = 0,
                  version: int = 0, **tagged) -> bytes:
    """TransactionLogValue at ``version`` (0, or 1 flexible with tagged fields such as
    ``PreviousProducerId``). ``state``: 0 Empty, 1 Ongoing, 2 PrepareCommit, 3 PrepareAbort,
    4 CompleteCommit, 5 CompleteAbort, 6 Dead, 7 PrepareEpochFence (spec §14.2)."""
    value = {"ProducerId": producer_id, "ProducerEpoch": producer_epoch, "TransactionTimeoutMs": timeout_ms,
             "TransactionStatus": state,
             "TransactionPartitions": None if partitions is None else [
                 {"Topic": t, "PartitionIds": p} for t, p in partitions.items()],
             "TransactionLastUpdateTimestampMs": last_update, "TransactionStartTimestampMs": start, **tagged}
    return _I16.pack(version) + message.encode("TransactionLogValue", value, version)


# ----------------------------------------------------------------------------- segments


def partition_dir(root: str | os.PathLike, topic: str, partition: int) -> Path:
    """``root/<topic>-<partition>``, created."""
    d = Path(root) / f"{topic}-{partition}"
    d.mkdir(parents=True, exist_ok=True)
    return d


def write_segment(directory: str | os.PathLike, base_offset: int, data: bytes) -> Path:
    """``directory/<base offset, 20 digits>.log`` holding ``data``."""
    path = Path(directory) / f"{base_offset:020d}.log"
    path.write_bytes(data)
    return path


class LogBuilder:
    """The batches of one partition, in offset order, written as segment files.

    ``add`` appends a batch of ``(key, value)`` records (a ``None`` value is a tombstone) and
    returns its first and last offsets; ``marker`` appends a COMMIT or ABORT control batch for a
    producer; ``raw`` appends bytes as they are (damage); ``roll`` starts a new segment at the
    next offset. ``write(dir)`` writes the segments; ``end_offset`` is the log end offset.
    """

    def __init__(self, base_offset: int = 0, timestamp: int = 1_700_000_000_000) -> None:
        self.next_offset = base_offset
        self.timestamp = timestamp
        self.segments: list[tuple[int, list[bytes]]] = [(base_offset, [])]

    @property
    def end_offset(self) -> int:
        return self.next_offset

    def _tick(self, timestamp: int | None) -> int:
        if timestamp is None:
            self.timestamp += 1000
            return self.timestamp
        self.timestamp = max(self.timestamp, timestamp)
        return timestamp

    def add(self, records: Sequence[tuple[bytes | None, bytes | None]], *, timestamp: int | None = None,
            producer_id: int = -1, producer_epoch: int = -1, transactional: bool = False,
            base_sequence: int = -1, codec: int = 0, leader_epoch: int = 0) -> tuple[int, int]:
        ts = self._tick(timestamp)
        first = self.next_offset
        specs = [RecordSpec(first + i, ts, k, v) for i, (k, v) in enumerate(records)]
        if transactional and base_sequence < 0:
            base_sequence = 0
        self.segments[-1][1].append(encode_batch(specs, producer_id=producer_id, producer_epoch=producer_epoch,
                                                 base_sequence=base_sequence, is_transactional=transactional,
                                                 codec=codec, partition_leader_epoch=leader_epoch))
        self.next_offset += len(specs)
        return first, self.next_offset - 1

    def marker(self, producer_id: int, producer_epoch: int, *, commit: bool, coordinator_epoch: int = 0,
               timestamp: int | None = None, leader_epoch: int = 0) -> int:
        """A COMMIT (``commit=True``) or ABORT marker of ``producer_id``; returns its offset."""
        ts = self._tick(timestamp)
        offset = self.next_offset
        key = encode_control_key(ControlType.COMMIT if commit else ControlType.ABORT)
        value = encode_end_txn_marker(coordinator_epoch)
        self.segments[-1][1].append(encode_batch([RecordSpec(offset, ts, key, value)], producer_id=producer_id,
                                                 producer_epoch=producer_epoch, is_transactional=True,
                                                 is_control=True, partition_leader_epoch=leader_epoch))
        self.next_offset += 1
        return offset

    def legacy(self, records: Sequence[tuple[bytes | None, bytes | None]], *, magic: int = 1, codec: int = 0,
               timestamp: int | None = None) -> tuple[int, int]:
        """Legacy (magic 0/1) messages, as a pre-0.11 broker wrote ``__consumer_offsets``: one message per
        record, or with ``codec`` one compressed wrapper (spec §5: v1 inner offsets relative, the wrapper
        carrying the last offset) built by :mod:`kafkatool.record.encode`. Returns the first and last offsets."""
        from kafkatool.record.compression import compress
        from kafkatool.record.encode import legacy_messages, legacy_wrapper

        ts = self._tick(timestamp)
        first = self.next_offset
        specs = [RecordSpec(first + i, ts, k, v) for i, (k, v) in enumerate(records)]
        last = first + len(specs) - 1
        if not codec:
            self.segments[-1][1].append(legacy_messages(specs, magic))
        else:
            inner = legacy_messages(specs, magic, relative_to=first if magic == 1 else None)
            self.segments[-1][1].append(legacy_wrapper(compress(codec, inner, magic=magic), magic=magic, offset=last,
                                                       timestamp=ts, attributes=codec))
        self.next_offset = last + 1
        return first, last

    def raw(self, data: bytes) -> None:
        """Bytes appended to the current segment as they are (a damaged region)."""
        self.segments[-1][1].append(data)

    def roll(self) -> None:
        """Start a new segment at the next offset."""
        if self.segments[-1][1]:
            self.segments.append((self.next_offset, []))

    def write(self, directory: str | os.PathLike) -> list[Path]:
        """The segments written into ``directory`` (which must exist)."""
        return [write_segment(directory, base, b"".join(parts)) for base, parts in self.segments]
