"""One gate for the heavy imports made lazily, off start-up: litellm and llama_cpp.

Two threads importing overlapping packages at once (the app's background litellm warm-up, and a
model call, a token count, the Sources scan or the offline model's worker thread meanwhile) can meet
a module that the other thread has only half-initialised ("cannot import name 'import_string' from
partially initialized module 'pydantic._internal._validators'"); that left the offline model as the
only one working for the rest of the process.

So there is one import path for them, :func:`gated_import` (litellm's own set-up uses :func:`gate`),
and one lock, :data:`GATE`:

- heavy imports run under the gate, one at a time; a failed one is undone (the modules of the
  packages it added are removed; the stdlib's and this project's, which another thread may be
  importing meanwhile, stay), so the next attempt imports afresh instead of finding a half-built package;
- while a gated import runs, **every other thread's import of a third-party module that is not
  complete yet waits for it** (``builtins.__import__`` is routed through :func:`_import`, by
  :func:`install` — the app calls it before it imports Qt — or at the first gated import; it passes
  straight through when none runs): whatever path reaches pydantic, httpx
  or litellm itself meanwhile — the Sources scan, a token count, a lazy import in a library — meets
  it complete. The stdlib and this project's own packages pass (their third-party imports wait in
  turn), and so do the packages that were loaded before the gated import began (the window's Qt,
  pyqtgraph, numpy: a thread inside Qt's own import hook is never held). The wait happens before the
  import machinery takes any lock (a meta-path finder would run
  under Python's global import lock and stop the gated import too); a thread the gated import is
  itself waiting for (it is inside a module whose import that one needs) is never held, so the wait
  cannot deadlock, and :data:`WAIT_LIMIT` bounds it anyway.
"""

from __future__ import annotations

import builtins
import importlib
import importlib.util
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import ModuleType
from typing import Any

log = logging.getLogger(__name__)

GATE = threading.RLock()  # re-entrant: setting litellm up imports from it again
WAIT_LIMIT = 60.0  # seconds another thread's import waits for the gated one at most
OWN_PACKAGES = frozenset({"engine", "app", "widgets", "tests", "benchmarks"})

_changed = threading.Condition()  # notified when the gate's holder changes
_holder: int | None = None  # the thread running a gated import (None: none runs)
_depth = 0  # its nesting (the gate is re-entrant)
_before: frozenset[str] = frozenset()  # the top-level packages loaded when the gated import began
waited: list[tuple[str, str, float]] = []  # (module, thread name, seconds) of every import that waited


def _ready(name: str) -> ModuleType | None:
    module = sys.modules.get(name)
    if module is None or getattr(getattr(module, "__spec__", None), "_initializing", False):
        return None
    return module


@contextmanager
def gate() -> Iterator[None]:
    """Hold :data:`GATE` as the one thread importing: other threads' third-party imports wait meanwhile."""
    global _holder, _depth, _before
    with GATE:
        install()
        with _changed:
            if _depth == 0:
                _before = frozenset(name for name in list(sys.modules) if "." not in name)
            _holder = threading.get_ident()
            _depth += 1
        try:
            yield
        finally:
            with _changed:
                _depth -= 1
                if _depth == 0:
                    _holder = None
                    _changed.notify_all()


def gated_import(name: str) -> ModuleType:
    """``importlib.import_module(name)`` under :func:`gate`; undone if it fails."""
    module = _ready(name)
    if module is not None:
        return module
    with gate():
        before = set(sys.modules)
        try:
            return importlib.import_module(name)
        except BaseException:
            for added in set(sys.modules) - before:
                if not _passes(added):  # only what the gated import brought: another thread's own imports stay
                    sys.modules.pop(added, None)
            raise


def importing() -> bool:
    """Whether a gated import is running (in any thread)."""
    return _holder is not None


# ---------------------------------------------------------------------- other threads wait


def _passes(name: str) -> bool:
    """Whether an import by another thread goes on while a gated one runs: the stdlib, this project's
    packages, and any package that was loaded before the gated import began (Qt, pyqtgraph, numpy …:
    the gated import only adds packages) go on; a package the gated import brought in, or one not
    loaded at all yet (it may be about to), waits."""
    top = name.partition(".")[0]
    return top in OWN_PACKAGES or top.lstrip("_") in sys.stdlib_module_names or top in _before


def _locks_waited_on(thread: int) -> list[Any]:
    """The module locks ``thread`` is blocked on (CPython's import bookkeeping: one lock in 3.11, a
    list from 3.12)."""
    bootstrap: Any = getattr(importlib, "_bootstrap", None)
    blocking = getattr(bootstrap, "_blocking_on", None)
    try:
        found = blocking.get(thread) if blocking is not None else None
    except (AttributeError, TypeError, RuntimeError):  # CPython's private bookkeeping changed shape (or size)
        return []
    if found is None:
        return []
    return list(found) if isinstance(found, list | tuple | set | frozenset) else [found]


def _holder_waits_for(me: int, holder: int) -> bool:
    """Whether the gated import (on ``holder``) waits, through module locks, for this thread (it is
    inside a module whose import the gated one needs): then holding this thread would deadlock both."""
    seen = set()
    thread: int | None = holder
    while thread is not None and thread not in seen:
        seen.add(thread)
        owners = {getattr(lock, "owner", None) for lock in _locks_waited_on(thread)}
        if me in owners:
            return True
        thread = next((o for o in owners if isinstance(o, int)), None)
    return False


def _wait(name: str) -> None:
    me = threading.get_ident()
    start = time.monotonic()
    with _changed:
        while _holder is not None and _holder != me:
            if _holder_waits_for(me, _holder) or time.monotonic() - start > WAIT_LIMIT:
                break
            _changed.wait(0.02)
    seconds = time.monotonic() - start
    waited.append((name, threading.current_thread().name, seconds))
    log.debug("import of %s waited %.3f s for the gated import", name, seconds)


def _absolute(name: str, globals_: Mapping[str, Any] | None, level: int) -> str:
    if level <= 0:
        return name
    package = (globals_ or {}).get("__package__") or ""
    try:
        return importlib.util.resolve_name("." * level + name, package)
    except (ImportError, ValueError):
        return name


def _complete(name: str, fromlist: Sequence[str] | None) -> bool:
    module = _ready(name)
    if module is None:
        return False
    return all(item == "*" or hasattr(module, item) for item in fromlist or ())


_original_import: Callable[..., ModuleType] = builtins.__import__


def _import(name: str, globals: Mapping[str, Any] | None = None, locals: Mapping[str, Any] | None = None,
            fromlist: Sequence[str] | None = (), level: int = 0) -> ModuleType:
    """``builtins.__import__`` while a gated import runs: another thread's import of a third-party
    module that is not complete yet waits for the gated import first (it then finds it complete)."""
    holder = _holder
    if holder is not None and holder != threading.get_ident():
        full = _absolute(name, globals, level)
        if not _passes(full) and not _complete(full, fromlist):
            _wait(full)
    return _original_import(name, globals, locals, fromlist, level)


_installed = False


def install() -> None:
    """Route ``import`` statements through :func:`_import` (once per process; it passes straight
    through while no gated import runs). The app calls it before it imports Qt: PySide6 puts its own
    ``__import__`` in front (``__feature_import__``, later ``__lazy_import__``), each calling the one it
    found when Qt was loaded — so ours must be there first to stay in the chain. It is never put in
    front again (that could make a loop through Qt's)."""
    global _original_import, _installed
    if not _installed:
        _installed = True
        _original_import = builtins.__import__
        builtins.__import__ = _import


def installed() -> bool:
    """Whether :func:`_import` is in use (in front, or called by the ``__import__`` in front of it)."""
    return _installed
