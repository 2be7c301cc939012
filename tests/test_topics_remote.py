"""``--remote-log-metadata-decoder`` (kafkatool.record.topics.remote).

The expected payloads are written by hand from Kafka's Java sources at the spec's commit
(1eb7644349), not from kafkatool's output:

* storage/api/src/main/java/org/apache/kafka/server/log/remote/storage/RemoteLogSegmentMetadata.java
  (toString; constructor checks "Unexpected start offset = ...", "Unexpected end offset = ...",
  "segmentLeaderEpochs can not be null or empty"; CustomMetadata.toString "CustomMetadata{<n> bytes}"),
  RemoteLogSegmentMetadataUpdate.java, RemotePartitionDeleteMetadata.java, RemoteLogSegmentId.java
  (toStrings; "state can not be null"; the delete's message-less requireNonNull(state)),
  RemoteLogSegmentState.java / RemotePartitionDeleteState.java (enum ids);
* storage/src/main/java/org/apache/kafka/server/log/remote/metadata/storage/RemoteLogSegmentMetadataSnapshot.java
  (toString without brokerId/eventTimestampMs; state checked before the epochs);
* storage/src/main/java/.../remote/metadata/storage/serialization/*Transform.java (HashMap of
  epochs, Optional.ofNullable(customMetadata), the segment built in COPY_SEGMENT_STARTED then
  updated);
* clients/src/main/java/org/apache/kafka/common/TopicIdPartition.java ("<topicId>:<topic>-<p>"),
  java.util.Optional ("Optional.empty" / "Optional[...]"), java.util.AbstractMap ("{k=v, k=v}");
* core/src/test/scala/unit/kafka/tools/DumpLogSegmentsTest.scala (the delete and update
  payloads it expects; "corrupted" bytes give "Could not deserialize metadata record");
* core/src/main/scala/kafka/tools/DumpLogSegments.scala ("Error at offset <o>, skipping. <msg>").
"""

from __future__ import annotations

import base64

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkatool.record.message import encode
from kafkatool.record.schemas import MESSAGES
from kafkatool.record.topics import Decoded, decoder
from kafkatool.record.topics.remote import decode, to_text
from message_strategies import message_values
from test_topics_metadata import UUID2_HEX, UUID2_TEXT, UUID_HEX, UUID_TEXT

TIP = "04 666f6f" + UUID_HEX + " 00000000 00"          # TopicIdPartitionEntry foo / topic id / 0, tags
SEGMENT_ID = TIP + UUID2_HEX + " 00"                     # RemoteLogSegmentIdEntry, tags
T0 = "0000018bcfe56800"                                  # 1700000000000
T1 = "0000018bcfe56801"                                  # 1700000000001
SEGMENT_ID_TEXT = f"RemoteLogSegmentId{{topicIdPartition={UUID_TEXT}:foo-0, id={UUID2_TEXT}}}"


def _decode(hex_value: str, offset: int = 0) -> Decoded:
    d = decoder("remote-log-metadata")(None, bytes.fromhex(hex_value.replace(" ", "")), offset)
    assert d.key is None and d.key_text is None and d.key_json is None and not d.fatal
    return d


def segment(start="0000000000000064", end="00000000000000c7", epochs=None, custom="04 000102", state="01"):
    if epochs is None:  # epoch 2 -> 150, 0 -> 100, 2 -> 160 (a repeated epoch keeps its last offset)
        epochs = ("04 00000002 0000000000000096 00 00000000 0000000000000064 00"
                  " 00000002 00000000000000a0 00")
    return ("01 00 00" + SEGMENT_ID + start + end + " 00000003" + T0 + T1 + epochs
            + " 00001000 " + custom + " " + state + " 00")


def test_segment_metadata_golden():
    d = _decode(segment())
    assert d.error is None
    assert d.payload_text == (
        f"RemoteLogSegmentMetadata{{remoteLogSegmentId={SEGMENT_ID_TEXT}, startOffset=100, endOffset=199, "
        "brokerId=3, maxTimestampMs=1700000000000, eventTimestampMs=1700000000001, "
        "segmentLeaderEpochs={0=100, 2=160}, segmentSizeInBytes=4096, "
        "customMetadata=Optional[CustomMetadata{3 bytes}], state=COPY_SEGMENT_FINISHED}")
    assert d.value.name == "RemoteLogSegmentMetadataRecord" and d.value.version == 0
    tree = d.payload_json
    assert tree["type"] == "RemoteLogSegmentMetadata"
    assert tree["remoteLogSegmentId"] == {"topicIdPartition": {"topicId": UUID_TEXT, "topic": "foo", "partition": 0},
                                          "id": UUID2_TEXT}
    assert tree["segmentLeaderEpochs"] == [{"leaderEpoch": 0, "offset": 100}, {"leaderEpoch": 2, "offset": 160}]
    assert tree["customMetadata"] == base64.b64encode(b"\x00\x01\x02").decode()
    assert to_text(tree) == d.payload_text
    # no custom metadata: Optional.empty; every state id
    for sid, name in [("00", "COPY_SEGMENT_STARTED"), ("02", "DELETE_SEGMENT_STARTED"), ("03", "DELETE_SEGMENT_FINISHED")]:
        text = _decode(segment(custom="00", state=sid)).payload_text
        assert text.endswith(f", customMetadata=Optional.empty, state={name}}}")


def test_segment_metadata_update_golden():
    # DumpLogSegmentsTest.testDumpRemoteLogMetadataMultipleRecordsOneBatch's expectedUpdatePayload
    d = _decode("01 01 00" + SEGMENT_ID + " 00000000 0000000000000000 05 00010203 01 00")
    assert d.payload_text == (
        f"RemoteLogSegmentMetadataUpdate{{remoteLogSegmentId={SEGMENT_ID_TEXT}, "
        "customMetadata=Optional[CustomMetadata{4 bytes}], state=COPY_SEGMENT_FINISHED, "
        "eventTimestampMs=0, brokerId=0}")
    assert d.payload_json["type"] == "RemoteLogSegmentMetadataUpdate"


def test_partition_delete_golden_of_the_spec():
    d = _decode("01 02 00" + TIP + " 00000000 0000000000000000 00 00", 5)
    assert d.payload_text == (f"RemotePartitionDeleteMetadata{{topicPartition={UUID_TEXT}:foo-0, "
                              "state=DELETE_PARTITION_MARKED, eventTimestampMs=0, brokerId=0}")
    assert d.payload_json == {"type": "RemotePartitionDeleteMetadata",
                              "topicPartition": {"topicId": UUID_TEXT, "topic": "foo", "partition": 0},
                              "state": "DELETE_PARTITION_MARKED", "eventTimestampMs": 0, "brokerId": 0}
    for sid, name in [("01", "DELETE_PARTITION_STARTED"), ("02", "DELETE_PARTITION_FINISHED")]:
        assert f"state={name}," in _decode("01 02 00" + TIP + " 00000000 0000000000000000 " + sid + " 00").payload_text


def snapshot(epochs="02 00000001 0000000000000064 00", state="03", start="0000000000000064"):
    return ("01 03 00" + UUID2_HEX + start + " 00000000000000c7 00000003" + T0 + T1 + epochs
            + " 00001000 00 " + state + " 00")


def test_segment_metadata_snapshot_golden():
    d = _decode(snapshot())
    # its toString has no brokerId and no eventTimestampMs
    assert d.payload_text == (
        f"RemoteLogSegmentMetadataSnapshot{{segmentId={UUID2_TEXT}, startOffset=100, endOffset=199, "
        "maxTimestampMs=1700000000000, segmentLeaderEpochs={1=100}, segmentSizeInBytes=4096, "
        "customMetadata=Optional.empty, state=DELETE_SEGMENT_FINISHED}")
    assert list(d.payload_json) == ["type", "segmentId", "startOffset", "endOffset", "maxTimestampMs",
                                    "segmentLeaderEpochs", "segmentSizeInBytes", "customMetadata", "state"]
    # the snapshot constructor does not check offsets
    assert "startOffset=-1," in _decode(snapshot(start="ffffffffffffffff")).payload_text


@pytest.mark.parametrize("hex_value,message", [
    ("636f72727570746564", "Could not deserialize metadata record due to unknown frame version 99"
                           "(only frame version 1 is supported)"),            # "corrupted"
    ("", "Error while reading frame version"),
    ("01 04 00", "org.apache.kafka.common.errors.UnsupportedVersionException: Unknown metadata id 4"),
    ("01 02 00" + TIP + " 00000000 0000000000000000 00 00 ff", "Found 1 byte(s) of garbage after 2"),
    ("01 02 00" + TIP + " 00000000", "Failed to deserialize record with type 2"),
    ("01 02 00" + TIP + " 00000000 0000000000000000 07 00", "null"),        # requireNonNull(state)
    ("01 01 00" + SEGMENT_ID + " 00000000 0000000000000000 00 09 00", "state can not be null"),
    (segment(start="ffffffffffffffff"),
     "Unexpected start offset = -1. StartOffset for a remote segment cannot be negative"),
    (segment(end="0000000000000005"),
     "Unexpected end offset = 5. EndOffset for a remote segment cannot be less than startOffset = 100"),
    (segment(epochs="01"), "segmentLeaderEpochs can not be null or empty"),
    (segment(epochs="01", state="09"), "segmentLeaderEpochs can not be null or empty"),  # constructor first
    (segment(state="09"), "state can not be null"),
    (snapshot(epochs="01"), "segmentLeaderEpochs can not be null or empty"),
    (snapshot(epochs="01", state="09"), "state can not be null"),             # state checked first
])
def test_error_wording(hex_value, message):
    d = _decode(hex_value, 17)
    assert d.payload_text == f"Error at offset 17, skipping. {message}"
    assert d.error == d.payload_text and d.value is None and d.payload_json is None


def test_null_value():
    d = decode(None, None, 3)
    assert d.payload_text == ('Error at offset 3, skipping. Cannot invoke "java.nio.ByteBuffer.remaining()" '
                              'because the return value of "org.apache.kafka.common.record.Record.value()" is null')
    assert not d.fatal


def test_the_key_is_not_read():
    assert decode(b"\xff\xff", bytes.fromhex(snapshot().replace(" ", "")), 0).error is None


# ------------------------------------------------------------ hypothesis

REMOTE = sorted(n for n, m in MESSAGES.items() if m["category"] == "remote-log-metadata")


def test_every_remote_record_kind_is_covered():
    assert REMOTE == ["RemoteLogSegmentMetadataRecord", "RemoteLogSegmentMetadataSnapshotRecord",
                      "RemoteLogSegmentMetadataUpdateRecord", "RemotePartitionDeleteMetadataRecord"]
    assert all(MESSAGES[n]["validVersions"] == (0, 0) for n in REMOTE)


def _expected_error(name: str, v: dict) -> str | None:
    """Which check of the Java constructors fails first (None: none), from the sources cited above."""
    epochs = {e["LeaderEpoch"] for e in v["SegmentLeaderEpochs"]} if "SegmentLeaderEpochs" in v else None
    if name == "RemoteLogSegmentMetadataRecord":
        if v["StartOffset"] < 0:
            return f"Unexpected start offset = {v['StartOffset']}. StartOffset for a remote segment cannot be negative"
        if v["EndOffset"] < v["StartOffset"]:
            return (f"Unexpected end offset = {v['EndOffset']}. EndOffset for a remote segment cannot be less than "
                    f"startOffset = {v['StartOffset']}")
        if not epochs:
            return "segmentLeaderEpochs can not be null or empty"
        return None if 0 <= v["RemoteLogSegmentState"] <= 3 else "state can not be null"
    if name == "RemoteLogSegmentMetadataSnapshotRecord":
        if not 0 <= v["RemoteLogSegmentState"] <= 3:
            return "state can not be null"
        return None if epochs else "segmentLeaderEpochs can not be null or empty"
    if name == "RemoteLogSegmentMetadataUpdateRecord":
        return None if 0 <= v["RemoteLogSegmentState"] <= 3 else "state can not be null"
    return None if 0 <= v["RemotePartitionDeleteState"] <= 2 else "null"


@pytest.mark.parametrize("name", REMOTE)
def test_round_trip_through_decode(name):
    api_key = MESSAGES[name]["apiKey"]

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(message_values(name, 0), st.integers(0, 1 << 40))
    def check(value, offset):
        framed = bytes([1, api_key, 0]) + encode(name, value, 0)
        d = decode(None, framed, offset)
        expected = _expected_error(name, value)
        if expected is not None:
            assert d.payload_text == f"Error at offset {offset}, skipping. {expected}"
            return
        assert d.error is None, d.payload_text
        tree = d.payload_json
        assert to_text(tree) == d.payload_text
        text = d.payload_text
        if "BrokerId" in value and name != "RemoteLogSegmentMetadataSnapshotRecord":
            assert f"brokerId={value['BrokerId']}" in text
        if "CustomMetadata" in value:
            cm = value["CustomMetadata"]
            assert (f"customMetadata=Optional[CustomMetadata{{{len(cm)} bytes}}]" if cm is not None
                    else "customMetadata=Optional.empty") in text
        if "SegmentLeaderEpochs" in value:
            last = {}
            for e in value["SegmentLeaderEpochs"]:
                last[e["LeaderEpoch"]] = e["Offset"]
            assert "segmentLeaderEpochs={" + ", ".join(f"{k}={last[k]}" for k in sorted(last)) + "}" in text
        if "TopicIdPartition" in value or "RemoteLogSegmentId" in value:
            tip = value.get("TopicIdPartition") or value["RemoteLogSegmentId"]["TopicIdPartition"]
            assert f"{tip['Id']}:{tip['Name']}-{tip['Partition']}" in text

    check()


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=120), st.integers(0, 1 << 62))
def test_random_bytes_never_raise(data, offset):
    for blob in (data, b"\x01" + bytes([data[0] & 3]) + b"\x00" + data[1:] if data else data):
        d = decode(None, blob, offset)
        assert isinstance(d, Decoded) and not d.fatal
        assert (d.error is None) == (d.payload_json is not None)
        if d.error is not None:
            assert d.payload_text == d.error and d.error.startswith(f"Error at offset {offset}, skipping. ")


def test_versions_past_the_schema_fail_as_in_kafka():
    # version 1 of a v0-only record: the nested TopicIdPartitionEntry class refuses it
    # ("Can't read version 1 of TopicIdPartitionEntry" inside the serde: its message is generic)
    d = _decode("01 02 01" + TIP + " 00000000 0000000000000000 00 00", 6)
    assert d.payload_text == "Error at offset 6, skipping. Failed to deserialize record with type 2"


def _rlmm_cases() -> list[bytes]:
    """3000 RLMM values of every kind (valid and refused: offsets, epochs, states, custom metadata,
    odd topic names), from a seeded generator (CPython's random is stable for a given seed)."""
    import random

    rnd = random.Random(42)

    def uuid():
        return base64.urlsafe_b64encode(rnd.randbytes(16)).decode().rstrip("=")

    def tip():
        return {"Name": rnd.choice(["foo", "t-1", "ü", "a\nb", ""]), "Id": uuid(), "Partition": rnd.choice([0, 7, -1, 2**31 - 1])}

    def epochs():
        return [{"LeaderEpoch": rnd.choice([0, 1, 5, -3, 2**31 - 1]), "Offset": rnd.choice([0, 100, -5, 2**63 - 1])}
                for _ in range(rnd.choice([0, 1, 1, 2, 3, 5]))]

    def custom():
        return rnd.choice([None, b"", b"\x00\x01\x02", rnd.randbytes(40)])

    cases = []
    for _ in range(3000):
        s = rnd.choice([0, 5, 100, -1, 2**63 - 1])
        e = max(min(s + rnd.choice([0, 10, -1]), 2**63 - 1), -2**63)
        k = rnd.randrange(4)
        if k == 0:
            v = {"RemoteLogSegmentId": {"TopicIdPartition": tip(), "Id": uuid()}, "StartOffset": s, "EndOffset": e,
                 "BrokerId": rnd.choice([0, 3, -1]), "MaxTimestampMs": rnd.choice([0, 1700000000000, -1]),
                 "EventTimestampMs": rnd.choice([0, 1700000000001]), "SegmentLeaderEpochs": epochs(),
                 "SegmentSizeInBytes": rnd.choice([0, 4096, -1]), "CustomMetadata": custom(),
                 "RemoteLogSegmentState": rnd.choice([0, 1, 2, 3, 4, -1])}
            name = "RemoteLogSegmentMetadataRecord"
        elif k == 1:
            v = {"RemoteLogSegmentId": {"TopicIdPartition": tip(), "Id": uuid()}, "BrokerId": 1,
                 "EventTimestampMs": rnd.choice([0, 5]), "CustomMetadata": custom(),
                 "RemoteLogSegmentState": rnd.choice([0, 1, 2, 3, 4])}
            name = "RemoteLogSegmentMetadataUpdateRecord"
        elif k == 2:
            v = {"TopicIdPartition": tip(), "BrokerId": rnd.choice([0, 9]), "EventTimestampMs": rnd.choice([0, 5]),
                 "RemotePartitionDeleteState": rnd.choice([0, 1, 2, 3, -1])}
            name = "RemotePartitionDeleteMetadataRecord"
        else:
            v = {"SegmentId": uuid(), "StartOffset": s, "EndOffset": e, "BrokerId": 2, "MaxTimestampMs": 3,
                 "EventTimestampMs": 4, "SegmentLeaderEpochs": epochs(), "SegmentSizeInBytes": 5,
                 "CustomMetadata": custom(), "RemoteLogSegmentState": rnd.choice([0, 1, 2, 3, 7])}
            name = "RemoteLogSegmentMetadataSnapshotRecord"
        cases.append(bytes([1, k, 0]) + encode(name, v, 0))
    return cases


def test_payloads_are_what_kafkas_own_objects_print():
    """sha256 of "<payload>\\n" over the 3000 cases (record i at offset i), as printed by
    kafka-dump-log's RemoteMetadataLogMessageParser code with RemoteLogMetadataSerde, the generated
    record classes of the spec commit and the storage-api objects, run on JDK 17 (/tmp/h13/B/k):
    1800 toStrings and 1200 constructor errors, every one equal."""
    import hashlib

    digest = hashlib.sha256()
    decoded = 0
    for i, value in enumerate(_rlmm_cases()):
        d = decode(None, value, i)
        decoded += d.error is None
        digest.update(d.payload_text.encode() + b"\n")
    assert decoded == 1800
    assert digest.hexdigest() == "7c988a5e73a2dc3c721de1bba04f1384916fa29e53709aea701a9750b95f88fa"
