"""A control-batch record-count bomb in the repair commands (issue 9).

A transaction marker is one record, but its writer chooses the record count: a few KB of
zstd can hold an ABORT marker followed by millions of records. Recovery (and so
``truncate``'s cut and ``reindex``'s transaction tracking) reads the marker from the first
record after decompressing the whole batch; kafkatool must do that with flat memory. The
batch is packed by hand (spec §4.1, §6: attributes bit 4 transactional, bit 5 control; the
marker key is version 0 + type 0 = ABORT), not with kafkatool's encoder.
"""

from __future__ import annotations

import struct

import pytest

from test_bombs import LIMIT_KIB, TS, record_pattern, run_measured, write_segment

PRODUCER_ID = 4242
N = 2_000_000


def abort_marker_record() -> bytes:
    """The ABORT control record (§6): key = version 0, type 0; value = version 0, coordinator epoch 5."""
    key, value = b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x05"
    # attributes, timestampDelta 0, offsetDelta 0, key length 4 (zig-zag 8), key, value length 6 (12), value, 0 headers
    body = b"\x00\x00\x00" + b"\x08" + key + b"\x0c" + value + b"\x00"
    return bytes((len(body) * 2,)) + body


def control_bomb(n: int) -> bytes:
    import crc32c
    import zstandard

    unit, repeat = record_pattern(n - 1, 1)
    co = zstandard.ZstdCompressor(level=3).compressobj()
    # one zstd frame: the marker, then the repeated tiny records
    payload = co.compress(abort_marker_record()) + _stream(co, unit, repeat)
    after_crc = struct.pack(
        ">hiqqqhii",
        4 | 0x10 | 0x20,  # zstd, transactional, control
        0,  # lastOffsetDelta: every record at the batch's one offset, as a marker
        TS,
        TS,
        PRODUCER_ID,
        0,  # producerEpoch
        -1,  # baseSequence
        n,
    ) + payload
    return struct.pack(">qiibI", 0, 9 + len(after_crc), 0, 2, crc32c.crc32c(after_crc)) + after_crc


def _stream(co, unit: bytes, repeat: int) -> bytes:
    per = (1 << 20) // len(unit)
    parts, left = [], repeat
    while left:
        k = min(left, per)
        parts.append(co.compress(unit * k))
        left -= k
    parts.append(co.flush())
    return b"".join(parts)


@pytest.fixture(scope="module")
def bomb_dir(tmp_path_factory):
    part = tmp_path_factory.mktemp("logdir") / "bomb-0"
    part.mkdir()
    write_segment(part, control_bomb(N))
    return part


@pytest.mark.parametrize("command", [("truncate",), ("reindex", "--all")])
def test_a_control_batch_bomb_is_read_with_flat_memory(bomb_dir, command):
    # the marker decodes (ABORT), so neither command refuses: exit 0 or 1 (a dry run's "changes needed")
    code, rss, err = run_measured(*command, str(bomb_dir))
    assert code in (0, 1), err
    assert "Traceback" not in err and "internal error" not in err, err
    assert rss < LIMIT_KIB, f"peak RSS {rss / 1024:.0f} MiB for kafkatool {' '.join(command)}"
