"""Kafka record batches: v2 ``RecordBatch``, v0/v1 ``LegacyBatch``, ``iter_batches``.

Reading lives here (``iterate``, ``batch``, ``legacy``); writing
(``BatchBuilder``, ``control_batch``, ``set_base_offset``) in ``builder`` and
is loaded on first use.  ``Record`` is the active kernel backend's record type.
"""
from __future__ import annotations

from kafkawire import _kernels
from kafkawire.records.batch import RecordBatch
from kafkawire.records.iterate import BatchIterator, iter_batches
from kafkawire.records.legacy import LegacyBatch

__all__ = ["iter_batches", "BatchIterator", "RecordBatch", "LegacyBatch", "Record",
           "BatchBuilder", "control_batch", "set_base_offset"]

_BUILDER = ("BatchBuilder", "control_batch", "set_base_offset")


def __getattr__(name: str):
    if name == "Record":
        return _kernels.Record
    if name in _BUILDER:
        from kafkawire.records import builder
        return getattr(builder, name)
    raise AttributeError(f"module 'kafkawire.records' has no attribute {name!r}")
