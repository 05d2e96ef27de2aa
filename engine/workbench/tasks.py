"""Named cancellable tasks (``turn``, ``preview``, ``apply``, ``open`` …): every task started is tracked until it
ends (cancelling a name cancels all of its tasks). Two tasks of one name never run unawares: a second start says
what it does — ``replace`` the running one (an open, a scan), ``queue`` after it (a deletion, an import) — or is
refused (:class:`TaskRunning`; the caller asks :meth:`TaskGroup.get` first and says no to the user)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

log = logging.getLogger(__name__)

ErrorFn = Callable[[str, BaseException], None]


class TaskRunning(RuntimeError):
    """A task was started under a name whose task runs, neither replacing it nor queued after it."""


class TaskGroup:
    """The service's coroutines, by name, so Stop cancels the turn and closing cancels everything.

    ``on_error(name, exc)`` is called when a task ends with an exception (not when it is cancelled,
    and not after :meth:`close`).
    """

    def __init__(self, on_error: ErrorFn | None = None) -> None:
        self._tasks: dict[str, list[asyncio.Task[Any]]] = {}  # by name, oldest first, until each ends
        self._on_error = on_error
        self.closing = False

    def _running(self, name: str) -> list[asyncio.Task[Any]]:
        return [t for t in self._tasks.get(name, ()) if not t.done()]

    def get(self, name: str) -> asyncio.Task[Any] | None:
        """The latest running task of that name, else None."""
        running = self._running(name)
        return running[-1] if running else None

    def spawn(
        self, name: str, coro: Coroutine[Any, Any, Any], *, replace: bool = False, queue: bool = False
    ) -> asyncio.Task[Any]:
        """Start ``coro`` as a task ``name``: ``replace``: cancel the ones running under that name first;
        ``queue``: run it once they ended; neither: TaskRunning when one runs (``coro`` is closed)."""
        running = self._running(name)
        if replace:
            for old in running:
                old.cancel()
        elif running and not queue:
            coro.close()
            raise TaskRunning(f"a task {name!r} is running")
        task = asyncio.ensure_future(self._after(running, coro) if queue and running else coro)
        self._tasks.setdefault(name, []).append(task)
        task.add_done_callback(lambda t: self._done(name, t))
        return task

    @staticmethod
    async def _after(earlier: list[asyncio.Task[Any]], coro: Coroutine[Any, Any, Any]) -> Any:
        try:
            await asyncio.wait(earlier)
        except BaseException:
            coro.close()  # cancelled while it waited: it never ran
            raise
        return await coro

    def _done(self, name: str, t: asyncio.Task[Any]) -> None:
        tasks = self._tasks.get(name, [])
        if t in tasks:
            tasks.remove(t)
        if not tasks:
            self._tasks.pop(name, None)
        if t.cancelled():
            return
        exc = t.exception()
        if exc is not None:
            log.error("task %s failed", name, exc_info=exc)
        if exc is not None and not self.closing and self._on_error is not None:
            self._on_error(name, exc)

    def cancel(self, name: str) -> asyncio.Task[Any] | None:
        """Cancel every task ``name`` that runs; return the latest (to wait for it)."""
        running = self._running(name)
        for t in running:
            t.cancel()
        return running[-1] if running else None

    async def cancel_and_wait(self, *names: str) -> None:
        """Cancel those tasks (not the calling one) and wait until they ended."""
        me = asyncio.current_task()
        running = [t for name in names for t in self._running(name) if t is not me]
        for t in running:
            t.cancel()
        if running:
            await asyncio.wait(running)

    async def close(self, timeout: float = 5.0) -> None:
        """Cancel every task (but the calling one) and wait for them, at most ``timeout`` seconds."""
        self.closing = True
        me = asyncio.current_task()
        running = [t for tasks in self._tasks.values() for t in tasks if not t.done() and t is not me]
        for t in running:
            t.cancel()
        if running:
            await asyncio.wait(running, timeout=timeout)

    def names(self) -> list[str]:
        return sorted(n for n in self._tasks if self._running(n))


__all__ = ["TaskGroup", "TaskRunning"]
