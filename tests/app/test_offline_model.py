"""The app's main job offline: the bundled SmolLM2 model answers in the real window (no provider)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.controller import Controller
from app.main_window import MainWindow
from engine.llm import local_model
from engine.store.config import LOCAL_MODEL, Settings
from tests.app.conftest import run


@pytest.mark.slow
def test_a_turn_on_the_bundled_offline_model(qtbot: Any, workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The answer is checked word for word: at temperature 0 the model says the same thing every time."""
    monkeypatch.setattr(local_model, "DEFAULT_TEMPERATURE", 0.0)
    settings = Settings(local_n_ctx=2048, max_tokens=64, local_threads=2)
    assert settings.model == LOCAL_MODEL and not settings.api_base  # nothing configured: offline default
    controller = Controller(settings, workspace=workspace)
    window = MainWindow(controller)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    window.ensure_chart()
    try:
        with qtbot.waitSignal(controller.session_loaded, timeout=10_000):
            controller.new_session()
        with qtbot.waitSignal(controller.turn_finished, timeout=240_000) as done:
            window.input.set_text("What is the capital of France? Answer in one sentence.")
            assert window.input.submit()
        finished = done.args[0]
        assert finished.ok, finished
        roles = [m["role"] for m in controller.session.messages]
        assert roles == ["user", "assistant"]
        answer = str(controller.session.messages[-1].get("content") or "")
        assert answer.strip() == "The capital of France is Paris.", answer
        usage = controller.session.messages[-1].get("usage") or {}
        assert usage.get("prompt_tokens", 0) > 0  # reported by llama.cpp through the litellm provider
        qtbot.waitUntil(lambda: window.chart is not None and window.chart.column_count() == 1, timeout=5_000)
        assert "2,048" in window.status.texts()["tokens"] or "2048" in window.status.texts()["tokens"]
    finally:
        window.close()
        run(qtbot, controller.shutdown())
