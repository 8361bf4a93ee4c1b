"""A missing optional library is reported as what it is, with the extra to install.

Each case runs in a subprocess where the library cannot be imported (its
``sys.modules`` entry is None, which makes ``import`` fail as if it were not
installed).  A missing codec is never damage: header-level work (``dump``
without ``--deep-iteration``, ``stats``) does not need it, and ``verify --deep``
reports it once, apart from problems.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

import kafkawire
from kafkawire.records import BatchBuilder

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(kafkawire.__file__)))
HINT_ZSTD = "pip install 'kafkawire[zstd]'"
HINT_SPARK = "pip install 'kafkawire[spark]'"


#: appended to a child's code: run every ``calls`` entry, print what it raised
_TRY_CALLS = """
        for f in calls:
            try:
                f()
            except ImportError as e:
                print(type(e).__name__, e)
        """


def run_without(blocked, code, backend="pure"):
    """Run ``code`` in a fresh interpreter where the modules in ``blocked`` cannot be imported."""
    prelude = "import sys\n" + "".join(f"sys.modules[{m!r}] = None\n" for m in blocked)
    env = dict(os.environ, KAFKAWIRE_BACKEND=backend,
               PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    env.pop("KAFKAWIRE_REQUIRE_FAST", None)
    proc = subprocess.run([sys.executable, "-W", "ignore", "-c", prelude + textwrap.dedent(code)],
                          capture_output=True, text=True, env=env, timeout=300)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture
def zstd_partition(tmp_path):
    """A partition whose batches alternate zstd and gzip (40 zstd batches)."""
    d = tmp_path / "t-0"
    d.mkdir()
    out = []
    for i in range(80):
        b = BatchBuilder(compression="zstd" if i % 2 == 0 else "gzip", base_offset=i * 3)
        for j in range(3):
            b.append(b"value-%d-%d" % (i, j), key=b"k", timestamp=1000 + j)
        out.append(b.build())
    (d / "00000000000000000000.log").write_bytes(b"".join(out))
    return d


def _cli(argv, backend):
    return run_without(["zstandard"], f"""
        from kafkawire.cli import main
        raise SystemExit(main({argv!r}))
        """, backend)


def test_dump_headers_need_no_codec(zstd_partition, backend):
    rc, out, err = _cli(["dump", "--files", str(zstd_partition / "00000000000000000000.log")],
                        backend)
    assert rc == 0, err
    assert "Traceback" not in err and err == ""
    lines = [line for line in out.splitlines() if line.startswith("baseOffset:")]
    assert len(lines) == 80
    assert all("isvalid: true" in line for line in lines)


def test_dump_deep_iteration_reports_the_codec_once(zstd_partition, backend):
    rc, out, err = _cli(["dump", "--deep-iteration",
                         "--files", str(zstd_partition / "00000000000000000000.log")], backend)
    assert rc == 1
    assert "Traceback" not in err
    assert err.count(HINT_ZSTD) == 1, err
    assert "40 zstd" in err
    assert "Non-consecutive" not in err + out
    # the gzip batches' records are all there
    assert sum(line.startswith("| offset:") for line in out.splitlines()) == 40 * 3


def test_stats_needs_no_codec(zstd_partition, backend):
    rc, out, err = _cli(["stats", "--no-progress", str(zstd_partition)], backend)
    assert rc == 0, out + err
    assert "error:" not in out
    assert out.count(HINT_ZSTD) == 1
    assert "records: 240" in out and "offsets: 0..239" in out
    rc, out, err = _cli(["stats", "--json", "--no-progress", str(zstd_partition)], backend)
    doc = json.loads(out.splitlines()[0])
    assert rc == 0 and doc["errors"] == [] and doc["records"] == 240
    assert doc["notDecoded"]["zstd"]["batches"] == 40


def test_verify_deep_does_not_count_a_missing_codec_as_damage(zstd_partition, backend):
    rc, out, err = _cli(["verify", "--deep", "--no-progress", str(zstd_partition)], backend)
    assert "Traceback" not in err
    assert "corrupt" not in out + err and "problem(s)" not in out
    assert out.count(HINT_ZSTD) == 1
    assert rc == 1      # the records of those batches could not be checked
    rc, out, err = _cli(["verify", "--deep", "--json", "--no-progress", str(zstd_partition)],
                        backend)
    summary = [json.loads(line) for line in out.splitlines()][-1]
    assert summary["problems"] == 0 and summary["ok"] is True
    assert summary["notDecoded"]["zstd"]["batches"] == 40
    rc, out, err = _cli(["verify", "--no-progress", str(zstd_partition)], backend)
    assert rc == 0 and out.rstrip().endswith(": ok")


def test_library_error_is_typed_and_names_the_extra(zstd_partition, backend):
    rc, out, err = run_without(["zstandard"], f"""
        import kafkawire
        from kafkawire.errors import CodecNotInstalledError, MissingDependencyError
        data = open({str(zstd_partition / "00000000000000000000.log")!r}, "rb").read()
        b = next(iter(kafkawire.iter_batches(data)))
        assert b.compression == "zstd" and b.record_count == 3   # headers need no codec
        try:
            b.records()
        except CodecNotInstalledError as e:
            assert isinstance(e, MissingDependencyError) and isinstance(e, ImportError)
            print(e.codec, e.extra, e)
        """, backend)
    assert rc == 0, err
    assert out.startswith("zstd zstd ") and HINT_ZSTD in out


@pytest.mark.one_backend
def test_missing_pyarrow_names_the_spark_extra():
    rc, out, err = run_without(["pyarrow"], """
        from kafkawire.records import BatchBuilder
        from kafkawire.records.columnar import decode_columns, to_arrow
        b = BatchBuilder(); b.append(b"v", timestamp=1)
        data = b.build()
        assert len(decode_columns(data)) == 1          # numpy columns need no pyarrow
        calls = (lambda: to_arrow(data), lambda: decode_columns(data).to_arrow())
        """ + _TRY_CALLS)
    _expect_hints(rc, out, err, 2)


def _expect_hints(rc, out, err, n):
    """Each of the child's ``n`` calls raised MissingDependencyError naming the spark extra."""
    assert rc == 0, err
    lines = out.splitlines()
    assert len(lines) == n, out
    assert all(line.startswith("MissingDependencyError") and HINT_SPARK in line for line in lines)


@pytest.mark.one_backend
def test_missing_pyspark_names_the_spark_extra():
    rc, out, err = run_without(["pyspark"], """
        import kafkawire.spark as ks
        calls = (lambda: ks.register(None), lambda: ks.make_session(),
                 lambda: __import__("pyspark_kafkawire"),
                 lambda: __import__("kafkawire.spark.source"),
                 lambda: __import__("kafkawire.spark.sink"))
        """ + _TRY_CALLS)
    _expect_hints(rc, out, err, 5)
