"""``convert --in-place``: a partition dir rewritten at another message format or codec, switched
whole (spec §13, §2.1, §12.3).

Plan, then apply (STYLE.md), as ``reindex`` and ``truncate`` do. :func:`plan_in_place` only reads:
one :class:`InPlacePlan` per partition dir, with the files the new state replaces or removes,
the loss analysis (the dry pass of :func:`kafkatool.convert.tree.analyze`), and why it is
refused when it is: pending state of another command or of the broker (journals, temp files,
``.swap``/``.cleaned``/``.deleted`` files), a ``-delete``/``-future``/``-stray`` dir, a file
that is not a regular file (a symlink named like a segment, a FIFO: never opened, never
followed) or that no Kafka partition holds (never deleted), no whole-dir exchange. A partition
whose every batch is at the target magic and codec already plans no change (a second run is a
no-op).

:func:`apply_in_place` goes through :func:`kafkatool.safety.apply_locked` (every log dir's lock,
symlinks resolved, taken before the first write). Per partition dir, under the lock: the plan
is checked against the disk (nothing changed since, no pending state appeared), then one
:func:`~kafkatool.safety.exchange_partition` whose ``build`` callback converts the partition
straight into the staging dir (:func:`kafkatool.convert.tree.convert_partition_into`, each new
file with the owner and mode of the file it replaces), ``verify --deep`` checks every new
``.log`` there, the backup keeps every old file whole (the staging dir's files hashed for the
manifest), and ``RENAME_EXCHANGE`` switches the two dirs. A SIGKILL anywhere leaves the
partition dir exactly old or exactly new (a leftover staging dir the next run removes).
After the switch every file of the partition dir is hashed again and compared with what was
built and verified.

Without the exchange (not Linux, a file system that refuses ``RENAME_EXCHANGE``,
``$KAFKATOOL_NO_EXCHANGE``), a partition is refused (``no_exchange``), not journaled: the
journal renames one file at a time, so a crash between two renames would leave a partition
holding segments of two formats, and it holds new files whole in memory; ``convert SRC DEST``
works everywhere.

No click and no rich here.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from typing import Callable, Sequence

from kafkatool.convert.options import ConvertOptions, Loss
from kafkatool.errors import InvalidRecordError, KafkaToolError
from kafkatool.record.compression import codec_name
from kafkatool.safety import (
    Backup,
    ExchangeUnavailable,
    FileState,
    PartitionRefused,
    RepairError,
    apply_locked,
    exchange_partition,
    exchange_unavailable,
    fault_point,
    find_pending_state,
    hash_file,
    is_staging_dir,
    naming,
    remove_staging_dirs,
    take_owner,
)
from kafkatool.segment import files as names
from kafkatool.segment.walk import SegmentWalker, WalkStop

__all__ = [
    "OldFile",
    "InPlacePlan",
    "InPlaceReport",
    "CONVERTED_KINDS",
    "METADATA_TOPIC",
    "plan_in_place",
    "plan_partition_in_place",
    "apply_in_place",
    "apply_partition_in_place",
]


CONVERTED_KINDS = frozenset({
    names.FileKind.LOG, names.FileKind.INDEX, names.FileKind.TIMEINDEX, names.FileKind.TXNINDEX,
    names.FileKind.PRODUCER_SNAPSHOT, names.FileKind.LEADER_EPOCH_CHECKPOINT, names.FileKind.PARTITION_METADATA,
})
"""The files of a partition dir that ``convert --in-place`` rewrites, carries over or drops; a
partition dir holding anything else is refused (nothing unknown is ever deleted)."""

_KAFKA_PENDING = frozenset({names.FileKind.DELETED, names.FileKind.CLEANED, names.FileKind.SWAP})
_METADATA_KINDS = frozenset({names.FileKind.CHECKPOINT_SNAPSHOT, names.FileKind.QUORUM_STATE})
METADATA_TOPIC = names.METADATA_TOPIC
"""The KRaft metadata log's topic (:data:`kafkatool.segment.files.METADATA_TOPIC`): converted at magic 2 only (its snapshots and quorum state carried over)."""


def _kinds(partition_dir: str) -> frozenset:
    """The file kinds the partition dir may hold: :data:`CONVERTED_KINDS`, and in the metadata
    log its KRaft snapshots and quorum state too."""
    pd = names.parse_partition_dir(os.path.basename(partition_dir))
    return CONVERTED_KINDS | _METADATA_KINDS if pd is not None and pd.topic == METADATA_TOPIC else CONVERTED_KINDS


@dataclass(frozen=True, slots=True)
class OldFile:
    """A file of the partition dir as planned (its identity, checked again under the lock)."""

    name: str
    size: int
    mtime_ns: int
    ino: int


@dataclass(frozen=True, slots=True)
class InPlacePlan:
    """What :func:`apply_in_place` would do to one partition dir. Pure data; nothing is written."""

    src: str
    """The path as given (a partition dir, or the log dir it was found in joined with its name)."""
    partition_dir: str
    """Its real path (symlinks resolved): the dir that is switched."""
    options: ConvertOptions
    files: tuple[OldFile, ...] = ()
    """Every file of the partition dir: the new state replaces or removes each one (a backup keeps it)."""
    segments: int = 0
    bytes_in: int = 0
    """Bytes of the ``.log`` files."""
    loss: Loss | None = None
    """The dry pass's loss analysis (None when nothing needs converting or the plan is refused)."""
    already: bool = False
    """Every batch is at the target magic and codec already: nothing to convert."""
    staging_leftovers: tuple[str, ...] = ()
    """The staging dir an interrupted kafkatool run left beside the partition dir (removed by apply)."""
    refused: str | None = None
    """Why nothing of this partition may be written."""
    refused_kind: str | None = None
    """``missing``, ``not_a_partition``, ``transitional``, ``pending``, ``pending_kafka``,
    ``not_regular``, ``unknown_file``, ``metadata``, ``no_exchange``, ``unreadable``, ``damaged``,
    ``refused`` (the conversion itself: zstd below v2) or ``strict``, with :attr:`refused`."""

    @property
    def converts(self) -> bool:
        """Whether apply rewrites the partition (not refused, not converted already)."""
        return self.refused is None and not self.already

    @property
    def needs_changes(self) -> bool:
        """Whether apply writes anything: a conversion, or a leftover staging dir to remove."""
        return self.refused is None and (not self.already or bool(self.staging_leftovers))


@dataclass(frozen=True, slots=True)
class InPlaceReport:
    """What :func:`apply_partition_in_place` did to one partition dir, after re-verifying it."""

    plan: InPlacePlan
    written: tuple[str, ...] = ()
    """The names of the new state (every file of the partition dir now)."""
    removed: tuple[str, ...] = ()
    """Old names absent from the new state (each kept in the backup)."""
    removed_leftovers: tuple[str, ...] = ()
    backup_dir: str | None = None
    method: str | None = None
    """``exchange``, or None (nothing converted)."""
    verified: bool = False
    result: object | None = field(default=None, repr=False)
    """The converter's :class:`~kafkatool.convert.tree.PartitionResult` (losses, side files)."""


# ----------------------------------------------------------------------------- the converter (helper B's tree.py)


def _analyze(partition_dir: str, options: ConvertOptions) -> Loss:
    """The dry pass over one partition dir: exactly the losses a real conversion has."""
    from kafkatool.convert.tree import analyze, plan_convert

    return analyze(plan_convert(partition_dir, None, options))


def _convert_into(partition_dir: str, out_dir: str, options: ConvertOptions) -> object:
    """Write the whole converted partition into the empty ``out_dir`` (the staging dir)."""
    from kafkatool.convert.tree import convert_partition_into
    from kafkatool.segment.logdir import Partition

    return convert_partition_into(Partition(partition_dir), out_dir, options, like_owner=True)


# ----------------------------------------------------------------------------- planning


def plan_in_place(srcs: Sequence[str], options: ConvertOptions, *, allow_transitional: bool = False,
                  on_plan: Callable[[InPlacePlan], None] | None = None) -> list[InPlacePlan]:
    """One plan per partition dir of ``srcs`` (partition dirs, or log dirs: each partition in
    them, kafkatool's staging dirs left out). Reads only; a partition that cannot be planned
    gives a refused plan and the others go on."""
    plans: list[InPlacePlan] = []
    seen: set[str] = set()
    for src in srcs:
        for pd in _partition_dirs(src, options):
            if isinstance(pd, InPlacePlan):
                plan = pd
            else:
                real = os.path.realpath(pd)
                if real in seen:
                    continue
                seen.add(real)
                plan = plan_partition_in_place(pd, options, allow_transitional=allow_transitional)
            plans.append(plan)
            if on_plan is not None:
                on_plan(plan)
    return plans


def _partition_dirs(src: str, options: ConvertOptions) -> list[str | InPlacePlan]:
    """The partition dirs ``src`` names: itself, or the ``<topic>-<partition>`` dirs of a log dir."""
    if not os.path.lexists(src):
        return [InPlacePlan(src, os.path.abspath(src), options, refused="no such file or directory",
                            refused_kind="missing")]
    if not os.path.isdir(src):
        return [InPlacePlan(src, os.path.abspath(src), options, refused_kind="not_a_partition",
                            refused="--in-place converts partition dirs and log dirs; convert one segment to a "
                                    "new directory instead (kafkatool convert SEGMENT DEST)")]
    try:
        with os.scandir(src) as it:
            subdirs = sorted(e.name for e in it if e.is_dir() and names.parse_partition_dir(e.name) is not None)
    except OSError as e:
        return [InPlacePlan(src, os.path.abspath(src), options, refused=f"cannot list: {e.strerror}",
                            refused_kind="unreadable")]
    if subdirs:  # a log dir (a partition dir holds no directories)
        return [os.path.join(src, n) for n in subdirs if not is_staging_dir(os.path.join(src, n))]
    if names.parse_partition_dir(os.path.basename(os.path.abspath(src))) is None:
        return [InPlacePlan(src, os.path.abspath(src), options, refused_kind="not_a_partition",
                            refused="neither a partition dir (<topic>-<partition>) nor a log dir holding one")]
    return [src]


def _refused(src: str, real: str, options: ConvertOptions, kind: str, why: str, **kw) -> InPlacePlan:
    return InPlacePlan(src, real, options, refused=why, refused_kind=kind, **kw)


def _pending_refusal(pending: Sequence[tuple[str, str]]) -> tuple[str, str] | None:
    """``(path, why)`` of pending state that forbids a conversion (a staging dir does not)."""
    for p, what in pending:
        if not what.startswith("staging dir"):
            return p, what
    return None


def _listing(partition_dir: str) -> list[tuple[str, os.stat_result]]:
    out = []
    with os.scandir(partition_dir) as it:
        for entry in it:
            out.append((entry.name, entry.stat(follow_symlinks=False)))
    return sorted(out)


def _file_refusal(name: str, st: os.stat_result, kinds: frozenset = CONVERTED_KINDS) -> tuple[str, str] | None:
    """Why one entry of the partition dir forbids the conversion: ``(kind, why)``, or None."""
    if not stat.S_ISREG(st.st_mode):
        what = ("a symbolic link" if stat.S_ISLNK(st.st_mode) else "a directory" if stat.S_ISDIR(st.st_mode)
                else "a FIFO" if stat.S_ISFIFO(st.st_mode) else "not a regular file")
        return "not_regular", f"{name!r} is {what}: convert reads and replaces regular files only (never followed)"
    kind = names.classify(name)
    if kind in _KAFKA_PENDING:
        return "pending_kafka", (f"{name!r} is the broker's unfinished work (a segment being deleted, cleaned or "
                                 "swapped in); start the broker once so that it completes it, then convert")
    if kind not in kinds:
        return "unknown_file", (f"{name!r} is not a file of a Kafka partition: convert --in-place never removes "
                                "what it does not know; move it out of the partition dir first")
    return None


def plan_partition_in_place(partition_dir: str, options: ConvertOptions, *,
                            allow_transitional: bool = False) -> InPlacePlan:
    """Plan the conversion of one partition dir (module doc). Reads only."""
    src = partition_dir
    real = os.path.realpath(partition_dir)
    if not os.path.isdir(real):
        return _refused(src, real, options, "missing", "not a directory")
    pd = names.parse_partition_dir(os.path.basename(real))
    if pd is None:
        return _refused(src, real, options, "not_a_partition", "not a partition dir (<topic>-<partition>)")
    if pd.state is not None and not allow_transitional:
        return _refused(src, real, options, "transitional",
                        f"partition dir is marked '-{pd.state}' (being deleted, moved or stray); "
                        "pass --allow-transitional to convert it anyway")
    if pd.topic == METADATA_TOPIC and options.magic < 2:
        return _refused(src, real, options, "metadata", "the KRaft metadata log (__cluster_metadata) is not "
                        "converted below magic 2: the raft layer reads record batches only")
    pending = find_pending_state(real)
    staging = tuple(p for p, what in pending if what.startswith("staging dir"))
    found = _pending_refusal(pending)
    if found is not None:
        return _refused(src, real, options, "pending",
                        f"{os.path.basename(found[0])}: {found[1]}; convert never removes another run's pending "
                        "state: finish that run first", staging_leftovers=staging)
    try:
        listing = _listing(real)
    except OSError as e:
        return _refused(src, real, options, "unreadable", f"cannot list: {e.strerror}")
    for name, st in listing:
        why = _file_refusal(name, st, _kinds(real))
        if why is not None:
            return _refused(src, real, options, why[0], why[1], staging_leftovers=staging)
    files = tuple(OldFile(n, st.st_size, st.st_mtime_ns, st.st_ino) for n, st in listing)
    logs = [n for n, _st in listing if names.classify(n) is names.FileKind.LOG]
    bytes_in = sum(st.st_size for n, st in listing if n in logs)
    base = dict(files=files, segments=len(logs), bytes_in=bytes_in, staging_leftovers=staging)
    try:
        already = all(_at_target(os.path.join(real, n), options) for n in logs)
    except OSError as e:
        return _refused(src, real, options, "unreadable", f"cannot read {e.filename or real}: {e.strerror}", **base)
    loss = None
    if not already or options.drop_aborted:
        try:
            loss = _analyze(real, options)
        except OSError as e:
            return _refused(src, real, options, "unreadable", f"cannot read {e.filename or real}: {e.strerror}", **base)
        except KafkaToolError as e:
            kind = "refused" if getattr(e, "kind", None) == "refused" else "damaged"
            return _refused(src, real, options, kind, str(e), **base)
        if already and not loss.aborted_records_dropped:
            loss = None  # --drop-aborted with nothing to drop: still converted already
        else:
            already = False
    if loss is not None and options.strict and loss.any():
        return _refused(src, real, options, "strict", "--strict: the conversion would lose "
                        + "; ".join(loss.lines()), loss=loss, **base)
    if not already:
        why = exchange_unavailable(real)
        if why is not None:
            return _refused(src, real, options, "no_exchange", _no_exchange_text(why), loss=loss, **base)
    return InPlacePlan(src, real, options, loss=loss, already=already, **base)


def _no_exchange_text(why: str) -> str:
    return (f"the whole-dir exchange is not available here ({why}): --in-place switches a partition's "
            "every segment at once or not at all, and without renameat2(RENAME_EXCHANGE) it cannot; "
            "convert to a new directory (kafkatool convert SRC DEST) and swap the dirs while the broker is stopped")


def _at_target(log_path: str, options: ConvertOptions) -> bool:
    """Whether every entry of the ``.log`` is an intact batch at the target magic and codec (a
    control batch, which stays uncompressed, at the magic only). Reads headers and CRCs only;
    a symlink or a FIFO is never opened (the caller refused them, and O_NOFOLLOW holds it)."""
    fd = os.open(log_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb", buffering=0) as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        with SegmentWalker(f, path=log_path) as walker:
            for batch, _data in walker:
                if batch.magic != options.magic or batch.crc != batch.computed_crc:
                    return False
                if options.codec is not None and batch.codec != options.codec and not batch.is_control:
                    return False
            return walker.stop is WalkStop.END


# ----------------------------------------------------------------------------- apply


def apply_in_place(plans: Sequence[InPlacePlan], backup_dir: Callable[[str], str] | str,
                   **options) -> list[InPlaceReport]:
    """Apply the plans that need changes through :func:`~kafkatool.safety.apply_locked` (``force``,
    ``allow_transitional``, ``on_report``, ``on_start``, ``on_refused``); refused plans are left out.
    An ``OSError`` on the way (a read-only ``.lock``, a full disk) is a :class:`RepairError` naming its file."""
    todo = [p for p in plans if p.refused is None]
    try:
        return apply_locked(todo, backup_dir, apply_partition_in_place, Backup, **options)
    except KafkaToolError:
        raise
    except OSError as e:
        raise RepairError(f"cannot write: {e.strerror or e}", path=e.filename or (todo[0].partition_dir if todo else None)) from None


def _codec_text(codec: int | None) -> str:
    if codec is None:
        return "each batch's codec"
    try:
        return codec_name(codec)
    except InvalidRecordError:
        return f"codec {codec}"


def _check_unchanged(plan: InPlacePlan) -> None:
    """The plan was made before the lock was taken: the partition dir must hold the same files."""
    try:
        now = _listing(plan.partition_dir)
    except OSError as e:
        raise PartitionRefused(f"cannot list: {e.strerror}", path=plan.partition_dir) from None
    for name, st in now:
        why = _file_refusal(name, st, _kinds(plan.partition_dir))
        if why is not None:
            raise PartitionRefused(why[1], path=os.path.join(plan.partition_dir, name), kind=why[0])
    planned = {f.name: f for f in plan.files}
    if set(planned) != {n for n, _st in now}:
        extra = sorted({n for n, _st in now} - set(planned)) or sorted(set(planned) - {n for n, _st in now})
        raise PartitionRefused(f"the partition dir changed since it was planned ({extra[0]!r} appeared or went "
                               "away: a broker ran?); run again", path=plan.partition_dir)
    for name, st in now:
        f = planned[name]
        if (f.size, f.mtime_ns, f.ino) != (st.st_size, st.st_mtime_ns, st.st_ino):
            raise PartitionRefused("the file changed since it was planned (a broker appended?); run again",
                                   path=os.path.join(plan.partition_dir, name))


def _save(backup: Backup, path: str, new: tuple[int, str] | None, reason: str) -> None:
    """Keep ``path`` whole in the backup (or record it as created), its result being the new
    file of ``new`` = ``(size, sha256)`` (None: removed); the new file is never read again."""
    backup.save(path, None, reason, result=None if new is None else FileState(*new))


def _like_old(path: str, like: os.stat_result) -> None:
    """Give a new file the owner (when permitted) and mode of the file it replaces, whatever the
    converter did: a broker running as another user must still open it writable."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            take_owner(fd, like, path, times=False)
    finally:
        os.close(fd)


def _verify_logs(directory: str, logs: Sequence[str]) -> None:
    """``verify --deep`` on the new segments (each ``.log`` with its index files); any finding that
    fails a verify run is a :class:`RepairError`."""
    from kafkatool.verify import INFO_KINDS, Finding, VerifyOptions, verify_paths

    targets = []
    for n in logs:
        p = os.path.join(directory, n)
        targets.append(p)
        targets += [names.sibling(p, s) for s in (".index", ".timeindex", ".txnindex")
                    if os.path.lexists(names.sibling(p, s))]
    if not targets:
        return
    for f in verify_paths(targets, VerifyOptions(deep=True)):
        if isinstance(f, Finding) and f.kind not in INFO_KINDS:
            raise RepairError(f"the converted segment fails verify --deep ({f.kind}: {f.message}); nothing changed",
                              path=f.file, position=f.position)


def apply_partition_in_place(plans: Sequence[InPlacePlan], backup: Backup | str) -> list[InPlaceReport]:
    """Convert one partition dir in place (module doc); the caller holds its log dir's lock.

    Raises :class:`PartitionRefused`, before anything is written, when the partition changed
    since it was planned, pending state appeared, or the exchange is not available;
    :class:`RepairError` when a new segment fails ``verify --deep`` (before the switch: nothing
    changed) or the partition dir is not what was built afterwards.
    """
    if isinstance(backup, str):
        backup = Backup(backup)
    plans = [p for p in plans if p.refused is None]
    if not plans:
        return []
    if len(plans) != 1:
        raise RepairError("apply_partition_in_place takes one plan per partition dir", path=plans[0].partition_dir)
    plan = plans[0]
    directory = plan.partition_dir
    pending = find_pending_state(directory)
    found = _pending_refusal(pending)
    if found is not None:
        raise PartitionRefused(f"{os.path.basename(found[0])}: {found[1]}; convert never removes another run's "
                               "pending state: finish that run first", path=found[0], kind="pending")
    # a staging dir of an interrupted run first (whatever the plan saw): the exchange needs its name
    removed_leftovers = tuple(remove_staging_dirs(p for p, what in pending if what.startswith("staging dir")))
    if plan.already:
        return [InPlaceReport(plan, removed_leftovers=removed_leftovers, verified=True)]
    _check_unchanged(plan)
    why = exchange_unavailable(directory)
    if why is not None:
        raise PartitionRefused(_no_exchange_text(why), path=directory, kind="no_exchange")
    options = plan.options
    reason = f"convert --in-place (magic {options.magic}, {_codec_text(options.codec)})"
    old_names = [f.name for f in plan.files]
    olds = {n: st for n, st in _listing(directory)}
    dir_stat = os.stat(directory)
    some = next((st for n, st in olds.items() if n.endswith(".log")),
                os.stat_result((dir_stat.st_mode & ~0o111, *tuple(dir_stat)[1:])))
    state: dict = {}

    def build(staging: str) -> list[str]:
        state["staging"] = staging
        state["result"] = _convert_into(directory, staging, options)
        built = sorted(os.listdir(staging))
        for n in built:
            kind = names.classify(n)
            if kind not in _kinds(directory):
                raise RepairError(f"the converter wrote {n!r}, which is not a file of a partition; nothing changed",
                                  path=os.path.join(staging, n))
            _like_old(os.path.join(staging, n), olds.get(n) or olds.get(names.sibling(n, ".log")) or some)
        state["built"] = built
        return built

    def before_switch() -> None:
        staging, built = state["staging"], state["built"]
        _verify_logs(staging, [n for n in built if names.classify(n) is names.FileKind.LOG])
        fault_point("after verify")
        hashes = {}
        for n in built:
            with naming(os.path.join(staging, n)):
                hashes[n] = hash_file(os.path.join(staging, n))
        with backup.batch():  # one manifest write for the partition, before the switch
            for n in sorted(set(old_names) | set(built)):
                path = os.path.join(directory, n)
                with naming(backup.root, f"while copying {path} into the backup"):
                    _save(backup, path, hashes.get(n), reason)
                fault_point("after backup")
        state["hashes"] = hashes  # the backup is complete: the switch may come

    try:
        exchange_partition(directory, build=build, keep_unbuilt=False, before_switch=before_switch)
    except ExchangeUnavailable as e:
        raise PartitionRefused(_no_exchange_text(e.message), path=directory, kind="no_exchange") from None
    except KafkaToolError:
        raise
    except OSError as e:  # the exchange's own RepairErrors say where things stand; a bare OSError does not
        if "hashes" not in state:  # before the backup was complete, so before the switch
            raise RepairError(f"cannot write: {e.strerror or e}; nothing changed: the partition dir is the old state",
                              path=e.filename or directory) from None
        raise RepairError(f"{e.strerror or e} after the backup (the partition dir is the old or the new state, whole; "
                          f"the backup {backup.root} holds the old one); run again to finish",
                          path=e.filename or directory) from None
    built, hashes = state["built"], state["hashes"]
    # re-verify: the partition dir is, name for name and byte for byte, what was built and verified
    now = sorted(os.listdir(directory))
    if now != built:
        extra = sorted(set(now) ^ set(built))
        raise RepairError(f"re-verification failed: the partition dir's files are not the converted ones "
                          f"({extra[0]!r})", path=directory)
    for n in built:
        got = hash_file(os.path.join(directory, n))
        if got != hashes[n]:
            raise RepairError("re-verification failed: the file on disk is not what was written",
                              path=os.path.join(directory, n),
                              expected=f"{hashes[n][0]} bytes sha256 {hashes[n][1][:16]}",
                              found=f"{got[0]} bytes sha256 {got[1][:16]}")
    removed = tuple(n for n in old_names if n not in built)
    return [InPlaceReport(plan, tuple(built), removed, removed_leftovers, backup.root, "exchange", True,
                          state.get("result"))]
