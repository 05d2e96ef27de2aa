"""The "Tools" tab (widgets/inspector/tools_tab.py) on the attribution of a real Claude Code session:
the figures ``ctxbench tools`` prints, the largest results linking to their messages (archived ones to
the Archive tab at their day)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.context.attribution import attribute
from engine.context.diff import history_from_folder
from engine.workbench.analysis import compute_tools
from tests.widgets.imported import import_parent


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return import_parent(tmp_path_factory.mktemp("tools"))


def test_the_tools_tab(qtbot, ins, folder: Path) -> None:
    result, where = compute_tools(folder)
    assert result.to_json() == attribute(history_from_folder(folder), 15).to_json()
    tools = ins.tools
    ins.show_tab("tools")
    tools.set_attribution(result, where)
    assert tools.table.rowCount() == len(result.tools) > 3
    first = result.tools[0]
    assert tools.tool_row(0) == [first.tool, f"{first.calls:,}", f"{first.argument_tokens:,}",
                                 f"{first.result_tokens:,}", f"{first.share * 100:.1f}%"]
    calls = sum(t.calls for t in result.tools)
    assert tools.label.text().startswith(f"{calls:,} tool calls · {result.tool_tokens:,} tokens from tools")
    assert tools.results.rowCount() == len(result.largest) == 15
    sizes = [r.tokens for r in result.largest]
    assert sizes == sorted(sizes, reverse=True)
    assert [tools.results.item(r, 0).text() for r in range(3)] == [f"{s:,}" for s in sizes[:3]]
    live = next(r for r in range(15) if tools.result_link(r)[1] == "live")
    archived = next(r for r in range(15) if tools.result_link(r)[1] != "live")
    assert tools.results.item(live, 2).text() == "in the context"
    assert tools.results.item(archived, 2).text() == "archived 2026-02-11"
    with qtbot.waitSignal(ins.message_activated) as blocker:
        tools.activate_result(live)
    assert blocker.args == [result.largest[live].message_id]
    assert ins.currentWidget() is tools  # a message in the context: the chat only
    ins.set_archive_days(["2026-02-11"])
    with qtbot.waitSignal(ins.archive_day_requested) as asked:
        tools.activate_result(archived)
    assert asked.args == ["2026-02-11"] and ins.currentWidget() is ins.archive
    tools.clear()
    assert tools.table.rowCount() == 0 and tools.attribution is None


def test_a_session_without_tools(qtbot, ins, tmp_path: Path) -> None:
    from engine.context.diff import History

    result = attribute(History([{"id": "u", "role": "user", "content": "hi"}], [], []))
    ins.tools.set_attribution(result, {})
    assert ins.tools.label.text() == "No tool calls in this session"
    assert ins.tools.results.rowCount() == 0
