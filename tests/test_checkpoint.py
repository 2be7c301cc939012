"""kafkatool.segment.checkpoint: the text files of spec §11 (and quorum-state, meta.properties)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkatool.errors import CheckpointError
from kafkatool.segment.checkpoint import (
    EpochEntry,
    OffsetCheckpointEntry,
    PartitionMetadata,
    decode_clean_shutdown,
    decode_leader_epoch_checkpoint,
    decode_offset_checkpoint,
    decode_partition_metadata,
    decode_properties,
    decode_quorum_state,
    decode_uuid,
    encode_leader_epoch_checkpoint,
    encode_offset_checkpoint,
    encode_partition_metadata,
    encode_uuid,
    read_clean_shutdown,
    read_leader_epoch_checkpoint,
    read_meta_properties,
    read_offset_checkpoint,
    read_partition_metadata,
    read_quorum_state,
)

from conftest import REAL as FIXTURES  # ../shared/fixtures-real, or KAFKATOOL_REAL_FIXTURES
LOC = "/data/t-0/leader-epoch-checkpoint"


def fixture(rel: str) -> Path:
    path = FIXTURES / rel
    if not path.exists():
        pytest.skip(f"real fixture {rel} is not available")
    return path


# ----------------------------------------------------------------------------- leader-epoch-checkpoint (§11.1)


def test_leader_epoch_encode_and_decode() -> None:
    text = encode_leader_epoch_checkpoint([EpochEntry(5, 0), EpochEntry(7, 1234)])
    assert text == "0\n2\n5 0\n7 1234\n"
    assert decode_leader_epoch_checkpoint(text.encode()) == [EpochEntry(5, 0), EpochEntry(7, 1234)]
    assert encode_leader_epoch_checkpoint([]) == "0\n0\n"


@pytest.mark.parametrize(
    "text, entries",
    [
        (b"", []),  # empty file
        (b"0\n", []),  # missing count line
        (b"0", []),
        (b"0\n0\n", []),
        (b"0\r\n1\r\n5 0\r\n", [EpochEntry(5, 0)]),  # readLine accepts \r\n and \r
        (b"0\r1\r5 0", [EpochEntry(5, 0)]),
        (b"0\n1\n5\t\t0 \n", [EpochEntry(5, 0)]),  # split on \s+, trailing blanks dropped
        (b"0\n1\n+5 -3\n", [EpochEntry(5, -3)]),  # parseInt/parseLong accept signs
    ],
)
def test_leader_epoch_accepted_forms(text: bytes, entries: list[EpochEntry]) -> None:
    assert decode_leader_epoch_checkpoint(text, LOC) == entries


def test_leader_epoch_wrong_version() -> None:
    with pytest.raises(CheckpointError) as info:
        decode_leader_epoch_checkpoint(b"1\n0\n", LOC)
    assert info.value.message == f"Unrecognised version:1, expected version: 0 in checkpoint file at: {LOC}"
    assert info.value.path == LOC


@pytest.mark.parametrize(
    "text, bad_line, position",
    [
        (b"x\n", "x", 0),  # version line not a number
        (b"0\n 1\n", " 1", 2),  # count line with a blank
        (b"0\n1\n5\n", "5", 4),  # one token
        (b"0\n1\n5 0 1\n", "5 0 1", 4),  # three tokens
        (b"0\n1\n 5 0\n", " 5 0", 4),  # a leading blank makes an empty first token
        (b"0\n2\n5 0\n\n", "", 8),  # an empty line
        (b"0\n1\n5 x\n", "5 x", 4),
        (b"0\n1\n2147483648 0\n", "2147483648 0", 4),  # epoch beyond int32
        (b"0\n1\n\xc3\xa9 0\n", "\u00e9 0", 4),
    ],
)
def test_leader_epoch_malformed_lines(text: bytes, bad_line: str, position: int) -> None:
    with pytest.raises(CheckpointError) as info:
        decode_leader_epoch_checkpoint(text, LOC)
    assert info.value.message == f"Malformed line in checkpoint file [{LOC}]: {bad_line}"
    assert info.value.position == position


@pytest.mark.parametrize("text, expected, found", [(b"0\n2\n5 0\n", 2, 1), (b"0\n0\n5 0\n", 0, 1), (b"0\n-1\n", -1, 0)])
def test_leader_epoch_count_mismatch(text: bytes, expected: int, found: int) -> None:
    with pytest.raises(CheckpointError) as info:
        decode_leader_epoch_checkpoint(text, LOC)
    assert info.value.message == (
        f"Expected [{expected}] entries in checkpoint file [{LOC}], but found only [{found}]"
    )


def test_leader_epoch_invalid_utf8() -> None:
    with pytest.raises(CheckpointError) as info:
        decode_leader_epoch_checkpoint(b"0\n1\n5 \xff\n", LOC)
    assert info.value.position == 6


def test_read_uses_the_absolute_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("leader-epoch-checkpoint").write_text("3\n0\n")
    with pytest.raises(CheckpointError) as info:
        read_leader_epoch_checkpoint("leader-epoch-checkpoint")
    where = os.path.join(str(tmp_path), "leader-epoch-checkpoint")
    assert info.value.message.endswith(f"in checkpoint file at: {where}")
    assert str(info.value).startswith(f"{where}:0: ")


def test_read_missing_file_raises_oserror(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        read_leader_epoch_checkpoint(tmp_path / "leader-epoch-checkpoint")


@given(st.lists(st.builds(EpochEntry, st.integers(-(2**31), 2**31 - 1), st.integers(-(2**63), 2**63 - 1))))
def test_leader_epoch_round_trip(entries: list[EpochEntry]) -> None:
    assert decode_leader_epoch_checkpoint(encode_leader_epoch_checkpoint(entries).encode()) == entries


@settings(max_examples=300)
@given(st.binary(max_size=60) | st.text(alphabet="0123456789 -\n\r\tx", max_size=40).map(str.encode))
def test_checkpoint_garbage_only_raises_our_error(data: bytes) -> None:
    for decode in (decode_leader_epoch_checkpoint, decode_offset_checkpoint, decode_partition_metadata):
        try:
            decode(data, LOC)
        except CheckpointError:
            pass


def test_real_leader_epoch_checkpoints() -> None:
    assert read_leader_epoch_checkpoint(
        fixture("William0423__kafka/kafka-logs/__consumer_offsets-28/leader-epoch-checkpoint")
    ) == [EpochEntry(5, 0)]
    assert read_leader_epoch_checkpoint(
        fixture("greenlemonT__kafka-temp/data/kafka3/payment-create-request-0/leader-epoch-checkpoint")
    ) == [EpochEntry(32, 0)]
    path = fixture("greenlemonT__kafka-temp/data/kafka3/__cluster_metadata-0/leader-epoch-checkpoint")
    entries = read_leader_epoch_checkpoint(path)
    assert len(entries) == 58 and entries[:3] == [EpochEntry(3, 0), EpochEntry(9, 477), EpochEntry(15, 478)]
    assert encode_leader_epoch_checkpoint(entries) == path.read_text()


# ----------------------------------------------------------------------------- offset checkpoints (§11.3)


def test_offset_checkpoint_encode_and_decode() -> None:
    entries = [
        OffsetCheckpointEntry("__consumer_offsets", 26, 7),
        OffsetCheckpointEntry("payment-create-request", 0, 1),
    ]
    text = encode_offset_checkpoint(entries)
    assert text == "0\n2\n__consumer_offsets 26 7\npayment-create-request 0 1\n"
    assert decode_offset_checkpoint(text.encode()) == entries
    assert decode_offset_checkpoint(text.encode())[0] == ("__consumer_offsets", 26, 7)


def test_offset_checkpoint_malformed() -> None:
    with pytest.raises(CheckpointError) as info:
        decode_offset_checkpoint(b"0\n1\nt 0\n", "/d/replication-offset-checkpoint")
    assert info.value.message == "Malformed line in checkpoint file [/d/replication-offset-checkpoint]: t 0"


@given(
    st.lists(
        st.builds(
            OffsetCheckpointEntry,
            st.from_regex(r"[A-Za-z0-9._-]{1,20}", fullmatch=True),
            st.integers(-(2**31), 2**31 - 1),
            st.integers(-(2**63), 2**63 - 1),
        ),
        max_size=20,
    )
)
def test_offset_checkpoint_round_trip(entries: list[OffsetCheckpointEntry]) -> None:
    assert decode_offset_checkpoint(encode_offset_checkpoint(entries).encode()) == entries


def test_real_offset_checkpoints() -> None:
    root = fixture("greenlemonT__kafka-temp/data/kafka3")
    recovery = read_offset_checkpoint(root / "recovery-point-offset-checkpoint")
    assert len(recovery) == 52
    assert OffsetCheckpointEntry("payment-create-request", 0, 1) in recovery
    assert OffsetCheckpointEntry("__consumer_offsets", 26, 7) in recovery
    assert read_offset_checkpoint(root / "log-start-offset-checkpoint") == []
    assert len(read_offset_checkpoint(root / "replication-offset-checkpoint")) == 52
    william = fixture("William0423__kafka/kafka-logs")
    for name in ("recovery-point-offset-checkpoint", "replication-offset-checkpoint"):
        entries = read_offset_checkpoint(william / name)
        assert len(entries) == 52 and OffsetCheckpointEntry("test_topic", 0, 0) in entries
        assert encode_offset_checkpoint(entries) == (william / name).read_text()
    bull = fixture("xpxwo100__bullShit/tmp/kafka-logs")
    assert read_offset_checkpoint(bull / "recovery-point-offset-checkpoint")


# ----------------------------------------------------------------------------- Kafka Uuid


def test_uuid() -> None:
    raw = decode_uuid("waOfnfkeQj2nhh7-Sgl6Cw")
    assert len(raw) == 16 and encode_uuid(raw) == "waOfnfkeQj2nhh7-Sgl6Cw"
    assert decode_uuid("AAAAAAAAAAAAAAAAAAAAAQ") == bytes(15) + b"\x01"  # Uuid.METADATA_TOPIC_ID
    assert decode_uuid("AAAAAAAAAAAAAAAAAAAAAQ==") == bytes(15) + b"\x01"  # Java's decoder accepts padding
    bad_ids = ("", "waOfnfkeQj2nhh7+Sgl6Cw", "waOfnfkeQj2nhh7-Sgl6C", "waOfnfkeQj2nhh7-Sgl6Cw=", "waOfnfkeQj2nhh7-Sgl6Cwxx")
    for bad in bad_ids:
        with pytest.raises(CheckpointError):
            decode_uuid(bad)
    with pytest.raises(CheckpointError):
        encode_uuid(b"\x00" * 15)


@given(st.binary(min_size=16, max_size=16))
def test_uuid_round_trip(raw: bytes) -> None:
    text = encode_uuid(raw)
    assert len(text) == 22 and decode_uuid(text) == raw


# ----------------------------------------------------------------------------- partition.metadata (§11.2)

PM_LOC = "/data/t-0/partition.metadata"


def test_partition_metadata_encode_and_decode() -> None:
    text = encode_partition_metadata("waOfnfkeQj2nhh7-Sgl6Cw")
    assert text == "version: 0\ntopic_id: waOfnfkeQj2nhh7-Sgl6Cw"  # no trailing newline
    assert decode_partition_metadata(text.encode()) == PartitionMetadata(0, "waOfnfkeQj2nhh7-Sgl6Cw")
    assert encode_partition_metadata(decode_uuid("waOfnfkeQj2nhh7-Sgl6Cw")) == text
    with pytest.raises(CheckpointError):
        encode_partition_metadata(bytes(16))


@pytest.mark.parametrize(
    "text, result",
    [
        (b"version: 0\ntopic_id: waOfnfkeQj2nhh7-Sgl6Cw\n", PartitionMetadata(0, "waOfnfkeQj2nhh7-Sgl6Cw")),
        (b"version:   3\r\ntopic_id:\tAAAAAAAAAAAAAAAAAAAAAQ==\nextra", PartitionMetadata(3, "AAAAAAAAAAAAAAAAAAAAAQ")),
        (b"v: 0\nid: waOfnfkeQj2nhh7-Sgl6Cw", PartitionMetadata(0, "waOfnfkeQj2nhh7-Sgl6Cw")),  # keys unchecked
    ],
)
def test_partition_metadata_accepted_forms(text: bytes, result: PartitionMetadata) -> None:
    assert decode_partition_metadata(text, PM_LOC) == result


def test_partition_metadata_zero_topic_id() -> None:
    with pytest.raises(CheckpointError) as info:
        decode_partition_metadata(b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA", PM_LOC)
    assert info.value.message == f"Invalid topic ID in partition metadata file ({PM_LOC})"


def test_partition_metadata_negative_version() -> None:
    with pytest.raises(CheckpointError) as info:
        decode_partition_metadata(b"version: -1\ntopic_id: waOfnfkeQj2nhh7-Sgl6Cw", PM_LOC)
    assert info.value.message == f"Unrecognized version of partition metadata file + ({PM_LOC}): -1"


@pytest.mark.parametrize(
    "text, shown",
    [
        (b"", "null"),
        (b"version: 0\n", "null"),
        (b"version 0\ntopic_id: waOfnfkeQj2nhh7-Sgl6Cw", "version 0"),
        (b"version: x\ntopic_id: waOfnfkeQj2nhh7-Sgl6Cw", "version: x"),
        (b"version: 0\ntopic_id: nope", "topic_id: nope"),
        (b"version: 0\ntopic_id:waOfnfkeQj2nhh7-Sgl6Cw", "topic_id:waOfnfkeQj2nhh7-Sgl6Cw"),
        (b"version: 0\ntopic_id: a: b", "topic_id: a: b"),
    ],
)
def test_partition_metadata_malformed(text: bytes, shown: str) -> None:
    with pytest.raises(CheckpointError) as info:
        decode_partition_metadata(text, PM_LOC)
    assert info.value.message == f"Malformed line in checkpoint file [{PM_LOC}]: {shown}"


def test_real_partition_metadata() -> None:
    path = fixture("greenlemonT__kafka-temp/data/kafka3/payment-create-request-0/partition.metadata")
    assert read_partition_metadata(path) == PartitionMetadata(0, "waOfnfkeQj2nhh7-Sgl6Cw")
    assert encode_partition_metadata("waOfnfkeQj2nhh7-Sgl6Cw") == path.read_text()
    path = fixture("greenlemonT__kafka-temp/data/kafka3/__cluster_metadata-0/partition.metadata")
    meta = read_partition_metadata(path)
    assert meta == PartitionMetadata(0, "AAAAAAAAAAAAAAAAAAAAAQ")


# ----------------------------------------------------------------------------- quorum-state


def test_quorum_state() -> None:
    assert decode_quorum_state(b'{"leaderEpoch":4}') == {"leaderEpoch": 4}
    with pytest.raises(CheckpointError) as info:
        decode_quorum_state(b'{"leaderEpoch":', "/m/quorum-state")
    assert info.value.message.startswith("Error while reading the Quorum status from the file /m/quorum-state")
    with pytest.raises(CheckpointError):
        decode_quorum_state(b"[1]", "/m/quorum-state")
    with pytest.raises(CheckpointError):
        decode_quorum_state(b"\xff", "/m/quorum-state")


def test_real_quorum_state() -> None:
    state = read_quorum_state(fixture("greenlemonT__kafka-temp/data/kafka3/__cluster_metadata-0/quorum-state"))
    assert state["leaderEpoch"] == 190 and state["leaderId"] == 1
    assert [v["voterId"] for v in state["currentVoters"]] == [1, 2, 3]
    single = read_quorum_state(fixture("greenlemonT__kafka-temp/data/kafka/__cluster_metadata-0/quorum-state"))
    assert single["currentVoters"] == [{"voterId": 1}]


# ----------------------------------------------------------------------------- meta.properties


def test_properties_syntax() -> None:
    text = (
        b"# comment\n"
        b"  ! another\n"
        b"a=1\n"
        b"b : 2\n"
        b"c 3\n"
        b"d=four \\\n"
        b"    five\n"
        b"e\\ key=x\\ty\\u0041\n"
        b"f=\n"
        b"g\n"
        b"a=override\r\n"
        b"h=caf\xe9\n"  # ISO-8859-1
    )
    assert decode_properties(text) == {
        "a": "override",
        "b": "2",
        "c": "3",
        "d": "four five",
        "e key": "x\tyA",
        "f": "",
        "g": "",
        "h": "caf\u00e9",
    }
    with pytest.raises(CheckpointError):
        decode_properties(b"a=\\u12\n")


@settings(max_examples=200)
@given(st.binary(max_size=80))
def test_properties_garbage_only_raises_our_error(data: bytes) -> None:
    try:
        decode_properties(data)
    except CheckpointError:
        pass


def test_real_meta_properties() -> None:
    kraft = read_meta_properties(fixture("greenlemonT__kafka-temp/data/kafka3/meta.properties"))
    assert kraft == {"node.id": "3", "version": "1", "cluster.id": "EpwKlK0lR6qKZW0cGwZz8w"}
    zk = read_meta_properties(fixture("William0423__kafka/kafka-logs/meta.properties"))
    assert zk == {"version": "0", "broker.id": "0"}


# ----------------------------------------------------------------------------- .kafka_cleanshutdown (§11.4)


@pytest.mark.parametrize(
    "data, epoch",
    [
        (b"", None),  # older brokers write an empty file
        (b'{"version":"0","broker_epoch":"42"}', 42),  # CleanShutdownFileHandler.write
        (b'{"broker_epoch":"42","version":"0"}', 42),
        (b'{"version":0,"brokerEpoch":7}', 7),  # the spelling in spec §11.4
        (b'{"version":"0"}', None),
        (b'{"broker_epoch":"x"}', None),
        (b"not json", None),
        (b"\xff", None),
        (b"[1]", None),
    ],
)
def test_clean_shutdown(data: bytes, epoch: int | None) -> None:
    assert decode_clean_shutdown(data) == epoch


def test_real_clean_shutdown() -> None:
    assert read_clean_shutdown(fixture("greenlemonT__kafka-temp/data/kafka3/.kafka_cleanshutdown")) is None
    assert read_clean_shutdown(fixture("William0423__kafka/kafka-logs/.kafka_cleanshutdown")) is None
