"""Kafka's offset checkpoint files and meta.properties: round trips and refusals."""
from __future__ import annotations

import pytest

from kafkawire.errors import LogError
from kafkawire.log.checkpoints import (kafka_uuid_string, parse_kafka_uuid, random_kafka_uuid,
                                       read_offset_checkpoint, read_properties,
                                       write_offset_checkpoint, write_properties)

pytestmark = pytest.mark.one_backend


def test_offset_checkpoint_round_trip(tmp_path):
    path = str(tmp_path / "recovery-point-offset-checkpoint")
    entries = {("orders", 0): 17, ("orders", 1): 0, ("__consumer_offsets", 49): 5}
    write_offset_checkpoint(path, entries)
    text = open(path).read()
    assert text.splitlines()[:2] == ["0", "3"]
    assert "__consumer_offsets 49 5" in text.splitlines()
    assert read_offset_checkpoint(path) == entries
    assert read_offset_checkpoint(str(tmp_path / "missing")) == {}


@pytest.mark.parametrize("body", ["1\n0\n", "0\n2\nt 0 1\n", "0\nx\n", "0\n1\nt zero 1\n",
                                  "0\n1\nt 0\n", ""])
def test_malformed_checkpoint_is_a_log_error(tmp_path, body):
    path = tmp_path / "log-start-offset-checkpoint"
    path.write_text(body)
    with pytest.raises(LogError, match="log-start-offset-checkpoint"):
        read_offset_checkpoint(str(path))


def test_properties_and_uuids(tmp_path):
    u = random_kafka_uuid()
    s = kafka_uuid_string(u)
    assert len(s) == 22 and not s.startswith("-") and parse_kafka_uuid(s) == u
    path = str(tmp_path / "meta.properties")
    write_properties(path, [("cluster.id", s), ("node.id", "1"), ("version", "1")])
    assert open(path).read().startswith("#\n#")
    assert read_properties(path) == {"cluster.id": s, "node.id": "1", "version": "1"}
    with pytest.raises(ValueError):
        parse_kafka_uuid("short")
