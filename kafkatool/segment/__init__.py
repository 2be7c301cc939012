"""Segment files on disk: the batch walker, index/timeindex/txnindex, producer snapshots, checkpoints."""
