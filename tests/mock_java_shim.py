"""A loopback shim that lets Kafka 3.9.1's Java clients talk to librdkafka's mock cluster.

The mock speaks ApiVersions up to v2.  Java's clients open every connection
with ApiVersions v4; the mock answers UNSUPPORTED_VERSION in the v0 layout,
which Java reads as a v4 body whose ``throttle_time_ms`` is 1179648, so it
throttles each broker for about twenty minutes and never sends Metadata
("Give up sending metadata request since no node is available").  The shim
sits in front of each mock broker and passes every byte through, except that
it asks the mock ApiVersions v2 for Java and answers Java in the version it
asked (same content), and it names its own ports in the broker addresses of
Metadata and FindCoordinator answers so Java's later connections come back
through it.  Nothing else is touched.
"""
from __future__ import annotations

import socket
import struct
import threading
from typing import Dict, List, Tuple

from kafkawire import protocol as P
from kafkawire.client import _api as A

_API_VERSIONS, _METADATA, _FIND_COORDINATOR = 18, 3, 10


def _read_frame(sock: socket.socket) -> bytes:
    head = b""
    while len(head) < 4:
        chunk = sock.recv(4 - len(head))
        if not chunk:
            raise ConnectionError
        head += chunk
    (size,) = struct.unpack(">i", head)
    body = bytearray()
    while len(body) < size:
        chunk = sock.recv(size - len(body))
        if not chunk:
            raise ConnectionError
        body += chunk
    return bytes(body)


class MockShim:
    """One listening port per mock broker; ``bootstrap`` names them."""

    def __init__(self, mock_bootstrap: str) -> None:
        self.upstream: List[Tuple[str, int]] = []
        for hp in mock_bootstrap.split(","):
            host, port = hp.rsplit(":", 1)
            self.upstream.append((host, int(port)))
        self.port_map: Dict[int, int] = {}      # mock port -> shim port
        self._servers = []
        self._stop = threading.Event()
        self._socks: List[socket.socket] = []
        for host, port in self.upstream:
            srv = socket.socket()
            srv.bind(("127.0.0.1", 0))
            srv.listen(16)
            srv.settimeout(0.2)
            self.port_map[port] = srv.getsockname()[1]
            self._servers.append(srv)
            threading.Thread(target=self._accept, args=(srv, host, port), daemon=True).start()

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{self.port_map[p]}" for _, p in self.upstream)

    def close(self) -> None:
        self._stop.set()
        for s in self._servers + self._socks:
            try:
                s.close()
            except OSError:
                pass

    def _accept(self, srv: socket.socket, host: str, port: int) -> None:
        while not self._stop.is_set():
            try:
                down, _ = srv.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            down.settimeout(None)
            try:
                up = socket.create_connection((host, port))
            except OSError:
                down.close()
                continue
            self._socks += [down, up]
            asked: Dict[int, Tuple[int, int]] = {}   # correlation id -> (api key, version)
            threading.Thread(target=self._requests, args=(down, up, asked), daemon=True).start()
            threading.Thread(target=self._responses, args=(up, down, asked), daemon=True).start()

    def _requests(self, down: socket.socket, up: socket.socket, asked) -> None:
        try:
            while True:
                body = _read_frame(down)
                key, version, cid = struct.unpack_from(">hhi", body, 0)
                asked[cid] = (key, version)
                if key == _API_VERSIONS and version > 2:
                    body = struct.pack(">hhih", key, 2, cid, 4) + b"java"   # v2: empty body
                up.sendall(struct.pack(">i", len(body)) + body)
        except (ConnectionError, OSError):
            pass
        finally:
            for s in (down, up):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _responses(self, up: socket.socket, down: socket.socket, asked) -> None:
        try:
            while True:
                body = _read_frame(up)
                (cid,) = struct.unpack_from(">i", body, 0)
                key, version = asked.pop(cid, (None, None))
                if key == _API_VERSIONS and version is not None and version > 2:
                    msg = A.decode_response(key, 2, body)
                    out = P.encode_response(msg, version, cid)
                elif key in (_METADATA, _FIND_COORDINATOR):
                    msg = A.decode_response(key, version, body)
                    self._rewrite(key, msg)
                    out = P.encode_response(msg, version, cid)
                else:
                    out = struct.pack(">i", len(body)) + body
                down.sendall(out)
        except (ConnectionError, OSError):
            pass

    def _rewrite(self, key: int, msg) -> None:
        if key == _METADATA:
            for b in msg.brokers:
                b.host, b.port = "127.0.0.1", self.port_map.get(b.port, b.port)
        else:
            for c in getattr(msg, "coordinators", None) or ():
                c.host, c.port = "127.0.0.1", self.port_map.get(c.port, c.port)
            if getattr(msg, "port", 0):
                msg.host, msg.port = "127.0.0.1", self.port_map.get(msg.port, msg.port)
