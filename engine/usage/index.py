"""An index of every provider call of every agent session on this machine, queried with embedded DuckDB.

Built from the sources scan (:func:`engine.sources.discovery.scan_sources` lists the session files; each is
read with :func:`engine.sources.readers.read_source`, its subagents' files included). Kept in
``<data dir>/usage/``::

    files.json                      one entry per session file: size + mtime, its days, its session row
    calls/day=YYYY-MM-DD/*.parquet  one row per call (main session, subagents, compaction calls)
    tool_results/day=…/*.parquet    one row per tool result (tool, estimated tokens)
    sessions.parquet                one row per session file (peak fullness, compactions, the agent's own cost)
    call_rollup.parquet             the calls summed per (day, agent, project, session file, model)
    tool_rollup.parquet             per (day, tool, session file): its results (count, tokens, largest) and
                                    the calls that used it (count, cost)

    session_rollup.parquet          one row per session file over all its days (the sessions table's row
                                    joined): what the whole range's session list reads

The queries (:func:`summarize`, :func:`engine.usage.report.usage_report`) read the rollups, not the call
rows: about 1 % of their rows. Each rollup is one file; as every rollup row belongs to one session file, a
write replaces the rows of the files it read (the other rows kept, the new ones summed from the new call
rows alone: no day file is read again). An index without them (written by an older version) gets them built
from its rows on its first query.

Incremental: a file whose size and mtime did not change is not read again; a new or grown file is read
and its rows replace the ones it had (only the days it touches are rewritten, one Parquet file a day). A Claude
Code, Codex or Gemini CLI file that grows while the same :class:`UsageIndex` object lives (the window's) is read
whole once, then only from where its incremental reader stopped (up to :data:`FOLLOWED` files kept); a new
process (``ctxbench usage``) reads a file that grew since the last index whole, once.
A session file that disappears (Claude Code removes old ones) keeps its rows: what was spent stays
spent. A new litellm price table (another litellm version) prices everything again.

Costs come from :mod:`engine.usage.prices`; a call of a model the table does not know has no cost
(``cost_usd`` NULL and ``cost_problem``), never $0. Claude Code's one-hour cache writes
(``usage.cache_creation.ephemeral_1h_input_tokens``) are read from the file by a light pass, as the
readers' :class:`ProviderCall` does not carry them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, Literal

from engine.context.tokens import estimate_message_tokens
from engine.sources.discovery import SourceEntry, scan_sources
from engine.sources.model import ProviderCall, SourceError, SourceFormat, SourceSession, int_or_none, read_on
from engine.sources.readers import read_source
from engine.store.config import Settings, data_dir
from engine.store.fsutil import atomic_write_bytes
from engine.usage.prices import REASONING_SEPARATE, PriceTable, PriceTableError, litellm_version, load_table

INDEX_DIR = "usage"
MANIFEST = "files.json"
INDEX_VERSION = 1
UNKNOWN_DAY = "1970-01-01"  # a call without any time (rare): kept, under this day
FOLLOWED = 8  # growing session files whose readers an index keeps (read from where they stopped)
ACTIVE_SECONDS = 3600  # a session file changed this recently is read by a reader that is kept (it may grow)

GroupBy = Literal["day", "project", "model", "session", "tool", "agent"]
GROUPS: tuple[str, ...] = ("day", "project", "model", "session", "tool", "agent")

CALL_COLUMNS: dict[str, str] = {
    "agent": "VARCHAR", "project": "VARCHAR", "session_id": "VARCHAR", "file_id": "VARCHAR",
    "subagent": "VARCHAR", "kind": "VARCHAR", "call_index": "INTEGER", "request_id": "VARCHAR",
    "model": "VARCHAR", "ts": "TIMESTAMP", "day": "DATE", "prompt_tokens": "BIGINT", "input_tokens": "BIGINT",
    "cache_read_tokens": "BIGINT", "cache_write_tokens": "BIGINT", "cache_write_1h_tokens": "BIGINT",
    "output_tokens": "BIGINT", "reasoning_tokens": "BIGINT", "cost_usd": "DOUBLE", "cost_problem": "VARCHAR",
    "price_key": "VARCHAR", "window": "BIGINT", "tools": "VARCHAR[]",
}
TOOL_COLUMNS: dict[str, str] = {
    "agent": "VARCHAR", "project": "VARCHAR", "session_id": "VARCHAR", "file_id": "VARCHAR",
    "subagent": "VARCHAR", "ts": "TIMESTAMP", "day": "DATE", "tool": "VARCHAR", "tool_call_id": "VARCHAR",
    "tokens": "BIGINT",
}
ROLLUPS = ("call_rollup", "tool_rollup", "session_rollup")
# the rollups' version, in ROLLUP_MARKER: rollups of another version are built again from the rows
# (2: a call's cost split evenly over its tool calls in tool_rollup, as ``ctxbench tools`` splits it)
ROLLUP_VERSION = 2
ROLLUP_MARKER = "rollups-version"
# a call rollup row: (day, agent, project, session_id, file_id, model) and the sums of its calls
_CALL_ROLLUP = """
    SELECT CAST(day AS DATE) AS day, agent, project, session_id, file_id, model,
           any_value(price_key) AS price_key, count(*)::BIGINT AS calls,
           sum(prompt_tokens)::BIGINT AS prompt_tokens, sum(input_tokens)::BIGINT AS input_tokens,
           sum(cache_read_tokens)::BIGINT AS cache_read_tokens, sum(cache_write_tokens)::BIGINT AS cache_write_tokens,
           sum(cache_write_1h_tokens)::BIGINT AS cache_write_1h_tokens, sum(output_tokens)::BIGINT AS output_tokens,
           sum(reasoning_tokens)::BIGINT AS reasoning_tokens, sum(cost_usd) AS cost_usd,
           count(*) FILTER (WHERE cost_usd IS NULL)::BIGINT AS unpriced_calls,
           (count(*) FILTER (WHERE cost_usd IS NOT NULL) = count(*)) AS cost_known,
           min(ts) AS first_call, max(ts) AS last_call, max(prompt_tokens) AS peak_prompt_tokens,
           max(prompt_tokens / nullif("window", 0)) AS peak_fullness,
           count(*) FILTER (WHERE kind = 'compaction')::BIGINT AS compaction_calls
    FROM {source} GROUP BY ALL"""
# a tool rollup row: (day, tool, file_id), its results and the tool calls made (each call's cost split
# evenly over its tool calls: a response calling Read twice and Bash once gives Read 2/3, Bash 1/3)
_TOOL_ROLLUP = """
    WITH r AS (
        SELECT CAST(day AS DATE) AS day, tool, file_id, count(*)::BIGINT AS results,
               sum(tokens)::BIGINT AS result_tokens, max(tokens) AS largest
        FROM {results} GROUP BY ALL),
    u AS (
        SELECT day, tool, file_id, count(*)::BIGINT AS used_calls, sum(share) AS cost_usd_of_calls FROM (
            SELECT CAST(day AS DATE) AS day, unnest(tools) AS tool, file_id, cost_usd / len(tools) AS share
            FROM {calls})
        GROUP BY ALL)
    SELECT coalesce(r.day, u.day) AS day, coalesce(r.tool, u.tool) AS tool, coalesce(r.file_id, u.file_id) AS file_id,
           coalesce(r.results, 0) AS results, r.result_tokens, r.largest, coalesce(u.used_calls, 0) AS used_calls,
           u.cost_usd_of_calls
    FROM r FULL OUTER JOIN u
        ON r.day = u.day AND r.tool IS NOT DISTINCT FROM u.tool AND r.file_id IS NOT DISTINCT FROM u.file_id"""

# a session rollup row: one session file over all its days, from call rollup rows ({calls}) and the
# sessions table ({sessions}); the cache hit rate is left to the query (a ratio of the sums)
_SESSION_ROLLUP = """
    SELECT c.agent, c.project, c.session_id, c.file_id, min(c.first_call) AS first_call,
           max(c.last_call) AS last_call,
           CASE WHEN count(c.model) > 0 THEN array_to_string(list_sort(list_distinct(list(c.model))), ',') END
               AS models,
           coalesce(sum(c.calls), 0)::BIGINT AS calls, sum(c.prompt_tokens)::BIGINT AS prompt_tokens,
           sum(c.input_tokens)::BIGINT AS input_tokens, sum(c.cache_read_tokens)::BIGINT AS cache_read_tokens,
           sum(c.cache_write_tokens)::BIGINT AS cache_write_tokens, sum(c.output_tokens)::BIGINT AS output_tokens,
           sum(c.reasoning_tokens)::BIGINT AS reasoning_tokens, sum(c.cost_usd) AS cost_usd,
           coalesce(sum(c.unpriced_calls), 0)::BIGINT AS unpriced_calls,
           any_value(s.peak_prompt_tokens) AS peak_prompt_tokens, any_value(s.window) AS window,
           any_value(s.peak_fullness) AS peak_fullness, any_value(s.compactions) AS compactions,
           any_value(s.agent_cost_usd) AS agent_cost_usd, any_value(s.title) AS title, any_value(s.path) AS path
    FROM {calls} c LEFT JOIN {sessions} s USING (file_id)
    GROUP BY c.agent, c.project, c.session_id, c.file_id"""

SESSION_COLUMNS: dict[str, str] = {
    "agent": "VARCHAR", "project": "VARCHAR", "session_id": "VARCHAR", "file_id": "VARCHAR", "path": "VARCHAR",
    "title": "VARCHAR", "model": "VARCHAR", "started": "VARCHAR", "last_activity": "VARCHAR", "calls": "BIGINT",
    "compactions": "BIGINT", "window": "BIGINT", "peak_prompt_tokens": "BIGINT", "peak_fullness": "DOUBLE",
    "agent_cost_usd": "DOUBLE",
}


def index_dir() -> Path:
    return data_dir() / INDEX_DIR


def file_id(path: str) -> str:
    return hashlib.sha1(path.encode("utf-8", "surrogatepass")).hexdigest()[:16]


@dataclass
class IndexReport:
    """What one :meth:`UsageIndex.update` did."""

    files: int = 0  # session files the scan listed
    read: int = 0  # new or changed: read
    unchanged: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    calls: int = 0  # call rows written for the files read
    tool_results: int = 0
    days_rewritten: int = 0
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"files": self.files, "read": self.read, "unchanged": self.unchanged,
                "failed": [{"path": p, "reason": r} for p, r in self.failed], "calls": self.calls,
                "tool_results": self.tool_results, "days_rewritten": self.days_rewritten,
                "seconds": round(self.seconds, 3)}


# --------------------------------------------------------------------------- rows of one session file


def _day(ts: str | None, fallback: str) -> str:
    """The day of ``ts`` (naive UTC, from :func:`_ts`; else of ``fallback``), as the index files it; a day that
    is no date: UNKNOWN_DAY."""
    day = (ts or fallback or UNKNOWN_DAY)[:10]
    try:
        date.fromisoformat(day)
    except ValueError:
        return UNKNOWN_DAY
    return day


def _ts(ts: str) -> str | None:
    """An ISO timestamp as naive UTC for DuckDB's TIMESTAMP, or None."""
    if not ts:
        return None
    if len(ts) == 24 and ts[-1] == "Z" and ts[10] == "T" and ts[19] == ".":  # 2026-03-01T10:00:05.123Z (most)
        return f"{ts[:10]} {ts[11:23]}"
    try:
        parsed = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(UTC).replace(tzinfo=None)
    return parsed.isoformat(sep=" ")


def claude_one_hour_writes(path: Path) -> dict[str, int]:
    """{requestId: one-hour cache write tokens} of a Claude Code file (the largest figure seen per request)."""
    found: dict[str, int] = {}
    try:
        with open(path, "rb") as fh:
            _one_hour_of_lines(fh, found)
    except OSError:
        pass
    return found


def _one_hour_of_lines(lines: Any, found: dict[str, int]) -> dict[str, int]:
    """Add the one-hour cache writes of ``lines`` (bytes lines of a Claude Code file) to ``found``."""
    for raw in lines:
        if b"ephemeral_1h_input_tokens" not in raw:
            continue
        try:
            obj = json.loads(raw)
        except ValueError:
            continue
        msg = obj.get("message") if isinstance(obj, dict) else None
        usage = msg.get("usage") if isinstance(msg, dict) else None
        creation = usage.get("cache_creation") if isinstance(usage, dict) else None
        if not isinstance(creation, dict):
            continue
        value = int_or_none(creation.get("ephemeral_1h_input_tokens"))
        request = str(obj.get("requestId") or obj.get("requestRef") or "")
        if value and request:
            found[request] = max(found.get(request, 0), value)
    return found


# the formats whose growth is read from where the last read stopped
INCREMENTAL: tuple[str, ...] = ("claude-code", "codex", "gemini-cli")


@dataclass
class _Followed:
    """A grown session file's incremental reader, kept by a long-lived :class:`UsageIndex` so that the next
    growth is read from where it stopped (only the appended bytes)."""

    reader: Any  # ClaudeCodeReader, CodexReader or GeminiCliReader
    offset: int  # bytes of the file fed to the reader (its partial last line waits inside it)
    inode: int
    tail: bytes = b""  # the last bytes fed: a file rewritten in place does not have them there any more
    one_hour: dict[str, int] = field(default_factory=dict)  # Claude Code: request id -> one-hour cache writes
    partial: bytes = b""  # Claude Code: the last line so far, when it has no newline yet (for the one-hour pass)


def _tool_names(session: SourceSession) -> dict[str, str]:
    names: dict[str, str] = {}
    for msg in session.messages:
        for call in msg.get("tool_calls") or ():
            if isinstance(call, dict):
                fn = call.get("function")
                if isinstance(fn, dict) and isinstance(call.get("id"), str):
                    names[call["id"]] = str(fn.get("name") or "")
    return names


def _tools_of(session: SourceSession, call: ProviderCall) -> list[str]:
    if not 0 <= call.message_index < len(session.messages):
        return []
    msg = session.messages[call.message_index]
    if msg.get("role") != "assistant":
        return []
    out = []
    for tc in msg.get("tool_calls") or ():
        fn = tc.get("function") if isinstance(tc, dict) else None
        if isinstance(fn, dict) and fn.get("name"):
            out.append(str(fn["name"]))
    return out


@dataclass
class FileRows:
    calls: list[dict[str, Any]] = field(default_factory=list)
    tool_results: list[dict[str, Any]] = field(default_factory=list)
    session: dict[str, Any] = field(default_factory=dict)


def rows_of(entry: SourceEntry, session: SourceSession, prices: PriceTable | None, fid: str,
            one_hour_main: dict[str, int] | None = None) -> FileRows:
    """The index rows of one session file, read (its subagents included); ``one_hour_main``: the main file's
    one-hour cache writes when already known (else read from the file)."""
    out = FileRows()
    fmt: SourceFormat = session.format
    reasoning_in_output = fmt not in REASONING_SEPARATE
    fallback = session.started or entry.started or session.last_activity or entry.last_activity
    base = {"agent": entry.agent, "project": entry.project or session.project, "session_id": entry.session_id,
            "file_id": fid}
    parts: list[tuple[str, str, SourceSession]] = [("", "main", session)]
    for sub in session.subagents:
        if sub.session is not None:
            parts.append((sub.id, sub.kind, sub.session))
    peak_prompt, peak_full = 0, 0.0
    window_seen: int | None = None
    in_calls = {id(c) for _, _, part in parts for c in part.calls}
    for sub_id, kind, part in parts:
        if fmt != "claude-code":
            one_hour = {}
        elif sub_id == "" and one_hour_main is not None:
            one_hour = one_hour_main
        else:
            one_hour = claude_one_hour_writes(part.path) if part.path.is_file() else {}
        calls = list(part.calls)
        # a compaction's own call that is no call of any part (OpenCode's summary message; Claude Code's
        # derived from cost-state lines); Claude Code's agent-acompact file is a part already
        calls += [c.cost for c in part.compactions if c.cost is not None and id(c.cost) not in in_calls]
        for call in calls:
            window = call.window or part.window or session.window
            is_main = id(call) in in_calls
            write_1h = one_hour.get(call.request_id)
            if prices is None:
                cost_usd, problem, key = None, "no price table (litellm is not installed)", ""
            else:
                cost = prices.call_cost(call, cache_write_1h_tokens=write_1h, reasoning_in_output=reasoning_in_output)
                cost_usd, problem, key = cost.usd, cost.problem, cost.price_key
            prompt = call.prompt_tokens
            uncached = None if prompt is None else max(0, prompt - (call.cache_read_tokens or 0)
                                                       - (call.cache_write_tokens or 0))
            out.calls.append({
                **base, "subagent": sub_id, "kind": kind if is_main else "compaction", "call_index": call.index,
                "request_id": call.request_id, "model": call.model, "ts": (ts := _ts(call.ts)),
                "day": _day(ts, fallback), "prompt_tokens": prompt, "input_tokens": uncached,
                "cache_read_tokens": call.cache_read_tokens, "cache_write_tokens": call.cache_write_tokens,
                "cache_write_1h_tokens": write_1h, "output_tokens": call.completion_tokens,
                "reasoning_tokens": call.reasoning_tokens, "cost_usd": cost_usd, "cost_problem": problem,
                "price_key": key, "window": window, "tools": _tools_of(part, call) if is_main else [],
            })
            if sub_id == "" and is_main and prompt:
                peak_prompt = max(peak_prompt, prompt)
                if window:
                    window_seen = max(window_seen or 0, window)
                    peak_full = max(peak_full, prompt / window)
        names = _tool_names(part)
        for msg in part.messages:
            if msg.get("role") != "tool":
                continue
            call_id = str(msg.get("tool_call_id") or "")
            ts = _ts(str(msg.get("ts") or ""))
            out.tool_results.append({
                **base, "subagent": sub_id, "ts": ts, "day": _day(ts, fallback),
                "tool": names.get(call_id) or str(msg.get("name") or "") or "(unknown)", "tool_call_id": call_id,
                "tokens": estimate_message_tokens(msg),
            })
    out.session = {
        **base, "path": str(session.path), "title": entry.title, "model": session.model or entry.model,
        "started": session.started or entry.started, "last_activity": session.last_activity or entry.last_activity,
        "calls": len(session.calls), "compactions": len(session.compactions),
        "window": window_seen or session.window or entry.window, "peak_prompt_tokens": peak_prompt or None,
        "peak_fullness": round(peak_full, 6) if peak_full else None,
        "agent_cost_usd": session.agent_cost_usd if session.agent_cost_usd is not None else entry.agent_cost_usd,
    }
    return out


# --------------------------------------------------------------------------- the index


def _stamp(entry: SourceEntry) -> list[Any] | None:
    """What tells that a session changed: the file's size and mtime; for a session inside a database
    (OpenCode's ``opencode.db#ses_…``, whose file changes with every session) the scan's own figures."""
    path = Path(entry.path)
    try:
        st = path.stat()
    except OSError:
        if "#" not in entry.path or not Path(entry.path.split("#", 1)[0]).exists():
            return None
        return [entry.last_activity, entry.calls, entry.last_prompt_tokens]
    return [st.st_size, st.st_mtime_ns]


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One writer at a time (POSIX advisory lock; elsewhere no lock)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as fh:
        try:
            import fcntl
        except ImportError:
            yield
            return
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _empty(columns: Mapping[str, str]) -> str:
    """An empty relation of ``columns`` (name -> DuckDB type), for a table the index holds no file of."""
    return "(SELECT " + ", ".join(f'NULL::{v} AS "{k}"' for k, v in columns.items()) + " LIMIT 0)"


def _copy_to(con: Any, query: str, target: Path, *, keep_empty: bool = True) -> int:
    """Write the rows of ``query`` to the Parquet file ``target``, atomically (a hidden file beside it, renamed
    over it); the rows written. With ``keep_empty`` False, no rows: no file (and ``target`` left as it was)."""
    staged = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        count = int(con.execute(f"COPY ({query}) TO {_sql_str(str(staged))} (FORMAT PARQUET)").fetchone()[0])
        if count or keep_empty:
            os.replace(staged, target)
        else:
            staged.unlink()
    except BaseException:
        with contextlib.suppress(OSError):
            staged.unlink()
        raise
    return count


def _active(path: Path) -> bool:
    """Whether ``path`` changed in the last :data:`ACTIVE_SECONDS`: an agent may be writing it."""
    try:
        return time.time() - path.stat().st_mtime < ACTIVE_SECONDS
    except OSError:
        return False


def _reader(agent: str, path: Path) -> Any:
    """A new incremental reader of ``path`` (a format of :data:`INCREMENTAL`)."""
    if agent == "claude-code":
        from engine.sources.claude_code import ClaudeCodeReader

        return ClaudeCodeReader(path, bulk=True)
    if agent == "codex":
        from engine.sources.codex import CodexReader

        return CodexReader(path)
    from engine.sources.gemini_cli import GeminiCliReader

    return GeminiCliReader(path)


def _sql_str(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


_LIST_SEP = "\x1f"  # joins a list column's items on their way into DuckDB (see UsageIndex._load_rows)
LOAD_BATCH = 20_000  # rows handed to DuckDB at a time


def _text_columns(columns: Mapping[str, str], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """``rows`` as one NumPy array of text (or None) per column, for :meth:`UsageIndex._load_rows`."""
    import numpy as np

    arrays: dict[str, Any] = {}
    for k, kind in columns.items():
        values = [row.get(k) for row in rows]
        if kind.endswith("[]"):
            arrays[k] = np.array([_LIST_SEP.join(v) if v else "" for v in values], dtype=object)
        else:  # the "" keeps a column of only None as text
            arrays[k] = np.array([v if v is None or isinstance(v, str) else repr(v) for v in values] + [""],
                                 dtype=object)[:-1]
    return arrays


class UsageIndex:
    """The usage index in ``root`` (default ``<data dir>/usage``)."""

    def __init__(self, root: Path | None = None, *, prices: PriceTable | None = None) -> None:
        self.root = Path(root) if root is not None else index_dir()
        self._prices = prices
        # incremental readers of Claude Code files that grew while this object lived (most recent last):
        # the next growth of such a file is read from where its reader stopped, not whole
        self._followed: dict[str, _Followed] = {}
        self._db: Any = None  # the in-memory DuckDB database of the writes (see _connection)
        self._db_lock = threading.Lock()

    def _read(self, entry: SourceEntry, grew: bool) -> tuple[SourceSession, dict[str, int] | None]:
        """The session of ``entry`` and, for Claude Code, its main file's one-hour cache writes. A Claude Code,
        Codex or Gemini CLI file that grew, or that changed in the last :data:`ACTIVE_SECONDS` (a session in
        progress), is read by an incremental reader kept for it (at most :data:`FOLLOWED` of them, the most
        recently read): whole the first time, then only what was appended since (same inode, not shorter,
        the bytes where the last read stopped unchanged)."""
        path = Path(entry.path)
        if entry.agent not in INCREMENTAL or not (grew or entry.path in self._followed or _active(path)):
            self._followed.pop(entry.path, None)
            return read_source(path, entry.agent), None
        kept = self._followed.pop(entry.path, None)
        with open(path, "rb") as fh:
            if kept is not None and not read_on(fh, kept.inode, kept.offset, kept.tail):
                kept = None
            if kept is None:
                kept = _Followed(_reader(entry.agent, path), 0, os.fstat(fh.fileno()).st_ino)
            fh.seek(kept.offset)
            data = fh.read()
        kept.offset += len(data)
        if data:
            kept.tail = (kept.tail + data)[-64:]
        if entry.agent != "claude-code":
            kept.reader.feed(data)
            session: SourceSession = kept.reader.session  # a torn last line waits for its newline
            one_hour = None
        else:
            if kept.reader.bulk:  # the whole file, complete lines: scanned, then built once
                cut = data.rfind(b"\n") + 1
                kept.reader.feed(data[:cut])
                kept.reader.settle()
                if cut < len(data):
                    kept.reader.feed(data[cut:])
            else:
                kept.reader.feed(data)
            lines = kept.partial + data
            cut = lines.rfind(b"\n") + 1
            _one_hour_of_lines(lines[:cut].splitlines(), kept.one_hour)
            kept.partial = lines[cut:]
            session = kept.reader.read_beside(subagents=True)
            one_hour = dict(kept.one_hour)
            if kept.partial:  # the last line so far counts in this read, and is read whole next time
                _one_hour_of_lines([kept.partial], one_hour)
        self._followed[entry.path] = kept
        while len(self._followed) > FOLLOWED:
            self._followed.pop(next(iter(self._followed)))
        return session, one_hour

    # ------------------------------------------------------------------ manifest

    @property
    def manifest_path(self) -> Path:
        return self.root / MANIFEST

    def _load_manifest(self) -> dict[str, Any]:
        try:
            data = json.loads(self.manifest_path.read_bytes())
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or data.get("version") != INDEX_VERSION or not isinstance(
                data.get("files"), dict):
            return {}
        return data

    def prices(self) -> PriceTable | None:
        if self._prices is None:
            try:
                self._prices = load_table()
            except PriceTableError:
                return None
        return self._prices

    # ------------------------------------------------------------------ update

    def update(self, settings: Settings | None = None, *, refresh: bool = False,
               env: Mapping[str, str] | None = None, home: Path | None = None,
               entries: list[SourceEntry] | None = None) -> IndexReport:
        """Bring the index up to date with the session files on the machine (see the module's doc)."""
        started = time.perf_counter()
        report = IndexReport()
        if entries is None:
            entries = scan_sources(settings, env=env, home=home, index=self.root / "sources-index.json")
        with _locked(self.root / ".lock"):
            self._remove_leftovers()
            manifest = self._load_manifest()
            prices = self.prices()
            version = litellm_version() if prices is not None else ""
            if manifest.get("prices") != version or not manifest:
                refresh = True  # another price table: price everything again; no manifest: start again
            known: dict[str, Any] = {} if refresh else dict(manifest.get("files") or {})
            if refresh:
                self._clear()
            changed: dict[str, FileRows] = {}
            old_days: set[str] = set()
            report.files = len(entries)
            for entry in entries:
                stamp = _stamp(entry)
                if stamp is None:
                    report.failed.append((entry.path, "the file is gone"))
                    continue
                old = known.get(entry.path)
                if isinstance(old, dict) and old.get("stamp") == stamp:
                    report.unchanged += 1
                    continue
                fid = file_id(entry.path)
                try:
                    session, one_hour = self._read(entry, grew=isinstance(old, dict) and not refresh)
                except (SourceError, OSError, ValueError, RecursionError) as exc:
                    self._followed.pop(entry.path, None)
                    report.failed.append((entry.path, str(exc)))
                    continue
                rows = rows_of(entry, session, prices, fid, one_hour)
                changed[fid] = rows
                if isinstance(old, dict):
                    old_days.update(str(d) for d in old.get("days") or ())
                days = sorted({r["day"] for r in rows.calls} | {r["day"] for r in rows.tool_results})
                known[entry.path] = {"stamp": stamp, "file_id": fid, "days": days, "session": rows.session}
                report.read += 1
                report.calls += len(rows.calls)
                report.tool_results += len(rows.tool_results)
            if changed or refresh or not self.manifest_path.exists():
                report.days_rewritten = self._write(changed, old_days)
                manifest = {"version": INDEX_VERSION, "prices": version, "files": known}  # compact: written often
                atomic_write_bytes(self.manifest_path, json.dumps(manifest, ensure_ascii=False,
                                                                  separators=(",", ":")).encode("utf-8"))
        report.seconds = time.perf_counter() - started
        return report

    def _remove_leftovers(self) -> None:
        """What a writer stopped midway left (its lock is ours now): staged files, older versions' folders."""
        for stale in [*self.root.glob(".*.tmp"), *self.root.glob(".tmp-*")]:
            if stale.is_dir():
                shutil.rmtree(stale, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    stale.unlink()

    def _clear(self) -> None:
        for name in ("calls", "tool_results"):
            shutil.rmtree(self.root / name, ignore_errors=True)
        for name in ("sessions", *ROLLUPS):
            with contextlib.suppress(OSError):
                (self.root / f"{name}.parquet").unlink()
        with contextlib.suppress(OSError):
            (self.root / ROLLUP_MARKER).unlink()

    def _connection(self) -> Any:
        """A cursor of the in-memory DuckDB database this object keeps for its writes (made once: a new
        database costs 15–35 ms, a cursor 0.2 ms). Its temporary tables go with the cursor."""
        import duckdb

        with self._db_lock:
            if self._db is None:
                self._db = duckdb.connect()
            return self._db.cursor()

    def _write(self, changed: dict[str, FileRows], old_days: set[str]) -> int:
        """Write the rows of the files read (``changed``: by file id) in place of the rows they had: the days
        either touches rewritten, the rollups' rows of these files replaced, their sessions rows too."""
        self.root.mkdir(parents=True, exist_ok=True)
        fids = set(changed)
        con = self._connection()
        try:
            days: set[str] = set(old_days)
            for table, columns, rows_key in (("calls", CALL_COLUMNS, "calls"),
                                             ("tool_results", TOOL_COLUMNS, "tool_results")):
                rows = [r for fr in changed.values() for r in getattr(fr, rows_key)]
                self._load_rows(con, f"new_{table}", columns, rows)
                days.update(r["day"] for r in rows)
            for table, columns in (("calls", CALL_COLUMNS), ("tool_results", TOOL_COLUMNS)):
                self._rewrite_days(con, table, columns, sorted(days), fids)
            sessions = [fr.session for fr in changed.values() if fr.session]
            self._load_rows(con, "new_sessions", SESSION_COLUMNS, sessions)
            self._replace_rows(con, "sessions", "SELECT * FROM new_sessions", fids)
            if self._rollups_current():
                con.execute("CREATE OR REPLACE TEMP TABLE new_call_rollup AS "
                            + _CALL_ROLLUP.format(source="new_calls"))
                self._replace_rows(con, "call_rollup", "SELECT * FROM new_call_rollup", fids)
                self._replace_rows(con, "tool_rollup", _TOOL_ROLLUP.format(
                    results="new_tool_results", calls="new_calls"), fids)
                self._replace_rows(con, "session_rollup", _SESSION_ROLLUP.format(
                    calls="new_call_rollup", sessions="new_sessions"), fids)
            else:  # a new index, or one written before these rollups: all of them from the day files
                self._write_rollups(con)
        finally:
            con.close()
        return len(days)

    def _replace_rows(self, con: Any, name: str, fresh: str, fids: set[str]) -> None:
        """Rewrite ``<name>.parquet``: its rows of files not in ``fids`` kept, the rows of ``fresh`` added."""
        target = self.root / f"{name}.parquet"
        query = f"SELECT * FROM ({fresh})"
        if target.is_file():
            fid_list = ", ".join(_sql_str(f) for f in sorted(fids)) or "''"
            query = (f"SELECT * FROM read_parquet({_sql_str(str(target))}) WHERE file_id NOT IN ({fid_list}) "
                     f"UNION ALL BY NAME ({query})")
        order = " ORDER BY day" if name in ("call_rollup", "tool_rollup") else ""
        _copy_to(con, f"SELECT * FROM ({query}){order}", target)

    @staticmethod
    def _load_rows(con: Any, name: str, columns: Mapping[str, str], rows: list[dict[str, Any]]) -> None:
        """``rows`` as the temporary table ``name`` of ``columns``: handed to DuckDB as one NumPy array of text per
        column (numbers as their ``repr``, which reads back exactly; a list column as its items joined by
        U+001F), cast to the column's type in SQL, so that DuckDB never guesses a type from a sample."""
        cols = ", ".join(f'"{k}" {v}' for k, v in columns.items())
        con.execute(f"CREATE OR REPLACE TEMP TABLE {name} ({cols})")
        if not rows:
            return
        select = []
        for k, kind in columns.items():
            if kind.endswith("[]"):
                select.append(f"CASE WHEN src.\"{k}\" = '' THEN []::{kind} "
                              f"ELSE string_split(src.\"{k}\", chr(31))::{kind} END")
            else:  # a time that is no time (a file's bad line) is NULL, not a failed write
                cast = "TRY_CAST" if kind in ("TIMESTAMP", "DATE") else "CAST"
                select.append(f"{cast}(src.\"{k}\" AS {kind})")
        insert = f"INSERT INTO {name} SELECT {', '.join(select)} FROM src_{name} AS src"
        for start in range(0, len(rows), LOAD_BATCH):  # in batches: the text of a first index stays small
            con.register(f"src_{name}", _text_columns(columns, rows[start:start + LOAD_BATCH]))
            try:
                con.execute(insert)
            finally:
                con.unregister(f"src_{name}")

    def _rewrite_days(self, con: Any, table: str, columns: Mapping[str, str], days: list[str],
                      fids: set[str]) -> None:
        """Each day in ``days``: its old rows of files not in ``fids`` + the new rows, as one Parquet file (written
        beside the old ones, which then go; a day left without rows goes)."""
        base = self.root / table
        names = ", ".join(f'"{k}"' for k in columns if k != "day")
        fid_list = ", ".join(_sql_str(f) for f in sorted(fids)) or "''"
        for day in days:
            folder = base / f"day={day}"
            old_files = sorted(folder.glob("*.parquet")) if folder.is_dir() else []
            parts = [f"SELECT {names}, DATE {_sql_str(day)} AS day FROM new_{table} WHERE day = DATE {_sql_str(day)}"]
            if old_files:
                listing = "[" + ", ".join(_sql_str(str(f)) for f in old_files) + "]"
                parts.insert(0, f"SELECT {names}, DATE {_sql_str(day)} AS day FROM read_parquet({listing}, "
                                f"hive_partitioning=false) WHERE file_id NOT IN ({fid_list})")
            query = " UNION ALL ".join(parts)
            folder.mkdir(parents=True, exist_ok=True)
            count = _copy_to(con, f"SELECT {names} FROM ({query}) ORDER BY ts NULLS LAST",
                             folder / f"data-{uuid.uuid4().hex[:12]}.parquet", keep_empty=False)
            for old in old_files:
                with contextlib.suppress(FileNotFoundError):
                    old.unlink()
            if not count:
                with contextlib.suppress(OSError):
                    folder.rmdir()

    def _day_files(self, table: str, days: list[str] | None) -> list[str]:
        base = self.root / table
        if days is None:
            return sorted(str(p) for p in base.glob("day=*/*.parquet"))
        return sorted(str(p) for day in days for p in (base / f"day={day}").glob("*.parquet"))

    def _write_rollups(self, con: Any) -> None:
        """Write the rollups from all the call and tool-result rows (written already) and the sessions."""
        sources = {}
        for table, columns in (("calls", CALL_COLUMNS), ("tool_results", TOOL_COLUMNS)):
            files = self._day_files(table, None)
            if files:
                listing = "[" + ", ".join(_sql_str(f) for f in files) + "]"
                sources[table] = f"read_parquet({listing}, hive_partitioning=true, union_by_name=true)"
            else:  # none left
                sources[table] = _empty(columns)
        con.execute("CREATE OR REPLACE TEMP TABLE all_call_rollup AS " + _CALL_ROLLUP.format(source=sources["calls"]))
        sessions_file = self.root / "sessions.parquet"
        if sessions_file.is_file():
            sessions = f"read_parquet({_sql_str(str(sessions_file))})"
        else:
            sessions = _empty(SESSION_COLUMNS)
        tools = _TOOL_ROLLUP.format(results=sources["tool_results"], calls=sources["calls"])
        fresh = {"call_rollup": "SELECT * FROM all_call_rollup ORDER BY day",
                 "tool_rollup": f"SELECT * FROM ({tools}) ORDER BY day",
                 "session_rollup": _SESSION_ROLLUP.format(calls="all_call_rollup", sessions=sessions)}
        for name, query in fresh.items():
            _copy_to(con, query, self.root / f"{name}.parquet")
        atomic_write_bytes(self.root / ROLLUP_MARKER, f"{ROLLUP_VERSION}\n".encode(), durable=False)

    def rebuild_rollups(self) -> None:
        """Write the rollups from all the call and tool-result rows (an index of an older version)."""
        with _locked(self.root / ".lock"):
            con = self._connection()
            try:
                self._write_rollups(con)
            finally:
                con.close()

    # ------------------------------------------------------------------ query

    def _layout(self) -> tuple[bool, ...]:
        """Which of the index's parts exist, and whether its rollups are of this version (a cached connection
        is made again when this changes)."""
        return (any((self.root / "calls").glob("day=*/*.parquet")),
                any((self.root / "tool_results").glob("day=*/*.parquet")),
                *((self.root / f"{name}.parquet").is_file() for name in ("sessions", *ROLLUPS)),
                self._rollups_current())

    def _rollups_current(self) -> bool:
        """Whether every rollup is there, written by this version (:data:`ROLLUP_VERSION`)."""
        try:
            marker = (self.root / ROLLUP_MARKER).read_text().strip()
        except OSError:
            return False
        return marker == str(ROLLUP_VERSION) and all((self.root / f"{n}.parquet").is_file() for n in ROLLUPS)

    def connect(self) -> Any:
        """A DuckDB connection with the views ``calls``, ``tool_results``, ``sessions``, ``call_rollup`` and
        ``tool_rollup`` (empty tables when the index holds none): a cursor of an in-memory database kept per
        index folder for the process, whose views read the files when queried. Close it when done."""
        layout = self._layout()
        if (layout[0] or layout[1]) and not layout[-1]:
            self.rebuild_rollups()  # an index written before these rollups
            layout = self._layout()
        key = (str(self.root.resolve()), layout)
        with _DATABASES_LOCK:
            base = _DATABASES.get(key)
            if base is None:
                base = self._database(layout)
                for old in [k for k in _DATABASES if k[0] == key[0]]:
                    del _DATABASES[old]  # the old layout: dropped (its open cursors keep it alive)
                _DATABASES[key] = base
                while len(_DATABASES) > MAX_DATABASES:
                    del _DATABASES[next(iter(_DATABASES))]
            return base.cursor()

    def _database(self, layout: tuple[bool, ...]) -> Any:
        import duckdb

        con = duckdb.connect()
        for table, columns, there in (("calls", CALL_COLUMNS, layout[0]), ("tool_results", TOOL_COLUMNS, layout[1])):
            pattern = self.root / table / "day=*" / "*.parquet"
            if there:  # every day file is written with the table's columns (no union_by_name: binds 3× faster)
                con.execute(f"CREATE VIEW {table} AS SELECT * REPLACE (CAST(day AS DATE) AS day) FROM "
                            f"read_parquet({_sql_str(str(pattern))}, hive_partitioning=true)")
            else:
                cols = ", ".join(f'"{k}" {v}' for k, v in columns.items())
                con.execute(f"CREATE TABLE {table} ({cols})")
        for name, there in zip(("sessions", *ROLLUPS), layout[2:-1], strict=True):
            path = self.root / f"{name}.parquet"
            if there:  # a view, read when queried (loaded as a table: 40 ms more for a process's first query)
                con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet({_sql_str(str(path))})")
            elif name == "sessions":
                cols = ", ".join(f'"{k}" {v}' for k, v in SESSION_COLUMNS.items())
                con.execute(f"CREATE TABLE sessions ({cols})")
            else:  # the rollup of no rows
                query = {"call_rollup": _CALL_ROLLUP.format(source="calls"),
                         "tool_rollup": _TOOL_ROLLUP.format(results="tool_results", calls="calls"),
                         "session_rollup": _SESSION_ROLLUP.format(calls="call_rollup", sessions="sessions")}[name]
                con.execute(f"CREATE TABLE {name} AS SELECT * FROM ({query}) LIMIT 0")
        return con

    def query(self, by: str = "day", since: date | None = None) -> list[dict[str, Any]]:
        """The figures per group (see :func:`summarize`)."""
        con = self.connect()
        try:
            return summarize(con, by, since)
        finally:
            con.close()

    def totals(self, since: date | None = None) -> dict[str, Any]:
        con = self.connect()
        try:
            rows = _fetch(con, f"SELECT {_SUMS} FROM call_rollup WHERE {_since(since)}")
            return rows[0] if rows else {}
        finally:
            con.close()


# --------------------------------------------------------------------------- queries

_DATABASES: dict[tuple[str, tuple[bool, ...]], Any] = {}  # (index folder, layout) -> its in-memory database
_DATABASES_LOCK = threading.Lock()
MAX_DATABASES = 8


# the figures of a group of ``call_rollup`` rows; sums as BIGINT, not DuckDB's HUGEINT, which turns into Python
# ints 4× slower (and into floats when fetched as NumPy arrays)
_SUMS = """coalesce(sum(calls), 0)::BIGINT AS calls,
    sum(prompt_tokens)::BIGINT AS prompt_tokens, sum(input_tokens)::BIGINT AS input_tokens,
    sum(cache_read_tokens)::BIGINT AS cache_read_tokens, sum(cache_write_tokens)::BIGINT AS cache_write_tokens,
    sum(output_tokens)::BIGINT AS output_tokens, sum(reasoning_tokens)::BIGINT AS reasoning_tokens,
    sum(cost_usd) AS cost_usd, coalesce(sum(unpriced_calls), 0)::BIGINT AS unpriced_calls,
    sum(cache_read_tokens) / nullif(sum(prompt_tokens), 0) AS cache_hit_rate"""


def _since(since: date | None) -> str:
    return "TRUE" if since is None else f"day >= DATE {_sql_str(since.isoformat())}"


_COLUMNAR = {"BIGINT", "INTEGER", "DOUBLE", "VARCHAR", "BOOLEAN", "DATE", "TIMESTAMP"}


def _fetch(con: Any, sql: str) -> list[dict[str, Any]]:
    """The rows of ``sql`` as dicts: dates and times as ISO text, rates and fullness rounded to 6 places.

    Fetched column by column as NumPy arrays when every column is of a plain type (DuckDB's conversion to
    Python objects row by row is most of a 10,000-row query's time); otherwise row by row."""
    cur = con.execute(sql)
    names = [d[0] for d in cur.description]
    types = [str(d[1]) for d in cur.description]
    if not all(t in _COLUMNAR for t in types):
        return _fetch_rows(cur, names)
    import numpy as np

    arrays = cur.fetchnumpy()
    columns: list[list[Any]] = []
    for name, kind in zip(names, types, strict=True):
        arr = arrays[name]
        if kind in ("DATE", "TIMESTAMP"):  # ISO text, made by NumPy (a DATE is a datetime64[us] there too)
            data = arr.data if np.ma.isMaskedArray(arr) else arr
            if kind == "DATE":
                text = np.datetime_as_string(data, unit="D").tolist()
            elif bool(((data.astype("int64") % 1_000_000) != 0).any()):  # as datetime.isoformat writes them
                text = np.datetime_as_string(data, unit="us").tolist()
            else:
                text = np.datetime_as_string(data, unit="s").tolist()
            if np.ma.isMaskedArray(arr):
                text = [None if m else t for t, m in zip(text, np.ma.getmaskarray(arr).tolist(), strict=True)]
            columns.append(text)
            continue
        if kind == "DOUBLE" and name != "cost_usd" and name.endswith(("rate", "fullness")):
            arr = np.round(arr, 6)
        columns.append(arr.tolist())
    return [dict(zip(names, row, strict=True)) for row in zip(*columns, strict=True)]


def _fetch_rows(cur: Any, names: list[str]) -> list[dict[str, Any]]:
    rows: Any = cur.fetchall()
    if not rows:
        return []
    columns = list(zip(*rows, strict=True))
    converted = False
    for k, name in enumerate(names):
        value = next((v for v in columns[k] if v is not None), None)
        if isinstance(value, date | datetime):
            columns[k] = tuple(None if v is None else v.isoformat() for v in columns[k])
        elif isinstance(value, float) and name != "cost_usd" and name.endswith(("rate", "fullness")):
            columns[k] = tuple(None if v is None else round(v, 6) for v in columns[k])
        else:
            continue
        converted = True
    if converted:
        rows = zip(*columns, strict=True)
    return [dict(zip(names, row, strict=True)) for row in rows]


# the columns of a session row, from ``session_rollup`` or from its query over ``call_rollup`` rows
_SESSION_OUT = ("agent, project, session_id, file_id, first_call, last_call, models, calls, prompt_tokens, "
                "input_tokens, cache_read_tokens, cache_write_tokens, output_tokens, reasoning_tokens, cost_usd, "
                "unpriced_calls, cache_read_tokens / nullif(prompt_tokens, 0) AS cache_hit_rate, peak_prompt_tokens, "
                "\"window\", peak_fullness, compactions, agent_cost_usd, title, path")


def session_query(since: date | None, until: date | None, order: str, columns: str = _SESSION_OUT) -> str:
    """The SQL of one row per session file with calls between ``since`` and ``until`` (days, both included;
    None: open), ordered by ``order``: read from ``session_rollup`` for the whole range, else summed from the
    ``call_rollup`` rows of the range; ``columns``: some of :data:`_SESSION_OUT`'s."""
    if since is None and until is None:
        return f"SELECT {columns} FROM session_rollup ORDER BY {order}"
    where = ["TRUE"]
    if since is not None:
        where.append(f"day >= DATE {_sql_str(since.isoformat())}")
    if until is not None:
        where.append(f"day <= DATE {_sql_str(until.isoformat())}")
    calls = f"(SELECT * FROM call_rollup WHERE {' AND '.join(where)})"
    return (f"SELECT {columns} FROM ({_SESSION_ROLLUP.format(calls=calls, sessions='sessions')}) "
            f"ORDER BY {order}")


def summarize(con: Any, by: str = "day", since: date | None = None) -> list[dict[str, Any]]:
    """Figures per group from a :meth:`UsageIndex.connect` connection: calls, tokens (prompt, uncached input,
    cache read / write, output, reasoning), cost (the sum of the known costs; ``unpriced_calls`` counts those
    without), cache hit rate. Per session also peak fullness, compactions and the agent's own cost; per tool
    the tool results' estimated tokens and the calls that used it."""
    where = _since(since)
    if by == "day":
        return _fetch(con, f"SELECT day, {_SUMS} FROM call_rollup WHERE {where} GROUP BY day ORDER BY day")
    if by in ("project", "agent"):
        return _fetch(con, f"SELECT {by}, {_SUMS} FROM call_rollup WHERE {where} GROUP BY {by} "
                           f"ORDER BY cost_usd DESC NULLS LAST, {by}")
    if by == "model":
        return _fetch(con, f"SELECT model, any_value(price_key) AS price_key, {_SUMS} FROM call_rollup "
                           f"WHERE {where} GROUP BY model ORDER BY cost_usd DESC NULLS LAST, model")
    if by == "session":
        return _fetch(con, session_query(since, None, "last_call NULLS FIRST"))
    if by == "tool":
        return _fetch(con, f"""
            WITH results AS (
                SELECT tool, sum(results)::BIGINT AS results, sum(result_tokens)::BIGINT AS result_tokens
                FROM tool_rollup WHERE {where} AND results > 0 GROUP BY tool),
            used AS (
                SELECT tool, sum(used_calls)::BIGINT AS calls, sum(cost_usd_of_calls) AS cost_usd_of_calls
                FROM tool_rollup WHERE {where} AND used_calls > 0 GROUP BY tool)
            SELECT coalesce(r.tool, u.tool) AS tool, coalesce(u.calls, 0) AS calls,
                   coalesce(r.results, 0) AS results, coalesce(r.result_tokens, 0) AS result_tokens,
                   u.cost_usd_of_calls
            FROM results r FULL OUTER JOIN used u ON r.tool = u.tool
            ORDER BY result_tokens DESC, tool""")
    raise ValueError(f"cannot group by {by!r}: one of {', '.join(GROUPS)}")
