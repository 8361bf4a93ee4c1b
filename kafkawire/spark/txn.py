"""read_committed in the tasks: the log's aborted ranges, applied to columns.

Which transactional records are hidden is decided by
:mod:`kafkawire.log.isolation` (Kafka's rule: per producer, from the first
offset of each aborted transaction to its abort marker), over the batches of
a task's slice and as far past it as markers are missing.  This module only
turns those ranges into a numpy mask over a column chunk.  Records of a
transaction still open lie at or after the last stable offset, where the
planner already ended the read.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Dict, Optional, Tuple

import numpy as np

from kafkawire.log import Log
from kafkawire.log.isolation import AbortedRanges, scan_aborted
from kafkawire.log.storage import Storage, absolute

if TYPE_CHECKING:
    from typing_extensions import Buffer

    from kafkawire.records.columnar import ColumnChunk
    from kafkawire.spark.planning import Slice


class TxnMarkers:
    """The aborted transactions a slice's records may belong to, as numpy arrays per producer."""

    def __init__(self, ranges: AbortedRanges) -> None:
        self.ranges = ranges
        self._arrays: Dict[int, Tuple[np.ndarray, np.ndarray]] = {}

    @classmethod
    def for_slice(cls, s: Slice, buf: Optional[Buffer] = None, *,
                  storage: Optional[Storage] = None) -> "TxnMarkers":
        """Aborted ranges for the batches of slice ``s`` (``buf``, its mapped file, is not needed;
        ``storage`` reads the slice's folder, by default the one its path names)."""
        log = Log.open(os.path.dirname(s.path), storage=storage)
        try:
            segs = log.segments
            here = next(i for i, seg in enumerate(segs) if seg.path == absolute(s.path))
            seg = segs[here]
            end = seg.offset_at(s.end_pos) if s.end_pos < seg.size else (
                segs[here + 1].base_offset if here + 1 < len(segs) else None)
            end = s.end_offset if end is None else min(end, s.end_offset)
            return cls(scan_aborted(segs[here:], s.start_pos, end))
        finally:
            log.close()

    def markers(self, pid: int) -> Tuple[np.ndarray, np.ndarray]:
        """``(first offsets, marker offsets)`` of the producer's aborted transactions, sorted."""
        if pid not in self._arrays:
            rs = self.ranges.ranges(pid)
            self._arrays[pid] = (np.fromiter((r[0] for r in rs), np.int64, len(rs)),
                                 np.fromiter((r[1] for r in rs), np.int64, len(rs)))
        return self._arrays[pid]


def aborted_mask(chunk: ColumnChunk, txn: TxnMarkers) -> np.ndarray:
    """True for records of ``chunk`` that read_committed must hide (their transaction aborted)."""
    drop = np.zeros(len(chunk), bool)
    idx = np.flatnonzero(chunk.is_transactional)
    if len(idx) == 0 or not txn.ranges:
        return drop
    pids = chunk.producer_id[idx]
    bases = chunk.batch_base_offset[idx]
    for pid in np.unique(pids).tolist():
        firsts, lasts = txn.markers(pid)
        if len(firsts) == 0:
            continue
        sel = pids == pid
        b = bases[sel]
        k = np.searchsorted(firsts, b, side="right") - 1
        drop[idx[sel]] = (k >= 0) & (b <= lasts[np.maximum(k, 0)])
    return drop
