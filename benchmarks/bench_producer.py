"""``kafkawire.Producer`` vs confluent-kafka's producer, same mock cluster, same run.

The peer is librdkafka's mock cluster (3 brokers on loopback, started through
confluent-kafka's ``test.mock.num.brokers``).  Every contender writes the same
``--records`` keyless records of ``--size`` bytes (default 1M x 100 B) to its
own fresh topic (4 partitions) and is timed from the first call until every
record is acknowledged (``flush``):

* confluent-kafka: ``produce()`` + ``poll(0)`` per record (the documented
  loop; on ``BufferError`` it polls and retries), idempotent like kafkawire's
  default (``enable.idempotence=true``, ``acks=all``), its default linger
  (5 ms) and batch size;
* kafkawire ``send()`` per record, default settings (idempotent, ``acks=all``,
  ``linger_ms=5``, ``batch_size=262144``);
* kafkawire ``send_batch()`` of a ``pyarrow.Table`` with a ``value`` column
  (built before the clock starts: data already in hand), same settings.

Modules are imported before the clock starts (``pyarrow.compute`` too, which
``send_batch()`` would otherwise import in its first timed round).
Contenders alternate for ``--repeat`` rounds; the median round of each counts,
and each round's ratio against the peer's run of the same round is printed
(lowest, median, highest).  Rates
are records/s over wall time and over the process's CPU time (which includes
librdkafka's threads and the mock brokers', in-process, for every contender);
ratios are kafkawire / confluent-kafka.  On a shared machine the CPU ratio is
the steadier one.
Run: ``python benchmarks/bench_producer.py [--records N] [--size B] [--repeat R]
[--codec lz4] [--backend pure]``.
"""
from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import time
from typing import Tuple

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import _harness as H  # noqa: E402
import confluent_kafka as ck  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.compute  # noqa: E402,F401  (send_batch imports it; 30-40 ms, not in round 1's time)

import kafkawire  # noqa: E402
from kafkawire import _kernels  # noqa: E402

_topics = itertools.count()


def _topic(name: str) -> str:
    return f"bench-{name}-{next(_topics)}-{os.getpid()}"


def bench_confluent(bootstrap: str, values, codec: str) -> Tuple[float, float]:
    p = ck.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                     "compression.type": codec, "log_level": 0})
    topic = _topic("ck")
    p.list_topics(topic, timeout=10)
    produce, poll = p.produce, p.poll
    c0, t0 = time.process_time(), time.perf_counter()
    for v in values:
        while True:
            try:
                produce(topic, v)
                break
            except BufferError:  # librdkafka's queue is full: serve it, then try again
                poll(0.01)
        poll(0)
    left = p.flush(120)
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert left == 0, f"confluent-kafka left {left} records undelivered"
    return dt, cpu


def bench_kafkawire(bootstrap: str, codec: str, name: str, work) -> Tuple[float, float]:
    """Wall and CPU time of ``work(producer, topic)`` plus the flush that follows it."""
    with kafkawire.Producer(bootstrap, compression_type=codec) as p:
        topic = _topic(name)
        p.partitions_for(topic)
        c0, t0 = time.process_time(), time.perf_counter()
        check = work(p, topic)
        left = p.flush(120)
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert left == 0, f"kafkawire left {left} records undelivered"
    if check is not None:
        check()
    return dt, cpu


def bench_send(bootstrap: str, values, codec: str) -> Tuple[float, float]:
    def work(p, topic):
        send = p.send
        for v in values:
            send(topic, v)
    return bench_kafkawire(bootstrap, codec, "send", work)


def bench_send_batch(bootstrap: str, table, codec: str) -> Tuple[float, float]:
    def work(p, topic):
        future = p.send_batch(topic, table)

        def check():
            assert sum(r.record_count for r in future.result(10)) == table.num_rows
        return check
    return bench_kafkawire(bootstrap, codec, "arrow", work)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--codec", default="none")
    ap.add_argument("--backend", choices=["fast", "pure"], default=None)
    H.add_results_option(ap)
    args = ap.parse_args()
    if args.backend:
        _kernels.use(args.backend)
    owner = ck.Producer({"test.mock.num.brokers": 3, "log_level": 0})
    md = owner.list_topics(timeout=10)
    bootstrap = ",".join(f"{b.host}:{b.port}" for b in md.brokers.values())
    values = [(b"%010d-" % i).ljust(args.size, b"x") for i in range(args.records)]
    table = pa.table({"value": pa.array(values, pa.binary())})
    print(f"{args.records:,} records of {args.size} B, codec {args.codec}, kafkawire backend "
          f"{kafkawire.backend}, confluent-kafka {ck.__version__} (librdkafka "
          f"{ck.libversion()[0]}), median of {args.repeat} rounds")
    runs = {"confluent-kafka produce()+poll()": lambda: bench_confluent(bootstrap, values,
                                                                         args.codec),
            "kafkawire send()": lambda: bench_send(bootstrap, values, args.codec),
            "kafkawire send_batch(Table)": lambda: bench_send_batch(bootstrap, table, args.codec)}
    rounds = {name: [] for name in runs}  # (wall, cpu) per round
    load0 = os.getloadavg()[0]
    for _ in range(args.repeat):
        for name, run in runs.items():
            rounds[name].append(run())
    ref = "confluent-kafka produce()+poll()"
    # the median round of each contender: on a shared machine the best round flatters whoever
    # got the CPU at the right moment
    mid = {name: (statistics.median(w for w, _ in rs), statistics.median(c for _, c in rs))
            for name, rs in rounds.items()}
    base_wall, base_cpu = mid[ref]
    print(f"  {'':34s} {'wall s':>7s} {'rec/s (wall)':>13s} {'ratio':>6s}   {'cpu s':>7s} "
          f"{'rec/s (cpu)':>13s} {'ratio':>6s}   same-round ratios wall / cpu (min median max)")
    for name, (wall, cpu) in mid.items():
        # each round's ratio against the peer's run in the same round: the spread a busy
        # machine gives
        rw = [rw_ / w for (w, _), (rw_, _) in zip(rounds[name], rounds[ref])]
        rc = [rc_ / c for (_, c), (_, rc_) in zip(rounds[name], rounds[ref])]
        print(f"  {name:34s} {wall:7.3f} {args.records / wall:13,.0f} {base_wall / wall:5.2f}x   "
              f"{cpu:7.3f} {args.records / cpu:13,.0f} {base_cpu / cpu:5.2f}x   "
              f"{min(rw):.2f} {statistics.median(rw):.2f} {max(rw):.2f}x / "
              f"{min(rc):.2f} {statistics.median(rc):.2f} {max(rc):.2f}x")
    owner.flush(5)
    results = H.Results("producer")
    wl = f"{args.records:,} records of {args.size} B, codec {args.codec}"
    load = f"load average {load0:.1f} -> {os.getloadavg()[0]:.1f}"
    print(f"  ({load})")
    for name, rs in rounds.items():  # each round's wall time: which side varies
        print(f"  rounds {name:34s} " + " ".join(f"{w * 1000:6.0f}" for w, _ in rs) + " ms")
    for name, (wall, cpu) in mid.items():
        rw = [rw_ / w for (w, _), (rw_, _) in zip(rounds[name], rounds[ref])]
        rc = [rc_ / c for (_, c), (_, rc_) in zip(rounds[name], rounds[ref])]
        results.add(wl, name, "produce", args.records / wall, "records/s (wall)")
        results.add(wl, name, "produce (cpu)", args.records / cpu, "records/s (cpu)")
        if name != ref:  # the same-round spread, and how busy the machine was
            results.meta.setdefault("rounds", {})[name] = {
                "wall ratio min/median": [round(min(rw), 2), round(statistics.median(rw), 2)],
                "cpu ratio min/median": [round(min(rc), 2), round(statistics.median(rc), 2)]}
    results.meta["load average"] = load
    results.set_ratios("confluent-kafka produce()+poll()")
    results.write(args.results)


if __name__ == "__main__":
    main()
