"""Sessions: start-up, list, new, open (locked: one writer per folder), rename, delete, import; leaving
the open session (or read-only view) and loading another."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from engine.context.conversation import Session
from engine.store.session import SessionError
from engine.store.staging import collection_paused
from engine.workbench import source_views as sv
from engine.workbench.compaction_ui import CompactionPart
from engine.workbench.core import WorkbenchCore, one_line
from engine.workbench.display import Display, TurnBuffer
from engine.workbench.document import OpenDocument, open_session_folder
from engine.workbench.events import FollowChanged, SessionLoaded, SessionsListed
from engine.workbench.rows import SessionRow
from engine.workbench.runtime import LlmRuntime
from engine.workbench.views import SessionView, session_row, session_view, shown_as_view

RUNNING_ON_A_SESSION = ("turn", "preview", "apply", "clear", "undo", "restore")  # what leaving a session stops


class SessionsPart:
    """The session part of the service: the core (events, tasks, store), the open document it opens and closes,
    the runtime (the estimator), the display and the compaction part (a preview ends with its session)."""

    def __init__(self, core: WorkbenchCore, doc: OpenDocument, runtime: LlmRuntime, display: Display,
                 compaction: CompactionPart) -> None:
        self.core = core
        self.doc = doc
        self.runtime = runtime
        self.display = display
        self.compaction = compaction

    def start(self) -> None:
        """List the sessions, open the most recent one (or a new one), load litellm in the background."""
        core = self.core
        for problem in core.startup_problems:
            core.notice("warning", f"settings: {problem}")
        core.startup_problems = []
        infos = self.list_sessions()
        if infos:
            self.open_session(infos[0].id)
        else:
            self.new_session()
        from engine.llm import client as llm

        llm.never_wait_on_this_thread()  # the window's model-info lookups never import litellm here
        self.runtime.warm_up()

    def list_sessions(self) -> list[SessionRow]:
        infos = [session_row(i) for i in self.core.store.list()]
        self.core.emit(SessionsListed(infos))
        return infos

    async def relist(self) -> list[SessionRow]:
        """:meth:`list_sessions` from a task: the store is read in a worker thread, off the event loop."""
        infos = [session_row(i) for i in await asyncio.to_thread(self.core.store.list)]
        self.core.emit(SessionsListed(infos))
        return infos

    def new_session(self) -> asyncio.Task[Any]:
        return self.core.tasks.spawn("open", self._new_session(), replace=True)

    async def _new_session(self) -> None:
        await self.leave()
        await self.runtime.prepare_counting()
        session = self.core.store.create("New session", estimator=self.runtime.estimator())
        session.lock()
        self.load(session)
        await self.relist()

    def open_session(self, session_id: str) -> asyncio.Task[Any] | None:
        session = self.doc.session
        if session is not None and session.id == session_id and not session.closed:
            return None
        return self.core.tasks.spawn("open", self.reopen(session_id), replace=True)

    async def reopen(self, session_id: str) -> None:
        """Leave what is open and open the session ``session_id`` (a notice when it cannot be)."""
        core, runtime = self.core, self.runtime
        await self.leave()
        await runtime.prepare_counting()
        try:
            session = open_session_folder(
                session_id, runtime.estimator(), store=core.store, imported=runtime.estimator(imported=True),
                retention_days=core.settings.offload_retention_days, lock=True,
            )
        except (SessionError, OSError) as exc:
            core.notice("error", f"cannot open session {session_id}: {one_line(str(exc))}")
            await self.relist()
            return
        self.load(session)

    def rename_session(self, session_id: str, title: str) -> None:
        try:
            self.core.store.rename(session_id, title)
        except (SessionError, OSError) as exc:
            self.core.notice("error", f"cannot rename: {one_line(str(exc))}")
        self.list_sessions()

    def delete_session(self, session_id: str) -> asyncio.Task[Any]:
        """Delete it (after a deletion asked for before, if one runs)."""
        return self.core.tasks.spawn("delete", self._delete_session(session_id), queue=True)

    async def _delete_session(self, session_id: str) -> None:
        core = self.core
        current = self.doc.session is not None and self.doc.session.id == session_id
        if current:
            await self.leave()
        try:
            core.store.delete(session_id)
        except (SessionError, OSError) as exc:
            core.notice("error", f"cannot delete session {session_id}: {one_line(str(exc))}")
        infos = await self.relist()
        if current:
            if infos:
                await self.reopen(infos[0].id)
            else:
                await self._new_session()

    def import_transcript(self, path: str | Path) -> asyncio.Task[Any]:
        """Import and open it (after an import asked for before, if one runs)."""
        return self.core.tasks.spawn("import", self.import_and_open(Path(path)), queue=True)

    async def import_and_open(self, path: Path) -> None:
        """Import the transcript (or agent session) at ``path`` as a session and open it."""
        from engine.importer import import_transcript
        from engine.model.events import AgentState, StateChanged
        from engine.transcript import TranscriptError

        core = self.core
        model_info = self.runtime.model_info()
        core.emit(StateChanged(AgentState.IMPORTING))
        try:
            # the window override is the running model's: the imported run is drawn against its own model
            settings = core.settings.replace(context_window=None)
            report = await asyncio.to_thread(
                import_transcript, path, store=core.store, settings=settings, model_info=model_info
            )
        except (TranscriptError, OSError, SessionError) as exc:
            core.notice("error", f"cannot open the transcript {path.name}: {one_line(str(exc))}")
            core.emit(StateChanged(core.state))
            return
        core.emit(StateChanged(core.state))
        await self.relist()
        await self.reopen(report.session_id)
        core.notice("info", report.describe())

    async def leave(self, keep_view: bool = False) -> None:
        """Stop what runs on the open session (a view: its follow loop first) and close it; a view's folder is
        removed (``keep_view``: not, and the view is not said to be left — a subagent view opened in it)."""
        core = self.core
        await core.tasks.cancel_and_wait("follow")
        await core.tasks.cancel_and_wait(*RUNNING_ON_A_SESSION)
        core.approvals.withdraw()
        self.compaction.close_preview()
        view = self.doc.close()
        if view is not None and not keep_view:
            if view.tail is not None:
                core.emit(FollowChanged(False, "", False))
            await asyncio.to_thread(sv.remove_view, view.root)

    def load(self, session: Session, view: sv.SourceView | None = None) -> None:
        """Make ``session`` the open one (``view``: read-only, another agent's session) and show it. When two
        opens raced (an import's and a click's), the later one takes the place of the one that came first."""
        if self.doc.session is not None:
            left = self.doc.close()
            if left is not None and left.root is not None and (view is None or view.root != left.root):
                sv.remove_view(left.root)
        self.compaction.forget_preview()
        self.display.turn = TurnBuffer()
        with collection_paused():  # a bulk build (every call's row): resumed before the window is told
            self.doc.open(session, view)
            shown = self.session_view()
        self.core.emit(SessionLoaded(shown))
        if shown.problems:
            self.core.notice("warning",
                             f"The session “{session.title}” was repaired when it was opened:\n{shown.problems}")

    def session_view(self) -> SessionView:
        """Everything the window shows of the open session (a view: read-only, with its source)."""
        session, view = self.doc.session, self.doc.view
        assert session is not None
        state = self.display.state_now()
        self.display.live_ids = list(state.live_ids)
        out = session_view(session, state, self.core.settings.model)
        return out if view is None else shown_as_view(view, out)


__all__ = ["RUNNING_ON_A_SESSION", "SessionsPart"]
