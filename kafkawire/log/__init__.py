"""Kafka's on-disk logs: partition folders, segments, indexes; reading, checking, recovering, writing.

``Log.open(partition_dir)`` reads one ``<topic>-<partition>`` folder,
``LogDir.open(log_dirs)`` many, ``Segment.open(path)`` one segment,
``LogWriter`` appends to a partition folder the way a broker does.

This package is the one model of a partition on disk: file names and
discovery (:mod:`~kafkawire.log.files`), file access
(:mod:`~kafkawire.log.storage`), index trust and lookups
(:mod:`~kafkawire.log.index`, :mod:`~kafkawire.log.segment`), transactions
and ``read_committed`` (:mod:`~kafkawire.log.txnindex`,
:mod:`~kafkawire.log.isolation`).  The Spark data source and the CLI read
logs through it.
"""
from __future__ import annotations

from kafkawire.log.index import IndexBuilder, OffsetIndex, TimeIndex
from kafkawire.log.log import Log
from kafkawire.log.logdir import LogDir
from kafkawire.log.recover import RecoverReport
from kafkawire.log.retention import RetentionPlan, plan_retention, purge_deleted
from kafkawire.log.compact import Cleaner, CompactionPlan, compact
from kafkawire.log.segment import Segment
from kafkawire.log.txnindex import AbortedTxn
from kafkawire.log.verify import VerifyReport
from kafkawire.log.writer import LogWriter

__all__ = ["Log", "LogDir", "Segment", "LogWriter", "OffsetIndex", "TimeIndex", "IndexBuilder",
           "AbortedTxn", "VerifyReport", "RecoverReport", "RetentionPlan", "plan_retention",
           "purge_deleted", "Cleaner", "CompactionPlan", "compact"]
