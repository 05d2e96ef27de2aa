"""An imported session is drawn against the window of the model that made it (issue 13, item 2): the
next-request bar, the status bar and the chart's header name that model and use the window its
timeline was drawn with, whatever model the settings choose for running turns. Once a turn
runs on it here, the bar is the running model's again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.main_window import MainWindow
from engine.store.config import Settings
from tests import fakeserver as fs
from tests.app.test_main_window import close, make_window
from tests.conftest import TRAJECTORIES

DEEPSEEK = TRAJECTORIES / "sqlfluff__sqlfluff-1517.traj.json"  # deepseek-reasoner, prompts up to 62k tokens


def open_transcript(qtbot: Any, win: MainWindow, path: Path) -> None:
    with qtbot.waitSignal(win.controller.session_loaded, timeout=30_000):
        win.controller.import_transcript(str(path))


@pytest.fixture
def win(qtbot: Any, fake_settings: Settings, workspace: Path) -> Any:
    # openai/fake, a model litellm does not know, and no window override: turns run with max_tokens × 4
    window = make_window(qtbot, fake_settings.replace(context_window=None), workspace)
    yield window
    close(qtbot, window)


RUNNING = 256 * 4  # the settings' window for running turns (max_tokens × 4)


def test_an_imported_trajectory_is_drawn_against_its_own_models_window(qtbot: Any, win: MainWindow) -> None:
    chart = win.ensure_chart()
    open_transcript(qtbot, win, DEEPSEEK)
    chart.flush()
    c = win.controller
    view_windows = {call.snapshot.window for call in win._chart_data.timeline}
    assert len(view_windows) == 1
    timeline_window = view_windows.pop()
    largest = max(m["extra"]["response"]["usage"]["prompt_tokens"]
                  for m in json.loads(DEEPSEEK.read_text())["messages"] if m.get("role") == "assistant")
    assert timeline_window > largest > RUNNING  # every prompt fitted the model's window, not the settings'
    snap = c.next_snapshot()
    assert snap is not None and snap.window == timeline_window  # the bar: the timeline's window
    assert snap.model == c.session.meta["model"] and "deepseek" in snap.model
    assert snap.used <= snap.window and "over the window" not in chart.header_text()
    assert chart.legend_text("limit").replace(",", "").find(str(timeline_window)) >= 0
    # says whose window it is: here none looked up (the test's litellm has no figure), the one its prompts showed
    assert snap.window_source == "observed" and "window of" not in chart.header_text()
    assert f"window observed from the prompts ({snap.model})" in chart.header_text()
    assert win.status.texts()["model"] == f"model: {snap.model}"
    assert str(timeline_window) in win.status.texts()["tokens"].replace(",", "")
    assert c.agent is not None and c.agent.window.context_window == RUNNING  # turns still run with the settings'


def test_a_turn_run_on_an_imported_session_draws_the_running_models_window(
    qtbot: Any, fake_settings: Settings, workspace: Path, server: fs.FakeLLMServer
) -> None:
    running = 12_000 * 4  # room for the imported history (23k tokens) and the answer
    win = make_window(qtbot, fake_settings.replace(context_window=None, max_tokens=12_000), workspace)
    try:
        open_transcript(qtbot, win, TRAJECTORIES / "astropy__astropy-12907.traj.json")
        c = win.controller
        own = c.next_snapshot()
        assert own is not None and own.window == win._chart_data.timeline[-1].snapshot.window != running
        assert "deepseek" in own.model
        server.queue(fs.text_reply("continued here"))
        assert c.send("go on")
        qtbot.waitUntil(lambda: c.task("turn") is None, timeout=20_000)
        assert c.session.messages[-1]["content"] == "continued here"
        snap = c.next_snapshot()
        assert snap is not None and (snap.window, snap.model) == (running, "openai/fake")
        qtbot.waitUntil(lambda: win.status.texts()["model"] == "model: openai/fake", timeout=5_000)
    finally:
        close(qtbot, win)


def test_the_window_override_of_the_running_model_does_not_apply_to_an_import(
    qtbot: Any, fake_settings: Settings, workspace: Path
) -> None:
    win = make_window(qtbot, fake_settings, workspace)  # context_window = 8,000 for openai/fake
    try:
        open_transcript(qtbot, win, DEEPSEEK)
        timeline = {call.snapshot.window for call in win._chart_data.timeline}
        snap = win.controller.next_snapshot()
        assert snap is not None and timeline == {snap.window} and snap.window > 62_326 > 8_000
        assert win.controller.agent is not None and win.controller.agent.window.context_window == 8_000
    finally:
        close(qtbot, win)


def test_a_session_of_ours_keeps_the_settings_window(qtbot: Any, win: MainWindow) -> None:
    with qtbot.waitSignal(win.controller.session_loaded, timeout=10_000):
        win.controller.new_session()
    snap = win.controller.next_snapshot()
    assert snap is not None and (snap.window, snap.model) == (RUNNING, "openai/fake")
    assert win.status.texts()["model"] == "model: openai/fake"


CLAUDE = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "sessions" / "claude-code" / (
    "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl")


def test_the_bar_of_an_imported_claude_code_session_holds_its_inferred_prefix(qtbot: Any, win: MainWindow) -> None:
    """Claude Code's system prompt and tools are not in its file: the bar shows them as the one
    region inferred at import (its first call's prompt − the messages), not ctxbench's own."""
    win.ensure_chart()
    open_transcript(qtbot, win, CLAUDE)
    c = win.controller
    inferred = c.session.meta["import"]["inferred_prefix"]
    assert inferred["source"] == "inferred" and inferred["tokens"] > 10_000
    snap = c.next_snapshot()
    assert snap is not None and snap.tools == 0
    assert snap.system == inferred["tokens"]
    first = next(json.loads(line) for line in CLAUDE.read_text().splitlines()
                 if '"usage"' in line and json.loads(line).get("type") == "assistant")
    usage = first["message"]["usage"]
    prompt = usage["input_tokens"] + usage["cache_creation_input_tokens"] + usage["cache_read_input_tokens"]
    assert inferred["tokens"] < prompt  # a part of the first call's prompt, as the provider counted it


ATIF = Path(__file__).resolve().parents[1] / "engine" / "sources" / "data" / "atif" / "terminus-2-summarization"


def test_an_atif_trajectory_opens_like_any_transcript(qtbot: Any, win: MainWindow) -> None:
    """Open transcript… on an ATIF trajectory.json (Harbor's Terminus-2): the timeline holds one call per agent
    step with the step's prompt tokens, drawn against gpt-4o's window, not the settings'."""
    win.ensure_chart()
    open_transcript(qtbot, win, ATIF / "trajectory.json")
    c = win.controller
    steps = [s for s in json.loads((ATIF / "trajectory.json").read_text())["steps"] if s["source"] == "agent"]
    timeline = win._chart_data.timeline
    assert [r.snapshot.provider_prompt_tokens for r in timeline] == [s["metrics"]["prompt_tokens"] for s in steps]
    assert c.session.meta["import"]["format"] == "atif" and c.session.meta["model"] == "openai/gpt-4o"
    assert len(c.session.meta["import"]["subagents"]) == 3
    snap = c.next_snapshot()
    assert snap is not None and snap.model == "openai/gpt-4o" and snap.window > RUNNING
