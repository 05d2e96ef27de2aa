"""The real OpenCode 1.18.34 (its Linux x64 binary package ``opencode-linux-x64``, pinned in
``tests/agents/package.json``), run headless (``opencode run``) and offline against the scripted Chat
Completions server of :mod:`tests.agents.scripted_chat` through an
``@ai-sdk/openai-compatible`` provider; its database is read by :mod:`engine.sources.opencode` (whole, and
polled while OpenCode writes it) and imported, and checked against what the server logged as sent and
answered: the ground truth.

What the pinned version does, as these tests pin it down:

- the provider package is bundled: nothing is installed on first use (only a background ``npm install`` of
  ``@opencode-ai/plugin`` in the config folder, which may fail offline); the models.dev catalogue fetch fails
  offline and is logged, and the run goes on;
- a title request (no tools, not stored in the database) starts every new session;
- one assistant message per provider call (step), whose ``step-finish`` part holds the usage with
  ``tokens.input`` = the prompt less its cached part;
- an auto compaction (the last prompt plus the output reserve above the model's ``limit.context``) is a user
  message with a ``compaction`` part, a ``summary`` assistant message answering a summarisation request without
  tools, then a synthetic "Continue ..." user message;
- the ``task`` tool runs a child session (``parent_id``), named in the call's ``metadata.sessionId``.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engine.sources.model import SourceFormat, SourceSession
from engine.sources.opencode import (
    IGNORED_PARTS,
    KNOWN_PARTS,
    KNOWN_TABLES,
    OpenCodeReader,
    latest_session,
    list_sessions,
    opencode_path,
    read_opencode,
)
from tests import ccusage20
from tests.agents.conftest import AgentHome, Run, agent_bin, pinned_version
from tests.agents.scripted import Logged, Reply, ScriptedServer, ToolCall
from tests.agents.scripted_chat import CHAT_SUMMARY, ChatServer, chat_text

MODEL = "m1"
CONTEXT = 20_000  # the model's limit.context: the big prompt below takes a call above it
OUTPUT = 2_000
BIG = 15_000  # extra prompt tokens a reply claims to make OpenCode compact


def pinned() -> str:
    return pinned_version("opencode")


def env_of(home: AgentHome) -> dict[str, str]:
    h = home.home
    return home.base_env() | {"XDG_CONFIG_HOME": str(h / ".config"), "XDG_DATA_HOME": str(h / ".local" / "share"),
                              "XDG_CACHE_HOME": str(h / ".cache"), "XDG_STATE_HOME": str(h / ".local" / "state"),
                              "OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_SHARE": "1",
                              "OPENCODE_DISABLE_MODELS_FETCH": "1"}


def configure(home: AgentHome, server: ScriptedServer) -> None:
    folder = home.home / ".config" / "opencode"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "opencode.json").write_text(json.dumps({
        "$schema": "https://opencode.ai/config.json", "autoupdate": False, "share": "disabled",
        "model": f"local/{MODEL}",
        "provider": {"local": {"npm": "@ai-sdk/openai-compatible", "name": "local",
                               "options": {"baseURL": f"{server.base_url}/v1", "apiKey": "sk-test"},
                               "models": {MODEL: {"name": MODEL, "limit": {"context": CONTEXT, "output": OUTPUT}}}}},
    }), encoding="utf-8")


def args_of(prompt: str, resume: bool) -> list[str]:
    return ["run", *(["--continue"] if resume else []), "-m", f"local/{MODEL}", prompt]


def run_opencode(home: AgentHome, server: ScriptedServer, prompt: str, *, resume: bool = False) -> Run:
    configure(home, server)
    return home.run(agent_bin("opencode"), args_of(prompt, resume), env_of(home), timeout=120).check()


def the_db(home: AgentHome) -> Path:
    return home.home / ".local" / "share" / "opencode" / "opencode.db"


def main_calls(server: ScriptedServer) -> list[Logged]:
    return server.calls("main")


def has_result(body: dict[str, Any]) -> bool:
    return any(m.get("role") == "tool" for m in body.get("messages") or [])


def shell_script(commands: int, big_at: int = -1, command: str = "echo step{}") -> Callable[[dict[str, Any]], Reply]:
    """``commands`` bash calls (``command`` with the call's number), then a closing text; the answer to main
    request ``big_at`` (0-based) claims :data:`BIG` more prompt tokens (read from the cache), which makes OpenCode
    compact before the next."""
    state = {"requests": 0, "issued": 0}

    def script(body: dict[str, Any]) -> Reply:
        state["requests"] += 1
        extra = BIG if state["requests"] - 1 == big_at else 0
        if state["issued"] < commands:
            state["issued"] += 1
            line = command.format(state["issued"] - 1)
            return Reply(tool_calls=[ToolCall("bash", {"command": line, "description": "print"})],
                         extra_prompt_tokens=extra)
        return Reply(text=f"Done: {state['issued']} commands ran.", extra_prompt_tokens=extra)

    return script


def task_script(body: dict[str, Any]) -> Reply:
    """The main session calls the task tool once; the child runs one command and answers."""
    first_user: dict[str, Any] = next((m for m in body["messages"] if m.get("role") == "user"), {})
    if "CHILD TASK" in json.dumps(first_user):
        if not has_result(body):
            return Reply(tool_calls=[ToolCall("bash", {"command": "echo child", "description": "print"})])
        return Reply(text="child done")
    if not has_result(body):
        return Reply(tool_calls=[ToolCall("task", {"description": "child work", "prompt": "CHILD TASK: echo child",
                                                   "subagent_type": "general"})])
    return Reply(text="Done.")


# --------------------------------------------------------------------------- checks


def db_rows(db: Path, sql: str, *args: Any) -> list[sqlite3.Row]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def assert_every_type_known(db: Path, src: SourceSession, known_tables: frozenset[str] = KNOWN_TABLES,
                            agent: str = "") -> None:
    """Every table and every part type of the database is one the reader reads or leaves out on purpose, and
    the ignored counts are the session's own (``agent``: who wrote the database, for the message)."""
    agent = agent or f"OpenCode {pinned()}"
    tables = {r[0] for r in db_rows(db, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables <= known_tables, f"tables {tables - known_tables} of {agent} are not known"
    kinds = Counter(json.loads(r["data"])["type"] for r in db_rows(db, "SELECT data FROM part WHERE session_id = ?",
                                                                   src.session_id))
    assert set(kinds) <= KNOWN_PARTS, f"part types {set(kinds) - KNOWN_PARTS} of {agent} are not known"
    assert src.skipped == []
    assert {k: v for k, v in src.ignored.items() if k.split("/")[1] in IGNORED_PARTS} == {
        f"part/{k}": v for k, v in kinds.items() if k in IGNORED_PARTS}


def assert_calls_are_the_servers(src: SourceSession, answered: list[Logged], model: str = MODEL) -> None:
    assert len(src.calls) == len(answered)
    for call, entry in zip(src.calls, answered, strict=True):
        usage = entry.usage
        assert call.prompt_tokens == usage["prompt_tokens"]  # the whole prompt, cached part included
        assert call.cache_read_tokens == usage["prompt_tokens_details"]["cached_tokens"]
        assert call.cache_write_tokens == 0  # the database's figure (the provider reports none: 0, not None)
        assert call.completion_tokens == usage["completion_tokens"]
        assert call.model == entry.body["model"] == model
    ids = [c.request_id for c in src.calls]
    assert all(i.startswith("prt_") for i in ids) and len(set(ids)) == len(ids)


def assert_tool_calls_are_the_servers(src: SourceSession, answered: list[Logged]) -> None:
    sent = [c.arguments for e in answered for c in e.reply.tool_calls]
    read = [json.loads(c["function"]["arguments"]) for m in src.messages for c in m.get("tool_calls") or []]
    assert read == sent
    results = {m["tool_call_id"]: m["content"] for m in src.messages if m["role"] == "tool"}
    calls = [c["id"] for m in src.messages for c in m.get("tool_calls") or []]
    assert set(results) == set(calls)  # every call has its result


def assert_messages_are_the_sent_ones(src: SourceSession, answered: list[Logged]) -> None:
    """The last request of the live context carried the messages the reader puts after ``live_start`` (text
    and tool calls; the model's own last answer comes after it; a message sent as parts: their texts, a line
    apart)."""
    last = answered[-1].body["messages"][1:]  # without the system prompt
    live = src.messages[src.live_start:]
    assert [m["role"] for m in last] == [m["role"] for m in live[:len(last)]]
    for sent, read in zip(last, live, strict=False):
        assert chat_text(sent.get("content")) == (read.get("content") or "")
        assert [c["function"]["name"] for c in sent.get("tool_calls") or []] == [
            c["function"]["name"] for c in read.get("tool_calls") or []]


def import_it(path: Path, tmp_path: Path, fmt: SourceFormat = "opencode") -> Any:
    from engine.ingest import import_source

    report = import_source(path, session_dir=tmp_path / "imported", fmt=fmt)
    assert report.format == fmt and report.skipped == []
    return report


# --------------------------------------------------------------------------- scenarios


def test_shell_calls_read_while_opencode_writes(agent_home: AgentHome, tmp_path: Path) -> None:
    """Three bash calls; the database is polled all along the run (it must not disturb OpenCode), and the
    polled session ends as the one read whole."""
    with ChatServer(shell_script(3)) as server:
        configure(agent_home, server)
        start = time.monotonic()
        proc = subprocess.Popen([str(agent_bin("opencode")), *args_of("Run three commands", False)],
                                cwd=agent_home.work, env=env_of(agent_home), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        reader: OpenCodeReader | None = None
        polls = 0
        while proc.poll() is None and time.monotonic() - start < 120:
            time.sleep(0.05)
            db = the_db(agent_home)
            if reader is None:
                try:
                    reader = OpenCodeReader(db, latest_session(db))
                except Exception:  # not created yet
                    continue
            reader.poll()
            polls += 1
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err[-3000:]
    assert time.monotonic() - start < 60
    assert reader is not None and polls > 3
    reader.poll()
    db = the_db(agent_home)
    src = read_opencode(db)
    answered = main_calls(server)
    assert Counter(e.kind for e in server.calls()) == {"title": 1, "main": 4}
    assert_every_type_known(db, src)
    assert_calls_are_the_servers(src, answered)
    assert_tool_calls_are_the_servers(src, answered)
    assert_messages_are_the_sent_ones(src, answered)
    assert reader.session.messages == src.messages and reader.session.calls == src.calls
    outputs = [m["content"] for m in src.messages if m["role"] == "tool"]
    assert outputs == ["step0\n", "step1\n", "step2\n"]
    assert src.cwd == str(agent_home.work) and src.model == MODEL and not src.compactions and not src.subagents
    assert src.format == "opencode" and src.path == opencode_path(db, src.session_id)
    (info,) = list_sessions(db)
    assert info.id == src.session_id and info.directory == str(agent_home.work) and info.parent_id is None
    report = import_it(db, tmp_path)
    assert report.calls == report.reported_calls == 4


def test_a_continued_session(agent_home: AgentHome, tmp_path: Path) -> None:
    with ChatServer(shell_script(1)) as server:
        run_opencode(agent_home, server, "Run one command")
        run_opencode(agent_home, server, "And now say done", resume=True)
    answered = main_calls(server)
    assert len(answered) == 3  # the command and the closing text, then the continued turn's answer
    db = the_db(agent_home)
    (info,) = list_sessions(db)  # --continue added to the same session
    src = read_opencode(opencode_path(db, info.id))
    assert_every_type_known(db, src)
    assert_calls_are_the_servers(src, answered)
    assert_messages_are_the_sent_ones(src, answered)
    assert [m["content"] for m in src.messages if m["role"] == "user"][-1] == '"And now say done"'
    import_it(opencode_path(db, info.id), tmp_path)


def test_an_auto_compaction(agent_home: AgentHome, tmp_path: Path) -> None:
    with ChatServer(shell_script(3, big_at=1)) as server:
        run_opencode(agent_home, server, "Run three commands")
    kinds = [e.kind for e in server.calls()]
    answered = main_calls(server)
    (summarise,) = server.calls("summary")
    if "summary" not in kinds[2:-1]:
        pytest.fail(f"the compaction did not happen between two calls: {kinds}")
    db = the_db(agent_home)
    src = read_opencode(db)
    assert_every_type_known(db, src)
    assert_calls_are_the_servers(src, answered)  # the summarisation is the compaction's cost, not a call
    assert_tool_calls_are_the_servers(src, answered)
    assert_messages_are_the_sent_ones(src, answered)
    (comp,) = src.compactions
    at = [e for e in server.calls() if e.kind != "title"].index(summarise)
    assert comp.calls_before == at and comp.trigger == "auto"
    assert comp.tokens_before == answered[at - 1].usage["prompt_tokens"]
    assert comp.tokens_after == answered[at].usage["prompt_tokens"]
    assert comp.cost is not None
    assert (comp.cost.prompt_tokens, comp.cost.cache_read_tokens, comp.cost.completion_tokens) == (
        summarise.usage["prompt_tokens"], summarise.usage["prompt_tokens_details"]["cached_tokens"],
        summarise.usage["completion_tokens"])
    assert comp.summary == CHAT_SUMMARY and src.live_start == comp.message_index
    assert src.messages[comp.message_index]["content"] == "What did we do so far?"
    report = import_it(db, tmp_path)
    assert len(report.compactions) == 1
    # ccusage 20 reads the same database to the same tokens, day by day (the compaction's call included)
    ccusage20.assert_same_tokens(agent_home.home, tmp_path / "usage", "opencode")


def test_a_task_runs_a_child_session(agent_home: AgentHome, tmp_path: Path) -> None:
    with ChatServer(task_script) as server:
        run_opencode(agent_home, server, "Delegate the work")
    answered = main_calls(server)
    child_calls = [e for e in answered if "CHILD TASK" in json.dumps(e.body["messages"][1])]
    parent_calls = [e for e in answered if e not in child_calls]
    assert len(child_calls) == 2 and len(parent_calls) == 2
    db = the_db(agent_home)
    src = read_opencode(db)
    assert_every_type_known(db, src)
    assert_calls_are_the_servers(src, parent_calls)
    (ref,) = src.subagents
    task_call = next(c for m in src.messages for c in m.get("tool_calls") or [])
    assert ref.kind == "task" and ref.parent_tool_call_id == task_call["id"] and ref.session is not None
    assert_calls_are_the_servers(ref.session, child_calls)
    assert_every_type_known(db, ref.session)
    parents = {i.id: i.parent_id for i in list_sessions(db)}
    assert parents == {src.session_id: None, ref.id: src.session_id}
    assert latest_session(db) == src.session_id
    report = import_it(db, tmp_path)
    assert [s["calls"] for s in report.subagents] == [2]


def test_nothing_of_the_user_is_touched(agent_home: AgentHome) -> None:
    """Every file OpenCode writes is under the test's home (XDG folders set there)."""
    real_home = Path(os.path.expanduser("~"))
    before = {p: p.stat().st_mtime for p in (real_home / ".local" / "share" / "opencode").glob("*")} if (
        real_home / ".local" / "share" / "opencode").is_dir() else {}
    with ChatServer(shell_script(0)) as server:
        run_opencode(agent_home, server, "Say done")
    assert the_db(agent_home).is_file()
    after = {p: p.stat().st_mtime for p in (real_home / ".local" / "share" / "opencode").glob("*")} if (
        real_home / ".local" / "share" / "opencode").is_dir() else {}
    assert before == after
