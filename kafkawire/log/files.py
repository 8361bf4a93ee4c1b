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
from typing import Dict, List, Optional, Tuple, Union

from kafkawire import _kernels as K
from kafkawire.errors import IndexCorruptError, LogError, PathError
from kafkawire.log.storage import Storage, absolute, storage_for

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


def offset_from_file_name(path: str) -> int:
    """The base offset a segment file's name starts with, as Kafka reads it (the digits before
    the first dot: ``00000000000000000042.index`` -> 42); for files a user names directly."""
    stem = os.path.basename(path).split(".")[0]
    try:
        return int(stem)
    except ValueError:
        raise LogError(f"{path}: file name does not start with a base offset "
                       "(Kafka names segment files <20-digit offset>.<suffix>)") from None


def sibling_path(path: str, suffix: str) -> str:
    """The file of the same segment as ``path`` with another suffix (``.index`` -> ``.log``)."""
    stem = os.path.basename(path).split(".")[0]
    return os.path.join(os.path.dirname(absolute(path)), stem + suffix)


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


def list_partition(path: str, storage: Optional[Storage] = None) -> PartitionFiles:
    """Classify every file of partition folder ``path``."""
    storage = storage or storage_for(path)
    out = PartitionFiles(path=path)
    by_base: Dict[int, SegmentFiles] = {}
    for name in sorted(storage.listdir(path)):
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


def segment_files(path: str, storage: Optional[Storage] = None) -> SegmentFiles:
    """The files on disk of the segment that ``path`` (its ``.log`` or any sibling) belongs to."""
    storage = storage or storage_for(path)
    parsed = parse_segment_file_name(os.path.basename(path))
    if parsed is None:
        raise LogError(f"{path}: not a segment file (expected <20-digit base offset>.log)")
    folder = os.path.dirname(absolute(path))
    stem = os.path.join(folder, segment_file_name(parsed[0], ""))
    sf = SegmentFiles(parsed[0])
    for suffix in SEGMENT_SUFFIXES + (SNAPSHOT_SUFFIX,):
        if storage.exists(stem + suffix):
            setattr(sf, suffix[1:], stem + suffix)
    return sf


def has_segments(path: str, storage: Optional[Storage] = None) -> bool:
    """Whether folder ``path`` holds live segment files (False if it cannot be listed)."""
    storage = storage or storage_for(path)
    try:
        names = storage.listdir(path)
    except OSError:
        return False
    return any(_SEGMENT_RE.match(n) for n in names)


def find_partitions(root: str, storage: Optional[Storage] = None) -> List[Tuple[str, Optional[Tuple[str, int]]]]:
    """Partition folders at or under ``root``: ``[(path, (topic, partition) or None)]``.

    ``root`` itself is the partition when it holds segment files; otherwise
    its ``<topic>-<partition>`` subfolders are (folders being deleted,
    ``-future`` and ``-stray`` replicas do not match); a folder named like a
    partition with neither is an empty partition.  The key is None for a
    folder of segments not named ``<topic>-<partition>``.
    """
    storage = storage or storage_for(root)
    if not storage.isdir(root):
        raise PathError(f"{root} is not a directory; give a broker log.dirs folder or a "
                        "<topic>-<partition> folder")
    key = parse_partition_dir_name(os.path.basename(absolute(root)))
    if has_segments(root, storage):
        return [(root, key)]
    found: List[Tuple[str, Optional[Tuple[str, int]]]] = []
    for name in sorted(storage.listdir(root)):
        sub = os.path.join(root, name)
        k = parse_partition_dir_name(name)
        if k is not None and storage.isdir(sub):
            found.append((sub, k))
    if not found and key is not None:
        return [(root, key)]
    return found


def fsync_dir(path: str) -> None:
    """Make a folder's new, renamed and removed entries durable (a no-op off POSIX)."""
    if os.name != "posix":
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: str, data: bytes, *, tmp_suffix: str = ".tmp") -> None:
    """Replace ``path`` with ``data`` so a crash leaves the old or the new file, never a
    mix: write ``path + tmp_suffix``, fsync it, rename it over ``path``, fsync the folder."""
    tmp = path + tmp_suffix
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(os.path.dirname(os.path.abspath(path)))


def read_leader_epoch_checkpoint(path: str) -> List[Tuple[int, int]]:
    """``[(leader_epoch, start_offset), ...]`` from a ``leader-epoch-checkpoint`` file.

    The format is text: a version line (0), a count line, then one
    ``epoch offset`` pair per line.
    """
    text = storage_for(path).read(path).decode("ascii")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
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
    for ln in storage_for(path).read(path).decode("utf-8").splitlines():
        if ":" in ln:
            k, v = ln.split(":", 1)
            out[k.strip()] = v.strip()
    return out


#: The producer-state snapshot format version kafkawire reads (Kafka's ProducerStateManager).
SNAPSHOT_VERSION = 1
_SNAPSHOT_HEADER = struct.Struct(">hIi")
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")
_INT32_MAX = 0x7FFFFFFF


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

    @property
    def first_sequence(self) -> int:
        """The sequence of the producer's last batch's first record (sequences wrap at 2**31)."""
        if self.last_sequence < self.offset_delta:
            return _INT32_MAX - (self.offset_delta - self.last_sequence) + 1
        return self.last_sequence - self.offset_delta


def parse_producer_snapshot(data: Union[bytes, bytearray, memoryview], path: Optional[str] = None) -> List[ProducerSnapshotEntry]:
    """Entries of a producer-state ``.snapshot`` file's bytes; IndexCorruptError if damaged.

    Layout: int16 version (1), uint32 CRC-32C of everything after it, int32
    entry count, then 46-byte entries (producer id, epoch, last sequence,
    last offset, offset delta, timestamp, coordinator epoch, first offset of
    the open transaction or -1).  Messages are Kafka's, after ``path: `` when
    a path is given.  A broker that finds a snapshot damaged rebuilds
    producer state from the log.
    """
    where = f"{path}: " if path else ""
    if len(data) < _SNAPSHOT_HEADER.size:
        raise IndexCorruptError(f"{where}Snapshot is corrupt: {len(data)} bytes, shorter than its header")
    version, crc, count = _SNAPSHOT_HEADER.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise IndexCorruptError(f"{where}Snapshot contained an unknown file version {version}")
    computed = K.crc32c(data, 6, len(data))
    if crc != computed:
        raise IndexCorruptError(f"{where}Snapshot is corrupt (CRC is no longer valid). Stored crc: "
                                f"{crc}. Computed crc: {computed}")
    if count < 0 or _SNAPSHOT_HEADER.size + count * _SNAPSHOT_ENTRY.size > len(data):
        raise IndexCorruptError(f"{where}Snapshot is corrupt: {count} entries do not fit in "
                                f"{len(data)} bytes")
    return [ProducerSnapshotEntry(*_SNAPSHOT_ENTRY.unpack_from(data, _SNAPSHOT_HEADER.size + i * _SNAPSHOT_ENTRY.size))
            for i in range(count)]


#: The largest producer-state snapshot read (over five million producers).
MAX_SNAPSHOT_BYTES = 256 << 20


def read_snapshot_bytes(path: str) -> bytes:
    """The bytes of a ``.snapshot`` file; IndexCorruptError when it is larger than
    :data:`MAX_SNAPSHOT_BYTES` (never read whole) or not a regular file."""
    try:
        data, size = storage_for(path).read_bounded(path, MAX_SNAPSHOT_BYTES)
    except LogError as exc:
        raise IndexCorruptError(str(exc)) from None
    if size > MAX_SNAPSHOT_BYTES:
        raise IndexCorruptError(f"{path}: Snapshot is corrupt: {size} bytes, more than the "
                                f"{MAX_SNAPSHOT_BYTES} bytes kafkawire reads")
    return data


def read_producer_snapshot(path: str) -> List[ProducerSnapshotEntry]:
    """Entries of the producer-state ``.snapshot`` file at ``path``."""
    return parse_producer_snapshot(read_snapshot_bytes(path), path)
