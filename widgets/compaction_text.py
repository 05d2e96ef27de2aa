"""Text of a compaction (the chart marker's tooltip, the Compactions tab's details) and of a subagent
mark: plain functions on the compaction records (:class:`engine.model.records.CompactionRecord`, read by
attribute) and the subagent marks (:class:`engine.workbench.rows.SubagentMark`), showing only the fields a record has.

An import of another agent (Claude Code) records ``trigger``, ``tokens_before``/``tokens_after``,
``summary`` and ``cost`` — what the compaction call itself cost: ``prompt_tokens`` (of which
``cache_read_tokens`` / ``cache_write_tokens``), ``completion_tokens``, ``model``; ctxbench's own
compactions record ``duration_ms``, ``messages_compacted``/``messages_kept``, ``result``, ``reason``.
Claude Code 2.1.3xx imports add ``post_tokens`` (the agent's own count of the context right after
compacting, shown beside ``tokens_after`` — the first call after), ``cost_usd`` (what compacting cost,
from the agent's cost records), ``messages_kept`` (messages preserved across it) and ``placed_by``
("file order" when the boundary's link was missing and the file's order placed it); 2.1.332's add
``dropped_tokens`` (the tokens that compaction dropped, from the agent's running total, computed by the engine).
Nothing is invented: a field that is absent is not shown.
"""

from __future__ import annotations

from typing import Any

from engine.model.records import CompactionRecord
from engine.workbench.rows import SubagentMark
from widgets.formatting import format_usd
from widgets.theme import format_tokens

TOOLTIP_SUMMARY_LINES = 4
TOOLTIP_LINE_CHARS = 110


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def cost_line(event: CompactionRecord) -> str:
    """"Compacting cost: 169,910 prompt tokens (167,093 cache read, 2,814 cache write), 6 completion ·
    claude-opus-4-6", or "" when the event carries no cost."""
    call = event.call
    if call is None:
        return ""
    parts: list[str] = []
    cached = [f"{format_tokens(v)} {label}" for v, label in
              ((call.cache_read_tokens, "cache read"), (call.cache_write_tokens, "cache write")) if v is not None]
    if call.prompt_tokens is not None:
        cache = f" ({', '.join(cached)})" if cached else ""
        parts.append(f"{format_tokens(call.prompt_tokens)} prompt tokens{cache}")
    elif cached:
        parts.append(", ".join(cached))
    if call.completion_tokens is not None:
        parts.append(f"{format_tokens(call.completion_tokens)} completion")
    elif call.completion_placeholder is not None:  # never a figure the file does not hold (engine.sources.claude_code)
        parts.append(f"completion unknown (the file holds only a streaming placeholder, {call.completion_placeholder})")
    if not parts:
        return ""
    return "Compacting cost: " + ", ".join(parts) + (f" · {call.model}" if call.model else "")


def usd_line(event: CompactionRecord) -> str:
    """"Compacting cost $0.0121 (the agent's cost records)", or "" when not known."""
    usd = event.cost_usd
    return "" if usd is None else f"Compacting cost {format_usd(usd)} (the agent's cost records)"


def post_line(event: CompactionRecord) -> str:
    """"Right after compacting: 2,649 tokens (the agent's own count)", or "" when not recorded."""
    post = event.post_tokens
    return "" if post is None else f"Right after compacting: {format_tokens(post)} tokens (the agent's own count)"


def dropped_line(event: CompactionRecord) -> str:
    """"Dropped: 9,625 tokens (the agent's count)", or "" when not known (the engine's ``dropped_tokens``: the
    agent's running total less the previous compaction's, :func:`engine.sources.model.dropped_tokens`)."""
    dropped = event.dropped_tokens
    return "" if dropped is None else f"Dropped: {format_tokens(dropped)} tokens (the agent's count)"


def placed_line(event: CompactionRecord) -> str:
    """"Placed by file order …" when the boundary was placed by the file's order, else ""."""
    if event.placed_by != "file order":
        return ""
    return "Placed by file order (its link to the message before it is missing in the file)"


def head_lines(event: CompactionRecord) -> list[str]:
    """Trigger and result, before → after, what was compacted, when, why."""
    trigger = str(event.trigger or "?")
    result = str(event.result)
    source = event.source_format
    lines = [f"Compaction ({trigger})" + (f" · {result}" if result else "") + (f" · by {source}" if source else "")]
    change = event.change()  # one basis in every view (engine.model.compaction_change)
    post = event.post_tokens
    if change.before is not None and change.after is not None:
        first = " (the first call after)" if post is not None else ""
        lines.append(f"{change.text(format_tokens)}{first}")
        if change.grows:
            lines.append("⚠ The context grew: the summary is longer than what it replaced")
    elif change.before is not None:
        lines.append(change.text(format_tokens))
    if post is not None:
        lines.append(post_line(event))
    if dropped := dropped_line(event):
        lines.append(dropped)
    counts = [f"{event.messages_compacted:,} messages compacted"]
    if event.messages_kept is not None:
        counts.append(f"{event.messages_kept:,} kept")
    if event.duration_ms and not source:  # an import records no duration of its own (0)
        counts.append(f"{event.duration_ms / 1000:.1f} s")
    lines.append(" · ".join(counts))
    if event.ts:
        lines.append(event.ts)
    if event.reason:
        lines.append(f"Reason: {event.reason}")
    lines += [t for t in (usd_line(event), cost_line(event), placed_line(event)) if t]
    return lines


def summary_head(summary: str, lines: int = TOOLTIP_SUMMARY_LINES, chars: int = TOOLTIP_LINE_CHARS) -> list[str]:
    """The first ``lines`` non-blank lines of a summary, each cut to ``chars``."""
    out: list[str] = []
    for raw in summary.splitlines():
        line = raw.strip()
        if not line:
            continue
        if len(out) == lines:
            out.append("…")
            break
        out.append(line if len(line) <= chars else line[: chars - 1] + "…")
    return out


def compaction_tooltip(event: CompactionRecord) -> str:
    """The marker's tooltip: the head lines and the summary's first lines."""
    lines = head_lines(event)
    summary = event.summary.strip()
    if summary:
        lines.append("Summary:")
        lines += ["  " + s for s in summary_head(summary)]
    return "\n".join(lines)


def compaction_details(event: CompactionRecord) -> str:
    """The Compactions tab's details: the head lines, where the compacted messages went, the whole summary."""
    parts = ["\n".join(head_lines(event))]
    if event.archive_day:
        parts.append(f"The compacted messages are archived to dialog/{event.archive_day}.jsonl "
                     f"(Archive tab, day {event.archive_day})")
    parts.append(event.summary or "(no summary)")
    return "\n\n".join(parts)


def subagent_tooltip(mark: SubagentMark) -> str:
    """A subagent mark's tooltip: id, model, calls, peak and total prompt tokens, and that a click opens it."""
    lines = [f"Subagent {mark.id or '?'}"]
    if mark.model:
        lines.append(f"model {mark.model}")
    if mark.calls is not None:
        lines.append(f"{mark.calls:,} call{'s' if mark.calls != 1 else ''}")
    if mark.peak_prompt_tokens is not None:
        lines.append(f"peak prompt {format_tokens(mark.peak_prompt_tokens)} tokens")
    if mark.total_prompt_tokens is not None:
        lines.append(f"total prompt {format_tokens(mark.total_prompt_tokens)} tokens")
    if mark.session:
        lines.append(f"Click to open {mark.session}")
    return "\n".join(lines)


__all__ = ["compaction_details", "compaction_tooltip", "cost_line", "dropped_line", "head_lines", "placed_line",
           "post_line",
           "subagent_tooltip", "summary_head", "usd_line"]
