"""``kafkatool convert``: segments rewritten at another message format (magic 0, 1, 2) or codec,
offsets kept (spec §13), to a new directory or in place through :mod:`kafkatool.safety`.

The modules, from the bytes up:

* :mod:`~kafkatool.convert.options` — :class:`ConvertOptions` (what is asked) and :class:`Loss`
  (what could not be carried over);
* :mod:`~kafkatool.convert.rules` — :class:`BatchConverter`, Kafka's conversion rules one source
  batch at a time; :mod:`~kafkatool.convert.aborted` — :func:`find_aborted`;
* :mod:`~kafkatool.convert.source` — :func:`converted_entries`: one segment walked with the damage
  policy, the converter fed;
* :mod:`~kafkatool.convert.segment` — :func:`convert_segment`: one segment written with its indexes
  and side files; :mod:`~kafkatool.convert.tree` — :func:`plan_convert`, :func:`analyze`,
  :func:`convert_to_dest` (a segment, partition or log dir into a new DEST) and
  :func:`convert_partition_into`;
* :mod:`~kafkatool.convert.inplace` — :func:`plan_in_place`, :func:`apply_in_place`.

Each name below is imported from its module on first use (``import kafkatool.convert`` loads
nothing else)::

    from kafkatool.convert import ConvertOptions, analyze, convert_to_dest, plan_convert

    plan = plan_convert("/var/lib/kafka/data/orders-0", "/tmp/orders-0-v2", ConvertOptions(magic=2))
    print(analyze(plan).lines())          # what would be lost, nothing written
    report = convert_to_dest(plan)
"""

from __future__ import annotations

import importlib
from typing import Any

#: Every public name, and the module that defines it (imported on first use).
_EXPORTS = {
    "ConvertOptions": "kafkatool.convert.options",
    "Loss": "kafkatool.convert.options",
    "DamagedRange": "kafkatool.convert.options",
    "Salvaged": "kafkatool.convert.options",
    "BatchConverter": "kafkatool.convert.rules",
    "AbortedSet": "kafkatool.convert.aborted",
    "find_aborted": "kafkatool.convert.aborted",
    "converted_entries": "kafkatool.convert.source",
    "SideFile": "kafkatool.convert.segment",
    "SegmentResult": "kafkatool.convert.segment",
    "convert_segment": "kafkatool.convert.segment",
    "PartitionResult": "kafkatool.convert.tree",
    "ConvertPlan": "kafkatool.convert.tree",
    "ConvertReport": "kafkatool.convert.tree",
    "plan_convert": "kafkatool.convert.tree",
    "analyze": "kafkatool.convert.tree",
    "convert_to_dest": "kafkatool.convert.tree",
    "convert_partition_into": "kafkatool.convert.tree",
    "InPlacePlan": "kafkatool.convert.inplace",
    "InPlaceReport": "kafkatool.convert.inplace",
    "plan_in_place": "kafkatool.convert.inplace",
    "apply_in_place": "kafkatool.convert.inplace",
}

__all__ = [  # written out, not derived: static tools read it
    "ConvertOptions",
    "Loss",
    "DamagedRange",
    "Salvaged",
    "BatchConverter",
    "AbortedSet",
    "find_aborted",
    "converted_entries",
    "SideFile",
    "SegmentResult",
    "convert_segment",
    "PartitionResult",
    "ConvertPlan",
    "ConvertReport",
    "plan_convert",
    "analyze",
    "convert_to_dest",
    "convert_partition_into",
    "InPlacePlan",
    "InPlaceReport",
    "plan_in_place",
    "apply_in_place",
]


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'kafkatool.convert' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
