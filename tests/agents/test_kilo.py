"""The real Kilo CLI 7.7.9 (its Linux x64 binary package ``@kilocode/cli-linux-x64``, pinned in
``tests/agents/package.json``; 7.8.1's binary is not on the registry), run headless (``kilo run --format json
--auto``) and offline against the scripted Chat Completions server of :mod:`tests.agents.scripted_chat` through an
``@ai-sdk/openai-compatible`` provider; its database ``<home>/.local/share/kilo/kilo.db`` is read by
:mod:`engine.sources.kilo` (OpenCode's reader in Kilo's dialect: whole, and polled while Kilo writes it), listed,
imported and counted in the usage index, and checked against what the server logged as sent and answered.

What the pinned version does, as these tests pin it down (the helpers are OpenCode's tier test's):

- with ``KILO_DISABLE_MODELS_FETCH``, ``KILO_TELEMETRY_LEVEL=off`` and ``enabled_providers`` it looks nothing up;
  the provider package is bundled; no title request (the session keeps "New session - <time>");
- one assistant message per provider call, whose ``step-finish`` part holds the usage with ``tokens.input`` = the
  prompt less its cached part, and ``cost`` 0 for a model Kilo has no price for;
- every user message is sent with an ``<environment_details>`` block the database does not hold (rebuilt by the
  reader);
- ``-c`` continues the last session: the same session;
- an auto compaction (the prompt above ``limit.context − limit.output``) is a user message with a ``compaction``
  part (``auto``), a ``summary`` assistant message answering a tool-less summarisation request (its tokens are that
  call's usage), then a synthetic "Continue ..." user message;
- a manual compaction (the TUI's ``/compact``: ``POST /session/{id}/summarize`` {providerID, modelID} on ``kilo
  serve``, answered ``true`` once the summary is written) is the same user message with ``auto: false`` and the
  same ``summary`` message, without the "Continue ..." message.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
from pathlib import Path

from engine.sources.discovery import scan_sources
from engine.sources.kilo import KILO, read_kilo
from engine.sources.model import SourceSession
from engine.sources.opencode import OpenCodeReader, latest_session, list_sessions, opencode_path
from engine.usage.index import UsageIndex
from tests import ccusage20
from tests.agents.conftest import AgentHome, Run, agent_bin, pinned_version
from tests.agents.scripted import ScriptedServer
from tests.agents.scripted_chat import CHAT_SUMMARY, ChatServer
from tests.agents.test_opencode import (
    assert_calls_are_the_servers,
    assert_every_type_known,
    assert_messages_are_the_sent_ones,
    assert_tool_calls_are_the_servers,
    db_rows,
    import_it,
    shell_script,
    task_script,
)

MODEL = "fake-model"
CONTEXT, OUTPUT = 32_000, 2_000
SMALL_CONTEXT = 17_000  # compacts past 15,000 prompt tokens: the system prompt and tools are about 12,600
LONG_COMMAND = "seq 1000 1499 # {}"  # 500 lines: about 750 prompt tokens a result
ENV = {"KILO_TELEMETRY_LEVEL": "off", "KILO_DISABLE_MODELS_FETCH": "1", "KILO_DISABLE_SESSION_INGEST": "1",
       "KILO_DISABLE_LSP_DOWNLOAD": "1", "KILO_DISABLE_SHARE": "1"}


def configure(home: AgentHome, server: ScriptedServer, context: int = CONTEXT) -> None:
    folder = home.home / ".config" / "kilo"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kilo.json").write_text(json.dumps({
        "provider": {"local": {"npm": "@ai-sdk/openai-compatible", "name": "Local",
                               "options": {"baseURL": f"{server.base_url}/v1", "apiKey": "sk-test"},
                               "models": {MODEL: {"name": MODEL, "limit": {"context": context, "output": OUTPUT}}}}},
        "model": f"local/{MODEL}", "enabled_providers": ["local"], "autoupdate": False, "share": "disabled",
    }), encoding="utf-8")


def args_of(prompt: str, resume: bool) -> list[str]:
    return ["run", "--format", "json", "-m", f"local/{MODEL}", "--auto", *(["-c"] if resume else []), prompt]


def run_kilo(home: AgentHome, server: ScriptedServer, prompt: str, *, resume: bool = False,
             context: int = CONTEXT) -> Run:
    configure(home, server, context)
    return home.run(agent_bin("kilo"), args_of(prompt, resume), home.base_env() | ENV, timeout=180).check()


def summarize_over_http(home: AgentHome, session_id: str) -> None:
    """What the TUI's ``/compact`` does: ``kilo serve`` (same home and config, a free loopback port), ``POST
    /session/{id}/summarize`` with the model, which answers once the compaction is done; then the server is
    stopped."""
    proc = subprocess.Popen([str(agent_bin("kilo")), "serve", "--port", "0", "--hostname", "127.0.0.1"],
                            cwd=home.work, env=home.base_env() | ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        url = ""
        assert proc.stdout is not None
        for line in proc.stdout:  # "kilo server listening on http://127.0.0.1:PORT"
            if "listening on " in line:
                url = line.split("listening on ", 1)[1].strip()
                break
        assert url.startswith("http://127.0.0.1:"), proc.stderr.read()[-3000:] if proc.stderr else ""
        body = json.dumps({"providerID": "local", "modelID": MODEL}).encode()
        request = urllib.request.Request(f"{url}/session/{session_id}/summarize", data=body, method="POST",
                                         headers={"Content-Type": "application/json",
                                                  "x-kilo-directory": str(home.work)})
        with urllib.request.urlopen(request, timeout=150) as answer:
            assert answer.status == 200 and json.loads(answer.read()) is True
    finally:
        proc.terminate()
        proc.communicate(timeout=60)


def the_db(home: AgentHome) -> Path:
    return home.home / ".local" / "share" / "kilo" / "kilo.db"


def assert_known(db: Path, src: SourceSession) -> None:
    assert_every_type_known(db, src, KILO.known_tables, f"Kilo {pinned_version('kilo')}")


def test_calls_read_while_kilo_writes_then_a_continued_session(agent_home: AgentHome, tmp_path: Path) -> None:
    """Three bash calls, the database polled all along the run; then ``-c``: the same session. Every call's usage
    in the database is the server's answer, by order; listed in Sources, imported, counted in the usage index."""
    with ChatServer(shell_script(3)) as server:
        configure(agent_home, server)
        start = time.monotonic()
        proc = subprocess.Popen([str(agent_bin("kilo")), *args_of("Run three commands", False)],
                                cwd=agent_home.work, env=agent_home.base_env() | ENV, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        reader: OpenCodeReader | None = None
        polls = 0
        while proc.poll() is None and time.monotonic() - start < 150:
            time.sleep(0.05)
            if reader is None:
                try:
                    reader = OpenCodeReader(the_db(agent_home), latest_session(the_db(agent_home)), dialect=KILO)
                except Exception:  # not created yet
                    continue
            reader.poll()
            polls += 1
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err[-3000:]
        assert reader is not None and polls > 3
        reader.poll()
        first = read_kilo(the_db(agent_home))
        assert reader.session.messages == first.messages and reader.session.calls == first.calls
        run_kilo(agent_home, server, "And now say done", resume=True)
    answered = server.calls("main")
    assert [e.kind for e in server.calls()] == ["main"] * 5  # no title request
    db = the_db(agent_home)
    (info,) = list_sessions(db)  # -c added to the same session
    src = read_kilo(opencode_path(db, info.id))
    assert src.format == "kilo" and src.cwd == str(agent_home.work) and src.model == MODEL
    assert_known(db, src)
    assert_calls_are_the_servers(src, answered, MODEL)  # 5/5 by order
    assert_tool_calls_are_the_servers(src, answered)
    assert_messages_are_the_sent_ones(src, answered)  # the environment block of each user message included
    assert [m["content"] for m in src.messages if m["role"] == "tool"] == ["step0\n", "step1\n", "step2\n"]
    assert src.agent_cost_usd is None and not src.compactions and not src.subagents
    assert (src.window, src.window_source) == (CONTEXT, "kilo.json")  # the model's limit.context
    (entry,) = scan_sources(env={"HOME": str(agent_home.home)}, home=agent_home.home, index=tmp_path / "idx.json")
    assert (entry.agent, entry.project, entry.title) == ("kilo", "work", '"Run three commands"')
    assert entry.calls == 5 and entry.last_prompt_tokens == answered[-1].usage["prompt_tokens"]
    assert entry.window == CONTEXT and entry.percent_full == round(100 * entry.last_prompt_tokens / CONTEXT, 1)
    report = import_it(opencode_path(db, info.id), tmp_path, "kilo")
    assert report.calls == report.reported_calls == 5
    index = UsageIndex(tmp_path / "usage")
    assert index.update(home=agent_home.home, env={"HOME": str(agent_home.home)}).calls == 5
    (row,) = index.query("session")
    assert row["agent"] == "kilo" and row["prompt_tokens"] == sum(e.usage["prompt_tokens"] for e in answered)
    assert row["agent_cost_usd"] is None and row["cost_usd"] is None  # no price for the model: unknown, not 0
    assert row["window"] == CONTEXT and row["peak_prompt_tokens"] == max(e.usage["prompt_tokens"] for e in answered)


def test_an_auto_compaction_read_with_its_own_usage(agent_home: AgentHome, tmp_path: Path) -> None:
    """Long command outputs fill a 17,000-token window: Kilo compacts by itself in the middle of the turn (7.7.7
    once; 7.7.9 three times, each later summary combining the one before), each compaction with its own usage."""
    with ChatServer(shell_script(6, command=LONG_COMMAND)) as server:
        run_kilo(agent_home, server, "Run six commands", context=SMALL_CONTEXT)
    kinds = [e.kind for e in server.calls()]
    summaries = [i for i, kind in enumerate(kinds) if kind == "summary"]
    assert summaries and summaries[0] > 0 and kinds[-1] == "main", kinds
    answered = server.calls("main")
    db = the_db(agent_home)
    src = read_kilo(db)
    assert_known(db, src)
    assert_calls_are_the_servers(src, answered, MODEL)  # the summarisations are the compactions' cost, not calls
    assert_tool_calls_are_the_servers(src, answered)
    assert_messages_are_the_sent_ones(src, answered)
    assert len(src.compactions) == len(summaries)
    for k, (comp, at) in enumerate(zip(src.compactions, summaries, strict=True)):
        summarise, main = server.calls()[at], at - k  # (the main calls before it)
        assert comp.trigger == "auto" and comp.calls_before == main
        assert comp.tokens_before == answered[main - 1].usage["prompt_tokens"] > SMALL_CONTEXT - OUTPUT
        assert comp.tokens_after == answered[main].usage["prompt_tokens"]
        assert comp.cost is not None and (comp.cost.prompt_tokens, comp.cost.cache_read_tokens,
                                          comp.cost.completion_tokens) == (
            summarise.usage["prompt_tokens"], summarise.usage["prompt_tokens_details"]["cached_tokens"],
            summarise.usage["completion_tokens"])
        assert comp.cost_usd is None  # Kilo's 0: no price known
        assert comp.summary == CHAT_SUMMARY
    assert src.live_start == src.compactions[-1].message_index
    assert src.window == SMALL_CONTEXT
    assert len(src.calls) + len(summaries) == len(server.calls())  # every call of the run, the summaries included
    report = import_it(db, tmp_path, "kilo")
    assert len(report.compactions) == len(summaries)
    # ccusage 20 reads the same database to the same tokens, day by day, every call of the run counted
    days = ccusage20.assert_same_tokens(agent_home.home, tmp_path / "usage", "kilo")
    assert sum(day["calls"] for day in days.values()) == len(server.calls())


def test_a_manual_compaction_through_kilo_serve(agent_home: AgentHome, tmp_path: Path) -> None:
    """Two commands with ``kilo run``; then ``/compact`` through ``kilo serve``'s summarize API; then ``kilo run
    -c``. The compaction is read as manual (its part's ``auto: false``), with the summarisation call's usage."""
    with ChatServer(shell_script(2)) as server:
        run_kilo(agent_home, server, "Run two commands")
        db = the_db(agent_home)
        session_id = latest_session(db)
        summarize_over_http(agent_home, session_id)
        run_kilo(agent_home, server, "And now say done", resume=True)
    assert [e.kind for e in server.calls()] == ["main"] * 3 + ["summary", "main"]
    answered = server.calls("main")
    (summarise,) = server.calls("summary")
    assert not summarise.body.get("tools")
    parts = [json.loads(r["data"]) for r in db_rows(db, "SELECT data FROM part WHERE session_id = ? ORDER BY id",
                                                    session_id)]
    assert [p for p in parts if p["type"] == "compaction"] == [{"type": "compaction", "auto": False}]
    src = read_kilo(opencode_path(db, session_id))
    assert_known(db, src)
    assert_calls_are_the_servers(src, answered, MODEL)  # 4/4 by order; the summarisation is the compaction's
    assert_tool_calls_are_the_servers(src, answered)
    assert_messages_are_the_sent_ones(src, answered)  # after the compaction: its question, the summary, the prompt
    (comp,) = src.compactions
    assert (comp.trigger, comp.trigger_source) == ("manual", "manual") and comp.calls_before == 3
    assert comp.tokens_before == answered[2].usage["prompt_tokens"]
    assert comp.tokens_after == answered[3].usage["prompt_tokens"]
    assert comp.cost is not None and (comp.cost.prompt_tokens, comp.cost.cache_read_tokens,
                                      comp.cost.completion_tokens) == (
        summarise.usage["prompt_tokens"], summarise.usage["prompt_tokens_details"]["cached_tokens"],
        summarise.usage["completion_tokens"])
    assert comp.summary == CHAT_SUMMARY and src.live_start == comp.message_index
    assert not any("Continue if you have next steps" in str(m.get("content")) for m in src.messages)
    assert len(src.calls) + 1 == len(server.calls())  # every call of the three processes
    report = import_it(opencode_path(db, session_id), tmp_path, "kilo")
    assert report.calls == 4 and [c["trigger"] for c in report.compactions] == ["manual"]


def test_a_task_runs_a_child_session(agent_home: AgentHome, tmp_path: Path) -> None:
    with ChatServer(task_script) as server:
        run_kilo(agent_home, server, "Delegate the work")
    answered = server.calls("main")
    child_calls = [e for e in answered if "CHILD TASK" in json.dumps(e.body["messages"][1])]
    parent_calls = [e for e in answered if e not in child_calls]
    assert len(child_calls) == 2 and len(parent_calls) == 2
    db = the_db(agent_home)
    src = read_kilo(db)
    assert_known(db, src)
    assert_calls_are_the_servers(src, parent_calls, MODEL)
    (ref,) = src.subagents
    task_call = next(c for m in src.messages for c in m.get("tool_calls") or [])
    assert ref.kind == "task" and ref.parent_tool_call_id == task_call["id"] and ref.session is not None
    assert ref.session.format == "kilo"
    assert_calls_are_the_servers(ref.session, child_calls, MODEL)
    assert_messages_are_the_sent_ones(ref.session, child_calls)
    assert {i.id: i.parent_id for i in list_sessions(db)} == {src.session_id: None, ref.id: src.session_id}
    (entry,) = scan_sources(env={"HOME": str(agent_home.home)}, home=agent_home.home, index=tmp_path / "idx.json")
    assert entry.subagents == 1 and entry.calls == 2
    report = import_it(db, tmp_path, "kilo")
    assert [s["calls"] for s in report.subagents] == [2]


def test_nothing_of_the_user_is_touched(agent_home: AgentHome) -> None:
    """Every file Kilo writes is under the test's home."""
    real = Path(os.path.expanduser("~")) / ".local" / "share" / "kilo"
    before = {p: p.stat().st_mtime for p in real.glob("*")} if real.is_dir() else {}
    with ChatServer(shell_script(0)) as server:
        run_kilo(agent_home, server, "Say done")
    assert the_db(agent_home).is_file()
    assert before == ({p: p.stat().st_mtime for p in real.glob("*")} if real.is_dir() else {})
