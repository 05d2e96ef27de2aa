"""Find in the conversation in the real window (app/wire_chat.py): Edit → Find… (Ctrl+F) shows the
find bar above the chat, typing counts the hits across messages, Enter / Shift+Enter step and the
chat scrolls to each hit, Esc closes the bar and clears the highlights."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt

from app.main_window import MainWindow
from engine.store.config import Settings
from tests.app.test_main_window import close, make_window

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "sessions"
BIG = SHARED / "claude-code" / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"


@pytest.fixture
def win(qtbot: Any, fake_settings: Settings, workspace: Path) -> Any:
    window = make_window(qtbot, fake_settings, workspace)
    yield window
    close(qtbot, window)


def _msgs(n: int) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        text = f"filler line {i} " * 12
        if i in (10, 120, 230):
            text += " the Quokka appears"
        out.append({"id": f"m{i}", "role": "user" if i % 2 else "assistant", "content": text})
    return out


def test_ctrl_f_finds_steps_and_scrolls(qtbot: Any, win: MainWindow) -> None:
    wiring = win.chat_wiring  # type: ignore[attr-defined]
    bar = wiring.bar
    assert wiring.find_action.shortcut().matches(Qt.Key.Key_F | Qt.KeyboardModifier.ControlModifier)
    edit_menu = next(a.menu() for a in win.menuBar().actions() if a.text().replace("&", "") == "Edit")
    assert wiring.find_action in edit_menu.actions()
    win.chat.set_messages(_msgs(250))
    win.chat.setFocus()
    assert not bar.isVisible()
    qtbot.keyClick(win.chat, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(bar.isVisible, timeout=2000)
    assert bar.edit.hasFocus()
    # above the chat in its column
    assert bar.geometry().bottom() <= win.chat.geometry().top()
    qtbot.keyClicks(bar.edit, "quokka")
    assert bar.count.text() == "1 of 3"
    win.chat.flush()
    assert "m10" in win.chat.visible_keys()
    qtbot.keyClick(bar.edit, Qt.Key.Key_Return)
    assert bar.count.text() == "2 of 3"
    win.chat.flush()
    assert "m120" in win.chat.visible_keys() and "m10" not in win.chat.visible_keys()
    qtbot.keyClick(bar.edit, Qt.Key.Key_Return)
    win.chat.flush()
    assert bar.count.text() == "3 of 3" and "m230" in win.chat.visible_keys()
    qtbot.keyClick(bar.edit, Qt.Key.Key_Return)  # wraps
    assert bar.count.text() == "1 of 3"
    qtbot.keyClick(bar.edit, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    assert bar.count.text() == "3 of 3"
    qtbot.keyClick(bar.edit, Qt.Key.Key_Escape)
    assert not bar.isVisible()
    assert win.chat.find_state() == (-1, 0)


def test_new_messages_are_found_at_the_next_step(qtbot: Any, win: MainWindow) -> None:
    bar = win.chat_wiring.bar  # type: ignore[attr-defined]
    win.chat.set_messages(_msgs(50))
    win.chat_wiring.open()  # type: ignore[attr-defined]
    qtbot.keyClicks(bar.edit, "quokka")
    assert bar.count.text() == "1 of 1"
    win.chat.append_message({"id": "late", "role": "assistant", "content": "a late quokka"})
    qtbot.keyClick(bar.edit, Qt.Key.Key_Return)
    assert bar.count.text() == "2 of 2"
    assert win.chat.current_hit() == ("late", 0)


def test_ctrl_f_in_the_file_viewer_stays_there(qtbot: Any, win: MainWindow) -> None:
    """The inspector's file viewer has its own Ctrl+F: there it focuses the viewer's search field
    (the window's action steps aside, else both would be ambiguous and neither would fire)."""
    viewer = win.inspector.viewer
    viewer.text_view.setFocus()
    qtbot.waitUntil(viewer.text_view.hasFocus, timeout=2000)
    qtbot.keyClick(viewer.text_view, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)
    assert viewer.search_edit.hasFocus()
    assert not win.chat_wiring.bar.isVisible()  # type: ignore[attr-defined]
    win.chat.setFocus()
    qtbot.waitUntil(win.chat.hasFocus, timeout=2000)
    qtbot.keyClick(win.chat, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)
    assert win.chat_wiring.bar.isVisible()  # type: ignore[attr-defined]
