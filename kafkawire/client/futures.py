"""The futures ``Producer.send`` returns: ``concurrent.futures.Future`` at a batch's cost.

A plain ``Future`` builds a ``threading.Condition`` when it is created (about
a microsecond, as much as the rest of ``send``), and resolving one takes a
lock and a notify.  A :class:`DeliveryFuture` instead points at its batch and
its index in it: its state, exception and :class:`RecordMetadata` are read
from the batch, so the I/O thread resolves a whole batch by setting the
batch's outcome once.  The condition (and the waiter and callback lists) are
made only when something waits on the future or adds a callback; such a
future registers with its batch and is notified when the batch completes.
One module lock orders registration and completion, so a waiter either sees
the result or is notified.
"""
from __future__ import annotations

import threading
from concurrent.futures import Future
from concurrent.futures._base import FINISHED, PENDING
from typing import Any, List, Optional, Protocol

from kafkawire.client.results import RecordMetadata

__all__ = ["DeliveryFuture", "Outcome", "complete"]

_LAZY = threading.Lock()
_LAZY_FIELDS = ("_condition", "_waiters", "_done_callbacks")


class Timestamps(Protocol):
    """The records' timestamps by index (a batch's ``RecordBuffer``)."""

    def __getitem__(self, index: int) -> int: ...


class Outcome:
    """What a batch's futures read: pending, or its base offset / error, once complete."""

    __slots__ = ("state", "error", "base_offset", "log_append_time", "touched", "topic",
                 "partition", "timestamps")

    def __init__(self, topic: str, partition: int, timestamps: Timestamps) -> None:
        self.state = PENDING
        self.error: Optional[BaseException] = None
        self.base_offset = -1
        self.log_append_time = -1
        self.touched: Optional[List["DeliveryFuture"]] = None
        self.topic = topic
        self.partition = partition
        self.timestamps = timestamps

    def metadata(self, index: int):
        base = self.base_offset
        ts = self.log_append_time if self.log_append_time >= 0 else self.timestamps[index]
        return RecordMetadata(self.topic, self.partition, base + index if base >= 0 else -1, ts)


class DeliveryFuture(Future):
    """A ``concurrent.futures.Future`` of one produced record.  It cannot be cancelled."""

    __init__ = object.__init__  # type: ignore[assignment]  # fields come from the batch

    _outcome: Outcome
    _index: int

    # ``Future``'s methods read and write these three; ours come from the batch until a
    # method sets its own (only ``set_result``/``set_exception``, which the producer never calls).
    @property  # type: ignore[override]
    def _state(self) -> str:
        own = self.__dict__.get("_own_state")
        return own if own is not None else self._outcome.state

    @_state.setter
    def _state(self, value: str) -> None:
        self.__dict__["_own_state"] = value

    @property
    def _result(self) -> Any:
        if "_own_result" in self.__dict__:
            return self.__dict__["_own_result"]
        o = self._outcome
        return None if o.state != FINISHED or o.error is not None else o.metadata(self._index)

    @_result.setter
    def _result(self, value: Any) -> None:
        self.__dict__["_own_result"] = value

    @property
    def _exception(self) -> Optional[BaseException]:
        if "_own_exception" in self.__dict__:
            return self.__dict__["_own_exception"]
        return self._outcome.error if self._outcome.state == FINISHED else None

    @_exception.setter
    def _exception(self, value: Optional[BaseException]) -> None:
        self.__dict__["_own_exception"] = value

    def __getattr__(self, name: str) -> Any:
        if name in _LAZY_FIELDS:
            with _LAZY:
                d = self.__dict__
                if "_condition" not in d:
                    d["_waiters"] = []
                    d["_done_callbacks"] = []
                    d["_condition"] = threading.Condition()
                    o = self._outcome
                    if o.state != FINISHED:
                        if o.touched is None:
                            o.touched = []
                        o.touched.append(self)
            return d[name]
        raise AttributeError(name)

    def done(self) -> bool:
        return self._state == FINISHED

    def running(self) -> bool:
        return self._state != FINISHED

    def cancel(self) -> bool:
        """Records handed to the producer cannot be called back: always False."""
        return False

    def cancelled(self) -> bool:
        return False


def complete(outcome: Outcome, base_offset: int = -1, log_append_time: int = -1,
             error: Optional[BaseException] = None) -> None:
    """Resolve every future of a batch; notify the ones something waits on."""
    with _LAZY:
        outcome.base_offset = base_offset
        outcome.log_append_time = log_append_time if log_append_time is not None else -1
        outcome.error = error
        outcome.state = FINISHED
        touched, outcome.touched = outcome.touched, None
    for f in touched or ():
        with f._condition:
            for waiter in f._waiters:
                if error is None:
                    waiter.add_result(f)
                else:
                    waiter.add_exception(f)
            f._condition.notify_all()
        f._invoke_callbacks()


def new_future(outcome: Outcome, index: int) -> DeliveryFuture:
    f = DeliveryFuture()
    f._outcome = outcome
    f._index = index
    return f


def finished(result: Any = None, error: Optional[BaseException] = None) -> Future:
    """A plain future that is already done."""
    f: Future = Future()
    if error is not None:
        f.set_exception(error)
    else:
        f.set_result(result)
    return f


class BatchFuture(Future):
    """The future of one ``send_batch`` call: the ``ProduceResult`` of each batch it became."""

    def __init__(self, n_batches: int) -> None:
        super().__init__()
        self._parts: List[Any] = [None] * n_batches
        self._left = n_batches
        self._lock = threading.Lock()
        self._failed = False
        if n_batches == 0:
            self.set_result([])

    def _add(self, index: int, result: Any) -> None:
        with self._lock:
            self._parts[index] = result
            self._left -= 1
            last = self._left == 0 and not self._failed
        if last:
            self.set_result(list(self._parts))

    def _fail(self, index: int, error: BaseException) -> None:
        with self._lock:
            self._left -= 1
            first = not self._failed
            self._failed = True
        if first:
            self.set_exception(error)
