"""Reference rows for the columnar tests: the record-object path, and a chunk as rows."""
from __future__ import annotations

import kafkawire
from kafkawire import _kernels
from kafkawire.records.columnar import ColumnChunk

TS_TYPE = {"CreateTime": 0, "LogAppendTime": 1, "NoTimestampType": -1}


def records_of(data, **kw):
    """Reference rows from the record-object path: one tuple per data record.

    The reference always runs on the pure kernels (the plainest code), so a
    bug in the compiled record decoder cannot hide one in the columnar one.
    """
    previous = _kernels.backend
    _kernels.use("pure")
    try:
        return _records_of(data, **kw)
    finally:
        _kernels.use(previous)


def _records_of(data, **kw):
    rows = []
    for batch in kafkawire.iter_batches(data, **kw):
        if batch.is_control:
            continue
        for r in batch:
            headers = [(k, v) for k, v in (r.headers or [])]
            rows.append((r.offset, r.timestamp, TS_TYPE[r.timestamp_type], r.key, r.value,
                         headers, batch.producer_id if batch.magic == 2 else -1,
                         bool(batch.is_transactional), batch.base_offset if batch.magic == 2 else r.offset))
    return rows


def rows_of(chunk: ColumnChunk):
    n = len(chunk)
    headers = chunk.headers() if chunk.has_headers else [[] for _ in range(n)]
    return list(zip(chunk.offset.tolist(), chunk.timestamp.tolist(), chunk.timestamp_type.tolist(),
                    chunk.keys(), chunk.values(), headers, chunk.producer_id.tolist(),
                    chunk.is_transactional.tolist(), chunk.batch_base_offset.tolist()))
