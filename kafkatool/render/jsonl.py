"""JSON Lines output: one object per line, Kafka's field names (schema in kafkatool-dump(1))."""

from __future__ import annotations

import base64
import json

from kafkatool import dump as d
from kafkatool.record.batch import TIMESTAMP_TYPE_NAMES, Batch, Record
from kafkatool.record.control import control_type_name
from kafkatool.record.javautf8 import JAVA_UTF8_ERRORS
from kafkatool.record.topics import Decoded

__all__ = ["JsonlRenderer", "batch_object", "record_object", "item_object"]

_TS = TIMESTAMP_TYPE_NAMES
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def _b64(b: bytes | None) -> str | None:
    return None if b is None else base64.b64encode(b).decode("ascii")


def batch_object(path: str, b: Batch, base_offset: int | None) -> dict:
    """The ``"type": "batch"`` object."""
    return {
        "type": "batch",
        "file": path,
        "position": b.position,
        "size": b.size,
        # a legacy wrapper's baseOffset is its first inner offset: known only once decompressed
        "baseOffset": base_offset if base_offset is not None else d.header_base_offset(b),
        "lastOffset": b.last_offset,
        "count": b.count,
        "magic": b.magic,
        "compresscodec": b.codec_name,
        "timestampType": _TS[b.timestamp_type],
        "maxTimestamp": b.max_timestamp,
        "baseSequence": b.base_sequence,
        "lastSequence": b.last_sequence,
        "producerId": b.producer_id,
        "producerEpoch": b.producer_epoch,
        "partitionLeaderEpoch": b.partition_leader_epoch,
        "isTransactional": b.is_transactional,
        "isControl": b.is_control,
        "deleteHorizonMs": b.delete_horizon_ms,
        "crc": b.crc,
        "computedCrc": b.computed_crc,
        "isValid": b.crc == b.computed_crc,
    }


def record_object(path: str, b: Batch, r: Record, control: d.Control | None, decoded: Decoded | None = None) -> dict:
    """The ``"type": "record"`` object (with an internal-topic decoder's results when ``decoded``)."""
    obj: dict = {
        "type": "record",
        "file": path,
        "offset": r.offset,
        "timestamp": r.timestamp,
        "timestampType": _TS[b.timestamp_type],
        "key": _b64(r.key),
        "value": _b64(r.value),
        "headers": [{"key": k.decode("utf-8", JAVA_UTF8_ERRORS), "value": _b64(v)} for k, v in r.headers],
        "batchPosition": b.position,
    }
    if b.magic >= 2:
        obj["sequence"] = r.sequence
    else:
        obj["magic"] = r.magic
        obj["crc"] = r.crc
        obj["isValid"] = r.crc_valid
    if control is not None:
        obj["controlType"] = control_type_name(control.type_id)
        obj["controlTypeId"] = control.type_id
        if control.coordinator_epoch is not None:
            obj["coordinatorEpoch"] = control.coordinator_epoch
        if control.fields is not None:
            obj["controlData"] = control.fields
    if decoded is not None:
        obj["keyDecoded"] = decoded.key_json
        obj["valueDecoded"] = decoded.payload_json
        if decoded.error is not None:
            obj["decodeError"] = decoded.error
            obj["decodeFatal"] = decoded.fatal
    return obj


class JsonlRenderer:
    """Renders dump items as JSON Lines on stdout (errors too, as ``"type": "error"``)."""

    def __init__(self, opts: d.DumpOptions) -> None:
        self.opts = opts

    def render(self, item: object) -> tuple[str, bool]:
        t = type(item)
        if t is d.BatchItem:
            return self._batch(item), False  # type: ignore[arg-type]
        if t is d.Batches:
            return self._batches(item), False  # type: ignore[arg-type]
        if t is d.BatchItems:
            return "".join([self._batch(i) for i in item.items]), False  # type: ignore[attr-defined]
        obj = item_object(item)
        if obj is None:
            return "", False
        return _dumps(obj) + "\n", False

    def _batches(self, item: d.Batches) -> str:
        path = item.path
        return "\n".join([_dumps(batch_object(path, b, None)) for b in item.batches]) + "\n"

    def _batch(self, item: d.BatchItem) -> str:
        b = item.batch
        lines = [] if item.continued else [_dumps(batch_object(item.path, b, item.base_offset))]
        if item.records is not None:
            controls = item.controls
            decoded = item.decoded
            for i, r in enumerate(item.records):
                c = controls[i] if controls is not None and i < len(controls) else None
                dec = decoded[i] if decoded is not None else None
                lines.append(_dumps(record_object(item.path, b, r, c, dec)))
        lines.append("")
        return "\n".join(lines)


def _snapshot_object(path: str, e) -> dict:
    meta = e.has_batch_metadata
    return {
        "type": "producer_snapshot_entry",
        "file": path,
        "producerId": e.producer_id,
        "producerEpoch": e.epoch,
        "coordinatorEpoch": e.coordinator_epoch,
        "currentTxnFirstOffset": e.current_txn_first_offset if e.current_txn_first_offset >= 0 else None,
        "lastTimestamp": e.timestamp,
        "firstSequence": e.first_sequence if meta else None,
        "lastSequence": e.last_sequence if meta else None,
        "lastOffset": e.last_offset if meta else None,
        "offsetDelta": e.offset_delta if meta else None,
    }


_TS_PAIR_NAMES = {
    "mismatch": ("indexTimestamp", "logTimestamp"),
    "out_of_order": ("indexTimestamp", "previousTimestamp"),
    "not_found": ("indexedOffset", "foundLogOffset"),
}


def item_object(item: object) -> dict | None:
    match item:
        case d.FileHeader(path=path, kind=kind, second_line=second):
            obj = {"type": "file", "file": path, "kind": kind}
            if second is not None:
                obj["header"] = second
            return obj
        case d.Note(path=path, text=text, kind=kind):
            return {"type": kind, "file": path, "message": text}
        case d.IndexEntryItem(path=path, offset=offset, position=position):
            return {"type": "index_entry", "file": path, "offset": offset, "position": position}
        case d.TimeIndexEntryItem(path=path, timestamp=ts, offset=offset):
            return {"type": "timeindex_entry", "file": path, "timestamp": ts, "offset": offset}
        case d.SnapshotEntryItem(path=path, entry=e):
            return _snapshot_object(path, e)
        case d.TxnEntryItem(path=path, entry=e):
            return {
                "type": "aborted_txn",
                "file": path,
                "version": e.version,
                "producerId": e.producer_id,
                "firstOffset": e.first_offset,
                "lastOffset": e.last_offset,
                "lastStableOffset": e.last_stable_offset,
            }
        case d.CheckpointItem(path=path, kind=kind, fields=fields):
            return {"type": kind, "file": path, **dict(fields)}
        case d.TrailingBytes(path=path, position=position, length=length):
            return {"type": "trailing_bytes", "file": path, "position": position, "length": length}
        case d.FileError(path=path, error=e):
            return {"type": "error", "file": e.path or path, "position": e.position, "message": e.message}
        case d.IndexMismatches(abs_path=path, pairs=pairs):
            return {"type": "index_mismatches", "file": path, "pairs": [{"indexOffset": a, "logOffset": b} for a, b in pairs]}
        case d.TimeIndexProblems(abs_path=path, kind=kind, pairs=pairs):
            first, second = _TS_PAIR_NAMES[kind]
            return {"type": f"timeindex_{kind}", "file": path, "pairs": [{first: a, second: b} for a, b in pairs]}
        case d.DecodeFailures(path=path, decoder=decoder, count=count, first_offset=first, first_error=error,
                              fatal_count=fatal, first_fatal_offset=first_fatal):
            return {
                "type": "decode_errors",
                "file": path,
                "decoder": decoder,
                "count": count,
                "firstOffset": first,
                "firstError": error,
                "fatalCount": fatal,
                "firstFatalOffset": first_fatal,
            }
        case d.NonConsecutive(abs_path=path, pairs=pairs, omitted=omitted):
            obj = {"type": "non_consecutive_offsets", "file": path, "pairs": [{"previous": a, "next": b} for a, b in pairs]}
            if omitted:
                obj["omitted"] = omitted  # earlier pairs, not kept (dump.MAX_PAIRS)
            return obj
    return None
