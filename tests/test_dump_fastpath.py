"""The compiled whole-batch text of a deep dump (``_speedups.format_v2_text``) against the Python path.

``kafkatool dump --deep-iteration`` (text, string decoders, no filter, no internal-topic
decoder) hands every batch to the compiled formatter first; it returns the batch line and the
record lines, or None, and then the batch takes the Python path (BatchItem -> TextRenderer).
The contract checked here, differentially against that Python path (itself checked against
kafka-dump-log's golden output in test_dump_golden and the real files):

- whatever it returns is byte for byte what the Python path prints for that batch, and its
  first/last offsets are the records' (the cross-batch non-consecutive check uses them);
- it returns None whenever the Python path raises (so every error message is today's), and
  for nothing else than the documented cases (legacy, compressed, control, count 0 or above
  2048, offsets not consecutive inside the batch, int64 overflow, more than 8 MiB of text):
  a fast path that quietly falls back too often fails here too;
- a whole dump (several batches, gaps between them, damage, trailing bytes) prints the same
  with and without it, in process and through the CLI with ``KAFKATOOL_PURE=1``, on every
  fixture and real broker file; the progress bar still advances.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kafkatool import dump as d
from kafkatool.errors import KafkaToolError
from kafkatool.record.encode import v2_batch
from kafkatool.record.records import batch_record_chunks
from kafkatool.record.speedups import functions
from kafkatool.record.compression import Codec, compress, decompress
from kafkatool.record.v2 import RecordSpec, decode_header, encode_batch, encode_record
from kafkatool.record.varint import encode_varint
from kafkatool.render.text import TextRenderer
from tests.conftest import REAL

(format_v2_text, v2_text_formatter) = functions("format_v2_text", "v2_text_formatter")

pytestmark = pytest.mark.skipif(
    format_v2_text is None, reason="compiled extension kafkatool.record._speedups (format_v2_text) is not in use"
)

DECOMPRESS_LIMIT = 8 << 20
decompress_calls: list[int] = []


def _decompress(codec: int, payload, limit: int) -> bytes:
    decompress_calls.append(codec)
    return decompress(codec, payload, max_output=limit)


#: format_v2_text plus compressed batches (what the text renderer hands the dump when the build has it)
FORMATTER = v2_text_formatter(_decompress, DECOMPRESS_LIMIT) if v2_text_formatter is not None else None
FORMATTERS = [pytest.param(format_v2_text, id="format_v2_text"),
              pytest.param(FORMATTER, id="v2_text_formatter", marks=pytest.mark.skipif(FORMATTER is None, reason="no v2_text_formatter in this build"))]

REPO = Path(__file__).resolve().parent.parent
LOG = "00000000000000000000.log"
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
MAX_RECORDS = 2048  # v2.CHUNK_RECORDS
MAX_TEXT = 8 << 20

SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# --------------------------------------------------------------------------- building batches

# Pieces that make UTF-8 interesting: a 2-byte char, an encoded surrogate (invalid in UTF-8),
# a truncated 4-byte sequence, a lone continuation byte, 0xff, a valid 4-byte char, NUL, newline.
_PIECES = [b"a", b"key-1", b"\xc3\xa9", b"\xed\xa0\x80", b"\xf0\x9f\x98", b"\x80", b"\xff", b"\xf0\x9f\x98\x80", b"\x00", b"\n", b"|"]
field_bytes = st.one_of(
    st.none(),
    st.binary(max_size=16),
    st.lists(st.sampled_from(_PIECES), max_size=6).map(b"".join),
)
header_key = st.one_of(st.binary(max_size=6), st.lists(st.sampled_from(_PIECES), max_size=3).map(b"".join))
headers = st.lists(st.tuples(header_key, st.one_of(st.none(), st.binary(max_size=4))), max_size=3)
int64 = st.one_of(st.integers(INT64_MIN, INT64_MAX), st.sampled_from([INT64_MIN, INT64_MAX, 0, -1, 1]))
int32 = st.one_of(st.integers(INT32_MIN, INT32_MAX), st.sampled_from([INT32_MIN, INT32_MAX, -1, 0]))


@st.composite
def batches(draw, max_records: int = 6):
    """One v2 batch (log overhead included), ``bytes``: mostly well formed, sometimes odd or damaged."""
    n = draw(st.integers(1, max_records))
    consecutive = draw(st.booleans())
    if consecutive:
        start = draw(st.sampled_from([0, 0, -1, 5, INT32_MAX - max_records]))
        deltas = [start + i for i in range(n)]
    else:
        deltas = draw(st.lists(int32, min_size=n, max_size=n))
    records = [
        encode_record(od, draw(st.one_of(st.integers(-5, 5), int64)), draw(field_bytes), draw(field_bytes), draw(headers),
                      attributes=draw(st.sampled_from([0, 0, 1, 0x80])))
        for od in deltas
    ]
    attributes = draw(st.sampled_from([0, 0, 0, 0x08, 0x10, 0x40, 0x08 | 0x10 | 0x40, 0x20, 0x01, 0x80, 0x100]))
    body = b"".join(records)
    codec = draw(st.sampled_from([0, 0, 0, 0, 1, 2, 3, 4]))
    if codec:
        body = compress(codec, body)
        attributes = (attributes & ~0x07) | codec
    count = n + draw(st.sampled_from([0, 0, 0, 0, 1, -1]))
    base_offset = draw(st.one_of(st.integers(0, 1 << 40), st.sampled_from([INT64_MAX, INT64_MAX - 3, INT64_MIN, -1])))
    raw = v2_batch(
        body,
        base_offset=base_offset,
        last_offset_delta=draw(st.one_of(st.just(deltas[-1]), int32)),
        base_timestamp=draw(st.one_of(st.just(1_700_000_000_000), int64)),
        max_timestamp=draw(st.one_of(st.just(1_700_000_000_123), int64)),
        attributes=attributes,
        producer_id=draw(st.sampled_from([-1, 0, 4001, INT64_MAX])),
        producer_epoch=draw(st.sampled_from([-1, 0, 3, 32767])),
        base_sequence=draw(st.sampled_from([-1, 0, 7, INT32_MAX, INT32_MAX - 1, -7, INT32_MIN])),
        partition_leader_epoch=draw(st.sampled_from([-1, 0, 12])),
        count=count,
        magic=draw(st.sampled_from([2, 2, 2, 2, 1, 3])),
    )
    flips = draw(st.lists(st.tuples(st.integers(12, len(raw) - 1), st.integers(0, 255)), max_size=3))
    if draw(st.integers(0, 3)) == 0:
        flips = []
    data = bytearray(raw)
    for at, value in flips:
        data[at] = value
    return bytes(data)


# --------------------------------------------------------------------------- the Python path


def python_text(batch, data, print_data: bool):
    """What the Python path prints for one batch: ("ok", text, offsets) or ("error", message)."""
    renderer = TextRenderer(d.DumpOptions(deep=True, print_data=print_data))
    if batch.attributes & 0x07 > 4:
        return ("error", "Unknown compression type id")  # the dump stops before its line (test_dump_edges)
    try:
        records = [r for chunk in batch_record_chunks(batch, data) for r in chunk]
    except KafkaToolError as e:
        return ("error", str(e))
    item = d.BatchItem("x", batch, records, None, batch.offset, False)
    return ("ok", renderer.batch(item), [r.offset for r in records])


def should_be_fast(batch, offsets: list[int], text: str, compressed: bool) -> bool:
    """The documented cases aside, the compiled path must take the batch (no needless fallback)."""
    if batch.magic != 2 or batch.attributes & 0x20 or not 0 < batch.count <= MAX_RECORDS:
        return False
    if batch.attributes & 0x07 and not compressed:
        return False
    if any(b != a + 1 for a, b in zip(offsets, offsets[1:])):
        return False
    if not INT64_MIN <= batch.offset + batch.last_offset_delta <= INT64_MAX:
        return False
    numbers = [int(w) for w in text.replace("\n", " ").split(" ") if w.lstrip("-").isdigit()]
    if any(not INT64_MIN <= v <= INT64_MAX for v in numbers):
        return False  # an offset or timestamp past int64 (Python prints the big int)
    return len(text.encode()) <= MAX_TEXT


def check_one(data: bytes, print_data: bool, as_view: bool = False, fmt=format_v2_text):
    batch = decode_header(data, 0, 0)
    buf = memoryview(data) if as_view else data
    got = fmt(batch, buf, print_data)
    ref = python_text(batch, data, print_data) if batch.magic >= 2 else None
    if got is None:
        if ref is not None and ref[0] == "ok":
            assert not should_be_fast(batch, ref[2], ref[1], fmt is FORMATTER), f"needless fallback for {data.hex()}"
        return "fallback"
    text, first, last = got
    assert ref is not None and ref[0] == "ok", f"compiled text for a batch the Python path rejects: {ref}"
    assert text == ref[1]
    assert (first, last) == (ref[2][0], ref[2][-1])
    assert ref[2] == list(range(first, last + 1))
    return "fast"


# --------------------------------------------------------------------------- differential: one batch


@pytest.mark.parametrize("fmt", FORMATTERS)
@SETTINGS
@given(data=batches(), print_data=st.booleans(), as_view=st.booleans())
def test_one_batch_same_text_or_fallback(fmt, data, print_data, as_view):
    check_one(data, print_data, as_view, fmt)


def test_the_generator_reaches_both_outcomes():
    """The property above is not vacuous: plenty of batches take the compiled path, plenty fall back."""
    seen = {"fast": 0, "fallback": 0, "compressed fast": 0}

    # derandomized: the same examples every run (the counts below are about the generator, not luck)
    @settings(max_examples=300, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(batches(), st.booleans())
    def probe(data, print_data):
        seen[check_one(data, print_data)] += 1
        if FORMATTER is not None and data[22] & 0x07 and check_one(data, print_data, fmt=FORMATTER) == "fast":
            seen["compressed fast"] += 1

    probe()
    assert seen["fast"] >= 30 and seen["fallback"] >= 30, seen
    assert FORMATTER is None or seen["compressed fast"] >= 2, seen


def _records(n: int, value: bytes = b"v", start: int = 0) -> bytes:
    return b"".join(encode_record(start + i, i, b"k%d" % i, value, [("h", b"1")]) for i in range(n))


def _nested_records() -> bytes:
    """Two records where the first one's length also covers the second (Python: 'expected to read')."""
    first = encode_record(0, 0, None, b"a")[1:]  # the body (its length varint is one byte)
    body = first + encode_record(1, 0, None, b"b")
    return encode_varint(len(body)) + body


def _batch(body: bytes, count: int, **kw) -> bytes:
    fields = dict(base_offset=100, last_offset_delta=count - 1, base_timestamp=1000, max_timestamp=1000 + count,
                  attributes=0, producer_id=7, producer_epoch=1, base_sequence=0, partition_leader_epoch=3, count=count)
    fields.update(kw)
    return v2_batch(body, **fields)


def test_hand_checked_text():
    """One batch whose every field was written out by hand from spec §15.3's templates."""
    body = (encode_record(0, 0, b"k", b"caf\xc3\xa9", [("h1", b"x"), (b"\xff", None)])
            + encode_record(1, 5, None, None, []))
    data = _batch(body, 2, base_offset=40, base_timestamp=1000, max_timestamp=1005, attributes=0x10,
                  producer_id=9, producer_epoch=2, base_sequence=INT32_MAX, partition_leader_epoch=4)
    batch = decode_header(data, 0, 0)
    text, first, last = format_v2_text(batch, data, True)
    assert text == (
        f"baseOffset: 40 lastOffset: 41 count: 2 baseSequence: {INT32_MAX} lastSequence: 0 producerId: 9"
        " producerEpoch: 2 partitionLeaderEpoch: 4 isTransactional: true isControl: false"
        f" deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1005 size: {len(data)} magic: 2"
        f" compresscodec: none crc: {batch.crc} isvalid: true\n"
        f"| offset: 40 CreateTime: 1000 keySize: 1 valueSize: 5 sequence: {INT32_MAX} headerKeys: [h1,\ufffd]"
        " key: k payload: caf\u00e9\n"
        "| offset: 41 CreateTime: 1005 keySize: -1 valueSize: -1 sequence: 0 headerKeys: []\n"
    )
    assert (first, last) == (40, 41)
    without = format_v2_text(batch, data, False)[0]
    assert without == text.replace(" key: k payload: caf\u00e9", "")


def test_log_append_time_and_delete_horizon():
    data = _batch(_records(3), 3, attributes=0x08 | 0x40, base_timestamp=77, max_timestamp=999)
    text = format_v2_text(decode_header(data, 0, 0), data, True)[0]
    assert " deleteHorizonMs: OptionalLong[77] " in text and " LogAppendTime: 999 size: " in text
    assert text.count(" LogAppendTime: 999 keySize: ") == 3
    check_one(data, True)


@pytest.mark.parametrize(
    "why, data, any_print_data",
    [
        ("control batch", _batch(_records(1), 1, attributes=0x20), True),
        ("gzip", _batch(_records(1), 1, attributes=0x01), True),
        ("count 0", _batch(b"", 0, last_offset_delta=0), True),
        ("count above 2048", _batch(_records(MAX_RECORDS + 1), MAX_RECORDS + 1), True),
        ("header count one short", _batch(_records(3), 2), True),
        ("header count one long", _batch(_records(3), 4), True),
        ("a gap inside the batch", _batch(_records(1) + encode_record(2, 0, None, b"x"), 2), True),
        ("offset past int64", _batch(_records(2), 2, base_offset=INT64_MAX), True),
        ("lastOffset past int64", _batch(_records(1), 1, base_offset=INT64_MAX - 1, last_offset_delta=5), True),
        ("timestamp past int64", _batch(encode_record(0, 10, None, b"x"), 1, base_timestamp=INT64_MAX), True),
        ("magic 1 header", _batch(_records(1), 1, magic=1), True),
        ("more than 8 MiB of text", _batch(_records(MAX_RECORDS, b"x" * 4200), MAX_RECORDS), False),
        ("bytes after the last record", _batch(_records(2) + b"\x00", 2), True),
        ("a truncated record", _batch(_records(2)[:-1], 2), True),
        ("a record whose length covers the next one", _batch(_nested_records(), 2), True),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_documented_fallbacks(why, data, any_print_data):
    batch = decode_header(data, 0, 0)
    assert format_v2_text(batch, data, True) is None, why
    if any_print_data:
        assert format_v2_text(batch, memoryview(data), False) is None, why
    else:  # without the payloads the text is short enough
        assert check_one(data, False) == "fast"


def test_the_largest_batch_it_takes():
    data = _batch(_records(MAX_RECORDS, b"y" * 3000), MAX_RECORDS)
    assert check_one(data, True) == "fast"


def test_bad_arguments_raise():
    data = _batch(_records(1), 1)
    with pytest.raises(TypeError):
        format_v2_text(tuple(decode_header(data, 0, 0))[:14], data, True)
    with pytest.raises(TypeError):
        format_v2_text(decode_header(data, 0, 0), data)
    with pytest.raises(TypeError):
        format_v2_text(decode_header(data, 0, 0), "not a buffer", True)
    assert format_v2_text(decode_header(data, 0, 0)._replace(count=None), data, True) is None
    assert format_v2_text(decode_header(data, 0, 0)._replace(crc=1 << 70), data, True) is None


# --------------------------------------------------------------------------- differential: whole dumps


def render_all(paths: list[str], opts: d.DumpOptions, fast: bool, batch_text=None) -> tuple[list[tuple[str, bool]], dict]:
    renderer = TextRenderer(opts)
    assert (renderer.batch_text is not None) == (opts.deep and not opts.skip_record_metadata)
    kinds: dict = {}
    out = []
    for item in d.iter_dump(d.expand_paths(paths), opts, (batch_text or renderer.batch_text) if fast else None):
        kinds[type(item).__name__] = kinds.get(type(item).__name__, 0) + 1
        out.append(renderer.render(item))
    return out, kinds


def joined(rendered: list[tuple[str, bool]]) -> tuple[str, str]:
    return "".join(t for t, e in rendered if not e), "".join(t for t, e in rendered if e)


@pytest.mark.parametrize("fmt", FORMATTERS)
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(batch_list=st.lists(batches(max_records=4), min_size=1, max_size=6),
       tail=st.sampled_from([b"", b"", b"\x00" * 5, b"\x00" * 30]), print_data=st.booleans())
def test_whole_dump_same_with_and_without(fmt, batch_list, tail, print_data):
    # consecutive base offsets by default, so that gaps between batches are the exception
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, LOG)
        with open(path, "wb") as f:
            f.write(b"".join(batch_list) + tail)
        opts = d.DumpOptions(deep=True, print_data=print_data)
        fast, kinds = render_all([path], opts, True, fmt)
        slow, _ = render_all([path], opts, False)
        assert joined(fast) == joined(slow)


def _segment(path: Path, specs: list[tuple[int, int]]) -> Path:
    """Batches of (base offset, record count), each record consecutive inside its batch."""
    path.write_bytes(b"".join(_batch(_records(n), n, base_offset=base) for base, n in specs))
    return path


def test_gaps_between_batches_are_reported_as_before(tmp_path):
    log = _segment(tmp_path / LOG, [(0, 2), (2, 1), (10, 3), (11, 2), (5, 1)])
    opts = d.DumpOptions(deep=True, print_data=True)
    fast, kinds = render_all([str(log)], opts, True)
    slow, _ = render_all([str(log)], opts, False)
    assert joined(fast) == joined(slow)
    assert kinds.get("Rendered") and not kinds.get("BatchItems")
    err = joined(fast)[1]
    assert "  12 is followed by 11" in err and "  2 is followed by 10" in err and "  12 is followed by 5" in err


def test_a_batch_between_fast_ones_keeps_its_place(tmp_path):
    """Fast, slow (gzip, a gap inside), fast: the order of the lines is the file's."""
    blobs = [
        _batch(_records(2), 2, base_offset=0),
        encode_batch([RecordSpec(2, 5, b"k", b"gz")], codec=Codec.GZIP),
        _batch(_records(1) + encode_record(3, 0, None, b"x"), 2, base_offset=3, last_offset_delta=3),
        _batch(_records(2), 2, base_offset=7),
    ]
    (tmp_path / LOG).write_bytes(b"".join(blobs))
    opts = d.DumpOptions(deep=True, print_data=True)
    fast, kinds = render_all([str(tmp_path / LOG)], opts, True)
    slow, _ = render_all([str(tmp_path / LOG)], opts, False)
    assert joined(fast) == joined(slow)
    assert kinds["Rendered"] == 2 and kinds["BatchItems"] == 1


def test_rendered_items_are_chunked_and_carry_the_file_position(tmp_path):
    log = _segment(tmp_path / LOG, [(i, 1) for i in range(200)])
    items = [i for i in d.iter_dump([str(log)], d.DumpOptions(deep=True), TextRenderer(d.DumpOptions(deep=True)).batch_text)
             if type(i) is d.Rendered]
    assert [len(i.texts) for i in items] == [64, 64, 64, 8]
    assert items[-1].end == log.stat().st_size
    assert all(a.end < b.end for a, b in zip(items, items[1:]))


def test_not_used_when_filtering_decoding_or_skipping_metadata(tmp_path):
    log = _segment(tmp_path / LOG, [(0, 3), (3, 3)])
    calls = []

    def spy(batch, data, print_data):
        calls.append(print_data)
        return format_v2_text(batch, data, print_data)

    def dump(**kw):
        calls.clear()
        list(d.iter_dump([str(log)], d.DumpOptions(**kw), spy))
        return len(calls)

    assert dump(deep=True) == 2 and calls == [False, False]
    assert dump(deep=True, print_data=True) == 2 and calls == [True, True]
    assert dump() == 0  # shallow
    assert dump(deep=True, start_offset=1) == 0
    assert dump(deep=True, end_offset=4) == 0
    assert dump(deep=True, start_time=0) == 0
    assert dump(deep=True, end_time=1 << 50) == 0
    assert dump(deep=True, decoder="offsets") == 0

    deep = d.DumpOptions(deep=True, print_data=True)
    assert TextRenderer(deep).batch_text in (format_v2_text, FORMATTER) or type(TextRenderer(deep).batch_text) is type(FORMATTER)
    assert TextRenderer(d.DumpOptions(deep=True, skip_record_metadata=True)).batch_text is None
    assert TextRenderer(deep, key_decoder="hex").batch_text is None
    assert TextRenderer(deep, value_decoder="json").batch_text is None
    assert TextRenderer(d.DumpOptions(deep=True, decoder="cluster-metadata")).batch_text is None
    assert TextRenderer(d.DumpOptions()).batch_text is None


def test_off_under_kafkatool_pure():
    code = "from kafkatool.render.text import TextRenderer; from kafkatool import dump as d; " \
           "print(TextRenderer(d.DumpOptions(deep=True)).batch_text)"
    env = {**os.environ, "PYTHONPATH": str(REPO), "KAFKATOOL_PURE": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO, check=True)
    assert out.stdout.strip() == "None"


# --------------------------------------------------------------------------- compressed batches (v2_text_formatter)

needs_formatter = pytest.mark.skipif(FORMATTER is None, reason="no v2_text_formatter in this build of the compiled extension")


@needs_formatter
@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD])
def test_compressed_batches_are_formatted_like_the_python_path(codec):
    specs = [RecordSpec(40 + i, 1000 + i, b"k%d" % i, b"caf\xc3\xa9 \xff %d" % i, [("h", b"1")]) for i in range(50)]
    data = encode_batch(specs, codec=codec, producer_id=3, producer_epoch=0, base_sequence=INT32_MAX - 10)
    decompress_calls.clear()
    assert check_one(data, True, fmt=FORMATTER) == "fast" and decompress_calls == [codec]
    assert check_one(data, False, True, fmt=FORMATTER) == "fast"
    assert format_v2_text(decode_header(data, 0, 0), data, True) is None  # the plain function leaves them alone
    text = FORMATTER(decode_header(data, 0, 0), data, True)[0]
    assert f" compresscodec: {Codec(codec).name.lower()} " in text.splitlines()[0]


@needs_formatter
def test_compressed_fallbacks_keep_todays_errors(tmp_path):
    """A corrupt stream, output above the limit, records that do not decode: None, and the dump says what it says today."""
    good = encode_batch([RecordSpec(i, i, None, b"x" * 100) for i in range(20)], codec=Codec.GZIP)
    corrupt = bytearray(good)
    corrupt[80] ^= 0xFF  # inside the deflate stream
    body = compress(Codec.LZ4, _records(3) + b"\x00\x01")  # bytes left after the last record
    trailing = _batch(body, 3, attributes=Codec.LZ4)
    for data in (bytes(corrupt), trailing):
        assert FORMATTER(decode_header(data, 0, 0), data, True) is None
    small = v2_text_formatter(_decompress, 1000)  # 2,000+ bytes decompressed: above its limit
    assert small(decode_header(good, 0, 0), good, True) is None
    assert FORMATTER(decode_header(good, 0, 0), good, True) is not None
    for i, data in enumerate((bytes(corrupt), trailing, good)):
        log = tmp_path / str(i) / LOG
        log.parent.mkdir()
        log.write_bytes(good + data + good[:30])
        opts = d.DumpOptions(deep=True, print_data=True)
        fast = joined(render_all([str(log)], opts, True, FORMATTER)[0])
        assert fast == joined(render_all([str(log)], opts, False)[0])
        if i < 2:
            assert "kafkatool: error: " in fast[1]


@needs_formatter
def test_decompress_interrupts_are_not_swallowed():
    data = encode_batch([RecordSpec(0, 0, None, b"x")], codec=Codec.GZIP)

    def interrupted(codec, payload, limit):
        raise KeyboardInterrupt

    def wrong(codec, payload, limit):
        raise ValueError("any Exception is a fallback")

    with pytest.raises(KeyboardInterrupt):
        v2_text_formatter(interrupted, 100)(decode_header(data, 0, 0), data, True)
    assert v2_text_formatter(wrong, 100)(decode_header(data, 0, 0), data, True) is None
    with pytest.raises(TypeError):
        v2_text_formatter(wrong, "100")
    with pytest.raises(TypeError):
        FORMATTER(decode_header(data, 0, 0), data)


# --------------------------------------------------------------------------- every fixture, through the CLI


def _logs() -> list[str]:
    found = sorted(str(p) for p in (REPO / "fixtures").rglob("*.log"))
    if REAL.is_dir():
        found += sorted(str(p) for p in REAL.rglob("*.log"))
    return found


def _cli(args: list[str], pure: bool) -> tuple[int, bytes, bytes]:
    env = {k: v for k, v in os.environ.items() if k not in ("KAFKATOOL_PURE", "KAFKATOOL_PURE_PYTHON")}
    env["PYTHONPATH"] = str(REPO)
    if pure:
        env["KAFKATOOL_PURE"] = "1"
    r = subprocess.run([sys.executable, "-m", "kafkatool", "dump", *args], capture_output=True, env=env, cwd=REPO)
    return r.returncode, r.stdout, r.stderr


@pytest.mark.parametrize("flags", [["--deep-iteration", "--print-data-log"], ["--deep-iteration"]])
def test_every_fixture_log_dumps_the_same_with_kafkatool_pure(flags):
    logs = _logs()
    assert len(logs) >= 10
    compiled = _cli([*flags, *logs], pure=False)
    pure = _cli([*flags, *logs], pure=True)
    assert compiled[0] == pure[0]
    assert compiled[2] == pure[2]
    assert compiled[1] == pure[1]
    # and the comparison was not vacuous: the compiled path rendered batches of these files
    opts = d.DumpOptions(deep=True, print_data="--print-data-log" in flags)
    _out, kinds = render_all(logs, opts, True)
    assert kinds.get("Rendered", 0) >= 10


def test_real_fixtures_are_compared(real):
    """The real broker files are among those compared above (skips, or fails under CI, without them)."""
    assert any(str(real) in p for p in _logs())


def test_one_file_per_run_too():
    """Each fixture alone (its own exit status and stderr), deep with data."""
    for log in _logs():
        assert _cli(["--print-data-log", log], False) == _cli(["--print-data-log", log], True), log


# --------------------------------------------------------------------------- the progress bar


def test_progress_bar_advances_over_rendered_batches(tmp_path, monkeypatch):
    from kafkatool.cli.dump import _Progress

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    one = _segment(tmp_path / "a" / LOG, [(i, 1) for i in range(300)])
    two = _segment(tmp_path / "b" / LOG, [(i, 2) for i in range(0, 40, 2)])
    targets = d.expand_paths([str(one), str(two)])
    opts = d.DumpOptions(deep=True, print_data=True)
    progress = _Progress(targets, d.FileError)
    try:
        seen = []
        for item in d.iter_dump(targets, opts, TextRenderer(opts).batch_text):
            progress.advance(item)
            if type(item) is d.Rendered:
                seen.append((item.path, progress._bar.tasks[0].completed))
    finally:
        progress.stop()
    size_one, size_two = one.stat().st_size, two.stat().st_size
    firsts = [c for p, c in seen if p == str(one)]
    assert len(firsts) == 5 and firsts == sorted(firsts) and firsts[0] > 0 and firsts[-1] == size_one
    assert [c for p, c in seen if p == str(two)][-1] == size_one + size_two
