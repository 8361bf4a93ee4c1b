"""Optional libraries: import them on first use, or say which extra installs them."""
from __future__ import annotations

import importlib
import sys
from types import ModuleType

from kafkawire.errors import MissingDependencyError

__all__ = ["require"]


def require(module: str, extra: str, feature: str) -> ModuleType:
    """Import ``module``; if it is missing, raise MissingDependencyError naming ``extra``.

    ``feature`` says what needs it, e.g. ``"Arrow output"``.
    """
    got = sys.modules.get(module)   # imported already: no import machinery on hot paths
    if got is not None:
        return got
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.split(".")[0]
        raise MissingDependencyError(
            f"{feature} needs {top}, which is not installed ({exc}); "
            f"run: pip install 'kafkawire[{extra}]'", extra=extra) from exc
