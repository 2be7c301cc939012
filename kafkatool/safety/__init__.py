"""The write-safety layer every command that writes goes through (spec §2.1, §11.5, §12.3).

A command plans (reads only), then applies through :func:`apply_locked`, which takes the
log dirs' locks and hands each partition dir to the command's apply function. That function
writes with the pieces here, and with nothing else:

* :mod:`~kafkatool.safety.lock` — :class:`LogDirLock` refuses to touch a log dir a live
  broker holds (a POSIX ``fcntl`` lock on ``<logdir>/.lock``, held for the whole write);
* :mod:`~kafkatool.safety.backup` — :class:`Backup` keeps every byte a command removes or
  replaces, outside the log dir, with a ``MANIFEST.json`` (:mod:`~kafkatool.safety.manifest`),
  a ``RESTORE.txt`` and a ``SHA256SUMS`` (:mod:`~kafkatool.safety.restore_script`);
  :class:`TruncateBackup` adds removed byte ranges and whole moved files;
* :mod:`~kafkatool.safety.exchange` — :func:`exchange_partition` builds the partition dir's
  new state beside it and switches the two in one ``renameat2(RENAME_EXCHANGE)``;
* :mod:`~kafkatool.safety.journal` — the fallback when the exchange cannot be used: temp
  files, one journal format (the commit point), renames, and :func:`roll_forward` to
  complete an interrupted one;
* :mod:`~kafkatool.safety.pending` — :func:`find_pending_state`: what interrupted runs left;
* :mod:`~kafkatool.safety.durable` — the errors, durable small writes and the crash-test
  hook :func:`fault_point` (every write step is one, so a test can SIGKILL a run at each).

``from kafkatool.safety import X`` works for every name of these modules' public surface.
No click and no rich here.
"""

from kafkatool.safety.durable import *  # noqa: F403
from kafkatool.safety.lock import *  # noqa: F403
from kafkatool.safety.manifest import *  # noqa: F403
from kafkatool.safety.restore_script import *  # noqa: F403
from kafkatool.safety.backup import *  # noqa: F403
from kafkatool.safety.exchange import *  # noqa: F403
from kafkatool.safety.journal import *  # noqa: F403
from kafkatool.safety.pending import *  # noqa: F403
from kafkatool.safety.apply import *  # noqa: F403

from kafkatool.safety import durable, lock, manifest, restore_script, backup, exchange, journal, pending, apply

__all__ = [
    *durable.__all__,
    *lock.__all__,
    *manifest.__all__,
    *restore_script.__all__,
    *backup.__all__,
    *exchange.__all__,
    *journal.__all__,
    *pending.__all__,
    *apply.__all__,
]
