"""kafkawire: Apache Kafka's binary formats — records, log segments and the wire protocol."""
from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

from kafkawire import errors
from kafkawire import _kernels

if TYPE_CHECKING:
    # What type checkers see; at run time these load on first use (``__getattr__``).
    from kafkawire.client import Client, Consumer, Producer
    from kafkawire.log import Log, LogDir, LogWriter, Segment
    from kafkawire.records import BatchBuilder, RecordBatch, iter_batches
    from kafkawire.records._types import Record
    from kafkawire.server import Broker

    backend: str

__version__ = "0.1.0"

__all__ = ["iter_batches", "Record", "RecordBatch", "BatchBuilder", "Log", "LogDir", "Segment",
           "LogWriter", "Client", "Producer", "Consumer", "Broker", "backend", "errors", "__version__"]

_LAZY = {
    "iter_batches": ("kafkawire.records", "iter_batches"),
    "RecordBatch": ("kafkawire.records", "RecordBatch"),
    "BatchBuilder": ("kafkawire.records", "BatchBuilder"),
    "Log": ("kafkawire.log", "Log"),
    "LogDir": ("kafkawire.log", "LogDir"),
    "Segment": ("kafkawire.log", "Segment"),
    "LogWriter": ("kafkawire.log", "LogWriter"),
    "Client": ("kafkawire.client", "Client"),
    "Producer": ("kafkawire.client.producer", "Producer"),
    "Consumer": ("kafkawire.client.consumer", "Consumer"),
    "Broker": ("kafkawire.server.broker", "Broker"),
}


def _install_note() -> str:
    """Why the install has no compiled kernels, as its build recorded it (or "")."""
    import os
    try:
        with open(os.path.join(os.path.dirname(__file__), "_fast", "BUILD-NOTE.txt"), encoding="utf-8") as f:
            return f.read().strip()
    except OSError:
        return ""


if _kernels.backend == "pure" and _kernels.fast_error is not None:
    _why = _install_note()
    warnings.warn(
        "kafkawire is running on its pure-Python kernels (same results, slower) because the "
        "compiled ones did not load: "
        + (f"when kafkawire was installed, {_why}. " if _why else f"{_kernels.fast_error}. ")
        + "To get them, install a wheel for this platform or reinstall with a C compiler "
        "available (pip install --force-reinstall --no-binary kafkawire kafkawire); to choose "
        "the pure kernels and silence this warning, set KAFKAWIRE_BACKEND=pure.",
        errors.PureBackendWarning, stacklevel=2)


def __getattr__(name: str) -> Any:
    # ``backend`` and ``Record`` follow the active kernel backend (the test
    # suite switches it); the rest load on first use to keep import cheap.
    if name == "backend":
        return _kernels.backend
    if name == "Record":
        return _kernels.Record
    if name in _LAZY:
        import importlib
        mod, attr = _LAZY[name]
        return getattr(importlib.import_module(mod), attr)
    raise AttributeError(f"module 'kafkawire' has no attribute {name!r}")
