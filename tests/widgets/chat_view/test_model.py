"""The rows as data (widgets/chat_view/model.py): keys, rows, tool calls and their results."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QModelIndex, Qt

from widgets.chat_view import ChatItem, ChatModel


def item(key: str, role: str, **kw: object) -> ChatItem:
    return ChatItem("message", key, msg={"id": key, "role": role, "content": f"text of {key}", **kw})


def test_rows_keys_calls_and_results(qtbot):
    model = ChatModel()
    call = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "ls"}'}}
    model.reset([item("a", "user"), item("b", "assistant", tool_calls=[call])])
    assert model.rowCount() == 2 and model.rowCount(model.index(0, 0)) == 0
    assert model.call_info("c1") == ("bash", '{"cmd": "ls"}')
    assert not model.has_result("c1") and model.row_of_call("c1") == 1
    model.insert(1, item("x", "user"))  # in the middle: the rows after it move down
    assert [model.row_of(k) for k in ("a", "x", "b")] == [0, 1, 2]
    model.insert(99, item("r", "tool", tool_call_id="c1"))  # clamped to the end
    assert model.row_of("r") == 3 and model.has_result("c1")
    assert model.data(model.index(2, 0), Qt.ItemDataRole.DisplayRole).endswith('[tool call] bash({"cmd": "ls"})')
    assert model.data(QModelIndex()) is None
    with pytest.raises(ValueError, match="duplicate"):
        model.insert(0, item("a", "user"))
    assert model.remove("x") and not model.remove("x")
    assert [model.row_of(k) for k in ("a", "b", "r")] == [0, 1, 2] and model.item("x") is None
    with qtbot.waitSignal(model.dataChanged):
        assert model.changed("b").row() == 1
    assert not model.changed("nope").isValid()
