"""OpenHands saved trajectories: a JSON list of events (or ``{"events": [...]}``).

- ``action: message`` from the user or the agent becomes a user or assistant message; a
  ``system`` action holds the system prompt (and the tools, where recorded).
- Agent actions that came from a tool call carry ``tool_call_metadata`` with the provider's
  ``model_response``: one assistant message per ``model_response.id`` (its ``choices[0].message``:
  text and tool calls), and one provider call per ``model_response.id`` with its ``usage``
  (``prompt_tokens`` is the whole prompt; ``cache_read_input_tokens`` or
  ``prompt_tokens_details.cached_tokens`` the cache read; ``cache_creation_input_tokens`` the
  cache write where the provider reports one, else None).
- Observations with ``tool_call_metadata`` become the tool messages answering those calls.
- ``action: condensation`` is a compaction (the events it forgets leave the context; its summary
  is the summary from then on).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine.model.messages import Message
from engine.sources.model import (
    Compaction,
    ProviderCall,
    Skipped,
    SourceError,
    SourceSession,
    dict_at,
    int_or_none,
    iso,
    openai_tool_calls,
    read_regular,
    text_of,
)

IGNORED_ACTIONS = frozenset({"recall", "change_agent_state", "null", "think"})
IGNORED_OBSERVATIONS = frozenset({"agent_state_changed", "null", "recall"})


def load_events(path: Path) -> list[Any]:
    try:
        data = json.loads(read_regular(path))  # a regular file only (never a FIFO or a device)
    except SourceError:
        raise
    except (ValueError, RecursionError) as exc:
        raise SourceError(f"{Path(path).name}: not valid JSON ({str(exc)[:80]})") from None
    if isinstance(data, dict) and isinstance(data.get("events"), list):
        data = data["events"]
    if not isinstance(data, list):
        raise SourceError(f"{Path(path).name}: an OpenHands trajectory is a JSON list of events")
    return data


def _usage_call(session: SourceSession, response: dict[str, Any], ts: str, index: int) -> None:
    usage = response.get("usage")
    if not isinstance(usage, dict):
        return
    details = dict_at(usage, "prompt_tokens_details")
    read = int_or_none(usage.get("cache_read_input_tokens"))
    if read is None:
        read = int_or_none(details.get("cached_tokens"))
    session.calls.append(ProviderCall(
        index=len(session.calls), prompt_tokens=int_or_none(usage.get("prompt_tokens")),
        completion_tokens=int_or_none(usage.get("completion_tokens")), cache_read_tokens=read,
        cache_write_tokens=int_or_none(usage.get("cache_creation_input_tokens")),
        model=str(response.get("model") or ""), ts=iso(response.get("created")) or ts, message_index=index,
        request_id=str(response.get("id") or "")))


def _assistant_from_response(response: dict[str, Any]) -> Message:
    choices = response.get("choices") if isinstance(response.get("choices"), list) else []
    raw = choices[0].get("message") if choices and isinstance(choices[0], dict) else {}
    raw = raw if isinstance(raw, dict) else {}
    msg: Message = {"role": "assistant", "content": text_of(raw.get("content")) or None}
    calls = openai_tool_calls(raw.get("tool_calls"))
    if calls:
        msg["tool_calls"] = calls
    return msg


def _add(session: SourceSession, msg: Message, ts: str) -> None:
    msg["id"] = session.make_id()
    msg["ts"] = ts
    session.messages.append(msg)


def _event(session: SourceSession, seen: set[str], n: int, ev: dict[str, Any]) -> None:
    ts = iso(ev.get("timestamp"))
    if ts:
        session.started = session.started or ts
        session.last_activity = ts
    action, observation = ev.get("action"), ev.get("observation")
    meta = ev.get("tool_call_metadata") if isinstance(ev.get("tool_call_metadata"), dict) else None
    args = dict_at(ev, "args")
    if action == "system":
        session.system_prompt = str(args.get("content") or ev.get("message") or "")
        if isinstance(args.get("tools"), list):
            session.tools = [t for t in args["tools"] if isinstance(t, dict)]
    elif action == "condensation":
        before = next((c.prompt_tokens for c in reversed(session.calls) if c.prompt_tokens), None)
        session.compactions.append(Compaction(
            index=len(session.compactions), trigger="auto", trigger_source="condensation", ts=ts,
            message_index=len(session.messages), calls_before=len(session.calls), tokens_before=before,
            summary=str(args.get("summary") or "")))
    elif action is not None and meta is not None and isinstance(meta.get("model_response"), dict):
        response = meta["model_response"]
        rid = str(response.get("id") or f"event-{ev.get('id')}")
        if rid not in seen:
            seen.add(rid)
            index = len(session.messages)
            _add(session, _assistant_from_response(response), ts)
            _usage_call(session, response, ts, index)
    elif action == "message":
        role = "user" if ev.get("source") == "user" else "assistant"
        _add(session, {"role": role, "content": str(args.get("content") or ev.get("message") or "")}, ts)
    elif observation is not None and meta is not None:
        _add(session, {"role": "tool", "tool_call_id": str(meta.get("tool_call_id") or ""),
                       "content": str(ev.get("content") or ev.get("message") or "")}, ts)
    elif observation in IGNORED_OBSERVATIONS or action in IGNORED_ACTIONS or observation is not None:
        return
    elif action is None:
        session.skipped.append(Skipped(n, "an event that is neither an action nor an observation"))
    else:
        session.skipped.append(Skipped(n, f"action {action!r} without a model response"))


def read_openhands(path: Path) -> SourceSession:
    """Read an OpenHands trajectory (events are numbered from 1 in the skipped-item report)."""
    path = Path(path)
    events = load_events(path)
    session = SourceSession("openhands", path, path.stem, lines=len(events))
    seen: set[str] = set()
    for n, ev in enumerate(events, start=1):
        if not isinstance(ev, dict):
            session.skipped.append(Skipped(n, f"event {n} is a {type(ev).__name__}, not an object"))
            continue
        _event(session, seen, n, ev)
    for comp in session.compactions:
        after = next((c for c in session.calls[comp.calls_before:] if c.prompt_tokens), None)
        comp.tokens_after = after.prompt_tokens if after else None
    session.live_start = session.compactions[-1].message_index if session.compactions else 0
    models = [c.model for c in session.calls if c.model]
    session.model = models[-1] if models else ""
    session.prefix_label = "system prompt and tool definitions" if not session.system_prompt else "tool definitions"
    return session
