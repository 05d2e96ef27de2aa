"""PySide6's import hook, kept from running other packages' module ``__getattr__`` mid-import.

Once PySide6 is loaded, every module imported afterwards, in any thread, is handed to shiboken's
``feature_imported`` (the ``from __feature__ import snake_case`` machinery), which asks
``inspect.getsource(module)`` whether its text says "PySide6". ``getsource`` first ``unwrap``\\ s the
module: ``hasattr(module, "__wrapped__")``, which runs a module-level ``__getattr__``. pydantic's
modules have one that *imports* (``pydantic._migration``'s wrapper imports ``_internal._validators``),
so during litellm's background import the hook re-entered pydantic halfway through itself: about one
launch in twenty ended with "litellm could not be loaded (cannot import name 'import_string' from
partially initialized module 'pydantic._internal._validators')" and only the offline model working
(``tests/app/test_startup_race.py``; the traceback in the log file showed the hook twice on the
stack, ``_mod_uses_pyside`` → ``getsource`` → ``unwrap`` → pydantic's ``__getattr__``).

:func:`defuse_feature_hook` gives the hook the same answer without touching the module's attributes:
the module's source file (from ``__spec__``, read from the module's ``__dict__``) contains
"PySide6" or not. This app never selects a ``__feature__``, so the answer only has to be right, not
fast; a module without a ``.py`` file counts as not using PySide6, as ``getsource`` failing does.
"""

from __future__ import annotations

import logging
import sys
from types import ModuleType

log = logging.getLogger(__name__)

_FEATURE_MODULES = ("shibokensupport.feature", "PySide6.support.feature")


def mentions_pyside(module: ModuleType) -> bool:
    """Whether ``module``'s source file says "PySide6" — what shiboken's ``_mod_uses_pyside`` answers,
    found without any attribute lookup on the module (so no module ``__getattr__`` runs)."""
    spec = vars(module).get("__spec__")
    origin = getattr(spec, "origin", None)
    if not isinstance(origin, str) or not origin.endswith(".py"):
        return False
    try:
        with open(origin, "rb") as fh:
            return b"PySide6" in fh.read()
    except OSError:
        return False


def _feature_module() -> ModuleType | None:
    for name in _FEATURE_MODULES:
        module = sys.modules.get(name)
        if module is not None and callable(vars(module).get("_mod_uses_pyside")):
            return module
    return None


def defuse_feature_hook() -> bool:
    """Make shiboken's per-import check read the source file instead of the module (call it once
    PySide6 is imported; again is harmless). False when this PySide6 has no such hook (then there is
    nothing to defuse, and it is logged)."""
    feature = _feature_module()
    if feature is None:
        if "PySide6" in sys.modules:
            log.info("PySide6 %s has no feature hook to defuse", getattr(sys.modules["PySide6"], "__version__", "?"))
        return False
    if vars(feature).get("_mod_uses_pyside") is not mentions_pyside:
        feature._mod_uses_pyside = mentions_pyside  # type: ignore[attr-defined]
    return True


__all__ = ["defuse_feature_hook", "mentions_pyside"]
