"""engine.sources.qwen_code on lines shortened from what Qwen Code 0.24.4 wrote in the real-agent runs
(tests/agents/test_qwen_code.py): calls by response id, tool calls and results, a continued session, a manual and an
automatic compaction with their summarisation calls as their cost; fed whole and in random byte chunks; bad lines;
detection (not Claude Code, whose lines have the same keys) and Sources."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from engine.sources.detect import detect_format
from engine.sources.discovery import scan_sources
from engine.sources.formats import appended_reader
from engine.sources.qwen_code import QwenCodeReader, is_qwen_line, light_summary, read_qwen_code

SID = "705afc65-ca10-4284-b76a-8cfc653497ad"
CWD = "/tmp/qwcap/r1/work"
STATE = {"n": 0}


def line(kind: str, sec: int, **fields: Any) -> dict[str, Any]:
    """The keys every Qwen Code line has, in its order (``provenance`` as it wrote them)."""
    STATE["n"] += 1
    prov = {"user": "real_user", "assistant": "assistant_output", "tool_result": "tool_result", "system": "system"}
    return {"uuid": f"u{STATE['n']}", "parentUuid": f"u{STATE['n'] - 1}" if STATE["n"] > 1 else None,
            "sessionId": SID, "timestamp": f"2026-11-27T01:53:{sec:02d}.259Z", "type": kind,
            "provenance": prov[kind], "cwd": CWD, "version": "0.24.4", **fields}


def user(text: str, sec: int) -> dict[str, Any]:
    return line("user", sec, message={"role": "user", "parts": [{"text": text}]})


def snapshot(sec: int) -> dict[str, Any]:
    return line("system", sec, subtype="attribution_snapshot", systemPayload={"snapshot": {
        "type": "attribution-snapshot", "version": 1, "surface": "cli", "fileStates": {}, "promptCount": 1,
        "promptCountAtLastCommit": 0}})


def response(rid: str, inp: int, out: int, cached: int, sec: int, prompt: str = SID + "########0") -> dict[str, Any]:
    return line("system", sec, subtype="ui_telemetry", systemPayload={"uiEvent": {
        "event.name": "qwen-code.api_response", "event.timestamp": "2026-11-27T01:53:31.534Z", "response_id": rid,
        "model": "fake-model", "status_code": 200, "duration_ms": 208, "input_token_count": inp,
        "output_token_count": out, "cached_content_token_count": cached, "thoughts_token_count": 0,
        "total_token_count": inp + out, "prompt_id": prompt, "auth_type": "openai", "ttft_ms": 206}})


def assistant(parts: list[dict[str, Any]], inp: int, out: int, cached: int, sec: int) -> dict[str, Any]:
    return line("assistant", sec, model="fake-model", message={"role": "model", "parts": parts}, usageMetadata={
        "promptTokenCount": inp, "candidatesTokenCount": out, "thoughtsTokenCount": 0, "totalTokenCount": inp + out,
        "cachedContentTokenCount": cached})


def shell(call_id: str, command: str) -> dict[str, Any]:
    return {"functionCall": {"id": call_id, "name": "run_shell_command", "args": {"command": command}}}


def tool_event(call_id: str, rid: str, sec: int) -> dict[str, Any]:
    return line("system", sec, subtype="ui_telemetry", systemPayload={"uiEvent": {
        "event.name": "qwen-code.tool_call", "call_id": call_id, "function_name": "run_shell_command",
        "duration_ms": 120, "status": "success", "success": True, "decision": "auto_accept", "response_id": rid}})


def tool_result(call_id: str, output: str, sec: int) -> dict[str, Any]:
    return line("tool_result", sec, message={"role": "user", "parts": [{"functionResponse": {
        "id": call_id, "name": "run_shell_command", "response": {"output": f"Command: echo {output}\nOutput: "
                                                                           f"{output}\nExit Code: 0"}}}]},
        toolCallResult={"callId": call_id, "status": "success", "executionStatus": "success"})


SUMMARY = "<state_snapshot>\n<overall_goal>Print lines.</overall_goal>\n</state_snapshot>"


def compression(trigger: str, before: int, after: int, sec: int, estimated: bool) -> dict[str, Any]:
    return line("system", sec, subtype="chat_compression", systemPayload={
        "info": {"originalTokenCount": before, "newTokenCount": after, "newTokenCountIsEstimated": True,
                 "compressionStatus": 1, "triggerReason": trigger, "originalTokenCountIsEstimated": estimated},
        "compressedHistory": [{"role": "user", "parts": [{"text": SUMMARY + "\n\nResume the prior task using the "
                                                                   "summary above."}]},
                              {"role": "model", "parts": [{"text": "Got it. Thanks for the additional context!"}]}],
        "completedToolCallIds": []})


def session_lines() -> list[dict[str, Any]]:
    """A turn with a tool call, ``--continue`` with another, an automatic compaction in the middle of it (its
    summarisation call has the turn's prompt id and no assistant line), ``/compress`` (a ``compress-`` call)."""
    STATE["n"] = 0
    return [
        user("Run two commands", 31), snapshot(31),
        response("chatcmpl-a1", 18920, 12, 0, 31),
        assistant([{"text": "let me see", "thought": True}, shell("call_1", "echo step0")], 18920, 12, 0, 31),
        tool_event("call_1", "chatcmpl-a1", 31), tool_result("call_1", "step0", 31),
        response("chatcmpl-a2", 19126, 5, 19024, 32),
        assistant([{"text": "Done: 1 commands ran."}], 19126, 5, 19024, 32),
        user("Run it again", 33), snapshot(33),
        response("chatcmpl-b1", 23023, 12, 18853, 33, prompt=SID + "########2"),
        assistant([shell("call_2", "echo step0")], 23023, 12, 18853, 33),
        tool_result("call_2", "step0", 33),
        response("chatcmpl-s1", 20082, 19, 19090, 34, prompt=SID + "########2"),  # the auto summary call
        compression("token_limit", 23081, 20752, 34, estimated=True),
        response("chatcmpl-b2", 20677, 5, 0, 35, prompt=SID + "########2"),
        assistant([{"text": "Done."}], 20677, 5, 0, 35),
        response("chatcmpl-s2", 20269, 19, 19090, 36, prompt="compress-1795744416009"),  # /compress
        compression("manual", 20682, 16853, 36, estimated=False),
        user("Say done", 39),
        response("chatcmpl-c1", 19013, 3, 18853, 40, prompt=SID + "########3"),
        assistant([{"text": "done"}], 19013, 3, 18853, 40),
    ]


def write(tmp_path: Path, lines: list[dict[str, Any]], name: str = SID) -> Path:
    folder = tmp_path / ".qwen" / "projects" / CWD.replace("/", "-") / "chats"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.jsonl"
    path.write_text("".join(json.dumps(obj, separators=(",", ":")) + "\n" for obj in lines), encoding="utf-8")
    return path


def test_calls_messages_and_compactions(tmp_path: Path) -> None:
    src = read_qwen_code(write(tmp_path, session_lines()))
    assert src.skipped == [] and src.format == "qwen-code"
    assert src.ignored == {"system/attribution_snapshot": 2, "ui_telemetry/qwen-code.tool_call": 1}
    assert [c.request_id for c in src.calls] == ["chatcmpl-a1", "chatcmpl-a2", "chatcmpl-b1", "chatcmpl-b2",
                                                 "chatcmpl-c1"]
    first = src.calls[0]
    assert (first.prompt_tokens, first.completion_tokens, first.cache_read_tokens, first.cache_write_tokens) == (
        18920, 12, 0, None)
    assert all(src.messages[c.message_index]["role"] == "assistant" for c in src.calls)
    assert src.messages[1]["tool_calls"][0]["function"] == {"name": "run_shell_command",
                                                          "arguments": '{"command": "echo step0"}'}
    assert src.messages[1]["reasoning_content"] == "let me see" and src.messages[1]["content"] == ""
    assert src.messages[2]["role"] == "tool" and src.messages[2]["tool_call_id"] == "call_1"
    assert "Output: step0" in src.messages[2]["content"]
    auto, manual = src.compactions
    assert (auto.trigger, auto.trigger_source, auto.calls_before, auto.tokens_before) == ("auto", "token_limit", 3,
                                                                                          23081)
    assert auto.tokens_before_source == "estimated" and auto.tokens_after == 20677 and auto.post_tokens == 20752
    assert auto.cost is not None and (auto.cost.request_id, auto.cost.prompt_tokens) == ("chatcmpl-s1", 20082)
    assert (manual.trigger, manual.calls_before, manual.tokens_before_source) == ("manual", 4, "provider")
    assert manual.cost is not None and manual.cost.request_id == "chatcmpl-s2" and manual.tokens_after == 19013
    assert manual.summary.startswith(SUMMARY) and manual.messages_after == 2
    assert src.messages[manual.message_index]["content"].startswith(SUMMARY)
    assert src.live_start == manual.message_index
    assert [m["content"] for m in src.messages if m["role"] == "user"][-1] == "Say done"
    assert (src.session_id, src.cwd, src.project, src.model) == (SID, CWD, "work", "fake-model")
    assert any("system prompt" in n and "not in" in n for n in src.notes)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_fed_in_chunks_is_read_whole(tmp_path: Path, seed: int) -> None:
    path = write(tmp_path, session_lines())
    whole = read_qwen_code(path)
    reader = appended_reader("qwen-code", path)
    assert isinstance(reader, QwenCodeReader)
    data, at, rng = path.read_bytes(), 0, random.Random(seed)
    calls_seen = 0
    while at < len(data):
        step = rng.randint(1, 300)
        changes = reader.feed(data[at:at + step])
        assert changes.calls_from == calls_seen  # calls are only added, never taken back
        calls_seen = len(reader.session.calls)
        at += step
    chunked = reader.finish()
    assert chunked.calls == whole.calls and chunked.compactions == whole.compactions
    assert [{k: v for k, v in m.items() if k != "id"} for m in chunked.messages] == [
        {k: v for k, v in m.items() if k != "id"} for m in whole.messages]


def test_a_summary_call_is_not_a_turn_call_while_the_compaction_is_awaited(tmp_path: Path) -> None:
    lines = session_lines()
    reader = QwenCodeReader(write(tmp_path, lines))
    upto = next(i for i, obj in enumerate(lines) if obj["type"] == "system" and obj["subtype"] == "chat_compression")
    reader.feed_lines([(json.dumps(obj) + "\n").encode() for obj in lines[:upto]])
    assert [c.request_id for c in reader.session.calls] == ["chatcmpl-a1", "chatcmpl-a2", "chatcmpl-b1"]
    reader.feed_lines([(json.dumps(lines[upto]) + "\n").encode()])
    assert reader.session.compactions[0].cost is not None
    assert [c.request_id for c in reader.session.calls] == ["chatcmpl-a1", "chatcmpl-a2", "chatcmpl-b1"]


def test_a_file_without_telemetry_counts_the_usage_metadata(tmp_path: Path) -> None:
    lines = [obj for obj in session_lines() if obj.get("subtype") != "ui_telemetry"]
    src = read_qwen_code(write(tmp_path, lines))
    assert [c.prompt_tokens for c in src.calls] == [18920, 19126, 23023, 20677, 19013]
    assert all(c.request_id == "" for c in src.calls)
    assert all(c.cost is None for c in src.compactions)  # the summary calls are recorded nowhere then


def test_bad_lines_are_said_never_fatal(tmp_path: Path) -> None:
    lines = session_lines()[:8]
    path = write(tmp_path, lines)
    with path.open("a", encoding="utf-8") as fh:
        fh.write('{"uuid": "x", "type": "assistant", "message": "not an object"}\n')
        fh.write('{"uuid": "y", "type": "weird"}\n')
        fh.write('{"uuid": "z", "type": "system", "subtype": "ui_telemetry", "systemPayload": {"uiEvent": '
                 '{"event.name": "qwen-code.api_response", "input_token_count": "many"}}}\n')
        fh.write("not json\n")
        fh.write('{"uuid": "t", "type": "user", "message": {"parts": [{"text": "torn')
    src = read_qwen_code(path)
    reasons = " | ".join(s.reason for s in src.skipped)
    assert "without its message" in reasons and "'weird'" in reasons
    assert len(src.skipped) >= 4
    assert src.calls[-1].prompt_tokens is None  # a figure of the wrong type: unknown, not 0
    assert len([c for c in src.calls if c.prompt_tokens]) == 2


# real first lines, each format's: Qwen Code's look like Claude Code's (uuid, parentUuid, sessionId, type, cwd,
# version) but carry Gemini parts or a systemPayload
CLAUDE_FIRST = [
    {"parentUuid": None, "isSidechain": False, "userType": "external", "cwd": "/home/marco/projects/spotter",
     "sessionId": "55604662-cf2a-4331-851a-ec234028f8ca", "version": "2.1.38", "gitBranch": "master",
     "type": "user", "message": {"role": "user", "content": "mix phx.server doesnt seem to start"},
     "uuid": "7d48cbd2-6615-4dd8-87f6-38f12b8167d6", "timestamp": "2026-02-10T21:11:56.846Z"},
    {"parentUuid": "c06a9fe4-ba05-44f2-b619-a057c18101e5", "isSidechain": False, "userType": "external",
     "cwd": "/home/marco/projects/spotter", "sessionId": "55604662-cf2a-4331-851a-ec234028f8ca", "version": "2.1.38",
     "type": "system", "subtype": "local_command", "content": "<command-name>/model</command-name>", "level": "info",
     "timestamp": "2026-02-10T21:16:12.381Z", "uuid": "87cfd146-38ca-48ef-96f2-3c893113b511", "isMeta": False},
]


def test_detected_as_qwen_code_not_claude_code(tmp_path: Path) -> None:
    lines = session_lines()
    path = write(tmp_path, lines)
    assert detect_format(path) == "qwen-code"
    assert all(is_qwen_line(obj) for obj in lines)
    claude = tmp_path / "claude.jsonl"
    claude.write_text("".join(json.dumps(obj) + "\n" for obj in CLAUDE_FIRST), encoding="utf-8")
    assert detect_format(claude) == "claude-code"
    assert not any(is_qwen_line(obj) for obj in CLAUDE_FIRST)
    only_system = write(tmp_path, [lines[1], lines[2]], name="sys")  # a file whose first lines are system ones
    assert detect_format(only_system) == "qwen-code"


def test_listed_in_sources(tmp_path: Path) -> None:
    path = write(tmp_path, session_lines())
    found = light_summary(path)
    assert (found.calls, found.last_prompt, found.title, found.model, found.cwd) == (
        5, 19013, "Run two commands", "fake-model", CWD)
    entries = scan_sources(env={"HOME": str(tmp_path)}, home=tmp_path, index=tmp_path / "idx.json")
    (entry,) = [e for e in entries if e.agent == "qwen-code"]
    assert (entry.project, entry.session_id, entry.calls, entry.title) == ("work", SID, 5, "Run two commands")
    assert entry.started.startswith("2026-11-27T01:53:31")


def test_followed_while_written(tmp_path: Path) -> None:
    """A follower reports each call once with its exact figures, and each compaction with its cost, as the lines
    are appended (the format detected from the first lines)."""
    from engine.sources.follow import Follower

    lines = session_lines()
    path = write(tmp_path, lines[:2])
    follower = Follower(path)
    events = follower.poll()
    for obj in lines[2:]:
        with path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(obj) + "\n")
        events += follower.poll()
    assert follower.format == "qwen-code"
    calls = [e.call for e in events if e.kind == "call" and e.call is not None]
    comps = [e.compaction for e in events if e.kind == "compaction" and e.compaction is not None]
    whole = read_qwen_code(path)
    assert sorted({c.request_id for c in calls}) == sorted(c.request_id for c in whole.calls)
    assert {c.request_id: c.prompt_tokens for c in calls} == {c.request_id: c.prompt_tokens for c in whole.calls}
    assert {c.index for c in comps} == {0, 1}
    assert all(c.cost is not None for c in comps)


def test_priced_by_model_name_and_unknown_without_a_price(tmp_path: Path) -> None:
    """The usage index prices every call (the summary calls as compaction calls) from the model's name; a model
    without a price is an unknown cost (None), never zero."""
    from engine.sources.discovery import SourceEntry
    from engine.usage.costs import price_table
    from engine.usage.index import rows_of

    table = price_table()
    if table is None:
        pytest.skip("litellm's price table is not installed")

    def rows(model: str) -> list[dict[str, Any]]:
        text = json.dumps(session_lines()).replace('"fake-model"', json.dumps(model))
        src = read_qwen_code(write(tmp_path, json.loads(text), name=model))
        entry = SourceEntry(agent="qwen-code", path=str(src.path), session_id=src.session_id, project="p",
                            started="", last_activity="", calls=0, last_prompt_tokens=None, window=None,
                            percent_full=None)
        return rows_of(entry, src, table, "f").calls

    unpriced = rows("fake-model")
    assert len(unpriced) == 7 and [r["kind"] for r in unpriced].count("compaction") == 2
    assert all(r["cost_usd"] is None for r in unpriced)
    priced = rows("gpt-4o-mini")
    assert all(isinstance(r["cost_usd"], float) and r["cost_usd"] > 0 for r in priced)


def test_a_subagents_calls_are_its_own(tmp_path: Path) -> None:
    """An api_response event naming a ``subagent_id`` (shortened from a real run) is that subagent's call, linked to
    the ``agent`` tool call, and not one of the main session's."""
    lines = session_lines()[:8]
    args = {"description": "Echo things", "prompt": "Run echo sub", "subagent_type": "general-purpose"}
    call = assistant([{"functionCall": {"id": "call_f839", "name": "agent", "args": args}}], 18921, 27, 0, 41)
    sub = response("chatcmpl-sub1", 15403, 12, 9, 42, prompt=SID + "#general-purpose-call_f839#1")
    sub["systemPayload"]["uiEvent"].update({
        "subagent_name": "general-purpose", "subagent_id": "general-purpose-call_f839",
        "subagent_type": "general-purpose", "subagent_task_name": "Echo things"})
    src = read_qwen_code(write(tmp_path, [*lines, response("chatcmpl-m3", 18921, 27, 0, 41), call, sub]))
    assert [c.request_id for c in src.calls] == ["chatcmpl-a1", "chatcmpl-a2", "chatcmpl-m3"]
    (ref,) = src.subagents
    assert (ref.id, ref.kind, ref.parent_tool_call_id, ref.path) == ("general-purpose-call_f839", "task", "call_f839",
                                                                     None)
    assert ref.session is not None and [(c.request_id, c.prompt_tokens) for c in ref.session.calls] == [
        ("chatcmpl-sub1", 15403)]


AGENT_ID = "general-purpose-call_f839"


def sub_response(rid: str, inp: int, out: int, cached: int, sec: int, round_: int) -> dict[str, Any]:
    """A subagent's call as the main file logs it: an api_response event naming its ``subagent_id``."""
    event = response(rid, inp, out, cached, sec, prompt=f"{SID}#{AGENT_ID}#{round_}")
    event["systemPayload"]["uiEvent"].update({"subagent_name": "general-purpose", "subagent_id": AGENT_ID,
                                              "subagent_type": "general-purpose", "subagent_task_name": "Echo things"})
    return event


def delegating_lines() -> list[dict[str, Any]]:
    """The main file of a run that delegates once (shortened from the real-agent run): the ``agent`` call, its
    result, the main's answer, the subagent's three calls as events, the task notification and the last answer."""
    lines = session_lines()[:8]
    args = {"description": "Echo things", "prompt": "Run echo sub", "subagent_type": "general-purpose"}
    call = assistant([{"functionCall": {"id": "call_f839", "name": "agent", "args": args}}], 18935, 27, 0, 41)
    launched = line("tool_result", 41, message={"role": "user", "parts": [{"functionResponse": {
        "id": "call_f839", "name": "agent", "response": {"output": "Background agent launched successfully."}}}]})
    notice = line("user", 45, subtype="notification", message={"role": "user", "parts": [
        {"text": f"<task-notification>\n<task-id>{AGENT_ID}</task-id>\n<status>completed</status>"}]})
    return [*lines, response("chatcmpl-m3", 18935, 27, 0, 41), call, launched,
            response("chatcmpl-m4", 19308, 2, 18936, 42), assistant([{"text": "Delegated."}], 19308, 2, 18936, 42),
            sub_response("chatcmpl-s1", 15417, 12, 9, 43, 0), sub_response("chatcmpl-s2", 15520, 12, 15419, 44, 1),
            sub_response("chatcmpl-s3", 15622, 5, 15521, 44, 2), notice,
            response("chatcmpl-m5", 19495, 2, 9, 45), assistant([{"text": "Delegated."}], 19495, 2, 9, 45)]


def sub_line(kind: str, sec: int, **fields: Any) -> dict[str, Any]:
    return line(kind, sec, agentId=AGENT_ID, agentName="general-purpose", isSidechain=True, **fields)


def sub_usage(parts: list[dict[str, Any]], inp: int, out: int, cached: int, sec: int) -> dict[str, Any]:
    return sub_line("assistant", sec, message={"role": "model", "parts": parts}, usageMetadata={
        "promptTokenCount": inp, "candidatesTokenCount": out, "thoughtsTokenCount": 0, "totalTokenCount": inp + out,
        "cachedContentTokenCount": cached}, agentRunId="c02987db", agentRound=1)


def subagent_file_lines() -> list[dict[str, Any]]:
    """The subagent's own file (shortened from the real run): its prompt; each round a usage line without parts,
    then its function call (no usage) and the result; the last round's text with its usage."""
    STATE["n"] = 100
    result = [tool_result(f"call_s{i}", f"step{i}", 44) for i in range(2)]
    for res in result:
        res.update(agentId=AGENT_ID, agentName="general-purpose", isSidechain=True)
    return [sub_line("user", 43, message={"role": "user", "parts": [{"text": "Run echo sub"}]}),
            sub_usage([], 15417, 12, 9, 43), sub_line("assistant", 43, message={"role": "model", "parts": [
                shell("call_s0", "echo step0")]}), result[0],
            sub_usage([], 15520, 12, 15419, 44), sub_line("assistant", 44, message={"role": "model", "parts": [
                shell("call_s1", "echo step1")]}), result[1],
            sub_usage([{"text": "Done: 2 commands ran."}], 15622, 5, 15521, 44)]


def write_subagent(main: Path, lines: list[dict[str, Any]], tool_use_id: str = "call_f839") -> Path:
    folder = main.parent.parent / "subagents" / SID
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"agent-{AGENT_ID}.jsonl"
    path.write_text("".join(json.dumps(obj) + "\n" for obj in lines), encoding="utf-8")
    (folder / f"agent-{AGENT_ID}.meta.json").write_text(json.dumps({
        "agentId": AGENT_ID, "agentType": "general-purpose", "parentSessionId": SID, "toolUseId": tool_use_id,
        "status": "completed"}), encoding="utf-8")
    return path


def test_a_subagents_messages_come_from_its_own_file(tmp_path: Path) -> None:
    """Its messages from ``subagents/<session>/agent-<id>.jsonl``, its calls the main file's events (exact by response
    id) placed at its rounds; counted once: never the main session's, never its file's usage lines again."""
    main = write(tmp_path, delegating_lines())
    file = write_subagent(main, subagent_file_lines(), tool_use_id="call_f839")
    src = read_qwen_code(main)
    assert src.skipped == []
    assert [c.request_id for c in src.calls] == ["chatcmpl-a1", "chatcmpl-a2", "chatcmpl-m3", "chatcmpl-m4",
                                                 "chatcmpl-m5"]
    (ref,) = src.subagents
    assert (ref.id, ref.kind, ref.path, ref.parent_tool_call_id, ref.problem) == (AGENT_ID, "task", file, "call_f839",
                                                                                 "")
    child = ref.session
    assert child is not None and child.skipped == []
    assert [(m["role"], m["content"][:12], [c["function"]["arguments"] for c in m.get("tool_calls", [])])
            for m in child.messages] == [
        ("user", "Run echo sub", []), ("assistant", "", ['{"command": "echo step0"}']),
        ("tool", "Command: ech", []), ("assistant", "", ['{"command": "echo step1"}']),
        ("tool", "Command: ech", []), ("assistant", "Done: 2 comm", [])]  # no empty message for a usage line
    assert [(c.request_id, c.prompt_tokens, c.message_index) for c in child.calls] == [
        ("chatcmpl-s1", 15417, 1), ("chatcmpl-s2", 15520, 3), ("chatcmpl-s3", 15622, 5)]
    assert "3 of 3 call(s) placed" in child.notes[0]
    (launched,) = [m for m in src.messages if m.get("tool_call_id") == "call_f839"]
    assert launched["subagent"] == {"id": AGENT_ID}
    from engine.ingest import import_source

    report = import_source(main, session_dir=tmp_path / "imported")
    assert [(s["calls"], s["messages"]) for s in report.subagents] == [(3, 6)]
    from engine.sources.session_summary import summarize

    assert summarize("qwen-code", main).subagents == 1  # Sources counts it with its session


def test_a_subagent_file_no_event_names_has_its_own_calls(tmp_path: Path) -> None:
    """A subagent file without events in the main file (no telemetry): its calls are its usage lines, said so."""
    main = write(tmp_path, [x for x in delegating_lines() if "subagent_id" not in json.dumps(x)])
    write_subagent(main, subagent_file_lines())
    (ref,) = read_qwen_code(main).subagents
    assert ref.session is not None and ref.parent_tool_call_id == "call_f839"  # from the meta file
    assert [(c.request_id, c.prompt_tokens, c.message_index) for c in ref.session.calls] == [
        ("", 15417, 1), ("", 15520, 3), ("", 15622, 5)]
    assert "no api_response event" in ref.session.notes[0]


def test_a_subagent_followed_as_its_files_grow(tmp_path: Path) -> None:
    """Followed: its file read for what was appended at each read_beside; its calls switch to the main file's
    events when they come (never both); a call whose figures differ from its file's round is put after the last
    message."""
    lines = delegating_lines()
    cut = next(i for i, x in enumerate(lines) if "subagent_id" in json.dumps(x))
    main = write(tmp_path, lines[:cut])
    sub_lines = subagent_file_lines()
    file = write_subagent(main, sub_lines[:4])
    reader = QwenCodeReader(main)
    reader.feed(main.read_bytes())
    (ref,) = reader.read_beside().subagents
    assert ref.session is not None and len(ref.session.messages) == 3
    assert [c.request_id for c in ref.session.calls] == [""]  # its file's, until an event names it
    before = main.stat().st_size
    with main.open("ab") as fh:
        fh.write(b"".join(json.dumps(x).encode() + b"\n" for x in lines[cut:]))
    with file.open("ab") as fh:
        fh.write(b"".join(json.dumps(x).encode() + b"\n" for x in sub_lines[4:]))
    reader.feed(main.read_bytes()[before:])
    src = reader.read_beside()
    assert src.subagents == [ref] and len(ref.session.messages) == 6
    assert [c.request_id for c in ref.session.calls] == ["chatcmpl-s1", "chatcmpl-s2", "chatcmpl-s3"]
    assert [c.request_id for c in src.calls][-1] == "chatcmpl-m5"
    ref.session.calls[2].completion_tokens = 99  # not the round's figures: not placed there
    reader.read_beside()
    assert ref.session.calls[2].message_index == 6 and "2 of 3 call(s) placed" in ref.session.notes[0]
