"""The demo pipeline on a standalone Spark cluster (master + worker on loopback).

The master and worker are the pip pyspark's own ``spark-class`` launchers
(``org.apache.spark.deploy.master.Master`` / ``...worker.Worker``), started as
child processes and stopped by their pids.  The driver is the demo module in a
subprocess with ``--master spark://127.0.0.1:PORT``; kafkawire reaches the
executors through the same interpreter (PYSPARK_PYTHON) and PYTHONPATH.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import pytest

pyspark = pytest.importorskip("pyspark")

pytestmark = [pytest.mark.one_backend, pytest.mark.spark]

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, timeout: float) -> None:
    end = time.time() + timeout
    while time.time() < end:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout}s")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)


def test_demo_on_a_standalone_cluster(tmp_path):
    home = os.path.dirname(pyspark.__file__)
    spark_class = os.path.join(home, "bin", "spark-class")
    env = dict(os.environ, SPARK_HOME=home, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable)
    if not os.environ.get("KAFKAWIRE_TEST_INSTALLED"):   # a source checkout: let the processes import it
        env["PYTHONPATH"] = os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    port, ui, wui = _free_port(), _free_port(), _free_port()
    logs = open(tmp_path / "daemons.log", "wb")
    master = subprocess.Popen([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", str(port), "--webui-port", str(ui)], env=env, stdout=logs, stderr=logs)
    worker = None
    try:
        _wait_port(port, 120)
        worker = subprocess.Popen([spark_class, "org.apache.spark.deploy.worker.Worker",
                                   f"spark://127.0.0.1:{port}", "--host", "127.0.0.1", "--cores", "2",
                                   "--memory", "1g", "--webui-port", str(wui),
                                   "--work-dir", str(tmp_path / "work")], env=env, stdout=logs, stderr=logs)
        out = subprocess.run([sys.executable, "-m", "kafkawire.spark.demo", "--master", f"spark://127.0.0.1:{port}",
                              "--out", str(tmp_path / "demo"), "--scale", "2000"],
                             env=env, capture_output=True, timeout=600, cwd=str(tmp_path))
        text = out.stdout.decode()
        assert out.returncode == 0, out.stderr.decode()[-3000:]
        total = next(l for l in text.splitlines() if l.startswith("total"))
        from kafkawire.spark.sample import build_sample
        expected = sum(build_sample(str(tmp_path / "again"), 2000).values())
        assert int(total.split()[1]) == expected      # read_uncommitted: every record written
        assert os.path.isdir(tmp_path / "demo" / "parquet" / "topic=orders")
        assert f"master=spark://127.0.0.1:{port}" in text
    finally:
        if worker is not None:
            _stop(worker)
        _stop(master)
        logs.close()
