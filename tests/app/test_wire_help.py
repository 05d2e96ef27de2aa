"""app.wire_help: Edit → Copy / Select All on the focused pane, Help → Keyboard shortcuts and About."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication

from app.main_window import MainWindow
from app.wire_help import app_version
from engine.model import messages as m
from engine.store.config import Settings, settings_path
from tests.app.test_main_window import close, make_window


@pytest.fixture
def win(qtbot: Any, fake_settings: Settings, workspace: Path) -> Iterator[MainWindow]:
    """The window over a new, empty session; closed afterwards."""
    window = make_window(qtbot, fake_settings, workspace)
    try:
        with qtbot.waitSignal(window.controller.session_loaded, timeout=20_000):
            window.controller.new_session()
        yield window
    finally:
        close(qtbot, window)


def test_copy_and_select_all_act_on_the_chat(qtbot: Any, win: MainWindow) -> None:
    chat = win.chat
    chat.set_messages([m.user("alpha question"), m.assistant("beta answer")])
    chat.flush()
    chat.setFocus(Qt.FocusReason.OtherFocusReason)
    qtbot.waitUntil(lambda: QGuiApplication.focusObject() is chat, timeout=5_000)
    QGuiApplication.clipboard().clear()
    win.help_wiring.select_all_action.trigger()  # type: ignore[attr-defined]
    assert chat.has_selection()
    win.help_wiring.copy_action.trigger()  # type: ignore[attr-defined]
    copied = QGuiApplication.clipboard().text()
    assert "alpha question" in copied and "beta answer" in copied
    # the keys reach the chat as the menu does (one shortcut, not two ambiguous ones)
    chat.clear_selection()
    QGuiApplication.clipboard().clear()
    qtbot.keyClick(chat, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    qtbot.keyClick(chat, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)
    assert "beta answer" in QGuiApplication.clipboard().text()


def test_copy_and_select_all_act_on_a_text_box(qtbot: Any, win: MainWindow) -> None:
    edit = win.input.editor()
    edit.setPlainText("draft to copy")
    edit.setFocus(Qt.FocusReason.OtherFocusReason)
    qtbot.waitUntil(lambda: QGuiApplication.focusObject() is edit, timeout=5_000)
    QGuiApplication.clipboard().clear()
    win.help_wiring.select_all_action.trigger()  # type: ignore[attr-defined]
    assert edit.textCursor().selectedText() == "draft to copy"
    win.help_wiring.copy_action.trigger()  # type: ignore[attr-defined]
    assert QGuiApplication.clipboard().text() == "draft to copy"


def test_help_about_says_the_version_and_where_things_live(qtbot: Any, win: MainWindow) -> None:
    about = win.help_wiring.show_about()  # type: ignore[attr-defined]
    assert about.isVisible()
    text = about.text()
    assert app_version() in text and app_version() != "(not installed)"
    assert f"Settings file: {settings_path()}" in text
    assert f"Sessions: {win.controller.store.root}" in text
    about.copy_buttons[0].click()
    assert QGuiApplication.clipboard().text() == str(settings_path())
    about.close()


def test_help_keyboard_shortcuts_lists_the_window_actions(qtbot: Any, win: MainWindow) -> None:
    dialog = win.help_wiring.show_shortcuts()  # type: ignore[attr-defined]
    rows = dict((what, keys) for keys, what in dialog.rows())
    assert rows["Find"] == "Ctrl+F" and rows["Copy"] == "Ctrl+C" and rows["New session"] == "Ctrl+N"
    assert rows["Send the message"] == "Ctrl+Enter"
    assert dialog.table.rowCount() == len(dialog.rows())
    dialog.close()


def test_help_open_log_folder_shows_the_folder_of_the_log_file(win: MainWindow,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from PySide6.QtCore import QUrl

    from engine.store.logs import log_dir, log_file

    opened: list[QUrl] = []
    monkeypatch.setattr("app.wire_help.QDesktopServices.openUrl", lambda url: opened.append(url) or True)
    win.help_wiring.log_action.trigger()  # type: ignore[attr-defined]
    assert [u.toLocalFile() for u in opened] == [str(log_dir())] and log_dir().is_dir()
    assert ("Log file", str(log_file())) in tuple(win.help_wiring.show_about().facts.places)  # type: ignore[attr-defined]
    win.help_wiring.about_dialog.close()  # type: ignore[attr-defined]
