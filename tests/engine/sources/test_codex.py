"""engine.sources.codex over every real Codex rollout: one call per changed token_count, prompts,
cache figures, window, the remote compaction and its replacement history."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from engine.context.tokens import estimate_message_tokens
from engine.sources.codex import NOT_RECORDED, read_codex
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


# --------------------------------------------------------------------------- newer rollouts (Codex 0.1xx)
# Hand-made lines in the shape Codex 0.169 writes: ``ordinal`` after the timestamp, a ``token_usage_record``
# per response before its ``token_count``, ``world_state``, and the terminal's own event copies.

def _usage(prompt: int, read: int, out: int, write: int = 0) -> dict[str, int]:
    return {"input_tokens": prompt, "cached_input_tokens": read, "cache_write_input_tokens": write,
            "output_tokens": out, "reasoning_output_tokens": 0, "total_tokens": prompt + out}


def _record(response_id: str, usage: dict[str, int]) -> dict[str, Any]:
    return {"type": "token_usage_record", "payload": {"response_id": response_id, "usage": usage,
                                                       "turn_token_usage": usage, "thread_token_usage": usage}}


def _count(last: dict[str, int], total: dict[str, int], window: int = 258400) -> dict[str, Any]:
    return {"type": "event_msg", "payload": {"type": "token_count", "info": {
        "total_token_usage": total, "last_token_usage": last, "model_context_window": window}, "rate_limits": {}}}


def _item(payload: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "response_item", "payload": payload, **extra}


def _event(kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": "event_msg", "payload": {"type": kind, **fields}}


def _write(tmp_path: Path, rows: list[dict[str, Any]]) -> Path:
    path = tmp_path / "rollout-2026-11-25T00-00-00-new.jsonl"
    out = []
    for i, row in enumerate(rows):  # the compact form Codex writes: timestamp, ordinal, type, payload
        line = {"timestamp": f"2026-11-25T00:00:{i:02d}.000Z", "ordinal": i, **row}
        out.append(json.dumps(line, separators=(",", ":")) + "\n")
    path.write_text("".join(out), encoding="utf-8")
    return path


META = {"type": "session_meta", "payload": {"id": "new", "cwd": "", "cli_version": "0.169.0",
                                            "base_instructions": {"text": "You are Codex.", "provenance": {}}}}
WORLD = {"type": "world_state", "payload": {"full": True, "state": {"environments": {"environments": {
    "local": {"cwd": "/w/proj", "status": "available", "shell": "bash"}}}, "model": "gpt-5.5"}}}
TURN = {"type": "turn_context", "payload": {"turn_id": "t", "cwd": "/w/proj", "model": "gpt-5.5"}}
USER = _item({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "run it"}]})


def _call_item(n: int) -> dict[str, Any]:
    return _item({"type": "function_call", "name": "exec_command", "arguments": '{"cmd": "ls"}', "call_id": f"c{n}"})


def _output_item(n: int) -> dict[str, Any]:
    return _item({"type": "function_call_output", "call_id": f"c{n}", "output": "ok"})


def _three_calls() -> list[dict[str, Any]]:
    u1, u2, u3 = _usage(100, 0, 5), _usage(120, 98, 5), _usage(140, 118, 7)
    t1 = u1
    t2 = {k: u1[k] + u2[k] for k in u1}
    t3 = {k: t2[k] + u3[k] for k in u1}
    return [
        META, _event("task_started", model_context_window=258400), WORLD, TURN,
        _event("thread_settings_applied", thread_settings={"model": "gpt-5.5"}), USER,
        _event("item_completed", item={"type": "UserMessage"}),
        _call_item(1), _record("resp_1", u1), _event("item_completed", item={"type": "CommandExecution"}),
        _output_item(1), _count(u1, t1),
        _call_item(2), _record("resp_2", u2), _output_item(2), _count(u2, t2),
        _item({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]}),
        _record("resp_3", u3), _count(u3, t3),
        _event("task_complete", last_agent_message="done"),
    ]


def test_token_usage_records_are_the_calls_and_their_token_counts_are_not_more(tmp_path: Path) -> None:
    src = read_codex(_write(tmp_path, _three_calls()))
    assert src.skipped == []
    assert [(c.prompt_tokens, c.cache_read_tokens, c.completion_tokens) for c in src.calls] == [
        (100, 0, 5), (120, 98, 5), (140, 118, 7)]
    assert [c.request_id for c in src.calls] == ["resp_1", "resp_2", "resp_3"]
    assert all(c.cache_write_tokens == 0 and isinstance(c.cache_write_tokens, int) for c in src.calls)
    assert all(c.reasoning_tokens == 0 and c.window == 258400 and c.model == "gpt-5.5" for c in src.calls)
    assert src.ignored == {"event_msg/thread_settings_applied": 1, "event_msg/item_completed": 2,
                           "event_msg/task_complete": 1}
    assert src.cwd == "/w/proj" and src.project == "proj"  # from world_state: session_meta's cwd is empty


def test_a_token_count_before_its_record_is_one_call_that_the_record_completes(tmp_path: Path) -> None:
    u1, u2 = _usage(100, 0, 5, write=40), _usage(120, 98, 5)
    rows = [META, TURN, USER, _call_item(1), _count(u1, u1), _record("resp_1", u1),
            _count(u2, {k: u1[k] + u2[k] for k in u1})]  # the second call has no record: a call of its own
    src = read_codex(_write(tmp_path, rows))
    assert [(c.prompt_tokens, c.request_id, c.cache_write_tokens) for c in src.calls] == [
        (100, "resp_1", 40), (120, "", 0)]


def test_records_with_other_figures_than_the_token_count_are_not_merged(tmp_path: Path) -> None:
    u1, u2 = _usage(100, 0, 5), _usage(300, 0, 9)
    src = read_codex(_write(tmp_path, [META, TURN, USER, _record("resp_1", u1), _count(u2, u2)]))
    assert [c.prompt_tokens for c in src.calls] == [100, 300]


@pytest.mark.parametrize("base", [{"text": "You are Codex."}, "You are Codex."], ids=["object", "string"])
def test_base_instructions_are_the_system_prompt_and_every_calls_exact_prefix(tmp_path: Path, base: Any) -> None:
    from engine.sources.codex import PREFIX_KEY

    rows = _three_calls()
    rows[0] = {"type": "session_meta", "payload": {"id": "new", "cwd": "/p/x", "base_instructions": base}}
    src = read_codex(_write(tmp_path, rows))
    assert src.system_prompt == "You are Codex."
    prefix = src.prefixes[PREFIX_KEY]
    assert (prefix.key, prefix.system, prefix.tools) == (PREFIX_KEY, "You are Codex.", [])
    assert {c.prefix_key for c in src.calls} == {PREFIX_KEY}
    assert src.cwd == "/p/x"  # session_meta's cwd wins over world_state's


def test_redacted_base_instructions_are_no_exact_prefix(tmp_path: Path) -> None:
    rows = _three_calls()
    rows[0] = {"type": "session_meta", "payload": {"id": "new", "base_instructions": {
        "text": "[REDACTED_TEXT len=300 sha=0123abcd]"}}}
    src = read_codex(_write(tmp_path, rows))
    assert src.prefixes == {} and {c.prefix_key for c in src.calls} == {""}
    assert len(src.system_prompt) == 300


def test_types_this_reader_does_not_know_are_skipped_with_the_reason(tmp_path: Path) -> None:
    rows = [*_three_calls(), {"type": "brand_new_record", "payload": {}}, _event("brand_new_event"),
            _item({"type": "brand_new_item"})]
    src = read_codex(_write(tmp_path, rows))
    assert [s.reason for s in src.skipped] == [
        "record type 'brand_new_record' is not one this reader knows",
        "event type 'brand_new_event' is not one this reader knows",
        "response item type 'brand_new_item' is not one this reader knows"]
    assert len(src.calls) == 3


def test_the_known_type_lists_cover_every_type_of_the_real_rollouts() -> None:
    from engine.sources.codex_kinds import KNOWN_EVENTS, KNOWN_ITEMS, KNOWN_PARTS, KNOWN_TURN_ITEMS, KNOWN_TYPES

    for path in codex_files():
        for obj in lines(path):
            assert obj["type"] in KNOWN_TYPES
            payload = obj.get("payload") or {}
            kind = payload.get("type")
            if obj["type"] == "event_msg":
                assert kind in KNOWN_EVENTS
                assert kind != "item_completed" or payload["item"]["type"] in KNOWN_TURN_ITEMS
            elif obj["type"] == "response_item":
                assert kind in KNOWN_ITEMS
                parts = [p for key in ("content", "output", "summary") if isinstance(payload.get(key), list)
                         for p in payload[key] if isinstance(p, dict)]
                assert {p.get("type") for p in parts} <= KNOWN_PARTS
        src = read_codex(path)
        assert src.skipped == [] and src.ignored and src.prefixes == {}


def test_the_summarisers_answer_and_call_are_the_compactions_not_the_conversations(tmp_path: Path) -> None:
    u1, u2 = _usage(9000, 0, 11), _usage(7000, 1, 5)
    u3 = _usage(8000, 1, 5)
    t1 = u1
    t2 = {k: t1[k] + u2[k] for k in u1}
    t3 = {k: t2[k] + u3[k] for k in u1}
    rows = [META, TURN, USER, _call_item(1), _record("resp_1", u1), _output_item(1), _count(u1, t1),
            _item({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "SUM"}]},
                  metadata={"compaction_output": True}),
            _record("resp_sum", u2), _count(u2, t2),
            {"type": "compacted", "payload": {"message": "summary: SUM", "replacement_history": [
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "run it"}]}]}},
            _count(_usage(0, 0, 0), t2),  # Codex repeats the total after a compaction: not a call
            _item({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}),
            _record("resp_2", u3), _count(u3, t3)]
    src = read_codex(_write(tmp_path, rows))
    assert src.skipped == [] and src.ignored == {"response_item/compaction_output": 1}
    assert [c.request_id for c in src.calls] == ["resp_1", "resp_2"]
    assert "SUM" not in [m.get("content") for m in src.messages[:src.live_start]]
    (comp,) = src.compactions
    assert comp.cost is not None and (comp.cost.prompt_tokens, comp.cost.request_id) == (7000, "resp_sum")
    assert (comp.tokens_before, comp.tokens_after, comp.trigger, comp.summary) == (9000, 8000, "auto", "summary: SUM")


def test_the_follower_gives_the_readers_calls_and_compaction_cost(tmp_path: Path) -> None:
    from engine.sources.follow import Follower

    u1, u2, u3 = _usage(9000, 0, 11), _usage(7000, 1, 5), _usage(8000, 1, 5)
    t2 = {k: u1[k] + u2[k] for k in u1}
    rows = [*_three_calls()[:-1],
            _item({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "S"}]},
                  metadata={"compaction_output": True}),
            _record("resp_sum", u2), _count(u2, t2), {"type": "compacted", "payload": {"message": "S"}},
            _count(u3, u1), _record("resp_4", u3)]  # a record after its token_count: an update of that call
    path = _write(tmp_path, rows)
    src = read_codex(path)
    events = Follower(path).poll()
    calls = [e.call for e in events if e.kind == "call" and e.call is not None]
    key = [(c.index, c.prompt_tokens, c.cache_read_tokens, c.cache_write_tokens, c.window, c.request_id, c.prefix_key)
           for c in src.calls]
    assert [(c.index, c.prompt_tokens, c.cache_read_tokens, c.cache_write_tokens, c.window, c.request_id,
             c.prefix_key) for c in calls] == key
    assert len(key) == 4 and key[-1][5] == "resp_4"
    (comp,) = [e.compaction for e in events if e.kind == "compaction"]
    assert comp is not None and comp.cost is not None and comp.cost.prompt_tokens == 7000
    assert comp.tokens_before == src.compactions[0].tokens_before == 140


# --------------------------------------------------------------------------- Codex 0.171, code mode (lines shortened)

EXEC_TOOL = {"type": "custom", "name": "exec", "description": "Run JavaScript code to orchestrate/compose tool calls",
             "format": {"type": "grammar", "syntax": "lark", "definition": "start: SOURCE"}}
SPAWN_TOOL = {"type": "function", "name": "spawn_agent", "description": "Spawns an agent.", "strict": False,
              "parameters": {"type": "object", "properties": {"task_name": {"type": "string"}}}}
TOOLS = [{"type": "namespace", "name": "functions", "description": "", "tools": [EXEC_TOOL]},
         {"type": "namespace", "name": "collaboration", "description": "", "tools": [SPAWN_TOOL]}]


def _tools_item(tools: list[dict[str, Any]]) -> dict[str, Any]:
    return _item({"type": "additional_tools", "id": "at_1", "role": "developer", "tools": tools})


def _code_mode(u1: dict[str, int], u2: dict[str, int]) -> list[dict[str, Any]]:
    t2 = {k: u1[k] + u2[k] for k in u1}
    return [META, _event("task_started", model_context_window=272000), _tools_item(TOOLS),
            {"type": "turn_context", "payload": {"turn_id": "t", "model": "gpt-6.2-sol"}}, USER,
            _item({"type": "custom_tool_call", "status": "completed", "call_id": "c1", "name": "exec",
                   "input": 'const r = await tools.exec_command({cmd: "echo codemode"});\ntext(r);'}),
            _record("resp_1", u1),
            _item({"type": "custom_tool_call_output", "call_id": "c1", "output": [
                {"type": "input_text", "text": "Script completed\nOutput:\n"},
                {"type": "input_text", "text": "codemode"}]}),
            _count(u1, u1),
            _item({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Done."}]}),
            _record("resp_2", u2), _count(u2, t2)]


def test_additional_tools_are_the_exact_tool_definitions_of_the_calls_after_them(tmp_path: Path) -> None:
    src = read_codex(_write(tmp_path, _code_mode(_usage(14930, 0, 22), _usage(15076, 14933, 3))))
    assert src.skipped == [] and src.ignored == {}
    assert [c.prefix_key for c in src.calls] == ["base_instructions"] * 2
    prefix = src.prefixes["base_instructions"]
    assert (prefix.system, prefix.tools) == ("You are Codex.", TOOLS)  # as sent: the namespaces, not flattened
    assert not [m for m in src.messages if "additional_tools" in str(m.get("content"))]  # not a message
    (call,) = [c for m in src.messages for c in m.get("tool_calls") or []]
    assert call["function"]["name"] == "exec" and "echo codemode" in call["function"]["arguments"]
    (out,) = [m for m in src.messages if m["role"] == "tool"]
    assert out["content"] == "Script completed\nOutput:\n\ncodemode"


def test_another_tool_set_is_another_prefix_and_no_exact_system_prompt_is_none(tmp_path: Path) -> None:
    u1, u2 = _usage(100, 0, 5), _usage(90, 0, 5)
    rows = _code_mode(u1, u2)
    rows.insert(9, _tools_item(TOOLS[:1]))  # the tools changed before the second call
    src = read_codex(_write(tmp_path, rows))
    assert [c.prefix_key for c in src.calls] == ["base_instructions", "base_instructions#2"]
    assert src.prefixes["base_instructions#2"].tools == TOOLS[:1]
    rows[0] = {"type": "session_meta", "payload": {"id": "new", "base_instructions": "[REDACTED_TEXT len=900]"}}
    redacted = read_codex(_write(tmp_path, rows))
    assert redacted.prefixes == {} and [c.prefix_key for c in redacted.calls] == ["", ""]


def test_agent_messages_are_messages_with_their_author_and_turn_trigger(tmp_path: Path) -> None:
    meta = {"type": "inter_agent_communication_metadata", "payload": {"trigger_turn": True}}
    task = _item({"type": "agent_message", "id": "amsg_1", "author": "/root", "recipient": "/root/worker", "content": [
        {"type": "input_text", "text": "Message Type: NEW_TASK\nTask name: /root/worker\nSender: /root\nPayload:\n"},
        {"type": "encrypted_content", "encrypted_content": "gAAAA" + "x" * 95}]})
    answer = _item({"type": "agent_message", "author": "/root/worker", "recipient": "/root",
                    "content": [{"type": "input_text", "text": "Message Type: FINAL_ANSWER\nPayload:\nAll done."}]})
    rows = [META, _tools_item(TOOLS), meta, task, _record("resp_1", _usage(100, 0, 5)), answer]
    src = read_codex(_write(tmp_path, rows))
    assert src.skipped == [] and src.ignored == {}
    first, second = [m for m in src.messages if m.get("agent_message")]
    assert (first["role"], first["name"], first["agent_message"]) == (
        "user", "agent", {"author": "/root", "recipient": "/root/worker", "trigger_turn": True})
    assert "[encrypted content: 100 characters]" in first["content"] and len(first["content"].split("\n")[-1]) == 100
    assert second["agent_message"] == {"author": "/root/worker", "recipient": "/root"}  # no metadata line before it
    assert second["content"].endswith("All done.")


def test_a_compaction_between_turns_is_of_unknown_trigger(tmp_path: Path) -> None:
    u1, u2 = _usage(100, 0, 5), _usage(60, 0, 5)
    rows = [*_three_calls()[:-1], _event("task_started"), USER,
            {"type": "compacted", "payload": {"message": "S", "replacement_history": []}},
            _event("context_compacted"), _record("resp_4", u2), _count(u2, {k: u1[k] * 9 for k in u1})]
    src = read_codex(_write(tmp_path, rows))
    (comp,) = src.compactions
    assert (comp.trigger, comp.trigger_source) == ("unknown", NOT_RECORDED)  # not "manual": the file does not say
    mid = read_codex(_write(tmp_path, [*_three_calls()[:-3], {"type": "compacted", "payload": {"message": "S"}}]))
    assert [(c.trigger, c.trigger_source) for c in mid.compactions] == [("auto", "inferred: mid-turn")]


def test_an_image_is_a_part_of_its_own_counted_as_an_image() -> None:
    from engine.model.messages import media_count

    def images(items: list[Any]) -> int:
        return sum(1 for i in items for p in i.get("content") or []
                   if isinstance(p, dict) and p.get("type") == "input_image")

    big = next(p for p in codex_files() if p.name.startswith("rollout-2026-02-23T12-54-34"))
    raw = lines(big)
    written = images([o["payload"] for o in raw if o["type"] == "response_item"])
    replayed = images([i for o in raw if o["type"] == "compacted"
                       for i in o["payload"].get("replacement_history") or []])
    src = read_codex(big)
    with_images = [m for m in src.messages if media_count(m.get("content"))]
    assert (len(with_images), written, replayed) == (17, 13, 4) and all(m["role"] == "user" for m in with_images)
    first = with_images[0]["content"]
    assert first[2] == {"type": "image_url", "image_url": {"url": "about:blank#image-not-imported"}}
    assert first[0] == {"type": "text", "text": "[redacted: 1 characters]"}  # a redacted text, sized


def test_a_forked_subagent_rollout_keeps_its_own_id_and_answers_the_aborted_call(tmp_path: Path) -> None:
    # Codex 0.171's forked spawn_agent: the child's session_meta, then the parent's (the thread it was forked from),
    # the parent's history with the spawn call and no output (turn_aborted), then the child's own instructions
    base = "You are Codex, an agent based on GPT-6. " * 10
    dev = {"type": "message", "role": "developer"}
    rows = [{"type": "session_meta", "payload": {"id": "child", "base_instructions": {"text": base}}},
            {"type": "session_meta", "payload": {"id": "parent", "base_instructions": {"text": base}}},
            _item({**dev, "content": [{"type": "input_text", "text": base}]}),
            _item({**dev, "content": [{"type": "input_text", "text": "<multi_agent_mode>no</multi_agent_mode>"}]}),
            USER, _item({"type": "function_call", "name": "spawn_agent", "namespace": "collaboration",
                         "arguments": "{}", "call_id": "c9"}),
            _event("turn_aborted", reason="interrupted"),
            _item({**dev, "content": [{"type": "input_text", "text": "<multi_agent_mode>no</multi_agent_mode>"}]}),
            _record("resp_1", _usage(100, 0, 5))]
    src = read_codex(_write(tmp_path, rows))
    assert src.session_id == "child" and src.skipped == [] and src.ignored == {}
    assert src.system_prompt == base + "\n\n<multi_agent_mode>no</multi_agent_mode>"  # the base once, as sent
    assert src.prefixes["base_instructions"].system == src.system_prompt  # what the requests open with
    (aborted,) = [m for m in src.messages if m.get("codex_aborted")]
    assert (aborted["role"], aborted["tool_call_id"], aborted["content"]) == ("tool", "c9", "aborted")
    (call,) = src.calls
    assert call.prompt_unlike_file == ""  # instructions again before the thread's first call: no resume


def test_a_repeated_total_is_the_same_even_with_a_nan_and_a_new_one_never_is() -> None:
    """Codex writes each call's token_count twice: the repeat is the same total (a NaN in both, never == itself,
    still a repeat); a total that differs in any figure is a new call."""
    from engine.sources.codex import same_total

    nan = float("nan")
    first = {"input_tokens": 10, "output_tokens": 5}
    assert same_total(first, dict(first)) and same_total({"a": 1}, {"a": 1.0})
    assert same_total({"input_tokens": nan, "output_tokens": 5}, {"input_tokens": nan, "output_tokens": 5})
    assert same_total({"x": [1, {"y": nan}]}, {"x": [1, {"y": nan}]})
    assert not same_total({"input_tokens": nan, "output_tokens": 5}, {"input_tokens": nan, "output_tokens": 6})
    assert not same_total(first, {"input_tokens": 11, "output_tokens": 5}) and not same_total(first, None)
