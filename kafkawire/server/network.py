"""The broker's network loop: one asyncio event loop, one coroutine per connection.

Each connection reads size-prefixed frames (at most ``socket.request.max.bytes``)
straight into its own buffer (an :class:`asyncio.BufferedProtocol`: no stream
reader copying the bytes on their way; a large frame is handed on as a view of
that buffer, which is never written over while a view exists), decodes the
request header and body with :mod:`kafkawire.protocol`, hands it to the
dispatcher and writes the response before processing the next request, as a
Kafka broker processes one request per connection at a time: responses go out
in request order.  A connection stops reading the socket while a few MiB of
requests wait for it, and writes wait for the socket, so a client that does
not read its responses only stalls itself.  Record sections of
Fetch responses are sent from the segment files with ``sendfile`` on
plaintext connections; TLS connections copy them through the SSL object.

Each listener (``listeners``, see :mod:`kafkawire.server.auth`) is one
server on the same loop.  On a SASL listener a connection is served only
ApiVersions, SaslHandshake and SaslAuthenticate until it has authenticated;
any other request closes it, as Kafka's authenticator does.

A malformed frame (negative or oversized length, undecodable header or
body, an API or version not advertised) closes that connection with one log
line; other connections are not affected.
"""
from __future__ import annotations

import asyncio
import collections
import functools
import logging
import os
import socket
import struct
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Set, Tuple, Union

from kafkawire import _kernels as K
from kafkawire.errors import KafkaWireError
from kafkawire.protocol import ApiKey, decode_request, encode_response
from kafkawire.protocol.schema import Message
from kafkawire.server.auth import PRE_AUTH_APIS, Listener, SaslConnection
from kafkawire.server.codes import UNSUPPORTED_VERSION
from kafkawire.server.dispatch import EncodedResponse, Later, RawResponse, RequestContext

if TYPE_CHECKING:
    from kafkawire.server.broker import Broker
    from kafkawire.server.partitions import FileRegion

__all__ = ["NetworkServer", "encode_raw_response", "advertised_address"]

log = logging.getLogger("kafkawire.server.network")

_SIZE = struct.Struct(">i")
#: Bytes of complete requests a connection holds, waiting to be processed, before it stops
#: reading the socket (it reads on when they are processed); each request counts
#: _FRAME_COST more, for the objects holding it.
_QUEUE_LIMIT = 2 << 20
_FRAME_COST = 128
#: A connection's first read buffer, and the least a later one holds; a buffer is replaced
#: by a larger one to hold a large request whole.
_FIRST_BUFFER = 16 * 1024
_CHUNK = 64 * 1024
#: How far a new buffer may reach past the bytes received, for the rest of a frame.
_EAGER = 1 << 20
#: Requests up to this size are copied out of the read buffer (which is then reused);
#: larger ones are handed on as views of it (that buffer is then left to them).
_COPY_MAX = 64 * 1024
#: File regions smaller than this are read and written instead of sendfile'd.
_SENDFILE_MIN = 16 * 1024

Part = Union[bytes, "FileRegion"]


class _Rest:
    """What is left of a request answered from the read callback, for the serving task to
    finish in its place in the queue: a :class:`Later` to await and answer, or the parts of
    a response the socket did not take at once."""
    __slots__ = ("later", "version", "correlation_id", "parts")

    def __init__(self, later: Optional[Later], version: int, correlation_id: int,
                 parts: Optional[List[Part]] = None) -> None:
        self.later = later
        self.version = version
        self.correlation_id = correlation_id
        self.parts = parts


Item = Union[bytes, memoryview, _Rest]


def encode_raw_response(raw: RawResponse, version: int, correlation_id: int) -> Tuple[List[Part], int]:
    """A response whose record fields are file regions: ``(parts, total size)`` where parts
    are bytes and :class:`FileRegion` in wire order, the first carrying the size prefix."""
    msg = raw.message
    encoded = encode_response(msg, version, correlation_id)
    flexible = type(msg).is_flexible(version)
    parts: List[Part] = []
    total = len(encoded) - 4
    pos = 0
    found = []
    for token, region in raw.regions.items():
        at = encoded.find(token, 4)
        if at < 0:
            raise AssertionError("placeholder missing from the encoded response")
        found.append((at, token, region))
    found.sort(key=lambda x: x[0])
    head = bytearray()
    for at, token, region in found:
        n = len(token)
        if flexible:
            plen = len(K.write_unsigned_varint(n + 1))
            prefix = K.write_unsigned_varint(region.size + 1)
        else:
            plen = 4
            prefix = _SIZE.pack(region.size)
        head += encoded[pos:at - plen]
        head += prefix
        parts.append(bytes(head))
        head = bytearray()
        parts.append(region)
        total += region.size - n + len(prefix) - plen
        pos = at + n
    head += encoded[pos:]
    parts.append(bytes(head))
    first = parts[0]
    assert isinstance(first, bytes)
    parts[0] = _SIZE.pack(total) + first[4:]
    return parts, total


def advertised_address(ctx: RequestContext) -> Tuple[str, int]:
    """``(host, port)`` clients of the request's listener are told to connect to (Metadata,
    FindCoordinator, DescribeCluster)."""
    adv = ctx.connection.get("advertised")
    return adv if adv is not None else ctx.broker.address


def _write_fd(fd: int, data: bytes) -> bytes:
    """Write ``data`` to the non-blocking socket ``fd``: the bytes it did not take."""
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except BlockingIOError:
            return bytes(view)
        view = view[n:]
    return b""


class _Connection(asyncio.BufferedProtocol):
    """One client connection: reads frames into its buffer (``get_buffer`` and
    ``buffer_updated``) and queues them for :meth:`NetworkServer._serve`, which processes
    them one at a time on its own task."""

    def __init__(self, server: "NetworkServer", listener: Listener, first: bool) -> None:
        self.server = server
        self.listener = listener
        self.first = first
        self.transport: Optional[asyncio.BaseTransport] = None
        self.loop: Optional[asyncio.AbstractEventLoop] = None
        #: The socket's descriptor (plaintext connections), for sends that skip the transport.
        self.fd = -1
        self.busy = False
        self.task: Optional[asyncio.Task[None]] = None
        self.state: Dict[str, Any] = {}
        self.peer = "?"
        self.plaintext = True
        #: Loop time of the last request answered (or of the connection): idle since then.
        self.active = 0.0
        #: Set on SASL listeners until the connection has authenticated.
        self.sasl: Optional[SaslConnection] = None
        self._buf = bytearray(_FIRST_BUFFER)
        self._start = 0          # first byte not yet cut into a frame
        self._end = 0            # end of the bytes received
        self._pinned = False     # a frame handed on is a view of _buf: never write over it
        self._want = 4           # bytes the frame being received still lacks (at least)
        #: Complete requests not yet processed (or the rest of one answered in part, see
        #: _Rest); None ends them (end of stream, refused frame).
        self.frames: "collections.deque[Optional[Item]]" = collections.deque()
        self._queued = 0
        self._reading_paused = False
        self._waiter: Optional[asyncio.Future[None]] = None
        self._drain_waiter: Optional[asyncio.Future[None]] = None
        self._write_paused = False
        self.closed = False
        self._ended = False
        #: Why reading stopped early (an oversized frame), logged by the serving task.
        self.refused: Optional[str] = None

    # -- asyncio callbacks --------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.plaintext = transport.get_extra_info("sslcontext") is None
        loop = self.loop = asyncio.get_running_loop()
        self.active = loop.time()
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
            if self.plaintext and sock.family in (socket.AF_INET, socket.AF_INET6):
                self.fd = sock.fileno()
        server = self.server
        if server.stopping:
            transport.close()
            return
        # The connection's state, set once when it is accepted, before any request is read.
        listener = self.listener
        if listener.sasl:
            self.sasl = SaslConnection(listener, server.broker.security.users)
        if listener.advertised is not None:
            self.state["advertised"] = listener.advertised
        elif not self.first:
            host, port = server.bound[listener.name]
            self.state["advertised"] = ("127.0.0.1" if host in ("0.0.0.0", "::", "") else host,
                                        port)
        server.connections.add(self)
        self.task = loop.create_task(server._serve(self))

    def get_buffer(self, sizehint: int) -> memoryview:
        buf, start, end = self._buf, self._start, self._end
        if self._ended:
            return memoryview(buf)[end:] if end < len(buf) else memoryview(bytearray(4096))
        want = max(self._want, 4096)
        if len(buf) - end < want:
            held = end - start
            if not self._pinned and len(buf) - held >= want:
                buf[:held] = buf[start:end]         # move the partial frame to the front
            else:
                # A new buffer, with room for the rest of the frame being received up to
                # _EAGER more than arrived (a client announcing a huge frame and sending
                # little does not get it allocated: the buffer grows with what arrives).
                size = max(_CHUNK, held + min(want, max(held, _EAGER)))
                fresh = bytearray(size)
                fresh[:held] = buf[start:end]
                self._buf = buf = fresh
                self._pinned = False
            self._start, self._end = 0, held
        return memoryview(buf)[self._end:]

    def buffer_updated(self, nbytes: int) -> None:
        if self._ended:
            return
        self._end += nbytes
        buf, start, end = self._buf, self._start, self._end
        max_bytes = self.server.max_request_bytes
        queued = False
        while True:
            if end - start < 4:
                self._want = 4 - (end - start)
                break
            size: int = _SIZE.unpack_from(buf, start)[0]
            if size < 0 or size > max_bytes:
                self.refused = f"request size {size} is " + (
                    "negative" if size < 0 else
                    f"over socket.request.max.bytes ({max_bytes})")
                self._stop_reading()
                break
            stop = start + 4 + size
            if stop > end:
                self._want = stop - end
                break
            if size > _COPY_MAX:
                self.frames.append(memoryview(buf)[start + 4:stop])
                self._pinned = True
            else:
                self.frames.append(bytes(buf[start + 4:stop]))
            self._queued += size + _FRAME_COST
            start = stop
            queued = True
        if start == end and not self._pinned:
            start = self._end = 0
        self._start = start
        if queued:
            waiter = self._waiter
            if waiter is not None and not waiter.done() and self.fd >= 0:
                # The serving task is idle: answer what can be answered right here.
                self.server._answer_now(self)
                if not self.frames:
                    return
            if self._queued > _QUEUE_LIMIT and not self._reading_paused:
                self._pause_reading()
            self._wake()

    def eof_received(self) -> Optional[bool]:
        self._stop_reading()
        # Keep a plaintext connection half-open: the requests received are still answered
        # (TLS cannot half-close).
        return self.plaintext

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self.closed = True
        self._stop_reading()
        waiter, self._drain_waiter = self._drain_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(ConnectionResetError("connection lost"))

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        waiter, self._drain_waiter = self._drain_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- used by the serving task ----------------------------------------------
    def _stop_reading(self) -> None:
        """No more frames: the queue ends (requests already queued are still processed)."""
        if self._ended:
            return
        self._ended = True
        self.frames.append(None)
        if not self._reading_paused and not self.closed:
            self._pause_reading()
        self._wake()

    def _pause_reading(self) -> None:
        try:
            self.transport.pause_reading()  # type: ignore[union-attr]
            self._reading_paused = True
        except (RuntimeError, AttributeError):
            pass

    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def next_frame(self) -> Optional[Item]:
        """The next request's bytes (after its size prefix), or the rest of one; None at
        the end."""
        frames = self.frames
        while not frames:
            self._waiter = self.loop.create_future()  # type: ignore[union-attr]
            await self._waiter
        frame = frames[0]
        if frame is None:
            return None                      # the end stays queued
        frames.popleft()
        if not isinstance(frame, _Rest):
            self.dequeued(len(frame))
        return frame

    def dequeued(self, size: int) -> None:
        """A request of ``size`` bytes left the queue: read on when it is short again."""
        self._queued -= size + _FRAME_COST
        if (self._reading_paused and not self._ended and not self.closed
                and self._queued <= _QUEUE_LIMIT // 2):
            self._reading_paused = False
            self.transport.resume_reading()  # type: ignore[union-attr]

    def write(self, data: bytes) -> None:
        self.transport.write(data)  # type: ignore[union-attr]

    def send_now(self, parts: List[Part]) -> List[Part]:
        """Send a response holding file regions straight to the socket (``sendfile`` for
        the regions, one write for the bytes between them, the TCP segments corked until
        the end), while the socket takes them: the parts left when it is full (to send
        through the transport, in order), [] when all went.  Only on a plaintext
        connection with nothing waiting in the transport; otherwise ``parts`` unchanged."""
        transport = self.transport
        fd = self.fd
        if (fd < 0 or transport is None or self.closed or transport.is_closing()
                or transport.get_write_buffer_size()):  # type: ignore[attr-defined]
            return parts
        if not any(not isinstance(p, (bytes, bytearray)) and p.size >= _SENDFILE_MIN
                   for p in parts):
            # small regions only: read them, one write through the transport
            self.write(b"".join(p if isinstance(p, (bytes, bytearray)) else p.read()
                                for p in parts))
            return []
        sock = transport.get_extra_info("socket")
        corked = False
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
            corked = True
            pending: List[bytes] = []
            i = 0
            for i, part in enumerate(parts):
                if isinstance(part, (bytes, bytearray)):
                    pending.append(part)
                    continue
                if part.size < _SENDFILE_MIN:
                    pending.append(part.read())
                    continue
                if pending:
                    left = _write_fd(fd, b"".join(pending))
                    pending = []
                    if left:
                        return [left, *parts[i:]]
                offset, size = part.offset, part.size
                src = part.file.fileno()
                while size:
                    try:
                        sent = os.sendfile(fd, src, offset, size)
                    except BlockingIOError:
                        sent = -1
                    if sent <= 0:
                        if sent == 0:
                            raise ConnectionResetError("segment file ended inside a region")
                        rest = type(part)(part.file, offset, size)
                        return [rest, *parts[i + 1:]]
                    offset += sent
                    size -= sent
            if pending:
                left = _write_fd(fd, b"".join(pending))
                if left:
                    return [left]
            return []
        except (BrokenPipeError, ConnectionError):
            raise
        except OSError as exc:
            raise ConnectionResetError(f"send failed: {exc}") from exc
        finally:
            if corked:
                try:
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 0)
                except OSError:
                    pass

    async def drain(self) -> None:
        """Wait until the transport's buffer is below its high-water mark again."""
        if self.closed:
            raise ConnectionResetError("connection lost")
        if self._write_paused:
            waiter = self._drain_waiter = self.loop.create_future()  # type: ignore[union-attr]
            await waiter

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class NetworkServer:
    """Accepts connections and serves requests through ``broker.dispatcher``."""

    def __init__(self, broker: "Broker", host: str, port: int, *, max_request_bytes: int,
                 idle_ms: int) -> None:
        self.broker = broker
        self.host = host
        self.port = port
        self.max_request_bytes = max_request_bytes
        self.idle_s = idle_ms / 1000.0
        self.server: Optional[asyncio.base_events.Server] = None
        self.connections: Set[_Connection] = set()
        self.stopping = False
        self.servers: List[asyncio.base_events.Server] = []
        #: Each listener's name and bound ``(host, port)``, in the order configured.
        self.bound: Dict[str, Tuple[str, int]] = {}
        self._sweep_handle: Optional[asyncio.TimerHandle] = None

    async def start(self) -> Tuple[str, int]:
        """Listen on every listener; the first one's bound address."""
        security = getattr(self.broker, "security", None)
        listeners: List[Listener] = (list(security.listeners) if security is not None else
                                     [Listener("PLAINTEXT", "PLAINTEXT", self.host, self.port,
                                               None, (), None)])
        try:
            for i, lst in enumerate(listeners):
                host, port = (self.host, self.port) if i == 0 and security is None else \
                    (lst.host, lst.port)
                server = await asyncio.get_running_loop().create_server(
                    functools.partial(_Connection, self, lst, i == 0), host, port,
                    reuse_address=True, backlog=512, ssl=lst.ssl_context)
                self.servers.append(server)
                self.bound[lst.name] = server.sockets[0].getsockname()[:2]
        except BaseException:
            for server in self.servers:
                server.close()
            raise
        self.server = self.servers[0]
        host, port = next(iter(self.bound.values()))
        self.port = port
        if len(listeners) > 1 or listeners[0].protocol != "PLAINTEXT":
            log.info("listeners: %s", ", ".join(f"{lst.name}://{h}:{p}" for lst, (h, p) in
                                                zip(listeners, self.bound.values())))
        return host, port

    async def stop(self, grace_s: float = 5.0) -> None:
        """Stop accepting, let requests being processed finish (their answers are sent),
        then close every connection."""
        self.stopping = True
        for server in self.servers:
            server.close()
        for conn in list(self.connections):
            if not conn.busy and conn.task is not None:
                conn.task.cancel()
        busy = [c.task for c in self.connections if c.task is not None and not c.task.done()]
        if busy:
            done, pending = await asyncio.wait(busy, timeout=grace_s)
            for t in pending:
                t.cancel()
            if pending:
                await asyncio.wait(pending, timeout=1.0)
        for server in self.servers:
            try:
                await asyncio.wait_for(server.wait_closed(), 1.0)
            except asyncio.TimeoutError:
                pass

    async def _serve(self, conn: _Connection) -> None:
        """Process ``conn``'s requests in order until it closes (or the broker stops)."""
        try:
            while not self.stopping:
                if not await self._one_request(conn):
                    break
        except (ConnectionError, asyncio.TimeoutError):
            pass
        except asyncio.CancelledError:
            pass
        except Exception:   # a bug in a handler: close this connection, keep serving others
            log.exception("closing connection from %s after an internal error", conn.peer)
        finally:
            self.connections.discard(conn)
            try:
                conn.close()
            except Exception:
                pass

    def _sweep(self) -> None:
        """Close connections without a request for ``connections.max.idle.ms`` (checked
        every tenth of it, at most every 30 s): one timer for the server, none per read."""
        if self.stopping:
            return
        loop = asyncio.get_running_loop()
        now = loop.time()
        for conn in list(self.connections):
            if not conn.busy and now - conn.active > self.idle_s and conn.task is not None:
                log.info("closing connection from %s: idle for more than "
                         "connections.max.idle.ms", conn.peer)
                conn.task.cancel()
        self._sweep_handle = loop.call_later(min(max(self.idle_s / 10, 0.01), 30.0), self._sweep)

    async def _one_request(self, conn: _Connection) -> bool:
        if self._sweep_handle is None:
            self._sweep()
        payload = await conn.next_frame()
        if payload is None:
            if conn.refused is not None:
                log.warning("closing connection from %s: %s", conn.peer, conn.refused)
            return False
        if isinstance(payload, _Rest):
            conn.busy = True
            try:
                if payload.parts is not None:
                    await self._write(conn, payload.parts)
                else:
                    assert payload.later is not None
                    await self._respond(conn, await payload.later.wait(), payload.version,
                                        payload.correlation_id)
                return True
            finally:
                conn.busy = False
                conn.active = conn.loop.time()  # type: ignore[union-attr]
        if not self._frame_ok(conn, len(payload)):
            return False
        conn.busy = True
        try:
            if conn.sasl is not None and conn.sasl.raw_tokens:
                return await self._raw_token(conn, payload)
            return await self._handle(conn, payload)
        finally:
            conn.busy = False
            conn.active = conn.loop.time()  # type: ignore[union-attr]

    def _frame_ok(self, conn: _Connection, size: int) -> bool:
        """Whether a frame of ``size`` bytes may be processed (logged when it closes the
        connection); oversized and negative sizes were refused as they arrived."""
        if size < 8 and not (conn.sasl is not None and conn.sasl.raw_tokens):
            log.warning("closing connection from %s: %d-byte request is shorter than a "
                        "request header", conn.peer, size)
            return False
        return True

    async def _handle(self, conn: _Connection, payload: Union[bytes, memoryview]) -> bool:
        api_key, version, correlation_id = struct.unpack_from(">hhi", payload, 0)
        dispatcher = self.broker.dispatcher
        versions = dispatcher.versions(api_key)
        if api_key == ApiKey.API_VERSIONS and versions is not None and version > versions[1]:
            # Answer with v0 and UNSUPPORTED_VERSION so the client can pick a version (KIP-511).
            await self._write(conn, [encode_response(
                dispatcher.api_versions(UNSUPPORTED_VERSION), 0, correlation_id)])
            return True
        if versions is None or not versions[0] <= version <= versions[1]:
            log.warning("closing connection from %s: API %d version %d is not served "
                        "(see ApiVersions)", conn.peer, api_key, version)
            return False
        sasl = conn.sasl
        if sasl is not None and api_key not in PRE_AUTH_APIS:
            log.warning("closing connection from %s: API %d before SASL authentication",
                        conn.peer, api_key)
            return False
        try:
            # Bytes after the body are ignored, as Kafka ignores them (librdkafka sends some).
            req = decode_request(payload, sized=False, max_frame_size=self.max_request_bytes,
                                 allow_trailing=True)
        except KafkaWireError as exc:
            log.warning("closing connection from %s: malformed request (API %d v%d): %s",
                        conn.peer, api_key, version, exc)
            return False
        if sasl is not None and api_key != ApiKey.API_VERSIONS:
            return await self._sasl(conn, sasl, api_key, req.message, version, correlation_id)
        handler = dispatcher.handler(api_key)
        assert handler is not None
        ctx = RequestContext(broker=self.broker, peer=conn.peer, client_id=req.client_id,
                             api_key=api_key, api_version=version, correlation_id=correlation_id,
                             plaintext=conn.plaintext, connection=conn.state)
        response = await handler(ctx, req.message, version)
        await self._respond(conn, response, version, correlation_id)
        return True

    async def _respond(self, conn: _Connection, response: Any, version: int,
                       correlation_id: int) -> None:
        if response is None:
            return
        if isinstance(response, EncodedResponse):
            await self._write(conn, [response.frame])
        elif isinstance(response, RawResponse):
            parts, _ = encode_raw_response(response, version, correlation_id)
            await self._write(conn, parts)
        else:
            await self._write(conn, [encode_response(response, version, correlation_id)])

    def _answer_now(self, conn: _Connection) -> None:
        """Answer ``conn``'s queued requests from the read callback, first to last, while
        they are of an API with a synchronous handler (Produce, Fetch) and the connection
        is idle, plaintext, authenticated and writable: no task switch per request.  The
        first other request, and everything after it, is left to the serving task, so
        answers keep the order of the requests.  A Fetch that must wait leaves its rest
        (:class:`_Rest`) in its place for the task."""
        frames = conn.frames
        dispatcher = self.broker.dispatcher
        now = dispatcher.now
        try:
            while frames and not (self.stopping or conn.closed or conn._write_paused
                                  or conn.sasl is not None):
                payload = frames[0]
                if payload is None or isinstance(payload, _Rest) or len(payload) < 8:
                    return
                api_key, version, correlation_id = struct.unpack_from(">hhi", payload, 0)
                handler = now.get(api_key)
                if handler is None:
                    return
                versions = dispatcher.versions(api_key)
                if versions is None or not versions[0] <= version <= versions[1]:
                    return
                try:
                    req = decode_request(payload, sized=False,
                                         max_frame_size=self.max_request_bytes,
                                         allow_trailing=True)
                except KafkaWireError:
                    return                   # the task says why and closes the connection
                frames.popleft()
                conn.dequeued(len(payload))
                del payload
                ctx = RequestContext(broker=self.broker, peer=conn.peer,
                                     client_id=req.client_id, api_key=api_key,
                                     api_version=version, correlation_id=correlation_id,
                                     plaintext=conn.plaintext, connection=conn.state)
                response = handler(ctx, req.message, version)
                if isinstance(response, Later):
                    frames.appendleft(_Rest(response, version, correlation_id))
                    return
                if response is None:
                    continue
                if isinstance(response, EncodedResponse):
                    conn.write(response.frame)
                elif isinstance(response, RawResponse):
                    parts, _ = encode_raw_response(response, version, correlation_id)
                    rest = conn.send_now(parts)
                    if rest:
                        frames.appendleft(_Rest(None, version, correlation_id, rest))
                        return
                else:
                    conn.write(encode_response(response, version, correlation_id))
        except Exception as exc:
            if not isinstance(exc, ConnectionError):   # a bug in a handler: close this
                log.exception("closing connection from %s after an internal error",
                              conn.peer)               # connection, keep serving others
            frames.clear()
            frames.append(None)                      # the serving task ends
            conn.close()
        finally:
            conn.active = conn.loop.time()  # type: ignore[union-attr]

    async def _sasl(self, conn: _Connection, sasl: SaslConnection, api_key: int, msg: Any,
                    version: int, correlation_id: int) -> bool:
        """SaslHandshake or SaslAuthenticate on a connection not yet authenticated."""
        response: Message
        if api_key == ApiKey.SASL_HANDSHAKE:
            response, keep = sasl.handshake(msg.mechanism, version)
        else:
            answer = await self._step(sasl, bytes(msg.auth_bytes or b""))
            keep = answer.error_code == 0
            if not keep:
                log.info("closing connection from %s: SASL authentication failed (%s)",
                         conn.peer, answer.error_message)
            response = answer
        await self._write(conn, [encode_response(response, version, correlation_id)])
        if sasl.authenticated:
            conn.sasl = None
        return keep

    async def _step(self, sasl: SaslConnection, token: bytes) -> Any:
        server = sasl.server
        if server is not None and server.mechanism == "PLAIN":
            # PLAIN salts the password (thousands of hash rounds): off the loop
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(None, sasl.answer, token)
        return sasl.answer(token)

    async def _raw_token(self, conn: _Connection, token: Union[bytes, memoryview]) -> bool:
        """A bare SASL token after a v0 SaslHandshake: answered bare, size-prefixed."""
        sasl = conn.sasl
        assert sasl is not None
        response = await self._step(sasl, bytes(token))
        if response.error_code:
            log.info("closing connection from %s: SASL authentication failed (%s)",
                     conn.peer, response.error_message)
            return False
        out = bytes(response.auth_bytes or b"")
        await self._write(conn, [_SIZE.pack(len(out)) + out])
        if sasl.authenticated:
            conn.sasl = None
        return True

    async def _write(self, conn: _Connection, parts: List[Part]) -> None:
        if len(parts) > 1 and conn.fd >= 0:
            parts = conn.send_now(parts)
            if not parts:
                return await conn.drain()
        loop = conn.loop
        assert loop is not None
        pending: List[bytes] = []      # bytes parts gathered into one write (one syscall)
        for part in parts:
            if isinstance(part, (bytes, bytearray)):
                pending.append(part)
            elif conn.plaintext and part.size >= _SENDFILE_MIN:
                conn.write(b"".join(pending))
                pending = []
                await conn.drain()
                await loop.sendfile(conn.transport, part.file, part.offset,  # type: ignore[arg-type]
                                    part.size)
            else:
                pending.append(part.read())
        if pending:
            conn.write(pending[0] if len(pending) == 1 else b"".join(pending))
        await conn.drain()
