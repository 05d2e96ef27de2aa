"""Named cancellable tasks: one running task per name (``turn``, ``preview``, ``apply``, ``open`` …)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

log = logging.getLogger(__name__)

ErrorFn = Callable[[str, BaseException], None]


class TaskGroup:
    """The service's coroutines, by name, so Stop cancels the turn and closing cancels everything.

    ``on_error(name, exc)`` is called when a task ends with an exception (not when it is cancelled,
    and not after :meth:`close`).
    """

    def __init__(self, on_error: ErrorFn | None = None) -> None:
        self._tasks: dict[str, asyncio.Task[Any]] = {}
        self._on_error = on_error
        self.closing = False

    def get(self, name: str) -> asyncio.Task[Any] | None:
        """The running task of that name, else None."""
        t = self._tasks.get(name)
        return t if t is not None and not t.done() else None

    def spawn(self, name: str, coro: Coroutine[Any, Any, Any], *, replace: bool = False) -> asyncio.Task[Any]:
        """Start ``coro`` as the task ``name`` (``replace``: cancel the one running under that name)."""
        old = self.get(name)
        if replace and old is not None:
            old.cancel()
        task = asyncio.ensure_future(coro)
        self._tasks[name] = task
        task.add_done_callback(lambda t: self._done(name, t))
        return task

    def _done(self, name: str, t: asyncio.Task[Any]) -> None:
        if self._tasks.get(name) is t:
            del self._tasks[name]
        if t.cancelled():
            return
        exc = t.exception()
        if exc is not None:
            log.error("task %s failed", name, exc_info=exc)
        if exc is not None and not self.closing and self._on_error is not None:
            self._on_error(name, exc)

    def cancel(self, name: str) -> asyncio.Task[Any] | None:
        """Cancel the task ``name`` if it runs; return it (to wait for it)."""
        t = self.get(name)
        if t is not None:
            t.cancel()
        return t

    async def cancel_and_wait(self, *names: str) -> None:
        """Cancel those tasks (not the calling one) and wait until they ended."""
        for name in names:
            t = self.get(name)
            if t is not None and t is not asyncio.current_task():
                t.cancel()
                await asyncio.wait([t])

    async def close(self, timeout: float = 5.0) -> None:
        """Cancel every task (but the calling one) and wait for them, at most ``timeout`` seconds."""
        self.closing = True
        me = asyncio.current_task()
        running = [t for t in self._tasks.values() if not t.done() and t is not me]
        for t in running:
            t.cancel()
        if running:
            await asyncio.wait(running, timeout=timeout)

    def names(self) -> list[str]:
        return sorted(n for n, t in self._tasks.items() if not t.done())


__all__ = ["TaskGroup"]
