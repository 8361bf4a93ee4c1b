"""``df.write.format("kafkawire").save(path)``: DataFrames into Kafka's on-disk format.

The DataFrame has the columns of Spark's Kafka sink: ``value`` (binary or
string), and optionally ``key``, ``topic``, ``partition``, ``headers``
(``array<struct<key: string, value: binary>>``) and ``timestamp``.  A row
without a partition goes where Kafka's default partitioner would put it among
``partitions`` partitions: murmur2 of the key, or, for a null key, the next
partition in turn.

Commit protocol: each task attempt writes its rows, in batches built by the
record encoder, into partition folders of its own under
``<path>/_kafkawire_temporary/<job>/<task>-<attempt>/``.  Only when Spark
commits the job does the driver append the committed attempts' batches, task
by task, to ``<path>/<topic>-<partition>`` through
:class:`~kafkawire.log.LogWriter` (which assigns the offsets and writes the
indexes), then delete the temporary folder.  A task's staged partition of
:data:`MOVE_BYTES` or more is moved in whole (``LogWriter.append_segments``:
its segments renamed, each batch's base offset rewritten in place), smaller
ones are copied batch by batch.  A failed, retried or aborted task leaves
nothing in the partition folders.
"""
from __future__ import annotations

import json
import os
import shutil
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple

from kafkawire._deps import require
from kafkawire._format import CODEC_NAMES
from kafkawire.errors import LogError
from kafkawire.log import Log, LogWriter
from kafkawire.spark.options import OptionError, int_option, log, size_option
from kafkawire.spark.sinkbatch import PartitionBatches, Router

if TYPE_CHECKING:
    from pyspark.sql.datasource import (DataSourceArrowWriter, DataSourceStreamArrowWriter,
                                        WriterCommitMessage)
    from pyspark.sql.types import StructType
else:   # a missing pyspark is reported as the extra to install
    _ds = require("pyspark.sql.datasource", "spark", "Writing with the Spark data source")
    DataSourceArrowWriter = _ds.DataSourceArrowWriter
    DataSourceStreamArrowWriter = _ds.DataSourceStreamArrowWriter
    WriterCommitMessage = _ds.WriterCommitMessage

#: A ``pyarrow.RecordBatch`` (pyarrow ships no type information).
ArrowBatch = Any

TEMPORARY = "_kafkawire_temporary"
CODECS = CODEC_NAMES

#: write option (lower-cased) -> one-line help.
WRITE_OPTIONS = {
    "path": "the log.dirs folder to write <topic>-<partition> folders into",
    "topic": "topic of rows without a topic column (or with a null topic)",
    "partitions": "partition count for rows without a partition: murmur2 of the key (default 1)",
    "compression": "none | gzip | snappy | lz4 | zstd (default none)",
    "batchsize": "bytes of keys and values per record batch, at most (default 1m)",
    "segmentbytes": "segment.bytes: roll segments at this size (default 1g)",
    "indexintervalbytes": "index.interval.bytes: bytes between index entries (default 4096)",
    "checkpointlocation": "writeStream: Spark's checkpoint folder (used by Spark itself)",
}


@dataclass
class WriteOptions:
    """Validated write options."""

    path: str
    topic: Optional[str] = None
    partitions: int = 1
    compression: str = "none"
    batch_bytes: int = 1 << 20
    segment_bytes: int = 1 << 30
    index_interval_bytes: int = 4096
    raw: Dict[str, str] = field(default_factory=dict)


def parse_write_options(options: Mapping[str, str]) -> WriteOptions:
    """Validate the writer's options (unknown ones are errors)."""
    opts = {str(k).lower(): ("" if v is None else str(v)) for k, v in options.items()}
    unknown = sorted(set(opts) - set(WRITE_OPTIONS))
    if unknown:
        raise OptionError(f"unknown write option(s) for format 'kafkawire': {', '.join(unknown)}; "
                          f"known: {', '.join(WRITE_OPTIONS)}")
    path = opts.get("path", "").strip()
    if not path:
        raise OptionError("no path given: use df.write.format('kafkawire').save('/path/to/log.dirs')")
    if "://" in path:
        raise OptionError(f"{path}: writing goes to a local or mounted folder; URLs are read-only")
    wo = WriteOptions(path=os.path.abspath(path), raw=opts)
    wo.topic = opts.get("topic") or None
    wo.partitions = int_option(opts, "partitions", minimum=1) or 1
    codec = opts.get("compression", "none").strip().lower()
    if codec not in CODECS:
        raise OptionError(f"compression must be one of {', '.join(CODECS)}, not {codec!r}")
    wo.compression = codec
    for key, attr in (("batchsize", "batch_bytes"), ("segmentbytes", "segment_bytes"),
                      ("indexintervalbytes", "index_interval_bytes")):
        v = size_option(opts, key)
        if v is not None:
            setattr(wo, attr, v)
    return wo


def check_schema(schema: StructType, wo: WriteOptions) -> None:
    """The DataFrame must have a value column, and a topic (column or option)."""
    names = {f.name.lower(): f for f in schema.fields}
    if "value" not in names:
        raise OptionError("the DataFrame needs a value column (binary or string), as for Spark's "
                          f"Kafka sink; it has {', '.join(f.name for f in schema.fields)}")
    if "topic" not in names and wo.topic is None:
        raise OptionError("no topic: add a topic column or .option('topic', 'name')")
    known = {"key", "value", "topic", "partition", "headers", "timestamp"}
    extra = sorted(set(names) - known)
    if extra:
        raise OptionError(f"column(s) {', '.join(extra)} are not part of Kafka's record; select "
                          "key, value and optionally topic, partition, headers, timestamp")
    for name, allowed in _TYPES.items():
        f = names.get(name)
        if f is not None and f.dataType.typeName() not in allowed:
            raise OptionError(f"column {f.name} is {f.dataType.simpleString()}; it must be "
                              f"{' or '.join(allowed)}")


#: the column types the sink takes (Spark's type names), as Spark's Kafka sink takes them
_TYPES = {"key": ("binary", "string"), "value": ("binary", "string"), "topic": ("string",),
          "partition": ("integer", "long", "short", "byte"),
          "timestamp": ("timestamp", "timestamp_ntz")}


@dataclass
class StagedTask(WriterCommitMessage):
    """What a task attempt wrote: its staging folder and records per topic-partition."""

    partition_id: int
    folder: str
    records: Dict[Tuple[str, int], int]


def _staged(messages: List[Optional[WriterCommitMessage]]) -> List[StagedTask]:
    """The tasks' messages in task order (Spark passes what ``write`` returned, None for a task
    that failed)."""
    return sorted((m for m in messages if isinstance(m, StagedTask)), key=lambda m: m.partition_id)


def _task_ids() -> Tuple[int, int]:
    """(partition id, attempt number) of the running Spark task ((0, 0) outside one)."""
    from pyspark import TaskContext
    ctx = TaskContext.get()
    return (ctx.partitionId(), ctx.attemptNumber()) if ctx else (0, 0)


def stage(wo: WriteOptions, iterator: Iterable[ArrowBatch], folder: str,
          pid: int) -> Dict[Tuple[str, int], int]:
    """Write a task's rows into partition folders under ``folder`` (replaced if present);
    records per topic-partition.  On any error the folder is removed and the error raised.

    Each Arrow batch is routed and encoded column-wise, headers included (see
    :mod:`kafkawire.spark.sinkbatch`)."""
    if os.path.exists(folder):
        shutil.rmtree(folder)
    parts: Dict[Tuple[str, int], PartitionBatches] = {}
    router = Router(wo.topic, wo.partitions, pid)

    def part(tp: Tuple[str, int]) -> PartitionBatches:
        got = parts.get(tp)
        if got is None:
            got = parts[tp] = PartitionBatches(
                os.path.join(folder, f"{tp[0]}-{tp[1]}"), wo.compression, wo.batch_bytes,
                wo.segment_bytes, wo.index_interval_bytes)
        return got

    try:
        for rb in iterator:
            if not rb.num_rows:
                continue
            for tp, table in router.split(rb):
                part(tp).add_arrow(table)
    except BaseException:
        for p in parts.values():
            try:
                p.close()
            except Exception:       # the folder is removed anyway; keep the first error
                pass
        shutil.rmtree(folder, ignore_errors=True)
        raise
    try:
        for p in parts.values():
            p.close()
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return {tp: p.records for tp, p in parts.items()}


class KafkaWireWriter(DataSourceArrowWriter):
    """Stages each task's rows as partition folders; the job commit appends them in task order."""

    def __init__(self, wo: WriteOptions, overwrite: bool) -> None:
        self.wo = wo
        self.overwrite = overwrite
        self.job = uuid.uuid4().hex
        self.staging = os.path.join(wo.path, TEMPORARY, self.job)
        # The job's marker: abort removes it, so a task still running when the job fails
        # finds it gone after its last write and removes what it staged.
        os.makedirs(self.staging, exist_ok=True)
        self.marker = os.path.join(self.staging, ".job")
        with open(self.marker, "wb"):
            pass

    def write(self, iterator: Iterator[ArrowBatch]) -> StagedTask:
        pid, attempt = _task_ids()
        folder = os.path.join(self.staging, f"{pid:05d}-{attempt}")
        records = stage(self.wo, iterator, folder, pid)
        if not os.path.exists(self.marker):       # the job was aborted while this task ran
            self._clean()
            raise OptionError(f"the write job {self.job} was aborted; task {pid} staged nothing")
        return StagedTask(pid, folder, records)

    def commit(self, messages: List[Optional[WriterCommitMessage]]) -> None:
        staged = _staged(messages)
        tps = sorted({tp for m in staged for tp in m.records})
        moved = 0
        try:
            for tp in tps:
                target = os.path.join(self.wo.path, f"{tp[0]}-{tp[1]}")
                if self.overwrite and os.path.exists(target):
                    shutil.rmtree(target)
                with LogWriter(target, segment_bytes=self.wo.segment_bytes,
                               index_interval_bytes=self.wo.index_interval_bytes) as w:
                    for m in staged:
                        if tp in m.records:
                            moved += _commit_folder(w, os.path.join(m.folder, f"{tp[0]}-{tp[1]}"))
            log.info("kafkawire wrote %d records to %d partition folders under %s (%d staged "
                     "partition folders moved in as segments, the rest copied)",
                     sum(sum(m.records.values()) for m in staged), len(tps), self.wo.path, moved)
        finally:
            self._clean()

    def abort(self, messages: List[Optional[WriterCommitMessage]]) -> None:
        self._clean()

    def _clean(self) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)
        root = os.path.join(self.wo.path, TEMPORARY)
        try:
            os.rmdir(root)          # only when no other job is staging there
        except OSError:
            pass


#: Folder (under the output path) recording the micro-batches a streaming query committed.
METADATA = "_kafkawire_metadata"


class KafkaWireStreamWriter(DataSourceStreamArrowWriter):
    """``writeStream``: each micro-batch is staged as the batch sink stages a job, then appended
    exactly once (large staged partitions moved in as segments, as the batch sink does).

    The output folder's ``_kafkawire_metadata/`` holds one file per committed
    micro-batch id (as Spark's file sink keeps ``_spark_metadata``): a batch
    that Spark replays after a failure (its checkpoint had not recorded the
    commit) is found there and not written again.  Before appending, the commit
    writes ``<id>.pending`` naming the staged folders and each partition's log
    end offset; a commit that stopped half-way is finished from that record on
    the next attempt, appending only the batches the log does not hold yet: the record
    holds each staged partition's record count, so a staged partition whose segments were
    moved in, wholly or in part, is told apart from one still to append.
    """

    def __init__(self, wo: WriteOptions) -> None:
        self.wo = wo
        self.staging = os.path.join(wo.path, TEMPORARY, "stream")
        self.metadata = os.path.join(wo.path, METADATA)

    def write(self, iterator: Iterator[ArrowBatch]) -> StagedTask:
        pid, attempt = _task_ids()
        folder = os.path.join(self.staging, f"{pid:05d}-{attempt}-{uuid.uuid4().hex}")
        return StagedTask(pid, folder, stage(self.wo, iterator, folder, pid))

    def commit(self, messages: List[Optional[WriterCommitMessage]], batchId: int) -> None:  # noqa: N803
        staged = _staged(messages)
        done = os.path.join(self.metadata, str(int(batchId)))
        pending = done + ".pending"
        if os.path.exists(done):
            log.info("micro-batch %d was committed to %s before (replayed after a restart); "
                     "not written again", batchId, self.wo.path)
            _remove([m.folder for m in staged])
            return
        if os.path.exists(pending):
            # a commit of this batch stopped half-way: finish it with what it staged
            with open(pending) as f:
                plan = json.load(f)
            _remove([m.folder for m in staged])
        else:
            tps = sorted({tp for m in staged for tp in m.records})
            plan = {"batch": int(batchId), "folders": [m.folder for m in staged],
                    "start": {f"{t}-{p}": _log_end(self._target((t, p))) for t, p in tps},
                    "records": {m.folder: {f"{t}-{p}": n for (t, p), n in m.records.items()}
                                for m in staged}}
            os.makedirs(self.metadata, exist_ok=True)
            _write_json(pending, plan)
        ends = {}
        for name, start in sorted(plan["start"].items()):
            with LogWriter(os.path.join(self.wo.path, name), segment_bytes=self.wo.segment_bytes,
                           index_interval_bytes=self.wo.index_interval_bytes) as w:
                skip = w.next_offset - start
                if skip < 0:
                    raise LogError(f"{w.path} ends at offset {w.next_offset}, before {start} where "
                                   f"micro-batch {batchId} began appending; it was truncated meanwhile")
                for folder in plan["folders"]:
                    part = os.path.join(folder, name)
                    count = _staged_records(plan, folder, name)
                    if skip >= count:       # appended before (nothing staged: count 0)
                        skip -= count
                    elif skip:              # appended in part before: the rest is copied
                        _append_folder(w, part, skip=skip)
                        skip = 0
                    else:
                        _commit_folder(w, part)
                ends[name] = [start, w.next_offset]
        _write_json(done, {"batch": int(batchId), "offsets": ends})
        os.remove(pending)
        # this batch's folders, and any a failed attempt of a task or a batch left behind
        # (a query commits one micro-batch at a time, so nothing else is staging now)
        _remove(plan["folders"] + [os.path.join(self.staging, n) for n in _listdir(self.staging)])
        log.info("kafkawire committed micro-batch %d: %d records to %d partition folders under %s",
                 batchId, sum(e - s for s, e in ends.values()), len(ends), self.wo.path)

    def abort(self, messages: List[Optional[WriterCommitMessage]], batchId: int) -> None:  # noqa: N803
        _remove([m.folder for m in _staged(messages)])

    def _target(self, tp: Tuple[str, int]) -> str:
        return os.path.join(self.wo.path, f"{tp[0]}-{tp[1]}")


def _staged_records(plan: Dict[str, Any], folder: str, name: str) -> int:
    """Records a micro-batch's staged folder holds for partition folder ``name``, from the
    commit's record (or, for a record without counts, from the staged partition itself, which
    such a commit only copied from)."""
    counts = plan.get("records")
    if counts is not None:
        return int(counts.get(folder, {}).get(name, 0))
    part = os.path.join(folder, name)
    return _log_end(part) if os.path.isdir(part) else 0


def _log_end(folder: str) -> int:
    """The next offset of the partition folder (0 when it does not exist yet)."""
    if not os.path.isdir(folder):
        return 0
    with Log.open(folder) as existing:
        return int(existing.next_offset)


def _write_json(path: str, data: Dict[str, Any]) -> None:
    """Write ``path`` whole or not at all (a temporary file renamed over it, synced)."""
    tmp = f"{path}.{uuid.uuid4().hex}.tmp"
    with open(tmp, "w") as f:
        json.dump(data, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(os.path.dirname(path), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _listdir(folder: str) -> List[str]:
    try:
        return os.listdir(folder)
    except FileNotFoundError:
        return []


def _remove(folders: List[str]) -> None:
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)


#: A task's staged partition of at least this many bytes becomes segments of the target
#: partition as it is (renamed, offsets re-based in place); smaller ones are copied, so that
#: many small tasks do not leave many small segments.
MOVE_BYTES = 8 << 20


def _commit_folder(w: LogWriter, folder: str) -> bool:
    """Append a staged partition folder to ``w``: its segments moved in when it is large (and on
    the same filesystem), else its batches copied; whether it was moved."""
    logs = [os.path.join(folder, n) for n in _listdir(folder) if n.endswith(".log")]
    if sum(os.path.getsize(p) for p in logs) >= MOVE_BYTES and \
            os.stat(folder).st_dev == os.stat(w.path).st_dev:
        w.append_segments(folder)
        return True
    _append_folder(w, folder)
    return False


def _append_folder(w: LogWriter, folder: str, chunk: int = 8 << 20, skip: int = 0) -> None:
    """Append every batch of a staged partition folder, re-based onto ``w``'s next offsets,
    leaving out the batches below staged offset ``skip`` (appended before: copied, or moved in
    by a commit that stopped half-way; a staged partition's offsets start at 0)."""
    with Log.open(folder) as staged:
        pending: List[bytes] = []
        size = 0
        for batch in staged.batches():
            if batch.base_offset < skip:
                if batch.last_offset >= skip:
                    raise LogError(f"{w.path}: the log ends inside a staged batch of {folder}; "
                                   "it was changed by something else than this sink")
                continue
            pending.append(bytes(batch.raw))
            size += batch.size
            if size >= chunk:
                w.append_batches(pending, trusted=True)
                pending, size = [], 0
        if pending:
            w.append_batches(pending, trusted=True)
