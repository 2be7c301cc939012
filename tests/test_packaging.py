"""What `pip install .` puts on a machine, and the docs a new user reads first.

- the man pages go to ``<prefix>/share/man/man1`` and ``man7`` (setup.py ``data_files``), where
  ``man kafkatool-verify`` finds them; checked with setuptools' own ``install_data`` (the step a
  wheel's ``.data/data`` is made of), which needs no compiler and no network;
- the package metadata describes the commands that exist;
- the README keeps its two set-up commands (the second is ``.ci/run``), and says what it should:
  what `kafkatool dump` does not take from kafka-dump-log, where the runbooks are, Kafka's
  20-digit segment names, ``sh -e`` for RESTORE.txt, shell completion.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from kafkatool.cli import manpage
from kafkatool.cli.main import COMMANDS

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


# --------------------------------------------------------------------------- man pages installed


@pytest.fixture(scope="module")
def installed_man(tmp_path_factory) -> Path:
    """``<prefix>/share/man`` after setuptools' install_data into an empty prefix."""
    prefix = tmp_path_factory.mktemp("prefix")
    result = subprocess.run(
        [sys.executable, "setup.py", "-q", "install_data", "--install-dir", str(prefix)],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return prefix / "share" / "man"


def test_every_man_page_is_installed(installed_man: Path) -> None:
    pages = sorted(p.name for p in (REPO / "man").iterdir() if re.fullmatch(r"\.\d", p.suffix))
    assert set(pages) >= {"kafkatool.1", "kafkatool-runbooks.7", *(f"kafkatool-{c}.1" for c in COMMANDS)}
    for name in pages:
        installed = installed_man / f"man{name[-1]}" / name
        assert installed.is_file(), f"{name} is not installed under share/man/man{name[-1]}"
        assert installed.read_bytes() == (REPO / "man" / name).read_bytes()


@pytest.mark.skipif(shutil.which("man") is None, reason="man is not installed")
@pytest.mark.parametrize("section, page", [("1", "kafkatool-verify"), ("7", "kafkatool-runbooks"), ("1", "kafkatool")])
def test_man_finds_the_installed_pages(installed_man: Path, section: str, page: str) -> None:
    env = {**os.environ, "MANPATH": str(installed_man), "LC_ALL": "C.UTF-8"}
    result = subprocess.run(["man", "-w", section, page], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(installed_man / f"man{section}" / f"{page}.{section}")


# --------------------------------------------------------------------------- metadata


def test_description_names_the_commands_that_exist() -> None:
    description = PYPROJECT["project"]["description"]
    listed = re.split(r",\s*|\s+and\s+", description.split(":", 1)[1].strip().rstrip("."))
    assert sorted(listed) == sorted(COMMANDS), description


def test_console_script_is_the_entry_point() -> None:
    assert PYPROJECT["project"]["scripts"] == {"kafkatool": "kafkatool.cli.main:main"}


def test_ci_runs_the_readmes_second_command_under_ci() -> None:
    run = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    commands = _setup_commands()
    assert len(commands) == 2
    assert commands[1] in run.splitlines()
    assert re.search(r"^export CI=", run, re.M), "without CI set, a missing extension or ../shared only skips tests"


# --------------------------------------------------------------------------- README


def _setup_commands() -> list[str]:
    """The README's set-up commands: the ```sh blocks before its first section."""
    head = README.split("\n## ", 1)[0]
    return [block.strip() for block in re.findall(r"```sh\n(.*?)```", head, re.S)]


def test_readme_has_exactly_two_set_up_commands() -> None:
    commands = _setup_commands()
    assert len(commands) == 2 and all("\n" not in c for c in commands), commands
    assert commands[0].startswith("pip install . && kafkatool dump ")
    shipped = commands[0].split()[-1]
    assert (REPO / shipped).is_file(), f"the first command dumps {shipped}, which is not in the repository"
    assert commands[1] == "python -m pip install -e '.[test,spark]' && python -m pytest -q"


def test_dump_takes_every_kafka_dump_log_option_and_the_readme_says_so() -> None:
    from kafkatool.cli.main import cli

    ours = {o for p in cli.commands["dump"].params for o in getattr(p, "opts", [])} | {"--help"}
    assert [o for o in manpage._KAFKA_DUMP_LOG_OPTIONS if o not in ours] == []
    section = README.split("## `kafkatool dump`", 1)[1].split("\n## ", 1)[0]
    for option in ("--offsets-decoder", "--transaction-log-decoder", "--cluster-metadata-decoder",
                   "--remote-log-metadata-decoder", "--share-group-state-decoder"):
        assert f"`{option}`" in section, f"the README's dump section does not name {option}"
    assert "usage errors" not in section


def test_readme_points_to_the_man_pages_and_the_runbooks() -> None:
    assert "kafkatool-runbooks(7)" in README
    assert "man kafkatool-runbooks" in README
    for command in COMMANDS:
        assert f"## `kafkatool {command}`" in README, f"the README has no section for {command}"


def test_readme_segment_names_have_twenty_digits() -> None:
    names = re.findall(r"\b(\d+)\.(?:log|index|timeindex|txnindex|snapshot)\b", README)
    assert names
    assert all(len(n) == 20 for n in names), [n for n in names if len(n) != 20]


def test_restore_script_is_run_with_sh_e_everywhere() -> None:
    texts = {"README.md": README, **{p.name: p.read_text(encoding="utf-8") for p in (REPO / "man").iterdir()}}
    for name, text in texts.items():
        plain = text.replace("\\-", "-").replace("\\fB", "").replace("\\fR", "").replace("\\fI", "")
        assert not re.search(r"\bsh (?!-e)\S*RESTORE\.txt", plain), f"{name}: run RESTORE.txt with `sh -e`"


def test_readme_shows_shell_completion() -> None:
    assert "_KAFKATOOL_COMPLETE=bash_source kafkatool" in README
    assert "_KAFKATOOL_COMPLETE=zsh_source kafkatool" in README


def test_the_built_package_is_typed(tmp_path: Path) -> None:
    """PEP 561: ``py.typed`` ships with the package, so type checkers read the public API's hints."""
    result = subprocess.run(
        [sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "kafkatool" / "py.typed").is_file()
    assert (tmp_path / "kafkatool" / "segment" / "logdir.py").is_file()
