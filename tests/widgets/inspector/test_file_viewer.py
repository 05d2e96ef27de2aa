"""The file viewer (widgets/inspector/file_viewer.py): search, copy, open, line numbers."""

from __future__ import annotations

from PySide6.QtCore import QUrl
from PySide6.QtGui import QGuiApplication

from tests.widgets.inspector.data import FILE_TEXT


def test_viewer_search_counts_and_moves(ins):
    ins.show_file("tool_results/aaa.txt", FILE_TEXT)
    v = ins.viewer
    assert v.find("value 3") == FILE_TEXT.count("value 3")
    n = v.find("line 1")
    assert n == 111  # line 1, 10-19, 100-199
    assert v.count_label.text() == "1 of 111"
    assert v.current_match_line() == 1
    v.next_match()
    assert v.current_match_line() == 10 and v.count_label.text() == "2 of 111"
    v.previous_match()
    v.previous_match()  # wraps around to the last match
    assert v.current_match_line() == 199
    assert v.find("no such text") == 0
    assert v.count_label.text() == "no match"
    assert v.find("") == 0 and v.count_label.text() == ""


def test_viewer_copy_and_open_external(ins, tmp_path):
    ins.show_file("tool_results/aaa.txt", FILE_TEXT)
    v = ins.viewer
    assert v.copy() == FILE_TEXT
    assert QGuiApplication.clipboard().text() == FILE_TEXT
    cursor = v.text_view.textCursor()
    cursor.setPosition(0)
    cursor.setPosition(6, cursor.MoveMode.KeepAnchor)
    v.text_view.setTextCursor(cursor)
    assert v.copy() == "line 1"
    opened: list[QUrl] = []
    v.opener = lambda url: opened.append(url) or True
    assert v.open_external()
    assert opened[0].toLocalFile() == str(tmp_path / "tool_results/aaa.txt")
    ins.set_session_dir(None)
    ins.show_file("tool_results/aaa.txt", FILE_TEXT)
    assert not v.open_button.isEnabled() and not v.open_external()


def test_line_numbers_are_painted(ins):
    ins.show_file("tool_results/aaa.txt", FILE_TEXT)
    tv = ins.viewer.text_view
    assert tv.viewportMargins().left() == tv.line_number_width() > 20
    assert not tv._gutter.grab().isNull()
