"""Broker and topic configuration: Kafka's names, defaults and the broker-to-topic synonyms.

A topic config's value is, in order: the topic's own setting (CreateTopics,
IncrementalAlterConfigs), the broker's setting of its synonym
(``log.segment.bytes`` for ``segment.bytes``), Kafka's default.
"""
from __future__ import annotations

from typing import Dict, Mapping, NamedTuple, Optional, Tuple

__all__ = ["BrokerConfig", "TopicConfigDef", "TOPIC_CONFIGS", "INTERNAL_TOPIC_CONFIGS",
           "ConfigError", "topic_config_value", "is_sensitive"]

_LONG_MAX = "9223372036854775807"


class ConfigError(ValueError):
    """An unknown config name or a value Kafka would refuse."""


class TopicConfigDef(NamedTuple):
    """One topic config: Kafka's default, its broker synonym and its type."""
    default: Optional[str]
    synonym: Optional[str]
    type: str   # "long", "int", "string", "list", "bool", "double", "class"


#: Topic configs Kafka 3.9 knows, with defaults.  Values are kept as strings, like Kafka's.
TOPIC_CONFIGS: Dict[str, TopicConfigDef] = {
    "cleanup.policy": TopicConfigDef("delete", "log.cleanup.policy", "list"),
    "compression.type": TopicConfigDef("producer", "compression.type", "string"),
    "compression.gzip.level": TopicConfigDef("-1", "compression.gzip.level", "int"),
    "compression.lz4.level": TopicConfigDef("9", "compression.lz4.level", "int"),
    "compression.zstd.level": TopicConfigDef("3", "compression.zstd.level", "int"),
    "delete.retention.ms": TopicConfigDef("86400000", "log.cleaner.delete.retention.ms", "long"),
    "file.delete.delay.ms": TopicConfigDef("60000", "log.segment.delete.delay.ms", "long"),
    "flush.messages": TopicConfigDef(_LONG_MAX, "log.flush.interval.messages", "long"),
    "flush.ms": TopicConfigDef(_LONG_MAX, "log.flush.interval.ms", "long"),
    "follower.replication.throttled.replicas": TopicConfigDef("", None, "list"),
    "index.interval.bytes": TopicConfigDef("4096", "log.index.interval.bytes", "int"),
    "leader.replication.throttled.replicas": TopicConfigDef("", None, "list"),
    "local.retention.bytes": TopicConfigDef("-2", "log.local.retention.bytes", "long"),
    "local.retention.ms": TopicConfigDef("-2", "log.local.retention.ms", "long"),
    "max.compaction.lag.ms": TopicConfigDef(_LONG_MAX, "log.cleaner.max.compaction.lag.ms", "long"),
    "max.message.bytes": TopicConfigDef("1048588", "message.max.bytes", "int"),
    "message.downconversion.enable": TopicConfigDef("true", "log.message.downconversion.enable", "bool"),
    "message.format.version": TopicConfigDef("3.0-IV1", "log.message.format.version", "string"),
    "message.timestamp.after.max.ms": TopicConfigDef(_LONG_MAX, "log.message.timestamp.after.max.ms", "long"),
    "message.timestamp.before.max.ms": TopicConfigDef(_LONG_MAX, "log.message.timestamp.before.max.ms", "long"),
    "message.timestamp.difference.max.ms": TopicConfigDef(_LONG_MAX, "log.message.timestamp.difference.max.ms", "long"),
    "message.timestamp.type": TopicConfigDef("CreateTime", "log.message.timestamp.type", "string"),
    "min.cleanable.dirty.ratio": TopicConfigDef("0.5", "log.cleaner.min.cleanable.ratio", "double"),
    "min.compaction.lag.ms": TopicConfigDef("0", "log.cleaner.min.compaction.lag.ms", "long"),
    "min.insync.replicas": TopicConfigDef("1", "min.insync.replicas", "int"),
    "preallocate": TopicConfigDef("false", "log.preallocate", "bool"),
    "remote.storage.enable": TopicConfigDef("false", None, "bool"),
    "retention.bytes": TopicConfigDef("-1", "log.retention.bytes", "long"),
    "retention.ms": TopicConfigDef("604800000", "log.retention.ms", "long"),
    "segment.bytes": TopicConfigDef("1073741824", "log.segment.bytes", "int"),
    "segment.index.bytes": TopicConfigDef("10485760", "log.index.size.max.bytes", "int"),
    "segment.jitter.ms": TopicConfigDef("0", "log.roll.jitter.ms", "long"),
    "segment.ms": TopicConfigDef("604800000", "log.roll.ms", "long"),
    "unclean.leader.election.enable": TopicConfigDef("false", "unclean.leader.election.enable", "bool"),
}

#: What Kafka sets on its internal topics when it creates them.
INTERNAL_TOPIC_CONFIGS: Dict[str, Dict[str, str]] = {
    "__consumer_offsets": {"cleanup.policy": "compact", "compression.type": "producer",
                           "segment.bytes": "104857600"},
    "__transaction_state": {"cleanup.policy": "compact", "compression.type": "uncompressed",
                            "segment.bytes": "104857600", "min.insync.replicas": "1",
                            "unclean.leader.election.enable": "false"},
}

_BROKER_DEFAULTS: Dict[str, str] = {
    "node.id": "1",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "auto.create.topics.enable": "true",
    "socket.request.max.bytes": str(100 * 1024 * 1024),
    "connections.max.idle.ms": "600000",
    "offsets.topic.num.partitions": "50",
    "transaction.state.log.num.partitions": "50",
    "log.flush.scheduler.interval.ms": "1000",
    "log.flush.offset.checkpoint.interval.ms": "60000",
    "log.retention.check.interval.ms": "300000",
    "log.cleaner.backoff.ms": "15000",
    "log.cleaner.enable": "true",
    "log.cleaner.dedupe.buffer.size": str(128 << 20),
    "max.incremental.fetch.session.cache.slots": "1000",
    "fetch.max.bytes": str(55 * 1024 * 1024),   # caps a consumer fetch's answer, as Kafka's
    "broker.rack": "",
}


#: Security settings (:mod:`kafkawire.server.auth`); also settable per listener as
#: ``listener.name.<name>.<setting>``.
_BROKER_DEFAULTS.update({
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
    "sasl.scram.iterations": "4096",
    "ssl.client.auth": "none",
})

_SENSITIVE_SUFFIXES = ("password", "ssl.keystore.key", "sasl.jaas.config")


def is_sensitive(name: str) -> bool:
    """Whether a broker setting holds a secret (a password, a key, a user's credential):
    DescribeConfigs shows its name, not its value, as Kafka does."""
    return name.startswith("sasl.user.") or name.endswith(_SENSITIVE_SUFFIXES)


def _check_value(name: str, value: str, kind: str) -> None:
    try:
        if kind in ("long", "int"):
            n = int(value)
            if kind == "int" and not -(1 << 31) <= n < (1 << 31):
                raise ValueError
        elif kind == "double":
            float(value)
        elif kind == "bool" and value.lower() not in ("true", "false"):
            raise ValueError
    except ValueError:
        raise ConfigError(f"invalid value {value!r} for configuration {name}: "
                          f"expected a {kind}") from None
    if name == "message.timestamp.type" and value not in ("CreateTime", "LogAppendTime"):
        raise ConfigError(f"invalid value {value!r} for configuration {name}: "
                          "expected CreateTime or LogAppendTime")
    if name == "cleanup.policy" and not set(v.strip() for v in value.split(",")) <= {"delete", "compact"}:
        raise ConfigError(f"invalid value {value!r} for configuration {name}: "
                          "expected delete, compact or both")
    if name == "compression.type" and value not in ("uncompressed", "zstd", "lz4", "snappy",
                                                    "gzip", "producer"):
        raise ConfigError(f"invalid value {value!r} for configuration {name}")


def check_topic_configs(configs: Mapping[str, Optional[str]]) -> None:
    """Raise :class:`ConfigError` for an unknown name or an ill-typed value."""
    for name, value in configs.items():
        d = TOPIC_CONFIGS.get(name)
        if d is None:
            raise ConfigError(f"unknown topic config name: {name}")
        if value is not None:
            _check_value(name, value, d.type)


class BrokerConfig:
    """The broker's settings (``--config k=v``), Kafka names; unknown names are kept (and
    ignored) as Kafka keeps them."""

    def __init__(self, values: Optional[Mapping[str, object]] = None) -> None:
        self.values: Dict[str, str] = dict(_BROKER_DEFAULTS)
        for k, v in (values or {}).items():
            self.values[str(k)] = str(v).lower() if isinstance(v, bool) else str(v)
        for k, v in self.values.items():
            for name, d in TOPIC_CONFIGS.items():
                if d.synonym == k:
                    _check_value(k, v, d.type)

    def get(self, name: str, default: Optional[str] = None) -> Optional[str]:
        return self.values.get(name, default)

    def int(self, name: str) -> int:
        return int(self.values[name])

    def bool(self, name: str) -> bool:
        return self.values.get(name, "false").lower() == "true"


def topic_config_value(name: str, topic_configs: Mapping[str, str],
                       broker: BrokerConfig) -> Tuple[Optional[str], str]:
    """``(value, source)`` of a topic config; source is ``"topic"``, ``"broker"`` or ``"default"``."""
    if name in topic_configs:
        return topic_configs[name], "topic"
    d = TOPIC_CONFIGS[name]
    if d.synonym:
        v = broker.get(d.synonym)
        if v is not None:
            return v, "broker"
        if name == "segment.ms":
            hours = broker.get("log.roll.hours")
            if hours is not None:
                return str(int(hours) * 3600000), "broker"
        if name == "retention.ms":
            for key, mult in (("log.retention.minutes", 60000), ("log.retention.hours", 3600000)):
                v = broker.get(key)
                if v is not None:
                    return str(int(v) * mult), "broker"
    return d.default, "default"
