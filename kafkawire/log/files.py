"""What the files in a Kafka partition folder are called and how to list them.

A partition folder ``<topic>-<partition>`` holds segments named by their
20-digit, zero-padded base offset: ``.log`` (the batches), ``.index`` (offset
index), ``.timeindex`` (time index), ``.txnindex`` (aborted transactions) and
``.snapshot`` (producer state), plus ``leader-epoch-checkpoint`` and
``partition.metadata``.  The broker leaves files with ``.deleted``,
``.cleaned`` and ``.swap`` suffixes while it deletes, compacts or replaces
segments; they are half-finished work (a ``.swap`` may hold a segment that
was never swapped in), so kafkawire deliberately ignores them, as a
restarting broker would before it replays or discards them.  Files our own
``recover`` saves (``.cut-<time>``) are ignored the same way.
"""
from __future__ import annotations

import os
import re
import struct
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
SNAPSHOT_SUFFIX = ".snapshot"
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
#: Suffixes of files a broker leaves mid-operation; never read as live data.
LEFTOVER_SUFFIXES = (".deleted", ".cleaned", ".swap")
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"

_SEGMENT_RE = re.compile(r"^(\d{20})(\.log|\.index|\.timeindex|\.txnindex|\.snapshot)$")
# Kafka's own folder names: topic-N, plus topic-N.<uuid>-delete / -future / -stray variants.
_PARTITION_RE = re.compile(r"^(.+)-(\d+)$")


def segment_file_name(base_offset: int, suffix: str = LOG_SUFFIX) -> str:
    """``00000000000000012345.log`` for base offset 12345."""
    if base_offset < 0:
        raise ValueError(f"base offset must be >= 0, got {base_offset}")
    return f"{base_offset:020d}{suffix}"


def parse_segment_file_name(name: str) -> Optional[Tuple[int, str]]:
    """``(base_offset, suffix)`` for a live segment file name, else None (leftovers included)."""
    m = _SEGMENT_RE.match(name)
    if m is None:
        return None
    return int(m.group(1)), m.group(2)


def parse_partition_dir_name(name: str) -> Optional[Tuple[str, int]]:
    """``(topic, partition)`` for a folder named ``<topic>-<partition>``, else None.

    Folders being deleted (``topic-0.<uuid>-delete``), future replicas
    (``-future``) and strays (``-stray``) do not match and are skipped.
    """
    m = _PARTITION_RE.match(name)
    if m is None:
        return None
    return m.group(1), int(m.group(2))


@dataclass
class SegmentFiles:
    """The files of one segment that exist on disk (paths or None)."""

    base_offset: int
    log: Optional[str] = None
    index: Optional[str] = None
    timeindex: Optional[str] = None
    txnindex: Optional[str] = None
    snapshot: Optional[str] = None


@dataclass
class PartitionFiles:
    """A partition folder's contents, classified."""

    path: str
    segments: List[SegmentFiles] = field(default_factory=list)   # by base offset, with a .log
    snapshots: Dict[int, str] = field(default_factory=dict)       # producer-state snapshots
    orphans: List[str] = field(default_factory=list)              # indexes without a .log
    leftovers: List[str] = field(default_factory=list)            # .deleted/.cleaned/.swap, ignored
    leader_epoch_checkpoint: Optional[str] = None
    partition_metadata: Optional[str] = None
    other: List[str] = field(default_factory=list)


def list_partition(path: str) -> PartitionFiles:
    """Classify every file of partition folder ``path``."""
    out = PartitionFiles(path=path)
    by_base: Dict[int, SegmentFiles] = {}
    for name in sorted(os.listdir(path)):
        full = os.path.join(path, name)
        if name.endswith(LEFTOVER_SUFFIXES) or ".cut-" in name:
            out.leftovers.append(full)
            continue
        if name == LEADER_EPOCH_CHECKPOINT:
            out.leader_epoch_checkpoint = full
            continue
        if name == PARTITION_METADATA:
            out.partition_metadata = full
            continue
        parsed = parse_segment_file_name(name)
        if parsed is None:
            out.other.append(full)
            continue
        base, suffix = parsed
        if suffix == SNAPSHOT_SUFFIX:
            out.snapshots[base] = full
            continue
        seg = by_base.setdefault(base, SegmentFiles(base))
        setattr(seg, suffix[1:], full)
    for base in sorted(by_base):
        seg = by_base[base]
        if seg.log is None:
            out.orphans.extend(p for p in (seg.index, seg.timeindex, seg.txnindex) if p)
        else:
            seg.snapshot = out.snapshots.get(base)
            out.segments.append(seg)
    return out


def read_leader_epoch_checkpoint(path: str) -> List[Tuple[int, int]]:
    """``[(leader_epoch, start_offset), ...]`` from a ``leader-epoch-checkpoint`` file.

    The format is text: a version line (0), a count line, then one
    ``epoch offset`` pair per line.
    """
    with open(path, encoding="ascii") as f:
        lines = [ln.strip() for ln in f if ln.strip()]
    if len(lines) < 2 or lines[0] != "0":
        raise ValueError(f"{path}: unsupported leader-epoch-checkpoint (version line {lines[:1]})")
    count = int(lines[1])
    entries = []
    for ln in lines[2:2 + count]:
        epoch, offset = ln.split()
        entries.append((int(epoch), int(offset)))
    if len(entries) != count:
        raise ValueError(f"{path}: expected {count} entries, found {len(entries)}")
    return entries


def read_partition_metadata(path: str) -> Dict[str, str]:
    """``{"version": "0", "topic_id": "..."}`` from a ``partition.metadata`` file."""
    out = {}
    with open(path, encoding="utf-8") as f:
        for ln in f:
            if ":" in ln:
                k, v = ln.split(":", 1)
                out[k.strip()] = v.strip()
    return out


@dataclass(frozen=True)
class ProducerSnapshotEntry:
    """One producer's state in a ``.snapshot`` file (Kafka's ProducerStateManager, version 1)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int


_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")


def parse_producer_snapshot(data: bytes, path: str = "<snapshot>") -> List[ProducerSnapshotEntry]:
    """Entries of a producer-state ``.snapshot`` file's bytes.

    Layout: int16 version (1), uint32 CRC-32C of everything after it, int32
    entry count, then 46-byte entries (producer id, epoch, last sequence,
    last offset, offset delta, timestamp, coordinator epoch, first offset of
    the open transaction or -1).
    """
    from kafkawire import _kernels as K
    from kafkawire.errors import IndexCorruptError
    if len(data) < 10:
        raise IndexCorruptError(f"{path}: {len(data)} bytes is too short for a producer snapshot")
    version, crc, count = struct.unpack_from(">hIi", data, 0)
    if version != 1:
        raise IndexCorruptError(f"{path}: unsupported producer snapshot version {version}")
    if K.crc32c(data, 6, len(data)) != crc:
        raise IndexCorruptError(f"{path}: CRC mismatch; the snapshot is damaged (a broker rebuilds "
                                "producer state from the log when it ignores it)")
    if count < 0 or 10 + count * _SNAPSHOT_ENTRY.size != len(data):
        raise IndexCorruptError(f"{path}: {count} entries do not fit its {len(data)} bytes")
    return [ProducerSnapshotEntry(*_SNAPSHOT_ENTRY.unpack_from(data, 10 + i * _SNAPSHOT_ENTRY.size))
            for i in range(count)]


def read_producer_snapshot(path: str) -> List[ProducerSnapshotEntry]:
    with open(path, "rb") as f:
        return parse_producer_snapshot(f.read(), path)
