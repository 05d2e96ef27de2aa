"""app.main_window: layout, persistence, real trajectories, repairs, settings and themes in the window."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.controller import Controller
from app.main_window import WINDOW_FILE, MainWindow
from engine.context.conversation import Session
from engine.model import messages as m
from engine.store.config import Settings, config_dir, data_dir, load_settings
from tests.app.conftest import run
from tests.app.test_controller import make_session
from tests.conftest import trajectory_files
from tests.memkeyring import MemoryKeyring
from widgets.theme import DARK, LIGHT


def make_window(qtbot: Any, settings: Settings, workspace: Path) -> MainWindow:
    controller = Controller(settings, workspace=workspace)
    window = MainWindow(controller)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    return window


def close(qtbot: Any, window: MainWindow) -> None:
    window.close()
    run(qtbot, window.controller.shutdown())


@pytest.fixture
def win(qtbot: Any, fake_settings: Settings, workspace: Path) -> Iterator[MainWindow]:
    window = make_window(qtbot, fake_settings, workspace)
    yield window
    close(qtbot, window)


def test_layout_has_every_part(qtbot: Any, win: MainWindow) -> None:
    chart = win.ensure_chart()
    # before a session is shown: no empty chart (ticks 0 0 0 1 1, a -0 axis), nothing to compact or undo
    assert win.chart_dock.widget() is not chart and "Opening the session" in win.chart_dock.widget().text()
    assert not win.compact_action.isEnabled() and not win.undo_action.isEnabled()
    with qtbot.waitSignal(win.controller.session_loaded, timeout=10_000):
        win.controller.new_session()  # (start() would also import litellm in this process: not needed here)
    assert win.chart_dock.widget() is chart
    assert win.inspector_dock.widget() is win.inspector
    assert win.centralWidget() is win.splitter
    menus = [a.text() for a in win.menuBar().actions()]
    assert menus == ["&File", "&Edit", "&View", "&Help"]
    file_actions = [a.text() for a in win.menuBar().actions()[0].menu().actions() if a.text()]
    assert {"&New session", "&Open transcript…", "&Quit"} <= set(file_actions)
    edit_actions = [a.text() for a in win.menuBar().actions()[1].menu().actions() if a.text()]
    assert edit_actions[:3] == ["&Undo compaction", "&Copy", "Select &All"]
    help_actions = [a.text() for a in win.menuBar().actions()[3].menu().actions() if a.text()]
    assert help_actions == ["&Keyboard shortcuts", "Open &log folder", "&About Context Workbench"]
    assert not win.stop_action.isEnabled() and win.compact_action.isEnabled()
    assert not win.undo_action.isEnabled()  # a new session: nothing to undo
    assert win.status.texts()["model"] == "model: openai/fake"


def test_geometry_docks_and_splitter_persist(qtbot: Any, fake_settings: Settings, workspace: Path) -> None:
    first = make_window(qtbot, fake_settings, workspace)
    first.resize(790, 560)  # inside the offscreen screen (800×800): restoreGeometry keeps windows on screen
    qtbot.waitUntil(lambda: first.height() == 560, timeout=2_000)
    first.splitter.setSizes([120, 400])
    size = (first.width(), first.height())
    sizes = first.splitter.sizes()
    first.inspector_dock.hide()
    close(qtbot, first)
    assert (config_dir() / WINDOW_FILE).is_file()
    second = make_window(qtbot, fake_settings, workspace)
    assert second.height() == size[1] != 900  # (the width is clamped to the 800-px offscreen screen)
    assert second.splitter.sizes() == sizes
    assert not second.inspector_dock.isVisible()  # the dock layout came back too
    close(qtbot, second)


def test_a_torn_session_shows_its_load_report(qtbot: Any, win: MainWindow) -> None:
    session = make_session(win.controller.store, 2)
    with open(session.history_path, "ab") as fh:
        fh.write(b'{"role": "user", "content": "cut sh')
    with qtbot.waitSignal(win.controller.session_loaded, timeout=10_000):
        win.controller.open_session(session.id)
    qtbot.waitUntil(lambda: bool(win.notice_text()), timeout=5_000)
    assert "torn line" in win.notice_text()
    assert win.notice_bar.level == "warning"
    assert len(win.chat.message_ids()) == 8


@pytest.mark.parametrize("path", trajectory_files(), ids=lambda p: p.name.split(".")[0])
def test_open_a_real_trajectory(qtbot: Any, win: MainWindow, path: Path) -> None:
    data = json.loads(path.read_text())
    assistants = [x for x in data["messages"] if x.get("role") == "assistant"]
    calls = [c["id"] for x in assistants for c in x.get("tool_calls") or []]
    results = [x for x in data["messages"] if x.get("role") == "tool"]
    assert calls and results, "the trajectory has tool calls"
    chart = win.ensure_chart()
    win.open_action.trigger()  # File → Open transcript… shows the (non-modal) file dialog
    dialog = win.sessions._file_dialog
    assert dialog is not None and dialog.isVisible()
    with qtbot.waitSignal(win.controller.session_loaded, timeout=30_000):
        dialog.fileSelected.emit(str(path))
    dialog.close()
    chart.flush()
    # the timeline: one column per LLM call, the provider's count drawn against the estimate
    assert chart.column_count() == len(assistants)
    provider = chart.provider_series()
    reported = [x["extra"]["response"]["usage"]["prompt_tokens"] for x in assistants]
    assert [int(v) for v in provider] == reported
    tops = chart.column_tops()
    assert not any(math.isnan(v) for v in tops) and all(t > 0 for t in tops)
    errors = [abs(t - r) / r for t, r in zip(tops[1:], reported[1:], strict=True)]
    assert sorted(errors)[len(errors) // 2] < 0.05  # calibrated: the median estimate is within 5%
    # the chat lists every tool call and every result
    listed_calls = []
    tool_rows = []
    for key in win.chat.message_ids():
        item = win.chat.item(key)
        listed_calls += [c["id"] for c in item.msg.get("tool_calls") or []]
        if item.role == "tool":
            tool_rows.append(key)
    assert listed_calls == calls
    assert len(tool_rows) == len(results)
    assert win.sessions.current_id() == win.controller.session.id
    assert "Imported" in win.notices[-1][1]


def test_settings_dialog_round_trip(
    qtbot: Any, win: MainWindow, memory_keyring: MemoryKeyring, workspace: Path
) -> None:
    with qtbot.waitSignal(win.controller.session_loaded, timeout=10_000):
        win.controller.new_session()
    dlg = win.open_settings()
    assert dlg.isVisible()  # shown with open(): the call returned, no nested event loop
    assert dlg.model_edit.text() == "openai/fake"
    # an invalid value is refused with a reason, nothing is saved
    dlg.field("max_tokens").setValue(9_000)  # over the 8,000-token window override
    assert not dlg.try_accept()
    assert "max_tokens" in dlg.error_text()
    assert not (config_dir() / "settings.toml").exists()
    # valid values: saved through engine.store.config, the key to the keyring only
    dlg.field("max_tokens").setValue(512)
    dlg.model_edit.setText("openai/gpt-4o-mini")
    dlg.field("compact_threshold_ratio").setValue(0.7)
    secret = "sk-test-abcdefghijklmnop0123456789"
    dlg.api_key_edit.setText(secret)
    assert dlg.try_accept()
    saved = load_settings().settings
    assert (saved.model, saved.max_tokens, saved.compact_threshold_ratio) == ("openai/gpt-4o-mini", 512, 0.7)
    assert win.controller.settings == saved
    assert memory_keyring.store[("ctxbench", "openai")] == secret
    for folder in (config_dir(), data_dir()):
        for f in folder.rglob("*"):
            if f.is_file():
                assert secret.encode() not in f.read_bytes(), f"the key leaked into {f}"
    assert win.status.texts()["model"] == "model: openai/gpt-4o-mini"
    assert win.controller.agent.window.max_tokens == 512  # the agent now runs with the new settings


def test_theme_setting_switches_the_palette(qtbot: Any, win: MainWindow) -> None:
    win.ensure_chart()
    assert win.controller.apply_settings(win.controller.settings.replace(theme="dark"))
    assert win.pal is DARK and win.chat.layouter().pal is DARK
    assert win.controller.apply_settings(win.controller.settings.replace(theme="light"))
    assert win.pal is LIGHT and win.chat.layouter().pal is LIGHT


def test_context_command_explains_the_window(qtbot: Any, win: MainWindow) -> None:
    session = make_session(win.controller.store, 2)
    with qtbot.waitSignal(win.controller.session_loaded, timeout=10_000):
        win.controller.open_session(session.id)
    win.input.set_text("/context")
    assert win.input.submit()
    text = win.notice_text()
    assert text.startswith("Context: ") and "of 8,000 tokens" in text
    for label in ("System prompt", "Summary", "History · user", "History · tool results", "Tool definitions",
                  "Output reserve", "Free"):
        assert label in text
    assert win.chart_dock.isVisible()


def test_sessions_new_rename_delete(qtbot: Any, win: MainWindow) -> None:
    c = win.controller
    with qtbot.waitSignal(c.session_loaded, timeout=10_000):
        win.sessions.new_button.click()
    sid = c.session.id
    assert win.sessions.current_id() == sid
    c.session.append(m.user("hello"))
    win.sessions.rename_requested.emit(sid, "Renamed session")
    assert Session.load(c.session.path).title == "Renamed session"
    assert win.sessions.title_of(sid) == "Renamed session"
    with qtbot.waitSignal(c.session_loaded, timeout=10_000):
        win.sessions.new_requested.emit()
    other = c.session.id
    assert other != sid and set(win.sessions.session_ids()) == {sid, other}
    box = win.sessions.request_delete(other)
    with qtbot.waitSignal(c.session_loaded, timeout=10_000) as blocker:
        box.delete_button.click()
    assert blocker.args[0].id == sid
    assert win.sessions.session_ids() == [sid]


def test_archive_tab_lists_days_and_messages(qtbot: Any, win: MainWindow) -> None:
    session = make_session(win.controller.store, 2)
    with qtbot.waitSignal(win.controller.session_loaded, timeout=10_000):
        win.controller.open_session(session.id)
    ids = win.controller.session.messages
    with qtbot.waitSignal(win.controller.context_state, timeout=10_000):
        win.controller.clear_session()
    assert all(win.chat.item(x["id"]).out_of_context for x in ids)  # still shown, dimmed
    tree = win.inspector.archive_tree
    assert tree.topLevelItemCount() == 1
    day = tree.topLevelItem(0).text(0)
    with qtbot.waitSignal(win.controller.archive_messages, timeout=5_000) as blocker:
        win.inspector.archive_day_requested.emit(day)
    assert [x["id"] for x in blocker.args[1]] == [x["id"] for x in ids]
    qtbot.waitUntil(lambda: tree.topLevelItem(0).childCount() == len(ids), timeout=5_000)


def test_the_chat_holds_the_session_s_message_not_a_copy(qtbot: Any, win: MainWindow) -> None:
    """A message the engine adds is shown as the object the session holds: no second dict a message for as long as
    a followed file grows (0.45 MB over ten minutes at 30 MB); the chat never changes a message it holds."""
    from engine.model.events import MessageAdded

    with qtbot.waitSignal(win.controller.session_loaded, timeout=10_000):
        win.controller.new_session()
    msg: dict[str, Any] = {"role": "user", "content": "hello", "id": "held-1"}
    win._on_controller_message_added(MessageAdded(msg, 3))
    item = win.chat._model.item("held-1")
    assert item is not None and item.msg is msg
    win.chat.viewport().repaint()
    assert msg == {"role": "user", "content": "hello", "id": "held-1"}
