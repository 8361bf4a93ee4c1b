"""The ``kafkawire`` PySpark data source (batch and streaming) and the demo pipeline.

``kafkawire.spark.register(spark)`` registers the format; then
``spark.read.format("kafkawire").load(path)`` reads Kafka log directories with
the schema of Spark's Kafka source.  See the README's Spark section.
"""
from __future__ import annotations

from kafkawire.spark.register import register

__all__ = ["register"]
