"""The whole flow in the running window, against a scripted model over real HTTP (tests/fakeserver.py).

send → streaming text appears → chart bar and timeline update → a tool call's big result is offloaded
and appears in the inspector → /compact opens the preview → edit the summary → apply → the chart
drops and a marker appears → undo restores → Stop cancels a running turn and leaves a consistent
history (checked by loading the session again from disk).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.controller import Controller
from app.main_window import MainWindow
from engine.agent import unanswered_calls
from engine.context.conversation import Session
from engine.store.config import Settings
from tests import fakeserver as fs
from tests.app.conftest import run
from tests.conftest import SUMMARY


def big_log() -> str:
    lines = [f"2025-11-20 02:{i // 60 % 60:02d}:{i % 60:02d} INFO import batch {i} ok ({i * 37 % 1000} rows)"
             for i in range(1, 500)]
    lines.append("2025-11-20 02:20:00 ERROR ValueError: column 'ts' missing in batch 500")
    return "\n".join(lines) + "\n"


@pytest.fixture
def win(qtbot: Any, fake_settings: Settings, workspace: Path) -> Iterator[MainWindow]:
    (workspace / "big.log").write_text(big_log(), encoding="utf-8")
    controller = Controller(fake_settings, workspace=workspace)
    window = MainWindow(controller)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    window.ensure_chart()
    with qtbot.waitSignal(controller.session_loaded, timeout=10_000):
        controller.new_session()
    # as the app does at start (controller.start()): litellm loads in the background; the flow below
    # is timed from a window whose model library is ready (the first call's import is not the subject)
    run(qtbot, controller.service.warm_up(), timeout=60)
    yield window
    window.close()
    run(qtbot, controller.shutdown())


def send(qtbot: Any, window: MainWindow, text: str) -> None:
    window.input.set_text(text)
    assert window.input.submit()


def wait_turn(qtbot: Any, window: MainWindow, timeout: int = 20_000) -> None:
    qtbot.waitUntil(lambda: not window.controller.busy and window.controller.task("turn") is None, timeout=timeout)


def bar(window: MainWindow, region: str) -> float:
    window.chart.flush()
    return window.chart.bar_segments()[region][1]


def test_whole_flow(qtbot: Any, win: MainWindow, server: fs.FakeLLMServer) -> None:
    c = win.controller
    chart = win.chart
    assert chart is not None and chart.column_count() == 0

    # --- 1. send → the answer streams into the chat, the chart and the status bar follow
    answer = "Sure. I will look at the nightly import log first, then tell you what failed and why. " * 3
    server.queue(fs.stream(*[fs.text(w + " ") for w in answer.split()], finish_reason="stop", delay=0.03))
    send(qtbot, win, "The nightly import job failed. Can you find out why?")
    qtbot.waitUntil(lambda: c.state == "streaming", timeout=15_000)

    def streamed_text() -> str:
        win.chat.flush()
        for key in reversed(win.chat.message_ids()):
            item = win.chat.item(key)
            if item is not None and item.role == "assistant":
                return str(item.msg.get("content") or "")
        return ""

    qtbot.waitUntil(lambda: "nightly" in streamed_text(), timeout=10_000)
    assert c.busy, "the text appeared while the turn was still streaming"
    # the bar of the next request grows with the answer while it streams (only the user message is stored)
    qtbot.waitUntil(lambda: bar(win, "history_assistant") > 0, timeout=5_000)
    assert c.busy and [m["role"] for m in c.session.messages] == ["user"]
    assert chart.column_count() == 0
    partial = len(streamed_text())
    assert partial < len(answer.strip())
    wait_turn(qtbot, win)
    assert streamed_text().strip() == " ".join(answer.split())
    qtbot.waitUntil(lambda: chart.column_count() == 1, timeout=5_000)
    assert win.status.texts()["last_call"].startswith("last call: est.")
    assert bar(win, "history_assistant") > 0 and bar(win, "history_user") > 0
    history_before_tool = bar(win, "history_tool")
    assert history_before_tool == 0
    assert [m["role"] for m in c.session.messages] == ["user", "assistant"]

    # --- 2. a tool call with a big result: offloaded, in the inspector, openable from the chat
    server.queue(
        fs.tool_call_reply("read_file", {"path": "big.log", "max_lines": 2000}, call_id="call_log"),
        fs.text_reply("The import failed at batch 500: `ValueError: column 'ts' missing`."),
    )
    send(qtbot, win, "Read big.log and tell me the error.")
    wait_turn(qtbot, win)
    assert [m["role"] for m in c.session.messages][-4:] == ["user", "assistant", "tool", "assistant"]
    tool_msg = c.session.messages[-2]
    assert tool_msg["offload"]["path"].startswith("tool_results/")
    path = tool_msg["offload"]["path"]
    qtbot.waitUntil(lambda: win.inspector.files.model.rowCount() == 1, timeout=5_000)
    assert win.inspector.files.model.files[0].path == path
    assert chart.column_count() == 3
    assert bar(win, "history_tool") > 0
    win.chat.open_offload.emit(path)  # the "Open full output" link of the tool block
    qtbot.waitUntil(lambda: win.inspector.viewer.path() == path, timeout=5_000)
    assert "ValueError: column 'ts' missing" in win.inspector.viewer.text()
    assert len(win.inspector.viewer.text()) > len(str(tool_msg["content"]))

    # --- 3. /compact opens the preview; the summary is edited and applied
    history_full = bar(win, "history_user") + bar(win, "history_assistant") + bar(win, "history_tool")
    ids_before = [m["id"] for m in c.session.messages]
    server.queue(fs.text_reply(SUMMARY, when={"tools": False}))
    send(qtbot, win, "/compact keep the error message verbatim")
    qtbot.waitUntil(lambda: win.preview_dialog is not None and win.preview_dialog.isVisible(), timeout=5_000)
    dlg = win.preview_dialog
    qtbot.waitUntil(lambda: c.preview is not None and not dlg.is_busy(), timeout=15_000)
    summary_request = [r for r in server.requests if r.body and not r.body.get("tools")][-1]
    assert "keep the error message verbatim" in str(summary_request.body["messages"])
    rows = dlg.plan_rows()
    assert {status for status, _, _ in rows} == {"compacted", "kept"}
    assert dlg.summary().startswith("## Goal")
    edited = dlg.summary() + "\n- The user asked to keep the error text: ValueError: column 'ts' missing"
    dlg.editor.setPlainText(edited)
    qtbot.waitUntil(lambda: dlg.apply_button.isEnabled(), timeout=2_000)
    dlg.apply_button.click()
    qtbot.waitUntil(lambda: bool(c.session.undo_stack()), timeout=10_000)
    qtbot.waitUntil(lambda: len(win.chat.marker_ids()) == 1, timeout=5_000)
    assert c.session.summary.endswith("ValueError: column 'ts' missing")
    assert not dlg.isVisible()
    compacted = [i for i in ids_before if i not in c.session]
    assert compacted, "the plan compacted something"
    history_after = bar(win, "history_user") + bar(win, "history_assistant") + bar(win, "history_tool")
    assert history_after < history_full
    assert bar(win, "summary") > 0
    assert chart.compaction_count() == 1
    marker = win.chat.item(win.chat.marker_ids()[0])
    assert marker.event.result == "summarized" and marker.undoable
    assert all(win.chat.item(i).out_of_context for i in compacted)
    assert win.undo_action.isEnabled()
    assert "ValueError" in win.inspector.summary.text()

    # --- 4. undo (Edit menu) restores the history and the summary
    win.undo_action.trigger()
    qtbot.waitUntil(lambda: not c.session.undo_stack(), timeout=10_000)
    assert [m["id"] for m in c.session.messages] == ids_before
    assert c.session.summary == ""
    qtbot.waitUntil(lambda: bar(win, "summary") == 0, timeout=5_000)
    assert bar(win, "history_tool") > 0
    assert not any(win.chat.item(i).out_of_context for i in ids_before)
    assert win.chat.item(win.chat.marker_ids()[0]).event.result == "undone"
    assert not win.undo_action.isEnabled()

    # --- 5. Stop cancels a running turn; the history stays valid, on disk too
    server.queue(fs.stream(fs.text("Let me check "), fs.text("the schema "), fs.text("module"), fs.text("..."),
                           hang_after=3))
    send(qtbot, win, "Now check the schema module.")
    qtbot.waitUntil(lambda: "the schema" in streamed_text(), timeout=15_000)
    assert win.stop_action.isEnabled()
    win.stop_action.trigger()
    wait_turn(qtbot, win)
    assert c.state == "idle"
    last = c.session.messages[-1]
    assert last["role"] == "assistant" and last.get("interrupted") is True
    assert last["content"].startswith("Let me check the schema")
    assert unanswered_calls(c.session.messages) == []
    assert win.input.is_busy() is False and not win.stop_action.isEnabled()
    reloaded = Session.load(c.session.path)
    assert reloaded.load_report.clean
    assert [m["id"] for m in reloaded.messages] == [m["id"] for m in c.session.messages]
    assert reloaded.messages[-1].get("interrupted") is True
    # the next turn works after the stop
    server.queue(fs.text_reply("The schema module expects a 'ts' column."))
    send(qtbot, win, "Go on.")
    wait_turn(qtbot, win)
    assert c.session.messages[-1]["content"] == "The schema module expects a 'ts' column."


def test_tool_approval_is_asked_without_a_nested_loop(
    qtbot: Any, fake_settings: Settings, workspace: Path, server: fs.FakeLLMServer
) -> None:
    controller = Controller(fake_settings.replace(allow_write=True), workspace=workspace)
    window = MainWindow(controller)
    qtbot.addWidget(window)
    window.show()
    with qtbot.waitSignal(controller.session_loaded, timeout=10_000):
        controller.new_session()
    server.queue(
        fs.tool_call_reply("write_file", {"path": "notes.txt", "content": "hello"}, call_id="w1"),
        fs.text_reply("Written."),
        fs.tool_call_reply("write_file", {"path": "denied.txt", "content": "no"}, call_id="w2"),
        fs.text_reply("Not written, as you wished."),
    )
    send(qtbot, window, "Write hello to notes.txt")
    qtbot.waitUntil(lambda: window.approval.isVisible(), timeout=15_000)
    assert "write_file" in window.approval.current_text()
    assert controller.busy  # the turn waits for the answer; the UI keeps running
    window.approval.allow()
    wait_turn(qtbot, window)
    assert (workspace / "notes.txt").read_text() == "hello"
    send(qtbot, window, "Now write denied.txt")
    qtbot.waitUntil(lambda: window.approval.isVisible(), timeout=15_000)
    window.approval.deny()
    wait_turn(qtbot, window)
    assert not (workspace / "denied.txt").exists()
    tool_texts = [m["content"] for m in controller.session.messages if m["role"] == "tool"]
    assert "did not approve" in tool_texts[-1]
    window.close()
    run(qtbot, controller.shutdown())


def _assistant_texts(window: MainWindow) -> list[str]:
    return [str(it.msg.get("content") or "") for it in window.chat.chat_model().items()
            if it.kind == "message" and it.msg and it.msg.get("role") == "assistant"]


def test_an_empty_stream_shows_the_error_not_an_empty_bubble(qtbot: Any, win: MainWindow,
                                                             server: fs.FakeLLMServer) -> None:
    """A stream that closes with no chunk, and the same request unstreamed that answers nothing:
    the chat shows the error, no empty answer bubble, and nothing empty is stored."""
    server.queue(fs.empty_stream(), fs.empty_stream())
    send(qtbot, win, "hello")
    wait_turn(qtbot, win, timeout=60_000)
    qtbot.waitUntil(lambda: "without an answer" in win.notice_text(), timeout=5_000)
    assert win.notice_bar.level == "error"
    assert _assistant_texts(win) == []
    session = win.controller.session
    assert session is not None and [x["role"] for x in session.messages] == ["user"]
    # the next turn, where the unstreamed retry answers, shows that answer once
    server.queue(fs.empty_stream(), fs.text_reply("From the unstreamed retry."))
    send(qtbot, win, "again")
    wait_turn(qtbot, win)
    qtbot.waitUntil(lambda: _assistant_texts(win) == ["From the unstreamed retry."], timeout=5_000)
    assert [x["role"] for x in session.messages] == ["user", "user", "assistant"]
