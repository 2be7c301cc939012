"""What the terminal is: whether a stream is one, and how wide it is.

Imports nothing of kafkatool, so that a command can ask before it loads a renderer
(``kafkatool dump`` shows its progress bar only when standard error is a terminal and
standard output is not).
"""

from __future__ import annotations

import shutil

__all__ = ["is_terminal", "terminal_width"]


def is_terminal(stream) -> bool:
    """Whether ``stream`` is a terminal (False for a closed or replaced stream without ``isatty``)."""
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def terminal_width() -> int:
    """Columns of the terminal (the ``COLUMNS`` variable first), at least 40; 100 when unknown."""
    return max(40, shutil.get_terminal_size((100, 24)).columns)
