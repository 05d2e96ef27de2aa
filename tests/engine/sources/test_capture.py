"""A capture of the recording proxy read as a session (:mod:`engine.sources.capture`): each call exact from its
request (system prompt, tool definitions, messages, output reserve) with the response's usage, for the four API
families; the main thread's conversation, a compaction when the conversation is replaced, side calls apart, and
the parts of a rolled-over capture read in order."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.capture.files import CaptureWriter
from engine.context.tokens import HeuristicEstimator
from engine.ingest import import_source, tool_definitions_tokens
from engine.sources.capture import CaptureReader, read_capture
from engine.sources.detect import detect_format
from engine.sources.formats import appended_reader

SYSTEM = [{"type": "text", "text": "You are a coding agent."}, {"type": "text", "text": "Be brief.",
                                                                "cache_control": {"type": "ephemeral"}}]
TOOLS = [{"name": "Bash", "description": "run a command", "input_schema": {"type": "object"}},
         {"name": "mcp__git__log", "description": "git log", "input_schema": {"type": "object"},
          "cache_control": {"type": "ephemeral"}}]


def exchange(seq: int, family: str, path: str, body: dict[str, Any], message: Any, usage: Any,
             status: int = 200, outcome: str = "complete") -> dict[str, Any]:
    return {"type": "exchange", "seq": seq, "id": f"x{seq}", "started": f"2026-01-01T00:00:{seq:02d}.000+00:00",
            "method": "POST", "path": path, "family": family, "outcome": outcome,
            "request": {"headers": [["x-api-key", "[redacted]"]], "body": json.dumps(body)},
            "response": {"status": status, "message": message, "usage": usage}}


def anthropic_answer(n: int, text: str = "", tool: str = "") -> tuple[dict[str, Any], dict[str, Any]]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    if tool:
        content.append({"type": "tool_use", "id": f"toolu_{n}", "name": "Bash", "input": {"command": tool}})
    usage = {"input_tokens": 3, "cache_creation_input_tokens": 10 * n, "cache_read_input_tokens": 100 * n,
             "output_tokens": 7 + n}
    return {"id": f"msg_{n}", "role": "assistant", "content": content, "usage": usage}, usage


def write(path: Path, records: list[dict[str, Any]], **kwargs: Any) -> Path:
    with CaptureWriter(path, info={"agent": "claude", "cwd": "/w"}, **kwargs) as writer:
        for rec in records:
            writer.append(rec)
    return path


def claude_capture(tmp_path: Path, compact: bool = False) -> Path:
    body: dict[str, Any] = {"model": "claude-x", "max_tokens": 32000, "system": SYSTEM, "tools": TOOLS,
                            "stream": True, "messages": [{"role": "user", "content": "run ls"}]}
    recs = []
    msg1, u1 = anthropic_answer(1, "Let me look.", "ls")
    recs.append(exchange(1, "anthropic", "/v1/messages?beta=true", body, msg1, u1))
    side = {"model": "claude-haiku", "max_tokens": 512, "system": "Title this.", "messages": [
        {"role": "user", "content": "run ls"}]}
    recs.append(exchange(2, "anthropic", "/v1/messages", side, *anthropic_answer(9, "Listing files")))
    recs.append(exchange(3, "anthropic", "/v1/messages/count_tokens", {"messages": []}, {"input_tokens": 5}, None))
    body2 = dict(body, messages=[*body["messages"], {"role": "assistant", "content": msg1["content"]},
                                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                                               "content": "a.txt"}]}])
    msg2, u2 = anthropic_answer(2, "One file.")
    recs.append(exchange(4, "anthropic", "/v1/messages", body2, msg2, u2))
    recs.append(exchange(5, "anthropic", "/v1/messages", body2, {"type": "error"}, None, status=529))
    if compact:
        sub = dict(body, system="You are a subagent.", messages=[{"role": "user", "content": "sub-task"}])
        recs.append(exchange(6, "anthropic", "/v1/messages", sub, *anthropic_answer(5, "sub done")))
        body3 = dict(body, messages=[{"role": "user", "content": "Summary: the user listed one file."},
                                     {"role": "user", "content": "go on"}])
        msg3, u3 = anthropic_answer(3, "Going on.")
        recs.append(exchange(7, "anthropic", "/v1/messages", body3, msg3, u3))
        body4 = dict(body, messages=[*body3["messages"], {"role": "assistant", "content": msg3["content"]},
                                     {"role": "user", "content": "thanks"}])
        recs.append(exchange(8, "anthropic", "/v1/messages", body4, *anthropic_answer(4, "Welcome.")))
    recs[0], recs[1] = recs[1], recs[0]  # the side call finished first: read in the order they finished
    return write(tmp_path / "cap.jsonl", recs)


def test_anthropic_calls_are_exact_from_the_request(tmp_path: Path) -> None:
    path = claude_capture(tmp_path)
    assert detect_format(path) == "proxy-capture"
    src = read_capture(path)
    assert src.format == "proxy-capture" and src.session_id == "cap" and src.skipped == []
    assert [c.model for c in src.calls] == ["claude-haiku", "claude-x", "claude-x"]
    side, first, second = src.calls
    assert first.prompt_tokens == 3 + 10 + 100 and first.cache_read_tokens == 100 and first.cache_write_tokens == 10
    assert first.completion_tokens == 8 and first.max_tokens == 32000 and first.request_id == "msg_1"
    prefix = src.prefixes[first.prefix_key]
    assert prefix.system == "You are a coding agent.\n\nBe brief."
    assert prefix.tools == [{k: v for k, v in t.items() if k != "cache_control"} for t in TOOLS]
    assert src.prefixes[side.prefix_key].tools == [] and side.max_tokens == 512
    assert second.prefix_key == first.prefix_key
    assert [m["role"] for m in second.input_messages or []] == ["user", "assistant", "tool"]
    # the conversation: the main thread's messages once each, the answers in place
    assert [(m["role"], m.get("content")) for m in src.messages] == [
        ("user", "run ls"), ("assistant", "Let me look."), ("tool", "a.txt"), ("assistant", "One file.")]
    assert src.messages[1]["tool_calls"][0]["function"] == {"name": "Bash", "arguments": '{"command": "ls"}'}
    assert first.message_index == 1 and second.message_index == 3 and side.message_index == 0
    assert src.ignored == {"exchange/anthropic": 1, "exchange/complete": 1}
    assert src.compactions == [] and src.project == "claude" and src.cwd == "/w"


def test_a_replaced_conversation_is_a_compaction(tmp_path: Path) -> None:
    src = read_capture(claude_capture(tmp_path, compact=True))
    (comp,) = src.compactions  # the subagent's request (another system prompt) is a thread apart, no compaction
    sub = src.calls[3]
    assert src.prefixes[sub.prefix_key].system == "You are a subagent." and sub.message_index == 4
    assert comp.message_index == 4 and comp.calls_before == 4
    assert comp.tokens_before == src.calls[2].prompt_tokens and comp.tokens_after == src.calls[4].prompt_tokens
    assert src.calls[0].model == "claude-haiku"
    assert comp.summary == "Summary: the user listed one file."
    assert src.live_start == 4 and [m["content"] for m in src.messages[4:]] == [
        "Summary: the user listed one file.", "go on", "Going on.", "thanks", "Welcome."]
    assert src.calls[5].message_index == 8


def test_imported_with_the_prefix_exact(tmp_path: Path) -> None:
    path = claude_capture(tmp_path)
    report = import_source(path, session_dir=tmp_path / "s").to_json()
    est = HeuristicEstimator()
    assert report["format"] == "proxy-capture" and report["prefix_source"] == "file" and report["calls"] == 3
    assert report["system_prompt_tokens"] == est.text("You are a coding agent.\n\nBe brief.")
    assert sum(t["tokens"] for t in report["tool_definitions"]) == tool_definitions_tokens(
        [{k: v for k, v in t.items() if k != "cache_control"} for t in TOOLS], est)
    assert {t["name"]: t["server"] for t in report["tool_definitions"]} == {"Bash": "", "mcp__git__log": "git"}
    events = [json.loads(x) for x in (tmp_path / "s" / "events.jsonl").read_text().splitlines()]
    assert [e["provider_prompt_tokens"] for e in events] == [993, 113, 223]
    assert [e["max_tokens"] for e in events] == [512, 32000, 32000]
    assert {e["prefix_source"] for e in events} == {"file"}


def test_openai_chat_responses_and_gemini(tmp_path: Path) -> None:
    tool = {"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}}
    chat = {"model": "gpt-x", "max_completion_tokens": 900, "tools": [tool], "messages": [
        {"role": "system", "content": "Sys."}, {"role": "user", "content": "hi"}]}
    chat_answer = {"id": "chatcmpl-1", "choices": [{"index": 0, "message": {"role": "assistant", "content": "yo"}}],
                   "usage": {"prompt_tokens": 50, "completion_tokens": 2,
                             "prompt_tokens_details": {"cached_tokens": 40},
                             "completion_tokens_details": {"reasoning_tokens": 1}}}
    responses = {"model": "gpt-5", "instructions": "Codex rules.", "max_output_tokens": 4000,
                 "tools": [{"type": "function", "name": "shell"}],
                 "input": [{"type": "message", "role": "developer", "content": [{"type": "input_text",
                                                                                  "text": "Sandbox."}]},
                           {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]},
                           {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{}"},
                           {"type": "function_call_output", "call_id": "c1", "output": "done"}]}
    resp_answer = {"id": "resp_1", "output": [{"type": "message", "content": [{"type": "output_text", "text": "ok"}]}],
                   "usage": {"input_tokens": 70, "output_tokens": 3, "input_tokens_details": {"cached_tokens": 64}}}
    gemini = {"systemInstruction": {"parts": [{"text": "Gem sys."}]}, "generationConfig": {"maxOutputTokens": 800},
              "tools": [{"functionDeclarations": [{"name": "ls", "description": "list"}]}],
              "contents": [{"role": "user", "parts": [{"text": "list"}]},
                           {"role": "model", "parts": [{"functionCall": {"name": "ls", "args": {}}}]},
                           {"role": "user", "parts": [{"functionResponse": {"name": "ls", "response": {"o": 1}}}]}]}
    gem_answer = {"candidates": [{"content": {"role": "model", "parts": [{"text": "2 files"}]}}], "responseId": "g1",
                  "usageMetadata": {"promptTokenCount": 30, "candidatesTokenCount": 4, "cachedContentTokenCount": 20,
                                    "thoughtsTokenCount": 6}}
    path = write(tmp_path / "c.jsonl", [
        exchange(1, "openai-chat", "/v1/chat/completions", chat, chat_answer, chat_answer["usage"]),
        exchange(2, "openai-responses", "/v1/responses", responses, resp_answer, resp_answer["usage"]),
        exchange(3, "gemini", "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", gemini, gem_answer,
                 gem_answer["usageMetadata"])])
    src = read_capture(path)
    c, r, g = src.calls
    assert (c.prompt_tokens, c.cache_read_tokens, c.cache_write_tokens, c.completion_tokens, c.reasoning_tokens,
            c.max_tokens) == (50, 40, None, 2, 1, 900)
    assert src.prefixes[c.prefix_key].system == "Sys." and src.prefixes[c.prefix_key].tools == [tool]
    assert [m["role"] for m in c.input_messages or []] == ["user"]
    assert (r.prompt_tokens, r.cache_read_tokens, r.completion_tokens, r.max_tokens) == (70, 64, 3, 4000)
    assert src.prefixes[r.prefix_key].system == "Codex rules.\n\nSandbox."
    assert [(m["role"], m.get("tool_call_id")) for m in r.input_messages or []] == [
        ("user", None), ("assistant", None), ("tool", "c1")]
    assert (g.prompt_tokens, g.cache_read_tokens, g.completion_tokens, g.reasoning_tokens, g.max_tokens) == (
        30, 20, 4, 6, 800)
    assert g.model == "gemini-2.5-flash" and g.request_id == "g1"
    assert src.prefixes[g.prefix_key].system == "Gem sys."
    assert src.prefixes[g.prefix_key].tools == [{"name": "ls", "description": "list"}]
    assert [m["role"] for m in g.input_messages or []] == ["user", "assistant", "tool"]


def test_the_parts_of_a_rolled_over_capture_are_read_in_order(tmp_path: Path) -> None:
    body = {"model": "m", "max_tokens": 10, "tools": TOOLS, "messages": [{"role": "user", "content": "q0"}]}
    recs = []
    messages: list[dict[str, Any]] = list(body["messages"])  # type: ignore[arg-type]
    for n in range(1, 9):
        answer, usage = anthropic_answer(n, f"a{n}")
        recs.append(exchange(n, "anthropic", "/v1/messages", dict(body, messages=list(messages)), answer, usage))
        messages += [{"role": "assistant", "content": f"a{n}"}, {"role": "user", "content": f"q{n}"}]
    path = write(tmp_path / "r.jsonl", recs, max_bytes=1500)
    assert (tmp_path / "r.2.jsonl").exists()
    for part in (path, tmp_path / "r.2.jsonl"):
        src = read_capture(part)
        assert [c.request_id for c in src.calls] == [f"msg_{n}" for n in range(1, 9)]
        assert src.compactions == [] and [m["content"] for m in src.messages][-2:] == ["q7", "a8"]


def test_lines_that_are_not_exchanges_are_said(tmp_path: Path) -> None:
    path = claude_capture(tmp_path)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write('{"type": "exchange", "seq": 99, "family": "anthropic", "path": "/v1/messages", "outcome": '
                 '"complete", "request": {"body": "not json"}, "response": {"status": 200}}\nnot json at all\n')
    src = read_capture(path)
    assert len(src.calls) == 3
    assert [s.line for s in src.skipped] == [7, 8]
    assert src.skipped[1].damaged and not src.skipped[0].damaged


def _state(src: Any) -> tuple[Any, ...]:
    return ([(c.prompt_tokens, c.completion_tokens, c.model, c.message_index, c.prefix_key, c.max_tokens,
              [(m["role"], m.get("content")) for m in c.input_messages or []]) for c in src.calls],
            [(m["role"], m.get("content"), m.get("tool_calls")) for m in src.messages],
            [(c.message_index, c.calls_before, c.tokens_before, c.tokens_after) for c in src.compactions],
            src.live_start, [s.describe() for s in src.skipped], dict(src.ignored))


def test_fed_as_the_proxy_appends_it_ends_where_the_whole_read_does(tmp_path: Path) -> None:
    path = claude_capture(tmp_path, compact=True)
    data = path.read_bytes()
    whole = read_capture(path)
    rng = random.Random(5)
    for _ in range(5):
        reader = CaptureReader(path)
        at = 0
        changes = []
        while at < len(data):
            step = rng.randrange(1, 400)
            changes.append(reader.feed(data[at:at + step]))
            at += step
        assert _state(reader.finish()) == _state(whole)
        assert [c.calls_from for c in changes if not c.nothing(reader.session)] == sorted(
            c.calls_from for c in changes if not c.nothing(reader.session))
    assert detect_format(path) == "proxy-capture" and appended_reader("proxy-capture", path) is not None


def test_a_follower_sees_each_call_as_the_proxy_writes_it(tmp_path: Path) -> None:
    path = claude_capture(tmp_path)
    lines = path.read_bytes().splitlines(keepends=True)
    reader = CaptureReader(path)
    seen = []
    for line in lines:
        changes = reader.feed(line)
        seen += [c.request_id for c in reader.session.calls[changes.calls_from:]]
    assert seen == ["msg_9", "msg_1", "msg_2"]


def test_an_answer_the_agent_sends_back_otherwise_takes_its_place_and_id(tmp_path: Path) -> None:
    body: dict[str, Any] = {"model": "m", "max_tokens": 10, "tools": TOOLS, "messages": [{"role": "user",
                                                                                       "content": "q"}]}
    answer, usage = anthropic_answer(1, "the answer as streamed")
    again = dict(body, messages=[*body["messages"], {"role": "assistant", "content": "the answer as stored"},
                                 {"role": "user", "content": "next"}])
    path = write(tmp_path / "a.jsonl", [exchange(1, "anthropic", "/v1/messages", body, answer, usage),
                                        exchange(2, "anthropic", "/v1/messages", again, *anthropic_answer(2, "ok"))])
    reader = CaptureReader(path)
    lines = path.read_bytes().splitlines(keepends=True)
    reader.feed(b"".join(lines[:2]))
    first_id = reader.session.messages[1]["id"]
    changes = reader.feed(lines[2])
    src = reader.finish()
    assert [m["content"] for m in src.messages] == ["q", "the answer as stored", "next", "ok"]
    assert src.messages[1]["id"] == first_id and changes.messages_from == 1 and src.compactions == []


def test_a_history_restated_with_more_in_it_is_no_compaction(tmp_path: Path) -> None:
    """(A resumed Gemini CLI sends each tool result twice.) Nothing left the context: the conversation is the new
    request's, each message at a place it had keeping its id."""
    call = {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}]}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": "out"}
    first = {"model": "m", "max_tokens": 10, "tools": TOOLS, "messages": [
        {"role": "user", "content": "q"}, call, {"role": "user", "content": [result]}]}
    again = dict(first, messages=[{"role": "user", "content": "q"}, call, {"role": "user", "content": [result, result]},
                                  {"role": "assistant", "content": "done"}, {"role": "user", "content": "more"}])
    path = write(tmp_path / "g.jsonl", [exchange(1, "anthropic", "/v1/messages", first, *anthropic_answer(1, "done")),
                                        exchange(2, "anthropic", "/v1/messages", again, *anthropic_answer(2, "ok"))])
    reader = CaptureReader(path)
    lines = path.read_bytes().splitlines(keepends=True)
    reader.feed(b"".join(lines[:2]))
    ids = [m["id"] for m in reader.session.messages]
    reader.feed(lines[2])
    src = reader.finish()
    assert src.compactions == []
    assert [(m["role"], m["content"]) for m in src.messages] == [
        ("user", "q"), ("assistant", None), ("tool", "out"), ("tool", "out"), ("assistant", "done"),
        ("user", "more"), ("assistant", "ok")]
    assert [m["id"] for m in src.messages[:len(ids)]] == ids


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                                  max_size=3), max_leaves=12)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(["anthropic", "openai-chat", "openai-responses", "gemini", "other", 7]), JSON, JSON, JSON)
def test_an_exchange_of_any_shape_is_read_or_skipped_never_raised(family: Any, body: Any, message: Any,
                                                                    usage: Any) -> None:
    shapes = [{"messages": body, "tools": [{"name": "x"}], "system": body}, {"contents": body, "tools": body},
              {"input": body, "tools": [body]}, body]
    line = {"type": "exchange", "seq": 1, "family": family, "path": "/v1/messages", "outcome": "complete",
            "request": {"body": json.dumps(shapes[len(json.dumps(body, default=str)) % 4], default=str)},
            "response": {"status": 200, "message": message, "usage": usage}}
    reader = CaptureReader(Path("fuzz.jsonl"))
    reader.feed(json.dumps(line, default=str).encode() + b"\n")
    src = reader.finish()
    assert len(src.calls) + len(src.skipped) + sum(src.ignored.values()) == 1
