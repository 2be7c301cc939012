"""Presentation: pure functions from model objects to text (kafka-dump-log compatible), JSON lines and tables."""
