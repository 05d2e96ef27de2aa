"""Manual compaction as the user drives it: preview (plan + digest at once, the model's part after),
edit, apply, discard, undo, ``/clear`` (through :meth:`Compactor.clear`) and restore from the archive.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from engine.model.events import AgentState
from engine.store import archive
from engine.store.session import SessionError
from engine.workbench.core import WorkbenchCore, one_line
from engine.workbench.display import Display
from engine.workbench.document import OpenDocument
from engine.workbench.events import (
    PreviewAfter,
    PreviewClosed,
    PreviewFailed,
    PreviewReady,
    PreviewStarted,
    PreviewSummary,
)

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from engine.context.compaction import CompactionPreview
    from engine.workbench.runtime import LlmRuntime


class CompactionPart:
    """The compaction part of the service: it owns the open preview; it is given the events and tasks (core),
    the open document, the runtime (a preview waits for litellm) and the display (the state after a restore)."""

    def __init__(self, core: WorkbenchCore, doc: OpenDocument, runtime: LlmRuntime, display: Display) -> None:
        self.core = core
        self.doc = doc
        self.runtime = runtime
        self.display = display
        self.preview: CompactionPreview | None = None

    def close_preview(self) -> None:
        """The session is left: an open preview is closed (the dialog too)."""
        if self.preview is not None:
            self.core.emit(PreviewClosed())
        self.preview = None

    def forget_preview(self) -> None:
        self.preview = None

    def _running(self, task: str, what: str) -> bool:
        """True (and a notice) when the task ``task`` runs: a second one is refused, not run beside it."""
        if self.core.tasks.get(task) is None:
            return False
        self.core.notice("warning", f"{what} is running: wait for it to end")
        return True

    # ------------------------------------------------------------------ /clear

    def clear_session(self) -> asyncio.Task[Any] | None:
        """/clear: every message leaves the context (archived first) and the summary is emptied; undoable."""
        if self.doc.refuses("clear_session"):
            return None
        if self.doc.refuses_busy("a turn is running: stop it first") or self._running("clear", "/clear"):
            return None
        return self.core.tasks.spawn("clear", self._clear())

    async def _clear(self) -> None:
        agent, session = self.doc.agent, self.doc.session
        if agent is None or session is None:
            return
        if not session.messages and not session.summary:
            self.core.notice("info", "the conversation is already empty")
            return
        await agent.compactor.clear()  # its CompactionEvent comes back through the agent's events

    # ------------------------------------------------------------------ preview

    def start_preview(self, instruction: str = "") -> bool:
        if self.doc.refuses("start_preview"):
            return False
        if self.doc.session is None or self.doc.agent is None:
            self.core.notice("warning", "no session is open")
            return False
        if self.doc.busy:
            self.core.notice("warning", "a turn is running: wait for it or press Stop, then compact")
            return False
        self.preview = None
        self.core.emit(PreviewStarted(instruction))
        self._start_preview_task(instruction)
        return True

    def regenerate_preview(self, instruction: str = "") -> None:
        if self.doc.refuses("regenerate_preview"):
            return
        if self.doc.session is None or self.doc.busy:
            self.core.emit(PreviewFailed("a turn is running: wait for it, then regenerate"))
            return
        self._start_preview_task(instruction)

    def _start_preview_task(self, instruction: str) -> None:
        self.core.tasks.spawn("preview", self._make_preview(instruction), replace=True)

    async def _make_preview(self, instruction: str) -> None:
        """The plan and the digest at once (PreviewReady), then the model's part (PreviewSummary)."""
        agent = self.doc.agent
        if agent is None:
            return
        self.core.set_state(AgentState.COMPACTING)
        quick = None
        try:
            quick = agent.compactor.preview_now(instruction.strip() or None)
            self.preview = quick
            self.core.emit(PreviewReady(quick))
            if getattr(quick.summary, "model_pending", False):
                await self.runtime.await_llm()
                self.core.set_state(AgentState.COMPACTING)
                full = await agent.compactor.complete_preview(quick)
                if self.preview is quick:  # not applied or discarded meanwhile
                    self.preview = full
                    self.core.emit(PreviewSummary(full))
        except asyncio.CancelledError:
            if quick is None or self.preview is quick:
                self.core.emit(PreviewFailed("cancelled: the model's text was not written"))
            raise
        except Exception as exc:  # the preview task's top (the compactor calls the model): said, never raised
            log.exception("the compaction preview failed")
            self.core.emit(PreviewFailed(f"the preview failed: {type(exc).__name__}: {one_line(str(exc))}"))
            return
        finally:
            if not self.doc.busy:
                self.core.set_state(AgentState.IDLE)

    def cancel_preview(self) -> None:
        self.core.tasks.cancel("preview")

    def discard_preview(self) -> None:
        self.cancel_preview()
        self.preview = None
        self.core.emit(PreviewClosed())

    def edit_preview(self, summary: str) -> None:
        """The user edited the summary: the "after" bar with that text."""
        if self.preview is None or self.doc.agent is None:
            return
        self.core.emit(PreviewAfter(self.doc.agent.compactor.snapshot(self.preview.plan.keep, summary)))

    # ------------------------------------------------------------------ apply and undo

    def apply_preview(self, summary: str | None = None) -> asyncio.Task[Any] | None:
        if self.doc.refuses("apply_preview"):
            return None
        if self.preview is None:
            self.core.emit(PreviewFailed("there is no preview to apply (it is still being made, or was discarded)"))
            return None
        if self.doc.busy:
            self.core.emit(PreviewFailed("a turn is running: wait for it, then apply"))
            return None
        if self.core.tasks.get("apply") is not None:  # a second apply is refused, not run beside the first
            self.core.emit(PreviewFailed("a compaction is being applied: wait for it, then apply"))
            return None
        preview_ = self.preview
        self.preview = None  # a model still writing for it stops quietly (its text is not needed)
        self.cancel_preview()
        return self.core.tasks.spawn("apply", self._apply(preview_, summary))

    async def _apply(self, preview_: Any, summary: str | None) -> None:
        from engine.context.plan import CompactionError

        agent = self.doc.agent
        if agent is None:
            return
        text = None if summary is None or summary == preview_.summary.text else summary
        try:
            await agent.compactor.apply(preview_, summary_text=text)
        except CompactionError as exc:
            self.preview = preview_  # the dialog stays open: it can be applied again or discarded
            self.core.emit(PreviewFailed(str(exc)))
            return
        self.preview = None
        self.core.emit(PreviewClosed())

    def undo_compaction(self, marker_id: str | None = None) -> asyncio.Task[Any] | None:
        if self.doc.refuses("undo_compaction"):
            return None
        session = self.doc.session
        if session is None or self.doc.agent is None:
            return None
        stack = session.undo_stack()
        if not stack:
            self.core.notice("info", "there is no compaction to undo")
            return None
        if marker_id is not None and marker_id != stack[-1]:
            self.core.notice("warning", "only the latest compaction can be undone; undo the later ones first")
            return None
        if self.doc.refuses_busy("a turn is running: stop it first, then undo") or self._running("undo", "an undo"):
            return None
        return self.core.tasks.spawn("undo", self._undo())

    async def _undo(self) -> None:
        from engine.context.plan import CompactionError

        if self.doc.agent is None:
            return
        try:
            await self.doc.agent.compactor.undo()
        except CompactionError as exc:
            self.core.notice("error", f"undo failed: {exc}")

    # ------------------------------------------------------------------ restore from the archive

    def restore_messages(self, ids: list[str]) -> asyncio.Task[Any] | None:
        if self.doc.refuses("restore_messages"):
            return None
        if self.doc.session is None or not ids:
            return None
        if (self.doc.refuses_busy("a turn is running: stop it first, then restore")
                or self._running("restore", "a restore")):
            return None
        return self.core.tasks.spawn("restore", self._restore(list(ids)))

    async def _restore(self, ids: list[str]) -> None:
        agent, session = self.doc.agent, self.doc.session
        if agent is None or session is None:
            return
        async with agent.compactor.lock:
            try:
                restored = session.restore_from_archive(ids)
            except (archive.ArchiveError, SessionError) as exc:
                self.core.notice("error", f"cannot restore: {one_line(str(exc))}")
                return
        if restored:
            self.core.notice("info", f"restored {len(restored)} message(s) into the context")
        else:
            self.core.notice("info", "those messages are already in the context")
        self.display.emit_state()


__all__ = ["CompactionPart"]
