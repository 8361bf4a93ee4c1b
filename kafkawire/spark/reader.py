"""Batch reads: plan on the driver, decode slices into Arrow batches in the tasks.

Tasks never build Python rows: :func:`kafkawire.records.columnar.iter_column_chunks`
decodes each slice's batches straight into Arrow buffers, and the task yields
``pyarrow.RecordBatch``\\ es in exactly the declared schema (Spark's Arrow path
rejects anything else).  Small chunks are coalesced so each batch carries
10k-100k rows where the data allows.
"""
from __future__ import annotations

import logging
import os
import queue
import threading
import warnings
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Dict, Generator, Iterator, List, Optional, Sequence, Tuple, cast

import numpy as np

from kafkawire import _kernels as K
from kafkawire._deps import require
from kafkawire import _scan_common as SC
from kafkawire.errors import CorruptRecordError, LogError
from kafkawire.log.segment import Segment
from kafkawire.log.storage import ObjectStorage, Storage, storage_for
from kafkawire.records.columnar import ColumnChunk, ColumnChunkIterator, iter_column_chunks
from kafkawire.spark import layout
from kafkawire.spark.options import ReadOptions
from kafkawire.spark.planning import Slice, Task, plan_tasks, resolve_ranges, select_partitions
from kafkawire.spark.pushdown import Bounds, offset_window, push
from kafkawire.spark.txn import TxnMarkers, aborted_mask

try:
    from pyspark.sql.datasource import DataSourceReader
except ImportError:  # the task side is testable with plain pyarrow
    DataSourceReader = object  # type: ignore[misc,assignment]

if TYPE_CHECKING:
    from typing_extensions import Buffer

    from pyspark.sql.datasource import Filter, InputPartition

#: A ``pyarrow.RecordBatch`` (pyarrow ships no type information).
ArrowBatch = Any
#: ``(buffer, start, end, base_position)`` pieces of a slice; the caller sends back where
#: decoding stopped (None: stop).
Pieces = Generator[Tuple["Buffer", int, int, int], Optional[int], None]

log = logging.getLogger("kafkawire.spark.reader")

MIN_BATCH_ROWS = 10_000
TRACE_ENV = "KAFKAWIRE_SPARK_TRACE"   # file to append "path start end" for every slice read (tests)


@dataclass(frozen=True)
class ReadSettings:
    """What a task needs besides its slices (small and picklable)."""

    include_headers: bool = False
    isolation: str = "read_uncommitted"
    records_per_batch: int = 65536
    verify_crc: bool = False
    fail_on_data_loss: bool = True
    ts_lo: Optional[int] = None      # ms, inclusive
    ts_hi: Optional[int] = None      # ms, exclusive
    storage_options: Optional[Dict[str, str]] = None   # fs.* / storage_options, for URLs
    skip_corrupt_data: bool = False

    @classmethod
    def from_options(cls, ro: ReadOptions, bounds: Optional[Bounds] = None) -> "ReadSettings":
        b = bounds or Bounds()
        return cls(ro.include_headers, ro.isolation, ro.records_per_batch, ro.verify_crc,
                   ro.fail_on_data_loss, b.ts_lo, b.ts_hi, ro.storage_options or None,
                   ro.skip_corrupt_data)


def _trace(s: Slice) -> None:
    path = os.environ.get(TRACE_ENV)
    if path:
        with open(path, "a") as f:
            f.write(f"{s.path} {s.start_pos} {s.end_pos}\n")


def _mapped_pieces(storage: Storage, s: Slice, st: ReadSettings) -> Pieces:
    """The slice as one piece of the memory-mapped file: ``(buffer, start, end, base_position)``."""
    yield storage.map(s.path).data, s.start_pos, s.end_pos, 0


#: Bytes per ranged read of a ``.log`` on object storage; None: the storage's own block size
#: (16 MiB from remote stores, read one ahead on a thread; 2 MiB from ``file://``, in line).
READ_BLOCK: Optional[int] = None


_local = threading.local()


def _buffers() -> List[bytearray]:
    """The block buffers of this thread's ranged reads, kept from slice to slice (tasks read
    their slices one after the other)."""
    bufs = getattr(_local, "buffers", None)
    if bufs is None:
        bufs = _local.buffers = []
    return bufs


def _ranged_pieces(storage: ObjectStorage, s: Slice, st: ReadSettings) -> Pieces:
    """The slice in pieces of whole batches from sequential ranged reads (object stores).

    Each piece is ``(buffer, start, end, base_position)``; the caller decodes
    it and sends back the file position where decoding stopped (None: stop).
    Blocks are decoded where they lie, with no copy; a batch cut by a block's
    end is completed from the next block into a small piece of its own (one
    batch long), and the rest of that block follows.
    """
    carry = b""          # the head of a batch cut by the previous block's end
    cpos = s.start_pos   # its file position
    bpos = s.start_pos   # file position of the block
    bufs = _buffers()
    for block in storage.stream(s.path, s.start_pos, s.end_pos, READ_BLOCK, bufs):
        off = 0
        if carry:
            head = carry if len(carry) >= SC.LOG_OVERHEAD else carry + bytes(block[:SC.LOG_OVERHEAD])
            size = (SC.LOG_OVERHEAD + int.from_bytes(head[8:12], "big", signed=True)
                    if len(head) >= SC.LOG_OVERHEAD else len(carry) + len(block))
            take = max(size - len(carry), 0)
            if take > len(block):        # the batch needs the next block too
                carry += bytes(block)
                bpos += len(block)
                continue
            piece = carry + bytes(block[:take])
            stop = yield piece, 0, len(piece), cpos
            if stop is None:
                return
            off = stop - bpos
            carry = b""
            if off < 0 or off > len(block):   # a damaged length: the decoder raised or stopped
                return
        stop = yield block, off, len(block), bpos
        if stop is None:
            return
        carry = bytes(block[stop - bpos:])
        cpos = stop
        bpos += len(block)
    if carry:
        yield carry, 0, len(carry), cpos    # a batch cut by the slice's end: ends cleanly
def read_slice(s: Slice, st: ReadSettings) -> Iterator[ArrowBatch]:
    """Arrow record batches of one slice (in the declared schema), before coalescing.

    With ``skipCorruptData`` a damaged batch and what follows it up to the next
    offset-index entry that holds a valid batch are skipped (see
    :func:`resume_after`): a rule of the files alone, so the rows do not depend on
    where the slice starts or ends.
    """
    _trace(s)
    if s.end_pos <= s.start_pos or s.end_offset <= s.start_offset:
        return
    storage = storage_for(s.path, st.storage_options)
    span = s
    while True:
        damage = yield from _read_span(storage, span, st)
        if damage is None:
            return
        resume = resume_after(storage, span, damage)
        if resume is None or resume >= s.end_pos:
            return
        span = replace(s, start_pos=resume)


@dataclass(frozen=True)
class Damage:
    """The first invalid batch a slice met: its file position and why."""

    position: int
    reason: str


def _first_damage(buf: Buffer, start: int, end: int, base: int, s: Slice) -> Optional[Damage]:
    """The first batch of ``buf[start:end]`` whose header or CRC is invalid, if any.

    A batch cut by ``end`` is damage only when ``end`` is the slice's end: a
    slice ends at a batch boundary, so a batch running past it has a false
    length (inside a slice, a block's end cuts batches normally)."""
    _rows, stop, status = K.scan_batches(buf, start, end, -1, True)
    if status == SC.OK or (status == SC.PARTIAL and base + end < s.end_pos):
        return None
    return Damage(base + int(stop), _REASONS.get(status, SC.STATUS_NAMES[status]))


_REASONS = {SC.PARTIAL: "its length runs past the end of the batches", SC.CORRUPT_LENGTH: "bad length",
            SC.BAD_MAGIC: "unknown magic byte", SC.CRC_MISMATCH: "CRC mismatch"}


def _read_span(storage: Storage, s: Slice,
               st: ReadSettings) -> Generator[ArrowBatch, None, Optional[Damage]]:
    """Decode the slice; with ``skipCorruptData`` stop before the first damaged batch and return
    it (None: the slice was read to its end)."""
    pieces = (_ranged_pieces(cast(ObjectStorage, storage), s, st) if storage.ranged
              else _mapped_pieces(storage, s, st))
    piece: Optional[Tuple[Buffer, int, int, int]]
    try:
        piece = next(pieces)
    except FileNotFoundError:
        if st.fail_on_data_loss:
            raise LogError(f"segment {s.path} was deleted after the query was planned (retention or "
                           "compaction?); rerun the query, or set failOnDataLoss=false to skip it") from None
        log.warning("kafkawire: segment %s is gone; skipped (failOnDataLoss=false)", s.path)
        return None
    skipping = st.skip_corrupt_data
    txn: List[Optional[TxnMarkers]] = [None]    # built on the first transactional chunk
    done = [s.start_pos, s.start_offset]        # where the yielded chunks end: position, next offset
    # blocks of ranged reads share one column builder, so chunks are as large as from one buffer
    # (a chunk per block costs ~1 ms in Arrow conversion); skipping keeps a chunk per piece so
    # that rows before a damaged batch are never held in a builder the damage may have spoiled
    builder = None
    if storage.ranged and not skipping:
        builder = K.ColumnBuilder(st.include_headers, st.records_per_batch, 64 << 20,
                                  s.start_offset, s.end_offset)
    try:
        while piece is not None:
            buf, start, end, base = piece
            bad = None
            if skipping:
                bad = _first_damage(buf, start, end, base, s)
                if bad is not None:
                    end = bad.position - base
            elif st.verify_crc:
                _check_crcs(buf, start, end, base, s)
            # skipping decodes every record of the piece's batches, whatever the task's offsets
            # (rows outside them are dropped in _decode): a batch that does not decode is found
            # by every task whose bytes hold it, so no split keeps rows another split skips
            it = ColumnChunkIterator(buf, start=start, end=end, base_position=base,
                                     max_records=st.records_per_batch,
                                     start_offset=None if skipping else s.start_offset,
                                     end_offset=None if skipping else s.end_offset,
                                     include_headers=st.include_headers,
                                     builder=builder, last_chunk=builder is None)
            try:
                yield from _decode(_whole_batches(it) if skipping else it, s, st, txn, done)
            except CorruptRecordError as exc:
                if not skipping:
                    raise type(exc)(f"{exc} (in {s.path}; set skipCorruptData=true to skip damaged "
                                    "batches)", position=None, reason=exc.reason) from exc
                # a batch whose CRC matches but which does not decode: none of its rows was
                # yielded (_whole_batches); the rows before it that were not yielded yet are
                # decoded again, then it is skipped like any damage
                at = max(_batch_holding(buf, start, end, base, exc.position), done[0])
                yield from _decode(iter_column_chunks(
                    buf, start=max(start, done[0] - base), end=at - base, base_position=base,
                    max_records=st.records_per_batch, start_offset=max(s.start_offset, done[1]),
                    end_offset=s.end_offset, include_headers=st.include_headers), s, st, txn, done)
                return Damage(at, exc.message)
            if bad is not None:
                return bad
            # the next piece resumes at a batch cut by this one's end, or after it;
            # decoding that stopped early reached the slice's end offset
            if it.partial_tail is not None:
                resume: Optional[int] = it.partial_tail
            elif it.stop_position is not None and it.stop_position < base + end:
                resume = None
            else:
                resume = base + end
            piece = None
            del it      # this piece's decoder lets go of its block before the next read
            if resume is not None:
                try:
                    piece = pieces.send(resume)
                except StopIteration:
                    pass
        if builder is not None:      # the rows the last pieces left in the builder
            yield from _decode(ColumnChunkIterator(b"", builder=builder), s, st, txn, done)
    finally:
        pieces.close()
    return None


def _whole_batches(chunks: Iterator[ColumnChunk]) -> Iterator[ColumnChunk]:
    """The decoder's chunks, each held back until decoding has passed the batch at its end.

    A chunk ends where the column builder filled up, which may be inside a batch (any
    batch, not only one larger than a chunk): the rest of that batch comes in the next
    chunks and may still fail to decode.  A batch that does not decode is skipped whole,
    so no row of it may leave before its last record decoded.  Every chunk held shares
    one ``end_position`` (the batch being decoded); a chunk ending further on shows the
    decoder has finished that batch, and releases them.
    """
    held: List[ColumnChunk] = []
    for chunk in chunks:
        if held and chunk.end_position > held[-1].end_position:
            yield from held
            held = []
        held.append(chunk)
    yield from held     # the decoder reached the end of the piece


def _batch_holding(buf: Buffer, start: int, end: int, base: int, position: Optional[int]) -> int:
    """File position of the batch of ``buf[start:end]`` holding file position ``position``."""
    rows, _stop, _status = K.scan_batches(buf, start, end, -1, False)
    at = base + start
    if position is not None:
        for p in rows[:, SC.POSITION].tolist():
            if base + p > position:
                break
            at = base + p
    return at


def resume_after(storage: Storage, s: Slice, damage: Damage) -> Optional[int]:
    """Where reading resumes after damage at ``damage.position``: the first entry of the segment's
    offset index past it whose batch has a valid header and CRC (None: the rest of the segment
    is skipped).  A scan from the segment's start and a task starting anywhere else reach the
    same answer, since every task starts at the segment's start or at an index entry.  The
    damaged bytes inside this slice are logged at WARN."""
    seg = Segment.open(s.path, storage=storage)
    try:
        positions = seg.disk_offset_index.positions
        found: Optional[int] = None
        offset: Optional[int] = None
        for q in positions[positions > damage.position].tolist():
            if q >= s.end_pos:
                break
            head = _valid_batch_at(storage, seg, int(q), s.end_pos)
            if head is not None:
                found, offset = int(q), head
                break
    finally:
        seg.close()
    upto = s.end_pos if found is None else found
    where = (f"reading resumes at offset {offset} (file position {found})" if found is not None
             else f"no valid batch at an index entry before {s.end_pos}, where this task's range ends")
    log.warning("kafkawire: %s-%d: skipped damaged bytes %d..%d of %s (%d bytes; %s at %d); %s "
                "(skipCorruptData=true)", s.topic, s.partition, damage.position, upto, s.path,
                upto - damage.position, damage.reason, damage.position, where)
    return found


def _valid_batch_at(storage: Storage, seg: Segment, pos: int, end: int) -> Optional[int]:
    """The base offset of the batch at ``pos`` if its header is sane, it ends by ``end`` and its
    CRC matches; else None."""
    buf: Buffer
    if storage.ranged:
        head = storage.read_range(seg.path, pos, SC.LOG_OVERHEAD)
        if len(head) < SC.LOG_OVERHEAD:
            return None
        size = SC.LOG_OVERHEAD + int.from_bytes(head[8:12], "big", signed=True)
        if not SC.LOG_OVERHEAD < size <= end - pos:
            return None
        buf, start, stop = storage.read_range(seg.path, pos, size), 0, size
    else:
        buf, start, stop = seg.buffer, pos, end
    rows, _stop, status = K.scan_batches(buf, start, stop, 1, True)
    if status != SC.OK or not len(rows):
        return None
    return int(rows[0, SC.BASE_OFFSET])


def _decode(it: Iterator[ColumnChunk], s: Slice, st: ReadSettings, txn: List[Optional[TxnMarkers]],
            done: Optional[List[int]] = None) -> Iterator[ArrowBatch]:
    """Arrow batches of the non-empty chunks, read_committed and time bounds applied; ``done``
    follows where the decoded chunks end (file position, next offset)."""
    committed = st.isolation == "read_committed"
    for chunk in it:
        if done is not None:
            done[0] = chunk.end_position
            if chunk.next_offset is not None:
                done[1] = max(done[1], int(chunk.next_offset))
            if len(chunk):
                done[1] = max(done[1], int(chunk.offset[-1]) + 1)
        mask = None
        if st.skip_corrupt_data and len(chunk):
            # decoded without the offset bounds (see _read_span): keep the slice's offsets
            off = chunk.offset
            if off.min() < s.start_offset or off.max() >= s.end_offset:
                mask = (off >= s.start_offset) & (off < s.end_offset)
        if committed and len(chunk) and chunk.is_transactional.any():
            markers = txn[0]
            if markers is None:
                markers = txn[0] = TxnMarkers.for_slice(s, storage=storage_for(s.path, st.storage_options))
            keep = ~aborted_mask(chunk, markers)
            mask = keep if mask is None else (mask & keep)
        if st.ts_lo is not None or st.ts_hi is not None:
            ts = chunk.timestamp
            m = np.ones(len(chunk), bool)
            if st.ts_lo is not None:
                m &= ts >= st.ts_lo
            if st.ts_hi is not None:
                m &= ts < st.ts_hi
            mask = m if mask is None else (mask & m)
        if mask is not None and not mask.all():
            chunk = chunk.filter(mask)
        if len(chunk):
            yield chunk.to_arrow(include_headers=st.include_headers, topic=s.topic,
                                 partition=s.partition)


def _check_crcs(buf: Buffer, start: int, end: int, base: int, s: Slice) -> None:
    """CRC of every batch in ``buf[start:end]``, by the header-scan kernel (no decompression)."""
    _rows, stop, status = K.scan_batches(buf, start, end, -1, True)
    if status == SC.CRC_MISMATCH:
        raise CorruptRecordError("batch CRC does not match its contents (set skipCorruptData=true to "
                                 "skip damaged batches)", position=base + int(stop), reason="crc",
                                 path=s.path)


_warned_pure = False


def _warn_if_pure() -> None:
    """Say so (once per worker) when the compiled kernels did not load: decoding is ~50x slower."""
    global _warned_pure
    if not _warned_pure and K.backend == "pure" and K.fast_error is not None:
        _warned_pure = True
        warnings.warn(f"kafkawire: this Spark worker decodes with the pure-Python kernels "
                      f"({K.fast_error}); install kafkawire with its compiled extensions on "
                      "the workers, or set KAFKAWIRE_BACKEND=fast to make this an error")


def read_task(task: Task, st: ReadSettings) -> Iterator[ArrowBatch]:
    """Every slice of a task, small batches coalesced to at least ``MIN_BATCH_ROWS`` rows.

    The slices are decoded on a thread, up to ``READ_AHEAD`` batches ahead of the
    caller, so decoding overlaps with Spark's worker sending the previous batch to the
    JVM (the decoder and the codecs release the GIL).
    """
    _warn_if_pure()
    batches = _task_batches(task, st)
    return _read_ahead(batches, READ_AHEAD) if READ_AHEAD > 0 else batches


#: Arrow batches a task decodes ahead of Spark's worker (0: decode in the caller's thread).
READ_AHEAD = 2


def _read_ahead(batches: Generator[ArrowBatch, None, None], depth: int) -> Iterator[ArrowBatch]:
    """Run the generator ``batches`` on a thread, at most ``depth`` items ahead of the caller.

    Items come out in order; an exception raised by ``batches`` is raised here, after the
    items before it.  Closing this generator (Spark stops reading: a limit, a failed task)
    stops the thread at its next item and closes ``batches`` there.
    """
    q: "queue.Queue[Tuple[object, Any]]" = queue.Queue(depth)
    stop = threading.Event()

    def put(item: Tuple[object, Any]) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.2)
                return True
            except queue.Full:
                continue
        return False

    def work() -> None:
        try:
            for b in batches:
                if not put((_ITEM, b)):
                    return
            put((_END, None))
        except BaseException as exc:  # handed to the caller, which raises it
            put((_ERROR, exc))
        finally:
            batches.close()

    t = threading.Thread(target=work, name="kafkawire-read-ahead", daemon=True)
    t.start()
    try:
        while True:
            kind, item = q.get()
            if kind is _ITEM:
                yield item
            elif kind is _END:
                return
            else:
                raise item
    finally:
        stop.set()


_ITEM, _END, _ERROR = object(), object(), object()


def _task_batches(task: Task, st: ReadSettings) -> Generator[ArrowBatch, None, None]:
    """The batches of :func:`read_task`, decoded in the calling thread."""
    # only tasks need it; planning (on the driver) imports this module too
    pa = require("pyarrow", "spark", "The Spark data source")
    pending: List[ArrowBatch] = []
    rows = 0
    for s in task.slices:
        for batch in read_slice(s, st):
            if batch.num_rows >= MIN_BATCH_ROWS and not pending:
                yield batch
                continue
            pending.append(batch)
            rows += batch.num_rows
            if rows >= MIN_BATCH_ROWS:
                yield pa.concat_batches(pending)
                pending, rows = [], 0
    if pending:
        yield pending[0] if len(pending) == 1 else pa.concat_batches(pending)


class KafkaWireReader(DataSourceReader):
    """Plans tasks from the files on the driver; each task decodes its slices."""

    def __init__(self, ro: ReadOptions) -> None:
        self.ro = ro
        self.bounds = Bounds()

    def plan(self) -> List[Task]:
        found = layout.discover(self.ro.paths, self.ro.storage_options)
        try:
            ranges = resolve_ranges(select_partitions(found, self.ro), self.ro)
            b = self.bounds
            kept = []
            for r in ranges:
                if not b.allows(r.part.topic, r.part.partition):
                    continue
                r.start, r.end = offset_window(b, r.start, r.end)
                if b.ts_hi is not None and b.ts_lo is not None and b.ts_hi <= b.ts_lo:
                    continue
                r.min_timestamp = b.ts_lo
                kept.append(r)
            return plan_tasks(kept, self.ro)
        finally:
            for part in found:
                part.close()

    def partitions(self) -> Sequence[Task]:
        return self.plan()

    def read(self, partition: InputPartition) -> Iterator[ArrowBatch]:
        if not isinstance(partition, Task):   # Spark's stand-in when partitions() is empty
            return iter(())
        return read_task(partition, ReadSettings.from_options(self.ro, self.bounds))


class KafkaWirePushdownReader(KafkaWireReader):
    """The reader with ``pushFilters``, used only with ``.option("pushFilters", "true")``.

    Spark refuses a reader that defines ``pushFilters`` unless
    ``spark.sql.python.filterPushdown.enabled`` is true, and pyspark 4.3.0
    reuses a reader's pushed state for later queries on the same DataFrame,
    so pushdown is opt-in (see :mod:`kafkawire.spark.pushdown`).
    """

    def pushFilters(self, filters: List[Filter]) -> List[Filter]:  # noqa: N802 (Spark's name)
        self.bounds = Bounds()
        return push(filters, self.bounds)


def make_reader(ro: ReadOptions) -> KafkaWireReader:
    return KafkaWirePushdownReader(ro) if ro.push_filters else KafkaWireReader(ro)
