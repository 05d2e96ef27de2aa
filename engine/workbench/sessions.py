"""Sessions: start-up, list, new, open (locked: one writer per folder), rename, delete, import."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from engine.context.conversation import Session
from engine.store.session import SessionError
from engine.workbench.core import TurnBuffer, WorkbenchCore, one_line
from engine.workbench.events import PreviewClosed, SessionLoaded, SessionsListed
from engine.workbench.views import SessionView, session_dict, session_view

RUNNING_ON_A_SESSION = ("turn", "preview", "apply", "undo")  # what leaving a session stops


class Sessions(WorkbenchCore):
    """The session part of the service."""

    def start(self) -> None:
        """List the sessions, open the most recent one (or a new one), load litellm in the background."""
        for problem in self._startup_problems:
            self.notice("warning", f"settings: {problem}")
        self._startup_problems = []
        infos = self.list_sessions()
        if infos:
            self.open_session(infos[0]["id"])
        else:
            self.new_session()
        from engine.llm import client as llm

        llm.never_wait_on_this_thread()  # the window's model-info lookups never import litellm here
        self.tasks.spawn("warmup", self._warm_up())

    def list_sessions(self) -> list[dict[str, Any]]:
        infos = [session_dict(i) for i in self.store.list()]
        self.emit(SessionsListed(infos))
        return infos

    def new_session(self) -> asyncio.Task[Any]:
        return self.tasks.spawn("open", self._new_session(), replace=True)

    async def _new_session(self) -> None:
        await self._leave_session()
        await self._prepare_counting()
        session = self.store.create("New session", estimator=self._estimator())
        session.lock()
        self._load(session)
        self.list_sessions()

    def open_session(self, session_id: str) -> asyncio.Task[Any] | None:
        if self.session is not None and self.session.id == session_id and not self.session.closed:
            return None
        return self.tasks.spawn("open", self._open_session(session_id), replace=True)

    async def _open_session(self, session_id: str) -> None:
        await self._leave_session()
        await self._prepare_counting()
        try:
            session = self.store.open(
                session_id, estimator=self._estimator(), retention_days=self.settings.offload_retention_days
            )
        except (SessionError, OSError) as exc:
            self.notice("error", f"cannot open session {session_id}: {one_line(str(exc))}")
            self.list_sessions()
            return
        try:
            session.lock()  # one writer per folder: another app or `ctxbench run` may hold it
        except (SessionError, OSError) as exc:
            session.close()
            self.notice("error", f"cannot open session {session_id}: {one_line(str(exc))}")
            self.list_sessions()
            return
        self._load(session)

    def rename_session(self, session_id: str, title: str) -> None:
        try:
            self.store.rename(session_id, title)
        except (SessionError, OSError) as exc:
            self.notice("error", f"cannot rename: {one_line(str(exc))}")
        self.list_sessions()

    def delete_session(self, session_id: str) -> asyncio.Task[Any]:
        return self.tasks.spawn("delete", self._delete_session(session_id))

    async def _delete_session(self, session_id: str) -> None:
        current = self.session is not None and self.session.id == session_id
        if current:
            await self._leave_session()
        try:
            self.store.delete(session_id)
        except (SessionError, OSError) as exc:
            self.notice("error", f"cannot delete session {session_id}: {one_line(str(exc))}")
        infos = self.list_sessions()
        if current:
            if infos:
                await self._open_session(infos[0]["id"])
            else:
                await self._new_session()

    def import_transcript(self, path: str | Path) -> asyncio.Task[Any]:
        return self.tasks.spawn("import", self._import(Path(path)))

    async def _import(self, path: Path) -> None:
        from engine.importer import import_transcript
        from engine.model.events import AgentState, StateChanged
        from engine.transcript import TranscriptError

        model_info = self._model_info()
        self.emit(StateChanged(AgentState.IMPORTING))
        try:
            # the window override is the running model's: the imported run is drawn against its own model
            settings = self.settings.replace(context_window=None)
            report = await asyncio.to_thread(
                import_transcript, path, store=self.store, settings=settings, model_info=model_info
            )
        except (TranscriptError, OSError, SessionError) as exc:
            self.notice("error", f"cannot open the transcript {path.name}: {one_line(str(exc))}")
            self.emit(StateChanged(self._state))
            return
        self.emit(StateChanged(self._state))
        self.list_sessions()
        await self._open_session(report.session_id)
        self.notice("info", report.describe())

    async def _leave_session(self) -> None:
        """Stop what runs on the open session and close it."""
        await self.tasks.cancel_and_wait(*RUNNING_ON_A_SESSION)
        self.approvals.withdraw()
        if self._preview is not None:
            self.emit(PreviewClosed())
        self._preview = None
        if self.session is not None:
            self.session.close()
        self.session = None
        self.agent = None

    def _load(self, session: Session) -> None:
        self.session = session
        self._preview = None
        self._turn = TurnBuffer()
        self._make_agent()
        view = self.session_view()
        self.emit(SessionLoaded(view))
        if view.problems:
            self.notice("warning", f"The session “{session.title}” was repaired when it was opened:\n{view.problems}")

    def session_view(self) -> SessionView:
        """Everything the window shows of the open session."""
        session = self.session
        assert session is not None
        state = self._state_now()
        self._live_ids = list(state.live_ids)
        return session_view(session, state, self.settings.model)


__all__ = ["Sessions"]
