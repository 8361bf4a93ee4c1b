"""Kafka's rules for legacy (v0/v1) compressed wrappers, checked against Kafka itself.

Kafka 3.9's legacy deep iterator is the reference, run over the same bytes by
``tests/java/LegacyRecordsReader.java`` (``MemoryRecords``):

* a magic-1 wrapper whose own offset is 0 is produce-side data (clients send
  wrappers before a broker assigns offsets): the inner relative offsets are the
  record offsets as they stand;
* a nonzero wrapper offset below the last inner relative offset is invalid;
* inner messages must not be compressed, and an inner set may not be empty.

Every decoding path must agree with Kafka: records, columns, ``dump``,
``stats`` and the Spark reader.
"""
from __future__ import annotations

import base64
import json
import os

import pytest

import kafkawire
from kafkawire import compression
from kafkawire.cli import main
from kafkawire.errors import CorruptRecordError, KafkaWireError
from kafkawire.records.columnar import decode_columns

from fuzz import samples as S

T = 1_600_000_000_000


def _inner(n, start=0, magic=1):
    return b"".join(S.legacy_message(start + i, b"value-%d" % i, b"k%d" % i, magic=magic,
                                     timestamp=T + i) for i in range(n))


def wrapper(offset, inner, *, codec="gzip", magic=1, log_append_time=False, timestamp=T + 50):
    attrs = compression.codec_id(codec) | (0x08 if log_append_time else 0)
    return S.legacy_message(offset, compression.compress(codec, inner, magic=magic), None,
                            magic=magic, attributes=attrs, timestamp=timestamp)


#: name -> (bytes, Kafka accepts it)
CASES = {
    "offset0_gzip": (wrapper(0, _inner(10)), True),
    "offset0_snappy": (wrapper(0, _inner(4), codec="snappy"), True),
    "offset0_lz4": (wrapper(0, _inner(4), codec="lz4"), True),
    "offset0_log_append_time": (wrapper(0, _inner(3), log_append_time=True), True),
    "offset0_then_more": (wrapper(0, _inner(3)) + S.legacy_message(5, b"later", timestamp=T), True),
    "offset_equals_last": (wrapper(9, _inner(10)), True),
    "offset_after_last": (wrapper(109, _inner(10)), True),
    "offset_below_last": (wrapper(3, _inner(10)), False),
    "offset1_below_last": (wrapper(1, _inner(3)), False),
    "nested": (wrapper(20, wrapper(0, _inner(3))), False),
    "nested_offset0": (wrapper(0, wrapper(0, _inner(3))), False),
    "empty_inner_set": (wrapper(3, b""), False),
    "magic0_wrapper": (wrapper(12, _inner(3, start=10, magic=0), magic=0), True),
    "magic0_inner_in_magic1": (wrapper(7, _inner(2, magic=0) + _inner(1, start=2)), True),
}


def _b64(v):
    return None if v is None else base64.b64encode(bytes(v)).decode()


@pytest.fixture(scope="module")
def kafka(java_runner, tmp_path_factory):
    """Kafka's reading of every case: name -> (records [(offset, ts, key, value)], error)."""
    d = tmp_path_factory.mktemp("legacy-rules")
    paths = {}
    for name, (data, _) in CASES.items():
        p = d / f"{name}.bin"
        p.write_bytes(data)
        paths[str(p)] = name
    java_runner.compile("RecordsReader")         # its JSON helpers
    proc = java_runner.run("LegacyRecordsReader", *paths)
    out = {}
    for line in proc.stdout.decode().splitlines():
        doc = json.loads(line)
        recs = [(r[0], r[1], r[3], r[4]) for r in doc["records"]]
        out[paths[doc["path"]]] = (recs, doc["error"])
    return out


def test_kafka_agrees_with_the_case_table(kafka):
    for name, (_, ok) in CASES.items():
        assert (kafka[name][1] is None) == ok, (name, kafka[name])


def _records_path(data):
    recs = []
    try:
        for b in kafkawire.iter_batches(data, verify_crc=True):
            b.validate()
            recs.extend((r.offset, r.timestamp, _b64(r.key), _b64(r.value)) for r in b)
    except CorruptRecordError:
        return recs, True
    return recs, False


def _columnar_path(data):
    try:
        c = decode_columns(data)
    except CorruptRecordError:
        return [], True
    keys, values = c.to_numpy(), None
    out = []
    for i in range(len(c)):
        k = bytes(keys["key_data"][keys["key_offsets"][i]:keys["key_offsets"][i + 1]]) \
            if keys["key_valid"][i] else None
        v = bytes(keys["value_data"][keys["value_offsets"][i]:keys["value_offsets"][i + 1]]) \
            if keys["value_valid"][i] else None
        out.append((int(c.offset[i]), int(c.timestamp[i]), _b64(k), _b64(v)))
    return out, False


@pytest.mark.parametrize("name", sorted(CASES))
def test_records_path_matches_kafka(kafka, name):
    want, error = kafka[name]
    got, failed = _records_path(CASES[name][0])
    assert failed == (error is not None), (got, error)
    assert got == want


@pytest.mark.parametrize("name", sorted(CASES))
def test_columnar_path_matches_kafka(kafka, name):
    want, error = kafka[name]
    got, failed = _columnar_path(CASES[name][0])
    assert failed == (error is not None), (got, error)
    if not failed:
        assert got == want


def _partition(tmp_path, data):
    d = tmp_path / "logs" / "t-0"
    d.mkdir(parents=True)
    (d / "00000000000000000000.log").write_bytes(data)
    return d


@pytest.mark.parametrize("name", sorted(CASES))
def test_dump_matches_kafka(kafka, name, tmp_path, capsys):
    want, error = kafka[name]
    d = _partition(tmp_path, CASES[name][0])
    code = main(["dump", "--deep-iteration", "--files", str(d / "00000000000000000000.log")])
    out, err = capsys.readouterr()
    offsets = [int(line.split()[2]) for line in out.splitlines() if line.startswith("| offset: ")]
    assert "Traceback" not in err
    if error is None:
        assert code == 0, err
        assert offsets == [r[0] for r in want]
    else:
        assert code != 0 and "cannot decode the records" in err, (code, err)
        assert all(o >= 0 for o in offsets)


@pytest.mark.parametrize("name", sorted(CASES))
def test_stats_matches_kafka(kafka, name, tmp_path, capsys):
    want, error = kafka[name]
    d = _partition(tmp_path, CASES[name][0])
    main(["stats", "--json", "--no-progress", str(d)])
    out, err = capsys.readouterr()
    doc = [json.loads(line) for line in out.splitlines() if line.startswith("{")][0]
    if error is None:
        assert doc["errors"] == []
        assert doc["firstOffset"] == min(r[0] for r in want)
        assert doc["records"] == len(want)
    else:
        assert doc["errors"]
        assert doc["firstOffset"] is None or doc["firstOffset"] >= 0


@pytest.mark.one_backend
@pytest.mark.parametrize("name", ["offset0_then_more", "offset0_gzip", "offset_below_last",
                                  "nested"])
def test_spark_reader_matches_kafka(kafka, name, tmp_path):
    pytest.importorskip("pyarrow")
    from spark_fixtures import read_in_process
    want, error = kafka[name]
    d = _partition(tmp_path, CASES[name][0])
    log_end = kafkawire.log.Log.open(str(d)).next_offset
    if error is None:
        _, table = read_in_process({"path": str(d.parent)})
        # Spark's Kafka source reads up to the log end offset the batch headers give
        assert table.column("offset").to_pylist() == [r[0] for r in want if r[0] < log_end]
        assert table.column("value").to_pylist() == [base64.b64decode(r[3]) for r in want
                                                     if r[0] < log_end]
    else:
        with pytest.raises(CorruptRecordError):
            read_in_process({"path": str(d.parent)})


def test_nested_wrappers_cannot_inflate_past_the_bound(monkeypatch):
    """What a batch inflates to is bounded by max_decompressed_size, whatever its structure."""
    bomb_inner = wrapper(0, S.legacy_message(0, bytes(900_000)))     # ~1 KB, inflates 900 KB
    outer = wrapper(40, bomb_inner * 20)
    inflated = []
    real = compression.decompress

    def counting(*args, **kwargs):
        out = real(*args, **kwargs)
        inflated.append(len(out))
        return out

    monkeypatch.setattr(compression, "decompress", counting)
    with pytest.raises(KafkaWireError):
        for b in kafkawire.iter_batches(outer, max_decompressed_size=1 << 20):
            list(b)
    assert sum(inflated) <= 1 << 20
    inflated.clear()
    with pytest.raises(KafkaWireError):
        decode_columns(outer, max_decompressed_size=1 << 20)
    assert sum(inflated) <= 1 << 20


def test_verify_deep_reports_nested_wrappers(tmp_path, capsys):
    d = _partition(tmp_path, CASES["nested"][0])
    code = main(["verify", "--deep", "--no-progress", str(d)])
    out, err = capsys.readouterr()
    assert code != 0
    assert "must not be compressed" in out + err
