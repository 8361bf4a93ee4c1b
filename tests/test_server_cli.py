"""``kafkawire serve`` as a process: SIGTERM shuts down cleanly, ``kill -9`` loses nothing
acknowledged, and ``kafkawire verify`` is clean after both; Kafka's reader validates the files."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest

import kafkawire
from kafkawire.log import LogDir
from kafkawire.log.checkpoints import CLEAN_SHUTDOWN_FILE

pytestmark = pytest.mark.one_backend
ck = pytest.importorskip("confluent_kafka")

ROOT = os.path.dirname(os.path.dirname(kafkawire.__file__))


def _env():
    return dict(os.environ, PYTHONPATH=ROOT)


def _start(log_dir, *extra):
    proc = subprocess.Popen([sys.executable, "-m", "kafkawire.cli", "serve", "--log-dirs",
                             str(log_dir), "--listen", "127.0.0.1:0", "--log-level", "WARNING",
                             "--config", "num.partitions=2", *extra],
                            stderr=subprocess.PIPE, env=_env())
    deadline = time.time() + 60
    lines = []
    while time.time() < deadline:
        line = proc.stderr.readline().decode()
        lines.append(line)
        m = re.search(r"listening on (\S+)", line)
        if m:
            return proc, m.group(1)
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise AssertionError("serve did not start: " + "".join(lines))


def _produce(bs, topic, n, start=0):
    acked = []
    p = ck.Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 2,
                     "enable.idempotence": False})
    for i in range(start, start + n):
        codec = ("none", "gzip", "snappy", "lz4", "zstd")[i // 100 % 5]
        p.produce(topic, value=b"value-%06d" % i, key=b"%d" % i, partition=i % 2,
                  on_delivery=lambda e, m: e is None and acked.append(m.value()))
        if i % 100 == 99:
            p.flush(20)
            p = ck.Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 2,
                             "enable.idempotence": False, "compression.type": codec})
    p.flush(20)
    return acked


def _verify(log_dir):
    p = subprocess.run([sys.executable, "-m", "kafkawire.cli", "verify", str(log_dir)],
                       capture_output=True, env=_env(), timeout=120)
    assert p.returncode == 0, p.stdout.decode() + p.stderr.decode()


def _values(log_dir, topic):
    with LogDir.open(str(log_dir)) as d:
        return sorted(r.value for p in (0, 1) for r in d.log(topic, p).records())


def test_sigterm_then_kill9_then_restart(tmp_path, java_runner):
    log_dir = tmp_path / "logs"
    proc, bs = _start(log_dir)
    try:
        acked = _produce(bs, "events", 500)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    assert len(acked) == 500
    assert os.path.exists(log_dir / CLEAN_SHUTDOWN_FILE)
    _verify(log_dir)
    assert _values(log_dir, "events") == sorted(acked)

    proc, bs = _start(log_dir)
    assert not os.path.exists(log_dir / CLEAN_SHUTDOWN_FILE)
    acked += _produce(bs, "events", 300, start=500)
    proc.kill()                                  # kill -9: no flush, no marker
    proc.wait(30)
    assert not os.path.exists(log_dir / CLEAN_SHUTDOWN_FILE)
    proc, bs = _start(log_dir)                   # recovers what the crash left
    try:
        acked += _produce(bs, "events", 100, start=800)
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0
    _verify(log_dir)
    assert _values(log_dir, "events") == sorted(acked) and len(acked) == 900
    for part in ("events-0", "events-1"):
        out = java_runner.run("LogFolderHelper", "read", str(log_dir / part)).stdout.decode()
        assert out.rstrip().endswith("OK"), out[-500:]


def test_serve_refuses_bad_arguments(tmp_path):
    p = subprocess.run([sys.executable, "-m", "kafkawire.cli", "serve", "--log-dirs",
                        str(tmp_path), "--config", "log.segment.bytes=lots"],
                       capture_output=True, env=_env(), timeout=60)
    assert p.returncode == 2 and b"Traceback" not in p.stderr
    assert b"log.segment.bytes" in p.stderr
