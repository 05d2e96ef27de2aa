"""engine.sources.discovery and ``ctxbench sources``: a fake home with Claude Code and Codex folders
(never the real one), newest first, the raw files' figures, and an index that re-reads only changes."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from app import cli
from engine.sources import discovery, opencode_summary
from engine.sources.model import SourceError
from engine.store.config import Settings
from tests.engine.sources.conftest import BIG_CLAUDE, CLAUDE, codex_files, raw_claude_calls, raw_codex_calls


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    (home / ".claude" / "projects" / "-home-me-alpha").mkdir(parents=True)
    shutil.copyfile(BIG_CLAUDE, home / ".claude" / "projects" / "-home-me-alpha" / BIG_CLAUDE.name)
    shutil.copytree(BIG_CLAUDE.with_suffix(""), home / ".claude" / "projects" / "-home-me-alpha" / BIG_CLAUDE.stem)
    agent = next((BIG_CLAUDE.with_suffix("") / "subagents").glob("agent-a[0-9]*.jsonl"))
    shutil.copyfile(agent, home / ".claude" / "projects" / "-home-me-alpha" / agent.name)  # the pre-2.1 place
    (home / ".config" / "claude" / "projects" / "-home-me-beta").mkdir(parents=True)
    shutil.copyfile(CLAUDE / "short.jsonl", home / ".config" / "claude" / "projects" / "-home-me-beta" / "short.jsonl")
    for n, name in enumerate(("tool_heavy.jsonl", "subagent.jsonl")):
        folder = tmp_path / f"cfg{n}" / "projects" / "-p"
        folder.mkdir(parents=True)
        shutil.copyfile(CLAUDE / name, folder / name)
    codex = tmp_path / "codex-home" / "sessions" / "2026" / "02" / "23"
    codex.mkdir(parents=True)
    for path in codex_files():
        shutil.copyfile(path, codex / path.name)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", f"{tmp_path / 'cfg0'},{tmp_path / 'cfg1'}")
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex-home"))
    return home


def test_every_session_newest_first_with_the_raw_figures(home: Path) -> None:
    entries = discovery.scan_sources(Settings())
    assert len(entries) == 7  # 2 Claude Code in the home, 2 in $CLAUDE_CONFIG_DIR, 3 Codex
    stamps = [e.last_activity for e in entries]
    assert stamps == sorted(stamps, reverse=True)
    by_name = {Path(e.path).name: e for e in entries}
    assert not any("agent-" in name for name in by_name)  # subagent files are not sessions of their own
    for path in codex_files():
        raw = raw_codex_calls(path)
        entry = by_name[path.name]
        assert (entry.agent, entry.calls, entry.last_prompt_tokens, entry.window) == (
            "codex", len(raw), raw[-1]["prompt"], raw[-1]["window"])
        assert entry.percent_full == round(100 * raw[-1]["prompt"] / raw[-1]["window"], 1)
    for name in ("short.jsonl", "tool_heavy.jsonl", "subagent.jsonl", BIG_CLAUDE.name):
        raw = raw_claude_calls(CLAUDE / name)
        entry = by_name[name]
        last_line = max(raw, key=lambda c: c["line"])
        assert (entry.agent, entry.calls, entry.last_prompt_tokens, entry.window) == (
            "claude-code", len(raw), last_line["prompt"], 200_000)
        assert entry.started <= entry.last_activity
    assert by_name[BIG_CLAUDE.name].project == "spotter-gqc"  # the session's working folder


def test_a_rescan_reads_only_what_changed(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    read: list[str] = []
    real = discovery.summarize

    def counting(agent: discovery.Agent, path: Path) -> discovery.SourceEntry:
        read.append(path.name)
        return real(agent, path)

    monkeypatch.setattr(discovery, "summarize", counting)
    first = discovery.scan_sources(Settings())
    assert len(read) == 7 and discovery.index_path().is_file()
    read.clear()
    again = discovery.scan_sources(Settings())
    assert read == [] and again == first
    changed = home / ".config" / "claude" / "projects" / "-home-me-beta" / "short.jsonl"
    with open(changed, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"type": "queue-operation", "timestamp": "2030-01-01T00:00:00Z"}) + "\n")
    third = discovery.scan_sources(Settings())
    assert read == ["short.jsonl"] and third[0].path == str(changed)
    read.clear()
    discovery.scan_sources(Settings(), refresh=True)
    assert len(read) == 7


def test_folders_named_in_the_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "empty-home"))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.delenv("CODEX_HOME", raising=False)
    extra = tmp_path / "archive"
    (extra / "old" / "x").mkdir(parents=True)
    shutil.copyfile(CLAUDE / "short.jsonl", extra / "old" / "x" / "short.jsonl")
    shutil.copyfile(codex_files()[1], extra / codex_files()[1].name)
    (extra / "notes.jsonl").write_text('{"role": "user", "content": "not an agent session"}\n', encoding="utf-8")
    assert discovery.scan_sources(Settings()) == []
    entries = discovery.scan_sources(Settings(source_dirs=str(extra)))
    assert sorted(e.agent for e in entries) == ["claude-code", "codex"]


def test_the_command(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["sources", "--json"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert len(rows) == 7 and all(r["type"] == "source" for r in rows)
    assert {"agent", "project", "session_id", "path", "started", "last_activity", "calls", "last_prompt_tokens",
            "window", "percent_full"} <= set(rows[0])
    assert cli.main(["sources"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:3] == ["agent", "project", "session"] and len(table) == 8
    assert discovery.index_path().parent == Path(os.environ["CTXBENCH_DATA_DIR"])  # the test's own data dir


def test_the_agents_own_cost_of_a_claude_code_2_1_3xx_file(home: Path) -> None:
    from tests.engine.workbench import claude_file as cf

    path = cf.write_session(home / ".claude" / "projects" / "-home-me-gamma")
    by_path = {e.path: e for e in discovery.scan_sources(Settings())}
    assert by_path[str(path)].agent_cost_usd == pytest.approx(cf.TOTAL_USD)  # the last cost-state line
    assert by_path[str(path)].calls == 3 and by_path[str(path)].title == "Run the tests please"
    assert all(e.agent_cost_usd is None for p, e in by_path.items() if p != str(path))  # no cost records
    again = {e.path: e for e in discovery.scan_sources(Settings())}  # from the index
    assert again[str(path)].agent_cost_usd == pytest.approx(cf.TOTAL_USD)


# --------------------------------------------------------------------------- Gemini CLI and OpenCode


@pytest.fixture
def gemini_opencode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Any]:
    """A Gemini CLI file under $GEMINI_CLI_HOME and an OpenCode database under $XDG_DATA_HOME (two top-level
    sessions, one with a child session)."""
    from tests.engine.sources.test_gemini_cli import resumed_and_compressed
    from tests.engine.sources.test_opencode import SID, Db, assistant, full_session, tokens, user

    monkeypatch.setenv("HOME", str(tmp_path / "empty-home"))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.delenv("CODEX_HOME", raising=False)
    monkeypatch.setenv("GEMINI_CLI_HOME", str(tmp_path / "gemini-home"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    chats = tmp_path / "gemini-home" / ".gemini" / "tmp" / "proj" / "chats"
    chats.mkdir(parents=True)
    gemini = chats / "session-2026-11-25T10-00-abc12345.jsonl"
    gemini.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in resumed_and_compressed()))
    (tmp_path / "data" / "opencode").mkdir(parents=True)
    db = Db(tmp_path / "data" / "opencode" / "opencode.db")
    full_session(db)
    db.session("ses_other", title="Other work")
    user(db, "msg_o1", "Second question", sid="ses_other")
    assistant(db, "msg_o2", "msg_o1", tokens(40, 4, read=400), text="answer", sid="ses_other")
    assert SID == "ses_main"
    return gemini, db


def test_gemini_cli_and_opencode_sessions(gemini_opencode: tuple[Path, Any]) -> None:
    from engine.sources.gemini_cli import read_gemini_cli
    from engine.sources.opencode import read_opencode

    gemini, db = gemini_opencode
    entries = discovery.scan_sources(Settings())
    assert sorted(e.agent for e in entries) == ["gemini-cli", "opencode", "opencode"]  # the child is no row
    by_id = {e.session_id: e for e in entries}
    g = by_id["abc-123"]
    src = read_gemini_cli(gemini)
    assert (g.agent, g.project, g.path, g.calls, g.last_prompt_tokens, g.window, g.model) == (
        "gemini-cli", "proj", str(gemini), len(src.calls), src.calls[-1].prompt_tokens, 1_048_576, "gemini-2.5-pro")
    assert g.percent_full == round(100 * 900 / 1_048_576, 1) and g.title == "run it"
    assert g.started == src.started and g.last_activity == "2026-11-25T10:00:14.000+00:00"
    main = by_id["ses_main"]
    whole = read_opencode(Path(main.path))
    assert main.path == f"{db.path}#ses_main" and (main.project, main.title, main.model) == (
        "proj", "Run a command", "m1")
    assert (main.calls, main.last_prompt_tokens) == (len(whole.calls), whole.calls[-1].prompt_tokens) == (3, 69)
    assert main.subagents == 1 and main.agent_cost_usd == pytest.approx(1.0)  # its cost and its child's
    assert main.window is None and main.percent_full is None  # OpenCode stores no window
    assert main.started == whole.started and main.last_activity >= whole.last_activity
    other = by_id["ses_other"]
    assert (other.calls, other.last_prompt_tokens, other.subagents, other.title) == (1, 440, 0, "Second question")
    assert [e.session_id for e in entries] == ["abc-123", "ses_other", "ses_main"]  # newest first


def test_an_opencode_database_is_read_again_only_for_the_sessions_that_changed(
        gemini_opencode: tuple[Path, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.sources import sqlite_read
    from tests.engine.sources.test_opencode import assistant, tokens, user

    _, db = gemini_opencode
    read: list[str] = []
    real = opencode_summary._opencode_entry

    def counting(conn: Any, path: Path, row: dict[str, Any], *args: Any) -> discovery.SourceEntry:
        read.append(str(row["id"]))
        return real(conn, path, row, *args)

    monkeypatch.setattr(opencode_summary, "_opencode_entry", counting)
    first = discovery.scan_sources(Settings())
    assert sorted(read) == ["ses_main", "ses_other"]
    read.clear()
    assert discovery.scan_sources(Settings()) == first and read == []  # the database unchanged: the index
    user(db, "msg_o3", "Third", sid="ses_other")
    assistant(db, "msg_o4", "msg_o3", tokens(50, 5, read=500), text="more", sid="ses_other")
    again = {e.session_id: e for e in discovery.scan_sources(Settings())}
    assert read == ["ses_other"] and (again["ses_other"].calls, again["ses_other"].last_prompt_tokens) == (2, 550)
    # busy: the database's rows as the index had them, no error; read at the next scan
    read.clear()
    monkeypatch.setattr(sqlite_read, "BUSY_TIMEOUT", 0.01)
    monkeypatch.setattr(sqlite_read, "RETRIES", 2)
    failed: list[str] = []
    real_summary = discovery.summarize_opencode

    def summary(path: Path, cached: Any = None, *args: Any) -> dict[str, Any]:
        try:
            return real_summary(path, cached, *args)
        except SourceError as exc:
            failed.append(str(exc))
            raise

    monkeypatch.setattr(discovery, "summarize_opencode", summary)
    db.conn.execute("PRAGMA journal_mode=DELETE")  # a rollback journal: a writer's exclusive lock blocks readers
    db.conn.execute("BEGIN EXCLUSIVE")
    try:
        user(db, "msg_o5", "Fourth", sid="ses_other")
        assistant(db, "msg_o6", "msg_o5", tokens(60, 5, read=600), text="more", sid="ses_other")
        st = db.path.stat()
        os.utime(db.path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # the scan sees it changed
        busy = {e.session_id: e for e in discovery.scan_sources(Settings())}
    finally:
        db.conn.execute("COMMIT")
    assert failed and "locked" in failed[0]  # it was tried
    assert read == [] and busy["ses_other"].calls == 2 and len(busy) == 3
    after = {e.session_id: e for e in discovery.scan_sources(Settings())}
    assert read == ["ses_other"] and after["ses_other"].calls == 3


def test_where_gemini_cli_and_opencode_keep_their_sessions(tmp_path: Path) -> None:
    roots = discovery.source_roots(env={"HOME": str(tmp_path)})
    assert ("gemini-cli", tmp_path / ".gemini" / "tmp") in roots
    assert ("opencode", tmp_path / ".local" / "share" / "opencode") in roots
    roots = discovery.source_roots(env={"HOME": str(tmp_path), "GEMINI_CLI_HOME": "/g", "XDG_DATA_HOME": "/x"})
    assert ("gemini-cli", Path("/g/.gemini/tmp")) in roots and ("opencode", Path("/x/opencode")) in roots


def test_gemini_cli_and_opencode_in_folders_named_in_the_settings(
        gemini_opencode: tuple[Path, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gemini, db = gemini_opencode
    extra = tmp_path / "archive"
    (extra / "a" / "chats").mkdir(parents=True)
    shutil.copyfile(gemini, extra / "a" / "chats" / gemini.name)
    db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    shutil.copyfile(db.path, extra / "opencode.db")
    monkeypatch.setenv("GEMINI_CLI_HOME", str(tmp_path / "none"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "none"))
    entries = discovery.scan_sources(Settings(source_dirs=str(extra)))
    assert sorted((e.agent, e.session_id) for e in entries) == [
        ("gemini-cli", "abc-123"), ("opencode", "ses_main"), ("opencode", "ses_other")]


def test_the_command_lists_gemini_cli_and_opencode(gemini_opencode: tuple[Path, Any],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["sources", "--json"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert sorted(r["agent"] for r in rows) == ["gemini-cli", "opencode", "opencode"]
    assert {r["session_id"]: r["subagents"] for r in rows} == {"ses_other": 0, "ses_main": 1, "abc-123": 0}
    assert cli.main(["sources"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert len(table) == 4 and any("opencode.db#ses_main" in line for line in table)


def test_a_gemini_cli_resume_stub_is_not_listed_but_a_new_empty_session_is(
        gemini_opencode: tuple[Path, Any]) -> None:
    gemini, _ = gemini_opencode
    header = {"sessionId": "abc-123", "projectHash": "h", "startTime": "2026-11-25T11:00:00.000Z",
              "lastUpdated": "2026-11-25T11:00:00.000Z", "kind": "main"}
    context = {"$set": {"messages": [{"id": "c1", "timestamp": "2026-11-25T11:00:00.000Z", "type": "user",
                                      "content": [{"text": "<session_context>\nThis is the Gemini CLI.\n"}]}]}}
    stub = gemini.with_name("session-2026-11-25T11-00-abc12345.jsonl")  # the resume's own file, an hour on
    stub.write_text(json.dumps(header) + "\n" + json.dumps(context) + "\n")
    fresh = gemini.with_name("session-2026-11-25T12-00-def67890.jsonl")  # a session started, nothing sent yet
    fresh.write_text(json.dumps(header | {"sessionId": "def-678"}) + "\n" + json.dumps(context) + "\n")
    entries = discovery.scan_sources(Settings())
    gemini_rows = sorted((e.session_id, Path(e.path).name, e.calls) for e in entries if e.agent == "gemini-cli")
    assert gemini_rows == [("abc-123", gemini.name, 4), ("def-678", fresh.name, 0)]


def test_a_codex_subagent_rollout_is_counted_with_its_listed_parent(tmp_path: Path, monkeypatch: Any) -> None:
    # Codex 0.171's spawn_agent: the subagent's rollout beside its parent's, its session_meta naming the parent
    day = tmp_path / "codex-home" / "sessions" / "2026" / "11" / "27"
    day.mkdir(parents=True)

    def rollout(thread: str, meta: dict[str, Any]) -> None:
        line = {"timestamp": "2026-11-27T03:57:48.000Z", "ordinal": 0, "type": "session_meta",
                "payload": {"id": thread, "cwd": "/w/proj", **meta}}
        (day / f"rollout-2026-11-27T03-57-48-{thread}.jsonl").write_text(json.dumps(line) + "\n")

    spawn = {"subagent": {"thread_spawn": {"parent_thread_id": "p1", "depth": 1, "agent_path": "/root/worker"}}}
    rollout("p1", {"source": "exec"})
    rollout("c1", {"parent_thread_id": "p1", "source": spawn})
    rollout("c2", {"source": spawn})  # named in source only
    rollout("c3", {"parent_thread_id": "gone"})  # its parent is not listed: listed on its own
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex-home"))
    entries = discovery.scan_sources(Settings(), index=tmp_path / "index.json")
    assert sorted((e.session_id, e.subagents, e.parent_id) for e in entries) == [("c3", 0, "gone"), ("p1", 2, "")]
    again = discovery.scan_sources(Settings(), index=tmp_path / "index.json")  # from the index: the same
    assert sorted((e.session_id, e.subagents) for e in again) == [("c3", 0), ("p1", 2)]
