"""engine.sources.claude_code over every real Claude Code session: calls, chain, compaction, subagents,
persisted output — each checked against the raw file's own figures."""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path

import pytest

from engine.model.messages import content_text
from engine.sources.claude_code import read_claude_code
from tests.engine.sources.conftest import (
    BIG_CLAUDE,
    CLAUDE,
    PERSISTED_CLAUDE,
    claude_files,
    claude_subagent_files,
    lines,
    raw_claude_calls,
)


def test_the_real_sessions_are_there() -> None:
    assert len(claude_files()) == 5 and len(claude_subagent_files()) == 4


@pytest.mark.parametrize("path", claude_files() + claude_subagent_files(), ids=lambda p: p.name)
def test_calls_and_prompts_equal_the_raw_figures(path: Path) -> None:
    raw = raw_claude_calls(path)
    src = read_claude_code(path, subagents=False)
    assert len(src.calls) == len(raw) > 0
    assert [c.prompt_tokens for c in src.calls] == [r["prompt"] for r in raw]
    assert [c.completion_tokens for c in src.calls] == [r["output"] for r in raw]
    assert [c.cache_read_tokens for c in src.calls] == [r["read"] for r in raw]
    assert [c.cache_write_tokens for c in src.calls] == [r["write"] for r in raw]
    assert [c.model for c in src.calls] == [r["model"] for r in raw]
    assert src.skipped == []


@pytest.mark.parametrize("path", claude_files(), ids=lambda p: p.name)
def test_one_assistant_message_per_response_and_tool_results_follow_their_calls(path: Path) -> None:
    src = read_claude_code(path)
    assistants = [m for m in src.messages if m["role"] == "assistant"]
    assert len(assistants) == len(raw_claude_calls(path))  # every response is on the conversation here
    assert src.off_chain == 0
    called: set[str] = set()
    for msg in src.messages:
        called.update(c["id"] for c in msg.get("tool_calls") or [])
        if msg["role"] == "tool":
            assert msg["tool_call_id"] in called
    raw_results = {b["tool_use_id"] for o in lines(path) if o.get("type") == "user"
                   and isinstance(o["message"]["content"], list) for b in o["message"]["content"]
                   if b.get("type") == "tool_result"}
    assert {m["tool_call_id"] for m in src.messages if m["role"] == "tool"} == raw_results


def test_tool_use_result_copies_are_never_counted() -> None:
    src = read_claude_code(BIG_CLAUDE)
    assert not any("toolUseResult" in m for m in src.messages)
    raw = next(o for o in lines(BIG_CLAUDE) if isinstance(o.get("toolUseResult"), dict)
               and isinstance(o["toolUseResult"].get("oldString"), str) and len(o["toolUseResult"]["oldString"]) > 200)
    block = raw["message"]["content"][0]
    msg = next(m for m in src.messages if m.get("tool_call_id") == block["tool_use_id"])
    assert msg["content"] == block["content"]  # what the model saw, not the richer copy
    assert raw["toolUseResult"]["oldString"] not in msg["content"]


@pytest.mark.parametrize("path", [BIG_CLAUDE, PERSISTED_CLAUDE], ids=lambda p: p.name)
def test_the_chain_is_followed_across_the_compaction(path: Path) -> None:
    raw = lines(path)
    b = next(i for i, o in enumerate(raw) if o.get("subtype") == "compact_boundary")
    boundary = raw[b]
    summary_line = next(o for o in raw[b:] if o.get("isCompactSummary"))
    src = read_claude_code(path)
    assert len(src.compactions) == 1
    comp = src.compactions[0]
    assert comp.trigger == boundary["compactMetadata"]["trigger"] == "auto"
    assert comp.tokens_before == boundary["compactMetadata"]["preTokens"]
    calls = raw_claude_calls(path)
    first_after = next(c for c in calls if c["line"] > b)
    assert comp.tokens_after == first_after["prompt"]
    assert comp.calls_before == sum(1 for c in calls if c["line"] < b)
    assert comp.summary == summary_line["message"]["content"] and len(comp.summary) > 1000
    # before the boundary: the archived dialog; after it: the live context, summary not repeated in it
    assert 0 < comp.message_index == src.live_start < len(src.messages)
    first_user = next(o for o in raw if o.get("type") == "user" and isinstance(o["message"]["content"], str))
    assert content_text(src.messages[0]["content"]) == first_user["message"]["content"]
    assert all(comp.summary != m.get("content") for m in src.messages)
    last_raw = next(o for o in reversed(raw) if o.get("type") == "assistant")
    last_text = [b["text"] for b in last_raw["message"]["content"] if b["type"] == "text"]
    assert last_text and last_text[-1] in (src.messages[-1]["content"] or "")


@pytest.mark.parametrize("path", [BIG_CLAUDE, PERSISTED_CLAUDE], ids=lambda p: p.name)
def test_subagent_sessions_and_the_compaction_cost(path: Path) -> None:
    raw = lines(path)
    links = {o["data"]["agentId"]: o["parentToolUseID"] for o in raw
             if o.get("type") == "progress" and o["data"].get("type") == "agent_progress"}
    src = read_claude_code(path)
    tasks = [s for s in src.subagents if s.kind == "task"]
    folder = path.with_suffix("") / "subagents"
    files = sorted(p for p in folder.glob("agent-*.jsonl") if not p.name.startswith("agent-acompact"))
    assert [s.id for s in tasks] == [p.stem.removeprefix("agent-") for p in files] == list(links)
    for sub, file in zip(tasks, files, strict=True):
        assert sub.parent_tool_call_id == links[sub.id]
        assert sub.session is not None
        assert [c.prompt_tokens for c in sub.session.calls] == [c["prompt"] for c in raw_claude_calls(file)]
        linked = [m for m in src.messages if m.get("subagent", {}).get("id") == sub.id]
        assert len(linked) == 1 and linked[0]["tool_call_id"] == links[sub.id]
    acompact = next(folder.glob("agent-acompact-*.jsonl"))
    (cost,) = raw_claude_calls(acompact)
    comp = src.compactions[0]
    assert comp.cost is not None
    # 2.1.39 wrote only the first line of the summary's response: its output figure is the streaming placeholder,
    # kept as such; the output itself is unknown (issue 27)
    assert (comp.cost.prompt_tokens, comp.cost.completion_placeholder) == (cost["prompt"], cost["output"])
    assert comp.cost.completion_tokens is None


def test_a_missing_subagent_file_is_reported_not_fatal() -> None:
    src = read_claude_code(CLAUDE / "subagent.jsonl")  # its subagents folder was not published
    (missing,) = src.subagents
    assert missing.path is None and "missing" in missing.problem
    assert any("agent-" in s.reason and "missing" in s.reason for s in src.skipped)
    assert len(src.calls) == len(raw_claude_calls(CLAUDE / "subagent.jsonl"))
    # its calls, streamed into this file as progress records, are the subagent's (no messages): counted once
    assert missing.session is not None and not missing.session.messages
    assert "5 call(s) are read from the progress records" in missing.problem
    calls = missing.session.calls
    assert len(calls) == len({c.request_id for c in calls}) == 5
    assert all(c.model == "claude-haiku-4-5-20251001" and c.prompt_tokens for c in calls)
    assert calls[0].prompt_tokens == 2 + 2398 + 15584 and calls[0].cache_write_1h_tokens == 2398
    assert not {c.request_id for c in calls} & {c.request_id for c in src.calls}


def test_progress_calls_a_subagent_file_holds_are_not_counted_twice() -> None:
    src = read_claude_code(BIG_CLAUDE)  # 12 of its subagent's calls are streamed into the parent file too
    (task,) = [s for s in src.subagents if s.kind == "task"]
    assert task.session is not None and task.path is not None
    ids = [c.request_id for c in task.session.calls]
    assert len(ids) == len(set(ids)) == len(raw_claude_calls(task.path))


def test_persisted_output_is_linked_to_its_file_when_it_is_there(tmp_path: Path) -> None:
    copy = tmp_path / PERSISTED_CLAUDE.name
    shutil.copyfile(PERSISTED_CLAUDE, copy)
    src = read_claude_code(copy, subagents=False)
    (off,) = src.offloaded
    assert off.local_path is None and "tool-results" in off.stated_path
    assert any(off.tool_call_id in n and "not in" in n for n in src.notes)
    results = tmp_path / copy.stem / "tool-results"
    results.mkdir(parents=True)
    (results / f"{off.tool_call_id}.txt").write_text("full output\n" * 1000, encoding="utf-8")
    src = read_claude_code(copy, subagents=False)
    (off,) = src.offloaded
    assert off.local_path == results / f"{off.tool_call_id}.txt" and off.size == 12000
    assert src.messages[off.message_index]["tool_call_id"] == off.tool_call_id
    assert "<persisted-output>" in src.messages[off.message_index]["content"]


def test_window_follows_the_model() -> None:
    src = read_claude_code(CLAUDE / "short.jsonl")
    assert src.window == 200_000 and src.model == "claude-opus-4-6"
    assert src.prefix_label == "system prompt and tool definitions"


def test_subagent_files_beside_the_session_as_older_versions_kept_them(tmp_path: Path) -> None:
    shutil.copyfile(BIG_CLAUDE, tmp_path / BIG_CLAUDE.name)
    agent = next((BIG_CLAUDE.with_suffix("") / "subagents").glob("agent-a[0-9]*.jsonl"))
    shutil.copyfile(agent, tmp_path / agent.name)
    src = read_claude_code(tmp_path / BIG_CLAUDE.name)
    (sub,) = src.subagents
    assert sub.path == tmp_path / agent.name and sub.session is not None
    assert [c.prompt_tokens for c in sub.session.calls] == [c["prompt"] for c in raw_claude_calls(agent)]
    assert src.skipped == []


def test_a_summary_without_its_boundary_line_is_still_a_compaction(tmp_path: Path) -> None:
    raw = lines(PERSISTED_CLAUDE)
    b = next(i for i, o in enumerate(raw) if o.get("subtype") == "compact_boundary")
    summary = raw[b + 1]
    summary["parentUuid"] = None  # as older versions started the continued session
    path = tmp_path / "continued.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in raw[b + 1:]), encoding="utf-8")
    src = read_claude_code(path, subagents=False)
    (comp,) = src.compactions
    assert comp.summary == summary["message"]["content"] and comp.trigger == "unknown"
    assert comp.tokens_before is None and comp.message_index == 0 == src.live_start
    assert comp.tokens_after == raw_claude_calls(path)[0]["prompt"]


def _line(kind: str, uid: str, parent: str | None, **extra: object) -> dict[str, object]:
    return {"type": kind, "uuid": uid, "parentUuid": parent, "sessionId": "s", "isSidechain": False,
            "timestamp": f"2026-02-01T10:00:{len(uid):02d}.000Z", **extra}


def _answer(uid: str, parent: str, msg_id: str, prompt: int, text: str) -> dict[str, object]:
    usage = {"input_tokens": 5, "cache_creation_input_tokens": 10, "cache_read_input_tokens": prompt - 15,
             "output_tokens": 7}
    return _line("assistant", uid, parent, requestId=f"req-{msg_id}", message={
        "id": msg_id, "model": "claude-sonnet-4-5", "role": "assistant", "usage": usage,
        "content": [{"type": "text", "text": text}]})


def test_two_compactions_manual_then_auto(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [
        _line("user", "u1", None, message={"role": "user", "content": "first task"}),
        _answer("a1", "u1", "m1", 20_000, "done one"),
        _line("system", "b1", None, subtype="compact_boundary", logicalParentUuid="a1",
              compactMetadata={"trigger": "manual", "preTokens": 20_100}),
        _line("user", "s1", "b1", isCompactSummary=True, message={"role": "user", "content": "SUMMARY ONE"}),
        _line("user", "u2", "s1", message={"role": "user", "content": "second task"}),
        _answer("a2", "u2", "m2", 9_000, "done two"),
        _line("system", "b2", None, subtype="compact_boundary", logicalParentUuid="a2",
              compactMetadata={"trigger": "auto", "preTokens": 9_100}),
        _line("user", "s2", "b2", isCompactSummary=True, message={"role": "user", "content": "SUMMARY TWO"}),
        _line("user", "u3", "s2", message={"role": "user", "content": "third task"}),
        _answer("a3", "u3", "m3", 7_000, "done three"),
    ]
    path = tmp_path / "two.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    src = read_claude_code(path)
    assert [(c.trigger, c.tokens_before, c.tokens_after, c.summary) for c in src.compactions] == [
        ("manual", 20_100, 9_000, "SUMMARY ONE"), ("auto", 9_100, 7_000, "SUMMARY TWO")]
    assert [m["content"] for m in src.messages] == ["first task", "done one", "second task", "done two",
                                                   "third task", "done three"]
    assert src.live_start == 4 and [c.calls_before for c in src.compactions] == [1, 2]
    from app import cli

    assert cli.main(["import", str(path), "--session", str(tmp_path / "out"), "--no-model-info"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["archived_messages"] == 4 and report["live_messages"] == 2
    events = [json.loads(x) for x in (tmp_path / "out" / "events.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [(e["type"], e.get("provider_prompt_tokens"), e.get("trigger")) for e in events] == [
        ("context", 20_000, None), ("compaction", None, "manual"), ("context", 9_000, None),
        ("compaction", None, "auto"), ("context", 7_000, None)]
    summaries = [e["summary"] for e in events if e["type"] == "context"]
    assert summaries[0] == 0 and summaries[1] > 0 and summaries[2] > 0  # the summary region after each
    assert [e["messages_compacted"] for e in events if e["type"] == "compaction"] == [2, 2]


@pytest.mark.parametrize("path", [BIG_CLAUDE, PERSISTED_CLAUDE], ids=lambda p: p.name[:8])
def test_a_boundary_naming_a_missing_message_is_placed_by_file_order(path: Path, tmp_path: Path) -> None:
    raw = lines(path)
    whole = read_claude_code(path, subagents=False)
    b = next(i for i, o in enumerate(raw) if o.get("subtype") == "compact_boundary")
    raw[b]["logicalParentUuid"] = "0000dead-0000-0000-0000-000000000000"  # not a line of the file
    broken = tmp_path / path.name
    broken.write_text("".join(json.dumps(o) + "\n" for o in raw), encoding="utf-8")
    src = read_claude_code(broken, subagents=False)
    (comp,) = src.compactions
    (orig,) = whole.compactions
    assert comp.placed_by == "file order" and orig.placed_by == "chain"
    assert comp.calls_before == orig.calls_before > 0
    assert comp.message_index == orig.message_index == src.live_start > 0
    assert [c.prompt_tokens for c in src.calls] == [c.prompt_tokens for c in whole.calls]
    assert any("placed by file order" in n for n in src.notes)


def _today(uid: str, parent: str | None, kind: str, **extra: object) -> dict[str, object]:
    return {"type": kind, "uuid": uid, "parentUuid": parent, "sessionId": "s", "isSidechain": False,
            "timestamp": f"2026-11-25T10:00:{len(uid):02d}.000Z", "version": "2.1.328", **extra}


def _request_lines(req: str, shape: str, max_tokens: int) -> list[dict[str, object]]:
    return [
        {"type": "api-request-shape", "sessionId": "s", "shapeHash": shape, "shape": {
            "system": [{"type": "text", "text": "You are an agent."}, {"type": "text", "text": "Be brief."}],
            "tools": [{"name": "Bash", "description": "run a command " * 40, "input_schema": {"type": "object"}},
                      {"name": "mcp__files__read", "description": "read", "input_schema": {"type": "object"}}]}},
        {"type": "api-request-blob", "sessionId": "s", "hash": "h1", "message": {"role": "system", "content": "x"}},
        {"type": "api-request", "sessionId": "s", "id": req, "shapeHash": shape,
         "params": {"model": "claude-opus-5-5", "max_tokens": max_tokens}, "tail": ["h1"]},
    ]


def test_request_shapes_attachments_and_cost_state(tmp_path: Path) -> None:
    usage = {"input_tokens": 3, "cache_creation_input_tokens": 100, "cache_read_input_tokens": 900, "output_tokens": 9}
    rows = [
        {"type": "queue-operation", "operation": "enqueue", "sessionId": "s"},
        _today("u1", None, "user", message={"role": "user", "content": "hello"}),
        _today("t1", "u1", "attachment", attachment={"type": "skill_listing"}, renderedRole="system",
               rendered=[{"content": "<system-reminder>skills: a, b</system-reminder>"}]),
        _today("t2", "t1", "attachment", attachment={"type": "prompt_snapshot", "systemPrompt": ["x"]}),
        *_request_lines("r1", "S1", 64_000),
        {"type": "atis-latch", "atis": "", "sessionId": "s"},
        _today("a1", "t2", "assistant", requestRef="r1", message={
            "id": "m1", "model": "claude-opus-5-5", "role": "assistant", "usage": usage,
            "content": [{"type": "text", "text": "hi"}]}),
        {"type": "cost-state", "sessionId": "s", "totalCostUSD": 0.25,
         "modelUsage": {"claude-opus-5-5": {"inputTokens": 3, "outputTokens": 9, "cacheReadInputTokens": 900,
                                            "cacheCreationInputTokens": 100, "costUSD": 0.25}}},
        {"type": "brand-new-record", "sessionId": "s"},
    ]
    path = tmp_path / "today.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    src = read_claude_code(path)
    (call,) = src.calls
    assert call.prompt_tokens == 1003 and call.max_tokens == 64_000 and call.prefix_key == "S1"
    prefix = src.prefixes["S1"]
    assert prefix.system == "You are an agent.\n\nBe brief." and [t["name"] for t in prefix.tools] == [
        "Bash", "mcp__files__read"]
    assert src.agent_cost_usd == 0.25 and src.agent_cost_by_model == {"claude-opus-5-5": 0.25}
    assert src.window == 1_000_000
    (att,) = [m for m in src.messages if m.get("attachment")]
    assert att["attachment"] == "skill_listing" and att["sent_as"] == "system" and "skills: a, b" in att["content"]
    assert src.ignored == {"queue-operation": 1, "attachment:prompt_snapshot": 1, "api-request-blob": 1,
                           "atis-latch": 1}
    # a record type a new version brings is not silently dropped: it is skipped, with its name
    assert [s.describe() for s in src.skipped] == [
        "line 11: record type 'brand-new-record' is not one this reader knows"]

    from engine.ingest import import_source

    report = import_source(path, session_dir=tmp_path / "out").to_json()
    assert report["prefix_source"] == "file" and report["agent_cost_usd"] == 0.25
    assert [(t["name"], t["server"]) for t in report["tool_definitions"]] == [
        ("Bash", ""), ("mcp__files__read", "files")]
    assert report["ignored"] == src.ignored and report["ignored_lines"] == 4
    (ctx,) = [json.loads(x) for x in (tmp_path / "out" / "events.jsonl").read_text().splitlines()]
    assert ctx["prefix_source"] == "file" and ctx["max_tokens"] == 64_000 and ctx["provider_prompt_tokens"] == 1003
    assert ctx["system"] > 0 and ctx["tools"] > 0


@pytest.mark.parametrize("path", claude_files() + claude_subagent_files(), ids=lambda p: p.name)
def test_every_record_kind_of_the_shared_sessions_is_known(path: Path) -> None:
    """The shared sessions (Claude Code of early 2026): every line type, system subtype and attachment type is
    one the reader reads or leaves out with a reason (the real-agent tier checks the pinned version's)."""
    from engine.sources.claude_code import KNOWN_ATTACHMENTS, KNOWN_TYPES, SYSTEM_SUBTYPES

    for raw in path.read_bytes().splitlines():
        obj = json.loads(raw)
        assert obj.get("type") in KNOWN_TYPES, obj.get("type")
        if obj.get("type") == "system":
            assert obj.get("subtype") in SYSTEM_SUBTYPES, obj.get("subtype")
        if obj.get("type") == "attachment":
            assert (obj.get("attachment") or {}).get("type") in KNOWN_ATTACHMENTS


@pytest.mark.parametrize("path", claude_files(), ids=lambda p: p.name[:12])
def test_a_line_s_parent_and_a_response_s_key_are_held_once(path: Path) -> None:
    """The reader keeps every line's parent (the chain) and every conversation line: a parent that is the line
    before is that line's uuid string, not a second copy read from the file, and the lines of one response share
    one key tuple — a followed session's reader grows by what is new, not by copies of it."""
    from engine.sources.claude_code import ClaudeCodeReader

    reader = ClaudeCodeReader(path)
    for raw in path.read_bytes().splitlines(keepends=True):
        reader.feed(raw)
    scan = reader.scan
    uids = list(scan.parents)
    linear = [(uid, before) for before, uid in itertools.pairwise(uids) if scan.parents[uid] == before]
    assert linear and all(scan.parents[uid] is before for uid, before in linear)
    keys: dict[tuple[str, str], tuple[str, str]] = {}
    for before, ln in itertools.pairwise(scan.lines):
        if ln.key is not None and ln.key == before.key:
            assert ln.key is before.key
            keys[ln.key] = ln.key
    assert keys or not scan.calls
