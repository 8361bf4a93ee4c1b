"""``iter_batches``: walk a buffer of concatenated batches/messages.

The scan kernel reads headers in chunks; each row becomes a ``RecordBatch``
(v2) or ``LegacyBatch`` (v0/v1) without touching payloads.  A trailing
partial batch ends iteration cleanly and is reported in ``partial_tail``
(Kafka's readers do the same: a log or fetch response may end mid-batch);
anything else malformed raises ``CorruptRecordError`` naming its position.
"""
from __future__ import annotations

from itertools import chain
from typing import Any, Iterator, List, Optional, Union

from kafkawire import _kernels as K
from kafkawire import _scan_common as C
from kafkawire.errors import CorruptRecordError
from kafkawire.records.batch import KERNEL_HOOKS, RecordBatch, concrete_batch_class
from kafkawire.records.legacy import LegacyBatch

__all__ = ["iter_batches", "BatchIterator", "Batch", "SCAN_CHUNK"]

#: What iterating a buffer yields: a v2 batch or a v0/v1 top-level message.
Batch = Union[RecordBatch, LegacyBatch]

#: Batches read per scan-kernel call.
SCAN_CHUNK = 256


class BatchIterator:
    """Iterator of batch objects over a buffer; see :func:`iter_batches`.

    After iteration ends, ``partial_tail`` is None or the (absolute) position of
    a trailing partial batch, and ``stop_position`` the (absolute) position where
    scanning stopped (the end, or the partial tail).
    """

    __slots__ = ("_buf", "_start", "_end", "_verify", "_base", "_max_size", "_gen",
                 "partial_tail", "stop_position")

    def __init__(self, data: Any, start: int = 0, end: Optional[int] = None, verify_crc: bool = False,
                 base_position: int = 0, max_decompressed_size: Optional[int] = None) -> None:
        if isinstance(data, (bytes, bytearray)):
            n = len(data)
        else:
            data = memoryview(data).cast("B") if not hasattr(data, "madvise") else data
            n = len(data)
        if end is None or end > n:
            end = n
        if start < 0 or start > end:
            raise ValueError(f"start {start} outside the buffer [0, {end}]")
        self._buf = data
        self._start = start
        self._end = end
        self._verify = bool(verify_crc)
        self._base = base_position
        self._max_size = max_decompressed_size
        self.partial_tail: Optional[int] = None
        self.stop_position: int = base_position + start
        # Batches come from a C-level chain over per-chunk lists, so a for loop
        # resumes Python code once per chunk, not once per batch.
        self._gen = chain.from_iterable(self._chunks())

    def __iter__(self) -> Iterator[Batch]:
        return self._gen

    def __next__(self) -> Batch:
        return next(self._gen)

    def _chunks(self) -> Iterator[List[Batch]]:
        """Yield lists of batch objects; record where and why scanning stopped."""
        buf, pos, end, base, msize = self._buf, self._start, self._end, self._base, self._max_size
        legacy_from_row = LegacyBatch._from_row
        scan = K.scan_batch_objects
        v2_type = concrete_batch_class()
        verify = self._verify
        objs: List[Any]      # batch objects; a v0/v1 row comes back as a tuple until made one
        while True:
            objs, stop, status, n_legacy = scan(buf, pos, end, SCAN_CHUNK, verify, v2_type,
                                                base, msize, KERNEL_HOOKS)
            if n_legacy:
                objs = [legacy_from_row(buf, b, base, msize) if type(b) is tuple else b
                        for b in objs]
            pos = stop
            if status == C.OK and stop < end:
                self.stop_position = base + stop
                yield objs
                continue
            yield objs
            self.stop_position = base + stop
            if status == C.OK:
                return
            if status == C.PARTIAL:
                self.partial_tail = base + stop
                return
            raise _status_error(buf, stop, end, base, status)


def _status_error(buf: Any, pos: int, end: int, base: int, status: int) -> CorruptRecordError:
    mv = memoryview(buf).cast("B") if not isinstance(buf, (bytes, bytearray)) else buf
    offset = int.from_bytes(mv[pos:pos + 8], "big", signed=True)
    length = int.from_bytes(mv[pos + 8:pos + 12], "big", signed=True)
    where = base + pos
    if status == C.CORRUPT_LENGTH:
        if length == 0 and not any(mv[pos:min(end, pos + 64)]):
            hint = (" (a zero-filled tail: the log was preallocated or cut short by a crash; "
                    "`kafkawire recover` truncates it)")
        else:
            hint = ""
        minimum = C.MIN_LENGTH
        if length >= C.MIN_LENGTH and pos + C.MAGIC_OFFSET < end:
            # the batch is complete (PARTIAL is checked first): the minimum is its magic's
            minimum = {2: C.V2_MIN_LENGTH, 1: C.V1_MIN_LENGTH}.get(mv[pos + C.MAGIC_OFFSET],
                                                                 C.MIN_LENGTH)
        return CorruptRecordError(
            f"record size {length} smaller than minimum record overhead ({minimum}){hint}",
            position=where, offset=offset, reason="length")
    if status == C.BAD_MAGIC:
        return CorruptRecordError(f"invalid magic byte {mv[pos + 16]} (expected 0, 1 or 2)",
                                  position=where, offset=offset, reason="magic")
    if status == C.CRC_MISMATCH:
        magic = mv[pos + 16]
        kind = "CRC-32C" if magic == 2 else "CRC-32"
        return CorruptRecordError(f"{kind} mismatch in the batch at offset {offset}",
                                  position=where, offset=offset, reason="crc")
    return CorruptRecordError(f"scan stopped with status {status}", position=where, offset=offset)


def iter_batches(data: Any, *, start: int = 0, end: Optional[int] = None, verify_crc: bool = False,
                 base_position: int = 0,
                 max_decompressed_size: Optional[int] = None) -> BatchIterator:
    """Iterate the batches (v2) and top-level messages (v0/v1) of a bytes-like buffer.

    ``data``: bytes, bytearray, memoryview or mmap holding concatenated batches
    (a ``.log`` file's bytes, a Fetch response's records); ``start``/``end``
    bound the scan; ``verify_crc`` checks every batch's CRC while scanning;
    ``base_position`` is added to every reported position (the buffer's
    position in its file); ``max_decompressed_size`` bounds decompression per
    batch.  Returns a :class:`BatchIterator`.
    """
    return BatchIterator(data, start, end, verify_crc, base_position, max_decompressed_size)
