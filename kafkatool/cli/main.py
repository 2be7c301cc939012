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


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="kafkatool")
def cli() -> None:
    """Offline tools for Apache Kafka log directories: dump, verify, repair and convert segments
    without a JVM and without a running broker."""


def _register() -> None:
    from kafkatool.cli.dump import dump

    cli.add_command(dump)


_register()


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    try:
        cli.main(args=argv, prog_name="kafkatool", standalone_mode=True)
    except BrokenPipeError:  # e.g. `kafkatool dump big.log | head`
        try:
            sys.stdout = None  # type: ignore[assignment]
        finally:
            sys.exit(ExitCode.OK)


if __name__ == "__main__":  # pragma: no cover
    main()
