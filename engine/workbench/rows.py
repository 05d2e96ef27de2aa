"""The rows the window's lists show, typed (frozen dataclasses the widgets read by attribute): a session of the
sessions panel (:class:`SessionRow`), an offloaded tool result of the inspector's Tool results tab
(:class:`FileRow`). Made by :mod:`engine.workbench.views` (``session_row``, ``file_row``); this module imports
nothing of the engine, so a widget can import it without loading the service. (The Archive tab's search hits are
:class:`engine.store.archive.ArchiveHit`.)"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SessionRow:
    """One row of the sessions panel: the session's id and title, when it was last changed (ISO; "" unknown) and
    how many messages it holds (None: not said, as for a row added for a session just opened)."""

    id: str
    title: str
    updated: str = ""
    messages: int | None = None


@dataclass(frozen=True)
class FileRow:
    """One offloaded tool result (``tool_results/<hex>.txt``): its path relative to the session folder, size in
    bytes, lines, when it was written (ISO), the tool that produced it, the message that holds it, and that
    message's preview ("" when the message is not found; "(archived) …" when it left the context)."""

    path: str
    size: int = 0
    lines: int = 0
    created: str = ""
    tool: str = ""
    message_id: str = ""
    message_preview: str = ""


@dataclass(frozen=True)
class SubagentMark:
    """Where an imported session's subagent ran, for the parent's timeline (:func:`engine.workbench.subagents.
    subagent_marks`): its id, its session folder relative to the parent's, its model, its calls, the parent's
    Task tool call, its calls' peak and total prompt tokens, and ``call_index``: the 0-based parent call that
    issued it (None: not found). A figure the import did not record is None (or "")."""

    id: str
    session: str = ""
    model: str = ""
    calls: int | None = None
    parent_tool_call_id: str = ""
    peak_prompt_tokens: int | None = None
    total_prompt_tokens: int | None = None
    call_index: int | None = None


@dataclass(frozen=True)
class ViewSource:
    """What a read-only view is a view of (:attr:`engine.workbench.views.SessionView.source`; None for a ctxbench
    session): the agent's file (``path``, "" when it has none), its format and the agent's name, whether the agent
    is writing it (``live``) and the view follows it, the subagent's folder ("" for a session of its own) and the
    title of the session or view it ran in (``parent``; None: no parent to go back to)."""

    path: str
    format: str = ""
    agent: str = ""
    live: bool = False
    following: bool = False
    subagent: str = ""
    parent: str | None = None


@dataclass(frozen=True)
class SourceRow:
    """One agent session of the Sources list (an :class:`engine.sources.session_summary.SourceEntry` as the list
    shows it): its agent (id and display name), project, session id, file, when it started and was last active
    (ISO), its calls, its last prompt and window (None: unknown) and how full that is, its model, its first
    prompt, the agent's own cost (None: unknown), and whether the agent is writing it now (``live``)."""

    agent: str
    path: str
    agent_name: str = ""
    project: str = ""
    session_id: str = ""
    started: str = ""
    last_activity: str = ""
    calls: int = 0
    last_prompt_tokens: int | None = None
    window: int | None = None
    percent_full: float | None = None
    model: str = ""
    title: str = ""
    agent_cost_usd: float | None = None
    live: bool = False


@dataclass(frozen=True)
class ProblemRow:
    """A file the Sources scan could not read: its agent, its path as found (it may hold bytes that are not UTF-8),
    the path printable (``shown``: such bytes escaped) and why."""

    agent: str
    path: str
    shown: str
    reason: str


__all__ = ["FileRow", "ProblemRow", "SessionRow", "SourceRow", "SubagentMark", "ViewSource"]
