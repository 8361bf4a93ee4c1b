"""The partitions a broker serves (Kafka's ``ReplicaManager`` and ``LogManager`` roles).

:class:`PartitionManager` owns every topic and partition of the broker's
log dirs: it discovers them at start-up, creates and deletes them, appends
(through :class:`~kafkawire.log.LogWriter`, which validates batches as
Kafka's ``LogValidator`` does and assigns offsets) and reads (segment file
regions, sent by the network layer with ``sendfile``).

Everything here runs on the broker's event-loop thread: handlers and
coordinators call it from coroutines running on that loop, never from other
threads (use ``Broker.call`` for that).  Appends are synchronous writes;
:meth:`PartitionManager.wait_for_data` lets a fetch wait for the next append.
The one exception is the log lifecycle's worker thread (retention, compaction,
flush, checkpoints; see :mod:`kafkawire.server.lifecycle`): each partition's
:attr:`Partition.lock` is held by appends, reads and flushes, and by the
worker's steps that change the partition's segments.

API for coordinators (group and transaction state)::

    pm = ctx.broker.partitions
    topic = pm.ensure_topic("__consumer_offsets", 50, internal=True)
    info = pm.append("__consumer_offsets", 7, batch_bytes)        # offsets assigned
    off = pm.write_marker("orders", 0, "commit", producer_id=..., producer_epoch=...,
                          coordinator_epoch=...)
    for batch in pm.partition("__consumer_offsets", 7).log_batches():  # reload at start-up
        ...
"""
from __future__ import annotations

import array
import asyncio
import bisect
import functools
import json
import logging
import os
import re
import shutil
import threading
import uuid
from dataclasses import dataclass, field
from typing import (IO, Any, Callable, Dict, Iterator, List, Mapping, NamedTuple, Optional,
                    Sequence, Set, Tuple, TypeVar, cast)

from kafkawire import _kernels as K
from kafkawire import _scan_common as C
from kafkawire.errors import LogError, OffsetOutOfRangeError
from kafkawire.log import files as LF
from kafkawire.log.checkpoints import (LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT,
                                       REPLICATION_CHECKPOINT, kafka_uuid_string,
                                       parse_kafka_uuid, random_kafka_uuid, read_offset_checkpoint,
                                       write_atomic, write_offset_checkpoint)
from kafkawire.log.log import Log
from kafkawire.log.txnindex import AbortedTxn
from kafkawire.log.writer import AppendedBatches, Bytes, LogWriter
from kafkawire.records import control_batch
from kafkawire.records.iterate import Batch
from kafkawire.server.codes import (INVALID_CONFIG, INVALID_PARTITIONS, INVALID_TOPIC_EXCEPTION,
                                    POLICY_VIOLATION, TOPIC_ALREADY_EXISTS, TOPIC_DELETION_DISABLED,
                                    UNKNOWN_TOPIC_OR_PARTITION)
from kafkawire.server.producer_state import ProducerStateManager
from kafkawire.server.config import (INTERNAL_TOPIC_CONFIGS, BrokerConfig,
                                     check_topic_configs, topic_config_value)

__all__ = ["PartitionManager", "Partition", "Topic", "AppendInfo", "FileRegion", "ReadResult",
           "TopicError", "INTERNAL_TOPICS", "TOPIC_CONFIGS_FILE"]

log = logging.getLogger("kafkawire.server.partitions")

INTERNAL_TOPICS = frozenset(("__consumer_offsets", "__transaction_state"))
#: Per-topic configs (what Kafka keeps in its metadata log), in the first log dir.
TOPIC_CONFIGS_FILE = "kafkawire-topic-configs.json"
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
_LONG_MAX = (1 << 63) - 1


class TopicError(Exception):
    """A topic request Kafka would refuse: ``code`` is the Kafka error code to answer with."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class AppendInfo(NamedTuple):
    """What an append did: offsets given, the broker time if LogAppendTime, the log start."""
    first_offset: int
    last_offset: int
    log_append_time: int
    log_start_offset: int


class FileRegion(NamedTuple):
    """``size`` bytes of an open segment file from ``offset`` (sent with ``sendfile``)."""
    file: IO[bytes]
    offset: int
    size: int

    def read(self) -> bytes:
        """The bytes themselves (for TLS connections, tests): one positioned read."""
        return os.pread(self.file.fileno(), self.size, self.offset)


class ReadResult(NamedTuple):
    """A partition read for Fetch: the records (a file region, or None when there are none)
    and the partition's offsets at the time of the read."""
    records: Optional[FileRegion]
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted: Optional[List[AbortedTxn]]


_F = TypeVar("_F", bound=Callable[..., Any])


def _locked(method: _F) -> _F:
    """Run a :class:`Partition` method under the partition's lock."""
    @functools.wraps(method)
    def run(self: "Partition", *args: Any, **kwargs: Any) -> Any:
        with self.lock:
            return method(self, *args, **kwargs)
    return cast(_F, run)


def _first_batch_cut(first_size: int, max_bytes: int, min_one: bool, left: int) -> int:
    """Bytes to send of a read whose first batch (``first_size`` bytes) alone is over
    ``max_bytes``: that batch whole when ``min_one`` (Kafka's first-batch rule), else the
    limit's bytes; never more than the ``left`` bytes there are."""
    return min(max(max_bytes, first_size) if min_one else max_bytes, left)


def validate_topic_name(name: str) -> None:
    """Kafka's topic name rules; TopicError(INVALID_TOPIC_EXCEPTION) otherwise."""
    if not name or name in (".", "..") or not _LEGAL_TOPIC.match(name):
        raise TopicError(INVALID_TOPIC_EXCEPTION, f"topic name {name!r} is illegal: use 1-249 characters of "
                             "ASCII letters, digits, '.', '_' and '-' (not '.' or '..')")


@dataclass
class Topic:
    """A topic: id, partitions and its own config settings (not the defaults)."""
    name: str
    topic_id: uuid.UUID
    configs: Dict[str, str] = field(default_factory=dict)
    partitions: Dict[int, "Partition"] = field(default_factory=dict)
    #: Effective config values looked up so far (cleared when :attr:`configs` change).
    config_cache: Dict[str, Optional[str]] = field(default_factory=dict, repr=False,
                                                   compare=False)

    @property
    def internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


#: Batches a partition's tail holds at most (16 bytes each).
_TAIL_BATCHES = 1 << 16


class _Tail:
    """The batches appended to the active segment since this broker began appending to it
    (or since the partition was opened): enough to serve fetches of them without
    re-reading the segment's indexes.  Reads below :attr:`first_offset` use the
    partition's :class:`~kafkawire.log.Log` view."""
    __slots__ = ("base", "path", "first_offset", "lasts", "positions", "end", "txn")

    def __init__(self, appended: AppendedBatches, first_offset: int) -> None:
        self.base = appended.segment_base
        self.path = appended.segment_path
        #: Offsets from here are held (batches before the first held end below it).
        self.first_offset = first_offset
        self.lasts = array.array("q")
        self.positions = array.array("q")
        #: Byte position where the last batch held ends.
        self.end = appended.position
        #: Whether a transactional or control batch is held (read_committed then takes the
        #: view's path, which computes aborted transactions).
        self.txn = False

    def extend(self, appended: AppendedBatches) -> None:
        for last, position, txn in appended.batches:
            self.lasts.append(last)
            self.positions.append(position)
            self.txn = self.txn or txn
        self.end = appended.end
        if len(self.lasts) > _TAIL_BATCHES:
            # keep the newest half (what consumers keeping up read); older offsets of the
            # segment are read through the log view
            cut = len(self.lasts) // 2
            self.first_offset = self.lasts[cut - 1] + 1
            del self.lasts[:cut]
            del self.positions[:cut]


class Partition:
    """One partition folder: a :class:`LogWriter` (None on a read-only broker) for appends
    and a :class:`~kafkawire.log.Log` for reads.  Offsets: :attr:`log_start_offset`,
    :attr:`log_end_offset` (= :attr:`high_watermark` on one node) and
    :attr:`last_stable_offset`."""

    def __init__(self, manager: "PartitionManager", topic: Topic, index: int, path: str, *,
                 recovery_point: Optional[int] = None, new: bool = False) -> None:
        self.manager = manager
        self.topic = topic
        self.index = index
        self.path = path
        #: Held by appends, reads, flushes and the lifecycle's segment changes.
        self.lock = threading.RLock()
        self.closed = False
        self.writer: Optional[LogWriter] = None
        if not manager.read_only:
            # Kafka's rule: segments below the checkpointed recovery point were flushed
            # and are trusted; the one holding it and later ones are re-validated.
            # (a new folder is fsynced by the manager, off the request path)
            self.writer = LogWriter(path, recovery_point=recovery_point, sync_new_folder=not new,
                                    **self._writer_options())
            manager.note_recovery(self)
        self.log = Log.open(path)
        self._stale = False
        self._files: Dict[int, IO[bytes]] = {}
        self.log_start_offset = self.log.start_offset
        #: Offsets below are on disk (fsynced): the next unclean start trusts them.
        self.recovery_point = self.log_end_offset if recovery_point is None else min(
            recovery_point, self.log_end_offset)
        self._producers = ProducerStateManager(path)
        self._active_base = self.writer.active_segment_base if self.writer is not None else -1
        self._tail: Optional[_Tail] = None

    @property
    def producers(self) -> ProducerStateManager:
        """The producer state (idempotence, open transactions), loaded on first use."""
        if not self._producers.loaded:
            self._producers.load(self._view(), self.log_end_offset)
        return self._producers

    @property
    def key(self) -> Tuple[str, int]:
        return (self.topic.name, self.index)

    def config(self, name: str) -> Optional[str]:
        """The effective value of a topic config for this partition's topic."""
        return self.manager.topic_config(self.topic, name)

    def _writer_options(self) -> Dict[str, Any]:
        def num(name: str) -> int:
            return int(self.config(name) or 0)
        fm, fms = num("flush.messages"), num("flush.ms")
        segment_ms = num("segment.ms")
        lag = num("max.compaction.lag.ms")
        policy = {p.strip() for p in (self.config("cleanup.policy") or "").split(",")}
        if "compact" in policy and 0 < lag < segment_ms:
            # Kafka's LogConfig.maxSegmentMs: the active segment rolls once records in it
            # are max.compaction.lag.ms old, so that the cleaner can clean them
            segment_ms = lag
        return dict(segment_bytes=max(num("segment.bytes"), 64), segment_ms=max(segment_ms, 1),
                    segment_jitter_ms=max(num("segment.jitter.ms"), 0),
                    index_interval_bytes=num("index.interval.bytes"),
                    max_index_bytes=max(num("segment.index.bytes"), 12),
                    flush_messages=None if fm >= _LONG_MAX else max(fm, 1),
                    flush_ms=None if fms >= _LONG_MAX else fms)

    def apply_configs(self) -> None:
        """Take in changed topic configs (segment and flush settings)."""
        if self.writer is not None:
            for k, v in self._writer_options().items():
                setattr(self.writer, k, v)

    # -- offsets ------------------------------------------------------------
    @property
    def log_end_offset(self) -> int:
        if self.writer is not None:
            return self.writer.next_offset
        return self.log.next_offset

    @property
    def high_watermark(self) -> int:
        """On one node every appended batch is replicated: the log end offset."""
        return self.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        """First offset of the oldest open transaction, else the high watermark."""
        if self.writer is not None:
            return self.writer.first_unstable_offset
        lso = self.log.aborted_transactions(self.log.start_offset).last_stable_offset
        return self.high_watermark if lso is None else lso

    # -- appending ----------------------------------------------------------
    @_locked
    def append(self, data: Bytes, *, assign_offsets: bool = True) -> Tuple[int, int]:
        """Append validated batches (one produce request's records for this partition);
        ``(first_offset, last_offset)``.  Raises CorruptRecordError/LogError as LogWriter."""
        if self.writer is None:
            raise LogError(f"{self.path} is served read-only")
        first, last = self.writer.append_batches([data], assign_offsets=assign_offsets)
        self._stale = True
        self._extend_tail(first)
        base = self.writer.active_segment_base
        if base != self._active_base:
            # A roll fsyncs the segment it closes: everything below the new base is on disk.
            self.recovery_point = max(self.recovery_point, base)
            # A roll: snapshot the producer state as of the new segment's start (this
            # append's batch is not in it yet; its caller records it next).
            self._active_base = base
            if self._producers.loaded and base == first:
                self._producers.take_snapshot(base)
        return first, last

    def _extend_tail(self, first_offset: int) -> None:
        """Add the writer's last append to the active segment's tail (a new tail when the
        append did not follow the tail's last batch in the same segment)."""
        appended = self.writer.last_append if self.writer is not None else None
        if appended is None:
            self._tail = None
            return
        tail = self._tail
        if tail is None or tail.base != appended.segment_base or tail.end != appended.position:
            tail = self._tail = _Tail(appended, first_offset)
        tail.extend(appended)

    def track_producers(self, data: bytes, first_offset: int) -> None:
        """Record the producer batches of ``data``, appended at ``first_offset``, in the
        producer state (when loaded; a later load reads them from the log)."""
        if not self._producers.loaded:
            return
        rows = K.scan_batches(data, 0, len(data), -1, False)[0].tolist()
        delta = first_offset - rows[0][C.BASE_OFFSET] if rows else 0
        for r in rows:
            if r[C.MAGIC] == 2 and r[C.PRODUCER_ID] >= 0:
                self._producers.update(r, r[C.BASE_OFFSET] + delta, r[C.LAST_OFFSET] + delta)

    @_locked
    def flush(self) -> None:
        """fsync what was appended and move the recovery point to the log end."""
        if self.writer is not None:
            self.writer.flush()
            self.recovery_point = self.writer.next_offset

    @_locked
    def maybe_flush(self) -> None:
        if self.writer is not None and not self.closed and self.writer.maybe_flush():
            self.recovery_point = self.writer.next_offset

    @_locked
    def close(self) -> None:
        """Flush, trim indexes, release the folder lock, close files."""
        if self.closed:
            return
        self.closed = True
        for f in self._files.values():
            f.close()
        self._files.clear()
        if self.writer is not None:
            if self._producers.loaded:
                self._producers.take_snapshot(self.writer.next_offset)
            self.writer.close()
            self.recovery_point = self.writer.next_offset
        self.log.close()

    @_locked
    def segments_changed(self, log_start_offset: int) -> None:
        """Retention or the cleaner deleted or replaced segments: read from a fresh view (and
        fresh file handles; regions already handed out keep the files they hold) and move
        the log start offset up to ``log_start_offset``."""
        self._files = {}
        self._stale = True
        self._tail = None
        self.log_start_offset = max(self.log_start_offset, min(log_start_offset,
                                                               self.log_end_offset))

    @_locked
    def log_view(self) -> Log:
        """The partition's :class:`~kafkawire.log.Log`, refreshed after appends."""
        return self._view()

    # -- reading ------------------------------------------------------------
    def _view(self) -> Log:
        if self._stale:
            self._stale = False
            self.log.refresh()
        return self.log

    def _file(self, base_offset: int, path: str) -> IO[bytes]:
        f = self._files.get(base_offset)
        if f is None:
            f = open(path, "rb", buffering=0)
            self._files[base_offset] = f
        return f

    @_locked
    def read(self, offset: int, max_bytes: int, *, committed: bool = False,
             min_one: bool = True) -> ReadResult:
        """The records from ``offset`` (one segment's bytes, at most ``max_bytes``
        unless ``min_one`` and the first batch is larger), never past the high
        watermark (or, ``committed``, the last stable offset).  Raises
        OffsetOutOfRangeError outside ``[log_start_offset, high_watermark]``.

        A read cut by ``max_bytes`` ends with the last batch that fits whole.  Kafka's
        broker sends the limit's bytes, ending inside a batch that every client drops and
        fetches again; with small batches that was up to a third of the bytes sent."""
        hw = self.high_watermark
        lso = self.last_stable_offset
        start = self.log_start_offset
        if offset < start or offset > hw:
            raise OffsetOutOfRangeError(f"offset {offset} is outside {self.topic.name}-"
                                        f"{self.index}'s range {start}..{hw}")
        limit = lso if committed else hw
        aborted: Optional[List[AbortedTxn]] = [] if committed else None
        if offset >= limit or max_bytes <= 0 and not min_one:
            return ReadResult(None, hw, lso, start, aborted)
        tail = self._tail
        if tail is not None and offset >= tail.first_offset and not (committed and tail.txn):
            return self._read_tail(tail, offset, limit, max_bytes, min_one,
                                   ReadResult(None, hw, lso, start, aborted))
        view = self._view()
        seg, pos = view.locate(offset)
        end = seg.size
        if limit < seg.next_offset:
            found = seg.locate(limit)
            if found is not None:
                end = found[0]
        count = end - pos
        if count > max_bytes:
            whole = seg.headers(pos, pos + max_bytes)   # the batches that fit whole
            if len(whole):
                count = int(whole[-1, C.POSITION] + whole[-1, C.SIZE]) - pos
            else:
                first = seg.scan(pos, end, max_count=1)[0]   # the first batch's header only
                count = _first_batch_cut(int(first[0, C.SIZE]) if len(first) else 0,
                                         max_bytes, min_one, end - pos)
        if count <= 0:
            return ReadResult(None, hw, lso, start, aborted)
        region = FileRegion(self._file(seg.base_offset, seg.path), pos, count)
        if committed:
            rows = seg.headers(pos, pos + count)
            upper = int(rows[-1, C.LAST_OFFSET]) + 1 if len(rows) else offset + 1
            ranges = view.aborted_transactions(offset, upper)
            # Kafka's rule (TransactionIndex.collectAbortedTxns): those overlapping the read
            aborted = [t for t in ranges if t.first_offset < upper and t.last_offset >= offset]
        return ReadResult(region, hw, lso, start, aborted)

    def _read_tail(self, tail: _Tail, offset: int, limit: int, max_bytes: int, min_one: bool,
                   empty: ReadResult) -> ReadResult:
        """:meth:`read` of offsets in the active segment's tail, from the positions its
        appends recorded.  Without transactional batches in the tail no aborted transaction
        overlaps what is read (one still open holds the last stable offset below it)."""
        lasts, positions = tail.lasts, tail.positions
        i = bisect.bisect_left(lasts, offset)
        if i >= len(lasts):
            return empty
        pos = positions[i]
        end = tail.end
        j = bisect.bisect_left(lasts, limit, i)
        if j < len(lasts):
            end = positions[j]
        count = end - pos
        if count > max_bytes:
            # the batches that fit whole: batch k ends where batch k + 1 starts
            k = bisect.bisect_right(positions, pos + max_bytes, i + 1) - 1
            if k > i:
                count = positions[k] - pos
            else:
                count = _first_batch_cut(
                    (positions[i + 1] if i + 1 < len(positions) else tail.end) - pos,
                    max_bytes, min_one, end - pos)
        if count <= 0:
            return empty
        region = FileRegion(self._file(tail.base, tail.path), pos, count)
        return empty._replace(records=region)

    def log_batches(self, start_offset: Optional[int] = None) -> Iterator[Batch]:
        """Every batch from ``start_offset`` (default: the log start) to the log end, as
        :class:`~kafkawire.records.iterate.Batch` objects (for loading coordinator state)."""
        view = self._view()
        s = max(self.log_start_offset, start_offset or 0)
        return view.batches(s, None)

    @_locked
    def offset_for_timestamp(self, timestamp: int) -> Optional[Tuple[int, int]]:
        """``(offset, timestamp)`` of the first record at or after ``timestamp``, or None."""
        found = self._view().find_timestamp(timestamp)
        if found is None or found[0] >= self.high_watermark:
            return None
        if found[0] < self.log_start_offset:
            return (self.log_start_offset, found[1])
        return found

    @_locked
    def max_timestamp(self) -> Tuple[int, int]:
        """``(offset, timestamp)`` of the record with the largest timestamp ((-1, -1) when empty)."""
        best = (-1, -1)
        view = self._view()
        for seg in view.segments:
            if not seg.size:
                continue
            rows = seg.headers()
            if not len(rows):
                continue
            i = int(rows[:, C.MAX_TIMESTAMP].argmax())
            ts = int(rows[i, C.MAX_TIMESTAMP])
            if ts > best[1]:
                best = (self._offset_of_timestamp(seg.batch_at(int(rows[i, C.POSITION])), ts), ts)
        return best

    @staticmethod
    def _offset_of_timestamp(batch: Batch, ts: int) -> int:
        if batch.magic == 2 and batch.attributes & C.TIMESTAMP_TYPE_MASK:
            return batch.base_offset
        for rec in batch:
            if rec.timestamp == ts:
                return int(rec.offset)
        return batch.last_offset

    def delete_records_before(self, offset: int) -> int:
        """Raise the log start offset to ``offset`` (DeleteRecords); the new log start offset.
        Whole segments below it are left for retention to remove."""
        if offset > self.high_watermark:
            raise OffsetOutOfRangeError(f"offset {offset} is past the high watermark "
                                        f"{self.high_watermark}")
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            self.manager.checkpoint_log_start(self)
        return self.log_start_offset


class PartitionManager:
    """All topics and partitions of a broker's log dirs (see the module docstring)."""

    def __init__(self, log_dirs: List[str], config: BrokerConfig, *, read_only: bool = False) -> None:
        self.log_dirs = log_dirs
        self.config = config
        self.read_only = read_only
        self.topics: Dict[str, Topic] = {}
        self._waiters: Set[asyncio.Future[None]] = set()
        self._lock = threading.Lock()
        self._checkpoint_lock = threading.Lock()   # the loop and the lifecycle's worker
        self.clean_start = True
        self._syncing: List[threading.Thread] = []
        #: Start-up recovery counts: segments re-validated and segments trusted (below
        #: their partition's recovery point), over every partition opened.
        self.recovery_stats: Dict[str, int] = {"validated_segments": 0, "trusted_segments": 0,
                                                 "recovered_partitions": 0}

    # -- start-up and shutdown ----------------------------------------------
    def load(self) -> None:
        """Discover ``<topic>-<partition>`` folders in every log dir and open them."""
        configs = self._read_topic_configs()
        recovery: Dict[Tuple[str, int], int] = {}
        starts: Dict[Tuple[str, int], int] = {}
        for d in self.log_dirs:
            recovery.update(read_offset_checkpoint(os.path.join(d, RECOVERY_POINT_CHECKPOINT)))
            starts.update(read_offset_checkpoint(os.path.join(d, LOG_START_OFFSET_CHECKPOINT)))
        for d in self.log_dirs:
            for name in sorted(os.listdir(d)):
                path = os.path.join(d, name)
                parsed = LF.parse_partition_dir_name(name)
                if parsed is None or not os.path.isdir(path):
                    continue
                tname, index = parsed
                topic = self.topics.get(tname)
                if topic is None:
                    topic = Topic(tname, self._topic_id(path), dict(configs.get(tname, {})))
                    self.topics[tname] = topic
                part = Partition(self, topic, index, path,
                                 recovery_point=recovery.get((tname, index), 0))
                part.log_start_offset = max(part.log_start_offset,
                                            min(starts.get((tname, index), 0), part.log_end_offset))
                topic.partitions[index] = part
        for topic in self.topics.values():
            missing = set(range(len(topic.partitions))) - set(topic.partitions)
            if missing:
                log.warning("topic %s lacks partition folders %s", topic.name, sorted(missing))
        log.info("serving %d topics, %d partitions from %s", len(self.topics),
                 sum(len(t.partitions) for t in self.topics.values()), ", ".join(self.log_dirs))

    def note_recovery(self, part: Partition) -> None:
        """Count (and log) what opening ``part`` re-validated and trusted."""
        report = part.writer.recovery if part.writer is not None else None
        if report is None:
            return
        validated = len(report.segments) + len(report.removed_segments)
        self.recovery_stats["validated_segments"] += validated
        self.recovery_stats["trusted_segments"] += report.trusted_segments
        self.recovery_stats["recovered_partitions"] += 1
        level = logging.DEBUG if self.clean_start and not report.removed else logging.INFO
        log.log(level, "%s: re-validated %d segment(s) from the recovery point %s, trusted %d "
                "below it; %s", part.path, validated, report.recovery_point,
                report.trusted_segments, report.summary())

    def _topic_id(self, path: str) -> uuid.UUID:
        meta = os.path.join(path, "partition.metadata")
        if os.path.exists(meta):
            try:
                return parse_kafka_uuid(LF.read_partition_metadata(meta)["topic_id"])
            except (KeyError, ValueError):
                log.warning("%s is unreadable; giving the topic a new id", meta)
        tid = random_kafka_uuid()
        if not self.read_only:
            self._write_partition_metadata(path, tid)
        return tid

    @staticmethod
    def _write_partition_metadata(path: str, topic_id: uuid.UUID, *, sync: bool = True) -> None:
        data = f"version: 0\ntopic_id: {kafka_uuid_string(topic_id)}\n".encode("ascii")
        if sync:
            write_atomic(os.path.join(path, "partition.metadata"), data)
        else:           # a new folder: nothing to replace; fsynced later (_sync_soon)
            with open(os.path.join(path, "partition.metadata"), "wb") as f:
                f.write(data)

    def _sync_soon(self, paths: List[str]) -> None:
        """fsync ``paths`` (files and folders, in order) in a thread of their own, as Kafka
        flushes a new partition's metadata file asynchronously: creating ``__consumer_offsets``
        (50 partitions, ~150 fsyncs) stalled every connection for ~0.5 s.  :meth:`close`
        waits for them."""
        def run() -> None:
            for p in paths:
                try:
                    if os.path.isdir(p):
                        LF.fsync_dir(p)
                    else:
                        with open(p, "rb") as f:
                            os.fsync(f.fileno())
                except OSError:         # deleted meanwhile
                    pass
        t = threading.Thread(target=run, name="kafkawire-sync-new-partitions", daemon=True)
        self._syncing = [s for s in self._syncing if s.is_alive()] + [t]
        t.start()

    def wait_synced(self, timeout: Optional[float] = None) -> None:
        """Wait for the fsyncs of newly created partitions (see :meth:`_sync_soon`)."""
        for t in list(self._syncing):
            t.join(timeout)

    def _configs_path(self) -> str:
        return os.path.join(self.log_dirs[0], TOPIC_CONFIGS_FILE)

    def _read_topic_configs(self) -> Dict[str, Dict[str, str]]:
        try:
            with open(self._configs_path(), "r", encoding="utf-8") as f:
                data = json.load(f)
            topics = data.get("topics", {})
            return {str(k): {str(a): str(b) for a, b in v.items()} for k, v in topics.items()}
        except FileNotFoundError:
            return {}
        except (ValueError, AttributeError) as exc:
            log.warning("%s is unreadable (%s); topics keep default configs",
                        self._configs_path(), exc)
            return {}

    def _write_topic_configs(self) -> None:
        data = {"version": 1, "topics": {t.name: t.configs for t in self.topics.values()
                                         if t.configs}}
        write_atomic(self._configs_path(), json.dumps(data, indent=1, sort_keys=True).encode())

    def partitions(self) -> List[Partition]:
        return [p for t in self.topics.values() for p in t.partitions.values()]

    def flush_all(self) -> None:
        """fsync every partition and write the checkpoints."""
        for p in self.partitions():
            p.flush()
        self.write_checkpoints()

    def maybe_flush(self) -> None:
        """The flush policy's time check (``flush.ms``), run on a schedule."""
        for p in self.partitions():
            p.maybe_flush()

    def write_checkpoints(self, partitions: Optional[Sequence[Partition]] = None) -> None:
        """recovery-point, log-start-offset and replication checkpoints in every log dir
        (of ``partitions``, a list the caller took on the loop; default: every partition)."""
        if self.read_only:
            return
        every = self.partitions() if partitions is None else partitions
        with self._checkpoint_lock:
            for d in self.log_dirs:
                self._write_dir_checkpoints(d, [p for p in every if os.path.dirname(p.path) == d
                                                and self.topics.get(p.topic.name) is p.topic])

    @staticmethod
    def _write_dir_checkpoints(d: str, parts: List[Partition]) -> None:
        write_offset_checkpoint(os.path.join(d, RECOVERY_POINT_CHECKPOINT),
                                {p.key: p.recovery_point for p in parts})
        write_offset_checkpoint(os.path.join(d, REPLICATION_CHECKPOINT),
                                {p.key: p.high_watermark for p in parts})
        write_offset_checkpoint(os.path.join(d, LOG_START_OFFSET_CHECKPOINT),
                                {p.key: p.log_start_offset for p in parts
                                 if p.log_start_offset > 0})

    def checkpoint_log_start(self, part: Partition) -> None:
        if not self.read_only:
            self.write_checkpoints()

    def close(self) -> None:
        """Close every partition (flushing), then write the checkpoints."""
        self.wait_synced()
        errors = []
        for p in self.partitions():
            try:
                p.close()
            except Exception as exc:   # keep closing the others
                errors.append(exc)
                log.error("closing %s failed: %s", p.path, exc)
        self.write_checkpoints()
        if errors:
            raise errors[0]

    # -- lookups ------------------------------------------------------------
    def partition(self, topic: str, index: int) -> Optional[Partition]:
        t = self.topics.get(topic)
        return None if t is None else t.partitions.get(index)

    def topic_config(self, topic: Topic, name: str) -> Optional[str]:
        """The effective value of topic config ``name`` (cached per topic: produce and
        fetch look several up per partition; :meth:`alter_topic_configs` clears it)."""
        cache = topic.config_cache
        try:
            return cache[name]
        except KeyError:
            pass
        v = None
        if topic.name in INTERNAL_TOPIC_CONFIGS and name not in topic.configs:
            v = INTERNAL_TOPIC_CONFIGS[topic.name].get(name)
        if v is None:
            v = topic_config_value(name, topic.configs, self.config)[0]
        cache[name] = v
        return v

    # -- topics -------------------------------------------------------------
    def _pick_dir(self) -> str:
        counts = {d: 0 for d in self.log_dirs}
        for p in self.partitions():
            d = os.path.dirname(p.path)
            if d in counts:
                counts[d] += 1
        return min(self.log_dirs, key=lambda d: counts[d])

    def _check_writable(self) -> None:
        if self.read_only:
            raise TopicError(POLICY_VIOLATION, "this broker serves its log dirs read-only")

    def create_topic(self, name: str, num_partitions: int, configs: Optional[Mapping[str, str]] = None,
                     *, validate_only: bool = False) -> Topic:
        """Create a topic with ``num_partitions`` partitions (folders, partition.metadata)."""
        self._check_writable()
        validate_topic_name(name)
        if name in self.topics:
            raise TopicError(TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if num_partitions < 1:
            raise TopicError(INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
        if num_partitions > 100000:
            raise TopicError(INVALID_PARTITIONS, "Number of partitions must be at most 100000.")
        configs = {k: v for k, v in (configs or {}).items() if v is not None}
        try:
            check_topic_configs(configs)
        except ValueError as exc:
            raise TopicError(INVALID_CONFIG, str(exc)) from None
        topic = Topic(name, random_kafka_uuid(), dict(configs))
        if validate_only:
            return topic
        self.topics[name] = topic
        syncs: List[str] = []
        try:
            for i in range(num_partitions):
                self._add_partition(topic, i, syncs)
        except BaseException:
            self.topics.pop(name, None)
            for p in topic.partitions.values():
                p.close()
            raise
        finally:
            self._sync_soon(syncs)
        if topic.configs:
            self._write_topic_configs()
        log.info("created topic %s with %d partitions", name, num_partitions)
        return topic

    def _add_partition(self, topic: Topic, index: int, syncs: List[str]) -> Partition:
        """A new partition folder; what must be fsynced (its metadata file, the folder, the
        log dir holding it) is added to ``syncs`` for :meth:`_sync_soon`."""
        d = self._pick_dir()
        path = os.path.join(d, f"{topic.name}-{index}")
        os.makedirs(path, exist_ok=True)
        self._write_partition_metadata(path, topic.topic_id, sync=False)
        part = Partition(self, topic, index, path, new=True)
        topic.partitions[index] = part
        syncs += [os.path.join(path, "partition.metadata"), path]
        if d not in syncs:
            syncs.append(d)
        return part

    def ensure_topic(self, name: str, num_partitions: int,
                     configs: Optional[Mapping[str, str]] = None, *, internal: bool = False) -> Topic:
        """The topic ``name``, created with ``num_partitions`` (and ``configs``) if missing
        (coordinators' internal topics)."""
        t = self.topics.get(name)
        if t is not None:
            return t
        if self.read_only:
            raise TopicError(POLICY_VIOLATION, "this broker serves its log dirs read-only")
        return self.create_topic(name, num_partitions, configs)

    def add_partitions(self, name: str, total: int, *, validate_only: bool = False) -> Topic:
        """Grow topic ``name`` to ``total`` partitions (CreatePartitions)."""
        self._check_writable()
        topic = self.topics.get(name)
        if topic is None:
            raise TopicError(UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        have = len(topic.partitions)
        if total < have:
            raise TopicError(INVALID_PARTITIONS, f"Topic currently has {have} partitions, which is higher than "
                                 f"the requested {total}.")
        if total == have:
            raise TopicError(INVALID_PARTITIONS, f"Topic already has {have} partitions.")
        if not validate_only:
            syncs: List[str] = []
            try:
                for i in range(have, total):
                    self._add_partition(topic, i, syncs)
            finally:
                self._sync_soon(syncs)
        return topic

    def delete_topic(self, name: str) -> None:
        """Close the topic's partitions and delete their folders (renamed to
        ``<folder>.<id>-delete`` first, then removed in the background, as Kafka does)."""
        self._check_writable()
        topic = self.topics.get(name)
        if topic is None:
            raise TopicError(UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        if topic.internal:
            raise TopicError(TOPIC_DELETION_DISABLED, f"topic {name} is internal and cannot be deleted")
        del self.topics[name]
        doomed = []
        for p in topic.partitions.values():
            p.close()
            target = f"{p.path}.{uuid.uuid4().hex}-delete"
            os.rename(p.path, target)
            doomed.append(target)
        if topic.configs:
            self._write_topic_configs()
        self.wake_all()
        def remove() -> None:
            for t in doomed:
                shutil.rmtree(t, ignore_errors=True)
        threading.Thread(target=remove, name="kafkawire-delete-topic", daemon=True).start()
        log.info("deleted topic %s", name)

    def alter_topic_configs(self, name: str, changes: Mapping[str, Optional[str]], *,
                            validate_only: bool = False) -> None:
        """Set (value) or remove (None) topic config overrides, and persist them."""
        self._check_writable()
        topic = self.topics.get(name)
        if topic is None:
            raise TopicError(UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        try:
            check_topic_configs(changes)
        except ValueError as exc:
            raise TopicError(INVALID_CONFIG, str(exc)) from None
        if validate_only:
            return
        for k, v in changes.items():
            if v is None:
                topic.configs.pop(k, None)
            else:
                topic.configs[k] = v
        topic.config_cache.clear()
        for p in topic.partitions.values():
            p.apply_configs()
        self._write_topic_configs()

    # -- appending ----------------------------------------------------------
    def append(self, topic: str, index: int, data: bytes) -> AppendInfo:
        """Append record batches (validated, offsets assigned) to a partition; wakes fetches
        waiting for data.  For coordinators: build ``data`` with
        :class:`kafkawire.records.BatchBuilder`.  Raises LogError/CorruptRecordError, or
        TopicError(3) for an unknown partition."""
        part = self.partition(topic, index)
        if part is None:
            raise TopicError(UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{index} does not exist on this broker")
        first, last = part.append(data)
        part.track_producers(data, first)
        self.wake()
        return AppendInfo(first, last, -1, part.log_start_offset)

    def write_marker(self, topic: str, index: int, marker: str, *, producer_id: int,
                     producer_epoch: int, coordinator_epoch: int = 0,
                     timestamp: Optional[int] = None) -> int:
        """Write a transaction marker (``"commit"`` or ``"abort"``) to a data partition; its
        offset.  An abort is recorded in the segment's ``.txnindex``; the partition's last
        stable offset moves past the transaction."""
        data = control_batch(marker, producer_id=producer_id, producer_epoch=producer_epoch,
                             coordinator_epoch=coordinator_epoch, timestamp=timestamp)
        offset = self.append(topic, index, data).first_offset
        part = self.partition(topic, index)
        if part is not None:
            part.producers.update_marker(producer_id, producer_epoch, coordinator_epoch)
        return offset

    # -- waiting for data -----------------------------------------------------
    def wake(self) -> None:
        """Wake every fetch waiting for data (after appends)."""
        waiters, self._waiters = self._waiters, set()
        for w in waiters:
            if not w.done():
                w.set_result(None)

    def wake_all(self) -> None:
        """Wake every waiting fetch (shutdown, topic deletion)."""
        self.wake()

    async def wait_for_data(self, timeout: float) -> None:
        """Return after the next append anywhere (or ``timeout`` seconds)."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.add(fut)
        try:
            await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            pass
        finally:
            self._waiters.discard(fut)

