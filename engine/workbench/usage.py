"""The Usage part of the service: what the agents on this machine spent, for the window's Usage view.

A standalone part the service holds (``workbench.usage``). Intent: :meth:`UsagePart.refresh`
(``since`` / ``until`` ISO days, both included, None: open; or ``days``: the last n days up to today, UTC
(:func:`engine.usage.report.last_days`; 0: all time), never a day to come; ``update``: bring the usage index up to
date with the session files first). It runs off the loop (``asyncio.to_thread``) and sends
:class:`engine.workbench.events.UsageReady` with a :class:`engine.usage.report.UsageReport` (plain data):
when it updates the index, first the figures of the index as it is (``updating`` True, at once), then
the figures after the update. A failed update or query is said in the report's ``problem``; every report
carries the session files the last update could not read (``unreadable``: path and reason) and its warnings
(``warnings``: the index is read-only, another process is updating it, a damaged index file was rebuilt).
While the update of a refresh that is not quiet reads, :class:`engine.workbench.events.UsageProgress` says how far
it has come (at most every :data:`engine.usage.index.PROGRESS_SECONDS`, and once all is read).

Live figures: while the Usage view is shown, the window asks every :data:`AUTO_REFRESH_SECONDS` for a
``quiet`` refresh (with ``update``): no first "index as it is" report, and a report after the update only
when the update read something (a new or grown session file) or failed (a problem; files it could not
read, unless the same as the last update's: a file that never reads fails at every update), so an idle
machine repaints nothing. A quiet refresh does not start while a refresh runs (the one running
answers; a refresh the user asked for is never replaced by a quiet one).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import date
from typing import Any

from engine.model.text import one_line
from engine.sources.model import shown_path
from engine.store.config import Settings
from engine.usage.index import IndexProgress, UsageIndex
from engine.usage.report import UsageReport, last_days, usage_report
from engine.usage.storage import UsageIndexError
from engine.workbench.events import UsageProgress, UsageReady
from engine.workbench.tasks import TaskGroup

log = logging.getLogger(__name__)

AUTO_REFRESH_SECONDS = 10.0  # the Usage view's live refresh, while it is shown


def _day(text: str | None) -> date | None:
    if not text:
        return None
    try:
        return date.fromisoformat(text[:10])
    except ValueError:
        return None


class UsagePart:
    """See the module docstring. ``update`` (tests) replaces ``index.update(settings, progress=told)``: it is
    called with the index, the settings and ``told`` (None for a quiet refresh: nobody is shown its progress)."""

    def __init__(self, tasks: TaskGroup, emit: Callable[[Any], None], settings: Callable[[], Settings],
                 index: UsageIndex | None = None,
                 update: Callable[[UsageIndex, Settings, Callable[[IndexProgress], None] | None], Any] | None = None,
                 ) -> None:
        self.tasks = tasks
        self.emit = emit
        self.settings = settings
        self._index = index
        self._update = update or (lambda ix, s, told: ix.update(s, progress=told))
        self._failed: list[Any] = []  # the files the last update could not read: (path, reason)
        self._warnings: list[str] = []  # what the last update said (busy, read-only, a damaged file rebuilt)
        self._damaged: list[Any] = []  # the files the last update read in part: (path, lines, first described)

    @property
    def index(self) -> UsageIndex:
        if self._index is None:
            self._index = UsageIndex()
        return self._index

    def refresh(self, since: str | None = None, until: str | None = None, update: bool = True,
                quiet: bool = False, days: int | None = None) -> asyncio.Task[Any] | None:
        """Query the range (after updating the index when ``update``); the answer is a ``UsageReady``.
        ``days`` (not None): the last ``days`` days up to today, UTC, instead of ``since`` / ``until`` (0: all time).
        ``quiet`` (with ``update``): see the module docstring; None when it does not start (a refresh runs)."""
        if quiet and self.tasks.get("usage") is not None:
            return None
        start, end = last_days(days) if days is not None else (_day(since), _day(until))
        return self.tasks.spawn("usage", self._refresh(start, end, update, quiet and update), replace=True)

    def _query(self, since: date | None, until: date | None) -> UsageReport:
        notices = len(self.index.notices)
        try:
            report = usage_report(self.index, since, until)
        except UsageIndexError as exc:  # names the index and what was wrong
            report = UsageReport(since.isoformat() if since else None, until.isoformat() if until else None,
                                 problem=one_line(str(exc)), warnings=self.index.notices[notices:])
        except Exception as exc:  # never a raw traceback (ctxbench usage --refresh builds the index again)
            log.exception("usage query failed")
            report = UsageReport(since.isoformat() if since else None, until.isoformat() if until else None,
                                 problem=f"cannot query the usage index in {shown_path(self.index.root)} "
                                         f"({type(exc).__name__}: {one_line(str(exc))}); try ctxbench usage --refresh")
        # what the last update could not read and what it said: on every report, the view shows them
        report.unreadable = [{"path": str(p), "reason": str(r)} for p, r in self._failed]
        report.unreadable += [{"path": str(p), "reason": f"{n:,} line(s) could not be read ({first}); the rest is "
                                                         "counted", "partly": True} for p, n, first in self._damaged]
        report.warnings = [*self._warnings, *report.warnings]
        return report

    def _told(self) -> Callable[[IndexProgress], None]:
        """What tells how far this refresh's update has read (from its thread, or its worker pool's): a
        ``UsageProgress`` on this loop."""
        loop = asyncio.get_running_loop()

        def told(progress: IndexProgress) -> None:
            if not loop.is_closed():
                loop.call_soon_threadsafe(self.emit, UsageProgress(progress))
        return told

    async def _refresh(self, since: date | None, until: date | None, update: bool,
                       quiet: bool = False) -> UsageReport | None:
        index_json: dict[str, Any] | None = None
        problem = ""
        if update:
            if not quiet:
                first = await asyncio.to_thread(self._query, since, until)
                self.emit(UsageReady(replace(first, updating=True)))
            done: Any = None
            started = time.monotonic()
            try:
                done = await asyncio.to_thread(self._update, self.index, self.settings(),  # (a quiet one: untold)
                                               None if quiet else self._told())
                index_json = done.to_json() if hasattr(done, "to_json") else None
                log.info("usage index updated in %.2f s: %s", time.monotonic() - started, index_json)
            except UsageIndexError as exc:
                log.warning("usage index update failed", exc_info=exc)
                problem = one_line(str(exc))
            except OSError as exc:
                log.warning("usage index update failed", exc_info=exc)
                problem = f"cannot update the usage index in {shown_path(self.index.root)}: {one_line(str(exc))}"
            failed, self._failed = self._failed, list(getattr(done, "failed", None) or [])
            said, self._warnings = self._warnings, [str(w) for w in getattr(done, "warnings", None) or []]
            damaged, self._damaged = self._damaged, list(getattr(done, "damaged", None) or [])
            if (quiet and not problem and not getattr(done, "read", 0) and self._failed in ([], failed)
                    and self._warnings in ([], said) and self._damaged in ([], damaged)):
                return None  # nothing new: nothing to repaint
        report = await asyncio.to_thread(self._query, since, until)
        report.index = index_json
        report.problem = report.problem or problem
        self.emit(UsageReady(report))
        return report


__all__ = ["UsagePart"]
