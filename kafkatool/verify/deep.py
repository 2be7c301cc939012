"""The deep checks (``--deep``): every record of a batch decoded and checked, with a cap on
decompressed size. Record decoding is imported when first needed."""

from __future__ import annotations

from kafkatool.errors import CorruptRecordError, InvalidRecordError, KafkaToolError
from kafkatool.record.batch import Batch
from kafkatool.record.layout import CODEC_MASK, TIMESTAMP_TYPE_BIT
from kafkatool.verify.findings import Finding, FindingAdder, FindingKind
from kafkatool.verify.options import VerifyOptions

__all__ = ["check_records", "error_kind"]


def check_records(b: Batch, data, path: str, index: int, out: list[Finding], opts: VerifyOptions) -> None:
    """The record checks of one batch (``--deep``); findings are appended to ``out``."""
    from kafkatool.record.records import batch_record_chunks

    pos = b.position
    add = FindingAdder(out, path, b, index)

    if data is None:
        add(FindingKind.DECOMPRESSED_TOO_LARGE, f"a batch of {b.size} bytes is too large to decode in memory")
        return
    # The records are checked as they are decoded, a few thousand at a time, so memory stays
    # flat whatever the batch's record count; their findings count only if the whole batch
    # decodes (else the decoding error is the one finding, as when it was decoded first).
    mark = len(out)
    try:
        chunks = batch_record_chunks(b, data, max_decompressed=opts.max_decompressed)
        if b.magic >= 2:
            _check_v2_records(b, chunks, add)
        else:
            _check_legacy_records(b, chunks, add)
    except (InvalidRecordError, CorruptRecordError) as e:  # (CompressionError among them)
        del out[mark:]
        add(error_kind(e), e.message, position=pos + (e.position or 0))
        return


def _check_v2_records(b: Batch, chunks, add: FindingAdder) -> None:
    """The record checks of a v2 batch, chunk by chunk; at most one finding per check, in
    a fixed order (offsets, timestamps, control records)."""
    lod = b.last_offset_delta
    base = b.offset
    max_ts = b.max_timestamp
    prev_delta = -1
    offsets_bad = timestamps_bad = controls_bad = None
    check_timestamps = not b.attributes & TIMESTAMP_TYPE_BIT and not b.has_delete_horizon
    check_controls = b.is_control
    for records in chunks:
        if offsets_bad is None:
            for r in records:
                delta = r.offset - base
                if delta < 0 or delta > lod or delta <= prev_delta:
                    offsets_bad = (FindingKind.RECORD_OFFSET_INVALID, f"record offset {r.offset} (delta {delta}) outside 0..{lod} or not increasing", f"{prev_delta + 1}..{lod}", delta)
                    break
                prev_delta = delta
        if check_timestamps and timestamps_bad is None:
            for r in records:
                if r.timestamp > max_ts:
                    timestamps_bad = (FindingKind.RECORD_TIMESTAMP_INVALID, f"record {r.offset} has timestamp {r.timestamp} above the batch maxTimestamp {max_ts}", f"<= {max_ts}", r.timestamp)
                    break
        if check_controls and controls_bad is None:
            from kafkatool.record.control import ControlType, decode_control_key, decode_end_txn_marker, decode_kraft_control

            for r in records:
                try:
                    _v, type_id = decode_control_key(r.key)
                    if type_id in (ControlType.ABORT, ControlType.COMMIT):
                        decode_end_txn_marker(r.value)
                    else:
                        decode_kraft_control(type_id, r.value)
                except KafkaToolError as e:
                    controls_bad = (FindingKind.INVALID_CONTROL_RECORD, f"control record {r.offset}: {e.message}", None, None)
                    break
    for bad in (offsets_bad, timestamps_bad, controls_bad):
        if bad is not None:
            add(bad[0], bad[1], expected=bad[2], found=bad[3])


def _check_legacy_records(b: Batch, chunks, add: FindingAdder) -> None:
    """The record checks of a legacy entry (a wrapper's inner messages), chunk by chunk."""
    prev_off = None
    looking = True
    last_off = None
    for records in chunks:
        if looking:
            for r in records:
                if r.crc_valid is False:
                    add(FindingKind.INNER_CRC_MISMATCH, f"inner message {r.offset} fails its CRC (stored crc {r.crc}, not the crc computed over its bytes) inside a wrapper whose outer CRC is valid", found=r.crc)
                    looking = False
                    break
                if prev_off is not None and r.offset <= prev_off:
                    add(FindingKind.RECORD_OFFSET_INVALID, f"inner message offsets not increasing ({prev_off} then {r.offset})")
                    looking = False
                    break
                prev_off = r.offset
        if records:
            last_off = records[-1].offset
    if b.attributes & CODEC_MASK and last_off is not None and last_off != b.offset and b.offset != 0:
        # (a wrapper offset of 0 is the librdkafka quirk Kafka accepts, §17 C.25)
        add(FindingKind.INVALID_WRAPPER, f"wrapper offset {b.offset} is not its last inner offset {last_off}", expected=last_off, found=b.offset)


def error_kind(e: KafkaToolError) -> FindingKind:
    """The finding kind of an error that stopped the decoding of a batch's records: the kind
    the error carries (``decompressed_too_large``, ``record_count_mismatch``,
    ``invalid_wrapper``, ...; set where it is raised, never read from its message),
    ``invalid_record`` for one that is not a finding kind."""
    try:
        return FindingKind(e.kind)
    except ValueError:
        return FindingKind.INVALID_RECORD
