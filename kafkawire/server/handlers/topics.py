"""Metadata, CreateTopics and DeleteTopics."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional

from kafkawire.protocol import (ApiKey, CreateTopicsResponse, DeleteTopicsResponse,
                                MetadataResponse)
from kafkawire.protocol.schema import ZERO_UUID
from kafkawire.server.config import TOPIC_CONFIGS, topic_config_value
from kafkawire.server.codes import (INVALID_REPLICA_ASSIGNMENT, INVALID_REPLICATION_FACTOR,
                                    INVALID_REQUEST, UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION)
from kafkawire.server.dispatch import RequestContext
from kafkawire.server.network import advertised_address
from kafkawire.server.partitions import INTERNAL_TOPICS, Topic, TopicError, validate_topic_name

if TYPE_CHECKING:
    from kafkawire.server.broker import Broker

__all__ = ["register", "topic_ops", "config_entries"]

#: READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS (no ACLs here).
TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
#: Kafka's ConfigSource numbers.
SOURCE_TOPIC, SOURCE_STATIC_BROKER, SOURCE_DEFAULT = 1, 4, 5


def topic_ops(include: bool) -> int:
    return TOPIC_OPERATIONS if include else -2147483648


def config_entries(broker: "Broker", topic: Topic) -> List[Dict[str, Any]]:
    """Every topic config with its value and source (topic, broker, default)."""
    out = []
    for name in sorted(TOPIC_CONFIGS):
        value = broker.partitions.topic_config(topic, name)
        src_name = "topic" if name in topic.configs else \
            topic_config_value(name, topic.configs, broker.config)[1]
        source = {"topic": SOURCE_TOPIC, "broker": SOURCE_STATIC_BROKER}.get(src_name,
                                                                             SOURCE_DEFAULT)
        if topic.internal and name not in topic.configs and src_name == "default" \
                and value != TOPIC_CONFIGS[name].default:
            source = SOURCE_TOPIC
        out.append({"name": name, "value": value, "source": source})
    return out


def _partitions(broker: "Broker", topic: Topic) -> List[MetadataResponse.MetadataResponseTopic.MetadataResponsePartition]:
    P = MetadataResponse.MetadataResponseTopic.MetadataResponsePartition
    node = broker.node_id
    return [P(error_code=0, partition_index=i, leader_id=node, leader_epoch=0,
              replica_nodes=[node], isr_nodes=[node], offline_replicas=[])
            for i in sorted(topic.partitions)]


def handle_metadata(ctx: RequestContext, req: Any, version: int) -> MetadataResponse:
    """Metadata, answered at once (a synchronous handler: every new connection asks)."""
    broker = ctx.broker
    pm = broker.partitions
    T = MetadataResponse.MetadataResponseTopic
    include_ops = bool(getattr(req, "include_topic_authorized_operations", False))
    topics: List[MetadataResponse.MetadataResponseTopic] = []
    wanted = req.topics
    if wanted is None or (version == 0 and not wanted):
        for name in sorted(pm.topics):
            known = pm.topics[name]
            topics.append(T(error_code=0, name=name, topic_id=known.topic_id,
                            is_internal=known.internal, partitions=_partitions(broker, known),
                            topic_authorized_operations=topic_ops(include_ops)))
    else:
        auto = (broker.config.bool("auto.create.topics.enable") and not broker.read_only
                and (version < 4 or req.allow_auto_topic_creation))
        by_id = {t.topic_id: t for t in pm.topics.values()}
        for want in wanted:
            name = want.name
            t: Optional[Topic]
            if name is None:
                t = by_id.get(want.topic_id)
                if t is None:
                    topics.append(T(error_code=UNKNOWN_TOPIC_ID, name=None,
                                    topic_id=want.topic_id, partitions=[]))
                    continue
            else:
                t = pm.topics.get(name)
            if t is None and auto and name not in INTERNAL_TOPICS:
                try:
                    validate_topic_name(name)
                    t = pm.create_topic(name, broker.config.int("num.partitions"))
                except TopicError as exc:
                    topics.append(T(error_code=exc.code, name=name, topic_id=ZERO_UUID,
                                    partitions=[]))
                    continue
            if t is None:
                topics.append(T(error_code=UNKNOWN_TOPIC_OR_PARTITION, name=name,
                                topic_id=ZERO_UUID, partitions=[]))
                continue
            topics.append(T(error_code=0, name=t.name, topic_id=t.topic_id, is_internal=t.internal,
                            partitions=_partitions(broker, t),
                            topic_authorized_operations=topic_ops(include_ops)))
    host, port = advertised_address(ctx)
    rack = broker.config.get("broker.rack") or None
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=[MetadataResponse.MetadataResponseBroker(node_id=broker.node_id, host=host,
                                                         port=port, rack=rack)],
        cluster_id=broker.cluster_id, controller_id=broker.node_id, topics=topics,
        cluster_authorized_operations=-2147483648)


async def handle_create_topics(ctx: RequestContext, req: Any, version: int) -> CreateTopicsResponse:
    broker = ctx.broker
    R = CreateTopicsResponse.CreatableTopicResult
    results: List[CreateTopicsResponse.CreatableTopicResult] = []
    seen: Dict[str, int] = {}
    for t in req.topics:
        seen[t.name] = seen.get(t.name, 0) + 1
    for t in req.topics:
        res = R(name=t.name, error_code=0, error_message=None)
        try:
            if seen[t.name] > 1:
                raise TopicError(INVALID_REQUEST, f"Duplicate topic name {t.name} in the request")
            n, rf = t.num_partitions, t.replication_factor
            if t.assignments:
                if n != -1 or rf != -1:
                    raise TopicError(INVALID_REQUEST, "Both numPartitions or replicationFactor and "
                                         "replicasAssignments were set.")
                idx = sorted(a.partition_index for a in t.assignments)
                if idx != list(range(len(idx))):
                    raise TopicError(INVALID_REPLICA_ASSIGNMENT, "Partitions should be a "
                                     "consecutive 0-based integer sequence")
                for a in t.assignments:
                    if list(a.broker_ids) != [broker.node_id]:
                        raise TopicError(INVALID_REPLICA_ASSIGNMENT,
                                         f"Only broker {broker.node_id} exists: replica "
                                         f"assignment {list(a.broker_ids)} is impossible")
                n, rf = len(idx), 1
            if n == -1:
                n = broker.config.int("num.partitions")
            if rf == -1:
                rf = broker.config.int("default.replication.factor")
            if rf < 1:
                raise TopicError(INVALID_REPLICATION_FACTOR,
                                 "Replication factor must be larger than 0.")
            if rf > 1:
                raise TopicError(INVALID_REPLICATION_FACTOR,
                                 f"Unable to replicate the partition {rf} time(s): The target "
                                 "replication factor of 2 cannot be reached because only 1 "
                                 "broker(s) are registered.".replace("2", str(rf), 1))
            configs = {c.name: c.value for c in t.configs}
            topic = broker.partitions.create_topic(t.name, n, configs,
                                                   validate_only=bool(req.validate_only))
            res.topic_id = topic.topic_id
            res.num_partitions = n
            res.replication_factor = 1
            C = R.CreatableTopicConfigs
            res.configs = [C(name=e["name"], value=e["value"], read_only=False,
                             config_source=e["source"], is_sensitive=False)
                           for e in config_entries(broker, topic)]
        except TopicError as exc:
            res.error_code = exc.code
            res.error_message = exc.message
        results.append(res)
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)


async def handle_delete_topics(ctx: RequestContext, req: Any, version: int) -> DeleteTopicsResponse:
    pm = ctx.broker.partitions
    R = DeleteTopicsResponse.DeletableTopicResult
    wanted = ([(s.name, s.topic_id) for s in req.topics] if version >= 6
              else [(n, ZERO_UUID) for n in req.topic_names])
    by_id = {t.topic_id: t.name for t in pm.topics.values()}
    out = []
    for name, tid in wanted:
        res = R(name=name, topic_id=tid, error_code=0)
        if name is None:
            name = by_id.get(tid)
            if name is None:
                res.error_code = UNKNOWN_TOPIC_ID
                res.error_message = f"topic id {tid} does not exist"
                out.append(res)
                continue
            res.name = name
        t = pm.topics.get(name)
        if t is not None and tid != ZERO_UUID and tid != t.topic_id:
            res.error_code, res.error_message = UNKNOWN_TOPIC_ID, "topic id and name do not match"
        else:
            try:
                if t is not None:
                    res.topic_id = t.topic_id
                pm.delete_topic(name)
            except TopicError as exc:
                res.error_code, res.error_message = exc.code, exc.message
        out.append(res)
    return DeleteTopicsResponse(throttle_time_ms=0, responses=out)


def register(broker: "Broker") -> None:
    d = broker.dispatcher
    d.register_now(ApiKey.METADATA, handle_metadata)
    d.register(ApiKey.CREATE_TOPICS, handle_create_topics)
    d.register(ApiKey.DELETE_TOPICS, handle_delete_topics)

