"""A small, focused reader for the summary benchmark: the span of a Claude Code session that its own
automatic compaction summarised, as OpenAI chat-format messages, with Claude Code's summary of it.

Not the project's session reader (that is :mod:`engine.importer` and the readers of other agents'
formats): only what the benchmark needs, read the way PITFALLS.md and the sessions' README describe.

- The span is the ``parentUuid`` chain that ends at the ``compact_boundary`` line's
  ``logicalParentUuid`` (the boundary itself has ``parentUuid: null``), oldest first; only
  ``user`` and ``assistant`` lines, no sidechain (subagent) lines, no ``isMeta`` lines.
- Assistant lines that share ``message.id`` are one response: text blocks → ``content``, tool_use
  blocks → ``tool_calls`` (arguments as JSON), thinking → ``reasoning_content``.
- User lines: a string or text blocks → a user message; each ``tool_result`` block → a ``tool``
  message (its text). ``toolUseResult`` (a richer copy the model never saw) is ignored.
- Claude Code's summary is the text of the ``user`` line with ``isCompactSummary: true`` that follows
  the boundary.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.model.messages import Message

HARNESS_PREFIXES = (
    "<task-notification>", "<local-command-", "<command-name>", "<command-message>", "[Request interrupted",
    "<system-reminder>", "Caveat: ",
)


@dataclass
class CompactedSpan:
    session: str
    messages: list[Message]  # OpenAI format, oldest first
    claude_summary: str
    pre_tokens: int  # compactMetadata.preTokens


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(b.get("text") or "") for b in content if isinstance(b, dict) and b.get("type") == "text"
        )
    return ""


def _chain(rows: list[dict[str, Any]], last: str) -> list[dict[str, Any]]:
    by_id = {r["uuid"]: r for r in rows if isinstance(r.get("uuid"), str)}
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    uid: str | None = last
    while uid and uid in by_id and uid not in seen:
        seen.add(uid)
        row = by_id[uid]
        out.append(row)
        uid = row.get("parentUuid")
    out.reverse()
    return out


def _assistant(rows: list[dict[str, Any]]) -> Message:
    texts: list[str] = []
    thinking: list[str] = []
    calls: list[dict[str, Any]] = []
    for row in rows:
        for block in row["message"].get("content") or []:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "text":
                texts.append(str(block.get("text") or ""))
            elif kind == "thinking":
                thinking.append(str(block.get("thinking") or ""))
            elif kind == "tool_use":
                calls.append({
                    "id": str(block.get("id")),
                    "type": "function",
                    "function": {"name": str(block.get("name")), "arguments": json.dumps(block.get("input") or {})},
                })
    msg: Message = {"id": rows[0]["uuid"], "ts": rows[0].get("timestamp"), "role": "assistant",
                    "content": "\n\n".join(texts) or None}
    if calls:
        msg["tool_calls"] = calls
    if thinking:
        msg["reasoning_content"] = "\n\n".join(thinking)
    return msg


def _user(row: dict[str, Any]) -> list[Message]:
    content = row["message"].get("content")
    ts = row.get("timestamp")
    if isinstance(content, str):
        return [{"id": row["uuid"], "ts": ts, "role": "user", "content": content}]
    out: list[Message] = []
    for i, block in enumerate(content or []):
        if isinstance(block, dict) and block.get("type") == "tool_result":
            out.append({"id": f"{row['uuid']}-{i}", "ts": ts, "role": "tool",
                        "tool_call_id": str(block.get("tool_use_id")), "content": _text_of(block.get("content"))})
    text = _text_of(content)
    if text.strip():
        out.append({"id": row["uuid"], "ts": ts, "role": "user", "content": text})
    return out


def to_openai(chain: list[dict[str, Any]]) -> list[Message]:
    """The chain's user and assistant lines as OpenAI chat-format messages."""
    out: list[Message] = []
    pending: list[dict[str, Any]] = []
    for row in chain:
        if row.get("type") not in ("user", "assistant") or row.get("isSidechain") or row.get("isMeta"):
            continue
        if row["type"] == "assistant":
            if pending and pending[0]["message"].get("id") != row["message"].get("id"):
                out.append(_assistant(pending))
                pending = []
            pending.append(row)
            continue
        if pending:
            out.append(_assistant(pending))
            pending = []
        out.extend(_user(row))
    if pending:
        out.append(_assistant(pending))
    return out


def read_span(path: Path) -> CompactedSpan | None:
    """The pre-compaction span of a session file, or None when it has no compaction."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    at = next((i for i, r in enumerate(rows) if r.get("subtype") == "compact_boundary"), None)
    if at is None:
        return None
    boundary = rows[at]
    summary = next(
        (_text_of(r["message"].get("content")) for r in rows[at + 1 :] if r.get("isCompactSummary")), ""
    )
    chain = _chain(rows, str(boundary.get("logicalParentUuid")))
    pre = int((boundary.get("compactMetadata") or {}).get("preTokens") or 0)
    return CompactedSpan(path.stem, to_openai(chain), summary, pre)


def user_requests(messages: list[Message]) -> list[str]:
    """What a person typed: user messages that are not Claude Code's own notices."""
    out: list[str] = []
    for m in messages:
        if m.get("role") == "user":
            text = _text_of(m.get("content")).strip()
            if text and not text.startswith(HARNESS_PREFIXES):
                out.append(text)
    return out
