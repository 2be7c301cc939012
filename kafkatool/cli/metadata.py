"""``kafkatool metadata``: a KRaft cluster's state replayed from its ``__cluster_metadata`` log.
Parses the options, calls :func:`kafkatool.metadata.replay`, renders."""

from __future__ import annotations

import sys

import click

from kafkatool.cli.main import ExitCode

_SECTIONS = ("cluster", "brokers", "topics", "partitions", "configs", "quotas", "acls", "scram", "tokens",
             "producer-ids")


@click.command(context_settings={"max_content_width": 100},
               short_help="The cluster's state (topics, partitions, brokers, configs) replayed from the KRaft log.")
@click.argument("logdir", type=click.Path(exists=True, file_okay=False, path_type=str))
@click.option("--format", "fmt", type=click.Choice(["table", "jsonl"]), default="table", show_default=True,
              help="table: the replay, then a table per section; jsonl: one JSON object per entity, each with a "
                   "\"type\".")
@click.option("--topic", metavar="TOPIC",
              help="Only this topic in the topics, partitions and configs sections (quotas, ACLs, SCRAM users, "
                   "tokens and producer ids are left out).")
@click.option("--at-offset", type=click.IntRange(min=0), metavar="N",
              help="Replay only the records below offset N (N itself excluded, as a snapshot's end offset): "
                   "the state just before the record at N, from the newest valid snapshot at or below N.")
@click.option("--section", "sections", type=click.Choice(_SECTIONS), multiple=True, metavar="SECTION",
              help="Only this section (repeatable; default all): " + ", ".join(_SECTIONS)
                   + ". Problems are always shown.")
@click.option("--quiet", "-q", is_flag=True, help="No summary line on stderr.")
def metadata(logdir, fmt, topic, at_offset, sections, quiet) -> None:
    """The cluster's state replayed from the KRaft metadata log of LOGDIR, offline: the newest
    valid snapshot (<end offset>-<epoch>.checkpoint), then the log's records from the
    snapshot's end on, applied as Kafka's metadata image applies them (topics with their ids,
    partitions with leader, epochs, replicas, ISR and ELR, brokers and their registrations,
    controllers, configs, features, client quotas, ACLs, SCRAM users, delegation tokens, the
    producer-id block), with the quorum from the control records, quorum-state and
    meta.properties.

    Read-only; the log dir can belong to a stopped or dead node. Offline, the high watermark is
    unknown: the last records may not have been committed by the quorum. The replay stops at the
    first batch that cannot be read, as Kafka's log recovery truncates there. Exit status: 0 the
    replay read everything cleanly; 1 a problem (damage, an invalid snapshot skipped, a record
    that cannot be decoded or applied, --topic naming no topic); 2 bad usage or no
    __cluster_metadata-0 in LOGDIR.
    """
    from kafkatool.cli.options import exit_on_error, json_lines_stream, safe_text_stream
    from kafkatool.metadata import MetadataOptions, replay
    from kafkatool.render import metadata as render

    out = sys.stdout
    with exit_on_error(out):
        report = replay(logdir, MetadataOptions(at_offset=at_offset))
    chosen = sections or None
    objs = render.objects(report, topic=topic, sections=chosen)
    if fmt == "jsonl":
        json_lines_stream(out)
        for o in objs:
            out.write(render.dumps(o) + "\n")
    else:
        safe_text_stream(out)
        for text in render.render_text(objs):
            out.write(text)
    out.flush()
    missing = topic is not None and not any(t.name == topic for t in report.state.topics.values())
    if missing:
        sys.stderr.write(f"kafkatool: error: no topic named {topic!r} in the replayed metadata\n")
    if not quiet:
        sys.stderr.write(render.summary_line(report) + "\n")
    sys.exit(ExitCode.FINDINGS if report.problems or missing else ExitCode.OK)
