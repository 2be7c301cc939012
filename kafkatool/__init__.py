"""kafkatool: offline tools for Apache Kafka log directories, and the Python API they are built on.

A new subcommand goes in ``kafkatool/cli/<command>.py``, which only parses options and renders
(through ``kafkatool/render/``); it calls an operation module in ``kafkatool/`` (like
``kafkatool/stats.py``), which reads files through :mod:`kafkatool.segment.logdir` and writes
them only through :mod:`kafkatool.safety`.

Use from Python::

    import kafkatool

    log_dir = kafkatool.LogDir("/var/lib/kafka/data")
    for partition in log_dir.partitions():           # topic, partition and state from the dir name
        for record in partition.records(start_offset=100):
            print(partition.topic, record.offset, record.timestamp, record.key, record.value)

What ``import kafkatool`` gives (each name is imported on first use, so the import itself
loads nothing else):

* the log-dir model (:mod:`kafkatool.segment.logdir`): :class:`LogDir`, :class:`Partition`,
  :class:`Segment`, :func:`expand` and its :class:`Target`, :class:`BatchReader`;
* the record types (:mod:`kafkatool.record.batch`): :class:`Batch` (one entry of a segment, any
  magic, with its file ``position`` and ``size``), :class:`Record`; :class:`RecordSpec` (a
  record to write) and :class:`Codec`;
* decoding and encoding (:mod:`kafkatool.record`): :func:`decode_batch_records`,
  :func:`encode_batch` (a v2 batch), :func:`encode_record`, :func:`encode_legacy` (v0/v1
  messages or a compressed wrapper), :func:`encode_message`;
* the errors (:mod:`kafkatool.errors`): every one a :class:`KafkaToolError` whose message reads
  ``PATH:POSITION: what (expected X, found Y)``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: Every public name, and the module that defines it (imported on first use).
_EXPORTS = {
    # the log-dir model
    "LogDir": "kafkatool.segment.logdir",
    "Partition": "kafkatool.segment.logdir",
    "Segment": "kafkatool.segment.logdir",
    "Entry": "kafkatool.segment.logdir",
    "EntryType": "kafkatool.segment.logdir",
    "Target": "kafkatool.segment.logdir",
    "BatchReader": "kafkatool.segment.logdir",
    "PartitionReader": "kafkatool.segment.logdir",
    "DirectoryError": "kafkatool.segment.logdir",
    "expand": "kafkatool.segment.logdir",
    # record types
    "Batch": "kafkatool.record.batch",
    "Record": "kafkatool.record.batch",
    "RecordSpec": "kafkatool.record.v2",
    "Codec": "kafkatool.record.compression",
    # decoding and encoding
    "decode_batch_records": "kafkatool.record.records",
    "encode_batch": "kafkatool.record.v2",
    "encode_record": "kafkatool.record.v2",
    "encode_legacy": "kafkatool.record.legacy",
    "encode_message": "kafkatool.record.legacy",
    # errors
    "KafkaToolError": "kafkatool.errors",
    "CorruptRecordError": "kafkatool.errors",
    "InvalidRecordError": "kafkatool.errors",
    "CompressionError": "kafkatool.errors",
    "CorruptIndexError": "kafkatool.errors",
    "CheckpointError": "kafkatool.errors",
    "FileNameError": "kafkatool.errors",
    "MissingDependencyError": "kafkatool.errors",
}

__all__ = [  # written out, not derived: static tools read it (a test checks it matches _EXPORTS)
    "__version__",
    "LogDir",
    "Partition",
    "Segment",
    "Entry",
    "EntryType",
    "Target",
    "BatchReader",
    "PartitionReader",
    "DirectoryError",
    "expand",
    "Batch",
    "Record",
    "RecordSpec",
    "Codec",
    "decode_batch_records",
    "encode_batch",
    "encode_record",
    "encode_legacy",
    "encode_message",
    "KafkaToolError",
    "CorruptRecordError",
    "InvalidRecordError",
    "CompressionError",
    "CorruptIndexError",
    "CheckpointError",
    "FileNameError",
    "MissingDependencyError",
]


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use (PEP 562): ``import kafkatool`` stays cheap."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'kafkatool' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next look-up is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


if TYPE_CHECKING:  # what type checkers and IDEs see (py.typed): the same names, imported eagerly
    from kafkatool.errors import (
        CheckpointError,
        CompressionError,
        CorruptIndexError,
        CorruptRecordError,
        FileNameError,
        InvalidRecordError,
        KafkaToolError,
        MissingDependencyError,
    )
    from kafkatool.record.batch import Batch, Record
    from kafkatool.record.compression import Codec
    from kafkatool.record.legacy import encode_legacy, encode_message
    from kafkatool.record.records import decode_batch_records
    from kafkatool.record.v2 import RecordSpec, encode_batch, encode_record
    from kafkatool.segment.logdir import (
        BatchReader,
        DirectoryError,
        Entry,
        EntryType,
        LogDir,
        Partition,
        PartitionReader,
        Segment,
        Target,
        expand,
    )
