"""One TCP connection to one broker: size-prefixed frames, correlation ids, pipelining.

Kafka answers the requests of one connection in the order they were sent, so
many requests can be written before any response is read (pipelining); each
response is matched to its request by correlation id.  A timeout or a
mismatched correlation id leaves the byte stream in an unknown state, so the
connection is closed and every outstanding request fails.
"""
from __future__ import annotations

import collections
import itertools
import logging
import select
import socket
import ssl
import struct
import threading
import time
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple, Union

from kafkawire import _kernels as K
from kafkawire.client.exceptions import (ClientClosedError, KafkaConnectionError,
                                         RequestTimeoutError)
from kafkawire.errors import ProtocolError

__all__ = ["BrokerConnection", "Pending"]

log = logging.getLogger("kafkawire.client.connection")

_SIZE = struct.Struct(">i")
_IOV_MAX = 512          # buffers per sendmsg call (Linux allows 1024)
_CORRELATION = struct.Struct(">i")
# Response frames of at least _POOL_MIN bytes (Fetch answers) are read into buffers kept
# and reused once nothing refers to them any more: a fresh buffer of a few MiB per answer
# costs a page fault per 4 KiB (and the kernel zeroing the page) on the first write, then
# unmapping on release, about as much as the copy from the socket itself.  The buffers are
# shared by the process's connections, so consumers and reconnections that come and go
# reuse them too.
_POOL_MIN = 256 << 10
_POOL_BUFFERS = 8                 # at most this many pooled buffers...
_POOL_BYTES = 64 << 20            # ...holding at most this many bytes together


def _unexported(buf: bytearray) -> bool:
    """Whether no view of ``buf`` is alive: a bytearray refuses to change its size while
    any buffer export exists (Python's buffer protocol), on every build.  The one-byte
    shrink and regrowth stay inside the allocation; the last byte's value is not kept."""
    try:
        buf.pop()
    except BufferError:
        return False
    buf.append(0)
    return True


class FramePool:
    """Reusable buffers for large response frames (see ``_POOL_MIN``), bounded in count and
    bytes; thread-safe (a buffer is handed out with a view of it made under the lock, so no
    other thread can find it free)."""

    def __init__(self) -> None:
        self.buffers: List[bytearray] = []
        self._lock = threading.Lock()

    def take(self, size: int) -> memoryview:
        """A view of ``size`` bytes of a buffer nothing else refers to (not zeroed)."""
        with self._lock:
            pool = self.buffers
            best = -1
            for i in range(len(pool)):
                if len(pool[i]) >= size and _unexported(pool[i]) and \
                        (best < 0 or len(pool[i]) < len(pool[best])):
                    best = i
            if best >= 0:
                return memoryview(pool[best])[:size]
            cap = (size + (size >> 3) + 0xFFFF) & ~0xFFFF  # room for a slightly larger next one
            buf = K.frame_buffer(cap)
            held, count = sum(map(len, pool)), len(pool)
            if count >= _POOL_BUFFERS or held + cap > _POOL_BYTES:
                # make room by dropping free buffers (all too small for this frame), smallest first
                for i in sorted(range(count), key=lambda j: len(pool[j])):
                    if count < _POOL_BUFFERS and held + cap <= _POOL_BYTES:
                        break
                    if _unexported(pool[i]):
                        held -= len(pool[i])
                        count -= 1
                        pool[i] = None  # type: ignore[call-overload]
                pool[:] = [b for b in pool if b is not None]
            if count < _POOL_BUFFERS and held + cap <= _POOL_BYTES:
                pool.append(buf)
            return memoryview(buf)[:size]


_FRAMES = FramePool()


class Pending:
    """A request that was sent and whose response has not been read yet."""

    __slots__ = ("conn", "correlation_id", "api_key", "version", "decode", "_result", "_error",
                 "_done")

    def __init__(self, conn: "BrokerConnection", correlation_id: int, api_key: int, version: int,
                 decode: Optional[Callable]) -> None:
        self.conn = conn
        self.correlation_id = correlation_id
        self.api_key = api_key
        self.version = version
        self.decode = decode
        self._result = None
        self._error: Optional[BaseException] = None
        self._done = False

    def done(self) -> bool:
        return self._done

    def _set(self, result=None, error: Optional[BaseException] = None) -> None:
        self._result, self._error, self._done = result, error, True

    def result(self, timeout: Optional[float] = None):
        """Block until the response arrives (``timeout`` seconds, default the connection's)."""
        if not self._done:
            self.conn._wait_for(self, timeout)
        if self._error is not None:
            raise self._error
        return self._result


class BrokerConnection:
    """A blocking connection to ``host:port`` that can pipeline requests.

    ``send(frame, correlation_id, ...)`` writes an encoded request; the response
    is read by :meth:`Pending.result`.  Responses of other requests read on
    the way are kept for their own ``result`` call.
    """

    def __init__(self, host: str, port: int, *, node_id: Optional[int] = None,
                 connect_timeout: float = 10.0, request_timeout: float = 30.0,
                 max_frame_size: int = 104_857_600,
                 ssl_context: Optional[ssl.SSLContext] = None) -> None:
        self.host = host
        self.ssl_context = ssl_context
        self.port = int(port)
        self.node_id = node_id
        self.connect_timeout = connect_timeout
        self.request_timeout = request_timeout
        self.max_frame_size = max_frame_size
        self.api_versions: Dict[int, Tuple[int, int]] = {}
        self._sock: Optional[socket.socket] = None
        self._inflight: Deque[Pending] = collections.deque()
        # Correlation ids of requests sent without expecting an answer (Produce acks=0).
        # A conforming broker never answers them; a few (librdkafka's mock) do, and those
        # stray answers are dropped rather than taken for the next request's.
        self._unanswered: Deque[int] = collections.deque(maxlen=1024)
        self._ids = itertools.count(1)
        self._send_lock = threading.Lock()
        self._recv_lock = threading.Lock()
        self._closed = False
        self._sock_timeout: Optional[float] = None
        self._timed_sock: Optional[socket.socket] = None
        self.bytes_sent = 0
        self.bytes_received = 0
        self.frames = _FRAMES               # reusable buffers for large frames

    def __repr__(self) -> str:
        state = "connected" if self._sock is not None else "closed" if self._closed else "idle"
        return f"<BrokerConnection node={self.node_id} {self.host}:{self.port} {state}>"

    @property
    def connected(self) -> bool:
        return self._sock is not None

    @property
    def in_flight(self) -> int:
        return len(self._inflight)

    def connect(self) -> None:
        if self._closed:
            raise ClientClosedError(f"connection to {self.host}:{self.port} was closed; "
                                    "open a new one")
        if self._sock is not None:
            return
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self.connect_timeout)
        except socket.timeout as exc:
            raise KafkaConnectionError(f"connecting to {self.host}:{self.port} timed out after "
                                       f"{self.connect_timeout:g}s; check the address and that "
                                       "the broker is up") from exc
        except OSError as exc:
            raise KafkaConnectionError(f"cannot connect to {self.host}:{self.port}: {exc}; check "
                                       "the address and that the broker is up") from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.ssl_context is not None:
            try:
                sock.settimeout(self.connect_timeout)
                sock = self.ssl_context.wrap_socket(sock, server_hostname=self.host)
            except (ssl.SSLError, ssl.CertificateError) as exc:
                sock.close()
                raise KafkaConnectionError(f"TLS handshake with {self.host}:{self.port} failed: "
                                           f"{exc}; check ssl_cafile / the broker's certificate"
                                           ) from exc
            except OSError as exc:
                sock.close()
                raise KafkaConnectionError(f"TLS handshake with {self.host}:{self.port} broke: "
                                           f"{exc}; is the listener speaking TLS?") from exc
        log.debug("connected to %s:%s (node %s%s)", self.host, self.port, self.node_id,
                  ", TLS" if self.ssl_context is not None else "")
        self._sock = sock

    def next_correlation_id(self) -> int:
        return next(self._ids) & 0x7FFFFFFF

    def send(self, frame: Union[bytes, List[Any]], correlation_id: int, api_key: int,
             version: int, *, expect_response: bool = True, decode: Optional[Callable] = None,
             timeout: Optional[float] = None) -> Optional[Pending]:
        """Write one size-prefixed request frame; return its :class:`Pending` (None if no response).

        ``frame`` is bytes, or a list of buffers that together make the frame
        (written with one ``sendmsg`` where the socket has it, not joined).
        """
        self.connect()
        pending = Pending(self, correlation_id, api_key, version, decode) if expect_response else None
        deadline = time.monotonic() + (self.request_timeout if timeout is None else timeout)
        with self._send_lock:
            sock = self._sock
            if sock is None:
                raise KafkaConnectionError(f"connection to {self.host}:{self.port} was closed")
            if pending is not None:
                self._inflight.append(pending)
            else:
                self._unanswered.append(correlation_id)
            try:
                if isinstance(frame, list):
                    nbytes = self._send_parts(sock, frame, deadline)
                else:
                    self._timeout_for(sock, max(deadline - time.monotonic(), 0.001))
                    sock.sendall(frame)
                    nbytes = len(frame)
            except socket.timeout as exc:
                err = RequestTimeoutError(f"sending to {self.host}:{self.port} timed out")
                self._fail(err)
                raise err from exc
            except OSError as exc:
                err = KafkaConnectionError(f"sending to {self.host}:{self.port} failed: {exc}")
                self._fail(err)
                raise err from exc
        self.bytes_sent += nbytes
        return pending

    def _send_parts(self, sock: socket.socket, parts: List[Any], deadline: float) -> int:
        """Write every buffer of ``parts`` in order; the bytes written."""
        if isinstance(sock, ssl.SSLSocket) or not hasattr(sock, "sendmsg"):
            data = b"".join(parts)
            self._timeout_for(sock, max(deadline - time.monotonic(), 0.001))
            sock.sendall(data)
            return len(data)
        views = [memoryview(p).cast("B") for p in parts]
        total = sum(v.nbytes for v in views)
        i, n = 0, len(views)
        while True:
            while i < n and not views[i].nbytes:
                i += 1
            if i == n:
                return total
            left = deadline - time.monotonic()
            if left <= 0:
                raise socket.timeout()
            self._timeout_for(sock, left)
            sent = sock.sendmsg(views[i:i + _IOV_MAX])
            while sent:
                k = views[i].nbytes
                if sent < k:
                    views[i] = views[i][sent:]
                    break
                sent -= k
                i += 1

    def _wait_for(self, pending: Pending, timeout: Optional[float]) -> None:
        deadline = time.monotonic() + (self.request_timeout if timeout is None else timeout)
        while not pending._done:
            with self._recv_lock:
                if pending._done:
                    return
                if self._sock is None:
                    pending._set(error=KafkaConnectionError(
                        f"connection to {self.host}:{self.port} closed before the response"))
                    return
                frame = self._read_frame(deadline)
                self._dispatch(frame)

    def fileno(self) -> int:
        """The socket's descriptor (for ``select``); -1 when not connected."""
        sock = self._sock
        return sock.fileno() if sock is not None else -1

    def buffered(self) -> bool:
        """True when TLS has decrypted bytes waiting that ``select`` would not report."""
        sock = self._sock
        return isinstance(sock, ssl.SSLSocket) and sock.pending() > 0

    def poll(self, timeout: float = 0.0) -> int:
        """Read the responses that have arrived (waiting up to ``timeout`` for the first).

        Returns how many were read.  A response that has started to arrive is
        read whole (within the request timeout), so a slow network never leaves
        half a frame behind.  Errors fail the connection's requests (see
        :meth:`Pending.result`) instead of raising.
        """
        n = 0
        with self._recv_lock:
            while self._sock is not None and self._inflight:
                if not self.buffered():
                    try:
                        ready, _, _ = select.select([self._sock], [], [], timeout if n == 0 else 0)
                    except (OSError, ValueError) as exc:
                        self._fail(KafkaConnectionError(
                            f"connection to {self.host}:{self.port} broke: {exc}"))
                        return n
                    if not ready:
                        return n
                try:
                    frame = self._read_frame(time.monotonic() + self.request_timeout)
                    self._dispatch(frame)
                except (KafkaConnectionError, RequestTimeoutError, ProtocolError):
                    return n  # the connection failed its requests already
                n += 1
        return n

    def _dispatch(self, frame: Union[bytearray, memoryview]) -> None:
        if len(frame) < 4:
            err = ProtocolError(f"response frame of {len(frame)} bytes from {self.host}:{self.port} "
                                "is too short to hold a correlation id")
            self._fail(err)
            raise err
        (cid,) = _CORRELATION.unpack_from(frame, 0)
        if cid in self._unanswered:
            self._unanswered.remove(cid)
            return
        if not self._inflight:
            err = ProtocolError(f"{self.host}:{self.port} sent a response (correlation id {cid}) "
                                "nobody asked for")
            self._fail(err)
            raise err
        head = self._inflight[0]
        if head.correlation_id != cid:
            err = ProtocolError(f"{self.host}:{self.port} answered correlation id {cid}, expected "
                                f"{head.correlation_id}; closing the connection")
            self._fail(err)
            raise err
        self._inflight.popleft()
        try:
            result = head.decode(frame) if head.decode is not None else frame
        except Exception as exc:  # a bad response fails its own request only
            head._set(error=exc)
        else:
            head._set(result)

    def _timeout_for(self, sock: socket.socket, left: float) -> None:
        """Set the socket timeout to about ``left`` seconds (within 10%).

        Each ``settimeout`` is a system call; a producer sends and reads
        thousands of frames a second with nearly the same deadline, so the
        timeout is only changed when it is more than 10% off.
        """
        cur = self._sock_timeout
        if cur is None or sock is not self._timed_sock or left < cur * 0.9 or left > cur * 1.1:
            sock.settimeout(left)
            self._sock_timeout = left
            self._timed_sock = sock

    def _read_exact(self, view: memoryview, deadline: float) -> None:
        sock = self._sock
        if not isinstance(sock, ssl.SSLSocket):
            # the whole read in one call, without the GIL where the kernels are compiled
            left = deadline - time.monotonic()
            if left <= 0:
                raise socket.timeout()
            K.recv_exact(sock, view, left)
            return
        got, n = 0, len(view)
        while got < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise socket.timeout()
            self._timeout_for(sock, left)
            k = sock.recv_into(view[got:])
            if k == 0:
                raise ConnectionResetError("the broker closed the connection")
            got += k

    def _read_frame(self, deadline: float) -> Union[bytearray, memoryview]:
        try:
            head = bytearray(4)
            self._read_exact(memoryview(head), deadline)
            (size,) = _SIZE.unpack(head)
            if size < 0 or size > self.max_frame_size:
                err = ProtocolError(f"{self.host}:{self.port} announced a response of {size} bytes "
                                    f"(limit {self.max_frame_size}); raise max_frame_size if "
                                    "that is expected")
                self._fail(err)
                raise err
            frame = self._frame_buffer(size)
            self._read_exact(memoryview(frame), deadline)
        except socket.timeout as exc:
            err = RequestTimeoutError(f"no response from {self.host}:{self.port} in time; raise "
                                      "request_timeout_ms if the broker is just slow")
            self._fail(err)
            raise err from exc
        except OSError as exc:
            err = KafkaConnectionError(f"connection to {self.host}:{self.port} broke: {exc}")
            self._fail(err)
            raise err from exc
        self.bytes_received += 4 + size
        return frame

    def _frame_buffer(self, size: int) -> Union[bytearray, memoryview]:
        """Room for a response frame of ``size`` bytes, not zeroed (the read fills it).

        Large frames get a view of a pooled buffer no view refers to any more
        (every view, decoded field or Arrow buffer made from a frame holds an
        export of its buffer, so a buffer still in use is never handed out again);
        see :class:`FramePool`.
        """
        if size < _POOL_MIN:
            return K.frame_buffer(size)  # type: ignore[no-any-return]
        return self.frames.take(size)

    def _fail(self, error: BaseException) -> None:
        """Close the socket and fail every request still waiting on it."""
        sock, self._sock = self._sock, None
        if sock is not None:
            if not self._closed:
                log.info("connection to %s:%s (node %s) closed: %s", self.host, self.port,
                         self.node_id, error)
            try:
                sock.close()
            except OSError:
                pass
        while True:   # another thread may fail the connection at the same time
            try:
                pending = self._inflight.popleft()
            except IndexError:
                break
            pending._set(error=error)

    def close(self) -> None:
        """Close the socket; requests still in flight fail with ``ClientClosedError``."""
        self._closed = True
        self._fail(ClientClosedError(f"connection to {self.host}:{self.port} closed"))

    def __enter__(self) -> "BrokerConnection":
        self.connect()
        return self

    def __exit__(self, *exc) -> None:
        self.close()
