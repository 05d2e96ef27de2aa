"""The "Tool results" tab (widgets/inspector/files_tab.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import Qt

from tests.widgets.inspector.data import FILE_TEXT, FILES, cell


def test_files_table_columns_and_numeric_sort(ins):
    assert ins.files.summary_label.text() == "3 files · 179.7 KB"
    m = ins.files_view.model()
    assert [m.headerData(i, Qt.Orientation.Horizontal) for i in range(6)] == [
        "Tool", "Size", "Lines", "Created", "Referring message", "File"]
    ins.files_view.sortByColumn(1, Qt.SortOrder.AscendingOrder)
    assert [cell(ins, r, 0) for r in range(3)] == ["read_file", "grep", "bash"]  # by bytes, not by text
    assert cell(ins, 0, 1) == "3.9 KB"
    assert cell(ins, 2, 2) == "3,000"
    assert cell(ins, 0, 4) == "read src/app.py"
    assert cell(ins, 1, 4) == "— (none)"
    ins.files.filter_edit.setText("grep")
    assert m.rowCount() == 1 and cell(ins, 0, 0) == "grep"
    ins.files.filter_edit.clear()
    assert m.rowCount() == 3


def test_selecting_a_file_asks_the_app_then_shows_it(ins, qtbot, tmp_path):
    with qtbot.waitSignal(ins.file_requested) as blocker:
        ins.files_view.selectRow(0)
    path = blocker.args[0]
    ins.show_file(path, FILE_TEXT)
    assert ins.viewer.path() == path
    assert ins.viewer.text() == FILE_TEXT
    assert "lines" in ins.viewer.title.text()
    assert ins.viewer.text_view.blockCount() == 200
    assert ins.viewer.open_button.isEnabled()
    assert ins.viewer.open_button.toolTip() == str(tmp_path / path)


def test_double_click_on_referring_message(ins, qtbot):
    with qtbot.waitSignal(ins.message_activated) as blocker:
        ins.files._on_double_click(ins.files.proxy.mapFromSource(ins.files.model.index(0, 4)))
    assert blocker.args == ["m3"]


def test_file_list_updates_keep_or_clear_the_viewer(ins):
    ins.show_file("tool_results/bbb.txt", "x")
    ins.add_offloaded_file(replace(FILES[0], size=1))
    assert ins.files.model.rowCount() == 3  # same path: updated in place
    ins.add_offloaded_file(replace(FILES[0], path="tool_results/ddd.txt"))
    assert ins.files.model.rowCount() == 4
    ins.set_offloaded_files(FILES[:1])
    assert ins.viewer.path() == ""  # the shown file is gone


def test_absolute_paths_are_kept(ins, tmp_path: Path):
    assert ins.files.abs_path(str(tmp_path / "x.txt")) == tmp_path / "x.txt"
