"""``spark.read.format("kafkawire")``: the data source Spark talks to.

Register it with :func:`kafkawire.spark.register` (or let PySpark find the
top-level ``pyspark_kafkawire`` module, which exports this class as
``DefaultSource``).  Options are validated when the DataFrame is defined, so a
bad option fails ``load()``, not a task.
"""
from __future__ import annotations

from pyspark.sql.datasource import DataSource

from kafkawire.spark.options import parse_options
from kafkawire.spark.schema import spark_ddl


class KafkaWireDataSource(DataSource):
    """Kafka log directories as a DataFrame with the schema of Spark's Kafka source."""

    @classmethod
    def name(cls) -> str:
        return "kafkawire"

    def schema(self) -> str:
        ro = parse_options(self.options, streaming=None)
        return spark_ddl(ro.include_headers)

    def reader(self, schema):
        from kafkawire.spark.reader import make_reader
        return make_reader(parse_options(self.options))

    def streamReader(self, schema):  # noqa: N802 (Spark's name)
        from kafkawire.spark.stream import KafkaWireStreamReader
        return KafkaWireStreamReader(parse_options(self.options, streaming=True))
