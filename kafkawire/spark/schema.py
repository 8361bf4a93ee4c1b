"""The DataFrame schema: exactly Spark's Kafka source, in Spark and Arrow terms.

Spark's Python data source path checks every Arrow batch a task yields against
the declared schema, so the Arrow schema here must match it field for field:
``binary`` (not ``large_binary``), ``timestamp[us, tz=UTC]``, ``int32``
partitions and timestamp types, the declared column order, every field nullable.
"""
from __future__ import annotations

from typing import Any

from kafkawire._deps import require

KAFKA_COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType")

_BASE_DDL = ("key binary, value binary, topic string, partition int, offset long, "
             "timestamp timestamp, timestampType int")
_HEADERS_DDL = "headers array<struct<key:string,value:binary>>"


def spark_ddl(include_headers: bool) -> str:
    """The schema as a Spark DDL string (what ``DataSource.schema()`` returns)."""
    return f"{_BASE_DDL}, {_HEADERS_DDL}" if include_headers else _BASE_DDL


def arrow_schema(include_headers: bool) -> Any:
    """The same schema as a ``pyarrow.Schema`` (what each task's batches carry; typed Any,
    as pyarrow ships no type information)."""
    pa = require("pyarrow", "spark", "The Spark data source")
    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(pa.field("headers", pa.list_(pa.struct(
            [pa.field("key", pa.string()), pa.field("value", pa.binary())]))))
    return pa.schema(fields)
