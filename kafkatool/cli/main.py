"""``kafkatool``: the top-level Click group and the process entry point."""

from __future__ import annotations

import importlib
import sys
from collections.abc import MutableMapping
from enum import IntEnum

import click

from kafkatool import __version__


class ExitCode(IntEnum):
    """Exit codes shared by every command."""

    OK = 0
    FINDINGS = 1
    """dump: a file could not be fully dumped; verify: findings; repair dry run: changes needed."""
    USAGE = 2
    """Bad usage or an I/O error before any work."""
    INTERNAL = 3
    """A kafkatool bug: an unexpected exception (reported in one line, never a traceback)."""


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="kafkatool")
def cli() -> None:
    """Offline tools for Apache Kafka log directories: dump, verify, reindex and truncate segments
    without a JVM and without a running broker."""


class _LazyCommands(MutableMapping):
    """The group's commands, each module imported only when its command is looked up.

    A run imports one subcommand's module, not all four: start-up time is part of every
    measurement of a short run, and the repair commands' imports are not needed to dump.
    """

    def __init__(self, specs: dict[str, str]) -> None:
        self._specs = dict(specs)  # name -> "module:attribute"
        self._loaded: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._loaded:
            module, _, attribute = self._specs[name].partition(":")
            self._loaded[name] = getattr(importlib.import_module(module), attribute)
        return self._loaded[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._loaded[name] = command
        self._specs.setdefault(name, "")

    def __delitem__(self, name: str) -> None:
        del self._specs[name]
        self._loaded.pop(name, None)

    def __iter__(self):
        return iter(self._specs)

    def __len__(self) -> int:
        return len(self._specs)


cli.commands = _LazyCommands(
    {
        "dump": "kafkatool.cli.dump:dump",
        "reindex": "kafkatool.cli.reindex:reindex",
        "truncate": "kafkatool.cli.truncate:truncate",
        "verify": "kafkatool.cli.verify:verify",
    }
)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    from kafkatool.errors import KafkaToolError

    try:
        cli.main(args=argv, prog_name="kafkatool", standalone_mode=False)
    except click.exceptions.Abort:
        sys.stderr.write("Aborted!\n")
        sys.exit(ExitCode.FINDINGS)
    except click.ClickException as e:
        e.show()
        sys.exit(ExitCode.USAGE)
    except BrokenPipeError:  # e.g. `kafkatool dump big.log | head`
        _quiet_stdout()
        sys.exit(ExitCode.OK)
    except KafkaToolError as e:
        sys.stderr.write(f"kafkatool: error: {e}\n")
        sys.exit(ExitCode.FINDINGS)
    except OSError as e:
        sys.stderr.write(f"kafkatool: error: {e.filename or ''}: {e.strerror or e}\n")
        sys.exit(ExitCode.USAGE)
    except Exception as e:  # a bug: one line, not a traceback
        sys.stderr.write(
            f"kafkatool: internal error: {type(e).__name__}: {e} (please report this with the command line)\n"
        )
        sys.exit(ExitCode.INTERNAL)
    sys.exit(ExitCode.OK)


def _quiet_stdout() -> None:
    """After a broken pipe, point stdout at /dev/null so the interpreter's final flush is silent."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


if __name__ == "__main__":  # pragma: no cover
    main()
