"""``--cluster-metadata-decoder``: KRaft ``__cluster_metadata`` records and snapshots (spec §14.3, §15.3).

Every data record of the metadata log, of a ``.checkpoint`` snapshot and of
``bootstrap.checkpoint`` has a null key and a value framed by Kafka's
``AbstractApiMessageSerde`` (``server-common/.../serialization/AbstractApiMessageSerde.java``,
used through ``metadata/.../MetadataRecordSerde.java``):

1. frame version, uvarint, must be 1 (0 and anything else have their own messages);
2. apiKey, uvarint (``MetadataRecordType.fromId``);
3. version, uvarint;
4. the record body at that version, which must end at the value's last byte.

Each of the three numbers is read as Java does: ``ByteUtils.readUnsignedVarint`` into an
``int`` (a 5-byte varint keeps its low 32 bits, so it may be negative), rejected when it is
above 32767 (``Value for <frame version|type|version> was too large.``), else cast to a
``short``. A varint that cannot be read (past the end, more than 5 bytes, a null value) is
``Error while reading <entity>``. The body is read by the generated reader, whose top-level
class never checks the version against validVersions (the clamp rule, internal-schemas.md
§3): a PartitionRecord at version 7 reads as version 2 and prints ``"version":7``; its nested
struct classes do check (a RegisterBrokerRecord at version 4 reads while it has no endpoint
or feature). A body that does not read is ``Failed to deserialize record with type
<apiKey>`` whatever the cause. All of this, and every text below, was compared with Kafka's
own classes run on a JVM (the real fixtures' 36,660 records, and ~22,000 generated, corrupted
and random values: identical but for JDK 17's older ``Double.toString``, see
:func:`kafkatool.record.message.java_double`).

kafka-dump-log (``DumpLogSegments.scala``, ``ClusterMetadataLogMessageParser``) prints no
key and, as the payload, ``{"type":"<RECORD_TYPE>","version":<n>,"data":<JsonConverter>}``
(``json.toString`` of a Jackson ``ObjectNode``: compact); any exception becomes the payload
``Error at <offset>, skipping. <getMessage()>``. Control records (snapshot header/footer,
KRaft version/voters, leader change) never reach this decoder: see
:mod:`kafkatool.record.control`.
"""

from __future__ import annotations

from kafkatool.errors import InvalidRecordError
from kafkatool.record import message
from kafkatool.record.schemas import MESSAGES
from kafkatool.record.topics import Decoded, Message

__all__ = [
    "FrameError",
    "RECORD_TYPES",
    "decode",
    "payload_tree",
    "read_frame",
    "record_type_name",
]

#: metadata apiKey -> (message name, ``MetadataRecordType`` name as kafka-dump-log prints it).
RECORD_TYPES: dict[int, tuple[str, str]] = {
    m["apiKey"]: (name, m["recordTypeName"])
    for name, m in MESSAGES.items()
    if m["category"] == "metadata"
}

_REMOTE_TYPES: dict[int, tuple[str, str]] = {
    m["apiKey"]: (name, m["recordTypeName"])
    for name, m in MESSAGES.items()
    if m["category"] == "remote-log-metadata"
}

_CATEGORIES = {"metadata": RECORD_TYPES, "remote-log-metadata": _REMOTE_TYPES}

_FLOATS = frozenset(name for name, _ in RECORD_TYPES.values() if message.has_float64(name))

_FRAME_VERSION = 1  # AbstractApiMessageSerde.DEFAULT_FRAME_VERSION


class FrameError(InvalidRecordError):
    """A value the serde could not read. ``kafka_message`` is the ``getMessage()`` text of the
    exception Kafka throws for it (what kafka-dump-log prints after ``skipping.``);
    ``position`` the byte of the value where it went wrong; ``cause``, for a body that does
    not read, the codec's :class:`~kafkatool.errors.InvalidRecordError` (what exactly is
    wrong, and its ``kafka_cause``), else None."""

    def __init__(self, kafka_message: str, position: int, cause: InvalidRecordError | None = None) -> None:
        super().__init__(kafka_message, position=position)
        self.kafka_message = kafka_message
        self.cause = cause


def record_type_name(api_key: int) -> str | None:
    """The ``MetadataRecordType`` name of a metadata apiKey (``TOPIC_RECORD``, ...), None if unknown."""
    entry = RECORD_TYPES.get(api_key)
    return None if entry is None else entry[1]


def _short(value: bytes, pos: int, end: int, entity: str) -> tuple[int, int]:
    """``unsignedIntToShort``: a uvarint read as Java's ``int``, checked ``<= Short.MAX_VALUE``,
    then cast to ``short``; (value, next position)."""
    start = pos
    result = 0
    shift = 0
    while True:
        if pos >= end:  # BufferUnderflowException
            raise FrameError(f"Error while reading {entity}", start)
        b = value[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            break
        if shift == 28:  # the 5th byte has its high bit set: IllegalArgumentException
            raise FrameError(f"Error while reading {entity}", start)
        shift += 7
    result &= 0xFFFFFFFF  # the 5th byte's bits above 31 fall off the int
    if result >= 0x80000000:
        result -= 1 << 32
    if result > 0x7FFF:
        raise FrameError(f"Value for {entity} was too large.", start)
    return ((result & 0xFFFF) ^ 0x8000) - 0x8000, pos


def read_frame(value: bytes | memoryview | None, category: str = "metadata") -> Message:
    """Read one framed value as ``AbstractApiMessageSerde.read`` does and return its message.

    ``category`` picks the apiKey table: ``"metadata"`` (``MetadataRecordSerde``, the
    ``__cluster_metadata`` records) or ``"remote-log-metadata"`` (``RemoteLogMetadataSerde``,
    whose apiKeys 0-3 are its own). ``Message.version`` is the version in the frame (the body
    was read at its clamp). Raises :class:`FrameError` carrying Kafka's message for a null
    value, a bad frame, an unknown apiKey, a body that does not read, or bytes after it.
    """
    if value is None:  # the first readUnsignedVarint throws a NullPointerException
        raise FrameError("Error while reading frame version", 0)
    types = _CATEGORIES[category]
    end = len(value)
    if end > 3 and value[0] == _FRAME_VERSION and value[1] < 0x80 and value[2] < 0x80:
        api_key = value[1]  # the usual frame: three one-byte varints
        version = value[2]
        entry = types.get(api_key)
        if entry is not None:
            return _body(value, entry[0], api_key, version, 3, end)
    frame, pos = _short(value, 0, end, "frame version")
    if frame == 0:
        raise FrameError(
            "Could not deserialize metadata record with frame version 0. Note that upgrades from "
            "the preview release of KRaft in 2.8 to newer versions are not supported.", 0)
    if frame != _FRAME_VERSION:
        raise FrameError(
            f"Could not deserialize metadata record due to unknown frame version {frame}"
            f"(only frame version {_FRAME_VERSION} is supported)", 0)
    api_pos = pos
    api_key, pos = _short(value, pos, end, "type")
    version, pos = _short(value, pos, end, "version")
    entry = types.get(api_key)
    if entry is None:
        # MetadataRecordType.fromId throws UnsupportedVersionException, which the serde wraps
        # as new MetadataParseException(e): the message is the cause's toString()
        raise FrameError("org.apache.kafka.common.errors.UnsupportedVersionException: "
                         f"Unknown metadata id {api_key}", api_pos)
    return _body(value, entry[0], api_key, version, pos, end)


def _body(value: bytes | memoryview, name: str, api_key: int, version: int, body: int, end: int) -> Message:
    """The message body from ``body`` to the end of the value."""
    try:
        data, pos = message.decode(name, value, version, pos=body)
    except InvalidRecordError as e:
        raise FrameError(f"Failed to deserialize record with type {api_key}",
                         e.position if e.position is not None else body, e) from None
    except Exception:  # the codec raises only InvalidRecordError; never let anything escape
        raise FrameError(f"Failed to deserialize record with type {api_key}", body) from None
    if pos != end:
        raise FrameError(f"Found {end - pos} byte(s) of garbage after {api_key}", pos)
    return Message(name, version, data)


def payload_tree(msg: Message) -> dict:
    """The JSON tree kafka-dump-log prints for a read metadata record:
    ``{"type": <RECORD_TYPE>, "version": <n>, "data": <JsonConverter tree>}``."""
    return {
        "type": MESSAGES[msg.name]["recordTypeName"],
        "version": msg.version,
        "data": message.to_json(msg.name, msg.data, msg.version),
    }


def decode(key: bytes | None, value: bytes | None, offset: int) -> Decoded:
    """``--cluster-metadata-decoder`` on one record (never raises).

    Success: ``key``/``key_text``/``key_json`` None, ``value`` the record's :class:`Message`,
    ``payload_json`` ``{"type", "version", "data"}`` (:func:`payload_tree`) and
    ``payload_text`` its compact JSON as Jackson writes it. Failure (a null value included):
    ``payload_text`` = ``error`` = ``Error at <offset>, skipping. <message>`` (no word
    "offset", as Kafka prints it), ``value``/``payload_json`` None; never fatal."""
    try:
        msg = read_frame(value)
    except FrameError as e:
        text = f"Error at {offset}, skipping. {e.kafka_message}"
        return Decoded(None, None, None, text, None, None, text, False)
    name = msg.name
    tree = message.to_json(name, msg.data, msg.version)
    type_name = MESSAGES[name]["recordTypeName"]
    text = '{"type":"%s","version":%d,"data":%s}' % (type_name, msg.version, message.dumps(tree, floats=name in _FLOATS))
    return Decoded(None, msg, None, text, None,
                   {"type": type_name, "version": msg.version, "data": tree}, None, False)
