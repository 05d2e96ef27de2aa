"""The Workbench service: everything the window (and the CLI) does with the engine, without Qt.

It owns the session store, the open session (locked: one writer per folder) and its
:class:`engine.agent.Agent`; runs every coroutine as a named cancellable task
(:class:`engine.workbench.tasks.TaskGroup`), so Stop cancels the turn and :meth:`Workbench.shutdown`
everything; asks tool approvals through futures (:class:`engine.workbench.approvals.Approvals`);
and sends typed events (:mod:`engine.workbench.events`, plus the engine's own) to its listeners.
It runs on any asyncio loop (a plain one in tests and the CLI, qasync's in the app).

The service is made of parts it holds, each with the state it owns and the objects it uses passed in:
the shared :class:`engine.workbench.core.WorkbenchCore` (settings, store, listeners, tasks, approvals,
the agent's state), the open document (:class:`engine.workbench.document.OpenDocument`: the open
session or view and its agent, the only way to open, replace or close them, the read-only and busy
guards), the LLM runtime (:class:`engine.workbench.runtime.LlmRuntime`), the display
(:class:`engine.workbench.display.Display`: snapshots, the context state, the throttle), and the parts
on them — ``compaction`` (the open preview), ``sessions`` (needs compaction), ``turns``, ``commands``
(sessions, compaction), ``sources`` (sessions, compaction; the scan's and the follow loop's state),
``inspector``, ``analysis``, ``keys``, ``usage``. :class:`Workbench` is the one entry point the Qt
bridge and the CLI use: each intent below is a method here that hands over to the one part that does
it. Whatever would change a read-only view asks the one policy (:mod:`engine.workbench.policy`).

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

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.context.conversation import SessionStore
from engine.store.config import Settings
from engine.workbench.analysis import AnalysisPart
from engine.workbench.commands import CommandsPart
from engine.workbench.compaction_ui import CompactionPart
from engine.workbench.core import Listener, WorkbenchCore
from engine.workbench.display import Display
from engine.workbench.document import OpenDocument
from engine.workbench.inspector import InspectorPart
from engine.workbench.keys import KeysPart
from engine.workbench.rows import SessionRow
from engine.workbench.runtime import LlmRuntime
from engine.workbench.sessions import SessionsPart
from engine.workbench.sources import SCAN_INTERVAL, SourcesPart
from engine.workbench.throttle import SNAPSHOT_INTERVAL_S, Throttle
from engine.workbench.turns import TurnsPart
from engine.workbench.usage import UsagePart
from engine.workbench.views import SessionView

if TYPE_CHECKING:
    from engine.agent import Agent
    from engine.context.compaction import CompactionPreview
    from engine.context.conversation import Session
    from engine.model.snapshot import ContextSnapshot
    from engine.workbench.source_views import SourceView
    from engine.workbench.tasks import TaskGroup


class Workbench:
    """One service per window (see the module docstring): the parts, and the intents handed to them."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        store: SessionStore | None = None,
        workspace: Path | None = None,
        listener: Listener | None = None,
        snapshot_interval: float = SNAPSHOT_INTERVAL_S,
    ) -> None:
        core = WorkbenchCore(settings, store=store, listener=listener)
        self.core = core
        self.runtime = LlmRuntime(core.current_settings, core.tasks, core.emit, core.notice, core.set_state,
                                  workspace=workspace)
        self.doc = OpenDocument(
            core.tasks,
            lambda session: self.runtime.agent_for(session, core.approvals.ask, self.turns.on_engine_event),
            core.warn,
        )
        self.display = Display(self.doc, core.current_settings, core.emit, snapshot_interval)
        doc, runtime, display = self.doc, self.runtime, self.display
        self.compaction = CompactionPart(core, doc, runtime, display)
        self.sessions = SessionsPart(core, doc, runtime, display, self.compaction)
        self.turns = TurnsPart(core, doc, runtime, display, self.sessions.relist)
        self.commands = CommandsPart(core, doc, display, self.sessions, self.compaction)
        self.sources = SourcesPart(core, doc, runtime, display, self.sessions, self.compaction)
        self.inspector = InspectorPart(core, doc)
        self.analysis = AnalysisPart(core, doc)
        self.keys = KeysPart(core, doc, runtime, display)
        self.usage = UsagePart(core.tasks, core.emit, core.current_settings)  # the Usage view's queries
        runtime.ready_hooks += [self._on_llm_ready, self.sources.reread_observed_view]

    def _on_llm_ready(self) -> None:
        """litellm is loaded: the open session's window (looked up while it was loading) is known now."""
        if self.doc.session is not None and not self.doc.busy:
            if self.runtime.needs_llm_for_window():
                self.doc.make_agent()
            self.display.emit_state()  # windows looked up while litellm was loading were provisional

    # ------------------------------------------------------------------ state (the core's)

    @property
    def settings(self) -> Settings:
        return self.core.settings

    @property
    def store(self) -> SessionStore:
        return self.core.store

    @property
    def session(self) -> Session | None:
        return self.doc.session

    @property
    def agent(self) -> Agent | None:
        return self.doc.agent

    @property
    def view(self) -> SourceView | None:
        """The read-only view open now, if any."""
        return self.doc.view

    @property
    def tasks(self) -> TaskGroup:
        return self.core.tasks

    @property
    def throttle(self) -> Throttle:
        return self.display.throttle

    @property
    def busy(self) -> bool:
        return self.doc.busy

    @property
    def state(self) -> str:
        return self.core.state

    @property
    def llm_ready(self) -> bool:
        return self.runtime.llm_ready

    @property
    def preview(self) -> CompactionPreview | None:
        return self.compaction.preview

    def subscribe(self, listener: Listener) -> None:
        self.core.subscribe(listener)

    def task(self, name: str) -> asyncio.Task[Any] | None:
        """The running task of that name (``turn``, ``preview``, ``apply``, ``open``, ``warmup`` …)."""
        return self.core.task(name)

    def warm_up(self) -> asyncio.Task[Any]:
        return self.runtime.warm_up()

    def workspace(self) -> Path:
        return self.runtime.workspace()

    def next_snapshot(self) -> ContextSnapshot | None:
        return self.display.next_snapshot()

    # ------------------------------------------------------------------ sessions

    def start(self) -> None:
        """List and open the sessions, load litellm in the background, remove the views a crash left."""
        self.sessions.start()
        self.sources.remove_stale_views()

    def list_sessions(self) -> list[SessionRow]:
        return self.sessions.list_sessions()

    def new_session(self) -> asyncio.Task[Any]:
        return self.sessions.new_session()

    def open_session(self, session_id: str) -> asyncio.Task[Any] | None:
        return self.sessions.open_session(session_id)

    def rename_session(self, session_id: str, title: str) -> None:
        self.sessions.rename_session(session_id, title)

    def delete_session(self, session_id: str) -> asyncio.Task[Any]:
        return self.sessions.delete_session(session_id)

    def import_transcript(self, path: str | Path) -> asyncio.Task[Any]:
        return self.sessions.import_transcript(path)

    def session_view(self) -> SessionView:
        return self.sessions.session_view()

    # ------------------------------------------------------------------ turns and commands

    def send(self, text: str) -> bool:
        return self.turns.send(text)

    def stop(self) -> None:
        self.turns.stop()

    def answer_approval(self, request_id: str, allowed: bool) -> None:
        self.turns.answer_approval(request_id, allowed)

    def pending_approvals(self) -> list[str]:
        return self.turns.pending_approvals()

    def count_draft(self, text: str) -> int:
        return self.turns.count_draft(text)

    def run_command(self, name: str, arg: str = "") -> None:
        self.commands.run_command(name, arg)

    def context_report(self) -> str:
        return self.commands.context_report()

    # ------------------------------------------------------------------ compaction

    def clear_session(self) -> asyncio.Task[Any] | None:
        return self.compaction.clear_session()

    def start_preview(self, instruction: str = "") -> bool:
        return self.compaction.start_preview(instruction)

    def regenerate_preview(self, instruction: str = "") -> None:
        self.compaction.regenerate_preview(instruction)

    def cancel_preview(self) -> None:
        self.compaction.cancel_preview()

    def discard_preview(self) -> None:
        self.compaction.discard_preview()

    def edit_preview(self, summary: str) -> None:
        self.compaction.edit_preview(summary)

    def apply_preview(self, summary: str | None = None) -> asyncio.Task[Any] | None:
        return self.compaction.apply_preview(summary)

    def undo_compaction(self, marker_id: str | None = None) -> asyncio.Task[Any] | None:
        return self.compaction.undo_compaction(marker_id)

    def restore_messages(self, ids: list[str]) -> asyncio.Task[Any] | None:
        return self.compaction.restore_messages(ids)

    # ------------------------------------------------------------------ inspector and analysis

    def read_offloaded(self, path: str) -> None:
        self.inspector.read_offloaded(path)

    def load_archive_day(self, day: str) -> None:
        self.inspector.load_archive_day(day)

    def search_archive(self, query: str) -> None:
        self.inspector.search_archive(query)

    def diff_calls(self, a: int, b: int) -> asyncio.Task[Any] | None:
        return self.analysis.diff_calls(a, b)

    def tool_attribution(self) -> asyncio.Task[Any] | None:
        return self.analysis.tool_attribution()

    # ------------------------------------------------------------------ settings and keys

    def apply_settings(self, settings: Settings) -> bool:
        return self.keys.apply_settings(settings)

    def api_key_status(self) -> str:
        return self.keys.api_key_status()

    def store_api_key(self, key: str) -> bool:
        return self.keys.store_api_key(key)

    def forget_api_key(self) -> bool:
        return self.keys.forget_api_key()

    def window_description(self) -> str:
        return self.keys.window_description()

    # ------------------------------------------------------------------ sources

    def scan_sources(self, refresh: bool = False) -> asyncio.Task[Any]:
        return self.sources.scan_sources(refresh)

    def start_source_scans(self, interval: float = SCAN_INTERVAL) -> asyncio.Task[Any]:
        return self.sources.start_source_scans(interval)

    def open_source(self, path: str | Path) -> asyncio.Task[Any]:
        return self.sources.open_source(path)

    def continue_source(self, path: str | Path | None = None) -> asyncio.Task[Any] | None:
        return self.sources.continue_source(path)

    def offer_compaction(self) -> bool:
        return self.sources.offer_compaction()

    def open_subagent(self, rel: str) -> asyncio.Task[Any] | None:
        return self.sources.open_subagent(rel)

    def open_parent(self) -> asyncio.Task[Any] | None:
        return self.sources.open_parent()

    def file_changed(self, path: str) -> None:
        self.sources.file_changed(path)

    # ------------------------------------------------------------------ the end

    async def shutdown(self) -> None:
        """Cancel everything and close the session (the window is closing)."""
        self.display.throttle.cancel()
        await self.core.tasks.close()
        self.core.approvals.withdraw()
        view = self.doc.close()
        if view is not None:
            from engine.workbench.source_views import remove_view

            remove_view(view.root)


__all__ = ["Workbench"]
