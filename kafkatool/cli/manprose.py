"""The hand-written part of the man pages: reStructuredText, read by docutils, written as roff.

Only :mod:`kafkatool.cli.manpage` imports this module, and only while it renders pages (at
development time, and in the tests): docutils is a test dependency, never loaded by ``kafkatool``
itself.

docutils parses the prose (with ``file:line`` errors for a mistake) into its document tree; the
roff is written by :class:`RoffWriter`, a small visitor with the man(7) macros of
:mod:`kafkatool.cli.roff`, so a prose section looks like the sections generated from Click beside
it, and the pages in ``man/`` come out byte for byte the same whatever the docutils release (the
stock manpage writer's output changes between releases: ``.nf``/``.ft C`` or ``.EX``, ``.B`` terms,
title case, its own ``.INDENT`` macros).

The constructs a prose file may use: sections (``=`` underline) and subsections (``-``),
paragraphs, ````literal```` (bold) and ``*emphasis*`` (italics), literal blocks (``::``),
definition lists, bullet lists, numbered lists (``1.``), comments, and the directives
``exit-status``, ``click-choices`` and ``generated`` (see :func:`read_prose`). Anything else is an
error naming the file and line, rather than roff that renders badly.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, field
from typing import Callable, Sequence

import click
from docutils import nodes, utils
from docutils.core import publish_doctree
from docutils.parsers.rst import Directive, directives
from docutils.statemachine import StringList

from kafkatool.cli import roff

__all__ = ["PageContext", "Prose", "ProseError", "RoffWriter", "plain_text", "read_prose", "rst_inline", "to_roff"]


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

    def roff(self, title: str) -> str:
        """The content of section ``title`` (after its title) as roff."""
        section = self.section(title)
        return to_roff(section.document, section.children[1:], self.source) if section is not None else ""

    def text(self, title: str) -> str:
        """The plain text of section ``title``'s content, markup dropped, blocks joined by a space."""
        section = self.section(title)
        return " ".join(plain_text(c).strip() for c in section.children[1:] if not isinstance(c, nodes.comment)) if section is not None else ""

    def definitions(self, title: str) -> dict[str, str]:
        """Section ``title`` as ``{term: roff of its definition}``; it must hold one definition list."""
        section = self.section(title)
        if section is None:
            return {}
        blocks = [c for c in section.children[1:] if not isinstance(c, nodes.comment)]
        if len(blocks) != 1 or not isinstance(blocks[0], nodes.definition_list):
            raise ProseError(f"{self.source}:{_line(section)}: {title} must be one definition list: each term, then its text indented")
        out = {}
        for item in blocks[0].children:
            term = next(c for c in item.children if isinstance(c, nodes.term))
            definition = next(c for c in item.children if isinstance(c, nodes.definition))
            out[plain_text(term).strip()] = to_roff(section.document, definition.children, self.source)
        return out


def section_title(section: nodes.section) -> str:
    return plain_text(section[0]) if section.children and isinstance(section[0], nodes.title) else ""


def plain_text(node: nodes.Node) -> str:
    """The text of ``node`` as the reader sees it, markup dropped."""
    return node.astext()


# --------------------------------------------------------------------------- reading


def read_prose(text: str, context: PageContext) -> Prose:
    """Parse one prose file. Everything must sit in top-level sections; a warning of docutils (an
    unclosed ````literal````, a bad indent) is an error, as is a construct :class:`RoffWriter` does not write.

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
    warnings = io.StringIO()
    try:
        document = publish_doctree(
            text,
            source_path=context.source,
            settings_overrides={
                "doctitle_xform": False,
                "docinfo_xform": False,
                "sectsubtitle_xform": False,
                "file_insertion_enabled": False,
                "raw_enabled": False,
                "halt_level": 2,  # a warning stops the parse: the message names the line
                "report_level": 2,
                "warning_stream": warnings,
                "input_encoding": "unicode",
                "kafkatool_page": context,
            },
        )
    except utils.SystemMessage as exc:
        raise ProseError(_message(str(exc), context.source)) from None
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
        RoffWriter(document, context.source).check(section)
    return Prose(context.source, sections)


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
    out = []
    for item in children[0].children:
        term = next(c for c in item.children if isinstance(c, nodes.term))
        definition = next(c for c in item.children if isinstance(c, nodes.definition))
        out.append((plain_text(term).strip(), definition))
    return out


def _paragraph(directive: Directive, text: str) -> nodes.paragraph:
    """One paragraph from house-style prose (```literal```, ``*name*``), one sentence per line."""
    rst = "\n".join(rst_inline(s) for s in roff.sentences(text))
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


# --------------------------------------------------------------------------- house style to rst

_START_OK = set("-:/'\"<([{")
_END_OK = set("-.,:;!?\\/'\")]}>")


def rst_inline(text: str) -> str:
    """House-style prose (```literal```, ``*name*``, as in docstrings and ``verify.KINDS``) as
    reStructuredText inline text: ````literal````, ``*name*``, everything else escaped."""
    out: list[str] = []
    last = 0
    for m in roff.MARKUP.finditer(text):
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


# --------------------------------------------------------------------------- writing roff


class RoffWriter(nodes.NodeVisitor):
    """A document tree (the body of one section) as man(7) roff, escaped as :mod:`kafkatool.cli.roff` escapes.

    Paragraphs are ``.PP``; a definition list is ``.TP`` items with the term on the tag line; a
    bullet list ``.IP \\(bu 2``, a numbered one ``.IP "N." 4``; a further paragraph of an item
    ``.IP`` at the item's indent; a literal block ``.RS 4``/``.nf``, right under a paragraph that
    introduces it (else after a ``.PP``), or ``.RS``/``.nf`` inside a list item; a subsection ``.SS``.
    """

    def __init__(self, document: nodes.document, source: str) -> None:
        super().__init__(document)
        self.source = source
        self.out: list[str] = []
        self.checking = False

    # -- driving

    def render(self, body: Sequence[nodes.Node]) -> str:
        for node in body:
            node.walkabout(self)
        return "".join(self.out).strip("\n")

    def check(self, section: nodes.section) -> None:
        """Raise :class:`ProseError` if ``section`` holds something this writer cannot write."""
        self.checking = True
        for child in section.children[1:]:
            child.walkabout(self)
        self.out.clear()
        self.checking = False

    def unknown_visit(self, node: nodes.Node) -> None:
        raise ProseError(
            f"{self.source}:{_line(node)}: a {node.tagname} cannot go into a man page here; use paragraphs, "
            "``literal``, *emphasis*, literal blocks (::), definition lists, bullet or numbered lists, "
            "subsections, and the directives exit-status, click-choices and generated"
        )

    def unknown_departure(self, node: nodes.Node) -> None:
        pass

    # -- output helpers

    def _at_line_start(self) -> bool:
        return not self.out or self.out[-1].endswith("\n")

    def _macro(self, line: str) -> None:
        if not self._at_line_start():
            self.out.append("\n")
        self.out.append(line + "\n")

    def _end_line(self) -> None:
        if not self._at_line_start():
            self.out.append("\n")

    # -- text

    def visit_Text(self, node: nodes.Text) -> None:
        text = roff.escape_chars(node.astext())
        text = re.sub(r"\n(?=[.'])", "\n\\&", text)
        if self._at_line_start() and text[:1] in (".", "'"):
            text = "\\&" + text
        self.out.append(text)

    def visit_literal(self, node: nodes.Node) -> None:
        self.out.append("\\fB")

    def depart_literal(self, node: nodes.Node) -> None:
        self.out.append("\\fR")

    visit_strong, depart_strong = visit_literal, depart_literal

    def visit_emphasis(self, node: nodes.Node) -> None:
        self.out.append("\\fI")

    depart_emphasis = depart_literal

    # -- blocks

    def visit_comment(self, node: nodes.Node) -> None:
        raise nodes.SkipNode

    def visit_section(self, node: nodes.section) -> None:
        if isinstance(node.parent, nodes.section) and isinstance(node.parent.parent, nodes.section):
            self.unknown_visit(node)  # a third level: man pages have .SH and .SS only

    def visit_title(self, node: nodes.title) -> None:
        if not isinstance(node.parent, nodes.section):
            self.unknown_visit(node)
        title = plain_text(node)
        if '"' in title:
            raise ProseError(f'{self.source}:{_line(node)}: a section title cannot hold a "')
        self._macro(f".SS {roff.quote_arg(title)}")
        raise nodes.SkipNode

    def _item_indent(self, node: nodes.Node) -> str | None:
        """The indent of the list item or definition ``node`` sits in, None outside one."""
        parent = node.parent
        if isinstance(parent, nodes.definition):
            return ""
        if isinstance(parent, nodes.list_item):
            return "2" if isinstance(parent.parent, nodes.bullet_list) else "4"
        return None

    def visit_paragraph(self, node: nodes.paragraph) -> None:
        indent = self._item_indent(node)
        if indent is None:
            self._macro(".PP")
        elif node.parent.index(node) > 0:
            self._macro('.IP "" ' + indent if indent else ".IP")
        else:
            self._end_line()

    def depart_paragraph(self, node: nodes.paragraph) -> None:
        self._end_line()

    def visit_literal_block(self, node: nodes.literal_block) -> None:
        if node.get("classes") or node.get("language"):
            self.unknown_visit(node)  # a code directive: no highlighting in a man page
        lines = node.astext().split("\n")
        body = "\n".join("\\&" if not line.strip() else roff.protect_lines(roff.escape_chars(line)) for line in lines)
        if self._item_indent(node) is not None:
            self._macro(".RS")
        else:
            # Right under the paragraph that introduces it (``text::``); a block of its own (a
            # paragraph ``::``) after a .PP.
            previous = node.parent.index(node) - 1
            introduced = previous >= 0 and isinstance(node.parent[previous], nodes.paragraph)
            if not (introduced and node.parent[previous].rawsource.rstrip().endswith("::")):
                self._macro(".PP")
            self._macro(".RS 4")
        self._macro(".nf")
        self.out.append(body + "\n")
        self._macro(".fi")
        self._macro(".RE")
        raise nodes.SkipNode

    def visit_definition_list(self, node: nodes.Node) -> None:
        pass

    def visit_definition_list_item(self, node: nodes.Node) -> None:
        self._macro(".TP")

    def visit_term(self, node: nodes.Node) -> None:
        self._end_line()

    def depart_term(self, node: nodes.Node) -> None:
        self._end_line()

    def visit_definition(self, node: nodes.Node) -> None:
        pass

    def visit_bullet_list(self, node: nodes.Node) -> None:
        pass

    def visit_enumerated_list(self, node: nodes.Node) -> None:
        if node.get("enumtype", "arabic") != "arabic":
            self.unknown_visit(node)

    def visit_list_item(self, node: nodes.list_item) -> None:
        parent = node.parent
        if isinstance(parent, nodes.bullet_list):
            self._macro(".IP \\(bu 2")
        else:
            number = parent.get("start", 1) + parent.index(node)
            self._macro(f'.IP "{number}." 4')

    def visit_system_message(self, node: nodes.Node) -> None:
        if node.get("level", 0) > 1:
            self.unknown_visit(node)
        raise nodes.SkipNode


def to_roff(document: nodes.document, body: Sequence[nodes.Node], source: str) -> str:
    """``body`` (nodes of ``document``) as roff."""
    return RoffWriter(document, source).render(body)
