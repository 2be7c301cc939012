"""convert's compression pool: output entries compressed by threads come out in order, byte for
byte what a run without the pool writes, and an error stops the run with nothing left behind."""

from __future__ import annotations

import hashlib
import os
import random
from pathlib import Path

import pytest

from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from kafkatool.convert import segment as convert_segment_module
from kafkatool.convert.options import ConvertOptions
from kafkatool.convert.tree import convert_to_dest, plan_convert

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "logdir"


def _tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*")) if p.is_file()
    }


def _convert(src: Path, dest: Path, options: ConvertOptions) -> dict[str, str]:
    convert_to_dest(plan_convert(str(src), str(dest), options))
    return _tree(dest)


def _big_segment(directory: Path, batches: int = 300) -> Path:
    """A ~2.5 MiB v2 partition built with kafka-python (not kafkatool's encoder)."""
    part = directory / "big-0"
    part.mkdir(parents=True)
    rng = random.Random(7)
    out = bytearray()
    offset = 0
    for _ in range(batches):
        b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                      producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
        for i in range(20):
            value = bytes(rng.randrange(97, 123) for _ in range(rng.randrange(100, 700)))
            b.append(i, timestamp=1_700_000_000_000 + offset + i, key=b"k%d" % (offset + i), value=value, headers=[])
        raw = bytearray(b.build())
        raw[0:8] = offset.to_bytes(8, "big")  # base offset (outside the CRC)
        out += raw
        offset += 20
    (part / "00000000000000000000.log").write_bytes(bytes(out))
    return part


@pytest.fixture
def pooled(monkeypatch: pytest.MonkeyPatch):
    """Every segment, however small, converted with a pool of 3 threads and a window of 1."""
    monkeypatch.setattr(convert_segment_module, "POOL_MIN_BYTES", 0)
    monkeypatch.setattr(convert_segment_module, "compress_threads", lambda: 3)
    monkeypatch.setattr(convert_segment_module, "IN_FLIGHT_PER_THREAD", 1)


def _no_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(convert_segment_module, "compress_threads", lambda: 1)


@pytest.mark.parametrize(("magic", "codec"), [(2, 4), (2, 3), (1, 1), (0, 2), (2, None), (1, None)])
def test_the_pool_writes_what_a_run_without_it_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      magic: int, codec: int | None) -> None:
    options = ConvertOptions(magic=magic, codec=codec)
    src = tmp_path / "src"
    (src).mkdir()
    big = _big_segment(src)
    _no_pool(monkeypatch)
    want_fixtures = _convert(FIXTURES, tmp_path / "a", options if not (codec is None and magic < 2) else ConvertOptions(magic=magic, codec=1))
    want_big = _convert(big, tmp_path / "b", options)
    monkeypatch.undo()
    monkeypatch.setattr(convert_segment_module, "POOL_MIN_BYTES", 0)
    monkeypatch.setattr(convert_segment_module, "compress_threads", lambda: 3)
    monkeypatch.setattr(convert_segment_module, "IN_FLIGHT_PER_THREAD", 1)
    got_fixtures = _convert(FIXTURES, tmp_path / "c", options if not (codec is None and magic < 2) else ConvertOptions(magic=magic, codec=1))
    got_big = _convert(big, tmp_path / "d", options)
    assert got_fixtures == want_fixtures
    assert got_big == want_big
    # and the pooled output is what kafka-python reads: every offset once, in order
    data = (tmp_path / "d" / "00000000000000000000.log").read_bytes()
    records = MemoryRecords(data)
    offsets = []
    while records.has_next():
        offsets += [r.offset for r in records.next_batch()]
    assert offsets == list(range(300 * 20))


def test_the_pool_is_used_for_a_big_segment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A segment of POOL_MIN_BYTES or more is compressed by the pool (entries arrive as futures);
    one byte less is not."""
    big = _big_segment(tmp_path / "src")
    size = (big / "00000000000000000000.log").stat().st_size
    monkeypatch.setattr(convert_segment_module, "compress_threads", lambda: 2)
    seen: list[bool] = []
    real = convert_segment_module.ThreadPoolExecutor

    class Spy(real):  # type: ignore[misc, valid-type]
        def submit(self, *a, **k):
            seen.append(True)
            return super().submit(*a, **k)

    monkeypatch.setattr(convert_segment_module, "ThreadPoolExecutor", Spy)
    monkeypatch.setattr(convert_segment_module, "POOL_MIN_BYTES", size)
    _convert(big, tmp_path / "a", ConvertOptions(magic=2, codec=4))
    assert len(seen) == 300
    seen.clear()
    monkeypatch.setattr(convert_segment_module, "POOL_MIN_BYTES", size + 1)
    _convert(big, tmp_path / "b", ConvertOptions(magic=2, codec=4))
    assert seen == []


def test_a_compression_failure_in_the_pool_stops_the_run_and_leaves_no_dest(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pooled) -> None:
    from kafkatool.convert import rules
    from kafkatool.errors import CompressionError

    calls = {"n": 0}
    real = rules.compress

    def failing(codec, data, **kw):
        calls["n"] += 1
        if calls["n"] == 50:
            raise CompressionError("injected", kind="compression")
        return real(codec, data, **kw)

    monkeypatch.setattr(rules, "compress", failing)
    big = _big_segment(tmp_path / "src")
    with pytest.raises(CompressionError):
        _convert(big, tmp_path / "dest", ConvertOptions(magic=2, codec=4))
    assert not (tmp_path / "dest").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["src"]  # no temp dir left either
    assert os.listdir(tmp_path / "src" / "big-0") == ["00000000000000000000.log"]


@pytest.mark.parametrize(("jobs", "workers"), [("1", None), ("3", 3)])
def test_jobs_sets_the_pool_size_and_the_output_stays_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               jobs: str, workers: int | None) -> None:
    """``--jobs 1``: no pool at all (everything in the main thread); ``--jobs 3``: three
    compressing threads, whatever the CPUs; the files written are the same either way."""
    from click.testing import CliRunner

    from kafkatool.cli.main import cli

    big = _big_segment(tmp_path / "src")
    monkeypatch.setattr(convert_segment_module, "compress_threads", lambda: 2)
    made: list[int] = []
    real = convert_segment_module.ThreadPoolExecutor

    class Spy(real):  # type: ignore[misc, valid-type]
        def __init__(self, n, *a, **k):
            made.append(n)
            super().__init__(n, *a, **k)

    monkeypatch.setattr(convert_segment_module, "ThreadPoolExecutor", Spy)
    r = CliRunner().invoke(cli, ["convert", "--to-magic", "2", "--compression", "gzip", "--jobs", jobs, str(big),
                                 str(tmp_path / "out")], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert made == ([] if workers is None else [workers])
    default = CliRunner().invoke(cli, ["convert", "--to-magic", "2", "--compression", "gzip", str(big),
                                       str(tmp_path / "default")], catch_exceptions=False)
    assert default.exit_code == 0
    assert made[-1] == 2  # no --jobs: one per CPU (compress_threads)
    assert _tree(tmp_path / "out") == _tree(tmp_path / "default")


def test_jobs_zero_is_a_usage_error(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from kafkatool.cli.main import cli

    r = CliRunner().invoke(cli, ["convert", "--to-magic", "2", "--jobs", "0", str(FIXTURES / "v1-gzip-0"),
                                 str(tmp_path / "x")])
    assert r.exit_code == 2
    assert "--jobs" in r.output and not (tmp_path / "x").exists()
