"""``kafkatool``: the top-level Click group and the process entry point."""

from __future__ import annotations

import sys
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


def _register() -> None:
    from kafkatool.cli.dump import dump
    from kafkatool.cli.reindex import reindex
    from kafkatool.cli.truncate import truncate
    from kafkatool.cli.verify import verify

    cli.add_command(dump)
    cli.add_command(reindex)
    cli.add_command(truncate)
    cli.add_command(verify)


_register()


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
