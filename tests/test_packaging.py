"""What ``pip install kafkawire`` gets: the wheel, the sdist, and the pure fallback.

* The wheel carries the compiled kernels, the Python sources, the stubs and
  ``py.typed``, and none of the build inputs (``.pyx``, ``.pxd``, ``.h``,
  generated ``.c``); ``auditwheel show`` accepts it (Linux); its metadata says
  what the package index shows (description, classifiers, SPDX license, URLs).
* The sdist carries everything a build from source needs.
* Installing the sdist with no compiler (``KAFKAWIRE_NO_EXTENSIONS=1``) gives a
  working pure-Python kafkawire; a build asked to compile that cannot says so
  loudly, and kafkawire repeats why at import.

``scripts/test.sh`` builds the sdist and wheel and passes their folder in
``KAFKAWIRE_DIST``; elsewhere they are built here, which takes a minute or two,
so only with ``--runslow``.
"""
from __future__ import annotations

import email.parser
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import Dict, List

import pytest

from kafkawire import _kernels

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.one_backend

BUILD_INPUTS = (".pyx", ".pxd", ".h", ".c", ".cpp")


@pytest.fixture(scope="module")
def dist(request, tmp_path_factory) -> Dict[str, Path]:
    """``{"wheel": path, "sdist": path}``: from KAFKAWIRE_DIST, or built here."""
    given = os.environ.get("KAFKAWIRE_DIST")
    if given:
        folder = Path(given)
    else:
        if not request.config.getoption("--runslow"):
            pytest.skip("builds the sdist and a wheel (a minute or two): run with --runslow, "
                        "or through scripts/test.sh")
        folder = tmp_path_factory.mktemp("dist")
        env = dict(os.environ, KAFKAWIRE_REQUIRE_EXTENSIONS="1")
        proc = subprocess.run([sys.executable, "-m", "build", "--outdir", str(folder), str(ROOT)],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert proc.returncode == 0, proc.stdout.decode()[-5000:]
    wheels = sorted(folder.glob("kafkawire-*.whl"))
    sdists = sorted(folder.glob("kafkawire-*.tar.gz"))
    assert wheels and sdists, f"no wheel or sdist in {folder}"
    return {"wheel": wheels[-1], "sdist": sdists[-1]}


def _wheel_names(wheel: Path) -> List[str]:
    with zipfile.ZipFile(wheel) as z:
        return z.namelist()


def test_wheel_holds_compiled_kernels_and_sources_not_build_inputs(dist) -> None:
    names = _wheel_names(dist["wheel"])
    size = dist["wheel"].stat().st_size
    print(f"\n{dist['wheel'].name}: {size / 1e6:.2f} MB, {len(names)} files")
    fast = [n for n in names if n.startswith("kafkawire/_fast/")]
    for module in _kernels.MODULES:
        assert any(n.startswith(f"kafkawire/_fast/{module}.") and n.endswith((".so", ".pyd")) for n in fast), \
            f"compiled kernel {module} missing from the wheel"
    inputs = [n for n in names if n.endswith(BUILD_INPUTS)]
    assert not inputs, f"build inputs in the wheel: {inputs}"
    assert "kafkawire/_fast/BUILD-NOTE.txt" not in names, "the wheel was built without its kernels"
    sources = {p.relative_to(ROOT).as_posix() for p in (ROOT / "kafkawire").rglob("*.py")}
    sources.add("pyspark_kafkawire.py")
    assert sources - set(names) == set(), "Python sources missing from the wheel"
    stubs = {p.relative_to(ROOT).as_posix() for p in (ROOT / "kafkawire").rglob("*.pyi")}
    assert stubs - set(names) == set(), "type stubs missing from the wheel"
    assert "kafkawire/py.typed" in names


def test_wheel_metadata_is_what_the_package_index_shows(dist) -> None:
    with zipfile.ZipFile(dist["wheel"]) as z:
        meta_name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        meta = email.parser.Parser().parsestr(z.read(meta_name).decode("utf-8"))
        licenses = [n for n in z.namelist() if ".dist-info/licenses/" in n]
    assert meta["License-Expression"] == "Apache-2.0"
    assert licenses, "the license file is not in the wheel"
    assert meta["Requires-Python"] == ">=3.9"
    assert meta["Description-Content-Type"] == "text/markdown"
    body = meta.get_payload()
    assert body.strip().startswith("<!-- docs-test: sample -->\n# kafkawire") and len(body.splitlines()) < 260
    classifiers = meta.get_all("Classifier")
    for wanted in ("Typing :: Typed", "Programming Language :: Python :: 3.14",
                   "Programming Language :: Python :: 3.9", "Programming Language :: Cython"):
        assert wanted in classifiers
    assert not any(c.startswith("License ::") for c in classifiers), "PEP 639: the license is an expression"
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL"))
    assert {"Homepage", "Documentation", "Source", "Issues", "Changelog"} <= set(urls)
    assert "kafkawire" in meta["Summary"].lower() or "kafka" in meta["Summary"].lower()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="auditwheel checks Linux wheels")
def test_auditwheel_accepts_the_linux_wheel(dist) -> None:
    auditwheel = shutil.which("auditwheel", path=os.path.dirname(sys.executable)) or shutil.which("auditwheel")
    if auditwheel is None:
        pytest.fail("auditwheel is missing: pip install auditwheel (it is in the test extra)")
    proc = subprocess.run([auditwheel, "show", str(dist["wheel"])], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT)
    out = " ".join(proc.stdout.decode().split())
    print(out)
    assert proc.returncode == 0, out
    assert "is consistent with the following platform tag" in out, out
    assert '"manylinux_' in out, out


def test_sdist_holds_what_a_build_from_source_needs(dist) -> None:
    with tarfile.open(dist["sdist"]) as t:
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    for pyx in (ROOT / "kafkawire" / "_fast").glob("*.pyx"):
        assert f"kafkawire/_fast/{pyx.name}" in names
        assert f"kafkawire/_fast/{pyx.stem}.c" in names, f"generated {pyx.stem}.c missing from the sdist"
    for other in ("setup.py", "pyproject.toml", "MANIFEST.in", "LICENSE", "README.md", "CHANGELOG.md",
                  "mkdocs.yml", "pyspark_kafkawire.py", "docs/index.md", "tests/conftest.py"):
        assert other in names, f"{other} missing from the sdist"
    assert not [n for n in names if n.endswith((".so", ".pyd", ".pyc"))]


def _install_sdist(sdist: Path, target: Path, env_extra: Dict[str, str]) -> str:
    """pip install the sdist into ``target`` (no dependencies: this environment has them)."""
    nothing = target.parent / "empty-bin"
    nothing.mkdir(exist_ok=True)
    env = dict(os.environ, **env_extra)
    env["PATH"] = str(nothing)          # no gcc, cc or clang to be found
    env.pop("KAFKAWIRE_REQUIRE_EXTENSIONS", None)
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "-v", "--no-deps", "--no-cache-dir",
                           "--target", str(target), str(sdist)],
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=900)
    out = proc.stdout.decode("utf-8", "replace")
    assert proc.returncode == 0, out[-5000:]
    return out


_PROBE = r"""
import warnings
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
    import kafkawire
from kafkawire.records import BatchBuilder
b = BatchBuilder(2, "gzip")
b.append(b"value", key=b"key", timestamp=1)
records = [r for batch in kafkawire.iter_batches(b.build(), verify_crc=True) for r in batch]
assert [(r.key, r.value) for r in records] == [(b"key", b"value")]
print("backend", kafkawire.backend, kafkawire.__file__)
for w in caught:
    print("warning", w.category.__name__, w.message)
"""


def _probe(target: Path) -> str:
    env = dict(os.environ, PYTHONPATH=str(target))
    env.pop("KAFKAWIRE_BACKEND", None)
    proc = subprocess.run([sys.executable, "-c", _PROBE], env=env, cwd=str(target.parent),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = proc.stdout.decode()
    assert proc.returncode == 0, out
    assert str(target) in out, f"kafkawire was not imported from {target}:\n{out}"
    return out


def test_sdist_installs_without_a_compiler_as_pure_python(dist, tmp_path) -> None:
    target = tmp_path / "site"
    _install_sdist(dist["sdist"], target, {"KAFKAWIRE_NO_EXTENSIONS": "1"})
    assert not list(target.rglob("*.so")) and not list(target.rglob("*.pyx"))
    note = target / "kafkawire" / "_fast" / "BUILD-NOTE.txt"
    assert "KAFKAWIRE_NO_EXTENSIONS=1" in note.read_text()
    out = _probe(target)
    assert "backend pure" in out
    assert "warning PureBackendWarning" in out and "KAFKAWIRE_NO_EXTENSIONS=1" in out, out


def test_a_build_that_cannot_compile_says_so(dist, tmp_path) -> None:
    target = tmp_path / "site"
    out = _install_sdist(dist["sdist"], target, {"CC": "/nonexistent/cc", "CXX": "/nonexistent/c++",
                                                 "LDSHARED": "/nonexistent/cc -shared"})
    assert "kafkawire: the compiled kernels were NOT built" in out, out[-3000:]
    note = (target / "kafkawire" / "_fast" / "BUILD-NOTE.txt").read_text()
    assert "compiling failed" in note
    probe = _probe(target)
    assert "backend pure" in probe
    assert "warning PureBackendWarning" in probe and "compiling failed" in probe, probe


def test_the_wheel_smoke_subset_exists() -> None:
    """cibuildwheel runs these files against every wheel; a rename must update pyproject.toml."""
    text = (ROOT / "pyproject.toml").read_text()
    command = next(line for line in text.splitlines() if line.startswith("test-command"))
    files = [w for w in command.split() if w.startswith("tests/")]
    assert len(files) >= 5
    missing = [f for f in files if not (ROOT / f.strip('"')).is_file()]
    assert not missing, f"pyproject.toml's cibuildwheel test-command names missing files: {missing}"
