"""roff text for the man pages: escaping and the few man(7) macros the pages use.

Both halves of a page go through here: the parts generated from the Click definitions
(:mod:`kafkatool.cli.manpage`) and the hand-written prose read from reStructuredText
(:mod:`kafkatool.cli.manprose`), so the two look alike and escape alike. In prose arguments of
the building blocks, ```literal``` prints in bold and ``*name*`` in italics.
"""

from __future__ import annotations

import re
import textwrap
from typing import Iterable

__all__ = [
    "MARKUP",
    "bullets",
    "escape",
    "escape_chars",
    "example",
    "inline",
    "join",
    "para",
    "prose",
    "protect_lines",
    "quote_arg",
    "sentences",
    "subsection",
    "tagged",
]

_SPECIAL = {"\\": "\\e", "-": "\\-"}
MARKUP = re.compile(r"`([^`]+)`|\*([^*\s](?:[^*]*[^*\s])?)\*")
"""House-style markup in prose (docstrings, ``verify.KINDS``): ```literal``` (group 1), ``*name*`` (group 2)."""
_LITERALS = re.compile(r"`([^`]+)`()")  # for Click's own texts, where a ``*`` may be a glob
_SENTENCE_END = re.compile(r"(?<=[a-z0-9)\]'\"`][.!?])\s+(?=[A-Z`(])")


def escape(text: str) -> str:
    """``text`` as roff: backslashes and hyphens escaped, non-ASCII as ``\\[uXXXX]``, control
    characters dropped, and a ``\\&`` before a ``.`` or ``'`` that starts a line (it would be a request)."""
    return protect_lines(escape_chars(text))


def protect_lines(roff: str) -> str:
    """A ``\\&`` before every line that starts with ``.`` or ``'`` (roff would take it for a request)."""
    return "\n".join("\\&" + line if line[:1] in (".", "'") else line for line in roff.split("\n"))


def escape_chars(text: str) -> str:
    """Character escaping only (the caller protects line starts, see :func:`protect_lines`)."""
    out = []
    for ch in text:
        code = ord(ch)
        if ch in _SPECIAL:
            out.append(_SPECIAL[ch])
        elif code > 126:
            out.append(f"\\[u{code:04X}]")
        elif code < 32 and ch != "\n":
            out.append(" " if ch == "\t" else "")
        else:
            out.append(ch)
    return "".join(out)


def inline(text: str, italics: bool = True) -> str:
    """Escape prose, turning ```literal``` into bold and (with ``italics``) ``*name*`` into italics."""
    out = []
    last = 0
    for m in (MARKUP if italics else _LITERALS).finditer(text):
        out.append(escape_chars(text[last : m.start()]))
        if m.group(1) is not None:
            out.append(f"\\fB{escape_chars(m.group(1))}\\fR")
        else:
            out.append(f"\\fI{escape_chars(m.group(2))}\\fR")
        last = m.end()
    out.append(escape_chars(text[last:]))
    return "".join(out)


def sentences(text: str) -> list[str]:
    """``text`` with its whitespace folded, split after each sentence (roff's one sentence per line)."""
    flat = " ".join(text.split())
    return _SENTENCE_END.split(flat) if flat else []


def prose(text: str, italics: bool = True) -> str:
    """A paragraph of prose as roff text lines, one sentence per line (roff's convention)."""
    return protect_lines("\n".join(inline(s, italics) for s in sentences(text)))


def quote_arg(text: str) -> str:
    """``text`` as one quoted macro argument (``.SH "TITLE"``)."""
    if '"' in text or "\n" in text:
        raise ValueError(f"a macro argument cannot hold a quote or newline: {text!r}")
    return f'"{escape_chars(text)}"'


def para(*paragraphs: str) -> str:
    """One ``.PP`` paragraph per argument."""
    return "\n".join(f".PP\n{prose(p)}" for p in paragraphs if p.strip())


def subsection(title: str, *paragraphs: str) -> str:
    """A ``.SS`` heading, then paragraphs."""
    body = para(*paragraphs)
    return f".SS {quote_arg(title)}" + (f"\n{body}" if body else "")


def tagged(items: Iterable[tuple[str, str]], *, literal_terms: bool = True) -> str:
    """A ``.TP`` list: each term (bold when ``literal_terms``) above its indented text."""
    out = []
    for term, text in items:
        t = f"\\fB{escape_chars(term)}\\fR" if literal_terms else inline(term)
        out.append(f".TP\n{protect_lines(t)}\n{prose(text)}")
    return "\n".join(out)


def bullets(items: Iterable[str]) -> str:
    """A bulleted list."""
    return "\n".join(f".IP \\(bu 2\n{prose(item)}" for item in items)


def example(code: str, caption: str | None = None) -> str:
    """A verbatim, indented block (commands, output lines); ``caption`` is prose above it."""
    lines = textwrap.dedent(code).strip("\n").split("\n")
    body = "\n".join("\\&" if not line.strip() else protect_lines(escape_chars(line)) for line in lines)
    head = para(caption) + "\n" if caption else ".PP\n"
    return f"{head}.RS 4\n.nf\n{body}\n.fi\n.RE"


def join(*parts: str) -> str:
    """The non-empty ``parts``, one after the other."""
    return "\n".join(p for p in parts if p)
