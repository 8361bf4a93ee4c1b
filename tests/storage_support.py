"""Helpers shared by the object-storage tests (S3 through moto, GCS through an emulator)."""
from __future__ import annotations

import io
import os
from contextlib import redirect_stderr, redirect_stdout
from typing import Any, List, Sequence, Tuple

from kafkawire.log import Log


def cli(*argv: str) -> Tuple[int, str, str]:
    """Run ``kafkawire ARGV`` in this process: ``(exit status, stdout, stderr)``."""
    from kafkawire.cli.main import main
    out, errs = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(errs):
        code = main(list(argv))
    return code, out.getvalue(), errs.getvalue()


def records(log: Log) -> list:
    """A log's records as comparable tuples."""
    return [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in log.records()]


def assert_logs_like_local(remote: Any, local: Any, scheme: str) -> None:
    """Two ``LogDir``s, one read from ``scheme`` URLs, hold the same partitions and records."""
    assert sorted(remote.logs) == sorted(local.logs) and len(local) > 5
    for key in local.logs:
        r, lo = remote.logs[key], local.logs[key]
        assert r.path.startswith(scheme)
        assert (r.start_offset, r.next_offset) == (lo.start_offset, lo.next_offset)
        assert records(r) == records(lo), key
        assert ([(x.offset, x.value) for x in r.records(isolation="read_committed")]
                == [(x.offset, x.value) for x in lo.records(isolation="read_committed")])
        mid = (lo.start_offset + lo.next_offset) // 2
        assert r.locate(mid)[1] == lo.locate(mid)[1]
        assert r.verify().ok == lo.verify().ok


def folder_commands(logdirs: str) -> List[List[str]]:
    """Reading commands over ``{R}`` (the log.dirs folder): a folder, a partition, a segment
    and its indexes, lookups by offset and timestamp."""
    part = sorted(n for n in os.listdir(logdirs) if n.startswith("orders-"))[0]
    seg = sorted(n for n in os.listdir(os.path.join(logdirs, part)) if n.endswith(".log"))[0]
    with Log.open(os.path.join(logdirs, part)) as lo:
        recs = list(lo.records())
    ts = str(recs[len(recs) // 2].timestamp)
    return [["stats", "--no-progress", "{R}"], ["verify", "--no-progress", "{R}"],
            ["dump", "--files", f"{{R}}/{part}/{seg}", "--print-data-log", "--no-progress"],
            ["dump", "--files", f"{{R}}/{part}/{seg[:-4]}.index", f"{{R}}/{part}/{seg[:-4]}.timeindex",
             "--no-progress"],
            ["find", f"{{R}}/{part}", "--offset", "7"],
            ["find", f"{{R}}/{part}", "--timestamp", ts, "--json"],
            ["stats", "--json", "--no-progress", f"{{R}}/{part}"]]


def assert_cli_like_local(url: str, logdirs: str, commands: Sequence[Sequence[str]]) -> None:
    """Each command run on ``url`` exits 0 and prints what it prints for the local copy."""
    for argv in commands:
        got = cli(*[a.replace("{R}", url) for a in argv])
        want = cli(*[a.replace("{R}", logdirs) for a in argv])
        assert got[0] == want[0] == 0, (argv, got, want)
        assert got[1].replace(url, "{R}") == want[1].replace(logdirs, "{R}"), argv
        assert got[2].replace(url, "{R}") == want[2].replace(logdirs, "{R}"), argv
