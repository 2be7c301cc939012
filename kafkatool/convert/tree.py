"""``kafkatool convert SRC DEST``: a segment, a partition dir or a whole log dir converted into a new
directory (spec §13), planned first (:func:`plan_convert`, reads only), optionally analysed
(:func:`analyze`, the dry pass ``--strict`` asks first), then built (:func:`convert_to_dest`).

**SRC.** A ``<20-digit base offset>.log``, a partition dir (named ``<topic>-<partition>``, or a
symbolic link to one under any name) holding a Kafka file, or a log dir: a directory with
``meta.properties`` or an offset checkpoint, else one with a partition-named dir holding Kafka
files (so ``/etc``, whose ``dbus-1`` only looks like a partition, is refused as ``stats`` and
``verify`` judge it). Anything else is refused (kind ``refused``).

**DEST.** Refused (``KafkaToolError`` of kind ``refused``, exit 2) before anything is written when
it exists and is not an empty directory (or is a symbolic link: the rename would replace the link,
not fill what it points at), when its parent directory does not exist, when DEST lies inside SRC or
SRC inside DEST, and when zstd would be written below magic 2 (``--compression zstd``, or no
``--compression`` and a zstd batch in a source segment: a walk over the batch headers finds it,
§7.1, §13.1). The output is built in a temp dir beside DEST, ``.<DEST name>.kafkatool-tmp-<pid>``
(a leading dot, kafkatool's temp suffix and the pid of the run), every file fsynced as written and
every directory once complete, then renamed to DEST in one step: ``renameat2(RENAME_NOREPLACE)``
when DEST is absent (plain ``rename`` where that is not available), ``rename`` over an empty DEST
directory. A DEST that another run filled meanwhile is refused and the temp dir removed. Any error
removes the temp dir. A run killed (SIGKILL, a power cut) leaves at most that temp dir: the next
run to the same DEST removes each ``.<DEST name>.kafkatool-tmp-<pid>`` whose pid is not a live
process (a pid alive, or owned by another user, is left alone).

**What DEST holds.** A segment SRC: DEST holds the converted ``<base>.log`` with its new indexes,
its ``.txnindex`` and producer snapshot where they stay valid (:mod:`kafkatool.convert.segment`).
A partition SRC: DEST is the converted partition dir (:func:`convert_partition_into`). A log dir
SRC: DEST is a log dir holding

* every live partition dir (``<topic>-<partition>``) converted; ``-delete``/``-future``/``-stray``
  dirs are not copied (a deletion in progress, the target of an unfinished replica move, a replica
  the broker no longer hosts: none is part of the live log);
* ``__cluster_metadata-0`` converted like any partition at ``--to-magic 2`` (only the codec
  changes, every header field is kept; its KRaft ``.checkpoint`` snapshots and ``quorum-state`` are
  copied unchanged); below v2 copied unchanged, marked not converted: the raft layer reads only v2
  batches and needs its control records (a metadata partition or segment named as SRC is refused
  below v2);
* the four offset checkpoints, ``meta.properties`` and ``bootstrap.checkpoint`` copied (offsets
  are preserved, so every checkpointed offset still holds);
* ``.kafka_cleanshutdown`` copied when SRC has one and no damaged range was skipped: every output
  file is complete and fsynced and its indexes are what recovery would build, so the broker may
  skip recovery as it would have for SRC; after a skipped damaged range the marker is left out, so
  the broker recovers the converted partitions (rebuilding producer state past the gaps) at its
  next start. Without a marker in SRC none is written;
* ``.lock`` not copied (the broker creates it, §11.5); anything else listed ``not copied`` with
  the reason.

**Modes.** Every new file takes the mode of the file it comes from (the ``.log`` for a new index
without one); directories take their source directory's mode, set once they are complete. With
``like_owner`` (the in-place path) files also take the source's owner through
:func:`kafkatool.safety.durable.take_owner`, which leaves a file ours when ``chown`` is refused
(EPERM), root or not: a copy a user could not chown is still a correct copy, as ``cp -p`` does.

Paths are ``str`` as :mod:`os` gives them (non-UTF-8 names as surrogate escapes), so such names
and symbolic links on the way to SRC are read and written as they are.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from dataclasses import dataclass, field
from typing import Callable

from kafkatool.convert.options import ConvertOptions, Loss
from kafkatool.convert.segment import (
    SegmentResult,
    SideFile,
    convert_segment,
    copy_file,
    needs_aborted,
    snapshot_decision,
)
from kafkatool.errors import KafkaToolError
from kafkatool.record.compression import Codec
from kafkatool.record.layout import CODEC_MASK, HEADER_SIZE_UP_TO_MAGIC, LOG_OVERHEAD, MAGIC_OFFSET, RECORD_OVERHEAD_V0, V2
from kafkatool.safety import exchange
from kafkatool.safety.durable import TEMP_SUFFIX, fsync_dir, write_error
from kafkatool.segment import files as names
from kafkatool.segment.files import FileKind
from kafkatool.segment.logdir import DirectoryError, Entry, LogDir, Partition, Segment, list_dir

__all__ = [
    "ConvertPlan",
    "ConvertReport",
    "METADATA_TOPIC",
    "PartitionResult",
    "analyze",
    "convert_partition_into",
    "convert_to_dest",
    "find_zstd_batch",
    "plan_convert",
    "stale_temp_dirs",
    "temp_dir_for",
]

METADATA_TOPIC = names.METADATA_TOPIC
"""The KRaft metadata log's topic (:data:`kafkatool.segment.files.METADATA_TOPIC`): never converted below magic 2 (module doc)."""

Progress = Callable[[int], None]


@dataclass(slots=True)
class PartitionResult:
    """One converted partition dir (or one segment's, for a segment SRC)."""

    src: str
    dest: str | None
    topic: str | None
    partition: int | None
    segments: list[SegmentResult] = field(default_factory=list)
    side_files: list[SideFile] = field(default_factory=list)
    loss: Loss = field(default_factory=Loss)
    """The segments' losses merged."""


@dataclass(slots=True)
class ConvertPlan:
    """What :func:`plan_convert` found: pure data, nothing written."""

    src: str
    dest: str | None
    kind: str
    """``segment``, ``partition`` or ``log_dir``."""
    options: ConvertOptions
    partitions: list[Partition]
    """The partition dirs converted (a segment SRC: none)."""
    segments: list[Segment]
    """Every segment converted, in partition then offset order."""
    total_bytes: int
    """The converted segments' ``.log`` bytes: what ``progress`` callbacks add up to."""


@dataclass(slots=True)
class ConvertReport:
    """What :func:`convert_to_dest` did."""

    plan: ConvertPlan
    partitions: list[PartitionResult]
    loss: Loss
    dest: str
    side_files: list[SideFile] = field(default_factory=list)
    """Log-dir SRC: what was done with each entry of the log dir other than a converted partition."""


def _refused(message: str, path: str | None) -> KafkaToolError:
    return KafkaToolError(message, path=path, kind="refused")


# ----------------------------------------------------------------------------- the partition dir


_NOT_COPIED = {
    FileKind.DELETED: "scheduled for deletion by the broker (§2.1)",
    FileKind.CLEANED: "an unfinished log-cleaner or split output, which the broker discards at load (§12.3)",
    FileKind.SWAP: "an unfinished log-cleaner or split swap file (§12.3): the segments it would replace are converted instead",
    FileKind.CHECKPOINT_SNAPSHOT: "a KRaft snapshot outside the metadata log",
    FileKind.QUORUM_STATE: "KRaft quorum state outside the metadata log",
    FileKind.CLEAN_SHUTDOWN: "a log-dir file inside a partition dir",
    FileKind.LOCK: "a log-dir file inside a partition dir",
    FileKind.META_PROPERTIES: "a log-dir file inside a partition dir",
    FileKind.OFFSET_CHECKPOINT: "a log-dir file inside a partition dir",
    FileKind.BOOTSTRAP_CHECKPOINT: "a log-dir file inside a partition dir",
}


def _not_copied_reason(e: Entry) -> str:
    if e.is_symlink and not e.is_dir:
        return "not a regular file (a symbolic link, never followed: copy what it points to by hand if it belongs here)"
    if not e.is_file:
        return f"not a regular file ({e.type.value})"
    if e.kind in _NOT_COPIED:
        return _NOT_COPIED[e.kind]
    if e.name.endswith(TEMP_SUFFIX) or TEMP_SUFFIX + "-" in e.name:
        return "a kafkatool temp file of an interrupted run"
    return "not a file Kafka reads"


def _partition_side_files(partition: Partition, segments: list[Segment], options: ConvertOptions,
                          out_dir: str | None, like_owner: bool) -> list[SideFile]:
    """Every entry of ``partition`` that is not one of ``segments``' files: copied into ``out_dir``
    (when given), dropped or listed as not copied, with the reason."""
    claimed: set[str] = set()
    for s in segments:
        claimed.update(p for p in (s.log_path, s.index_path, s.timeindex_path, s.txnindex_path, s.snapshot_path) if p)
    out: list[SideFile] = []
    for e in partition.listing():
        if e.path in claimed:
            continue
        if e.is_symlink:
            out.append(SideFile(e.name, "not copied", _not_copied_reason(e)))
            continue
        if e.is_file and e.kind in (FileKind.LEADER_EPOCH_CHECKPOINT, FileKind.PARTITION_METADATA):
            why = ("the leader epochs name offsets, which are preserved (§11.1)"
                   if e.kind is FileKind.LEADER_EPOCH_CHECKPOINT else "the topic id does not change (§11.2)")
            if out_dir is not None:
                copy_file(e.path, os.path.join(out_dir, e.name), like_owner=like_owner)
            out.append(SideFile(e.name, "copied", why))
        elif e.is_file and e.kind is FileKind.PRODUCER_SNAPSHOT:
            action, why = snapshot_decision(options)
            if action == "copied" and out_dir is not None:
                copy_file(e.path, os.path.join(out_dir, e.name), like_owner=like_owner)
            out.append(SideFile(e.name, action, why))
        elif e.is_file and e.kind in (FileKind.CHECKPOINT_SNAPSHOT, FileKind.QUORUM_STATE) and _is_metadata(partition):
            why = ("a KRaft snapshot, which the raft layer reads as written: copied unchanged"
                   if e.kind is FileKind.CHECKPOINT_SNAPSHOT else "the KRaft quorum state names no batch: copied unchanged")
            if out_dir is not None:
                copy_file(e.path, os.path.join(out_dir, e.name), like_owner=like_owner)
            out.append(SideFile(e.name, "copied", why))
        elif e.is_file and e.kind in (FileKind.INDEX, FileKind.TIMEINDEX, FileKind.TXNINDEX):
            out.append(SideFile(e.name, "not copied",
                                "an index without its .log, which the broker deletes at load (§12.1)"))
        else:
            out.append(SideFile(e.name, "not copied", _not_copied_reason(e)))
    return out


def convert_partition_into(partition: Partition, out_dir: str, options: ConvertOptions, *,
                           progress: Progress | None = None, like_owner: bool = False) -> PartitionResult:
    """Fill the existing empty directory ``out_dir`` with the whole converted partition: every
    segment (:func:`~kafkatool.convert.segment.convert_segment`, the aborted transactions found
    once over all of them for ``--drop-aborted``), the producer snapshots, ``leader-epoch-checkpoint``
    and ``partition.metadata``; every other entry listed ``not copied`` with the reason. Files and
    ``out_dir`` are fsynced; ``out_dir``'s own mode is left to the caller.

    ``like_owner``: each new file also takes its source file's owner where permitted (the in-place
    staging dir). Raises the located error of a segment that stops (nothing is cleaned up here:
    the caller owns ``out_dir``).
    """
    segments = partition.segments()
    aborted = None
    if needs_aborted(options):
        from kafkatool.convert.aborted import find_aborted

        aborted = find_aborted(segments)
    result = PartitionResult(partition.path, out_dir, partition.topic, partition.partition)
    for seg in segments:
        r = convert_segment(seg, out_dir, options, aborted=aborted, progress=progress, like_owner=like_owner)
        result.segments.append(r)
        result.loss.merge(r.loss)
    result.side_files = _partition_side_files(partition, segments, options, out_dir, like_owner)
    fsync_dir(out_dir)
    return result


# ----------------------------------------------------------------------------- planning


def find_zstd_batch(path: str) -> int | None:
    """The position of the first v2 batch compressed with zstd in the ``.log`` at ``path``, or None.

    Reads only the headers (up to the magic byte, then the attributes), skipping each entry by its
    size, and stops quietly where the walk of §3 would stop (the conversion reports a bad entry
    itself). Not the log-dir model's walk: that one checks every CRC, 5x slower over a 1 GiB
    segment, and this runs on every segment before the conversion starts.
    """
    try:
        f = open(path, "rb", buffering=1 << 16)  # noqa: SIM115
    except OSError as e:
        raise KafkaToolError(f"cannot read: {e.strerror or e}", path=path, kind="unreadable") from None
    with f:
        end = os.fstat(f.fileno()).st_size
        pos = 0
        while pos < end - HEADER_SIZE_UP_TO_MAGIC:
            f.seek(pos)
            head = f.read(_UP_TO_CODEC)
            if len(head) < HEADER_SIZE_UP_TO_MAGIC:
                return None
            size = int.from_bytes(head[V2.BATCH_LENGTH:LOG_OVERHEAD], "big", signed=True)
            if size < RECORD_OVERHEAD_V0 or pos > end - LOG_OVERHEAD - size:
                return None
            magic = head[MAGIC_OFFSET]
            if 2 <= magic < 128 and len(head) == _UP_TO_CODEC and (head[_UP_TO_CODEC - 1] & CODEC_MASK) == Codec.ZSTD:
                return pos
            pos += LOG_OVERHEAD + size
    return None


_UP_TO_CODEC = V2.ATTRIBUTES + 2
"""Bytes of a v2 header up to its codec bits (the low byte of the big-endian attributes)."""


def _inside(a: str, b: str) -> bool:
    """Whether real path ``a`` is ``b`` or lies below it."""
    return a == b or a.startswith(b.rstrip(os.sep) + os.sep)


def _real_dest(dest: str) -> str:
    parent, name = os.path.split(os.path.abspath(dest))
    return os.path.join(os.path.realpath(parent), name)


def _check_dest(dest: str) -> None:
    """Refuse a DEST that exists and is not an empty directory, or whose parent is missing."""
    parent = os.path.dirname(os.path.abspath(dest))
    if not os.path.isdir(parent):
        raise _refused("the directory that would hold DEST does not exist", dest)
    if os.path.islink(dest):
        raise _refused("DEST is a symbolic link: name the directory itself", dest)
    if not os.path.lexists(dest):
        return
    if not os.path.isdir(dest):
        raise _refused("DEST exists and is not a directory", dest)
    try:
        entries = os.listdir(dest)
    except OSError as e:
        raise _refused(f"DEST exists and cannot be listed ({e.strerror})", dest) from None
    if entries:
        raise _refused(f"DEST exists and is not empty ({len(entries)} {'entry' if len(entries) == 1 else 'entries'})", dest)


_METADATA_BELOW_V2 = ("the KRaft metadata log (__cluster_metadata) is not converted below magic 2: the raft layer "
                      "reads only v2 batches and needs its control records")


_LOG_DIR_MARKERS = frozenset({FileKind.META_PROPERTIES, FileKind.OFFSET_CHECKPOINT})
_PARTITION_FILES = frozenset({FileKind.LOG, FileKind.INDEX, FileKind.TIMEINDEX, FileKind.TXNINDEX,
                              FileKind.PRODUCER_SNAPSHOT, FileKind.LEADER_EPOCH_CHECKPOINT,
                              FileKind.PARTITION_METADATA})


def _holds_partition_files(partition: Partition) -> bool:
    """Whether a partition-named dir holds a file only a Kafka partition dir has."""
    return any(e.kind in _PARTITION_FILES for e in partition.listing())


def _is_metadata(partition: Partition) -> bool:
    return partition.topic == METADATA_TOPIC


def plan_convert(src: str, dest: str | None, options: ConvertOptions) -> ConvertPlan:
    """Plan ``convert SRC DEST`` (reads only): what SRC is, which partitions and segments are
    converted, and the checks that refuse the run before anything is written (module doc), each a
    :class:`~kafkatool.errors.KafkaToolError` of kind ``refused``. ``dest`` None plans an analysis
    only (no DEST checks)."""
    if options.magic not in (0, 1, 2):
        raise _refused(f"--to-magic must be 0, 1 or 2, not {options.magic}", None)
    if os.path.isdir(src):
        name = os.path.basename(os.path.abspath(src))
        real = os.path.realpath(src)
        if names.parse_partition_dir(name) is None and names.parse_partition_dir(os.path.basename(real)) is not None:
            src_dir = real  # a symbolic link to a partition dir, under another name
        else:
            src_dir = src
        if names.parse_partition_dir(os.path.basename(os.path.abspath(src_dir))) is not None:
            kind = "partition"
            partition = Partition(src_dir)
            if _is_metadata(partition) and options.magic < 2:
                raise _refused(_METADATA_BELOW_V2, src)
            try:
                kafka_files = _holds_partition_files(partition)
            except DirectoryError as e:
                raise _refused(f"SRC cannot be listed ({e.message})", src) from None
            if not kafka_files:
                raise _refused("SRC is named like a partition dir but holds no Kafka file (no segment, "
                               "leader-epoch-checkpoint, partition.metadata or producer snapshot)", src)
            partitions = [partition]
        else:
            log_dir = LogDir(src)
            try:
                found = log_dir.partitions()
                listing = log_dir.listing()
                if not any(e.kind in _LOG_DIR_MARKERS and e.is_file for e in listing):
                    # not marked as a log dir: only partition-named dirs holding Kafka files count
                    # (/etc's dbus-1 is no partition; stats and verify judge it the same way)
                    found = [p for p in found if _holds_partition_files(p)]
            except DirectoryError as e:
                raise _refused(f"SRC cannot be listed ({e.message})", src) from None
            if not found and not any(e.kind in _LOG_DIR_MARKERS and e.is_file for e in listing):
                raise _refused("SRC is not a segment (.log), a partition dir (<topic>-<partition>) or a log dir "
                               "(no meta.properties or offset checkpoint, no partition dir holding Kafka files)", src)
            kind = "log_dir"
            partitions = [p for p in found if p.state is None and (options.magic == 2 or not _is_metadata(p))]
        try:
            segments = [s for p in partitions for s in p.segments()]
        except DirectoryError as e:
            raise _refused(f"a partition dir cannot be listed ({e.message})", e.path) from None
    elif os.path.isfile(src):
        if names.classify(src) is not FileKind.LOG:
            raise _refused("SRC is not a segment (<20-digit base offset>.log), a partition dir or a log dir", src)
        parent = names.parse_partition_dir(os.path.basename(os.path.dirname(os.path.abspath(src))))
        if parent is not None and parent.topic == METADATA_TOPIC and options.magic < 2:
            raise _refused(_METADATA_BELOW_V2, src)
        kind = "segment"
        partitions = []
        segments = [Segment.at(src)]
    elif os.path.lexists(src):
        raise _refused("SRC is not a regular file or a directory", src)
    else:
        raise _refused("SRC does not exist", src)

    if dest is not None:
        real_src = os.path.realpath(src)
        real_dest = _real_dest(dest)
        if kind != "segment" and _inside(real_dest, real_src):
            raise _refused(f"DEST lies inside SRC ({real_src})", dest)
        holder = os.path.dirname(real_src)
        if kind == "segment" and _inside(real_dest, holder) and (
                real_dest == holder or names.parse_partition_dir(os.path.basename(holder)) is not None):
            raise _refused(f"DEST lies inside the partition dir that holds SRC ({holder})", dest)
        if _inside(real_src, real_dest):
            raise _refused(f"SRC lies inside DEST ({real_dest})", dest)
        _check_dest(dest)

    if options.magic < 2:
        if options.codec == Codec.ZSTD:
            raise _refused(f"zstd cannot be written below magic 2 (--to-magic {options.magic}): "
                           "zstd exists only in v2 batches (§7.1)", None)
        if options.codec is None:
            for seg in segments:
                pos = find_zstd_batch(seg.log_path)
                if pos is not None:
                    raise KafkaToolError(
                        f"a zstd batch here would be written below magic 2 (--to-magic {options.magic}): zstd exists "
                        "only in v2 batches (§7.1); choose a --compression", path=seg.log_path, position=pos,
                        kind="refused")
    total = 0
    for seg in segments:
        try:
            total += os.stat(seg.log_path).st_size
        except OSError as e:
            raise _refused(f"cannot read: {e.strerror}", seg.log_path) from None
    return ConvertPlan(src, dest, kind, options, partitions, segments, total)


# ----------------------------------------------------------------------------- analysis (dry)


def analyze(plan: ConvertPlan, *, progress: Progress | None = None) -> Loss:
    """The dry pass: what converting ``plan`` would lose, counted exactly as the real run counts it
    (converters with ``dry=True``: nothing encoded, compressed or written). ``--strict`` runs it
    first. Raises the located error of an entry that would stop the conversion."""
    from kafkatool.convert.aborted import find_aborted

    loss = Loss()
    if plan.kind == "segment":
        groups = [plan.segments]
    else:
        groups = [p.segments() for p in plan.partitions]
    for segments in groups:
        aborted = find_aborted(segments) if needs_aborted(plan.options) else None
        for seg in segments:
            loss.merge(convert_segment(seg, None, plan.options, aborted=aborted, progress=progress).loss)
    return loss


# ----------------------------------------------------------------------------- DEST


_TMP_TAG = TEMP_SUFFIX + "-"


def temp_dir_for(dest: str, pid: int | None = None) -> str:
    """``.<DEST name>.kafkatool-tmp-<pid>`` beside DEST: where a run builds DEST."""
    parent, name = os.path.split(os.path.abspath(dest))
    return os.path.join(parent, f".{name}{_TMP_TAG}{os.getpid() if pid is None else pid}")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's live process
    return True


def stale_temp_dirs(dest: str) -> list[str]:
    """The temp dirs of earlier runs to DEST whose process is gone (killed runs)."""
    parent, name = os.path.split(os.path.abspath(dest))
    prefix = f".{name}{_TMP_TAG}"
    out = []
    try:
        listing = os.listdir(parent)
    except OSError:
        return out
    for entry in listing:
        if not entry.startswith(prefix):
            continue
        tail = entry[len(prefix):]
        if not tail.isascii() or not tail.isdigit():
            continue
        pid = int(tail)
        path = os.path.join(parent, entry)
        if pid != os.getpid() and not _pid_alive(pid) and os.path.isdir(path) and not os.path.islink(path):
            out.append(path)
    return out


def _remove_tree(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)


def _make_dir(path: str) -> None:
    try:
        os.mkdir(path, 0o777)  # the umask applies, as for any new directory; a source dir's mode is set later
    except OSError as e:
        raise write_error(e, path, "create the directory") from None


def _set_dir_mode(path: str, like: str, like_owner: bool = False) -> None:
    try:
        st = os.stat(like)
    except OSError:
        return
    try:
        if like_owner:
            try:
                os.chown(path, st.st_uid, st.st_gid)
            except PermissionError:
                pass
        os.chmod(path, stat.S_IMODE(st.st_mode))
    except OSError as e:
        raise write_error(e, path, "set the mode of") from None


def _copy_tree_files(src_dir: str, out_dir: str) -> list[SideFile]:
    """Copy every regular file of ``src_dir`` unchanged (the metadata log); others not copied."""
    out = []
    for e in list_dir(src_dir):
        if e.is_file and not e.is_symlink and not e.name.endswith(TEMP_SUFFIX):
            copy_file(e.path, os.path.join(out_dir, e.name))
            out.append(SideFile(e.name, "copied", "the KRaft metadata log is copied unchanged"))
        else:
            out.append(SideFile(e.name, "not copied", _not_copied_reason(e)))
    fsync_dir(out_dir)
    return out


def _build_segment(plan: ConvertPlan, tmp: str, progress: Progress | None) -> list[PartitionResult]:
    seg = plan.segments[0]
    src_dir = os.path.dirname(os.path.abspath(seg.log_path))
    parsed = names.parse_partition_dir(os.path.basename(src_dir))
    r = convert_segment(seg, tmp, plan.options, progress=progress)
    result = PartitionResult(src_dir, plan.dest, parsed.topic if parsed else None, parsed.partition if parsed else None,
                             [r], [], Loss())
    result.loss.merge(r.loss)
    return [result]


def _build_log_dir(plan: ConvertPlan, tmp: str, progress: Progress | None) -> tuple[list[PartitionResult], list[SideFile]]:
    log_dir = LogDir(plan.src)
    converted = {p.path for p in plan.partitions}
    results: list[PartitionResult] = []
    sides: list[SideFile] = []
    clean_marker: Entry | None = None
    for e in log_dir.listing():
        if e.path in converted:
            out = os.path.join(tmp, e.name)
            _make_dir(out)
            results.append(convert_partition_into(Partition(e.path, log_dir=log_dir), out, plan.options,
                                                  progress=progress))
            _set_dir_mode(out, e.path)
            continue
        parsed = e.partition_dir if e.is_dir else None
        if parsed is not None and parsed.topic == METADATA_TOPIC and parsed.state is None:
            out = os.path.join(tmp, e.name)
            _make_dir(out)
            _copy_tree_files(e.path, out)
            _set_dir_mode(out, e.path)
            sides.append(SideFile(e.name, "copied", "not converted: the KRaft metadata log stays v2 below "
                                                    "--to-magic 2 (the raft layer reads only v2 batches and needs "
                                                    "its control records); copied unchanged"))
        elif parsed is not None and parsed.state is not None:
            why = {"delete": "a partition dir being deleted",
                   "future": "the target of an unfinished replica move between log dirs",
                   "stray": "a stray replica the broker no longer hosts"}[parsed.state]
            sides.append(SideFile(e.name, "not copied", f"{why} (§2.1): not part of the live log"))
        elif e.is_symlink and not e.is_dir:
            sides.append(SideFile(e.name, "not copied", _not_copied_reason(e)))
        elif e.is_file and e.kind in (FileKind.OFFSET_CHECKPOINT, FileKind.META_PROPERTIES, FileKind.BOOTSTRAP_CHECKPOINT):
            copy_file(e.path, os.path.join(tmp, e.name))
            why = {FileKind.OFFSET_CHECKPOINT: "offsets are preserved: every checkpointed offset still holds (§11.3)",
                   FileKind.META_PROPERTIES: "the broker's identity and the cluster id do not change",
                   FileKind.BOOTSTRAP_CHECKPOINT: "the KRaft bootstrap snapshot, copied unchanged"}[e.kind]
            sides.append(SideFile(e.name, "copied", why))
        elif e.is_file and e.kind is FileKind.CLEAN_SHUTDOWN:
            clean_marker = e
        elif parsed is not None:  # a live partition name that plan_convert did not take
            sides.append(SideFile(e.name, "not copied", "named like a partition dir but holds no Kafka file, in a "
                                                        "directory without meta.properties or offset checkpoints"))
        elif e.kind is FileKind.LOCK:
            sides.append(SideFile(e.name, "not copied", "the broker creates and locks it at start (§11.5)"))
        else:
            sides.append(SideFile(e.name, "not copied", _not_copied_reason(e)))
    if clean_marker is not None:
        if any(r.loss.damaged_count for r in results):
            sides.append(SideFile(clean_marker.name, "not copied",
                                  "damaged ranges were skipped: without the marker the broker recovers the converted "
                                  "partitions, rebuilding their producer state, at its next start (§11.4, §12.1)"))
        else:
            copy_file(clean_marker.path, os.path.join(tmp, clean_marker.name))
            sides.append(SideFile(clean_marker.name, "copied",
                                  "every converted file is complete and fsynced, its indexes as recovery builds them: "
                                  "the log dir is as cleanly shut down as SRC was (§11.4, §12.1)"))
    return results, sides


def _moved(path: str | None, tmp: str, dest: str) -> str | None:
    """``path`` (inside ``tmp``) as it is named once ``tmp`` is renamed to ``dest``."""
    if path is None or not _inside(path, tmp):
        return path
    rel = os.path.relpath(path, tmp)
    return dest if rel == "." else os.path.join(dest, rel)


def _rename_into_place(tmp: str, dest: str) -> None:
    """Rename the finished temp dir to DEST (module doc); refuse when DEST got filled meanwhile."""
    try:
        if not os.path.lexists(dest):
            try:
                exchange.rename_noreplace(tmp, dest)
                return
            except exchange.ExchangeUnavailable:
                pass  # not Linux, or a file system without the flag: rename still refuses a filled DEST
            except OSError as e:
                if e.errno != errno.EEXIST:
                    raise
                # DEST appeared meanwhile: an empty directory may still be replaced below
        os.rename(tmp, dest)
    except OSError as e:
        if e.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
            raise _refused("DEST was created and filled by someone else while this run built it; "
                           "nothing was written to it", dest) from None
        raise write_error(e, dest, "rename the finished temp dir to") from None


def convert_to_dest(plan: ConvertPlan, *, progress: Progress | None = None) -> ConvertReport:
    """Build DEST from ``plan`` (module doc): in a temp dir beside it, every file and directory
    fsynced, then renamed to DEST. DEST is checked again first (it may have changed since the
    plan); stale temp dirs of killed runs to the same DEST are removed. On any error the temp dir
    is removed and DEST left as it was."""
    if plan.dest is None:
        raise ValueError("convert_to_dest needs a plan with a DEST")
    dest = plan.dest
    _check_dest(dest)
    for stale in stale_temp_dirs(dest):
        _remove_tree(stale)
    tmp = temp_dir_for(dest)
    if os.path.lexists(tmp):
        _remove_tree(tmp)
    _make_dir(tmp)
    sides: list[SideFile] = []
    try:
        if plan.kind == "segment":
            results = _build_segment(plan, tmp, progress)
        elif plan.kind == "partition":
            partition = plan.partitions[0]
            results = [convert_partition_into(partition, tmp, plan.options, progress=progress)]
            _set_dir_mode(tmp, partition.path)
        else:
            results, sides = _build_log_dir(plan, tmp, progress)
            _set_dir_mode(tmp, plan.src)
        for r in results:
            r.dest = _moved(r.dest, tmp, dest)
            for s in r.segments:
                s.out_path = _moved(s.out_path, tmp, dest)
        fsync_dir(tmp)
        _rename_into_place(tmp, dest)
    except BaseException:
        _remove_tree(tmp)
        raise
    fsync_dir(os.path.dirname(os.path.abspath(dest)))
    loss = Loss()
    for r in results:
        loss.merge(r.loss)
    return ConvertReport(plan, results, loss, dest, sides)
