"""A byte-count progress bar on stderr, drawn only when stderr is a terminal."""
from __future__ import annotations

import os
import sys
import time
from typing import Optional, Sequence, TextIO

from kafkawire.log.storage import storage_for


_active: "Optional[Progress]" = None


def total_size(files: Sequence[str]) -> int:
    """The bytes a progress bar over ``files`` counts (files that cannot be sized count 0)."""
    total = 0
    for f in files:
        try:
            total += storage_for(f).size(f)
        except OSError:
            pass
    return total


def clear_active() -> None:
    """Erase the bar being drawn, if any (before writing to the terminal)."""
    if _active is not None:
        _active.clear()


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


class Progress:
    """``Progress(total_bytes)``; call :meth:`advance` as bytes are scanned, :meth:`close` at the end.

    Disabled (every call a no-op) unless ``enabled`` is true, or, when
    ``enabled`` is None, unless the stream is a TTY and ``KAFKAWIRE_NO_PROGRESS``
    is unset.  Redraws at most ten times a second and erases itself on close,
    so it never mixes with output on stdout or with piped stderr.
    """

    def __init__(self, total: int, label: str = "", *, stream: Optional[TextIO] = None,
                 enabled: Optional[bool] = None, min_total: int = 0) -> None:
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            isatty = getattr(self.stream, "isatty", None)
            enabled = bool(isatty and isatty()) and not os.environ.get("KAFKAWIRE_NO_PROGRESS")
        self.enabled = enabled and total > min_total
        self.total = max(total, 1)
        self.done = 0
        self.label = label
        self._start = time.monotonic()
        self._last = 0.0
        self._drawn = False
        global _active
        if self.enabled:
            _active = self

    def set_label(self, label: str) -> None:
        self.label = label
        self._draw()

    def advance(self, nbytes: int) -> None:
        self.done += nbytes
        if self.enabled and time.monotonic() - self._last >= 0.1:
            self._draw()

    def render(self, width: int = 30) -> str:
        frac = min(self.done / self.total, 1.0)
        filled = int(frac * width)
        elapsed = max(time.monotonic() - self._start, 1e-9)
        rate = self.done / elapsed
        label = self.label if len(self.label) <= 40 else "…" + self.label[-39:]
        return (f"[{'#' * filled}{'.' * (width - filled)}] {frac * 100:5.1f}% "
                f"{_fmt_bytes(self.done)}/{_fmt_bytes(self.total)} {_fmt_bytes(rate)}/s {label}")

    def _draw(self) -> None:
        if not self.enabled:
            return
        self._last = time.monotonic()
        self.stream.write("\r\x1b[K" + self.render())
        self.stream.flush()
        self._drawn = True

    def clear(self) -> None:
        """Erase the bar (before other output on the terminal); the next update redraws it."""
        if self.enabled and self._drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._drawn = False
            self._last = 0.0

    def close(self) -> None:
        if self.enabled and self._drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
        self.enabled = False
        global _active
        if _active is self:
            _active = None

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
