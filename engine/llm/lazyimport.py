"""One gate for the heavy imports made lazily, off start-up: litellm and llama_cpp.

Two threads importing overlapping packages at once (the app's background litellm warm-up, and a
model call, a token count or the offline model's worker thread meanwhile) can meet a module that
the other thread has only half-initialised ("cannot import name … from partially initialized module
…"); before this gate that left the offline model broken for the rest of the process. Every heavy
import runs under :data:`GATE`, one at a time, and a failed one is undone: the modules it added are
removed, so the next attempt imports afresh instead of finding a half-built package.
"""

from __future__ import annotations

import importlib
import sys
import threading
from types import ModuleType

GATE = threading.RLock()  # re-entrant: setting litellm up imports from it again


def _ready(name: str) -> ModuleType | None:
    module = sys.modules.get(name)
    if module is None or getattr(getattr(module, "__spec__", None), "_initializing", False):
        return None
    return module


def gated_import(name: str) -> ModuleType:
    """``importlib.import_module(name)`` under :data:`GATE`; undone if it fails."""
    module = _ready(name)
    if module is not None:
        return module
    with GATE:
        before = set(sys.modules)
        try:
            return importlib.import_module(name)
        except BaseException:
            for added in set(sys.modules) - before:
                sys.modules.pop(added, None)
            raise
