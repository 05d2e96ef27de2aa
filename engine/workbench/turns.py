"""Turns: send, stop, approvals, the draft's cost, and the engine's events turned into the service's.

The engine's events are dispatched by type (:attr:`Turns._handlers`), not by an ``isinstance``
chain. Snapshot updates while streaming go through the one throttle (:mod:`engine.workbench.throttle`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import asdict
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
from engine.workbench.core import WorkbenchCore
from engine.workbench.events import (
    BusyChanged,
    CallRecorded,
    CompactionFinished,
    DraftTokens,
    LastCall,
    OffloadedFileAdded,
    SessionsListed,
)
from engine.workbench.views import Marker, call_record, file_dict, prompt_of, session_dict


class Turns(WorkbenchCore):
    """The turn part of the service."""

    def _handlers(self) -> dict[type[Event], Callable[[Any], None]]:
        return {
            TextDelta: self._on_text_delta,
            MessageAdded: self._on_message_added,
            StateChanged: self._on_state,
            ToolCallStarted: self.emit,
            ToolCallFinished: self._on_tool_finished,
            ContextUpdated: self._on_context_updated,
            CompactionStarted: self._on_compaction_started,
            CompactionEvent: self._on_compaction,
            CompactionCancelled: self._on_compaction_failed,
            ErrorEvent: self._on_error,
            TurnFinished: self.emit,
        }

    # ------------------------------------------------------------------ turns

    def send(self, text: str) -> bool:
        """Start a turn with ``text``; False (and a notice) when one is running, nothing is open or a view is."""
        if self.refuse_if_read_only("send"):
            return False
        if self.session is None or self.agent is None:
            self.notice("warning", "no session is open")
            return False
        if self.busy:
            self.notice("warning", "a turn is running: wait for it or press Stop")
            return False
        self.tasks.spawn("turn", self._run_turn(text))
        self.emit(BusyChanged(True))
        return True

    async def _run_turn(self, text: str) -> None:
        from engine.agent import AgentError

        try:
            await self._await_llm()
            if self._agent_stale or (self._needs_llm_for_window() and not self._llm_ready):
                if self._needs_llm_for_window() and not self._llm_ready:
                    self._set_state(AgentState.LOADING)  # the model's window comes from litellm's model info
                    await asyncio.shield(self.warm_up())
                self._make_agent()
            agent = self.agent
            assert agent is not None
            await agent.run_turn(text)
        except AgentError as exc:
            self.notice("error", str(exc))
        finally:
            self._end_turn()

    def _end_turn(self) -> None:
        self._turn.partial = []
        self.approvals.withdraw()
        if self._state != "compacting":
            self._set_state(AgentState.IDLE)
        self.emit(BusyChanged(False))
        if self.session is not None and not self.session.closed:
            if self._agent_stale:
                self._make_agent()
            self.throttle.cancel()  # the final snapshot comes with the state
            self._emit_state()
            self.emit(SessionsListed([session_dict(i) for i in self.store.list()]))

    def stop(self) -> None:
        """Cancel the running turn (and a background compaction it started)."""
        self.tasks.cancel("turn")
        if self.agent is not None and self.agent.auto_task is not None and not self.agent.auto_task.done():
            self.agent.auto_task.cancel()
        self.approvals.withdraw()

    # ------------------------------------------------------------------ approvals and the draft

    def answer_approval(self, request_id: str, allowed: bool) -> None:
        self.approvals.answer(request_id, allowed)

    def pending_approvals(self) -> list[str]:
        return self.approvals.pending()

    def count_draft(self, text: str) -> int:
        """The draft's cost in the units of the chart (calibrated once the provider reported)."""
        self._draft = text
        session = self.session
        if session is None:
            return 0
        n = session.estimator.text(text) if text else 0
        ratio = session.calibrator.ratio
        if ratio and n:
            n = round(n * ratio)
        self.emit(DraftTokens(n))
        self.throttle.schedule()
        return n

    # ------------------------------------------------------------------ engine events

    def _on_engine_event(self, event: Event) -> None:
        handler = self._handlers().get(type(event))
        if handler is not None:
            handler(event)

    def _on_text_delta(self, event: TextDelta) -> None:
        if event.message_id != self._turn.stream_id:
            self._turn.stream_id = event.message_id
            self._turn.partial = []
        if not event.reasoning:
            self._turn.partial.append(event.text)
        self.emit(event)
        self.throttle.schedule()

    def _on_message_added(self, event: MessageAdded) -> None:
        mid = str(event.message.get("id"))
        if mid == self._turn.stream_id:
            self._turn.partial = []
        if mid not in self._live_ids:
            self._live_ids.append(mid)
        self.emit(event)
        self.throttle.schedule()

    def _on_state(self, event: StateChanged) -> None:
        if event.state == "streaming":
            self._turn.partial = []
            self._turn.stream_id = ""
        self._set_state(event.state)

    def _on_tool_finished(self, event: ToolCallFinished) -> None:
        self.emit(event)
        if event.offload_path:
            self._announce_file(event.offload_path)

    def _on_context_updated(self, event: ContextUpdated) -> None:
        data = call_record(event.snapshot)
        self.emit(CallRecorded(data))
        self.emit(LastCall(prompt_of(data), event.snapshot.provider_prompt_tokens))

    def _on_compaction_started(self, event: CompactionStarted) -> None:
        self._set_state(AgentState.COMPACTING)
        self.emit(event)

    def _on_compaction_failed(self, event: CompactionCancelled) -> None:
        self.emit(event)
        if event.reason != "cancelled":
            self.notice("warning", f"compaction ({event.trigger}) failed: {event.reason}")
        self._set_state(AgentState.IDLE if not self.busy else self._state)

    def _on_error(self, event: ErrorEvent) -> None:
        self.emit(event)
        if not event.retrying:
            self.notice("error", event.message)

    def _on_compaction(self, event: CompactionEvent) -> None:
        session = self.session
        if session is None or session.closed:
            return
        now = {str(m.get("id")) for m in session.messages}
        gone = [i for i in self._live_ids if i not in now]
        stack = session.undo_stack()
        undoable = bool(stack) and stack[-1] == event.id and event.result not in ("undone", "failed", "nothing")
        self.emit(CompactionFinished(Marker(asdict(event), gone[-1] if gone else None, undoable)))
        if not self.busy and self.task("preview") is None:
            self._set_state(AgentState.IDLE)
        self._emit_state()

    def _announce_file(self, path: str) -> None:
        from engine.context.offload import list_offloaded

        session = self.session
        if session is None:
            return
        for f in list_offloaded(session.path):
            if f.path == path:
                self.emit(OffloadedFileAdded(file_dict(f, session)))
                return


__all__ = ["Turns"]
