"""The sample log directory ``fixtures/logdir``, cross-checked against two independent readers.

Where the fixtures come from: ``fixtures/make_fixtures.py`` writes them with kafkatool's own
encoders (see ``fixtures/README.md``). Because kafkatool wrote them, agreeing with kafkatool's
reader proves little; so every ``.log`` and ``.checkpoint`` is also decoded by kafka-python
(``kafka.record``) and aiokafka (``aiokafka.record``: its compiled C extension *and* its
pure-Python twin), and all must agree batch by batch and record by record. The write direction
is checked too: kafkatool's encoders feed the libraries' readers, and the libraries' builders
feed kafkatool's reader. Finally the files on disk must be what the script produces now, the
golden partition must be the spec's bytes (§16.1-16.3, §16.5), and ``kafkatool dump`` must
print one ``| offset:`` line per record.

Library differences, each asserted where it shows (never skipped):

1. Magic 0 + lz4 (KIP-57, spec §7.4): magic-0 writers checksum ``magic||FLG||BD`` instead of
   ``FLG||BD`` in the LZ4 frame header. kafka-python repairs the byte only through the optional
   ``xxhash`` package (``lz4_decode_old_kafka``/``lz4_encode_old_kafka``) and raises
   ``RuntimeError("pip install xxhash ...")`` without it; this module then stands in for
   ``xxhash`` with kafkatool's XXH32 (the lz4 C library re-verifies the repaired checksum, so a
   wrong XXH32 would still fail). aiokafka refuses both directions with
   ``UnsupportedCodecError("LZ4 is not supported for broker version 0.8/0.9")``: its shallow batch
   fields are still compared, and its records are compared by feeding it the wrapper's inner
   message set (plain v0 messages) once kafka-python has decompressed it.
2. Legacy (v0/v1) entries have no producer fields, flags, leader epoch or record count.
   kafkatool reports Kafka's constants (-1, false, ``count`` None); kafka-python's
   ``LegacyRecordBatch`` has no such attributes; aiokafka has ``is_transactional`` and
   ``is_control_batch`` (false) and ``producer_id`` = None (asserted).
3. aiokafka's compiled ``LegacyRecordBatch`` exposes only ``next_offset`` (wrapper offset + 1),
   ``validate_crc()`` and the constant fields of 2.: magic, codec, timestamp type and stored CRC
   are read from aiokafka's pure-Python ``_LegacyRecordBatchPy`` (private ``_magic``,
   ``_compression_type``, ``_timestamp_type``, ``_crc``), the implementation the extension ports.
4. aiokafka's v2 batch has no ``records_count`` and no partition leader epoch accessor;
   kafka-python's has both (``records_count``, ``leader_epoch``).
5. Magic 0 has no timestamps: the libraries say ``None`` for the record timestamp and timestamp
   type where kafkatool (like Kafka) says -1 (``NO_TIMESTAMP``/``NoTimestampType``).
6. Header keys: the libraries decode them to ``str`` (UTF-8), kafkatool keeps ``bytes``.
7. A v2 record has no CRC of its own: kafka-python's ``DefaultRecord.validate_crc()`` always
   returns True, aiokafka has no record-level check; kafkatool says None. Legacy messages do
   have one: kafka-python checks it (``LegacyRecord.validate_crc``), aiokafka only exposes the
   stored value (``checksum``).
8. In a v2 control batch kafka-python returns ``ControlRecord`` objects that parse the key
   (version, type); the raw key and value are still exposed and compared.
9. The libraries' v2 builders fall back to an uncompressed batch when compression does not
   shrink the records; their legacy builders write wrapper offset 0 and wrapper timestamp 0
   (the broker assigns them). kafkatool reads a v1 wrapper offset of 0 as "inner offsets are
   absolute", which is what both libraries do too.
10. A count-0 v2 batch whose payload is an empty *snappy* stream (the bare xerial header): both
    libraries decompress it before looking at the count and fail; Kafka and kafkatool read no
    records. Kafka never writes one (count-0 batches are uncompressed), so the random record
    sets keep count 0 to uncompressed batches and ``test_zero_record_batches`` pins the rest.
11. aiokafka's compiled ``LegacyRecord`` reports timestamp ``None`` and timestamp type ``None``
    for a v1 message whose timestamp is -1 (``NO_TIMESTAMP``), as for magic 0; its pure-Python
    twin and kafka-python say -1 and CreateTime, as Kafka (``CreateTime: -1``) and kafkatool do.
12. aiokafka's compiled v2 builder takes a first timestamp of -1 for "no record yet": the next
    record's timestamp becomes the batch's base timestamp and the first record reads back with
    it (pure-Python twin and kafka-python keep -1). Builders are fed timestamps >= 0, as
    producers stamp them, and ``test_aiokafka_builder_first_timestamp`` pins the quirk.
"""

from __future__ import annotations

import contextlib
import importlib.util
import random
import re
import shutil
import struct
from pathlib import Path
from unittest import mock

import pytest
import snappy
from click.testing import CliRunner
from cramjam import DecompressionError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kafka.codec
from aiokafka.errors import UnsupportedCodecError
from aiokafka.record import memory_records as aio_memory_records
from aiokafka.record.default_records import DefaultRecordBatch as AioDefaultRecordBatch
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioDefaultBuilder
from aiokafka.record.default_records import _DefaultRecordBatchBuilderPy, _DefaultRecordBatchPy
from aiokafka.record.legacy_records import LegacyRecordBatch as AioLegacyRecordBatch
from aiokafka.record.legacy_records import LegacyRecordBatchBuilder as AioLegacyBuilder
from aiokafka.record.legacy_records import _LegacyRecordBatchPy
from aiokafka.record.memory_records import MemoryRecords as AioMemoryRecords
from aiokafka.record.memory_records import _MemoryRecordsPy as AioMemoryRecordsPy
from kafka.record import MemoryRecords as KpMemoryRecords
from kafka.record.default_records import ControlRecord as KpControlRecord
from kafka.record.memory_records import MemoryRecordsBuilder as KpMemoryRecordsBuilder

from kafkatool.cli.main import cli
from kafkatool.record.batch import Batch, Record
from kafkatool.record.compression import Codec, xxh32
from kafkatool.record.legacy import encode_legacy
from kafkatool.record.records import decode_batch_records
from kafkatool.record.v2 import RecordSpec, encode_batch
from kafkatool.segment.walk import SegmentWalker, WalkStop

T0 = 1700000000000  # make_fixtures.T0, spec §16
REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures" / "logdir"
MAKE_FIXTURES = REPO / "fixtures" / "make_fixtures.py"

#: Every file of batches in the sample log directory (segments and KRaft snapshots).
RECORD_FILES = sorted(
    str(p.relative_to(FIXTURES))
    for p in FIXTURES.rglob("*")
    if p.suffix in (".log", ".checkpoint") and p.is_file()
)
#: index.interval.bytes make_fixtures.py uses per partition (its INDEX_INTERVAL elsewhere).
INDEX_INTERVALS = {"golden-0": 128, "txn-0": 256}

#: Codecs legal with each magic (spec §7.1): zstd needs v2.
CODECS_BY_MAGIC = {0: (0, 1, 2, 3), 1: (0, 1, 2, 3), 2: (0, 1, 2, 3, 4)}
MAGIC_CODECS = [(m, c) for m, cs in CODECS_BY_MAGIC.items() for c in cs]
CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}

#: The batch and record fields compared. A library's normaliser returns the subset it can
#: express; the rest must be exactly the documented gap below (difference 2-4 and 7 of the
#: module docstring), so a library release that adds a field makes this module say so.
BATCH_FIELDS = frozenset({
    "offset", "last_offset", "magic", "codec", "timestamp_type", "crc", "crc_valid", "producer_id",
    "producer_epoch", "base_sequence", "is_transactional", "is_control", "base_timestamp",
    "max_timestamp", "count", "partition_leader_epoch",
})
RECORD_FIELDS = frozenset({"offset", "timestamp", "timestamp_type", "key", "value", "headers", "crc", "crc_valid"})
# legacy entries have none of these (difference 2), nor a timestamp range of their own
_LEGACY_ONLY_CONSTANTS = {
    "producer_id", "producer_epoch", "base_sequence", "partition_leader_epoch", "count",
    "base_timestamp", "max_timestamp",
}
BATCH_GAPS = {
    ("kafka-python", "v2"): set(),
    ("kafka-python", "legacy"): _LEGACY_ONLY_CONSTANTS | {"is_transactional", "is_control", "crc"},
    ("aiokafka", "v2"): {"count", "partition_leader_epoch"},
    ("aiokafka", "legacy"): _LEGACY_ONLY_CONSTANTS | {"magic", "codec", "timestamp_type", "crc"},
    ("aiokafka-py", "v2"): {"count", "partition_leader_epoch"},
    ("aiokafka-py", "legacy"): _LEGACY_ONLY_CONSTANTS,
}
RECORD_GAPS = {
    ("kafka-python", "v2"): {"crc_valid"},
    ("kafka-python", "legacy"): set(),
    ("aiokafka", "v2"): {"crc_valid"},
    ("aiokafka", "legacy"): {"crc_valid"},
    ("aiokafka-py", "v2"): {"crc_valid"},
    ("aiokafka-py", "legacy"): {"crc_valid"},
}
LIBRARIES = ("kafka-python", "aiokafka", "aiokafka-py")


# --------------------------------------------------------------------------- decoders


def kt_decode(source) -> list[tuple[dict, list[dict]]]:
    """kafkatool's view: ``[(batch fields, [record fields, ...]), ...]`` of a file or buffer."""
    out = []
    with SegmentWalker(source) as walker:
        for batch, data in walker:
            records = decode_batch_records(batch, data)  # data is valid only until the next batch
            out.append((_kt_batch(batch), [_kt_record(r, batch) for r in records]))
        assert walker.stop is WalkStop.END, (walker.stop, walker.error)
        assert walker.trailing_bytes == 0
    return out


def _kt_batch(b: Batch) -> dict:
    return {
        "offset": b.offset, "last_offset": b.last_offset, "magic": b.magic, "codec": b.codec,
        "timestamp_type": b.timestamp_type, "crc": b.crc, "crc_valid": b.crc_valid,
        "producer_id": b.producer_id, "producer_epoch": b.producer_epoch, "base_sequence": b.base_sequence,
        "is_transactional": b.is_transactional, "is_control": b.is_control,
        "base_timestamp": b.base_timestamp, "max_timestamp": b.max_timestamp, "count": b.count,
        "partition_leader_epoch": b.partition_leader_epoch,
    }


def _kt_record(r: Record, b: Batch) -> dict:
    return {
        "offset": r.offset, "timestamp": r.timestamp, "timestamp_type": b.timestamp_type, "key": r.key,
        "value": r.value, "headers": tuple(r.headers), "crc": r.crc, "crc_valid": r.crc_valid,
    }


def _no_ts(value, magic: int) -> int:
    """Difference 5: the libraries' None for magic 0 is Kafka's -1."""
    if magic == 0:
        assert value is None
        return -1
    assert value is not None
    return value


def _lib_headers(headers) -> tuple:
    """Difference 6: str header keys back to bytes."""
    assert all(isinstance(k, str) for k, _v in headers)
    return tuple((k.encode("utf-8"), v) for k, v in headers)


def kp_decode(buf: bytes) -> list[tuple[dict, list[dict]]]:
    """kafka-python's view of ``buf`` (``kafka.record.MemoryRecords``)."""
    out = []
    records = KpMemoryRecords(bytes(buf))
    while (b := records.next_batch()) is not None:
        crc_valid = b.validate_crc()  # before iterating: a v2 batch asserts it is still compressed
        if b.magic >= 2:
            fields = {
                "offset": b.base_offset, "last_offset": b.last_offset, "magic": b.magic,
                "codec": b.compression_type, "timestamp_type": b.timestamp_type, "crc": b.crc,
                "crc_valid": crc_valid, "producer_id": b.producer_id, "producer_epoch": b.producer_epoch,
                "base_sequence": b.base_sequence, "is_transactional": b.is_transactional,
                "is_control": b.is_control_batch, "base_timestamp": b.first_timestamp,
                "max_timestamp": b.max_timestamp, "count": b.records_count,
                "partition_leader_epoch": b.leader_epoch,
            }
            recs = []
            for r in b:
                assert r.validate_crc() is True  # difference 7: always True for v2
                if b.is_control_batch:  # difference 8
                    assert isinstance(r, KpControlRecord)
                    assert (r.version, r.type) == struct.unpack(">hh", r.key)
                recs.append({
                    "offset": r.offset, "timestamp": r.timestamp, "timestamp_type": r.timestamp_type,
                    "key": r.key, "value": r.value, "headers": _lib_headers(r.headers), "crc": r.checksum,
                })
        else:
            for name in ("producer_id", "is_transactional", "is_control_batch", "leader_epoch"):
                assert not hasattr(b, name), name  # difference 2
            fields = {
                "offset": b.base_offset, "last_offset": b.base_offset, "magic": b.magic,
                "codec": b.compression_type, "timestamp_type": _no_ts(b.timestamp_type, b.magic),
                "crc_valid": crc_valid,
            }
            recs = [
                {
                    "offset": r.offset, "timestamp": _no_ts(r.timestamp, b.magic),
                    "timestamp_type": _no_ts(r.timestamp_type, b.magic), "key": r.key, "value": r.value,
                    "headers": _lib_headers(r.headers), "crc": r.checksum, "crc_valid": r.validate_crc(),
                }
                for r in b
            ]
        out.append((fields, recs))
    assert records.valid_bytes() == len(buf)
    return out


def aio_decode(buf: bytes, *, pure_python: bool = False) -> list[tuple[dict, list[dict] | Exception]]:
    """aiokafka's view of ``buf``: its compiled ``MemoryRecords``, or the pure-Python twin.

    A batch whose records aiokafka refuses (difference 1) gets the exception instead of records.
    """
    if pure_python:
        # aiokafka's NO_EXTENSIONS configuration: _MemoryRecordsPy builds its batches from the
        # module-level names, which are the compiled classes whenever the extension loaded.
        with mock.patch.multiple(aio_memory_records, DefaultRecordBatch=_DefaultRecordBatchPy,
                                 LegacyRecordBatch=_LegacyRecordBatchPy):
            return _aio_decode(AioMemoryRecordsPy(bytes(buf)), pure_python=True)
    return _aio_decode(AioMemoryRecords(bytes(buf)), pure_python=False)


def _aio_decode(records, *, pure_python: bool) -> list[tuple[dict, list[dict] | Exception]]:
    out = []
    while (b := records.next_batch()) is not None:
        crc_valid = b.validate_crc()
        if hasattr(b, "base_offset"):  # a v2 DefaultRecordBatch
            assert not hasattr(b, "records_count") and not hasattr(b, "leader_epoch")  # difference 4
            fields = {
                "offset": b.base_offset, "last_offset": b.base_offset + b.last_offset_delta, "magic": b.magic,
                "codec": b.compression_type, "timestamp_type": b.timestamp_type, "crc": b.crc,
                "crc_valid": crc_valid, "producer_id": b.producer_id, "producer_epoch": b.producer_epoch,
                "base_sequence": b.base_sequence, "is_transactional": b.is_transactional,
                "is_control": b.is_control_batch, "base_timestamp": b.first_timestamp,
                "max_timestamp": b.max_timestamp,
            }
            magic = b.magic
        else:
            assert b.producer_id is None  # difference 2
            fields = {
                "offset": b.next_offset - 1, "last_offset": b.next_offset - 1, "crc_valid": crc_valid,
                "is_transactional": b.is_transactional, "is_control": b.is_control_batch,
            }
            if pure_python:  # difference 3: private attributes of _LegacyRecordBatchPy
                magic = b._magic
                fields.update(magic=magic, codec=b._compression_type, crc=b._crc,
                              timestamp_type=_no_ts(b._timestamp_type, magic))
            else:
                for name in ("magic", "compression_type", "timestamp_type", "crc", "base_offset"):
                    assert not hasattr(b, name), name
                magic = None  # the compiled legacy batch does not say (difference 3)
        try:
            recs = []
            for r in b:
                rec = {
                    "offset": r.offset, "key": r.key, "value": r.value,
                    "headers": _lib_headers(r.headers), "crc": r.checksum,
                }
                if magic is None and r.timestamp is None:
                    # difference 11: magic 0, or a v1 timestamp of -1; the type is not expressed
                    assert r.timestamp_type is None
                    rec["timestamp"] = -1
                else:
                    rec["timestamp"] = _no_ts(r.timestamp, 1 if magic is None else magic)
                    rec["timestamp_type"] = _no_ts(r.timestamp_type, 1 if magic is None else magic)
                recs.append(rec)
        except UnsupportedCodecError as e:
            recs = e
        out.append((fields, recs))
    return out


def lib_decode(library: str, buf: bytes) -> list:
    if library == "kafka-python":
        return kp_decode(buf)
    return aio_decode(buf, pure_python=library == "aiokafka-py")


class _Xxh32:
    """Stands in for ``xxhash.xxh32`` (absent here), the one call kafka-python makes (difference 1)."""

    def __init__(self, data: bytes) -> None:
        self._h = xxh32(bytes(data))

    def digest(self) -> bytes:
        return self._h.to_bytes(4, "big")


@contextlib.contextmanager
def old_kafka_lz4():
    """Let kafka-python read and write magic-0 lz4 (difference 1) without the xxhash package."""
    if getattr(kafka.codec, "xxhash", None) is not None:
        yield
        return
    with pytest.raises(RuntimeError, match="xxhash"):
        kafka.codec.lz4_decode_old_kafka(b"\x04\x22\x4d\x18\x60\x40\x1a\x00\x00\x00\x00")
    with mock.patch.object(kafka.codec, "xxhash", mock.Mock(xxh32=_Xxh32)):
        yield


def _kind(batch_fields: dict) -> str:
    return "v2" if batch_fields["magic"] >= 2 else "legacy"


def assert_agree(kt: list, lib: list, library: str, where: str) -> None:
    """Every field ``library`` can express equals kafkatool's; the rest is the documented gap."""
    assert len(lib) == len(kt), f"{where}: {library} sees {len(lib)} batches, kafkatool {len(kt)}"
    for i, ((kb, krecs), (lb, lrecs)) in enumerate(zip(kt, lib)):
        at = f"{where} batch {i} ({library})"
        kind = _kind(kb)
        assert BATCH_FIELDS - set(lb) == BATCH_GAPS[library, kind], at
        assert {k: kb[k] for k in lb} == lb, at
        if isinstance(lrecs, Exception):  # difference 1, and nothing else may be refused
            assert library.startswith("aiokafka") and (kb["magic"], kb["codec"]) == (0, Codec.LZ4), at
            assert "LZ4 is not supported for broker version 0.8/0.9" in str(lrecs), at
            continue
        assert len(lrecs) == len(krecs), at
        for j, (kr, lr) in enumerate(zip(krecs, lrecs)):
            gap = RECORD_GAPS[library, kind]
            if (library, kind) == ("aiokafka", "legacy") and kr["timestamp"] == -1:
                gap = gap | {"timestamp_type"}  # difference 11
            assert RECORD_FIELDS - set(lr) == gap, f"{at} record {j}"
            assert {k: kr[k] for k in lr} == lr, f"{at} record {j}"


def assert_all_agree(buf: bytes, where: str) -> list:
    """kafkatool and all three library readers agree on ``buf``; returns kafkatool's view."""
    kt = kt_decode(buf)
    with old_kafka_lz4():
        for library in LIBRARIES:
            assert_agree(kt, lib_decode(library, buf), library, where)
        # difference 1: aiokafka reads the inner messages of a magic-0 lz4 wrapper once unwrapped
        for (kb, krecs), (batch, data) in zip(kt, _entries(buf)):
            if (kb["magic"], kb["codec"]) == (0, Codec.LZ4):
                inner = kafka.codec.lz4_decode_old_kafka(_legacy_value(data))
                kt_inner = kt_decode(inner)  # plain v0 messages, one entry each
                assert [r for _b, rs in kt_inner for r in rs] == krecs
                for library in ("aiokafka", "aiokafka-py"):
                    at = f"{where}: the unwrapped magic-0 lz4 wrapper at {batch.position}"
                    assert_agree(kt_inner, lib_decode(library, inner), library, at)
    return kt


def _entries(buf: bytes) -> list[tuple[Batch, bytes]]:
    with SegmentWalker(buf) as walker:
        return [(batch, bytes(data)) for batch, data in walker]


def _legacy_value(entry: bytes) -> bytes:
    """The value of a legacy message (a wrapper's compressed payload), §5.1."""
    pos = 12 + 4 + 2 + (8 if entry[16] == 1 else 0)
    (kl,) = struct.unpack_from(">i", entry, pos)
    pos += 4 + max(kl, 0)
    (vl,) = struct.unpack_from(">i", entry, pos)
    return entry[pos + 4 : pos + 4 + vl]


# --------------------------------------------------------------------------- the fixtures on disk


def test_fixture_inventory():
    """Every partition make_fixtures.py writes has a segment, and every combination is there."""
    assert len(RECORD_FILES) == 18
    for magic, codec in MAGIC_CODECS:
        assert f"v{magic}-{CODEC_NAMES[codec]}-0/00000000000000000000.log" in RECORD_FILES
    for name in ("golden-0/00000000000000000000.log", "txn-0/00000000000000000100.log",
                 "__cluster_metadata-0/00000000000000000000.log",
                 "__cluster_metadata-0/00000000000000000005-0000000001.checkpoint", "bootstrap.checkpoint"):
        assert name in RECORD_FILES


@pytest.mark.parametrize("name", RECORD_FILES)
def test_libraries_agree_on_fixture(name):
    buf = (FIXTURES / name).read_bytes()
    kt = assert_all_agree(buf, name)
    assert kt and all(b["crc_valid"] for b, _r in kt)
    assert all(r["crc_valid"] is not False for _b, rs in kt for r in rs)


def test_fixture_features_seen_by_libraries():
    """The special features the README promises, as kafka-python sees them."""
    with old_kafka_lz4():
        seen = {name: kp_decode((FIXTURES / name).read_bytes()) for name in RECORD_FILES}
    for magic, codec in MAGIC_CODECS:
        batches = seen[f"v{magic}-{CODEC_NAMES[codec]}-0/00000000000000000000.log"]
        assert {b["magic"] for b, _r in batches} == {magic}
        assert {b["codec"] for b, _r in batches} == {codec}
        assert [r["offset"] for _b, rs in batches for r in rs] == list(range(40))
        assert len(batches) == (40 if codec == 0 and magic < 2 else 4)
    txn = seen["txn-0/00000000000000000100.log"]
    assert [(b["offset"], b["last_offset"]) for b, _r in txn] == [
        (100, 102), (103, 104), (105, 105), (106, 112), (113, 113), (114, 118), (119, 121),
        (122, 131), (132, 141), (142, 151)]
    markers = [(b["producer_id"], rs[0]["key"]) for b, rs in txn if b["is_control"]]
    assert markers == [(5000, b"\x00\x00\x00\x01"), (6000, b"\x00\x00\x00\x00")]  # COMMIT, ABORT
    assert [b["codec"] for b, _r in txn] == [0, 3, 0, 4, 0, 2, 0, 1, 1, 1]
    assert txn[5][0]["timestamp_type"] == 1 and {r["timestamp"] for r in txn[5][1]} == {T0 + 5000}
    # emptied by compaction; the delete horizon is stored as the base timestamp (§4.1, bit 6)
    assert (txn[6][0]["count"], txn[6][1], txn[6][0]["base_timestamp"]) == (0, [], T0 + 86400000)
    idempotent = txn[3][0]
    assert (idempotent["producer_id"], idempotent["base_sequence"], idempotent["is_transactional"]) == (7000, 10, False)
    records = [r for _b, rs in txn for r in rs]
    assert any(r["key"] is None for r in records) and any(r["value"] is None for r in records)
    assert any((b"empty", None) in r["headers"] for r in records)


# --------------------------------------------------------------------------- regenerated == on disk


def _load_make_fixtures():
    spec = importlib.util.spec_from_file_location("make_fixtures", MAKE_FIXTURES)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory) -> tuple[object, Path]:
    make_fixtures = _load_make_fixtures()
    out = tmp_path_factory.mktemp("regenerated") / "logdir"
    make_fixtures.main(out)
    return make_fixtures, out


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def _content(decoded: list) -> list:
    """Decoded content without what depends on compressed bytes (sizes, CRC values)."""
    return [({k: v for k, v in b.items() if k != "crc"}, rs) for b, rs in decoded]


def _compressed(decoded: list) -> bool:
    return any(b["codec"] for b, _r in decoded)


def test_regenerated_file_set(regenerated):
    _mf, out = regenerated
    assert _files(out) == _files(FIXTURES)


@pytest.mark.parametrize("name", _files(FIXTURES))
def test_fixture_is_what_make_fixtures_writes(regenerated, name):
    """Uncompressed and side files byte for byte; compressed segments by decoded content."""
    make_fixtures, out = regenerated
    disk, fresh = (FIXTURES / name).read_bytes(), (out / name).read_bytes()
    path = Path(name)
    if path.suffix in (".log", ".checkpoint"):
        kt_disk, kt_fresh = kt_decode(disk), kt_decode(fresh)
        assert _content(kt_disk) == _content(kt_fresh)
        assert all(b["crc_valid"] for b, _r in kt_disk + kt_fresh)
        if not _compressed(kt_disk):
            assert disk == fresh
    elif path.suffix in (".index", ".timeindex"):
        # Positions and the interval test depend on compressed sizes: the on-disk indexes must be
        # what the script builds from the on-disk log, and byte-equal when the logs are.
        part = path.parent.name
        base = int(path.stem)
        interval = INDEX_INTERVALS.get(part, make_fixtures.INDEX_INTERVAL)
        log_name = path.with_suffix(".log")
        for root in (FIXTURES, out):
            scratch = out.parent / "reindex" / root.name / part
            shutil.rmtree(scratch, ignore_errors=True)
            scratch.mkdir(parents=True)
            shutil.copyfile(root / log_name, scratch / log_name.name)
            make_fixtures.write_indexes(scratch, base, interval)
            assert (scratch / path.name).read_bytes() == (root / name).read_bytes(), (root, interval)
        if (FIXTURES / log_name).read_bytes() == (out / log_name).read_bytes():
            assert disk == fresh
    else:  # .txnindex, .snapshot, checkpoints, partition.metadata, quorum-state, meta.properties ...
        assert disk == fresh


# --------------------------------------------------------------------------- spec golden vectors

_V2_HEADER = struct.Struct(">qiibIhiqqqhii")  # §4.1

#: §16.1, the hex as printed in the spec.
GOLDEN_B0 = bytes.fromhex(
    "0000000000000000" "0000004a" "00000000" "02" "5ee43a09" "0000" "00000001"
    "0000018bcfe56800" "0000018bcfe56805" "ffffffffffffffff" "ffff" "ffffffff" "00000002"
    "14000000046b3104763100"  # record 0
    "1a000a0201047632020468310278"  # record 1
)
#: §16.2 B1: the spec's field values; the record is null key, value "tx".
GOLDEN_B1 = _V2_HEADER.pack(2, 58, 0, 2, 2408550096, 0x0010, 0, T0 + 10, T0 + 10, 1000, 0, 0, 1) + bytes.fromhex(
    "100000000104747800"
)
#: §16.2 B2: the COMMIT marker, record bytes as printed.
GOLDEN_B2 = _V2_HEADER.pack(3, 66, 0, 2, 2627399116, 0x0030, 0, T0 + 20, T0 + 20, 1000, 0, -1, 1) + bytes.fromhex(
    "20 00000008 00000001 0c 000000000005 00".replace(" ", "")  # key COMMIT v0, value coordinatorEpoch 5
)
#: §16.3 with index.interval.bytes=128, and §16.5.
GOLDEN_INDEX = bytes.fromhex("00000003" "0000009c")
GOLDEN_TIMEINDEX = bytes.fromhex("0000018bcfe56814" "00000003")
GOLDEN_SNAPSHOT = bytes.fromhex(
    "0001 c5e8776b 00000001 00000000000003e8 0000 00000000 0000000000000002 00000000 "
    "0000018bcfe5680a 00000005 ffffffffffffffff".replace(" ", "")
)


def test_golden_partition_is_spec_bytes():
    part = FIXTURES / "golden-0"
    assert (len(GOLDEN_B0), len(GOLDEN_B1), len(GOLDEN_B2)) == (86, 70, 78)  # sizes and positions 86, 156
    assert (part / "00000000000000000000.log").read_bytes() == GOLDEN_B0 + GOLDEN_B1 + GOLDEN_B2
    assert (part / "00000000000000000000.index").read_bytes() == GOLDEN_INDEX
    assert (part / "00000000000000000000.timeindex").read_bytes() == GOLDEN_TIMEINDEX
    assert (part / "00000000000000000003.snapshot").read_bytes() == GOLDEN_SNAPSHOT
    assert len(GOLDEN_SNAPSHOT) == 56


def test_golden_partition_per_libraries():
    """The spec's CRCs are the ones both libraries compute, and the values are the spec's."""
    buf = GOLDEN_B0 + GOLDEN_B1 + GOLDEN_B2
    for library in LIBRARIES:
        batches = lib_decode(library, buf)
        assert [(b["offset"], b["crc"], b["crc_valid"]) for b, _r in batches] == [
            (0, 1592015369, True), (2, 2408550096, True), (3, 2627399116, True)]
        assert _records(batches) == [
            (0, T0, b"k1", b"v1", ()), (1, T0 + 5, None, b"v2", ((b"h1", b"x"),)), (2, T0 + 10, None, b"tx", ()),
            (3, T0 + 20, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x05", ())]


# --------------------------------------------------------------------------- kafkatool dump


_OFFSET_LINE = re.compile(r"^\| offset: (-?\d+) ")


@pytest.mark.parametrize("name", RECORD_FILES)
def test_dump_prints_every_record(name):
    with old_kafka_lz4():
        offsets = [r["offset"] for _b, rs in kp_decode((FIXTURES / name).read_bytes()) for r in rs]
    result = CliRunner().invoke(cli, ["dump", "--print-data-log", str(FIXTURES / name)])
    assert result.exit_code == 0, (result.output, result.exception)
    # split on "\n" only: KRaft payloads hold bytes (\x0c, \x1c ...) that str.splitlines breaks on
    lines = result.stdout.split("\n")
    assert [int(m.group(1)) for line in lines if (m := _OFFSET_LINE.match(line))] == offsets
    assert sum(line.startswith("| offset:") for line in lines) == len(offsets)


# --------------------------------------------------------------------------- write direction

_header_keys = st.text(st.characters(exclude_categories=("Cs",)), max_size=8)
_headers = st.lists(st.tuples(_header_keys, st.none() | st.binary(max_size=16)), max_size=3)
_blobs = st.one_of(
    st.none(),
    st.binary(max_size=200),
    # compressible, so the libraries' builders keep the codec (difference 9)
    st.builds(lambda unit, n: unit * n, st.binary(min_size=1, max_size=6), st.integers(1, 80)),
)


@st.composite
def record_specs(draw, magic: int, codec: int, *, no_timestamp: bool = True) -> list[RecordSpec]:
    """Offsets with compaction gaps, timestamps far apart (multi-byte varlong deltas).

    Zero records only in an uncompressed v2 batch, the one Kafka writes (difference 10).
    ``no_timestamp`` lets a timestamp be -1, Kafka's NO_TIMESTAMP (difference 11, 12).
    """
    n = draw(st.integers(0 if (magic, codec) == (2, 0) else 1, 12))
    offset = draw(st.integers(0, 2**40))
    out = []
    for i in range(n):
        if i:
            offset += 1 + draw(st.integers(0, 3))
        ts = draw((st.just(-1) if no_timestamp else st.nothing()) | st.integers(0, 2**43))
        headers = draw(_headers) if magic == 2 else []
        out.append(RecordSpec(offset, ts, draw(_blobs), draw(_blobs), headers))
    return out


def _expected(specs: list[RecordSpec], magic: int, log_append_time: int | None) -> list[tuple]:
    def ts(r: RecordSpec) -> int:
        if magic == 0:
            return -1
        return r.timestamp if log_append_time is None else log_append_time

    return [
        (r.offset, ts(r), r.key, r.value, tuple((k.encode(), v) for k, v in r.headers)) for r in specs
    ]


def _records(decoded: list) -> list[tuple]:
    return [(r["offset"], r["timestamp"], r["key"], r["value"], r["headers"]) for _b, rs in decoded for r in rs]


_BOUNDED = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize(("magic", "codec"), MAGIC_CODECS, ids=lambda v: str(v))
@_BOUNDED
@given(data=st.data())
def test_kafkatool_encoders_read_by_libraries(magic, codec, data):
    specs = data.draw(record_specs(magic, codec))
    lat = data.draw(st.none() | st.integers(0, 2**43)) if magic >= 1 else None
    if magic == 2:
        pid = data.draw(st.just(-1) | st.integers(0, 2**62))
        producer = {} if pid == -1 else {
            "producer_id": pid, "producer_epoch": data.draw(st.integers(0, 32767)),
            "base_sequence": data.draw(st.integers(0, 2**31 - 1)), "is_transactional": data.draw(st.booleans()),
        }
        ple = data.draw(st.integers(-1, 2**31 - 1))
        buf = encode_batch(specs, codec=codec, log_append_time=lat, partition_leader_epoch=ple, **producer)
    else:
        buf = encode_legacy(specs, magic=magic, codec=codec, log_append_time=lat)
    kt = assert_all_agree(buf, f"kafkatool encoder v{magic} {CODEC_NAMES[codec]}")
    assert _records(kt) == _expected(specs, magic, lat)
    assert all(b["crc_valid"] and b["codec"] == codec and b["magic"] == magic for b, _r in kt)
    assert len(kt) == (len(specs) if magic < 2 and codec == 0 else 1)
    if magic == 2:
        (b, _r), = kt
        assert b["partition_leader_epoch"] == ple
        assert (b["producer_id"], b["producer_epoch"], b["base_sequence"], b["is_transactional"]) == (
            producer.get("producer_id", -1), producer.get("producer_epoch", -1),
            producer.get("base_sequence", -1), producer.get("is_transactional", False))
        assert b["timestamp_type"] == (0 if lat is None else 1)


@pytest.mark.parametrize(("magic", "codec"), MAGIC_CODECS, ids=lambda v: str(v))
def test_large_records_read_by_libraries(magic, codec):
    """Payloads past one snappy chunk (32 KiB of input) and one lz4 block (64 KiB), §7.3-7.4."""
    rng = random.Random(magic * 10 + codec)
    specs = [
        RecordSpec(1000 + i, T0 + i, f"big-{i}".encode(),
                   rng.randbytes(20000) + b"kafka" * (10000 * (i + 1)))
        for i in range(3)
    ]
    if magic == 2:
        buf = encode_batch(specs, codec=codec)
    else:
        buf = encode_legacy(specs, magic=magic, codec=codec)
    kt = assert_all_agree(buf, f"large v{magic} {CODEC_NAMES[codec]}")
    assert _records(kt) == _expected(specs, magic, None)


@pytest.mark.parametrize(("magic", "codec"), MAGIC_CODECS, ids=lambda v: str(v))
@_BOUNDED
@given(data=st.data())
def test_library_builders_read_by_kafkatool(magic, codec, data):
    specs = [r._replace(offset=i) for i, r in enumerate(data.draw(record_specs(magic, codec, no_timestamp=False).filter(bool)))]
    producer = {}
    if magic == 2 and data.draw(st.booleans()):
        producer = {
            "producer_id": data.draw(st.integers(0, 2**62)), "producer_epoch": data.draw(st.integers(0, 32767)),
            "base_sequence": data.draw(st.integers(0, 2**31 - 1)), "transactional": data.draw(st.booleans()),
        }
    expected = _expected(specs, magic, None)

    # kafka-python: MemoryRecordsBuilder (magic-0 lz4 through difference 1's stand-in)
    with old_kafka_lz4():
        builder = KpMemoryRecordsBuilder(magic, codec, batch_size=1 << 22, offset=0, **producer)
        for r in specs:
            assert builder.append(r.timestamp, r.key, r.value, [(k, v) for k, v in r.headers]) is not None
        builder.close()
        kp_buf = bytes(builder.buffer())
    _check_built(kp_buf, "kafka-python", magic, codec, expected, producer)

    # aiokafka: the compiled builders (magic-0 lz4 refused, difference 1; timestamps >= 0, 12)
    if magic == 2:
        aio = AioDefaultBuilder(
            magic=2, compression_type=codec, is_transactional=producer.get("transactional", False),
            producer_id=producer.get("producer_id", -1), producer_epoch=producer.get("producer_epoch", -1),
            base_sequence=producer.get("base_sequence", -1), batch_size=1 << 22,
        )
    else:
        aio = AioLegacyBuilder(magic=magic, compression_type=codec, batch_size=1 << 22)
    for i, r in enumerate(specs):
        assert aio.append(i, r.timestamp, r.key, r.value, [(k, v) for k, v in r.headers]) is not None
    if (magic, codec) == (0, Codec.LZ4):
        with pytest.raises(UnsupportedCodecError, match="LZ4 is not supported for broker version 0.8/0.9"):
            aio.build()
        return
    _check_built(bytes(aio.build()), "aiokafka", magic, codec, expected, producer)


def _check_built(buf: bytes, library: str, magic: int, codec: int, expected: list, producer: dict) -> None:
    where = f"{library} builder v{magic} {CODEC_NAMES[codec]}"
    kt = kt_decode(buf)
    with old_kafka_lz4():
        for reader in LIBRARIES:
            assert_agree(kt, lib_decode(reader, buf), reader, where)
    assert _records(kt) == expected, where
    assert all(b["crc_valid"] and b["magic"] == magic for b, _r in kt), where
    assert all(r["crc_valid"] is not False for _b, rs in kt for r in rs), where
    if magic < 2:
        assert [b["codec"] for b, _r in kt] == ([codec] if codec else [0] * len(expected)), where
    else:
        (b, _r), = kt
        assert b["codec"] in (codec, 0), where  # difference 9: uncompressed when it does not shrink
        assert (b["producer_id"], b["producer_epoch"], b["base_sequence"], b["is_transactional"]) == (
            producer.get("producer_id", -1), producer.get("producer_epoch", -1),
            producer.get("base_sequence", -1), producer.get("transactional", False)), where


def test_builders_keep_codec_when_it_pays():
    """Difference 9 must not hide the codecs: compressible records keep them in both builders."""
    specs = [RecordSpec(i, T0 + i, b"key", b"abcdefgh" * 40) for i in range(10)]
    for codec in CODECS_BY_MAGIC[2]:
        kp = KpMemoryRecordsBuilder(2, codec, batch_size=1 << 22, offset=0)
        aio = AioDefaultBuilder(magic=2, compression_type=codec, is_transactional=False, producer_id=-1,
                                producer_epoch=-1, base_sequence=-1, batch_size=1 << 22)
        for r in specs:
            kp.append(r.timestamp, r.key, r.value, [])
            aio.append(r.offset, r.timestamp, r.key, r.value, [])
        kp.close()
        for buf in (bytes(kp.buffer()), bytes(aio.build())):
            ((b, recs),) = kt_decode(buf)
            assert b["codec"] == codec and b["crc_valid"]
            assert _records([(b, recs)]) == _expected(specs, 2, None)


@pytest.mark.parametrize("codec", CODECS_BY_MAGIC[2], ids=CODEC_NAMES.get)
def test_zero_record_batches(codec):
    """Difference 10: a count-0 batch (§17 B.11) with a codec, its payload an empty stream.

    Kafka writes count-0 batches uncompressed (the cleaner's ``writeEmptyHeader``) and never
    examines the bytes after such a header. kafkatool's encoder compresses the empty record set
    anyway; for snappy that is the bare 16-byte xerial header, which Kafka's reader takes as an
    empty stream but both libraries take for one raw block and fail on (kafka-python's
    ``_detect_xerial_stream`` wants more than 16 bytes), even though the header says count 0.
    """
    buf = encode_batch([], base_offset=7, codec=codec, partition_leader_epoch=0)
    ((b, recs),) = kt_decode(buf)
    assert (b["count"], b["offset"], b["codec"], b["crc_valid"], recs) == (0, 7, codec, True, [])
    if codec != Codec.SNAPPY:
        assert_all_agree(buf, f"count-0 {CODEC_NAMES[codec]}")
        return
    assert buf[61:] == bytes.fromhex("82534e41505059000000000100000001")  # §7.3 header, no chunk
    with pytest.raises(snappy.UncompressError):
        kp_decode(buf)
    for library in ("aiokafka", "aiokafka-py"):
        with pytest.raises(DecompressionError):
            lib_decode(library, buf)


def test_aiokafka_builder_first_timestamp():
    """Difference 12, pinned: what aiokafka's builders make of a first timestamp of -1."""
    for builder_cls, expected in ((AioDefaultBuilder, [(0, 0), (1, 0)]), (_DefaultRecordBatchBuilderPy, [(0, -1), (1, 0)])):
        builder = builder_cls(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                              producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
        builder.append(0, -1, None, b"a", [])
        builder.append(1, 0, None, b"b", [])
        ((b, recs),) = kt_decode(bytes(builder.build()))
        assert [(r["offset"], r["timestamp"]) for r in recs] == expected, builder_cls
        assert b["crc_valid"]


def test_aiokafka_reader_is_the_compiled_one():
    """The 'aiokafka' reader and builders above are the C extension ('aiokafka-py' is the twin)."""
    for cls in (AioMemoryRecords, AioDefaultRecordBatch, AioLegacyRecordBatch, AioDefaultBuilder, AioLegacyBuilder):
        assert cls.__module__.startswith("aiokafka.record._crecords"), cls
