"""Issue 30: the cost of the calls a Claude Code 2.1.332 session attributed to a skill, a subagent type and an MCP
server is one figure (the usage index's ``call_rollup``, summed by one query: engine.usage.queries.attribution_query)
shown twice — ``ctxbench usage --by skill|subagent|mcp`` and the Usage view's "Skills · subagents · MCP" tab — and
the two agree, cell by cell; the calls no one was attributed are ``(none)`` in the CLI and left out of the tab."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.cli import main
from engine.usage.index import UsageIndex
from engine.usage.report import usage_report
from tests.engine.sources.test_claude_code_calls import the_lines
from widgets.usage_view import ATTRIBUTION_KINDS, UsageView


@pytest.fixture
def fake_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    folder = home / ".claude" / "projects" / "-tmp-work"
    folder.mkdir(parents=True)
    (folder / "s.jsonl").write_text("".join(json.dumps(o) + "\n" for o in the_lines()))  # shortened from 2.1.332's
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CTXBENCH_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("CTXBENCH_CONFIG_DIR", str(tmp_path / "config"))
    for name in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_DIR"):
        monkeypatch.delenv(name, raising=False)
    return home


def _cli(by: str, capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    assert main(["usage", "--by", by, "--json"]) == 0
    return list(json.loads(capsys.readouterr().out)["groups"])


def test_the_cost_per_skill_subagent_and_mcp_server_agrees(qtbot: Any, fake_home: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    cli = {by: _cli(by, capsys) for by in ATTRIBUTION_KINDS}
    assert [g["skill"] for g in cli["skill"]] == ["greet", None]  # the unattributed calls last, "(none)"
    assert [g["calls"] for g in cli["skill"]] == [2, 3]
    assert [(g["mcp"], g["calls"]) for g in cli["mcp"]] == [("echo", 1), (None, 4)]
    assert [(g["subagent"], g["calls"]) for g in cli["subagent"]] == [("general-purpose", 1), (None, 4)]
    assert main(["usage", "--by", "skill", "--no-update"]) == 0
    table = capsys.readouterr().out
    assert "greet" in table and "(none)" in table
    total = sum(g["cost_usd"] for g in cli["skill"])
    assert total > 0 and total == pytest.approx(sum(g["cost_usd"] for g in cli["mcp"]))
    # the Usage view: the report's rows (the same query) drawn in its tab
    index = UsageIndex(tmp_path / "data" / "usage")
    report = usage_report(index)
    view = UsageView()
    qtbot.addWidget(view)
    view.set_report(report)
    tab = view.attribution
    shown = {(tab.text(r, 0), tab.text(r, 1)): (tab.text(r, 2), tab.text(r, 3)) for r in range(tab.row_count())}
    expected = {(ATTRIBUTION_KINDS[by], g[by]): g for by, groups in cli.items() for g in groups if g[by] is not None}
    assert set(shown) == set(expected) == {("Skill", "greet"), ("MCP server", "echo"), ("Subagent", "general-purpose")}
    for key, group in expected.items():
        row = next(a for a in report.attribution if (ATTRIBUTION_KINDS[a["kind"]], a["name"]) == key)
        assert row["cost_usd"] == pytest.approx(group["cost_usd"]) and row["calls"] == group["calls"]
        cost_text, calls_text = shown[key]
        assert calls_text == f"{group['calls']:,}" and cost_text.startswith("$")
