"""What the driver knows about the files: partitions, segments, index entries.

Everything here comes from directory listings, file sizes, ``.index`` /
``.timeindex`` entries and batch *headers* near the end of a segment (to find
the log end offset) — never from reading whole segments.  Indexes are
untrusted: one that fails Kafka's sanity checks, or whose entries do not land
on a batch header, is ignored and the segment is treated as unindexed (it is
then read whole, and cannot be split).
"""
from __future__ import annotations

import glob
import mmap
import os
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from kafkawire import _kernels as K
from kafkawire import _scan_common as SC
from kafkawire.spark.options import OptionError

_SEGMENT = re.compile(r"^(\d{20})\.log$")
_PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")
_OFF_DTYPE = np.dtype([("rel", ">i4"), ("pos", ">i4")])
_TIME_DTYPE = np.dtype([("ts", ">i8"), ("rel", ">i4")])


@dataclass
class SegmentInfo:
    """One ``<base>.log`` file and its (validated) offset index."""

    base: int
    path: str
    size: int
    index_offsets: np.ndarray = field(repr=False)    # absolute offsets, int64
    index_positions: np.ndarray = field(repr=False)  # file positions, int64
    _time: Optional[Tuple[np.ndarray, np.ndarray]] = field(default=None, repr=False)

    @property
    def stem(self) -> str:
        return self.path[:-4]

    def time_index(self) -> Tuple[np.ndarray, np.ndarray]:
        """(timestamps, absolute offsets) of the real, ordered ``.timeindex`` entries."""
        if self._time is None:
            ts = offs = np.zeros(0, np.int64)
            raw = _read(self.stem + ".timeindex")
            if raw:
                n = K.time_index_real_entries(raw, len(raw) // 12)
                bad = K.time_index_first_unordered(raw, n)
                if bad >= 0:
                    n = bad
                arr = np.frombuffer(raw, _TIME_DTYPE, count=n)
                ts = arr["ts"].astype(np.int64)
                offs = arr["rel"].astype(np.int64) + self.base
            self._time = (ts, offs)
        return self._time

    def position_at_or_before(self, offset: int) -> int:
        """File position of a batch at or before the one holding ``offset`` (index lookup)."""
        if offset <= self.base or len(self.index_offsets) == 0:
            return 0
        k = int(np.searchsorted(self.index_offsets, offset, side="right")) - 1
        return int(self.index_positions[k]) if k >= 0 else 0

    def position_after(self, offset: int) -> int:
        """A batch boundary such that every batch starting there holds only offsets > ``offset``."""
        offs = self.index_offsets
        j = int(np.searchsorted(offs, offset, side="left"))   # first entry naming >= offset
        if j + 1 < len(offs):
            return int(self.index_positions[j + 1])
        return self.size

    def trust(self, positions) -> bool:
        """Check that index ``positions`` land on batch headers; forget the index if not."""
        if len(self.index_positions) and not positions_are_batches(self.path, positions, self.size):
            self.index_offsets = self.index_positions = np.zeros(0, np.int64)
            return False
        return True

    def cut_positions(self, start: int, end: int) -> np.ndarray:
        """Index positions strictly inside (start, end): where a range may be split."""
        pos = self.index_positions
        lo = int(np.searchsorted(pos, start, side="right"))
        hi = int(np.searchsorted(pos, end, side="left"))
        return pos[lo:hi]


@dataclass
class PartitionInfo:
    """One ``<topic>-<partition>`` folder."""

    topic: str
    partition: int
    path: str
    segments: List[SegmentInfo]
    _end: Optional[Tuple[int, int]] = field(default=None, repr=False)

    @property
    def tp(self) -> Tuple[str, int]:
        return (self.topic, self.partition)

    @property
    def start_offset(self) -> int:
        return self.segments[0].base if self.segments else 0

    @property
    def end_offset(self) -> int:
        """Log end offset: one past the last offset of the last complete batch."""
        return self._log_end()[0]

    @property
    def end_position(self) -> int:
        """Where the last segment's complete batches end (a reader must not go past it)."""
        return self._log_end()[1]

    def _log_end(self) -> Tuple[int, int]:
        if self._end is None:
            self._end = (self.start_offset, 0)
            for seg in reversed(self.segments):
                last, stop = last_offset_in(seg, seg.index_positions[-1] if len(seg.index_positions) else 0)
                if last is not None:
                    self._end = (last + 1, stop)
                    break
                if seg is self.segments[-1]:
                    self._end = (seg.base, stop)
                    break
        return self._end

    def segments_for(self, start: int, end: int) -> List[Tuple[SegmentInfo, int]]:
        """(segment, next segment's base or None) for segments that may hold offsets in [start, end)."""
        out = []
        segs = self.segments
        for i, seg in enumerate(segs):
            nxt = segs[i + 1].base if i + 1 < len(segs) else None
            if seg.base >= end:
                break
            if nxt is not None and nxt <= start:
                continue
            out.append((seg, nxt))
        return out


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def map_file(path: str):
    """A read-only mmap of ``path`` (or b"" for an empty file)."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return b""
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


def scan_headers(buf, start: int, end: int = -1):
    """Batch headers of ``buf[start:end]`` (no payload read): (rows, stop_position, status)."""
    return K.scan_batches(buf, start, end, -1, False)


def last_offset_in(seg: SegmentInfo, from_position: int) -> Tuple[Optional[int], int]:
    """Last offset of the last complete batch at or after ``from_position``, and where batches end."""
    buf = map_file(seg.path)
    try:
        rows, stop, _status = scan_headers(buf, int(from_position), -1)
        if len(rows) == 0 and from_position:
            rows, stop, _status = scan_headers(buf, 0, -1)
        if len(rows) == 0:
            return None, int(stop)
        return int(rows[:, SC.LAST_OFFSET].max()), int(stop)
    finally:
        if isinstance(buf, mmap.mmap):
            buf.close()


def _load_offset_index(stem: str, base: int, log_path: str, size: int) -> Tuple[np.ndarray, np.ndarray]:
    empty = (np.zeros(0, np.int64), np.zeros(0, np.int64))
    raw = _read(stem + ".index")
    if not raw or size == 0:
        return empty
    n = K.offset_index_real_entries(raw, len(raw) // 8)
    if n == 0 or K.offset_index_first_unordered(raw, n, size) >= 0:
        return empty
    arr = np.frombuffer(raw, _OFF_DTYPE, count=n)
    return arr["rel"].astype(np.int64) + base, arr["pos"].astype(np.int64)


def positions_are_batches(log_path: str, positions, size: int) -> bool:
    """Each position must hold a plausible batch header (one 17-byte read each)."""
    with open(log_path, "rb") as f:
        fd = f.fileno()
        for pos in positions:
            pos = int(pos)
            if pos == 0 or pos == size:
                continue
            head = os.pread(fd, 17, pos)
            if len(head) < 17:
                return False
            length = int.from_bytes(head[8:12], "big", signed=True)
            if head[16] > 2 or length < SC.MIN_LENGTH or pos + 12 + length > size:
                return False
    return True


def open_partition(path: str, topic: str, partition: int) -> PartitionInfo:
    segs = []
    for name in os.listdir(path):
        m = _SEGMENT.match(name)
        if not m:
            continue  # .deleted / .cleaned / .swap leftovers and other files are not segments
        log_path = os.path.join(path, name)
        base = int(m.group(1))
        size = os.path.getsize(log_path)
        offs, pos = _load_offset_index(log_path[:-4], base, log_path, size)
        segs.append(SegmentInfo(base, log_path, size, offs, pos))
    segs.sort(key=lambda s: s.base)
    return PartitionInfo(topic, partition, path, segs)


def _is_partition_dir(path: str) -> bool:
    try:
        return any(_SEGMENT.match(n) for n in os.listdir(path))
    except OSError:
        return False


def discover(paths: Sequence[str]) -> List[PartitionInfo]:
    """Expand globs and find every topic-partition folder under ``paths``."""
    found: Dict[Tuple[str, int], PartitionInfo] = {}
    for raw in paths:
        expanded = sorted(glob.glob(raw)) if glob.has_magic(raw) else [raw]
        if not expanded:
            raise OptionError(f"path {raw!r} matches nothing")
        for p in expanded:
            p = os.path.abspath(p)
            if not os.path.isdir(p):
                raise OptionError(f"path {p!r} is not a directory: give a log.dirs folder or a "
                                  "<topic>-<partition> folder")
            m = _PARTITION_DIR.match(os.path.basename(p.rstrip(os.sep)))
            if m and _is_partition_dir(p):
                candidates = [(p, m)]
            else:
                candidates = []
                for name in sorted(os.listdir(p)):
                    sub = os.path.join(p, name)
                    mm = _PARTITION_DIR.match(name)
                    if mm and os.path.isdir(sub):
                        candidates.append((sub, mm))
                if not candidates and m:
                    candidates = [(p, m)]   # an empty partition folder
            for sub, mm in candidates:
                tp = (mm.group("topic"), int(mm.group("partition")))
                if tp in found:
                    raise OptionError(f"topic-partition {tp[0]}-{tp[1]} found twice: "
                                      f"{found[tp].path} and {sub}; give each log.dirs folder once")
                found[tp] = open_partition(sub, *tp)
    if not found:
        raise OptionError(f"no <topic>-<partition> folders with .log segments under {list(paths)}")
    return [found[tp] for tp in sorted(found)]
