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


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A standalone master and one worker on loopback: ``(master URL, env for drivers)``."""
    tmp_path = tmp_path_factory.mktemp("cluster")
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
        yield f"spark://127.0.0.1:{port}", env
    finally:
        if worker is not None:
            _stop(worker)
        _stop(master)
        logs.close()


def test_demo_on_a_standalone_cluster(cluster, tmp_path):
    master, env = cluster
    out = subprocess.run([sys.executable, "-m", "kafkawire.spark.demo", "--master", master,
                          "--out", str(tmp_path / "demo"), "--scale", "2000"],
                         env=env, capture_output=True, timeout=600, cwd=str(tmp_path))
    text = out.stdout.decode()
    assert out.returncode == 0, out.stderr.decode()[-3000:]
    total = next(l for l in text.splitlines() if l.startswith("total"))
    from kafkawire.spark.sample import build_sample
    expected = sum(build_sample(str(tmp_path / "again"), 2000).values())
    assert int(total.split()[1]) == expected      # read_uncommitted: every record written
    assert os.path.isdir(tmp_path / "demo" / "parquet" / "topic=orders")
    assert f"master={master}" in text


_S3_DRIVER = """
import json, sys
import kafkawire.spark
master, url, local, opts = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
spark = kafkawire.spark.make_session(master, "kafkawire-s3-on-a-cluster")
def rows(path, **extra):
    r = spark.read.format("kafkawire").option("includeHeaders", "true")
    for k, v in {**extra}.items():
        r = r.option(k, v)
    df = r.load(path)
    return sorted((x.topic, x.partition, x.offset, x.key, x.value, x.timestamp, x.timestampType,
                   [(h.key, h.value) for h in x.headers] if x.headers is not None else None)
                  for x in df.collect())
remote, here = rows(url, **opts), rows(local)
print("rows", len(remote), len(here), remote == here)
remote = rows(url, minPartitions="5", isolation="read_committed", **opts)
here = rows(local, minPartitions="5", isolation="read_committed")
print("committed", len(remote), len(here), remote == here)
spark.stop()
"""


def test_cluster_reads_log_dirs_from_s3(cluster, tmp_path):
    """Executors read s3:// (moto's S3 server on loopback) without a shared disk: every row equals
    the local read of the same folders."""
    pytest.importorskip("moto.server")
    pytest.importorskip("s3fs")
    import boto3
    import logging
    from moto.server import ThreadedMotoServer
    from kafkawire.spark.sample import build_sample
    master, env = cluster
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    local = tmp_path / "kafka-logs"
    build_sample(str(local), 2000, segment_bytes=64 << 10)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="k", aws_secret_access_key="s",
                          region_name="us-east-1")
        s3.create_bucket(Bucket="cluster-logs")
        for d, _, names in os.walk(local):
            for n in names:
                full = os.path.join(d, n)
                s3.upload_file(full, "cluster-logs", "kafka/" + os.path.relpath(full, local))
        opts = {"fs.s3a.endpoint": endpoint, "fs.s3a.access.key": "k", "fs.s3a.secret.key": "s",
                "fs.s3a.path.style.access": "true"}
        import json
        out = subprocess.run([sys.executable, "-c", _S3_DRIVER, master, "s3a://cluster-logs/kafka",
                              str(local), json.dumps(opts)],
                             env=env, capture_output=True, timeout=600, cwd=str(tmp_path))
        text = out.stdout.decode()
        assert out.returncode == 0, out.stderr.decode()[-3000:]
        lines = dict(l.split(" ", 1) for l in text.splitlines() if l.startswith(("rows", "committed")))
        for key in ("rows", "committed"):
            n_remote, n_local, same = lines[key].split()
            assert same == "True" and n_remote == n_local and int(n_local) > 1000, text
    finally:
        server.stop()
