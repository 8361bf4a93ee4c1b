"""Records delivered per second: ``kafkawire.Consumer`` vs confluent-kafka, same mock cluster, same run.

The peer is librdkafka's mock cluster (3 brokers on loopback, started through
confluent-kafka's ``test.mock.num.brokers``).  One topic of four partitions, led as
Kafka places leaders (spread evenly over the brokers; see ``balanced_topic``), is
filled with ``--records`` records (100-byte values, 16-byte keys) and then
read from the beginning, by:

* confluent-kafka: ``Consumer.assign`` + ``consume(num_messages=N)`` until every
  record was seen, touching each message's value (the peer's fastest Python path);
* kafkawire ``Consumer.poll(max_records=N)``: record objects, each value touched;
* kafkawire ``Consumer.poll_arrow(max_records=N)``: one ``pyarrow.RecordBatch`` per
  poll, rows counted (no Python object per record).

Both read from offset 0, given with the assignment (``TopicPartition(topic, p, 0)``,
``seek``), not looked up.  Every reader is a fresh consumer (nothing cached); each
reads once untimed (the first read in a process pays one-time costs: lazily imported
modules, first allocations), then ``--repeat`` times, interleaved, each after a full
``gc.collect()``, and the median time counts.  The ratios printed are kafkawire's records per second over
confluent-kafka's (see below for which of its two runs), with the range of each
round's ratio against that run of the same round.  Modules are imported before
the clock starts (``pyarrow`` too, which ``poll_arrow`` would otherwise import
in its first timed run).  The mock cluster runs in this process (its thread is
``rdk:mock``); where Linux's ``/proc`` tells, the CPU time it spent serving each
reader is printed too, to show whether a read waited for the mock or for its reader.
Run:
``python benchmarks/bench_consumer.py [--records 150000] [--batch 10000] [--repeat 5]
[--codec none]``.  The mock keeps about 5 MB per partition, so keep
``--records`` under about 150 000.

confluent-kafka runs twice per round: with its defaults, and tuned so that its
prefetch never pauses (``queued.min.messages`` 1 000 000, ``fetch.queue.backoff.ms``
0).  With the defaults, many rounds take about a second longer: when its prefetch
gets ahead of ``consume`` by more than ``queued.min.messages`` (100 000 records),
librdkafka stops fetching those partitions for ``fetch.queue.backoff.ms`` (1 000 ms)
even after the queue was drained, so the last records of a 150 000-record read wait
for the backoff.  That pause is an artefact of reading a finite topic, so the
ratios are given against the faster of the two runs by median (the tuned one, unless
the defaults missed the pause in most rounds; the output names it), and against the
defaults in brackets.
"""
from __future__ import annotations

import argparse
import collections
import gc
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import _harness as H  # noqa: E402
import confluent_kafka as ck  # noqa: E402
import pyarrow  # noqa: E402,F401  (imported before the clock starts, as confluent-kafka is)

import kafkawire  # noqa: E402
from kafkawire import _kernels  # noqa: E402

PARTITIONS = 4


def balanced_topic(bootstrap: str, stem: str) -> str:
    """A new topic whose partitions are led as Kafka places them, spread evenly over the
    brokers (with 4 partitions on 3 brokers: 2, 1 and 1).  The mock picks each partition's
    leader at random, so a read's speed would depend on that draw (one broker leading 3 of
    the 4 partitions answers most of the records with one fetch in flight); topics are
    created until one has Kafka's layout, and the bench reads that one."""
    with kafkawire.Client(bootstrap, allow_auto_create_topics=True) as c:
        brokers = len(c.metadata().brokers)
        for i in range(50):
            topic = f"{stem}-{i}"
            md = c.metadata([topic])
            while len(md.topics[topic].partitions) < PARTITIONS:
                time.sleep(0.05)
                md = c.metadata([topic])
            led = collections.Counter(p.leader for p in md.topics[topic].partitions.values())
            if len(led) == min(brokers, PARTITIONS) and max(led.values()) - min(led.values()) <= 1:
                return topic
    print(f"  (no evenly led topic after 50 tries; reading {topic}, leaders {dict(led)})")
    return topic


def fill(bootstrap: str, topic: str, n: int, codec: str) -> None:
    per = n // PARTITIONS
    with kafkawire.Client(bootstrap, allow_auto_create_topics=True) as c:
        c.metadata([topic])
        for p in range(PARTITIONS):
            for start in range(0, per, 5000):
                recs = [(b"key-%012d" % i, (b"value-%010d-" % i).ljust(100, b"x"))
                        for i in range(p * per + start, p * per + min(per, start + 5000))]
                c.produce(topic, recs, partition=p, compression=codec, acks=1)


def mock_cpu() -> float:
    """CPU seconds the mock cluster's thread (``rdk:mock``, in this process) has used so far;
    0 where ``/proc`` does not say (the bench then prints no mock CPU)."""
    total = 0
    try:
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/comm") as f:
                if f.read().strip() != "rdk:mock":
                    continue
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0
    return total / 1e9


# confluent-kafka without the prefetch pause (see the module docstring)
TUNED = {"queued.min.messages": 1_000_000, "fetch.queue.backoff.ms": 0}


def read_confluent(bootstrap: str, topic: str, n: int, batch: int, tuned: bool = False) -> float:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "bench",
                     "enable.auto.commit": False, "log_level": 0, **(TUNED if tuned else {})})
    c.assign([ck.TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    t0 = time.perf_counter()
    seen = 0
    while seen < n:
        for m in c.consume(num_messages=batch, timeout=1.0):
            if m.error() is None:
                len(m.value())
                seen += 1
    dt = time.perf_counter() - t0
    c.close()
    return dt


def read_kafkawire(bootstrap: str, topic: str, n: int, batch: int, arrow: bool = False) -> float:
    c = kafkawire.Consumer(bootstrap, auto_offset_reset="earliest", max_poll_records=batch)
    c.assign([(topic, p) for p in range(PARTITIONS)])
    for p in range(PARTITIONS):   # from offset 0, as confluent-kafka's assign is told
        c.seek((topic, p), 0)
    t0 = time.perf_counter()
    seen = 0
    while seen < n:
        if arrow:
            seen += c.poll_arrow(1000, max_records=batch).num_rows
            continue
        for r in c.poll(1000):
            len(r.value)
            seen += 1
    dt = time.perf_counter() - t0
    c.close()
    return dt


def read_arrow(bootstrap: str, topic: str, n: int, batch: int) -> float:
    return read_kafkawire(bootstrap, topic, n, batch, arrow=True)


def read_confluent_tuned(bootstrap: str, topic: str, n: int, batch: int) -> float:
    return read_confluent(bootstrap, topic, n, batch, tuned=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=150_000)
    ap.add_argument("--batch", type=int, default=10_000, help="records per poll/consume call")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--codec", default="none")
    H.add_results_option(ap)
    args = ap.parse_args()
    n = args.records - args.records % PARTITIONS
    owner = ck.Producer({"test.mock.num.brokers": 3, "log_level": 0})
    bootstrap = ",".join(f"{b.host}:{b.port}" for b in owner.list_topics(timeout=10)
                         .brokers.values())
    topic = balanced_topic(bootstrap, f"bench-consume-{int(time.time())}")
    fill(bootstrap, topic, n, args.codec)
    times: dict = {"confluent": [], "tuned": [], "kafkawire": [], "arrow": []}
    readers = {"confluent": read_confluent, "tuned": read_confluent_tuned,
               "kafkawire": read_kafkawire, "arrow": read_arrow}
    served: dict = {name: [] for name in readers}   # the mock's CPU seconds per read
    load0 = os.getloadavg()[0]
    for name, fn in readers.items():   # one untimed read each: first-use costs count for none
        gc.collect()
        fn(bootstrap, topic, n, args.batch)
    for _ in range(args.repeat):
        for name, fn in readers.items():
            # every read starts from a full collection, so none pays for the garbage an
            # earlier one left (confluent-kafka's message objects set the collector off)
            gc.collect()
            cpu0 = mock_cpu()
            times[name].append(fn(bootstrap, topic, n, args.batch))
            served[name].append(mock_cpu() - cpu0)
    # the median run of each reader: on a shared machine the best run flatters whoever got
    # the CPU at the right moment
    rate = {k: n / statistics.median(v) for k, v in times.items()}
    ref = "tuned" if rate["tuned"] >= rate["confluent"] else "confluent"   # the faster peer

    def spread(name):  # each round's ratio against the peer's run of the same round
        rs = [c / t for t, c in zip(times[name], times[ref])]
        return f"(rounds {min(rs):.2f}-{max(rs):.2f}x)"
    labels = {"confluent": "confluent-kafka consume(), defaults",
              "tuned": "confluent-kafka consume(), no prefetch pause",
              "kafkawire": "kafkawire poll()", "arrow": "kafkawire poll_arrow()"}
    print(f"kafkawire {kafkawire.__version__} ({_kernels.backend} kernels), confluent-kafka "
          f"{ck.version()} (librdkafka {ck.libversion()[0]}); {n} records of 100 B, "
          f"codec {args.codec}, {args.batch} per call, median of {args.repeat} runs")
    for key in ("confluent", "tuned"):
        print(f"  {labels[key] + ':':46s} {rate[key]:12,.0f} records/s")
    for key in ("kafkawire", "arrow"):
        print(f"  {labels[key] + ':':46s} {rate[key]:12,.0f} records/s  "
              f"x{rate[key] / rate[ref]:.2f} {spread(key)} "
              f"[x{rate[key] / rate['confluent']:.2f} against the defaults]")
    owner.flush(1)
    results = H.Results("consumer")
    wl = f"{n:,} records of 100 B, codec {args.codec}"
    load = f"load average {load0:.1f} -> {os.getloadavg()[0]:.1f}"
    print(f"  ({load}; ratios against the faster confluent-kafka run: {labels[ref]})")
    for key in times:  # each round's time: which side varies
        print(f"  rounds {key:10s} " + " ".join(f"{t * 1000:6.0f}" for t in times[key]) + " ms")
    if any(any(v) for v in served.values()):
        print("  the mock's CPU per read (median): " + ", ".join(
            f"{key} {statistics.median(v) * 1000:.1f} ms" for key, v in served.items()))
        results.meta["mock CPU per read (ms)"] = {
            labels[key]: round(statistics.median(v) * 1000, 1) for key, v in served.items()}
    for key in times:
        results.add(wl, labels[key], "consume", rate[key], "records/s (wall)")
        if key in ("kafkawire", "arrow"):  # the same-round spread
            rs = [c / t for t, c in zip(times[key], times[ref])]
            results.meta.setdefault("rounds", {})[labels[key]] = {
                "ratio min/median": [round(min(rs), 2), round(statistics.median(rs), 2)]}
    results.meta["load average"] = load
    results.meta["peer"] = labels[ref]
    results.set_ratios(labels[ref])
    results.write(args.results)


if __name__ == "__main__":
    main()
