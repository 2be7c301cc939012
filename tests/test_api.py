"""The public Python API: ``import kafkatool`` (issue 10, item 7).

The README's "Use from Python" example is run verbatim and its output checked against the text
block under it, and against kafka-python's reading of the same segment; the package import loads
nothing but itself; every exported name resolves, is documented, and is what type checkers see.
"""

from __future__ import annotations

import ast
import contextlib
import io
import os
import re
import subprocess
import sys

import pytest
from kafka.record.memory_records import MemoryRecords

import kafkatool
from conftest import FIXTURES, REPO

README = (REPO / "README.md").read_text(encoding="utf-8")


def readme_section() -> str:
    return README.split("\n## Use from Python\n", 1)[1].split("\n## ", 1)[0]


def readme_blocks(kind: str) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", readme_section(), re.S)


def run_readme_example() -> str:
    (code,) = readme_blocks("python")
    out = io.StringIO()
    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(code, "README.md", "exec"), {"__name__": "__readme__"})
    finally:
        os.chdir(cwd)
    return out.getvalue()


def test_readme_example_runs_and_prints_what_the_readme_says():
    (expected,) = readme_blocks("text")
    assert run_readme_example() == expected


def test_readme_example_output_agrees_with_kafka_python():
    lines = run_readme_example().splitlines()
    data = (FIXTURES / "golden-0" / "00000000000000000000.log").read_bytes()
    batches, pos, mr = [], 0, MemoryRecords(data)
    records = []
    while (b := mr.next_batch()) is not None:
        batches.append(f"{b.base_offset} {b.last_offset} {pos} {b.size_in_bytes}")
        pos += b.size_in_bytes
        if not b.is_control_batch:
            records.extend(f"{r.offset} {r.timestamp} {r.value!r}" for r in b if r.offset >= 1)
    assert lines[1 : 1 + len(batches)] == batches
    assert lines[1 + len(batches) : -1] == records
    # the log dir's own checkpoint file, read by hand: the line "golden 0 <offset>"
    text = (FIXTURES / "recovery-point-offset-checkpoint").read_text()
    (offset,) = [line.split()[2] for line in text.splitlines() if line.startswith("golden 0 ")]
    assert lines[-1] == offset
    assert lines[0] == repr(sorted(n for n in os.listdir(FIXTURES) if (FIXTURES / n).is_dir())[:3])


def loaded_after(code: str) -> list[str]:
    """The kafkatool modules and the optional libraries a fresh interpreter holds after ``code``."""
    probe = (
        f"import sys\n{code}\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('kafkatool') or m.split('.')[0] in "
        "('click', 'rich', 'lz4', 'zstandard', 'snappy', 'crc32c', 'kafka'))))"
    )
    return subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=REPO).stdout.split()


def test_importing_kafkatool_loads_nothing_else():
    assert loaded_after("import kafkatool") == ["kafkatool"]


def test_first_use_loads_the_model_but_no_codec():
    loaded = loaded_after("import kafkatool\nkafkatool.LogDir\nkafkatool.Batch")
    assert "kafkatool.segment.logdir" in loaded
    assert not {m.split(".")[0] for m in loaded} & {"click", "rich", "lz4", "zstandard", "snappy"}


@pytest.mark.parametrize("name", kafkatool.__all__)
def test_every_exported_name_resolves_and_is_documented(name):
    value = getattr(kafkatool, name)
    if name == "__version__":
        assert re.fullmatch(r"\d+\.\d+\.\d+", value)
        return
    assert value.__doc__ and value.__doc__.strip(), f"kafkatool.{name} has no docstring"
    assert value.__module__.startswith("kafkatool."), value.__module__
    assert name in dir(kafkatool)


def test_all_lists_every_export():
    assert kafkatool.__all__ == ["__version__", *vars(kafkatool)["_EXPORTS"]]


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        kafkatool.nope  # noqa: B018
    assert not hasattr(kafkatool, "_nope")


def test_type_checkers_see_the_same_names():
    """The ``if TYPE_CHECKING:`` imports name every export, each from the module the lazy import uses."""
    tree = ast.parse((REPO / "kafkatool" / "__init__.py").read_text())
    (block,) = [n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", None) == "TYPE_CHECKING"]
    seen = {alias.name: node.module for node in block.body if isinstance(node, ast.ImportFrom) for alias in node.names}
    exports = {n: m for n, m in vars(kafkatool)["_EXPORTS"].items()}
    assert seen == exports
    assert (REPO / "kafkatool" / "py.typed").is_file()


def test_the_package_says_where_a_new_subcommand_goes():
    first = kafkatool.__doc__.split("\n\n")[1]
    for words in ("kafkatool/cli/<command>.py", "parses", "renders", "operation module",
                  "kafkatool.segment.logdir", "kafkatool.safety"):
        assert words in first, words


def test_the_encoders_write_what_kafka_python_reads():
    specs = [kafkatool.RecordSpec(5 + i, 1_700_000_000_000 + i, b"k%d" % i, b"v%d" % i, ()) for i in range(3)]
    batch = MemoryRecords(kafkatool.encode_batch(specs, codec=kafkatool.Codec.GZIP)).next_batch()
    assert (batch.base_offset, batch.last_offset_delta, batch.compression_type) == (5, 2, 1)
    assert [(r.offset, r.timestamp, r.key, r.value) for r in batch] == [
        (5, 1_700_000_000_000, b"k0", b"v0"), (6, 1_700_000_000_001, b"k1", b"v1"), (7, 1_700_000_000_002, b"k2", b"v2")]
    legacy = MemoryRecords(kafkatool.encode_legacy(specs, magic=1)).next_batch()
    assert [(r.offset, r.timestamp, r.value) for r in legacy] == [(5, 1_700_000_000_000, b"v0")]


def test_a_segment_read_through_the_api(tmp_path):
    """The model and the record types together: a log dir written with the exported encoder
    (the values checked by kafka-python above), read back by offset and by byte range."""
    specs = [kafkatool.RecordSpec(i, 1000 + i, None, b"x" * 50, ()) for i in range(30)]
    d = tmp_path / "events-3"
    d.mkdir()
    data = b"".join(kafkatool.encode_batch(specs[i : i + 3]) for i in range(0, 30, 3))
    (d / "00000000000000000000.log").write_bytes(data)
    part = kafkatool.Partition(d)
    assert (part.topic, part.partition, part.state) == ("events", 3, None)
    (segment,) = part.segments()
    assert [r.offset for r in segment.records(offset=13)] == list(range(13, 30))
    ranges = segment.split(4)
    assert sum(1 for a, b in ranges for _ in segment.batches(a, b)) == 10
    assert isinstance(next(iter(segment.batches())), kafkatool.Batch)
