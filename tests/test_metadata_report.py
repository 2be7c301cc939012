"""``kafkatool metadata``: the cluster's state replayed from a KRaft ``__cluster_metadata`` log.

The synthetic log is built with kafkatool's encoders (``record.message.encode`` for the bodies,
framed as spec §14.3: uvarint frame version 1, apiKey, version; ``record.v2.encode_batch``;
control records from ``record.control``), with the expected state worked out by hand from the
record list below (Kafka's ``PartitionRegistration.merge`` / ``ClusterDelta`` rules). Some
records are hand-written hex, independent of the encoder. The real KRaft logs of
fixtures-real are checked against facts read off kafka-dump-log-style dumps of the raw log
(topic ids from TOPIC_RECORDs, leader epochs by counting PARTITION_CHANGE_RECORDs).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from kafkatool.cli.metadata import metadata as metadata_command
from kafkatool.metadata import MetadataOptions, replay
from kafkatool.record import message
from kafkatool.record.control import ControlType, encode_control_key, encode_kraft_version, encode_leader_change, \
    encode_snapshot_footer, encode_snapshot_header, encode_voters
from kafkatool.record.v2 import RecordSpec, encode_batch
from kafkatool.record.varint import encode_uvarint
from kafkatool.render.metadata import objects

from conftest import real_fixture

API = {name: m["apiKey"] for name, m in __import__("kafkatool.record.schemas", fromlist=["MESSAGES"]).MESSAGES.items()
       if m["category"] == "metadata"}

ORDERS = "b3JkZXJzLXRvcGljLWlkAQ"  # 16 bytes, base64url: b"orders-topic-id\x01"
DOOMED = "ZG9vbWVkLXRvcGljLWlkAQ"
TXN = "dHhuLXRvcGljLWlkLWlkAQ"
ABORTED = "YWJvcnRlZC10b3BpYy1pZA"
PENDING = "cGVuZGluZy10b3BpYy1pZA"
HEXTOPIC = "aGV4LXRvcGljLWlkLWlkAQ"
INCARNATIONS = {1: "aW5jYXJuYXRpb24tMDAwMQ", 2: "aW5jYXJuYXRpb24tMDAwMg", 3: "aW5jYXJuYXRpb24tMDAwMw"}  # b"incarnation-000N"


def frame(name: str, data: dict, version: int = 0) -> bytes:
    """A metadata record value (§14.3): uvarint frame version 1, apiKey, version, then the body."""
    return encode_uvarint(1) + encode_uvarint(API[name]) + encode_uvarint(version) + message.encode(name, data, version)


def endpoint(host: str, port: int) -> dict:
    return {"Name": "PLAINTEXT", "Host": host, "Port": port, "SecurityProtocol": 0}


class MetaLog:
    """Batches of a metadata log (offsets from 0), written as segments; and snapshot files."""

    def __init__(self, epoch: int = 7) -> None:
        self.offset = 0
        self.epoch = epoch
        self.segments: list[tuple[int, list[bytes]]] = [(0, [])]
        self.positions: dict[int, tuple[int, int]] = {}  # first offset of a batch -> (segment index, byte position)

    def _append(self, blob: bytes, first: int) -> None:
        seg = self.segments[-1][1]
        self.positions[first] = (len(self.segments) - 1, sum(len(b) for b in seg))
        seg.append(blob)

    def batch(self, *values: bytes) -> int:
        first = self.offset
        recs = [RecordSpec(first + i, 1_700_000_000_000 + first + i, None, v) for i, v in enumerate(values)]
        self._append(encode_batch(recs, partition_leader_epoch=self.epoch), first)
        self.offset += len(values)
        return first

    def rec(self, name: str, data: dict, version: int = 0) -> int:
        return self.batch(frame(name, data, version))

    def control(self, type_id: int, value: bytes) -> int:
        first = self.offset
        spec = RecordSpec(first, 1_700_000_000_000 + first, encode_control_key(type_id), value)
        self._append(encode_batch([spec], is_control=True, partition_leader_epoch=self.epoch), first)
        self.offset += 1
        return first

    def roll(self) -> None:
        self.segments.append((self.offset, []))

    def write(self, part: Path) -> list[Path]:
        part.mkdir(parents=True, exist_ok=True)
        out = []
        for base, blobs in self.segments:
            p = part / f"{base:020d}.log"
            p.write_bytes(b"".join(blobs))
            out.append(p)
        return out


VOTERS = [{"voterId": 1, "voterDirectoryId": b"voter-dir-000001",
           "endpoints": [{"name": "CONTROLLER", "host": "c1", "port": 9093}]}]


def snapshot_bytes(values: list[bytes], *, footer: bool = True, epoch: int = 7, voters: bool = False) -> bytes:
    """A KRaft snapshot: a SNAPSHOT_HEADER control batch (with KRAFT_VERSION and KRAFT_VOTERS records
    when ``voters``), one data batch, a SNAPSHOT_FOOTER control batch."""
    ts = 1_700_000_000_000
    head = [RecordSpec(0, ts, encode_control_key(ControlType.SNAPSHOT_HEADER), encode_snapshot_header(ts))]
    if voters:
        head += [RecordSpec(1, ts, encode_control_key(ControlType.KRAFT_VERSION), encode_kraft_version(1)),
                 RecordSpec(2, ts, encode_control_key(ControlType.KRAFT_VOTERS), encode_voters(VOTERS))]
    out = encode_batch(head, is_control=True, partition_leader_epoch=epoch)
    out += encode_batch([RecordSpec(i + 1, ts, None, v) for i, v in enumerate(values)], partition_leader_epoch=epoch)
    if footer:
        n = len(values) + 1
        out += encode_batch([RecordSpec(n, ts, encode_control_key(ControlType.SNAPSHOT_FOOTER), encode_snapshot_footer())],
                            is_control=True, partition_leader_epoch=epoch)
    return out


def broker(broker_id: int, epoch: int, host: str, *, rack: str | None = None, fenced: bool = True) -> bytes:
    return frame("RegisterBrokerRecord", {
        "BrokerId": broker_id, "IncarnationId": INCARNATIONS[broker_id], "BrokerEpoch": epoch,
        "EndPoints": [endpoint(host, 9092)], "Features": [{"Name": "metadata.version", "MinSupportedVersion": 1,
                                                           "MaxSupportedVersion": 19}],
        "Rack": rack, "Fenced": fenced}, 1)


def partition(topic_id: str, pid: int, replicas: list[int], leader: int, *, leader_epoch: int = 0,
              partition_epoch: int = 0, isr: list[int] | None = None) -> bytes:
    return frame("PartitionRecord", {"PartitionId": pid, "TopicId": topic_id, "Replicas": replicas,
                                     "Isr": replicas if isr is None else isr, "RemovingReplicas": [],
                                     "AddingReplicas": [], "Leader": leader, "LeaderEpoch": leader_epoch,
                                     "PartitionEpoch": partition_epoch})


# TopicRecord v0 {Name "hexed", TopicId HEXTOPIC}, written out by hand (§14.3 framing, flexible v0):
# 01 frame version, 02 apiKey TopicRecord, 00 version, 06 "hexed" (compact string: length + 1),
# 16 uuid bytes (b"hex-topic-id-id\x01"), 00 no tagged fields
HEX_TOPIC_RECORD = bytes.fromhex("010200" "06" "6865786564" "6865782d746f7069632d69642d696401" "00")
# PartitionRecord v0 for hexed-0: PartitionId 0, TopicId, Replicas [3], Isr [3], Removing [], Adding [],
# Leader 3, LeaderEpoch 0, PartitionEpoch 0, no tags (LeaderRecoveryState tag absent: 0)
HEX_PARTITION_RECORD = bytes.fromhex(
    "010300" "00000000" "6865782d746f7069632d69642d696401" "02" "00000003" "02" "00000003" "01" "01"
    "00000003" "00000000" "00000000" "00")
# PartitionChangeRecord v0 for hexed-0: tagged Isr (tag 0) [3] and Leader (tag 1) -1
HEX_PARTITION_CHANGE = bytes.fromhex(
    "010500" "00000000" "6865782d746f7069632d69642d696401" "02" "00" "05" "02" "00000003" "01" "04" "ffffffff")


def build_log() -> MetaLog:
    """The scenario; offsets in the comments (each ``rec`` is one batch unless noted)."""
    m = MetaLog(epoch=7)
    m.control(ControlType.LEADER_CHANGE, encode_leader_change(3000, [3000]))                       # 0
    m.rec("FeatureLevelRecord", {"Name": "metadata.version", "FeatureLevel": 19})                  # 1
    m.batch(broker(1, 2, "a", rack="r1"), broker(2, 3, "b"), broker(3, 4, "c"))                     # 2, 3, 4
    m.rec("UnfenceBrokerRecord", {"Id": 1, "Epoch": 2})                                            # 5
    m.rec("UnfenceBrokerRecord", {"Id": 2, "Epoch": 3})                                            # 6
    m.rec("BrokerRegistrationChangeRecord", {"BrokerId": 3, "BrokerEpoch": 4, "Fenced": -1}, 1)    # 7
    m.batch(frame("TopicRecord", {"Name": "orders", "TopicId": ORDERS}),                           # 8
            partition(ORDERS, 0, [1, 2, 3], 1),                                                    # 9
            partition(ORDERS, 1, [2, 3, 1], 2),                                                    # 10
            frame("ConfigRecord", {"ResourceType": 2, "ResourceName": "orders", "Name": "retention.ms",
                                   "Value": "1000"}))                                              # 11
    m.rec("ConfigRecord", {"ResourceType": 2, "ResourceName": "orders", "Name": "cleanup.policy",
                           "Value": "compact"})                                                    # 12
    m.batch(frame("PartitionChangeRecord", {"PartitionId": 0, "TopicId": ORDERS, "Isr": [1, 2]}),  # 13
            frame("PartitionChangeRecord", {"PartitionId": 0, "TopicId": ORDERS, "Leader": 2,
                                            "Isr": [2]}))                                          # 14
    m.rec("ConfigRecord", {"ResourceType": 2, "ResourceName": "orders", "Name": "retention.ms",
                           "Value": None})                                                         # 15
    m.rec("FenceBrokerRecord", {"Id": 1, "Epoch": 2})                                              # 16
    m.rec("BrokerRegistrationChangeRecord", {"BrokerId": 2, "BrokerEpoch": 3, "InControlledShutdown": 1}, 1)  # 17
    m.roll()  # a second segment from offset 18
    m.rec("TopicRecord", {"Name": "doomed", "TopicId": DOOMED})                                    # 18
    m.batch(partition(DOOMED, 0, [1], 1))                                                          # 19
    m.rec("ConfigRecord", {"ResourceType": 2, "ResourceName": "doomed", "Name": "x", "Value": "y"})  # 20
    m.rec("RemoveTopicRecord", {"TopicId": DOOMED})                                                # 21
    m.rec("BeginTransactionRecord", {"Name": "t1"})                                                # 22
    m.rec("TopicRecord", {"Name": "txn-topic", "TopicId": TXN})                                    # 23
    m.batch(partition(TXN, 0, [1, 2], 1))                                                          # 24
    m.rec("EndTransactionRecord", {})                                                              # 25
    m.rec("BeginTransactionRecord", {"Name": "t2"})                                                # 26
    m.rec("TopicRecord", {"Name": "aborted-topic", "TopicId": ABORTED})                            # 27
    m.rec("AbortTransactionRecord", {"Reason": "test"})                                            # 28
    m.rec("UnregisterBrokerRecord", {"BrokerId": 3, "BrokerEpoch": 4})                             # 29
    m.rec("ClientQuotaRecord", {"Entity": [{"EntityType": "user", "EntityName": "alice"}],
                                "Key": "producer_byte_rate", "Value": 1024.0, "Remove": False})     # 30
    m.rec("UserScramCredentialRecord", {"Name": "alice", "Mechanism": 1, "Salt": b"SALTSECRET",
                                        "StoredKey": b"STOREDSECRET", "ServerKey": b"SERVERSECRET",
                                        "Iterations": 8192})                                       # 31
    m.rec("AccessControlEntryRecord", {"Id": "YWNsLWlkLWlkLWlkLWlkAQ", "ResourceType": 2, "ResourceName": "orders",
                                       "PatternType": 3, "Principal": "User:alice", "Host": "*",
                                       "Operation": 3, "PermissionType": 3})                       # 32
    m.rec("ProducerIdsRecord", {"BrokerId": 1, "BrokerEpoch": 2, "NextProducerId": 5000})          # 33
    m.rec("NoOpRecord", {})                                                                        # 34
    m.rec("ConfigRecord", {"ResourceType": 4, "ResourceName": "", "Name": "log.retention.ms",
                           "Value": "60000"})                                                      # 35
    m.batch(HEX_TOPIC_RECORD, HEX_PARTITION_RECORD, HEX_PARTITION_CHANGE)                          # 36, 37, 38
    m.rec("BeginTransactionRecord", {"Name": "open"})                                              # 39
    m.rec("TopicRecord", {"Name": "pending-topic", "TopicId": PENDING})                            # 40
    return m


@pytest.fixture
def logdir(tmp_path: Path) -> Path:
    root = tmp_path / "meta"
    build_log().write(root / "__cluster_metadata-0")
    (root / "meta.properties").write_text("node.id=3000\nversion=1\ncluster.id=Q2x1c3Rlci1JZC0xMjM0NQ\n")
    return root


def by_type(report, **kw) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for o in objects(report, **kw):
        out.setdefault(o["type"], []).append(o)
    return out


def parts(report) -> dict[tuple[str, int], dict]:
    return {(o["topic"], o["partition"]): o for o in by_type(report).get("partition", [])}


# ----------------------------------------------------------------------------- the scenario


def test_full_replay_known_answers(logdir: Path) -> None:
    r = replay(str(logdir))
    assert r.problems == []
    assert r.snapshot is None
    assert (r.last_offset, r.last_epoch, r.log_end_offset) == (40, 7, 41)
    assert r.control_records == 1 and r.records == 40
    assert (r.transactions_committed, r.transactions_aborted) == (1, 1)
    assert r.open_transaction == {"name": "open", "offset": 39, "records": 1}
    s = r.state
    assert s.features == {"metadata.version": 19}
    assert (s.leader_id, s.leader_epoch, s.leader_voters) == (3000, 7, [3000])
    # brokers: 1 registered, unfenced, fenced again; 2 unfenced then in controlled shutdown; 3 unregistered
    assert sorted(s.brokers) == [1, 2]
    b1, b2 = s.brokers[1], s.brokers[2]
    assert (b1.fenced, b1.in_controlled_shutdown, b1.epoch, b1.rack, b1.offset) == (True, False, 2, "r1", 2)
    assert (b2.fenced, b2.in_controlled_shutdown, b2.epoch, b2.rack, b2.offset) == (False, True, 3, None, 3)
    assert b1.endpoints == [{"name": "PLAINTEXT", "host": "a", "port": 9092, "securityProtocol": "PLAINTEXT"}]
    # topics: doomed deleted (its config too), the committed transaction's topic there, the aborted
    # and the open transactions' topics not
    assert sorted(t.name for t in s.topics.values()) == ["hexed", "orders", "txn-topic"]
    assert s.configs == {(2, "orders"): {"cleanup.policy": "compact"}, (4, ""): {"log.retention.ms": "60000"}}
    p = parts(r)
    # orders-0: PartitionRecord leader 1 epochs 0/0; change 13 (Isr only: no leader change) -> leader
    # epoch 0, partition epoch 1; change 14 (Leader 2) -> leader epoch 1, partition epoch 2
    assert {k: p[("orders", 0)][k] for k in ("leader", "leaderEpoch", "partitionEpoch", "replicas", "isr")} == \
        {"leader": 2, "leaderEpoch": 1, "partitionEpoch": 2, "replicas": [1, 2, 3], "isr": [2]}
    assert (p[("orders", 1)]["leader"], p[("orders", 1)]["leaderEpoch"], p[("orders", 1)]["partitionEpoch"]) == (2, 0, 0)
    # the hand-written hex records: hexed-0 replicas [3], leader 3 then -1 (epoch bump), ISR [3]
    h = p[("hexed", 0)]
    assert (h["leader"], h["leaderEpoch"], h["partitionEpoch"], h["replicas"], h["isr"]) == (-1, 1, 1, [3], [3])
    assert s.quotas == {(("user", "alice"),): {"producer_byte_rate": 1024.0}}
    assert s.scram == {("alice", 1): 8192}
    assert s.producer_ids == {"brokerId": 1, "brokerEpoch": 2, "nextProducerId": 5000}
    assert list(s.acls.values())[0]["operation"] == "READ"


def test_cli_jsonl_and_no_secrets(logdir: Path) -> None:
    res = CliRunner().invoke(metadata_command, ["--format", "jsonl", str(logdir)])
    assert res.exit_code == 0, res.output
    lines = [json.loads(line) for line in res.stdout.splitlines()]
    types = [o["type"] for o in lines]
    assert types[:2] == ["replay", "cluster"]
    assert {"broker", "topic", "partition", "config", "quota", "acl", "scramUser", "producerIds"} <= set(types)
    scram = [o for o in lines if o["type"] == "scramUser"]
    assert scram == [{"type": "scramUser", "name": "alice", "mechanism": "SCRAM-SHA-256", "iterations": 8192}]
    for secret in ("SALTSECRET", "STOREDSECRET", "SERVERSECRET", "U0FMVFNFQ1JFVA"):  # and its base64
        assert secret not in res.stdout
    cluster = lines[1]
    assert (cluster["clusterId"], cluster["nodeId"], cluster["metadataVersion"], cluster["metadataVersionName"]) == \
        ("Q2x1c3Rlci1JZC0xMjM0NQ", 3000, 19, "3.7-IV4")
    replay_obj = lines[0]
    assert replay_obj["openTransaction"] == {"name": "open", "offset": 39, "records": 1}
    assert any("high watermark is unknown" in n for n in replay_obj["notes"])
    # the table too: every section titled, the open transaction said
    res = CliRunner().invoke(metadata_command, [str(logdir)])
    assert res.exit_code == 0
    for title in ("Cluster", "Brokers (2)", "Topics (3)", "Partitions (4)", "Configs (2)", "Client quotas (1)",
                  "ACLs (1)", "SCRAM users (1)", "Producer ids (1)"):
        assert title in res.stdout, title
    assert "open transaction: 'open' begun at offset 39" in res.stdout
    partitions_table = res.stdout[res.stdout.index("Partitions (4)"):res.stdout.index("Configs (2)")]
    assert "┃ isr   ┃" in partitions_table and "directories" not in partitions_table  # none assigned: left out
    assert "│ orders    │ 0         │ 2      │ 1            │ 2               │ 1,2,3    │ 2     │" in partitions_table
    assert "SALTSECRET" not in res.stdout


def test_topic_and_section_filters(logdir: Path) -> None:
    r = replay(str(logdir))
    got = by_type(r, topic="orders")
    assert [o["name"] for o in got["topic"]] == ["orders"]
    assert sorted(o["partition"] for o in got["partition"]) == [0, 1]
    assert [o["resourceName"] for o in got["config"]] == ["orders"]
    assert "quota" not in got and "acl" not in got
    got = by_type(r, sections=["brokers"])
    assert set(got) == {"broker"}
    res = CliRunner().invoke(metadata_command, ["--topic", "nope", str(logdir)])
    assert res.exit_code == 1 and "no topic named 'nope'" in res.stderr


@pytest.mark.parametrize("at, leader, leader_epoch, isr, pending", [
    (14, 1, 0, [1, 2], None),      # offset 14 excluded: only the ISR shrink of 13 applied (inside a batch)
    (15, 2, 1, [2], None),          # 14 included
    (40, 2, 1, [2], {"name": "open", "offset": 39, "records": 0}),  # the open transaction's Begin only
])
def test_at_offset_boundaries(logdir: Path, at, leader, leader_epoch, isr, pending) -> None:
    r = replay(str(logdir), MetadataOptions(at_offset=at))
    p = parts(r)[("orders", 0)]
    assert (p["leader"], p["leaderEpoch"], p["isr"]) == (leader, leader_epoch, isr)
    assert r.last_offset == at - 1
    assert r.open_transaction == pending


def test_at_offset_before_a_transaction_end_leaves_it_unapplied(logdir: Path) -> None:
    r = replay(str(logdir), MetadataOptions(at_offset=25))  # the End of t1 is at 25
    assert "txn-topic" not in {t.name for t in r.state.topics.values()}
    assert r.open_transaction == {"name": "t1", "offset": 22, "records": 2}
    r = replay(str(logdir), MetadataOptions(at_offset=26))
    assert "txn-topic" in {t.name for t in r.state.topics.values()}


# ----------------------------------------------------------------------------- snapshots


def snapshot_at_18() -> bytes:
    """The state of the scenario after offsets 0..17 as Kafka's image would write it, plus one
    config the log does not hold (so that its use is visible)."""
    return snapshot_bytes([
        frame("FeatureLevelRecord", {"Name": "metadata.version", "FeatureLevel": 19}),
        broker(1, 2, "a", rack="r1"), broker(2, 3, "b", fenced=False), broker(3, 4, "c", fenced=False),
        frame("TopicRecord", {"Name": "orders", "TopicId": ORDERS}),
        partition(ORDERS, 0, [1, 2, 3], 2, leader_epoch=1, partition_epoch=2, isr=[2]),
        partition(ORDERS, 1, [2, 3, 1], 2),
        frame("ConfigRecord", {"ResourceType": 2, "ResourceName": "orders", "Name": "cleanup.policy",
                               "Value": "compact"}),
        frame("ConfigRecord", {"ResourceType": 2, "ResourceName": "orders", "Name": "from-snapshot", "Value": "1"}),
    ], voters=True)


def test_snapshot_then_log_applies_nothing_twice(logdir: Path) -> None:
    part = logdir / "__cluster_metadata-0"
    (part / f"{18:020d}-{7:010d}.checkpoint").write_bytes(snapshot_at_18())
    r = replay(str(logdir))
    assert r.problems == [] and r.snapshot is not None and r.snapshot.end_offset == 18
    assert r.records == 23  # offsets 18..40 from the log
    p = parts(r)[("orders", 0)]
    # re-applying the log's changes 13 and 14 would give leader epoch 2 and partition epoch 4
    assert (p["leader"], p["leaderEpoch"], p["partitionEpoch"]) == (2, 1, 2)
    assert r.state.configs[(2, "orders")] == {"cleanup.policy": "compact", "from-snapshot": "1"}
    assert sorted(r.state.brokers) == [1, 2]  # 3 unregistered at 29
    # registrations from a snapshot have no offset
    assert r.state.brokers[1].offset == -1
    # the quorum from the snapshot's KRAFT_VERSION and KRAFT_VOTERS records
    assert r.state.kraft_version == 1
    assert [(v["voterId"], v["voterDirectoryId"], v["endpoints"][0]["host"]) for v in r.state.voters] == \
        [(1, "dm90ZXItZGlyLTAwMDAwMQ", "c1")]


@pytest.mark.parametrize("damage", ["no_footer", "bad_crc", "no_header"])
def test_invalid_newest_snapshot_falls_back(logdir: Path, damage: str) -> None:
    part = logdir / "__cluster_metadata-0"
    (part / f"{18:020d}-{7:010d}.checkpoint").write_bytes(snapshot_at_18())
    newer = snapshot_bytes([frame("TopicRecord", {"Name": "ghost", "TopicId": PENDING})], footer=damage != "no_footer")
    if damage == "bad_crc":
        newer = bytearray(newer)
        newer[len(newer) // 2] ^= 0x01
        newer = bytes(newer)
    if damage == "no_header":  # a data batch first
        newer = encode_batch([RecordSpec(0, 1, None, frame("NoOpRecord", {}))]) + newer
    (part / f"{30:020d}-{7:010d}.checkpoint").write_bytes(newer)
    r = replay(str(logdir))
    assert r.snapshot is not None and r.snapshot.end_offset == 18
    assert [s.end_offset for s in r.skipped_snapshots] == [30]
    reason = r.skipped_snapshots[0].reason
    assert {"no_footer": "SNAPSHOT_FOOTER", "bad_crc": "crc_mismatch", "no_header": "SNAPSHOT_HEADER"}[damage] in reason
    assert "ghost" not in {t.name for t in r.state.topics.values()}
    res = CliRunner().invoke(metadata_command, [str(logdir)])
    assert res.exit_code == 1  # a skipped snapshot is a finding
    assert "not a valid snapshot" in res.stdout


def test_at_offset_picks_the_snapshot_at_or_below(logdir: Path) -> None:
    part = logdir / "__cluster_metadata-0"
    (part / f"{18:020d}-{7:010d}.checkpoint").write_bytes(snapshot_at_18())
    assert replay(str(logdir), MetadataOptions(at_offset=18)).snapshot.end_offset == 18
    r = replay(str(logdir), MetadataOptions(at_offset=17))
    assert r.snapshot is None and r.last_offset == 16


def test_log_start_gap_without_snapshot(tmp_path: Path) -> None:
    m = build_log()
    m.segments = m.segments[1:]  # only the segment from offset 18: nothing covers 0..17
    root = tmp_path / "gap"
    m.write(root / "__cluster_metadata-0")
    r = replay(str(root))
    # (and the UnregisterBrokerRecord of broker 3 at 29 names a broker the missing records registered)
    assert [p.kind for p in r.problems] == ["log_gap", "unknown_broker"]
    assert "starts at offset 18" in r.problems[0].message
    r = replay(str(root), MetadataOptions(at_offset=10))  # stops before any batch: still said
    assert [p.kind for p in r.problems] == ["log_gap"] and r.last_offset is None


# ----------------------------------------------------------------------------- damage


def test_crc_damage_stops_the_replay(logdir: Path) -> None:
    m = build_log()
    seg_index, pos = m.positions[29]  # the UnregisterBrokerRecord batch
    assert seg_index == 1
    path = logdir / "__cluster_metadata-0" / f"{18:020d}.log"
    data = bytearray(path.read_bytes())
    data[pos + 70] ^= 0xFF  # a byte of its record
    path.write_bytes(bytes(data))
    r = replay(str(logdir))
    assert r.stopped_at is not None and r.stopped_at.kind == "crc_mismatch"
    assert (r.stopped_at.file, r.stopped_at.position) == (str(path), pos)
    assert r.last_offset == 28
    assert 3 in r.state.brokers  # the unregistration was in the bad batch
    res = CliRunner().invoke(metadata_command, [str(logdir)])
    assert res.exit_code == 1
    assert f"{path}:{pos}" in res.stdout and "Kafka's recovery truncates" in res.stdout


def test_framing_damage_is_located_in_verify_words(logdir: Path) -> None:
    m = build_log()
    _seg, pos = m.positions[20]
    path = logdir / "__cluster_metadata-0" / f"{18:020d}.log"
    data = bytearray(path.read_bytes())
    data[pos + 8: pos + 12] = (5).to_bytes(4, "big")  # a size below the smallest batch
    path.write_bytes(bytes(data))
    r = replay(str(logdir))
    assert r.stopped_at is not None and r.stopped_at.position == pos
    assert r.stopped_at.kind in ("invalid_size", "partial_batch")
    assert r.last_offset == 19


def test_records_that_do_not_decode_stop_the_replay(tmp_path: Path) -> None:
    """A batch whose CRC holds but whose records section does not frame (its header counts two
    records, it holds one): Kafka's recovery stops there too."""
    from kafkatool.record.encode import v2_batch
    from kafkatool.record.v2 import encode_record

    m = MetaLog()
    m.rec("TopicRecord", {"Name": "a", "TopicId": ORDERS})
    body = encode_record(0, 0, None, frame("TopicRecord", {"Name": "b", "TopicId": DOOMED}))
    bad = v2_batch(body, base_offset=1, last_offset_delta=1, base_timestamp=1, max_timestamp=1, attributes=0,
                   producer_id=-1, producer_epoch=-1, base_sequence=-1, partition_leader_epoch=7, count=2)
    first_len = len(m.segments[0][1][0])
    m.segments[0][1].append(bad)
    m.offset = 3
    m.rec("TopicRecord", {"Name": "c", "TopicId": TXN})
    root = tmp_path / "badrecords"
    (seg,) = m.write(root / "__cluster_metadata-0")
    r = replay(str(root))
    assert r.stopped_at is not None
    assert (r.stopped_at.kind, r.stopped_at.file, r.stopped_at.position) == ("bad_records", str(seg), first_len)
    assert "c" not in {t.name for t in r.state.topics.values()}


def test_undecodable_record_is_reported_and_skipped(tmp_path: Path) -> None:
    m = MetaLog()
    m.rec("TopicRecord", {"Name": "a", "TopicId": ORDERS})
    m.batch(bytes.fromhex("01ff0100"))  # apiKey 255 (uvarint ff 01): unknown
    m.rec("TopicRecord", {"Name": "b", "TopicId": DOOMED})
    root = tmp_path / "u"
    m.write(root / "__cluster_metadata-0")
    r = replay(str(root))
    assert [p.kind for p in r.problems] == ["undecodable"]
    assert r.problems[0].offset == 1 and "Unknown metadata id 255" in r.problems[0].message
    assert sorted(t.name for t in r.state.topics.values()) == ["a", "b"]


def test_broker_records_for_another_epoch_are_ignored(tmp_path: Path) -> None:
    m = MetaLog()
    m.batch(broker(1, 10, "a"))                                                          # 0
    m.rec("UnfenceBrokerRecord", {"Id": 1, "Epoch": 9})     # an older registration's epoch  1
    m.rec("UnfenceBrokerRecord", {"Id": 7, "Epoch": 10})    # no such broker                  2
    m.rec("UnfenceBrokerRecord", {"Id": 1, "Epoch": 10})                                 # 3
    m.rec("BrokerRegistrationChangeRecord", {"BrokerId": 1, "BrokerEpoch": 10, "InControlledShutdown": 1}, 1)  # 4
    m.rec("FenceBrokerRecord", {"Id": 1, "Epoch": 10})      # fences; the shutdown flag stays 5
    m.rec("UnregisterBrokerRecord", {"BrokerId": 1, "BrokerEpoch": 11})  # removed whatever the epoch (the image)  6
    m.rec("UnregisterBrokerRecord", {"BrokerId": 1, "BrokerEpoch": 10})                  # 7
    root = tmp_path / "epochs"
    m.write(root / "__cluster_metadata-0")
    r = replay(str(root), MetadataOptions(at_offset=3))
    assert [(p.kind, p.offset) for p in r.problems] == [("broker_epoch", 1), ("unknown_broker", 2)]
    assert r.state.brokers[1].fenced is True
    r = replay(str(root), MetadataOptions(at_offset=6))
    assert (r.state.brokers[1].fenced, r.state.brokers[1].in_controlled_shutdown) == (True, True)
    r = replay(str(root))
    assert [(p.kind, p.offset) for p in r.problems] == [("broker_epoch", 1), ("unknown_broker", 2), ("unknown_broker", 7)]
    assert r.state.brokers == {}


def test_partition_directories_elr_and_recovery_state(tmp_path: Path) -> None:
    d1, d2, d3 = "ZGlyZWN0b3J5LW9uZS0wMQ", "ZGlyZWN0b3J5LXR3by0wMg", "ZGlyZWN0b3J5LTMtMDAwMw"  # b"directory-one-01"...
    m = MetaLog()
    m.rec("TopicRecord", {"Name": "t", "TopicId": ORDERS})
    m.rec("PartitionRecord", {"PartitionId": 0, "TopicId": ORDERS, "Replicas": [1, 2, 3], "Isr": [1, 2, 3],
                              "RemovingReplicas": [], "AddingReplicas": [], "Leader": 1, "LeaderEpoch": 4,
                              "PartitionEpoch": 9, "Directories": [d1, d2, d3]}, 1)
    # replicas 1,2,3 -> 3,1,4 without directories: 3 and 1 keep theirs, 4 is UNASSIGNED (createDirectoriesFrom)
    m.rec("PartitionChangeRecord", {"PartitionId": 0, "TopicId": ORDERS, "Replicas": [3, 1, 4],
                                    "AddingReplicas": [4], "RemovingReplicas": [2]}, 1)
    # ELR and a leader recovery state (v2); no Leader field: the leader epoch stays
    m.rec("PartitionChangeRecord", {"PartitionId": 0, "TopicId": ORDERS, "Isr": [1],
                                    "EligibleLeaderReplicas": [3], "LastKnownElr": [4], "LeaderRecoveryState": 1}, 2)
    root = tmp_path / "dirs"
    m.write(root / "__cluster_metadata-0")
    r = replay(str(root))
    assert r.problems == []
    p = parts(r)[("t", 0)]
    assert (p["replicas"], p["directories"]) == ([3, 1, 4], [d3, d1, "UNASSIGNED"])
    assert (p["addingReplicas"], p["removingReplicas"]) == ([4], [2])
    assert (p["isr"], p["eligibleLeaderReplicas"], p["lastKnownElr"]) == ([1], [3], [4])
    assert (p["leader"], p["leaderEpoch"], p["partitionEpoch"], p["leaderRecoveryState"]) == (1, 4, 11, "RECOVERING")
    table = CliRunner().invoke(metadata_command, ["--section", "partitions", str(root)]).stdout
    assert "UNASSIGNED" in table and "3 / 4" in table and "+4 / -2" in table and "RECOVERING" in table


def test_hostile_record_values_never_crash(tmp_path: Path) -> None:
    """Every record value of the scenario cut short at each byte, and with each byte flipped,
    in a batch whose CRC is right: reported or applied, never an exception."""
    values = _values(build_log())
    assert len(values) == 40
    cases = []
    for v in values:
        cases += [v[:i] for i in range(len(v))]
        cases += [v[:i] + bytes([v[i] ^ 0xFF]) + v[i + 1:] for i in range(len(v))]
    m = MetaLog()
    m.batch(*values[:12])  # some state for the mutants to act on
    for i in range(0, len(cases), 200):
        m.batch(*cases[i:i + 200])
    root = tmp_path / "hostile"
    m.write(root / "__cluster_metadata-0")
    r = replay(str(root))
    assert r.stopped_at is None
    assert r.records == 12 + len(cases)
    assert any(p.kind == "undecodable" for p in r.problems)
    for o in objects(r):
        json.loads(json.dumps(o, allow_nan=False))
    assert CliRunner().invoke(metadata_command, [str(root)]).exit_code == 1


def _values(m: MetaLog) -> list[bytes]:
    """The values of the data records of ``m``, read back through the log-dir model."""
    import tempfile

    from kafkatool.segment.logdir import Partition

    with tempfile.TemporaryDirectory() as d:
        m.write(Path(d) / "__cluster_metadata-0")
        return [r.value for r in Partition(Path(d) / "__cluster_metadata-0").records()]


def test_table_cells_are_escaped(tmp_path: Path) -> None:
    m = MetaLog()
    m.rec("TopicRecord", {"Name": "evil\x1b[31m\nname", "TopicId": ORDERS})
    root = tmp_path / "evil"
    m.write(root / "__cluster_metadata-0")
    out = CliRunner().invoke(metadata_command, [str(root)]).stdout
    assert "\x1b" not in out and "evil\\x1b[31m\\nname" in out
    line = next(json.loads(x) for x in CliRunner().invoke(metadata_command, ["--format", "jsonl", str(root)]).stdout
                .splitlines() if '"topic"' in x)
    assert line["name"] == "evil\x1b[31m\nname"


def test_empty_log_shows_the_bootstrap(tmp_path: Path) -> None:
    root = tmp_path / "fresh"
    (root / "__cluster_metadata-0").mkdir(parents=True)
    boot = snapshot_bytes([frame("FeatureLevelRecord", {"Name": "metadata.version", "FeatureLevel": 21})])
    (root / "bootstrap.checkpoint").write_bytes(boot)
    r = replay(str(root))
    assert r.problems == [] and r.state.features == {}  # shown, never applied
    assert r.bootstrap == {"file": str(root / "bootstrap.checkpoint"), "features": {"metadata.version": 21},
                           "records": 1}
    assert any("the metadata log is empty" in n for n in r.notes)
    out = CliRunner().invoke(metadata_command, [str(root)]).stdout
    assert "none yet: the first active controller writes 21 (3.9-IV0) from bootstrap.checkpoint" in out


def test_not_a_metadata_log_dir_is_usage_error(tmp_path: Path) -> None:
    res = CliRunner().invoke(metadata_command, [str(tmp_path)])
    assert res.exit_code == 2 and "no __cluster_metadata-0" in res.stderr


def test_partition_dir_itself_is_accepted(logdir: Path) -> None:
    r = replay(str(logdir / "__cluster_metadata-0"))
    assert r.node_id == 3000 and r.last_offset == 40


# ----------------------------------------------------------------------------- the man page


def test_man_page_names_every_jsonl_type_and_field(logdir: Path) -> None:
    part = logdir / "__cluster_metadata-0"
    (part / f"{18:020d}-{7:010d}.checkpoint").write_bytes(snapshot_at_18())
    (part / f"{30:020d}-{7:010d}.checkpoint").write_bytes(b"junk")
    page = (Path(__file__).parent.parent / "kafkatool" / "cli" / "manpages" / "kafkatool-metadata.1.rst").read_text()
    schema = page[page.index("JSON LINES SCHEMA"):]
    seen: set[tuple[str, str]] = set()
    for o in objects(replay(str(logdir))):
        for k in o:
            seen.add((o["type"], k))
    for t, k in sorted(seen):
        assert f"``{t}``" in schema, t
        assert f"``{k}``" in schema, (t, k)


# ----------------------------------------------------------------------------- the real KRaft logs


def _no_snapshot_copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src / "__cluster_metadata-0", dst / "__cluster_metadata-0")
    for f in (dst / "__cluster_metadata-0").glob("*.checkpoint"):
        os.chmod(f, 0o644)
        f.unlink()
    return dst


def test_real_kafka3_snapshot_and_log(tmp_path: Path) -> None:
    root = real_fixture("greenlemonT__kafka-temp/data/kafka3")
    r = replay(str(root))
    assert r.problems == []
    assert r.snapshot is not None and (r.snapshot.end_offset, r.snapshot.epoch) == (28870, 189)
    assert (r.last_offset, r.last_epoch, r.records) == (30636, 189, 30637 - 28870)
    assert (r.node_id, r.cluster_id) == (3, "EpwKlK0lR6qKZW0cGwZz8w")
    s = r.state
    # from the TOPIC_RECORDs of the raw log (kafka-dump-log --cluster-metadata-decoder)
    assert {t.name: t.id for t in s.topics.values()} == {
        "__consumer_offsets": "crCKTd0wTl6bQClKBtax4Q", "delivery-create-request": "cp-NpW6vRj6q1bIA5SUr8g",
        "delivery-create-response": "ammo_r0fQ9mnxC4Q6FMD-g", "payment-create-request": "waOfnfkeQj2nhh7-Sgl6Cw",
        "payment-create-response": "C_0Az8SmSdGlXfHdPNnJ0A", "payment-failed": "Gle_Z2lcQ0upA6xXHqjzBA"}
    # brokers 1-3 with their last REGISTER_BROKER_RECORD epochs; their last
    # BROKER_REGISTRATION_CHANGE_RECORDs fence them (fenced: 1), a clean shutdown of all three
    assert {b.id: (b.epoch, b.incarnation_id, b.fenced) for b in s.brokers.values()} == {
        1: (21484, "gSLTNCKOST2EU7OOKfARSw", True), 2: (21485, "VnCwwDA0SC--DN72pNGRVw", True),
        3: (21482, "PCLJCRgqSYK7xFAfxBmPjg", True)}
    p = parts(r)
    # payment-create-request-0: PartitionRecord replicas [3] leader 3 epochs 0/0, then 34
    # PARTITION_CHANGE_RECORDs each with a leader (the last -1): leader epoch = partition epoch = 34
    assert {k: p[("payment-create-request", 0)][k] for k in ("leader", "leaderEpoch", "partitionEpoch", "replicas")} \
        == {"leader": -1, "leaderEpoch": 34, "partitionEpoch": 34, "replicas": [3]}
    # delivery-create-request-0: replicas [1], 32 changes, the last with leader -1
    assert {k: p[("delivery-create-request", 0)][k] for k in ("leader", "leaderEpoch", "partitionEpoch", "replicas")} \
        == {"leader": -1, "leaderEpoch": 32, "partitionEpoch": 32, "replicas": [1]}
    assert len([k for k in p if k[0] == "__consumer_offsets"]) == 50
    assert s.features == {"metadata.version": 11}
    assert r.quorum_state["leaderEpoch"] == 190 and r.bootstrap["features"] == {"metadata.version": 11}
    # the whole log from offset 0, without the snapshot, gives the same image
    full = replay(str(_no_snapshot_copy(root, tmp_path / "k3")))
    assert full.snapshot is None and full.records == 30637 - 58 and full.control_records == 58
    # the last LEADER_CHANGE (offset 27887, partitionLeaderEpoch 189) names leader 3 of voters 1-3
    assert (full.state.leader_id, full.state.leader_epoch, full.state.leader_voters) == (3, 189, [1, 2, 3])

    def image(rep):
        out = []
        for o in objects(rep):
            if o["type"] in ("replay", "cluster", "problem"):
                continue
            o = dict(o)
            o.pop("registeredAt", None)
            if o["type"] == "producerIds":  # a snapshot writes only the next id (brokerId/brokerEpoch -1)
                o = {"nextProducerId": o["nextProducerId"]}
            out.append(o)
        return out

    assert image(full) == image(r)
    # and the snapshot alone is the log's first 28870 records
    at_snapshot = replay(str(root), MetadataOptions(at_offset=28870))
    assert at_snapshot.snapshot is not None and at_snapshot.records == 0 and at_snapshot.last_offset == 28869
    prefix = replay(str(tmp_path / "k3"), MetadataOptions(at_offset=28870))
    assert prefix.snapshot is None and prefix.last_offset == 28869
    assert image(prefix) == image(at_snapshot)
    before = replay(str(root), MetadataOptions(at_offset=28869))  # below the snapshot: from the log's start
    assert before.snapshot is None and before.last_offset == 28868


def test_real_single_node_log() -> None:
    root = real_fixture("greenlemonT__kafka-temp/data/kafka")
    r = replay(str(root))
    assert r.problems == [] and r.snapshot is None
    assert (r.last_offset, r.last_epoch, r.control_records) == (6012, 4, 4)
    assert {t.name: t.id for t in r.state.topics.values()} == {
        "payment-create-request": "v8JUoU12Rauv3D90NxhOKA", "__consumer_offsets": "8kxbPVz3SZmX1PRku-RYPQ",
        "delivery-create-request": "TH8lAlj8SDOOGacFAYFcKA"}
    assert sorted(r.state.brokers) == [1] and (r.state.leader_id, r.state.leader_epoch) == (1, 4)


def test_a_resource_whose_last_config_is_deleted_is_gone(tmp_path: Path) -> None:
    """ConfigurationsDelta drops a resource's image once its last config is deleted (an empty one is not kept)."""
    m = MetaLog()
    m.rec("ConfigRecord", {"ResourceType": 4, "ResourceName": "1", "Name": "log.cleaner.threads", "Value": "2"})
    m.rec("ConfigRecord", {"ResourceType": 4, "ResourceName": "1", "Name": "num.io.threads", "Value": "16"})
    m.rec("ConfigRecord", {"ResourceType": 4, "ResourceName": "1", "Name": "log.cleaner.threads", "Value": None})
    m.rec("ConfigRecord", {"ResourceType": 2, "ResourceName": "gone", "Name": "retention.ms", "Value": "1"})
    m.rec("ConfigRecord", {"ResourceType": 2, "ResourceName": "gone", "Name": "retention.ms", "Value": None})
    m.write(tmp_path / "__cluster_metadata-0")
    r = replay(str(tmp_path))
    assert r.problems == []
    assert r.state.configs == {(4, "1"): {"num.io.threads": "16"}}
