"""Kafka's on-disk logs: partition folders, segments, indexes; reading, checking, recovering, writing.

``Log.open(partition_dir)`` reads one ``<topic>-<partition>`` folder,
``LogDir.open(log_dirs)`` many, ``Segment.open(path)`` one segment,
``LogWriter`` appends to a partition folder the way a broker does.
"""
from __future__ import annotations

from kafkawire.log.index import IndexBuilder, OffsetIndex, TimeIndex
from kafkawire.log.log import Log
from kafkawire.log.logdir import LogDir
from kafkawire.log.segment import Segment
from kafkawire.log.txnindex import AbortedTxn

__all__ = ["Log", "LogDir", "Segment", "LogWriter", "OffsetIndex", "TimeIndex", "IndexBuilder",
           "AbortedTxn", "VerifyReport", "RecoverReport"]


def __getattr__(name: str):
    if name == "LogWriter":
        from kafkawire.log.writer import LogWriter
        return LogWriter
    if name == "VerifyReport":
        from kafkawire.log.verify import VerifyReport
        return VerifyReport
    if name == "RecoverReport":
        from kafkawire.log.recover import RecoverReport
        return RecoverReport
    raise AttributeError(f"module 'kafkawire.log' has no attribute {name!r}")
