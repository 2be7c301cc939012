"""Does kafkatool need its own CRC-32C? The C loops with the extension's CRC against the same
loops calling the ``crc32c`` library's function once per batch (issue 10: drop the C CRC-32C
unless the library costs more than 5%).

Usage::

    python bench/bench_crc.py               # 32 MiB segments, best of 5 (well under a minute)
    python bench/bench_crc.py --mib 8 --runs 3

How: the package is copied to a scratch directory and its ``_speedups.c`` patched so that
every CRC-32C the C loops compute (``crc32c_update`` and the three-way ``crc32c_three``)
becomes a call of ``crc32c.crc32c(memoryview, value)`` through the Python C API, one call
per batch, exactly what the loops would do without their own CRC; the copy is built there.
Then, for the original build and the patched one in turn (each in its own process, so each
imports its own extension), on the ``none-16k`` (~16 KiB batches) and ``none-1rec`` (one
record per batch, ~400 bytes) segments of ``gen_segment.py``:

* ``walk``    ``_speedups.walk_v2`` over the whole segment in memory (the compiled window walk
  of dump and every other reader);
* ``verify``  ``kafkatool verify FILE`` run in-process through ``kafkatool.cli.main.main``
  (the compiled file scan; start-up not included).

Each is timed in CPU seconds of the process (the loops never wait: on a shared machine wall time
measures the neighbours), best of ``--runs``, the two builds alternating ``--rounds`` times.
The table gives seconds and the ratio library / own CRC: above 1.05 the library costs more than 5%.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path[:0] = [HERE, REPO]

import gen_segment as gen  # noqa: E402

VARIANTS = ("none-16k", "none-1rec")

#: Inserted into the scratch copy of _speedups.c right before walk_v2's section: from there
#: on, crc32c_update/crc32c_three name the library-calling versions.
LIBRARY_CRC = r"""
/* ---- bench_crc.py: every CRC-32C of the loops below through crc32c.crc32c ---- */
static PyObject *bench_library_crc32c = NULL;

static uint32_t
bench_library_update(uint32_t value, const uint8_t *p, size_t len)
{
    PyObject *args[2], *r;
    uint32_t out;
    if (bench_library_crc32c == NULL) {
        PyObject *m = PyImport_ImportModule("crc32c");
        if (m == NULL)
            Py_FatalError("bench_crc: no crc32c module");
        bench_library_crc32c = PyObject_GetAttrString(m, "crc32c");
        Py_DECREF(m);
    }
    args[0] = PyMemoryView_FromMemory((char *)p, (Py_ssize_t)len, PyBUF_READ);
    args[1] = PyLong_FromUnsignedLong(value);
    r = PyObject_Vectorcall(bench_library_crc32c, args, 2, NULL);
    if (r == NULL)
        Py_FatalError("bench_crc: crc32c.crc32c failed");
    out = (uint32_t)PyLong_AsUnsignedLong(r);
    Py_DECREF(args[0]);
    Py_DECREF(args[1]);
    Py_DECREF(r);
    return out;
}

static void
bench_library_three(const uint8_t *const p[3], const size_t len[3], uint32_t out[3])
{
    int i;
    for (i = 0; i < 3; i++)
        out[i] = bench_library_update(0, p[i], len[i]);
}
#define crc32c_update bench_library_update
#define crc32c_three bench_library_three
"""

#: The child: time one build's loops on one segment. argv: tree, segment, runs.
CHILD = r"""
import io, os, sys, time, contextlib
tree, seg, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
sys.path.insert(0, tree)
from kafkatool.record import speedups
from kafkatool.record.batch import Batch
from kafkatool.cli.main import main
module = speedups.load()
assert module is not None and module.__file__.startswith(tree), (module, tree)
walk_v2 = module.walk_v2
with open(seg, "rb") as f:
    data = f.read()

def walk():
    batches, nxt, status = walk_v2(data, 0, len(data), 0, Batch)
    assert nxt == len(data) and status == 0, (nxt, status)

def verify():
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        try:
            main(["verify", seg])
        except SystemExit as e:
            assert not e.code, out.getvalue()

for name, fn in (("walk", walk), ("verify", verify)):
    fn()  # warm
    times = []
    for _ in range(runs):
        t = time.process_time()  # CPU time: the machine may be shared, and these loops never wait
        fn()
        times.append(time.process_time() - t)
    print(name, min(times))
"""


def build_library_variant(scratch: str) -> str:
    """A copy of the package whose C loops call the crc32c library; built in place. Returns its tree."""
    tree = os.path.join(scratch, "library-crc")
    shutil.copytree(os.path.join(REPO, "kafkatool"), os.path.join(tree, "kafkatool"),
                    ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    shutil.copy(os.path.join(REPO, "setup.py"), tree)
    c_file = os.path.join(tree, "kafkatool", "record", "_speedups.c")
    with open(c_file, encoding="utf-8") as f:
        text = f.read()
    marker = re.search(r"^/\* =+ walk_v2 \*/$", text, re.M)
    if marker is None:
        raise SystemExit("bench_crc: no walk_v2 section in _speedups.c to patch before")
    text = text[: marker.start()] + LIBRARY_CRC + text[marker.start():]
    with open(c_file, "w", encoding="utf-8") as f:
        f.write(text)
    subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=tree, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return tree


def measure(tree: str, segment: str, runs: int) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if k not in ("KAFKATOOL_PURE", "KAFKATOOL_PURE_PYTHON", "PYTHONPATH")}
    out = subprocess.run([sys.executable, "-c", CHILD, tree, segment, str(runs)], env=env, cwd=tree,
                         capture_output=True, text=True, check=True).stdout
    return {name: float(value) for name, value in (line.split() for line in out.splitlines())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", type=int, default=32, help="segment size in MiB (default 32)")
    ap.add_argument("--runs", type=int, default=5, help="best of this many runs (default 5)")
    ap.add_argument("--rounds", type=int, default=2, help="times the two builds alternate (default 2)")
    ap.add_argument("--root", default=os.path.join(gen.DEFAULT_ROOT, "crc"))
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args(argv)

    segments = {v: gen.ensure_segment(args.root, gen.VARIANTS[v], args.mib, log=lambda *_: None) for v in VARIANTS}
    with tempfile.TemporaryDirectory(prefix="bench-crc-") as scratch:
        trees = {"own": REPO, "library": build_library_variant(scratch)}
        best: dict[tuple[str, str, str], float] = {}
        for _ in range(args.rounds):
            for variant, seg in segments.items():
                for build, tree in trees.items():
                    for loop, seconds in measure(tree, seg.path, args.runs).items():
                        key = (variant, loop, build)
                        best[key] = min(best.get(key, seconds), seconds)
    rows = []
    print(f"{'segment':<12} {'loop':<8} {'own CRC s':>10} {'library s':>10} {'library/own':>12}   (CPU seconds, best of {args.runs})")
    for variant, seg in segments.items():
        for loop in ("walk", "verify"):
            own, lib = best[(variant, loop, "own")], best[(variant, loop, "library")]
            rows.append({"segment": variant, "mib": args.mib, "batches": seg.batches, "loop": loop,
                         "own_s": own, "library_s": lib, "ratio": lib / own})
            print(f"{variant:<12} {loop:<8} {own:>10.4f} {lib:>10.4f} {lib / own:>12.3f}")
    worst = max(r["ratio"] for r in rows)
    verdict = "keep the C CRC-32C" if worst > 1.05 else "the library is within 5%: drop the C CRC-32C"
    print(f"worst ratio {worst:.3f}: {verdict}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
