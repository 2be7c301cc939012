"""Differential tests: the C ``decode_records`` against the pure-Python reference.

Both must return equal lists, or raise the same exception class with the same
message and position, for every input with ``0 <= pos, end <= len(buf)``.
"""

from __future__ import annotations

import gc
import sys
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkatool.errors import InvalidRecordError
from kafkatool.record import v2
from kafkatool.record.v2 import encode_record
from kafkatool.record.varint import encode_varint, encode_varlong

try:
    from kafkatool.record import _speedups
except ImportError:  # pragma: no cover - depends on the build
    _speedups = None

pytestmark = pytest.mark.skipif(_speedups is None, reason="C extension kafkatool.record._speedups is not built")

py_decode = v2.decode_records
c_decode = _speedups.decode_records if _speedups is not None else None

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def outcome(fn, buf, pos, end, count):
    try:
        return ("ok", fn(buf, pos, end, count))
    except InvalidRecordError as e:
        return ("invalid", type(e), e.message, e.position, str(e), e.__cause__, e.__suppress_context__)
    except Exception as e:  # anything else must match too
        return ("other", type(e), str(e))


def same(buf, pos, end, count):
    """Assert both decoders agree; return the common outcome."""
    expected = outcome(py_decode, buf, pos, end, count)
    for b in (buf, bytearray(buf), memoryview(buf)):
        got = outcome(c_decode, b, pos, end, count)
        assert got == expected, (bytes(buf).hex(), pos, end, count)
    # the same bytes seen through a memoryview slice that starts elsewhere
    pad = b"\xff\x80" + bytes(buf) + b"\x81"
    got = outcome(c_decode, memoryview(pad)[2 : 2 + len(buf)], pos, end, count)
    assert got == expected
    return expected


# --------------------------------------------------------------------------- strategies

int32 = st.one_of(st.integers(-70, 70), st.integers(-(2**31), 2**31 - 1))
int64 = st.one_of(st.integers(-70, 70), st.integers(-(2**31), 2**31), st.integers(-(2**63), 2**63 - 1))
small_bytes = st.binary(max_size=24)
headers = st.lists(st.tuples(st.binary(max_size=8), st.none() | st.binary(max_size=8)), max_size=4)
valid_record = st.tuples(int32, int64, st.none() | small_bytes, st.none() | small_bytes, headers, st.integers(0, 255))


def encode_all(recs):
    return b"".join(encode_record(od, tsd, k, v, h, a) for (od, tsd, k, v, h, a) in recs)


def expected_tuples(recs):
    return [(a, tsd, od, k, v, tuple((bytes(hk), hv) for hk, hv in h)) for (od, tsd, k, v, h, a) in recs]


def padded_varint(raw: int, nbytes: int) -> bytes:
    """``raw`` (unsigned, already zig-zagged) as exactly ``nbytes`` base-128 groups (overlong allowed)."""
    out = bytearray()
    for j in range(nbytes):
        group = raw & 0x7F
        raw >>= 7
        out.append(group | (0x80 if j < nbytes - 1 else 0))
    return bytes(out)


@st.composite
def raw_varint(draw, long=False):
    """A varint field: usually canonical, sometimes overlong, over-wide or unterminated."""
    kind = draw(st.sampled_from(["small", "small", "small", "any", "padded", "wide", "unterminated"]))
    enc = encode_varlong if long else encode_varint
    limit = 10 if long else 5
    if kind == "small":
        return enc(draw(st.integers(-8, 40)))
    if kind == "any":
        return enc(draw(int64 if long else int32))
    if kind == "padded":  # 1..limit+1 bytes, possibly with junk high bits in the last group
        n = draw(st.integers(1, limit + 1))
        return padded_varint(draw(st.integers(0, 2 ** (7 * n) - 1)), n)
    if kind == "wide":  # the last allowed byte carries bits that do not fit
        return padded_varint(draw(st.integers(0, 2 ** (7 * limit) - 1)), limit)
    return bytes([0x80 | draw(st.integers(0, 127)) for _ in range(draw(st.integers(1, limit + 1)))])


@st.composite
def raw_record(draw):
    """A record whose fields may contradict each other (lengths, counts, sizes)."""
    body = bytearray([draw(st.integers(0, 255))])
    body += draw(raw_varint(long=True))
    body += draw(raw_varint())
    for _ in range(2):  # key, value
        lv = draw(raw_varint())
        body += lv
        body += draw(small_bytes)
    hc = draw(st.sampled_from([None, 0, 1, 2, 3, -1, -3, 50]))
    if hc is None:
        body += draw(raw_varint())
    else:
        body += encode_varint(hc)
    for _ in range(draw(st.integers(0, 3))):
        body += draw(raw_varint())
        body += draw(st.binary(max_size=6))
    if draw(st.booleans()):
        body = bytearray(draw(st.binary(max_size=12)))
    length = len(body) + draw(st.sampled_from([0, 0, 0, 0, -1, 1, -3, 3, -len(body) - 1, -len(body) - 5]))
    if draw(st.integers(0, 9)) == 0:
        prefix = draw(raw_varint())
    else:
        prefix = encode_varint(length)
    return bytes(prefix + body)


@st.composite
def layout(draw, payload):
    """Surround ``payload`` with junk; choose pos/end/count near the natural values."""
    pre = draw(st.binary(max_size=4))
    post = draw(st.binary(max_size=4))
    buf = pre + payload + post
    pos = len(pre) if draw(st.integers(0, 4)) else draw(st.integers(0, len(buf)))
    end = len(pre) + len(payload) if draw(st.integers(0, 4)) else draw(st.integers(0, len(buf)))
    return buf, pos, end


# --------------------------------------------------------------------------- properties


@SETTINGS
@given(st.lists(valid_record, max_size=8), st.binary(max_size=4), st.binary(max_size=4))
def test_valid_records_decode_identically(recs, pre, post):
    payload = encode_all(recs)
    buf = pre + payload + post
    res = same(buf, len(pre), len(pre) + len(payload), len(recs))
    assert res == ("ok", expected_tuples(recs))


@SETTINGS
@given(st.lists(valid_record, min_size=1, max_size=5), st.data())
def test_wrong_count_truncation_and_trailing_bytes(recs, data):
    payload = encode_all(recs)
    buf, pos, end = data.draw(layout(payload))
    count = len(recs) + data.draw(st.integers(-2, 2))
    same(buf, pos, end, count)


@SETTINGS
@given(st.lists(valid_record, min_size=1, max_size=4), st.data())
def test_mutated_records(recs, data):
    buf = bytearray(encode_all(recs))
    for _ in range(data.draw(st.integers(1, 4))):
        op = data.draw(st.sampled_from(["set", "set", "insert", "delete", "truncate", "ff"]))
        at = data.draw(st.integers(0, max(len(buf) - 1, 0)))
        if op == "set" and buf:
            buf[at] = data.draw(st.integers(0, 255))
        elif op == "insert":
            buf[at:at] = data.draw(st.binary(min_size=1, max_size=3))
        elif op == "delete" and buf:
            del buf[at : at + data.draw(st.integers(1, 3))]
        elif op == "truncate":
            del buf[at:]
        elif op == "ff":
            buf[at:at] = b"\xff" * data.draw(st.integers(1, 11))
    buf = bytes(buf)
    end = len(buf) if data.draw(st.integers(0, 3)) else data.draw(st.integers(0, len(buf)))
    same(buf, 0, end, len(recs) + data.draw(st.sampled_from([0, 0, 0, 1, -1])))


@SETTINGS
@given(st.lists(raw_record(), min_size=1, max_size=3), st.data())
def test_inconsistent_record_fields(recs, data):
    payload = b"".join(recs)
    buf, pos, end = data.draw(layout(payload))
    same(buf, pos, end, len(recs) + data.draw(st.sampled_from([0, 0, 0, 1, -1])))


@SETTINGS
@given(st.binary(max_size=64), st.data())
def test_random_bytes(buf, data):
    pos = data.draw(st.integers(0, len(buf)))
    end = data.draw(st.integers(0, len(buf)))
    same(buf, pos, end, data.draw(st.integers(-3, 6)))


def kind_of(fn, buf, pos, end, count):
    try:
        fn(buf, pos, end, count)
    except InvalidRecordError as e:
        return e.message, e.kind
    return None


@SETTINGS
@given(st.lists(raw_record(), min_size=1, max_size=3), st.data())
def test_errors_name_the_same_kind(recs, data):
    """The C decoder's errors carry the kind the Python reference gives them (verify reports it)."""
    buf = b"".join(recs)
    count = data.draw(st.integers(-2, len(recs) + 2))
    assert kind_of(c_decode, buf, 0, len(buf), count) == kind_of(py_decode, buf, 0, len(buf), count)


@pytest.mark.parametrize(
    "buf, count, message",
    [
        (b"", 1, "Incorrect declared batch size, premature EOF reached"),
        (b"", -1, "Found invalid record count -1 in magic v2 batch"),
        (encode_record(0, 0, None, b"v") + b"\x00", 1, "Incorrect declared batch size, records still remaining in file"),
    ],
)
def test_record_count_errors_are_record_count_mismatch(buf, count, message):
    assert kind_of(c_decode, buf, 0, len(buf), count) == (message, "record_count_mismatch")
    assert kind_of(py_decode, buf, 0, len(buf), count) == (message, "record_count_mismatch")


# --------------------------------------------------------------------------- targeted cases


def rec_body(*parts: bytes) -> bytes:
    body = b"".join(parts)
    return encode_varint(len(body)) + body


V = encode_varint


@pytest.mark.parametrize(
    "buf,count",
    [
        (b"", 0),
        (b"", 1),
        (b"\x00", 0),
        (b"\x00", 1),  # length 0 < 6
        (b"\x01", 1),  # length -1
        (b"\x03", 1),  # length -2
        (b"\x80\x80\x80\x80\x80", 1),  # length varint too long
        (b"\x80\x80\x80\x80", 1),  # length varint unterminated
        (b"\xfe\xff\xff\xff\x0f", 1),  # length 2**31-1
        (b"\xfe\xff\xff\xff\x7f" + bytes(20), 1),  # 5th byte bits 4-6 ignored
        (rec_body(b"\x00", V(0), V(0), V(-1), V(-1), V(0)), 1),
        (rec_body(b"\x00", V(0), V(0), V(-5), V(-9), V(0)), 1),  # negative lengths < -1 are null
        (rec_body(b"\x00", V(0), V(0), V(-1), V(-1), V(-2)), 1),  # negative header count
        (rec_body(b"\x00", V(0), V(0), V(-1), V(-1), V(3)), 1),  # header count > remaining
        (rec_body(b"\x00", V(0), V(0), V(-1), V(-1), V(1), V(-2), V(0)), 1),  # negative hkl
        (rec_body(b"\x00", V(0), V(0), V(-1), V(-1), V(1), V(0), V(-3)), 1),  # null header value
        (rec_body(b"\x00", V(0), V(0), V(-1), V(-1), V(1), V(5), V(0)), 1),  # hkl beyond record
        (rec_body(b"\x00", V(0), V(0), V(-1), V(-1), V(1), V(0), V(4)), 1),  # hvl beyond record
        (rec_body(b"\x00", V(0), V(0), V(-1), V(-1), V(1), V(0)), 1),  # header value missing
        (rec_body(b"\x00", V(0), V(0), V(-1), V(-1), V(1), b"\x80\x80\x80\x80\x80\x00"), 1),
        (rec_body(b"\x00", V(0), V(0), V(9), b"ab", V(-1), V(0)), 1),  # key beyond record
        (rec_body(b"\x00", V(0), V(0), V(-1), V(9), b"ab", V(0)), 1),  # value beyond record
        (rec_body(b"\x00", V(0), V(0), V(-1), V(-1), V(0), b"xx"), 1),  # trailing record bytes
        (rec_body(b"\x00", b"\x80" * 9 + b"\x01", V(0), V(-1), V(-1), V(0)), 1),  # 10-byte varlong
        (rec_body(b"\x00", b"\x80" * 9 + b"\x7f", V(0), V(-1), V(-1), V(0)), 1),  # 10th byte high bits
        (rec_body(b"\x00", b"\x80" * 10 + b"\x01", V(0), V(-1), V(-1), V(0)), 1),  # varlong too long
        (rec_body(b"\x00", V(0), b"\x80\x80\x80\x80\x80\x01", V(-1), V(-1), V(0)), 1),  # varint too long
        (rec_body(b"\x00", V(0), b"\x80\x80\x80\x80\x0f", V(-1), V(-1), V(0)), 1),  # 5th byte top-ish bits
        # the timestamp varlong eats the record: later one-byte reads run past its end
        (V(6) + b"\x00" + b"\x80\x80\x80\x80\x00", 1),
        (V(6) + b"\x00" + b"\x80\x80\x80\x80\x00" + b"\x01\x01\x01\x00", 1),
        (V(6) + b"\x00" + b"\x80\x80\x80\x80\x00" + b"\x01\x01\x01\x00", 2),
        (V(6) + b"\x00" + b"\x80\x80\x80\x80\x00" + b"\x01\x80", 1),
        (V(6) + b"\x00" + b"\x80\x80\x80\x80\x00" + b"\x01\x01\x01\x02", 1),
        (V(6) + b"\x00" + b"\x80\x80\x80\x00" + b"\x00\x00\x00", 1),
        (rec_body(b"\x00", V(0), V(0), V(-1), V(-1), V(0)) * 3, 2),  # records remaining
        (rec_body(b"\x00", V(0), V(0), V(-1), V(-1), V(0)) * 3, 4),  # premature EOF
        (rec_body(b"\x00", V(0), V(0), V(-1), V(-1), V(0)) * 3, 3),
        (rec_body(b"\x00", V(0), V(0), V(-1), V(-1), V(0)), -1),
        (rec_body(b"\x00", V(0), V(0), V(-1), V(-1), V(0)), -(2**80)),
        (rec_body(b"\x00", V(0), V(0), V(-1), V(-1), V(0)), 2**80),
    ],
)
def test_edge_cases(buf, count):
    same(buf, 0, len(buf), count)
    for end in range(len(buf)):  # every truncation, too
        same(buf, 0, end, count)
    for pos in range(1, len(buf) + 1):
        same(buf, pos, len(buf), count)


def test_end_before_pos_is_an_invalid_record_error_like_python():
    buf = rec_body(b"\x00", V(0), V(0), V(-1), V(-1), V(0)) * 2
    for count in (0, 1, 2):
        assert same(buf, 5, 2, count)[0] == "invalid"


def test_count_is_checked_first_with_pos_as_given():
    for pos in (0, -7, 10**30, "x"):
        assert outcome(c_decode, b"", pos, 0, -3) == outcome(py_decode, b"", pos, 0, -3)
    e = outcome(c_decode, b"", 4, 0, -2)
    assert e[2:4] == ("Found invalid record count -2 in magic v2 batch", 4)
    # f"{count}" formatting, even for a non-int count
    assert outcome(c_decode, b"", 0, 0, -1.5) == outcome(py_decode, b"", 0, 0, -1.5)


@pytest.mark.parametrize("pos,end", [(-1, 0), (0, -1), (0, 9), (9, 9), (10**30, 0), (0, 10**30), (-(10**30), 0)])
def test_out_of_range_arguments_raise_value_error(pos, end):
    with pytest.raises(ValueError):
        c_decode(bytes(8), pos, end, 1)
    with pytest.raises(ValueError):
        c_decode(bytes(8), pos, end, 0)


def test_argument_handling():
    buf = rec_body(b"\x00", V(0), V(0), V(-1), V(-1), V(0))
    assert c_decode(buf=buf, pos=0, end=len(buf), count=1) == py_decode(buf, 0, len(buf), 1)
    assert c_decode(buf, 0, count=1, end=len(buf)) == py_decode(buf, 0, len(buf), 1)
    for bad in [(), (buf, 0, 1), (buf, 0, 1, 1, 1)]:
        with pytest.raises(TypeError):
            c_decode(*bad)
    with pytest.raises(TypeError):
        c_decode(buf, 0, len(buf), 1, pos=0)
    with pytest.raises(TypeError):
        c_decode(buf, 0, len(buf), count=1, bogus=2)
    with pytest.raises(TypeError):
        c_decode("not a buffer", 0, 0, 0)
    with pytest.raises(TypeError):
        c_decode(buf, 0.0, len(buf), 1)
    with pytest.raises(BufferError):  # non-contiguous buffers are refused, not misread
        c_decode(memoryview(buf)[::2], 0, 0, 0)


def test_no_headers_share_one_tuple_and_results_are_fresh_objects():
    buf = encode_all([(0, 0, b"k", b"v", [], 0), (1, 0, None, None, [], 0)])
    out = c_decode(bytearray(buf), 0, len(buf), 2)
    assert out[0][5] is out[1][5] == ()
    assert type(out[0][3]) is bytes and type(out) is list and type(out[0]) is tuple


def test_buffer_is_released_on_every_path():
    good = bytearray(encode_all([(0, 0, b"k", b"v", [(b"h", b"x")], 0)]))
    for args in [(0, len(good), 1), (0, len(good), 2), (0, 3, 1), (0, 99, 1), (-1, 0, 1)]:
        try:
            c_decode(good, *args)
        except (InvalidRecordError, ValueError):
            pass
        good.append(0)  # resizing fails with BufferError while an export is held
        del good[-1]


def test_no_reference_leaks():
    recs = [(j, j * 3, b"key%d" % j, b"v" * j, [(b"h", b"x"), (b"n", None)][: j % 3], j) for j in range(6)]
    buf = encode_all(recs)
    cases = [(buf, 0, len(buf), 6), (buf, 0, len(buf), 7), (buf, 0, len(buf) - 1, 6), (buf, 0, len(buf), 5)]
    mutated = bytearray(buf)
    mutated[40] ^= 0x55
    cases.append((bytes(mutated), 0, len(buf), 6))
    cases.append((V(6) + b"\x00" + b"\x80\x80\x80\x80\x00" + b"\x01\x01\x01\x02", 0, 11, 1))

    def run(n):
        for _ in range(n):
            for args in cases:
                try:
                    c_decode(*args)
                except InvalidRecordError:
                    pass

    run(200)
    gc.collect()
    tracemalloc.start()
    try:
        run(100)
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        run(3000)
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert after - before < 20_000, after - before
    if hasattr(sys, "gettotalrefcount"):  # debug builds
        r0 = sys.gettotalrefcount()
        run(100)
        assert sys.gettotalrefcount() - r0 < 50


def test_v2_uses_the_extension():
    assert v2._decode is c_decode
