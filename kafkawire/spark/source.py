"""``spark.read.format("kafkawire")``: the data source Spark talks to.

Register it with :func:`kafkawire.spark.register` (or let PySpark find the
top-level ``pyspark_kafkawire`` module, which exports this class as
``DefaultSource``).  Options are validated when the DataFrame is defined, so a
bad option fails ``load()``, not a task.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from kafkawire._deps import require

if TYPE_CHECKING:
    from pyspark.sql.datasource import DataSource
    from pyspark.sql.types import StructType

    from kafkawire.spark.reader import KafkaWireReader
    from kafkawire.spark.sink import KafkaWireStreamWriter, KafkaWireWriter
    from kafkawire.spark.stream import KafkaWireStreamReader
else:   # a missing pyspark is reported as the extra to install
    DataSource = require("pyspark.sql.datasource", "spark", "The Spark data source").DataSource

from kafkawire.errors import KafkaWireError
from kafkawire.spark.options import OptionError, ReadOptions, parse_options
from kafkawire.spark.schema import spark_ddl


def check_files(ro: ReadOptions) -> None:
    """Paths, topic selection and offset ranges must fit the files: checked when the DataFrame is
    defined (Spark asks for the schema then), so ``load()`` fails, not the first query."""
    # cheap: PySpark imports this module (pyspark_kafkawire) for every session, and each
    # method loads only what it uses
    from kafkawire.spark import layout
    from kafkawire.spark.planning import resolve_ranges, select_partitions
    parts = layout.discover(ro.paths, ro.storage_options)
    try:
        resolve_ranges(select_partitions(parts, ro), ro)
    finally:
        for part in parts:
            part.close()


class KafkaWireDataSource(DataSource):
    """Kafka log directories as a DataFrame with the schema of Spark's Kafka source."""

    @classmethod
    def name(cls) -> str:
        return "kafkawire"

    def schema(self) -> str:
        # Spark asks for the schema when the DataFrame is defined: every option, path and
        # range problem surfaces here, raised afresh so Spark's report of it stays short
        try:
            ro = parse_options(self.options, streaming=None)
            check_files(ro)
        except KafkaWireError as exc:
            raise exc.with_traceback(None) from None
        return spark_ddl(ro.include_headers)

    def reader(self, schema: StructType) -> KafkaWireReader:
        from kafkawire.spark.reader import make_reader  # cheap: see check_files
        return make_reader(parse_options(self.options))

    def writer(self, schema: StructType, overwrite: bool) -> KafkaWireWriter:
        # cheap: see check_files
        from kafkawire.spark.sink import KafkaWireWriter, check_schema, parse_write_options
        try:
            wo = parse_write_options(self.options)
            check_schema(schema, wo)
        except KafkaWireError as exc:
            raise exc.with_traceback(None) from None
        return KafkaWireWriter(wo, overwrite)

    def streamWriter(self, schema: StructType,  # noqa: N802 (Spark's name)
                     overwrite: bool) -> KafkaWireStreamWriter:
        # cheap: see check_files
        from kafkawire.spark.sink import KafkaWireStreamWriter, check_schema, parse_write_options
        try:
            wo = parse_write_options(self.options)
            check_schema(schema, wo)
            if overwrite:
                raise OptionError("writeStream to format 'kafkawire' appends: use outputMode('append') "
                                  "(a log is never rewritten by a streaming query)")
        except KafkaWireError as exc:
            raise exc.with_traceback(None) from None
        return KafkaWireStreamWriter(wo)

    def streamReader(self, schema: StructType) -> KafkaWireStreamReader:  # noqa: N802 (Spark's name)
        from kafkawire.spark.stream import KafkaWireStreamReader  # cheap: see check_files
        return KafkaWireStreamReader(parse_options(self.options, streaming=True))
