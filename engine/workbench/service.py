"""The Workbench service: everything the window (and the CLI) does with the engine, without Qt.

It owns the session store, the open session (locked: one writer per folder) and its
:class:`engine.agent.Agent`; runs every coroutine as a named cancellable task
(:class:`engine.workbench.tasks.TaskGroup`), so Stop cancels the turn and :meth:`Workbench.shutdown`
everything; asks tool approvals through futures (:class:`engine.workbench.approvals.Approvals`);
and sends typed events (:mod:`engine.workbench.events`, plus the engine's own) to its listeners.
It runs on any asyncio loop (a plain one in tests and the CLI, qasync's in the app).

Intents: start(), list_sessions(), new_session(), open_session(id), rename_session(id, title),
delete_session(id), import_transcript(path), send(text), stop(), answer_approval(id, allowed),
run_command(name, arg), clear_session(), start_preview(instruction), regenerate_preview(instruction),
cancel_preview(), discard_preview(), edit_preview(summary), apply_preview(summary),
undo_compaction(marker_id), restore_messages(ids), read_offloaded(path), load_archive_day(day),
search_archive(query), count_draft(text), apply_settings(settings), store_api_key(key),
forget_api_key(), api_key_status(), window_description(), scan_sources(refresh), start_source_scans(interval),
open_source(path), continue_source(), open_subagent(rel), open_parent(), file_changed(path), diff_calls(a, b),
tool_attribution(), shutdown() (async).
"""

from __future__ import annotations

from engine.workbench.analysis import Analysis
from engine.workbench.commands import Commands
from engine.workbench.inspector import Inspector
from engine.workbench.keys import Keys
from engine.workbench.sources import Sources
from engine.workbench.turns import Turns


class Workbench(Sources, Commands, Turns, Inspector, Keys, Analysis):
    """One service per window (see the module docstring)."""

    async def shutdown(self) -> None:
        """Cancel everything and close the session (the window is closing)."""
        self.throttle.cancel()
        await self.tasks.close()
        self.approvals.withdraw()
        if self.session is not None:
            self.session.close()
        view, self._view = self._view, None
        if view is not None:
            from engine.workbench.source_views import remove_view

            remove_view(view.root)


__all__ = ["Workbench"]
