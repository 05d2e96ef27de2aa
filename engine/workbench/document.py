"""What the service has open, in one place: the writable session or the read-only view of another agent's
session, and the agent built for it.

:class:`OpenDocument` is the only writer of the open session, the view and the agent: :meth:`~OpenDocument.open`
(nothing was open), :meth:`~OpenDocument.replace` (a followed view read again: the same view, a new session) and
:meth:`~OpenDocument.close`; the guards are asked here too: :meth:`~OpenDocument.refuses` (the read-only rule,
:class:`engine.workbench.policy.ReadOnlyPolicy`) and :attr:`~OpenDocument.busy` / :meth:`~OpenDocument.refuses_busy`
(a turn is running). :func:`open_session_folder` opens a session folder (counted, optionally locked) for the
service and for the CLI alike.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from engine.context.conversation import Session
from engine.context.tokens import Estimator
from engine.store.session import SessionError
from engine.workbench.policy import ReadOnlyPolicy
from engine.workbench.tasks import TaskGroup

if TYPE_CHECKING:
    from engine.agent import Agent
    from engine.context.conversation import SessionStore
    from engine.workbench.source_views import SourceView

TURN = "turn"  # the task a turn runs as


def open_session_folder(
    where: str | Path,
    estimator: Estimator,
    *,
    store: SessionStore | None = None,
    imported: Estimator | None = None,
    retention_days: int | None = None,
    lock: bool = False,
) -> Session:
    """The session ``where`` (an id of ``store``, or a folder), counted with ``estimator`` — ``imported``, when
    given, for another agent's session (its meta says ``import``) — and, with ``lock``, locked: one writer per
    folder (another window or ``ctxbench run`` may hold it; the session is closed again when it cannot be).
    SessionError or OSError when it cannot be opened."""
    if store is not None:
        session = store.open(where, estimator=estimator, retention_days=retention_days)
    else:
        from engine.store.session_load import HISTORY_FILE, SESSION_FILE

        path = Path(where)
        if not (path / SESSION_FILE).exists() and not (path / HISTORY_FILE).exists():
            raise SessionError(f"{path} is not a session folder (no session.json or history.jsonl in it)")
        session = Session.load(path, estimator=estimator, retention_days=retention_days)
    if imported is not None and session.meta.get("import"):  # counted as its import counted it
        session.set_estimator(imported)
    if lock:
        try:
            session.lock()
        except BaseException:
            session.close()
            raise
    return session


class OpenDocument:
    """The open session (or view) and its agent; see the module docstring. ``make_agent`` builds the agent for
    a session (the LLM runtime's, with the service's approvals and event sink); ``tasks`` says whether a turn
    runs; ``warn`` says why an intent is refused."""

    def __init__(
        self, tasks: TaskGroup, make_agent: Callable[[Session], Agent], warn: Callable[[str], None]
    ) -> None:
        self._tasks = tasks
        self._make_agent = make_agent
        self._warn = warn
        self._session: Session | None = None
        self._view: SourceView | None = None
        self._agent: Agent | None = None
        self.read_only = ReadOnlyPolicy(lambda: self._view is not None, warn)

    # ------------------------------------------------------------------ what is open

    @property
    def session(self) -> Session | None:
        return self._session

    @property
    def view(self) -> SourceView | None:
        """The read-only view open now (None: a writable session, or nothing)."""
        return self._view

    @property
    def agent(self) -> Agent | None:
        return self._agent

    @property
    def is_open(self) -> bool:
        """A session is open and not closed."""
        return self._session is not None and not self._session.closed

    # ------------------------------------------------------------------ the only writers

    def open(self, session: Session, view: SourceView | None = None) -> None:
        """Make ``session`` the open one (``view``: read-only, another agent's session) and build its agent;
        whatever was open was closed first."""
        if self._session is not None or self._view is not None:
            raise RuntimeError("a document is open: close it first")
        self._session, self._view = session, view
        self.make_agent()

    def replace(self, session: Session) -> Session:
        """The open view read again: ``session`` takes the open one's place (the view stays) with an agent of its
        own; the old session is returned, for the caller to close once the window has the new one."""
        old = self._session
        if old is None or self._view is None:
            raise RuntimeError("only an open view is replaced")
        self._session = session
        self.make_agent()
        return old

    def close(self) -> SourceView | None:
        """Close the open session and forget it, its view and its agent; the view is returned (its folder is the
        caller's to remove)."""
        session, view = self._session, self._view
        self._session, self._view, self._agent = None, None, None
        if session is not None:
            session.close()
        return view

    def make_agent(self) -> None:
        """The open session's agent built again (the settings changed, litellm was loaded)."""
        if self._session is not None:
            self._agent = self._make_agent(self._session)

    # ------------------------------------------------------------------ the guards

    @property
    def writable(self) -> bool:
        return self._view is None

    @property
    def busy(self) -> bool:
        """A turn is running."""
        return self._tasks.get(TURN) is not None

    def refuses(self, intent: str, command: str | None = None) -> bool:
        """The read-only policy's answer for ``intent`` (True: refused, and a notice says why)."""
        return self.read_only.refuses(intent, command)

    def refuses_busy(self, text: str) -> bool:
        """True (and ``text`` as a warning) while a turn runs."""
        if self.busy:
            self._warn(text)
            return True
        return False


__all__ = ["TURN", "OpenDocument", "open_session_folder"]
