"""Produce and consume throughput of confluent-kafka against ``kafkawire serve`` vs librdkafka's mock cluster.

The same client library (confluent-kafka) and the same records run against two
brokers in the same run:

* ``kafkawire serve`` in its own process, persisting to a temporary log dir
  (Kafka's on-disk format, default flush policy: the page cache, as Kafka);
* librdkafka's in-memory mock cluster (one broker, ``test.mock.num.brokers``).

For each workload (value size x acks) a producer writes ``--records`` records
to a fresh 4-partition topic and ``flush``es; then a consumer assigned to the
partitions reads them all.  Produce latency (p50/p99 from ``produce`` to the
delivery report) is measured at a fixed moderate rate.  Each broker runs
``--repeat`` times, interleaved; the best counts.  Ratio = kafkawire / mock
(above 1: kafkawire faster).

Run: ``python benchmarks/bench_broker.py [--quick] [--repeat 3] [--results PATH]``.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Tuple

import _harness as H
import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic

PARTITIONS = 4
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def start_kafkawire(log_dir: str) -> Tuple[subprocess.Popen, str]:
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.Popen([sys.executable, "-m", "kafkawire.cli", "serve", "--log-dirs", log_dir,
                             "--listen", "127.0.0.1:0", "--log-level", "WARNING"],
                            stderr=subprocess.PIPE, env=env)
    assert proc.stderr is not None
    while True:
        line = proc.stderr.readline().decode()
        m = re.search(r"listening on (\S+)", line)
        if m:
            return proc, m.group(1)
        if not line:
            raise RuntimeError("kafkawire serve did not start")


def make_topic(bootstrap: str, topic: str) -> None:
    """A 4-partition topic (the mock cluster creates topics on first use, 4 partitions)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    try:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)],
                            request_timeout=5)[topic].result(10)
    except Exception:
        pass
    md = admin.list_topics(topic, timeout=10)
    if len(md.topics[topic].partitions) != PARTITIONS:
        raise RuntimeError(f"{topic} has {len(md.topics[topic].partitions)} partitions")


def throughput(bootstrap: str, topic: str, n: int, size: int, acks: str) -> Tuple[float, float]:
    make_topic(bootstrap, topic)
    value = b"x" * size
    p = ck.Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
                     "enable.idempotence": False, "queue.buffering.max.messages": 2_000_000,
                     "log_level": 0})
    t0 = time.perf_counter()
    for i in range(n):
        while True:
            try:
                p.produce(topic, value=value, key=b"%012d" % i, partition=i % PARTITIONS)
                break
            except BufferError:
                p.poll(0.005)
    if p.flush(300):
        raise RuntimeError("records left undelivered")
    t_produce = time.perf_counter() - t0
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-" + topic,
                     "enable.auto.commit": False, "log_level": 0})
    c.assign([ck.TopicPartition(topic, q, 0) for q in range(PARTITIONS)])
    t0 = time.perf_counter()
    got = 0
    deadline = time.time() + 300
    while got < n and time.time() < deadline:
        for m in c.consume(10_000, 1.0):
            if m.error() is None:
                got += 1
    t_consume = time.perf_counter() - t0
    c.close()
    if got != n:
        raise RuntimeError(f"consumed {got} of {n}")
    return t_produce, t_consume


def latency(bootstrap: str, topic: str, rate: int, seconds: float) -> Tuple[float, float]:
    make_topic(bootstrap, topic)
    lat: List[float] = []
    p = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                     "enable.idempotence": False, "log_level": 0})

    def report(err, msg, sent):
        if err is None:
            lat.append(time.perf_counter() - sent)
    n = int(rate * seconds)
    t0 = time.perf_counter()
    for i in range(n):
        due = t0 + i / rate
        while time.perf_counter() < due:
            p.poll(0)
        sent = time.perf_counter()
        p.produce(topic, value=b"y" * 100, partition=i % PARTITIONS,
                  on_delivery=lambda err, msg, sent=sent: report(err, msg, sent))
        p.poll(0)
    p.flush(60)
    lat.sort()
    return lat[len(lat) // 2] * 1e3, lat[int(len(lat) * 0.99)] * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer records (for a busy machine)")
    ap.add_argument("--records", type=int, default=None, help="records per 100-byte workload")
    ap.add_argument("--repeat", type=int, default=3, help="runs per broker; the best counts")
    ap.add_argument("--rate", type=int, default=2000, help="records/s of the latency run")
    H.add_results_option(ap)
    args = ap.parse_args()
    n100 = args.records or (20_000 if args.quick else 100_000)
    workloads = [(100, "1", n100), (100, "all", n100), (1024, "1", n100 // 4),
                 (1024, "all", n100 // 4)]
    log_dir = tempfile.mkdtemp(prefix="bench-broker-")
    proc, kw_bs = start_kafkawire(log_dir)
    mock_owner = ck.Producer({"test.mock.num.brokers": 1, "log_level": 0})
    md = mock_owner.list_topics(timeout=10)
    mock_bs = ",".join(f"{b.host}:{b.port}" for b in md.brokers.values())
    brokers = {"kafkawire serve": kw_bs, "librdkafka mock": mock_bs}
    best: Dict[Tuple[str, int, str], List[float]] = {}
    lat: Dict[str, Tuple[float, float]] = {}
    stamp = int(time.time())
    try:
        for rep in range(args.repeat):
            for size, acks, n in workloads:
                for name, bs in brokers.items():
                    topic = f"b{stamp}-{rep}-{size}-{acks}-{'kw' if 'kafkawire' in name else 'mk'}"
                    tp, tc = throughput(bs, topic, n, size, acks)
                    key = (name, size, acks)
                    old = best.get(key)
                    best[key] = [min(tp, old[0]) if old else tp, min(tc, old[1]) if old else tc, n]
        for name, bs in brokers.items():
            lat[name] = latency(bs, f"lat{stamp}-{'kw' if 'kafkawire' in name else 'mk'}",
                                args.rate, 2.0 if args.quick else 5.0)
    finally:
        proc.terminate()
        proc.wait(60)
        mock_owner.flush(1)
        shutil.rmtree(log_dir, ignore_errors=True)
    print(f"confluent-kafka {ck.version()[0]} (librdkafka {ck.libversion()[0]}) against two "
          f"brokers, best of {args.repeat}, {PARTITIONS} partitions")
    print(f"{'workload':22s} {'kafkawire serve':>22s} {'librdkafka mock':>22s} {'ratio':>6s}")
    results = H.Results("broker", quick=args.quick)
    for size, acks, n in workloads:
        for i, what in enumerate(("produce", "consume")):
            kw = best[("kafkawire serve", size, acks)]
            mk = best[("librdkafka mock", size, acks)]
            a, b = n / kw[i], n / mk[i]
            mb_a, mb_b = a * size / 1e6, b * size / 1e6
            label = f"{what} {size}B acks={acks}"
            print(f"{label:22s} {a / 1e3:7.0f} k/s {mb_a:6.1f} MB/s {b / 1e3:7.0f} k/s "
                  f"{mb_b:6.1f} MB/s {a / b:5.2f}x")
            wl = f"{what} {size}-byte values, acks={acks}"
            results.add(wl, "kafkawire serve", what, a, "records/s")
            results.add(wl, "librdkafka mock cluster", what, b, "records/s")
    for name, (p50, p99) in lat.items():
        print(f"produce latency at {args.rate}/s, acks=all, {name}: p50 {p50:.2f} ms, "
              f"p99 {p99:.2f} ms")
        results.add(f"produce latency at {args.rate} records/s", name, "p50", p50, "ms")
        results.add(f"produce latency at {args.rate} records/s", name, "p99", p99, "ms")
    results.set_ratios("librdkafka mock cluster", metrics=["produce", "consume"])
    results.write(args.results)


if __name__ == "__main__":
    main()
