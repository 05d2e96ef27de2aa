"""The Usage dock in the real window (offscreen): what the agents of a temp HOME spent, a session opened
from it, the figures following a session file that grows while the dock is open; the open session's cost
so far in the status bar."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt

from app.main_window import MainWindow
from engine.usage import index as index_mod
from engine.usage.index import IndexProgress
from engine.usage.report import UsageReport
from engine.workbench import usage as usage_part
from tests.app.test_sources_window import home, open_source, win  # noqa: F401 (fixtures)
from tests.engine.usage.test_usage_index import _call, _user
from widgets.formatting import format_usd
from widgets.usage_view import PATH_ROLE, UsageView


def _final(qtbot: Any, win: MainWindow) -> UsageReport:  # noqa: F811
    wiring = win.usage_wiring  # type: ignore[attr-defined]
    qtbot.waitUntil(lambda: wiring.report is not None and not wiring.report.updating, timeout=60_000)
    return wiring.report


def test_the_usage_dock_shows_what_the_agents_spent(qtbot: Any, win: MainWindow, home: Path) -> None:  # noqa: F811
    wiring = win.usage_wiring  # type: ignore[attr-defined]
    assert wiring.view is None and not wiring.dock.isVisible()  # built when first shown
    assert wiring.action in win.view_menu.actions()  # type: ignore[attr-defined]
    view = wiring.show()
    view.set_days(0, update=True)  # all time (the shared sessions are from 2026-02)
    report = _final(qtbot, win)
    assert report.total["calls"] > 0 and report.index is not None and report.index["read"] >= 3
    assert report.problem == ""
    assert view.series() and sum(view.bar_totals()) > 0
    agents = {s["agent"] for s in report.sessions}
    assert agents == {"claude-code", "codex"}
    table, model = view.sessions, view.sessions.model()
    assert table.row_count() == len(report.sessions)
    row = next(r for r in range(table.row_count())
               if str(model.data(model.index(r, 0), PATH_ROLE)).endswith("short.jsonl"))
    path = table.path(row)
    with qtbot.waitSignal(win.controller.session_loaded, timeout=30_000) as blocker:
        table.activated.emit(model.index(row, 0))
    assert blocker.args[0].read_only and blocker.args[0].source.path == path
    assert win.chart_dock.isVisible()


def test_the_dock_says_how_far_the_update_has_read_as_the_cli_says_it(
        qtbot: Any, win: MainWindow, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """Each UsageProgress of the update reaches the summary as the engine's sentence (IndexProgress.said: what
    ``ctxbench usage`` writes on a terminal), while the figures of the index as it was are shown."""
    monkeypatch.setattr(index_mod, "PROGRESS_SECONDS", 0.0)
    wiring = win.usage_wiring  # type: ignore[attr-defined]
    view = wiring.show()
    seen: list[tuple[IndexProgress, str]] = []
    win.controller.usage_progress.connect(lambda p: seen.append((p, view.summary.text())))  # (after the wiring's)
    view.set_days(0, update=True)
    report = _final(qtbot, win)
    assert len(seen) >= 3 and all(p.said() in text for p, text in seen[:-1])
    last = seen[-1][0]
    assert (last.files_done, last.files) == (report.index["read"], report.index["read"])
    assert "reading" not in view.summary.text()


def test_the_status_bar_says_the_sessions_cost_so_far(qtbot: Any, win: MainWindow, home: Path) -> None:  # noqa: F811
    view = open_source(qtbot, win, home / ".claude" / "projects" / "-work-spotter" / "tool_heavy.jsonl")
    assert view.timeline and all(r.price is not None for r in view.timeline)
    total = sum(r.price.usd or 0 for r in view.timeline if r.price is not None)
    assert total > 0 and win.status.texts()["session_cost"] == f"cost: {format_usd(total)}"
    assert not win.status.session_cost_label.isHidden()
    assert "Cost: $" in win.ensure_chart().column_tooltip(0)


def test_the_open_dock_follows_the_agents_work(qtbot: Any, win: MainWindow, home: Path,  # noqa: F811
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(usage_part, "AUTO_REFRESH_SECONDS", 0.2)
    wiring = win.usage_wiring  # type: ignore[attr-defined]
    view = wiring.show()
    view.set_days(0, update=True)
    before = _final(qtbot, win)
    assert wiring.timer.isActive() and wiring.timer.interval() == 200
    view.sessions.sort_by(6, Qt.SortOrder.AscendingOrder)  # the user's sort, kept by the live figures
    shown: list[UsageReport] = []
    monkeypatch.setattr(view, "set_report", lambda report: shown.append(report) or UsageView.set_report(view, report))
    qtbot.wait(800)  # a few quiet refreshes: nothing was read, nothing repainted
    assert shown == []
    short = home / ".claude" / "projects" / "-work-spotter" / "short.jsonl"
    with short.open("a") as fh:  # the agent works on
        fh.write(_user(9001, "2026-02-28T10:00:00.000Z") + _call(9002, "2026-02-28T10:00:05.000Z"))
    qtbot.waitUntil(lambda: bool(shown), timeout=20_000)
    after = shown[-1]
    assert not after.updating and after.index is not None and after.index["read"] == 1
    assert after.total["calls"] == before.total["calls"] + 1 and wiring.report is after
    assert view.sessions.horizontalHeader().sortIndicatorSection() == 6
    wiring.dock.hide()  # hidden: no more refreshes
    assert not wiring.timer.isActive()


def test_view_usage_raises_a_readable_usage_window(qtbot: Any, win: MainWindow, home: Path) -> None:  # noqa: F811
    from app.wire_usage import WINDOW_SIZE
    from engine.usage.report import last_days

    wiring = win.usage_wiring  # type: ignore[attr-defined]
    win.resize(1600, 1000)
    assert not wiring.action.isChecked()
    wiring.action.trigger()  # View → Usage: a window of its own, in sight, not a tab behind the chart
    view = wiring.view
    assert view is not None and wiring.dock.isVisible() and wiring.dock.isFloating()
    assert wiring.action.isChecked() and win.chart_dock.isVisible()
    assert (wiring.dock.width(), wiring.dock.height()) == WINDOW_SIZE
    report = _final(qtbot, win)  # the last 30 days, the range made by the engine: today the last day
    start, end = last_days(30)
    assert start is not None and end is not None
    assert (report.since, report.until) == (start.isoformat(), end.isoformat())
    assert view.days()[-1] == end.isoformat() and len(view.days()) == 30
    assert view.plot.height() >= 220
    wiring.action.trigger()  # again: hidden
    assert not wiring.dock.isVisible() and not wiring.action.isChecked()
    wiring.dock.setFloating(False)  # docked by the user: a tab beside the chart
    win.chart_dock.raise_()
    wiring.action.trigger()
    qtbot.waitUntil(lambda: view.isVisible())  # its tab raised: the view in sight
    assert not wiring.dock.isFloating() and wiring.action.isChecked()
    win.chart_dock.raise_()  # the chart's tab raised over it: not in sight, so View → Usage is unticked
    qtbot.waitUntil(lambda: not wiring.action.isChecked())
    wiring.action.trigger()
    qtbot.waitUntil(lambda: view.isVisible())
