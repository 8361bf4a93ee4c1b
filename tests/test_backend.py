"""The backend really is what the environment asked for."""
import os
import subprocess
import sys

import pytest

import kafkawire
from kafkawire import _kernels


def test_backend_name_is_valid(backend):
    assert kafkawire.backend == backend


@pytest.mark.one_backend
def test_compiled_backend_present_when_required():
    if os.environ.get("KAFKAWIRE_REQUIRE_FAST") != "1":
        pytest.skip("compiled backend not required in this run")
    assert _kernels.fast_available(), f"compiled kernels missing: {_kernels.fast_error}"
    env = dict(os.environ)
    env.pop("KAFKAWIRE_BACKEND", None)
    out = subprocess.run([sys.executable, "-c", "import kafkawire; print(kafkawire.backend)"],
                         capture_output=True, text=True, env=env, check=True).stdout.strip()
    assert out == "fast"


@pytest.mark.one_backend
def test_pure_can_be_forced():
    env = dict(os.environ, KAFKAWIRE_BACKEND="pure")
    out = subprocess.run([sys.executable, "-c", "import kafkawire; print(kafkawire.backend)"],
                         capture_output=True, text=True, env=env, check=True).stdout.strip()
    assert out == "pure"


@pytest.mark.one_backend
def test_every_kernel_module_has_the_same_names():
    if not _kernels.fast_available():
        pytest.skip("compiled backend not built")
    fast, pure = _kernels._load("fast"), _kernels._load("pure")
    for mod in _kernels.MODULES:
        assert sorted(fast[mod].__all__) == sorted(pure[mod].__all__), mod


@pytest.mark.one_backend
def test_suite_runs_against_the_installed_package():
    if os.environ.get("KAFKAWIRE_TEST_INSTALLED") != "1":
        pytest.skip("only the CI test script installs the wheel")
    assert "site-packages" in kafkawire.__file__, kafkawire.__file__
