"""Protocol codec throughput: kafkawire vs kafka-python's protocol classes, same run.

Messages: a MetadataResponse (v12) describing 1,000 partitions (10 topics x 100,
3 replicas each) and a FetchResponse (v16) carrying 10 MB of records (10
partitions x 1 MB).  For each, encode and decode throughput of kafkawire (both
kernel backends) and kafka-python (its current JSON-schema classes, and the
legacy ``kafka.protocol.old`` ones where they exist), printed with ratios.

    python benchmarks/bench_protocol_codec.py [--quick] [--results PATH]

The figures also go to ``benchmarks/results/protocol_codec[-quick].json``.
"""
from __future__ import annotations

import argparse
import io
import uuid

import _harness as H
from kafkawire import _kernels
import kafkawire.protocol as P

METADATA_V = 12
FETCH_V = 16


def metadata_response() -> P.MetadataResponse:
    topics = []
    for t in range(10):
        parts = [dict(partition_index=p, leader_id=p % 3, leader_epoch=7,
                      replica_nodes=[0, 1, 2], isr_nodes=[0, 1, 2], offline_replicas=[])
                 for p in range(100)]
        topics.append(dict(name=f"bench-topic-{t}", topic_id=uuid.UUID(int=t + 1),
                           is_internal=False, partitions=parts, topic_authorized_operations=-2147483648))
    brokers = [dict(node_id=i, host=f"broker-{i}.example.com", port=9092, rack=f"rack-{i}")
               for i in range(3)]
    return P.MetadataResponse(throttle_time_ms=0, brokers=brokers, cluster_id="kw-bench",
                              controller_id=1, topics=topics)


def fetch_response() -> P.FetchResponse:
    try:
        from kafkawire.records import BatchBuilder
        b = BatchBuilder()
        while len(b) < 1000:
            b.append(b"x" * 1000, key=b"k")
        batch = b.build()
    except Exception:  # records builder not available: any 1 MB blob is records for the codec
        batch = bytes(1_000_000)
    records = (batch * (1_000_000 // len(batch) + 1))[:1_000_000]
    parts = [dict(partition_index=p, high_watermark=10_000, last_stable_offset=10_000,
                  log_start_offset=0, records=records) for p in range(10)]
    return P.FetchResponse(session_id=0, responses=[dict(topic_id=uuid.UUID(int=9),
                                                         partitions=parts)])


def timeit(fn, seconds: float) -> float:
    """CPU seconds per call (best of several rounds; process time, so other
    processes on a busy machine distort it less than wall time)."""
    return H.best_doubling(fn, seconds)


def kafka_python_cases(name: str, version: int, body: bytes):
    """(label, encode, decode) callables for kafka-python, or [] if unavailable."""
    cases = []
    try:
        if name == "metadata":
            from kafka.protocol.metadata import MetadataResponse as KNew
        else:
            from kafka.protocol.consumer import FetchResponse as KNew
        obj = KNew.decode(body, version=version)
        obj._header = None  # kafka-python 3.0 leaves it unset on decoded messages; encode needs it
        assert obj.encode(version=version) == body
        cases.append(("kafka-python", lambda: obj.encode(version=version),
                      lambda: KNew.decode(body, version=version)))
    except Exception as exc:  # noqa: BLE001
        print(f"  (kafka-python current classes unavailable for {name}: {exc})")
    try:
        if name == "metadata":
            from kafka.protocol.old.metadata import MetadataResponse as KOld
        else:
            from kafka.protocol.old.fetch import FetchResponse as KOld
        if len(KOld) > version:
            cls = KOld[version]
            obj = cls.decode(io.BytesIO(body))
            cases.append(("kafka-python (old)", lambda: obj.encode(),
                          lambda: cls.decode(io.BytesIO(body))))
    except Exception as exc:  # noqa: BLE001
        print(f"  (kafka-python legacy classes unavailable for {name}: {exc})")
    return cases


def run(quick: bool, results: H.Results) -> None:
    seconds = 0.3 if quick else 2.0
    backends = ["fast", "pure"] if _kernels.fast_available() else ["pure"]
    for name, msg, version in (("metadata", metadata_response(), METADATA_V),
                               ("fetch", fetch_response(), FETCH_V)):
        body = msg.encode(version)
        cls = type(msg)
        print(f"\n{cls.__name__} v{version}: {len(body):,} bytes "
              f"({'1,000 partitions' if name == 'metadata' else '10 MB of records'})")
        rows = []
        for be in backends:
            _kernels.use(be)
            enc = timeit(lambda: msg.encode(version), seconds)
            dec = timeit(lambda: cls.decode(body, version), seconds)
            rows.append((f"kafkawire ({be})", enc, dec))
        _kernels.use(backends[0])
        for label, enc_fn, dec_fn in kafka_python_cases(name, version, body):
            rows.append((label, timeit(enc_fn, seconds), timeit(dec_fn, seconds)))
        ref = rows[0]
        print(f"  {'implementation':<22}{'encode ms':>11}{'MB/s':>9}{'decode ms':>11}{'MB/s':>9}"
              f"{'kw enc x':>10}{'kw dec x':>10}")
        for label, enc, dec in rows:
            mb = len(body) / 1e6
            print(f"  {label:<22}{enc * 1e3:>11.3f}{mb / enc:>9.0f}{dec * 1e3:>11.3f}{mb / dec:>9.0f}"
                  f"{enc / ref[1]:>10.1f}{dec / ref[2]:>10.1f}")
            wl = f"{cls.__name__} v{version}"
            results.add(wl, label, "encode", mb / enc, "MB/s (CPU)")
            results.add(wl, label, "decode", mb / dec, "MB/s (CPU)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="short timing rounds")
    H.add_results_option(ap)
    args = ap.parse_args()
    results = H.Results("protocol_codec", quick=args.quick)
    print(f"kafkawire backends: {'fast+pure' if _kernels.fast_available() else 'pure only'}")
    print("'kw enc x' / 'kw dec x': how many times kafkawire (first row) is faster")
    run(args.quick, results)
    results.set_ratios("kafka-python")
    results.write(args.results)


if __name__ == "__main__":
    main()
