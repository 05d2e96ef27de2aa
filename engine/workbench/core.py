"""The Workbench service's shared state: the settings, the session store, the listeners (events out), the
named tasks, the tool approvals and the agent's state.

Everything else has an owner of its own, given to the parts that use it: what is open
(:class:`engine.workbench.document.OpenDocument`), the LLM runtime (:class:`engine.workbench.runtime.LlmRuntime`)
and what the window is shown (:class:`engine.workbench.display.Display`).
:class:`engine.workbench.service.Workbench` makes them and the parts and wires them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from engine.context.conversation import SessionStore
from engine.model.events import AgentState, StateChanged
from engine.model.text import one_line
from engine.store.config import Settings, load_settings
from engine.workbench.approvals import Approvals
from engine.workbench.events import Notice, NoticeLevel, WorkbenchEvent
from engine.workbench.tasks import TaskGroup

if TYPE_CHECKING:
    from engine.model.events import Event

Listener = Callable[[Any], None]  # gets WorkbenchEvent and engine.model.events.Event instances


class WorkbenchCore:
    """State every part of the service shares (see the module docstring)."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        store: SessionStore | None = None,
        listener: Listener | None = None,
    ) -> None:
        if settings is None:
            loaded = load_settings()
            settings = loaded.settings
            self.startup_problems = list(loaded.problems)
        else:
            self.startup_problems = []
        self.settings: Settings = settings
        self.store = store or SessionStore()
        self._listeners: list[Listener] = [listener] if listener is not None else []
        self.tasks = TaskGroup(self._on_task_error)
        self.approvals = Approvals(self.emit)
        self._state: AgentState = AgentState.IDLE

    # ------------------------------------------------------------------ events out

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def emit(self, event: WorkbenchEvent | Event) -> None:
        for listener in list(self._listeners):
            listener(event)

    def notice(self, level: NoticeLevel, text: str) -> None:
        self.emit(Notice(level, text))

    def warn(self, text: str) -> None:
        self.notice("warning", text)

    def _on_task_error(self, name: str, exc: BaseException) -> None:
        self.notice("error", f"{name} failed: {type(exc).__name__}: {one_line(str(exc))}")

    # ------------------------------------------------------------------ state

    def task(self, name: str) -> asyncio.Task[Any] | None:
        """The running task of that name (``turn``, ``preview``, ``apply``, ``open``, ``warmup`` …)."""
        return self.tasks.get(name)

    def current_settings(self) -> Settings:
        return self.settings

    @property
    def state(self) -> AgentState:
        return self._state

    def set_state(self, state: AgentState) -> None:
        self._state = state
        self.emit(StateChanged(state))


__all__ = ["Listener", "WorkbenchCore", "one_line"]
