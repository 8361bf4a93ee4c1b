"""Starting a SparkSession that can run the kafkawire source (demo, tests, benchmark)."""
from __future__ import annotations

import os
import sys


def _repo_root() -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def make_session(master: str = "local[2]", app: str = "kafkawire", conf=None):
    """A SparkSession whose Python workers run this interpreter and can import kafkawire.

    The workers inherit ``PYSPARK_PYTHON`` (this interpreter) and a
    ``PYTHONPATH`` that includes this package's parent folder, so a source
    checkout works like an installed wheel.  The ``kafkawire`` format is
    registered explicitly as well as through ``pyspark_kafkawire``.
    """
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    root = _repo_root()
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if root not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([root, *paths])
    from pyspark.sql import SparkSession
    builder = (SparkSession.builder.master(master).appName(app)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.executorEnv.PYTHONPATH", os.environ["PYTHONPATH"])
               .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable))
    for k, v in (conf or {}).items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    from kafkawire.spark.register import register
    register(spark)
    return spark
