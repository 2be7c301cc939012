"""--transaction-log-decoder (kafkatool.record.topics.txnlog).

Bytes are written by hand here from TransactionLog{Key,Value}.json (not with kafkatool's
encoder); expected texts come from spec §16.9, Kafka's TransactionLogTest, and — for the
order of the partition list — Scala 2.13's own mutable.HashSet: the vectors below were
printed by a Java program that fills scala-library's HashSet exactly as
TransactionLog.readTxnRecordValue does (TopicPartition's hashCode/equals/toString copied),
run on JDK 17 with scala-library 2.13.18.
"""

from __future__ import annotations

import json
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkatool.record.topics import Decoded, Message, decoder
from kafkatool.record.topics.txnlog import STATES, decode, java_string_hash, partitions_in_kafka_order


def h(text: str) -> bytes:
    return bytes.fromhex("".join(text.split()))


def s16(text: str) -> str:
    raw = text.encode()
    return struct.pack(">h", len(raw)).hex() + raw.hex()


def key(txn_id: str) -> bytes:
    return h("0000" + s16(txn_id))


def value_v0(pid=1000, epoch=0, timeout=60000, state=1, partitions=(("t1", [0]),), last=1700000000000,
             start=1700000000000) -> bytes:
    """TransactionLogValue v0 by hand: int64 ProducerId, int16 ProducerEpoch, int32
    TransactionTimeoutMs, int8 TransactionStatus, nullable int32-counted [Topic, [int32]],
    int64 TransactionLastUpdateTimestampMs, int64 TransactionStartTimestampMs."""
    out = struct.pack(">hqhib", 0, pid, epoch, timeout, state)
    if partitions is None:
        out += struct.pack(">i", -1)
    else:
        out += struct.pack(">i", len(partitions))
        for topic, ids in partitions:
            out += h(s16(topic)) + struct.pack(">i", len(ids)) + b"".join(struct.pack(">i", p) for p in ids)
    return out + struct.pack(">qq", last, start)


def test_spec_golden_tx1_ongoing():
    k = h("0000 0003 747831")
    v = h("0000 00000000000003e8 0000 0000ea60 01 00000001 0002 7431 00000001 00000000"
          " 0000018bcfe56800 0000018bcfe56800")
    assert v == value_v0()
    d = decode(k, v, 0)
    assert d.key_text == "transaction_metadata::transactionalId=tx1"
    assert d.payload_text == ("producerId:1000,producerEpoch:0,state=Ongoing,partitions=[t1-0],"
                              "txnLastUpdateTimestamp=1700000000000,txnTimeoutMs=60000")
    assert d.error is None and not d.fatal
    assert d.key == Message("TransactionLogKey", 0, {"TransactionalId": "tx1"})
    assert d.value.name == "TransactionLogValue" and d.value.version == 0
    assert d.value.data["TransactionPartitions"] == [{"Topic": "t1", "PartitionIds": [0]}]
    assert d.key_json == {"transactionalId": "tx1"}
    assert d.payload_json["state"] == "Ongoing" and d.payload_json["partitions"] == ["t1-0"]
    assert d.payload_json["version"] == 0 and d.payload_json["data"]["producerId"] == 1000
    json.dumps(d.payload_json)
    assert decoder("transaction-log") is decode


def test_kafka_transaction_log_test_vectors():
    # TransactionLogTest.testTransactionMetadataParsing / testTransactionMetadataTombstoneParsing
    d = decode(key("id"), value_v0(pid=1334, epoch=0, timeout=1000, state=1,
                                   partitions=(("topic", [0]),), last=0, start=0), 3)
    assert (d.key_text, d.payload_text) == (
        "transaction_metadata::transactionalId=id",
        "producerId:1334,producerEpoch:0,state=Ongoing,partitions=[topic-0],txnLastUpdateTimestamp=0,"
        "txnTimeoutMs=1000")
    d = decode(key("id"), None, 3)
    assert (d.key_text, d.payload_text, d.value, d.payload_json, d.error) == (
        "transaction_metadata::transactionalId=id", "<DELETE>", None, None, None)
    # testDeserializeFutureTransactionLogValue: v1 with unknown tags 100/101 in the value and in the partition
    v = h("0001 00000000000003e8 0064 000003e8 04"
          " 02 06746f706963 02 00000001 02 6405 0003666f6f 6504 00000fa0"
          " 00000000000007d0 0000000000000bb8"
          " 02 6405 0003666f6f 6504 00000fa0")
    d = decode(key("transaction-id"), v, 3)
    assert d.error is None
    assert d.payload_text == ("producerId:1000,producerEpoch:100,state=CompleteCommit,partitions=[topic-1],"
                              "txnLastUpdateTimestamp=2000,txnTimeoutMs=1000")
    assert [t for t, _ in d.value.data["_unknownTaggedFields"]] == [100, 101]


def test_v1_known_tags_and_client_transaction_version():
    # PreviousProducerId (tag 0), NextProducerId (tag 1), ClientTransactionVersion (tag 2)
    body = ("00000000000003e8 0001 00007530 05 01 00000000000007d0 0000000000000bb8"
            " 03 0008 0000000000000007 0108 0000000000000009 0202 {ctv}")
    d = decode(key("x"), h("0001 " + body.format(ctv="0002")), 0)
    assert d.payload_text == ("producerId:1000,producerEpoch:1,state=CompleteAbort,partitions=[],"
                              "txnLastUpdateTimestamp=2000,txnTimeoutMs=30000")
    assert (d.value.data["PreviousProducerId"], d.value.data["NextProducerId"],
            d.value.data["ClientTransactionVersion"]) == (7, 9, 2)
    assert d.payload_json["data"]["previousProducerId"] == 7
    d = decode(key("x"), h("0001 " + body.format(ctv="0003")), 0)
    assert d.fatal and d.error == "No feature:transaction.version with feature level 3"
    assert d.key_text is None and d.payload_text is None and d.value.data["ClientTransactionVersion"] == 3


@pytest.mark.parametrize("state_id,name", sorted(STATES.items()))
def test_every_state_name(state_id, name):
    d = decode(key("t"), value_v0(state=state_id, partitions=(("a", [1]),)), 0)
    parts = "[]" if name == "Empty" else "[a-1]"
    assert d.payload_text == (f"producerId:1000,producerEpoch:0,state={name},partitions={parts},"
                              "txnLastUpdateTimestamp=1700000000000,txnTimeoutMs=60000")


def test_states_table():
    assert STATES == {0: "Empty", 1: "Ongoing", 2: "PrepareCommit", 3: "PrepareAbort", 4: "CompleteCommit",
                      5: "CompleteAbort", 6: "Dead", 7: "PrepareEpochFence"}


def test_empty_state_ignores_partitions_and_accepts_null():
    assert "partitions=[]" in decode(key("t"), value_v0(state=0, partitions=None), 0).payload_text
    assert "partitions=[]" in decode(key("t"), value_v0(state=0, partitions=(("a", [1, 2]),)), 0).payload_text


# the JVM's output for these entries (see the module docstring)
SCALA_ORDER = [
    ([("topic", list(range(20))), ("other", [1, 2, 3])],
     "[other-1,topic-0,topic-18,topic-17,topic-19,topic-10,topic-9,topic-12,topic-11,topic-14,topic-13,"
     "topic-16,topic-15,topic-2,topic-1,topic-4,topic-3,other-3,topic-6,other-2,topic-5,topic-8,topic-7]"),
    ([("orders", [4, 3, 2, 1, 0])], "[orders-0,orders-1,orders-2,orders-3,orders-4]"),
    ([(c, [0]) for c in "abcdefghijklmn"], "[a-0,b-0,c-0,d-0,e-0,f-0,g-0,h-0,i-0,j-0,k-0,l-0,m-0,n-0]"),
    ([("tópico-€", [0, 1])], "[tópico-€-0,tópico-€-1]"),
    ([("events", list(range(13))), ("events", [3]), ("x", [7])],
     "[events-11,events-12,events-3,events-4,events-5,x-7,events-6,events-7,events-8,events-9,events-10,"
     "events-0,events-1,events-2]"),
    ([("payments", [2, 0, 1, 0])], "[payments-0,payments-2,payments-1]"),
    # the table grown by single adds of small sets (the Set1-Set4 path)
    ([("t26", [0, 4, 21, 38, 43, 45]),
      ("t11", [1, 3, 11, 16, 20, 22, 23, 24, 25, 26, 30, 35, 39, 44, 45, 47, 52, 58, 59, 62]),
      ("audit-log26", [57]), ("orders22", [15, 25]),
      ("payments29", [2, 5, 6, 13, 16, 18, 21, 22, 23, 27, 29, 32, 33, 37, 47, 49, 56, 57, 59, 62]),
      ("audit-log19", [18, 35, 43])],
     "[payments29-18,t26-21,payments29-47,t11-47,payments29-6,t11-39,payments29-2,t26-38,t11-35,payments29-27,"
     "payments29-23,payments29-56,t11-23,t11-52,payments29-21,t11-44,t11-11,payments29-13,audit-log26-57,t26-43,"
     "t11-3,payments29-5,payments29-59,t11-24,payments29-22,orders22-25,t11-20,t11-16,payments29-16,payments29-49,"
     "t11-45,payments29-37,payments29-62,t11-62,payments29-33,t11-58,payments29-29,t11-25,audit-log19-43,"
     "orders22-15,audit-log19-35,t26-45,t26-4,t11-1,t11-30,payments29-32,t26-0,t11-26,audit-log19-18,t11-59,"
     "t11-22,payments29-57]"),
    # the table grown by a large set's size hint
    ([("t30", [1, 22, 60]), ("audit-log24", [35, 41, 59]), ("t26", [17, 22, 41, 45, 47, 62]),
      ("clicks11", [5, 9, 10, 12, 18, 21, 22, 23, 26, 28, 30, 33, 42, 44, 46, 55, 56, 58, 60, 62]),
      ("payments19", [1, 10, 11, 12, 14, 17, 19, 28, 35, 37, 39, 40, 41, 43, 46, 47, 49, 53, 55, 61])],
     "[audit-log24-35,clicks11-5,payments19-19,t26-22,payments19-53,clicks11-9,payments19-47,clicks11-42,"
     "clicks11-10,payments19-17,payments19-49,clicks11-44,clicks11-12,audit-log24-59,payments19-11,payments19-43,"
     "t26-17,clicks11-62,clicks11-30,payments19-12,t26-47,payments19-14,payments19-46,clicks11-33,payments19-39,"
     "t26-45,payments19-40,payments19-41,payments19-10,t30-1,clicks11-21,payments19-35,t26-41,clicks11-22,"
     "clicks11-55,clicks11-23,payments19-37,clicks11-56,clicks11-58,clicks11-26,payments19-1,t30-60,clicks11-60,"
     "clicks11-28,clicks11-46,payments19-28,t26-62,payments19-61,payments19-55,t30-22,clicks11-18,audit-log24-41]"),
]


@pytest.mark.parametrize("entries,printed", SCALA_ORDER)
def test_partition_order_is_scala_hash_set_order(entries, printed):
    d = decode(key("t"), value_v0(partitions=entries), 0)
    assert f"partitions={printed}," in d.payload_text
    assert d.payload_json["partitions"] == printed[1:-1].split(",")
    assert "[" + ",".join(f"{t}-{p}" for t, p in partitions_in_kafka_order(entries)) + "]" == printed


def test_java_string_hash():
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    assert java_string_hash("polygenelubricants") == -2147483648
    assert java_string_hash("\U0001d11e") == 0xD834 * 31 + 0xDD1E  # UTF-16 code units


@pytest.mark.parametrize("k,v,message", [
    (None, None, 'Cannot invoke "java.nio.ByteBuffer.getShort()" because "buffer" is null'),
    (b"", None, "java.nio.BufferUnderflowException"),
    (b"\x00", None, "java.nio.BufferUnderflowException"),
    (h("0000 0005 7478"), None, "Error reading byte array of 5 byte(s): only 2 byte(s) available"),
    (h("0000 00"), None, "java.nio.BufferUnderflowException"),
    (key("t"), b"\x00", "java.nio.BufferUnderflowException"),
    (key("t"), h("0002") + value_v0()[2:], "Unknown version 2 from the transaction log message value"),
    (key("t"), h("ffff") + value_v0()[2:], "Unknown version -1 from the transaction log message value"),
    (key("t"), value_v0(state=8), "Unknown transaction state id 8 from the transaction status message"),
    (key("t"), value_v0(state=-1), "Unknown transaction state id -1 from the transaction status message"),
    (key("t"), value_v0()[:-1], "java.nio.BufferUnderflowException"),
    (key("t"), value_v0(state=6, partitions=None),
     'Cannot invoke "java.util.List.forEach(java.util.function.Consumer)" because the return value of '
     '"org.apache.kafka.coordinator.transaction.generated.TransactionLogValue.transactionPartitions()" is null'),
])
def test_fatal_cases_carry_kafkas_exception_message(k, v, message):
    d = decode(k, v, 12)
    assert d.fatal and d.error == message
    assert (d.key_text, d.payload_text, d.key_json, d.payload_json) == (None, None, None, None)


def test_fatal_on_the_value_keeps_what_was_read():
    d = decode(key("t"), value_v0(state=9), 0)
    assert d.key == Message("TransactionLogKey", 0, {"TransactionalId": "t"})
    assert d.value.data["TransactionStatus"] == 9


def test_non_nullable_transactional_id_named_as_kafka_names_it():
    d = decode(h("0000 ffff"), None, 0)
    assert d.fatal and d.error == "non-nullable field transactionalId was serialized as null"


@pytest.mark.parametrize("version", [1, 2, -1, 0x7FFF])
def test_unknown_key_version_prints_inline(version):
    d = decode(struct.pack(">h", version) + b"garbage", b"\x00", 0)
    assert d == Decoded(None, None, f"unknown::version={version}", None, None, None,
                        f"unknown::version={version}", False)



def test_known_tag_size_is_not_used():
    # PreviousProducerId (tag 0) declared 2 bytes long: Kafka's generated reader reads its 8 regardless
    v = h("0001 00000000000003e8 0000 00007530 04 01 0000000000000001 0000000000000002 01 00 02 0000000000000007")
    d = decode(key("tx1"), v, 0)
    assert d.payload_text == ("producerId:1000,producerEpoch:0,state=CompleteCommit,partitions=[],"
                              "txnLastUpdateTimestamp=1,txnTimeoutMs=30000")
    assert d.value.data["PreviousProducerId"] == 7

def test_trailing_bytes_are_ignored():
    d = decode(key("tx1") + b"\x01", value_v0() + b"\x00\x01", 0)
    assert d.error is None and d.payload_text == decode(key("tx1"), value_v0(), 0).payload_text


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.none(), st.binary(max_size=24)), st.one_of(st.none(), st.binary(max_size=80)))
def test_garbage_never_raises(k, v):
    d = decode(k, v, 1)
    assert isinstance(d, Decoded)
    if d.fatal:
        assert d.error and d.key_text is None and d.payload_text is None
    elif d.error:
        assert d.key_text == d.error and d.error.startswith("unknown::version=")
    else:
        assert d.key_text.startswith("transaction_metadata::transactionalId=")
        assert d.payload_text == "<DELETE>" or d.payload_text.startswith("producerId:")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.text(min_size=1, max_size=8), st.lists(st.integers(-3, 50), max_size=20)),
                max_size=6))
def test_order_is_a_permutation_of_the_distinct_pairs(entries):
    order = partitions_in_kafka_order(entries)
    assert sorted(order) == sorted({(t, p) for t, ids in entries for p in ids})


def test_every_truncation():
    k, v = key("tx1"), value_v0(partitions=(("t1", [0, 1]), ("t2", [5])))
    for n in range(len(k)):
        assert decode(k[:n], v, 0).fatal
    for n in range(len(v)):
        d = decode(k, v[:n], 0)
        assert d.fatal and d.key is not None


# ------------------------------------------------------------------ Kafka's own generated code as the oracle
#
# Expected texts printed by Kafka's real code: the generated message classes and JsonConverters of the
# spec commit (built from its JSON files with Kafka's own generator, compiled against its clients
# sources) driven by TransactionLog.formatRecordKeyAndValue ported verbatim to a Java harness, on JDK 17
# (/tmp/h13/A/kgen during issue 13: harness/Dls.java, diff.py). Inputs are mutated records of every
# record type and version ("-" = null); one vector per distinct outcome.

KAFKA_ORACLE = [
    ('00000003747831',
     '000000000000000003e800000000ea60010000000200016100000006000000990100000002000000030000000400000005000'
     '0000600016200000001b9997f5c000000000000018bcfe568000000018bcfe56800',
     'fatal',
     'Error reading byte array of 1536 byte(s): only 30 byte(s) available',
     None),
    ('00000003747831',
     '000000000000000003e800000000ea60010000000200016100000006000000010000000200000003000000040000000500000'
     '00600016200000001000000ff0000008bcfe568002700018bcfe56800',
     'text',
     'transaction_metadata::transactionalId=tx1',
     'producerId:1000,producerEpoch:0,state=Ongoing,partitions=[a-2,a-1,b-255,a-6,a-5,a-4,a-3],txnLastUpdat'
     'eTimestamp=600488372224,txnTimeoutMs=60000'),
    ('00000003747831',
     '-',
     'text',
     'transaction_metadata::transactionalId=tx1',
     '<DELETE>'),
    ('-',
     '000000000000000003e800000000ea60010000000200016100000006000000010000000200000003000000040000000500000'
     '00600016200000001000000000000018bcfe568000000018bcfe56800',
     'fatal',
     'Cannot invoke "java.nio.ByteBuffer.getShort()" because "buffer" is null',
     None),
    ('dcd7000000037f7831',
     '000100000000000003e80064000003e8040206746f70696302000000013fe80264050003666f6f650400000fa000000000000'
     '007d00000000000000bb80264050003666f6f650400000fa0',
     'text',
     'unknown::version=-9001',
     None),
    ('0000',
     '000100000000000003e80064000003e8040206746f70696302000000010264050003666f6f650400000fa000000000000007d'
     '00000000000000bb80264050003666f6f650400000fa0',
     'fatal',
     'java.nio.BufferUnderflowException',
     None),
    ('00c50e4a000003747831',
     '000100000000000003e80064000003e8040206746f70696302000000010264050003666f6f650400000fa000000000000007d'
     '00000000000000bb80264050003666f6f650400000fa0',
     'text',
     'unknown::version=197',
     None),
    ('00000003747831',
     '44b39944000000000000000003e800000000ea600100000002000161000000060000000100000002000000030000000400000'
     '0050000000600016200000001000000000000018bcfe568000000018bcfe56800',
     'fatal',
     'Unknown version 17587 from the transaction log message value',
     None),
    ('00000003747831',
     '000000ec000000000003e800000000ea600100000002016100000006000000010000000200000003000000040000000500000'
     '006000101000000000000018bcfe568000000018bcfe56800',
     'fatal',
     'Tried to allocate a collection of size 16777216, but there are only 54 bytes remaining.',
     None),
    ('0000807f',
     '000100000000000003e80064000003e8040206746f70696302000000010264050003666f6f650400000fa000000000000007d'
     '00000000000000bb80264050003666f6f650400000fa0',
     'fatal',
     'non-nullable field transactionalId was serialized as null',
     None),
    ('000000017478',
     '80000000000000001fe85d03e800000000ea60010000000200016100000006000000010000000200000003000000040000000'
     '50000000100016200000001000000000000018bcfe568000000018bcfe56800',
     'fatal',
     'Unknown version -32768 from the transaction log message value',
     None),
    ('00000003747831',
     '000100000000008003e80064000003e8040206746302000000010264050003666f6f650400000fa000000000000007d000000'
     '00000007fb80264050003666f6f650400000fa0',
     'fatal',
     'non-nullable field partitionIds was serialized as null',
     None),
]


@pytest.mark.parametrize("key_hex,value_hex,kind,key_text,payload_text", KAFKA_ORACLE)
def test_against_kafkas_generated_code(key_hex, value_hex, kind, key_text, payload_text):
    d = decode(None if key_hex == "-" else bytes.fromhex(key_hex),
               None if value_hex == "-" else bytes.fromhex(value_hex), 0)
    if kind == "fatal":
        assert d.fatal and d.error == key_text
    else:
        assert not d.fatal and (d.key_text, d.payload_text) == (key_text, payload_text)
