"""A session whose `ctxbench run` was SIGKILLed mid-run opens in the GUI with nothing lost (issue 7 §1).

The kill-at-any-moment harness (tests/test_kill_harness.py) checks the files after 32 kill points;
this test takes kills at an early, a middle and a late durable step of the same scenario (appends,
offload, compaction) and opens each killed session in the real main window.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

from app.controller import Controller, SessionView
from app.main_window import MainWindow
from engine.context.conversation import SessionStore
from engine.model.messages import assistant, user
from engine.store.config import Settings
from tests.app.conftest import run
from tests.test_kill_harness import HOOK, Rig, normal_script, run_cli, server_for


@pytest.mark.slow
@pytest.mark.parametrize("kill_at", [3, 12, 22])
def test_a_session_killed_mid_run_opens_in_the_gui(
    qtbot: Any, tmp_path: Path, fake_settings: Settings, workspace: Path, kill_at: int
) -> None:
    store = SessionStore()
    base = store.create("killed mid-run")
    for i in range(4):  # enough history for the background compaction after the turn
        base.extend([user(f"earlier question {i}: " + "q" * 1_000), assistant(f"earlier answer {i}: " + "a" * 1_000)])
    before = [dict(m) for m in base.messages]
    base.close()
    hook_dir = tmp_path / "hook"
    hook_dir.mkdir()
    (hook_dir / "sitecustomize.py").write_text(HOOK)
    responses, default = normal_script()
    server = server_for(responses, default)
    rig = Rig(tmp_path, hook_dir, base.path, before, workspace)  # the kill harness's own scenario
    try:
        cmd = rig.command(base.path, server, "list the numbers")
        out = run_cli(cmd, rig.env(tmp_path, CTXBENCH_KILL_AT=str(kill_at)))
    finally:
        server.stop()
    assert out.returncode == -signal.SIGKILL, f"not killed at fsync {kill_at}: {out.stderr[-1000:]}"

    controller = Controller(fake_settings, workspace=workspace)
    window = MainWindow(controller)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    try:
        with qtbot.waitSignal(controller.session_loaded, timeout=10_000) as blocker:
            controller.open_session(base.id)
        view: SessionView = blocker.args[0]
        shown = [str(m.get("id")) for m in view.messages]  # live history + archived, by time
        by_id = {str(m.get("id")): m for m in view.messages}
        for msg in before + out.acked():
            msg_id = str(msg["id"])
            assert shown.count(msg_id) == 1, f"message {msg_id} shown {shown.count(msg_id)} times"
            assert by_id[msg_id].get("content") == msg.get("content"), f"message {msg_id} changed"
        assert window.chat.row_count() >= len(before + out.acked())
    finally:
        window.close()
        run(qtbot, controller.shutdown())
