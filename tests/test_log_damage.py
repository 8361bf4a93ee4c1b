"""Hostile bytes in segments and indexes: reading raises only kafkawire errors, verify always
returns a report, and recover(apply=True) always leaves a log that verifies clean."""
from __future__ import annotations

import os
import random
import shutil

import pytest

from kafkawire import Log, LogWriter
from kafkawire.errors import KafkaWireError
from kafkawire.log import files as F

TS = 1_700_000_000_000


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    d = tmp_path_factory.mktemp("pristine") / "t-0"
    with LogWriter(d, segment_bytes=6000, index_interval_bytes=300) as w:
        for i in range(80):
            codec = ("none", "gzip", "lz4", "snappy")[i % 4]
            magic = 1 if i % 9 == 0 else 2
            w.append_records([{"value": b"v%d" % i * (i % 7 + 1), "timestamp": TS + i}
                              for _ in range(1 + i % 5)], magic=magic,
                             compression=codec if magic == 2 or codec != "zstd" else "none")
    return d


def _damage(d, rnd):
    segs = F.list_partition(str(d)).segments
    seg = rnd.choice(segs)
    kind = rnd.choice(["flip", "flip", "truncate", "zeros", "index", "timeindex", "junk"])
    path = {"index": seg.index, "timeindex": seg.timeindex}.get(kind, seg.log)
    data = bytearray(open(path, "rb").read())
    if not data:
        data = bytearray(b"\x01")
    if kind in ("flip", "index", "timeindex"):
        for _ in range(rnd.randint(1, 3)):
            i = rnd.randrange(len(data))
            data[i] ^= 1 << rnd.randrange(8)
    elif kind == "truncate":
        del data[rnd.randrange(len(data)):]
    elif kind == "zeros":
        i = rnd.randrange(len(data))
        data[i:] = bytes(len(data) - i + rnd.randint(0, 200))
    else:
        data += os.urandom(rnd.randint(1, 100))
    open(path, "wb").write(bytes(data))
    return kind


@pytest.mark.parametrize("seed", range(12))
def test_random_damage(pristine, tmp_path, seed):
    rnd = random.Random(seed)
    d = tmp_path / "t-0"
    shutil.copytree(pristine, d)
    with Log.open(pristine) as good:
        want = [(r.offset, r.value) for r in good.records()]
    for _ in range(rnd.randint(1, 3)):
        _damage(d, rnd)
    with Log.open(d) as log:
        try:
            got = [(r.offset, r.value) for r in log.records()]
        except KafkaWireError:
            got = None
        if got is not None and len(got) == len(want):
            # undetected damage can only be inside payload bytes (no CRC check on plain reads)
            assert [o for o, _ in got] == [o for o, _ in want]
        for o in range(0, len(want) + 5, 7):
            try:
                log.locate(o)
                log.find_timestamp(TS + o)
            except KafkaWireError:
                pass
        report = log.verify()
        assert isinstance(report.problems, list)
        log.recover(apply=True)
        after = log.verify()
        assert after.ok, str(after)
        kept = [(r.offset, r.value) for r in log.records()]
    assert kept == want[:len(kept)]
