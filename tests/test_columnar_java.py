"""Columnar decoding of batches written by Kafka's own Java code (``tests/java/RecordsWriter.java``).

Every case file (each magic × codec, headers, gaps, large values, LogAppendTime,
transactions and control markers, the mixed-magic file) decodes into columns
equal to the record-object path's records.
"""
from __future__ import annotations

import pytest

from kafkawire.records.columnar import decode_columns, iter_column_chunks
from columnar_support import records_of, rows_of

pytestmark = pytest.mark.java


@pytest.fixture(scope="session")
def java_cases(java_runner, tmp_path_factory):
    out = tmp_path_factory.mktemp("columnar-java-cases")
    java_runner.run("RecordsWriter", str(out))
    cases = {p.stem: p.read_bytes() for p in sorted(out.glob("*.bin"))}
    assert len(cases) > 20, sorted(cases)
    return cases


def test_java_written_batches(java_cases):
    for name, data in java_cases.items():
        chunk = decode_columns(data, include_headers=True)
        assert rows_of(chunk) == records_of(data), name
        chunked = [r for c in iter_column_chunks(data, include_headers=True, max_records=3)
                   for r in rows_of(c)]
        assert chunked == rows_of(chunk), name
