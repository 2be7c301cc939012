"""Kafka internal-topic message schemas, as checked-in data (see tables.py).

``MESSAGES`` maps a message name (as inside Kafka's JSON file, e.g. ``OffsetCommitKey``,
``PartitionRecord``) to its table; the form is described in kafkatool/record/schemas/generate.py.
"""

from kafkatool.record.schemas.tables import MESSAGES

__all__ = ["MESSAGES"]
