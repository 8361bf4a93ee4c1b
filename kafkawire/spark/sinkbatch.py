"""A write task's Arrow batches, routed to topic-partitions and cut into Kafka record batches.

Spark hands the sink's tasks ``pyarrow.RecordBatch`` es.  :class:`Router` works
out every row's topic and partition with numpy (murmur2 of the key for rows
without a partition, vectorised as the producer's ``send_batch`` does; the
next partition in turn for rows without a key either) and splits the batch
by topic-partition, keeping the rows' order.  :class:`PartitionBatches` then
encodes each topic-partition's rows straight from the Arrow buffers with the
producer's columnar path (:func:`kafkawire.client.bulk.arrow_chunks` and
:func:`kafkawire.client.accumulator.encode_batch_parts`): no Python object per
record.  That encoder writes keys, values and timestamps; a ``headers`` column
(``list<struct<key, value>>``) is spliced into its records with numpy
(:func:`with_headers`), still without a Python object per record or header.
"""
from __future__ import annotations

import time
from typing import Any, Iterator, List, Optional, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kafkawire._format import CODEC_NAMES
from kafkawire.client.accumulator import BufferPool, encode_batch_parts
from kafkawire.client.bulk import arrow_chunks, key_partitions
from kafkawire.log import LogWriter
from kafkawire.spark.options import OptionError

TopicPartition = Tuple[str, int]

#: the columns the record encoder takes, in the routed batches
ENCODED = ("value", "key", "timestamp", "headers")


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
            if arr is None or (name == "headers" and arr.null_count == len(arr)):
                continue
            cols.append(epoch_ms(arr) if name == "timestamp" else arr if name == "headers"
                        else binary(arr))
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
        self.codec = CODEC_NAMES.index(codec)
        self.limit = batch_bytes
        self.pool = BufferPool(2 * batch_bytes)       # the encoder's output buffers, reused
        self.pending: List[Any] = []        # Arrow tables not encoded yet
        self.pending_bytes = 0
        self.records = 0

    def add_arrow(self, table: Any) -> None:
        """Queue rows (value, key, timestamp-ms and headers columns) for the encoder."""
        self.pending.append(table)
        self.pending_bytes += table.nbytes
        self.records += table.num_rows
        if self.pending_bytes >= self.limit:
            self._encode(final=False)

    def _encode(self, final: bool) -> None:
        if not self.pending:
            return
        table = (pa.concat_tables(self.pending, promote_options="default") if len(self.pending) > 1
                 else self.pending[0])
        headers = None
        if "headers" in table.column_names:
            headers = table.column("headers")
            table = table.drop_columns(["headers"])
            headers = None if headers.null_count == len(headers) else headers.combine_chunks()
        now = int(time.time() * 1000)
        chunks = arrow_chunks(table, 1, self.limit, now, 0, _no_partitioner, _no_partitioner)
        assert chunks is not None       # no headers column: the columnar path takes every row
        keep = 0
        if not final and len(chunks) > 1:
            keep = chunks[-1][3]        # the partial last cut waits for more rows
            chunks = chunks[:-1]
        if chunks:
            lengths = None if headers is None else (_lengths(table, "key"), _lengths(table, "value"))
            # each batch built at its final offset, in one copy: the writer neither re-bases
            # (copies) nor re-checks record by record what this encoder just built
            batches = []
            offset = self.writer.next_offset
            for _, encoded, _, count, first, top, _ in chunks:
                assert encoded is not None      # arrow_chunks encodes every row columnar
                enc, a, b, spread = encoded
                buf, n = enc.encode(a, b, first, spread, self.pool)
                records: Any = memoryview(buf)[:n]
                if lengths is not None and headers is not None:   # both or neither
                    ts = None if enc.ts is None else enc.ts[a:b]
                    records = with_headers(records, lengths[0][a:b], lengths[1][a:b], ts, first,
                                           headers.slice(a, b - a))
                head, body = encode_batch_parts(records, count, first, top, self.codec, None,
                                                -1, -1, -1, False)
                batches.append(b"".join((offset.to_bytes(8, "big"), memoryview(head)[8:], body)))
                del body, records
                self.pool.put(buf)          # the batch holds a copy of the records
                offset += count
            self.writer.append_batches(batches, assign_offsets=False, trusted=True)
        if keep:
            rest = table.slice(table.num_rows - keep)
            if headers is not None:
                rest = rest.append_column("headers", headers.slice(table.num_rows - keep))
            self.pending, self.pending_bytes = [rest], rest.nbytes
        else:
            self.pending, self.pending_bytes = [], 0

    def close(self) -> None:
        """Encode and append what waits, and close the staging folder's writer."""
        try:
            self._encode(final=True)
        finally:
            self.writer.close()


def _lengths(table: Any, name: str) -> np.ndarray:
    """Byte length of each row's key or value (-1: null) as int64."""
    if name not in table.column_names:
        return np.full(table.num_rows, -1, dtype=np.int64)
    lens = pc.binary_length(table.column(name))
    return np.asarray(pc.fill_null(lens, -1).combine_chunks(), dtype=np.int64)


# -- headers, spliced into the column encoder's records -----------------------------------

def _zigzag(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.int64)
    return ((x << 1) ^ (x >> 63)).view(np.uint64)


def _varint_sizes(u: np.ndarray) -> np.ndarray:
    """Bytes of each unsigned varint of ``u`` (uint64)."""
    sizes = np.ones(len(u), dtype=np.int64)
    top = int(u.max()) if len(u) else 0
    k = 1
    while k < 10 and top >> (7 * k):
        sizes += u >= np.uint64(1 << (7 * k))
        k += 1
    return sizes


def _put_varints(out: np.ndarray, at: np.ndarray, u: np.ndarray, sizes: np.ndarray) -> None:
    """Write ``u[i]`` as a varint of ``sizes[i]`` bytes at ``out[at[i]:]``."""
    k = 0
    while len(u):
        more = sizes > k + 1
        out[at + k] = ((u >> np.uint64(7 * k)) & np.uint64(0x7F)).astype(np.uint8) | \
            (more.astype(np.uint8) << 7)
        at, u, sizes = at[more], u[more], sizes[more]
        k += 1


def _flat_binary(arr: Any) -> Tuple[np.ndarray, np.ndarray]:
    """(length of each entry, -1 for nulls; the entries' bytes one after the other)."""
    n = len(arr)
    bufs = arr.buffers()
    width = np.int64 if pa.types.is_large_binary(arr.type) else np.int32
    offs = np.frombuffer(bufs[1], dtype=width)[arr.offset:arr.offset + n + 1].astype(np.int64)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    data = data[offs[0]:offs[-1]]
    lens = np.diff(offs)
    if arr.null_count:
        valid = np.asarray(arr.is_valid())
        if lens[~valid].any():          # a null may span bytes: leave them out
            data = data[np.repeat(valid, lens)]
        lens[~valid] = -1
    return lens, data


def _ragged(starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """Positions ``starts[i] .. starts[i] + lens[i] - 1`` for every ``i``, in order."""
    ends = np.cumsum(lens)
    return np.repeat(starts - (ends - lens), lens) + np.arange(int(ends[-1]) if len(ends) else 0,
                                                                dtype=np.int64)


def with_headers(records: Any, key_lens: np.ndarray, value_lens: np.ndarray,
                 timestamps: Optional[np.ndarray], first_ts: int, headers: Any) -> np.ndarray:
    """The v2 records region ``records`` (``len(headers)`` records without headers, as the
    column encoder writes them) with each row's headers (an Arrow ``list<struct<key, value>>``
    column; null or empty: none): a new length varint, the record, then the headers.

    Every record's size is worked out from its key and value lengths and timestamp delta
    and checked against ``records`` as a whole, so a region of another layout is refused.
    """
    rows = len(headers)
    src = np.frombuffer(records, dtype=np.uint8)
    idx = np.arange(rows, dtype=np.int64)
    tsd = np.zeros(rows, np.int64) if timestamps is None else timestamps - first_ts

    def field(lens: np.ndarray) -> np.ndarray:
        return np.where(lens < 0, 1, _varint_sizes(_zigzag(lens)) + np.maximum(lens, 0))

    body = 2 + _varint_sizes(_zigzag(tsd)) + _varint_sizes(_zigzag(idx)) + field(key_lens) + \
        field(value_lens)                 # attributes .. value, and the 0 header count
    lv = _varint_sizes(_zigzag(body))
    if int((lv + body).sum()) != len(src):
        raise ValueError(f"the records region holds {len(src)} bytes, not the {int((lv + body).sum())} "
                         f"of {rows} records without headers")
    # each row's headers: [count][key length][key][value length][value]...
    count = np.asarray(pc.fill_null(pc.list_value_length(headers), 0), dtype=np.int64)
    items = headers.flatten()
    if items.null_count:
        raise OptionError("a header in the headers column is null; give each header a key")
    parts = {f.name.lower(): a for f, a in zip(items.type, items.flatten())}
    hkey, hval = binary(parts["key"]), binary(parts["value"])
    if hkey.null_count:
        raise OptionError("a header has a null key; header keys are strings")
    hk_len, hk_data = _flat_binary(hkey)
    hv_len, hv_data = _flat_binary(hval)
    hk_vs = _varint_sizes(_zigzag(hk_len))
    hv_vs = _varint_sizes(_zigzag(hv_len))
    per_header = hk_vs + hk_len + hv_vs + np.maximum(hv_len, 0)
    first_header = np.concatenate(([0], np.cumsum(count)))
    hsum = np.concatenate(([0], np.cumsum(per_header)))
    count_vs = _varint_sizes(_zigzag(count))
    tail = count_vs + hsum[first_header[1:]] - hsum[first_header[:-1]]
    new_body = body - 1 + tail
    nlv = _varint_sizes(_zigzag(new_body))
    size = nlv + new_body
    at = np.cumsum(size) - size                 # where each new record starts
    out = np.empty(int(size.sum()), dtype=np.uint8)
    _put_varints(out, at, _zigzag(new_body), nlv)
    # the old record between its length varint and its header count, moved as a whole
    keep_src = np.repeat(np.tile(np.array([False, True, False]), rows),
                         np.column_stack((lv, body - 1, np.ones(rows, np.int64))).ravel())
    keep_out = np.repeat(np.tile(np.array([False, True, False]), rows),
                         np.column_stack((nlv, body - 1, tail)).ravel())
    out[keep_out] = src[keep_src]
    tail_at = at + nlv + body - 1
    _put_varints(out, tail_at, _zigzag(count), count_vs)
    if len(hk_len):
        row = np.repeat(idx, count)
        h_at = tail_at[row] + count_vs[row] + hsum[:-1] - hsum[first_header[row]]
        _put_varints(out, h_at, _zigzag(hk_len), hk_vs)
        _put_varints(out, h_at + hk_vs + hk_len, _zigzag(hv_len), hv_vs)
        out[_ragged(h_at + hk_vs, hk_len)] = hk_data
        out[_ragged(h_at + hk_vs + hk_len + hv_vs, np.maximum(hv_len, 0))] = hv_data
    return out


def _no_partitioner(*_: Any) -> int:
    return 0
