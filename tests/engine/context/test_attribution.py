"""Tokens by tool (engine.context.attribution): a synthetic history, and real Claude Code and Codex
sessions checked against counts made here from the raw lines."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from engine.context.attribution import UNKNOWN_TOOL, attribute, call_tokens
from engine.context.diff import History, history_from_source
from engine.context.tokens import estimate_message_tokens
from engine.model.messages import Message
from engine.sources.readers import read_source
from tests.engine.context.test_diff import call, msg, synthetic
from tests.engine.sources.conftest import BIG_CODEX, PERSISTED_CLAUDE, lines

needs_shared = pytest.mark.skipif(not PERSISTED_CLAUDE.exists(), reason="the shared sessions are not on this machine")


def test_tokens_by_tool_on_a_synthetic_history() -> None:
    messages: list[Message] = [
        *synthetic(),
        msg(7, "assistant", "", tool_calls=[call("c3", "read_file", '{"path": "b.py"}'), call("c4", "grep", "{}")]),
        msg(8, "tool", "x = 1\n" * 200, tool_call_id="c3"),
        msg(9, "tool", "found", tool_call_id="c4"),
        msg(10, "tool", "orphan result", tool_call_id="gone"),
    ]
    att = attribute(History(messages, [], []), top=2)
    total = sum(estimate_message_tokens(m) for m in messages)
    assert att.history_tokens == total and att.messages == 11
    by_tool = {t.tool: t for t in att.tools}
    assert set(by_tool) == {"read_file", "grep", UNKNOWN_TOOL}
    read = by_tool["read_file"]
    assert (read.calls, read.results) == (2, 2)
    assert read.argument_tokens == call_tokens("c1", "read_file", '{"path": "a.py"}') + call_tokens(
        "c3", "read_file", '{"path": "b.py"}') == (2 + 8 + 9 + 16) * 2 // 5 * 2
    assert read.result_tokens == estimate_message_tokens(messages[2]) + estimate_message_tokens(messages[8])
    assert read.share == pytest.approx(read.tokens / total)
    assert (by_tool[UNKNOWN_TOOL].calls, by_tool[UNKNOWN_TOOL].results) == (0, 1)
    assert att.tools[0].tool == "read_file"  # largest first
    assert [t.tokens for t in att.tools] == sorted((t.tokens for t in att.tools), reverse=True)
    assert [(r.message_id, r.tool) for r in att.largest] == [("m8", "read_file"), ("m2", "read_file")]
    assert att.largest[0].first_line == "x = 1" and att.largest[0].index == 8
    assert att.tool_tokens == sum(t.tokens for t in att.tools) and 0 < att.tool_share < 1
    assert attribute(History(messages, [], []), top=0).largest == ()
    empty = attribute(History([], [], []))
    assert (empty.tools, empty.history_tokens, empty.tool_share) == ((), 0, 0.0)


def _raw_claude_tools() -> tuple[Counter[str], Counter[str], dict[str, int]]:
    """Per tool: tool_use blocks, tool_result blocks and argument tokens, from the raw lines."""
    calls: Counter[str] = Counter()
    results: Counter[str] = Counter()
    args: Counter[str] = Counter()
    names: dict[str, str] = {}
    for obj in lines(PERSISTED_CLAUDE):
        content = (obj.get("message") or {}).get("content")
        for part in content if isinstance(content, list) and obj.get("type") in ("user", "assistant") else []:
            if part.get("type") == "tool_use" and part["id"] not in names:
                names[part["id"]] = part["name"]
                calls[part["name"]] += 1
                arguments = json.dumps(part["input"], ensure_ascii=False)
                args[part["name"]] += call_tokens(part["id"], part["name"], arguments)
            elif part.get("type") == "tool_result":
                results[names.get(part["tool_use_id"], UNKNOWN_TOOL)] += 1
    return calls, results, dict(args)


@needs_shared
def test_claude_code_session_counts_match_the_raw_lines() -> None:
    calls, results, args = _raw_claude_tools()
    h = history_from_source(read_source(PERSISTED_CLAUDE, "claude-code"))
    att = attribute(h, top=5)
    assert {t.tool: t.calls for t in att.tools if t.calls} == dict(calls)
    assert {t.tool: t.results for t in att.tools if t.results} == dict(results)
    assert {t.tool: t.argument_tokens for t in att.tools} == args
    assert att.history_tokens == sum(estimate_message_tokens(m) for m in h.messages)
    tool_results = sorted((estimate_message_tokens(m) for m in h.messages if m["role"] == "tool"), reverse=True)
    assert [r.tokens for r in att.largest] == tool_results[:5]
    assert all(h.messages[r.index]["id"] == r.message_id and h.messages[r.index]["role"] == "tool"
               for r in att.largest)


@needs_shared
def test_codex_session_calls_by_name() -> None:
    expected: Counter[str] = Counter()
    outputs: Counter[str] = Counter()
    names: dict[str, str] = {}
    for obj in lines(BIG_CODEX):
        payload: dict[str, Any] = obj.get("payload") or {}
        kind = payload.get("type") if obj["type"] == "response_item" else None
        if kind in ("function_call", "custom_tool_call"):
            expected[payload["name"]] += 1
            names[payload["call_id"]] = payload["name"]
        elif kind in ("function_call_output", "custom_tool_call_output"):
            outputs[names[payload["call_id"]]] += 1
    att = attribute(history_from_source(read_source(BIG_CODEX, "codex")))
    assert {t.tool: t.calls for t in att.tools if t.calls} == dict(expected)
    assert {t.tool: t.results for t in att.tools if t.results} == dict(outputs)
