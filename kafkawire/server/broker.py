"""``Broker``: a single-node Kafka-compatible broker over log directories.

Start it embedded::

    with kafkawire.Broker("/tmp/kafka-data") as broker:
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers})

The broker runs its event loop in a thread of its own; :meth:`Broker.stop`
(or leaving the ``with`` block) answers requests in progress, flushes every
log, writes the checkpoints and the clean-shutdown marker, and releases the
log dirs' locks.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import threading
from typing import Any, Awaitable, Callable, Dict, Iterable, List, Mapping, Optional, Tuple, TypeVar, Union

from kafkawire.errors import LogError
from kafkawire.log.checkpoints import (META_PROPERTIES, kafka_uuid_string, random_kafka_uuid,
                                       read_properties, take_clean_shutdown, write_clean_shutdown,
                                       write_properties)
from kafkawire.log.lock import LogDirLock
from kafkawire.server.config import BrokerConfig
from kafkawire.server.lifecycle import LogLifecycle
from kafkawire.server.dispatch import Dispatcher
from kafkawire.server.handlers import register_all
from kafkawire.server.handlers.fetch import FetchSessionCache
from kafkawire.server.network import NetworkServer
from kafkawire.server.partitions import PartitionManager

__all__ = ["Broker", "BrokerError"]

log = logging.getLogger("kafkawire.server.broker")
_T = TypeVar("_T")
PathLike = Union[str, "os.PathLike[str]"]


class BrokerError(LogError):
    """The broker cannot start on these log dirs (mismatched identity, locked, ...)."""


def _split_host_port(text: str) -> Tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"expected HOST:PORT, got {text!r}")
    return host.strip("[]") or "0.0.0.0", int(port)


class Broker:
    """A broker serving ``log_dirs`` (one path or several) on ``listen`` (``HOST:PORT``,
    port 0 picks a free one).

    ``advertised`` is the ``HOST:PORT`` clients are told to connect to (default:
    the listening address); ``read_only`` serves the folders as they are and
    refuses writes; ``config`` holds Kafka broker settings by name
    (``num.partitions``, ``log.segment.bytes``, ``node.id``, ...).
    """

    def __init__(self, log_dirs: Union[PathLike, Iterable[PathLike]], *,
                 listen: str = "127.0.0.1:0", advertised: Optional[str] = None,
                 read_only: bool = False, config: Optional[Mapping[str, object]] = None) -> None:
        if isinstance(log_dirs, (str, os.PathLike)):
            dirs = [log_dirs]
        else:
            dirs = list(log_dirs)
        if not dirs:
            raise ValueError("give at least one log dir")
        self.log_dirs: List[str] = [os.path.abspath(os.fspath(d)) for d in dirs]
        self.listen = _split_host_port(listen)
        self._advertised = _split_host_port(advertised) if advertised else None
        self.read_only = read_only
        self.config = BrokerConfig(config)
        self.node_id = self.config.int("node.id")
        self.cluster_id = ""
        self.dispatcher = Dispatcher()
        self.partitions = PartitionManager(self.log_dirs, self.config, read_only=read_only)
        #: Retention, compaction, the flush.ms policy and checkpoints, off the event loop.
        self.lifecycle = LogLifecycle(self.partitions)
        self.loop: Optional[asyncio.AbstractEventLoop] = None
        self._thread: Optional[threading.Thread] = None
        self._network: Optional[NetworkServer] = None
        self._locks: List[LogDirLock] = []
        self._tasks: List["asyncio.Task[Any]"] = []
        self._stopped = threading.Event()
        #: Set when stopping: long polls answer at once.
        self.stopping = False
        self._address: Optional[Tuple[str, int]] = None
        #: Coroutines run on the loop at start (after the logs are loaded) and stop
        #: (before they are closed): coordinators register their load/unload here.
        self.on_start: List[Callable[["Broker"], Awaitable[None]]] = []
        self.on_stop: List[Callable[["Broker"], Awaitable[None]]] = []
        #: The coordinators, set by their modules' ``register(broker)`` (see kafkawire.server).
        self.group_coordinator: Any = None
        self.txn_coordinator: Any = None
        #: Listeners and SASL users (:class:`kafkawire.server.auth.Security`), set at register.
        self.security: Any = None
        self.fetch_sessions = FetchSessionCache(
            self.config.int("max.incremental.fetch.session.cache.slots"))
        register_all(self)

    # -- identity -------------------------------------------------------------
    @property
    def address(self) -> Tuple[str, int]:
        """``(host, port)`` clients are told to use (after :meth:`start`)."""
        if self._advertised is not None:
            return self._advertised
        if self._address is None:
            raise RuntimeError("the broker is not started")
        host, port = self._address
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        return host, port

    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` for a client's ``bootstrap.servers``."""
        host, port = self.address
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    @property
    def listeners(self) -> Dict[str, str]:
        """Each listener's name and ``host:port`` (after :meth:`start`), e.g.
        ``{"PLAINTEXT": "127.0.0.1:9092", "SASL_SSL": "127.0.0.1:9093"}``."""
        bound = self._network.bound if self._network is not None else {}
        return {name: (f"[{h}]:{p}" if ":" in h else f"{h}:{p}") for name, (h, p) in bound.items()}

    @property
    def running(self) -> bool:
        return self._thread is not None and not self._stopped.is_set()

    def _prepare_dirs(self) -> None:
        """Create or check ``meta.properties`` (KRaft style), take each dir's ``.lock``."""
        found = {}
        for d in self.log_dirs:
            if not os.path.isdir(d):
                if self.read_only:
                    raise BrokerError(f"{d} does not exist (a read-only broker serves existing "
                                      "log dirs)")
                os.makedirs(d, exist_ok=True)
            meta = os.path.join(d, META_PROPERTIES)
            if os.path.exists(meta):
                found[d] = read_properties(meta)
        cluster_ids = {p["cluster.id"] for p in found.values() if p.get("cluster.id")}
        if len(cluster_ids) > 1:
            raise BrokerError(f"log dirs belong to different clusters: {sorted(cluster_ids)}")
        node_ids = {p.get("node.id") or p.get("broker.id") or "" for p in found.values()}
        node_ids.discard("")
        if "node.id" not in self.config.values or self.config.values["node.id"] == "1":
            if len(node_ids) == 1:
                self.node_id = int(node_ids.pop())
                node_ids = set()
        if node_ids - {str(self.node_id)}:
            raise BrokerError(f"log dirs were written by node {sorted(node_ids)}, this broker is "
                              f"node.id={self.node_id}")
        self.cluster_id = cluster_ids.pop() if cluster_ids else kafka_uuid_string(random_kafka_uuid())
        if self.read_only:
            return
        for d in self.log_dirs:
            self._locks.append(LogDirLock(d))
            if d not in found:
                write_properties(os.path.join(d, META_PROPERTIES), [
                    ("cluster.id", self.cluster_id),
                    ("directory.id", kafka_uuid_string(random_kafka_uuid())),
                    ("node.id", str(self.node_id)),
                    ("version", "1")])
        # A fresh log dir (no meta.properties before) has nothing to recover.
        clean = [take_clean_shutdown(d) or d not in found for d in self.log_dirs]
        self.partitions.clean_start = all(clean)
        if not all(clean):
            log.info("log dirs were not shut down cleanly: partitions are recovered as they open")

    # -- lifecycle ------------------------------------------------------------
    def start(self) -> "Broker":
        """Open the logs, start the network loop thread; returns once clients can connect."""
        if self._thread is not None:
            raise RuntimeError("the broker is already started")
        try:
            self._prepare_dirs()
            self.partitions.load()
        except BaseException:
            self._release()
            raise
        ready: concurrent.futures.Future[Tuple[str, int]] = concurrent.futures.Future()
        self._stopped.clear()
        self.stopping = False
        self._thread = threading.Thread(target=self._run, args=(ready,), daemon=True,
                                        name=f"kafkawire-broker-{self.node_id}")
        self._thread.start()
        try:
            self._address = ready.result()
        except BaseException:
            self._thread.join()
            self._thread = None
            self._release()
            raise
        log.info("broker %d of cluster %s serving %s on %s", self.node_id, self.cluster_id,
                 ", ".join(self.log_dirs), self.bootstrap_servers)
        return self

    def _run(self, ready: "concurrent.futures.Future[Tuple[str, int]]") -> None:
        loop = asyncio.new_event_loop()
        self.loop = loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._main(ready))
        finally:
            try:
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()
                self._stopped.set()

    async def _main(self, ready: "concurrent.futures.Future[Tuple[str, int]]") -> None:
        self._stop_event = asyncio.Event()
        host, port = self.listen
        net = NetworkServer(self, host, port,
                            max_request_bytes=self.config.int("socket.request.max.bytes"),
                            idle_ms=self.config.int("connections.max.idle.ms"))
        try:
            for hook in self.on_start:
                await hook(self)
            self._address = await net.start()
        except BaseException as exc:
            ready.set_exception(exc)
            return
        self._network = net
        self._tasks.append(asyncio.ensure_future(self.lifecycle.run()))
        ready.set_result(self._address)
        await self._stop_event.wait()
        self.stopping = True
        self.partitions.wake_all()
        await net.stop()
        await self.lifecycle.stop()
        for t in self._tasks:
            t.cancel()
        for hook in self.on_stop:
            try:
                await hook(self)
            except Exception:
                log.exception("a stop hook failed")

    def stop(self) -> None:
        """Answer requests in progress, close connections, flush and close every log, write
        checkpoints and the clean-shutdown marker, release the locks (idempotent)."""
        thread = self._thread
        if thread is None:
            return
        loop = self.loop
        if loop is not None and not self._stopped.is_set():
            try:
                loop.call_soon_threadsafe(self._stop_event.set)
            except RuntimeError:
                pass
        thread.join()
        self._thread = None
        self.lifecycle.close()   # a pass in progress finishes its step first
        clean = True
        try:
            self.partitions.close()
        except Exception:
            clean = False
            log.exception("closing the logs failed; the next start recovers them")
        if clean and not self.read_only:
            for d in self.log_dirs:
                write_clean_shutdown(d)
        self._release()
        log.info("broker %d stopped", self.node_id)

    def _release(self) -> None:
        for lk in self._locks:
            lk.release()
        self._locks = []

    def __enter__(self) -> "Broker":
        if self._thread is None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def call(self, fn: Callable[[], _T], timeout: Optional[float] = 60.0) -> _T:
        """Run ``fn()`` on the broker's loop thread and return its result (for code in other
        threads that must touch broker state, e.g. tests creating topics)."""
        if self.loop is None or not self.running:
            return fn()

        async def run() -> _T:
            return fn()
        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout)

    def create_topic(self, name: str, partitions: int = 1,
                     configs: Optional[Mapping[str, str]] = None) -> None:
        """Create a topic (a convenience for tests and embedding; clients use CreateTopics)."""
        self.call(lambda: self.partitions.create_topic(name, partitions, configs))

    def __repr__(self) -> str:
        state = f"on {self.bootstrap_servers}" if self.running else "stopped"
        return f"Broker({self.log_dirs!r}, node_id={self.node_id}, {state})"
