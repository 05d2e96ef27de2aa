"""The Usage dock in the real window (offscreen): what the agents of a temp HOME spent, a session opened
from it; the open session's cost so far in the status bar."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.main_window import MainWindow
from tests.app.test_sources_window import home, open_source, win  # noqa: F401 (fixtures)
from widgets.formatting import format_usd
from widgets.usage_view import PATH_ROLE


def _final(qtbot: Any, win: MainWindow) -> dict[str, Any]:  # noqa: F811
    wiring = win.usage_wiring  # type: ignore[attr-defined]
    qtbot.waitUntil(lambda: wiring.report is not None and not wiring.report.get("updating"), timeout=60_000)
    return wiring.report


def test_the_usage_dock_shows_what_the_agents_spent(qtbot: Any, win: MainWindow, home: Path) -> None:  # noqa: F811
    wiring = win.usage_wiring  # type: ignore[attr-defined]
    assert wiring.view is None and not wiring.dock.isVisible()  # built when first shown
    assert wiring.action in win.view_menu.actions()  # type: ignore[attr-defined]
    view = wiring.show()
    view.set_days(0, update=True)  # all time (the shared sessions are from 2026-02)
    report = _final(qtbot, win)
    assert report["total"]["calls"] > 0 and report["index"]["read"] >= 3 and report["problem"] == ""
    assert view.series() and sum(view.bar_totals()) > 0
    agents = {s["agent"] for s in report["sessions"]}
    assert agents == {"claude-code", "codex"}
    table = view.sessions
    assert table.rowCount() == len(report["sessions"])
    path = next(str(table.item(r, 0).data(PATH_ROLE)) for r in range(table.rowCount())
                if str(table.item(r, 0).data(PATH_ROLE)).endswith("short.jsonl"))
    row = next(r for r in range(table.rowCount()) if table.item(r, 0).data(PATH_ROLE) == path)
    with qtbot.waitSignal(win.controller.session_loaded, timeout=30_000) as blocker:
        table.itemActivated.emit(table.item(row, 0))
    assert blocker.args[0].read_only and blocker.args[0].source["path"] == path
    assert win.chart_dock.isVisible()


def test_the_status_bar_says_the_sessions_cost_so_far(qtbot: Any, win: MainWindow, home: Path) -> None:  # noqa: F811
    view = open_source(qtbot, win, home / ".claude" / "projects" / "-work-spotter" / "tool_heavy.jsonl")
    assert view.timeline and all("cost_usd" in r for r in view.timeline)
    total = sum(r["cost_usd"] or 0 for r in view.timeline)
    assert total > 0 and win.status.texts()["session_cost"] == f"cost: {format_usd(total)}"
    assert not win.status.session_cost_label.isHidden()
    assert "Cost: $" in win.ensure_chart().column_tooltip(0)
