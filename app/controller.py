"""The Qt bridge: holds the Qt-free :class:`engine.workbench.Workbench` and speaks Qt signals.

Every event the service sends is re-emitted as the Qt signal its type maps to (:data:`SIGNALS`,
a dict, not an ``isinstance`` chain) with the event's ``payload()``; every intent (a method) is
forwarded to the service. The service runs on the qasync loop; snapshot updates arrive already
throttled (:mod:`engine.workbench.throttle`).

Public API
----------
Signals (payloads are engine dataclasses unless said otherwise):
    sessions_listed(list)          the sessions panel's rows (SessionRow)
    session_loaded(object)         :class:`SessionView` — everything a window shows of a session
    context_state(object)          :class:`ContextState` — after any change of the history
    snapshot_changed(object)       ContextSnapshot of the next request (throttled while streaming)
    message_added(object)          MessageAdded
    text_delta(object)             TextDelta
    tool_started(object)           ToolCallStarted
    call_updated(object)           :class:`TimelineCall` — a followed view's last call gained figures: it again
    call_recorded(object)          :class:`TimelineCall` — an LLM call that happened (a timeline column): its
                                   record (the request as the engine predicted it, with the report), priced
    last_call(object, object)      estimate made before the last call, provider-reported prompt tokens
    compaction_finished(object)    :class:`Marker` — the CompactionEvent and where it goes in the chat
    compaction_failed(object)      CompactionCancelled
    error(object)                  ErrorEvent
    state_changed(str)             idle | loading | streaming | tool | compacting | importing
    turn_finished(object)          TurnFinished
    busy_changed(bool)             a turn is running
    notice(str, str)               level (info | warning | error), text for the user
    approval_requested(str, str, str)  request id, tool name, arguments (JSON)
    approvals_withdrawn()          the turn that asked was stopped
    preview_started(str)           a compaction preview is being made (the instruction)
    preview_ready(object)          engine.context.compaction.CompactionPreview: the plan and the digest, at once
                                   (``summary.model_pending``: the model's part is still being written)
    preview_summary(object)        the same preview with the model's part in (when the mode has one)
    preview_after(object)          ContextSnapshot after applying the edited summary
    preview_failed(str)            why the preview / apply did not work (the dialog stays open)
    preview_closed()               the preview was applied or discarded
    offloaded_file(object)         one tool_results file (FileRow)
    file_loaded(str, str)          path, text of an offloaded file
    archive_messages(str, list, dict)  day, archived messages, tokens by id
    archive_hits(str, list)        query, hits (engine.store.archive.ArchiveHit)
    draft_tokens(int)              the draft's cost (calibrated like the chart)
    settings_changed(object)       Settings now in force
    model_suggestions(list)        model names for the settings dialog
    sources_listed(object, object) two lists: the agent sessions on this machine (SourceRow) and the files the
                                   scan could not read (ProblemRow; engine.workbench.rows)
    follow_changed(bool, str, bool)  following a source file started (True, its path, live) or stopped
                                   (False, "", False); sent again when ``live`` (written < 2 min ago) changes
    messages_retracted(list)       ids of a followed view's last messages that changed: removed from the chat,
                                   their new versions come as message_added
    diff_ready(object)             engine.context.diff.ContextDiff — the answer to diff_calls(a, b)
    tools_ready(object, dict, object)  engine.context.attribution.Attribution, message id → "live" | archive
                                   day of its largest results, engine.usage.tool_costs.ToolCosts | None (the
                                   cost by tool) — the answer to tool_attribution()
    imported_changed(object)       engine.workbench.imported.ImportFacts | None — a followed view's import
                                   record changed (the agent's own cost, its tool definitions)
    usage_ready(object)            engine.usage.report.UsageReport — the answer to refresh_usage(since, until)
    usage_progress(object)         engine.usage.index.IndexProgress — how far the update of that refresh has read
Methods: the service's intents (see :mod:`engine.workbench.service`), forwarded.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Signal

from engine.context.conversation import Session, SessionStore
from engine.model.snapshot import ContextSnapshot
from engine.store.archive import merge_archived
from engine.store.config import Settings
from engine.workbench import events as ev
from engine.workbench.rows import SessionRow
from engine.workbench.service import Workbench
from engine.workbench.views import ContextState, Marker, SessionView, file_row, session_row

if TYPE_CHECKING:
    from engine.agent import Agent
    from engine.context.compaction import CompactionPreview

SIGNALS: dict[type, str] = {
    ev.SessionsListed: "sessions_listed",
    ev.SessionLoaded: "session_loaded",
    ev.ContextStateChanged: "context_state",
    ev.SnapshotChanged: "snapshot_changed",
    ev.MessageAdded: "message_added",
    ev.TextDelta: "text_delta",
    ev.ToolCallStarted: "tool_started",
    ev.CallRecorded: "call_recorded",
    ev.CallUpdated: "call_updated",
    ev.LastCall: "last_call",
    ev.CompactionFinished: "compaction_finished",
    ev.CompactionCancelled: "compaction_failed",
    ev.ErrorEvent: "error",
    ev.StateChanged: "state_changed",
    ev.TurnFinished: "turn_finished",
    ev.BusyChanged: "busy_changed",
    ev.Notice: "notice",
    ev.ApprovalRequested: "approval_requested",
    ev.ApprovalsWithdrawn: "approvals_withdrawn",
    ev.PreviewStarted: "preview_started",
    ev.PreviewReady: "preview_ready",
    ev.PreviewSummary: "preview_summary",
    ev.PreviewAfter: "preview_after",
    ev.PreviewFailed: "preview_failed",
    ev.PreviewClosed: "preview_closed",
    ev.OffloadedFileAdded: "offloaded_file",
    ev.FileLoaded: "file_loaded",
    ev.ArchiveMessages: "archive_messages",
    ev.ArchiveHits: "archive_hits",
    ev.DraftTokens: "draft_tokens",
    ev.SettingsChanged: "settings_changed",
    ev.ModelSuggestions: "model_suggestions",
    ev.SourcesListed: "sources_listed",
    ev.FollowChanged: "follow_changed",
    ev.MessagesRetracted: "messages_retracted",
    ev.DiffReady: "diff_ready",
    ev.ToolsReady: "tools_ready",
    ev.ImportChanged: "imported_changed",
    ev.UsageReady: "usage_ready",
    ev.UsageProgress: "usage_progress",
}
"""Which signal each service event becomes (events not listed reach no widget: ToolCallFinished,
CompactionStarted, LlmReady)."""


def _payload(event: Any) -> tuple[Any, ...]:
    if isinstance(event, ev.WorkbenchEvent):
        return event.payload()
    if isinstance(event, ev.StateChanged):
        return (event.state,)
    return (event,)  # the engine's own events travel as they are


class Controller(QObject):
    """The window's view of the service (see the module docstring)."""

    sessions_listed = Signal(list)
    session_loaded = Signal(object)
    context_state = Signal(object)
    snapshot_changed = Signal(object)
    message_added = Signal(object)
    text_delta = Signal(object)
    tool_started = Signal(object)
    call_recorded = Signal(object)
    call_updated = Signal(object)
    last_call = Signal(object, object)
    compaction_finished = Signal(object)
    compaction_failed = Signal(object)
    error = Signal(object)
    state_changed = Signal(str)
    turn_finished = Signal(object)
    busy_changed = Signal(bool)
    notice = Signal(str, str)
    approval_requested = Signal(str, str, str)
    approvals_withdrawn = Signal()
    preview_started = Signal(str)
    preview_ready = Signal(object)
    preview_summary = Signal(object)
    preview_after = Signal(object)
    preview_failed = Signal(str)
    preview_closed = Signal()
    offloaded_file = Signal(object)  # FileRow
    file_loaded = Signal(str, str)
    archive_messages = Signal(str, list, dict)
    archive_hits = Signal(str, list)
    draft_tokens = Signal(int)
    settings_changed = Signal(object)
    model_suggestions = Signal(list)
    sources_listed = Signal(object, object)  # lists, passed whole (a path that is not UTF-8 survives)
    follow_changed = Signal(bool, str, bool)
    messages_retracted = Signal(list)
    diff_ready = Signal(object)
    tools_ready = Signal(object, dict, object)
    imported_changed = Signal(object)
    usage_ready = Signal(object)
    usage_progress = Signal(object)

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        store: SessionStore | None = None,
        workspace: Path | None = None,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.service = Workbench(settings, store=store, workspace=workspace, listener=self._on_event)

    def _on_event(self, event: Any) -> None:
        name = SIGNALS.get(type(event))
        if name is not None:
            getattr(self, name).emit(*_payload(event))

    # ------------------------------------------------------------------ the service's state

    @property
    def settings(self) -> Settings:
        return self.service.settings

    @property
    def store(self) -> SessionStore:
        return self.service.store

    @property
    def session(self) -> Session | None:
        return self.service.session

    @property
    def agent(self) -> Agent | None:
        return self.service.agent

    @property
    def busy(self) -> bool:
        return self.service.busy

    @property
    def state(self) -> str:
        return self.service.state

    @property
    def preview(self) -> CompactionPreview | None:
        return self.service.preview

    def task(self, name: str) -> asyncio.Task[Any] | None:
        """The running task of that name (``turn``, ``preview``, ``apply``, ``open``, ``warmup`` …)."""
        return self.service.task(name)

    def next_snapshot(self) -> ContextSnapshot | None:
        return self.service.next_snapshot()

    def pending_approvals(self) -> list[str]:
        return self.service.pending_approvals()

    def context_report(self) -> str:
        return self.service.context_report()

    def workspace(self) -> Path:
        return self.service.workspace()

    # ------------------------------------------------------------------ intents

    def start(self) -> None:
        self.service.start()

    def list_sessions(self) -> list[SessionRow]:
        return self.service.list_sessions()

    def new_session(self) -> None:
        self.service.new_session()

    def open_session(self, session_id: str) -> None:
        self.service.open_session(session_id)

    def rename_session(self, session_id: str, title: str) -> None:
        self.service.rename_session(session_id, title)

    def delete_session(self, session_id: str) -> None:
        self.service.delete_session(session_id)

    def import_transcript(self, path: str) -> None:
        self.service.import_transcript(path)

    def send(self, text: str) -> bool:
        return self.service.send(text)

    def stop(self) -> None:
        self.service.stop()

    def answer_approval(self, request_id: str, allowed: bool) -> None:
        self.service.answer_approval(request_id, allowed)

    def run_command(self, name: str, arg: str = "") -> None:
        self.service.run_command(name, arg)

    def clear_session(self) -> None:
        self.service.clear_session()

    def start_preview(self, instruction: str = "") -> bool:
        return self.service.start_preview(instruction)

    def regenerate_preview(self, instruction: str = "") -> None:
        self.service.regenerate_preview(instruction)

    def cancel_preview(self) -> None:
        self.service.cancel_preview()

    def discard_preview(self) -> None:
        self.service.discard_preview()

    def edit_preview(self, summary: str) -> None:
        self.service.edit_preview(summary)

    def apply_preview(self, summary: str | None = None) -> None:
        self.service.apply_preview(summary)

    def undo_compaction(self, marker_id: str | None = None) -> None:
        self.service.undo_compaction(marker_id)

    def read_offloaded(self, path: str) -> None:
        self.service.read_offloaded(path)

    def load_archive_day(self, day: str) -> None:
        self.service.load_archive_day(day)

    def search_archive(self, query: str) -> None:
        self.service.search_archive(query)

    def restore_messages(self, ids: list[str]) -> None:
        self.service.restore_messages(ids)

    def count_draft(self, text: str) -> int:
        return self.service.count_draft(text)

    def apply_settings(self, settings: Settings) -> bool:
        return self.service.apply_settings(settings)

    def api_key_status(self) -> str:
        return self.service.api_key_status()

    def store_api_key(self, key: str) -> bool:
        return self.service.store_api_key(key)

    def forget_api_key(self) -> bool:
        return self.service.forget_api_key()

    def window_description(self) -> str:
        return self.service.window_description()

    # ------------------------------------------------------------------ sources (engine.workbench.sources)

    def scan_sources(self, refresh: bool = False) -> None:
        self.service.scan_sources(refresh)

    def start_source_scans(self, interval: float = 30.0) -> None:
        self.service.start_source_scans(interval)

    def open_source(self, path: str) -> None:
        self.service.open_source(path)

    def continue_source(self, path: str | None = None) -> None:
        self.service.continue_source(path)

    def open_subagent(self, rel: str) -> None:
        self.service.open_subagent(rel)

    def file_changed(self, path: str) -> None:
        self.service.file_changed(path)

    def open_parent(self) -> None:
        self.service.open_parent()

    def diff_calls(self, a: int, b: int) -> None:
        self.service.diff_calls(a, b)

    def tool_attribution(self) -> None:
        self.service.tool_attribution()

    def refresh_usage(self, since: str | None = None, until: str | None = None, update: bool = True,
                      quiet: bool = False, days: int | None = None) -> None:
        """What the agents spent from ``since`` to ``until`` (ISO days), or over the last ``days`` days up to today
        (UTC; 0: all time) (engine.workbench.usage; ``quiet``: the live refresh, answered only when the update
        read something)."""
        self.service.usage.refresh(since, until, update, quiet, days)

    async def shutdown(self) -> None:
        """Cancel everything and close the session (the window is closing)."""
        await self.service.shutdown()


__all__ = [
    "SIGNALS",
    "ContextState",
    "Controller",
    "Marker",
    "SessionView",
    "file_row",
    "merge_archived",
    "session_row",
]
