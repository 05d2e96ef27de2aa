"""Analyses of the open session for the window: the context diff between two calls and tokens by tool.

Both read the session folder as ``ctxbench diff`` / ``ctxbench tools`` do
(:func:`engine.context.diff.history_from_folder`, the heuristic estimator, so the window's figures
equal the CLI's), in a worker thread (a long session's folder is read off the loop thread), and send
a typed event: :class:`DiffReady` (an :class:`engine.context.diff.ContextDiff`) and
:class:`ToolsReady` (an :class:`engine.context.attribution.Attribution` plus where each of its
largest results is: ``"live"`` or the archive day that holds it, and the dollar cost by tool:
:class:`engine.usage.tool_costs.ToolCosts` from the folder's ``context`` records, the figures ``ctxbench
tools`` prints; None when the session recorded no call). A result for a session that was closed meanwhile
is dropped; a call number out of range becomes a notice.

Intents: ``diff_calls(a, b)`` (calls numbered from 1, as the timeline's tooltips number them),
``tool_attribution()``. Tool attributions asked for while one is computed (a followed file growing, a call at a
time) are coalesced: one worker thread at a time (a cancelled task does not stop its thread), the next started
when it ends — for the latest state — and at most one every :data:`TOOLS_MIN_GAP` seconds, and no more than a
:data:`TOOLS_SHARE`-th of the time (the wait after one is nine times what it took).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from engine.context.attribution import Attribution, attribute
from engine.context.diff import CallRangeError, ContextDiff, History, diff_calls, history_from_folder
from engine.store import archive
from engine.usage.costs import folder_cost, folder_records
from engine.usage.tool_costs import ToolCosts, session_tool_costs
from engine.workbench.core import WorkbenchCore
from engine.workbench.document import OpenDocument
from engine.workbench.events import DiffReady, ToolsReady

TOP_RESULTS = 15
TOOLS_MIN_GAP = 0.5  # seconds from the start of one tool attribution to the start of the next
# coalesced attributions take at most one part in this many of the time (each reads the whole session folder: on a
# long followed session, one that took 0.3 s is followed by 2.7 s without any)
TOOLS_SHARE = 10


def message_locations(folder: Path, ids: list[str]) -> dict[str, str]:
    """Where each message of ``ids`` is: ``"live"`` (the history) or the archive day that holds it."""
    wanted = set(ids)
    out: dict[str, str] = {}
    for day in archive.list_days(folder):
        try:
            for msg in archive.read_day(folder, day, []):
                mid = str(msg.get("id") or "")
                if mid in wanted and mid not in out:
                    out[mid] = day
        except archive.ArchiveError:
            continue
    return {i: out.get(i, "live") for i in ids}


def compute_diff(folder: Path, a: int, b: int) -> ContextDiff:
    """The diff from call ``a`` to call ``b`` of the session folder (CallRangeError passes)."""
    return diff_calls(history_from_folder(folder), a, b)


def compute_tools(folder: Path, top: int = TOP_RESULTS) -> tuple[Attribution, dict[str, str], ToolCosts | None]:
    """The tokens by tool of the session folder, where each of its largest results is, and the cost by tool
    (None when the folder recorded no call)."""
    history: History = history_from_folder(folder)
    result = attribute(history, top)
    records = folder_records(folder)
    costs = session_tool_costs(history, records)
    if costs is not None:  # the whole session's cost beside the main calls' the tools share out
        costs = replace(costs, session=folder_cost(folder, records=records))
    return result, message_locations(folder, [r.message_id for r in result.largest if r.message_id]), costs


class AnalysisPart:
    """The analysis part of the service (see the module docstring): the open document, the core's events and
    tasks."""

    def __init__(self, core: WorkbenchCore, doc: OpenDocument) -> None:
        self.core = core
        self.doc = doc
        self._tools_wanted: tuple[str, Path] | None = None  # the session to attribute next (the latest asked)
        self._tools_task: asyncio.Task[Any] | None = None
        self.tools_computed = 0  # attributions computed (coalescing, seen by the tests)

    def diff_calls(self, a: int, b: int) -> asyncio.Task[Any] | None:
        """Compute the context diff from call ``a`` to call ``b`` (1-based); sends DiffReady."""
        session = self.doc.session
        if session is None:
            return None
        return self.core.tasks.spawn("diff", self._diff(session.id, session.path, a, b), replace=True)

    async def _diff(self, session_id: str, folder: Path, a: int, b: int) -> None:
        try:
            diff = await asyncio.to_thread(compute_diff, folder, a, b)
        except CallRangeError as exc:
            self.core.notice("warning", str(exc))
            return
        if self.doc.session is not None and self.doc.session.id == session_id:
            self.core.emit(DiffReady(diff, session_id))

    def tool_attribution(self) -> asyncio.Task[Any] | None:
        """Compute the tokens and the cost by tool of the open session; sends ToolsReady. While one is computed,
        the request joins it: the task returned ends after an attribution of the state as it is now."""
        session = self.doc.session
        if session is None:
            return None
        self._tools_wanted = (session.id, session.path)
        if self._tools_task is None or self._tools_task.done():
            self._tools_task = self.core.tasks.spawn("tools", self._tools())
        return self._tools_task

    async def _tools(self) -> None:
        while self._tools_wanted is not None:
            (session_id, folder), self._tools_wanted = self._tools_wanted, None
            started = time.monotonic()
            result, where, costs = await asyncio.to_thread(compute_tools, folder)
            self.tools_computed += 1
            if self.doc.session is not None and self.doc.session.id == session_id:
                self.core.emit(ToolsReady(result, where, session_id, costs))
            if self._tools_wanted is not None:  # the next one no sooner than its share of the time allows
                took = time.monotonic() - started
                await asyncio.sleep(max(0.0, TOOLS_MIN_GAP - took, (TOOLS_SHARE - 1) * took))


__all__ = ["TOP_RESULTS", "AnalysisPart", "compute_diff", "compute_tools", "message_locations"]
