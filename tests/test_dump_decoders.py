"""``kafkatool dump`` with Kafka's internal-topic decoders (spec §15.1, §15.3, §16.9, §17.J).

Everything runs through the CLI on segments built here: record keys and values are the spec's
hand-written bytes (§16.9) or bytes derived by hand from the schemas (§14), the expected lines
are the spec's golden lines and the texts of Kafka's own DumpLogSegmentsTest. The real broker
files of ``../shared/fixtures-real`` must decode with no error line.
"""

from __future__ import annotations

import base64
import json
import re
import struct
from pathlib import Path

import pytest

from kafkatool.record import message
from kafkatool.record.control import (
    ControlType,
    encode_control_key,
    encode_end_txn_marker,
    encode_kraft_version,
    encode_snapshot_footer,
    encode_snapshot_header,
    encode_voters,
)
from kafkatool.record.legacy import encode_message
from kafkatool.record.v2 import RecordSpec, encode_batch

from conftest import REAL, real_fixture, run_with_pty_stderr

T0 = 1700000000000
SEG = "00000000000000000000.log"


def h(s: str) -> bytes:
    return bytes.fromhex(s.replace(" ", ""))


def _uuid(raw: bytes) -> str:
    """Kafka's Uuid.toString: base64url without padding."""
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


# --------------------------------------------------------------------------- §16.9 payloads

# OffsetCommit: type 1, group "g1", topic "t1", partition 0 / v3, offset 42, leaderEpoch 5, metadata "", T0
OC_KEY = h("0001 0002 6731 0002 7431 00000000")
OC_VALUE = h("0003 000000000000002a 00000005 0000 0000018bcfe56800")
OC_KEY_TEXT = '{"type":"1","data":{"group":"g1","topic":"t1","partition":0}}'
OC_PAYLOAD_TEXT = '{"version":"3","data":{"offset":42,"leaderEpoch":5,"metadata":"","commitTimestamp":1700000000000}}'
GOLDEN_OFFSETS = (
    f"| offset: 7 CreateTime: 1700000000000 keySize: 14 valueSize: 24 sequence: -1 headerKeys: [] "
    f"key: {OC_KEY_TEXT} payload: {OC_PAYLOAD_TEXT}"
)

# FeatureLevelRecord v0 {metadata.version, 21}: frame 1, apiKey 12, version 0, compact string, int16, no tags
FL_VALUE = h("01 0c 00 11 6d657461646174612e76657273696f6e 0015 00")
FL_PAYLOAD_TEXT = '{"type":"FEATURE_LEVEL_RECORD","version":0,"data":{"name":"metadata.version","featureLevel":21}}'
GOLDEN_METADATA = (
    "| offset: 0 CreateTime: 1700000000000 keySize: -1 valueSize: 23 sequence: -1 headerKeys: [] "
    f"payload: {FL_PAYLOAD_TEXT}"
)

# TransactionLogKey v0 "tx1"; TransactionLogValue (§14.2) for pid 1000, epoch 0, timeout 60000,
# Ongoing (1), partitions [t1: [0]], last update and start T0
TX_KEY = h("0000 0003 747831")
TX_VALUE_V0 = h(
    "0000" "00000000000003e8" "0000" "0000ea60" "01"
    "00000001" "0002 7431" "00000001 00000000"
    "0000018bcfe56800" "0000018bcfe56800"
)
# the same at v1 (flexible): compact array/string/int32 array, then an empty tagged section
TX_VALUE_V1 = h(
    "0001" "00000000000003e8" "0000" "0000ea60" "01"
    "02" "03 7431" "02 00000000" "00"
    "0000018bcfe56800" "0000018bcfe56800" "00"
)
TX_KEY_TEXT = "transaction_metadata::transactionalId=tx1"
TX_PAYLOAD_TEXT = (
    "producerId:1000,producerEpoch:0,state=Ongoing,partitions=[t1-0],"
    "txnLastUpdateTimestamp=1700000000000,txnTimeoutMs=60000"
)


def _tx_value(version: int = 0, status: int = 1) -> bytes:
    v = bytearray(TX_VALUE_V0)
    struct.pack_into(">h", v, 0, version)
    v[16] = status  # after version 2 + producerId 8 + producerEpoch 2 + timeout 4
    return bytes(v)


def _write(directory: Path, name: str, *batches: bytes) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_bytes(b"".join(batches))
    return path


def _batch(*records: RecordSpec, **kw) -> bytes:
    kw.setdefault("partition_leader_epoch", 0)
    return encode_batch(list(records), **kw)


def _record_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("| ")]


@pytest.fixture
def offsets_log(tmp_path) -> Path:
    return _write(tmp_path / "__consumer_offsets-0", SEG, _batch(RecordSpec(7, T0, OC_KEY, OC_VALUE)))


# --------------------------------------------------------------------------- golden lines


def test_offsets_decoder_prints_the_golden_line(run, offsets_log):
    r = run("dump", "--offsets-decoder", "--files", str(offsets_log))
    assert r.code == 0, r
    assert r.err == ""
    lines = r.lines
    assert lines[0] == f"Dumping {offsets_log}"
    assert lines[1] == "Log starting offset: 0"
    assert lines[2].startswith("baseOffset: 7 lastOffset: 7 count: 1 ")
    assert lines[3] == GOLDEN_OFFSETS
    assert len(lines) == 4


def test_cluster_metadata_decoder_prints_the_golden_line(run, tmp_path):
    log = _write(tmp_path / "__cluster_metadata-0", SEG, _batch(RecordSpec(0, T0, None, FL_VALUE)))
    r = run("dump", "--cluster-metadata-decoder", str(log))
    assert r.code == 0, r
    assert r.lines[3] == GOLDEN_METADATA
    assert r.err == ""


@pytest.mark.parametrize("value", [TX_VALUE_V0, TX_VALUE_V1], ids=["v0", "v1"])
def test_transaction_log_decoder_prints_the_golden_line(run, tmp_path, value):
    log = _write(tmp_path / "__transaction_state-0", SEG, _batch(RecordSpec(0, T0, TX_KEY, value)))
    r = run("dump", "--transaction-log-decoder", str(log))
    assert r.code == 0, r
    assert r.lines[3] == (
        f"| offset: 0 CreateTime: 1700000000000 keySize: 7 valueSize: {len(value)} sequence: -1 headerKeys: [] "
        f"key: {TX_KEY_TEXT} payload: {TX_PAYLOAD_TEXT}"
    )


def _group_metadata(subscription: bytes, assignment: bytes) -> tuple[bytes, bytes]:
    key = h("0002 0005") + b"group"
    member = {"memberId": "member", "groupInstanceId": "instance", "clientId": "client", "clientHost": "host",
              "rebalanceTimeout": 1000, "sessionTimeout": 100, "subscription": subscription, "assignment": assignment}
    value = h("0004") + message.encode(
        "GroupMetadataValue",
        {"protocolType": "consumer", "generation": 10, "protocol": "range", "leader": "member", "currentStateTimestamp": -1,
         "members": [member]},
        4,
    )
    return key, value


_GROUP_HEAD = (
    '{"version":"4","data":{"protocolType":"consumer","generation":10,"protocol":"range","leader":"member",'
    '"currentStateTimestamp":-1,"members":[{"memberId":"member","groupInstanceId":"instance","clientId":"client",'
    '"clientHost":"host","rebalanceTimeout":1000,"sessionTimeout":100,'
)


def test_offsets_decoder_decodes_the_consumer_protocol(run, tmp_path):
    """DumpLogSegmentsTest.testOffsetsMessageParser: a classic consumer group's member subscription and
    assignment print as JSON (v3, ConsumerProtocol.serialize*), and stay base64 when they do not decode."""
    subscription = h("0003") + message.encode(
        "ConsumerProtocolSubscription",
        {"Topics": ["foo"], "UserData": None, "OwnedPartitions": [{"Topic": "foo", "Partitions": [0]}], "GenerationId": 0,
         "RackId": "rack"},
        3,
    )
    assignment = h("0003") + message.encode(
        "ConsumerProtocolAssignment", {"AssignedPartitions": [{"Topic": "foo", "Partitions": [0]}], "UserData": None}, 3
    )
    good = _group_metadata(subscription, assignment)
    bad = _group_metadata(b"Subscription", b"Assignment")
    log = _write(tmp_path / "__consumer_offsets-0", SEG, _batch(RecordSpec(0, T0, *good), RecordSpec(1, T0, *bad)))
    r = run("dump", "--offsets-decoder", "--skip-record-metadata", str(log))
    assert r.code == 0, r
    key = '| key: {"type":"2","data":{"group":"group"}} payload: '
    assert r.lines[3:] == [
        key + _GROUP_HEAD + '"subscription":{"topics":["foo"],"userData":null,"ownedPartitions":[{"topic":"foo","partitions":[0]}],'
        '"generationId":0,"rackId":"rack"},"assignment":{"assignedPartitions":[{"topic":"foo","partitions":[0]}],"userData":null}}]}}',
        key + _GROUP_HEAD + '"subscription":"U3Vic2NyaXB0aW9u","assignment":"QXNzaWdubWVudA=="}]}}',
    ]


def test_a_tombstone_prints_delete(run, tmp_path):
    log = _write(
        tmp_path / "t-0", SEG,
        _batch(RecordSpec(0, T0, OC_KEY, None)),
    )
    r = run("dump", "--offsets-decoder", str(log))
    assert r.code == 0, r
    assert _record_lines(r.out) == [
        f"| offset: 0 CreateTime: {T0} keySize: 14 valueSize: -1 sequence: -1 headerKeys: [] key: {OC_KEY_TEXT} payload: <DELETE>"
    ]
    log.write_bytes(_batch(RecordSpec(0, T0, TX_KEY, None)))
    r = run("dump", "--transaction-log-decoder", str(log))
    assert r.code == 0, r
    assert _record_lines(r.out)[0].endswith(f"key: {TX_KEY_TEXT} payload: <DELETE>")


def test_legacy_messages_are_decoded_too(run, tmp_path):
    """v0/v1-era __consumer_offsets segments hold magic 0 and 1 messages: decoded the same way."""
    log = _write(tmp_path / "__consumer_offsets-0", SEG, encode_message(7, 1, T0, OC_KEY, OC_VALUE))
    r = run("dump", "--offsets-decoder", str(log))
    assert r.code == 0, r
    [line] = _record_lines(r.out)
    assert re.fullmatch(
        rf"\| offset: 7 CreateTime: {T0} keySize: 14 valueSize: 24 isValid: true crc: \d+\}} "
        + re.escape(f"key: {OC_KEY_TEXT} payload: {OC_PAYLOAD_TEXT}"),
        line,
    ), line


# --------------------------------------------------------------------------- switches and precedence


def test_a_decoder_implies_print_data_and_deep_iteration(run, offsets_log):
    plain = run("dump", str(offsets_log))
    assert _record_lines(plain.out) == []
    for flag in ("--offsets-decoder", "--transaction-log-decoder", "--cluster-metadata-decoder",
                 "--remote-log-metadata-decoder", "--share-group-state-decoder"):
        r = run("dump", flag, str(offsets_log))
        assert len(_record_lines(r.out)) == 1, (flag, r)
        assert " payload: " in r.out or " key: " in r.out or " error: " in r.out, (flag, r)


def test_control_records_are_never_passed_to_decoders(run, tmp_path):
    log = _write(
        tmp_path / "__consumer_offsets-0", SEG,
        _batch(RecordSpec(0, T0, OC_KEY, OC_VALUE), producer_id=5, producer_epoch=0, is_transactional=True),
        _batch(RecordSpec(1, T0, encode_control_key(ControlType.COMMIT), encode_end_txn_marker(3)),
               producer_id=5, producer_epoch=0, is_transactional=True, is_control=True),
    )
    r = run("dump", "--offsets-decoder", str(log))
    assert r.code == 0, r
    lines = _record_lines(r.out)
    assert lines[0].endswith(f"key: {OC_KEY_TEXT} payload: {OC_PAYLOAD_TEXT}")
    assert lines[1] == (
        f"| offset: 1 CreateTime: {T0} keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] "
        "endTxnMarker: COMMIT coordinatorEpoch: 3"
    )


def _mixed_log(tmp_path) -> Path:
    """A record each decoder reads differently: an OffsetCommit key and value."""
    return _write(tmp_path / "x-0", SEG, _batch(RecordSpec(0, T0, OC_KEY, OC_VALUE)))


@pytest.mark.parametrize(
    ("flags", "winner"),
    [
        (["--transaction-log-decoder", "--offsets-decoder"], "offsets"),
        (["--share-group-state-decoder", "--offsets-decoder", "--cluster-metadata-decoder"], "offsets"),
        (["--cluster-metadata-decoder", "--transaction-log-decoder"], "transaction-log"),
        (["--remote-log-metadata-decoder", "--cluster-metadata-decoder"], "cluster-metadata"),
        (["--share-group-state-decoder", "--remote-log-metadata-decoder"], "remote-log-metadata"),
        (["--value-decoder-class", "org.apache.kafka.tools.api.StringDecoder", "--share-group-state-decoder"],
         "share-group-state"),
    ],
)
def test_precedence_when_several_decoders_are_given(run, tmp_path, flags, winner):
    log = _mixed_log(tmp_path)
    alone = run("dump", f"--{winner}-decoder", str(log))
    both = run("dump", *flags, str(log))
    assert both.out == alone.out
    assert both.code == alone.code
    ignored = [f for f in flags if f.startswith("--") and f != f"--{winner}-decoder"]
    for flag in ignored:
        assert f"kafkatool: warning: {flag} is ignored: --{winner}-decoder takes precedence" in both.err, both.err


def test_a_decoder_class_is_not_loaded_under_a_topic_decoder(run, offsets_log):
    """kafka-dump-log instantiates --value-decoder-class only when no internal-topic decoder is
    given (§15.1): a custom class then does no harm, as there."""
    r = run("dump", "--value-decoder-class", "com.example.MyDecoder", "--offsets-decoder", str(offsets_log))
    assert r.code == 0, r
    assert _record_lines(r.out) == [GOLDEN_OFFSETS]
    assert r.err == (
        "kafkatool: warning: --value-decoder-class is ignored: --offsets-decoder takes precedence (as in kafka-dump-log)\n"
    )
    r = run("dump", "--key-decoder-class", "com.example.MyDecoder", str(offsets_log))
    assert r.code == 2 and r.out == ""
    assert "Invalid value for '--key-decoder-class': com.example.MyDecoder: Java decoder classes cannot be loaded" in r.err


@pytest.mark.parametrize("option", ["--key-decoder", "--value-decoder"])
def test_kafkatool_decoders_and_topic_decoders_do_not_mix(run, offsets_log, option):
    r = run("dump", "--offsets-decoder", option, "hex", str(offsets_log))
    assert r.code == 2, r
    assert r.out == ""
    assert option in r.err and "--offsets-decoder" in r.err


# --------------------------------------------------------------------------- errors


def test_a_null_key_is_an_error_line_and_the_dump_goes_on(run, tmp_path):
    """kafka-dump-log crashes at a null key in __consumer_offsets; kafkatool prints the record's
    metadata and Kafka's message, decodes the next record and the next file, and exits 1."""
    log = _write(
        tmp_path / "__consumer_offsets-0", SEG,
        _batch(RecordSpec(7, T0, OC_KEY, OC_VALUE), RecordSpec(8, T0, None, OC_VALUE), RecordSpec(10, T0, OC_KEY, OC_VALUE)),
        _batch(RecordSpec(11, T0, None, None)),
    )
    other = _write(tmp_path / "__consumer_offsets-1", SEG, _batch(RecordSpec(7, T0, OC_KEY, OC_VALUE)))
    r = run("dump", "--offsets-decoder", str(log), str(other))
    assert r.code == 1, r
    lines = _record_lines(r.out)
    assert lines[0] == GOLDEN_OFFSETS
    assert lines[1] == (
        f"| offset: 8 CreateTime: {T0} keySize: -1 valueSize: 24 sequence: -1 headerKeys: [] "
        "error: Failed to decode message at offset 8 using offset topic decoder (message had a missing key)"
    )
    assert lines[2] == GOLDEN_OFFSETS.replace("offset: 7 ", "offset: 10 ")
    assert lines[3] == (
        f"| offset: 11 CreateTime: {T0} keySize: -1 valueSize: -1 sequence: -1 headerKeys: [] "
        "error: Failed to decode message at offset 11 using offset topic decoder (message had a missing key)"
    )
    assert lines[4] == GOLDEN_OFFSETS  # the next file
    assert f"Dumping {other}" in r.lines
    err = r.err.splitlines()
    assert (
        f"kafkatool: error: {log}: 2 records could not be decoded with --offsets-decoder (first at offset 8: "
        "Failed to decode message at offset 8 using offset topic decoder (message had a missing key)); "
        "kafka-dump-log would have stopped at offset 8"
    ) in err
    # the non-consecutive check still runs (8 -> 10)
    assert "  8 is followed by 10" in err
    assert not any(str(other) in line and "could not be decoded" in line for line in err)


def test_records_that_did_not_decode_are_reported_before_what_stopped_the_file(run, tmp_path):
    """A null key, then a batch whose size field is below 14 (kafka-dump-log's CorruptRecordException):
    the decode summary, then the file's error, then the next file; one stderr line each."""
    log = _write(
        tmp_path / "__consumer_offsets-0", SEG,
        _batch(RecordSpec(0, T0, None, OC_VALUE)),
        b"\x00" * 8 + struct.pack(">i", 5) + b"\x00" * 20,
    )
    other = _write(tmp_path / "__consumer_offsets-1", SEG, _batch(RecordSpec(7, T0, OC_KEY, OC_VALUE)))
    r = run("dump", "--offsets-decoder", str(log), str(other))
    assert r.code == 1, r
    err = [line for line in r.err.splitlines() if line.startswith("kafkatool: error: ")]
    assert len(err) == 2, r.err
    assert err[0].startswith(f"kafkatool: error: {log}: 1 record could not be decoded with --offsets-decoder (first at offset 0: ")
    assert err[1].startswith(f"kafkatool: error: {log}:") and "could not be decoded" not in err[1]
    assert _record_lines(r.out)[-1] == GOLDEN_OFFSETS
    objs = _objects(run("dump", "--offsets-decoder", "--format", "jsonl", str(log), str(other)).out)
    types = [o["type"] for o in objs]
    assert types.index("decode_errors") + 1 == types.index("error") < types.index("file", 2)


def test_share_group_state_decoder(run, tmp_path):
    """DumpLogSegmentsTest.testShareGroupStateMessageParser's records and strings, bytes by hand (§14.4)."""
    topic_id = base64.urlsafe_b64decode("Uj5wn_FqTXirEASvVZRY1w==")
    key_body = h("0003") + b"gs1" + topic_id + h("00000000")  # GroupId, TopicId, Partition (not flexible)
    batch = h("0000000000000000 0000000000000004 02 0001 00")  # first 0, last 4, state 2, count 1, no tags
    snapshot_value = h("0000" "0000" "00000000" "00000000" "0000000000000000" "02") + batch + b"\x00"
    update_value = h("0000" "0000" "00000000" "0000000000000000" "02") + batch + b"\x00"
    log = _write(
        tmp_path / "__share_group_state-0", SEG,
        _batch(RecordSpec(0, T0, h("0000") + key_body, snapshot_value), RecordSpec(1, T0, h("0001") + key_body, update_value),
               RecordSpec(2, T0, h("0000") + key_body, None)),
    )
    r = run("dump", "--share-group-state-decoder", "--skip-record-metadata", str(log))
    assert r.code == 0, r
    key = '"data":{"groupId":"gs1","topicId":"Uj5wn_FqTXirEASvVZRY1w","partition":0}}'
    batches = '"stateBatches":[{"firstOffset":0,"lastOffset":4,"deliveryState":2,"deliveryCount":1}]'
    assert r.lines[3:] == [
        f'| key: {{"type":"0",{key} payload: {{"type":"0","data":{{"snapshotEpoch":0,"stateEpoch":0,"leaderEpoch":0,"startOffset":0,{batches}}}}}',
        f'| key: {{"type":"1",{key} payload: {{"type":"0","data":{{"snapshotEpoch":0,"leaderEpoch":0,"startOffset":0,{batches}}}}}',
        f'| key: {{"type":"0",{key} payload: <DELETE>',
    ]


def test_only_the_records_in_range_are_decoded(run, tmp_path):
    """--start-offset/--end-offset: records outside the range are neither printed nor decoded
    (the null key at offset 8 is outside, so nothing fails)."""
    log = _write(
        tmp_path / "__consumer_offsets-0", SEG,
        _batch(RecordSpec(7, T0, OC_KEY, OC_VALUE), RecordSpec(8, T0, None, OC_VALUE), RecordSpec(9, T0, OC_KEY, OC_VALUE)),
    )
    r = run("dump", "--offsets-decoder", "--start-offset", "9", str(log))
    assert r.code == 0 and r.err == "", r
    assert _record_lines(r.out) == [GOLDEN_OFFSETS.replace("offset: 7 ", "offset: 9 ")]
    r = run("dump", "--offsets-decoder", "--start-offset", "8", "--end-offset", "8", str(log))
    assert r.code == 1, r
    assert [line.split(" error: ")[1] for line in _record_lines(r.out)] == [
        "Failed to decode message at offset 8 using offset topic decoder (message had a missing key)"
    ]


def test_share_group_state_null_key_names_its_decoder(run, tmp_path):
    log = _write(tmp_path / "__share_group_state-0", SEG, _batch(RecordSpec(0, T0, None, b"\x00\x00")))
    r = run("dump", "--share-group-state-decoder", str(log))
    assert r.code == 1, r
    assert _record_lines(r.out)[0].endswith(
        "headerKeys: [] error: Failed to decode message at offset 0 using share group state topic decoder "
        "(message had a missing key)"
    )
    assert "1 record could not be decoded with --share-group-state-decoder" in r.err


def test_offsets_inline_errors_are_kafkas_and_count_for_the_exit_status(run, tmp_path):
    # an unknown record type (Kafka's test: Short.MaxValue), and a ConsumerGroupMemberMetadataValue
    # under a ConsumerGroupMetadataKey (type 3): the texts of DumpLogSegmentsTest.testOffsetsMessageParser
    unknown_key = h("7fff 0005") + b"group"
    epoch_value = h("0000 0000000a 00")
    cg_key = h("0003") + message.encode("ConsumerGroupMetadataKey", {"GroupId": "group"}, 3)
    member_value = h("0000") + message.encode("ConsumerGroupMemberMetadataValue", {}, 0)
    log = _write(
        tmp_path / "__consumer_offsets-0", SEG,
        _batch(RecordSpec(0, T0, unknown_key, epoch_value)),
        _batch(RecordSpec(1, T0, cg_key, member_value)),
    )
    r = run("dump", "--offsets-decoder", str(log))
    lines = _record_lines(r.out)
    assert lines[0].endswith("headerKeys: [] key: Unknown record type 32767 at offset 0, skipping."), lines[0]
    assert lines[1].endswith(
        "headerKeys: [] key: Error at offset 1, skipping. Could not read record with version 0 from value's buffer "
        "due to: Error reading byte array of 536870911 byte(s): only 1 byte(s) available."
    ), lines[1]
    assert r.code == 1, r
    assert f"kafkatool: error: {log}: 2 records could not be decoded with --offsets-decoder (first at offset 0: " in r.err
    assert "would have stopped" not in r.err  # kafka-dump-log prints these and goes on


@pytest.mark.parametrize(
    ("key", "value", "error"),
    [
        (None, TX_VALUE_V0, None),  # Java's NullPointerException: its text is the decoder's business
        (TX_KEY, _tx_value(version=5), "Unknown version 5 from the transaction log message value"),
        (TX_KEY, _tx_value(status=9), "Unknown transaction state id 9 from the transaction status message"),
    ],
    ids=["null-key", "value-version", "state"],
)
def test_transaction_log_fatal_records(run, tmp_path, key, value, error):
    log = _write(
        tmp_path / "__transaction_state-0", SEG,
        _batch(RecordSpec(0, T0, key, value), RecordSpec(1, T0, TX_KEY, TX_VALUE_V0)),
    )
    r = run("dump", "--transaction-log-decoder", str(log))
    assert r.code == 1, r
    first, second = _record_lines(r.out)
    head = f"| offset: 0 CreateTime: {T0} keySize: {-1 if key is None else len(key)} valueSize: {len(value)} sequence: -1 headerKeys: [] error: "
    assert first.startswith(head), first
    if error is not None:
        assert first == head + error
    assert second.endswith(f"key: {TX_KEY_TEXT} payload: {TX_PAYLOAD_TEXT}")
    assert "kafka-dump-log would have stopped at offset 0" in r.err


def test_transaction_log_unknown_key_version_is_inline(run, tmp_path):
    log = _write(tmp_path / "__transaction_state-0", SEG, _batch(RecordSpec(0, T0, h("0001 0003 747831"), TX_VALUE_V0)))
    r = run("dump", "--transaction-log-decoder", str(log))
    assert _record_lines(r.out)[0].endswith("headerKeys: [] key: unknown::version=1")
    assert r.code == 1 and "would have stopped" not in r.err, r


def test_cluster_metadata_errors_are_inline(run, tmp_path):
    """A null value and a bogus frame (DumpLogSegmentsTest.testDumpMetadataRecords: two uvarints
    10000) print ``Error at <offset>, skipping.`` (no word "offset"); the dump goes on."""
    bogus = bytes([0x90, 0x4E, 0x90, 0x4E])  # uvarint 10000, twice
    log = _write(
        tmp_path / "__cluster_metadata-0", SEG,
        _batch(RecordSpec(0, T0, None, FL_VALUE), RecordSpec(1, T0, None, None), RecordSpec(2, T0, None, bogus),
               RecordSpec(3, T0, None, FL_VALUE)),
    )
    r = run("dump", "--cluster-metadata-decoder", str(log))
    lines = _record_lines(r.out)
    assert lines[0] == GOLDEN_METADATA
    assert re.search(r"keySize: -1 valueSize: -1 sequence: -1 headerKeys: \[\] payload: Error at 1, skipping\.", lines[1]), lines[1]
    assert " payload: Error at 2, skipping. " in lines[2] and "unknown frame version 10000" in lines[2], lines[2]
    assert lines[3] == GOLDEN_METADATA.replace("offset: 0 ", "offset: 3 ")
    assert r.code == 1, r
    assert "2 records could not be decoded with --cluster-metadata-decoder (first at offset 1: " in r.err


def _remote_records() -> tuple[bytes, bytes, str, str]:
    """RemoteLogSegmentMetadataUpdateRecord and RemotePartitionDeleteMetadataRecord v0 by hand (§14.5:
    frame 1, apiKey, version 0, flexible bodies), and Kafka's toString of each
    (DumpLogSegmentsTest.testDumpRemoteLogMetadataMultipleRecordsOneBatch)."""
    topic_id, segment_id = bytes(range(16)), bytes(range(16, 32))
    tip = b"\x04foo" + topic_id + h("00000000") + b"\x00"  # TopicIdPartitionEntry: name, id, partition, no tags
    update = (h("01 01 00") + tip + segment_id + b"\x00"  # RemoteLogSegmentIdEntry
              + h("00000000") + h("0000000000000000") + h("05 00010203") + h("01") + b"\x00")  # COPY_SEGMENT_FINISHED
    delete = h("01 02 00") + tip + h("00000000") + h("0000000000000000") + h("00") + b"\x00"  # DELETE_PARTITION_MARKED
    tid, sid = _uuid(topic_id), _uuid(segment_id)
    update_text = (
        f"RemoteLogSegmentMetadataUpdate{{remoteLogSegmentId=RemoteLogSegmentId{{topicIdPartition={tid}:foo-0, id={sid}}}, "
        "customMetadata=Optional[CustomMetadata{4 bytes}], state=COPY_SEGMENT_FINISHED, eventTimestampMs=0, brokerId=0}"
    )
    delete_text = f"RemotePartitionDeleteMetadata{{topicPartition={tid}:foo-0, state=DELETE_PARTITION_MARKED, eventTimestampMs=0, brokerId=0}}"
    return update, delete, update_text, delete_text


def test_remote_log_metadata_decoder(run, tmp_path):
    update, delete, update_text, delete_text = _remote_records()
    log = _write(
        tmp_path / "__remote_log_metadata-0", SEG,
        _batch(RecordSpec(0, T0, None, update), RecordSpec(1, T0, None, delete)),
        _batch(RecordSpec(2, T0, None, update), RecordSpec(3, T0, None, delete)),
    )
    r = run("dump", "--remote-log-metadata-decoder", str(log))
    assert r.code == 0 and r.err == "", r
    assert sum(line.startswith("baseOffset: ") for line in r.lines) == 2
    assert _record_lines(r.out) == [
        f"| offset: {o} CreateTime: {T0} keySize: -1 valueSize: {len(v)} sequence: -1 headerKeys: [] payload: {t}"
        for o, v, t in ((0, update, update_text), (1, delete, delete_text), (2, update, update_text), (3, delete, delete_text))
    ]
    [rec] = [o for o in _objects(run("dump", "--remote-log-metadata-decoder", "--format", "jsonl", str(log)).out)
             if o["type"] == "record" and o["offset"] == 1]
    assert isinstance(rec["valueDecoded"], dict) and "DELETE_PARTITION_MARKED" in json.dumps(rec["valueDecoded"])


def test_remote_log_metadata_corrupted_payload(run, tmp_path):
    """DumpLogSegmentsTest.testDumpRemoteLogMetadataWithCorruption: ``corrupted`` as a value."""
    log = _write(tmp_path / "__remote_log_metadata-0", SEG, _batch(RecordSpec(0, T0, None, b"corrupted")))
    r = run("dump", "--remote-log-metadata-decoder", str(log))
    [line] = _record_lines(r.out)
    assert " payload: Error at offset 0, skipping. " in line and "Could not deserialize metadata record" in line, line
    assert r.code == 1, r


def test_empty_segment_with_a_decoder(run, tmp_path):
    """DumpLogSegmentsTest.testDumpRemoteLogMetadataEmpty: no batches, no records, exit 0."""
    log = _write(tmp_path / "__remote_log_metadata-0", SEG)
    r = run("dump", "--remote-log-metadata-decoder", str(log))
    assert r.code == 0 and r.lines == [f"Dumping {log}", "Log starting offset: 0"], r


def test_progress_bar_with_a_decoder(tmp_path):
    """With stdout in a file and stderr a terminal, the bar shows, the summary line is written
    above it, and stdout is the same as without a terminal."""
    import os
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[1]
    records = [RecordSpec(o, T0, None if o == 5 else OC_KEY, OC_VALUE) for o in range(20_000)]
    log = _write(tmp_path / "__consumer_offsets-0", SEG, *[_batch(*records[i : i + 50]) for i in range(0, len(records), 50)])
    code, err = run_with_pty_stderr(["dump", "--offsets-decoder", str(log)], tmp_path / "out.txt")
    assert code == 1
    assert "━".encode() in err  # Rich drew a bar
    assert b"1 record could not be decoded with --offsets-decoder (first at offset 5: " in err
    plain = subprocess.run([sys.executable, "-m", "kafkatool", "dump", "--offsets-decoder", str(log)],
                           capture_output=True, cwd=repo, env={**os.environ, "PYTHONPATH": str(repo)})
    assert (tmp_path / "out.txt").read_bytes() == plain.stdout
    assert plain.stdout.count(b"\n| offset: ") == 20_000


# --------------------------------------------------------------------------- --skip-record-metadata


def test_skip_record_metadata(run, tmp_path):
    """§15.3: with a key ``| key: <k> payload: <v>``, without one `` payload: <v>``, an empty line
    for a control record; a record that could not be decoded ``| error: <message>``."""
    off = _write(
        tmp_path / "__consumer_offsets-0", SEG,
        _batch(RecordSpec(7, T0, OC_KEY, OC_VALUE), RecordSpec(8, T0, None, OC_VALUE)),
        _batch(RecordSpec(9, T0, encode_control_key(ControlType.ABORT), encode_end_txn_marker(0)),
               producer_id=5, producer_epoch=0, is_transactional=True, is_control=True),
    )
    r = run("dump", "--offsets-decoder", "--skip-record-metadata", str(off))
    assert r.lines[3:] == [
        f"| key: {OC_KEY_TEXT} payload: {OC_PAYLOAD_TEXT}",
        "| error: Failed to decode message at offset 8 using offset topic decoder (message had a missing key)",
        r.lines[5],
        "",
    ]
    assert r.lines[5].startswith("baseOffset: 9 ")
    meta = _write(tmp_path / "__cluster_metadata-0", SEG, _batch(RecordSpec(0, T0, None, FL_VALUE)))
    r = run("dump", "--cluster-metadata-decoder", "--skip-record-metadata", str(meta))
    assert r.lines[3] == f" payload: {FL_PAYLOAD_TEXT}"
    assert r.code == 0


# --------------------------------------------------------------------------- jsonl and table


def _objects(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines()]


def test_jsonl_carries_the_decoded_trees(run, tmp_path):
    log = _write(
        tmp_path / "__consumer_offsets-0", SEG,
        _batch(RecordSpec(7, T0, OC_KEY, OC_VALUE), RecordSpec(8, T0, None, OC_VALUE), RecordSpec(9, T0, OC_KEY, None)),
        _batch(RecordSpec(10, T0, encode_control_key(ControlType.COMMIT), encode_end_txn_marker(2)),
               producer_id=5, producer_epoch=0, is_transactional=True, is_control=True),
    )
    r = run("dump", "--offsets-decoder", "--format", "jsonl", str(log))
    assert r.code == 1, r
    objs = _objects(r.out)
    records = [o for o in objs if o["type"] == "record"]
    good, bad, tomb, control = records
    assert good["keyDecoded"] == json.loads(OC_KEY_TEXT)
    assert good["valueDecoded"] == json.loads(OC_PAYLOAD_TEXT)
    assert good["key"] == base64.b64encode(OC_KEY).decode()  # the raw bytes stay
    assert "decodeError" not in good and "decodeFatal" not in good
    assert bad["decodeError"] == "Failed to decode message at offset 8 using offset topic decoder (message had a missing key)"
    assert bad["decodeFatal"] is True
    assert bad["keyDecoded"] is None and bad["valueDecoded"] is None
    assert tomb["keyDecoded"] == json.loads(OC_KEY_TEXT) and tomb["valueDecoded"] is None
    assert "keyDecoded" not in control and control["controlType"] == "COMMIT"
    [summary] = [o for o in objs if o["type"] == "decode_errors"]
    assert summary == {
        "type": "decode_errors", "file": str(log), "decoder": "offsets", "count": 1, "firstOffset": 8,
        "firstError": bad["decodeError"], "fatalCount": 1, "firstFatalOffset": 8,
    }
    assert objs[-1] == summary  # after the file's records


def test_jsonl_metadata_and_transaction_trees(run, tmp_path):
    meta = _write(tmp_path / "__cluster_metadata-0", SEG, _batch(RecordSpec(0, T0, None, FL_VALUE)))
    [rec] = [o for o in _objects(run("dump", "--cluster-metadata-decoder", "--format", "jsonl", str(meta)).out)
             if o["type"] == "record"]
    assert rec["keyDecoded"] is None
    assert rec["valueDecoded"] == json.loads(FL_PAYLOAD_TEXT)
    txn = _write(tmp_path / "__transaction_state-0", SEG, _batch(RecordSpec(0, T0, TX_KEY, TX_VALUE_V0)))
    [rec] = [o for o in _objects(run("dump", "--transaction-log-decoder", "--format", "jsonl", str(txn)).out)
             if o["type"] == "record"]
    assert "decodeError" not in rec
    # a JSON tree (not the text inside a string) holding the record's fields
    assert isinstance(rec["valueDecoded"], dict), rec
    flat = json.dumps(rec["valueDecoded"])
    assert "1000" in flat and "60000" in flat and "t1" in flat
    assert isinstance(rec["keyDecoded"], dict) and "tx1" in json.dumps(rec["keyDecoded"])


def test_table_shows_the_decoded_text(run, tmp_path):
    log = _write(
        tmp_path / "__consumer_offsets-0", SEG,
        _batch(RecordSpec(7, T0, OC_KEY, OC_VALUE), RecordSpec(8, T0, None, OC_VALUE)),
    )
    r = run("dump", "--offsets-decoder", "--format", "table", str(log))
    assert r.code == 1, r
    rows = [line for line in r.out.splitlines() if line.startswith("│   ")]
    assert len(rows) == 2, r.out
    cells = [c.strip() for c in rows[0].strip("│").split("│")]
    assert cells[0] == "7" and cells[3] == OC_KEY_TEXT and cells[4] == OC_PAYLOAD_TEXT
    cells = [c.strip() for c in rows[1].strip("│").split("│")]
    assert cells[3] == "null"
    assert cells[4] == "error: Failed to decode message at offset 8 using offset topic decoder (message had a missing key)"
    assert "1 record could not be decoded with --offsets-decoder" in r.err


# --------------------------------------------------------------------------- KRaft snapshots


TOPIC_ID = bytes(range(16))
# TopicRecord v0 {test-topic, TOPIC_ID}: frame 1, apiKey 2, version 0, compact string, uuid, no tags
TOPIC_VALUE = h("01 02 00 0b") + b"test-topic" + TOPIC_ID + b"\x00"
TOPIC_TEXT = f'{{"type":"TOPIC_RECORD","version":0,"data":{{"name":"test-topic","topicId":"{_uuid(TOPIC_ID)}"}}}}'


def _metadata_value(name: str, api_key: int, data: dict, version: int = 0) -> bytes:
    return bytes([1, api_key, version]) + message.encode(name, data, version)


def _snapshot() -> bytes:
    """A KRaft snapshot as RecordsSnapshotWriter writes it (§14.3): header, KRaftVersion and
    KRaftVoters in one control batch, the records, the footer (DumpLogSegmentsTest.testDumpMetadataSnapshot)."""
    voters = [{"voterId": i, "voterDirectoryId": bytes([i]) * 16,
               "endpoints": [{"name": "CONTROLLER", "host": "localhost", "port": 9990 + i}]} for i in (1, 2, 3)]
    head = _batch(
        RecordSpec(0, T0, encode_control_key(ControlType.SNAPSHOT_HEADER), encode_snapshot_header(10000)),
        RecordSpec(1, T0, encode_control_key(ControlType.KRAFT_VERSION), encode_kraft_version(1)),
        RecordSpec(2, T0, encode_control_key(ControlType.KRAFT_VOTERS), encode_voters(voters)),
        is_control=True,
    )
    data = _batch(
        RecordSpec(3, T0, None, _metadata_value("RegisterBrokerRecord", 0, {"BrokerId": 0, "BrokerEpoch": 10})),
        RecordSpec(4, T0, None, _metadata_value("RegisterBrokerRecord", 0, {"BrokerId": 1, "BrokerEpoch": 20})),
        RecordSpec(5, T0, None, TOPIC_VALUE),
        RecordSpec(6, T0, None, _metadata_value("PartitionChangeRecord", 5,
                                                {"TopicId": _uuid(TOPIC_ID), "PartitionId": 0, "Leader": 1, "Isr": [0, 1, 2]})),
    )
    foot = _batch(RecordSpec(7, T0, encode_control_key(ControlType.SNAPSHOT_FOOTER), encode_snapshot_footer()), is_control=True)
    return head + data + foot


def test_kraft_snapshot_with_the_metadata_decoder(run, tmp_path):
    snap = _write(tmp_path / "__cluster_metadata-0", "00000000000000000000-0000000000.checkpoint", _snapshot())
    r = run("dump", "--cluster-metadata-decoder", "--files", str(snap))
    assert r.code == 0, r
    for text in ("Snapshot end offset: 0, epoch: 0", "TOPIC_RECORD", "BROKER_RECORD", "SnapshotHeader", "SnapshotFooter",
                 "KRaftVersion", "KRaftVoters", '"lastContainedLogTimestamp":10000'):
        assert text in r.out, text
    lines = _record_lines(r.out)
    assert lines[0].endswith('headerKeys: [] SnapshotHeader {"version":0,"lastContainedLogTimestamp":10000}')
    assert lines[5] == f"| offset: 5 CreateTime: {T0} keySize: -1 valueSize: {len(TOPIC_VALUE)} sequence: -1 headerKeys: [] payload: {TOPIC_TEXT}"
    assert lines[3].endswith("payload: " + lines[3].split("payload: ", 1)[1])
    assert '"type":"REGISTER_BROKER_RECORD","version":0,"data":{"brokerId":0,' in lines[3]
    assert '"type":"PARTITION_CHANGE_RECORD"' in lines[6]
    assert "skipping" not in r.out
    r = run("dump", "--cluster-metadata-decoder", "--skip-record-metadata", "--files", str(snap))
    assert "TOPIC_RECORD" in r.out and "BROKER_RECORD" in r.out
    for text in ("SnapshotHeader", "SnapshotFooter", "KRaftVersion", "KRaftVoters", "lastContainedLogTimestamp"):
        assert text not in r.out, text
    assert f" payload: {TOPIC_TEXT}" in r.lines


def test_bootstrap_checkpoint_with_the_metadata_decoder(run, tmp_path):
    boot = _write(tmp_path, "bootstrap.checkpoint", _batch(RecordSpec(0, T0, None, FL_VALUE)))
    r = run("dump", "--cluster-metadata-decoder", str(boot))
    assert r.code == 0, r
    assert r.lines[1] == "KRaft bootstrap snapshot"
    assert r.lines[3] == GOLDEN_METADATA


# --------------------------------------------------------------------------- real broker files


def _real_files(pattern) -> list[Path]:
    if not REAL.is_dir():
        return []
    return sorted(p for p in REAL.rglob("*") if p.is_file() and pattern(p))


_OFFSETS = _real_files(lambda p: "__consumer_offsets" in str(p) and p.suffix == ".log")
_METADATA = _real_files(
    lambda p: ("__cluster_metadata" in str(p) and p.suffix in (".log", ".checkpoint")) or p.name == "bootstrap.checkpoint"
)


def _check_real(run, path: Path, flag: str) -> int:
    r = run("dump", flag, str(path))
    assert r.code == 0, r
    assert r.err == "", r.err
    records = _record_lines(r.out)
    for line in records:
        assert " error: " not in line and "skipping." not in line, line
    return len(records)


@pytest.mark.parametrize("rel", [str(p.relative_to(REAL)) for p in _OFFSETS] or ["(none)"])
def test_real_consumer_offsets_segments_decode(run, real, rel):


    path = real_fixture(rel)
    assert _check_real(run, path, "--offsets-decoder") > 0 or path.stat().st_size == 0


@pytest.mark.parametrize("rel", [str(p.relative_to(REAL)) for p in _METADATA] or ["(none)"])
def test_real_cluster_metadata_logs_and_snapshots_decode(run, real, rel):


    path = real_fixture(rel)
    n = _check_real(run, path, "--cluster-metadata-decoder")
    assert n > 0
    if path.suffix == ".checkpoint" and path.name != "bootstrap.checkpoint":
        out = run("dump", "--cluster-metadata-decoder", str(path)).out
        assert "SnapshotHeader" in out and "SnapshotFooter" in out


def test_real_files_are_there_when_the_fixtures_are(real):
    assert _OFFSETS and _METADATA
