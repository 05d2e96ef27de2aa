"""The real GitHub Copilot CLI 1.0.102 (``@github/copilot``, pinned in ``tests/agents/package.json``), run headless
(``copilot -p … --allow-all-tools --output-format json``) and offline (``COPILOT_OFFLINE=true``, BYOK through
``COPILOT_PROVIDER_BASE_URL``, no GitHub login) against the scripted Chat Completions server of
:mod:`tests.agents.scripted_chat`; its ``events.jsonl`` is read by :mod:`engine.sources.copilot` (whole, and in
random byte chunks as a follower would feed it), imported, listed by Sources, and checked against what the server
logged as sent and answered: the ground truth.

What the pinned version does, as these tests pin it down:

- one ``session.usage_record`` per provider call, its ``apiCallId`` the response id and ``inputTokens`` the whole
  prompt (cached part included); ``--continue`` appends to the same file after a ``session.resume``;
- ``system.message`` holds the system prompt exactly as sent; the user message sent is ``transformedContent``;
- ``--continue -p /compact`` compacts: the summary request is the whole history (tools attached) plus Copilot's
  "Please create a detailed summary…", recorded by ``session.compaction_complete`` (``compactionTokensUsed``: its
  usage, exact) with its response id in ``model.model_call_success``; the next request starts with the summary in
  Copilot's "Some of the conversation history has been summarized…" user message.

Each fresh home would unpack a ~235 MB package into ``<home>/.cache/copilot/pkg``: ``COPILOT_CACHE_HOME`` points
every run of the test session at one folder.
"""

from __future__ import annotations

import json
import random
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engine.sources.copilot import IGNORED_EVENTS, KNOWN_EVENTS, CopilotReader, read_copilot
from engine.sources.discovery import scan_sources
from engine.sources.model import SourceSession
from tests import ccusage20
from tests.agents.conftest import AgentHome, Run, agent_bin, pinned_version, raw_lines
from tests.agents.scripted import Logged, Reply, ToolCall
from tests.agents.scripted_chat import ChatServer

MODEL = "fake-model"
SUMMARY = "<overview>Ran shell commands.</overview>"
COMPACT_ASK = "Please create a detailed summary of the conversation so far"


@pytest.fixture(scope="session")
def copilot_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One package cache for every Copilot run of the test session (each would unpack ~235 MB otherwise)."""
    return tmp_path_factory.mktemp("copilot-cache")


def run_copilot(home: AgentHome, server: ChatServer, cache: Path, prompt: str, *, resume: bool = False,
                extra: dict[str, str] | None = None) -> Run:
    env = home.base_env() | {
        "COPILOT_OFFLINE": "true", "COPILOT_PROVIDER_BASE_URL": f"{server.base_url}/v1",
        "COPILOT_PROVIDER_API_KEY": "sk-test", "COPILOT_MODEL": MODEL, "COPILOT_AUTO_UPDATE": "false",
        "COPILOT_CACHE_HOME": str(cache)} | (extra or {})
    args = [*(["--continue"] if resume else []), "-p", prompt, "--allow-all-tools", "--output-format", "json"]
    return home.run(agent_bin("copilot"), args, env, timeout=240).check()


def the_session(home: AgentHome) -> Path:
    (path,) = sorted((home.home / ".copilot" / "session-state").glob("*/events.jsonl"))
    return path


def last_user_text(body: dict[str, Any]) -> str:
    for msg in reversed(body["messages"]):
        if msg.get("role") == "user":
            return str(msg.get("content") or "")
    return ""


def shell_script(commands: int) -> Callable[[dict[str, Any]], Reply]:
    """Each prompt gets ``commands`` bash calls, then a closing text; Copilot's compaction request (its last user
    message asks for a detailed summary) is answered with :data:`SUMMARY`."""

    def script(body: dict[str, Any]) -> Reply:
        if COMPACT_ASK in last_user_text(body):
            return Reply(text=SUMMARY)
        msgs = body["messages"]
        done = next((i for i, m in enumerate(reversed(msgs)) if m.get("role") == "user"), len(msgs))
        results = sum(1 for m in msgs[len(msgs) - done:] if m.get("role") == "tool")
        if results < commands:
            return Reply(tool_calls=[ToolCall("bash", {"command": f"echo step{results}", "description": "echo"})])
        return Reply(text=f"Done: {results} commands ran.")

    return script


# --------------------------------------------------------------------------- checks


def assert_every_kind_known(path: Path, src: SourceSession) -> None:
    """Every line is an event of a type the reader reads or leaves out on purpose (a new type of a newer Copilot
    fails here); the ignored counts are the file's own."""
    ignored: Counter[str] = Counter()
    for obj in raw_lines(path):
        kind = obj["type"]
        assert kind in KNOWN_EVENTS, f"an event of Copilot CLI {pinned_version('copilot')} of no known type: {kind}"
        ignored.update([f"event/{kind}"] if kind in IGNORED_EVENTS else [])
    assert src.skipped == []
    assert src.ignored == dict(ignored)


def assert_calls_are_the_servers(src: SourceSession, answered: list[Logged]) -> None:
    """Every turn call's usage in the file is what the server answered to the request of the same response id."""
    by_id = {e.response_id: e for e in answered}
    assert len(src.calls) == len(answered) and {c.request_id for c in src.calls} == set(by_id)
    for call in src.calls:
        usage = by_id[call.request_id].usage
        assert call.prompt_tokens == usage["prompt_tokens"]  # inputTokens: the whole prompt
        assert call.cache_read_tokens == usage["prompt_tokens_details"]["cached_tokens"]
        assert call.cache_write_tokens == 0  # the file's figure (the provider reports none)
        assert call.completion_tokens == usage["completion_tokens"]
        assert call.model == by_id[call.request_id].body["model"] == MODEL


def calls_of(msg: dict[str, Any]) -> list[tuple[str, str, Any]]:
    calls = msg.get("tool_calls") or []
    return [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls]


def assert_messages_are_the_sent_ones(src: SourceSession, last: Logged) -> None:
    """The last request carried the system prompt read and the messages after ``live_start``."""
    sent = last.body["messages"]
    assert sent[0]["role"] == "system" and sent[0]["content"] == src.system_prompt
    live = src.messages[src.live_start:]
    assert [m["role"] for m in sent[1:]] == [m["role"] for m in live[:len(sent) - 1]]
    for wire, read in zip(sent[1:], live, strict=False):
        assert (wire.get("content") or "") == (read.get("content") or "")
        assert calls_of(wire) == calls_of(read)
        assert wire.get("tool_call_id") == read.get("tool_call_id")


def assert_read_in_chunks_is_read_whole(path: Path, src: SourceSession, seed: int) -> None:
    data = path.read_bytes()
    reader = CopilotReader(path)
    rng = random.Random(seed)
    at = 0
    while at < len(data):
        step = rng.randint(1, 4000)
        reader.feed(data[at:at + step])
        at += step
    chunked = reader.finish()
    strip = [{k: v for k, v in m.items() if k != "id"} for m in chunked.messages]
    assert strip == [{k: v for k, v in m.items() if k != "id"} for m in src.messages]
    assert chunked.calls == src.calls and chunked.compactions == src.compactions
    assert chunked.live_start == src.live_start and chunked.system_prompt == src.system_prompt


# --------------------------------------------------------------------------- scenarios


def test_tool_calls_a_continued_session_and_a_compaction(agent_home: AgentHome, tmp_path: Path,
                                                         copilot_cache: Path) -> None:
    real = Path.home() / ".copilot"
    before = sorted(real.rglob("*")) if real.is_dir() else []
    with ChatServer(shell_script(2)) as server:
        run_copilot(agent_home, server, copilot_cache, "Run two commands")
        run_copilot(agent_home, server, copilot_cache, "Run them again", resume=True)
        first = the_session(agent_home)
        run_copilot(agent_home, server, copilot_cache, "/compact", resume=True)
        run_copilot(agent_home, server, copilot_cache, "Print once more", resume=True)
    logged = server.calls()
    (summarise,) = [e for e in logged if COMPACT_ASK in last_user_text(e.body)]
    answered = [e for e in logged if e is not summarise]
    assert len(answered) == 9 and summarise is logged[6]
    path = the_session(agent_home)
    assert path == first  # --continue appended to the same file
    src = read_copilot(path)
    assert_every_kind_known(path, src)
    assert_calls_are_the_servers(src, answered)
    assert_messages_are_the_sent_ones(src, answered[-1])
    assert_read_in_chunks_is_read_whole(path, src, seed=1)
    # the system prompt of every request before the compaction is the one system.message held then
    systems = [o["data"]["content"] for o in raw_lines(path) if o["type"] == "system.message"]
    assert all(e.body["messages"][0]["content"] in systems for e in answered)
    # the user messages are what was sent (Copilot's <current_datetime> first)
    prompts = [m["content"] for m in src.messages if m["role"] == "user"]
    assert [p.split("\n\n", 1)[-1] for p in prompts[:2]] == ["Run two commands", "Run them again"]
    assert prompts[0] == answered[0].body["messages"][1]["content"]
    assert [m["content"].split("\n")[0] for m in src.messages if m["role"] == "tool"] == ["step0", "step1"] * 3
    # the compaction, with its own call (exact, by its response id)
    (comp,) = src.compactions
    assert comp.trigger == "manual" and comp.calls_before == 6 and comp.summary == SUMMARY
    assert comp.cost is not None and comp.cost.request_id == summarise.response_id
    assert comp.cost.prompt_tokens == summarise.usage["prompt_tokens"]
    assert comp.cost.completion_tokens == summarise.usage["completion_tokens"]
    assert comp.cost.cache_read_tokens == summarise.usage["prompt_tokens_details"]["cached_tokens"]
    assert comp.tokens_after == answered[6].usage["prompt_tokens"]
    assert src.live_start == comp.message_index
    assert answered[6].body["messages"][1]["content"] == src.messages[comp.message_index]["content"]
    assert summarise.body.get("tools")  # the summary request keeps the tools attached
    assert src.cwd == str(agent_home.work) and src.project == agent_home.work.name
    assert src.model == MODEL and (src.window, src.session_id) == (128_000, path.parent.name)
    from engine.ingest import import_source

    report = import_source(path, session_dir=tmp_path / "imported")
    assert report.format == "copilot-cli" and report.skipped == []
    assert report.calls == report.reported_calls == 9 and len(report.compactions) == 1
    tool_tokens = [o["data"]["usage"]["toolTokenCount"] for o in raw_lines(path) if o["type"] == "session.usage_record"]
    assert report.inferred_prefix_tokens == tool_tokens[-1] > 0  # the tool definitions as Copilot counted them
    entries = scan_sources(env={"HOME": str(agent_home.home)}, home=agent_home.home, index=tmp_path / "idx.json")
    (entry,) = entries
    assert (entry.agent, entry.session_id, entry.calls, entry.model, entry.title) == (
        "copilot-cli", src.session_id, 9, MODEL, "Run two commands")
    assert entry.last_prompt_tokens == answered[-1].usage["prompt_tokens"] and entry.window == 128_000
    assert entry.project == agent_home.work.name and entry.path == str(path)
    assert (sorted(real.rglob("*")) if real.is_dir() else []) == before  # nothing of the user's touched
    # ccusage 20 reads the same events to the same tokens, day by day, but for the compaction's own call, which it
    # does not count (its usage is the compaction's record's): ours counts it, as the server logged it
    days = ccusage20.assert_same_tokens(agent_home.home, tmp_path / "usage", "copilot", compactions=False)
    every = ccusage20.our_days(agent_home.home, tmp_path / "usage")
    assert sum(day["calls"] for day in days.values()) == len(answered)
    assert sum(day["calls"] for day in every.values()) == len(logged)
    assert sum(day["prompt"] for day in every.values()) - sum(day["prompt"] for day in days.values()) == (
        summarise.usage["prompt_tokens"])


def test_an_auto_compaction_beside_the_turn(agent_home: AgentHome, tmp_path: Path, copilot_cache: Path) -> None:
    """The second answer claims 4,000 more prompt tokens: past ``COPILOT_PROVIDER_MAX_PROMPT_TOKENS`` 17,000 Copilot
    compacts in the background while the turn goes on; what the turn added meanwhile is kept after the summary."""
    state = {"requests": 0}
    base = shell_script(4)

    def script(body: dict[str, Any]) -> Reply:
        reply = base(body)
        if COMPACT_ASK not in last_user_text(body):
            state["requests"] += 1
            reply.extra_prompt_tokens = 4000 if state["requests"] == 2 else 0
        return reply

    with ChatServer(script) as server:
        run_copilot(agent_home, server, copilot_cache, "Run four commands",
                    extra={"COPILOT_PROVIDER_MAX_PROMPT_TOKENS": "17000"})
    logged = server.calls()
    (summarise,) = [e for e in logged if COMPACT_ASK in last_user_text(e.body)]
    answered = [e for e in logged if e is not summarise]
    path = the_session(agent_home)
    src = read_copilot(path)
    assert_every_kind_known(path, src)
    assert_calls_are_the_servers(src, answered)
    assert_messages_are_the_sent_ones(src, answered[-1])
    assert_read_in_chunks_is_read_whole(path, src, seed=2)
    (comp,) = src.compactions
    assert comp.trigger == "auto" and comp.trigger_source == "threshold"
    assert comp.cost is not None and comp.cost.request_id == ""  # no model.* log of a background compaction
    assert (comp.cost.prompt_tokens, comp.cost.completion_tokens) == (
        summarise.usage["prompt_tokens"], summarise.usage["completion_tokens"])
    after = answered[comp.calls_before]
    assert comp.tokens_after == after.usage["prompt_tokens"]
    assert after.body["messages"][1]["content"] == src.messages[comp.message_index]["content"]
    assert comp.messages_after == len(after.body["messages"]) - 1  # the summary and what the turn added meanwhile


def test_read_while_copilot_writes(agent_home: AgentHome, copilot_cache: Path) -> None:
    """The file is fed to an incremental reader as Copilot appends to it (what a follower does): it ends as the
    file read whole, and reading never disturbs Copilot."""
    with ChatServer(shell_script(3)) as server:
        env = agent_home.base_env() | {
            "COPILOT_OFFLINE": "true", "COPILOT_PROVIDER_BASE_URL": f"{server.base_url}/v1",
            "COPILOT_PROVIDER_API_KEY": "sk-test", "COPILOT_MODEL": MODEL, "COPILOT_AUTO_UPDATE": "false",
            "COPILOT_CACHE_HOME": str(copilot_cache)}
        proc = subprocess.Popen([str(agent_bin("copilot")), "-p", "Run three commands", "--allow-all-tools",
                                 "--output-format", "json"], cwd=agent_home.work, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        reader: CopilotReader | None = None
        offset, feeds = 0, 0
        start = time.monotonic()
        while True:
            done = proc.poll() is not None
            files = sorted((agent_home.home / ".copilot" / "session-state").glob("*/events.jsonl"))
            if files:
                reader = reader or CopilotReader(files[0])
                data = files[0].read_bytes()[offset:]
                if data:
                    reader.feed(data)
                    offset += len(data)
                    feeds += 1
            if done or time.monotonic() - start > 240:
                break
            time.sleep(0.01)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err[-2000:]
    assert reader is not None and feeds >= 2
    path = the_session(agent_home)
    src = read_copilot(path)
    got = reader.finish()
    assert [{k: v for k, v in m.items() if k != "id"} for m in got.messages] == [
        {k: v for k, v in m.items() if k != "id"} for m in src.messages]
    assert got.calls == src.calls and len(src.calls) == 4
    assert_calls_are_the_servers(src, server.calls())
