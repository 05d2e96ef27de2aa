"""The context diff view (widgets/diff_view.py) on the diff of calls 71 → 72 of a real Claude Code
session, across its compaction, and on a diff without provider figures."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from engine.context.diff import CallPoint, History, diff_calls, history_from_folder
from tests.widgets.imported import import_parent
from widgets.diff_view import DiffDialog, DiffView


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return import_parent(tmp_path_factory.mktemp("diff"))


def test_the_diff_across_the_compaction(qtbot, folder: Path) -> None:
    history = history_from_folder(folder)
    diff = diff_calls(history, 71, 72)
    dialog = DiffDialog()
    qtbot.addWidget(dialog)
    dialog.set_diff(diff)
    view = dialog.view
    assert "Call 71 → call 72 · 1 compaction between them" in dialog.windowTitle()
    text = view.figures.text()
    assert "Provider prompt: 167,094 → 42,603 tokens (−124,491)" in text
    assert "Messages in the context: 158 → 0" in text
    assert f"left {diff.left_tokens:,} (158 items)" in text and "(1 item)," in text
    entered, left = view.section("Entered"), view.section("Left")
    assert entered.childCount() == 1 and left.childCount() == 158
    summary = entered.child(0)
    assert summary.text(1) == "compaction summary" and summary.text(0) == f"+{diff.entered[0].tokens:,}"
    assert summary.text(3).startswith("This session is being continued")
    assert left.text(0) == f"−{diff.left_tokens:,}"
    for row in range(left.childCount()):  # each row as the diff has it, in conversation order
        item = diff.left[row]
        assert left.child(row).text(2) == f"#{item.index + 1}" and left.child(row).text(0) == f"−{item.tokens:,}"
    tool_rows = [left.child(r) for r in range(left.childCount()) if diff.left[r].kind == "tool_result"]
    assert tool_rows and all(r.text(1).startswith("tool result · ") for r in tool_rows)
    with qtbot.waitSignal(view.message_activated) as blocker:
        view.activate(left.child(3))
    assert blocker.args == [diff.left[3].message_id]
    with qtbot.waitSignal(view.summary_activated) as blocker:
        view.activate(summary)
    assert blocker.args == [0]
    with qtbot.assertNotEmitted(view.message_activated):
        view.activate(left)  # a section row is no link


def test_unknown_provider_figures_and_nothing_left(qtbot) -> None:
    msgs = [{"id": "m1", "role": "user", "content": "hello"}, {"id": "m2", "role": "assistant", "content": "hi"}]
    history = History(msgs, [CallPoint(1, 0, 1, None, None), CallPoint(2, 0, 2, None, 900)], [])
    view = DiffView()
    qtbot.addWidget(view)
    view.set_diff(diff_calls(history, 1, 2))
    assert "call 1 —, call 2 900 (not known for both)" in view.figures.text()
    assert view.section("Left").childCount() == 0 and view.section("Left").text(3) == "nothing"
    row = view.section("Entered").child(0)
    assert row.text(1) == "assistant" and row.data(0, Qt.ItemDataRole.UserRole).message_id == "m2"
