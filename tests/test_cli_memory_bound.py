"""Under a 2 GiB address-space limit, ``verify --deep`` and ``dump --deep-iteration`` on every
hostile file finish with exit status 0 or 1 and at most one-line messages: never a
traceback, a MemoryError, a kill or a hang.

The files: the hostile samples (``fuzz.samples.hostile``), decompression bombs of every
codec that can make one (``fuzz.samples.bombs`` plus zstd and lz4), the legacy-wrapper
cases and damaged copies of the valid seeds; and hostile index files beside a valid log
(sparse 40 GiB indexes, indexes that are /dev/zero, a FIFO or a folder, truncated and
garbage ones).  The commands run in a child process with ``RLIMIT_AS`` set (``ulimit
-v``), each file through the CLI's own ``main``, on the active backend (the decoders'
twins agree by the hypothesis suites); each hostile index case has a child of its own
with a deadline, so a read that blocks fails the test instead of hanging it.
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
for tag, argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    with open(os.devnull, "w") as null:
        try:
            with contextlib.redirect_stdout(null), contextlib.redirect_stderr(err):
                rc = main(argv)
        except BaseException as e:
            rc = "raised " + type(e).__name__ + ": " + str(e)[:200]
    print(json.dumps({{"tag": tag, "argv": argv, "rc": rc, "err": err.getvalue()}}), flush=True)
"""


def _run_limited(jobs, backend, timeout):
    """Run ``(tag, argv)`` CLI jobs in one child under the address-space limit; the child's
    process result (stdout: one JSON line per job)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(kafkawire.__file__)))
    env = dict(os.environ, KAFKAWIRE_BACKEND=backend, OPENBLAS_NUM_THREADS="1",
               OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-W", "ignore", "-c",
                           textwrap.dedent(DRIVER.format(limit=LIMIT)), json.dumps(jobs)],
                          capture_output=True, text=True, env=env, timeout=timeout)


@pytest.mark.one_backend
def test_verify_and_dump_stay_within_2gib(hostile_logs, backend):
    jobs = []
    for d in hostile_logs:
        tag = os.path.basename(d)
        jobs.append((tag, ["verify", "--deep", "--no-progress", d]))
        jobs.append((tag, ["dump", "--deep-iteration", "--print-data-log",
                           "--files", os.path.join(d, "00000000000000000000.log")]))
    proc = _run_limited(jobs, backend, 900)
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
    verdict = {(r["tag"], r["argv"][0]): r for r in results}
    for name in ("gzip-bomb-v2-0", "gzip-bomb-v1-0", "nested-bomb-v1-0", "nested-bomb-deep-v1-0",
                 "lz4-bomb-0"):
        assert verdict[(name, "verify")]["rc"] == 1, verdict[(name, "verify")]


# ------------------------------------------------------------------ hostile index files

TS = 1_700_000_000_000
INDEX_SUFFIXES = (".index", ".timeindex", ".txnindex")


def _garbage(path, rnd):
    size = os.path.getsize(path) or 4096
    with open(path, "wb") as f:
        f.write(bytes(rnd.randrange(256) for _ in range(size)))


def _fill(path, byte):
    size = max(os.path.getsize(path), 4096)
    with open(path, "wb") as f:
        f.write(bytes([byte]) * size)


def _replace(path, how):
    os.remove(path)
    how(path)


#: case name -> (suffix of the file made hostile, what is done to it)
INDEX_CASES = {
    "sparse-index": (".index", lambda p, r: os.truncate(p, 40 << 30)),
    "sparse-timeindex": (".timeindex", lambda p, r: os.truncate(p, 40 << 30)),
    "sparse-txnindex": (".txnindex", lambda p, r: os.truncate(p, 40 << 30)),
    "devzero-index": (".index", lambda p, r: _replace(p, lambda q: os.symlink("/dev/zero", q))),
    "devzero-timeindex": (".timeindex",
                          lambda p, r: _replace(p, lambda q: os.symlink("/dev/zero", q))),
    "fifo-index": (".index", lambda p, r: _replace(p, os.mkfifo)),
    "fifo-timeindex": (".timeindex", lambda p, r: _replace(p, os.mkfifo)),
    "folder-index": (".index", lambda p, r: _replace(p, os.mkdir)),
    "truncated-index": (".index", lambda p, r: os.truncate(p, os.path.getsize(p) - 3)),
    "truncated-timeindex": (".timeindex", lambda p, r: os.truncate(p, os.path.getsize(p) - 5)),
    "garbage-index": (".index", _garbage),
    "garbage-timeindex": (".timeindex", _garbage),
    "garbage-txnindex": (".txnindex", _garbage),
    "ff-index": (".index", lambda p, r: _fill(p, 0xFF)),
    "ff-timeindex": (".timeindex", lambda p, r: _fill(p, 0xFF)),
}


@pytest.fixture(scope="module")
def hostile_index_logs(tmp_path_factory):
    """One partition per case: three segments written by LogWriter (with an aborted
    transaction, so there is a .txnindex), the first segment's file made hostile."""
    from kafkawire import LogWriter

    root = tmp_path_factory.mktemp("hostile-index")
    rnd = random.Random(11)
    out = {}
    for case, (suffix, damage) in INDEX_CASES.items():
        d = root / f"{case}-0"
        with LogWriter(str(d), segment_bytes=16 * 1024, index_interval_bytes=1024) as w:
            for b in range(40):
                if b == 3:
                    w.append_records([{"value": b"t", "timestamp": TS}], producer_id=7,
                                     producer_epoch=0, base_sequence=0, is_transactional=True)
                    w.append_control("abort", producer_id=7, producer_epoch=0, timestamp=TS)
                w.append_records([{"key": b"k%d" % i, "value": b"v" * 50,
                                   "timestamp": TS + b * 100 + i} for i in range(20)])
        first = sorted(n for n in os.listdir(d) if n.endswith(".log"))[0][:-4]
        target = str(d / (first + suffix))
        if not os.path.lexists(target):
            open(target, "wb").close()
        damage(target, rnd)
        out[case] = (str(d), target)
    return out


@pytest.mark.one_backend
@pytest.mark.parametrize("case", sorted(INDEX_CASES))
def test_hostile_index_files_stay_within_2gib(hostile_index_logs, backend, case):
    d, target = hostile_index_logs[case]
    log = target[:target.rindex(".")] + ".log"
    jobs = [(case, argv) for argv in (
        ["verify", "--deep", "--no-progress", d],
        ["dump", "--deep-iteration", "--no-progress", "--files", target],
        ["dump", "--deep-iteration", "--print-data-log", "--no-progress", "--files", log],
        ["find", d, "--offset", "300"])]
    try:
        proc = _run_limited(jobs, backend, 180)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{case}: the commands hung (no answer in {exc.timeout} s): {exc.stdout!r}")
    assert proc.returncode == 0, (case, proc.returncode, proc.stderr[-3000:])
    results = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(results) == 4, (case, proc.stdout, proc.stderr[-2000:])
    for r in results:
        lines = [line for line in r["err"].splitlines() if line.strip()]
        assert r["rc"] in (0, 1) and "Traceback" not in r["err"], (case, r)
        assert all(len(line) < 2000 for line in lines), (case, r)
    verify, dump_index, dump_log, find = results
    # the damage is reported, and only the damaged file is: the log itself is readable
    assert verify["rc"] == 1, (case, verify)
    # dumping the damaged file: Kafka's listing (with its mismatch report) or one line naming it
    if dump_index["rc"] == 1:
        dump_lines = [line for line in dump_index["err"].splitlines() if line.strip()]
        assert len(dump_lines) == 1 and target in dump_lines[0], (case, dump_index)
    assert dump_log["rc"] == 0 and not dump_log["err"].strip(), (case, dump_log)
    assert find["rc"] == 0, (case, find)
