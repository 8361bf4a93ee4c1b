"""Register the ``kafkawire`` format with a SparkSession."""
from __future__ import annotations

from typing import TYPE_CHECKING

from kafkawire._deps import require

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def register(spark: SparkSession) -> None:
    """Make ``spark.read.format("kafkawire")`` and ``spark.readStream.format("kafkawire")`` work.

    Needed only where PySpark's automatic lookup of the top-level
    ``pyspark_kafkawire`` module does not see this package (e.g. a source
    checkout that is not installed).
    """
    require("pyspark", "spark", "The Spark data source")
    # cheap: `import kafkawire.spark` must not import pyspark (the source module does)
    from kafkawire.spark.source import KafkaWireDataSource
    spark.dataSource.register(KafkaWireDataSource)
