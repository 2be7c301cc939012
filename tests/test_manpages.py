"""The man pages in man/ are generated from the Click definitions and the prose files
kafkatool/cli/manpages/*.rst (kafkatool.cli.manpage, kafkatool.cli.manprose), and written as roff
by docutils' manpage writer (the release series the test extra pins: its roff is what these
tests read, e.g. ``.SH TITLE``, ``.TP``/``.B`` terms, fonts ended by ``\fP``).

These tests fail when a page is stale, missing or obsolete, when a command has no prose file,
when an option or argument is missing from its page, when roff reports a warning, and when the
JSON Lines schema section leaves out a type or field that kafkatool/render/jsonl.py emits.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import click
import pytest

from kafkatool.cli import manpage, manprose
from kafkatool.cli.main import ExitCode, cli

ROOT = Path(__file__).resolve().parent.parent
MAN_DIR = ROOT / "man"
FIX = f"run `{manpage.REGENERATE}` and commit the result"


def _commands(group: click.Group, path: tuple[str, ...] = ()):
    for name, command in sorted(group.commands.items()):
        if command.hidden:
            continue
        yield (*path, name), command
        if isinstance(command, click.Group):
            yield from _commands(command, (*path, name))


COMMANDS = list(_commands(cli))
PAGES = [("kafkatool.1", (), cli)] + [(f"{manpage.page_name(p)}.1", p, c) for p, c in COMMANDS]
PAGE_IDS = [name for name, _p, _c in PAGES]
HAND_WRITTEN = sorted(manpage.EXTRA_PAGES)  # kafkatool-runbooks.7


def _read(filename: str) -> str:
    path = MAN_DIR / filename
    if not path.is_file():
        pytest.fail(f"{path} is missing; {FIX}")
    return path.read_text(encoding="utf-8")


def _roff(text: str) -> str:
    return text.replace("-", "\\-")


def _section(page: str, title: str) -> str:
    """The roff of section ``title`` of ``page`` (the manpage writer writes ``.SH TITLE``)."""
    return page.split(f"\n.SH {title}\n", 1)[1].split("\n.SH ", 1)[0]


# --------------------------------------------------------------------------- the pages in man/


def test_pages_are_up_to_date() -> None:
    stale = manpage.check(MAN_DIR)
    assert not stale, f"man pages out of date: {', '.join(stale)}; {FIX}"


def test_another_docutils_series_is_named_not_diffed(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Under a docutils whose manpage writer is not the one that wrote man/, the drift check says
    so (and how to install the pinned series) instead of calling every page out of date."""
    assert manprose.docutils_series() == manprose.DOCUTILS_SERIES, (
        f"docutils {manprose.docutils_series()} is installed; man/ is docutils {manprose.DOCUTILS_SERIES}'s: "
        "pip install -e '.[test]'"
    )
    monkeypatch.setattr(manprose, "DOCUTILS_SERIES", "0.99")
    with pytest.raises(manpage.WrongDocutils, match=r"docutils 0\.99's manpage writer.*docutils 0\.19 is installed.*pip install 'docutils>=0\.99,<0\.100'"):
        manpage.check(MAN_DIR)
    with pytest.raises(manpage.WrongDocutils):
        manpage.write_all(MAN_DIR)  # never rewrites man/ with another series' roff
    assert manpage.main(["--check", str(MAN_DIR)]) == 1
    assert "docutils 0.19 is installed" in capsys.readouterr().err


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=["-".join(p) for p, _c in COMMANDS])
def test_every_command_has_a_page(path: tuple[str, ...], command: click.Command) -> None:
    page = _read(f"{manpage.page_name(path)}.1")
    assert f".SH NAME\n{manpage.page_name(path)} \\- " in page  # its NAME line (the writer leaves the name as is, for whatis)
    group_page = _read("kafkatool.1")
    assert f"\\fB{_roff(manpage.page_name(path))}\\fP(1)" in group_page, "not listed in kafkatool(1)"


@pytest.mark.parametrize(("filename", "path", "command"), PAGES, ids=PAGE_IDS)
def test_every_option_and_argument_is_in_its_page(filename: str, path: tuple[str, ...], command: click.Command) -> None:
    page = _read(filename)
    options_section = _section(page, "OPTIONS")
    ctx = click.Context(cli, info_name="kafkatool", **cli.context_settings)
    for part in path:  # nested contexts, so inherited settings such as -h apply
        ctx = click.Context(ctx.command.commands[part], info_name=part, parent=ctx, **(ctx.command.commands[part].context_settings or {}))
    for param in command.get_params(ctx):
        if isinstance(param, click.Option) and not param.hidden:
            for opt in [*param.opts, *param.secondary_opts]:
                assert f"\\fB{_roff(opt)}\\fP" in options_section, f"{opt} missing from OPTIONS of {filename}; {FIX}"
        elif isinstance(param, click.Argument):
            label = (param.metavar or (param.name or "").upper()).strip("[]").rstrip(".")
            assert f"\\fI{_roff(label)}\\fP" in page, f"argument {label} missing from {filename}; {FIX}"


def test_no_obsolete_pages() -> None:
    expected = {name for name, _p, _c in PAGES} | set(HAND_WRITTEN)
    present = {p.name for p in MAN_DIR.glob("kafkatool*.*") if re.fullmatch(r"\.\d", p.suffix)}
    assert present <= expected, f"pages of no command: {sorted(present - expected)}; {FIX}"


def test_group_page_lists_every_exit_code() -> None:
    page = _read("kafkatool.1")
    status = _section(page, "EXIT STATUS")
    for code in ExitCode:
        assert f".TP\n.B \\fB{int(code)}\\fP\n" in status, f"exit code {int(code)} ({code.name}) missing"


# --------------------------------------------------------------------------- roff validity


def _roff_checker() -> list[str] | None:
    if shutil.which("groff"):
        return ["groff", "-man", "-Tutf8", "-ww", "-z"]
    if shutil.which("man"):
        return ["man", "--warnings=w", "-l"]
    return None


@pytest.mark.parametrize("filename", PAGE_IDS + HAND_WRITTEN)
def test_page_renders_without_roff_warnings(filename: str) -> None:
    command = _roff_checker()
    if command is None:
        pytest.skip("neither groff nor man is installed")
    path = MAN_DIR / filename
    if not path.is_file():
        pytest.fail(f"{path} is missing; {FIX}")
    env = {**os.environ, "MANPAGER": "cat", "PAGER": "cat", "MANWIDTH": "80", "LC_ALL": "C.UTF-8"}
    result = subprocess.run(
        [*command, str(path)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, timeout=60
    )
    if command[0] == "man" and re.search(r"unrecognized|illegal|invalid option", result.stderr):
        pytest.skip("this man does not take --warnings")
    assert result.returncode == 0 and not result.stderr.strip(), f"{filename}:\n{result.stderr}"


# --------------------------------------------------------------------------- the dump page's schema


def _jsonl_names() -> tuple[set[str], set[str]]:
    """``("type" values, field names)`` that kafkatool/render/jsonl.py writes, read from its source:
    string keys of dict literals, ``obj["name"] = ...`` assignments, and the names in tables of
    tuples (``_TS_PAIR_NAMES``), whose keys complete an f-string type such as ``f"timeindex_{kind}"``."""
    tree = ast.parse((ROOT / "kafkatool" / "render" / "jsonl.py").read_text(encoding="utf-8"))
    types: set[str] = set()
    prefixes: set[str] = set()
    kinds: set[str] = set()
    fields: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant):
                    if isinstance(target.slice.value, str):
                        fields.add(target.slice.value)
        if not isinstance(node, ast.Dict):
            continue
        for key, value in zip(node.keys, node.values):
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                continue
            if key.value == "type":
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    types.add(value.value)
                elif isinstance(value, ast.JoinedStr):
                    prefixes.update(v.value for v in value.values[:1] if isinstance(v, ast.Constant))
            elif isinstance(value, ast.Tuple):
                kinds.add(key.value)
                fields.update(e.value for e in value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str))
            elif re.fullmatch(r"[a-z][A-Za-z]*", key.value):
                fields.add(key.value)
    types.update(p + k for p in prefixes for k in kinds)
    types.update(_dump_kinds())
    return types, fields


def _dump_kinds() -> set[str]:
    """The ``"type"`` values taken from kafkatool/dump.py items: ``Note(..., kind="x")`` (default
    ``note``) and ``CheckpointItem(path, "x", ...)``."""
    tree = ast.parse((ROOT / "kafkatool" / "dump.py").read_text(encoding="utf-8"))
    kinds: set[str] = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            continue
        if node.func.id == "Note":
            kind = next((k.value for k in node.keywords if k.arg == "kind"), ast.Constant("note"))
            if isinstance(kind, ast.Constant) and isinstance(kind.value, str):
                kinds.add(kind.value)
        elif node.func.id == "CheckpointItem" and len(node.args) >= 2:
            if isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
                kinds.add(node.args[1].value)
    return kinds


def test_json_lines_schema_names_every_type_and_field() -> None:
    page = _read("kafkatool-dump.1")
    schema = _section(page, "JSON LINES SCHEMA")
    plain = _unroff(schema)
    words = set(re.findall(r"[A-Za-z_]+", plain))
    types, fields = _jsonl_names()
    assert types and fields
    missing_types = sorted(t for t in types if t not in words)
    missing_fields = sorted(f for f in fields if f not in words)
    assert not missing_types and not missing_fields, (
        f"JSON LINES SCHEMA lacks types {missing_types} and fields {missing_fields}: "
        f"describe them in {manpage.prose_file('kafkatool-dump.1')}, then {FIX}"
    )


def test_dump_page_documents_what_the_brief_requires() -> None:
    page = _read("kafkatool-dump.1")
    for title in ("OUTPUT", "JSON LINES SCHEMA", "DECODERS", "SEEKING", "EXIT STATUS", "COMPATIBILITY", "EXAMPLES"):
        assert f"\n.SH {title}\n" in page
    assert "kafkatool dump \\-\\-files 00000000000000000000.log \\-\\-print\\-data\\-log" in page
    assert "kafka\\-dump\\-log.sh \\-\\-files 00000000000000000000.log \\-\\-print\\-data\\-log" in page


# --------------------------------------------------------------------------- the generator


def test_output_is_deterministic_and_dateless() -> None:
    first = manpage.render_pages()
    assert first == manpage.render_pages()
    for name, text in first.items():
        th = next(line for line in text.splitlines() if line.startswith(".TH "))
        assert not re.search(r"\d{4}-\d{2}-\d{2}", th), f"{name}: a date in {th!r}"


@pytest.mark.parametrize("filename", PAGE_IDS + HAND_WRITTEN)
def test_pages_never_hyphenate(filename: str) -> None:
    """An option or field name (``--max-decompressed-bytes``, ``batchesDiscarded``) is never split
    across lines: no hyphenation and a ragged margin from the ``.TH`` on, the NAME line included."""
    page = _read(filename)
    th = next(line for line in page.splitlines() if line.startswith(".TH "))
    assert f"{th}\n.nh\n.ad l\n.SH NAME\n" in page


@pytest.mark.parametrize(
    ("text", "roff"),
    [
        ("--max-bytes", "\\-\\-max\\-bytes"),
        ("a\\b", "a\\eb"),
        (".log files", "\\&.log files"),
        ("'quoted", "\\(aqquoted"),
        ("one\n.two\n'three", "one\n\\&.two\n\\(aqthree"),
        ("mid.dle it's", "mid.dle it\\(aqs"),
        ("U+FFFD \ufffd", "U+FFFD \\[uFFFD]"),
    ],
)
def test_escape(text: str, roff: str) -> None:
    """Text reaches roff escaped: hyphens and backslashes, a request character at a line start."""
    rst = manprose.rst_text(text) if "\n" not in text else "\n".join(map(manprose.rst_inline, text.split("\n")))
    assert _render("X\n=\n\n" + rst + "\n")["X"] == ".sp\n" + roff


#: The requests and macros docutils' manpage writer (and its own macro definitions) write.
_WRITER_REQUESTS = {"", ".", "RS", "RE", "nr", "de", "de1", "in", "TH", "nh", "ad", "SH", "SS", "sp", "TP", "B", "BI", "IP", "INDENT", "UNINDENT", "nf", "fi", "ft"}


def test_prose_never_starts_a_line_with_a_request() -> None:
    prose = _render("X\n=\n\nFiles. .index files are read.\n'x' too.\n\n``.log`` first\n")["X"]
    for name, text in {**manpage.render_pages(), "prose": prose}.items():
        for line in text.splitlines():
            assert not line.startswith("'"), f"{name}: {line}"
            if line.startswith(".") and not line.startswith('.\\"'):
                request = re.match(r"\.\s*([^\s\\]*)", line).group(1)
                assert request in _WRITER_REQUESTS, f"{name}: {line}"


def test_write_all_then_check_in_a_fresh_directory(tmp_path: Path) -> None:
    written = manpage.write_all(tmp_path)
    assert sorted(p.name for p in written) == sorted(PAGE_IDS + HAND_WRITTEN)
    assert manpage.check(tmp_path) == []
    (tmp_path / "kafkatool-dump.1").write_text("stale\n", encoding="utf-8")
    (tmp_path / "kafkatool-gone.1").write_text("obsolete\n", encoding="utf-8")
    (tmp_path / "kafkatool-runbooks.7").write_text("stale\n", encoding="utf-8")
    assert sorted(manpage.check(tmp_path)) == ["kafkatool-dump.1", "kafkatool-gone.1", "kafkatool-runbooks.7"]
    assert manpage.main(["--check", str(tmp_path)]) == 1
    assert manpage.main([str(tmp_path)]) == 0
    assert manpage.check(tmp_path) == []
    assert not (tmp_path / "kafkatool-gone.1").exists()


def _toy_cli() -> click.Group:
    """A CLI with the parameter kinds kafkatool's commands may grow."""

    @click.group(context_settings={"help_option_names": ["-h", "--help"]})
    def toy() -> None:
        """Toy tool.

        \b
        .dot at a line start
        'quote at a line start
        """

    @toy.command()
    @click.argument("src", nargs=2, type=click.Path())
    @click.option("--apply/--dry-run", default=False, help="Write the repair (a backup is kept).")
    @click.option("-v", "--verbose", count=True, help="More output.")
    @click.option("--skip", multiple=True, help="Skip *.swap files.")
    @click.option("--mode", type=click.Choice(["fast", "safe"]), default="safe", help="How.")
    @click.option("--to", required=True, envvar="TOY_TO", metavar="DIR", help="Target\\dir.")
    @click.option("--secret", hidden=True)
    def repair(src, apply, verbose, skip, mode, to, secret) -> None:
        """Repair a segment \u2014 safely.\f

        Not shown."""

    @toy.group()
    def index() -> None:
        """Index commands."""

    @index.command("rebuild")
    def rebuild() -> None:
        """Rebuild."""

    @toy.command(hidden=True)
    def internal() -> None:
        """Hidden."""

    return toy


def test_generator_handles_every_parameter_kind(tmp_path: Path) -> None:
    pages = manpage.render_pages(_toy_cli())
    assert sorted(pages) == ["kafkatool-index-rebuild.1", "kafkatool-index.1", "kafkatool-repair.1", "kafkatool.1"]
    repair = pages["kafkatool-repair.1"]
    assert "\\fB\\-\\-apply\\fP, \\fB\\-\\-dry\\-run\\fP" in repair
    assert "Default: \\fB\\-\\-dry\\-run\\fP\\&." in repair
    assert "\\fB\\-v\\fP, \\fB\\-\\-verbose\\fP\n" in repair
    assert "\\fB\\-\\-mode\\fP \\fBfast\\fP|\\fBsafe\\fP" in repair
    assert "\\fB\\-\\-to\\fP \\fIDIR\\fP" in repair and "Target\\edir." in repair and "\\fBTOY_TO\\fP" in repair
    assert "Skip *.swap files." in repair and "May be given more than once." in repair
    assert "secret" not in repair and "Not shown" not in repair
    assert "\\fISRC\\fP\\&..." in repair and "\\[u2014]" in repair
    assert "\n.SH EXIT STATUS\n" in repair  # the generic one
    group = pages["kafkatool.1"]
    assert "\\&.dot at a line start\n\\(aqquote at a line start" in group
    assert "internal" not in group
    assert "\\fBkafkatool\\-index\\-rebuild\\fP(1)" in group
    checker = _roff_checker()
    if checker is not None and checker[0] == "groff":
        for name, text in pages.items():
            (tmp_path / name).write_text(text, encoding="utf-8")
            result = subprocess.run([*checker, str(tmp_path / name)], capture_output=True, text=True, timeout=60)
            assert not result.stderr.strip(), f"{name}:\n{result.stderr}"


# --------------------------------------------------------------------------- the runbooks page

RUNBOOKS = "kafkatool-runbooks.7"
_SHELL_OPERATORS = {"|", "||", "&&", ";", ">", ">>", "<", "2>", "&"}


def _unroff(line: str) -> str:
    """A line of an ``.nf`` block as the reader sees it."""
    line = re.sub(r"\\f[BIRP]", "", line).replace("\\&", "")
    for roff, char in (("\\(aq", "'"), ("\\(dq", '"'), ("\\(ga", "`"), ("\\-", "-"), ("\\e", "\\")):
        line = line.replace(roff, char)
    return line


def _runbook_command_lines() -> list[str]:
    """Every line of a verbatim block of the runbooks page that starts with ``kafkatool ``."""
    lines, verbatim = [], False
    for line in _read(RUNBOOKS).splitlines():
        if line == ".nf":
            verbatim = True
        elif line == ".fi":
            verbatim = False
        elif verbatim:
            text = _unroff(line)
            if text.startswith("kafkatool "):
                lines.append(text)
    return lines


def _parse_command_line(line: str, placeholder: Path) -> click.Context:
    """Parse one shown command line with the current CLI (no resilient parsing, so an unknown
    option, a bad value or a missing argument raises). Shell pipes and redirections end the
    kafkatool part; every path (a word with a ``/`` or a segment file name) becomes ``placeholder``."""
    import shlex

    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    words = []
    for word in lexer:
        if word in _SHELL_OPERATORS or set(word) <= set("|&;<>"):
            break
        words.append(word)
    assert words[0] == "kafkatool" and len(words) >= 2, line
    args = [str(placeholder) if "/" in w or re.fullmatch(r"\d{20}\.\w+", w) else w for w in words[2:]]
    parent = cli.make_context("kafkatool", [words[1]], resilient_parsing=False)
    command = cli.get_command(parent, words[1])
    assert command is not None, f"no command {words[1]!r}: {line}"
    return command.make_context(words[1], args, parent=parent, resilient_parsing=False)


def test_runbooks_page_is_written_and_listed() -> None:
    page = _read(RUNBOOKS)
    assert page.startswith(".\\\" Generated by kafkatool.cli.manpage")
    th = next(line for line in page.splitlines() if line.startswith(".TH "))
    assert th.startswith('.TH "KAFKATOOL-RUNBOOKS" 7 "" '), th
    assert RUNBOOKS in manpage.render_pages()
    assert "\\fBkafkatool\\-runbooks\\fP(7)" in _section(_read("kafkatool.1"), "SEE ALSO")
    for title in (
        "BEFORE YOU START",
        "BROKER WON'T START AFTER AN UNCLEAN SHUTDOWN",
        "FOUND INVALID BYTES: A PARTIAL TAIL",
        "A CORRUPT INDEX",
        "A POISONED BATCH",
        "RESTORING FROM THE BACKUP",
    ):
        assert f"\n.SH {title}\n" in page, title
    for text in ("Found invalid messages in log segment", "invalid bytes at the end of", "Record is corrupt (stored crc = ", "RESTORE.txt", ".lock"):
        assert _roff(text) in page, text


def test_runbooks_page_is_only_added_for_kafkatool() -> None:
    assert RUNBOOKS not in manpage.render_pages(_toy_cli())
    assert "runbooks" not in manpage.render_group_page(_toy_cli())


def test_runbook_commands_parse_with_the_current_cli(tmp_path: Path) -> None:
    lines = _runbook_command_lines()
    assert len(lines) >= 15, lines
    shown = {line.split()[1] for line in lines}
    assert shown >= {"verify", "truncate", "reindex", "dump"}, shown
    for line in lines:
        try:
            _parse_command_line(line, tmp_path)
        except click.exceptions.ClickException as exc:  # UsageError, BadParameter, NoSuchOption
            pytest.fail(f"{RUNBOOKS} shows a command the CLI rejects: {line}\n  {exc.format_message()}")
    # every repair is shown as a dry run before its --execute
    for command in ("truncate", "reindex"):
        runs = [line for line in lines if line.split()[1] == command]
        first_execute = next(i for i, line in enumerate(runs) if "--execute" in line.split())
        assert any("--execute" not in line.split() for line in runs[:first_execute]), command


def test_runbook_inline_commands_use_existing_options() -> None:
    """``kafkatool <command> --option`` written in prose names options that exist."""
    plain = _unroff(_read(RUNBOOKS))
    for name, options in re.findall(rf"kafkatool ({'|'.join(cli.commands)})((?: --?[a-z][a-z-]*)+)", plain):
        command = cli.commands[name]
        known = {o for p in command.params for o in [*p.opts, *p.secondary_opts]}
        for option in options.split():
            assert option in known, f"kafkatool {name} has no {option} (shown in {RUNBOOKS})"


def test_runbooks_show_every_command() -> None:
    shown = {line.split()[1] for line in _runbook_command_lines()}
    assert shown >= set(cli.commands), f"kafkatool-runbooks(7) never shows {sorted(set(cli.commands) - shown)}"


def _readme_command_lines() -> list[str]:
    """Every line of a ```sh block of README.md that starts with ``kafkatool ``."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```sh\n(.*?)```", readme, re.S)
    return [line.strip() for block in blocks for line in block.splitlines() if line.startswith("kafkatool ")]


def test_readme_commands_parse_with_the_current_cli(tmp_path: Path) -> None:
    lines = _readme_command_lines()
    assert {line.split()[1] for line in lines} >= set(cli.commands), lines
    for line in lines:
        try:
            _parse_command_line(line, tmp_path)
        except click.exceptions.ClickException as exc:
            pytest.fail(f"README.md shows a command the CLI rejects: {line}\n  {exc.format_message()}")


@pytest.mark.parametrize("filename", PAGE_IDS + HAND_WRITTEN)
def test_see_also_names_each_page_once(filename: str) -> None:
    see_also = _section(_read(filename), "SEE ALSO")
    refs = re.findall(r"\\fB(.+?)\\fP\((\w+)\)", see_also)
    assert refs and len(refs) == len(set(refs)), f"{filename}: SEE ALSO repeats {[r for r in refs if refs.count(r) > 1]}"
    assert (_roff(filename.rsplit(".", 1)[0]), filename.rsplit(".", 1)[1]) not in refs, f"{filename} lists itself"


def test_runbook_parser_rejects_a_drifted_command(tmp_path: Path) -> None:
    with pytest.raises(click.exceptions.NoSuchOption):
        _parse_command_line("kafkatool truncate --keep-valid-before /var/lib/kafka/data", tmp_path)
    with pytest.raises(click.exceptions.BadParameter):
        _parse_command_line("kafkatool verify --ignore no_such_kind /var/lib/kafka/data | jq .", tmp_path)
    ctx = _parse_command_line("kafkatool verify --max-rate 50M /var/lib/kafka/data > /tmp/out.jsonl", tmp_path)
    assert ctx.params["paths"] == (str(tmp_path),)


# --------------------------------------------------------------------------- the prose files (reStructuredText)

PROSE_DIR = ROOT / manpage.PROSE_DIR


def test_every_page_has_its_prose_file() -> None:
    for filename in PAGE_IDS + HAND_WRITTEN:
        path = ROOT / manpage.prose_file(filename)
        assert path.is_file(), f"{filename} has no prose file: write {manpage.prose_file(filename)}, then {FIX}"


@pytest.fixture()
def prose_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the prose files that the generator reads instead of the real ones."""
    copy = tmp_path / "manpages"
    shutil.copytree(PROSE_DIR, copy)
    monkeypatch.setattr(manpage, "_prose_dir", lambda: copy)
    return copy


def test_a_command_without_prose_fails_naming_the_file(prose_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (prose_copy / "kafkatool-restore.1.rst").unlink()
    with pytest.raises(manpage.ProseMissing, match=r"write kafkatool/cli/manpages/kafkatool-restore\.1\.rst"):
        manpage.render_pages()
    with pytest.raises(manpage.ProseMissing):
        manpage.check(MAN_DIR)  # the drift test's own call
    assert manpage.main(["--check", str(MAN_DIR)]) == 1
    assert "kafkatool/cli/manpages/kafkatool-restore.1.rst" in capsys.readouterr().err
    assert manpage.render_pages(_toy_cli())  # a CLI other than kafkatool's needs no prose


def test_a_prose_file_of_no_command_is_an_error(prose_copy: Path) -> None:
    (prose_copy / "kafkatool-gone.1.rst").write_text("EXAMPLES\n========\n\nNone.\n", encoding="utf-8")
    with pytest.raises(manprose.ProseError, match=r"kafkatool-gone\.1\.rst: no command has the page kafkatool-gone\.1"):
        manpage.render_pages()


def test_prose_cannot_replace_what_click_generates(prose_copy: Path) -> None:
    with (prose_copy / "kafkatool-verify.1.rst").open("a", encoding="utf-8") as f:
        f.write("\nDESCRIPTION\n===========\n\nSomething else.\n")
    with pytest.raises(manprose.ProseError, match=r"kafkatool-verify\.1\.rst: DESCRIPTION comes from the Click definition"):
        manpage.render_pages()


def test_arguments_must_be_the_commands_own(prose_copy: Path) -> None:
    page = prose_copy / "kafkatool-verify.1.rst"
    page.write_text(page.read_text(encoding="utf-8").replace("\nPATHS\n", "\nFILES\n", 1), encoding="utf-8")
    with pytest.raises(manprose.ProseError, match=r"ARGUMENTS describes FILES, which the command does not take"):
        manpage.render_pages()


def test_a_page_of_its_own_starts_with_its_name(prose_copy: Path) -> None:
    page = prose_copy / "kafkatool-runbooks.7.rst"
    page.write_text(page.read_text(encoding="utf-8").replace("kafkatool-runbooks - ", "kafkatool-runbook - ", 1), encoding="utf-8")
    with pytest.raises(manprose.ProseError, match=r"NAME must read `kafkatool-runbooks - what it is`"):
        manpage.render_pages()


def _render(text: str, command: click.Command | None = None) -> dict[str, str]:
    """``{section title: roff}`` of a prose text, with two exit codes and one generator."""
    context = manprose.PageContext(
        source="test.rst",
        command=command,
        exit_codes={0: "Success.", 2: "Bad `usage`."},
        generators={"hello": lambda c: "Hello ``x``.", "nothing": lambda c: ""},
    )
    prose = manprose.read_prose(text, context)
    document = manprose.parse_rst("====\ntest\n====\n\n:Manual section: 1\n", "test.rst", titles=True)
    for section in prose.sections:
        document.append(section.deepcopy())
    roff = manprose.write_roff(document, "test").split('.\\" Generated by docutils manpage writer.')[0]
    parts = re.split(r"^\.SH (.*)\n", roff, flags=re.M)[3:]  # after NAME
    return {title: body.strip("\n") for title, body in zip(parts[::2], parts[1::2])}


def test_prose_constructs_as_roff() -> None:
    """Each construct a prose file may use, and the roff docutils 0.19's manpage writer makes of it
    (the same macros as the generated sections)."""
    text = textwrap.dedent(
        """\
        .. a comment, not printed

        EXAMPLES
        ========

        A paragraph with ``--opt`` and *name*.
        'Second' sentence, \\\\ and \u00e9.

        Run it::

           kafkatool x --y
           .hidden line

        ::

           standalone

        Terms:

        ``term``
           Its text.

           More text.

        - one
        - two

        1. first::

              code

           after

        A sub
        -----

        .last line
        """
    )
    assert _render(text) == {
        "EXAMPLES": textwrap.dedent(
            """\
            .sp
            A paragraph with \\fB\\-\\-opt\\fP and \\fIname\\fP\\&.
            \\(aqSecond\\(aq sentence, \\e and \\[u00E9].
            .sp
            Run it:
            .INDENT 0.0
            .INDENT 3.5
            .sp
            .nf
            .ft C
            kafkatool x \\-\\-y
            \\&.hidden line
            .ft P
            .fi
            .UNINDENT
            .UNINDENT
            .INDENT 0.0
            .INDENT 3.5
            .sp
            .nf
            .ft C
            standalone
            .ft P
            .fi
            .UNINDENT
            .UNINDENT
            .sp
            Terms:
            .INDENT 0.0
            .TP
            .B \\fBterm\\fP
            Its text.
            .sp
            More text.
            .UNINDENT
            .INDENT 0.0
            .IP \\(bu 2
            one
            .IP \\(bu 2
            two
            .UNINDENT
            .INDENT 0.0
            .IP 1. 3
            first:
            .INDENT 3.0
            .INDENT 3.5
            .sp
            .nf
            .ft C
            code
            .ft P
            .fi
            .UNINDENT
            .UNINDENT
            .sp
            after
            .UNINDENT
            .SS A sub
            .sp
            \\&.last line"""
        )
    }


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("Before any section.\n\nX\n=\n\ny\n", r"test\.rst:1: text outside a section"),
        ("X\n=\n\nan ``unclosed literal\n", r"test\.rst:4: Inline literal start-string without end-string"),
        ("X\n=\n\n=====  =====\na      b\n=====  =====\n", r"test\.rst:5: a table cannot go into a man page"),
        ("X\n=\n\nSee https://kafka.apache.org/ for more.\n", r"test\.rst:4: a reference cannot go into a man page"),
        ("X\n=\n\nY\n-\n\nZ\n~\n\nz\n", r"test\.rst:\d+: a section cannot go into a man page"),
        ("X\n=\n\n.. code:: sh\n\n   ls\n", r"test\.rst:\d+: a literal_block cannot go into a man page"),
        ("X\n=\n\n   an indented block\n", r"test\.rst:4: a block_quote cannot go into a man page"),
        ("X\n=\n\n.. raw:: manpage\n\n   .B x\n", r'test\.rst:4: "raw" directive disabled'),
        ("X\n=\n\n.. exit-status::\n\n   zero\n      Fine.\n", r"test\.rst:4: exit-status: 'zero' is not an exit code"),
        ("X\n=\n\n.. generated:: nope\n", r"test\.rst:4: generated: no generator 'nope' \(known: hello, nothing\)"),
        ("X\n=\n\n.. click-choices:: --mode\n", r"test\.rst:4: click-choices: the command has no option --mode"),
    ],
)
def test_prose_mistakes_name_the_file_and_line(text: str, error: str) -> None:
    with pytest.raises(manprose.ProseError, match=error):
        _render(text)


def test_exit_status_directive_fills_in_the_generic_codes() -> None:
    roff = _render("EXIT STATUS\n===========\n\n.. exit-status::\n\n   2\n      Refused: ``x``.\n\n   130\n      Interrupted.\n")
    assert roff["EXIT STATUS"] == (
        ".INDENT 0.0\n.TP\n.B \\fB0\\fP\nSuccess.\n.TP\n.B \\fB2\\fP\nRefused: \\fBx\\fP\\&.\n"
        ".TP\n.B \\fB130\\fP\nInterrupted.\n.UNINDENT"
    )
    assert _render("E\n=\n\n.. exit-status::\n")["E"] == (
        ".INDENT 0.0\n.TP\n.B \\fB0\\fP\nSuccess.\n.TP\n.B \\fB2\\fP\nBad \\fBusage\\fP\\&.\n.UNINDENT"
    )


def test_generated_directive_inserts_rst_from_the_code() -> None:
    assert _render("G\n=\n\n.. generated:: hello\n\nAfter.\n")["G"] == ".sp\nHello \\fBx\\fP\\&.\n.sp\nAfter."
    assert _render("G\n=\n\n.. generated:: nothing\n\nAfter.\n")["G"] == ".sp\nAfter."


def test_click_choices_directive_follows_the_option() -> None:
    repair = _toy_cli().commands["repair"]
    text = "M\n=\n\n.. click-choices:: --mode\n\n   safe\n      Slow.\n\n   fast\n      Quick.\n"
    assert _render(text, repair)["M"] == ".INDENT 0.0\n.TP\n.B \\fBfast\\fP\nQuick.\n.TP\n.B \\fBsafe\\fP\nSlow.\n.UNINDENT"  # the option's order
    with pytest.raises(manprose.ProseError, match=r"click-choices --mode: describe fast"):
        _render("M\n=\n\n.. click-choices:: --mode\n\n   safe\n      Slow.\n", repair)
    with pytest.raises(manprose.ProseError, match=r"reckless is no choice of --mode"):
        _render(text + "\n   reckless\n      No.\n", repair)


@pytest.mark.parametrize(
    "text",
    [
        "a `*.log` file and *name* too",
        "`<path>`s and x`y` and (`z`)",
        "a *.kafkatool-tmp glob, a_b_ and |pipes|, 2 * 3",
        "back\\slash `\\udcXX` and `it's`",
    ],
)
def test_house_style_prose_converts_to_rst_losslessly(text: str) -> None:
    """rst_inline (for KINDS and ExitCode docstrings) keeps every character: the text docutils reads
    back is the text with only the markup's backticks gone."""
    section = _render("X\n=\n\n" + manprose.rst_inline(text) + "\n")["X"]
    shown = _unroff(section.removeprefix(".sp\n"))
    expected = re.sub(r"`([^`]+)`", r"\1", text)
    expected = re.sub(r"(?<![\w*])\*([^*\s](?:[^*]*[^*\s])?)\*(?![\w*])", r"\1", expected) if "*name*" in text else expected
    assert shown == expected


def test_the_generator_runs_from_an_installed_package(tmp_path: Path) -> None:
    """The prose files are package data: setuptools' build_py (what a wheel holds) copies them, and
    the generator run from that tree, away from the repository, writes the pages in man/."""
    lib = tmp_path / "lib"
    result = subprocess.run(
        [sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(lib)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    built = sorted(p.name for p in (lib / manpage.PROSE_DIR).glob("*.rst"))
    assert built == sorted(p.name for p in PROSE_DIR.glob("*.rst"))
    env = {**os.environ, "PYTHONPATH": str(lib)}
    result = subprocess.run(
        [sys.executable, "-m", "kafkatool.cli.manpage", str(tmp_path / "man")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    for page in PAGE_IDS + HAND_WRITTEN:
        assert (tmp_path / "man" / page).read_bytes() == (MAN_DIR / page).read_bytes(), page


def test_kafkatool_never_loads_docutils() -> None:
    """docutils renders the pages at development time only: neither the console script, nor
    ``--version``, nor importing the generator loads it."""
    probe = (
        "import sys\nfrom kafkatool.cli.main import main\n"
        "try:\n    main(['--version'])\nexcept SystemExit:\n    pass\n"
        "import kafkatool.cli.manpage\nprint('docutils' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-1] == "False"
