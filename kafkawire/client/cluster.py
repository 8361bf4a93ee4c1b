"""The client's picture of the cluster: brokers, topics, partition leaders.

Built from Metadata responses and kept until something says it is stale: a
NOT_LEADER_OR_FOLLOWER / UNKNOWN_TOPIC_OR_PARTITION / LEADER_NOT_AVAILABLE
error, a socket error talking to a leader, or its age passing
``metadata_max_age``.  That is the protocol guide's advice: cache metadata,
refresh it when an error shows it is out of date, don't poll.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from kafkawire.protocol.error_codes import (FENCED_LEADER_EPOCH, LEADER_NOT_AVAILABLE,
                                           NOT_LEADER_OR_FOLLOWER, REPLICA_NOT_AVAILABLE,
                                           UNKNOWN_LEADER_EPOCH, UNKNOWN_TOPIC_ID,
                                           UNKNOWN_TOPIC_OR_PARTITION)

__all__ = ["BrokerInfo", "PartitionInfo", "TopicInfo", "ClusterMetadata", "parse_bootstrap",
           "STALE_METADATA_CODES"]

# Error codes meaning "your metadata is out of date; refresh and retry".
STALE_METADATA_CODES = frozenset({
    UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER,
    REPLICA_NOT_AVAILABLE, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, UNKNOWN_TOPIC_ID,
})


@dataclass(frozen=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: Optional[str] = None


@dataclass(frozen=True)
class PartitionInfo:
    topic: str
    partition: int
    leader: int
    leader_epoch: int = -1
    replicas: Tuple[int, ...] = ()
    isr: Tuple[int, ...] = ()
    offline_replicas: Tuple[int, ...] = ()
    error_code: int = 0


@dataclass
class TopicInfo:
    name: str
    partitions: Dict[int, PartitionInfo] = field(default_factory=dict)
    topic_id: Optional[object] = None
    is_internal: bool = False
    error_code: int = 0

    @property
    def num_partitions(self) -> int:
        return len(self.partitions)

    def available_partitions(self) -> List[int]:
        """Partitions that currently have a leader."""
        return sorted(p for p, info in self.partitions.items() if info.leader >= 0)


def parse_bootstrap(servers) -> List[Tuple[str, int]]:
    """``"h1:9092,h2"`` or ``["h1:9092", ("h2", 9093)]`` -> ``[(host, port), ...]`` (port 9092 default)."""
    if isinstance(servers, str):
        servers = [s for s in servers.split(",")]
    out = []
    for s in servers:
        if isinstance(s, (tuple, list)):
            host, port = s
            out.append((str(host), int(port)))
            continue
        s = s.strip()
        if not s:
            continue
        if s.startswith("["):  # [ipv6]:port
            host, _, rest = s[1:].partition("]")
            port = int(rest[1:]) if rest.startswith(":") else 9092
        elif s.count(":") == 1:
            host, port_s = s.rsplit(":", 1)
            port = int(port_s)
        else:
            host, port = s, 9092
        out.append((host, port))
    if not out:
        raise ValueError("bootstrap_servers is empty; give at least one 'host:port'")
    return out


class ClusterMetadata:
    """Brokers and topic layouts from the last Metadata responses."""

    def __init__(self, max_age: float = 300.0) -> None:
        self.max_age = max_age
        self.brokers: Dict[int, BrokerInfo] = {}
        self.topics: Dict[str, TopicInfo] = {}
        self.cluster_id: Optional[str] = None
        self.controller_id: int = -1
        self.updated_at: float = 0.0
        self._stale_topics: set = set()
        self._stale_all = True

    def update(self, response, *, all_topics: bool = False) -> None:
        """Fold a decoded MetadataResponse in (its brokers replace ours)."""
        brokers = {}
        for b in response.brokers:
            brokers[b.node_id] = BrokerInfo(b.node_id, b.host, b.port, getattr(b, "rack", None))
        if brokers:
            self.brokers = brokers
        self.cluster_id = getattr(response, "cluster_id", None)
        self.controller_id = getattr(response, "controller_id", -1)
        seen = set()
        for t in response.topics:
            name = t.name
            if name is None:
                continue
            seen.add(name)
            info = TopicInfo(name, topic_id=getattr(t, "topic_id", None),
                             is_internal=bool(getattr(t, "is_internal", False)),
                             error_code=t.error_code)
            for p in t.partitions:
                info.partitions[p.partition_index] = PartitionInfo(
                    name, p.partition_index, p.leader_id, getattr(p, "leader_epoch", -1),
                    tuple(p.replica_nodes), tuple(p.isr_nodes),
                    tuple(getattr(p, "offline_replicas", ()) or ()), p.error_code)
            if info.error_code == 0 or name not in self.topics:
                self.topics[name] = info
            self._stale_topics.discard(name)
        if all_topics:
            for name in list(self.topics):
                if name not in seen:
                    del self.topics[name]
            self._stale_topics.clear()
        elif self._stale_all:
            self._stale_topics.update(set(self.topics) - seen)
        self._stale_all = False
        self.updated_at = time.monotonic()

    def mark_stale(self, topics: Iterable[str] = ()) -> None:
        """Note that these topics' (or, with none given, all) metadata must be fetched again."""
        topics = list(topics)
        if topics:
            self._stale_topics.update(topics)
        else:
            self._stale_all = True

    def needs_refresh(self, topics: Sequence[str] = ()) -> bool:
        if self._stale_all or time.monotonic() - self.updated_at > self.max_age:
            return True
        for t in topics:
            info = self.topics.get(t)
            if t in self._stale_topics or info is None or info.error_code != 0 or not info.partitions:
                return True
        return False

    def leader(self, topic: str, partition: int) -> Optional[int]:
        """The leader's node id, or None when unknown or without a leader."""
        info = self.topics.get(topic)
        if info is None:
            return None
        p = info.partitions.get(partition)
        if p is None or p.leader < 0:
            return None
        return p.leader

    def broker(self, node_id: int) -> Optional[BrokerInfo]:
        return self.brokers.get(node_id)
