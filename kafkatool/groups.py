"""``kafkatool groups``: consumer groups and their committed offsets, replayed from ``__consumer_offsets`` segments.

What the group coordinator holds after it loads a ``__consumer_offsets`` partition, rebuilt
from the segment files alone (a stopped or dead cluster). The replay follows the coordinator's
own (``GroupCoordinatorShard.replay`` → ``OffsetMetadataManager.replay`` /
``replayEndTransactionMarker`` and ``GroupMetadataManager.replay`` in apache/kafka's
group-coordinator module, the only coordinator from Kafka 4.0; the classic Scala
``GroupMetadataManager.doLoadGroupsAndOffsets`` differs in two corner cases: it compares the
batches' base offsets, not the records', when a COMMIT marker meets a later plain commit, and a
plain offset tombstone there leaves the pending transactional offsets of its key alone):

* records are applied in offset order; the latest value of a key wins; a null value (a
  tombstone) deletes the key;
* an offset commit in a transactional batch (``TxnOffsetCommit``) is held as *pending* under
  its producer id; that producer's COMMIT marker moves it to the committed offsets (unless
  a plain commit of the same partition was written after it: the record offset decides), its
  ABORT marker discards it; with no marker yet it stays pending and is shown as such;
* an offset tombstone deletes the committed offset and every pending one of that key;
* a ``GroupMetadata`` value loads a classic group in state ``Empty`` (no members) or
  ``Stable`` (``loadedMembers.isEmpty() ? EMPTY : STABLE``); its tombstone removes the group.
  A removed group whose offsets are all gone is shown as ``Dead``; one whose offsets remain
  is ``Empty`` again, as the coordinator loads it (a group that only stores offsets);
* offsets committed by a group without group metadata make a "simple" classic group:
  ``Empty``, no protocol type;
* the KIP-848 consumer groups and the share groups (record types 3-15) are replayed as the new
  coordinator does: the group epoch, the target assignment epoch, each member's metadata,
  current assignment (epochs, state, partitions, pending revocation) and target assignment;
  a tombstone removes the group, the member, or resets the member's assignment (epochs -1).
  A consumer group's state is ``Empty`` without members, ``Assigning`` while the group epoch
  is ahead of the assignment epoch, ``Reconciling`` while a member is not ``STABLE`` at the
  assignment epoch, else ``Stable``; a share group is ``Empty`` or ``Stable``. Topic ids are
  named from the group's partition-metadata records when they name them.

Memory follows the coordinator's own state (live keys), not the record count: each record
updates a dict entry and is dropped. Records the offsets decoder cannot read are counted and
listed (file, offset, Kafka's wording), damaged regions and batches reported in
``kafkatool verify``'s words; the walk reads on after both.

When several log dirs hold the same ``__consumer_offsets-N`` (replicas from several brokers),
the copy with the highest log end offset is replayed and the others are named.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Iterable, Iterator, NamedTuple

from kafkatool.errors import KafkaToolError
from kafkatool.record.control import ControlType, decode_control_key
from kafkatool.record.records import batch_record_chunks
from kafkatool.segment.logdir import (
    BadRegion,
    Partition,
    batches_and_regions,
    best_copy,
    expand,
    iter_partitions,
    log_end_offset,
    open_log,
)
from kafkatool.stats import Problem

__all__ = [
    "OFFSETS_TOPIC",
    "TopicPartitions",
    "CommittedOffset",
    "Member",
    "Group",
    "Problem",
    "Undecodable",
    "PartitionRead",
    "Replica",
    "GroupsOptions",
    "GroupsRun",
    "DEFAULT_OFFSETS_PARTITIONS",
    "offsets_partition_of",
    "find_offsets_partitions",
    "data_partitions",
    "add_log_ends",
    "log_end_offset",
    "replay_partition",
    "groups_of",
]

OFFSETS_TOPIC = "__consumer_offsets"
_MAX_LISTED = 20
"""Undecodable records and problems listed per partition (all are counted)."""

#: ``MemberState`` of the new coordinator (``modern/MemberState.java``): the int8 in CurrentMemberAssignment.
MEMBER_STATES = {0: "STABLE", 1: "UNREVOKED_PARTITIONS", 2: "UNRELEASED_PARTITIONS", 127: "UNKNOWN"}

_CLASSIC, _CONSUMER, _SHARE = "classic", "consumer", "share"
# new-protocol record types (spec §14.1): (group type, what the record holds)
_NEW_TYPES = {
    3: (_CONSUMER, "metadata"), 4: (_CONSUMER, "partitions"), 5: (_CONSUMER, "member"),
    6: (_CONSUMER, "target_epoch"), 7: (_CONSUMER, "target"), 8: (_CONSUMER, "current"),
    9: (_SHARE, "partitions"), 10: (_SHARE, "member"), 11: (_SHARE, "metadata"),
    12: (_SHARE, "target_epoch"), 13: (_SHARE, "target"), 14: (_SHARE, "current"),
    15: (_SHARE, "state_partitions"),
}
_MEMBER_KEYED = {"member", "target", "current"}


# ----------------------------------------------------------------------------- the model


class TopicPartitions(NamedTuple):
    """Partitions of one topic in an assignment: the name when known, the id for new-protocol records."""

    topic: str | None
    partitions: tuple[int, ...]
    topic_id: str | None = None


@dataclass(slots=True)
class CommittedOffset:
    """One group's committed (or pending) offset of one topic-partition."""

    topic: str
    partition: int
    offset: int
    leader_epoch: int
    """-1 when none was committed (values before v3 carry none)."""
    metadata: str
    commit_timestamp: int
    expire_timestamp: int | None
    """The v1 value's expire time (-1: none); None for the other versions, which have no such field."""
    version: int
    """The OffsetCommitValue version."""
    record_offset: int
    """The offset of the record in ``__consumer_offsets``."""
    producer_id: int | None = None
    """The transactional producer of a TxnOffsetCommit (None for a plain commit)."""
    log_end_offset: int | None = None
    """The topic-partition's log end offset when its data partition was read (``--lag``), else None."""

    @property
    def lag(self) -> int | None:
        """Records between the committed offset and the log end (negative: the log ends below
        the committed offset, records the group had consumed are gone); None without a log end."""
        return None if self.log_end_offset is None else self.log_end_offset - self.offset


@dataclass(slots=True)
class Member:
    """A group member: a classic member (``GroupMetadataValue``) or a new-protocol one. Fields a
    kind of member does not have are None."""

    member_id: str
    group_instance_id: str | None = None
    client_id: str | None = None
    client_host: str | None = None
    rack_id: str | None = None
    session_timeout_ms: int | None = None
    rebalance_timeout_ms: int | None = None
    subscribed_topics: list[str] | None = None
    """Classic: the consumer-protocol subscription's topics; new: SubscribedTopicNames."""
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    assignment: list[TopicPartitions] | None = None
    """Classic: the consumer-protocol assignment; new: the current assignment."""
    assignment_error: str | None = None
    """Why the classic member's consumer-protocol bytes could not be decoded (None: they were, or
    the group's protocol type is not ``consumer``)."""
    member_epoch: int | None = None
    previous_member_epoch: int | None = None
    member_state: str | None = None
    pending_revocation: list[TopicPartitions] | None = None
    target_assignment: list[TopicPartitions] | None = None


@dataclass(slots=True)
class Group:
    """A group as the coordinator holds it after loading its ``__consumer_offsets`` partition."""

    group_id: str
    group_type: str
    """``classic``, ``consumer`` (KIP-848) or ``share``."""
    state: str
    partition_dir: str
    """The ``__consumer_offsets-N`` directory replayed."""
    offsets_partition: int | None
    protocol_type: str | None = None
    """Classic: the protocol type (``consumer``, ``connect``...; ``""`` for a group that only stores offsets)."""
    protocol: str | None = None
    generation: int | None = None
    leader: str | None = None
    current_state_timestamp: int | None = None
    epoch: int | None = None
    """New-protocol groups: the group epoch."""
    assignment_epoch: int | None = None
    """New-protocol groups: the target assignment epoch."""
    members: list[Member] = field(default_factory=list)
    offsets: list[CommittedOffset] = field(default_factory=list)
    """Committed offsets, by topic and partition."""
    pending_offsets: list[CommittedOffset] = field(default_factory=list)
    """Transactional offset commits whose producer has written no COMMIT/ABORT marker yet."""
    metadata_offset: int | None = None
    """The offset of the last group record applied (GroupMetadata or a new-protocol record)."""
    deleted_at: int | None = None
    """The offset of the tombstone that removed the group's metadata, if it was removed."""


class Undecodable(NamedTuple):
    """A record the offsets decoder could not read: its file, offset and Kafka's wording."""

    file: str
    offset: int
    message: str

    def __str__(self) -> str:
        return f"{self.file}: offset {self.offset}: {self.message}"


class Replica(NamedTuple):
    """A copy of a ``__consumer_offsets`` partition that was not replayed."""

    path: str
    log_end_offset: int | None
    """None: it could not be read."""


@dataclass(slots=True)
class PartitionRead:
    """One ``__consumer_offsets`` partition replayed: what was read, what went wrong, its groups."""

    path: str
    partition: int | None
    log_end_offset: int | None
    segments: int = 0
    batches: int = 0
    records: int = 0
    """Records replayed (control records included)."""
    groups: list[Group] = field(default_factory=list)
    other_replicas: list[Replica] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    problems_not_listed: int = 0
    undecodable: list[Undecodable] = field(default_factory=list)
    undecodable_not_listed: int = 0

    @property
    def failed(self) -> bool:
        return bool(self.problems or self.problems_not_listed or self.undecodable or self.undecodable_not_listed)


@dataclass(frozen=True, slots=True)
class GroupsOptions:
    group: str | None = None
    """Only this group (the others' records are skipped as they are read)."""
    topic: str | None = None
    """Only offsets of this topic, and only groups holding one."""


@dataclass(slots=True)
class GroupsRun:
    """What the command-line paths held: the partitions to replay, and the paths with none."""

    partitions: list[tuple[Partition, list[Replica]]]
    """Each chosen copy and the other copies of the same partition."""
    nothing: list[str] = field(default_factory=list)
    """Named paths under which no ``__consumer_offsets`` partition was found."""
    unreadable: list[str] = field(default_factory=list)
    """Directories that could not be listed (messages)."""


# ----------------------------------------------------------------------------- finding the partitions

#: ``offsets.topic.num.partitions``'s default.
DEFAULT_OFFSETS_PARTITIONS = 50


def offsets_partition_of(group_id: str, partitions: int = DEFAULT_OFFSETS_PARTITIONS) -> int:
    """The ``__consumer_offsets`` partition a group's records go to:
    ``Utils.abs(groupId.hashCode()) % partitions`` (``GroupCoordinator.partitionFor``), Java's
    ``String.hashCode`` over the UTF-16 code units, ``Utils.abs(Integer.MIN_VALUE)`` being 0."""
    units = group_id.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    if h >= 1 << 31:
        h -= 1 << 32
    return (0 if h == -(1 << 31) else abs(h)) % partitions



def data_partitions(paths: Iterable[str]) -> dict[tuple[str, int], list[Partition]]:
    """The live partition dirs under ``paths`` by ``(topic, partition)`` (every copy), listings only."""
    out: dict[tuple[str, int], list[Partition]] = {}
    seen: set[str] = set()
    for p in iter_partitions(expand(list(paths))):
        if p.topic is None or p.partition is None or p.state is not None:
            continue
        real = os.path.realpath(p.path)
        if real not in seen:
            seen.add(real)
            out.setdefault((p.topic, p.partition), []).append(p)
    return out


def add_log_ends(read: PartitionRead, partitions: dict[tuple[str, int], list[Partition]],
                 cache: dict[tuple[str, int], int | None]) -> None:
    """Set each offset's :attr:`CommittedOffset.log_end_offset`: the highest log end offset of the
    topic-partition's copies in ``partitions`` (:func:`data_partitions`), None when none is there
    or none can be read. ``cache`` keeps them across partitions."""
    for g in read.groups:
        for o in (*g.offsets, *g.pending_offsets):
            key = (o.topic, o.partition)
            if key not in cache:
                copies = partitions.get(key)
                if copies:
                    best, ends = best_copy(copies)
                    cache[key] = ends[best]
                else:
                    cache[key] = None
            o.log_end_offset = cache[key]


def find_offsets_partitions(paths: Iterable[str], *, other_topics: bool = False) -> GroupsRun:
    """The ``__consumer_offsets-N`` dirs under ``paths`` (log dirs, partition dirs, directories of
    log dirs), one copy per partition: the one with the highest log end offset (the first named
    on a tie), the other copies listed with it. A named path with none is listed in
    :attr:`GroupsRun.nothing`, unless ``other_topics`` and it holds another topic's partition
    (data partitions named for their log end offsets)."""
    paths = list(paths)
    targets = expand(paths)
    run = GroupsRun([])
    found: dict[int | None, list[Partition]] = {}
    per_named: dict[str, int] = {}
    seen: set[str] = set()
    for t in targets:
        if t.error is not None and t.is_dir:
            run.unreadable.append(str(t.error))
    for p in iter_partitions(targets):
        if p.state is not None or p.topic != OFFSETS_TOPIC and not other_topics:
            continue
        for named in paths:
            if _is_below(p.path, named):
                per_named[named] = per_named.get(named, 0) + 1
        if p.topic != OFFSETS_TOPIC:
            continue
        real = os.path.realpath(p.path)
        if real in seen:  # the same directory reached twice (named twice, or a link): one copy
            continue
        seen.add(real)
        found.setdefault(p.partition, []).append(p)
    for t in targets:
        if t.named and t.error is None and not per_named.get(t.path):
            run.nothing.append(t.path)
    for number in sorted(found, key=lambda n: -1 if n is None else n):
        copies = found[number]
        if len(copies) == 1:  # the replay finds its log end itself: no walk before it
            run.partitions.append((copies[0], []))
            continue
        best, ends = best_copy(copies)
        others = [Replica(p.path, ends[i]) for i, p in enumerate(copies) if i != best]
        run.partitions.append((copies[best], others))
    return run


def _is_below(path: str, top: str) -> bool:
    a, b = os.path.abspath(path), os.path.abspath(top)
    return a == b or a.startswith(b.rstrip(os.sep) + os.sep)


# ----------------------------------------------------------------------------- the replay


class _Modern:
    """A KIP-848 consumer group or a share group being replayed."""

    __slots__ = ("kind", "epoch", "assignment_epoch", "members", "topics", "offset")

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.epoch = 0
        self.assignment_epoch = -1
        self.members: dict[str, Member] = {}
        self.topics: dict[str, str] = {}  # topic id -> name
        self.offset: int | None = None


def _topic_partitions(items) -> list[TopicPartitions]:
    return [TopicPartitions(tp["Topic"], tuple(tp["Partitions"] or ())) for tp in items or ()]


def _classic_member(m: dict, protocol_type: str | None) -> Member:
    rebalance = m.get("rebalanceTimeout", -1)
    member = Member(
        member_id=m["memberId"],
        group_instance_id=m.get("groupInstanceId"),
        client_id=m["clientId"],
        client_host=m["clientHost"],
        session_timeout_ms=m["sessionTimeout"],
        rebalance_timeout_ms=None if rebalance < 0 else rebalance,
    )
    if protocol_type != "consumer":  # (connect, or another protocol: bytes only its clients read)
        return member
    from kafkatool.record.topics.offsets import decode_consumer_protocol as decode

    errors = []
    subscription, assignment = m["subscription"], m["assignment"]
    if subscription:
        data = decode("subscription", subscription)
        if data is None:
            errors.append(f"the subscription is not a consumer-protocol subscription ({len(subscription)} bytes)")
        else:
            member.subscribed_topics = list(data["Topics"] or ())
            member.rack_id = data.get("RackId") or None
    if not assignment:  # a member that joined and has not been assigned yet
        member.assignment = []
    else:
        data = decode("assignment", assignment)
        if data is None:
            errors.append(f"the assignment is not a consumer-protocol assignment ({len(assignment)} bytes)")
        else:
            member.assignment = _topic_partitions(data["AssignedPartitions"])
    member.assignment_error = "; ".join(errors) or None
    return member


class _Replay:
    """The coordinator state of one ``__consumer_offsets`` partition, fed record by record."""

    def __init__(self) -> None:
        # group -> (GroupMetadataValue dict, its record offset); members are decoded once, at the end
        self.classic: dict[str, tuple[dict, int]] = {}
        self.modern: dict[str, _Modern] = {}
        self.deleted: dict[str, int] = {}  # group id -> offset of the tombstone that removed it
        # group -> (topic, partition) -> (record offset, producer id or None, OffsetCommitValue message)
        self.offsets: dict[str, dict[tuple[str, int], tuple]] = {}
        self.pending: dict[int, dict[str, dict[tuple[str, int], tuple]]] = {}  # producer -> group -> (as offsets)

    # -- offsets
    def offset_commit(self, record_offset: int, producer_id: int | None, key: dict, value) -> None:
        group, tp = key["group"], (key["topic"], key["partition"])
        if value is None:
            committed = self.offsets.get(group)
            if committed is not None:
                committed.pop(tp, None)
                if not committed:
                    del self.offsets[group]
            for by_group in self.pending.values():
                pending = by_group.get(group)
                if pending is not None:
                    pending.pop(tp, None)
            return
        # kept as read; the CommittedOffset is built once, for the live entries, at the end
        entry = (record_offset, producer_id, value)
        if producer_id is None:
            self.offsets.setdefault(group, {})[tp] = entry
        else:
            self.pending.setdefault(producer_id, {}).setdefault(group, {})[tp] = entry

    def end_transaction(self, producer_id: int, commit: bool) -> None:
        by_group = self.pending.pop(producer_id, None)
        if by_group is None or not commit:
            return
        for group, entries in by_group.items():
            committed = self.offsets.setdefault(group, {})
            for tp, entry in entries.items():
                existing = committed.get(tp)
                # the most recent commit is kept when transactional and plain ones mix (by record offset)
                if existing is None or entry[0] > existing[0]:
                    committed[tp] = entry
            if not committed:
                del self.offsets[group]

    # -- classic groups
    def group_metadata(self, record_offset: int, group: str, value) -> None:
        self.modern.pop(group, None)
        if value is None:
            self.classic.pop(group, None)
            self.deleted[group] = record_offset
            return
        self.deleted.pop(group, None)
        self.classic[group] = (value.data, record_offset)

    # -- new-protocol groups
    def modern_record(self, record_offset: int, record_type: int, key: dict, value) -> None:
        kind, what = _NEW_TYPES[record_type]
        group_id = key.get("GroupId", "")
        group = self.modern.get(group_id)
        if value is None and group is None:
            return
        if group is None or group.kind != kind:
            self.classic.pop(group_id, None)
            group = self.modern[group_id] = _Modern(kind)
        self.deleted.pop(group_id, None)
        group.offset = record_offset
        if what == "metadata":
            if value is None:
                del self.modern[group_id]
                self.deleted[group_id] = record_offset
            else:
                group.epoch = value.data.get("Epoch", 0)
            return
        if what == "target_epoch":
            group.assignment_epoch = -1 if value is None else value.data.get("AssignmentEpoch", -1)
            return
        if what in ("partitions", "state_partitions"):
            if value is not None:
                key_name = "Topics" if what == "partitions" else "InitializedTopics"
                for t in value.data.get(key_name) or ():
                    if t.get("TopicId") and t.get("TopicName"):
                        group.topics[t["TopicId"]] = t["TopicName"]
                for t in value.data.get("DeletingTopics") or ():
                    if t.get("TopicId") and t.get("TopicName"):
                        group.topics[t["TopicId"]] = t["TopicName"]
            return
        member_id = key.get("MemberId", "")
        member = group.members.get(member_id)
        if what == "member":
            if value is None:
                group.members.pop(member_id, None)
                return
            if member is None:
                member = group.members[member_id] = Member(member_id)
            v = value.data
            member.group_instance_id = v.get("InstanceId") or None
            member.rack_id = v.get("RackId") or None
            member.client_id = v.get("ClientId")
            member.client_host = v.get("ClientHost")
            member.subscribed_topics = list(v.get("SubscribedTopicNames") or ())
            member.subscribed_topic_regex = v.get("SubscribedTopicRegex") or None
            rebalance = v.get("RebalanceTimeoutMs")
            member.rebalance_timeout_ms = None if rebalance is None or rebalance < 0 else rebalance
            member.server_assignor = v.get("ServerAssignor") or None
            classic = v.get("ClassicMemberMetadata")
            if classic and classic.get("SessionTimeoutMs"):
                member.session_timeout_ms = classic["SessionTimeoutMs"]
            return
        if value is None and member is None:
            return
        if member is None:
            member = group.members[member_id] = Member(member_id)
        if what == "target":
            member.target_assignment = None if value is None else _by_id(value.data.get("TopicPartitions"))
            return
        # what == "current"
        if value is None:
            member.member_epoch = member.previous_member_epoch = -1
            member.assignment, member.pending_revocation = [], []
            return
        v = value.data
        member.member_epoch = v.get("MemberEpoch")
        member.previous_member_epoch = v.get("PreviousMemberEpoch")
        state = v.get("State", 0)
        member.member_state = MEMBER_STATES.get(state, f"UNKNOWN({state})")
        member.assignment = _by_id(v.get("AssignedPartitions"))
        if kind == _CONSUMER:
            member.pending_revocation = _by_id(v.get("PartitionsPendingRevocation"))

    # -- the result
    def groups(self, path: str, number: int | None, topic: str | None) -> list[Group]:
        pending_by_group: dict[str, list[CommittedOffset]] = {}
        for by_group in self.pending.values():
            for group, entries in by_group.items():
                if entries:
                    pending_by_group.setdefault(group, []).extend(_committed(tp, e) for tp, e in entries.items())
        ids = set(self.classic) | set(self.modern) | set(self.offsets) | set(pending_by_group) | set(self.deleted)
        out = []
        for gid in sorted(ids):
            offsets = sorted((_committed(tp, e) for tp, e in self.offsets.get(gid, {}).items()),
                             key=lambda o: (o.topic, o.partition))
            pending = sorted(pending_by_group.get(gid, ()), key=lambda o: (o.topic, o.partition, o.record_offset))
            if topic is not None:
                offsets = [o for o in offsets if o.topic == topic]
                pending = [o for o in pending if o.topic == topic]
                if not offsets and not pending:
                    continue
            g = Group(gid, _CLASSIC, "Empty", path, number, offsets=offsets, pending_offsets=pending,
                      deleted_at=self.deleted.get(gid))
            c = self.classic.get(gid)
            m = self.modern.get(gid)
            if c is not None:
                data, g.metadata_offset = c
                g.protocol_type, g.protocol, g.generation = data["protocolType"], data["protocol"], data["generation"]
                g.leader = data["leader"]
                ts = data["currentStateTimestamp"]
                g.current_state_timestamp = None if ts < 0 else ts  # (-1: before value v2)
                g.members = [_classic_member(m, g.protocol_type) for m in data["members"] or ()]
                g.state = "Stable" if g.members else "Empty"  # the coordinator's state on load
            elif m is not None:
                g.group_type, g.epoch, g.assignment_epoch = m.kind, m.epoch, m.assignment_epoch
                g.metadata_offset = m.offset
                g.members = [m.members[k] for k in sorted(m.members)]
                for member in g.members:
                    for attr in ("assignment", "pending_revocation", "target_assignment"):
                        tps = getattr(member, attr)
                        if tps:
                            setattr(member, attr, [tp._replace(topic=m.topics.get(tp.topic_id)) for tp in tps])
                g.state = _modern_state(m)
            elif gid in self.deleted and not offsets and not pending:
                g.state = "Dead"
            else:
                g.protocol_type = ""  # a group that only stores offsets (a "simple" consumer group)
            out.append(g)
        return out


def _committed(tp: tuple[str, int], entry: tuple) -> CommittedOffset:
    """The CommittedOffset of an entry as the replay keeps it: (record offset, producer id, value message)."""
    record_offset, producer_id, value = entry
    v, version = value.data, value.version
    return CommittedOffset(tp[0], tp[1], v["offset"], v["leaderEpoch"], v["metadata"] or "", v["commitTimestamp"],
                           v["expireTimestamp"] if version == 1 else None, version, record_offset, producer_id)


def _by_id(items) -> list[TopicPartitions]:
    return [TopicPartitions(None, tuple(t.get("Partitions") or ()), t.get("TopicId")) for t in items or ()]


def _modern_state(g: _Modern) -> str:
    if not g.members:
        return "Empty"
    if g.kind == _SHARE:
        return "Stable"
    if g.epoch > g.assignment_epoch:
        return "Assigning"
    for member in g.members.values():
        if member.member_state != "STABLE" or member.member_epoch != g.assignment_epoch:
            return "Reconciling"
    return "Stable"


# ----------------------------------------------------------------------------- reading a partition


def replay_partition(partition: Partition, options: GroupsOptions = GroupsOptions(),
                     other_replicas: list[Replica] | None = None) -> PartitionRead:
    """Replay one ``__consumer_offsets`` partition dir: its groups, and what could not be read."""
    # the offsets decoder (``topics.decoder("offsets")``) without the texts a dump prints: same messages and errors
    from kafkatool.record.topics.offsets import decode_offsets_messages as decode
    read = PartitionRead(partition.path, partition.partition, None, other_replicas=list(other_replicas or ()))
    replay = _Replay()
    only = options.group

    def problem(p: Problem) -> None:
        if len(read.problems) < _MAX_LISTED:
            read.problems.append(p)
        else:
            read.problems_not_listed += 1

    def undecodable(u: Undecodable) -> None:
        if len(read.undecodable) < _MAX_LISTED:
            read.undecodable.append(u)
        else:
            read.undecodable_not_listed += 1

    log_end = None
    try:
        segments = partition.segments()
    except KafkaToolError as e:  # the directory cannot be listed
        problem(Problem(partition.path, 0, e.message, "unreadable"))
        segments = []
    read.segments = len(segments)
    for seg in segments:
        path = seg.log_path
        try:
            f = open_log(path)
        except KafkaToolError as e:
            problem(Problem(path, 0, e.message, e.kind or "unreadable"))
            continue
        try:
            size = os.fstat(f.fileno()).st_size
            for item in batches_and_regions(seg, f.fileno(), 0, size, size):
                if isinstance(item, BadRegion):
                    problem(Problem(path, item.start, f"{item.message} ({item.end - item.start} bytes not read)",
                                    item.kind))
                    continue
                batch, data = item
                log_end = batch.next_offset
                read.batches += 1
                if batch.crc != batch.computed_crc:
                    problem(Problem(path, batch.position,
                                    f"the batch's bytes do not match its CRC (stored crc {batch.crc}, computed crc "
                                    f"{batch.computed_crc}; the batch spans {batch.size} bytes): not replayed",
                                    "crc_mismatch"))
                    continue
                if data is None:
                    problem(Problem(path, batch.position,
                                    f"a batch of {batch.size} bytes is too large to decode in memory: not replayed",
                                    "decompressed_too_large"))
                    continue
                try:
                    if batch.is_control:
                        _control(batch, data, replay, read)
                        continue
                    producer = batch.producer_id if batch.is_transactional else None
                    for chunk in batch_record_chunks(batch, data):
                        read.records += len(chunk)
                        for r in chunk:
                            _record(r, producer, decode, replay, only, path, undecodable)
                except KafkaToolError as e:
                    e = e.at(path, batch.position)
                    problem(Problem(path, e.position if e.position is not None else batch.position,
                                    f"{e.message}: the rest of the batch is not replayed", e.kind or "invalid_record"))
        except (KafkaToolError, OSError) as e:  # not the bytes: the file could not be read on
            message = e.message if isinstance(e, KafkaToolError) else f"cannot read the file: {e.strerror or e}"
            problem(Problem(path, getattr(e, "position", None) or 0,
                            f"{message}: the rest of the segment is not replayed", "unreadable"))
        finally:
            f.close()
    if log_end is None and segments:
        log_end = segments[-1].base_offset
    read.log_end_offset = log_end
    read.groups = replay.groups(partition.path, partition.partition, options.topic)
    return read


def _control(batch, data, replay: _Replay, read: PartitionRead) -> None:
    for chunk in batch_record_chunks(batch, data):
        read.records += len(chunk)
        for r in chunk[:1]:  # a marker batch holds one record; the coordinator reads the first
            try:
                _version, kind = decode_control_key(r.key)
            except KafkaToolError:
                return
            if kind in (ControlType.COMMIT, ControlType.ABORT):
                replay.end_transaction(batch.producer_id, kind == ControlType.COMMIT)
        return


def _record(r, producer: int | None, decode, replay: _Replay, only: str | None, path: str, undecodable) -> None:
    d = decode(r.key, r.value, r.offset)
    if d.error is not None or d.key is None:
        undecodable(Undecodable(path, r.offset, d.error or "the key could not be read"))
        return
    key = d.key
    data = key.data
    rt = key.version
    if rt in (0, 1):
        if only is not None and data.get("group") != only:
            return
        replay.offset_commit(r.offset, producer, data, d.value)
    elif rt == 2:
        if only is not None and data.get("group") != only:
            return
        replay.group_metadata(r.offset, data["group"], d.value)
    elif rt in _NEW_TYPES:
        if only is not None and data.get("GroupId") != only:
            return
        replay.modern_record(r.offset, rt, data, d.value)
    else:  # a type the decoder knows and the coordinator does not replay here (none today)
        undecodable(Undecodable(path, r.offset, f"record type {rt} ({key.name}) is not replayed"))


def groups_of(run: GroupsRun, options: GroupsOptions = GroupsOptions(), *, jobs: int = 1) -> Iterator[PartitionRead]:
    """Each chosen partition replayed, in partition order. With ``jobs`` > 1 the partitions are
    replayed in that many processes (each partition is its own coordinator state): the same
    results, in the same order."""
    if jobs <= 1 or len(run.partitions) <= 1:
        for partition, others in run.partitions:
            yield replay_partition(partition, options, others)
        return
    from concurrent.futures import ProcessPoolExecutor

    pool = ProcessPoolExecutor(max_workers=jobs, initializer=_ignore_interrupts)
    try:
        futures = [pool.submit(replay_partition, partition, options, others) for partition, others in run.partitions]
        for f in futures:
            yield f.result()
    finally:
        # on Ctrl-C, or a reader that stopped early: no waiting for partitions nobody will see
        pool.shutdown(wait=False, cancel_futures=True)


def _ignore_interrupts() -> None:
    """A worker ignores Ctrl-C: the parent reports it once (no traceback per worker)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
