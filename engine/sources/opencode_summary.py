"""The sessions of an OpenCode (or Kilo) SQLite database, summarised for ``ctxbench sources``
(:mod:`engine.sources.discovery`): one :class:`engine.sources.entry.SourceEntry` per top-level session,
its task subagents' child sessions counted with it. A session is read again only when its own rows changed (the
index key :func:`summarize_opencode` compares); each row's JSON is parsed here, never by SQLite."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from engine.sources.entry import SourceEntry
from engine.sources.lazy import LazyModule
from engine.sources.model import dict_at, int_or_none, iso
from engine.sources.session_summary import _loads, _one_line

if TYPE_CHECKING:
    from engine.sources import kilo, opencode, sqlite_read
else:  # imported when a database is read (engine.sources.lazy)
    kilo, opencode, sqlite_read = (LazyModule(n) for n in ("kilo", "opencode", "sqlite_read"))


def opencode_stamp(db: Path) -> list[int] | None:
    """The index key of a database: size and mtime of the database and of its ``-wal`` file; None when gone."""
    try:
        st = db.stat()
    except OSError:
        return None
    try:
        wal = Path(f"{db}-wal").stat()
        wal_key = [wal.st_size, wal.st_mtime_ns]
    except OSError:
        wal_key = [-1, -1]
    return [st.st_size, st.st_mtime_ns, *wal_key]


def summarize_opencode(db: Path, cached: Mapping[str, Any] | None = None,
                       agent: Literal["opencode", "kilo"] = "opencode") -> dict[str, Any]:
    """Every top-level session of an OpenCode database (``agent``: or Kilo's, the same schema) as
    ``{session id: {"key": …, "entry": …}}``; a session whose key is in ``cached`` unchanged is not read again.
    A session that cannot be summarised (a damaged page of its rows, a value of a shape nothing foresaw) is
    ``{"key": …, "problem": reason}``, with the cached ``entry`` when there is one (shown as of the last read);
    the others are summarised all the same. SourceError when the database cannot be read now
    (:class:`engine.sources.sqlite_read.DatabaseBusy` when it stayed locked; else damaged, not OpenCode's: the
    reason)."""
    from engine.sources.model import LINE_ERRORS

    cached = cached or {}

    def work(conn: sqlite3.Connection) -> dict[str, Any]:
        sessions = {str(r["id"]): dict(r) for r in conn.execute("SELECT * FROM session")}
        stats = {str(r[0]): [int_or_none(r[1]) or 0, int_or_none(r[2]) or 0] for r in conn.execute(
            f"SELECT session_id, count(*), max({sqlite_read.time_order('time_updated')}) FROM message "
            "GROUP BY session_id")}
        children: dict[str, list[str]] = {}
        for sid, row in sessions.items():
            parent = row.get("parent_id")
            if parent and parent in sessions:
                children.setdefault(str(parent), []).append(sid)

        def key(sid: str) -> list[Any]:
            return [_key_value(sessions[sid].get("time_updated")), *stats.get(sid, [0, 0])]

        out: dict[str, Any] = {}
        for sid, row in sessions.items():
            if row.get("parent_id") and row["parent_id"] in sessions:
                continue  # a child: counted with its parent
            kids = sorted(children.get(sid, []))
            k = [key(sid), *[key(c) for c in kids]]
            old = cached.get(sid)
            if isinstance(old, dict) and old.get("key") == k and isinstance(old.get("entry"), dict):
                out[sid] = old
                continue
            try:
                entry = _opencode_entry(conn, db, row, [sessions[c] for c in kids], stats.get(sid, [0, 0])[1], agent)
            except sqlite3.DatabaseError as exc:
                if not opencode.is_corrupt(exc):
                    raise  # a lock, a missing column: the database's problem, not this session's
                out[sid] = _session_problem(k, old, f"its rows cannot be read: {exc}")
                continue
            except LINE_ERRORS as exc:
                out[sid] = _session_problem(k, old, f"cannot be summarised ({type(exc).__name__}: {str(exc)[:80]})")
                continue
            out[sid] = {"key": k, "entry": entry.to_json()}
        return out

    return sqlite_read.with_retries(db, work)


def _session_problem(key: list[Any], old: Any, reason: str) -> dict[str, Any]:
    """The index item of a session that could not be summarised: the reason, and its last entry if any."""
    item: dict[str, Any] = {"key": key, "problem": reason}
    if isinstance(old, dict) and isinstance(old.get("entry"), dict):
        item["entry"] = old["entry"]
    return item


def _key_value(value: Any) -> Any:
    """A column's value as the index can keep it (JSON) and compare with the next scan's."""
    return value if value is None or (isinstance(value, int | str) and not isinstance(value, bool)) else repr(value)


def _opencode_entry(conn: sqlite3.Connection, db: Path, row: dict[str, Any], kids: list[dict[str, Any]],
                    newest_message: int, agent: Literal["opencode", "kilo"] = "opencode") -> SourceEntry:
    """One session's row: its calls are the step-finish parts of its assistant messages (not a compaction's
    summary), as :class:`engine.sources.opencode.OpenCodeReader` counts them (a failed message without one is
    a call of unknown size). Each row's JSON is parsed here, never by SQLite (whose ``json_extract`` fails the
    whole query on one malformed row): a row that does not parse is left out."""
    sid = str(row["id"])
    messages = conn.execute("SELECT id, time_created, data FROM message WHERE session_id = ? "
                            f"ORDER BY {sqlite_read.time_order('time_created')}, id", (sid,)).fetchall()
    finishes: dict[str, list[dict[str, Any]]] = {}
    for r in conn.execute("SELECT message_id, data FROM part WHERE session_id = ? AND data LIKE '%step-finish%' "
                          "ORDER BY id", (sid,)):
        part = _loads_value(r[1])
        if part.get("type") == "step-finish":
            finishes.setdefault(str(r[0]), []).append(part)
    calls, last_prompt, model, provider, title = 0, None, "", "", ""
    for m in messages:
        info = _loads_value(m["data"])
        mid = str(m["id"])
        if info.get("role") == "user" and not title:
            title = _opencode_prompt(conn, mid)
        if info.get("role") != "assistant" or info.get("summary") is True:
            continue
        steps = finishes.get(mid, [])
        calls += len(steps) or (1 if info.get("error") else 0)
        model = str(info.get("modelID") or model)
        provider = str(info.get("providerID") or provider)
        for part in steps:
            tokens = dict_at(part, "tokens")
            fresh = int_or_none(tokens.get("input"))
            cache = dict_at(tokens, "cache")
            if fresh is not None:
                last_prompt = fresh + (int_or_none(cache.get("read")) or 0) + (int_or_none(cache.get("write")) or 0)
    dialect = kilo.KILO if agent == "kilo" else opencode.OPENCODE
    costs = [c for c in (dialect.cost(r.get("cost")) for r in [row, *kids]) if c is not None]
    directory = str(row.get("directory") or "")
    updated = max(int_or_none(row.get("time_updated")) or 0, newest_message)
    window = dialect.window(db, provider, model)[0] if dialect.window is not None and model else None
    entry = SourceEntry(agent, Path(directory).name if directory else "", sid,
                        str(opencode.opencode_path(db, sid)), _ms(row.get("time_created")), "", calls, last_prompt,
                        window, round(100.0 * last_prompt / window, 1) if last_prompt is not None and window else None,
                        model, title or _one_line(str(row.get("title") or "")),
                        sum(costs) if costs else None, len(kids))
    entry.last_activity = _ms(updated) or entry.started
    return entry


def _opencode_prompt(conn: sqlite3.Connection, message_id: str) -> str:
    for (raw,) in conn.execute("SELECT data FROM part WHERE message_id = ? ORDER BY id", (message_id,)):
        part = _loads_value(raw)
        text = part.get("text")
        if part.get("type") == "text" and not part.get("ignored") and not part.get("synthetic") and isinstance(
                text, str) and text.strip():
            return _one_line(text)
    return ""


def _loads_value(value: Any) -> dict[str, Any]:
    """A column's JSON object ({} when it is not one)."""
    return _loads(value.encode() if isinstance(value, str) else value if isinstance(value, bytes) else b"")


def _ms(value: Any) -> str:
    ms = int_or_none(value)
    return iso(ms / 1000) if ms is not None and ms > 0 else ""


def session_path(db: Path, session_id: str) -> Path:
    """The source path of one session of a database (``<db>#<session id>``), as the reader names it."""
    return opencode.opencode_path(db, session_id)

