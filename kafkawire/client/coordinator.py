"""Consumer group membership over Kafka's classic protocol.

:class:`GroupCoordinator` finds the group's coordinator (FindCoordinator),
joins (JoinGroup, answering MEMBER_ID_REQUIRED with the id the broker
proposes), runs the chosen assignor when it is the leader, collects its
assignment (SyncGroup), keeps the membership alive from a heartbeat thread and
leaves (LeaveGroup).  It talks to the coordinator over its own connections, so
a heartbeat never waits behind a long fetch.

Safety rule: a member hands out records only while its membership is known to
be current.  A heartbeat answer of REBALANCE_IN_PROGRESS makes the next poll
rejoin before returning anything; ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
FENCED_INSTANCE_ID, or no successful heartbeat for a whole session timeout
(the coordinator may have expelled us) mark the partitions *lost*: they are
dropped without a commit and the member rejoins.  A member that does not call
poll within ``max_poll_interval_ms`` leaves the group from the heartbeat
thread, as Kafka's consumer does.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from kafkawire import protocol as P
from kafkawire.client import _api as A
from kafkawire.client.assignors import Assignor
from kafkawire.client.client import Client
from kafkawire.client.exceptions import KafkaConnectionError, RequestTimeoutError
from kafkawire.client.group_metadata import (Assignment, Subscription, TopicPartition,
                                             decode_assignment, decode_subscription,
                                             encode_assignment, encode_subscription)
from kafkawire.client.results import OffsetAndMetadata
from kafkawire.errors import ProtocolError
from kafkawire.protocol.error_codes import (COORDINATOR_ERRORS, FENCED_INSTANCE_ID,
                                           ILLEGAL_GENERATION, MEMBER_ID_REQUIRED,
                                           REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID,
                                           UNSTABLE_OFFSET_COMMIT, BrokerResponseError, make_error)

__all__ = ["GroupCoordinator"]

log = logging.getLogger("kafkawire.client.coordinator")

JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 11, 12, 13, 14

_MEMBERSHIP_LOST = frozenset({ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID})


class GroupCoordinator:
    """One member's view of its group: identity, generation, assignment, heartbeats.

    Not thread-safe for callers (one consumer thread); the heartbeat thread
    shares state with it under ``_lock``.
    """

    def __init__(self, make_client: Callable[[], Client], group_id: str, *,
                 group_instance_id: Optional[str], session_timeout_ms: int,
                 heartbeat_interval_ms: int, max_poll_interval_ms: int, retry_backoff_ms: int,
                 request_timeout_ms: int, assignors: Sequence[Assignor],
                 client_rack: Optional[str] = None) -> None:
        self.client = make_client()
        self.group_id = group_id
        self.group_instance_id = group_instance_id
        self.session_timeout = session_timeout_ms / 1000.0
        self.heartbeat_interval = heartbeat_interval_ms / 1000.0
        self.max_poll_interval = max_poll_interval_ms / 1000.0
        self.retry_backoff = retry_backoff_ms / 1000.0
        self.request_timeout = request_timeout_ms / 1000.0
        self.assignors = list(assignors)
        self.client_rack = client_rack
        self.cooperative = all(a.cooperative for a in self.assignors)
        self.member_id = ""
        self.generation = -1
        self.protocol: Optional[str] = None
        self.leader_id: Optional[str] = None
        self.state = "unjoined"          # unjoined | rebalancing | stable
        self.rejoin_needed = True
        self.lost = False                # set when the membership ended behind our back
        self.owned: Set[TopicPartition] = set()
        self.coordinator: Optional[int] = None
        self.last_heartbeat_ok = time.monotonic()
        self.last_poll = time.monotonic()
        self.group_snapshot: Dict[str, int] = {}   # leader: topic -> partitions it assigned
        self._lock = threading.RLock()
        self._closed = threading.Event()
        self._hb_thread: Optional[threading.Thread] = None
        self._caps: Dict[int, int] = {}
        self._pending_commits: List[Tuple[Any, Any, Dict, Optional[Callable]]] = []

    # -------------------------------------------------------------- plumbing
    def _coordinator_conn(self, deadline: float):
        with self._lock:
            if self.coordinator is None:
                left = max(deadline - time.monotonic(), 0.001)
                info = self.client.find_coordinator(self.group_id, timeout_ms=int(left * 1000))
                self.coordinator = info.node_id
                log.debug("group %s: coordinator is broker %s (%s:%s)", self.group_id,
                          info.node_id, info.host, info.port)
            return self.client._node(self.coordinator)

    def coordinator_unknown(self, why: str) -> None:
        with self._lock:
            if self.coordinator is not None:
                log.info("group %s: coordinator %s no longer usable (%s); looking it up again",
                         self.group_id, self.coordinator, why)
            self.coordinator = None
            self.client._coordinators.pop(self.group_id, None)

    def _call(self, message, deadline: float, wait: Optional[float] = None,
              max_version: Optional[int] = None):
        """One request to the coordinator (at most at ``max_version``); connection trouble
        forgets the coordinator.

        Some brokers (librdkafka's mock among them) advertise the flexible
        versions of the group APIs but drop the connection on them: after such
        a drop the API is used at its last non-flexible version from then on.
        """
        api_key = type(message).API_KEY
        with self._lock:
            conn = self._coordinator_conn(deadline)
            version = self._version(api_key)
            if max_version is not None:
                version = min(version, max_version)
            try:
                pending = self.client._send(conn, message, version, None)
                assert pending is not None
            except (KafkaConnectionError, RequestTimeoutError):
                self.client._drop(conn)
                self.coordinator_unknown("connection failed")
                raise
        budget = wait if wait is not None else max(min(self.request_timeout,
                                                       deadline - time.monotonic()), 0.001)
        try:
            return pending.result(budget)
        except KafkaConnectionError:
            flexible = type(message).FLEXIBLE
            if api_key in (JOIN_GROUP, SYNC_GROUP) and version >= flexible > 0:
                log.info("group %s: the coordinator dropped the connection on %s v%d; using "
                         "v%d from now on", self.group_id, type(message).__name__, version,
                         flexible - 1)
                self._caps[api_key] = flexible - 1
            with self._lock:
                self.client._drop(conn)
                self.coordinator_unknown("connection closed")
            raise
        except (RequestTimeoutError, ProtocolError):
            with self._lock:
                self.client._drop(conn)
                self.coordinator_unknown("no answer")
            raise

    def _version(self, api_key: int) -> int:
        with self._lock:
            if self.coordinator is None:
                raise KafkaConnectionError(f"group {self.group_id}: no coordinator known")
            v = self.client._version(self.client._node(self.coordinator), api_key)
            return min(v, self._caps.get(api_key, v))

    # -------------------------------------------------------------- joining
    def subscription(self, topics: Iterable[str], assignor: Assignor) -> Subscription:
        owned = sorted(self.owned) if self.cooperative else []
        return Subscription(sorted(set(topics)), assignor.user_data(owned, self.generation),
                            owned, self.generation, self.client_rack)

    def join(self, topics: Sequence[str], partitions_for: Callable[[Sequence[str]], Dict[str, int]],
             deadline: float) -> Optional[List[TopicPartition]]:
        """JoinGroup + SyncGroup until a generation is stable; the new assignment.

        Returns None when the deadline passed first (the caller polls again).
        """
        while True:
            if time.monotonic() >= deadline:
                return None
            try:
                result = self._join_once(topics, partitions_for, deadline)
            except BrokerResponseError as exc:
                if exc.code in COORDINATOR_ERRORS:
                    self.coordinator_unknown(exc.name)
                elif exc.code == UNKNOWN_MEMBER_ID:
                    self._reset_member(keep_id=False)
                elif exc.code == ILLEGAL_GENERATION:
                    self._reset_member(keep_id=True)
                elif exc.code == REBALANCE_IN_PROGRESS:
                    pass
                elif not exc.retriable:
                    raise
                log.debug("group %s: join retry after %s", self.group_id, exc.name)
            except (KafkaConnectionError, RequestTimeoutError, ProtocolError) as exc:
                log.debug("group %s: join retry after %s", self.group_id, exc)
            else:
                if result is not None:
                    return result
                continue
            time.sleep(min(self.retry_backoff, max(deadline - time.monotonic(), 0)))

    def _reset_member(self, keep_id: bool) -> None:
        with self._lock:
            if not keep_id:
                self.member_id = ""
            self.generation = -1
            self.state = "unjoined"
            self.rejoin_needed = True

    def _join_once(self, topics, partitions_for, deadline) -> Optional[List[TopicPartition]]:
        self._coordinator_conn(deadline)
        self._version(JOIN_GROUP)  # raises at once when the coordinator was lost meanwhile
        protocols = [{"name": a.name, "metadata": encode_subscription(self.subscription(topics, a))}
                     for a in self.assignors]
        with self._lock:
            self.state = "rebalancing"
        req = P.JoinGroupRequest(
            group_id=self.group_id, session_timeout_ms=int(self.session_timeout * 1000),
            rebalance_timeout_ms=int(self.max_poll_interval * 1000), member_id=self.member_id,
            group_instance_id=self.group_instance_id, protocol_type="consumer",
            protocols=protocols)
        # The broker holds JoinGroup until every member rejoined: up to the rebalance timeout.
        resp = self._call(req, deadline, wait=self.max_poll_interval + self.request_timeout)
        if resp.error_code == MEMBER_ID_REQUIRED:
            self.member_id = resp.member_id
            return None
        if resp.error_code:
            raise make_error(resp.error_code, api="JoinGroup", group=self.group_id)
        with self._lock:
            self.member_id = resp.member_id
            self.generation = resp.generation_id
            self.protocol = resp.protocol_name
            self.leader_id = resp.leader
        log.info("group %s: joined generation %d as %s (%s) with protocol %s", self.group_id,
                 resp.generation_id, resp.member_id,
                 "leader" if resp.leader == resp.member_id else "follower", resp.protocol_name)
        assignments = []
        if resp.leader == resp.member_id and not getattr(resp, "skip_assignment", False):
            assignments = self._lead(resp, partitions_for)
        sync = P.SyncGroupRequest(group_id=self.group_id, generation_id=self.generation,
                                  member_id=self.member_id,
                                  group_instance_id=self.group_instance_id,
                                  protocol_type="consumer", protocol_name=self.protocol,
                                  assignments=assignments)
        sent = time.monotonic()
        sresp = self._call(sync, deadline, wait=self.max_poll_interval + self.request_timeout)
        if sresp.error_code:
            raise make_error(sresp.error_code, api="SyncGroup", group=self.group_id)
        assignment = decode_assignment(sresp.assignment)
        with self._lock:
            self.state = "stable"
            self.rejoin_needed = False
            self.lost = False
            self.last_heartbeat_ok = sent
        return sorted(assignment.partitions)

    def _lead(self, resp, partitions_for) -> List[dict]:
        assignor = next((a for a in self.assignors if a.name == resp.protocol_name), None)
        if assignor is None:
            raise make_error(23, f"the group chose protocol {resp.protocol_name!r}, which this "
                             "member did not offer", api="JoinGroup", group=self.group_id)
        subs: Dict[str, Subscription] = {}
        for m in resp.members:
            subs[m.member_id] = decode_subscription(m.metadata)
        all_topics = sorted({t for s in subs.values() for t in s.topics})
        counts = partitions_for(all_topics)
        self.group_snapshot = dict(counts)
        plan = assignor.assign(counts, subs)
        log.info("group %s: leader assigned %d partition(s) of %d topic(s) to %d member(s) with %s",
                 self.group_id, sum(len(v) for v in plan.values()), len(counts), len(subs),
                 assignor.name)
        return [{"member_id": m, "assignment": encode_assignment(Assignment(plan.get(m, [])))}
                for m in subs]

    # ------------------------------------------------------------ heartbeats
    def start_heartbeats(self) -> None:
        if self._hb_thread is None:
            self._hb_thread = threading.Thread(target=self._heartbeat_loop, daemon=True,
                                               name=f"kafkawire-heartbeat-{self.group_id}")
            self._hb_thread.start()

    def _heartbeat_loop(self) -> None:
        while not self._closed.wait(min(self.heartbeat_interval, 0.2)):
            try:
                self._heartbeat_tick()
            except Exception:  # never let the thread die; the next tick tries again
                log.exception("group %s: heartbeat failed", self.group_id)

    _next_beat = 0.0

    def _heartbeat_tick(self) -> None:
        now = time.monotonic()
        if self.state != "stable":
            return
        if now - self.last_poll > self.max_poll_interval:
            log.warning("group %s: poll() was not called for %.1fs (max_poll_interval_ms is "
                        "%.0f): leaving the group so its partitions go to live members",
                        self.group_id, now - self.last_poll, self.max_poll_interval * 1000)
            self.leave("poll interval exceeded")
            with self._lock:
                self.lost = True
            return
        if not self.session_alive():
            return
        if now < self._next_beat:
            return
        self._next_beat = now + self.heartbeat_interval
        with self._lock:
            generation, member = self.generation, self.member_id
        req = P.HeartbeatRequest(group_id=self.group_id, generation_id=generation,
                                 member_id=member, group_instance_id=self.group_instance_id)
        try:
            resp = self._call(req, now + self.request_timeout)
        except (KafkaConnectionError, RequestTimeoutError, BrokerResponseError,
                ProtocolError) as exc:
            self._next_beat = now + self.retry_backoff
            log.debug("group %s: heartbeat not sent: %s", self.group_id, exc)
            return
        self._on_heartbeat(resp.error_code, generation, now)

    def session_alive(self) -> bool:
        """False (and the assignment marked lost) once a whole session passed without a
        heartbeat getting through: the coordinator may have expelled this member already.

        Time counts from when the last successful heartbeat was *sent*, which is no later
        than when the coordinator saw it, so this member gives up no later than the
        coordinator does.
        """
        if self.state != "stable":
            return True
        if time.monotonic() - self.last_heartbeat_ok <= self.session_timeout:
            return True
        with self._lock:
            if self.state == "stable":
                log.warning("group %s: no heartbeat got through for a whole session timeout; "
                            "treating the assignment as lost", self.group_id)
                self.lost = True
                self.rejoin_needed = True
                self.state = "unjoined"
        return False

    def _on_heartbeat(self, code: int, generation: int, sent: float) -> None:
        with self._lock:
            if generation != self.generation:
                return  # an answer about a generation we already left behind
            if code == 0:
                self.last_heartbeat_ok = max(self.last_heartbeat_ok, sent)
            elif code == REBALANCE_IN_PROGRESS:
                self.last_heartbeat_ok = max(self.last_heartbeat_ok, sent)
                if self.state == "stable":
                    log.info("group %s: rebalance started; rejoining on the next poll",
                             self.group_id)
                self.rejoin_needed = True
            elif code in _MEMBERSHIP_LOST:
                log.warning("group %s: heartbeat answered %s: the assignment is lost",
                            self.group_id, make_error(code).name)
                self.lost = True
                self._reset_member(keep_id=code == ILLEGAL_GENERATION)
            elif code in COORDINATOR_ERRORS:
                self.coordinator_unknown(make_error(code).name)
                self._next_beat = 0.0
            else:
                log.warning("group %s: heartbeat answered %s", self.group_id,
                            make_error(code).name)

    # -------------------------------------------------------------- offsets
    def _commit_request(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]):
        by_topic: Dict[str, list] = {}
        for (topic, partition), om in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append({
                "partition_index": partition, "committed_offset": om.offset,
                "committed_leader_epoch": om.leader_epoch, "committed_metadata": om.metadata})
        with self._lock:
            generation = self.generation if self.state == "stable" else -1
            member = self.member_id if generation >= 0 else ""
        return P.OffsetCommitRequest(
            group_id=self.group_id, generation_id_or_member_epoch=generation, member_id=member,
            group_instance_id=self.group_instance_id if generation >= 0 else None,
            topics=[{"name": t, "partitions": ps} for t, ps in by_topic.items()])

    def _commit_errors(self, resp) -> Optional[BrokerResponseError]:
        first = None
        for t in resp.topics:
            for p in t.partitions:
                if p.error_code:
                    err = make_error(p.error_code, api="OffsetCommit", group=self.group_id,
                                     topic=t.name, partition=p.partition_index)
                    if p.error_code in COORDINATOR_ERRORS:
                        self.coordinator_unknown(err.name)
                    elif p.error_code == REBALANCE_IN_PROGRESS:
                        self.rejoin_needed = True
                    elif p.error_code in _MEMBERSHIP_LOST:
                        self.lost = True
                        self._reset_member(keep_id=p.error_code == ILLEGAL_GENERATION)
                    first = first or err
        return first

    def _retry_or_raise(self, error: BaseException, deadline: float) -> None:
        """Pause before the next attempt, or raise ``error`` when the deadline allows none."""
        if time.monotonic() + self.retry_backoff >= deadline:
            raise error
        time.sleep(self.retry_backoff)

    def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata], timeout: float) -> None:
        """Commit synchronously, retrying coordinator moves until ``timeout`` seconds pass."""
        if not offsets:
            return
        deadline = time.monotonic() + timeout
        while True:
            try:
                resp = self._call(self._commit_request(offsets), deadline)
                err = self._commit_errors(resp)
                if err is None:
                    return
                if not (err.retriable or err.code in COORDINATOR_ERRORS):
                    raise err
                self._retry_or_raise(err, deadline)
            except (KafkaConnectionError, RequestTimeoutError) as exc:
                self._retry_or_raise(exc, deadline)

    def commit_async(self, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                     callback: Optional[Callable]) -> None:
        """Send the commit and return; :meth:`poll_commits` reports its outcome."""
        if not offsets:
            if callback is not None:
                callback(dict(offsets), None)
            return
        try:
            with self._lock:
                conn = self._coordinator_conn(time.monotonic() + self.request_timeout)
                pending = self.client._send(conn, self._commit_request(offsets), None, None)
        except Exception as exc:  # noqa: BLE001 - the callback gets it
            if isinstance(exc, (KafkaConnectionError, RequestTimeoutError)):
                self.coordinator_unknown("connection failed")
            if callback is not None:
                callback(dict(offsets), exc)
            else:
                log.warning("group %s: offset commit failed: %s", self.group_id, exc)
            return
        self._pending_commits.append((pending, conn, dict(offsets), callback))

    def poll_commits(self, block: bool = False) -> None:
        """Finish async commits whose answers arrived (all of them with ``block``)."""
        still = []
        for pending, conn, offsets, callback in self._pending_commits:
            if not block and not pending.done() and not _readable(conn):
                still.append((pending, conn, offsets, callback))
                continue
            err: Optional[BaseException] = None
            try:
                err = self._commit_errors(pending.result(self.request_timeout))
            except Exception as exc:  # noqa: BLE001
                err = exc
                if isinstance(exc, (KafkaConnectionError, RequestTimeoutError)):
                    self.coordinator_unknown("no answer")
            if callback is not None:
                callback(offsets, err)
            elif err is not None:
                log.warning("group %s: offset commit failed: %s", self.group_id, err)
        self._pending_commits = still

    def fetch_committed(self, partitions: Sequence[TopicPartition],
                        timeout: float) -> Dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets (offset -1 where none)."""
        if not partitions:
            return {}
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._coordinator_conn(deadline)
                version = self._version(A.OFFSET_FETCH)
                req = A.offset_fetch_request(self.group_id, list(partitions), version)
                if version >= 7:
                    req.require_stable = True
                resp = self._call(req, deadline)
                code, topics = A.offset_fetch_topics(resp, self.group_id)
                if code:
                    raise make_error(code, api="OffsetFetch", group=self.group_id)
                out: Dict[TopicPartition, OffsetAndMetadata] = {}
                for t in topics:
                    for p in t.partitions:
                        if p.error_code:
                            raise make_error(p.error_code, api="OffsetFetch", group=self.group_id,
                                             topic=t.name, partition=p.partition_index)
                        out[TopicPartition(t.name, p.partition_index)] = OffsetAndMetadata(
                            p.committed_offset, p.metadata,
                            getattr(p, "committed_leader_epoch", -1))
                return out
            except BrokerResponseError as exc:
                if exc.code in COORDINATOR_ERRORS:
                    self.coordinator_unknown(exc.name)
                elif not exc.retriable and exc.code != UNSTABLE_OFFSET_COMMIT:
                    raise
                self._retry_or_raise(exc, deadline)
            except (KafkaConnectionError, RequestTimeoutError) as exc:
                self._retry_or_raise(exc, deadline)

    # --------------------------------------------------------------- leaving
    def leave(self, reason: str = "the consumer is closing") -> None:
        """LeaveGroup (dynamic members only: a static member keeps its place until its session ends)."""
        with self._lock:
            member, self.state = self.member_id, "unjoined"
            self.rejoin_needed = True
            self.generation = -1
            if self.group_instance_id is None:
                self.member_id = ""
        if not member or self.group_instance_id is not None or self.coordinator is None:
            return
        try:
            deadline = time.monotonic() + self.request_timeout
            self._coordinator_conn(deadline)
            # v0-2 say all a dynamic member needs (some brokers mangle the v3+ answers).
            version = min(self._version(LEAVE_GROUP), 2)
            if version >= 3:
                req = P.LeaveGroupRequest(group_id=self.group_id, members=[{
                    "member_id": member, "group_instance_id": None, "reason": reason}])
            else:
                req = P.LeaveGroupRequest(group_id=self.group_id, member_id=member)
            resp = self._call(req, deadline, max_version=version)
            if resp.error_code:
                log.info("group %s: LeaveGroup answered %s", self.group_id,
                         make_error(resp.error_code).name)
            else:
                log.info("group %s: left the group (%s)", self.group_id, reason)
        except Exception as exc:  # noqa: BLE001 - leaving is best effort
            log.info("group %s: LeaveGroup failed: %s", self.group_id, exc)

    def close(self) -> None:
        self._closed.set()
        if self._hb_thread is not None and self._hb_thread is not threading.current_thread():
            self._hb_thread.join(5)
        self.client.close()


def _readable(conn) -> bool:
    """True when the connection has bytes to read (its answer can be read without waiting)."""
    import select
    sock = getattr(conn, "_sock", None)
    if sock is None:
        return True
    pending = getattr(sock, "pending", None)
    if pending is not None and pending() > 0:
        return True
    try:
        r, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(r)
