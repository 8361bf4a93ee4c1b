"""A single-node Kafka-compatible broker over log directories (``kafkawire serve``).

:class:`Broker` runs the network loop (:mod:`~kafkawire.server.network`) in a
thread; requests go through :mod:`~kafkawire.server.dispatch` to thin
handlers (:mod:`kafkawire.server.handlers`), which call the partition
manager (:mod:`~kafkawire.server.partitions`, storage through
:mod:`kafkawire.log`) and the coordinators.
"""
from __future__ import annotations

from kafkawire.server.broker import Broker, BrokerError

__all__ = ["Broker", "BrokerError"]
