"""The consumer's fetching: one multi-partition Fetch in flight per leader, decoded on demand.

Each partition the consumer owns has a :class:`PartitionState` (position,
paused, leader epoch).  :class:`Fetcher` sends one Fetch per leader for the
partitions that have a position, are not paused, and have nothing buffered;
so the prefetch is bounded by ``fetch_max_bytes`` per leader.  Answers are
kept as the raw records bytes and decoded when ``poll`` asks for records
(objects) or for columns (Arrow), whichever the caller uses.

Fetch sessions (Kafka's incremental fetch, Fetch v7 and later): the first
request to a broker is a full one listing every partition; when the broker
answers with a session id, later requests list only the partitions whose
fetch position (or limits, leader epoch, topic id) changed and name the
partitions no longer wanted (revoked, paused, or with answers still buffered)
in ``forgotten_topics_data``; the broker answers only for partitions with
news.  A broker that lost the session (``FETCH_SESSION_ID_NOT_FOUND``), an
epoch it does not expect (``INVALID_FETCH_SESSION_EPOCH``), a broken
connection or an answer naming partitions outside the session start over with
a full fetch.  ``close`` ends each session (epoch -1) so the broker frees it
at once.  A broker that answers with session id 0 gets full fetches each time.

``read_committed`` follows Kafka's consumer: the broker only returns data
below the last stable offset, and the aborted transactions listed in the
answer are dropped: a transactional batch of producer P is skipped while P
has an aborted transaction that started at or before the batch and whose
ABORT marker has not been passed yet.
"""
from __future__ import annotations

import collections
import logging
import select
import struct
import time
import uuid
from typing import Any, Deque, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

import kafkawire
from kafkawire import _kernels as K
from kafkawire import protocol as P
from kafkawire.client import _api as A
from kafkawire.client.cluster import STALE_METADATA_CODES
from kafkawire.client.exceptions import KafkaConnectionError, RequestTimeoutError
from kafkawire.client.group_metadata import TopicPartition
from kafkawire.protocol.error_codes import (FETCH_SESSION_ID_NOT_FOUND,
                                           INVALID_FETCH_SESSION_EPOCH, OFFSET_OUT_OF_RANGE,
                                           make_error)
from kafkawire import _columnar_common as _CC
from kafkawire.records.iterate import iter_batches
from kafkawire.records.columnar import (ColumnChunk, arrow_schema,
                                        constant_columns, decode_columns, scan_columns,
                                        topic_column)

__all__ = ["ConsumerRecord", "PartitionState", "Fetcher", "CompletedFetch"]

log = logging.getLogger("kafkawire.client.fetcher")

_SESSION_VERSION = 7          # the first Fetch version with session id and epoch
_TOPIC_ID_VERSION = 13        # from here topics are named by id
_MAX_EPOCH = 0x7FFFFFFF
_SESSION_ERRORS = (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH)


class ConsumerRecord(NamedTuple):
    """One record as the consumer hands it out (an immutable named tuple).

    ``timestamp_type`` is ``"CreateTime"`` or ``"LogAppendTime"``;
    ``headers`` a tuple of ``(str, bytes | None)`` pairs; ``leader_epoch`` the
    partition leader epoch the record was written in (-1 when unknown). ``key`` and
    ``value`` are bytes (or None), or what the consumer's deserializers return.
    """

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: str
    key: Any
    value: Any
    headers: Tuple[Tuple[str, Optional[bytes]], ...]
    leader_epoch: int


_new = tuple.__new__


class PartitionState:
    """What the consumer knows about one partition it owns."""

    __slots__ = ("position", "fetch_offset", "leader_epoch", "paused", "reset", "high_watermark",
                 "last_stable_offset", "log_start_offset")

    def __init__(self) -> None:
        self.position: Optional[int] = None   # next offset to hand out
        self.fetch_offset: Optional[int] = None  # next offset to fetch (None: the position)
        self.leader_epoch = -1                # epoch of the last record handed out
        self.paused = False
        self.reset: Optional[str] = None      # pending seek_to_beginning/end: "earliest"/"latest"
        self.high_watermark = -1
        self.last_stable_offset = -1
        self.log_start_offset = -1


class CompletedFetch:
    """One partition's answer, waiting to be handed out from ``fetch_offset``."""

    __slots__ = ("tp", "fetch_offset", "data", "aborted", "_batches", "_pending", "_done",
                 "next_offset", "_aborted_pids", "_epoch", "_read_committed", "_arrow",
                 "batches", "_started", "cursor")

    def __init__(self, tp: TopicPartition, fetch_offset: int, data, aborted, read_committed,
                 verify_crc: bool = False):
        self.tp = tp
        self.fetch_offset = fetch_offset
        self.data = data
        self.aborted = sorted(aborted, key=lambda a: a[1])   # (producer id, first offset)
        self._read_committed = read_committed
        # Whole batches only (a trailing partial one is fetched again next time); scanning
        # reads just the batch headers.
        self.batches = list(iter_batches(data, verify_crc=verify_crc))
        self._batches: Iterator = iter(self.batches)
        self._pending: List[ConsumerRecord] = []
        self._done = False
        # one past the last offset of the answer (control batches included)
        self.next_offset = max(fetch_offset, self.batches[-1].last_offset + 1) \
            if self.batches else fetch_offset
        self._aborted_pids: set = set()
        self._epoch = -1
        self._arrow: Optional[List[Any]] = None
        # how something was taken from it: None (nothing yet), "records" or "columns"; taken
        # the other way next, it starts again from fetch_offset (the partition's position)
        self._started: Optional[str] = None
        # where a poll's joint columns stopped inside this answer: (batch position, record
        # index, record position); None when not taken in part that way
        self.cursor: Optional[Tuple[int, int, int]] = None

    # ---- records as objects
    def _switch(self, mode: str) -> None:
        """Take the rest ``mode``'s way: after rows were taken the other way, decoding starts
        again from ``fetch_offset``, which the fetcher keeps at the partition's position."""
        if self._started not in (None, mode):
            self._batches = iter(self.batches)
            self._pending = []
            self._arrow = None
            self.cursor = None
            self._done = False
        self._started = mode

    def take(self, max_records: int) -> List[ConsumerRecord]:
        self._switch("records")
        out = self._pending
        while len(out) < max_records and not self._done:
            out.extend(self._next_batch())
        if len(out) > max_records:
            self._pending = out[max_records:]
            return out[:max_records]
        self._pending = []
        return out

    @property
    def exhausted(self) -> bool:
        return self._done and not self._pending

    def _next_batch(self) -> List[ConsumerRecord]:
        for b in self._batches:
            if b.last_offset < self.fetch_offset:
                continue
            if self._read_committed and self._skip(b):
                continue
            if getattr(b, "is_control", False):
                continue
            start = self.fetch_offset
            args = getattr(b, "_args", None)
            if args is not None:
                # v2 batch: the kernel builds the ConsumerRecords directly
                recs = K.decode_records_v2_as(ConsumerRecord, (self.tp[0], self.tp[1]),
                                              (b.partition_leader_epoch,),
                                              *args())
                if recs and recs[0][2] < start:
                    recs = [r for r in recs if r[2] >= start]
                return recs
            topic, part = self.tp
            return [_new(ConsumerRecord, (topic, part, r.offset, r.timestamp, r.timestamp_type,
                                          r.key, r.value, tuple(r.headers), -1))
                    for r in b.records() if r.offset >= start]
        self._done = True
        return []

    def _skip(self, b) -> bool:
        """Kafka's read_committed rule for one batch (True: drop it)."""
        if not getattr(b, "is_transactional", False):
            return False
        pid = b.producer_id
        aborted = self.aborted
        while aborted and aborted[0][1] <= b.last_offset:
            self._aborted_pids.add(aborted.pop(0)[0])
        if b.is_control:
            if b.control_type == "abort":
                self._aborted_pids.discard(pid)
            return True
        return pid in self._aborted_pids

    # ---- records as columns
    def take_columns(self, max_records: int, include_headers: bool):
        """The next up to ``max_records`` rows as a ColumnChunk-backed Arrow batch (or None)."""
        self._switch("columns")
        if self._arrow is None:
            chunk = decode_columns(self.data, start_offset=self.fetch_offset,
                                   include_headers=include_headers)
            if self._read_committed and len(chunk):
                mask = self._committed_mask(chunk)
                if mask is not None:
                    chunk = chunk.filter(mask)
            rb = chunk.to_arrow(include_headers, self.tp[0], self.tp[1], last_use=True)
            self._arrow = [rb, 0]
        rb, at = self._arrow
        n = min(max_records, rb.num_rows - at)
        self._arrow[1] = at + n
        if at + n >= rb.num_rows:
            self._done = True
        return rb.slice(at, n) if (at or n < rb.num_rows) else rb

    def _committed_mask(self, chunk):
        import numpy as np
        if not self.aborted:
            return None
        pids = chunk.producer_id
        txn = chunk.is_transactional
        base = chunk.batch_base_offset
        offs = chunk.offset
        keep = np.ones(len(chunk), dtype=bool)
        c_off, c_pid, c_type = chunk.control_offset, chunk.control_producer_id, chunk.control_type
        for pid, first in self.aborted:
            markers = c_off[(c_pid == pid) & (c_type == 0) & (c_off >= first)]
            end = int(markers.min()) if len(markers) else (1 << 63) - 1
            keep &= ~((pids == pid) & txn & (base >= first) & (offs < end))
        return keep


class FetchSession:
    """One broker's fetch session as the consumer sees it (Kafka's incremental fetch).

    ``partitions`` is what the broker holds for this session: for each
    partition the ``(fetch offset, leader epoch, max bytes, topic id)`` last
    sent.  ``epoch`` 0 means the next request is a full one (a new session;
    with a ``session_id`` the broker also drops the old one), -1 closes it.
    """

    __slots__ = ("node", "session_id", "epoch", "partitions")

    def __init__(self, node: int) -> None:
        self.node = node
        self.session_id = 0
        self.epoch = 0
        self.partitions: Dict[TopicPartition, tuple] = {}

    @property
    def full(self) -> bool:
        return self.epoch <= 0

    def build(self, wanted: Dict[TopicPartition, tuple]
              ) -> Tuple[Dict[TopicPartition, tuple], List[Tuple[TopicPartition, Any]]]:
        """What the next request lists: ``(to send, to forget as (partition, topic id))``.

        A full request sends everything; an incremental one the partitions
        that are new or changed, and forgets those no longer wanted (and,
        when a topic was recreated under a new id, the old id's partition).
        """
        old, self.partitions = self.partitions, dict(wanted)
        if self.full:
            return self.partitions, []
        send = {}
        forget = [(tp, data[3]) for tp, data in old.items() if tp not in wanted]
        for tp, data in wanted.items():
            was = old.get(tp)
            if was == data:
                continue
            send[tp] = data
            if was is not None and was[3] != data[3] and was[3] is not None \
                    and data[3] is not None:
                forget.append((tp, was[3]))
        return send, forget

    def answered(self, error_code: int, session_id: int, returned: Sequence[TopicPartition],
                 throttled: bool) -> bool:
        """Move the session on after an answer; False when its partitions must be ignored."""
        if error_code:
            log.info("broker %s refused fetch session %d (epoch %d): error %d; next fetch is a "
                     "full one", self.node, self.session_id, self.epoch, error_code)
            if error_code == FETCH_SESSION_ID_NOT_FOUND:
                self.session_id = 0
            self.epoch = 0
            return False
        if self.full:
            if not returned and throttled:
                self.session_id = self.epoch = 0
                return False
            if set(returned) != set(self.partitions):
                log.info("broker %s answered a full fetch for other partitions than asked; "
                         "starting a new fetch session", self.node)
                self.session_id = self.epoch = 0
                return False
            self.session_id = session_id
            self.epoch = 1 if session_id else 0
            return True
        if not set(returned) <= self.partitions.keys():
            log.info("broker %s answered fetch session %d with partitions outside it; starting "
                     "a new one", self.node, self.session_id)
            self.epoch = 0
            return False
        if session_id == 0:   # the broker ended the session
            self.epoch = 0
            self.session_id = 0
            return True
        self.epoch = 1 if self.epoch >= _MAX_EPOCH else self.epoch + 1
        return True

    def failed(self) -> None:
        """The request or its answer was lost: open a new session with the next fetch."""
        self.epoch = 0


class Fetcher:
    """Sends Fetch requests for owned partitions and buffers the answers."""

    def __init__(self, client, states: Dict[TopicPartition, PartitionState], *,
                 fetch_min_bytes: int, fetch_max_wait_ms: int, fetch_max_bytes: int,
                 max_partition_fetch_bytes: int, isolation_level: int,
                 client_rack: Optional[str] = None, check_crcs: bool = False) -> None:
        self.client = client
        self.states = states
        self.min_bytes = fetch_min_bytes
        self.max_wait_ms = fetch_max_wait_ms
        self.max_bytes = fetch_max_bytes
        self.partition_max_bytes = max_partition_fetch_bytes
        self.isolation_level = isolation_level
        self.rack = client_rack or ""
        self.check_crcs = check_crcs
        # node -> (pending, connection, {partition: offset asked}, {topic id: name})
        self.in_flight: Dict[int, Tuple[Any, Any, Dict[TopicPartition, Any], Dict]] = {}
        # answers waiting to be handed out, oldest first, at most ``max_buffered`` per partition:
        # as Kafka's consumer, a partition is fetched again once its answer was handed out.
        # Buffering a second answer ahead read no faster (poll_arrow() of 150k records from
        # the mock cluster took 3-7% longer, the records path the same): more memory in use
        # between the socket and the decoder.
        self.completed: "collections.OrderedDict[TopicPartition, Deque[CompletedFetch]]" = \
            collections.OrderedDict()
        self.max_buffered = 1
        self.errors: List[BaseException] = []
        self.needs_metadata = False
        self.needs_reset: List[TopicPartition] = []
        self.sessions: Dict[int, FetchSession] = {}
        self._links: Dict[int, Tuple[Any, int]] = {}   # node -> (connection, Fetch version)
        # the column builder of poll_arrow's joint batches, kept between polls: taking a
        # batch's columns starts the next one's, which a builder made per poll would throw away
        self._builder: Any = None
        self._builder_kind: Tuple[int, bool] = (0, False)

    # --------------------------------------------------------------- sending
    def _buffered(self, tp: TopicPartition) -> int:
        """How many answers for ``tp`` wait to be handed out."""
        queue = self.completed.get(tp)
        return len(queue) if queue else 0

    def fetchable(self) -> Dict[int, List[TopicPartition]]:
        """The partitions to fetch now, by leader.

        A leader gets one Fetch at a time, and a broker holds a Fetch with no
        data to give for up to ``fetch_max_wait_ms``.  So a Fetch naming only
        partitions that were caught up (at the high watermark, or the last
        stable offset for read_committed) waits while another partition of
        that leader has a full buffer: sent now, it would hold that partition's
        next fetch back for the whole wait, once its buffer is drained.  The
        caught-up partitions go along with that next fetch instead.
        """
        busy = {tp for _, _, offsets, _ in self.in_flight.values() for tp in offsets}
        out: Dict[int, List[TopicPartition]] = {}
        cluster = self.client.cluster
        full = set()     # leaders with a partition waiting only for its buffer to drain
        fresh = set()    # leaders with a partition that may have data to fetch
        committed = self.isolation_level == 1
        for tp, st in self.states.items():
            if st.paused or st.position is None or st.reset or tp in busy:
                continue
            leader = cluster.leader(tp[0], tp[1])
            if leader is None:
                self.needs_metadata = True
                continue
            if self._buffered(tp) >= self.max_buffered:
                full.add(leader)
                continue
            if leader in self.in_flight:
                continue
            end = st.last_stable_offset if committed and st.last_stable_offset >= 0 else \
                st.high_watermark
            if end < 0 or (_next_fetch(st) or 0) < end:
                fresh.add(leader)
            out.setdefault(leader, []).append(tp)
        for leader in full - fresh:
            out.pop(leader, None)
        return out

    def send(self) -> None:
        fetchable = self.fetchable()
        client = self.client
        connected = getattr(client, "_connected", None)
        new = [n for n in fetchable
               if n not in self._links and (connected is None or connected(n) is None)]
        # New leaders are connected together: each is sent its ApiVersions request first,
        # then the fetches of the leaders already connected go out, then the answers are read
        # (a broker answers in arrival order: its small answer does not wait behind a fetch).
        start = getattr(client, "_start_nodes", None)
        started = start(new) if new and start is not None else []
        for node, tps in fetchable.items():
            if node not in new:
                self._send_to(node, tps)
        if started:
            client._finish_nodes(started)
        for node in new:
            self._send_to(node, fetchable[node])

    def _send_to(self, node: int, tps: List[TopicPartition]) -> None:
        session = self.sessions.get(node)
        if session is None:
            session = self.sessions[node] = FetchSession(node)
        try:
            conn, version = self._link(node)
            cid = conn.next_correlation_id()
            frame, offsets, ids = self._request(tps, version, session, cid)
            pending = conn.send(frame, cid, A.FETCH, version,
                                timeout=self.client.request_timeout + self.max_wait_ms / 1000,
                                decode=lambda f, v=version: fetch_answer(v, f))
        except (KafkaConnectionError, RequestTimeoutError) as exc:
            log.debug("fetch to broker %s not sent: %s", node, exc)
            session.failed()
            self.client.cluster.mark_stale()
            self.needs_metadata = True
            return
        self.in_flight[node] = (pending, conn, offsets, ids)

    def _link(self, node: int) -> Tuple[Any, int]:
        """The open connection to broker ``node`` and the Fetch version it speaks (kept between
        polls while the client keeps that connection)."""
        link = self._links.get(node)
        if link is not None and link[0].connected and \
                getattr(self.client, "_conns", {}).get(node) is link[0]:
            return link
        conn = self.client._node(node)
        link = self._links[node] = (conn, self.client._version(conn, A.FETCH))
        return link

    def _request(self, tps: Sequence[TopicPartition], version: int, session: FetchSession,
                 cid: int):
        """The Fetch frame for ``tps`` (correlation id ``cid``), with the session's view of
        them (``{partition: offset}``) and the topic names of the ids it uses."""
        cluster = self.client.cluster
        by_id = version >= _TOPIC_ID_VERSION
        wanted: Dict[TopicPartition, tuple] = {}
        ids: Dict[Any, str] = {}
        for tp in tps:
            info = cluster.topics[tp[0]]
            tid = None
            if by_id:
                tid = info.topic_id
                if tid is None or int(tid) == 0:
                    raise kafkawire.errors.UnsupportedVersionError(
                        f"Fetch v{version} needs the topic id of {tp[0]!r}, which metadata "
                        "did not give")
                ids[tid] = tp[0]
            part = info.partitions.get(tp[1])
            wanted[tp] = (_next_fetch(self.states[tp]),
                          part.leader_epoch if part is not None else -1,
                          self.partition_max_bytes, tid)
        if version >= _SESSION_VERSION:
            send, forget = session.build(wanted)
            session_id, epoch = session.session_id, session.epoch
        else:
            send, forget, session_id, epoch = wanted, [], 0, -1
        by_topic: Dict[Any, list] = {}
        for tp, (offset, leader_epoch, max_bytes, tid) in send.items():
            by_topic.setdefault(tid if by_id else tp[0], []).append(
                (tp[1], leader_epoch, offset, max_bytes))
        gone: Dict[Any, List[int]] = {}
        for tp, tid in forget:
            gone.setdefault(tid if by_id else tp[0], []).append(tp[1])
        frame = fetch_frame(version, cid, self.client.client_id, self.max_wait_ms,
                            self.min_bytes, self.max_bytes, self.isolation_level, session_id,
                            epoch, list(by_topic.items()), list(gone.items()), self.rack)
        return frame, {tp: data[0] for tp, data in wanted.items()}, ids

    # -------------------------------------------------------------- receiving
    def wait(self, timeout: float) -> None:
        """Read the answers that arrived, waiting up to ``timeout`` seconds for the first."""
        if not self.in_flight:
            if timeout > 0:
                time.sleep(min(timeout, 0.05))
            return
        ready = [n for n, (p, c, _, _) in self.in_flight.items() if p.done() or _has_data(c)]
        if not ready:
            socks = {}
            for n, (p, c, _, _) in self.in_flight.items():
                sock = getattr(c, "_sock", None)
                if sock is None:
                    ready.append(n)
                else:
                    socks[sock] = n
            if socks and not ready:
                try:
                    r, _, _ = select.select(list(socks), [], [], max(timeout, 0))
                except (OSError, ValueError):
                    r = list(socks)
                ready = [socks[sock] for sock in r]
        for node in ready:
            self._complete(node)

    def _complete(self, node: int) -> None:
        pending, conn, offsets, ids = self.in_flight.pop(node)
        session = self.sessions.get(node)
        try:
            resp = pending.result()
        except (KafkaConnectionError, RequestTimeoutError) as exc:
            log.info("fetch from broker %s failed: %s; refreshing metadata", node, exc)
            if session is not None:
                session.failed()
            self.client._drop(conn)
            self.client.cluster.mark_stale()
            self.needs_metadata = True
            return
        code = getattr(resp, "error_code", 0)
        returned = []
        for t in resp.responses:
            topic = t.topic if getattr(t, "topic", "") else ids.get(t.topic_id)
            for p in t.partitions:
                returned.append((TopicPartition(topic, p.partition_index)
                                 if topic is not None else None, p))
        if pending.version >= _SESSION_VERSION and session is not None:
            usable = session.answered(code, getattr(resp, "session_id", 0),
                                      [tp for tp, _ in returned],
                                      getattr(resp, "throttle_time_ms", 0) > 0)
            if code in _SESSION_ERRORS or not (usable or code):
                return   # the next fetch is a full one
        if code:
            err = make_error(code, api="Fetch")
            if err.retriable:
                self.needs_metadata = True
            else:
                self.errors.append(err)
            return
        for tp, p in returned:
            if tp is None:
                continue   # a topic this request did not ask for
            asked = offsets.get(tp)
            st = self.states.get(tp)
            if asked is None or st is None or _next_fetch(st) != asked:
                continue   # unassigned or moved by seek() while the fetch was out
            self._partition(tp, st, asked, p)

    def _partition(self, tp: TopicPartition, st: PartitionState, asked: int, p) -> None:
        code = p.error_code
        if code == 0:
            st.high_watermark = p.high_watermark
            st.last_stable_offset = getattr(p, "last_stable_offset", -1)
            st.log_start_offset = getattr(p, "log_start_offset", -1)
            data = p.records
            if data is not None and len(data):
                aborted = [(a.producer_id, a.first_offset)
                           for a in (getattr(p, "aborted_transactions", None) or ())]
                cf = CompletedFetch(tp, asked, data, aborted, self.isolation_level == 1,
                                    self.check_crcs)
                if cf.batches:
                    self.completed.setdefault(tp, collections.deque()).append(cf)
                    st.fetch_offset = cf.next_offset
            return
        err = make_error(code, api="Fetch", topic=tp[0], partition=tp[1])
        if code == OFFSET_OUT_OF_RANGE:
            log.info("%s-%d: offset %d is out of range; resetting", tp[0], tp[1], asked)
            self.needs_reset.append(tp)
        elif code in STALE_METADATA_CODES or err.retriable:
            self.client.cluster.mark_stale([tp[0]])
            self.needs_metadata = True
        else:
            self.errors.append(err)

    def close(self, timeout: float) -> None:
        """End the open fetch sessions (epoch -1) so brokers free them now, not at expiry.

        Only sessions whose connection is still open are ended; the answers
        are awaited up to ``timeout`` seconds and otherwise ignored.
        """
        deadline = time.monotonic() + timeout
        waiting = []
        for node, session in self.sessions.items():
            conn = self.client._conns.get(node)
            if not session.session_id or conn is None or not conn.connected:
                continue
            req = P.FetchRequest(max_wait_ms=0, min_bytes=self.min_bytes, max_bytes=self.max_bytes,
                                 isolation_level=self.isolation_level,
                                 session_id=session.session_id, session_epoch=-1, topics=[],
                                 forgotten_topics_data=[], rack_id=self.rack)
            try:
                version = self.client._version(conn, A.FETCH)
                waiting.append(self.client._send(conn, req, version, timeout * 1000))
            except (KafkaConnectionError, RequestTimeoutError, kafkawire.errors.KafkaWireError
                    ) as exc:
                log.debug("closing fetch session %d with broker %s: %s", session.session_id,
                          node, exc)
        for pending in waiting:
            try:
                pending.result(max(deadline - time.monotonic(), 0.001))
            except Exception as exc:  # noqa: BLE001 - the broker expires it anyway
                log.debug("closing a fetch session: %s", exc)
        self.sessions.clear()
        self.in_flight.clear()

    # --------------------------------------------------------------- handing out
    def drop(self, tps) -> None:
        """Forget buffered and in-flight data of ``tps`` (revoked, sought, or lost)."""
        for tp in tps:
            self.completed.pop(tp, None)
            st = self.states.get(tp)
            if st is not None:
                st.fetch_offset = None

    def _hand_out(self, max_records: int, take) -> list:
        """Up to ``max_records`` rows, partition by partition; ``take(cf, n)`` returns
        ``(item, rows, last offset, leader epoch)``; positions move past what is handed out."""
        out = []
        left = max_records
        for tp in list(self.completed):
            st = self.states.get(tp)
            if st is None:
                del self.completed[tp]
                continue
            if st.paused:
                continue
            queue = self.completed[tp]
            while queue and left > 0:
                cf = queue[0]
                item, rows, last, epoch = take(cf, left)
                if rows:
                    out.append(item)
                    left -= rows
                    if last is not None:   # else cf was taken whole: next_offset, below
                        st.position = cf.fetch_offset = last + 1
                    if epoch is not None:
                        st.leader_epoch = epoch
                if not cf.exhausted:
                    break
                queue.popleft()
                if st.position is None or cf.next_offset > st.position:
                    st.position = cf.next_offset
            if queue:
                self.completed.move_to_end(tp)
            else:
                del self.completed[tp]
            if left <= 0:
                break
        return out

    def take_records(self, max_records: int) -> List[List[ConsumerRecord]]:
        """Lists of records, one per partition that had some."""
        def take(cf, n):
            recs = cf.take(n)
            if not recs:
                return None, 0, 0, None
            return recs, len(recs), recs[-1].offset, recs[-1].leader_epoch
        return self._hand_out(max_records, take)

    def take_columns(self, max_records: int, include_headers: bool) -> List[Any]:
        """Arrow record batches: the answers of every partition decoded together into one
        batch (no per-partition batches to copy into one afterwards); an answer needing its
        own decoding (see :meth:`_Joint.fits`) gives one of its own."""
        if self._builder is None or self._builder_kind != (max_records, include_headers):
            self._builder = K.ColumnBuilder(include_headers, max_records, _CC.MAX_CHUNK_BYTES,
                                            None, None)
            self._builder_kind = (max_records, include_headers)
        joint = _Joint(include_headers, max_records, self._builder)
        own = set()   # partitions with a batch of their own in this poll: their rows come after
        stopped = []  # answers the joint stopped inside, with the joint's row count there

        def take(cf, n):
            if cf.tp not in own and joint.fits(cf, n):
                rows = joint.add(cf)
                if rows and cf.cursor is not None:
                    stopped.append((cf, joint.rows))
                return joint, rows, None, None
            own.add(cf.tp)
            rb = cf.take_columns(n, include_headers)
            if not rb.num_rows:
                return None, 0, 0, None
            return rb, rb.num_rows, rb.column("offset")[-1].as_py(), None
        try:
            items = self._hand_out(max_records, take)
            rb = joint.batch() if joint.rows else None
        except BaseException:
            self._builder = None   # it may hold rows of a poll that failed
            raise
        if rb is None:
            if joint.touched:
                self._builder = None   # control records only: none of it carries over
            return items
        if stopped:
            offsets = rb.column("offset")
            for cf, end in stopped:   # the partition goes on after the last row it gave
                st = self.states.get(cf.tp)
                cf.fetch_offset = offsets[end - 1].as_py() + 1
                if st is not None:
                    st.position = cf.fetch_offset
        return [rb] + [i for i in items if i is not joint]


# The answers one poll decodes together (_Joint) hold at most this many bytes together, so their
# keys and values stay far below Arrow's 2 GiB binary limit.
_JOINT_MAX_BYTES = 1 << 30


class _Joint:
    """Whole answers of one poll, of any partitions, decoded into one set of columns.

    Rows come partition after partition (each in offset order); :meth:`batch`
    makes the Arrow batch once, with the topic and partition of each run.
    """

    __slots__ = ("include_headers", "limit", "builder", "runs", "rows", "wire_bytes", "touched")

    def __init__(self, include_headers: bool, limit: int, builder: Any) -> None:
        self.include_headers = include_headers
        self.limit = limit
        self.builder = builder      # empty, made for ``limit`` rows
        self.touched = False        # something was decoded into it
        self.runs: List[Tuple[TopicPartition, int]] = []
        self.rows = 0
        self.wire_bytes = 0

    def fits(self, cf: CompletedFetch, n: int) -> bool:
        """Whether the joint columns can take ``cf``'s rows, ``n`` at most: it needs no
        read_committed filtering, its batches are uncompressed v2 ones, and either a previous
        poll's joint stopped inside it (:attr:`CompletedFetch.cursor`) or nothing was taken
        from it and it starts at its fetch offset (no rows to skip)."""
        batches = cf.batches
        if cf._read_committed or not batches or not _plain(batches):
            return False
        if n < self.limit - self.rows and \
                batches[-1].last_offset - max(cf.fetch_offset, batches[0].base_offset) + 1 > n:
            # batches of their own took rows of this poll: the builder, made for the poll's
            # limit, would not stop at n, so only an answer whose rest fits is taken
            return False
        if cf._started:
            return cf._started == "columns" and cf.cursor is not None
        return (batches[0].base_offset >= cf.fetch_offset
                and self.wire_bytes + len(cf.data) <= _JOINT_MAX_BYTES)

    def add(self, cf: CompletedFetch) -> int:
        """Decode ``cf`` (which :meth:`fits`) from where it stopped, until it ends or the poll's
        row limit is reached (then its cursor says where to go on); the rows it gave."""
        b = self.builder
        self.touched = True
        before = len(b)
        pos, ri, rp = cf.cursor or (0, 0, 0)
        status, pos, ri, rp = scan_columns(b, cf.data, pos, ri, rp)
        if status == _CC.COMPRESSED:   # fits() takes uncompressed answers only
            raise RuntimeError("a compressed batch reached the joint columns")
        cf._started = "columns"
        if status == _CC.FULL:
            cf.cursor = (pos, ri, rp)
        else:
            self.wire_bytes += len(cf.data)
            cf.cursor = None
            cf._done = True
        rows = len(b) - before
        if rows:
            self.runs.append((cf.tp, rows))
            self.rows += rows
        return rows

    def batch(self) -> Any:
        """The rows added, as one ``pyarrow.RecordBatch`` with topic and partition columns."""
        import numpy as np
        import pyarrow as pa
        (topic, partition), _ = self.runs[0]
        if len(self.runs) == 1:
            topic_col, part_col = constant_columns(topic, partition, self.rows)
        else:
            counts = [k for _, k in self.runs]
            parts = np.repeat(np.array([tp[1] for tp, _ in self.runs], dtype=np.int32), counts)
            part_col = pa.Array.from_buffers(pa.int32(), len(parts), [None, pa.py_buffer(parts)])
            if any(tp[0] != topic for tp, _ in self.runs):   # a run at a time, not a row
                topic_col = pa.concat_arrays([topic_column(tp[0], k) for tp, k in self.runs])
            else:
                topic_col = topic_column(topic, len(parts))
        if not self.include_headers:
            return self.builder.take_arrow(arrow_schema(False, True), topic_col, part_col)
        chunk = ColumnChunk(self.builder.take())
        return chunk.to_arrow(True, last_use=True, where=(topic_col, part_col))


def _plain(batches: Sequence[Any]) -> bool:
    """True when every batch is an uncompressed v2 batch."""
    return all(getattr(b, "magic", 0) == 2 and not getattr(b, "attributes", 7) & 0x07
               for b in batches)


_HEAD = struct.Struct(">ihhi")          # size, api key, version, correlation id
_I32 = struct.Struct(">i")
_PARTITION = struct.Struct(">iiq")      # partition, current leader epoch, fetch offset
_FLEXIBLE = 12                          # FetchRequest's first flexible version


def _uvarint(n: int) -> bytes:
    return K.write_unsigned_varint(n)  # type: ignore[no-any-return]


def fetch_frame(version: int, correlation_id: int, client_id: Optional[str], max_wait_ms: int,
                min_bytes: int, max_bytes: int, isolation_level: int, session_id: int,
                session_epoch: int, topics: Sequence[Tuple[Any, Sequence[Tuple[int, int, int, int]]]],
                forgotten: Sequence[Tuple[Any, Sequence[int]]], rack_id: str) -> bytes:
    """A FetchRequest frame (versions 4 and up), written directly: the bytes
    ``protocol.encode_request`` writes for the same request, without building its message
    objects for every poll.  ``topics``: ``(name or topic id, [(partition, current leader
    epoch, fetch offset, partition max bytes)])``; ``forgotten``: ``(name or topic id,
    [partition])``."""
    flex = version >= _FLEXIBLE
    by_id = version >= _TOPIC_ID_VERSION
    out = bytearray(_HEAD.pack(0, A.FETCH, version, correlation_id))
    if client_id is None:
        out += b"\xff\xff"
    else:
        raw = client_id.encode("utf-8")
        out += len(raw).to_bytes(2, "big") + raw
    if flex:
        out += b"\0"                                 # the header's tagged fields

    def count(n: int) -> bytes:
        return _uvarint(n + 1) if flex else _I32.pack(n)

    def topic(t: Any) -> bytes:
        if by_id:
            return t.bytes  # type: ignore[no-any-return]
        raw = t.encode("utf-8")
        return (_uvarint(len(raw) + 1) if flex else len(raw).to_bytes(2, "big")) + raw

    if version < 15:
        out += b"\xff\xff\xff\xff"                    # replica id -1: a consumer
    out += struct.pack(">iiib", max_wait_ms, min_bytes, max_bytes, isolation_level)
    if version >= _SESSION_VERSION:
        out += struct.pack(">ii", session_id, session_epoch)
    tail = b"\0" if flex else b""
    out += count(len(topics))
    for t, parts in topics:
        out += topic(t)
        out += count(len(parts))
        for partition, leader_epoch, offset, part_max in parts:
            if version >= 9:
                out += _PARTITION.pack(partition, leader_epoch, offset)
            else:
                out += _I32.pack(partition) + offset.to_bytes(8, "big", signed=True)
            if version >= 12:
                out += b"\xff\xff\xff\xff"            # last fetched epoch: unknown
            if version >= 5:
                out += b"\xff" * 8                    # log start offset: a consumer's -1
            out += _I32.pack(part_max)
            out += tail
        out += tail
    if version >= _SESSION_VERSION:
        out += count(len(forgotten))
        for t, parts in forgotten:
            out += topic(t)
            out += count(len(parts))
            for partition in parts:
                out += _I32.pack(partition)
            out += tail
    if version >= 11:
        raw = rack_id.encode("utf-8")
        out += (_uvarint(len(raw) + 1) if flex else len(raw).to_bytes(2, "big")) + raw
    out += tail                                       # the request's tagged fields
    _I32.pack_into(out, 0, len(out) - 4)
    return bytes(out)


class _Aborted(NamedTuple):
    producer_id: int
    first_offset: int


class _FetchedPartition:
    __slots__ = ("partition_index", "error_code", "high_watermark", "last_stable_offset",
                 "log_start_offset", "aborted_transactions", "records")


class _FetchedTopic:
    __slots__ = ("topic", "topic_id", "partitions")


class _FetchAnswer:
    __slots__ = ("throttle_time_ms", "error_code", "session_id", "responses")


_I64 = struct.Struct(">q")
_PART_HEAD = struct.Struct(">ihqq")     # partition, error code, high watermark, last stable offset


def fetch_answer(version: int, frame: Any) -> _FetchAnswer:
    """A FetchResponse frame (versions 4 and up, after the size prefix) read directly: the
    fields the consumer uses, with each partition's records a view of ``frame``.

    What ``protocol.decode_response`` gives for the same bytes (bytes after the last field
    are ignored, as the generic decoder allows), without a message object per topic and
    partition for every answer.  Malformed frames raise ``MessageDecodeError`` naming the
    position.
    """
    view = memoryview(frame).cast("B") if not isinstance(frame, memoryview) or \
        frame.format != "B" else frame
    n = len(view)
    flex = version >= _FLEXIBLE
    pos = 4                                            # correlation id
    unpack = struct.unpack_from

    def uvarint() -> int:
        nonlocal pos
        shift = value = 0
        while True:
            if pos >= n or shift > 28:
                raise IndexError("varint")
            b = view[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return value
            shift += 7

    def skip_tags() -> None:
        nonlocal pos
        for _ in range(uvarint()):
            uvarint()
            size = uvarint()
            if pos + size > n:
                raise IndexError("tagged field")
            pos += size

    def count() -> int:
        nonlocal pos
        if flex:
            return uvarint() - 1
        (k,) = unpack(">i", view, pos)
        pos += 4
        return k

    try:
        if flex:
            skip_tags()                                # the response header's tagged fields
        out = _FetchAnswer()
        out.throttle_time_ms, out.error_code, out.session_id = unpack(">ihi", view, pos) \
            if version >= 7 else (unpack(">i", view, pos)[0], 0, 0)
        pos += 10 if version >= 7 else 4
        topics = []
        for _ in range(max(count(), 0)):
            t = _FetchedTopic()
            if version >= _TOPIC_ID_VERSION:
                if pos + 16 > n:
                    raise IndexError("topic id")
                t.topic_id = uuid.UUID(bytes=bytes(view[pos:pos + 16]))
                t.topic = ""
                pos += 16
            else:
                size = uvarint() - 1 if flex else unpack(">h", view, pos)[0]
                if not flex:
                    pos += 2
                if size < 0 or pos + size > n:
                    raise IndexError("topic name")
                t.topic = str(view[pos:pos + size], "utf-8")
                t.topic_id = None
                pos += size
            parts = []
            for _ in range(max(count(), 0)):
                p = _FetchedPartition()
                (p.partition_index, p.error_code, p.high_watermark,
                 p.last_stable_offset) = _PART_HEAD.unpack_from(view, pos)
                pos += 22
                if version >= 5:
                    (p.log_start_offset,) = _I64.unpack_from(view, pos)
                    pos += 8
                else:
                    p.log_start_offset = -1
                k = count()
                aborted = None
                if k >= 0:
                    aborted = []
                    for _ in range(k):
                        aborted.append(_Aborted(*unpack(">qq", view, pos)))
                        pos += 16
                        if flex:
                            skip_tags()
                p.aborted_transactions = aborted
                if version >= 11:
                    pos += 4                           # preferred read replica
                size = uvarint() - 1 if flex else unpack(">i", view, pos)[0]
                if not flex:
                    pos += 4
                if size < 0:
                    p.records = None
                else:
                    if pos + size > n:
                        raise IndexError("records")
                    p.records = view[pos:pos + size]
                    pos += size
                if flex:
                    skip_tags()
                parts.append(p)
            if flex:
                skip_tags()
            t.partitions = parts
            topics.append(t)
        if flex:
            skip_tags()
    except (struct.error, IndexError, UnicodeDecodeError, ValueError) as exc:
        raise P.MessageDecodeError(f"malformed Fetch v{version} response near byte {pos}: "
                                   f"{exc}", position=pos) from None
    out.responses = topics
    return out


def _next_fetch(st: PartitionState) -> Optional[int]:
    return st.position if st.fetch_offset is None else st.fetch_offset


def _has_data(conn) -> bool:
    sock = getattr(conn, "_sock", None)
    if sock is None:
        return True
    pending = getattr(sock, "pending", None)
    return bool(pending is not None and pending() > 0)
