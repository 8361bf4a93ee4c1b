"""The futures ``Producer.send`` returns: ``concurrent.futures.Future`` without the per-record lock.

A plain ``Future`` builds a ``threading.Condition`` when it is created, about
a microsecond — as much as the rest of ``send`` — and most record futures are
never waited on.  :class:`DeliveryFuture` creates its condition (and waiter
and callback lists) only when something waits on it or adds a callback;
:func:`resolve_all` finishes futures nobody touched without one.  One module
lock orders the two, so a waiter either sees the result or is notified.
"""
from __future__ import annotations

import threading
from concurrent.futures import Future
from concurrent.futures._base import FINISHED, PENDING
from typing import Any, Iterable, List, Optional, Sequence, Tuple

__all__ = ["DeliveryFuture", "resolve_all", "fail_all"]

_LAZY = threading.Lock()
_LAZY_FIELDS = ("_condition", "_waiters", "_done_callbacks")


class DeliveryFuture(Future):
    """A ``concurrent.futures.Future`` whose lock is made on first use.  It cannot be cancelled."""

    def __init__(self) -> None:  # noqa: super().__init__ deliberately not called
        self._state = PENDING
        self._result = None
        self._exception = None

    def __getattr__(self, name: str) -> Any:
        if name in _LAZY_FIELDS:
            with _LAZY:
                d = self.__dict__
                if "_condition" not in d:
                    d["_waiters"] = []
                    d["_done_callbacks"] = []
                    d["_condition"] = threading.Condition()
            return self.__dict__[name]
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


def resolve_all(futures: Sequence[DeliveryFuture], results: Iterable[Any]) -> None:
    """``set_result`` on each future with its result, cheaply for the untouched ones."""
    slow: List[Tuple[DeliveryFuture, Any]] = []
    with _LAZY:
        for f, r in zip(futures, results):
            d = f.__dict__
            if "_condition" in d:
                slow.append((f, r))
            else:
                d["_result"] = r
                d["_state"] = FINISHED
    for f, r in slow:
        f.set_result(r)


def fail_all(futures: Sequence[DeliveryFuture], error: BaseException) -> None:
    """``set_exception(error)`` on each future."""
    slow: List[DeliveryFuture] = []
    with _LAZY:
        for f in futures:
            d = f.__dict__
            if "_condition" in d:
                slow.append(f)
            else:
                d["_exception"] = error
                d["_state"] = FINISHED
    for f in slow:
        f.set_exception(error)


def finished(result: Any = None, error: Optional[BaseException] = None) -> DeliveryFuture:
    """A future that is already done."""
    f = DeliveryFuture()
    if error is not None:
        f._exception = error
    else:
        f._result = result
    f._state = FINISHED
    return f
