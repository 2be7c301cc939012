"""Key/value decoders for record output: string (Kafka's StringDecoder), hex, base64, json."""

from __future__ import annotations

import base64
import json
from typing import Callable

from kafkatool.record.javautf8 import JAVA_UTF8_ERRORS
__all__ = ["DECODERS", "get_decoder", "JSON_FALLBACK_MARKER"]

#: Prefix put before a value that the ``json`` decoder could not parse (it prints base64 instead).
JSON_FALLBACK_MARKER = "base64:"


def _string(b: bytes) -> str:
    # new String(bytes, UTF_8): malformed sequences become U+FFFD as Java replaces them; newlines stay raw.
    return b.decode("utf-8", JAVA_UTF8_ERRORS)


def _hex(b: bytes) -> str:
    return b.hex()


def _base64(b: bytes) -> str:
    return base64.b64encode(b).decode("ascii")


def _json(b: bytes) -> str:
    try:
        return json.dumps(json.loads(b), separators=(",", ":"), ensure_ascii=False)
    except (ValueError, UnicodeDecodeError):
        return JSON_FALLBACK_MARKER + base64.b64encode(b).decode("ascii")


DECODERS: dict[str, Callable[[bytes], str]] = {
    "string": _string,
    "hex": _hex,
    "base64": _base64,
    "json": _json,
}


def get_decoder(name: str) -> Callable[[bytes], str]:
    return DECODERS[name]
