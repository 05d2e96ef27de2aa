"""OpenCode sessions: the SQLite database ``${XDG_DATA_HOME:-~/.local/share}/opencode/opencode.db`` (WAL mode).

A source path names the database and one session: ``.../opencode.db#ses_…`` (:func:`opencode_path`); the
database's path alone means its most recently updated top-level session. :func:`list_sessions` lists them all.

What OpenCode (1.18) keeps, and how it is read:

- ``session`` rows (id, ``parent_id`` of a child session, title, directory, cost and token totals, times):
  one :class:`SourceSession` per session; children (the ``task`` tool's subagents) are read as
  :class:`SubagentRef`\\ s, linked to the ``task`` call whose ``metadata.sessionId`` names them;
- ``message`` rows (JSON ``data``: ``role``, ``time``, assistant ``tokens``/``cost``/``modelID``/``finish``/
  ``error``, ``summary: true`` on a compaction's summary) and their ``part`` rows (JSON ``data`` by ``type``,
  :data:`READ_PARTS` / :data:`IGNORED_PARTS`): messages in OpenAI chat format the way OpenCode turns them into
  the model's input (``toModelMessages``): user text (not ``ignored``), a compaction part as "What did we do
  so far?", assistant text, reasoning, tool calls each followed by its result;
- usage: one ``step-finish`` part per provider call (a step; 1.18 writes one assistant message per step, older
  versions several steps in one message). OpenCode stores ``tokens.input`` *without* the cached part (its
  ``getUsage`` subtracts ``cache.read`` and ``cache.write`` from the provider's input for every provider but
  Anthropic and Bedrock, whose input already excludes them), so the whole prompt is
  ``input + cache.read + cache.write``;
- compactions: a user message with a ``compaction`` part (``auto``, ``overflow``, ``tail_start_id``: the first
  message kept verbatim), answered by an assistant message with ``summary: true`` (the summary, and what the
  summarising call cost: :attr:`Compaction.cost`, not one of the session's calls).

OpenCode does not store the system prompt nor the tool definitions it sends (``prefix_label`` says so).

The database is only read, while OpenCode writes it, nothing written beside it, a lock waited for a moment
(:mod:`engine.sources.sqlite_read`: how, and why). A row whose JSON does not parse is skipped with its id and read
again at the next poll (OpenCode may be writing it); a row whose time is not one (text, -1, 1e30) is read all the
same, placed by its id, and said in the session's notes. :class:`OpenCodeReader` reads only the rows updated since
its last poll (by ``time_updated``, with a margin for writers that commit out of order; rows without a valid time
always). Kilo's database (:mod:`engine.sources.kilo`) is read the same way, in its :class:`Dialect`.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.model.messages import Message
from engine.sources.model import (
    Compaction,
    ProviderCall,
    Skipped,
    SourceChanges,
    SourceError,
    SourceFormat,
    SourceSession,
    SubagentRef,
    dict_at,
    float_or_none,
    head_regular,
    int_or_none,
    iso,
    json_args,
    shown_path,
)
from engine.sources.sqlite_read import LOCK_WAIT as LOCK_WAIT  # re-exported: named here by the callers of this reader
from engine.sources.sqlite_read import SQLITE_MAGIC, DatabaseBusy, good_time, read_deadline, time_order, with_retries
from engine.sources.sqlite_read import is_busy as is_busy
from engine.sources.sqlite_read import is_corrupt as is_corrupt

COMPACTION_QUESTION = "What did we do so far?"  # what OpenCode sends for a compaction part
SUBTASK_TEXT = "The following tool was executed by the user"  # what it sends for a subtask part
CLEARED_OUTPUT = "[Old tool result content cleared]"  # a pruned tool output (state.time.compacted)
INTERRUPTED_OUTPUT = "[Tool execution was interrupted]"  # a tool call left pending or running

READ_TABLES = frozenset({"session", "message", "part"})
# Tables left out on purpose, and why.
IGNORED_TABLES: dict[str, str] = {
    "event": "the change log of the session, message and part rows (message.updated, message.part.updated, ...): "
             "the rows themselves are read",
    "event_sequence": "the last event number of each session (the event log's counter)",
    "session_message": "the V2 session runner's projection of the conversation; `opencode run` 1.18 writes the "
                       "message and part rows, which are read",
    "session_input": "prompts queued for delivery; a delivered prompt is a user message",
    "session_context_epoch": "the V2 runner's context baseline; not sent as such",
    "session_share": "share links",
    "todo": "the todo list's current state; the todowrite calls and their results are tool parts",
    "project": "the project (worktree) a session belongs to; the session's own directory is read",
    "project_directory": "the project's folders",
    "permission": "tool permissions granted",
    "workspace": "remote workspaces",
    "account": "account credentials (never read)",
    "account_state": "the active account",
    "control_account": "account credentials (never read)",
    "credential": "provider credentials (never read)",
    "migration": "schema migrations applied",
    "data_migration": "data migrations applied",
}
KNOWN_TABLES = READ_TABLES | frozenset(IGNORED_TABLES)


@dataclass(frozen=True)
class Dialect:
    """What tells one agent writing OpenCode's database apart (OpenCode itself, or a fork such as Kilo: see
    :mod:`engine.sources.kilo`): its format name and display name, the tables of its own (left out on purpose,
    and why), what it adds to each user message when sending it that the database does not hold
    (``user_suffix(message data, its part datas, the session row)``: the text, "" for none), whether a
    ``cost`` of 0 means "no price known" (``zero_cost_unknown``: the agent writes 0 for a model without one), and
    where the model's window is configured (``window(database, provider, model)``: (tokens or None, where))."""

    format: SourceFormat
    display: str
    own_tables: Mapping[str, str] = field(default_factory=dict)
    user_suffix: Callable[[dict[str, Any], list[dict[str, Any]], dict[str, Any]], str] | None = None
    zero_cost_unknown: bool = False
    window: Callable[[Path, str, str], tuple[int | None, str]] | None = None

    @property
    def known_tables(self) -> frozenset[str]:
        return KNOWN_TABLES | frozenset(self.own_tables)

    @property
    def prefix_label(self) -> str:
        return f"system prompt and tool definitions ({self.display} does not store them)"

    def cost(self, value: Any) -> float | None:
        """A ``cost`` the database holds, in USD; None when it is none, or 0 where 0 means no price known."""
        usd = float_or_none(value)
        return None if usd is None or (usd == 0 and self.zero_cost_unknown) else usd


OPENCODE = Dialect("opencode", "OpenCode")

READ_PARTS = frozenset({"text", "reasoning", "tool", "step-start", "step-finish", "compaction", "subtask", "file"})
# Part types left out on purpose, and why (counted in ``session.ignored`` as ``part/<type>``).
IGNORED_PARTS: dict[str, str] = {
    "snapshot": "a git snapshot of the work tree OpenCode keeps to undo a step; never sent to the model",
    "patch": "the files a step changed (a git hash and paths); never sent to the model",
    "agent": "an @agent mention in the prompt; its words are in the text part",
    "retry": "a failed attempt of a provider call (its error); the attempt that succeeded has its step-finish",
}
KNOWN_PARTS = READ_PARTS | frozenset(IGNORED_PARTS)

MARGIN_MS = 5_000  # rows updated this long before the newest seen are read again (writers commit out of order)


# --------------------------------------------------------------------------- paths and listing


def opencode_path(db: Path, session_id: str) -> Path:
    """The source path of one session of a database: ``<db>#<session id>``."""
    return Path(f"{db}#{session_id}")


def split_path(path: Path | str) -> tuple[Path, str | None]:
    """(database, session id or None for its most recent top-level session) of a source path."""
    text = str(path)
    db, sep, sid = text.rpartition("#")
    if sep and sid.startswith("ses_") and "/" not in sid:
        return Path(db), sid
    return Path(text), None




def is_opencode_source(path: Path | str) -> bool:
    """True when ``path`` (``<db>#<session id>`` or a database) is an SQLite database with OpenCode's session,
    message and part tables, or an SQLite database whose tables cannot be read now (locked, damaged): the reader
    then says what is wrong with it (an SQLite file is no other format's). Never opens a FIFO or a device."""
    db, _ = split_path(path)
    try:
        if head_regular(db, 16) != SQLITE_MAGIC:
            return False
    except (OSError, SourceError):
        return False
    try:
        return {"session", "message", "part"} <= set(table_names(db))
    except SourceError:
        return True


@dataclass
class OpenCodeSessionInfo:
    """A session as the database lists it (for discovery)."""

    id: str
    title: str
    directory: str
    parent_id: str | None
    created: str
    updated: str
    path: Path  # the source path (``<db>#<id>``)




def _ms_iso(value: Any) -> str:
    ms = int_or_none(value)
    return iso(ms / 1000) if ms is not None and ms > 0 else ""


def _since(column: str) -> str:
    """SQL: the rows changed since the parameter (ms): a good time before it is the only reason to leave a row
    out (a row whose time is not one is always read, so that it is never dropped)."""
    return f"NOT ({good_time(column)} AND {column} < ?)"


def list_sessions(db: Path) -> list[OpenCodeSessionInfo]:
    """Every session of the database, most recently updated first."""
    def work(conn: sqlite3.Connection) -> list[OpenCodeSessionInfo]:
        rows = conn.execute("SELECT id, title, directory, parent_id, time_created, time_updated FROM session "
                            f"ORDER BY {time_order('time_updated')} DESC, id DESC").fetchall()
        return [OpenCodeSessionInfo(str(r["id"]), str(r["title"] or ""), str(r["directory"] or ""),
                                    r["parent_id"], _ms_iso(r["time_created"]), _ms_iso(r["time_updated"]),
                                    opencode_path(db, str(r["id"]))) for r in rows]
    return with_retries(Path(db), work)


def latest_session(db: Path) -> str:
    """The id of the most recently updated top-level session; SourceError when the database has none."""
    def work(conn: sqlite3.Connection) -> str | None:
        row = conn.execute("SELECT id FROM session WHERE parent_id IS NULL "
                           f"ORDER BY {time_order('time_updated')} DESC, id DESC LIMIT 1").fetchone()
        return str(row["id"]) if row else None
    sid = with_retries(Path(db), work)
    if sid is None:
        raise SourceError(f"{shown_path(db)}: the database has no session")
    return sid


def table_names(db: Path) -> list[str]:
    return with_retries(Path(db), lambda conn: [str(r[0]) for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")])


# --------------------------------------------------------------------------- the incremental reader


@dataclass
class _Row:
    id: str
    created: int | None  # None: the row's time_created is no time (``bad`` says what it was)
    updated: int | None
    data: dict[str, Any] | None  # None: the JSON did not parse (yet)
    message_id: str = ""
    bad: str = ""  # the row's time columns that hold no time, for a note ("" when both are times)

    @classmethod
    def of(cls, r: sqlite3.Row, message_id: str = "") -> _Row:
        created, updated = int_or_none(r["time_created"]), int_or_none(r["time_updated"])
        bad = [f"{name} {r[name]!r}"[:80] for name, value in (("time_created", created), ("time_updated", updated))
               if value is None]
        return cls(str(r["id"]), created, updated, _parse(r["data"]), message_id, ", ".join(bad))


def _in_order(rows: Iterable[_Row]) -> list[_Row]:
    """Rows by (time_created, id); a row whose time_created is no time goes where its id puts it (OpenCode's ids
    ascend with time): after the rows of smaller ids."""
    keyed = []
    last = 0
    for row in sorted(rows, key=lambda r: r.id):
        last = row.created if row.created is not None else last
        keyed.append((row.created if row.created is not None else last, row.id, row))
    return [row for _, _, row in sorted(keyed, key=lambda k: (k[0], k[1]))]


@dataclass
class _Step:
    texts: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    results: list[Message] = field(default_factory=list)
    finish: _Row | None = None
    ts: str = ""


class OpenCodeReader:
    """One OpenCode session, read incrementally: :meth:`poll` reads the rows updated since the last poll and
    returns what changed in :attr:`session` (messages, calls, compactions and child sessions are rebuilt from
    the rows kept in memory; only the rows are read again)."""

    def __init__(self, db_path: Path, session_id: str, *, subagents: bool = True, dialect: Dialect = OPENCODE) -> None:
        self.db = Path(db_path)
        self.session_id = session_id
        self.subagents = subagents
        self.dialect = dialect
        self.session = SourceSession(dialect.format, opencode_path(self.db, session_id), session_id)
        self._info: dict[str, Any] = {}
        self._messages: dict[str, _Row] = {}
        self._parts: dict[str, _Row] = {}
        self._children: dict[str, OpenCodeReader] = {}
        self._tables: list[str] = []
        self._v2_rows = 0
        self._mark = 0  # the newest time_updated seen (ms)
        self._unparsed = 0  # oldest time_updated of a row whose JSON did not parse (0: none)
        self.polls = 0
        self.problem = ""  # why the last poll could not read the database ("" when it could); the session is
        # then as the last good poll left it
        self.busy = False  # that problem is a lock held by another process (DatabaseBusy), not a broken database
        self.failing_since: float | None = None  # time.monotonic() of the first poll that failed in a row

    # ------------------------------------------------------------------ reading rows
    def _fetch(self, conn: sqlite3.Connection, since: int) -> tuple[dict[str, Any] | None, list[_Row], list[_Row],
                                                                    int, int, list[str], int]:
        info = conn.execute("SELECT * FROM session WHERE id = ?", (self.session_id,)).fetchone()
        msgs = [_Row.of(r) for r in conn.execute("SELECT id, time_created, time_updated, data FROM message "
                                                 f"WHERE session_id = ? AND {_since('time_updated')}",
                                                 (self.session_id, since))]
        parts = [_Row.of(r, str(r["message_id"]))
                 for r in conn.execute("SELECT id, message_id, time_created, time_updated, data FROM part "
                                       f"WHERE session_id = ? AND {_since('time_updated')}", (self.session_id, since))]
        n_msgs = conn.execute("SELECT count(*) FROM message WHERE session_id = ?", (self.session_id,)).fetchone()[0]
        n_parts = conn.execute("SELECT count(*) FROM part WHERE session_id = ?", (self.session_id,)).fetchone()[0]
        children = [str(r[0]) for r in conn.execute(
            f"SELECT id FROM session WHERE parent_id = ? ORDER BY {time_order('time_created')}, id",
            (self.session_id,))]
        if not self._tables:
            self._tables = [str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        v2 = 0
        if "session_message" in self._tables:
            v2 = conn.execute("SELECT count(*) FROM session_message WHERE session_id = ?",
                              (self.session_id,)).fetchone()[0]
        return (dict(info) if info else None), msgs, parts, int(n_msgs), int(n_parts), children, int(v2)

    def poll(self) -> SourceChanges:
        """Read what changed since the last poll, waiting at most :data:`LOCK_WAIT` in all for a locked database.

        The first poll raises SourceError (:class:`DatabaseBusy` when locked) when the session cannot be read.
        A later one that cannot (locked, damaged, removed, the session gone) changes nothing and says why in
        :attr:`problem` (:attr:`busy` for a lock, :attr:`failing_since`); the next poll tries again."""
        self.polls += 1
        first = self.polls == 1
        since = self._since()
        deadline = read_deadline(self.db)
        try:
            fetched = with_retries(self.db, lambda conn: self._fetch(conn, since), deadline=deadline)
            if fetched[0] is None:
                raise SourceError(f"{shown_path(self.db)}: no session {self.session_id}")
        except SourceError as exc:
            if first:
                raise
            return self._failed(exc)
        self.problem, self.busy, self.failing_since = "", False, None
        info, msgs, parts, n_msgs, n_parts, children, v2 = fetched
        reset = False
        merged_m = self._merge(self._messages, msgs)
        merged_p = self._merge(self._parts, parts)
        if len(self._messages) != n_msgs or len(self._parts) != n_parts:
            # rows were deleted (a revert, a deleted message): read the session whole again
            try:
                fetched = with_retries(self.db, lambda conn: self._fetch(conn, 0), deadline=deadline)
            except SourceError as exc:
                if first:
                    raise
                self._mark = 0  # read whole at the next poll
                return self._failed(exc)
            info, msgs, parts, n_msgs, n_parts, children, v2 = fetched
            self._messages = {r.id: r for r in msgs}
            self._parts = {r.id: r for r in parts}
            reset = merged_m = merged_p = True
        self._note_marks()
        info_changed = info != self._info
        self._info = info or {}
        self._v2_rows = v2
        child_changed = self._poll_children(children)
        if not (first or reset or merged_m or merged_p or info_changed or child_changed):
            return self._unchanged()
        old = self.session
        self.session = self._build()
        if first or reset:
            return SourceChanges(reset=not first and reset)
        return _diff(old, self.session, child_changed)

    def _failed(self, exc: SourceError) -> SourceChanges:
        self.problem, self.busy = str(exc), isinstance(exc, DatabaseBusy)
        if self.failing_since is None:
            self.failing_since = time.monotonic()
        return self._unchanged()

    def _unchanged(self) -> SourceChanges:
        s = self.session
        return SourceChanges(len(s.messages), len(s.calls), [], len(s.compactions), len(s.subagents))

    def _since(self) -> int:
        if self.polls == 1 or not self._mark:
            return 0
        since = self._mark - MARGIN_MS
        return min(since, self._unparsed) if self._unparsed else since

    @staticmethod
    def _merge(store: dict[str, _Row], rows: Iterable[_Row]) -> bool:
        changed = False
        for row in rows:
            old = store.get(row.id)
            if old is None or old.updated != row.updated or old.data != row.data:
                if row.data is None and old is not None and old.data is not None:
                    continue  # keep the last version that parsed; this one is read again next poll
                store[row.id] = row
                changed = True
        return changed

    def _note_marks(self) -> None:
        rows = [*self._messages.values(), *self._parts.values()]
        self._mark = max((r.updated for r in rows if r.updated is not None), default=0)
        bad = [r.updated for r in rows if r.data is None and r.updated is not None]  # no time: read every poll
        self._unparsed = min(bad) if bad else 0

    def _poll_children(self, children: list[str]) -> bool:
        if not self.subagents:
            return False
        changed = False
        for cid in children:
            reader = self._children.get(cid)
            if reader is None:
                reader = self._children[cid] = OpenCodeReader(self.db, cid, subagents=True, dialect=self.dialect)
                changed = True
            try:
                result = reader.poll()
            except SourceError:
                continue
            changed = changed or not result.nothing(reader.session)
        return changed

    # ------------------------------------------------------------------ building the session
    def _build(self) -> SourceSession:
        info = self._info
        dialect = self.dialect
        s = SourceSession(dialect.format, opencode_path(self.db, self.session_id), self.session_id)
        s.cwd = str(info.get("directory") or "")
        s.project = Path(s.cwd).name if s.cwd else ""
        s.started = _ms_iso(info.get("time_created"))
        s.last_activity = _ms_iso(info.get("time_updated"))
        s.prefix_label = dialect.prefix_label
        s.agent_cost_usd = dialect.cost(info.get("cost"))
        if s.agent_cost_usd is None and float_or_none(info.get("cost")) == 0:
            s.notes.append(f"cost: {dialect.display} wrote 0 (no price known to it for the model): unknown")
        s.aggregate = {k: int_or_none(info.get(k)) for k in ("tokens_input", "tokens_output", "tokens_reasoning",
                                                            "tokens_cache_read", "tokens_cache_write") if k in info}
        s.notes.append(f"title: {info.get('title') or ''}")
        for table in self._tables:
            if table not in dialect.known_tables and not table.startswith("sqlite_"):
                s.skipped.append(Skipped(0, f"table {table!r} of this {dialect.display} version is not known"))
        if self._v2_rows:
            s.ignored["table/session_message"] = self._v2_rows
            s.notes.append(f"{self._v2_rows} session_message row(s) (OpenCode's V2 runner) not read")
        by_message: dict[str, list[_Row]] = {}
        for part in self._parts.values():
            by_message.setdefault(part.message_id, []).append(part)
        builder = _Builder(s, {cid: r.session for cid, r in self._children.items()}, self.db, dialect, info)
        for row in _in_order([*self._messages.values(), *self._parts.values()]):
            if row.bad:
                kind = "part" if row.message_id else "message"
                s.notes.append(f"{kind} {row.id}: {row.bad} is not a time (read all the same, placed by its id)")
        for msg in _in_order(self._messages.values()):
            builder.message(msg, sorted(by_message.pop(msg.id, []), key=lambda r: r.id))
        for orphans in by_message.values():
            for part in orphans:
                s.skipped.append(Skipped(0, f"part {part.id}: its message {part.message_id} is not there (yet)"))
        builder.finish()
        if dialect.window is not None and s.model:
            s.window, s.window_source = dialect.window(self.db, builder.provider, s.model)
        return s


def _parse(raw: Any) -> dict[str, Any] | None:
    try:
        obj = json.loads(raw) if isinstance(raw, str | bytes) else None
    except (ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None


def _first_diff(a: list[Any], b: list[Any]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def _diff(old: SourceSession, new: SourceSession, child_changed: bool) -> SourceChanges:
    changes = SourceChanges()
    changes.messages_from = _first_diff(old.messages, new.messages)
    if changes.messages_from == min(len(old.messages), len(new.messages)):
        changes.messages_from = len(old.messages) if len(new.messages) >= len(old.messages) else len(new.messages)
    if len(new.calls) < len(old.calls):
        return SourceChanges(reset=True)
    changes.calls_from = len(old.calls)
    changes.calls_updated = [i for i in range(len(old.calls)) if old.calls[i] != new.calls[i]]
    changes.compactions_from = _first_diff(old.compactions, new.compactions)
    first_sub = _first_diff([(r.id, r.parent_tool_call_id) for r in old.subagents],
                            [(r.id, r.parent_tool_call_id) for r in new.subagents])
    if child_changed:
        first_sub = min(first_sub, _first_child_change(old, new))
    changes.subagents_from = first_sub
    return changes


def _first_child_change(old: SourceSession, new: SourceSession) -> int:
    """The first child whose session was rebuilt (a child reader replaces its session when it changes)."""
    for i, (a, b) in enumerate(zip(old.subagents, new.subagents, strict=False)):
        if a.session is not b.session:
            return i
    return min(len(old.subagents), len(new.subagents))


class _Builder:
    """Messages, calls and compactions from the rows, in order."""

    def __init__(self, session: SourceSession, children: dict[str, SourceSession], db: Path,
                 dialect: Dialect = OPENCODE, info: dict[str, Any] | None = None) -> None:
        self.s = session
        self.children = children
        self.db = db
        self.dialect = dialect
        self.info = info or {}  # the session row
        self.first_index: dict[str, int] = {}  # OpenCode message id -> index of its first message
        self.pending: Compaction | None = None  # a compaction waiting for its first call after it
        self.open: dict[str, Compaction] = {}  # compaction user message id -> its compaction
        self.linked: set[str] = set()
        self.provider = ""  # the provider of the last assistant message's model

    # ------------------------------------------------------------------ per message
    def message(self, row: _Row, parts: list[_Row]) -> None:
        s = self.s
        s.lines += 1 + len(parts)
        if row.data is None:
            s.skipped.append(Skipped(0, f"message {row.id}: data not JSON (yet: {self.dialect.display} may still "
                                        "be writing it)", damaged=True))
            return
        info = row.data
        role = info.get("role")
        self.first_index[row.id] = len(s.messages)
        good = []
        for part in parts:
            if part.data is None:
                s.skipped.append(Skipped(0, f"part {part.id}: data not JSON (yet: {self.dialect.display} may still "
                                            "be writing it)", damaged=True))
                continue
            kind = str(part.data.get("type") or "")
            if kind in IGNORED_PARTS:
                s.ignore(f"part/{kind}")
            elif kind not in READ_PARTS:
                s.skipped.append(Skipped(0, f"part {part.id}: unknown part type {kind!r}"))
            else:
                good.append(part)
        ts = _ms_iso(dict_at(info, "time").get("created")) or _ms_iso(row.created)
        if role == "user":
            self._user(row, info, good, ts)
        elif role == "assistant":
            self._assistant(row, info, good, ts)
        else:
            s.skipped.append(Skipped(0, f"message {row.id}: unknown role {role!r}"))

    def _user(self, row: _Row, info: dict[str, Any], parts: list[_Row], ts: str) -> None:
        texts: list[str] = []
        compaction: dict[str, Any] | None = None
        for part in parts:
            data = part.data or {}
            kind = data.get("type")
            if kind == "text":
                if data.get("ignored"):
                    self.s.ignore("part/text (ignored: not sent)")
                else:
                    texts.append(str(data.get("text") or ""))
            elif kind == "file":
                mime = str(data.get("mime") or "")
                if mime in ("text/plain", "application/x-directory"):
                    self.s.ignore("part/file (its text is a text part)")
                else:
                    texts.append(f"[Attached {mime}: {data.get('filename') or 'file'}]")
            elif kind == "compaction":
                compaction = data
                texts.append(COMPACTION_QUESTION)
            elif kind == "subtask":
                texts.append(SUBTASK_TEXT)
            else:
                self.s.skipped.append(Skipped(0, f"part {part.id}: a {kind} part in a user message"))
        if self.dialect.user_suffix is not None and (suffix := self.dialect.user_suffix(
                info, [p.data or {} for p in parts], self.info)):
            texts.append(suffix)
        index = len(self.s.messages)
        if texts:
            self.s.messages.append({"role": "user", "content": "\n".join(texts), "id": row.id, "ts": ts})
        if compaction is not None:
            self._start_compaction(row, compaction, index, ts)

    def _start_compaction(self, row: _Row, part: dict[str, Any], index: int, ts: str) -> None:
        s = self.s
        auto = part.get("auto") is True
        word = "auto" if auto else "manual"
        if part.get("overflow") is True:
            word += " (overflow)"
        start = index
        tail = part.get("tail_start_id")
        if isinstance(tail, str) and tail in self.first_index:
            start = self.first_index[tail]
        before = s.calls[-1].prompt_tokens if s.calls else None
        comp = Compaction(len(s.compactions), "auto" if auto else "manual", word, ts, start, len(s.calls), before)
        comp.messages_after = index - start + 1
        s.compactions.append(comp)
        self.open[row.id] = comp
        self.pending = comp

    def _assistant(self, row: _Row, info: dict[str, Any], parts: list[_Row], ts: str) -> None:
        s = self.s
        finished = bool(dict_at(info, "time").get("completed")) or bool(info.get("error")) or bool(info.get("finish"))
        steps: list[_Step] = [_Step(ts=ts)]
        for part in parts:
            data = part.data or {}
            kind = data.get("type")
            step = steps[-1]
            if kind == "step-start":
                if step.texts or step.reasoning or step.calls or step.finish:
                    steps.append(_Step(ts=_ms_iso(part.created) or ts))
                else:
                    step.ts = _ms_iso(part.created) or ts
            elif kind == "step-finish":
                step.finish = part
            elif kind == "text":
                step.texts.append(str(data.get("text") or ""))
            elif kind == "reasoning":
                step.reasoning.append(str(data.get("text") or ""))
            elif kind == "tool":
                self._tool(part, data, step, finished)
            elif kind == "file":
                step.texts.append(f"[Attached {data.get('mime') or ''}: {data.get('filename') or 'file'}]")
            else:
                s.skipped.append(Skipped(0, f"part {part.id}: a {kind} part in an assistant message"))
        error = info.get("error")
        # OpenCode leaves a failed message out of the model's input (unless it was aborted after some output)
        sent = not error or (dict_at(info, "error").get("name") == "MessageAbortedError" and any(
            st.texts or st.calls or st.reasoning for st in steps))
        summary = info.get("summary") is True
        model = str(info.get("modelID") or "")
        if model:
            s.model = model if not summary else s.model or model
            self.provider = str(info.get("providerID") or self.provider)
        for step in steps:
            index = len(s.messages)
            if sent and (step.texts or step.calls or step.reasoning):
                msg: Message = {"role": "assistant", "content": "".join(step.texts), "id": f"{row.id}:{index}",
                                "ts": step.ts}
                if len(steps) == 1:
                    msg["id"] = row.id
                if step.reasoning:
                    msg["reasoning_content"] = "\n".join(step.reasoning)
                if step.calls:
                    msg["tool_calls"] = step.calls
                s.messages.append(msg)
                s.messages.extend(step.results)
            call = self._call(row, info, step, index) if step.finish is not None else None
            if call is None and error and step is steps[-1] and not any(st.finish for st in steps):
                call = ProviderCall(0, None, None, None, None, model=model, ts=step.ts, message_index=index,
                                    request_id=row.id)
                s.notes.append(f"message {row.id}: the call failed ({dict_at(info, 'error').get('name') or 'error'})")
            if call is None:
                continue
            if summary:
                self._summary(row, info, steps, call, finished)
                continue
            call.index = len(s.calls)
            s.calls.append(call)
            if self.pending is not None and call.prompt_tokens is not None:
                self.pending.tokens_after = call.prompt_tokens
                self.pending = None
        if summary and not any(st.finish for st in steps):
            self._summary(row, info, steps, None, finished)

    def _summary(self, row: _Row, info: dict[str, Any], steps: list[_Step], call: ProviderCall | None,
                 finished: bool) -> None:
        s = self.s
        comp = self.open.get(str(info.get("parentID") or ""))
        if comp is None:  # a summary without its compaction request (older versions): the compaction is here
            self._start_compaction(row, {"auto": False}, len(s.messages), _ms_iso(row.created))
            comp = s.compactions[-1]
            comp.trigger, comp.trigger_source = "unknown", "summary"
            comp.message_index = self.first_index[row.id]
        comp.summary = "".join(t for st in steps for t in st.texts)
        if call is not None:
            comp.cost = call
            comp.cost_usd = _step_cost(steps, self.dialect)
        comp.messages_after = len(s.messages) - comp.message_index
        if finished and not info.get("error"):
            s.live_start = comp.message_index

    def _call(self, row: _Row, info: dict[str, Any], step: _Step, index: int) -> ProviderCall:
        data = (step.finish.data if step.finish else None) or {}
        tokens = dict_at(data, "tokens") or dict_at(info, "tokens")
        cache = dict_at(tokens, "cache")
        fresh, read, write = int_or_none(tokens.get("input")), int_or_none(cache.get("read")), int_or_none(
            cache.get("write"))
        prompt = fresh + (read or 0) + (write or 0) if fresh is not None else None
        return ProviderCall(0, prompt, int_or_none(tokens.get("output")), read, write,
                            model=str(info.get("modelID") or ""),
                            ts=_ms_iso(step.finish.created) if step.finish else step.ts, message_index=index,
                            request_id=step.finish.id if step.finish else row.id,
                            reasoning_tokens=int_or_none(tokens.get("reasoning")))

    def _tool(self, part: _Row, data: dict[str, Any], step: _Step, finished: bool) -> None:
        state = dict_at(data, "state")
        call_id = str(data.get("callID") or part.id)
        name = str(data.get("tool") or "")
        step.calls.append({"id": call_id, "type": "function",
                           "function": {"name": name, "arguments": json_args(state.get("input") or {})}})
        status = state.get("status")
        content: str | None
        if status == "completed":
            content = CLEARED_OUTPUT if dict_at(state, "time").get("compacted") else str(state.get("output") or "")
        elif status == "error":
            meta = dict_at(state, "metadata")
            out = meta.get("output") if meta.get("interrupted") is True else None
            content = out if isinstance(out, str) else str(state.get("error") or "")
        else:
            content = INTERRUPTED_OUTPUT if finished else None  # still running: its result comes later
        end = _ms_iso(dict_at(state, "time").get("end")) or _ms_iso(part.updated)
        if content is not None:
            step.results.append({"role": "tool", "content": content, "tool_call_id": call_id, "name": name,
                                 "id": f"{part.id}:result", "ts": end})
        child = dict_at(state, "metadata").get("sessionId")
        if name == "task" and isinstance(child, str) and child not in self.linked:
            self.linked.add(child)
            self._link(child, call_id)

    def _link(self, child_id: str, call_id: str | None) -> None:
        child = self.children.get(child_id)
        problem = "" if child is not None else f"child session {child_id} is not in the database (yet)"
        self.s.subagents.append(SubagentRef(child_id, "task", opencode_path(self.db, child_id), call_id, child,
                                            problem))

    def finish(self) -> None:
        for cid, child in self.children.items():
            if cid not in self.linked:  # a child session no task call names (yet)
                self.linked.add(cid)
                self.s.subagents.append(SubagentRef(cid, "task", opencode_path(self.db, cid), None, child))
        for m in reversed(self.s.messages):
            if m.get("ts"):
                self.s.last_activity = max(self.s.last_activity, str(m["ts"]))
                break


def _step_cost(steps: list[_Step], dialect: Dialect) -> float | None:
    costs = [dialect.cost((st.finish.data or {}).get("cost")) for st in steps if st.finish is not None]
    known = [c for c in costs if c is not None]
    return sum(known) if known else None


# --------------------------------------------------------------------------- whole reads


def open_reader(path: Path, *, subagents: bool = True, dialect: Dialect = OPENCODE) -> OpenCodeReader:
    """The polled reader of a source path: ``<db>#<session id>`` or the database (its latest session)."""
    db, sid = split_path(path)
    return OpenCodeReader(db, sid or latest_session(db), subagents=subagents, dialect=dialect)


def read_opencode(path: Path, *, subagents: bool = True, dialect: Dialect = OPENCODE) -> SourceSession:
    """One session, read whole: ``path`` is ``<db>#<session id>`` or the database (its latest session)."""
    reader = open_reader(path, subagents=subagents, dialect=dialect)
    reader.poll()
    return reader.session
