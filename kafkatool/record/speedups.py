"""The optional compiled accelerator (``kafkatool.record._speedups``), loaded in one place.

Every module that has a compiled fast path asks :func:`functions` for it instead of importing
the extension itself, so one switch turns them all off: with ``KAFKATOOL_PURE=1`` in the
environment every module takes its pure-Python path, as on a machine where the extension did
not build (how CI runs the differential tests without it). The older name
``KAFKATOOL_PURE_PYTHON=1`` still works. ``kafkatool --version`` reports :func:`status`.
"""

from __future__ import annotations

import os
from types import ModuleType

import kafkatool.record.javautf8  # noqa: F401 - registers the UTF-8 error handler the text formatter decodes with

__all__ = ["ENV_VAR", "ENV_VARS", "switched_off_by", "load", "functions", "status"]

#: Set to a non-empty value other than ``0`` to ignore the compiled extension everywhere.
ENV_VAR = "KAFKATOOL_PURE"
#: Every name of the switch, the documented one first (``KAFKATOOL_PURE_PYTHON`` is its older name).
ENV_VARS = (ENV_VAR, "KAFKATOOL_PURE_PYTHON")

_UNSET = object()
_module: object = _UNSET
_reason = ""


def switched_off_by() -> str | None:
    """The environment variable that switches the extension off now (``KAFKATOOL_PURE`` first),
    or None: the process runs pure Python on purpose when this is not None."""
    for name in ENV_VARS:
        if os.environ.get(name, "").strip() not in ("", "0"):
            return name
    return None


def load() -> ModuleType | None:
    """The compiled module, or None when it is not built (or cannot load) or ``KAFKATOOL_PURE``
    is set. Decided once per process: later changes of the environment do not switch paths."""
    global _module, _reason
    if _module is _UNSET:
        switch = switched_off_by()
        if switch is not None:
            _module, _reason = None, f"disabled by {switch}={os.environ[switch]}"
        else:
            try:
                from kafkatool.record import _speedups  # type: ignore[attr-defined]
            except ImportError as e:  # not built (no compiler), or built for another Python
                _module, _reason = None, f"not built ({e})"
            else:
                _module, _reason = _speedups, "built"
    return _module  # type: ignore[return-value]


def functions(*names: str) -> tuple:
    """The compiled functions ``names``, in order; all None when the module is not in use or lacks
    any of them (a stale build), so a caller never mixes a compiled and a pure-Python half."""
    module = load()
    found = tuple(getattr(module, n, None) for n in names)
    if module is None or any(f is None for f in found):
        return (None,) * len(names)
    return found


def status() -> tuple[bool, str]:
    """``(in use, why)``: ``(True, "built")``, or False with what stopped it."""
    module = load()
    return module is not None, _reason
