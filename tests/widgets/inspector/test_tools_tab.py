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


def test_the_tool_definitions_of_an_imported_session(qtbot, ins, tmp_path: Path) -> None:
    import json

    from engine.workbench.imported import import_facts
    from tests.engine.workbench import claude_file as cf
    from widgets.inspector.tools_tab import definitions_text

    folder = cf.import_session(tmp_path)
    facts = import_facts(json.loads((folder / "session.json").read_text(encoding="utf-8")))
    assert facts is not None
    tools = ins.tools
    ins.show_tab("tools")
    assert tools.definitions_pane.isHidden()
    tools.set_definitions(facts)
    assert not tools.definitions_pane.isHidden()
    system = facts.system_prompt_tokens or 0
    total = system + facts.tool_tokens
    assert tools.definitions_label.text() == definitions_text(facts) == (
        f"System prompt {system:,} + 5 tool definitions {facts.tool_tokens:,} = {total:,} tokens in every request"
        " — from the file (as sent)")
    rows = tools.definition_rows()
    names = [r[0] for r in rows]
    assert names == ["System prompt", "Built-in tools (2)", "  Bash", "  Read", "MCP server github (2)",
                     "  create_issue", "  list_prs", "MCP server slack (1)", "  post"]
    github = facts.groups[1]
    assert rows[4][1:] == [f"{github.tokens:,}", f"{github.tokens / total * 100:.1f}%"]
    assert tools.definitions.topLevelItem(2).child(0).toolTip(0) == "mcp__github__create_issue"
    tools.clear()  # a new attribution does not drop them
    assert not tools.definitions_pane.isHidden()
    tools.set_definitions(None)  # a session that was not imported
    assert tools.definitions_pane.isHidden() and tools.definition_rows() == []


def test_an_inferred_prefix(ins) -> None:
    from engine.workbench.imported import import_facts

    facts = import_facts({"import": {"prefix_source": "inferred", "inferred_prefix": {"tokens": 14_000}}})
    ins.tools.set_definitions(facts)
    assert ins.tools.definitions_label.text().startswith(
        "System prompt and tool definitions: 14,000 tokens in every request — inferred")
    assert [r[0] for r in ins.tools.definition_rows()] == ["System prompt and tool definitions (together)"]
