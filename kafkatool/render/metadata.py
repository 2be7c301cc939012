"""Rendering ``kafkatool metadata`` (:class:`~kafkatool.metadata.MetadataReport`): JSON Lines (one
object per entity, each with a ``type``) and plain-text tables, one per section.

The tables are drawn from the same objects as the JSON Lines, by a small fixed-width formatter
in the box style of Rich's default table (a cluster can hold a hundred thousand partitions: a
Rich ``Table`` lays them out at ~0.5 ms a row). Cells are escaped (control characters as
``\\n``, ``\\x1b``). Secrets are never shown: SCRAM credentials appear as user, mechanism and
iterations only (no salt, stored key or server key), delegation tokens without any HMAC.
The schema is in kafkatool-metadata(1).
"""

from __future__ import annotations

import math
from typing import Iterable, Iterator

from kafkatool.metadata import (
    DIRECTORY_IDS,
    LEADER_RECOVERY_STATES,
    RESOURCE_TYPES,
    SCRAM_MECHANISMS,
    ZK_MIGRATION_STATES,
    MetadataReport,
    PartitionState,
    Problem,
    metadata_version_name,
)
from kafkatool.render.stats import dumps
from kafkatool.render.times import iso_time

__all__ = ["SECTIONS", "dumps", "objects", "render_text", "summary_line"]

#: The sections, in output order: name -> the object types in it.
SECTIONS: dict[str, tuple[str, ...]] = {
    "cluster": ("replay", "cluster", "controller"),
    "brokers": ("broker",),
    "topics": ("topic",),
    "partitions": ("partition",),
    "configs": ("config",),
    "quotas": ("quota",),
    "acls": ("acl",),
    "scram": ("scramUser",),
    "tokens": ("delegationToken",),
    "producer-ids": ("producerIds",),
}


HIGH_WATERMARK_NOTE = ("offline, the high watermark is unknown: the last records replayed may not have been committed "
                       "by the quorum (a newly elected leader truncates an uncommitted tail)")


def _number(v: float) -> float | str:
    """A quota value; NaN and the infinities (which JSON has no number for) as Java prints them."""
    if math.isfinite(v):
        return v
    return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")


def _features(features: dict[str, tuple[int, int]]) -> dict:
    return {name: {"min": lo, "max": hi} for name, (lo, hi) in sorted(features.items())}


def _problem(p: Problem) -> dict:
    return {"kind": p.kind, "message": p.message, "file": p.file, "position": p.position, "offset": p.offset}


def _directories(p: PartitionState) -> list[str] | None:
    """None when no replica has a directory assigned (all MIGRATING: before KIP-858 directories)."""
    if all(d == "AAAAAAAAAAAAAAAAAAAAAg" for d in p.directories):
        return None
    return [DIRECTORY_IDS.get(d, d) for d in p.directories]


def _replay_object(r: MetadataReport) -> dict:
    snap = r.snapshot
    notes = list(r.notes)
    if r.last_offset is not None:
        notes.append(HIGH_WATERMARK_NOTE)
    return {
        "type": "replay",
        "logDir": r.log_dir,
        "partitionDir": r.partition_dir,
        "nodeId": r.node_id,
        "clusterId": r.cluster_id,
        "snapshot": None if snap is None else {"file": snap.path, "endOffset": snap.end_offset, "epoch": snap.epoch,
                                               "records": snap.records},
        "skippedSnapshots": [{"file": s.path, "endOffset": s.end_offset, "epoch": s.epoch, "reason": s.reason}
                             for s in r.skipped_snapshots],
        "bootstrap": r.bootstrap,
        "atOffset": r.at_offset,
        "logStartOffset": r.log_start_offset,
        "logEndOffset": r.log_end_offset,
        "lastOffset": r.last_offset,
        "lastEpoch": r.last_epoch,
        "records": r.records,
        "controlRecords": r.control_records,
        "batches": r.batches,
        "applied": r.applied,
        "transactionsCommitted": r.transactions_committed,
        "transactionsAborted": r.transactions_aborted,
        "openTransaction": r.open_transaction,
        "stoppedAt": None if r.stopped_at is None else _problem(r.stopped_at),
        "problems": len(r.problems),
        "notes": notes,
        "seconds": round(r.seconds, 3),
    }


def _cluster_object(r: MetadataReport) -> dict:
    s = r.state
    mv = s.features.get("metadata.version")
    return {
        "type": "cluster",
        "clusterId": r.cluster_id,
        "nodeId": r.node_id,
        "metadataVersion": mv,
        "metadataVersionName": metadata_version_name(mv),
        "features": dict(sorted(s.features.items())),
        "zkMigrationState": None if s.zk_migration_state is None else
        ZK_MIGRATION_STATES.get(s.zk_migration_state, str(s.zk_migration_state)),
        "kraftVersion": s.kraft_version,
        "voters": s.voters,
        "leaderId": s.leader_id,
        "leaderEpoch": s.leader_epoch,
        "leaderChangeVoters": s.leader_voters,
        "quorumState": r.quorum_state,
    }


def objects(r: MetadataReport, *, topic: str | None = None, sections: Iterable[str] | None = None) -> Iterator[dict]:
    """Every object of the report, section by section (:data:`SECTIONS`), sorted within each;
    with ``topic``, of the topic sections only that topic's; ``sections`` (default: all) picks
    sections. Problems come last, whatever the sections."""
    want = set(SECTIONS) if sections is None else set(sections)
    s = r.state
    if "cluster" in want:
        yield _replay_object(r)
        yield _cluster_object(r)
        for c in sorted(s.controllers.values(), key=lambda c: c.id):
            yield {"type": "controller", "id": c.id, "incarnationId": c.incarnation_id,
                   "zkMigrationReady": c.zk_migration_ready, "endpoints": c.endpoints,
                   "features": _features(c.features), "registeredAt": None if c.offset < 0 else c.offset}
    if "brokers" in want:
        for b in sorted(s.brokers.values(), key=lambda b: b.id):
            yield {"type": "broker", "id": b.id, "epoch": b.epoch, "incarnationId": b.incarnation_id,
                   "endpoints": b.endpoints, "rack": b.rack, "fenced": b.fenced,
                   "inControlledShutdown": b.in_controlled_shutdown, "isMigratingZkBroker": b.is_migrating_zk_broker,
                   "features": _features(b.features), "logDirs": b.log_dirs,
                   "registeredAt": None if b.offset < 0 else b.offset}
    topics = sorted(s.topics.values(), key=lambda t: t.name)
    if topic is not None:
        topics = [t for t in topics if t.name == topic]
    if "topics" in want:
        for t in topics:
            yield {"type": "topic", "name": t.name, "topicId": t.id, "partitions": len(t.partitions),
                   "configs": dict(sorted(s.configs.get((2, t.name), {}).items()))}
    if "partitions" in want:
        for t in topics:
            for pid in sorted(t.partitions):
                p = t.partitions[pid]
                yield {"type": "partition", "topic": t.name, "topicId": t.id, "partition": pid, "leader": p.leader,
                       "leaderEpoch": p.leader_epoch, "partitionEpoch": p.partition_epoch, "replicas": p.replicas,
                       "isr": p.isr, "removingReplicas": p.removing_replicas, "addingReplicas": p.adding_replicas,
                       "eligibleLeaderReplicas": p.elr, "lastKnownElr": p.last_known_elr,
                       "leaderRecoveryState": LEADER_RECOVERY_STATES.get(p.leader_recovery_state,
                                                                         str(p.leader_recovery_state)),
                       "directories": _directories(p)}
    if "configs" in want:
        for (rtype, rname), configs in sorted(s.configs.items()):
            if topic is not None and (rtype != 2 or rname != topic):
                continue
            yield {"type": "config", "resourceType": RESOURCE_TYPES.get(rtype, str(rtype)), "resourceName": rname,
                   "configs": dict(sorted(configs.items()))}
    if topic is None:
        if "quotas" in want:
            for entity, quotas in sorted(s.quotas.items(), key=lambda kv: [(k, v or "") for k, v in kv[0]]):
                yield {"type": "quota", "entity": {k: v for k, v in entity},
                       "quotas": {k: _number(v) for k, v in sorted(quotas.items())}}
        if "acls" in want:
            for acl in sorted(s.acls.values(), key=lambda a: (a["resourceType"], a["resourceName"], a["principal"],
                                                              a["operation"], a["id"])):
                yield {"type": "acl", **acl}
        if "scram" in want:
            for (user, mech), iterations in sorted(s.scram.items()):
                yield {"type": "scramUser", "name": user, "mechanism": SCRAM_MECHANISMS.get(mech, str(mech)),
                       "iterations": iterations}
        if "tokens" in want:
            for tok in sorted(s.tokens.values(), key=lambda t: t["tokenId"]):
                yield {"type": "delegationToken", **tok}
        if "producer-ids" in want and s.producer_ids is not None:
            yield {"type": "producerIds", **s.producer_ids}
    for p in r.problems:
        yield {"type": "problem", **_problem(p)}


# ----------------------------------------------------------------------------- text


def _plural(n: int, word: str, words: str | None = None) -> str:
    return f"{n} {word if n == 1 else (words or word + 's')}"


def _ids(ids: list[int] | None) -> str:
    return "-" if not ids else ",".join(str(i) for i in ids)


def _endpoints(eps: list[dict]) -> str:
    return "\n".join(f"{e['name']}://{e['host']}:{e['port']}" + (f" ({e['securityProtocol']})"
                     if e["securityProtocol"] != e["name"] else "") for e in eps) or "-"


def _feature_ranges(features: dict) -> str:
    return "\n".join(f"{n} {v['min']}-{v['max']}" for n, v in features.items()) or "-"


def _kv(d: dict) -> str:
    return "\n".join(f"{k}={v}" for k, v in d.items()) or "-"


def _opt(v) -> str:
    return "-" if v is None else str(v)


def _registered(offset: int | None) -> str:
    return "snapshot" if offset is None else str(offset)


def _replay_lines(o: dict) -> list[str]:
    rows: list[tuple[str, str]] = [("metadata log", o["partitionDir"])]
    who = []
    if o["nodeId"] is not None:
        who.append(f"node {o['nodeId']}")
    if o["clusterId"] is not None:
        who.append(f"cluster {o['clusterId']}")
    if who:
        rows.append(("this log dir", ", ".join(who) + " (meta.properties)"))
    snap = o["snapshot"]
    if snap is not None:
        rows.append(("snapshot", f"{snap['file']} (end offset {snap['endOffset']}, epoch {snap['epoch']}, "
                                 f"{_plural(snap['records'], 'record')})"))
    else:
        rows.append(("snapshot", "none: replayed from the start of the log"))
    for s in o["skippedSnapshots"]:
        rows.append(("skipped", f"{s['file']}: not a valid snapshot: {s['reason']}"))
    if o["lastOffset"] is None:
        rows.append(("replayed to", "nothing: no record read"))
    else:
        rows.append(("replayed to", f"offset {o['lastOffset']}, epoch {o['lastEpoch']}"
                                    + (f" (--at-offset {o['atOffset']}: records below it)" if o["atOffset"] is not None
                                       else "")))
    rows.append(("log", f"{_plural(o['records'], 'metadata record')}, {_plural(o['controlRecords'], 'control record')}"
                        f" in {_plural(o['batches'], 'batch', 'batches')} read from the log"
                        + ("" if o["logEndOffset"] is None else f"; log end offset {o['logEndOffset']}")))
    rows.append(("applied", f"{_plural(o['applied'], 'record')}; metadata transactions: "
                            f"{o['transactionsCommitted']} committed, {o['transactionsAborted']} aborted"))
    if o["openTransaction"] is not None:
        t = o["openTransaction"]
        rows.append(("open transaction", f"{t['name']!r} begun at offset {t['offset']}, "
                                         f"{_plural(t['records'], 'record')} not applied (the next active controller "
                                         "aborts it)"))
    if o["bootstrap"] is not None:
        b = o["bootstrap"]
        feats = ", ".join(f"{k}={v}" for k, v in b["features"].items()) or "no features"
        rows.append(("bootstrap", f"{b['file']}: {feats} (written into the log only when it is empty; not applied)"))
    if o["stoppedAt"] is not None:
        p = o["stoppedAt"]
        rows.append(("stopped at", f"{p['file']}:{p['position']}: {p['message']} (Kafka's recovery truncates the log "
                                   "at the first bad batch: nothing after it is replayed)"))
    for n in o["notes"]:
        rows.append(("note", n))
    width = max(len(k) for k, _ in rows) + 1
    return [f"{k + ':':<{width}} {v}" for k, v in rows]


def _cluster_rows(o: dict, replay: dict | None) -> list[tuple[str, str]]:
    mv = o["metadataVersion"]
    if mv is not None:
        version = f"{mv} ({o['metadataVersionName']})"
    elif replay is not None and replay["lastOffset"] is None and replay["bootstrap"] is not None \
            and "metadata.version" in replay["bootstrap"]["features"]:
        level = replay["bootstrap"]["features"]["metadata.version"]
        version = f"none yet: the first active controller writes {level} ({metadata_version_name(level)}) " \
                  "from bootstrap.checkpoint"
    else:
        version = "none in the log (Kafka treats it as 3.0-IV1)"
    rows = [("cluster id", _opt(o["clusterId"])), ("node id (this log dir)", _opt(o["nodeId"])),
            ("metadata.version", version)]
    other = {k: v for k, v in o["features"].items() if k != "metadata.version"}
    rows.append(("features", ", ".join(f"{k}={v}" for k, v in other.items()) or "-"))
    if o["zkMigrationState"] is not None:
        rows.append(("zk migration state", o["zkMigrationState"]))
    if o["kraftVersion"] is not None:
        rows.append(("kraft.version", str(o["kraftVersion"])))
    if o["voters"] is not None:
        rows.append(("voters (KRAFT_VOTERS)", "\n".join(
            f"{v['voterId']} ({v['voterDirectoryId']})"
            + "".join(f" {e['name']}://{e['host']}:{e['port']}" for e in v["endpoints"]) for v in o["voters"]) or "-"))
    if o["leaderId"] is not None:
        rows.append(("last LEADER_CHANGE", f"leader {o['leaderId']}, epoch {o['leaderEpoch']}, voters "
                                           f"{_ids(o['leaderChangeVoters'])}"))
    qs = o["quorumState"]
    if qs is not None:
        voters = qs.get("currentVoters")
        voter_ids = _ids([v.get("voterId") for v in voters]) if isinstance(voters, list) else "-"
        rows.append(("quorum-state", f"leader {qs.get('leaderId', '-')}, epoch {qs.get('leaderEpoch', '-')}, voted "
                                     f"{qs.get('votedId', '-')}, voters {voter_ids}"))
    return rows


_TABLES: dict[str, tuple[str, tuple[str, ...]]] = {
    "controller": ("Controllers", ("id", "incarnation", "endpoints", "features", "zk migration ready",
                                   "registered at")),
    "broker": ("Brokers", ("id", "epoch", "incarnation", "endpoints", "rack", "state", "features", "log dirs",
                           "registered at")),
    "topic": ("Topics", ("name", "topic id", "partitions", "configs")),
    "partition": ("Partitions", ("topic", "partition", "leader", "leader epoch", "partition epoch", "replicas",
                                 "isr", "elr / last known elr", "adding / removing", "recovery", "directories")),
    "config": ("Configs", ("resource type", "resource name", "configs")),
    "quota": ("Client quotas", ("entity", "quotas")),
    "acl": ("ACLs", ("principal", "host", "operation", "permission", "resource type", "pattern", "resource name")),
    "scramUser": ("SCRAM users", ("user", "mechanism", "iterations")),
    "delegationToken": ("Delegation tokens", ("token id", "owner", "requester", "renewers", "issued", "expires",
                                              "max")),
    "producerIds": ("Producer ids", ("next producer id", "broker", "broker epoch")),
    "problem": ("Problems", ("where", "offset", "kind", "message")),
}


#: Columns left out of a table when every row is empty there.
_OPTIONAL = frozenset({"rack", "log dirs", "elr / last known elr", "adding / removing", "directories", "renewers"})


def _ts(ms: int) -> str:
    return f"{ms}\n{iso_time(ms)}" if ms >= 0 else str(ms)


def _escaped(value):
    """``value`` with every string in it escaped (control characters as ``\\n``, ``\\x1b``): a name
    holding a newline must not break the lines a cell is drawn on."""
    from kafkatool.render.table import escape

    if isinstance(value, str):
        return escape(value)
    if isinstance(value, dict):
        return {_escaped(k): _escaped(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_escaped(v) for v in value]
    return value


def _row(o: dict) -> tuple[str, ...]:
    o = _escaped(o)
    t = o["type"]
    if t == "controller":
        return (str(o["id"]), o["incarnationId"], _endpoints(o["endpoints"]), _feature_ranges(o["features"]),
                str(o["zkMigrationReady"]).lower(), _registered(o["registeredAt"]))
    if t == "broker":
        state = "fenced" if o["fenced"] else "unfenced"
        if o["inControlledShutdown"]:
            state += "\nin controlled shutdown"
        if o["isMigratingZkBroker"]:
            state += "\nmigrating ZK broker"
        return (str(o["id"]), str(o["epoch"]), o["incarnationId"], _endpoints(o["endpoints"]), _opt(o["rack"]), state,
                _feature_ranges(o["features"]), "\n".join(o["logDirs"]) or "-", _registered(o["registeredAt"]))
    if t == "topic":
        return (o["name"], o["topicId"], str(o["partitions"]), _kv(o["configs"]))
    if t == "partition":
        leader = "none" if o["leader"] == -1 else str(o["leader"])
        elr = "-" if not o["eligibleLeaderReplicas"] and not o["lastKnownElr"] else \
            f"{_ids(o['eligibleLeaderReplicas'])} / {_ids(o['lastKnownElr'])}"
        moving = "-" if not o["addingReplicas"] and not o["removingReplicas"] else \
            f"+{_ids(o['addingReplicas'])} / -{_ids(o['removingReplicas'])}"
        return (o["topic"], str(o["partition"]), leader, str(o["leaderEpoch"]), str(o["partitionEpoch"]),
                _ids(o["replicas"]), _ids(o["isr"]), elr, moving, o["leaderRecoveryState"],
                "-" if o["directories"] is None else "\n".join(o["directories"]))
    if t == "config":
        return (o["resourceType"], o["resourceName"] or '"" (default)', _kv(o["configs"]))
    if t == "quota":
        return (", ".join(f"{k}={'<default>' if v is None else v}" for k, v in o["entity"].items()), _kv(o["quotas"]))
    if t == "acl":
        return (o["principal"], o["host"], o["operation"], o["permissionType"], o["resourceType"], o["patternType"],
                o["resourceName"])
    if t == "scramUser":
        return (o["name"], o["mechanism"], str(o["iterations"]))
    if t == "delegationToken":
        return (o["tokenId"], o["owner"], o["requester"], ", ".join(o["renewers"]) or "-", _ts(o["issueTimestamp"]),
                _ts(o["expirationTimestamp"]), _ts(o["maxTimestamp"]))
    if t == "producerIds":
        return (str(o["nextProducerId"]), str(o["brokerId"]), str(o["brokerEpoch"]))
    if t == "problem":
        where = "-" if o["file"] is None else o["file"] + ("" if o["position"] is None else f":{o['position']}")
        return (where, _opt(o["offset"]), o["kind"], o["message"])
    raise ValueError(t)


def _table(title: str, headers: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    """A box table (Rich's HEAVY_HEAD look), cells escaped, multi-line cells on several lines."""
    from kafkatool.render.table import escape

    cells = [[[escape(line) for line in cell.split("\n")] for cell in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, lines in enumerate(row):
            widths[i] = max(widths[i], *(len(x) for x in lines))
    out = [title]
    out.append("┏" + "┳".join("━" * (w + 2) for w in widths) + "┓")
    out.append("┃" + "┃".join(f" {h:<{w}} " for h, w in zip(headers, widths)) + "┃")
    out.append("┡" + "╇".join("━" * (w + 2) for w in widths) + "┩")
    for row in cells:
        height = max(len(lines) for lines in row)
        for k in range(height):
            out.append("│" + "│".join(f" {(lines[k] if k < len(lines) else ''):<{w}} "
                                       for lines, w in zip(row, widths)) + "│")
    out.append("└" + "┴".join("─" * (w + 2) for w in widths) + "┘")
    return "\n".join(out) + "\n"


def render_text(objs: Iterable[dict]) -> Iterator[str]:
    """The table output of :func:`objects`: the replay lines, the cluster as name/value rows, then a
    table per kind of entity (only kinds that have some), problems last."""
    groups: dict[str, list[dict]] = {}
    order: list[str] = []
    replay = None
    for o in objs:
        t = o["type"]
        if t == "replay":
            replay = o
            from kafkatool.render.table import escape

            yield "\n".join(escape(line) for line in _replay_lines(o)) + "\n\n"
            continue
        if t == "cluster":
            rows = _cluster_rows(_escaped(o), replay)
            yield _table("Cluster", ("field", "value"), rows) + "\n"
            continue
        if t not in groups:
            groups[t] = []
            order.append(t)
        groups[t].append(o)
    for t in order:
        title, headers = _TABLES[t]
        rows = [_row(o) for o in groups[t]]
        # a column that only says "-" (no rack, no ELR, no reassignment, no directories anywhere) is left out
        keep = [i for i, h in enumerate(headers) if h not in _OPTIONAL or any(row[i] != "-" for row in rows)]
        yield _table(f"{title} ({len(rows)})", tuple(headers[i] for i in keep),
                     [tuple(row[i] for i in keep) for row in rows]) + "\n"


def summary_line(r: MetadataReport) -> str:
    """``Replayed __cluster_metadata to offset N (epoch E): 3 brokers, 6 topics, 55 partitions in 0.02 s: no problems``."""
    s = r.state
    to = "nothing" if r.last_offset is None else f"offset {r.last_offset} (epoch {r.last_epoch})"
    parts = [_plural(len(s.brokers), "broker"), _plural(len(s.topics), "topic"),
             _plural(sum(len(t.partitions) for t in s.topics.values()), "partition")]
    verdict = "no problems" if not r.problems else _plural(len(r.problems), "problem")
    return f"Replayed __cluster_metadata to {to}: {', '.join(parts)} in {r.seconds:.2f} s: {verdict}"
