"""librdkafka's in-memory mock cluster (confluent-kafka's ``test.mock.num.brokers``) for tests.

The mock is a real protocol peer on loopback with groups, idempotence and
transactions.  It runs in a child process of its own: librdkafka's mock has been
seen to crash (SIGSEGV) on some group sequences, and a crash there must end one
peer, not the test run.  ``MockCluster.crashed`` tells the tests' report hook
that a failure was the peer dying.
"""
from __future__ import annotations

import itertools
import subprocess
import sys
import time

_names = itertools.count()

_CHILD = """
import sys
import confluent_kafka as ck
owner = ck.Producer({"test.mock.num.brokers": int(sys.argv[1]), "log_level": 0})
md = owner.list_topics(timeout=10)
print(",".join(f"{b.host}:{b.port}" for b in md.brokers.values()), flush=True)
sys.stdin.read()
"""


def unique_name(prefix: str) -> str:
    """A topic or group name no other test in this run uses (the mock lives per module)."""
    return f"{prefix}-{next(_names)}-{int(time.time() * 1000) % 100000}"


class MockCluster:
    """A mock cluster of ``brokers`` brokers in a child process; ``bootstrap`` says where."""

    def __init__(self, brokers: int = 3) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(brokers)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.bootstrap = self.proc.stdout.readline().strip()
        if not self.bootstrap:
            self.close()
            raise RuntimeError("librdkafka's mock cluster did not start")

    def crashed(self) -> bool:
        """True when the child died of a signal (the mock crashed)."""
        rc = self.proc.poll()
        return rc is not None and rc < 0

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
