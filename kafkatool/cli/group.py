"""The top-level Click group ``kafkatool``, its commands imported lazily from :data:`~kafkatool.cli.main.COMMANDS`.

Kept apart from :mod:`kafkatool.cli.main` so that the entry point imports Click (and everything
after it) inside :func:`~kafkatool.cli.main.main`, where a Ctrl-C during start-up is caught.
"""

from __future__ import annotations

import importlib
from collections.abc import MutableMapping

import click

from kafkatool import __version__
from kafkatool.cli.main import COMMANDS, BrokenPipe, Interrupted

__all__ = ["cli", "version_line"]


def version_line() -> str:
    """``kafkatool 0.1.0 (compiled accelerator: yes)``, or ``no, <why>`` (not built, or switched off
    with ``KAFKATOOL_PURE=1``): what a bug report or a slow run needs to know first."""
    import platform

    from kafkatool.record.speedups import status

    in_use, why = status()
    accelerator = "yes" if in_use else f"no, {why}"
    return f"kafkatool {__version__} (compiled accelerator: {accelerator}; Python {platform.python_version()})"


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    click.echo(version_line())
    ctx.exit()


class _Group(click.Group):
    """A group that carries a command's Ctrl-C and broken pipe past Click's own handlers, which
    would print a blank line and raise ``Abort`` for the first and exit 1 for the second:
    :func:`~kafkatool.cli.main.main` prints one line and exits 130, or exits 0 quietly."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as e:
            raise Interrupted() from e
        except BrokenPipeError as e:
            raise BrokenPipe() from e


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show the version, whether the compiled accelerator is in use (and why not), and exit. "
    "KAFKATOOL_PURE=1 in the environment switches the accelerator off.",
)
def cli() -> None:
    """Offline tools for Apache Kafka log directories: dump, verify, stats, reindex, truncate,
    restore and convert segments without a JVM and without a running broker.

    Step-by-step procedures for damaged log dirs: `man kafkatool-runbooks`."""


class _LazyCommands(MutableMapping):
    """The group's commands, each module imported only when its command is looked up.

    A run imports one subcommand's module, not all of them: start-up time is part of every
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


cli.commands = _LazyCommands(COMMANDS)
