"""The Workbench service's shared state: settings, store, open session (or read-only view), agent,
tasks, approvals, the snapshot throttle, listeners, and the read-only policy.

The service's parts (sessions, turns, compaction, inspector, sources, analysis, keys, commands) each
hold this one :class:`WorkbenchCore`, passed to them explicitly, with the state they own themselves;
:class:`engine.workbench.service.Workbench` makes the core and the parts and wires them.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.context.conversation import Session, SessionStore
from engine.context.tokens import Estimator
from engine.context.window import ModelInfo, resolve_window
from engine.model.events import AgentState, StateChanged
from engine.model.messages import Message
from engine.model.snapshot import ContextSnapshot, WindowInfo
from engine.model.text import one_line
from engine.store.config import LOCAL_MODEL, Settings, data_dir, load_settings
from engine.workbench.approvals import Approvals
from engine.workbench.events import (
    ContextStateChanged,
    LlmReady,
    ModelSuggestions,
    Notice,
    NoticeLevel,
    SnapshotChanged,
    WorkbenchEvent,
)
from engine.workbench.policy import ReadOnlyPolicy
from engine.workbench.tasks import TaskGroup
from engine.workbench.throttle import SNAPSHOT_INTERVAL_S, Throttle
from engine.workbench.views import ContextState

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from engine.agent import Agent
    from engine.model.events import Event
    from engine.tools.registry import ApproveFn
    from engine.workbench.source_views import SourceView

Listener = Callable[[Any], None]  # gets WorkbenchEvent and engine.model.events.Event instances


def build_agent(
    session: Session,
    settings: Settings,
    *,
    workspace: Path,
    approve: ApproveFn | None,
    emit: Callable[[Event], None],
    window: WindowInfo | None = None,
) -> Agent:
    """The agent the app and ``ctxbench run`` both use: the settings' model and tools on ``workspace``."""
    from engine.agent import Agent
    from engine.llm import client as llm
    from engine.tools.registry import ToolBox

    toolbox = ToolBox(
        workspace, session.path, allow_write=settings.allow_write, allow_shell=settings.allow_shell, approve=approve
    )
    return Agent(
        session, settings, llm_config=llm.config_from_settings(settings), toolbox=toolbox, emit=emit, window=window
    )


def _estimator_key(estimator: Any) -> tuple[type, str]:
    """What makes two estimators count alike: their kind and the model whose tokenizer they use."""
    return type(estimator), str(getattr(estimator, "model", ""))


@dataclass
class TurnBuffer:
    """Bookkeeping of the running turn (the partial answer for the live chart)."""

    stream_id: str = ""
    partial: list[str] = field(default_factory=list)


class WorkbenchCore:
    """State and helpers every part of the service uses (see the module docstring).

    Hooks the service sets: :attr:`on_engine_event` (the turns part turns the agent's events into the
    service's) and :attr:`llm_ready_hooks` (called once litellm is loaded).
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        store: SessionStore | None = None,
        workspace: Path | None = None,
        listener: Listener | None = None,
        snapshot_interval: float = SNAPSHOT_INTERVAL_S,
    ) -> None:
        if settings is None:
            loaded = load_settings()
            settings = loaded.settings
            self.startup_problems = list(loaded.problems)
        else:
            self.startup_problems = []
        self.settings: Settings = settings
        self.store = store or SessionStore()
        self._workspace_override = workspace
        self.session: Session | None = None
        self.agent: Agent | None = None  # engine.agent is imported lazily: keeps start-up fast
        self._listeners: list[Listener] = [listener] if listener is not None else []
        self.tasks = TaskGroup(self._on_task_error)
        self.approvals = Approvals(self.emit)
        self.throttle = Throttle(self._emit_snapshot, snapshot_interval)
        self.turn = TurnBuffer()
        self.draft = ""
        self.live_ids: list[str] = []
        self.view: SourceView | None = None  # the read-only view open now (engine.workbench.sources)
        self.read_only = ReadOnlyPolicy(lambda: self.view is not None, lambda text: self.notice("warning", text))
        self._state: AgentState = AgentState.IDLE
        self.llm_ready = False
        self.agent_stale = False
        # the session (weakly: a closed one may go) and the estimator the import calibration was made for
        self._import_calibration: tuple[weakref.ref[Session], tuple[type, str]] | None = None
        self.on_engine_event: Callable[[Event], None] = lambda event: None
        self.llm_ready_hooks: list[Callable[[], None]] = []

    # ------------------------------------------------------------------ events out

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def emit(self, event: WorkbenchEvent | Event) -> None:
        for listener in list(self._listeners):
            listener(event)

    def notice(self, level: NoticeLevel, text: str) -> None:
        self.emit(Notice(level, text))

    def refuse_if_read_only(self, intent: str, command: str | None = None) -> bool:
        """The read-only policy's answer for ``intent`` (True: refused, and a notice says why)."""
        return self.read_only.refuses(intent, command)

    def _on_task_error(self, name: str, exc: BaseException) -> None:
        self.notice("error", f"{name} failed: {type(exc).__name__}: {one_line(str(exc))}")

    # ------------------------------------------------------------------ state

    def task(self, name: str) -> asyncio.Task[Any] | None:
        """The running task of that name (``turn``, ``preview``, ``apply``, ``open``, ``warmup`` …)."""
        return self.tasks.get(name)

    @property
    def busy(self) -> bool:
        return self.task("turn") is not None

    @property
    def state(self) -> AgentState:
        return self._state

    def set_state(self, state: AgentState) -> None:
        self._state = state
        self.emit(StateChanged(state))

    # ------------------------------------------------------------------ litellm warm-up

    def warm_up(self) -> asyncio.Task[Any]:
        """Load litellm in a worker thread (once): the running warm-up task, or a new one."""
        return self.task("warmup") or self.tasks.spawn("warmup", self._warm_up())

    async def prepare_counting(self) -> None:
        """Load the bundled model's tokenizer in a worker thread before counting with it here: its
        import may have to wait at the import gate while litellm loads in the background."""
        from engine.llm.local_model import LocalModelError, is_local, load_tokenizer

        if self.settings.estimator in ("auto", "exact") and is_local(self.settings.model):
            try:
                await asyncio.to_thread(load_tokenizer)
            except (LocalModelError, OSError, ValueError):
                pass  # make_estimator counts without it

    async def _warm_up(self) -> None:
        from engine.llm import client as llm

        await self.prepare_counting()  # llama_cpp first (quick): a session opening needs it, not litellm
        try:
            await asyncio.to_thread(llm._lib)
            names = await asyncio.to_thread(llm.model_suggestions)
        except Exception as exc:  # litellm is broken: the offline model still works
            log.exception("litellm could not be loaded")
            self.notice("warning", f"litellm could not be loaded ({one_line(str(exc))}); "
                                   f"only the offline model {LOCAL_MODEL} works")
            return
        self.llm_ready = True
        self.emit(ModelSuggestions(names))
        self.emit(LlmReady())
        if self.session is not None and not self.busy:
            if self.needs_llm_for_window():
                self.make_agent()
            self.emit_state()  # windows looked up while litellm was loading were provisional
        for hook in list(self.llm_ready_hooks):
            hook()

    def model_info(self) -> ModelInfo | None:
        """litellm's model lookup once litellm is loaded (None before: an import then settles on the
        window it observed, and the view is read again when litellm is ready)."""
        if not self.llm_ready:
            return None
        from engine.llm import client as llm

        return llm.model_info

    async def await_llm(self) -> None:
        """Wait while litellm is being imported in the background: importing it from two threads at
        once breaks its (circular) imports, and every model call imports it."""
        warm = self.task("warmup")
        if warm is not None and warm is not asyncio.current_task():
            self.set_state(AgentState.LOADING)
            await asyncio.wait([warm])

    def needs_llm_for_window(self) -> bool:
        from engine.llm.local_model import is_local

        return self.settings.context_window is None and not is_local(self.settings.model)

    # ------------------------------------------------------------------ the agent

    def estimator(self, imported: bool = False) -> Estimator:
        """The estimator a session counts its messages with; ``imported`` (another agent's session, a view or an
        import): the heuristic, whatever the setting — our model's tokenizer is not the agent's, and the heuristic
        is what the import, the Tools tab, ``ctxbench tools`` and ``diff`` count it with, so that one message
        (a tool result) has one size in the chat, the Archive and the Tools tab."""
        from engine.context.tokens import HeuristicEstimator, make_estimator

        if imported:
            return HeuristicEstimator()
        if self.settings.estimator == "exact" and not self.llm_ready:
            from engine.llm.local_model import is_local

            if not is_local(self.settings.model):
                return HeuristicEstimator()  # exact counting needs litellm: switched once it is loaded
        try:
            return make_estimator(self.settings.estimator, self.settings.model)
        except Exception as exc:
            log.warning("the %s estimator is not available", self.settings.estimator, exc_info=exc)
            self.notice("warning", f"the {self.settings.estimator} estimator is not available ({exc}); "
                                   "counting with the heuristic")
            return HeuristicEstimator()

    def workspace(self) -> Path:
        if self._workspace_override is not None:
            return self._workspace_override
        if self.settings.workspace:
            return Path(self.settings.workspace).expanduser()
        folder = data_dir() / "workspace"  # no workspace chosen: an empty folder, the tools see nothing
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def _window_info(self) -> WindowInfo:
        from engine.context.window import agent_window
        from engine.llm import client as llm

        s = self.settings
        if s.context_window is not None:
            return resolve_window(None, s.context_window, s.max_tokens)
        if self.needs_llm_for_window() and not self.llm_ready:
            return resolve_window(None, None, s.max_tokens)  # provisional until litellm is loaded
        return agent_window(s, llm.config_from_settings(s))

    def make_agent(self) -> None:
        session = self.session
        if session is None:
            return
        if self.llm_ready:
            wanted = self.estimator(imported=bool(session.meta.get("import")))
            if _estimator_key(wanted) != _estimator_key(session.estimator):
                session.set_estimator(wanted)
        workspace = self.workspace()
        if not workspace.is_dir():
            self.notice("warning", f"the workspace folder does not exist: {workspace}")
            workspace = data_dir() / "workspace"
            workspace.mkdir(parents=True, exist_ok=True)
        self.agent = build_agent(
            session,
            self.settings,
            workspace=workspace,
            approve=self.approvals.ask,
            emit=lambda event: self.on_engine_event(event),
            window=self._window_info(),
        )
        self.agent_stale = False

    # ------------------------------------------------------------------ what the window shows

    def next_snapshot(self) -> ContextSnapshot | None:
        """The next request's regions: the history, the partial answer while streaming, the draft."""
        agent, session = self.agent, self.session
        if agent is None or session is None or session.closed:
            return None
        messages: list[Message] | None = None
        if self.turn.partial and self.turn.stream_id and self.turn.stream_id not in session:
            partial = {"id": self.turn.stream_id, "role": "assistant", "content": "".join(self.turn.partial)}
            messages = [*session.messages, partial]
        from engine.agent import imported_prefix_tokens
        from engine.context.window import imported_window

        own = imported_window(session, self.settings)  # an imported session: drawn against its model
        prefix = imported_prefix_tokens(session) if own else None  # … with its own system prompt + tools
        tools = agent.tools
        if own and prefix is None and session.meta.get("tools_source") == "none":
            tools = []  # another agent's file without its tool definitions (none inferred): not ctxbench's own
        self._calibrate_import(session, agent, own, prefix, tools)
        return session.snapshot(
            self.settings,
            session.estimator,
            agent.system_prompt,
            tools,
            self.draft,
            window=own[0] if own else agent.window,
            messages=messages,
            model=(own[1] or None) if own else None,
            prefix_tokens=prefix,
        )

    def _calibrate_import(
        self, session: Session, agent: Agent, own: tuple[WindowInfo, str] | None,
        prefix: int | tuple[int, int] | None, tools: list[dict[str, Any]],
    ) -> None:
        """An imported session's next request is calibrated on its last call's provider figure (once
        per session and estimator; a call made here since then calibrates it as usual)."""
        estimator = _estimator_key(session.estimator)
        made = self._import_calibration
        ours = made is not None and made[0]() is session  # the object, not id(): ids of freed sessions recur
        if (ours and made is not None and made[1] == estimator) or (session.calibrator.calibrated and not ours):
            return
        from engine.agent import calibrate_imported

        self._import_calibration = (weakref.ref(session), estimator)
        calibrate_imported(session, self.settings, agent.system_prompt, tools,
                           own[0] if own else agent.window, prefix)

    def state_now(self) -> ContextState:
        session = self.session
        assert session is not None
        snap = self.next_snapshot()
        assert snap is not None
        stack = session.undo_stack()
        counts = session.token_counts()
        return ContextState(
            live_ids=[str(m.get("id")) for m in session.messages],
            tokens={str(m.get("id")): c for m, c in zip(session.messages, counts, strict=True)},
            snapshot=snap,
            summary=session.summary,
            summary_tokens=snap.summary,
            archive_days=session.archive_days(),
            undo_id=stack[-1] if stack else None,
        )

    def emit_state(self) -> ContextState | None:
        """The context state now (and its snapshot, the final one after a change)."""
        if self.session is None or self.session.closed or self.agent is None:
            return None
        state = self.state_now()
        self.live_ids = list(state.live_ids)
        self.emit(ContextStateChanged(state))
        self.emit(SnapshotChanged(state.snapshot))
        return state

    async def shutdown(self) -> None:
        """Cancel everything and close the session (the window is closing)."""
        self.throttle.cancel()
        await self.tasks.close()
        self.approvals.withdraw()
        if self.session is not None:
            self.session.close()
        view, self.view = self.view, None
        if view is not None:
            from engine.workbench.source_views import remove_view

            remove_view(view.root)

    def _emit_snapshot(self) -> None:
        snap = self.next_snapshot()
        if snap is not None:
            self.emit(SnapshotChanged(snap))


__all__ = ["Listener", "TurnBuffer", "WorkbenchCore", "build_agent", "one_line"]
