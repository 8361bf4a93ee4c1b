"""``Producer.send_batch``: records already in hand, cut into batches without a Python object per record.

A ``pyarrow.Table`` or ``RecordBatch`` with ``value``, ``key``,
``timestamp`` and ``partition`` columns is partitioned and sized with numpy;
each batch is encoded straight from the Arrow buffers by the
``encode_columns_into`` kernel, into a reused buffer, just before it is
queued (so the I/O thread sends earlier batches while later ones are
encoded, and the bytes in hand stay within ``buffer_memory``).  Keyed rows
without a partition column are hashed with a vectorised murmur2 (a custom
partitioner is called per key), and a ``headers`` column takes the row-by-row
path; a list of tuples/dicts always does.
"""
from __future__ import annotations

from typing import Any, Callable, Iterator, List, Optional, Sequence, Tuple

from kafkawire import _kernels as K
from kafkawire.client.accumulator import RECORD_OVERHEAD, BufferPool
from kafkawire.client.results import normalize_record

__all__ = ["Chunk", "ArrowEncoder", "arrow_chunks", "row_chunks", "is_arrow"]

# (partition, rows of an ArrowEncoder as (encoder, start, stop, timestamp spread) or None, rows as
#  (values, keys, timestamps, headers) or None, count, first timestamp, max timestamp,
#  size in bytes (the estimate buffer_memory and batch_size count))
Chunk = Tuple[int, Optional[tuple], Optional[tuple], int, int, int, int]

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


class ArrowEncoder:
    """The columns of one ``send_batch`` table, encoded a batch (row range) at a time."""

    __slots__ = ("ts", "keys", "values", "sizes")

    def __init__(self, ts: Any, keys: Any, values: Any, sizes: Any) -> None:
        self.ts, self.keys, self.values, self.sizes = ts, keys, values, sizes

    def encode(self, start: int, stop: int, first_ts: int, spread: int, pool: BufferPool
               ) -> Tuple[bytearray, int]:
        """Rows ``start..stop-1`` as a v2 records region: ``(buffer, length)``.

        ``spread`` is the largest distance of a row's timestamp from ``first_ts``.
        """
        seg = self.sizes[start:stop]
        rows = stop - start
        widest = int(seg.max())
        # every varint at its widest in these rows: a tight bound, so buffers stay small
        per_row = 2 + _vsize(2 * spread) + _vsize(2 * rows) + 2 * _vsize(2 * widest) + \
            _vsize(2 * (widest + 64))
        bound = int(seg.sum()) + (per_row - RECORD_OVERHEAD) * rows
        buf = pool.get(bound)
        try:
            n = K.encode_columns_into(buf, 0, start, stop, self.ts, first_ts, self.keys,
                                      self.values)
        except BaseException:
            pool.put(buf)
            raise
        return buf, n


_COLUMNS = ("value", "key", "timestamp", "partition", "headers")


def is_arrow(data: Any) -> bool:
    mod = type(data).__module__
    return mod.startswith("pyarrow") and type(data).__name__ in ("Table", "RecordBatch")


def _vsize(n: int) -> int:
    """Bytes of ``n`` as an unsigned varint."""
    return max(1, -(-n.bit_length() // 7))


def _binary(arr, pa):
    """A binary (or large_binary) array over the same buffers (strings are UTF-8 already)."""
    t = arr.type
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return arr
    if pa.types.is_string(t):
        return arr.cast(pa.binary())
    if pa.types.is_large_string(t):
        return arr.cast(pa.large_binary())
    if pa.types.is_null(t):
        return None
    raise TypeError(f"a value or key column must be binary or string, not {t}")


def _column(arr, pa):
    """The kernel's view of a binary column: (validity, offsets, data, width, offset)."""
    if arr is None or arr.null_count == len(arr):
        return None
    validity, offsets, data = arr.buffers()
    width = 8 if pa.types.is_large_binary(arr.type) else 4
    return (validity if arr.null_count else None, offsets, data if data is not None else b"",
            width, arr.offset)


def _lengths(arr, np, pa):
    if arr is None:
        return None
    width = 8 if pa.types.is_large_binary(arr.type) else 4
    offs = np.frombuffer(arr.buffers()[1], dtype=np.int32 if width == 4 else np.int64)
    return np.diff(offs[arr.offset:arr.offset + len(arr) + 1])


def _cuts(sizes, start: int, stop: int, batch_size: int, np) -> Iterator[Tuple[int, int]]:
    """Split rows ``start..stop`` into runs of about ``batch_size`` bytes (at least one row)."""
    cum = np.cumsum(sizes[start:stop])
    i = 0
    n = stop - start
    base = 0
    while i < n:
        j = int(np.searchsorted(cum, base + batch_size, side="right"))
        j = max(j, i + 1)
        yield start + i, start + j
        base = int(cum[j - 1])
        i = j


def key_partitions(keys, num_partitions: int, np, pa):
    """Kafka's default partition of every non-null key (-1 for nulls), vectorised.

    murmur2 as Kafka's ``Utils.murmur2`` computes it, over the rows of each key
    length at once (numpy's uint32 arithmetic wraps as Java's int does).
    """
    m = np.uint32(0x5BD1E995)
    n = len(keys)
    out = np.full(n, -1, dtype=np.int32)
    lens = _lengths(keys, np, pa)
    width = 8 if pa.types.is_large_binary(keys.type) else 4
    offs = np.frombuffer(keys.buffers()[1], dtype=np.int32 if width == 4 else np.int64)
    starts = offs[keys.offset:keys.offset + n].astype(np.int64)
    data = np.frombuffer(keys.buffers()[2] or b"", dtype=np.uint8)
    valid = np.asarray(keys.is_valid())
    with np.errstate(over="ignore"):
        for length in np.unique(lens[valid]):
            rows = np.flatnonzero(valid & (lens == length))
            length = int(length)
            b = data[starts[rows, None] + np.arange(length)] if length else \
                np.zeros((len(rows), 0), dtype=np.uint8)
            h = np.full(len(rows), 0x9747B28C ^ length, dtype=np.uint32)
            whole = length & ~3
            for i in range(0, whole, 4):
                k = (b[:, i].astype(np.uint32) | (b[:, i + 1].astype(np.uint32) << 8)
                     | (b[:, i + 2].astype(np.uint32) << 16)
                     | (b[:, i + 3].astype(np.uint32) << 24))
                k = k * m
                k ^= k >> np.uint32(24)
                k = k * m
                h = (h * m) ^ k
            tail = length & 3
            if tail:
                if tail == 3:
                    h ^= b[:, whole + 2].astype(np.uint32) << np.uint32(16)
                if tail >= 2:
                    h ^= b[:, whole + 1].astype(np.uint32) << np.uint32(8)
                h ^= b[:, whole].astype(np.uint32)
                h = h * m
            h ^= h >> np.uint32(13)
            h = h * m
            h ^= h >> np.uint32(15)
            out[rows] = ((h & np.uint32(0x7FFFFFFF)) % np.uint32(num_partitions)).astype(np.int32)
    return out


def arrow_chunks(data: Any, num_partitions: int, batch_size: int, now_ms: int,
                 partition: Optional[int], key_partition: Callable[[bytes], int],
                 keyless_partition: Callable[[], int],
                 default_keys: bool = True) -> Optional[List[Chunk]]:
    """Encoded chunks of an Arrow table, or None when it has a headers column (rows path)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    unknown = [c for c in data.column_names if c not in _COLUMNS]
    if unknown:
        raise ValueError(f"send_batch: unknown column(s) {unknown}; use {', '.join(_COLUMNS)}")
    if "headers" in data.column_names and data.column("headers").null_count < data.num_rows:
        return None
    n = data.num_rows
    if n == 0:
        return []
    data = data.combine_chunks()

    def col(name):
        return data.column(name).chunk(0) if name in data.column_names else None

    values = _binary(col("value"), pa) if col("value") is not None else None
    keys = _binary(col("key"), pa) if col("key") is not None else None
    ts_arr = col("timestamp")
    if ts_arr is not None:
        if pa.types.is_timestamp(ts_arr.type):
            ts_arr = ts_arr.cast(pa.timestamp("ms")).cast(pa.int64())
        else:
            ts_arr = ts_arr.cast(pa.int64())
        if ts_arr.null_count:
            ts_arr = pc.fill_null(ts_arr, now_ms)
        ts = np.asarray(ts_arr)
    else:
        ts = None
    parts = None
    p_arr = col("partition")
    if p_arr is not None:
        if p_arr.null_count:
            raise ValueError("send_batch: the partition column has nulls")
        parts = np.asarray(p_arr.cast(pa.int32()))
    elif partition is not None:
        parts = None
    elif keys is not None and keys.null_count < n:
        if default_keys:
            parts = key_partitions(keys, num_partitions, np, pa)
        else:  # a custom partitioner: one call per key
            parts = np.array([key_partition(k) if k is not None else -1
                              for k in keys.to_pylist()], dtype=np.int32)
        if (parts < 0).any():
            parts[parts < 0] = keyless_partition()
    if parts is not None:
        if parts.size and (parts.min() < 0 or parts.max() >= num_partitions):
            bad = int(parts[(parts < 0) | (parts >= num_partitions)][0])
            raise ValueError(f"send_batch: partition {bad} is not in 0..{num_partitions - 1}")
        if parts.size > 1 and (np.diff(parts) < 0).any():
            order = np.argsort(parts, kind="stable")
            take = pa.array(order)
            values = values.take(take) if values is not None else None
            keys = keys.take(take) if keys is not None else None
            ts = ts[order] if ts is not None else None
            parts = parts[order]
    sizes = np.full(n, RECORD_OVERHEAD, dtype=np.int64)
    for arr in (values, keys):
        lens = _lengths(arr, np, pa)
        if lens is not None:
            sizes += lens
    if ts is not None:
        ts = np.ascontiguousarray(ts, dtype=np.int64)
    vcol, kcol = _column(values, pa), _column(keys, pa)
    if parts is None:
        groups = [(partition, 0, n)]
    else:
        edges = [0, *(np.flatnonzero(np.diff(parts)) + 1).tolist(), n]
        groups = [(int(parts[a]), a, b) for a, b in zip(edges, edges[1:])]
    out: List[Chunk] = []
    enc = ArrowEncoder(ts, kcol, vcol, sizes)
    for p, start, stop in groups:
        for a, b in _cuts(sizes, start, stop, batch_size, np):
            if ts is not None:
                seg = ts[a:b]
                first, top, low = int(ts[a]), int(seg.max()), int(seg.min())
                if top - first > _INT64_MAX or low - first < _INT64_MIN:
                    raise ValueError(f"send_batch: the timestamps of rows {a}..{b - 1} are too "
                                     "far apart for one batch (64-bit deltas)")
                spread = max(top - first, first - low)
            else:
                first = top = now_ms
                spread = 0
            out.append((p if p is not None else keyless_partition(), (enc, a, b, spread), None,
                        b - a, first, top, int(sizes[a:b].sum())))
    return out


def row_chunks(records: Sequence[Any], num_partitions: int, batch_size: int, now_ms: int,
               partition: Optional[int], key_partition: Callable[[bytes], int],
               keyless_partition: Callable[[], int]) -> List[Chunk]:
    """Chunks of Python records (bytes, (key, value), dicts, ProducerRecords), rows kept as lists."""
    by_part: dict = {}
    keyless = None
    for item in records:
        value, key, headers, ts, p = normalize_record(item)
        if p is None:
            p = partition
        if p is None:
            if key is not None:
                p = key_partition(key)
            if p is None or p < 0:
                if keyless is None:
                    keyless = keyless_partition()
                p = keyless
        if not 0 <= p < num_partitions:
            raise ValueError(f"send_batch: partition {p} is not in 0..{num_partitions - 1}")
        by_part.setdefault(p, []).append((value, key, list(headers) or None,
                                          now_ms if ts is None else int(ts)))
    out: List[Chunk] = []
    for p, rows in by_part.items():
        chunk: list = []
        size = 0
        for r in rows + [None]:
            n = 0 if r is None else RECORD_OVERHEAD + (len(r[0]) if r[0] is not None else 0) + \
                (len(r[1]) if r[1] is not None else 0) + \
                sum(len(k) + (len(v) if v is not None else 0) for k, v in (r[2] or ()))
            if chunk and (r is None or size + n > batch_size):
                vals, keys, hdrs, tss = zip(*[(c[0], c[1], c[2], c[3]) for c in chunk])
                out.append((p, None, (list(vals), list(keys), list(tss), list(hdrs)), len(chunk),
                            tss[0], max(tss), size))
                chunk, size = [], 0
            if r is not None:
                chunk.append(r)
                size += n
    return out
