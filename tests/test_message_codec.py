"""The schema tables (kafkatool.record.schemas) and the generic message codec (record.message).

* the checked-in tables are what kafkatool/record/schemas/generate.py makes of the reference JSON;
* every message at every valid version round-trips a random value built from the tables;
* hand-written byte vectors check the codec against something independent of it;
* truncated and garbage bytes raise InvalidRecordError with a position, nothing else.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import REPO, SHARED
from message_strategies import message_values
from kafkatool.errors import InvalidRecordError
from kafkatool.record import message
from kafkatool.record.message import UNKNOWN_TAGS, decode, default_value, encode
from kafkatool.record.schemas import MESSAGES

SCHEMAS_JSON = SHARED / "spec" / "internal-schemas.json"
TABLES_PY = REPO / "kafkatool" / "record" / "schemas" / "tables.py"


def _generator():
    spec = importlib.util.spec_from_file_location("gen_schema_tables", REPO / "kafkatool" / "record" / "schemas" / "generate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _reference():
    if not SCHEMAS_JSON.is_file():
        pytest.skip("real fixture internal-schemas.json is missing")
    return json.loads(SCHEMAS_JSON.read_text(encoding="utf-8"))


# ------------------------------------------------------------ tables agree with the reference


def test_tables_agree_with_reference():
    doc = _reference()
    gen = _generator()
    assert gen.render(doc) == TABLES_PY.read_text(encoding="utf-8"), (
        "tables.py is stale: run python -m kafkatool.record.schemas.generate"
    )
    assert gen.convert(doc) == MESSAGES
    assert len(MESSAGES) == 73


def test_tables_structure():
    for name, m in MESSAGES.items():
        lo, hi = m["validVersions"]
        assert 0 <= lo <= hi < 32767, name

        def walk(fields):
            for f in fields:
                assert len(f) == 8
                t = f[1].removeprefix("[]")
                if t[:1].isupper():
                    assert f[7] is not None or t in m["structs"], (name, f[0])
                    walk(f[7] or m["structs"][t])

        walk(m["fields"])


def test_generator_parse_versions():
    gen = _generator()
    assert gen.parse_versions("3") == (3, 3)
    assert gen.parse_versions(" 0-2 ") == (0, 2)
    assert gen.parse_versions("1+") == (1, 32767)
    assert gen.parse_versions("none") is None
    assert gen.parse_versions("") is None
    assert gen.parse_versions(None) is None


# ------------------------------------------------------------ random values from the tables

CASES = [(name, v) for name, m in sorted(MESSAGES.items())
         for v in range(m["validVersions"][0], m["validVersions"][1] + 1)]


@pytest.mark.parametrize("name,version", CASES, ids=[f"{n}-v{v}" for n, v in CASES])
def test_round_trip(name, version):
    @settings(max_examples=25, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(message_values(name, version))
    def check(value):
        data = encode(name, value, version)
        back, end = decode(name, data, version)
        assert end == len(data)
        assert back == value
        # at an offset inside larger data too
        back2, end2 = decode(name, b"\x07\x07" + data + b"\x09", version, pos=2)
        assert (back2, end2) == (value, len(data) + 2)
        # the encoding is canonical
        assert encode(name, back, version) == data

    check()


def test_every_message_has_a_round_trip_case():
    assert {n for n, _ in CASES} == set(MESSAGES)


# ------------------------------------------------------------ hand-written bytes


def _s16(s: bytes) -> bytes:
    return struct.pack(">h", len(s)) + s


def test_offset_commit_key_v0_by_hand():
    data = _s16(b"my-group") + _s16(b"orders") + struct.pack(">i", 7)
    value, end = decode("OffsetCommitKey", data, 0)
    assert value == {"group": "my-group", "topic": "orders", "partition": 7}
    assert end == len(data)
    assert encode("OffsetCommitKey", value, 1) == data  # v0 and v1 identical


def test_offset_commit_value_v1_by_hand():
    # offset int64, metadata string, commitTimestamp int64, expireTimestamp int64 (v1 only)
    data = struct.pack(">q", 42) + _s16(b"meta") + struct.pack(">q", 1000) + struct.pack(">q", 2000)
    value, end = decode("OffsetCommitValue", data, 1)
    assert end == len(data)
    assert value["offset"] == 42 and value["metadata"] == "meta"
    assert value["commitTimestamp"] == 1000 and value["expireTimestamp"] == 2000
    # v3 has the leader epoch instead, and no expire timestamp
    v3 = struct.pack(">q", 42) + struct.pack(">i", 5) + _s16(b"") + struct.pack(">q", 1000)
    value3, end3 = decode("OffsetCommitValue", v3, 3)
    assert end3 == len(v3)
    assert value3["leaderEpoch"] == 5 and value3["metadata"] == "" and value3["expireTimestamp"] == -1


def test_flexible_tagged_string_by_hand():
    # AbortTransactionRecord v0: only a tagged nullable string Reason (tag 0, default null)
    assert encode("AbortTransactionRecord", {"Reason": None}, 0) == b"\x00"
    assert encode("AbortTransactionRecord", {"Reason": "x"}, 0) == b"\x01\x00\x02\x02x"
    assert decode("AbortTransactionRecord", b"\x00", 0) == ({"Reason": None}, 1)
    assert decode("AbortTransactionRecord", b"\x01\x00\x02\x02x", 0) == ({"Reason": "x"}, 5)
    # an unknown tag is kept raw and skipped by size
    value, end = decode("AbortTransactionRecord", b"\x02\x00\x01\x00\x05\x02ab", 0)
    assert end == 8
    assert value == {"Reason": None, UNKNOWN_TAGS: [(5, b"ab")]}


def test_tagged_fields_any_order_on_read_ascending_on_write():
    fields = MESSAGES["TransactionLogValue"]["fields"]
    tags = {f[5]: f[0] for f in fields if f[5] is not None}
    assert len(tags) >= 2
    base = {f[0]: default_value(f, {}) for f in fields}
    base.update({tags[0]: 11, tags[1]: 22})
    data = encode("TransactionLogValue", base, 1)
    value, _ = decode("TransactionLogValue", data, 1)
    assert value == base
    # rebuild the trailing tagged section with the two tags swapped
    sec0 = b"\x00\x08" + struct.pack(">q", 11)
    sec1 = b"\x01\x08" + struct.pack(">q", 22)
    idx = data.index(b"\x02" + sec0 + sec1)
    swapped = data[:idx] + b"\x02" + sec1 + sec0 + data[idx + 1 + len(sec0) + len(sec1):]
    assert decode("TransactionLogValue", swapped, 1)[0] == base


def test_nullable_tagged_struct_null_written_explicitly():
    # ClassicMemberMetadata: tagged nullable struct, default an empty struct (not null)
    name = "ConsumerGroupMemberMetadataValue"
    fields = MESSAGES[name]["fields"]
    base = {f[0]: default_value(f, {}) for f in fields}
    base.update(InstanceId=None, RackId=None, SubscribedTopicRegex=None, ServerAssignor=None)
    plain = encode(name, base, 0)
    assert plain.endswith(b"\x00")  # default struct: tag omitted
    null = encode(name, dict(base, ClassicMemberMetadata=None), 0)
    assert null == plain[:-1] + b"\x01\x00\x01\x00"
    assert decode(name, null, 0)[0]["ClassicMemberMetadata"] is None
    assert decode(name, plain, 0)[0]["ClassicMemberMetadata"] == {"SessionTimeoutMs": 0, "SupportedProtocols": []}


def test_clamp_rule_share_update_value():
    name = "ShareUpdateValue"
    assert MESSAGES[name]["validVersions"] == (0, 0)
    fields = MESSAGES[name]["fields"]
    base = {f[0]: default_value(f, {}) for f in fields}
    data = encode(name, base, 0)
    assert encode(name, base, 1) == data
    assert decode(name, data, 1) == decode(name, data, 0)


def test_uuid_is_base64url_without_padding():
    raw = bytes(range(250, 256)) + bytes(10)
    m = MESSAGES["AccessControlEntryRecord"]
    value = {f[0]: default_value(f, m["structs"]) for f in m["fields"]}
    data = encode("AccessControlEntryRecord", value, 0)
    assert data[:16] == bytes(16)
    got, _ = decode("AccessControlEntryRecord", raw + data[16:], 0)
    assert got["Id"] == base64.urlsafe_b64encode(raw).decode().rstrip("=") == "-vv8_f7_AAAAAAAAAAAAAA"
    assert value["Id"] == "AAAAAAAAAAAAAAAAAAAAAA"
    assert encode("AccessControlEntryRecord", got, 0)[:16] == raw


def test_known_tag_outside_tagged_versions_is_an_error():
    # find a message with a tagged field whose taggedVersions start after the flexible start
    for name, m in sorted(MESSAGES.items()):
        flex = m["flexibleFrom"]
        if flex is None:
            continue
        for f in m["fields"]:
            if f[4] is not None and f[4][0] > max(flex, m["validVersions"][0]):
                v = max(flex, m["validVersions"][0])
                value = {g[0]: default_value(g, m["structs"]) for g in m["fields"]}
                data = encode(name, value, v)
                assert data.endswith(b"\x00")
                bad = data[:-1] + b"\x01" + bytes([f[5]]) + b"\x00"
                with pytest.raises(InvalidRecordError, match=f"Tag {f[5]} is not valid for version {v}"):
                    decode(name, bad, v)
                return
    pytest.skip("no schema has a tag that starts after its flexible versions")


# ------------------------------------------------------------ hostile bytes


@pytest.mark.parametrize("name,version", CASES, ids=[f"{n}-v{v}" for n, v in CASES])
def test_truncations_raise_invalid_record(name, version):
    @settings(max_examples=10, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(message_values(name, version))
    def check(value):
        data = encode(name, value, version)
        for cut in range(len(data)):
            with pytest.raises(InvalidRecordError) as info:
                decode(name, data[:cut], version)
            assert info.value.position is not None
            assert 0 <= info.value.position <= cut

    check()


@settings(max_examples=400)
@given(st.sampled_from(CASES), st.binary(max_size=64))
def test_garbage_raises_only_invalid_record(case, data):
    name, version = case
    try:
        value, end = decode(name, data, version)
    except InvalidRecordError as e:
        assert e.position is not None
    else:
        assert 0 <= end <= len(data)
        assert isinstance(value, dict)


def test_hostile_counts_rejected_before_allocation():
    # OffsetCommitKey v0 with a huge string length; GroupMetadataValue's members array count
    with pytest.raises(InvalidRecordError, match="not enough bytes"):
        decode("OffsetCommitKey", b"\x7f\xff" + b"a" * 10, 0)
    # a flexible array with count 2**32-2 and nothing after it
    name = "ConsumerGroupCurrentMemberAssignmentValue"
    m = MESSAGES[name]
    v = m["validVersions"][0]
    value = {f[0]: default_value(f, m["structs"]) for f in m["fields"]}
    data = encode(name, value, v)
    # keep the fixed-size fields before the first array, then a 5-byte varint count
    first_array = next(i for i, f in enumerate(m["fields"]) if f[1].startswith("[]"))
    fixed = 0
    for f in m["fields"][:first_array]:
        fixed += {"int8": 1, "int16": 2, "int32": 4, "int64": 8, "uuid": 16, "bool": 1}[f[1]]
    hostile = data[:fixed] + b"\xff\xff\xff\xff\x07"
    with pytest.raises(InvalidRecordError, match="count larger than the remaining bytes") as info:
        decode(name, hostile, v)
    assert info.value.position == fixed
    # a non-flexible int32 array count
    name = "ConsumerProtocolAssignment"
    data = encode(name, {}, 0)
    assert data[:4] == b"\x00\x00\x00\x00"
    with pytest.raises(InvalidRecordError, match="count larger than the remaining bytes"):
        decode(name, b"\x7f\xff\xff\xff" + data[4:], 0)


def test_varint_too_long():
    with pytest.raises(InvalidRecordError, match="too long"):
        decode("AbortTransactionRecord", b"\xff\xff\xff\xff\xff\x01", 0)


def test_non_nullable_null_is_an_error():
    with pytest.raises(InvalidRecordError, match="non-nullable field group was serialized as null") as info:
        decode("OffsetCommitKey", b"\xff\xff", 0)
    assert info.value.position == 0


def test_encode_rejects_bad_values():
    with pytest.raises(ValueError):
        encode("OffsetCommitKey", {"group": None, "topic": "t", "partition": 0}, 0)
    with pytest.raises(ValueError):
        encode("OffsetCommitKey", {"group": "g", "topic": "t", "partition": 1 << 40}, 0)


def test_find():
    assert message.find("metadata", 3) == "PartitionRecord"
    assert message.find("group-coordinator", 1, value=True) == "OffsetCommitValue"
    assert message.find("group-coordinator", 2, value=False) == "GroupMetadataKey"
    assert message.find("kraft-control", 3) == "SnapshotHeaderRecord"
    assert message.find("metadata", 6) is None


def test_tags_written_in_ascending_order_partition_change():
    # PartitionChangeRecord lists Directories (tag 8) before tags 6 and 7
    value = {"PartitionId": 1, "TopicId": "AAAAAAAAAAAAAAAAAAAAAA", "Isr": None, "Leader": -2,
             "Replicas": None, "RemovingReplicas": None, "AddingReplicas": None,
             "LeaderRecoveryState": -1, "Directories": ["AAAAAAAAAAAAAAAAAAAAAA"],
             "EligibleLeaderReplicas": [3], "LastKnownElr": [4]}
    data = encode("PartitionChangeRecord", value, 2)
    tags = (b"\x03"  # count
            + b"\x06\x05" + b"\x02" + struct.pack(">i", 3)
            + b"\x07\x05" + b"\x02" + struct.pack(">i", 4)
            + b"\x08\x11" + b"\x02" + bytes(16))
    assert data == struct.pack(">i", 1) + bytes(16) + tags
    assert decode("PartitionChangeRecord", data, 2) == (value, len(data))
    # at v1 tags 6 and 7 are not valid
    with pytest.raises(InvalidRecordError, match="Tag 6 is not valid for version 1"):
        decode("PartitionChangeRecord", data, 1)


# ------------------------------------------------------------ JSON in Kafka's JsonConverter shape


def test_to_json_keys_and_tagged_omission():
    value = {"PartitionId": 1, "TopicId": "AAAAAAAAAAAAAAAAAAAAAA", "Isr": [1, 2], "Leader": -2,
             "Replicas": None, "RemovingReplicas": None, "AddingReplicas": None,
             "LeaderRecoveryState": -1, "Directories": None, "EligibleLeaderReplicas": [],
             "LastKnownElr": None}
    tree = message.to_json("PartitionChangeRecord", value, 2)
    # tagged: Isr shown (not null), Leader default -2 hidden, ELR [] shown (default null)
    assert json.dumps(tree, separators=(",", ":")) == (
        '{"partitionId":1,"topicId":"AAAAAAAAAAAAAAAAAAAAAA","isr":[1,2],"eligibleLeaderReplicas":[]}'
    )
    # v0: fields absent at the version are omitted
    assert "eligibleLeaderReplicas" not in message.to_json("PartitionChangeRecord", value, 0)
    assert message.json_key("KRaftVersionFeature") == "kRaftVersionFeature"
    assert message.json_key("group") == "group"


def test_to_json_bytes_are_padded_standard_base64():
    m = MESSAGES["GroupMetadataValue"]
    v = m["validVersions"][1]
    member = {f[0]: default_value(f, m["structs"]) for f in m["fields"] if f[0] == "members"}
    assert member == {"members": []}
    value = {f[0]: default_value(f, m["structs"]) for f in m["fields"]}
    data = encode("GroupMetadataValue", value, v)
    back, _ = decode("GroupMetadataValue", data, v)
    tree = message.to_json("GroupMetadataValue", back, v)
    assert list(tree)[:2] == ["protocolType", "generation"]
    ses = ("x", "bytes", (0, 0), None, None, None, None, None)
    assert message._json_value(ses, b"\xfb\xff", {}, 0) == "+/8="


# ------------------------------------------------------------ the real broker-written files


def _uvarint_at(b: bytes, p: int) -> tuple[int, int]:
    v = shift = 0
    while True:
        x = b[p]
        p += 1
        v |= (x & 0x7F) << shift
        if not x & 0x80:
            return v, p
        shift += 7


def _decode_whole(name, data, version, pos):
    value, end = decode(name, data, version, pos=pos)
    assert end == len(data), (name, version, end, len(data))
    return value


def _offsets_record(key: bytes | None, value: bytes | None) -> int:
    if key is None:
        return 0
    kv = struct.unpack_from(">h", key)[0]
    _decode_whole(message.find("group-coordinator", kv, value=False), key, kv, 2)
    if value is None:
        return 1
    vv = struct.unpack_from(">h", value)[0]
    vname = message.find("group-coordinator", kv, value=True)
    val = _decode_whole(vname, value, vv, 2)
    n = 2
    if vname == "GroupMetadataValue" and val["protocolType"] == "consumer":
        for member in val["members"]:
            for field, name in (("subscription", "ConsumerProtocolSubscription"),
                                ("assignment", "ConsumerProtocolAssignment")):
                raw = member[field]
                if raw:
                    _decode_whole(name, raw, struct.unpack_from(">h", raw)[0], 2)
                    n += 1
    return n


def _metadata_record(key: bytes | None, value: bytes, control: bool) -> int:
    if control:  # key: int16 version, int16 type; the body has no version prefix (read at v0)
        name = message.find("kraft-control", struct.unpack_from(">h", key, 2)[0])
        assert name is not None
        _decode_whole(name, value, 0, 0)
        return 1
    _frame, p = _uvarint_at(value, 0)
    api_key, p = _uvarint_at(value, p)
    version, p = _uvarint_at(value, p)
    name = message.find("metadata", api_key)
    assert name is not None, api_key
    _decode_whole(name, value, version, p)
    return 1


def test_real_internal_topics_decode_to_the_last_byte(real):
    """Every __consumer_offsets record (keys, values, embedded consumer-protocol payloads) and
    every __cluster_metadata record (logs, .checkpoint snapshots, bootstrap.checkpoint) of the
    real fixtures decodes with no error and no byte left over."""
    from kafkatool import Segment
    from kafkatool.record.records import batch_record_chunks

    counts = {"offsets": 0, "metadata": 0}
    for path in sorted(real.rglob("*")):
        if not path.is_file():
            continue
        if "__consumer_offsets" in str(path) and path.suffix == ".log":
            kind = "offsets"
        elif ("__cluster_metadata" in str(path) and path.suffix in (".log", ".checkpoint")) \
                or path.name == "bootstrap.checkpoint":
            kind = "metadata"
        else:
            continue
        reader = Segment.at(path, 0 if path.suffix == ".checkpoint" else None).batches()
        for batch in reader:
            for chunk in batch_record_chunks(batch, reader.data):
                for r in chunk:
                    if kind == "offsets":
                        counts[kind] += _offsets_record(r.key, r.value)
                    else:
                        counts[kind] += _metadata_record(r.key, r.value, batch.is_control)
    assert counts["offsets"] > 1000 and counts["metadata"] > 1000, counts


def test_real_producer_snapshots_decode(real):
    """Every producer-state .snapshot file reads as ProducerSnapshot (int16 version prefix),
    its Crc the CRC-32C of bytes [6, EOF), its entries those of segment.snapshot's reader."""
    from kafkatool.record.crc import crc32c
    from kafkatool.segment.snapshot import decode_producer_snapshot

    files = sorted(real.rglob("*.snapshot"))
    assert files
    for path in files:
        data = path.read_bytes()
        value = _decode_whole("ProducerSnapshot", data, struct.unpack_from(">h", data)[0], 2)
        assert value["Crc"] == crc32c(data[6:]), path
        other = decode_producer_snapshot(data)
        assert [tuple(e.values()) for e in value["ProducerEntries"]] == [
            (e.producer_id, e.epoch, e.last_sequence, e.last_offset, e.offset_delta, e.timestamp,
             e.coordinator_epoch, e.current_txn_first_offset) for e in other.entries
        ], path


def test_hostile_tagged_sections():
    name = "AbortTransactionRecord"
    # a tagged-field count larger than the bytes left: fails where the data runs out (Kafka: BufferUnderflowException)
    with pytest.raises(InvalidRecordError, match="truncated varint") as info:
        decode(name, b"\x7f\x00", 0)
    assert info.value.position == 2 and info.value.kafka_cause is None
    # an unknown tag whose size runs past the end
    with pytest.raises(InvalidRecordError, match="tag 9: size larger than the remaining bytes"):
        decode(name, b"\x01\x09\x7f\x00", 0)
    # a known tag's declared size is not used, as in Kafka: the value is read as it is encoded
    assert decode(name, b"\x01\x00\x03\x02xy", 0) == ({"Reason": "x"}, 5)
    assert decode(name, b"\x01\x00\x02\x05xyzw", 0) == ({"Reason": "xyzw"}, 8)


@pytest.mark.parametrize("name,version", CASES, ids=[f"{n}-v{v}" for n, v in CASES])
def test_one_byte_corruptions_raise_only_invalid_record(name, version):
    @settings(max_examples=5, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(message_values(name, version), st.integers(0, 1 << 16), st.integers(0, 255))
    def check(value, where, byte):
        data = bytearray(encode(name, value, version))
        if not data:
            return
        data[where % len(data)] = byte
        try:
            back, end = decode(name, bytes(data), version)
        except InvalidRecordError as e:
            assert e.position is not None and 0 <= e.position <= len(data)
        else:
            assert 0 <= end <= len(data) and isinstance(back, dict)

    check()


def test_spec_16_9_golden_payloads():
    """kafka-reference.md §16.9: the bytes and kafka-dump-log's JSON of two records."""
    compact = json.dumps
    # FeatureLevelRecord v0 after the uvarint frame/apiKey/version prefix 01 0c 00
    value = bytes.fromhex("010c00" "11" + b"metadata.version".hex() + "0015" "00")
    assert len(value) == 23
    rec, end = decode("FeatureLevelRecord", value, 0, pos=3)
    assert end == 23
    assert compact(message.to_json("FeatureLevelRecord", rec, 0), separators=(",", ":")) == (
        '{"name":"metadata.version","featureLevel":21}'
    )
    assert encode("FeatureLevelRecord", rec, 0) == value[3:]
    # OffsetCommit key (type 1) and value v3
    key = bytes.fromhex("0001" "0002" "6731" "0002" "7431" "00000000")
    val = bytes.fromhex("0003" "000000000000002a" "00000005" "0000" "0000018bcfe56800")
    k, kend = decode("OffsetCommitKey", key, 1, pos=2)
    v, vend = decode("OffsetCommitValue", val, 3, pos=2)
    assert (kend, vend) == (14, 24)
    assert compact(message.to_json("OffsetCommitKey", k, 1), separators=(",", ":")) == (
        '{"group":"g1","topic":"t1","partition":0}'
    )
    assert compact(message.to_json("OffsetCommitValue", v, 3), separators=(",", ":")) == (
        '{"offset":42,"leaderEpoch":5,"metadata":"","commitTimestamp":1700000000000}'
    )
    assert encode("OffsetCommitKey", k, 1) == key[2:] and encode("OffsetCommitValue", v, 3) == val[2:]


def test_kafka_cause_texts():
    def cause(name, data, version=0):
        with pytest.raises(InvalidRecordError) as info:
            decode(name, data, version)
        return info.value.kafka_cause

    # compact string length 0x20000000 - 1: the string length check comes first
    assert cause("ConsumerGroupMemberMetadataValue", b"\x80\x80\x80\x80\x02x") == (
        "string field instanceId had invalid length 536870911"
    )
    assert cause("OffsetCommitKey", b"\x00\x05ab") == "Error reading byte array of 5 byte(s): only 2 byte(s) available"
    assert cause("OffsetCommitKey", b"\xff\xff") == "non-nullable field group was serialized as null"
    assert cause("OffsetCommitKey", b"\x00\x01g\x00\x01t\x00") is None  # BufferUnderflowException
    assert cause("ConsumerProtocolAssignment", b"\x00\x00\x00\x09") == (
        "Tried to allocate a collection of size 9, but there are only 0 bytes remaining."
    )
    assert cause("AbortTransactionRecord", b"\xff\xff\xff\xff\xff\x01") == (
        "Varint is too long, the most significant bit in the 5th byte is set, converted value: ffffffff"
    )
    assert cause("PartitionChangeRecord", bytes(20) + b"\x01\x06\x01\x00", 1) == "Tag 6 is not valid for version 1"
