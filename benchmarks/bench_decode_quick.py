"""Quick decode benchmark: kafkawire (fast, pure) vs aiokafka's Cython record codecs.

For tuning the record kernels; the full comparison (all peers, Java) is
``benchmarks/bench_records.py``.  Run: ``python benchmarks/bench_decode_quick.py [--quick]``;
the figures also go to ``benchmarks/results/decode_quick[-quick].json`` (``--results``).
Workloads (uncompressed, ~16 KiB batches): W1 1M records of 16-byte key/100-byte
value; W6 2M 10-byte values; W8 W1 with 3 headers.  Measures full decode
touching every field, header-only iteration, and CRC validation.
"""
from __future__ import annotations

import argparse
import time

import _harness as H
from kafkawire import _kernels

BATCH_BYTES = H.BATCH_BYTES


def build(n, key_size, value_size, nheaders):
    """Batches of ~16 KiB of identical records (a fixed key and value)."""
    from kafkawire._pure.records import encode_records_v2
    key = b"k" * key_size if key_size else None
    value = b"v" * value_size
    headers = [(f"header-{i}", b"h" * 8) for i in range(nheaders)]
    rec = encode_records_v2([0], [0], [key], [value], [headers])
    per_batch = max(1, (BATCH_BYTES - 61) // len(rec))
    return b"".join(H.v2_batches(n, per_batch, lambda i: value, key=lambda i: key,
                                 headers=lambda i: headers,
                                 timestamp=lambda i: H.T0 + i % per_batch))


CLOCK = time.perf_counter


def timeit(fn, repeat, min_sample=0.05, min_total=0.3):
    """Best per-call time over at least ``repeat`` samples and ``min_total`` seconds
    (``--cpu``: process CPU time, steadier on a busy machine)."""
    return H.best_per_call(fn, repeat, min_total, min_sample, clock=CLOCK)[0]


def kw_decode(data):
    import kafkawire
    n = 0
    for batch in kafkawire.iter_batches(data):
        for r in batch:
            r.offset, r.timestamp, r.key, r.value, r.headers
            n += 1
    return n


def kw_headers(data):
    import kafkawire
    n = 0
    for batch in kafkawire.iter_batches(data):
        # the same five header fields as aio_headers (last_offset ~ next_offset)
        batch.base_offset, batch.last_offset, batch.max_timestamp, batch.producer_id, batch.compression
        n += 1
    return n


def kw_crc(data):
    import kafkawire
    for batch in kafkawire.iter_batches(data, verify_crc=True):
        pass


def _memory_records_decode(MemoryRecords, data):
    """Full decode through aiokafka's or kafka-python's MemoryRecords (they share that API)."""
    mr = MemoryRecords(data)
    n = 0
    while True:
        batch = mr.next_batch()
        if batch is None:
            break
        for r in batch:
            r.offset, r.timestamp, r.key, r.value, r.headers
            n += 1
    return n


def aio_decode(data):
    return _memory_records_decode(H.aiokafka_memory_records(), data)


def kp_decode(data):
    return _memory_records_decode(H.kafka_python_memory_records(), data)


def aio_headers(data):
    mr = H.aiokafka_memory_records()(data)
    n = 0
    while True:
        batch = mr.next_batch()
        if batch is None:
            break
        batch.base_offset, batch.next_offset, batch.max_timestamp, batch.producer_id, batch.compression_type
        n += 1
    return n


def aio_crc(data):
    mr = H.aiokafka_memory_records()(data)
    while True:
        batch = mr.next_batch()
        if batch is None:
            break
        batch.validate_crc()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--pure", action="store_true", help="also time the pure backend")
    ap.add_argument("--cpu", action="store_true", help="time with process CPU time")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", default="", help="comma-separated workloads, e.g. W1,W6")
    H.add_results_option(ap)
    args = ap.parse_args()
    global CLOCK
    if args.cpu:
        CLOCK = time.process_time
    scale = 10 if args.quick else 1
    H.require_fast()
    H.aiokafka_memory_records(cython=True)
    results = H.Results("decode_quick", quick=args.quick)
    workloads = {w: (H.WORKLOADS[w][0] // scale, *H.WORKLOADS[w][1:4]) for w in ("W1", "W6", "W8")}
    repeat = args.repeat
    if args.only:
        workloads = {k: v for k, v in workloads.items() if k in args.only.split(",")}
    print(f"crc32c impl: {_kernels._load('fast')['crc'].crc32c_impl()}")
    print(f"{'work':4} {'what':8} {'kw fast':>14} {'aiokafka':>14} {'ratio':>6}")
    for name, spec in workloads.items():
        data = build(*spec)
        n = spec[0]
        mb = len(data) / 1e6
        _kernels.use("fast")
        assert kw_decode(data) == aio_decode(data) == n
        for what, kw, aio, unit in (("decode", kw_decode, aio_decode, "rec"),
                                    ("headers", kw_headers, aio_headers, "rec"),
                                    ("crc", kw_crc, aio_crc, "MB")):
            tk = timeit(lambda: kw(data), repeat)
            ta = timeit(lambda: aio(data), repeat)
            if unit == "rec":
                fk, fa = f"{n / tk / 1e6:8.2f} Mrec/s", f"{n / ta / 1e6:8.2f} Mrec/s"
            else:
                fk, fa = f"{mb / tk / 1e3:8.2f} GB/s", f"{mb / ta / 1e3:8.2f} GB/s"
            print(f"{name:4} {what:8} {fk:>14} {fa:>14} {ta / tk:6.2f}x", flush=True)
            unit_name = "records/s" if unit == "rec" else "MB/s"
            amount = n if unit == "rec" else mb
            results.add(name, "kafkawire fast", what, amount / tk, unit_name)
            results.add(name, "aiokafka Cython", what, amount / ta, unit_name)
        if args.pure:
            _kernels.use("pure")
            tp = timeit(lambda: kw_decode(data), 1)
            tkp = timeit(lambda: kp_decode(data), 1)
            print(f"{name:4} {'pure':8} {n / tp / 1e6:8.2f} Mrec/s {n / tkp / 1e6:8.2f} Mrec/s "
                  f"{tkp / tp:6.2f}x  (kafkawire pure vs kafka-python)", flush=True)
            results.add(name, "kafkawire pure", "decode", n / tp, "records/s")
            results.add(name, "kafka-python", "decode", n / tkp, "records/s")
            _kernels.use("fast")
    results.set_ratios("aiokafka Cython")
    results.write(args.results)


if __name__ == "__main__":
    main()
