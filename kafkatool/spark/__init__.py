"""kafkatool as a PySpark data source: ``spark.read.format("kafka_segments")``.

The one place in kafkatool that imports pyspark, and only when asked: importing this package
works without the ``spark`` extra; :func:`register` (or touching :data:`KafkaSegmentsDataSource`)
imports pyspark and fails with :class:`~kafkatool.errors.MissingDependencyError` naming the extra
when it is not installed.

From a notebook::

    import kafkatool.spark
    kafkatool.spark.register(spark)
    df = spark.read.format("kafka_segments").option("kind", "records").load("/var/lib/kafka/data")
"""

from __future__ import annotations

from typing import Any

from kafkatool.errors import MissingDependencyError

__all__ = ["NAME", "register", "KafkaSegmentsDataSource"]

#: The data source's format name (``kafka`` belongs to Spark's own JVM source, which would win).
NAME = "kafka_segments"

#: The install hint every missing-dependency error gives.
INSTALL_HINT = "pip install 'kafkatool[spark]'"


def _source_module():
    """kafkatool.spark.source, imported on first use; pyspark/pyarrow missing -> MissingDependencyError."""
    import importlib

    try:
        importlib.import_module("pyarrow")  # the executors build Arrow batches: fail here, not in a task
        from kafkatool.spark import source
    except ImportError as e:
        missing = getattr(e, "name", None) or "pyspark"
        top = missing.split(".")[0]
        if top not in ("pyspark", "pyarrow", "pandas", "py4j"):
            raise
        raise MissingDependencyError(
            f"the Spark data source needs the {top!r} module: install the spark extra with `{INSTALL_HINT}`"
        ) from None
    return source


def register(spark: Any) -> None:
    """Register the ``kafka_segments`` data source with the SparkSession ``spark``.

    Also sets ``spark.sql.python.filterPushdown.enabled=true``, which reads with
    ``.option("pushFilters", "true")`` need (Spark refuses a reader that takes filters while it is
    off). Filters narrow a read only with that option (Spark 4.1-4.3 would otherwise reuse one
    query's narrowed read for the next: :mod:`kafkatool.spark.source` says why); the options
    ``topics``, ``partitions``, ``startOffset``/``endOffset`` and ``startTime``/``endTime`` narrow
    it always."""
    source = _source_module()
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    spark.dataSource.register(source.KafkaSegmentsDataSource)


def __getattr__(name: str) -> Any:
    if name == "KafkaSegmentsDataSource":
        return _source_module().KafkaSegmentsDataSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
