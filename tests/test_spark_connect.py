"""``kafkatool spark ... --remote sc://HOST:PORT`` against a real Spark Connect server on this machine.

The server is the one pyspark ships (``org.apache.spark.sql.connect.service.SparkConnectServer``,
started with ``spark-submit`` in the foreground and killed at the end), so the commands run as
they do against a cluster's Connect endpoint: the data source is registered over Connect and its
Python reader runs in the server's workers. One server for the module (~10 s to start).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import FIXTURES, REPO, spark_missing

pytestmark = pytest.mark.skipif(spark_missing() is not None, reason=spark_missing() or "")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def connect_url(tmp_path_factory):
    pytest.importorskip("grpc", reason="Spark tests need the spark extra (grpcio, Spark Connect's client, is not installed)")
    import pyspark

    home = Path(pyspark.__file__).parent
    port = _free_port()
    log = tmp_path_factory.mktemp("connect") / "server.log"
    env = {**os.environ, "SPARK_HOME": str(home), "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    with open(log, "wb") as out:
        server = subprocess.Popen(
            [str(home / "bin" / "spark-submit"), "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
             "--master", "local[2]", "--conf", "spark.ui.enabled=false", "--conf", f"spark.connect.grpc.binding.port={port}",
             "--conf", "spark.driver.memory=1g", "--name", "kafkatool-tests-connect"],
            stdout=out, stderr=subprocess.STDOUT, env=env, cwd=tmp_path_factory.mktemp("server-cwd"), start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 120
        while True:
            if server.poll() is not None:
                pytest.fail(f"the Spark Connect server exited ({server.returncode}): {log.read_text()[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"the Spark Connect server did not listen in 120 s: {log.read_text()[-2000:]}")
                time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}"
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def _kafkatool(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kafkatool", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYSPARK_PYTHON": sys.executable})


def _without_seconds(jsonl: str) -> list[dict]:
    rows = [json.loads(line) for line in jsonl.splitlines()]
    for r in rows:
        r.pop("seconds", None)
    return rows


def test_verify_and_stats_over_connect_print_what_the_local_commands_print(connect_url):
    rel = os.path.relpath(FIXTURES, REPO)  # relative: resolved here, not in the server's directory
    for command in (["verify", "--deep"], ["stats"]):
        local = _kafkatool(*command, "--format", "jsonl", str(FIXTURES))  # the server is given the absolute path
        remote = _kafkatool("spark", *command, "--remote", connect_url, "--format", "jsonl", rel)
        assert (remote.returncode, _without_seconds(remote.stdout)) == (local.returncode, _without_seconds(local.stdout)), remote.stderr
        assert remote.stdout.strip(), command


def test_export_over_connect_writes_every_record_in_hive_layout(connect_url, tmp_path):
    import pyarrow.parquet as pq

    from kafkatool import LogDir

    out = tmp_path / "out"
    r = _kafkatool("spark", "export", "--remote", connect_url, "--to", os.path.relpath(out, tmp_path), str(FIXTURES), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    table = pq.read_table(out)
    got = sorted((str(t), int(p), o) for t, p, o in zip(table["topic"].to_pylist(), table["partition"].to_pylist(),
                                                         table["offset"].to_pylist()))
    want = sorted((part.topic, part.partition, rec.offset) for part in LogDir(str(FIXTURES)).partitions()
                  if part.state is None for rec in part.records(control=True))
    assert got == want and len(want) > 100
    again = _kafkatool("spark", "export", "--remote", connect_url, "--to", str(out), str(FIXTURES))
    assert again.returncode == 2 and again.stdout == "" and len(again.stderr.strip().splitlines()) == 1, again
