"""A reader module imported when it is first used, not when the module naming it is: the format registry and the
sources scan name every agent's reader, and a command that reads none of them (``usage`` with its index up to date,
``sources`` with nothing changed) should not pay for importing them all.

Modules that use it import the real modules under ``if TYPE_CHECKING:`` (so the type checker sees them) and bind the
same names to :class:`LazyModule` otherwise.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class LazyModule:
    """``engine.sources.<name>``, imported at the first attribute asked of it."""

    __slots__ = ("_module", "_name")

    def __init__(self, name: str) -> None:
        self._name = f"engine.sources.{name}"
        self._module: ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:
        module = self._module
        if module is None:
            module = self._module = importlib.import_module(self._name)
        return getattr(module, attr)

    def __repr__(self) -> str:
        return f"<lazy {self._name}>"


__all__ = ["LazyModule"]
