"""Shared fixtures: every test runs on both kernel backends; Java interop helpers.

* ``backend`` (autouse) parametrises each test over ``fast`` and ``pure`` and
  switches ``kafkawire._kernels`` for its duration.  A test marked
  ``one_backend`` runs once, with the active backend.  When the compiled
  backend is required (``KAFKAWIRE_REQUIRE_FAST=1``, set by the test script)
  and missing, the ``fast`` runs fail instead of skipping.
* ``java`` compiles a Java helper from ``tests/java/`` against Kafka 3.9.1's
  jars (from the ``shigawire-apache-flink-libraries`` wheel) and runs it.
"""
from __future__ import annotations

import os

import pytest

from kafkawire import _kernels
from fake_brokers import FakeCluster
from javahelper import JavaRunner, find_kafka_jars
from mock_cluster import MockCluster

REQUIRE_FAST = os.environ.get("KAFKAWIRE_REQUIRE_FAST") == "1"


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", help="run long fuzzing and soak tests")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--runslow"):
        return
    skip = pytest.mark.skip(reason="slow; run with --runslow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


def pytest_generate_tests(metafunc):
    if "backend" in metafunc.fixturenames and metafunc.definition.get_closest_marker("one_backend") is None:
        metafunc.parametrize("backend", ["fast", "pure"], indirect=True, scope="function")


@pytest.fixture(autouse=True)
def backend(request):
    name = getattr(request, "param", None) or _kernels.backend
    if name == "fast" and not _kernels.fast_available():
        if REQUIRE_FAST:
            pytest.fail(f"compiled backend required but missing: {_kernels.fast_error}")
        pytest.skip("compiled backend not built")
    previous = _kernels.backend
    _kernels.use(name)
    try:
        yield name
    finally:
        _kernels.use(previous)


@pytest.fixture(scope="session")
def java_runner(tmp_path_factory):
    jars = find_kafka_jars()
    if jars is None:
        pytest.skip("Kafka jars not installed (pip install shigawire-apache-flink-libraries)")
    return JavaRunner(jars, tmp_path_factory.mktemp("java-classes"))


@pytest.fixture
def fake():
    """Two scripted brokers on loopback (``fake_brokers.FakeCluster``), closed afterwards."""
    cluster = FakeCluster(2)
    yield cluster
    cluster.close()


@pytest.fixture(scope="module")
def mock_cluster():
    """librdkafka's mock cluster, three brokers, one per test module: ``(bootstrap, MockCluster)``."""
    pytest.importorskip("confluent_kafka")
    cluster = MockCluster(3)
    yield cluster.bootstrap, cluster
    cluster.close()


@pytest.fixture(scope="module")
def mock(mock_cluster):
    """The bootstrap servers of this module's mock cluster."""
    return mock_cluster[0]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A test that failed because librdkafka's mock cluster crashed under it is reported as
    an expected failure naming the crash: the peer died, kafkawire did not."""
    outcome = yield
    report = outcome.get_result()
    mock = getattr(item, "funcargs", {}).get("mock_cluster")
    if report.failed and mock is not None and mock[1].crashed():
        report.outcome = "skipped"
        report.wasxfail = (f"librdkafka's mock cluster crashed (exit status "
                           f"{mock[1].proc.returncode}) during the test")
