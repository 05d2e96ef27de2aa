"""The summary through an injected LLM callable: the request, the reply's check, the note when it fails.

:func:`generate_summary` — (:data:`SummarizeFn`; this module never imports litellm): six Markdown
sections, incremental update of the previous summary, optional extra instruction, validity check.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from engine.context.plan import CompactionError
from engine.model.messages import Message, content_text

log = logging.getLogger(__name__)

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


def cut_middle(text: str, limit: int) -> str:
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
        body = cut_middle(content_text(msg.get("content")), tool_chars)
    else:
        head = f"### [{index}] {role}" + (f" · {ts}" if ts else "")
        body = cut_middle(content_text(msg.get("content")), other_chars)
    lines = [head]
    if msg.get("reasoning_content"):
        lines.append("(reasoning) " + cut_middle(str(msg["reasoning_content"]), other_chars // 4))
    if body:
        lines.append(body)
    for call in msg.get("tool_calls") or ():
        if isinstance(call, dict):
            fn = call.get("function") or {}
            args = cut_middle(str(fn.get("arguments") or ""), other_chars // 2)
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
        text = cut_middle(text, budget_chars)
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
    except Exception as exc:  # provider boundary (the injected summarizer): the caller falls back to dropping
        log.warning("the summary call failed", exc_info=True)
        ms = (time.perf_counter() - t0) * 1000
        return SummaryResult("", False, f"the summary call failed: {type(exc).__name__}: {exc}", ms)
    text = normalize_summary(reply if isinstance(reply, str) else "")
    valid, reason = check_summary(text)
    return SummaryResult(text, valid, reason, (time.perf_counter() - t0) * 1000)


def drop_note(summary: str, dropped: int, reason: str) -> str:
    note = (
        f"[{dropped} older message{'s' if dropped != 1 else ''} left the context without a new summary "
        f"({reason}). They are kept in this session's dialog archive (dialog/).]"
    )
    return f"{summary}\n\n{note}" if summary.strip() else note
