"""Request handlers: thin translations between protocol messages and the broker's state.

:func:`register_all` registers every handler of this package, then lets the
coordinator modules (``kafkawire.server.groups``, ``kafkawire.server.txn``)
register theirs through their own ``register(broker)`` when they exist.
"""
from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING

from kafkawire.server.handlers import admin, fetch, offsets, produce, topics

if TYPE_CHECKING:
    from kafkawire.server.broker import Broker

__all__ = ["register_all"]

log = logging.getLogger("kafkawire.server.handlers")

#: Modules outside this package that register handlers and hooks of their own.
PLUGGED_MODULES = ("kafkawire.server.auth", "kafkawire.server.groups", "kafkawire.server.txn")


def register_all(broker: "Broker") -> None:
    """Register the broker's handlers on ``broker.dispatcher``."""
    for mod in (topics, produce, fetch, offsets, admin):
        mod.register(broker)
    for name in PLUGGED_MODULES:
        try:
            plugged = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        register = getattr(plugged, "register", None)
        if register is not None:
            register(broker)
