"""What the terminal is: whether a stream is one, and how wide it is.

Imports nothing of kafkatool, so that a command can ask before it loads a renderer
(``kafkatool dump`` shows its progress bar only when standard error is a terminal and
standard output is not).
"""

from __future__ import annotations

import shutil
import unicodedata

__all__ = ["cell_len", "fold", "is_terminal", "terminal_width"]


def is_terminal(stream) -> bool:
    """Whether ``stream`` is a terminal (False for a closed or replaced stream without ``isatty``)."""
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def terminal_width() -> int:
    """Columns of the terminal (the ``COLUMNS`` variable first), at least 40; 100 when unknown."""
    return max(40, shutil.get_terminal_size((100, 24)).columns)


def cell_len(text: str) -> int:
    """Terminal columns ``text`` takes (East Asian wide characters count 2, combining marks 0)."""
    if text.isascii():
        return len(text)
    n = 0
    for ch in text:
        if unicodedata.combining(ch):
            continue
        n += 2 if unicodedata.east_asian_width(ch) in "WF" else 1
    return n


def fold(text: str, width: int) -> list[str]:
    """``text`` cut into pieces of at most ``width`` columns (at spaces where there are some)."""
    if text.isascii():
        if " " in text.strip():
            import textwrap

            return textwrap.wrap(text, width, replace_whitespace=False, drop_whitespace=True) or [""]
        return [text[i : i + width] for i in range(0, len(text), width)] or [""]
    pieces, cur, n = [], [], 0
    for ch in text:
        w = cell_len(ch)
        if n + w > width and cur:
            pieces.append("".join(cur))
            cur, n = [], 0
        cur.append(ch)
        n += w
    pieces.append("".join(cur))
    return pieces
