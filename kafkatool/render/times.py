"""Timestamps for people: epoch milliseconds as ISO 8601 UTC, as every table and text report shows them.

A module of its own, importing nothing of kafkatool, so that a renderer needing only this
(``render.stats``) does not load the dump renderers that ``render.table`` needs.
"""

from __future__ import annotations

import time

__all__ = ["iso_time"]

_iso_last = [None, ""]  # the last millisecond formatted, and the last second
_iso_second = [None, ""]  # (timestamps in a segment run in order: most calls repeat one of them)


def iso_time(ms: int) -> str:
    """Epoch milliseconds as ISO 8601 UTC (``2023-11-14T22:13:20.005Z``); empty for none (< 0) or out of range."""
    if _iso_last[0] == ms:
        return _iso_last[1]
    if ms < 0:
        return ""
    sec, milli = divmod(ms, 1000)
    if _iso_second[0] != sec:
        try:
            text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec))
        except (OverflowError, OSError, ValueError):
            return ""
        if len(text) != 19:  # a year past 9999
            return ""
        _iso_second[0] = sec
        _iso_second[1] = text
    text = f"{_iso_second[1]}.{milli:03d}Z"
    _iso_last[0] = ms
    _iso_last[1] = text
    return text
