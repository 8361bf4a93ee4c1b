"""read_committed in the tasks: which transactional records were aborted.

A transactional record is visible only when the first control marker its
producer wrote after it is a COMMIT.  A task finds those markers by scanning
batch headers forward from its slice (no payload is decompressed: control
batches are tiny and never compressed), continuing into later segments only
while some producer's marker is still missing.  Records of a transaction with
no marker yet are still open and, as with Kafka's last stable offset, not shown.
"""
from __future__ import annotations

import os
from typing import Dict, List, Tuple

import numpy as np

from kafkawire import _scan_common as SC


class TxnMarkers:
    """Control markers per producer id, gathered lazily segment by segment."""

    def __init__(self, todo: List[Tuple[str, int]], first_buf=None) -> None:
        self._todo = todo            # (segment path, start position) still to scan, in order
        self._first_buf = first_buf
        self._marks: Dict[int, Tuple[List[int], List[int]]] = {}
        self._arrays: Dict[int, Tuple[np.ndarray, np.ndarray]] = {}

    @classmethod
    def for_slice(cls, s, buf=None) -> "TxnMarkers":
        from kafkawire.spark.layout import _SEGMENT
        folder = os.path.dirname(s.path)
        here = os.path.basename(s.path)
        later = sorted(n for n in os.listdir(folder) if _SEGMENT.match(n) and n > here)
        todo = [(s.path, s.start_pos)] + [(os.path.join(folder, n), 0) for n in later]
        return cls(todo, buf)

    @property
    def exhausted(self) -> bool:
        return not self._todo

    def scan_next(self) -> bool:
        """Scan the next segment for control batches; False when none are left."""
        from kafkawire.records.columnar import iter_column_chunks
        from kafkawire.spark.layout import map_file, scan_headers
        if not self._todo:
            return False
        path, start = self._todo.pop(0)
        buf = self._first_buf if self._first_buf is not None else map_file(path)
        self._first_buf = None
        rows, _stop, _st = scan_headers(buf, start, -1)
        ctl = rows[(rows[:, SC.MAGIC] == 2) & ((rows[:, SC.ATTRIBUTES] & SC.CONTROL_MASK) != 0)]
        for row in ctl:
            pos, size = int(row[SC.POSITION]), int(row[SC.SIZE])
            for chunk in iter_column_chunks(buf, start=pos, end=pos + size):
                for off, pid, typ in zip(chunk.control_offset.tolist(), chunk.control_producer_id.tolist(),
                                         chunk.control_type.tolist()):
                    offs, types = self._marks.setdefault(pid, ([], []))
                    offs.append(off)
                    types.append(typ)
        self._arrays.clear()
        return True

    def markers(self, pid: int) -> Tuple[np.ndarray, np.ndarray]:
        if pid not in self._arrays:
            offs, types = self._marks.get(pid, ([], []))
            self._arrays[pid] = (np.asarray(offs, np.int64), np.asarray(types, np.int8))
        return self._arrays[pid]


def aborted_mask(chunk, txn: TxnMarkers) -> np.ndarray:
    """True for records of ``chunk`` that read_committed must hide (aborted or still open)."""
    n = len(chunk)
    drop = np.zeros(n, bool)
    idx = np.flatnonzero(chunk.is_transactional)
    if len(idx) == 0:
        return drop
    pids = chunk.producer_id[idx]
    bases = chunk.batch_base_offset[idx]
    for pid in np.unique(pids).tolist():
        sel = idx[pids == pid]
        b = bases[pids == pid]
        while True:
            offs, types = txn.markers(pid)
            pos = np.searchsorted(offs, b, side="right")
            if (pos < len(offs)).all() or txn.exhausted:
                break
            txn.scan_next()
        found = pos < len(offs)
        hide = ~found
        hide[found] = types[pos[found]] == 0   # 0 = ABORT
        drop[sel] = hide
    return drop
