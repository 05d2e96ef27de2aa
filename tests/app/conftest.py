"""GUI fixtures for tests/app: one qasync loop for the whole process, Qt warnings fail tests.

The Qt-warning guard is the one of ``tests/widgets/conftest.py`` (imported, not copied). The event
loop: a single ``qasync.QEventLoop`` made "already running" for the whole test session, so that
``asyncio.ensure_future`` (what the controller does) runs whenever Qt processes events — tests
wait with ``qtbot.waitUntil`` / ``qtbot.waitSignal``, or :func:`run` for a coroutine.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("QT_API", "pyside6")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import qasync

from engine.store.config import Settings
from tests import fakeserver as fs
from tests.widgets.conftest import QtMessageRecorder, main_thread_gc, qt_messages  # the Qt-warning guard, the GC

__all__ = ["QtMessageRecorder", "main_thread_gc", "qt_messages", "run"]


@pytest.fixture(scope="session")
def qloop(qapp: Any) -> Iterator[asyncio.AbstractEventLoop]:
    """The one qasync loop of the process, marked running so tasks step on Qt's event processing."""
    loop = qasync.QEventLoop(qapp, already_running=True)
    # Plain Python worker threads for asyncio.to_thread: qasync's default QThread executor, never
    # shut down in an "already running" loop, aborts the process at exit ("QThread: Destroyed
    # while thread is still running").
    executor = concurrent.futures.ThreadPoolExecutor(thread_name_prefix="test-loop")
    loop.set_default_executor(executor)
    asyncio.set_event_loop(loop)
    yield loop
    executor.shutdown(wait=True, cancel_futures=True)
    asyncio.events._set_running_loop(None)  # let exit handlers (litellm's client cleanup) run a loop


@pytest.fixture(autouse=True)
def _qloop(qloop: asyncio.AbstractEventLoop) -> asyncio.AbstractEventLoop:
    return qloop


@pytest.fixture(autouse=True)
def _fast_retries_and_a_key(fast_retries: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-fakeserver-key")


def run(qtbot: Any, coro: Coroutine[Any, Any, Any], timeout: float = 20.0) -> Any:
    """Run a coroutine on the shared loop while Qt processes events; return its result."""
    task = asyncio.ensure_future(coro)
    qtbot.waitUntil(task.done, timeout=int(timeout * 1000))
    return task.result()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "workspace"
    ws.mkdir()
    return ws


@pytest.fixture
def fake_settings(server: fs.FakeLLMServer) -> Settings:
    """Settings for the scripted model: real litellm path (openai/fake) to the local fake server."""
    return Settings().replace(
        model="openai/fake",
        api_base=server.base_url,
        context_window=8_000,
        max_tokens=256,
        max_retries=1,
        offload_recent_bytes=4_000,
        offload_old_bytes=2_000,
        auto_compact=False,
    )
