"""SWE-agent trajectories (``.traj``): a JSON object with ``history``, ``trajectory`` and ``info``.

- ``history`` is the conversation in chat format (``system`` first, then ``user`` / ``assistant`` /
  ``tool``; function-calling runs carry ``tool_calls`` and ``tool_call_ids``); every assistant
  message is one model call.
- A ``trajectory`` step's ``messages`` (or ``query``), where present, is the exact model input of
  that step's call: it is kept on the call and the importer estimates that call from it.
- There is no per-call usage: ``info.model_stats`` (tokens_sent, tokens_received, api_calls, cost)
  is kept as the aggregate it is, never spread over the calls.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine.model.messages import Message
from engine.sources.model import (
    ProviderCall,
    Skipped,
    SourceError,
    SourceSession,
    dict_at,
    float_or_none,
    int_or_none,
    openai_tool_calls,
    read_regular,
    text_of,
)


def _figures(stats: dict[str, Any]) -> dict[str, Any]:
    """``model_stats`` as figures: a count (an int) or a cost (a float) only when it is one (finite, not negative,
    in range; else None), text kept, anything else left out."""
    out: dict[str, Any] = {}
    for key, value in stats.items():
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, int):
            out[str(key)] = int_or_none(value)
        elif isinstance(value, float):
            out[str(key)] = float_or_none(value)
        elif isinstance(value, str):
            out[str(key)] = value
    return out


def load_traj(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(read_regular(path))  # a regular file only (never a FIFO or a device)
    except SourceError:
        raise
    except (ValueError, RecursionError) as exc:
        raise SourceError(f"{Path(path).name}: not valid JSON ({str(exc)[:80]})") from None
    if not isinstance(data, dict) or not isinstance(data.get("history"), list):
        raise SourceError(f"{Path(path).name}: a SWE-agent trajectory is an object with a 'history' list")
    return data


def _message(raw: dict[str, Any]) -> Message | None:
    role = raw.get("role")
    if role not in ("user", "assistant", "tool"):
        return None
    msg: Message = {"role": role, "content": text_of(raw.get("content"))}
    calls = openai_tool_calls(raw.get("tool_calls"))
    if calls:
        msg["tool_calls"] = calls
    if role == "tool":
        ids = raw.get("tool_call_ids")
        msg["tool_call_id"] = str(ids[0]) if isinstance(ids, list) and ids else str(raw.get("tool_call_id") or "")
    return msg


def _exact_inputs(steps: list[Any]) -> list[list[Message] | None]:
    out: list[list[Message] | None] = []
    for step in steps:
        query = step.get("messages") or step.get("query") if isinstance(step, dict) else None
        if isinstance(query, list) and query:
            msgs = [m for m in (_message(q) for q in query if isinstance(q, dict)) if m is not None]
            out.append(msgs)
        else:
            out.append(None)
    return out


def read_swe_agent(path: Path) -> SourceSession:
    path = Path(path)
    data = load_traj(path)
    session = SourceSession("swe-agent", path, path.name.removesuffix(".traj"), lines=len(data["history"]))
    system_parts: list[str] = []
    for n, raw in enumerate(data["history"], start=1):
        if not isinstance(raw, dict):
            session.skipped.append(Skipped(n, f"history item {n} is not an object"))
            continue
        if raw.get("role") == "system":
            if not session.messages:
                system_parts.append(text_of(raw.get("content")))
                continue
        msg = _message(raw)
        if msg is None:
            session.skipped.append(Skipped(n, f"history item {n}: role {raw.get('role')!r} is not part of a chat"))
            continue
        msg["id"] = session.make_id()
        msg["ts"] = ""
        session.messages.append(msg)
    session.system_prompt = "\n\n".join(system_parts)
    raw_steps = data.get("trajectory")
    steps: list[Any] = raw_steps if isinstance(raw_steps, list) else []
    exact = _exact_inputs(steps)
    info = dict_at(data, "info")
    stats = info.get("model_stats")
    session.aggregate = _figures(stats) if isinstance(stats, dict) else None
    config = data.get("replay_config")
    if isinstance(config, dict):
        model = (config.get("agent") or {}).get("model") if isinstance(config.get("agent"), dict) else None
        if isinstance(model, dict):
            session.model = str(model.get("name") or model.get("model_name") or "")
    assistants = [i for i, m in enumerate(session.messages) if m["role"] == "assistant"]
    for k, i in enumerate(assistants):
        session.calls.append(ProviderCall(
            index=k, prompt_tokens=None, completion_tokens=None, cache_read_tokens=None, cache_write_tokens=None,
            model=session.model, message_index=i, input_messages=exact[k] if k < len(exact) else None))
    session.prefix_label = "tool definitions"
    return session
