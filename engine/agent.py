"""The agent loop: one user turn → LLM iterations → tool calls → a final answer.

One turn (:meth:`Agent.run_turn`)::

    append the user message (fsync'd)
    repeat, at most ``settings.max_iterations`` LLM calls:
        proactive budget check (engine.context.compaction.Compactor.proactive, with :func:`build_request`)
        build the request (:func:`build_request`: system prompt + summary block, history, tools)
        stream it (engine.llm.client.stream_chat): TextDelta events, transient errors retried inside llm;
            a context-window error → Compactor.reactive, then retry (at most 2 retries)
        record usage beside the estimate (Calibrator) and one ContextSnapshot → ContextUpdated
        append the assistant message
        no tool calls → the answer: TurnFinished(ok=True)
        each tool call: ToolCallStarted → ToolBox.run → offload (cut before the first write) →
            append the result → ToolCallFinished (with the offloaded file, if it was cut)
    after the turn: Compactor.start_auto() (background summarization; :attr:`Agent.auto_task`)

Only :func:`build_request` builds the message list sent to the model; budget functions never do.

Cancellation. Cancelling the task that runs :meth:`Agent.run_turn` stops the stream (llm closes the
connection) or the running tool. Before ``CancelledError`` propagates, the history is settled: the
partial assistant text is kept and marked ``interrupted``, and every tool call of the last assistant
message that has no result gets one saying it was interrupted — the history is always valid for the
next request. A ``TurnFinished(ok=False, interrupted=True)`` event is emitted, then the error is
re-raised. A failure mid-stream (the provider dropped the connection) is settled the same way.

Errors never crash the loop: auth / bad request / exhausted retries / a context-window error that
compaction cannot fix end the turn with an :class:`ErrorEvent` and ``TurnFinished(ok=False)``. An
answer with no text and no tool call is never stored as an answer: the turn ends ``ok=False`` with an
``empty_response`` error (an empty *stream* is first explained by :mod:`engine.llm.client`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from engine.context.compaction import Compactor
from engine.context.conversation import Session
from engine.context.offload import Offloader
from engine.context.request import (
    SessionRequest,
)
from engine.context.summary_call import SummarizeFn
from engine.context.window import agent_window, imported_window, session_window
from engine.llm import client as llm
from engine.llm.client import LLMConfig
from engine.llm.errors import Completion, LLMError
from engine.model import messages as m
from engine.model.events import (
    AgentState,
    ContextUpdated,
    ErrorEvent,
    Event,
    MessageAdded,
    Outcome,
    StateChanged,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
)
from engine.model.messages import Message
from engine.model.records import CompactionRecord
from engine.model.snapshot import ContextSnapshot, WindowInfo
from engine.model.text import one_line
from engine.store.config import Settings
from engine.store.secrets import scrub
from engine.store.session import SessionError
from engine.tools.registry import ApproveFn, ToolBox

log = logging.getLogger(__name__)

PROMPT_PATH = Path(__file__).resolve().parent.parent / "resources" / "prompts" / "system.md"
MAX_REACTIVE_RETRIES = 2
INTERRUPTED_RESULT = "interrupted: the turn was stopped before this tool call finished"
EmitFn = Callable[[Event], None]


class AgentError(Exception):
    """The agent cannot do what was asked; the text says why."""


class AgentBusyError(AgentError):
    pass


@cache
def default_system_prompt() -> str:
    """The bundled system prompt (``resources/prompts/system.md``)."""
    try:
        return PROMPT_PATH.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise AgentError(f"the default system prompt is missing: {PROMPT_PATH} ({exc})") from exc


def effective_system_prompt(settings: Settings, session: Session | None = None) -> str:
    """The settings' prompt if set, else the one stored with the session, else the bundled one."""
    if settings.system_prompt.strip():
        return settings.system_prompt.strip()
    if session is not None and session.system_prompt.strip():
        return session.system_prompt
    return default_system_prompt()


def default_tools(*, allow_write: bool = False, allow_shell: bool = False) -> list[dict[str, Any]]:
    """The OpenAI specs of the built-in tools (they do not depend on the folders)."""
    here = Path(".")
    return ToolBox(here, here, allow_write=allow_write, allow_shell=allow_shell).specs()


# --------------------------------------------------------------------------- the request


def unanswered_calls(history: Sequence[Message]) -> list[dict[str, Any]]:
    """Tool calls of the last assistant message that have no result after it."""
    for i in range(len(history) - 1, -1, -1):
        msg = history[i]
        if msg.get("role") == "assistant":
            answered: list[str] = [
                str(r.get("tool_call_id") or "") for r in history[i + 1 :] if r.get("role") == "tool"
            ]
            out = []
            for call in msg.get("tool_calls") or ():
                cid = str(call.get("id") or "")
                if cid in answered:
                    answered.remove(cid)
                else:
                    out.append(call)
            return out
        if msg.get("role") == "user":
            return []
    return []


# --------------------------------------------------------------------------- window and snapshots


def imported_prefix_tokens(session: Session) -> int | tuple[int, int] | None:
    """The system prompt + tool definitions of the agent that made an imported session: (system, tools)
    where the file holds them as sent (the last request's); else one count inferred at import from its first
    call (provider prompt − the messages' count); None when neither."""
    imported = session.meta.get("import")
    if isinstance(imported, dict) and imported.get("prefix_source") == "file":
        system = imported.get("system_prompt_tokens")
        tools = imported.get("tool_definitions")
        if isinstance(system, int) and isinstance(tools, list):
            return system, sum(int(t.get("tokens") or 0) for t in tools if isinstance(t, dict))
    prefix = imported.get("inferred_prefix") if isinstance(imported, dict) else None
    tokens = prefix.get("tokens") if isinstance(prefix, dict) else None
    return tokens if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens >= 0 else None


def last_reported_request(session: Session) -> tuple[list[Message], int] | None:
    """The request of an imported session's last call with the provider's prompt figure, as the
    live messages it held, and that figure; None when the session is not imported, no call reported,
    or that request is not the start of the live history (a compaction came after it).

    The next-request bar is calibrated on it: the provider's own count of what was sent, plus the
    estimate of what came after (the last answer), instead of an estimate of everything."""
    if not isinstance(session.meta.get("import"), dict):
        return None
    live = session.messages
    position = {str(msg.get("id")): i for i, msg in enumerate(live)}
    for record in reversed(session.read_records()):
        if isinstance(record, CompactionRecord):
            return None  # the last reported request is not in the live context any more
        actual = record.provider_prompt_tokens
        if actual is None or actual <= 0:
            continue
        end = len(live) if record.message_id is None else position.get(record.message_id)
        if end is None or record.message_count != end:
            return None  # the history it held is not the head of the live messages
        return list(live[:end]), actual
    return None


def context_snapshot(
    session: Session,
    settings: Settings,
    *,
    system_prompt: str | None = None,
    tools: Sequence[dict[str, Any]] | None = None,
    window: WindowInfo | None = None,
    draft: str = "",
) -> ContextSnapshot:
    """The regions of the next request of ``session`` (calibrated once the provider reported usage).

    Defaults: the system prompt and tool definitions stored with the session (what the agent last
    sent, or what an import found), and :func:`session_window`.
    """
    if system_prompt is None:
        system_prompt = session.system_prompt or effective_system_prompt(settings, session)
    if tools is None:
        stored = session.meta.get("tools")
        tools = stored if isinstance(stored, list) else default_tools()
    own = imported_window(session, settings)  # an imported session: drawn against its own model …
    prefix = imported_prefix_tokens(session) if own else None  # … with its own system prompt + tools
    window = window or (own[0] if own else session_window(session, settings))
    if own and not session.calibrator.calibrated:
        calibrate_imported(session, settings, system_prompt, tools, window, prefix)
    return session.snapshot(
        settings, session.estimator, system_prompt, tools, draft, window=window,
        model=(own[1] or None) if own else None, prefix_tokens=prefix,
    )


def calibrate_imported(
    session: Session,
    settings: Settings,
    system_prompt: str,
    tools: Sequence[dict[str, Any]],
    window: WindowInfo,
    prefix: int | tuple[int, int] | None,
) -> bool:
    """Calibrate an imported session's next request on its last call's provider figure
    (:func:`last_reported_request`), counted the way the next request is; False when it has none."""
    request = last_reported_request(session)
    if request is None:
        return False
    history, actual = request
    raw = session.snapshot(settings, session.estimator, system_prompt, tools, window=window, messages=history,
                           calibrated=False, prefix_tokens=prefix)
    ids = [str(msg.get("id")) for msg in history]
    session.calibrator.record(raw.raw_prompt_tokens, actual, ids, (raw.system, raw.summary, raw.tools))
    return True


# --------------------------------------------------------------------------- the agent


def _empty_answer(completion: Completion, model: str) -> str:
    """Why an answer with no text and no tool call is not stored (it is never an answer)."""
    reasoning = str(completion.message.get("reasoning_content") or "")
    besides = f" (only {len(reasoning)} characters of reasoning)" if reasoning.strip() else ""
    return (f"the model ({model}) returned an empty answer{besides}, finish reason "
            f"{completion.finish_reason or 'none'}; nothing was stored")


class Agent:
    """Runs turns of one session; emits :mod:`engine.model.events` through ``emit``.

    ``approve`` (async ``(tool_name, arguments) -> bool``) is given to the toolbox when it has none.
    ``summarize`` defaults to :func:`engine.llm.client.make_summarizer` on the same model. ``window`` defaults
    to :func:`agent_window`.
    """

    def __init__(
        self,
        session: Session,
        settings: Settings,
        *,
        llm_config: LLMConfig,
        toolbox: ToolBox,
        emit: EmitFn,
        approve: ApproveFn | None = None,
        summarize: SummarizeFn | None = None,
        window: WindowInfo | None = None,
        system_prompt: str | None = None,
    ) -> None:
        self.session = session
        self.settings = settings
        self.config = llm_config
        self.toolbox = toolbox
        if approve is not None and toolbox.approve is None:
            toolbox.approve = approve
        self._emit_cb = emit
        self.system_prompt = system_prompt if system_prompt is not None else effective_system_prompt(
            settings, session
        )
        self.tools: list[dict[str, Any]] = toolbox.specs()
        self.window = window or agent_window(settings, llm_config)
        self.compactor = Compactor(
            session,
            settings,
            summarize if summarize is not None else llm.make_summarizer(llm_config),
            estimator=session.estimator,
            system_prompt=self.system_prompt,
            tools=self.tools,
            window=self.window,
            emit=self._emit,
        )
        self.offloader = Offloader(session.path, settings, session.estimator)
        self.auto_task: asyncio.Task[Any] | None = None
        self.calls = 0  # LLM calls made by this agent (the snapshots' call_index)
        self._lock = asyncio.Lock()
        self._partial: list[Completion] = []
        self._stream_id = ""

    # ------------------------------------------------------------------ helpers

    @property
    def busy(self) -> bool:
        return self._lock.locked()

    def _emit(self, event: Event) -> None:
        self._emit_cb(event)

    def request(self) -> list[Message]:
        """The request the next LLM call would send (built by :func:`build_request`)."""
        return self.next_request()

    @property
    def next_request(self) -> SessionRequest:
        """The next request as the pre-call budget check takes it (calling it builds the request)."""
        return SessionRequest(self.session, self.system_prompt)

    def snapshot(self, draft: str = "") -> ContextSnapshot:
        """The regions of the next request, with ``draft`` (unsent input) counted apart."""
        return self.session.snapshot(
            self.settings, self.session.estimator, self.system_prompt, self.tools, draft, window=self.window
        )

    def _tokens(self, msg: Message) -> int:
        s = self.session
        try:
            return s.ledger.tokens_of(s.index_of(str(msg.get("id"))))
        except (SessionError, IndexError):  # not (yet) in the session, or past the ledger's counts
            return s.estimator.message(msg)

    def _append(self, *msgs: Message) -> None:
        """Append durably (fsync'd) and announce each message."""
        self.session.extend(msgs)
        for msg in msgs:
            self._emit(MessageAdded(msg, self._tokens(msg)))

    def _sync_meta(self) -> None:
        """Store what the next request is made of, so ``inspect`` and the GUI show the same numbers."""
        win = {
            "context_window": self.window.context_window,
            "max_tokens": self.window.max_tokens,
            "source": self.window.source,
        }
        wanted = {
            "system_prompt": self.system_prompt,
            "tools": self.tools,
            "model": self.config.model,
            "window": win,
        }
        changed = {k: v for k, v in wanted.items() if self.session.meta.get(k) != v}
        if changed:
            self.session.set_meta(**changed)

    def _settle(self) -> None:
        """Make the history valid after an interruption: keep the partial answer (marked interrupted)
        and give every unanswered tool call of the last assistant message a result saying so."""
        s = self.session
        if s.closed:
            return
        partials, self._partial = self._partial, []
        for comp in partials:
            msg = comp.message
            text = m.content_text(msg.get("content"))
            if not (text or msg.get("reasoning_content") or msg.get("tool_calls")):
                continue
            msg["id"] = self._stream_id or msg.get("id") or m.new_id()
            msg["interrupted"] = True
            if msg["id"] not in s:
                self._append(msg)
        missing = unanswered_calls(s.messages)
        if missing:
            results = llm.interrupted_tool_results({"tool_calls": missing}, INTERRUPTED_RESULT)
            self._append(*results)

    def repair_tail(self) -> int:
        """Answer tool calls a crash left without a result (before a new turn); returns how many."""
        missing = unanswered_calls(self.session.messages)
        if missing:
            self._append(*llm.interrupted_tool_results({"tool_calls": missing}, INTERRUPTED_RESULT))
        return len(missing)

    # ------------------------------------------------------------------ the turn

    async def run_turn(self, user_text: str) -> TurnFinished:
        """Run one turn; returns its :class:`TurnFinished` (also emitted). See the module docstring."""
        if self._lock.locked():
            raise AgentBusyError("a turn is already running in this session")
        async with self._lock:
            return await self._turn(user_text)

    async def _turn(self, user_text: str) -> TurnFinished:
        if not isinstance(user_text, str) or not user_text.strip():
            raise AgentError("the message is empty")
        self.tools = self.toolbox.specs()  # the user may have switched write / shell on or off
        self.compactor.tools = self.tools
        self._sync_meta()
        self.repair_tail()
        self._append(m.user(user_text))
        iterations = 0
        try:
            while True:
                if iterations >= self.settings.max_iterations:
                    self._emit(
                        ErrorEvent(
                            "max_iterations",
                            f"stopped after {iterations} model calls in one turn (the limit is "
                            f"max_iterations = {self.settings.max_iterations}); the work so far is kept",
                        )
                    )
                    return self._finish(False, iterations)
                iterations += 1
                completion = await self._call_model()
                if completion is None:
                    return self._finish(False, iterations)
                msg = completion.message
                if not msg.get("tool_calls") and not m.content_text(msg.get("content")).strip():
                    self._emit(ErrorEvent("empty_response", _empty_answer(completion, self.config.model)))
                    return self._finish(False, iterations)
                self._append(msg)
                if not msg.get("tool_calls"):
                    return self._finish(True, iterations, m.content_text(msg.get("content")))
                await self._run_tools(msg)
        except asyncio.CancelledError:
            try:
                self._settle()
            finally:
                self._emit(StateChanged(AgentState.IDLE))
                self._emit(TurnFinished(ok=False, interrupted=True, iterations=iterations))
            raise
        except Exception as exc:  # the turn's top (a task): a bug or a disk error: report it, keep the history valid
            log.exception("the turn failed")
            problem = f"{type(exc).__name__}: {exc}"
            try:
                self._settle()
            except Exception as settle_exc:  # still the turn's top: the first failure is reported all the same
                log.exception("the history could not be settled after the failure")
                problem += (
                    f" (and the history could not be settled: {type(settle_exc).__name__}: {settle_exc})"
                )
            self._emit(ErrorEvent("internal", one_line(scrub(problem))))
            return self._finish(False, iterations)

    def _finish(self, ok: bool, iterations: int, final_text: str = "") -> TurnFinished:
        event = TurnFinished(ok=ok, iterations=iterations, final_text=final_text)
        self._emit(StateChanged(AgentState.IDLE))
        self._emit(event)
        if not self.session.closed:
            self.auto_task = self.compactor.start_auto()
        return event

    # ------------------------------------------------------------------ one LLM call

    async def _call_model(self) -> Completion | None:
        """Proactive check, stream, reactive retries; None when the turn must end (error emitted)."""
        retries = 0
        while True:
            await self.compactor.proactive(self.next_request)
            sent = list(self.session.messages)
            request = self.request()
            raw = self.session.snapshot(
                self.settings, self.session.estimator, self.system_prompt, self.tools,
                window=self.window, messages=sent, calibrated=False,
            )
            self._stream_id = m.new_id()
            self._partial = []
            self._emit(StateChanged(AgentState.STREAMING))
            try:
                completion = await llm.stream_chat(
                    self.config,
                    request,
                    self.tools or None,
                    on_text=self._on_text,
                    on_reasoning=self._on_reasoning,
                    on_retry=self._on_retry,
                    partial=self._partial,
                )
            except LLMError as err:
                if err.partial is not None:
                    self._partial.append(err.partial)
                    self._settle()
                if err.kind == "context_window" and err.partial is None:
                    if retries >= MAX_REACTIVE_RETRIES:
                        self._emit(ErrorEvent("context_window", f"{err.message}; still too long after "
                                                                f"{retries} emergency compactions"))
                        return None
                    retries += 1
                    event = await self.compactor.reactive()
                    if event.result == Outcome.FAILED:
                        self._emit(ErrorEvent("context_window", f"{err.message}; nothing is left to compact "
                                                                f"({event.reason})"))
                        return None
                    continue
                self._emit(ErrorEvent(err.kind, err.message, attempt=err.attempts))
                return None
            completion.message["id"] = self._stream_id
            self._partial = []
            self._record_call(completion, sent, raw)
            return completion

    def _record_call(self, completion: Completion, sent: list[Message], raw: ContextSnapshot) -> None:
        """Reported usage beside the estimate: store one snapshot, then calibrate, emit ContextUpdated.

        The snapshot holds what the app predicted for this request (calibrated on the calls before
        it) beside what the provider reported, so the timeline shows the real error of the estimate.
        """
        s = self.session
        reported = completion.usage.prompt_tokens if completion.usage is not None else None
        ids = [str(x.get("id")) for x in sent]
        snap = s.snapshot(
            self.settings, s.estimator, self.system_prompt, self.tools,
            window=self.window, messages=sent, provider_prompt_tokens=reported, call_index=self.calls,
        )
        s.calibrator.record(raw.raw_prompt_tokens, reported, ids, (raw.system, raw.summary, raw.tools))
        self.calls += 1
        s.record_snapshot(snap)
        self._emit(ContextUpdated(snap))

    def _on_text(self, delta: str) -> None:
        self._emit(TextDelta(self._stream_id, delta))

    def _on_reasoning(self, delta: str) -> None:
        self._emit(TextDelta(self._stream_id, delta, reasoning=True))

    def _on_retry(self, attempt: int, delay: float, err: LLMError) -> None:
        text = f"{err.message}; retrying in {delay:.1f} s"
        self._emit(ErrorEvent(err.kind, text, retrying=True, attempt=attempt))

    # ------------------------------------------------------------------ tools

    async def _run_tools(self, msg: Message) -> None:
        self._emit(StateChanged(AgentState.TOOL))
        for call in msg.get("tool_calls") or ():
            fn = call.get("function") or {}
            cid = str(call.get("id") or "")
            name = str(fn.get("name") or "")
            args = str(fn.get("arguments") or "")
            self._emit(ToolCallStarted(cid, name, args))
            result = await self.toolbox.run(name, args)
            full_bytes = len(result.text.encode("utf-8", "surrogatepass"))
            tmsg = m.tool_result(cid, result.text, name=name or None)
            if not result.ok:
                tmsg["tool_error"] = True
            # cut before the first write: a huge output never reaches history.jsonl
            records = await self.offloader.offload_session(self.session, [tmsg])
            path = next((r.path for r in records if r.message_id == tmsg["id"]), None)
            self._emit(MessageAdded(tmsg, self._tokens(tmsg)))
            self._emit(
                ToolCallFinished(cid, name, result.ok, m.preview(tmsg, 200), full_bytes, offload_path=path)
            )

