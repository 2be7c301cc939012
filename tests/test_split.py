"""Segment.split for parallel readers: the exact cuts and the cheap ones (``exact=False``), and
verify ``--jobs``, which reads through the cheap ones.

Segments are built with kafka-python's own encoders (``DefaultRecordBatchBuilder``,
``LegacyRecordBatchBuilder``), batch positions come from kafka-python's reader (sizes summed),
the ``.index`` files are written by hand from those positions (spec §6: int32 relative offset,
int32 position); never from kafkatool's encoder. The expected cuts are derived from the
documented rule: a cheap cut is the first batch start at or after ``size * i // n`` and past the
previous cut.
"""

from __future__ import annotations

import os
import random
import struct
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from conftest import FIXTURES, real_fixture
from test_verify import spy_on_chunks  # where each chunked scan ended
from kafkatool.segment.logdir import Segment
from kafkatool.segment.resync import resync
from kafkatool.segment.walk import WalkStop
from kafkatool.verify import INFO_KINDS, SPLIT_MIN_BYTES, FileSummary, Finding, VerifyOptions, verify_paths

LOG = "00000000000000000000.log"
INDEX = "00000000000000000000.index"
TS = 1_700_000_000_000
PATTERN = bytes(range(256))  # record values: no run of these bytes frames a plausible header


# ----------------------------------------------------------------------------- building segments (kafka-python)


def kp_v2(base_offset: int, values: list[bytes], *, codec: int = 0) -> bytes:
    """One v2 batch of ``values`` (keys b"k"), built by kafka-python; the base offset patched in
    (bytes 0-7 are outside the CRC, §4.1)."""
    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=0, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    for i, v in enumerate(values):
        b.append(i, timestamp=TS + base_offset + i, key=b"k", value=v, headers=[])
    data = bytearray(b.build())
    struct.pack_into(">q", data, 0, base_offset)
    return bytes(data)


def kp_legacy(magic: int, offset: int, value: bytes) -> bytes:
    """One uncompressed v0/v1 message at ``offset``, built by kafka-python."""
    b = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 30)
    b.append(offset, timestamp=TS + offset if magic else None, key=b"k", value=value)
    return bytes(b.build())


def kp_positions(data: bytes) -> list[int]:
    """Where each batch (each legacy entry) starts, by kafka-python's reader."""
    out, pos, mr = [], 0, MemoryRecords(bytes(data))
    while (b := mr.next_batch()) is not None:
        out.append(pos)
        pos += b.size_in_bytes
    assert pos == len(data)
    return out


def hand_index(positions: list[int], every: int) -> bytes:
    """An ``.index`` (relative offset, position) for every ``every``-th batch but the first, for a
    segment whose batch number i holds offset i."""
    return b"".join(struct.pack(">ii", i, p) for i, p in enumerate(positions) if i and i % every == 0)


def value(rng: random.Random, lo: int, hi: int) -> bytes:
    n = rng.randrange(lo, hi)
    start = rng.randrange(256)
    return (PATTERN * (n // 256 + 2))[start : start + n]


def clean_segment(kind: str) -> bytes:
    """About 3 MiB of batches of random sizes, batch i holding offset i (a gzip batch: offsets i..)."""
    rng = random.Random(kind)
    out, total, i = [], 0, 0
    while total < 3 << 20:
        if kind == "v2":
            b = kp_v2(i, [value(rng, 10, 40_000)])
        elif kind == "v2-gzip":
            b = kp_v2(i, [value(rng, 10, 4_000) for _ in range(rng.randrange(1, 30))], codec=1)
        else:
            b = kp_legacy(int(kind[1]), i, value(rng, 10, 40_000))
        out.append(b)
        total += len(b)
        i += 1
    return b"".join(out)


def write_segment(d: Path, data: bytes, index: bytes | None = None) -> Segment:
    d.mkdir(parents=True, exist_ok=True)
    (d / LOG).write_bytes(data)
    if index is not None:
        (d / INDEX).write_bytes(index)
    return Segment.at(d / LOG)


# ----------------------------------------------------------------------------- the contract


def expected_cheap_cuts(positions: list[int], size: int, n: int) -> list[int]:
    """The documented rule, by hand: the first batch start at or after ``size * i // n``, searched
    past the previous cut; no such start ends the cuts."""
    cuts: list[int] = []
    for i in range(1, n):
        want = size * i // n if not cuts else max(size * i // n, cuts[-1] + 1)
        nxt = [p for p in positions if p >= want]
        if not nxt:
            break
        cuts.append(nxt[0])
    return cuts


def check_ranges(s: Segment, ranges: list[tuple[int, int]], n: int) -> None:
    """Contiguous, non-overlapping, non-empty ranges covering ``[0, size)``, at most ``n``."""
    size = os.path.getsize(s.log_path)
    assert 1 <= len(ranges) <= n
    assert ranges[0][0] == 0 and ranges[-1][1] == size
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    assert all(a < e for a, e in ranges) or ranges == [(0, 0)]


def chain_holds(s: Segment, ranges: list[tuple[int, int]]) -> bool:
    """The reader's check: each range's walk ends exactly at its end, at the end of the data."""
    for a, e in ranges:
        reader = s.batches(a, e)
        for _ in reader:
            pass
        if reader.stop is not WalkStop.END or reader.position != e:
            return False
    return True


@pytest.mark.parametrize("kind", ["v2", "v2-gzip", "v1", "v0"])
@pytest.mark.parametrize("indexed", [False, True], ids=["no-index", "index"])
def test_cheap_split_cuts_at_real_batch_starts_and_covers_the_file(tmp_path, kind, indexed):
    data = clean_segment(kind)
    positions = kp_positions(data)
    s = write_segment(tmp_path / "t-0", data, hand_index(positions, 3) if indexed else None)
    assert (s.index_path is not None) == indexed
    for n in (2, 3, 5, 8, 13, 64):
        ranges = s.split(n, exact=False)
        check_ranges(s, ranges, n)
        assert [a for a, _ in ranges[1:]] == expected_cheap_cuts(positions, len(data), n), n
        assert chain_holds(s, ranges)
        assert [b.position for a, e in ranges for b in s.batches(a, e)] == positions
    # a few shares: every cut is the exact one (no two shares fall in one batch)
    for n in (2, 3, 5):
        assert s.split(n, exact=False) == s.split(n), n


def test_cheap_split_far_from_any_known_start_uses_resync(tmp_path):
    """No index and cuts more than 1 MiB in: each cut is resync's first valid entry at the share."""
    data = clean_segment("v2")
    positions = kp_positions(data)
    s = write_segment(tmp_path / "t-0", data)
    size = len(data)
    ranges = s.split(2, exact=False)
    assert ranges[1][0] == resync(s.log_path, size // 2, size) == next(p for p in positions if p >= size // 2)


def test_cheap_split_small_cases(tmp_path):
    one = kp_v2(0, [b"v"])
    s = write_segment(tmp_path / "a-0", one)
    assert s.split(4, exact=False) == [(0, len(one))]  # one batch: nothing to cut at
    s = write_segment(tmp_path / "b-0", b"")
    assert s.split(4, exact=False) == [(0, 0)]
    data = b"".join(kp_v2(i, [b"v" * 100]) for i in range(40))
    s = write_segment(tmp_path / "c-0", data + b"\0" * 10)  # a short tail goes to the last range
    ranges = s.split(4, exact=False)
    check_ranges(s, ranges, 4)
    assert [a for a, _ in ranges[1:]] == expected_cheap_cuts(kp_positions(data), len(data) + 10, 4)
    assert s.split(1, exact=False) == [(0, len(data) + 10)]
    with pytest.raises(ValueError):
        s.split(0, exact=False)


def test_cheap_split_of_the_fixtures_and_a_real_segment_with_its_index(real):
    logs = sorted(FIXTURES.rglob("*.log")) + sorted(real_fixture("greenlemonT__kafka-temp/data/kafka3").rglob("*.log"))
    assert len(logs) > 10
    for log in logs:
        s = Segment.at(log, base_offset=0)
        data = log.read_bytes()
        pos, starts = 0, []
        while pos + 12 <= len(data):  # §3 framing by hand: int64 offset, int32 size
            starts.append(pos)
            pos += 12 + struct.unpack_from(">i", data, pos + 8)[0]
        if pos != len(data):
            continue  # a damaged or truncated fixture: its cuts are candidates only
        for n in (2, 3, 7, 40):
            ranges = s.split(n, exact=False)
            check_ranges(s, ranges, n)
            assert all(a in starts for a, _ in ranges), (log, n)
            assert chain_holds(s, ranges)


def test_a_wrong_index_entry_is_not_trusted(tmp_path):
    data = clean_segment("v2")
    positions = kp_positions(data)
    size = len(data)
    want = size // 2
    below = max(p for p in positions if p <= want)
    cut = next(p for p in positions if p >= want)
    # an entry pointing 5 bytes into the batch below the share: not a whole batch with a valid CRC
    s = write_segment(tmp_path / "t-0", data, struct.pack(">ii", 7, below + 5))
    assert s.split(2, exact=False) == [(0, cut), (cut, size)]


def test_an_index_entry_that_frames_but_is_no_batch_is_not_walked_from(tmp_path):
    """The entry points into a record value holding two made-up headers (offset, size) that frame:
    a header walk from there would cut at the second one, inside the value. The entry is checked
    first (a whole entry whose CRC holds must start there), so the cut comes from resync."""
    plain = kp_v2(0, [PATTERN * 256])
    k = 30
    big = PATTERN * 1024  # 256 KiB: the share falls inside this value

    def build(x: int, y: int, first: int, second: int) -> bytes:
        v = bytearray(big)
        v[first : first + 12] = struct.pack(">qi", 0, x)
        v[second : second + 12] = struct.pack(">qi", 0, y)
        batches = [plain] * k + [kp_v2(0, [bytes(v)])] + [plain] * k
        return b"".join(batches)

    first = 16 << 10
    data = build(0, 0, first, first)
    planted_at = k * len(plain)
    value_at = planted_at + data[planted_at:].index(big[:4096])
    want = len(data) // 2
    q, r = value_at + first, want + 1000
    second = r - value_at
    assert q < want < r < value_at + len(big) - 200
    data = build(r - q - 12, 100, first, second)
    positions = kp_positions(data)
    assert q not in positions and r not in positions
    cut = positions[k + 1]
    s = write_segment(tmp_path / "t-0", data, struct.pack(">ii", 5, q))
    assert s.split(2, exact=False) == [(0, cut), (cut, len(data))]
    assert s.split(2) == [(0, cut), (cut, len(data))]


def test_a_share_on_a_batch_start_is_the_cut(tmp_path):
    plain = kp_v2(0, [PATTERN * 256])
    data = plain * 64  # 4 MiB: every share of 2, 4 and 8 is a batch start
    positions = kp_positions(data)
    for indexed in (False, True):
        s = write_segment(tmp_path / f"t-{indexed:d}", data, hand_index(positions, 1) if indexed else None)
        for n in (2, 4, 8):
            assert [a for a, _ in s.split(n, exact=False)] == [len(data) * i // n for i in range(n)], (indexed, n)


# ----------------------------------------------------------------------------- a planted fake batch


def planted_segment() -> tuple[bytes, list[int], int, int]:
    """A segment above SPLIT_MIN_BYTES of 64 KiB one-record batches whose middle batch holds, at the
    end of its value, two whole valid v2 batches (kafka-python's), the first starting past the
    middle of the file. Returns the data, the real batch starts, the fake's position and the
    position of the batch after the planted one."""
    plain = kp_v2(0, [PATTERN * 256])
    fakes = kp_v2(777, [b"inside a value"]) + kp_v2(778, [b"and another"])
    k = 260
    planted = kp_v2(k, [PATTERN * 400 + fakes])
    batches = [plain] * 520
    batches[k] = planted
    data = bytearray(b"".join(batches))
    pos = 0
    for i, b in enumerate(batches):
        struct.pack_into(">q", data, pos, i)
        pos += len(b)
    data = bytes(data)
    positions = kp_positions(data)
    assert len(data) >= SPLIT_MIN_BYTES and len(positions) == 520
    at = positions[k]
    fake = at + planted.index(fakes)
    assert at < len(data) // 2 <= fake < positions[k + 1]
    return data, positions, fake, positions[k + 1]


def verified(path: Path, workers: int) -> tuple[list[Finding], list[FileSummary]]:
    items = list(verify_paths([str(path)], VerifyOptions(workers=workers)))
    return [i for i in items if isinstance(i, Finding)], [i for i in items if isinstance(i, FileSummary)]


def test_a_planted_fake_batch_is_a_candidate_cut_and_the_chain_check_catches_it(tmp_path, monkeypatch):
    data, positions, fake, after = planted_segment()
    s = write_segment(tmp_path / "t-0", data)
    size = len(data)
    ranges = s.split(2, exact=False)
    # resync takes the fake (a whole entry with a valid CRC); it is no batch start of the segment
    assert ranges == [(0, fake), (fake, size)]
    assert fake not in positions
    # the reader's check: the walk of the first range does not end at the cut
    reader = s.batches(0, fake)
    assert [b.position for b in reader] == positions[:260]
    assert reader.position == positions[260] != fake
    assert not chain_holds(s, ranges)
    # the exact split is not fooled
    assert s.split(2) == [(0, after), (after, size)]
    # verify --jobs 2 finds the chain broken and walks serially: the same results as one process
    ends = spy_on_chunks(monkeypatch)
    serial = verified(s.log_path, 1)
    assert verified(s.log_path, 2) == serial
    assert ends == [0]
    findings, (summary,) = serial
    assert [f for f in findings if f.kind not in INFO_KINDS] == []
    assert summary.batches == 520


@pytest.mark.parametrize("tail", [0, 4000], ids=["trimmed", "zero-filled-tail"])
def test_with_an_index_the_cheap_cut_skips_the_fake_and_verify_merges(tmp_path, monkeypatch, tail):
    """A broker's index after an unclean shutdown keeps its preallocated zero-filled tail: the
    entries before it are used all the same."""
    data, positions, fake, after = planted_segment()
    s = write_segment(tmp_path / "t-0", data, hand_index(positions, 1) + bytes(8 * tail))
    size = len(data)
    assert s.split(2, exact=False) == [(0, after), (after, size)] == s.split(2)
    ends = spy_on_chunks(monkeypatch)
    serial = verified(tmp_path / "t-0", 1)
    assert verified(tmp_path / "t-0", 2) == serial
    assert ends == [size]
    findings, summaries = serial
    assert [f for f in findings if f.kind not in INFO_KINDS] == []
    assert [x.batches for x in summaries if x.kind == "log"] == [520]


def test_verify_jobs_cuts_where_the_cheap_split_does(tmp_path, monkeypatch):
    """scan_chunks takes its chunks from Segment.split(n, exact=False)."""
    data, positions, fake, after = planted_segment()
    s = write_segment(tmp_path / "t-0", data)
    calls = []
    real = Segment.split

    def spy(self, n, *, exact=True):
        calls.append((self.log_path, n, exact))
        return real(self, n, exact=exact)

    monkeypatch.setattr(Segment, "split", spy)
    verified(s.log_path, 3)
    assert calls == [(s.log_path, 3, False)]


def test_verify_jobs_on_an_unreadable_large_segment_reports_it_as_one_process_does(tmp_path, monkeypatch):
    """The split cannot read the file: the serial walk meets the same error, reported as unreadable."""
    import builtins

    data, _positions, _fake, _after = planted_segment()
    s = write_segment(tmp_path / "t-0", data)
    refused = os.path.abspath(s.log_path)

    def refusing(real):
        def call(path, *args, **kwargs):
            if isinstance(path, (str, os.PathLike)) and os.path.abspath(os.fspath(path)) == refused:
                raise PermissionError(13, "Permission denied", os.fspath(path))
            return real(path, *args, **kwargs)
        return call

    monkeypatch.setattr(os, "open", refusing(os.open))
    monkeypatch.setattr(builtins, "open", refusing(builtins.open))
    ends = spy_on_chunks(monkeypatch)
    findings, summaries = verified(s.log_path, 2)
    assert (findings, summaries) == verified(s.log_path, 1)
    assert [(f.kind, f.message) for f in findings] == [("unreadable", "cannot read the file: Permission denied")]
    assert ends == [0]
