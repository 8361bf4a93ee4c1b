"""Shared start-up for the atheris targets in this folder.

Each target is run as ``python tests/fuzz/fuzz_X.py -max_total_time=N [corpus_dir]``
(libFuzzer flags).  The corpus folder gets the target's seeds first; the compiled
kernels are used (the Python front ends are instrumented, the kernels are not: the
fuzzer is steered by the Python paths they lead to and by the seeds).
"""
from __future__ import annotations

import os
import sys
from typing import Callable, Iterable

import atheris


def main(one_input: Callable[[bytes], None], seeds: Iterable[bytes]) -> None:
    args = list(sys.argv)
    corpus = [a for a in args[1:] if not a.startswith("-")]
    if corpus:
        os.makedirs(corpus[0], exist_ok=True)
        for i, seed in enumerate(seeds):
            with open(os.path.join(corpus[0], f"seed-{i}"), "wb") as f:
                f.write(seed)
    from kafkawire import _kernels
    _kernels.use(os.environ.get("KAFKAWIRE_BACKEND", "fast"))
    atheris.Setup(args, one_input)
    atheris.Fuzz()
