"""app.wire_record: File → Record an agent… starts the recording proxy off the UI thread, shows the lines to set,
lists each exchange as it comes, opens the capture in the window followed live, and stops when closed."""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tests.fakeserver as fs
from app.main_window import MainWindow
from app.wire_record import RecordWiring
from engine.store.config import Settings
from tests.app.test_main_window import close, make_window


@pytest.fixture
def win(qtbot: Any, fake_settings: Settings, workspace: Path) -> Iterator[MainWindow]:
    window = make_window(qtbot, fake_settings, workspace)
    try:
        yield window
    finally:
        close(qtbot, window)


def _post(url: str, body: dict[str, Any], out: list[Any]) -> None:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers={
        "content-type": "application/json", "authorization": "Bearer sk-planted-record-0001"})
    with urllib.request.urlopen(req, timeout=20) as resp:
        out.append((resp.status, resp.read()))


def test_record_an_agent_from_the_window(qtbot: Any, win: MainWindow, server: fs.FakeLLMServer) -> None:
    wiring: RecordWiring = win.record_wiring  # type: ignore[attr-defined]
    file_menu = next(a.menu() for a in win.menuBar().actions() if a.text().replace("&", "") == "File")
    assert wiring.action in file_menu.actions()  # type: ignore[union-attr]
    wiring.action.trigger()
    dialog = wiring.dialog
    assert dialog is not None and dialog.isVisible()
    dialog.port.setValue(0)
    dialog.upstream.setText(f"http://127.0.0.1:{server.port}")
    dialog.start_button.click()
    qtbot.waitUntil(lambda: "Recording on" in dialog.status_text(), timeout=10_000)
    assert wiring.service.running and wiring.service._thread is not threading.current_thread()
    url = dialog.status_text().split("Recording on ", 1)[1].split(" ", 1)[0]
    assert f"export OPENAI_BASE_URL={url}/v1" in dialog.setup_text()
    assert "# Codex:" in dialog.setup_text() and "# OpenCode:" in dialog.setup_text()
    capture = Path(dialog.capture)
    assert capture.is_file() and dialog.open_button.isEnabled()

    server.queue(fs.text_reply("Here are the files."))
    body = {"model": "gpt-test", "stream": True, "stream_options": {"include_usage": True},
            "tools": [{"type": "function", "function": {"name": "ls", "parameters": {"type": "object"}}}],
            "messages": [{"role": "system", "content": "You list files."},
                         {"role": "user", "content": "list the files"}]}
    answers: list[Any] = []
    sender = threading.Thread(target=_post, args=(url + "/v1/chat/completions", body, answers))
    with qtbot.waitSignal(win.controller.session_loaded, timeout=20_000):  # the capture opens with its first call
        sender.start()
        qtbot.waitUntil(lambda: len(dialog.exchange_rows()) == 1, timeout=20_000)
    sender.join(10)
    assert answers and answers[0][0] == 200
    (row,) = dialog.exchange_rows()
    assert row[1] == "POST /v1/chat/completions" and row[2] == "200" and row[3]  # the prompt tokens
    view = win.sources_wiring.view  # type: ignore[attr-defined]
    assert view is not None and view.read_only and view.source.path == str(capture)
    qtbot.waitUntil(lambda: "live" in win.sources_wiring.live_label.text(), timeout=10_000)  # type: ignore[attr-defined]
    qtbot.waitUntil(lambda: len(win.chat.message_ids()) == 2, timeout=20_000)  # the prompt and the answer
    # a second call reaches the followed view as the proxy writes it
    server.queue(fs.text_reply("Two files."))
    body["messages"] += [{"role": "assistant", "content": "Here are the files."},
                         {"role": "user", "content": "how many?"}]
    _post(url + "/v1/chat/completions", body, answers)
    qtbot.waitUntil(lambda: len(win.chat.message_ids()) == 4, timeout=20_000)
    assert len(dialog.exchange_rows()) == 2
    assert "sk-planted-record-0001" not in capture.read_text()

    dialog.close()  # closing the dialog stops the proxy
    qtbot.waitUntil(lambda: not wiring.service.running, timeout=15_000)
    qtbot.waitUntil(lambda: "Stopped: 2 exchange(s)" in dialog.status_text(), timeout=5_000)


def test_a_port_that_is_taken_is_said(qtbot: Any, win: MainWindow) -> None:
    import socket

    wiring: RecordWiring = win.record_wiring  # type: ignore[attr-defined]
    dialog = wiring.show_dialog()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        dialog.port.setValue(taken.getsockname()[1])
        dialog.start_button.click()
        qtbot.waitUntil(lambda: dialog.status_text().startswith("Not started: cannot listen"), timeout=10_000)
    assert dialog.start_button.isEnabled() and not dialog.open_button.isEnabled()
    assert not wiring.service.running


def test_closing_the_window_stops_the_proxy(qtbot: Any, fake_settings: Settings, workspace: Path) -> None:
    window = make_window(qtbot, fake_settings, workspace)
    wiring: RecordWiring = window.record_wiring  # type: ignore[attr-defined]
    try:
        dialog = wiring.show_dialog()
        dialog.port.setValue(0)
        dialog.start_button.click()
        qtbot.waitUntil(lambda: "Recording on" in dialog.status_text(), timeout=10_000)
        assert wiring.service.running
    finally:
        close(qtbot, window)
    assert not wiring.service.running
