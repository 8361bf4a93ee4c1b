"""Dump formatter kernels (pure twin of ``kafkawire/_fast/dumpfmt.pyx``).

They render what ``kafkawire dump --deep-iteration`` prints for v2 batches
(Kafka 3.9 ``DumpLogSegments`` text, or the ``--json`` lines) as UTF-8 bytes,
each line ending in ``\\n``.  ``mode`` is a combination of
``kafkawire._dumpfmt_common.PRINT`` (``--print-data-log``: `` key: …`` and
`` payload: …`` after the metadata), ``JSON`` and ``SHALLOW`` (batch lines only:
records are still decoded and checked, as ``isvalid`` needs, but not rendered, and
no gaps are reported).  Offsets that do not follow the previous record's
(``prev_offset``, -1 for none) are reported as ``gaps``: a list of
``(previous, current)`` pairs.  Every read is bounded by the buffer, the batch
and the record lengths.

``dump_batches(buf, start, end, mode, base_position, prev_offset, max_output) -> (out, stop, prev_offset, status, gaps)``
    Render the batches of ``buf[start:end]`` (a ``.log`` file's bytes), each
    batch's line then its records' lines, for as long as a batch is one this
    fast path renders exactly as the general path would: a complete v2 batch,
    uncompressed, not a control batch, with a matching CRC-32C, a record count
    and last offset delta not negative, and records that decode strictly
    (``K.decode_records_v2``'s rules) with offsets inside the batch's range;
    with ``PRINT`` (text), keys and values must be valid UTF-8 (the general
    path applies Java's replacement rules), and no offset or timestamp may
    leave int64.  ``position`` fields are ``base_position`` + the position in
    ``buf``.  Stops at the first other batch (``status`` ``GENERAL``,
    ``stop`` its position: the caller handles it, and whatever follows, its
    own way), at ``end`` (``OK``), or once ``out`` holds at least
    ``max_output`` bytes (``FULL``, after at least one whole batch).  Never
    raises for malformed input: that is the general path's to report.

``dump_records(buf, start, end, count, base_offset, last_offset, base_timestamp, max_timestamp, timestamp_type, base_sequence, mode, prev_offset) -> (out | None, prev_offset, gaps)``
    Render the record lines of one v2 batch whose records region (after the
    61-byte header; decompressed if the batch was compressed) is
    ``buf[start:end]``, holding exactly ``count`` records; ``timestamp_type``
    1 is LogAppendTime (every record shows ``max_timestamp``).  Malformed
    records raise ``CorruptRecordError`` with the position in ``buf``;
    ``out`` is None (and nothing is consumed) when the general path must
    render the batch (text needing Java's UTF-8 replacement, a timestamp past
    int64).
"""
from __future__ import annotations

import struct

from kafkawire import _dumpfmt_common as C
from kafkawire._pure.crc import crc32c
from kafkawire._pure import framing as W
from kafkawire._pure.wire import flat

__all__ = ["dump_batches", "dump_records"]

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_INT32_MAX = (1 << 31) - 1
_HEAD = struct.Struct(">qiiBIhiqqqhii")   # the 61-byte v2 batch header
_B64 = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_JSON_ESC = {0x22: b'\\"', 0x5C: b"\\\\", 0x0A: b"\\n", 0x0D: b"\\r", 0x09: b"\\t",
             0x08: b"\\b", 0x0C: b"\\f"}


class _Fail(Exception):
    def __init__(self, code, pos, offset=None, a=0, b=0):
        super().__init__(code)
        self.code, self.pos, self.offset, self.a, self.b = code, pos, offset, a, b


class _General(Exception):
    pass


_view = flat


def _utf8_ok(b) -> bool:
    try:
        bytes(b).decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def _b64(b) -> bytes:
    import binascii
    return binascii.b2a_base64(bytes(b), newline=False)


def _json_str(b) -> bytes:
    out = bytearray()
    for c in bytes(b):
        if c >= 0x20 and c != 0x22 and c != 0x5C:
            out.append(c)
        else:
            out += _JSON_ESC.get(c) or b"\\u%04x" % c
    return bytes(out)


def _seq(base_seq, delta):
    if base_seq < 0:
        return -1
    if base_seq > _INT32_MAX - delta:
        return delta - (_INT32_MAX - base_seq) - 1
    return base_seq + delta


def _records(out, buf, start, end, count, base_offset, last_offset, base_ts, max_ts, lat,
             base_seq, mode, prev, gaps):
    """Append the record lines to ``out``; returns the new ``prev`` (raises _Fail/_General)."""
    json = mode & C.JSON
    printing = mode & C.PRINT and not json
    tsname = b"LogAppendTime" if lat else b"CreateTime"
    if count < 0 or (count > 0 and count > (end - start) // 7):
        raise _Fail(C.E_COUNT, start, base_offset, count, end - start)
    pos = start
    last = prev
    for _ in range(count):
        pos, last = _record(out, buf, pos, end, base_offset, last_offset, base_ts, max_ts,
                            lat, base_seq, mode, last, gaps, tsname, json, printing)
    if pos != end:
        raise _Fail(C.E_LEFTOVER, pos, None, end - pos, count)
    return last


#: The walker's faults as this formatter's error codes (see ``_dumpfmt_common``).
_FAULTS = {W.LENGTH: C.E_REC_LENGTH, W.PAST_END: C.E_REC_PAST_END, W.OFFSET_RANGE: C.E_RANGE,
           W.KEY_LENGTH: C.E_KEY_LEN, W.KEY_PAST: C.E_KEY_PAST, W.VALUE_LENGTH: C.E_VALUE_LEN,
           W.VALUE_PAST: C.E_VALUE_PAST, W.HEADER_COUNT: C.E_HEADER_COUNT,
           W.HKEY_LENGTH: C.E_HKEY_LEN, W.HKEY_UTF8: C.E_HKEY_UTF8,
           W.HVALUE_LENGTH: C.E_HVALUE_LEN, W.HVALUE_PAST: C.E_HVALUE_PAST,
           W.FIELDS: C.E_FIELDS}


def _fail(f: W.RecordFault, base_offset):
    """The formatter's ``_Fail`` for a record the walker refused."""
    offset = base_offset + f.off_delta if f.has_offset else None
    if f.code == W.VARINT:
        return _Fail(C.E_VARINT_TRUNC if f.varint_err == 1 else C.E_VARINT_LONG, f.at, offset)
    a, b = 0, 0
    if f.code in (W.LENGTH, W.PAST_END):
        a = f.length
    elif f.code == W.OFFSET_RANGE:
        a = f.off_delta
    elif f.code in (W.KEY_LENGTH, W.VALUE_LENGTH, W.HEADER_COUNT, W.HKEY_LENGTH,
                    W.HVALUE_LENGTH):
        a = f.bad
    elif f.code == W.FIELDS:
        a, b = f.length, f.bad
    return _Fail(_FAULTS[f.code], f.at, offset, a, b)


def _record(out, buf, pos, end, base_offset, last_offset, base_ts, max_ts, lat, base_seq, mode,
            last, gaps, tsname, json, printing):
    """One record: append its line; returns (next position, its offset)."""
    try:
        r = W.read_record(buf, pos, end, W.WALK_UTF8 | W.WALK_RANGE, base_offset, last_offset)
    except W.RecordFault as f:
        raise _fail(f, base_offset) from None
    rec = pos
    pos, length, _attrs, ts_delta, off_delta, kpos, klen, vpos, vlen, spans = r
    offset = base_offset + off_delta
    headers = [(buf[hk:hk + hkl], None if hvl < 0 else buf[hv:hv + hvl])
               for hk, hkl, hv, hvl in spans]
    if lat:
        ts = max_ts
    else:
        ts = base_ts + ts_delta
        if ts < _INT64_MIN or ts > _INT64_MAX:
            raise _Fail(C.E_TS_OVERFLOW, rec, offset)
    if mode & C.SHALLOW:
        return pos, last
    key = None if klen < 0 else buf[kpos:kpos + klen]
    value = None if vlen < 0 else buf[vpos:vpos + vlen]
    if printing and ((key is not None and not _utf8_ok(key))
                     or (value is not None and not _utf8_ok(value))):
        raise _General()
    if last != -1 and offset != last + 1:
        gaps.append((last, offset))
    last = offset
    if json:
        hs = b",".join(b'["' + _json_str(k) + b'",'
                       + (b"null" if v is None else b'"' + _b64(v) + b'"') + b"]"
                       for k, v in headers)
        out += (b'{"type":"record","offset":%d,"timestamp":%d,"timestampType":"%s","key":%s,'
                b'"value":%s,"headers":[%s]}\n'
                % (offset, ts, tsname,
                   b"null" if key is None else b'"' + _b64(key) + b'"',
                   b"null" if value is None else b'"' + _b64(value) + b'"', hs))
    else:
        out += (b"| offset: %d %s: %d keySize: %d valueSize: %d sequence: %d headerKeys: [%s]"
                % (offset, tsname, ts, klen, vlen, _seq(base_seq, off_delta),
                   b",".join(bytes(k) for k, _ in headers)))
        if mode & C.PRINT:
            if key is not None:
                out += b" key: " + bytes(key)
            if value is not None:
                out += b" payload: " + bytes(value)
        out += b"\n"
    return pos, last


def _bounds(n, start, end):
    if end < 0 or end > n:
        end = n
    if start < 0:
        start = 0
    return min(start, end), end


def _check_mode(mode):
    if mode < 0 or mode > 7:
        raise ValueError(f"dump mode {mode} is not a combination of PRINT (1), JSON (2) and "
                         "SHALLOW (4)")


def _batch_line(h, position, size, json) -> bytes:
    (base_offset, _, ple, _, crc, attrs, last_delta, first_ts, max_ts, pid, pepoch, base_seq,
     count) = h
    txn = b"true" if attrs & 0x10 else b"false"
    if json:
        return (b'{"type":"batch","baseOffset":%d,"lastOffset":%d,"magic":2,'
                b'"compresscodec":"none","isTransactional":%s,"isControl":false,'
                b'"producerId":%d,"producerEpoch":%d,"baseSequence":%d,'
                b'"partitionLeaderEpoch":%d,"position":%d,"size":%d,"crc":%d,"isvalid":true}\n'
                % (base_offset, base_offset + last_delta, txn, pid, pepoch, base_seq, ple,
                   position, size, crc))
    horizon = b"OptionalLong[%d]" % first_ts if attrs & 0x40 else b"OptionalLong.empty"
    tsname = b"LogAppendTime" if attrs & 0x08 else b"CreateTime"
    return (b"baseOffset: %d lastOffset: %d count: %d baseSequence: %d lastSequence: %d "
            b"producerId: %d producerEpoch: %d partitionLeaderEpoch: %d isTransactional: %s "
            b"isControl: false deleteHorizonMs: %s position: %d %s: %d size: %d magic: 2 "
            b"compresscodec: none crc: %d isvalid: true\n"
            % (base_offset, base_offset + last_delta, count, base_seq, _seq(base_seq, last_delta),
               pid, pepoch, ple, txn, horizon, position, tsname, max_ts, size, crc))


def dump_batches(buf, start, end, mode, base_position, prev_offset, max_output):
    """Render the v2 batches of ``buf[start:end]``; see the module docstring."""
    _check_mode(mode)
    buf = _view(buf)
    pos, end = _bounds(len(buf), start, end)
    start = pos
    out = bytearray()
    gaps: list = []
    prev = prev_offset
    while pos < end:
        if pos > start and len(out) >= max_output:
            return bytes(out), pos, prev, C.FULL, gaps
        if end - pos < 61:
            break
        h = _HEAD.unpack_from(buf, pos)
        length = h[1]
        if length < 49 or length > end - pos - 12 or h[3] != 2:
            break
        size = length + 12
        attrs = h[5] & 0xFFFF
        base_offset, last_delta, count = h[0], h[6], h[12]
        if attrs & 0x27 or last_delta < 0 or count < 0:
            break
        if base_offset + last_delta > _INT64_MAX or base_position + pos > _INT64_MAX:
            break
        if crc32c(buf, pos + 21, pos + size) != h[4]:
            break
        mark, ngaps = len(out), len(gaps)
        out += _batch_line(h, base_position + pos, size, mode & C.JSON)
        try:
            prev = _records(out, buf, pos + 61, pos + size, count, base_offset,
                            base_offset + last_delta, h[7], h[8], attrs & 0x08, h[11], mode,
                            prev, gaps)
        except (_Fail, _General):
            del out[mark:]
            del gaps[ngaps:]
            break
        pos += size
    return bytes(out), pos, prev, (C.GENERAL if pos < end else C.OK), gaps


def dump_records(buf, start, end, count, base_offset, last_offset, base_timestamp, max_timestamp,
                 timestamp_type, base_sequence, mode, prev_offset):
    """Render one batch's records region ``buf[start:end]``; see the module docstring."""
    _check_mode(mode)
    buf = _view(buf)
    start, end = _bounds(len(buf), start, end)
    out = bytearray()
    gaps: list = []
    try:
        prev = _records(out, buf, start, end, count, base_offset, last_offset, base_timestamp,
                        max_timestamp, timestamp_type == 1, base_sequence, mode, prev_offset, gaps)
    except _General:
        return None, prev_offset, []
    except _Fail as f:
        if f.code == C.E_TS_OVERFLOW:
            return None, prev_offset, []
        raise C.records_error(f.code, f.pos, f.offset, f.a, f.b) from None
    return bytes(out), prev, gaps
