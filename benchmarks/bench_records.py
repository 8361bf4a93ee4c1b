"""Record-batch decoding: kafkawire against every peer, in one run, on the same files.

    python benchmarks/bench_records.py [--quick] [--only W1,W6] [--peers fast,aiokafka,...]
                                       [--results PATH]

Workloads (v2 batches of ~16 KiB of records, as a producer with batch.size=16384 writes):
W1 1M records, 16-byte key / 100-byte value, uncompressed; W2-W5 the same with lz4, zstd,
snappy, gzip; W6 2M records with 10-byte values; W7 20k records with 10 KiB values;
W8 W1 with 3 headers.  Files are generated once with kafkawire's builder and cached in
``$TMPDIR/kafkawire-bench-records`` (``--quick``: a tenth of the records).

Times are the best CPU time of the measuring thread over several runs, in samples of
at least 50 ms, and over ``--rounds`` processes per peer (the machines are shared).  Measures, per peer and workload: header-only batch iteration, full decode into record
objects touching every field (offset, timestamp, key, value, headers), and CRC
validation; for kafkawire also ``RecordBatch.validate()`` (the CRC and every record's
structure), alternating with the CRC pass in one process over the same bytes: the
ratio of the two in each process, and their median over the ``--rounds`` processes.  Peers, each in its own subprocess so backends cannot leak:
kafkawire fast; kafkawire pure (``KAFKAWIRE_BACKEND=pure``); aiokafka's Cython codecs
(asserted in use); aiokafka pure (``AIOKAFKA_NO_EXTENSIONS=1``); kafka-python; Kafka's
Java reader (``FileRecords`` after JIT warm-up, javac'd against kafka-clients 3.9.1);
and the codec library alone decompressing the same payloads (the bar for compressed
workloads).  Slow pure-Python peers run on a prefix of each file (said in the table);
rates are per record/byte so they stay comparable.

The bars are read from further processes in which the loops being compared take
turns over one buffer (kafkawire fast and aiokafka's Cython; for compressed
workloads also the decompression stage, the codec alone and the full-decode loop
over records already decoded, which bounds what any decoder can reach): where a
buffer lands in memory moves a pass by up to ±40% from one process to the next.

The figures also go to ``benchmarks/results/records[-quick].json`` (see ``_harness.py``).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _harness as H

ROOT = H.ROOT
BATCH_BYTES = H.BATCH_BYTES
T0 = H.T0

#: name -> (records, key bytes, value bytes, headers, codec)
WORKLOADS = H.WORKLOADS
PEERS = ("fast", "pure", "aiokafka", "aiokafka-pure", "kafka-python", "java", "codec")
LABELS = {"fast": "kafkawire fast", "pure": "kafkawire pure", "aiokafka": "aiokafka Cython",
          "aiokafka-pure": "aiokafka pure", "kafka-python": "kafka-python",
          "java": "Kafka Java (FileRecords)", "codec": "codec library alone"}
#: Pure-Python peers decode this share of each file (a prefix cut at a batch boundary).
SLOW_SHARE = {"pure": 0.25, "aiokafka-pure": 0.1, "kafka-python": 0.1}
#: ... and validate CRCs on this share (kafka-python's CRC-32C is pure Python).
SLOW_CRC_SHARE = {"pure": 0.03, "aiokafka-pure": 0.02, "kafka-python": 0.02}


# ------------------------------------------------------------------------ workloads

def generate(name: str, path: Path, scale: float) -> None:
    n, ksize, vsize, nheaders, codec = WORKLOADS[name]
    n = max(1, int(n * scale))
    rnd = random.Random(int(name[1:]))
    per_record = ksize + vsize + 9 + nheaders * 26 + 2
    per_batch = max(1, BATCH_BYTES // per_record)
    fixed = [("source", b"bench"), ("content-type", b"application/json")]

    def headers(i):
        return [("trace-id", b"%016x" % rnd.getrandbits(64)), *fixed] if nheaders else ()

    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as f:
        for batch in H.v2_batches(n, per_batch, H.text_values(vsize, rnd),
                                  key=(lambda i: b"key-%012d" % i) if ksize else (lambda i: None),
                                  headers=headers, codec=codec, producer_id=1000, producer_epoch=0,
                                  base_sequence=lambda offset: offset & 0x7FFFFFFF):
            f.write(batch)
    tmp.rename(path)


def workload_files(names, quick: bool):
    cache = Path(tempfile.gettempdir()) / "kafkawire-bench-records"
    cache.mkdir(exist_ok=True)
    files = {}
    for name in names:
        path = cache / f"{name}{'-quick' if quick else ''}.log"
        if not path.exists():
            t = time.perf_counter()
            generate(name, path, 0.1 if quick else 1.0)
            print(f"  generated {path} ({path.stat().st_size / 1e6:.1f} MB) in "
                  f"{time.perf_counter() - t:.1f}s", file=sys.stderr)
        files[name] = path
    return files


prefix_length = H.prefix_by_share


# -------------------------------------------------------------------------- workers

#: Best per-call CPU time (see ``_harness.best_per_call``).
_best = H.best_per_call


def _worker_kafkawire(data, repeat):
    import kafkawire
    iter_batches = kafkawire.iter_batches

    def header():
        s = 0
        for b in iter_batches(data):
            s += b.base_offset + b.last_offset + b.max_timestamp + b.producer_id
            b.compression
        return s

    def decode():
        n = 0
        for b in iter_batches(data):
            for r in b:
                r.offset, r.timestamp, r.key, r.value, r.headers
                n += 1
        return n

    def crc():
        for b in iter_batches(data, verify_crc=True):
            pass
        return 0

    def validate():
        # RecordBatch.validate(): the CRC and every record's structure, no record objects
        for b in iter_batches(data):
            b.validate()
        return 0

    def stage():
        # the decompression stage alone: every batch's records region, decompressed
        for b in iter_batches(data):
            b.records_bytes()
        return 0

    return header, decode, crc, stage, validate


def _loop_alone(data):
    """The full-decode loop with no decoding at all: the first batch's records, already
    decoded and hot in cache, walked once per batch of the file.  No decoder can hand
    over records faster than this loop takes them, so codec time + this time bounds
    what any full decode of a compressed workload can reach."""
    import kafkawire
    batches = list(kafkawire.iter_batches(data))
    first = batches[0].records()
    lists = [first] * sum(1 for b in batches if b.record_count)

    def loop():
        n = 0
        for recs in lists:
            for r in recs:
                r.offset, r.timestamp, r.key, r.value, r.headers
                n += 1
        return n

    return loop


def _worker_aiokafka(data, repeat, expect_cython):
    return _memory_records_loops(H.aiokafka_memory_records(expect_cython), data, "aiokafka")


def _memory_records_loops(MemoryRecords, data, name):
    """Header-only, full-decode and CRC loops over aiokafka's or kafka-python's MemoryRecords
    (the two share that API); the same five header fields kafkawire's loop reads."""

    def header():
        s = 0
        mr = MemoryRecords(data)
        while True:
            b = mr.next_batch()
            if b is None:
                return s
            s += b.base_offset + b.next_offset + b.max_timestamp + b.producer_id
            b.compression_type

    def decode():
        n = 0
        mr = MemoryRecords(data)
        while True:
            b = mr.next_batch()
            if b is None:
                return n
            for r in b:
                r.offset, r.timestamp, r.key, r.value, r.headers
                n += 1

    def crc():
        mr = MemoryRecords(data)
        while True:
            b = mr.next_batch()
            if b is None:
                return 0
            if not b.validate_crc():
                raise AssertionError(f"{name}: CRC mismatch")

    return header, decode, crc


def _worker_kafka_python(data, repeat):
    return _memory_records_loops(H.kafka_python_memory_records(), data, "kafka-python")


def _codec_payloads(data):
    """The compressed records region of every v2 batch, and the codec id."""
    out = []
    pos, n = 0, len(data)
    codec = 0
    mv = memoryview(data)
    while pos < n:
        (length,) = struct.unpack_from(">i", data, pos + 8)
        codec = struct.unpack_from(">h", data, pos + 21)[0] & 7
        out.append(mv[pos + 61:pos + 12 + length])
        pos += 12 + length
    return codec, out


def _worker_codec(data, repeat):
    """The codec library alone (no framing work that it cannot do itself)."""
    codec, payloads = _codec_payloads(data)
    if codec == 0:
        return None
    if codec == 1:
        import zlib

        def one(p):
            return zlib.decompress(p, 31)
    elif codec == 2:
        import snappy
        # xerial framing: the library decompresses the raw blocks; splitting them is ours
        blocks = []
        for p in payloads:
            q = 16
            while q < len(p):
                (size,) = struct.unpack_from(">i", p, q)
                blocks.append(p[q + 4:q + 4 + size])
                q += 4 + size
        payloads = blocks
        one = snappy.uncompress
    elif codec == 3:
        import lz4.frame
        one = lz4.frame.decompress
    else:
        import zstandard
        dctx = zstandard.ZstdDecompressor()

        def one(p):   # one-shot: the library's fastest call (the frames carry their size)
            return dctx.decompress(p, max_output_size=1 << 24)

    def decode():
        for p in payloads:
            one(p)
        return 0
    return None, decode, None


#: Best per-call CPU time of each loop, sampled in turn (see ``_harness.alternate``).
_alternate = H.alternate


def _paired(data, repeat: int) -> dict:
    """The bars' ratios from one process: kafkawire fast against aiokafka's Cython and the codec.

    Each peer in its own process sees its own memory placement for the file's
    buffer, which alone moves a pass by up to ±40% from one process to the next
    and swamps the differences the bars are about.  Here the loops being compared
    walk the same buffer in one process, in turn: header-only and full decode
    against aiokafka; for a compressed workload, the decompression stage, the full
    decode, and the loop alone against the codec alone.
    """
    kw_header, kw_decode, _, kw_stage, _ = _worker_kafkawire(data, repeat)
    aio_header, aio_decode, _ = _worker_aiokafka(data, repeat, True)
    out = {"header": _alternate({"fast": kw_header, "aiokafka": aio_header}, repeat, 1.0),
           "decode": _alternate({"fast": kw_decode, "aiokafka": aio_decode}, repeat, 0.5)}
    if len(data) > 22 and data[22] & 7:
        codec_decode = _worker_codec(data, repeat)[1]
        out["codec"] = _alternate({"codec": codec_decode, "stage": kw_stage, "decode": kw_decode,
                                   "loop": _loop_alone(data)}, repeat, 0.5)
    return out


def worker_main(peer: str, path: str, limit: int, crc_limit: int, repeat: int) -> None:
    data = Path(path).read_bytes()
    if peer == "pair":
        from kafkawire import _kernels
        assert _kernels.backend == "fast", _kernels.backend
        print(json.dumps(_paired(data, repeat)))
        return
    crc_data = data[:crc_limit]
    data = data[:limit]
    stage = validate_fn = None
    if peer in ("fast", "pure"):
        from kafkawire import _kernels
        assert _kernels.backend == peer, (_kernels.backend, peer)
        fns = _worker_kafkawire(data, repeat)
        stage = fns[3]
        fns = fns[:3]
        crc_fn, validate_fn = _worker_kafkawire(crc_data, repeat)[2::2]
    elif peer in ("aiokafka", "aiokafka-pure"):
        fns = _worker_aiokafka(data, repeat, peer == "aiokafka")
        crc_fn = _worker_aiokafka(crc_data, repeat, peer == "aiokafka")[2]
    elif peer == "kafka-python":
        fns = _worker_kafka_python(data, repeat)
        crc_fn = _worker_kafka_python(crc_data, repeat)[2]
    else:
        fns = _worker_codec(data, repeat)
        crc_fn = None
    header, decode, _ = fns
    res = {"bytes": len(data), "crc_bytes": len(crc_data)}
    if decode is not None:
        decode()  # warm caches, import codecs
        res["decode"], nrec = _best(decode, repeat, 0.3)
        if nrec:
            res["records"] = nrec
    # passes of a few ms: more samples, so the best one is from a quiet moment
    if header is not None:
        res["header"], _ = _best(header, repeat, 1.0)
    if validate_fn is not None:
        # the CRC pass and validate() alternate in this process, over the same bytes
        both = _alternate({"crc": crc_fn, "validate": validate_fn}, repeat, 1.0)
        res["crc"], res["validate"] = both["crc"][0], both["validate"][0]
        res["validate_vs_crc"] = [res["crc"] / res["validate"]]
    elif crc_fn is not None:
        res["crc"], _ = _best(crc_fn, repeat, 1.0)
    if stage is not None and len(data) > 22 and data[22] & 7:
        res["stage"], _ = _best(stage, repeat, 1.0)
    print(json.dumps(res))


def run_worker(peer, path, limit, crc_limit, repeat):
    env = dict(os.environ)
    env.pop("KAFKAWIRE_BACKEND", None)
    env.pop("AIOKAFKA_NO_EXTENSIONS", None)
    if peer == "pure":
        env["KAFKAWIRE_BACKEND"] = "pure"
    elif peer in ("fast", "pair"):
        env["KAFKAWIRE_BACKEND"] = "fast"
    elif peer == "aiokafka-pure":
        env["AIOKAFKA_NO_EXTENSIONS"] = "1"
    proc = subprocess.run([sys.executable, __file__, "--worker", peer, str(path), str(limit),
                           str(crc_limit), str(repeat)], env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "failed"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ----------------------------------------------------------------------------- Java

def run_java(files, quick):
    jars = H.kafka_jars()
    if jars is None:
        return {}, H.JAVA_MISSING
    out, cp = H.compile_java(ROOT / "benchmarks" / "java" / "BenchRecords.java", jars)
    proc = subprocess.run(["java", "-Xmx2g", "-cp", cp, "BenchRecords", "1" if quick else "4",
                           "3" if quick else "5", *map(str, files.values())],
                          capture_output=True, text=True)
    import shutil
    shutil.rmtree(out, ignore_errors=True)
    if proc.returncode != 0:
        return {}, proc.stderr[-500:]
    res = {}
    names = {str(p): n for n, p in files.items()}
    for line in proc.stdout.splitlines():
        d = json.loads(line)
        res[names[d["path"]]] = d
    return res, None


# ------------------------------------------------------------------------------ main

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a tenth of the records, fewer repeats")
    ap.add_argument("--only", default=",".join(WORKLOADS), help="workloads, e.g. W1,W6")
    ap.add_argument("--peers", default=",".join(PEERS), help=f"subset of {','.join(PEERS)}")
    ap.add_argument("--json", help="also write all raw results to this file")
    H.add_results_option(ap)
    ap.add_argument("--rounds", type=int, default=2,
                    help="run every peer's process this many times, alternating peers, and "
                         "keep each measurement's best (a loaded machine moves one process's "
                         "figures by tens of percent); default 2")
    args = ap.parse_args()
    names = [w.strip() for w in args.only.split(",") if w.strip()]
    peers = [p.strip() for p in args.peers.split(",") if p.strip()]
    repeat = 3 if args.quick else 5

    import kafkawire
    print(f"kafkawire backend in this process: {kafkawire.backend}; python {sys.version.split()[0]}; "
          f"{os.cpu_count()} CPUs", file=sys.stderr)
    files = workload_files(names, args.quick)
    results = {n: {} for n in names}
    java_note = None
    if "java" in peers:
        print("  running Kafka's Java reader ...", file=sys.stderr)
        java, java_note = run_java(files, args.quick)
        for n, d in java.items():
            results[n]["java"] = {"bytes": files[n].stat().st_size, "crc_bytes": files[n].stat().st_size,
                                  "records": d["records"], "header": d["header"],
                                  "decode": d["decode"], "crc": d["crc"]}
    for n in names:
        data = files[n].read_bytes()
        for peer in [p for _ in range(max(1, args.rounds)) for p in peers]:
            if peer == "java":
                continue
            if peer == "codec" and WORKLOADS[n][4] == "none":
                continue
            share = SLOW_SHARE.get(peer, 1.0)
            crc_share = SLOW_CRC_SHARE.get(peer, 1.0)
            if args.quick:
                share, crc_share = min(1.0, share * 4), min(1.0, crc_share * 4)
            limit = prefix_length(data, share)
            crc_limit = prefix_length(data, crc_share)
            print(f"  {n} {peer} ...", file=sys.stderr)
            res = run_worker(peer, files[n], limit, crc_limit, 2 if peer in SLOW_SHARE else repeat)
            prev = results[n].get(peer)
            if prev is not None and "error" not in prev and "error" not in res:
                for key in ("decode", "header", "crc", "stage", "validate"):
                    if key in prev and key in res:
                        res[key] = min(prev[key], res[key])
                # every process's same-run ratio (the table reports their median)
                res["validate_vs_crc"] = prev.get("validate_vs_crc", []) + res.get("validate_vs_crc", [])
            results[n][peer] = res
            results[n][peer]["share"] = limit / len(data)
            results[n][peer]["crc_share"] = crc_limit / len(data)
        if "fast" in peers and "aiokafka" in peers:
            pairs = []
            for _ in range(max(3, args.rounds)):
                print(f"  {n} bars: kafkawire fast, aiokafka and the codec in one process ...",
                      file=sys.stderr)
                res = run_worker("pair", files[n], len(data), len(data), repeat)
                if "error" not in res:
                    pairs.append(_pair_ratios(res))
            if pairs:
                results[n]["paired"] = pairs
        # records in a prefix: scale by bytes (batches are uniform)
        total = WORKLOADS[n][0] * (0.1 if args.quick else 1.0)
        for peer, r in results[n].items():
            if isinstance(r, dict):
                r.setdefault("records", total * r.get("share", 1.0))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    print_tables(results, names, peers, java_note, args.quick)
    write_results(results, names, peers, args)


def write_results(results, names, peers, args) -> None:
    """The harness's JSON: every peer's rates, ratios against aiokafka's Cython codecs."""
    out = H.Results("records", quick=args.quick)
    if "java" in peers:
        out.version("java", H.java_version())
    for kind, metric in (("decode", "full decode"), ("header", "header-only iteration"),
                         ("crc", "CRC validation"), ("validate", "RecordBatch.validate()")):
        for n in names:
            wl = f"{n} {WORKLOADS[n][4]}"
            for p in peers:
                rate = _rate(results[n].get(p), kind)
                if rate is not None:
                    share = results[n][p].get("crc_share" if kind in ("crc", "validate")
                                              else "share", 1.0)
                    out.add(wl, LABELS[p], metric, rate[0], "records/s (CPU)",
                            note=f"on {share:.1%} of the file" if share < 0.999 else "")
    for n in names:
        for key, metric in (("header", "header-only iteration"), ("decode", "full decode")):
            vals = [p[key] for p in results[n].get("paired", []) if key in p]
            if vals:
                out.add(f"{n} {WORKLOADS[n][4]}", "median over processes",
                        f"{metric}, kafkawire fast ÷ aiokafka Cython in one process",
                        _median(vals), "ratio")
    for n in names:
        vals = (results[n].get("fast") or {}).get("validate_vs_crc")
        if vals:
            out.add(f"{n} {WORKLOADS[n][4]}", "median over processes",
                    "RecordBatch.validate() ÷ CRC validation, kafkawire fast in one process",
                    _median(vals), "ratio",
                    note=", ".join(f"{v:.2f}" for v in vals))
    out.set_ratios(LABELS["aiokafka"], metrics=("full decode", "header-only iteration",
                                                "CRC validation"))
    out.write(args.results)


def _pair_ratios(res: dict) -> dict:
    """One paired process's ratios (see ``_paired``)."""
    out = {"header": res["header"]["aiokafka"][0] / res["header"]["fast"][0],
           "decode": res["decode"]["aiokafka"][0] / res["decode"]["fast"][0]}
    if "codec" in res:
        c = res["codec"]
        t_codec = c["codec"][0]
        out["stage"] = t_codec / c["stage"][0]
        out["full"] = t_codec / c["decode"][0]
        loop_t, loop_n = c["loop"]
        n = c["decode"][1]     # records in the file (decode() counts them)
        out["ceiling"] = t_codec / (t_codec + loop_t / max(loop_n, 1) * n)
    return out


def _median(xs):
    xs = sorted(xs)
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2


def _rate(r, kind):
    """(records/s, MB/s) for a measurement, or None."""
    if not r or kind not in r or "error" in r:
        return None
    t = r[kind]
    on_crc_bytes = kind in ("crc", "validate")
    nbytes = r["crc_bytes"] if on_crc_bytes else r["bytes"]
    nrec = r["records"] * (r["crc_bytes"] / r["bytes"] if on_crc_bytes else 1.0)
    return nrec / t, nbytes / t / 1e6


def print_tables(results, names, peers, java_note, quick):
    cmd = "python benchmarks/bench_records.py" + (" --quick" if quick else "")
    print(f"\n`{cmd}` — records/s (M) and MB/s of the file's bytes; "
          "ratio = kafkawire fast / peer\n")
    for kind, title in (("decode", "Full decode into record objects (every field touched)"),
                        ("header", "Header-only batch iteration"),
                        ("crc", "CRC validation"),
                        ("validate", "RecordBatch.validate(): CRC + every record's structure "
                                     "(kafkawire only; ratio to its CRC pass in one process)")):
        print(f"#### {title}\n")
        cols = [p for p in peers if any(_rate(results[n].get(p), kind) for n in names)]
        print("| workload | " + " | ".join(LABELS[p] for p in cols) + " |")
        print("|---|" + "---|" * len(cols))
        for n in names:
            fast = _rate(results[n].get("fast"), kind)
            cells = []
            for p in cols:
                r = results[n].get(p)
                rate = _rate(r, kind)
                if rate is None:
                    err = (r or {}).get("error")
                    cells.append("error" if err else "–")
                    continue
                cell = f"{rate[0] / 1e6:.2f}M/s {rate[1]:,.0f}MB/s"
                if kind == "validate" and r.get("validate_vs_crc"):
                    cell += f" ({_median(r['validate_vs_crc']):.0%} of CRC)"
                elif p != "fast" and fast:
                    cell += f" (×{fast[0] / rate[0]:.2f})"
                share = r.get("crc_share" if kind in ("crc", "validate") else "share", 1.0)
                if share < 0.999:
                    cell += f" [{share:.1%}]"
                cells.append(cell)
            print(f"| {n} {WORKLOADS[n][4]} | " + " | ".join(cells) + " |")
        print()
    paired = [n for n in names if results[n].get("paired")]
    if paired:
        print("#### The bars' ratios, peers alternating in one process\n")
        print("Each peer above runs in its own process, and where the file's buffer lands in "
              "memory alone moves a pass by up to ±40% from one process to the next. Here the "
              "loops being compared alternate in one process over the same buffer (samples "
              "≥ 50 ms, ≥ 0.5–1 s each), in several processes; the median over processes, and "
              "each process's value. Ceiling = codec time / (codec time + the full-decode loop "
              "walking records already decoded and hot in cache): no reader that decompresses "
              "and then hands records to this loop can do better.\n")
        print("| workload | header-only fast ÷ aiokafka | full decode fast ÷ aiokafka "
              "| stage ÷ codec | full decode ÷ codec | ceiling |")
        print("|---|---|---|---|---|---|")
        for n in paired:
            cells = []
            for key, fmt in (("header", "×{:.2f}"), ("decode", "×{:.2f}"), ("stage", "{:.0%}"),
                             ("full", "{:.0%}"), ("ceiling", "{:.0%}")):
                vals = [p[key] for p in results[n]["paired"] if key in p]
                cells.append("–" if not vals else fmt.format(_median(vals)) + " ("
                             + ", ".join(fmt.format(v) for v in vals) + ")")
            print(f"| {n} {WORKLOADS[n][4]} | " + " | ".join(cells) + " |")
        print()
    compressed = [n for n in names if WORKLOADS[n][4] != "none"]
    if compressed and any(_rate(results[n].get("codec"), "decode") for n in compressed):
        print("#### Decompression stage (compressed workloads)\n")
        print("Every batch's records region decompressed (`RecordBatch.records_bytes()`, "
              "through `iter_batches`), against the codec library alone decompressing the "
              "same payloads; MB/s of the file's bytes.\n")
        cols = [p for p in ("fast", "pure") if p in peers]
        print("| workload | " + " | ".join(LABELS[p] + " stage" for p in cols)
              + " | codec library alone | fast stage / codec | fast full decode / codec |")
        print("|---|" + "---|" * (len(cols) + 3))
        for n in compressed:
            codec = _rate(results[n].get("codec"), "decode")
            cells = []
            for p in cols:
                r = _rate(results[n].get(p), "stage")
                cells.append("–" if r is None else f"{r[1]:,.0f}MB/s")
            fast_stage = _rate(results[n].get("fast"), "stage")
            fast_dec = _rate(results[n].get("fast"), "decode")
            cells.append("–" if codec is None else f"{codec[1]:,.0f}MB/s")
            for r in (fast_stage, fast_dec):
                cells.append("–" if r is None or codec is None else f"{r[0] / codec[0]:.0%}")
            print(f"| {n} {WORKLOADS[n][4]} | " + " | ".join(cells) + " |")
        print()
    print("[x%] = the pure-Python peer ran on that prefix of the file (too slow for all of it).")
    if java_note:
        print(f"Java reader skipped: {java_note}")
    print("\n#### Bars (issue 2)\n")
    checks = []

    def ratio(n, kind, a, b):
        ra, rb = _rate(results.get(n, {}).get(a), kind), _rate(results.get(n, {}).get(b), kind)
        return None if ra is None or rb is None else ra[0] / rb[0]

    def paired(n, key):
        vals = [p[key] for p in results.get(n, {}).get("paired", []) if key in p]
        return _median(vals) if vals else None

    for n in ("W1", "W6", "W8"):
        if n in names:
            checks.append((f"{n} decode fast ≥ 2× aiokafka Cython (one process, median)",
                           paired(n, "decode"), 2.0))
    if "W1" in names:
        r = _rate(results["W1"].get("fast"), "crc")
        checks.append(("W1 CRC validation ≥ 10 GB/s (value in GB/s)", r and r[1] / 1000, 10.0))
    for n in names:
        v = (results[n].get("fast") or {}).get("validate_vs_crc")
        v = _median(v) if v else None
        checks.append((f"{n} validate() ≥ ½ the CRC pass's speed (fast, one process, median "
                       "over processes)", v, 0.5))
    for n in names:
        checks.append((f"{n} header-only fast ≥ aiokafka Cython (one process, median)",
                       paired(n, "header"), 1.0))
    for n in names:
        if WORKLOADS[n][4] != "none":
            codec = WORKLOADS[n][4]
            checks.append((f"{n} {codec} decompression stage ≥ 70% of codec alone",
                           paired(n, "stage"), 0.7))
            checks.append((f"{n} {codec} full decode into records ≥ 70% of codec alone",
                           paired(n, "full"), 0.7))
            checks.append((f"{n} {codec} … the ceiling for any decoder in this loop",
                           paired(n, "ceiling"), 0.7))
    for n in names:
        checks.append((f"{n} pure decode ≥ kafka-python", ratio(n, "decode", "pure", "kafka-python"), 1.0))
    print("| bar | measured | met |")
    print("|---|---|---|")
    for label, value, bar in checks:
        if value is None:
            print(f"| {label} | – | – |")
        else:
            print(f"| {label} | {value:.2f} | {'yes' if value >= bar else 'NO'} |")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker_main(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]))
    else:
        main()
