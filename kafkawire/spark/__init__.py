"""The ``kafkawire`` PySpark data source (batch and streaming) and the demo pipeline.

``kafkawire.spark.make_session()`` starts a SparkSession whose Python workers
can import kafkawire and registers the format; with a session of your own,
``kafkawire.spark.register(spark)``.  Then ``spark.read.format("kafkawire")
.load(path)`` reads Kafka log directories with the schema of Spark's Kafka
source.  Importing this package does not import pyspark.
"""
from __future__ import annotations

from kafkawire.spark.register import register
from kafkawire.spark.session import make_session

__all__ = ["make_session", "register"]
