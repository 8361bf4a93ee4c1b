"""Helpers for the broker's operational tests (lifecycle, crash, connections)."""
from __future__ import annotations

import subprocess
import sys
import time
from typing import Callable

#: Generous waits: the tests must pass on a loaded machine.
WAIT = 120.0


def wait_until(pred: Callable[[], object], timeout: float = WAIT) -> bool:
    """Poll ``pred`` until it is true (True) or ``timeout`` seconds pass (False)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)
    return False


def verify_clean(log_dir: str) -> None:
    """``kafkawire verify`` reports no problem in ``log_dir``."""
    p = subprocess.run([sys.executable, "-m", "kafkawire.cli", "verify", "--no-progress", log_dir],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr


def consume_all(bootstrap: str, topic: str, partitions: int) -> dict:
    """Every record of ``topic`` as a confluent-kafka consumer reads it from offset 0 to each
    partition's end: ``{(partition, offset): (key, value)}``."""
    import confluent_kafka as ck
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "check-" + topic,
                     "enable.auto.commit": False, "enable.partition.eof": True})
    c.assign([ck.TopicPartition(topic, i, 0) for i in range(partitions)])
    out, eof, empty = {}, set(), 0
    try:
        while len(eof) < partitions and empty < WAIT / 0.2:
            m = c.poll(0.2)
            if m is None:
                empty += 1
            elif m.error():
                if m.error().code() == ck.KafkaError._PARTITION_EOF:
                    eof.add(m.partition())
            else:
                out[(m.partition(), m.offset())] = (m.key(), m.value())
    finally:
        c.close()
    return out


def fill_keyed(broker, topic: str, rounds: int, keys: int, value: Callable[[int], bytes],
               key: Callable[[int], bytes]) -> None:
    """Append ``rounds`` batches to partition 0 of ``topic``, each with one record per key
    (``key(k)`` → ``value(round)``), on the broker's own thread."""
    from kafkawire.records import BatchBuilder

    def run():
        for rnd in range(rounds):
            b = BatchBuilder(2, "none")
            for k in range(keys):
                b.append(value(rnd), key=key(k))
            broker.partitions.append(topic, 0, b.build())
    broker.call(run)
