"""Dump and check ``.index``, ``.timeindex``, ``.txnindex`` and ``.snapshot`` files.

Follows ``kafka-dump-log.sh``: offset-index entries print as
``offset: O position: P`` and are checked against the batch found at that
position (its last offset must be the indexed offset); time-index entries print
as ``timestamp: T offset: O`` and are checked for the offset (a batch ending
exactly there), the batch's max record timestamp, and increasing timestamps.
Zero-filled tails of preallocated indexes end the dump, as in Kafka.  The
problems are collected in :class:`IndexProblems` and printed, with Kafka's
wording, on stderr after all files are dumped.

The files are read and checked by :mod:`kafkawire.log` (entries as written,
Kafka's sanity checks, the trust rules for lookups, ``.txnindex`` and
``.snapshot`` parsing, the mapping of ``.log`` files); this module formats.
"""
from __future__ import annotations

import bisect
import os
from collections import OrderedDict
from typing import Any, Dict, List, Optional, Tuple

from kafkawire.cli.logbytes import LogPages
from kafkawire.cli.output import Printer, err
from kafkawire.errors import IndexCorruptError, KafkaWireError
from kafkawire.log import files as F
from kafkawire.log import index as IX
from kafkawire.log.storage import absolute, storage_for
from kafkawire.log.txnindex import TXN_ENTRY_SIZE, iter_txn_index, read_txn_index_file

OFFSET_ENTRY = IX.OFFSET_ENTRY_SIZE
TIME_ENTRY = IX.TIME_ENTRY_SIZE
TXN_ENTRY = TXN_ENTRY_SIZE
SNAPSHOT_ENTRY = 46
SNAPSHOT_VERSION = F.SNAPSHOT_VERSION
INT32_MAX = 2 ** 31 - 1

#: An index that fails Kafka's sanity check, or a snapshot that cannot be read (the log's own type).
IndexCheckError = IndexCorruptError


class IndexProblems:
    """Index/log disagreements found while dumping, reported like Kafka's tool."""

    def __init__(self) -> None:
        self.offset_mismatches: "OrderedDict[str, List[Tuple[int, int]]]" = OrderedDict()
        self.time_mismatches: "OrderedDict[str, List[Tuple[int, int]]]" = OrderedDict()
        self.out_of_order: "OrderedDict[str, List[Tuple[int, int]]]" = OrderedDict()
        self.not_found: "OrderedDict[str, List[Tuple[int, int]]]" = OrderedDict()
        self.non_consecutive: "OrderedDict[str, List[Tuple[int, int]]]" = OrderedDict()

    @staticmethod
    def add(table: Dict[str, List[Tuple[int, int]]], path: str, a: int, b: int) -> None:
        """Note the pair ``(a, b)`` under file ``path`` in ``table`` (one of the attributes)."""
        table.setdefault(absolute(path), []).append((a, b))

    _add = add   # the name ``kafkawire.cli.dump`` calls

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
    return F.offset_from_file_name(path)


def sibling(path: str, suffix: str) -> str:
    return F.sibling_path(path, suffix)


def read_offset_index(path: str) -> Tuple[int, List[Tuple[int, int]], int]:
    """``(base_offset, [(offset, position)], file_size)``; every whole entry, zero tail included."""
    idx, size = IX.read_offset_index_file(path)
    return idx.base_offset, list(idx), size


def read_time_index(path: str) -> Tuple[int, List[Tuple[int, int]], int]:
    """``(base_offset, [(timestamp, offset)], file_size)``; every whole entry."""
    idx, size = IX.read_time_index_file(path)
    return idx.base_offset, list(idx), size


def offset_index_sanity(path: str) -> None:
    """Kafka's ``OffsetIndex.sanityCheck`` (raises :class:`IndexCheckError`)."""
    IX.sanity_check_offset_index(path)


def time_index_sanity(path: str) -> None:
    """Kafka's ``TimeIndex.sanityCheck`` (raises :class:`IndexCheckError`)."""
    IX.sanity_check_time_index(path)


# ------------------------------------------------------------------ dumps

def _sibling_log(path: str, complain: bool) -> Optional[LogPages]:
    """The ``.log`` beside index ``path`` (mapped, or read in pages from object storage), or
    None (said on stderr when ``complain``)."""
    log_path = sibling(path, F.LOG_SUFFIX)
    if storage_for(log_path).exists(log_path):
        return LogPages(log_path)
    if complain:
        err(f"kafkawire: {path}: cannot check entries, the log file {log_path} does not exist")
    return None


def _passed_sanity(path: str, out: Printer) -> int:
    out.emit(f"{path} passed sanity check.", {"type": "sanityCheck", "file": path,
                                              "passed": True})
    return 0


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
        return _passed_sanity(path, out)
    log = _sibling_log(path, complain=True)
    try:
        for i, (offset, position) in enumerate(entries):
            if offset == base and i > 0:
                break  # zero-filled tail of a preallocated index
            if log is not None:
                end = min(len(log), position + max_message_size) if position >= 0 else None
                first = next(log.batches_from(position, end), None)
                found = first.last_offset if first is not None else -1
                if found != offset:
                    problems.add(problems.offset_mismatches, path, offset, found)
            if not verify_only:
                out.emit(f"offset: {offset} position: {position}",
                         {"type": "indexEntry", "offset": offset, "position": position})
    finally:
        if log is not None:
            log.close()
    return 0 if log is not None else 1


def _kafka_lookup_table(index_path: str, base: int) -> Tuple[List[int], List[int]]:
    """``(offsets, positions)`` that Kafka's tool would search in ``index_path`` as written.

    Kafka's dump looks time-index entries up in the offset index without
    trusting or repairing it; as there, the entries before a zero-filled
    tail are searched (only their increasing prefix: a damaged index may be
    out of order), so the problems reported are Kafka's.
    """
    offsets: List[int] = []
    positions: List[int] = []
    if not storage_for(index_path).exists(index_path):
        return offsets, positions
    for i, (o, p) in enumerate(IX.read_offset_index_file(index_path, base)[0]):
        if (o == base and i > 0) or (offsets and o <= offsets[-1]):
            break
        offsets.append(o)
        positions.append(p)
    return offsets, positions


def dump_time_index(path: str, out: Printer, problems: IndexProblems, *,
                    sanity_only: bool = False, verify_only: bool = False) -> int:
    """Print (and check) a time index; returns 0, or 1 if the log could not be read."""
    base, entries, _ = read_time_index(path)
    if sanity_only:
        time_index_sanity(path)
        return _passed_sanity(path, out)
    log = _sibling_log(path, complain=bool(entries))
    offsets, positions = _kafka_lookup_table(sibling(path, F.INDEX_SUFFIX), base)
    prev_ts = -1
    try:
        for i, (timestamp, offset) in enumerate(entries):
            if offset == base and i > 0:
                break
            if log is not None:
                i = bisect.bisect_right(offsets, offset)
                start = positions[i - 1] if i else 0
                batch = next((b for b in log.batches_from(start)
                              if b.last_offset >= offset), None)
                if batch is None:
                    problems.add(problems.not_found, path, offset, -1)
                elif batch.last_offset != offset:
                    problems.add(problems.not_found, path, offset, batch.last_offset)
                else:
                    max_ts = -1
                    try:
                        for rec in batch:
                            max_ts = max(max_ts, rec.timestamp)
                    except KafkaWireError:
                        max_ts = batch.max_timestamp
                    if max_ts != timestamp:
                        problems.add(problems.time_mismatches, path, timestamp, max_ts)
                    if prev_ts >= timestamp:
                        problems.add(problems.out_of_order, path, timestamp, prev_ts)
            if not verify_only:
                out.emit(f"timestamp: {timestamp} offset: {offset}",
                         {"type": "timeIndexEntry", "timestamp": timestamp, "offset": offset})
            prev_ts = timestamp
    finally:
        if log is not None:
            log.close()
    return 0 if log is not None or not entries else 1


def dump_txn_index(path: str, out: Printer) -> int:
    """Print every aborted transaction of a ``.txnindex``; 1 if the file is damaged.

    Only what a transaction index of its segment can hold is read; a larger
    file is reported as damaged after those entries."""
    data, size, limit = read_txn_index_file(path)
    try:
        if size > limit and len(data) % TXN_ENTRY_SIZE:
            data = data[:len(data) - len(data) % TXN_ENTRY_SIZE]
        for _pos, t in iter_txn_index(data):
            out.emit(f"version: {t.version} producerId: {t.producer_id} firstOffset: "
                     f"{t.first_offset} lastOffset: {t.last_offset} "
                     f"lastStableOffset: {t.last_stable_offset}",
                     {"type": "abortedTxn", "version": t.version, "producerId": t.producer_id,
                      "firstOffset": t.first_offset, "lastOffset": t.last_offset,
                      "lastStableOffset": t.last_stable_offset})
    except IndexCorruptError as e:
        err(f"kafkawire: {path}: {e}")
        return 1
    if size > limit:
        err(f"kafkawire: {path}: size {size} is more than the {limit} bytes of aborted "
            "transactions its segment can hold; the rest was not read (the index is damaged)")
        return 1
    return 0


def read_snapshot(path: str) -> List[Dict[str, int]]:
    """Entries of a producer-state ``.snapshot`` (version 1, CRC-32C checked), as the JSON keys."""
    data = F.read_snapshot_bytes(path)
    return [{"producerId": e.producer_id, "producerEpoch": e.producer_epoch,
             "lastSequence": e.last_sequence, "lastOffset": e.last_offset,
             "offsetDelta": e.offset_delta, "timestamp": e.timestamp,
             "coordinatorEpoch": e.coordinator_epoch,
             "currentTxnFirstOffset": e.current_txn_first_offset,
             "firstSequence": e.first_sequence}
            for e in F.parse_producer_snapshot(data)]


def dump_snapshot(path: str, out: Printer) -> int:
    """Print a producer snapshot like ``kafka-dump-log.sh``; 1 if it is corrupt."""
    try:
        entries = read_snapshot(path)
    except IndexCheckError as e:
        err(str(e))
        return 1
    for entry in entries:
        first = entry["currentTxnFirstOffset"]
        txn = "OptionalLong.empty" if first < 0 else f"OptionalLong[{first}]"
        text = (f"producerId: {entry['producerId']} producerEpoch: {entry['producerEpoch']} "
                f"coordinatorEpoch: {entry['coordinatorEpoch']} currentTxnFirstOffset: {txn} "
                f"lastTimestamp: {entry['timestamp']} firstSequence: {entry['firstSequence']} "
                f"lastSequence: {entry['lastSequence']} lastOffset: {entry['lastOffset']} "
                f"offsetDelta: {entry['offsetDelta']} timestamp: {entry['timestamp']}")
        obj: Dict[str, Any] = dict(entry, type="producerSnapshotEntry")
        obj["currentTxnFirstOffset"] = None if first < 0 else first
        out.emit(text, obj)
    return 0
