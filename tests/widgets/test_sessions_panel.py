from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox

from engine.workbench.rows import SessionRow
from widgets.sessions_panel import SessionsPanel

SESSIONS = [
    SessionRow("s1", "Fix separability", "2025-11-21T10:00:00+00:00", 12),
    SessionRow("s2", "Refactor parser", "2025-11-20T09:00:00+00:00", 3),
    SessionRow("s3", "", "bad date"),
]


@pytest.fixture
def panel(qtbot):
    w = SessionsPanel()
    qtbot.addWidget(w)
    w.resize(260, 400)
    w.show()
    qtbot.waitExposed(w)
    w.set_sessions(SESSIONS)
    return w


def test_lists_sessions_with_details(panel):
    assert panel.session_ids() == ["s1", "s2", "s3"]
    assert panel.title_of("s3") == "Untitled session"
    item = panel.list.item(0)
    assert item.statusTip().endswith("12 messages")
    assert not panel.empty_label.isVisible()
    panel.set_sessions([])
    assert panel.empty_label.isVisible()
    assert not panel.rename_button.isEnabled()


def test_selection_emits_but_set_current_does_not(panel, qtbot):
    chosen = []
    panel.session_selected.connect(chosen.append)
    panel.set_current("s2")
    assert chosen == [] and panel.current_id() == "s2"
    panel.list.setCurrentRow(0)
    assert chosen == ["s1"]
    panel.set_sessions(SESSIONS[::-1])  # keeps the selection, silently
    assert panel.current_id() == "s1" and chosen == ["s1"]


def test_new_button(panel, qtbot):
    with qtbot.waitSignal(panel.new_requested):
        qtbot.mouseClick(panel.new_button, Qt.MouseButton.LeftButton)


def test_rename_in_place(panel, qtbot):
    renames = []
    panel.rename_requested.connect(lambda sid, title: renames.append((sid, title)))
    assert panel.start_rename("s2")
    item = panel.list.item(1)
    item.setText("  Parser rewrite  ")  # what the in-place editor commits
    assert renames == [("s2", "Parser rewrite")]
    assert panel.title_of("s2") == "Parser rewrite"
    item.setText("   ")  # an empty title is refused: the old one comes back
    assert panel.title_of("s2") == "Parser rewrite"
    assert renames == [("s2", "Parser rewrite")]


def test_delete_asks_first(panel, qtbot):
    deleted = []
    panel.delete_requested.connect(deleted.append)
    box = panel.request_delete("s1")
    assert box is not None and box.isVisible()
    assert "Fix separability" in box.text()
    box.button(QMessageBox.StandardButton.Cancel).click()
    assert deleted == []
    box = panel.request_delete("s1")
    box.delete_button.click()
    assert deleted == ["s1"]
    assert panel.request_delete("nope") is None


def test_update_and_remove(panel):
    panel.update_session(SessionRow("s4", "New one"))
    assert panel.session_ids()[0] == "s4"
    panel.update_session(SessionRow("s1", "Renamed elsewhere", messages=13))
    assert panel.title_of("s1") == "Renamed elsewhere"
    panel.remove_session("s2")
    assert "s2" not in panel.session_ids()


def test_open_transcript_uses_a_non_modal_dialog(panel, qtbot, tmp_path):
    paths = []
    panel.open_transcript_requested.connect(paths.append)
    dlg = panel.choose_transcript()
    assert dlg.isVisible()
    target = tmp_path / "run.traj.json"
    target.write_text("{}")
    dlg.fileSelected.emit(str(target))
    assert paths == [str(target)]
    dlg.reject()


def test_paints_two_lines(panel):
    img = panel.list.grab().toImage()
    assert img.width() > 0
    assert panel.list.sizeHintForRow(0) >= 2 * panel.list.fontMetrics().height()
