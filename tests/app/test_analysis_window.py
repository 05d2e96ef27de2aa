"""Issue 13 items 6, 7, 8b, 9 in the window, on the real Claude Code session 8463c716 imported through
the window: the diff of calls 71 → 72 across its compaction, the Tools tab equal to ``ctxbench tools
--json``, the compaction marker's tooltip and details with what compacting cost, the archived messages
it took out, and the subagent mark at the parent's call whose click names the subagent's session."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QPointF, Qt

from app.main_window import MainWindow
from engine.store.config import Settings
from tests.app.test_imported_window import open_transcript
from tests.app.test_main_window import close, make_window
from tests.conftest import SHARED
from widgets.formatting import format_usd

ROOT = Path(__file__).resolve().parents[2]
PARENT = SHARED / "data" / "sessions" / "claude-code" / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"


class Click:
    """A timeline click as pyqtgraph's scene passes it."""

    def __init__(self, pos: QPointF, button: Qt.MouseButton = Qt.MouseButton.LeftButton,
                 mods: Qt.KeyboardModifier = Qt.KeyboardModifier.NoModifier) -> None:
        self._pos, self._button, self._mods = pos, button, mods

    def scenePos(self) -> QPointF:
        return self._pos

    def button(self) -> Qt.MouseButton:
        return self._button

    def modifiers(self) -> Qt.KeyboardModifier:
        return self._mods


@pytest.fixture
def win(qtbot: Any, fake_settings: Settings, workspace: Path) -> Any:
    if not PARENT.exists():
        pytest.skip(f"{PARENT} is not here")
    window = make_window(qtbot, fake_settings, workspace)
    window.ensure_chart()
    open_transcript(qtbot, window, PARENT)
    yield window
    close(qtbot, window)


def _column(win: MainWindow, index: int) -> QPointF:
    chart = win.chart
    vb = chart._tl_plot.getPlotItem().getViewBox()
    vb.setXRange(index - 3, index + 5, padding=0)
    return vb.mapViewToScene(QPointF(index + 1, 1_000))


def test_the_diff_of_two_calls_picked_on_the_timeline(qtbot: Any, win: MainWindow) -> None:
    chart = win.chart
    chart.flush()
    chart._on_timeline_mouse_clicked(Click(_column(win, 70)))  # pick call 71
    assert chart.selected_call() == 70
    with qtbot.waitSignal(win.controller.diff_ready, timeout=20_000):
        chart._on_timeline_mouse_clicked(Click(_column(win, 71), mods=Qt.KeyboardModifier.ShiftModifier))
    dialog = win.analysis.dialog
    assert dialog is not None and dialog.isVisible()
    view = dialog.view
    assert view.title.text().startswith("Call 71 → call 72") and "1 compaction" in view.title.text()
    assert "167,094 → 42,603" in view.figures.text()
    entered, left = view.section("Entered"), view.section("Left")
    assert left.childCount() == 158 and "158 items" in left.text(1)
    assert entered.child(0).text(1) == "compaction summary"
    # a message row scrolls the chat to it
    row = left.child(5)
    target = row.data(0, Qt.ItemDataRole.UserRole).message_id
    view.activate(row)
    assert win.chat._current == target
    # the context menu: diff with the previous call
    menu = chart.call_menu(10)
    with qtbot.waitSignal(win.controller.diff_ready, timeout=20_000) as blocker:
        menu.actions()[0].trigger()
    assert (blocker.args[0].a, blocker.args[0].b) == (10, 11)
    qtbot.waitUntil(lambda: view.title.text().startswith("Call 10 → call 11"), timeout=5_000)


def test_the_tools_tab_equals_ctxbench_tools(qtbot: Any, win: MainWindow) -> None:
    tools = win.inspector.tools
    win.inspector.setCurrentWidget(tools)  # (attributed when on screen)
    qtbot.waitUntil(lambda: tools.attribution is not None, timeout=20_000)
    folder = win.controller.session.path
    cli = json.loads(subprocess.run([sys.executable, "-m", "app.cli", "tools", str(folder), "--json"], cwd=ROOT,
                                    capture_output=True, text=True, check=True).stdout)
    assert tools.table.rowCount() == len(cli["tools"])
    # the main calls' cost is what the tools share out; the session's (main + subagents + compaction) is the CLI's
    assert tools.costs is not None and tools.costs.total.usd == cli["cost"]["main"]["cost_usd"]
    assert tools.costs.session is not None
    assert tools.costs.session.usd == pytest.approx(cli["cost"]["cost_usd"], rel=1e-12)
    assert tools.cost_label.text().startswith(f"Session {format_usd(tools.costs.session.usd)}+ (main ")
    for row, t in enumerate(cli["tools"]):
        assert tools.tool_row(row) == [t["tool"], f"{t['calls']:,}", f"{t['argument_tokens']:,}",
                                       f"{t['result_tokens']:,}", f"{t['share'] * 100:.1f}%",
                                       format_usd(t["calls_cost_usd"]), format_usd(t["context_cost_usd"])]
    calls_usd = cli["tool_costs"]["calls_cost_usd"]
    assert f"Cost by tool: Calls $ {format_usd(calls_usd)} = " in tools.cost_label.text()
    largest = [tools.result_link(r)[0] for r in range(tools.results.rowCount())]
    assert largest[: len(cli["largest"])] == [r["message_id"] for r in cli["largest"]][: len(largest)]
    # an archived result: the Archive tab shows its day with the message selected, the chat scrolls there
    archived = next(r for r in range(len(largest)) if tools.result_link(r)[1] != "live")
    mid, day = tools.result_link(archived)
    tools.activate_result(archived)
    assert win.inspector.currentWidget() is win.inspector.archive
    assert win.chat._current == mid

    def selected() -> str:
        item = win.inspector.archive.tree.currentItem()
        data = item.data(0, Qt.ItemDataRole.UserRole) if item is not None else None
        return data.message_id if data is not None else ""

    qtbot.waitUntil(lambda: selected() == mid, timeout=10_000)
    assert day == "2026-02-11"


def test_the_compaction_marker_says_what_compacting_cost(qtbot: Any, win: MainWindow) -> None:
    chart = win.chart
    tip = chart.compaction_tooltip(0)
    assert "Compaction (auto)" in tip and "167,731 → 42,603 prompt tokens" in tip
    assert "Compacting cost: 169,910 prompt tokens (167,093 cache read, 2,814 cache write), completion unknown (the " \
           "file holds only a streaming placeholder, 6) · claude-opus-4-6" in tip  # never a figure the file lacks
    assert "This session is being continued" in tip and tip.count("\n") < 14  # only the summary's first lines
    with qtbot.waitSignal(chart.compaction_clicked):
        chart._on_timeline_mouse_clicked(Click(chart._tl_plot.getPlotItem().getViewBox().mapViewToScene(
            QPointF(chart.compaction_x(0), 100_000))))
    log = win.inspector.log
    assert win.inspector.currentWidget() is log
    details = log.detail.toPlainText()
    assert "Compacting cost: 169,910 prompt tokens" in details and "dialog/2026-02-11.jsonl" in details
    assert "Please continue the conversation from where we left off" in details  # the whole summary
    assert log.archive_button.isEnabled()
    with qtbot.waitSignal(win.controller.archive_messages, timeout=10_000) as blocker:
        log.archive_button.click()
    assert blocker.args[0] == "2026-02-11" and len(blocker.args[1]) == 160
    assert win.inspector.currentWidget() is win.inspector.archive


def test_the_subagent_mark_at_the_parent_call(qtbot: Any, win: MainWindow) -> None:
    chart = win.chart
    chart.flush()
    assert chart.subagent_count() == 1
    x, y = chart.subagent_positions()[0]
    assert x == 90.0  # call 90 issued the Task call
    rec = win._chart_data.timeline[89].record
    issuing = next(m for m in win.controller.session.messages if m.get("id") == rec.message_id)
    assert "toolu_017SvvKc8KLbhGMG3tXkf21Z" in [c["id"] for c in issuing["tool_calls"]]
    tip = chart.subagent_tooltip(0)
    for part in ("a7be2f0", "claude-haiku-4-5-20251001", "13 calls", "peak prompt 29,065", "total prompt 313,135"):
        assert part in tip
    vb = chart._tl_plot.getPlotItem().getViewBox()
    vb.setXRange(80, 100, padding=0)
    pos = vb.mapViewToScene(QPointF(x, y))
    assert chart._hit(pos) == ("subagent", 0)
    with qtbot.waitSignal(win.analysis.subagent_requested) as blocker:
        chart._on_timeline_mouse_clicked(Click(pos))
    assert blocker.args == ["subagents/a7be2f0"]
    assert (win.controller.session.path / blocker.args[0]).is_dir()


def test_the_tools_tab_is_refreshed_after_a_turn(qtbot: Any, fake_settings: Settings, workspace: Path,
                                                 server: Any) -> None:
    from tests import fakeserver as fs

    if not PARENT.exists():
        pytest.skip(f"{PARENT} is not here")
    win = make_window(qtbot, fake_settings.replace(context_window=400_000, auto_compact=False), workspace)
    try:
        open_transcript(qtbot, win, PARENT)
        tools = win.inspector.tools
        win.inspector.setCurrentWidget(tools)  # (attributed when on screen)
        qtbot.waitUntil(lambda: tools.attribution is not None, timeout=20_000)
        before = tools.attribution
        assert before is not None
        server.queue(fs.text_reply("continued here"))
        assert win.controller.send("go on")
        qtbot.waitUntil(lambda: win.controller.task("turn") is None, timeout=20_000)
        assert win.controller.session.messages[-1]["content"] == "continued here"
        qtbot.waitUntil(lambda: tools.attribution is not None and tools.attribution.messages == before.messages + 2,
                        timeout=10_000)
        figures = lambda a: [(t.tool, t.calls, t.argument_tokens, t.result_tokens) for t in a.tools]  # noqa: E731
        assert figures(tools.attribution) == figures(before)  # a turn without tools changes no tool's tokens
        assert tools.attribution.history_tokens > before.history_tokens
    finally:
        close(qtbot, win)


@pytest.mark.slow
def test_screenshot_of_a_diff_and_the_tools_tab(tmp_path: Path) -> None:
    import os

    from PySide6.QtGui import QImage

    if not PARENT.exists():
        pytest.skip(f"{PARENT} is not here")
    out = tmp_path / "shot.png"
    proc = subprocess.run([sys.executable, "-m", "app.screenshot", str(out), "--open", str(PARENT), "--tab", "tools",
                           "--diff", "71", "72"], cwd=ROOT, env=dict(os.environ, QT_QPA_PLATFORM="offscreen"),
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert not QImage(str(out)).isNull()
    diff = QImage(str(tmp_path / "shot-diff.png"))
    assert not diff.isNull() and diff.width() >= 600
