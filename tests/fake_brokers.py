"""Scripted Kafka brokers on loopback, for the client tests' failure paths.

``FakeCluster`` decodes requests with ``kafkawire.protocol.decode_request`` and
answers with ``encode_response``; each test scripts the answers (errors,
silence, broken connections, wrong correlation ids).  ``IdempotentLog`` keeps
each partition's log the way a broker's producer state does (KIP-98).
``FakeGroupCluster`` adds a small group coordinator and in-memory partitions;
``Member`` is a group member on its own thread that logs every delivery.
"""
from __future__ import annotations

import socket
import struct
import threading
import time
import uuid
from typing import Dict, List, Optional, Tuple

import kafkawire
from kafkawire import protocol as P
from kafkawire.client.group_metadata import TopicPartition, decode_assignment
from kafkawire.records.builder import BatchBuilder

TOPIC_ID = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
TS0 = 1_700_000_000_000


class FakeCluster:
    """A few fake brokers on loopback sharing one script.

    ``handlers[api_key](broker, frame) -> response message | None | "close" | "silent"``
    (None: no response, e.g. acks=0).  ``versions`` is what ApiVersions advertises.
    """

    def __init__(self, n: int = 1, versions=None, ssl_context=None) -> None:
        self.ssl_context = ssl_context  # a server-side context: the brokers speak TLS
        self.versions = dict(versions or P.supported_versions())
        self.handlers = {}
        self.requests = []  # (node_id, api_key, version, message)
        self.controller = 0
        self.leaders = {}
        self.partitions = {"t": 2}
        self.brokers = []
        self._stop = threading.Event()
        self._threads = []
        self._conns = []
        for node in range(n):
            srv = socket.socket()
            srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            srv.bind(("127.0.0.1", 0))
            srv.listen(16)
            srv.settimeout(0.1)
            self.brokers.append((node, srv))
            t = threading.Thread(target=self._accept, args=(node, srv), daemon=True)
            t.start()
            self._threads.append(t)
        self.handlers[18] = self._api_versions
        self.handlers[3] = self._metadata

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{srv.getsockname()[1]}" for _, srv in self.brokers)

    def port(self, node: int) -> int:
        return self.brokers[node][1].getsockname()[1]

    def close(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(2)
        for _, srv in self.brokers:
            srv.close()
        for c in self._conns:
            try:
                c.close()
            except OSError:
                pass

    # -------------------------------------------------------------- serving
    def _accept(self, node: int, srv: socket.socket) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = srv.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            if self.ssl_context is not None:
                try:
                    conn.settimeout(5)
                    conn = self.ssl_context.wrap_socket(conn, server_side=True)
                except OSError:
                    conn.close()
                    continue
            self._conns.append(conn)
            t = threading.Thread(target=self._serve, args=(node, conn), daemon=True)
            t.start()

    def _recv_exact(self, conn, n):
        buf = b""
        while len(buf) < n:
            chunk = conn.recv(n - len(buf))
            if not chunk:
                raise ConnectionError
            buf += chunk
        return buf

    def _serve(self, node: int, conn: socket.socket) -> None:
        conn.settimeout(0.2)
        try:
            while not self._stop.is_set():
                try:
                    head = self._recv_exact(conn, 4)
                except socket.timeout:
                    continue
                size = struct.unpack(">i", head)[0]
                conn.settimeout(5)
                body = self._recv_exact(conn, size)
                conn.settimeout(0.2)
                req = P.decode_request(body, sized=False)
                self.requests.append((node, req.api_key, req.api_version, req.message))
                out = self.handlers[req.api_key](node, req)
                if out is None or out == "silent":
                    continue
                if out == "close":
                    conn.close()
                    return
                if isinstance(out, bytes):
                    conn.sendall(out)
                    continue
                conn.sendall(P.encode_response(out, req.api_version, req.correlation_id))
        except (ConnectionError, OSError):
            pass

    # ------------------------------------------------------ default answers
    def _api_versions(self, node, req):
        return P.ApiVersionsResponse(api_keys=[
            {"api_key": k, "min_version": lo, "max_version": hi}
            for k, (lo, hi) in sorted(self.versions.items())])

    def metadata_response(self):
        topics = []
        for name, n in self.partitions.items():
            topics.append({"name": name, "topic_id": TOPIC_ID, "partitions": [
                {"partition_index": p, "leader_id": self.leaders.get((name, p), 0),
                 "replica_nodes": [0], "isr_nodes": [0]} for p in range(n)]})
        return P.MetadataResponse(
            brokers=[{"node_id": node, "host": "127.0.0.1", "port": srv.getsockname()[1]}
                     for node, srv in self.brokers],
            cluster_id="fake", controller_id=self.controller, topics=topics)

    def _metadata(self, node, req):
        return self.metadata_response()

    def count(self, api_key: int) -> int:
        return sum(1 for r in self.requests if r[1] == api_key)


class IdempotentLog:
    """A broker's view of idempotent produce requests, per partition."""

    def __init__(self, fake: FakeCluster) -> None:
        self.fake = fake
        self.logs = {}          # (topic, partition) -> [(value, key, headers, pid, epoch, seq)]
        self.state = {}         # (topic, partition, pid) -> (epoch, [(first seq, last seq, offset)])
        self.next_pid = 1000
        self.init_requests = []
        self.lock = threading.Lock()
        self.fault = None       # fault(node, req, n) -> None | answer; n counts Produce requests
        self.n = 0
        fake.handlers[22] = self.init_producer_id
        fake.handlers[0] = self.produce

    def init_producer_id(self, node, req):
        m = req.message
        self.init_requests.append((m.producer_id, m.producer_epoch))
        if m.producer_id >= 0:
            return P.InitProducerIdResponse(producer_id=m.producer_id,
                                            producer_epoch=m.producer_epoch + 1)
        self.next_pid += 1
        return P.InitProducerIdResponse(producer_id=self.next_pid, producer_epoch=0)

    def produce(self, node, req):
        with self.lock:
            self.n += 1
            n = self.n
        if self.fault is not None:
            out = self.fault(node, req, n)
            if out is not None:
                return out
        return self.answer(req)

    def append(self, topic, partition, data):
        """Apply one batch as a broker would: (error code, base offset)."""
        batch = next(iter(kafkawire.iter_batches(data, verify_crc=True)))
        tp = (topic, partition)
        log = self.logs.setdefault(tp, [])
        pid, epoch, seq = batch.producer_id, batch.producer_epoch, batch.base_sequence
        n = len(batch.records())
        if pid >= 0:
            st_epoch, seen = self.state.get((topic, partition, pid), (epoch, []))
            if epoch < st_epoch:
                return 47, -1
            if epoch > st_epoch:
                seen = []
                if seq != 0:
                    return 45, -1
            for first, last, offset in seen:
                if first == seq:
                    return 0, offset  # a duplicate: its first answer again
            # sequences wrap from 2**31-1 to 0, as a broker counts them
            expected = (seen[-1][1] + 1) & 0x7FFFFFFF if seen else 0
            if seq != expected:
                return 45, -1
            seen = (seen + [(seq, (seq + n - 1) & 0x7FFFFFFF, len(log))])[-5:]
            self.state[(topic, partition, pid)] = (epoch, seen)
        base = len(log)
        for r in batch.records():
            log.append((r.value, r.key, list(r.headers), pid, epoch, seq))
        return 0, base

    def answer(self, req, codes=None):
        out = []
        for t in req.message.topic_data:
            parts = []
            for p in t.partition_data:
                code = (codes or {}).get((t.name, p.index))
                if code is None:
                    with self.lock:
                        code, base = self.append(t.name, p.index, p.records)
                else:
                    base = -1
                parts.append({"index": p.index, "error_code": code, "base_offset": base})
            out.append({"name": t.name, "partition_responses": parts})
        return P.ProduceResponse(responses=out)

    def values(self, topic="t", partition=0):
        return [r[0] for r in self.logs.get((topic, partition), [])]


def numbered(n, prefix=b"v"):
    """``[prefix + b"0", prefix + b"1", ...]``: ``n`` distinct values in order."""
    return [prefix + str(i).encode() for i in range(n)]


def send_all(p, values, partition=0, topic="t"):
    """Send ``values`` to one partition with producer ``p`` and flush; the futures."""
    futures = [p.send(topic, v, partition=partition) for v in values]
    assert p.flush(20) == 0
    return futures


class FakeGroupCluster(FakeCluster):
    """Two brokers, topic ``t`` (4 partitions, leaders split), one scripted consumer group."""

    def __init__(self, partitions: int = 4, session_reaper: bool = True) -> None:
        super().__init__(2)
        self.partitions = {"t": partitions}
        for p in range(partitions):
            self.leaders[("t", p)] = p % 2
        self.logs: Dict[int, List[bytes]] = {p: [] for p in range(partitions)}
        self.raw: Dict[int, Tuple[bytes, List[Tuple[int, int]]]] = {}
        self.coordinator = 0
        self.batch_records = 50                  # records per fetched batch
        self.cond = threading.Condition()
        self.members: Dict[str, dict] = {}      # member id -> {metadata, last_seen, session}
        self.generation = 0
        self.round_open = False
        self.joined: Dict[str, bytes] = {}
        self.assignments: Optional[Dict[str, bytes]] = None
        self.committed: Dict[Tuple[str, int], int] = {}
        self.silenced: set = set()               # members whose group requests get no answer
        self.expired: List[Tuple[str, float]] = []
        self.history: List[Tuple[float, int, Dict[str, List[TopicPartition]]]] = []
        self._ids = 0
        for key, fn in ((10, self._find), (11, self._join), (14, self._sync), (12, self._hb),
                        (13, self._leave), (8, self._commit), (9, self._offset_fetch),
                        (2, self._list_offsets), (1, self._fetch)):
            self.handlers[key] = fn
        if session_reaper:
            threading.Thread(target=self._reaper, daemon=True).start()

    # ---------------------------------------------------------------- data
    def append(self, partition: int, values: List[bytes]) -> None:
        with self.cond:
            self.logs[partition].extend(values)

    def _batch(self, partition: int, start: int) -> Optional[bytes]:
        log = self.logs[partition]
        if start >= len(log):
            return None
        b = BatchBuilder(base_offset=start)
        for i in range(start, min(len(log), start + self.batch_records)):
            b.append(log[i], None, TS0 + i * 1000)
        return b.build()

    def _fetch(self, node, req):
        m = req.message
        parts = []
        time.sleep(0.01)
        for t in m.topics:
            out = []
            for p in t.partitions:
                if p.partition in self.raw:
                    data, aborted = self.raw[p.partition]
                    out.append({"partition_index": p.partition, "high_watermark": 1000,
                                "last_stable_offset": 1000,
                                "aborted_transactions": [{"producer_id": a, "first_offset": b}
                                                         for a, b in aborted],
                                "records": data if p.fetch_offset == 0 else b""})
                    continue
                with self.cond:
                    data = self._batch(p.partition, p.fetch_offset)
                    hw = len(self.logs[p.partition])
                out.append({"partition_index": p.partition, "high_watermark": hw,
                            "last_stable_offset": hw, "records": data or b""})
            parts.append({"topic_id": TOPIC_ID, "topic": "t", "partitions": out})
        return P.FetchResponse(responses=parts)

    def _list_offsets(self, node, req):
        topics = []
        for t in req.message.topics:
            ps = []
            for p in t.partitions:
                n = len(self.logs[p.partition_index])
                if p.timestamp == -2:
                    off = 0
                elif p.timestamp == -1:
                    off = n
                else:
                    off = next((i for i in range(n) if TS0 + i * 1000 >= p.timestamp), -1)
                ps.append({"partition_index": p.partition_index, "offset": off,
                           "timestamp": -1 if p.timestamp < 0 or off < 0 else TS0 + off * 1000})
            topics.append({"name": t.name, "partitions": ps})
        return P.ListOffsetsResponse(topics=topics)

    # ---------------------------------------------------------------- group
    def _find(self, node, req):
        c = self.coordinator
        port = self.port(c)
        if req.api_version >= 4:
            return P.FindCoordinatorResponse(coordinators=[{
                "key": k, "node_id": c, "host": "127.0.0.1", "port": port}
                for k in req.message.coordinator_keys])
        return P.FindCoordinatorResponse(node_id=c, host="127.0.0.1", port=port)

    def _not_coordinator(self, node) -> bool:
        return node != self.coordinator

    def _join(self, node, req):
        m = req.message
        if m.member_id in self.silenced:
            return "silent"
        if self._not_coordinator(node):
            return P.JoinGroupResponse(error_code=16, member_id=m.member_id, members=[])
        with self.cond:
            member = m.member_id
            if not member:
                if m.group_instance_id is not None:
                    member = f"{m.group_instance_id}-{self._ids}"
                    self._ids += 1
                else:
                    self._ids += 1
                    return P.JoinGroupResponse(error_code=79, member_id=f"member-{self._ids}",
                                               members=[])
            elif member not in self.members and m.group_instance_id is None and \
                    member not in self._known_ids():
                return P.JoinGroupResponse(error_code=25, member_id=member, members=[])
            protocols = {p.name: p.metadata for p in m.protocols}
            self.members[member] = {"protocols": protocols, "last_seen": time.monotonic(),
                                    "session": m.session_timeout_ms / 1000.0}
            self._open_round()
            self.joined[member] = b""
            gen = self.generation
            end = time.monotonic() + 5
            while set(self.joined) != set(self.members) and time.monotonic() < end \
                    and self.generation == gen:
                self.cond.wait(0.05)
            if self.generation == gen:
                # every member rejoined (or the stragglers were dropped): close the round
                for late in set(self.members) - set(self.joined):
                    del self.members[late]
                    self.expired.append((late, time.monotonic()))
                self.generation += 1
                self.round_open = False
                self.assignments = None
                self.leader = sorted(self.joined)[0]
                self.cond.notify_all()
            leader = self.leader
            names = [p.name for p in m.protocols]
            chosen = next(n for n in names if all(n in self.members[x]["protocols"]
                                                  for x in self.members))
            members = []
            if member == leader:
                members = [{"member_id": x, "metadata": self.members[x]["protocols"][chosen]}
                           for x in sorted(self.members)]
            return P.JoinGroupResponse(generation_id=self.generation, protocol_name=chosen,
                                       leader=leader, member_id=member, members=members)

    def _known_ids(self):
        return {f"member-{i}" for i in range(self._ids + 1)}

    def _open_round(self) -> None:
        if not self.round_open:
            self.round_open = True
            self.joined = {}
            self.cond.notify_all()

    def _sync(self, node, req):
        m = req.message
        if m.member_id in self.silenced:
            return "silent"
        if self._not_coordinator(node):
            return P.SyncGroupResponse(error_code=16)
        with self.cond:
            if m.member_id not in self.members:
                return P.SyncGroupResponse(error_code=25)
            if m.generation_id != self.generation or self.round_open:
                return P.SyncGroupResponse(error_code=27)
            self.members[m.member_id]["last_seen"] = time.monotonic()
            if m.assignments:
                self.assignments = {a.member_id: a.assignment for a in m.assignments}
                self.history.append((time.monotonic(), self.generation, {
                    k: decode_assignment(v).partitions for k, v in self.assignments.items()}))
                self.cond.notify_all()
            end = time.monotonic() + 5
            while self.assignments is None and time.monotonic() < end and \
                    m.generation_id == self.generation:
                self.cond.wait(0.05)
            if m.generation_id != self.generation or self.assignments is None:
                return P.SyncGroupResponse(error_code=27)
            return P.SyncGroupResponse(assignment=self.assignments.get(m.member_id, b""))

    def _hb(self, node, req):
        m = req.message
        if m.member_id in self.silenced:
            return "silent"
        if self._not_coordinator(node):
            return P.HeartbeatResponse(error_code=16)
        with self.cond:
            if m.member_id not in self.members:
                return P.HeartbeatResponse(error_code=25)
            self.members[m.member_id]["last_seen"] = time.monotonic()
            if self.round_open:
                return P.HeartbeatResponse(error_code=27)
            if m.generation_id != self.generation:
                return P.HeartbeatResponse(error_code=22)
            return P.HeartbeatResponse()

    def _leave(self, node, req):
        if self._not_coordinator(node):
            return P.LeaveGroupResponse(error_code=16)
        m = req.message
        ids = [x.member_id for x in m.members] if req.api_version >= 3 else [m.member_id]
        with self.cond:
            for x in ids:
                if self.members.pop(x, None) is not None:
                    self._open_round()
        return P.LeaveGroupResponse()

    def _reaper(self) -> None:
        while not self._stop.is_set():
            time.sleep(0.02)
            with self.cond:
                now = time.monotonic()
                for x, info in list(self.members.items()):
                    if now - info["last_seen"] > info["session"]:
                        del self.members[x]
                        self.expired.append((x, now))
                        self._open_round()

    def _commit(self, node, req):
        m = req.message
        if m.member_id in self.silenced:
            return "silent"
        code = 0
        if self._not_coordinator(node):
            code = 16
        else:
            with self.cond:
                gen = m.generation_id_or_member_epoch
                if gen >= 0 and m.member_id not in self.members:
                    code = 25
                elif gen >= 0 and gen != self.generation:
                    code = 22
                else:
                    for t in m.topics:
                        for p in t.partitions:
                            self.committed[(t.name, p.partition_index)] = p.committed_offset
        return P.OffsetCommitResponse(topics=[{"name": t.name, "partitions": [
            {"partition_index": p.partition_index, "error_code": code} for p in t.partitions]}
            for t in m.topics])

    def _offset_fetch(self, node, req):
        m = req.message
        if req.api_version >= 8:
            g = m.groups[0]
            code = 16 if self._not_coordinator(node) else 0
            topics = [{"name": t.name, "partitions": [
                {"partition_index": p, "committed_offset": self.committed.get((t.name, p), -1),
                 "metadata": ""} for p in t.partition_indexes]} for t in g.topics]
            return P.OffsetFetchResponse(groups=[{"group_id": g.group_id, "topics": topics,
                                                  "error_code": code}])
        code = 16 if self._not_coordinator(node) else 0
        return P.OffsetFetchResponse(error_code=code, topics=[{"name": t.name, "partitions": [
            {"partition_index": p, "committed_offset": self.committed.get((t.name, p), -1),
             "metadata": ""} for p in t.partition_indexes]} for t in m.topics])


class Member(threading.Thread):
    """A kafkawire group member on its own thread; logs (time, tp, offset) of every delivery."""

    def __init__(self, cluster, name, **kw):
        super().__init__(daemon=True, name=name)
        kw.setdefault("session_timeout_ms", 1500)
        kw.setdefault("heartbeat_interval_ms", 100)
        kw.setdefault("request_timeout_ms", 3000)
        kw.setdefault("retry_backoff_ms", 20)
        self.c = kafkawire.Consumer(cluster.bootstrap, "g", auto_offset_reset="earliest",
                                    enable_auto_commit=False, **kw)
        self.c.subscribe(["t"], on_revoke=self._revoked, on_lost=self._lost)
        self.deliveries: List[Tuple[float, TopicPartition, int]] = []
        self.lost_at: List[float] = []
        self.stop = threading.Event()
        self.error = None

    def _revoked(self, c, tps):
        c.commit({tp: c.position(tp) for tp in tps})

    def _lost(self, c, tps):
        self.lost_at.append(time.monotonic())

    def run(self):
        try:
            while not self.stop.is_set():
                recs = self.c.poll(50)
                now = time.monotonic()
                self.deliveries.extend((now, TopicPartition(r.topic, r.partition), r.offset)
                                       for r in recs)
                if recs:
                    try:
                        self.c.commit(timeout_ms=1000)
                    except Exception:  # noqa: BLE001 - a cut-off member cannot commit
                        pass
            self.c.close()
        except BaseException as exc:
            self.error = exc


def wait_for(cond, seconds):
    """Poll ``cond`` every 20 ms until it is true or ``seconds`` pass; its last value."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.02)
    return cond()
