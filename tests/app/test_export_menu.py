"""File → Export in the main window, on a shared Claude Code session opened through the window."""

from __future__ import annotations

import csv
import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtGui import QImage

from app.main_window import MainWindow
from engine import export
from tests.app.test_main_window import close, make_window
from tests.conftest import SHARED

CLAUDE = SHARED / "data" / "sessions" / "claude-code" / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"

pytestmark = pytest.mark.skipif(not CLAUDE.exists(), reason="the shared sessions are not on this machine")


@pytest.fixture
def win(qtbot: Any, fake_settings: Any, workspace: Path) -> Any:
    window = make_window(qtbot, fake_settings, workspace)
    yield window
    close(qtbot, window)


def _open(qtbot: Any, win: MainWindow) -> Any:
    with qtbot.waitSignal(win.controller.session_loaded, timeout=60_000) as loaded:
        win.controller.import_transcript(str(CLAUDE))
    return loaded.args[0]


def test_export_submenu_writes_every_kind(qtbot: Any, win: MainWindow, tmp_path: Path) -> None:
    menu = win.export_menu
    file_menu = win.menuBar().actions()[0].menu()
    assert menu.menu.menuAction() in file_menu.actions()
    assert [a.text() for a in menu.menu.actions()] == [
        "Chart as &PNG…", "Chart as &SVG…", "Session as &Markdown…", "Calls as &CSV…", "Calls as &JSON…"]
    assert not any(a.isEnabled() for a in menu.actions.values())  # no session yet
    view = _open(qtbot, win)
    assert all(a.isEnabled() for a in menu.actions.values())
    chart = win.ensure_chart()
    chart.set_cache_view(True)
    assert chart.cache_view()

    # the dialog is shown with open() (trigger() returned while it is visible: no nested exec() loop)
    # and proposes a name after the session; choosing a file writes it
    menu.actions["csv"].trigger()
    dialog = menu.dialog
    assert dialog is not None and dialog.isVisible()
    assert Path(dialog.selectedFiles()[0]).name == f"{view.id}-calls.csv"
    with qtbot.waitSignal(menu.exported, timeout=10_000) as done:
        dialog.fileSelected.emit(str(tmp_path / "calls.csv"))
    dialog.close()
    assert done.args == ["csv", str(tmp_path / "calls.csv")]
    rows = list(csv.DictReader(io.StringIO((tmp_path / "calls.csv").read_text(encoding="utf-8"))))
    assert len(rows) == chart.column_count() == 143
    assert menu.directory == tmp_path

    assert menu.write("json", tmp_path / "calls.json") is not None
    doc = json.loads((tmp_path / "calls.json").read_text(encoding="utf-8"))
    assert doc["calls"] == export.call_rows(export.read_session(view.path))

    assert menu.write("md", tmp_path / "s.md") is not None
    text = (tmp_path / "s.md").read_text(encoding="utf-8")
    for mid, tokens in list(view.state.tokens.items())[:20]:  # the tokens the chat shows
        msg = next(m for m in view.messages if str(m["id"]) == mid)
        assert f"{msg['role']}" in text and f"· {tokens:,} tokens" in text

    assert menu.write("png", tmp_path / "c.png") is not None
    image = QImage(str(tmp_path / "c.png"))
    assert not image.isNull() and image.width() == chart._tl_plot.width()
    assert menu.write("svg", tmp_path / "c.svg") is not None
    root = ET.parse(tmp_path / "c.svg").getroot()
    assert any(True for _ in root.iter("{http://www.w3.org/2000/svg}path"))


def test_export_problem_is_a_notice(qtbot: Any, win: MainWindow, tmp_path: Path) -> None:
    _open(qtbot, win)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert win.export_menu.write("md", blocker / "inside.md") is None
    assert win.notices[-1][0] == "error" and "cannot export" in win.notices[-1][1]
