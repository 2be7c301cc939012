"""Keys, payloads, header keys and message strings read as Java's ``new String(bytes, UTF_8)``
reads them, in every output of ``kafkatool dump`` (kafka-dump-log's StringDecoder) and on both
paths: the compiled text formatter and pure Python.

Java's replacing decoder (JDK 17 ``String.decodeUTF8_UTF16``) differs from Python's
``"replace"`` in one place: a UTF-8-encoded surrogate ``ED A0..BF`` is ONE malformed sequence
(with its third byte when that is a continuation byte), where Python replaces byte by byte. The
expected texts below are derived by hand from that rule; ``tests/test_columns.py`` checks the
same function against a JVM."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kafkatool.record.javautf8 import java_string, java_utf8
from kafkatool.record.v2 import RecordSpec, encode_batch

R = "\ufffd"

CASES = [
    (b"plain", "plain"),
    (b"\xed\xa0\x80", R),  # a high surrogate, encoded: one in Java (Python: three)
    (b"\xed\xbf\xbfz", R + "z"),  # a low surrogate, then z
    (b"\xed\xa0A", R + "A"),  # a cut surrogate: one, then A (Python: two)
    (b"\xed\xa0", R),  # cut at the end
    (b"\xed\x9f\xbf", "\ud7ff"),  # U+D7FF: the last code point before the surrogates is valid
    (b"\xed", R),
    (b"\xff\xfe", R + R),  # bytes that never start a sequence: one each, as Python
    (b"\xe2\x82", R),  # a truncated 3-byte sequence: one
    (b"a\xed\xa0\x80\xed\xb0\x80b", "a" + R + R + "b"),  # a surrogate pair, encoded: two in Java (Python: six)
]


@pytest.mark.parametrize("raw,text", CASES)
def test_java_string(raw: bytes, text: str) -> None:
    assert java_string(raw) == text
    assert java_utf8(raw) == text.encode("utf-8", "surrogatepass")


KEY, VALUE, HEADER = b"k\xed\xa0\x80", b"v\xed\xa0A\xff", b"h\xed\xbf\xbf"


@pytest.fixture
def segment(tmp_path: Path) -> Path:
    path = tmp_path / "t-0" / "00000000000000000000.log"
    path.parent.mkdir()
    path.write_bytes(encode_batch([RecordSpec(0, 1700000000000, KEY, VALUE, [(HEADER, b"x")])], base_offset=0))
    return path


def _dump(segment: Path, *args: str, pure: bool) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKATOOL_PURE")}
    if pure:
        env["KAFKATOOL_PURE"] = "1"
    done = subprocess.run([sys.executable, "-m", "kafkatool", "dump", "--print-data-log", *args, str(segment)],
                          capture_output=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.decode("utf-8")


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "python"])
def test_text_dump_prints_what_kafka_dump_log_prints(segment: Path, pure: bool) -> None:
    line = _dump(segment, pure=pure).splitlines()[3]
    assert line.endswith(f" headerKeys: [h{R}] key: k{R} payload: v{R}A{R}"), line


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "python"])
def test_jsonl_and_table_decode_header_keys_the_same_way(segment: Path, pure: bool) -> None:
    record = [json.loads(x) for x in _dump(segment, "--format", "jsonl", pure=pure).splitlines()][-1]
    assert record["headers"][0]["key"] == f"h{R}"
    table = _dump(segment, "--format", "table", pure=pure)
    assert f"k{R}" in table and f"v{R}A{R}" in table and f"h{R}=x" in table
