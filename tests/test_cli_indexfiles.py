"""``kafkawire dump`` on .txnindex and .snapshot files, and the progress bar."""
from __future__ import annotations

import io
import json
import struct

from kafkawire import _kernels as K
from kafkawire.cli.progress import Progress

from cli_support import run_cli


def test_txn_index(capsys, tmp_path):
    p = tmp_path / "00000000000000000000.txnindex"
    p.write_bytes(struct.pack(">hqqqq", 0, 7, 5, 9, 3) + struct.pack(">hqqqq", 0, 8, 10, 12, 10))
    code, out, err = run_cli(capsys, "dump", "--files", str(p))
    assert code == 0, err
    assert out.splitlines() == [
        f"Dumping {p}",
        "version: 0 producerId: 7 firstOffset: 5 lastOffset: 9 lastStableOffset: 3",
        "version: 0 producerId: 8 firstOffset: 10 lastOffset: 12 lastStableOffset: 10"]
    code, out, _ = run_cli(capsys, "dump", "--files", str(p), "--json")
    objs = [json.loads(x) for x in out.splitlines()]
    assert objs[1] == {"type": "abortedTxn", "version": 0, "producerId": 7, "firstOffset": 5,
                       "lastOffset": 9, "lastStableOffset": 3}


def test_txn_index_damaged(capsys, tmp_path):
    p = tmp_path / "00000000000000000000.txnindex"
    p.write_bytes(struct.pack(">hqqqq", 0, 7, 5, 9, 3) + b"\x00" * 5)
    code, out, err = run_cli(capsys, "dump", "--files", str(p))
    assert code == 1 and "trailing bytes" in err and "Traceback" not in err


def snapshot_bytes(entries, version=1, crc=None):
    body = struct.pack(">i", len(entries)) + b"".join(
        struct.pack(">qhiqiqiq", *e) for e in entries)
    c = K.crc32c(body, 0, len(body)) if crc is None else crc
    return struct.pack(">hI", version, c) + body


def test_producer_snapshot(capsys, tmp_path):
    p = tmp_path / "00000000000000000042.snapshot"
    # producerId, epoch, lastSeq, lastOffset, offsetDelta, timestamp, coordinatorEpoch, txnFirst
    p.write_bytes(snapshot_bytes([(7, 1, 9, 41, 4, 1700, 3, 37), (8, 0, 2, 30, 5, 1600, -1, -1)]))
    code, out, err = run_cli(capsys, "dump", "--files", str(p))
    assert code == 0, err
    assert out.splitlines()[1:] == [
        "producerId: 7 producerEpoch: 1 coordinatorEpoch: 3 currentTxnFirstOffset: OptionalLong[37] "
        "lastTimestamp: 1700 firstSequence: 5 lastSequence: 9 lastOffset: 41 offsetDelta: 4 "
        "timestamp: 1700",
        # sequence wraps like Kafka's DefaultRecordBatch.decrementSequence
        "producerId: 8 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: OptionalLong.empty "
        "lastTimestamp: 1600 firstSequence: 2147483645 lastSequence: 2 lastOffset: 30 offsetDelta: 5 "
        "timestamp: 1600"]


def test_producer_snapshot_corrupt(capsys, tmp_path):
    p = tmp_path / "00000000000000000042.snapshot"
    p.write_bytes(snapshot_bytes([(7, 1, 9, 41, 4, 1700, 3, 37)], crc=1))
    code, out, err = run_cli(capsys, "dump", "--files", str(p))
    assert code == 1
    assert err.startswith("Snapshot is corrupt (CRC is no longer valid). Stored crc: 1.")
    p.write_bytes(snapshot_bytes([], version=2))
    code, _, err = run_cli(capsys, "dump", "--files", str(p))
    assert code == 1 and "unknown file version 2" in err
    p.write_bytes(b"\x00")
    code, _, err = run_cli(capsys, "dump", "--files", str(p))
    assert code == 1 and "Traceback" not in err


def test_empty_offset_index_and_sanity(capsys, tmp_path):
    (tmp_path / "00000000000000000000.log").write_bytes(b"")
    idx = tmp_path / "00000000000000000000.index"
    idx.write_bytes(b"")
    code, out, _ = run_cli(capsys, "dump", "--files", str(idx))
    assert code == 0 and out.splitlines()[1] == f"{idx} is empty."
    idx.write_bytes(struct.pack(">ii", 5, 100) + b"\x01\x02\x03")
    code, out, err = run_cli(capsys, "dump", "--files", str(idx), "--index-sanity-check")
    assert code == 1 and "is corrupt, found 11 bytes which is neither positive nor a multiple of 8" in err
    idx.write_bytes(struct.pack(">ii", 5, 100))
    code, out, err = run_cli(capsys, "dump", "--files", str(idx), "--index-sanity-check")
    assert code == 0 and out.splitlines()[1] == f"{idx} passed sanity check."
    tidx = tmp_path / "00000000000000000000.timeindex"
    tidx.write_bytes(struct.pack(">qi", 50, 1) + struct.pack(">qi", 40, 2))
    code, out, err = run_cli(capsys, "dump", "--files", str(tidx), "--index-sanity-check")
    assert code == 1 and "last timestamp is 40 which is less than the first timestamp 50" in err


def test_progress_bar_only_on_tty():
    class Tty(io.StringIO):
        def isatty(self):
            return True
    s = io.StringIO()
    with Progress(1000, stream=s) as bar:
        bar.advance(500)
    assert s.getvalue() == ""
    t = Tty()
    with Progress(1000, stream=t) as bar:
        bar.set_label("x.log")
        bar.advance(500)
    assert "%" in t.getvalue() and t.getvalue().endswith("\r\x1b[K")
    bar = Progress(1000, enabled=True, stream=io.StringIO())
    bar.advance(500)
    assert "50.0%" in bar.render()
