"""Selection, code-block copy and the subagent link of the chat view (widgets/chat_view/selection.py,
interaction.py, layout.py), driven with real mouse events on a shown view."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtTest import QTest

from engine.model.records import CompactionRecord
from tests.widgets.chat_view.rows import hotspot, msg
from widgets.chat_view import ChatView
from widgets.chat_view.selection import TextPos

CODE_MSG = "Here is the fix:\n\n```python\ndef add(a, b):\n    return a + b\n```\n\nThat is **all**."


def _point_of(view: ChatView, key: str, needle: str, end: bool = False) -> QPoint:
    """The viewport point at the start (or end) of ``needle`` in the row's last document."""
    item = view.item(key)
    lay = view.layouter().layout(item, view.row_width())
    origin, doc = lay.docs[-1]
    start = doc.toPlainText().index(needle) + (len(needle) if end else 0)
    block = doc.findBlock(start)
    line = block.layout().lineForTextPosition(start - block.position())
    x = line.cursorToX(start - block.position())[0]
    brect = doc.documentLayout().blockBoundingRect(block)
    top = view.row_rect(key).top()
    return QPointF(origin.x() + brect.left() + x + (0.5 if not end else -0.5),
                   top + origin.y() + brect.top() + line.y() + line.height() / 2).toPoint()


def _drag(view: ChatView, a: QPoint, b: QPoint) -> None:
    vp = view.viewport()
    QTest.mousePress(vp, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, a)
    mid = QPoint((a.x() + b.x()) // 2, (a.y() + b.y()) // 2)
    for p in (QPoint(a.x() + 6, a.y()), mid, b):
        QTest.mouseMove(vp, p)
    QTest.mouseRelease(vp, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, b)


def test_drag_selects_a_substring_and_ctrl_c_copies_exactly_it(view, qtbot):
    view.set_messages([msg(1, "user", "alpha bravo charlie delta echo"), msg(2, "assistant", "foxtrot golf")])
    view.flush()
    QGuiApplication.clipboard().setText("")
    _drag(view, _point_of(view, "m1", "bravo"), _point_of(view, "m1", "delta", end=True))
    assert view.has_selection()
    assert view.selected_text() == "bravo charlie delta"
    qtbot.keyClick(view, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)
    assert QGuiApplication.clipboard().text() == "bravo charlie delta"
    # a click without a drag clears the selection
    QTest.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                     _point_of(view, "m2", "golf"))
    assert not view.has_selection()


def test_selection_across_messages_and_its_highlight(view, qtbot):
    view.set_messages([msg(1, "user", "first message text"), msg(2, "assistant", "second message text")])
    view.flush()
    _drag(view, _point_of(view, "m1", "message"), _point_of(view, "m2", "second", end=True))
    assert view.selected_text() == "message text\n\nsecond"
    # the selected text is painted with the palette's highlight colour
    img = view.viewport().grab().toImage()
    hl = view.palette().color(view.palette().ColorRole.Highlight)
    p = _point_of(view, "m1", "message")
    found = any(img.pixelColor(p.x() + dx, p.y()) == hl for dx in range(0, 30))
    assert found


def test_double_click_selects_a_word_and_ctrl_a_the_message(view, qtbot):
    view.set_messages([msg(1, "user", "one two three")])
    view.flush()
    p = _point_of(view, "m1", "two")
    QTest.mouseDClick(view.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                      QPoint(p.x() + 3, p.y()))
    assert view.selected_text() == "two"
    view.clear_selection()
    QTest.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, p)
    qtbot.keyClick(view, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    assert view.selected_text() == "one two three"


def test_a_click_on_a_link_still_activates_it(view, qtbot):
    view.set_messages([msg(1, "assistant", "see [the docs](https://example.com/docs) now")])
    view.flush()
    with qtbot.waitSignal(view.link_activated) as blocker:
        QTest.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                         _point_of(view, "m1", "docs"))
    assert blocker.args == ["https://example.com/docs"]
    assert not view.has_selection()


def test_copy_code_block_link_copies_exactly_the_code(view, qtbot):
    view.set_messages([msg(1, "assistant", CODE_MSG)])
    view.flush()
    QGuiApplication.clipboard().setText("")
    local = hotspot(view, "m1", "copycode")
    top = view.row_rect("m1").top()
    QTest.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                     QPointF(local.x(), top + local.y()).toPoint())
    assert QGuiApplication.clipboard().text() == "def add(a, b):\n    return a + b"
    # the context-menu path: inside the block → the same code; outside → none
    p = view.text_pos_at(QPointF(_point_of(view, "m1", "return")))
    assert p is not None
    QGuiApplication.clipboard().setText("")
    assert view.copy_code_at("m1", p.doc, p.pos) == "def add(a, b):\n    return a + b"
    assert QGuiApplication.clipboard().text() == "def add(a, b):\n    return a + b"
    q = view.text_pos_at(QPointF(_point_of(view, "m1", "Here")))
    assert q is not None and view.copy_code_at("m1", q.doc, q.pos) is None


def test_context_menu_offers_copy_code_block(view, qtbot):
    view.set_messages([msg(1, "assistant", CODE_MSG)])
    view.flush()
    view._on_context_menu(_point_of(view, "m1", "return"))
    menu = view._last_menu
    assert menu is not None
    labels = [a.text() for a in menu.actions()]
    assert "Copy code block" in labels and "Copy text" in labels
    menu.close()
    view._on_context_menu(_point_of(view, "m1", "Here"))
    assert "Copy code block" not in [a.text() for a in view._last_menu.actions()]
    view._last_menu.close()


def test_expanded_tool_result_has_a_copy_link(view, qtbot):
    call = {"id": "c1", "type": "function", "function": {"name": "cat", "arguments": json.dumps({"p": "a"})}}
    view.set_messages([msg(1, "assistant", "", tool_calls=[call]),
                       msg(2, "tool", "line one\nline two", tool_call_id="c1")])
    view.set_tool_expanded("m2", True)
    view.flush()
    acts = [a for _r, a, _p in view.hotspots("m2")]
    assert acts.count("copycode") == 2  # the arguments and the result
    item = view.item("m2")
    lay = view.layouter().layout(item, view.row_width())
    assert lay.codes[-1][3] == "line one\nline two"


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> Path:
    src = Path("/work/shared/data/sessions/claude-code/8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl")
    if not src.exists():
        pytest.skip("shared session data not present")
    dest = tmp_path_factory.mktemp("imp") / "s"
    subprocess.run([sys.executable, "-m", "app.cli", "import", "--no-model-info", "--session", str(dest), str(src)],
                   check=True, capture_output=True, timeout=120)
    return dest


def test_task_link_on_the_imported_session_emits_subagent_requested(view, qtbot, imported):
    messages = [json.loads(line) for line in (imported / "history.jsonl").read_text().splitlines() if line]
    view.set_messages(messages)
    key = next(m["id"] for m in messages if isinstance(m.get("subagent"), dict))
    assert view.scroll_to_message(key)
    view.flush()
    labels = [op.b for op in view.layouter().layout(view.item(key), view.row_width()).ops if op.kind == "text"]
    assert any(t.startswith("Open subagent session ▸ (a7be2f0") for t in labels)
    local = hotspot(view, key, "subagent")
    top = view.row_rect(key).top()
    with qtbot.waitSignal(view.subagent_requested) as blocker:
        QTest.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                         QPointF(local.x(), top + local.y()).toPoint())
    assert blocker.args == ["subagents/a7be2f0"]


def test_selection_follows_rows_inserted_and_removed_above(view):
    view.set_messages([msg(1, "user", "one two"), msg(2, "user", "three four")])
    row = view.chat_model().row_of("m2")
    view.select(TextPos(row, 0, 0), TextPos(row, 0, 5))
    assert view.selected_text() == "three"
    view.add_compaction_marker(CompactionRecord.from_json({"id": "mk", "trigger": "manual", "result": "summarized"}),
                               after_message_id="m1")
    assert view.selected_text() == "three"
    view.remove_message("m1")
    assert view.selected_text() == "three"
    view.remove_message("m2")
    assert not view.has_selection()
    view.set_messages([msg(3)])
    assert not view.has_selection()
