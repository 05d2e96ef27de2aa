from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QApplication

from widgets.inspector import Inspector

FILES = [
    {"path": "tool_results/aaa.txt", "size": 120_000, "lines": 3000, "created": "2025-11-21T10:00:00+00:00",
     "tool": "bash", "message_id": "m3"},
    {"path": "tool_results/bbb.txt", "size": 4_000, "lines": 80, "created": "2025-11-21T11:00:00+00:00",
     "tool": "read_file", "message_id": "m9", "message_preview": "read src/app.py"},
    {"path": "tool_results/ccc.txt", "size": 60_000, "lines": 900, "created": "2025-11-20T09:00:00+00:00",
     "tool": "grep", "message_id": ""},
]

FILE_TEXT = "\n".join(f"line {i}: value {i * 3}" for i in range(1, 201))


@pytest.fixture
def ins(qtbot, tmp_path):
    w = Inspector()
    qtbot.addWidget(w)
    w.resize(800, 600)
    w.show()
    qtbot.waitExposed(w)
    w.set_session_dir(tmp_path)
    w.set_offloaded_files(FILES)
    return w


def cell(ins: Inspector, row: int, col: int) -> str:
    m = ins.files_view.model()
    return m.index(row, col).data()


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


def test_open_file_from_a_chat_link(ins, qtbot):
    ins.show_tab("summary")
    with qtbot.waitSignal(ins.file_requested) as blocker:
        ins.open_file("tool_results/ccc.txt")
    assert blocker.args == ["tool_results/ccc.txt"]
    assert ins.currentIndex() == 0
    row = ins.files_view.currentIndex().row()
    assert cell(ins, row, 0) == "grep"


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


def test_double_click_on_referring_message(ins, qtbot):
    with qtbot.waitSignal(ins.message_activated) as blocker:
        ins.files._on_double_click(ins.files.proxy.mapFromSource(ins.files.model.index(0, 4)))
    assert blocker.args == ["m3"]


def test_file_list_updates_keep_or_clear_the_viewer(ins):
    ins.show_file("tool_results/bbb.txt", "x")
    ins.add_offloaded_file({**FILES[0], "size": 1})
    assert ins.files.model.rowCount() == 3  # same path: updated in place
    ins.add_offloaded_file({**FILES[0], "path": "tool_results/ddd.txt"})
    assert ins.files.model.rowCount() == 4
    ins.set_offloaded_files(FILES[:1])
    assert ins.viewer.path() == ""  # the shown file is gone


def archived(day: str, n: int) -> list[dict]:
    roles = ["user", "assistant", "tool"]
    return [{"id": f"{day}-{i}", "role": roles[i % 3], "content": f"archived {i} about parsing",
             "ts": f"{day}T09:{i:02d}:00+00:00"} for i in range(n)]


def test_archive_days_load_on_expand(ins, qtbot):
    ins.set_archive_days(["2025-11-20", "2025-11-21"])
    tree = ins.archive_tree
    assert tree.topLevelItemCount() == 2
    assert tree.topLevelItem(0).text(0) == "2025-11-21"  # newest first
    with qtbot.waitSignal(ins.archive_day_requested) as blocker:
        tree.topLevelItem(0).setExpanded(True)
    assert blocker.args == ["2025-11-21"]
    msgs = archived("2025-11-21", 5)
    ins.set_archive_messages("2025-11-21", msgs, {m["id"]: 10 + i for i, m in enumerate(msgs)})
    day = tree.topLevelItem(0)
    assert day.childCount() == 5
    assert day.text(2) == "60" and day.text(3) == "5 messages"
    child = day.child(1)
    assert child.text(1) == "assistant" and child.text(2) == "11" and "archived 1" in child.text(3)
    tree.setCurrentItem(child)
    assert "archived 1 about parsing" in ins.archive_view.toPlainText()
    assert "11 tokens" in ins.archive_view.toPlainText()


def test_archive_restore_checked(ins, qtbot):
    ins.set_archive_days(["2025-11-21"])
    ins.set_archive_messages("2025-11-21", archived("2025-11-21", 4))
    assert not ins.archive.restore_button.isEnabled()
    assert ins.archive.set_checked("2025-11-21-1", True)
    assert ins.archive.set_checked("2025-11-21-3", True)
    assert ins.checked_archive_ids() == ["2025-11-21-1", "2025-11-21-3"]
    assert ins.archive.checked_label.text() == "2 messages checked"
    with qtbot.waitSignal(ins.restore_requested) as blocker:
        qtbot.mouseClick(ins.archive.restore_button, Qt.MouseButton.LeftButton)
    assert blocker.args == [["2025-11-21-1", "2025-11-21-3"]]
    ins.archive.clear_checked()
    assert ins.checked_archive_ids() == [] and not ins.archive.restore_button.isEnabled()


def test_archive_search_across_days(ins, qtbot):
    ins.set_archive_days(["2025-11-20", "2025-11-21"])
    ins.set_archive_messages("2025-11-21", archived("2025-11-21", 2))
    ins.archive.search_edit.setText("parsing")
    with qtbot.waitSignal(ins.archive_search_requested) as blocker:
        qtbot.mouseClick(ins.archive.search_button, Qt.MouseButton.LeftButton)
    assert blocker.args == ["parsing"]
    hits = [
        {"day": "2025-11-20", "message": archived("2025-11-20", 3)[2],
         "snippet": "…archived 2 about parsing"},
        {"day": "2025-11-21", "message": archived("2025-11-21", 1)[0], "snippet": "archived 0 about parsing"},
    ]
    ins.set_archive_hits("parsing", hits)
    tree = ins.archive_tree
    assert tree.topLevelItemCount() == 2
    assert tree.topLevelItem(0).text(0).startswith("2025-11-20")
    assert "2 hits for “parsing” in 2 days" == ins.archive.status.text()
    tree.setCurrentItem(tree.topLevelItem(1))
    assert "archived 0 about parsing" in ins.archive_view.toPlainText()
    assert ins.archive_view.textCursor().selectedText() == "parsing"
    # hits can be checked and restored too
    ins.archive.set_checked("2025-11-20-2", True)
    assert ins.checked_archive_ids() == ["2025-11-20-2"]
    ins.set_archive_hits("zzz", [])
    assert ins.archive.status.text() == "No archived message contains “zzz”"
    ins.archive.show_days()
    assert tree.topLevelItemCount() == 2 and tree.topLevelItem(0).text(0) == "2025-11-21"
    assert tree.topLevelItem(0).childCount() == 2  # the loaded day comes back loaded
    assert tree.topLevelItem(1).childCount() == 0


def test_summary_tab_renders_markdown_safely(ins):
    ins.set_summary("## Goal\nShip **it**\n\n![x](file:///etc/hostname)", 321)
    doc = ins.summary.document()
    assert "Goal" in doc.toPlainText() and "**" not in doc.toPlainText()
    assert ins.summary.label.text() == "Current summary · 321 tokens"
    ins.summary_view.grab()  # painting lays out the image: it must be refused
    assert any("etc/hostname" in u for u in doc.refused)
    ins.summary.copy_button.click()
    assert QApplication.clipboard().text().startswith("## Goal")
    ins.set_summary("")
    assert "No summary yet" in ins.summary.label.text() and not ins.summary.copy_button.isEnabled()


def test_compaction_log(ins):
    events = [
        {"trigger": "auto", "tokens_before": 70_000, "tokens_after": 15_000, "messages_compacted": 40,
         "messages_kept": 6, "duration_ms": 2300, "result": "summarized", "summary": "## Goal\nx",
         "archive_day": "2025-11-21", "ts": "2025-11-21T10:00:29+00:00"},
        {"trigger": "reactive", "tokens_before": 130_000, "tokens_after": 130_000, "messages_compacted": 0,
         "messages_kept": 30, "duration_ms": 100, "result": "failed", "reason": "summary lacked headings"},
    ]
    ins.set_compaction_events(events)
    t = ins.log_table
    assert t.rowCount() == 2
    assert t.item(0, 3).text() == "70,000 → 15,000"
    assert t.item(0, 4).text() == "40 / 6"
    assert t.item(0, 5).text() == "2.3 s"
    assert t.item(1, 2).text() == "failed"
    t.setCurrentCell(1, 0)
    assert "Reason: summary lacked headings" in ins.log.detail.toPlainText()
    t.setCurrentCell(0, 0)
    assert "dialog/2025-11-21.jsonl" in ins.log.detail.toPlainText()
    ins.add_compaction_event({"trigger": "manual", "result": "undone"})
    assert t.rowCount() == 3


def test_tabs(ins):
    for i, name in enumerate(Inspector.TABS):
        ins.show_tab(name)
        assert ins.currentIndex() == i
    assert [ins.tabText(i) for i in range(4)] == ["Tool results", "Archive", "Summary", "Compactions"]


def test_absolute_paths_are_kept(ins, tmp_path: Path):
    assert ins.files.abs_path(str(tmp_path / "x.txt")) == tmp_path / "x.txt"
