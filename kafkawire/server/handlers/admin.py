"""CreatePartitions, DescribeConfigs, IncrementalAlterConfigs, DescribeCluster, DeleteRecords."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional

from kafkawire.errors import OffsetOutOfRangeError
from kafkawire.protocol import (ApiKey, CreatePartitionsResponse, DeleteRecordsResponse,
                                DescribeClusterResponse, DescribeConfigsResponse,
                                IncrementalAlterConfigsResponse)
from kafkawire.server.codes import (INVALID_CONFIG, INVALID_REPLICA_ASSIGNMENT, INVALID_REQUEST,
                                    OFFSET_OUT_OF_RANGE, UNKNOWN_TOPIC_OR_PARTITION,
                                    UNSUPPORTED_ENDPOINT_TYPE)
from kafkawire.server.config import TOPIC_CONFIGS, is_sensitive
from kafkawire.server.dispatch import RequestContext
from kafkawire.server.network import advertised_address
from kafkawire.server.handlers.topics import (SOURCE_DEFAULT, SOURCE_STATIC_BROKER, SOURCE_TOPIC,
                                              config_entries)
from kafkawire.server.partitions import TopicError

if TYPE_CHECKING:
    from kafkawire.server.broker import Broker

__all__ = ["register"]

RESOURCE_TOPIC, RESOURCE_BROKER = 2, 4
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3
#: Kafka's ConfigType numbers (DescribeConfigs v3+).
_CONFIG_TYPES = {"bool": 1, "string": 2, "int": 3, "long": 5, "double": 6, "list": 7, "class": 8}
#: The authorized-operations bits of a cluster (no ACLs here: everything).
CLUSTER_OPERATIONS = sum(1 << op for op in (4, 5, 7, 8, 9, 10, 11, 12))


async def handle_create_partitions(ctx: RequestContext, req: Any, version: int) -> CreatePartitionsResponse:
    broker = ctx.broker
    R = CreatePartitionsResponse.CreatePartitionsTopicResult
    results = []
    for t in req.topics:
        res = R(name=t.name, error_code=0, error_message=None)
        try:
            topic = broker.partitions.topics.get(t.name)
            have = len(topic.partitions) if topic is not None else 0
            if t.assignments is not None:
                if len(t.assignments) != t.count - have:
                    raise TopicError(INVALID_REPLICA_ASSIGNMENT,
                                     f"Increasing the number of partitions by {t.count - have} "
                                     f"but {len(t.assignments)} assignments provided.")
                if any(list(a.broker_ids) != [broker.node_id] for a in t.assignments):
                    raise TopicError(INVALID_REPLICA_ASSIGNMENT,
                                     f"Only broker {broker.node_id} exists")
            broker.partitions.add_partitions(t.name, t.count, validate_only=req.validate_only)
        except TopicError as exc:
            res.error_code, res.error_message = exc.code, exc.message
        results.append(res)
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)


def _broker_entries(broker: "Broker") -> List[Dict[str, Any]]:
    return [{"name": k, "value": None if is_sensitive(k) else v, "source": SOURCE_STATIC_BROKER,
             "sensitive": is_sensitive(k)} for k, v in sorted(broker.config.values.items())]


async def handle_describe_configs(ctx: RequestContext, req: Any, version: int) -> DescribeConfigsResponse:
    broker = ctx.broker
    R = DescribeConfigsResponse.DescribeConfigsResult
    C = R.DescribeConfigsResourceResult
    S = C.DescribeConfigsSynonym
    results = []
    for res in req.resources:
        out = R(error_code=0, error_message=None, resource_type=res.resource_type,
                resource_name=res.resource_name, configs=[])
        results.append(out)
        entries: Optional[List[Dict[str, Any]]] = None
        topic = None
        if res.resource_type == RESOURCE_TOPIC:
            topic = broker.partitions.topics.get(res.resource_name)
            if topic is None:
                out.error_code = UNKNOWN_TOPIC_OR_PARTITION
                out.error_message = f"Topic '{res.resource_name}' does not exist."
                continue
            entries = config_entries(broker, topic)
        elif res.resource_type == RESOURCE_BROKER and res.resource_name in ("", str(broker.node_id)):
            entries = _broker_entries(broker)
        else:
            out.error_code = INVALID_REQUEST
            out.error_message = (f"resource type {res.resource_type} named "
                                 f"{res.resource_name!r} is not described by this broker")
            continue
        keys = None if res.configuration_keys is None else set(res.configuration_keys)
        for e in entries:
            if keys is not None and e["name"] not in keys:
                continue
            d = TOPIC_CONFIGS.get(e["name"])
            synonyms = []
            if version >= 1 and req.include_synonyms and topic is not None and d is not None:
                if e["name"] in topic.configs:
                    synonyms.append(S(name=e["name"], value=topic.configs[e["name"]],
                                      source=SOURCE_TOPIC))
                if d.synonym and d.synonym in broker.config.values:
                    synonyms.append(S(name=d.synonym, value=broker.config.values[d.synonym],
                                      source=SOURCE_STATIC_BROKER))
                if d.synonym:
                    synonyms.append(S(name=d.synonym, value=d.default, source=SOURCE_DEFAULT))
            out.configs.append(C(name=e["name"], value=e["value"], read_only=topic is None,
                                 is_default=e["source"] == SOURCE_DEFAULT,
                                 config_source=e["source"], is_sensitive=e.get("sensitive", False),
                                 synonyms=synonyms,
                                 config_type=_CONFIG_TYPES.get(d.type, 0) if d else 2,
                                 documentation=None))
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)


async def handle_incremental_alter_configs(ctx: RequestContext, req: Any, version: int
                                           ) -> IncrementalAlterConfigsResponse:
    broker = ctx.broker
    R = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse
    out = []
    for res in req.resources:
        r = R(error_code=0, error_message=None, resource_type=res.resource_type,
              resource_name=res.resource_name)
        out.append(r)
        if res.resource_type != RESOURCE_TOPIC:
            r.error_code = INVALID_REQUEST
            r.error_message = "only topic configs can be altered on this broker"
            continue
        topic = broker.partitions.topics.get(res.resource_name)
        if topic is None:
            r.error_code = UNKNOWN_TOPIC_OR_PARTITION
            r.error_message = f"Topic '{res.resource_name}' does not exist."
            continue
        changes: Dict[str, Optional[str]] = {}
        try:
            for c in res.configs:
                d = TOPIC_CONFIGS.get(c.name)
                if d is None:
                    raise TopicError(INVALID_CONFIG, f"Unknown topic config name: {c.name}")
                if c.config_operation == OP_SET:
                    changes[c.name] = c.value
                elif c.config_operation == OP_DELETE:
                    changes[c.name] = None
                elif c.config_operation in (OP_APPEND, OP_SUBTRACT):
                    if d.type != "list":
                        raise TopicError(INVALID_CONFIG, f"Config value append is not allowed "
                                         f"for config key: {c.name}")
                    current = broker.partitions.topic_config(topic, c.name) or ""
                    items = [v for v in current.split(",") if v]
                    given = [v for v in (c.value or "").split(",") if v]
                    if c.config_operation == OP_APPEND:
                        items += [v for v in given if v not in items]
                    else:
                        items = [v for v in items if v not in given]
                    changes[c.name] = ",".join(items)
                else:
                    raise TopicError(INVALID_REQUEST, f"unknown config operation "
                                     f"{c.config_operation}")
            broker.partitions.alter_topic_configs(topic.name, changes,
                                                  validate_only=req.validate_only)
        except TopicError as exc:
            r.error_code, r.error_message = exc.code, exc.message
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=out)


async def handle_describe_cluster(ctx: RequestContext, req: Any, version: int) -> DescribeClusterResponse:
    broker = ctx.broker
    if version >= 1 and req.endpoint_type != 1:
        return DescribeClusterResponse(throttle_time_ms=0, error_code=UNSUPPORTED_ENDPOINT_TYPE,
                                       error_message="this endpoint serves brokers only",
                                       endpoint_type=req.endpoint_type, cluster_id=broker.cluster_id,
                                       brokers=[])
    host, port = advertised_address(ctx)
    B = DescribeClusterResponse.DescribeClusterBroker
    return DescribeClusterResponse(
        throttle_time_ms=0, error_code=0, error_message=None, endpoint_type=1,
        cluster_id=broker.cluster_id, controller_id=broker.node_id,
        brokers=[B(broker_id=broker.node_id, host=host, port=port,
                   rack=broker.config.get("broker.rack") or None)],
        cluster_authorized_operations=(CLUSTER_OPERATIONS if req.include_cluster_authorized_operations
                                       else -2147483648))


async def handle_delete_records(ctx: RequestContext, req: Any, version: int) -> DeleteRecordsResponse:
    pm = ctx.broker.partitions
    T = DeleteRecordsResponse.DeleteRecordsTopicResult
    P = T.DeleteRecordsPartitionResult
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            res = P(partition_index=p.partition_index, low_watermark=-1, error_code=0)
            parts.append(res)
            part = pm.partition(t.name, p.partition_index)
            if part is None:
                res.error_code = UNKNOWN_TOPIC_OR_PARTITION
                continue
            try:
                offset = part.high_watermark if p.offset == -1 else p.offset
                if offset < 0:
                    raise OffsetOutOfRangeError(f"offset {offset}")
                res.low_watermark = part.delete_records_before(offset)
            except OffsetOutOfRangeError:
                res.error_code = OFFSET_OUT_OF_RANGE
        topics.append(T(name=t.name, partitions=parts))
    return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)


def register(broker: "Broker") -> None:
    d = broker.dispatcher
    d.register(ApiKey.CREATE_PARTITIONS, handle_create_partitions)
    d.register(ApiKey.DESCRIBE_CONFIGS, handle_describe_configs)
    d.register(ApiKey.INCREMENTAL_ALTER_CONFIGS, handle_incremental_alter_configs)
    d.register(ApiKey.DESCRIBE_CLUSTER, handle_describe_cluster)
    d.register(ApiKey.DELETE_RECORDS, handle_delete_records)
