"""Kafka record batches: v2 ``RecordBatch``, v0/v1 ``LegacyBatch``, ``iter_batches``.

Reading lives here (``iterate``, ``batch``, ``legacy``); writing
(``BatchBuilder``, ``control_batch``, ``set_base_offset``) in ``builder`` and
is loaded on first use.  ``Record`` is the active kernel backend's record type.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafkawire import _kernels
from kafkawire.records.batch import RecordBatch
from kafkawire.records.iterate import Batch, BatchIterator, iter_batches
from kafkawire.records.legacy import LegacyBatch

__all__ = ["iter_batches", "BatchIterator", "Batch", "RecordBatch", "LegacyBatch", "Record",
           "BatchBuilder", "control_batch", "set_base_offset"]

if TYPE_CHECKING:
    # Loaded on first use at run time (``__getattr__``); visible to type checkers here.
    from kafkawire.records._types import Record
    from kafkawire.records.builder import BatchBuilder, control_batch, set_base_offset

_BUILDER = ("BatchBuilder", "control_batch", "set_base_offset")


def __getattr__(name: str) -> Any:
    if name == "Record":
        return _kernels.Record
    if name in _BUILDER:
        from kafkawire.records import builder  # cheap: readers never load the writer
        return getattr(builder, name)
    raise AttributeError(f"module 'kafkawire.records' has no attribute {name!r}")
