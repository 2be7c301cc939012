"""The man pages as reStructuredText, written as roff by docutils' own manpage writer.

Only :mod:`kafkatool.cli.manpage` imports this module, and only while it renders pages (at
development time, and in the tests): docutils is a test dependency, never loaded by ``kafkatool``
itself.

docutils parses the hand-written prose (``kafkatool/cli/manpages/*.rst``, with ``file:line``
errors for a mistake) and the parts :mod:`kafkatool.cli.manpage` generates from Click, and
:func:`write_roff` renders the page with ``docutils.writers.manpage`` (rst2man's writer).
That writer's output differs between docutils release series (0.19 writes ``.ft C`` literal
blocks, later series ``.EX``, other quoting), so the pages in ``man/`` are those of the series
the ``test`` extra pins (:data:`DOCUTILS_SERIES`); the drift test says so when another series is
installed rather than showing a diff.

The constructs a prose file may use: sections (``=`` underline) and subsections (``-``),
paragraphs, ````literal```` (bold) and ``*emphasis*`` (italics), literal blocks (``::``),
definition lists, bullet lists, numbered lists (``1.``), comments, and the directives
``exit-status``, ``click-choices`` and ``generated`` (see :func:`read_prose`). Anything else
(a table, a link, a block quote from a stray indent) is an error naming the file and line.
"""

from __future__ import annotations

import codecs
import io
import re
from dataclasses import dataclass, field
from typing import Callable, Sequence

import click
import docutils
from docutils import nodes, utils
from docutils.core import publish_doctree, publish_from_doctree
from docutils.parsers.rst import Directive, directives
from docutils.statemachine import StringList
from docutils.writers import manpage as stock_manpage

__all__ = [
    "DOCUTILS_SERIES",
    "MARKUP",
    "PageContext",
    "Prose",
    "ProseError",
    "docutils_series",
    "parse_rst",
    "plain_text",
    "read_prose",
    "rst_inline",
    "rst_text",
    "sentences",
    "write_roff",
]

DOCUTILS_SERIES = "0.19"
"""The docutils release series whose manpage writer wrote the pages in ``man/`` (the ``test``
extra pins ``docutils>=0.19,<0.20``): another series writes the same pages with other roff."""


def docutils_series() -> str:
    """The installed docutils' release series, ``"0.19"``."""
    return ".".join(docutils.__version__.split(".")[:2])


class ProseError(Exception):
    """A prose file kafkatool cannot render: ``PATH:LINE: what is wrong``."""


@dataclass
class PageContext:
    """What the directives of one page may ask for."""

    source: str
    """The prose file, as named in errors (``kafkatool/cli/manpages/kafkatool-dump.1.rst``)."""
    command: click.Command | None = None
    """The page's command (``click-choices``, ``generated``), None for a page of its own."""
    exit_codes: dict[int, str] = field(default_factory=dict)
    """Every exit code with its generic meaning (``exit-status``)."""
    generators: dict[str, Callable[[click.Command | None], str]] = field(default_factory=dict)
    """``generated NAME``: the function returning that block's reStructuredText."""


@dataclass
class Prose:
    """One prose file: its top-level sections in order, and its source for messages."""

    source: str
    sections: list[nodes.section]

    def titles(self) -> list[str]:
        """The titles of the top-level sections, in order."""
        return [section_title(s) for s in self.sections]

    def section(self, title: str) -> nodes.section | None:
        return next((s for s in self.sections if section_title(s) == title), None)

    def text(self, title: str) -> str:
        """The plain text of section ``title``'s content, markup dropped, blocks joined by a space."""
        section = self.section(title)
        return " ".join(plain_text(c).strip() for c in section.children[1:] if not isinstance(c, nodes.comment)) if section is not None else ""

    def definitions(self, title: str) -> dict[str, nodes.definition]:
        """Section ``title`` as ``{term: its definition}``; it must hold one definition list."""
        section = self.section(title)
        if section is None:
            return {}
        blocks = [c for c in section.children[1:] if not isinstance(c, nodes.comment)]
        if len(blocks) != 1 or not isinstance(blocks[0], nodes.definition_list):
            raise ProseError(f"{self.source}:{_line(section)}: {title} must be one definition list: each term, then its text indented")
        return {plain_text(term).strip(): definition for term, definition in _items(blocks[0])}


def section_title(section: nodes.section) -> str:
    return plain_text(section[0]) if section.children and isinstance(section[0], nodes.title) else ""


def plain_text(node: nodes.Node) -> str:
    """The text of ``node`` as the reader sees it, markup dropped."""
    return node.astext()


def _items(definition_list: nodes.definition_list) -> list[tuple[nodes.term, nodes.definition]]:
    out = []
    for item in definition_list.children:
        term = next(c for c in item.children if isinstance(c, nodes.term))
        definition = next(c for c in item.children if isinstance(c, nodes.definition))
        out.append((term, definition))
    return out


# --------------------------------------------------------------------------- reading

_SETTINGS = {
    "file_insertion_enabled": False,
    "raw_enabled": False,
    "halt_level": 2,  # a warning stops the parse: the message names the line
    "report_level": 2,
    "input_encoding": "unicode",
}


def read_prose(text: str, context: PageContext) -> Prose:
    """Parse one prose file. Everything must sit in top-level sections; a warning of docutils (an
    unclosed ````literal````, a bad indent) is an error, as is a construct the pages do not use.

    Directives:

    ``.. exit-status::``
        A definition list of exit code -> what it means for this command (optional); every code of
        :class:`~kafkatool.cli.main.ExitCode` not given gets its generic meaning, all in numeric order.
    ``.. click-choices:: --option``
        A definition list of each choice of a ``click.Choice`` option -> what it does, checked
        against the command: a choice missing from the list, or one the option lacks, is an error.
    ``.. generated:: NAME``
        reStructuredText computed from the code (see ``GENERATED`` in :mod:`kafkatool.cli.manpage`).
    """
    document = _parse(text, context.source, {"kafkatool_page": context}, titles=False)
    sections: list[nodes.section] = []
    for child in document.children:
        if isinstance(child, nodes.section):
            sections.append(child)
        elif isinstance(child, nodes.comment):
            continue
        else:
            raise ProseError(
                f"{context.source}:{_line(child)}: text outside a section; every part of a prose file "
                "is in a section whose title (underlined with `=`) is the man page's section title"
            )
    for section in sections:
        _check(section, context.source)
    return Prose(context.source, sections)


def parse_rst(text: str, source: str, *, titles: bool = False) -> nodes.document:
    """reStructuredText that :mod:`kafkatool.cli.manpage` generated from Click. With ``titles``,
    the document's title, subtitle and field list become the page's name, one-line description
    and ``.TH`` fields (rst2man's conventions: ``:Manual section:``, ``:Manual group:``, ``:Version:``)."""
    return _parse(text, source, {}, titles=titles)


def _parse(text: str, source: str, settings: dict, *, titles: bool) -> nodes.document:
    warnings = io.StringIO()
    try:
        return publish_doctree(
            text,
            source_path=source,
            settings_overrides={
                **_SETTINGS,
                "doctitle_xform": titles,
                "docinfo_xform": titles,
                "sectsubtitle_xform": False,
                "warning_stream": warnings,
                **settings,
            },
        )
    except utils.SystemMessage as exc:
        raise ProseError(_message(str(exc), source)) from None


def _message(text: str, source: str) -> str:
    # docutils says "<source>:<line>: (SEVERE/4) message"; keep one line per problem.
    text = re.sub(r"\((?:INFO|WARNING|ERROR|SEVERE)/\d\) ", "", text.strip())
    return text if text.startswith(source) else f"{source}: {text}"


def _line(node: nodes.Node) -> str:
    """The line of ``node`` in its file: its own, else its first descendant's (a table's first
    row), else its nearest ancestor's."""
    line = getattr(node, "line", None) or _first_line(node)
    while line is None and node.parent is not None:
        node = node.parent
        line = getattr(node, "line", None)
    return str(line) if line is not None else "?"


def _first_line(node: nodes.Node) -> int | None:
    for child in getattr(node, "children", ()):
        line = getattr(child, "line", None) or _first_line(child)
        if line is not None:
            return line
    return None


#: What a prose section may hold. The manpage writer renders more (tables, links, block quotes),
#: but in a terminal those read badly, and a block quote is nearly always a stray indent.
_ALLOWED = (
    nodes.Text,
    nodes.title,
    nodes.section,
    nodes.paragraph,
    nodes.literal,
    nodes.emphasis,
    nodes.strong,
    nodes.literal_block,
    nodes.definition_list,
    nodes.definition_list_item,
    nodes.term,
    nodes.definition,
    nodes.bullet_list,
    nodes.enumerated_list,
    nodes.list_item,
    nodes.comment,
)


def _check(section: nodes.section, source: str) -> None:
    """Raise :class:`ProseError` if ``section`` holds something the pages do not use."""
    for node in section.findall(include_self=False):
        if isinstance(node, nodes.system_message) and node.get("level", 0) <= 1:
            continue
        allowed = isinstance(node, _ALLOWED)
        if isinstance(node, nodes.section):
            allowed = not isinstance(node.parent.parent, nodes.section)  # man pages have .SH and .SS only
        elif isinstance(node, nodes.literal_block):
            allowed = not (node.get("classes") or node.get("language"))  # no highlighting in a man page
        elif isinstance(node, nodes.enumerated_list):
            allowed = node.get("enumtype", "arabic") == "arabic"
        elif isinstance(node, nodes.title) and node.parent is section and '"' in plain_text(node):
            raise ProseError(f'{source}:{_line(node)}: a section title cannot hold a "')
        if not allowed:
            raise ProseError(
                f"{source}:{_line(node)}: a {node.tagname} cannot go into a man page here; use paragraphs, "
                "``literal``, *emphasis*, literal blocks (::), definition lists, bullet or numbered lists, "
                "subsections, and the directives exit-status, click-choices and generated"
            )


def _context(directive: Directive) -> PageContext:
    return directive.state.document.settings.kafkatool_page


def _parse_block(directive: Directive, lines: Sequence[str] | StringList, offset: int) -> list[nodes.Node]:
    holder = nodes.Element()
    block = lines if isinstance(lines, StringList) else StringList(list(lines), source=_context(directive).source)
    directive.state.nested_parse(block, offset, holder)
    return list(holder.children)


def _definitions(directive: Directive) -> list[tuple[str, nodes.definition]]:
    """The content of a directive as ``[(term text, definition)]``; it must be one definition list."""
    if not directive.content:
        return []
    children = [c for c in _parse_block(directive, directive.content, directive.content_offset) if not isinstance(c, nodes.comment)]
    if len(children) != 1 or not isinstance(children[0], nodes.definition_list):
        raise directive.error(f'the content of "{directive.name}" must be one definition list (a term, then its text indented)')
    return [(plain_text(term).strip(), definition) for term, definition in _items(children[0])]


def _paragraph(directive: Directive, text: str) -> nodes.paragraph:
    """One paragraph from house-style prose (```literal```, ``*name*``), one sentence per line."""
    rst = rst_text(text)
    nodes_, messages = directive.state.inline_text(rst, directive.lineno)
    if messages:
        raise directive.error(f"cannot render {text!r}")
    return nodes.paragraph(rst, "", *nodes_)


def _item(term: str, body: Sequence[nodes.Node]) -> nodes.definition_list_item:
    return nodes.definition_list_item(
        "", nodes.term("", "", nodes.literal(term, term)), nodes.definition("", *[b.deepcopy() for b in body])
    )


class ExitStatus(Directive):
    """``.. exit-status::`` (see :func:`read_prose`)."""

    has_content = True

    def run(self) -> list[nodes.Node]:
        generic = _context(self).exit_codes
        given: dict[int, nodes.definition] = {}
        for term, definition in _definitions(self):
            if not re.fullmatch(r"\d+", term):
                raise self.error(f"exit-status: {term!r} is not an exit code")
            given[int(term)] = definition
        items = []
        for code in sorted({*generic, *given}):
            body = list(given[code].children) if code in given else [_paragraph(self, generic[code])]
            items.append(_item(str(code), body))
        return [nodes.definition_list("", *items)] if items else []


class ClickChoices(Directive):
    """``.. click-choices:: --option`` (see :func:`read_prose`)."""

    has_content = True
    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        command = _context(self).command
        name = self.arguments[0]
        option = None
        if command is not None:
            option = next((p for p in command.params if isinstance(p, click.Option) and name in p.opts), None)
        if option is None or not isinstance(option.type, click.Choice):
            raise self.error(f"click-choices: the command has no option {name} with a list of choices")
        choices = [str(c) for c in option.type.choices]
        given = dict(_definitions(self))
        missing = [c for c in choices if c not in given]
        unknown = [c for c in given if c not in choices]
        if missing or unknown:
            raise self.error(
                f"click-choices {name}: "
                + "; ".join(
                    part
                    for part in (
                        f"describe {', '.join(missing)}" if missing else "",
                        f"{', '.join(unknown)} is no choice of {name}" if unknown else "",
                    )
                    if part
                )
            )
        return [nodes.definition_list("", *(_item(c, list(given[c].children)) for c in choices))]


class Generated(Directive):
    """``.. generated:: NAME`` (see :func:`read_prose`)."""

    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        context = _context(self)
        generate = context.generators.get(self.arguments[0])
        if generate is None:
            raise self.error(f"generated: no generator {self.arguments[0]!r} (known: {', '.join(sorted(context.generators))})")
        text = generate(context.command)
        return _parse_block(self, text.splitlines(), self.content_offset)


directives.register_directive("exit-status", ExitStatus)
directives.register_directive("click-choices", ClickChoices)
directives.register_directive("generated", Generated)


# --------------------------------------------------------------------------- writing roff


class _Translator(stock_manpage.Translator):
    """The stock translator, but for the comment it opens the page with (where the page comes
    from) and two requests after ``.TH``."""

    def __init__(self, document: nodes.document) -> None:
        super().__init__(document)
        self.document_start = document.settings.kafkatool_header

    def header(self) -> str:
        # No hyphenation and a ragged right margin, so an option or a field name
        # (--max-decompressed-bytes, batchesDiscarded) is never split across lines. They must
        # follow .TH, which resets both, and precede NAME's text, which the stock header writes
        # right after .TH: no node of the document can go there (a raw node lands after NAME).
        th, rest = super().header().split("\n", 1)
        return f"{th}\n.nh\n.ad l\n{rest}"


class _Writer(stock_manpage.Writer):
    def __init__(self) -> None:
        super().__init__()
        self.translator_class = _Translator


def _roff_character(error: UnicodeEncodeError) -> tuple[str, int]:
    return "".join(f"\\[u{ord(c):04X}]" for c in error.object[error.start : error.end]), error.end


# The writer leaves characters beyond ASCII as they are; groff without preconv (groff -man, as
# the tests run it) takes them for invalid input. docutils encodes its output with the
# output_encoding_error_handler setting, so this codec error handler writes them as \[uXXXX].
codecs.register_error("kafkatool-roff", _roff_character)


def write_roff(document: nodes.document, header: str) -> str:
    """``document`` (a page: title, subtitle, docinfo, sections) as roff, by docutils' manpage
    writer, in ASCII (other characters as ``\\[uXXXX]``); ``header`` (lines) is the comment the
    page starts with."""
    return publish_from_doctree(
        document,
        writer=_Writer(),
        settings_overrides={
            "output_encoding": "ascii",
            "output_encoding_error_handler": "kafkatool-roff",
            "report_level": 2,
            "halt_level": 2,
            "warning_stream": io.StringIO(),
            "kafkatool_header": header,
        },
    ).decode("ascii")


# --------------------------------------------------------------------------- house style to rst

MARKUP = re.compile(r"`([^`]+)`|\*([^*\s](?:[^*]*[^*\s])?)\*")
"""House-style markup in prose (docstrings, ``verify.KINDS``): ```literal``` (group 1), ``*name*`` (group 2)."""
_LITERALS = re.compile(r"`([^`]+)`()")  # for Click's own texts, where a ``*`` may be a glob
_SENTENCE_END = re.compile(r"(?<=[a-z0-9)\]'\"`][.!?])\s+(?=[A-Z`(])")
_BLOCK_START = re.compile(r"[-+\u2022#(:.]|\*\s|\d+[.)]")
_START_OK = set("-:/'\"<([{")
_END_OK = set("-.,:;!?\\/'\")]}>")


def sentences(text: str) -> list[str]:
    """``text`` with its whitespace folded, split after each sentence (one sentence per line)."""
    flat = " ".join(text.split())
    return _SENTENCE_END.split(flat) if flat else []


def rst_text(text: str, italics: bool = True) -> str:
    """House-style prose as reStructuredText lines, one sentence per line (see :func:`rst_inline`)."""
    rst = "\n".join(rst_inline(s, italics) for s in sentences(text))
    # A paragraph that starts like a list item, a field, a directive or an option would be read as one.
    return "\\" + rst if _BLOCK_START.match(rst) else rst


def rst_inline(text: str, italics: bool = True) -> str:
    """House-style prose (```literal```, ``*name*``, as in docstrings and ``verify.KINDS``) as
    reStructuredText inline text: ````literal````, ``*name*`` (with ``italics``; without, as in
    Click's help texts, a ``*`` is a glob), everything else escaped."""
    out: list[str] = []
    last = 0
    for m in (MARKUP if italics else _LITERALS).finditer(text):
        out.append(_escape(text[last : m.start()]))
        token = f"``{m.group(1)}``" if m.group(1) is not None else f"*{_escape(m.group(2))}*"
        before = text[m.start() - 1] if m.start() else " "
        after = text[m.end()] if m.end() < len(text) else " "
        if not (before.isspace() or before in _START_OK):
            out.append("\\ ")
        out.append(token)
        if not (after.isspace() or after in _END_OK):
            out.append("\\ ")
        last = m.end()
    out.append(_escape(text[last:]))
    return "".join(out)


def _escape(text: str) -> str:
    text = re.sub(r"([\\*`|])", r"\\\1", text)
    return re.sub(r"(?<=\w)_(?=\W|$)", r"\\_", text)  # ``name_`` would be a reference
