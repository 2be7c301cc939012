"""Bytes as Java's ``new String(bytes, StandardCharsets.UTF_8)`` reads them.

Kafka prints every key, payload, header key and message string through that constructor
(``StringDecoder``, the generated message readers). Valid UTF-8 is read as it is; each
malformed sequence becomes one U+FFFD, as Python's ``"replace"`` does, with one exception:
Java takes a UTF-8-encoded surrogate (``ED A0..BF``, with its third byte when that is a
continuation byte) as ONE malformed sequence where Python gives one U+FFFD per byte. So
``ED A0 80`` is one U+FFFD in Java and three in Python, ``ED A0 41`` one U+FFFD then ``A``
(Python: two, then ``A``). Checked against JDK 17 and JDK 25 on 20,000 malformed byte strings.

Importing this module registers the codecs error handler :data:`JAVA_UTF8_ERRORS`, which the
compiled text formatter (``_speedups.format_v2_text``) also decodes with.
"""

from __future__ import annotations

import codecs

__all__ = ["JAVA_UTF8_ERRORS", "java_string", "java_utf8"]

JAVA_UTF8_ERRORS = "kafkatool-java-utf8"
"""The codecs error handler: ``raw.decode("utf-8", JAVA_UTF8_ERRORS)`` is ``new String(raw, UTF_8)``."""


def _replace(err: UnicodeDecodeError) -> tuple[str, int]:
    b, s = err.object, err.start
    if b[s] == 0xED and s + 1 < len(b) and 0xA0 <= b[s + 1] <= 0xBF:
        return "\ufffd", s + 3 if s + 2 < len(b) and 0x80 <= b[s + 2] <= 0xBF else s + 2
    return "\ufffd", err.end


codecs.register_error(JAVA_UTF8_ERRORS, _replace)


def java_string(raw: bytes | bytearray | memoryview) -> str:
    """``new String(raw, StandardCharsets.UTF_8)``."""
    return str(raw, "utf-8", JAVA_UTF8_ERRORS)


def java_utf8(raw: bytes | bytearray | memoryview) -> bytes:
    """``new String(raw, UTF_8).getBytes(UTF_8)``: valid UTF-8 unchanged, each malformed sequence U+FFFD."""
    data = bytes(raw)
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("utf-8", JAVA_UTF8_ERRORS).encode("utf-8")
    return data
