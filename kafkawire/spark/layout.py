"""What the driver knows about the files: partitions, segments, index entries.

A thin view of :mod:`kafkawire.log` for planning: each partition is a
:class:`~kafkawire.log.Log`, each segment's offset index is a pair of numpy
arrays (from the index loaded by the log's trust rules) for ``searchsorted``.
Planning reads directory listings, file sizes, index files and batch
*headers* near the end of a segment (the log end offset) — never whole
segments.  A segment whose index is not trusted, or whose entries do not
land on batch headers, is planned as unindexed: read whole by one task.
"""
from __future__ import annotations

import glob
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple, cast

import numpy as np

from kafkawire import _kernels as K
from kafkawire.log import Log, Segment
from kafkawire.log import files as F
from kafkawire.log.storage import ObjectStorage, Storage, absolute, is_url, storage_for
from kafkawire.log.storage import map_file as _map
from kafkawire.spark.options import OptionError

if TYPE_CHECKING:
    from typing_extensions import Buffer

_EMPTY = np.zeros(0, np.int64)


class SegmentInfo:
    """One segment as the planner sees it: its ``.log`` and (trusted) offset-index entries."""

    def __init__(self, segment: Segment) -> None:
        self.segment = segment
        self.base = segment.base_offset
        self.path = segment.path
        self.size = segment.size
        idx = segment.disk_offset_index
        #: Absolute offsets and file positions of the index entries (int64, for searchsorted).
        self.index_offsets: np.ndarray = idx.offsets
        self.index_positions: np.ndarray = idx.positions

    def __repr__(self) -> str:
        return f"SegmentInfo(base={self.base}, path={self.path!r}, size={self.size})"

    @property
    def stem(self) -> str:
        return self.path[:-len(F.LOG_SUFFIX)]

    def time_index(self) -> Tuple[np.ndarray, np.ndarray]:
        """(timestamps, absolute offsets) of the segment's time index."""
        tim = self.segment.time_index
        return tim.timestamps, tim.offsets

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

    def trust(self, positions: Sequence[int]) -> bool:
        """Check that index ``positions`` land on batch headers; forget the index if not."""
        if len(self.index_positions) and not self.segment.positions_are_batches(positions):
            self.index_offsets = self.index_positions = _EMPTY
            return False
        return True

    def cut_positions(self, start: int, end: int) -> np.ndarray:
        """Index positions strictly inside (start, end): where a range may be split."""
        pos = self.index_positions
        lo = int(np.searchsorted(pos, start, side="right"))
        hi = int(np.searchsorted(pos, end, side="left"))
        return pos[lo:hi]


class PartitionInfo:
    """One ``<topic>-<partition>`` folder: a :class:`~kafkawire.log.Log` and its segments' index arrays."""

    def __init__(self, topic: str, partition: int, log: Log) -> None:
        self.topic = topic
        self.partition = partition
        self.log = log
        self.path = log.path
        self.segments: List[SegmentInfo] = [SegmentInfo(s) for s in log.segments]

    def __repr__(self) -> str:
        return f"PartitionInfo({self.topic!r}, {self.partition}, {self.path!r}, {len(self.segments)} segments)"

    @property
    def tp(self) -> Tuple[str, int]:
        return (self.topic, self.partition)

    @property
    def start_offset(self) -> int:
        return self.log.start_offset

    @property
    def end_offset(self) -> int:
        """Log end offset: one past the last offset of the last complete batch."""
        return self.log.next_offset

    @property
    def end_position(self) -> int:
        """Where the last segment's complete batches end (a reader must not go past it)."""
        segs = self.log.segments
        return segs[-1].valid_end if segs else 0

    def segments_for(self, start: int, end: int) -> List[Tuple[SegmentInfo, Optional[int]]]:
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

    def close(self) -> None:
        self.log.close()


def map_file(path: str) -> Buffer:
    """A read-only mmap of ``path`` (or b"" for an empty file), from the log's storage."""
    return _map(path).data


def scan_headers(buf: Buffer, start: int, end: int = -1) -> Tuple[np.ndarray, int, int]:
    """Batch headers of ``buf[start:end]`` (no payload read): (rows, stop_position, status)."""
    return K.scan_batches(buf, start, end, -1, False)


def last_offset_in(seg: SegmentInfo, from_position: int = 0) -> Tuple[Optional[int], int]:
    """Last offset of the segment's last complete batch (None if it has none), and where its
    batches end (the log model's answer; ``from_position`` is no longer needed)."""
    s = seg.segment
    nxt, end = s.next_offset, s.valid_end
    return (nxt - 1 if end > 0 else None), end


def positions_are_batches(log_path: str, positions: Sequence[int], size: int) -> bool:
    """Each position must hold a plausible batch header (see ``Segment.positions_are_batches``)."""
    return Segment(F.segment_files(log_path), size=size).positions_are_batches(positions)


def open_partition(path: str, topic: str, partition: int,
                   storage: Optional[Storage] = None) -> PartitionInfo:
    return PartitionInfo(topic, partition, Log.open(path, storage=storage))


def discover(paths: Sequence[str], storage_options: Optional[Dict[str, str]] = None) -> List[PartitionInfo]:
    """Expand globs and find every topic-partition folder under ``paths`` (local paths or URLs;
    ``storage_options`` configure the storage of URLs)."""
    found: Dict[Tuple[str, int], PartitionInfo] = {}
    for raw in paths:
        storage = storage_for(raw, storage_options)
        if not glob.has_magic(raw):
            expanded = [raw]
        elif is_url(raw):
            expanded = cast(ObjectStorage, storage).glob(raw)   # a URL's storage
        else:
            expanded = sorted(glob.glob(raw))
        if not expanded:
            raise OptionError(f"path {raw!r} matches nothing")
        for p in expanded:
            p = absolute(p)
            for sub, tp in F.find_partitions(p, storage):
                if tp is None:
                    continue
                if tp in found:
                    raise OptionError(f"topic-partition {tp[0]}-{tp[1]} found twice: "
                                      f"{found[tp].path} and {sub}; give each log.dirs folder once")
                found[tp] = open_partition(sub, *tp, storage=storage)
    if not found:
        raise OptionError(f"no <topic>-<partition> folders with .log segments under {list(paths)}")
    return [found[tp] for tp in sorted(found)]
