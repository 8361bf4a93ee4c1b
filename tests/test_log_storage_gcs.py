"""Log directories on Google Cloud Storage: gs:// URLs read from an emulator on loopback.

The emulator (the ``gcp-storage-emulator`` package) serves the JSON API that
gcsfs speaks (listings, object metadata, ranged media downloads) on
127.0.0.1.  Everything read through a ``gs://`` URL must equal the local read
of the same folders, configured from the environment alone
(``STORAGE_EMULATOR_HOST``, as Google's own libraries honour it) or through
``storage_options``.  The Google auth libraries are kept off the network: no
metadata-server probe (``NO_GCE_CHECK``), and no credentials to find.
"""
from __future__ import annotations

import json
import logging
import os
import pickle
import subprocess
import sys
import textwrap

import pytest

from spark_fixtures import expected_rows, logdirs, rows_of_spark, spark  # noqa: F401
from storage_support import assert_cli_like_local, assert_logs_like_local, folder_commands, records as _records

from kafkawire.log import Log, LogDir
from kafkawire.log import storage as S

BUCKET = "kafka-backups"
#: What keeps Google's auth libraries from probing a metadata server or finding real credentials.
OFFLINE = {"NO_GCE_CHECK": "true", "GCE_METADATA_HOST": "127.0.0.1:9", "GCE_METADATA_IP": "127.0.0.1:9",
           "GOOGLE_APPLICATION_CREDENTIALS": "", "CLOUDSDK_CONFIG": "/nonexistent-gcloud-config"}


@pytest.fixture(scope="module")
def gcs(logdirs):
    """An emulator on loopback holding a copy of ``logdirs`` under gs://kafka-backups/logs/."""
    with pytest.MonkeyPatch.context() as mp:
        for k, v in OFFLINE.items():
            if v:
                mp.setenv(k, v)
            else:
                mp.delenv(k, raising=False)
        mp.delenv("STORAGE_EMULATOR_HOST", raising=False)
        pytest.importorskip("gcsfs")
        emulator = pytest.importorskip("gcp_storage_emulator.server")
        try:   # imported with other settings earlier in this process: no probe either way
            from google.auth.compute_engine import _metadata
            mp.setattr(_metadata, "_NO_GCE_CHECK", True)
        except ImportError:
            pass
        logging.getLogger("gcp_storage_emulator").setLevel(logging.ERROR)
        server = emulator.create_server("127.0.0.1", 0, in_memory=True, default_bucket=BUCKET)
        server.start()
        try:
            host, port = server._api._httpd.server_address[:2]
            endpoint = f"http://{host}:{port}"
            from gcsfs.core import GCSFileSystem
            fs = GCSFileSystem(endpoint_url=endpoint, token="anon", skip_instance_cache=True)
            for d, _, names in os.walk(logdirs):
                for n in names:
                    full = os.path.join(d, n)
                    with open(full, "rb") as f:
                        fs.pipe_file(f"{BUCKET}/logs/{os.path.relpath(full, logdirs)}", f.read())
            S._cache.clear()
            yield {"endpoint": endpoint, "fs": fs, "url": f"gs://{BUCKET}/logs",
                   "options": {"storage_options": json.dumps({"endpoint_url": endpoint,
                                                              "token": "anon"})}}
        finally:
            S._cache.clear()
            server.stop()


@pytest.fixture
def gcs_env(gcs, monkeypatch):
    """``STORAGE_EMULATOR_HOST`` set, as a shell pointed at the emulator has it."""
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs["endpoint"])
    for k, v in OFFLINE.items():
        if v:
            monkeypatch.setenv(k, v)
        else:
            monkeypatch.delenv(k, raising=False)
    S._cache.clear()
    yield
    S._cache.clear()


def test_log_dir_from_the_environment_equals_local(gcs_env, gcs, logdirs):
    with LogDir.open(gcs["url"]) as remote, LogDir.open(logdirs) as local:
        assert_logs_like_local(remote, local, "gs://")
    name = sorted(n for n in os.listdir(logdirs) if n.startswith("orders-"))[0]
    with Log.open(f"gs://{BUCKET}/logs/{name}/") as r, Log.open(os.path.join(logdirs, name)) as lo:
        assert r.path == f"gs://{BUCKET}/logs/{name}"
        assert _records(r) == _records(lo)


def test_log_dir_with_storage_options_equals_local(gcs, logdirs):
    assert "STORAGE_EMULATOR_HOST" not in os.environ
    st = S.storage_for(gcs["url"], gcs["options"])
    with LogDir.open(gcs["url"], storage=st) as remote, LogDir.open(logdirs) as local:
        assert_logs_like_local(remote, local, "gs://")


def test_cli_reads_gs_urls_like_local_folders(gcs_env, gcs, logdirs):
    assert_cli_like_local(gcs["url"], logdirs, folder_commands(logdirs))


def _pythonpath():
    """PYTHONPATH for a child process: this folder (the test helpers) and kafkawire's."""
    import kafkawire
    paths = [os.path.dirname(os.path.abspath(__file__)), os.path.dirname(os.path.dirname(kafkawire.__file__))]
    return os.pathsep.join(paths + [os.environ.get("PYTHONPATH", "")])


@pytest.mark.one_backend
def test_the_command_in_a_shell_with_the_emulator_set_prints_what_it_prints_locally(gcs_env, gcs, logdirs):
    # as a user runs it: a new process, configured by STORAGE_EMULATOR_HOST alone, and nothing on
    # stderr (gcsfs's gRPC bucket-type lookup, which emulators do not serve, logged a warning for
    # every call)
    env = dict(os.environ, PYTHONPATH=_pythonpath())
    got, want = (subprocess.run([sys.executable, "-m", "kafkawire.cli", "stats", "--no-progress", root],
                                env=env, capture_output=True, text=True, timeout=600)
                 for root in (gcs["url"], logdirs))
    assert (got.returncode, got.stderr) == (want.returncode, want.stderr) == (0, "")
    assert got.stdout.replace(gcs["url"], "{R}") == want.stdout.replace(logdirs, "{R}")


@pytest.mark.one_backend
@pytest.mark.spark
def test_spark_reads_gs_with_storage_options_like_local(spark, gcs, logdirs):
    df = (spark.read.format("kafkawire").option("includeHeaders", "true")
          .option("storage_options", gcs["options"]["storage_options"]).load(gcs["url"]))
    assert rows_of_spark(df.collect()) == expected_rows(logdirs)


_SPARK_READ = textwrap.dedent("""
    import pickle, sys
    from kafkawire.spark.session import make_session
    from spark_fixtures import rows_of_spark
    spark = make_session("local[1]", "kafkawire-gcs-environment")
    try:
        df = spark.read.format("kafkawire").option("includeHeaders", "true").load(sys.argv[1])
        rows = rows_of_spark(df.collect())
    finally:
        spark.stop()
    with open(sys.argv[2], "wb") as f:
        pickle.dump(rows, f)
""")


@pytest.mark.one_backend
@pytest.mark.spark
def test_spark_reads_gs_from_the_environment_like_local(gcs_env, gcs, logdirs, tmp_path):
    # a Spark started where STORAGE_EMULATOR_HOST is set (its Python workers inherit it), given
    # no options at all
    pytest.importorskip("pyspark")
    out = tmp_path / "rows.pickle"
    env = dict(os.environ, PYTHONPATH=_pythonpath())
    env.pop("KAFKAWIRE_SPARK_TRACE", None)
    r = subprocess.run([sys.executable, "-c", _SPARK_READ, gcs["url"], str(out)], env=env,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    with open(out, "rb") as f:
        assert pickle.load(f) == expected_rows(logdirs)
