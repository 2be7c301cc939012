"""``--cluster-metadata-decoder`` (kafkatool.record.topics.metadata) and the codec's fast path.

Expected texts come from outside kafkatool: spec §16.9's golden payload, records written out
byte by byte here from the schemas (internal-schemas.json) and the JSON rules of spec §15.3 /
internal-schemas.md §5, and Kafka's exception messages as its sources at the spec's commit
(1eb7644349) word them:

* server-common/src/main/java/org/apache/kafka/server/common/serialization/AbstractApiMessageSerde.java
  (unsignedIntToShort: "Error while reading <entity>", "Value for <entity> was too large.";
  frame version 0 / other; "Failed to deserialize record with type <apiKey>";
  "Found <n> byte(s) of garbage after <apiKey>"; an unknown apiKey wrapped as
  new MetadataParseException(e), whose message is the cause's toString());
* generator/src/main/java/org/apache/kafka/message/MetadataRecordTypeGenerator.java
  (fromId: UnsupportedVersionException "Unknown metadata id <id>");
* core/src/main/scala/kafka/tools/DumpLogSegments.scala (ClusterMetadataLogMessageParser:
  "Error at <offset>, skipping. <getMessage>").
"""

from __future__ import annotations

import base64
import json
import math
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkatool.errors import InvalidRecordError
from kafkatool.record import message
from kafkatool.record.message import UNKNOWN_TAGS, default_value, encode
from kafkatool.record.schemas import MESSAGES
from kafkatool.record.topics import Decoded, Message, decoder
from kafkatool.record.topics.metadata import FrameError, decode, read_frame, record_type_name

UUID_HEX = "000102030405060708090a0b0c0d0e0f"
UUID_TEXT = "AAECAwQFBgcICQoLDA0ODw"  # base64url of bytes 0..15, unpadded (Kafka's Uuid.toString)
UUID2_HEX = "ffeeddccbbaa99887766554433221100"
UUID2_TEXT = "_-7dzLuqmYh3ZlVEMyIRAA"


def _payload(hex_value: str, offset: int = 0) -> str:
    d = decode(None, bytes.fromhex(hex_value.replace(" ", "")), offset)
    assert d.key is None and d.key_text is None and d.key_json is None and not d.fatal
    return d.payload_text


# ------------------------------------------------------------ golden and hand-written records


def test_spec_16_9_feature_level_record_golden():
    value = bytes.fromhex("01 0c 00 11 6d657461646174612e76657273696f6e 0015 00".replace(" ", ""))
    assert len(value) == 23
    d = decoder("cluster-metadata")(None, value, 0)
    assert d.payload_text == '{"type":"FEATURE_LEVEL_RECORD","version":0,"data":{"name":"metadata.version","featureLevel":21}}'
    assert d.error is None
    assert d.value == Message("FeatureLevelRecord", 0, {"Name": "metadata.version", "FeatureLevel": 21})
    assert d.payload_json == {"type": "FEATURE_LEVEL_RECORD", "version": 0,
                              "data": {"name": "metadata.version", "featureLevel": 21}}
    assert json.loads(d.payload_text) == d.payload_json


def test_non_canonical_frame_varints_read_as_java_reads_them():
    # apiKey 12 as the two-byte varint 8c 00 and version 0 as 80 00: ByteUtils.readUnsignedVarint accepts them
    assert _payload("01 8c00 8000 11 6d657461646174612e76657273696f6e 0015 00") == (
        '{"type":"FEATURE_LEVEL_RECORD","version":0,"data":{"name":"metadata.version","featureLevel":21}}')


def test_topic_record_by_hand():
    hexv = "01 02 00" + " 04 666f6f" + UUID_HEX + " 00"
    assert _payload(hexv) == ('{"type":"TOPIC_RECORD","version":0,"data":{"name":"foo","topicId":"%s"}}' % UUID_TEXT)


PARTITION_V0 = ("01 03 00"            # frame 1, apiKey 3, version 0
                " 00000001" + UUID_HEX +  # PartitionId 1, TopicId
                " 03 00000001 00000002"  # Replicas [1, 2] (compact count + 1)
                " 02 00000001"           # Isr [1]
                " 01 01"                 # RemovingReplicas [], AddingReplicas []
                " 00000001"              # Leader 1
                " 00000005 00000007")    # LeaderEpoch 5, PartitionEpoch 7
PARTITION_JSON = ('"partitionId":1,"topicId":"%s","replicas":[1,2],"isr":[1],"removingReplicas":[],'
                  '"addingReplicas":[],"leader":1' % UUID_TEXT)


def test_partition_record_v0_by_hand():
    assert _payload(PARTITION_V0 + " 00") == (
        '{"type":"PARTITION_RECORD","version":0,"data":{%s,"leaderEpoch":5,"partitionEpoch":7}}' % PARTITION_JSON)
    # tag 0 LeaderRecoveryState = 1 (size 1): printed in schema order, after leader
    assert _payload(PARTITION_V0 + " 01 00 01 01") == (
        '{"type":"PARTITION_RECORD","version":0,"data":{%s,"leaderRecoveryState":1,"leaderEpoch":5,'
        '"partitionEpoch":7}}' % PARTITION_JSON)
    # tag 0 written with its default value: not printed (JsonConverter prints a tag only when not default)
    assert '"leaderRecoveryState"' not in _payload(PARTITION_V0 + " 01 00 01 00")


def test_partition_record_v1_directories_by_hand():
    v1 = PARTITION_V0.replace("01 03 00", "01 03 01", 1) + " 03" + UUID_HEX + UUID2_HEX + " 00"
    assert _payload(v1) == (
        '{"type":"PARTITION_RECORD","version":1,"data":{%s,"leaderEpoch":5,"partitionEpoch":7,'
        '"directories":["%s","%s"]}}' % (PARTITION_JSON, UUID_TEXT, UUID2_TEXT))


def test_partition_record_v2_tagged_elr_by_hand():
    body = PARTITION_V0.replace("01 03 00", "01 03 02", 1) + " 02" + UUID_HEX
    # tags out of order on the wire (a reader accepts any order): 2 LastKnownElr = [], 1 ELR = [2]
    hexv = body + " 02" + " 02 01 01" + " 01 05 02 00000002"
    assert _payload(hexv) == (
        '{"type":"PARTITION_RECORD","version":2,"data":{%s,"leaderEpoch":5,"partitionEpoch":7,'
        '"directories":["%s"],"eligibleLeaderReplicas":[2],"lastKnownElr":[]}}' % (PARTITION_JSON, UUID_TEXT))
    # without tags the nullable ELR fields are null = their default: not printed
    assert _payload(body + " 00").endswith('"directories":["%s"]}}' % UUID_TEXT)
    # an unknown tag (9) is skipped and not printed
    assert _payload(body + " 01 09 02 abcd").endswith('"directories":["%s"]}}' % UUID_TEXT)


def test_register_broker_record_v0_by_hand():
    hexv = ("01 00 00"
            " 00000001" + UUID_HEX +                 # BrokerId 1, IncarnationId
            " 0000000000000010"                      # BrokerEpoch 16
            " 02 0a 504c41494e54455854 0a 6c6f63616c686f7374 2384 0000 00"  # 1 endpoint, its tags
            " 02 11 6d657461646174612e76657273696f6e 0001 0015 00"          # 1 feature
            " 00"                                    # Rack null
            " 01"                                    # Fenced true
            " 00")
    assert _payload(hexv) == (
        '{"type":"REGISTER_BROKER_RECORD","version":0,"data":{"brokerId":1,"incarnationId":"%s",'
        '"brokerEpoch":16,"endPoints":[{"name":"PLAINTEXT","host":"localhost","port":9092,'
        '"securityProtocol":0}],"features":[{"name":"metadata.version","minSupportedVersion":1,'
        '"maxSupportedVersion":21}],"rack":null,"fenced":true}}' % UUID_TEXT)


def test_config_record_null_value_by_hand():
    hexv = "01 04 00 02 04 666f6f 0f 636c65616e75702e706f6c696379 00 00"
    assert _payload(hexv) == ('{"type":"CONFIG_RECORD","version":0,"data":{"resourceType":2,'
                              '"resourceName":"foo","name":"cleanup.policy","value":null}}')


@pytest.mark.parametrize("double_hex,text", [
    ("416312d000000000", "1.0E7"),      # Java Double.toString switches to E notation at 10^7
    ("4059000000000000", "100.0"),
    ("3f1a36e2eb1c432d", "1.0E-4"),     # and below 10^-3
    ("3f50624dd2f1a9fc", "0.001"),
    ("4162d687e0000000", "9876543.0"),
    ("8000000000000000", "-0.0"),
    ("0000000000000001", "4.9E-324"),   # Double.MIN_VALUE: two digits closer than "5E-324"
    ("7ff8000000000000", '"NaN"'),      # Jackson writes non-finite doubles as strings
    ("fff0000000000000", '"-Infinity"'),
])
def test_client_quota_record_float_by_hand(double_hex, text):
    hexv = ("01 0e 00 02 05 75736572 06 616c696365 00"          # Entity [{user, alice}]
            " 13 70726f64756365725f627974655f72617465"         # Key producer_byte_rate
            " " + double_hex + " 00 00")                       # Value, Remove false, tags
    assert _payload(hexv) == (
        '{"type":"CLIENT_QUOTA_RECORD","version":0,"data":{"entity":[{"entityType":"user",'
        '"entityName":"alice"}],"key":"producer_byte_rate","value":%s,"remove":false}}' % text)


def test_control_characters_escaped_as_jackson_does():
    # ConfigRecord value "a\x01b\\u001f\n": Jackson escapes U+0001 as \u0001 (upper-case hex), a
    # backslash as \\, a newline as \n
    value = "a\x01\x1fb\\u001f\n"
    raw = value.encode()
    hexv = "01 04 00 02 02 78 02 79 %02x %s 00" % (len(raw) + 1, raw.hex())
    assert _payload(hexv).endswith('"value":"a\\u0001\\u001Fb\\\\u001f\\n"}}')


def test_record_type_names():
    assert record_type_name(3) == "PARTITION_RECORD"
    assert record_type_name(21) == "ZK_MIGRATION_STATE_RECORD"
    assert record_type_name(17) == "BROKER_REGISTRATION_CHANGE_RECORD"
    assert record_type_name(6) is None


# ------------------------------------------------------------ Kafka's error wording


@pytest.mark.parametrize("hex_value,message", [
    ("", "Error while reading frame version"),                    # BufferUnderflowException
    ("81", "Error while reading frame version"),                  # a varint cut short
    ("ffffffff8f", "Error while reading frame version"),          # 5th byte's high bit: too long
    ("00 0c 00", "Could not deserialize metadata record with frame version 0. Note that upgrades "
                 "from the preview release of KRaft in 2.8 to newer versions are not supported."),
    ("02 0c 00", "Could not deserialize metadata record due to unknown frame version 2"
                 "(only frame version 1 is supported)"),
    # the same frames before a whole FeatureLevelRecord body
    ("00 0c 00 11 6d657461646174612e76657273696f6e 0015 00",
     "Could not deserialize metadata record with frame version 0. Note that upgrades "
     "from the preview release of KRaft in 2.8 to newer versions are not supported."),
    ("02 0c 00 11 6d657461646174612e76657273696f6e 0015 00",
     "Could not deserialize metadata record due to unknown frame version 2(only frame version 1 is supported)"),
    ("904e904e", "Could not deserialize metadata record due to unknown frame version 10000"
                 "(only frame version 1 is supported)"),          # DumpLogSegmentsTest's bogus record
    ("808002", "Value for frame version was too large."),         # 32768
    ("ffffffff0f", "Could not deserialize metadata record due to unknown frame version -1"
                   "(only frame version 1 is supported)"),        # int -1: not > 32767, (short) -1
    ("ffffffff7f", "Could not deserialize metadata record due to unknown frame version -1"
                   "(only frame version 1 is supported)"),        # 5th byte's bits above 31 fall off
    ("8080808010 0c 00", "Could not deserialize metadata record with frame version 0. Note that upgrades "
                         "from the preview release of KRaft in 2.8 to newer versions are not supported."),
    ("01", "Error while reading type"),
    ("01 808002 00", "Value for type was too large."),
    ("01 0c", "Error while reading version"),
    ("01 0c 808002", "Value for version was too large."),
    ("01 0c ffff01", "Failed to deserialize record with type 12"),          # 32767: read (clamped)
    ("01 06 00", "org.apache.kafka.common.errors.UnsupportedVersionException: Unknown metadata id 6"),
    ("01 ffff01 00", "org.apache.kafka.common.errors.UnsupportedVersionException: Unknown metadata id 32767"),
    ("01 0c 00 11 6d657461", "Failed to deserialize record with type 12"),   # truncated string
    ("01 0c 00 00 0015 00", "Failed to deserialize record with type 12"),    # non-nullable null
    ("01 0c 00 11 6d657461646174612e76657273696f6e 0015 00 abcd",
     "Found 2 byte(s) of garbage after 12"),
])
def test_error_wording(hex_value, message):
    d = decode(None, bytes.fromhex(hex_value.replace(" ", "")), 42)
    assert d.payload_text == f"Error at 42, skipping. {message}"
    assert d.error == d.payload_text
    assert d.value is None and d.payload_json is None and d.key_text is None and not d.fatal
    with pytest.raises(FrameError) as info:
        read_frame(bytes.fromhex(hex_value.replace(" ", "")))
    assert info.value.kafka_message == message
    assert isinstance(info.value, InvalidRecordError) and info.value.position is not None


def test_string_longer_than_32767_is_refused_as_kafka_does():
    # the generated reader throws "string field name had invalid length 40000"
    name = b"n" * 40000
    hexv = "01 04 00 02 02 78" + uvarint(len(name) + 1).hex() + name.hex() + "00 00"
    assert _payload(hexv, 9) == "Error at 9, skipping. Failed to deserialize record with type 4"
    with pytest.raises(InvalidRecordError) as info:
        message.decode("ConfigRecord", bytes.fromhex(hexv.replace(" ", "")), 0, pos=3)
    assert info.value.kafka_cause == "string field name had invalid length 40000"


def test_null_value_is_an_error_not_a_crash():
    d = decode(None, None, 7)
    assert d.payload_text == "Error at 7, skipping. Error while reading frame version"
    assert not d.fatal


def test_versions_past_the_schema_read_as_kafka_does():
    """The generated reader never checks the version (the clamp rule): PartitionRecord v5
    reads with the v2 layout and prints "version":5; FeatureLevelRecord v3 as v0."""
    v2 = bytes.fromhex((PARTITION_V0.replace("01 03 00", "01 03 02", 1) + " 01" + " 00").replace(" ", ""))
    v5 = v2[:2] + b"\x05" + v2[3:]
    assert decode(None, v5, 0).payload_text == decode(None, v2, 0).payload_text.replace(
        '"version":2', '"version":5')
    golden = bytes.fromhex("010c03116d657461646174612e76657273696f6e001500")
    assert decode(None, golden, 0).payload_text.startswith('{"type":"FEATURE_LEVEL_RECORD","version":3,')
    # bytes of a future layout that do not fit the newest one known are an unreadable record
    assert decode(None, v5 + b"\x00", 0).payload_text == "Error at 0, skipping. Found 1 byte(s) of garbage after 3"


# ------------------------------------------------------------ hypothesis: never raises, round trips

_INT_RANGES = {
    "int8": (-(1 << 7), (1 << 7) - 1), "int16": (-(1 << 15), (1 << 15) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1), "int64": (-(1 << 63), (1 << 63) - 1),
    "uint16": (0, (1 << 16) - 1), "uint32": (0, (1 << 32) - 1),
}


def _in(rng, v):
    return rng is not None and rng[0] <= v <= rng[1]


def _primitive(t):
    if t in _INT_RANGES:
        lo, hi = _INT_RANGES[t]
        return st.one_of(st.integers(lo, hi), st.sampled_from([lo, hi, 0, -1 if lo < 0 else 1]))
    return {
        "float64": st.floats(allow_nan=False),
        "bool": st.booleans(),
        "uuid": st.binary(min_size=16, max_size=16).map(lambda b: base64.urlsafe_b64encode(b).decode().rstrip("=")),
        "string": st.text(max_size=6),
        "bytes": st.binary(max_size=6),
    }[t]


def _value_of(fields, structs, v, flex):
    parts = {}
    for f in fields:
        name, t = f[0], f[1]
        if not _in(f[2], v):
            parts[name] = st.just(default_value(f, structs))
            continue
        et = t[2:] if t.startswith("[]") else t
        if et in _INT_RANGES or et in ("float64", "bool", "uuid", "string", "bytes"):
            s = _primitive(et)
        else:
            s = _value_of(f[7] or structs[et], structs, v, flex)
        if t.startswith("[]"):
            s = st.lists(s, max_size=3)
        if _in(f[3], v):
            s = st.one_of(st.none(), s)
        parts[name] = s
    base = st.fixed_dictionaries(parts)
    if not flex:
        return base
    known = {f[5] for f in fields if f[5] is not None}
    extra = st.lists(st.tuples(st.integers(0, 30).filter(lambda t: t not in known), st.binary(max_size=3)),
                     max_size=2, unique_by=lambda tb: tb[0]).map(lambda xs: sorted(xs))
    return st.tuples(base, extra).map(lambda p: {**p[0], UNKNOWN_TAGS: p[1]} if p[1] else p[0])


def message_values(name, v):
    """Random values of message ``name`` at version ``v`` (shared with test_topics_remote)."""
    m = MESSAGES[name]
    v = message.clamp_version(name, v)
    return _value_of(m["fields"], m["structs"], v, m["flexibleFrom"] is not None and v >= m["flexibleFrom"])


def uvarint(n: int) -> bytes:
    """Hand-rolled unsigned LEB128 (independent of kafkatool's)."""
    out = bytearray()
    while True:
        if n < 0x80:
            out.append(n)
            return bytes(out)
        out.append(n & 0x7F | 0x80)
        n >>= 7


METADATA_CASES = [(name, v) for name, m in sorted(MESSAGES.items()) if m["category"] == "metadata"
                  for v in range(m["validVersions"][0], m["validVersions"][1] + 1)]


def test_cases_cover_every_metadata_record():
    assert {n for n, _ in METADATA_CASES} == {n for n, m in MESSAGES.items() if m["category"] == "metadata"}
    assert len({n for n, _ in METADATA_CASES}) == 25


def _same(a, b):
    """Equality with NaN equal to itself."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return set(a) == set(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b and type(a) is type(b)


@pytest.mark.parametrize("name,version", METADATA_CASES, ids=[f"{n}-v{v}" for n, v in METADATA_CASES])
def test_round_trip_through_decode(name, version):
    api_key = MESSAGES[name]["apiKey"]

    @settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(message_values(name, version), st.integers(0, 1 << 40))
    def check(value, offset):
        framed = b"\x01" + uvarint(api_key) + uvarint(version) + encode(name, value, version)
        d = decode(None, framed, offset)
        assert d.error is None, d.payload_text
        assert d.value.name == name and d.value.version == version
        assert _same(d.value.data, value)
        assert [k for k in d.value.data if k != UNKNOWN_TAGS] == [f[0] for f in MESSAGES[name]["fields"]]
        tree = d.payload_json
        assert tree["type"] == MESSAGES[name]["recordTypeName"] and tree["version"] == version
        assert _same(tree["data"], message.to_json_reference(name, value, version))
        assert _same(json.loads(d.payload_text), json.loads(json.dumps(tree)))
        assert d.payload_text.startswith('{"type":"%s","version":%d,"data":{' % (tree["type"], version))

    check()


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=80), st.integers(-1, 1 << 62))
def test_random_bytes_never_raise(data, offset):
    d = decode(None, data, offset)
    assert isinstance(d, Decoded)
    if d.error is not None:
        assert d.payload_text == d.error and d.error.startswith(f"Error at {offset}, skipping. ")
    else:
        assert d.payload_text.startswith('{"type":"')


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.sampled_from(METADATA_CASES).flatmap(lambda c: st.tuples(st.just(c), message_values(*c))),
       st.integers(0, 1 << 16), st.integers(0, 255))
def test_truncations_and_corruptions_never_raise(case_value, where, byte):
    (name, version), value = case_value
    framed = b"\x01" + uvarint(MESSAGES[name]["apiKey"]) + uvarint(version) + encode(name, value, version)
    for cut in range(len(framed)):
        d = decode(None, framed[:cut], 3)
        assert d.error is not None and d.payload_text.startswith("Error at 3, skipping. ")
    bad = bytearray(framed)
    bad[where % len(bad)] = byte
    d = decode(None, bytes(bad), 3)
    assert (d.error is None) == (d.value is not None)


# ------------------------------------------------------------ the codec's compiled fast path


def _outcome(fn, *args):
    try:
        return ("ok",) + tuple(fn(*args))
    except InvalidRecordError as e:
        return ("error", str(e), e.position, getattr(e, "kafka_cause", None))


ALL_CASES = [(name, v) for name, m in sorted(MESSAGES.items())
             for v in range(m["validVersions"][0], m["validVersions"][1] + 1)]


@pytest.mark.parametrize("name,version", ALL_CASES, ids=[f"{n}-v{v}" for n, v in ALL_CASES])
def test_compiled_reader_agrees_with_the_table_walk(name, version):
    """decode (compiled reader, table walk when it gives up) and decode_reference (table walk
    only) give the same value, end and error (text, position, Kafka cause) on well-formed,
    truncated and corrupted bytes, at the version and past it; to_json agrees with
    to_json_reference on whatever decodes."""

    @settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(message_values(name, version), st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255)),
                                                   min_size=1, max_size=12))
    def check(value, changes):
        data = encode(name, value, version)
        variants = [data, data + b"\x00"] + [data[:i] for i in range(len(data))]
        for where, byte in changes:
            if data:
                bad = bytearray(data)
                bad[where % len(bad)] = byte
                variants.append(bytes(bad))
        for blob in variants:
            for v in {version, version + 1}:
                fast = _outcome(message.decode, name, blob, v)
                slow = _outcome(message.decode_reference, name, blob, v)
                assert repr(fast) == repr(slow), (blob.hex(), v)  # repr: key order too, NaN equal
                if fast[0] == "ok":
                    assert repr(message.to_json(name, fast[1], v)) == repr(message.to_json_reference(name, fast[1], v))

    check()


def test_compiled_reader_inside_larger_data_and_memoryview():
    value = bytes.fromhex(PARTITION_V0.replace(" ", "") + "00")
    body, end = message.decode("PartitionRecord", value, 0, pos=3)
    assert end == len(value)
    padded = b"\xff" * 5 + value + b"\xee"
    assert message.decode("PartitionRecord", padded, 0, pos=8) == (body, end + 5)
    assert message.decode("PartitionRecord", memoryview(value), 0, pos=3) == (body, end)
    assert decode(None, memoryview(value), 0).payload_text == decode(None, value, 0).payload_text


# ------------------------------------------------------------ real broker-written files


def test_every_real_cluster_metadata_record_decodes(real):
    """Every data record of every __cluster_metadata log, .checkpoint snapshot and
    bootstrap.checkpoint under greenlemonT__kafka-temp decodes with no error (control
    records are not given to decoders)."""
    from kafkatool.record.records import batch_record_chunks
    from kafkatool.segment.logdir import Segment

    root = real / "greenlemonT__kafka-temp"
    if not root.is_dir():
        pytest.skip("greenlemonT__kafka-temp is not in the real fixtures")
    files = sorted(p for p in root.rglob("*") if p.is_file() and (
        ("__cluster_metadata" in p.parent.name and p.suffix in (".log", ".checkpoint"))
        or p.name == "bootstrap.checkpoint"))
    kinds = {"log": 0, "checkpoint": 0, "bootstrap": 0}
    types: set[str] = set()
    for path in files:
        reader = Segment.at(path, 0 if path.suffix == ".checkpoint" else None).batches()
        n = 0
        for batch in reader:
            if batch.is_control:
                continue
            for chunk in batch_record_chunks(batch, reader.data):
                for r in chunk:
                    d = decode(r.key, r.value, r.offset)
                    assert d.error is None, (str(path), r.offset, d.payload_text)
                    assert json.loads(d.payload_text) == d.payload_json
                    types.add(d.payload_json["type"])
                    n += 1
        kind = "bootstrap" if path.name == "bootstrap.checkpoint" else path.suffix[1:]
        kinds[kind] += n
    assert all(kinds.values()), kinds
    assert {"REGISTER_BROKER_RECORD", "TOPIC_RECORD", "PARTITION_RECORD", "FEATURE_LEVEL_RECORD"} <= types, types


# Double.toString as JDK 25 (the JDK 19+ algorithm, which Double.toString's javadoc specifies)
# printed these doubles (bits in hex), captured with a three-line Java program on this box.
# JDK 17 and older print a few large integral doubles with more digits (1.152921504606847E18
# comes out 1.15292150460684698E18 there): kafkatool follows the specified behaviour.
JAVA_DOUBLES = [
    ("4059000000000000", "100.0"), ("416312d000000000", "1.0E7"), ("3f1a36e2eb1c432d", "1.0E-4"),
    ("3f50624dd2f1a9fc", "0.001"), ("3f5061e273273f09", "9.999E-4"), ("416312cfe0000000", "9999999.0"),
    ("416312cfffffffff", "9999999.999999998"), ("416312d000000001", "1.0000000000000002E7"),
    ("3fb999999999999a", "0.1"), ("3fd5555555555555", "0.3333333333333333"),
    ("3fe5555555555555", "0.6666666666666666"), ("44b52d02c7e14af6", "1.0E23"), ("447c7e83209e90b2", "8.41E21"),
    ("43e0000000000000", "9.223372036854776E18"), ("43b0000000000000", "1.152921504606847E18"),
    ("0000000000000001", "4.9E-324"), ("0000000000000002", "9.9E-324"), ("0000000000000003", "1.5E-323"),
    ("0010000000000000", "2.2250738585072014E-308"), ("7fefffffffffffff", "1.7976931348623157E308"),
    ("4011666666666666", "4.35"), ("3fd3333333333333", "0.3"), ("40fe240c9fbe76c9", "123456.789"),
    ("444b1ae4d6e2ef50", "1.0E21"), ("3e7ad7f29abcaf48", "1.0E-7"), ("4130000000000000", "1048576.0"),
    ("3fe0000000000000", "0.5"), ("3eea36e2eb1c432d", "1.25E-5"), ("61790134676b1b69", "3.515438005395328E161"),
    ("9974d75b333824fe", "-4.789896687487539E-186"), ("3af27f802dc5fd3d", "9.563267501187344E-25"),
    ("221c4e003f9931ee", "2.2667337579043673E-144"), ("162a01dec28753f8", "6.6360289801666435E-202"),
    ("baa1c6f1404b6eaf", "-2.8720484250087597E-26"), ("87e355b26210b784", "-1.1437010997230169E-270"),
    ("b35331ceaf2ed9dd", "-1.8663756272802588E-61"), ("16ff82e389e3995a", "6.58671645043746E-198"),
    ("9fb932d4f0397722", "-7.341385115580017E-156"), ("331057ca7d411fab", "9.931867656288624E-63"),
    ("b8e3c71f6bf08d62", "-1.190334435860988E-34"),
    ("0000000000000000", "0.0"), ("8000000000000000", "-0.0"), ("7ff0000000000000", "Infinity"),
    ("fff0000000000000", "-Infinity"), ("7ff8000000000000", "NaN"),
]


@pytest.mark.parametrize("bits,text", JAVA_DOUBLES)
def test_double_text_matches_java(bits, text):
    assert message.java_double(struct.unpack(">d", bytes.fromhex(bits))[0]) == text


def test_kafka_cause_names_fields_as_the_generated_reader_does():
    """MessageDataGenerator passes field.camelCaseName() (and "<name> element" for elements of
    string/bytes arrays) to its "non-nullable field ..." / "string field ..." messages."""
    def cause(name, data, version=0):
        with pytest.raises(InvalidRecordError) as info:
            message.decode(name, data, version)
        return info.value.kafka_cause

    assert cause("TransactionLogKey", b"\xff\xff") == "non-nullable field transactionalId was serialized as null"
    # ConsumerProtocolSubscription v0: Topics []string, one element with length -1
    assert cause("ConsumerProtocolSubscription", b"\x00\x00\x00\x01\xff\xff") == (
        "non-nullable field topics element was serialized as null")
    # DelegationTokenRecord: Owner "", Requester "", Renewers [one string of compact length 32768]
    assert cause("DelegationTokenRecord", b"\x01\x01\x02\x81\x80\x02") == (
        "string field renewers element had invalid length 32768")


def test_compact_lengths_are_java_int_arithmetic():
    # ConfigRecord's nullable Value with compact length uvarint 2**31 + 1: readUnsignedVarint() - 1
    # is Integer.MIN_VALUE, negative, so null (as in Kafka); non-nullable Name the same way is an error
    head = "01 04 00 02 02 78 02 79"
    assert _payload(head + " 8180808008 00").endswith('"value":null}}')
    assert _payload("01 04 00 02 02 78 8180808008 00 00") == "Error at 0, skipping. Failed to deserialize record with type 4"


def test_every_frame_version_number_is_cheap():
    """Versions come from the data: a log with every version 0..32767 must not compile a
    reader per version (they share the clamped one) nor grow a cache without bound."""
    import time

    body = bytes.fromhex("116d657461646174612e76657273696f6e001500")
    start = time.perf_counter()
    for v in range(0x8000):
        d = decode(None, b"\x01\x0c" + uvarint(v) + body, v)
        assert d.error is None
    assert d.payload_text.startswith('{"type":"FEATURE_LEVEL_RECORD","version":32767,')
    assert time.perf_counter() - start < 10  # ~0.4 s; a compile per version takes minutes


def test_strings_decode_as_java_new_string():
    """new String(bytes, UTF_8) (Readable.readString): an encoded surrogate ED A0 80 is ONE
    U+FFFD in Java (three with Python's "replace"); ED A0 then a non-continuation byte is one
    for the two bytes; other malformed bytes one each (JDK 17 and 25 agree)."""
    raw = bytes.fromhex("eda080 41 eda0 41 ff c3")
    hexv = "01 04 00 02 02 78 02 79 %02x %s 00" % (len(raw) + 1, raw.hex())
    assert _payload(hexv).endswith('"value":"\ufffdA\ufffdA\ufffd\ufffd"}}')
    assert message.java_string(raw) == "\ufffdA\ufffdA\ufffd\ufffd"
    assert message.decode_reference("ConfigRecord", bytes.fromhex(hexv.replace(" ", "")), 0, pos=3)[0]["Value"] == (
        "\ufffdA\ufffdA\ufffd\ufffd")



# What jackson-core 2.17.2's JsonGenerator (JsonNode.toString's writer; Kafka pins 2.16.2) wrote on
# JDK 25 for {"s": chars U+0000..U+007F + "\u00e9\u2028\u2029\ufffd\U0001F600", "d": [doubles]},
# captured with a small Java program on this box.
JACKSON_TEXT = '{"s":"\\u0000\\u0001\\u0002\\u0003\\u0004\\u0005\\u0006\\u0007\\b\\t\\n\\u000B\\f\\r\\u000E\\u000F\\u0010\\u0011\\u0012\\u0013\\u0014\\u0015\\u0016\\u0017\\u0018\\u0019\\u001A\\u001B\\u001C\\u001D\\u001E\\u001F !\\"#$%&\'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\\\]^_`abcdefghijklmnopqrstuvwxyz{|}~\x7fé\u2028\u2029�😀","d":[100.0,1.0E7,1.0E-4,"NaN","Infinity","-Infinity",-0.0,4.9E-324,1.152921504606847E18]}'


def test_dumps_writes_what_jackson_writes():
    text = "".join(chr(c) for c in range(0x80)) + "\u00e9\u2028\u2029\ufffd\U0001F600"
    doubles = [100.0, 1e7, 1e-4, float("nan"), float("inf"), float("-inf"), -0.0, 5e-324, 1.152921504606847e18]
    assert message.dumps({"s": text, "d": doubles}) == JACKSON_TEXT
    assert message.dumps({"s": text}, floats=False) == JACKSON_TEXT.split(',"d"')[0] + "}"


# ------------------------------------------------------------ where Kafka's generated reader is not the clamp rule
# (each expected text below was also what Kafka's own classes printed: the generator at the spec
# commit run on a JVM on this box, MetadataRecordSerde + the generated JsonConverters, 22,000 cases)

def test_known_tag_size_is_not_used_as_in_kafka():
    # AbortTransactionRecord tag 0 (Reason) declared 3 bytes, its string is 2: the next byte is garbage
    assert _payload("01 19 00 01 00 03 02 78 79") == "Error at 0, skipping. Found 1 byte(s) of garbage after 25"
    # declared 2 bytes, the string is 5 (length byte + "xyzw"): read whole
    assert _payload("01 19 00 01 00 02 05 78797a77") == (
        '{"type":"ABORT_TRANSACTION_RECORD","version":0,"data":{"reason":"xyzw"}}')
    # a tagged-field count of 2**31 is a negative Java int: no tags
    assert _payload("01 19 00 8080808008") == '{"type":"ABORT_TRANSACTION_RECORD","version":0,"data":{}}'
    # tag number 2**32 is the Java int 0: the known tag Reason
    assert _payload("01 19 00 01 8080808010 02 02 78") == (
        '{"type":"ABORT_TRANSACTION_RECORD","version":0,"data":{"reason":"x"}}')


REGISTER_V4 = "01 00 04 00000001 00" + "00" * 16 + " 0000000000000010"


def test_nested_structs_refuse_versions_past_the_schema():
    """A nested (non-common) struct class checks the version it is read at: RegisterBrokerRecord
    v4 reads (as v3) while its arrays are empty, and fails on its first BrokerEndpoint."""
    assert _payload(REGISTER_V4 + " 01 01 00 01 00 00") == (
        '{"type":"REGISTER_BROKER_RECORD","version":4,"data":{"brokerId":1,"isMigratingZkBroker":false,'
        '"incarnationId":"AAAAAAAAAAAAAAAAAAAAAA","brokerEpoch":16,"endPoints":[],"features":[],"rack":null,'
        '"fenced":true,"inControlledShutdown":false}}')
    endpoint = " 02 0a504c41494e54455854 0a6c6f63616c686f7374 2384 0000 00 01 00 01 00 00"
    assert _payload(REGISTER_V4 + endpoint) == "Error at 0, skipping. Failed to deserialize record with type 0"
    assert _payload(REGISTER_V4.replace("01 00 04", "01 00 03", 1) + endpoint).startswith(
        '{"type":"REGISTER_BROKER_RECORD","version":3,')
    with pytest.raises(InvalidRecordError) as info:
        message.decode("RegisterBrokerRecord", bytes.fromhex((REGISTER_V4 + endpoint).replace(" ", "")), 4, pos=3)
    assert info.value.kafka_cause == "Can't read version 4 of BrokerEndpoint"
    # ClientQuotaRecord v1 with an entity: EntityData refuses version 1
    assert _payload("01 0e 01 02 0575736572 06616c696365 00 0161 4059000000000000 00 00") == (
        "Error at 0, skipping. Failed to deserialize record with type 14")


def test_tag_not_valid_names_the_version_read():
    # PartitionChangeRecord v1: tag 6 (EligibleLeaderReplicas) is tagged from v2
    with pytest.raises(InvalidRecordError) as info:
        message.decode("PartitionChangeRecord", bytes(20) + b"\x01\x06\x01\x00", 1)
    assert info.value.kafka_cause == "Tag 6 is not valid for version 1"
