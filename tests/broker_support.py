"""Helpers for the broker's operational tests (lifecycle, crash, connections)."""
from __future__ import annotations

import subprocess
import sys
import time
from typing import Callable

#: Generous waits: the tests must pass on a loaded machine.
WAIT = 120.0


def wait_until(pred: Callable[[], object], timeout: float = WAIT) -> bool:
    """Poll ``pred`` until it is true (True) or ``timeout`` seconds pass (False)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)
    return False


def verify_clean(log_dir: str) -> None:
    """``kafkawire verify`` reports no problem in ``log_dir``."""
    p = subprocess.run([sys.executable, "-m", "kafkawire.cli", "verify", "--no-progress", log_dir],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
