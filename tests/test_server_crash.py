"""Crash safety: a broker in a subprocess, producing with ``acks=all`` while every append is
flushed (``log.flush.interval.messages=1``), is killed with SIGKILL at random moments and
restarted, run after run.  Everything acknowledged is there after each restart, at the
offset it was acknowledged at; at the end ``kafkawire verify`` is clean and Kafka's own
reader (``FileRecords`` + ``ensureValid``) accepts every segment.  A few runs by default,
many with ``--runslow``."""
from __future__ import annotations

import glob
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time

import pytest

from kafkawire import Log
from broker_support import WAIT, consume_all, verify_clean

pytestmark = [pytest.mark.one_backend]
ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

TOPIC = "crash"
PARTITIONS = 2


class ServeProcess:
    """``kafkawire serve`` in a subprocess, its log in a file (so a full pipe never blocks it)."""

    def __init__(self, log_dir: str, log_path: str) -> None:
        self.log_path = log_path
        self.err = open(log_path, "ab")
        start = self.err.tell()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kafkawire.cli", "serve", "--log-dirs", log_dir,
             "--listen", "127.0.0.1:0", "--log-level", "INFO",
             "--config", "log.flush.interval.messages=1",
             "--config", "log.flush.offset.checkpoint.interval.ms=200"],
            stdout=subprocess.DEVNULL, stderr=self.err)
        self.bootstrap = self._wait_listening(start)

    def _wait_listening(self, start: int) -> str:
        end = time.monotonic() + WAIT
        while time.monotonic() < end:
            with open(self.log_path, "rb") as f:
                f.seek(start)
                for line in f.read().decode(errors="replace").splitlines():
                    if "kafkawire serve: listening on " in line:
                        return line.rsplit(" ", 1)[1]
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.kill()
        with open(self.log_path, "rb") as f:
            raise AssertionError("the broker did not start:\n" + f.read().decode()[-3000:])

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(WAIT)
        self.err.close()

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(WAIT) == 0
        self.err.close()


def _produce_until_killed(broker: ServeProcess, run: int, acked: dict, rng: random.Random) -> None:
    """Produce (acks=all) in a thread; kill the broker at a random moment after some acks."""
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 2,
                     "message.timeout.ms": 60000, "retries": 0,
                     "enable.idempotence": False})
    stop = threading.Event()
    count = [0]

    def on_delivery(err, msg):
        if err is None:
            acked[(msg.partition(), msg.offset())] = msg.value()
            count[0] += 1

    def produce():
        i = 0
        while not stop.is_set():
            try:
                p.produce(TOPIC, value=b"run%d-%d" % (run, i), partition=i % PARTITIONS,
                          on_delivery=on_delivery)
                i += 1
            except BufferError:
                pass
            p.poll(0.001 if i % 50 else 0.01)

    t = threading.Thread(target=produce, daemon=True)
    t.start()
    end = time.monotonic() + WAIT
    while count[0] < 60 and time.monotonic() < end:
        time.sleep(0.01)
    assert count[0] >= 60, "nothing was acknowledged"
    time.sleep(rng.uniform(0.0, 0.4))          # a random moment, mid-stream
    broker.kill()
    stop.set()
    t.join(WAIT)
    p.purge()
    p.flush(0)


def _in_folders(log_dir: str) -> dict:
    out = {}
    for i in range(PARTITIONS):
        with Log.open(os.path.join(log_dir, f"{TOPIC}-{i}")) as lg:
            for r in lg.records():
                out[(i, r.offset)] = r.value
    return out


def _check_acked(log_dir: str, acked: dict) -> None:
    have = _in_folders(log_dir)
    lost = {k: v for k, v in acked.items() if have.get(k) != v}
    assert not lost, f"{len(lost)} acknowledged records lost or changed, e.g. {sorted(lost)[:5]}"


def test_kill_9_and_restart_keeps_everything_acknowledged(tmp_path, request, java_runner):
    runs = 25 if request.config.getoption("--runslow") else 3
    rng = random.Random(int(os.environ.get("KAFKAWIRE_CRASH_SEED", "0")) or None)
    d = str(tmp_path / "logs")
    err = str(tmp_path / "broker.log")
    broker = ServeProcess(d, err)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1, config={"segment.bytes": "2048"})])[TOPIC].result(WAIT)
    del admin
    acked: dict = {}
    for run in range(runs):
        _produce_until_killed(broker, run, acked, rng)
        broker = ServeProcess(d, err)          # recovers the folders before it listens
        _check_acked(d, acked)
    # Consumed through the restarted broker: the same records.
    seen = {k: v for k, (_key, v) in consume_all(broker.bootstrap, TOPIC, PARTITIONS).items()}
    assert seen == _in_folders(d)
    assert all(seen.get(k) == v for k, v in acked.items())
    broker.stop()
    with open(err, "rb") as f:
        log_text = f.read().decode(errors="replace")
    assert "trusted" in log_text                       # recovery from the recovery point
    verify_clean(d)
    segments = sorted(glob.glob(os.path.join(d, f"{TOPIC}-*", "*.log")))
    assert len(segments) > PARTITIONS
    proc = java_runner.run("RecordsReader", "file", *segments)
    read = {}
    for line in proc.stdout.decode().splitlines():
        doc = json.loads(line)
        assert "error" not in doc, doc.get("error")
        assert all(b["valid"] is True for b in doc["batches"]), doc["path"]
        read[doc["path"]] = len(doc["batches"])
    assert set(read) == set(segments)
    assert sum(read.values()) > 0
