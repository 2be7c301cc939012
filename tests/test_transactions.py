"""``kafkatool transactions``: transactional ids from ``__transaction_state`` and open transactions
from the data partitions' markers, on log dirs built here with known answers.

Where the bytes come from (independent of kafkatool's own encoders where it matters):
data batches are kafka-python's ``DefaultRecordBatchBuilder``; COMMIT/ABORT markers are laid out
by hand from spec §6 (and one checked against spec §16.2's golden batch); the
``__transaction_state`` value of ``tx-open`` is hand-written bytes from spec §14.2, the others
are written with kafkatool's table-driven codec (``record.message.encode``).

The scenario (``T`` = 1700000000000; offsets, producer id/epoch):

orders-0
  0-1  data   pid 1000 ep 0 (2 records, T, T+1)
  2    COMMIT pid 1000 ep 0 (coordinator epoch 5)
  3    data   pid 2000 ep 3
  4    ABORT  pid 2000 ep 3
  5    data   pid 6000 ep 0              (T+4)
  6    data   pid 3000 ep 1              (T+5000)   <- tx-open's first offset here
  7    COMMIT pid 6000 ep 0
  8    data   non-transactional
  9    data   pid 3000 ep 1              (T+5003)
orders-1
  0-2  data   pid 3000 ep 1 (3 records, T+6000..T+6002)   <- tx-open's first offset here
  3    data   pid 4000 ep 0              (T+7000)
  4    ABORT  pid 4000 ep 1              a fenced producer's transaction, closed by the bump
  5    data   pid 6000 ep 0              (T+8000)   <- tx-hang: coordinator says CompleteCommit
  6    data   pid 5000 ep 0              (T+9000)   <- no transactional id names pid 5000
__transaction_state-0: tx-commit Ongoing -> PrepareCommit -> CompleteCommit; tx-abort Ongoing ->
  CompleteAbort; tx-gone Ongoing, then a tombstone; tx-open Ongoing [orders-0, orders-1] started
  T+5000, timeout 60000 (hand-written v0 bytes); tx-fenced CompleteAbort pid 4000 ep 1;
  tx-hang CompleteCommit pid 6000 (v1, flexible).
"""

from __future__ import annotations

import json
import os
import shutil
import struct
from pathlib import Path

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder

import topicdata
from conftest import real_fixture

from kafkatool import transactions as tx
from kafkatool.record.v2 import RecordSpec, encode_batch
from kafkatool.record.varint import encode_varint as zigzag  # (the marker layout is pinned by spec §16.2's CRC)
from kafkatool.segment.logdir import Partition
from kafkatool.segment.snapshot import ProducerSnapshotEntry, encode_producer_snapshot

T = 1_700_000_000_000
SEG = "00000000000000000000.log"


# ----------------------------------------------------------------------------- builders (private)


def data(offset: int, pid: int, epoch: int, timestamps: list[int], *, txn: bool = True, seq: int = 0) -> bytes:
    """A v2 data batch written by kafka-python (an independent encoder)."""
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=txn, producer_id=pid,
                                  producer_epoch=epoch, base_sequence=seq if pid >= 0 else -1, batch_size=1 << 20)
    for i, ts in enumerate(timestamps):
        b.append(i, timestamp=ts, key=None, value=b"v%d" % i, headers=[])
    buf = bytearray(b.build())
    struct.pack_into(">q", buf, 0, offset)  # baseOffset is outside the CRC (§4.1)
    return bytes(buf)


def marker(offset: int, pid: int, epoch: int, commit: bool, ts: int, coordinator_epoch: int = 5) -> bytes:
    """A COMMIT/ABORT marker batch laid out by hand from spec §6 (attributes 0x30, sequence -1)."""
    key, value = struct.pack(">hh", 0, 1 if commit else 0), struct.pack(">hi", 0, coordinator_epoch)
    body = b"\x00" + zigzag(0) + zigzag(0) + zigzag(len(key)) + key + zigzag(len(value)) + value + zigzag(0)
    body = zigzag(len(body)) + body
    after = struct.pack(">hiqqqhii", 0x30, 0, ts, ts, pid, epoch, -1, 1) + body
    head = struct.pack(">qiib", offset, 4 + 1 + 4 + len(after), 0, 2)
    return head + struct.pack(">I", crc32c.crc32c(after)) + after


def test_the_hand_laid_marker_is_spec_16_2s_golden_batch() -> None:
    """The marker builder against spec §16.2's worked example: B2, 78 bytes, CRC 2627399116
    (partitionLeaderEpoch 0 there, as here)."""
    b = marker(3, 1000, 0, True, 1700000000020, coordinator_epoch=5)
    assert len(b) == 78
    assert struct.unpack_from(">I", b, 17)[0] == 2627399116


txn_key = topicdata.txn_log_key


def txn_value(pid: int, epoch: int, state: int, partitions: dict[str, list[int]], *, start: int, update: int,
              timeout: int = 60000, version: int = 1, **tagged) -> bytes:
    return topicdata.txn_log_value(pid, epoch, state, timeout_ms=timeout, partitions=partitions, last_update=update,
                                   start=start, version=version, **tagged)


#: tx-open's key and value, written by hand from spec §14.2 (value version 0: not flexible).
TX_OPEN_KEY = bytes.fromhex("0000" "0007") + b"tx-open"
TX_OPEN_VALUE = (
    bytes.fromhex("0000")                       # value version 0
    + struct.pack(">q", 3000)                   # ProducerId
    + struct.pack(">h", 1)                      # ProducerEpoch
    + struct.pack(">i", 60000)                  # TransactionTimeoutMs
    + bytes([1])                                # TransactionStatus 1 = Ongoing
    + struct.pack(">i", 1)                      # TransactionPartitions: 1 topic
    + struct.pack(">h", 6) + b"orders"          #   Topic
    + struct.pack(">i", 2) + struct.pack(">ii", 0, 1)  # PartitionIds [0, 1]
    + struct.pack(">q", T + 5000)               # TransactionLastUpdateTimestampMs
    + struct.pack(">q", T + 5000)               # TransactionStartTimestampMs
)


def state_batch(offset: int, key: bytes, value: bytes | None, ts: int) -> bytes:
    return encode_batch([RecordSpec(offset, ts, key, value)])


def write(logdir: Path, name: str, *batches: bytes, base: int = 0) -> Path:
    part = logdir / name
    part.mkdir(parents=True, exist_ok=True)
    (part / f"{base:020d}.log").write_bytes(b"".join(batches))
    return part


ORDERS_0 = [
    data(0, 1000, 0, [T, T + 1]),
    marker(2, 1000, 0, True, T + 2, 5),
    data(3, 2000, 3, [T + 2]),
    marker(4, 2000, 3, False, T + 3, 5),
    data(5, 6000, 0, [T + 4]),
    data(6, 3000, 1, [T + 5000]),
    marker(7, 6000, 0, True, T + 5001, 5),
    data(8, -1, -1, [T + 5002], txn=False),
    data(9, 3000, 1, [T + 5003], seq=1),
]
ORDERS_1 = [
    data(0, 3000, 1, [T + 6000, T + 6001, T + 6002], seq=2),
    data(3, 4000, 0, [T + 7000]),
    marker(4, 4000, 1, False, T + 7001, 6),
    data(5, 6000, 0, [T + 8000], seq=1),
    data(6, 5000, 0, [T + 9000]),
]


def state_log() -> list[bytes]:
    orders0 = {"orders": [0]}
    recs = [
        (txn_key("tx-commit"), txn_value(1000, 0, 1, orders0, start=T, update=T)),
        (txn_key("tx-commit"), txn_value(1000, 0, 2, orders0, start=T, update=T + 1)),
        (txn_key("tx-commit"), txn_value(1000, 0, 4, {}, start=T, update=T + 2)),
        (txn_key("tx-abort"), txn_value(2000, 3, 1, orders0, start=T + 2, update=T + 2)),
        (txn_key("tx-abort"), txn_value(2000, 3, 5, {}, start=T + 2, update=T + 3, version=0)),
        (txn_key("tx-gone"), txn_value(7000, 0, 1, orders0, start=T, update=T)),
        (txn_key("tx-gone"), None),
        (TX_OPEN_KEY, TX_OPEN_VALUE),
        (txn_key("tx-fenced"), txn_value(4000, 1, 5, {}, start=T + 7000, update=T + 7001, timeout=30000)),
        (txn_key("tx-hang"), txn_value(6000, 0, 4, {}, start=T + 4, update=T + 5001)),
    ]
    return [state_batch(i, k, v, T + i) for i, (k, v) in enumerate(recs)]


@pytest.fixture
def logdir(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    d.mkdir()
    (d / "meta.properties").write_text("version=1\nbroker.id=1\n")
    write(d, "orders-0", *ORDERS_0)
    write(d, "orders-1", *ORDERS_1)
    write(d, "__transaction_state-0", *state_log())
    return d


def report(*paths: Path, **options) -> tx.TransactionsReport:
    found = tx.find_partitions([str(p) for p in paths])
    return tx.transactions_report(found.partitions, tx.TransactionsOptions(**options))


def by_pid(r: tx.TransactionsReport) -> dict[int, tx.OpenTransaction]:
    return {t.producer_id: t for t in r.open}


# ----------------------------------------------------------------------------- the known answers


def test_transactional_ids_replayed_latest_wins_tombstone_removes(logdir: Path) -> None:
    r = report(logdir, now_ms=T + 10_000)
    states = {s.transactional_id: s for s in r.states}
    assert sorted(states) == ["tx-abort", "tx-commit", "tx-fenced", "tx-hang", "tx-open"]  # tx-gone: tombstone
    assert r.transactional_ids == 5 and r.coordinator_partitions == 1
    assert states["tx-commit"].state == "CompleteCommit" and states["tx-commit"].offset == 2
    assert states["tx-abort"].state == "CompleteAbort" and states["tx-abort"].version == 0
    o = states["tx-open"]  # the hand-written bytes
    assert (o.producer_id, o.producer_epoch, o.state, o.timeout_ms) == (3000, 1, "Ongoing", 60000)
    assert o.partitions == (("orders", 0), ("orders", 1))
    assert (o.start_timestamp, o.last_update_timestamp, o.version) == (T + 5000, T + 5000, 0)
    assert (o.previous_producer_id, o.next_producer_id) == (-1, -1)
    assert states["tx-hang"].version == 1 and states["tx-hang"].state == "CompleteCommit"


def test_open_transactions_and_their_verdicts(logdir: Path) -> None:
    r = report(logdir, now_ms=T + 10_000, transaction_state_partitions=1)  # (this cluster's __transaction_state has one)
    got = by_pid(r)
    assert sorted(got) == [3000, 5000, 6000]  # committed 1000, aborted 2000, fenced 4000 are closed

    t = got[3000]
    assert t.transactional_id == "tx-open" and t.coordinator.state == "Ongoing"
    assert t.verdict == tx.Verdict.ONGOING
    (p0, p1) = t.partitions
    assert (p0.topic, p0.partition, p0.first_offset, p0.last_offset, p0.batches, p0.records) == ("orders", 0, 6, 9, 2, 2)
    assert (p0.first_timestamp, p0.last_timestamp) == (T + 5000, T + 5003)
    assert (p1.topic, p1.partition, p1.first_offset, p1.last_offset, p1.batches, p1.records) == ("orders", 1, 0, 2, 1, 3)
    assert (p1.first_timestamp, p1.last_timestamp) == (T + 6000, T + 6002)
    assert (t.first_timestamp, t.last_timestamp) == (T + 5000, T + 6002)
    assert (t.age_ms, t.idle_ms) == (5000, 10_000 - 6002)
    assert t.age_at_newest_ms == 9000 - 5000  # the newest batch timestamp is T+9000 (orders-1 offset 6)
    assert r.newest_timestamp == T + 9000

    h = got[6000]
    assert h.transactional_id == "tx-hang" and h.verdict == tx.Verdict.HANGING
    assert [(p.topic, p.partition, p.first_offset) for p in h.partitions] == [("orders", 1, 5)]
    assert "CompleteCommit" in h.partitions[0].reason
    assert h.partitions[0].coordinator_epoch == -1  # (its COMMIT was on orders-0: orders-1 saw no marker of 6000)

    u = got[5000]
    assert u.transactional_id is None and u.verdict == tx.Verdict.HANGING
    assert "no transactional id" in u.partitions[0].reason
    # most alarming first, then oldest
    assert [t.producer_id for t in r.open] == [6000, 5000, 3000]


def test_an_unnamed_producer_id_is_unknown_while_transaction_state_partitions_are_missing(logdir: Path) -> None:
    """Kafka's default is 50 __transaction_state partitions and one was read: pid 5000's transactional
    id may be in another broker's log dir, so it is not called hanging; the named ones are unchanged."""
    r = report(logdir, now_ms=T + 10_000)
    got = by_pid(r)
    assert got[5000].verdict == tx.Verdict.UNKNOWN and "49 of 50 were not read" in got[5000].partitions[0].reason
    assert (got[6000].verdict, got[3000].verdict) == (tx.Verdict.HANGING, tx.Verdict.ONGOING)
    assert r.coordinator_partitions_missing == list(range(1, 50))
    # a partition numbered past the default says there are more
    shutil.copytree(logdir / "__transaction_state-0", logdir / "__transaction_state-60")
    assert len(report(logdir, now_ms=T).coordinator_partitions_missing) == 59


def test_counts_per_partition_committed_aborted_fenced(logdir: Path) -> None:
    r = report(logdir, now_ms=T)
    scans = {(s.topic, s.partition): s for s in r.partitions}
    o0, o1 = scans[("orders", 0)], scans[("orders", 1)]
    assert (o0.committed, o0.aborted, o0.fenced, o0.open, o0.markers_without_data) == (2, 1, 0, 1, 0)
    assert (o1.committed, o1.aborted, o1.fenced, o1.open, o1.markers_without_data) == (0, 1, 1, 3, 0)
    assert (o0.batches, o0.transactional_batches, o0.log_start_offset, o0.log_end_offset) == (9, 8, 0, 10)
    assert (o1.log_start_offset, o1.log_end_offset) == (0, 7)


def test_now_boundaries_ongoing_then_timed_out(logdir: Path) -> None:
    # tx-open started at T+5000 with a 60000 ms timeout: open for exactly the timeout is still ongoing
    assert by_pid(report(logdir, now_ms=T + 65_000))[3000].verdict == tx.Verdict.ONGOING
    late = by_pid(report(logdir, now_ms=T + 65_001))[3000]
    assert late.verdict == tx.Verdict.TIMED_OUT and late.age_ms == 60_001
    # a --now before the data: negative ages, said as such
    early = by_pid(report(logdir, now_ms=T))[3000]
    assert early.age_ms == -5000


def test_prepare_commit_is_completing_and_a_missing_partition_is_hanging(tmp_path: Path) -> None:
    d = tmp_path / "d"
    write(d, "orders-0", data(0, 3000, 1, [T]))
    write(d, "orders-1", data(0, 3000, 1, [T]))
    write(d, "__transaction_state-0",
          state_batch(0, TX_OPEN_KEY, txn_value(3000, 1, 2, {"orders": [0]}, start=T, update=T), T))
    got = by_pid(report(d, now_ms=T))[3000]
    verdicts = {(p.topic, p.partition): p.verdict for p in got.partitions}
    assert verdicts == {("orders", 0): tx.Verdict.COMPLETING, ("orders", 1): tx.Verdict.HANGING}
    assert got.verdict == tx.Verdict.HANGING  # the worst of its partitions


def test_a_producer_id_the_transactional_id_moved_away_from_is_hanging(tmp_path: Path) -> None:
    """The coordinator gave tx-open a new producer id (epoch exhaustion): the old id's open data
    never gets a marker; the earlier record still names the old id."""
    d = tmp_path / "d"
    write(d, "orders-0", data(0, 3000, 1, [T]))
    write(d, "__transaction_state-0",
          state_batch(0, TX_OPEN_KEY, TX_OPEN_VALUE, T),
          state_batch(1, TX_OPEN_KEY, txn_value(3001, 0, 4, {}, start=T, update=T + 1), T + 1))
    got = by_pid(report(d, now_ms=T))[3000]
    assert got.transactional_id == "tx-open" and got.verdict == tx.Verdict.HANGING
    assert "moved on to producer id 3001" in got.partitions[0].reason


def test_a_previous_producer_id_of_a_version_1_value_names_the_transactional_id(tmp_path: Path) -> None:
    """A version 1 value carries the producer id it replaced (tagged PreviousProducerId): open data
    of that old id is hanging, named by the latest state alone."""
    d = tmp_path / "d"
    write(d, "orders-0", data(0, 3000, 32766, [T]))
    write(d, "__transaction_state-0",
          state_batch(0, TX_OPEN_KEY, txn_value(3001, 0, 1, {"orders": [0]}, start=T, update=T,
                                                PreviousProducerId=3000), T))
    got = by_pid(report(d, now_ms=T))[3000]
    assert got.transactional_id == "tx-open" and got.coordinator.previous_producer_id == 3000
    assert got.verdict == tx.Verdict.HANGING and "moved on to producer id 3001" in got.partitions[0].reason


def test_without_transaction_state_the_verdict_is_unknown(logdir: Path) -> None:
    shutil.rmtree(logdir / "__transaction_state-0")
    r = report(logdir, now_ms=T)
    assert r.coordinator_partitions == 0 and r.states == []
    assert {t.verdict for t in r.open} == {tx.Verdict.UNKNOWN}
    assert sorted(by_pid(r)) == [3000, 5000, 6000]


def test_filters_transactional_id_open_and_topic(logdir: Path) -> None:
    r = report(logdir, now_ms=T, transactional_id="tx-open")
    assert [s.transactional_id for s in r.states] == ["tx-open"] and [t.producer_id for t in r.open] == [3000]
    r = report(logdir, now_ms=T, transactional_id="tx-commit")
    assert [s.transactional_id for s in r.states] == ["tx-commit"] and r.open == []
    r = report(logdir, now_ms=T, open_only=True)
    assert [s.transactional_id for s in r.states] == ["tx-hang", "tx-open"]  # owners of open data, or active
    assert sorted(by_pid(r)) == [3000, 5000, 6000]
    r = report(logdir, now_ms=T, topics=frozenset({"nothing"}))
    assert r.open == [] and len(r.states) == 5


def test_an_aborted_transaction_in_the_txnindex_is_not_open(tmp_path: Path) -> None:
    """An aborted transaction, as the broker leaves it: data, ABORT marker, a .txnindex entry."""
    from kafkatool.segment.txnindex import AbortedTxn, encode_txn_index

    d = tmp_path / "d"
    part = write(d, "orders-0", data(0, 2000, 3, [T, T + 1]), marker(2, 2000, 3, False, T + 2))
    (part / "00000000000000000000.txnindex").write_bytes(encode_txn_index([AbortedTxn(0, 2000, 0, 2, 3)]))
    r = report(d, now_ms=T)
    assert r.open == [] and r.partitions[0].aborted == 1


def test_a_new_epoch_without_a_marker_keeps_the_first_offset(tmp_path: Path) -> None:
    """As the broker's producer state: data of a bumped epoch while a transaction is open does not
    move its first offset (the last stable offset stays at the old data)."""
    d = tmp_path / "d"
    write(d, "orders-0", data(0, 3000, 1, [T]), data(1, 3000, 2, [T + 1]))
    (got,) = report(d, now_ms=T).open
    (p,) = got.partitions
    assert (p.first_offset, p.last_offset, p.first_epoch, p.producer_epoch) == (0, 1, 1, 2)


def test_data_before_the_log_start_from_the_producer_snapshot(tmp_path: Path) -> None:
    """Retention deleted the first segment: the snapshot at the log start names the open transaction's
    first offset (90), below anything left in the log; a marker whose data was deleted is counted."""
    d = tmp_path / "d"
    part = write(d, "orders-0", marker(100, 8000, 0, True, T + 100), data(101, 9000, 2, [T + 101]), base=100)
    snap = encode_producer_snapshot([
        ProducerSnapshotEntry(9000, 2, 10, 95, 0, T + 95, 4, 90),   # open since offset 90
        ProducerSnapshotEntry(8000, 0, 5, 99, 0, T + 99, 4, 97),    # open since 97, closed at 100
        ProducerSnapshotEntry(7000, 0, 5, 50, 0, T + 50, 4, -1),    # no transaction open
    ])
    (part / "00000000000000000100.snapshot").write_bytes(snap)
    r = report(d, now_ms=T)
    (got,) = r.open
    (p,) = got.partitions
    assert (got.producer_id, p.first_offset, p.last_offset, p.from_snapshot, p.coordinator_epoch) == (9000, 90, 101, True, 4)
    assert p.first_timestamp == T + 101  # (the snapshot has no first time: the first batch read gives one)
    assert r.partitions[0].committed == 1 and r.partitions[0].markers_without_data == 0


def test_a_transaction_only_the_producer_snapshot_knows(tmp_path: Path) -> None:
    """Open before the log start, no data of it left: the snapshot's offsets and time are all there is."""
    d = tmp_path / "d"
    part = write(d, "orders-0", data(100, 1, 0, [T + 100], txn=False), base=100)
    (part / "00000000000000000100.snapshot").write_bytes(
        encode_producer_snapshot([ProducerSnapshotEntry(9000, 2, 10, 95, 0, T + 95, 4, 90)]))
    (p,) = report(d, now_ms=T).open[0].partitions
    assert (p.first_offset, p.last_offset, p.first_timestamp, p.last_timestamp, p.batches) == (90, 95, -1, T + 95, 0)


def test_data_at_a_log_start_above_zero_without_a_snapshot_is_uncertain(tmp_path: Path) -> None:
    d = tmp_path / "d"
    write(d, "orders-0", data(100, 9000, 2, [T]), marker(101, 8000, 0, True, T + 1), base=100)
    r = report(d, now_ms=T)
    (p,) = r.open[0].partitions
    assert p.start_uncertain and not p.from_snapshot and p.first_offset == 100
    assert r.partitions[0].markers_without_data == 1


def test_transactional_offset_commits_in_consumer_offsets_are_transactions(tmp_path: Path) -> None:
    d = tmp_path / "d"
    key, value = topicdata.offset_commit_key("g", "t", 0), topicdata.offset_commit_value(42, T)
    commit = encode_batch([RecordSpec(0, T, key, value)], producer_id=11, producer_epoch=0, base_sequence=0,
                          is_transactional=True)
    write(d, "__consumer_offsets-7", commit)
    (got,) = report(d, now_ms=T).open
    assert (got.partitions[0].topic, got.partitions[0].partition, got.partitions[0].first_offset) == ("__consumer_offsets", 7, 0)


def test_legacy_batches_are_never_transactional(tmp_path: Path) -> None:
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    b = LegacyRecordBatchBuilder(magic=1, compression_type=0, batch_size=1 << 20)
    b.append(0, timestamp=T, key=None, value=b"old")
    d = tmp_path / "d"
    write(d, "orders-0", bytes(b.build()), data(1, 3000, 0, [T + 1]))
    r = report(d, now_ms=T)
    assert r.partitions[0].batches == 2 and r.partitions[0].transactional_batches == 1
    assert r.open[0].partitions[0].first_offset == 1


def test_a_damaged_region_is_reported_and_the_rest_read(tmp_path: Path) -> None:
    d = tmp_path / "d"
    garbage = b"\xde\xad\xbe\xef" * 10
    part = write(d, "orders-0", data(0, 1000, 0, [T]), garbage, marker(1, 1000, 0, True, T + 1), data(2, 3000, 0, [T + 2]))
    r = report(d, now_ms=T)
    (p,) = r.problems
    assert p.file == str(part / SEG) and p.position == len(data(0, 1000, 0, [T]))
    assert p.kind in ("invalid_size", "unknown_magic")
    assert "unreadable bytes before the next valid batch" in p.message
    assert [t.producer_id for t in r.open] == [3000] and r.partitions[0].committed == 1


def test_a_marker_that_does_not_decode_is_a_located_problem(tmp_path: Path) -> None:
    d = tmp_path / "d"
    bad = encode_batch([RecordSpec(1, T, b"\x00", b"")], producer_id=1000, producer_epoch=0,
                       is_transactional=True, is_control=True)
    write(d, "orders-0", data(0, 1000, 0, [T]), bad)
    r = report(d, now_ms=T)
    (p,) = r.problems
    assert p.position == len(data(0, 1000, 0, [T])) and "end control record key" in p.message
    assert [t.producer_id for t in r.open] == [1000]  # not closed by a marker nobody can read


def test_replicas_the_copy_with_the_highest_log_end_is_read(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    write(a, "orders-0", *ORDERS_0[:5])          # log end 6, pid 6000's data at 5 without its marker
    write(b, "orders-0", *ORDERS_0)              # log end 10
    r = report(a, b, now_ms=T)
    (scan,) = r.partitions
    assert scan.partition_dir == str(b / "orders-0") and scan.log_end_offset == 10
    assert scan.other_copies == ((str(a / "orders-0"), 6),)
    assert sorted(by_pid(r)) == [3000]


def test_a_corrupt_transaction_state_record_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    d = tmp_path / "d"
    bad_state = TX_OPEN_VALUE[:16] + bytes([9]) + TX_OPEN_VALUE[17:]  # TransactionStatus 9: no such state
    unknown_key = struct.pack(">h", 5) + b"\x00\x05later"  # a key version the coordinator skips, as here
    write(d, "__transaction_state-0", state_batch(0, TX_OPEN_KEY, bad_state, T),
          state_batch(1, txn_key("tx-ok"), txn_value(1, 0, 0, {}, start=-1, update=T), T),
          state_batch(2, unknown_key, TX_OPEN_VALUE, T))
    r = report(d, now_ms=T)
    assert [s.transactional_id for s in r.states] == ["tx-ok"] and r.states[0].state == "Empty"
    (p,) = r.problems
    assert "offset 0" in p.message and p.file.endswith(SEG)


# ----------------------------------------------------------------------------- times


@pytest.mark.parametrize("text, ms", [
    ("1700000000000", 1700000000000),
    ("2023-11-14T22:13:20Z", 1700000000000),
    ("2023-11-14T22:13:20.005Z", 1700000000005),
    ("2023-11-14 23:13:20+01:00", 1700000000000),
    ("2023-11-14T22:13:20", 1700000000000),
    ("2023-11-14", 1699920000000),
    ("2024-02-29T00:00:00-0130", 1709170200000),
    ("1969-12-31T23:59:59.999Z", -1),
])
def test_parse_time(text: str, ms: int) -> None:
    assert tx.parse_time(text) == ms


@pytest.mark.parametrize("text", ["yesterday", "2023-13-01", "2023-11-14T25:00:00Z", "2023-02-29", "", "2023-11-14T22:13"
                                  "+25:00"])
def test_parse_time_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        tx.parse_time(text)


# ----------------------------------------------------------------------------- the command


def test_cli_jsonl_every_line_is_json(run, logdir: Path) -> None:
    res = run("transactions", "--format", "jsonl", "--now", "2023-11-14T22:13:30Z", "--transaction-state-partitions", "1",
              str(logdir))
    assert res.code == 1, res  # open transactions found
    objs = [json.loads(line) for line in res.lines]
    types = [o["type"] for o in objs]
    assert types.count("transactionalId") == 5 and types.count("openTransaction") == 3 and types[-1] == "summary"
    summary = objs[-1]
    assert (summary["now"], summary["openTransactions"], summary["hanging"], summary["problems"]) == (T + 10_000, 3, 2, 0)
    hang = next(o for o in objs if o["type"] == "openTransaction" and o["producerId"] == 6000)
    assert hang["transactionalId"] == "tx-hang" and hang["coordinatorState"] == "CompleteCommit"
    assert hang["partitions"][0]["abortCommand"] == (
        "kafka-transactions.sh --bootstrap-server BROKER:9092 abort --topic orders --partition 1 --start-offset 5")
    state = next(o for o in objs if o["type"] == "transactionalId" and o["transactionalId"] == "tx-open")
    assert state["partitions"] == [{"topic": "orders", "partition": 0}, {"topic": "orders", "partition": 1}]
    assert "Read 3 partitions" in res.err


def test_cli_table_names_the_hanging_partitions_and_the_commands(run, logdir: Path) -> None:
    res = run("transactions", "--now", str(T + 10_000), str(logdir))
    assert res.code == 1
    assert "tx-hang" in res.out and "hanging" in res.out
    assert "abort --topic orders --partition 1 --start-offset 5" in res.out
    assert "find-hanging --topic orders --partition 1" in res.out
    assert "2023-11-14T22:13:25.000Z" in res.out  # tx-open's first time, as ISO 8601 UTC


def test_cli_exit_0_when_nothing_is_open(run, logdir: Path) -> None:
    res = run("transactions", "--transactional-id", "tx-commit", "--format", "jsonl", str(logdir))
    assert res.code == 0, res
    assert [json.loads(line)["type"] for line in res.lines] == ["transactionalId", "partition", "partition",
                                                                "partition", "summary"]
    res = run("transactions", "--topic", "nothing", "--open", str(logdir))
    assert res.code == 0 and "No open transaction" in res.out


def test_cli_damage_on_stderr_exit_1(run, tmp_path: Path) -> None:
    d = tmp_path / "d"
    write(d, "orders-0", data(0, 1000, 0, [T]), b"\x00\x01" * 9, marker(1, 1000, 0, True, T + 1))
    res = run("transactions", "-q", str(d))
    assert res.code == 1
    assert f"kafkatool: error: {d / 'orders-0' / SEG}:{len(data(0, 1000, 0, [T]))}: " in res.err


def test_cli_usage(run, tmp_path: Path, logdir: Path) -> None:
    assert run("transactions", "--now", "soon", str(logdir)).code == 2
    empty = tmp_path / "empty"
    empty.mkdir()
    res = run("transactions", str(empty))
    assert res.code == 2 and "nothing Kafka found" in res.err
    res = run("transactions", str(logdir / "orders-0" / SEG))
    assert res.code == 2 and "not a directory" in res.err


def test_cli_replica_note(run, tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    write(a, "orders-0", *ORDERS_0[:2])
    write(b, "orders-0", *ORDERS_0[:4])
    res = run("transactions", str(a), str(b))
    assert res.code == 0, res
    assert f"kafkatool: note: orders-0: 2 copies; read {b / 'orders-0'} (log end 5, the highest)" in res.err


# ----------------------------------------------------------------------------- memory and speed


def test_memory_follows_open_producers_not_records(tmp_path: Path) -> None:
    """20000 committed transactions of 200 producers leave nothing open: the walk keeps one row per
    open producer, none per record."""
    out = bytearray()
    off = 0
    for i in range(10_000):
        pid = 100 + i % 200
        out += encode_batch([RecordSpec(off, T + i, None, b"x")], producer_id=pid, producer_epoch=0,
                            base_sequence=i // 200, is_transactional=True)
        out += encode_batch([RecordSpec(off + 1, T + i, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x01")],
                            producer_id=pid, producer_epoch=0, is_transactional=True, is_control=True)
        off += 2
    d = tmp_path / "d"
    write(d, "orders-0", bytes(out))
    problems: list = []
    scan, opened = tx.scan_data_partition(Partition(str(d / "orders-0")), problems)
    assert (scan.committed, scan.open, opened, problems) == (10_000, 0, [], [])


# ----------------------------------------------------------------------------- real broker files


@pytest.mark.parametrize("rel", ["William0423__kafka/kafka-logs", "greenlemonT__kafka-temp/data",
                                 "xpxwo100__bullShit/tmp/kafka-logs"])
def test_real_log_dirs_hold_no_transactions(rel: str) -> None:
    """Real broker log dirs (``__consumer_offsets``, data topics, KRaft ``__cluster_metadata`` whose
    control batches are not transactional): every batch read, nothing open, no problem."""
    path = real_fixture(rel)
    r = report(path, now_ms=T)
    assert r.batches > 0 and r.open == [] and r.problems == [] and r.states == []
    assert all(s.transactional_batches == 0 for s in r.partitions)


# ----------------------------------------------------------------------------- the man page


def _keys(obj, out: set[str]) -> set[str]:
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.add(k)
            _keys(v, out)
    elif isinstance(obj, list):
        for v in obj:
            _keys(v, out)
    return out


def test_the_json_lines_schema_names_every_type_and_field(run, logdir: Path, tmp_path: Path) -> None:
    """Every type and every key that ``--format jsonl`` writes (a run with transactional ids, open
    transactions, partitions with other copies, a problem and the summary) is named in the JSON
    LINES SCHEMA section of kafkatool-transactions.1.rst."""
    import re

    other = tmp_path / "other"
    write(other, "orders-0", *ORDERS_0[:3], b"\xde\xad" * 20)  # a shorter copy, damaged
    write(logdir, "orders-2", data(0, 1000, 0, [T]), b"\xde\xad" * 20, data(1, 1000, 0, [T]))
    res = run("transactions", "--format", "jsonl", str(logdir), str(other))
    objs = [json.loads(line) for line in res.lines]
    types = {o["type"] for o in objs}
    assert types == {"transactionalId", "openTransaction", "partition", "problem", "summary"}
    assert any(o.get("otherCopies") for o in objs)
    prose = (Path(__file__).resolve().parents[1] / "kafkatool" / "cli" / "manpages" / "kafkatool-transactions.1.rst")
    text = prose.read_text(encoding="utf-8")
    schema = text[text.index("JSON LINES SCHEMA"):text.index("EXIT STATUS")]
    words = set(re.findall(r"``([A-Za-z]+)``", schema))
    missing = sorted((types | _keys(objs, set())) - words)
    assert not missing, f"kafkatool-transactions.1.rst's JSON LINES SCHEMA does not name {missing}"


def test_open_producers_past_the_limit_are_a_problem_not_memory(tmp_path: Path) -> None:
    d = tmp_path / "d"
    write(d, "orders-0", *(data(i, 100 + i, 0, [T]) for i in range(5)), marker(5, 104, 0, True, T))
    problems: list = []
    scan, opened = tx.scan_data_partition(Partition(str(d / "orders-0")), problems, max_open=3)
    assert sorted(pid for pid, _op in opened) == [100, 101, 102] and scan.markers_without_data == 1
    (p,) = problems
    assert p.kind == "too_many_producers" and "2 transactional batches" in p.message


@settings(max_examples=60)
@given(which=st.sampled_from(["orders-1", "__transaction_state-0"]), at=st.integers(0, 10_000),
       value=st.integers(0, 255), cut=st.integers(0, 64))
def test_any_corruption_is_a_problem_never_an_exception(tmp_path_factory, which: str, at: int, value: int,
                                                        cut: int) -> None:
    """One byte changed and the tail cut anywhere in a data log or __transaction_state: the report
    comes back (problems located), never an exception."""
    d = tmp_path_factory.mktemp("fuzz")
    write(d, "orders-1", *ORDERS_1)
    write(d, "__transaction_state-0", *state_log())
    log = d / which / SEG
    buf = bytearray(log.read_bytes())
    buf[at % len(buf)] = value
    log.write_bytes(bytes(buf[:len(buf) - cut]))
    r = report(d, now_ms=T)
    for p in r.problems:
        assert p.file.startswith(str(d)) and p.message


def test_a_fifo_or_dangling_link_named_like_a_segment_is_a_problem(tmp_path: Path) -> None:
    d = tmp_path / "d"
    part = write(d, "orders-0", data(0, 3000, 0, [T]))
    os.mkfifo(part / "00000000000000000050.log")
    (part / "00000000000000000060.log").symlink_to(tmp_path / "nowhere")
    r = report(d, now_ms=T)
    assert sorted(p.kind for p in r.problems) == ["not_regular_file", "not_regular_file"]
    assert [t.producer_id for t in r.open] == [3000]


@settings(max_examples=40)
@given(ops=st.lists(st.tuples(st.integers(0, 4), st.sampled_from(["data", "data", "data", "commit", "abort", "plain"])),
                    min_size=1, max_size=40),
       cuts=st.lists(st.integers(1, 39), max_size=3))
def test_open_transactions_match_a_backward_look_over_random_logs(tmp_path_factory, ops, cuts) -> None:
    """Random logs of 5 producers (transactional data, COMMIT, ABORT, plain batches) cut into
    segments at random: the open transactions are, per producer id, its first transactional data
    after its last marker, computed here looking backward from the end, not by replaying."""
    batches, kinds = [], []
    for offset, (p, kind) in enumerate(ops):
        pid = 7000 + p
        if kind == "data":
            batches.append(data(offset, pid, 0, [T + offset]))
        elif kind == "plain":
            batches.append(data(offset, -1, -1, [T + offset], txn=False))
        else:
            batches.append(marker(offset, pid, 0, kind == "commit", T + offset))
        kinds.append((pid, kind))
    d = tmp_path_factory.mktemp("random")
    part = d / "orders-0"
    part.mkdir()
    bounds = sorted({c for c in cuts if c < len(batches)} | {0, len(batches)})
    for lo, hi in zip(bounds, bounds[1:]):
        (part / f"{lo:020d}.log").write_bytes(b"".join(batches[lo:hi]))
    expected = {}
    for pid in {pid for pid, kind in kinds if kind == "data"}:
        last_marker = max((i for i, (q, k) in enumerate(kinds) if q == pid and k in ("commit", "abort")), default=-1)
        after = [i for i, (q, k) in enumerate(kinds) if q == pid and k == "data" and i > last_marker]
        if after:
            expected[pid] = (after[0], after[-1], len(after))
    r = report(d, now_ms=T)
    got = {t.producer_id: (t.partitions[0].first_offset, t.partitions[0].last_offset, t.partitions[0].batches)
           for t in r.open}
    assert got == expected and r.problems == []
    scan = r.partitions[0]
    closed = sum(1 for i, (pid, k) in enumerate(kinds) if k in ("commit", "abort")
                 and any(q == pid and kk == "data" for q, kk in kinds[
                     max((j for j in range(i) if kinds[j][0] == pid and kinds[j][1] in ("commit", "abort")),
                         default=-1) + 1:i]))
    assert scan.committed + scan.aborted == closed
    assert scan.markers_without_data == sum(1 for _p, k in kinds if k in ("commit", "abort")) - closed


def test_a_commit_with_a_bumped_epoch_is_not_fenced(tmp_path: Path) -> None:
    """Transaction version 2 (KIP-890): the coordinator bumps the epoch at every end, so a COMMIT
    carries epoch+1; only an ABORT of a higher epoch is a fenced producer's."""
    d = tmp_path / "d"
    write(d, "orders-0", data(0, 3000, 4, [T]), marker(1, 3000, 5, True, T), data(2, 3000, 5, [T]),
          marker(3, 3000, 6, False, T))
    scan = report(d, now_ms=T).partitions[0]
    assert (scan.committed, scan.aborted, scan.fenced, scan.open) == (1, 1, 1, 0)
