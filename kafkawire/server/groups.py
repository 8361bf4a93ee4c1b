"""The group coordinator: Kafka's classic consumer group protocol on a single node.

One :class:`GroupCoordinator` owns every group: members, generations,
rebalances, static members and committed offsets.  It is a state machine
driven by an injected clock (milliseconds) and :meth:`GroupCoordinator.poll`,
which fires the timers (session timeouts, rebalance timeouts, the initial
rebalance delay); JoinGroup and SyncGroup answers that must wait for other
members are asyncio futures completed by later requests or by ``poll``.  A
broker calls ``poll`` on a timer (:meth:`GroupCoordinator.start`); tests call
it after moving their clock, with no sockets and no sleeping.

Group states follow Kafka's ``GroupState``: ``Empty`` -> ``PreparingRebalance``
(members join; the first rebalance of an empty group waits
``group.initial.rebalance.delay.ms`` for more members) -> ``CompletingRebalance``
(the leader computes the assignment) -> ``Stable`` (SyncGroup handed every
member its partitions); ``Dead`` after deletion.

Offsets and group metadata are written to ``__consumer_offsets`` in Kafka's
record format (:mod:`kafkawire.protocol.coordinator_records`), in the
partition ``abs(group_id.hashCode()) % offsets.topic.num.partitions`` as Kafka
chooses it, and are read back by :meth:`GroupCoordinator.load` at start-up.
Transactional offset commits are written as transactional batches and become
visible when the transaction coordinator writes the commit marker.
"""
from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

from kafkawire.protocol import ApiKey, FindCoordinatorResponse
from kafkawire.protocol import coordinator_records as R
from kafkawire.protocol.error_codes import (NONE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST,
                                            OFFSET_METADATA_TOO_LARGE,
                                            COORDINATOR_NOT_AVAILABLE, ILLEGAL_GENERATION,
                                            INCONSISTENT_GROUP_PROTOCOL, INVALID_GROUP_ID,
                                            UNKNOWN_MEMBER_ID, INVALID_SESSION_TIMEOUT,
                                            REBALANCE_IN_PROGRESS, NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND,
                                            MEMBER_ID_REQUIRED, GROUP_MAX_SIZE_REACHED,
                                            FENCED_INSTANCE_ID, UNSTABLE_OFFSET_COMMIT)
from kafkawire.protocol.messages import (
    DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest, DescribeGroupsResponse,
    HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
    LeaveGroupResponse, ListGroupsRequest, ListGroupsResponse, OffsetCommitRequest,
    OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse, SyncGroupRequest,
    SyncGroupResponse, TxnOffsetCommitRequest, TxnOffsetCommitResponse)
from kafkawire.server.network import advertised_address
from kafkawire.server.groups_storage import (CoordinatorLog, InternalTopicOwner, KeyValue,
                                             PartitionsLog)

__all__ = ["GroupCoordinator", "GroupConfig", "OFFSETS_TOPIC", "EMPTY", "PREPARING_REBALANCE",
           "COMPLETING_REBALANCE", "STABLE", "DEAD"]

log = logging.getLogger("kafkawire.server.groups")

OFFSETS_TOPIC = "__consumer_offsets"

EMPTY = "Empty"
PREPARING_REBALANCE = "PreparingRebalance"
COMPLETING_REBALANCE = "CompletingRebalance"
STABLE = "Stable"
DEAD = "Dead"


#: DescribeGroups' "authorized operations not requested" value.
_NO_OPERATIONS = -2147483648


@dataclass
class GroupConfig:
    """The broker settings of the group coordinator (Kafka's names and defaults)."""
    offsets_topic_partitions: int = 50            # offsets.topic.num.partitions
    initial_rebalance_delay_ms: int = 3000        # group.initial.rebalance.delay.ms
    min_session_timeout_ms: int = 6000            # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1800000         # group.max.session.timeout.ms
    max_size: int = 2 ** 31 - 1                   # group.max.size
    offset_metadata_max_bytes: int = 4096         # offset.metadata.max.bytes
    offsets_segment_bytes: int = 100 * 1024 * 1024  # offsets.topic.segment.bytes
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000  # offsets.retention.minutes (in ms)
    retention_check_interval_ms: int = 600000     # offsets.retention.check.interval.ms

    @classmethod
    def from_properties(cls, props: Dict[str, str]) -> "GroupConfig":
        """Read the broker properties Kafka names for these settings."""
        names = {"offsets.topic.num.partitions": "offsets_topic_partitions",
                 "group.initial.rebalance.delay.ms": "initial_rebalance_delay_ms",
                 "group.min.session.timeout.ms": "min_session_timeout_ms",
                 "group.max.session.timeout.ms": "max_session_timeout_ms",
                 "group.max.size": "max_size",
                 "offset.metadata.max.bytes": "offset_metadata_max_bytes",
                 "offsets.topic.segment.bytes": "offsets_segment_bytes"}
        values = {attr: int(props[k]) for k, attr in names.items() if k in props}
        if "offsets.retention.minutes" in props:
            values["offsets_retention_ms"] = int(props["offsets.retention.minutes"]) * 60000
        if "offsets.retention.check.interval.ms" in props:
            values["retention_check_interval_ms"] = int(props["offsets.retention.check.interval.ms"])
        return cls(**values)


@dataclass
class Member:
    """One member of a group's current or forming generation."""
    member_id: str
    group_instance_id: Optional[str]
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: List[Tuple[str, bytes]]
    assignment: bytes = b""
    join_future: Optional["asyncio.Future[JoinGroupResponse]"] = None
    join_version: int = 0
    sync_future: Optional["asyncio.Future[SyncGroupResponse]"] = None
    deadline_ms: float = 0.0

    def metadata(self, protocol: Optional[str]) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def same_protocols(self, protocols: List[Tuple[str, bytes]]) -> bool:
        return self.protocols == protocols


@dataclass
class OffsetEntry:
    """A committed offset as the group keeps it."""
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int


@dataclass
class Group:
    """One group's state."""
    group_id: str
    state: str = EMPTY
    generation: int = 0
    protocol_type: Optional[str] = None
    protocol: Optional[str] = None
    leader: Optional[str] = None
    members: Dict[str, Member] = field(default_factory=dict)
    static_members: Dict[str, str] = field(default_factory=dict)   # instance id -> member id
    pending_members: Dict[str, float] = field(default_factory=dict)  # member id -> expiry
    offsets: Dict[Tuple[str, int], OffsetEntry] = field(default_factory=dict)
    pending_txn: Dict[int, Dict[Tuple[str, int], OffsetEntry]] = field(default_factory=dict)
    rebalance_deadline_ms: float = 0.0
    delay_until_ms: float = 0.0          # initial rebalance delay still running until then
    delay_started_ms: float = 0.0
    new_member_during_delay: bool = False
    state_timestamp: int = -1

    def is_empty_of_members(self) -> bool:
        return not self.members and not self.pending_members

    def fenced(self, instance_id: Optional[str], member_id: str) -> bool:
        """A static member whose id is not the one registered for its instance id."""
        if instance_id is None:
            return False
        known = self.static_members.get(instance_id)
        return known is not None and known != member_id


def _per_partition(topics: Sequence[Any], topic_cls: Any, part_cls: Any,
                   codes: Dict[Tuple[str, int], int]) -> List[Any]:
    """A commit response's topics: each requested partition with its error code."""
    return [topic_cls(name=t.name, partitions=[
        part_cls(partition_index=p.partition_index, error_code=codes[(t.name, p.partition_index)])
        for p in t.partitions]) for t in topics]


def _now_wall_ms() -> int:
    return int(time.time() * 1000)


class GroupCoordinator(InternalTopicOwner):
    """Kafka's classic group coordinator for one node (see the module docs).

    ``storage`` persists ``__consumer_offsets``; ``clock`` returns
    milliseconds (monotonic; the default is ``time.monotonic``);
    ``topic_partitions(topic)`` (optional) gives a topic's partition count or
    None when it does not exist, so commits to unknown partitions are refused
    as Kafka refuses them.
    """

    TOPIC = OFFSETS_TOPIC
    TOPIC_CONFIGS = {"cleanup.policy": "compact", "compression.type": "producer"}

    def __init__(self, storage: CoordinatorLog, config: Optional[GroupConfig] = None, *,
                 clock: Optional[Callable[[], float]] = None,
                 wall_clock: Optional[Callable[[], int]] = None,
                 topic_partitions: Optional[Callable[[str], Optional[int]]] = None) -> None:
        self.config = config or GroupConfig()
        super().__init__(storage, self.config.offsets_topic_partitions,
                         self.config.offsets_segment_bytes)
        self.clock = clock or (lambda: time.monotonic() * 1000.0)
        self.wall_clock = wall_clock or _now_wall_ms
        self.topic_partitions = topic_partitions
        self.groups: Dict[str, Group] = {}
        self._next_retention_check = 0
        #: Set by the broker: true once it is stopping.
        self.is_stopping: Callable[[], bool] = lambda: False

    def load(self) -> None:
        """Read back every group and offset in ``__consumer_offsets`` (when it exists)."""
        for p in range(self.existing_partitions()):
            self._load_partition(p)
        now = self.clock()
        for g in self.groups.values():
            for m in g.members.values():
                m.deadline_ms = now + m.session_timeout_ms
        log.info("loaded %d groups from %s", len(self.groups), OFFSETS_TOPIC)

    def _load_partition(self, partition: int) -> None:
        pending: Dict[int, List[Tuple[str, Tuple[str, int], Optional[OffsetEntry]]]] = {}
        for batch in self.storage.read(OFFSETS_TOPIC, partition):
            if batch.is_control:
                entries = pending.pop(batch.producer_id, [])
                if batch.control_type == "commit":
                    for gid, tp, entry in entries:
                        self._apply_offset(gid, tp, entry)
                continue
            for rec in batch:
                if rec.key is None:
                    continue
                try:
                    key = R.decode_offsets_key(bytes(rec.key))
                    value = (None if rec.value is None
                             else R.decode_offsets_value(key, bytes(rec.value)))
                except Exception as exc:  # a record we cannot read is skipped, as Kafka does
                    log.warning("%s-%d: skipping an unreadable record: %s", OFFSETS_TOPIC,
                                partition, exc)
                    continue
                if isinstance(key, R.OffsetCommitKey):
                    tp = (key.topic, key.partition)
                    entry = None
                    if isinstance(value, R.OffsetCommitValue):
                        entry = OffsetEntry(value.offset, value.leader_epoch, value.metadata,
                                            value.commit_timestamp)
                    if batch.is_transactional:
                        pending.setdefault(batch.producer_id, []).append((key.group, tp, entry))
                    else:
                        self._apply_offset(key.group, tp, entry)
                else:
                    self._apply_group(key.group, value)
        # Transactions still open at the end of the log stay pending until their marker.
        for pid, entries in pending.items():
            for gid, tp, entry in entries:
                if entry is not None:
                    self._group(gid).pending_txn.setdefault(pid, {})[tp] = entry

    def _apply_offset(self, group_id: str, tp: Tuple[str, int], entry: Optional[OffsetEntry]) -> None:
        g = self.groups.get(group_id)
        if entry is None:
            if g is not None:
                g.offsets.pop(tp, None)
            return
        self._group(group_id).offsets[tp] = entry

    def _apply_group(self, group_id: str, value: Any) -> None:
        if value is None:
            g = self.groups.pop(group_id, None)
            if g is not None and g.offsets:  # offsets written after the tombstone survive
                self.groups[group_id] = Group(group_id, offsets=g.offsets)
            return
        g = self._group(group_id)
        g.generation = value.generation
        g.protocol_type = value.protocol_type or None
        g.protocol = value.protocol
        g.leader = value.leader
        g.state_timestamp = value.current_state_timestamp
        g.members.clear()
        g.static_members.clear()
        for m in value.members:
            g.members[m.member_id] = Member(
                m.member_id, m.group_instance_id, m.client_id, m.client_host,
                m.rebalance_timeout if m.rebalance_timeout >= 0 else m.session_timeout,
                m.session_timeout, value.protocol_type, [(value.protocol or "", m.subscription)],
                m.assignment)
            if m.group_instance_id is not None:
                g.static_members[m.group_instance_id] = m.member_id
        g.state = STABLE if g.members else EMPTY

    def _group(self, group_id: str) -> Group:
        g = self.groups.get(group_id)
        if g is None:
            g = self.groups[group_id] = Group(group_id)
        return g

    async def stop(self) -> None:
        """Stop the timers and answer every waiting JoinGroup/SyncGroup (the client retries)."""
        await self.stop_timer()
        for g in self.groups.values():
            for m in g.members.values():
                self._fail_waiters(g, m, COORDINATOR_NOT_AVAILABLE)

    # ------------------------------------------------------------------ timers
    async def poll(self) -> None:
        """Fire due timers: expired sessions, rebalance timeouts, the initial delay."""
        if self.is_stopping():
            # answer waiting JoinGroup/SyncGroup now: the broker is draining its connections
            for g in self.groups.values():
                for m in g.members.values():
                    self._fail_waiters(g, m, COORDINATOR_NOT_AVAILABLE)
            return
        now = self.clock()
        for g in list(self.groups.values()):
            for mid, expiry in list(g.pending_members.items()):
                if expiry <= now:
                    del g.pending_members[mid]
            for m in list(g.members.values()):
                if m.join_future is None and m.sync_future is None and m.deadline_ms <= now:
                    log.info("group %s: member %s session expired", g.group_id, m.member_id)
                    await self._remove_member(g, m, "session timeout")
            if g.state == PREPARING_REBALANCE:
                await self._maybe_complete_join(g)
        wall = self.wall_clock()
        if wall >= self._next_retention_check:
            self._next_retention_check = wall + self.config.retention_check_interval_ms
            await self.expire_offsets(wall)

    async def expire_offsets(self, now: int) -> None:
        """Kafka's offset retention: the offsets of a group without members expire
        ``offsets.retention.minutes`` after the group emptied (or, for a group that never
        had members, after each commit); a group left with nothing is deleted."""
        retention = self.config.offsets_retention_ms
        for g in list(self.groups.values()):
            if g.state != EMPTY or g.pending_txn or g.pending_members:
                continue
            emptied = g.state_timestamp if g.protocol_type and g.state_timestamp >= 0 else None
            gone = [tp for tp, e in g.offsets.items()
                    if now - (emptied if emptied is not None else e.commit_timestamp) >= retention]
            forget_group = len(gone) == len(g.offsets)
            if not gone and not (forget_group and g.generation > 0):
                continue
            records: List[KeyValue] = [
                (R.encode(R.OffsetCommitKey(group=g.group_id, topic=t, partition=p)), None)
                for t, p in sorted(gone)]
            if forget_group:
                records.append((R.encode(R.GroupMetadataKey(group=g.group_id)), None))
            try:
                self.ensure_topic()
                await self.storage.append(OFFSETS_TOPIC, self.partition_for(g.group_id), records)
            except Exception as exc:
                log.error("group %s: writing expired offsets failed: %s", g.group_id, exc)
                continue
            for tp in gone:
                del g.offsets[tp]
            if forget_group:
                del self.groups[g.group_id]
            log.info("group %s: %d offsets expired%s", g.group_id, len(gone),
                     "; the group is removed" if forget_group else "")

    # ------------------------------------------------------------------ rebalances
    def _prepare_rebalance(self, g: Group, reason: str) -> None:
        now = self.clock()
        if g.state == COMPLETING_REBALANCE:
            # Assignments the leader may be computing are void: members must rejoin.
            for m in g.members.values():
                if m.sync_future is not None and not m.sync_future.done():
                    m.sync_future.set_result(SyncGroupResponse(error_code=REBALANCE_IN_PROGRESS))
                m.sync_future = None
        was_empty = g.state == EMPTY
        g.state = PREPARING_REBALANCE
        timeout = max((m.rebalance_timeout_ms for m in g.members.values()), default=0)
        g.rebalance_deadline_ms = now + timeout
        if was_empty and self.config.initial_rebalance_delay_ms > 0:
            g.delay_started_ms = now
            g.delay_until_ms = now + min(self.config.initial_rebalance_delay_ms, timeout)
            g.new_member_during_delay = False
        else:
            g.delay_until_ms = 0.0
        log.info("group %s: rebalancing (generation %d): %s", g.group_id, g.generation, reason)

    async def _maybe_complete_join(self, g: Group) -> None:
        if g.state != PREPARING_REBALANCE:
            return
        now = self.clock()
        if g.delay_until_ms:
            if now < g.delay_until_ms:
                return
            remaining = g.rebalance_deadline_ms - now
            if g.new_member_during_delay and remaining > 0:
                g.new_member_during_delay = False
                g.delay_until_ms = now + min(self.config.initial_rebalance_delay_ms, remaining)
                return
            g.delay_until_ms = 0.0
            await self._complete_join(g)
            return
        all_joined = (all(m.join_future is not None for m in g.members.values())
                      and not g.pending_members)
        if all_joined or now >= g.rebalance_deadline_ms:
            await self._complete_join(g)

    def _select_protocol(self, g: Group) -> Optional[str]:
        members = list(g.members.values())
        common: Optional[Set[str]] = None
        for m in members:
            names = {n for n, _ in m.protocols}
            common = names if common is None else common & names
        if not common:
            return None
        votes: Dict[str, int] = {}
        for m in members:
            choice = next(n for n, _ in m.protocols if n in common)
            votes[choice] = votes.get(choice, 0) + 1
        # most votes; among equals the first member's preference
        first = [n for n, _ in members[0].protocols if n in common]
        return max(first, key=lambda n: (votes.get(n, 0), -first.index(n)))

    async def _complete_join(self, g: Group) -> None:
        for m in list(g.members.values()):
            if m.join_future is None:
                log.info("group %s: member %s did not rejoin in time", g.group_id, m.member_id)
                self._drop_member(g, m)
        g.generation += 1
        g.state_timestamp = self.wall_clock()
        if not g.members:
            g.state = EMPTY
            g.protocol = None
            g.leader = None
            await self._store_group(g)
            return
        g.protocol = self._select_protocol(g)
        if g.leader not in g.members:
            g.leader = next(iter(g.members))
        g.state = COMPLETING_REBALANCE
        now = self.clock()
        leader = g.leader
        everyone = [JoinGroupResponse.JoinGroupResponseMember(
            member_id=m.member_id, group_instance_id=m.group_instance_id,
            metadata=m.metadata(g.protocol)) for m in g.members.values()]
        for m in g.members.values():
            fut, m.join_future = m.join_future, None
            m.deadline_ms = now + m.session_timeout_ms
            if fut is not None and not fut.done():
                fut.set_result(self._join_response(g, m, everyone if m.member_id == leader else []))
        log.info("group %s: generation %d with %d members, protocol %s, leader %s", g.group_id,
                 g.generation, len(g.members), g.protocol, leader)

    def _join_response(self, g: Group, m: Member, members: List[Any], error: int = NONE,
                       skip_assignment: bool = False) -> JoinGroupResponse:
        return JoinGroupResponse(error_code=error, generation_id=g.generation,
                                 protocol_type=g.protocol_type, protocol_name=g.protocol or "",
                                 leader=g.leader or "", member_id=m.member_id, members=members,
                                 skip_assignment=skip_assignment)

    def _fail_waiters(self, g: Group, m: Member, error: int) -> None:
        if m.join_future is not None and not m.join_future.done():
            m.join_future.set_result(JoinGroupResponse(error_code=error, member_id=m.member_id,
                                                       protocol_name=""))
        m.join_future = None
        if m.sync_future is not None and not m.sync_future.done():
            m.sync_future.set_result(SyncGroupResponse(error_code=error))
        m.sync_future = None

    def _drop_member(self, g: Group, m: Member) -> None:
        g.members.pop(m.member_id, None)
        if m.group_instance_id is not None and g.static_members.get(m.group_instance_id) == m.member_id:
            del g.static_members[m.group_instance_id]
        if g.leader == m.member_id:
            g.leader = next(iter(g.members), None)

    async def _remove_member(self, g: Group, m: Member, reason: str) -> None:
        self._fail_waiters(g, m, UNKNOWN_MEMBER_ID)
        self._drop_member(g, m)
        if g.state in (STABLE, COMPLETING_REBALANCE):
            self._prepare_rebalance(g, f"member {m.member_id} left ({reason})")
        await self._maybe_complete_join(g)

    # ------------------------------------------------------------------ JoinGroup
    async def join_group(self, req: JoinGroupRequest, version: int, client_id: str = "",
                         client_host: str = "") -> JoinGroupResponse:
        """JoinGroup: answers when the rebalance completes (or at once with an error)."""
        def error(code: int, member_id: str = "") -> JoinGroupResponse:
            return JoinGroupResponse(error_code=code, member_id=member_id, protocol_name="")

        gid = req.group_id
        if not gid:
            return error(INVALID_GROUP_ID)
        if not (self.config.min_session_timeout_ms <= req.session_timeout_ms
                <= self.config.max_session_timeout_ms):
            return error(INVALID_SESSION_TIMEOUT, req.member_id)
        protocols = [(p.name, bytes(p.metadata)) for p in req.protocols]
        if not req.protocol_type or not protocols:
            return error(INCONSISTENT_GROUP_PROTOCOL, req.member_id)
        rebalance_timeout = req.rebalance_timeout_ms if version >= 1 and req.rebalance_timeout_ms > 0 \
            else req.session_timeout_ms
        g = self.groups.get(gid)
        if g is None:
            if req.member_id:
                return error(UNKNOWN_MEMBER_ID, req.member_id)
            g = self._group(gid)
        if g.state == DEAD:
            return error(COORDINATOR_NOT_AVAILABLE, req.member_id)
        if g.members and (g.protocol_type != req.protocol_type or not self._supports(g, protocols)):
            return error(INCONSISTENT_GROUP_PROTOCOL, req.member_id)
        instance_id = req.group_instance_id if version >= 5 else None
        args = (req.protocol_type, protocols, req.session_timeout_ms, rebalance_timeout,
                client_id, client_host)
        if not req.member_id:
            if instance_id is not None and instance_id in g.static_members:
                return await self._static_rejoin(g, instance_id, version, args)
            if len(g.members) + len(g.pending_members) >= self.config.max_size:
                return error(GROUP_MAX_SIZE_REACHED)
            member_id = f"{client_id}-{uuid.uuid4()}"
            if instance_id is None and version >= 4:
                # KIP-394: the member learns its id first and joins with it.
                g.pending_members[member_id] = self.clock() + req.session_timeout_ms
                return error(MEMBER_ID_REQUIRED, member_id)
            return await self._add_member_and_rebalance(g, member_id, instance_id, version, args)
        member_id = req.member_id
        if g.fenced(instance_id, member_id):
            return error(FENCED_INSTANCE_ID, member_id)
        if member_id in g.pending_members:
            del g.pending_members[member_id]
            return await self._add_member_and_rebalance(g, member_id, instance_id, version, args)
        m = g.members.get(member_id)
        if m is None:
            return error(UNKNOWN_MEMBER_ID, member_id)
        if instance_id is not None and m.group_instance_id is None:
            m.group_instance_id = instance_id
            g.static_members[instance_id] = member_id
        if g.state == PREPARING_REBALANCE:
            return await self._update_member_and_wait(g, m, version, args)
        if g.state == COMPLETING_REBALANCE:
            if m.same_protocols(protocols):
                # The member lost our answer: send it again.
                everyone = self._members_of(g) if member_id == g.leader else []
                return self._join_response(g, m, everyone)
            self._prepare_rebalance(g, f"member {member_id} changed its protocols")
            return await self._update_member_and_wait(g, m, version, args)
        if g.state == STABLE:
            if member_id == g.leader or not m.same_protocols(protocols):
                self._prepare_rebalance(g, f"member {member_id} rejoined")
                return await self._update_member_and_wait(g, m, version, args)
            m.deadline_ms = self.clock() + m.session_timeout_ms
            return self._join_response(g, m, [])
        # EMPTY with a known member cannot happen; treat as unknown
        return error(UNKNOWN_MEMBER_ID, member_id)

    def _supports(self, g: Group, protocols: List[Tuple[str, bytes]]) -> bool:
        names = {n for n, _ in protocols}
        common: Optional[Set[str]] = None
        for m in g.members.values():
            mine = {n for n, _ in m.protocols}
            common = mine if common is None else common & mine
        return bool(common is None or common & names)

    def _members_of(self, g: Group) -> List[Any]:
        return [JoinGroupResponse.JoinGroupResponseMember(
            member_id=m.member_id, group_instance_id=m.group_instance_id,
            metadata=m.metadata(g.protocol)) for m in g.members.values()]

    def _set_member(self, m: Member, version: int, args: Tuple[Any, ...]) -> None:
        (m.protocol_type, m.protocols, m.session_timeout_ms, m.rebalance_timeout_ms,
         client_id, client_host) = args
        m.client_id, m.client_host = client_id, client_host
        m.join_version = version

    async def _wait_join(self, g: Group, m: Member) -> JoinGroupResponse:
        fut: "asyncio.Future[JoinGroupResponse]" = asyncio.get_running_loop().create_future()
        if m.join_future is not None and not m.join_future.done():
            m.join_future.set_result(JoinGroupResponse(error_code=UNKNOWN_MEMBER_ID,
                                                       member_id=m.member_id, protocol_name=""))
        m.join_future = fut
        await self._maybe_complete_join(g)
        return await fut

    async def _add_member_and_rebalance(self, g: Group, member_id: str, instance_id: Optional[str],
                                        version: int, args: Tuple[Any, ...]) -> JoinGroupResponse:
        m = Member(member_id, instance_id, "", "", 0, 0, "", [])
        self._set_member(m, version, args)
        if not g.members:
            g.protocol_type = m.protocol_type
        g.members[member_id] = m
        if instance_id is not None:
            g.static_members[instance_id] = member_id
        if g.state == PREPARING_REBALANCE:
            if g.delay_until_ms:
                g.new_member_during_delay = True
            g.rebalance_deadline_ms = max(g.rebalance_deadline_ms,
                                          self.clock() + m.rebalance_timeout_ms)
        else:
            self._prepare_rebalance(g, f"new member {member_id} joined")
        return await self._wait_join(g, m)

    async def _update_member_and_wait(self, g: Group, m: Member, version: int,
                                      args: Tuple[Any, ...]) -> JoinGroupResponse:
        self._set_member(m, version, args)
        return await self._wait_join(g, m)

    async def _static_rejoin(self, g: Group, instance_id: str, version: int,
                             args: Tuple[Any, ...]) -> JoinGroupResponse:
        """KIP-345: a known static member rejoining with no member id gets a new id;
        the old id is fenced, and a stable group keeps its assignment (no rebalance)."""
        old_id = g.static_members[instance_id]
        old = g.members[old_id]
        new_id = f"{args[4]}-{uuid.uuid4()}"
        self._fail_waiters(g, old, FENCED_INSTANCE_ID)
        del g.members[old_id]
        old.member_id = new_id
        g.members[new_id] = old
        g.static_members[instance_id] = new_id
        if g.leader == old_id:
            g.leader = new_id
        same = old.same_protocols(args[1])
        self._set_member(old, version, args)
        old.deadline_ms = self.clock() + old.session_timeout_ms
        if g.state == STABLE and same:
            await self._store_group(g)
            leader = new_id == g.leader
            return self._join_response(g, old, self._members_of(g) if leader else [],
                                       skip_assignment=leader)
        if g.state in (STABLE, COMPLETING_REBALANCE):
            self._prepare_rebalance(g, f"static member {instance_id} rejoined")
        return await self._wait_join(g, old)

    def _member_check(self, req: Any, version: int, gone: Tuple[str, ...]
                      ) -> Tuple[int, Optional[Group], Optional[Member]]:
        """SyncGroup's and Heartbeat's checks (both put the instance id in v3+):
        the group, the member (not fenced) and its generation."""
        g = self.groups.get(req.group_id)
        instance_id = req.group_instance_id if version >= 3 else None
        if g is None or g.state in gone:
            return UNKNOWN_MEMBER_ID, None, None
        if g.fenced(instance_id, req.member_id):
            return FENCED_INSTANCE_ID, None, None
        m = g.members.get(req.member_id)
        if m is None:
            return UNKNOWN_MEMBER_ID, None, None
        if req.generation_id != g.generation:
            return ILLEGAL_GENERATION, None, None
        return NONE, g, m

    # ------------------------------------------------------------------ SyncGroup
    async def sync_group(self, req: SyncGroupRequest, version: int) -> SyncGroupResponse:
        """SyncGroup: the leader's assignment, answered to every member once it arrives."""
        code, g, m = self._member_check(req, version, (DEAD,))
        if code != NONE or g is None or m is None:
            return SyncGroupResponse(error_code=code)
        if version >= 5 and ((req.protocol_type is not None and req.protocol_type != g.protocol_type)
                             or (req.protocol_name is not None and req.protocol_name != g.protocol)):
            return SyncGroupResponse(error_code=INCONSISTENT_GROUP_PROTOCOL)
        m.deadline_ms = self.clock() + m.session_timeout_ms
        if g.state == PREPARING_REBALANCE:
            return SyncGroupResponse(error_code=REBALANCE_IN_PROGRESS)
        if g.state == STABLE:
            return self._sync_response(g, m)
        if g.state != COMPLETING_REBALANCE:
            return SyncGroupResponse(error_code=UNKNOWN_MEMBER_ID)
        fut: "asyncio.Future[SyncGroupResponse]" = asyncio.get_running_loop().create_future()
        m.sync_future = fut
        if req.member_id == g.leader:
            given = {a.member_id: bytes(a.assignment) for a in req.assignments}
            for member in g.members.values():
                member.assignment = given.get(member.member_id, b"")
            generation = g.generation
            try:
                await self._store_group(g)
            except Exception as exc:
                log.error("group %s: storing the assignment failed: %s", g.group_id, exc)
                for member in g.members.values():
                    self._fail_waiters(g, member, COORDINATOR_NOT_AVAILABLE)
                if g.generation == generation and g.state == COMPLETING_REBALANCE:
                    self._prepare_rebalance(g, "storing the assignment failed")
                return await fut
            if g.generation == generation and g.state == COMPLETING_REBALANCE:
                g.state = STABLE
                now = self.clock()
                for member in g.members.values():
                    f, member.sync_future = member.sync_future, None
                    member.deadline_ms = now + member.session_timeout_ms
                    if f is not None and not f.done():
                        f.set_result(self._sync_response(g, member))
        return await fut

    def _sync_response(self, g: Group, m: Member) -> SyncGroupResponse:
        return SyncGroupResponse(error_code=NONE, protocol_type=g.protocol_type,
                                 protocol_name=g.protocol, assignment=m.assignment)

    # ------------------------------------------------------------------ Heartbeat / Leave
    async def heartbeat(self, req: HeartbeatRequest, version: int) -> HeartbeatResponse:
        """Heartbeat: keeps the session alive; REBALANCE_IN_PROGRESS tells the member to rejoin."""
        code, g, m = self._member_check(req, version, (DEAD, EMPTY))
        if code != NONE or g is None or m is None:
            return HeartbeatResponse(error_code=code)
        m.deadline_ms = self.clock() + m.session_timeout_ms
        if g.state == PREPARING_REBALANCE:
            return HeartbeatResponse(error_code=REBALANCE_IN_PROGRESS)
        return HeartbeatResponse(error_code=NONE)

    async def leave_group(self, req: LeaveGroupRequest, version: int) -> LeaveGroupResponse:
        """LeaveGroup: one member (v0-v2) or a batch of members, static ones by instance id (v3+)."""
        g = self.groups.get(req.group_id)
        if version < 3:
            if g is None or req.member_id not in g.members:
                return LeaveGroupResponse(error_code=UNKNOWN_MEMBER_ID)
            await self._remove_member(g, g.members[req.member_id], "left the group")
            return LeaveGroupResponse(error_code=NONE)
        if g is None:
            return LeaveGroupResponse(error_code=UNKNOWN_MEMBER_ID)
        results = []
        for ident in req.members:
            code = NONE
            member_id, instance_id = ident.member_id, ident.group_instance_id
            if instance_id is not None:
                known = g.static_members.get(instance_id)
                if known is None:
                    code = UNKNOWN_MEMBER_ID
                elif member_id and member_id != known:
                    code = FENCED_INSTANCE_ID
                else:
                    member_id = known
            elif member_id in g.pending_members:
                del g.pending_members[member_id]
                member_id = ""
            elif member_id not in g.members:
                code = UNKNOWN_MEMBER_ID
            if code == NONE and member_id in g.members:
                await self._remove_member(g, g.members[member_id], "left the group")
            results.append(LeaveGroupResponse.MemberResponse(
                member_id=ident.member_id, group_instance_id=instance_id, error_code=code))
        return LeaveGroupResponse(error_code=NONE, members=results)

    # ------------------------------------------------------------------ offsets
    def _commit_check(self, g: Optional[Group], generation: int, member_id: str,
                      instance_id: Optional[str]) -> int:
        """Kafka's checks before accepting a (transactional) offset commit."""
        if g is None:
            return NONE if generation < 0 else ILLEGAL_GENERATION if not member_id \
                else UNKNOWN_MEMBER_ID
        if g.state == DEAD:
            return COORDINATOR_NOT_AVAILABLE
        if generation < 0 and g.state == EMPTY:
            return NONE  # offsets stored for a consumer that manages its own partitions
        if g.fenced(instance_id, member_id):
            return FENCED_INSTANCE_ID
        if member_id not in g.members:
            return UNKNOWN_MEMBER_ID
        if generation != g.generation:
            return ILLEGAL_GENERATION
        if g.state == COMPLETING_REBALANCE:
            return REBALANCE_IN_PROGRESS
        return NONE

    def _partition_error(self, topic: str, partition: int, metadata: Optional[str]) -> int:
        if metadata is not None and len(metadata.encode("utf-8")) > self.config.offset_metadata_max_bytes:
            return OFFSET_METADATA_TOO_LARGE
        if self.topic_partitions is not None:
            n = self.topic_partitions(topic)
            if n is None or not 0 <= partition < n:
                return UNKNOWN_TOPIC_OR_PARTITION
        return NONE

    def _entries(self, topics: Sequence[Any], client_timestamps: bool
                 ) -> Tuple[Dict[Tuple[str, int], int], Dict[Tuple[str, int], OffsetEntry]]:
        """Each partition's error code, and the entries to write for those without one."""
        now = self.wall_clock()
        codes: Dict[Tuple[str, int], int] = {}
        entries: Dict[Tuple[str, int], OffsetEntry] = {}
        for t in topics:
            for p in t.partitions:
                tp = (t.name, p.partition_index)
                codes[tp] = self._partition_error(t.name, p.partition_index, p.committed_metadata)
                if codes[tp] == NONE:
                    ts = getattr(p, "commit_timestamp", -1) if client_timestamps else -1
                    entries[tp] = OffsetEntry(p.committed_offset, p.committed_leader_epoch,
                                              p.committed_metadata or "", ts if ts >= 0 else now)
        return codes, entries

    async def offset_commit(self, req: OffsetCommitRequest, version: int) -> OffsetCommitResponse:
        """OffsetCommit: checked against the member's generation, then written to
        ``__consumer_offsets`` before it is acknowledged."""
        gid = req.group_id
        generation = req.generation_id_or_member_epoch if version >= 1 else -1
        member_id = req.member_id if version >= 1 else ""
        instance_id = req.group_instance_id if version >= 7 else None

        def answer(codes: Dict[Tuple[str, int], int]) -> OffsetCommitResponse:
            T = OffsetCommitResponse.OffsetCommitResponseTopic
            return OffsetCommitResponse(topics=_per_partition(
                req.topics, T, T.OffsetCommitResponsePartition, codes))

        all_tps = [(t.name, p.partition_index) for t in req.topics for p in t.partitions]
        if not gid:
            return answer({tp: INVALID_GROUP_ID for tp in all_tps})
        g = self.groups.get(gid)
        code = self._commit_check(g, generation, member_id, instance_id)
        if code != NONE:
            return answer({tp: code for tp in all_tps})
        if g is not None and member_id in g.members:
            g.members[member_id].deadline_ms = self.clock() + g.members[member_id].session_timeout_ms
        codes, entries = self._entries(req.topics, version == 1)
        if entries:
            try:
                await self._store_offsets(gid, entries)
            except Exception as exc:
                log.error("group %s: writing offsets failed: %s", gid, exc)
                for tp in entries:
                    codes[tp] = COORDINATOR_NOT_AVAILABLE
                return answer(codes)
            g = self._group(gid)
            g.offsets.update(entries)
        return answer(codes)

    async def txn_offset_commit(self, req: TxnOffsetCommitRequest, version: int
                                ) -> TxnOffsetCommitResponse:
        """TxnOffsetCommit: offsets written in the producer's transaction, visible after its commit."""
        T = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic

        def answer(codes: Dict[Tuple[str, int], int]) -> TxnOffsetCommitResponse:
            return TxnOffsetCommitResponse(topics=_per_partition(
                req.topics, T, T.TxnOffsetCommitResponsePartition, codes))

        all_tps = [(t.name, p.partition_index) for t in req.topics for p in t.partitions]
        gid = req.group_id
        if not gid:
            return answer({tp: INVALID_GROUP_ID for tp in all_tps})
        g = self.groups.get(gid)
        code = NONE
        if version >= 3 and (req.member_id or req.generation_id >= 0):
            code = self._commit_check(g, req.generation_id, req.member_id, req.group_instance_id)
        elif g is not None and g.state == DEAD:
            code = COORDINATOR_NOT_AVAILABLE
        if code != NONE:
            return answer({tp: code for tp in all_tps})
        codes, entries = self._entries(req.topics, False)
        if entries:
            try:
                await self._store_offsets(gid, entries, producer_id=req.producer_id,
                                          producer_epoch=req.producer_epoch)
            except Exception as exc:
                log.error("group %s: writing transactional offsets failed: %s", gid, exc)
                return answer({tp: COORDINATOR_NOT_AVAILABLE if tp in entries else c
                               for tp, c in codes.items()})
            self._group(gid).pending_txn.setdefault(req.producer_id, {}).update(entries)
        return answer(codes)

    def complete_txn(self, producer_id: int, offsets_partition: int, committed: bool) -> None:
        """The transaction coordinator wrote its marker into ``offsets_partition``:
        make the producer's pending offsets there visible (commit) or drop them (abort)."""
        for g in self.groups.values():
            if self.partition_for(g.group_id) != offsets_partition:
                continue
            entries = g.pending_txn.pop(producer_id, None)
            if entries and committed:
                g.offsets.update(entries)

    async def offset_fetch(self, req: OffsetFetchRequest, version: int) -> OffsetFetchResponse:
        """OffsetFetch: one group (v0-v7) or several (v8+); -1 for partitions without a commit."""
        if version < 8:
            topics = None if req.topics is None else [(t.name, list(t.partition_indexes))
                                                      for t in req.topics]
            error, rows = self._fetch_group(req.group_id, topics, req.require_stable)
            T = OffsetFetchResponse.OffsetFetchResponseTopic
            out = [T(name=name, partitions=[T.OffsetFetchResponsePartition(
                partition_index=p, committed_offset=o, committed_leader_epoch=e, metadata=md,
                error_code=c) for p, o, e, md, c in parts]) for name, parts in rows]
            if version < 2 and error != NONE:
                for t in out:
                    for p in t.partitions:
                        p.error_code = error
            return OffsetFetchResponse(topics=out, error_code=error)
        G = OffsetFetchResponse.OffsetFetchResponseGroup
        T8 = G.OffsetFetchResponseTopics
        groups = []
        for rg in req.groups:
            topics = None if rg.topics is None else [(t.name, list(t.partition_indexes))
                                                     for t in rg.topics]
            error, rows = self._fetch_group(rg.group_id, topics, req.require_stable)
            groups.append(G(group_id=rg.group_id, error_code=error, topics=[
                T8(name=name, partitions=[T8.OffsetFetchResponsePartitions(
                    partition_index=p, committed_offset=o, committed_leader_epoch=e, metadata=md,
                    error_code=c) for p, o, e, md, c in parts]) for name, parts in rows]))
        return OffsetFetchResponse(groups=groups)

    def _fetch_group(self, group_id: str, topics: Optional[List[Tuple[str, List[int]]]],
                     require_stable: bool
                     ) -> Tuple[int, List[Tuple[str, List[Tuple[int, int, int, str, int]]]]]:
        if not group_id:
            return INVALID_GROUP_ID, []
        g = self.groups.get(group_id)
        offsets = g.offsets if g is not None else {}
        pending: Set[Tuple[str, int]] = set()
        if g is not None:
            for entries in g.pending_txn.values():
                pending.update(entries)
        if topics is None:
            by_topic: Dict[str, List[int]] = {}
            for (t, p) in sorted(offsets):
                by_topic.setdefault(t, []).append(p)
            topics = list(by_topic.items())
        rows = []
        for name, parts in topics:
            out = []
            for p in parts:
                e = offsets.get((name, p))
                if require_stable and (name, p) in pending:
                    out.append((p, -1, -1, "", UNSTABLE_OFFSET_COMMIT))
                elif e is None:
                    out.append((p, -1, -1, "", NONE))
                else:
                    out.append((p, e.offset, e.leader_epoch, e.metadata, NONE))
            rows.append((name, out))
        return NONE, rows

    # ------------------------------------------------------------------ admin
    async def describe_groups(self, req: DescribeGroupsRequest, version: int
                              ) -> DescribeGroupsResponse:
        """DescribeGroups: state, protocol and members (with assignments when Stable)."""
        D = DescribeGroupsResponse.DescribedGroup
        out = []
        for gid in req.groups:
            g = self.groups.get(gid)
            ops = 0 if version >= 3 and req.include_authorized_operations else _NO_OPERATIONS
            if not gid:
                out.append(D(error_code=INVALID_GROUP_ID, group_id=gid, group_state="",
                             authorized_operations=ops))
                continue
            if g is None:
                out.append(D(error_code=NONE, group_id=gid, group_state=DEAD,
                             authorized_operations=ops))
                continue
            stable = g.state == STABLE
            members = [D.DescribedGroupMember(
                member_id=m.member_id, group_instance_id=m.group_instance_id,
                client_id=m.client_id, client_host=m.client_host,
                member_metadata=m.metadata(g.protocol) if stable else b"",
                member_assignment=m.assignment if stable else b"") for m in g.members.values()]
            out.append(D(error_code=NONE, group_id=gid, group_state=g.state,
                         protocol_type=g.protocol_type or "",
                         protocol_data=(g.protocol or "") if stable else "", members=members,
                         authorized_operations=ops))
        return DescribeGroupsResponse(groups=out)

    async def list_groups(self, req: ListGroupsRequest, version: int) -> ListGroupsResponse:
        """ListGroups, filtered by state (v4+) and type (v5+; every group here is ``classic``)."""
        states = {s.lower() for s in req.states_filter} if version >= 4 else set()
        types = {s.lower() for s in req.types_filter} if version >= 5 else set()
        L = ListGroupsResponse.ListedGroup
        out = []
        for g in self.groups.values():
            if g.state == DEAD or (states and g.state.lower() not in states):
                continue
            if types and "classic" not in types:
                continue
            out.append(L(group_id=g.group_id, protocol_type=g.protocol_type or "",
                         group_state=g.state, group_type="classic"))
        return ListGroupsResponse(error_code=NONE, groups=out)

    async def delete_groups(self, req: DeleteGroupsRequest, version: int) -> DeleteGroupsResponse:
        """DeleteGroups: empty groups only; their offsets and metadata become tombstones."""
        R_ = DeleteGroupsResponse.DeletableGroupResult
        out = []
        for gid in req.groups_names:
            g = self.groups.get(gid)
            if not gid:
                code = INVALID_GROUP_ID
            elif g is None or g.state == DEAD:
                code = GROUP_ID_NOT_FOUND
            elif g.members or g.pending_members:
                code = NON_EMPTY_GROUP
            else:
                code = NONE
                records: List[KeyValue] = [
                    (R.encode(R.OffsetCommitKey(group=gid, topic=t, partition=p)), None)
                    for (t, p) in sorted(g.offsets)]
                records.append((R.encode(R.GroupMetadataKey(group=gid)), None))
                try:
                    self.ensure_topic()
                    await self.storage.append(OFFSETS_TOPIC, self.partition_for(gid), records)
                except Exception as exc:
                    log.error("group %s: writing its deletion failed: %s", gid, exc)
                    code = COORDINATOR_NOT_AVAILABLE
                else:
                    g.state = DEAD
                    del self.groups[gid]
            out.append(R_(group_id=gid, error_code=code))
        return DeleteGroupsResponse(results=out)

    # ------------------------------------------------------------------ storage
    async def _store_offsets(self, group_id: str, entries: Dict[Tuple[str, int], OffsetEntry], *,
                             producer_id: int = -1, producer_epoch: int = -1) -> None:
        self.ensure_topic()
        records = [(R.encode(R.OffsetCommitKey(group=group_id, topic=t, partition=p)),
                    R.encode(R.OffsetCommitValue(offset=e.offset, leader_epoch=e.leader_epoch,
                                                 metadata=e.metadata,
                                                 commit_timestamp=e.commit_timestamp)))
                   for (t, p), e in entries.items()]
        await self.storage.append(OFFSETS_TOPIC, self.partition_for(group_id), records,
                                  producer_id=producer_id, producer_epoch=producer_epoch,
                                  transactional=producer_id >= 0)

    async def _store_group(self, g: Group) -> None:
        self.ensure_topic()
        value = R.GroupMetadataValue(
            protocol_type=g.protocol_type or "", generation=g.generation, protocol=g.protocol,
            leader=g.leader, current_state_timestamp=g.state_timestamp,
            members=[R.GroupMetadataValue.MemberMetadata(
                member_id=m.member_id, group_instance_id=m.group_instance_id,
                client_id=m.client_id, client_host=m.client_host,
                rebalance_timeout=m.rebalance_timeout_ms, session_timeout=m.session_timeout_ms,
                subscription=m.metadata(g.protocol), assignment=m.assignment)
                for m in g.members.values()])
        await self.storage.append(OFFSETS_TOPIC, self.partition_for(g.group_id),
                                  [(R.encode(R.GroupMetadataKey(group=g.group_id)),
                                    R.encode(value))])


# ---------------------------------------------------------------------- broker wiring
#: FindCoordinator key types.
GROUP_KEY, TRANSACTION_KEY = 0, 1


def _client_host(ctx: Any) -> str:
    host = str(ctx.peer or "").rsplit(":", 1)[0].strip("[]")
    return "/" + host


def _topic_partitions(manager: Any) -> Callable[[str], Optional[int]]:
    def count(topic: str) -> Optional[int]:
        t = manager.topics.get(topic)
        return None if t is None else len(t.partitions)
    return count


def register(broker: Any) -> None:
    """Plug the group coordinator into ``broker`` (a :class:`kafkawire.server.Broker`):
    its handlers, FindCoordinator, and loading at start-up."""
    coord = GroupCoordinator(PartitionsLog(broker.partitions),
                             GroupConfig.from_properties(broker.config.values),
                             topic_partitions=_topic_partitions(broker.partitions))
    broker.group_coordinator = coord
    coord.is_stopping = lambda: bool(broker.stopping)
    d = broker.dispatcher

    def ensure(key_type: int) -> Tuple[int, Optional[str]]:
        try:
            if key_type == GROUP_KEY:
                coord.ensure_topic()
            elif key_type == TRANSACTION_KEY:
                txn = getattr(broker, "txn_coordinator", None)
                if txn is None:
                    return COORDINATOR_NOT_AVAILABLE, "transactions are not available"
                txn.ensure_topic()
            else:
                return INVALID_REQUEST, f"unknown key type {key_type}"
        except Exception as exc:  # a read-only broker cannot create the internal topics
            return COORDINATOR_NOT_AVAILABLE, str(exc)
        return NONE, None

    def find_coordinator(ctx: Any, req: Any, version: int) -> Any:
        host, port = advertised_address(ctx)
        if version < 4:
            code, message = ensure(req.key_type if version >= 1 else GROUP_KEY)
            return FindCoordinatorResponse(error_code=code, error_message=message,
                                           node_id=broker.node_id if code == NONE else -1,
                                           host=host if code == NONE else "",
                                           port=port if code == NONE else -1)
        out = []
        for key in req.coordinator_keys:
            code, message = ensure(req.key_type)
            out.append(FindCoordinatorResponse.Coordinator(
                key=key, node_id=broker.node_id if code == NONE else -1,
                host=host if code == NONE else "", port=port if code == NONE else -1,
                error_code=code, error_message=message))
        return FindCoordinatorResponse(coordinators=out)

    async def join(ctx: Any, req: Any, version: int) -> Any:
        return await coord.join_group(req, version, ctx.client_id or "", _client_host(ctx))

    async def txn_offset_commit(ctx: Any, req: Any, version: int) -> Any:
        txn = getattr(broker, "txn_coordinator", None)
        code = NONE if txn is None else txn.check_offsets(req.transactional_id, req.producer_id,
                                                          req.producer_epoch)
        if code != NONE:
            T = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
            return TxnOffsetCommitResponse(topics=_per_partition(
                req.topics, T, T.TxnOffsetCommitResponsePartition,
                {(t.name, p.partition_index): code for t in req.topics for p in t.partitions}))
        return await coord.txn_offset_commit(req, version)

    def plain(method: Callable[[Any, int], Any]) -> Any:
        async def handler(ctx: Any, req: Any, version: int) -> Any:
            return await method(req, version)
        return handler

    d.register_now(ApiKey.FIND_COORDINATOR, find_coordinator)   # answered at once
    d.register(ApiKey.JOIN_GROUP, join)
    d.register(ApiKey.SYNC_GROUP, plain(coord.sync_group))
    d.register(ApiKey.HEARTBEAT, plain(coord.heartbeat))
    d.register(ApiKey.LEAVE_GROUP, plain(coord.leave_group))
    d.register(ApiKey.OFFSET_COMMIT, plain(coord.offset_commit))
    d.register(ApiKey.OFFSET_FETCH, plain(coord.offset_fetch))
    d.register(ApiKey.DESCRIBE_GROUPS, plain(coord.describe_groups))
    d.register(ApiKey.LIST_GROUPS, plain(coord.list_groups))
    d.register(ApiKey.DELETE_GROUPS, plain(coord.delete_groups))
    d.register(ApiKey.TXN_OFFSET_COMMIT, txn_offset_commit)

    async def on_start(b: Any) -> None:
        coord.load()
        coord.start()

    async def on_stop(b: Any) -> None:
        await coord.stop()

    broker.on_start.append(on_start)
    broker.on_stop.append(on_stop)
