"""Columnar decoding: record batches straight into Arrow-layout column buffers.

The record-object path (:func:`kafkawire.iter_batches` → ``Record``) creates
Python objects per record; this module instead decodes a buffer of
concatenated batches/messages (v2 batches and legacy v0/v1 messages, every
codec) into numpy arrays laid out as Arrow expects them, with no Python object
per record.  Memory stays bounded: the decoder yields :class:`ColumnChunk`\\ s of
at most ``max_records`` records and ``max_bytes`` key+value+header bytes.

Public API
----------
``iter_column_chunks(data, *, start=0, end=None, base_position=0,
max_records=65536, max_bytes=64 << 20, start_offset=None, end_offset=None,
include_headers=False, max_decompressed_size=None, verify_crc=False)``
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
  record's batch; for read_committed filtering).
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

Everything per record happens in the kernels ``K.ColumnBuilder`` /
``K.columnar_decode_*`` (``kafkawire/_fast/columnar.pyx`` and its pure twin);
this module only loops over chunks and hands compressed payloads to
:func:`kafkawire.compression.decompress`.
"""
from __future__ import annotations

__all__ = ["ColumnChunk", "ColumnChunkIterator", "iter_column_chunks", "decode_columns",
           "to_arrow"]
