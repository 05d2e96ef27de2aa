"""The "Tools" tab (widgets/inspector/tools_tab.py) on the attribution of a real Claude Code session:
the figures ``ctxbench tools`` prints (tokens and dollars by tool, sortable), a cost that cannot be known
shown as "?" with why, the largest results linking to their messages (archived ones to the Archive tab at
their day)."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from engine.context.attribution import attribute
from engine.context.diff import history_from_folder
from engine.workbench.analysis import compute_tools
from tests.widgets.imported import import_parent


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return import_parent(tmp_path_factory.mktemp("tools"))


def _usd(value: float) -> str:
    from widgets.formatting import format_usd

    return format_usd(value)


def test_the_tools_tab(qtbot, ins, folder: Path) -> None:
    result, where, costs = compute_tools(folder)
    assert result.to_json() == attribute(history_from_folder(folder), 15).to_json()
    assert costs is not None and costs.total.usd is not None and costs.total.unpriced == 0
    tools = ins.tools
    ins.show_tab("tools")
    tools.set_attribution(result, where, costs)
    assert tools.table.rowCount() == len(result.tools) > 3
    first = result.tools[0]
    tc = costs.of(first.tool)
    assert tc.calls_usd is not None and tc.context_usd is not None
    assert tools.tool_row(0) == [first.tool, f"{first.calls:,}", f"{first.argument_tokens:,}",
                                 f"{first.result_tokens:,}", f"{first.share * 100:.1f}%", _usd(tc.calls_usd),
                                 _usd(tc.context_usd)]
    assert tools.table.item(0, 5).toolTip() == f"{tc.responses:,} responses called it"
    # the headers say what the two dollar columns are
    heads = [tools.table.horizontalHeaderItem(c) for c in range(tools.table.columnCount())]
    assert [h.text() for h in heads][5:] == ["Calls $", "Context $"]
    assert heads[5].toolTip().startswith("What the provider calls whose response called this tool cost")
    assert "Estimated" in heads[6].toolTip() and "overlaps Calls $" in heads[6].toolTip()
    # the totals, as ctxbench tools' "cost by tool" line says them
    assert not tools.cost_label.isHidden()
    line = tools.cost_label.text()
    assert costs.calls_usd is not None and costs.context_usd is not None and costs.prompt_usd is not None
    # the session's one cost (main + subagents + compaction, as the status bar, tools and usage say it) first,
    # then what the tools share out: the main calls
    session = costs.session
    assert session is not None and session.subagents.calls == 13 and session.compaction.calls == 1
    plus = "+" if session.total.lower_bound else ""  # its compaction call's output is a placeholder: unknown
    assert line.startswith(f"Session {_usd(session.usd)}{plus} ({session.breakdown()}) · "
                           f"Cost by tool: Calls $ {_usd(costs.calls_usd)} = ")
    assert f"of the main calls' {_usd(costs.total.usd)} " in line
    assert all(part in tools.cost_label.toolTip() for part in session.lines())
    assert f"Context $ {_usd(costs.context_usd)} = " in line and f"of the {_usd(costs.prompt_usd)} input cost" in line
    assert "estimated; overlaps Calls $" in line
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
    assert tools.table.rowCount() == 0 and tools.attribution is None and tools.costs is None
    assert tools.cost_label.isHidden()


def _column(tools, col: int) -> list[str]:
    return [tools.table.item(r, col).text() for r in range(tools.table.rowCount())]


def test_sorting_by_any_column(qtbot, ins, folder: Path) -> None:
    result, where, costs = compute_tools(folder)
    assert costs is not None
    tools = ins.tools
    tools.set_attribution(result, where, costs)
    names = [t.tool for t in result.tools]
    assert _column(tools, 0) == names  # the attribution's order (largest share first) until a header is clicked
    header = tools.table.horizontalHeader()
    by_calls = sorted(result.tools, key=lambda t: costs.of(t.tool).calls_usd or 0.0, reverse=True)
    tools.table.sortByColumn(5, Qt.SortOrder.DescendingOrder)
    assert _column(tools, 0) == [t.tool for t in by_calls]
    assert _column(tools, 5) == [_usd(costs.of(t.tool).calls_usd or 0.0) for t in by_calls]
    tools.table.sortByColumn(6, Qt.SortOrder.AscendingOrder)
    context = [costs.of(n).context_usd or 0.0 for n in _column(tools, 0)]
    assert context == sorted(context) and len(set(context)) > 3
    tools.table.sortByColumn(1, Qt.SortOrder.DescendingOrder)  # by number, not by text ("74" after "5")
    calls = [int(c.replace(",", "")) for c in _column(tools, 1)]
    assert calls == sorted(calls, reverse=True) and max(calls) >= 10 > min(calls)
    tools.table.sortByColumn(0, Qt.SortOrder.AscendingOrder)
    assert _column(tools, 0) == sorted(names, key=str.lower)
    # a new attribution keeps the order chosen
    tools.set_attribution(result, where, costs)
    assert _column(tools, 0) == sorted(names, key=str.lower)
    assert header.sortIndicatorSection() == 0


def test_unknown_costs_are_a_question_mark_with_why(qtbot, ins, folder: Path) -> None:
    from engine.usage.prices import CallCost
    from engine.usage.tool_costs import tool_costs

    history = history_from_folder(folder)
    result = attribute(history, 15)
    tools = ins.tools
    # no call has a price
    unknown = tool_costs(history, [CallCost(None, problem="no price for model x")] * len(history.calls))
    tools.set_attribution(result, {}, unknown)
    assert _column(tools, 5) == _column(tools, 6) == ["?"] * len(result.tools)
    first = unknown.of(result.tools[0].tool)
    assert tools.table.item(0, 5).toolTip() == (
        f"Unknown: none of the {first.responses:,} responses that called it has a price (no price for model x)")
    assert tools.table.item(0, 6).toolTip().startswith(f"Unknown: none of the {first.prompts:,} prompts")
    assert tools.cost_label.text() == "Cost by tool: ?"
    assert tools.cost_label.toolTip() == (
        f"Unknown: none of the session's {len(history.calls)} calls has a price (no price for model x)")
    tools.table.sortByColumn(5, Qt.SortOrder.DescendingOrder)  # sorting unknowns does not fail
    assert sorted(_column(tools, 0)) == sorted(t.tool for t in result.tools)
    # the 11th call without a price: the figures behind it are lower bounds ("+"), never the unknown as $0
    from engine.usage.costs import folder_records
    from engine.usage.tool_costs import price_records

    priced = price_records(folder_records(folder))
    some = tool_costs(history, [*priced[:10], CallCost(None, problem="no usage"), *priced[11:]])
    tools.set_attribution(result, {}, some)
    assert some.total.unpriced == 1 and some.calls_usd is not None
    assert f"Calls $ {_usd(some.calls_usd)}+ = " in tools.cost_label.text()
    assert "1 of the 143 calls without a price (no usage)" in tools.cost_label.toolTip()
    for col in (5, 6):
        plus = [r for r in range(tools.table.rowCount()) if tools.table.item(r, col).text().endswith("+")]
        assert plus and all("without a price" in tools.table.item(r, col).toolTip() for r in plus)
        assert "?" not in _column(tools, col)
    # no costs at all (nothing recorded to price): "?" everywhere, with why
    tools.set_attribution(result, {}, None)
    assert _column(tools, 5) == _column(tools, 6) == ["?"] * len(result.tools)
    assert "nothing to price" in tools.table.item(0, 5).toolTip()
    assert tools.cost_label.text() == "Cost by tool: ?" and "nothing to price" in tools.cost_label.toolTip()


def test_a_session_without_tools(qtbot, ins, tmp_path: Path) -> None:
    from engine.context.diff import History

    result = attribute(History([{"id": "u", "role": "user", "content": "hi"}], [], []))
    ins.tools.set_attribution(result, {})
    assert ins.tools.label.text() == "No tool calls in this session"
    assert ins.tools.results.rowCount() == 0
    assert ins.tools.cost_label.isHidden()  # no tool: no line of costs by tool


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
