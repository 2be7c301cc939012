"""``kafkatool dump``: kafka-dump-log without a JVM, plus JSON Lines, tables and index seeks."""

from __future__ import annotations

import datetime as _dt
import io
import os
import re
import stat
import sys

import click

from kafkatool.cli.main import ExitCode
from kafkatool.record.layout import INT32_MAX
from kafkatool.render.terminal import is_terminal

_STRING_DECODER_CLASSES = {
    "org.apache.kafka.tools.api.StringDecoder",
    "kafka.serializer.StringDecoder",
    "StringDecoder",
}

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
_MILLISECOND = _dt.timedelta(milliseconds=1)
_INTEGER = re.compile(r"[+-]?[0-9]+")
# An integer in this range is a 2001-5138 date in epoch seconds but January-February 1970 in
# epoch milliseconds: almost surely seconds.
_SECONDS_LOOKALIKE = (10**9, 10**11)


def _split_files(value: str | None) -> list[str]:
    """Java ``String.split(",")``: no trimming, trailing empty parts dropped."""
    if value is None:
        return []
    parts = value.split(",")
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def iso_utc(ms: int) -> str:
    """Epoch milliseconds as ISO 8601 UTC (``2024-05-01T12:00:00.000Z``)."""
    return (_EPOCH + ms * _MILLISECOND).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_time(value: str) -> tuple[int, str | None]:
    """A --start-time/--end-time value as epoch milliseconds, and a warning when it looks wrong.

    Accepts epoch milliseconds (a signed 64-bit integer) or an ISO 8601 date/time: ``Z`` or an
    offset such as ``+02:00`` (without one, UTC), fractional seconds (below a millisecond
    rounded down), or a date alone (midnight UTC). Raises ValueError with the reason.
    """
    text = value.strip()
    if _INTEGER.fullmatch(text):
        ms = int(text)
        if not _INT64_MIN <= ms <= _INT64_MAX:
            raise ValueError("is outside the signed 64-bit range of Kafka timestamps (epoch milliseconds)")
        warning = None
        if _SECONDS_LOOKALIKE[0] < ms < _SECONDS_LOOKALIKE[1]:
            warning = (
                f"{ms} looks like epoch seconds ({iso_utc(ms * 1000)}); timestamps are epoch milliseconds, "
                f"so it means {iso_utc(ms)} (for the former, give {ms * 1000} or an ISO 8601 time)"
            )
        return ms, warning
    if text[-1:] == "z":
        text = text[:-1] + "Z"
    try:
        t = _dt.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            "expected epoch milliseconds or an ISO 8601 time such as 2024-05-01T12:00:00Z, "
            "2024-05-01T14:00:00.250+02:00 or 2024-05-01"
        ) from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.timezone.utc)
    return (t - _EPOCH) // _MILLISECOND, None


def _parse_time(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        ms, warning = parse_time(value)
    except ValueError as e:
        raise click.BadParameter(f"{value!r} {e}" if str(e).startswith("is ") else str(e)) from None
    if warning is not None:
        sys.stderr.write(f"kafkatool: warning: --{param.name.replace('_', '-')} {warning}\n")  # type: ignore[union-attr]
    return ms


def _check_decoder_class(option: str, value: str | None) -> None:
    """kafka-dump-log loads a decoder class only when no internal-topic decoder is given (§15.1):
    kafkatool accepts Kafka's StringDecoder then, and refuses any other class."""
    if value is not None and value not in _STRING_DECODER_CLASSES:
        raise click.BadParameter(
            f"{value}: Java decoder classes cannot be loaded; kafkatool has --key-decoder/--value-decoder "
            "(string, hex, base64, json). Kafka's StringDecoder is accepted.",
            param_hint=f"'{option}'",
        )


_OFFSET = click.IntRange(0, _INT64_MAX)


@click.command(context_settings={"max_content_width": 100}, short_help='Dump segments, indexes, snapshots and checkpoints as kafka-dump-log does (text, JSON Lines, tables).')
@click.argument("paths", nargs=-1, type=click.Path(exists=True, dir_okay=True, file_okay=True, path_type=str))
@click.option("--files", "files", metavar="FILE1,FILE2,...", help="kafka-dump-log's form: the comma separated list of data and index log files to be dumped.")
@click.option("--print-data-log", is_flag=True, help="Print the messages content (keys and payloads); implies --deep-iteration.")
@click.option("--deep-iteration", is_flag=True, help="Use deep instead of shallow iteration: one line per record under its batch.")
@click.option("--verify-index-only", is_flag=True, help="Verify index files without printing their entries.")
@click.option("--index-sanity-check", is_flag=True, help="Only run Kafka's index sanity check on .index/.timeindex files.")
@click.option("--max-message-size", type=click.IntRange(1, INT32_MAX), default=5242880, show_default=True, help=f"Size of the largest message: the slice read at each .index position (1 to {INT32_MAX}).")
@click.option("--max-bytes", type=int, default=INT32_MAX, show_default=True, help="Limit the amount of total batches read in bytes from each .log file.")
@click.option("--skip-record-metadata", is_flag=True, help="Do not print the metadata of each record (only key and payload).")
@click.option("--key-decoder", type=click.Choice(["string", "hex", "base64", "json"]), default=None, help="How to print keys (default string, Kafka's StringDecoder); implies --print-data-log.")
@click.option("--value-decoder", type=click.Choice(["string", "hex", "base64", "json"]), default=None, help="How to print payloads (default string); json falls back to 'base64:' + base64; implies --print-data-log.")
@click.option("--key-decoder-class", metavar="CLASS", help="kafka-dump-log compatibility: only Kafka's StringDecoder (any class is ignored under an internal-topic decoder); implies --print-data-log.")
@click.option("--value-decoder-class", metavar="CLASS", help="kafka-dump-log compatibility: only Kafka's StringDecoder (any class is ignored under an internal-topic decoder); implies --print-data-log.")
@click.option("--offsets-decoder", is_flag=True, help="Decode __consumer_offsets records (offset commits, group metadata) as kafka-dump-log does; implies --print-data-log.")
@click.option("--transaction-log-decoder", is_flag=True, help="Decode __transaction_state records as kafka-dump-log does; implies --print-data-log.")
@click.option("--cluster-metadata-decoder", is_flag=True, help="Decode KRaft __cluster_metadata records (the log, .checkpoint snapshots) as kafka-dump-log does; implies --print-data-log.")
@click.option("--remote-log-metadata-decoder", is_flag=True, help="Decode tiered storage's __remote_log_metadata records as kafka-dump-log does; implies --print-data-log.")
@click.option("--share-group-state-decoder", is_flag=True, help="Decode __share_group_state records as kafka-dump-log does; implies --print-data-log.")
@click.option("--start-offset", type=_OFFSET, default=None, metavar="OFFSET", help="Start at this offset, seeking with the .index (scan when it is missing or fails its sanity check).")
@click.option("--end-offset", type=_OFFSET, default=None, metavar="OFFSET", help="Stop after this offset (at most 2^63-1, not below --start-offset).")
@click.option("--start-time", callback=_parse_time, default=None, metavar="TIME", help="Start at the first batch with a timestamp at or after this, seeking with the .timeindex. TIME is epoch milliseconds or ISO 8601 (2024-05-01T12:00:00Z, +02:00 offsets, fractional seconds; UTC when no offset); an integer that looks like epoch seconds is warned about.")
@click.option("--end-time", callback=_parse_time, default=None, metavar="TIME", help="Leave out records with timestamps after this (epoch ms or ISO 8601, not before --start-time).")
@click.option("--format", "fmt", type=click.Choice(["text", "jsonl", "table"]), default="text", show_default=True, help="text: kafka-dump-log's output; jsonl: one JSON object per line; table: aligned tables for people (rows streamed, times also in ISO 8601 UTC).")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar on stderr (errors, warnings and Kafka's own diagnostics still go there).")
def dump(
    paths: tuple[str, ...],
    files: str | None,
    print_data_log: bool,
    deep_iteration: bool,
    verify_index_only: bool,
    index_sanity_check: bool,
    max_message_size: int,
    max_bytes: int,
    skip_record_metadata: bool,
    key_decoder: str | None,
    value_decoder: str | None,
    key_decoder_class: str | None,
    value_decoder_class: str | None,
    offsets_decoder: bool,
    transaction_log_decoder: bool,
    cluster_metadata_decoder: bool,
    remote_log_metadata_decoder: bool,
    share_group_state_decoder: bool,
    start_offset: int | None,
    end_offset: int | None,
    start_time: int | None,
    end_time: int | None,
    fmt: str,
    quiet: bool,
) -> None:
    """Dump the batches and records of .log and KRaft .checkpoint files, and the entries of
    .index, .timeindex, .txnindex, producer .snapshot and text checkpoint files.

    PATHS are files, partition directories or log dirs (a directory above log dirs stands for
    them). The default output is kafka-dump-log's, line for line. With standard output
    redirected and standard error a terminal, a progress bar shows on standard error.

    The internal-topic decoders (--offsets-decoder, --transaction-log-decoder,
    --cluster-metadata-decoder, --remote-log-metadata-decoder, --share-group-state-decoder)
    print kafka-dump-log's decoded keys and payloads; where kafka-dump-log would crash on a
    record, its line ends with `error: <Kafka's message>` and the dump goes on.

    Exit status: 0 when every file was dumped (also when the reader of the output went away,
    as in `kafkatool dump X | head`), 1 when a file could not be (the error names the file and
    byte position; later files are still dumped) or a decoder could not decode some record,
    2 on bad usage: a path that does not exist, a directory with nothing Kafka in it, an empty
    --start/--end range.
    """
    import gc

    from kafkatool.dump import DecodeFailures, DumpOptions, FileError, NothingToDump, expand_paths, iter_dump
    from kafkatool.errors import KafkaToolError

    # A deep dump allocates millions of short-lived tuples and no reference cycles: the cyclic
    # collector would only spend time rescanning them (measured: 0.1 s per GiB).
    gc.disable()

    listed = _split_files(files)
    for p in listed:
        # Path(exists=True) checks PATHS; the same checks and messages for --files (an empty
        # entry is kept: kafka-dump-log dumps it, and kafkatool reports it as that file's error)
        if p and not os.path.exists(p):
            raise click.BadParameter(f"Path {click.format_filename(p)!r} does not exist.", param_hint="'--files'")
        if p and not os.access(p, os.R_OK):
            raise click.BadParameter(f"Path {click.format_filename(p)!r} is not readable.", param_hint="'--files'")
    all_paths = list(paths) + listed
    if not all_paths:
        raise click.UsageError('Missing required argument "[files]": give PATHS or --files.')
    if start_offset is not None and end_offset is not None and start_offset > end_offset:
        raise click.UsageError(f"--start-offset {start_offset} is after --end-offset {end_offset}: the range is empty.")
    if start_time is not None and end_time is not None and start_time > end_time:
        raise click.UsageError(f"--start-time {start_time} is after --end-time {end_time}: the range is empty.")
    decoder = _topic_decoder(
        {
            "offsets": offsets_decoder,
            "transaction-log": transaction_log_decoder,
            "cluster-metadata": cluster_metadata_decoder,
            "remote-log-metadata": remote_log_metadata_decoder,
            "share-group-state": share_group_state_decoder,
        },
        key_decoder=key_decoder,
        value_decoder=value_decoder,
        decoder_classes=[o for o, v in (("--key-decoder-class", key_decoder_class), ("--value-decoder-class", value_decoder_class)) if v],
    )
    if decoder is None:
        _check_decoder_class("--key-decoder-class", key_decoder_class)
        _check_decoder_class("--value-decoder-class", value_decoder_class)
    try:
        targets = expand_paths(all_paths)
    except (NothingToDump, KafkaToolError) as e:
        sys.stderr.write(f"kafkatool: error: {e}\n")
        sys.exit(ExitCode.USAGE)

    print_data = bool(
        print_data_log or key_decoder or value_decoder or key_decoder_class or value_decoder_class or decoder
    )
    opts = DumpOptions(
        deep=deep_iteration or print_data,
        print_data=print_data,
        verify_index_only=verify_index_only,
        index_sanity_check=index_sanity_check,
        max_message_size=max_message_size,
        max_bytes=max_bytes,
        skip_record_metadata=skip_record_metadata,
        start_offset=start_offset,
        end_offset=end_offset,
        start_time=start_time,
        end_time=end_time,
        decoder=decoder,
    )
    if fmt == "jsonl":
        from kafkatool.render.jsonl import JsonlRenderer

        renderer = JsonlRenderer(opts)
    elif fmt == "table":
        from kafkatool.render.table import TableRenderer

        renderer = TableRenderer(opts, key_decoder or "string", value_decoder or "string")
    else:
        from kafkatool.render.text import TextRenderer

        renderer = TextRenderer(opts, key_decoder or "string", value_decoder or "string")

    out = _utf8(sys.stdout)
    if fmt == "jsonl":
        from kafkatool.cli.options import json_lines_stream

        json_lines_stream(out)
    err = _utf8(sys.stderr)
    progress = None
    if not quiet and is_terminal(sys.stderr) and not is_terminal(sys.stdout):
        progress = _Progress(targets, FileError)
    write_err = progress.write if progress is not None else err.write
    files_failed = 0
    render = renderer.render
    drain = getattr(renderer, "drain", None)  # a table's rows that must reach stdout before a diagnostic
    write_out = out.write
    try:
        batch_text = renderer.batch_text if fmt == "text" else None  # type: ignore[union-attr]
        for item in iter_dump(targets, opts, batch_text):
            if type(item) is FileError or type(item) is DecodeFailures:
                files_failed += 1
                out.flush()
            text, to_err = render(item)
            if text:
                if to_err:
                    if drain is not None:
                        write_out(drain())
                    out.flush()
                    write_err(text)
                    err.flush()
                else:
                    write_out(text)
            if progress is not None:
                progress.advance(item)
        closing = getattr(renderer, "close", None)
        if closing is not None:
            text = closing()
            if text:
                write_out(text)
        out.flush()
    finally:
        if progress is not None:
            progress.stop()
    sys.exit(ExitCode.FINDINGS if files_failed else ExitCode.OK)


def _topic_decoder(
    flags: dict[str, bool], *, key_decoder: str | None, value_decoder: str | None, decoder_classes: list[str]
) -> str | None:
    """The internal-topic decoder to use: of those given, the first in kafka-dump-log's order
    (``flags`` is in that order, spec §15.1), with a warning for each option it overrides."""
    given = [name for name, on in flags.items() if on]
    if not given:
        return None
    chosen = given[0]
    for option, value in (("--key-decoder", key_decoder), ("--value-decoder", value_decoder)):
        if value is not None:
            raise click.UsageError(
                f"{option} cannot be combined with --{chosen}-decoder, which decodes the keys and payloads itself."
            )
    for option in [f"--{name}-decoder" for name in given[1:]] + decoder_classes:
        sys.stderr.write(
            f"kafkatool: warning: {option} is ignored: --{chosen}-decoder takes precedence (as in kafka-dump-log)\n"
        )
    return chosen


class _Progress:
    """A transient Rich progress bar on standard error over the bytes of the segments dumped.

    Shown only while standard output goes to a file or pipe and standard error is a terminal;
    Rich is imported only then. Text for standard error goes through :meth:`write`, above the bar.
    """

    def __init__(self, targets: list, file_error_type: type) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

        from kafkatool.dump import BatchItems, Batches, FileHeader, Rendered, normalize_display_path

        self._types = (Batches, BatchItems, FileHeader, Rendered)
        sizes: dict[str, int] = {}
        for t in targets:
            if type(t) is file_error_type or not str(t).endswith((".log", ".checkpoint")):
                continue
            try:
                st = os.stat(t)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                sizes[normalize_display_path(t)] = st.st_size
        self._sizes = sizes
        self._done = 0  # bytes of the segments finished
        self._current = 0  # size of the segment being dumped
        self.console = Console(stderr=True, highlight=False, markup=False, emoji=False)
        self._bar = Progress(
            TextColumn("dump"), BarColumn(), DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn(),
            console=self.console, transient=True, redirect_stdout=False, redirect_stderr=False,
        )
        self._task = self._bar.add_task("dump", total=sum(sizes.values()) or None)
        self._bar.start()

    def advance(self, item) -> None:
        Batches, BatchItems, FileHeader, Rendered = self._types
        t = type(item)
        if t is Rendered:
            end = item.end
        elif t is Batches:
            end = item.batches[-1].end if item.batches else 0
        elif t is BatchItems:
            end = item.items[-1].batch.end if item.items else 0
        elif t is FileHeader:
            self._done += self._current
            self._current = self._sizes.get(item.path, 0)
            end = 0
        else:
            return
        self._bar.update(self._task, completed=self._done + min(end, self._current))

    def write(self, text: str) -> None:
        self.console.out(text, end="", highlight=False)

    def stop(self) -> None:
        self._bar.stop()


def _utf8(stream):
    """The stream re-encoded as UTF-8 (decoded payloads may hold any character)."""
    enc = (getattr(stream, "encoding", None) or "").lower().replace("-", "")
    if enc == "utf8":
        return stream
    buffer = getattr(stream, "buffer", None)
    if buffer is None:
        return stream
    return io.TextIOWrapper(buffer, encoding="utf-8", errors="replace", write_through=False)
