"""Compaction bound to one session: the three automatic paths and manual preview → apply → undo.

SPEC §4. The pure pieces live beside it: :mod:`engine.context.plan` (:func:`plan_compaction`, the
emergency cut :func:`force_compression`), :mod:`engine.context.summary_call` (the summary through an
injected LLM callable) and :mod:`engine.context.summaries` (the ``summary_mode`` setting: the digest
made from the messages, the model's summary given the digest, or both).

:class:`Compactor` — bound to one :class:`engine.context.conversation.Session`: ``run_auto``
(post-turn, background, never two at once per session, cancelled when the session closes),
``proactive`` (pre-call), ``reactive`` (after a provider context-window error),
``preview``/``apply``/``undo`` (manual). Every path that changes the session records an
:class:`engine.model.events.CompactionEvent` in events.jsonl and passes it to the ``emit`` callback.

The pre-call test (:meth:`Compactor.over_budget`) runs before every model call, so it reads running
totals (the session's token ledger, :class:`engine.context.request.WireTally`) instead of building
and re-estimating the request; :meth:`Compactor.over_budget_full` is the reference it must agree with.

Token numbers the Compactor plans with are calibrated (scaled by the session's actual/estimate
ratio) once the provider has reported usage, so the plan agrees with the chart.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.context.budget import is_over_context_budget
from engine.context.plan import (
    CompactionError,
    CompactionPlan,
    StalePreviewError,
    emergency_note,
    force_compression,
    last_turn_start,
    plan_compaction,
)
from engine.context.request import SessionRequest, WireTally, system_message_tokens, system_text
from engine.context.snapshots import scaled_sum
from engine.context.summaries import (
    Summary,
    editor_summary,
    plan_digest,
    resolve_mode,
    summarize_plan,
    summarizer_model,
)
from engine.context.summaries import complete_model_part as _complete_model_part
from engine.context.summary_call import (
    SummarizeFn,
    SummaryResult,
    drop_note,
    normalize_summary,
)
from engine.context.tokens import Estimator, TokenLedger, estimate_tool_defs_tokens
from engine.context.window import window_for
from engine.model.events import CompactionCancelled, CompactionEvent, CompactionStarted, Event, Outcome, Trigger
from engine.model.messages import Message, new_id, now_iso
from engine.model.snapshot import ContextSnapshot, WindowInfo
from engine.store import archive
from engine.store.config import Settings
from engine.store.session import SessionError

if TYPE_CHECKING:
    from engine.context.conversation import Session


@dataclass
class PrefixCheck:
    """Does the history still start with the messages of the last reported call? Kept in step with
    the ledger like :class:`~engine.context.request.WireTally`: the ids are collected as messages
    are appended, and the answer is computed once per recorded call, not once per check."""

    ledger: TokenLedger | None = None
    revision: int = -1
    ids: list[str] = field(default_factory=list)
    prefix: Sequence[str] | None = None
    same: bool = False

    def matches(self, messages: Sequence[Message], ledger: TokenLedger, prefix: Sequence[str]) -> bool:
        if ledger is not self.ledger or ledger.revision != self.revision or len(messages) < len(self.ids):
            self.ledger, self.revision, self.ids, self.prefix = ledger, ledger.revision, [], None
        if len(self.ids) < len(messages):
            self.ids.extend(str(m.get("id", "")) for m in messages[len(self.ids):])
        n = len(prefix)
        if n > len(self.ids):
            return False
        if prefix is not self.prefix:
            self.prefix, self.same = prefix, tuple(self.ids[:n]) == tuple(prefix)
        return self.same


@dataclass
class CompactionPreview:
    """A manual compaction not yet applied: nothing on disk has changed."""

    plan: CompactionPlan
    summary: SummaryResult
    before: ContextSnapshot
    after: ContextSnapshot
    instruction: str | None
    base_summary: str
    base_ids: tuple[str, ...]
    created: str = field(default_factory=now_iso)

    @property
    def compact_ids(self) -> list[str]:
        return self.plan.compact_ids

    @property
    def keep_ids(self) -> list[str]:
        return self.plan.keep_ids


class Compactor:
    """Compaction for one session. Only one compaction runs at a time per session."""

    def __init__(
        self,
        session: Session,
        settings: Settings,
        summarize: SummarizeFn | None = None,
        *,
        estimator: Estimator | None = None,
        system_prompt: str | None = None,
        tools: Sequence[dict[str, Any]] | None = None,
        window: WindowInfo | int | None = None,
        emit: Callable[[Event], None] | None = None,
    ) -> None:
        self.session = session
        self.settings = settings
        self.summarize = summarize
        self.estimator = estimator or session.estimator
        self.system_prompt = system_prompt
        # tools=None: the definitions stored with the session (an imported log's), else none
        self.tools: list[dict[str, Any]] = list(tools if tools is not None else session.meta.get("tools") or [])
        self.window = window
        self.emit = emit
        self._auto_tasks: set[asyncio.Task[Any]] = set()
        self._wire = WireTally()
        self._prefix = PrefixCheck()
        session.add_close_callback(self._on_session_close)

    # ------------------------------------------------------------------ helpers

    @property
    def lock(self) -> asyncio.Lock:
        if self.session.compaction_lock is None:
            self.session.compaction_lock = asyncio.Lock()
        lock: asyncio.Lock = self.session.compaction_lock
        return lock

    @property
    def busy(self) -> bool:
        return self.lock.locked()

    def window_info(self) -> WindowInfo:
        return window_for(self.settings, self.window)

    def _system(self) -> str:
        return self.session.system_prompt if self.system_prompt is None else self.system_prompt

    def snapshot(
        self, messages: Sequence[Message] | None = None, summary: str | None = None
    ) -> ContextSnapshot:
        return self.session.snapshot(
            self.settings,
            self.estimator,
            self._system(),
            self.tools,
            window=self.window_info(),
            messages=messages,
            summary=summary,
        )

    def _request_tokens(self, messages: Sequence[Message] | None = None, summary: str | None = None) -> int:
        """The prompt as sent (without the output reserve): a compaction's before → after basis
        (engine.model.compaction_change), the preview's too."""
        return self.snapshot(messages, summary).prompt

    def plan(self, *, force: bool = False, keep_current_turn: bool = False) -> CompactionPlan:
        """The plan for the live session, in calibrated tokens when a provider report exists.

        ``keep_current_turn`` keeps the last turn (from its user message on) whatever its size.
        """
        win = self.window_info()
        est = self.estimator
        s = self.session
        counts = s.token_counts(est)
        system, summary, tools = est.text(self._system()) + est.framing(), est.text(s.summary), est.tools(self.tools)
        ratio = s.calibrator.ratio
        if ratio:
            counts = [round(c * ratio) for c in counts]
            system, summary, tools = round(system * ratio), round(summary * ratio), round(tools * ratio)
        return plan_compaction(
            s.messages,
            counts,
            window=win.context_window,
            system_tokens=system,
            summary_tokens=summary,
            tools_tokens=tools,
            max_tokens=win.max_tokens,
            threshold_ratio=self.settings.compact_threshold_ratio,
            reserve_tokens=int(self.settings.reserve_ratio * win.context_window),
            force=force,
            keep_from=last_turn_start(s.messages) if keep_current_turn else None,
        )

    def _emit(self, event: Event) -> None:
        if self.emit is not None:
            self.emit(event)

    def _record(self, event: CompactionEvent) -> CompactionEvent:
        if not self.session.closed:
            self.session.record_event(event)
        self._emit(event)
        return event

    async def _summarize(self, plan: CompactionPlan, instruction: str | None) -> SummaryResult:
        """The summary in the configured mode (digest, model or both; see :mod:`engine.context.summaries`)."""
        return await summarize_plan(
            plan, self.settings, self.summarize, self.session, self.estimator.text, self.window_info(), instruction
        )

    def _commit(
        self,
        trigger: Trigger,
        new_messages: list[Message],
        summary: str,
        *,
        result: Outcome,
        reason: str,
        before: int,
        t0: float,
        extra_ms: float = 0.0,
    ) -> CompactionEvent:
        s = self.session
        keep_ids = {str(m.get("id")) for m in new_messages}
        removed = [m for m in s.messages if str(m.get("id")) not in keep_ids]
        event_id = new_id()
        undo_point = {
            "id": event_id,
            "trigger": trigger,
            "summary": s.summary,
            "order": [str(m.get("id")) for m in s.messages],
            "removed": removed,
            "ts": now_iso(),
        }
        days = s.commit_compaction(new_messages, summary=summary, undo_point=undo_point)
        event = CompactionEvent(
            trigger=trigger,
            tokens_before=before,
            tokens_after=self._request_tokens(),
            messages_compacted=len(removed),
            messages_kept=len(new_messages),
            duration_ms=(time.perf_counter() - t0) * 1000 + extra_ms,
            result=result,
            summary=summary,
            reason=reason,
            archive_day=days[-1] if days else "",
            id=event_id,
        )
        return self._record(event)

    async def clear(self) -> CompactionEvent:
        """/clear: every message leaves the context (archived first), the summary is emptied; undoable."""
        async with self.lock:
            t0 = time.perf_counter()
            reason = "/clear: the conversation was cleared (archived; Undo brings it back)"
            return self._commit(Trigger.MANUAL, [], "", result=Outcome.DROPPED, reason=reason,
                                before=self._request_tokens(), t0=t0)

    def _fail(self, trigger: Trigger, reason: str, before: int, t0: float) -> CompactionEvent:
        event = CompactionEvent(
            trigger=trigger,
            tokens_before=before,
            tokens_after=before,
            messages_compacted=0,
            messages_kept=len(self.session.messages),
            duration_ms=(time.perf_counter() - t0) * 1000,
            result=Outcome.FAILED,
            summary=self.session.summary,
            reason=reason,
        )
        return self._record(event)

    def _apply_summary(
        self,
        trigger: Trigger,
        plan: CompactionPlan,
        result: SummaryResult,
        before: int,
        t0: float,
        extra_ms: float = 0,
    ) -> CompactionEvent:
        gone = set(plan.compact_ids)
        new = [m for m in self.session.messages if str(m.get("id")) not in gone]
        if result.valid:
            return self._commit(
                trigger, new, result.text, result=Outcome.SUMMARIZED, reason=plan.reason, before=before, t0=t0,
                extra_ms=extra_ms,
            )
        summary = drop_note(self.session.summary, len(gone), result.reason)
        return self._commit(
            trigger, new, summary, result=Outcome.DROPPED, reason=result.reason, before=before, t0=t0,
            extra_ms=extra_ms,
        )

    # ------------------------------------------------------------------ automatic paths

    async def run_auto(self) -> CompactionEvent | None:
        """Post-turn: if the plan says compact, summarize (or drop, archived, when that fails).

        Returns None when nothing was needed, ``settings.auto_compact`` is off, or another
        compaction of this session is running.
        """
        if self.busy or self.session.closed or not self.settings.auto_compact:
            return None
        task = asyncio.current_task()
        if task is not None:
            self._auto_tasks.add(task)
        try:
            async with self.lock:
                plan = self.plan()
                if not plan.needed:
                    return None
                self._emit(CompactionStarted(Trigger.AUTO))
                t0 = time.perf_counter()
                before = self._request_tokens()
                try:
                    result = await self._summarize(plan, None)
                except asyncio.CancelledError:
                    self._emit(CompactionCancelled(Trigger.AUTO))
                    raise
                if self.session.closed:
                    return None
                if any(i not in self.session for i in plan.compact_ids):
                    return self._fail(Trigger.AUTO, "the history changed during summarization", before, t0)
                return self._apply_summary(Trigger.AUTO, plan, result, before, t0)
        finally:
            if task is not None:
                self._auto_tasks.discard(task)

    def start_auto(self) -> asyncio.Task[CompactionEvent | None] | None:
        """Run :meth:`run_auto` in the background; None when one is already running."""
        if not self.settings.auto_compact or self.busy or self.session.closed:
            return None
        if any(not t.done() for t in self._auto_tasks):
            return None
        task = asyncio.create_task(self.run_auto(), name=f"compaction-auto-{self.session.id}")
        self._auto_tasks.add(task)
        task.add_done_callback(self._auto_tasks.discard)
        return task

    def _on_session_close(self) -> None:
        for task in list(self._auto_tasks):
            task.cancel()

    def over_budget(self, build_request: Callable[[], list[Message]] | None = None) -> bool:
        """SPEC §4 path 2 test, before every model call: is the next request over the window?

        Uncalibrated heuristic with a request builder: ``is_over_context_budget`` on the request;
        otherwise the (calibrated) size of the next request as its snapshot would give it. For the
        session's own request (a :class:`SessionRequest`, what the agent passes) and for no builder,
        from running totals in O(1) — the same decision as :meth:`over_budget_full`, which builds and
        re-estimates (and which any other builder still goes through)."""
        s = self.session
        if build_request is not None and not isinstance(build_request, SessionRequest):
            return self.over_budget_full(build_request)
        if not s.counts_with(self.estimator):
            return self.over_budget_full(build_request)
        win = self.window_info()
        if build_request is not None and not s.calibrator.calibrated and self.estimator.name == "heuristic":
            days = s.archive_days() if s.summary.strip() else ()
            system = system_message_tokens(system_text(build_request.system_prompt, s.summary, days))
            history = s.ledger.total + self._wire.correction(s.messages, s.ledger)
            return system + history + estimate_tool_defs_tokens(self.tools) + win.max_tokens > win.context_window
        return self._prompt_tokens() + win.max_tokens > win.context_window

    def _prompt_tokens(self) -> int:
        """The next request's prompt tokens as :meth:`snapshot` counts them (``.prompt``), from the
        ledger's running total: calibration is one multiplication, not a re-estimate."""
        est, s = self.estimator, self.session
        system = self._system()
        fixed = ((est.text(system) if system else 0) + est.framing(), est.text(s.summary), est.tools(self.tools))
        raw = sum(fixed) + s.ledger.total
        cal = s.calibrator
        if not cal.calibrated:
            return raw
        same_ids = self._prefix.matches(s.messages, s.ledger, cal.last_prefix)
        return scaled_sum(raw, cal.calibrate_known(raw, same_ids, fixed))

    def over_budget_full(self, build_request: Callable[[], list[Message]] | None = None) -> bool:
        """The reference for :meth:`over_budget`: build the request (or the snapshot) and estimate it."""
        uncalibrated = not self.session.calibrator.calibrated and self.estimator.name == "heuristic"
        if build_request is not None and uncalibrated:
            win = self.window_info()
            return is_over_context_budget(win.context_window, build_request(), self.tools, win.max_tokens)
        return self.snapshot().over_budget

    async def proactive(
        self, build_request: Callable[[], list[Message]] | None = None
    ) -> CompactionEvent | None:
        """Pre-call: if the next request is over the window, summarize; if that fails or does not
        fit, compress by dropping (emergency). Returns the last event, or None when it fit already.
        Waits for a running background compaction first, then checks again."""
        async with self.lock:
            if not self.over_budget(build_request):
                return None
            self._emit(CompactionStarted(Trigger.PROACTIVE))
            t0 = time.perf_counter()
            before = self._request_tokens()
            plan = self.plan(force=True, keep_current_turn=True)
            last: CompactionEvent | None = None
            reason = plan.reason
            if plan.needed:  # the digest needs no summarizer (model mode without one fails here)
                result = await self._summarize(plan, None)
                if result.valid:
                    last = self._apply_summary(Trigger.PROACTIVE, plan, result, before, t0)
                    if not self.over_budget(build_request):
                        return last
                    reason = "still over the window after summarizing"
                    t0 = time.perf_counter()
                    before = self._request_tokens()
                else:
                    reason = result.reason
            return self._emergency(Trigger.PROACTIVE, reason, before, t0, until_fits=True) or last

    async def reactive(self) -> CompactionEvent:
        """After a provider context-window error: one emergency compression (:func:`force_compression`).

        ``result`` is "dropped" when something went, "failed" when nothing could (the caller stops
        retrying then).
        """
        async with self.lock:
            self._emit(CompactionStarted(Trigger.REACTIVE))
            t0 = time.perf_counter()
            before = self._request_tokens()
            event = self._emergency(Trigger.REACTIVE, "the provider reported a context-window error", before, t0)
            if event is None:
                why = "nothing left to drop (≤ 2 messages and a small summary)"
                return self._fail(Trigger.REACTIVE, why, before, t0)
            return event

    def _emergency(
        self, trigger: Trigger, reason: str, before: int, t0: float, *, until_fits: bool = False
    ) -> CompactionEvent | None:
        """Drop (archived) with :func:`force_compression` — once, or ``until_fits`` — and shorten a
        summary that leaves no room. None when nothing could change."""
        s = self.session
        history = list(s.messages)
        dropped_total = 0
        summary = s.summary
        shrunk = False
        snap = self.snapshot(history, summary)
        fixed = snap.system + snap.tools + snap.reserve
        if summary and snap.summary + fixed > snap.window:  # the summary alone leaves no room
            summary = self._shorten_summary(summary, snap.summary, max(0, snap.window - fixed) // 2)
            shrunk = True
        while until_fits or not dropped_total:
            if until_fits and not self.snapshot(history, summary).over_budget:
                break
            new, _, count = force_compression(history, "")
            if count == 0:
                break
            history, dropped_total = new, dropped_total + count
        if dropped_total:
            note = emergency_note(dropped_total)
            summary = f"{summary}\n\n{note}" if summary else note
        if not shrunk:
            summary, shrunk = self._fit_summary(history, summary, force=not dropped_total)
        if not dropped_total and not shrunk:
            return None
        why = reason + ("; the summary was shortened to fit (full text archived)" if shrunk else "")
        return self._commit(trigger, history, summary, result=Outcome.DROPPED, reason=why, before=before, t0=t0)

    def _fit_summary(self, history: list[Message], summary: str, *, force: bool) -> tuple[str, bool]:
        """Shorten a summary that still leaves no room once nothing more can be dropped.

        Over budget: the summary is cut to half the room left by everything else. With ``force``
        (the provider refused and nothing else could be dropped) a summary over a quarter of the
        window is halved.
        """
        if not summary:
            return summary, False
        snap = self.snapshot(history, summary)
        room = snap.window - (snap.system + snap.tools + snap.reserve + snap.history)
        if snap.over_budget:
            target = max(0, room) // 2
        elif force and snap.summary * 4 > snap.window:
            target = snap.summary // 2
        else:
            return summary, False
        if target >= snap.summary:
            return summary, False
        return self._shorten_summary(summary, snap.summary, target), True

    def _shorten_summary(self, summary: str, tokens: int, target: int) -> str:
        """Cut ``summary`` (``tokens`` long) to about ``target`` tokens, head and tail kept; its full
        text goes to the dialog archive first (SPEC §5: a summary larger than the window)."""
        archive.append(
            self.session.path,
            [{"id": new_id(), "role": "system", "content": summary, "ts": now_iso(), "kind": "summary"}],
        )
        chars = int(len(summary) * target / tokens) if tokens else 0
        note = "[… the summary was shortened to fit the window; its full text is in the dialog archive …]"
        half = max(0, (chars - len(note)) // 2)
        return f"{summary[:half]}\n{note}\n{summary[len(summary) - half :]}" if half else note

    # ------------------------------------------------------------------ manual

    def preview_now(self, instruction: str | None = None) -> CompactionPreview:
        """The plan and the digest at once, nothing on disk changed; the model's part (if the summary
        mode has one) is still to come: :meth:`complete_preview`."""
        plan = self.plan(force=True)
        before = self.snapshot()
        if plan.needed:
            result: SummaryResult = plan_digest(
                plan, self.settings, self.summarize, self.session, self.estimator.text, self.window_info()
            )
        else:
            mode = resolve_mode(self.settings, self.summarize)
            model = "" if mode == "digest" else summarizer_model(self.settings, self.summarize)
            result = Summary("", False, plan.reason, mode=mode, model=model)
        return self._preview(plan, result, before, instruction)

    async def complete_preview(self, preview: CompactionPreview) -> CompactionPreview:
        """The preview with the model's part in (the same preview when the mode has none)."""
        part = preview.summary
        if not isinstance(part, Summary) or not part.model_pending:
            return preview
        done = await _complete_model_part(
            part, preview.plan, preview.base_summary, preview.instruction, self.settings, self.summarize,
            self.estimator.text, self.window_info(),
        )
        done = editor_summary(part, done)  # an unusable model reply never replaces a usable digest in the editor
        return self._preview(preview.plan, done, preview.before, preview.instruction, base=preview)

    def _preview(
        self,
        plan: CompactionPlan,
        result: SummaryResult,
        before: ContextSnapshot,
        instruction: str | None,
        base: CompactionPreview | None = None,
    ) -> CompactionPreview:
        s = self.session
        after = self.snapshot(plan.keep, result.text if result.valid else s.summary)
        return CompactionPreview(
            plan=plan,
            summary=result,
            before=before,
            after=after,
            instruction=instruction,
            base_summary=base.base_summary if base else s.summary,
            base_ids=base.base_ids if base else tuple(str(m.get("id")) for m in s.messages),
        )

    async def preview(self, instruction: str | None = None) -> CompactionPreview:
        """Plan (forced) and summarize without changing anything on disk."""
        return await self.complete_preview(self.preview_now(instruction))

    async def apply(self, preview: CompactionPreview, summary_text: str | None = None) -> CompactionEvent:
        """Apply a preview (with the user's edited summary if given): archive, replace, record an undo point.

        Raises :class:`StalePreviewError` when the session changed in a way the preview cannot
        survive, :class:`CompactionError` when there is nothing to compact or the summary cannot fit.
        """
        async with self.lock:
            s = self.session
            if not preview.plan.needed:
                raise CompactionError(f"nothing to compact: {preview.plan.reason}")
            if s.summary != preview.base_summary:
                raise StalePreviewError("the summary changed since the preview was made; preview again")
            gone = [i for i in preview.compact_ids if i not in s]
            if gone:
                raise StalePreviewError(
                    f"{len(gone)} message(s) of the preview are no longer in the history; preview again"
                )
            t0 = time.perf_counter()
            if summary_text is not None:
                text = normalize_summary(summary_text)
                result = SummaryResult(text, bool(text), "" if text else "the edited summary is empty")
            else:
                result = preview.summary
            if result.valid:
                win = self.window_info()
                snap = self.snapshot(preview.plan.keep, result.text)
                fixed = snap.system + snap.tools + snap.reserve
                if snap.summary + fixed > win.context_window:
                    raise CompactionError(
                        f"the summary is {snap.summary} tokens; with the system prompt, tools and output "
                        f"reserve ({fixed} tokens) it does not fit the {win.context_window}-token window"
                    )
            before = self._request_tokens()
            return self._apply_summary(
                Trigger.MANUAL, preview.plan, result, before, t0, extra_ms=preview.summary.duration_ms
            )

    async def undo(self) -> CompactionEvent:
        """Restore the history and summary from before the latest compaction (archive keeps its copy)."""
        async with self.lock:
            t0 = time.perf_counter()
            before = self._request_tokens()
            try:
                res = self.session.undo_last()
            except SessionError as exc:
                raise CompactionError(str(exc)) from exc
            reason = f"restored {len(res.restored)} message(s)"
            if res.missing:
                reason += f"; {len(res.missing)} could not be found"
            event = CompactionEvent(
                trigger=Trigger.MANUAL,
                tokens_before=before,
                tokens_after=self._request_tokens(),
                messages_compacted=len(res.restored),
                messages_kept=len(self.session.messages),
                duration_ms=(time.perf_counter() - t0) * 1000,
                result=Outcome.UNDONE,
                summary=res.summary,
                reason=reason,
                id=res.event_id,
            )
            return self._record(event)
