"""Topic administration against the broker through librdkafka's AdminClient: create (with
configs), partitions, configs described and altered (persisted), cluster, delete records, delete."""
from __future__ import annotations

import time

import pytest

from kafkawire.testing import kafka_broker, running_broker  # noqa: F401  (the fixture)

pytestmark = pytest.mark.one_backend
ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry,  # noqa: E402
                                   ConfigResource, NewPartitions, NewTopic, OffsetSpec)


def _admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


def _configs(admin, topic):
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return admin.describe_configs([res])[res].result(10)


def test_topics_configs_partitions_cluster(tmp_path):
    d = str(tmp_path / "logs")
    with running_broker(d, config={"log.segment.bytes": "2000000"}) as b:
        a = _admin(b)
        a.create_topics([NewTopic("cfg", 2, 1, config={"retention.ms": "12345",
                                                        "cleanup.policy": "compact"})]
                        )["cfg"].result(10)
        with pytest.raises(ck.KafkaException) as exc:
            a.create_topics([NewTopic("cfg", 1, 1)])["cfg"].result(10)
        assert exc.value.args[0].code() == ck.KafkaError.TOPIC_ALREADY_EXISTS
        with pytest.raises(ck.KafkaException) as exc:
            a.create_topics([NewTopic("bad/name", 1, 1)])["bad/name"].result(10)
        assert exc.value.args[0].code() == ck.KafkaError.TOPIC_EXCEPTION
        with pytest.raises(ck.KafkaException) as exc:
            a.create_topics([NewTopic("rf3", 1, 3)])["rf3"].result(10)
        assert exc.value.args[0].code() == ck.KafkaError.INVALID_REPLICATION_FACTOR
        cfg = _configs(a, "cfg")
        assert cfg["retention.ms"].value == "12345" and not cfg["retention.ms"].is_default
        assert cfg["segment.bytes"].value == "2000000"          # the broker's setting
        assert cfg["max.message.bytes"].value == "1048588" and cfg["max.message.bytes"].is_default

        res = ConfigResource(ConfigResource.Type.TOPIC, "cfg", incremental_configs=[
            ConfigEntry("retention.ms", "999", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.APPEND),
            ConfigEntry("segment.bytes", None, incremental_operation=AlterConfigOpType.DELETE)])
        a.incremental_alter_configs([res])[res].result(10)
        cfg = _configs(a, "cfg")
        assert cfg["retention.ms"].value == "999"
        assert cfg["cleanup.policy"].value == "compact,delete"
        bad = ConfigResource(ConfigResource.Type.TOPIC, "cfg", incremental_configs=[
            ConfigEntry("no.such.config", "1", incremental_operation=AlterConfigOpType.SET)])
        with pytest.raises(ck.KafkaException):
            a.incremental_alter_configs([bad])[bad].result(10)

        a.create_partitions([NewPartitions("cfg", 5)])["cfg"].result(10)
        md = a.list_topics(timeout=10)
        assert sorted(md.topics["cfg"].partitions) == [0, 1, 2, 3, 4]
        with pytest.raises(ck.KafkaException):
            a.create_partitions([NewPartitions("cfg", 3)])["cfg"].result(10)

        cluster = a.describe_cluster().result(10)
        assert cluster.cluster_id == b.cluster_id and cluster.controller.id == b.node_id
        assert [n.port for n in cluster.nodes] == [b.address[1]]
    with running_broker(d) as b:                   # configs and partitions persist
        a = _admin(b)
        cfg = _configs(a, "cfg")
        assert cfg["retention.ms"].value == "999" and cfg["cleanup.policy"].value == "compact,delete"
        assert len(b.partitions.topics["cfg"].partitions) == 5
        a.delete_topics(["cfg"])["cfg"].result(10)
        assert "cfg" not in a.list_topics(timeout=10).topics


def test_delete_records_and_list_offsets(kafka_broker):
    b = kafka_broker
    a = _admin(b)
    a.create_topics([NewTopic("dr", 1, 1)])["dr"].result(10)
    p = ck.Producer({"bootstrap.servers": b.bootstrap_servers, "linger.ms": 0})
    base = 1_700_000_000_000
    for i in range(50):
        p.produce("dr", value=b"%d" % i, partition=0, timestamp=base + i * 1000)
        p.poll(0)
    assert p.flush(10) == 0
    tp = ck.TopicPartition("dr", 0)
    got = a.list_offsets({tp: OffsetSpec.earliest()})[tp].result(10)
    assert got.offset == 0
    got = a.list_offsets({tp: OffsetSpec.latest()})[tp].result(10)
    assert got.offset == 50
    got = a.list_offsets({tp: OffsetSpec.for_timestamp(base + 20_500)})[tp].result(10)
    assert got.offset == 21
    got = a.list_offsets({tp: OffsetSpec.max_timestamp()})[tp].result(10)
    assert got.offset == 49
    done = a.delete_records([ck.TopicPartition("dr", 0, 30)])
    assert list(done.values())[0].result(10).low_watermark == 30
    got = a.list_offsets({tp: OffsetSpec.earliest()})[tp].result(10)
    assert got.offset == 30
    c = ck.Consumer({"bootstrap.servers": b.bootstrap_servers, "group.id": "x",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.assign([ck.TopicPartition("dr", 0, 5)])     # below the log start: reset to it
    seen = []
    deadline = time.time() + 15
    while len(seen) < 20 and time.time() < deadline:
        m = c.poll(0.2)
        if m is not None and not m.error():
            seen.append(m.offset())
    c.close()
    assert seen == list(range(30, 50))
