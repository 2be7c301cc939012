"""Resynchronisation after a bad region: :func:`kafkatool.segment.resync.resync`, named here too.

The search is a segment-level rule and lives in the segment layer; ``verify`` resumes after a
bad region with it and ``truncate`` finds where good data resumes with it
(``from kafkatool.verify import resync`` keeps working).
"""

from __future__ import annotations

from kafkatool.segment.resync import resync

__all__ = ["resync"]
