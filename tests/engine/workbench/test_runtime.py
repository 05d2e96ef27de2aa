"""engine.workbench.runtime: the LLM runtime split out of the service's core (warm-up, estimator choice)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.context.tokens import HeuristicEstimator
from engine.model.events import AgentState
from engine.store.config import Settings
from engine.workbench.events import LlmReady, ModelSuggestions, Notice
from engine.workbench.runtime import LlmRuntime
from engine.workbench.tasks import TaskGroup


def _runtime(settings: Settings, tmp_path: Path) -> tuple[LlmRuntime, list[Any], list[AgentState]]:
    events: list[Any] = []
    states: list[AgentState] = []
    runtime = LlmRuntime(lambda: settings, TaskGroup(), events.append,
                         lambda level, text: events.append(Notice(level, text)), states.append, workspace=tmp_path)
    return runtime, events, states


def test_the_estimator_an_imported_session_or_exact_before_litellm_counts_with(tmp_path: Path) -> None:
    runtime, _, _ = _runtime(Settings(model="openai/gpt-4o-mini", estimator="exact"), tmp_path)
    assert isinstance(runtime.estimator(imported=True), HeuristicEstimator)
    assert isinstance(runtime.estimator(), HeuristicEstimator)  # exact counting waits for litellm
    assert runtime.workspace() == tmp_path and runtime.model_info() is None
    assert runtime.needs_llm_for_window()
    assert not _runtime(Settings(model="openai/gpt-4o-mini", context_window=8000), tmp_path)[0].needs_llm_for_window()


@pytest.mark.asyncio
async def test_the_warm_up_runs_once_then_the_ready_hooks_in_order(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.llm import client as llm

    monkeypatch.setattr(llm, "_lib", lambda: None)
    monkeypatch.setattr(llm, "model_suggestions", lambda: ["m"])
    runtime, events, states = _runtime(Settings(model="openai/gpt-4o-mini"), tmp_path)
    called: list[str] = []
    runtime.ready_hooks += [lambda: called.append("first"), lambda: called.append("second")]
    task = runtime.warm_up()
    assert runtime.warm_up() is task  # once
    await runtime.await_llm()  # waits for it, saying so
    assert states == [AgentState.LOADING]
    await task
    assert runtime.llm_ready and called == ["first", "second"]
    assert [type(e) for e in events] == [ModelSuggestions, LlmReady] and runtime.model_info() is llm.model_info


@pytest.mark.asyncio
async def test_litellms_import_waits_for_opens_to_settle_unless_the_model_is_needed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The warm-up starts litellm's import only once no open has run for QUIET_BEFORE_IMPORT s (an open just after
    start-up then has the interpreter to itself), and at once when a turn needs the model (await_llm)."""
    import asyncio
    import time

    from engine.llm import client as llm
    from engine.workbench import runtime as rt

    monkeypatch.setattr(rt, "QUIET_BEFORE_IMPORT", 0.3)
    started: list[float] = []
    monkeypatch.setattr(llm, "_lib", lambda: started.append(time.monotonic()))
    monkeypatch.setattr(llm, "model_suggestions", lambda: [])
    runtime, events, _ = _runtime(Settings(model="openai/gpt-4o-mini", estimator="heuristic"), tmp_path)
    tasks = runtime._tasks
    opened = asyncio.Event()
    tasks.spawn("open", opened.wait())
    t0 = time.monotonic()
    warm = runtime.warm_up()
    await asyncio.sleep(0.5)
    assert started == []  # an open is running: the import waits
    opened.set()
    done = time.monotonic()
    await asyncio.wait_for(warm, 5)
    assert len(started) == 1 and started[0] - done >= 0.25  # then the quiet time
    assert any(isinstance(e, LlmReady) for e in events)

    runtime2, _, _ = _runtime(Settings(model="openai/gpt-4o-mini", estimator="heuristic"), tmp_path)
    started.clear()
    hold = asyncio.Event()
    runtime2._tasks.spawn("open", hold.wait())
    runtime2.warm_up()
    await asyncio.sleep(0.2)
    t0 = time.monotonic()
    await asyncio.wait_for(runtime2.await_llm(), 5)  # a turn needs the model: the import starts now
    assert len(started) == 1 and started[0] - t0 < 0.25
    hold.set()
