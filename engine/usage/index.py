"""An index of every provider call of every agent session on this machine, queried with embedded DuckDB.

Built from the sources scan (:func:`engine.sources.discovery.scan_sources` lists the session files; each is
read with :func:`engine.sources.readers.read_source`, its subagents' files included). A recording proxy's capture
is listed by the scan but not counted here: what it recorded are the calls the agent's own file holds. Kept in
``<data dir>/usage/``::

    files.json                              the manifest: which files make up the index, and the session files read
    calls/day=YYYY-MM-DD/<gen>-<id>.parquet one row per call (main session, subagents, compaction calls) of a day
    tool_results/day=…/<gen>-<id>.parquet   one row per tool result (tool, estimated tokens) of a day
    sessions-<gen>-<id>.parquet             one row per session file (peak fullness, compactions, the agent's own cost)
    call_rollup-<gen>-<id>.parquet          the calls summed per (day, agent, project, session file, model)
    tool_rollup-<gen>-<id>.parquet          per (day, tool, session file): its results (count, tokens, largest) and
                                            the calls that used it (count, cost)
    session_rollup-<gen>-<id>.parquet       one row per session file over all its days (the sessions table's row
                                            joined): what the whole range's session list reads
    .lock                                   one writer at a time (flock; the holder's pid inside)

**The manifest is the index.** Data files are immutable: a write puts new files under fresh names beside the old
ones, then replaces ``files.json`` atomically (fsync'd: :func:`engine.store.fsutil.atomic_write_bytes`). Its first
line names, per table, exactly the Parquet files that make up the index (a file per day of ``calls`` and
``tool_results``, the sessions file, the three rollups), with a generation number and a token of this write; its
second line holds the session files read (size + mtime, their days, their session row). A crash at any moment
leaves the old manifest or the new one, each naming complete files: never a mix. Files no manifest names (the
ones a write replaced, what a killed writer left) are removed after the switch, and as leftovers by the next
writer. Readers (:meth:`UsageIndex.connect`, the queries, :mod:`engine.usage.report`) read the manifest's first
line once and query exactly the files it lists (explicit lists: a user's path is never a glob pattern; a data dir
whose path DuckDB would take for one is reached through a private symbolic link); a reader that loses a race
(a file removed after it read the manifest) tries again on the new manifest. The process's DuckDB database is
kept per manifest token.

**Damage** (a listed file DuckDB cannot read: truncated, flipped bytes, missing, empty, of other columns) is
found when a write or a query fails, named (``IndexReport.warnings``, :attr:`UsageIndex.notices`) and rebuilt:
the file leaves the manifest; the session files whose rows lived in it are marked to be read again from their
sources; the sessions file is written again from the manifest's session rows, the rollups from the day files.

**One bad file never stops the index**: each session file is read and turned into rows on its own; whatever one
raises lands in ``IndexReport.failed`` (path, reason) and the others go on; the scan's unreadable files are
listed there too. A number DuckDB cannot hold becomes NULL (``TRY_CAST``) and is counted
(``IndexReport.bad_values``). Paths that are not UTF-8 are kept exactly in the manifest (JSON escapes) and shown
with their bytes escaped.

**The lock** is taken without blocking, in a loop: after a second, a callback says which process holds it;
after :data:`LOCK_WAIT` seconds the update is given up and the index answers as it is (a warning says so). An index
that cannot be written (read-only data dir) answers as it is; when session files changed since it was written,
one warning says so.

The queries (:func:`summarize`, :func:`engine.usage.report.usage_report`) read the rollups, not the call rows:
about 1 % of their rows. As every rollup row belongs to one session file, a write replaces the rows of the files
it read (the other rows kept, the new ones summed from the new call rows alone: no day file is read again).
Rollups of another :data:`ROLLUP_VERSION` are built in memory by a query and written by the next update.

Incremental: a file whose size and mtime did not change is not read again; a new or grown file is read
and its rows replace the ones it had (only the days it touches are rewritten, one Parquet file a day). A Claude
Code, Codex or Gemini CLI file that grows while the same :class:`UsageIndex` object lives (the window's) is read
whole once, then only from where its incremental reader stopped (up to :data:`FOLLOWED` files kept); a new
process (``ctxbench usage``) reads a file that grew since the last index whole, once. A last line without its
newline is read as it is (the reader is then not kept: the next growth is read whole).
A session file that disappears (Claude Code removes old ones) keeps its rows: what was spent stays
spent. A new litellm price table (another litellm version) prices everything again.

Costs come from :mod:`engine.usage.prices`; a call of a model the table does not know has no cost
(``cost_usd`` NULL and ``cost_problem``), never $0. Claude Code's one-hour cache writes
(``usage.cache_creation.ephemeral_1h_input_tokens``) are read from the file by a light pass, as the
readers' :class:`ProviderCall` does not carry them.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import hashlib
import json
import os
import re
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, Literal, TypeVar

from engine.context.tokens import estimate_message_tokens
from engine.model.text import printable
from engine.sources import formats
from engine.sources import model as _model
from engine.sources.discovery import ScanProblem, SourceEntry, scan_sources
from engine.sources.model import (
    SourceError,
    SourceFormat,
    SourceSession,
    capped_lines,
    damaged_lines,
    int_or_none,
    open_regular,
    read_on,
    shown_path,
)
from engine.sources.readers import read_source
from engine.store.config import Settings, data_dir
from engine.store.fsutil import atomic_write_bytes, fsync_dir
from engine.usage.costs import session_parts
from engine.usage.prices import REASONING_SEPARATE, PriceTable, PriceTableError, litellm_version, load_table
from engine.usage.tool_costs import response_tools

INDEX_DIR = "usage"
MANIFEST = "files.json"
INDEX_VERSION = 2  # 2: the manifest names every data file (1: the files were found by globbing)
LOCK_FILE = ".lock"
LOCK_WAIT = 15.0  # seconds an update waits for another process's update before answering from the index as it is
LOCK_SAY_AFTER = 1.0  # seconds of waiting before the wait is said
UNKNOWN_DAY = "1970-01-01"  # a call without any time (rare): kept, under this day
FOLLOWED = 8  # growing session files whose readers an index keeps (read from where they stopped)
ACTIVE_SECONDS = 3600  # a session file changed this recently is read by a reader that is kept (it may grow)
LIVE_SECONDS = 120  # a first index reads a file changed this recently here, its reader kept (the others: workers)
SETTLED_SECONDS = 2.0  # a file unchanged this long is complete: a last line without its newline is read as it is
# what reading one session file and making its rows may raise: that file is skipped (said), the others go on
FILE_ERRORS: tuple[type[BaseException], ...] = (ValueError, OverflowError, TypeError, KeyError, IndexError,
                                                AttributeError, RecursionError, UnicodeError, SourceError, OSError)

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
ROLLUP_VERSION = 3  # 3: a session's cost in its parts (main, subagents, compaction)
# what the rows of a session file hold; another version reads every session file again (as another price table)
# 2: a project is its folder's full path (no longer its last name); a session without a title: its first prompt
# 3: a call's tools are every tool call of its response (engine.usage.tool_costs.response_tools), not only those
#    of its first message (a Codex response's function calls in several messages)
ROWS_VERSION = 3
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
           count(*) FILTER (WHERE kind = 'compaction')::BIGINT AS compaction_calls,
           count(*) FILTER (WHERE kind = 'task')::BIGINT AS subagent_calls,
           sum(cost_usd) FILTER (WHERE kind = 'main') AS main_cost_usd,
           sum(cost_usd) FILTER (WHERE kind = 'task') AS subagents_cost_usd,
           sum(cost_usd) FILTER (WHERE kind = 'compaction') AS compaction_cost_usd,
           count(*) FILTER (WHERE kind = 'main' AND cost_usd IS NULL)::BIGINT AS main_unpriced,
           count(*) FILTER (WHERE kind = 'task' AND cost_usd IS NULL)::BIGINT AS subagents_unpriced,
           count(*) FILTER (WHERE kind = 'compaction' AND cost_usd IS NULL)::BIGINT AS compaction_unpriced
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
           coalesce(sum(c.subagent_calls), 0)::BIGINT AS subagent_calls,
           coalesce(sum(c.compaction_calls), 0)::BIGINT AS compaction_calls,
           sum(c.main_cost_usd) AS main_cost_usd, sum(c.subagents_cost_usd) AS subagents_cost_usd,
           sum(c.compaction_cost_usd) AS compaction_cost_usd,
           coalesce(sum(c.main_unpriced), 0)::BIGINT AS main_unpriced,
           coalesce(sum(c.subagents_unpriced), 0)::BIGINT AS subagents_unpriced,
           coalesce(sum(c.compaction_unpriced), 0)::BIGINT AS compaction_unpriced,
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
    warnings: list[str] = field(default_factory=list)  # the index answers as it is (busy, read-only), a file rebuilt
    bad_values: int = 0  # rows with a number DuckDB could not hold (stored as NULL)
    # session files read in part: (path, lines that could not be read, the first of them described); said on every
    # update (kept in the manifest), not only when the file is read
    damaged: list[tuple[str, int, str]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"files": self.files, "read": self.read, "unchanged": self.unchanged,
                "failed": [{"path": p, "reason": r} for p, r in self.failed], "calls": self.calls,
                "tool_results": self.tool_results, "days_rewritten": self.days_rewritten,
                "seconds": round(self.seconds, 3), "warnings": list(self.warnings), "bad_values": self.bad_values,
                "damaged": [{"path": p, "lines": n, "first": f} for p, n, f in self.damaged]}


def _said_damaged(report: IndexReport, path: str, damaged: Any) -> None:
    """Add a session file read in part (the manifest's ``[lines, first]``) to ``report``."""
    if isinstance(damaged, list) and len(damaged) == 2 and isinstance(damaged[0], int) and damaged[0] > 0:
        report.damaged.append((shown_path(path), damaged[0], str(damaged[1])))


class UsageIndexError(Exception):
    """The usage index cannot be read or written; the text names the index (and the file) and what was wrong."""


class IndexBusy(UsageIndexError):
    """Another process held the index's lock for longer than the wait."""


class IndexReadOnly(UsageIndexError):
    """The index's folder cannot be written."""


def _reason(exc: BaseException) -> str:
    """What went wrong, in a line (an OSError's own words when it has them)."""
    if isinstance(exc, OSError) and exc.strerror:
        text = exc.strerror
    elif isinstance(exc, RecursionError):
        text = "nested too deeply"
    else:
        text = str(exc) or type(exc).__name__
    return printable(text if isinstance(exc, SourceError | OSError) else f"{type(exc).__name__}: {text}")


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
        with open_regular(path) as fh:
            _one_hour_of_lines(capped_lines(fh, name=path.name), found)
    except (OSError, SourceError):
        pass
    return found


def _one_hour_of_lines(lines: Any, found: dict[str, int]) -> dict[str, int]:
    """Add the one-hour cache writes of ``lines`` (bytes lines of a Claude Code file) to ``found``."""
    for raw in lines:
        if b"ephemeral_1h_input_tokens" not in raw:
            continue
        try:
            obj = _model.loads_line(raw)
        except (ValueError, RecursionError):
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
INCREMENTAL: tuple[str, ...] = formats.names(growth="appended")
COUNTED: tuple[str, ...] = formats.names(in_usage=True)  # what the index counts (see formats.AgentFormat.in_usage)


@dataclass
class _Followed:
    """A grown session file's incremental reader, kept by a long-lived :class:`UsageIndex` so that the next
    growth is read from where it stopped (only the appended bytes)."""

    reader: Any  # ClaudeCodeReader, CodexReader or GeminiCliReader
    offset: int  # bytes of the file fed to the reader (its partial last line waits inside it)
    inode: int
    tail: bytes = b""  # the last bytes fed: a file rewritten in place does not have them there any more
    one_hour: dict[str, int] = field(default_factory=dict)  # Claude Code: request id -> one-hour cache writes
    partial: bytes = b""  # the last line so far, when it has no newline yet


def _tool_names(session: SourceSession) -> dict[str, str]:
    names: dict[str, str] = {}
    for msg in session.messages:
        for call in msg.get("tool_calls") or ():
            if isinstance(call, dict):
                fn = call.get("function")
                if isinstance(fn, dict) and isinstance(call.get("id"), str):
                    names[call["id"]] = str(fn.get("name") or "")
    return names


def project_of(entry: SourceEntry, session: SourceSession) -> str:
    """A session's project: the full path of the folder the agent worked in (two folders of the same name are two
    projects), else what the scan named it."""
    return session.cwd.rstrip("/\\") or session.cwd or entry.project or session.project


def first_prompt(session: SourceSession, limit: int = 120) -> str:
    """The first prompt of a person in ``session`` (one line, cut at ``limit``; not what an agent injects: text in
    ``<tags>``, an attachment, Codex's ``# AGENTS.md instructions``), "" when none."""
    for msg in session.messages:
        content = msg.get("content")
        if msg.get("role") != "user" or msg.get("attachment") or not isinstance(content, str):
            continue
        head = content.lstrip()
        if head and not head.startswith(("<", "# AGENTS.md instructions")):
            flat = " ".join(content.split())
            return flat if len(flat) <= limit else flat[: limit - 1] + "…"
    return ""


@dataclass
class FileRows:
    calls: list[dict[str, Any]] = field(default_factory=list)
    tool_results: list[dict[str, Any]] = field(default_factory=list)
    session: dict[str, Any] = field(default_factory=dict)


# what a worker gives back for one file: its rows and its damaged lines as the manifest keeps them (or None);
# None when its last line has no newline yet (read by the index's own process, which waits for such a line)
FileRows_ = tuple[FileRows, list[Any] | None] | None
_WORKER_PRICES: list[PriceTable | None] = [None]


def _worker_start(prices: PriceTable | None) -> None:
    _WORKER_PRICES[0] = prices


def _bad_said(session: SourceSession) -> list[Any] | None:
    """The damaged lines of ``session`` as the manifest keeps them: [count, the first described], or None."""
    bad = damaged_lines(session)
    return [len(bad), printable(bad[0].describe())] if bad else None


def _rows_of_file(job: tuple[SourceEntry, str]) -> FileRows_:
    """In a worker process: the rows of one session file read whole (``read_source``, its subagents included)."""
    entry, fid = job
    path = Path(entry.path)
    with open_regular(path) as fh:  # a last line without its newline: left to the index's process
        size = os.fstat(fh.fileno()).st_size
        if size:
            fh.seek(size - 1)
            if fh.read(1) != b"\n":
                return None
    session = read_source(path, entry.agent)
    return rows_of(entry, session, _WORKER_PRICES[0], fid), _bad_said(session)


def rows_of(entry: SourceEntry, session: SourceSession, prices: PriceTable | None, fid: str,
            one_hour_main: dict[str, int] | None = None) -> FileRows:
    """The index rows of one session file, read (its subagents included); ``one_hour_main``: the main file's
    one-hour cache writes when already known (else read from the file)."""
    out = FileRows()
    fmt: SourceFormat = session.format
    reasoning_in_output = fmt not in REASONING_SEPARATE
    fallback = session.started or entry.started or session.last_activity or entry.last_activity
    base = {"agent": entry.agent, "project": project_of(entry, session), "session_id": entry.session_id,
            "file_id": fid}
    peak_prompt, peak_full = 0, 0.0
    window_seen: int | None = None
    hours: dict[int, dict[str, int]] = {}  # a part's one-hour cache writes by request (the light pass), if needed
    parts = [("", session), *((s.id, s.session) for s in session.subagents if s.session is not None)]
    # each call's tool calls, by the one rule ctxbench tools splits a response's cost by (a compaction's call derived
    # apart, in no part's calls, has none)
    tools = {id(c): names for _, part in parts
             for c, names in zip(part.calls, response_tools(part.messages, [c.message_index for c in part.calls]),
                                 strict=True)}
    # every call the session paid for, once: the one list engine.usage.costs.source_cost prices too
    for sub_id, kind, part, call in session_parts(session):
        write_1h = call.cache_write_1h_tokens
        if write_1h is None and fmt == "claude-code":
            if id(part) not in hours:
                hours[id(part)] = (one_hour_main if sub_id == "" and one_hour_main is not None else
                                   claude_one_hour_writes(part.path) if part.path.is_file() else {})
            write_1h = hours[id(part)].get(call.request_id)
        window = call.window or part.window or session.window
        if prices is None:
            cost_usd, problem, key = None, "no price table (litellm is not installed)", ""
        else:
            cost = prices.call_cost(call, cache_write_1h_tokens=write_1h, reasoning_in_output=reasoning_in_output)
            cost_usd, problem, key = cost.usd, cost.problem, cost.price_key
        prompt = call.prompt_tokens
        uncached = None if prompt is None else max(0, prompt - (call.cache_read_tokens or 0)
                                                   - (call.cache_write_tokens or 0))
        out.calls.append({
            **base, "subagent": sub_id, "kind": kind, "call_index": call.index,
            "request_id": call.request_id, "model": call.model, "ts": (ts := _ts(call.ts)),
            "day": _day(ts, fallback), "prompt_tokens": prompt, "input_tokens": uncached,
            "cache_read_tokens": call.cache_read_tokens, "cache_write_tokens": call.cache_write_tokens,
            "cache_write_1h_tokens": write_1h, "output_tokens": call.completion_tokens,
            "reasoning_tokens": call.reasoning_tokens, "cost_usd": cost_usd, "cost_problem": problem,
            "price_key": key, "window": window, "tools": tools.get(id(call), []),
        })
        if kind == "main" and prompt:
            peak_prompt = max(peak_prompt, prompt)
            if window:
                window_seen = max(window_seen or 0, window)
                peak_full = max(peak_full, prompt / window)
    for sub_id, part in parts:
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
        **base, "path": str(session.path), "title": entry.title or first_prompt(session),
        "model": session.model or entry.model,
        "started": session.started or entry.started, "last_activity": session.last_activity or entry.last_activity,
        "calls": len(session.calls), "compactions": len(session.compactions),
        "window": window_seen or session.window or entry.window, "peak_prompt_tokens": peak_prompt or None,
        "peak_fullness": round(peak_full, 6) if peak_full else None,
        "agent_cost_usd": session.agent_cost_usd if session.agent_cost_usd is not None else entry.agent_cost_usd,
    }
    return out


# --------------------------------------------------------------------------- the manifest


TABLES = ("calls", "tool_results")  # the tables kept as one file per day
SINGLE = ("sessions", *ROLLUPS)  # the tables kept as one file
_DAY_NAME = re.compile(r"(calls|tool_results)/day=\d{4}-\d\d-\d\d/[0-9]{6}-[0-9a-f]{12}\.parquet")
_SINGLE_NAME = re.compile(r"(sessions|call_rollup|tool_rollup|session_rollup)-[0-9]{6}-[0-9a-f]{12}\.parquet")


@dataclass
class Manifest:
    """What ``files.json`` says: the files that make up the index (names relative to its folder) and, when read
    whole, the session files read. ``valid`` False: no manifest of this version (a new index, an older one, or a
    manifest that could not be read: ``problem``)."""

    valid: bool = False
    generation: int = 0
    token: str = ""
    prices: str | None = None
    rollups: int = 0  # the ROLLUP_VERSION its rollups were written by
    days: dict[str, dict[str, str]] = field(default_factory=lambda: {t: {} for t in TABLES})  # table -> day -> name
    single: dict[str, str] = field(default_factory=dict)  # "sessions" / a rollup -> name
    files: dict[str, Any] = field(default_factory=dict)  # session file path -> {stamp, file_id, days, session}
    problem: str = ""
    sizes: dict[str, int] = field(default_factory=dict)  # data file -> its size as written (a cheap check)

    def listed(self) -> list[str]:
        """Every data file the manifest names (relative names)."""
        return [*(n for t in TABLES for n in self.days[t].values()), *self.single.values()]

    def rollups_current(self) -> bool:
        """Whether every rollup is there, written by this version (:data:`ROLLUP_VERSION`)."""
        return self.rollups == ROLLUP_VERSION and all(name in self.single for name in ROLLUPS)

    def copy(self) -> Manifest:
        return Manifest(self.valid, self.generation, self.token, self.prices, self.rollups,
                        {t: dict(d) for t, d in self.days.items()}, dict(self.single), dict(self.files), self.problem,
                        dict(self.sizes))

    def header(self) -> dict[str, Any]:
        return {"version": INDEX_VERSION, "generation": self.generation, "token": self.token, "prices": self.prices,
                "rollups": self.rollups, "days": self.days, "single": self.single, "sizes": self.sizes}

    def to_bytes(self) -> bytes:
        """Two lines of JSON: the header (what readers read) and the session files. ASCII only (a path that is
        not UTF-8 keeps its surrogate escapes as ``\\\\udcNN``, read back exactly)."""
        head = json.dumps(self.header(), separators=(",", ":"))
        files = json.dumps({"files": self.files}, separators=(",", ":"))
        return f"{head}\n{files}\n".encode("ascii")


def read_manifest(root: Path, *, whole: bool = True) -> Manifest:
    """The manifest of the index in ``root``; with ``whole`` False only its first line (what readers need)."""
    path = root / MANIFEST
    try:
        with open(path, "rb") as fh:
            head = fh.readline()
            rest = fh.readline() if whole else b""
    except FileNotFoundError:
        return Manifest()
    except OSError as exc:
        return Manifest(problem=f"{shown_path(path)}: cannot read: {exc.strerror or exc}")
    try:
        header = json.loads(head)
        if not isinstance(header, dict):
            raise ValueError("not an object")
        if header.get("version") != INDEX_VERSION:
            return Manifest(problem=f"{shown_path(path)}: written by another version ({header.get('version')!r})")
        days = header.get("days")
        single = header.get("single")
        if not isinstance(days, dict) or not isinstance(single, dict):
            raise ValueError("no file list")
        m = Manifest(True, int(header.get("generation") or 0), str(header.get("token") or ""),
                     header.get("prices") if isinstance(header.get("prices"), str) else None,
                     int(header.get("rollups") or 0))
        for table in TABLES:
            listing = days.get(table) or {}
            if not isinstance(listing, dict):
                raise ValueError(f"the {table} list is no object")
            for day, name in listing.items():
                if not isinstance(name, str) or not _DAY_NAME.fullmatch(name) or f"day={day}/" not in name:
                    raise ValueError(f"{name!r} is no day file of the index")
                m.days[table][str(day)] = name
        for kind, name in single.items():
            if kind not in SINGLE or not isinstance(name, str) or not _SINGLE_NAME.fullmatch(name) \
                    or not name.startswith(f"{kind}-"):
                raise ValueError(f"{name!r} is no {kind} file of the index")
            m.single[kind] = name
        sizes = header.get("sizes") or {}
        if isinstance(sizes, dict):
            m.sizes = {str(k): v for k, v in sizes.items() if isinstance(v, int) and not isinstance(v, bool)}
        if whole:
            files = json.loads(rest).get("files")
            if not isinstance(files, dict):
                raise ValueError("no session file list")
            m.files = files
    except (ValueError, TypeError, AttributeError, RecursionError) as exc:
        return Manifest(problem=f"{shown_path(path)}: damaged ({exc}): the index is built again")
    return m


# --------------------------------------------------------------------------- the lock


def _holder(fd: int) -> str:
    """The pid the lock's holder wrote into the lock file, as " (pid N)", or ""."""
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return ""
    return f" (pid {text})" if text.isdigit() else ""


@contextlib.contextmanager
def _locked(path: Path, *, wait: float = LOCK_WAIT, say: Callable[[str], None] | None = None) -> Iterator[None]:
    """One writer at a time: a POSIX advisory lock on ``path`` (elsewhere no lock), taken without blocking in a
    loop. After :data:`LOCK_SAY_AFTER` s ``say`` is told which process holds it; after ``wait`` s IndexBusy. The
    holder's pid is written into the file. IndexReadOnly when the folder or the lock file cannot be written."""
    folder = path.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if not os.access(folder, os.W_OK):
            raise PermissionError(errno.EACCES, "the folder is not writable")
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
    except OSError as exc:
        raise IndexReadOnly(f"the usage index in {shown_path(folder)} is read-only "
                            f"({exc.strerror or exc})") from None
    try:
        try:
            import fcntl
        except ImportError:  # no advisory locks here
            yield
            return
        started = time.monotonic()
        said = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                pass
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise IndexReadOnly(f"the usage index in {shown_path(folder)} cannot be locked "
                                        f"({exc.strerror or exc})") from None
            waited = time.monotonic() - started
            if waited >= wait:
                raise IndexBusy(f"another ctxbench process{_holder(fd)} is updating the usage index in "
                                f"{shown_path(folder)}: gave up waiting after {waited:.0f} s")
            if not said and waited >= LOCK_SAY_AFTER and say is not None:
                say(f"waiting for another ctxbench process{_holder(fd)} that is updating the usage index…")
                said = True
            time.sleep(0.05)
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- helpers


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


def _empty(columns: Mapping[str, str]) -> str:
    """An empty relation of ``columns`` (name -> DuckDB type), for a table the index holds no file of."""
    return "(SELECT " + ", ".join(f'NULL::{v} AS "{k}"' for k, v in columns.items()) + " LIMIT 0)"


def _copy_to(con: Any, query: str, target: Path) -> int:
    """Write the rows of ``query`` to the new Parquet file ``target`` (a fresh name no manifest knows yet: a write
    stopped midway leaves a file nobody reads, removed later); the rows written."""
    try:
        return int(con.execute(f"COPY ({query}) TO {_sql_str(str(target))} (FORMAT PARQUET)").fetchall()[0][0])
    except BaseException:
        with contextlib.suppress(OSError):
            target.unlink()
        raise


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _changed_within(path: Path, seconds: float) -> bool:
    try:
        return time.time() - path.stat().st_mtime < seconds
    except OSError:
        return False


def _active(path: Path) -> bool:
    """Whether ``path`` changed in the last :data:`ACTIVE_SECONDS`: an agent may be writing it."""
    try:
        return time.time() - path.stat().st_mtime < ACTIVE_SECONDS
    except OSError:
        return False


def _reader(agent: str, path: Path) -> Any:
    """A new incremental reader of ``path`` (a format of :data:`INCREMENTAL`)."""
    return formats.appended_reader(agent, path, bulk=True)


def _whole_object(line: bytes) -> bool:
    """Whether ``line`` (a last line without its newline) is a whole JSON object: a line cut while being written
    never is (its braces do not close), so only its newline is missing."""
    if not line.rstrip().endswith(b"}") or len(line) > _model.MAX_LINE_BYTES:
        return False
    try:
        return isinstance(json.loads(line), dict)
    except (ValueError, RecursionError):
        return False


def _sql_str(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


_GLOB_CHARS = re.compile(r"[*?\[\]{},]")
_ALIASES: dict[str, Path] = {}  # index folder -> a private symbolic link to it that DuckDB reads as it is
_ALIAS_LOCK = threading.Lock()


def _duck_folder(root: Path) -> Path:
    """``root`` as DuckDB is given it. DuckDB takes every path it reads as a glob pattern (``[1]`` would match
    ``1``, ``*`` anything), and needs UTF-8 text: a folder whose path has such characters, or is not UTF-8, is
    reached through a symbolic link of a plain name in a private temporary folder (made once per process)."""
    text = str(root.absolute())
    try:
        text.encode("utf-8")
        plain = _GLOB_CHARS.search(text) is None
    except UnicodeEncodeError:
        plain = False
    if plain:
        return Path(text)
    with _ALIAS_LOCK:
        alias = _ALIASES.get(text)
        if alias is None:
            holder = Path(tempfile.mkdtemp(prefix="ctxbench-usage-"))
            alias = holder / "index"
            os.symlink(root.absolute(), alias, target_is_directory=True)
            atexit.register(shutil.rmtree, holder, True)
            _ALIASES[text] = alias
        return alias


def _listing(folder: Path, names: list[str]) -> str:
    """The SQL list of the files ``names`` (relative to the index folder, as DuckDB reaches it)."""
    return "[" + ", ".join(_sql_str(str(folder / n)) for n in names) + "]"


_LIST_SEP = "\x1f"  # joins a list column's items on their way into DuckDB (see UsageIndex._load_rows)
LOAD_BATCH = 20_000  # rows handed to DuckDB at a time
_NUMBERS = ("BIGINT", "INTEGER", "DOUBLE")


def _db_text(text: str) -> str:
    """``text`` as DuckDB can hold it (UTF-8): a lone surrogate (a file name that is not UTF-8, a JSON ``\\\\ud800``)
    shown escaped (``\\\\xff`` for a byte of a file name)."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


_RANGES = {"BIGINT": 2**63, "INTEGER": 2**31}


def _fits(value: Any, kind: str) -> bool:
    """Whether ``value`` (a row's value of a number column) is one DuckDB's ``kind`` holds as it is."""
    if value is None or (isinstance(value, float) and kind == "DOUBLE"):
        return True
    if isinstance(value, bool) or not isinstance(value, int):
        return False
    limit = _RANGES.get(kind)
    return limit is None or -limit <= value < limit


def _all_fit(values: list[Any], kind: str) -> bool:
    """Whether every value of ``values`` (a number column's) is one DuckDB's ``kind`` holds as it is (as
    :func:`_fits` says of each; plain ints within range and floats checked in C, the rest one by one)."""
    present = [v for v in values if v is not None]
    ints = [v for v in present if type(v) is int]
    if kind == "DOUBLE":
        plain = len(ints) + sum(1 for v in present if type(v) is float) == len(present)
    else:
        limit = _RANGES.get(kind)
        plain = len(ints) == len(present) and (limit is None or not ints
                                              or (-limit <= min(ints) and max(ints) < limit))
    return plain or all(_fits(v, kind) for v in values)


def _text_columns(columns: Mapping[str, str], rows: list[dict[str, Any]],
                  suspect: list[bool] | None = None) -> dict[str, Any]:
    """``rows`` as one NumPy array of text (or None) per column, for :meth:`UsageIndex._load_rows`; ``suspect[0]``
    set True when a number column holds a value its type cannot hold as it is."""
    import numpy as np

    arrays: dict[str, Any] = {}
    for k, kind in columns.items():
        values = [row.get(k) for row in rows]
        if suspect is not None and kind in _NUMBERS and not suspect[0]:
            suspect[0] = not _all_fit(values, kind)
        if kind.endswith("[]"):
            arrays[k] = np.array([_db_text(_LIST_SEP.join(map(str, v))) if v else "" for v in values], dtype=object)
        else:  # the "" keeps a column of only None as text
            arrays[k] = np.array([v if v is None else _db_text(v) if isinstance(v, str) else repr(v)
                                  for v in values] + [""], dtype=object)[:-1]
    return arrays


T = TypeVar("T")


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
        self.notices: list[str] = []  # what the queries found and did (a damaged file rebuilt), for the caller to say
        self.lock_wait = LOCK_WAIT  # seconds a repair during a query waits for the lock

    def _read(self, entry: SourceEntry, grew: bool) -> tuple[SourceSession, dict[str, int] | None, bool]:
        """The session of ``entry`` and, for Claude Code, its main file's one-hour cache writes. A Claude Code,
        Codex or Gemini CLI file that grew, or that changed in the last :data:`ACTIVE_SECONDS` (a session in
        progress), is read by an incremental reader kept for it (at most :data:`FOLLOWED` of them, the most
        recently read): whole the first time, then only what was appended since (same inode, not shorter,
        the bytes where the last read stopped unchanged). A file whose last line has no
        newline: while the file changed in the last :data:`SETTLED_SECONDS` (the agent may be writing that line)
        the line waits in the reader and the third value is True (the read is not final: read the file again
        next time); else the line is read as it is and the reader is not kept (the next read is whole)."""
        path = Path(entry.path)
        if entry.agent not in INCREMENTAL or not (grew or entry.path in self._followed or _active(path)):
            self._followed.pop(entry.path, None)
            return read_source(path, entry.agent), None, False
        kept = self._followed.pop(entry.path, None)
        with open_regular(path) as fh:
            if kept is not None and not read_on(fh, kept.inode, kept.offset, kept.tail):
                kept = None
            st = os.fstat(fh.fileno())
            if kept is None:
                kept = _Followed(_reader(entry.agent, path), 0, st.st_ino)
            fh.seek(kept.offset)
            data = fh.read()
        kept.offset += len(data)
        if data:
            kept.tail = (kept.tail + data)[-64:]
        # the last line so far when it has no newline yet (never more than a line's cap)
        lines = kept.partial + data
        cut = lines.rfind(b"\n") + 1
        kept.partial = lines[cut:][:_model.MAX_LINE_BYTES + 1]
        one_hour: dict[str, int] | None = None
        if entry.agent != "claude-code":
            kept.reader.feed(data)
        else:
            if kept.reader.bulk:  # the whole file, complete lines: scanned, then built once
                end = data.rfind(b"\n") + 1
                kept.reader.feed(data[:end])
                kept.reader.settle()
                if end < len(data):
                    kept.reader.feed(data[end:])
            else:
                kept.reader.feed(data)
            _one_hour_of_lines(lines[:cut].splitlines(), kept.one_hour)
            one_hour = dict(kept.one_hour)
            if kept.partial:  # the last line so far counts in this read, and is read whole next time
                _one_hour_of_lines([kept.partial], one_hour)
        if kept.partial:  # a last line without its newline: read as it is when the file has settled or the line is
            # a whole JSON object already (only its newline missing); the file is read again next time unless settled
            settled = time.time() - st.st_mtime >= SETTLED_SECONDS
            if settled or _whole_object(kept.partial):
                return kept.reader.finish(), one_hour, not settled  # (the reader is spent: not kept)
        session: SourceSession = (kept.reader.read_beside(subagents=True) if entry.agent == "claude-code"
                                  else kept.reader.session)
        self._followed[entry.path] = kept
        while len(self._followed) > FOLLOWED:
            self._followed.pop(next(iter(self._followed)))
        return session, one_hour, bool(kept.partial)

    # ------------------------------------------------------------------ manifest

    @property
    def manifest_path(self) -> Path:
        return self.root / MANIFEST

    def manifest(self, *, whole: bool = True) -> Manifest:
        return read_manifest(self.root, whole=whole)

    def prices(self) -> PriceTable | None:
        if self._prices is None:
            try:
                self._prices = load_table()
            except PriceTableError:
                return None
        return self._prices

    def _save(self, manifest: Manifest, written: list[Path]) -> None:
        """Make ``manifest`` the index: the files ``written`` for it and their folders fsync'd, then the manifest
        replaced atomically (fsync'd); then the files no manifest names any more go."""
        # at once, from threads: the file system commits them together (one after the other costs a commit each)
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(_fsync, written))
            list(pool.map(fsync_dir, sorted({p.parent for p in written})))
        fresh = {str(p) for p in written}
        manifest.sizes = {n: (self.root / n).stat().st_size if str(self.root / n) in fresh or n not in manifest.sizes
                          else manifest.sizes[n] for n in manifest.listed()}
        atomic_write_bytes(self.manifest_path, manifest.to_bytes())
        self._sweep(manifest)

    def _sweep(self, manifest: Manifest) -> None:
        """Remove what ``manifest`` does not name: the files a write replaced, what a stopped writer left (staged
        files, older versions' files and folders), empty day folders. Only under the lock."""
        keep = {str(self.root / n) for n in manifest.listed()}
        for stale in [*self.root.glob(".*.tmp"), *self.root.glob(".tmp-*"), self.root / "rollups-version",
                      *self.root.glob("*.parquet")]:
            if str(stale) in keep:
                continue
            if stale.is_dir():
                shutil.rmtree(stale, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    stale.unlink()
        for table in TABLES:
            try:
                folders = list(os.scandir(self.root / table))
            except OSError:
                continue
            for folder in folders:
                try:
                    names = os.listdir(folder.path)
                except OSError:  # not a folder
                    with contextlib.suppress(OSError):
                        os.unlink(folder.path)
                    continue
                left = len(names)
                for name in names:
                    path = os.path.join(folder.path, name)
                    if path not in keep:
                        with contextlib.suppress(OSError):
                            os.unlink(path)
                            left -= 1
                if not left:
                    with contextlib.suppress(OSError):
                        os.rmdir(folder.path)

    # ------------------------------------------------------------------ update

    def update(self, settings: Settings | None = None, *, refresh: bool = False,
               env: Mapping[str, str] | None = None, home: Path | None = None,
               entries: list[SourceEntry] | None = None, say: Callable[[str], None] | None = None,
               lock_wait: float = LOCK_WAIT) -> IndexReport:
        """Bring the index up to date with the session files on the machine (see the module's doc). ``say``:
        told when the update waits for another process's (after a second); after ``lock_wait`` s the update is
        given up. A busy or read-only index answers as it is: ``IndexReport.warnings`` says so. UsageIndexError
        when the index cannot be written for another reason (the text names it)."""
        started = time.perf_counter()
        report = IndexReport()
        if entries is None:
            problems: list[ScanProblem] = []
            entries = scan_sources(settings, env=env, home=home, index=self.root / "sources-index.json",
                                   problems=problems)
            report.failed += [(shown_path(p.path), printable(p.reason)) for p in problems]
        entries = [e for e in entries if e.agent in COUNTED]  # not a proxy's capture: its calls are the agent's own
        report.files = len(entries)
        try:
            with _locked(self.root / LOCK_FILE, wait=lock_wait, say=say):
                self._update_locked(entries, refresh, report)
        except IndexBusy as exc:
            report.warnings.append(f"{exc}; the figures are the index's as it was")
        except IndexReadOnly as exc:
            self._changed_since(entries, report, str(exc))
        report.seconds = time.perf_counter() - started
        return report

    def _changed_since(self, entries: list[SourceEntry], report: IndexReport, why: str) -> None:
        """A read-only index: count the session files changed since it was written (one warning when some did)."""
        known = self.manifest().files
        changed = 0
        for entry in entries:
            old = known.get(entry.path)
            if isinstance(old, dict) and old.get("stamp") == _stamp(entry):
                report.unchanged += 1
            else:
                changed += 1
        if changed:
            report.warnings.append(f"{why}: {changed} session file(s) changed since it was written are not counted; "
                                   "the figures are the index's as it was")

    def _update_locked(self, entries: list[SourceEntry], refresh: bool, report: IndexReport) -> None:
        manifest = self.manifest()
        if manifest.valid:
            self._sweep(manifest)  # what a writer stopped midway left
        elif manifest.problem:
            report.warnings.append(manifest.problem)
        prices = self.prices()
        version = (litellm_version() if prices is not None else "") + f"+rows{ROWS_VERSION}"
        if not manifest.valid or manifest.prices != version:  # (and rows of another ROWS_VERSION: read again)
            refresh = True  # another price table: price everything again; no manifest: start again
        # a refresh reads every session file again over the index it had: a file that cannot be read now (a
        # database locked, a file gone or damaged since) keeps the rows it had, never 0 calls; only with no
        # valid manifest does it start from nothing
        fresh = not manifest.valid
        if refresh:
            self._followed.clear()
        failed_before, warned_before = len(report.failed), len(report.warnings)
        broken = {} if fresh else self._sized_wrong(manifest)  # truncated, emptied, gone: found at once
        for attempt in range(2):
            if fresh:
                base = Manifest(True, manifest.generation, prices=version)
            else:
                base = manifest.copy()
                if refresh:
                    base.files = {path: {**known, "stamp": None} if isinstance(known, dict) else known
                                  for path, known in base.files.items()}
            if broken:
                base = self._without(base, broken, report)
            try:
                self._pass(base, entries, refresh or bool(broken) or not manifest.valid, prices, version, report)
                return
            except IndexReadOnly:
                raise
            except Exception as exc:
                if not (_is_duckdb_error(exc) or isinstance(exc, OSError)):
                    raise
                if not _is_duckdb_error(exc) or attempt:
                    raise UsageIndexError(f"cannot write the usage index in {shown_path(self.root)}: "
                                          f"{printable(exc)}") from None
                more = self._probe(base)  # found when used: what DuckDB could not read
                if not more:
                    raise UsageIndexError(f"cannot write the usage index in {shown_path(self.root)}: "
                                          f"{printable(exc)}") from None
                broken.update(more)
                del report.failed[failed_before:]
                del report.warnings[warned_before:]
                report.read = report.unchanged = report.calls = report.tool_results = report.bad_values = 0

    def _without(self, manifest: Manifest, broken: Mapping[str, str], report: IndexReport | None) -> Manifest:
        """``manifest`` without the ``broken`` files (name -> why): the session files whose rows lived in one are
        marked to be read again (their rows of the other days are replaced then); a broken sessions file is
        written again from the manifest's session rows, broken rollups from the day files. Each said."""
        m = manifest.copy()
        stale = 0
        for name, why in broken.items():
            for table in TABLES:
                for day, listed in list(m.days[table].items()):
                    if listed != name:
                        continue
                    del m.days[table][day]
                    for path, known in list(m.files.items()):
                        if isinstance(known, dict) and day in (known.get("days") or ()) and known.get("stamp"):
                            m.files[path] = {**known, "stamp": None}
                            stale += 1
            for kind, listed in list(m.single.items()):
                if listed == name:
                    del m.single[kind]
            message = f"usage index file {shown_path(self.root / name)} could not be read ({why}): rebuilt"
            if report is not None:
                report.warnings.append(message)
            else:
                self.notices.append(message)
        if stale:
            message = f"{stale} session file(s) whose rows it held are read again"
            (report.warnings if report is not None else self.notices).append(message)
        for kind in ROLLUPS:  # built again from the day files, whichever part was lost
            m.single.pop(kind, None)
        return m

    def _pass(self, base: Manifest, entries: list[SourceEntry], rewrite: bool, prices: PriceTable | None,
              version: str, report: IndexReport) -> None:
        """Read the new and changed session files of ``entries`` and write what changed over ``base`` (all of it
        with ``rewrite``), then switch to the new manifest. Files new to the index are read in worker processes
        when there are many (:meth:`_spread`)."""
        known = base.files
        changed: dict[str, FileRows] = {}
        old_days: set[str] = set()
        todo: list[tuple[SourceEntry, list[Any], Any]] = []
        for entry in entries:
            stamp = _stamp(entry)
            if stamp is None:
                report.failed.append((shown_path(entry.path), "the file is gone"))
                continue
            old = known.get(entry.path)
            if isinstance(old, dict) and old.get("stamp") == stamp:
                report.unchanged += 1
                _said_damaged(report, entry.path, old.get("damaged"))
                continue
            todo.append((entry, stamp, old))
        farmed = self._spread(todo, prices)
        for entry, stamp, old in todo:
            fid = file_id(entry.path)
            try:
                done = next(farmed[entry.path]).result() if entry.path in farmed else None
                if done is not None:  # read whole in a worker, as read_source reads it
                    rows, bad_said, waiting = done[0], done[1], False
                else:
                    session, one_hour, waiting = self._read(entry, grew=isinstance(old, dict))
                    rows = rows_of(entry, session, prices, fid, one_hour)
                    bad_said = _bad_said(session)
                days = sorted({r["day"] for r in rows.calls} | {r["day"] for r in rows.tool_results})
            except FILE_ERRORS as exc:  # this file only: said, the others go on
                self._followed.pop(entry.path, None)
                report.failed.append((shown_path(entry.path), _reason(exc)))
                continue
            changed[fid] = rows
            if isinstance(old, dict):
                old_days.update(str(d) for d in old.get("days") or ())
            # a read that is not final (a last line still being written) is done again next time
            known[entry.path] = {"stamp": None if waiting else stamp, "file_id": fid, "days": days,
                                 "session": rows.session}
            if bad_said is not None:
                known[entry.path]["damaged"] = bad_said
                _said_damaged(report, entry.path, known[entry.path]["damaged"])
            report.read += 1
            report.calls += len(rows.calls)
            report.tool_results += len(rows.tool_results)
        if not (changed or rewrite or not base.rollups_current() or not self.manifest_path.exists()):
            return
        report.days_rewritten = self._write(base, changed, old_days, version, report,
                                            all_sessions="sessions" not in base.single)

    def _spread(self, todo: list[tuple[SourceEntry, list[Any], Any]],
                prices: PriceTable | None) -> dict[str, Iterator[Future[FileRows_]]]:
        """Start reading, in worker processes (:func:`engine.sources.spread.spread`), the files of ``todo`` new to
        the index in a format read by an incremental reader: path -> an iterator whose next item is that file's
        future (:func:`_rows_of_file`). The :data:`FOLLOWED` most recently changed of those an agent may be writing
        (:data:`LIVE_SECONDS`) are left to :meth:`_read` (their readers kept), as are files read before."""
        from engine.sources.spread import spread, workers_for

        new = [(e, s) for e, s, old in todo if e.agent in INCREMENTAL and "#" not in e.path
               and not isinstance(old, dict) and e.path not in self._followed and isinstance(s[0], int)]
        if not workers_for(len(new), sum(s[0] for _, s in new)):
            return {}
        live = [(s[1], e.path) for e, s in new if _changed_within(Path(e.path), LIVE_SECONDS)]
        kept = {p for _, p in sorted(live)[-FOLLOWED:]}
        new = [(e, s) for e, s in new if e.path not in kept]
        futures = spread(_rows_of_file, [(e, file_id(e.path)) for e, _ in new], [s[0] for _, s in new],
                         initializer=_worker_start, initargs=(prices,))
        return {e.path: futures for e, _ in new}

    def _connection(self) -> Any:
        """A cursor of the in-memory DuckDB database this object keeps for its writes (made once: a new
        database costs 15–35 ms, a cursor 0.2 ms). Its temporary tables go with the cursor."""
        import duckdb

        with self._db_lock:
            if self._db is None:
                self._db = duckdb.connect()
            return self._db.cursor()

    def _new_name(self, kind: str, generation: int, day: str = "") -> str:
        stem = f"{generation % 1_000_000:06d}-{uuid.uuid4().hex[:12]}.parquet"
        return f"{kind}/day={day}/{stem}" if day else f"{kind}-{stem}"

    def _write(self, base: Manifest, changed: dict[str, FileRows], old_days: set[str], version: str,
               report: IndexReport, *, all_sessions: bool = False) -> int:
        """Write the rows of the files read (``changed``: by file id) in place of the rows they had, as new files:
        the days either touches, the sessions file (from every known session file's row with ``all_sessions``),
        the rollups (their rows of these files replaced; all of them from the day files when ``base`` has none of
        this version); then switch to the manifest naming them. The days rewritten."""
        self.root.mkdir(parents=True, exist_ok=True)
        fids = set(changed)
        new = base.copy()
        new.valid, new.generation, new.token, new.prices = True, base.generation + 1, uuid.uuid4().hex, version
        written: list[Path] = []
        con = self._connection()
        try:
            days: set[str] = set(old_days)
            for table, columns, rows_key in (("calls", CALL_COLUMNS, "calls"),
                                             ("tool_results", TOOL_COLUMNS, "tool_results")):
                rows = [r for fr in changed.values() for r in getattr(fr, rows_key)]
                report.bad_values += self._load_rows(con, f"new_{table}", columns, rows)
                days.update(r["day"] for r in rows)
            for table, columns in (("calls", CALL_COLUMNS), ("tool_results", TOOL_COLUMNS)):
                self._rewrite_days(con, new, table, columns, sorted(days), fids, written)
            if all_sessions:
                sessions = [k["session"] for k in new.files.values() if isinstance(k, dict)
                            and isinstance(k.get("session"), dict) and k["session"]]
                fresh_fids: set[str] = set()
            else:
                sessions = [fr.session for fr in changed.values() if fr.session]
                fresh_fids = fids
            report.bad_values += self._load_rows(con, "new_sessions", SESSION_COLUMNS, sessions)
            self._replace_rows(con, new, "sessions", "SELECT * FROM new_sessions", fresh_fids, written,
                               keep_old=not all_sessions)
            if base.rollups_current():
                con.execute("CREATE OR REPLACE TEMP TABLE new_call_rollup AS "
                            + _CALL_ROLLUP.format(source="new_calls"))
                self._replace_rows(con, new, "call_rollup", "SELECT * FROM new_call_rollup", fids, written)
                self._replace_rows(con, new, "tool_rollup", _TOOL_ROLLUP.format(
                    results="new_tool_results", calls="new_calls"), fids, written)
                self._replace_rows(con, new, "session_rollup", _SESSION_ROLLUP.format(
                    calls="new_call_rollup", sessions="new_sessions"), fids, written)
            else:  # a new index, a repaired one or one of older rollups: all of them from the day files
                self._write_rollups(con, new, written)
        except BaseException as exc:
            for path in written:  # never named by a manifest: gone now rather than at the next sweep
                with contextlib.suppress(OSError):
                    path.unlink()
            if isinstance(exc, OSError) and exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
                raise IndexReadOnly(f"the usage index in {shown_path(self.root)} is read-only "
                                    f"({exc.strerror or exc})") from None
            raise
        finally:
            con.close()
        self._save(new, written)
        return len(days)

    def _replace_rows(self, con: Any, m: Manifest, name: str, fresh: str, fids: set[str], written: list[Path],
                      *, keep_old: bool = True) -> None:
        """A new ``name`` file in ``m``: the rows of its old file of files not in ``fids`` kept, those of ``fresh``
        added."""
        folder = _duck_folder(self.root)
        query = f"SELECT * FROM ({fresh})"
        old = m.single.get(name)
        if old and keep_old:
            fid_list = ", ".join(_sql_str(f) for f in sorted(fids)) or "''"
            query = (f"SELECT * FROM read_parquet({_listing(folder, [old])}) WHERE file_id NOT IN ({fid_list}) "
                     f"UNION ALL BY NAME ({query})")
        order = " ORDER BY day" if name in ("call_rollup", "tool_rollup") else ""
        target = self._new_name(name, m.generation)
        _copy_to(con, f"SELECT * FROM ({query}){order}", folder / target)
        written.append(self.root / target)
        m.single[name] = target

    @staticmethod
    def _load_rows(con: Any, name: str, columns: Mapping[str, str], rows: list[dict[str, Any]]) -> int:
        """``rows`` as the temporary table ``name`` of ``columns``: handed to DuckDB as one NumPy array of text per
        column (numbers as their ``repr``, which reads back exactly; a list column as its items joined by
        U+001F), cast to the column's type in SQL, so that DuckDB never guesses a type from a sample. A value that
        is no value of its column (a time that is no time, a number out of range) is NULL; the rows with a number
        out of range are counted (the count returned)."""
        cols = ", ".join(f'"{k}" {v}' for k, v in columns.items())
        con.execute(f"CREATE OR REPLACE TEMP TABLE {name} ({cols})")
        if not rows:
            return 0
        select = []
        bad = []
        for k, kind in columns.items():
            if kind.endswith("[]"):
                select.append(f"CASE WHEN src.\"{k}\" = '' THEN []::{kind} "
                              f"ELSE string_split(src.\"{k}\", chr(31))::{kind} END")
                continue
            select.append(f"TRY_CAST(src.\"{k}\" AS {kind})")
            if kind in _NUMBERS:
                bad.append(f"(src.\"{k}\" IS NOT NULL AND TRY_CAST(src.\"{k}\" AS {kind}) IS NULL)")
        insert = f"INSERT INTO {name} SELECT {', '.join(select)} FROM src_{name} AS src"
        count = f"SELECT count(*) FROM src_{name} AS src WHERE {' OR '.join(bad) or 'FALSE'}"
        rejected = 0
        for start in range(0, len(rows), LOAD_BATCH):  # in batches: the text of a first index stays small
            suspect = [False]
            con.register(f"src_{name}", _text_columns(columns, rows[start:start + LOAD_BATCH], suspect))
            try:
                con.execute(insert)
                if suspect[0]:  # counted only when a value looked out of range (the readers' are in range)
                    rejected += int(con.execute(count).fetchall()[0][0])
            finally:
                con.unregister(f"src_{name}")
        return rejected

    def _rewrite_days(self, con: Any, m: Manifest, table: str, columns: Mapping[str, str], days: list[str],
                      fids: set[str], written: list[Path]) -> None:
        """Each day in ``days``: its old rows of files not in ``fids`` + the new rows, as one new Parquet file named
        in ``m`` (a day left without rows leaves ``m``)."""
        folder = _duck_folder(self.root)
        names = ", ".join(f'"{k}"' for k in columns)
        fid_list = ", ".join(_sql_str(f) for f in sorted(fids)) or "''"
        for day in days:
            old = m.days[table].get(day)
            parts = [f"SELECT {names} FROM new_{table} WHERE day = DATE {_sql_str(day)}"]
            if old:
                parts.insert(0, f"SELECT {names} FROM read_parquet({_listing(folder, [old])}) "
                                f"WHERE file_id NOT IN ({fid_list})")
            target = self._new_name(table, m.generation, day)
            (self.root / target).parent.mkdir(parents=True, exist_ok=True)
            count = _copy_to(con, f"SELECT * FROM ({' UNION ALL '.join(parts)}) ORDER BY ts NULLS LAST",
                             folder / target)
            if count:
                written.append(self.root / target)
                m.days[table][day] = target
            else:
                (self.root / target).unlink()
                m.days[table].pop(day, None)

    def _write_rollups(self, con: Any, m: Manifest, written: list[Path]) -> None:
        """Write the rollups of ``m`` from all its call and tool-result rows (written already) and its sessions."""
        folder = _duck_folder(self.root)
        sources = {}
        for table, columns in (("calls", CALL_COLUMNS), ("tool_results", TOOL_COLUMNS)):
            files = sorted(m.days[table].values())
            sources[table] = f"read_parquet({_listing(folder, files)})" if files else _empty(columns)
        con.execute("CREATE OR REPLACE TEMP TABLE all_call_rollup AS " + _CALL_ROLLUP.format(source=sources["calls"]))
        sessions = m.single.get("sessions")
        sessions_sql = f"read_parquet({_listing(folder, [sessions])})" if sessions else _empty(SESSION_COLUMNS)
        tools = _TOOL_ROLLUP.format(results=sources["tool_results"], calls=sources["calls"])
        fresh = {"call_rollup": "SELECT * FROM all_call_rollup ORDER BY day",
                 "tool_rollup": f"SELECT * FROM ({tools}) ORDER BY day",
                 "session_rollup": _SESSION_ROLLUP.format(calls="all_call_rollup", sessions=sessions_sql)}
        for name, query in fresh.items():
            target = self._new_name(name, m.generation)
            _copy_to(con, query, folder / target)
            written.append(self.root / target)
            m.single[name] = target
        m.rollups = ROLLUP_VERSION

    def rebuild_rollups(self, *, lock_wait: float = LOCK_WAIT) -> None:
        """Write the rollups from all the call and tool-result rows (and switch to them)."""
        with _locked(self.root / LOCK_FILE, wait=lock_wait):
            base = self.manifest()
            if not base.valid:
                return
            new = base.copy()
            new.generation, new.token = base.generation + 1, uuid.uuid4().hex
            written: list[Path] = []
            con = self._connection()
            try:
                self._write_rollups(con, new, written)
            finally:
                con.close()
            self._save(new, written)

    def adopt(self, days: Mapping[str, Mapping[str, str]], sessions: str, prices: str = "adopted") -> None:
        """Make an index of data files written by another tool (the benchmarks' synthetic index): ``days`` (table ->
        day -> name) and ``sessions`` named as :meth:`_new_name` names them, under ``root``; rollups built."""
        with _locked(self.root / LOCK_FILE):
            m = Manifest(True, 1, uuid.uuid4().hex, prices, 0, {t: dict(days.get(t) or {}) for t in TABLES},
                         {"sessions": sessions})
            written: list[Path] = []
            con = self._connection()
            try:
                self._write_rollups(con, m, written)
            finally:
                con.close()
            written += [self.root / n for n in m.listed()]
            self._save(m, sorted(set(written)))

    # ------------------------------------------------------------------ damage

    def _sized_wrong(self, m: Manifest) -> dict[str, str]:
        """The files ``m`` names that are gone or whose size is not the size they were written with."""
        wrong: dict[str, str] = {}
        for name in m.listed():
            try:
                size = (self.root / name).stat().st_size
            except FileNotFoundError:
                wrong[name] = "missing"
                continue
            except OSError as exc:
                wrong[name] = exc.strerror or str(exc)
                continue
            if name in m.sizes and size != m.sizes[name]:
                wrong[name] = "empty (0 bytes)" if not size else f"{size:,} bytes, written with {m.sizes[name]:,}"
        return wrong

    def _probe(self, m: Manifest) -> dict[str, str]:
        """The files ``m`` names that DuckDB cannot read whole, or that do not hold their table's columns: name ->
        what is wrong."""
        import duckdb

        folder = _duck_folder(self.root)
        expected = _expected_columns()
        kinds = {n: t for t in TABLES for n in m.days[t].values()} | {n: k for k, n in m.single.items()}
        broken: dict[str, str] = {}
        con = duckdb.connect()
        try:
            for name, kind in kinds.items():
                path = self.root / name
                try:
                    size = path.stat().st_size
                except OSError as exc:
                    broken[name] = "missing" if isinstance(exc, FileNotFoundError) else (exc.strerror or str(exc))
                    continue
                if not size:
                    broken[name] = "empty (0 bytes)"
                    continue
                try:
                    source = f"read_parquet({_listing(folder, [name])})"
                    columns = [d[0] for d in con.execute(f"SELECT * FROM {source} LIMIT 0").description]
                    con.execute(f"SELECT max(hash(COLUMNS(*))) FROM {source}").fetchall()  # every value read
                except duckdb.Error as exc:
                    broken[name] = printable(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
                    continue
                if columns != expected[kind]:
                    broken[name] = "not a file of this table (other columns)"
        finally:
            con.close()
        return broken

    def _repair(self, seen: Manifest) -> bool:
        """A query failed on the index of manifest ``seen``: find the damaged files and rebuild without them (under
        the lock; the session files whose rows they held are read again by the next update). Whether something
        was rebuilt (or the manifest changed meanwhile: worth another try)."""
        try:
            with _locked(self.root / LOCK_FILE, wait=self.lock_wait):
                m = self.manifest()
                if not m.valid or m.token != seen.token:
                    return m.token != seen.token  # another process wrote meanwhile
                broken = self._sized_wrong(m) or self._probe(m)
                if not broken:
                    return False
                new = self._without(m, broken, None)
                new.generation, new.token = m.generation + 1, uuid.uuid4().hex
                written: list[Path] = []
                con = self._connection()
                try:
                    if "sessions" not in new.single:
                        self._load_rows(con, "new_sessions", SESSION_COLUMNS, [
                            k["session"] for k in new.files.values()
                            if isinstance(k, dict) and isinstance(k.get("session"), dict) and k["session"]])
                        self._replace_rows(con, new, "sessions", "SELECT * FROM new_sessions", set(), written,
                                           keep_old=False)
                    self._write_rollups(con, new, written)
                finally:
                    con.close()
                self._save(new, written)
                return True
        except UsageIndexError as exc:  # busy, read-only: the damage stays (said)
            self.notices.append(f"{exc}: the damaged index could not be rebuilt now")
            return False

    # ------------------------------------------------------------------ query

    def read(self, fn: Callable[[Any], T]) -> T:
        """``fn(connection)`` on the index as its manifest names it (see :meth:`connect`). A query that fails because
        a file went (another process switched the manifest after this one read it) runs again on the new
        manifest; one that fails on a damaged file has the index rebuilt without it (said in :attr:`notices`)
        and runs again. Else UsageIndexError naming the index and what was wrong (never DuckDB's traceback)."""
        last: Exception | str | None = None
        for _attempt in range(3):
            m = self.manifest(whole=False)
            wrong = self._sized_wrong(m)  # gone, emptied, truncated, replaced: a stat per file
            if wrong:
                last = "; ".join(f"{shown_path(self.root / n)}: {why}" for n, why in wrong.items())
                if self.manifest(whole=False).token != m.token or self._repair(m):
                    continue
                break
            try:
                con = self._cursor(m)
                try:
                    return fn(con)
                finally:
                    con.close()
            except Exception as exc:
                if not _is_duckdb_error(exc):
                    raise
                last = exc
            now = self.manifest(whole=False)
            if now.token != m.token:
                continue  # lost a race with a writer: the new manifest
            if not m.valid or not self._repair(m):
                break
        raise UsageIndexError(f"cannot query the usage index in {shown_path(self.root)}: "
                              f"{printable(str(last).splitlines()[0] if last else '')}")

    def connect(self) -> Any:
        """A DuckDB connection with the views ``calls``, ``tool_results``, ``sessions``, ``call_rollup``,
        ``tool_rollup`` and ``session_rollup`` over exactly the files the manifest names (empty tables when it
        names none; rollups of another version built in memory): a cursor of an in-memory database kept per
        manifest for the process, whose views read the files when queried. Close it when done. A query on it may
        fail when another process switched the manifest meanwhile: :meth:`read` tries again."""
        return self._cursor(self.manifest(whole=False))

    def _cursor(self, m: Manifest) -> Any:
        key = (str(self.root.absolute()), m.token)
        with _DATABASES_LOCK:
            base = _DATABASES.get(key)
            if base is None:
                base = self._database(m)
                for old in [k for k in _DATABASES if k[0] == key[0]]:
                    del _DATABASES[old]  # the old manifest's: dropped (its open cursors keep it alive)
                _DATABASES[key] = base
                while len(_DATABASES) > MAX_DATABASES:
                    del _DATABASES[next(iter(_DATABASES))]
            return base.cursor()

    def _database(self, m: Manifest) -> Any:
        import duckdb

        folder = _duck_folder(self.root)
        con = duckdb.connect()
        try:
            for table, columns in (("calls", CALL_COLUMNS), ("tool_results", TOOL_COLUMNS)):
                files = sorted(m.days[table].values())
                if files:  # every day file is written with the table's columns (no union_by_name: binds 3× faster)
                    con.execute(f"CREATE VIEW {table} AS SELECT * FROM read_parquet({_listing(folder, files)})")
                else:
                    cols = ", ".join(f'"{k}" {v}' for k, v in columns.items())
                    con.execute(f"CREATE TABLE {table} ({cols})")
            if "sessions" in m.single:
                con.execute("CREATE VIEW sessions AS SELECT * FROM "
                            f"read_parquet({_listing(folder, [m.single['sessions']])})")
            else:
                cols = ", ".join(f'"{k}" {v}' for k, v in SESSION_COLUMNS.items())
                con.execute(f"CREATE TABLE sessions ({cols})")
            if m.rollups_current():  # views, read when queried (as tables: 40 ms more for a process's first query)
                for name in ROLLUPS:
                    con.execute(f"CREATE VIEW {name} AS SELECT * FROM "
                                f"read_parquet({_listing(folder, [m.single[name]])})")
            else:  # none, or of another version: built from the rows, in memory (written by the next update)
                con.execute("CREATE TABLE call_rollup AS " + _CALL_ROLLUP.format(source="calls"))
                con.execute("CREATE TABLE tool_rollup AS "
                            + _TOOL_ROLLUP.format(results="tool_results", calls="calls"))
                con.execute("CREATE TABLE session_rollup AS "
                            + _SESSION_ROLLUP.format(calls="call_rollup", sessions="sessions"))
        except BaseException:
            con.close()
            raise
        return con

    def query(self, by: str = "day", since: date | None = None) -> list[dict[str, Any]]:
        """The figures per group (see :func:`summarize`)."""
        if by not in GROUPS:
            raise ValueError(f"cannot group by {by!r}: one of {', '.join(GROUPS)}")
        return self.read(lambda con: summarize(con, by, since))

    def totals(self, since: date | None = None) -> dict[str, Any]:
        rows = self.read(lambda con: _fetch(con, f"SELECT {_SUMS} FROM call_rollup WHERE {_since(since)}"))
        return rows[0] if rows else {}


def _is_duckdb_error(exc: BaseException) -> bool:
    import duckdb

    return isinstance(exc, duckdb.Error)


_EXPECTED: dict[str, list[str]] = {}


def _expected_columns() -> dict[str, list[str]]:
    """The columns of each kind of data file, in the order the index writes them."""
    if not _EXPECTED:
        import duckdb

        con = duckdb.connect()
        try:
            for name, columns in (("calls", CALL_COLUMNS), ("tool_results", TOOL_COLUMNS),
                                  ("sessions", SESSION_COLUMNS)):
                cols = ", ".join(f'"{k}" {v}' for k, v in columns.items())
                con.execute(f"CREATE TABLE {name} ({cols})")
                _EXPECTED[name] = list(columns)
            for name, query in (("call_rollup", _CALL_ROLLUP.format(source="calls")),
                                ("tool_rollup", _TOOL_ROLLUP.format(results="tool_results", calls="calls")),
                                ("session_rollup", _SESSION_ROLLUP.format(calls="call_rollup", sessions="sessions"))):
                con.execute(f"CREATE TABLE {name} AS {query}")
                _EXPECTED[name] = [d[0] for d in con.execute(f"SELECT * FROM {name}").description]
        finally:
            con.close()
    return _EXPECTED


# --------------------------------------------------------------------------- queries

_DATABASES: dict[tuple[str, str], Any] = {}  # (index folder, manifest token) -> its in-memory database
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
                "\"window\", peak_fullness, compactions, agent_cost_usd, title, path, "
                # the session's cost in its parts (engine.usage.costs.SessionCost: main + subagents + compaction)
                "calls - subagent_calls - compaction_calls AS main_calls, subagent_calls, compaction_calls, "
                "main_cost_usd, subagents_cost_usd, compaction_cost_usd, main_unpriced, subagents_unpriced, "
                "compaction_unpriced")


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
