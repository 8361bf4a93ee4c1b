"""``kafkawire.Client``: a small blocking Kafka client on top of ``kafkawire.protocol``.

One connection per broker, opened on first use, with the API versions
negotiated right after connecting (for each API, the highest version both
sides speak).  Metadata is cached and refreshed when an answer shows it is
stale.  Every call takes ``timeout_ms`` (default ``request_timeout_ms``), the
whole budget for the call including retries.  Requests to different brokers
are all written before any response is read, and several requests may be in
flight on one connection (see :meth:`Client.send`).
"""
from __future__ import annotations

import logging
import random
import ssl
import time
from collections import defaultdict
from typing import (TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Mapping, Optional,
                    Sequence, Tuple, Union)

from kafkawire import protocol as P
from kafkawire.client import _api as A
from kafkawire.client.cluster import (STALE_METADATA_CODES, BrokerInfo, ClusterMetadata,
                                      parse_bootstrap)
from kafkawire.client.connection import BrokerConnection, Pending
from kafkawire.client.exceptions import (ClientClosedError, KafkaConnectionError,
                                         NoBrokersAvailableError, RequestTimeoutError)
from kafkawire.client.partitioner import DefaultPartitioner
from kafkawire.client.security import AuthenticationError, Sasl, security_from
from kafkawire.client.results import (FetchResult, OffsetAndMetadata, OffsetResult,
                                      ProduceResult, TopicResult, as_offset_and_metadata,
                                      normalize_record)
from kafkawire.errors import KafkaWireError, ProtocolError, UnsupportedVersionError
from kafkawire.protocol.error_codes import (COORDINATOR_ERRORS, NOT_CONTROLLER, UNSUPPORTED_VERSION,
                                           BrokerResponseError, error_code, make_error)

if TYPE_CHECKING:
    from kafkawire.protocol.schema import Message

__all__ = ["Client"]

log = logging.getLogger("kafkawire.client")


def _chunks(records: List[tuple], max_bytes: int):
    """Cut ``(value, key, headers, ...)`` tuples into runs of about ``max_bytes`` (uncompressed)."""
    chunk: List[tuple] = []
    size = 0
    for r in records:
        n = 24 + (len(r[0]) if r[0] is not None else 0) + (len(r[1]) if r[1] is not None else 0)
        if r[2]:
            n += sum(len(k) + (len(v) if v is not None else 0) + 4 for k, v in r[2])
        if chunk and size + n > max_bytes:
            yield chunk
            chunk, size = [], 0
        chunk.append(r)
        size += n
    if chunk:
        yield chunk

_OFFSET_SPECS = {"earliest": -2, "latest": -1, "max_timestamp": -3}
_ACKS = {0: 0, 1: 1, -1: -1, "all": -1, "0": 0, "1": 1, "-1": -1}


class _Deadline:
    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds
        self.seconds = seconds

    def left(self) -> float:
        return self.end - time.monotonic()

    def check(self, what: str) -> float:
        left = self.left()
        if left <= 0:
            raise RequestTimeoutError(f"{what} did not finish within {self.seconds * 1000:.0f} ms; "
                                      "raise timeout_ms / request_timeout_ms if the cluster is slow")
        return left


class Client:
    """A blocking client for one Kafka cluster.

    ``bootstrap_servers``: ``"host:port,host2:port"`` or a list.  Use as a
    context manager or call :meth:`close`.  ``max_batch_bytes`` caps the
    (uncompressed) size of one produced batch; keep it under the topic's
    ``max.message.bytes`` (1 MB by default).  A Client is not thread-safe:
    use one per thread (connections are cheap).

    Security: ``security_protocol`` is ``"PLAINTEXT"``, ``"SSL"``,
    ``"SASL_PLAINTEXT"`` or ``"SASL_SSL"``; TLS takes ``ssl_context`` or the
    ``ssl_cafile``/``ssl_certfile``/``ssl_keyfile`` files, SASL
    ``sasl_mechanism`` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER) with
    ``sasl_plain_username``/``sasl_plain_password`` or
    ``sasl_oauth_token_provider``.  A broker that cannot be reached is tried
    again after ``reconnect_backoff_ms``, doubling up to
    ``reconnect_backoff_max_ms`` (with 20% jitter), as Kafka's clients do.
    """

    def __init__(self, bootstrap_servers: Union[str, Sequence[Any]], *,
                 client_id: str = "kafkawire", request_timeout_ms: int = 30_000,
                 connect_timeout_ms: int = 10_000, metadata_max_age_ms: int = 300_000,
                 retries: int = 5, retry_backoff_ms: int = 100,
                 max_frame_size: int = 104_857_600, max_batch_bytes: int = 1_000_000,
                 partitioner: Optional[Callable[..., int]] = None, allow_auto_create_topics: bool = False,
                 reconnect_backoff_ms: int = 50, reconnect_backoff_max_ms: int = 1_000,
                 security_protocol: str = "PLAINTEXT",
                 ssl_context: Optional[ssl.SSLContext] = None, ssl_cafile: Optional[str] = None,
                 ssl_certfile: Optional[str] = None, ssl_keyfile: Optional[str] = None,
                 ssl_password: Optional[str] = None, ssl_check_hostname: bool = True,
                 sasl_mechanism: str = "PLAIN", sasl_plain_username: Optional[str] = None,
                 sasl_plain_password: Optional[str] = None,
                 sasl_oauth_token_provider: Optional[Any] = None) -> None:
        self.bootstrap = parse_bootstrap(bootstrap_servers)
        self.ssl_context, self.sasl = security_from(
            security_protocol, ssl_context, ssl_cafile, ssl_certfile, ssl_keyfile, ssl_password,
            ssl_check_hostname, sasl_mechanism, sasl_plain_username, sasl_plain_password,
            sasl_oauth_token_provider)
        self.reconnect_backoff = reconnect_backoff_ms / 1000.0
        self.reconnect_backoff_max = max(reconnect_backoff_max_ms, reconnect_backoff_ms) / 1000.0
        self._reconnect: Dict[Any, Tuple[int, float]] = {}  # key -> (failures, next attempt)
        self.client_id = client_id
        self.request_timeout = request_timeout_ms / 1000.0
        self.connect_timeout = connect_timeout_ms / 1000.0
        self.retries = retries
        self.retry_backoff = retry_backoff_ms / 1000.0
        self.max_frame_size = max_frame_size
        self.max_batch_bytes = max_batch_bytes
        self.allow_auto_create_topics = allow_auto_create_topics
        self.partitioner = partitioner or DefaultPartitioner()
        self.cluster = ClusterMetadata(metadata_max_age_ms / 1000.0)
        self._conns: Dict[Any, BrokerConnection] = {}
        self._coordinators: Dict[str, int] = {}
        self._closed = False
        # The ApiVersions version the last broker accepted: the next connection starts there,
        # rather than stepping down from ours again (one round trip less per broker).
        self._api_versions_start: Optional[int] = None

    # ------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Close every connection (idempotent)."""
        self._closed = True
        conns, self._conns = list(self._conns.values()), {}
        for c in conns:
            c.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"<kafkawire.Client {','.join(f'{h}:{p}' for h, p in self.bootstrap)} "
                f"connections={len(self._conns)}{' closed' if self._closed else ''}>")

    # ---------------------------------------------------------- connections
    def _open(self, key, host: str, port: int, node_id: Optional[int]) -> BrokerConnection:
        if self._closed:
            raise ClientClosedError("this Client was closed; create a new one")
        conn = self._conns.get(key)
        if conn is not None and conn.connected:
            return conn
        failures, not_before = self._reconnect.get(key, (0, 0.0))
        wait = not_before - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        conn = self._connection(host, port, node_id)
        try:
            conn.connect()
            self._negotiate(conn)
            if self.sasl is not None:
                self._authenticate(conn, self.sasl)
        except BaseException as exc:
            self._failed(key, conn, exc)
            raise
        self._opened(key, conn)
        return conn

    def _connection(self, host: str, port: int, node_id: Optional[int]) -> BrokerConnection:
        return BrokerConnection(host, port, node_id=node_id, connect_timeout=self.connect_timeout,
                                request_timeout=self.request_timeout,
                                max_frame_size=self.max_frame_size, ssl_context=self.ssl_context)

    def _failed(self, key: Any, conn: BrokerConnection, exc: BaseException) -> None:
        """Close a connection that could not be opened; a network failure delays the next try."""
        conn.close()
        if isinstance(exc, (KafkaConnectionError, RequestTimeoutError)):
            failures = self._reconnect.get(key, (0, 0.0))[0]
            delay = min(self.reconnect_backoff * (2 ** failures), self.reconnect_backoff_max)
            delay *= random.uniform(0.8, 1.2)
            self._reconnect[key] = (failures + 1, time.monotonic() + delay)
            log.info("cannot reach %s:%s (%s); next attempt in %.0f ms", conn.host, conn.port, exc,
                     delay * 1000)

    def _opened(self, key: Any, conn: BrokerConnection) -> None:
        self._reconnect.pop(key, None)
        self._conns[key] = conn

    def _open_nodes(self, node_ids: Iterable[int]) -> None:
        """Open connections to several brokers together: connect to each and send each its
        ApiVersions request, then read the answers, so the round trips overlap instead of
        adding up.  Brokers already connected, waiting out a reconnect delay, or not in the
        metadata are left alone; a broker that fails here is retried (and reported) on use."""
        self._finish_nodes(self._start_nodes(node_ids))

    def _start_nodes(self, node_ids: Iterable[int]) -> List[Tuple[int, BrokerConnection, Any]]:
        """The first half of :meth:`_open_nodes`: connect and send ApiVersions; what
        :meth:`_finish_nodes` takes."""
        started: List[Tuple[int, BrokerConnection, Any]] = []
        if self._closed:
            return started
        for node_id in node_ids:
            conn = self._conns.get(node_id)
            info = self.cluster.broker(node_id)
            if (conn is not None and conn.connected) or info is None or \
                    self.reconnect_delay(node_id) > 0 or self._adopt(node_id, info) is not None:
                continue
            conn = self._connection(info.host, info.port, node_id)
            try:
                conn.connect()
                started.append((node_id, conn, self._send_api_versions(conn)))
            except (KafkaConnectionError, RequestTimeoutError) as exc:
                self._failed(node_id, conn, exc)
        return started

    def _finish_nodes(self, started: List[Tuple[int, BrokerConnection, Any]]) -> None:
        """The second half of :meth:`_open_nodes`: read the ApiVersions answers (and
        authenticate); connections that fail are closed, to be retried on use."""
        for node_id, conn, first in started:
            try:
                self._negotiate(conn, first)
                if self.sasl is not None:
                    self._authenticate(conn, self.sasl)
            except (KafkaConnectionError, RequestTimeoutError, KafkaWireError) as exc:
                self._failed(node_id, conn, exc)
                continue
            self._opened(node_id, conn)

    def reconnect_delay(self, node_id: Any) -> float:
        """Seconds until a connection to ``node_id`` may be tried again (0: now)."""
        return max(0.0, self._reconnect.get(node_id, (0, 0.0))[1] - time.monotonic())

    def _authenticate(self, conn: BrokerConnection, sasl: Sasl) -> None:
        """SaslHandshake naming the mechanism, then the mechanism's SaslAuthenticate round trips."""
        if A.SASL_AUTHENTICATE not in conn.api_versions:
            raise AuthenticationError(f"{conn.host}:{conn.port} does not offer SaslAuthenticate; "
                                      "SASL needs Kafka 1.0 or newer")
        version = self._version(conn, A.SASL_HANDSHAKE)
        resp = self._send(conn, P.SaslHandshakeRequest(mechanism=sasl.mechanism), version,
                          None).result(self.request_timeout)
        if resp.error_code:
            offered = ", ".join(resp.mechanisms or ()) or "none"
            raise AuthenticationError(f"{conn.host}:{conn.port} refused SASL mechanism "
                                      f"{sasl.mechanism} ({make_error(resp.error_code)}); it "
                                      f"offers: {offered}")
        auth_version = self._version(conn, A.SASL_AUTHENTICATE)

        def roundtrip(data: bytes) -> bytes:
            r = self._send(conn, P.SaslAuthenticateRequest(auth_bytes=data), auth_version,
                           None).result(self.request_timeout)
            if r.error_code:
                raise AuthenticationError(
                    f"SASL {sasl.mechanism} authentication with {conn.host}:{conn.port} failed: "
                    f"{r.error_message or make_error(r.error_code).name}")
            return bytes(r.auth_bytes or b"")

        sasl.exchange(roundtrip)
        log.debug("authenticated to %s:%s with SASL %s", conn.host, conn.port, sasl.mechanism)

    def _send_api_versions(self, conn: BrokerConnection, version: Optional[int] = None
                           ) -> Tuple[int, Any]:
        """Send ApiVersions (our version, or the one the last broker accepted); ``(version,
        pending answer)``."""
        if version is None:
            version = self._api_versions_start
            if version is None:
                version = A.max_version(A.API_VERSIONS)
        cid = conn.next_correlation_id()
        frame = A.encode_request(A.api_versions_request(self.client_id), version, cid,
                                 self.client_id)
        return version, conn.send(frame, cid, A.API_VERSIONS, version)

    def _negotiate(self, conn: BrokerConnection, sent: Optional[Tuple[int, Any]] = None) -> None:
        """ApiVersions: learn the broker's ranges; step down if it rejects our version.

        A broker that does not speak our ApiVersions version answers
        UNSUPPORTED_VERSION in the v0 layout, listing the versions it does speak; when that
        list is missing or unreadable, the next try is v0, which every broker speaks (as
        Kafka's own client does), not one version down at a round trip each.
        ``sent``: the request already sent (see :meth:`_send_api_versions`).
        """
        version, pending = sent if sent is not None else self._send_api_versions(conn)
        while True:
            payload = pending.result(self.request_timeout)
            # Response header v0 (correlation id), then the error code, in every version.
            code = int.from_bytes(payload[4:6], "big", signed=True) if len(payload) >= 6 else -1
            if code == UNSUPPORTED_VERSION and version > 0:
                try:
                    theirs = {k.api_key: k.max_version
                              for k in A.decode_response(A.API_VERSIONS, 0, payload).api_keys}
                except ProtocolError:  # some brokers (librdkafka's mock) mangle this answer
                    theirs = {}
                version, pending = self._send_api_versions(
                    conn, max(min(theirs.get(A.API_VERSIONS, 0), version - 1), 0))
                continue
            resp = A.decode_response(A.API_VERSIONS, version, payload)
            if resp.error_code:
                raise make_error(resp.error_code, api="ApiVersions")
            conn.api_versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
            conn.api_versions_version = version
            # the client's next connections start at the highest version both speak
            self._api_versions_start = min(conn.api_versions.get(A.API_VERSIONS, (0, version))[1],
                                           A.max_version(A.API_VERSIONS))
            return

    def _node(self, node_id: int) -> BrokerConnection:
        info = self.cluster.broker(node_id)
        if info is None:
            self._refresh(())
            info = self.cluster.broker(node_id)
            if info is None:
                raise KafkaConnectionError(f"broker {node_id} is not in the cluster metadata")
        conn = self._conns.get(node_id)
        if conn is None or not conn.connected:
            adopted = self._adopt(node_id, info)
            if adopted is not None:
                return adopted
        return self._open(node_id, info.host, info.port, node_id)

    def _connected(self, node_id: int) -> Optional[BrokerConnection]:
        """The open connection to broker ``node_id`` (the bootstrap one that leads there
        included), without opening one."""
        conn = self._conns.get(node_id)
        if conn is not None and conn.connected:
            return conn
        info = self.cluster.broker(node_id)
        return self._adopt(node_id, info) if info is not None else None

    def _adopt(self, node_id: int, info: Any) -> Optional[BrokerConnection]:
        """The bootstrap connection that leads to broker ``node_id``, now kept as that broker's."""
        for key, c in list(self._conns.items()):
            if c.connected and c.node_id is None and (c.host, c.port) == (info.host, info.port):
                del self._conns[key]
                c.node_id = node_id
                self._conns[node_id] = c
                return c
        return None

    def _any(self) -> BrokerConnection:
        """A connection to any live broker: an open one, a known one, then the bootstrap list."""
        for key, conn in self._conns.items():
            if conn.connected:
                return conn
        errors = []
        candidates = [(b.node_id, b.host, b.port, b.node_id) for b in self.cluster.brokers.values()]
        candidates += [(("bootstrap", h, p), h, p, None) for h, p in self.bootstrap]
        for key, host, port, node in candidates:
            try:
                return self._open(key, host, port, node)
            except (KafkaConnectionError, RequestTimeoutError) as exc:
                errors.append(f"{host}:{port}: {exc}")
        raise NoBrokersAvailableError("no broker reachable: " + "; ".join(errors))

    def _drop(self, conn: BrokerConnection) -> None:
        for key, c in list(self._conns.items()):
            if c is conn:
                del self._conns[key]
        conn.close()

    def api_version(self, api_key: int, node_id: Optional[int] = None) -> int:
        """The version used for ``api_key`` with that broker (any broker when None)."""
        conn = self._any() if node_id is None else self._node(node_id)
        return self._version(conn, api_key)

    @staticmethod
    def _version(conn: BrokerConnection, api_key: int) -> int:
        ours_min, ours_max = A.min_version(api_key), A.max_version(api_key)
        theirs = conn.api_versions.get(api_key)
        if theirs is None:
            raise UnsupportedVersionError(
                f"broker {conn.host}:{conn.port} does not support {A.api_name(api_key)} "
                f"(API key {api_key})")
        lo, hi = max(ours_min, theirs[0]), min(ours_max, theirs[1])
        if lo > hi:
            raise UnsupportedVersionError(
                f"no common {A.api_name(api_key)} version: kafkawire speaks v{ours_min}-{ours_max}, "
                f"{conn.host}:{conn.port} v{theirs[0]}-{theirs[1]}")
        return hi

    # ---------------------------------------------------------- raw requests
    def send(self, message: Message, *, node_id: Optional[int] = None, version: Optional[int] = None,
             timeout_ms: Optional[int] = None, expect_response: bool = True) -> Optional[Pending]:
        """Write ``message`` to a broker without waiting; ``.result()`` on the return value reads it.

        Several sends to the same broker are pipelined on its one connection.
        ``version`` defaults to the negotiated one.
        """
        conn = self._any() if node_id is None else self._node(node_id)
        return self._send(conn, message, version, timeout_ms, expect_response)

    def _send(self, conn: BrokerConnection, message, version: Optional[int],
              timeout_ms: Optional[float], expect_response: bool = True) -> Optional[Pending]:
        api_key = A.api_key_of(message)
        if version is None:
            version = self._version(conn, api_key)
        cid = conn.next_correlation_id()
        frame = A.encode_request(message, version, cid, self.client_id)
        timeout = self.request_timeout if timeout_ms is None else timeout_ms / 1000.0
        return conn.send(frame, cid, api_key, version, expect_response=expect_response,
                         timeout=timeout,
                         decode=lambda f, k=api_key, v=version: A.decode_response(k, v, f))

    def request(self, message: Message, *, node_id: Optional[int] = None,
                version: Optional[int] = None, timeout_ms: Optional[int] = None) -> Message:
        """Send ``message`` and return the decoded response (no retries, no error checks)."""
        p = self.send(message, node_id=node_id, version=version, timeout_ms=timeout_ms)
        assert p is not None    # a response is expected, so send() returned its Pending
        response: Message = p.result(None if timeout_ms is None else timeout_ms / 1000.0)
        return response

    # ------------------------------------------------------------- metadata
    def _refresh(self, topics: Optional[Sequence[str]], *, deadline: Optional[_Deadline] = None,
                 auto_create: Optional[bool] = None):
        deadline = deadline or _Deadline(self.request_timeout)
        auto = self.allow_auto_create_topics if auto_create is None else auto_create
        last: Optional[BaseException] = None
        for _ in range(max(1, len(self.cluster.brokers) + len(self.bootstrap))):
            conn = self._any()
            try:
                version = self._version(conn, A.METADATA)
                req = A.metadata_request(topics, auto, version)
                pending = self._send(conn, req, version, None)
                resp = pending.result(self._budget(deadline, "Metadata"))
            except (KafkaConnectionError, RequestTimeoutError) as exc:
                last = exc
                self._drop(conn)
                continue
            self.cluster.update(resp, all_topics=topics is None)
            return resp
        raise NoBrokersAvailableError(f"metadata refresh failed on every broker: {last}")

    def metadata(self, topics: Optional[Iterable[str]] = None, *,
                 allow_auto_topic_creation: Optional[bool] = None,
                 timeout_ms: Optional[int] = None) -> ClusterMetadata:
        """Fetch metadata for ``topics`` (all topics when None) and return the updated cache.

        ``result.brokers`` maps node id -> BrokerInfo, ``result.topics`` name ->
        TopicInfo (``.partitions`` -> PartitionInfo with leader/replicas/isr).
        A topic's ``error_code`` is left for the caller to inspect.
        """
        topics = None if topics is None else [topics] if isinstance(topics, str) else list(topics)
        self._refresh(topics, deadline=self._deadline(timeout_ms),
                      auto_create=allow_auto_topic_creation)
        return self.cluster

    def _deadline(self, timeout_ms: Optional[float]) -> _Deadline:
        return _Deadline(self.request_timeout if timeout_ms is None else timeout_ms / 1000.0)

    def _topic(self, topic: str, deadline: _Deadline):
        """The topic's metadata, refreshing (and retrying while leaders are elected) as needed."""
        for attempt in range(self.retries + 1):
            if self.cluster.needs_refresh([topic]):
                self._refresh([topic], deadline=deadline)
            info = self.cluster.topics.get(topic)
            if info is not None and info.error_code == 0 and info.partitions:
                return info
            code = info.error_code if info is not None else 3
            if code and not error_code(code).retriable or attempt == self.retries:
                raise make_error(code or 5, api="Metadata", topic=topic)
            self.cluster.mark_stale([topic])
            self._backoff(deadline, "Metadata")
        raise AssertionError("unreachable")

    def _budget(self, deadline: _Deadline, what: str, extra: float = 0.0) -> float:
        """Seconds to wait for one response: the request timeout, capped by the call's budget."""
        return min(self.request_timeout + extra, deadline.check(what))

    def _backoff(self, deadline: _Deadline, what: str) -> None:
        wait = min(self.retry_backoff, deadline.check(what))
        log.info("%s: retrying in %.0f ms", what, wait * 1000)
        time.sleep(wait)

    def _leader_conn(self, topic: str, partition: int, deadline: _Deadline) -> BrokerConnection:
        info = self._topic(topic, deadline)
        if partition not in info.partitions:
            raise make_error(3, f"{topic} has {info.num_partitions} partitions", topic=topic,
                             partition=partition)
        leader = self.cluster.leader(topic, partition)
        if leader is None:
            self.cluster.mark_stale([topic])
            raise make_error(5, topic=topic, partition=partition)
        return self._node(leader)

    def _retrying(self, what: str, deadline: _Deadline, fn):
        """Run ``fn()``; on stale metadata or broken connections refresh and retry."""
        attempt = 0
        while True:
            try:
                return fn()
            except BrokerResponseError as exc:
                if not exc.retriable or attempt >= self.retries:
                    raise
                if exc.code in STALE_METADATA_CODES and exc.topic is not None:
                    self.cluster.mark_stale([exc.topic])
            except (KafkaConnectionError, RequestTimeoutError):
                if attempt >= self.retries or deadline.left() <= 0:
                    raise
                self.cluster.mark_stale()
            attempt += 1
            self._backoff(deadline, what)

    # -------------------------------------------------------------- produce
    def produce(self, topic: str, records: Iterable[Any], partition: Optional[int] = None, *,
                acks: Union[int, str] = 1, compression: str = "none",
                timeout_ms: Optional[int] = None) -> List[ProduceResult]:
        """Write ``records`` to ``topic``; return one :class:`ProduceResult` per partition written.

        Records are bytes/str values, ``(key, value)`` tuples, dicts with
        value/key/headers/timestamp/partition, or ``ProducerRecord``s.  Without
        ``partition``, keyed records go where Kafka's default partitioner puts
        them (murmur2) and keyless ones to one partition per call, rotating.
        ``acks``: 0 (no answer), 1 (leader) or -1/"all" (in-sync replicas).
        """
        if acks not in _ACKS:
            raise ValueError(f"acks must be 0, 1, -1 or 'all', not {acks!r}")
        acks = _ACKS[acks]
        deadline = self._deadline(timeout_ms)
        recs = [normalize_record(r) for r in records]
        if not recs:
            return []
        info = self._topic(topic, deadline)
        by_partition: Dict[int, list] = defaultdict(list)
        n_parts = info.num_partitions
        keyless = None
        for r in recs:
            p = r[4] if r[4] is not None else partition
            if p is None:
                if r[1] is not None:
                    p = self.partitioner(topic, r[1], n_parts)
                else:
                    if keyless is None:
                        keyless = self.partitioner(topic, None, n_parts,
                                                   info.available_partitions())
                    p = keyless
            by_partition[p].append(r)
        for p in by_partition:
            if p not in info.partitions:
                raise ValueError(f"{topic} has partitions 0..{n_parts - 1}, not {p}")
        now = int(time.time() * 1000)
        # Kafka takes one batch per partition per request (Produce v3+), so a partition's
        # records are cut into batches of about ``max_batch_bytes`` and the requests for
        # the later ones are pipelined behind the first on the leader's connection.
        batches: Dict[Tuple[int, int], Tuple[bytes, int]] = {}
        for p, rs in by_partition.items():
            for i, chunk in enumerate(_chunks(rs, self.max_batch_bytes)):
                batches[(p, i)] = (A.build_batch(chunk, compression, now), len(chunk))
        done: Dict[Tuple[int, int], ProduceResult] = {}
        todo = sorted(batches)
        attempt = 0
        while todo:
            failed, error = self._produce_round(topic, todo, batches, acks, deadline, done)
            if not failed:
                break
            if attempt >= self.retries or not getattr(error, "retriable", True):
                raise error
            attempt += 1
            self.cluster.mark_stale([topic])
            self._backoff(deadline, "Produce")
            self._topic(topic, deadline)
            todo = sorted(failed)
        results = []
        for p in sorted(by_partition):
            first = done[(p, 0)]
            results.append(ProduceResult(topic, p, first.base_offset, len(by_partition[p]),
                                         first.log_append_time, first.log_start_offset))
        return results

    def _produce_round(self, topic, keys, batches, acks, deadline, done):
        """Send every (partition, chunk) batch in ``keys``; return (failed keys, last error)."""
        # leader -> chunk index -> partitions: one request per (leader, chunk index)
        plan: Dict[int, Dict[int, List[int]]] = defaultdict(lambda: defaultdict(list))
        failed: List[Tuple[int, int]] = []
        error: Optional[BaseException] = None
        for p, i in keys:
            leader = self.cluster.leader(topic, p)
            if leader is None:
                failed.append((p, i))
                error = make_error(5, api="Produce", topic=topic, partition=p)
            else:
                plan[leader][i].append(p)
        pendings = []
        timeout_ms = max(1, int(deadline.left() * 1000))
        for leader, by_chunk in plan.items():
            try:
                conn = self._node(leader)
                for i in sorted(by_chunk):
                    ps = by_chunk[i]
                    req = A.produce_request(topic, {p: batches[(p, i)][0] for p in ps}, acks,
                                            timeout_ms)
                    pendings.append((i, ps, conn, self._send(conn, req, None, timeout_ms,
                                                             expect_response=acks != 0)))
            except (KafkaConnectionError, RequestTimeoutError) as exc:
                self.cluster.mark_stale()
                sent = {(p, i) for i, ps, c, _ in pendings if c is not None for p in ps}
                failed.extend((p, i) for i, ps in by_chunk.items() for p in ps
                              if (p, i) not in sent)
                error = exc
        for i, ps, conn, pending in pendings:
            if pending is None:
                for p in ps:
                    done[(p, i)] = ProduceResult(topic, p, -1, batches[(p, i)][1])
                continue
            try:
                resp = pending.result(self._budget(deadline, "Produce"))
            except (KafkaConnectionError, RequestTimeoutError) as exc:
                self._drop(conn)
                self.cluster.mark_stale()
                failed.extend((p, i) for p in ps)
                error = exc
                continue
            answered = A.produce_partitions_checked(resp, topic, ps)
            for pr in answered:
                p = pr.index
                if pr.error_code:
                    err = make_error(pr.error_code, getattr(pr, "error_message", None),
                                     api="Produce", topic=topic, partition=p)
                    if not err.retriable:
                        raise err
                    failed.append((p, i))
                    error = err
                else:
                    done[(p, i)] = ProduceResult(topic, p, pr.base_offset, batches[(p, i)][1],
                                                 getattr(pr, "log_append_time_ms", -1),
                                                 getattr(pr, "log_start_offset", -1))
        return failed, error

    # ---------------------------------------------------------------- fetch
    def fetch(self, topic: str, partition: int, offset: int, *, max_wait_ms: int = 500,
              min_bytes: int = 1, max_bytes: int = 52_428_800,
              partition_max_bytes: Optional[int] = None, isolation_level: int = 0,
              verify_crc: bool = False, timeout_ms: Optional[int] = None) -> FetchResult:
        """Read from ``offset`` (long poll: up to ``max_wait_ms`` for ``min_bytes``).

        Returns a :class:`FetchResult` whose ``batches`` come from
        ``kafkawire.iter_batches`` over the response's records bytes.
        """
        if timeout_ms is None:
            timeout_ms = self.request_timeout * 1000 + max_wait_ms
        deadline = self._deadline(timeout_ms)
        pmax = max_bytes if partition_max_bytes is None else partition_max_bytes

        def once():
            conn = self._leader_conn(topic, partition, deadline)
            version = self._version(conn, A.FETCH)
            topic_id = self.cluster.topics[topic].topic_id
            req = A.fetch_request(topic, topic_id, partition, offset, max_wait_ms, min_bytes,
                                  max_bytes, pmax, isolation_level, version,
                                  self.cluster.topics[topic].partitions[partition].leader_epoch)
            try:
                pending = self._send(conn, req, version, None)
                resp = pending.result(self._budget(deadline, "Fetch", max_wait_ms / 1000.0))
            except (KafkaConnectionError, RequestTimeoutError):
                self._drop(conn)
                raise
            if getattr(resp, "error_code", 0):
                raise make_error(resp.error_code, api="Fetch", topic=topic, partition=partition)
            pr = A.fetch_partition(resp, topic, topic_id, partition)
            if pr.error_code:
                raise make_error(pr.error_code, api="Fetch", topic=topic, partition=partition)
            return A.fetch_result(topic, partition, offset, pr, verify_crc)

        return self._retrying("Fetch", deadline, once)

    # ---------------------------------------------------------- list offsets
    def list_offsets(self, topic: str, partition: int, spec: Union[str, int] = "latest", *,
                     isolation_level: int = 0, timeout_ms: Optional[int] = None) -> OffsetResult:
        """``"earliest"``, ``"latest"``, ``"max_timestamp"`` or a timestamp in ms.

        For a timestamp, the result is the first offset whose timestamp is at
        or after it (offset -1 when there is none).
        """
        if isinstance(spec, str):
            if spec not in _OFFSET_SPECS:
                raise ValueError(f"offset spec must be one of {sorted(_OFFSET_SPECS)} or a "
                                 f"timestamp in ms, not {spec!r}")
            ts = _OFFSET_SPECS[spec]
        else:
            ts = int(spec)
        deadline = self._deadline(timeout_ms)

        def once():
            conn = self._leader_conn(topic, partition, deadline)
            version = self._version(conn, A.LIST_OFFSETS)
            req = A.list_offsets_request(topic, partition, ts, isolation_level, version)
            try:
                pending = self._send(conn, req, version, None)
                resp = pending.result(self._budget(deadline, "ListOffsets"))
            except (KafkaConnectionError, RequestTimeoutError):
                self._drop(conn)
                raise
            for t in resp.topics:
                for p in t.partitions:
                    if p.partition_index != partition:
                        continue
                    if p.error_code:
                        raise make_error(p.error_code, api="ListOffsets", topic=topic,
                                         partition=partition)
                    return OffsetResult(topic, partition, p.offset, p.timestamp,
                                        getattr(p, "leader_epoch", -1))
            raise make_error(3, "partition missing from ListOffsets response", api="ListOffsets",
                             topic=topic, partition=partition)

        return self._retrying("ListOffsets", deadline, once)

    # ---------------------------------------------------------- coordinators
    def find_coordinator(self, group: str, *, key_type: int = 0,
                         timeout_ms: Optional[int] = None) -> BrokerInfo:
        """The broker coordinating ``group`` (key_type 1: a transactional id)."""
        deadline = self._deadline(timeout_ms)
        attempt = 0
        while True:
            conn = self._any()
            version = self._version(conn, A.FIND_COORDINATOR)
            req = A.find_coordinator_request(group, key_type, version)
            try:
                pending = self._send(conn, req, version, None)
                resp = pending.result(self._budget(deadline, "FindCoordinator"))
            except (KafkaConnectionError, RequestTimeoutError):
                self._drop(conn)
                if attempt >= self.retries:
                    raise
                attempt += 1
                continue
            code, msg, node, host, port = A.coordinator_of(resp, group, version)
            if code == 0:
                info = BrokerInfo(node, host, port)
                self._coordinators[group] = node
                if self.cluster.broker(node) != info:
                    self.cluster.brokers[node] = info
                return info
            err = make_error(code, msg, api="FindCoordinator", group=group)
            if not err.retriable or attempt >= self.retries:
                raise err
            attempt += 1
            self._backoff(deadline, "FindCoordinator")

    def _coordinator_call(self, group: str, what: str, deadline: _Deadline, fn):
        attempt = 0
        while True:
            node = self._coordinators.get(group)
            if node is None:
                node = self.find_coordinator(group, timeout_ms=deadline.check(what) * 1000).node_id
            try:
                conn = self._node(node)
                return fn(conn)
            except BrokerResponseError as exc:
                if exc.code not in COORDINATOR_ERRORS and not exc.retriable or \
                        attempt >= self.retries:
                    raise
                if exc.code in COORDINATOR_ERRORS:
                    self._coordinators.pop(group, None)
            except (KafkaConnectionError, RequestTimeoutError):
                self._coordinators.pop(group, None)
                if attempt >= self.retries:
                    raise
            attempt += 1
            self._backoff(deadline, what)

    def commit_offsets(self, group: str,
                       offsets: Mapping[Tuple[str, int], Union[int, Tuple[int, str],
                                                               OffsetAndMetadata]], *,
                       generation_id: int = -1, member_id: str = "",
                       timeout_ms: Optional[int] = None) -> None:
        """Commit ``{(topic, partition): offset}`` for ``group`` (simple, group-less commit by default).

        A value may be an ``int``, ``(offset, metadata)`` or ``OffsetAndMetadata``.
        """
        norm = {tp: as_offset_and_metadata(v) for tp, v in offsets.items()}
        deadline = self._deadline(timeout_ms)

        def call(conn):
            version = self._version(conn, A.OFFSET_COMMIT)
            req = A.offset_commit_request(group, norm, generation_id, member_id, version)
            try:
                pending = self._send(conn, req, version, None)
                resp = pending.result(self._budget(deadline, "OffsetCommit"))
            except (KafkaConnectionError, RequestTimeoutError):
                self._drop(conn)
                raise
            for t in resp.topics:
                for p in t.partitions:
                    if p.error_code:
                        raise make_error(p.error_code, api="OffsetCommit", group=group,
                                         topic=t.name, partition=p.partition_index)

        self._coordinator_call(group, "OffsetCommit", deadline, call)

    def fetch_offsets(self, group: str, partitions: Optional[Iterable[Tuple[str, int]]] = None, *,
                      timeout_ms: Optional[int] = None) -> Dict[Tuple[str, int], OffsetAndMetadata]:
        """The group's committed offsets for ``partitions`` (all of them when None)."""
        parts = None if partitions is None else list(partitions)
        deadline = self._deadline(timeout_ms)

        def call(conn):
            version = self._version(conn, A.OFFSET_FETCH)
            req = A.offset_fetch_request(group, parts, version)
            try:
                pending = self._send(conn, req, version, None)
                resp = pending.result(self._budget(deadline, "OffsetFetch"))
            except (KafkaConnectionError, RequestTimeoutError):
                self._drop(conn)
                raise
            code, topics = A.offset_fetch_topics(resp, group)
            if code:
                raise make_error(code, api="OffsetFetch", group=group)
            out = {}
            for t in topics:
                for p in t.partitions:
                    if p.error_code:
                        raise make_error(p.error_code, api="OffsetFetch", group=group,
                                         topic=t.name, partition=p.partition_index)
                    out[(t.name, p.partition_index)] = OffsetAndMetadata(
                        p.committed_offset, p.metadata, getattr(p, "committed_leader_epoch", -1))
            return out

        return self._coordinator_call(group, "OffsetFetch", deadline, call)

    # ---------------------------------------------------------------- admin
    def _controller_call(self, what: str, deadline: _Deadline, fn):
        attempt = 0
        while True:
            if self.cluster.controller_id < 0 or self.cluster.needs_refresh():
                self._refresh(None, deadline=deadline)
            node = self.cluster.controller_id
            # A controller id that names no broker (KRaft clusters may say -1) means "ask anyone".
            conn = self._node(node) if node in self.cluster.brokers else self._any()
            try:
                return fn(conn)
            except BrokerResponseError as exc:
                if exc.code != NOT_CONTROLLER and not exc.retriable or attempt >= self.retries:
                    raise
                self.cluster.mark_stale()
            except (KafkaConnectionError, RequestTimeoutError):
                self._drop(conn)
                self.cluster.mark_stale()
                if attempt >= self.retries:
                    raise
            attempt += 1
            self._backoff(deadline, what)

    def create_topics(self, topics: Union[str, Iterable[Any]], *, num_partitions: int = 1,
                      replication_factor: int = 1, configs: Optional[Mapping[str, str]] = None,
                      validate_only: bool = False, raise_errors: bool = True,
                      timeout_ms: Optional[int] = None) -> Dict[str, TopicResult]:
        """Create topics: names, or dicts with name/num_partitions/replication_factor/configs.

        With ``raise_errors`` the first per-topic error is raised (use
        ``raise_errors=False`` to get every result, e.g. to ignore
        TOPIC_ALREADY_EXISTS).
        """
        specs = []
        for t in ([topics] if isinstance(topics, (str, Mapping)) else topics):
            if isinstance(t, str):
                t = {"name": t}
            specs.append({"name": t["name"],
                          "num_partitions": t.get("num_partitions", num_partitions),
                          "replication_factor": t.get("replication_factor", replication_factor),
                          "configs": dict(t.get("configs", configs) or {})})
        deadline = self._deadline(timeout_ms)

        def call(conn):
            version = self._version(conn, A.CREATE_TOPICS)
            req = A.create_topics_request(specs, int(max(deadline.left(), 0.001) * 1000),
                                          validate_only, version)
            pending = self._send(conn, req, version, None)
            resp = pending.result(self._budget(deadline, "CreateTopics"))
            out = {}
            for t in resp.topics:
                err = None
                if t.error_code:
                    err = make_error(t.error_code, getattr(t, "error_message", None),
                                     api="CreateTopics", topic=t.name)
                    if t.error_code == NOT_CONTROLLER:
                        raise err
                out[t.name] = TopicResult(t.name, err, getattr(t, "num_partitions", -1),
                                          getattr(t, "replication_factor", -1),
                                          getattr(t, "topic_id", None))
            A.check_answered("CreateTopics", [s["name"] for s in specs], out)
            return out

        out = self._controller_call("CreateTopics", deadline, call)
        self.cluster.mark_stale(out)
        if raise_errors:
            for r in out.values():
                if r.error is not None:
                    raise r.error
        return out

    def delete_topics(self, topics: Union[str, Iterable[str]], *, raise_errors: bool = True,
                      timeout_ms: Optional[int] = None) -> Dict[str, TopicResult]:
        """Delete topics by name; see :meth:`create_topics` for ``raise_errors``."""
        names = [topics] if isinstance(topics, str) else list(topics)
        deadline = self._deadline(timeout_ms)

        def call(conn):
            version = self._version(conn, A.DELETE_TOPICS)
            req = A.delete_topics_request(names, int(max(deadline.left(), 0.001) * 1000), version)
            pending = self._send(conn, req, version, None)
            resp = pending.result(self._budget(deadline, "DeleteTopics"))
            out = {}
            for t in A.delete_topics_results(resp):
                err = None
                if t.error_code:
                    err = make_error(t.error_code, getattr(t, "error_message", None),
                                     api="DeleteTopics", topic=t.name)
                    if t.error_code == NOT_CONTROLLER:
                        raise err
                out[t.name] = TopicResult(t.name, err, topic_id=getattr(t, "topic_id", None))
            A.check_answered("DeleteTopics", names, out)
            return out

        out = self._controller_call("DeleteTopics", deadline, call)
        for name in out:
            self.cluster.topics.pop(name, None)
        if raise_errors:
            for r in out.values():
                if r.error is not None:
                    raise r.error
        return out
