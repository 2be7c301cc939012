"""Text files of a log dir (spec §11): checkpoints, partition.metadata, quorum-state,
meta.properties and the clean-shutdown marker.

Parsing mirrors Kafka's readers: lines split like ``BufferedReader.readLine`` (``\\n``,
``\\r`` or ``\\r\\n``), numbers parsed like ``Integer.parseInt``/``Long.parseLong``,
entry lines split on Java's ``\\s+``. Errors are :class:`CheckpointError` whose message
is Kafka's text (which names the file's absolute path, as Kafka does); the error also
carries ``path`` and the byte position of the offending line.

``decode_*`` take the file bytes and the location to name in messages; ``read_*`` read
the file and pass its absolute path.
"""

from __future__ import annotations

import base64
import json
import os
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, NamedTuple, TypeVar

from kafkatool.errors import CheckpointError
from kafkatool.record.control import kafka_uuid_str
from kafkatool.segment.files import java_parse_int

__all__ = [
    "EpochEntry",
    "OffsetCheckpointEntry",
    "PartitionMetadata",
    "decode_uuid",
    "encode_uuid",
    "decode_leader_epoch_checkpoint",
    "read_leader_epoch_checkpoint",
    "encode_leader_epoch_checkpoint",
    "decode_offset_checkpoint",
    "read_offset_checkpoint",
    "encode_offset_checkpoint",
    "decode_partition_metadata",
    "read_partition_metadata",
    "encode_partition_metadata",
    "decode_quorum_state",
    "read_quorum_state",
    "decode_properties",
    "read_meta_properties",
    "decode_clean_shutdown",
    "read_clean_shutdown",
]

CHECKPOINT_VERSION = 0  # LeaderEpochCheckpointFile / OffsetCheckpointFile CURRENT_VERSION
PARTITION_METADATA_VERSION = 0  # PartitionMetadataFile.CURRENT_VERSION

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_JAVA_WS = re.compile(r"[ \t\n\x0b\f\r]+")  # Java's \s (ASCII only)
_METADATA_SEP = re.compile(r":[ \t\n\x0b\f\r]+")  # PartitionMetadataReadBuffer's ":\s+"
_KAFKA_UUID = re.compile(r"[A-Za-z0-9_-]{22}(?:==)?", re.ASCII)

T = TypeVar("T")


class EpochEntry(NamedTuple):
    """A ``leader-epoch-checkpoint`` line: the epoch and its start offset."""

    epoch: int
    start_offset: int


class OffsetCheckpointEntry(NamedTuple):
    """A line of a log-dir offset checkpoint: ``<topic> <partition> <offset>``."""

    topic: str
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    """``partition.metadata``: the file version and the topic id (Kafka's 22-character Uuid string)."""

    version: int
    topic_id: str


# ----------------------------------------------------------------------------- shared helpers


class _Line(NamedTuple):
    text: str
    char_start: int


def _decode_text(data: bytes, location: str, encoding: str = "utf-8") -> str:
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as e:
        # Files.newBufferedReader(UTF_8) throws MalformedInputException.
        raise CheckpointError(
            f"Malformed input in file [{location}]: not valid {encoding.upper()}",
            path=location,
            position=e.start,
        ) from None


def _read_lines(text: str) -> list[_Line]:
    """Lines as successive ``BufferedReader.readLine`` calls return them."""
    lines: list[_Line] = []
    start = 0
    for m in _LINE_BREAK.finditer(text):
        lines.append(_Line(text[start : m.start()], start))
        start = m.end()
    if start < len(text):
        lines.append(_Line(text[start:], start))
    return lines


def _java_split(pattern: re.Pattern[str], line: str) -> list[str]:
    """Java's ``Pattern.split(line)``: a leading empty token is kept, trailing empty tokens are dropped."""
    if pattern.search(line) is None:
        return [line]
    parts = pattern.split(line)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def _byte_pos(text: str, char_pos: int) -> int:
    return len(text[:char_pos].encode("utf-8"))


def _malformed(location: str, text: str, line: _Line | None) -> CheckpointError:
    shown = "null" if line is None else line.text
    position = len(text.encode("utf-8")) if line is None else _byte_pos(text, line.char_start)
    return CheckpointError(
        f"Malformed line in checkpoint file [{location}]: {shown}", path=location, position=position
    )


def _read_file(path: str | os.PathLike[str]) -> tuple[bytes, str]:
    spath = os.fspath(path)
    with open(spath, "rb") as f:
        data = f.read()
    # Kafka's CheckpointFile names its absolute path in every message.
    return data, os.path.abspath(spath)


# ----------------------------------------------------------------------------- CheckpointFile framing


def _decode_checkpoint(
    data: bytes, location: str, parse_entry: Callable[[list[str]], T | None]
) -> list[T]:
    """``CheckpointFile.CheckpointReadBuffer.read`` (§11.1): version line, count line, entry lines."""
    text = _decode_text(data, location)
    lines = _read_lines(text)
    if not lines:
        return []  # an empty file has no entries
    version = java_parse_int(lines[0].text, 32)
    if version is None:
        raise _malformed(location, text, lines[0])
    if version != CHECKPOINT_VERSION:
        raise CheckpointError(
            f"Unrecognised version:{version}, expected version: {CHECKPOINT_VERSION} "
            f"in checkpoint file at: {location}",
            path=location,
            position=0,
        )
    if len(lines) < 2:
        return []  # a missing count line means no entries
    expected = java_parse_int(lines[1].text, 32)
    if expected is None:
        raise _malformed(location, text, lines[1])
    entries: list[T] = []
    for line in lines[2:]:
        entry = parse_entry(_java_split(_JAVA_WS, line.text))
        if entry is None:
            # Kafka: formatter returned empty (wrong token count), or parseInt/parseLong threw.
            raise _malformed(location, text, line)
        entries.append(entry)
    if len(entries) != expected:
        # (A negative count makes Kafka's ArrayList constructor throw; it is a mismatch all the same.)
        raise CheckpointError(
            f"Expected [{expected}] entries in checkpoint file [{location}], but found only [{len(entries)}]",
            path=location,
            position=_byte_pos(text, lines[1].char_start),
        )
    return entries


def _encode_checkpoint(lines: Iterable[str]) -> str:
    body = list(lines)
    return "".join(f"{line}\n" for line in [str(CHECKPOINT_VERSION), str(len(body)), *body])


# ----------------------------------------------------------------------------- leader-epoch-checkpoint


def _epoch_entry(tokens: list[str]) -> EpochEntry | None:
    if len(tokens) != 2:
        return None
    epoch = java_parse_int(tokens[0], 32)
    start_offset = java_parse_int(tokens[1], 64)
    if epoch is None or start_offset is None:
        return None
    return EpochEntry(epoch, start_offset)


def decode_leader_epoch_checkpoint(data: bytes, location: str = "<memory>") -> list[EpochEntry]:
    """Parse a ``leader-epoch-checkpoint`` (§11.1). ``location`` is named in error messages."""
    return _decode_checkpoint(data, location, _epoch_entry)


def read_leader_epoch_checkpoint(path: str | os.PathLike[str]) -> list[EpochEntry]:
    """Read a ``leader-epoch-checkpoint`` file (§11.1)."""
    data, location = _read_file(path)
    return decode_leader_epoch_checkpoint(data, location)


def encode_leader_epoch_checkpoint(entries: Iterable[EpochEntry | tuple[int, int]]) -> str:
    """The text Kafka writes: ``0``, the count, then ``<epoch> <startOffset>`` lines, each ending in ``\\n``."""
    return _encode_checkpoint(f"{epoch} {start_offset}" for epoch, start_offset in entries)


# ----------------------------------------------------------------------------- offset checkpoints


def _offset_entry(tokens: list[str]) -> OffsetCheckpointEntry | None:
    if len(tokens) != 3:
        return None
    partition = java_parse_int(tokens[1], 32)
    offset = java_parse_int(tokens[2], 64)
    if partition is None or offset is None:
        return None
    return OffsetCheckpointEntry(tokens[0], partition, offset)


def decode_offset_checkpoint(data: bytes, location: str = "<memory>") -> list[OffsetCheckpointEntry]:
    """Parse a log-dir offset checkpoint (§11.3), entries in file order."""
    return _decode_checkpoint(data, location, _offset_entry)


def read_offset_checkpoint(path: str | os.PathLike[str]) -> list[OffsetCheckpointEntry]:
    """Read ``recovery-point-``, ``log-start-``, ``replication-`` or ``cleaner-offset-checkpoint`` (§11.3)."""
    data, location = _read_file(path)
    return decode_offset_checkpoint(data, location)


def encode_offset_checkpoint(entries: Iterable[OffsetCheckpointEntry | tuple[str, int, int]]) -> str:
    """The text Kafka writes: ``0``, the count, then ``<topic> <partition> <offset>`` lines."""
    return _encode_checkpoint(f"{topic} {partition} {offset}" for topic, partition, offset in entries)


# ----------------------------------------------------------------------------- Kafka Uuid


def decode_uuid(text: str, location: str = "<memory>") -> bytes:
    """The 16 bytes of a Kafka ``Uuid`` string (``Uuid.fromString``): URL-safe base64, 22 characters.

    The ``==`` padding Java's decoder tolerates is accepted too. Raises :class:`CheckpointError`.
    """
    if _KAFKA_UUID.fullmatch(text) is None:
        raise CheckpointError(
            "not a Kafka Uuid", path=location, expected="22 URL-safe base64 characters", found=repr(text)
        )
    return base64.urlsafe_b64decode(text[:22] + "==")


def encode_uuid(raw: bytes) -> str:
    """Kafka's ``Uuid.toString`` of 16 bytes."""
    if len(raw) != 16:
        raise CheckpointError("a Kafka Uuid has 16 bytes", expected=16, found=len(raw))
    return kafka_uuid_str(raw)


# ----------------------------------------------------------------------------- partition.metadata


def decode_partition_metadata(data: bytes, location: str = "<memory>") -> PartitionMetadata:
    """Parse ``partition.metadata`` (§11.2) as ``PartitionMetadataReadBuffer.read`` does.

    Each of the first two lines splits on ``:\\s+`` into exactly two parts (the keys are
    not checked); the version must be >= 0; the topic id must be a non-zero Kafka Uuid.
    Later lines are ignored. ``topic_id`` is returned in canonical 22-character form.
    """
    text = _decode_text(data, location)
    lines = _read_lines(text)

    def value_of(i: int) -> tuple[_Line, str]:
        # A missing line is a NullPointerException in Kafka; newer Kafka reports it as "null".
        if i >= len(lines):
            raise _malformed(location, text, None)
        parts = _java_split(_METADATA_SEP, lines[i].text)
        if len(parts) != 2:
            raise _malformed(location, text, lines[i])
        return lines[i], parts[1]

    line, value = value_of(0)
    version = java_parse_int(value, 32)
    if version is None:
        raise _malformed(location, text, line)
    if version < PARTITION_METADATA_VERSION:
        # Kafka's text, stray " + " included.
        raise CheckpointError(
            f"Unrecognized version of partition metadata file + ({location}): {version}",
            path=location,
            position=0,
        )
    line, value = value_of(1)
    try:
        raw = decode_uuid(value, location)
    except CheckpointError:
        raise _malformed(location, text, line) from None
    if raw == bytes(16):
        raise CheckpointError(
            f"Invalid topic ID in partition metadata file ({location})",
            path=location,
            position=_byte_pos(text, line.char_start),
        )
    return PartitionMetadata(version, kafka_uuid_str(raw))


def read_partition_metadata(path: str | os.PathLike[str]) -> PartitionMetadata:
    """Read a ``partition.metadata`` file (§11.2)."""
    data, location = _read_file(path)
    return decode_partition_metadata(data, location)


def encode_partition_metadata(topic_id: str | bytes) -> str:
    """``version: 0\\ntopic_id: <uuid>``, with no trailing newline (``PartitionMetadata.encode``)."""
    raw = topic_id if isinstance(topic_id, bytes) else decode_uuid(topic_id)
    if raw == bytes(16):
        raise CheckpointError("the all-zero Uuid is not a valid topic id", found=encode_uuid(raw))
    return f"version: {PARTITION_METADATA_VERSION}\ntopic_id: {encode_uuid(raw)}"


# ----------------------------------------------------------------------------- quorum-state


def decode_quorum_state(data: bytes, location: str = "<memory>") -> dict[str, Any]:
    """Parse ``quorum-state`` (KRaft, ``FileQuorumStateStore``): one JSON object."""
    text = _decode_text(data, location)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise CheckpointError(
            f"Error while reading the Quorum status from the file {location}: {e.msg}",
            path=location,
            position=_byte_pos(text, e.pos),
        ) from None
    if not isinstance(value, dict):
        raise CheckpointError(
            f"Error while reading the Quorum status from the file {location}",
            path=location,
            position=0,
            expected="a JSON object",
            found=type(value).__name__,
        )
    return value


def read_quorum_state(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a ``quorum-state`` file."""
    data, location = _read_file(path)
    return decode_quorum_state(data, location)


# ----------------------------------------------------------------------------- meta.properties

_PROP_WS = " \t\f"
_PROP_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _logical_lines(text: str) -> Iterable[tuple[str, int]]:
    """``Properties.load``'s logical lines: comments and blank lines dropped, continuations joined."""
    physical = _read_lines(text)
    i = 0
    while i < len(physical):
        line, start = physical[i]
        i += 1
        stripped = line.lstrip(_PROP_WS)
        if not stripped or stripped[0] in "#!":
            continue
        parts = [stripped]
        # An odd number of trailing backslashes continues the line; the next one loses its leading blanks.
        while (len(parts[-1]) - len(parts[-1].rstrip("\\"))) % 2 == 1:
            parts[-1] = parts[-1][:-1]
            if i >= len(physical):
                break
            parts.append(physical[i].text.lstrip(_PROP_WS))
            i += 1
        yield "".join(parts), start


def _unescape(s: str, location: str, position: int) -> str:
    out: list[str] = []
    i = 0
    while i < len(s):
        c = s[i]
        i += 1
        if c != "\\" or i >= len(s):
            out.append(c)
            continue
        c = s[i]
        i += 1
        if c == "u":
            digits = s[i : i + 4]
            if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise CheckpointError(
                    "Malformed \\uxxxx encoding.", path=location, position=position, found=repr(s)
                )
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_PROP_ESCAPES.get(c, c))
    return "".join(out)


def decode_properties(data: bytes, location: str = "<memory>") -> dict[str, str]:
    """Parse a Java ``.properties`` file (ISO-8859-1, as ``Properties.load(InputStream)``).

    ``#``/``!`` comments, ``key=value``, ``key:value`` or ``key value``, backslash escapes and
    line continuations. A later key overrides an earlier one.
    """
    text = data.decode("latin-1")
    props: dict[str, str] = {}
    for line, start in _logical_lines(text):
        # The key ends at the first unescaped '=', ':' or blank.
        i = 0
        while i < len(line) and line[i] not in "=:" + _PROP_WS:
            i += 2 if line[i] == "\\" else 1
        key_end = min(i, len(line))
        j = key_end
        while j < len(line) and line[j] in _PROP_WS:
            j += 1
        if j < len(line) and line[j] in "=:":
            j += 1
            while j < len(line) and line[j] in _PROP_WS:
                j += 1
        key = _unescape(line[:key_end], location, start)
        props[key] = _unescape(line[j:], location, start)
    return props


def read_meta_properties(path: str | os.PathLike[str]) -> dict[str, str]:
    """Read a log dir's ``meta.properties`` (§2.2) as a dict of strings."""
    data, location = _read_file(path)
    return decode_properties(data, location)


# ----------------------------------------------------------------------------- .kafka_cleanshutdown


def decode_clean_shutdown(data: bytes) -> int | None:
    """The broker epoch stored in ``.kafka_cleanshutdown`` (§11.4), or None.

    Only the file's existence matters for recovery. Its content is optional: older brokers
    write an empty file, and Kafka ignores any read failure, so this never raises. Newer
    brokers write ``{"version":"0","broker_epoch":"<n>"}`` (string values, per
    ``CleanShutdownFileHandler``); numbers and the ``brokerEpoch`` spelling are accepted too.
    """
    try:
        content = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(content, dict):
        return None
    value = content.get("broker_epoch", content.get("brokerEpoch"))
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        return java_parse_int(value, 64)
    return None


def read_clean_shutdown(path: str | os.PathLike[str]) -> int | None:
    """Read ``.kafka_cleanshutdown``; see :func:`decode_clean_shutdown`. A missing file raises OSError."""
    data, _ = _read_file(path)
    return decode_clean_shutdown(data)
