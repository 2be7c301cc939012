"""The one v2 record parser of ``_speedups.c`` (parse_record: rec_frame, rec_fields, rec_headers)
through each of its three users, on the same hand-made records.

``decode_records`` builds tuples and raises Kafka's InvalidRecordError texts,
``decode_columns_v2`` (``RecordColumns.add_v2``) appends Arrow buffers and raises the same
errors with the columns left as they were, ``format_v2_text`` writes the dump text or returns
None (the Python path, which then raises). A rule of the record layout (spec §4.2) changed in
the parser must show in all three, so every case here is checked through all three. Records,
messages and positions are written out by hand (zig-zag varints: 0 -> 00, -1 -> 01, 1 -> 02,
2 -> 04, 3 -> 06); the pure-Python reference ``v2.decode_records`` must agree as well.
"""

from __future__ import annotations

import pytest

from kafkatool.errors import InvalidRecordError
from kafkatool.record import columns as columns_module
from kafkatool.record import v2
from kafkatool.record.columns import RecordColumns
from kafkatool.record.encode import v2_batch
from kafkatool.record.speedups import functions
from kafkatool.record.v2 import decode_header

decode_records, format_v2_text = functions("decode_records", "format_v2_text")

pytestmark = pytest.mark.skipif(
    decode_records is None or columns_module._fast_columns is None,
    reason="compiled extension kafkatool.record._speedups is not in use",
)

STRUCTURE = "Found invalid record structure"

# (records section, count, expected): expected is the list of decode_records tuples
# (attributes, timestampDelta, offsetDelta, key, value, headers), or (message, position, suppressed).
CASES = {
    # length 11: attrs 0, tsd 0, od 0, key "k", value "v", 1 header ("h", null)
    "one header": (bytes.fromhex("16 000000 026b 0276 02 0268 01"), 1, [(0, 0, 0, b"k", b"v", ((b"h", None),))]),
    # the header count equals the two bytes left, and one header takes them both
    "header count = bytes left": (bytes.fromhex("10 000000 01 01 02 00 01"), 1, [(0, 0, 0, None, None, ((b"", None),))]),
    "no headers": (bytes.fromhex("0c 000000 01 01 00"), 1, [(0, 0, 0, None, None, ())]),
    "header count -1": (bytes.fromhex("10 000000 026b 0276 01"), 1, ("Found invalid number of record headers -1", 0, False)),
    "header count 3, 2 bytes left": (
        bytes.fromhex("10 000000 01 01 06 0268"), 1,
        ("Found invalid number of record headers. 3 is larger than the remaining size of the buffer", 0, False)),
    # the count passes (2 <= 2 bytes left); the second header's key length is at the record end (byte 9)
    "header count 2, 2 bytes left": (bytes.fromhex("10 000000 01 01 04 00 01"), 1, (STRUCTURE, 9, False)),
    "null header key": (bytes.fromhex("10 000000 01 01 02 01 01"), 1, ("Invalid negative header key size -1", 0, False)),
    "header value past the end": (bytes.fromhex("10 000000 01 01 02 00 04"), 1, (STRUCTURE, 0, False)),
    "header key length too long": (bytes.fromhex("18 000000 01 01 02 ffffffffff 00"), 1,
                                   (STRUCTURE + " (Varint is too long, the most significant bit in the 5th byte is set)", 7, False)),
    "timestampDelta too long": (bytes.fromhex("1a 00 ffffffffffffffffff ff 00 00"), 1,
                                (STRUCTURE + " (Varlong is too long, most significant bit in the 10th byte is set)", 2, False)),
    "length 5": (bytes.fromhex("0a 00000001 01"), 1, (STRUCTURE, 0, False)),
    "key past the end": (bytes.fromhex("0c 000000 0c 0000"), 1, (STRUCTURE, 0, False)),
    "a byte left in the record": (bytes.fromhex("0e 000000 01 01 00 ff"), 1,
                                  ("Invalid record size: expected to read 7 bytes in record payload, but instead read 6", 0, False)),
    "length past the end": (bytes.fromhex("14 000000 01 01 00"), 1,
                            ("Invalid record size: expected 10 bytes in record payload, but instead the buffer has only 6 remaining bytes.", 0, False)),
    "one record short": (bytes.fromhex("16 000000 026b 0276 02 0268 01"), 2,
                         ("Incorrect declared batch size, premature EOF reached", 12, False)),
    # the value ends the record and the buffer: the header count's one-byte read is Python's IndexError
    "header count past the buffer": (bytes.fromhex("0c 000000 00 02 76"), 1, (STRUCTURE, 0, True)),
}


def outcome(fn, *args):
    try:
        return fn(*args)
    except InvalidRecordError as e:
        return (e.message, e.position, e.__suppress_context__)


@pytest.mark.parametrize("name", list(CASES))
def test_decode_records(name):
    data, count, expected = CASES[name]
    assert outcome(decode_records, data, 0, len(data), count) == expected
    assert outcome(v2.decode_records, data, 0, len(data), count) == expected


@pytest.mark.parametrize("name", list(CASES))
def test_decode_columns_v2(name):
    data, count, expected = CASES[name]
    cols = RecordColumns(include_headers=True)
    cols.add_v2(bytes.fromhex("16 000000 026b 0276 02 0268 01"), 1, 10, 20, -1, None)  # a row already there
    before = (tuple(bytes(b) for b in cols._buffers()), cols._counts(), cols.rows())
    got = outcome(cols.add_v2, data, count, 100, 1000, 5, None)
    if isinstance(expected, list):
        assert got is None
        assert cols.rows()[1:] == [
            (100 + od, 1000 + tsd, key, value, tuple((k.decode(), v) for k, v in headers) if headers else None, 5 + od)
            for _attrs, tsd, od, key, value, headers in expected
        ]
    else:
        assert got == expected
        assert (tuple(bytes(b) for b in cols._buffers()), cols._counts(), cols.rows()) == before


def _batch(data: bytes, count: int) -> bytes:
    return v2_batch(data, base_offset=100, last_offset_delta=count - 1, base_timestamp=1000, max_timestamp=1000,
                    attributes=0, producer_id=-1, producer_epoch=-1, base_sequence=-1, partition_leader_epoch=0,
                    count=count)


@pytest.mark.parametrize("name", list(CASES))
def test_format_v2_text(name):
    data, count, expected = CASES[name]
    entry = _batch(data, count)
    got = format_v2_text(decode_header(entry, 0, 0), entry, True)
    if isinstance(expected, list):
        lines = got[0].splitlines()[1:]
        assert lines == [
            f"| offset: {100 + od} CreateTime: {1000 + tsd} keySize: {-1 if key is None else len(key)}"
            f" valueSize: {-1 if value is None else len(value)} sequence: -1"
            f" headerKeys: [{','.join(k.decode() for k, _ in headers)}]"
            + ("" if key is None else f" key: {key.decode()}") + ("" if value is None else f" payload: {value.decode()}")
            for _attrs, tsd, od, key, value, headers in expected
        ]
    else:
        assert got is None


def test_the_one_byte_reads_may_pass_the_record_end():
    """The same record with one more byte in the buffer after the records section: the header
    count's one-byte read takes it (Python's quirk), and the record then reads one byte too many."""
    data = bytes.fromhex("0c 000000 00 02 76")
    expected = ("Invalid record size: expected to read 6 bytes in record payload, but instead read 7", 0, False)
    assert outcome(decode_records, data + b"\x00", 0, len(data), 1) == expected
    assert outcome(v2.decode_records, data + b"\x00", 0, len(data), 1) == expected
    entry = _batch(data, 1)
    assert format_v2_text(decode_header(entry, 0, 0), entry + b"\x00", True) is None
