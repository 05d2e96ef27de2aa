"""Kilo CLI sessions (Kilo Code's command line, an OpenCode fork): the SQLite database
``${XDG_DATA_HOME:-~/.local/share}/kilo/kilo.db``, read by OpenCode's reader (:mod:`engine.sources.opencode`) in
Kilo's :data:`KILO` dialect. A source path is ``<db>#<session id>`` as for OpenCode; the database alone means its most
recently updated top-level session.

What Kilo (7.7.7) keeps is OpenCode's schema and rows: ``session`` (title, directory, ``path``: the directory
relative to its project's worktree, cost and token totals), ``message`` (assistant ``tokens`` {input = prompt −
cached, output, reasoning, cache {read, write}}, ``cost``, ``mode`` / ``agent``, ``summary: true`` on a compaction's
summary, whose tokens are the summarising call's usage) and ``part`` (text, tool, step-start, ``step-finish`` with
the call's tokens and cost, ``compaction`` with ``auto``); a ``task`` tool call runs a child session (``parent_id``,
named by the call's ``metadata.sessionId``). They are read exactly as OpenCode's. Differences:

- Kilo sends every user message with an ``<environment_details>`` block after its parts (message time, working
  directory, workspace root, and the editor's active file, visible files and open tabs where the message has an
  ``editorContext``), made when the request is built and not stored: :func:`environment_details` makes it again
  from the message's ``time.created`` and the session's ``directory`` and ``path``, the way Kilo 7.7.7 does;
- a model Kilo has no price for (a custom provider's model without ``cost`` in ``kilo.json``) gets a ``cost`` of 0:
  read as unknown, not as free;
- tables of its own (:data:`KILO_TABLES`), left out;
- the window of a custom provider's model is its ``limit.context`` in ``kilo.json``
  (:func:`configured_window`: the user's ``<home>/.config/kilo/kilo.json`` beside a database at
  ``<home>/.local/share/kilo``; elsewhere unknown).

Kilo does not store the system prompt nor the tool definitions it sends (``prefix_label`` says so).
"""

from __future__ import annotations

import datetime as dt
import json
import posixpath
from pathlib import Path
from typing import Any

from engine.sources.model import SourceError, SourceSession, dict_at, int_or_none, read_regular
from engine.sources.opencode import (
    Dialect,
    OpenCodeReader,
    is_opencode_source,
    open_reader,
    read_opencode,
    split_path,
    table_names,
)

# Kilo's own tables, left out on purpose, and why
KILO_TABLES: dict[str, str] = {
    "kilo_board": "the agent board of a session tree (its objective and message counters), not sent to the model",
    "kilo_board_message": "messages agents post on the board of a session tree (the conversation is in the "
                          "message and part rows)",
}
ENV_OPEN = "<environment_details>"


def _message_time(value: Any) -> str:
    """JavaScript's ``new Date(ms).toISOString()`` without its milliseconds, as Kilo writes the message time."""
    ms = int_or_none(value)
    if ms is None:
        return ""
    try:
        return dt.datetime.fromtimestamp(ms // 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError):
        return ""


def environment_details(message: dict[str, Any], parts: list[dict[str, Any]], session: dict[str, Any]) -> str:
    """The ``<environment_details>`` block Kilo 7.7.7 adds to a user message when it sends it ("" when the message
    already holds one as a synthetic text part, or has no creation time): ``Message time`` (its ``time.created``),
    ``Working directory`` (the session's directory), ``Workspace root folder`` (the directory up as many levels as
    the session's ``path`` has parts), then the message's ``editorContext`` (active file, visible files, open
    tabs; its own directory or worktree where it names one)."""
    if any(p.get("type") == "text" and p.get("synthetic") and str(p.get("text") or "").lstrip().startswith(ENV_OPEN)
           for p in parts):
        return ""
    when = _message_time(dict_at(message, "time").get("created"))
    if not when:
        return ""
    directory = session.get("directory")
    context: dict[str, Any] = {}
    if isinstance(directory, str) and directory:
        rel = session.get("path")
        ups = [".."] * len([p for p in rel.split("/") if p]) if isinstance(rel, str) else []
        context = {"directory": directory, "worktree": posixpath.normpath(posixpath.join(directory, *ups))}
    context.update(dict_at(message, "editorContext"))
    lines = [f"Message time: {when}"]
    for key, label in (("directory", "Working directory"), ("worktree", "Workspace root folder"),
                       ("activeFile", "Active file")):
        if context.get(key):
            lines.append(f"{label}: {context[key]}")
    for key, label in (("visibleFiles", "Visible files:"), ("openTabs", "Open tabs:")):
        items = context.get(key)
        if isinstance(items, list) and items:
            lines += [label, *(f"  {item}" for item in items)]
    return "\n".join(["", "", ENV_OPEN, *lines, "</environment_details>"])


CONFIG_BYTES = 4 << 20  # a kilo.json larger than this is not read


def configured_window(db: Path, provider: str, model: str) -> tuple[int | None, str]:
    """(``limit.context``, "kilo.json") of ``provider``/``model`` in the user's ``kilo.json`` beside a database at its
    default place (``<home>/.local/share/kilo/kilo.db`` → ``<home>/.config/kilo/kilo.json``); (None, "") when the
    database is elsewhere, the file is not there or not JSON, or names no such limit."""
    db = Path(db)
    if len(db.parents) < 4 or [p.name for p in db.parents[:3]] != ["kilo", "share", ".local"]:
        return None, ""
    config = db.parents[3] / ".config" / "kilo" / "kilo.json"
    try:
        if config.stat().st_size > CONFIG_BYTES:
            return None, ""
        data = json.loads(read_regular(config))
    except (OSError, SourceError, ValueError, RecursionError):
        return None, ""
    spec = dict_at(dict_at(dict_at(dict_at(data if isinstance(data, dict) else {}, "provider"), provider), "models"),
                   model)
    window = int_or_none(dict_at(spec, "limit").get("context"))
    return (window, "kilo.json") if window else (None, "")


KILO = Dialect("kilo", "Kilo CLI", KILO_TABLES, environment_details, zero_cost_unknown=True, window=configured_window)


def is_kilo_source(path: Path | str) -> bool:
    """True when ``path`` (``<db>#<session id>`` or a database) is an OpenCode-shaped SQLite database of Kilo's:
    one with Kilo's own tables, or named ``kilo*.db`` (also when its tables cannot be read now: the reader then
    says what is wrong with it)."""
    if not is_opencode_source(path):
        return False
    db, _ = split_path(path)
    if db.name.startswith("kilo"):
        return True
    try:
        return bool(set(KILO_TABLES) & set(table_names(db)))
    except SourceError:
        return False


def open_kilo(path: Path, *, subagents: bool = True) -> OpenCodeReader:
    """The polled reader of a Kilo source path: ``<db>#<session id>`` or the database (its latest session)."""
    return open_reader(path, subagents=subagents, dialect=KILO)


def read_kilo(path: Path, *, subagents: bool = True) -> SourceSession:
    """One Kilo session, read whole: ``path`` is ``<db>#<session id>`` or the database (its latest session)."""
    return read_opencode(path, subagents=subagents, dialect=KILO)


__all__ = ["ENV_OPEN", "KILO", "KILO_TABLES", "configured_window", "environment_details", "is_kilo_source", "open_kilo",
           "read_kilo"]
