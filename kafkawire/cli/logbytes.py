"""A ``.log`` file read by a command: front to back (``stats``, ``dump``), or at the
positions an index names (``dump`` of ``.index`` and ``.timeindex`` files).

A local file is memory-mapped and handed on whole, as one block.  A file on
object storage is streamed (:meth:`ObjectStorage.stream`) in blocks of whole
batches, so a command holds at most two blocks (or the largest batch), never
the whole segment.  The checks a command makes where the batches stop (is
the rest zeros, a batch cut short, which offset came last) work the same
way on both.  :class:`LogPages` reads the batches at given positions: from
the mapped file, or from object storage through a few cached pages.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Generator, Iterator, Optional, Tuple, cast

from kafkawire import _kernels as K
from kafkawire import _scan_common as C
from kafkawire.errors import KafkaWireError
from kafkawire.log.storage import MappedFile, ObjectStorage, map_file, storage_for
from kafkawire.records.iterate import Batch, iter_batches

#: One block: ``(buffer, its position in the file, bytes of it to read)``.
Block = Tuple[Any, int, int]


class LogBytes:
    """The first ``limit`` bytes (all by default) of the ``.log`` file ``path``, block by block.

    Iterate :meth:`blocks` once; a block is valid until the next is asked
    for.  After the caller stops at ``position`` (damage, or a batch running
    past the end), :meth:`partial_at`, :meth:`zero_from` and
    :meth:`last_offset_before` look at what is left and what was read.
    """

    def __init__(self, path: str, limit: Optional[int] = None) -> None:
        self.path = path
        self.storage = storage_for(path)
        self._map: Optional[MappedFile] = None
        if self.storage.ranged:
            self.size = self.storage.size(path)
        else:
            self._map = cast(MappedFile, map_file(path, storage=self.storage))
            self.size = len(self._map)
        self.end = self.size if limit is None else min(self.size, max(limit, 0))
        self._stream: Optional[Generator[memoryview, None, None]] = None
        self._cur: Block = (b"", 0, 0)
        self._max_offset = -1     # largest last offset of the blocks already left behind
        self._zero: Optional[Tuple[int, bool]] = None

    def blocks(self) -> Iterator[Block]:
        """The blocks in file order; each holds whole batches wherever the bytes allow."""
        if self._map is not None:
            self._cur = (self._map.data, 0, self.end)
            yield self._cur
            return
        if self.end <= 0:
            return
        self._stream = cast(ObjectStorage, self.storage).stream(self.path, 0, self.end)
        base = 0
        for view in self._stream:
            self._cur = (view, base, len(view))
            yield self._cur
            self._max_offset = max(self._max_offset, _last_offset(view, len(view)))
            base += len(view)

    def partial_at(self, position: int) -> bool:
        """Whether the bytes from ``position`` (in the current block) start a batch that runs
        past the end, or are too few for a batch header."""
        buf, base, stop = self._cur
        return int(K.scan_batches(buf, position - base, stop, 1, False)[2]) == C.PARTIAL

    def zero_from(self, position: int) -> bool:
        """Whether every byte from ``position`` (in the current block) to the end is zero; reads
        the rest of the stream, so call it once the caller has stopped (the answer is kept)."""
        if self._zero is not None and self._zero[0] == position:
            return self._zero[1]
        buf, base, stop = self._cur
        zero = bool(K.buffer_is_zero(buf, position - base, stop))
        if zero and self._stream is not None:
            zero = all(K.buffer_is_zero(v, 0, len(v)) for v in self._stream)
        self._zero = (position, zero)
        return zero

    def last_offset_before(self, position: int) -> int:
        """Largest last offset of the batches before ``position`` (in the current block);
        -1 when there is none."""
        buf, base, _ = self._cur
        return max(self._max_offset, _last_offset(buf, position - base))

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
        if self._map is not None:
            self._map.close()
        self._cur = (b"", 0, 0)

    def __enter__(self) -> "LogBytes":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _last_offset(data: Any, end: int) -> int:
    """Largest last offset of the batches in ``data[:end]`` (-1 when there is none)."""
    rows = K.scan_batches(data, 0, end, -1, False)[0]
    return int(rows[:, C.LAST_OFFSET].max()) if len(rows) else -1


class LogPages:
    """The batches of the ``.log`` file ``path`` at positions an index names, read on demand.

    A local file is memory-mapped.  On object storage the bytes are fetched
    in pages of the storage's block size, of which the last :attr:`PAGES`
    used are kept: an index's positions increase, so each page is fetched
    once, and a command holds two pages and the batch it checks (a copy
    when the batch spans pages), never the segment.
    """

    #: Pages kept from object storage.
    PAGES = 2

    def __init__(self, path: str) -> None:
        self.path = path
        self.storage = storage_for(path)
        self._map: Optional[MappedFile] = None
        self._file: Any = None
        self._pages: "OrderedDict[int, memoryview]" = OrderedDict()
        if self.storage.ranged:
            self.size = self.storage.size(path)
            self.page = cast(ObjectStorage, self.storage).block_size
        else:
            self._map = cast(MappedFile, map_file(path, storage=self.storage))
            self.size = len(self._map)
            self.page = 0

    def __len__(self) -> int:
        return self.size

    def batches_from(self, start: int, end: Optional[int] = None) -> Iterator[Batch]:
        """The batches from position ``start`` (up to ``end``, the file's end by default), in
        order; stops quietly at a batch cut short, corrupt bytes or the end."""
        stop = self.size if end is None else min(end, self.size)
        if start < 0 or start >= stop:
            return
        if self._map is not None:
            try:
                yield from iter_batches(self._map.data, start=start, end=stop)
            except KafkaWireError:
                pass
            return
        pos = start
        while stop - pos >= C.LOG_OVERHEAD:
            length = int.from_bytes(self._read(pos + 8, 4), "big", signed=True)
            size = min(stop - pos, C.LOG_OVERHEAD + max(length, 0))
            data = self._read(pos, size)   # the batch's bytes: all the scan reads for it
            try:
                batch = next(iter(iter_batches(data, base_position=pos)), None)
            except KafkaWireError:
                return
            if batch is None:
                return
            yield batch
            pos += size

    def _read(self, position: int, length: int) -> Any:
        """``length`` bytes at ``position`` (inside the file), from the pages they lie on."""
        page = self.page
        first = position // page
        parts = [self._page(k) for k in range(first, (position + length - 1) // page + 1)]
        off = position - first * page
        if len(parts) == 1:
            return parts[0][off:off + length]
        return b"".join([parts[0][off:], *parts[1:-1], parts[-1][:(position + length) - (first + len(parts) - 1) * page]])

    def _page(self, k: int) -> memoryview:
        got = self._pages.get(k)
        if got is not None:
            self._pages.move_to_end(k)
            return got
        start = k * self.page
        view = memoryview(bytearray(min(self.page, self.size - start)))
        # pages are fetched only from object storage (a local file is mapped)
        cast(ObjectStorage, self.storage)._fill(self._open(), self.path, start, view)
        self._pages[k] = view
        while len(self._pages) > self.PAGES:
            self._pages.popitem(last=False)
        return view

    def _open(self) -> Any:
        if self._file is None:
            self._file = cast(ObjectStorage, self.storage)._open(self.path)
        return self._file

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        self._pages.clear()
        if self._map is not None:
            self._map.close()

    def __enter__(self) -> "LogPages":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
