"""The "Archive" tab (widgets/inspector/archive_tab.py)."""

from __future__ import annotations

from PySide6.QtCore import Qt

from engine.store.archive import ArchiveHit
from tests.widgets.inspector.data import archived


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
        ArchiveHit(day="2025-11-20", line=3, message_id="2025-11-20-2", role="tool", ts="",
                   message=archived("2025-11-20", 3)[2], snippet="…archived 2 about parsing"),
        ArchiveHit(day="2025-11-21", line=1, message_id="2025-11-21-0", role="user", ts="",
                   message=archived("2025-11-21", 1)[0], snippet="archived 0 about parsing"),
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
