"""Where an imported session's subagents ran, for the parent's timeline.

The import records each subagent in the session's meta ``import`` → ``subagents`` (id, model, calls,
its calls' prompt tokens, the relative ``session`` folder, the parent's Task ``parent_tool_call_id``).
:func:`subagent_marks` makes each a :class:`engine.workbench.rows.SubagentMark` with what the timeline needs:
``call_index`` — the 0-based parent call that issued the Task call (the call whose first produced message is the
assistant message carrying that tool call; failing that, the last call before the message) — and
``peak_prompt_tokens`` / ``total_prompt_tokens``. Nothing is invented: a figure the import did not record stays
None.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.model.messages import Message
from engine.model.records import ContextRecord
from engine.workbench.rows import SubagentMark


def _tool_call_message(messages: Sequence[Message], call_id: str) -> str | None:
    for msg in messages:
        for call in msg.get("tool_calls") or []:
            if isinstance(call, dict) and call.get("id") == call_id:
                return str(msg.get("id") or "")
    return None


def _call_index(timeline: Sequence[ContextRecord], messages: Sequence[Message], message_id: str) -> int | None:
    for i, rec in enumerate(timeline):
        if rec.message_id == message_id:
            return i
    pos = {str(m.get("id")): i for i, m in enumerate(messages)}
    where = pos.get(message_id)
    if where is None:
        return None
    best: int | None = None
    for i, rec in enumerate(timeline):
        p = pos.get(str(rec.message_id))
        if p is not None and p <= where:
            best = i
    return best


def _whole(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def subagent_marks(meta: dict[str, Any], timeline: Sequence[ContextRecord],
                   messages: Sequence[Message]) -> list[SubagentMark]:
    """The meta's subagents, each with ``call_index`` (None: not found) and its prompt figures."""
    imp = meta.get("import")
    subs = imp.get("subagents") if isinstance(imp, dict) else None
    if not isinstance(subs, list):
        return []
    out: list[SubagentMark] = []
    for sub in subs:
        if not isinstance(sub, dict):
            continue
        prompts = [p for p in sub.get("prompt_tokens") or [] if isinstance(p, int) and not isinstance(p, bool)]
        parent = _str(sub.get("parent_tool_call_id"))
        mid = _tool_call_message(messages, parent) if parent else None
        out.append(SubagentMark(
            id=str(sub.get("id") or ""), session=_str(sub.get("session")), model=_str(sub.get("model")),
            calls=_whole(sub.get("calls")), parent_tool_call_id=parent,
            peak_prompt_tokens=max(prompts) if prompts else None, total_prompt_tokens=sum(prompts) if prompts else None,
            call_index=_call_index(timeline, messages, mid) if mid else None))
    return out


__all__ = ["subagent_marks"]
