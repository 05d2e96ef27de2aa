"""The find bar (widgets/find_bar.py): intents from keys and buttons, "n of m"."""

from __future__ import annotations

from PySide6.QtCore import Qt

from widgets.find_bar import FindBar


def _bar(qtbot):
    bar = FindBar()
    qtbot.addWidget(bar)
    bar.resize(500, 30)
    bar.open_bar()
    qtbot.waitExposed(bar)
    return bar


def test_typing_emits_the_query_and_enter_steps(qtbot):
    bar = _bar(qtbot)
    got: list[str] = []
    bar.search_changed.connect(got.append)
    qtbot.keyClicks(bar.edit, "ab")
    assert got == ["a", "ab"]
    with qtbot.waitSignal(bar.next_requested):
        qtbot.keyClick(bar.edit, Qt.Key.Key_Return)
    with qtbot.waitSignal(bar.previous_requested):
        qtbot.keyClick(bar.edit, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    with qtbot.waitSignal(bar.next_requested):
        qtbot.mouseClick(bar.next_button, Qt.MouseButton.LeftButton)


def test_result_text(qtbot):
    bar = _bar(qtbot)
    bar.set_result(-1, 0)
    assert bar.count.text() == ""
    bar.edit.setText("zz")
    bar.set_result(-1, 0)
    assert bar.count.text() == "No matches" and not bar.next_button.isEnabled()
    bar.set_result(2, 1234)
    assert bar.count.text() == "3 of 1,234" and bar.next_button.isEnabled()


def test_escape_closes(qtbot):
    bar = _bar(qtbot)
    assert bar.isVisible()
    with qtbot.waitSignal(bar.closed):
        qtbot.keyClick(bar.edit, Qt.Key.Key_Escape)
    assert not bar.isVisible()
