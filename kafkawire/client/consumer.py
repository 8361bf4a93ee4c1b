"""``kafkawire.Consumer``: read topics alone (``assign``) or as a member of a group (``subscribe``).

Settings are Kafka's consumer settings in snake_case (``auto_offset_reset``,
``enable_auto_commit``, ``max_poll_records``, ...); an unknown one is an error
naming it.  ``poll`` returns records in offset order per partition;
``poll_arrow`` returns the same records as one ``pyarrow.RecordBatch``
decoded by the columnar kernels, without a Python object per record.

Group members talk Kafka's classic group protocol (see
:mod:`kafkawire.client.coordinator`); partitions are handed out by the
``range``, ``roundrobin`` or ``cooperative-sticky`` assignor the members agree
on, so kafkawire consumers share a group with Java and librdkafka consumers.
"""
from __future__ import annotations

import logging
import re
import time
from typing import (Any, Callable, Dict, Iterable, List, Mapping, Optional, Pattern, Sequence,
                    Set, Union)

from kafkawire import protocol as P
from kafkawire.client.assignors import get_assignor
from kafkawire.client.client import Client
from kafkawire.client.config import connection_kwargs, resolve
from kafkawire.client.coordinator import GroupCoordinator
from kafkawire.client.exceptions import (ClientClosedError, ClientError, KafkaConnectionError,
                                         RequestTimeoutError)
from kafkawire.client.fetcher import ConsumerRecord, Fetcher, PartitionState
from kafkawire.client.group_metadata import TopicPartition
from kafkawire.client.results import OffsetAndMetadata, OffsetResult, as_offset_and_metadata
from kafkawire.protocol.error_codes import make_error
from kafkawire.records.columnar import arrow_schema

__all__ = ["Consumer", "ConsumerRecord", "TopicPartition", "NoOffsetForPartitionError"]

log = logging.getLogger("kafkawire.client.consumer")

_RESET = {"earliest": -2, "latest": -1}


class NoOffsetForPartitionError(ClientError):
    """A partition has no committed offset and ``auto_offset_reset`` is ``"none"``."""


Partitions = Iterable[Union[TopicPartition, tuple]]
Callback = Optional[Callable[["Consumer", List[TopicPartition]], None]]


def _tps(partitions: Partitions) -> List[TopicPartition]:
    out = []
    for tp in partitions:
        if isinstance(tp, TopicPartition):
            out.append(tp)
        else:
            topic, partition = tp
            out.append(TopicPartition(str(topic), int(partition)))
    return out


class Consumer:
    """A Kafka consumer; not thread-safe (use it from one thread), close it when done.

    ``Consumer(bootstrap_servers, group_id=None, **settings)``.  Without a
    ``group_id`` only :meth:`assign` is available and offsets cannot be
    committed.  See the consumer guide for the settings.
    """

    def __init__(self, bootstrap_servers: Union[str, Sequence[Any]],
                 group_id: Optional[str] = None, **config: Any) -> None:
        cfg = resolve("consumer", config)
        self.config = cfg
        self.group_id = group_id
        self._client_kwargs = connection_kwargs(cfg)
        self._bootstrap = bootstrap_servers
        self._client = Client(bootstrap_servers, **self._client_kwargs)
        self._isolation = 1 if cfg["isolation_level"] == "read_committed" else 0
        self._reset_strategy = cfg["auto_offset_reset"]
        self._states: Dict[TopicPartition, PartitionState] = {}
        self._fetcher = Fetcher(self._client, self._states,
                                fetch_min_bytes=cfg["fetch_min_bytes"],
                                fetch_max_wait_ms=cfg["fetch_max_wait_ms"],
                                fetch_max_bytes=cfg["fetch_max_bytes"],
                                max_partition_fetch_bytes=cfg["max_partition_fetch_bytes"],
                                isolation_level=self._isolation, client_rack=cfg["client_rack"],
                                check_crcs=cfg["check_crcs"])
        self._key_deser = cfg["key_deserializer"]
        self._value_deser = cfg["value_deserializer"]
        self._topics: List[str] = []
        self._pattern: Optional[Pattern] = None
        self._subscribed = False
        self._user_assigned = False
        self._on_assign: Callback = None
        self._on_revoke: Callback = None
        self._on_lost: Callback = None
        self._closed = False
        self._next_auto_commit = time.monotonic() + cfg["auto_commit_interval_ms"] / 1000.0
        self._coord: Optional[GroupCoordinator] = None
        self._last_metadata = 0.0
        if group_id is not None:
            strategies = cfg["partition_assignment_strategy"]
            self._coord = GroupCoordinator(
                lambda: Client(bootstrap_servers, **self._client_kwargs), group_id,
                group_instance_id=cfg["group_instance_id"],
                session_timeout_ms=cfg["session_timeout_ms"],
                heartbeat_interval_ms=cfg["heartbeat_interval_ms"],
                max_poll_interval_ms=cfg["max_poll_interval_ms"],
                retry_backoff_ms=cfg["retry_backoff_ms"],
                request_timeout_ms=cfg["request_timeout_ms"],
                assignors=[get_assignor(s) for s in strategies], client_rack=cfg["client_rack"])
        elif cfg["group_instance_id"] is not None:
            raise ValueError("group_instance_id needs a group_id")

    # ------------------------------------------------------------ lifecycle
    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"<kafkawire.Consumer group={self.group_id!r} partitions={len(self._states)}"
                f"{' closed' if self._closed else ''}>")

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError("this Consumer was closed; create a new one")

    def close(self, autocommit: Optional[bool] = None, timeout_ms: Optional[int] = None) -> None:
        """Commit (when auto commit is on, or ``autocommit=True``), leave the group, disconnect."""
        if self._closed:
            return
        timeout = (timeout_ms if timeout_ms is not None else self.config["default_api_timeout_ms"])
        try:
            if self._coord is not None:
                commit = self.config["enable_auto_commit"] if autocommit is None else autocommit
                if commit and self._states:
                    try:
                        self._commit_positions(timeout / 1000.0)
                    except Exception as exc:  # noqa: BLE001 - closing goes on
                        log.warning("group %s: commit on close failed: %s", self.group_id, exc)
                self._coord.poll_commits(block=True)
                if self._subscribed and self._states:
                    self._revoke(list(self._states), lost=False)
                self._coord.leave()
        finally:
            self._closed = True
            self._fetcher.close(min(timeout / 1000.0, self._client.request_timeout))
            if self._coord is not None:
                self._coord.close()
            self._client.close()

    # ---------------------------------------------------------- subscription
    def subscribe(self, topics: Union[str, Iterable[str], None] = None, *,
                  pattern: Union[str, Pattern, None] = None, on_assign: Callback = None,
                  on_revoke: Callback = None, on_lost: Callback = None) -> None:
        """Join the group for ``topics`` (or every topic matching ``pattern``).

        ``on_assign(consumer, partitions)`` runs when partitions are given to
        this member, ``on_revoke`` before they are taken away (commit there
        if you commit by hand), ``on_lost`` when the membership ended without
        a chance to commit (the partitions may already belong to another member).
        """
        self._check_open()
        if self._coord is None:
            raise ClientError("subscribe() needs a group_id; use assign() to read without a group")
        if self._user_assigned:
            raise ClientError("this consumer uses assign(); call unsubscribe() before subscribe()")
        if (topics is None) == (pattern is None):
            raise ValueError("give topics or pattern, not both nor neither")
        if pattern is not None:
            self._pattern = re.compile(pattern) if isinstance(pattern, str) else pattern
            self._topics = []
        else:
            assert topics is not None
            self._pattern = None
            self._topics = sorted({topics} if isinstance(topics, str) else set(topics))
        self._on_assign, self._on_revoke, self._on_lost = on_assign, on_revoke, on_lost
        self._subscribed = True
        self._last_metadata = 0.0
        self._coord.rejoin_needed = True

    def unsubscribe(self) -> None:
        """Leave the group (after revoking) or drop a manual assignment."""
        self._check_open()
        if self._subscribed and self._coord is not None:
            if self._states:
                if self.config["enable_auto_commit"]:
                    self._commit_positions(self.config["default_api_timeout_ms"] / 1000.0)
                self._revoke(list(self._states), lost=False)
            self._coord.leave("the consumer unsubscribed")
        self._set_assignment([])
        self._subscribed = False
        self._user_assigned = False
        self._topics, self._pattern = [], None

    def assign(self, partitions: Partitions) -> None:
        """Read exactly these partitions, without group membership (replaces any earlier assign)."""
        self._check_open()
        if self._subscribed:
            raise ClientError("this consumer is subscribed; call unsubscribe() before assign()")
        tps = _tps(partitions)
        self._user_assigned = bool(tps)
        self._set_assignment(tps)

    def assignment(self) -> Set[TopicPartition]:
        """The partitions this consumer reads now."""
        return set(self._states)

    def subscription(self) -> Set[str]:
        """The topics subscribed to (for a pattern, those matching it now)."""
        return set(self._topics)

    def _set_assignment(self, tps: Sequence[TopicPartition]) -> None:
        new = set(tps)
        gone = [tp for tp in self._states if tp not in new]
        for tp in gone:
            del self._states[tp]
        self._fetcher.drop(gone)
        for tp in tps:
            if tp not in self._states:
                self._states[tp] = PartitionState()

    # ------------------------------------------------------------- metadata
    def _refresh_metadata(self, force: bool = False) -> None:
        now = time.monotonic()
        stale = force or self._fetcher.needs_metadata or \
            now - self._last_metadata > self.config["metadata_max_age_ms"] / 1000.0
        if not stale:
            return
        topics: Optional[List[str]]
        if self._pattern is not None:
            topics = None
        else:
            topics = sorted(set(self._topics) | {tp.topic for tp in self._states})
            if not topics:
                self._last_metadata = now
                return
        self._client._refresh(topics)
        self._last_metadata = now
        self._fetcher.needs_metadata = False
        if self._pattern is not None:
            internal = self.config["exclude_internal_topics"]
            matched = sorted(t for t, info in self._client.cluster.topics.items()
                             if self._pattern.fullmatch(t) and info.error_code == 0
                             and not (internal and info.is_internal))
            if matched != self._topics:
                log.info("pattern %s now matches %s", self._pattern.pattern, matched)
                self._topics = matched
                if self._coord is not None:
                    self._coord.rejoin_needed = True
        if self._coord is not None and self._coord.leader_id == self._coord.member_id \
                and self._coord.group_snapshot:
            now_counts = {t: self._client.cluster.topics[t].num_partitions
                          for t in self._coord.group_snapshot if t in self._client.cluster.topics}
            if now_counts != self._coord.group_snapshot:
                log.info("group %s: partition counts changed; rebalancing", self.group_id)
                self._coord.rejoin_needed = True

    def _partition_counts(self, topics: Sequence[str]) -> Dict[str, int]:
        if topics:
            self._client._refresh(list(topics))
        out = {}
        for t in topics:
            info = self._client.cluster.topics.get(t)
            if info is not None and info.error_code == 0 and info.partitions:
                out[t] = info.num_partitions
        return out

    def topics(self) -> Dict[str, int]:
        """Every topic of the cluster with its partition count."""
        self._check_open()
        meta = self._client.metadata()
        return {t: info.num_partitions for t, info in meta.topics.items() if info.error_code == 0}

    def partitions_for(self, topic: str) -> List[int]:
        """The partition numbers of ``topic``."""
        self._check_open()
        info = self._client.metadata([topic]).topics.get(topic)
        if info is None or info.error_code:
            raise make_error(info.error_code if info else 3, api="Metadata", topic=topic)
        return sorted(info.partitions)

    # ------------------------------------------------------------- the group
    def _ensure_group(self, deadline: float) -> bool:
        """Rejoin if needed; False when the deadline passed before the group was stable."""
        coord = self._coord
        if coord is None or not self._subscribed:
            return True
        if coord.lost:
            lost = list(self._states)
            coord.lost = False
            if lost:
                self._revoke(lost, lost=True)
            coord.owned = set()
        self._refresh_metadata()
        if not coord.rejoin_needed and coord.state == "stable":
            return True
        if self._states:
            if self.config["enable_auto_commit"]:
                try:
                    self._commit_positions(max(deadline - time.monotonic(), 1.0))
                except Exception as exc:  # noqa: BLE001 - a failed commit must not block the join
                    log.warning("group %s: commit before rejoining failed: %s", self.group_id, exc)
            if not coord.cooperative:
                self._revoke(list(self._states), lost=False)
                coord.owned = set()
        if not self._topics and self._pattern is not None:
            self._refresh_metadata(force=True)
        new = coord.join(self._topics, self._partition_counts, deadline)
        if new is None:
            return False
        old = set(self._states)
        new_set = set(new)
        revoked = sorted(old - new_set)
        added = sorted(new_set - old)
        if revoked:
            self._revoke(revoked, lost=False)
            if coord.cooperative:
                coord.rejoin_needed = True   # the freed partitions go out in the next round
        for tp in added:
            self._states[tp] = PartitionState()
        coord.owned = set(new_set)
        coord.start_heartbeats()
        log.info("group %s: assigned %s", self.group_id, added)
        if self._on_assign is not None:
            self._on_assign(self, added if coord.cooperative else sorted(new_set))
        return True

    def _revoke(self, tps: List[TopicPartition], lost: bool) -> None:
        cb = self._on_lost if lost else self._on_revoke
        if lost and cb is None:
            cb = self._on_revoke
        if cb is not None:
            try:
                cb(self, sorted(tps))
            except Exception:
                log.exception("the %s callback failed", "on_lost" if lost else "on_revoke")
        for tp in tps:
            self._states.pop(tp, None)
        self._fetcher.drop(tps)

    def _membership_ok(self) -> bool:
        c = self._coord
        if c is None or not self._subscribed:
            return True
        return c.session_alive() and c.state == "stable" and not c.rejoin_needed and not c.lost

    # ---------------------------------------------------------- positions
    def _update_positions(self, deadline: float) -> None:
        for tp in self._fetcher.needs_reset:
            st = self._states.get(tp)
            if st is not None:
                if self._reset_strategy == "none":
                    self._fetcher.needs_reset = []
                    raise make_error(1, f"offset {st.position} is out of range and "
                                     "auto_offset_reset is 'none'", api="Fetch", topic=tp[0],
                                     partition=tp[1])
                st.reset = self._reset_strategy
        self._fetcher.needs_reset = []
        missing = [tp for tp, st in self._states.items() if st.position is None and not st.reset]
        if missing and self._coord is not None:
            committed = self._coord.fetch_committed(missing, max(deadline - time.monotonic(),
                                                                 self.config["request_timeout_ms"]
                                                                 / 1000.0))
            for tp in missing:
                om = committed.get(tp)
                st = self._states[tp]
                if om is not None and om.offset >= 0:
                    st.position = om.offset
                    st.leader_epoch = om.leader_epoch
        to_reset: Dict[TopicPartition, int] = {}
        for tp, st in self._states.items():
            if st.reset:
                to_reset[tp] = _RESET[st.reset]
            elif st.position is None:
                if self._reset_strategy == "none":
                    raise NoOffsetForPartitionError(
                        f"{tp.topic}-{tp.partition} has no committed offset and "
                        "auto_offset_reset is 'none'; seek() to a position first")
                to_reset[tp] = _RESET[self._reset_strategy]
        if to_reset:
            found = self._list_offsets(to_reset, deadline)
            for tp, (offset, _ts, _epoch) in found.items():
                st = self._states.get(tp)
                if st is not None:
                    st.position = offset
                    st.reset = None
                    self._fetcher.drop([tp])

    def _list_offsets(self, specs: Mapping[TopicPartition, int], deadline: float,
                      missing_ok: bool = False) -> Dict[TopicPartition, tuple]:
        """ListOffsets for many partitions, one request per leader: tp -> (offset, timestamp, epoch)."""
        out: Dict[TopicPartition, tuple] = {}
        todo = dict(specs)
        attempt = 0
        while todo:
            topics = sorted({tp.topic for tp in todo})
            if self._client.cluster.needs_refresh(topics) or attempt:
                self._client._refresh(topics)
            by_leader: Dict[int, List[TopicPartition]] = {}
            for tp in todo:
                leader = self._client.cluster.leader(tp.topic, tp.partition)
                if leader is not None:
                    by_leader.setdefault(leader, []).append(tp)
            pendings = []
            for node, tps in by_leader.items():
                by_topic: Dict[str, list] = {}
                for tp in tps:
                    by_topic.setdefault(tp.topic, []).append(
                        {"partition_index": tp.partition, "timestamp": todo[tp]})
                req = P.ListOffsetsRequest(replica_id=-1, isolation_level=self._isolation,
                                           topics=[{"name": t, "partitions": ps}
                                                   for t, ps in by_topic.items()])
                try:
                    conn = self._client._node(node)
                    pending = self._client._send(conn, req, None, None)
                    assert pending is not None
                    pendings.append((conn, pending))
                except (KafkaConnectionError, RequestTimeoutError):
                    self._client.cluster.mark_stale()
            last: Optional[BaseException] = None
            for conn, pending in pendings:
                try:
                    resp = pending.result()
                except (KafkaConnectionError, RequestTimeoutError) as exc:
                    self._client._drop(conn)
                    last = exc
                    continue
                for t in resp.topics:
                    for p in t.partitions:
                        tp = TopicPartition(t.name, p.partition_index)
                        if tp not in todo:
                            continue
                        if p.error_code:
                            err = make_error(p.error_code, api="ListOffsets", topic=t.name,
                                             partition=p.partition_index)
                            if not err.retriable:
                                raise err
                            last = err
                            continue
                        out[tp] = (p.offset, p.timestamp, getattr(p, "leader_epoch", -1))
                        del todo[tp]
            if todo:
                attempt += 1
                if time.monotonic() + self._client.retry_backoff >= deadline:
                    raise last or make_error(5, api="ListOffsets", topic=next(iter(todo)).topic)
                time.sleep(self._client.retry_backoff)
        return out

    # ------------------------------------------------------------------- poll
    def poll(self, timeout_ms: int = 0, max_records: Optional[int] = None) -> List[ConsumerRecord]:
        """Up to ``max_records`` (default ``max_poll_records``) records, waiting up to ``timeout_ms``.

        Records of one partition come in offset order.  The call also keeps
        the group membership going (rejoining when a rebalance started) and
        commits automatically when ``enable_auto_commit`` is on.
        """
        limit = self.config["max_poll_records"] if max_records is None else max_records
        out = self._poll(timeout_ms, limit, None)
        return out

    def poll_arrow(self, timeout_ms: int = 0, max_records: Optional[int] = None, *,
                   include_headers: bool = False) -> Any:
        """The next records as one ``pyarrow.RecordBatch`` (zero rows when none arrived in time).

        Columns: key, value, topic, partition, offset, timestamp, timestampType
        (+ headers with ``include_headers``), the schema of Spark's Kafka source.
        ``max_records`` defaults to 65536 rows.
        """
        import pyarrow as pa

        limit = 65536 if max_records is None else max_records
        batches = self._poll(timeout_ms, limit, include_headers)
        if len(batches) == 1:
            return batches[0]
        schema = arrow_schema(include_headers=include_headers, with_topic=True)
        if not batches:
            return pa.RecordBatch.from_pylist([], schema=schema)
        return pa.Table.from_batches(batches, schema=schema).combine_chunks().to_batches()[0]

    def _poll(self, timeout_ms: int, limit: int, columns: Optional[bool]):
        self._check_open()
        if not self._subscribed and not self._user_assigned:
            raise ClientError("subscribe() or assign() before poll()")
        now = time.monotonic()
        deadline = now + max(timeout_ms, 0) / 1000.0
        if self._coord is not None:
            self._coord.last_poll = now
        while True:
            if self._fetcher.errors:
                err = self._fetcher.errors.pop(0)
                raise err
            if self._coord is not None:
                self._maybe_auto_commit()
                self._coord.poll_commits()
                if not self._ensure_group(deadline):
                    return [] if columns is None else []
            self._refresh_metadata()
            self._update_positions(max(deadline, time.monotonic() + 1.0))
            self._fetcher.wait(0)
            if self._membership_ok():
                # the next fetches go out first: brokers answer them while this call decodes
                self._fetcher.send()
                got = self._take(limit, columns)
                if got:
                    self._fetcher.send()
                    return got
            self._fetcher.send()
            left = deadline - time.monotonic()
            if left <= 0:
                return []
            wait = left if self._coord is None else min(left, self._coord.heartbeat_interval)
            self._fetcher.wait(wait)

    def _take(self, limit: int, columns: Optional[bool]):
        if columns is not None:
            return self._fetcher.take_columns(limit, columns)
        lists = self._fetcher.take_records(limit)
        if not lists:
            return []
        out = lists[0] if len(lists) == 1 else [r for recs in lists for r in recs]
        kd, vd = self._key_deser, self._value_deser
        if kd is not None or vd is not None:
            out = [r._replace(key=kd(r.key) if kd and r.key is not None else r.key,
                              value=vd(r.value) if vd and r.value is not None else r.value)
                   for r in out]
        return out

    # ---------------------------------------------------------------- commit
    def _positions(self) -> Dict[TopicPartition, OffsetAndMetadata]:
        return {tp: OffsetAndMetadata(st.position, "", st.leader_epoch)
                for tp, st in self._states.items() if st.position is not None}

    def _normalize_offsets(self, offsets) -> Dict[TopicPartition, OffsetAndMetadata]:
        if offsets is None:
            return self._positions()
        if not isinstance(offsets, Mapping):
            # records: commit one past the last record of each partition
            out: Dict[TopicPartition, OffsetAndMetadata] = {}
            for r in offsets:
                tp = TopicPartition(r.topic, r.partition)
                if tp not in out or out[tp].offset < r.offset + 1:
                    out[tp] = OffsetAndMetadata(r.offset + 1, "", getattr(r, "leader_epoch", -1))
            return out
        return {TopicPartition(tp[0], int(tp[1])): as_offset_and_metadata(v)
                for tp, v in offsets.items()}

    def _commit_positions(self, timeout: float) -> None:
        assert self._coord is not None
        self._coord.commit(self._positions(), timeout)

    def commit(self, offsets: Union[Mapping, Iterable[ConsumerRecord], None] = None, *,
               timeout_ms: Optional[int] = None) -> None:
        """Commit the positions (next offsets to read) of every owned partition, or ``offsets``.

        ``offsets``: ``{(topic, partition): offset}`` (the next offset to read,
        as Kafka commits it), or records (one past each partition's last).
        """
        self._check_open()
        if self._coord is None:
            raise ClientError("committing offsets needs a group_id")
        timeout = (timeout_ms if timeout_ms is not None else self.config["default_api_timeout_ms"])
        self._coord.commit(self._normalize_offsets(offsets), timeout / 1000.0)

    def commit_async(self, offsets: Union[Mapping, Iterable[ConsumerRecord], None] = None,
                     callback: Optional[Callable[[Dict, Optional[BaseException]], None]] = None
                     ) -> None:
        """Like :meth:`commit` without waiting; ``callback(offsets, error)`` runs in a later poll/close."""
        self._check_open()
        if self._coord is None:
            raise ClientError("committing offsets needs a group_id")
        self._coord.commit_async(self._normalize_offsets(offsets), callback)

    def _maybe_auto_commit(self) -> None:
        if not self.config["enable_auto_commit"] or not self._states:
            return
        now = time.monotonic()
        if now >= self._next_auto_commit:
            self._next_auto_commit = now + self.config["auto_commit_interval_ms"] / 1000.0
            if self._coord is not None and self._membership_ok():
                self._coord.commit_async(self._positions(), None)

    def committed(self, partitions: Partitions, *,
                  timeout_ms: Optional[int] = None) -> Dict[TopicPartition, Optional[int]]:
        """The group's committed offsets (None where the group has none)."""
        self._check_open()
        if self._coord is None:
            raise ClientError("committed offsets belong to a group; give a group_id")
        timeout = (timeout_ms if timeout_ms is not None else self.config["default_api_timeout_ms"])
        got = self._coord.fetch_committed(_tps(partitions), timeout / 1000.0)
        return {tp: (om.offset if om.offset >= 0 else None) for tp, om in got.items()}

    # ------------------------------------------------------------- positions
    def _state(self, tp) -> PartitionState:
        tp = TopicPartition(tp[0], int(tp[1]))
        st = self._states.get(tp)
        if st is None:
            raise ClientError(f"{tp.topic}-{tp.partition} is not assigned to this consumer")
        return st

    def position(self, partition, *, timeout_ms: Optional[int] = None) -> int:
        """The offset of the next record ``poll`` will return for ``partition``."""
        self._check_open()
        st = self._state(partition)
        if st.position is None or st.reset:
            timeout = (timeout_ms if timeout_ms is not None
                       else self.config["default_api_timeout_ms"])
            self._update_positions(time.monotonic() + timeout / 1000.0)
        assert st.position is not None
        return st.position

    def seek(self, partition, offset: int) -> None:
        """Read ``partition`` from ``offset`` on the next poll."""
        self._check_open()
        if offset < 0:
            raise ValueError(f"offset must be >= 0, not {offset}")
        st = self._state(partition)
        st.position, st.reset = int(offset), None
        self._fetcher.drop([TopicPartition(partition[0], int(partition[1]))])

    def _seek_to(self, partitions: Optional[Partitions], where: str) -> None:
        self._check_open()
        tps = list(self._states) if partitions is None else _tps(partitions)
        for tp in tps:
            self._state(tp).reset = where
        self._fetcher.drop(tps)

    def seek_to_beginning(self, partitions: Optional[Partitions] = None) -> None:
        """Read from the first offset of ``partitions`` (all assigned ones by default)."""
        self._seek_to(partitions, "earliest")

    def seek_to_end(self, partitions: Optional[Partitions] = None) -> None:
        """Read only records written from now on."""
        self._seek_to(partitions, "latest")

    def offsets_for_times(self, timestamps: Mapping[Any, int], *,
                          timeout_ms: Optional[int] = None) -> Dict[TopicPartition, Optional[Any]]:
        """For each partition, the first offset with a timestamp at or after the given ms.

        Values are ``OffsetResult`` (offset, timestamp, leader_epoch) or None
        when no record is that recent.
        """
        self._check_open()
        timeout = (timeout_ms if timeout_ms is not None else self.config["default_api_timeout_ms"])
        specs = {TopicPartition(tp[0], int(tp[1])): int(ts) for tp, ts in timestamps.items()}
        for ts in specs.values():
            if ts < 0:
                raise ValueError(f"timestamps must be >= 0 ms, not {ts}")
        found = self._list_offsets(specs, time.monotonic() + timeout / 1000.0)
        return {tp: (OffsetResult(tp.topic, tp.partition, *found[tp]) if found[tp][0] >= 0
                     else None) for tp in specs}

    def beginning_offsets(self, partitions: Partitions, *,
                          timeout_ms: Optional[int] = None) -> Dict[TopicPartition, int]:
        """The first offset of each partition."""
        return self._edge(partitions, -2, timeout_ms)

    def end_offsets(self, partitions: Partitions, *,
                    timeout_ms: Optional[int] = None) -> Dict[TopicPartition, int]:
        """The offset after the last record (the last stable offset under read_committed)."""
        return self._edge(partitions, -1, timeout_ms)

    def _edge(self, partitions, spec: int, timeout_ms) -> Dict[TopicPartition, int]:
        self._check_open()
        timeout = (timeout_ms if timeout_ms is not None else self.config["default_api_timeout_ms"])
        found = self._list_offsets({tp: spec for tp in _tps(partitions)},
                                   time.monotonic() + timeout / 1000.0)
        return {tp: v[0] for tp, v in found.items()}

    def pause(self, partitions: Partitions) -> None:
        """Stop fetching and returning ``partitions`` until :meth:`resume`."""
        for tp in _tps(partitions):
            self._state(tp).paused = True

    def resume(self, partitions: Partitions) -> None:
        """Fetch and return paused partitions again."""
        for tp in _tps(partitions):
            self._state(tp).paused = False

    def paused(self) -> Set[TopicPartition]:
        """The partitions paused now."""
        return {tp for tp, st in self._states.items() if st.paused}

    @property
    def member_id(self) -> Optional[str]:
        """This member's id in its group (None without a group)."""
        return self._coord.member_id if self._coord is not None else None

    @property
    def generation(self) -> int:
        """The group generation this member belongs to (-1 when not in one)."""
        return self._coord.generation if self._coord is not None else -1
