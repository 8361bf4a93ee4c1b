"""The error-code table against Kafka 3.9.1's own ``Errors`` enum, and its exceptions."""
from __future__ import annotations

import pickle

import pytest

from kafkawire.errors import KafkaWireError
from kafkawire.protocol import error_codes as E

pytestmark = pytest.mark.one_backend


def test_table_matches_kafka_errors_enum(java_runner):
    out = java_runner.run("ErrorsTable").stdout.decode("utf-8")
    expected = {}
    for line in out.splitlines():
        code, name, retriable, message = line.split("\t")
        expected[int(code)] = (name, retriable == "1", message)
    ours = {c: (e.name, e.retriable, e.message) for c, e in E.ERRORS.items()}
    assert ours == expected


def test_well_known_rows():
    assert E.error_code(-1).name == "UNKNOWN_SERVER_ERROR"
    assert E.error_code(0) == E.ErrorCode(0, "NONE", False, "")
    assert E.error_code(3) == E.error_code("unknown_topic_or_partition")
    assert E.error_code(6).name == "NOT_LEADER_OR_FOLLOWER" and E.error_code(6).retriable
    assert E.error_code(36).name == "TOPIC_ALREADY_EXISTS" and not E.error_code(36).retriable
    assert max(E.ERRORS) >= 127 and len(E.ERRORS) >= 120


def test_codes_and_names_unique():
    assert len({e.name for e in E.ERRORS.values()}) == len(E.ERRORS)


def test_exception_classes():
    cls = E.error_for_code(6)
    assert cls is E.NotLeaderOrFollowerError
    assert issubclass(cls, E.RetriableBrokerError)
    assert issubclass(cls, E.BrokerResponseError) and issubclass(cls, KafkaWireError)
    assert not issubclass(E.error_for_code(36), E.RetriableBrokerError)
    assert E.error_for_code(17) is E.InvalidTopicError
    for code, row in E.ERRORS.items():
        if code == 0:
            continue
        c = E.error_for_code(code)
        assert (c.code, c.name, c.retriable, c.description) == tuple(row)
    with pytest.raises(ValueError):
        E.error_for_code(0)


def test_error_message_names_context():
    err = E.make_error(3, api="Produce", topic="orders", partition=4)
    assert isinstance(err, E.UnknownTopicOrPartitionError)
    text = str(err)
    assert "orders-4" in text and "UNKNOWN_TOPIC_OR_PARTITION" in text and "(3)" in text
    assert err.topic == "orders" and err.partition == 4 and err.code == 3
    err = E.make_error(36, "Topic 'x' already exists.", api="CreateTopics", topic="x")
    assert "already exists" in str(err) and err.detail == "Topic 'x' already exists."


def test_unknown_code():
    err = E.make_error(4242)
    assert isinstance(err, E.BrokerResponseError) and err.code == 4242
    assert not err.retriable and "4242" in str(err)
    assert E.error_for_code(4242) is E.error_for_code(4242)


def test_raise_for_code():
    E.raise_for_code(0)
    with pytest.raises(E.RetriableBrokerError) as info:
        E.raise_for_code(15, group="g1")
    assert info.value.group == "g1"


def test_exceptions_pickle():
    err = E.make_error(6, topic="t", partition=0)
    assert str(pickle.loads(pickle.dumps(err))) == str(err)


def test_named_codes_match_the_table():
    named = [n for n in E.__all__ if n.isupper() and isinstance(getattr(E, n), int)]
    for name in named:
        assert E.error_code(getattr(E, name)).name == name
    assert sorted(named) == sorted(E.ERRORS_BY_NAME)    # every code has its name, once
    assert {E.error_code(c).name for c in E.COORDINATOR_ERRORS} == {
        "COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR"}
