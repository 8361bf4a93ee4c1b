"""Damaged input never makes the CLI raise: every failure is an exit status and one-line messages."""
from __future__ import annotations

import random
import struct

import pytest

from kafkawire.cli import main
from kafkawire.cli import offsets_decoder as od
from kafkawire.cli import txn_decoder as td

records = pytest.importorskip("kafkawire.records")
from kafkawire.records import BatchBuilder, control_batch  # noqa: E402


def segment() -> bytes:
    out = []
    b = BatchBuilder(compression="gzip")
    for i in range(5):
        b.append(b"value-%d" % i, key=b"k", timestamp=1000 + i, headers=[("h", b"x")])
    out.append(b.build())
    b = BatchBuilder(magic=1, compression="gzip", base_offset=5)
    b.append(b"legacy", key=b"k", timestamp=2000)
    b.append(b"legacy2", timestamp=2001)
    out.append(b.build())
    out.append(control_batch("commit", base_offset=7, producer_id=1, producer_epoch=0))
    return b"".join(out)


def _run(capsys, argv):
    code = main(argv)
    _, err = capsys.readouterr()
    assert isinstance(code, int)
    assert "Traceback" not in err
    return code


def test_truncations_and_flips(capsys, tmp_path):
    data = segment()
    path = tmp_path / "00000000000000000000.log"
    rnd = random.Random(3)
    variants = [data[:n] for n in range(0, len(data), 7)]
    for _ in range(150):
        d = bytearray(data)
        for _ in range(rnd.randrange(1, 4)):
            d[rnd.randrange(len(d))] ^= 1 << rnd.randrange(8)
        variants.append(bytes(d))
    for v in variants:
        path.write_bytes(v)
        for flags in ([], ["--print-data-log"], ["--deep-iteration", "--json"]):
            _run(capsys, ["dump", "--files", str(path), *flags])


def test_random_index_snapshot_and_txn_files(capsys, tmp_path):
    (tmp_path / "00000000000000000000.log").write_bytes(segment())
    rnd = random.Random(5)
    for suffix in (".index", ".timeindex", ".txnindex", ".snapshot"):
        p = tmp_path / f"00000000000000000000{suffix}"
        for n in (0, 1, 7, 8, 12, 13, 34, 46, 100):
            p.write_bytes(bytes(rnd.randrange(256) for _ in range(n)))
            for flags in ([], ["--verify-index-only"], ["--index-sanity-check"]):
                _run(capsys, ["dump", "--files", str(p), *flags])
    # index entries pointing anywhere, including past the end and negative positions
    idx = tmp_path / "00000000000000000000.index"
    idx.write_bytes(b"".join(struct.pack(">ii", r, p) for r, p in
                             ((1, -5), (2, 10 ** 9), (3, 13), (4, 0), (-7, 3))))
    _run(capsys, ["dump", "--files", str(idx)])


def test_decoders_on_random_bytes():
    rnd = random.Random(11)
    for _ in range(3000):
        key = bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 40)))
        value = bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 80)))
        if rnd.random() < 0.5 and len(key) >= 2:
            key = struct.pack(">h", rnd.randrange(0, 3)) + key[2:]
            value = struct.pack(">h", rnd.randrange(0, 5)) + value[2:]
        for parse in (od.parse_record, td.parse_record):
            k, v = parse(key, value, 1)
            assert k is None or isinstance(k, str)
            assert v is None or isinstance(v, str)
