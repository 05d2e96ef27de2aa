"""Issue 27 in the real window (offscreen): back from a source to your own session with one click, every
inspector pane emptied on a switch, and the first-run pointer to the Sources tab."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt

from app.main_window import MainWindow
from engine.store.config import Settings
from tests.app.test_main_window import close, make_window
from tests.app.test_sources_window import BIG, _need, home, open_source, win

__all__ = ["home", "win"]


def _start(qtbot: Any, win: MainWindow) -> Any:
    """A new session shown, as at launch (without start()'s litellm warm-up: a background import in
    this process while earlier tests' windows are collected can destroy Qt objects off the main thread)."""
    with qtbot.waitSignal(win.controller.session_loaded, timeout=20_000) as blocker:
        win.controller.new_session()
    return blocker.args[0]


def _click_session(qtbot: Any, win: MainWindow, session_id: str) -> None:
    lst = win.sessions.list
    row = win.sessions.session_ids().index(session_id)
    rect = lst.visualItemRect(lst.item(row))
    qtbot.mouseClick(lst.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())


def test_a_click_on_your_own_session_after_a_source_opens_it(qtbot: Any, win: MainWindow) -> None:
    own = _start(qtbot, win)
    assert win.sessions.current_id() == own.id
    view = open_source(qtbot, win, _need(BIG))
    assert view.read_only and win.sessions.current_id() is None  # what is shown is not one of the list
    with qtbot.waitSignal(win.controller.session_loaded, timeout=20_000) as blocker:
        _click_session(qtbot, win, own.id)
    back = blocker.args[0]
    assert back.id == own.id and not back.read_only
    assert win.sessions.current_id() == own.id and win.input.isEnabled()


def test_every_inspector_pane_is_emptied_on_a_switch(qtbot: Any, win: MainWindow) -> None:
    own = _start(qtbot, win)
    view = open_source(qtbot, win, _need(BIG))
    assert view.compactions, "the shared session has a compaction"
    insp = win.inspector
    insp.show_compaction(view.compactions[0])  # its details, as a click on the row shows them
    assert insp.log.detail.toPlainText().strip() and insp.log.archive_button.isEnabled()
    if view.state.archive_days:
        day = sorted(view.state.archive_days)[0]
        with qtbot.waitSignal(win.controller.archive_messages, timeout=10_000):
            insp.show_archived(day)
        tree = insp.archive_tree
        qtbot.waitUntil(lambda: tree.topLevelItem(0) is not None and tree.topLevelItem(0).childCount() > 0,
                        timeout=10_000)
        tree.setCurrentItem(tree.topLevelItem(0).child(0))  # the message in full below the list
    else:
        insp.archive_view.setPlainText("a message of the source")
    assert insp.archive_view.toPlainText().strip()
    insp.archive.search_edit.setText("needle")
    with qtbot.waitSignal(win.controller.session_loaded, timeout=20_000):
        _click_session(qtbot, win, own.id)
    assert insp.log.detail.toPlainText() == "" and not insp.log.archive_button.isEnabled()
    assert insp.log.table.rowCount() == 0 and insp.log.current_event() is None
    assert insp.archive_view.toPlainText() == "" and insp.archive.search_edit.text() == ""
    assert insp.archive.checked_ids() == [] and insp.viewer.path() == ""


def test_the_first_run_pointer_names_the_sources_and_opens_the_tab(
    qtbot: Any, win: MainWindow, home: Path, fake_settings: Settings, workspace: Path
) -> None:
    hint = win.sources_wiring.hint  # type: ignore[attr-defined]
    _start(qtbot, win)
    assert hint.isHidden()  # nothing scanned yet
    with qtbot.waitSignal(win.controller.sources_listed, timeout=20_000):
        win.controller.scan_sources()  # what the app does at launch (app.main)
    assert hint.isVisible()
    assert hint.text().startswith("Found 2 Claude Code sessions and 1 Codex session on this machine.")
    assert win.sessions.tabs.currentWidget() is not win.sessions.sources
    hint.button.click()
    assert win.sessions.tabs.currentWidget() is win.sessions.sources and hint.isHidden()
    # a new session, a new launch: it stays away once the Sources tab was seen
    win.sessions.tabs.setCurrentIndex(0)
    with qtbot.waitSignal(win.controller.session_loaded, timeout=20_000):
        win.controller.new_session()
    assert hint.isHidden()
    second = make_window(qtbot, fake_settings, workspace)  # the next launch reads window.ini
    try:
        assert second.sources_wiring.hint_seen  # type: ignore[attr-defined]
        assert second.sources_wiring.hint.isHidden()  # type: ignore[attr-defined]
    finally:
        close(qtbot, second)


def test_the_pointer_shows_only_over_an_empty_session_of_ours(qtbot: Any, win: MainWindow, home: Path) -> None:
    hint = win.sources_wiring.hint  # type: ignore[attr-defined]
    own = _start(qtbot, win)
    with qtbot.waitSignal(win.controller.sources_listed, timeout=20_000):
        win.controller.scan_sources()
    assert hint.isVisible()
    open_source(qtbot, win, _need(BIG))
    assert hint.isHidden()  # a read-only view of another agent's session
    with qtbot.waitSignal(win.controller.session_loaded, timeout=20_000):
        _click_session(qtbot, win, own.id)
    assert hint.isVisible()
    hint.close_button.click()  # dismissed: gone, and remembered
    assert hint.isHidden() and win.sources_wiring.hint_seen  # type: ignore[attr-defined]
