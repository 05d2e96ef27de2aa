"""What the window is shown of the open session: the next request's regions (the history, the partial answer
while streaming, the draft), the context state, and the one snapshot throttle.

:class:`Display` holds the running turn's partial answer (:class:`TurnBuffer`), the draft, the ids the window
shows and the import calibration made; it reads the open session and agent from
:class:`engine.workbench.document.OpenDocument`.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.context.conversation import Session
from engine.model.messages import Message
from engine.model.snapshot import ContextSnapshot, WindowInfo
from engine.store.config import Settings
from engine.workbench.document import OpenDocument
from engine.workbench.events import ContextStateChanged, SnapshotChanged
from engine.workbench.runtime import estimator_key
from engine.workbench.throttle import SNAPSHOT_INTERVAL_S, Throttle
from engine.workbench.views import ContextState

if TYPE_CHECKING:
    from engine.agent import Agent


@dataclass
class TurnBuffer:
    """Bookkeeping of the running turn (the partial answer for the live chart)."""

    stream_id: str = ""
    partial: list[str] = field(default_factory=list)


class Display:
    """See the module docstring: given the open document, the settings as they are now and the events out."""

    def __init__(
        self,
        doc: OpenDocument,
        settings: Callable[[], Settings],
        emit: Callable[[Any], None],
        snapshot_interval: float = SNAPSHOT_INTERVAL_S,
    ) -> None:
        self._doc = doc
        self._settings = settings
        self._emit = emit
        self.throttle = Throttle(self._emit_snapshot, snapshot_interval)
        self.turn = TurnBuffer()
        self.draft = ""
        self.live_ids: list[str] = []
        # the session (weakly: a closed one may go) and the estimator the import calibration was made for
        self._import_calibration: tuple[weakref.ref[Session], tuple[type, str]] | None = None

    def next_snapshot(self) -> ContextSnapshot | None:
        """The next request's regions: the history, the partial answer while streaming, the draft."""
        agent, session = self._doc.agent, self._doc.session
        if agent is None or session is None or session.closed:
            return None
        messages: list[Message] | None = None
        if self.turn.partial and self.turn.stream_id and self.turn.stream_id not in session:
            partial = {"id": self.turn.stream_id, "role": "assistant", "content": "".join(self.turn.partial)}
            messages = [*session.messages, partial]
        from engine.agent import imported_prefix_tokens
        from engine.context.window import imported_window

        settings = self._settings()
        own = imported_window(session, settings)  # an imported session: drawn against its model
        prefix = imported_prefix_tokens(session) if own else None  # … with its own system prompt + tools
        tools = agent.tools
        if own and prefix is None and session.meta.get("tools_source") == "none":
            tools = []  # another agent's file without its tool definitions (none inferred): not ctxbench's own
        self._calibrate_import(session, agent, own, prefix, tools)
        return session.snapshot(
            settings,
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
        estimator = estimator_key(session.estimator)
        made = self._import_calibration
        ours = made is not None and made[0]() is session  # the object, not id(): ids of freed sessions recur
        if (ours and made is not None and made[1] == estimator) or (session.calibrator.calibrated and not ours):
            return
        from engine.agent import calibrate_imported

        self._import_calibration = (weakref.ref(session), estimator)
        calibrate_imported(session, self._settings(), agent.system_prompt, tools,
                           own[0] if own else agent.window, prefix)

    def state_now(self) -> ContextState:
        session = self._doc.session
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
        if not self._doc.is_open or self._doc.agent is None:
            return None
        state = self.state_now()
        self.live_ids = list(state.live_ids)
        self._emit(ContextStateChanged(state))
        self._emit(SnapshotChanged(state.snapshot))
        return state

    def _emit_snapshot(self) -> None:
        snap = self.next_snapshot()
        if snap is not None:
            self._emit(SnapshotChanged(snap))


__all__ = ["Display", "TurnBuffer"]
