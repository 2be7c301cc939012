"""Kafka's internal topics, decoded as kafka-dump-log's decoders do (spec §14, §15.3).

One function per decoder, each ``decode(key, value, offset) -> Decoded``: the record's key and
value bytes (None for null) and its offset (which Kafka's error texts name). It never raises
for any bytes: what Kafka prints for an unreadable record, or the exception it would crash
with, comes back as :attr:`Decoded.error`. Every message is read by the one table-driven codec
(:mod:`kafkatool.record.message`) from the schemas in :mod:`kafkatool.record.schemas`.

================================  ======================  =====================================
``kafkatool dump`` option          name in :data:`NAMES`    module
================================  ======================  =====================================
``--offsets-decoder``              ``offsets``              :mod:`.offsets`
``--transaction-log-decoder``      ``transaction-log``      :mod:`.txnlog`
``--cluster-metadata-decoder``     ``cluster-metadata``     :mod:`.metadata`
``--remote-log-metadata-decoder``  ``remote-log-metadata``  :mod:`.remote`
``--share-group-state-decoder``    ``share-group-state``    :mod:`.offsets`
================================  ======================  =====================================
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, NamedTuple

__all__ = ["Message", "Decoded", "NAMES", "decoder"]


class Message(NamedTuple):
    """One internal-topic message as read."""

    name: str
    """Its schema name (``OffsetCommitKey``, ``PartitionRecord``, ``TransactionLogValue``, ...)."""
    version: int
    """The version it was written at (before the clamp rule)."""
    data: dict
    """:func:`kafkatool.record.message.decode`'s dict: Python values, bytes as bytes, uuids as
    Kafka's base64url strings."""


class Decoded(NamedTuple):
    """What one decoder makes of one record."""

    key: Message | None
    """The key message (None when the record has no key, or it could not be read)."""
    value: Message | None
    """The value message (None for a tombstone, a record without one, or one that could not be read)."""
    key_text: str | None
    """Exactly what kafka-dump-log prints after `` key: `` (None: no ``key:`` field)."""
    payload_text: str | None
    """Exactly what kafka-dump-log prints after `` payload: `` (None: no ``payload:`` field)."""
    key_json: Any
    """The key as a JSON tree for ``--format jsonl``/``table`` (None when there is none)."""
    payload_json: Any
    """The payload as a JSON tree (None when there is none; a tombstone is None too)."""
    error: str | None = None
    """Kafka's wording when the record could not be decoded (also when it is printed inline)."""
    fatal: bool = False
    """kafka-dump-log would have stopped with an exception (exit 1) at this record."""


#: The decoders, in kafka-dump-log's precedence order (spec §15.1): name -> (module, function).
NAMES: dict[str, tuple[str, str]] = {
    "offsets": ("offsets", "decode_offsets"),
    "transaction-log": ("txnlog", "decode"),
    "cluster-metadata": ("metadata", "decode"),
    "remote-log-metadata": ("remote", "decode"),
    "share-group-state": ("offsets", "decode_share_group_state"),
}


def decoder(name: str) -> Callable[[bytes | None, bytes | None, int], Decoded]:
    """The decode function of a decoder in :data:`NAMES` (its module is imported on first use)."""
    module, function = NAMES[name]
    return getattr(importlib.import_module(f"{__name__}.{module}"), function)
