"""Independent oracles for the ``kafkatool convert`` tests (test_convert_matrix, test_convert_real).

Nothing here uses kafkatool's readers or encoders to decide what a conversion should produce:

* :func:`kp_read` / :func:`aio_read` decode a buffer with kafka-python (``kafka.record``) and
  aiokafka's compiled reader (``aiokafka.record``) into plain :class:`Entry` views (batch fields
  and records); magic-0 lz4 wrappers, which both libraries refuse without help, are read through
  :func:`old_kafka_lz4` (kafka-python with a pure-Python XXH32 standing in for the missing
  ``xxhash`` package) and, for aiokafka, by feeding it the unwrapped inner messages.
* :func:`expected_records` / :func:`expected_loss` derive, from the source as a library reads it,
  what spec §13 and the issue's rules say the output must hold and what the loss report must count.
* :func:`aborted_batches` derives the aborted transactions from the control batches (ABORT
  markers, spec §6 and §9) as a read_committed consumer sees them: kafka-python has no
  read_committed file reader.
* :func:`raw_entries` frames a segment with :mod:`struct` (spec §3-§5) and
  :func:`expected_indexes` feeds those entries to the public ``IndexBuilder`` (what
  ``reindex`` and broker recovery write).
* :func:`kt` runs ``kafkatool ARGS...`` in-process (click's runner isolation around
  ``kafkatool.cli.main.main``) and returns the exit code, stdout and stderr.
"""

from __future__ import annotations

import contextlib
import json
import struct
import sys
from dataclasses import dataclass, field
from unittest import mock

import kafka.codec
from aiokafka.errors import UnsupportedCodecError
from aiokafka.record.memory_records import MemoryRecords as AioMemoryRecords
from click.testing import CliRunner
from kafka.record import MemoryRecords as KpMemoryRecords

NO_TIMESTAMP = -1
CREATE_TIME, LOG_APPEND_TIME = 0, 1
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
#: The loss counters of the contract (COMMON.md ``Loss``) that count something lost.
LOSS_KEYS = (
    "headers_dropped", "header_count", "producer_fields_dropped", "control_batches_dropped",
    "control_records_dropped", "timestamps_dropped", "empty_batches_dropped", "aborted_records_kept",
    "aborted_records_dropped",
)


# --------------------------------------------------------------------------- running the CLI


@dataclass
class Result:
    code: int
    out: str
    err: str

    def __repr__(self) -> str:
        return f"Result(code={self.code}, out={self.out[-600:]!r}, err={self.err[-900:]!r})"


def kt(*args: object) -> Result:
    """``kafkatool ARGS...`` in this process, as the console script runs it (exit codes included)."""
    from kafkatool.cli.main import main

    runner = CliRunner()
    with runner.isolation() as (out, err, _mixed):
        try:
            main([str(a) for a in args])
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        sys.stdout.flush()  # the isolation's text wrappers buffer
        sys.stderr.flush()
        return Result(code, out.getvalue().decode("utf-8", "replace"), err.getvalue().decode("utf-8", "replace"))


def jsonl_objects(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def snake(name: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in name)


def summary(stdout: str) -> dict:
    """The final ``convert_summary`` object of ``--format jsonl`` output."""
    objs = jsonl_objects(stdout)
    assert objs and objs[-1].get("type") == "convert_summary", stdout[-1500:]
    return objs[-1]


def summary_loss(stdout: str) -> dict:
    """The run's merged loss (the summary's ``loss``), keys back in the contract's snake_case."""
    return {snake(k): v for k, v in summary(stdout)["loss"].items()}


# --------------------------------------------------------------------------- XXH32 and magic-0 lz4

_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes, seed: int = 0) -> int:
    """XXH32 (the LZ4 frame header checksum), written from the published algorithm."""
    n = len(data)
    i = 0
    if n >= 16:
        v = [(seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed & _M32, (seed - _P1) & _M32]
        while i + 16 <= n:
            for k in range(4):
                (lane,) = struct.unpack_from("<I", data, i)
                v[k] = (_rotl((v[k] + lane * _P2) & _M32, 13) * _P1) & _M32
                i += 4
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while i + 4 <= n:
        (lane,) = struct.unpack_from("<I", data, i)
        h = (_rotl((h + lane * _P3) & _M32, 17) * _P4) & _M32
        i += 4
    while i < n:
        h = (_rotl((h + data[i] * _P5) & _M32, 11) * _P1) & _M32
        i += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


class _Xxh32:
    def __init__(self, data: bytes) -> None:
        self._h = xxh32(bytes(data))

    def digest(self) -> bytes:
        return self._h.to_bytes(4, "big")


@contextlib.contextmanager
def old_kafka_lz4():
    """Let kafka-python read magic-0 lz4 (its ``lz4_decode_old_kafka`` needs ``xxhash``)."""
    if getattr(kafka.codec, "xxhash", None) is not None:
        yield
        return
    with mock.patch.object(kafka.codec, "xxhash", mock.Mock(xxh32=_Xxh32)):
        yield


def lz4_header_checksums(frame: bytes) -> tuple[int, int, int]:
    """``(stored HC, standard HC over FLG||BD, magic-0 "broken" HC over magic||FLG||BD)`` (spec §7.4)."""
    assert frame[:4] == b"\x04\x22\x4d\x18", frame[:8].hex()
    end = 6 + (8 if frame[4] & 0x08 else 0)
    return frame[end], (xxh32(frame[4:end]) >> 8) & 0xFF, (xxh32(frame[0:end]) >> 8) & 0xFF


def legacy_value(entry: bytes) -> bytes:
    """The value of one legacy message with its log overhead (a wrapper's compressed payload), §5.1."""
    pos = 12 + 4 + 2 + (8 if entry[16] == 1 else 0)
    (kl,) = struct.unpack_from(">i", entry, pos)
    pos += 4 + max(kl, 0)
    (vl,) = struct.unpack_from(">i", entry, pos)
    return entry[pos + 4 : pos + 4 + vl]


def legacy_message(offset: int, magic: int, attributes: int, timestamp: int, key: bytes | None,
                   value: bytes | None) -> bytes:
    """One legacy message with its log overhead, written by hand from spec §5.1 (CRC-32 with zlib)."""
    import zlib

    body = bytes([magic, attributes]) + (struct.pack(">q", timestamp) if magic == 1 else b"")
    for f in (key, value):
        body += struct.pack(">i", -1) if f is None else struct.pack(">i", len(f)) + f
    crc = zlib.crc32(body)
    return struct.pack(">qiI", offset, 4 + len(body), crc) + body


def legacy_wrapper(offset: int, magic: int, codec: int, timestamp: int, inner: bytes, *, log_append: bool = False) -> bytes:
    """A compressed legacy wrapper around ``inner`` (already framed messages), compressed by kafka-python."""
    compress = {1: kafka.codec.gzip_encode, 2: kafka.codec.snappy_encode, 3: kafka.codec.lz4_encode}[codec]
    return legacy_message(offset, magic, codec | (0x08 if log_append else 0), timestamp, None, compress(inner))


def inner_entries(entry: bytes) -> list["RawEntry"]:
    """The inner messages of a compressed legacy wrapper (with its log overhead), decompressed by
    kafka-python's codecs (magic-0 lz4 with its header quirk) and framed by :func:`raw_entries`."""
    magic, codec = entry[16], entry[17] & 7
    value = legacy_value(entry)
    with old_kafka_lz4():
        decode = {1: kafka.codec.gzip_decode, 2: kafka.codec.snappy_decode,
                  3: kafka.codec.lz4_decode_old_kafka if magic == 0 else kafka.codec.lz4_decode}[codec]
        return raw_entries(decode(value))


# --------------------------------------------------------------------------- independent framing


@dataclass(frozen=True)
class RawEntry:
    """One entry of a segment as framed by spec §3: its file position and size, and the header
    fields an index rebuild needs."""

    position: int
    size: int
    magic: int
    first_offset: int  # v2: baseOffset; legacy: the shallow message's offset
    last_offset: int
    max_timestamp: int  # v2: maxTimestamp; v1: the message timestamp; v0: -1
    attributes: int


def raw_entries(buf: bytes) -> list[RawEntry]:
    """Every whole entry of ``buf`` (a trailing partial entry is left out, as Kafka leaves it)."""
    out = []
    pos = 0
    while pos + 17 <= len(buf):
        offset, length = struct.unpack_from(">qi", buf, pos)
        size = 12 + length
        if pos + size > len(buf):
            break
        magic = buf[pos + 16]
        if magic >= 2:
            (attributes,) = struct.unpack_from(">h", buf, pos + 21)
            (delta,) = struct.unpack_from(">i", buf, pos + 23)
            (max_ts,) = struct.unpack_from(">q", buf, pos + 35)
            out.append(RawEntry(pos, size, magic, offset, offset + delta, max_ts, attributes))
        else:
            attributes = buf[pos + 17]
            ts = struct.unpack_from(">q", buf, pos + 18)[0] if magic == 1 else NO_TIMESTAMP
            out.append(RawEntry(pos, size, magic, offset, offset, ts, attributes))
        pos += size
    return out


def expected_indexes(buf: bytes, base_offset: int, interval: int = 4096) -> tuple[bytes, bytes]:
    """The ``.index`` and ``.timeindex`` recovery (and ``reindex``) builds for the log ``buf``."""
    from kafkatool.segment.index import IndexBuilder

    builder = IndexBuilder(base_offset, interval)
    for e in raw_entries(buf):
        builder.add_batch(e.position, e.size, e.last_offset, e.max_timestamp)
    result = builder.finish()
    return tuple(bytes(x) for x in result) if isinstance(result, tuple) else (bytes(result.index), bytes(result.timeindex))


def varint_size(value: int) -> int:
    """Bytes of a zigzag varint (spec §4.2)."""
    z = (value << 1) ^ (value >> 63)
    n = 1
    while z >= 0x80:
        z >>= 7
        n += 1
    return n


def v2_record_size(offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None) -> int:
    """Bytes of one v2 record without headers (§4.2): length varint, attributes, deltas, key, value, 0 headers."""
    body = 1 + varint_size(timestamp_delta) + varint_size(offset_delta)
    for field_ in (key, value):
        body += varint_size(-1) if field_ is None else varint_size(len(field_)) + len(field_)
    body += varint_size(0)
    return varint_size(body) + body


V2_BATCH_OVERHEAD = 61  # log overhead and batch header (§4.1)


def greedy_runs(records: list[Rec], max_batch_bytes: int) -> list[list[int]]:
    """Offsets of the v2 batches a run of uncompressed legacy messages becomes when each batch
    (log overhead included) may hold at most ``max_batch_bytes`` (a single record always fits)."""
    runs: list[list[int]] = []
    size = 0
    base = None
    for r in records:
        if base is not None:
            add = v2_record_size(r.offset - base.offset, r.timestamp - base.timestamp, r.key, r.value)
            if size + add <= max_batch_bytes:
                runs[-1].append(r.offset)
                size += add
                continue
        base = r
        runs.append([r.offset])
        size = V2_BATCH_OVERHEAD + v2_record_size(0, 0, r.key, r.value)
    return runs


# --------------------------------------------------------------------------- library views


@dataclass
class Rec:
    offset: int
    timestamp: int  # -1 for "none" (the libraries' None for magic 0)
    timestamp_type: int | None
    key: bytes | None
    value: bytes | None
    headers: tuple = ()

    def kv(self) -> tuple:
        return (self.offset, self.key, self.value)


@dataclass
class Entry:
    """One batch (v2) or shallow legacy entry as a library reads it."""

    magic: int | None
    codec: int | None
    first_offset: int
    last_offset: int
    timestamp_type: int | None
    crc_valid: bool
    records: list[Rec] = field(default_factory=list)
    v2: dict = field(default_factory=dict)  # the v2 header fields (kafka-python only)
    position: int = 0
    size: int = 0

    @property
    def is_control(self) -> bool:
        return bool(self.v2.get("is_control"))


def _headers(headers) -> tuple:
    return tuple((k.encode("utf-8") if isinstance(k, str) else k, v) for k, v in headers)


def _ts(value) -> int:
    return NO_TIMESTAMP if value is None else value


def kp_read(buf: bytes) -> list[Entry]:
    """kafka-python's view of a segment's bytes (every entry must be whole and readable)."""
    buf = bytes(buf)
    out = []
    pos = 0
    with old_kafka_lz4():
        records = KpMemoryRecords(buf)
        while (b := records.next_batch()) is not None:
            crc_valid = b.validate_crc()
            size = b.size_in_bytes if b.magic >= 2 else None
            if b.magic >= 2:
                e = Entry(
                    b.magic, b.compression_type, b.base_offset, b.last_offset, b.timestamp_type, crc_valid,
                    v2={
                        "base_offset": b.base_offset, "last_offset": b.last_offset,
                        "producer_id": b.producer_id, "producer_epoch": b.producer_epoch,
                        "base_sequence": b.base_sequence, "is_transactional": b.is_transactional,
                        "is_control": b.is_control_batch, "leader_epoch": b.leader_epoch,
                        "timestamp_type": b.timestamp_type, "first_timestamp": b.first_timestamp,
                        "max_timestamp": b.max_timestamp, "count": b.records_count,
                        "delete_horizon_bit": bool(b.attributes & 0x40),
                    },
                )
            else:
                e = Entry(b.magic, b.compression_type, b.base_offset, b.base_offset,
                          b.timestamp_type, crc_valid)
            for r in b:
                e.records.append(Rec(r.offset, _ts(r.timestamp), r.timestamp_type, r.key, r.value,
                                     _headers(r.headers)))
            e.position = pos
            if size is None:
                (length,) = struct.unpack_from(">i", buf, pos + 8)
                size = 12 + length
            e.size = size
            pos += size
            out.append(e)
        assert records.valid_bytes() == len(buf), (records.valid_bytes(), len(buf))
    return out


def aio_read(buf: bytes) -> list[list[Rec]]:
    """aiokafka's (compiled reader's) records, per entry. A magic-0 lz4 wrapper, which aiokafka
    refuses ("LZ4 is not supported for broker version 0.8/0.9"), is read from its inner messages
    once kafka-python has decompressed them."""
    buf = bytes(buf)
    out = []
    entries = raw_entries(buf)
    records = AioMemoryRecords(buf)
    i = 0
    while (b := records.next_batch()) is not None:
        try:
            recs = [Rec(r.offset, _ts(r.timestamp), r.timestamp_type, r.key, r.value, _headers(r.headers)) for r in b]
        except UnsupportedCodecError as err:
            e = entries[i]
            assert (e.magic, e.attributes & 7) == (0, 3) and "0.8/0.9" in str(err), (e, err)
            with old_kafka_lz4():
                inner = kafka.codec.lz4_decode_old_kafka(legacy_value(buf[e.position : e.position + e.size]))
            recs = [r for rs in aio_read(inner) for r in rs]
        out.append(recs)
        i += 1
    assert i == len(entries), (i, len(entries))
    return out


# --------------------------------------------------------------------------- transactions (read_committed)


def aborted_batches(entries: list[Entry]) -> set[int]:
    """Indexes (into ``entries``) of the transactional data batches a read_committed consumer skips.

    Spec §6/§9: a transaction of producer P runs from P's first transactional batch after its
    previous marker to its next control batch; an ABORT marker (control key type 0) aborts every
    batch of it. A transaction with no marker yet (still open) is not aborted.
    """
    open_batches: dict[int, list[int]] = {}
    aborted: set[int] = set()
    for i, e in enumerate(entries):
        if e.magic is None or e.magic < 2 or not e.v2["is_transactional"]:
            continue
        pid = e.v2["producer_id"]
        if e.is_control:
            (_version, kind) = struct.unpack(">hh", e.records[0].key[:4])
            batches = open_batches.pop(pid, [])
            if kind == 0:
                aborted.update(batches)
        else:
            open_batches.setdefault(pid, []).append(i)
    return aborted


# --------------------------------------------------------------------------- what the rules expect


def expected_records(src: list[Entry], magic: int, *, drop_aborted: bool = False) -> list[Rec]:
    """The records (control records included for a v2 target) a conversion of ``src`` to ``magic`` holds,
    as kafka-python reads them: offsets, keys and values kept; headers kept only at v2; timestamps
    kept at v1/v2 except that v0 has none (-1); control batches dropped below v2."""
    aborted = aborted_batches(src) if drop_aborted else set()
    out = []
    for i, e in enumerate(src):
        if i in aborted:
            continue
        if magic < 2 and e.is_control:
            continue
        for r in e.records:
            if magic == 2:
                ts_type = CREATE_TIME if e.magic == 0 else e.timestamp_type
                out.append(Rec(r.offset, r.timestamp, ts_type, r.key, r.value, r.headers if e.magic == 2 else ()))
            elif magic == 1:
                ts_type = CREATE_TIME if e.magic == 0 else e.timestamp_type
                out.append(Rec(r.offset, r.timestamp, ts_type, r.key, r.value, ()))
            else:
                out.append(Rec(r.offset, NO_TIMESTAMP, None, r.key, r.value, ()))
    return out


def expected_loss(src: list[Entry], magic: int, *, drop_aborted: bool = False) -> dict[str, int]:
    """The loss counters a conversion of ``src`` to ``magic`` must report, counted by hand from the
    source as kafka-python reads it (the contract's ``Loss``)."""
    loss = dict.fromkeys(LOSS_KEYS, 0)
    aborted = aborted_batches(src)
    for i, e in enumerate(src):
        n = len(e.records)
        if i in aborted and drop_aborted:
            loss["aborted_records_dropped"] += n
            continue
        if magic == 2:
            continue
        if e.magic == 2:
            if e.is_control:
                loss["control_batches_dropped"] += 1
                loss["control_records_dropped"] += n
                continue
            if n == 0:
                loss["empty_batches_dropped"] += 1
                continue
            v = e.v2
            if (v["producer_id"] != -1 or v["producer_epoch"] != -1 or v["base_sequence"] != -1
                    or v["leader_epoch"] != -1 or v["is_transactional"]):
                loss["producer_fields_dropped"] += 1
            with_headers = [r for r in e.records if r.headers]
            loss["headers_dropped"] += len(with_headers)
            loss["header_count"] += sum(len(r.headers) for r in with_headers)
            if i in aborted:
                loss["aborted_records_kept"] += n
        if magic == 0 and e.magic != 0:
            loss["timestamps_dropped"] += sum(1 for r in e.records if r.timestamp != NO_TIMESTAMP)
    return loss


def data_records(entries: list[Entry]) -> list[Rec]:
    """Every record of the non-control entries."""
    return [r for e in entries if not e.is_control for r in e.records]


def all_records(entries: list[Entry]) -> list[Rec]:
    return [r for e in entries for r in e.records]


def tuples(records, *, ts: bool = True, ts_type: bool = True, headers: bool = True) -> list[tuple]:
    """Records as comparable tuples (fields left out when asked)."""
    return [
        (r.offset, r.key, r.value)
        + ((r.timestamp,) if ts else ())
        + ((r.timestamp_type,) if ts_type else ())
        + ((tuple(r.headers),) if headers else ())
        for r in records
    ]
