"""What one session file becomes in the usage index: call rows, tool-result rows and the session row.

:func:`rows_of` turns a session read by :func:`engine.sources.readers.read_source` (its subagents included) into
:class:`FileRows`: one row per provider call the session paid for (main session, subagents, compaction calls:
:func:`engine.usage.costs.session_parts`, the list :func:`engine.usage.costs.source_cost` prices too), one row per
tool result (tool, estimated tokens), and one row for the session file (peak fullness, compactions, the agent's own
cost). The columns of each are :data:`CALL_COLUMNS`, :data:`TOOL_COLUMNS` and :data:`SESSION_COLUMNS`; a call's
``tools`` are the tool calls of its response by the rule ``ctxbench tools`` splits a response's cost by
(:func:`engine.usage.tool_costs.response_tools`).

Costs come from :mod:`engine.usage.prices`; a call of a model the table does not know has no cost (``cost_usd``
NULL and ``cost_problem``), never $0. Claude Code's one-hour cache writes
(``usage.cache_creation.ephemeral_1h_input_tokens``) are read from the file by a light pass
(:func:`claude_one_hour_writes`), as the readers' :class:`ProviderCall` does not carry them. A call's day is its UTC
day; a call without any time (rare) is kept under :data:`UNKNOWN_DAY`.

:func:`rows_of_file` is what a worker process runs for one file (:func:`worker_start` gives it the price table).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from engine.context.tokens import estimate_message_tokens
from engine.model.text import printable
from engine.sources import formats
from engine.sources import model as _model
from engine.sources.discovery import Agent, SourceEntry
from engine.sources.model import (
    ProviderCall,
    SourceError,
    SourceFormat,
    SourceSession,
    damaged_lines,
    int_or_none,
    open_regular,
)
from engine.sources.readers import read_source
from engine.sources.session_summary import summarize_read
from engine.sources.tail import lines_holding
from engine.usage.prices import REASONING_SEPARATE, PriceTable

UNKNOWN_DAY = "1970-01-01"  # a call without any time (rare): kept, under this day

# what the rows of a session file hold; another version reads every session file again (as another price table)
# 2: a project is its folder's full path (no longer its last name); a session without a title: its first prompt
# 3: a call's tools are every tool call of its response (engine.usage.tool_costs.response_tools), not only those
#    of its first message (a Codex response's function calls in several messages)
# 4: a call's attribution (skill, subagent type, plugin, MCP server and tool), the provider's cache-miss reason and its
#    tokens, and the tokens of server-side iterations billed beside the top-level usage (in its cost too)
# 5: a Codex session's rows hold its spawn_agent subagents' calls (their rollouts are no longer sessions of their own:
#    engine.sources.discovery), a namespaced call's tool is named namespace.name
ROWS_VERSION = 5

CALL_COLUMNS: dict[str, str] = {
    "agent": "VARCHAR", "project": "VARCHAR", "session_id": "VARCHAR", "file_id": "VARCHAR",
    "subagent": "VARCHAR", "kind": "VARCHAR", "call_index": "INTEGER", "request_id": "VARCHAR",
    "model": "VARCHAR", "ts": "TIMESTAMP", "day": "DATE", "prompt_tokens": "BIGINT", "input_tokens": "BIGINT",
    "cache_read_tokens": "BIGINT", "cache_write_tokens": "BIGINT", "cache_write_1h_tokens": "BIGINT",
    "output_tokens": "BIGINT", "reasoning_tokens": "BIGINT", "cost_usd": "DOUBLE", "cost_problem": "VARCHAR",
    "price_key": "VARCHAR", "window": "BIGINT", "tools": "VARCHAR[]",
    # who the call worked for, as the agent attributed it (Claude Code 2.1.3xx; NULL: not attributed)
    "skill": "VARCHAR", "subagent_type": "VARCHAR", "plugin": "VARCHAR", "mcp_server": "VARCHAR", "mcp_tool": "VARCHAR",
    "cache_miss_reason": "VARCHAR", "cache_miss_tokens": "BIGINT",  # the provider's own reason the cache missed
    "beside_tokens": "BIGINT",  # tokens of server-side iterations billed beside the top-level usage (in cost_usd)
}
TOOL_COLUMNS: dict[str, str] = {
    "agent": "VARCHAR", "project": "VARCHAR", "session_id": "VARCHAR", "file_id": "VARCHAR",
    "subagent": "VARCHAR", "ts": "TIMESTAMP", "day": "DATE", "tool": "VARCHAR", "tool_call_id": "VARCHAR",
    "tokens": "BIGINT",
}

SESSION_COLUMNS: dict[str, str] = {
    "agent": "VARCHAR", "project": "VARCHAR", "session_id": "VARCHAR", "file_id": "VARCHAR", "path": "VARCHAR",
    "title": "VARCHAR", "model": "VARCHAR", "started": "VARCHAR", "last_activity": "VARCHAR", "calls": "BIGINT",
    "compactions": "BIGINT", "window": "BIGINT", "peak_prompt_tokens": "BIGINT", "peak_fullness": "DOUBLE",
    "agent_cost_usd": "DOUBLE",
}


def file_id(path: str) -> str:
    """The id of the session file at ``path`` in the index's rows (a hash of its path, 16 hex digits)."""
    return hashlib.sha1(path.encode("utf-8", "surrogatepass")).hexdigest()[:16]


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
    if (len(ts) == 29 and ts[4] == ts[7] == "-" and ts[13] == ts[16] == ":" and ts[19] == "."
            and ts.endswith("+00:00") and ts.isascii()):  # 2026-03-01T10:00:05.123+00:00, what iso() makes (the rest)
        try:  # (a check: the digits below are the parsed figures' own)
            datetime.fromisoformat(ts)
        except ValueError:
            return None
        ms = ts[20:23]  # as isoformat prints them: microseconds, none when 0
        return f"{ts[:10]} {ts[11:19]}.{ms}000" if ms != "000" else f"{ts[:10]} {ts[11:19]}"
    return _ts_parsed(ts)


def _ts_parsed(ts: str) -> str | None:
    """:func:`_ts` without its shortcuts: the datetime parse, as naive UTC (what the shortcuts must give)."""
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
        with open_regular(path) as fh:  # (only the lines holding the figure are split out and read)
            one_hour_of_lines(lines_holding(fh, b"ephemeral_1h_input_tokens", name=path.name), found)
    except (OSError, SourceError):
        pass
    return found


def one_hour_of_lines(lines: Any, found: dict[str, int]) -> dict[str, int]:
    """Add the one-hour cache writes of ``lines`` (bytes lines of a Claude Code file) to ``found`` (the
    largest figure seen per request); ``found`` returned."""
    for raw in lines:
        if b"ephemeral_1h_input_tokens" not in raw:
            continue
        try:
            obj = _model.loads_line(raw)
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, dict):
            one_hour_of(obj, found)
    return found


def one_hour_of(obj: dict[str, Any], found: dict[str, int]) -> None:
    """Add the one-hour cache write of one Claude Code line's object, if it has one, to ``found`` (the largest figure
    seen per request)."""
    msg = obj.get("message")
    usage = msg.get("usage") if isinstance(msg, dict) else None
    creation = usage.get("cache_creation") if isinstance(usage, dict) else None
    if not isinstance(creation, dict):
        return
    value = int_or_none(creation.get("ephemeral_1h_input_tokens"))
    request = str(obj.get("requestId") or obj.get("requestRef") or "")
    if value and request:
        found[request] = max(found.get(request, 0), value)


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


def _call_meta(call: ProviderCall) -> dict[str, Any]:
    """A call row's attribution, cache-miss and billed-beside columns (NULL where the file says nothing)."""
    att, miss = call.attribution, call.cache_miss
    beside = call.billed_beside()
    return {"skill": att.skill or None if att else None, "subagent_type": att.agent or None if att else None,
            "plugin": att.plugin or None if att else None, "mcp_server": att.mcp_server or None if att else None,
            "mcp_tool": att.mcp_tool or None if att else None,
            "cache_miss_reason": miss.reason if miss else None, "cache_miss_tokens": miss.tokens if miss else None,
            "beside_tokens": sum(it.tokens for it in beside) if beside else None}


@dataclass
class FileRows:
    """The index rows of one session file (see the module's doc)."""

    calls: list[dict[str, Any]] = field(default_factory=list)
    tool_results: list[dict[str, Any]] = field(default_factory=list)
    session: dict[str, Any] = field(default_factory=dict)


# what a worker gives back for one file: its rows and its damaged lines as the manifest keeps them (or None);
# None when its last line has no newline yet (read by the index's own process, which waits for such a line)
WorkerRows = tuple[FileRows, list[Any] | None] | None
_WORKER_PRICES: list[PriceTable | None] = [None]


def worker_start(prices: PriceTable | None) -> None:
    """A worker process's start: the price table :func:`rows_of_file` prices with."""
    _WORKER_PRICES[0] = prices


def bad_said(session: SourceSession) -> list[Any] | None:
    """The damaged lines of ``session`` as the manifest keeps them: [count, the first described], or None."""
    bad = damaged_lines(session)
    return [len(bad), printable(bad[0].describe())] if bad else None


def rows_of_file(job: tuple[SourceEntry, str]) -> WorkerRows:
    """In a worker process: the rows of one session file read whole (``read_source``, its subagents included; a
    Claude Code file by :func:`engine.usage.claude_pass.summary_and_session`, the same session with less work)."""
    entry, fid = job
    path = Path(entry.path)
    if not _ends_with_newline(path):  # a last line without its newline: left to the index's process
        return None
    done = None
    if formats.agent_format(entry.agent).usage_pass:
        from engine.usage.claude_pass import summary_and_session

        done = summary_and_session(path, _nothing)  # (the one-hour writes: read by rows_of, as before)
    session = done[1] if done is not None else read_source(path, entry.agent)
    return rows_of(entry, session, _WORKER_PRICES[0], fid), bad_said(session)


def _nothing(obj: dict[str, Any]) -> None:
    """An observer that takes nothing."""


def summary_and_rows(job: tuple[Agent, str]) -> tuple[SourceEntry, WorkerRows]:
    """In a worker process: a session file's Sources summary and its index rows from one read
    (:func:`engine.sources.discovery.summarize_read`: a Claude Code file is decoded once for both, its one-hour cache
    writes taken in the same pass; :mod:`engine.usage.claude_pass` first, which gives the same with less work per
    line); the rows None when its last line has no newline yet (as :func:`rows_of_file`)."""
    agent, name = job
    path = Path(name)
    prices = _WORKER_PRICES[0]
    if formats.agent_format(agent).usage_pass:
        done = summary_and_rows_fast(path, prices)
        if done is not None:
            return done
    return summary_and_rows_read(agent, path, prices)


def summary_and_rows_fast(path: Path, prices: PriceTable | None) -> tuple[SourceEntry, WorkerRows] | None:
    """:func:`summary_and_rows_read` of a Claude Code file, the same with less work per line
    (:func:`engine.usage.claude_pass.summary_and_session`); None when that pass leaves the file to the reader."""
    from engine.usage.claude_pass import summary_and_session

    one_hour: dict[str, int] = {}
    try:
        done = summary_and_session(path, lambda obj: one_hour_of(obj, one_hour))
    except OSError as exc:
        raise SourceError(f"{path.name}: cannot read: {exc.strerror or exc}") from None
    if done is None:
        return None
    entry, session, complete = done
    if not complete:  # a last line without its newline: no rows yet
        return entry, None
    return entry, (rows_of(entry, session, prices, file_id(entry.path), one_hour), bad_said(session))


def summary_and_rows_read(agent: Agent, path: Path, prices: PriceTable | None) -> tuple[SourceEntry, WorkerRows]:
    """:func:`summary_and_rows` through the reader (every line decoded whole and handed on): what the pass of
    :mod:`engine.usage.claude_pass` must equal, and what reads the files that pass does not."""
    one_hour: dict[str, int] = {}
    entry, session = summarize_read(agent, path, observe=lambda obj: one_hour_of(obj, one_hour))
    if not _ends_with_newline(path):
        return entry, None
    fid = file_id(entry.path)
    return entry, (rows_of(entry, session, prices, fid,
                           one_hour if formats.agent_format(agent).cache_hours_in_lines else None),
                   bad_said(session))


def _ends_with_newline(path: Path) -> bool:
    """The file at ``path`` is empty or ends with a newline (its last line complete)."""
    with open_regular(path) as fh:
        size = os.fstat(fh.fileno()).st_size
        if size:
            fh.seek(size - 1)
            return bool(fh.read(1) == b"\n")
    return True


def rows_of(entry: SourceEntry, session: SourceSession, prices: PriceTable | None, fid: str,
            one_hour_main: dict[str, int] | None = None) -> FileRows:
    """The index rows of one session file, read (its subagents included); ``one_hour_main``: the main file's
    one-hour cache writes when already known (else read from the file)."""
    from engine.usage.responses import response_tools, session_parts  # (here: an up-to-date index reads no file)

    out = FileRows()
    fmt: SourceFormat = session.format
    reasoning_in_output = fmt not in REASONING_SEPARATE
    hours_in_lines = fmt in formats.FORMATS and formats.FORMATS[fmt].cache_hours_in_lines
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
        if write_1h is None and hours_in_lines:
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
            "price_key": key, "window": window, "tools": tools.get(id(call), []), **_call_meta(call),
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

