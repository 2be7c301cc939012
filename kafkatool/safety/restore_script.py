"""``RESTORE.txt`` (a ``sh -e`` script that puts everything back without kafkatool) and
``SHA256SUMS`` (``sha256sum -c`` input for the originals), rendered from a manifest's entries."""

from __future__ import annotations

import os
import shlex
from typing import Sequence

from kafkatool.safety.manifest import SUMS, BackupEntry, mode_text

__all__ = [
    "render_restore_script",
    "render_sums",
]


# ----------------------------------------------------------------------------- RESTORE.txt and SHA256SUMS

_SPLICE = r"""
import hashlib, os, sys
def digest(path):
    h, n = hashlib.sha256(), 0
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b); n += len(b)
    return n, h.hexdigest()
a = sys.argv[1:]
target, orig, left, mtime = a[0], (int(a[1]), a[2]), (int(a[3]), a[4]), int(a[5])
pieces = [(int(a[i]), int(a[i + 1]), a[i + 2], a[i + 3]) for i in range(6, len(a), 4)]
now = digest(target)
if now == orig:
    print("already the original: " + target); sys.exit(0)
if now != left:
    sys.exit("refusing: %s is neither the original nor what kafkatool left (%d bytes, sha256 %s)" % (target, now[0], now[1]))
for start, end, piece, sha in pieces:
    if digest(piece) != (end - start, sha):
        sys.exit("refusing: the backup piece %s does not match its sha256" % piece)
tmp = target + ".kafkatool-tmp"
if os.path.lexists(tmp):
    os.unlink(tmp)
h = hashlib.sha256()
with open(target, "rb") as src, os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600), "wb") as out:
    def copy(f, n):
        while n is None or n > 0:
            b = f.read(1 << 20 if n is None else min(n, 1 << 20))
            if not b:
                if n is None: return
                sys.exit("refusing: %s ended early" % target)
            out.write(b); h.update(b)
            if n is not None: n -= len(b)
    pos = 0
    for start, end, piece, sha in pieces:
        copy(src, start - pos)
        with open(piece, "rb") as p:
            copy(p, None)
        pos = end
    copy(src, None)
    out.flush(); os.fsync(out.fileno())
if (os.path.getsize(tmp), h.hexdigest()) != orig:
    os.unlink(tmp); sys.exit("refusing: the spliced %s is not the original" % target)
os.utime(tmp, ns=(mtime, mtime))
os.replace(tmp, target)
d = os.open(os.path.dirname(target) or ".", os.O_RDONLY); os.fsync(d); os.close(d)
print("restored " + target)
"""

_SHELL_FUNCTIONS = r"""sum_of() {  # the sha256 of a file, or "absent"
  if [ -e "$1" ]; then sha256sum < "$1" | cut -c1-64; else echo absent; fi
}
put_back() {  # BACKUP_FILE TARGET ORIGINAL_SHA256 LEFT_SHA256 (what kafkatool left there, or "absent")
  now=$(sum_of "$2")
  if [ "$now" = "$3" ]; then echo "already the original: $2"; return 0; fi
  if [ "$now" != "$4" ]; then echo "refusing: $2 is neither the original nor what kafkatool left (sha256 $now)" >&2; exit 1; fi
  if [ "$(sum_of "$1")" != "$3" ]; then echo "refusing: the backup $1 does not match its sha256" >&2; exit 1; fi
  rm -f "$2.kafkatool-tmp"
  cp -p "$1" "$2.kafkatool-tmp"
  mv -f "$2.kafkatool-tmp" "$2"
  echo "restored $2"
}
settle() {  # DIR: refuse a journal an interrupted kafkatool run committed; remove its uncommitted temp files
  for j in "$1"/*.kafkatool-journal; do
    if [ -e "$j" ]; then echo "refusing: $j: an interrupted kafkatool run committed this journal; run its --execute again first" >&2; exit 1; fi
  done
  for t in "$1"/*.kafkatool-tmp; do
    if [ -e "$t" ]; then rm -f "$t"; echo "removed $t (left by an interrupted kafkatool run)"; fi
  done
}
drop() {  # TARGET CREATED_SHA256: remove a file kafkatool created
  now=$(sum_of "$1")
  if [ "$now" = absent ]; then return 0; fi
  if [ "$now" != "$2" ]; then echo "refusing: $1 is not the file kafkatool created (sha256 $now)" >&2; exit 1; fi
  rm -f "$1"
  echo "removed $1"
}
"""


def _comment(text: str) -> str:
    """A shell comment line: a newline or other control character in a name cannot end it."""
    return "".join("?" if ord(c) < 0x20 or ord(c) == 0x7F else c for c in text)


def _log_dir_vars(entries: Sequence[BackupEntry]) -> dict[str, str]:
    dirs = list(dict.fromkeys(e.log_dir for e in entries))
    if len(dirs) <= 1:
        return {d: "LOG_DIR" for d in dirs}
    return {d: f"LOG_DIR_{i}" for i, d in enumerate(dirs, 1)}


def render_restore_script(root: str, entries: Sequence[BackupEntry]) -> bytes:
    """RESTORE.txt: a ``sh -e`` script that undoes every entry, newest first, each step checking the
    sha256 of what it replaces and of what it puts back, then restores owner and mode. Bytes:
    non-UTF-8 names are written as they are on disk."""
    q = shlex.quote
    variables = _log_dir_vars(entries)
    lines = [
        "#!/bin/sh",
        "# Put back every file kafkatool changed (MANIFEST.json lists them). Stop the broker first.",
        "# Run it with:  sh -e RESTORE.txt    (it is safe to run twice; `kafkatool restore BACKUP_DIR` does the same)",
        "# Newest change first: each step checks the sha256 of the file it replaces and refuses a file",
        "# that is neither the original nor what kafkatool left; removed byte ranges are spliced back",
        "# into their .log by a short embedded Python program; owners and modes are restored.",
        "# (kafkatool restore checks every file before it writes any; this script checks each file",
        "# just before it writes it, so a refusal can leave earlier steps done: fix, then run it again.)",
        "# Moved mount or backup: LOG_DIR=/new/log/dir BACKUP=/new/backup/dir sh -e RESTORE.txt",
        "# Check the originals afterwards from the log dir:  cd \"$LOG_DIR\" && sha256sum -c \"$BACKUP/SHA256SUMS\"",
        "set -e",
        f"BACKUP=${{BACKUP:-{q(root)}}}",
        *(f"{var}=${{{var}:-{q(d)}}}" for d, var in variables.items()),
        "KAFKATOOL_SPLICE=" + q(_SPLICE.strip() + "\n"),
        _SHELL_FUNCTIONS.rstrip("\n"),
    ]
    for log_dir, part in dict.fromkeys((e.log_dir, os.path.dirname(e.path)) for e in entries):
        lines.append(f'settle "${variables[log_dir]}"/{q(part)}')
    for e in sorted(entries, key=lambda e: -e.seq):
        target = f'"${variables[e.log_dir]}"/{q(e.path)}'
        left = "absent" if e.result is None else e.result.sha256
        lines.append(_comment(f"# {e.seq}: {e.tool} {e.action} {e.path}" + (f" ({e.reason})" if e.reason else "")))
        if e.action == "created" or e.original is None:
            if e.result is not None:
                lines.append(f"drop {target} {left}")
            continue
        if e.action == "cut":
            assert e.result is not None
            args = " ".join(f'{p.start} {p.end} "$BACKUP"/{q(p.file)} {p.sha256}' for p in sorted(e.pieces, key=lambda p: p.start))
            lines.append(f'python3 -c "$KAFKATOOL_SPLICE" {target} {e.original.size} {e.original.sha256} '
                         f"{e.result.size} {e.result.sha256} {e.original.mtime_ns or 0} {args}")
        elif e.backup_file is not None:
            lines.append(f'put_back "$BACKUP"/{q(e.backup_file)} {target} {e.original.sha256} {left}')
        if e.original.uid is not None:
            lines.append(f"chown {e.original.uid}:{e.original.gid} {target}")
        if e.original.mode is not None:
            lines.append(f"chmod {mode_text(e.original.mode)} {target}")
    lines.append("sync")
    if len(variables) == 1:
        (var,) = variables.values()
        lines.append(f'(cd "${var}" && sha256sum --quiet -c "$BACKUP"/{SUMS}) && echo "the originals match {SUMS}"')
    return ("\n".join(lines) + "\n").encode("utf-8", "surrogateescape")


def _sums_line(sha256: str, name: str) -> str:
    """One line of ``sha256sum`` output: a name with a backslash or a newline is escaped and the
    line starts with a backslash (GNU coreutils)."""
    if "\\" in name or "\n" in name or "\r" in name:
        return "\\" + sha256 + "  " + name.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
    return f"{sha256}  {name}"


def render_sums(entries: Sequence[BackupEntry]) -> bytes:
    """SHA256SUMS of the originals (each path's state before the first recorded change), relative to
    the log dir (``cd LOG_DIR && sha256sum -c SHA256SUMS``); absolute when several log dirs share it."""
    first: dict[tuple[str, str], BackupEntry] = {}
    for e in sorted(entries, key=lambda e: e.seq):
        first.setdefault((e.log_dir, e.path), e)
    relative = len({e.log_dir for e in entries}) <= 1
    lines = []
    for (log_dir, path), e in sorted(first.items()):
        if e.original is None:
            continue
        lines.append(_sums_line(e.original.sha256, path if relative else os.path.join(log_dir, path)))
    return ("".join(line + "\n" for line in lines)).encode("utf-8", "surrogateescape")
