"""Man pages: generated from the Click definitions (the httpie/hatch model), with hand-written prose.

``python -m kafkatool.cli.manpage man/`` writes ``kafkatool.1``, one ``kafkatool-<command>.1`` per
command of :data:`kafkatool.cli.main.cli`, and the pages of their own (``kafkatool-runbooks.7``);
``--check`` only lists the pages that are out of date. ``man/`` is committed; the tests fail when it
differs from what this module writes now.

Two sources make a page:

- **The Click definition** gives NAME and DESCRIPTION (the docstring), SYNOPSIS (Click's usage),
  OPTIONS and the names of the ARGUMENTS (names, metavars, choices, defaults, help), the group's
  COMMANDS, the generic EXIT STATUS (:class:`~kafkatool.cli.main.ExitCode` and its member
  docstrings) and SEE ALSO's list of the other pages. Change those in the command's code.
- **The prose file** ``kafkatool/cli/manpages/<page>.rst`` (``kafkatool-verify.1.rst``: package
  data, one per page, required for every command) holds what a docstring cannot say, in
  reStructuredText read by docutils (:mod:`kafkatool.cli.manprose` writes it as roff). Each of its
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
from kafkatool.cli.roff import (
    bullets,
    escape,
    escape_chars,
    example,
    inline,
    join,
    para,
    prose,
    protect_lines,
    quote_arg,
    sentences,
    subsection,
    tagged,
)

if TYPE_CHECKING:  # pragma: no cover
    from kafkatool.cli import manprose

__all__ = [
    "EXTRA_PAGES",
    "GENERATED",
    "PROSE_DIR",
    "ProseMissing",
    "bullets",
    "check",
    "escape",
    "example",
    "exit_status",
    "main",
    "page_name",
    "para",
    "prose_file",
    "render_command_page",
    "render_group_page",
    "render_pages",
    "render_runbooks_page",
    "subsection",
    "tagged",
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
            f"the man pages' prose is rendered with docutils ({exc}); install it: pip install -e '.[test]'"
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


def _docstring_roff(text: str) -> str:
    """Click help text: blank-line paragraphs; a paragraph led by ``\\b`` keeps its lines."""
    out = []
    for block in re.split(r"\n\s*\n", text):
        if not block.strip():
            continue
        if block.lstrip().startswith("\b"):
            lines = block.lstrip()[1:].strip("\n").split("\n")
            out.append(".PP\n.nf\n" + "\n".join(protect_lines(inline(ln, False)) or "\\&" for ln in lines) + "\n.fi")
        else:
            out.append(f".PP\n{prose(block, italics=False)}")
    return "\n".join(out)


def _metavar(param: click.Parameter, ctx: click.Context) -> str:
    try:
        return param.make_metavar(ctx)  # Click >= 8.2
    except TypeError:  # pragma: no cover - Click 8.1
        return param.make_metavar()  # type: ignore[call-arg]


def _option_term(opt: click.Option, ctx: click.Context) -> str:
    ordered = sorted(opt.opts, key=lambda n: len(n) - len(n.lstrip("-/+"))) + list(opt.secondary_opts)
    names = ", ".join(f"\\fB{escape_chars(n)}\\fR" for n in ordered)
    if opt.is_flag or opt.count:
        return names
    if isinstance(opt.type, click.Choice) and opt.metavar is None:
        value = "|".join(f"\\fB{escape_chars(str(c))}\\fR" for c in opt.type.choices)
    else:
        mv = _metavar(opt, ctx)
        dots = mv.endswith("...")
        mv = mv[:-3] if dots else mv
        value = f"\\fI{escape_chars(mv)}\\fR" + ("..." if dots else "")
    return f"{names} {value}"


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


def _usage_roff(prog: str, pieces: Sequence[str]) -> str:
    words = [f"\\fB{escape_chars(prog)}\\fR"]
    for piece in pieces:
        words.append(re.sub(r"[A-Z][A-Z0-9_]*", lambda m: f"\\fI{m.group(0)}\\fR", escape_chars(piece)))
    return protect_lines(" ".join(words))


def page_name(path: Sequence[str]) -> str:
    """``kafkatool`` for the group, ``kafkatool-dump`` for ``("dump",)``."""
    return "-".join([PROG, *path])


def _th(title: str, section: str = SECTION, source: str = "the Click definitions") -> str:
    # Deterministic: no date, only the package version (so regenerating never churns).
    return (
        f".\\\" Generated by kafkatool.cli.manpage from {source}; do not edit.\n"
        f".\\\" Regenerate with: {escape_chars(REGENERATE)}\n"
        f".TH {quote_arg(title.upper())} {section} \"\" {quote_arg(f'{PROG} {__version__}')} {quote_arg(MANUAL)}\n"
        ".nh\n"
        ".ad l"
    )


def _see_also(names: Iterable[str]) -> str:
    """``name`` means ``name(1)``; ``name(N)`` is taken as written; each page once, in first-seen order."""
    out: dict[tuple[str, str], str] = {}
    for n in names:
        m = re.fullmatch(r"(.+)\((\w+)\)", n)
        name, sect = (m.group(1), m.group(2)) if m else (n, SECTION)
        out.setdefault((name, sect), f"\\fB{escape_chars(name)}\\fR({sect})")
    return protect_lines(",\n".join(out.values()))


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


def exit_status(meanings: dict[int, str] | None = None) -> str:
    """An EXIT STATUS body: one entry per :class:`ExitCode` member, ``meanings`` replacing the
    generic descriptions (from the member docstrings) with what a code means for one command."""
    meanings = meanings or {}
    codes = {v: doc for v, _name, doc in _exit_codes()}
    return tagged((str(v), meanings.get(v, codes.get(v, ""))) for v in sorted({*codes, *meanings}))




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


def _commands_section(group: click.Group, path: tuple[str, ...]) -> str:
    items = []
    for name in sorted(group.commands):
        command = group.commands[name]
        if command.hidden:
            continue
        see = f"See \\fB{escape_chars(page_name((*path, name)))}\\fR({SECTION})."
        items.append(f".TP\n\\fB{escape_chars(name)}\\fR\n{prose(_short_help(command) + '.', italics=False)}\n{see}")
    return "\n".join(items)


def _options_section(command: click.Command, ctx: click.Context) -> str:
    return "\n".join(
        f".TP\n{protect_lines(_option_term(opt, ctx))}\n{prose(_option_help(opt, ctx), italics=False)}"
        for opt in _visible_options(command, ctx)
    )


def _arguments_section(command: click.Command, text: "manprose.Prose | None") -> str:
    """One ``.TP`` per argument: its metavar, then the prose file's description of it (ARGUMENTS)."""
    described = text.definitions("ARGUMENTS") if text is not None else {}
    out = []
    for arg in _arguments(command):
        label = (arg.metavar or (arg.name or "").upper()).strip("[]").rstrip(".")
        dots = "..." if arg.nargs == -1 or arg.nargs > 1 else ""
        body = described.pop(label, None) or prose(_argument_help(arg))
        out.append(f".TP\n\\fI{escape_chars(label)}\\fR{dots}\n{body}")
    if described and text is not None:
        raise _prose_error(text.source, f"ARGUMENTS describes {', '.join(sorted(described))}, which the command does not take")
    return "\n".join(out)


def _prose_see_also(text: "manprose.Prose | None") -> list[str]:
    """The SEE ALSO line of a prose file: ``name(N)`` (or ``name``, section 1), comma-separated."""
    if text is None or text.section("SEE ALSO") is None:
        return []
    names = [n.strip() for n in text.text("SEE ALSO").split(",")]
    bad = [n for n in names if not re.fullmatch(r"[\w.+-]+(\(\w+\))?", n)]
    if bad:
        raise _prose_error(text.source, f"SEE ALSO is one line of page names, name(N), separated by commas; not {bad}")
    return [n for n in names if n]


def _prose_sections(text: "manprose.Prose | None", *, skip: Iterable[str]) -> list[str]:
    """The roff of every section of the prose file but those in ``skip``, in order."""
    if text is None:
        return []
    skipped = set(skip)
    return [_section(title, text.roff(title)) for title in text.titles() if title not in skipped]


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


def _section(title: str, body: str) -> str:
    return f".SH {quote_arg(title)}\n{body}" if body else ""


def _root() -> click.Group:
    from kafkatool.cli.main import cli

    return cli


def _source(text: "manprose.Prose | None") -> str:
    return "the Click definitions" + (f" and {text.source}" if text is not None else "")


def render_group_page(cli: click.Group) -> str:
    """``kafkatool(1)``: NAME, SYNOPSIS, DESCRIPTION, OPTIONS, COMMANDS, the prose file's sections
    (EXIT STATUS), SEE ALSO."""
    ctx = _context(cli, PROG)
    help_text = _help_text(cli)
    commands = [path for path, _c, _x in _walk(cli, ctx)]
    root = cli is _root()
    text = _read_prose(f"{PROG}.{SECTION}", cli, required=True) if root else None
    _check_titles(text)
    titles = text.titles() if text is not None else []
    return join(
        _th(PROG, source=_source(text)),
        _section("NAME", f"{escape_chars(PROG)} \\- {inline(_short_help(cli), False)}"),
        _section("SYNOPSIS", _usage_roff(PROG, cli.collect_usage_pieces(ctx))),
        _section("DESCRIPTION", _docstring_roff(help_text)),
        _section("OPTIONS", _options_section(cli, ctx)),
        _section("COMMANDS", _commands_section(cli, ())),
        *_prose_sections(text, skip=("ARGUMENTS", "SEE ALSO")),
        "" if "EXIT STATUS" in titles else _section("EXIT STATUS", exit_status()),
        _section(
            "SEE ALSO",
            _see_also([*(page_name(p) for p in commands), *(_extra_page_refs() if root else []), *_prose_see_also(text)]),
        ),
    ) + "\n"


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
    subcommands = _section("COMMANDS", _commands_section(command, path)) if isinstance(command, click.Group) else ""
    others = [page_name(p) for p, _c, _x in _walk(cli, _context(cli, PROG)) if p != path]
    prog = " ".join([PROG, *path])
    return join(
        _th(page, source=_source(text)),
        _section("NAME", f"{escape_chars(page)} \\- {inline(_short_help(command), False)}"),
        _section("SYNOPSIS", _usage_roff(prog, command.collect_usage_pieces(ctx))),
        _section("DESCRIPTION", _docstring_roff(_help_text(command))),
        _section("OPTIONS", _options_section(command, ctx)),
        _section("ARGUMENTS", _arguments_section(command, text)),
        subcommands,
        *_prose_sections(text, skip=("ARGUMENTS", "SEE ALSO")),
        "" if "EXIT STATUS" in titles else _section("EXIT STATUS", exit_status()),
        _section("SEE ALSO", _see_also([PROG, *others, *_prose_see_also(text)])),
    ) + "\n"


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
    return join(
        _th(name, section, text.source),
        _section("NAME", escape(name_line)),
        *_prose_sections(text, skip=("NAME", "SEE ALSO")),
        _section("SEE ALSO", _see_also([PROG, *commands, *_prose_see_also(text)])),
    ) + "\n"


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


def _obsolete(directory: Path, pages: dict[str, str]) -> list[Path]:
    return sorted(
        p for p in directory.glob(f"{PROG}-*.*") if re.fullmatch(r"\d", p.suffix[1:]) and p.name not in pages
    )


def write_all(directory: str | Path) -> list[Path]:
    """(Re)write every page into ``directory``; remove pages of commands that no longer exist.
    Files already up to date are left untouched. Returns the paths of all pages."""
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
    now, or belong to no command."""
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
    except (ProseMissing, mp.ProseError) as exc:
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


def _rst(text: str) -> str:
    """House-style prose (```literal```, ``*name*``) as reStructuredText, one sentence per line."""
    return _manprose().rst_inline("\n".join(sentences(text)))


def _definition_list(items: Iterable[tuple[str, str]]) -> str:
    return "\n\n".join(f"``{term}``\n" + textwrap.indent(_rst(text), "   ") for term, text in items)


def _finding_kinds(command: click.Command | None) -> str:
    """verify's finding kinds, from :data:`kafkatool.verify.KINDS` (a new kind cannot go undocumented)."""
    from kafkatool.verify import INFO_KINDS, KINDS

    return _definition_list((k, v + (" (information)" if k in INFO_KINDS else "")) for k, v in KINDS.items())


def _kafka_dump_log_gaps(command: click.Command | None) -> str:
    """Which kafka-dump-log options ``kafkatool dump`` does not take, computed from its options."""
    ours = {o for p in (command.params if command else []) if isinstance(p, click.Option) for o in p.opts}
    ours.add("--help")  # every command has it (Click adds it outside ``params``)
    missing = [o for o in _KAFKA_DUMP_LOG_OPTIONS if o not in ours]
    if not missing:
        return ""
    text = "Not supported: " + ", ".join(f"`{o}`" for o in missing) + "; they are usage errors (exit 2)."
    if any(o.endswith("-decoder") for o in missing):
        text += (
            " Instead of Kafka's internal-topic decoders, kafkatool prints keys and payloads with its own "
            "decoders (see DECODERS)."
        )
    return _rst(text)


#: ``.. generated:: NAME`` in a prose file: NAME -> a function of the page's command returning reStructuredText.
GENERATED: dict[str, Callable[[click.Command | None], str]] = {
    "finding-kinds": _finding_kinds,
    "kafka-dump-log-gaps": _kafka_dump_log_gaps,
}


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
