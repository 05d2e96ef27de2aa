"""The Usage part of the service: what the agents on this machine spent, for the window's Usage view.

A standalone part the service holds (``workbench.usage``). Intent: :meth:`UsagePart.refresh`
(``since`` / ``until`` ISO days, both included, None: open; ``update``: bring the usage index up to date
with the session files first). It runs off the loop (``asyncio.to_thread``) and sends
:class:`engine.workbench.events.UsageReady` with a :class:`engine.usage.report.UsageReport` (plain data):
when it updates the index, first the figures of the index as it is (``updating`` True, at once), then
the figures after the update. A failed update or query is said in the report's ``problem``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from datetime import date
from typing import Any

from engine.model.text import one_line
from engine.store.config import Settings
from engine.usage.index import UsageIndex
from engine.usage.report import UsageReport, usage_report
from engine.workbench.events import UsageReady
from engine.workbench.tasks import TaskGroup


def _day(text: str | None) -> date | None:
    if not text:
        return None
    try:
        return date.fromisoformat(text[:10])
    except ValueError:
        return None


class UsagePart:
    """See the module docstring. ``update`` (tests) replaces ``index.update(settings)``."""

    def __init__(self, tasks: TaskGroup, emit: Callable[[Any], None], settings: Callable[[], Settings],
                 index: UsageIndex | None = None, update: Callable[[UsageIndex, Settings], Any] | None = None) -> None:
        self.tasks = tasks
        self.emit = emit
        self.settings = settings
        self._index = index
        self._update = update or (lambda ix, s: ix.update(s))

    @property
    def index(self) -> UsageIndex:
        if self._index is None:
            self._index = UsageIndex()
        return self._index

    def refresh(self, since: str | None = None, until: str | None = None, update: bool = True) -> asyncio.Task[Any]:
        """Query the range (after updating the index when ``update``); the answer is a ``UsageReady``."""
        return self.tasks.spawn("usage", self._refresh(_day(since), _day(until), update), replace=True)

    def _query(self, since: date | None, until: date | None) -> UsageReport:
        try:
            return usage_report(self.index, since, until)
        except Exception as exc:  # a damaged Parquet file: say so (ctxbench usage --refresh rebuilds it)
            return UsageReport(since.isoformat() if since else None, until.isoformat() if until else None,
                               problem=f"cannot query the usage index in {self.index.root} "
                                       f"({type(exc).__name__}: {one_line(str(exc))}); try ctxbench usage --refresh")

    async def _refresh(self, since: date | None, until: date | None, update: bool) -> UsageReport:
        index_json: dict[str, Any] | None = None
        problem = ""
        if update:
            first = await asyncio.to_thread(self._query, since, until)
            self.emit(UsageReady(replace(first, updating=True)))
            try:
                done = await asyncio.to_thread(self._update, self.index, self.settings())
                index_json = done.to_json() if hasattr(done, "to_json") else None
            except OSError as exc:
                problem = f"cannot update the usage index in {self.index.root}: {one_line(str(exc))}"
        report = await asyncio.to_thread(self._query, since, until)
        report.index = index_json
        report.problem = report.problem or problem
        self.emit(UsageReady(report))
        return report


__all__ = ["UsagePart"]
