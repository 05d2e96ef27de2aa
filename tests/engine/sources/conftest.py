"""Paths of the real sessions and the raw files' own figures, computed here by direct JSON parsing
(never through the readers under test)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import SHARED

SESSIONS = SHARED / "data" / "sessions"
CLAUDE = SESSIONS / "claude-code"
CODEX = SESSIONS / "codex"
OPENHANDS = SESSIONS / "openhands"
SWE = SESSIONS / "swe-agent"
BIG_CLAUDE = CLAUDE / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"
PERSISTED_CLAUDE = CLAUDE / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"
BIG_CODEX = CODEX / "rollout-2026-02-23T12-54-34-019c8a59-e9dd-71f0-9ae3-4079fe9726a9.jsonl"


def claude_files() -> list[Path]:
    return sorted(CLAUDE.glob("*.jsonl"))


def claude_subagent_files() -> list[Path]:
    return sorted(CLAUDE.glob("*/subagents/agent-*.jsonl"))


def codex_files() -> list[Path]:
    return sorted(CODEX.glob("rollout-*.jsonl"))


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def raw_claude_calls(path: Path) -> list[dict[str, Any]]:
    """One call per (message.id, requestId) in file order: prompt = input + cache write + cache read,
    output = the largest output_tokens seen."""
    calls: dict[tuple[str, str], dict[str, Any]] = {}
    for n, obj in enumerate(lines(path)):
        if obj.get("type") != "assistant":
            continue
        msg = obj["message"]
        usage = msg["usage"]
        key = (msg["id"], obj["requestId"])
        prompt = usage["input_tokens"] + usage["cache_creation_input_tokens"] + usage["cache_read_input_tokens"]
        call = calls.setdefault(key, {"line": n, "prompt": prompt, "output": 0, "model": msg["model"],
                                      "read": usage["cache_read_input_tokens"],
                                      "write": usage["cache_creation_input_tokens"]})
        call["output"] = max(call["output"], usage["output_tokens"])
    return list(calls.values())


def raw_codex_calls(path: Path) -> list[dict[str, Any]]:
    """One call per token_count event whose total_token_usage changed."""
    out = []
    prev = None
    for n, obj in enumerate(lines(path)):
        payload = obj.get("payload") or {}
        if obj["type"] != "event_msg" or payload.get("type") != "token_count" or not payload.get("info"):
            continue
        info = payload["info"]
        if info["total_token_usage"] == prev:
            continue
        prev = info["total_token_usage"]
        last = info["last_token_usage"]
        out.append({"line": n, "prompt": last["input_tokens"], "read": last["cached_input_tokens"],
                    "output": last["output_tokens"], "window": info["model_context_window"]})
    return out

