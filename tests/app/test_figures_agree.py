"""Issue 27 item 3, the numbers agree: every shared session format (Claude Code, Codex, OpenHands, SWE-agent) opened
in the real window (offscreen) and through the CLI, and every figure that names the same fact compared from what
the views were given (their payloads and cell texts, not pixels):

- a session's cost: the status bar (its SessionCost and its text), the Tools tab, ``ctxbench tools --json`` on the
  file, the usage index's rows of the file (what the Usage view and ``ctxbench usage`` sum) — main, subagents and
  compaction calls each;
- a tool result's tokens: the Tools tab's largest results, ``ctxbench tools --json``, and the Archive tab's row of
  an archived result;
- the tool definitions' tokens: the chart's legend and the last call's tooltip;
- a compaction's before → after: the chat marker, the Compactions tab (cell and tooltip) and the chart's marker
  tooltip, on one basis.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt

from app.cli_tools import cmd_tools
from app.main_window import MainWindow
from engine.sources.detect import detect_format
from engine.sources.discovery import SourceEntry
from engine.sources.readers import read_source
from engine.usage.costs import SessionCost, price_table, source_cost
from engine.usage.rows import rows_of
from tests.app.test_sources_window import SHARED, _need, open_source, win
from widgets.chat_view.layout import marker_line
from widgets.compaction_text import dropped_line
from widgets.formatting import format_usd
from widgets.theme import REGION_LABELS, format_tokens

__all__ = ["win"]

# every shared session of every format: the Claude Code ones have Task subagents, compactions (a call's output a
# streaming placeholder) and tool results a compaction archived; the large Codex rollout a compaction and web searches
SESSIONS = sorted(str(p.relative_to(SHARED)) for folder in ("claude-code", "codex", "openhands", "swe-agent")
                  for p in (SHARED / folder).glob("*") if p.suffix in (".jsonl", ".json", ".traj"))


def _cli_tools(path: Path) -> dict[str, Any]:
    out: list[dict[str, Any]] = []
    assert cmd_tools(argparse.Namespace(path=path, top=10, json=True), out.append, RuntimeError) == 0
    return out[0]


def _same_cost(a: dict[str, Any], b: dict[str, Any], where: str) -> None:
    for key in ("calls", "unpriced_calls", "partial_calls"):
        assert a.get(key) == b.get(key), (where, key, a.get(key), b.get(key))
    if a.get("cost_usd") is None or b.get("cost_usd") is None:
        assert a.get("cost_usd") is None and b.get("cost_usd") is None, (where, a, b)
    else:
        assert a["cost_usd"] == pytest.approx(b["cost_usd"], rel=1e-9, abs=1e-12), where


def _same_session_cost(a: dict[str, Any], b: dict[str, Any], where: str) -> None:
    _same_cost(a, b, where)
    for part in ("main", "subagents", "compaction"):
        _same_cost(a[part], b[part], f"{where} · {part}")


def _usage_rows(path: Path) -> list[dict[str, Any]]:
    src = read_source(path, detect_format(path))
    entry = SourceEntry(agent=src.format, path=path, session_id=src.session_id, project="p", started="",
                        last_activity="", calls=0, last_prompt_tokens=None, window=None, percent_full=None)
    return rows_of(entry, src, price_table(), "f").calls


def _check_cost(win: MainWindow, path: Path, cli: dict[str, Any]) -> SessionCost:
    shown: SessionCost = win.usage_wiring.cost  # type: ignore[attr-defined]  # what the status bar was given
    ours = source_cost(read_source(path, detect_format(path)))
    _same_session_cost(shown.to_json(), ours.to_json(), "status bar vs the file's cost")
    _same_session_cost(cli["cost"], ours.to_json(), "ctxbench tools vs the file's cost")
    text = win.status.texts()["session_cost"]
    total = shown.total
    if total.calls:
        usd = "unknown" if total.usd is None else f"{format_usd(total.usd)}{'+' if total.lower_bound else ''}"
        assert text == f"cost: {usd}"
        assert "\n".join(shown.lines()) in win.status.session_cost_label.toolTip()
    else:
        assert text == "" and win.status.session_cost_label.isHidden()
    tools = win.inspector.tools
    if tools.costs is not None and tools.costs.session is not None:
        _same_session_cost(tools.costs.session.to_json(), ours.to_json(), "Tools tab vs the file's cost")
    # the usage index (Usage view, ctxbench usage): one row per call the session paid for, the same parts
    rows = _usage_rows(path)
    for part, kind in ((ours.main, "main"), (ours.subagents, "task"), (ours.compaction, "compaction")):
        mine = [r for r in rows if r["kind"] == kind]
        assert len(mine) == part.calls, kind
        known = [r["cost_usd"] for r in mine if r["cost_usd"] is not None]
        assert (sum(known) if known else None) == (pytest.approx(part.usd, rel=1e-9) if part.usd is not None
                                                   else None), kind
    return shown


def _check_tool_results(qtbot: Any, win: MainWindow, cli: dict[str, Any]) -> int:
    tools = win.inspector.tools
    win.inspector.setCurrentWidget(tools)  # (attributed when on screen)
    qtbot.waitUntil(lambda: tools.attribution is not None, timeout=30_000)
    assert tools.attribution is not None
    # the window's session and the CLI's are each a reading of the file: a message is the same by its place
    mine = [(r.index, r.tool, r.tokens) for r in tools.attribution.largest]
    theirs = [(r["index"], r["tool"], r["tokens"]) for r in cli["largest"]]
    n = min(len(mine), len(theirs))
    assert mine[:n] == theirs[:n] and (n or (not mine and not theirs))  # a session without tool results: none
    largest = {r.message_id: r.tokens for r in tools.attribution.largest}
    for row in range(tools.results.rowCount()):  # the tab's cells say the same tokens
        mid = tools.result_link(row)[0]
        assert tools.results.item(row, 0).text() == format_tokens(largest[mid])
    by_tool = {t["tool"]: t for t in cli["tools"]}
    for t in tools.attribution.tools:
        assert (t.calls, t.argument_tokens, t.result_tokens) == (
            by_tool[t.tool]["calls"], by_tool[t.tool]["argument_tokens"], by_tool[t.tool]["result_tokens"]), t.tool
    # an archived result: the Archive tab's row of it says the same tokens
    archived = [r for r in range(tools.results.rowCount()) if tools.result_link(r)[1] != "live"]
    for row in archived[:2]:
        mid, _day = tools.result_link(row)
        tools.activate_result(row)

        def item(mid: str = mid) -> Any:
            it = win.inspector.archive.tree.currentItem()
            data = it.data(0, Qt.ItemDataRole.UserRole) if it is not None else None
            return it if data is not None and data.message_id == mid else None

        qtbot.waitUntil(lambda: item() is not None, timeout=10_000)
        assert item().text(2) == format_tokens(largest[mid]), mid
    return len(archived)


def _number_after(label: str, text: str) -> int:
    m = re.search(re.escape(label) + r":? ([\d,]+)", text)
    assert m is not None, (label, text)
    return int(m.group(1).replace(",", ""))


def _legend_tokens(chart: Any, region: str) -> int:
    head = chart.legend_text(region).split(" ", 1)[0].replace(",", "")
    assert head.isdigit(), chart.legend_text(region)
    return int(head)


def _check_tool_definitions(win: MainWindow) -> None:
    """The tool definitions of the last call (its tooltip) and of the next request (the legend): one figure. Where
    the file lacks them and they were inferred from the provider's first figure, the legend draws that count in a
    row labelled so ("System prompt + tools (inferred)", with the system prompt when the file lacks it too) and the
    tooltip says the same count on its own line."""
    chart = win.ensure_chart()
    chart.flush()
    last = chart.column_count() - 1
    if last < 0:
        return
    call = win._chart_data.timeline[last]  # type: ignore[attr-defined]
    rec = call.snapshot
    tip = chart.column_tooltip(last)
    in_tip = _number_after(REGION_LABELS["tools"], tip)
    assert in_tip == rec.tools
    if rec.prefix_source == "inferred" and call.prefix_tokens is not None:
        inferred = call.prefix_tokens
        assert _number_after("System prompt + tools (inferred)", tip) == inferred
        assert _legend_tokens(chart, "system") == inferred and _legend_tokens(chart, "tools") == 0
        assert in_tip in (inferred, 0) or rec.system == inferred, (tip, rec)  # the count is one of the two rows
        if in_tip:
            assert in_tip == inferred, tip  # the tools alone were inferred: the same count, not a scaled share
    else:
        assert _legend_tokens(chart, "tools") == in_tip, (tip, chart.legend_text("tools"))


def _check_compactions(win: MainWindow, expected: int) -> int:
    win.chat.flush()
    markers = [win.chat.item(k).event for k in win.chat.marker_ids()]
    markers = [ev for ev in markers if ev]
    tab = win.inspector.log
    events = tab.events
    assert len(markers) == len(events) == expected, (markers, events)
    chart = win.ensure_chart()
    for i, (marker, ev) in enumerate(zip(markers, events, strict=True)):
        change = marker.change()
        assert change == ev.change()
        assert marker_line(marker).startswith(change.text(format_tokens))
        row = tab.events.index(ev)
        assert tab.table.item(row, 3).text().startswith(change.text(format_tokens, short=True))
        assert f"Before → after: {change.text(format_tokens)}" in tab.table.item(row, 3).toolTip()
        dropped = dropped_line(ev)  # the tokens the compaction dropped (the engine's figure): tab and marker alike
        assert (dropped in tab.table.item(row, 3).toolTip()) if dropped else "Dropped:" not in tab.table.item(
            row, 3).toolTip()
        if i < chart.compaction_count():
            tip = chart.compaction_tooltip(i)
            assert change.before is None or format_tokens(change.before) in tip, tip
            assert change.after is None or format_tokens(change.after) in tip, tip
            assert (dropped in tip) if dropped else "Dropped:" not in tip, tip
    return len(markers)


def _check_basis(win: MainWindow) -> int:
    """A call whose provider figure counts what the file does not hold is labelled so where its estimate is shown."""
    chart = win.ensure_chart()
    labelled = 0
    for i, call in enumerate(win._chart_data.timeline):  # type: ignore[attr-defined]
        if call.prompt_unlike_file:
            labelled += 1
            assert f"Different basis: {call.prompt_unlike_file}" in chart.column_tooltip(i)
    return labelled


def test_every_figure_of_a_fact_is_the_same_in_every_view(qtbot: Any, win: MainWindow) -> None:
    if not SESSIONS:
        pytest.skip(f"the shared sessions are not in {SHARED}")
    seen = {"compactions": 0, "archived": 0, "subagent calls": 0, "other basis": 0}
    for name in SESSIONS:
        path = _need(SHARED / name)
        open_source(qtbot, win, path)
        cli = _cli_tools(path)
        cost = _check_cost(win, path, cli)
        seen["subagent calls"] += cost.subagents.calls
        seen["archived"] += _check_tool_results(qtbot, win, cli)
        _check_tool_definitions(win)
        seen["compactions"] += _check_compactions(win, len(read_source(path, detect_format(path)).compactions))
        seen["other basis"] += _check_basis(win)
    # the facts the corpus can show were shown: a compaction, archived results and subagents' calls
    assert seen["compactions"] >= 2 and seen["archived"] >= 1 and seen["subagent calls"] >= 3, seen
    # 6 web searches, 3 resumed turns (Codex), files re-attached after a compaction (258c7280, 8463c716)
    assert seen["other basis"] == 11, seen
