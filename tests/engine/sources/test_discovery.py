"""engine.sources.discovery and ``ctxbench sources``: a fake home with Claude Code and Codex folders
(never the real one), newest first, the raw files' figures, and an index that re-reads only changes."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from app import cli
from engine.sources import discovery
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
