"""The real Codex CLI (pinned in ``tests/agents/package.json``), run headless and offline against the scripted
Responses server of :mod:`tests.agents.scripted`; its rollout is read by :mod:`engine.sources.codex` (and
followed by :class:`engine.sources.follow.Follower`, and imported) and checked against what the server logged
as sent and answered: the ground truth.

What the pinned version does, as these tests pin it down:

- it sends no ``instructions``: the system prompt (``session_meta.base_instructions``) goes as the first
  ``developer`` input item, without the lines about tools it did not send (the ``update_plan`` bullet in
  ``codex exec``): :data:`DROPPED_WITHOUT_UPDATE_PLAN`;
- one ``token_usage_record`` and one ``token_count`` per response, with the same figures;
- a local compaction (``model_auto_compact_token_limit``) is a request without tools whose answer is a
  ``compaction_output`` message, then a ``compacted`` line;
- with no model set, its default model (:data:`DEFAULT_MODEL`) runs in code mode: no ``tools``, the tool
  definitions (namespaces ``functions``, ``clock``, ``collaboration``) go as the first input item
  (``additional_tools``, recorded as such), the shell is reached through the ``exec`` custom tool (JavaScript);
- ``collaboration.spawn_agent`` starts a subagent: a thread with a rollout of its own (``session_meta`` names
  its parent), its task and its answer ``agent_message`` items, ``SubAgentActivity`` turn items linking the
  call to the thread.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engine.context.tokens import HeuristicEstimator
from engine.ingest import context_records
from engine.sources.codex import NOT_RECORDED, PREFIX_KEY, read_codex
from engine.sources.codex_kinds import (
    IGNORED_EVENTS,
    IGNORED_ITEMS,
    IGNORED_RECORDS,
    KNOWN_EVENTS,
    KNOWN_ITEMS,
    KNOWN_PARTS,
    KNOWN_TURN_ITEMS,
    KNOWN_TYPES,
)
from engine.sources.discovery import scan_sources
from engine.sources.follow import Follower
from engine.sources.model import SourceSession
from engine.store.config import Settings
from tests import ccusage20
from tests.agents.conftest import AgentHome, Run, agent_bin, pinned_version, raw_lines
from tests.agents.scripted import Logged, Reply, ResponsesServer, ToolCall, count_tokens

MODEL = "gpt-5.5"
DEFAULT_MODEL = "gpt-6.2-sol"  # what Codex 0.171 runs when no model is set
SUMMARY = "SUMMARY: the three commands ran and printed step0, step1 and step2."
# the line of base_instructions Codex leaves out when it sends no update_plan tool (as in ``codex exec``)
COMPACT_LIMIT = 30_000  # model_auto_compact_token_limit: no prompt of these scenarios comes near it
BIG_OUTPUT = 40_000  # output tokens that take a response's total above it
DROPPED_WITHOUT_UPDATE_PLAN = (
    "- If you create a checklist or task list, you update item statuses incrementally as each item is completed "
    "rather than marking every item done only at the end.\n")


def shell_script(commands: int, big_output_at: int = -1) -> Callable[[dict[str, Any]], Reply]:
    """``commands`` shell calls (``exec_command``) in all, then closing texts; a request without tools
    (the summarisation of a compaction) gets :data:`SUMMARY`. The answer to the request ``big_output_at``
    (0-based, among those with tools) claims :data:`BIG_OUTPUT` output tokens, which trips an auto compaction
    at :data:`COMPACT_LIMIT` whatever the length of the paths in the prompt."""
    issued = 0
    requests = 0

    def script(body: dict[str, Any]) -> Reply:
        nonlocal issued
        nonlocal requests
        if not body.get("tools"):
            return Reply(text=SUMMARY)
        requests += 1
        big = BIG_OUTPUT if requests - 1 == big_output_at else None
        if issued < commands:
            issued += 1
            return Reply(tool_calls=[ToolCall("exec_command", {"cmd": f"echo step{issued - 1}"})], output_tokens=big)
        return Reply(text=f"Done: {issued} commands ran.")

    return script


def run_codex(home: AgentHome, server: ResponsesServer, prompt: str, *, resume: bool = False,
              config: str = "", model: str | None = MODEL) -> Run:
    """Codex headless against ``server``; ``model`` None: no model set (Codex's default)."""
    codex_home = home.home / ".codex"
    codex_home.mkdir(exist_ok=True)
    chosen = f'model = "{model}"\n' if model else ""
    (codex_home / "config.toml").write_text(
        f'{chosen}model_provider = "local"\n{config}\n'
        f'[model_providers.local]\nname = "local"\nbase_url = "{server.base_url}/v1"\n'
        'wire_api = "responses"\nenv_key = "LOCAL_API_KEY"\n', encoding="utf-8")
    env = home.base_env() | {"CODEX_HOME": str(codex_home), "LOCAL_API_KEY": "sk-test"}
    flags = ["--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"]
    args = ["exec", "resume", "--last", *flags, prompt] if resume else ["exec", *flags, prompt]
    return home.run(agent_bin("codex"), args, env, timeout=60).check()


def the_rollout(home: AgentHome) -> Path:
    (path,) = sorted((home.home / ".codex" / "sessions").glob("*/*/*/rollout-*.jsonl"))
    return path


def assert_parts_known(payload: dict[str, Any]) -> None:
    """The content parts of a response item (message and agent message content, tool outputs, reasoning) are of
    kinds the reader reads."""
    for key in ("content", "output", "summary"):
        for part in payload.get(key) if isinstance(payload.get(key), list) else []:
            assert part.get("type") in KNOWN_PARTS, (
                f"{payload['type']} {key} part {part.get('type')!r} of Codex {pinned_version('codex')} is not known")


def event_known(payload: dict[str, Any], ignored: Counter[str]) -> None:
    """An event's type is known, and an ``item_completed``'s turn item type too (a SubAgentActivity is read)."""
    sub = payload.get("type")
    assert sub in KNOWN_EVENTS, f"event type {sub!r} of Codex {pinned_version('codex')} is not known"
    if sub == "item_completed":
        item = payload["item"]["type"]
        assert item in KNOWN_TURN_ITEMS, f"turn item type {item!r} of Codex {pinned_version('codex')} is not known"
        ignored.update([] if item == "SubAgentActivity" else ["event_msg/item_completed"])
    else:
        ignored.update([f"event_msg/{sub}"] if sub in IGNORED_EVENTS else [])


def assert_every_type_known(path: Path, src: SourceSession) -> None:
    """Every record, item, event, turn item and content part type in the file is one the reader reads or leaves
    out on purpose (a type a new version adds fails here), and the ignored counts are the file's own."""
    ignored: Counter[str] = Counter()
    for obj in raw_lines(path):
        kind, sub = obj["type"], (obj.get("payload") or {}).get("type")
        assert kind in KNOWN_TYPES, f"record type {kind!r} of Codex {pinned_version('codex')} is not known"
        if kind == "event_msg":
            event_known(obj["payload"], ignored)
        elif kind == "response_item":
            assert_parts_known(obj["payload"])
            assert sub in KNOWN_ITEMS, f"item type {sub!r} of Codex {pinned_version('codex')} is not known"
            if (obj.get("metadata") or {}).get("compaction_output") is True:
                ignored["response_item/compaction_output"] += 1
            ignored.update([f"response_item/{sub}"] if sub in IGNORED_ITEMS else [])
        ignored.update([kind] if kind in IGNORED_RECORDS else [])
    assert src.skipped == []
    assert src.ignored == dict(ignored)


def assert_calls_are_the_servers(src: SourceSession, answered: list[Logged], model: str = MODEL) -> None:
    assert len(src.calls) == len(answered)
    for call, entry in zip(src.calls, answered, strict=True):
        usage = entry.usage
        assert call.prompt_tokens == usage["input_tokens"]  # the whole prompt, cached part included
        assert call.cache_read_tokens == usage["input_tokens_details"]["cached_tokens"]
        assert call.completion_tokens == usage["output_tokens"]
        assert call.reasoning_tokens == usage["output_tokens_details"]["reasoning_tokens"]
        assert type(call.cache_write_tokens) is int and call.cache_write_tokens == 0  # the file says 0
        assert call.model == entry.body["model"] == model and call.window
        assert call.prefix_key == PREFIX_KEY
    ids = [c.request_id for c in src.calls]
    assert all(i.startswith("resp_") for i in ids) and len(set(ids)) == len(ids)


def assert_follower_agrees(path: Path, src: SourceSession) -> None:
    events = Follower(path).poll()
    calls = [e.call for e in events if e.kind == "call" and e.call is not None]
    comps = [e.compaction for e in events if e.kind == "compaction" and e.compaction is not None]

    def key(c: Any) -> tuple[Any, ...]:
        return (c.index, c.prompt_tokens, c.cache_read_tokens, c.cache_write_tokens, c.completion_tokens,
                c.window, c.request_id, c.prefix_key, c.model)

    assert [key(c) for c in calls] == [key(c) for c in src.calls]
    assert [(c.tokens_before, c.tokens_after, c.trigger, c.cost and key(c.cost)) for c in comps] == [
        (c.tokens_before, c.tokens_after, c.trigger, c.cost and key(c.cost)) for c in src.compactions]


def first_message(entry: Logged) -> dict[str, Any]:
    """The request's first message item (in code mode an ``additional_tools`` item comes before it)."""
    return next(i for i in entry.body.get("input") or [] if i.get("type", "message") == "message")


def sent_tools(entry: Logged) -> list[dict[str, Any]]:
    """The tool definitions of a code-mode request: its ``additional_tools`` items' (it sends no ``tools``)."""
    assert "tools" not in entry.body
    return [t for i in entry.body["input"] if i.get("type") == "additional_tools" for t in i["tools"]]


def assert_prefix_is_the_sent_one(src: SourceSession, answered: list[Logged]) -> None:
    """Code mode: each call's prefix is what its request held — the system prompt and the tool definitions, the
    same objects (the server's count of the tools is the count of the prefix's)."""
    for call, entry in zip(src.calls, answered, strict=True):
        prefix = src.prefixes[call.prefix_key]
        assert prefix.tools == sent_tools(entry) and prefix.tools
        assert prefix.system == opening_developer_text(entry) == src.system_prompt
        assert entry.tools_tokens == count_tokens(prefix.tools)
        assert entry.system_tokens == count_tokens(first_message(entry).get("content"))


def opening_developer_text(entry: Logged) -> str:
    """The developer messages a request opens with (Codex 0.17x: the base instructions first), as the reader joins
    them."""
    items = [i for i in entry.body["input"] if i.get("type") == "message"]
    opening = items[:next(k for k, i in enumerate(items) if i["role"] != "developer")]
    return "\n\n".join("\n".join(p["text"] for p in i["content"]) for i in opening)


def assert_system_prompt_is_the_sent_one(src: SourceSession, answered: list[Logged]) -> None:
    """With function tools (gpt-5.5), the rollout records the base instructions in session_meta only; the requests
    open with them as a developer message, without the lines about tools Codex did not send."""
    prefix = src.prefixes[PREFIX_KEY]
    assert prefix.tools == []  # rollouts do not record the tool definitions
    assert src.system_prompt.startswith(prefix.system)
    for entry in answered:
        sent = "".join(part.get("text", "") for part in first_message(entry).get("content") or [])
        names = {t.get("name") for t in entry.body.get("tools") or []}
        recorded = prefix.system if "update_plan" in names else prefix.system.replace(DROPPED_WITHOUT_UPDATE_PLAN, "")
        assert sent == recorded
        assert entry.system_tokens == count_tokens(first_message(entry).get("content"))
    assert DROPPED_WITHOUT_UPDATE_PLAN in prefix.system  # what Codex 0.169 records and does not send


def import_it(path: Path, tmp_path: Path) -> Any:
    from engine.ingest import import_source

    report = import_source(path, session_dir=tmp_path / "imported")
    assert report.format == "codex" and report.skipped == []
    return report


# --------------------------------------------------------------------------- scenarios


def test_three_shell_calls(agent_home: AgentHome, tmp_path: Path) -> None:
    with ResponsesServer(shell_script(3)) as server:
        run_codex(agent_home, server, "Run three commands")
    # no wall-clock bound (a loaded machine took 32 s): a retry shows in the server's calls, a hang as the run's timeout
    answered = server.calls()
    assert [e.kind for e in answered] == ["main"] * 4
    path = the_rollout(agent_home)
    src = read_codex(path)
    assert_every_type_known(path, src)
    assert_calls_are_the_servers(src, answered)
    assert_system_prompt_is_the_sent_one(src, answered)
    assert_follower_agrees(path, src)
    commands = [json.loads(c["function"]["arguments"])["cmd"] for m in src.messages for c in m.get("tool_calls") or []]
    assert commands == ["echo step0", "echo step1", "echo step2"]
    outputs = [m["content"] for m in src.messages if m["role"] == "tool"]
    assert len(outputs) == 3 and all(f"step{i}" in out for i, out in enumerate(outputs))
    assert src.cwd == str(agent_home.work) and src.model == MODEL and not src.compactions
    report = import_it(path, tmp_path)
    assert report.calls == report.reported_calls == 4


def test_a_resumed_session_appends_to_its_rollout(agent_home: AgentHome, tmp_path: Path) -> None:
    with ResponsesServer(shell_script(1)) as server:
        run_codex(agent_home, server, "Run one command")
        run_codex(agent_home, server, "And now say done", resume=True)
    answered = server.calls()
    assert len(answered) == 3  # the command and the closing text, then the resumed turn's answer
    path = the_rollout(agent_home)
    src = read_codex(path)
    assert_every_type_known(path, src)
    assert_calls_are_the_servers(src, answered)
    assert_system_prompt_is_the_sent_one(src, answered)
    assert_follower_agrees(path, src)
    assert [m["content"] for m in src.messages if m["role"] == "user" and m.get("name") != "developer"][-1] == (
        "And now say done")
    import_it(path, tmp_path)


def test_an_auto_compaction(agent_home: AgentHome, tmp_path: Path) -> None:
    with ResponsesServer(shell_script(3, big_output_at=2)) as server:
        run_codex(agent_home, server, "Run three commands", config=f"model_auto_compact_token_limit = {COMPACT_LIMIT}")
    answered = server.calls()
    main = [e for e in answered if e.body.get("tools")]
    (summarise,) = [e for e in answered if not e.body.get("tools")]
    if not main or answered.index(summarise) in (0, len(answered) - 1):
        pytest.fail(f"the compaction did not happen between two calls: {[e.kind for e in answered]}")
    path = the_rollout(agent_home)
    src = read_codex(path)
    assert_every_type_known(path, src)
    assert_calls_are_the_servers(src, main)  # the summarisation is the compaction's cost, not a call
    assert_follower_agrees(path, src)
    (comp,) = src.compactions
    at = answered.index(summarise)
    assert comp.calls_before == at and comp.trigger == "auto"  # inside the turn
    assert comp.tokens_before == main[at - 1].usage["input_tokens"]
    assert comp.tokens_after == main[at].usage["input_tokens"]
    assert comp.cost is not None
    assert (comp.cost.prompt_tokens, comp.cost.cache_read_tokens, comp.cost.completion_tokens) == (
        summarise.usage["input_tokens"], summarise.usage["input_tokens_details"]["cached_tokens"],
        summarise.usage["output_tokens"])
    assert comp.summary.endswith(SUMMARY) and src.live_start == comp.message_index
    assert SUMMARY not in [m.get("content") for m in src.messages[:comp.message_index]]
    report = import_it(path, tmp_path)
    assert len(report.compactions) == 1
    # ccusage 20 reads the same rollout to the same tokens, day by day (the compaction's call included)
    ccusage20.assert_same_tokens(agent_home.home, tmp_path / "usage", "codex")


# --------------------------------------------------------------------------- the default model: code mode, subagents

EXEC_ECHO = 'const r = await tools.exec_command({{cmd: "echo {word}"}});\ntext(r);'


def code_mode_script(body: dict[str, Any]) -> Reply:
    """One ``exec`` call (JavaScript running ``echo codemode``), then the closing text."""
    ran = any(i.get("type") == "custom_tool_call" for i in body.get("input") or [])
    return Reply(text="Done: it printed codemode.") if ran else Reply(
        tool_calls=[ToolCall("exec", {}, input=EXEC_ECHO.format(word="codemode"))])


def test_the_default_model_in_code_mode(agent_home: AgentHome, tmp_path: Path) -> None:
    with ResponsesServer(code_mode_script) as server:
        run_codex(agent_home, server, "Print codemode", model=None)
    answered = server.calls()
    assert [e.kind for e in answered] == ["main"] * 2 and all(e.body["model"] == DEFAULT_MODEL for e in answered)
    path = the_rollout(agent_home)
    src = read_codex(path)
    assert_every_type_known(path, src)
    assert_calls_are_the_servers(src, answered, DEFAULT_MODEL)
    assert_prefix_is_the_sent_one(src, answered)
    assert_follower_agrees(path, src)
    assert [t["name"] for t in src.prefixes[PREFIX_KEY].tools] == ["functions", "clock", "collaboration"]
    (call,) = [c for m in src.messages for c in m.get("tool_calls") or []]
    assert call["function"] == {"name": "exec", "arguments": EXEC_ECHO.format(word="codemode")}
    (output,) = [m for m in src.messages if m["role"] == "tool"]
    assert output["tool_call_id"] == call["id"] and "codemode" in output["content"]
    report = import_it(path, tmp_path)
    assert report.calls == report.reported_calls == 2 and report.prefix_source == "file"
    assert sorted(t["name"] for t in report.tool_definitions) == ["clock", "collaboration", "functions"]
    # the window's tool-definition region is these definitions (a namespace counted with the tools it holds)
    assert sum(t["tokens"] for t in report.tool_definitions) == HeuristicEstimator().tools(
        src.prefixes[PREFIX_KEY].tools) > sum(e.tools_tokens for e in answered[:1]) // 2
    assert all(r["prefix_source"] == "file" and r["tools"] > 0 for r in context_records(src))


def team_script(fork: dict[str, str]) -> Callable[[dict[str, Any]], Reply]:
    """The parent (``/root``) spawns ``worker`` (``fork``: its fork_turns, or none given: Codex's default, the
    parent's history passed on), waits for it, closes; the subagent runs ``echo sub`` in code mode and answers
    :data:`SUB_ANSWER`."""
    return lambda body: team_reply(body, fork)


def team_reply(body: dict[str, Any], fork: dict[str, str]) -> Reply:
    items = body.get("input") or []
    done = {i.get("name") for i in items if i.get("type") in ("function_call", "custom_tool_call")}
    if body.get("client_metadata", {}).get("x-openai-subagent"):
        return Reply(text=SUB_ANSWER) if "exec" in done else Reply(
            tool_calls=[ToolCall("exec", {}, input=EXEC_ECHO.format(word="sub"))])
    if "spawn_agent" not in done:
        return Reply(tool_calls=[ToolCall("spawn_agent", {"task_name": "worker", "message": "Run echo sub", **fork},
                                          namespace="collaboration")])
    if "wait_agent" not in done:
        return Reply(tool_calls=[ToolCall("wait_agent", {"timeout_ms": 20000}, namespace="collaboration")])
    return Reply(text="All done.")


SUB_ANSWER = "SUB DONE: it printed sub."


@pytest.mark.parametrize("fork", [{"fork_turns": "none"}, {}], ids=["none", "forked"])
def test_a_spawn_agent_subagent(agent_home: AgentHome, tmp_path: Path, fork: dict[str, str]) -> None:
    """Forked (the default), the subagent's rollout first holds the parent's history (and its session_meta); the
    spawn call it holds without an output is sent as "aborted" (its turn_aborted)."""
    with ResponsesServer(team_script(fork)) as server:
        run_codex(agent_home, server, "Have a worker run echo sub", model=None)
    answered = server.calls()
    by_thread: dict[str, list[Logged]] = {}
    for entry in answered:
        by_thread.setdefault(entry.body["client_metadata"]["thread_id"], []).append(entry)
    files = sorted((agent_home.home / ".codex" / "sessions").glob("*/*/*/rollout-*.jsonl"))
    assert len(files) == 2 == len(by_thread)
    (path,) = [f for f in files if read_codex(f, subagents=False).session_id in by_thread
               and not by_thread[read_codex(f, subagents=False).session_id][0].body["client_metadata"].get(
                   "x-openai-subagent")]
    src = read_codex(path)
    (ref,) = src.subagents
    assert ref.session is not None and ref.path is not None and ref.path != path and not ref.problem
    for one, file in ((src, path), (ref.session, ref.path)):
        assert_every_type_known(file, one)
        assert_calls_are_the_servers(one, by_thread[one.session_id], DEFAULT_MODEL)
        assert_prefix_is_the_sent_one(one, by_thread[one.session_id])
        assert_follower_agrees(file, one)
    assert len(src.calls) == 3 and len(ref.session.calls) == 2 and ref.session.session_id != src.session_id
    aborted = [m for m in ref.session.messages if m.get("codex_aborted")]
    assert [m["content"] for m in aborted] == (["aborted"] if not fork else [])
    assert not any(c.prompt_unlike_file for c in ref.session.calls)  # the file holds each request as sent
    spawn = next(c for m in src.messages for c in m.get("tool_calls") or []
                 if c["function"]["name"] == "collaboration.spawn_agent")
    assert ref.parent_tool_call_id == spawn["id"] and ref.id == ref.session.session_id
    linked = [m for m in src.messages if m.get("subagent")]
    assert [(m["tool_call_id"], m["subagent"]) for m in linked] == [(spawn["id"], {"id": ref.id,
                                                                                    "agent_path": "/root/worker"})]
    task = next(m for m in ref.session.messages if m.get("agent_message"))
    assert task["agent_message"] == {"author": "/root", "recipient": "/root/worker", "trigger_turn": True}
    answer = next(m for m in src.messages if m.get("agent_message"))
    assert answer["agent_message"]["author"] == "/root/worker" and answer["content"].endswith(SUB_ANSWER)
    # not forked, the child is sent a tool set of its own (fewer tools); forked, the parent's (and told in a developer
    # message which it may no longer call): each exact, as sent
    assert (ref.session.prefixes[PREFIX_KEY].tools != src.prefixes[PREFIX_KEY].tools) == bool(fork)
    # the Sources list counts the subagent's rollout with its parent's
    env = {"HOME": str(agent_home.home), "CODEX_HOME": str(agent_home.home / ".codex")}
    entries = scan_sources(Settings(), env=env, home=agent_home.home, index=tmp_path / "sources-index.json")
    assert [(e.session_id, e.subagents, e.calls) for e in entries] == [(src.session_id, 1, 3)]
    report = import_it(path, tmp_path)
    (sub,) = report.subagents
    assert (sub["id"], sub["parent_tool_call_id"], sub["calls"]) == (ref.id, spawn["id"], 2)
    assert sub["prompt_tokens"] == [e.usage["input_tokens"] for e in by_thread[ref.id]]


COMPACTION_PROMPT = "CONTEXT CHECKPOINT COMPACTION"  # the summarisation request's last message, in code mode


def is_compaction(body: dict[str, Any]) -> bool:
    """In code mode the summarisation request sends the tools too: it is told by its last message."""
    last = (body.get("input") or [{}])[-1]
    return last.get("role") == "user" and COMPACTION_PROMPT in json.dumps(last.get("content"))


def test_an_auto_compaction_in_code_mode(agent_home: AgentHome, tmp_path: Path) -> None:
    requests = []

    def script(body: dict[str, Any]) -> Reply:
        if is_compaction(body):
            return Reply(text=SUMMARY)
        requests.append(body)
        if len(requests) <= 2:  # the second answer's output takes the total above the limit: compacted mid-turn
            return Reply(tool_calls=[ToolCall("exec", {}, input=EXEC_ECHO.format(word=f"step{len(requests)}"))],
                         output_tokens=BIG_OUTPUT if len(requests) == 2 else None)
        return Reply(text="Done.")

    with ResponsesServer(script) as server:
        run_codex(agent_home, server, "Run two commands", model=None,
                  config=f"model_auto_compact_token_limit = {COMPACT_LIMIT}")
    answered = server.calls()
    (summarise,) = [e for e in answered if is_compaction(e.body)]
    main = [e for e in answered if e is not summarise]
    path = the_rollout(agent_home)
    src = read_codex(path)
    assert_every_type_known(path, src)
    assert_calls_are_the_servers(src, main, DEFAULT_MODEL)  # the summarisation is the compaction's cost
    assert_prefix_is_the_sent_one(src, main)
    assert sent_tools(summarise) == src.prefixes[PREFIX_KEY].tools  # it is sent the tools too
    assert_follower_agrees(path, src)
    (comp,) = src.compactions
    assert comp.trigger == "auto" and comp.calls_before == answered.index(summarise) == 2
    assert comp.cost is not None and (comp.cost.prompt_tokens, comp.cost.cache_read_tokens,
                                      comp.cost.completion_tokens) == (
        summarise.usage["input_tokens"], summarise.usage["input_tokens_details"]["cached_tokens"],
        summarise.usage["output_tokens"])
    assert comp.summary.endswith(SUMMARY)
    import_it(path, tmp_path)


def test_a_compaction_before_a_turn_is_of_unknown_trigger(agent_home: AgentHome, tmp_path: Path) -> None:
    """A resumed session over the limit compacts before the turn's first call: the file does not say it was
    automatic (a /compact looks the same), so its trigger is unknown, not a guess."""

    def script(body: dict[str, Any]) -> Reply:
        if is_compaction(body):
            return Reply(text=SUMMARY)
        resumed = "And now say done" in json.dumps(body.get("input"))
        return Reply(text="Second." if resumed else "First.", output_tokens=None if resumed else BIG_OUTPUT)

    with ResponsesServer(script) as server:
        config = f"model_auto_compact_token_limit = {COMPACT_LIMIT}"
        run_codex(agent_home, server, "Say first", model=None, config=config)
        run_codex(agent_home, server, "And now say done", model=None, config=config, resume=True)
    answered = server.calls()
    (summarise,) = [e for e in answered if is_compaction(e.body)]
    path = the_rollout(agent_home)
    src = read_codex(path)
    assert_every_type_known(path, src)
    assert_calls_are_the_servers(src, [e for e in answered if e is not summarise], DEFAULT_MODEL)
    assert_follower_agrees(path, src)
    (comp,) = src.compactions
    assert comp.calls_before == answered.index(summarise) == 1
    assert (comp.trigger, comp.trigger_source) == ("unknown", NOT_RECORDED)
    assert comp.cost is not None and comp.cost.prompt_tokens == summarise.usage["input_tokens"]
    import_it(path, tmp_path)
