"""The bridge between the engine and the window: runs the engine on the qasync loop, speaks Qt signals.

:class:`Controller` owns the session store, the open session and its :class:`engine.agent.Agent`
(whose :class:`engine.context.compaction.Compactor` does the manual compaction too). Every engine event is
re-emitted as a Qt signal carrying the engine's dataclass (or plain data built from engine
functions); widgets never call litellm or touch files.

Every coroutine the controller starts is kept (:meth:`Controller.task`), so Stop cancels the running
turn and closing the window cancels everything. Tool calls that need approval are asked through
:attr:`Controller.approval_requested` and answered with :meth:`Controller.answer_approval`, which
resolves a Future the tool is awaiting: no nested event loop, no ``exec()``.

Public API
----------
Signals (payloads are engine dataclasses unless said otherwise):
    sessions_listed(list)          session dicts for the sessions panel
    session_loaded(object)         :class:`SessionView` — everything a window shows of a session
    context_state(object)          :class:`ContextState` — after any change of the history
    snapshot_changed(object)       ContextSnapshot of the next request (throttled while streaming)
    message_added(object)          MessageAdded
    text_delta(object)             TextDelta
    tool_started(object)           ToolCallStarted
    tool_finished(object)          ToolCallFinished
    call_recorded(dict)            an LLM call that happened (a timeline column): its ContextSnapshot
                                   dict, as the engine predicted it before the call, with the report
    last_call(object, object)      estimate made before the last call, provider-reported prompt tokens
    compaction_started(object)     CompactionStarted
    compaction_finished(object)    :class:`Marker` — the CompactionEvent and where it goes in the chat
    compaction_failed(object)      CompactionFailed
    error(object)                  ErrorEvent
    state_changed(str)             idle | streaming | tool | compacting
    turn_finished(object)          TurnFinished
    busy_changed(bool)             a turn is running
    notice(str, str)               level (info | warning | error), text for the user
    approval_requested(str, str, str)  request id, tool name, arguments (JSON)
    approvals_withdrawn()          the turn that asked was stopped
    preview_started(str)           a compaction preview is being made (the instruction)
    preview_ready(object)          engine.context.compaction.CompactionPreview: the plan and the digest, at once
                                   (``summary.model_pending``: the model's part is still being written)
    preview_summary(object)        the same preview with the model's part in (when the mode has one)
    preview_after(object)          ContextSnapshot after applying the edited summary
    preview_failed(str)            why the preview / apply did not work (the dialog stays open)
    preview_closed()               the preview was applied or discarded
    offloaded_file(dict)           one tool_results file (inspector dict)
    file_loaded(str, str)          path, text of an offloaded file
    archive_messages(str, list, dict)  day, archived messages, tokens by id
    archive_hits(str, list)        query, hits {"day", "message", "snippet"}
    draft_tokens(int)              the draft's cost (calibrated like the chart)
    settings_changed(object)       Settings now in force
    model_suggestions(list)        model names for the settings dialog
    llm_ready()                    litellm is imported (it loads in the background after start)
Methods: start(), list_sessions(), new_session(), open_session(id), rename_session(id, title),
    delete_session(id), import_transcript(path), send(text), stop(), run_command(name, arg),
    start_preview(instruction), regenerate_preview(instruction), cancel_preview(),
    discard_preview(), apply_preview(summary), edit_preview(summary), undo_compaction(marker_id=None),
    read_offloaded(path), load_archive_day(day), search_archive(query), restore_messages(ids),
    count_draft(text), apply_settings(settings), store_api_key(key), forget_api_key(),
    api_key_status(), window_description(), answer_approval(id, allowed), shutdown() (async).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from collections.abc import Coroutine
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal

from engine.context.budget import PROMPT_REGIONS, ContextSnapshot, WindowInfo, resolve_window
from engine.context.conversation import Session, SessionStore
from engine.model.events import (
    CompactionEvent,
    CompactionFailed,
    CompactionStarted,
    ContextUpdated,
    ErrorEvent,
    Event,
    MessageAdded,
    StateChanged,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
)
from engine.model.messages import Message, new_id, now_iso, preview
from engine.model.snapshot import context_report
from engine.model.text import one_line as _one_line
from engine.store import archive
from engine.store.archive import merge_archived
from engine.store.config import LOCAL_MODEL, Settings, data_dir, load_settings, save_settings
from engine.store.session import SessionError

OFFLOAD_PATH = re.compile(r"^tool_results/[0-9a-f]{32}\.txt$")
MAX_VIEW_BYTES = 8 * 1024 * 1024  # the viewer shows at most this much of one offloaded file
SNAPSHOT_INTERVAL_MS = 80  # the next-request snapshot is recomputed at most this often while streaming


@dataclass
class Marker:
    """A compaction event as the chat shows it: where it goes and whether it can be undone."""

    event: dict[str, Any]
    after_id: str | None  # the last message it took out of the context (None: at the end)
    undoable: bool


@dataclass
class ContextState:
    """What changes when the history changes (compaction, undo, restore, clear)."""

    live_ids: list[str]
    tokens: dict[str, int]
    snapshot: ContextSnapshot
    summary: str
    summary_tokens: int
    archive_days: list[str]
    undo_id: str | None


@dataclass
class SessionView:
    """Everything the window shows of one session, read through engine functions."""

    id: str
    title: str
    path: Path
    model: str
    messages: list[Message]  # the live history with the archived messages merged in by time
    state: ContextState
    markers: list[Marker]
    timeline: list[dict[str, Any]]  # one ContextSnapshot dict per LLM call (events.jsonl), as predicted
    compactions: list[dict[str, Any]]  # CompactionEvent dicts
    files: list[dict[str, Any]]  # offloaded tool results (inspector dicts)
    problems: str = ""  # the load report when the folder needed repairs, else ""
    last_call: tuple[int | None, int | None] = (None, None)


@dataclass
class _Turn:
    """Bookkeeping of the running turn (the partial answer for the live chart)."""

    stream_id: str = ""
    partial: list[str] = field(default_factory=list)


def session_dict(info: Any) -> dict[str, Any]:
    """A sessions-panel dict from a SessionInfo or an open Session."""
    if isinstance(info, Session):
        return {
            "id": info.id,
            "title": info.title,
            "updated": str(info.meta.get("updated") or ""),
            "messages": len(info.messages),
        }
    return {"id": info.id, "title": info.title, "updated": info.updated, "messages": info.message_count}


def file_dict(f: Any, session: Session | None) -> dict[str, Any]:
    """An inspector dict from an engine.context.offload.OffloadedFile."""
    out = {
        "path": f.path,
        "size": f.size,
        "lines": f.lines,
        "created": f.created,
        "tool": f.tool_name,
        "message_id": f.message_id,
    }
    if session is not None and f.message_id and f.message_id in session:
        out["message_preview"] = preview(session.get(f.message_id), 80)
    return out


def _prompt_of(record: dict[str, Any]) -> int:
    return sum(int(record.get(k) or 0) for k in PROMPT_REGIONS)


def _estimator_key(estimator: Any) -> tuple[type, str]:
    """What makes two estimators count alike: their kind and the model whose tokenizer they use."""
    return type(estimator), str(getattr(estimator, "model", ""))


class Controller(QObject):
    """Runs the engine for one window (see the module docstring)."""

    sessions_listed = Signal(list)
    session_loaded = Signal(object)
    context_state = Signal(object)
    snapshot_changed = Signal(object)
    message_added = Signal(object)
    text_delta = Signal(object)
    tool_started = Signal(object)
    tool_finished = Signal(object)
    call_recorded = Signal(dict)
    last_call = Signal(object, object)
    compaction_started = Signal(object)
    compaction_finished = Signal(object)
    compaction_failed = Signal(object)
    error = Signal(object)
    state_changed = Signal(str)
    turn_finished = Signal(object)
    busy_changed = Signal(bool)
    notice = Signal(str, str)
    approval_requested = Signal(str, str, str)
    approvals_withdrawn = Signal()
    preview_started = Signal(str)
    preview_ready = Signal(object)
    preview_summary = Signal(object)
    preview_after = Signal(object)
    preview_failed = Signal(str)
    preview_closed = Signal()
    offloaded_file = Signal(dict)
    file_loaded = Signal(str, str)
    archive_messages = Signal(str, list, dict)
    archive_hits = Signal(str, list)
    draft_tokens = Signal(int)
    settings_changed = Signal(object)
    model_suggestions = Signal(list)
    llm_ready = Signal()

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        store: SessionStore | None = None,
        workspace: Path | None = None,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        if settings is None:
            loaded = load_settings()
            settings = loaded.settings
            self._startup_problems = list(loaded.problems)
        else:
            self._startup_problems = []
        self.settings: Settings = settings
        self.store = store or SessionStore()
        self._workspace_override = workspace
        self.session: Session | None = None
        self.agent: Any = None  # engine.agent.Agent (imported lazily: keeps start-up fast)
        self._tasks: dict[str, asyncio.Task[Any]] = {}
        self._approvals: dict[str, asyncio.Future[bool]] = {}
        self._turn = _Turn()
        self._draft = ""
        self._live_ids: list[str] = []
        self._preview: Any = None  # engine.context.compaction.CompactionPreview
        self._state = "idle"
        self._llm_ready = False
        self._agent_stale = False
        self._closing = False
        self._snap_timer = QTimer(self)
        self._snap_timer.setSingleShot(True)
        self._snap_timer.setInterval(SNAPSHOT_INTERVAL_MS)
        self._snap_timer.timeout.connect(self._on_snap_timer_timeout)

    # ------------------------------------------------------------------ tasks

    def task(self, name: str) -> asyncio.Task[Any] | None:
        """The running task of that name (``turn``, ``preview``, ``apply``, ``open``, ``warmup`` …)."""
        t = self._tasks.get(name)
        return t if t is not None and not t.done() else None

    def _spawn(self, name: str, coro: Coroutine[Any, Any, Any], *, replace: bool = False) -> asyncio.Task[Any]:
        old = self.task(name)
        if replace and old is not None:
            old.cancel()
        task = asyncio.ensure_future(coro)
        self._tasks[name] = task

        def done(t: asyncio.Task[Any]) -> None:
            if self._tasks.get(name) is t:
                del self._tasks[name]
            if t.cancelled():
                return
            exc = t.exception()
            if exc is not None and not self._closing:
                self.notice.emit("error", f"{name} failed: {type(exc).__name__}: {_one_line(str(exc))}")

        task.add_done_callback(done)
        return task

    @property
    def busy(self) -> bool:
        return self.task("turn") is not None

    @property
    def state(self) -> str:
        return self._state

    # ------------------------------------------------------------------ start-up and litellm

    def start(self) -> None:
        """List the sessions, open the most recent one (or a new one), load litellm in the background."""
        for problem in self._startup_problems:
            self.notice.emit("warning", f"settings: {problem}")
        self._startup_problems = []
        infos = self.list_sessions()
        if infos:
            self.open_session(infos[0]["id"])
        else:
            self.new_session()
        from engine.llm import client as llm

        llm.never_wait_on_this_thread()  # the window's model-info lookups never import litellm here
        self._spawn("warmup", self._warm_up())

    async def _warm_up(self) -> None:
        from engine.llm import client as llm

        await self._prepare_counting()  # llama_cpp first (quick): a session opening needs it, not litellm
        try:
            await asyncio.to_thread(llm._lib)
            names = await asyncio.to_thread(llm.model_suggestions)
        except Exception as exc:  # litellm is broken: the offline model still works
            self.notice.emit("warning", f"litellm could not be loaded ({_one_line(str(exc))}); "
                                        f"only the offline model {LOCAL_MODEL} works")
            return
        self._llm_ready = True
        self.model_suggestions.emit(names)
        self.llm_ready.emit()
        if self.session is not None and not self.busy:
            if self._needs_llm_for_window():
                self._make_agent()
            self._emit_state()  # windows looked up while litellm was loading were provisional

    async def _await_llm(self) -> None:
        """Wait while litellm is being imported in the background: importing it from two threads at
        once breaks its (circular) imports, and every model call imports it."""
        warm = self.task("warmup")
        if warm is not None and warm is not asyncio.current_task():
            self._set_state("loading")
            await asyncio.wait([warm])

    def _needs_llm_for_window(self) -> bool:
        from engine.llm.local_model import is_local

        return self.settings.context_window is None and not is_local(self.settings.model)

    # ------------------------------------------------------------------ sessions

    def list_sessions(self) -> list[dict[str, Any]]:
        infos = [session_dict(i) for i in self.store.list()]
        self.sessions_listed.emit(infos)
        return infos

    def new_session(self) -> None:
        self._spawn("open", self._new_session(), replace=True)

    async def _prepare_counting(self) -> None:
        """Load the bundled model's tokenizer in a worker thread before counting with it here: its
        import may have to wait at the import gate while litellm loads in the background."""
        from engine.llm.local_model import LocalModelError, is_local, load_tokenizer

        if self.settings.estimator in ("auto", "exact") and is_local(self.settings.model):
            try:
                await asyncio.to_thread(load_tokenizer)
            except (LocalModelError, OSError, ValueError):
                pass  # make_estimator counts without it

    async def _new_session(self) -> None:
        await self._leave_session()
        await self._prepare_counting()
        session = self.store.create("New session", estimator=self._estimator())
        session.lock()
        self._load(session)
        self.list_sessions()

    def open_session(self, session_id: str) -> None:
        if self.session is not None and self.session.id == session_id and not self.session.closed:
            return
        self._spawn("open", self._open_session(session_id), replace=True)

    async def _open_session(self, session_id: str) -> None:
        await self._leave_session()
        await self._prepare_counting()
        try:
            session = self.store.open(
                session_id, estimator=self._estimator(), retention_days=self.settings.offload_retention_days
            )
        except (SessionError, OSError) as exc:
            self.notice.emit("error", f"cannot open session {session_id}: {_one_line(str(exc))}")
            self.list_sessions()
            return
        try:
            session.lock()  # one writer per folder: another app or `ctxbench run` may hold it
        except (SessionError, OSError) as exc:
            session.close()
            self.notice.emit("error", f"cannot open session {session_id}: {_one_line(str(exc))}")
            self.list_sessions()
            return
        self._load(session)

    def rename_session(self, session_id: str, title: str) -> None:
        try:
            self.store.rename(session_id, title)
        except (SessionError, OSError) as exc:
            self.notice.emit("error", f"cannot rename: {_one_line(str(exc))}")
        self.list_sessions()

    def delete_session(self, session_id: str) -> None:
        self._spawn("delete", self._delete_session(session_id))

    async def _delete_session(self, session_id: str) -> None:
        current = self.session is not None and self.session.id == session_id
        if current:
            await self._leave_session()
        try:
            self.store.delete(session_id)
        except (SessionError, OSError) as exc:
            self.notice.emit("error", f"cannot delete session {session_id}: {_one_line(str(exc))}")
        infos = self.list_sessions()
        if current:
            if infos:
                await self._open_session(infos[0]["id"])
            else:
                await self._new_session()

    def import_transcript(self, path: str) -> None:
        self._spawn("import", self._import(Path(path)))

    async def _import(self, path: Path) -> None:
        from engine.importer import TranscriptError, import_transcript

        model_info = None
        if self._llm_ready:
            from engine.llm import client as llm

            model_info = llm.model_info
        self.state_changed.emit("importing")
        try:
            # the window override is the running model's: the imported run is drawn against its own model
            settings = self.settings.replace(context_window=None)
            report = await asyncio.to_thread(
                import_transcript, path, store=self.store, settings=settings, model_info=model_info
            )
        except (TranscriptError, OSError, SessionError) as exc:
            self.notice.emit("error", f"cannot open the transcript {path.name}: {_one_line(str(exc))}")
            self.state_changed.emit(self._state)
            return
        self.state_changed.emit(self._state)
        self.list_sessions()
        await self._open_session(report.session_id)
        self.notice.emit("info", report.describe())

    async def _leave_session(self) -> None:
        """Stop what runs on the open session and close it."""
        for name in ("turn", "preview", "apply", "undo"):
            t = self.task(name)
            if t is not None and t is not asyncio.current_task():
                t.cancel()
                await asyncio.wait([t])
        self._withdraw_approvals()
        if self._preview is not None:
            self.preview_closed.emit()
        self._preview = None
        if self.session is not None:
            self.session.close()
        self.session = None
        self.agent = None

    def _load(self, session: Session) -> None:
        self.session = session
        self._preview = None
        self._turn = _Turn()
        self._make_agent()
        view = self._session_view()
        self.session_loaded.emit(view)
        if view.problems:
            self.notice.emit(
                "warning", f"The session “{session.title}” was repaired when it was opened:\n{view.problems}"
            )

    def _estimator(self) -> Any:
        from engine.context.tokens import HeuristicEstimator, make_estimator

        if self.settings.estimator == "exact" and not self._llm_ready:
            from engine.llm.local_model import is_local

            if not is_local(self.settings.model):
                return HeuristicEstimator()  # exact counting needs litellm: switched once it is loaded
        try:
            return make_estimator(self.settings.estimator, self.settings.model)
        except Exception as exc:
            self.notice.emit("warning", f"the {self.settings.estimator} estimator is not available ({exc}); "
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
        from engine.agent import agent_window
        from engine.llm import client as llm

        s = self.settings
        if s.context_window is not None:
            return resolve_window(None, s.context_window, s.max_tokens)
        if self._needs_llm_for_window() and not self._llm_ready:
            return resolve_window(None, None, s.max_tokens)  # provisional until litellm is loaded
        return agent_window(s, llm.config_from_settings(s))

    def _make_agent(self) -> None:
        from engine.agent import Agent
        from engine.llm import client as llm
        from engine.tools.registry import ToolBox

        session = self.session
        if session is None:
            return
        if self._llm_ready:
            wanted = self._estimator()
            if _estimator_key(wanted) != _estimator_key(session.estimator):
                session.set_estimator(wanted)
        s = self.settings
        config = llm.config_from_settings(s)
        workspace = self.workspace()
        if not workspace.is_dir():
            self.notice.emit("warning", f"the workspace folder does not exist: {workspace}")
            workspace = data_dir() / "workspace"
            workspace.mkdir(parents=True, exist_ok=True)
        toolbox = ToolBox(
            workspace, session.path, allow_write=s.allow_write, allow_shell=s.allow_shell, approve=self._approve
        )
        self.agent = Agent(
            session, s, llm_config=config, toolbox=toolbox, emit=self._on_engine_event, window=self._window_info()
        )
        self._agent_stale = False

    # ------------------------------------------------------------------ what the window shows

    def next_snapshot(self) -> ContextSnapshot | None:
        """The next request's regions: the history, the partial answer while streaming, the draft."""
        agent, session = self.agent, self.session
        if agent is None or session is None or session.closed:
            return None
        messages: list[Message] | None = None
        if self._turn.partial and self._turn.stream_id and self._turn.stream_id not in session:
            partial = {"id": self._turn.stream_id, "role": "assistant", "content": "".join(self._turn.partial)}
            messages = [*session.messages, partial]
        from engine.agent import imported_prefix_tokens

        own = self._own_window()  # an imported session: drawn against the model that made it
        prefix = imported_prefix_tokens(session) if own else None  # … with its own system prompt + tools
        return session.snapshot(
            self.settings,
            session.estimator,
            agent.system_prompt,
            agent.tools,
            self._draft,
            window=own[0] if own else agent.window,
            messages=messages,
            model=(own[1] or None) if own else None,
            prefix_tokens=prefix,
        )

    def _own_window(self) -> tuple[WindowInfo, str] | None:
        """The window and model of the agent that made the open session, when it was imported and no
        turn has run on it here (turns run with the settings' model and window)."""
        from engine.agent import imported_window

        return imported_window(self.session, self.settings) if self.session is not None else None

    def _state_now(self) -> ContextState:
        session = self.session
        assert session is not None
        snap = self.next_snapshot()
        assert snap is not None
        stack = session.undo_stack()
        return ContextState(
            live_ids=[str(m.get("id")) for m in session.messages],
            tokens=self._tokens(),
            snapshot=snap,
            summary=session.summary,
            summary_tokens=snap.summary,
            archive_days=session.archive_days(),
            undo_id=stack[-1] if stack else None,
        )

    def _tokens(self) -> dict[str, int]:
        session = self.session
        if session is None:
            return {}
        counts = session.token_counts()
        return {str(m.get("id")): c for m, c in zip(session.messages, counts, strict=True)}

    def _emit_state(self) -> ContextState | None:
        if self.session is None or self.session.closed or self.agent is None:
            return None
        state = self._state_now()
        self._live_ids = list(state.live_ids)
        self.context_state.emit(state)
        self.snapshot_changed.emit(state.snapshot)
        return state

    def _session_view(self) -> SessionView:
        from engine.context.offload import list_offloaded

        session = self.session
        assert session is not None
        state = self._state_now()
        self._live_ids = list(state.live_ids)
        archived: list[Message] = []
        problems: list[str] = []
        for day in state.archive_days:
            try:
                archived.extend(archive.read_day(session.path, day, problems))
            except archive.ArchiveError as exc:
                problems.append(str(exc))
        messages = merge_archived(session.messages, archived)
        events = session.read_events(problems)
        timeline = []
        for record in (e for e in events if e.get("type") == "context"):
            try:
                ContextSnapshot.from_json(record)
            except ValueError as exc:  # a damaged record must not take the whole timeline down
                problems.append(f"events.jsonl: a context record was skipped ({exc})")
                continue
            timeline.append(record)
        compactions = [e for e in events if e.get("type") == "compaction"]
        markers = self._markers(session, compactions, messages, state.undo_id)
        files = [file_dict(f, session) for f in list_offloaded(session.path)]
        gone = [f["message_id"] for f in files if f["message_id"] and "message_preview" not in f]
        if gone:  # files whose message left the context: preview it from the archive
            found = {str(m.get("id")): m for m in archive.find(session.path, gone)}
            for f in files:
                if f["message_id"] in found:
                    f["message_preview"] = "(archived) " + preview(found[f["message_id"]], 70)
        report = "" if session.load_report.clean else session.load_report.describe()
        if problems:
            report = "\n".join(p for p in (report, *problems[:5]) if p)
        last: tuple[int | None, int | None] = (None, None)
        if timeline:
            last = (_prompt_of(timeline[-1]), timeline[-1].get("provider_prompt_tokens"))
        return SessionView(
            id=session.id,
            title=session.title,
            path=session.path,
            model=state.snapshot.model or self.settings.model,
            messages=messages,
            state=state,
            markers=markers,
            timeline=timeline,
            compactions=compactions,
            files=files,
            problems=report,
            last_call=last,
        )

    @staticmethod
    def _markers(
        session: Session, compactions: list[dict[str, Any]], shown: list[Message], undo_id: str | None
    ) -> list[Marker]:
        """One marker per compaction (an undo updates its compaction's marker), placed after the last
        message it took out when the undo point still says which, else by time."""
        by_id: dict[str, dict[str, Any]] = {}
        order: list[str] = []
        for ev in compactions:
            if ev.get("result") == "nothing":
                continue
            key = str(ev.get("id") or "") or f"event-{len(order)}"
            if key not in by_id:
                order.append(key)
            by_id[key] = {k: v for k, v in ev.items() if k != "type"}
        position = {str(m.get("id")): i for i, m in enumerate(shown)}
        out: list[Marker] = []
        for key in order:
            ev = by_id[key]
            after: str | None = None
            try:
                point = session.read_undo_point(key)
                removed = [str(m.get("id")) for m in point.get("removed") or [] if str(m.get("id")) in position]
                if removed:
                    after = max(removed, key=lambda i: position[i])
            except SessionError:
                pass
            if after is None:
                after = _after_by_time(shown, str(ev.get("ts") or ""))
            out.append(Marker(ev, after, key == undo_id and ev.get("result") != "undone"))
        return out

    # ------------------------------------------------------------------ engine events

    def _on_engine_event(self, event: Event) -> None:
        if isinstance(event, TextDelta):
            if event.message_id != self._turn.stream_id:
                self._turn.stream_id = event.message_id
                self._turn.partial = []
            if not event.reasoning:
                self._turn.partial.append(event.text)
            self.text_delta.emit(event)
            self._schedule_snapshot()
        elif isinstance(event, MessageAdded):
            mid = str(event.message.get("id"))
            if mid == self._turn.stream_id:
                self._turn.partial = []
            if mid not in self._live_ids:
                self._live_ids.append(mid)
            self.message_added.emit(event)
            self._schedule_snapshot()
        elif isinstance(event, StateChanged):
            if event.state == "streaming":
                self._turn.partial = []
                self._turn.stream_id = ""
            self._set_state(event.state)
        elif isinstance(event, ToolCallStarted):
            self.tool_started.emit(event)
        elif isinstance(event, ToolCallFinished):
            self.tool_finished.emit(event)
            if event.offload_path:
                self._announce_file(event.offload_path)
        elif isinstance(event, ContextUpdated):
            snap = event.snapshot
            data = snap.to_json()
            data["message_count"] = len(snap.message_tokens)
            data["message_tokens"] = []
            self.call_recorded.emit(data)
            self.last_call.emit(_prompt_of(data), snap.provider_prompt_tokens)
        elif isinstance(event, CompactionStarted):
            self._set_state("compacting")
            self.compaction_started.emit(event)
        elif isinstance(event, CompactionEvent):
            self._on_compaction(event)
        elif isinstance(event, CompactionFailed):
            self.compaction_failed.emit(event)
            if event.reason != "cancelled":
                self.notice.emit("warning", f"compaction ({event.trigger}) failed: {event.reason}")
            self._set_state("idle" if not self.busy else self._state)
        elif isinstance(event, ErrorEvent):
            self.error.emit(event)
            if not event.retrying:
                self.notice.emit("error", event.message)
        elif isinstance(event, TurnFinished):
            self.turn_finished.emit(event)

    def _set_state(self, state: str) -> None:
        self._state = state
        self.state_changed.emit(state)

    def _on_compaction(self, event: CompactionEvent) -> None:
        session = self.session
        if session is None or session.closed:
            return
        before = list(self._live_ids)
        now = {str(m.get("id")) for m in session.messages}
        gone = [i for i in before if i not in now]
        data = {k: v for k, v in asdict(event).items()}
        stack = session.undo_stack()
        undoable = bool(stack) and stack[-1] == event.id and event.result not in ("undone", "failed", "nothing")
        self.compaction_finished.emit(Marker(data, gone[-1] if gone else None, undoable))
        if not self.busy and self.task("preview") is None:
            self._set_state("idle")
        self._emit_state()

    def _announce_file(self, path: str) -> None:
        from engine.context.offload import list_offloaded

        session = self.session
        if session is None:
            return
        for f in list_offloaded(session.path):
            if f.path == path:
                self.offloaded_file.emit(file_dict(f, session))
                return

    def _schedule_snapshot(self) -> None:
        if not self._snap_timer.isActive():
            self._snap_timer.start()

    def _on_snap_timer_timeout(self) -> None:
        snap = self.next_snapshot()
        if snap is not None:
            self.snapshot_changed.emit(snap)

    # ------------------------------------------------------------------ turns

    def send(self, text: str) -> bool:
        """Start a turn with ``text``; False (and a notice) when one is running or nothing is open."""
        if self.session is None or self.agent is None:
            self.notice.emit("warning", "no session is open")
            return False
        if self.busy:
            self.notice.emit("warning", "a turn is running: wait for it or press Stop")
            return False
        self._spawn("turn", self._run_turn(text))
        self.busy_changed.emit(True)
        return True

    async def _run_turn(self, text: str) -> None:
        from engine.agent import AgentError

        try:
            await self._await_llm()
            if self._agent_stale or (self._needs_llm_for_window() and not self._llm_ready):
                if self._needs_llm_for_window() and not self._llm_ready:
                    self._set_state("loading")  # the model's window comes from litellm's model info
                    warm = self.task("warmup") or self._spawn("warmup", self._warm_up())
                    await asyncio.shield(warm)
                self._make_agent()
            agent = self.agent
            await agent.run_turn(text)
        except AgentError as exc:
            self.notice.emit("error", str(exc))
        finally:
            self._turn.partial = []
            self._withdraw_approvals()
            if self._state != "compacting":
                self._set_state("idle")
            self.busy_changed.emit(False)
            if self.session is not None and not self.session.closed:
                if self._agent_stale:
                    self._make_agent()
                self._emit_state()
                self.sessions_listed.emit([session_dict(i) for i in self.store.list()])

    def stop(self) -> None:
        """Cancel the running turn (and a background compaction it started)."""
        t = self.task("turn")
        if t is not None:
            t.cancel()
        if self.agent is not None and self.agent.auto_task is not None and not self.agent.auto_task.done():
            self.agent.auto_task.cancel()
        self._withdraw_approvals()

    # ------------------------------------------------------------------ approvals

    async def _approve(self, name: str, arguments: dict[str, Any]) -> bool:
        rid = uuid.uuid4().hex
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._approvals[rid] = fut
        self.approval_requested.emit(rid, name, json.dumps(arguments, ensure_ascii=False))
        try:
            return await fut
        finally:
            self._approvals.pop(rid, None)

    def answer_approval(self, request_id: str, allowed: bool) -> None:
        fut = self._approvals.get(request_id)
        if fut is not None and not fut.done():
            fut.set_result(bool(allowed))

    def pending_approvals(self) -> list[str]:
        return list(self._approvals)

    def _withdraw_approvals(self) -> None:
        pending, self._approvals = self._approvals, {}
        for fut in pending.values():
            if not fut.done():
                fut.cancel()
        self.approvals_withdrawn.emit()

    # ------------------------------------------------------------------ slash commands

    def run_command(self, name: str, arg: str = "") -> None:
        if name == "compact":
            self.start_preview(arg)
        elif name == "new":
            self.new_session()
        elif name == "clear":
            self.clear_session()
        elif name == "context":
            self.notice.emit("info", self.context_report())
        else:
            self.notice.emit("error", f"unknown command /{name}")

    def context_report(self) -> str:
        """What fills the next request, one line per region (for /context)."""
        snap = self.next_snapshot()
        if snap is None:
            return "no session is open"
        return context_report(snap)

    def clear_session(self) -> None:
        """/clear: every message leaves the context (archived first) and the summary is emptied; undoable."""
        if self.busy:
            self.notice.emit("warning", "a turn is running: stop it first")
            return
        self._spawn("undo", self._clear())

    async def _clear(self) -> None:
        agent, session = self.agent, self.session
        if agent is None or session is None:
            return
        if not session.messages and not session.summary:
            self.notice.emit("info", "the conversation is already empty")
            return
        async with agent.compactor.lock:
            t0 = time.perf_counter()
            before = agent.snapshot().used
            removed = list(session.messages)
            event_id = new_id()
            point = {
                "id": event_id,
                "trigger": "manual",
                "summary": session.summary,
                "order": [str(m.get("id")) for m in removed],
                "removed": removed,
                "ts": now_iso(),
            }
            days = session.commit_compaction([], summary="", undo_point=point)
            event = CompactionEvent(
                trigger="manual",
                tokens_before=before,
                tokens_after=agent.snapshot().used,
                messages_compacted=len(removed),
                messages_kept=0,
                duration_ms=(time.perf_counter() - t0) * 1000,
                result="dropped",
                reason="/clear: the conversation was cleared (archived; Undo brings it back)",
                archive_day=days[-1] if days else "",
                id=event_id,
            )
            session.record_event(event)
        self._on_compaction(event)

    # ------------------------------------------------------------------ manual compaction

    def start_preview(self, instruction: str = "") -> bool:
        if self.session is None or self.agent is None:
            self.notice.emit("warning", "no session is open")
            return False
        if self.busy:
            self.notice.emit("warning", "a turn is running: wait for it or press Stop, then compact")
            return False
        self._preview = None
        self.preview_started.emit(instruction)
        self._start_preview_task(instruction)
        return True

    def regenerate_preview(self, instruction: str = "") -> None:
        if self.session is None or self.busy:
            self.preview_failed.emit("a turn is running: wait for it, then regenerate")
            return
        self._start_preview_task(instruction)

    def _start_preview_task(self, instruction: str) -> None:
        old = self.task("preview")
        if old is not None:
            old.cancel()
        self._spawn("preview", self._make_preview(instruction))

    async def _make_preview(self, instruction: str) -> None:
        """The plan and the digest at once (preview_ready), then the model's part (preview_summary)."""
        agent = self.agent
        if agent is None:
            return
        self._set_state("compacting")
        quick = None
        try:
            quick = agent.compactor.preview_now(instruction.strip() or None)
            self._preview = quick
            self.preview_ready.emit(quick)
            if getattr(quick.summary, "model_pending", False):
                await self._await_llm()
                self._set_state("compacting")
                full = await agent.compactor.complete_preview(quick)
                if self._preview is quick:  # not applied or discarded meanwhile
                    self._preview = full
                    self.preview_summary.emit(full)
        except asyncio.CancelledError:
            if quick is None or self._preview is quick:
                self.preview_failed.emit("cancelled: the model's text was not written")
            raise
        except Exception as exc:
            self.preview_failed.emit(f"the preview failed: {type(exc).__name__}: {_one_line(str(exc))}")
            return
        finally:
            if not self.busy:
                self._set_state("idle")

    def cancel_preview(self) -> None:
        t = self.task("preview")
        if t is not None:
            t.cancel()

    def discard_preview(self) -> None:
        self.cancel_preview()
        self._preview = None
        self.preview_closed.emit()

    def edit_preview(self, summary: str) -> None:
        """The user edited the summary: the "after" bar with that text."""
        if self._preview is None or self.agent is None:
            return
        snap = self.agent.compactor.snapshot(self._preview.plan.keep, summary)
        self.preview_after.emit(snap)

    def apply_preview(self, summary: str | None = None) -> None:
        if self._preview is None:
            self.preview_failed.emit("there is no preview to apply (it is still being made, or was discarded)")
            return
        if self.busy:
            self.preview_failed.emit("a turn is running: wait for it, then apply")
            return
        preview_ = self._preview
        self._preview = None  # a model still writing for it stops quietly (its text is not needed)
        self.cancel_preview()
        self._spawn("apply", self._apply(preview_, summary))

    async def _apply(self, preview_: Any, summary: str | None) -> None:
        from engine.context.compaction import CompactionError

        agent = self.agent
        if agent is None:
            return
        text = None if summary is None or summary == preview_.summary.text else summary
        try:
            await agent.compactor.apply(preview_, summary_text=text)
        except CompactionError as exc:
            self._preview = preview_  # the dialog stays open: it can be applied again or discarded
            self.preview_failed.emit(str(exc))
            return
        self._preview = None
        self.preview_closed.emit()

    def undo_compaction(self, marker_id: str | None = None) -> None:
        session = self.session
        if session is None or self.agent is None:
            return
        stack = session.undo_stack()
        if not stack:
            self.notice.emit("info", "there is no compaction to undo")
            return
        if marker_id is not None and marker_id != stack[-1]:
            self.notice.emit("warning", "only the latest compaction can be undone; undo the later ones first")
            return
        if self.busy:
            self.notice.emit("warning", "a turn is running: stop it first, then undo")
            return
        self._spawn("undo", self._undo())

    async def _undo(self) -> None:
        from engine.context.compaction import CompactionError

        try:
            await self.agent.compactor.undo()
        except CompactionError as exc:
            self.notice.emit("error", f"undo failed: {exc}")

    @property
    def preview(self) -> Any:
        return self._preview

    # ------------------------------------------------------------------ inspector data

    def read_offloaded(self, path: str) -> None:
        """Read an offloaded tool result (only ``tool_results/<hex>.txt`` of the open session)."""
        session = self.session
        if session is None:
            return
        rel = path.replace("\\", "/")
        if rel.startswith(str(session.path).replace("\\", "/") + "/"):
            rel = rel[len(str(session.path)) + 1 :]
        if not OFFLOAD_PATH.match(rel):
            self.notice.emit("error", f"not an offloaded tool result of this session: {path}")
            return
        full = session.path / rel
        try:
            with open(full, "rb") as fh:
                data = fh.read(MAX_VIEW_BYTES + 1)
        except OSError as exc:
            self.notice.emit("error", f"cannot read {rel}: {exc.strerror or exc}")
            return
        text = data[:MAX_VIEW_BYTES].decode("utf-8", "replace")
        if len(data) > MAX_VIEW_BYTES:
            text += f"\n[… the viewer shows the first {MAX_VIEW_BYTES // (1024 * 1024)} MB; open the file for all]"
        self.file_loaded.emit(rel, text)

    def load_archive_day(self, day: str) -> None:
        session = self.session
        if session is None:
            return
        problems: list[str] = []
        try:
            messages = archive.read_day(session.path, day, problems)
        except archive.ArchiveError as exc:
            self.notice.emit("error", str(exc))
            return
        tokens = {str(m.get("id")): session.estimator.message(m) for m in messages if m.get("role") != "system"}
        self.archive_messages.emit(day, messages, tokens)
        for p in problems[:3]:
            self.notice.emit("warning", f"archive: {p}")

    def search_archive(self, query: str) -> None:
        session = self.session
        if session is None:
            return
        try:
            hits = archive.search(session.path, query)
        except archive.ArchiveError as exc:
            self.notice.emit("error", str(exc))
            return
        self.archive_hits.emit(query, [{"day": h.day, "message": h.message, "snippet": h.snippet} for h in hits])

    def restore_messages(self, ids: list[str]) -> None:
        if self.session is None or not ids:
            return
        if self.busy:
            self.notice.emit("warning", "a turn is running: stop it first, then restore")
            return
        self._spawn("undo", self._restore(list(ids)))

    async def _restore(self, ids: list[str]) -> None:
        agent, session = self.agent, self.session
        if agent is None or session is None:
            return
        async with agent.compactor.lock:
            try:
                restored = session.restore_from_archive(ids)
            except (archive.ArchiveError, SessionError) as exc:
                self.notice.emit("error", f"cannot restore: {_one_line(str(exc))}")
                return
        if restored:
            self.notice.emit("info", f"restored {len(restored)} message(s) into the context")
        else:
            self.notice.emit("info", "those messages are already in the context")
        self._emit_state()

    def count_draft(self, text: str) -> int:
        """The draft's cost in the units of the chart (calibrated once the provider reported)."""
        self._draft = text
        session = self.session
        if session is None:
            return 0
        n = session.estimator.text(text) if text else 0
        ratio = session.calibrator.ratio
        if ratio and n:
            n = round(n * ratio)
        self.draft_tokens.emit(n)
        self._schedule_snapshot()
        return n

    # ------------------------------------------------------------------ settings and keys

    def apply_settings(self, settings: Settings) -> bool:
        """Save and use ``settings``; False (and a notice) when they cannot be saved."""
        try:
            save_settings(settings)
        except (ValueError, OSError) as exc:
            self.notice.emit("error", f"settings not saved: {_one_line(str(exc))}")
            return False
        self.settings = settings
        self.settings_changed.emit(settings)
        if self.session is not None and not self.session.closed:
            if self.busy:
                self._agent_stale = True  # used from the next turn on
            else:
                self._make_agent()
                self._emit_state()
        return True

    def api_key_status(self) -> str:
        from engine.llm.local_model import is_local
        from engine.store.secrets import env_var_for, lookup_api_key, provider_of

        model = self.settings.model
        if is_local(model):
            return "The offline model needs no key"
        provider = provider_of(model)
        found = lookup_api_key(model, self.settings.api_key_env)
        if found.source == "keyring":
            return f"A key for {provider} is stored in the OS keyring"
        if found.key:
            return f"A key for {provider} comes from the {found.source}"
        return (f"No key for {provider}: type one here (kept in the OS keyring) or set "
                f"${env_var_for(provider)} in the environment")

    def store_api_key(self, key: str) -> bool:
        from engine.store.secrets import provider_of, store_api_key

        provider = provider_of(self.settings.model)
        try:
            store_api_key(provider, key)
        except (RuntimeError, ValueError) as exc:
            self.notice.emit("error", f"the API key was not stored: {exc}")
            return False
        self.notice.emit("info", f"the API key for {provider} is stored in the OS keyring")
        if self.session is not None and not self.busy:
            self._make_agent()
        return True

    def forget_api_key(self) -> bool:
        from engine.store.secrets import delete_api_key, provider_of

        provider = provider_of(self.settings.model)
        removed = delete_api_key(provider)
        self.notice.emit("info", f"the stored key for {provider} was removed" if removed
                         else f"no key for {provider} was stored in the OS keyring")
        return removed

    def window_description(self) -> str:
        agent = self.agent
        if agent is None:
            return ""
        w = agent.window
        source = {"override": "set here", "model": "from the model's info", "fallback": "max output × 4 "
                  "(the model's window is not known)"}.get(w.source, w.source)
        return f"now: {w.context_window:,} tokens ({source})"

    # ------------------------------------------------------------------ shutdown

    async def shutdown(self) -> None:
        """Cancel everything and close the session (the window is closing)."""
        self._closing = True
        self._snap_timer.stop()
        for t in list(self._tasks.values()):
            if not t.done() and t is not asyncio.current_task():
                t.cancel()
        running = [t for t in self._tasks.values() if not t.done() and t is not asyncio.current_task()]
        if running:
            await asyncio.wait(running, timeout=5)
        self._withdraw_approvals()
        if self.session is not None:
            self.session.close()


def _after_by_time(shown: list[Message], ts: str) -> str | None:
    if not ts:
        return None
    last: str | None = None
    for msg in shown:
        if str(msg.get("ts") or "") <= ts:
            last = str(msg.get("id"))
    return last


__all__ = [
    "ContextState",
    "Controller",
    "Marker",
    "SessionView",
    "file_dict",
    "merge_archived",
    "session_dict",
]
