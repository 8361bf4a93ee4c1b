"""``read_committed``: which transactional batches were aborted, and the last stable offset.

Kafka's rule, the only one kafkawire applies (``Log.records``, the Spark
data source): a transaction of producer P is aborted when its marker is an
ABORT, and then every transactional batch of P from the transaction's first
offset up to that marker is hidden.  The ranges come from the log itself
(:func:`scan_aborted`: a header scan, decoding only the few control
batches) merged with ``.txnindex`` entries where segments have them, as a
broker's fetch answer lists them.  A transaction with no marker yet is still
open: readers stop before its first offset (the last stable offset).
"""
from __future__ import annotations

import bisect
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Set, Tuple

from kafkawire import _scan_common as C
from kafkawire.log.txnindex import AbortedTxn

if TYPE_CHECKING:
    from kafkawire.log.segment import Segment

#: ``(base_offset, last_offset, producer_id, is_transactional, is_control, where)``
HeaderTuple = Tuple[int, int, int, bool, bool, Any]

#: Batch headers read per scan call while looking for markers.
_SCAN_CHUNK = 4096


class AbortedRanges:
    """Per producer, sorted and disjoint ``(first_offset, marker_offset)`` ranges of aborted
    transactions, and the last stable offset of the part of the log they were read from."""

    def __init__(self) -> None:
        self._ranges: Dict[int, List[Tuple[int, int]]] = {}
        #: First offset of the earliest transaction still open at the end of the scan, or None.
        self.last_stable_offset: Optional[int] = None
        #: Producer id -> first offset of each transaction still open at the end of the scan.
        self.open_transactions: Dict[int, int] = {}

    def add(self, producer_id: int, first_offset: int, last_offset: int) -> None:
        """Record an aborted transaction; one overlapping a known range (the same transaction
        seen in a ``.txnindex`` and from its marker) widens it."""
        lst = self._ranges.setdefault(producer_id, [])
        i = bisect.bisect_left(lst, (first_offset, last_offset))
        # merge with the neighbours it overlaps
        while i > 0 and lst[i - 1][1] >= first_offset:
            i -= 1
        j = i
        while j < len(lst) and lst[j][0] <= last_offset:
            first_offset = min(first_offset, lst[j][0])
            last_offset = max(last_offset, lst[j][1])
            j += 1
        lst[i:j] = [(first_offset, last_offset)]

    def add_txns(self, txns: Iterable[AbortedTxn]) -> None:
        for t in txns:
            self.add(t.producer_id, t.first_offset, t.last_offset)

    def is_aborted(self, producer_id: int, offset: int) -> bool:
        """Whether a transactional batch of ``producer_id`` starting at ``offset`` was aborted."""
        lst = self._ranges.get(producer_id)
        if not lst:
            return False
        i = bisect.bisect_right(lst, (offset, float("inf"))) - 1
        return i >= 0 and offset <= lst[i][1]

    def ranges(self, producer_id: int) -> List[Tuple[int, int]]:
        """The producer's aborted ``(first_offset, marker_offset)`` ranges, sorted, disjoint."""
        return list(self._ranges.get(producer_id, ()))

    @property
    def producer_ids(self) -> List[int]:
        return sorted(self._ranges)

    def __bool__(self) -> bool:
        return bool(self._ranges)

    def __iter__(self) -> Iterator[AbortedTxn]:
        for pid, lst in sorted(self._ranges.items()):
            for first, last in lst:
                yield AbortedTxn(pid, first, last, -1)


def compute(headers_iter: Iterable[HeaderTuple],
            control_type: Callable[[HeaderTuple], Optional[str]]) -> AbortedRanges:
    """Aborted ranges from header tuples ``(base_offset, last_offset, producer_id,
    is_transactional, is_control, where)`` in log order.  ``control_type(row)``
    returns ``"abort"``/``"commit"`` for a control batch's row."""
    out = AbortedRanges()
    open_txns: Dict[int, int] = {}
    for row in headers_iter:
        base, last, pid, txn, control = row[:5]
        if not txn:
            continue
        if control:
            first = open_txns.pop(pid, None)
            if control_type(row) == "abort":
                out.add(pid, base if first is None else first, last)
        elif pid not in open_txns:
            open_txns[pid] = base
    if open_txns:
        out.last_stable_offset = min(open_txns.values())
    out.open_transactions = dict(open_txns)
    return out


def scan_aborted(segments: Sequence[Segment], start_position: int, end_offset: Optional[int]) -> AbortedRanges:
    """The aborted transactions touching the batches from ``start_position`` of
    ``segments[0]`` up to ``end_offset`` (exclusive; None: the end of the log).

    Batch headers are scanned through the following segments until every
    transaction open at ``end_offset`` has its marker (or the log ends); the
    ``.txnindex`` entries of every segment scanned are merged in.
    """
    end = float("inf") if end_offset is None else end_offset
    scanned: List[Segment] = []

    def rows() -> Iterator[HeaderTuple]:
        open_pids: Set[int] = set()
        for k, seg in enumerate(segments):
            scanned.append(seg)
            pos = start_position if k == 0 else 0
            while pos < seg.size:
                hdr, stop, status = seg.scan(pos, -1, _SCAN_CHUNK)
                if len(hdr) == 0:
                    break
                bases = hdr[:, C.BASE_OFFSET]
                if not open_pids and bases[0] >= end:
                    return
                txn = (hdr[:, C.MAGIC] == 2) & ((hdr[:, C.ATTRIBUTES] & C.TRANSACTIONAL_MASK) != 0)
                past = bases >= end
                stop_at = int(past.argmax()) if past.any() else len(hdr)
                for i in txn.nonzero()[0].tolist():
                    if i >= stop_at and not open_pids:
                        return
                    r = hdr[i]
                    pid = int(r[C.PRODUCER_ID])
                    ctrl = bool(r[C.ATTRIBUTES] & C.CONTROL_MASK)
                    if ctrl:
                        open_pids.discard(pid)
                    else:
                        open_pids.add(pid)
                    yield (int(r[C.BASE_OFFSET]), int(r[C.LAST_OFFSET]), pid, True, ctrl,
                           (seg, int(r[C.POSITION])))
                if stop_at < len(hdr) and not open_pids:
                    return
                if status != C.OK or stop <= pos:
                    break
                pos = stop

    def control_type(row: HeaderTuple) -> Optional[str]:
        seg, pos = row[5]
        marker: Optional[str] = seg.batch_at(pos).control_type
        return marker

    ranges = compute(rows(), control_type)
    for seg in scanned:
        ranges.add_txns(seg.aborted_transactions())
    return ranges
