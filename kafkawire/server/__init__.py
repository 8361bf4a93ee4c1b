"""A single-node Kafka-compatible broker over log directories (``kafkawire serve``).

:class:`Broker` runs the network loop (:mod:`~kafkawire.server.network`) in a
thread; requests go through :mod:`~kafkawire.server.dispatch` to thin
handlers (:mod:`kafkawire.server.handlers`), which call the partition
manager (:mod:`~kafkawire.server.partitions`, storage through
:mod:`kafkawire.log`) and the coordinators.

Coordinators plug in without changes here: a module ``kafkawire.server.groups``
or ``kafkawire.server.txn`` with a ``register(broker)`` function is called when
a broker is built; it registers its handlers on ``broker.dispatcher``, appends
load/unload coroutines to ``broker.on_start``/``broker.on_stop`` (run on the
broker's loop), and keeps its state on the broker (``broker.txn_coordinator``:
its ``check_produce(transactional_id, topic, partition, producer_id, epoch)``
returning 0 or a Kafka error code is asked about every transactional batch a
client produces).  They store through ``broker.partitions`` (see
:mod:`kafkawire.server.partitions`: ``ensure_topic``, ``append``,
``write_marker``, ``Partition.log_batches``).
"""
from __future__ import annotations

from kafkawire.server.broker import Broker, BrokerError

__all__ = ["Broker", "BrokerError"]
