"""Replacing segments crash-safely: Kafka's ``.cleaned`` -> ``.swap`` protocol and its recovery.

A compaction writes the replacement segment as ``<base>.log.cleaned`` (and
``.index.cleaned``, ``.timeindex.cleaned``, ``.txnindex.cleaned``), renames
each file to ``.swap``, renames the replaced segments' files to ``.deleted``,
then renames each ``.swap`` to its final name.  A crash can stop this at any
step; :func:`complete_interrupted_swaps` brings the folder back as Kafka's
``LogLoader`` does when a broker starts:

1. ``.deleted`` files are removed; ``.cleaned`` files are removed, and with
   them every ``.swap`` file whose base offset is at or above the smallest
   ``.cleaned`` one (a swap that was still being renamed: rolled back);
2. for the remaining ``.log.swap`` files, every other file whose name starts
   with an offset in ``[swap base, swap next offset)`` is removed (the
   segments the swap replaces, not yet renamed ``.deleted``);
3. every ``.swap`` file is renamed to its final name (the swap completed).

Either the old segments or the cleaned one survive whole, so no record is lost.
"""
from __future__ import annotations

import logging
import os
from typing import Callable, List, Optional, Sequence, Tuple

from kafkawire import _kernels as K
from kafkawire import _scan_common as C
from kafkawire.log.files import fsync_dir

log = logging.getLogger("kafkawire.log.swap")

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETED_SUFFIX = ".deleted"

#: Called with the name of each step of a swap as it completes (tests inject crashes here).
StepHook = Optional[Callable[[str], None]]


def _offset_from_name(name: str) -> Optional[int]:
    """Kafka's ``offsetFromFile``: the digits before the name's first dot, else None."""
    dot = name.find(".")
    if dot <= 0:
        return None
    try:
        return int(name[:dot])
    except ValueError:
        return None


def _swap_next_offset(path: str, base: int) -> int:
    """The next offset after the last complete batch of a ``.log.swap`` file."""
    with open(path, "rb") as f:
        data = f.read()
    rows = K.scan_batches(data, 0, len(data), -1, False)[0]
    return int(rows[-1, C.LAST_OFFSET]) + 1 if len(rows) else base


def complete_interrupted_swaps(folder: str, apply: bool = True) -> List[str]:
    """Finish or roll back segment replacements a crash interrupted (see the module
    docstring); a line per file removed or renamed (to be, when ``apply`` is False), empty
    when there is nothing to do.  The caller holds the folder's lock to apply."""
    names = sorted(n for n in os.listdir(folder) if os.path.isfile(os.path.join(folder, n)))
    removals: List[Tuple[str, str]] = []     # (name, why)
    cleaned: List[str] = []
    swaps: List[str] = []
    min_cleaned: Optional[int] = None
    for name in names:
        if name.endswith(DELETED_SUFFIX):
            removals.append((name, "left by a deletion"))
        elif name.endswith(CLEANED_SUFFIX):
            off = _offset_from_name(name)
            if off is not None:
                min_cleaned = off if min_cleaned is None else min(min_cleaned, off)
            cleaned.append(name)
        elif name.endswith(SWAP_SUFFIX):
            swaps.append(name)
    valid = []
    for name in swaps:
        off = _offset_from_name(name)
        if min_cleaned is not None and off is not None and off >= min_cleaned:
            removals.append((name, "its replacement was unfinished"))
        else:
            valid.append(name)
    removals.extend((name, "an unfinished replacement") for name in cleaned)
    lo: Optional[int] = None
    hi: Optional[int] = None
    for name in valid:
        base = _offset_from_name(name)
        if name[:-len(SWAP_SUFFIX)].endswith(".log") and base is not None:
            nxt = _swap_next_offset(os.path.join(folder, name), base)
            lo = base if lo is None else min(lo, base)
            hi = nxt if hi is None else max(hi, nxt)
    if lo is not None and hi is not None:
        gone = {n for n, _ in removals}
        for name in names:
            off = _offset_from_name(name)
            if (name not in gone and not name.endswith(SWAP_SUFFIX) and off is not None
                    and lo <= off < hi):
                removals.append((name, "replaced by a finished compaction"))
    actions = [f"remove {n} ({why})" for n, why in removals]
    actions += [f"rename {n} to {n[:-len(SWAP_SUFFIX)]}" for n in valid]
    if apply and actions:
        for name, _ in removals:
            os.remove(os.path.join(folder, name))
        for name in valid:
            os.replace(os.path.join(folder, name), os.path.join(folder, name[:-len(SWAP_SUFFIX)]))
        fsync_dir(folder)
        for line in actions:
            log.info("%s: %s", folder, line)
    return actions


def replace_segments(folder: str, new_files: Sequence[str], old_files: Sequence[Sequence[str]],
                     hook: StepHook = None) -> None:
    """Swap the ``.cleaned`` files ``new_files`` in for the old segments' files, step by
    step as Kafka's ``LocalLog.replaceSegments`` does; ``.deleted`` files are removed last."""
    def step(name: str) -> None:
        if hook is not None:
            hook(name)

    swapped = []
    for path in new_files:
        target = path[:-len(CLEANED_SUFFIX)] + SWAP_SUFFIX
        os.replace(path, target)
        swapped.append(target)
        step(f"swap {os.path.basename(target)}")
    fsync_dir(folder)
    deleted = []
    for files in old_files:
        for path in files:
            os.replace(path, path + DELETED_SUFFIX)
            deleted.append(path + DELETED_SUFFIX)
            step(f"delete {os.path.basename(path)}")
    for path in swapped:
        os.replace(path, path[:-len(SWAP_SUFFIX)])
        step(f"rename {os.path.basename(path)}")
    fsync_dir(folder)
    for path in deleted:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
        step(f"remove {os.path.basename(path)}")
