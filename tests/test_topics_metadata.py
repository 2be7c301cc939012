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

import hashlib
import json
import math
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkatool.errors import InvalidRecordError
from kafkatool.record import message
from kafkatool.record.message import UNKNOWN_TAGS, encode
from kafkatool.record.schemas import MESSAGES
from kafkatool.record.topics import Decoded, Message, decoder
from kafkatool.record.topics.metadata import FrameError, decode, read_frame, record_type_name
from message_strategies import message_values

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
    digest = hashlib.sha256()
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
                    digest.update(d.payload_text.encode() + b"\n")
                    n += 1
        kind = "bootstrap" if path.name == "bootstrap.checkpoint" else path.suffix[1:]
        kinds[kind] += n
    assert all(kinds.values()), kinds
    assert {"REGISTER_BROKER_RECORD", "TOPIC_RECORD", "PARTITION_RECORD", "FEATURE_LEVEL_RECORD"} <= types, types
    # sha256 of "<payload text>\n" for all 36,660 records in this order, as Kafka's own code prints them
    # (DumpLogSegments' ClusterMetadataLogMessageParser + MetadataRecordSerde + the generated JsonConverters of the
    # spec commit on JDK 17; computed independently by helper A and by B, /tmp/h13/{A,B}): the texts are Kafka's
    assert sum(kinds.values()) == 36660, kinds
    assert digest.hexdigest() == "7e60b2241192d5a83de069ec6b1a887a136ae3ba755d53b298cf280a47eb652c"


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



# ------------------------------------------------------------ outputs of Kafka's own classes
# (decoder kind, value hex, payload text) printed by kafka-dump-log's ClusterMetadataLogMessageParser
# ("M") and RemoteMetadataLogMessageParser ("R") code, run on JDK 17 against the classes Kafka's
# generator makes at the spec commit (1eb7644349) with MetadataRecordSerde, RemoteLogMetadataSerde
# and the storage-api objects (jackson 2.17.2): one case per kind of outcome, picked from ~25,000
# valid, corrupted, truncated, extended and random values (JDK 17 doubles left out: see java_double).
KAFKA_OUTPUTS = [
    ('M', '867225dfb96e9ff3a022',
     'Error at 0, skipping. Could not deserialize metadata record due to unknown frame version 14598(only frame version 1 is supported)'),
    ('M', '00abfde6f7',
     'Error at 0, skipping. Could not deserialize metadata record with frame version 0. Note that upgrades from the preview release of KRaft in 2.8 to newer versions are not supported.'),
    ('M', 'ed',
     'Error at 0, skipping. Error while reading frame version'),
    ('M', '01',
     'Error at 0, skipping. Error while reading type'),
    ('M', '0118',
     'Error at 0, skipping. Error while reading version'),
    ('M', '01000400c8e02601fd525591',
     'Error at 0, skipping. Failed to deserialize record with type 0'),
    ('M', '010e0188dd537697bcd334086b942483fa4d5cdd4a7a77ab674b9c567fc1b92feff907c282a0dca559',
     'Error at 0, skipping. Failed to deserialize record with type 14'),
    ('M', '0118005821daae519489db74ab71fb146561e79a7d0bf201ca3ba2',
     'Error at 0, skipping. Failed to deserialize record with type 24'),
    ('M', '010300caed23e61a8c2709333b3a55b8d8f6fe5e83b3939b6a86576d77fafebec3cd0b838698',
     'Error at 0, skipping. Failed to deserialize record with type 3'),
    ('M', '010400f8bab214775f3ae3d990b780918ffa999c1066d5efa415acf72c06',
     'Error at 0, skipping. Failed to deserialize record with type 4'),
    ('M', '0105030000',
     'Error at 0, skipping. Failed to deserialize record with type 5'),
    ('M', '010701ffff90ee8000000000000000021200ee02ca0a',
     'Error at 0, skipping. Failed to deserialize record with type 7'),
    ('M', '0108017fff',
     'Error at 0, skipping. Failed to deserialize record with type 8'),
    ('M', '01090183ade1b10193b9b952a61be54f547fcb68020cce91fd146a',
     'Error at 0, skipping. Failed to deserialize record with type 9'),
    ('M', '0100007fffffffe9ebc3126db07aaa612179168bc2c09800000000000000000210f3889596f2baaca7c2aac38dc2852d01000000000100000100000036',
     'Error at 0, skipping. Found 1 byte(s) of garbage after 0'),
    ('M', '010101fffffbb47fffffffffffffff00a4',
     'Error at 0, skipping. Found 1 byte(s) of garbage after 1'),
    ('M', '010a0104e497ba0bc29e0243c3a4c2bbc2a6017fffffffffffffff0000000000000000fe708c5aad554ad00bc29e0243c3a4c2bbc2a60041',
     'Error at 0, skipping. Found 1 byte(s) of garbage after 10'),
    ('M', '010b010e7fc2a2f0a8b282ed92b8c38f10330381e30381e30590e7418c7fffffff0000',
     'Error at 0, skipping. Found 1 byte(s) of garbage after 11'),
    ('M', '010c010754617267657402c60200021b4b180056',
     'Error at 0, skipping. Found 1 byte(s) of garbage after 12'),
    ('M', '010e000307546172676574096a11c2b2f3ba83b5000fc3b6625dc2a2f3a88083f1899198010001000000000000000000001b',
     'Error at 0, skipping. Found 1 byte(s) of garbage after 14'),
    ('M', '010f0000001e2effffffffffffffff0000000000000e3a0204001400f0',
     'Error at 0, skipping. Found 1 byte(s) of garbage after 15'),
    ('M', '0111027fffffff80000000000000000302110251750d15685de7c95926801eeebe341f04015a1e00f6',
     'Error at 0, skipping. Found 1 byte(s) of garbage after 17'),
    ('M', '011201751ade27ff2d2349af839116a32749d2000100010100000034',
     'Error at 0, skipping. Found 1 byte(s) of garbage after 18'),
    ('M', '0113016fabd47f6daba76fc9497fdbd45ed563011701b868',
     'Error at 0, skipping. Found 1 byte(s) of garbage after 19'),
    ('M', '0102000cc3b0c386c38f11c396c3a3bfd227e7b18750f607bf82d217778720005a',
     'Error at 0, skipping. Found 1 byte(s) of garbage after 2'),
    ('M', '011400020101b20801b272',
     'Error at 0, skipping. Found 1 byte(s) of garbage after 20'),
    ('M', '0115011c003a',
     'Error at 0, skipping. Found 1 byte(s) of garbage after 21'),
    ('M', '011601063eeba9a75326003e',
     'Error at 0, skipping. Found 1 byte(s) of garbage after 22'),
    ('M', '01170001130069',
     'Error at 0, skipping. Found 1 byte(s) of garbage after 23'),
    ('M', '011800010f0075',
     'Error at 0, skipping. Found 1 byte(s) of garbage after 24'),
    ('M', '011900021501ca18019d09',
     'Error at 0, skipping. Found 1 byte(s) of garbage after 25'),
    ('M', '011a00010207024e0608031ec9938d',
     'Error at 0, skipping. Found 1 byte(s) of garbage after 26'),
    ('M', '011b007fffffff958fd0c2455d953d06da771a5b664f54000208f1a5b68fc2880e013d10800000010081',
     'Error at 0, skipping. Found 1 byte(s) of garbage after 27'),
    ('M', '010301000000b900000000000000000000000000000000010103ffffb012000032660100000000fffffd6a0000000001001f',
     'Error at 0, skipping. Found 1 byte(s) of garbage after 3'),
    ('M', '010401090af29f9b9df1849699590af29f9b9df1849699590000ed',
     'Error at 0, skipping. Found 1 byte(s) of garbage after 4'),
    ('M', '01050200040d90f06bf619bb94ceb68f69ba8facb3f49105000d047fffffff7fffffff00000204010400000001030d047fffffff000002047fffffff0501e80801017b',
     'Error at 0, skipping. Found 1 byte(s) of garbage after 5'),
    ('M', '0107007fffffffffffffffeb063a95010c0057',
     'Error at 0, skipping. Found 1 byte(s) of garbage after 7'),
    ('M', '01080100000000ffffffffffff60c10090',
     'Error at 0, skipping. Found 1 byte(s) of garbage after 8'),
    ('M', '0109013c405f2dfbc01dd405a078fdee0e1f09006e',
     'Error at 0, skipping. Found 1 byte(s) of garbage after 9'),
    ('M', '011702001d7e3b2f6d2a01f0f0aaf77105',
     'Error at 0, skipping. Found 13 byte(s) of garbage after 23'),
    ('M', '010f01f3d3865b32393dee71331b43237e56e518f2d5bdf0ae9ace48eda32bb585ba2c9422f595da490d',
     'Error at 0, skipping. Found 14 byte(s) of garbage after 15'),
    ('M', '0111030000000000000000000000000300010201860202110200000000000000000000000000000000',
     'Error at 0, skipping. Found 14 byte(s) of garbage after 17'),
    ('M', '010800362dc54d239f438a89a725f300cde82073cc35e7ba01a4e47ecb9732c2',
     'Error at 0, skipping. Found 16 byte(s) of garbage after 8'),
    ('M', '01199401000101',
     'Error at 0, skipping. Found 2 byte(s) of garbage after 25'),
    ('M', '01170200fe058fbba9d959833d8f4defe8c4420df0bf8516d7',
     'Error at 0, skipping. Found 21 byte(s) of garbage after 23'),
    ('M', '0119db0100020206',
     'Error at 0, skipping. Found 3 byte(s) of garbage after 25'),
    ('M', '010502000000016b9738bdf874fd7835bd1f6a0c47045f02ad0400000001050101',
     'Error at 0, skipping. Found 3 byte(s) of garbage after 5'),
    ('M', '01190194acfb80086aa7976549c8e6286bc1ec9c03bba3b61dd6c0bb9aa236b7b71ecdbf3b18',
     'Error at 0, skipping. Found 30 byte(s) of garbage after 25'),
    ('M', '011701bab0ebf8080f9bdd091650c3f03c5ac232d8e0187168111a6d1d11ef25b56be85ef3e97b940dd2',
     'Error at 0, skipping. Found 34 byte(s) of garbage after 23'),
    ('M', '011100019cdd7db1ce79abadccf161f590b1f60d4b0a60f3',
     'Error at 0, skipping. Found 4 byte(s) of garbage after 17'),
    ('M', '0119bc010003030808',
     'Error at 0, skipping. Found 4 byte(s) of garbage after 25'),
    ('M', '010501fdba821be815187bce8ddfc12874de90248bbd2d00495a52e6',
     'Error at 0, skipping. Found 4 byte(s) of garbage after 5'),
    ('M', '010584000000000000000000000000000000000000000002010400000000050100',
     'Error at 0, skipping. Found 5 byte(s) of garbage after 5'),
    ('M', '011702c1d6f4b84d81ffbea4594f',
     'Error at 0, skipping. Found 6 byte(s) of garbage after 23'),
    ('M', '01178b01000707f3829e915467',
     'Error at 0, skipping. Found 8 byte(s) of garbage after 23'),
    ('M', 'b0e6d2213eda9e2e65',
     'Error at 0, skipping. Value for frame version was too large.'),
    ('M', '01c0c426050afd0e28177f',
     'Error at 0, skipping. Value for type was too large.'),
    ('M', '0105eeffd820f70000000000000000000000000000000003010400000000050100070101',
     'Error at 0, skipping. Value for version was too large.'),
    ('M', '011d021de6',
     'Error at 0, skipping. org.apache.kafka.common.errors.UnsupportedVersionException: Unknown metadata id 29'),
    ('M', '01190001000101',
     '{"type":"ABORT_TRANSACTION_RECORD","version":0,"data":{"reason":""}}'),
    ('M', '0112000000000000000000000000dc000000000001000101000000',
     '{"type":"ACCESS_CONTROL_ENTRY_RECORD","version":0,"data":{"id":"AAAAAAAAAAAAAADcAAAAAA","resourceType":0,"resourceName":"","patternType":0,"principal":"","host":"","operation":0,"permissionType":0}}'),
    ('M', '0112011811ec4b5cf050a91f210563971a247880091fc3a6c2a414c293000ec2a7f48c91803ec38fc386c3af0ec386f1aba38646c38ac28cc3b996e100',
     '{"type":"ACCESS_CONTROL_ENTRY_RECORD","version":1,"data":{"id":"GBHsS1zwUKkfIQVjlxokeA","resourceType":-128,"resourceName":"\\u001Fæ¤\\u0014\x93","patternType":0,"principal":"§\U0010c440>ÏÆï","host":"Æ\U0006b8c6FÊ\x8cù","operation":-106,"permissionType":-31}}'),
    ('M', '01170101001111c395f3829d99f0969182f387b58dc38b',
     '{"type":"BEGIN_TRANSACTION_RECORD","version":1,"data":{"name":"Õ\U000c2759\U00016442\U000c7d4dË"}}'),
    ('M', '01110000000000fffffffffffff61100',
     '{"type":"BROKER_REGISTRATION_CHANGE_RECORD","version":0,"data":{"brokerId":0,"brokerEpoch":-2543}}'),
    ('M', '011103ffffff4280000000000000000201013e023104ec6a602008ee575588df82f446ef141b288d21bc45dcc00f3eb6078037f167d6fb0cd0184dd9b92bf8fa9c3f252e97fa',
     '{"type":"BROKER_REGISTRATION_CHANGE_RECORD","version":3,"data":{"brokerId":-190,"brokerEpoch":-9223372036854775808,"inControlledShutdown":62,"logDirs":["7GpgIAjuV1WI34L0Ru8UGw","KI0hvEXcwA8-tgeAN_Fn1g","-wzQGE3ZuSv4-pw_JS6X-g"]}}'),
    ('M', '010e000201000100000100000000000000000000',
     '{"type":"CLIENT_QUOTA_RECORD","version":0,"data":{"entity":[{"entityType":"","entityName":null}],"key":"","value":0.0,"remove":false}}'),
    ('M', '010e000403c38801011201e00df385a996286254f1b5b6a156000202000303eb751c084cf0b5839ec3a900011601a8084cf0b5839ec3a93ff00000000000000000',
     '{"type":"CLIENT_QUOTA_RECORD","version":0,"data":{"entity":[{"entityType":"È","entityName":""},{"entityType":"\U000c5a56(bT\U00075da1V","entityName":null},{"entityType":"L\U000350deé","entityName":null}],"key":"L\U000350deé","value":1.0,"remove":false}}'),
    ('M', '0104000001010000',
     '{"type":"CONFIG_RECORD","version":0,"data":{"resourceType":0,"resourceName":"","name":"","value":null}}'),
    ('M', '0104008003c2870ec3a547f09e99abf288b1a56a7b0d452df3b895b0c294c204c3a1020700170389deb9',
     '{"type":"CONFIG_RECORD","version":0,"data":{"resourceType":-128,"resourceName":"\x87","name":"åG\U0001e66b\U00088c65j{","value":"E-\U000f8570\x94�\\u0004á"}}'),
    ('M', '01040149052b302e300cc2abc39b20f0a2b681c3a90000',
     '{"type":"CONFIG_RECORD","version":1,"data":{"resourceType":73,"resourceName":"+0.0","name":"«Û 𢶁é","value":null}}'),
    ('M', '010401cc0927c2bb40c3bb27300111f186bfa155f18bb19e40c3b9f488878a0203035543391202cb72',
     '{"type":"CONFIG_RECORD","version":1,"data":{"resourceType":-52,"resourceName":"\'»@û\'0","name":"","value":"\U00046fe1U\U0004bc5e@ù\U001081ca"}}'),
    ('M', '010409e7025f010c5ec290f2aabba11000c29200',
     '{"type":"CONFIG_RECORD","version":9,"data":{"resourceType":-25,"resourceName":"_","name":"","value":"^\x90\U000aaee1\\u0010\\u0000\x92"}}'),
    ('M', '01045c7f08c287242977421d06c2b839293b00010b03483d75',
     '{"type":"CONFIG_RECORD","version":92,"data":{"resourceType":127,"resourceName":"\x87$)wB\\u001D","name":"¸9);","value":null}}'),
    ('M', '010463500cc3a6e495acc2997bc2b94a0103c2b3011e0158',
     '{"type":"CONFIG_RECORD","version":99,"data":{"resourceType":80,"resourceName":"æ䕬\x99{¹J","name":"","value":"³"}}'),
    ('M', '010a01026801010000000000000000000000000000000000000000000000000100',
     '{"type":"DELEGATION_TOKEN_RECORD","version":1,"data":{"owner":"h","requester":"","renewers":[],"issueTimestamp":0,"maxTimestamp":0,"expirationTimestamp":0,"tokenId":""}}'),
    ('M', '010a0001024904091ec2bd6c73c3b34c01091ec2bd6c73c3b34c00000000000014eb7fffffffffffffff000000000000d53709c287c38ff398a78800',
     '{"type":"DELEGATION_TOKEN_RECORD","version":0,"data":{"owner":"","requester":"I","renewers":["\\u001E½lsóL","","\\u001E½lsóL"],"issueTimestamp":5355,"maxTimestamp":9223372036854775807,"expirationTimestamp":54583,"tokenId":"\x87Ï\U000d89c8"}}'),
    ('M', '0118000113029d47',
     '{"type":"END_TRANSACTION_RECORD","version":0,"data":{}}'),
    ('M', '010c0001feb6010f00',
     '{"type":"FEATURE_LEVEL_RECORD","version":0,"data":{"name":"","featureLevel":-330}}'),
    ('M', '0107010002b18a7fffffffffffffff020001b10c01b1',
     '{"type":"FENCE_BROKER_RECORD","version":1,"data":{"id":176522,"epoch":9223372036854775807}}'),
    ('M', '01140000',
     '{"type":"NO_OP_RECORD","version":0,"data":{}}'),
    ('M', '011401020f0282a11902cbb0',
     '{"type":"NO_OP_RECORD","version":1,"data":{}}'),
    ('M', '011418011002f6f5',
     '{"type":"NO_OP_RECORD","version":24,"data":{}}'),
    ('M', '01143102010275261b02423b',
     '{"type":"NO_OP_RECORD","version":49,"data":{}}'),
    ('M', '01143b011500',
     '{"type":"NO_OP_RECORD","version":59,"data":{}}'),
    ('M', '01144c020101050300',
     '{"type":"NO_OP_RECORD","version":76,"data":{}}'),
    ('M', '0105000000002372b08a4ddd304e5e9b40294a06d6b1e1010104ffffffff',
     '{"type":"PARTITION_CHANGE_RECORD","version":0,"data":{"partitionId":35,"topicId":"crCKTd0wTl6bQClKBtax4Q","leader":-1}}'),
    ('M', '0105037fffffff0000000000000000000000000000000006000101010400000000030502fffff98c050180070101080101',
     '{"type":"PARTITION_CHANGE_RECORD","version":3,"data":{"partitionId":2147483647,"topicId":"AAAAAAAAAAAAAAAAAAAAAA","isr":[],"leader":0,"removingReplicas":[-1652],"leaderRecoveryState":-128,"directories":[],"lastKnownElr":[]}}'),
    ('M', '01030000000000000000000000000000000000000000000101010100000000000000000000000000',
     '{"type":"PARTITION_RECORD","version":0,"data":{"partitionId":0,"topicId":"AAAAAAAAAAAAAAAAAAAAAA","replicas":[],"isr":[],"removingReplicas":[],"addingReplicas":[],"leader":0,"leaderEpoch":0,"partitionEpoch":0}}'),
    ('M', '0103000000093a72653f00e9f40a33618f48c693b081bd02ffff164f04fffffc5e800000000000000002fffffe660180000000ff92280b00000000020001c01e00',
     '{"type":"PARTITION_RECORD","version":0,"data":{"partitionId":2362,"topicId":"cmU_AOn0CjNhj0jGk7CBvQ","replicas":[-59825],"isr":[-930,-2147483648,0],"removingReplicas":[-410],"addingReplicas":[],"leader":-2147483648,"leaderRecoveryState":-64,"leaderEpoch":-7198709,"partitionEpoch":0}}'),
    ('M', '01030100045c89cf3a2146028b85016ea30ca98861de200101020000000001000556157fffffff7fffffff02000000000000000000000000000000000100012f',
     '{"type":"PARTITION_RECORD","version":1,"data":{"partitionId":285833,"topicId":"zzohRgKLhQFuowypiGHeIA","replicas":[],"isr":[],"removingReplicas":[0],"addingReplicas":[],"leader":349717,"leaderRecoveryState":47,"leaderEpoch":2147483647,"partitionEpoch":2147483647,"directories":["AAAAAAAAAAAAAAAAAAAAAA"]}}'),
    ('M', '0103027fffffffec614919590e364224a7e032abb0d630028000000001027fffffff037fffffff7fffffff000000007fffffff000000000101000101',
     '{"type":"PARTITION_RECORD","version":2,"data":{"partitionId":2147483647,"topicId":"7GFJGVkONkIkp-Ayq7DWMA","replicas":[-2147483648],"isr":[],"removingReplicas":[2147483647],"addingReplicas":[2147483647,2147483647],"leader":0,"leaderRecoveryState":1,"leaderEpoch":2147483647,"partitionEpoch":0,"directories":[]}}'),
    ('M', '0103037fffffffd1d9ee37a435cee0bc54c52c966db1e60102ffb0d6d5020000000001ffa3b5e280000000ff67698002d1d9ee37a435cee0bc54c52c966db1e60201090300000106ff67698002090300000106ff676980',
     '{"type":"PARTITION_RECORD","version":3,"data":{"partitionId":2147483647,"topicId":"0dnuN6Q1zuC8VMUslm2x5g","replicas":[],"isr":[-5187883],"removingReplicas":[0],"addingReplicas":[],"leader":-6048286,"leaderEpoch":-2147483648,"partitionEpoch":-10000000,"directories":["0dnuN6Q1zuC8VMUslm2x5g"],"eligibleLeaderReplicas":[262,-10000000],"lastKnownElr":[262,-10000000]}}'),
    ('M', '010f017fffffffffffffffffffebadffffffffffffebad00',
     '{"type":"PRODUCER_IDS_RECORD","version":1,"data":{"brokerId":2147483647,"brokerEpoch":-5203,"nextProducerId":-5203}}'),
    ('M', '010001ffffff962f1bc4ef398b4f4f29615d7ed8818200fffffffffffffe01010100010000',
     '{"type":"REGISTER_BROKER_RECORD","version":1,"data":{"brokerId":-106,"incarnationId":"LxvE7zmLT08pYV1-2IGCAA","brokerEpoch":-511,"endPoints":[],"features":[],"rack":null,"fenced":true,"inControlledShutdown":false}}'),
    ('M', '010001000002d00828b20ddba1dbfe84c3b7968e5364f5ffffffffffffffff0104018000800000010000237d0113022a1202417fff8000010f0008f19f9fb9c2ac7b0001010f022a12',
     '{"type":"REGISTER_BROKER_RECORD","version":1,"data":{"brokerId":720,"incarnationId":"CCiyDduh2_6Ew7eWjlNk9Q","brokerEpoch":-1,"endPoints":[],"features":[{"name":"","minSupportedVersion":-32768,"maxSupportedVersion":-32768},{"name":"","minSupportedVersion":0,"maxSupportedVersion":9085},{"name":"A","minSupportedVersion":32767,"maxSupportedVersion":-32768}],"rack":"\U0005f7f9¬{","fenced":false,"inControlledShutdown":true}}'),
    ('M', '011b00808d00000000000000000000000000000000000000010100',
     '{"type":"REGISTER_CONTROLLER_RECORD","version":0,"data":{"controllerId":-2138243072,"incarnationId":"AAAAAAAAAAAAAAAAAAAAAA","zkMigrationReady":false,"endPoints":[],"features":[]}}'),
    ('M', '011b0000000000d52ad33256486847cfc0d659852cbaed00030cc387f395ac93c288026f1501008fffff000ac3bd76c3baf38f9a8c0202ffff01cd00020b5af0b38a8e6e1d50c3a67530ffff020a001003c2722f011a02165e',
     '{"type":"REGISTER_CONTROLLER_RECORD","version":0,"data":{"controllerId":0,"incarnationId":"1SrTMlZIaEfPwNZZhSy67Q","zkMigrationReady":false,"endPoints":[{"name":"Ç\U000d5b13\x88\\u0002o\\u0015","host":"","port":143,"securityProtocol":-1},{"name":"ývú\U000cf68c","host":"\\u0002","port":65535,"securityProtocol":461}],"features":[{"name":"Z\U0003328en\\u001DPæ","minSupportedVersion":30000,"maxSupportedVersion":-1}]}}'),
    ('M', '0113016fabd47f6daba76fc9497fdbd45ed563011701b8',
     '{"type":"REMOVE_ACCESS_CONTROL_ENTRY_RECORD","version":1,"data":{"id":"b6vUf22rp2_JSX_b1F7VYw"}}'),
    ('M', '011a0001020701350e01ff',
     '{"type":"REMOVE_DELEGATION_TOKEN_RECORD","version":0,"data":{"tokenId":""}}'),
    ('M', '0109013a44cf9b61882863381d9f1e9e50014000',
     '{"type":"REMOVE_TOPIC_RECORD","version":1,"data":{"topicId":"OkTPm2GIKGM4HZ8enlABQA"}}'),
    ('M', '0116010cf09384a620c290c3b34e1600020d0018019f',
     '{"type":"REMOVE_USER_SCRAM_CREDENTIAL_RECORD","version":1,"data":{"name":"𓄦 \x90óN\\u0016","mechanism":0}}'),
    ('M', '01020008c3ae24527560750000004a00000000000000000000000000',
     '{"type":"TOPIC_RECORD","version":0,"data":{"name":"î$Ru`u","topicId":"AAAASgAAAAAAAAAAAAAAAA"}}'),
    ('M', '0102000fc28ef1b892bec29dc287f3a59c9c55f4353e79ff941b5869eb9913d40c730200027b421a00',
     '{"type":"TOPIC_RECORD","version":0,"data":{"name":"\x8e\U000784be\x9d\x87\U000e571c","topicId":"VfQ1Pnn_lBtYaeuZE9QMcw"}}'),
    ('M', '010201091784c29ef3adb6bd0000000000000000000000000000000000',
     '{"type":"TOPIC_RECORD","version":1,"data":{"name":"\\u0017�\x9e\U000eddbd","topicId":"AAAAAAAAAAAAAAAAAAAAAA"}}'),
    ('M', '0102010fc29b07c3bef4808080c295e7b0b27abcef8c9a8bb472ea82fd2deafe82ea021b001c03d0ddb2',
     '{"type":"TOPIC_RECORD","version":1,"data":{"name":"\x9b\\u0007þ\U00100000\x95簲","topicId":"erzvjJqLtHLqgv0t6v6C6g"}}'),
    ('M', '0102750190ec80818b679f76c2a5db9472642dce00',
     '{"type":"TOPIC_RECORD","version":117,"data":{"name":"","topicId":"kOyAgYtnn3bCpduUcmQtzg"}}'),
    ('M', '0108003e000000000009dac6ee999d00',
     '{"type":"UNFENCE_BROKER_RECORD","version":0,"data":{"id":1040187392,"epoch":10835245046173}}'),
    ('M', '01010100004773000000f20000000900',
     '{"type":"UNREGISTER_BROKER_RECORD","version":1,"data":{"brokerId":18291,"brokerEpoch":1039382085641}}'),
    ('M', '010b0105f3aabe80ff0101072c176541a1df0000000000',
     '{"type":"USER_SCRAM_CREDENTIAL_RECORD","version":1,"data":{"name":"\U000eaf80","mechanism":-1,"salt":"","storedKey":"","serverKey":"LBdlQaHf","iterations":0}}'),
    ('M', '010b010e7fc2a2f0a8b282ed92b8c38f103302070381e30590e7418c7fffffff020403a9f1ca0f035fc4b7',
     '{"type":"USER_SCRAM_CREDENTIAL_RECORD","version":1,"data":{"name":"\x7f¢𨲂풸Ï\\u0010","mechanism":51,"salt":"Bw==","storedKey":"geM=","serverKey":"kOdBjA==","iterations":2147483647}}'),
    ('M', '01155aff011600',
     '{"type":"ZK_MIGRATION_STATE_RECORD","version":90,"data":{"zkMigrationState":-1}}'),
    ('R', '8e1e41169371',
     'Error at offset 0, skipping. Could not deserialize metadata record due to unknown frame version 3854(only frame version 1 is supported)'),
    ('R', '004bc5',
     'Error at offset 0, skipping. Could not deserialize metadata record with frame version 0. Note that upgrades from the preview release of KRaft in 2.8 to newer versions are not supported.'),
    ('R', '',
     'Error at offset 0, skipping. Error while reading frame version'),
    ('R', '01',
     'Error at offset 0, skipping. Error while reading type'),
    ('R', '0101',
     'Error at offset 0, skipping. Error while reading version'),
    ('R', '0100010f7022f38ebd91f488968dc3a6c3a9a3e0935b9e6ceaf701fae730631659940000000000cc0e65fb1d6995a3155a677dea36ba4800ffffffffffffffffffffffffffffffff80000000000000000e1ab60f00000000000025190400000de0fffffffff9dd3d95010b031542a6ffe56f52ffffffffffffffff02030308418d0600ffffffff8000000000000000021901711c01a600000000007f00',
     'Error at offset 0, skipping. Failed to deserialize record with type 0'),
    ('R', '0101010ee1babc48c2a4c29bf1bbb2aa4071914f45d14dd127a6fc3203baab5b4bfffffff80109019b0000000000000000000000000000000000fffffff80000009000000000008000',
     'Error at offset 0, skipping. Failed to deserialize record with type 1'),
    ('R', '01020102738c61846778e4136f5550531a2f9e3cc4ffffffff0206021f8b1401bdffffffffffffffffffffffffff011d00',
     'Error at offset 0, skipping. Failed to deserialize record with type 2'),
    ('R', '01030000000000000000000000000000000000ffffffffffffffff800000000000000000000001ffffffffffffffff7fffffffffffffffb1ffffffff0080010100',
     'Error at offset 0, skipping. Failed to deserialize record with type 3'),
    ('R', '010000037b38a210b73a9dbf5610bc42b3c18a3ded43ffffffff0208010f1203b5743c5e74f9e15a5a892c30f3aa4434634d68021001ff1d02ca6400000000001f5a3dfffffffffffffed400000222fffffffffffffeefffffffffffffff2a01000001110423452b00020d0356f3280e00b5',
     'Error at offset 0, skipping. Found 1 byte(s) of garbage after 0'),
    ('R', '0101000fc385c385f19c8caec2a0f292afb6ece032839aa42cd30492aeebcf3d402480000000020f029fee1c02146b8b21b4e39c63e3758e20a2c47f2faa560000000000fffffffffffffcf602d27f011b036e2f769c',
     'Error at offset 0, skipping. Found 1 byte(s) of garbage after 1'),
    ('R', '010200015ed4152809333ac7da9242ccc6ab5907800000000080000000fffffffffffffcf2800106035582d722',
     'Error at offset 0, skipping. Found 1 byte(s) of garbage after 2'),
    ('R', '01030000000000000000000000000000000000ffffffffffffffff80000000000000007fffffffffffffffffffffff7fffffffffffffff01ffffffff0080010100d5',
     'Error at offset 0, skipping. Found 1 byte(s) of garbage after 3'),
    ('R', '0100000182a45344fbdc68724322dcba36eb3f277fffffff0062c6f16564135d81b85fb40c75fa8f65007fffffffffffffff7fffffffffffffff00000000ffffffffffffffff000000000000000002000000007fffffffffffffff00ffffffff29b50a4818b97e231785a8c998e709a958cf43a1dc00f4f744a713050905ddffcf20b3a3b03d5e97b80100',
     'RemoteLogSegmentMetadata{remoteLogSegmentId=RemoteLogSegmentId{topicIdPartition=gqRTRPvcaHJDIty6Nus_Jw:-2147483647, id=YsbxZWQTXYG4X7QMdfqPZQ}, startOffset=9223372036854775807, endOffset=9223372036854775807, brokerId=0, maxTimestampMs=-1, eventTimestampMs=0, segmentLeaderEpochs={0=9223372036854775807}, segmentSizeInBytes=-1, customMetadata=Optional[CustomMetadata{40 bytes}], state=COPY_SEGMENT_FINISHED}'),
    ('R', '0103007fbfd2b5dbf6629161a757c1170f35ea000000000000000500000000000000040000000200000000000000030000000000000004020000000100000000000000640000000005040001020300',
     'RemoteLogSegmentMetadataSnapshot{segmentId=f7_Stdv2YpFhp1fBFw816g, startOffset=5, endOffset=4, maxTimestampMs=3, segmentLeaderEpochs={1=100}, segmentSizeInBytes=5, customMetadata=Optional[CustomMetadata{3 bytes}], state=DELETE_SEGMENT_FINISHED}'),
    ('R', '01010004742d310a29703dfcbf106a4e8cf389a0a2673c0000000000b32763ce28648c2c30a252783623285700000000010000000000000000040001020200',
     'RemoteLogSegmentMetadataUpdate{remoteLogSegmentId=RemoteLogSegmentId{topicIdPartition=CilwPfy_EGpOjPOJoKJnPA:t-1-0, id=sydjzihkjCwwolJ4NiMoVw}, customMetadata=Optional[CustomMetadata{3 bytes}], state=DELETE_SEGMENT_STARTED, eventTimestampMs=0, brokerId=1}'),
    ('R', '010200010ba5686504a55d54b5ec98ac515cf5ee7fffffff000000000000000000000000050200',
     'RemotePartitionDeleteMetadata{topicPartition=C6VoZQSlXVS17JisUVz17g:-2147483647, state=DELETE_PARTITION_FINISHED, eventTimestampMs=5, brokerId=0}'),
    ('R', '0102000771237a7b7b3590ee5d186afe2650aae27b752def3ac9fff99760000000000000000000000000010000',
     'RemotePartitionDeleteMetadata{topicPartition=kO5dGGr-JlCq4nt1Le86yQ:q#z{{5--420000, state=DELETE_PARTITION_MARKED, eventTimestampMs=1, brokerId=0}'),
    ('R', '01000003c3bc564a576aff98d97e174ebc53fccddedaffffffff00edd3f31e6ca6c8d177fcaf36642788ca000000000000000000ffffffffffffffff000000030000018bcfe568000000018bcfe5680102fffffffd7fffffffffffffff00ffffffff297fcba1cee95ea707e23b50b9770dd575fd86e399df9f9fc827651cb8328a9f0f4d56e779ca40b8e4ff00',
     'Error at offset 0, skipping. Unexpected end offset = -1. EndOffset for a remote segment cannot be less than startOffset = 0'),
    ('R', '010000037b38a210b73a9dbf5610bc42b3c18a3ded43ffffffff0208010f1203b5743c5e74f9e15a5a892c30f3aa4434634d68021001ff1d02ca6400000000001f5a3dfffffffffffffed400000222fffffffffffffeefffffffffffffff2a01000001ce0423452b00020d0356f3280e00',
     'Error at offset 0, skipping. Unexpected end offset = -300. EndOffset for a remote segment cannot be less than startOffset = 2054717'),
    ('R', '01000007f197beba7613a44186344ab51c556d8b16950fb0c449800000000215001d0101caea6bdb332604fa068a75928d4b1c170209034945761a03c2114d7fffffffffffffff800000000000000000000000ffffffffffff94b4fffdab437ed4e48304ffffffff7fffffffffffffff011b00ffffffff7fffffffffffffff0204001103810b9600000dc5ffffffffffffffff00ffffffff033a4cff00',
     'Error at offset 0, skipping. Unexpected end offset = -9223372036854775808. EndOffset for a remote segment cannot be less than startOffset = 9223372036854775807'),
    ('R', '0100000d08f283b499e284a0c3b624280000000000000000000000000000000000000000000000000000000000000000000000000000000000000000001a000000000000000000000000000000000000001a00000000000000000100000000010000',
     'Error at offset 0, skipping. Unexpected end offset = 0. EndOffset for a remote segment cannot be less than startOffset = 26'),
    ('R', '01000007f197beba7613a44186344ab51c556d8b16950fb0c449800000000215001d0101caea6bdb332604fa068a75928d4b1c170209034945761a03c2114d7fffffffffffffff220000000000000000000000ffffffffffff94b4fffdab437ed4e48304ffffffff7fffffffffffffff011b00ffffffff7fffffffffffffff0204001103810b9600000dc5ffffffffffffffff00ffffffff033a4cff00',
     'Error at offset 0, skipping. Unexpected end offset = 2449958197289549824. EndOffset for a remote segment cannot be less than startOffset = 9223372036854775807'),
    ('R', '0100000df2a6948433c2b9c39e15c3a31629ded48ddbb706125adab9621b48c00000036e020601ad0d00cbf875a4c56f43453c4793cf62314494010b0190000000000023497d000000000005e29d7fffffff000000000000022d0000000000000000037fffffffffffffffffffffff007ffffffffffeff78c5156861020b02ad6d1903ec4c6800031b1a04f50c647e00',
     'Error at offset 0, skipping. Unexpected end offset = 385693. EndOffset for a remote segment cannot be less than startOffset = 2312573'),
    ('R', '01000003c3bcdb6c288f022c485e48e6f8eb3e5989b4ffffffff00490a7da448c3e629ca40f5fe4b5c57d20000000000000000050000000000000004000000000000000000000000000000000000000002000000007fffffffffffffff00ffffffff2944fc725fa72fa8118828cc8c1356d25825da77a01f5526bdb31d19419a7e9c892a28583fb49844950300',
     'Error at offset 0, skipping. Unexpected end offset = 4. EndOffset for a remote segment cannot be less than startOffset = 5'),
    ('R', '01000004742d31bc03fc935f3b86d9c5eb87fbf68115eaffffffff0078606db2da23a2bf24d389f032ffa1e0007fffffffffffffff7ffffffffffffffe0000000000000000000000000000018bcfe5680101ffffffff29027b8d1d16fbb6d6141f156881b907e5154c564c83b6cdd23a472b2512de6d637f719c121d2221010000',
     'Error at offset 0, skipping. Unexpected end offset = 9223372036854775806. EndOffset for a remote segment cannot be less than startOffset = 9223372036854775807'),
    ('R', '01000003c3bcf4055fea20a4b8d43ae05a235c220f2bffffffff00d8a6abbd82b27718b8d088188aff0d4a00000000000000006400000000000000630000000000000000000000000000018bcfe5680103fffffffd00000000000000000000000000fffffffffffffffb000000000029ac698f417fb1db51f2a610bd8521bd9612ecfe9046524424b14ce304a54f6f18e8b2acfb297923dc0300',
     'Error at offset 0, skipping. Unexpected end offset = 99. EndOffset for a remote segment cannot be less than startOffset = 100'),
    ('R', '0100000ec39dc3a476f28f9fbdc3a7c3b7c877f403fae16e9e2497079da689c966fffffee1010e030539afd494eb6a4a09ca664b5cafb02c0e04bf00ffffffffffffffff8000000000000000ffffffa77fffffffffffffffffffffffffffffff01fffd4f20012b020203270ed70a01fb',
     'Error at offset 0, skipping. Unexpected start offset = -1. StartOffset for a remote segment cannot be negative'),
    ('R', '0100000712c3a65dc2b623dfe793dce3f1353051b524476f0bf3ffffffff002f1c0f56688a9a79b40fbebf735948b8021301bb1c00ffffffffffff66f67fffffffffffffff000000ed7fffffffffffffff800000000000000004ffffffff000000000000008800000006bc800000000000000000ff7f08327fffffffffffffff00ffff9ae4007f020601741a0361570c',
     'Error at offset 0, skipping. Unexpected start offset = -39178. StartOffset for a remote segment cannot be negative'),
    ('R', '0100000d08f283b499e284a0c3b62428c5bc27096dc02611b2e44d68d6e170f8000000e2020f01e71a03ae93d49e6a079a18c9a6f38650aab3f99cd66700ffffffffffffffb1000000000000088c000000007ffffffffffffffffffe0d44370a795902ffffffffffffffffffffffff00000000000000020203874d1d0900',
     'Error at offset 0, skipping. Unexpected start offset = -79. StartOffset for a remote segment cannot be negative'),
    ('R', '0100000176bbffd4415bed6fccd08e9f831280a60063015500b0582bea676b5a02ed5e73866756750d020403770fd60503b6a29cfffffffffffebb33ffffffffffe31db700014cbf00000000000000000000000000000000037fffffffffffffffffffffff02020014017300006b6fffffffffffffffff010f0225abffffffff003e00',
     'Error at offset 0, skipping. Unexpected start offset = -83149. StartOffset for a remote segment cannot be negative'),
    ('R', 'cbb511a10da77c1b',
     'Error at offset 0, skipping. Value for frame version was too large.'),
    ('R', '01020004666f6fe04e1e4be102a83d0309aa4ebab813487fffffff00000000000000000000000000ff00',
     'Error at offset 0, skipping. null'),
    ('R', '010703fd4111fa8a9fd11dc34eac64cff35eb8d3a9e04835c7be76fb',
     'Error at offset 0, skipping. org.apache.kafka.common.errors.UnsupportedVersionException: Unknown metadata id 7'),
    ('R', '010301000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000100000000000000',
     'Error at offset 0, skipping. segmentLeaderEpochs can not be null or empty'),
    ('R', '01000001d6ede0353370b25c96bc14899df3cc320000000700a9ef90d6b68e2389f8354165aecb16dc007fffffffffffffff7fffffffffffffffffffffff00000000000000000000018bcfe568010200000005fffffffffffffffb0000001000000400',
     'Error at offset 0, skipping. state can not be null'),
]


def test_kafka_outputs():
    from kafkatool.record.topics import remote

    assert len(KAFKA_OUTPUTS) > 100
    for kind, hex_value, text in KAFKA_OUTPUTS:
        d = (decode if kind == "M" else remote.decode)(None, bytes.fromhex(hex_value), 0)
        assert d.payload_text == text, (kind, hex_value)


def test_frame_error_keeps_the_codec_error():
    with pytest.raises(FrameError) as info:
        read_frame(bytes.fromhex("010c00116d657461"))
    assert info.value.kafka_message == "Failed to deserialize record with type 12"
    assert isinstance(info.value.cause, InvalidRecordError)
    assert info.value.cause.kafka_cause == "Error reading byte array of 16 byte(s): only 4 byte(s) available"
    with pytest.raises(FrameError) as info:
        read_frame(b"\x02")
    assert info.value.cause is None
