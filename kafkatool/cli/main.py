"""``kafkatool``: the process entry point, the exit codes and the command table.

This module imports nothing but the standard library modules every Python start-up has loaded
already: Click, the group (:mod:`kafkatool.cli.group`) and the commands are imported inside
:func:`main`, so a Ctrl-C at any point after the interpreter started ends with one line and exit
status 130, never a traceback. ``cli`` is still importable from here (``from kafkatool.cli.main
import cli``); it is loaded on first use.
"""

from __future__ import annotations

import sys
from enum import IntEnum


class ExitCode(IntEnum):
    """Exit codes shared by every command."""

    OK = 0
    FINDINGS = 1
    """dump: a file could not be fully dumped; verify: findings; reindex, truncate, restore and convert --in-place dry runs: changes needed; convert: a loss under --strict or a damaged entry."""
    USAGE = 2
    """Bad usage, a refusal, or an I/O error before any work."""
    INTERNAL = 3
    """A kafkatool bug: an unexpected exception (reported in one line, never a traceback)."""
    INTERRUPTED = 130
    """Interrupted (Ctrl-C, SIGINT): one line on standard error, never a traceback; a command that was
    changing files says in what state it left them."""


class Interrupted(BaseException):
    """A Ctrl-C inside a command, carried past Click's handler to :func:`main`."""


class BrokenPipe(BaseException):
    """Standard output closed by its reader (``kafkatool dump X | head``), carried past Click's handler."""


#: The commands: name -> ``"module:attribute"``, each module imported only when its command is used.
COMMANDS: dict[str, str] = {
    "convert": "kafkatool.cli.convert:convert",
    "dump": "kafkatool.cli.dump:dump",
    "groups": "kafkatool.cli.groups:groups",
    "metadata": "kafkatool.cli.metadata:metadata",
    "reindex": "kafkatool.cli.reindex:reindex",
    "restore": "kafkatool.cli.restore:restore",
    "spark": "kafkatool.cli.spark:spark",
    "stats": "kafkatool.cli.stats:stats",
    "transactions": "kafkatool.cli.transactions:transactions",
    "truncate": "kafkatool.cli.truncate:truncate",
    "verify": "kafkatool.cli.verify:verify",
}


def __getattr__(name: str):
    # ``cli`` (the Click group) on first use, so that importing this module does not import Click.
    if name == "cli":
        from kafkatool.cli.group import cli

        return cli
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    try:
        import click

        from kafkatool.cli.group import cli
        from kafkatool.errors import KafkaToolError
    except KeyboardInterrupt:
        _interrupted()
    except Exception as e:  # a dependency missing or broken: one line, not a traceback
        sys.stderr.write(f"kafkatool: error: cannot start: {type(e).__name__}: {e}\n")
        sys.exit(ExitCode.INTERNAL)

    try:
        cli.main(args=argv, prog_name="kafkatool", standalone_mode=False)
    except (Interrupted, KeyboardInterrupt, click.exceptions.Abort):  # Click turns a Ctrl-C while parsing into Abort
        _interrupted()
    except click.ClickException as e:
        e.show()
        sys.exit(ExitCode.USAGE)
    except (BrokenPipe, BrokenPipeError):  # e.g. `kafkatool dump big.log | head`: quiet, as ripgrep is
        _quiet_stdout()
        sys.exit(ExitCode.OK)
    except KafkaToolError as e:
        sys.stderr.write(f"kafkatool: error: {e}\n")
        sys.exit(ExitCode.FINDINGS)
    except OSError as e:
        sys.stderr.write(f"kafkatool: error: {_os_error_message(e, argv)}\n")
        sys.exit(ExitCode.USAGE)
    except Exception as e:  # a bug: one line, not a traceback
        sys.stderr.write(
            f"kafkatool: internal error: {type(e).__name__}: {e} (please report this with the command line)\n"
        )
        sys.exit(ExitCode.INTERNAL)
    sys.exit(ExitCode.OK)


def _interrupted() -> None:
    """Ctrl-C: one line, exit status 130 (128 + SIGINT, what a shell reports for a killed command)."""
    try:
        # on a terminal, off the line where it echoed ^C
        sys.stderr.write(("\n" if sys.stderr.isatty() else "") + "kafkatool: interrupted\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    sys.exit(ExitCode.INTERRUPTED)


def _os_error_message(e: OSError, argv: list[str] | None) -> str:
    """``file: reason`` (``file -> other: reason`` for a rename or a link), or, when the system named
    no file (a full disk found by a flush, a failed fsync), the reason and the command that met it."""
    reason = e.strerror or str(e)
    names = [n for n in (e.filename, e.filename2) if n is not None]
    if names:
        return " -> ".join(_display(n) for n in names) + f": {reason}"
    args = sys.argv[1:] if argv is None else argv
    command = next((a for a in args if a in COMMANDS), None)
    return f"{reason} (while running kafkatool {command})" if command else reason


def _display(name: object) -> str:
    """A file name as printable text: bytes that are not UTF-8 (Linux names are bytes) as ``\\xNN``."""
    import os

    if not isinstance(name, (str, bytes)):
        return str(name)  # a file descriptor
    return os.fsencode(name).decode("utf-8", "backslashreplace")


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
