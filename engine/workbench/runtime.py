"""The LLM runtime of the service: litellm loaded in the background (once), the model's info once it is, the
estimator a session counts with, the model's window, the workspace, and the agent built on them.

:class:`LlmRuntime` is given what it uses (the settings as they are now, the task group, the events out, the
service's state setter); :class:`engine.workbench.document.OpenDocument` asks it for the open session's agent.

litellm's import takes 2–3 s of the interpreter: the warm-up starts it only once no session or source has been
opening for :data:`QUIET_BEFORE_IMPORT` seconds (a large file opened just after start-up reached its first screen in
0.57 s with the import running beside it, 0.26 s without), at most :data:`DEFER_LIMIT` seconds after it was asked,
and at once when something needs the model (:meth:`LlmRuntime.await_llm`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.context.tokens import Estimator
from engine.context.window import ModelInfo, resolve_window
from engine.model.events import AgentState
from engine.model.snapshot import WindowInfo
from engine.model.text import one_line
from engine.store.config import LOCAL_MODEL, Settings, data_dir
from engine.workbench.events import LlmReady, ModelSuggestions, NoticeLevel
from engine.workbench.tasks import TaskGroup

QUIET_BEFORE_IMPORT = 1.5  # seconds without an open before litellm's import starts
DEFER_LIMIT = 15.0  # seconds the import waits for opens at most

if TYPE_CHECKING:
    from engine.agent import Agent
    from engine.context.conversation import Session
    from engine.model.events import Event
    from engine.tools.registry import ApproveFn

log = logging.getLogger(__name__)


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


def estimator_key(estimator: Any) -> tuple[type, str]:
    """What makes two estimators count alike: their kind and the model whose tokenizer they use."""
    return type(estimator), str(getattr(estimator, "model", ""))


class LlmRuntime:
    """See the module docstring. ``ready_hooks`` are called, in order, once litellm is loaded."""

    def __init__(
        self,
        settings: Callable[[], Settings],
        tasks: TaskGroup,
        emit: Callable[[Any], None],
        notice: Callable[[NoticeLevel, str], None],
        set_state: Callable[[AgentState], None],
        *,
        workspace: Path | None = None,
    ) -> None:
        self._settings = settings
        self._tasks = tasks
        self._emit = emit
        self._notice = notice
        self._set_state = set_state
        self._workspace_override = workspace
        self.llm_ready = False
        self.agent_stale = False  # the settings changed during a turn: the agent is built again after it
        self.ready_hooks: list[Callable[[], None]] = []
        self._wanted = asyncio.Event()  # something needs the model now: the warm-up waits no longer

    # ------------------------------------------------------------------ litellm warm-up

    def warm_up(self) -> asyncio.Task[Any]:
        """Load litellm in a worker thread (once): the running warm-up task, or a new one."""
        return self._tasks.get("warmup") or self._tasks.spawn("warmup", self._warm_up())

    async def prepare_counting(self) -> None:
        """Load the bundled model's tokenizer in a worker thread before counting with it here: its
        import may have to wait at the import gate while litellm loads in the background."""
        from engine.llm.local_model import LocalModelError, is_local, load_tokenizer

        settings = self._settings()
        if settings.estimator in ("auto", "exact") and is_local(settings.model):
            try:
                await asyncio.to_thread(load_tokenizer)
            except (LocalModelError, OSError, ValueError):
                pass  # make_estimator counts without it

    async def _warm_up(self) -> None:
        from engine.llm import client as llm

        await self.prepare_counting()  # llama_cpp first (quick): a session opening needs it, not litellm
        await self._quiet()
        try:
            await asyncio.to_thread(llm._lib)
            names = await asyncio.to_thread(llm.model_suggestions)
        except Exception as exc:  # litellm is broken: the offline model still works
            log.exception("litellm could not be loaded")
            self._notice("warning", f"litellm could not be loaded ({one_line(str(exc))}); "
                                    f"only the offline model {LOCAL_MODEL} works")
            return
        self.llm_ready = True
        self._emit(ModelSuggestions(names))
        self._emit(LlmReady())
        for hook in list(self.ready_hooks):
            hook()

    async def _quiet(self) -> None:
        """Wait until no session or source has been opening for :data:`QUIET_BEFORE_IMPORT` s (see the module
        docstring), :data:`DEFER_LIMIT` s at most, or until something needs the model."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DEFER_LIMIT
        quiet_since = loop.time()
        wanted = asyncio.ensure_future(self._wanted.wait())
        try:
            while not self._wanted.is_set() and (left := deadline - loop.time()) > 0:
                opening = self._tasks.get("open")
                if opening is not None and not opening.done() and opening is not asyncio.current_task():
                    await asyncio.wait([opening, wanted], timeout=left, return_when=asyncio.FIRST_COMPLETED)
                    quiet_since = loop.time()
                    continue
                rest = QUIET_BEFORE_IMPORT - (loop.time() - quiet_since)
                if rest <= 0:
                    return
                await asyncio.wait([wanted], timeout=min(rest, left, 0.1))
        finally:
            wanted.cancel()

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
        warm = self._tasks.get("warmup")
        if warm is not None and warm is not asyncio.current_task():
            self._wanted.set()  # a warm-up waiting for opens to settle starts the import now
            self._set_state(AgentState.LOADING)
            await asyncio.wait([warm])

    def needs_llm_for_window(self) -> bool:
        from engine.llm.local_model import is_local

        settings = self._settings()
        return settings.context_window is None and not is_local(settings.model)

    # ------------------------------------------------------------------ counting and the agent

    def estimator(self, imported: bool = False) -> Estimator:
        """The estimator a session counts its messages with; ``imported`` (another agent's session, a view or an
        import): the heuristic, whatever the setting — our model's tokenizer is not the agent's, and the heuristic
        is what the import, the Tools tab, ``ctxbench tools`` and ``diff`` count it with, so that one message
        (a tool result) has one size in the chat, the Archive and the Tools tab."""
        from engine.context.tokens import HeuristicEstimator, make_estimator

        if imported:
            return HeuristicEstimator()
        settings = self._settings()
        if settings.estimator == "exact" and not self.llm_ready:
            from engine.llm.local_model import is_local

            if not is_local(settings.model):
                return HeuristicEstimator()  # exact counting needs litellm: switched once it is loaded
        try:
            return make_estimator(settings.estimator, settings.model)
        except Exception as exc:  # a tokenizer's loading (litellm's, llama.cpp's): counted with the heuristic instead
            log.warning("the %s estimator is not available", settings.estimator, exc_info=exc)
            self._notice("warning", f"the {settings.estimator} estimator is not available ({exc}); "
                                    "counting with the heuristic")
            return HeuristicEstimator()

    def workspace(self) -> Path:
        if self._workspace_override is not None:
            return self._workspace_override
        settings = self._settings()
        if settings.workspace:
            return Path(settings.workspace).expanduser()
        folder = data_dir() / "workspace"  # no workspace chosen: an empty folder, the tools see nothing
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def window_info(self) -> WindowInfo:
        from engine.context.window import agent_window
        from engine.llm import client as llm

        s = self._settings()
        if s.context_window is not None:
            return resolve_window(None, s.context_window, s.max_tokens)
        if self.needs_llm_for_window() and not self.llm_ready:
            return resolve_window(None, None, s.max_tokens)  # provisional until litellm is loaded
        return agent_window(s, llm.config_from_settings(s))

    def agent_for(self, session: Session, approve: ApproveFn | None, emit: Callable[[Event], None]) -> Agent:
        """The agent for ``session`` with the settings now (its estimator switched to theirs once litellm is
        loaded); the agent is no longer stale."""
        if self.llm_ready:
            wanted = self.estimator(imported=bool(session.meta.get("import")))
            if estimator_key(wanted) != estimator_key(session.estimator):
                session.set_estimator(wanted)
        workspace = self.workspace()
        if not workspace.is_dir():
            self._notice("warning", f"the workspace folder does not exist: {workspace}")
            workspace = data_dir() / "workspace"
            workspace.mkdir(parents=True, exist_ok=True)
        agent = build_agent(session, self._settings(), workspace=workspace, approve=approve, emit=emit,
                            window=self.window_info())
        self.agent_stale = False
        return agent


__all__ = ["LlmRuntime", "build_agent", "estimator_key"]
