"""``kafkatool metadata``: the cluster's state replayed from a KRaft ``__cluster_metadata`` log, offline.

What an operator whose quorum will not start needs: the topics with their ids, the partitions
with leader, ISR, replicas and epochs, the brokers and their registrations, the configs, the
features, the quorum, all from the files alone.

The replay follows Kafka's own (``MetadataLoader`` and the image deltas of
``org.apache.kafka.image``):

* the newest **valid** snapshot ``<end offset>-<epoch>.checkpoint`` of the metadata partition
  first (a SNAPSHOT_HEADER control batch, data batches, a SNAPSHOT_FOOTER control batch, every
  CRC good); one that is not valid is skipped, and said so, for the one before it (Kafka itself
  trusts the newest snapshot's name and fails on its content);
* then the log's records from the snapshot's end offset on (the snapshot holds every record
  below it: none is applied twice), up to ``at_offset`` (exclusive) when given;
* the replay stops at the first batch that cannot be read (a region the walk cannot frame, a
  CRC mismatch, records that do not decode), as Kafka's log recovery truncates the log there;
  a record the metadata decoder cannot read is reported and skipped (it names a record type or
  version this kafkatool does not know);
* records between a BeginTransactionRecord and its EndTransactionRecord are applied together
  at the End, an AbortTransactionRecord drops them, and a transaction still open at the end of
  the replay is reported, not applied (the next active controller aborts it);
* ``bootstrap.checkpoint`` (in the log dir) is read and shown but not applied: the active
  controller writes its records into the log only when the log is empty
  (``ActivationRecordsGenerator.recordsForEmptyLog``), so a log that holds records already
  holds them.

Offline, the high watermark is unknown: the last records of the log may never have been
committed by the quorum (an elected leader truncates an uncommitted tail).

Records are decoded only by the ``cluster-metadata`` decoder's framing (:func:`kafkatool.record.topics.metadata.read_frame`)
and control records by :mod:`kafkatool.record.control`; files are read only through the
log-dir model (:mod:`kafkatool.segment.logdir`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable, Iterator

from kafkatool.errors import KafkaToolError
from kafkatool.record import message
from kafkatool.record.batch import Batch
from kafkatool.record.control import ControlType, decode_control_key, decode_kraft_control
from kafkatool.record.records import batch_record_chunks
from kafkatool.segment import files as names
from kafkatool.segment.checkpoint import read_quorum_state
from kafkatool.segment.logdir import LogDir, Partition, Segment, batches_and_regions, open_log
from kafkatool.segment.resync import BadRegion

__all__ = [
    "METADATA_PARTITION",
    "METADATA_VERSIONS",
    "RESOURCE_TYPES",
    "BrokerState",
    "ControllerState",
    "PartitionState",
    "TopicState",
    "ClusterState",
    "Problem",
    "SnapshotInfo",
    "MetadataReport",
    "MetadataOptions",
    "find_metadata_partition",
    "replay",
    "metadata_version_name",
]

METADATA_PARTITION = "__cluster_metadata-0"

#: ``metadata.version`` feature levels and their release names (Kafka's ``MetadataVersion``).
METADATA_VERSIONS: dict[int, str] = {
    1: "3.0-IV1", 2: "3.1-IV0", 3: "3.2-IV0", 4: "3.3-IV0", 5: "3.3-IV1", 6: "3.3-IV2", 7: "3.3-IV3",
    8: "3.4-IV0", 9: "3.5-IV0", 10: "3.5-IV1", 11: "3.5-IV2", 12: "3.6-IV0", 13: "3.6-IV1", 14: "3.6-IV2",
    15: "3.7-IV0", 16: "3.7-IV1", 17: "3.7-IV2", 18: "3.7-IV3", 19: "3.7-IV4", 20: "3.8-IV0", 21: "3.9-IV0",
    22: "4.0-IV0", 23: "4.0-IV1", 24: "4.0-IV2", 25: "4.0-IV3", 26: "4.1-IV0", 27: "4.1-IV1", 28: "4.2-IV0",
    29: "4.2-IV1",
}

#: ConfigRecord resource types (``ConfigResource.Type``).
RESOURCE_TYPES: dict[int, str] = {2: "topic", 4: "broker", 8: "broker-logger", 16: "client-metrics", 32: "group"}

ZK_MIGRATION_STATES = {0: "NONE", 1: "MIGRATION", 2: "PRE_MIGRATION", 3: "POST_MIGRATION"}
LEADER_RECOVERY_STATES = {0: "RECOVERED", 1: "RECOVERING"}
SCRAM_MECHANISMS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
ACL_RESOURCE_TYPES = {0: "UNKNOWN", 1: "ANY", 2: "TOPIC", 3: "GROUP", 4: "CLUSTER", 5: "TRANSACTIONAL_ID",
                      6: "DELEGATION_TOKEN", 7: "USER"}
ACL_PATTERN_TYPES = {0: "UNKNOWN", 1: "ANY", 2: "MATCH", 3: "LITERAL", 4: "PREFIXED"}
ACL_OPERATIONS = {0: "UNKNOWN", 1: "ANY", 2: "ALL", 3: "READ", 4: "WRITE", 5: "CREATE", 6: "DELETE", 7: "ALTER",
                  8: "DESCRIBE", 9: "CLUSTER_ACTION", 10: "DESCRIBE_CONFIGS", 11: "ALTER_CONFIGS",
                  12: "IDEMPOTENT_WRITE", 13: "CREATE_TOKENS", 14: "DESCRIBE_TOKENS", 15: "TWO_PHASE_COMMIT"}
ACL_PERMISSIONS = {0: "UNKNOWN", 1: "ANY", 2: "DENY", 3: "ALLOW"}
SECURITY_PROTOCOLS = {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}

#: Kafka's special directory ids (``DirectoryId``): UNASSIGNED, LOST, MIGRATING.
DIRECTORY_IDS = {"AAAAAAAAAAAAAAAAAAAAAA": "UNASSIGNED", "AAAAAAAAAAAAAAAAAAAAAQ": "LOST",
                 "AAAAAAAAAAAAAAAAAAAAAg": "MIGRATING"}
_MIGRATING = "AAAAAAAAAAAAAAAAAAAAAg"
_UNASSIGNED = "AAAAAAAAAAAAAAAAAAAAAA"
NO_LEADER_CHANGE = -2
_TXN_RECORDS = frozenset({"BeginTransactionRecord", "EndTransactionRecord", "AbortTransactionRecord"})


def metadata_version_name(level: int | None) -> str | None:
    """``3.7-IV4`` for level 19; None for None; ``level N`` for a level this kafkatool does not know."""
    if level is None:
        return None
    return METADATA_VERSIONS.get(level, f"level {level}")


# ----------------------------------------------------------------------------- the state


@dataclass(slots=True)
class BrokerState:
    """A registered broker (``BrokerRegistration``)."""

    id: int
    epoch: int
    """The broker epoch: the offset of its RegisterBrokerRecord when the controller wrote it."""
    incarnation_id: str
    endpoints: list[dict]
    """``{"name", "host", "port", "securityProtocol"}`` each."""
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool
    is_migrating_zk_broker: bool
    features: dict[str, tuple[int, int]]
    log_dirs: list[str]
    offset: int
    """The offset of the RegisterBrokerRecord (-1 when it came from a snapshot)."""


@dataclass(slots=True)
class ControllerState:
    """A registered controller (RegisterControllerRecord, KIP-919)."""

    id: int
    incarnation_id: str
    zk_migration_ready: bool
    endpoints: list[dict]
    features: dict[str, tuple[int, int]]
    offset: int


@dataclass(slots=True)
class PartitionState:
    """A partition's registration (``PartitionRegistration``)."""

    replicas: list[int]
    isr: list[int]
    removing_replicas: list[int]
    adding_replicas: list[int]
    leader: int
    leader_recovery_state: int
    leader_epoch: int
    partition_epoch: int
    directories: list[str]
    elr: list[int]
    last_known_elr: list[int]


@dataclass(slots=True)
class TopicState:
    name: str
    id: str
    partitions: dict[int, PartitionState] = field(default_factory=dict)


@dataclass
class ClusterState:
    """The image: what the replayed records built."""

    topics: dict[str, TopicState] = field(default_factory=dict)
    """By topic id."""
    brokers: dict[int, BrokerState] = field(default_factory=dict)
    controllers: dict[int, ControllerState] = field(default_factory=dict)
    configs: dict[tuple[int, str], dict[str, str]] = field(default_factory=dict)
    """``(resource type, resource name) -> {name: value}``."""
    features: dict[str, int] = field(default_factory=dict)
    """Finalized feature levels, ``metadata.version`` included."""
    producer_ids: dict | None = None
    """The last ProducerIdsRecord: ``{"brokerId", "brokerEpoch", "nextProducerId"}``."""
    quotas: dict[tuple[tuple[str, str | None], ...], dict[str, float]] = field(default_factory=dict)
    scram: dict[tuple[str, int], int] = field(default_factory=dict)
    """``(user, mechanism) -> iterations`` (salts and keys are never kept)."""
    tokens: dict[str, dict] = field(default_factory=dict)
    acls: dict[str, dict] = field(default_factory=dict)
    zk_migration_state: int | None = None
    # the quorum, from the control records
    leader_id: int | None = None
    leader_epoch: int | None = None
    leader_voters: list[int] | None = None
    voters: list[dict] | None = None
    kraft_version: int | None = None


@dataclass(frozen=True, slots=True)
class Problem:
    """Something the replay could not read or apply, located."""

    kind: str
    message: str
    file: str | None = None
    position: int | None = None
    offset: int | None = None

    def __str__(self) -> str:
        where = ""
        if self.file is not None:
            where = self.file + (f":{self.position}" if self.position is not None else "") + ": "
        at = f" (offset {self.offset})" if self.offset is not None else ""
        return f"{where}{self.message}{at}"


@dataclass(slots=True)
class SnapshotInfo:
    path: str
    end_offset: int
    epoch: int
    valid: bool = False
    reason: str | None = None
    records: int = 0
    """Metadata records applied from it."""


@dataclass
class MetadataReport:
    """The result of :func:`replay`."""

    log_dir: str
    partition_dir: str
    state: ClusterState
    meta_properties: dict[str, str] | None = None
    quorum_state: dict | None = None
    snapshot: SnapshotInfo | None = None
    """The snapshot the replay started from (None: from the start of the log)."""
    skipped_snapshots: list[SnapshotInfo] = field(default_factory=list)
    bootstrap: dict | None = None
    """bootstrap.checkpoint: ``{"file", "features": {name: level}, "records"}`` (shown, not applied)."""
    at_offset: int | None = None
    log_start_offset: int | None = None
    """The base offset of the log's first segment (its file name; None: no segment)."""
    log_end_offset: int | None = None
    """The offset after the last batch read (the next offset)."""
    last_offset: int | None = None
    """The offset of the last record applied or read (snapshot end - 1 when the log adds nothing)."""
    last_epoch: int | None = None
    """The partition leader epoch of the batch of :attr:`last_offset`."""
    records: int = 0
    """Metadata records read from the log (from the snapshot's end on), applied or not."""
    control_records: int = 0
    batches: int = 0
    applied: int = 0
    """Metadata records applied (snapshot included)."""
    transactions_committed: int = 0
    transactions_aborted: int = 0
    open_transaction: dict | None = None
    """``{"name", "offset", "records"}`` of a transaction still open at the end (not applied)."""
    stopped_at: Problem | None = None
    """The damage the replay stopped at (None: read to the end)."""
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def node_id(self) -> int | None:
        """``node.id`` (``broker.id`` in older files) of ``meta.properties``: None when absent or not a number."""
        mp = self.meta_properties or {}
        text = mp.get("node.id") or mp.get("broker.id")
        try:
            return int(text) if text is not None else None
        except ValueError:
            return None

    @property
    def cluster_id(self) -> str | None:
        return (self.meta_properties or {}).get("cluster.id")


@dataclass(frozen=True, slots=True)
class MetadataOptions:
    at_offset: int | None = None
    """Replay the records below this offset only (exclusive, as a snapshot's end offset)."""


# ----------------------------------------------------------------------------- applying records


def _set_or_remove(table: dict, owner: object, name: str, value: object, remove: bool) -> None:
    """``table[owner][name] = value``, or remove ``name`` (and ``owner`` once it has none left):
    how a config or a client quota is set and deleted."""
    if remove:
        entries = table.get(owner)
        if entries is not None:
            entries.pop(name, None)
            if not entries:
                del table[owner]
    else:
        table.setdefault(owner, {})[name] = value


class _Applier:
    """Applies decoded metadata records to a :class:`ClusterState` as the image deltas do, with
    metadata transactions buffered until their End."""

    def __init__(self, state: ClusterState, problems: list[Problem], where: Callable[[], str | None]) -> None:
        self.state = state
        self.problems = problems
        self.where = where
        self.txn: list[tuple[str, dict, int]] | None = None
        self.txn_name: str | None = None
        self.txn_offset: int | None = None
        self.applied = 0
        self.committed = 0
        self.aborted = 0
        self.snapshot = False  # registration offsets are unknown in a snapshot
        self._handlers: dict[str, Callable[[dict, int], None]] = {
            "TopicRecord": self._topic,
            "PartitionRecord": self._partition,
            "PartitionChangeRecord": self._partition_change,
            "RemoveTopicRecord": self._remove_topic,
            "RegisterBrokerRecord": self._register_broker,
            "UnregisterBrokerRecord": self._unregister_broker,
            "FenceBrokerRecord": self._fence,
            "UnfenceBrokerRecord": self._unfence,
            "BrokerRegistrationChangeRecord": self._broker_change,
            "RegisterControllerRecord": self._register_controller,
            "ConfigRecord": self._config,
            "FeatureLevelRecord": self._feature,
            "ProducerIdsRecord": self._producer_ids,
            "ClientQuotaRecord": self._quota,
            "UserScramCredentialRecord": self._scram,
            "RemoveUserScramCredentialRecord": self._remove_scram,
            "DelegationTokenRecord": self._token,
            "RemoveDelegationTokenRecord": self._remove_token,
            "AccessControlEntryRecord": self._acl,
            "RemoveAccessControlEntryRecord": self._remove_acl,
            "ZkMigrationStateRecord": self._zk_migration,
            "NoOpRecord": self._noop,
        }

    # -- the stream

    def record(self, name: str, data: dict, offset: int) -> None:
        if name not in _TXN_RECORDS:
            if self.txn is not None:
                self.txn.append((name, data, offset))
                return
            self._apply(name, data, offset)
            return
        if name == "BeginTransactionRecord":
            if self.txn is not None:
                self._problem("transaction", f"BeginTransactionRecord inside the transaction begun at offset "
                                             f"{self.txn_offset}: that one's records are dropped", offset)
            self.txn, self.txn_name, self.txn_offset = [], data.get("Name"), offset
            return
        if name == "EndTransactionRecord":
            if self.txn is None:
                self._problem("transaction", "EndTransactionRecord outside a transaction: ignored", offset)
                return
            buffered, self.txn = self.txn, None
            for n, d, o in buffered:
                self._apply(n, d, o)
            self.committed += 1
            return
        if name == "AbortTransactionRecord":
            if self.txn is None:
                self._problem("transaction", "AbortTransactionRecord outside a transaction: ignored", offset)
                return
            self.txn = None
            self.aborted += 1
            return

    def open_transaction(self) -> dict | None:
        if self.txn is None:
            return None
        return {"name": self.txn_name, "offset": self.txn_offset, "records": len(self.txn)}

    def _apply(self, name: str, data: dict, offset: int) -> None:
        handler = self._handlers.get(name)
        if handler is None:
            self._problem("unknown_record", f"{name} is not a record kafkatool applies: skipped", offset)
            return
        handler(data, offset)
        self.applied += 1

    def _problem(self, kind: str, text: str, offset: int) -> None:
        self.problems.append(Problem(kind, text, self.where(), None, offset))

    # -- topics and partitions (TopicsDelta)

    def _topic(self, d: dict, offset: int) -> None:
        self.state.topics[d["TopicId"]] = TopicState(d["Name"], d["TopicId"])

    def _partition(self, d: dict, offset: int) -> None:
        topic = self.state.topics.get(d["TopicId"])
        if topic is None:
            self._problem("unknown_topic", f"PartitionRecord for partition {d['PartitionId']} of topic id "
                                           f"{d['TopicId']}, which no TopicRecord created: skipped", offset)
            return
        replicas = list(d["Replicas"])
        dirs = list(d.get("Directories") or []) or [_MIGRATING] * len(replicas)
        topic.partitions[d["PartitionId"]] = PartitionState(
            replicas, list(d["Isr"]), list(d["RemovingReplicas"]), list(d["AddingReplicas"]), d["Leader"],
            d["LeaderRecoveryState"], d["LeaderEpoch"], d["PartitionEpoch"], dirs,
            list(d.get("EligibleLeaderReplicas") or []), list(d.get("LastKnownElr") or []))

    def _partition_change(self, d: dict, offset: int) -> None:
        topic = self.state.topics.get(d["TopicId"])
        p = None if topic is None else topic.partitions.get(d["PartitionId"])
        if p is None:
            self._problem("unknown_partition", f"PartitionChangeRecord for partition {d['PartitionId']} of topic id "
                                               f"{d['TopicId']}, which is not registered: skipped", offset)
            return
        # PartitionRegistration.merge: only the fields present change (null: no change)
        replicas = d["Replicas"]
        directories = d.get("Directories")
        if directories:
            p.directories = list(directories)
        elif replicas is not None:
            # DirectoryId.createDirectoriesFrom: a kept replica keeps its directory
            by_replica = dict(zip(p.replicas, p.directories))
            p.directories = [by_replica.get(r, _UNASSIGNED) for r in replicas]
        if not p.directories:
            p.directories = [_MIGRATING] * len(p.replicas)
        if replicas is not None:
            p.replicas = list(replicas)
        v = d["Isr"]
        if v is not None:
            p.isr = list(v)
        v = d["RemovingReplicas"]
        if v is not None:
            p.removing_replicas = list(v)
        v = d["AddingReplicas"]
        if v is not None:
            p.adding_replicas = list(v)
        leader = d["Leader"]
        if leader != NO_LEADER_CHANGE:
            p.leader = leader
            p.leader_epoch += 1
        v = d["LeaderRecoveryState"]
        if v != -1:
            p.leader_recovery_state = v
        v = d.get("EligibleLeaderReplicas")
        if v is not None:
            p.elr = list(v)
        v = d.get("LastKnownElr")
        if v is not None:
            p.last_known_elr = list(v)
        p.partition_epoch += 1

    def _remove_topic(self, d: dict, offset: int) -> None:
        topic = self.state.topics.pop(d["TopicId"], None)
        if topic is None:
            self._problem("unknown_topic", f"RemoveTopicRecord for topic id {d['TopicId']}, which is not there: "
                                           "ignored", offset)
            return
        # MetadataDelta.replay(RemoveTopicRecord): the topic's configs go with it
        self.state.configs.pop((2, topic.name), None)

    # -- brokers and controllers (ClusterDelta)

    def _register_broker(self, d: dict, offset: int) -> None:
        self.state.brokers[d["BrokerId"]] = BrokerState(
            d["BrokerId"], d["BrokerEpoch"], d["IncarnationId"], [_endpoint(e) for e in d["EndPoints"]],
            d.get("Rack"), bool(d.get("Fenced", True)), bool(d.get("InControlledShutdown", False)),
            bool(d.get("IsMigratingZkBroker", False)),
            {f["Name"]: (f["MinSupportedVersion"], f["MaxSupportedVersion"]) for f in d["Features"]},
            list(d.get("LogDirs") or []), -1 if self.snapshot else offset)

    def _broker(self, broker_id: int, epoch: int, action: str, offset: int) -> BrokerState | None:
        # ClusterDelta.getBrokerOrThrow: the broker must be registered with this epoch
        b = self.state.brokers.get(broker_id)
        if b is None:
            self._problem("unknown_broker", f"{action} broker {broker_id}, which is not registered: ignored", offset)
            return None
        if b.epoch != epoch:
            self._problem("broker_epoch", f"{action} broker {broker_id} at epoch {epoch}, but it is registered at "
                                          f"epoch {b.epoch}: ignored", offset)
            return None
        return b

    def _unregister_broker(self, d: dict, offset: int) -> None:
        # ClusterDelta.replay(UnregisterBrokerRecord) removes the broker whatever the epoch
        if self.state.brokers.pop(d["BrokerId"], None) is None:
            self._problem("unknown_broker", f"UnregisterBrokerRecord: broker {d['BrokerId']} is not registered: "
                                            "nothing to remove", offset)

    def _fence(self, d: dict, offset: int) -> None:
        b = self._broker(d["Id"], d["Epoch"], "FenceBrokerRecord:", offset)
        if b is not None:
            b.fenced = True  # the controlled-shutdown flag stays (cloneWith(FENCE, empty, empty))

    def _unfence(self, d: dict, offset: int) -> None:
        b = self._broker(d["Id"], d["Epoch"], "UnfenceBrokerRecord:", offset)
        if b is not None:
            b.fenced = False

    def _broker_change(self, d: dict, offset: int) -> None:
        b = self._broker(d["BrokerId"], d["BrokerEpoch"], "BrokerRegistrationChangeRecord:", offset)
        if b is None:
            return
        fenced = d.get("Fenced") or 0  # BrokerRegistrationFencingChange: 1 FENCE, 0 NONE, -1 UNFENCE
        if fenced not in (-1, 0, 1):
            self._problem("bad_record", f"BrokerRegistrationChangeRecord: unknown fencing change {fenced}: ignored",
                          offset)
            return
        shutdown = d.get("InControlledShutdown") or 0  # 0 NONE, 1 IN_CONTROLLED_SHUTDOWN
        if shutdown not in (0, 1):
            self._problem("bad_record", f"BrokerRegistrationChangeRecord: unknown controlled-shutdown change "
                                        f"{shutdown}: ignored", offset)
            return
        if fenced == 1:
            b.fenced = True
        elif fenced == -1:
            b.fenced = False
        if shutdown == 1:
            b.in_controlled_shutdown = True
        if d.get("LogDirs"):
            b.log_dirs = list(d["LogDirs"])

    def _register_controller(self, d: dict, offset: int) -> None:
        self.state.controllers[d["ControllerId"]] = ControllerState(
            d["ControllerId"], d["IncarnationId"], bool(d["ZkMigrationReady"]),
            [_endpoint(e) for e in d["EndPoints"]],
            {f["Name"]: (f["MinSupportedVersion"], f["MaxSupportedVersion"]) for f in d["Features"]},
            -1 if self.snapshot else offset)

    # -- configs, features and the rest

    def _config(self, d: dict, offset: int) -> None:
        _set_or_remove(self.state.configs, (d["ResourceType"], d["ResourceName"]), d["Name"], d["Value"],
                       d["Value"] is None)

    def _feature(self, d: dict, offset: int) -> None:
        if d["FeatureLevel"] == 0:
            self.state.features.pop(d["Name"], None)  # FeaturesDelta: level 0 removes the feature
        else:
            self.state.features[d["Name"]] = d["FeatureLevel"]

    def _producer_ids(self, d: dict, offset: int) -> None:
        self.state.producer_ids = {"brokerId": d["BrokerId"], "brokerEpoch": d["BrokerEpoch"],
                                   "nextProducerId": d["NextProducerId"]}

    def _quota(self, d: dict, offset: int) -> None:
        entity = tuple(sorted(((e["EntityType"], e["EntityName"]) for e in d["Entity"]),
                              key=lambda kv: (kv[0], kv[1] is not None, kv[1] or "")))
        _set_or_remove(self.state.quotas, entity, d["Key"], d["Value"], d["Remove"])

    def _scram(self, d: dict, offset: int) -> None:
        self.state.scram[(d["Name"], d["Mechanism"])] = d["Iterations"]

    def _remove_scram(self, d: dict, offset: int) -> None:
        self.state.scram.pop((d["Name"], d["Mechanism"]), None)

    def _token(self, d: dict, offset: int) -> None:
        self.state.tokens[d["TokenId"]] = {
            "tokenId": d["TokenId"], "owner": d["Owner"], "requester": d["Requester"],
            "renewers": list(d["Renewers"]), "issueTimestamp": d["IssueTimestamp"],
            "maxTimestamp": d["MaxTimestamp"], "expirationTimestamp": d["ExpirationTimestamp"]}

    def _remove_token(self, d: dict, offset: int) -> None:
        self.state.tokens.pop(d["TokenId"], None)

    def _acl(self, d: dict, offset: int) -> None:
        self.state.acls[d["Id"]] = {
            "id": d["Id"], "resourceType": ACL_RESOURCE_TYPES.get(d["ResourceType"], str(d["ResourceType"])),
            "resourceName": d["ResourceName"],
            "patternType": ACL_PATTERN_TYPES.get(d["PatternType"], str(d["PatternType"])),
            "principal": d["Principal"], "host": d["Host"],
            "operation": ACL_OPERATIONS.get(d["Operation"], str(d["Operation"])),
            "permissionType": ACL_PERMISSIONS.get(d["PermissionType"], str(d["PermissionType"]))}

    def _remove_acl(self, d: dict, offset: int) -> None:
        self.state.acls.pop(d["Id"], None)

    def _zk_migration(self, d: dict, offset: int) -> None:
        self.state.zk_migration_state = d["ZkMigrationState"]

    def _noop(self, d: dict, offset: int) -> None:
        pass


def _endpoint(e: dict) -> dict:
    return {"name": e["Name"], "host": e["Host"], "port": e["Port"],
            "securityProtocol": SECURITY_PROTOCOLS.get(e["SecurityProtocol"], str(e["SecurityProtocol"]))}


# ----------------------------------------------------------------------------- decoding


def _metadata_decoder() -> Callable[[bytes | None, int], tuple[str, dict] | str]:
    """``decode(value, offset) -> (record name, fields)`` or the ``--cluster-metadata-decoder``'s
    error text (``Error at <offset>, skipping. <message>``), through the public framing of
    :mod:`kafkatool.record.topics.metadata` (``read_frame``: the message without the printed JSON
    the dump needs)."""
    from kafkatool.record.topics.metadata import FrameError, read_frame

    def one(value: bytes | None, offset: int) -> tuple[str, dict] | str:
        try:
            msg = read_frame(value)
        except FrameError as e:
            return f"Error at {offset}, skipping. {e.kafka_message}"
        return msg.name, msg.data

    return one


def _control(type_id: int, value: bytes | None, state: ClusterState, epoch: int) -> None:
    """A KRaft control record's effect on the quorum view."""
    if type_id == ControlType.LEADER_CHANGE:
        # not decoded by kafkatool.record.control (kafka-dump-log does not either): read at
        # schema version 0, as Kafka writes and reads control bodies (no version prefix)
        data, _end = message.decode("LeaderChangeMessage", bytes(value or b""), 0)
        state.leader_id = data["LeaderId"]
        state.leader_epoch = epoch
        state.leader_voters = [v["VoterId"] for v in data["Voters"]]
    elif type_id == ControlType.KRAFT_VOTERS:
        decoded = decode_kraft_control(type_id, value)
        if decoded is not None:
            state.voters = decoded[1]["voters"]
    elif type_id == ControlType.KRAFT_VERSION:
        decoded = decode_kraft_control(type_id, value)
        if decoded is not None:
            state.kraft_version = decoded[1]["kRaftVersion"]


# ----------------------------------------------------------------------------- walking files


_TAIL_KINDS = ("partial_batch", "trailing_bytes", "trailing_zeros")


class _Walk:
    """The batches of one file (a segment or a snapshot), as ``(batch, chunks of records)``
    (the chunks must be read before the next batch is asked for), stopping at the first damage
    (:attr:`damage`, in verify's words: a region the walk cannot frame, a CRC mismatch, records
    that do not decode) or torn tail (:attr:`tail`)."""

    def __init__(self, segment: Segment, *, offset: int | None = None) -> None:
        self.segment = segment
        self.offset = offset
        self.damage: Problem | None = None
        self.tail: BadRegion | None = None
        self.end_position = 0

    def __iter__(self) -> Iterator[tuple[Batch, Iterator[list]]]:
        try:
            yield from self._walk()
        except KafkaToolError as e:  # not the bytes: the file cannot be opened or read
            self.damage = Problem("unreadable", e.message, self.segment.log_path, e.position)

    def _walk(self) -> Iterator[tuple[Batch, Iterator[list]]]:
        path = self.segment.log_path
        f = open_log(path)
        with f:
            size = os.fstat(f.fileno()).st_size
            for item in batches_and_regions(self.segment, f.fileno(), 0, size, size, offset=self.offset):
                if isinstance(item, BadRegion):
                    if item.kind in _TAIL_KINDS and item.end >= size:
                        self.tail = item
                    else:
                        self.damage = Problem(item.kind, item.message, path, item.start)
                    return
                batch, data = item
                if batch.crc != batch.computed_crc:
                    self.damage = Problem(
                        "crc_mismatch", f"the batch's bytes do not match its CRC (stored crc {batch.crc}, computed "
                                        f"crc {batch.computed_crc}; the batch spans {batch.size} bytes)",
                        path, batch.position)
                    return
                if batch.magic < 2:
                    self.damage = Problem("bad_batch", f"a magic {batch.magic} entry: the metadata log holds only "
                                                       "magic 2 batches", path, batch.position)
                    return
                if data is None:
                    self.damage = Problem("too_large", f"batch of {batch.size} bytes is larger than kafkatool reads "
                                                       "whole", path, batch.position)
                    return
                self.end_position = batch.position + batch.size
                yield batch, self._chunks(batch, data, path)
                if self.damage is not None:  # the records of that batch did not decode
                    return

    def _chunks(self, batch: Batch, data, path: str) -> Iterator[list]:
        """The batch's records in chunks, memory flat whatever its record count; records that do
        not decode end them and are the walk's damage."""
        try:
            yield from batch_record_chunks(batch, data)
        except KafkaToolError as e:
            self.damage = Problem("bad_records", e.message, path, batch.position)


def _read_snapshot(info: SnapshotInfo, decode) -> tuple[ClusterState, list[Problem]]:
    """Replay one snapshot into a fresh state; sets ``info.valid``/``info.reason``/``info.records``."""
    state = ClusterState()
    problems: list[Problem] = []
    applier = _Applier(state, problems, lambda: info.path)
    applier.snapshot = True
    walk = _Walk(Segment.at(info.path, base_offset=0))
    first = True
    footer = False
    for batch, chunks in walk:
        if footer:
            info.reason = f"a batch after the SNAPSHOT_FOOTER at byte {batch.position}"
            return state, problems
        if batch.is_control:
            first_type = None
            for chunk in chunks:
                for r in chunk:
                    try:
                        _v, type_id = decode_control_key(r.key)
                        _control(type_id, r.value, state, batch.partition_leader_epoch)
                    except KafkaToolError as e:
                        info.reason = f"a control record that does not decode at byte {batch.position}: {e.message}"
                        return state, problems
                    if first_type is None:
                        first_type = type_id
                    footer = footer or type_id == ControlType.SNAPSHOT_FOOTER
            if first and first_type != ControlType.SNAPSHOT_HEADER:
                info.reason = "it does not start with a SNAPSHOT_HEADER control batch"
                return state, problems
        elif first:
            info.reason = "it does not start with a SNAPSHOT_HEADER control batch"
            return state, problems
        else:
            for chunk in chunks:
                for r in chunk:
                    got = decode(r.value, r.offset)
                    if got.__class__ is str:
                        problems.append(Problem("undecodable", got, info.path, batch.position, r.offset))
                        continue
                    applier.record(got[0], got[1], r.offset)
        first = False
    if walk.damage is not None:
        info.reason = f"{walk.damage.kind} at byte {walk.damage.position}: {walk.damage.message}"
    elif walk.tail is not None:
        info.reason = f"it ends in a torn batch at byte {walk.tail.start} ({walk.tail.message})"
    elif first:
        info.reason = "it is empty"
    elif not footer:
        info.reason = "it has no SNAPSHOT_FOOTER (not completely written)"
    else:
        info.valid = True
        info.records = applier.applied
    return state, problems


def find_metadata_partition(path: str) -> tuple[LogDir, Partition]:
    """The log dir and its ``__cluster_metadata-0`` for ``path`` (a log dir, or the partition dir
    itself); :class:`KafkaToolError` when there is none."""
    if not os.path.isdir(path):
        raise KafkaToolError("not a directory: give the log dir that holds __cluster_metadata-0 "
                             "(metadata.log.dir), or that partition directory", path=path)
    part = Partition(path)
    if part.topic == names.METADATA_TOPIC and part.partition == 0:
        parent = os.path.dirname(os.path.abspath(path))
        return LogDir(parent), Partition(path, log_dir=LogDir(parent))
    log_dir = LogDir(path)
    found = log_dir.partition(names.METADATA_TOPIC, 0)
    if found is None:
        raise KafkaToolError("no __cluster_metadata-0 directory here: give the KRaft metadata log dir "
                             "(metadata.log.dir, or the first of log.dirs)", path=path)
    return log_dir, found


def _bootstrap(log_dir: LogDir, decode, problems: list[Problem]) -> dict | None:
    entry = next((e for e in log_dir.listing() if e.name == names.BOOTSTRAP_CHECKPOINT and e.is_file), None)
    if entry is None:
        return None
    features: dict[str, int] = {}
    count = 0
    walk = _Walk(Segment.at(entry.path, base_offset=0))
    for batch, chunks in walk:
        if batch.is_control:
            continue
        for chunk in chunks:
            for r in chunk:
                got = decode(r.value, r.offset)
                if isinstance(got, str):
                    problems.append(Problem("undecodable", got, entry.path, batch.position, r.offset))
                    continue
                count += 1
                if got[0] == "FeatureLevelRecord":
                    features[got[1]["Name"]] = got[1]["FeatureLevel"]
    if walk.damage is not None:
        problems.append(walk.damage)
    return {"file": entry.path, "features": features, "records": count}


def _gap(first: int, start: int, snapshot: bool, path: str, position: int) -> Problem:
    below = f"the snapshot ends at {start}" if snapshot else "no snapshot covers the offsets below it"
    return Problem("log_gap", f"the log starts at offset {first} but {below}: the records in between are missing, "
                              "the state is incomplete", path, position)


def replay(path: str, opts: MetadataOptions = MetadataOptions()) -> MetadataReport:
    """Replay the metadata log of the log dir (or ``__cluster_metadata-0`` dir) at ``path``.

    Raises :class:`KafkaToolError` when there is no metadata partition there; everything else
    (damage, skipped snapshots, records that cannot be applied) is in the report.
    """
    import time

    started = time.monotonic()
    log_dir, part = find_metadata_partition(path)
    decode = _metadata_decoder()
    problems: list[Problem] = []
    report = MetadataReport(log_dir.path, part.path, ClusterState(), at_offset=opts.at_offset, problems=problems)
    try:
        report.meta_properties = log_dir.meta_properties()
    except (KafkaToolError, OSError) as e:
        problems.append(Problem("meta_properties", str(e)))
    qs = part.find_file(names.QUORUM_STATE)
    if qs is not None:
        try:
            report.quorum_state = read_quorum_state(qs)
        except (KafkaToolError, OSError) as e:
            problems.append(Problem("quorum_state", str(e)))
    report.bootstrap = _bootstrap(log_dir, decode, problems)

    # the snapshot: the newest valid one at or below --at-offset
    snapshots = []
    for e in part.listing():
        if e.kind is names.FileKind.CHECKPOINT_SNAPSHOT and e.is_file:
            end, epoch = names.parse_checkpoint_name(e.name)
            if opts.at_offset is None or end <= opts.at_offset:
                snapshots.append(SnapshotInfo(e.path, end, epoch))
    snapshots.sort(key=lambda s: (s.end_offset, s.epoch), reverse=True)
    state = ClusterState()
    for snap in snapshots:
        snap_state, snap_problems = _read_snapshot(snap, decode)
        if snap.valid:
            report.snapshot = snap
            state = snap_state
            problems.extend(snap_problems)
            break
        report.skipped_snapshots.append(snap)
        problems.append(Problem("invalid_snapshot", f"not a valid snapshot ({snap.reason}): skipped for an older "
                                                    "one, or the log from its start", snap.path))
    report.state = state
    start = report.snapshot.end_offset if report.snapshot else 0
    if report.snapshot is not None:
        report.last_offset = start - 1
        report.last_epoch = report.snapshot.epoch

    # the log from the snapshot's end on
    current = {"file": None}
    applier = _Applier(state, problems, lambda: current["file"])
    applier.applied = report.snapshot.records if report.snapshot else 0
    at = opts.at_offset
    segments = part.segments()
    if segments:
        report.log_start_offset = segments[0].base_offset
    first_batch = True
    if segments and segments[0].base_offset > start and (at is None or at > start):
        first_batch = False  # said here, from the file name, even when --at-offset stops before any batch
        problems.append(_gap(segments[0].base_offset, start, report.snapshot is not None, segments[0].log_path, 0))
    if segments and start > 0:
        bases = [s.base_offset for s in segments]
        first_needed = max((i for i, b in enumerate(bases) if b <= start), default=0)
        segments = segments[first_needed:]
    done = False
    for seg in segments:
        if done:
            break
        if at is not None and seg.base_offset >= at:
            break
        current["file"] = seg.log_path
        walk = _Walk(seg, offset=start if start > 0 else None)
        for batch, chunks in walk:
            if first_batch:
                first_batch = False
                if batch.offset > start:
                    problems.append(_gap(batch.offset, start, report.snapshot is not None, seg.log_path,
                                         batch.position))
            report.log_end_offset = batch.last_offset + 1
            if batch.last_offset < start:
                continue
            if at is not None and batch.offset >= at:
                done = True
                break
            report.batches += 1
            epoch = batch.partition_leader_epoch
            control = batch.is_control
            record = applier.record
            last = None
            n = 0
            for chunk in chunks:
                for r in chunk:
                    o = r.offset
                    if o < start:
                        continue
                    if at is not None and o >= at:
                        done = True
                        break
                    last = o
                    n += 1
                    if control:
                        try:
                            _v, type_id = decode_control_key(r.key)
                            _control(type_id, r.value, state, epoch)
                        except KafkaToolError as e:
                            problems.append(Problem("bad_control", e.message, seg.log_path, batch.position, o))
                        continue
                    got = decode(r.value, o)
                    if got.__class__ is str:
                        problems.append(Problem("undecodable", got, seg.log_path, batch.position, o))
                        continue
                    record(got[0], got[1], o)
                if done:
                    break
            if control:
                report.control_records += n
            else:
                report.records += n
            if last is not None:
                report.last_offset, report.last_epoch = last, epoch
            if done:
                break
        if walk.damage is not None:
            report.stopped_at = walk.damage
            problems.append(walk.damage)
            break
        if walk.tail is not None and walk.tail.kind != "trailing_zeros":
            report.notes.append(f"{seg.log_path}:{walk.tail.start}: {walk.tail.message} (a torn write: Kafka's "
                                "recovery drops these bytes; not applied)")
    report.applied = applier.applied
    report.transactions_committed = applier.committed
    report.transactions_aborted = applier.aborted
    report.open_transaction = applier.open_transaction()
    if report.snapshot is None and not segments and not snapshots:
        report.notes.append("the metadata log is empty: no controller has written to it yet "
                            "(bootstrap.checkpoint's records are written on the first activation)")
    report.seconds = time.monotonic() - started
    return report
