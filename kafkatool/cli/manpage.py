"""Man pages: generated from the Click definitions (the httpie/hatch model), with hand-written prose.

``python -m kafkatool.cli.manpage man/`` writes ``kafkatool.1``, one ``kafkatool-<command>.1`` per
command of :data:`kafkatool.cli.main.cli`, and the pages of their own (``kafkatool-runbooks.7``);
``--check`` only lists the pages that are out of date. ``man/`` is committed; the tests fail when it
differs from what this module writes now.

Every page is one reStructuredText document, written as roff by docutils' own manpage writer (the
writer of rst2man; :func:`kafkatool.cli.manprose.write_roff`). Two sources make the document:

- **The Click definition** gives the title (the page name), the subtitle (the one-line
  description, NAME's text), the ``.TH`` fields (rst2man's docinfo ``:Manual section:``,
  ``:Manual group:``, ``:Version:``; no ``:Date:``, so a page changes only with its sources),
  DESCRIPTION (the docstring), SYNOPSIS (Click's usage), OPTIONS (a definition list of every
  option with its help, default and environment variable), the names of the ARGUMENTS, the
  group's COMMANDS, the generic EXIT STATUS (:class:`~kafkatool.cli.main.ExitCode` and its member
  docstrings) and SEE ALSO's list of the other pages. Change those in the command's code.
- **The prose file** ``kafkatool/cli/manpages/<page>.rst`` (``kafkatool-verify.1.rst``: package
  data, one per page, required for every command) holds what a docstring cannot say. Each of its
  top-level sections (titles underlined with ``=``) is a section of the page, in order, after
  OPTIONS and ARGUMENTS; three titles are special:

  ``ARGUMENTS``
      a definition list, one item per argument, the term its metavar (``PATHS``); an argument
      without one is described from Click (``Any number of values; required.``).
  ``EXIT STATUS``
      usually ``.. exit-status::`` with a definition list of the codes' meanings for this command;
      a page without the section gets the generic one.
  ``SEE ALSO``
      one line, ``kafkatool-runbooks(7), jq(1)``: added after kafkatool(1) and the other command pages.

  The directive ``.. generated:: NAME`` inserts text computed from the code (:data:`GENERATED`:
  the finding kinds of verify, the kafka-dump-log options dump lacks) and
  ``.. click-choices:: --option`` checks a list of an option's choices against the option.
  A prose file whose name is no command's page, such as ``kafkatool-runbooks.7.rst``, is a page of
  its own: its first section is NAME (``kafkatool-runbooks - what it is``), the section number is
  in the file name, and SEE ALSO gets every command page.

The pages in ``man/`` are what docutils 0.19 writes: the manpage writer's roff differs between
release series, so the ``test`` extra pins ``docutils>=0.19,<0.20``, and :func:`check` and
:func:`write_all` refuse another series (:class:`WrongDocutils`) rather than report every page as
changed.

Adding a command: write its docstring and option help, then ``kafkatool/cli/manpages/kafkatool-<command>.1.rst``
(copy ``kafkatool-verify.1.rst``), then regenerate. The output is deterministic: no dates, only the
package version. docutils is needed only here (the ``test`` extra), never by ``kafkatool`` itself.
"""

from __future__ import annotations

import ast
import enum
import inspect
import re
import sys
import textwrap
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Sequence

import click

from kafkatool import __version__

if TYPE_CHECKING:  # pragma: no cover
    from docutils import nodes

    from kafkatool.cli import manprose

__all__ = [
    "EXTRA_PAGES",
    "GENERATED",
    "PROSE_DIR",
    "ProseMissing",
    "WrongDocutils",
    "check",
    "exit_status",
    "main",
    "page_name",
    "prose_file",
    "render_command_page",
    "render_group_page",
    "render_pages",
    "render_runbooks_page",
    "write_all",
]

PROG = "kafkatool"
MANUAL = "kafkatool manual"
SECTION = "1"
REGENERATE = "python -m kafkatool.cli.manpage man/"
PROSE_DIR = "kafkatool/cli/manpages"
"""Where the prose files are, relative to the repository (and, as package data, to site-packages)."""
GENERATED_TITLES = ("NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "COMMANDS")
"""Sections a command page takes from Click, which its prose file must not have."""


class ProseMissing(LookupError):
    """A command of kafkatool has no prose file; the message says which file to write."""


class WrongDocutils(RuntimeError):
    """The installed docutils is not the release series whose manpage writer wrote ``man/``."""


# --------------------------------------------------------------------------- the prose files


def _prose_dir() -> "resources.abc.Traversable":
    return resources.files("kafkatool.cli").joinpath("manpages")


def _prose_names() -> list[str]:
    """The pages that have a prose file: ``["kafkatool-dump.1", ..., "kafkatool-runbooks.7"]``."""
    directory = _prose_dir()
    if not directory.is_dir():
        return []
    return sorted(f.name[: -len(".rst")] for f in directory.iterdir() if f.name.endswith(".rst"))


def prose_file(page: str) -> str:
    """The prose file of ``page`` (``kafkatool-dump.1``), as the repository names it."""
    return f"{PROSE_DIR}/{page}.rst"


#: The pages of their own (not a command's), by file name: written, checked and listed in
#: kafkatool(1)'s SEE ALSO along with the command pages. Each is ``<name>.<section>.rst`` in
#: :data:`PROSE_DIR` with a section other than 1, e.g. ``kafkatool-runbooks.7``.
EXTRA_PAGES: dict[str, str] = {
    name: prose_file(name) for name in _prose_names() if name.rpartition(".")[2] != SECTION
}


def _manprose() -> "manprose":
    try:
        from kafkatool.cli import manprose
    except ImportError as exc:  # pragma: no cover - docutils not installed
        raise ImportError(
            f"the man pages are rendered with docutils ({exc}); install it: pip install -e '.[test]'"
        ) from exc
    return manprose


def _read_prose(page: str, command: click.Command | None, *, required: bool) -> "manprose.Prose | None":
    """The parsed prose file of ``page``; None when there is none and it is not ``required``."""
    file = _prose_dir().joinpath(f"{page}.rst")
    if not file.is_file():
        if required:
            raise ProseMissing(
                f"{page} has no prose file: write {prose_file(page)} (its hand-written sections in "
                f"reStructuredText, at least EXAMPLES; {prose_file('kafkatool-verify.1')} is a model), "
                f"then run {REGENERATE}"
            )
        return None
    mp = _manprose()
    context = mp.PageContext(
        source=prose_file(page),
        command=command,
        exit_codes={value: doc for value, _name, doc in _exit_codes()},
        generators=GENERATED,
    )
    return mp.read_prose(file.read_text(encoding="utf-8"), context)


def _prose_error(source: str, message: str) -> Exception:
    return _manprose().ProseError(f"{source}: {message}")


# --------------------------------------------------------------------------- Click introspection


def _is_unset(value: object) -> bool:
    # Click >= 8.3 marks "no default" with an enum sentinel instead of None.
    return value is None or (isinstance(value, enum.Enum) and value.name == "UNSET")


def _context(command: click.Command, name: str, parent: click.Context | None = None) -> click.Context:
    return click.Context(command, info_name=name, parent=parent, **(command.context_settings or {}))


def _help_text(command: click.Command) -> str:
    text = inspect.cleandoc(command.help or "")
    return text.split("\f", 1)[0].strip()


def _short_help(command: click.Command) -> str:
    return " ".join(command.get_short_help_str(limit=10_000).split()).rstrip(".")


def _metavar(param: click.Parameter, ctx: click.Context) -> str:
    try:
        return param.make_metavar(ctx)  # Click >= 8.2
    except TypeError:  # pragma: no cover - Click 8.1
        return param.make_metavar()  # type: ignore[call-arg]


def _option_default(opt: click.Option, ctx: click.Context) -> str | None:
    if opt.show_default is False:
        return None
    if isinstance(opt.show_default, str):
        return opt.show_default
    default = opt.get_default(ctx, call=False)
    if _is_unset(default) or callable(default):
        return None
    if (opt.is_flag and not opt.secondary_opts) or (opt.count and not default):
        return None  # a plain flag is off, a counter 0, unless given
    if opt.is_flag:
        return (opt.opts if default else opt.secondary_opts)[0]
    if isinstance(default, (list, tuple)):
        if not default:
            return None
        return ", ".join(str(d) for d in default)
    if isinstance(default, enum.Enum):
        return str(default.value)
    return str(default)


def _option_help(opt: click.Option, ctx: click.Context) -> str:
    parts = [" ".join(inspect.cleandoc(opt.help or "").split())]
    default = _option_default(opt, ctx)
    if default is not None and default != "":
        parts.append(f"Default: `{default}`.")
    if opt.multiple:
        parts.append("May be given more than once.")
    if opt.required:
        parts.append("Required.")
    if opt.envvar:
        envvars = [opt.envvar] if isinstance(opt.envvar, str) else list(opt.envvar)
        parts.append("Environment variable: " + ", ".join(f"`{e}`" for e in envvars) + ".")
    if getattr(opt, "deprecated", False):
        parts.append("Deprecated.")
    return " ".join(p for p in parts if p)


def _visible_options(command: click.Command, ctx: click.Context) -> list[click.Option]:
    return [p for p in command.get_params(ctx) if isinstance(p, click.Option) and not p.hidden]


def _arguments(command: click.Command) -> list[click.Argument]:
    return [p for p in command.params if isinstance(p, click.Argument)]


def _argument_help(arg: click.Argument) -> str:
    """What a page says of an argument its prose does not describe."""
    own = getattr(arg, "help", None)  # Argument subclasses may carry help
    if own:
        return " ".join(str(own).split())
    count = "Any number of values" if arg.nargs == -1 else ("One value" if arg.nargs == 1 else f"{arg.nargs} values")
    return f"{count}; {'required' if arg.required else 'optional'}."


def _argument_label(arg: click.Argument) -> str:
    return (arg.metavar or (arg.name or "").upper()).strip("[]").rstrip(".")


def page_name(path: Sequence[str]) -> str:
    """``kafkatool`` for the group, ``kafkatool-dump`` for ``("dump",)``."""
    return "-".join([PROG, *path])


def _exit_codes() -> list[tuple[int, str, str]]:
    """``(value, name, description)`` per ExitCode member, descriptions from the attribute docstrings."""
    from kafkatool.cli.main import ExitCode

    docs: dict[str, str] = {}
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(ExitCode)))
        body = tree.body[0].body  # type: ignore[attr-defined]
        for stmt, nxt in zip(body, body[1:]):
            if (
                isinstance(stmt, ast.Assign)
                and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)
                and isinstance(nxt, ast.Expr)
                and isinstance(nxt.value, ast.Constant)
                and isinstance(nxt.value.value, str)
            ):
                docs[stmt.targets[0].id] = " ".join(nxt.value.value.split())
    except (OSError, TypeError, SyntaxError):  # pragma: no cover - no source (frozen)
        pass
    out = []
    for member in ExitCode:
        doc = docs.get(member.name) or ("Success." if member.value == 0 else member.name.replace("_", " ").capitalize() + ".")
        out.append((int(member.value), member.name, doc))
    return out


# --------------------------------------------------------------------------- the generated reStructuredText


def _rst(text: str, italics: bool = True) -> str:
    """House-style prose (```literal```, ``*name*``) as reStructuredText, one sentence per line."""
    return _manprose().rst_text(text, italics)


def _inline(text: str, italics: bool = True) -> str:
    return _manprose().rst_inline(text, italics)


def _section(title: str, body: str) -> str:
    return f"{title}\n{'=' * len(title)}\n\n{body}\n" if body.strip() else ""


def _definition_list(items: Iterable[tuple[str, str]]) -> str:
    """``(term, body)`` pairs, both reStructuredText, as a definition list."""
    return "\n\n".join(f"{term}\n" + textwrap.indent(body or ".. (no description)", "   ") for term, body in items)


def _head(name: str, section: str, description: str) -> str:
    """The page's title, subtitle and ``.TH`` fields, in rst2man's conventions."""
    title, subtitle = _inline(name), _inline(description, False)
    return (
        f"{'=' * len(title)}\n{title}\n{'=' * len(title)}\n\n"
        f"{'-' * len(subtitle)}\n{subtitle}\n{'-' * len(subtitle)}\n\n"
        f":Manual section: {section}\n:Manual group: {MANUAL}\n:Version: {PROG} {__version__}\n"
    )


def _usage_rst(prog: str, pieces: Sequence[str]) -> str:
    words = [f"**{prog}**"]
    for piece in pieces:
        words.append(_inline(re.sub(r"[A-Z][A-Z0-9_]*", lambda m: f"*{m.group(0)}*", piece)))
    return " ".join(words)


def _docstring_rst(text: str) -> str:
    """Click help text: blank-line paragraphs; a paragraph led by ``\\b`` keeps its lines (a line block)."""
    out = []
    for block in re.split(r"\n\s*\n", text):
        if not block.strip():
            continue
        if block.lstrip().startswith("\b"):
            lines = block.lstrip()[1:].strip("\n").split("\n")
            out.append("\n".join(f"| {_inline(ln, False)}".rstrip() for ln in lines))
        else:
            out.append(_rst(block, italics=False))
    return "\n\n".join(out)


def _option_term(opt: click.Option, ctx: click.Context) -> str:
    ordered = sorted(opt.opts, key=lambda n: len(n) - len(n.lstrip("-/+"))) + list(opt.secondary_opts)
    names = ", ".join(f"`{n}`" for n in ordered)
    if opt.is_flag or opt.count:
        return _inline(names)
    if isinstance(opt.type, click.Choice) and opt.metavar is None:
        value = "|".join(f"`{c}`" for c in opt.type.choices)
    else:
        mv = _metavar(opt, ctx)
        dots = mv.endswith("...")
        mv = mv[:-3] if dots else mv
        value = f"*{mv}*" + ("..." if dots else "")
    return _inline(f"{names} {value}")


def _options_rst(command: click.Command, ctx: click.Context) -> str:
    return _definition_list(
        (_option_term(opt, ctx), _rst(_option_help(opt, ctx), italics=False)) for opt in _visible_options(command, ctx)
    )


def _arguments_rst(command: click.Command) -> str:
    """One item per argument, its metavar and what Click knows; the prose file's ARGUMENTS replace
    the descriptions (:func:`_describe_arguments`)."""
    return _definition_list(
        (_inline(f"*{_argument_label(arg)}*") + ("..." if arg.nargs == -1 or arg.nargs > 1 else ""), _rst(_argument_help(arg)))
        for arg in _arguments(command)
    )


def _commands_rst(group: click.Group, path: tuple[str, ...]) -> str:
    items = []
    for name in sorted(group.commands):
        command = group.commands[name]
        if command.hidden:
            continue
        see = f"See **{page_name((*path, name))}**\\ ({SECTION})."
        items.append((_inline(f"`{name}`"), _rst(_short_help(command) + ".", italics=False) + "\n" + see))
    return _definition_list(items)


def exit_status(meanings: dict[int, str] | None = None) -> str:
    """An EXIT STATUS body in reStructuredText: one entry per :class:`ExitCode` member, ``meanings``
    replacing the generic descriptions (from the member docstrings) with what a code means for one command."""
    meanings = meanings or {}
    codes = {v: doc for v, _name, doc in _exit_codes()}
    return _definition_list((f"``{v}``", _rst(meanings.get(v, codes.get(v, "")))) for v in sorted({*codes, *meanings}))


def _see_also(names: Iterable[str]) -> str:
    """``name`` means ``name(1)``; ``name(N)`` is taken as written; each page once, in first-seen order."""
    out: dict[tuple[str, str], str] = {}
    for n in names:
        m = re.fullmatch(r"(.+)\((\w+)\)", n)
        name, sect = (m.group(1), m.group(2)) if m else (n, SECTION)
        out.setdefault((name, sect), f"**{_inline(name)}**\\ ({sect})")
    return ",\n".join(out.values())


# --------------------------------------------------------------------------- pages


def _walk(group: click.Group, ctx: click.Context, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], click.Command, click.Context]]:
    for name in sorted(group.commands):
        command = group.commands[name]
        if command.hidden:
            continue
        sub_ctx = _context(command, name, ctx)
        yield (*path, name), command, sub_ctx
        if isinstance(command, click.Group):
            yield from _walk(command, sub_ctx, (*path, name))


def _prose_see_also(text: "manprose.Prose | None") -> list[str]:
    """The SEE ALSO line of a prose file: ``name(N)`` (or ``name``, section 1), comma-separated."""
    if text is None or text.section("SEE ALSO") is None:
        return []
    names = [n.strip() for n in text.text("SEE ALSO").split(",")]
    bad = [n for n in names if not re.fullmatch(r"[\w.+-]+(\(\w+\))?", n)]
    if bad:
        raise _prose_error(text.source, f"SEE ALSO is one line of page names, name(N), separated by commas; not {bad}")
    return [n for n in names if n]


def _check_titles(text: "manprose.Prose | None") -> None:
    if text is None:
        return
    generated = [t for t in text.titles() if t in GENERATED_TITLES]
    if generated:
        raise _prose_error(
            text.source,
            f"{', '.join(generated)} come{'s' if len(generated) == 1 else ''} from the Click definition "
            "(docstring, option help); a prose file holds only the other sections",
        )


def _root() -> click.Group:
    from kafkatool.cli.main import cli

    return cli


def _source(text: "manprose.Prose | None") -> str:
    return "the Click definitions" + (f" and {text.source}" if text is not None else "")


def _describe_arguments(document: "nodes.document", command: click.Command, text: "manprose.Prose | None") -> None:
    """Put the prose file's ARGUMENTS (definitions keyed by metavar) in place of Click's descriptions."""
    from docutils import nodes

    described = text.definitions("ARGUMENTS") if text is not None else {}
    section = next((s for s in document.children if isinstance(s, nodes.section) and s[0].astext() == "ARGUMENTS"), None)
    if section is not None:
        items = list(section.findall(nodes.definition_list_item))
        for arg, item in zip(_arguments(command), items):
            definition = described.pop(_argument_label(arg), None)
            if definition is not None:
                item.replace(item[-1], definition.deepcopy())
    if described and text is not None:
        raise _prose_error(text.source, f"ARGUMENTS describes {', '.join(sorted(described))}, which the command does not take")


def _page(
    name: str,
    section: str,
    description: str,
    generated: Sequence[str],
    text: "manprose.Prose | None",
    skip: Iterable[str],
    tail: Sequence[str],
    *,
    command: click.Command | None = None,
) -> str:
    """One page: the title and the ``generated`` sections (reStructuredText), the sections of the
    prose ``text`` but those in ``skip``, then the ``tail`` sections (EXIT STATUS, SEE ALSO),
    rendered by docutils' manpage writer."""
    mp = _manprose()
    filename = f"{name}.{section}"
    document = mp.parse_rst(_head(name, section, description) + "\n" + "\n".join(generated), f"<{filename}>", titles=True)
    if command is not None:
        _describe_arguments(document, command, text)
    skipped = set(skip)
    for prose_section in text.sections if text is not None else []:
        if mp.section_title(prose_section) not in skipped:
            document.append(prose_section.deepcopy())
    document.extend(mp.parse_rst("\n".join(tail), f"<{filename}>").children)
    source = text.source if text is not None and command is None else _source(text)
    return mp.write_roff(document, f"Generated by kafkatool.cli.manpage from {source}; do not edit.\nRegenerate with: {REGENERATE}")


def render_group_page(cli: click.Group) -> str:
    """``kafkatool(1)``: NAME, SYNOPSIS, DESCRIPTION, OPTIONS, COMMANDS, the prose file's sections
    (EXIT STATUS), SEE ALSO."""
    ctx = _context(cli, PROG)
    commands = [path for path, _c, _x in _walk(cli, ctx)]
    root = cli is _root()
    text = _read_prose(f"{PROG}.{SECTION}", cli, required=True) if root else None
    _check_titles(text)
    titles = text.titles() if text is not None else []
    return _page(
        PROG,
        SECTION,
        _short_help(cli),
        [
            _section("SYNOPSIS", _usage_rst(PROG, cli.collect_usage_pieces(ctx))),
            _section("DESCRIPTION", _docstring_rst(_help_text(cli))),
            _section("OPTIONS", _options_rst(cli, ctx)),
            _section("COMMANDS", _commands_rst(cli, ())),
        ],
        text,
        ("ARGUMENTS", "SEE ALSO"),
        [
            "" if "EXIT STATUS" in titles else _section("EXIT STATUS", exit_status()),
            _section(
                "SEE ALSO",
                _see_also([*(page_name(p) for p in commands), *(_extra_page_refs() if root else []), *_prose_see_also(text)]),
            ),
        ],
        command=cli,
    )


def render_command_page(name: str, command: click.Command, cli: click.Group | None = None) -> str:
    """``kafkatool-<name>(1)``: NAME, SYNOPSIS, DESCRIPTION, OPTIONS, ARGUMENTS, the sections of
    the command's prose file (:data:`PROSE_DIR`), then SEE ALSO. ``name`` may be a space-separated
    path (``"group sub"``) for commands of nested groups; ``cli`` is the root group (default:
    kafkatool's, whose every command must have a prose file)."""
    path = tuple(name.split())
    cli = cli or _root()
    ctx = _context(cli, PROG)
    for part in path[:-1]:  # the contexts of the enclosing groups, for inherited settings
        parent = ctx.command.commands.get(part) if isinstance(ctx.command, click.Group) else None
        if parent is None:
            break
        ctx = _context(parent, part, ctx)
    ctx = _context(command, path[-1], ctx)
    page = page_name(path)
    text = _read_prose(f"{page}.{SECTION}", command, required=True) if cli is _root() else None
    _check_titles(text)
    titles = text.titles() if text is not None else []
    others = [page_name(p) for p, _c, _x in _walk(cli, _context(cli, PROG)) if p != path]
    return _page(
        page,
        SECTION,
        _short_help(command),
        [
            _section("SYNOPSIS", _usage_rst(" ".join([PROG, *path]), command.collect_usage_pieces(ctx))),
            _section("DESCRIPTION", _docstring_rst(_help_text(command))),
            _section("OPTIONS", _options_rst(command, ctx)),
            _section("ARGUMENTS", _arguments_rst(command)),
            _section("COMMANDS", _commands_rst(command, path)) if isinstance(command, click.Group) else "",
        ],
        text,
        ("ARGUMENTS", "SEE ALSO"),
        [
            "" if "EXIT STATUS" in titles else _section("EXIT STATUS", exit_status()),
            _section("SEE ALSO", _see_also([PROG, *others, *_prose_see_also(text)])),
        ],
        command=command,
    )


def render_extra_page(filename: str) -> str:
    """A page of its own (:data:`EXTRA_PAGES`): every section from its prose file, NAME first;
    SEE ALSO lists kafkatool(1) and every command page before the file's own line."""
    name, _dot, section = filename.rpartition(".")
    text = _read_prose(filename, None, required=True)
    assert text is not None
    titles = text.titles()
    if not titles or titles[0] != "NAME":
        raise _prose_error(text.source, f"a page of its own starts with a NAME section: `{name} - what it is`")
    name_line = text.text("NAME")
    if not name_line.startswith(f"{name} - "):
        raise _prose_error(text.source, f"NAME must read `{name} - what it is`, not {name_line!r}")
    root = _root()
    commands = [page_name(p) for p, _c, _x in _walk(root, _context(root, PROG))]
    return _page(
        name,
        section,
        name_line[len(f"{name} - ") :],
        [],
        text,
        ("NAME", "SEE ALSO"),
        [_section("SEE ALSO", _see_also([PROG, *commands, *_prose_see_also(text)]))],
    )


def render_runbooks_page() -> str:
    """``kafkatool-runbooks(7)``: hand-written procedures (``kafkatool-runbooks.7.rst``)."""
    return render_extra_page(f"{PROG}-runbooks.7")


def render_pages(cli: click.Group | None = None) -> dict[str, str]:
    """Every page, ``{"kafkatool.1": roff, "kafkatool-dump.1": roff, ...}``. For kafkatool's own
    CLI a command without its prose file raises :class:`ProseMissing`, and a prose file of section
    1 that is no command's page is an error too."""
    cli = cli or _root()
    pages = {f"{PROG}.{SECTION}": render_group_page(cli)}
    for path, command, _ctx in _walk(cli, _context(cli, PROG)):
        pages[f"{page_name(path)}.{SECTION}"] = render_command_page(" ".join(path), command, cli)
    if cli is _root():  # the prose files are about kafkatool's own commands
        orphans = [n for n in _prose_names() if n.rpartition(".")[2] == SECTION and f"{n}" not in pages]
        if orphans:
            raise _prose_error(
                prose_file(orphans[0]),
                f"no command has the page {orphans[0]}: remove the file (or rename it to {orphans[0].rpartition('.')[0]}.7.rst "
                "with a NAME section, to make it a page of its own)",
            )
        for filename in EXTRA_PAGES:
            pages[filename] = render_extra_page(filename)
    return pages


def _extra_page_refs() -> list[str]:
    """SEE ALSO entries (``name(N)``) for the pages of :data:`EXTRA_PAGES`."""
    return [f"{name}({sect})" for name, _dot, sect in (f.rpartition(".") for f in EXTRA_PAGES)]


def _require_docutils_series() -> None:
    """Raise :class:`WrongDocutils` unless the installed docutils writes the roff ``man/`` holds."""
    mp = _manprose()
    if mp.docutils_series() != mp.DOCUTILS_SERIES:
        raise WrongDocutils(
            f"the pages in man/ are docutils {mp.DOCUTILS_SERIES}'s manpage writer's roff, and docutils "
            f"{mp.docutils_series()} is installed, whose writer writes other roff for the same pages; install "
            f"the pinned series (pip install 'docutils>={mp.DOCUTILS_SERIES},<0.{int(mp.DOCUTILS_SERIES.split('.')[1]) + 1}', "
            "as in the test extra) to check or regenerate them"
        )


def _obsolete(directory: Path, pages: dict[str, str]) -> list[Path]:
    return sorted(
        p for p in directory.glob(f"{PROG}-*.*") if re.fullmatch(r"\d", p.suffix[1:]) and p.name not in pages
    )


def write_all(directory: str | Path) -> list[Path]:
    """(Re)write every page into ``directory``; remove pages of commands that no longer exist.
    Files already up to date are left untouched. Returns the paths of all pages."""
    _require_docutils_series()
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    pages = render_pages()
    written = []
    for stale in _obsolete(directory, pages):
        stale.unlink()
    for filename, text in pages.items():
        target = directory / filename
        data = text.encode("utf-8")
        if not target.is_file() or target.read_bytes() != data:
            target.write_bytes(data)
        written.append(target)
    return written


def check(directory: str | Path) -> list[str]:
    """Names of the pages in ``directory`` that are missing, differ from what would be generated
    now, or belong to no command. Raises :class:`WrongDocutils` under another docutils series
    than the one that wrote ``man/`` (its roff would differ on every page)."""
    _require_docutils_series()
    directory = Path(directory)
    pages = render_pages()
    out = []
    for filename, text in pages.items():
        target = directory / filename
        if not target.is_file() or target.read_bytes() != text.encode("utf-8"):
            out.append(filename)
    out.extend(p.name for p in _obsolete(directory, pages))
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m kafkatool.cli.manpage [--check] [DIRECTORY]`` (default ``man``)."""
    args = list(sys.argv[1:] if argv is None else argv)
    only_check = "--check" in args
    rest = [a for a in args if a != "--check"]
    if any(a.startswith("-") for a in rest) or len(rest) > 1:
        print("usage: python -m kafkatool.cli.manpage [--check] [DIRECTORY]", file=sys.stderr)
        return 2
    directory = Path(rest[0] if rest else "man")
    try:
        mp = _manprose()
    except ImportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    try:
        if only_check:
            stale = check(directory)
            for name in stale:
                print(f"{directory / name}: out of date; run {REGENERATE}", file=sys.stderr)
            return 1 if stale else 0
        for path in write_all(directory):
            print(path)
    except (ProseMissing, WrongDocutils, mp.ProseError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


# =========================================================================== computed prose

#: kafka-dump-log's options (spec §15.1), to say which ones `kafkatool dump` lacks.
_KAFKA_DUMP_LOG_OPTIONS = (
    "--files",
    "--print-data-log",
    "--deep-iteration",
    "--verify-index-only",
    "--index-sanity-check",
    "--max-message-size",
    "--max-bytes",
    "--key-decoder-class",
    "--value-decoder-class",
    "--offsets-decoder",
    "--transaction-log-decoder",
    "--cluster-metadata-decoder",
    "--remote-log-metadata-decoder",
    "--share-group-state-decoder",
    "--skip-record-metadata",
    "--help",
)


def _finding_kinds(command: click.Command | None) -> str:
    """verify's finding kinds, from :data:`kafkatool.verify.KINDS` (a new kind cannot go undocumented)."""
    from kafkatool.verify import INFO_KINDS, KINDS

    return _definition_list((f"``{k}``", _rst(v + (" (information)" if k in INFO_KINDS else ""))) for k, v in KINDS.items())


def _kafka_dump_log_gaps(command: click.Command | None) -> str:
    """Which kafka-dump-log options ``kafkatool dump`` does not take, computed from its options."""
    ours = {o for p in (command.params if command else []) if isinstance(p, click.Option) for o in p.opts}
    ours.add("--help")  # every command has it (Click adds it outside ``params``)
    missing = [o for o in _KAFKA_DUMP_LOG_OPTIONS if o not in ours]
    if not missing:
        return ""
    text = "Not supported: " + ", ".join(f"`{o}`" for o in missing) + "; they are usage errors (exit 2)."
    return _rst(text)


#: ``.. generated:: NAME`` in a prose file: NAME -> a function of the page's command returning reStructuredText.
GENERATED: dict[str, Callable[[click.Command | None], str]] = {
    "finding-kinds": _finding_kinds,
    "kafka-dump-log-gaps": _kafka_dump_log_gaps,
}


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
