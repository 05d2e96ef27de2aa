"""engine.sources.claude_code_calls on lines shortened from a file Claude Code 2.1.332 wrote (run headless against
the scripted server with a skill, an MCP server, a subagent and two /compact; the text cut, the fields kept): a
call's attribution, the provider's cache-miss reason, ``usage.iterations`` billed beside the top-level usage, the
tokens each compaction dropped and the user lines' ``rowSource``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.model.call_meta import CacheMiss, CallAttribution, UsageIteration
from engine.sources.claude_code import read_claude_code
from engine.sources.model import ProviderCall
from tests.engine.sources.test_incremental import by_line, feed_in_pieces, random_chunks, state

MODEL = "claude-opus-5-5"


def _usage(write: int, read: int, out: int, iterations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"input_tokens": 3, "cache_creation_input_tokens": write, "cache_read_input_tokens": read,
            "output_tokens": out, "output_tokens_details": {"thinking_tokens": 0},
            "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0}, "service_tier": "standard",
            "cache_creation": {"ephemeral_1h_input_tokens": 0, "ephemeral_5m_input_tokens": 0}, "inference_geo": "",
            "iterations": iterations or [], "speed": "standard", "fallback_credit": None}


def _assistant(uid: str, parent: str, msg_id: str, usage: dict[str, Any], **extra: Any) -> dict[str, Any]:
    diagnostics = extra.pop("diagnostics", None)
    message = {"id": msg_id, "type": "message", "role": "assistant", "model": MODEL,
               "content": [{"type": "text", "text": "..."}], "stop_reason": "end_turn", "stop_sequence": None,
               "usage": usage, **({"diagnostics": diagnostics} if diagnostics else {}), "stop_details": None}
    return {"parentUuid": parent, "isSidechain": False, "message": message, "requestRef": f"req-{msg_id}",
            "type": "assistant", "uuid": uid, "timestamp": "2026-11-27T03:58:24.106Z", **extra}


def _user(uid: str, parent: str | None, text: str, row_source: str | None = None) -> dict[str, Any]:
    return {"parentUuid": parent, "isSidechain": False, "type": "user", "uuid": uid,
            "message": {"role": "user", "content": text}, "timestamp": "2026-11-27T03:58:23.000Z",
            **({"rowSource": row_source} if row_source else {})}


def _boundary(uid: str, parent: str, pre: int, post: int, cumulative: int | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"trigger": "manual", "preTokens": pre, "preCompactOrganizationsCoverStart": False,
                            "durationMs": 48, "postTokens": post}
    if cumulative is not None:
        meta["cumulativeDroppedTokens"] = cumulative
    return {"parentUuid": None, "logicalParentUuid": parent, "isSidechain": False, "type": "system",
            "subtype": "compact_boundary", "content": "Conversation compacted", "uuid": uid,
            "timestamp": "2026-11-27T03:58:30.000Z", "compactMetadata": meta}


COMPACTION_ITERATION = {"type": "compaction", "input_tokens": 5000, "output_tokens": 300,
                        "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
MISS = {"cache_miss_reason": {"type": "tools_changed", "cache_missed_input_tokens": 1234}}


def the_lines() -> list[dict[str, Any]]:
    return [
        _user("u1", None, "EXP go", "local"),
        _assistant("a1", "u1", "msg_1", _usage(0, 0, 10)),
        _user("u2", "a1", "Launching skill: greet", "harness"),
        _assistant("a2", "u2", "msg_2", _usage(2580, 9706, 9, [COMPACTION_ITERATION]), attributionSkill="greet"),
        _assistant("a3", "a2", "msg_3", _usage(74, 12281, 32), diagnostics=MISS, attributionSkill="greet",
                   attributionMcpServer="echo", attributionMcpTool="say"),
        _user("u3", "a3", "a task notification", "recorded"),
        _boundary("b1", "u3", 13088, 2673, 10415),
        _user("s1", "b1", "This session is being continued…", "local") | {"isCompactSummary": True},
        _user("u4", "s1", "say hi", "local"),
        _assistant("a4", "u4", "msg_4", _usage(12667, 18, 2)),
        _boundary("b2", "a4", 12690, 2673, 20432),
        _user("s2", "b2", "This session is being continued…", "local") | {"isCompactSummary": True},
        _user("u5", "s2", "and again", "local"),
        _assistant("a5", "u5", "msg_5", _usage(100, 2600, 2), attributionAgent="general-purpose",
                   attributionPlugin="my-plugin"),
    ]


@pytest.fixture
def session_file(tmp_path: Path) -> Path:
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in the_lines()))
    return path


def test_attribution_cache_miss_and_iterations_are_typed_fields(session_file: Path) -> None:
    src = read_claude_code(session_file)
    assert src.skipped == []
    first, skill, mcp, _, agent = src.calls
    assert first.attribution is None and first.cache_miss is None and first.iterations == ()
    assert skill.attribution == CallAttribution(skill="greet")
    assert mcp.attribution == CallAttribution(skill="greet", mcp_server="echo", mcp_tool="say")
    assert agent.attribution == CallAttribution(agent="general-purpose", plugin="my-plugin")
    assert mcp.cache_miss == CacheMiss("tools_changed", 1234)
    assert mcp.cache_miss.text() == ("Cache miss (the provider's reason): the tool definitions changed "
                                     "(1,234 tokens missed the cache)")
    assert skill.iterations == (UsageIteration("compaction", 5000, 300, 0, 0),)
    assert [it.tokens for it in skill.billed_beside()] == [5300]
    # the iteration is billed beside the call: its prompt (the context) is the top-level figure alone
    assert skill.prompt_tokens == 3 + 2580 + 9706 and skill.completion_tokens == 9


def test_the_tokens_each_compaction_dropped(session_file: Path) -> None:
    src = read_claude_code(session_file)
    first, second = src.compactions
    assert (first.cumulative_dropped_tokens, second.cumulative_dropped_tokens) == (10415, 20432)
    assert first.dropped_tokens == 10415 == 13088 - 2673  # the running total is Claude Code's sum of pre − post
    assert second.dropped_tokens == 20432 - 10415 == 12690 - 2673


def test_without_a_running_total_the_drop_is_before_less_after(tmp_path: Path) -> None:
    lines = [o if o.get("uuid") != "b2" else _boundary("b2", "a4", 12690, 2673, None) for o in the_lines()]
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in lines))
    first, second = read_claude_code(path).compactions
    assert first.dropped_tokens == 10415 and second.dropped_tokens == 12690 - 2673


def test_fed_in_pieces_the_new_fields_end_as_a_whole_read(session_file: Path) -> None:
    whole = read_claude_code(session_file, subagents=False)
    for pieces in (by_line, random_chunks(5)):
        fed, _, _ = feed_in_pieces(session_file, pieces)
        assert state(fed) == state(whole)
        assert [(c.attribution, c.cache_miss, c.iterations) for c in fed.calls] == [
            (c.attribution, c.cache_miss, c.iterations) for c in whole.calls]
        assert [c.dropped_tokens for c in fed.compactions] == [10415, 10017]


@pytest.mark.parametrize("bad", [{"type": "compaction", "input_tokens": -5}, {"input_tokens": 5}, "x",
                                 {"type": "compaction", "input_tokens": float("nan")}])
def test_an_iteration_that_is_no_figure_is_left_out(tmp_path: Path, bad: Any) -> None:
    lines = the_lines()
    lines[3]["message"]["usage"]["iterations"] = [bad, COMPACTION_ITERATION]
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in lines))
    call: ProviderCall = read_claude_code(path).calls[1]
    assert call.iterations == (UsageIteration("compaction", 5000, 300, 0, 0),)
