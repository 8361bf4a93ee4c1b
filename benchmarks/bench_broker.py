"""Produce and consume throughput of confluent-kafka against ``kafkawire serve`` vs librdkafka's mock cluster.

The same client library (confluent-kafka) and the same records run against three
brokers in the same run:

* ``kafkawire serve`` in its own process, persisting to a temporary log dir
  (Kafka's on-disk format, default flush policy: the page cache, as Kafka);
* librdkafka's in-memory mock cluster (one broker, ``test.mock.num.brokers``), inside
  the bench's process, as the reference;
* the same mock cluster in a process of its own: what a broker in a process of its own
  scores when it costs no more than the mock (its ratio to the in-process mock is
  printed beside kafkawire's).

For each workload (value size x acks) a producer writes ``--records`` records
to a fresh 4-partition topic and ``flush``es; then a consumer assigned to the
partitions reads them all.  Produce latency (p50/p99 from ``produce`` to the
delivery report) is measured at a fixed moderate rate.  Each broker runs
``--repeat`` times, interleaved, after one untimed warm-up round; the median
counts (the best is printed too).  Which broker goes first rotates between
repeats and between workloads, and every timed phase (produce, consume) starts
with a full ``gc.collect()`` of the bench process, for every broker alike: the
consumer's message objects (10,000 a ``consume`` call) set off Python's cyclic
collector, whose full collections (8-18 ms, over every object of the process) fall
where the process's allocation history puts them; with a fixed order they fell on
the same broker's consume phase run after run, a bias of up to 0.3x in that
row's ratio that belonged to neither broker.  Ratio = kafkawire / mock (above 1:
kafkawire faster).  The broker's own CPU time per phase (produce, consume;
median over the runs) is printed, as the part of the cost
that is kafkawire's (the mock shares the client's process), and the load average
before and after (kept in the JSON).  Where each phase's time went is printed per
broker too (and kept in the JSON): the produce phase as its ``produce()`` calls and
its ``flush()``, the consume phase as its first ``consume()`` and the rest.  On a busy
2-core machine the two-process setup waits for the scheduler at every exchange, and
the ratios say more about the load than about any broker.  Topics are created with
CreateTopics on ``kafkawire serve``; the mock creates them when first asked for their
metadata (it answers CreateTopics only after a five-second timeout, a pause between
rounds that the broker would not get in use).

Then the Fetch path alone: a raw Fetch client (kafkawire's protocol codec on a
plain socket, discarding the bytes) reads the 1 KiB workload's partitions from
``kafkawire serve`` again and again (record bytes sent with ``sendfile``),
against reading the same segment files with ``readinto`` (both from the page
cache): bytes/s of each.

Before the rounds and again after them (while the broker's files are still cached), the
machine's page-cache write rate into memory it has not used lately against memory just
freed (see :func:`page_cache_write_rates`): on a virtual machine that returns freed memory
to its host, the broker's writes into new page-cache memory cost a fault on the host per
page, and its produce CPU time grows accordingly.

Run: ``python benchmarks/bench_broker.py [--quick] [--repeat 9] [--results PATH]``.
"""
from __future__ import annotations

import argparse
import functools
import gc
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, NamedTuple, Optional, Tuple

import _harness as H
import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

PARTITIONS = 4
KW, MOCK, OWN = "kafkawire serve", "librdkafka mock", "librdkafka mock, own process"
# librdkafka's mock keeps about 5 MB per partition: 4 partitions of 1 KiB records (a quarter
# of --records) stay within it up to this many
MOCK_MAX_RECORDS = 64_000
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from kafkawire.protocol import FetchRequest, encode_request  # noqa: E402


def process_cpu(pid: int) -> float:
    """CPU seconds of process ``pid`` so far (Linux ``/proc``; 0 elsewhere): the run time
    of its threads in nanoseconds (``schedstat``), else user + system in clock ticks."""
    try:
        total = 0
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        return total / 1e9
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_kafkawire(log_dir: str) -> Tuple["subprocess.Popen[bytes]", str]:
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


def make_topic(bootstrap: str, topic: str, create: bool = True) -> None:
    """A 4-partition topic: created with CreateTopics, or (``create=False``, the mock
    cluster, which answers CreateTopics only after a five-second timeout) by asking for its
    metadata, which makes the mock create it with its default of 4 partitions."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    if create:
        try:
            admin.create_topics([NewTopic(topic, PARTITIONS, 1)],
                                request_timeout=5)[topic].result(10)
        except Exception:
            pass
    md = admin.list_topics(topic, timeout=10)
    if len(md.topics[topic].partitions) != PARTITIONS:
        raise RuntimeError(f"{topic} has {len(md.topics[topic].partitions)} partitions")


class Phases(NamedTuple):
    """One round's timings of a workload against one broker, in seconds."""
    produce: float        #: the produce phase: every ``produce()`` call, then ``flush()``
    consume: float        #: the consume phase
    cpu_produce: float    #: CPU time of the broker's process in the produce phase (0: none)
    cpu_consume: float    #: the same in the consume phase
    calls: float          #: of the produce phase, the loop of ``produce()`` calls
    first: float          #: of the consume phase, until the first ``consume()`` returned


def throughput(bootstrap: str, topic: str, n: int, size: int, acks: str, broker_pid: int = 0,
               create: bool = True) -> Phases:
    """One round of a workload against the broker at ``bootstrap`` (the CPU counted is
    process ``broker_pid``'s, none without one)."""
    make_topic(bootstrap, topic, create)
    value = b"x" * size
    p = ck.Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
                     "enable.idempotence": False, "queue.buffering.max.messages": 2_000_000,
                     "log_level": 0})
    gc.collect()       # each timed phase starts from the same collector state (see above)
    cpu0 = process_cpu(broker_pid) if broker_pid else 0.0
    t0 = time.perf_counter()
    for i in range(n):
        while True:
            try:
                p.produce(topic, value=value, key=b"%012d" % i, partition=i % PARTITIONS)
                break
            except BufferError:
                p.poll(0.005)
    t_calls = time.perf_counter() - t0
    if p.flush(300):
        raise RuntimeError("records left undelivered")
    t_produce = time.perf_counter() - t0
    cpu_produce = process_cpu(broker_pid) - cpu0 if broker_pid else 0.0
    gc.collect()       # before the consumer starts fetching (at assign)
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-" + topic,
                     "enable.auto.commit": False, "log_level": 0})
    c.assign([ck.TopicPartition(topic, q, 0) for q in range(PARTITIONS)])
    cpu0 = process_cpu(broker_pid) if broker_pid else 0.0
    t0 = time.perf_counter()
    got = 0
    t_first = 0.0
    deadline = time.time() + 120
    while got < n and time.time() < deadline:
        # never ask for more than is left: consume() would wait out its timeout for them
        for m in c.consume(min(10_000, n - got), 1.0):
            if m.error() is None:
                got += 1
        t_first = t_first or time.perf_counter() - t0
    t_consume = time.perf_counter() - t0
    cpu_consume = process_cpu(broker_pid) - cpu0 if broker_pid else 0.0
    c.close()
    if got != n:
        raise RuntimeError(f"consumed {got} of {n}")
    return Phases(t_produce, t_consume, cpu_produce, cpu_consume, t_calls, t_first)


def latency(bootstrap: str, topic: str, rate: int, seconds: float, create: bool = True
            ) -> Tuple[float, float]:
    make_topic(bootstrap, topic, create)
    lat: List[float] = []
    p = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                     "enable.idempotence": False, "log_level": 0})

    def report(err: Optional[ck.KafkaError], msg: ck.Message, sent: float) -> None:
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
                  on_delivery=functools.partial(report, sent=sent))
        p.poll(0)
    p.flush(60)
    lat.sort()
    return lat[len(lat) // 2] * 1e3, lat[int(len(lat) * 0.99)] * 1e3


def fetch_rate(bootstrap: str, topic: str, seconds: float) -> float:
    """Bytes/s a raw Fetch client receives re-reading every partition of ``topic`` from
    offset 0 (the broker sends the records with ``sendfile``); the bytes are discarded."""
    host, port = bootstrap.rsplit(":", 1)
    req = FetchRequest(max_wait_ms=0, min_bytes=0, max_bytes=1 << 30, isolation_level=0,
                       topics=[dict(topic=topic, partitions=[
                           dict(partition=q, fetch_offset=0, partition_max_bytes=1 << 30)
                           for q in range(PARTITIONS)])])
    buf = bytearray(1 << 20)
    total = 0
    with socket.create_connection((host, int(port))) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        t0 = time.perf_counter()
        i = 0
        while True:
            i += 1
            sock.sendall(encode_request(req, 4, i, "bench"))
            head = sock.recv(4, socket.MSG_WAITALL)
            left = int.from_bytes(head, "big")
            total += 4 + left
            while left:
                got = sock.recv_into(buf, min(left, len(buf)))
                if not got:
                    raise RuntimeError("the broker closed the connection")
                left -= got
            elapsed = time.perf_counter() - t0
            if elapsed >= seconds:
                return total / elapsed


def file_read_rate(folders: List[str], seconds: float) -> float:
    """Bytes/s reading the ``.log`` files of ``folders`` with ``readinto`` (page cache)."""
    paths = [os.path.join(d, n) for d in folders for n in sorted(os.listdir(d))
             if n.endswith(".log")]
    buf = bytearray(1 << 20)
    total = 0
    t0 = time.perf_counter()
    while True:
        for p in paths:
            with open(p, "rb", buffering=0) as f:
                while True:
                    got = f.readinto(buf)
                    if not got:
                        break
                    total += got
        elapsed = time.perf_counter() - t0
        if elapsed >= seconds:
            return total / elapsed


def page_cache_write_rates(folder: str, size: int = 128 << 20) -> Tuple[float, float]:
    """Bytes/s writing ``size`` bytes to a new file in ``folder`` (the page cache takes
    memory it may never have touched), then again right after deleting it (the memory just
    freed).  On a virtual machine that hands freed memory back to its host, the first
    touch of each page costs a fault on the host: the first rate is then far below the
    second, and so is every write the broker makes into new page-cache memory."""
    chunk = b"\0" * (1 << 20)
    rates = []
    for _ in range(2):
        path = os.path.join(folder, "page-cache-probe")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            t0 = time.perf_counter()
            for _ in range(size // len(chunk)):
                os.write(fd, chunk)
            rates.append(size / (time.perf_counter() - t0))
        finally:
            os.close(fd)
            os.unlink(path)
    return rates[0], rates[1]


def start_mock_process() -> Tuple["subprocess.Popen[bytes]", str]:
    """A mock cluster in a process of its own (this script with ``--serve-mock``), and its
    bootstrap address; it stops when its standard input is closed."""
    proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--serve-mock"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    line = proc.stdout.readline().decode().strip()
    if not line:
        raise RuntimeError("the mock cluster's process did not start")
    return proc, line


def mock_cluster() -> Tuple[ck.Producer, str]:
    """A one-broker mock cluster in this process: the client that owns it (the cluster
    lives as long as it does) and its bootstrap address."""
    owner = ck.Producer({"test.mock.num.brokers": 1, "log_level": 0})
    md = owner.list_topics(timeout=10)
    return owner, ",".join(f"{b.host}:{b.port}" for b in md.brokers.values())


def serve_mock() -> None:
    """Run a one-broker mock cluster, print its bootstrap address, and wait for the end of
    standard input."""
    owner, bootstrap = mock_cluster()
    print(bootstrap, flush=True)
    sys.stdin.read()
    owner.flush(1)


def probe_page_cache() -> Optional[Tuple[float, float]]:
    """:func:`page_cache_write_rates` in a temporary folder of its own; None (with a
    message) when the disk refuses the writes, as the rates are only informative."""
    folder = tempfile.mkdtemp(prefix="bench-broker-")
    try:
        return page_cache_write_rates(folder)
    except OSError as exc:          # a full disk, say
        print(f"page-cache probe skipped: {exc}")
        return None
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _cell(rate: float, best: float, size: int) -> str:
    """A broker's median rate (its best in brackets) and MB/s, as the table prints them."""
    return f"{rate / 1e3:7.0f} k/s ({best / 1e3:5.0f}) {rate * size / 1e6:6.1f} MB/s"


def phase_split(times: Dict[Tuple[str, int, str], List[Phases]],
                workloads: List[Tuple[int, str, int]], names: List[str]
                ) -> Dict[str, Dict[str, List[float]]]:
    """Print where each phase's time went, per broker (medians over the rounds, ms): the
    produce phase as its ``produce()`` calls + ``flush()``, the consume phase as its first
    ``consume()`` + the rest; and return the same figures for the JSON."""
    print("where the time went, ms (median): produce = produce() calls + flush(); "
          "consume = first consume() + the rest")
    print(f"{'workload':22s}" + "".join(f" {name:>30s}" for name in names))
    split: Dict[str, Dict[str, List[float]]] = {}
    for size, acks, _ in workloads:
        for what in ("produce", "consume"):
            label = f"{what} {size}B acks={acks}"
            line = f"{label:22s}"
            for name in names:
                runs = times[(name, size, acks)]
                if what == "produce":
                    head = statistics.median(t.calls for t in runs)
                    tail = statistics.median(t.produce - t.calls for t in runs)
                else:
                    head = statistics.median(t.first for t in runs)
                    tail = statistics.median(t.consume - t.first for t in runs)
                line += f" {f'{head * 1e3:.1f} + {tail * 1e3:.1f}':>30s}"
                split.setdefault(label, {})[name] = [round(head * 1e3, 2), round(tail * 1e3, 2)]
            print(line)
    return split


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer records (for a busy machine)")
    ap.add_argument("--records", type=int, default=None,
                    help="records per 100-byte workload (a quarter as many of 1 KiB); at most "
                         f"{MOCK_MAX_RECORDS:,}: the mock keeps about 5 MB per partition")
    ap.add_argument("--repeat", type=int, default=9, help="runs per broker; the median counts")
    ap.add_argument("--rate", type=int, default=2000, help="records/s of the latency run")
    ap.add_argument("--serve-mock", action="store_true", help=argparse.SUPPRESS)
    H.add_results_option(ap)
    args = ap.parse_args()
    if args.serve_mock:
        serve_mock()
        return
    n100 = args.records or (20_000 if args.quick else 50_000)
    if n100 > MOCK_MAX_RECORDS:
        # beyond it the mock drops a partition's oldest records, its consumer (reading from
        # offset 0) is reset to the end and gets nothing
        ap.error(f"--records above {MOCK_MAX_RECORDS:,} overflow the mock cluster's partitions "
                 "(about 5 MB each); use fewer records")
    workloads = [(100, "1", n100), (100, "all", n100), (1024, "1", n100 // 4),
                 (1024, "all", n100 // 4)]
    load = [os.getloadavg()[0]]
    probes = {"before the rounds": probe_page_cache()}
    # the mock's process first: it ends with this one (its standard input closes) if
    # kafkawire serve fails to start
    mock_proc, own_bs = start_mock_process()
    log_dir = tempfile.mkdtemp(prefix="bench-broker-")
    proc, kw_bs = start_kafkawire(log_dir)
    mock_owner, mock_bs = mock_cluster()
    brokers = {KW: kw_bs, MOCK: mock_bs, OWN: own_bs}
    tag = {KW: "kw", MOCK: "mk", OWN: "mo"}
    times: Dict[Tuple[str, int, str], List[Phases]] = {}
    lat: Dict[str, Tuple[float, float]] = {}
    stamp = int(time.time())
    fetch_topic = ""
    try:
        for name, bs in brokers.items():      # warm-up, untimed (first connections, groups)
            throughput(bs, f"w{stamp}-{tag[name]}", 2000, 100, "1", create=name == KW)
        order = list(brokers.items())
        for rep in range(args.repeat):
            for w, (size, acks, n) in enumerate(workloads):
                # who goes first rotates between repeats (and between workloads)
                k = (rep + w) % len(order)
                for name, bs in order[k:] + order[:k]:
                    kw = name == KW
                    topic = f"b{stamp}-{rep}-{size}-{acks}-{tag[name]}"
                    times.setdefault((name, size, acks), []).append(
                        throughput(bs, topic, n, size, acks, proc.pid if kw else 0, create=kw))
                    if kw and size == 1024 and acks == "1":
                        fetch_topic = topic
        for name, bs in brokers.items():
            lat[name] = latency(bs, f"lat{stamp}-{tag[name]}", args.rate,
                                2.0 if args.quick else 5.0, create=name == KW)
        seconds = 1.0 if args.quick else 2.0
        folders = [os.path.join(log_dir, f"{fetch_topic}-{q}") for q in range(PARTITIONS)]
        sent, read = [], []
        for _ in range(args.repeat):
            sent.append(fetch_rate(kw_bs, fetch_topic, seconds))
            read.append(file_read_rate(folders, seconds))
        # before the broker's files are deleted: that would free memory for the probe to reuse
        probes["after the rounds"] = probe_page_cache()
    finally:
        proc.terminate()
        proc.wait(60)
        mock_owner.flush(1)
        assert mock_proc.stdin is not None
        mock_proc.stdin.close()
        mock_proc.wait(60)
        shutil.rmtree(log_dir, ignore_errors=True)
    load.append(os.getloadavg()[0])
    print(f"confluent-kafka {ck.version()[0]} (librdkafka {ck.libversion()[0]}) against three "
          f"brokers, median of {args.repeat} (best in brackets), {PARTITIONS} partitions; "
          f"load average {load[0]:.1f} before, {load[1]:.1f} after")
    print(f"{'workload':22s} {KW:>30s} {MOCK:>30s} {'ratio':>6s} {'serve CPU':>9s}"
          f" {'mock, own process':>30s} {'ratio':>6s}")
    results = H.Results("broker", quick=args.quick)
    results.meta["load_average"] = [round(x, 2) for x in load]
    results.meta["page_cache_write_mb_s"] = {
        when: {"new memory": round(probe[0] / 1e6), "memory just freed": round(probe[1] / 1e6)}
        for when, probe in probes.items() if probe is not None}
    for size, acks, n in workloads:
        for what in ("produce", "consume"):
            rate: Dict[str, Tuple[float, float]] = {}
            for name in brokers:
                runs = [n / getattr(t, what) for t in times[(name, size, acks)]]
                rate[name] = (statistics.median(runs), max(runs))
            (a, a_best), (b, b_best), (c, c_best) = rate[KW], rate[MOCK], rate[OWN]
            label = f"{what} {size}B acks={acks}"
            cpu = statistics.median(getattr(t, "cpu_" + what) for t in times[(KW, size, acks)])
            print(f"{label:22s} {_cell(a, a_best, size)} {_cell(b, b_best, size)} {a / b:5.2f}x"
                  f" {cpu * 1e3:6.1f} ms {_cell(c, c_best, size)} {c / b:5.2f}x")
            wl = f"{what} {size}-byte values, acks={acks}"
            results.add(wl, "kafkawire serve", what, a, "records/s")
            results.add(wl, "librdkafka mock cluster", what, b, "records/s")
            results.add(wl, "librdkafka mock cluster, own process", what, c, "records/s")
    results.meta["phase_split_ms"] = phase_split(times, workloads, list(brokers))
    for name, (p50, p99) in lat.items():
        print(f"produce latency at {args.rate}/s, acks=all, {name}: p50 {p50:.2f} ms, "
              f"p99 {p99:.2f} ms")
        results.add(f"produce latency at {args.rate} records/s", name, "p50", p50, "ms")
        results.add(f"produce latency at {args.rate} records/s", name, "p99", p99, "ms")
    ms, mr = statistics.median(sent), statistics.median(read)
    print(f"fetch served by sendfile: {ms / 1e6:.0f} MB/s to a raw Fetch client, reading the "
          f"same segment files {mr / 1e6:.0f} MB/s: {ms / mr:.2f}x")
    wl = "fetch served by sendfile (1 KiB records, page cache)"
    results.add(wl, "kafkawire serve, raw Fetch client", "bytes/s", ms, "bytes/s")
    results.add(wl, "readinto of the segment files", "bytes/s", mr, "bytes/s")
    for when, probe in probes.items():
        if probe is not None:
            print(f"page-cache writes of this machine {when}: {probe[0] / 1e6:.0f} MB/s into "
                  f"new memory, {probe[1] / 1e6:.0f} MB/s into memory just freed")
    results.set_ratios("librdkafka mock cluster", metrics=["produce", "consume"])
    results.set_ratios("readinto of the segment files", metrics=["bytes/s"])
    results.write(args.results)


if __name__ == "__main__":
    main()
