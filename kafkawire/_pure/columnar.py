"""Pure-Python twin of the columnar decode kernel (``kafkawire/_fast/columnar.pyx``).

Same names, signatures and results; columns are grown in ``bytearray``\\ s and
handed to numpy with ``np.frombuffer`` (no copy).
"""
from __future__ import annotations

import struct
from array import array
from typing import Any, Dict, Optional, Tuple

import numpy as np

from kafkawire import _columnar_common as _C
from kafkawire._pure import framing as _W
from kafkawire._pure.wire import wrap64
from kafkawire.errors import CorruptRecordError

__all__ = ["ColumnBuilder", "columnar_scan", "columnar_payload_info", "columnar_payload"]

_Q = struct.Struct(">q")
_I = struct.Struct(">i")
_H = struct.Struct(">h")
_V2 = struct.Struct(">qiibIhiqqqhii")

(_OFFSET, _TS, _TSTYPE, _KOFF, _KDATA, _KVALID, _VOFF, _VDATA, _VVALID, _RSTART, _RTXN, _RBASE,
 _HOFF, _HVALID, _HKOFF, _HKDATA, _HVOFF, _HVDATA, _HVVALID, _COFF, _CPID, _CTYPE, _CTS,
 _RPID) = range(24)


class _Corrupt(Exception):
    def __init__(self, pos: int, reason: str, msg: str, offset: Optional[int] = None) -> None:
        super().__init__(msg)
        self.args2 = (pos, reason, msg, offset)


_TYPECODES = {"int64": "q", "int32": "i", "bool": "B", "int8": "b"}
assert array("q").itemsize == 8 and array("i").itemsize == 4


class ColumnBuilder:
    """Growable column buffers filled by :func:`columnar_scan`/:func:`columnar_payload`."""

    def __init__(self, include_headers: bool = False, max_records: int = 65536,
                 max_bytes: int = 64 << 20, start_offset: Optional[int] = None,
                 end_offset: Optional[int] = None) -> None:
        if max_records < 1 or max_bytes < 1:
            raise ValueError("max_records and max_bytes must be at least 1")
        if max_bytes > _C.MAX_CHUNK_BYTES:
            raise ValueError(f"max_bytes must be below 2 GiB ({_C.MAX_CHUNK_BYTES}), Arrow's binary limit")
        self.include_headers = bool(include_headers)
        self.max_records = max_records
        self.max_bytes = max_bytes
        self.start_offset = _C.INT64_MIN if start_offset is None else start_offset
        self.end_offset = _C.INT64_MAX if end_offset is None else end_offset
        self._next: Optional[int] = None
        self._reset()

    def _reset(self) -> None:
        self.cols = [bytearray() if dtype == "uint8" else array(_TYPECODES[dtype])
                     for _name, dtype, _group in _C.COLUMNS]
        for k in (_KOFF, _VOFF, _HOFF, _HKOFF, _HVOFF):
            self.cols[k].append(0)
        self.n = 0
        self.nh = 0
        self._data_bytes = 0

    def __len__(self) -> int:
        return self.n

    @property
    def data_bytes(self) -> int:
        """Record bytes (as framed on the wire) appended to this chunk."""
        return self._data_bytes

    @property
    def next_offset(self) -> Optional[int]:
        """One past the last offset consumed (control and skipped batches included), or None."""
        return self._next

    def take(self) -> Dict[str, Optional[np.ndarray]]:
        """Return this chunk's columns as ``{name: numpy array}`` and start an empty chunk."""
        out: Dict[str, Optional[np.ndarray]] = {}
        for k, (name, dtype, group) in enumerate(_C.COLUMNS):
            if group.startswith("hdr") and not self.include_headers:
                out[name] = None
            else:
                out[name] = np.frombuffer(self.cols[k], dtype=dtype) if self.cols[k] else \
                    np.empty(0, dtype=dtype)
        self._reset()
        return out

    def take_arrow(self, schema: Any, topic: Any, partition: Any) -> Any:
        """Return this chunk's rows as one ``pyarrow.RecordBatch`` of ``schema`` (Spark's Kafka
        schema with topic and partition, no headers) and start an empty chunk; ``topic`` and
        ``partition`` are those columns as Arrow arrays, one value per row."""
        if self.include_headers:
            raise ValueError("take_arrow makes batches without headers; use take() for headers")
        if len(topic) != self.n or len(partition) != self.n:
            raise ValueError(f"topic and partition columns need {self.n} rows, not "
                             f"{len(topic)} and {len(partition)}")
        from kafkawire.records.columnar import ColumnChunk   # cycle: it imports the kernels
        batch = ColumnChunk(self.take()).to_arrow(False, last_use=True,
                                                  where=(topic, partition))
        if not batch.schema.equals(schema):
            raise ValueError(f"the batch's schema is {batch.schema}, not {schema}")
        return batch

    # -- helpers used by the decode functions --
    def _run(self, pid: int, txn: int, base: int) -> None:
        c = self.cols
        c[_RSTART].append(self.n)
        c[_RPID].append(pid)
        c[_RTXN].append(txn)
        c[_RBASE].append(base)

    def _bump(self, nxt: int) -> None:
        nxt &= (1 << 64) - 1
        if nxt >= 1 << 63:
            nxt -= 1 << 64
        if self._next is None or nxt > self._next:
            self._next = nxt

    def _full(self, size: int) -> bool:
        return self.n >= self.max_records or (self.n > 0 and self._data_bytes + size > self.max_bytes)

    def _push(self, offset: int, ts: int, ts_type: int, key: Optional[bytes], value: Optional[bytes],
              pid: int, txn: int, base: int, size: int, run: bool = True) -> None:
        c = self.cols
        c[_OFFSET].append(offset)
        c[_TS].append(ts)
        c[_TSTYPE].append(ts_type)
        if key is not None:
            c[_KDATA] += key
        c[_KVALID].append(key is not None)
        c[_KOFF].append(len(c[_KDATA]))
        if value is not None:
            c[_VDATA] += value
        c[_VVALID].append(value is not None)
        c[_VOFF].append(len(c[_VDATA]))
        if run:
            self._run(pid, txn, base)
        self.n += 1
        self._data_bytes += size


#: How this decoder reports each fault of the record walker: (reason, message).
_FAULTS = {
    _W.VARINT: ("truncated", "record truncated inside a varint"),
    _W.PAST_END: ("truncated", "record length is negative or runs past its batch"),
    _W.KEY_LENGTH: ("length", "record key length is invalid"),
    _W.KEY_PAST: ("length", "record key length is invalid"),
    _W.VALUE_LENGTH: ("length", "record value length is invalid"),
    _W.VALUE_PAST: ("length", "record value length is invalid"),
    _W.HEADER_COUNT: ("length", "record header count is invalid"),
    _W.HKEY_LENGTH: ("length", "header key length is invalid"),
    _W.HVALUE_LENGTH: ("length", "header value length is invalid"),
    _W.HVALUE_PAST: ("length", "header value length is invalid"),
    _W.FIELDS: ("length", "record length does not match its fields"),
}


def _record_error(fault: "_W.RecordFault", here: int, base_offset: int) -> "_Corrupt":
    """A record the walker refused, reported at ``here`` (the record's start, or the
    compressed batch's position) with the record's offset once known."""
    if fault.code == _W.VARINT and fault.varint_err == 2:
        reason, msg = "varint", "varint longer than its maximum size"
    elif fault.code == _W.LENGTH:
        reason, msg = (("length", "record length is negative or runs past its batch")
                       if fault.length < 0 else ("truncated", "record too short for its fields"))
    else:
        reason, msg = _FAULTS[fault.code]
    off = wrap64(base_offset + fault.off_delta) if fault.has_offset else None
    return _Corrupt(here, reason, msg, off)


class _Ctx:
    __slots__ = ("base_offset", "base_ts", "max_ts", "ts_type", "log_append", "producer_id",
                 "txn", "control", "count", "last_offset")


def _v2_ctx(d: Any, pos: int) -> _Ctx:
    (base, _len, _ple, _magic, _crc, attrs, last_delta, base_ts, max_ts, pid, _epoch, _seq,
     count) = _V2.unpack_from(d, pos)
    x = _Ctx()
    x.base_offset = base
    x.ts_type = (attrs >> 3) & 1
    x.log_append = x.ts_type
    x.txn = (attrs >> 4) & 1
    x.control = (attrs >> 5) & 1
    x.base_ts = base_ts
    x.max_ts = max_ts
    x.producer_id = pid
    x.count = count
    x.last_offset = wrap64(base + last_delta)
    return x


def _v2_records(B: ColumnBuilder, d: Any, end: int, x: _Ctx, index: int, pos: int,
                errpos: int, inplace: bool) -> Tuple[int, int, int]:
    i = index
    c = B.cols
    run_open = False
    while i < x.count:
        rstart = pos
        here = pos if inplace else errpos
        try:
            rec = _W.read_record(d, pos, end)
        except _W.RecordFault as fault:
            raise _record_error(fault, here, x.base_offset) from None
        rend, rlen, _attrs, tsd, offd, kpos, klen, vpos, vlen, spans = rec
        hcount = len(spans)
        if not x.control and B._full(rlen):
            return _C.FULL, i, rstart
        pos = rend
        off = wrap64(x.base_offset + offd)
        keep = (not x.control) and B.start_offset <= off < B.end_offset
        with_h = keep and B.include_headers
        if with_h:
            for hk, hklen, hv, hvlen in spans:
                c[_HKDATA] += d[hk:hk + hklen]
                c[_HKOFF].append(len(c[_HKDATA]))
                if hvlen >= 0:
                    c[_HVDATA] += d[hv:hv + hvlen]
                c[_HVVALID].append(hvlen >= 0)
                c[_HVOFF].append(len(c[_HVDATA]))
        ts = x.max_ts if x.log_append else wrap64(x.base_ts + tsd)
        if x.control:
            if klen < 4:
                raise _Corrupt(here, "attributes", "control record key is too short", off)
            ctype = _H.unpack_from(d, kpos + 2)[0]
            if not -128 <= ctype <= 127:
                ctype = -1
            c[_COFF].append(off)
            c[_CPID].append(x.producer_id)
            c[_CTYPE].append(ctype)
            c[_CTS].append(ts)
        elif keep:
            if not run_open:
                B._run(x.producer_id, x.txn, x.base_offset)
                run_open = True
            if with_h:
                B.nh += hcount
                c[_HOFF].append(B.nh)
                c[_HVALID].append(hcount > 0)
            B._push(off, ts, x.ts_type, bytes(d[kpos:kpos + klen]) if klen >= 0 else None,
                    bytes(d[vpos:vpos + vlen]) if vlen >= 0 else None,
                    x.producer_id, x.txn, x.base_offset, rlen, run=False)
        B._bump(off + 1)
        i += 1
    if pos != end:
        raise _Corrupt(pos if inplace else errpos, "length",
                       "bytes remain after the batch's declared record count")
    return _C.DONE, i, pos


def _legacy_message(B: ColumnBuilder, d: Any, pos: int, size: int, offset: int,
                    wrap: Optional[_Ctx], errpos: int) -> None:
    magic = struct.unpack_from(">b", d, pos + 16)[0]
    end = pos + 12 + size
    ts, ts_type = -1, -1
    if magic == 1:
        if size < 22:
            raise _Corrupt(errpos, "length", "message smaller than a v1 header", offset)
        ts = _Q.unpack_from(d, pos + 18)[0]
        ts_type = (d[pos + 17] >> 3) & 1
        kpos = pos + 26
    elif magic == 0:
        if size < 14:
            raise _Corrupt(errpos, "length", "message smaller than a v0 header", offset)
        kpos = pos + 18
    else:
        raise _Corrupt(errpos, "magic", "message magic is not 0 or 1", offset)
    if wrap is not None:
        if wrap.log_append:
            ts = wrap.max_ts
            ts_type = 1
        elif wrap.ts_type == 0 and magic == 1:
            ts_type = 0
    klen = _I.unpack_from(d, kpos)[0]
    if klen < -1 or klen > end - kpos - 8:
        raise _Corrupt(errpos, "length", "message key length is invalid", offset)
    kpos += 4
    vstart = kpos + max(klen, 0)
    vlen = _I.unpack_from(d, vstart)[0]
    if vlen < -1 or vstart + 4 + max(vlen, 0) != end:
        raise _Corrupt(errpos, "length", "message value length does not match its size", offset)
    if not B.start_offset <= offset < B.end_offset:
        return
    if B.include_headers:
        B.cols[_HOFF].append(B.nh)
        B.cols[_HVALID].append(0)
    B._push(offset, ts, ts_type, bytes(d[kpos:kpos + klen]) if klen >= 0 else None,
            bytes(d[vstart + 4:vstart + 4 + vlen]) if vlen >= 0 else None, -1, 0, offset, size)


def _scan(B: ColumnBuilder, d: Any, pos: int, end: int, index: int, rpos: int) -> Tuple[int, int, int, int]:
    while True:
        if end - pos < 17:
            return (_C.DONE if end == pos else _C.PARTIAL), pos, index, rpos
        base = _Q.unpack_from(d, pos)[0]
        size = _I.unpack_from(d, pos + 8)[0]
        if size < 14:
            raise _Corrupt(pos, "length", "batch size is smaller than the minimum record overhead (14)", base)
        if size > end - pos - 12:
            return _C.PARTIAL, pos, index, rpos
        nxt = pos + 12 + size
        magic = struct.unpack_from(">b", d, pos + 16)[0]
        if magic == 2:
            if size < 49:
                raise _Corrupt(pos, "length", "v2 batch smaller than its header", base)
            x = _v2_ctx(d, pos)
            if base >= B.end_offset:
                return _C.PAST_END, pos, index, rpos
            if x.count < 0:
                raise _Corrupt(pos, "length", "negative record count", base)
            if x.last_offset < B.start_offset:
                B._bump(x.last_offset + 1)
                pos = nxt
                continue
            if _H.unpack_from(d, pos + 21)[0] & 7:
                return _C.COMPRESSED, pos, index, rpos
            if index == 0:
                rpos = pos + 61
            status, index, rpos = _v2_records(B, d, nxt, x, index, rpos, pos, True)
            if status != _C.DONE:
                return status, pos, index, rpos
            B._bump(x.last_offset + 1)
        elif magic in (0, 1):
            if d[pos + 17] & 7:
                if 0 < base < B.start_offset:   # a wrapper at 0 may hold later offsets
                    B._bump(base + 1)
                    pos = nxt
                    continue
                return _C.COMPRESSED, pos, index, rpos
            if base >= B.end_offset:
                return _C.PAST_END, pos, index, rpos
            if base >= B.start_offset and B._full(size):
                return _C.FULL, pos, 0, rpos
            _legacy_message(B, d, pos, size, base, None, pos)
            B._bump(base + 1)
        else:
            raise _Corrupt(pos, "magic", "unknown magic byte (expected 0, 1 or 2)", base)
        pos = nxt
        index = 0
        rpos = 0


def _raise(exc: _Corrupt) -> None:
    pos, reason, msg, offset = exc.args2
    raise CorruptRecordError(msg, position=pos, offset=offset, reason=reason) from None


def _view(buf: Any) -> memoryview:
    v = memoryview(buf)
    return v if v.format == "B" else v.cast("B")


def columnar_scan(builder: ColumnBuilder, buf: Any, pos: int, end: int,
                  rec_index: int = 0, rec_pos: int = 0) -> Tuple[int, int, int, int]:
    """Decode top-level batches/messages of ``buf[pos:end]`` into ``builder``.

    Returns ``(status, pos, rec_index, rec_pos)``; see the fast twin.
    """
    d = _view(buf)
    n = len(d)
    if end < 0 or end > n or pos < 0 or pos > end:
        raise ValueError(f"range [{pos}, {end}) is outside the buffer of {n} bytes")
    if rec_index < 0 or (rec_index > 0 and not pos < rec_pos <= end):
        raise ValueError("rec_index/rec_pos must come from a previous FULL result")
    if n == 0:
        return (_C.DONE, 0, 0, 0)
    try:
        return _scan(builder, d, pos, end, rec_index, rec_pos)
    except _Corrupt as exc:
        _raise(exc)
        raise


def columnar_payload_info(buf: Any, pos: int) -> Tuple[int, int, int, int, int]:
    """``(magic, codec, payload_start, payload_end, next_pos)`` of the compressed batch at ``pos``."""
    d = _view(buf)
    n = len(d)
    if pos < 0 or n - pos < 17:
        raise ValueError(f"no batch header at position {pos}")
    size = _I.unpack_from(d, pos + 8)[0]
    if size < 14 or size > n - pos - 12:
        raise CorruptRecordError("batch size is invalid", position=pos, reason="length")
    magic = struct.unpack_from(">b", d, pos + 16)[0]
    if magic == 2:
        if size < 49:
            raise CorruptRecordError("v2 batch smaller than its header", position=pos, reason="length")
        return (2, _H.unpack_from(d, pos + 21)[0] & 7, pos + 61, pos + 12 + size, pos + 12 + size)
    if magic not in (0, 1):
        raise CorruptRecordError("unknown magic byte", position=pos, reason="magic")
    if size < (22 if magic == 1 else 14):
        raise CorruptRecordError("message smaller than its header", position=pos, reason="length")
    kpos = pos + (26 if magic == 1 else 18)
    klen = _I.unpack_from(d, kpos)[0]
    if klen < -1 or klen > pos + 12 + size - kpos - 8:
        raise CorruptRecordError("wrapper key length is invalid", position=pos, reason="length")
    kpos += 4 + max(klen, 0)
    vlen = _I.unpack_from(d, kpos)[0]
    if vlen < 0 or kpos + 4 + vlen != pos + 12 + size:
        raise CorruptRecordError("wrapper value length does not match its size",
                                 position=pos, reason="length")
    return (magic, d[pos + 17] & 7, kpos + 4, kpos + 4 + vlen, pos + 12 + size)


def _legacy_inner(B: ColumnBuilder, w: Any, wpos: int, d: Any, index: int, rpos: int) -> Tuple[int, int, int]:
    n = len(d)
    wmagic = struct.unpack_from(">b", w, wpos + 16)[0]
    woffset = _Q.unpack_from(w, wpos)[0]
    x = _Ctx()
    x.ts_type = -1
    x.log_append = 0
    if wmagic == 1:
        x.ts_type = (w[wpos + 17] >> 3) & 1
        x.log_append = x.ts_type
        x.max_ts = _Q.unpack_from(w, wpos + 18)[0]
    p = 0
    last_rel = 0
    while p < n:
        if n - p < 17:
            raise _Corrupt(wpos, "truncated", "compressed message set ends inside a message", woffset)
        size = _I.unpack_from(d, p + 8)[0]
        if size < 14 or size > n - p - 12:
            raise _Corrupt(wpos, "length", "inner message size is invalid", woffset)
        if d[p + 17] & 7:
            raise _Corrupt(wpos, "compression", "compressed message nested inside another", woffset)
        last_rel = _Q.unpack_from(d, p)[0]
        p += 12 + size
    if n == 0:
        raise _Corrupt(wpos, "count", "compressed message set holds no messages", woffset)
    # Kafka: a magic-1 wrapper at offset 0 is produce-side data (inner offsets stand as they
    # are); any other wrapper offset below the last inner offset is invalid.
    delta = 0
    if wmagic == 1 and woffset != 0:
        if woffset < last_rel:
            raise _Corrupt(wpos, "offset", "wrapper offset is less than the last inner message "
                           "offset and it is not zero", woffset)
        delta = woffset - last_rel
    p, i = rpos, index
    while p < n:
        size = _I.unpack_from(d, p + 8)[0]
        absoff = wrap64(_Q.unpack_from(d, p)[0] + delta)
        if B.start_offset <= absoff < B.end_offset and B._full(size):
            return _C.FULL, i, p
        _legacy_message(B, d, p, size, absoff, x, wpos)
        B._bump(absoff + 1)
        p += 12 + size
        i += 1
    B._bump(woffset + 1)
    return _C.DONE, i, p


def columnar_payload(builder: ColumnBuilder, buf: Any, pos: int, payload: Any,
                     rec_index: int = 0, rec_pos: int = 0) -> Tuple[int, int, int]:
    """Decode the decompressed ``payload`` of the batch/wrapper at ``buf[pos]``.

    Returns ``(status, rec_index, rec_pos)``; see the fast twin.
    """
    d = _view(buf)
    pd = _view(payload)
    n = len(d)
    if pos < 0 or n - pos < 17:
        raise ValueError(f"no batch header at position {pos}")
    if rec_pos < 0 or rec_pos > len(pd) or rec_index < 0:
        raise ValueError("rec_index/rec_pos must come from a previous FULL result")
    magic = struct.unpack_from(">b", d, pos + 16)[0]
    try:
        if magic == 2:
            if n - pos < 61:
                raise ValueError(f"no v2 batch header at position {pos}")
            x = _v2_ctx(d, pos)
            status, i, p = _v2_records(builder, pd, len(pd), x, rec_index, rec_pos, pos, False)
            if status == _C.DONE:
                builder._bump(x.last_offset + 1)
            return status, i, p
        if magic in (0, 1):
            if n - pos < 26:
                raise ValueError(f"no message header at position {pos}")
            return _legacy_inner(builder, d, pos, pd, rec_index, rec_pos)
    except _Corrupt as exc:
        _raise(exc)
    raise CorruptRecordError("unknown magic byte", position=pos, reason="magic")
