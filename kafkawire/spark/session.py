"""Start a SparkSession whose Python workers can import kafkawire.

Spark runs the data source's Python code in worker processes that it starts
with the interpreter named by ``PYSPARK_PYTHON`` (``python3`` on the PATH when
unset), not with the interpreter of your program.  If that interpreter lacks
kafkawire, ``spark.read.format("kafkawire")`` fails inside Spark with an
import error.  :func:`make_session` points the workers at the right
interpreter before Spark starts, and registers the format.
"""
from __future__ import annotations

import logging
import os
import site
import sys
import sysconfig
import warnings
from typing import TYPE_CHECKING, List, Mapping, Optional

from kafkawire._deps import require
from kafkawire.spark.register import register

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["make_session"]

log = logging.getLogger("kafkawire.spark.session")


def _package_root() -> str:
    """The folder holding the ``kafkawire`` package (site-packages, or a source checkout)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _site_dirs() -> List[str]:
    dirs = [sysconfig.get_paths().get(k, "") for k in ("purelib", "platlib")]
    try:
        dirs += site.getsitepackages()
    except AttributeError:  # some embedded or old virtualenv interpreters lack it
        pass
    dirs.append(site.getusersitepackages())
    return [os.path.realpath(d) for d in dirs if d]


def _source_checkout() -> Optional[str]:
    """The checkout folder when kafkawire is imported from one rather than installed."""
    root = os.path.realpath(_package_root())
    return None if root in _site_dirs() else root


def make_session(master: Optional[str] = None, app: str = "kafkawire",
                 conf: Optional[Mapping[str, str]] = None, *, python: Optional[str] = None,
                 quiet: bool = True) -> "SparkSession":
    """A SparkSession whose Python workers run an interpreter that has kafkawire.

    ``master``: ``"local[4]"``, ``"spark://host:7077"``, ``"yarn"``, ...; None
    keeps what ``spark-submit`` or ``spark.master`` chose (else ``local[*]``).
    ``python``: the interpreter the workers start, default this one
    (``sys.executable``); right in local mode, and on a cluster whose nodes
    have the same environment at the same path.  Otherwise give the path of
    an interpreter that exists on every node, or ship an environment (see the
    "Run on a Spark cluster" guide).  ``conf``: more Spark settings.
    ``quiet``: no web UI, no progress bars, Spark's own log at ERROR.  A
    ``local[...]`` master gets 4 shuffle partitions unless ``conf`` says
    otherwise (Spark's 200 suit a cluster, not one machine).

    The workers' interpreter is fixed when Spark starts: if a session is
    already running with another interpreter, it is returned as it is, with a
    warning.  Run from a source checkout, the checkout is added to the
    workers' ``PYTHONPATH``.  The ``kafkawire`` format is registered.
    """
    SparkContext = require("pyspark", "spark", "make_session()").SparkContext
    from pyspark.sql import SparkSession

    worker_python = python or sys.executable
    running = SparkContext._active_spark_context
    if running is not None and running.pythonExec != worker_python:
        warnings.warn(f"a SparkSession is already running with Python workers on {running.pythonExec!r}, "
                      f"not {worker_python!r}; stop it (spark.stop()) before make_session() if "
                      "its workers cannot import kafkawire", RuntimeWarning, stacklevel=2)
    os.environ["PYSPARK_PYTHON"] = worker_python
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app)
    if master:
        builder = builder.master(master)
    builder = (builder.config("spark.pyspark.python", worker_python)
               .config("spark.executorEnv.PYSPARK_PYTHON", worker_python))
    checkout = _source_checkout()
    if checkout is not None:
        paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        if checkout not in paths:
            os.environ["PYTHONPATH"] = os.pathsep.join([checkout, *paths])
        builder = builder.config("spark.executorEnv.PYTHONPATH", os.environ["PYTHONPATH"])
    if master and master.startswith("local"):
        # Spark's 200 shuffle partitions suit a cluster; on one machine each is a task's overhead
        builder = builder.config("spark.sql.shuffle.partitions", "4")
    if quiet:
        builder = (builder.config("spark.ui.enabled", "false")
                   .config("spark.ui.showConsoleProgress", "false"))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if quiet:
        spark.sparkContext.setLogLevel("ERROR")
    log.info("Spark %s, master %s, Python workers on %s%s", spark.version, spark.sparkContext.master,
             worker_python, f" (kafkawire from the checkout {checkout})" if checkout else "")
    register(spark)
    return spark
