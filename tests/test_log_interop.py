"""Partition folders written by Kafka's own classes (FileRecords + the broker's index rules),
read by kafkawire: every record, every offset and time lookup compared with Kafka's answer;
damaged copies; and the reverse: Kafka's reader validates what LogWriter wrote."""
from __future__ import annotations

import os
import random
import shutil

import pytest

from kafkawire import Log, LogWriter
from kafkawire.errors import CorruptRecordError, OffsetOutOfRangeError
from kafkawire.log import files as F

HELPER = "LogFolderHelper"

# name -> LogFolderHelper write options (see tests/java/LogFolderHelper.java)
CONFIGS = {
    "v2": "appends=400 segmentBytes=60000",
    "v2-lz4-chunks-record-ts": "codec=lz4 appends=200 batchesPerAppend=3 records=7 segmentBytes=50000 tsMode=record",
    "v0-gzip": "magic=0 codec=gzip appends=150 segmentBytes=40000",
    "v1-snappy-gaps": "magic=1 codec=snappy appends=200 gaps=1 segmentBytes=40000",
    "v1-plain": "magic=1 appends=60 records=5 segmentBytes=20000",
    "v2-zstd-txn": "codec=zstd appends=240 txn=1 segmentBytes=30000",
    "v2-small-cleaned-big": "appends=120 records=3 valueSize=60 segmentBytes=3000 baseGap=5 bigAt=40",
    "v2-prealloc-active": "appends=300 segmentBytes=70000 active=prealloc preallocate=65536",
    "v2-shuffled-ts": "appends=300 shuffleTs=1 segmentBytes=50000",
    "v2-logappendtime-gzip": "codec=gzip lat=1 appends=100 segmentBytes=30000",
    "mixed-magic-v0-v1-v2": "mixedMagic=1 codec=gzip appends=150 segmentBytes=25000",
}


def _unhex(s):
    return None if s == "-" else bytes.fromhex(s[1:])


def parse_java(out: bytes):
    segs, batches, aborted = [], [], []
    for line in (out.decode() if isinstance(out, bytes) else out).splitlines():
        f = line.split()
        if not f:
            continue
        if f[0] == "S":
            segs.append(int(f[1]))
        elif f[0] == "B":
            batches.append(dict(seg=int(f[1]), pos=int(f[2]), size=int(f[3]), base=int(f[4]),
                                last=int(f[5]), magic=int(f[6]), max_ts=int(f[7]),
                                control=f[8] == "1", txn=f[9] == "1", pid=int(f[10]), records=[]))
        elif f[0] == "R":
            batches[-1]["records"].append((int(f[1]), int(f[2]), _unhex(f[3]), _unhex(f[4])))
        elif f[0] == "A":
            aborted.append(tuple(int(x) for x in f[1:]))
    return segs, batches, aborted


def _records(batches, control=True):
    return [r for b in batches if control or not b["control"] for r in b["records"]]


def _multi(java_runner, commands):
    """Run several helper commands in one JVM; their outputs, in order."""
    text = "\n".join(" ".join(map(str, c)) for c in commands) + "\n"
    out = java_runner.run(HELPER, "multi", input=text.encode()).stdout.decode()
    parts = out.split("END\n")
    assert len(parts) == len(commands) + 1
    return parts[:-1]


@pytest.fixture(scope="module")
def kafka_folders(java_runner, tmp_path_factory):
    """Every config written by Kafka's classes, with Kafka's answers to lookups."""
    root = tmp_path_factory.mktemp("kafka-logs")
    rnd = random.Random(7)
    dirs = {name: str(root / f"{name}-0") for name in CONFIGS}
    written = _multi(java_runner, [["write", dirs[n]] + CONFIGS[n].split() for n in CONFIGS])
    out, lookups = {}, []
    for name, text in zip(CONFIGS, written):
        segs, batches, aborted = parse_java(text)
        recs = _records(batches)
        offsets = [r[0] for r in recs]
        lo, hi = offsets[0], offsets[-1]
        targets = sorted(set(rnd.sample(range(max(lo - 3, 0), hi + 3), min(250, hi - lo + 6))
                             + [lo, hi, hi + 1, 0]))
        stamps = sorted({r[1] for r in recs if r[1] >= 0})
        if stamps:
            tt = sorted(set(rnd.sample(stamps, min(150, len(stamps)))
                            + [stamps[0] - 10, stamps[-1], stamps[-1] + 1] + [s + 1 for s in stamps[:20:3]]))
        else:
            tt = [0, 1700000000000]
        lookups += [["offsetlookup", dirs[name]] + targets, ["timelookup", dirs[name]] + tt]
        out[name] = dict(dir=dirs[name], segs=segs, batches=batches, aborted=aborted, records=recs)
    answers = _multi(java_runner, lookups)
    for i, name in enumerate(CONFIGS):
        oa, ta = {}, {}
        for line in answers[2 * i].splitlines():
            _, t, seg, pos = line.split()
            oa[int(t)] = None if seg == "-1" else (int(seg), int(pos))
        for line in answers[2 * i + 1].splitlines():
            _, t, off, ts = line.split()
            ta[int(t)] = None if off == "-1" else (int(off), int(ts))
        out[name]["offset_answers"] = oa
        out[name]["time_answers"] = ta
    return out


@pytest.fixture(params=list(CONFIGS))
def folder(request, kafka_folders):
    return kafka_folders[request.param]


def _rec_tuple(r):
    return (r.offset, r.timestamp, r.key, r.value)


def test_reads_every_record_and_batch(folder):
    with Log.open(folder["dir"]) as log:
        assert [s.base_offset for s in log.segments] == folder["segs"]
        got = [_rec_tuple(r) for r in log.records(include_control=True)]
        assert got == folder["records"]
        assert [_rec_tuple(r) for r in log.records()] == _records(folder["batches"], control=False)
        seen = [(b.position, b.size, b.base_offset, b.last_offset, b.magic, b.max_timestamp,
                 b.is_control, b.is_transactional) for b in log.batches()]
        want = [(b["pos"], b["size"], b["base"], b["last"], b["magic"], b["max_ts"], b["control"], b["txn"])
                for b in folder["batches"]]
        assert seen == want
        assert log.next_offset == folder["batches"][-1]["last"] + 1


def _locate(log, offset):
    """``log.locate`` with Kafka's null (no batch holds the offset) as None."""
    try:
        return log.locate(offset)
    except OffsetOutOfRangeError:
        return None


def test_offset_lookups_agree_with_kafka(folder):
    with Log.open(folder["dir"]) as log:
        for target, want in folder["offset_answers"].items():
            found = _locate(log, target)
            got = None if found is None else (found[0].base_offset, found[1])
            assert got == want, f"offset {target}"


def test_time_lookups_agree_with_kafka(folder):
    recs = folder["records"]
    with Log.open(folder["dir"]) as log:
        for target, want in folder["time_answers"].items():
            if "prealloc" in folder["dir"]:
                # A broker recovers an uncleanly closed active segment before answering (and a
                # live one knows its max timestamp in memory); the stale time index alone, as
                # the Java model reads it, misses the tail.  Compare with the records instead.
                want = next(((r[0], r[1]) for r in recs if r[1] >= target), None)
            assert log.find_timestamp(target) == want, f"timestamp {target}"


def test_on_disk_indexes_are_trusted_and_verify_clean(folder):
    with Log.open(folder["dir"]) as log:
        for seg in log.segments:
            assert seg.offset_index.status == "ok", seg.index_problems
            assert seg.time_index.status == "ok", seg.index_problems
        report = log.verify(deep=True)
        assert report.ok, str(report)
        assert log.recover().truncated_bytes == 0


def test_range_reads(folder):
    recs = [r for r in _records(folder["batches"], control=False)]
    offsets = [r[0] for r in recs]
    rnd = random.Random(3)
    with Log.open(folder["dir"]) as log:
        for _ in range(12):
            a = rnd.randint(offsets[0] - 2, offsets[-1] + 2)
            b = rnd.randint(a, offsets[-1] + 3)
            got = [_rec_tuple(r) for r in log.records(start_offset=a, end_offset=b)]
            assert got == [r for r in recs if a <= r[0] < b]
        if "shuffled" not in folder["dir"] and recs[0][1] >= 0:
            stamps = sorted({r[1] for r in recs})
            t0, t1 = stamps[len(stamps) // 4], stamps[3 * len(stamps) // 4]
            got = [r.offset for r in log.records(start_timestamp=t0, end_timestamp=t1)]
            assert got == [r[0] for r in recs if t0 <= r[1] < t1]


def test_broker_quirks_present(kafka_folders):
    """The data really shows the quirks the reader must accept."""
    d = kafka_folders["v2"]["dir"]
    # a roll or clean close adds a final time entry (unless the last append was indexed)
    extra = [os.path.getsize(s.timeindex) // 12 - os.path.getsize(s.index) // 8
             for s in F.list_partition(d).segments]
    assert set(extra) <= {0, 1} and 1 in extra
    small = F.list_partition(kafka_folders["v2-small-cleaned-big"]["dir"]).segments
    assert any(os.path.getsize(s.index) == 0 for s in small)       # segments under 4 KiB
    b = kafka_folders["v2-small-cleaned-big"]["batches"]
    assert any(x["seg"] < x["base"] and x["pos"] == 0 for x in b)    # base offset below first batch
    big = max(b, key=lambda x: x["size"])
    assert big["size"] > 3000 and sum(1 for x in b if x["seg"] == big["seg"]) == 1  # oversize alone
    for s in F.list_partition(kafka_folders["v0-gzip"]["dir"]).segments:
        assert os.path.getsize(s.timeindex) == 0                     # magic 0: no time index
    assert {b["magic"] for b in kafka_folders["mixed-magic-v0-v1-v2"]["batches"]} == {0, 1, 2}
    active = F.list_partition(kafka_folders["v2-prealloc-active"]["dir"]).segments[-1]
    assert os.path.getsize(active.index) == 65536                     # preallocated, zero tail


def test_read_committed_matches_kafka_aborts(kafka_folders):
    data = kafka_folders["v2-zstd-txn"]
    assert data["aborted"], "the txn config must contain aborted transactions"

    def aborted(b):
        return any(b["pid"] == pid and first <= b["base"] <= last for pid, first, last, _ in data["aborted"])

    want = [r for b in data["batches"] if not b["control"] and not (b["txn"] and aborted(b)) for r in b["records"]]
    with Log.open(data["dir"]) as log:
        assert [_rec_tuple(r) for r in log.records(isolation="read_committed")] == want
        # .txnindex entries are read and agree with the markers
        txns = [(t.producer_id, t.first_offset, t.last_offset)
                for s in log.segments for t in s.aborted_transactions()]
        assert txns == [a[:3] for a in data["aborted"]]
        ranges = log.aborted_transactions()
        assert sorted((t.producer_id, t.first_offset, t.last_offset) for t in ranges) == sorted(set(txns))


# ---------------------------------------------------------------- damaged copies

def _copy(src, tmp_path, name="t-0"):
    dst = tmp_path / name
    shutil.copytree(src, dst)
    return dst


def _last_log(d):
    return F.list_partition(str(d)).segments[-1].log


def test_final_batch_cut_mid_write(kafka_folders, tmp_path, java_runner):
    data = kafka_folders["v2"]
    d = _copy(data["dir"], tmp_path)
    last = _last_log(d)
    size = os.path.getsize(last)
    with open(last, "r+b") as f:
        f.truncate(size - 100)
    keep = [b for b in data["batches"]][:-1]
    with Log.open(d) as log:
        assert [_rec_tuple(r) for r in log.records()] == _records(keep)
        report = log.verify()
        assert not report.ok and report.problems[0].kind == "truncated"
        assert report.problems[0].position == data["batches"][-1]["pos"]
        dry = log.recover()
        assert dry.truncated_bytes == data["batches"][-1]["size"] - 100 and not dry.applied
        assert os.path.getsize(last) == size - 100  # dry run touched nothing
        rep = log.recover(apply=True)
        assert rep.saved_files and os.path.getsize(rep.saved_files[0]) == data["batches"][-1]["size"] - 100
        assert log.verify().ok
        assert [_rec_tuple(r) for r in log.records()] == _records(keep)
    assert java_runner.run(HELPER, "read", str(d)).stdout.decode().rstrip().endswith("OK")


def test_flipped_byte_in_middle_batch(kafka_folders, tmp_path):
    data = kafka_folders["v2"]
    d = _copy(data["dir"], tmp_path)
    segs = F.list_partition(str(d)).segments
    mid = segs[1]
    in_seg = [b for b in data["batches"] if b["seg"] == mid.base_offset]
    victim = in_seg[len(in_seg) // 2]
    with open(mid.log, "r+b") as f:
        f.seek(victim["pos"] + 70)
        byte = f.read(1)
        f.seek(victim["pos"] + 70)
        f.write(bytes([byte[0] ^ 0x40]))
    with Log.open(d) as log:
        report = log.verify()
        crc = [p for p in report.problems if p.kind == "crc"]
        assert len(crc) == 1 and crc[0].position == victim["pos"] and crc[0].offset == victim["base"]
        assert crc[0].segment == mid.log
        with pytest.raises(CorruptRecordError) as err:
            list(log.records(verify_crc=True))
        assert err.value.position == victim["pos"] and err.value.path == mid.log
        rep = log.recover(apply=True)
        assert rep.segments[1].valid_bytes == victim["pos"]
        assert len(rep.removed_segments) == len(segs) - 2
        assert all(os.path.exists(p) for p in rep.saved_files)
        want = [b for b in data["batches"] if b["seg"] < mid.base_offset or
                (b["seg"] == mid.base_offset and b["pos"] < victim["pos"])]
        assert [_rec_tuple(r) for r in log.records()] == _records(want)
        assert log.verify().ok


def test_zero_filled_tail(kafka_folders, tmp_path, java_runner):
    data = kafka_folders["v2"]
    d = _copy(data["dir"], tmp_path)
    last = _last_log(d)
    size = os.path.getsize(last)
    with open(last, "ab") as f:
        f.write(bytes(8192))
    with Log.open(d) as log:
        assert [_rec_tuple(r) for r in log.records()] == data["records"]
        report = log.verify()
        assert [p.kind for p in report.problems] == ["length"] and report.problems[0].position == size
        for target, want in data["offset_answers"].items():
            found = _locate(log, target)
            assert (None if found is None else (found[0].base_offset, found[1])) == want
        rep = log.recover(apply=True)
        assert rep.truncated_bytes == 8192
    assert os.path.getsize(last) == size
    assert java_runner.run(HELPER, "read", str(d)).stdout.decode().rstrip().endswith("OK")


@pytest.mark.parametrize("damage", ["preallocate", "garbage", "stale", "missing"])
def test_untrusted_index(kafka_folders, tmp_path, damage):
    data = kafka_folders["v2"]
    d = _copy(data["dir"], tmp_path)
    seg = F.list_partition(str(d)).segments[1]
    if damage == "preallocate":
        with open(seg.index, "ab") as f:
            f.write(bytes(1 << 20))
        with open(seg.timeindex, "ab") as f:
            f.write(bytes(12 * 1000))
    elif damage == "garbage":
        with open(seg.index, "r+b") as f:
            f.seek(16)
            f.write(os.urandom(24))
    elif damage == "stale":
        # an index from another segment: positions and offsets do not match this log
        other = F.list_partition(str(d)).segments[0]
        shutil.copy(other.index, seg.index)
    else:
        os.remove(seg.index)
        os.remove(seg.timeindex)
    with Log.open(d) as log:
        s = log.segments[1]
        for target, want in data["offset_answers"].items():
            found = _locate(log, target)
            assert (None if found is None else (found[0].base_offset, found[1])) == want, target
        for target, want in data["time_answers"].items():
            assert log.find_timestamp(target) == want
        if damage == "preallocate":
            assert s.offset_index.status == "ok"
        else:
            assert s.offset_index.status == "rebuilt"
        report = log.verify()
        assert report.ok == (damage in ("preallocate", "missing"))
        assert [_rec_tuple(r) for r in log.records()] == data["records"]


# ---------------------------------------------------------------- the reverse

@pytest.mark.one_backend
def test_kafka_validates_logwriter_output(tmp_path, java_runner):
    from kafkawire.records import BatchBuilder
    d = tmp_path / "out-0"
    rnd = random.Random(5)
    expected = []
    with LogWriter(d, segment_bytes=40000, max_index_bytes=4096) as w:
        ts = 1700000000000
        for i in range(300):
            codec = ["none", "gzip", "lz4", "zstd", "snappy"][i % 5]
            magic = 2 if i % 7 else 1
            if magic == 1 and codec == "zstd":
                codec = "none"
            b = BatchBuilder(magic, codec)
            recs = []
            for j in range(rnd.randint(1, 20)):
                v = rnd.randbytes(rnd.randint(0, 300))
                k = None if j % 4 == 0 else b"k%d" % j
                ts += rnd.randint(0, 5)
                b.append(v, key=k, timestamp=ts)
                recs.append((k, v, ts))
            if i % 11 == 0:
                first, last = w.append_batches([b.build(), b.build()])
                recs = recs + recs
            else:
                first, last = w.append_batch(b.build())
            expected.extend((first + n, t, k, v) for n, (k, v, t) in enumerate(recs))
            if i == 150:
                w.flush()
    out = java_runner.run(HELPER, "read", str(d)).stdout.decode()
    assert out.rstrip().endswith("OK")
    segs, batches, _ = parse_java(out)
    assert len({b["seg"] for b in batches}) > 3
    assert _records(batches) == expected
    with Log.open(d) as log:
        assert log.verify().ok
        assert log.recover().clean
