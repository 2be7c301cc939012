"""A backup dir's ``MANIFEST.json`` (format 2): every file a command changed, how to get the
original back, and checksums (the entries :class:`~kafkatool.safety.backup.Backup` records and
``kafkatool restore`` reads)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from kafkatool.safety.durable import RepairError

__all__ = [
    "ACTIONS",
    "DIR_MODE",
    "MANIFEST",
    "MANIFEST_FORMAT",
    "RESTORE_SCRIPT",
    "SUMS",
    "BackupEntry",
    "FileState",
    "Manifest",
    "Piece",
    "mode_text",
    "parse_manifest",
    "read_manifest",
]


MANIFEST = "MANIFEST.json"
"""The backup's index: every file a command changed, how to get the original back, and checksums."""
RESTORE_SCRIPT = "RESTORE.txt"
"""A shell script (``sh -e RESTORE.txt``) that puts everything back without kafkatool."""
SUMS = "SHA256SUMS"
"""``sha256sum -c`` input for the originals, paths relative to the log dir."""
MANIFEST_FORMAT = 2
"""Format 2: whole-file sha256 of every original and result, paths relative to the log dir, owner and mode."""
DIR_MODE = 0o700
"""A backup holds a partition's records: only its owner may read it."""


def mode_text(mode: int) -> str:
    return f"{mode & 0o7777:04o}"


@dataclass(frozen=True, slots=True)
class FileState:
    """A file's bytes by size and whole-file sha256; for an original also its owner, mode and mtime."""

    size: int
    sha256: str
    mode: int | None = None
    uid: int | None = None
    gid: int | None = None
    mtime_ns: int | None = None

    @classmethod
    def of(cls, st: os.stat_result, sha256: str, size: int | None = None) -> "FileState":
        return cls(st.st_size if size is None else size, sha256, st.st_mode & 0o7777, st.st_uid, st.st_gid,
                   st.st_mtime_ns)

    def to_json(self) -> dict:
        obj: dict = {"size": self.size, "sha256": self.sha256}
        if self.mode is not None:
            obj.update(mode=mode_text(self.mode), uid=self.uid, gid=self.gid, mtimeNs=self.mtime_ns)
        return obj

    @classmethod
    def from_json(cls, obj: dict | None) -> "FileState | None":
        if obj is None:
            return None
        mode = obj.get("mode")
        state = cls(int(obj["size"]), _sha(obj["sha256"]), None if mode is None else int(str(mode), 8),
                    _opt_int(obj.get("uid")), _opt_int(obj.get("gid")), _opt_int(obj.get("mtimeNs"), negative=True))
        if state.size < 0 or (state.mode is not None and not 0 <= state.mode <= 0o7777):
            raise ValueError(f"a size {state.size} or mode {mode!r} out of range")
        return state


def _sha(value: object) -> str:
    text = str(value)
    if len(text) != 64 or any(c not in "0123456789abcdef" for c in text):
        raise ValueError(f"{text!r} is not a sha256")
    return text


def _opt_int(value: object, *, negative: bool = False) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or (value < 0 and not negative):
        raise ValueError(f"{value!r} is not a whole number" + ("" if negative else " >= 0"))
    return value


@dataclass(frozen=True, slots=True)
class Piece:
    """A removed byte range ``[start, end)`` of an original ``.log``, kept in the backup as ``file``."""

    start: int
    end: int
    file: str
    sha256: str
    reason: str = ""

    def to_json(self) -> dict:
        return {"start": self.start, "end": self.end, "file": self.file, "sha256": self.sha256, "reason": self.reason}

    @classmethod
    def from_json(cls, obj: dict) -> "Piece":
        return cls(int(obj["start"]), int(obj["end"]), _two_names(obj["file"]), _sha(obj["sha256"]),
                   str(obj.get("reason", "")))


ACTIONS = ("rewritten", "created", "removed", "moved", "cut")
"""What a command did to a file: ``rewritten`` (the original is kept whole as ``backupFile``),
``created`` (there was none), ``removed`` / ``moved`` (the original is ``backupFile``, nothing
is left in its place), ``cut`` (byte ranges removed from a ``.log``, kept as ``pieces``)."""


@dataclass
class BackupEntry:
    """One file a command changed: MANIFEST.json's ``files`` entry.

    ``path`` is relative to ``log_dir`` (the real log dir when the backup was taken), so a
    restore still works when the mount moved; ``original``/``result`` give the whole file's
    size and sha256 before and after (None: there was no file, or none is left).
    """

    action: str
    log_dir: str
    path: str
    reason: str = ""
    original: FileState | None = None
    result: FileState | None = None
    backup_file: str | None = None
    pieces: tuple[Piece, ...] = ()
    seq: int = 0
    run: str = ""
    tool: str = ""

    @property
    def original_path(self) -> str:
        return os.path.join(self.log_dir, self.path)

    def to_json(self) -> dict:
        obj = {
            "seq": self.seq, "run": self.run, "tool": self.tool, "action": self.action,
            "logDir": self.log_dir, "path": self.path, "originalPath": self.original_path, "reason": self.reason,
            "original": None if self.original is None else self.original.to_json(),
            "result": None if self.result is None else self.result.to_json(),
            "backupFile": self.backup_file,
        }
        if self.action == "cut":
            obj["pieces"] = [p.to_json() for p in self.pieces]
        return obj

    @classmethod
    def from_json(cls, obj: dict) -> "BackupEntry":
        """An entry of MANIFEST.json, checked: a restore writes where it says, so every path must
        stay where it belongs (``<partition dir>/<file>`` below the log dir and the backup dir)."""
        action = obj["action"]
        if action not in ACTIONS:
            raise ValueError(f"unknown action {action!r}")
        entry = cls(action, str(obj["logDir"]), _two_names(obj["path"]), str(obj.get("reason", "")),
                    FileState.from_json(obj.get("original")), FileState.from_json(obj.get("result")),
                    None if obj.get("backupFile") is None else _two_names(obj["backupFile"]),
                    tuple(Piece.from_json(p) for p in obj.get("pieces", ())),
                    int(obj["seq"]), str(obj.get("run", "")), str(obj.get("tool", "")))
        if not os.path.isabs(entry.log_dir):
            raise ValueError(f"logDir {entry.log_dir!r} is not absolute")
        if action == "cut":
            if entry.original is None or entry.result is None or not entry.pieces:
                raise ValueError(f"a cut of {entry.path} without its original, result or pieces")
            pos = removed = 0
            for piece in sorted(entry.pieces, key=lambda x: x.start):
                if piece.start < pos or piece.end <= piece.start or piece.end > entry.original.size:
                    raise ValueError(f"a piece [{piece.start}, {piece.end}) of {entry.path} out of order or range")
                pos = piece.end
                removed += piece.end - piece.start
            if entry.original.size - removed != entry.result.size:
                raise ValueError(f"the pieces of {entry.path} do not add up to its original size")
        return entry


def _two_names(value: object) -> str:
    """``dir/name``: exactly two plain names (no ``..``, no absolute path), as MANIFEST.json writes them."""
    text = str(value)
    parts = text.split(os.sep)
    if len(parts) != 2 or any(p in ("", ".", "..") or "\0" in p for p in parts):
        raise ValueError(f"the path {text!r} is not <directory>/<file>")
    return text


@dataclass(frozen=True, slots=True)
class Manifest:
    """A parsed MANIFEST.json: its runs and its entries in the order they were recorded."""

    root: str
    runs: tuple[dict, ...]
    entries: tuple[BackupEntry, ...]

    @property
    def log_dirs(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(e.log_dir for e in self.entries))


def parse_manifest(data: bytes, root: str) -> Manifest:
    """MANIFEST.json's bytes as a :class:`Manifest`; a :class:`RepairError` naming the file when it
    is not a format-2 kafkatool manifest."""
    path = os.path.join(root, MANIFEST)
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise RepairError(f"not valid JSON ({e}): a damaged backup?", path=path) from None
    if not isinstance(obj, dict) or "files" not in obj:
        raise RepairError("not a kafkatool MANIFEST.json", path=path)
    if obj.get("format") != MANIFEST_FORMAT:
        raise RepairError(
            f"written by an older kafkatool (format {obj.get('format', 1)}, this one reads {MANIFEST_FORMAT}); "
            "restore it with its RESTORE.txt (sh -e RESTORE.txt), and choose a new backup dir", path=path)
    try:
        entries = tuple(sorted((BackupEntry.from_json(e) for e in obj["files"]), key=lambda e: e.seq))
    except (KeyError, TypeError, ValueError) as e:
        raise RepairError(f"a malformed entry ({e!r})", path=path) from None
    return Manifest(root, tuple(obj.get("runs", ())), entries)


def read_manifest(backup_dir: str) -> Manifest:
    """Read ``<backup_dir>/MANIFEST.json`` (a symlink is not followed)."""
    root = os.path.abspath(backup_dir)
    path = os.path.join(root, MANIFEST)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise RepairError("no MANIFEST.json here: not a kafkatool backup dir, or a backup that "
                          "never got its first file", path=root) from None
    except OSError as e:
        raise RepairError(f"cannot read: {e.strerror}", path=path) from None
    with os.fdopen(fd, "rb") as f:
        return parse_manifest(f.read(), root)
