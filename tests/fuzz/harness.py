"""Drive every decoding path over a buffer; shared by the tests and the atheris target."""
from __future__ import annotations

import os
import subprocess
import sys

import kafkawire
from kafkawire.errors import KafkaWireError
from kafkawire.records.columnar import iter_column_chunks

ATTRS = ("base_offset", "last_offset", "magic", "compression", "timestamp_type",
         "first_timestamp", "max_timestamp", "producer_id", "producer_epoch", "base_sequence",
         "last_sequence", "partition_leader_epoch", "is_transactional", "is_control",
         "delete_horizon", "crc", "size", "position", "record_count", "attributes",
         "control_type", "coordinator_epoch")


def exercise(data, verify_crc: bool = False):
    """Decode everything in ``data``; return a comparable summary or the error raised.

    Any exception that is not a ``KafkaWireError`` propagates (that is a bug).
    """
    out = []
    it = kafkawire.iter_batches(data, verify_crc=verify_crc, max_decompressed_size=1 << 20)
    try:
        for b in it:
            row = []
            for a in ATTRS:
                try:
                    row.append(getattr(b, a))
                except KafkaWireError as exc:
                    row.append(("error", type(exc).__name__))
            try:
                recs = [(r.offset, r.timestamp, r.timestamp_type, r.key, r.value, r.headers)
                        for r in b]
                row.append(recs)
                assert [(r.offset, r.key, r.value) for r in b.records()] == \
                    [(r[0], r[3], r[4]) for r in recs]
            except KafkaWireError as exc:
                row.append(("error", type(exc).__name__))
            try:
                b.validate()
                row.append("valid")
            except KafkaWireError as exc:
                row.append(("invalid", type(exc).__name__))
            bytes(b.raw)
            out.append(row)
    except KafkaWireError as exc:
        out.append(("stop", type(exc).__name__, exc.position))
    out.append(("tail", it.partial_tail, it.stop_position))
    return out


def columns_outcome(data, max_records: int):
    """Columns of every chunk ``iter_column_chunks`` yields, or the error's class/position/reason."""
    try:
        it = iter_column_chunks(data, include_headers=True, max_records=max_records,
                                max_decompressed_size=1 << 20)
        chunks = [{k: (None if v is None else v.tolist()) for k, v in c.to_numpy().items()}
                  for c in it]
        return ("ok", chunks, it.partial_tail, it.stop_position)
    except KafkaWireError as exc:
        return ("error", type(exc).__name__, getattr(exc, "position", None),
                getattr(exc, "reason", None))


def damage(buf: bytes, data, rounds: int) -> bytes:
    """``buf`` after 1..``rounds`` random edits drawn from hypothesis ``data``: a bit flip, a
    byte set to an edge value, a cut, or a few inserted bytes."""
    from hypothesis import strategies as st
    out = bytearray(buf)
    for _ in range(data.draw(st.integers(1, rounds))):
        kind = data.draw(st.sampled_from(["flip", "set", "cut", "insert"]))
        if not out:
            break
        pos = data.draw(st.integers(0, len(out) - 1))
        if kind == "flip":
            out[pos] ^= data.draw(st.integers(1, 255))
        elif kind == "set":
            out[pos] = data.draw(st.sampled_from([0, 0x7F, 0x80, 0xFF]))
        elif kind == "cut":
            del out[pos:]
        else:
            out[pos:pos] = data.draw(st.binary(min_size=1, max_size=8))
    return bytes(out)


def run_atheris(name: str, seconds: int, tmp_path) -> None:
    """Run the atheris target ``tests/fuzz/fuzz_<name>.py`` for ``seconds`` on the compiled
    kernels; fail with its output on a finding (or skip when atheris or the kernels are
    missing)."""
    import pytest
    from kafkawire import _kernels
    pytest.importorskip("atheris")
    if not _kernels.fast_available():
        pytest.skip("compiled backend not built")
    tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    target = os.path.join(tests, "fuzz", f"fuzz_{name}.py")
    corpus = tmp_path / f"corpus-{name}"
    corpus.mkdir()
    pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(kafkawire.__file__)))
    env = dict(os.environ, KAFKAWIRE_BACKEND="fast",
               PYTHONPATH=os.pathsep.join([pkg_root, tests, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run(
        [sys.executable, target, f"-max_total_time={seconds}", "-rss_limit_mb=2048",
         "-timeout=10", f"-artifact_prefix={tmp_path}{os.sep}", str(corpus)],
        capture_output=True, text=True, env=env, timeout=seconds + 600)
    assert proc.returncode == 0, proc.stderr[-4000:]
