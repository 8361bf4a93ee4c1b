"""Columnar decoding: record batches straight into Arrow-layout column buffers.

The record-object path (:func:`kafkawire.iter_batches` → ``Record``) creates
Python objects per record; this module instead decodes a buffer of
concatenated batches/messages (v2 batches and legacy v0/v1 messages, every
codec) into numpy arrays laid out as Arrow expects them, with no Python object
per record.  Memory stays bounded: the decoder yields :class:`ColumnChunk`\\ s of
at most ``max_records`` records and ``max_bytes`` bytes of records as framed in
their batches (a bound on the key, value and header data; a single larger
record still forms a chunk of its own).

Public API
----------
``iter_column_chunks(data, *, start=0, end=None, base_position=0,
max_records=65536, max_bytes=64 << 20, start_offset=None, end_offset=None,
include_headers=False, max_decompressed_size=None)``
    Returns a :class:`ColumnChunkIterator` (iterable of :class:`ColumnChunk`).
    ``data`` is any bytes-like buffer (bytes, bytearray, memoryview, mmap);
    ``[start, end)`` is the byte range to read; ``base_position`` is added to
    every reported position (the buffer's position in its file).
    ``start_offset`` (inclusive) / ``end_offset`` (exclusive) drop records
    outside ``[start_offset, end_offset)``; batches entirely before
    ``start_offset`` are skipped without decompression and decoding stops at
    the first batch whose base offset is ``>= end_offset`` (offsets in a log
    only grow).  A trailing partial batch ends iteration cleanly (as in
    :func:`kafkawire.iter_batches`); anything else malformed raises
    :class:`kafkawire.errors.CorruptRecordError` naming the position and offset.
    After (or during) iteration the iterator has ``partial_tail`` (None or the
    absolute byte position of a trailing partial batch) and ``stop_position``
    (absolute position where decoding stopped: end of data, partial tail, or
    the first batch at/after ``end_offset``), and ``next_offset`` (one past
    the last offset consumed, control batches included; None if nothing read).

``decode_columns(data, **same_keywords) -> ColumnChunk``
    The whole buffer as one chunk (``max_records``/``max_bytes`` default to
    unlimited, bounded by Arrow's 2 GiB binary limit).

``to_arrow(data, *, topic=None, partition=None, include_headers=False,
**same_keywords) -> pyarrow.Table``
    Convenience: every chunk's :meth:`ColumnChunk.to_arrow` in one Table.

ColumnChunk
-----------
``len(chunk)`` is the number of data records (control records are never
data).  Columns (numpy arrays, all of length ``n`` unless noted):

* ``offset`` int64, ``timestamp`` int64 (ms; LogAppendTime batches report the
  batch max timestamp, a legacy compressed wrapper's LogAppendTime wins),
  ``timestamp_type`` int32 (0 CreateTime, 1 LogAppendTime; -1 for magic 0
  which has no timestamp, timestamp then -1 as in Kafka).
* ``key_offsets`` int32 (n+1), ``key_data`` uint8, ``key_valid`` bool
  (False = null key); ``value_offsets``/``value_data``/``value_valid`` alike.
* ``producer_id`` int64 (-1 for non-idempotent and legacy records),
  ``is_transactional`` bool, ``batch_base_offset`` int64 (base offset of the
  record's batch; a v0/v1 record's own offset): per-record views, for
  read_committed filtering, computed on first use from the run columns
  ``run_start`` (row of each run's first record; a run = consecutive records
  of one batch), ``run_producer_id``, ``run_transactional``,
  ``run_base_offset``, which the kernel writes once per batch instead of
  once per record.
* Headers, only when ``include_headers``: ``header_offsets`` int32 (n+1;
  record i owns headers ``header_offsets[i]:header_offsets[i+1]``),
  ``header_valid`` bool (False when the record has no headers: Spark's Kafka
  source shows ``null`` there, not an empty array), and per header (length
  ``h``): ``header_key_offsets`` int32 (h+1) + ``header_key_data`` uint8
  (UTF-8, never null), ``header_value_offsets`` int32 (h+1),
  ``header_value_data`` uint8, ``header_value_valid`` bool.  Otherwise these
  attributes are None.
* Control records seen in the chunk's byte range (excluded from the data
  columns, as Spark never shows them): ``control_offset`` int64,
  ``control_producer_id`` int64, ``control_type`` int8 (0 abort, 1 commit),
  ``control_timestamp`` int64 (all of the same length ``len(chunk.control_offset)``).
* ``start_position`` / ``end_position``: absolute byte range the chunk covers
  (``end_position`` is where the next chunk resumes when a chunk ends at a
  batch boundary); ``next_offset``: one past the last offset consumed.

Methods:

* ``chunk.filter(mask) -> ColumnChunk``: keep rows where the bool array
  ``mask`` (length n) is true (copies; control arrays are kept as they are).
* ``chunk.to_arrow(include_headers=None, topic=None, partition=None)
  -> pyarrow.RecordBatch``: zero-copy over the chunk's buffers (key/value
  offsets, data and validity are shared with the numpy arrays).  With
  ``topic`` and ``partition`` given, the schema is exactly Spark's Kafka
  source: ``key binary, value binary, topic string, partition int32,
  offset int64, timestamp timestamp[us, tz=UTC], timestampType int32``
  [+ ``headers list<struct<key: string, value: binary>>``], every field
  nullable.  Without them the ``topic``/``partition`` columns are omitted.
  ``include_headers=None`` means "if the chunk has headers".
* ``chunk.to_numpy() -> dict[str, numpy.ndarray]``: every column above by
  name (works without pyarrow).

Everything per record happens in the kernels ``K.ColumnBuilder``,
``K.columnar_scan``, ``K.columnar_payload_info`` and ``K.columnar_payload``
(``kafkawire/_fast/columnar.pyx`` and its pure twin); this module only loops
over chunks and hands compressed payloads to
:func:`kafkawire.compression.decompress`.
"""
from __future__ import annotations

__all__ = ["ColumnChunk", "ColumnChunkIterator", "iter_column_chunks", "decode_columns",
           "to_arrow", "arrow_schema"]

from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Tuple

import numpy as np

from kafkawire import _format as F
from kafkawire._deps import require
from kafkawire import _columnar_common as _C
from kafkawire import compression
from kafkawire import _kernels as K
from kafkawire.errors import CorruptRecordError, KafkaWireError

_CODEC_NAMES = F.CODEC_NAMES


class ColumnChunk:
    """Decoded records of one chunk as numpy columns (see the module docstring)."""

    __slots__ = _C.COLUMN_NAMES + ("start_position", "end_position", "next_offset", "has_headers",
                                   "_per_record")

    if TYPE_CHECKING:
        # The columns (``kafkawire._columnar_common.COLUMNS``), set in ``__init__``.
        offset: np.ndarray
        timestamp: np.ndarray
        timestamp_type: np.ndarray
        key_offsets: np.ndarray
        key_data: np.ndarray
        key_valid: np.ndarray
        value_offsets: np.ndarray
        value_data: np.ndarray
        value_valid: np.ndarray
        run_start: np.ndarray
        run_transactional: np.ndarray
        run_base_offset: np.ndarray
        control_offset: np.ndarray
        control_producer_id: np.ndarray
        control_type: np.ndarray
        control_timestamp: np.ndarray
        run_producer_id: np.ndarray
        # These are None when the chunk was decoded without headers (``has_headers``
        # False); typed as arrays since every use checks ``has_headers`` first.
        header_offsets: np.ndarray
        header_valid: np.ndarray
        header_key_offsets: np.ndarray
        header_key_data: np.ndarray
        header_value_offsets: np.ndarray
        header_value_data: np.ndarray
        header_value_valid: np.ndarray

    def __init__(self, columns: Dict[str, Optional[np.ndarray]], *, start_position: int = 0,
                 end_position: int = 0, next_offset: Optional[int] = None) -> None:
        for name in _C.COLUMN_NAMES:
            setattr(self, name, columns[name])
        self.has_headers = columns["header_offsets"] is not None
        self._per_record: Dict[str, np.ndarray] = {}
        self.start_position = start_position
        self.end_position = end_position
        self.next_offset = next_offset

    def __len__(self) -> int:
        return len(self.offset)

    # Per-batch facts are stored once per run of records from one batch
    # (``run_*`` columns); these expand them to one value per record on use.
    def _expand(self, name: str) -> np.ndarray:
        got = self._per_record.get(name)
        if got is None:
            counts = np.diff(np.append(self.run_start, len(self)))
            got = np.repeat(getattr(self, name), counts)
            self._per_record[name] = got
        return got

    @property
    def producer_id(self) -> np.ndarray:
        """int64 per record: its batch's producer id (-1 for legacy and non-idempotent)."""
        return self._expand("run_producer_id")

    @property
    def is_transactional(self) -> np.ndarray:
        """bool per record: whether its batch is transactional."""
        return self._expand("run_transactional")

    @property
    def batch_base_offset(self) -> np.ndarray:
        """int64 per record: its batch's base offset (the record's own offset for v0/v1)."""
        return self._expand("run_base_offset")

    def __repr__(self) -> str:
        first = int(self.offset[0]) if len(self) else None
        last = int(self.offset[-1]) if len(self) else None
        return (f"<ColumnChunk {len(self)} records, offsets {first}..{last}, "
                f"positions {self.start_position}..{self.end_position}>")

    @classmethod
    def empty(cls, include_headers: bool = False, position: int = 0,
              next_offset: Optional[int] = None) -> "ColumnChunk":
        """A chunk with no records."""
        cols: Dict[str, Optional[np.ndarray]] = {}
        for name, dtype, group in _C.COLUMNS:
            if group.startswith("hdr") and not include_headers:
                cols[name] = None
            else:
                size = 1 if name in _C.OFFSET_COLUMNS else 0
                cols[name] = np.zeros(size, dtype=dtype)
        return cls(cols, start_position=position, end_position=position, next_offset=next_offset)

    def with_end(self, end_position: int) -> "ColumnChunk":
        self.end_position = end_position
        return self

    def to_numpy(self) -> Dict[str, Optional[np.ndarray]]:
        """Every column by name (header columns None unless decoded with headers)."""
        out = {name: getattr(self, name) for name in _C.COLUMN_NAMES}
        out.update(producer_id=self.producer_id, is_transactional=self.is_transactional,
                   batch_base_offset=self.batch_base_offset)
        return out

    def keys(self) -> List[Optional[bytes]]:
        """Keys as a list of ``bytes | None`` (convenience; creates objects)."""
        return _binary_list(self.key_offsets, self.key_data, self.key_valid)

    def values(self) -> List[Optional[bytes]]:
        """Values as a list of ``bytes | None`` (convenience; creates objects)."""
        return _binary_list(self.value_offsets, self.value_data, self.value_valid)

    def headers(self) -> List[List[Tuple[str, Optional[bytes]]]]:
        """Per record a list of ``(str, bytes | None)`` (empty when absent); convenience."""
        if not self.has_headers:
            raise ValueError("this chunk was decoded without headers; pass include_headers=True")
        hk = [bytes(k or b"").decode("utf-8", "replace") for k in
              _binary_list(self.header_key_offsets, self.header_key_data, None)]
        hv = _binary_list(self.header_value_offsets, self.header_value_data, self.header_value_valid)
        ho = self.header_offsets.tolist()
        return [list(zip(hk[ho[i]:ho[i + 1]], hv[ho[i]:ho[i + 1]])) for i in range(len(self))]

    def filter(self, mask: Any) -> "ColumnChunk":
        """A new chunk with the rows where the boolean ``mask`` is true (copies)."""
        mask = np.asarray(mask, dtype=bool)
        if mask.shape != (len(self),):
            raise ValueError(f"mask must be a bool array of length {len(self)}, got shape {mask.shape}")
        cols: Dict[str, Optional[np.ndarray]] = {}
        for name, _dtype, group in _C.COLUMNS:
            arr = getattr(self, name)
            if group == "rec" or group == "hdr-rec":
                cols[name] = None if arr is None else arr[mask]
            elif group == "ctl":
                cols[name] = arr
        kept = int(np.count_nonzero(mask))
        cols["run_start"] = np.arange(kept, dtype=np.int64)
        cols["run_producer_id"] = self.producer_id[mask]
        cols["run_transactional"] = self.is_transactional[mask]
        cols["run_base_offset"] = self.batch_base_offset[mask]
        cols["key_offsets"], cols["key_data"] = _take_binary(self.key_offsets, self.key_data, mask)
        cols["value_offsets"], cols["value_data"] = _take_binary(self.value_offsets, self.value_data, mask)
        if self.has_headers:
            ho = self.header_offsets.astype(np.int64)
            counts = np.diff(ho)
            hmask = np.repeat(mask, counts)
            cols["header_offsets"] = _offsets_from_lengths(counts[mask])
            cols["header_key_offsets"], cols["header_key_data"] = _take_binary(
                self.header_key_offsets, self.header_key_data, hmask)
            cols["header_value_offsets"], cols["header_value_data"] = _take_binary(
                self.header_value_offsets, self.header_value_data, hmask)
            cols["header_value_valid"] = self.header_value_valid[hmask]
        else:
            for name in _C.HEADER_COLUMNS:
                cols[name] = None
        return ColumnChunk(cols, start_position=self.start_position,
                           end_position=self.end_position, next_offset=self.next_offset)

    def to_arrow(self, include_headers: Optional[bool] = None, topic: Optional[str] = None,
                 partition: Optional[int] = None, *, last_use: bool = False,
                 where: Optional[Tuple[Any, Any]] = None) -> "Any":
        """A ``pyarrow.RecordBatch`` sharing this chunk's buffers (Spark's Kafka schema).

        ``topic``/``partition`` add those constant columns (both or neither), or ``where``
        gives them as Arrow arrays (rows of several partitions); ``include_headers``
        defaults to whether the chunk has headers.  ``last_use``: nothing reads this chunk
        afterwards, so its timestamps become Arrow's microseconds in place, not in a copy.
        """
        pa = require("pyarrow", "spark", "Arrow output")

        if (topic is None) != (partition is None):
            raise ValueError("give both topic and partition, or neither")
        if include_headers is None:
            include_headers = self.has_headers
        if include_headers and not self.has_headers:
            raise ValueError("this chunk was decoded without headers; decode with include_headers=True")
        n = len(self)
        binary, int64, timestamp, int32 = _arrow_types(pa)
        arrays = [
            _arrow_binary(pa, binary, n, self.key_offsets, self.key_data, self.key_valid),
            _arrow_binary(pa, binary, n, self.value_offsets, self.value_data, self.value_valid),
        ]
        if where is not None:
            arrays.extend(where)
        elif topic is not None and partition is not None:
            arrays.extend(_constant_columns(pa, topic, partition, n))
        arrays.append(pa.Array.from_buffers(int64, n, [None, pa.py_buffer(self.offset)]))
        micros = np.multiply(self.timestamp, 1000, out=self.timestamp if last_use else None)
        arrays.append(pa.Array.from_buffers(timestamp, n, [None, pa.py_buffer(micros)]))
        arrays.append(pa.Array.from_buffers(int32, n, [None, pa.py_buffer(self.timestamp_type)]))
        if include_headers:
            arrays.append(self._arrow_headers(pa))
        return pa.RecordBatch.from_arrays(
            arrays, schema=arrow_schema(include_headers=include_headers,
                                        with_topic=topic is not None or where is not None))

    def _arrow_headers(self, pa: Any) -> Any:
        h = len(self.header_value_valid)
        keys = _arrow_binary(pa, pa.string(), h, self.header_key_offsets, self.header_key_data, None)
        values = _arrow_binary(pa, pa.binary(), h, self.header_value_offsets, self.header_value_data,
                               self.header_value_valid)
        struct_type = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
        structs = pa.Array.from_buffers(struct_type, h, [None], children=[keys, values])
        n = len(self)
        validity, nulls = _validity(pa, self.header_valid, n)
        return pa.Array.from_buffers(_headers_type(pa), n, [validity, pa.py_buffer(self.header_offsets)],
                                     null_count=nulls, children=[structs])


def _headers_type(pa: Any) -> Any:
    struct_type = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
    return pa.list_(pa.field("element", struct_type))


def arrow_schema(include_headers: bool = False, with_topic: bool = True) -> "Any":
    """The Arrow schema of :meth:`ColumnChunk.to_arrow`: Spark's Kafka source schema.

    Equal to ``pyspark``'s ``to_arrow_schema(kafka schema, timezone="UTC")``:
    every field nullable, ``binary`` (not ``large_binary``), ``timestamp[us, UTC]``,
    headers as ``list<element: struct<key: string, value: binary>>``.
    """
    key = (bool(include_headers), bool(with_topic))
    got = _SCHEMAS.get(key)   # schemas are immutable: one of each, made once
    if got is None:
        pa = require("pyarrow", "spark", "Arrow output")
        fields = [pa.field("key", pa.binary()), pa.field("value", pa.binary())]
        if with_topic:
            fields += [pa.field("topic", pa.string()), pa.field("partition", pa.int32())]
        fields += [pa.field("offset", pa.int64()),
                   pa.field("timestamp", pa.timestamp("us", tz="UTC")),
                   pa.field("timestampType", pa.int32())]
        if include_headers:
            fields.append(pa.field("headers", _headers_type(pa)))
        got = _SCHEMAS[key] = pa.schema(fields)
    return got


_SCHEMAS: Dict[Tuple[bool, bool], Any] = {}
_TYPES: List[Any] = []


def _arrow_types(pa: Any) -> Tuple[Any, Any, Any, Any]:
    """Arrow's binary, int64, timestamp[us, UTC] and int32 types, made once (every batch
    needs them, and making the timestamp type parses its unit and zone)."""
    if not _TYPES:
        _TYPES[:] = [pa.binary(), pa.int64(), pa.timestamp("us", tz="UTC"), pa.int32()]
    return _TYPES[0], _TYPES[1], _TYPES[2], _TYPES[3]


def _validity(pa: Any, valid: Optional[np.ndarray], n: int) -> Tuple[Any, int]:
    if valid is None:
        return None, 0
    nulls = n - int(np.count_nonzero(valid))
    if nulls == 0:
        return None, 0
    return pa.py_buffer(np.packbits(valid, bitorder="little")), nulls


def _arrow_binary(pa: Any, typ: Any, n: int, offsets: np.ndarray, data: np.ndarray,
                  valid: Optional[np.ndarray]) -> Any:
    validity, nulls = _validity(pa, valid, n)
    return pa.Array.from_buffers(typ, n, [validity, pa.py_buffer(offsets), pa.py_buffer(data)],
                                 null_count=nulls)


_CONSTANTS: Dict[Tuple[str, Any], Any] = {}


def _constant_columns(pa: Any, topic: str, partition: int, n: int) -> Tuple[Any, Any]:
    """The topic and partition columns of ``n`` rows: slices of longer constant arrays kept
    per topic and partition (Arrow arrays are immutable, and slicing copies nothing)."""
    def partitions(k: int) -> Any:
        return pa.Array.from_buffers(pa.int32(), k,
                                     [None, pa.py_buffer(np.full(k, partition, dtype=np.int32))])
    return topic_column(topic, n), _constant(pa, (topic, partition), n, partitions)


def constant_columns(topic: str, partition: int, n: int) -> Tuple[Any, Any]:
    """Arrow topic and partition columns of ``n`` rows of one partition (slices of arrays kept
    per topic and partition, as :func:`topic_column`)."""
    return _constant_columns(require("pyarrow", "spark", "Arrow output"), topic, partition, n)


def topic_column(topic: str, n: int) -> Any:
    """An Arrow string column of ``n`` rows of ``topic``: a slice of one kept per topic, so
    the batches of a topic share it instead of each writing the name ``n`` times."""
    pa = require("pyarrow", "spark", "Arrow output")
    return _constant(pa, (topic, None), n, lambda k: _constant_string(pa, topic, k))


def _constant(pa: Any, key: Tuple[str, Any], n: int, make: Any) -> Any:
    got = _CONSTANTS.get(key)
    if got is None or len(got) < n:
        # some room for the next, longer batch, within a bound (chunks can be huge)
        cap = max(n, min(2 * len(got) if got is not None else 1024, 1 << 16))
        if len(_CONSTANTS) >= 64:
            _CONSTANTS.clear()
        try:
            got = make(cap)
        except ValueError:   # a long topic name: no room beyond n within Arrow's limit
            got = make(n)
        _CONSTANTS[key] = got
    return got if len(got) == n else got.slice(0, n)


def _constant_string(pa: Any, text: str, n: int) -> Any:
    raw = text.encode("utf-8")
    if len(raw) * n > _C.MAX_CHUNK_BYTES:
        raise ValueError("topic column would exceed Arrow's 2 GiB string limit; use smaller chunks")
    offsets = np.arange(n + 1, dtype=np.int32) * np.int32(len(raw))
    data = np.frombuffer(raw * n, dtype=np.uint8) if n and raw else np.zeros(0, np.uint8)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _offsets_from_lengths(lengths: np.ndarray) -> np.ndarray:
    out = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=out[1:])
    if out[-1] > _C.MAX_CHUNK_BYTES:
        raise ValueError("column exceeds Arrow's 2 GiB binary limit")
    return out.astype(np.int32)


def _take_binary(offsets: np.ndarray, data: np.ndarray,
                 mask: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    starts = offsets[:-1].astype(np.int64)[mask]
    ends = offsets[1:].astype(np.int64)[mask]
    lengths = ends - starts
    new_offsets = _offsets_from_lengths(lengths)
    if len(starts) == 0 or new_offsets[-1] == 0:
        return new_offsets, np.zeros(0, dtype=np.uint8)
    # Byte index of every kept byte: its run's start plus its position in the run.
    run_of_byte = np.repeat(np.arange(len(starts)), lengths)
    idx = starts[run_of_byte] + (np.arange(int(new_offsets[-1])) - new_offsets[:-1][run_of_byte])
    return new_offsets, data[idx]


def _binary_list(offsets: np.ndarray, data: np.ndarray,
                 valid: Optional[np.ndarray]) -> List[Optional[bytes]]:
    raw = data.tobytes()
    o = offsets.tolist()
    if valid is None:
        return [raw[o[i]:o[i + 1]] for i in range(len(o) - 1)]
    v = valid.tolist()
    return [raw[o[i]:o[i + 1]] if v[i] else None for i in range(len(o) - 1)]


def _decompress(codec: int, payload: Any, magic: int, max_size: Optional[int]) -> bytes:
    return compression.decompress(codec, payload, magic=magic, max_size=max_size)


def _as_bytes_view(data: Any) -> memoryview:
    view = data if isinstance(data, memoryview) else memoryview(data)
    if view.ndim != 1 or not view.c_contiguous:
        raise ValueError("data must be a contiguous one-dimensional bytes-like buffer")
    if view.format != "B":
        view = view.cast("B")
    return view


class ColumnChunkIterator:
    """Iterates :class:`ColumnChunk`\\ s; see :func:`iter_column_chunks`.

    ``partial_tail``, ``stop_position`` and ``next_offset`` are set as decoding
    proceeds (absolute positions, i.e. including ``base_position``).
    """

    def __init__(self, data: Any, *, start: int = 0, end: Optional[int] = None,
                 base_position: int = 0, max_records: int = 65536, max_bytes: int = 64 << 20,
                 start_offset: Optional[int] = None, end_offset: Optional[int] = None,
                 include_headers: bool = False, max_decompressed_size: Optional[int] = None,
                 builder: Any = None, last_chunk: bool = True) -> None:
        self._view: Any = _as_bytes_view(data)     # a memoryview; None once iteration ends
        n = len(self._view)
        self._end = n if end is None else end
        if not 0 <= start <= self._end <= n:
            raise ValueError(f"start={start}, end={end} is not a range inside the {n}-byte buffer")
        self._start = start
        self._base = base_position
        self._include_headers = bool(include_headers)
        self._max_decompressed = max_decompressed_size
        # a caller decoding one range in pieces (blocks of ranged reads) passes one builder to
        # the iterator of each piece with last_chunk=False: rows carry over to the next piece,
        # so the chunks come out as large as from one buffer
        self._builder = builder if builder is not None else K.ColumnBuilder(
            self._include_headers, max_records, min(max_bytes, _C.MAX_CHUNK_BYTES),
            start_offset, end_offset)
        self._last_chunk = last_chunk
        self.partial_tail: Optional[int] = None
        self.stop_position: Optional[int] = None
        self.next_offset: Optional[int] = None
        self._gen = self._run()

    def __iter__(self) -> "ColumnChunkIterator":
        return self

    def __next__(self) -> ColumnChunk:
        return next(self._gen)

    def _chunk(self, start: int, end: int) -> ColumnChunk:
        b = self._builder
        self.next_offset = b.next_offset
        return ColumnChunk(b.take(), start_position=self._base + start,
                           end_position=self._base + end, next_offset=b.next_offset)

    def _relocated(self, exc: KafkaWireError, pos: int) -> KafkaWireError:
        return _relocated(exc, pos, self._base)

    def _run(self) -> Iterator[ColumnChunk]:
        try:
            yield from self._decode()
        finally:
            # Let an mmap be closed once iteration ends (chunks never reference the input).
            self._view = None

    def _decode(self) -> Iterator[ColumnChunk]:
        view, b, base = self._view, self._builder, self._base
        pos, end = self._start, self._end
        chunk_start = pos
        ri = rp = 0
        while True:
            try:
                status, pos, ri, rp = K.columnar_scan(b, view, pos, end, ri, rp)
            except KafkaWireError as exc:
                raise self._relocated(exc, pos) from None
            if status == _C.FULL:
                yield self._chunk(chunk_start, pos)
                chunk_start = pos
                continue
            if status == _C.COMPRESSED:
                nxt, payload = self._inflate(pos)
                pri = prp = 0
                while True:
                    try:
                        status, pri, prp = K.columnar_payload(b, view, pos, payload, pri, prp)
                    except KafkaWireError as exc:
                        raise self._relocated(exc, pos) from None
                    if status != _C.FULL:
                        break
                    yield self._chunk(chunk_start, pos)
                    chunk_start = pos
                pos, ri, rp = nxt, 0, 0
                continue
            if status == _C.PARTIAL:
                self.partial_tail = base + pos
            self.stop_position = base + pos
            break
        if not self._last_chunk:
            return
        last = self._chunk(chunk_start, pos)
        if len(last) or len(last.control_offset):
            yield last

    def _inflate(self, pos: int) -> Tuple[int, bytes]:
        view = self._view
        try:
            magic, codec, ps, pe, nxt = K.columnar_payload_info(view, pos)
            try:
                payload = _decompress(codec, view[ps:pe], magic, self._max_decompressed)
            except KafkaWireError:
                raise
            except Exception as exc:  # codec libraries raise their own types on bad input
                raise CorruptRecordError(
                    f"cannot decompress {_codec_name(codec)} batch: {exc}", position=pos,
                    reason="compression") from None
        except KafkaWireError as exc:
            raise self._relocated(exc, pos) from None
        return nxt, payload


def _relocated(exc: KafkaWireError, pos: int, base: int) -> KafkaWireError:
    """``exc`` from decoding at ``pos`` of a buffer that starts at ``base``, with positions
    counted from the start of the input (errors without one name the batch at ``pos``)."""
    if isinstance(exc, CorruptRecordError):
        if exc.position is None or exc.reason in ("too_large", "compression"):
            return type(exc)(exc.message, position=base + pos, offset=exc.offset,
                             reason=exc.reason, path=exc.path)
        return exc.at(position_delta=base)
    return exc


def scan_columns(builder: Any, data: Any, pos: int = 0, rec_index: int = 0,
                 rec_pos: int = 0) -> Tuple[int, int, int, int]:
    """Decode the uncompressed batches of ``data`` from ``pos`` into ``builder`` until the data
    ends or the builder is full; ``(status, pos, rec_index, rec_pos)`` as
    ``columnar_scan`` returns them (after FULL, call again with them to go on).

    For callers that stop and resume inside one buffer (a consumer poll's row limit);
    compressed batches are not inflated here (status COMPRESSED).
    """
    view = _as_bytes_view(data)
    try:
        return K.columnar_scan(builder, view, pos, len(view), rec_index, rec_pos)
    except KafkaWireError as exc:
        raise _relocated(exc, pos, 0) from None


def _codec_name(codec: int) -> str:
    return _CODEC_NAMES[codec] if 0 <= codec < len(_CODEC_NAMES) else f"codec {codec}"


def iter_column_chunks(data: Any, *, start: int = 0, end: Optional[int] = None,
                       base_position: int = 0, max_records: int = 65536,
                       max_bytes: int = 64 << 20, start_offset: Optional[int] = None,
                       end_offset: Optional[int] = None, include_headers: bool = False,
                       max_decompressed_size: Optional[int] = None) -> ColumnChunkIterator:
    """Decode ``data[start:end]`` into bounded :class:`ColumnChunk`\\ s (see the module docstring)."""
    return ColumnChunkIterator(data, start=start, end=end, base_position=base_position,
                               max_records=max_records, max_bytes=max_bytes,
                               start_offset=start_offset, end_offset=end_offset,
                               include_headers=include_headers,
                               max_decompressed_size=max_decompressed_size)


def decode_columns(data: Any, *, start: int = 0, end: Optional[int] = None,
                   base_position: int = 0, max_records: int = (1 << 63) - 1,
                   max_bytes: int = _C.MAX_CHUNK_BYTES, start_offset: Optional[int] = None,
                   end_offset: Optional[int] = None, include_headers: bool = False,
                   max_decompressed_size: Optional[int] = None) -> ColumnChunk:
    """Decode the whole range as one chunk; raises ValueError if it exceeds the chunk limits."""
    it = iter_column_chunks(data, start=start, end=end, base_position=base_position,
                            max_records=max_records, max_bytes=max_bytes,
                            start_offset=start_offset, end_offset=end_offset,
                            include_headers=include_headers,
                            max_decompressed_size=max_decompressed_size)
    chunks = list(it)
    if len(chunks) > 1:
        raise ValueError("the data does not fit one chunk (2 GiB of keys and values or max_records); "
                         "use iter_column_chunks")
    if chunks:
        return chunks[0]
    stop = it.stop_position if it.stop_position is not None else base_position + start
    return ColumnChunk.empty(include_headers, base_position + start, it.next_offset).with_end(stop)


def to_arrow(data: Any, *, topic: Optional[str] = None, partition: Optional[int] = None,
             include_headers: bool = False, **kwargs: Any) -> "Any":
    """All records of ``data`` as one ``pyarrow.Table`` (chunks become record batches)."""
    pa = require("pyarrow", "spark", "Arrow output")

    batches = [chunk.to_arrow(include_headers=include_headers, topic=topic, partition=partition)
               for chunk in iter_column_chunks(data, include_headers=include_headers, **kwargs)]
    return pa.Table.from_batches(batches, schema=arrow_schema(include_headers=include_headers,
                                                              with_topic=topic is not None))
