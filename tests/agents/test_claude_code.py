"""The real Claude Code (pinned in package.json) run headless and offline against the scripted Anthropic
Messages API server; its session files read by :mod:`engine.sources.claude_code` and imported, and every
figure checked against the server's log of what was sent and what it answered."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from engine.ingest import import_source, tool_server
from engine.model.call_meta import (
    ATTRIBUTION_KEYS,
    ITERATION_TYPES,
    MISS_WORDS,
    CacheMiss,
    CallAttribution,
    iterations_of,
)
from engine.sources.claude_code import (
    IGNORED_TYPES,
    KNOWN_ATTACHMENTS,
    KNOWN_TYPES,
    READ_ATTACHMENTS,
    READ_TYPES,
    SYSTEM_SUBTYPES,
    read_claude_code,
)
from engine.sources.claude_code_build import ROW_SOURCES
from engine.sources.discovery import SourceEntry
from engine.sources.model import SourceSession
from engine.sources.session_summary import summarize, summarize_read
from engine.usage.costs import price_table, records_cost, source_cost
from engine.usage.rows import rows_of
from tests import ccusage20
from tests.agents.conftest import AgentHome, Run, agent_bin, pinned_version, raw_lines
from tests.agents.scripted import AnthropicServer, Logged, Reply, ToolCall, last_user_text
from tests.engine.sources.test_incremental import by_line, feed_in_pieces, random_chunks, state

MODEL = "claude-opus-5-5"
BILLING_PREFIX = "x-anthropic-billing-header"


def tool_results_since_prompt(body: dict[str, Any]) -> int:
    """Tool results since the last prompt the user typed (the turn's progress)."""
    n = 0
    for msg in reversed(body.get("messages") or []):
        content = msg.get("content")
        if msg.get("role") == "user" and isinstance(content, list) and any(
                isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
            n += 1
        elif msg.get("role") in ("assistant", "system"):
            continue
        else:
            break
    return n


def script(body: dict[str, Any]) -> Reply:
    """TOOLS<n>: n Bash calls, then an answer; SUBAGENT: one Agent call (the subagent runs one Bash call);
    FILL: every answer reports a prompt near the 1M window, so Claude Code compacts by itself."""
    prompt = last_user_text(body)
    done = tool_results_since_prompt(body)
    fill = 960_000 if "FILL" in prompt else 0
    if "sub-task" in prompt:  # the subagent's own prompt
        if done < 1:
            return Reply(tool_calls=[ToolCall("Bash", {"command": "echo sub", "description": "echo"})])
        return Reply(text="Sub-task done.")
    if "SUBAGENT" in prompt and done < 1:
        return Reply(tool_calls=[ToolCall("Agent", {"description": "sub task", "subagent_type": "general-purpose",
                                                    "prompt": "Do the sub-task: run one command"})])
    wanted = next((int(w[5:]) for w in prompt.split() if w.startswith("TOOLS") and w[5:].isdigit()), 0)
    if done < wanted:
        return Reply(tool_calls=[ToolCall("Bash", {"command": f"echo step{done}", "description": "echo"})],
                     extra_prompt_tokens=fill)
    return Reply(text="All done.", extra_prompt_tokens=fill)


def claude_env(home: AgentHome, server: AnthropicServer) -> dict[str, str]:
    return {**home.base_env(), "ANTHROPIC_BASE_URL": server.base_url, "ANTHROPIC_API_KEY": "sk-ant-test",
            "IS_SANDBOX": "1", "DISABLE_TELEMETRY": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1", "DISABLE_ERROR_REPORTING": "1"}


def claude(home: AgentHome, server: AnthropicServer, *args: str) -> dict[str, Any]:
    run: Run = home.run(agent_bin("claude"), [*args, "--model", MODEL, "--dangerously-skip-permissions",
                                              "--output-format", "json"], claude_env(home, server)).check()
    return dict(json.loads(run.stdout))


def session_file(home: AgentHome) -> Path:
    files = sorted((home.home / ".claude" / "projects").glob("*/*.jsonl"))
    assert len(files) == 1, files
    return files[0]


def prompt_of(usage: dict[str, Any]) -> int:
    return int(usage["input_tokens"] + usage["cache_creation_input_tokens"] + usage["cache_read_input_tokens"])


def assert_calls_match(src: SourceSession, logged: list[Logged]) -> None:
    """One call per request the server answered, with exactly the figures it answered."""
    assert len(src.calls) == len(logged)
    for call, entry in zip(src.calls, logged, strict=True):
        assert call.prompt_tokens == prompt_of(entry.usage)
        assert call.cache_read_tokens == entry.usage["cache_read_input_tokens"]
        assert call.cache_write_tokens == entry.usage["cache_creation_input_tokens"]
        assert call.completion_tokens == entry.usage["output_tokens"]
        assert call.model == entry.body["model"]
        assert call.max_tokens == entry.body["max_tokens"]


def assert_prefix_matches(src: SourceSession, logged: list[Logged]) -> None:
    """The system prompt and tool definitions in the file are what the server received, call by call."""
    for call, entry in zip(src.calls, logged, strict=True):
        prefix = src.prefixes[call.prefix_key]
        sent = [b["text"] for b in entry.body["system"] if not b["text"].startswith(BILLING_PREFIX)]
        assert prefix.system == "\n\n".join(sent)
        assert [t["name"] for t in prefix.tools] == [t["name"] for t in entry.body["tools"]]
        assert prefix.tools == [{k: v for k, v in t.items() if k != "cache_control"} for t in entry.body["tools"]]


def assert_fed_equals_whole(path: Path) -> None:
    """The incremental reader fed what the agent appended, line by line or in byte chunks, ends where the
    whole read does."""
    whole = read_claude_code(path, subagents=False)
    for pieces in (by_line, random_chunks(3)):
        fed, _, _ = feed_in_pieces(path, pieces)
        assert state(fed) == state(whole)


def assert_every_line_known(src: SourceSession) -> None:
    """Every line of the file the pinned version wrote is of a known type, every ``system`` line of a known
    subtype and every attachment of a known type, read when it was rendered to the model and left out (with a
    reason) when not; every assistant line's attribution fields, ``usage.iterations`` types and cache-miss reason
    and every user line's ``rowSource`` known: a kind a new version adds fails here, named with the version."""
    assert src.skipped == [], [s.describe() for s in src.skipped]
    for kind in src.ignored:
        base = kind.split(":", 1)[0]
        assert base in IGNORED_TYPES or base in READ_TYPES, kind
    version = pinned_version("claude")
    read = {m.get("attachment") for m in src.messages if m.get("attachment")}
    for obj in raw_lines(Path(src.path)):
        kind = obj.get("type")
        assert kind in KNOWN_TYPES, f"a {kind!r} line of Claude Code {version} is of no known type"
        if kind == "system":
            sub = obj.get("subtype")
            assert sub in SYSTEM_SUBTYPES, f"system subtype {sub!r} of Claude Code {version} is not known"
        elif kind == "assistant":  # the per-call fields: a new attribution, iteration or miss reason fails here
            attribution = {k for k in obj if k.startswith("attribution")}
            assert attribution <= set(ATTRIBUTION_KEYS), f"{attribution} of Claude Code {version}"
            message = obj.get("message") or {}
            kinds = {it.get("type") for it in (message.get("usage") or {}).get("iterations") or []}
            assert kinds <= set(ITERATION_TYPES), f"usage.iterations types {kinds} of Claude Code {version}"
            miss = (message.get("diagnostics") or {}).get("cache_miss_reason")
            assert miss is None or miss.get("type") in MISS_WORDS, f"cache_miss_reason {miss} of {version}"
        elif kind == "user" and "rowSource" in obj:
            assert obj["rowSource"] in ROW_SOURCES, f"rowSource {obj['rowSource']!r} of Claude Code {version}"
        elif kind == "attachment":
            atype = (obj.get("attachment") or {}).get("type")
            assert atype in KNOWN_ATTACHMENTS, f"attachment type {atype!r} of Claude Code {version} is not known"
            rendered = bool(obj.get("rendered")) and obj.get("renderedRole") in ("system", "user")
            assert rendered == (atype in READ_ATTACHMENTS), f"attachment {atype!r}: rendered to the model: {rendered}"
            assert not rendered or obj.get("isSidechain") or atype in read, f"attachment {atype!r} was not read"


def test_pinned_version(agent_home: AgentHome) -> None:
    run = agent_home.run(agent_bin("claude"), ["--version"], agent_home.base_env()).check()
    assert run.stdout.split()[0] == pinned_version("claude")


def test_tool_calls_read_exactly(agent_home: AgentHome, tmp_path: Path) -> None:
    with AnthropicServer(script) as server:
        result = claude(agent_home, server, "-p", "TOOLS3 run three commands")
    main = server.calls("main")
    assert len(main) == 4 and not server.calls("summary")
    src = read_claude_code(session_file(agent_home))
    assert_every_line_known(src)
    assert_fed_equals_whole(session_file(agent_home))
    assert src.ignored  # the pinned version writes lines the reader leaves out on purpose, counted by type
    assert_calls_match(src, main)
    assert_prefix_matches(src, main)
    assert src.model == MODEL and src.window == result["modelUsage"][MODEL]["contextWindow"] == 1_000_000
    assert src.agent_cost_usd == pytest.approx(result["total_cost_usd"])
    assert src.agent_cost_by_model == pytest.approx({MODEL: result["total_cost_usd"]})
    # the Sources scan's light pass (its call lines and cost-state totals read from their named fields) and the
    # reader's pass give the same summary of the file the pinned version wrote
    light = summarize("claude-code", session_file(agent_home))
    assert light == summarize_read("claude-code", session_file(agent_home))[0]
    assert (light.calls, light.model) == (len(main), MODEL)
    assert light.agent_cost_usd == pytest.approx(result["total_cost_usd"])
    tools = [m for m in src.messages if m["role"] == "tool"]
    assert [m["content"] for m in tools] == ["step0", "step1", "step2"]
    kinds = {m.get("attachment") for m in src.messages if m.get("attachment")}
    assert {"skill_listing", "agent_listing_delta", "environment"} <= kinds

    report = import_source(session_file(agent_home), session_dir=tmp_path / "imported").to_json()
    assert report["prefix_source"] == "file" and report["skipped_lines"] == 0
    assert report["ignored_lines"] == sum(src.ignored.values()) > 0
    assert [t["name"] for t in report["tool_definitions"]] == sorted(
        [t["name"] for t in main[-1].body["tools"]],
        key=lambda n: -next(d["tokens"] for d in report["tool_definitions"] if d["name"] == n))
    assert all(t["server"] == tool_server(t["name"]) == "" for t in report["tool_definitions"])
    assert report["agent_cost_usd"] == pytest.approx(result["total_cost_usd"])
    events = [json.loads(line) for line in (tmp_path / "imported" / "events.jsonl").read_text().splitlines()]
    contexts = [e for e in events if e["type"] == "context"]
    assert [e["provider_prompt_tokens"] for e in contexts] == [prompt_of(e.usage) for e in main]
    assert {e["prefix_source"] for e in contexts} == {"file"}
    assert {e["max_tokens"] for e in contexts} == {main[0].body["max_tokens"]}
    # the prefix regions are the file's, the same on every call; the server's own count is within 25 %
    assert len({(e["system"], e["tools"]) for e in contexts}) == 1
    served = main[0].system_tokens + main[0].tools_tokens
    assert abs(contexts[0]["system"] + contexts[0]["tools"] - served) < 0.25 * served
    # ccusage 20 reads the same file to the same tokens (the cache writes given by time to live, as the API gives them)
    ccusage20.assert_same_tokens(agent_home.home, tmp_path / "usage", "claude")


def test_manual_compaction_and_cost(agent_home: AgentHome, tmp_path: Path) -> None:
    with AnthropicServer(script) as server:
        first = claude(agent_home, server, "-p", "TOOLS2 run two")
        after_compact = claude(agent_home, server, "-p", "/compact", "--continue")
        claude(agent_home, server, "-p", "TOOLS1 again", "--continue")
    summary = server.calls("summary")
    assert len(summary) == 1
    src = read_claude_code(session_file(agent_home))
    assert_every_line_known(src)
    assert_calls_match(src, server.calls("main"))
    assert_prefix_matches(src, server.calls("main"))
    assert_fed_equals_whole(session_file(agent_home))
    [comp] = src.compactions
    assert comp.trigger == "manual" and comp.placed_by == "chain"
    assert comp.messages_after == 1  # the last answer is preserved across the compaction
    assert comp.post_tokens is not None and comp.post_tokens > 0
    assert comp.calls_before == 3
    assert comp.summary.startswith("This session is being continued")
    # what compacting cost: the cost-state lines before and after the boundary
    assert comp.cost_usd == pytest.approx(after_compact["total_cost_usd"] - first["total_cost_usd"])
    assert comp.cost is not None
    assert comp.cost.prompt_tokens == prompt_of(summary[0].usage)
    assert comp.cost.completion_tokens == summary[0].usage["output_tokens"]
    kept = [m for m in src.messages[comp.message_index:] if m.get("preserved")]
    assert len(kept) == 1 and kept[0]["role"] == "assistant"

    report = import_source(session_file(agent_home), session_dir=tmp_path / "imported").to_json()
    [rec] = report["compactions"]
    assert rec["messages_kept"] == 1 and rec["post_tokens"] == comp.post_tokens
    assert rec["cost_usd"] == pytest.approx(comp.cost_usd)
    assert rec["messages_compacted"] == comp.message_index > 0


def test_auto_compaction(agent_home: AgentHome) -> None:
    with AnthropicServer(script) as server:
        claude(agent_home, server, "-p", "TOOLS2 FILL the window")
    summary = server.calls("summary")
    assert len(summary) == 1
    src = read_claude_code(session_file(agent_home))
    assert_every_line_known(src)
    assert_calls_match(src, server.calls("main"))
    assert_fed_equals_whole(session_file(agent_home))
    [comp] = src.compactions
    assert comp.trigger == "auto"
    assert comp.tokens_before is not None and comp.tokens_before > 900_000
    assert comp.calls_before == 2
    # the summarising request is not a line of the file: its tokens come from the cost-state totals
    assert comp.cost is not None and comp.cost.prompt_tokens == prompt_of(summary[0].usage)
    assert comp.cost.completion_tokens == summary[0].usage["output_tokens"]


def test_agent_subagent_linked(agent_home: AgentHome, tmp_path: Path) -> None:
    with AnthropicServer(script) as server:
        claude(agent_home, server, "-p", "SUBAGENT please")
    agent_calls = [b for e in server.calls("main") for b in [e.reply] if any(c.name == "Agent" for c in b.tool_calls)]
    assert len(agent_calls) == 1
    src = read_claude_code(session_file(agent_home))
    assert_every_line_known(src)
    [sub] = [s for s in src.subagents if s.kind == "task"]
    assert sub.session is not None and sub.problem == ""
    started = next(m for m in src.messages if m["role"] == "assistant" and any(
        c["function"]["name"] == "Agent" for c in m.get("tool_calls") or []))
    assert sub.parent_tool_call_id == started["tool_calls"][0]["id"]
    assert_every_line_known(sub.session)
    sub_requests = [e for e in server.calls("main") if "sub-task" in last_user_text(e.body)]
    assert_calls_match(sub.session, sub_requests)
    linked = [m for m in src.messages if isinstance(m.get("subagent"), dict)]
    assert [m["subagent"]["id"] for m in linked] == [sub.id]
    report = import_source(session_file(agent_home), session_dir=tmp_path / "imported").to_json()
    [entry] = report["subagents"]
    assert entry["parent_tool_call_id"] == sub.parent_tool_call_id and entry["calls"] == len(sub_requests)


# ---------------------------------------------------------------- 2.1.332's per-call fields (issue 30)
ITERATION = {"type": "compaction", "input_tokens": 5000, "output_tokens": 300, "cache_creation_input_tokens": 0,
             "cache_read_input_tokens": 0}
MISS = {"type": "tools_changed", "cache_missed_input_tokens": 1234}
SKILL = "greet"
MCP_SERVER = Path(__file__).with_name("mcp_echo.py")


def tool_uses(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The request's tool calls, in order (every assistant message's ``tool_use`` blocks)."""
    return [b for m in body.get("messages") or [] if m.get("role") == "assistant" and isinstance(m.get("content"), list)
            for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_use"]


def meta_script(body: dict[str, Any]) -> Reply:
    """EXPLORE: the Skill tool (skill ``greet``), the MCP tool ``mcp__echo__say``, an Agent (its subagent runs one
    Bash call), then an answer. The answer to the skill's result reports a server-side compaction iteration billed
    beside the usage; the answer to the MCP result a cache miss (tools_changed) with the tokens it cost."""
    if "sub-task" in last_user_text(body):
        return script(body)
    if "EXPLORE" not in json.dumps(body.get("messages")):
        return Reply(text="Hi.")
    done = len(tool_uses(body))
    steps = [ToolCall("Skill", {"skill": SKILL}), ToolCall("mcp__echo__say", {"word": "hi"}),
             ToolCall("Agent", {"description": "sub task", "subagent_type": "general-purpose",
                                "prompt": "Do the sub-task: run one command"})]
    if done >= len(steps):
        return Reply(text="All done.")
    return Reply(tool_calls=[steps[done]], iterations=[ITERATION] if done == 1 else None,
                 cache_miss=MISS if done == 2 else None)


def meta_home(home: AgentHome) -> list[str]:
    """A skill in the home, and the MCP server's arguments for ``claude``."""
    skill = home.home / ".claude" / "skills" / SKILL
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(f"---\nname: {SKILL}\ndescription: Greet the user politely\n---\nSay hello.\n")
    config = {"mcpServers": {"echo": {"command": sys.executable, "args": [str(MCP_SERVER)]}}}
    return ["--mcp-config", json.dumps(config)]


def turn_tool_uses(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool calls of the request's turn: those after its last user message holding no tool result (a typed
    prompt, or a task's notification, starts a turn; a skill's text comes with its tool result)."""
    start = 0
    for i, msg in enumerate(body.get("messages") or []):
        content = msg.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        if msg.get("role") == "user" and not any(isinstance(b, dict) and b.get("type") == "tool_result"
                                                 for b in blocks):
            start = i
    return tool_uses({"messages": (body.get("messages") or [])[start:]})


def expected_attribution(entry: Logged) -> CallAttribution | None:
    """What the log says a call worked for: the skill launched in its turn, the MCP tool whose result it answers
    (the last tool call)."""
    uses = tool_uses(entry.body)
    skill = SKILL if any(u["name"] == "Skill" for u in turn_tool_uses(entry.body)) else ""
    last = uses[-1]["name"] if uses else ""
    server, tool = (last.split("__")[1], last.split("__")[2]) if last.startswith("mcp__") else ("", "")
    attribution = CallAttribution(skill=skill, mcp_server=server, mcp_tool=tool)
    return attribution if attribution != CallAttribution() else None


def test_attribution_cache_miss_iterations_dropped_tokens_and_row_source(agent_home: AgentHome,
                                                                        tmp_path: Path) -> None:
    extra = meta_home(agent_home)
    with AnthropicServer(meta_script) as server:
        claude(agent_home, server, "-p", "EXPLORE greet, echo, delegate", *extra)
        claude(agent_home, server, "-p", "/compact", "--continue", *extra)
        claude(agent_home, server, "-p", "say hi", "--continue", *extra)
        claude(agent_home, server, "-p", "/compact", "--continue", *extra)
    path = session_file(agent_home)
    src = read_claude_code(path)
    assert_every_line_known(src)
    assert_fed_equals_whole(path)
    logged = server.calls("main")
    sub_requests = [e for e in logged if "sub-task" in last_user_text(e.body)]
    main = [e for e in logged if e not in sub_requests]
    assert_calls_match(src, main)  # usage per call equal to what the server answered
    assert len(server.calls("summary")) == 2
    # attribution: the skill, the MCP server and tool as the log says the call worked for them
    assert [c.attribution for c in src.calls] == [expected_attribution(e) for e in main]
    assert {c.attribution.skill for c in src.calls if c.attribution} == {SKILL}
    assert any(c.attribution and c.attribution.mcp_server == "echo" for c in src.calls)
    [sub] = [s for s in src.subagents if s.kind == "task"]
    assert sub.session is not None
    assert_every_line_known(sub.session)
    assert_calls_match(sub.session, sub_requests)
    [agent_call] = [u for e in main for u in tool_uses(e.body)[-1:] if u["name"] == "Agent"][:1]
    assert {c.attribution for c in sub.session.calls} == {
        CallAttribution(skill=SKILL, agent=agent_call["input"]["subagent_type"])}
    # the provider's cache-miss reason and the iterations, as the server answered them
    assert [c.cache_miss for c in src.calls] == [
        CacheMiss(e.reply.cache_miss["type"], e.reply.cache_miss["cache_missed_input_tokens"]) if e.reply.cache_miss
        else None for e in main]
    assert [c.iterations for c in src.calls] == [iterations_of({"iterations": e.reply.iterations or []}) for e in main]
    [beside] = [c for c in src.calls if c.billed_beside()]
    # its cost: the top-level usage and the compaction iteration, each once (the real price table)
    table = price_table()
    assert table is not None
    top = table.call_cost(dataclasses.replace(beside, iterations=())).usd
    alone = table.cost(MODEL, prompt=5000, completion=300, cache_read=0, cache_write=0).usd
    assert top is not None and alone is not None
    assert table.call_cost(beside).usd == pytest.approx(top + alone)
    entry = SourceEntry(agent="claude-code", path=str(path), session_id=src.session_id, project="p", started="",
                        last_activity="", calls=len(src.calls), last_prompt_tokens=None, window=None,
                        percent_full=None)
    rows = [r for r in rows_of(entry, src, table, "f").calls if r["kind"] == "main"]
    [row] = [r for r in rows if r["request_id"] == beside.request_id]
    assert row["cost_usd"] == pytest.approx(top + alone) and row["beside_tokens"] == 5300
    assert [r["skill"] for r in rows] == [c.attribution.skill if c.attribution else None for c in src.calls]
    # the tokens each compaction dropped: the file's running total, each the boundary's before less after
    boundaries = [o["compactMetadata"] for o in raw_lines(path) if o.get("subtype") == "compact_boundary"]
    assert len(src.compactions) == len(boundaries) == 2
    running = 0
    for comp, meta in zip(src.compactions, boundaries, strict=True):
        running += meta["preTokens"] - meta["postTokens"]
        assert comp.cumulative_dropped_tokens == meta["cumulativeDroppedTokens"] == running
        assert comp.dropped_tokens == meta["preTokens"] - meta["postTokens"] > 0
    # row sources: the prompts typed (the server's log holds them) are "local"; Claude Code's own lines are not
    sources = {m["content"]: m.get("row_source") for m in src.messages if m["role"] == "user" and
               isinstance(m.get("content"), str)}
    typed = {last_user_text(main[0].body), "say hi"}
    assert all(sources.get(t) == "local" for t in typed if t in sources) and "say hi" in sources
    assert {m.get("row_source") for m in src.messages if m.get("row_source")} <= {
        "local", "harness", "hook", "recorded"}
    assert "harness" in {m.get("row_source") for m in src.messages}
    # an import keeps them on its records: the window's timeline and Compactions tab read them there
    import_source(path, session_dir=tmp_path / "imported")
    events = [json.loads(line) for line in (tmp_path / "imported" / "events.jsonl").read_text().splitlines()]
    contexts = [e for e in events if e["type"] == "context"]
    assert [e.get("cache_miss") for e in contexts] == [c.cache_miss.to_json() if c.cache_miss else None
                                                       for c in src.calls]
    assert [e.get("attribution") for e in contexts] == [c.attribution.to_json() if c.attribution else None
                                                        for c in src.calls]
    assert [len(e.get("billed_beside") or []) for e in contexts] == [len(c.billed_beside()) for c in src.calls]
    assert source_cost(src, table).main.usd == pytest.approx(records_cost(contexts, table).usd)
    assert [e["dropped_tokens"] for e in events if e["type"] == "compaction"] == [
        c.dropped_tokens for c in src.compactions]
    assert_ccusage20_counts_no_compaction_call(agent_home, tmp_path / "usage", server.calls("summary"))


def assert_ccusage20_counts_no_compaction_call(agent_home: AgentHome, data: Path, summaries: list[Logged]) -> None:
    """ccusage 20 reads the same files (a subagent's too) to the same tokens but for the compactions' own calls: no
    line of the file holds them (ours works them out from the cost-state totals around each boundary), and it counts
    none; ours counts each, as the server logged them (``summaries``)."""
    lines = ccusage20.assert_same_tokens(agent_home.home, data, "claude", compactions=False)
    every = ccusage20.our_days(agent_home.home, data)
    for figure, key in (("output", "output_tokens"), ("cache_read", "cache_read_input_tokens")):
        assert sum(day[figure] for day in every.values()) - sum(day[figure] for day in lines.values()) == sum(
            e.usage[key] for e in summaries)
