"""Test helpers: a real broker for a test, on a free loopback port in a temporary folder.

With kafkawire installed, pytest loads this module as a plugin, so any test
can ask for the ``kafka_broker`` fixture::

    def test_roundtrip(kafka_broker):
        producer = confluent_kafka.Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})

The broker is a :class:`kafkawire.Broker` (create topics with
``kafka_broker.create_topic(name, partitions)`` or any client's admin API);
it is stopped, and its folder removed, when the test ends.  Broker settings,
e.g. listeners with TLS or SASL, are given through indirect parametrisation::

    @pytest.mark.parametrize("kafka_broker", [{
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.user.alice": "alice-secret"}],
        indirect=True)
    def test_sasl(kafka_broker):
        bootstrap = kafka_broker.listeners["SASL_PLAINTEXT"]
"""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Optional

import pytest

if TYPE_CHECKING:
    from kafkawire.server.broker import Broker

__all__ = ["kafka_broker", "running_broker"]


@contextlib.contextmanager
def running_broker(log_dir: Optional[str] = None, *,
                   config: Optional[Mapping[str, object]] = None, **kwargs: Any) -> Iterator["Broker"]:
    """A started broker on ``127.0.0.1`` and a free port, in ``log_dir`` (default: a new
    temporary folder, removed afterwards); stopped on exit."""
    # cheap: pytest loads this plugin in every run; the broker loads when a test starts one
    from kafkawire.server.broker import Broker
    made = log_dir is None
    folder = tempfile.mkdtemp(prefix="kafkawire-broker-") if log_dir is None else log_dir
    broker = Broker(folder, listen="127.0.0.1:0", config=config, **kwargs)
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()
        if made:
            shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def kafka_broker(request: Any, tmp_path: Any) -> Iterator["Broker"]:
    """A started :class:`kafkawire.Broker` in ``tmp_path`` on a free loopback port (broker
    settings from the fixture's indirect parameter, a mapping, when given)."""
    config = getattr(request, "param", None)
    with running_broker(os.fspath(tmp_path / "kafka-logs"), config=config) as broker:
        yield broker
