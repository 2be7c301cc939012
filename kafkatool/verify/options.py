"""How a verify run is configured, and its --max-rate clock."""

from __future__ import annotations

import time
from dataclasses import dataclass

from kafkatool.record.compression import DEFAULT_MAX_DECOMPRESSED

__all__ = ["VerifyOptions", "start_rate_clock", "throttle"]


@dataclass(frozen=True, slots=True)
class VerifyOptions:
    """What a run checks and how hard it may read."""

    deep: bool = False
    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED
    max_rate: float | None = None
    """Read bandwidth cap in bytes per second (None: unlimited)."""
    index_interval_bytes: int = 4096
    workers: int = 1
    """Processes a large segment is split across (see :data:`SPLIT_MIN_BYTES`)."""



_RATE_CLOCK = [0.0, 0]  # [start time, bytes read] of this process's run


def start_rate_clock() -> None:
    """Start the --max-rate clock of a run (called once per run, before its first group)."""
    _RATE_CLOCK[0] = time.monotonic()
    _RATE_CLOCK[1] = 0


def throttle(rate: float, nbytes: int) -> None:
    """Account ``nbytes`` read and sleep so the run stays under ``rate`` bytes/s (--max-rate)."""
    clock = _RATE_CLOCK
    if clock[0] == 0.0:
        clock[0] = time.monotonic()
    clock[1] += nbytes
    ahead = clock[1] / rate - (time.monotonic() - clock[0])
    if ahead > 0.005:
        time.sleep(ahead)
