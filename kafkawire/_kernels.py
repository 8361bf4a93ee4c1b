"""Chooses the kernel backend once, at import, and exposes its functions.

Both backends are packages with the same module names (``MODULES``); each
module lists its public kernels in ``__all__``.  This module re-exports
those names, so every front-end calls ``_kernels.<name>`` through a module
attribute (``from kafkawire import _kernels as K; K.crc32c(...)``) and never
binds a kernel with ``from kafkawire._kernels import x``: that keeps
:func:`use` able to switch backends (the test suite runs every test on both).

``KAFKAWIRE_BACKEND=pure`` forces the Python twins; ``KAFKAWIRE_BACKEND=fast``
makes a missing compiled extension an ImportError instead of a fallback.
"""
from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import TYPE_CHECKING, Any, Dict

#: Kernel modules every backend must provide, with identical names and signatures.
MODULES = ("crc", "varint", "scan", "records", "columnar", "index", "protocol", "dumpfmt",
           "accum")

backend: str = ""
fast_error: "BaseException | None" = None
_loaded: Dict[str, Dict[str, ModuleType]] = {}

if TYPE_CHECKING:
    # The kernel names are bound at run time by use(); the kernel modules' stubs type them.
    def __getattr__(name: str) -> Any: ...


def _load(name: str) -> Dict[str, ModuleType]:
    if name not in _loaded:
        try:
            _loaded[name] = {m: importlib.import_module(f"kafkawire._{name}.{m}") for m in MODULES}
        except ImportError:
            raise
        except Exception as exc:  # a broken build (e.g. an extension failing at init) is "missing"
            raise ImportError(f"kafkawire._{name} failed to initialise: {exc!r}") from exc
    return _loaded[name]


def fast_available() -> bool:
    """True when every compiled kernel module imports."""
    try:
        _load("fast")
        return True
    except ImportError:
        return False


def use(name: str) -> None:
    """Bind every kernel name in this module to backend ``name`` ("fast" or "pure")."""
    global backend
    if name not in ("fast", "pure"):
        raise ValueError(f"unknown kafkawire backend {name!r}; use 'fast' or 'pure'")
    mods = _load(name)
    g = globals()
    for mod in mods.values():
        for attr in mod.__all__:
            g[attr] = getattr(mod, attr)
    backend = name


def _choose() -> None:
    global fast_error
    wanted = os.environ.get("KAFKAWIRE_BACKEND", "").strip().lower()
    if wanted == "pure":
        use("pure")
        return
    try:
        _load("fast")
    except ImportError as exc:
        fast_error = exc
        if wanted == "fast":
            raise ImportError(
                "KAFKAWIRE_BACKEND=fast but kafkawire's compiled extensions are missing "
                f"({exc}); reinstall with a C compiler available (pip install --force-reinstall "
                "--no-binary kafkawire kafkawire) or unset KAFKAWIRE_BACKEND") from exc
        use("pure")
        return
    use("fast")


_choose()
