"""``kafkatool groups``: consumer groups replayed from ``__consumer_offsets`` segments.

Where the expected values come from:

* log dirs built here with ``tests/topicdata.py`` (kafkatool's batch encoder and the table-driven
  message codec; the coordinator framing is checked against the spec's golden bytes, §16.9, in
  :func:`test_builders_match_spec_golden_bytes`): each scenario's answer is what was written,
  replayed by hand following the coordinator's rules (apache/kafka group-coordinator:
  ``OffsetMetadataManager.replay``/``replayEndTransactionMarker``, ``GroupMetadataManager.replay``,
  ``ConsumerGroup.maybeUpdateGroupState``) and written out below as literals;
* the real broker files (``../shared/fixtures-real``, skipped when absent): every
  ``__consumer_offsets`` record read by kafka-python's ``MemoryRecords`` and decoded by the small
  ``struct`` reader of spec §14.1 in this file (not kafkatool's codec), then compacted by hand
  (latest value per key, tombstones delete); the members' consumer-protocol bytes decoded by
  aiokafka's ``ConsumerProtocol`` classes; a data partition's log end read by kafka-python; the
  brokers' own placement of each group (its partition is ``abs(hashCode) % 50``, the hash values
  checked with a JVM); a few values read by eye from the files;
* properties: the committed offsets equal a dict fed in order, the compacted log replays the
  same (hypothesis); random corruptions are reported, never raised.
"""

from __future__ import annotations

import json
import struct
import tracemalloc
from pathlib import Path

import pytest

import topicdata as td
from conftest import real_fixture
from kafkatool import groups as gr
from kafkatool.cli.main import main

OFFSETS = td.OFFSETS_TOPIC
T0 = 1_700_000_000_000


def cli(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as e:
        main(["groups", *map(str, args)])
    out, err = capsys.readouterr()
    return e.value.code, out, err


def jsonl(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines()]


def groups_by_id(objs: list[dict]) -> dict[str, dict]:
    return {o["groupId"]: o for o in objs if o["type"] == "group"}


def offsets_of(group: dict, key: str = "offsets") -> dict[tuple[str, int], dict]:
    return {(o["topic"], o["partition"]): o for o in group[key]}


def commit(group: str, topic: str, partition: int, offset: int, ts: int, **kw) -> tuple[bytes, bytes]:
    return td.offset_commit_key(group, topic, partition), td.offset_commit_value(offset, ts, **kw)


def tombstone(group: str, topic: str, partition: int) -> tuple[bytes, None]:
    return td.offset_commit_key(group, topic, partition), None


# ----------------------------------------------------------------------------- the byte layout


def test_builders_match_spec_golden_bytes() -> None:
    """Spec §16.9: OffsetCommit key type 1 g1/t1/0 and value v3 offset 42, leader epoch 5, commit 1700000000000."""
    assert td.offset_commit_key("g1", "t1", 0) == bytes.fromhex("0001 0002 6731 0002 7431 00000000")
    assert td.offset_commit_value(42, T0, leader_epoch=5) == bytes.fromhex(
        "0003 000000000000002a 00000005 0000 0000018bcfe56800")
    # v1 by hand (§14.1): offset, metadata, commitTimestamp, expireTimestamp
    assert td.offset_commit_value(7, T0, metadata="m", expire_timestamp=T0 + 5, version=1) == (
        struct.pack(">hq", 1, 7) + struct.pack(">h", 1) + b"m" + struct.pack(">qq", T0, T0 + 5))
    # GroupMetadataKey: type 2, group string
    assert td.group_metadata_key("g") == struct.pack(">hh", 2, 1) + b"g"


# ----------------------------------------------------------------------------- scenario: commit, rebalance, expire


def _member(mid: str, assigned: dict[str, list[int]], **kw) -> dict:
    return td.classic_member(mid, subscription=td.consumer_subscription(sorted(assigned)),
                             assignment=td.consumer_assignment(assigned), **kw)


def build_lifecycle(root: Path) -> td.LogBuilder:
    """__consumer_offsets-0 of one log dir: groups that commit, rebalance, expire, are deleted."""
    log = td.LogBuilder(timestamp=T0)
    # "orders": generation 1 with one member
    log.add([(td.group_metadata_key("orders"),
              td.group_metadata_value(generation=1, leader="m1", protocol="range", current_state_timestamp=T0,
                                      members=[_member("m1", {"orders": [0, 1, 2]}, client_id="c1",
                                                       client_host="/10.0.0.1", session_timeout=10000,
                                                       rebalance_timeout=60000)]))])
    log.add([commit("orders", "orders", 0, 10, T0 + 1), commit("orders", "orders", 1, 20, T0 + 1)])
    log.add([commit("orders", "orders", 0, 15, T0 + 2), commit("orders", "orders", 2, 7, T0 + 2, version=0)])
    # "expired": an empty group whose offsets expire, then the group is deleted
    log.add([(td.group_metadata_key("expired"), td.group_metadata_value(generation=3, protocol=None, members=[]))])
    log.add([commit("expired", "t", 0, 5, T0 + 3), commit("expired", "t", 1, 6, T0 + 3)])
    # "orders" rebalances: generation 2, m2 joins (static member), m1 keeps partition 0
    log.add([(td.group_metadata_key("orders"),
              td.group_metadata_value(generation=2, leader="m2", protocol="range", current_state_timestamp=T0 + 4,
                                      members=[_member("m1", {"orders": [0]}, client_id="c1"),
                                               _member("m2", {"orders": [1, 2]}, client_id="c2",
                                                       client_host="/10.0.0.2", group_instance_id="inst-2",
                                                       session_timeout=45000, rebalance_timeout=300000)]))])
    log.roll()
    log.add([commit("orders", "orders", 0, 30, T0 + 5, version=1, expire_timestamp=T0 + 86_400_000, metadata="v1"),
             commit("orders", "orders", 1, 25, T0 + 5, leader_epoch=7, metadata="meta")])
    log.add([tombstone("expired", "t", 0), tombstone("expired", "t", 1)])
    log.add([(td.group_metadata_key("expired"), None)])
    # "leftover": its metadata is deleted while an offset remains -> loaded as Empty again
    log.add([(td.group_metadata_key("leftover"), td.group_metadata_value(generation=1, members=[]))])
    log.add([commit("leftover", "x", 0, 1, T0 + 6)])
    log.add([(td.group_metadata_key("leftover"), None)])
    # "simple": only offsets (a consumer with assign(), no membership)
    log.add([commit("simple", "s", 3, 99, T0 + 7, version=2)])
    d = td.partition_dir(root, OFFSETS, 0)
    log.write(d)
    return log


def test_commit_rebalance_expire(tmp_path, capsys) -> None:
    build_lifecycle(tmp_path / "broker")
    code, out, err = cli(capsys, tmp_path / "broker", "--format", "jsonl")
    assert code == 0, err
    objs = jsonl(out)
    assert [o["type"] for o in objs] == ["partition", "group", "group", "group", "group", "summary"]
    g = groups_by_id(objs)
    orders = g["orders"]
    assert (orders["groupType"], orders["state"], orders["protocolType"], orders["protocol"]) == (
        "classic", "Stable", "consumer", "range")
    assert (orders["generation"], orders["leader"], orders["currentStateTimestamp"]) == (2, "m2", T0 + 4)
    members = {m["memberId"]: m for m in orders["members"]}
    assert members["m1"]["assignment"] == [{"topic": "orders", "topicId": None, "partitions": [0]}]
    assert members["m2"]["assignment"] == [{"topic": "orders", "topicId": None, "partitions": [1, 2]}]
    assert (members["m2"]["groupInstanceId"], members["m2"]["clientId"], members["m2"]["clientHost"],
            members["m2"]["sessionTimeoutMs"], members["m2"]["rebalanceTimeoutMs"]) == (
        "inst-2", "c2", "/10.0.0.2", 45000, 300000)
    assert members["m1"]["groupInstanceId"] is None and members["m2"]["subscribedTopics"] == ["orders"]
    offs = offsets_of(orders)
    assert sorted(offs) == [("orders", 0), ("orders", 1), ("orders", 2)]
    # latest wins; v1 carries the expire time, v3 the leader epoch, v0 neither
    o0, o1, o2 = offs["orders", 0], offs["orders", 1], offs["orders", 2]
    assert (o0["offset"], o0["version"], o0["expireTimestamp"], o0["metadata"], o0["leaderEpoch"]) == (
        30, 1, T0 + 86_400_000, "v1", -1)
    assert (o1["offset"], o1["version"], o1["leaderEpoch"], o1["metadata"], o1["expireTimestamp"]) == (
        25, 3, 7, "meta", None)
    assert (o2["offset"], o2["version"], o2["leaderEpoch"], o2["commitTimestamp"]) == (7, 0, -1, T0 + 2)
    assert g["expired"]["state"] == "Dead" and g["expired"]["offsets"] == [] and g["expired"]["deletedAt"] is not None
    left = g["leftover"]
    assert (left["state"], left["protocolType"], [o["offset"] for o in left["offsets"]]) == ("Empty", "", [1])
    assert left["deletedAt"] is not None
    simple = g["simple"]
    assert (simple["state"], simple["protocolType"], simple["members"]) == ("Empty", "", [])
    assert offsets_of(simple)["s", 3]["offset"] == 99
    assert objs[0]["partition"] == 0 and objs[0]["segments"] == 2 and objs[-1]["groups"] == 4


def test_table_shows_iso_times_and_the_groups(tmp_path, capsys) -> None:
    build_lifecycle(tmp_path / "b")
    code, out, err = cli(capsys, tmp_path / "b")
    assert code == 0
    for text in ("orders", "Stable", "Dead", "inst-2", "orders: 1,2", "2023-11-14T22:13:20.005Z",
                 "2023-11-15T22:13:20.000Z", "generation 2", "committed"):
        assert text in out, text
    assert "Replayed 1 __consumer_offsets partition" in err


def test_group_option_and_not_found(tmp_path, capsys) -> None:
    build_lifecycle(tmp_path / "b")
    code, out, err = cli(capsys, tmp_path / "b", "--format", "jsonl", "--group", "orders")
    assert code == 0
    assert list(groups_by_id(jsonl(out))) == ["orders"]
    code, out, err = cli(capsys, tmp_path / "b", "--group", "nope")
    assert code == 1
    assert "kafkatool: error: group nope not found" in err
    assert "Traceback" not in err


def test_topic_option(tmp_path, capsys) -> None:
    build_lifecycle(tmp_path / "b")
    code, out, _ = cli(capsys, tmp_path / "b", "--format", "jsonl", "--topic", "s")
    g = groups_by_id(jsonl(out))
    assert list(g) == ["simple"] and [o["topic"] for o in g["simple"]["offsets"]] == ["s"]


# ----------------------------------------------------------------------------- transactional offset commits


def build_transactions(root: Path) -> None:
    log = td.LogBuilder(timestamp=T0)
    log.add([(td.group_metadata_key("txg"), td.group_metadata_value(generation=1, members=[]))])
    log.add([commit("txg", "t", 1, 150, T0)])
    # producer 1000 commits its offsets -> applied
    log.add([commit("txg", "t", 0, 100, T0 + 1)], producer_id=1000, producer_epoch=0, transactional=True)
    # producer 2000 aborts -> t-1 stays 150
    log.add([commit("txg", "t", 1, 200, T0 + 2)], producer_id=2000, producer_epoch=0, transactional=True)
    log.marker(1000, 0, commit=True)
    log.marker(2000, 0, commit=False)
    # producer 3000: no marker yet -> pending
    log.add([commit("txg", "t", 2, 300, T0 + 3)], producer_id=3000, producer_epoch=1, transactional=True)
    # producer 4000 commits t-3, a plain commit of t-3 follows before its COMMIT marker: the later record wins
    log.add([commit("txg", "t", 3, 400, T0 + 4)], producer_id=4000, producer_epoch=0, transactional=True)
    log.add([commit("txg", "t", 3, 410, T0 + 5)])
    log.marker(4000, 0, commit=True)
    # producer 5000's pending offset is deleted by a tombstone, then it commits: nothing left
    log.add([commit("txg", "t", 4, 500, T0 + 6)], producer_id=5000, producer_epoch=0, transactional=True)
    log.add([tombstone("txg", "t", 4)])
    log.marker(5000, 0, commit=True)
    # producer 6000 commits t-5 after a plain commit of it: the transactional one is later, it wins
    log.add([commit("txg", "t", 5, 1, T0 + 7)])
    log.add([commit("txg", "t", 5, 600, T0 + 8)], producer_id=6000, producer_epoch=0, transactional=True)
    log.marker(6000, 0, commit=True)
    log.write(td.partition_dir(root, OFFSETS, 1))


def test_transactional_offset_commits(tmp_path, capsys) -> None:
    build_transactions(tmp_path / "b")
    code, out, err = cli(capsys, tmp_path / "b", "--format", "jsonl")
    assert code == 0, err
    txg = groups_by_id(jsonl(out))["txg"]
    offs = {k: (v["offset"], v["producerId"]) for k, v in offsets_of(txg).items()}
    assert offs == {("t", 0): (100, 1000), ("t", 1): (150, None), ("t", 3): (410, None), ("t", 5): (600, 6000)}
    pending = offsets_of(txg, "pendingOffsets")
    assert {k: (v["offset"], v["producerId"]) for k, v in pending.items()} == {("t", 2): (300, 3000)}
    code, out, err = cli(capsys, tmp_path / "b")
    assert "pending (producer 3000)" in out


# ----------------------------------------------------------------------------- KIP-848 consumer groups, share groups

TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"  # Uuid(0, 1) as Kafka prints it (base64url, no padding)
OTHER_ID = "AAAAAAAAAAAAAAAAAAAAAg"


def build_modern(root: Path, *, delete: bool = False) -> None:
    log = td.LogBuilder(timestamp=T0)
    ck = td.coordinator_key
    cv = td.coordinator_value
    g = {"GroupId": "cg"}
    log.add([(ck(3, g), cv(3, {"Epoch": 5})),
             (ck(4, g), cv(4, {"Topics": [{"TopicId": TOPIC_ID, "TopicName": "orders", "NumPartitions": 3}]})),
             (ck(5, {**g, "MemberId": "m1"}), cv(5, {"ClientId": "c1", "ClientHost": "/10.1.1.1",
                                                     "SubscribedTopicNames": ["orders"], "RebalanceTimeoutMs": 5000,
                                                     "InstanceId": "i1", "ServerAssignor": "uniform"})),
             (ck(6, g), cv(6, {"AssignmentEpoch": 5})),
             (ck(7, {**g, "MemberId": "m1"}), cv(7, {"TopicPartitions": [{"TopicId": TOPIC_ID, "Partitions": [0, 1, 2]}]})),
             (ck(8, {**g, "MemberId": "m1"}), cv(8, {"MemberEpoch": 5, "PreviousMemberEpoch": 4, "State": 0,
                                                     "AssignedPartitions": [{"TopicId": TOPIC_ID, "Partitions": [0, 1, 2]}],
                                                     "PartitionsPendingRevocation": []}))])
    log.add([commit("cg", "orders", 0, 12, T0 + 1)])
    # a second consumer group: m2 still revoking at an older epoch -> Reconciling
    g2 = {"GroupId": "cg2"}
    log.add([(ck(3, g2), cv(3, {"Epoch": 2})), (ck(6, g2), cv(6, {"AssignmentEpoch": 2})),
             (ck(5, {**g2, "MemberId": "m2"}), cv(5, {"ClientId": "c2", "ClientHost": "/h"})),
             (ck(8, {**g2, "MemberId": "m2"}), cv(8, {"MemberEpoch": 1, "PreviousMemberEpoch": 0, "State": 1,
                                                      "AssignedPartitions": [{"TopicId": OTHER_ID, "Partitions": [0]}],
                                                      "PartitionsPendingRevocation": [{"TopicId": OTHER_ID, "Partitions": [1]}]}))])
    # a group whose epoch moved past its assignment epoch (a member joined, no new assignment yet) -> Assigning;
    # one without members -> Empty
    g3 = {"GroupId": "cg3"}
    log.add([(ck(3, g3), cv(3, {"Epoch": 3})), (ck(6, g3), cv(6, {"AssignmentEpoch": 2})),
             (ck(5, {**g3, "MemberId": "m3"}), cv(5, {"ClientId": "c3", "ClientHost": "/h"})),
             (ck(8, {**g3, "MemberId": "m3"}), cv(8, {"MemberEpoch": 2, "PreviousMemberEpoch": 1, "State": 0})),
             (ck(3, {"GroupId": "cg4"}), cv(3, {"Epoch": 1}))])
    # a share group with one member
    s = {"GroupId": "sg"}
    log.add([(ck(11, s), cv(11, {"Epoch": 3})), (ck(12, s), cv(12, {"AssignmentEpoch": 3})),
             (ck(10, {**s, "MemberId": "s1"}), cv(10, {"ClientId": "sc", "ClientHost": "/s", "SubscribedTopicNames": ["orders"]})),
             (ck(14, {**s, "MemberId": "s1"}), cv(14, {"MemberEpoch": 3, "PreviousMemberEpoch": 2, "State": 0,
                                                       "AssignedPartitions": [{"TopicId": TOPIC_ID, "Partitions": [0]}]})),
             (ck(15, s), cv(15, {"InitializedTopics": [{"TopicId": TOPIC_ID, "TopicName": "orders", "Partitions": [0]}],
                                 "DeletingTopics": []}))])
    if delete:  # the coordinator deletes a consumer group with tombstones, members first
        log.add([(ck(8, {**g2, "MemberId": "m2"}), None), (ck(7, {**g2, "MemberId": "m2"}), None),
                 (ck(5, {**g2, "MemberId": "m2"}), None), (ck(6, g2), None), (ck(3, g2), None)])
    log.write(td.partition_dir(root, OFFSETS, 2))


def test_new_protocol_groups(tmp_path, capsys) -> None:
    build_modern(tmp_path / "b")
    code, out, err = cli(capsys, tmp_path / "b", "--format", "jsonl")
    assert code == 0, err
    g = groups_by_id(jsonl(out))
    cg = g["cg"]
    assert (cg["groupType"], cg["state"], cg["epoch"], cg["assignmentEpoch"]) == ("consumer", "Stable", 5, 5)
    (m1,) = cg["members"]
    assert (m1["memberId"], m1["groupInstanceId"], m1["clientId"], m1["memberEpoch"], m1["previousMemberEpoch"],
            m1["memberState"], m1["rebalanceTimeoutMs"], m1["serverAssignor"]) == (
        "m1", "i1", "c1", 5, 4, "STABLE", 5000, "uniform")
    assert m1["assignment"] == [{"topic": "orders", "topicId": TOPIC_ID, "partitions": [0, 1, 2]}]
    assert m1["targetAssignment"] == m1["assignment"]
    assert offsets_of(cg)["orders", 0]["offset"] == 12
    cg2 = g["cg2"]
    assert cg2["state"] == "Reconciling"
    (m2,) = cg2["members"]
    assert m2["memberState"] == "UNREVOKED_PARTITIONS"
    assert m2["pendingRevocation"] == [{"topic": None, "topicId": OTHER_ID, "partitions": [1]}]
    assert (g["cg3"]["state"], g["cg4"]["state"], g["cg4"]["epoch"]) == ("Assigning", "Empty", 1)
    sg = g["sg"]
    assert (sg["groupType"], sg["state"], sg["epoch"]) == ("share", "Stable", 3)
    assert sg["members"][0]["assignment"] == [{"topic": "orders", "topicId": TOPIC_ID, "partitions": [0]}]
    code, out, err = cli(capsys, tmp_path / "b")
    assert f"[{OTHER_ID}]: 0" in out  # an id with no name known is shown as the id


def test_new_protocol_group_deleted(tmp_path, capsys) -> None:
    build_modern(tmp_path / "b", delete=True)
    code, out, _ = cli(capsys, tmp_path / "b", "--format", "jsonl")
    cg2 = groups_by_id(jsonl(out))["cg2"]
    assert (cg2["state"], cg2["members"]) == ("Dead", [])


# ----------------------------------------------------------------------------- replicas, damage, bad records


def test_replicas_the_highest_log_end_is_used(tmp_path, capsys) -> None:
    build_lifecycle(tmp_path / "broker1")
    short = td.LogBuilder(timestamp=T0)  # a replica that fell behind: its own history
    short.add([commit("orders", "orders", 0, 1, T0)])
    short.write(td.partition_dir(tmp_path / "broker2", OFFSETS, 0))
    code, out, err = cli(capsys, tmp_path / "broker2", tmp_path / "broker1", "--format", "jsonl")
    assert code == 0
    objs = jsonl(out)
    part = objs[0]
    assert part["partitionDir"] == str(tmp_path / "broker1" / f"{OFFSETS}-0")
    assert part["otherReplicas"] == [{"partitionDir": str(tmp_path / "broker2" / f"{OFFSETS}-0"), "logEndOffset": 1}]
    assert offsets_of(groups_by_id(objs)["orders"])["orders", 0]["offset"] == 30
    assert "kafkatool: note:" in err and "broker2" in err and "the highest" in err


def test_damaged_segment_in_the_middle(tmp_path, capsys) -> None:
    log = td.LogBuilder(timestamp=T0)
    log.add([commit("g", "t", 0, 1, T0)])
    log.roll()
    log.add([commit("g", "t", 1, 10, T0)])
    garbage_at = len(b"".join(log.segments[-1][1]))
    log.raw(b"\x00\x00\x00\x00\x00\x00\x00\x09\xff\xff\xff\xf0" + b"garbage!" * 4)  # a size field of -16
    log.add([commit("g", "t", 1, 11, T0)])
    crc_at = len(b"".join(log.segments[-1][1]))
    log.add([commit("g", "t", 2, 20, T0)])
    log.add([commit("g", "t", 0, 2, T0)])
    log.roll()
    log.add([commit("g", "t", 3, 30, T0)])
    d = td.partition_dir(tmp_path / "b", OFFSETS, 0)
    paths = log.write(d)
    middle = paths[1]
    data = bytearray(middle.read_bytes())
    data[crc_at + 70] ^= 0xFF  # inside the t-2 batch's records: its CRC no longer holds
    middle.write_bytes(bytes(data))
    code, out, err = cli(capsys, tmp_path / "b", "--format", "jsonl")
    assert code == 1
    assert f"kafkatool: error: {middle}:{garbage_at}: invalid_size:" in err
    assert f"kafkatool: error: {middle}:{crc_at}: crc_mismatch:" in err
    assert "Traceback" not in err
    objs = jsonl(out)
    g = groups_by_id(objs)["g"]
    # everything around the damage was replayed; the damaged batch was not
    assert {k: v["offset"] for k, v in offsets_of(g).items()} == {("t", 0): 2, ("t", 1): 11, ("t", 3): 30}
    assert [p["kind"] for p in objs[0]["problems"]] == ["invalid_size", "crc_mismatch"]


def test_undecodable_records_are_counted_and_reported(tmp_path, capsys) -> None:
    log = td.LogBuilder(timestamp=T0)
    log.add([commit("g", "t", 0, 1, T0)])
    log.add([(struct.pack(">hh", 99, 0), b"\x00\x00")])  # record type 99: unknown
    bad_at, _ = log.add([(None, b"\x00\x00")])  # a null key: kafka-dump-log stops here
    log.add([(td.offset_commit_key("g", "t", 0), b"\x00\x03\x00")])  # a truncated value
    log.add([commit("g", "t", 1, 5, T0)])
    log.write(td.partition_dir(tmp_path / "b", OFFSETS, 0))
    code, out, err = cli(capsys, tmp_path / "b", "--format", "jsonl")
    assert code == 1
    assert "offset 1: Unknown record type 99 at offset 1, skipping." in err
    assert (f"offset {bad_at}: Failed to decode message at offset {bad_at} using offset topic decoder "
            "(message had a missing key)") in err
    assert "offset 3: Error at offset 3, skipping." in err
    assert "Traceback" not in err
    objs = jsonl(out)
    assert [u["offset"] for u in objs[0]["undecodable"]] == [1, 2, 3]
    assert objs[-1]["undecodable"] == 3
    assert {k: v["offset"] for k, v in offsets_of(groups_by_id(objs)["g"]).items()} == {("t", 0): 1, ("t", 1): 5}


def test_no_offsets_partition_is_a_usage_error(tmp_path, capsys) -> None:
    (tmp_path / "empty").mkdir()
    td.partition_dir(tmp_path / "empty", "orders", 0)
    code, out, err = cli(capsys, tmp_path / "empty")
    assert code == 2 and "no __consumer_offsets partition found" in err and out == ""
    build_lifecycle(tmp_path / "b")
    seg = tmp_path / "b" / f"{OFFSETS}-0" / f"{0:020d}.log"
    code, out, err = cli(capsys, seg)  # a segment file named alone: groups reads partition dirs
    assert code == 2 and f"{seg}: no __consumer_offsets partition found" in err
    code, out, err = cli(capsys, tmp_path / "missing")
    assert code == 2 and "does not exist" in err


def test_memory_follows_live_keys_not_records(tmp_path) -> None:
    """40,000 commits over 8 keys: the replay's peak memory stays far below the records' size."""
    log = td.LogBuilder(timestamp=T0)
    for i in range(400):
        log.add([commit("g", "t", j % 8, i * 100 + j, T0 + i) for j in range(100)])
    log.write(td.partition_dir(tmp_path / "b", OFFSETS, 0))
    run = gr.find_offsets_partitions([str(tmp_path / "b")])
    tracemalloc.start()
    try:
        (read,) = list(gr.groups_of(run))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    (g,) = read.groups
    assert [o.offset for o in g.offsets] == [39900 + max(j for j in range(100) if j % 8 == k) for k in range(8)]
    assert read.records == 40_000
    assert peak < 8 << 20, peak


def test_layering() -> None:
    """groups reads files only through the log-dir model (no open() of its own) and imports no click/rich."""
    src = Path(gr.__file__).read_text()
    assert "open(" not in src.replace("open_log(", "")
    assert "import click" not in src and "rich" not in src


# ----------------------------------------------------------------------------- real broker files


def _str16(buf: bytes, pos: int) -> tuple[str | None, int]:
    (n,) = struct.unpack_from(">h", buf, pos)
    if n < 0:
        return None, pos + 2
    return buf[pos + 2:pos + 2 + n].decode(), pos + 2 + n


def _kafka_python_records(partition_dir: Path):
    """Every record of a partition dir's segments, in order, as kafka-python reads them."""
    from kafka.record.memory_records import MemoryRecords

    for seg in sorted(partition_dir.glob("*.log")):
        records = MemoryRecords(seg.read_bytes())
        while records.has_next():
            batch = records.next_batch()
            if batch is None:
                break
            yield from batch


def _independent_replay(partition_dir: Path) -> tuple[dict, dict]:
    """kafka-python's reader + spec §14.1 by hand: latest OffsetCommit per key and the latest
    GroupMetadata header (protocolType, generation, protocol, leader, member count) per group."""
    offsets: dict = {}
    groups: dict = {}
    for r in _kafka_python_records(partition_dir):
        key, value = bytes(r.key), None if r.value is None else bytes(r.value)
        (rtype,) = struct.unpack_from(">h", key)
        group, p = _str16(key, 2)
        if rtype in (0, 1):
            topic, p = _str16(key, p)
            (partition,) = struct.unpack_from(">i", key, p)
            if value is None:
                offsets.pop((group, topic, partition), None)
                continue
            version, offset = struct.unpack_from(">hq", value)
            p = 10 + (4 if version >= 3 else 0)
            metadata, p = _str16(value, p)
            (commit_ts,) = struct.unpack_from(">q", value, p)
            expire = struct.unpack_from(">q", value, p + 8)[0] if version == 1 else None
            offsets[(group, topic, partition)] = (offset, commit_ts, expire, version)
        elif rtype == 2:
            if value is None:
                groups.pop(group, None)
                continue
            (version,) = struct.unpack_from(">h", value)
            protocol_type, p = _str16(value, 2)
            (generation,) = struct.unpack_from(">i", value, p)
            protocol, p = _str16(value, p + 4)
            leader, p = _str16(value, p)
            if version >= 2:
                p += 8
            (count,) = struct.unpack_from(">i", value, p)
            p += 4
            members = []
            for _ in range(count):
                member_id, p = _str16(value, p)
                if version >= 3:
                    _instance, p = _str16(value, p)
                client_id, p = _str16(value, p)
                client_host, p = _str16(value, p)
                rebalance = -1
                if version >= 1:
                    (rebalance,) = struct.unpack_from(">i", value, p)
                    p += 4
                (session,) = struct.unpack_from(">i", value, p)
                p += 4
                raw = []
                for _ in ("subscription", "assignment"):
                    (n,) = struct.unpack_from(">i", value, p)
                    raw.append(value[p + 4:p + 4 + n])
                    p += 4 + n
                members.append((member_id, client_id, client_host, session, rebalance, *raw))
            groups[group] = (protocol_type, generation, protocol, leader, members)
    return offsets, groups


REAL_PARTITIONS = [
    "xpxwo100__bullShit/tmp/kafka-logs/__consumer_offsets-40",
    "William0423__kafka/kafka-logs/__consumer_offsets-28",
    "greenlemonT__kafka-temp/data/kafka3/__consumer_offsets-14",
    "greenlemonT__kafka-temp/data/kafka3/__consumer_offsets-26",
    "greenlemonT__kafka-temp/data/kafka3/__consumer_offsets-36",
]


@pytest.mark.parametrize("rel", REAL_PARTITIONS)
def test_real_partitions_match_an_independent_replay(rel) -> None:
    path = real_fixture(rel)
    offsets, groups = _independent_replay(path)
    run = gr.find_offsets_partitions([str(path)])
    (read,) = list(gr.groups_of(run))
    assert not read.failed, (read.problems, read.undecodable)
    got_offsets = {(g.group_id, o.topic, o.partition): (o.offset, o.commit_timestamp, o.expire_timestamp, o.version)
                   for g in read.groups for o in g.offsets}
    assert got_offsets == offsets
    got_groups = {g.group_id: (g.protocol_type, g.generation, g.protocol, g.leader, len(g.members))
                  for g in read.groups if g.generation is not None}
    assert got_groups == {k: (*v[:4], len(v[4])) for k, v in groups.items()}
    # the members, their consumer-protocol bytes decoded by aiokafka's ConsumerProtocol classes
    from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment, ConsumerProtocolMemberMetadata

    by_id = {g.group_id: g for g in read.groups}
    for gid, (_pt, _gen, _proto, _leader, members) in groups.items():
        got = by_id[gid].members
        assert [(m.member_id, m.client_id, m.client_host, m.session_timeout_ms,
                 -1 if m.rebalance_timeout_ms is None else m.rebalance_timeout_ms) for m in got] == [
            tuple(m[:5]) for m in members]
        for m, (*_, subscription, assignment) in zip(got, members):
            sub = ConsumerProtocolMemberMetadata.decode(subscription)
            assert m.subscribed_topics == list(sub.subscription)
            assign = ConsumerProtocolMemberAssignment.decode(assignment)
            assert [(t.topic, list(t.partitions)) for t in m.assignment] == [
                (topic, list(parts)) for topic, parts in assign.assignment]
    for g in read.groups:
        assert g.state == ("Stable" if g.members else "Empty")


def test_real_values_read_by_eye(capsys) -> None:
    """A few values read from the files with a hex viewer: GroupA's offset of foo-0 (a v1 value
    with its expire time, 2016), debug-consumer-group's of debug_topic-0 (v2, 2018)."""
    root = real_fixture("xpxwo100__bullShit/tmp/kafka-logs")
    code, out, err = cli(capsys, root, "--format", "jsonl", "--group", "GroupA")
    assert code == 0, err
    g = groups_by_id(jsonl(out))["GroupA"]
    assert (g["state"], g["generation"], g["protocol"]) == ("Stable", 5, "range")
    o = offsets_of(g)["foo", 0]
    assert (o["offset"], o["commitTimestamp"], o["expireTimestamp"], o["version"]) == (
        204, 1479459073221, 1479545473221, 1)
    assert g["members"][0]["assignment"] == [{"topic": "foo", "topicId": None, "partitions": [0]}]
    root = real_fixture("William0423__kafka/kafka-logs")
    code, out, err = cli(capsys, root, "--format", "jsonl")
    g = groups_by_id(jsonl(out))["debug-consumer-group"]
    o = offsets_of(g)["debug_topic", 0]
    assert (o["offset"], o["version"], o["expireTimestamp"]) == (40, 2, None)
    assert g["members"][0]["clientHost"] == "/127.0.0.1"


def test_real_replicas_in_two_log_dirs(capsys) -> None:
    """greenlemonT's kafka and kafka3 log dirs both hold __consumer_offsets-14 and -36; kafka3's copies are longer."""
    root = real_fixture("greenlemonT__kafka-temp/data")
    code, out, err = cli(capsys, root / "kafka", root / "kafka3", "--format", "jsonl")
    assert code == 0, err
    parts = {o["partition"]: o for o in jsonl(out) if o["type"] == "partition"}
    for n in (14, 36):
        assert parts[n]["partitionDir"] == str(root / "kafka3" / f"{OFFSETS}-{n}")
        assert [r["partitionDir"] for r in parts[n]["otherReplicas"]] == [str(root / "kafka" / f"{OFFSETS}-{n}")]
        assert parts[n]["logEndOffset"] > parts[n]["otherReplicas"][0]["logEndOffset"]
    assert err.count("kafkatool: note:") == 2
    g = groups_by_id(jsonl(out))
    assert offsets_of(g["payment-group"])["payment-create-request", 0]["offset"] == 1


# ----------------------------------------------------------------------------- more edges


def test_other_protocols_and_bad_consumer_protocol_bytes(tmp_path, capsys) -> None:
    log = td.LogBuilder(timestamp=T0)
    log.add([(td.group_metadata_key("connect-cluster"),
              td.group_metadata_value(protocol_type="connect", protocol="sessioned", generation=9, leader="w1",
                                      members=[td.classic_member("w1", subscription=b"\x00\x01opaque",
                                                                 assignment=b"\x00\x01opaque")]))])
    log.add([(td.group_metadata_key("odd"),
              td.group_metadata_value(generation=1, leader="m", members=[
                  td.classic_member("m", subscription=td.consumer_subscription(["a"]), assignment=b"\x00\x01\x00"),
                  td.classic_member("n", subscription=td.consumer_subscription(["a"]), assignment=b"")]))])
    log.write(td.partition_dir(tmp_path / "b", OFFSETS, 0))
    code, out, err = cli(capsys, tmp_path / "b", "--format", "jsonl")
    assert code == 0, err
    g = groups_by_id(jsonl(out))
    (w1,) = g["connect-cluster"]["members"]
    assert (g["connect-cluster"]["protocolType"], w1["assignment"], w1["assignmentError"]) == ("connect", None, None)
    m, n = g["odd"]["members"]
    assert m["assignment"] is None and m["subscribedTopics"] == ["a"]
    assert m["assignmentError"] == "the assignment is not a consumer-protocol assignment (3 bytes)"
    assert n["assignment"] == [] and n["assignmentError"] is None


def test_replicas_tie_uses_the_first_named(tmp_path, capsys) -> None:
    for name, offset in (("b1", 1), ("b2", 2)):
        log = td.LogBuilder(timestamp=T0)
        log.add([commit("g", "t", 0, offset, T0)])
        log.write(td.partition_dir(tmp_path / name, OFFSETS, 3))
    code, out, err = cli(capsys, tmp_path / "b2", tmp_path / "b1", "--format", "jsonl")
    objs = jsonl(out)
    assert objs[0]["partitionDir"] == str(tmp_path / "b2" / f"{OFFSETS}-3")
    assert offsets_of(groups_by_id(objs)["g"])["t", 0]["offset"] == 2


def _render_json_names() -> tuple[set[str], set[str]]:
    """The ``"type"`` values and keys of every dict literal in kafkatool/render/groups.py."""
    import ast

    tree = ast.parse(Path(gr.__file__).with_name("render").joinpath("groups.py").read_text(encoding="utf-8"))
    types, fields = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant) and isinstance(k.value, str):
                    fields.add(k.value)
                    if k.value == "type" and isinstance(v, ast.Constant):
                        types.add(v.value)
    return types, fields


def test_man_page_json_lines_schema_names_every_type_and_field() -> None:
    import re

    page = (Path(__file__).resolve().parents[1] / "man" / "kafkatool-groups.1").read_text(encoding="utf-8")
    schema = page.split("\n.SH JSON LINES SCHEMA\n", 1)[1].split("\n.SH ", 1)[0]
    words = set(re.findall(r"[A-Za-z_]+", re.sub(r"\\f[BIRP]|\\-|\\&", " ", schema)))
    types, fields = _render_json_names()
    assert types == {"partition", "group", "summary"}
    assert not sorted(types - words) and not sorted(fields - words), (sorted(types - words), sorted(fields - words))


def test_a_directory_named_twice_is_one_copy(tmp_path, capsys) -> None:
    build_lifecycle(tmp_path / "b")
    code, out, err = cli(capsys, tmp_path / "b", tmp_path / "b" / f"{OFFSETS}-0", "--format", "jsonl")
    assert code == 0 and "note:" not in err
    assert jsonl(out)[0]["otherReplicas"] == []


def test_a_batch_whose_records_do_not_decode(tmp_path, capsys) -> None:
    """A gzip batch whose compressed bytes are damaged under a valid CRC (rewritten with the
    crc32c package, spec §4.1: CRC-32C of the bytes from the attributes on, at byte 17)."""
    import crc32c

    log = td.LogBuilder(timestamp=T0)
    log.add([commit("g", "t", 0, 1, T0)])
    at = len(b"".join(log.segments[-1][1]))
    log.add([commit("g", "t", 1, 5, T0), commit("g", "t", 2, 6, T0)], codec=1)
    log.add([commit("g", "t", 0, 2, T0)])
    (seg,) = log.write(td.partition_dir(tmp_path / "b", OFFSETS, 0))
    data = bytearray(seg.read_bytes())
    size = struct.unpack_from(">i", data, at + 8)[0] + 12
    for i in range(at + 61 + 10, at + size - 8):  # the deflate stream, past the gzip header
        data[i] ^= 0x5A
    struct.pack_into(">I", data, at + 17, crc32c.crc32c(bytes(data[at + 21:at + size])))
    seg.write_bytes(bytes(data))
    code, out, err = cli(capsys, tmp_path / "b", "--format", "jsonl")
    assert code == 1 and "Traceback" not in err
    (line,) = [ln for ln in err.splitlines() if ln.startswith(f"kafkatool: error: {seg}:")]
    position = int(line.split(f"{seg}:")[1].split(":")[0])
    assert at <= position < at + size and ": decompression_failed: " in line  # the byte where the records start
    assert line.endswith("the rest of the batch is not replayed")
    g = groups_by_id(jsonl(out))["g"]
    assert {k: v["offset"] for k, v in offsets_of(g).items()} == {("t", 0): 2}


# ----------------------------------------------------------------------------- property: a dict oracle, and compaction

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_KEYS = st.tuples(st.sampled_from(["ga", "gb"]), st.sampled_from(["t", "u"]), st.integers(0, 2))
_OPS = st.lists(st.one_of(st.tuples(st.just("commit"), _KEYS, st.integers(0, 10**6)),
                          st.tuples(st.just("delete"), _KEYS, st.just(0))), min_size=1, max_size=40)


def _write_ops(directory: Path, ops, batch_sizes) -> None:
    log = td.LogBuilder(timestamp=T0)
    records = [(td.offset_commit_key(*k), None if op == "delete" else td.offset_commit_value(v, T0 + i))
               for i, (op, k, v) in enumerate(ops)]
    i = 0
    for n in batch_sizes:
        if i >= len(records):
            break
        log.add(records[i:i + n])
        i += n
    if i < len(records):
        log.add(records[i:])
    log.write(td.partition_dir(directory, OFFSETS, 0))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_OPS, batch_sizes=st.lists(st.integers(1, 5), max_size=10))
def test_replay_is_the_latest_value_per_key_and_compaction_changes_nothing(tmp_path_factory, ops, batch_sizes) -> None:
    """The committed offsets are a dict fed in order (set on commit, delete on tombstone), and the
    log the cleaner would leave (the last record of each key, tombstones dropped) replays the same."""
    oracle: dict = {}
    for op, k, v in ops:
        if op == "delete":
            oracle.pop(k, None)
        else:
            oracle[k] = v
    last: dict = {}
    for i, (op, k, v) in enumerate(ops):
        last[k] = i
    compacted = [ops[i] for i in sorted(last.values()) if ops[i][0] == "commit"]
    root = tmp_path_factory.mktemp("ops")
    _write_ops(root / "full", ops, batch_sizes)
    results = []
    for name, log_ops in (("full", ops), ("compacted", compacted)):
        if name == "compacted":
            if not compacted:
                results.append({})
                continue
            _write_ops(root / name, log_ops, [1] * len(log_ops))
        (read,) = list(gr.groups_of(gr.find_offsets_partitions([str(root / name)])))
        results.append({(g.group_id, o.topic, o.partition): o.offset for g in read.groups for o in g.offsets})
    assert results[0] == oracle
    assert results[1] == oracle


def test_random_damage_never_escapes(tmp_path) -> None:
    """200 random corruptions (bytes set, a cut, bytes inserted) of the scenario logs: the replay
    reports problems or records not decoded, and never raises."""
    import random

    src = tmp_path / "src"
    build_lifecycle(src)
    build_transactions(src)
    build_modern(src)
    files = sorted(src.rglob("*.log"))
    rng = random.Random(13)
    failed = 0
    for i in range(200):
        target = rng.choice(files)
        data = bytearray(target.read_bytes())
        how = rng.choice(("set", "cut", "insert"))
        at = rng.randrange(len(data))
        if how == "set":
            for _ in range(rng.randint(1, 4)):
                data[rng.randrange(len(data))] = rng.randrange(256)
        elif how == "cut":
            del data[at:]
        else:
            data[at:at] = rng.randbytes(rng.randint(1, 40))
        work = tmp_path / f"w{i}"
        d = work / target.parent.name
        d.mkdir(parents=True)
        (d / target.name).write_bytes(bytes(data))
        for other in target.parent.glob("*.log"):
            if other != target:
                (d / other.name).write_bytes(other.read_bytes())
        for read in gr.groups_of(gr.find_offsets_partitions([str(work)])):
            failed += read.failed
            for g in read.groups:
                assert g.state in ("Empty", "Stable", "Dead", "Assigning", "Reconciling")
    assert failed > 100  # (most corruptions are seen: a CRC covers every batch)


def test_legacy_message_formats(tmp_path, capsys) -> None:
    """A 0.10-era __consumer_offsets: v0 and v1 messages, a gzip v1 wrapper, then v2 batches (an upgrade)."""
    log = td.LogBuilder(timestamp=T0)
    log.legacy([(td.group_metadata_key("old"), td.group_metadata_value(generation=1, leader="m", version=0,
                                                                       members=[_member("m", {"t": [0, 1]})]))],
               magic=0)
    log.legacy([commit("old", "t", 0, 10, T0, version=1, expire_timestamp=T0 + 1)], magic=0)
    log.legacy([commit("old", "t", 0, 11, T0, version=1, expire_timestamp=T0 + 2),
                commit("old", "t", 1, 21, T0, version=1, expire_timestamp=T0 + 2)], magic=1, codec=1)
    log.legacy([tombstone("old", "t", 1)], magic=1)
    log.add([commit("old", "t", 2, 30, T0, version=3, leader_epoch=4)])
    log.write(td.partition_dir(tmp_path / "b", OFFSETS, 0))
    code, out, err = cli(capsys, tmp_path / "b", "--format", "jsonl")
    assert code == 0, err
    g = groups_by_id(jsonl(out))["old"]
    assert (g["state"], g["generation"], g["members"][0]["assignment"][0]["partitions"]) == ("Stable", 1, [0, 1])
    assert {k: (v["offset"], v["expireTimestamp"], v["leaderEpoch"]) for k, v in offsets_of(g).items()} == {
        ("t", 0): (11, T0 + 2, -1), ("t", 2): (30, None, 4)}


def test_offsets_partition_of_a_group() -> None:
    """Utils.abs(groupId.hashCode()) % 50, by hand: "a" is 97; U+1F600 is the UTF-16 pair D83D DE00,
    0xD83D * 31 + 0xDE00 = 1772899; "polygenelubricants".hashCode() is Integer.MIN_VALUE (abs -> 0)."""
    assert gr.offsets_partition_of("a") == 97 % 50
    assert gr.offsets_partition_of("\U0001F600") == 1772899 % 50
    assert gr.offsets_partition_of("polygenelubricants") == 0
    assert gr.offsets_partition_of("a", 7) == 97 % 7


def test_real_groups_live_in_their_hash_partition(capsys) -> None:
    """The brokers put each group in partition abs(hashCode) % 50: the real files agree with offsets_partition_of."""
    root = real_fixture("greenlemonT__kafka-temp")  # (skips without the real files)
    code, out, err = cli(capsys, root.parent, "--format", "jsonl")
    groups = groups_by_id(jsonl(out))
    assert len(groups) >= 5
    for g in groups.values():
        assert gr.offsets_partition_of(g["groupId"]) == g["offsetsPartition"], g["groupId"]
    code, out, err = cli(capsys, root.parent, "--group", "payments")
    # "payments".hashCode() is 1382682413 (checked with java 17: String.hashCode), % 50 = 13
    assert code == 1 and "its records are in __consumer_offsets-13" in err


def test_table_folds_to_a_width_and_escapes_control_characters(tmp_path) -> None:
    from rich.cells import cell_len

    from kafkatool.render import groups as rg

    build_lifecycle(tmp_path / "b")
    log = td.LogBuilder(timestamp=T0)
    log.add([commit("evil\x1b[31m\ngroup", "t", 0, 1, T0)])
    log.write(td.partition_dir(tmp_path / "b", OFFSETS, 1))
    reads = list(gr.groups_of(gr.find_offsets_partitions([str(tmp_path / "b")])))
    wide = list(rg.table_lines(reads))
    text = "".join(wide)
    assert "\x1b" not in text and "evil\\x1b[31m\\ngroup" in text
    assert len({cell_len(line) for line in wide if line[:1] in "┏┃┡│└"}) == 3  # three tables, each line as wide as its table
    narrow = list(rg.table_lines(reads, width=120))
    assert max(cell_len(line) for line in narrow) <= 120 < max(cell_len(line) for line in wide)
    assert "".join(narrow).count("orders") >= "".join(wide).count("orders")  # folded, nothing lost
    colored = list(rg.table_lines(reads, color=True))
    assert any(line.startswith("\x1b[31m│ expired") for line in colored)  # Dead in red


def test_jobs_give_the_same_output(tmp_path, capsys) -> None:
    build_lifecycle(tmp_path / "b")
    build_transactions(tmp_path / "b")
    build_modern(tmp_path / "b")
    outs = []
    for jobs in ("1", "3"):
        code, out, err = cli(capsys, tmp_path / "b", "--format", "jsonl", "--jobs", jobs)
        assert code == 0, err
        objs = jsonl(out)
        objs[-1].pop("seconds")
        outs.append(objs)
    assert outs[0] == outs[1] and len([o for o in outs[0] if o["type"] == "partition"]) == 3


def test_as_a_process(tmp_path) -> None:
    """The installed entry point: exit status, JSON Lines on stdout, the summary on stderr; a closed pipe is quiet."""
    import subprocess
    import sys

    build_lifecycle(tmp_path / "b")
    run = subprocess.run([sys.executable, "-m", "kafkatool", "groups", "--format", "jsonl", str(tmp_path / "b")],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stderr.startswith("Replayed 1 __consumer_offsets partition")
    assert groups_by_id(jsonl(run.stdout))["orders"]["generation"] == 2
    head = subprocess.run(f"{sys.executable} -m kafkatool groups {tmp_path / 'b'} | head -1", shell=True,
                          capture_output=True, text=True, timeout=120)
    assert head.stdout == "Groups\n" and "Traceback" not in head.stderr


# ----------------------------------------------------------------------------- --lag


def _data_partition(root: Path, topic: str, partition: int, records: int, *, index_batch: int | None = None,
                    bogus_index: bool = False) -> None:
    """A data partition of ``records`` one-record batches; with ``index_batch`` an ``.index``
    whose one entry points at that batch (relative offset, position: spec §8), or a bogus one."""
    log = td.LogBuilder(timestamp=T0)
    for i in range(records):
        log.add([(None, b"v%d" % i)])
    d = td.partition_dir(root, topic, partition)
    (seg,) = log.write(d)
    if index_batch is not None:
        position = len(b"".join(log.segments[0][1][:index_batch]))
        entry = (index_batch, position + 3) if bogus_index else (index_batch, position)
        (d / f"{0:020d}.index").write_bytes(struct.pack(">ii", *entry) + bytes(8 * 9))  # a preallocated tail


def test_lag_from_the_data_partitions(tmp_path, capsys) -> None:
    build_lifecycle(tmp_path / "b1")  # orders: 0 -> 30, 1 -> 25, 2 -> 7
    _data_partition(tmp_path / "b1", "orders", 0, 20, index_batch=12)  # the log ends below the commit: -10
    _data_partition(tmp_path / "b1", "orders", 1, 26, index_batch=5, bogus_index=True)
    _data_partition(tmp_path / "b2", "orders", 1, 40)  # another copy, longer: its end counts
    code, out, err = cli(capsys, tmp_path / "b1", tmp_path / "b2", "--format", "jsonl", "--lag")
    assert code == 0, err
    offs = offsets_of(groups_by_id(jsonl(out))["orders"])
    assert {k: (v["logEndOffset"], v["lag"]) for k, v in offs.items()} == {
        ("orders", 0): (20, -10), ("orders", 1): (40, 15), ("orders", 2): (None, None)}
    code, out, err = cli(capsys, tmp_path / "b1", "--format", "jsonl")
    offs = offsets_of(groups_by_id(jsonl(out))["orders"])
    assert offs["orders", 1]["logEndOffset"] is None and offs["orders", 1]["lag"] is None  # not asked
    code, out, err = cli(capsys, tmp_path / "b1", tmp_path / "b2")  # b2 holds no __consumer_offsets: needs --lag
    assert code == 2 and f"{tmp_path / 'b2'}: no __consumer_offsets partition found" in err
    code, out, err = cli(capsys, tmp_path / "b1", tmp_path / "b2", "--lag")
    assert "┃ log end ┃ lag ┃" in out and "│      20 │ -10 │" in out


def test_log_end_offset_walks_from_the_last_index_entry(tmp_path) -> None:
    from kafkatool.segment.logdir import Partition

    for i, (index_batch, bogus) in enumerate(((None, False), (30, False), (30, True), (49, False))):
        _data_partition(tmp_path / f"d{i}", "t", 0, 50, index_batch=index_batch, bogus_index=bogus)
        assert gr.log_end_offset(Partition(str(tmp_path / f"d{i}" / "t-0"))) == 50


def test_real_lag_against_kafka_python(capsys) -> None:
    """GroupA committed 204 on foo-0; foo-0's last record, read by kafka-python, is offset 203."""
    root = real_fixture("xpxwo100__bullShit/tmp/kafka-logs")
    last = -1
    for r in _kafka_python_records(root / "foo-0"):
        last = r.offset
    code, out, err = cli(capsys, root, "--format", "jsonl", "--group", "GroupA", "--lag")
    o = offsets_of(groups_by_id(jsonl(out))["GroupA"])["foo", 0]
    assert (o["logEndOffset"], o["lag"]) == (last + 1, last + 1 - 204) == (204, 0)
