"""kafkatool dump on the edge cases of spec §17 (A framing, B v2 content, C legacy, D codecs,
E indexes, G CLI), the beyond-kafka-dump-log options, and the other output formats."""

from __future__ import annotations

import base64
import json
import struct
from pathlib import Path

import pytest

from kafkatool.record.compression import Codec
from kafkatool.record.control import ControlType, encode_control_key
from kafkatool.record.crc import crc32c
from kafkatool.record.legacy import encode_legacy, encode_message
from kafkatool.record.v2 import RecordSpec, encode_batch

T0 = 1700000000000
LOG = "00000000000000000000.log"


def recs(n, first=0, **kw):
    return [RecordSpec(first + i, T0 + i, f"k{first + i}".encode(), f"v{first + i}".encode()) for i in range(n)]


def refix_crc(batch: bytearray) -> bytearray:
    batch[17:21] = struct.pack(">I", crc32c(bytes(batch[21:])))
    return batch


@pytest.fixture
def seg(tmp_path):
    def _write(data: bytes, name: str = LOG) -> Path:
        p = tmp_path / name
        p.write_bytes(data)
        return p

    return _write


THREE = encode_batch(recs(2)) + encode_batch(recs(2, 2)) + encode_batch(recs(2, 4))
SIZES = [len(encode_batch(recs(2)))] * 3


# ---------------------------------------------------------------- A: framing


@pytest.mark.parametrize("tail", [1, 12, 17])
def test_a1_short_tail_is_invalid_bytes(run, seg, tail):
    r = run("dump", str(seg(THREE + b"\x00" * tail)))
    assert r.code == 0
    assert r.lines[-1] == f"Found {tail} invalid bytes at the end of {LOG}"


def test_a2_partial_last_batch(run, seg):
    r = run("dump", str(seg(THREE[:-5])))
    assert sum(l.startswith("baseOffset:") for l in r.lines) == 2
    assert r.lines[-1] == f"Found {SIZES[2] - 5} invalid bytes at the end of {LOG}"


def test_a3_size_below_14_is_an_error_with_position_and_the_run_goes_on(run, seg, tmp_path):
    bad = seg(THREE + b"\x00" * 40)
    good = seg(THREE, "00000000000000000009.log")
    r = run("dump", str(bad), str(good))
    assert r.code == 1
    assert r.err == (
        f"kafkatool: error: {bad}:{len(THREE)}: Found record size 0 smaller than minimum record overhead (14) in file {bad}.\n"
    )
    assert r.out.count("baseOffset:") == 6  # earlier batches printed, next file dumped
    assert not (tmp_path / "00000000000000000000.index").exists()


def test_a4_huge_size_hides_later_batches(run, seg):
    data = bytearray(THREE)
    data[SIZES[0] + 8 : SIZES[0] + 12] = struct.pack(">i", 0x7FFFFFFF)
    r = run("dump", str(seg(bytes(data))))
    assert r.code == 0
    assert r.lines[-1] == f"Found {SIZES[1] + SIZES[2]} invalid bytes at the end of {LOG}"


def test_a5_bad_crc_is_printed_and_walk_goes_on(run, seg):
    data = bytearray(THREE)
    data[SIZES[0] + 70] ^= 1
    r = run("dump", "--deep-iteration", str(seg(bytes(data))))
    batch_lines = [l for l in r.lines if l.startswith("baseOffset:")]
    assert [l.endswith("isvalid: true") for l in batch_lines] == [True, False, True]
    assert r.code == 0


def test_a6_negative_magic(run, seg):
    data = bytearray(THREE)
    data[SIZES[0] + 16] = 0xFF
    r = run("dump", str(seg(bytes(data))))
    assert r.code == 1
    assert f":{SIZES[0]}: Invalid magic used in LegacyRecord: -1" in r.err


def test_a7_magic_3_is_parsed_as_v2(run, seg):
    data = bytearray(encode_batch(recs(1)))
    data[16] = 3
    r = run("dump", str(seg(bytes(data))))
    assert " magic: 3 " in r.lines[2] and r.lines[2].endswith("isvalid: true")


def test_a8_v2_batch_smaller_than_header(run, seg):
    small = struct.pack(">qiib", 0, 30, 0, 2) + b"\x00" * 25
    r = run("dump", str(seg(small + THREE)))
    assert r.code == 1
    assert ":0: Record batch is corrupt (the size 42 is smaller than the minimum allowed overhead 61)" in r.err


def test_a10_max_bytes(run, seg):
    p = seg(THREE)
    r = run("dump", "--max-bytes", str(SIZES[0] + SIZES[1]), str(p))
    assert sum(l.startswith("baseOffset:") for l in r.lines) == 2
    r = run("dump", "--max-bytes", str(SIZES[0] + 10), str(p))
    assert sum(l.startswith("baseOffset:") for l in r.lines) == 1
    assert "invalid bytes" not in r.out  # only printed with the default --max-bytes
    r = run("dump", "--max-bytes", "0", str(p))
    assert r.lines == [f"Dumping {p}", "Log starting offset: 0"]
    r = run("dump", "--max-bytes", "-1", str(p))
    assert r.code == 1 and "Invalid size: -1" in r.err


# ---------------------------------------------------------------- B: v2 content


def test_b11_zero_count_batch(run, seg):
    data = encode_batch([], base_offset=5, last_offset_delta=2, delete_horizon_ms=T0)
    r = run("dump", "--deep-iteration", str(seg(data)))
    assert " count: 0 " in r.lines[2]
    assert "deleteHorizonMs: OptionalLong[1700000000000]" in r.lines[2]
    assert len(r.lines) == 3


@pytest.mark.parametrize("count,message", [
    (3, "Incorrect declared batch size, premature EOF reached"),
    (1, "Incorrect declared batch size, records still remaining in file"),
    (-1, "Found invalid record count -1 in magic v2 batch"),
])
def test_b12_b13_count_mismatch_is_a_deep_error(run, seg, count, message):
    data = bytearray(encode_batch(recs(2)))
    data[57:61] = struct.pack(">i", count)
    p = seg(bytes(refix_crc(data)))
    assert run("dump", str(p)).code == 0  # shallow: not examined
    r = run("dump", "--deep-iteration", str(p))
    assert r.code == 1 and message in r.err and f"{p}:" in r.err


def test_b15_key_length_below_minus_one_is_null(run, seg):
    from kafkatool.record.varint import encode_varint

    body = b"\x00" + b"\x00" + b"\x00" + encode_varint(-5) + encode_varint(1) + b"v" + b"\x00"
    rec = encode_varint(len(body)) + body
    data = bytearray(encode_batch(recs(1)))
    data = data[:61] + rec
    data[8:12] = struct.pack(">i", len(data) - 12)
    r = run("dump", "--print-data-log", str(seg(bytes(refix_crc(data)))))
    assert "keySize: -1 valueSize: 1" in r.out and " key: " not in r.out


def test_b19_log_append_time(run, seg):
    r = run("dump", "--deep-iteration", str(seg(encode_batch(recs(3), log_append_time=T0 + 999))))
    assert " LogAppendTime: 1700000000999 " in r.lines[2]
    assert all(l.startswith("| offset:") and " LogAppendTime: 1700000000999 " in l for l in r.lines[3:])


def test_b21_sequence_wrap(run, seg):
    r = run("dump", "--deep-iteration", str(seg(encode_batch(recs(3), producer_id=1, producer_epoch=0, base_sequence=2147483647))))
    assert "baseSequence: 2147483647 lastSequence: 1 " in r.lines[2]
    assert [l.split("sequence: ")[1].split()[0] for l in r.lines[3:]] == ["2147483647", "0", "1"]


def test_b23_unknown_codec(run, seg):
    data = bytearray(encode_batch(recs(1)))
    data[22] |= 5
    r = run("dump", str(seg(bytes(refix_crc(data)))))
    assert r.code == 1 and ":22: Unknown compression type id: 5" in r.err


@pytest.mark.parametrize("deep", [False, True])
def test_b23_unknown_codec_legacy_names_the_attributes_byte(run, seg, deep):
    # A v1 message built by hand (§5.1): offset 7, size 22, CRC-32 from the magic, magic 1,
    # attributes 6 (codec id 6), timestamp, null key, null value. The attributes sit at
    # 8 (offset) + 4 (size) + 4 (crc) + 1 (magic) = byte 17.
    import zlib

    body = struct.pack(">bbqii", 1, 6, T0, -1, -1)
    entry = struct.pack(">qiI", 7, 4 + len(body), zlib.crc32(body)) + body
    r = run("dump", *(["--deep-iteration"] if deep else []), str(seg(entry)))
    assert r.code == 1 and ":17: Unknown compression type id: 6" in r.err


def test_empty_key_prints_two_spaces(run, seg):
    r = run("dump", "--print-data-log", str(seg(encode_batch([RecordSpec(0, T0, b"", b"v")]))))
    assert r.lines[3].endswith("headerKeys: [] key:  payload: v")


def test_payload_with_invalid_utf8_and_newline(run, seg):
    r = run("dump", "--print-data-log", str(seg(encode_batch([RecordSpec(0, T0, None, b"a\nb\xff")]))))
    assert r.out.endswith("payload: a\nb\ufffd\n")


def test_unknown_control_type_and_leader_change(run, seg):
    data = encode_batch([RecordSpec(0, T0, encode_control_key(9), b"")], is_control=True) + encode_batch(
        [RecordSpec(1, T0, encode_control_key(ControlType.LEADER_CHANGE), b"\x00")], is_control=True
    )
    r = run("dump", "--print-data-log", str(seg(data)))
    assert r.lines[3].endswith(" controlType: UNKNOWN(9)")
    assert r.lines[5].endswith(" controlType: LEADER_CHANGE(2)")
    r = run("dump", "--print-data-log", "--skip-record-metadata", str(seg(data)))
    assert r.lines[3] == "" and r.lines[5] == ""


def test_short_control_key_is_an_error_unless_metadata_skipped(run, seg):
    p = seg(encode_batch([RecordSpec(0, T0, b"\x00", b"")], is_control=True))
    r = run("dump", "--deep-iteration", str(p))
    assert r.code == 1 and "Must have at least 4 bytes, but found only 1" in r.err
    assert run("dump", "--deep-iteration", "--skip-record-metadata", str(p)).code == 0


# ---------------------------------------------------------------- C: legacy


def test_c25_v1_wrapper_offset_zero(run, seg):
    data = bytearray(encode_legacy([RecordSpec(10 + i, T0, None, b"x") for i in range(3)], magic=1, codec=Codec.GZIP))
    data[0:8] = struct.pack(">q", 0)  # librdkafka quirk: inner relative offsets used as they are
    r = run("dump", "--deep-iteration", str(seg(bytes(data))))
    assert [l.split()[2] for l in r.lines[3:]] == ["0", "1", "2"]


def test_c25_v1_wrapper_offset_below_last_inner(run, seg):
    data = bytearray(encode_legacy([RecordSpec(10 + i, T0, None, b"x") for i in range(3)], magic=1, codec=Codec.GZIP))
    data[0:8] = struct.pack(">q", 1)
    r = run("dump", "--deep-iteration", str(seg(bytes(data))))
    assert r.code == 1 and "wrapper offset '1' is less than the last inner message offset '2'" in r.err


def test_c26_v0_wrapper_absolute_offsets(run, seg):
    data = encode_legacy([RecordSpec(7 + 2 * i, T0, None, b"x") for i in range(3)], magic=0, codec=Codec.SNAPPY)
    r = run("dump", "--deep-iteration", str(seg(data)))
    assert r.lines[2].startswith("offset: 11 position: 0 NoTimestampType: -1 ")
    assert [l.split()[2] for l in r.lines[3:]] == ["7", "9", "11"]
    assert all("NoTimestampType: -1" in l and l.endswith("}") for l in r.lines[3:])


def test_c27_v1_log_append_time_wrapper(run, seg):
    data = encode_legacy(recs(2), magic=1, codec=Codec.LZ4, log_append_time=T0 + 77)
    r = run("dump", "--deep-iteration", str(seg(data)))
    assert all(" LogAppendTime: 1700000000077 " in l for l in r.lines[2:])


def test_c29_zstd_legacy_wrapper(run, seg):
    inner = encode_message(0, 1, T0, None, b"x")
    from kafkatool.record.compression import compress

    data = encode_message(0, 1, T0, None, compress(Codec.ZSTD, inner), attributes=Codec.ZSTD)
    r = run("dump", "--deep-iteration", str(seg(data)))
    assert "Invalid wrapper compressionType found in legacy deep record iterator 1" in r.err


def test_c30_inner_crc_visible_only_deep(run, seg):
    from kafkatool.record.compression import compress

    inner = bytearray(encode_message(0, 1, T0, None, b"hello"))
    inner[-1] ^= 1  # bad inner CRC, good outer CRC around it
    data = encode_message(0, 1, T0, None, compress(Codec.GZIP, bytes(inner), magic=1), attributes=Codec.GZIP)
    r = run("dump", "--deep-iteration", str(seg(data)))
    assert r.lines[2].endswith("isvalid: true")
    assert "isValid: false" in r.lines[3]


# ---------------------------------------------------------------- D: codecs


def test_d32_lz4_magic0_header_checksum_either_way(run, seg):
    data = bytearray(encode_legacy(recs(2), magic=0, codec=Codec.LZ4))
    r = run("dump", "--deep-iteration", str(seg(bytes(data))))
    assert r.code == 0 and r.out.count("| offset:") == 2
    i = bytes(data).index(bytes.fromhex("04224d186040"))
    assert data[i + 6] == 0x1A  # the KIP-57 broken checksum
    data[i + 6] = 0x82  # the correct one: magic 0 readers skip the byte
    from kafkatool.record.crc import crc32

    data[12:16] = struct.pack(">I", crc32(bytes(data[16:])))
    assert run("dump", "--deep-iteration", str(seg(bytes(data)))).code == 0


def test_d32_lz4_magic2_broken_checksum_fails(run, seg):
    data = bytearray(encode_batch(recs(2), codec=Codec.LZ4))
    assert data[61:68] == bytes.fromhex("04224d18604082")
    data[67] = 0x1A
    r = run("dump", "--deep-iteration", str(seg(bytes(refix_crc(data)))))
    assert r.code == 1 and "Stream frame descriptor corrupted" in r.err and ":61:" in r.err


def test_d34_raw_snappy_accepted(run, seg):
    import snappy

    from kafkatool.record.v2 import encode_record

    body = b"".join(encode_record(i, 0, b"k", b"v") for i in range(2))
    data = bytearray(encode_batch(recs(2), codec=Codec.SNAPPY))
    data = data[:61] + snappy.compress(body)
    data[8:12] = struct.pack(">i", len(data) - 12)
    r = run("dump", "--deep-iteration", str(seg(bytes(refix_crc(data)))))
    assert r.code == 0 and r.out.count("| offset:") == 2


def test_xerial_snappy_header(seg):
    data = encode_batch(recs(2), codec=Codec.SNAPPY)
    assert data[61:77] == bytes.fromhex("82534e41505059000000000100000001")


# ---------------------------------------------------------------- E: indexes


@pytest.fixture
def part(tmp_path):
    p = tmp_path / "t-0"
    p.mkdir()
    (p / LOG).write_bytes(THREE)
    return p


def test_e36_untrimmed_index_stops_at_zero_tail(run, part):
    entries = struct.pack(">ii", 3, SIZES[0]) + b"\x00" * 8 * 1000
    (part / "00000000000000000000.index").write_bytes(entries)
    r = run("dump", str(part / "00000000000000000000.index"))
    assert r.lines[1:] == [f"offset: 3 position: {SIZES[0]}"]
    assert r.err == ""


def test_e36_all_zero_index_prints_one_bogus_line(run, part):
    (part / "00000000000000000000.index").write_bytes(b"\x00" * 80)
    r = run("dump", str(part / "00000000000000000000.index"))
    assert r.lines[1:] == ["offset: 0 position: 0"]
    assert "Index offset: 0, log offset: 1" in r.err


def test_e37_sanity_check_untrimmed(run, part):
    (part / "00000000000000000000.index").write_bytes(struct.pack(">ii", 3, SIZES[0]) + b"\x00" * 16)
    r = run("dump", "--index-sanity-check", str(part / "00000000000000000000.index"))
    assert r.lines[-1].endswith("passed sanity check.") and r.code == 0
    (part / "00000000000000000000.timeindex").write_bytes(struct.pack(">qi", T0 + 3, 3) + b"\x00" * 24)
    r = run("dump", "--index-sanity-check", str(part / "00000000000000000000.timeindex"))
    assert r.code == 1
    assert "has non-zero size but the last timestamp is 0 which is less than the first timestamp" in r.err


def test_e38_five_byte_index_is_empty(run, part):
    (part / "00000000000000000000.index").write_bytes(b"\x00" * 5)
    r = run("dump", "--index-sanity-check", str(part / "00000000000000000000.index"))
    assert r.lines[-1] == f"{part}/00000000000000000000.index is empty."


def test_e40_index_entry_past_eof(run, part):
    (part / "00000000000000000000.index").write_bytes(struct.pack(">ii", 3, 100000))
    r = run("dump", str(part / "00000000000000000000.index"))
    assert r.code == 1 and "past the end of the log" in r.err


def test_e46_timeindex_without_index_creates_nothing(run, part):
    (part / "00000000000000000000.timeindex").write_bytes(struct.pack(">qi", T0 + 5, 5))
    before = sorted(p.name for p in part.iterdir())
    r = run("dump", str(part / "00000000000000000000.timeindex"))
    # the entries print (Kafka's would too, after creating the .index); the skipped check is said
    assert r.code == 0 and r.lines[1:] == [f"timestamp: {T0 + 5} offset: 5"]
    assert "00000000000000000000.index is missing" in r.err and "skipped" in r.err
    assert sorted(p.name for p in part.iterdir()) == before


def test_index_without_log(run, tmp_path):
    (tmp_path / "00000000000000000000.index").write_bytes(b"")
    r = run("dump", str(tmp_path / "00000000000000000000.index"))
    assert r.code == 1 and "00000000000000000000.log is missing" in r.err


# ---------------------------------------------------------------- G: CLI


def test_g51_name_without_dot_goes_on(run, part, tmp_path):
    (tmp_path / "somefile").write_text("x")
    r = run("dump", "--files", f"{tmp_path}/somefile,{part}/{LOG}")
    assert r.code == 1 and "has no suffix" in r.err
    assert r.out.count("baseOffset:") == 3


def test_g53_empty_middle_entry_and_trailing_comma(run, part):
    r = run("dump", "--files", f"{part}/{LOG},,{part}/{LOG},")
    assert r.code == 1 and "empty file name" in r.err
    assert r.out.count("Dumping ") == 3 and r.out.count("baseOffset:") == 6


def test_missing_files_argument(run):
    r = run("dump")
    assert r.code == 2 and 'Missing required argument "[files]"' in r.err


def test_java_decoder_class_compat(run, part):
    r = run("dump", "--value-decoder-class", "org.apache.kafka.tools.api.StringDecoder", f"{part}/{LOG}")
    assert "payload: v0" in r.out
    r = run("dump", "--value-decoder-class", "com.example.MyDecoder", f"{part}/{LOG}")
    assert r.code == 2


def test_path_normalisation(run, part):
    r = run("dump", f"{part}//{LOG}")
    assert r.lines[0] == f"Dumping {part}/{LOG}"


def test_directory_dump_orders_segments(run, part):
    (part / "00000000000000000000.index").write_bytes(b"")
    (part / "00000000000000000006.snapshot").write_bytes(bytes.fromhex("0001") + struct.pack(">I", crc32c(b"\0\0\0\0")) + b"\0\0\0\0")
    (part / "leader-epoch-checkpoint").write_text("0\n1\n0 0\n")
    r = run("dump", str(part))
    assert [l.split("/")[-1] for l in r.lines if l.startswith("Dumping")] == [
        LOG, "00000000000000000000.index", "00000000000000000006.snapshot", "leader-epoch-checkpoint"
    ]
    assert "epoch: 0 startOffset: 0" in r.lines
    assert r.code == 0


# ---------------------------------------------------------------- beyond kafka-dump-log


def test_jsonl(run, seg):
    data = encode_batch([RecordSpec(7, T0, None, b"\x00\x01", [("h", b"x"), ("n", None)])], producer_id=9,
                        producer_epoch=1, base_sequence=4, is_transactional=True)
    data += encode_batch([RecordSpec(8, T0, encode_control_key(ControlType.ABORT), b"\x00\x00\x00\x00\x00\x03")],
                         producer_id=9, producer_epoch=1, is_transactional=True, is_control=True)
    r = run("dump", "--deep-iteration", "--format", "jsonl", str(seg(data)))
    objs = [json.loads(l) for l in r.lines]
    assert [o["type"] for o in objs] == ["file", "batch", "record", "batch", "record"]
    b = objs[1]
    assert b["baseOffset"] == 7 and b["lastOffset"] == 7 and b["compresscodec"] == "none"
    assert b["timestampType"] == "CreateTime" and b["isTransactional"] is True and b["isValid"] is True
    assert b["crc"] >= 0 and b["producerId"] == 9 and b["baseSequence"] == 4 and b["lastSequence"] == 4
    rec = objs[2]
    assert rec["key"] is None and base64.b64decode(rec["value"]) == b"\x00\x01"
    assert rec["headers"] == [{"key": "h", "value": base64.b64encode(b"x").decode()}, {"key": "n", "value": None}]
    assert rec["sequence"] == 4 and rec["batchPosition"] == 0
    assert objs[4]["controlType"] == "ABORT" and objs[4]["coordinatorEpoch"] == 3


def test_jsonl_legacy_wrapper_base_offset(run, seg):
    data = encode_legacy(recs(3, 10), magic=1, codec=Codec.GZIP)
    r = run("dump", "--format", "jsonl", "--deep-iteration", str(seg(data)))
    b = json.loads(r.lines[1])
    assert b["baseOffset"] == 10 and b["lastOffset"] == 12 and b["count"] is None


@pytest.mark.parametrize("decoder,expected", [
    ("hex", "7b2261223a317d"),
    ("base64", "eyJhIjoxfQ=="),
    ("json", '{"a":1}'),
    ("string", '{"a":1}'),
])
def test_value_decoders(run, seg, decoder, expected):
    r = run("dump", "--value-decoder", decoder, str(seg(encode_batch([RecordSpec(0, T0, None, b'{"a":1}')]))))
    assert r.lines[3].endswith(f" payload: {expected}")


def test_json_decoder_fallback(run, seg):
    r = run("dump", "--value-decoder", "json", str(seg(encode_batch([RecordSpec(0, T0, None, b"\xffnot json")]))))
    assert r.lines[3].endswith(" payload: base64:" + base64.b64encode(b"\xffnot json").decode())


def test_table_format(run, seg):
    r = run("dump", "--format", "table", "--print-data-log", str(seg(encode_batch([RecordSpec(0, T0, b"k", b"[red]x")]))))
    assert r.code == 0 and "[red]x" in r.out and "batch @0" in r.out
    r = run("dump", "--format", "table", str(seg(encode_batch([RecordSpec(0, T0, b"k", b"x")]))))
    assert r.code == 0 and "offsets" in r.out and "0..0" in r.out


def _indexed_partition(tmp_path, n_batches=40):
    from kafkatool.segment.index import IndexBuilder
    from kafkatool.segment.walk import SegmentWalker

    p = tmp_path / "s-0"
    p.mkdir()
    data = b"".join(encode_batch([RecordSpec(100 + 5 * i + j, T0 + 100 * i + j, b"k", b"x" * 50) for j in range(5)])
                    for i in range(n_batches))
    (p / "00000000000000000100.log").write_bytes(data)
    b = IndexBuilder(100, index_interval_bytes=512)
    for batch, _ in SegmentWalker(data):
        b.add_batch(batch.position, batch.size, batch.last_offset, batch.max_timestamp)
    oidx, tidx = b.finish()
    (p / "00000000000000000100.index").write_bytes(oidx)
    (p / "00000000000000000100.timeindex").write_bytes(tidx)
    return p / "00000000000000000100.log"


def test_start_end_offset_seek(run, tmp_path):
    log = _indexed_partition(tmp_path)
    r = run("dump", "--deep-iteration", "--start-offset", "152", "--end-offset", "158", str(log))
    offsets = [int(l.split()[2]) for l in r.lines if l.startswith("| offset:")]
    assert offsets == list(range(152, 159))
    first_batch = [l for l in r.lines if l.startswith("baseOffset:")][0]
    assert first_batch.startswith("baseOffset: 150 ") and " position: 0 " not in first_batch


def test_start_offset_without_index_scans(run, tmp_path):
    log = _indexed_partition(tmp_path)
    (log.parent / "00000000000000000100.index").unlink()
    r = run("dump", "--deep-iteration", "--start-offset", "152", "--end-offset", "153", str(log))
    assert [int(l.split()[2]) for l in r.lines if l.startswith("| offset:")] == [152, 153]


def test_start_end_time(run, tmp_path):
    log = _indexed_partition(tmp_path)
    r = run("dump", "--deep-iteration", "--start-time", str(T0 + 1000), "--end-time", str(T0 + 1102), str(log))
    ts = [int(l.split()[4]) for l in r.lines if l.startswith("| offset:")]
    assert ts == [T0 + 1000 + j for j in range(5)] + [T0 + 1100, T0 + 1101, T0 + 1102]
    r = run("dump", "--deep-iteration", "--start-time", "2023-11-14T22:13:21Z", str(log))
    assert [l for l in r.lines if l.startswith("| offset:")][0].split()[4] == str(T0 + 1000)
