"""engine.sources.codex over every real Codex rollout: one call per changed token_count, prompts,
cache figures, window, the remote compaction and its replacement history."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from engine.context.tokens import estimate_message_tokens
from engine.sources.codex import read_codex
from tests.engine.sources.conftest import BIG_CODEX, codex_files, lines, raw_codex_calls


def test_the_real_rollouts_are_there() -> None:
    assert len(codex_files()) == 3


@pytest.mark.parametrize("path", codex_files(), ids=lambda p: p.name[:40])
def test_calls_and_prompts_equal_the_raw_figures(path: Path) -> None:
    raw = raw_codex_calls(path)
    token_counts = sum(1 for o in lines(path) if (o.get("payload") or {}).get("type") == "token_count")
    src = read_codex(path)
    assert 0 < len(src.calls) == len(raw) < token_counts  # the pairs are counted once
    assert [c.prompt_tokens for c in src.calls] == [r["prompt"] for r in raw]
    assert [c.cache_read_tokens for c in src.calls] == [r["read"] for r in raw]
    assert [c.completion_tokens for c in src.calls] == [r["output"] for r in raw]
    assert [c.window for c in src.calls] == [r["window"] for r in raw]
    assert all(c.cache_write_tokens is None for c in src.calls)  # Codex has no such figure: null, not 0
    assert src.window == raw[-1]["window"] and src.model == "gpt-5.3-codex"


@pytest.mark.parametrize("path", codex_files(), ids=lambda p: p.name[:40])
def test_tool_calls_pair_with_their_outputs_by_call_id(path: Path) -> None:
    raw = lines(path)
    call_ids = [o["payload"]["call_id"] for o in raw if o["type"] == "response_item"
                and o["payload"]["type"] in ("function_call", "custom_tool_call")]
    src = read_codex(path)
    made = [c["id"] for m in src.messages for c in m.get("tool_calls") or []]
    assert sorted(made) == sorted(call_ids)
    seen: set[str] = set()
    for msg in src.messages:
        seen.update(c["id"] for c in msg.get("tool_calls") or [])
        if msg["role"] == "tool":
            assert msg["tool_call_id"] in seen


def test_the_remote_compaction_and_what_replaced_the_context() -> None:
    raw = lines(BIG_CODEX)
    at = next(i for i, o in enumerate(raw) if o["type"] == "compacted")
    replacement = raw[at]["payload"]["replacement_history"]
    calls = raw_codex_calls(BIG_CODEX)
    before = [c for c in calls if c["line"] < at]
    after = [c for c in calls if c["line"] > at]
    src = read_codex(BIG_CODEX)
    (comp,) = src.compactions
    assert (comp.tokens_before, comp.tokens_after) == (before[-1]["prompt"], after[0]["prompt"]) == (209950, 48297)
    assert comp.calls_before == len(before) and comp.trigger == "auto"  # it happened inside a turn
    messages = [i for i in replacement if i["type"] == "message"]
    assert comp.messages_after == len(messages)
    assert src.live_start == comp.message_index
    enc = next(i for i in replacement if i["type"] == "compaction")["encrypted_content"]
    size = int(re.search(r"len=(\d+)", enc).group(1))
    assert comp.summary.startswith("[encrypted compaction summary") and len(comp.summary) == size


def test_redacted_text_is_estimated_from_its_length() -> None:
    raw = lines(BIG_CODEX)
    first_user = next(o["payload"] for o in raw if o["type"] == "response_item"
                      and o["payload"].get("role") == "user")
    n = int(re.search(r"len=(\d+)", first_user["content"][0]["text"]).group(1))
    src = read_codex(BIG_CODEX)
    msg = next(m for m in src.messages if m["role"] == "user")
    assert len(msg["content"]) == n and msg["content"].startswith(f"[redacted: {n} characters]")
    assert estimate_message_tokens(msg) == (n + 12) * 2 // 5


def test_reasoning_is_counted_and_encrypted_content_shown_as_such() -> None:
    src = read_codex(BIG_CODEX)
    reasoning = [m["reasoning_content"] for m in src.messages if m.get("reasoning_content")]
    raw_items = sum(1 for o in lines(BIG_CODEX) if o["type"] == "response_item" and o["payload"]["type"] == "reasoning")
    assert len(reasoning) > raw_items // 2
    assert all("[encrypted reasoning:" in r for r in reasoning)


def test_developer_messages_before_the_conversation_are_the_system_prompt(tmp_path: Path) -> None:
    path = tmp_path / "rollout-x.jsonl"
    rows = [
        {"timestamp": "2026-01-01T00:00:00Z", "type": "session_meta",
         "payload": {"id": "x", "cwd": "/p/proj", "base_instructions": {"text": "BASE"}}},
        {"timestamp": "2026-01-01T00:00:01Z", "type": "response_item",
         "payload": {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "DEV"}]}},
        {"timestamp": "2026-01-01T00:00:02Z", "type": "response_item",
         "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}},
        {"timestamp": "2026-01-01T00:00:03Z", "type": "response_item",
         "payload": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "yo"}]}},
        {"timestamp": "2026-01-01T00:00:04Z", "type": "event_msg", "payload": {"type": "token_count", "info": {
            "total_token_usage": {"input_tokens": 10}, "last_token_usage": {"input_tokens": 10, "output_tokens": 2,
                                                                            "cached_input_tokens": 0},
            "model_context_window": 1000}}},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    src = read_codex(path)
    assert src.system_prompt == "BASE\n\nDEV" and src.project == "proj"
    assert [m["role"] for m in src.messages] == ["user", "assistant"]
    (call,) = src.calls
    assert call.message_index == 1 and call.cache_read_tokens == 0 and call.cache_write_tokens is None
