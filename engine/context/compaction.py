"""Compaction: the plan, the summary, the three automatic paths and manual preview → apply → undo.

SPEC §4. The pieces:

- :func:`plan_compaction` — pure: which messages are compacted and which are kept, with token counts
  before and after. Over ``threshold_ratio × window`` (strictly greater than the integer threshold,
  the same test as :attr:`ContextSnapshot.over_threshold`), keep the longest suffix whose tokens are
  ≤ ``reserve_tokens`` and whose cut separates no tool call from its result; compact the rest.
- :func:`generate_summary` — the summary through an injected async LLM callable
  (:data:`SummarizeFn`; this module never imports litellm): six Markdown sections, incremental
  update of the previous summary, optional extra instruction, validity check.
  The Compactor summarises through :mod:`engine.context.summaries` (the ``summary_mode`` setting: the digest
  made from the messages, :mod:`engine.context.digest`; the model's summary given the digest; or both).
- :func:`force_compression` — the emergency cut (pure); :func:`emergency_split` says what it drops.
- :class:`Compactor` — bound to one :class:`engine.store.session.Session`: ``run_auto`` (post-turn,
  background, never two at once per session, cancelled when the session closes), ``proactive``
  (pre-call), ``reactive`` (after a provider context-window error), ``preview``/``apply``/``undo``
  (manual). Every path that changes the session records an :class:`engine.model.events.CompactionEvent`
  in events.jsonl and passes it to the ``emit`` callback.

**Pinned messages** are never compacted by the plan: a pinned message in the compacted part stays
in ``keep`` (in its place, before the kept suffix), together with the other half of its tool call
pairs. They do not count against the reserve. The emergency path (:func:`force_compression`)
follows the SPEC exactly and ignores pins: what it drops is archived and can be restored.

Token numbers the Compactor plans with are calibrated (scaled by the session's actual/estimate
ratio) once the provider has reported usage, so the plan agrees with the chart.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.context.budget import ContextSnapshot, WindowInfo, is_over_context_budget
from engine.context.tokens import Estimator
from engine.context.turns import clean_cut_points, find_safe_boundary, parse_turn_boundaries
from engine.model.events import CompactionEvent, CompactionFailed, CompactionStarted, Event
from engine.model.messages import Message, call_ids, content_text, new_id, now_iso
from engine.store import archive
from engine.store.config import Settings

if TYPE_CHECKING:
    from engine.store.session import Session

SummarizeFn = Callable[[list[dict[str, Any]], int], Awaitable[str]]

SECTIONS = (
    "Goal", "Constraints & Preferences", "Progress", "Key Decisions", "Next Steps", "Critical Context",
)
_SECTION_KEYS = {
    "Goal": ("goal",),
    "Constraints & Preferences": ("constraint", "preference"),
    "Progress": ("progress",),
    "Key Decisions": ("decision",),
    "Next Steps": ("next step",),
    "Critical Context": ("critical context", "critical"),
}
PROMPT_PATH = Path(__file__).resolve().parents[2] / "resources" / "prompts" / "summary.md"
TOOL_RESULT_CHARS = 4_000  # per tool result in the transcript sent to the summarizer
MESSAGE_CHARS = 12_000  # per other message
PROMPT_OVERHEAD_TOKENS = 1_000


class CompactionError(Exception):
    """A compaction that cannot be done as asked; the text says why. Nothing was changed."""


class StalePreviewError(CompactionError):
    """The session changed since the preview was made; make a new preview."""


# --------------------------------------------------------------------------- the plan


@dataclass
class CompactionPlan:
    compact: list[Message]
    keep: list[Message]
    tokens_before: int  # the full request: system + summary + history + tools + max_tokens
    tokens_after: int  # the same with only ``keep`` (and the current summary)
    compact_tokens: int
    keep_tokens: int
    needed: bool
    reason: str
    threshold_tokens: int = 0
    reserve_tokens: int = 0
    cut_index: int = 0  # where the kept suffix starts in the history
    pinned_kept: int = 0  # messages kept before the cut because of pins

    @property
    def compact_ids(self) -> list[str]:
        return [str(m.get("id")) for m in self.compact]

    @property
    def keep_ids(self) -> list[str]:
        return [str(m.get("id")) for m in self.keep]


def _pinned_closure(history: Sequence[Message], stop: int) -> set[int]:
    """Indexes < stop that stay because they are pinned or paired with a pinned message."""
    pinned = [i for i in range(stop) if history[i].get("pinned")]
    if not pinned:
        return set()
    owner: dict[str, int] = {}
    results: dict[str, list[int]] = {}
    for i in range(stop):
        m = history[i]
        if m.get("role") == "assistant":
            for cid in call_ids(m):
                owner.setdefault(cid, i)
        elif m.get("role") == "tool":
            results.setdefault(str(m.get("tool_call_id") or ""), []).append(i)
    keep: set[int] = set()
    todo = list(pinned)
    while todo:
        i = todo.pop()
        if i in keep:
            continue
        keep.add(i)
        m = history[i]
        if m.get("role") == "assistant":
            for cid in call_ids(m):
                todo.extend(results.get(cid, ()))
        elif m.get("role") == "tool":
            o = owner.get(str(m.get("tool_call_id") or ""))
            if o is not None:
                todo.append(o)
    return keep


def _last_turn_start(history: Sequence[Message]) -> int | None:
    users = parse_turn_boundaries(history)
    return users[-1] if users else None


def plan_compaction(
    history: Sequence[Message],
    counts: Sequence[int],
    *,
    window: int,
    system_tokens: int,
    summary_tokens: int,
    tools_tokens: int,
    max_tokens: int,
    threshold_ratio: float,
    reserve_tokens: int,
    force: bool = False,
    keep_from: int | None = None,
) -> CompactionPlan:
    """What to compact and what to keep (SPEC §4 Plan); pure, O(n).

    ``force`` (the manual path) plans a compaction even when the request is under the threshold.
    ``keep_from`` (the pre-call path, mid-turn) keeps every message from that index on, whatever
    the reserve: the turn in progress must reach the model with its user message.
    ``needed`` is true only when something would actually be compacted.
    """
    n = len(history)
    if len(counts) != n:
        raise ValueError(f"plan_compaction: {len(counts)} token counts for {n} messages")
    hist_tokens = sum(counts)
    fixed = system_tokens + summary_tokens + tools_tokens + max_tokens
    before = fixed + hist_tokens
    threshold = int(threshold_ratio * window)

    def nothing(reason: str) -> CompactionPlan:
        return CompactionPlan(
            compact=[],
            keep=list(history),
            tokens_before=before,
            tokens_after=before,
            compact_tokens=0,
            keep_tokens=hist_tokens,
            needed=False,
            reason=reason,
            threshold_tokens=threshold,
            reserve_tokens=reserve_tokens,
            cut_index=0,
        )

    if n == 0:
        return nothing("the history is empty")
    if not force and before <= threshold:
        return nothing(f"the request ({before} tokens) is within the threshold ({threshold} tokens)")
    ok = clean_cut_points(history)
    start = n
    suffix = 0
    for i in range(n - 1, -1, -1):
        if suffix + counts[i] > reserve_tokens:
            break
        suffix += counts[i]
        start = i
    cut = start
    while not ok[cut]:
        cut += 1
    if keep_from is not None and keep_from < cut:
        cut = max(0, keep_from)
        while cut > 0 and not ok[cut]:
            cut -= 1
    if cut == 0:
        return nothing(
            f"the whole history ({hist_tokens} tokens) fits in the reserve ({reserve_tokens} tokens)"
        )
    pinned = _pinned_closure(history, cut)
    compact_idx = [i for i in range(cut) if i not in pinned]
    if not compact_idx:
        return nothing("every message before the kept part is pinned")
    compact_tokens = sum(counts[i] for i in compact_idx)
    keep = [history[i] for i in sorted(pinned)] + list(history[cut:])
    keep_tokens = hist_tokens - compact_tokens
    if before > threshold:
        reason = f"the request ({before} tokens) is over the threshold ({threshold} tokens)"
    else:
        reason = "compaction requested"
    return CompactionPlan(
        compact=[history[i] for i in compact_idx],
        keep=keep,
        tokens_before=before,
        tokens_after=fixed + keep_tokens,
        compact_tokens=compact_tokens,
        keep_tokens=keep_tokens,
        needed=True,
        reason=reason,
        threshold_tokens=threshold,
        reserve_tokens=reserve_tokens,
        cut_index=cut,
        pinned_kept=len(pinned),
    )


# --------------------------------------------------------------------------- emergency


def emergency_split(history: Sequence[Message]) -> tuple[list[Message], list[Message]]:
    """(dropped, kept) for the emergency cut of SPEC §4; pure, O(n).

    ≤ 2 messages: nothing. ≥ 2 turns: keep from the turn at ``turns[len(turns)//2]``. One turn: keep
    from ``find_safe_boundary(history, len//2)``, and where that is 0 keep only the most recent user
    message. No user message at all: keep from ``len//2``. A cut that would separate a tool call from
    its result (only malformed logs have one at a turn start) moves forward to the next clean cut.
    """
    n = len(history)
    if n <= 2:
        return [], list(history)
    turns = parse_turn_boundaries(history)
    if len(turns) >= 2:
        k = turns[len(turns) // 2]
    else:
        k = find_safe_boundary(history, n // 2)
        if k == 0 and turns:
            u = turns[-1]
            return list(history[:u]) + list(history[u + 1 :]), [history[u]]
    ok = clean_cut_points(history)
    j = k
    while j < n and not ok[j]:
        j += 1
    if j == n:  # nothing clean after: take the nearest clean cut before instead
        j = k
        while j > 0 and not ok[j]:
            j -= 1
    return list(history[:j]), list(history[j:])


def emergency_note(dropped: int) -> str:
    return (
        f"[Emergency compression: {dropped} older message{'s' if dropped != 1 else ''} were dropped from "
        "the context to fit the window. They are kept in this session's dialog archive (dialog/).]"
    )


def force_compression(history: Sequence[Message], summary: str) -> tuple[list[Message], str, int]:
    """Emergency compression: (new history, new summary, count dropped); pure.

    The note about the dropped messages goes into the summary, never into the history. The caller
    archives the dropped messages (see :func:`emergency_split`).
    """
    dropped, kept = emergency_split(history)
    if not dropped:
        return list(history), summary, 0
    note = emergency_note(len(dropped))
    return kept, (f"{summary}\n\n{note}" if summary else note), len(dropped)


# --------------------------------------------------------------------------- the summary


@dataclass
class SummaryResult:
    text: str
    valid: bool
    reason: str = ""
    duration_ms: float = 0.0


@cache
def load_prompt() -> str:
    try:
        return PROMPT_PATH.read_text(encoding="utf-8")
    except OSError as exc:
        raise CompactionError(f"the summary prompt is missing: {PROMPT_PATH} ({exc})") from exc


_THINK_RE = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE_RE = re.compile(r"^```[a-zA-Z]*\n(.*)\n```$", re.DOTALL)
_HEADING_RE = re.compile(r"^\s{0,3}(#{2,3})\s+(.+?)\s*#*\s*$", re.MULTILINE)


def normalize_summary(text: str) -> str:
    """Strip reasoning blocks and a code fence wrapped around the whole reply."""
    text = _THINK_RE.sub("", text or "").strip()
    m = _FENCE_RE.match(text)
    if m:
        text = m.group(1).strip()
    return text


def check_summary(text: str) -> tuple[bool, str]:
    """(valid, reason): a valid summary is non-empty and has the six ``##`` section headings."""
    if not text.strip():
        return False, "the summary is empty"
    headings = [h.lower() for level, h in _HEADING_RE.findall(text) if level == "##"]
    if not headings:
        return False, "the summary has no '##' section headings"
    missing = [
        name for name, keys in _SECTION_KEYS.items() if not any(k in h for h in headings for k in keys)
    ]
    if missing:
        return False, "the summary lacks the section(s): " + ", ".join(missing)
    return True, ""


def _cut_middle(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = max(1, limit // 2)
    return f"{text[:half]}\n[… {len(text) - 2 * half} characters left out …]\n{text[-half:]}"


def _render_message(index: int, msg: Message, tool_chars: int, other_chars: int) -> str:
    role = str(msg.get("role") or "?")
    ts = str(msg.get("ts") or "")[:16].replace("T", " ")
    if role == "tool":
        head = f"### [{index}] tool result for call {msg.get('tool_call_id') or '?'}"
        if msg.get("name"):
            head += f" ({msg['name']})"
        body = _cut_middle(content_text(msg.get("content")), tool_chars)
    else:
        head = f"### [{index}] {role}" + (f" · {ts}" if ts else "")
        body = _cut_middle(content_text(msg.get("content")), other_chars)
    lines = [head]
    if msg.get("reasoning_content"):
        lines.append("(reasoning) " + _cut_middle(str(msg["reasoning_content"]), other_chars // 4))
    if body:
        lines.append(body)
    for call in msg.get("tool_calls") or ():
        if isinstance(call, dict):
            fn = call.get("function") or {}
            args = _cut_middle(str(fn.get("arguments") or ""), other_chars // 2)
            lines.append(f"→ calls {fn.get('name') or '?'}({args}) [id {call.get('id') or '?'}]")
    if msg.get("interrupted"):
        lines.append("(this message was interrupted)")
    return "\n".join(lines)


def render_transcript(messages: Sequence[Message], budget_chars: int | None = None) -> str:
    """The compacted messages as text for the summarizer, shrunk to ``budget_chars`` if given."""
    tool_chars, other_chars = TOOL_RESULT_CHARS, MESSAGE_CHARS
    while True:
        text = "\n\n".join(_render_message(i + 1, m, tool_chars, other_chars) for i, m in enumerate(messages))
        if budget_chars is None or len(text) <= budget_chars or tool_chars <= 200:
            break
        tool_chars, other_chars = tool_chars // 2, other_chars // 2
    if budget_chars is not None and len(text) > budget_chars:
        text = _cut_middle(text, budget_chars)
    return text


def build_summary_request(
    compacted: Sequence[Message],
    previous_summary: str,
    instruction: str | None,
    *,
    budget_chars: int | None = None,
) -> list[dict[str, Any]]:
    """The wire messages for the summary call: our prompt, then the material."""
    parts: list[str] = []
    if previous_summary.strip():
        parts.append(
            "This is the summary written the last time the context was compacted. Update it with the "
            "messages below; keep what is still true.\n\n<previous-summary>\n"
            f"{previous_summary.strip()}\n</previous-summary>"
        )
    else:
        parts.append("There is no previous summary: this is the first compaction of this conversation.")
    parts.append(
        f"The {len(compacted)} messages leaving the context, oldest first:\n\n<conversation>\n"
        f"{render_transcript(compacted, budget_chars)}\n</conversation>"
    )
    if instruction and instruction.strip():
        parts.append(f"Extra instruction from the user for this summary: {instruction.strip()}")
    parts.append("Write the updated summary now, with the six sections.")
    return [
        {"role": "system", "content": load_prompt()},
        {"role": "user", "content": "\n\n".join(parts)},
    ]


async def generate_summary(
    summarize: SummarizeFn,
    compacted: Sequence[Message],
    previous_summary: str,
    instruction: str | None,
    max_tokens: int,
    *,
    budget_chars: int | None = None,
) -> SummaryResult:
    """Ask the injected LLM callable for a summary and check it. Never raises but for cancellation."""
    t0 = time.perf_counter()
    if not compacted and not previous_summary.strip():
        return SummaryResult("", False, "nothing to summarize")
    request = build_summary_request(compacted, previous_summary, instruction, budget_chars=budget_chars)
    try:
        reply = await summarize(request, max_tokens)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # the provider failed: the caller falls back to dropping
        ms = (time.perf_counter() - t0) * 1000
        return SummaryResult("", False, f"the summary call failed: {type(exc).__name__}: {exc}", ms)
    text = normalize_summary(reply if isinstance(reply, str) else "")
    valid, reason = check_summary(text)
    return SummaryResult(text, valid, reason, (time.perf_counter() - t0) * 1000)


def summary_block(summary: str, archive_days: Sequence[str] = ()) -> str:
    """The summary as injected into the request, telling the model where the archive is."""
    if not summary.strip():
        return ""
    where = (
        "Earlier messages are kept word for word in this session's dialog archive: "
        + ", ".join(f"dialog/{d}.jsonl" for d in archive_days)
        + " (one JSON message per line, newest at the end; read them with read_file)."
        if archive_days
        else "Earlier messages are kept word for word in this session's dialog archive (dialog/)."
    )
    return f"# Summary of the earlier conversation\n\n{summary.strip()}\n\n{where}"


def drop_note(summary: str, dropped: int, reason: str) -> str:
    note = (
        f"[{dropped} older message{'s' if dropped != 1 else ''} left the context without a new summary "
        f"({reason}). They are kept in this session's dialog archive (dialog/).]"
    )
    return f"{summary}\n\n{note}" if summary.strip() else note


# --------------------------------------------------------------------------- the compactor


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
        from engine.store.session import window_for

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
        return self.snapshot(messages, summary).used

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
            keep_from=_last_turn_start(s.messages) if keep_current_turn else None,
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
        from engine.context.summaries import summarize_plan

        return await summarize_plan(self, plan, instruction)

    def _commit(
        self,
        trigger: str,
        new_messages: list[Message],
        summary: str,
        *,
        result: str,
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
            return self._commit("manual", [], "", result="dropped", reason=reason, before=self._request_tokens(), t0=t0)

    def _fail(self, trigger: str, reason: str, before: int, t0: float) -> CompactionEvent:
        event = CompactionEvent(
            trigger=trigger,
            tokens_before=before,
            tokens_after=before,
            messages_compacted=0,
            messages_kept=len(self.session.messages),
            duration_ms=(time.perf_counter() - t0) * 1000,
            result="failed",
            summary=self.session.summary,
            reason=reason,
        )
        return self._record(event)

    def _apply_summary(
        self,
        trigger: str,
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
                trigger, new, result.text, result="summarized", reason=plan.reason, before=before, t0=t0,
                extra_ms=extra_ms,
            )
        summary = drop_note(self.session.summary, len(gone), result.reason)
        return self._commit(
            trigger, new, summary, result="dropped", reason=result.reason, before=before, t0=t0,
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
                self._emit(CompactionStarted("auto"))
                t0 = time.perf_counter()
                before = self._request_tokens()
                try:
                    result = await self._summarize(plan, None)
                except asyncio.CancelledError:
                    self._emit(CompactionFailed("auto", "cancelled"))
                    raise
                if self.session.closed:
                    return None
                if any(i not in self.session for i in plan.compact_ids):
                    return self._fail("auto", "the history changed during summarization", before, t0)
                return self._apply_summary("auto", plan, result, before, t0)
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
        """SPEC §4 path 2 test. Uncalibrated heuristic with a request builder: ``is_over_context_budget``
        on the built request; otherwise the (calibrated) snapshot of the next request."""
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
            self._emit(CompactionStarted("proactive"))
            t0 = time.perf_counter()
            before = self._request_tokens()
            plan = self.plan(force=True, keep_current_turn=True)
            last: CompactionEvent | None = None
            reason = plan.reason
            if plan.needed:  # the digest needs no summarizer (model mode without one fails here)
                result = await self._summarize(plan, None)
                if result.valid:
                    last = self._apply_summary("proactive", plan, result, before, t0)
                    if not self.over_budget(build_request):
                        return last
                    reason = "still over the window after summarizing"
                    t0 = time.perf_counter()
                    before = self._request_tokens()
                else:
                    reason = result.reason
            return self._emergency("proactive", reason, before, t0, until_fits=True) or last

    async def reactive(self) -> CompactionEvent:
        """After a provider context-window error: one emergency compression (:func:`force_compression`).

        ``result`` is "dropped" when something went, "failed" when nothing could (the caller stops
        retrying then).
        """
        async with self.lock:
            self._emit(CompactionStarted("reactive"))
            t0 = time.perf_counter()
            before = self._request_tokens()
            event = self._emergency("reactive", "the provider reported a context-window error", before, t0)
            if event is None:
                why = "nothing left to drop (≤ 2 messages and a small summary)"
                return self._fail("reactive", why, before, t0)
            return event

    def _emergency(
        self, trigger: str, reason: str, before: int, t0: float, *, until_fits: bool = False
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
        return self._commit(trigger, history, summary, result="dropped", reason=why, before=before, t0=t0)

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
        from engine.context.summaries import quick_preview

        return quick_preview(self, instruction)

    async def complete_preview(self, preview: CompactionPreview) -> CompactionPreview:
        """The preview with the model's part in (the same preview when the mode has none)."""
        from engine.context.summaries import complete_preview

        return await complete_preview(self, preview)

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
                "manual", preview.plan, result, before, t0, extra_ms=preview.summary.duration_ms
            )

    async def undo(self) -> CompactionEvent:
        """Restore the history and summary from before the latest compaction (archive keeps its copy)."""
        async with self.lock:
            t0 = time.perf_counter()
            before = self._request_tokens()
            from engine.store.session import SessionError

            try:
                res = self.session.undo_last()
            except SessionError as exc:
                raise CompactionError(str(exc)) from exc
            reason = f"restored {len(res.restored)} message(s)"
            if res.missing:
                reason += f"; {len(res.missing)} could not be found"
            event = CompactionEvent(
                trigger="manual",
                tokens_before=before,
                tokens_after=self._request_tokens(),
                messages_compacted=len(res.restored),
                messages_kept=len(self.session.messages),
                duration_ms=(time.perf_counter() - t0) * 1000,
                result="undone",
                summary=res.summary,
                reason=reason,
                id=res.event_id,
            )
            return self._record(event)
