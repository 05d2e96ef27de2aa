"""The real Gemini CLI (pinned in ``tests/agents/package.json``), run headless and offline against the scripted
Gemini API of :mod:`tests.agents.scripted_gemini`; its session file is read by :mod:`engine.sources.gemini_cli`
(whole, and in random byte chunks as a follower would feed it) and imported, and checked against what the
server logged as sent and answered: the ground truth.

What the pinned version does, as these tests pin it down:

- one ``gemini`` record per response, written again when it grows (tokens, then tool calls): one call each;
- the ``<session_context>`` user message exists only in a ``$set.messages`` patch;
- ``--resume latest`` first starts a new file named by the current minute under the resumed session's id (a
  header and the ``<session_context>``), then appends to the resumed file: ``$set.sessionId`` and
  ``$set.messages`` restating the history (with every tool result twice, and the resumed request sends them
  twice too). A resume in the same minute therefore appends both to the one file (a second header); a resume
  in a later minute leaves a stub file of its own, which Sources does not list (as Gemini CLI's own list does
  not: nothing in it to resume). The runs' clocks are pinned (:func:`run_gemini`'s ``clock``) so which case a
  test gets never depends on when it runs;
- the chat compression (a reported prompt above half the window, at the next turn) sends two
  ``:generateContent`` requests without tools (the summary and its verification), which the file does not
  record, then writes the new history as ``$set.messages`` (``<state_snapshot>`` summary first).
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engine.sources.discovery import ScanProblem, scan_sources
from engine.sources.gemini_cli import (
    IGNORED_MESSAGES,
    IGNORED_SET_KEYS,
    KNOWN_MESSAGES,
    KNOWN_SET_KEYS,
    RECORD_KINDS,
    GeminiCliReader,
    read_gemini_cli,
    record_kind,
)
from engine.sources.model import SourceSession
from tests import ccusage20
from tests.agents.conftest import HERE, AgentHome, Run, agent_bin, raw_lines
from tests.agents.conftest import pinned_version as conftest_pinned
from tests.agents.scripted import Logged, Reply, ScriptedServer, ToolCall
from tests.agents.scripted_gemini import SUMMARY_TEXT, GeminiServer

MODEL = "gemini-2.5-flash"
PACKAGE = "@google/gemini-cli"
CLOCK = 1_767_607_205_000  # 2026-01-05T10:00:05Z: each run's clock starts here (or a set time after it)
BIG_PROMPT = 600_000  # reported prompt tokens above half of gemini-2.5's 1,048,576: the next turn compresses


def pinned_version() -> str:
    return conftest_pinned("gemini")


def shell_script(commands: int, big_at: int = -1) -> Callable[[dict[str, Any]], Reply]:
    """Each user prompt gets ``commands`` shell calls (``run_shell_command``), then a closing text. The answer
    to the ``big_at``-th request (0-based) reports :data:`BIG_PROMPT` more prompt tokens (read from the cache)."""
    state = {"issued": 0, "requests": 0}

    def script(body: dict[str, Any]) -> Reply:
        last = (body.get("contents") or [{}])[-1]
        if not any("functionResponse" in p for p in last.get("parts") or []):
            state["issued"] = 0  # a new prompt
        extra = BIG_PROMPT if state["requests"] == big_at else 0
        state["requests"] += 1
        if state["issued"] < commands:
            state["issued"] += 1
            return Reply(tool_calls=[ToolCall("run_shell_command", {"command": f"echo step{state['issued'] - 1}"})],
                         extra_prompt_tokens=extra)
        return Reply(text=f"Done: {commands} commands ran.", extra_prompt_tokens=extra)

    return script


def run_gemini(home: AgentHome, server: ScriptedServer, prompt: str, *, resume: bool = False,
               clock: int = CLOCK) -> Run:
    """One headless run whose wall clock starts at ``clock`` (epoch ms, see ``shifted_clock.mjs``)."""
    gemini_dir = home.home / ".gemini"
    gemini_dir.mkdir(exist_ok=True)
    (gemini_dir / "settings.json").write_text(json.dumps({"security": {"auth": {"selectedType": "gemini-api-key"}}}))
    (gemini_dir / "trustedFolders.json").write_text(json.dumps({str(home.work): "TRUST_FOLDER"}))
    env = home.base_env() | {"GEMINI_API_KEY": "test-key", "GOOGLE_GEMINI_BASE_URL": server.base_url,
                             "NODE_OPTIONS": f"--import={(HERE / 'shifted_clock.mjs').as_uri()}",
                             "CTXBENCH_TEST_CLOCK": str(clock)}
    args = ["-p", prompt, "--approval-mode", "yolo", "-m", MODEL, *(["--resume", "latest"] if resume else [])]
    return home.run(agent_bin("gemini"), args, env, timeout=60).check()


def session_files(home: AgentHome) -> list[Path]:
    return sorted((home.home / ".gemini" / "tmp").glob("*/chats/session-*.jsonl"))


def the_session(home: AgentHome) -> Path:
    (path,) = session_files(home)
    return path


def assert_every_type_known(path: Path, src: SourceSession) -> None:
    """Every record kind, message type and ``$set`` key in the file is one the reader reads or leaves out on
    purpose (one a new version adds fails here), and the ignored counts are the file's own."""
    ignored: Counter[str] = Counter()
    version = pinned_version()
    for obj in raw_lines(path):
        kind = record_kind(obj)
        assert kind in RECORD_KINDS, f"a line of Gemini CLI {version} is of no known kind: {str(obj)[:200]}"
        if kind == "message":
            assert obj["type"] in KNOWN_MESSAGES, f"message type {obj['type']!r} of Gemini CLI {version}"
            ignored.update([f"message/{obj['type']}"] if obj["type"] in IGNORED_MESSAGES else [])
        elif kind == "$set":
            for key in obj["$set"]:
                assert key in KNOWN_SET_KEYS, f"$set key {key!r} of Gemini CLI {version} is not known"
                ignored.update([f"$set/{key}"] if key in IGNORED_SET_KEYS else [])
    assert src.skipped == []
    assert src.ignored == dict(ignored)


def assert_calls_are_the_servers(src: SourceSession, answered: list[Logged]) -> None:
    assert len(src.calls) == len(answered)
    for call, entry in zip(src.calls, answered, strict=True):
        usage = entry.usage
        assert call.prompt_tokens == usage["promptTokenCount"]  # the whole prompt, cached part included
        assert call.cache_read_tokens == usage["cachedContentTokenCount"]
        assert call.completion_tokens == usage["candidatesTokenCount"]
        assert call.cache_write_tokens is None  # the Gemini API has no such figure
        assert call.model == MODEL and entry.path.endswith(f"/models/{MODEL}:streamGenerateContent")
        assert call.window == 1_048_576
        assert src.messages[call.message_index]["role"] == "assistant"


def assert_chunked_reads_agree(path: Path, src: SourceSession) -> None:
    """The file fed in random byte chunks (as a follower gets it) ends in the state of the whole read."""
    data = path.read_bytes()
    reader = GeminiCliReader(path)
    rng = random.Random(21)
    at = 0
    while at < len(data):
        step = rng.randint(1, 400)
        reader.feed(data[at:at + step])
        at += step
    chunked = reader.finish()
    assert strip(chunked) == strip(src)


def strip(src: SourceSession) -> tuple[Any, ...]:
    """A session's state without the ids the reader makes up."""
    messages = [{k: v for k, v in m.items() if k != "id"} for m in src.messages]
    return (messages, src.calls, src.compactions, src.live_start, src.skipped, src.ignored, src.session_id,
            src.model, src.window, src.cwd)


def commands_and_outputs(src: SourceSession, start: int = 0) -> tuple[list[str], list[str]]:
    msgs = src.messages[start:]
    commands = [json.loads(c["function"]["arguments"])["command"] for m in msgs for c in m.get("tool_calls") or []]
    return commands, [str(m["content"]) for m in msgs if m["role"] == "tool"]


def import_it(path: Path, tmp_path: Path) -> Any:
    from engine.ingest import import_source

    report = import_source(path, session_dir=tmp_path / "imported")
    assert report.format == "gemini-cli" and report.skipped == []
    return report


# --------------------------------------------------------------------------- scenarios


def test_three_shell_calls(agent_home: AgentHome, tmp_path: Path) -> None:
    version = agent_home.run(agent_bin("gemini"), ["--version"], agent_home.base_env()).check()
    assert version.stdout.strip() == pinned_version()
    with GeminiServer(shell_script(3)) as server:
        run_gemini(agent_home, server, "Run three commands")
    # no wall-clock bound (a loaded machine took 32 s): a retry shows in the server's calls, a hang as the run's timeout
    answered = server.calls("main")
    assert len(answered) == 4 and not server.calls("summary")
    path = the_session(agent_home)
    src = read_gemini_cli(path)
    assert_every_type_known(path, src)
    assert_calls_are_the_servers(src, answered)
    assert_chunked_reads_agree(path, src)
    commands, outputs = commands_and_outputs(src)
    assert commands == ["echo step0", "echo step1", "echo step2"]
    assert len(outputs) == 3 and all(f"Output: step{i}" in out for i, out in enumerate(outputs))
    calls = [c for m in src.messages for c in m.get("tool_calls") or []]
    assert [m["tool_call_id"] for m in src.messages if m["role"] == "tool"] == [c["id"] for c in calls]
    # what was sent: the session context and the prompt (one content), then calls and results in turn
    sent = answered[-1].body["contents"]
    assert [c["role"] for c in sent] == ["user"] + ["model", "user"] * 3
    assert [m["role"] for m in src.messages] == ["user", "user"] + ["assistant", "tool"] * 3 + ["assistant"]
    assert src.messages[0]["content"] == sent[0]["parts"][0]["text"]
    assert src.messages[1]["content"] == "Run three commands"
    assert src.messages[-1]["content"] == "Done: 3 commands ran."
    assert src.cwd == str(agent_home.work) and src.model == MODEL and src.window == 1_048_576
    assert not src.compactions and src.system_prompt == "" and not src.prefixes  # not in the file
    report = import_it(path, tmp_path)
    assert report.calls == report.reported_calls == 4
    # ccusage 20 reads the same file to the same tokens, day by day
    ccusage20.assert_same_tokens(agent_home.home, tmp_path / "usage", "gemini")


def test_a_resumed_session_appends_to_its_file(agent_home: AgentHome, tmp_path: Path) -> None:
    with GeminiServer(shell_script(1)) as server:
        run_gemini(agent_home, server, "Run one command")
        run_gemini(agent_home, server, "Run one more", resume=True, clock=CLOCK + 20_000)  # the same minute
    answered = server.calls("main")
    assert len(answered) == 4  # a command and the closing text, twice
    path = the_session(agent_home)
    src = read_gemini_cli(path)
    assert_every_type_known(path, src)
    assert_calls_are_the_servers(src, answered)
    assert_chunked_reads_agree(path, src)
    assert sum(1 for o in raw_lines(path) if record_kind(o) == "header") == 2
    assert [m["content"] for m in src.messages if m["role"] == "user"][-1] == "Run one more"
    # the resumed request sent the first turn's tool result twice: so does the transcript, before the new prompt
    resumed = answered[2].body["contents"]
    sent_results = sum(1 for c in resumed for p in c["parts"] if "functionResponse" in p)
    prompt_at = next(i for i, m in enumerate(src.messages) if m.get("content") == "Run one more")
    assert sent_results == 2 == sum(1 for m in src.messages[:prompt_at] if m["role"] == "tool")
    commands, outputs = commands_and_outputs(src)
    assert commands == ["echo step0", "echo step0"] and len(outputs) == 3
    assert not src.compactions
    import_it(path, tmp_path)


def test_a_resume_in_a_later_minute_leaves_a_stub_sources_does_not_list(agent_home: AgentHome,
                                                                        tmp_path: Path) -> None:
    with GeminiServer(shell_script(1)) as server:
        run_gemini(agent_home, server, "Run one command")
        run_gemini(agent_home, server, "Run one more", resume=True, clock=CLOCK + 3_600_000)  # an hour later
    answered = server.calls("main")
    first, stub = session_files(agent_home)
    assert "T10-00-" in first.name and "T11-00-" in stub.name
    src, stub_src = read_gemini_cli(first), read_gemini_cli(stub)
    assert stub_src.session_id == src.session_id  # the resumed session's id, nothing of it to resume
    assert stub_src.calls == [] and [m["role"] for m in stub_src.messages] == ["user"]
    assert "<session_context>" in stub_src.messages[0]["content"]
    assert_every_type_known(first, src)
    assert_calls_are_the_servers(src, answered)  # the resumed turn went to the first file
    assert sum(1 for o in raw_lines(first) if record_kind(o) == "header") == 1
    problems: list[ScanProblem] = []
    entries = scan_sources(env={}, home=agent_home.home, index=tmp_path / "sources.json", problems=problems)
    assert [(e.path, e.calls) for e in entries] == [(str(first), 4)] and problems == []
    assert entries[0].title == "Run one command"


def test_a_chat_compression(agent_home: AgentHome, tmp_path: Path) -> None:
    # the compression keeps the latest prompt and compresses what came before it: a second prompt is needed;
    # the resumed run's second request reports a prompt above half the window, the next turn compresses
    with GeminiServer(shell_script(2, big_at=4)) as server:
        run_gemini(agent_home, server, "Run two commands")
        run_gemini(agent_home, server, "Run two more", resume=True, clock=CLOCK + 20_000)
    log = server.calls()
    main = server.calls("main")
    summaries = server.calls("summary")
    if len(summaries) != 2:
        pytest.fail(f"no compression: {[(e.kind, e.path) for e in log]}")
    assert all(e.path.endswith(":generateContent") and not e.body.get("tools") for e in summaries)
    at = sum(1 for e in log[:log.index(summaries[0])] if e.kind == "main")
    path = the_session(agent_home)
    src = read_gemini_cli(path)
    assert_every_type_known(path, src)
    assert_calls_are_the_servers(src, main)  # the summarisation requests are not in the file
    assert_chunked_reads_agree(path, src)
    (comp,) = src.compactions
    assert comp.calls_before == at == 5 and comp.trigger == "auto"  # inside the second turn
    assert comp.tokens_before == main[at - 1].usage["promptTokenCount"] > BIG_PROMPT
    assert comp.tokens_after == main[at].usage["promptTokenCount"]
    assert comp.summary == SUMMARY_TEXT and comp.cost is None
    assert src.live_start == comp.message_index
    # the live context is what the next request sent: the session context and the summary (one content),
    # the acknowledgement, the kept prompt and the turn so far
    sent = main[at].body["contents"]
    live = src.messages[src.live_start:]
    assert [m["role"] for m in live] == ["user", "user", "assistant", "user", "assistant", "tool", "assistant", "tool",
                                         "assistant"]
    assert live[1]["content"] == sent[0]["parts"][1]["text"] == SUMMARY_TEXT
    assert live[2]["content"] == sent[1]["parts"][0]["text"]
    assert live[3]["content"] == "Run two more" == sent[2]["parts"][0]["text"]
    assert comp.messages_after == 7
    commands, _ = commands_and_outputs(src, src.live_start)
    assert commands == ["echo step0", "echo step1"]
    report = import_it(path, tmp_path)
    assert len(report.compactions) == 1
