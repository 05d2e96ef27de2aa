"""Turns: send, stop, approvals, the draft's cost, and the engine's events turned into the service's.

The engine's events are dispatched by type (:meth:`TurnsPart._handlers`), not by an ``isinstance``
chain. Snapshot updates while streaming go through the one throttle (:mod:`engine.workbench.throttle`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from engine.model.events import (
    AgentState,
    CompactionCancelled,
    CompactionEvent,
    CompactionStarted,
    ContextUpdated,
    ErrorEvent,
    Event,
    MessageAdded,
    StateChanged,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
)
from engine.model.records import CompactionRecord, ContextRecord
from engine.usage.costs import priced_call
from engine.workbench.core import WorkbenchCore
from engine.workbench.display import Display
from engine.workbench.document import TURN, OpenDocument
from engine.workbench.events import (
    BusyChanged,
    CallRecorded,
    CompactionFinished,
    DraftTokens,
    LastCall,
    OffloadedFileAdded,
)
from engine.workbench.runtime import LlmRuntime
from engine.workbench.views import Marker, file_row


class TurnsPart:
    """The turn part of the service: the core's events, tasks and approvals, the open document, the runtime and
    the display (which keeps the running turn's partial answer, :attr:`Display.turn`); :meth:`on_engine_event`
    is the agent's event sink."""

    def __init__(self, core: WorkbenchCore, doc: OpenDocument, runtime: LlmRuntime, display: Display,
                 relist: Callable[[], Coroutine[Any, Any, Any]]) -> None:
        self.core = core
        self._relist = relist  # the sessions part's: the store listed in a worker thread
        self.doc = doc
        self.runtime = runtime
        self.display = display

    def _handlers(self) -> dict[type[Event], Callable[[Any], None]]:
        return {
            TextDelta: self._on_text_delta,
            MessageAdded: self._on_message_added,
            StateChanged: self._on_state,
            ToolCallStarted: self.core.emit,
            ToolCallFinished: self._on_tool_finished,
            ContextUpdated: self._on_context_updated,
            CompactionStarted: self._on_compaction_started,
            CompactionEvent: self._on_compaction,
            CompactionCancelled: self._on_compaction_failed,
            ErrorEvent: self._on_error,
            TurnFinished: self.core.emit,
        }

    # ------------------------------------------------------------------ turns

    def send(self, text: str) -> bool:
        """Start a turn with ``text``; False (and a notice) when one is running, nothing is open or a view is."""
        if self.doc.refuses("send"):
            return False
        if self.doc.session is None or self.doc.agent is None:
            self.core.notice("warning", "no session is open")
            return False
        if self.doc.busy:
            self.core.notice("warning", "a turn is running: wait for it or press Stop")
            return False
        self.core.tasks.spawn(TURN, self._run_turn(text))
        self.core.emit(BusyChanged(True))
        return True

    async def _run_turn(self, text: str) -> None:
        from engine.agent import AgentError

        try:
            await self.runtime.await_llm()
            if self.runtime.agent_stale or (self.runtime.needs_llm_for_window() and not self.runtime.llm_ready):
                if self.runtime.needs_llm_for_window() and not self.runtime.llm_ready:
                    self.core.set_state(AgentState.LOADING)  # the model's window comes from litellm's model info
                    await asyncio.shield(self.runtime.warm_up())
                self.doc.make_agent()
            agent = self.doc.agent
            assert agent is not None
            await agent.run_turn(text)
        except AgentError as exc:
            self.core.notice("error", str(exc))
        finally:
            self._end_turn()

    def _end_turn(self) -> None:
        self.display.turn.partial = []
        self.core.approvals.withdraw()
        if self.core.state != "compacting":
            self.core.set_state(AgentState.IDLE)
        self.core.emit(BusyChanged(False))
        if self.doc.session is not None and not self.doc.session.closed:
            if self.runtime.agent_stale:
                self.doc.make_agent()
            self.display.throttle.cancel()  # the final snapshot comes with the state
            self.display.emit_state()
            # the sessions list after a turn (its title and time changed), read off the event loop
            self.core.tasks.spawn("list-sessions", self._relist(), replace=True)

    def stop(self) -> None:
        """Cancel the running turn (and a background compaction it started)."""
        self.core.tasks.cancel(TURN)
        agent = self.doc.agent
        if agent is not None and agent.auto_task is not None and not agent.auto_task.done():
            agent.auto_task.cancel()
        self.core.approvals.withdraw()

    # ------------------------------------------------------------------ approvals and the draft

    def answer_approval(self, request_id: str, allowed: bool) -> None:
        self.core.approvals.answer(request_id, allowed)

    def pending_approvals(self) -> list[str]:
        return self.core.approvals.pending()

    def count_draft(self, text: str) -> int:
        """The draft's cost in the units of the chart (calibrated once the provider reported)."""
        self.display.draft = text
        session = self.doc.session
        if session is None:
            return 0
        n = session.estimator.text(text) if text else 0
        ratio = session.calibrator.ratio
        if ratio and n:
            n = round(n * ratio)
        self.core.emit(DraftTokens(n))
        self.display.throttle.schedule()
        return n

    # ------------------------------------------------------------------ engine events

    def on_engine_event(self, event: Event) -> None:
        handler = self._handlers().get(type(event))
        if handler is not None:
            handler(event)

    def _on_text_delta(self, event: TextDelta) -> None:
        if event.message_id != self.display.turn.stream_id:
            self.display.turn.stream_id = event.message_id
            self.display.turn.partial = []
        if not event.reasoning:
            self.display.turn.partial.append(event.text)
        self.core.emit(event)
        self.display.throttle.schedule()

    def _on_message_added(self, event: MessageAdded) -> None:
        mid = str(event.message.get("id"))
        if mid == self.display.turn.stream_id:
            self.display.turn.partial = []
        if mid not in self.display.live_ids:
            self.display.live_ids.append(mid)
        self.core.emit(event)
        self.display.throttle.schedule()

    def _on_state(self, event: StateChanged) -> None:
        if event.state == "streaming":
            self.display.turn.partial = []
            self.display.turn.stream_id = ""
        self.core.set_state(event.state)

    def _on_tool_finished(self, event: ToolCallFinished) -> None:
        self.core.emit(event)
        if event.offload_path:
            self._announce_file(event.offload_path)

    def _on_context_updated(self, event: ContextUpdated) -> None:
        call = priced_call(ContextRecord.from_snapshot(event.snapshot))
        self.core.emit(CallRecorded(call))
        self.core.emit(LastCall(call.snapshot.prompt, event.snapshot.provider_prompt_tokens))

    def _on_compaction_started(self, event: CompactionStarted) -> None:
        self.core.set_state(AgentState.COMPACTING)
        self.core.emit(event)

    def _on_compaction_failed(self, event: CompactionCancelled) -> None:
        self.core.emit(event)
        if event.reason != "cancelled":
            self.core.notice("warning", f"compaction ({event.trigger}) failed: {event.reason}")
        self.core.set_state(AgentState.IDLE if not self.doc.busy else self.core.state)

    def _on_error(self, event: ErrorEvent) -> None:
        self.core.emit(event)
        if not event.retrying:
            self.core.notice("error", event.message)

    def _on_compaction(self, event: CompactionEvent) -> None:
        session = self.doc.session
        if session is None or session.closed:
            return
        now = {str(m.get("id")) for m in session.messages}
        gone = [i for i in self.display.live_ids if i not in now]
        stack = session.undo_stack()
        undoable = bool(stack) and stack[-1] == event.id and event.result not in ("undone", "failed", "nothing")
        marker = Marker(CompactionRecord.from_event(event), gone[-1] if gone else None, undoable)
        self.core.emit(CompactionFinished(marker))
        if not self.doc.busy and self.core.task("preview") is None:
            self.core.set_state(AgentState.IDLE)
        self.display.emit_state()

    def _announce_file(self, path: str) -> None:
        from engine.context.offload import list_offloaded

        session = self.doc.session
        if session is None:
            return
        for f in list_offloaded(session.path):
            if f.path == path:
                self.core.emit(OffloadedFileAdded(file_row(f, session)))
                return


__all__ = ["TurnsPart"]
