"""A sample ``log.dirs`` folder for the demo, tests and benchmark, written with :class:`kafkawire.LogWriter`.

Topics (``scale`` records per data partition, roughly):

* ``orders`` (3 partitions): v2 batches cycling through every codec (none,
  gzip, snappy, lz4, zstd), keys ``customer-N``, JSON values, headers.
* ``clicks`` (2 partitions): null keys, lz4/zstd; partition 1 uses LogAppendTime.
* ``customers`` (1 partition, compacted): offset gaps inside and between
  batches, tombstones (null values).
* ``payments`` (2 partitions): two transactional producers committing and
  aborting, interleaved with a non-transactional producer.
* ``legacy`` (1 partition): a log that grew from magic 0 (none, gzip) through
  magic 1 (snappy, lz4) to v2 (zstd).

Segments are small (``segment_bytes``) so every partition has several.
"""
from __future__ import annotations

import json
import os
import random
from typing import Dict, List, Optional

from kafkawire.compression import CODECS
from kafkawire.log import LogWriter
from kafkawire.records import BatchBuilder

BASE_TS = 1_700_000_000_000


def _codecs() -> List[str]:
    out = ["none", "gzip", "snappy", "lz4"]
    try:
        import zstandard  # noqa: F401
        out.append("zstd")
    except ImportError:
        pass
    return out


def _order(rng: random.Random, i: int) -> bytes:
    return json.dumps({"order": i, "customer": rng.randrange(500), "amount": rng.randrange(1, 10_000) / 100,
                       "items": rng.randrange(1, 9), "note": "x" * rng.randrange(0, 60)}).encode()


def build_sample(out_dir: str, scale: int = 20_000, *, segment_bytes: int = 1 << 20,
                 seed: int = 7) -> Dict[str, int]:
    """Write the sample topics under ``out_dir``; returns records written per topic-partition folder."""
    rng = random.Random(seed)
    codecs = _codecs()
    os.makedirs(out_dir, exist_ok=True)
    counts: Dict[str, int] = {}

    def writer(name: str) -> "LogWriter":
        return LogWriter(os.path.join(out_dir, name), segment_bytes=segment_bytes)

    per_batch = 100
    for p in range(3):
        name, n, ts = f"orders-{p}", 0, BASE_TS + p
        with writer(name) as w:
            for b in range(scale // per_batch):
                bb = BatchBuilder(2, codecs[b % len(codecs)], base_offset=w.next_offset)
                for _ in range(per_batch):
                    ts += rng.randrange(0, 20)
                    headers = [] if n % 7 == 0 else [("source", rng.choice([b"web", b"app", b"pos"])),
                                                     ("trace", n.to_bytes(8, "big"))]
                    bb.append(_order(rng, n), key=f"customer-{rng.randrange(500)}".encode(),
                              timestamp=ts - rng.randrange(0, 50), headers=headers)
                    n += 1
                w.append_batch(bb.build())
        counts[name] = n

    for p in range(2):
        name, n, ts = f"clicks-{p}", 0, BASE_TS + 1000 + p
        with writer(name) as w:
            for b in range(scale // 250):
                ts += 250
                bb = BatchBuilder(2, ("lz4", codecs[-1])[b % 2], base_offset=w.next_offset,
                                  timestamp_type="LogAppendTime" if p == 1 else "CreateTime",
                                  log_append_time=ts if p == 1 else None)
                for i in range(250):
                    bb.append(b"/page/%d?ref=%d" % (rng.randrange(200), rng.randrange(9)), timestamp=ts + i)
                    n += 1
                w.append_batch(bb.build())
        counts[name] = n

    name, n, ts, off = "customers-0", 0, BASE_TS, 0
    with writer(name) as w:
        for b in range(max(1, scale // 400)):
            bb = BatchBuilder(2, codecs[b % len(codecs)], base_offset=off)
            for _ in range(50):
                off += rng.randrange(1, 6)           # compaction gaps
                ts += 40
                key = f"customer-{rng.randrange(500)}".encode()
                value = None if rng.random() < 0.1 else json.dumps({"name": key.decode(), "tier": rng.randrange(3)}).encode()
                bb.append(value, key=key, timestamp=ts, offset=off)
                n += 1
            w.append_batch(bb.build(), assign_offsets=False)
            off += rng.randrange(1, 20)              # whole batches cleaned away
    counts[name] = n

    for p in range(2):
        name, n, ts = f"payments-{p}", 0, BASE_TS + 5000 + p
        with writer(name) as w:
            epoch = {1001 + p * 10: 0, 1002 + p * 10: 0}
            for t in range(max(1, scale // 200)):
                pid = 1001 + p * 10 + t % 2
                for _ in range(2):
                    ts += 10
                    w.append_records([{"key": b"acct-%d" % rng.randrange(100), "value": b"%d" % rng.randrange(10**6),
                                       "timestamp": ts + i} for i in range(40)],
                                     compression=codecs[t % len(codecs)], producer_id=pid,
                                     producer_epoch=epoch[pid], is_transactional=True, base_sequence=0)
                    n += 40
                    w.append_records([{"key": None, "value": b"audit-%d" % t, "timestamp": ts}])
                    n += 1
                w.append_control("abort" if t % 3 == 2 else "commit", producer_id=pid,
                                 producer_epoch=epoch[pid], timestamp=ts + 50)
        counts[name] = n

    name, n, ts = "legacy-0", 0, BASE_TS + 9000
    with writer(name) as w:
        steps = [(0, "none"), (0, "gzip"), (1, "snappy"), (1, "lz4"), (2, codecs[-1])]
        for magic, codec in steps:
            for _ in range(max(1, scale // 500)):
                bb = BatchBuilder(magic, codec, base_offset=w.next_offset)
                for _ in range(20):
                    ts += 5
                    bb.append(b"legacy value %d" % n, key=b"k%d" % (n % 37),
                              timestamp=None if magic == 0 else ts)
                    n += 1
                w.append_batch(bb.build())
        counts[name] = n
    assert set(codecs) <= set(CODECS)
    return counts


def main(argv: Optional[List[str]] = None) -> None:
    import argparse
    ap = argparse.ArgumentParser(description="write kafkawire's sample log.dirs folder")
    ap.add_argument("out")
    ap.add_argument("--scale", type=int, default=20_000)
    a = ap.parse_args(argv)
    for k, v in build_sample(a.out, a.scale).items():
        print(k, v)


if __name__ == "__main__":
    main()
