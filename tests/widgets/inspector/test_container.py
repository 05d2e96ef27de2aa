"""The inspector itself (widgets/inspector/container.py): tabs and opening a file from a chat link."""

from __future__ import annotations

from tests.widgets.inspector.data import cell
from widgets.inspector import Inspector


def test_tabs(ins):
    for i, name in enumerate(Inspector.TABS):
        ins.show_tab(name)
        assert ins.currentIndex() == i
    assert [ins.tabText(i) for i in range(4)] == ["Tool results", "Archive", "Summary", "Compactions"]


def test_open_file_from_a_chat_link(ins, qtbot):
    ins.show_tab("summary")
    with qtbot.waitSignal(ins.file_requested) as blocker:
        ins.open_file("tool_results/ccc.txt")
    assert blocker.args == ["tool_results/ccc.txt"]
    assert ins.currentIndex() == 0
    row = ins.files_view.currentIndex().row()
    assert cell(ins, row, 0) == "grep"
