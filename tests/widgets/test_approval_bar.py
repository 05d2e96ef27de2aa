from __future__ import annotations

import json

import pytest
from PySide6.QtCore import Qt

from widgets.approval_bar import ApprovalBar


@pytest.fixture
def bar(qtbot):
    w = ApprovalBar()
    qtbot.addWidget(w)
    w.resize(600, 220)
    return w


def test_hidden_until_asked(bar):
    assert not bar.isVisible()
    assert bar.pending() == []


def test_allow_and_deny_answer_in_order_without_a_nested_loop(bar, qtbot):
    bar.show()
    bar.ask("r1", "bash", json.dumps({"command": "make test"}), "Shell commands need your approval")
    bar.ask("r2", "write_file", json.dumps({"path": "a.txt"}))
    bar.ask("r1", "bash", "{}")  # duplicate ids are ignored
    assert bar.isVisible()
    assert bar.pending() == ["r1", "r2"]
    assert "bash" in bar.current_text() and '"command": "make test"' in bar.current_text()
    with qtbot.waitSignal(bar.decided) as blocker:
        qtbot.mouseClick(bar._allow, Qt.MouseButton.LeftButton)
    assert blocker.args == ["r1", True]
    assert "write_file" in bar.current_text()
    with qtbot.waitSignal(bar.decided) as blocker:
        qtbot.mouseClick(bar._deny, Qt.MouseButton.LeftButton)
    assert blocker.args == ["r2", False]
    assert not bar.isVisible()


def test_cancel_withdraws_without_answer(bar, qtbot):
    answers = []
    bar.decided.connect(lambda *a: answers.append(a))
    bar.ask("a", "bash", "not json")
    bar.ask("b", "bash", "{}")
    assert "not json" in bar.current_text()
    bar.cancel("a")
    assert bar.pending() == ["b"]
    bar.cancel_all()
    assert bar.pending() == [] and not bar.isVisible()
    bar.allow()  # nothing pending: nothing emitted
    assert answers == []
