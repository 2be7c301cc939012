"""Where the work runs: the compiled shallow scan (``_speedups.scan_fd``/``scan_v2``) driven
from Python, and a large segment split across forked processes (``--jobs``)."""

from __future__ import annotations

import os

from kafkatool.errors import KafkaToolError
from kafkatool.record.speedups import functions
from kafkatool.segment.logdir import Segment
from kafkatool.segment.walk import SCAN_BUFFER, CompiledScan, SegmentWalker, WalkStop
from kafkatool.verify.batches import PartitionFacts, Scanner, SegmentFacts
from kafkatool.verify.findings import Finding, FindingKind
from kafkatool.verify.options import throttle

__all__ = ["SPLIT_MIN_BYTES", "SCAN_BUFFER", "SCAN_BUDGET", "scan_fd", "scan_v2", "walk_segment", "scan_chunks"]

#: The compiled shallow scans (None: not built, or KAFKATOOL_PURE_PYTHON). Tests set
#: ``scan_v2`` to None to take the pure-Python path.
scan_fd, scan_v2 = functions("scan_fd", "scan_v2")

#: A segment at least this large is split across processes when ``VerifyOptions.workers`` > 1.
SPLIT_MIN_BYTES = 32 << 20

#: ``SCAN_BUFFER`` (from the walk): the compiled file scan's buffer, an entry larger than this
#: is walked in Python. ``SCAN_BUDGET``: the bytes it scans between two returns to Python
#: (progress, --max-rate).
SCAN_BUDGET = 64 << 20


def walk_segment(scan: Scanner, path: str, start: int, end: int) -> SegmentWalker:
    """Walk ``[start, end)`` of ``path`` through ``scan``; return the finished walker.

    The compiled scan when it is built (and the run is shallow), else the pure-Python walk.
    """
    if scan_v2 is None or scan.opts.deep:
        walker = SegmentWalker(path, start=start, end=end)
        with walker:
            scan.run(walker)
        return walker
    return _run_compiled(scan, path, start, end)


def _run_compiled(scan: Scanner, path: str, start: int, end: int) -> SegmentWalker:
    """:meth:`Scanner.run` with the healthy-batch path in C.

    ``_speedups.scan_fd`` reads the file itself (128 KiB preads, each scanned while it is
    still in the CPU cache) and applies the same predicate as :meth:`Scanner.run`'s fast
    path, updating ``scan.state`` in place; it returns any other batch, which is checked
    here by :meth:`Scanner.run`'s slow path between :meth:`Scanner.take` and
    :meth:`Scanner.share`. Where it stops for good (the end, a tail, a legacy or damaged
    entry, an entry larger than its buffer), the generic walk goes on, with
    ``_speedups.scan_v2`` over its windows, and its walker is returned.
    """
    st = scan.state
    st.want_positions, st.want_offsets = scan.facts.sorted_arrays()
    scan.share()
    on_bytes = scan.part.on_bytes
    rate = scan.opts.max_rate

    def progress(done: int) -> None:
        if on_bytes is not None:
            on_bytes(done - scan.reported)
            scan.reported = done

    def check(batch, data) -> None:
        scan.take()
        scan.run(((batch, data),), throttled=False)
        scan.share()

    pos = start
    if scan_fd is not None:
        def paced(before: int, after: int) -> None:
            if rate:  # bytes the scan moved past, slow batches included
                throttle(rate, after - before)
            progress(after)

        # pauses let the progress bar and --max-rate act; a rate paces in tenths of a second
        budget = max(1 << 20, int(rate) // 10) if rate else SCAN_BUDGET
        fast = CompiledScan(path, start, end, scan_fd, st, budget=budget, on_progress=paced, buffer_size=SCAN_BUFFER)
        try:
            for batch, data in fast:
                check(batch, data)
        finally:
            scan.take()
        pos = fast.position

    window = scan_v2

    def window_scan(buf, rel, lim, file_pos, batch_type):
        out = window(buf, rel, lim, file_pos, batch_type, st)
        if rate:  # bytes the walk moved past, slow batches included
            throttle(rate, out[1] - rel)
        progress(file_pos + out[1] - rel)
        return out

    walker = SegmentWalker(path, start=pos, end=end, window_scan=window_scan)
    try:
        with walker:
            for batch, data in walker:
                check(batch, data)
    finally:
        scan.take()
    return walker


def scan_chunks(scan: Scanner, size: int) -> int:
    """Check a large segment in ``opts.workers`` processes, one chunk each.

    The chunks are :meth:`Segment.split <kafkatool.segment.logdir.Segment.split>`'s cheap
    ranges (``exact=False``): each starts at a candidate batch start near an even share of
    the bytes (from the ``.index``, else the first batch with a valid CRC there). A chunk
    that does not end exactly where the next one starts (damage, or a candidate that was not
    a real batch start) stops the merge there: the caller walks on serially from the
    returned position, with full resynchronisation.
    """
    path, opts = scan.path, scan.opts
    workers = opts.workers
    segment = Segment.at(path, base_offset=0 if scan.base is None else scan.base)
    try:
        ranges = segment.split(workers, exact=False)
    except KafkaToolError:
        return 0  # not readable: the serial walk meets the same error and reports it
    # the file's size as this run saw it: a segment still being written may have grown since
    bounds = [start for start, _end in ranges if start < size] + [size]
    if len(bounds) < 3:
        return 0
    facts = scan.facts
    jobs = [
        (path, bounds[i], bounds[i + 1], scan.base, opts, facts.wanted_positions, facts.wanted_offsets)
        for i in range(len(bounds) - 1)
    ]
    # forked children take the later chunks; this process checks the first one meanwhile
    children = [_fork_worker(job) for job in jobs[1:]]
    results = [_chunk_worker(jobs[0]), *(_collect(child) for child in children)]
    part, findings, st = scan.part, scan.findings, scan.state
    for (_p, start, end, *_rest), r in zip(jobs, results):
        if not r["clean"]:
            return start
        if r["first_offset"] is not None and part.last_offset is not None and r["first_offset"] <= part.last_offset:
            findings.append(Finding(path, start, 8, FindingKind.OFFSET_NOT_MONOTONIC, f"first offset {r['first_offset']} is not above the previous batch's last offset {part.last_offset}", st.batches, r["first_offset"], r["first_last"], f"> {part.last_offset}", r["first_offset"]))
        base_index = len(findings)
        for f in r["findings"]:
            findings.append(f._replace(batch_index=None if f.batch_index is None else f.batch_index + st.batches))
        scan.bad_regions.extend((base_index + fi, st.good + gb) for fi, gb in r["bad_regions"])
        for lo, (p, local_max) in r["by_last_offset"].items():
            facts.by_last_offset[lo] = (p, max(local_max, st.max_ts))
        for o, (p, lo, local_max) in r["containing"].items():
            facts.containing[o] = (p, lo, max(local_max, st.max_ts))
        facts.at_position.update(r["at_position"])
        facts.abort_markers |= r["abort_markers"]
        for epoch, first in r["epochs"].items():
            part.epochs.setdefault(epoch, first)
        if facts.first_offset is None:
            facts.first_offset = r["first_offset"]
        if r["last_offset"] is not None:
            facts.last_offset = r["last_offset"]
            part.last_offset = r["last_offset"] if part.last_offset is None else max(part.last_offset, r["last_offset"])
        st.batches += r["batches"]
        st.good += r["good"]
        st.max_ts = max(st.max_ts, r["max_ts"])
        if part.on_bytes is not None:
            part.on_bytes(end - start)
        scan.reported = end
    return size


def _fork_worker(job) -> tuple[int, int]:
    """Run :func:`_chunk_worker` in a forked child; return ``(pid, read end of its pipe)``.

    A bare fork and a pipe: a process pool costs more than the chunk a child saves.
    """
    import pickle

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        code = 0
        try:
            os.close(r)
            try:
                payload = pickle.dumps(("ok", _chunk_worker(job)), protocol=pickle.HIGHEST_PROTOCOL)
            except BaseException as e:  # noqa: BLE001 - reported to the parent
                payload = pickle.dumps(("error", f"{type(e).__name__}: {e}"))
                code = 1
            with os.fdopen(w, "wb") as f:
                f.write(payload)
        finally:
            os._exit(code)
    os.close(w)
    return pid, r


def _collect(child: tuple[int, int]) -> dict:
    """The result a :func:`_fork_worker` child sent; an unclean one if it failed."""
    import pickle

    pid, r = child
    with os.fdopen(r, "rb") as f:
        data = f.read()
    os.waitpid(pid, 0)
    try:
        status, result = pickle.loads(data)
    except Exception:  # noqa: BLE001 - a child that died: walk that chunk serially instead
        return {"clean": False}
    return result if status == "ok" else {"clean": False}


def _chunk_worker(job) -> dict:
    path, start, end, base, opts, wanted_positions, wanted_offsets = job
    part = PartitionFacts()
    facts = SegmentFacts(
        base or 0, os.path.getsize(path), wanted_positions=wanted_positions, wanted_offsets=wanted_offsets,
        wanted_sorted=sorted(wanted_offsets),
    )
    findings: list[Finding] = []
    scan = Scanner(path, base, opts, part, facts, findings)
    walker = walk_segment(scan, path, start, end)
    return {
        "clean": walker.stop is WalkStop.END and walker.position == end,
        "findings": findings,
        "bad_regions": scan.bad_regions,
        "batches": scan.state.batches,
        "good": scan.state.good,
        "max_ts": scan.state.max_ts,
        "at_position": facts.at_position,
        "by_last_offset": facts.by_last_offset,
        "abort_markers": facts.abort_markers,
        "epochs": part.epochs,
        "first_offset": facts.first_offset,
        "first_last": facts.first_last,
        "last_offset": facts.last_offset,
        "containing": facts.containing,
    }
