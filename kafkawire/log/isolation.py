"""``read_committed``: which transactional batches were aborted, and the last stable offset.

Computed from the control markers in the log itself (a header scan plus the
few control batches' keys), merged with ``.txnindex`` entries where segments
have them.  A transactional batch of producer P is aborted when the next
marker of P after it is an ABORT; batches of a transaction with no marker
yet lie at or after the last stable offset and are not visible.
"""
from __future__ import annotations

import bisect
from typing import Dict, Iterable, List, Optional, Tuple

from kafkawire.log.txnindex import AbortedTxn


class AbortedRanges:
    """Per producer, sorted ``(first_offset, marker_offset)`` ranges of aborted transactions."""

    def __init__(self) -> None:
        self._ranges: Dict[int, List[Tuple[int, int]]] = {}
        #: First offset of the earliest transaction still open at the end of the log, or None.
        self.last_stable_offset: Optional[int] = None

    def add(self, producer_id: int, first_offset: int, last_offset: int) -> None:
        lst = self._ranges.setdefault(producer_id, [])
        item = (first_offset, last_offset)
        i = bisect.bisect_left(lst, item)
        if i == len(lst) or lst[i] != item:
            lst.insert(i, item)

    def add_txns(self, txns: Iterable[AbortedTxn]) -> None:
        for t in txns:
            self.add(t.producer_id, t.first_offset, t.last_offset)

    def is_aborted(self, producer_id: int, offset: int) -> bool:
        lst = self._ranges.get(producer_id)
        if not lst:
            return False
        i = bisect.bisect_right(lst, (offset, float("inf"))) - 1
        # Ranges of one producer are disjoint, except the same transaction seen both in a
        # .txnindex (true start) and from markers (start seen by the scan): check both.
        for j in (i, i - 1):
            if j >= 0 and lst[j][0] <= offset <= lst[j][1]:
                return True
        return False

    def __bool__(self) -> bool:
        return bool(self._ranges)

    def __iter__(self):
        for pid, lst in sorted(self._ranges.items()):
            for first, last in lst:
                yield AbortedTxn(pid, first, last, -1)


def compute(headers_iter: Iterable[Tuple[int, int, int, bool, bool, int]], control_type) -> AbortedRanges:
    """Aborted ranges from header tuples ``(base_offset, last_offset, producer_id,
    is_transactional, is_control, position)`` in log order.  ``control_type(row)``
    returns ``"abort"``/``"commit"`` for a control batch."""
    out = AbortedRanges()
    open_txns: Dict[int, int] = {}
    for base, last, pid, txn, control, pos in headers_iter:
        if not txn:
            continue
        if control:
            first = open_txns.pop(pid, None)
            if control_type((base, last, pid, txn, control, pos)) == "abort":
                out.add(pid, base if first is None else first, last)
        elif pid not in open_txns:
            open_txns[pid] = base
    if open_txns:
        out.last_stable_offset = min(open_txns.values())
    return out
