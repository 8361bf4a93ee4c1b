"""A write task's Arrow batches, routed to topic-partitions and cut into Kafka record batches.

Spark hands the sink's tasks ``pyarrow.RecordBatch`` es.  :class:`Router` works
out every row's topic and partition with numpy (murmur2 of the key for rows
without a partition, vectorised as the producer's ``send_batch`` does; the
next partition in turn for rows without a key either) and splits the batch
by topic-partition, keeping the rows' order.  :class:`PartitionBatches` then
encodes each topic-partition's rows straight from the Arrow buffers with the
producer's columnar path (:func:`kafkawire.client.bulk.arrow_chunks` and
:func:`kafkawire.client.accumulator.encode_batch_parts`): no Python object per
record.  Rows with headers take the row-by-row builder (the columnar encoder
has no headers), in order with the rest.
"""
from __future__ import annotations

import time
from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kafkawire._format import CODEC_NAMES
from kafkawire.client.accumulator import BufferPool, encode_batch_parts
from kafkawire.client.bulk import arrow_chunks, key_partitions
from kafkawire.log import LogWriter
from kafkawire.records import BatchBuilder
from kafkawire.spark.options import OptionError

TopicPartition = Tuple[str, int]

#: the columns the record encoder takes, in the routed batches
ENCODED = ("value", "key", "timestamp")


def column(rb: Any, name: str) -> Optional[Any]:
    """``rb``'s column ``name`` (matched case-insensitively, as Spark matches), or None."""
    for i, f in enumerate(rb.schema):
        if f.name.lower() == name:
            return rb.column(i)
    return None


def binary(arr: Any) -> Any:
    """A binary view of a binary or string column (strings are UTF-8 already)."""
    t = arr.type
    if pa.types.is_string(t):
        return arr.cast(pa.binary())
    if pa.types.is_large_string(t):
        return arr.cast(pa.large_binary())
    return arr


def epoch_ms(arr: Any) -> Any:
    """A timestamp column as int64 milliseconds since the epoch (nulls kept)."""
    t = arr.type
    if not pa.types.is_timestamp(t):
        return arr.cast(pa.int64())
    raw = arr.cast(pa.int64())
    per_ms = {"s": None, "ms": 1, "us": 1000, "ns": 1_000_000}[t.unit]
    if per_ms is None:
        return pc.multiply(raw, 1000)
    return raw if per_ms == 1 else pc.divide(raw, per_ms)


class Router:
    """Each row's topic-partition, for one task (which owns the keyless rows' rotation)."""

    def __init__(self, topic: Optional[str], partitions: int, task: int) -> None:
        self.topic = topic
        self.partitions = partitions
        self.task = task
        self.turn = task            # the next keyless row's partition, before the modulo

    def route(self, rb: Any) -> Tuple[List[str], Any, Any]:
        """(topic names, each row's index into them, each row's partition) of ``rb``."""
        n = rb.num_rows
        topics = column(rb, "topic")
        if topics is None:
            names, tix = [str(self.topic)], np.zeros(n, dtype=np.int64)
        else:
            if topics.null_count:
                if self.topic is None:
                    first = int(np.flatnonzero(~np.asarray(topics.is_valid()))[0])
                    raise OptionError(f"row {first} of task {self.task} has a null topic and no "
                                      "topic option is set")
                topics = pc.fill_null(topics, self.topic)
            enc = topics.dictionary_encode()
            names = [str(t) for t in enc.dictionary.to_pylist()]
            tix = np.asarray(enc.indices, dtype=np.int64)
        parts = column(rb, "partition")
        if parts is not None and not parts.null_count:
            p = np.asarray(parts.cast(pa.int64()))
        else:
            p = (np.full(n, -1, dtype=np.int64) if parts is None
                 else np.array(pc.fill_null(parts.cast(pa.int64()), -1), dtype=np.int64))
            missing = np.flatnonzero(~np.asarray(parts.is_valid())) if parts is not None \
                else np.arange(n)
            keys = column(rb, "key")
            if keys is not None and keys.null_count < n:
                p[missing] = key_partitions(binary(keys.take(pa.array(missing))),
                                            self.partitions, np, pa)
            keyless = missing[p[missing] < 0]
            if len(keyless):
                p[keyless] = (self.turn + np.arange(len(keyless))) % self.partitions
                self.turn += len(keyless)
        if len(p) and p.min() < 0:
            row = int(np.flatnonzero(p < 0)[0])
            raise OptionError(f"partition {int(p[row])} of a row for topic {names[tix[row]]} "
                              "is negative")
        return names, tix, p

    def split(self, rb: Any) -> Iterator[Tuple[TopicPartition, Any]]:
        """``rb``'s rows by topic-partition (value, key, timestamp in ms), each in row order."""
        names, tix, p = self.route(rb)
        cols, fields = [], []
        for name in ENCODED:
            arr = column(rb, name)
            if arr is not None:
                cols.append(epoch_ms(arr) if name == "timestamp" else binary(arr))
                fields.append(name)
        table = pa.Table.from_arrays(cols, names=fields)
        n = rb.num_rows
        group = tix * (int(p.max()) + 1) + p if n else tix
        if n == 0:
            return
        if group.min() == group.max():
            yield (names[int(tix[0])], int(p[0])), table
            return
        order = np.argsort(group, kind="stable")
        table = table.take(pa.array(order))
        group = group[order]
        edges = [0, *(np.flatnonzero(np.diff(group)) + 1).tolist(), n]
        for a, b in zip(edges, edges[1:]):
            row = int(order[a])
            yield (names[int(tix[row])], int(p[row])), table.slice(a, b - a)


class PartitionBatches:
    """The batches one task attempt writes to one topic-partition's staging folder.

    Arrow rows wait until about ``batch_bytes`` have come, then are cut and
    encoded (the cuts are planned first: rows are encoded once); the last,
    partial cut waits for more rows (or :meth:`close`).
    """

    def __init__(self, folder: str, codec: str, batch_bytes: int, segment_bytes: int,
                 index_interval_bytes: int) -> None:
        self.writer = LogWriter(folder, segment_bytes=segment_bytes,
                                index_interval_bytes=index_interval_bytes)
        self.codec_name = codec
        self.codec = CODEC_NAMES.index(codec)
        self.limit = batch_bytes
        self.pool = BufferPool(2 * batch_bytes)       # the encoder's output buffers, reused
        self.pending: List[Any] = []        # Arrow tables not encoded yet
        self.pending_bytes = 0
        self.builder: Optional[BatchBuilder] = None     # rows with headers
        self.builder_bytes = 0
        self.records = 0

    def add_arrow(self, table: Any) -> None:
        """Queue rows (value, key, timestamp-ms columns) for the columnar encoder."""
        self._flush_rows()
        self.pending.append(table)
        self.pending_bytes += table.nbytes
        self.records += table.num_rows
        if self.pending_bytes >= self.limit:
            self._encode(final=False)

    def add_row(self, key: Optional[bytes], value: Optional[bytes], timestamp: Optional[int],
                headers: Any) -> None:
        """One row through the record builder (for rows the columnar encoder cannot take)."""
        self._encode(final=True)
        if self.builder is None:
            self.builder = BatchBuilder(2, self.codec_name)
        self.builder.append(value, key=key, timestamp=timestamp, headers=headers)
        self.builder_bytes += (len(key) if key else 0) + (len(value) if value else 0)
        self.records += 1
        if self.builder_bytes >= self.limit:
            self._flush_rows()

    def _flush_rows(self) -> None:
        if self.builder is not None and len(self.builder):
            self.writer.append_batches([self.builder.build()], trusted=True)
        self.builder, self.builder_bytes = None, 0

    def _encode(self, final: bool) -> None:
        if not self.pending:
            return
        table = (pa.concat_tables(self.pending, promote_options="default") if len(self.pending) > 1
                 else self.pending[0])
        now = int(time.time() * 1000)
        chunks = arrow_chunks(table, 1, self.limit, now, 0, _no_partitioner, _no_partitioner)
        assert chunks is not None       # no headers column: the columnar path takes every row
        keep = 0
        if not final and len(chunks) > 1:
            keep = chunks[-1][3]        # the partial last cut waits for more rows
            chunks = chunks[:-1]
        if chunks:
            # each batch built at its final offset, in one copy: the writer neither re-bases
            # (copies) nor re-checks record by record what this encoder just built
            batches = []
            offset = self.writer.next_offset
            for _, (enc, a, b, spread), _, count, first, top, _ in chunks:
                buf, n = enc.encode(a, b, first, spread, self.pool)
                head, body = encode_batch_parts(memoryview(buf)[:n], count, first, top,
                                                self.codec, None, -1, -1, -1, False)
                batches.append(b"".join((offset.to_bytes(8, "big"), memoryview(head)[8:], body)))
                del body
                self.pool.put(buf)          # the batch holds a copy of the records
                offset += count
            self.writer.append_batches(batches, assign_offsets=False, trusted=True)
        if keep:
            rest = table.slice(table.num_rows - keep)
            self.pending, self.pending_bytes = [rest], rest.nbytes
        else:
            self.pending, self.pending_bytes = [], 0

    def close(self) -> None:
        """Encode and append what waits, and close the staging folder's writer."""
        try:
            self._encode(final=True)
            self._flush_rows()
        finally:
            self.writer.close()


def _no_partitioner(*_: Any) -> int:
    return 0
