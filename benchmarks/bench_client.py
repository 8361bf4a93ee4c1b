"""Produce and fetch throughput of ``kafkawire.Client`` vs confluent-kafka, same mock cluster, same run.

The peer is librdkafka's mock cluster (3 brokers on loopback, started through
confluent-kafka's ``test.mock.num.brokers``).  Both clients write the same
records (100-byte values, 16-byte keys) to their own topic, then read them
back:

* kafkawire: ``Client.produce`` with ``batch`` records per call (one batch per
  call), then ``Client.fetch`` loops decoding every record.
* confluent-kafka: ``Producer.produce`` per record + ``flush``; ``Consumer``
  assigned to the partitions, ``consume`` until every record is seen.

Records go to partition ``i * 4 // n`` (a quarter per partition) for both.

Each client runs ``--repeat`` times (interleaved, fresh topics) and the best
time counts.  Run: ``python benchmarks/bench_client.py [--quick] [--codec lz4]
[--backend pure] [--repeat 3] [--results PATH]`` (the figures also go to
``benchmarks/results/client[-quick].json``).
"""
from __future__ import annotations

import argparse
import time

import _harness as H
import confluent_kafka as ck

import kafkawire


# The mock keeps about 5 MB per partition (older batches are dropped), so the
# records are spread over the four partitions of an auto-created topic.
PARTITIONS = 4


def _part(i: int, n: int) -> int:
    return i * PARTITIONS // n


def _records(n: int):
    return [(b"key-%012d" % i, (b"value-%010d-" % i).ljust(100, b"x")) for i in range(n)]


def bench_kafkawire(bootstrap: str, topic: str, records, batch: int, codec: str):
    with kafkawire.Client(bootstrap, allow_auto_create_topics=True) as c:
        c.metadata([topic])
        t0 = time.perf_counter()
        for i in range(0, len(records), batch):
            c.produce(topic, records[i:i + batch], partition=_part(i, len(records)),
                      compression=codec, acks=1)
        t_produce = time.perf_counter() - t0
        t0 = time.perf_counter()
        n = 0
        for p in range(PARTITIONS):
            offset, want = 0, n + len(records) // PARTITIONS
            while n < want:
                res = c.fetch(topic, p, offset, max_wait_ms=100)
                for r in res.records():
                    n += 1
                    len(r.value)
                offset = res.next_offset
        t_fetch = time.perf_counter() - t0
    assert n == len(records)
    return t_produce, t_fetch


def bench_confluent(bootstrap: str, topic: str, records, batch: int, codec: str):
    p = ck.Producer({"bootstrap.servers": bootstrap, "compression.type": codec,
                     "linger.ms": 5, "batch.num.messages": batch, "acks": 1,
                     "queue.buffering.max.messages": 2_000_000, "log_level": 0})
    p.list_topics(topic, timeout=10)
    t0 = time.perf_counter()
    for i, (k, v) in enumerate(records):
        part = _part(i, len(records))
        while True:
            try:
                p.produce(topic, value=v, key=k, partition=part)
                break
            except BufferError:
                p.poll(0.01)
        p.poll(0)
    p.flush(120)
    t_produce = time.perf_counter() - t0
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-" + topic,
                     "enable.auto.commit": False, "log_level": 0})
    c.assign([ck.TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    t0 = time.perf_counter()
    n = 0
    while n < len(records):
        for m in c.consume(10_000, 1.0):
            if m.error() is None:
                n += 1
                len(m.value())
    t_fetch = time.perf_counter() - t0
    c.close()
    return t_produce, t_fetch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="20k records instead of 120k")
    ap.add_argument("--records", type=int, default=None)
    ap.add_argument("--batch", type=int, default=5_000, help="records per produce call / batch")
    ap.add_argument("--codec", default="none", choices=["none", "gzip", "snappy", "lz4", "zstd"])
    ap.add_argument("--backend", default=None, choices=["fast", "pure"])
    ap.add_argument("--repeat", type=int, default=3, help="runs per client; the best counts")
    H.add_results_option(ap)
    args = ap.parse_args()
    backend = H.use_backend(args.backend)
    n = args.records or (20_000 if args.quick else 120_000)
    owner = ck.Producer({"test.mock.num.brokers": 3, "log_level": 0})
    md = owner.list_topics(timeout=10)
    bootstrap = ",".join(f"{b.host}:{b.port}" for b in md.brokers.values())
    records = _records(n)
    mb = sum(len(k) + len(v) for k, v in records) / 1e6
    stamp = int(time.time())
    kw_runs, cf_runs = [], []
    for rep in range(args.repeat):  # interleaved, best of N: the machine may be shared
        kw_runs.append(bench_kafkawire(bootstrap, f"bench-kw-{stamp}-{rep}", records,
                                       args.batch, args.codec))
        cf_runs.append(bench_confluent(bootstrap, f"bench-ck-{stamp}-{rep}", records,
                                       args.batch, args.codec))
    kw = (min(r[0] for r in kw_runs), min(r[1] for r in kw_runs))
    cf = (min(r[0] for r in cf_runs), min(r[1] for r in cf_runs))
    print(f"client throughput vs librdkafka mock cluster: {n} records, {mb:.1f} MB payload, "
          f"codec={args.codec}, batch={args.batch}, kafkawire backend={backend}, "
          f"best of {args.repeat}")
    print(f"{'':10s} {'kafkawire':>14s} {'confluent-kafka':>16s} {'ratio':>7s}")
    for name, a, b in (("produce", kw[0], cf[0]), ("fetch", kw[1], cf[1])):
        print(f"{name:10s} {n / a / 1e3:10.0f} k/s {n / b / 1e3:12.0f} k/s {b / a:6.2f}x")
    owner.flush(1)
    results = H.Results("client", quick=args.quick)
    wl = f"{n} records, codec {args.codec}"
    for name, a, b in (("produce", kw[0], cf[0]), ("fetch", kw[1], cf[1])):
        results.add(wl, f"kafkawire.Client ({backend})", name, n / a, "records/s")
        results.add(wl, "confluent-kafka (librdkafka)", name, n / b, "records/s")
    results.set_ratios("confluent-kafka (librdkafka)")
    results.write(args.results)


if __name__ == "__main__":
    main()
