"""Expected ``.index``/``.timeindex`` entries derived without kafkatool, for the fixture segments
and the real broker files (issue 9: the fixture indexes are written by kafkatool's own builder,
so "reindex reproduces the fixtures" alone checks nothing).

Three independent sources:

1. **Hand-computed entries** (literals below) for the small uncompressed fixture segments, from
   the spec's recovery rule (§8.3, §12.2): for each valid batch at position p, first update
   (maxTimestampSoFar, offset of the first batch holding it) from the header's maxTimestamp;
   then, if ``p - lastIndexedPosition > index.interval.bytes``, append the offset entry
   ``(batch lastOffset, p)`` and the time entry ``(maxTimestampSoFar, its offset)`` (the latter
   only when its timestamp is greater than the last one's); at the end append the final time
   entry the same way. The batch layouts are written next to each literal.
2. **A reference implementation in this module** of that rule and of the §3 walk, reading the
   header fields with ``struct`` at the §4.1/§5.1 offsets and checking CRCs with ``zlib`` and
   the ``crc32c`` package: kafkatool's walker, builder and CRC code are not used. It is checked
   against the literals, then used for every fixture segment (compressed ones too, whose bytes
   depend on the codec library versions) at several intervals.
3. **Real broker-written indexes** (../shared/fixtures-real; the tests skip cleanly without it).
   A broker indexes on the *append* path (§8.3 "Live append"), not by recovery: the counter
   counts whole appended chunks and restarts at 0 when the broker restarts, and each clean
   shutdown appends the final time entry (close). The module's live-append model, with one
   batch per append (true for these single-batch produce and metadata appends) and the
   restarts read from the producer snapshots a clean shutdown leaves at the then log end
   (§10, §12.4), reproduces every such broker file **entry for entry**. So the reference is
   validated against real brokers; and where no restart changed the spacing, kafkatool's
   rebuild must equal the broker's file byte for byte, elsewhere the entries before the first
   restart. (Multi-batch follower appends would pair the first batch's position with the last
   batch's offset, §17 E.42; none of these files has them.)
"""

from __future__ import annotations

import shutil
import struct
import zlib
from pathlib import Path
from typing import NamedTuple

import pytest
from crc32c import crc32c as independent_crc32c

import kafkatool.repair as repair_module
from conftest import FIXTURES, REAL
from kafkatool.repair import plan_reindex, walk_as_recovery
from kafkatool.segment import walk as walk_module
from kafkatool.segment.index import IndexBuilder

T = 1_700_000_000_000
INT32_MAX = 2**31 - 1


# --------------------------------------------------------------------------- the reference (spec §3, §4.1, §5.1, §8.3, §12.2)


class SpecBatch(NamedTuple):
    position: int
    size: int  # including the 12-byte log overhead
    base_offset: int  # v0/v1: the entry's offset (a wrapper's is its last inner offset)
    last_offset: int
    max_timestamp: int


def spec_walk(data: bytes, base: int) -> list[SpecBatch]:
    """The batches recovery accepts (§12.2 step 2), in order: the §3 walk, stopped at the first
    entry failing ensureValid (CRC-32C over [21, end) for magic >= 2, CRC-32 over [16, end) for
    v0/v1; a v2 entry shorter than its 61-byte header) or ensureOffsetInRange."""
    out = []
    pos, end = 0, len(data)
    while pos < end - 17:  # a tail of <= 17 bytes is never parsed
        offset, size = struct.unpack_from(">qi", data, pos)
        if size < 14 or pos > end - 12 - size:  # error, or partial/absurd: the walk ends
            break
        total = 12 + size
        entry = data[pos : pos + total]
        magic = struct.unpack_from(">b", entry, 16)[0]
        if magic >= 2:
            if total < 61:
                break
            (stored,) = struct.unpack_from(">I", entry, 17)
            if independent_crc32c(entry[21:]) != stored:
                break
            (last_offset_delta,) = struct.unpack_from(">i", entry, 23)  # §4.1 @23
            (max_ts,) = struct.unpack_from(">q", entry, 35)  # §4.1 @35
            last = offset + last_offset_delta
        elif magic >= 0:
            (stored,) = struct.unpack_from(">I", entry, 12)
            if zlib.crc32(entry[16:]) != stored:
                break
            last = offset
            max_ts = struct.unpack_from(">q", entry, 18)[0] if magic == 1 else -1  # §5.1: v1 timestamp @18
        else:
            break
        if not 0 <= last - base <= INT32_MAX:
            break
        out.append(SpecBatch(pos, total, offset, last, max_ts))
        pos += total
    return out


Entries = tuple[list[tuple[int, int]], list[tuple[int, int]]]
"""(offset index as (absolute offset, position), time index as (timestamp, absolute offset))."""


class _TimeIndex:
    def __init__(self) -> None:
        self.entries: list[tuple[int, int]] = []

    def maybe_append(self, ts: int, offset: int) -> None:
        # TimeIndex.maybeAppend: only a timestamp greater than the last entry's (-1 when empty)
        if ts > (self.entries[-1][0] if self.entries else -1):
            self.entries.append((ts, offset))


def spec_recovery_indexes(batches: list[SpecBatch], interval: int) -> Entries:
    """LogSegment.recover's rebuild (§8.3 "Recovery rebuild", §12.2)."""
    offsets: list[tuple[int, int]] = []
    times = _TimeIndex()
    last_indexed, max_ts, at = 0, -1, None
    for b in batches:
        if b.max_timestamp > max_ts:
            max_ts, at = b.max_timestamp, b.last_offset
        if b.position - last_indexed > interval:
            offsets.append((b.last_offset, b.position))
            times.maybe_append(max_ts, at)
            last_indexed = b.position
    times.maybe_append(max_ts, at)
    return offsets, times.entries


def spec_live_indexes(batches: list[SpecBatch], interval: int, restarts: tuple[int, ...]) -> Entries:
    """LogSegment.append on the broker (§8.3 "Live append"), one batch per append, with a clean
    shutdown (close: the final time entry) and restart (a new segment object: the byte counter
    back at 0; maxTimestampSoFar reloaded, i.e. unchanged) before each batch whose base offset
    is in ``restarts``."""
    offsets: list[tuple[int, int]] = []
    times = _TimeIndex()
    since, max_ts, at = 0, -1, None
    for b in batches:
        if b.base_offset in restarts:
            times.maybe_append(max_ts, at)
            since = 0
        if b.max_timestamp > max_ts:
            max_ts, at = b.max_timestamp, b.last_offset
        if since > interval:
            offsets.append((b.last_offset, b.position))
            times.maybe_append(max_ts, at)
            since = 0
        since += b.size
    times.maybe_append(max_ts, at)
    return offsets, times.entries


def read_entries(log: Path, base: int) -> Entries:
    """A segment's .index/.timeindex as written on disk, decoded with struct (§8.1)."""
    oi = log.with_suffix(".index").read_bytes()
    ti = log.with_suffix(".timeindex").read_bytes()
    return ([(base + rel, pos) for rel, pos in struct.iter_unpack(">ii", oi[: len(oi) // 8 * 8])],
            [(ts, base + rel) for ts, rel in struct.iter_unpack(">qi", ti[: len(ti) // 12 * 12])])


def encode(entries: Entries, base: int) -> tuple[bytes, bytes]:
    offsets, times = entries
    return (b"".join(struct.pack(">ii", o - base, p) for o, p in offsets),
            b"".join(struct.pack(">qi", ts, o - base) for ts, o in times))


def decode(index: bytes, timeindex: bytes, base: int) -> Entries:
    return ([(base + rel, pos) for rel, pos in struct.iter_unpack(">ii", index)],
            [(ts, base + rel) for ts, rel in struct.iter_unpack(">qi", timeindex)])


@pytest.fixture(params=["compiled", "python"])
def impl(request, monkeypatch):
    """kafkatool's recovery walk with the compiled indexing loop, then without any compiled code."""
    if request.param == "python":
        monkeypatch.setattr(repair_module, "_index_v2", None)
        monkeypatch.setattr(walk_module, "_fast_walk", None)
    elif repair_module._index_v2 is None:
        pytest.skip("the compiled extension is not built")
    return request.param


def kafkatool_rebuild(log: Path, base: int, interval: int) -> Entries:
    builder = IndexBuilder(base, index_interval_bytes=interval)
    walk_as_recovery(str(log), builder)
    return decode(*builder.finish(), base)


# --------------------------------------------------------------------------- 1. hand-computed entries


HAND: dict[tuple[str, int], Entries] = {
    # §16.3 verbatim: batches at 0 (86 bytes, offsets 0-1, max T+5), 86 (70, offset 2, T+10),
    # 156 (78, offset 3, T+20). Interval 128: 86 > 128 no; 156 > 128 yes: (3, 156), (T+20, 3);
    # the final entry (T+20, 3) is not appended again.
    ("golden-0", 128): ([(3, 156)], [(T + 20, 3)]),
    # interval 4096: no offset entry; the time index holds only the final entry
    ("golden-0", 4096): ([], [(T + 20, 3)]),
    # 4 batches of 10 records: at 0 (930 bytes, offsets 0-9, max T+91), 930 (956, -19, T+193),
    # 1886 (993, -29, T+291), 2879 (975, -39, T+393). Interval 1024: 930 no; 1886 > 1024:
    # (29, 1886), (T+291, 29); 2879 - 1886 = 993 no; final (T+393, 39).
    ("v2-none-0", 1024): ([(29, 1886)], [(T + 291, 29), (T + 393, 39)]),
    # Base 100, interval 256, batches (position, size, last offset, max ts):
    #   (0, 317, 102, T+1022) (317, 234, 104, T+1041) (551, 78, 105, T+2000: COMMIT)
    #   (629, 534, 112, T+1122) (1163, 78, 113, T+3000: ABORT) (1241, 540, 118, T+5000: LogAppendTime)
    #   (1781, 61, 121, -1: count 0) (1842, 678, 131, T+1311) (2520, 681, 141, T+1411) (3201, 676, 151, T+1511)
    # 317 > 256: (104, 317) (T+1041, 104); 551-317 = 234 no; 629-317 = 312: (112, 629) with
    # the max so far T+2000 at 105; 1163-629 = 534: (113, 1163) (T+3000, 113); 1241-1163 = 78 no;
    # 1781-1163 = 618: (121, 1781) (T+5000, 118); 1842-1781 = 61 no; 2520: (141, 2520) and
    # 3201: (151, 3201), their time entries (T+5000) not greater, so not appended; nor the final.
    ("txn-0", 256): (
        [(104, 317), (112, 629), (113, 1163), (121, 1781), (141, 2520), (151, 3201)],
        [(T + 1041, 104), (T + 2000, 105), (T + 3000, 113), (T + 5000, 118)],
    ),
    # 40 single v1 messages, offset o at CreateTime T+10*o+o%4; the ones indexed (position,
    # size, offset): (1045, 93, 10) after 0-9 fill 1045 bytes > 1024; then 2092-1045 = 1047 at
    # offset 19 (2041-1045 = 996 at 18 was not enough); 3122-2092 = 1030 at 28; 4205-3122 = 1083
    # at 38. Each time entry is that message's timestamp (they only rise); final (T+393, 39).
    ("v1-none-0", 1024): (
        [(10, 1045), (19, 2092), (28, 3122), (38, 4205)],
        [(T + 102, 10), (T + 193, 19), (T + 280, 28), (T + 382, 38), (T + 393, 39)],
    ),
    # 40 single v0 messages (no timestamps: no time entry at all, §17 E.44): (1050, offset 11),
    # (2187, 22), (3244, 32), each the first position more than 1024 bytes past the previous.
    ("v0-none-0", 1024): ([(11, 1050), (22, 2187), (32, 3244)], []),
}

#: the interval each fixture partition's committed indexes were written with (fixtures/README.md)
FIXTURE_INTERVAL = {"golden-0": 128, "txn-0": 256}
FIXTURE_SEGMENTS = sorted(FIXTURES.glob("*/*.log"))


def base_of(log: Path) -> int:
    return int(log.name.split(".")[0])


@pytest.mark.parametrize("name, interval", sorted(HAND))
def test_reference_reproduces_the_hand_computed_entries(name: str, interval: int) -> None:
    (log,) = (FIXTURES / name).glob("*.log")
    assert spec_recovery_indexes(spec_walk(log.read_bytes(), base_of(log)), interval) == HAND[name, interval]


@pytest.mark.parametrize("log", FIXTURE_SEGMENTS, ids=lambda p: p.parent.name)
def test_committed_fixture_indexes_are_the_independent_ones(log: Path) -> None:
    """make_fixtures.py wrote them with kafkatool's builder: they must be what the spec says."""
    base, interval = base_of(log), FIXTURE_INTERVAL.get(log.parent.name, 1024)
    want = HAND.get((log.parent.name, interval))
    reference = spec_recovery_indexes(spec_walk(log.read_bytes(), base), interval)
    if want is not None:
        assert reference == want
    assert read_entries(log, base) == reference


@pytest.mark.parametrize("interval", [0, 100, 128, 256, 1024, 4096])
@pytest.mark.parametrize("log", FIXTURE_SEGMENTS, ids=lambda p: p.parent.name)
def test_kafkatool_rebuild_of_fixtures_matches_the_reference(log: Path, interval: int, impl: str) -> None:
    base = base_of(log)
    want = spec_recovery_indexes(spec_walk(log.read_bytes(), base), interval)
    assert kafkatool_rebuild(log, base, interval) == want


@pytest.mark.parametrize("shift", [-1, 0, 1])
@pytest.mark.parametrize("log", FIXTURE_SEGMENTS, ids=lambda p: p.parent.name)
def test_kafkatool_rebuild_at_an_exact_interval_boundary(log: Path, shift: int, impl: str) -> None:
    """Interval = the distance from the first batch to the second (±1): at the second batch
    ``p - lastIndexedPosition`` equals the interval exactly, where ``>`` and ``>=`` differ."""
    base = base_of(log)
    batches = spec_walk(log.read_bytes(), base)
    if len(batches) < 2:
        pytest.skip("one batch: no second position")
    interval = batches[1].position + shift
    want = spec_recovery_indexes(batches, interval)
    assert (want[0][:1] == [(batches[1].last_offset, batches[1].position)]) == (shift < 0)
    assert kafkatool_rebuild(log, base, interval) == want


@pytest.mark.parametrize("log", FIXTURE_SEGMENTS, ids=lambda p: p.parent.name)
def test_reindex_plan_creates_the_independent_files(tmp_path: Path, log: Path, impl: str) -> None:
    """plan_reindex for a copy of the partition whose .index/.timeindex were deleted."""
    part = tmp_path / log.parent.name
    shutil.copytree(log.parent, part)
    copy = part / log.name
    copy.with_suffix(".index").unlink()
    copy.with_suffix(".timeindex").unlink()
    interval = FIXTURE_INTERVAL.get(log.parent.name, 1024)
    plan = plan_reindex(str(copy), interval)
    got = {c.kind: c.data for c in plan.changes}
    want = encode(spec_recovery_indexes(spec_walk(log.read_bytes(), base_of(log)), interval), base_of(log))
    assert (got["index"], got["timeindex"]) == want


# --------------------------------------------------------------------------- 3. real broker files


#: Partition dirs with broker-written indexes, and the restarts (clean shutdowns) before them:
#: the producer snapshots other than the one at the log end (a clean shutdown writes one at the
#: log end; the broker keeps those of the last two, §12.4, so older restarts may be gone).
#: Left out: kafka3/__consumer_offsets-14 and -36, whose 9-entry time indexes record 8 restarts
#: of which only the snapshots of the last two remain.
REAL_INDEXED: dict[str, tuple[int, ...]] = {
    "William0423__kafka/kafka-logs/__consumer_offsets-28": (142, 1693, 1715),
    "William0423__kafka/kafka-logs/debug_topic-0": (30,),
    "greenlemonT__kafka-temp/data/kafka/__cluster_metadata-0": (2816,),
    "greenlemonT__kafka-temp/data/kafka/__consumer_offsets-14": (5,),
    "greenlemonT__kafka-temp/data/kafka/__consumer_offsets-36": (),
    "greenlemonT__kafka-temp/data/kafka3/__cluster_metadata-0": (21482,),
    "greenlemonT__kafka-temp/data/kafka3/__consumer_offsets-26": (5,),
    "greenlemonT__kafka-temp/data/kafka3/payment-create-request-0": (),
    "kaspersorensen__kafka-record-updater/src/test/resources/example-log-dir-hello/hello-0": (),
}

#: Which broker files are exactly what recovery would build (no restart moved an entry), so
#: kafkatool's rebuild must reproduce them byte for byte. For the others the rebuild is compared
#: with the broker's entries before the first restart.
REAL_IDENTICAL = {
    "William0423__kafka/kafka-logs/__consumer_offsets-28": (),
    "William0423__kafka/kafka-logs/debug_topic-0": (".index",),
    "greenlemonT__kafka-temp/data/kafka/__cluster_metadata-0": (),
    "greenlemonT__kafka-temp/data/kafka/__consumer_offsets-14": (".index",),
    "greenlemonT__kafka-temp/data/kafka/__consumer_offsets-36": (".index", ".timeindex"),
    "greenlemonT__kafka-temp/data/kafka3/__cluster_metadata-0": (".index",),
    "greenlemonT__kafka-temp/data/kafka3/__consumer_offsets-26": (".index",),
    "greenlemonT__kafka-temp/data/kafka3/payment-create-request-0": (".index", ".timeindex"),
    "kaspersorensen__kafka-record-updater/src/test/resources/example-log-dir-hello/hello-0": (".index", ".timeindex"),
}

#: Every real segment (broker-indexed or not), for the rebuild-vs-reference comparison.
REAL_SEGMENTS = [
    *(f"{d}/00000000000000000000.log" for d in REAL_INDEXED),
    "greenlemonT__kafka-temp/data/kafka3/__consumer_offsets-14/00000000000000000000.log",
    "greenlemonT__kafka-temp/data/kafka3/__consumer_offsets-36/00000000000000000000.log",
    "xpxwo100__bullShit/tmp/kafka-logs/TEST-TOPIC-0/00000000000000000000.log",
    "xpxwo100__bullShit/tmp/kafka-logs/__consumer_offsets-40/00000000000000000000.log",
    "xpxwo100__bullShit/tmp/kafka-logs/foo-0/00000000000000000000.log",
    "asayers__kafkalite/tests/test-data/fs-data/hamlet-gzip-0/00000000000000000000.log",
    "asayers__kafkalite/tests/test-data/fs-data/numbers-0/00000000000000000000.log",
    # every CRC bad: recovery accepts no batch, both indexes are empty
    "kaspersorensen__kafka-record-updater/src/test/resources/example-log-health-check.log",
]


def real_path(rel: str) -> Path:
    path = REAL / rel
    if not path.exists():
        pytest.skip(f"real fixture {rel} is not available (../shared/fixtures-real)")
    return path


_walks: dict[str, list[SpecBatch]] = {}


def real_batches(rel: str) -> list[SpecBatch]:
    if rel not in _walks:
        _walks[rel] = spec_walk(real_path(rel).read_bytes(), 0)
    return _walks[rel]


@pytest.mark.parametrize("rel", sorted(REAL_INDEXED))
def test_live_append_model_reproduces_the_broker_files(rel: str) -> None:
    """The reference's live-append model, fed the restarts, gives the broker's files exactly."""
    log = real_path(rel) / "00000000000000000000.log"
    batches = real_batches(f"{rel}/00000000000000000000.log")
    assert spec_live_indexes(batches, 4096, REAL_INDEXED[rel]) == read_entries(log, 0)
    # without restarts, one batch per append, the live path is the recovery rebuild (§8.3: both
    # index when the bytes since the last entry exceed the interval; the counter is p - last)
    assert spec_live_indexes(batches, 4096, ()) == spec_recovery_indexes(batches, 4096)


@pytest.mark.parametrize("rel", REAL_SEGMENTS, ids=lambda r: r.split("/")[-2])
def test_kafkatool_rebuild_of_real_segments_matches_the_reference(rel: str, impl: str) -> None:
    log = real_path(rel)
    assert kafkatool_rebuild(log, 0, 4096) == spec_recovery_indexes(real_batches(rel), 4096)


@pytest.mark.parametrize("rel", sorted(REAL_INDEXED))
def test_kafkatool_rebuild_equals_the_broker_files(rel: str, impl: str) -> None:
    """Byte for byte where no restart moved an entry; otherwise entry for entry before the first
    restart (offset entries at positions before the restarted batch; time entries written with
    them, i.e. all but the rebuild's final one, with offsets before the restart)."""
    log = real_path(rel) / "00000000000000000000.log"
    builder = IndexBuilder(0, index_interval_bytes=4096)
    walk_as_recovery(str(log), builder)
    index, timeindex = builder.finish()
    for suffix, data in ((".index", index), (".timeindex", timeindex)):
        if suffix in REAL_IDENTICAL[rel]:
            assert data == log.with_suffix(suffix).read_bytes(), suffix
    restarts = REAL_INDEXED[rel]
    if not restarts:
        assert set(REAL_IDENTICAL[rel]) == {".index", ".timeindex"}
        return
    first = min(restarts)
    restart_at = next(b.position for b in real_batches(f"{rel}/00000000000000000000.log") if b.base_offset == first)
    offsets, times = decode(index, timeindex, 0)
    broker_offsets, broker_times = read_entries(log, 0)
    before = [e for e in offsets if e[1] < restart_at]
    assert broker_offsets[: len(before)] == before
    timed = [e for e in times[:-1] if e[1] < first]
    assert broker_times[: len(timed)] == timed
    assert len(before) == len([e for e in broker_offsets if e[1] < restart_at])
