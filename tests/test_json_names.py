"""JSON Lines stay valid UTF-8 JSON when a file name is not UTF-8 (issue 9: paths are bytes on Linux).

Every command's ``--format jsonl`` writes such a name's undecodable bytes as the JSON escapes
``\\udcXX`` (Python's surrogateescape code points, what ``ensure_ascii`` writes), so a strict
UTF-8 JSON reader parses the line and ``os.fsencode`` gives the name's bytes back.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "fixtures" / "logdir" / "golden-0" / "00000000000000000000.log"


@pytest.fixture
def partition(tmp_path) -> bytes:
    part = os.fsencode(tmp_path) + b"/log\xff/top\xfeic-0"
    os.makedirs(part)
    shutil.copyfile(GOLDEN, part + b"/00000000000000000000.log")
    return part


@pytest.mark.parametrize("command", [["dump"], ["dump", "--deep-iteration"], ["verify"], ["reindex"], ["truncate"]])
def test_jsonl_of_a_non_utf8_name_is_valid_json_that_gives_the_bytes_back(partition, command):
    proc = subprocess.run(
        [sys.executable, "-m", "kafkatool", *command, "--format", "jsonl", partition],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60,
    )
    assert proc.returncode in (0, 1), proc.stderr
    lines = proc.stdout.decode("utf-8").splitlines()  # strict: raises on a raw 0xff byte
    names = set()
    for line in lines:
        obj = json.loads(line)
        for key in ("file", "segment", "partitionDir"):
            if isinstance(obj.get(key), str):
                names.add(os.fsencode(obj[key]))
    assert names and all(n.startswith(partition) for n in names), names
