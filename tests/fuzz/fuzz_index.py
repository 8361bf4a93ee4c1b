"""atheris fuzz target for index parsing: ``.index``, ``.timeindex`` and ``.txnindex`` bytes.

Indexes are untrusted: loading them applies Kafka's sanity checks, and whatever
loads must answer lookups inside its own entries.  The first input byte picks the
file kind and the log size; the rest is the file.  Any exception other than a
``KafkaWireError`` (or a crash) is a finding.
"""
from __future__ import annotations

import os
import struct
import sys

import atheris

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

with atheris.instrument_imports():
    from kafkawire.errors import KafkaWireError
    from kafkawire.log import index as I
    from kafkawire.log import txnindex as T
    from fuzz.runner import main


class _Bytes:
    """A storage that serves one file's bytes (what ``load_*_index`` read)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def read(self, path: str) -> bytes:
        return self.data

    def read_bounded(self, path: str, limit=None):
        """``(data, size)``: at most ``limit`` bytes, and the whole file's size."""
        want = len(self.data) if limit is None else min(len(self.data), max(limit, 0))
        return self.data[:want], len(self.data)


def one_input(data: bytes) -> None:
    if len(data) < 1:
        return
    kind = data[0] % 3
    body = data[1:]
    base = 1000
    probes = [-1, 0, base, base + 1, base + 50, 1 << 40] + \
        [base + b for b in body[:4]]
    try:
        if kind == 0:
            idx = I.load_offset_index("x.index", base, (data[0] >> 2) * 64,
                                      trim_past_end=bool(data[0] & 0x80), storage=_Bytes(body))
            assert idx.entries <= len(body) // 8
            # the log's size bounds what a valid index can hold (Kafka caps index size)
            for p in probes:
                rel, pos = idx.lookup(p)
                assert idx.entries == 0 or 0 <= pos
            if idx.entries:
                assert len(idx.offsets) == idx.entries
                list(idx)
        elif kind == 1:
            idx = I.load_time_index("x.timeindex", base, 1 << 20, storage=_Bytes(body))
            assert idx.entries <= len(body) // 12
            for p in probes:
                idx.lookup(p)
            idx.last_entry
            if idx.entries:
                assert len(idx.timestamps) == idx.entries
        else:
            for _ in T.iter_txn_index(body, "x.txnindex"):
                pass
    except KafkaWireError:
        pass


def _seeds():
    off = b"".join(struct.pack(">ii", i * 3, i * 100) for i in range(6))
    tim = b"".join(struct.pack(">qi", 1_600_000_000_000 + i, i * 3) for i in range(6))
    txn = b"".join(struct.pack(">hqqqi", 0, 7, 1000 + i, 1010 + i, 1020) for i in range(3))
    return [b"\x00" + off, b"\x80" + off + bytes(16), b"\x01" + tim, b"\x01" + tim + bytes(24),
            b"\x02" + txn]


if __name__ == "__main__":
    main(one_input, _seeds())
