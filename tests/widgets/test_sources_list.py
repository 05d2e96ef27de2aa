"""The Sources list and the read-only line, as widgets (rows as the service sends them)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from engine.sources.formats import display_name
from engine.workbench.rows import ProblemRow, SourceRow, ViewSource
from widgets.readonly_bar import ReadOnlyBar
from widgets.sessions_panel import SessionsPanel
from widgets.sources_list import PROBLEMS_SHOWN, SourcesList, age

NOW = datetime.now(UTC)


def row(path: str, agent: str, project: str, minutes: float, **kw: Any) -> SourceRow:
    ts = (NOW - timedelta(minutes=minutes)).isoformat()
    fields: dict[str, Any] = {
        "agent": agent, "agent_name": display_name(agent), "project": project, "session_id": path.rsplit("/", 1)[-1],
        "path": path, "started": ts, "last_activity": ts, "calls": 3, "last_prompt_tokens": 50_000, "window": 200_000,
        "percent_full": 25.0, "model": "claude-opus-4-6", "title": "", "live": False, **kw}
    return SourceRow(**fields)


ROWS = [
    row("/c/a.jsonl", "claude-code", "spotter", 1, live=True, title="fix the server"),
    row("/x/r1.jsonl", "codex", "tool", 90),
    row("/c/b.jsonl", "claude-code", "other", 60 * 30, percent_full=None),
    row("/c/c.jsonl", "claude-code", "spotter", 60 * 24 * 3),
]


@pytest.fixture
def sources(qtbot: Any) -> SourcesList:
    w = SourcesList()
    qtbot.addWidget(w)
    w.resize(320, 400)
    w.show()
    qtbot.waitExposed(w)
    w.set_sources(ROWS)
    return w


def test_grouped_by_agent_then_project_newest_first(sources: SourcesList) -> None:
    tree = sources.tree
    assert [tree.topLevelItem(i).text(0) for i in range(tree.topLevelItemCount())] == ["Claude Code", "Codex"]
    claude = tree.topLevelItem(0)
    assert [claude.child(i).text(0) for i in range(claude.childCount())] == ["spotter", "other"]
    assert sources.paths() == ["/c/a.jsonl", "/c/c.jsonl", "/c/b.jsonl", "/x/r1.jsonl"]
    live = sources.item_for("/c/a.jsonl")
    assert live is not None and live.text(0) == "● fix the server" and live.text(1) == "live"
    assert live.text(2) == "25 %" and "50,000 of 200,000 tokens" in live.toolTip(0)
    old = sources.item_for("/c/c.jsonl")
    assert old is not None and old.text(0) == "c.jsonl" and old.text(1) == "3 d"
    b = sources.item_for("/c/b.jsonl")
    assert b is not None and b.text(1) == "1 d" and b.text(2) == ""
    assert not sources.empty_label.isVisible()


def test_open_refresh_and_selection_kept(sources: SourcesList, qtbot: Any) -> None:
    sources.set_current("/x/r1.jsonl")
    with qtbot.waitSignal(sources.source_opened) as got:
        sources.open_button.click()
    assert got.args == ["/x/r1.jsonl"]
    with qtbot.waitSignal(sources.refresh_requested):
        sources.refresh_button.click()
    sources.set_sources(list(reversed(ROWS)))
    assert sources.current_path() == "/x/r1.jsonl"
    sources.set_sources([])
    assert sources.empty_label.isVisible() and not sources.open_button.isEnabled()


def test_age() -> None:
    assert age((NOW - timedelta(seconds=20)).isoformat(), NOW) == "now"
    assert age((NOW - timedelta(minutes=7)).isoformat(), NOW) == "7 min"
    assert age((NOW - timedelta(hours=5)).isoformat(), NOW) == "5 h"
    assert age("not a date", NOW) == ""


def test_the_sessions_panel_has_a_sources_tab(qtbot: Any) -> None:
    panel = SessionsPanel()
    qtbot.addWidget(panel)
    assert [panel.tabs.tabText(i) for i in range(panel.tabs.count())] == ["Sessions", "Sources"]
    assert panel.tabs.widget(1) is panel.sources


def test_the_read_only_line(qtbot: Any) -> None:
    bar = ReadOnlyBar()
    qtbot.addWidget(bar)
    bar.show()
    source = ViewSource(path="/c/8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl", agent="Claude Code",
                        format="claude-code", following=True, live=True)
    bar.set_view(source, "t")
    assert bar.isVisible() and bar.text().startswith("● live Read-only view of Claude Code session 8463c716-a2e")
    assert bar.continue_button.isVisible() and not bar.parent_button.isVisible()
    bar.set_following(True, False)
    assert bar.text().startswith("○ following")
    bar.set_following(False)
    assert not bar.live_label.isVisible()
    child = replace(source, path="", following=False, subagent="subagents/a7be", parent="spotter-fum")
    bar.set_view(child)
    assert "subagent a7be of spotter-fum" in bar.text() and bar.parent_button.isVisible()
    assert not bar.continue_button.isVisible()
    with qtbot.waitSignal(bar.parent_requested):
        bar.parent_button.click()
    bar.set_view(None)
    assert not bar.isVisible()


def test_the_agents_own_cost_column(sources: SourcesList) -> None:
    from widgets.sources_list import short_usd

    assert sources.tree.headerItem().text(3) == "Cost"
    sources.set_sources([row("/c/a.jsonl", "claude-code", "spotter", 1, agent_cost_usd=0.0912),
                         row("/c/d.jsonl", "claude-code", "spotter", 2, agent_cost_usd=None)])
    paid = sources.item_for("/c/a.jsonl")
    assert paid is not None and paid.text(3) == "$0.09"
    assert paid.toolTip(3) == "The agent's own cost, from its cost records: $0.0912"
    assert "the agent's own cost $0.0912" in paid.toolTip(0)
    unknown = sources.item_for("/c/d.jsonl")
    assert unknown is not None and unknown.text(3) == "" and unknown.toolTip(3) == ""
    assert [short_usd(v) for v in (0.001, 0.0, 3.456, 1234.5)] == ["<$0.01", "$0.00", "$3.46", "$1,234"]


def test_files_that_could_not_be_read_are_counted_with_their_reasons(sources: SourcesList) -> None:
    assert sources.problems_label.isHidden()
    problems = [ProblemRow("claude-code", f"/c/p{n}.jsonl", f"/c/p{n}.jsonl",
                           "not a regular file (a FIFO (named pipe)): not read") for n in range(PROBLEMS_SHOWN + 2)]
    problems[0] = ProblemRow("unknown", "/c/odd-\udcff.jsonl", "/c/odd-\\xff.jsonl", "a <b>bold</b> & odd one")
    sources.set_problems(problems)
    assert sources.problems_label.isVisible()
    assert sources.problems_label.text().startswith(f"⚠ {PROBLEMS_SHOWN + 2} files could not be read")
    tip = sources.problems_label.toolTip()
    assert "/c/odd-\\xff.jsonl: a &lt;b&gt;bold&lt;/b&gt; &amp; odd one" in tip  # as text, never as markup
    assert "/c/p1.jsonl: not a regular file (a FIFO (named pipe)): not read" in tip
    assert f"/c/p{PROBLEMS_SHOWN}.jsonl" not in tip and "… and 2 more" in tip
    assert len(sources.paths()) == len(ROWS)  # the rows are untouched
    sources.set_problems(problems[1:2])
    assert sources.problems_label.text().startswith("⚠ 1 file could not be read")
    sources.set_problems([])
    assert sources.problems_label.isHidden() and sources.problems() == []


def test_a_path_that_is_not_utf8_is_kept_whole(sources: SourcesList, qtbot: Any) -> None:
    odd = "/c/" + "\udcff\udcfe" + ".jsonl"  # a file name's bytes that are not UTF-8, as Python keeps them
    sources.set_sources([*ROWS, row(odd, "claude-code", "-home-\udcffproj", 5)])
    assert odd in sources.paths()
    item = sources.item_for(odd)
    assert item is not None and "\\xff\\xfe" in item.toolTip(0) and item.parent().text(0) == "-home-\\xffproj"
    sources.set_current(odd)
    assert sources.current_path() == odd
    with qtbot.waitSignal(sources.source_opened) as blocker:
        sources.open_button.click()
    assert blocker.args == [odd]  # the path itself, not what Qt can show of it


def test_where_it_looks_and_whose_cost_it_shows_are_said(sources: SourcesList) -> None:
    assert sources.empty_label.text() == "No agent sessions found"  # (until the window says where it looks)
    sources.set_known([("Claude Code", "~/.claude/projects"), ("Cline", "~/.cline/data/sessions")], "Claude Code")
    sources.set_sources([])
    assert sources.empty_label.isVisible()
    assert sources.empty_label.text() == ("No agent sessions found. Sources looks in:\nClaude Code: ~/.claude/projects"
                                          "\nCline: ~/.cline/data/sessions")
    assert sources.tree.headerItem().toolTip(3) == "The agent's own cost in USD, from its cost records (Claude Code)"
