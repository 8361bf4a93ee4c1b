"""Under a 2 GiB address-space limit, ``verify --deep`` and ``dump --deep-iteration`` on every
hostile file finish with exit status 0 or 1 and at most one-line messages: never a
traceback, a MemoryError or a kill.

The files: the hostile samples (``fuzz.samples.hostile``), decompression bombs of every
codec that can make one (``fuzz.samples.bombs`` plus zstd and lz4), the legacy-wrapper
cases and damaged copies of the valid seeds.  The commands run in a child process
with ``RLIMIT_AS`` set (``ulimit -v``), each file through the CLI's own ``main``, on
the active backend (the decoders' twins agree by the hypothesis suites).
"""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap

import pytest

import kafkawire
from kafkawire import compression

from fuzz import samples as S

LIMIT = 2 << 30


def _hostile_files():
    files = list(S.hostile()) + list(S.bombs())
    zeros = bytes(300 << 20)
    recs = [S.v2_record(0, 0, None, b"x")]
    if compression.available("zstd"):
        files.append(("zstd_bomb", S.v2_batch(recs, attributes=4, count=1,
                                              payload=compression.compress("zstd", zeros))))
    files.append(("lz4_bomb", S.v2_batch(recs, attributes=3, count=1,
                                         payload=compression.compress("lz4", zeros))))
    del zeros
    rnd = random.Random(7)
    for i, seed in enumerate(S.seeds()):
        for j in range(3):
            bad = bytearray(seed)
            for _ in range(1 + j):
                bad[rnd.randrange(len(bad))] ^= 1 << rnd.randrange(8)
            files.append((f"seed{i}_flip{j}", bytes(bad)))
        files.append((f"seed{i}_cut", seed[:len(seed) // 2]))
    return files


@pytest.fixture(scope="module")
def hostile_logs(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    names = []
    for name, data in _hostile_files():
        d = root / f"{name.replace('_', '-')}-0"
        d.mkdir()
        (d / "00000000000000000000.log").write_bytes(data)
        names.append(str(d))
    return names


DRIVER = """
import contextlib, io, json, os, resource, sys
resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
from kafkawire.cli import main
for d in json.loads(sys.argv[1]):
    for argv in (["verify", "--deep", "--no-progress", d],
                 ["dump", "--deep-iteration", "--print-data-log",
                  "--files", os.path.join(d, "00000000000000000000.log")]):
        err = io.StringIO()
        with open(os.devnull, "w") as null:
            try:
                with contextlib.redirect_stdout(null), contextlib.redirect_stderr(err):
                    rc = main(argv)
            except BaseException as e:
                rc = "raised " + type(e).__name__ + ": " + str(e)[:200]
        print(json.dumps({{"argv": argv[:2], "dir": d, "rc": rc, "err": err.getvalue()}}),
              flush=True)
"""


@pytest.mark.one_backend
def test_verify_and_dump_stay_within_2gib(hostile_logs, backend):
    import kafkawire as kw
    root = os.path.dirname(os.path.dirname(os.path.abspath(kw.__file__)))
    env = dict(os.environ, KAFKAWIRE_BACKEND=backend, OPENBLAS_NUM_THREADS="1",
               OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-W", "ignore", "-c",
                           textwrap.dedent(DRIVER.format(limit=LIMIT)), json.dumps(hostile_logs)],
                          capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-3000:])
    results = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(results) == 2 * len(hostile_logs)
    bad = [r for r in results if r["rc"] not in (0, 1) or "Traceback" in r["err"]]
    assert not bad, bad[:5]
    for r in results:
        lines = [line for line in r["err"].splitlines() if line.strip()]
        # what went wrong is said in one line per problem, each naming the file
        assert all(len(line) < 2000 for line in lines), r
    # the bombs were refused, not inflated
    verdict = {(os.path.basename(r["dir"]), r["argv"][0]): r for r in results}
    for name in ("gzip-bomb-v2-0", "gzip-bomb-v1-0", "nested-bomb-v1-0", "nested-bomb-deep-v1-0",
                 "lz4-bomb-0"):
        assert verdict[(name, "verify")]["rc"] == 1, verdict[(name, "verify")]
