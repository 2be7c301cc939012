"""kafkatool.segment.files: naming rules of spec §2 (and §15.2 dispatch, §15.3 snapshot names)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkatool.errors import FileNameError
from kafkatool.segment.files import (
    FileKind,
    PartitionDir,
    classify,
    file_suffix,
    java_parse_int,
    parse_base_offset,
    parse_checkpoint_name,
    parse_partition_dir,
    segment_file_name,
    segment_order,
    sibling,
    split_temp_suffix,
)

from conftest import real_fixture as fixture


# ----------------------------------------------------------------------------- numbers


@pytest.mark.parametrize(
    "text, bits, expected",
    [
        ("0", 64, 0),
        ("00000000000000000005", 64, 5),
        ("+7", 64, 7),
        ("-1", 64, -1),
        ("9223372036854775807", 64, 9223372036854775807),
        ("-9223372036854775808", 64, -9223372036854775808),
        ("9223372036854775808", 64, None),
        ("2147483647", 32, 2147483647),
        ("2147483648", 32, None),
        ("", 64, None),
        ("+", 64, None),
        ("-", 64, None),
        (" 5", 64, None),
        ("5 ", 64, None),
        ("1_000", 64, None),  # Python's int() would accept this; Java does not
        ("0x10", 64, None),
        ("1e3", 64, None),
    ],
)
def test_java_parse_int(text: str, bits: int, expected: int | None) -> None:
    assert java_parse_int(text, bits) == expected


# ----------------------------------------------------------------------------- base offsets


@pytest.mark.parametrize(
    "name, offset",
    [
        ("00000000000000000000.log", 0),
        ("00000000000000000005.index", 5),
        ("00000000000000008202.snapshot", 8202),
        ("00000000000000000005.log.deleted", 5),  # up to the FIRST dot
        ("/data/t-0/00000000000000000042.timeindex.swap", 42),
        ("5.log", 5),  # Kafka parses any Long, not only 20 digits
        ("09223372036854775807.log", 9223372036854775807),
    ],
)
def test_parse_base_offset(name: str, offset: int) -> None:
    assert parse_base_offset(name) == offset


@pytest.mark.parametrize(
    "name", ["foo.log", ".lock", "leader-epoch-checkpoint", "9223372036854775808.log", " 1.log", "1_0.log"]
)
def test_parse_base_offset_rejects(name: str) -> None:
    # §17.G.54: a non-numeric segment name is NumberFormatException in Kafka.
    with pytest.raises(FileNameError) as info:
        parse_base_offset(name)
    assert name in str(info.value)


def test_parse_base_offset_accepts_pathlike() -> None:
    assert parse_base_offset(Path("/x/y/00000000000000000007.log")) == 7


def test_segment_file_name() -> None:
    assert segment_file_name(0, ".log") == "00000000000000000000.log"
    assert segment_file_name(8202, ".snapshot") == "00000000000000008202.snapshot"
    assert segment_file_name(5, "index") == "00000000000000000005.index"
    assert segment_file_name(5, ".log.deleted") == "00000000000000000005.log.deleted"
    assert segment_file_name(9223372036854775807, ".log") == "09223372036854775807.log"
    assert segment_file_name(-5, ".log") == "-00000000000000000005.log"


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1), st.sampled_from([".log", ".index", ".snapshot"]))
def test_segment_name_round_trip(offset: int, suffix: str) -> None:
    assert parse_base_offset(segment_file_name(offset, suffix)) == offset


@given(st.text())
def test_parse_base_offset_only_raises_file_name_error(name: str) -> None:
    try:
        value = parse_base_offset(name)
    except FileNameError:
        return
    assert -(2**63) <= value < 2**63


# ----------------------------------------------------------------------------- KRaft snapshot names


def test_parse_checkpoint_name() -> None:
    assert parse_checkpoint_name("00000000000000028870-0000000189.checkpoint") == (28870, 189)
    assert parse_checkpoint_name("/m/__cluster_metadata-0/00000000000000000000-0000000000.checkpoint") == (0, 0)


@pytest.mark.parametrize(
    "name",
    [
        "bootstrap.checkpoint",
        "00000000000000028870.checkpoint",
        "0000000000000028870-0000000189.checkpoint",
        "00000000000000028870-000000189.checkpoint",
        "00000000000000028870_0000000189.checkpoint",
        "00000000000000028870-0000000189.checkpoint.part",
        "00000000000000028870-9999999999.checkpoint",  # epoch beyond int32
        "replication-offset-checkpoint",
    ],
)
def test_parse_checkpoint_name_rejects(name: str) -> None:
    with pytest.raises(FileNameError):
        parse_checkpoint_name(name)


# ----------------------------------------------------------------------------- suffix and kinds


@pytest.mark.parametrize(
    "name, suffix",
    [
        ("00000000000000000000.log", ".log"),
        ("00000000000000000000.log.deleted", ".deleted"),
        ("00000000000000028870-0000000189.checkpoint.part", ".part"),
        ("partition.metadata", ".metadata"),
        (".lock", ".lock"),
        (".kafka_cleanshutdown", ".kafka_cleanshutdown"),
        ("leader-epoch-checkpoint", None),  # §17.G.51: no dot
        ("replication-offset-checkpoint", None),
        ("/a.b/topic-0", None),  # only the last component counts
        ("", None),
    ],
)
def test_file_suffix(name: str, suffix: str | None) -> None:
    assert file_suffix(name) == suffix


@pytest.mark.parametrize(
    "name, kind",
    [
        ("00000000000000000000.log", FileKind.LOG),
        ("00000000000000000000.index", FileKind.INDEX),
        ("00000000000000000000.timeindex", FileKind.TIMEINDEX),
        ("00000000000000000000.txnindex", FileKind.TXNINDEX),
        ("00000000000000000001.snapshot", FileKind.PRODUCER_SNAPSHOT),
        ("00000000000000028870-0000000189.checkpoint", FileKind.CHECKPOINT_SNAPSHOT),
        ("bootstrap.checkpoint", FileKind.BOOTSTRAP_CHECKPOINT),
        ("leader-epoch-checkpoint", FileKind.LEADER_EPOCH_CHECKPOINT),
        ("partition.metadata", FileKind.PARTITION_METADATA),
        ("quorum-state", FileKind.QUORUM_STATE),
        ("recovery-point-offset-checkpoint", FileKind.OFFSET_CHECKPOINT),
        ("log-start-offset-checkpoint", FileKind.OFFSET_CHECKPOINT),
        ("replication-offset-checkpoint", FileKind.OFFSET_CHECKPOINT),
        ("cleaner-offset-checkpoint", FileKind.OFFSET_CHECKPOINT),
        (".kafka_cleanshutdown", FileKind.CLEAN_SHUTDOWN),
        (".lock", FileKind.LOCK),
        ("meta.properties", FileKind.META_PROPERTIES),
        ("00000000000000000000.log.deleted", FileKind.DELETED),
        ("00000000000000000000.index.cleaned", FileKind.CLEANED),
        ("00000000000000000000.timeindex.swap", FileKind.SWAP),
        ("00000000000000028870-0000000189.checkpoint.deleted", FileKind.DELETED),
        ("00000000000000028870-0000000189.checkpoint.part", FileKind.UNKNOWN),
        ("leader-epoch-checkpoint.tmp", FileKind.UNKNOWN),
        ("5.log", FileKind.UNKNOWN),  # Kafka never writes a short prefix
        ("foo.log", FileKind.UNKNOWN),
        ("00000000000000000000.LOG", FileKind.UNKNOWN),
        ("00000000000000000000.metadata", FileKind.UNKNOWN),
        ("README", FileKind.UNKNOWN),
        ("/d/t-0/00000000000000000000.log", FileKind.LOG),
    ],
)
def test_classify(name: str, kind: FileKind) -> None:
    assert classify(name) is kind


def test_split_temp_suffix() -> None:
    assert split_temp_suffix("00000000000000000000.log.swap") == ("00000000000000000000.log", ".swap")
    assert split_temp_suffix("/x/00000000000000000000.index.deleted") == ("00000000000000000000.index", ".deleted")
    assert split_temp_suffix("00000000000000000000.log") == ("00000000000000000000.log", None)
    assert split_temp_suffix(".swap") == (".swap", None)


@given(st.text())
def test_classify_never_raises(name: str) -> None:
    assert isinstance(classify(name), FileKind)


# ----------------------------------------------------------------------------- partition directories


@pytest.mark.parametrize(
    "name, parsed",
    [
        ("payment-create-request-0", PartitionDir("payment-create-request", 0, None)),
        ("__consumer_offsets-28", PartitionDir("__consumer_offsets", 28, None)),
        ("__cluster_metadata-0", PartitionDir("__cluster_metadata", 0, None)),
        ("t-+1", PartitionDir("t", 1, None)),  # Integer.parseInt accepts a sign
        (
            "my-topic-3.0123456789abcdef0123456789abcdef-delete",
            PartitionDir("my-topic", 3, "delete", "0123456789abcdef0123456789abcdef"),
        ),
        (
            "t-0.0123456789abcdef0123456789abcdef-future",
            PartitionDir("t", 0, "future", "0123456789abcdef0123456789abcdef"),
        ),
        ("t-0.abc-stray", PartitionDir("t", 0, "stray", "abc")),
        ("/data/kafka/topic-7", PartitionDir("topic", 7, None)),
    ],
)
def test_parse_partition_dir(name: str, parsed: PartitionDir) -> None:
    assert parse_partition_dir(name) == parsed


@pytest.mark.parametrize(
    "name",
    [
        "topic",
        "topic-",
        "-0",
        "topic-x",
        "topic-2147483648",
        "t-0-delete",  # a state suffix without ".<uuid>" does not match Kafka's pattern
        "t-0.a b-delete",
        "",
        ".lock",
        "meta.properties",
    ],
)
def test_parse_partition_dir_rejects(name: str) -> None:
    assert parse_partition_dir(name) is None


@given(st.text())
def test_parse_partition_dir_never_raises(name: str) -> None:
    parsed = parse_partition_dir(name)
    assert parsed is None or (parsed.topic and -(2**31) <= parsed.partition < 2**31)


def test_partition_dir_is_a_tuple() -> None:
    topic, partition, state, _ = parse_partition_dir("a-b-1")  # type: ignore[misc]
    assert (topic, partition, state) == ("a-b", 1, None)


# ----------------------------------------------------------------------------- sibling


def test_sibling() -> None:
    assert sibling("/d/t-0/00000000000000000000.index", ".log") == "/d/t-0/00000000000000000000.log"
    assert sibling("00000000000000000005.timeindex", "index") == "00000000000000000005.index"
    assert sibling(Path("/d/00000000000000000005.log.deleted"), ".txnindex") == "/d/00000000000000000005.txnindex"


# ----------------------------------------------------------------------------- real broker dirs


def test_real_log_dir_names_are_classified() -> None:
    root = fixture("greenlemonT__kafka-temp/data/kafka3")
    kinds: dict[str, FileKind] = {}
    for path in root.rglob("*"):
        if path.is_file():
            kinds[path.relative_to(root).as_posix()] = classify(path)
    assert FileKind.UNKNOWN not in kinds.values()
    assert kinds["__cluster_metadata-0/00000000000000028870-0000000189.checkpoint"] is FileKind.CHECKPOINT_SNAPSHOT
    assert kinds["bootstrap.checkpoint"] is FileKind.BOOTSTRAP_CHECKPOINT
    assert kinds["meta.properties"] is FileKind.META_PROPERTIES
    assert kinds["payment-create-request-0/00000000000000000001.snapshot"] is FileKind.PRODUCER_SNAPSHOT
    dirs = {p.name: parse_partition_dir(p) for p in root.iterdir() if p.is_dir()}
    assert dirs["payment-create-request-0"] == PartitionDir("payment-create-request", 0, None)
    assert dirs["__cluster_metadata-0"] == PartitionDir("__cluster_metadata", 0, None)
    assert all(parsed is not None for parsed in dirs.values())
    assert parse_checkpoint_name(root / "__cluster_metadata-0/00000000000000028870-0000000189.checkpoint") == (
        28870,
        189,
    )


def seg(offset: int, suffix: str) -> str:
    return f"{offset:020d}{suffix}"


# ----------------------------------------------------------------------------- segment order (dump and verify list a directory in it)


def test_segment_order_puts_each_segments_files_together_by_offset():
    names = [
        "leader-epoch-checkpoint", seg(10, ".snapshot"), seg(10, ".index"), seg(2, ".timeindex"),
        seg(10, ".log"), seg(2, ".log"), seg(2, ".txnindex"), seg(2, ".index"), "partition.metadata",
    ]
    assert sorted(names, key=segment_order) == [
        seg(2, ".log"), seg(2, ".index"), seg(2, ".timeindex"), seg(2, ".txnindex"),
        seg(10, ".log"), seg(10, ".index"), seg(10, ".snapshot"),
        "leader-epoch-checkpoint", "partition.metadata",
    ]
    # dump lists the producer snapshots after every segment
    assert sorted(names, key=lambda n: segment_order(n, snapshots_last=True))[4:7] == [
        seg(10, ".log"), seg(10, ".index"), seg(10, ".snapshot"),
    ]
    assert sorted([seg(10, ".snapshot"), seg(12, ".log")], key=lambda n: segment_order(n, snapshots_last=True)) == [
        seg(12, ".log"), seg(10, ".snapshot"),
    ]


def test_segment_order_kraft_snapshots_by_end_offset_and_odd_digits():
    a, b = "00000000000000000100-0000000001.checkpoint", "00000000000000000007-0000000003.checkpoint"
    assert sorted([a, "bootstrap.checkpoint", b], key=segment_order) == [b, a, "bootstrap.checkpoint"]
    # a superscript two is a digit but not a decimal: it sorts with the other names, never crashes
    assert segment_order("\u00b2.log")[0] == 2
