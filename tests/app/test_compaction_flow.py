"""The compaction preview in the running window: the plan and the digest at once, the model's text
when it arrives (with what each part cost), apply, undo — and the bundled model's digest-only mode,
and applying the digest while the model still writes. Against the scripted model over real HTTP."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.controller import Controller
from app.main_window import MainWindow
from engine.store.config import Settings
from tests import fakeserver as fs
from tests.app.conftest import run
from tests.app.test_flow import big_log, send, wait_turn

NARRATIVE = "The import fails on a missing 'ts' column; the schema check is the suspect, schema.py comes next."
REQUEST = "The nightly import job failed. Find out why; do not change any file."


def _window(qtbot: Any, settings: Settings, workspace: Path) -> MainWindow:
    (workspace / "big.log").write_text(big_log(), encoding="utf-8")
    controller = Controller(settings, workspace=workspace)
    window = MainWindow(controller)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    with qtbot.waitSignal(controller.session_loaded, timeout=10_000):
        controller.new_session()
    return window


@pytest.fixture
def win(qtbot: Any, fake_settings: Settings, workspace: Path) -> Iterator[MainWindow]:
    window = _window(qtbot, fake_settings, workspace)
    yield window
    window.close()
    run(qtbot, window.controller.shutdown())


def _work(qtbot: Any, win: MainWindow, server: fs.FakeLLMServer) -> list[str]:
    """One turn with a tool call; returns the history's ids."""
    server.queue(
        fs.tool_call_reply("read_file", {"path": "big.log", "max_lines": 2000}, call_id="call_log"),
        fs.text_reply("The log ends with an error at batch 500. Next I will read schema.py."),
    )
    send(qtbot, win, REQUEST)
    wait_turn(qtbot, win)
    server.queue(fs.text_reply("Noted. " * 200, when={"tools": True}))
    send(qtbot, win, "Thanks, keep going.")
    wait_turn(qtbot, win)
    server.queue(fs.text_reply("Still looking.", when={"tools": True}))
    send(qtbot, win, "What next?")
    wait_turn(qtbot, win)
    return [m["id"] for m in win.controller.session.messages]


def _model_calls(server: fs.FakeLLMServer) -> int:
    return sum(1 for r in server.requests if r.body and not r.body.get("tools"))


def test_plan_and_digest_at_once_then_the_models_text_apply_undo(
    qtbot: Any, win: MainWindow, server: fs.FakeLLMServer
) -> None:
    c = win.controller
    ids_before = _work(qtbot, win, server)
    server.queue(fs.text_reply(NARRATIVE, when={"tools": False}, chunks=4, delay=0.5))
    t0 = time.perf_counter()
    send(qtbot, win, "/compact")
    qtbot.waitUntil(lambda: win.preview_dialog is not None and bool(win.preview_dialog.plan_rows()), timeout=5_000)
    dlg = win.preview_dialog
    shown_after = time.perf_counter() - t0
    # at once: the plan, both bars and the digest, while the model is still writing
    assert dlg.is_busy() and dlg.apply_button.isEnabled() and not dlg.editor.isReadOnly()
    assert shown_after < 1.5, f"the plan took {shown_after:.2f} s to show"
    assert [b is not None for _, b in dlg.bars.bars()] == [True, True]
    digest = dlg.summary()
    assert digest.startswith("## Goal") and REQUEST in digest and "big.log" in digest
    assert "digest + narrative by openai/fake" in dlg.summary_label.text()
    assert "digest" in dlg.costs_text() and "writing" in dlg.costs_text()
    assert "## Narrative" not in digest
    # later: the model's narrative after the digest, and what it cost
    qtbot.waitUntil(lambda: not dlg.is_busy(), timeout=20_000)
    text = dlg.summary()
    assert text.startswith(digest) and "## Narrative (written by openai/fake)" in text
    assert text.rstrip().endswith(NARRATIVE)
    assert "openai/fake:" in dlg.costs_text() and "tokens in" in dlg.costs_text()
    request = [r for r in server.requests if r.body and not r.body.get("tools")][-1]
    assert "<digest>" in str(request.body["messages"])
    assert dlg.error_text() == ""
    # apply, then undo
    dlg.apply_button.click()
    qtbot.waitUntil(lambda: bool(c.session.undo_stack()), timeout=10_000)
    assert c.session.summary == text.strip() and not dlg.isVisible()
    assert [m["id"] for m in c.session.messages] != ids_before
    win.undo_action.trigger()
    qtbot.waitUntil(lambda: not c.session.undo_stack(), timeout=10_000)
    assert [m["id"] for m in c.session.messages] == ids_before and c.session.summary == ""


def test_applying_the_digest_while_the_model_writes(qtbot: Any, win: MainWindow, server: fs.FakeLLMServer) -> None:
    c = win.controller
    _work(qtbot, win, server)
    server.queue(fs.text_reply(NARRATIVE, when={"tools": False}, chunks=6, delay=1.0))
    send(qtbot, win, "/compact")
    qtbot.waitUntil(lambda: win.preview_dialog is not None and bool(win.preview_dialog.plan_rows()), timeout=5_000)
    dlg = win.preview_dialog
    assert dlg.is_busy()
    digest = dlg.summary()
    dlg.apply_button.click()
    qtbot.waitUntil(lambda: bool(c.session.undo_stack()), timeout=10_000)
    assert c.session.summary == digest.strip() and "## Narrative" not in c.session.summary
    qtbot.waitUntil(lambda: c.task("preview") is None, timeout=5_000)
    assert not dlg.isVisible() and c.preview is None


def test_bundled_model_default_is_the_digest_without_a_model_call(
    qtbot: Any, fake_settings: Settings, workspace: Path, server: fs.FakeLLMServer
) -> None:
    # the session's model is the scripted one; the summaries are made as on the bundled model
    window = _window(qtbot, fake_settings.replace(summary_mode="digest"), workspace)
    try:
        _work(qtbot, window, server)
        calls = _model_calls(server)
        send(qtbot, window, "/compact")
        qtbot.waitUntil(lambda: window.preview_dialog is not None and bool(window.preview_dialog.plan_rows()),
                        timeout=5_000)
        dlg = window.preview_dialog
        qtbot.waitUntil(lambda: not dlg.is_busy(), timeout=5_000)
        assert "digest — no model" in dlg.summary_label.text()
        assert dlg.summary().startswith("## Goal") and REQUEST in dlg.summary()
        assert "digest" in dlg.costs_text() and "writing" not in dlg.costs_text()
        assert _model_calls(server) == calls  # no model was asked
        dlg.apply_button.click()
        qtbot.waitUntil(lambda: bool(window.controller.session.undo_stack()), timeout=10_000)
        assert window.controller.session.summary.startswith("## Goal")
    finally:
        window.close()
        run(qtbot, window.controller.shutdown())
