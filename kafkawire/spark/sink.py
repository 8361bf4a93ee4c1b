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
indexes), then delete the temporary folder.  A failed, retried or aborted task
leaves nothing in the partition folders.
"""
from __future__ import annotations

import itertools
import os
import shutil
import uuid
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Tuple

from kafkawire._deps import require
from kafkawire._format import CODEC_NAMES
from kafkawire.log import Log, LogWriter
from kafkawire.records import BatchBuilder
from kafkawire.spark.options import OptionError, bool_option, int_option, log, size_option

_ds = require("pyspark.sql.datasource", "spark", "Writing with the Spark data source")
DataSourceArrowWriter = _ds.DataSourceArrowWriter
WriterCommitMessage = _ds.WriterCommitMessage

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


def check_schema(schema, wo: WriteOptions) -> None:
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


class _Partition:
    """The batches one task attempt writes to one topic-partition (a staging folder)."""

    def __init__(self, folder: str, wo: WriteOptions) -> None:
        self.writer = LogWriter(folder, segment_bytes=wo.segment_bytes,
                                index_interval_bytes=wo.index_interval_bytes)
        self.compression = wo.compression
        self.limit = wo.batch_bytes
        self.builder = BatchBuilder(2, self.compression)
        self.bytes = 0
        self.records = 0

    def add(self, key, value, timestamp, headers) -> None:
        self.builder.append(value, key=key, timestamp=timestamp, headers=headers)
        self.bytes += (len(key) if key else 0) + (len(value) if value else 0)
        self.records += 1
        if self.bytes >= self.limit:
            self.flush()

    def flush(self) -> None:
        if len(self.builder):
            self.writer.append_batch(self.builder.build())
            self.builder = BatchBuilder(2, self.compression)
            self.bytes = 0

    def close(self) -> None:
        self.flush()
        self.writer.close()


@dataclass
class StagedTask(WriterCommitMessage):
    """What a task attempt wrote: its staging folder and records per topic-partition."""

    partition_id: int
    folder: str
    records: Dict[Tuple[str, int], int]


def _bytes(v) -> Optional[bytes]:
    if v is None or isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode("utf-8")
    return bytes(v)


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

    def write(self, iterator) -> StagedTask:
        from pyspark import TaskContext
        ctx = TaskContext.get()
        pid, attempt = (ctx.partitionId(), ctx.attemptNumber()) if ctx else (0, 0)
        folder = os.path.join(self.staging, f"{pid:05d}-{attempt}")
        if os.path.exists(folder):
            shutil.rmtree(folder)
        parts: Dict[Tuple[str, int], _Partition] = {}
        rotation = itertools.count(pid)
        wo = self.wo
        try:
            for rb in iterator:
                cols = rb.to_pydict()
                n = rb.num_rows
                values = cols["value"]
                keys = cols.get("key", [None] * n)
                topics = cols.get("topic", [None] * n)
                partitions = cols.get("partition", [None] * n)
                stamps = cols.get("timestamp", [None] * n)
                headers = cols.get("headers", [None] * n)
                for i in range(n):
                    topic = topics[i] or wo.topic
                    if topic is None:
                        raise OptionError(f"row {i} of task {pid} has a null topic and no topic option is set")
                    key = _bytes(keys[i])
                    p = partitions[i]
                    if p is None:
                        # cheap: only rows without a partition load the client package
                        from kafkawire.client.partitioner import partition_for_key
                        p = (partition_for_key(key, wo.partitions) if key is not None
                             else next(rotation) % wo.partitions)
                    elif p < 0:
                        raise OptionError(f"partition {p} of a row for topic {topic} is negative")
                    tp = (str(topic), int(p))
                    part = parts.get(tp)
                    if part is None:
                        part = parts[tp] = _Partition(os.path.join(folder, f"{tp[0]}-{tp[1]}"), wo)
                    ts = stamps[i]
                    ms = None if ts is None else int(ts.timestamp() * 1000)
                    hs = [(h["key"], _bytes(h["value"])) for h in headers[i]] if headers[i] else ()
                    part.add(key, _bytes(values[i]), ms, hs)
        except BaseException:
            for part in parts.values():
                part.close()
            shutil.rmtree(folder, ignore_errors=True)
            raise
        for part in parts.values():
            part.close()
        if not os.path.exists(self.marker):       # the job was aborted while this task ran
            self._clean()
            raise OptionError(f"the write job {self.job} was aborted; task {pid} staged nothing")
        return StagedTask(pid, folder, {tp: p.records for tp, p in parts.items()})

    def commit(self, messages: List[Optional[StagedTask]]) -> None:
        staged = sorted((m for m in messages if m is not None), key=lambda m: m.partition_id)
        tps = sorted({tp for m in staged for tp in m.records})
        try:
            for tp in tps:
                target = os.path.join(self.wo.path, f"{tp[0]}-{tp[1]}")
                if self.overwrite and os.path.exists(target):
                    shutil.rmtree(target)
                with LogWriter(target, segment_bytes=self.wo.segment_bytes,
                               index_interval_bytes=self.wo.index_interval_bytes) as w:
                    for m in staged:
                        if tp in m.records:
                            _append_folder(w, os.path.join(m.folder, f"{tp[0]}-{tp[1]}"))
            log.info("kafkawire wrote %d records to %d partition folders under %s",
                     sum(sum(m.records.values()) for m in staged), len(tps), self.wo.path)
        finally:
            self._clean()

    def abort(self, messages: List[Optional[StagedTask]]) -> None:
        self._clean()

    def _clean(self) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)
        root = os.path.join(self.wo.path, TEMPORARY)
        try:
            os.rmdir(root)          # only when no other job is staging there
        except OSError:
            pass


def _append_folder(w: LogWriter, folder: str, chunk: int = 8 << 20) -> None:
    """Append every batch of a staged partition folder, re-based onto ``w``'s next offsets."""
    with Log.open(folder) as staged:
        pending: List[bytes] = []
        size = 0
        for batch in staged.batches():
            pending.append(bytes(batch.raw))
            size += batch.size
            if size >= chunk:
                w.append_batches(pending)
                pending, size = [], 0
        if pending:
            w.append_batches(pending)

