"""OpenAI chat-format messages, the format litellm takes, plus the little metadata we keep.

A message is a plain ``dict``. Besides the wire keys (``role``, ``content``, ``tool_calls``,
``tool_call_id``, ``name``, ``reasoning_content``) a stored message carries:

- ``id``: a uuid4 hex string, unique within a session;
- ``ts``: ISO-8601 UTC timestamp of when the message was created;
- ``pinned`` (optional): the user asked to keep it out of compaction;
- ``interrupted`` (optional): the turn was cancelled while this message streamed;
- ``usage`` (optional, assistant): what the provider reported for the request that produced it.

Only :func:`to_wire` decides what reaches the provider: metadata never does.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, date, datetime
from enum import StrEnum
from typing import Any

from engine.model.text import one_line

Message = dict[str, Any]



class Role(StrEnum):
    """Who a message is from. The history holds user, assistant and tool messages; the system prompt
    is kept beside it (session.json) and becomes the request's first message."""

    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"
    SYSTEM = "system"


ROLES: tuple[str, ...] = tuple(Role)
HISTORY_ROLES: tuple[str, ...] = (Role.USER, Role.ASSISTANT, Role.TOOL)
WIRE_KEYS = ("role", "content", "tool_calls", "tool_call_id", "name", "reasoning_content")
TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text", "refusal"})


class MessageError(ValueError):
    """A message that is not valid OpenAI chat format; the text names what is wrong."""


def new_id() -> str:
    return uuid.uuid4().hex


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def new_message(role: str, content: Any = None, **fields: Any) -> Message:
    """A fresh message with an id and a timestamp."""
    msg: Message = {"role": role, "content": content}
    msg.update({k: v for k, v in fields.items() if v is not None})
    msg.setdefault("id", new_id())
    msg.setdefault("ts", now_iso())
    return msg


def user(content: Any, **fields: Any) -> Message:
    return new_message("user", content, **fields)


def assistant(content: Any = None, tool_calls: list[dict[str, Any]] | None = None, **fields: Any) -> Message:
    return new_message("assistant", content, tool_calls=tool_calls or None, **fields)


def tool_result(tool_call_id: str, content: str, name: str | None = None, **fields: Any) -> Message:
    return new_message("tool", content, tool_call_id=tool_call_id, name=name, **fields)


def tool_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def content_text(content: Any) -> str:
    """The text of a content field: a string, or the text parts of a list of parts joined."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts: list[str] = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict) and part.get("type", "text") in TEXT_PART_TYPES:
                text = part.get("text")
                if isinstance(text, str):
                    texts.append(text)
        return "".join(texts)
    return str(content)


def media_count(content: Any) -> int:
    """How many non-text parts (images, audio, files) a content list holds."""
    if not isinstance(content, list):
        return 0
    return sum(
        1 for part in content if isinstance(part, dict) and part.get("type", "text") not in TEXT_PART_TYPES
    )


def to_wire(msg: Message) -> Message:
    """The message as sent to a provider: wire keys only, empty optional keys dropped."""
    out: Message = {"role": msg["role"], "content": msg.get("content")}
    calls = msg.get("tool_calls")
    if calls:
        out["tool_calls"] = [
            {
                "id": c.get("id") or "",
                "type": c.get("type") or "function",
                "function": {
                    "name": (c.get("function") or {}).get("name") or "",
                    "arguments": (c.get("function") or {}).get("arguments") or "",
                },
            }
            for c in calls
        ]
    for key in ("tool_call_id", "name"):
        if msg.get(key):
            out[key] = msg[key]
    if msg["role"] == "assistant" and msg.get("reasoning_content"):
        out["reasoning_content"] = msg["reasoning_content"]
    return out


def call_ids(msg: Message) -> list[str]:
    """Ids of the tool calls an assistant message makes (empty ids included as "")."""
    return [str(c.get("id") or "") for c in (msg.get("tool_calls") or []) if isinstance(c, dict)]


def message_date(msg: Message) -> date:
    """The calendar date (UTC) a message was created; today when it carries no timestamp."""
    ts = msg.get("ts")
    if isinstance(ts, str):
        try:
            parsed = datetime.fromisoformat(ts)
        except ValueError:
            parsed = None
        if parsed is not None:
            if parsed.tzinfo is not None:
                parsed = parsed.astimezone(UTC)
            return parsed.date()
    return datetime.now(UTC).date()


def validate_message(obj: Any, where: str = "message") -> Message:
    """Check one stored/imported message and return it; raise MessageError naming the problem."""
    if not isinstance(obj, dict):
        raise MessageError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    role = obj.get("role")
    if role not in ROLES:
        raise MessageError(f"{where}: unknown role {role!r} (expected one of {', '.join(ROLES)})")
    content = obj.get("content")
    if content is not None and not isinstance(content, str | list):
        raise MessageError(f"{where}: 'content' must be a string, a list of parts or null")
    if isinstance(content, list):
        for j, part in enumerate(content):
            if not isinstance(part, dict | str):
                raise MessageError(f"{where}: content part {j} must be an object")
    calls = obj.get("tool_calls")
    if calls is not None:
        if not isinstance(calls, list):
            raise MessageError(f"{where}: 'tool_calls' must be a list")
        for j, call in enumerate(calls):
            if not isinstance(call, dict):
                raise MessageError(f"{where}: tool call {j} must be an object")
            fn = call.get("function")
            if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
                raise MessageError(f"{where}: tool call {j} has no function name")
            args = fn.get("arguments", "")
            if args is not None and not isinstance(args, str):
                raise MessageError(f"{where}: tool call {j} arguments must be a string")
    if role == "tool" and not isinstance(obj.get("tool_call_id", ""), str):
        raise MessageError(f"{where}: 'tool_call_id' must be a string")
    for key in ("id", "ts", "reasoning_content", "name"):
        if obj.get(key) is not None and not isinstance(obj[key], str):
            raise MessageError(f"{where}: {key!r} must be a string")
    return obj


def preview(msg: Message, limit: int = 120) -> str:
    """A one-line preview of a message for lists."""
    text = content_text(msg.get("content"))
    if not text and msg.get("tool_calls"):
        text = ", ".join(
            f"{(c.get('function') or {}).get('name', '?')}({(c.get('function') or {}).get('arguments', '')})"
            for c in msg["tool_calls"]
        )
    return one_line(text, limit)


def tool_calls_of(msg: Message) -> Iterator[tuple[str, str, str]]:
    """(id, name, arguments) of each tool call of an assistant message (malformed entries skipped)."""
    calls = msg.get("tool_calls")
    if not calls or not isinstance(calls, list):
        return
    for call in calls:
        if not isinstance(call, dict):
            continue
        fn = call.get("function")
        fn = fn if isinstance(fn, dict) else {}
        args = fn.get("arguments")
        yield str(call.get("id") or ""), str(fn.get("name") or "?"), args if isinstance(args, str) else ""
