"""engine.sources.copilot on short lines in the shape Copilot CLI 1.0.102 writes (taken from its own
``events.jsonl`` in the real-agent tier, shortened): a turn with a tool call, a continued session, a manual
compaction with its own call, a truncation, shutdown totals, a sub-agent's events; fed whole and in random byte
chunks; bad lines; detection and Sources."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from engine.sources.copilot import CopilotReader, is_copilot_line, light_summary, read_copilot, summary_text
from engine.sources.detect import detect_format
from engine.sources.discovery import scan_sources

SID = "f37087a8-27cf-436d-a678-2a15751765db"
T0 = "2026-11-27T01:46:{:02d}.000Z"
SYSTEM = "You are the GitHub Copilot CLI, a terminal assistant built by GitHub."
_ids = iter(range(10_000))


def event(kind: str, sec: int, data: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": kind, "data": data, "id": f"ev-{next(_ids)}", "timestamp": T0.format(sec), "parentId": None,
            **extra}


def usage(rid: str, inp: int, read: int, out: int, sec: int, **extra: Any) -> dict[str, Any]:
    return event("session.usage_record", sec, {"usage": {
        "model": "fake-model", "inputTokens": inp, "outputTokens": out, "cacheReadTokens": read,
        "cacheWriteTokens": 0, "cost": 0.0, "isByok": True, "maxPromptTokens": 128000, "apiCallId": rid,
        "availableToolCount": 17, "toolTokenCount": 5748, "finishReason": "tool_calls", **extra}})


def user(text: str, sec: int) -> dict[str, Any]:
    return event("user.message", sec, {"content": text, "interactionId": "i1", "transformedContent":
                                       f"<current_datetime>2026-11-27T01:46:0{sec}.003+00:00</current_datetime>\n\n{text}"})


def assistant(rid: str, sec: int, text: str = "", call: str = "") -> dict[str, Any]:
    requests = [{"toolCallId": call, "name": "bash", "arguments": {"command": "echo step0", "description": "echo"},
                 "type": "function"}] if call else []
    return event("assistant.message", sec, {"messageId": f"m-{rid}", "model": "fake-model", "content": text,
                                            "toolRequests": requests, "turnId": "0", "apiCallId": rid})


def tool_done(call: str, sec: int) -> dict[str, Any]:
    result = {"content": "step0\n<shellId: 0 completed with exit code 0>"}
    return event("tool.execution_complete", sec, {"toolCallId": call, "model": "fake-model", "success": True,
                                                  "result": result})


def shutdown(count: int, inp: int, out: int, sec: int) -> dict[str, Any]:
    return event("session.shutdown", sec, {"shutdownType": "routine", "modelMetrics": {"fake-model": {
        "requests": {"count": count, "cost": 0}, "usage": {"inputTokens": inp, "outputTokens": out,
                                                           "cacheReadTokens": 0, "cacheWriteTokens": 0}}}})


def lines() -> list[dict[str, Any]]:
    return [
        event("session.start", 1, {"sessionId": SID, "version": 1, "producer": "copilot-agent",
                                   "copilotVersion": "1.0.102", "startTime": T0.format(1),
                                   "selectedModel": "fake-model", "context": {"cwd": "/p/proj"}}),
        user("Run two commands", 1),
        event("system.message", 1, {"role": "system", "content": SYSTEM, "metadata": {}}),
        event("assistant.turn_start", 2, {"turnId": "0", "interactionId": "i1"}),
        usage("chatcmpl-1", 11931, 0, 17, 2),
        assistant("chatcmpl-1", 2, call="call_1"),
        event("tool.execution_start", 2, {"toolCallId": "call_1", "toolName": "bash", "arguments": {}}),
        tool_done("call_1", 2),
        event("assistant.turn_end", 2, {"turnId": "0"}),
        usage("chatcmpl-2", 12014, 11932, 5, 3, finishReason="stop"),
        assistant("chatcmpl-2", 3, text="Done: 1 command ran."),
        shutdown(2, 11931 + 12014, 22, 3),
        event("session.resume", 4, {"resumeTime": T0.format(4), "eventCount": 12, "selectedModel": "fake-model",
                                    "context": {"cwd": "/p/proj"}}),
        event("session.compaction_start", 4, {"compactionAttemptId": "c1", "currentTokens": 10656,
                                              "trigger": "manual"}),
        event("model.model_call_success", 4, {"kind": "model_call_success", "modelCall": {
            "model": "fake-model", "api_id": "chatcmpl-sum"}, "responseUsage": {"prompt_tokens": 13536}}),
        event("model.messages_snapshot", 4, {"kind": "messages_snapshot", "messages": []}),
        event("session.compaction_complete", 4, {
            "success": True, "outcome": "applied", "compactionAttemptId": "c1", "preCompactionTokens": 10656,
            "postCompactionTokens": 10378, "tokenAccountingBasis": "local_full_context_estimate",
            "summaryContent": "<overview>Ran commands.</overview>", "compactionTokensUsed": {
                "requestCount": 1, "inputTokens": 13536, "outputTokens": 8, "cacheReadTokens": 5034,
                "cacheWriteTokens": 0, "duration": 15, "model": "fake-model"}, "trigger": "manual"}),
        user("Print once more", 5),
        event("system.message", 5, {"role": "system", "content": SYSTEM + " Rebuilt.", "metadata": {}}),
        usage("chatcmpl-3", 12097, 5034, 5, 5, finishReason="stop"),
        assistant("chatcmpl-3", 5, text="Printed."),
        shutdown(3, 11931 + 12014 + 12097, 27, 6),
    ]


def write(path: Path, objs: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(o) + "\n" for o in objs), encoding="utf-8")
    return path


def session_file(tmp_path: Path, objs: list[dict[str, Any]] | None = None) -> Path:
    return write(tmp_path / ".copilot" / "session-state" / SID / "events.jsonl", lines() if objs is None else objs)


def test_calls_messages_and_the_compaction(tmp_path: Path) -> None:
    src = read_copilot(session_file(tmp_path))
    assert src.format == "copilot-cli" and src.session_id == SID and src.skipped == []
    assert (src.cwd, src.project, src.model, src.window) == ("/p/proj", "proj", "fake-model", 128000)
    assert [(c.request_id, c.prompt_tokens, c.cache_read_tokens, c.completion_tokens) for c in src.calls] == [
        ("chatcmpl-1", 11931, 0, 17), ("chatcmpl-2", 12014, 11932, 5), ("chatcmpl-3", 12097, 5034, 5)]
    assert [c.message_index for c in src.calls] == [1, 3, 6]
    roles = [m["role"] for m in src.messages]
    assert roles == ["user", "assistant", "tool", "assistant", "user", "user", "assistant"]
    assert src.messages[0]["content"].startswith("<current_datetime>") and src.messages[0]["content"].endswith(
        "\n\nRun two commands")  # as sent
    assert src.messages[1]["tool_calls"][0]["function"] == {"name": "bash", "arguments": json.dumps(
        {"command": "echo step0", "description": "echo"})}
    assert src.messages[2] == {"role": "tool", "tool_call_id": "call_1", "ts": src.messages[2]["ts"],
                               "content": "step0\n<shellId: 0 completed with exit code 0>", "id": src.messages[2]["id"]}
    assert src.system_prompt == SYSTEM + " Rebuilt." and any("rebuilt its system prompt" in n for n in src.notes)
    (comp,) = src.compactions
    assert (comp.trigger, comp.trigger_source, comp.calls_before, comp.message_index) == ("manual", "manual", 2, 4)
    assert (comp.tokens_before, comp.tokens_before_source, comp.post_tokens) == (10656, "estimated", 10378)
    assert comp.tokens_after == 12097 and src.live_start == 4 and comp.messages_after == 1
    assert comp.cost is not None and (comp.cost.request_id, comp.cost.prompt_tokens, comp.cost.completion_tokens,
                                      comp.cost.cache_read_tokens) == ("chatcmpl-sum", 13536, 8, 5034)
    assert src.messages[4]["content"] == summary_text(comp.summary, ["Run two commands"])
    assert src.messages[4]["content"] == (
        "Some of the conversation history has been summarized to free up context.\n\nYou were originally given "
        "instructions from a user over one or more turns. Here were the user messages:\n<user_message>\nRun two "
        "commands\n</user_message>\n\nHere is a summary of the prior context:\n<summary>\n<overview>Ran commands."
        "</overview>\n</summary>\n")  # as Copilot 1.0.102 sent it
    assert src.ignored == {"event/assistant.turn_start": 1, "event/tool.execution_start": 1,
                           "event/assistant.turn_end": 1, "event/model.messages_snapshot": 1}
    assert not any("differ" in n for n in src.notes)  # the shutdown totals are the calls'


def test_fed_in_byte_chunks_it_is_read_whole(tmp_path: Path) -> None:
    path = session_file(tmp_path)
    whole = read_copilot(path)
    data = path.read_bytes()
    for seed in range(5):
        reader = CopilotReader(path)
        rng, at, seen = random.Random(seed), 0, 0
        while at < len(data):
            step = rng.randint(1, 300)
            changes = reader.feed(data[at:at + step])
            assert changes.calls_from == seen
            seen = len(reader.session.calls)
            at += step
        got = reader.finish()
        assert [{k: v for k, v in m.items() if k != "id"} for m in got.messages] == [
            {k: v for k, v in m.items() if k != "id"} for m in whole.messages]
        assert got.calls == whole.calls and got.compactions == whole.compactions


def test_the_size_after_a_compaction_arrives_with_the_next_call(tmp_path: Path) -> None:
    raw = b"".join(json.dumps(o).encode() + b"\n" for o in lines())
    reader = CopilotReader(session_file(tmp_path))
    cut = raw.index(b'"Print once more"')
    cut = raw.rindex(b"\n", 0, cut) + 1
    reader.feed(raw[:cut])
    assert reader.session.compactions[0].tokens_after is None
    changes = reader.feed(raw[cut:])
    assert changes.compactions_from == 0 and reader.session.compactions[0].tokens_after == 12097


def test_a_truncation_keeps_the_last_messages(tmp_path: Path) -> None:
    objs = [*lines()[:11], event("session.truncation", 4, {
        "messagesRemovedDuringTruncation": 2, "performedBy": "BasicTruncator", "postTruncationMessagesLength": 2,
        "postTruncationTokensInMessages": 40, "preTruncationMessagesLength": 4, "preTruncationTokensInMessages": 90,
        "tokenLimit": 17000, "tokensRemovedDuringTruncation": 50})]
    src = read_copilot(session_file(tmp_path, objs))
    (comp,) = src.compactions
    assert (comp.trigger, comp.trigger_source) == ("auto", "truncation (BasicTruncator)")
    assert (comp.tokens_before, comp.post_tokens, comp.messages_after, comp.summary) == (90, 40, 2, "")
    assert [m["role"] for m in src.messages[src.live_start:]] == ["tool", "assistant"]


def test_an_auto_compaction_and_a_failed_one(tmp_path: Path) -> None:
    objs = lines()
    objs[16]["data"]["trigger"] = "threshold"
    objs.insert(13, event("session.compaction_start", 4, {"trigger": "threshold"}))
    objs.insert(14, event("session.compaction_complete", 4, {"success": False, "error": "too short"}))
    src = read_copilot(session_file(tmp_path, objs))
    (comp,) = src.compactions
    assert (comp.trigger, comp.trigger_source) == ("auto", "threshold")
    assert any("was not applied (failed, ?)" in n for n in src.notes)


def test_bad_lines_are_skipped_with_the_reason(tmp_path: Path) -> None:
    objs = [*lines()[:6],
        event("session.some_new_event", 2, {}),  # a type of a newer Copilot: said, not read
        {"type": "user.message", "data": "not an object"},
        event("session.usage_record", 2, {"usage": ["a", "list"]}),  # read as a call of unknown figures
        event("assistant.message", 2, {"content": 5, "toolRequests": "x", "apiCallId": ["y"]}),
    ]
    path = session_file(tmp_path, objs)
    with path.open("ab") as fh:
        fh.write(b"not json\n{\"type\": \"user.mess")
    src = read_copilot(path)
    reasons = [s.describe() for s in src.skipped]
    assert reasons[0] == "line 7: event type 'session.some_new_event' is not one this reader knows"
    assert reasons[1] == "line 8: not a Copilot CLI event (a type and its data)"
    assert reasons[2].startswith("line 11: not JSON") and "truncated last line" in reasons[3]
    assert len(src.calls) == 2 and src.calls[1].prompt_tokens is None
    assert src.messages[-1]["content"] == "5" and "tool_calls" not in src.messages[-1]


def test_a_subagents_calls_count_but_not_its_messages(tmp_path: Path) -> None:
    objs = [*lines()[:3], user("sub task", 2) | {"agentId": "a1"}, usage("chatcmpl-s", 500, 0, 3, 2) | {
        "agentId": "a1"}]
    src = read_copilot(session_file(tmp_path, objs))
    assert [c.request_id for c in src.calls] == ["chatcmpl-s"]
    assert [m["content"].split("\n\n")[-1] for m in src.messages] == ["Run two commands"]
    assert src.ignored == {"subagent/user.message": 1}


def test_shutdown_totals_unlike_the_calls_are_said(tmp_path: Path) -> None:
    objs = [*lines()[:11], shutdown(3, 1, 2, 3)]
    src = read_copilot(session_file(tmp_path, objs))
    assert any(n.startswith("Copilot's totals at") and "differ from the calls read" in n for n in src.notes)


def test_detected_and_listed_with_its_workspace_name(tmp_path: Path) -> None:
    path = session_file(tmp_path)
    assert detect_format(path) == "copilot-cli"
    assert all(is_copilot_line(o) for o in lines())
    assert not is_copilot_line({"type": "user", "uuid": "x", "sessionId": "y", "message": {}})  # Claude Code's
    (path.parent / "workspace.yaml").write_text(f"id: {SID}\ncwd: /p/proj\nname: Two commands\nuser_named: false\n")
    found = light_summary(path)
    assert (found.session_id, found.calls, found.last_prompt, found.model, found.window, found.title, found.cwd) == (
        SID, 3, 12097, "fake-model", 128000, "Two commands", "/p/proj")
    (entry,) = scan_sources(env={"HOME": str(tmp_path)}, home=tmp_path, index=tmp_path / "idx.json")
    assert (entry.agent, entry.project, entry.title, entry.calls) == ("copilot-cli", "proj", "Two commands", 3)


def test_copilot_home_is_where_its_sessions_are(tmp_path: Path) -> None:
    write(tmp_path / "cp" / "session-state" / SID / "events.jsonl", lines())
    (entry,) = scan_sources(env={"HOME": str(tmp_path / "nobody"), "COPILOT_HOME": str(tmp_path / "cp")},
                            home=tmp_path / "nobody", index=tmp_path / "idx.json")
    assert (entry.agent, entry.session_id, entry.title) == ("copilot-cli", SID, "Run two commands")


@pytest.mark.parametrize("name", ["copilot", "copilot-cli", "Copilot_CLI"])
def test_the_format_name(name: str) -> None:
    from engine.sources.detect import parse_format

    assert parse_format(name) == "copilot-cli"


def test_a_cancelled_compactions_call_is_counted(tmp_path: Path) -> None:
    """Copilot 1.0.102 compacts in the background past its threshold; when ``-p`` ends first the compaction is
    cancelled, but its summary call was made (and paid): a call, whose prompt is not the conversation's."""
    objs = [*lines()[:11],
        event("session.compaction_start", 3, {"currentTokens": 16067, "tokenLimit": 17000, "trigger": "threshold"}),
        event("session.compaction_complete", 3, {
            "success": False, "error": "Compaction Cancelled", "outcome": "cancelled", "tokenLimit": 17000,
            "trigger": "threshold", "outcomeReason": "owner_cancelled", "compactionTokensUsed": {
                "requestCount": 1, "inputTokens": 13417, "outputTokens": 8, "cacheReadTokens": 12100,
                "cacheWriteTokens": 0, "duration": 15, "model": "fake-model"}})]
    src = read_copilot(session_file(tmp_path, objs))
    assert not src.compactions and len(src.calls) == 3
    last = src.calls[-1]
    assert (last.prompt_tokens, last.completion_tokens, last.cache_read_tokens) == (13417, 8, 12100)
    assert last.request_id == ""
    assert last.prompt_unlike_file == "the summary request of a compaction that was cancelled" and last.prompt_transient
    assert any("was not applied (cancelled, threshold); its summary call is counted" in n for n in src.notes)


def test_a_background_compaction_keeps_what_the_turn_added_meanwhile(tmp_path: Path) -> None:
    """Past the threshold Copilot compacts beside the turn (``session.compaction_start`` at a turn's start, the
    complete event a turn later): the messages of the turn in between follow the summary in the next request."""
    objs = [*lines()[:4],
        event("session.compaction_start", 2, {"currentTokens": 16067, "tokenLimit": 17000, "trigger": "threshold"}),
        *lines()[4:9],
        event("session.compaction_complete", 3, {
            "success": True, "outcome": "applied", "preCompactionTokens": 10538, "postCompactionTokens": 10472,
            "summaryContent": "<overview>Ran commands.</overview>", "trigger": "threshold",
            "compactionTokensUsed": {"requestCount": 1, "inputTokens": 13417, "outputTokens": 8,
                                     "cacheReadTokens": 12100, "cacheWriteTokens": 0, "model": "fake-model"}}),
        *lines()[9:11]]
    src = read_copilot(session_file(tmp_path, objs))
    (comp,) = src.compactions
    assert (comp.trigger, comp.calls_before, comp.messages_after, comp.tokens_after) == ("auto", 1, 3, 12014)
    assert comp.cost is not None and comp.cost.request_id == "" and comp.cost.prompt_tokens == 13417
    assert [m["role"] for m in src.messages[src.live_start:]] == ["user", "assistant", "tool", "assistant"]
    assert src.messages[src.live_start + 2]["tool_call_id"] == "call_1"


def test_counted_in_usage_priced_by_model_and_a_byok_model_unpriced(tmp_path: Path) -> None:
    from engine.usage.index import UsageIndex
    from engine.usage.prices import load_table

    priced = lines()
    for obj in priced:
        if obj["type"] == "session.usage_record":
            obj["data"]["usage"]["model"] = "gpt-4o"
        elif obj["type"] == "session.compaction_complete":
            obj["data"]["compactionTokensUsed"]["model"] = "gpt-4o"
        elif obj["type"] == "session.start":
            obj["data"]["sessionId"] = "s-priced"
    write(tmp_path / ".copilot" / "session-state" / "s-priced" / "events.jsonl", priced)
    session_file(tmp_path)  # fake-model: a BYOK model no price table knows
    ix = UsageIndex(tmp_path / "usage")
    report = ix.update(home=tmp_path, env={})
    assert (report.files, report.calls) == (2, 8)  # 3 turn calls + the compaction's, in each
    rows = {r["session_id"]: r for r in ix.query("session")}
    assert {r["agent"] for r in rows.values()} == {"copilot-cli"}
    table = load_table()
    expected = sum(table.cost("gpt-4o", prompt=p, completion=c, cache_read=r, cache_write=0).usd or 0.0
                   for p, r, c in ((11931, 0, 17), (12014, 11932, 5), (12097, 5034, 5), (13536, 5034, 8)))
    assert rows["s-priced"]["cost_usd"] == pytest.approx(expected) and expected > 0
    assert rows[SID]["cost_usd"] is None  # unknown, not zero


def test_imported_with_the_tool_definitions_as_copilot_counted_them(tmp_path: Path) -> None:
    from engine.ingest import import_source

    src = read_copilot(session_file(tmp_path))
    assert src.tools_tokens == 5748 and src.prefix_label == "17 tool definitions (Copilot's toolTokenCount)"
    report = import_source(src.path, session_dir=tmp_path / "imported")
    assert (report.format, report.calls, report.reported_calls, len(report.compactions)) == ("copilot-cli", 3, 3, 1)
    assert report.inferred_prefix_tokens == 5748 and report.inferred_prefix_by == "as the agent counted them"
    assert "17 tool definitions (Copilot's toolTokenCount) (not in the file): 5748 tokens, as the agent counted " \
           "them." in report.describe()
    records = [json.loads(line) for line in (tmp_path / "imported" / "events.jsonl").read_text().splitlines()]
    assert [r["tools"] for r in records if r["type"] == "context"] == [5748] * 3  # held, never scaled


def test_a_response_in_chunks_is_one_call_placed_at_its_first_message(tmp_path: Path) -> None:
    objs = lines()[:4]
    first = assistant("chatcmpl-1", 2, text="Thinking done.")
    first["data"] |= {"chunkIndex": 0, "chunkCount": 2, "reasoningText": "let me look"}
    second = assistant("chatcmpl-1", 2, call="call_1")
    second["data"] |= {"chunkIndex": 1, "chunkCount": 2}
    objs += [first, usage("chatcmpl-1", 11931, 0, 17, 2), second, tool_done("call_1", 2)]  # the usage after a chunk
    src = read_copilot(session_file(tmp_path, objs))
    (call,) = src.calls
    assert call.message_index == 1 and src.messages[1]["reasoning_content"] == "let me look"
    assert [m["role"] for m in src.messages] == ["user", "assistant", "assistant", "tool"]
