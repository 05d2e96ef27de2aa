"""Hidden folders in which something is built before it is renamed into place (an import's session folder:
``.import-<hex>``), and the removal of those an interrupted process left behind; the garbage collector paused
while an import or an open builds (:func:`collection_paused`).

The process that builds in such a folder holds an advisory lock on it (``flock`` on the folder itself) until it
is done: the kernel releases it when the process dies, however it dies (SIGKILL included). A later run — the next
import into the same folder, the listing of the sessions at start-up, the views' clean-up — removes every
such folder that is older than :data:`STALE_SECONDS` and that no process holds. The age spares a folder another
process has just made and not locked yet; on a system without ``flock`` only folders older than
:data:`UNLOCKED_STALE_SECONDS` are removed.
"""

from __future__ import annotations

import contextlib
import gc
import os
import shutil
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - not on POSIX
    fcntl = None  # type: ignore[assignment]

IMPORT_PREFIX = ".import-"
STALE_SECONDS = 60.0  # a staging folder younger than this is never removed (its maker may not hold it yet)
UNLOCKED_STALE_SECONDS = 86400.0  # without flock: a day old, taken for abandoned


def _hold(folder: Path) -> int | None:
    """An open descriptor of ``folder`` holding its exclusive lock; None when the lock cannot be taken (held by
    another process, or locks not supported here)."""
    if fcntl is None:
        return None
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def _release(fd: int | None) -> None:
    if fd is None:
        return
    with contextlib.suppress(OSError):
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)


def remove_if_stale(folder: Path, *, min_age: float = STALE_SECONDS, now: float | None = None) -> bool:
    """Remove the staging folder ``folder`` when an interrupted process left it (older than ``min_age`` seconds
    and held by no process); whether it was removed."""
    try:
        st = folder.lstat()
    except OSError:
        return False
    if not os.path.isdir(folder) or os.path.islink(folder):
        return False
    age = (time.time() if now is None else now) - st.st_mtime
    if age < min_age:
        return False
    if fcntl is None:
        if age < UNLOCKED_STALE_SECONDS:
            return False
        shutil.rmtree(folder, ignore_errors=True)
        return True
    fd = _hold(folder)
    if fd is None:
        return False  # a live process holds it (or it cannot be told): kept
    try:
        shutil.rmtree(folder, ignore_errors=True)
    finally:
        _release(fd)
    return not folder.exists()


def remove_stale(parent: Path, prefix: str = IMPORT_PREFIX, *, min_age: float = STALE_SECONDS) -> int:
    """Remove the staging folders (``prefix*``) in ``parent`` that interrupted processes left; how many."""
    try:
        children = [c for c in parent.iterdir() if c.name.startswith(prefix)]
    except OSError:
        return 0
    return sum(remove_if_stale(child, min_age=min_age) for child in children)


@contextlib.contextmanager
def staging_folder(parent: Path, prefix: str = IMPORT_PREFIX) -> Iterator[Path]:
    """A new empty hidden folder ``parent/<prefix><hex>``, held by this process while the ``with`` block runs;
    what is left of it at the end (an error, or it was not renamed into place) is removed. Stale folders of
    interrupted runs in ``parent`` are removed first."""
    parent.mkdir(parents=True, exist_ok=True)
    remove_stale(parent, prefix)
    folder = parent / f"{prefix}{uuid.uuid4().hex}"
    folder.mkdir()
    fd = _hold(folder)
    try:
        yield folder
    finally:
        try:
            if folder.exists():
                shutil.rmtree(folder, ignore_errors=True)
        finally:
            _release(fd)



_pause_lock = threading.Lock()
_pauses = 0  # collection_paused blocks running now (in any thread)
_was_enabled = False  # whether automatic collection was on when the first of them began


@contextlib.contextmanager
def collection_paused() -> Iterator[None]:
    """The cyclic garbage collector paused for a bulk read or build (its passes walk every object made so far: at
    thousands of calls they made an import's and an open's time per call grow with the session) and resumed after,
    as it was. Pauses may overlap (threads): automatic collection is back, if it was on, when the last one ends. A
    process that runs the collector itself (the window: :mod:`app.collector`) keeps automatic collection off and
    asks :func:`collection_is_paused` before it collects."""
    global _pauses, _was_enabled
    with _pause_lock:
        if _pauses == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _pause_lock:
            _pauses -= 1
            if _pauses == 0 and _was_enabled:
                gc.enable()


def collection_is_paused() -> bool:
    """Whether a bulk read or build has paused the collector (:func:`collection_paused`) now."""
    return _pauses > 0


__all__ = ["IMPORT_PREFIX", "STALE_SECONDS", "collection_is_paused", "collection_paused", "remove_if_stale",
           "remove_stale", "staging_folder"]
