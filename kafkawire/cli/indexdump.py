"""Dump and check ``.index``, ``.timeindex``, ``.txnindex`` and ``.snapshot`` files.

Follows ``kafka-dump-log.sh``: offset-index entries print as
``offset: O position: P`` and are checked against the batch found at that
position (its last offset must be the indexed offset); time-index entries print
as ``timestamp: T offset: O`` and are checked for the offset (a batch ending
exactly there), the batch's max record timestamp, and increasing timestamps.
Zero-filled tails of preallocated indexes end the dump, as in Kafka.  The
problems are collected in :class:`IndexProblems` and printed, with Kafka's
wording, on stderr after all files are dumped.
"""
from __future__ import annotations

import bisect
import mmap
import os
import struct
from collections import OrderedDict
from typing import Any, Dict, Iterator, List, Optional, Tuple

from kafkawire import _kernels as K
from kafkawire.cli.output import Printer, err
from kafkawire.errors import KafkaWireError

OFFSET_ENTRY = 8
TIME_ENTRY = 12
TXN_ENTRY = 34
SNAPSHOT_ENTRY = 46
SNAPSHOT_VERSION = 1
INT32_MAX = 2 ** 31 - 1


class IndexCheckError(KafkaWireError):
    """An index that fails Kafka's sanity check, or cannot be read at all."""


class IndexProblems:
    """Index/log disagreements found while dumping, reported like Kafka's tool."""

    def __init__(self) -> None:
        self.offset_mismatches: "OrderedDict[str, List[Tuple[int, int]]]" = OrderedDict()
        self.time_mismatches: "OrderedDict[str, List[Tuple[int, int]]]" = OrderedDict()
        self.out_of_order: "OrderedDict[str, List[Tuple[int, int]]]" = OrderedDict()
        self.not_found: "OrderedDict[str, List[Tuple[int, int]]]" = OrderedDict()
        self.non_consecutive: "OrderedDict[str, List[Tuple[int, int]]]" = OrderedDict()

    @staticmethod
    def _add(table: Dict[str, List[Tuple[int, int]]], path: str, a: int, b: int) -> None:
        table.setdefault(os.path.abspath(path), []).append((a, b))

    def __bool__(self) -> bool:
        return any((self.offset_mismatches, self.time_mismatches, self.out_of_order,
                    self.not_found))

    def report(self) -> List[str]:
        """The stderr lines, in the order and wording of ``kafka-dump-log.sh``."""
        lines: List[str] = []
        for name, pairs in self.offset_mismatches.items():
            lines.append(f"Mismatches in :{name}")
            # Kafka prepends to a list, so the last mismatch prints first
            lines.extend(f"  Index offset: {i}, log offset: {o}" for i, o in reversed(pairs))
        for name, pairs in self.time_mismatches.items():
            lines.append(f"Found timestamp mismatch in :{name}")
            lines.extend(f"  Index timestamp: {i}, log timestamp: {o}" for i, o in pairs)
        for name, pairs in self.out_of_order.items():
            lines.append(f"Found out of order timestamp in :{name}")
            lines.extend(f"  Index timestamp: {i}, Previously indexed timestamp: {o}"
                         for i, o in pairs)
        for pairs in self.not_found.values():
            lines.append("The following indexed offsets are not found in the log.")
            lines.extend(f"Indexed offset: {i}, found log offset: {o}" for i, o in pairs)
        for name, pairs in self.non_consecutive.items():
            lines.append(f"Non-consecutive offsets in {name}")
            lines.extend(f"  {a} is followed by {b}" for a, b in reversed(pairs))
        return lines

    def as_json(self) -> List[Dict[str, Any]]:
        out: List[Dict[str, Any]] = []
        for kind, table, names in (
                ("offsetMismatch", self.offset_mismatches, ("indexOffset", "logOffset")),
                ("timestampMismatch", self.time_mismatches, ("indexTimestamp", "logTimestamp")),
                ("timestampOutOfOrder", self.out_of_order,
                 ("indexTimestamp", "previousIndexTimestamp")),
                ("indexedOffsetNotFound", self.not_found, ("indexOffset", "logOffset")),
                ("nonConsecutiveOffsets", self.non_consecutive, ("offset", "nextOffset"))):
            for path, pairs in table.items():
                for a, b in pairs:
                    out.append({"type": "problem", "problem": kind, "file": path,
                                names[0]: a, names[1]: b})
        return out


# ------------------------------------------------------------------ file helpers

def base_offset_of(path: str) -> int:
    """The base offset a segment file's name encodes (``00000000000000000042.index`` -> 42)."""
    stem = os.path.basename(path).split(".")[0]
    try:
        return int(stem)
    except ValueError:
        raise IndexCheckError(f"{path}: file name does not start with a base offset "
                              "(Kafka names segment files <20-digit offset>.<suffix>)") from None


def sibling(path: str, suffix: str) -> str:
    stem = os.path.basename(path).split(".")[0]
    return os.path.join(os.path.dirname(os.path.abspath(path)), stem + suffix)


class MappedFile:
    """A read-only view of a whole file (mmap, or b'' when empty)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._f = open(path, "rb")
        size = os.fstat(self._f.fileno()).st_size
        self._mm = mmap.mmap(self._f.fileno(), 0, access=mmap.ACCESS_READ) if size else None
        self.data = self._mm if self._mm is not None else b""

    def __len__(self) -> int:
        return len(self.data)

    def close(self) -> None:
        if self._mm is not None:
            try:
                self._mm.close()
            except BufferError:
                # a view still held (e.g. by a decoder error's traceback in a reference cycle):
                # collect it and retry; failing that, the map closes when its last view goes
                import gc
                gc.collect()
                try:
                    self._mm.close()
                except BufferError:
                    pass
        self._f.close()

    def __enter__(self) -> "MappedFile":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def read_offset_index(path: str) -> Tuple[int, List[Tuple[int, int]], int]:
    """``(base_offset, [(offset, position)], file_size)``; every whole entry, zero tail included."""
    base = base_offset_of(path)
    with open(path, "rb") as f:
        data = f.read()
    n = len(data) // OFFSET_ENTRY
    entries = [(base + rel, pos) for rel, pos in struct.iter_unpack(">ii", data[:n * OFFSET_ENTRY])]
    return base, entries, len(data)


def read_time_index(path: str) -> Tuple[int, List[Tuple[int, int]], int]:
    """``(base_offset, [(timestamp, offset)], file_size)``; every whole entry."""
    base = base_offset_of(path)
    with open(path, "rb") as f:
        data = f.read()
    n = len(data) // TIME_ENTRY
    entries = [(ts, base + rel) for ts, rel in struct.iter_unpack(">qi", data[:n * TIME_ENTRY])]
    return base, entries, len(data)


def offset_index_sanity(path: str) -> None:
    """Kafka's ``OffsetIndex.sanityCheck`` (raises :class:`IndexCheckError`)."""
    base, entries, size = read_offset_index(path)
    if entries and entries[-1][0] < base:
        raise IndexCheckError(
            f"Corrupt index found, index file ({os.path.abspath(path)}) has non-zero size but the "
            f"last offset is {entries[-1][0]} which is less than the base offset {base}")
    if size % OFFSET_ENTRY:
        raise IndexCheckError(
            f"Index file {os.path.abspath(path)} is corrupt, found {size} bytes which is neither "
            f"positive nor a multiple of {OFFSET_ENTRY}")


def time_index_sanity(path: str) -> None:
    """Kafka's ``TimeIndex.sanityCheck`` (raises :class:`IndexCheckError`)."""
    base, entries, size = read_time_index(path)
    if entries:
        last_ts, last_off = entries[-1]
        if last_ts < entries[0][0]:
            raise IndexCheckError(
                f"Corrupt time index found, time index file ({os.path.abspath(path)}) has non-zero "
                f"size but the last timestamp is {last_ts} which is less than the first timestamp "
                f"{entries[0][0]}")
        if last_off < base:
            raise IndexCheckError(
                f"Corrupt time index found, time index file ({os.path.abspath(path)}) has non-zero "
                f"size but the last offset is {last_off} which is less than the first offset {base}")
    if size % TIME_ENTRY:
        raise IndexCheckError(
            f"Time index file {os.path.abspath(path)} is corrupt, found {size} bytes which is "
            f"neither positive nor a multiple of {TIME_ENTRY}")


def _batches_from(data: Any, start: int, end: Optional[int] = None) -> Iterator[Any]:
    """Batches from ``start``; stops quietly at a partial tail or corrupt bytes."""
    import kafkawire
    if start < 0 or start >= len(data):
        return
    try:
        for batch in kafkawire.iter_batches(data, start=start, end=end):
            yield batch
    except KafkaWireError:
        return


# ------------------------------------------------------------------ dumps

def dump_offset_index(path: str, out: Printer, problems: IndexProblems, *,
                      sanity_only: bool = False, verify_only: bool = False,
                      max_message_size: int = 5 * 1024 * 1024) -> int:
    """Print (and check) an offset index; returns 0, or 1 if the log could not be read."""
    base, entries, _ = read_offset_index(path)
    if not entries:
        out.emit(f"{path} is empty.", {"type": "indexEmpty", "file": path})
        return 0
    if sanity_only:
        offset_index_sanity(path)
        out.emit(f"{path} passed sanity check.", {"type": "sanityCheck", "file": path,
                                                  "passed": True})
        return 0
    log_path = sibling(path, ".log")
    log = MappedFile(log_path) if os.path.exists(log_path) else None
    if log is None:
        err(f"kafkawire: {path}: cannot check entries, the log file {log_path} does not exist")
    try:
        for i, (offset, position) in enumerate(entries):
            if offset == base and i > 0:
                break  # zero-filled tail of a preallocated index
            if log is not None:
                end = min(len(log), position + max_message_size) if position >= 0 else None
                first = next(_batches_from(log.data, position, end), None)
                found = first.last_offset if first is not None else -1
                if found != offset:
                    problems._add(problems.offset_mismatches, path, offset, found)
            if not verify_only:
                out.emit(f"offset: {offset} position: {position}",
                         {"type": "indexEntry", "offset": offset, "position": position})
    finally:
        if log is not None:
            log.close()
    return 0 if log is not None else 1


def _real_entries(entries: List[Tuple[int, int]], base: int) -> List[Tuple[int, int]]:
    """Entries up to the zero-filled tail of a preallocated index (as Kafka's dump stops)."""
    for i in range(1, len(entries)):
        if entries[i][0] == base:
            return entries[:i]
    return entries


def _lookup_position(offsets: List[int], positions: List[int], target: int) -> int:
    """Position of the largest offset-index entry at or below ``target`` (0 if none)."""
    i = bisect.bisect_right(offsets, target)
    return positions[i - 1] if i else 0


def dump_time_index(path: str, out: Printer, problems: IndexProblems, *,
                    sanity_only: bool = False, verify_only: bool = False) -> int:
    """Print (and check) a time index; returns 0, or 1 if the log could not be read."""
    base, entries, _ = read_time_index(path)
    if sanity_only:
        time_index_sanity(path)
        out.emit(f"{path} passed sanity check.", {"type": "sanityCheck", "file": path,
                                                  "passed": True})
        return 0
    log_path = sibling(path, ".log")
    index_path = sibling(path, ".index")
    offsets: List[int] = []
    positions: List[int] = []
    if os.path.exists(index_path):
        _, offset_entries, _ = read_offset_index(index_path)
        real = _real_entries(offset_entries, base)
        # an untrusted index may not be sorted: only its increasing prefix is searchable
        for o, p in real:
            if offsets and o <= offsets[-1]:
                break
            offsets.append(o)
            positions.append(p)
    log = MappedFile(log_path) if os.path.exists(log_path) else None
    if log is None and entries:
        err(f"kafkawire: {path}: cannot check entries, the log file {log_path} does not exist")
    prev_ts = -1
    try:
        for i, (timestamp, offset) in enumerate(entries):
            if offset == base and i > 0:
                break
            if log is not None:
                start = _lookup_position(offsets, positions, offset)
                batch = next((b for b in _batches_from(log.data, start)
                              if b.last_offset >= offset), None)
                if batch is None:
                    problems._add(problems.not_found, path, offset, -1)
                elif batch.last_offset != offset:
                    problems._add(problems.not_found, path, offset, batch.last_offset)
                else:
                    max_ts = -1
                    try:
                        for rec in batch:
                            max_ts = max(max_ts, rec.timestamp)
                    except KafkaWireError:
                        max_ts = batch.max_timestamp
                    if max_ts != timestamp:
                        problems._add(problems.time_mismatches, path, timestamp, max_ts)
                    if prev_ts >= timestamp:
                        problems._add(problems.out_of_order, path, timestamp, prev_ts)
            if not verify_only:
                out.emit(f"timestamp: {timestamp} offset: {offset}",
                         {"type": "timeIndexEntry", "timestamp": timestamp, "offset": offset})
            prev_ts = timestamp
    finally:
        if log is not None:
            log.close()
    return 0 if log is not None or not entries else 1


def dump_txn_index(path: str, out: Printer) -> int:
    """Print every aborted transaction of a ``.txnindex``; 1 if the file is damaged."""
    with open(path, "rb") as f:
        data = f.read()
    n = len(data) // TXN_ENTRY
    for i in range(n):
        version, pid, first, last, lso = struct.unpack_from(">hqqqq", data, i * TXN_ENTRY)
        if version != 0:
            err(f"kafkawire: {path}: unexpected aborted transaction version {version} at position "
                f"{i * TXN_ENTRY}; the index is damaged (Kafka rebuilds it from the log)")
            return 1
        out.emit(f"version: {version} producerId: {pid} firstOffset: {first} lastOffset: {last} "
                 f"lastStableOffset: {lso}",
                 {"type": "abortedTxn", "version": version, "producerId": pid,
                  "firstOffset": first, "lastOffset": last, "lastStableOffset": lso})
    if len(data) % TXN_ENTRY:
        err(f"kafkawire: {path}: {len(data) % TXN_ENTRY} trailing bytes are not a whole entry "
            f"of {TXN_ENTRY} bytes; the index is damaged")
        return 1
    return 0


def _decrement_sequence(seq: int, dec: int) -> int:
    if seq < dec:
        return INT32_MAX - (dec - seq) + 1
    return seq - dec


def read_snapshot(path: str) -> List[Dict[str, int]]:
    """Entries of a producer-state ``.snapshot`` (version 1, CRC-32C checked)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 10:
        raise IndexCheckError(f"Snapshot is corrupt: {len(data)} bytes, shorter than its header")
    version, crc, count = struct.unpack_from(">hIi", data, 0)
    if version != SNAPSHOT_VERSION:
        raise IndexCheckError(f"Snapshot contained an unknown file version {version}")
    computed = K.crc32c(data, 6, len(data))
    if crc != computed:
        raise IndexCheckError(f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {crc}. "
                              f"Computed crc: {computed}")
    if count < 0 or 10 + count * SNAPSHOT_ENTRY > len(data):
        raise IndexCheckError(f"Snapshot is corrupt: {count} entries do not fit in {len(data)} bytes")
    entries = []
    for i in range(count):
        (pid, epoch, last_seq, last_offset, offset_delta, timestamp, coord_epoch,
         txn_first) = struct.unpack_from(">qhiqiqiq", data, 10 + i * SNAPSHOT_ENTRY)
        entries.append({"producerId": pid, "producerEpoch": epoch, "lastSequence": last_seq,
                        "lastOffset": last_offset, "offsetDelta": offset_delta,
                        "timestamp": timestamp, "coordinatorEpoch": coord_epoch,
                        "currentTxnFirstOffset": txn_first,
                        "firstSequence": _decrement_sequence(last_seq, offset_delta)})
    return entries


def dump_snapshot(path: str, out: Printer) -> int:
    """Print a producer snapshot like ``kafka-dump-log.sh``; 1 if it is corrupt."""
    try:
        entries = read_snapshot(path)
    except IndexCheckError as e:
        err(str(e))
        return 1
    for e in entries:
        first = e["currentTxnFirstOffset"]
        txn = "OptionalLong.empty" if first < 0 else f"OptionalLong[{first}]"
        text = (f"producerId: {e['producerId']} producerEpoch: {e['producerEpoch']} "
                f"coordinatorEpoch: {e['coordinatorEpoch']} currentTxnFirstOffset: {txn} "
                f"lastTimestamp: {e['timestamp']} firstSequence: {e['firstSequence']} "
                f"lastSequence: {e['lastSequence']} lastOffset: {e['lastOffset']} "
                f"offsetDelta: {e['offsetDelta']} timestamp: {e['timestamp']}")
        obj = dict(e, type="producerSnapshotEntry")
        obj["currentTxnFirstOffset"] = None if first < 0 else first
        out.emit(text, obj)
    return 0
