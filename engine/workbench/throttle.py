"""The one throttle of snapshot updates while streaming: time-based, on the running loop's clock.

:meth:`Throttle.schedule` asks for an update; the first request starts the interval and the update
is delivered when it ends (requests meanwhile are folded into it), so a stream of deltas gives at
most one update per interval and the last request is always followed by one. :meth:`flush`
delivers a pending update now. Without a running loop the update is delivered at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

SNAPSHOT_INTERVAL_S = 0.08  # the next-request snapshot is recomputed at most this often while streaming


class Throttle:
    """Calls ``fire`` at most once per ``interval`` seconds, after the first :meth:`schedule`."""

    def __init__(self, fire: Callable[[], None], interval: float = SNAPSHOT_INTERVAL_S) -> None:
        self._fire = fire
        self.interval = interval
        self._handle: asyncio.TimerHandle | None = None
        self.fired = 0  # how many updates were delivered (tests, benchmarks)

    @property
    def pending(self) -> bool:
        return self._handle is not None

    def schedule(self) -> None:
        if self._handle is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._run()
            return
        self._handle = loop.call_later(self.interval, self._run)

    def flush(self) -> None:
        """Deliver the pending update now (nothing when none is pending)."""
        if self._handle is not None:
            self._handle.cancel()
            self._run()

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _run(self) -> None:
        self._handle = None
        self.fired += 1
        self._fire()


__all__ = ["SNAPSHOT_INTERVAL_S", "Throttle"]
