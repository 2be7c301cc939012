"""``--offsets-decoder`` and ``--share-group-state-decoder``: the coordinator record serdes.

kafka-dump-log's ``OffsetsMessageParser`` and ``ShareGroupStateMessageParser``
(``DumpLogSegments.scala``) over ``CoordinatorRecordSerde`` (spec §14.1, §14.4, §15.3), at
the spec's Kafka commit:

* key = int16 record type, then the key message read at version = that type;
  value = int16 value version, then the value message; a null value is a tombstone
  (payload ``<DELETE>``). Bytes left over after either message are ignored, as Kafka's
  reader ignores them.
* The value version is not checked against the schema: Kafka's generated reader reads a
  version outside validVersions as the nearest valid one (the clamp rule,
  internal-schemas.md §3), and prints the version as read. ShareUpdateValue, written at
  v1 with the v0 layout, decodes that way; so does an OffsetCommitValue "v9" whose bytes
  fit v4. When they do not fit, the reader's error is printed like any other — as is the
  refusal of a nested struct class at such a version (``Can't read version 2 of
  TopicMetadata``), which the codec reproduces.
* The texts are Kafka's JsonConverter trees printed by Jackson (``ObjectNode.toString``):
  compact, keys in schema order, non-ASCII as is, control characters escaped with
  upper-case hex (``\\u001F``): :func:`kafkatool.record.message.dumps` (checked against
  Jackson 2.21 on JDK 17: the same text for every character 0-127 and non-BMP ones).
* Errors, each printed inline in the key field with no payload (``error`` is that same
  text; never fatal except a null key):

  - key or value shorter than 2 bytes: ``Error at offset <o>, skipping. Could not read
    version from key's buffer.`` (``value's``);
  - an unknown record type: ``Unknown record type <t> at offset <o>, skipping.`` (before
    the key body is read, so a bad body of an unknown type reads as the unknown type);
  - a body the reader rejects: ``Error at offset <o>, skipping. Could not read record with
    version <v> from <key|value>'s buffer due to: <cause>.``, where cause is the
    generated reader's message (the codec's ``kafka_cause``), or ``null`` where Kafka
    throws a message-less BufferUnderflowException (a fixed-width field or a varint past
    the end: ``String.format("%s", null)``). A cause that ends with a period gets a
    second one (``... bytes remaining..``), as Kafka prints it;
  - a null key: kafka-dump-log throws (exit 1): ``fatal``, error ``Failed to decode
    message at offset <o> using offset topic decoder (message had a missing key)`` (``share
    group state topic decoder`` for the share decoder), no key or payload text.

* In a GroupMetadataValue whose protocolType is ``consumer``, each member's
  ``subscription``/``assignment`` is replaced in the JSON by the ConsumerProtocolSubscription
  / ConsumerProtocolAssignment read at the int16 version at the start of its bytes (a
  version outside 0-3 read like any other, so above 3 only without partitions); one that
  cannot be read (fewer than 2 bytes, a reader error) keeps its base64, as Kafka swallows
  the error. Checked against Kafka's own generated classes and DumpLogSegments' parser
  logic on a JVM: every real record of the fixtures and ~100,000 random and mutated ones
  print the same text.

``Decoded.key``/``.value`` carry the messages read (the key also when only the value
failed); ``key_json``/``payload_json`` are the trees the texts are printed from
(``{"type": "<t>", "data": {...}}``, ``{"version": "<v>", "data": {...}}``; None on any error
and for a tombstone's payload).
"""

from __future__ import annotations

import struct

from kafkatool.errors import InvalidRecordError
from kafkatool.record import message
from kafkatool.record.message import MESSAGES
from kafkatool.record.topics import Decoded, Message

__all__ = ["decode_offsets", "decode_offsets_messages", "decode_share_group_state", "decode_consumer_protocol",
           "consumer_protocol_json", "GROUP_KEYS", "GROUP_VALUES", "SHARE_KEYS",
           "SHARE_VALUES"]

_INT16 = struct.Struct(">h").unpack_from


def _text(tree: dict) -> str:
    return message.dumps(tree, floats=False)  # no coordinator message has a float64 field


def _names(category: str, value: bool) -> dict[int, str]:
    out = {}
    for name, m in MESSAGES.items():
        if m["category"] == category and m["recordTypes"] and name.endswith("Value" if value else "Key"):
            for t in m["recordTypes"]:
                out[t] = name
    return out


#: ``GroupCoordinatorRecordSerde``: record type -> key / value message.
GROUP_KEYS: dict[int, str] = _names("group-coordinator", False)
GROUP_VALUES: dict[int, str] = _names("group-coordinator", True)
#: ``ShareCoordinatorRecordSerde``: record type -> key / value message.
SHARE_KEYS: dict[int, str] = _names("share-coordinator", False)
SHARE_VALUES: dict[int, str] = _names("share-coordinator", True)

_PROTOCOL = {"subscription": "ConsumerProtocolSubscription", "assignment": "ConsumerProtocolAssignment"}


def _consumer_protocol(kind: str, data: bytes) -> tuple[dict, int] | None:
    name = _PROTOCOL[kind]
    if data is None or len(data) < 2:
        return None
    version = _INT16(data)[0]
    try:
        value, _ = message.decode(name, data, version, pos=2)
    except InvalidRecordError:
        return None
    return value, version


def decode_consumer_protocol(kind: str, data: bytes | None) -> dict | None:
    """A member's embedded consumer protocol: ``kind`` ``"subscription"`` or ``"assignment"``,
    ``data`` its bytes (int16 version, then ConsumerProtocolSubscription/Assignment at that
    version, read as Kafka reads it). The decoded dict (:func:`kafkatool.record.message.decode`'s form:
    ``Topics``, ``UserData`` bytes or None, ``OwnedPartitions``, ``GenerationId``, ``RackId`` /
    ``AssignedPartitions``, ``UserData``), or None when Kafka could not read it either."""
    got = _consumer_protocol(kind, data)
    return None if got is None else got[0]


def consumer_protocol_json(kind: str, data: bytes | None) -> dict | None:
    """The JSON tree kafka-dump-log prints in place of the member's base64 (None: it keeps the base64)."""
    got = _consumer_protocol(kind, data)
    if got is None:
        return None
    return message.to_json(_PROTOCOL[kind], got[0], got[1])


def _value_json(name: str, data: dict, version: int) -> dict:
    tree = message.to_json(name, data, version)
    if name == "GroupMetadataValue" and data["protocolType"] == "consumer":
        for member, raw in zip(tree.get("members") or (), data["members"] or ()):
            for kind in ("subscription", "assignment"):
                if kind in member:
                    decoded = consumer_protocol_json(kind, raw[kind])
                    if decoded is not None:
                        member[kind] = decoded
    return tree


def _cause(err: InvalidRecordError) -> str:
    cause = getattr(err, "kafka_cause", None)
    return "null" if cause is None else cause


def _inline(text: str, key: Message | None = None) -> Decoded:
    return Decoded(key, None, text, None, None, None, text, False)


def _decode(key: bytes | None, value: bytes | None, offset: int, keys: dict[int, str],
            values: dict[int, str], version_label: str, topic_decoder: str, texts: bool = True) -> Decoded:
    if key is None:
        return Decoded(None, None, None, None, None, None,
                       f"Failed to decode message at offset {offset} using {topic_decoder} "
                       "(message had a missing key)", True)
    if len(key) < 2:
        return _inline(f"Error at offset {offset}, skipping. Could not read version from key's buffer.")
    record_type = _INT16(key)[0]
    key_name = keys.get(record_type)
    if key_name is None:
        return _inline(f"Unknown record type {record_type} at offset {offset}, skipping.")
    try:
        key_data, _ = message.decode(key_name, key, record_type, pos=2)
    except InvalidRecordError as e:
        return _inline(f"Error at offset {offset}, skipping. Could not read record with version "
                       f"{record_type} from key's buffer due to: {_cause(e)}.")
    key_msg = Message(key_name, record_type, key_data)
    if value is None:
        if not texts:
            return Decoded(key_msg, None, None, None, None, None)
        key_json = {"type": str(record_type), "data": message.to_json(key_name, key_data, record_type)}
        return Decoded(key_msg, None, _text(key_json), "<DELETE>", key_json, None)
    if len(value) < 2:
        return _inline(f"Error at offset {offset}, skipping. Could not read version from value's buffer.",
                       key_msg)
    version = _INT16(value)[0]
    value_name = values[record_type]
    try:
        value_data, _ = message.decode(value_name, value, version, pos=2)
    except InvalidRecordError as e:
        return _inline(f"Error at offset {offset}, skipping. Could not read record with version "
                       f"{version} from value's buffer due to: {_cause(e)}.", key_msg)
    if not texts:
        return Decoded(key_msg, Message(value_name, version, value_data), None, None, None, None)
    key_json = {"type": str(record_type), "data": message.to_json(key_name, key_data, record_type)}
    payload_json = {version_label: str(version), "data": _value_json(value_name, value_data, version)}
    return Decoded(key_msg, Message(value_name, version, value_data), _text(key_json),
                   _text(payload_json), key_json, payload_json)


def decode_offsets(key: bytes | None, value: bytes | None, offset: int) -> Decoded:
    """One ``__consumer_offsets`` record as ``kafka-dump-log --offsets-decoder`` prints it."""
    return _decode(key, value, offset, GROUP_KEYS, GROUP_VALUES, "version", "offset topic decoder")


def decode_offsets_messages(key: bytes | None, value: bytes | None, offset: int) -> Decoded:
    """:func:`decode_offsets` without the texts and JSON trees: ``key``/``value``/``error``/``fatal`` exactly as
    it sets them, ``key_text``/``payload_text``/``key_json``/``payload_json`` None on success (an error's text
    stays in ``key_text`` as there). For replays that never print a record (``kafkatool groups``)."""
    return _decode(key, value, offset, GROUP_KEYS, GROUP_VALUES, "version", "offset topic decoder", False)


def decode_share_group_state(key: bytes | None, value: bytes | None, offset: int) -> Decoded:
    """One ``__share_group_state`` record as ``kafka-dump-log --share-group-state-decoder``
    prints it (the payload's version under ``"type"``, as Kafka writes it)."""
    return _decode(key, value, offset, SHARE_KEYS, SHARE_VALUES, "type",
                   "share group state topic decoder")
