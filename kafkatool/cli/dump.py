"""``kafkatool dump``: kafka-dump-log without a JVM, plus JSON Lines, tables and index seeks."""

from __future__ import annotations

import datetime as _dt
import io
import sys

import click

from kafkatool.cli.main import ExitCode

_STRING_DECODER_CLASSES = {
    "org.apache.kafka.tools.api.StringDecoder",
    "kafka.serializer.StringDecoder",
    "StringDecoder",
}


def _split_files(value: str | None) -> list[str]:
    """Java ``String.split(",")``: no trimming, trailing empty parts dropped."""
    if value is None:
        return []
    parts = value.split(",")
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def _parse_time(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        pass
    try:
        t = _dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise click.BadParameter("expected epoch milliseconds or an ISO-8601 time such as 2024-01-31T12:00:00Z") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.timezone.utc)
    return int(t.timestamp() * 1000)


def _decoder_class(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is None:
        return None
    if value not in _STRING_DECODER_CLASSES:
        raise click.BadParameter(
            f"{value}: Java decoder classes cannot be loaded; kafkatool has --key-decoder/--value-decoder "
            "(string, hex, base64, json). Kafka's StringDecoder is accepted."
        )
    return value


@click.command(context_settings={"max_content_width": 100}, short_help='Dump segments, indexes, snapshots and checkpoints as kafka-dump-log does (text, JSON Lines, tables).')
@click.argument("paths", nargs=-1, type=click.Path(dir_okay=True, file_okay=True, path_type=str))
@click.option("--files", "files", metavar="FILE1,FILE2,...", help="kafka-dump-log's form: the comma separated list of data and index log files to be dumped.")
@click.option("--print-data-log", is_flag=True, help="Print the messages content (keys and payloads); implies --deep-iteration.")
@click.option("--deep-iteration", is_flag=True, help="Use deep instead of shallow iteration: one line per record under its batch.")
@click.option("--verify-index-only", is_flag=True, help="Verify index files without printing their entries.")
@click.option("--index-sanity-check", is_flag=True, help="Only run Kafka's index sanity check on .index/.timeindex files.")
@click.option("--max-message-size", type=int, default=5242880, show_default=True, help="Size of the largest message: the slice read at each .index position.")
@click.option("--max-bytes", type=int, default=2147483647, show_default=True, help="Limit the amount of total batches read in bytes from each .log file.")
@click.option("--skip-record-metadata", is_flag=True, help="Do not print the metadata of each record (only key and payload).")
@click.option("--key-decoder", type=click.Choice(["string", "hex", "base64", "json"]), default=None, help="How to print keys (default string, Kafka's StringDecoder); implies --print-data-log.")
@click.option("--value-decoder", type=click.Choice(["string", "hex", "base64", "json"]), default=None, help="How to print payloads (default string); json falls back to 'base64:' + base64; implies --print-data-log.")
@click.option("--key-decoder-class", callback=_decoder_class, metavar="CLASS", help="kafka-dump-log compatibility: only Kafka's StringDecoder; implies --print-data-log.")
@click.option("--value-decoder-class", callback=_decoder_class, metavar="CLASS", help="kafka-dump-log compatibility: only Kafka's StringDecoder; implies --print-data-log.")
@click.option("--start-offset", type=int, default=None, help="Start at this offset, seeking with the .index (scan when it is missing or fails its sanity check).")
@click.option("--end-offset", type=int, default=None, help="Stop after this offset.")
@click.option("--start-time", callback=_parse_time, default=None, help="Start at the first batch with a timestamp at or after this (epoch ms or ISO-8601), seeking with the .timeindex.")
@click.option("--end-time", callback=_parse_time, default=None, help="Leave out records with timestamps after this (epoch ms or ISO-8601).")
@click.option("--format", "fmt", type=click.Choice(["text", "jsonl", "table"]), default="text", show_default=True, help="text: kafka-dump-log's output; jsonl: one JSON object per line; table: Rich tables.")
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
    start_offset: int | None,
    end_offset: int | None,
    start_time: int | None,
    end_time: int | None,
    fmt: str,
) -> None:
    """Dump the batches and records of .log and KRaft .checkpoint files, and the entries of
    .index, .timeindex, .txnindex, producer .snapshot and text checkpoint files.

    PATHS are files or partition directories. The default output is kafka-dump-log's, line
    for line. Exit status: 0 when every file was dumped, 1 when a file could not be (the error
    names the file and byte position; later files are still dumped), 2 on bad usage.
    """
    import gc

    from kafkatool.dump import DumpOptions, FileError, iter_dump

    # A deep dump allocates millions of short-lived tuples and no reference cycles: the cyclic
    # collector would only spend time rescanning them (measured: 0.1 s per GiB).
    gc.disable()

    all_paths = list(paths) + _split_files(files)
    if not all_paths:
        raise click.UsageError('Missing required argument "[files]": give PATHS or --files.')
    print_data = bool(
        print_data_log or key_decoder or value_decoder or key_decoder_class or value_decoder_class
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
    err = _utf8(sys.stderr)
    failed = False
    render = renderer.render
    write_out = out.write
    for item in iter_dump(all_paths, opts):
        if type(item) is FileError:
            failed = True
            out.flush()
        text, to_err = render(item)
        if text:
            if to_err:
                out.flush()
                err.write(text)
                err.flush()
            else:
                write_out(text)
    closing = getattr(renderer, "close", None)
    if closing is not None:
        text = closing()
        if text:
            write_out(text)
    out.flush()
    sys.exit(ExitCode.FINDINGS if failed else ExitCode.OK)


def _utf8(stream):
    """The stream re-encoded as UTF-8 (decoded payloads may hold any character)."""
    enc = (getattr(stream, "encoding", None) or "").lower().replace("-", "")
    if enc == "utf8":
        return stream
    buffer = getattr(stream, "buffer", None)
    if buffer is None:
        return stream
    return io.TextIOWrapper(buffer, encoding="utf-8", errors="replace", write_through=False)
