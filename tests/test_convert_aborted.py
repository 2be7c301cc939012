"""Aborted transactions for ``convert --drop-aborted``: :func:`kafkatool.convert.aborted.find_aborted`.

The transactional sequences are built with kafka-python's ``DefaultRecordBatchBuilder`` and
hand-made markers (spec §6: key = version 0 + type, value = version 0 + coordinator epoch), and
the expected answer is worked out by hand from the read_committed rule (spec §9, §10): a
producer's batches from its first transactional batch after its previous marker up to an ABORT
marker are aborted; a COMMIT, or no marker yet, keeps them.
"""

from __future__ import annotations

import os

from test_convert_rules import T0, control_batch, kp_v2

from kafkatool.convert.aborted import AbortedSet, find_aborted
from kafkatool.record.batch import Batch
from kafkatool.segment.logdir import Segment

ABORT, COMMIT = 0, 1
FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "logdir")


def data(offset: int, pid: int | None, n: int = 1) -> bytes:
    """``n`` records at ``offset``: transactional for producer ``pid``, or plain (None)."""
    recs = [(offset + i, T0 + offset + i, b"k", b"v" * 20, ()) for i in range(n)]
    if pid is None:
        return kp_v2(recs, base_offset=offset, producer_id=99, producer_epoch=0, base_sequence=offset)
    return kp_v2(recs, base_offset=offset, transactional=True, producer_id=pid, producer_epoch=0)


def leader_change(offset: int) -> bytes:
    """A non-transactional control batch (LEADER_CHANGE, type 2): not a transaction marker."""
    import struct

    key = struct.pack(">hh", 0, 2)
    return kp_v2([(offset, T0, key, b"\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00", ())], base_offset=offset, attrs_or=0x20)


def write(tmp_path, base: int, parts: list[bytes]) -> Segment:
    path = tmp_path / f"{base:020d}.log"
    path.write_bytes(b"".join(parts))
    return Segment.at(str(path))


def verdicts(segments) -> dict[int, bool]:
    aborted = find_aborted(segments)
    out = {}
    for seg in segments:
        for batch in seg.batches():
            out[batch.offset] = aborted.is_aborted(batch)
    return out


def sequence(tmp_path):
    P1, P2, P3 = 1001, 1002, 1003
    s1 = write(tmp_path, 0, [
        data(0, P1, 2),            # 0-1  P1 txn A
        data(2, P2, 2),            # 2-3  P2 txn B
        control_batch(4, P1, ABORT),   # A aborted
        control_batch(5, P2, COMMIT),  # B committed
        data(6, P1, 2),            # 6-7  P1 txn C
        data(8, None),             # 8    idempotent, not transactional
        data(9, P1),               # 9    P1 txn C again
    ])
    s2 = write(tmp_path, 10, [
        data(10, P2),              # 10   P2 txn D
        control_batch(11, P1, ABORT),  # C aborted (spans segments)
        data(12, P3),              # 12   P3 txn E: never closed
        leader_change(13),
        control_batch(14, P2, ABORT),  # D aborted
        control_batch(15, P1, COMMIT),  # P1 has nothing open: no effect
        data(16, P1),              # 16   P1 txn F: still open at the end
    ])
    return s1, s2


def test_hand_built_transactional_sequence(tmp_path):
    s1, s2 = sequence(tmp_path)
    got = verdicts([s1, s2])
    aborted = {o for o, a in got.items() if a}
    assert aborted == {0, 6, 9, 10}
    # markers are never "aborted" data, even inside an aborted range (ABORT at 4 closes [0, 4])
    assert got[4] is False and got[11] is False
    assert find_aborted([s1, s2]).count == 3


def test_only_the_segments_given(tmp_path):
    s1, s2 = sequence(tmp_path)
    # without the second segment, txn C's ABORT is not seen: C stays (open at the end)
    assert {o for o, a in verdicts([s1]).items() if a} == {0}


def test_damaged_segment_stops_its_own_pre_pass_only(tmp_path):
    s1, s2 = sequence(tmp_path)
    raw = bytearray(open(s2.log_path, "rb").read())
    # corrupt the stored CRC of the ABORT marker at offset 11 (the second entry of s2)
    first = len(data(10, 1002))
    raw[first + 17] ^= 0xFF
    open(s2.log_path, "wb").write(bytes(raw))
    s3 = write(tmp_path, 20, [data(20, 2000), control_batch(21, 2000, ABORT)])
    aborted = find_aborted([s1, s2, s3])
    offsets = {}
    for seg in (s1, s3):
        for b in seg.batches():
            offsets[b.offset] = aborted.is_aborted(b)
    # s2's pass stopped at offset 11: C (6-9) and D (10) have no ABORT seen; s3 still read
    assert {o for o, a in offsets.items() if a} == {0, 20}


def test_garbage_in_a_segment_stops_there(tmp_path):
    s1 = write(tmp_path, 0, [data(0, 7), b"\x00" * 8 + b"\xff\xff\xff\xff" + b"\x00" * 40, control_batch(1, 7, ABORT)])
    s2 = write(tmp_path, 2, [data(2, 8), control_batch(3, 8, ABORT)])
    assert {o for o, a in verdicts([s2]).items() if a} == {2}
    aborted = find_aborted([s1, s2])
    assert [aborted.is_aborted(b) for b in s2.batches()] == [True, False]
    assert aborted.count == 1  # s1's marker lies past the garbage


def test_fixture_txn_partition():
    seg = Segment.at(os.path.join(FIXTURES, "txn-0", "00000000000000000100.log"))
    got = verdicts([seg])
    # fixtures/README.md: one aborted transaction, producer 6000, first offset 103, last offset 113
    assert {o for o, a in got.items() if a} == {103}
    assert got[100] is False and got[106] is False


def _batch(offset: int, pid: int, *, attributes: int = 0x10, magic: int = 2) -> Batch:
    return Batch(0, 0, offset, magic, 0, attributes, 0, 0, 0, pid, 0, 0, 1, 0, 0)


def test_aborted_set_ranges():
    s = AbortedSet()
    assert not s and len(s) == 0
    for i in range(1000):  # producer 5: aborted [10i, 10i + 4], committed in between
        s.add(5, 10 * i, 10 * i + 4)
    assert len(s) == 1000
    assert [s.is_aborted(_batch(o, 5)) for o in (0, 4, 5, 9, 9990, 9994, 9995, 10_000)] == [
        True, True, False, False, True, True, False, False]
    assert not s.is_aborted(_batch(3, 6))  # another producer
    assert not s.is_aborted(_batch(3, 5, attributes=0))  # not transactional
    assert not s.is_aborted(_batch(3, 5, attributes=0x30))  # a control batch
    assert not s.is_aborted(_batch(3, 5, magic=1))
