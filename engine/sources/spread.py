"""Work on many session files spread over the machine's cores (issue 28: the first index, the sources scan).

:func:`spread` runs ``fn`` on each item in worker processes and gives the results back in the order of the items,
as a serial loop would (an exception ``fn`` raised is raised where its result is taken). It spreads only when it
is worth it: at least two cores this process may use, at least :data:`MIN_ITEMS` items and :data:`MIN_BYTES` of
files; otherwise (or when worker processes cannot be started) ``fn`` runs here, one item after the other.

Workers are forked when this process runs a single thread (they start at once, with everything imported);
a process with other threads (the window: Qt's, the reader threads) starts them from a fresh fork server
instead, as forking a process whose other threads may hold a lock can hang the child.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

log = logging.getLogger(__name__)

MIN_ITEMS = 4  # fewer files than this are read here
MIN_BYTES = 24 * 2**20  # less than this to read (about 0.2 s of work) is read here: a worker costs ~20-300 ms to start
MAX_WORKERS = 8

T = TypeVar("T")
R = TypeVar("R")


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def workers_for(items: int, total_bytes: int) -> int:
    """How many worker processes :func:`spread` starts for ``items`` items of ``total_bytes`` (0: none, run here)."""
    n = min(cores(), MAX_WORKERS, items)
    if n < 2 or items < MIN_ITEMS or total_bytes < MIN_BYTES:
        return 0
    return n


def _context() -> Any:
    if sys.platform != "linux":
        return multiprocessing.get_context("spawn")
    if threading.active_count() == 1 and "PySide6.QtCore" not in sys.modules:
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("forkserver")


def spread(fn: Callable[[T], R], items: Sequence[T], sizes: Sequence[int], *,
           initializer: Callable[..., None] | None = None, initargs: tuple[Any, ...] = (),
           done: Callable[[int], None] | None = None) -> Iterator[Future[R]]:
    """A finished future per item of ``items`` (in their order) holding ``fn(item)``; ``sizes``: each item's bytes to
    read (the largest are started first). Every item is handed to the workers now (the caller can work meanwhile);
    the iterator waits for each in turn. ``fn`` and ``initializer`` must be module-level functions (pickled by
    name); ``initializer(*initargs)`` runs once per worker (and once here when something is run here). ``done``:
    called with an item's index once its result is in, in the order they finish (a worker's, from the pool's own
    thread; one run here, before its future is given), once per item."""
    n = workers_for(len(items), sum(sizes))
    pool: ProcessPoolExecutor | None = None
    futures: dict[int, Future[R]] = {}
    if n:
        try:
            pool = ProcessPoolExecutor(n, mp_context=_context(), initializer=initializer, initargs=initargs)
            for i in sorted(range(len(items)), key=lambda i: -sizes[i]):  # the largest first: no long tail
                futures[i] = pool.submit(fn, items[i])
                if done is not None:
                    futures[i].add_done_callback(_told(done, i))
        except (OSError, ValueError, RuntimeError, BrokenProcessPool) as exc:
            log.warning("cannot hand files to worker processes (%s): reading here", exc)
    return _results(fn, items, futures, pool, initializer, initargs, done)


def _told(done: Callable[[int], None], i: int) -> Callable[[Future[Any]], None]:
    """A future's done callback telling ``done`` of item ``i`` — not of an item a worker that died left (read here
    then, and told then)."""
    def tell(fut: Future[Any]) -> None:
        if not fut.cancelled() and not isinstance(fut.exception(), BrokenProcessPool):
            done(i)
    return tell


def _results(fn: Callable[[T], R], items: Sequence[T], futures: dict[int, Future[R]],
             pool: ProcessPoolExecutor | None, initializer: Callable[..., None] | None,
             initargs: tuple[Any, ...], done: Callable[[int], None] | None) -> Iterator[Future[R]]:
    ready = False  # the initializer has run in this process
    try:
        for i, item in enumerate(items):
            fut = futures.get(i)
            if fut is not None and isinstance(fut.exception(), BrokenProcessPool):  # (waits for it)
                fut = None  # a worker died (killed, out of memory): this item read here
            if fut is None:
                if initializer is not None and not ready:
                    initializer(*initargs)
                    ready = True
                fut = run_here(fn, item)
                if done is not None:
                    done(i)
            if i == len(items) - 1 and pool is not None:  # the last one: the workers go now, not when collected
                pool.shutdown(wait=True)
                pool = None
            yield fut
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def run_here(fn: Callable[[T], R], item: T) -> Future[R]:
    """``fn(item)`` run here, as a finished future (its exception kept in it)."""
    fut: Future[R] = Future()
    try:
        fut.set_result(fn(item))
    except Exception as exc:  # a worker's top, run here: raised again where the result is taken (and said there)
        log.debug("%s raised; kept in its future", getattr(fn, "__name__", fn), exc_info=True)
        fut.set_exception(exc)
    return fut
