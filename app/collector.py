"""Python's cyclic garbage collection, run only from the main thread's event loop.

CPython collects cycles in whichever thread crosses an allocation threshold, wherever that thread is: a worker
thread (the Sources scan, a reader, litellm's import) then runs the finalizers of Qt objects caught in cycles off
the main thread, and the main thread may collect in the middle of a Qt call (a resize of the chart's view) —
both seen to hang the window for good (the main thread asleep inside the collector, a worker waiting for the
GIL). So automatic collection is switched off and :class:`MainThreadCollector` collects from a timer of the
main thread's event loop, with the thresholds the interpreter would use and its rule for a whole collection (the
objects moved to the oldest generation since the last one a quarter of those it left) (the pattern of pyqtgraph's
and calibre's collectors).

:func:`give_back` collects everything and hands the C heap's free memory back to the system (glibc's
``malloc_trim``): after a whole session was replaced by another (a load, a followed file rewritten at a
compaction), the old one's memory is free but would stay in the process's resident size. :class:`Reclaimer` runs
it once the window has settled after a load (not between a large file's first screen and its whole view, nor in
the middle of drawing either): the whole collection (a third of a second with litellm loaded: it walks every
object) only when a large session was replaced — what a small one leaves is found by the usual collections — and
else only the trim (milliseconds), which hands back what reading the file left free. While a followed session grows,
the C heap's free pages are handed back the same way every :data:`TRIM_INTERVAL_S` seconds (no collection: the
collector's own ones run as they are due): each line read, each chat row laid out leaves free memory in glibc's heap
that it keeps, and a ten-minute follow at 20 lines a second kept +50 MB of it resident.

:func:`limit_arenas` (with the collector: at the start) keeps glibc to :data:`ARENAS` heaps: by default each new
thread that allocates gets a heap of its own (up to 8 a core), and each keeps its own free memory — the readers',
the scans' and Qt's worker threads held 11 heaps while following, and the process 28 MB more than with two (the
threads take turns under Python's lock anyway).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import time

from PySide6.QtCore import QObject, QTimer

from engine.store.staging import collection_is_paused

INTERVAL_MS = 250  # how often the main thread looks whether a collection is due
SETTLE_MS = 1500  # a load's memory is handed back this long after the last load (a first screen, then the whole)
LARGE_ROWS = 2000  # a replaced session with this many messages and calls: every generation is collected
TRIM_INTERVAL_S = 30.0  # how often the C heap's free pages are handed back to the system
ARENAS = 2  # glibc's heaps (arenas) at most: the main thread's and one the other threads share
_M_ARENA_MAX = -8  # mallopt's parameter (malloc.h)


class MainThreadCollector(QObject):
    """Automatic collection off while it lives; :meth:`collect` on the main thread's timer instead."""

    def __init__(self, parent: QObject | None = None, interval_ms: int = INTERVAL_MS,
                 trim_interval_s: float = TRIM_INTERVAL_S) -> None:
        super().__init__(parent)
        self._trim_interval = trim_interval_s
        self._trimmed = time.monotonic()
        self.trims = 0  # times the C heap's free pages were handed back (tests)
        self._threshold = gc.get_threshold()
        self._was_enabled = gc.isenabled()
        self.collections = 0  # collections run (tests)
        self._full_seen = -1  # whole collections counted when the oldest generation was last measured
        self._long_lived = 0  # the objects a whole collection left in the oldest generation
        self._checked = -1  # the oldest generation's count when it was last measured
        self._pending_due = False
        limit_arenas()
        gc.disable()
        self._timer = QTimer(self)
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(self.collect)
        self._timer.start()

    def due(self) -> int:
        """The oldest generation whose count passed its threshold (as the interpreter decides), or -1; -1 too while
        a bulk read or build (an import, an open: :func:`engine.store.staging.collection_paused`) runs in a worker:
        a collection then would walk the objects it is making, again and again."""
        if collection_is_paused():
            return -1
        counts = gc.get_count()
        for gen in (2, 1, 0):
            if self._threshold[gen] and counts[gen] > self._threshold[gen] and (gen < 2 or self._full_due(counts[2])):
                return gen
        return -1

    def _full_due(self, count: int) -> bool:
        """The interpreter's rule for a whole collection beyond the threshold: only once the objects that reached
        the oldest generation since the last whole collection are a quarter of those it left there (else each
        whole collection — a third of a second with a session and litellm loaded — would come every ten younger
        ones, however few objects they moved up). Looked at again only when a younger collection moved some up."""
        full = gc.get_stats()[2]["collections"]
        if full != self._full_seen:  # a whole collection since (this one's, give_back's): what it left is the base
            self._full_seen, self._long_lived, self._checked = full, len(gc.get_objects(2)), -1
        if count != self._checked:
            self._checked = count
            self._pending_due = len(gc.get_objects(2)) - self._long_lived > self._long_lived // 4
        return self._pending_due

    def collect(self) -> int:
        """Collect the generation that is due, if any; the objects found unreachable. The C heap's free pages
        handed back when :data:`TRIM_INTERVAL_S` passed since the last time."""
        now = time.monotonic()
        if now - self._trimmed >= self._trim_interval:
            self._trimmed = now
            self.trims += trim()
        gen = self.due()
        if gen < 0:
            return 0
        self.collections += 1
        return gc.collect(gen)

    def stop(self) -> None:
        """Back to the interpreter's automatic collection (as it was)."""
        self._timer.stop()
        if self._was_enabled:
            gc.enable()


@functools.cache
def _libc() -> ctypes.CDLL | None:
    """The C library (looked for once: ``find_library`` asks ``ldconfig``), None when there is none to load."""
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None


def limit_arenas(count: int = ARENAS) -> bool:
    """At most ``count`` glibc heaps from now on (threads that have none yet share them); whether it was set (not
    on another C library). Best called before threads start: a thread keeps the heap it has."""
    try:
        return bool(libc.mallopt(_M_ARENA_MAX, count)) if (libc := _libc()) is not None else False
    except AttributeError:
        return False


def heaps_report() -> str | None:
    """glibc's own report of its heaps (``malloc_info``'s XML: one ``<heap nr=…>`` each, what it holds and has free);
    None on another C library. What the window-follow probe prints and a test counts the heaps by."""
    import tempfile
    from pathlib import Path

    libc = _libc()
    if libc is None:
        return None
    try:
        libc.fopen.restype = ctypes.c_void_p
        libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
        libc.fclose.argtypes = [ctypes.c_void_p]
        with tempfile.NamedTemporaryFile(suffix=".xml") as tmp:
            fp = libc.fopen(tmp.name.encode(), b"w")
            libc.malloc_info(0, fp)
            libc.fclose(fp)
            return Path(tmp.name).read_text()
    except (OSError, AttributeError):
        return None


def give_back() -> bool:
    """Collect every generation, then return the C heap's free pages to the system (glibc; elsewhere only the
    collection); whether memory was handed back."""
    gc.collect()
    return trim()


def trim() -> bool:
    """Return the C heap's free pages to the system (glibc's ``malloc_trim``; elsewhere nothing); whether memory
    was handed back."""
    try:
        return bool(libc.malloc_trim(0)) if (libc := _libc()) is not None else False
    except AttributeError:
        return False


class Reclaimer(QObject):
    """Memory handed back once loads have settled: :meth:`replaced` after each session shown (with the size of the
    one it replaced) starts (again) a single-shot timer; when it fires, :func:`give_back` if the sessions replaced
    since held :data:`LARGE_ROWS` rows or more, else :func:`trim`."""

    def __init__(self, parent: QObject | None = None, delay_ms: int = SETTLE_MS) -> None:
        super().__init__(parent)
        self._rows = 0
        self.runs: list[str] = []  # "give_back" / "trim", in order (tests)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(delay_ms)
        self._timer.timeout.connect(self.run)

    def replaced(self, rows: int) -> None:
        """A session was shown in place of one with ``rows`` messages and calls (0: none)."""
        self._rows += max(0, rows)
        self._timer.start()

    def pending(self) -> bool:
        return self._timer.isActive()

    def run(self) -> None:
        self._timer.stop()
        large, self._rows = self._rows >= LARGE_ROWS, 0
        self.runs.append("give_back" if large else "trim")
        if large:
            give_back()
        else:
            trim()


__all__ = ["ARENAS", "INTERVAL_MS", "LARGE_ROWS", "SETTLE_MS", "TRIM_INTERVAL_S", "MainThreadCollector", "Reclaimer",
           "give_back", "limit_arenas", "trim"]
