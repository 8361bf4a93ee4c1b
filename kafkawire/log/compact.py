"""Compaction: keep the latest record per key, as Kafka's log cleaner does.

For a partition with ``cleanup.policy=compact`` (or ``compact,delete``), a
cleaning round (Kafka's ``Cleaner.doClean``):

1. finds the dirty section: from the first dirty offset (the log.dirs
   folder's ``cleaner-offset-checkpoint``, else the log start offset) up to
   the first uncleanable offset: the active segment's base offset, or the
   base of the segment holding the first offset of a still-open transaction
   (or, with ``min_compaction_lag_ms``, of a segment too young);
2. builds an offset map (key -> latest offset, keyed by the key's MD5 as
   Kafka's ``SkimpyOffsetMap``) over it, skipping aborted transactions; the
   map holds at most 90% of ``dedupe_buffer_size / 24`` keys
   (``log.cleaner.dedupe.buffer.size``); when it fills, the round stops
   there and the next round (pass) goes on from that offset;
3. rewrites every segment from the log start up to the map's end, in groups
   bounded by ``segment_bytes`` and ``max_index_bytes`` (and relative
   offsets), each into one new segment, keeping for each key only its latest
   record.  Tombstones are kept until ``delete_retention_ms`` after the
   cleaning that first kept them: that cleaning sets the v2 batch's
   delete-horizon flag and base timestamp (KIP-534).  Batches of aborted
   transactions go; transaction markers go once no batch of their
   transaction remains and their own delete horizon passed.  A batch whose
   records all go stays as an empty batch when it holds its producer's last
   sequence (or is the round's last batch).  Records keep their offsets,
   batches their producer id, epoch and sequence.

Each new segment is swapped in with Kafka's ``.cleaned`` -> ``.swap``
protocol (:mod:`kafkawire.log.swap`) under the folder's ``.lock``; a crash at
any step leaves a folder that ``recover --apply`` (or the next writer or
compaction) completes or rolls back, losing nothing.

:func:`compact` plans (dry run) or applies; :class:`Cleaner` holds the
settings for a caller that cleans many partitions.
"""
from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import struct
import time
from dataclasses import dataclass, field
from typing import (Any, Callable, ContextManager, Dict, Iterator, List, Optional, Sequence, Set,
                    Tuple, Union)

from kafkawire import _kernels as K
from kafkawire import _scan_common as C
from kafkawire.errors import LogError
from kafkawire.log import files as F
from kafkawire.log.index import DEFAULT_INDEX_INTERVAL_BYTES, DEFAULT_MAX_INDEX_BYTES, IndexBuilder
from kafkawire.log.lock import FolderLock
from kafkawire.log.log import Log
from kafkawire.log.retention import plan_retention
from kafkawire.log.segment import Segment
from kafkawire.log.checkpoints import read_offset_checkpoint, write_offset_checkpoint
from kafkawire.log.swap import (CLEANED_SUFFIX, StepHook, complete_interrupted_swaps,
                                replace_segments)
from kafkawire.log.txnindex import AbortedTxn, pack_txn_entry
from kafkawire.records import BatchBuilder
from kafkawire.records.iterate import Batch

log = logging.getLogger("kafkawire.log.compact")

PathLike = Union[str, "os.PathLike[str]"]

DEFAULT_DELETE_RETENTION_MS = 86_400_000
DEFAULT_MIN_CLEANABLE_DIRTY_RATIO = 0.5
DEFAULT_DEDUPE_BUFFER_SIZE = 128 << 20
DEFAULT_SEGMENT_BYTES = 1 << 30
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000
#: Kafka's ``cleaner-offset-checkpoint`` file in a log.dirs folder.
CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"
POLICIES = ("compact", "compact,delete")

_MAP_ENTRY_BYTES = 24          # an MD5 hash and an offset, as Kafka sizes its map
_MAP_LOAD_FACTOR = 0.9         # log.cleaner.io.buffer.load.factor
_INT32_MAX = 0x7FFFFFFF
_V2_HEADER = struct.Struct(">qiibIhiqqqhii")


# ------------------------------------------------------------------ the offset map

class OffsetMap:
    """Key -> latest offset over the dirty section, capped like Kafka's ``SkimpyOffsetMap``."""

    def __init__(self, buffer_bytes: int) -> None:
        self.slots = max(1, buffer_bytes // _MAP_ENTRY_BYTES)
        self.max_entries = max(1, int(self.slots * _MAP_LOAD_FACTOR))
        self._map: Dict[bytes, int] = {}
        self.latest_offset = -1

    def __len__(self) -> int:
        return len(self._map)

    @property
    def full(self) -> bool:
        return len(self._map) >= self.max_entries

    def put(self, key: bytes, offset: int) -> None:
        self._map[hashlib.md5(key).digest()] = offset
        self.latest_offset = offset

    def get(self, key: bytes) -> int:
        """The latest offset of ``key`` in the map, -1 when absent."""
        return self._map.get(hashlib.md5(key).digest(), -1)


# ------------------------------------------------------------------ producer state

@dataclass(frozen=True)
class LastRecord:
    """An active producer's last data offset (None after a marker of a new epoch) and epoch."""

    last_data_offset: Optional[int]
    producer_epoch: int


def producer_state(segments: Sequence[Segment], now_ms: int,
                   expiration_ms: int) -> Tuple[Dict[int, LastRecord], Optional[int]]:
    """Replay the batch headers as Kafka's ``ProducerStateManager`` does: the active
    producers' last records, and the first offset of a still-open transaction (or None).
    A producer is expired (forgotten) when its last batch is ``expiration_ms`` old and it
    has no open transaction."""
    entries: Dict[int, List[Any]] = {}   # pid -> [epoch, last data offset, last ts, txn first]
    for seg in segments:
        for r in seg.headers().tolist():
            pid = r[C.PRODUCER_ID]
            if r[C.MAGIC] < 2 or pid < 0:
                continue
            epoch = r[C.PRODUCER_EPOCH]
            e = entries.setdefault(pid, [epoch, None, -1, None])
            if e[0] != epoch:
                e[0], e[1] = epoch, None
            e[2] = r[C.MAX_TIMESTAMP]
            if r[C.ATTRIBUTES] & C.CONTROL_MASK:
                e[3] = None
            else:
                e[1] = r[C.LAST_OFFSET]
                if r[C.ATTRIBUTES] & C.TRANSACTIONAL_MASK and e[3] is None:
                    e[3] = r[C.BASE_OFFSET]
    active = {pid: LastRecord(e[1], e[0]) for pid, e in entries.items()
              if e[3] is not None or now_ms - e[2] < expiration_ms}
    open_firsts = [e[3] for e in entries.values() if e[3] is not None]
    return active, (min(open_firsts) if open_firsts else None)


# ------------------------------------------------------------------ transactions

class _TxnState:
    """Kafka's ``CleanedTransactionMetadata``: which batches and markers may go."""

    def __init__(self) -> None:
        self.pending: List[AbortedTxn] = []          # by first offset, not yet reached
        self.committed: Set[int] = set()                  # pids with batches seen in an open commit
        self.aborted: Dict[int, List[Any]] = {}      # pid -> [txn, saw a batch]
        self.cleaned_index: Optional[List[AbortedTxn]] = None

    def add(self, txns: Sequence[AbortedTxn]) -> None:
        self.pending = sorted(self.pending + list(txns), key=lambda t: t.first_offset)

    def _reach(self, offset: int) -> None:
        while self.pending and self.pending[0].first_offset <= offset:
            txn = self.pending.pop(0)
            self.aborted.setdefault(txn.producer_id, [txn, False])

    def on_control(self, batch: Batch) -> bool:
        """A marker: whether it may be discarded."""
        self._reach(batch.last_offset)
        marker = batch.control_type if batch.record_count else None
        if marker is None:
            return True          # an empty (already cleaned) marker batch
        pid = batch.producer_id
        if marker == "abort":
            meta = self.aborted.pop(pid, None)
            if meta is not None and meta[1]:
                if self.cleaned_index is not None:
                    self.cleaned_index.append(meta[0])
                return False
            return True
        if marker == "commit":
            if pid in self.committed:
                self.committed.discard(pid)
                return False
            return True
        return False

    def on_data(self, batch: Batch) -> bool:
        """A data batch: whether it belongs to an aborted transaction."""
        self._reach(batch.last_offset)
        if batch.magic < 2 or not batch.is_transactional:
            return False
        meta = self.aborted.get(batch.producer_id)
        if meta is not None:
            meta[1] = True
            return True
        self.committed.add(batch.producer_id)
        return False


def _aborted_between(segments: Sequence[Segment], start: int, end: int) -> List[AbortedTxn]:
    """Kafka's ``collectAbortedTransactions``: the ``.txnindex`` entries of the segment
    holding ``start`` and of later ones, those starting below ``end``, until an entry's
    last stable offset reaches ``end``."""
    out: List[AbortedTxn] = []
    for i, seg in enumerate(segments):
        nxt = segments[i + 1].base_offset if i + 1 < len(segments) else None
        if nxt is not None and nxt <= start:
            continue
        for txn in seg.aborted_transactions():
            if txn.first_offset < end:
                out.append(txn)
            if txn.last_stable_offset >= end:
                return out
    return out


# ------------------------------------------------------------------ plans and reports

@dataclass
class GroupPlan:
    """One group of segments rewritten into one: what goes in and what comes out."""

    segments: List[int]
    bytes_before: int
    records_before: int
    bytes_after: int = 0
    records_after: int = 0
    batches_emptied: int = 0
    tombstones_removed: int = 0
    markers_removed: int = 0
    removed: bool = False           # nothing was left: the segments go, no empty one stays

    def to_dict(self) -> Dict[str, Any]:
        return dict(segments=self.segments, bytes_before=self.bytes_before,
                    bytes_after=self.bytes_after, records_before=self.records_before,
                    records_after=self.records_after, batches_emptied=self.batches_emptied,
                    tombstones_removed=self.tombstones_removed,
                    markers_removed=self.markers_removed)


@dataclass
class CompactionPlan:
    """What compaction of one partition folder removes (``applied``: what it removed)."""

    path: str
    first_dirty_offset: int
    first_uncleanable_offset: int
    dirty_ratio: float
    min_cleanable_dirty_ratio: float
    groups: List[GroupPlan] = field(default_factory=list)
    end_offset: int = 0             # where the next round starts (the map's end + 1)
    passes: int = 0
    applied: bool = False
    map_full: bool = False          # (dry run) the offset map filled: more passes will follow
    recovered: List[str] = field(default_factory=list)
    #: A dirty segment's first record is older than ``max.compaction.lag.ms``: clean it
    #: whatever the dirty ratio (Kafka's "must clean").
    must_clean: bool = False
    #: Segments the cleaning removed because nothing of them was left (none is left empty).
    segments_removed: int = 0

    @property
    def cleanable(self) -> bool:
        """Whether the log has a dirty section and its dirty ratio is above the minimum (or a
        dirty segment waited longer than ``max_compaction_lag_ms``)."""
        return (self.first_uncleanable_offset > self.first_dirty_offset
                and (self.dirty_ratio > self.min_cleanable_dirty_ratio or self.must_clean))

    @property
    def bytes_removed(self) -> int:
        return sum(g.bytes_before - g.bytes_after for g in self.groups)

    @property
    def records_removed(self) -> int:
        return sum(g.records_before - g.records_after for g in self.groups)

    def to_dict(self) -> Dict[str, Any]:
        return dict(path=self.path, applied=self.applied, cleanable=self.cleanable,
                    first_dirty_offset=self.first_dirty_offset,
                    first_uncleanable_offset=self.first_uncleanable_offset,
                    dirty_ratio=round(self.dirty_ratio, 4), end_offset=self.end_offset,
                    passes=self.passes, records_removed=self.records_removed,
                    must_clean=self.must_clean, segments_removed=self.segments_removed,
                    bytes_removed=self.bytes_removed, map_full=self.map_full,
                    recovered=list(self.recovered), groups=[g.to_dict() for g in self.groups])

    def __str__(self) -> str:
        head = (f"dirty offsets {self.first_dirty_offset}..{self.first_uncleanable_offset - 1}, "
                f"dirty ratio {self.dirty_ratio:.3f} (minimum {self.min_cleanable_dirty_ratio})")
        if not self.groups:
            return f"nothing to compact: {head}"
        if not self.bytes_removed and not self.map_full:
            return f"nothing to remove (already compacted): {head}"
        verb = "removed" if self.applied else "would remove"
        lines = [f"{verb} {self.records_removed} records, {self.bytes_removed} bytes in "
                 f"{len(self.groups)} group(s), {self.passes} pass(es); {head}"]
        if self.map_full:
            lines.append(f"  the offset map filled at offset {self.end_offset}: applying "
                         "cleans the rest in further passes")
        for g in self.groups:
            lines.append(f"  segments {', '.join(map(str, g.segments))} -> one segment: "
                         f"{g.records_before} -> {g.records_after} records, "
                         f"{g.bytes_before} -> {g.bytes_after} bytes")
        return "\n".join(lines)


# ------------------------------------------------------------------ writing a cleaned segment

class _Sink:
    """Where a group's retained batches go: counted only (dry run) or a ``.cleaned`` segment."""

    def __init__(self, folder: Optional[str], base: int, interval: int) -> None:
        self.size = 0
        self.records = 0
        self.aborted: List[AbortedTxn] = []
        self.builder = IndexBuilder(base, interval)
        self.paths: List[str] = []
        self._f = None
        if folder is not None:
            stem = os.path.join(folder, F.segment_file_name(base, ""))
            self.stem = stem
            self.paths = [stem + F.LOG_SUFFIX + CLEANED_SUFFIX]
            self._f = open(self.paths[0], "wb")

    def write(self, data: bytes, records: int) -> None:
        rows = K.scan_batches(data, 0, len(data), -1, False)[0]
        for r in rows.tolist():
            self.builder.append(self.size + r[C.POSITION], r[C.SIZE], r[C.LAST_OFFSET],
                                r[C.MAX_TIMESTAMP], r[C.LAST_OFFSET])
        if self._f is not None:
            self._f.write(data)
        self.size += len(data)
        self.records += records

    def finish(self, mtime: float) -> List[str]:
        """Close the files (final time entry, fsync) and stamp them with ``mtime``."""
        if self._f is None:
            return []
        self.builder.finish()
        self._f.flush()
        os.fsync(self._f.fileno())
        self._f.close()
        parts = [(F.INDEX_SUFFIX, self.builder.offset_index_bytes()),
                 (F.TIME_INDEX_SUFFIX, self.builder.time_index_bytes())]
        if self.aborted:
            parts.append((F.TXN_INDEX_SUFFIX, b"".join(pack_txn_entry(t) for t in self.aborted)))
        for suffix, data in parts:
            p = self.stem + suffix + CLEANED_SUFFIX
            with open(p, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            self.paths.append(p)
        for p in self.paths:
            os.utime(p, (mtime, mtime))
        return self.paths

    def discard(self) -> None:
        if self._f is not None:
            self._f.close()
        for p in self.paths:
            try:
                os.remove(p)
            except FileNotFoundError:
                pass


def _empty_batch(batch: Batch) -> bytes:
    """Kafka's ``DefaultRecordBatch.writeEmptyHeader``: the batch's offsets, producer fields
    and max timestamp, no records."""
    attrs = batch.attributes & (C.TIMESTAMP_TYPE_MASK | C.TRANSACTIONAL_MASK | C.CONTROL_MASK)
    out = bytearray(_V2_HEADER.size)
    _V2_HEADER.pack_into(out, 0, batch.base_offset, _V2_HEADER.size - 12,
                         batch.partition_leader_epoch, 2, 0, attrs,
                         batch.last_offset - batch.base_offset, batch.max_timestamp,
                         batch.max_timestamp, batch.producer_id, batch.producer_epoch,
                         batch.base_sequence, 0)
    struct.pack_into(">I", out, 17, K.crc32c(out, C.V2_CRC_START, len(out)))
    return bytes(out)


def _rebuild(batch: Batch, records: Sequence[Any], delete_horizon: Optional[int]) -> bytes:
    """Kafka's ``buildRetainedRecordsInto``: the retained records in a batch like the original
    (v2: same base and last offset, producer fields; the delete horizon as base timestamp)."""
    lat = batch.timestamp_type == "LogAppendTime"
    if batch.magic == 2:
        b = BatchBuilder(2, batch.compression, base_offset=batch.base_offset,
                         timestamp_type=batch.timestamp_type,
                         log_append_time=batch.max_timestamp if lat else None,
                         producer_id=batch.producer_id, producer_epoch=batch.producer_epoch,
                         base_sequence=batch.base_sequence,
                         is_transactional=batch.is_transactional,
                         partition_leader_epoch=batch.partition_leader_epoch,
                         delete_horizon=delete_horizon)
        b.is_control = batch.is_control
    else:
        b = BatchBuilder(batch.magic, batch.compression, base_offset=records[0].offset,
                         timestamp_type=batch.timestamp_type,
                         log_append_time=batch.max_timestamp if lat else None)
    for r in records:
        b.append(r.value, key=r.key, timestamp=r.timestamp, headers=r.headers or (),
                 offset=r.offset)
    return b.build(last_offset=batch.last_offset) if batch.magic == 2 else b.build()


# ------------------------------------------------------------------ the cleaner

class Cleaner:
    """Compacts partition folders with one set of settings (Kafka's topic and cleaner
    configs under their Python names); :meth:`plan` looks, :meth:`clean` applies."""

    def __init__(self, *, policy: str = "compact",
                 delete_retention_ms: int = DEFAULT_DELETE_RETENTION_MS,
                 min_cleanable_dirty_ratio: float = DEFAULT_MIN_CLEANABLE_DIRTY_RATIO,
                 min_compaction_lag_ms: int = 0,
                 max_compaction_lag_ms: Optional[int] = None,
                 segment_bytes: int = DEFAULT_SEGMENT_BYTES,
                 max_index_bytes: int = DEFAULT_MAX_INDEX_BYTES,
                 index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
                 dedupe_buffer_size: int = DEFAULT_DEDUPE_BUFFER_SIZE,
                 producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
                 retention_ms: Optional[int] = None, retention_bytes: Optional[int] = None,
                 step_hook: StepHook = None,
                 swap_guard: Optional[Callable[[], ContextManager[Any]]] = None) -> None:
        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {', '.join(POLICIES)}, not {policy!r}")
        if delete_retention_ms < 0:
            raise ValueError("delete_retention_ms must be >= 0")
        if not 0.0 <= min_cleanable_dirty_ratio <= 1.0:
            raise ValueError("min_cleanable_dirty_ratio must lie between 0 and 1")
        if dedupe_buffer_size < _MAP_ENTRY_BYTES:
            raise ValueError(f"dedupe_buffer_size must be at least {_MAP_ENTRY_BYTES} bytes")
        self.policy = policy
        self.delete_retention_ms = delete_retention_ms
        self.min_cleanable_dirty_ratio = min_cleanable_dirty_ratio
        self.min_compaction_lag_ms = min_compaction_lag_ms
        #: A dirty segment whose first record is older than this is cleaned whatever the
        #: dirty ratio (Kafka's ``max.compaction.lag.ms``; None: no such limit).
        self.max_compaction_lag_ms = max_compaction_lag_ms
        self.segment_bytes = segment_bytes
        self.max_index_bytes = max_index_bytes
        self.index_interval_bytes = index_interval_bytes
        self.dedupe_buffer_size = dedupe_buffer_size
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.retention_ms = retention_ms
        self.retention_bytes = retention_bytes
        #: Called with each step of a swap (tests inject crashes with it).
        self.step_hook = step_hook
        #: Each segment swap runs inside ``swap_guard()`` (a broker's partition lock, so
        #: readers and appends never see a swap half done); the rest of a round runs outside.
        self.swap_guard = swap_guard

    # -- public -------------------------------------------------------------
    def survey(self, path: PathLike, *, now_ms: Optional[int] = None) -> CompactionPlan:
        """The dirty section and ratio only (no round planned): cheap, for choosing which
        log to clean first (Kafka's cleaner takes the dirtiest)."""
        with Log.open(path) as lg:
            return self._survey(lg, _now(now_ms), None)

    def plan(self, path: PathLike, *, now_ms: Optional[int] = None,
             first_dirty_offset: Optional[int] = None) -> CompactionPlan:
        """What one round of cleaning would remove (nothing is changed)."""
        now = _now(now_ms)
        with Log.open(path) as lg:
            plan = self._survey(lg, now, first_dirty_offset)
            if plan.cleanable:
                self._round(lg, plan, now, apply=False)
                plan.passes = 1
        return plan

    def clean(self, path: PathLike, *, now_ms: Optional[int] = None,
              first_dirty_offset: Optional[int] = None, locked: bool = False) -> CompactionPlan:
        """Compact the folder under its ``.lock``: rounds until the dirty section is clean.

        ``locked``: the caller already holds the ``.lock`` (a broker with its live
        :class:`~kafkawire.log.LogWriter`: cleaning never touches the active segment, which
        is all the writer reads)."""
        now = _now(now_ms)
        folder = os.path.abspath(os.fspath(path))
        with contextlib.nullcontext() if locked else FolderLock(folder, "compact --apply"):
            recovered = complete_interrupted_swaps(folder)
            with Log.open(folder) as lg:
                plan = self._survey(lg, now, first_dirty_offset)
            plan.recovered = recovered
            if not plan.cleanable:
                return plan
            dirty = plan.first_dirty_offset
            while True:
                with Log.open(folder) as lg:
                    rnd = self._survey(lg, now, dirty)
                    if rnd.first_uncleanable_offset <= dirty:
                        break
                    self._round(lg, rnd, now, apply=True)
                plan.groups.extend(rnd.groups)
                plan.segments_removed += rnd.segments_removed
                plan.passes += 1
                plan.end_offset = rnd.end_offset
                self._checkpoint(folder, rnd.end_offset)
                if rnd.end_offset >= rnd.first_uncleanable_offset or rnd.end_offset <= dirty:
                    break
                dirty = rnd.end_offset
        if self.policy == "compact,delete" and (self.retention_ms is not None
                                               or self.retention_bytes is not None):
            plan_retention(folder, retention_ms=self.retention_ms,
                           retention_bytes=self.retention_bytes, now_ms=now).apply(locked=locked)
        plan.applied = True
        log.info("%s: %s", folder, plan)
        return plan

    # -- the dirty section ---------------------------------------------------
    def _survey(self, lg: Log, now: int, first_dirty: Optional[int]) -> CompactionPlan:
        segs = lg.segments
        start = lg.start_offset
        if first_dirty is None:
            first_dirty = self._checkpointed(lg)
        if first_dirty is None or first_dirty < start or first_dirty > lg.next_offset:
            first_dirty = start
        uncleanable = segs[-1].base_offset if segs else 0
        _, unstable = producer_state(segs, now, self.producer_id_expiration_ms)
        if unstable is not None:
            uncleanable = min(uncleanable, unstable)
        if self.min_compaction_lag_ms > 0:
            for seg in segs[:-1]:
                if (_next_base(segs, seg) > first_dirty
                        and seg.max_timestamp > now - self.min_compaction_lag_ms):
                    uncleanable = min(uncleanable, seg.base_offset)
                    break
        # Cleaning stops at a segment boundary: the base of the segment holding that offset.
        boundary = segs[0].base_offset if segs else 0
        for seg in segs:
            if seg.base_offset <= uncleanable:
                boundary = seg.base_offset
        # Kafka's LogToClean: a segment holding the first dirty offset counts on both sides.
        clean_bytes = sum(s.size for s in segs if s.base_offset < first_dirty)
        dirty_bytes = sum(s.size for s in segs
                          if s.base_offset < boundary and _next_base(segs, s) > first_dirty)
        total = clean_bytes + dirty_bytes
        ratio = dirty_bytes / total if total else 0.0
        must = False
        if self.max_compaction_lag_ms is not None and self.max_compaction_lag_ms >= 0:
            # Kafka's LogCleanerManager: the earliest timestamp of the dirty segments
            # (each one's first batch) against now - max.compaction.lag.ms.
            for seg in segs:
                if seg.base_offset >= boundary:
                    break
                if _next_base(segs, seg) <= first_dirty:
                    continue
                rows = seg.headers(0, -1)[:1]
                first_ts = int(rows[0, C.MAX_TIMESTAMP]) if len(rows) else -1
                if 0 <= first_ts <= now - self.max_compaction_lag_ms:
                    must = True
                    break
        return CompactionPlan(lg.path, first_dirty, max(boundary, first_dirty), ratio,
                              self.min_cleanable_dirty_ratio, end_offset=first_dirty,
                              must_clean=must)

    def _checkpointed(self, lg: Log) -> Optional[int]:
        cp = os.path.join(os.path.dirname(lg.path), CLEANER_CHECKPOINT)
        if lg.topic is None or lg.partition is None or not os.path.isfile(cp):
            return None
        return read_offset_checkpoint(cp).get((lg.topic, lg.partition))

    def _checkpoint(self, folder: str, offset: int) -> None:
        parsed = F.parse_partition_dir_name(os.path.basename(folder))
        cp = os.path.join(os.path.dirname(folder), CLEANER_CHECKPOINT)
        if parsed is None or not os.path.isfile(cp):
            return
        entries = read_offset_checkpoint(cp)
        entries[parsed] = offset
        write_offset_checkpoint(cp, entries)

    # -- one round -----------------------------------------------------------
    def _round(self, lg: Log, plan: CompactionPlan, now: int, apply: bool) -> None:
        segs = lg.segments
        upper = plan.first_uncleanable_offset
        omap = OffsetMap(self.dedupe_buffer_size)
        plan.map_full = self._build_map(segs, plan.first_dirty_offset, upper, omap)
        plan.end_offset = omap.latest_offset + 1
        clean = [s for s in segs if s.base_offset < plan.end_offset and s is not segs[-1]]
        below = [s for s in segs if s.base_offset < plan.first_dirty_offset]
        legacy_horizon = (os.stat(below[-1].path).st_mtime * 1000 - self.delete_retention_ms
                          if below else 0.0)
        active, _ = producer_state(segs, now, self.producer_id_expiration_ms)
        txn = _TxnState()
        for group in self._groups(clean, upper):
            gp = self._clean_group(lg, group, omap, now, txn, active, legacy_horizon, upper,
                                   apply, first=group[0] is segs[0])
            plan.groups.append(gp)
            if gp.removed:
                plan.segments_removed += len(group)

    def _build_map(self, segs: Sequence[Segment], start: int, end: int, omap: OffsetMap) -> bool:
        """Kafka's ``buildOffsetMap``: True when the map filled before ``end``."""
        dirty = [s for s in segs if _next_base(segs, s) > start and s.base_offset < end]
        txn = _TxnState()
        txn.add(_aborted_between(segs, start, end))
        for i, seg in enumerate(dirty):
            nxt = dirty[i + 1].base_offset if i + 1 < len(dirty) else end
            for batch in seg.batches(seg.offset_index.lookup(start)[1]):
                if batch.is_control:
                    txn.on_control(batch)
                elif not txn.on_data(batch):
                    for r in batch.records():
                        if r.key is not None and r.offset >= start:
                            if omap.full:
                                return True
                            omap.put(r.key, r.offset)
                if batch.last_offset >= start:
                    omap.latest_offset = batch.last_offset
            omap.latest_offset = nxt - 1
        return False

    def _groups(self, segs: Sequence[Segment], upper: int) -> Iterator[List[Segment]]:
        """Kafka's ``groupSegmentsBySize``."""
        i = 0
        while i < len(segs):
            group = [segs[i]]
            size, isize, tsize = segs[i].size, _index_bytes(segs[i], False), _index_bytes(segs[i], True)
            i += 1
            while i < len(segs):
                s = segs[i]
                last = segs[i + 1].base_offset - 1 if i + 1 < len(segs) else upper - 1
                if not (size + s.size <= self.segment_bytes
                        and isize + _index_bytes(s, False) <= self.max_index_bytes
                        and tsize + _index_bytes(s, True) <= self.max_index_bytes
                        and (s.size == 0 or last - group[0].base_offset <= _INT32_MAX)):
                    break
                group.append(s)
                size += s.size
                isize += _index_bytes(s, False)
                tsize += _index_bytes(s, True)
                i += 1
            yield group

    def _clean_group(self, lg: Log, group: List[Segment], omap: OffsetMap, now: int,
                     txn: _TxnState, active: Dict[int, LastRecord], legacy_horizon: float,
                     upper: int, apply: bool, first: bool = False) -> GroupPlan:
        """Kafka's ``cleanSegments`` + ``cleanInto`` (with ``MemoryRecords.filterTo``).

        A group nothing is left of is removed rather than replaced by an empty segment
        (except the log's first segment, which holds its start offset); its offsets become
        a gap, as compacted logs have."""
        gp = GroupPlan([s.base_offset for s in group], sum(s.size for s in group), 0)
        sink = _Sink(lg.path if apply else None, group[0].base_offset, self.index_interval_bytes)
        txn.cleaned_index = sink.aborted
        try:
            for i, seg in enumerate(group):
                nxt = group[i + 1].base_offset if i + 1 < len(group) else _seg_next(seg)
                txn.add(_aborted_between(lg.segments, seg.base_offset, nxt))
                retain_legacy = os.stat(seg.path).st_mtime * 1000 > legacy_horizon
                for batch in seg.batches():
                    self._filter_batch(batch, omap, now, txn, active, retain_legacy, upper, sink, gp)
            gp.bytes_after, gp.records_after = sink.size, sink.records
            gp.removed = sink.size == 0 and not first
            if apply:
                if gp.removed:
                    sink.discard()
                new_files = [] if gp.removed else sink.finish(os.stat(group[-1].path).st_mtime)
                old = [[p for p in (s.files.log, s.files.index, s.files.timeindex, s.files.txnindex)
                        if p] for s in group]
                with self.swap_guard() if self.swap_guard is not None else contextlib.nullcontext():
                    replace_segments(lg.path, new_files, old, self.step_hook)
        except BaseException:
            if apply and not any(p.endswith(".swap") for p in os.listdir(lg.path)):
                sink.discard()
            raise
        return gp

    def _filter_batch(self, batch: Batch, omap: OffsetMap, now: int, txn: _TxnState,
                      active: Dict[int, LastRecord], retain_legacy: bool, upper: int,
                      sink: _Sink, gp: GroupPlan) -> None:
        records = batch.records()
        gp.records_before += len(records)
        control = batch.is_control
        can_discard = txn.on_control(batch) if control else txn.on_data(batch)
        horizon = batch.delete_horizon
        if control:
            discard_records = can_discard and horizon is not None and horizon <= now
        else:
            discard_records = can_discard
        pid = batch.producer_id if batch.magic == 2 else -1
        last = active.get(pid) if pid >= 0 else None
        if last is not None and (batch.last_offset == last.last_data_offset
                                 if last.last_data_offset is not None
                                 else control and batch.producer_epoch == last.producer_epoch):
            retention = "retain_empty"
        elif batch.next_offset == upper:
            retention = "retain_empty"
        elif discard_records:
            retention = "delete"
        else:
            retention = "delete_empty"
        if retention == "delete":
            if control:
                gp.markers_removed += 1
            return
        kept = []
        original = True
        tombstones = False
        for r in records:
            if discard_records:
                keep = False
            elif control:
                keep = True
            else:
                keep = self._retain(omap, batch, r, retain_legacy, now)
            if keep:
                kept.append(r)
                tombstones = tombstones or r.value is None
            else:
                original = False
                if r.value is None and not control:
                    gp.tombstones_removed += 1
        if kept:
            need_horizon = (batch.magic >= 2 and (tombstones or (can_discard and control))
                            and horizon is None)
            if original and not need_horizon:
                sink.write(bytes(batch.raw), len(kept))
            else:
                new_horizon = now + self.delete_retention_ms if need_horizon else horizon
                sink.write(_rebuild(batch, kept, new_horizon), len(kept))
        elif retention == "retain_empty":
            if batch.magic < 2:
                raise LogError(f"{batch.position}: cannot keep an empty magic-{batch.magic} batch")
            sink.write(_empty_batch(batch), 0)
            gp.batches_emptied += 1
        elif control:
            gp.markers_removed += 1

    @staticmethod
    def _retain(omap: OffsetMap, batch: Batch, r: Any, retain_legacy: bool, now: int) -> bool:
        """Kafka's ``Cleaner.shouldRetainRecord``."""
        if r.offset > omap.latest_offset:
            return True
        if r.key is None:
            return False
        latest: bool = r.offset >= omap.get(r.key)
        if r.value is not None:
            return latest
        if batch.magic >= 2:
            horizon = batch.delete_horizon
            keep_deletes = horizon is None or now < horizon
        else:
            keep_deletes = retain_legacy
        return latest and keep_deletes


def _now(now_ms: Optional[int]) -> int:
    return int(time.time() * 1000) if now_ms is None else now_ms


def _next_base(segs: Sequence[Segment], seg: Segment) -> int:
    for i, s in enumerate(segs):
        if s is seg:
            return segs[i + 1].base_offset if i + 1 < len(segs) else _seg_next(seg)
    return _seg_next(seg)


def _seg_next(seg: Segment) -> int:
    rows = seg.headers()
    return int(rows[-1, C.LAST_OFFSET]) + 1 if len(rows) else seg.base_offset


def _index_bytes(seg: Segment, time_index: bool) -> int:
    p = seg.files.timeindex if time_index else seg.files.index
    try:
        return os.path.getsize(p) if p else 0
    except OSError:
        return 0


def compact(path: PathLike, *, apply: bool = False, now_ms: Optional[int] = None,
            first_dirty_offset: Optional[int] = None, **settings: Any) -> CompactionPlan:
    """Compact a partition folder as Kafka's cleaner would: a plan of one round (dry run),
    or, with ``apply``, every round until the dirty section is clean.  ``settings`` are
    :class:`Cleaner`'s (``delete_retention_ms``, ``min_cleanable_dirty_ratio``, ...)."""
    cleaner = Cleaner(**settings)
    if apply:
        return cleaner.clean(path, now_ms=now_ms, first_dirty_offset=first_dirty_offset)
    return cleaner.plan(path, now_ms=now_ms, first_dirty_offset=first_dirty_offset)
