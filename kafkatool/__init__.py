"""kafkatool: offline tools for Apache Kafka log directories."""

__version__ = "0.1.0"
