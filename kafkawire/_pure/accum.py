"""Producer accumulator kernels (pure-Python twin of ``kafkawire/_fast/accum.pyx``).

``RecordBuffer`` holds the records of one batch and encodes them into a v2
records region (``take``).  ``Appender`` owns the buffer counters the producer
shares between ``send`` and its I/O thread; its ``send`` is where the compiled
twin appends the common case in one call.  Here every record goes to the
producer's general path (``fallback``), which is the behaviour the compiled
fast path reproduces.
"""
from __future__ import annotations

import select
import socket
import time
from typing import Any, Callable, List, Optional

from kafkawire._pure.records import encode_records_v2

__all__ = ["RecordBuffer", "Appender", "Sticky", "encode_columns_into", "frame_buffer",
           "recv_exact"]


def recv_exact(sock: Any, buf: Any, timeout: float) -> None:
    """Fill the writable buffer ``buf`` from the plain socket ``sock`` within ``timeout`` s.

    Raises ``socket.timeout`` when the time runs out, ``ConnectionResetError``
    when the peer closes first, ``OSError`` on other socket errors.  (The
    compiled twin reads without holding the GIL.)
    """
    view = memoryview(buf).cast("B")
    got, n = 0, view.nbytes
    deadline = time.monotonic() + timeout
    while got < n:
        # wait here, not in recv_into: a socket with a timeout of its own would first wait
        # that long for data, whatever this call's timeout
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("timed out")
        if not select.select([sock], [], [], left)[0]:
            continue
        try:
            k = sock.recv_into(view[got:], 0, socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            continue
        if k == 0:
            raise ConnectionResetError("the broker closed the connection")
        got += k


def frame_buffer(n: int) -> bytearray:
    """A ``bytearray`` of ``n`` bytes for the caller to fill completely (a response frame).

    The compiled twin leaves the bytes unset; here they are zeros.
    """
    if n < 0:
        raise ValueError(f"a frame of {n} bytes")
    return bytearray(n)


class Sticky:
    """A topic's keyless partition and the bytes it takes before the producer moves on."""

    __slots__ = ("partition", "left")

    def __init__(self) -> None:
        self.partition = -1
        self.left = 0


class RecordBuffer:
    """The records of one v2 batch; ``take`` encodes them as the batch's records region.

    ``count``, ``size`` (the batch's estimated bytes, for ``batch_size`` and
    ``buffer_memory``) and ``closed`` are the batch's own fields; ``buf[i]``
    is the timestamp of record ``i`` (kept after :meth:`take`).
    """

    __slots__ = ("count", "size", "closed", "_ts", "_keys", "_values", "_headers")

    def __init__(self, size: int) -> None:
        self.count = 0
        self.size = size
        self.closed = False
        self._ts: List[int] = []
        self._keys: List[Optional[bytes]] = []
        self._values: List[Optional[bytes]] = []
        self._headers: List[Any] = []

    def __len__(self) -> int:
        return len(self._ts)

    def __getitem__(self, i: int) -> int:
        if not -len(self._ts) <= i < len(self._ts):
            raise IndexError("record index out of range")
        return self._ts[i]

    @property
    def first_timestamp(self) -> int:
        """The first record's timestamp (-1 when empty): the batch's base timestamp."""
        return self._ts[0] if self._ts else -1

    @property
    def max_timestamp(self) -> int:
        """The largest timestamp appended (-1 when empty)."""
        return max(self._ts) if self._ts else -1

    def append(self, timestamp: int, key: Optional[bytes], value: Optional[bytes], headers: Any,
               size: int) -> int:
        """Add one record (``headers``: ``[(str, bytes | None)]`` or None); returns its index.

        ``size`` is added to the batch's estimated bytes and ``count`` grows by one.
        """
        if key is not None and type(key) is not bytes:
            raise TypeError(f"key must be bytes or None, not {type(key).__name__}")
        if value is not None and type(value) is not bytes:
            raise TypeError(f"value must be bytes or None, not {type(value).__name__}")
        hs = None
        if headers:
            hs = []
            for hkey, hval in headers:
                if type(hkey) is not str:
                    raise TypeError(f"header keys must be str, not {type(hkey).__name__}")
                if hval is not None and type(hval) is not bytes:
                    raise TypeError(f"header value must be bytes or None, not "
                                    f"{type(hval).__name__}")
                hs.append((hkey, hval))
        if not isinstance(timestamp, int):
            raise TypeError(f"timestamp must be an int, not {type(timestamp).__name__}")
        if not -(1 << 63) <= timestamp < (1 << 63):
            raise OverflowError("timestamp out of range for a 64-bit integer")
        i = len(self._ts)
        self._ts.append(timestamp)
        self._keys.append(key)
        self._values.append(value)
        self._headers.append(hs)
        self.count += 1
        self.size += size
        return i

    def take(self) -> bytes:
        """The encoded records region; the records are released (timestamps stay)."""
        if not self._values:
            return b""
        first = self._ts[0]
        out = encode_records_v2(range(len(self._values)), [t - first for t in self._ts],
                                self._keys, self._values, self._headers)
        self._keys, self._values, self._headers = [], [], []
        return out


class Appender:
    """``Producer.send``'s common case, and the buffer counters it shares with the I/O thread.

    ``fallback(topic, value, key, headers, partition, timestamp, on_delivery)``
    is the producer's general path; ``queues`` the accumulator's
    ``{topic: {partition: deque of batches}}`` (a batch has ``buf``, a
    :class:`RecordBuffer`, and ``outcome``); ``topics`` the cluster's
    ``{topic: TopicInfo}``; ``sticky`` ``{topic: Sticky}``; ``future_type``
    the future class (made without ``__init__``, given ``_outcome`` and
    ``_index``).  ``bypass`` sends everything to ``fallback``.
    """

    def __init__(self, fallback: Optional[Callable[..., Any]], queues: dict, topics: dict,
                 sticky: dict, future_type: Any, batch_size: int, max_record_size: int,
                 buffer_memory: int, ignore_keys: bool) -> None:
        self.bypass = False
        self._used = 0
        self._pending = 0
        self._fallback = fallback

    @property
    def used(self) -> int:
        """Bytes queued and not yet delivered or failed."""
        return self._used

    @property
    def pending_records(self) -> int:
        """Records queued and not yet delivered or failed."""
        return self._pending

    def reserve(self, size: int, records: int) -> None:
        """Count ``size`` bytes and ``records`` records as queued."""
        self._used += size
        self._pending += records

    def release(self, size: int, records: int) -> None:
        """Count ``size`` bytes and ``records`` records as done (delivered or failed)."""
        self._used -= size
        self._pending -= records

    def send(self, topic: Any, value: Any = None, key: Any = None, headers: Any = None,
             partition: Any = None, timestamp: Any = None, on_delivery: Any = None) -> Any:
        """Append one record to its partition's open batch; a future of its metadata."""
        return self._fallback(topic, value, key, headers, partition, timestamp, on_delivery)


def _column(col: Any, start: int, stop: int, what: str) -> Any:
    """A binary column's rows ``start..stop-1`` as a function ``row -> bytes-like | None``."""
    if col is None:
        return lambda i: None
    validity, offsets, data, width, base = col
    if width not in (4, 8):
        raise ValueError(f"{what}: offset width must be 4 or 8, not {width}")
    if base < 0 or start < 0 or stop < start:
        raise ValueError(f"{what}: bad row range")
    offs = memoryview(offsets).cast("B").cast("i" if width == 4 else "q")
    data = memoryview(data).cast("B")
    if len(offs) < base + stop + 1:
        raise ValueError(f"{what}: the offsets buffer holds {len(offs)} entries, "
                         f"{base + stop + 1} needed")
    bits = None
    if validity is not None:
        bits = memoryview(validity).cast("B")
        if len(bits) * 8 < base + stop:
            raise ValueError(f"{what}: the validity bitmap is too short")

    def get(i):
        j = base + i
        if bits is not None and not (bits[j >> 3] >> (j & 7)) & 1:
            return None
        lo, hi = offs[j], offs[j + 1]
        if lo < 0 or hi < lo or hi > len(data):
            raise ValueError(f"{what}: offsets of row {i} ({lo}..{hi}) are out of order or "
                             f"past the data ({len(data)} bytes)")
        return data[lo:hi]
    return get


def encode_columns_into(out: Any, pos: int, start: int, stop: int, timestamps: Any,
                        base_timestamp: int, keys: Any, values: Any) -> int:
    """Encode rows ``start..stop-1`` of Arrow-layout columns as v2 records into ``out``.

    ``out`` is a writable buffer; the records go from byte ``pos`` on and the
    end position is returned.  ``keys``/``values`` are ``(validity, offsets,
    data, offset width, array offset)`` or None (every row null);
    ``timestamps`` a buffer of int64 (or None: every delta 0) whose deltas
    from ``base_timestamp`` are written.  A ValueError names the row whose
    offsets or timestamp are bad, or says the rows do not fit (size ``out``
    with 32 bytes per row besides keys and values).
    """
    if start < 0 or stop < start:
        raise ValueError(f"bad row range {start}..{stop}")
    if stop - start > 0x80000000:
        raise ValueError("value out of 32-bit varint range: too many rows for one batch")
    view = memoryview(out).cast("B")
    if view.readonly:
        raise TypeError("the output buffer is read-only")
    if not 0 <= pos <= len(view):
        raise ValueError(f"position {pos} is outside the {len(view)}-byte buffer")
    key = _column(keys, start, stop, "keys")
    value = _column(values, start, stop, "values")
    ts = None
    if timestamps is not None:
        ts = memoryview(timestamps).cast("B").cast("q")
        if len(ts) < stop:
            raise ValueError(f"timestamps: the buffer holds {len(ts)} entries, {stop} needed")
    rows = range(start, stop)
    data = encode_records_v2([i - start for i in rows],
                             [ts[i] - base_timestamp if ts is not None else 0 for i in rows],
                             [key(i) for i in rows], [value(i) for i in rows],
                             [None] * len(rows))
    end = pos + len(data)
    if end > len(view):
        raise ValueError(f"rows {start}..{stop - 1} do not fit in the {len(view)}-byte buffer "
                         f"(at byte {pos})")
    view[pos:end] = data
    return end
