"""Sessions: start-up, list, new, open (locked: one writer per folder), rename, delete, import; leaving
the open session (or read-only view) and loading another."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from engine.context.conversation import Session
from engine.store.session import SessionError
from engine.workbench import source_views as sv
from engine.workbench.compaction_ui import CompactionPart
from engine.workbench.core import TurnBuffer, WorkbenchCore, one_line
from engine.workbench.events import FollowChanged, SessionLoaded, SessionsListed
from engine.workbench.views import SessionView, session_dict, session_view, shown_as_view

RUNNING_ON_A_SESSION = ("turn", "preview", "apply", "clear", "undo", "restore")  # what leaving a session stops


class SessionsPart:
    """The session part of the service: it needs the core and the compaction part (a preview ends
    with its session)."""

    def __init__(self, core: WorkbenchCore, compaction: CompactionPart) -> None:
        self.core = core
        self.compaction = compaction

    def start(self) -> None:
        """List the sessions, open the most recent one (or a new one), load litellm in the background."""
        core = self.core
        for problem in core.startup_problems:
            core.notice("warning", f"settings: {problem}")
        core.startup_problems = []
        infos = self.list_sessions()
        if infos:
            self.open_session(infos[0]["id"])
        else:
            self.new_session()
        from engine.llm import client as llm

        llm.never_wait_on_this_thread()  # the window's model-info lookups never import litellm here
        core.warm_up()

    def list_sessions(self) -> list[dict[str, Any]]:
        infos = [session_dict(i) for i in self.core.store.list()]
        self.core.emit(SessionsListed(infos))
        return infos

    def new_session(self) -> asyncio.Task[Any]:
        return self.core.tasks.spawn("open", self._new_session(), replace=True)

    async def _new_session(self) -> None:
        core = self.core
        await self.leave()
        await core.prepare_counting()
        session = core.store.create("New session", estimator=core.estimator())
        session.lock()
        self.load(session)
        self.list_sessions()

    def open_session(self, session_id: str) -> asyncio.Task[Any] | None:
        session = self.core.session
        if session is not None and session.id == session_id and not session.closed:
            return None
        return self.core.tasks.spawn("open", self.reopen(session_id), replace=True)

    async def reopen(self, session_id: str) -> None:
        """Leave what is open and open the session ``session_id`` (a notice when it cannot be)."""
        core = self.core
        await self.leave()
        await core.prepare_counting()
        try:
            session = core.store.open(
                session_id, estimator=core.estimator(), retention_days=core.settings.offload_retention_days
            )
            if session.meta.get("import"):  # another agent's session: counted as its import counted it
                session.set_estimator(core.estimator(imported=True))
        except (SessionError, OSError) as exc:
            core.notice("error", f"cannot open session {session_id}: {one_line(str(exc))}")
            self.list_sessions()
            return
        try:
            session.lock()  # one writer per folder: another app or `ctxbench run` may hold it
        except (SessionError, OSError) as exc:
            session.close()
            core.notice("error", f"cannot open session {session_id}: {one_line(str(exc))}")
            self.list_sessions()
            return
        self.load(session)

    def rename_session(self, session_id: str, title: str) -> None:
        try:
            self.core.store.rename(session_id, title)
        except (SessionError, OSError) as exc:
            self.core.notice("error", f"cannot rename: {one_line(str(exc))}")
        self.list_sessions()

    def delete_session(self, session_id: str) -> asyncio.Task[Any]:
        return self.core.tasks.spawn("delete", self._delete_session(session_id))

    async def _delete_session(self, session_id: str) -> None:
        core = self.core
        current = core.session is not None and core.session.id == session_id
        if current:
            await self.leave()
        try:
            core.store.delete(session_id)
        except (SessionError, OSError) as exc:
            core.notice("error", f"cannot delete session {session_id}: {one_line(str(exc))}")
        infos = self.list_sessions()
        if current:
            if infos:
                await self.reopen(infos[0]["id"])
            else:
                await self._new_session()

    def import_transcript(self, path: str | Path) -> asyncio.Task[Any]:
        return self.core.tasks.spawn("import", self.import_and_open(Path(path)))

    async def import_and_open(self, path: Path) -> None:
        """Import the transcript (or agent session) at ``path`` as a session and open it."""
        from engine.importer import import_transcript
        from engine.model.events import AgentState, StateChanged
        from engine.transcript import TranscriptError

        core = self.core
        model_info = core.model_info()
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
        self.list_sessions()
        await self.reopen(report.session_id)
        core.notice("info", report.describe())

    async def leave(self) -> None:
        """Stop what runs on the open session (a view: its follow loop first) and close it; a view's
        folder is removed."""
        core = self.core
        await core.tasks.cancel_and_wait("follow")
        await core.tasks.cancel_and_wait(*RUNNING_ON_A_SESSION)
        core.approvals.withdraw()
        self.compaction.close_preview()
        if core.session is not None:
            core.session.close()
        core.session = None
        core.agent = None
        view, core.view = core.view, None
        if view is not None:
            if view.tail is not None:
                core.emit(FollowChanged(False, "", False))
            await asyncio.to_thread(sv.remove_view, view.root)

    def load(self, session: Session) -> None:
        """Make ``session`` the open one (a view: :attr:`WorkbenchCore.view` is set first) and show it."""
        core = self.core
        core.session = session
        self.compaction.forget_preview()
        core.turn = TurnBuffer()
        core.make_agent()
        view = self.session_view()
        core.emit(SessionLoaded(view))
        if view.problems:
            core.notice("warning", f"The session “{session.title}” was repaired when it was opened:\n{view.problems}")

    def session_view(self) -> SessionView:
        """Everything the window shows of the open session (a view: read-only, with its source)."""
        core = self.core
        session = core.session
        assert session is not None
        state = core.state_now()
        core.live_ids = list(state.live_ids)
        out = session_view(session, state, core.settings.model)
        return out if core.view is None else shown_as_view(core.view, out)


__all__ = ["RUNNING_ON_A_SESSION", "SessionsPart"]
