"""app.controller: the engine driven from Qt, on real session folders (no window)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.controller import (
    ContextState,
    Controller,
    SessionView,
    merge_archived,
)
from engine.context.conversation import Session, SessionStore
from engine.model import messages as m
from engine.store import archive
from engine.store.config import Settings, config_dir, data_dir, load_settings
from tests import fakeserver as fs
from tests.app.conftest import run
from tests.memkeyring import MemoryKeyring


class Recorder:
    """Collects what a controller signal carried."""

    def __init__(self, signal: Any) -> None:
        self.calls: list[tuple[Any, ...]] = []
        signal.connect(lambda *args: self.calls.append(args))

    @property
    def last(self) -> Any:
        return self.calls[-1][0] if len(self.calls[-1]) == 1 else self.calls[-1]


def make_session(store: SessionStore, n_turns: int = 3, title: str = "existing") -> Session:
    session = store.create(title)
    for i in range(n_turns):
        call = m.tool_call(f"c{i}", "read_file", json.dumps({"path": f"f{i}.txt"}))
        session.extend([
            m.user(f"question {i}"),
            m.assistant(None, [call]),
            m.tool_result(f"c{i}", f"contents of f{i}.txt", name="read_file"),
            m.assistant(f"answer {i}"),
        ])
    session.close()
    return session


@pytest.fixture
def controller(qtbot: Any, fake_settings: Settings, workspace: Path) -> Iterator[Controller]:
    c = Controller(fake_settings, workspace=workspace)
    yield c
    run(qtbot, c.shutdown())


def open_session(qtbot: Any, c: Controller, session_id: str) -> SessionView:
    with qtbot.waitSignal(c.session_loaded, timeout=10_000) as blocker:
        c.open_session(session_id)
    view: SessionView = blocker.args[0]
    return view


# --------------------------------------------------------------------------- pure helpers


def test_merge_archived_puts_archived_messages_back_in_time_order() -> None:
    live = [{"id": "c", "role": "user", "ts": "2025-01-01T10:03:00"}, {"id": "d", "role": "assistant",
                                                                     "ts": "2025-01-01T10:04:00"}]
    archived = [
        {"id": "b", "role": "assistant", "ts": "2025-01-01T10:02:00"},
        {"id": "a", "role": "user", "ts": "2025-01-01T10:01:00"},
        {"id": "c", "role": "user", "ts": "2025-01-01T10:03:00"},  # restored: live again, not twice
        {"id": "s", "role": "system", "content": "old summary", "ts": "2025-01-01T10:05:00"},
        {"id": "e", "role": "user", "ts": "2025-01-01T10:09:00"},
    ]
    assert [x["id"] for x in merge_archived(live, archived)] == ["a", "b", "c", "d", "e"]
    assert merge_archived(live, []) == live


# --------------------------------------------------------------------------- sessions


def test_a_torn_session_opens_and_the_report_is_shown(qtbot: Any, controller: Controller) -> None:
    store = controller.store
    session = make_session(store, 2)
    with open(session.history_path, "ab") as fh:
        fh.write(b'{"role": "assistant", "content": "half a li')  # killed mid-write
    notices = Recorder(controller.notice)
    view = open_session(qtbot, controller, session.id)
    assert "torn" in view.problems
    assert len(view.state.live_ids) == 8  # every complete line kept
    level, text = notices.calls[-1]
    assert level == "warning" and "torn line" in text and "history.jsonl.torn-" in text


def test_a_damaged_context_record_is_skipped_not_fatal(qtbot: Any, controller: Controller) -> None:
    session = make_session(controller.store, 2)
    with open(session.events_path, "ab") as fh:
        fh.write(b'{"type": "context", "window": "wide", "max_tokens": 10}\n')
        fh.write(b'{"type": "context", "window": 1000, "max_tokens": 100, "system": 10, "summary": 0, '
                 b'"history_user": 5, "history_assistant": 5, "history_tool": 0, "tools": 0, '
                 b'"threshold_tokens": 800, "estimator": "heuristic", "accuracy": "estimated"}\n')
    view = open_session(qtbot, controller, session.id)
    assert len(view.timeline) == 1
    assert "context record was skipped" in view.problems


def test_a_session_held_by_another_process_is_not_opened(qtbot: Any, controller: Controller) -> None:
    import subprocess
    import sys

    session = make_session(controller.store, 1)
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; from engine.context.conversation import Session\n"
         "s = Session.load(sys.argv[1]); s.lock(); print('held', flush=True); time.sleep(60)", str(session.path)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        notices = Recorder(controller.notice)
        controller.open_session(session.id)
        qtbot.waitUntil(lambda: bool(notices.calls), timeout=10_000)
        level, text = notices.calls[-1]
        assert level == "error" and "open in another ctxbench process" in text
        assert controller.session is None or controller.session.id != session.id
    finally:
        holder.kill()
        holder.wait(timeout=30)
    # once the other process is gone, the session opens (and is held by this window)
    view = open_session(qtbot, controller, session.id)
    assert view.id == session.id and controller.session is not None


def test_clear_is_archived_and_undoable(qtbot: Any, controller: Controller) -> None:
    session = make_session(controller.store, 2)
    view = open_session(qtbot, controller, session.id)
    ids = list(view.state.live_ids)
    states = Recorder(controller.context_state)
    markers = Recorder(controller.compaction_finished)
    controller.run_command("clear", "")
    qtbot.waitUntil(lambda: bool(states.calls), timeout=5_000)
    state: ContextState = states.last
    assert state.live_ids == [] and state.undo_id is not None
    assert markers.last.undoable and markers.last.after_id == ids[-1]
    archived = [x["id"] for day in archive.list_days(session.path) for x in archive.read_day(session.path, day)]
    assert archived == ids  # nothing left the context without being archived
    controller.undo_compaction()
    qtbot.waitUntil(lambda: states.last.live_ids == ids, timeout=5_000)
    assert markers.last.event.result == "undone" and not markers.last.undoable
    reloaded = Session.load(session.path)
    assert [x["id"] for x in reloaded.messages] == ids


def test_restore_from_the_archive_brings_the_call_with_its_result(qtbot: Any, controller: Controller) -> None:
    session = make_session(controller.store, 2)
    open_session(qtbot, controller, session.id)
    states = Recorder(controller.context_state)
    controller.clear_session()
    qtbot.waitUntil(lambda: bool(states.calls), timeout=5_000)
    archived = archive.read_day(session.path, archive.list_days(session.path)[0])
    tool_id = next(x["id"] for x in archived if x["role"] == "tool")
    hits = Recorder(controller.archive_hits)
    controller.search_archive("contents of f0")
    assert hits.last[0] == "contents of f0" and [h.message_id for h in hits.last[1]] == [tool_id]
    controller.restore_messages([tool_id])
    qtbot.waitUntil(lambda: len(states.calls) == 2, timeout=5_000)
    roles = [controller.session.get(i)["role"] for i in states.last.live_ids]
    assert roles == ["assistant", "tool"]  # the result came back with the call that made it


def test_offloaded_files_are_read_only_inside_the_session(
    qtbot: Any, controller: Controller, tmp_path: Path
) -> None:
    session = make_session(controller.store, 1)
    name = "0123456789abcdef0123456789abcdef.txt"
    (session.path / "tool_results").mkdir()
    (session.path / "tool_results" / name).write_text("full output\nline 2\n")
    (tmp_path / "secret.txt").write_text("not yours")
    open_session(qtbot, controller, session.id)
    loaded = Recorder(controller.file_loaded)
    notices = Recorder(controller.notice)
    controller.read_offloaded(f"tool_results/{name}")
    assert loaded.last == (f"tool_results/{name}", "full output\nline 2\n")
    for bad in ("session.json", "tool_results/../session.json", str(tmp_path / "secret.txt"),
                "tool_results/../../../secret.txt", "../secret.txt"):
        controller.read_offloaded(bad)
        assert notices.last[0] == "error" and "not an offloaded tool result" in notices.last[1]
    assert len(loaded.calls) == 1


def test_a_bad_transcript_is_refused_with_its_name(qtbot: Any, controller: Controller, tmp_path: Path) -> None:
    bad = tmp_path / "broken.jsonl"
    bad.write_text('{"role": "user", "content": "hi"}\n{"role": "assistant", "content": \n')
    before = [s.id for s in controller.store.list()]
    notices = Recorder(controller.notice)
    controller.import_transcript(str(bad))
    qtbot.waitUntil(lambda: bool(notices.calls), timeout=10_000)
    assert notices.last[0] == "error" and "broken.jsonl" in notices.last[1]
    assert [s.id for s in controller.store.list()] == before  # nothing half-imported


def test_deleting_the_open_session_opens_another(qtbot: Any, controller: Controller) -> None:
    older = make_session(controller.store, 1, "older")
    newer = make_session(controller.store, 1, "newer")
    open_session(qtbot, controller, newer.id)
    with qtbot.waitSignal(controller.session_loaded, timeout=10_000) as blocker:
        controller.delete_session(newer.id)
    assert blocker.args[0].id == older.id
    assert not newer.path.exists()


# --------------------------------------------------------------------------- drafts, approvals, settings


def test_draft_cost_follows_the_calibration(qtbot: Any, controller: Controller) -> None:
    session = make_session(controller.store, 1)
    open_session(qtbot, controller, session.id)
    text = "x" * 1000
    assert controller.count_draft(text) == controller.session.estimator.text(text)
    controller.session.calibrator.record(1000, 500, [], (0, 0, 0))  # the provider counts half
    tokens = Recorder(controller.draft_tokens)
    assert controller.count_draft(text) == round(controller.session.estimator.text(text) * 0.5)
    assert tokens.last == controller.count_draft(text)
    qtbot.waitUntil(lambda: controller.next_snapshot().draft > 0, timeout=2_000)


def test_approvals_are_futures_and_stop_withdraws_them(
    qtbot: Any, fake_settings: Settings, workspace: Path, server: fs.FakeLLMServer
) -> None:
    c = Controller(fake_settings.replace(allow_shell=True), workspace=workspace)
    with qtbot.waitSignal(c.session_loaded, timeout=10_000):
        c.new_session()
    asked = Recorder(c.approval_requested)
    withdrawn = Recorder(c.approvals_withdrawn)
    server.queue(fs.tool_call_reply("run_shell", {"command": "echo hi > out.txt"}, call_id="s1"),
                 fs.text_reply("Stopped, then."))
    assert c.send("run it")
    qtbot.waitUntil(lambda: bool(asked.calls), timeout=60_000)  # the first litellm import of the process
    rid, tool, arguments = asked.calls[-1]
    assert tool == "run_shell" and json.loads(arguments) == {"command": "echo hi > out.txt"}
    assert c.pending_approvals() == [rid]
    c.stop()
    qtbot.waitUntil(lambda: not c.busy, timeout=10_000)
    assert withdrawn.calls and c.pending_approvals() == []
    assert not (workspace / "out.txt").exists()
    last = c.session.messages[-1]
    assert last["role"] == "tool" and last.get("interrupted")
    c.answer_approval(rid, True)  # a late answer changes nothing
    run(qtbot, c.shutdown())


def test_settings_are_saved_and_the_key_goes_to_the_keyring_only(
    qtbot: Any, controller: Controller, memory_keyring: MemoryKeyring
) -> None:
    make_session(controller.store, 1)
    changed = Recorder(controller.settings_changed)
    new = controller.settings.replace(model="openai/gpt-4o-mini", max_tokens=2048, compact_threshold_ratio=0.7)
    assert controller.apply_settings(new)
    assert changed.last is new
    assert load_settings().settings == new
    secret = "sk-test-0123456789abcdefghijkl"
    assert controller.store_api_key(secret)
    assert memory_keyring.store[("ctxbench", "openai")] == secret
    for folder in (config_dir(), data_dir()):
        for f in folder.rglob("*"):
            if f.is_file():
                assert secret.encode() not in f.read_bytes(), f"the key leaked into {f}"
    assert "keyring" in controller.api_key_status() or "environment" in controller.api_key_status()
    assert controller.forget_api_key()
    assert ("ctxbench", "openai") not in memory_keyring.store


def test_invalid_settings_are_not_saved(qtbot: Any, controller: Controller) -> None:
    notices = Recorder(controller.notice)
    bad = Settings()
    bad.max_tokens = 0  # bypasses replace(); save_settings validates
    assert not controller.apply_settings(bad)
    assert notices.last[0] == "error" and "max_tokens" in notices.last[1]
    assert not (config_dir() / "settings.toml").exists()


def test_a_turn_waits_for_the_background_litellm_import(
    qtbot: Any, controller: Controller, server: fs.FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """litellm is imported in a thread after start-up; a turn sent meanwhile must not import it from
    the loop's thread at the same time (two threads importing it break its circular imports)."""
    import threading
    import time

    from engine.llm import client as llm

    real = llm._lib
    finished: list[float] = []
    threads: list[str] = []

    overlapping: list[str] = []

    def slow_import() -> Any:
        threads.append(threading.current_thread().name)
        if threading.current_thread() is not threading.main_thread() and not finished:
            time.sleep(0.4)
            finished.append(time.time())
        elif not finished:
            overlapping.append(threading.current_thread().name)  # imported while the thread imports
        return real()

    monkeypatch.setattr(llm, "_lib", slow_import)
    with qtbot.waitSignal(controller.session_loaded, timeout=10_000):
        controller.new_session()
    controller.service.warm_up()
    server.queue(fs.text_reply("ok"))
    assert controller.send("hello")
    qtbot.waitUntil(lambda: controller.task("turn") is None, timeout=15_000)
    assert controller.session.messages[-1]["content"] == "ok"
    assert finished and overlapping == []
    assert threads[0] != threading.main_thread().name  # the import itself ran off the UI thread


def test_every_service_event_the_window_needs_has_its_signal() -> None:
    from PySide6.QtCore import SignalInstance

    from app.controller import SIGNALS
    from engine.workbench import events as ev

    c = Controller(Settings())
    for name in SIGNALS.values():
        assert isinstance(getattr(c, name), SignalInstance), name
    own = {v for v in vars(ev).values() if isinstance(v, type) and issubclass(v, ev.WorkbenchEvent)}
    assert own - set(SIGNALS) == {ev.WorkbenchEvent, ev.LlmReady}  # LlmReady: no widget listens
    assert len(set(SIGNALS.values())) == len(SIGNALS)  # one signal per event type
