"""Java interop: Kafka 3.9.1's own code reads what kafkawire writes, and the reverse.

(b) kafkawire's builders encode every magic x codec and the special v2
batches; ``tests/java/RecordsReader.java`` reads them with ``MemoryRecords``
and ``FileRecords``, ``ensureValid()``s every batch and prints every field;
they must equal what the builder inputs say.
(a) ``tests/java/RecordsWriter.java`` writes the same kinds of batches with
``MemoryRecordsBuilder``; kafkawire decodes them and must agree with Kafka's
reader field for field.
"""
from __future__ import annotations

import json
import struct

import pytest

from records_encode_cases import encoder_cases

pytestmark = pytest.mark.java


def _read_with_kafka(java_runner, mode, paths):
    proc = java_runner.run("RecordsReader", mode, *[str(p) for p in paths])
    return {d["path"]: d for d in map(json.loads, proc.stdout.decode().splitlines())}


@pytest.fixture(scope="module")
def encoded(tmp_path_factory):
    """The encoder cases, written once per backend run (bytes are backend-independent)."""
    d = tmp_path_factory.mktemp("kw-encoded")
    cases = encoder_cases()
    for name, data, _ in cases:
        (d / f"{name}.bin").write_bytes(data)
    return d, cases


@pytest.mark.parametrize("mode", ["mem", "file"])
def test_kafka_reads_what_kafkawire_writes(java_runner, encoded, mode):
    d, cases = encoded
    seen = _read_with_kafka(java_runner, mode, [d / f"{n}.bin" for n, _, _ in cases])
    failures = []
    for name, data, expected in cases:
        got = seen[str(d / f"{name}.bin")]
        assert "error" not in got, (name, got.get("error"))
        batches = got["batches"]
        for b in batches:
            assert b["valid"] is True, (name, b["valid"])
            b.pop("valid")
            if mode == "file":
                b.pop("first_timestamp", None)
        want = [dict(e) for e in expected]
        if mode == "file":
            for w in want:
                w.pop("first_timestamp", None)
        if batches != want:
            failures.append((name, batches, want))
    assert not failures, _explain(failures)


def test_concatenated_file(java_runner, tmp_path):
    cases = encoder_cases()
    blob = b"".join(data for _, data, _ in cases)
    path = tmp_path / "all.log"
    path.write_bytes(blob)
    got = _read_with_kafka(java_runner, "file", [path])[str(path)]
    want = [b for _, _, exp in cases for b in exp]
    assert "error" not in got
    assert len(got["batches"]) == len(want)
    assert all(b["valid"] is True for b in got["batches"])
    assert [b["records"] for b in got["batches"]] == [w["records"] for w in want]


def _explain(failures):
    lines = []
    for name, got, want in failures[:5]:
        lines.append(f"== {name}")
        for i, (g, w) in enumerate(zip(got, want)):
            for k in sorted(set(g) | set(w)):
                if g.get(k) != w.get(k):
                    gv, wv = str(g.get(k))[:300], str(w.get(k))[:300]
                    lines.append(f"  batch {i} {k}: got={gv} expected={wv}")
        if len(got) != len(want):
            lines.append(f"  kafka read {len(got)} batches, expected {len(want)}")
    return "\n".join(lines)


@pytest.fixture(scope="module")
def java_written(java_runner, tmp_path_factory):
    d = tmp_path_factory.mktemp("java-written")
    java_runner.run("RecordsWriter", str(d))
    return d


def test_uncompressed_bytes_identical_to_kafka(java_written):
    from records_encode_cases import java_writer_twins
    twins = java_writer_twins()
    assert len(twins) == 18
    for name, data in twins.items():
        java = (java_written / f"{name}.bin").read_bytes()
        assert data == java, f"{name}: kafkawire's bytes differ from MemoryRecordsBuilder's"


def _comparable_kafka_view(batches):
    """Kafka's JSON minus the validity flag (asserted true)."""
    out = []
    for b in batches:
        b = dict(b)
        assert b.pop("valid") is True
        out.append(b)
    return out


def _comparable_kw_view(batches):
    out = []
    for b in batches:
        b = dict(b)
        if b["magic"] < 2 and b["record_count"] is not None:
            b["record_count"] = None     # Kafka's countOrNull() is null for every legacy batch
        out.append(b)
    return out


def test_kafkawire_reads_what_kafka_writes(java_runner, java_written):
    from records_encode_cases import kafkawire_view
    paths = sorted(java_written.glob("*.bin"))
    assert len(paths) >= 40
    kafka = _read_with_kafka(java_runner, "mem", paths)
    failures = []
    for p in paths:
        want = _comparable_kafka_view(kafka[str(p)]["batches"])
        got = _comparable_kw_view(kafkawire_view(p.read_bytes()))
        if got != want:
            failures.append((p.stem, got, want))
    assert not failures, _explain(failures)


def test_kafkawire_round_trips_its_own_batches(encoded):
    from records_encode_cases import kafkawire_view
    _, cases = encoded
    failures = []
    for name, data, expected in cases:
        want = _comparable_kafka_view([dict(e, valid=True) for e in expected])
        got = _comparable_kw_view(kafkawire_view(data))
        if got != want:
            failures.append((name, got, want))
    assert not failures, _explain(failures)


def _wrapper_payload(data: bytes) -> bytes:
    magic = data[16]
    p = 18 + (8 if magic == 1 else 0)
    (klen,) = struct.unpack_from(">i", data, p)
    p += 4 + max(klen, 0)
    (vlen,) = struct.unpack_from(">i", data, p)
    return data[p + 4:p + 4 + vlen]


def test_lz4_header_checksum_matches_kafka(java_written):
    """Kafka writes KAFKA-3160's broken LZ4 header checksum under magic 0 only; so do we."""
    from kafkawire import compression as C
    from kafkawire.records.builder import BatchBuilder
    for magic in (0, 1):
        frame = _wrapper_payload((java_written / f"m{magic}_lz4_basic.bin").read_bytes())
        broken = (C.xxh32(frame[0:6]) >> 8) & 0xFF
        right = (C.xxh32(frame[4:6]) >> 8) & 0xFF
        assert frame[6] == (broken if magic == 0 else right)
        b = BatchBuilder(magic, "lz4")
        b.append(b"x" * 100, timestamp=1)
        ours = _wrapper_payload(b.build())
        assert ours[:7] == frame[:7]
