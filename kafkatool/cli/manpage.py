"""Man pages generated from the Click definitions (the httpie/hatch model).

``python -m kafkatool.cli.manpage man/`` writes ``kafkatool.1`` and one
``kafkatool-<command>.1`` per command of :data:`kafkatool.cli.main.cli`;
and the hand-written pages of :data:`EXTRA_PAGES` (``kafkatool-runbooks.7``: repair procedures);
``--check`` only lists the pages that are out of date. The generated parts come from
the CLI definition: NAME and DESCRIPTION from the docstrings, SYNOPSIS from Click's
usage pieces, OPTIONS and ARGUMENTS from the parameters (names, metavars, choices,
defaults, help), the group's EXIT STATUS from :class:`~kafkatool.cli.main.ExitCode`.
What a docstring cannot say (output formats, schemas, examples) is written by hand
in :data:`EXTRA_SECTIONS`, keyed by command name.

Adding a command's hand-written sections::

    EXTRA_SECTIONS["verify"] = [
        ("EXIT STATUS", exit_status({0: "No findings.", 1: "Findings: ..."})),
        ("EXAMPLES", example("kafkatool verify /var/lib/kafka/data/orders-0")),
    ]

A section body is roff text; build it with :func:`para`, :func:`tagged`, :func:`bullets`,
:func:`example`, :func:`subsection` and :func:`exit_status`, which escape their text. In their prose
arguments ```literal``` prints in bold and ``*name*`` in italics. A body may also be a
callable taking the Click command and returning roff, for text derived from the
command's parameters. Without an ``EXIT STATUS`` section a command page gets the
generic one from ``ExitCode``. The output is deterministic: no dates, only the
package version.
"""

from __future__ import annotations

import ast
import enum
import inspect
import re
import sys
import textwrap
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence, Union

import click

from kafkatool import __version__

__all__ = [
    "EXTRA_PAGES",
    "EXTRA_SECTIONS",
    "check",
    "escape",
    "exit_status",
    "main",
    "page_name",
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

SectionBody = Union[str, Callable[[click.Command], str]]

# --------------------------------------------------------------------------- roff escaping

_SPECIAL = {"\\": "\\e", "-": "\\-"}
_MARKUP = re.compile(r"`([^`]+)`|\*([^*\s](?:[^*]*[^*\s])?)\*")
_LITERALS = re.compile(r"`([^`]+)`()")  # for Click's own texts, where a ``*`` may be a glob
_SENTENCE_END = re.compile(r"(?<=[a-z0-9)\]'\"`][.!?])\s+(?=[A-Z`(])")


def escape(text: str) -> str:
    """``text`` as roff: backslashes and hyphens escaped, non-ASCII as ``\\[uXXXX]``, control
    characters dropped, and a ``\\&`` before a ``.`` or ``'`` that starts a line (it would be a request)."""
    return _protect_lines(_esc_raw(text))


def _protect_lines(roff: str) -> str:
    return "\n".join("\\&" + line if line[:1] in (".", "'") else line for line in roff.split("\n"))


def _inline(text: str, italics: bool = True) -> str:
    """Escape prose, turning ```literal``` into bold and (with ``italics``) ``*name*`` into italics."""
    out = []
    last = 0
    for m in (_MARKUP if italics else _LITERALS).finditer(text):
        out.append(_esc_raw(text[last : m.start()]))
        if m.group(1) is not None:
            out.append(f"\\fB{_esc_raw(m.group(1))}\\fR")
        else:
            out.append(f"\\fI{_esc_raw(m.group(2))}\\fR")
        last = m.end()
    out.append(_esc_raw(text[last:]))
    return "".join(out)


def _esc_raw(text: str) -> str:
    """Character escaping only (the caller protects line starts)."""
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


def _prose(text: str, italics: bool = True) -> str:
    """A paragraph of prose as roff text lines, one sentence per line (roff's convention)."""
    flat = " ".join(text.split())
    if not flat:
        return ""
    return _protect_lines("\n".join(_inline(s, italics) for s in _SENTENCE_END.split(flat)))


def _quote_arg(text: str) -> str:
    if '"' in text or "\n" in text:
        raise ValueError(f"a macro argument cannot hold a quote or newline: {text!r}")
    return f'"{_esc_raw(text)}"'


# --------------------------------------------------------------------------- building blocks


def para(*paragraphs: str) -> str:
    """One ``.PP`` paragraph per argument."""
    return "\n".join(f".PP\n{_prose(p)}" for p in paragraphs if p.strip())


def subsection(title: str, *paragraphs: str) -> str:
    """A ``.SS`` heading, then paragraphs."""
    body = para(*paragraphs)
    return f".SS {_quote_arg(title)}" + (f"\n{body}" if body else "")


def tagged(items: Iterable[tuple[str, str]], *, literal_terms: bool = True) -> str:
    """A ``.TP`` list: each term (bold when ``literal_terms``) above its indented text."""
    out = []
    for term, text in items:
        t = f"\\fB{_esc_raw(term)}\\fR" if literal_terms else _inline(term)
        out.append(f".TP\n{_protect_lines(t)}\n{_prose(text)}")
    return "\n".join(out)


def bullets(items: Iterable[str]) -> str:
    """A bulleted list."""
    return "\n".join(f".IP \\(bu 2\n{_prose(item)}" for item in items)


def example(code: str, caption: str | None = None) -> str:
    """A verbatim, indented block (commands, output lines); ``caption`` is prose above it."""
    lines = textwrap.dedent(code).strip("\n").split("\n")
    body = "\n".join("\\&" if not line.strip() else _protect_lines(_esc_raw(line)) for line in lines)
    head = para(caption) + "\n" if caption else ".PP\n"
    return f"{head}.RS 4\n.nf\n{body}\n.fi\n.RE"


def _join(*parts: str) -> str:
    return "\n".join(p for p in parts if p)


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
            out.append(".PP\n.nf\n" + "\n".join(_protect_lines(_inline(ln, False)) or "\\&" for ln in lines) + "\n.fi")
        else:
            out.append(f".PP\n{_prose(block, italics=False)}")
    return "\n".join(out)


def _metavar(param: click.Parameter, ctx: click.Context) -> str:
    try:
        return param.make_metavar(ctx)  # Click >= 8.2
    except TypeError:  # pragma: no cover - Click 8.1
        return param.make_metavar()  # type: ignore[call-arg]


def _option_term(opt: click.Option, ctx: click.Context) -> str:
    ordered = sorted(opt.opts, key=lambda n: len(n) - len(n.lstrip("-/+"))) + list(opt.secondary_opts)
    names = ", ".join(f"\\fB{_esc_raw(n)}\\fR" for n in ordered)
    if opt.is_flag or opt.count:
        return names
    if isinstance(opt.type, click.Choice) and opt.metavar is None:
        value = "|".join(f"\\fB{_esc_raw(str(c))}\\fR" for c in opt.type.choices)
    else:
        mv = _metavar(opt, ctx)
        dots = mv.endswith("...")
        mv = mv[:-3] if dots else mv
        value = f"\\fI{_esc_raw(mv)}\\fR" + ("..." if dots else "")
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


def _argument_help(command_name: str, arg: click.Argument) -> str:
    hand = ARGUMENT_HELP.get(command_name, {}).get(arg.name or "")
    if hand:
        return hand
    own = getattr(arg, "help", None)  # Argument subclasses may carry help
    if own:
        return " ".join(str(own).split())
    count = "Any number of values" if arg.nargs == -1 else ("One value" if arg.nargs == 1 else f"{arg.nargs} values")
    return f"{count}; {'required' if arg.required else 'optional'}."


def _usage_roff(prog: str, pieces: Sequence[str]) -> str:
    words = [f"\\fB{_esc_raw(prog)}\\fR"]
    for piece in pieces:
        words.append(re.sub(r"[A-Z][A-Z0-9_]*", lambda m: f"\\fI{m.group(0)}\\fR", _esc_raw(piece)))
    return _protect_lines(" ".join(words))


def page_name(path: Sequence[str]) -> str:
    """``kafkatool`` for the group, ``kafkatool-dump`` for ``("dump",)``."""
    return "-".join([PROG, *path])


def _th(title: str, section: str = SECTION, source: str = "the Click definitions") -> str:
    # Deterministic: no date, only the package version (so regenerating never churns).
    return (
        f".\\\" Generated by kafkatool.cli.manpage from {source}; do not edit.\n"
        f".\\\" Regenerate with: {_esc_raw(REGENERATE)}\n"
        f".TH {_quote_arg(title.upper())} {section} \"\" {_quote_arg(f'{PROG} {__version__}')} {_quote_arg(MANUAL)}\n"
        ".nh\n"
        ".ad l"
    )


def _see_also(names: Iterable[str]) -> str:
    """``name`` means ``name(1)``; ``name(N)`` is taken as written; each page once, in first-seen order."""
    out: dict[tuple[str, str], str] = {}
    for n in names:
        m = re.fullmatch(r"(.+)\((\w+)\)", n)
        name, sect = (m.group(1), m.group(2)) if m else (n, SECTION)
        out.setdefault((name, sect), f"\\fB{_esc_raw(name)}\\fR({sect})")
    return _protect_lines(",\n".join(out.values()))


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


def _exit_status_section() -> str:
    return exit_status()


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
        see = f"See \\fB{_esc_raw(page_name((*path, name)))}\\fR({SECTION})."
        items.append(f".TP\n\\fB{_esc_raw(name)}\\fR\n{_prose(_short_help(command) + '.', italics=False)}\n{see}")
    return "\n".join(items)


def _options_section(command: click.Command, ctx: click.Context) -> str:
    return "\n".join(
        f".TP\n{_protect_lines(_option_term(opt, ctx))}\n{_prose(_option_help(opt, ctx), italics=False)}"
        for opt in _visible_options(command, ctx)
    )


def _arguments_section(name: str, command: click.Command) -> str:
    out = []
    for arg in _arguments(command):
        label = (arg.metavar or (arg.name or "").upper()).strip("[]").rstrip(".")
        dots = "..." if arg.nargs == -1 or arg.nargs > 1 else ""
        out.append(f".TP\n\\fI{_esc_raw(label)}\\fR{dots}\n{_prose(_argument_help(name, arg))}")
    return "\n".join(out)


def _section(title: str, body: str) -> str:
    return f".SH {_quote_arg(title)}\n{body}" if body else ""


def _root() -> click.Group:
    from kafkatool.cli.main import cli

    return cli


def render_group_page(cli: click.Group) -> str:
    """``kafkatool(1)``: NAME, SYNOPSIS, DESCRIPTION, OPTIONS, COMMANDS, EXIT STATUS, SEE ALSO."""
    ctx = _context(cli, PROG)
    help_text = _help_text(cli)
    commands = [path for path, _c, _x in _walk(cli, ctx)]
    return _join(
        _th(PROG),
        _section("NAME", f"{_esc_raw(PROG)} \\- {_inline(_short_help(cli), False)}"),
        _section("SYNOPSIS", _usage_roff(PROG, cli.collect_usage_pieces(ctx))),
        _section("DESCRIPTION", _docstring_roff(help_text)),
        _section("OPTIONS", _options_section(cli, ctx)),
        _section("COMMANDS", _commands_section(cli, ())),
        _section("EXIT STATUS", _exit_status_section() + "\n" + para("Each command's page says what the codes mean for it.")),
        _section("SEE ALSO", _see_also([*(page_name(p) for p in commands), *(_extra_page_refs() if cli is _root() else [])])),
    ) + "\n"


def render_command_page(name: str, command: click.Command, cli: click.Group | None = None) -> str:
    """``kafkatool-<name>(1)``: NAME, SYNOPSIS, DESCRIPTION, OPTIONS, ARGUMENTS, the hand-written
    :data:`EXTRA_SECTIONS` of the command, then SEE ALSO. ``name`` may be a space-separated path
    (``"group sub"``) for commands of nested groups; ``cli`` is the root group (default: kafkatool's)."""
    path = tuple(name.split())
    cli = cli or _root()
    ctx = _context(cli, PROG)
    for part in path[:-1]:  # the contexts of the enclosing groups, for inherited settings
        parent = ctx.command.commands.get(part) if isinstance(ctx.command, click.Group) else None
        if parent is None:
            break
        ctx = _context(parent, part, ctx)
    ctx = _context(command, path[-1], ctx)
    key = " ".join(path)
    extras = EXTRA_SECTIONS.get(key, [])
    titles = {t for t, _b in extras}
    extra_roff = [_section(t, b(command) if callable(b) else b) for t, b in extras]
    if "EXIT STATUS" not in titles:
        extra_roff.append(_section("EXIT STATUS", _exit_status_section()))
    subcommands = _section("COMMANDS", _commands_section(command, path)) if isinstance(command, click.Group) else ""
    others = [page_name(p) for p, _c, _x in _walk(cli, _context(cli, PROG)) if p != path]
    prog = " ".join([PROG, *path])
    return _join(
        _th(page_name(path)),
        _section("NAME", f"{_esc_raw(page_name(path))} \\- {_inline(_short_help(command), False)}"),
        _section("SYNOPSIS", _usage_roff(prog, command.collect_usage_pieces(ctx))),
        _section("DESCRIPTION", _docstring_roff(_help_text(command))),
        _section("OPTIONS", _options_section(command, ctx)),
        _section("ARGUMENTS", _arguments_section(key, command)),
        subcommands,
        *extra_roff,
        _section("SEE ALSO", _see_also([PROG, *others, *SEE_ALSO.get(key, [])])),
    ) + "\n"


def render_pages(cli: click.Group | None = None) -> dict[str, str]:
    """Every page, ``{"kafkatool.1": roff, "kafkatool-dump.1": roff, ...}``."""
    cli = cli or _root()
    pages = {f"{PROG}.{SECTION}": render_group_page(cli)}
    for path, command, _ctx in _walk(cli, _context(cli, PROG)):
        pages[f"{page_name(path)}.{SECTION}"] = render_command_page(" ".join(path), command, cli)
    if cli is _root():  # the hand-written pages are about kafkatool's own commands
        for filename, render in EXTRA_PAGES.items():
            pages[filename] = render()
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
    if only_check:
        stale = check(directory)
        for name in stale:
            print(f"{directory / name}: out of date; run {REGENERATE}", file=sys.stderr)
        return 1 if stale else 0
    for path in write_all(directory):
        print(path)
    return 0


# =========================================================================== hand-written sections

#: Descriptions of positional arguments (Click arguments carry no help), by command then name.
ARGUMENT_HELP: dict[str, dict[str, str]] = {
    "restore": {
        "backup_dir": (
            "A backup directory written by `kafkatool reindex --execute` or `kafkatool truncate --execute` "
            "(it holds `MANIFEST.json`), wherever it is now."
        ),
    },
    "reindex": {
        "paths": (
            "Segments (`.log`, or one of its `.index`, `.timeindex`, `.txnindex`), partition directories, "
            "or whole log dirs, searched recursively. Every `.log` segment found is planned; KRaft "
            "`.checkpoint` snapshots have no indexes and are skipped."
        ),
    },
    "verify": {
        "paths": (
            "Segment or side files, partition directories (`<topic>-<partition>`), or whole log dirs, "
            "searched recursively. The files of a partition are checked in offset order, so offsets are "
            "compared across its segments."
        ),
    },
    "truncate": {
        "paths": (
            "Segments (`.log`, or one of its `.index`, `.timeindex`, `.txnindex`), partition directories, "
            "or whole log dirs, searched recursively. A partition directory is checked segment by segment in "
            "offset order; a segment path limits the check to that segment (later segments are still removed "
            "when it is cut)."
        ),
    },
    "dump": {
        "paths": (
            "Files or partition directories to dump, in order, after those of `--files`. "
            "A directory stands for its dumpable files, sorted by name: segments, indexes, snapshots "
            "and checkpoint files; `.lock`, `.kafka_cleanshutdown`, `.deleted`, `.cleaned`, `.swap` and "
            "unknown files are left out."
        ),
    },
}

#: Extra SEE ALSO entries by command (``name`` for ``name(1)``, or ``name(N)`` as written).
#: A command page lists kafkatool(1) and the other command pages before these (each page once).
SEE_ALSO: dict[str, list[str]] = {
    "dump": ["kafkatool-runbooks(7)", "jq(1)"],
    "verify": ["kafkatool-runbooks(7)", "jq(1)"],
    "reindex": ["kafkatool-runbooks(7)", "fcntl(2)", "jq(1)"],
    "truncate": ["kafkatool-runbooks(7)", "fcntl(2)", "jq(1)"],
    "restore": ["kafkatool-runbooks(7)", "sha256sum(1)", "jq(1)"],
}

# --------------------------------------------------------------------------- dump

_DUMP_TEXT_LINES = r"""
Dumping <path>
Log starting offset: <baseOffset>
Snapshot end offset: <offset>, epoch: <epoch>
KRaft bootstrap snapshot
baseOffset: <o> lastOffset: <o> count: <n> baseSequence: <s> lastSequence: <s> producerId: <id> producerEpoch: <e> partitionLeaderEpoch: <e> isTransactional: <bool> isControl: <bool> deleteHorizonMs: <OptionalLong.empty|OptionalLong[<ms>]> position: <p> <CreateTime|LogAppendTime>: <ts> size: <n> magic: 2 compresscodec: <none|gzip|snappy|lz4|zstd> crc: <crc> isvalid: <bool>
offset: <o> position: <p> <CreateTime|LogAppendTime|NoTimestampType>: <ts> size: <n> magic: <0|1> compresscodec: <codec> crc: <crc> isvalid: <bool>
| offset: <o> <tsType>: <ts> keySize: <n> valueSize: <n> sequence: <s> headerKeys: [<k1>,<k2>] key: <key> payload: <value>
| offset: <o> <tsType>: <ts> keySize: <n> valueSize: <n> isValid: <bool> crc: <crc>} key: <key> payload: <value>
offset: <o> position: <p>
timestamp: <ts> offset: <o>
producerId: <id> producerEpoch: <e> coordinatorEpoch: <e> currentTxnFirstOffset: <OptionalLong...> lastTimestamp: <ts> firstSequence: <s> lastSequence: <s> lastOffset: <o> offsetDelta: <d> timestamp: <ts>
version: <v> producerId: <id> firstOffset: <o> lastOffset: <o> lastStableOffset: <o>
<path> is empty.
<path> passed sanity check.
Found <n> invalid bytes at the end of <fileName>
"""

_DUMP_SUMMARY_LINES = r"""
Mismatches in :<absolutePath>
  Index offset: <indexOffset>, log offset: <logOffset>
Found timestamp mismatch in :<absolutePath>
  Index timestamp: <indexTs>, log timestamp: <logMaxTs>
Found out of order timestamp in :<absolutePath>
  Index timestamp: <indexTs>, Previously indexed timestamp: <prevTs>
The following indexed offsets are not found in the log.
Indexed offset: <indexOffset>, found log offset: <logOffset>
Non-consecutive offsets in <absolutePath>
  <previous> is followed by <next>
"""

_DUMP_OUTPUT = _join(
    para(
        "`--format text` (the default) prints kafka-dump-log's output, line for line, as Kafka's newest "
        "kafka-dump-log (4.0) prints it, quirks included: the stray `}` after a legacy record's crc, "
        "`OptionalLong.empty`, an empty line for a control record under `--skip-record-metadata`. "
        "Data goes to standard output; the diagnostics Kafka writes to standard error (`Ignoring unknown file`, "
        "corrupt producer snapshots, the end-of-run summaries) and kafkatool's errors and warnings go to "
        "standard error. "
        "The lines, one template each:"
    ),
    example(_DUMP_TEXT_LINES),
    example(
        """
        Dumping 00000000000000000000.log
        Log starting offset: 0
        baseOffset: 0 lastOffset: 1 count: 2 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1700000000005 size: 86 magic: 2 compresscodec: none crc: 1592015369 isvalid: true
        | offset: 0 CreateTime: 1700000000000 keySize: 2 valueSize: 2 sequence: -1 headerKeys: [] key: k1 payload: v1
        | offset: 1 CreateTime: 1700000000005 keySize: -1 valueSize: 2 sequence: -1 headerKeys: [h1] payload: v2
        """,
        "For example, `kafkatool dump --print-data-log --files 00000000000000000000.log` on a segment "
        "holding one batch of two records (keys `k1` and null, values `v1` and `v2`, a header `h1`) prints:",
    ),
    para(
        "Record lines (`| offset:`) follow their batch line with `--deep-iteration`, `--print-data-log` or "
        "any decoder option; `key:` and `payload:` appear only with data printing, never for control "
        "batches, and a null key or value prints no field. Records of control batches end with "
        "`endTxnMarker: COMMIT coordinatorEpoch: <n>`, `SnapshotHeader {...}`, `SnapshotFooter {...}`, "
        "`KRaftVersion {...}`, `KRaftVoters {...}` or `controlType: <NAME>(<id>)`. "
        "Text checkpoint files, which kafka-dump-log cannot dump, print one line of `name: value` pairs "
        "per entry (`leader-epoch-checkpoint`, `*-offset-checkpoint`, `partition.metadata`, "
        "`quorum-state`, `meta.properties`): numbers and single words as they are, an empty string or one "
        "with spaces as a JSON string (`clusterId: \"\"`), lists and objects as compact JSON "
        "(`currentVoters: [{\"voterId\":1}]`)."
    ),
    para(
        "After the last file, the end-of-run summaries go to standard error, in this order: offset-index "
        "mismatches, time-index timestamp mismatches, out-of-order timestamps, indexed offsets not found, "
        "non-consecutive offsets (which only deep iteration finds):"
    ),
    example(_DUMP_SUMMARY_LINES),
    para(
        "`--format jsonl` prints one JSON object per line on standard output, errors and summaries included "
        "(see JSON LINES SCHEMA). `--format table` prints tables for a person at a terminal, in the box "
        "style of Rich's tables: one per file for shallow dumps (position, offsets, count, magic, codec, "
        "timestamp, producer, flags, size, crc), batches as bold rows with their records under them for deep "
        "ones. Rows are streamed a few hundred at a time, so memory stays flat and the first rows show at "
        "once (about half the text format's speed); when later rows need wider columns the table is closed "
        "and a wider one, with its header, follows. Every timestamp shows as milliseconds and, next to it, "
        "as ISO 8601 UTC (`2023-11-14T22:13:20.005Z`); JSON Lines keeps the numbers. Keys and values are "
        "printed as written, never as markup (`[red]` stays `[red]`), and control characters are escaped "
        "(`\\n`, `\\x1b`, `\\u202e`), so a binary key cannot break a row or drive the terminal. At a "
        "terminal the columns are fitted to its width and long cells fold onto more lines; into a file or a "
        "pipe nothing folds. Notes, errors and summaries are the text format's lines on their usual stream."
    ),
    subsection(
        "Where kafkatool differs from kafka-dump-log",
        "The output of a file that can be dumped is the same. The differences are in what happens when one cannot:",
    ),
    bullets(
        [
            "*Errors instead of crashes.* Where kafka-dump-log dies with a Java stack trace (a batch size "
            "below 14, an unknown codec id, a truncated control record, a missing `.log` beside an index, an "
            "index entry past the end of the log), kafkatool prints "
            "one line on standard error, `kafkatool: error: PATH:POSITION: what (expected X, found Y)`, "
            "naming the file and the byte position. Output already printed for the file stays. A `.log` "
            "whose name is not a number, where kafka-dump-log stops, gets a `kafkatool: warning:` line on "
            "standard error and its batches are dumped.",
            "*It goes on with the next file.* kafka-dump-log stops at the first exception and leaves out "
            "the end-of-run summaries; kafkatool dumps the remaining files and then prints the summaries.",
            "*It never creates or changes a file.* Every file is opened read-only. kafka-dump-log creates an "
            "empty `.index` when asked for a missing `.index` or for a `.timeindex` without its `.index`, and "
            "opens `.txnindex` files for writing; kafkatool reports a missing `.index` instead, and prints a "
            "`.timeindex` without its `.index` with a `kafkatool: warning:` that the check of its entries "
            "against the offset index and the log was skipped.",
            "*Only regular files are read.* A FIFO, socket or device named like a Kafka file (given, or met "
            "in a directory) is refused with an error naming it, before it is opened, so a dump never blocks "
            "on one. An error reading a file names that file, also when it is the `.log` an index is checked "
            "against.",
            "*Directories.* A partition directory stands for its files; a log dir for its files and its "
            "partition directories; a directory above log dirs (`/var/lib/kafka` over `data-1`, `data-2`) "
            "for those log dirs. A directory with nothing Kafka in it (an empty one, `/etc`) is a usage error. "
            "A partition directory that cannot be read is an error for it, and the others are dumped.",
            "*Exit codes.* 0 means every file was dumped, 1 that some file could not be, 2 bad usage "
            "(see EXIT STATUS). kafka-dump-log exits 1 both for a crash and for bad usage, and 1 for `--help`; "
            "kafkatool prints `--help` on standard output and exits 0.",
            "*More files.* Partition directories, text checkpoint files (whose names, having no `.` or "
            "an unknown suffix, make kafka-dump-log crash or skip them) and positional PATHS are accepted, "
            "and the summaries list files in the order they were dumped (kafka-dump-log: hash-map order).",
        ]
    ),
)


def _dump_decoders(command: click.Command) -> str:
    """The decoder list, from the --key-decoder choices (so a new decoder cannot go undocumented silently)."""
    choices: list[str] = []
    for p in command.params:
        if isinstance(p, click.Option) and "--key-decoder" in p.opts and isinstance(p.type, click.Choice):
            choices = [str(c) for c in p.type.choices]
    return _join(
        para(
            "`--key-decoder` and `--value-decoder` choose how the text and table formats print keys and "
            "payloads; either one implies `--print-data-log`. JSON Lines always carries the raw bytes as "
            "base64 and ignores them."
        ),
        tagged((c, DECODER_HELP.get(c, "")) for c in choices),
        para(
            "`--key-decoder-class` and `--value-decoder-class` exist so that kafka-dump-log command lines "
            "keep working: Kafka's `org.apache.kafka.tools.api.StringDecoder` (also `kafka.serializer.StringDecoder` "
            "and `StringDecoder`) is accepted and means `string`; any other class is a usage error (exit 2), "
            "because Java classes cannot be loaded."
        ),
    )


DECODER_HELP: dict[str, str] = {
    "string": (
        "The bytes as UTF-8, as Kafka's default StringDecoder prints them: malformed sequences become "
        "U+FFFD, and newlines are printed raw, so one record may span several lines. The default."
    ),
    "hex": "Lowercase hexadecimal, two digits per byte.",
    "base64": "Standard base64 with padding.",
    "json": (
        "The bytes parsed as JSON and printed compactly on one line. Bytes that are not UTF-8 JSON print "
        "as `base64:` followed by their base64."
    ),
}

_DUMP_SEEK = _join(
    para(
        "kafka-dump-log always reads a `.log` from its first byte. kafkatool can start and stop inside it; "
        "these options apply to `.log` files and leave index and snapshot files as they are."
    ),
    tagged(
        [
            (
                "--start-offset N",
                "Starts the walk where the broker's own lookup would: the `.index` beside the segment is "
                "sanity checked, its largest entry at or below *N* gives the byte position, and batches "
                "whose last offset is below *N* are skipped. With deep iteration, records below *N* are "
                "left out too.",
            ),
            (
                "--start-time T",
                "Looks up *T* in the `.timeindex` (its largest entry at or below *T*), then that offset in "
                "the `.index`, as the broker does for a fetch by timestamp; batches whose maxTimestamp is "
                "below *T*, and with deep iteration records older than *T*, are skipped. With "
                "`--start-offset` too, the later start wins.",
            ),
            (
                "--end-offset N",
                "Stops at the first batch whose first offset is past *N*; with deep iteration, records "
                "past *N* are left out. For magic 0 and 1 a message is judged by its offset, and a "
                "compressed wrapper (whose offset is its last inner one) by its inner records: it shows "
                "when one of them is in the range, and the walk stops after the first entry at or past *N*.",
            ),
            (
                "--end-time T",
                "Leaves out batches whose first timestamp is after *T* (for magic 0 and 1: messages, and "
                "wrappers none of whose records is at or before *T*) and, with deep iteration, records with "
                "timestamps after *T*; the walk goes on to the end, because timestamps need not grow with "
                "offsets.",
            ),
        ]
    ),
    para(
        "Times are epoch milliseconds (a signed 64-bit integer) or ISO 8601: `2024-05-01T12:00:00Z`, with "
        "an offset (`2024-05-01T14:00:00+02:00`), with fractional seconds (`12:00:00.250Z`; below a "
        "millisecond rounded down), or a date alone (midnight); without an offset, UTC. An integer above "
        "10^9 and below 10^11 is almost surely epoch seconds (a 2001-5138 date, but January-February 1970 in "
        "milliseconds): it is taken as milliseconds, as given, with a `kafkatool: warning:` on standard error "
        "that shows both readings. A start after the end (`--start-offset 10 --end-offset 5`), an offset "
        "below 0 or past 2^63-1 and a time outside the signed 64-bit range are usage errors (exit 2) before "
        "anything is printed. "
        "When the `.index` or `.timeindex` is missing, fails its sanity check, or points past the end of "
        "the log, kafkatool falls back to a scan from the first byte: the result is the same, only slower. "
        "While any of these options is given the `Found N invalid bytes` line is not printed, as with "
        "`--max-bytes`."
    ),
)

_DUMP_JSONL = _join(
    para(
        "With `--format jsonl` every line is one JSON object (UTF-8, compact) with a `\"type\"` and the "
        "`\"file\"` it is about: the path as given on the command line, absolute in the summaries, as in "
        "the text format. Field names are "
        "Kafka's, in camelCase. Numbers are JSON numbers; absent values are `null`; keys, values and header "
        "values are base64 (`null` for null). Everything goes to standard output, errors included, so a "
        "consumer reads one stream. The types, in the order a run produces them:"
    ),
    tagged(
        [
            (
                "file",
                "Starts each file. `file`; `kind`: `log`, `index`, `timeindex`, `snapshot`, `txnindex`, "
                "`checkpoint` or `unknown`; `header` (logs and KRaft snapshots only): the second header line "
                "of the text format, such as `Log starting offset: 0`.",
            ),
            (
                "batch",
                "One per batch of a `.log` or `.checkpoint` (one per shallow entry for magic 0 and 1). "
                "`file`; `position`: byte position in the file; `size`: bytes including the 12-byte log "
                "overhead; `baseOffset`: the first offset (for a compressed legacy wrapper, its first inner "
                "record's offset when records are decoded, otherwise `null`, since it needs decompressing); `lastOffset`; "
                "`count`: the header's record count (`null` for magic 0 and 1); `magic`; `compresscodec`: "
                "`none`, `gzip`, `snappy`, `lz4` or `zstd`; `timestampType`: `CreateTime`, `LogAppendTime` "
                "or `NoTimestampType`; `maxTimestamp`; `baseSequence`; `lastSequence`; `producerId`; "
                "`producerEpoch`; `partitionLeaderEpoch` (these five are -1 for magic 0 and 1); "
                "`isTransactional`; `isControl`; `deleteHorizonMs`: the base timestamp when the batch has "
                "a delete horizon, else `null`; `crc`: the stored checksum, unsigned; `computedCrc`: the "
                "checksum of the bytes (CRC-32C for v2, CRC-32 for legacy); `isValid`: `crc` equals "
                "`computedCrc`.",
            ),
            (
                "record",
                "Follows its batch, one per record, with `--deep-iteration`, `--print-data-log` or a "
                "decoder option. `file`; `offset`; `timestamp`; `timestampType` (the batch's); `key`, "
                "`value`: base64 or `null`; `headers`: a list of `{\"key\": string, \"value\": base64 or "
                "null}`; `batchPosition`: the `position` of its batch. Magic 2: `sequence`. Magic 0 and 1: "
                "`magic`, `crc` and `isValid` of the record itself. Control records add `controlType` "
                "(`ABORT`, `COMMIT`, `LEADER_CHANGE`, `SNAPSHOT_HEADER`, `SNAPSHOT_FOOTER`, "
                "`KRAFT_VERSION`, `KRAFT_VOTERS` or `UNKNOWN`) and `controlTypeId`; transaction markers "
                "add `coordinatorEpoch`; KRaft control records add `controlData`, the decoded record as an "
                "object (the JSON the text format prints). With `--skip-record-metadata` control records "
                "are not decoded and carry none of these.",
            ),
            ("index_entry", "One per `.index` entry, unless `--verify-index-only`: `file`, `offset`, `position`."),
            (
                "timeindex_entry",
                "One per `.timeindex` entry, unless `--verify-index-only`: `file`, `timestamp`, `offset`.",
            ),
            (
                "producer_snapshot_entry",
                "One per producer in a `.snapshot`: `file`, `producerId`, `producerEpoch`, "
                "`coordinatorEpoch`, `currentTxnFirstOffset` (`null` when no transaction is open), "
                "`lastTimestamp`, `firstSequence`, `lastSequence`, `lastOffset`, `offsetDelta` (the last "
                "four `null` when the entry has no batch metadata).",
            ),
            (
                "aborted_txn",
                "One per `.txnindex` entry: `file`, `version`, `producerId`, `firstOffset`, `lastOffset`, "
                "`lastStableOffset`.",
            ),
            (
                "leader_epoch",
                "One per entry of a `leader-epoch-checkpoint`: `file`, `epoch`, `startOffset`.",
            ),
            (
                "offset_checkpoint",
                "One per entry of a log-dir offset checkpoint (`recovery-point-offset-checkpoint`, "
                "`replication-offset-checkpoint`, `log-start-offset-checkpoint`, "
                "`cleaner-offset-checkpoint`): `file`, `topic`, `partition`, `offset`.",
            ),
            ("partition_metadata", "A `partition.metadata` file: `file`, `version`, `topicId`."),
            ("quorum_state", "A KRaft `quorum-state` file: `file` and the file's own JSON fields."),
            ("meta_properties", "A `meta.properties` file: `file` and one string field per property."),
            (
                "empty, sanity_ok, ignored, corrupt_snapshot, warning",
                "Notes: `file` and `message`, the line the text format prints: an `.index` with no entries "
                "(`<path> is empty.`), a passed `--index-sanity-check`, a file of unknown kind "
                "(`Ignoring unknown file <path>`), a producer snapshot that fails validation (the dump "
                "goes on, as in Kafka), something kafka-dump-log would stop at but kafkatool can go on "
                "from, such as a `.log` whose name is not a number (`kafkatool: warning: ...`).",
            ),
            (
                "trailing_bytes",
                "After the last batch of a `.log` when bytes are left that do not form a complete batch: "
                "`file`, `position` where they start, `length`. The text format's `Found N invalid bytes` line.",
            ),
            (
                "error",
                "A file that could not be dumped (past this point): `file`, `position` (byte position, or "
                "`null` when the error is not at one), `message`. The run goes on with the next file and "
                "exits 1.",
            ),
            (
                "index_mismatches",
                "Summary per `.index` whose entries disagree with the log: `file` (absolute path), `pairs`: "
                "`[{\"indexOffset\": n, \"logOffset\": n}, ...]`, in Kafka's order (latest first).",
            ),
            (
                "timeindex_mismatch",
                "Summary per `.timeindex`: `file`, `pairs` of `indexTimestamp` and `logTimestamp` (the "
                "largest record timestamp of the batch).",
            ),
            (
                "timeindex_out_of_order",
                "Summary per `.timeindex`: `file`, `pairs` of `indexTimestamp` and `previousTimestamp`.",
            ),
            (
                "timeindex_not_found",
                "Summary per `.timeindex`: `file`, `pairs` of `indexedOffset` and `foundLogOffset` (-1 when "
                "no batch was found).",
            ),
            (
                "non_consecutive_offsets",
                "Summary per `.log` (deep iteration only): `file`, `pairs` of `previous` and `next`, latest first; "
                "`omitted`, only when there were more pairs than the last 100,000 kept: how many earlier ones "
                "were left out.",
            ),
        ]
    ),
    example(
        """
        {"type":"file","file":"00000000000000000000.log","kind":"log","header":"Log starting offset: 0"}
        {"type":"batch","file":"00000000000000000000.log","position":0,"size":86,"baseOffset":0,"lastOffset":1,"count":2,"magic":2,"compresscodec":"none","timestampType":"CreateTime","maxTimestamp":1700000000005,"baseSequence":-1,"lastSequence":-1,"producerId":-1,"producerEpoch":-1,"partitionLeaderEpoch":0,"isTransactional":false,"isControl":false,"deleteHorizonMs":null,"crc":1592015369,"computedCrc":1592015369,"isValid":true}
        {"type":"record","file":"00000000000000000000.log","offset":0,"timestamp":1700000000000,"timestampType":"CreateTime","key":"azE=","value":"djE=","headers":[],"batchPosition":0,"sequence":-1}
        {"type":"record","file":"00000000000000000000.log","offset":1,"timestamp":1700000000005,"timestampType":"CreateTime","key":null,"value":"djI=","headers":[{"key":"h1","value":"eA=="}],"batchPosition":0,"sequence":-1}
        """,
        "The segment of the text example under OUTPUT, with `--format jsonl --deep-iteration`:",
    ),
)

_DUMP_EXIT = exit_status(
    {
        0: "Every file was dumped. As with kafka-dump-log this holds even when the output reports "
        "problems: `isvalid: false`, index mismatches, invalid trailing bytes, corrupt producer snapshots. "
        "Also when the reader of standard output went away (`kafkatool dump X | head -1`): the dump stops "
        "quietly, as ripgrep does, so `set -o pipefail` scripts work.",
        1: "At least one file could not be dumped to its end; each such file has an error line "
        "(text: `kafkatool: error:` on standard error; JSON Lines: a `\"type\": \"error\"` object) "
        "naming the file and byte position. The other files were dumped and the summaries printed. "
        "A file that is not a regular file, cannot be read, or lies in a partition directory that cannot "
        "be read counts as one that could not be dumped.",
        2: "Bad usage: an unknown option, a bad value, no files given, a path that does not exist or "
        "cannot be read (`Path 'X' does not exist.`, as for the other commands; also a symlink loop and "
        "`-`), a directory with nothing Kafka in it, an empty `--start`/`--end` range, an offset or time "
        "out of range, a `--max-message-size` below 1, a Java decoder class other than StringDecoder. "
        "Nothing was dumped.",
    }
)


def _dump_compatibility(command: click.Command) -> str:
    """Which kafka-dump-log options are accepted, computed from the command's options."""
    ours = {o for p in command.params if isinstance(p, click.Option) for o in p.opts}
    ours.add("--help")  # every command has it (Click adds it outside ``params``)
    missing = [o for o in _KAFKA_DUMP_LOG_OPTIONS if o not in ours]
    parts = [
        para(
            "`kafkatool dump` takes kafka-dump-log's options with the same meaning, so "
            "`kafka-dump-log.sh` in a script can be replaced by `kafkatool dump`. `--files` is split the "
            "way Java splits it: on every comma, without trimming, dropping trailing empty parts (an "
            "empty part in the middle is an error for that file). `--max-message-size` is used only to "
            "check `.index` entries, as in Kafka. `--index-sanity-check` runs Kafka's check, which "
            "brokers since 2.3 no longer run at startup, whatever the help of kafka-dump-log says. The "
            "output is that of Kafka's newest kafka-dump-log (4.0); the formats of older releases are "
            "not reproduced. kafka-dump-log's `--version` is `kafkatool --version`."
        ),
    ]
    if missing:
        parts.append(
            para(
                "Not supported: "
                + ", ".join(f"`{o}`" for o in missing)
                + "; they are usage errors (exit 2)."
                + (
                    " Instead of Kafka's internal-topic decoders, kafkatool prints keys and payloads with "
                    "its own decoders (see DECODERS)."
                    if any(o.endswith("-decoder") for o in missing)
                    else ""
                )
            )
        )
    return _join(*parts)


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

_DUMP_EXAMPLES = _join(
    example(
        """
        kafka-dump-log.sh --files 00000000000000000000.log --print-data-log
        kafkatool dump --files 00000000000000000000.log --print-data-log
        """,
        "The kafka-dump-log command line, and the kafkatool one that prints the same:",
    ),
    example(
        "kafkatool dump /var/lib/kafka/data/orders-0",
        "Every file of a partition directory: segments, indexes, snapshots, checkpoints:",
    ),
    example(
        "kafkatool dump --print-data-log --start-offset 1500 --end-offset 1599 00000000000000001000.log",
        "The records with offsets 1500 to 1599, found through the .index:",
    ),
    example(
        "kafkatool dump --value-decoder json --start-time 2024-01-31T12:00:00Z 00000000000000000000.log",
        "Payloads as compact JSON, from the first batch written at or after noon UTC:",
    ),
    example(
        "kafkatool dump --index-sanity-check 00000000000000000000.index 00000000000000000000.timeindex",
        "Kafka's sanity check of a segment's indexes:",
    ),
    example(
        "kafkatool dump --verify-index-only --files 00000000000000000000.index",
        "Check an offset index against its log; mismatches are summarised on standard error:",
    ),
    example(
        """kafkatool dump --format jsonl 00000000000000000000.log | jq -c 'select(.type == "error" or (.type == "batch" and (.isValid | not)))'""",
        "Batches with a bad checksum, and errors, as JSON:",
    ),
    example(
        """kafkatool dump --format jsonl --deep-iteration 00000000000000000000.log | jq -r 'select(.type == "record") | .value | @base64d'""",
        "The payloads only, decoded from base64:",
    ),
    example(
        "kafkatool dump --format table --deep-iteration 00000000000000000000.log",
        "A table per file, for reading at a terminal:",
    ),
    example(
        "kafkatool dump --deep-iteration --end-time 2024-05-01T14:00:00+02:00 /var/lib/kafka > dump.txt",
        "Every log dir under /var/lib/kafka, records up to noon UTC, into a file; a progress bar shows on "
        "the terminal meanwhile (`-q` leaves it out):",
    ),
)


# --------------------------------------------------------------------------- verify


def _verify_kinds(command: click.Command) -> str:
    from kafkatool.verify import INFO_KINDS, KINDS

    return _join(
        para(
            "Every finding has one of these kinds. The names are stable: runbooks and scripts match on "
            "them (`--fail-on`, `--ignore`, the `kind` field of `--format jsonl`). Kinds marked "
            "*(information)* describe a state rather than damage and do not fail a run unless "
            "`--fail-on` names them."
        ),
        tagged((k, v + (" (information)" if k in INFO_KINDS else "")) for k, v in KINDS.items()),
    )


_VERIFY_CHECKS = _join(
    para(
        "Per batch, always: the framing of kafka-dump-log's walk (a size below the minimum, a size running "
        "past the end of the file), the magic byte (a v2 CRC does not cover it, so magic 7 is damage even "
        "where Kafka would parse it), the codec id, the CRC (CRC-32C for v2, the outer CRC-32 for v0/v1), "
        "the record count against lastOffsetDelta, offsets that increase within and across the segments of "
        "a partition and stay within the segment's base offset and the int32 relative range, timestamps, "
        "and producer fields (a COMMIT or ABORT marker must sit in a transactional control batch)."
    ),
    para(
        "With `--deep`, every record is decompressed and decoded: the record count against the header, "
        "varints and lengths, records that fill the batch exactly, offset and timestamp deltas, headers, "
        "the inner CRCs of v0/v1 wrapper messages (a recompressed wrapper can carry a valid outer CRC "
        "around a bad inner message) and control records. `--max-decompressed-bytes` caps what one batch "
        "may inflate to, so a decompression bomb is a finding, not an out-of-memory."
    ),
    para(
        "After a bad region the check resynchronises: it searches forward for the next position where a "
        "batch with a valid CRC begins, reports the region's start and length, and goes on. Each such "
        "finding counts the good batches that follow it (`batchesAfter`): the data Kafka's own recovery, "
        "which truncates at the first bad batch, would throw away."
    ),
    para(
        "Side files: `.index` and `.timeindex` get Kafka's sanity check and a full check (every entry at a "
        "batch start whose offsets and timestamps agree, entries increasing, none past the log's end; an "
        "offset-index entry pairing a follower's multi-batch append, the first batch's position with a later "
        "batch's last offset, is not reported); zero-filled preallocated slots are recognised. `.txnindex` "
        "entries are checked against the ABORT markers, producer `.snapshot` files by CRC and against the "
        "log end, `leader-epoch-checkpoint` against the batches' partition leader epochs, and the text "
        "checkpoint files by Kafka's own parsing rules. Directories named `-delete`, `-future` or `-stray` "
        "are checked and reported as such in the summary."
    ),
    para(
        "A zero-filled tail (a preallocated segment, `log.preallocate=true`, after an unclean shutdown; often a "
        "hole of a sparse file) is passed at memory speed and reported once as `trailing_zeros`, however large."
    ),
    para(
        "The files and directories themselves: a file or directory that cannot be read is `unreadable` and the "
        "check goes on with the others; a `.log`, `.index`, `.timeindex` or `.txnindex` in a partition "
        "directory whose name does not start with a signed 64-bit offset (`99999999999999999999999.log`) is "
        "`invalid_file_name` (the broker throws NumberFormatException loading it); a FIFO, socket, device or "
        "directory with a Kafka file name is `not_regular_file` and is never opened; a directory in a log dir "
        "that is not named like a partition (`lost+found`, a backup put there) is `not_a_partition_dir` (the "
        "broker refuses the whole log dir). A log dir is a directory holding `meta.properties` (every broker "
        "writes one); a directory of log dirs is searched too. A path with nothing Kafka in it (no partition "
        "directory, no segment, index, snapshot or checkpoint file) is an error, exit status 2, not a clean run."
    ),
    para(
        "What an interrupted `kafkatool reindex --execute` or `kafkatool truncate --execute` left: a committed "
        "journal (`pending_journal`: the message says which command and how to finish it), its "
        "`*.kafkatool-tmp` files (`kafkatool_temp`: the message says whether a journal still needs the file, "
        "which must then not be removed) and the staging directory `<topic>-<partition>.6b66746c<24 hex>-delete` "
        "beside the partition directory (`kafkatool_staging`: its contents are not checked). Run the interrupted "
        "command again before starting the broker."
    ),
    para(
        "verify is read-only: it opens every file for reading only, never writes or creates a file, and can "
        "run on a log dir a live broker holds (`--max-rate` keeps it from competing for the disk)."
    ),
)

_VERIFY_OUTPUT = _join(
    para(
        "`--format text` prints one line per finding on standard output, "
        "`<path>:<position>: <kind>: <message>` (`<path>: <kind>: <message>` when the finding is about the whole "
        "file), never wrapped, for grep and scripts; `--format table` a table of findings (times in it also in "
        "ISO 8601 UTC); `--format jsonl` one JSON object per finding and a final summary object (numbers stay "
        "numbers). The default is `table` when standard output is a terminal and `text` otherwise. "
        "`--format lines`, the old name of `text`, is still accepted."
    ),
    para(
        "Unless `--quiet`, a summary goes to standard error: at a terminal in colour with a progress bar (bytes "
        "and files) while the check runs; otherwise as plain lines, never wrapped, so "
        "`kafkatool verify DIR 2>&1 | grep 'no failing findings'` works. Its first line is "
        "`Checked <n> files (<n> segments, <n> batches, <size>) in <t> s: no failing findings` or "
        "`...: <n> findings that fail the check`; then `Partition directories in transition: ...` if any; then, "
        "indented, one line per kind found: the kind and its count."
    ),
    para(
        "`expected` and `found` follow one convention in every kafkatool command: `found` is what is on disk "
        "(the stored field), `expected` is what a valid file would hold (the value computed from the bytes, or "
        "the rule the stored value breaks). A CRC finding names both: "
        "`(stored crc <found>, computed crc <expected>)`."
    ),
    para("A finding object:"),
    example(
        """
        {"type":"finding","file":"/data/t-0/00000000000000000000.log","position":1842,"length":678,
         "kind":"crc_mismatch","batchIndex":7,"offset":{"first":122,"last":131},
         "expected":3953238405,"found":3953238404,"message":"... (stored crc 3953238404, computed crc 3953238405; ...)","batchesAfter":2}
        """
    ),
    tagged([
        ("file", "the file the finding is in"),
        ("position, length", "the byte range it covers (null when the finding is about the whole file)"),
        ("kind", "one of the kinds under FINDING KINDS"),
        ("batchIndex", "the batch's index in the walk of its file, when it concerns a batch"),
        ("offset", "first and last offset of that batch, when known"),
        ("expected, found", "when the check compares values: what a valid file would hold (computed), and what is on disk (stored)"),
        ("message", "a sentence for people"),
        ("batchesAfter", "for a bad region: how many good batches follow it in the file"),
    ]),
    para("The last line is the summary:"),
    example(
        """
        {"type":"summary","files":206,"bytes":7012345,"batches":80035,"findings":98,"failing":90,
         "kinds":{"crc_mismatch":90,"index_missing":8},"partitionStates":{},"seconds":0.52}
        """
    ),
)

_VERIFY_EXAMPLES = _join(
    example("kafkatool verify /var/lib/kafka/data", "Check a whole log dir, every partition:"),
    example("kafkatool verify --deep --jobs 2 --max-rate 100M /var/lib/kafka/data", "Decode every record, two processes, at most 100 MB/s of reads on a live broker:"),
    example("kafkatool verify --ignore trailing_zeros,index_missing /data/orders-3 || echo damaged", "In a runbook: fail on damage, not on preallocated tails or missing indexes:"),
    example("kafkatool verify --format jsonl /data/orders-3 | jq 'select(.type==\"finding\") | .kind'", "For a script:"),
    example("kafkatool verify /data 2>&1 | grep -q 'no failing findings' && echo clean", "The summary is one plain line when standard error is not a terminal:"),
)


# --------------------------------------------------------------------------- reindex

_REINDEX_PLAN = _join(
    para(
        "*Which files are rewritten.* Every segment is walked as the broker's recovery walks it and its "
        "indexes are rebuilt in memory. By default a file on disk is replaced only when it is wrong: a "
        "missing `.index` or `.timeindex` (or a missing `.txnindex` of a segment with aborted transactions); "
        "a file `kafkatool verify` finds wrong (any of its `index_*`, `timeindex_*` or `txnindex_*` findings "
        "that fail a check, the same checks, so the two commands agree); an `.index` that does not cover the "
        "log (`index_not_covering`: its last entry lies more than `--index-interval-bytes` + 1 MiB, the "
        "default `replica.fetch.max.bytes`, before the rebuilt index's last entry). A broker's own indexes, "
        "written one entry per append while the rebuild writes one per batch, differ from the rebuild and "
        "are both right: they are kept, and a healthy broker dir gives exit status 0. `--all` replaces every "
        "file that differs from the rebuild, as recovery would."
    ),
    para(
        "*Refusals.* A segment is refused (nothing of it written, the others go on, exit status 1) when a "
        "file to be replaced describes batches at or after a bad batch the rebuild stops at: a rebuild never "
        "covers less of the log than the file it replaces (`bad batch at byte <p> (...)`; run `kafkatool "
        "truncate --execute <partition dir>` first); when its partition dir holds the committed journal of "
        "an interrupted truncate (`kafkatool-truncate.kafkatool-journal`: reindex never removes another "
        "command's pending journal or the temp files it names; run `kafkatool truncate --execute <partition "
        "dir>` to finish it); when an index file is a symbolic link, a FIFO or another non-regular file; "
        "when a file cannot be read; or, with `--execute`, when a file or the `.log` changed between the "
        "plan and the lock (a broker appended, another run finished first: run again)."
    ),
    para(
        "*Targets.* A segment named on the command line must be `<20-digit base offset>.log` (or its "
        "`.index`, `.timeindex`, `.txnindex`); anything else is refused with exit status 2, as is a "
        "directory with no segment in it at all (`no Kafka segment found`). Directories are searched "
        "recursively (a partition dir, a log dir, a directory of log dirs), without following symbolic "
        "links below a named path; a named symbolic link is resolved, so a symlinked partition dir is locked "
        "and switched in its real log dir. Below a named directory, kafkatool's own backup dirs (holding "
        "`MANIFEST.json` and `RESTORE.txt`) and `-delete`/`-future`/`-stray` partition dirs are skipped "
        "(`skipped: ...`). A `*.log` whose name is not an offset (Kafka cannot load such a partition), a "
        "`.log` that is not a regular file, and a directory that cannot be listed are reported on a line "
        "of their own, exit status 1, and the rest is planned as usual."
    ),
    para(
        "Without `--execute` nothing is written, no lock is taken and no backup is made; a warning on "
        "standard error names the process (PID) holding `<log dir>/.lock` when one does. For every segment "
        "that needs a change, is refused or has a bad tail, `--format text` prints a block on standard output: "
        "a header line `<segment>: <n> batches, offsets <first>-<last>, <valid> valid bytes of <size>`, then "
        "one line per file:"
    ),
    tagged([
        ("unchanged", "The file on disk is byte for byte what recovery would build."),
        ("keep", "The file differs from the rebuild but passes verify's index checks and covers the log; it is left as it is (`--all` rewrites it)."),
        ("rewrite", "`<old size> -> <new size> bytes, <old> -> <new> entries (<why>)`: the whole file is replaced; `why` is verify's finding (`<kind>: <message>`), `index_not_covering: ...` or `--all`."),
        ("create", "The file is missing and will be written (`(missing)`)."),
        ("refused", "Nothing of this segment is written, and why (see *Refusals*)."),
        ("remove", "A `.kafkatool-tmp` or `<segment>.kafkatool-journal` file of an interrupted reindex (or a temp file of a run that never committed), or a staging directory `<topic>-<partition>.6b66746c<24 hex>-delete` beside the partition directory, left by an interrupted run; it is deleted."),
        ("leave", "The `.txnindex` is not rebuilt, because the transactions open at the segment's base cannot be known: there is no `<base>.snapshot` and an earlier segment cannot be replayed (§9 of the spec: a segment's transaction index cannot be rebuilt from that segment alone). Otherwise the `.txnindex` is rebuilt from the ABORT markers like the other files, with the lastStableOffset recovery computes."),
        ("bad tail", "The walk stopped before the end of the `.log` (a CRC mismatch, a size below 14, an offset the index cannot take, a partial batch). A rebuilt index covers only the valid bytes before it, as the broker's recovery would build it; the `.log` is never changed. `kafkatool truncate` removes such a tail."),
    ]),
    para(
        "After `--execute` each block ends with a `done` line (or `refused`). `--format jsonl` prints compact "
        "JSON, Kafka's camelCase keys: a `reindex_problem` object per target problem (`path`, `kind`: "
        "`invalid_segment_name`, `unreadable`, `not_regular` or `skipped`, `message`); one `reindex_segment` "
        "object per segment (every segment, changed or not: `segment`, `partitionDir`, `baseOffset`, "
        "`indexIntervalBytes`, `batches`, `firstOffset`, `lastOffset`, `logSize`, `validBytes`, `badTail`, "
        "`files` with `path`, `kind`, `action`, `why`, `oldSize`, `newSize`, `oldEntries`, `newEntries`, "
        "`oldSha256`, `newSha256`; `txnindexNotRebuilt` (why, or null), `leftovers`, `stagingLeftovers`, "
        "`refused` (null or `kind` and `reason`), `needsChanges`, and after `--execute` `written`, `removed`, "
        "`backupDir`, `method` (`exchange`, or `journal (<why>)`), `verified`) and a final `reindex_summary` "
        "object (`execute`, `all`, `segments`, `needingChanges`, `refused`, `problems`, `filesWritten`, "
        "`backupDirs`, `seconds`). A one-line summary goes to standard error unless `--quiet`, and a progress "
        "bar while standard error is a terminal. File names that are not UTF-8 are written as their own "
        "bytes in text, as `\\udcXX` escapes in JSON."
    ),
    para(
        "The rebuild is the broker's (`LogSegment.recover`): for each valid batch, the maximum timestamp is "
        "updated first; when more than `--index-interval-bytes` have passed since the last indexed batch, an "
        "offset entry (the batch's last offset, its position) and a time entry are added; at the end the final "
        "time entry (the segment's maximum timestamp) is added and both files are trimmed to their exact length. "
        "Use the topic's `index.interval.bytes`."
    ),
)

_REINDEX_SAFETY = _join(
    para(
        "*Lock.* Before writing, reindex opens `<log dir>/.lock` (the partition directory's parent) and takes "
        "a POSIX record lock with `fcntl`, the kind the broker's `FileChannel.tryLock` takes; an `flock` check "
        "would not see it. If a live broker holds it, reindex refuses with exit status 2 and changes nothing. "
        "The lock is held until every segment of the log dir is done. A missing `.lock` is created and locked. "
        "`--force` skips the check: only for a copy you know is offline."
    ),
    para(
        "*Transitional directories.* Partition directories named `*-delete`, `*-future` or `*-stray` are "
        "refused (exit status 2) unless `--allow-transitional` is given."
    ),
    para(
        "*Backups.* Every file is copied, and fsynced, into the backup directory before it is replaced. The "
        "default is `kafkatool-backup-<log dir name>-<UTC time>` beside the log dir: not inside it, because "
        "the broker takes every directory in a log dir for a partition and refuses other names. The backup "
        "holds the originals as `<partition dir>/<file name>`, a `MANIFEST.json` (original path, size, sha256, "
        "and the size and sha256 of what replaced it, or that the file was created) and a `RESTORE.txt`."
    ),
    para(
        "*Atomic replacement.* The whole partition directory is switched at once. Its new state is built "
        "beside it, in the same log dir, as `<topic>-<partition>.6b66746c<24 hex>-delete`: the name Kafka gives "
        "a partition being deleted, so a broker that finds it loads it, does not take it for a duplicate of the "
        "partition, and deletes it (any other directory name fails the whole log dir). Every file but the "
        "`.log` files is written fresh and fsynced (an index is never a hard link: the broker opens a loaded "
        "segment's indexes writable and resizes them); then every unchanged `.log` is hard-linked, not copied. "
        "Once the backup is complete, one `renameat2(RENAME_EXCHANGE)` swaps the two directories and the log "
        "dir is fsynced; the staging directory, now holding the old state, is removed. A crash at any point "
        "leaves the partition directory complete-old or complete-new, never a mix; the next run (a dry run "
        "reports it) removes a leftover staging directory. Run it again before starting the broker: after an "
        "unclean shutdown a broker may recover the segments of a leftover before deleting it, and their "
        "`.log` files can be hard links of the partition's own."
    ),
    para(
        "*Fallback.* Where the exchange is impossible (not Linux, no `renameat2`, a file system that refuses "
        "`RENAME_EXCHANGE`, a hard link refused, a subdirectory in the partition directory, or "
        "`KAFKATOOL_NO_EXCHANGE` set), new files are written beside the old ones as `<name>.kafkatool-tmp` and "
        "fsynced; a journal `<segment>.kafkatool-journal` is written (the commit point); each file is renamed "
        "into place and the directory fsynced; the journal is removed. Between the two renames of one segment a "
        "crash can leave a new `.index` beside an old `.timeindex`; the journal then marks the repair as "
        "unfinished, and the next run completes it. The report's `method` says which way was used."
    ),
    para(
        "*Re-verification.* After writing, every file is read back and compared with the plan, and the segment "
        "is planned again: the new plan must find nothing to change, so a second run is a no-op."
    ),
    para(
        "*Hostile files.* Temp files are always created new (`O_EXCL|O_NOFOLLOW`, after removing whatever had "
        "the name): a symbolic link planted as `<name>.kafkatool-tmp` is never written through. Index files "
        "are read without following links; a symlinked or non-regular index file refuses its segment. A new "
        "file takes the owner and mode of the file it replaces (or of its `.log`) on both paths, so a broker "
        "running as another user can still open it."
    ),
    para(
        "*Full disk, Ctrl-C.* A write error (a full disk) names the file: before the switch the partition "
        "dir is the old state and the partial staging dir is removed (or, if that fails too, left as a "
        "leftover the next run removes); on the journal path the temp files written so far are removed. "
        "Ctrl-C while planning prints one line; during `--execute` it prints the state of every partition "
        "dir the run meant to change: `done`, `untouched`, `refused`, or `interrupted` with the leftover "
        "(a staging dir, a journal) the next `kafkatool reindex --execute` completes or removes. The exit "
        "status is then 130."
    ),
)

_REINDEX_RESTORE = _join(
    para(
        "Stop the broker, then run the `cp -p` lines of `RESTORE.txt` (they copy each original back over the "
        "rebuilt file; `rm -f` lines remove files reindex created where there were none). The whole file can "
        "be run with a shell:"
    ),
    example("sh -e /var/lib/kafka/kafkatool-backup-data-20250101T120000000000Z/RESTORE.txt"),
    para("Check the restored files against `MANIFEST.json` (its `sha256` fields) with `sha256sum`."),
)

_REINDEX_EXAMPLES = _join(
    example("kafkatool reindex /var/lib/kafka/data/orders-3", "See which index files are wrong (exit status 1 if any):"),
    example("kafkatool reindex --execute --index-interval-bytes 4096 /var/lib/kafka/data", "With the broker stopped, rewrite the wrong or missing indexes of a log dir:"),
    example("kafkatool reindex --execute --all /var/lib/kafka/data/orders-3", "Rebuild every index exactly as recovery would, the broker's own included:"),
    example("kafkatool reindex --format jsonl /data/orders-3 | jq 'select(.type==\"reindex_segment\" and .needsChanges) | .segment'", "For a script:"),
)


# --------------------------------------------------------------------------- truncate

_TRUNCATE_PLAN = _join(
    para(
        "*The cut.* It is the broker's (`LogSegment.recover` and `LogLoader.recoverLog`), decided batch by "
        "batch: (1) the first entry whose size is below 14, whose size runs past the end of the file, that is "
        "a tail of at most 17 bytes, or whose CRC is wrong: the cut is at its start; (2) a control batch of a "
        "producer (producerId > -1) whose first record is not a readable COMMIT/ABORT marker (a key shorter "
        "than 4 bytes or with a negative version, a value shorter than 6 bytes or with a negative version, a "
        "record that cannot be read): recovery has already counted it when reading the marker throws, so it "
        "keeps that batch and cuts right after it; (3) a batch whose offset index entry would not be larger "
        "than the previous one (offsets going backwards where an entry is due; between entries nothing is "
        "checked): recovery throws InvalidOffsetException and the loader truncates the segment to its base "
        "offset, which empties it (or cuts where its partly rebuilt index already points at the base offset). "
        "Record bodies are not checked (recovery does not check them either). As after an unclean shutdown, "
        "every later segment of the partition goes too. A zero-filled tail (a preallocated segment after an "
        "unclean shutdown) is recognised at memory speed: holes are skipped with `SEEK_DATA` and data is "
        "compared against zeros 1 MiB at a time."
    ),
    para(
        "*Refusals.* Where recovery does not cut but splits the segment or fails to load the log, nothing of "
        "the partition is changed and the reason is printed (`refused`), exit status 2: a batch whose last "
        "offset the segment cannot hold (below its base offset, or more than 2147483647 above it; the broker "
        "splits a segment whose last batch overflows and fails to load it otherwise); a control record of a "
        "producer that is not COMMIT/ABORT, or has no key or no value (the load fails; `--keep-valid-after` "
        "removes just that batch); a full index; a segment or a file truncate would read, replace or move that "
        "is a symbolic link, a FIFO or another non-regular file; a stale journal (see *SAFETY*); and, with "
        "`--execute`, a partition whose files changed between the plan and the lock (a broker appended: run "
        "again). The other partitions go on."
    ),
    para(
        "*--keep-valid-after.* Only what recovery refuses is removed: a bad region, a batch with a malformed "
        "marker, a batch whose offsets go backwards at an index entry. After a region that cannot be framed, "
        "the next entry with a valid CRC is found by resynchronising, and a candidate is kept only when it "
        "fits: inside a damaged batch whose declared size leads to a valid batch, CRC-valid batches are record "
        "content (a record value holding Kafka batches) unless they lead there themselves (then the size field "
        "was the damage); of the candidate runs, those kept form the sequence holding the most bytes whose "
        "offsets increase from the last batch kept before the damage. The others are reported (`reject`) "
        "and removed with the region. Later segments stay."
    ),
    para(
        "*Targets.* As for `kafkatool reindex`: a file named on the command line must be `<20-digit base "
        "offset>.log` (or its `.index`, `.timeindex`, `.txnindex`), anything else is refused with exit status "
        "2, as is a path with no segment in it at all (`no Kafka segment found`); directories are searched "
        "recursively (a partition dir, a log dir, a directory of log dirs); a named symbolic link is resolved, "
        "so a symlinked partition dir is locked and switched in its real log dir; kafkatool's backup dirs and "
        "`-delete`/`-future`/`-stray` partition dirs below a named directory are skipped (unless "
        "`--allow-transitional`). A directory or a "
        "segment that cannot be read is reported on standard error (naming it and the system's reason) and the "
        "others are planned; the exit status is then 2."
    ),
    para(
        "Without `--execute` nothing is written, no lock is taken and no backup is made; a warning on standard "
        "error names the process (PID) holding `<log dir>/.lock` when one does. For every partition that needs "
        "a change or is refused, `--format text` prints a block on standard output (one line per item, never "
        "wrapped): a header line `<partition dir>: <n> segment(s) checked`, then:"
    ),
    tagged([
        ("refused", "Nothing of this partition is changed, and why (see *Refusals*)."),
        ("cut", "`<segment>: <old> -> <new> bytes, <n> batches (offsets <first>-<last> kept), new next offset <o>`."),
        ("remove", "`<segment> bytes [<start>, <end>) (<n> bytes): <reason>`: a byte range that leaves the `.log` for the backup, with the first problem found in it; or a `.kafkatool-tmp` file or a staging directory of an interrupted run."),
        ("reject", "With `--keep-valid-after`: CRC-valid batches found inside a removed region that are not kept, their offsets and why."),
        ("discard", "How many intact batches (found by resynchronising past the bad bytes, fitting the offsets) lie in the removed tail, and their offsets: the data the broker's recovery would drop; `--keep-valid-after` keeps them."),
        ("gap", "With `--keep-valid-after`: the offset (or offsets) missing between the kept batches around a removed region."),
        ("create", "A file written where there was none: the cut segment's `.index` or `.timeindex`, with its size."),
        ("rewrite", "A file replaced whole, `<old> -> <new> bytes`: the cut segment's `.index` and `.timeindex` (rebuilt as `kafkatool reindex --all` does), a `.txnindex` without the aborted transactions whose lastOffset is at or above the new log end, the `leader-epoch-checkpoint` without the entries starting at or above it."),
        ("move", "A file moved into the backup: every file of a segment after the cut one, and every producer `.snapshot` above the new log end."),
        ("log end", "The partition's log end offset after the change."),
        ("note", "A dependent file that cannot be read and is left unchanged, or an interrupted run to complete."),
    ]),
    para(
        "After `--execute` each block ends with a `done` line (or `refused`). `--format jsonl` prints compact "
        "JSON, Kafka's camelCase keys: a `truncate_problem` object per target problem (`path`, `kind`, "
        "`message`); one `truncate_partition` object per partition (`partitionDir`, `keepValidAfter`, "
        "`segmentsChecked`, `segments` with `segment`, `baseOffset`, `oldSize`, `newSize`, `batchesKept`, "
        "`firstOffset`, `lastOffset`, `nextOffset`, `removed` and `kept` byte ranges, `rejected`, "
        "`batchesDiscarded`, `discardedOffsets`, `offsetGaps`; `rewrites` (`action`: `create` or `rewrite`), "
        "`moves`, `newLogEnd`, `notes`, `leftovers`, `interruptedJournal`, `stagingLeftovers`, `refusals` "
        "(`path`, `position`, `reason`), `needsChanges`, and after `--execute` `written`, `moved`, `removed`, "
        "`backupDir`, `completedInterruptedRun`, `method`, `verified`) and a final `truncate_summary` object "
        "(`execute`, `partitions`, `needingChanges`, `changed`, `refused`, `unreadable`, `bytesRemoved`, "
        "`backupDirs`, `seconds`). A one-line summary goes to standard error unless `--quiet`. File names that "
        "are not UTF-8 are written as their own bytes in text, as `\\udcXX` escapes in JSON."
    ),
)

_TRUNCATE_SAFETY = _join(
    para(
        "*Lock.* As for `kafkatool reindex`: a POSIX `fcntl` lock on `<log dir>/.lock` (the real log dir of a "
        "symlinked partition dir), refused with exit status 2, naming the process, when a live broker holds it; "
        "`--force` skips the check, only for a copy known to be offline. Partition directories named "
        "`*-delete`, `*-future` or `*-stray` need `--allow-transitional`."
    ),
    para(
        "*Nothing is lost.* Before anything changes, every removed byte range of a `.log` is written and fsynced "
        "to `<backup>/<partition dir>/<segment>.log.<start>-<end>.bytes`, every rewritten file is copied whole, "
        "and `MANIFEST.json` lists each range and file with the sha256 of the whole original and of the result. "
        "Files removed from the partition are put into the backup before the switch, not deleted (a `.log` as a "
        "hard link when the backup is on the same file system, anything else as a copy)."
    ),
    para(
        "*Crash safety.* As for `kafkatool reindex`: the new partition directory is built beside the old one as "
        "a staging directory named like a partition being deleted (the cut `.log` written from its kept byte "
        "ranges, the other small files fresh, unchanged `.log` files hard-linked last) and switched with one "
        "`renameat2(RENAME_EXCHANGE)`: a crash leaves the old state or the new one, never a mix, and the next "
        "run removes a leftover staging directory. After writing, the result is walked again and planned "
        "again: a second run is a no-op."
    ),
    para(
        "*The journal.* Where the exchange is impossible (a subdirectory or another non-regular file in the "
        "partition directory, a file system without it, `KAFKATOOL_NO_EXCHANGE` set), new files are written "
        "beside the old ones as `<name>.kafkatool-tmp` (created new, never through an existing name, with the "
        "owner and mode of the file they replace) and fsynced; the journal "
        "`kafkatool-truncate.kafkatool-journal` is then written in the partition directory (the commit "
        "point), recording the size, mtime and inode (and the sha256 of files up to 16 MiB) of every file it "
        "will replace or move and of every temp file; the renames and moves follow; the journal is removed. A "
        "crash before the commit leaves the old files (the next run deletes the temp files); after it the "
        "partition is a mix of old and new files until the next `kafkatool truncate --execute` completes the "
        "journal: start no broker before. If one did start and changed a file the journal still has to replace "
        "or move (appended to the active segment, recovered it, created an index), completing the journal "
        "would move or overwrite what it wrote: truncate refuses (exit status 2), naming the file and what "
        "changed, and prints the way out: remove the journal and its temp files (the `rm` command is printed) "
        "and run truncate again, which plans afresh from what is on disk; the earlier backup keeps what the "
        "interrupted run removed. A journal with nothing left to do is removed whatever happened since."
    ),
    para(
        "*Full disk, Ctrl-C.* A write error (a full disk, a read-only file system) names the file; the "
        "partition is left as it was (a partial staging dir or temp file is removed). Ctrl-C while planning "
        "prints one line; during `--execute` it prints the state of every partition dir the run meant to "
        "change: `done`, `untouched`, `refused`, or interrupted and `unchanged (the old state, complete)`, "
        "`changed (the new state, complete)` or `committed but not complete` (a journal the next `kafkatool "
        "truncate --execute` completes), with the staging dir or temp files left over. The exit status is then "
        "130."
    ),
)

_TRUNCATE_RESTORE = _join(
    para(
        "Stop the broker, then run `kafkatool restore <backup dir>` (a plan; `--execute` puts everything back "
        "and checks each file's sha256 before and after), or, without kafkatool, run `RESTORE.txt` with a "
        "shell. It splices every removed byte range back into its `.log` at its original position (a short "
        "embedded Python program that refuses a file of an unexpected size), then copies the rewritten and "
        "moved files back. Running it twice is harmless."
    ),
    example("kafkatool restore --execute /var/lib/kafka/kafkatool-backup-data-20250101T120000000000Z"),
    example("sh -e /var/lib/kafka/kafkatool-backup-data-20250101T120000000000Z/RESTORE.txt"),
)

_TRUNCATE_EXAMPLES = _join(
    example("kafkatool truncate /var/lib/kafka/data/orders-3", "See what recovery would cut (exit status 1 if anything):"),
    example("kafkatool truncate --execute /var/lib/kafka/data", "With the broker stopped, cut every damaged partition of a log dir:"),
    example("kafkatool truncate --keep-valid-after --execute /var/lib/kafka/data/orders-3", "Remove only a poisoned batch and keep everything after it:"),
    example("kafkatool truncate --format jsonl /var/lib/kafka/data | jq -c 'select(.type==\"truncate_partition\" and .needsChanges) | {partitionDir, newLogEnd}'", "For a script:"),
)


#: Hand-written sections per command (key: the command name; for nested groups, "group sub").
#: Each body is roff text, or a callable that takes the Click command and returns roff.
EXTRA_SECTIONS: dict[str, list[tuple[str, SectionBody]]] = {
    "dump": [
        ("OUTPUT", _DUMP_OUTPUT),
        ("JSON LINES SCHEMA", _DUMP_JSONL),
        ("DECODERS", _dump_decoders),
        ("SEEKING", _DUMP_SEEK),
        ("EXIT STATUS", _DUMP_EXIT),
        ("COMPATIBILITY", _dump_compatibility),
        ("EXAMPLES", _DUMP_EXAMPLES),
    ],
    "verify": [
        ("CHECKS", _VERIFY_CHECKS),
        ("FINDING KINDS", _verify_kinds),
        ("OUTPUT", _VERIFY_OUTPUT),
        ("EXIT STATUS", lambda command: exit_status({0: "No failing findings.", 1: "Findings of the kinds that fail the check (see `--fail-on`). A file that cannot be read, or a directory that cannot be listed, is such a finding (`unreadable`): the check goes on with the rest.", 2: "Bad usage (an unknown kind, a path that does not exist), or a path with nothing Kafka in it."})),
        ("EXAMPLES", _VERIFY_EXAMPLES),
    ],
    "reindex": [
        ("PLAN OUTPUT", _REINDEX_PLAN),
        ("SAFETY", _REINDEX_SAFETY),
        ("RESTORING FROM THE BACKUP", _REINDEX_RESTORE),
        ("EXIT STATUS", lambda command: exit_status({0: "Nothing to change (dry run), or the changes were applied and re-verified.", 1: "Dry run: an index file is wrong, missing or does not cover the log. Either mode: a segment was refused, a file could not be read or is not a regular file, or a `.log` has a name Kafka cannot load.", 2: "Bad usage (a file that is not a segment, a path that does not exist), nothing Kafka in the paths, an I/O error (a full disk), or a refusal of the whole run: a live broker holds the log dir, or a transitional directory without `--allow-transitional`.", 130: "Interrupted (Ctrl-C); the state of each partition dir is printed."})),
        ("EXAMPLES", _REINDEX_EXAMPLES),
    ],
    "truncate": [
        ("PLAN OUTPUT", _TRUNCATE_PLAN),
        ("SAFETY", _TRUNCATE_SAFETY),
        ("RESTORING FROM THE BACKUP", _TRUNCATE_RESTORE),
        ("EXIT STATUS", lambda command: exit_status({0: "Nothing to change (dry run), or the changes were applied and re-verified.", 1: "Dry run: changes are needed.", 2: "Bad usage (a file that is not a segment, a path that does not exist), nothing Kafka in the paths, a directory or segment that could not be read (the others are still planned), an I/O error (a full disk), or a refusal: a live broker holds the log dir, a transitional directory without `--allow-transitional`, a segment the broker's recovery would split or fail to load, a non-regular file, a stale journal, a partition that changed since it was planned.", 130: "Interrupted (Ctrl-C); the state of each partition dir is printed."})),
        ("EXAMPLES", _TRUNCATE_EXAMPLES),
    ],
    "restore": [
        ("THE BACKUP DIRECTORY", _join(
            para(
                "`kafkatool reindex --execute` and `kafkatool truncate --execute` write, before anything in the log "
                "dir changes, every original into a backup directory (mode 0700; each file keeps the original's "
                "owner, mode and modification time): `<partition dir>/<file>` for a whole file, "
                "`<partition dir>/<segment>.log.<start>-<end>.bytes` for a byte range removed from a `.log`. Beside "
                "them:"
            ),
            tagged([
                ("MANIFEST.json", "Format 2: one entry per change (`seq`, `run`, `tool`, `action` `cut`, `rewritten`, "
                 "`created`, `moved` or `removed`, `logDir`, `path` relative to the log dir, `original` and `result` "
                 "each with the whole file's `size` and `sha256`, the original also with `mode`, `uid`, `gid`, "
                 "`mtimeNs`; `backupFile`, or `pieces` with `start`, `end`, `file`, `sha256`). Compact JSON, one "
                 "entry per line; names that are not UTF-8 are kept as `\\udcXX` escapes."),
                ("SHA256SUMS", "The sha256 of every original, paths relative to the log dir: "
                 "`cd <log dir> && sha256sum -c <backup dir>/SHA256SUMS` (absolute paths when the backup covers "
                 "several log dirs)."),
                ("RESTORE.txt", "The same restore without kafkatool: `sh -e RESTORE.txt` (`LOG_DIR=` and `BACKUP=` "
                 "when the log dir or the backup moved). It checks each file's sha256 just before it writes it, "
                 "where `kafkatool restore` checks every file before it writes any."),
            ]),
            para(
                "Several runs and several partitions may share one backup directory: each run adds its entries "
                "under an exclusive lock of the directory and never overwrites a file there. When one file was "
                "changed by several runs, its entries form a chain (original, result of the first run = original "
                "of the second, ...) that a restore undoes newest first."
            ),
        )),
        ("OUTPUT", _join(
            para(
                "`--format text` prints, for every file that needs restoring, a line `<path>:` and one line per "
                "step: `splice` (removed byte ranges back into a cut `.log`), `copy` (a whole original back), "
                "`remove` (a file the command created); after `--execute` a `done` line. A `remove` block names a "
                "temporary file or staging directory an interrupted run left before its commit point."
            ),
            para(
                "`--format jsonl` prints one compact `restore_file` object per file of the backup (`path`, "
                "`logDir`, `relativePath`, `needsChanges`, `steps` with `action`, `entry`, `run`, `tool`, "
                "`undoes`, `backupFiles`; `original`; after `--execute` `restored`) and a final `restore_summary` "
                "(`backupDir`, `execute`, `files`, `needingChanges`, `restored`, `logDirs`, `leftovers`, `notes`, "
                "`seconds`). A summary goes to standard error unless `--quiet`."
            ),
        )),
        ("SAFETY", para(
            "Before anything is written, every file is compared with the manifest: it must be the original, or "
            "what a recorded run left there (then that run is undone), or the original of a run that never "
            "switched the partition (then that entry is skipped). A file that is none of these (a broker wrote to "
            "it since), a backup file that does not match its sha256, a missing partition directory or a "
            "committed journal of an interrupted run is refused, each with its file named, and nothing is written.",
            "With `--execute`, the `.lock` of every log dir concerned is taken as `kafkatool reindex` takes it "
            "(refused, naming the process holding it, while a broker runs; `--force` skips the check, only for a "
            "copy known to be offline), and the files are checked again under the lock. Each file is rebuilt "
            "beside its target as `<name>.kafkatool-tmp`, checked against the original's sha256, given the "
            "original's owner (when running as root), mode and modification time, fsynced and renamed into "
            "place; the directory is fsynced. Afterwards every restored file is hashed again. A restore killed "
            "at any point leaves each file at some state of its chain: running it again finishes the job, and "
            "a second run of a complete restore changes nothing.",
        )),
        ("EXIT STATUS", lambda command: exit_status({
            0: "Every file is the original (dry run), or everything was put back and verified.",
            1: "Dry run: files need restoring.",
            2: "Bad usage, an I/O error (named), or a refusal: a file changed since the backup, a damaged or "
               "missing backup file, a pending journal, a live broker holding the log dir.",
        })),
        ("EXAMPLES", _join(
            example("kafkatool restore /var/lib/kafka/kafkatool-backup-data-20250101T120000000000Z",
                    "See what would be put back (exit status 1 if anything):"),
            example("kafkatool restore --execute /var/lib/kafka/kafkatool-backup-data-20250101T120000000000Z",
                    "With the broker stopped, put everything back:"),
            example("kafkatool restore --execute --log-dir /mnt/disk2/kafka /backups/kafkatool-backup-data-20250101T120000000000Z",
                    "The log dir's disk is now mounted elsewhere:"),
            example("cd /var/lib/kafka/data && sha256sum -c /var/lib/kafka/kafkatool-backup-data-20250101T120000000000Z/SHA256SUMS",
                    "Check the originals with coreutils alone:"),
        )),
    ],
}


# =========================================================================== kafkatool-runbooks(7)
#
# A hand-written section-7 page: step-by-step procedures. Every line of an example block that
# starts with ``kafkatool `` is parsed with the current CLI by tests/test_manpages.py, so the
# commands shown here cannot drift from the options.

RUNBOOKS = f"{PROG}-runbooks"
_LOG_DIR = "/var/lib/kafka/data"
_PART = f"{_LOG_DIR}/orders-3"
_SEG = f"{_PART}/00000000000000001000.log"
_BACKUP = "/var/lib/kafka/kafkatool-backup-data-20250101T120000000000Z"


def _steps(*steps: Union[str, tuple[str, ...]]) -> str:
    """A numbered list. A step is prose, or a tuple: prose, then a code block (a part that starts
    with ``$ ``, the marker dropped), then more prose and code blocks, each under the step's text."""
    out = []
    for number, step in enumerate(steps, 1):
        parts = (step,) if isinstance(step, str) else step
        out.append(f'.IP "{number}." 4')
        first = True
        for part in parts:
            if part.startswith("$ "):
                code = textwrap.dedent(part[2:]).strip("\n").split("\n")
                body = "\n".join(_protect_lines(_esc_raw(line)) for line in code)
                out.append(f".RS\n.nf\n{body}\n.fi\n.RE")
                first = False
            else:
                out.append(("" if first else '.IP "" 4\n') + _prose(part))
                first = False
    return "\n".join(out)


def _runbook(symptoms: str, steps: str, why: str, *, when: str = "Symptoms", extra: tuple[str, str] | None = None) -> str:
    """One procedure: what the operator sees (``when``), an optional ``(title, body)``, the steps, and why."""
    more = (f".SS {_quote_arg(extra[0])}", extra[1]) if extra else ()
    return _join(f".SS {_quote_arg(when)}", symptoms, *more, '.SS "Steps"', steps, '.SS "Why"', why)


_RB_DESCRIPTION = para(
    "Step-by-step procedures for the damage an operator meets in a Kafka log dir, with the `kafkatool` "
    "commands that find it, show the repair as a dry run, apply it with a backup, and undo it. "
    f"The examples use the log dir `{_LOG_DIR}` and its partition directory `{_PART}`; replace them with "
    "yours (the broker's `log.dirs`).",
    "Every procedure follows the same order: look with `kafkatool verify` (read-only), stop the broker, run the "
    "repair without `--execute` (a dry run that prints the plan), read the plan, run it again with `--execute`, "
    "check with `kafkatool verify`, start the broker.",
)

_RB_BEFORE = _join(
    bullets([
        "*Stop the broker, or work on a copy.* `kafkatool reindex --execute` and `kafkatool truncate --execute` "
        "take the POSIX lock on `<log dir>/.lock` that the broker holds while it runs; when a live broker holds it "
        "they refuse with exit status 2, name the process, and change nothing (a dry run warns about it). A "
        "stopped broker is one whose process has exited: `systemctl stop` returning is not enough if the service "
        "has a long stop timeout.",
        "*Verify is read-only.* `kafkatool verify` never writes or creates a file and can run on a live broker; "
        "`--max-rate` caps its reads (e.g. `--max-rate 50M`) so it does not compete with the broker for the disk. "
        "On a live broker the active (last) segment of a partition may be in the middle of a write: confirm a "
        "finding there on the stopped broker before repairing it.",
        "*Always a dry run first.* Without `--execute`, `reindex` and `truncate` print what they would change and "
        "change nothing; exit status 1 means there is something to change, 0 that there is nothing.",
        "*When in doubt, take a copy* of the partition directory (`cp -a`) into another directory that plays the "
        "log dir, and rehearse there with `--force` (which skips the lock check: only ever on a copy).",
        "*Backups.* With `--execute` every replaced file and every removed byte range goes first to a backup "
        "directory, by default `kafkatool-backup-<log dir name>-<UTC time>` beside the log dir. A `--backup-dir` "
        "inside the log dir is refused: the broker takes every directory in a log dir for a partition. Make sure "
        "that file system has room. See *RESTORING FROM THE BACKUP*.",
        "*An interrupted repair.* If `reindex --execute` or `truncate --execute` was killed or the machine went "
        "down, run the same command again before starting the broker. The partition directory is complete, "
        "either as it was or as repaired; `kafkatool verify` and the dry run name what the interrupted run left: "
        "the staging directory beside it (`<topic>-<partition>.6b66746c<24 hex>-delete`, named like a partition "
        "being deleted; `--execute` removes it) or, where the exchange was impossible, a journal the next run "
        "completes (`pending_journal`, with its `*.kafkatool-tmp` files: never remove those by hand). A broker "
        "would delete the staging directory as well, but after an unclean shutdown it may first recover the "
        "segments in it, whose `.log` files can be hard links of the partition's own. Ctrl-C stops a command "
        "with exit status 130; `reindex` and `truncate` then print the state of each partition directory.",
        "*Index spacing.* `reindex` and `truncate` build indexes with `--index-interval-bytes` (default 4096, "
        "Kafka's default); pass the topic's `index.interval.bytes` if it overrides it.",
        "*Replicas.* On a replicated topic, what a repaired follower loses is fetched back from the leader when it "
        "rejoins. Run `kafkatool verify` on the other replicas too before deciding which copy to trust.",
    ]),
    para("Keep the findings from before the repair; they are what a restore brings back:"),
    example(f"kafkatool verify --format jsonl --max-rate 50M {_LOG_DIR} > /root/verify-before.jsonl"),
)

_RB_EXIT = _join(
    para("What the exit status of each command means in these procedures:"),
    tagged([
        ("kafkatool verify", "0: no failing findings (information kinds such as `index_missing` and "
         "`preallocated_index_tail` do not fail). 1: findings; read them. A file or directory that cannot be read "
         "is one of them, `unreadable`, and the check goes on with the rest (it is also what stops the broker with "
         "`Could not read file <file>`; check permissions and the kernel log). 2: bad usage, or a path with "
         "nothing Kafka in it."),
        ("kafkatool reindex, kafkatool truncate", "Dry run: 0 nothing to change, 1 changes are needed (the plan is "
         "on standard output). With `--execute`: 0 the changes were applied and re-verified. 2 in both: bad usage, "
         "an I/O error, or a refusal: a live broker holds the log dir (stop it), or a `*-delete`, `*-future` or "
         "`*-stray` directory (add `--allow-transitional` only if you mean to repair it). Each command's page "
         "lists the other cases."),
        ("kafkatool restore", "Dry run: 0 nothing to restore, 1 files would be put back. With `--execute`: 0 "
         "everything was put back and checked against `MANIFEST.json`. 2: a refusal (a file changed since the "
         "repair, a backup file that does not match its sha256, a live broker) or bad usage; nothing was written."),
        ("kafkatool dump", "0 every file was dumped, 1 a file could not be (the error names the file and byte "
         "position), 2 bad usage (a path that does not exist, nothing Kafka in it)."),
        ("every command", "130: interrupted (Ctrl-C). 3: a kafkatool bug, reported in one line; please report it "
         "with the command line."),
    ], literal_terms=True),
)

_RB_UNCLEAN = _runbook(
    _join(
        para(
            "The broker was killed, lost power or ran out of disk, so the log dir has no `.kafka_cleanshutdown` "
            "file, and on the next start the broker recovers the log. Its log shows, per damaged segment:"
        ),
        example("WARN Found invalid messages in log segment /var/lib/kafka/data/orders-3/00000000000000001000.log at byte offset 73421."),
        para(
            "followed by the deletion of the partition's later segments; or recovery takes very long; or the start "
            "fails with one of:"
        ),
        example(
            """
            Split operation is only permitted for segments with overflow, and the problem path is <path>
            Could not read file <file>
            Malformed line in checkpoint file [<path>]: <line>
            Failed to acquire lock on file .lock in /var/lib/kafka/data. A Kafka instance in another process or thread is using this directory.
            """
        ),
        para(
            "The last one is not damage: another broker process still holds the log dir. Find it (`ps`, "
            "`fuser -v /var/lib/kafka/data/.lock`) and stop it; do not touch the files while it runs."
        ),
    ),
    _steps(
        "Make sure the broker process has exited. `ls -a` the log dir: no `.kafka_cleanshutdown` means the "
        "broker will run recovery on the next start.",
        (
            "Find every damaged region of the log dir (several processes, it is read-only):",
            f"$ kafkatool verify --jobs 4 --format text {_LOG_DIR}",
            "Exit status 0: kafkatool finds nothing wrong in the files, and the start failure lies elsewhere "
            "(configuration, the controller quorum). 2: a mistyped path, or one with nothing Kafka in it. "
            "1: one line per finding, `<path>:<position>: <kind>: <message>`. The kinds that matter here: "
            "`unreadable` is the *Could not read file* failure (permissions, a disk error: see the kernel log); "
            "`invalid_file_name` and `not_a_partition_dir` are files and directories the broker refuses to load "
            "(a stray file, a backup or `lost+found` put into the log dir: move them out); "
            "`pending_journal`, `kafkatool_temp` and `kafkatool_staging` are what an interrupted kafkatool repair "
            "left (run it again); "
            "`partial_batch`, `trailing_bytes`, `invalid_size` and `crc_mismatch` are where recovery cuts; "
            "`offset_below_base` and `offset_overflow` in a segment that is recovered give the *Split operation* "
            "failure; `checkpoint_invalid` is the *Malformed line* failure; `snapshot_*` and `orphan_index` the "
            "broker handles itself. A message ending in `(<n> good batches follow)` means intact data after the "
            "bad region.",
        ),
        (
            "Run the repair as a dry run:",
            f"$ kafkatool truncate {_LOG_DIR}",
            "For each damaged partition it prints where the segment is `cut`, the byte ranges it would `remove`, "
            "the intact batches it would `discard`, the later segments it would `move` to the backup, and the new "
            "`log end`. That is what the broker's recovery would do, except that nothing is lost.",
        ),
        "Read the `discard` and `move` lines. A cut at the end of the last segment, with nothing discarded, is a "
        "torn write: go on. A cut in an old segment that discards many batches or moves later segments is a "
        "poisoned batch, not a torn tail: repair that partition as in *A POISONED BATCH* (with "
        "`--keep-valid-after`, or from a good replica) before the next step.",
        (
            "Apply it (the summary names the backup directory):",
            f"$ kafkatool truncate --execute {_LOG_DIR}",
        ),
        (
            "A `checkpoint_invalid` finding is not repaired by kafkatool. Copy the file aside, look at it, and fix "
            "the malformed line by hand (a version line, a count line, then one `<topic> <partition> <offset>` "
            "line per partition):",
            f"$ kafkatool dump {_LOG_DIR}/recovery-point-offset-checkpoint",
        ),
        (
            "Check again, then start the broker. It still runs recovery (the shutdown was unclean) but finds "
            "nothing left to cut.",
            f"$ kafkatool verify --jobs 4 {_LOG_DIR}",
        ),
    ),
    para(
        "After an unclean shutdown the broker recovers every segment from the one holding its recovery point "
        "onward, in order. For each it walks the batches and checks each one's size and CRC; at the first bad "
        "batch it logs *Found invalid messages ...* and truncates the segment there, discarding everything after "
        "it, valid batches included. If it truncated anything, it then deletes every later segment of the "
        "partition, even intact ones. An offset below the segment's base or more than 2^31-1 above it makes it "
        "try to split the segment, which fails unless the bad batch is the last one, and the log dir does not "
        "load.",
        "`kafkatool truncate` makes the same cut before the broker does, but shows it first, keeps every removed "
        "byte and moved file in the backup, and with `--keep-valid-after` can keep the intact batches. It checks "
        "every segment, not only those after the recovery point, so it also finds a bad batch the broker would "
        "not look at: that is why the plan must be read before `--execute`.",
    ),
)

_RB_TAIL = _runbook(
    _join(
        para("kafka-dump-log (or `kafkatool dump`, which prints the same) ends a segment with"),
        example("Found 4242 invalid bytes at the end of 00000000000000001000.log"),
        para(
            "and `kafkatool verify` reports `partial_batch` (the last batch runs past the end of the file: an "
            "interrupted write), `trailing_bytes` (at most 17 bytes that cannot hold a batch header), "
            "`trailing_zeros` (a zero-filled tail: preallocated or never written space) or `invalid_size` (a "
            "size field running past the end). It is usually the last segment, after a power loss or a full disk."
        ),
    ),
    _steps(
        (
            "See which it is (safe on the live broker):",
            f"$ kafkatool verify --max-rate 50M --format text {_PART}",
            "`trailing_zeros` holds no data. `partial_batch` and `trailing_bytes` are a torn write. `invalid_size` "
            "or `crc_mismatch` followed by `(<n> good batches follow)` is a damaged size field or batch with intact "
            "data behind it: kafka-dump-log's count of invalid bytes then covers those batches too. Treat that as "
            "*A POISONED BATCH*.",
        ),
        (
            "Look at the last batches before the tail:",
            f"$ kafkatool dump --deep-iteration {_SEG} | tail -n 20",
        ),
        "Stop the broker.",
        (
            "Dry run:",
            f"$ kafkatool truncate {_PART}",
            "Expect one `cut` line (the segment shrinks to its valid bytes), one `remove` line with the byte range "
            "of the tail and its reason, and no `discard` line. A `discard` line means intact batches would go: "
            "stop and read *A POISONED BATCH*.",
        ),
        (
            "Apply, then check: `kafkatool verify` exits 0 and `kafkatool dump` no longer prints *Found ... invalid "
            "bytes*.",
            f"$ kafkatool truncate --execute {_PART}",
            f"$ kafkatool verify {_PART}",
        ),
    ),
    para(
        "A torn tail was never a complete batch. The broker's recovery, when it runs over the segment (after an "
        "unclean shutdown, or when the segment's `.index` is missing), ends the walk at a partial batch or a tail "
        "of at most 17 bytes, stops at a size below 14 (which is what a zero-filled tail reads as) or a bad CRC, "
        "and truncates the file there. kafka-dump-log counts as invalid everything from the first entry its walk "
        "cannot read to the end of the file; a batch with a bad CRC still counts as valid bytes there. When "
        "recovery does not run (the shutdown was clean), the tail stays in the file. `kafkatool truncate` makes "
        "the cut recovery would make, and keeps the removed bytes.",
    ),
)

_RB_INDEX = _runbook(
    _join(
        para(
            "`kafka-dump-log --verify-index-only` prints `Mismatches in :<path>` followed by index entries that do "
            "not match the log, `--index-sanity-check` fails with a CorruptIndexException, fetches from an offset "
            "or time lookups (`offsetsForTimes`, `kafka-consumer-groups --reset-offsets --to-datetime`) start in "
            "the wrong place, or `kafkatool verify` reports `index_*` or `timeindex_*` findings. The broker itself "
            "does not sanity-check indexes at start (it has not since 2.3), so it starts and serves with them."
        ),
    ),
    _steps(
        (
            "Find the bad index files (safe on the live broker):",
            f"$ kafkatool verify --max-rate 50M --format text {_PART}",
            "`preallocated_index_tail` and `timeindex_record_offset` are information, not damage: the first is "
            "normal for the active segment of a live broker and after an unclean shutdown, the second is what "
            "brokers up to 3.7 wrote. `index_missing` is information too: the broker rebuilds that segment on "
            "start. A `.log` finding (`crc_mismatch`, `partial_batch`, ...) in the same segment comes first: repair "
            "it with `kafkatool truncate`, which rebuilds the cut segment's indexes as well.",
        ),
        (
            "Compare with Kafka's own check of one index, if you like:",
            f"$ kafkatool dump --verify-index-only --files {_PART}/00000000000000001000.index",
        ),
        "Stop the broker.",
        (
            "Dry run, with the topic's `index.interval.bytes`:",
            f"$ kafkatool reindex --index-interval-bytes 4096 {_PART}",
            "One block per segment: `rewrite` or `create` for an index file that is missing or wrong (corrupt, "
            "inconsistent with the log, not covering it), `keep` for one that passes verify's index checks even if a "
            "rebuild would space its entries differently (a live broker indexes per append, recovery per batch; "
            "`--all` rewrites those too), `leave` for a `.txnindex` whose producer state is unknown. A `bad tail` "
            "line, or a segment refused because its rebuild would cover less of the log than its index, means the "
            "`.log` is damaged: run `kafkatool truncate` first.",
        ),
        (
            "Apply and check:",
            f"$ kafkatool reindex --execute --index-interval-bytes 4096 {_PART}",
            f"$ kafkatool verify {_PART}",
        ),
    ),
    _join(
        para(
            "*Delete the .index and let the broker rebuild, or run reindex?* A segment whose `.index` "
            "is missing is recovered on the next start whether or not the shutdown was clean: the broker rebuilds "
            "its `.index`, `.timeindex` and `.txnindex`, and also truncates the segment at its first bad batch, "
            "silently and without a backup. Deleting only a `.timeindex` does not trigger that: the broker creates "
            "an empty one and keeps it empty. So delete the `.index` when `kafkatool verify` shows the `.log` clean, "
            "reindex says it cannot rebuild the `.txnindex` (`leave`), or you cannot run kafkatool on the host; the "
            "broker's start then takes longer for each such segment.",
            "Use `kafkatool reindex` to see the change before making it, to keep the originals, to rebuild a "
            "`.timeindex`, and to be sure the `.log` is not touched: it builds the same files the broker's recovery "
            "would (an entry each time more than `--index-interval-bytes` have passed, the final time-index entry, "
            "files trimmed to their length) and never changes the `.log`.",
        ),
    ),
)

_RB_POISON = _runbook(
    _join(
        para("A consumer stops at the same offset of one partition, again after every restart, with"),
        example(
            """
            org.apache.kafka.common.KafkaException: Received exception when fetching the next record from orders-3. If needed, please seek past the record to continue consumption.
            Caused by: org.apache.kafka.common.errors.CorruptRecordException: ... Record is corrupt (stored crc = 3075664632, computed crc = 444186917)
            """
        ),
        para(
            "Its lag grows on that partition only. The broker runs normally: it does not check CRCs when it serves "
            "a fetch, the consumer does (`check.crcs`, on by default). kafka-dump-log shows `isvalid: false` for "
            "the batch, and `kafkatool verify` a `crc_mismatch` (or a `--deep` finding such as `invalid_record`) "
            "with good batches after it."
        ),
    ),
    _steps(
        (
            "Find the batch, on the live broker, read-only:",
            f"""$ kafkatool verify --max-rate 50M --format jsonl {_PART} | jq -c 'select(.type == "finding") | {{file, position, kind, offset, batchesAfter}}'""",
            "`offset.first` and `offset.last` are the offsets the consumer cannot pass; `batchesAfter` counts the "
            "intact batches behind it in that segment. Add `--deep` to decode every record as well.",
        ),
        (
            "Look at it and its neighbours:",
            f"$ kafkatool dump --deep-iteration --start-offset 1500 --end-offset 1510 {_SEG}",
        ),
        "Run the same `kafkatool verify` on the other replicas' brokers. If an in-sync replica holds the batch "
        "intact, the best repair copies nothing by hand: stop this broker (leadership moves to that replica), "
        "cut this replica with the default `kafkatool truncate --execute` (below), and start it: as a follower it "
        "fetches everything after the cut back from the leader.",
        (
            "To unblock the consumers without touching the files, move their group past the batch, to "
            "`offset.last + 1`, with its consumers stopped:",
            "$ kafka-consumer-groups.sh --bootstrap-server localhost:9092 --group orders-app --topic orders:3 --reset-offsets --to-offset 1511 --execute",
            "The records of that batch are lost to that group, and the batch stays for every other reader.",
        ),
        (
            "To remove only the bad batch, stop the broker and compare the two dry runs:",
            f"$ kafkatool truncate {_PART}",
            f"$ kafkatool truncate --keep-valid-after {_PART}",
            "The default plan `discard`s every intact batch after the bad one and `move`s every later segment "
            "to the backup, as the broker's recovery would. The `--keep-valid-after` plan `remove`s only the bad "
            "byte range, keeps the later batches at their own offsets and the later segments in place, and reports "
            "the offsets that disappear as a `gap`.",
        ),
        (
            "Apply the one you chose and check:",
            f"$ kafkatool truncate --keep-valid-after --execute {_PART}",
            f"$ kafkatool verify {_PART}",
            "Start the broker. A consumer fetching an offset inside the gap gets the next batch, as it does on a "
            "compacted topic.",
        ),
    ),
    para(
        "The broker checks CRCs only when it recovers a segment, and it recovers only segments at or after its "
        "recovery point after an unclean shutdown, or a segment whose `.index` is missing. A bad batch in an older "
        "segment is therefore served as it is, for ever. When recovery does reach it (an unclean shutdown soon "
        "after the damage, or someone deleting that segment's `.index`), it truncates the segment at that batch, "
        "dropping every intact batch after it, and after an unclean shutdown deletes every later segment of the "
        "partition as well: one bad batch can cost everything written after it. `--keep-valid-after` removes only "
        "the bad bytes. No broker does this, so on a replicated partition the replicas then differ at those "
        "offsets: prefer a good replica when there is one.",
    ),
)

_RB_BACKUP_CONTENTS = _join(
    para(
        "Each `--execute` run that changed something printed its backup directory in its summary "
        f"(`kafkatool-backup-<log dir name>-<UTC time>` beside the log dir, e.g. `{_BACKUP}`, unless "
        "`--backup-dir` was given). It holds:"
    ),
    tagged([
        ("<partition dir>/<file name>", "the original of every file replaced (`.index`, `.timeindex`, "
         "`.txnindex`, `leader-epoch-checkpoint`) and, for `truncate`, every file moved out of the partition "
         "(later segments with their indexes, producer snapshots above the new log end)."),
        ("<partition dir>/<segment>.log.<start>-<end>.bytes", "`truncate` only: each byte range removed from "
         "a `.log`, named by its original position."),
        ("MANIFEST.json", "one entry per run that used the directory: every removed range (file, start, end, "
         "sha256) and every file (its path relative to the log dir, the size, sha256, owner and mode of the "
         "original and of what replaced it, or that it was created)."),
        ("SHA256SUMS", "the sha256 of every original, for `sha256sum -c` run in the log dir."),
        ("RESTORE.txt", "a shell script that puts everything back without kafkatool (`sh -e RESTORE.txt`)."),
    ]),
    para(
        "Several runs may share one backup directory (`--backup-dir`): each adds its entries, and a restore "
        "undoes them newest first. The directory is created mode 0700 and the files keep the owner and mode "
        "of the originals."
    ),
)

_RB_RESTORE = _runbook(
    _join(
        para(
            "A repair removed data that turns out to be needed, the broker behaves worse after it, or you want the "
            "original files back to try another repair (for instance the default `truncate` after "
            "`--keep-valid-after`)."
        ),
    ),
    _steps(
        "Stop the broker.",
        (
            "Find the backups, newest last. Restore the newest first: a `reindex` run after a `truncate` is undone "
            "before that `truncate`.",
            "$ ls -d /var/lib/kafka/kafkatool-backup-*",
        ),
        (
            "Dry run: it checks every file against `MANIFEST.json` and prints what it would put back.",
            f"$ kafkatool restore {_BACKUP}",
            "For `truncate`, every removed byte range goes back into its `.log` at its original position and every "
            "moved file back into the partition directory; for both commands the replaced files are put back and the "
            "files the repair created removed, with the original owner and mode. Exit status 2 and a line per problem "
            "means it refuses: a file is neither the original nor what the repair left (a broker wrote to it since), "
            "or a backup file does not match its sha256. Nothing is written then. If the log dir moved (another "
            "mount point), add `--log-dir NEW`.",
        ),
        (
            "Apply it. Running it twice is harmless.",
            f"$ kafkatool restore --execute {_BACKUP}",
            "Every restored file is hashed again afterwards and compared with the original's sha256.",
        ),
        (
            "Without kafkatool (another host, or kafkatool gone), the backup restores itself: read the script, run "
            "it with `sh -e` (it checks each file's sha256 before and after; the splicing of byte ranges needs "
            "`python3` on the `PATH`), then check the originals:",
            f"$ less {_BACKUP}/RESTORE.txt",
            f"$ sh -e {_BACKUP}/RESTORE.txt",
            f"$ cd {_LOG_DIR} && sha256sum -c {_BACKUP}/SHA256SUMS",
        ),
        (
            "Check: the findings from before the repair are back (compare with the saved `verify-before.jsonl`).",
            f"$ kafkatool verify --format jsonl {_LOG_DIR} > /root/verify-restored.jsonl",
        ),
        "Start the broker. Keep the backup directory until the data has been checked, then remove it yourself; "
        "never move it into the log dir.",
    ),
    para(
        "Nothing `reindex` or `truncate` removes is deleted: removed byte ranges, replaced files and moved segments "
        "are written and fsynced into the backup before the log dir changes, with `MANIFEST.json`, `SHA256SUMS` and "
        "`RESTORE.txt`. The broker's own recovery keeps nothing; that is the reason to repair with kafkatool before "
        "the broker starts.",
    ),
    when="When",
    extra=("What the backup holds", _RB_BACKUP_CONTENTS),
)


def render_runbooks_page() -> str:
    """``kafkatool-runbooks(7)``: hand-written procedures (no Click introspection beyond the page names)."""
    return _join(
        _th(RUNBOOKS, "7", "hand-written text"),
        _section("NAME", f"{_esc_raw(RUNBOOKS)} \\- step-by-step procedures for damaged Kafka log dirs"),
        _section("DESCRIPTION", _RB_DESCRIPTION),
        _section("BEFORE YOU START", _RB_BEFORE),
        _section("BROKER WON'T START AFTER AN UNCLEAN SHUTDOWN", _RB_UNCLEAN),
        _section("FOUND INVALID BYTES: A PARTIAL TAIL", _RB_TAIL),
        _section("A CORRUPT INDEX", _RB_INDEX),
        _section("A POISONED BATCH", _RB_POISON),
        _section("RESTORING FROM THE BACKUP", _RB_RESTORE),
        _section("EXIT STATUS", _RB_EXIT),
        _section("SEE ALSO", _see_also([PROG, *(page_name(p) for p, _c, _x in _walk(_root(), _context(_root(), PROG))), "jq(1)", "sha256sum(1)"])),
    ) + "\n"


#: Hand-written pages outside section 1, by file name: written, checked and listed in kafkatool(1)'s
#: SEE ALSO along with the command pages.
EXTRA_PAGES: dict[str, Callable[[], str]] = {
    f"{RUNBOOKS}.7": render_runbooks_page,
}


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
