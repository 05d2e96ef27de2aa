from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from widgets.chat_input import ChatInput, CommandError, parse_command


@pytest.fixture
def box(qtbot):
    w = ChatInput()
    qtbot.addWidget(w)
    w.resize(600, 150)
    w.show()
    qtbot.waitExposed(w)
    return w


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("hello", None),
        ("/compact", ("compact", "")),
        ("/compact   keep every file path ", ("compact", "keep every file path")),
        ("/COMPACT x", ("compact", "x")),
        ("/new", ("new", "")),
        ("  /clear  ", ("clear", "")),
        ("/context", ("context", "")),
        ("//not a command", None),
    ],
)
def test_parse_command(text, expected):
    assert parse_command(text) == expected


@pytest.mark.parametrize(
    ("text", "reason"),
    [("/frobnicate", "Unknown command /frobnicate"), ("/new session", "/new takes no argument"),
     ("/", "Unknown command /")],
)
def test_parse_command_refuses_with_reason(text, reason):
    with pytest.raises(CommandError, match=reason):
        parse_command(text)


def test_ctrl_enter_sends_and_clears(box, qtbot):
    qtbot.keyClicks(box.editor(), "Explain the bug")
    with qtbot.waitSignal(box.send_requested) as blocker:
        qtbot.keyClick(box.editor(), Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    assert blocker.args == ["Explain the bug"]
    assert box.text() == ""


def test_plain_enter_makes_a_newline(box, qtbot):
    sent = []
    box.send_requested.connect(sent.append)
    qtbot.keyClicks(box.editor(), "line one")
    qtbot.keyClick(box.editor(), Qt.Key.Key_Return)
    qtbot.keyClicks(box.editor(), "line two")
    assert sent == []
    assert box.text() == "line one\nline two"


def test_empty_draft_is_not_sent(box, qtbot):
    sent = []
    box.send_requested.connect(sent.append)
    box.set_text("   \n ")
    assert not box.submit()
    assert sent == []


def test_slash_command_emits_command(box, qtbot):
    box.set_text("/compact keep the API decisions")
    with qtbot.waitSignal(box.command_requested) as blocker:
        box.submit()
    assert blocker.args == ["compact", "keep the API decisions"]
    assert box.text() == ""


def test_unknown_command_is_refused_and_kept(box, qtbot):
    sent = []
    box.send_requested.connect(sent.append)
    box.command_requested.connect(lambda *a: sent.append(a))
    box.set_text("/frobnicate now")
    assert not box.submit()
    assert sent == []
    assert "Unknown command /frobnicate" in box.error_text()
    assert box.text() == "/frobnicate now"  # the draft stays
    qtbot.keyClicks(box.editor(), "x")  # typing clears the error
    assert box.error_text() == ""


def test_double_slash_sends_a_message_starting_with_a_slash(box, qtbot):
    box.set_text("//etc/hosts is the file")
    with qtbot.waitSignal(box.send_requested) as blocker:
        box.submit()
    assert blocker.args == ["/etc/hosts is the file"]


def test_escape_stops_only_while_busy(box, qtbot):
    stops = []
    box.stop_requested.connect(lambda: stops.append(1))
    box.editor().setFocus()
    qtbot.keyClick(box.editor(), Qt.Key.Key_Escape)
    assert stops == []
    box.set_busy(True)
    qtbot.keyClick(box.editor(), Qt.Key.Key_Escape)
    assert stops == [1]


def test_busy_disables_send_but_not_commands(box, qtbot):
    box.set_busy(True)
    box.set_text("another question")
    assert not box._send.isEnabled()
    assert box._stop.isEnabled()
    assert not box.submit()
    assert "A turn is running" in box.error_text()
    box.set_text("/context")
    assert box._send.isEnabled()
    with qtbot.waitSignal(box.command_requested):
        box.submit()
    qtbot.mouseClick(box._stop, Qt.MouseButton.LeftButton)
    box.set_busy(False)
    assert not box._stop.isEnabled()


def test_draft_changed_is_debounced_and_cost_shown(box, qtbot):
    seen = []
    box.draft_changed.connect(seen.append)
    qtbot.keyClicks(box.editor(), "abc")
    assert seen == []  # debounced
    qtbot.waitUntil(lambda: seen == ["abc"], timeout=1000)
    box.set_draft_tokens(42)
    assert box.draft_tokens_text() == "≈ 42 tokens"
    box.set_draft_tokens(1)
    assert box.draft_tokens_text() == "≈ 1 token"
    box.set_text("/compact")
    box.set_draft_tokens(5)
    assert box.draft_tokens_text() == ""  # a command costs nothing
    box.clear()
    assert box.draft_tokens_text() == ""


def test_completion_popup_lists_commands_and_inserts(box, qtbot):
    editor = box.editor()
    editor.setFocus()
    qtbot.keyClicks(editor, "/c")
    completer = editor.completer()
    qtbot.waitUntil(lambda: completer.popup().isVisible(), timeout=1000)
    names = [completer.completionModel().index(i, 0).data() for i in range(completer.completionCount())]
    assert [n.split()[0] for n in names] == ["/compact", "/clear", "/context"]
    qtbot.keyClick(editor, Qt.Key.Key_Return)  # pick the first
    assert box.text() == "/compact "  # takes an argument: a space is added
    assert not completer.popup().isVisible()
    box.clear()
    qtbot.keyClicks(editor, "/n")
    qtbot.waitUntil(lambda: completer.popup().isVisible(), timeout=1000)
    qtbot.keyClick(editor, Qt.Key.Key_Escape)  # Esc closes the popup, does not stop
    assert not completer.popup().isVisible()
    assert box.text() == "/n"
    qtbot.keyClicks(editor, "ew x")
    assert not completer.popup().isVisible()  # no popup once an argument is typed
