"""Type checking: kafkawire's public API as mypy sees it.

``tests/typing/*.py`` are small programs written against the public API, with
``reveal_type`` on each main entry point.  Against the source tree, ``mypy``
runs with the project's configuration (``[tool.mypy]`` in pyproject.toml:
``strict`` over the public front-end modules and those programs); against an
installed wheel, on the programs only, so what is checked is what a user's
editor sees (``py.typed`` and the shipped stubs).  No error may be reported,
and no revealed type may be ``Any``.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import List, Tuple

import pytest

import kafkawire

pytest.importorskip("mypy")

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = sorted((ROOT / "tests" / "typing").glob("*.py"))
# Against the source tree (not an installed wheel) the whole configured check runs.
FROM_SOURCE = Path(kafkawire.__file__).resolve().parent.parent == ROOT

pytestmark = pytest.mark.one_backend

_NOTE = re.compile(r'^(?P<file>[^:]+):(?P<line>\d+): note: Revealed type is "(?P<type>.*)"$')
_ERROR = re.compile(r"^[^:]+:\d+: error: ")


def _run_mypy(tmp_path: Path) -> Tuple[List[str], List[Tuple[str, str]]]:
    """Run mypy; return (error lines, [(where, revealed type)])."""
    cmd = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
           "--cache-dir", str(tmp_path / "mypy-cache"), "--no-error-summary",
           "--python-executable", sys.executable]
    if FROM_SOURCE:
        cwd = ROOT                       # checks [tool.mypy] files: the front end and the samples
    else:
        cwd = tmp_path                   # the installed package, as a user's program sees it
        cmd += [str(p) for p in SAMPLES]
    env = dict(os.environ, MYPY_FORCE_COLOR="0")
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env, timeout=600)
    lines = proc.stdout.splitlines()
    errors = [ln for ln in lines if _ERROR.match(ln)]
    if proc.returncode not in (0, 1) or (proc.returncode == 1 and not errors):
        pytest.fail(f"mypy did not run (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    notes = []
    for ln in lines:
        m = _NOTE.match(ln)
        if m:
            notes.append((f"{Path(m['file']).name}:{m['line']}", m["type"]))
    return errors, notes


def _has_any(revealed: str) -> bool:
    """True when the revealed type is, or returns, or contains ``Any``.

    For a function only the return type counts (parameters typed ``Any`` say
    the function accepts anything, which is a fact, not a hole).
    """
    if revealed.startswith(("def ", "Overload(")):
        revealed = revealed.rsplit("->", 1)[-1]
    return re.search(r"\bAny\b", revealed) is not None


@pytest.fixture(scope="module")
def mypy_result(tmp_path_factory: pytest.TempPathFactory) -> Tuple[List[str], List[Tuple[str, str]]]:
    return _run_mypy(tmp_path_factory.mktemp("mypy"))


def test_samples_exist() -> None:
    assert SAMPLES, "tests/typing/ holds the typed sample programs"


def test_mypy_strict_reports_no_error(mypy_result: Tuple[List[str], list]) -> None:
    errors, _ = mypy_result
    assert not errors, "mypy --strict found errors:\n" + "\n".join(errors)


def test_revealed_types_are_never_any(mypy_result: Tuple[list, List[Tuple[str, str]]]) -> None:
    _, notes = mypy_result
    assert len(notes) >= 40, f"expected the samples' reveal_type notes, got {len(notes)}"
    holes = [f"{where}: {t}" for where, t in notes if _has_any(t)]
    assert not holes, "these entry points type as Any:\n" + "\n".join(holes)


def test_main_entry_points_have_their_types(mypy_result: Tuple[list, List[Tuple[str, str]]]) -> None:
    revealed = "\n".join(t for _, t in mypy_result[1])
    for name in ("kafkawire._fast.records.Record", "kafkawire.records.batch.RecordBatch",
                 "kafkawire.records.legacy.LegacyBatch", "kafkawire.log.log.Log",
                 "kafkawire.log.logdir.LogDir", "kafkawire.log.segment.Segment",
                 "kafkawire.log.writer.LogWriter", "kafkawire.records.builder.BatchBuilder",
                 "kafkawire.client.client.Client", "kafkawire.records.iterate.BatchIterator",
                 "kafkawire.protocol.messages.metadata.MetadataRequest"):
        assert name in revealed, f"{name} never revealed"


def test_samples_run() -> None:
    """The samples are real programs: they run against the package under test."""
    env = dict(os.environ)
    if FROM_SOURCE:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    for sample in SAMPLES:
        proc = subprocess.run([sys.executable, str(sample)], capture_output=True, text=True,
                              env=env, timeout=300)
        assert proc.returncode == 0, f"{sample.name} failed:\n{proc.stdout}\n{proc.stderr}"


def test_pyright_sees_the_same_types(tmp_path: Path) -> None:
    """pyright (basedpyright's build of it) reports no error on the samples and reveals
    no entry point as Unknown or Any."""
    pytest.importorskip("basedpyright")
    config = {"typeCheckingMode": "standard", "pythonVersion": "3.10",
              "reportMissingModuleSource": False}
    if FROM_SOURCE:
        config["extraPaths"] = [str(ROOT)]
    (tmp_path / "pyrightconfig.json").write_text(json.dumps(config))
    proc = subprocess.run([sys.executable, "-m", "basedpyright", "-p", str(tmp_path / "pyrightconfig.json"),
                           "--pythonpath", sys.executable, *map(str, SAMPLES)],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    out = proc.stdout
    assert proc.returncode == 0 and re.search(r"^0 errors", out, re.M), out[-4000:]
    revealed = re.findall(r'information: Type of "(.*?)" is "(.*)"$', out, re.M)
    assert len(revealed) >= 40, out[-2000:]
    holes = [f"{expr}: {t}" for expr, t in revealed
             if "Unknown" in t or _has_any(t.rsplit("->", 1)[-1] if t.startswith("(") else t)]
    assert not holes, "pyright sees these as Unknown/Any:\n" + "\n".join(holes)


@pytest.mark.skipif(not FROM_SOURCE, reason="checks the source tree's generated stubs")
def test_protocol_stubs_are_current() -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_protocol_stubs.py"), "--check"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
