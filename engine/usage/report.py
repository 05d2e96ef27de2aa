"""What the window's Usage view shows, from the usage index (:mod:`engine.usage.index`) over a date range.

:func:`usage_report` runs every query of the view on one DuckDB connection (on the index's rollups, not its
call rows) and returns a
:class:`UsageReport` of plain data: cost and tokens per day and model (the stacked bars), the sessions
(cost, calls, peak fullness, compactions, cache hit rate, the agent's own cost, the file to open), per
project and per model totals, the tools whose results take the most context (with their tool calls and what
the responses that made them cost, each response's cost split evenly over its tool calls), the calls the agent
attributed to a skill, a subagent type or an MCP server (Claude Code 2.1.3xx), and the range's total.
Days are UTC (as the index files them); ``since`` and ``until`` are both included, None: open. The days the view's
chart spans are the report's too (``first_day`` … ``last_day``: the whole range asked, empty days included; an open
end: the first day with calls, the later of today and the last day with calls); :func:`last_days` is "the last n
days" (today, UTC, the last: never a day to come).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from engine.usage.index import UsageIndex
from engine.usage.queries import ATTRIBUTION_GROUPS, SUMS, attribution_query, fetch, session_query, sql_str

TOP_TOOLS = 20
# a session row of the view: what its sessions table shows, and the file to open (10,000 rows of all the index's
# session columns take twice as long to fetch)
SESSION_COLUMNS = ("agent, project, session_id, title, path, last_call, models, calls, cost_usd, unpriced_calls, "
                   "agent_cost_usd, peak_fullness, compactions, "
                   "cache_read_tokens / nullif(prompt_tokens, 0) AS cache_hit_rate, "
                   # the cost's parts (engine.usage.costs.row_cost): main + subagents + compaction calls
                   "calls - subagent_calls - compaction_calls AS main_calls, subagent_calls, compaction_calls, "
                   "main_cost_usd, subagents_cost_usd, compaction_cost_usd, main_unpriced, subagents_unpriced, "
                   "compaction_unpriced")


@dataclass
class UsageReport:
    """The figures of one date range (each row a dict of plain values; see the module's doc)."""

    since: str | None = None  # ISO day, included; None: from the first call
    until: str | None = None  # ISO day, included; None: to the last call
    by_day_model: list[dict[str, Any]] = field(default_factory=list)  # day, model, calls, cost_usd, tokens…
    sessions: list[dict[str, Any]] = field(default_factory=list)
    projects: list[dict[str, Any]] = field(default_factory=list)
    models: list[dict[str, Any]] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)
    # the calls attributed to a skill, a subagent type or an MCP server: kind ("skill", "subagent", "mcp"), name and
    # the figures ``ctxbench usage --by <kind>`` gives that name (the same query: queries.attribution_query)
    attribution: list[dict[str, Any]] = field(default_factory=list)
    total: dict[str, Any] = field(default_factory=dict)
    index: dict[str, Any] | None = None  # what the index update did (IndexReport.to_json), None: not updated
    problem: str = ""  # why the figures may be missing or old ("" when all went well)
    updating: bool = False  # the index is being brought up to date: newer figures follow
    # the session files the last update could not read: {"path", "reason"} each (paths shown escaped)
    unreadable: list[dict[str, Any]] = field(default_factory=list)  # path, reason; "partly": read in part
    # what the figures are not: the index is read-only or another process is updating it, a damaged file rebuilt
    warnings: list[str] = field(default_factory=list)
    # the days the chart spans (ISO, both included; None: no day to draw): the range asked, its open ends closed
    first_day: str | None = None
    last_day: str | None = None

    def days(self) -> list[str]:
        """The days with calls, in order."""
        return sorted({str(r["day"]) for r in self.by_day_model})

    def model_names(self) -> list[str]:
        """The models of the range, most expensive first (the bars' stacking order)."""
        return [str(m.get("model") or "") for m in self.models]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def today_utc() -> date:
    """Today's date in UTC (the index files calls by their UTC day)."""
    return datetime.now(UTC).date()


def last_days(days: int, today: date | None = None) -> tuple[date | None, date | None]:
    """The range "the last ``days`` days": ``days - 1`` days before today up to today (UTC), both included; 0 (or
    less): all time (None, None)."""
    if days <= 0:
        return None, None
    end = today or today_utc()
    return end - timedelta(days=days - 1), end


def span(since: date | None, until: date | None, days: list[str], today: date | None = None) -> tuple[str | None,
                                                                                                    str | None]:
    """The first and last day a chart of the range draws: ``since`` / ``until`` when given, else the first day with
    calls / the later of today and the last day with calls; (None, None) when there is nothing to draw."""
    first = since.isoformat() if since is not None else (days[0] if days else None)
    if until is not None:
        last: str | None = until.isoformat()
    else:
        last = max([*days[-1:], (today or today_utc()).isoformat()]) if first is not None else None
    if first is None or last is None or last < first:
        return None, None
    return first, last


def short_path(path: str, home: str | None = None, limit: int = 40) -> str:
    """A folder's path as a person reads it in a narrow column: the home folder as ``~``, and past ``limit``
    characters only its last folders after ``…/`` (the full path goes in a tooltip)."""
    if not path:
        return ""
    home = os.path.expanduser("~") if home is None else home
    home = home.rstrip("/")
    shown = "~" + path[len(home):] if home and (path == home or path.startswith(home + "/")) else path
    if len(shown) <= limit:
        return shown
    parts = shown.split("/")
    tail = parts[-1]
    for part in reversed(parts[1:-1]):
        if len(tail) + len(part) + 3 > limit:
            break
        tail = part + "/" + tail
    return "…/" + tail


def _where(since: date | None, until: date | None, column: str = "day") -> str:
    parts = ["TRUE"]
    if since is not None:
        parts.append(f"{column} >= DATE {sql_str(since.isoformat())}")
    if until is not None:
        parts.append(f"{column} <= DATE {sql_str(until.isoformat())}")
    return " AND ".join(parts)


def usage_report(index: UsageIndex, since: date | None = None, until: date | None = None,
                 top_tools: int = TOP_TOOLS) -> UsageReport:
    """The Usage view's figures from ``index`` (no update; a damaged file is rebuilt, said in ``warnings``) between
    ``since`` and ``until``. UsageIndexError (naming the index) when it cannot be read."""
    notices = len(index.notices)
    report = index.read(lambda con: _report(con, since, until, top_tools))
    report.warnings += index.notices[notices:]
    return report


def _report(con: Any, since: date | None, until: date | None, top_tools: int) -> UsageReport:
    where = _where(since, until)
    report = UsageReport(since.isoformat() if since else None, until.isoformat() if until else None)
    report.by_day_model = fetch(con, f"""
        SELECT day, model, coalesce(sum(calls), 0)::BIGINT AS calls, sum(cost_usd) AS cost_usd,
               coalesce(sum(unpriced_calls), 0)::BIGINT AS unpriced_calls,
               sum(prompt_tokens)::BIGINT AS prompt_tokens, sum(output_tokens)::BIGINT AS output_tokens,
               (coalesce(sum(prompt_tokens), 0) + coalesce(sum(output_tokens), 0))::BIGINT AS tokens
        FROM call_rollup WHERE {where} GROUP BY day, model ORDER BY day, model""")
    report.sessions = fetch(con, session_query(since, until, "cost_usd DESC NULLS LAST, last_call DESC",
                                                SESSION_COLUMNS))
    report.projects = fetch(con, f"SELECT project, {SUMS} FROM call_rollup WHERE {where} GROUP BY project "
                                  "ORDER BY cost_usd DESC NULLS LAST, project")
    report.models = fetch(con, f"SELECT model, any_value(price_key) AS price_key, {SUMS} FROM call_rollup "
                                f"WHERE {where} GROUP BY model ORDER BY cost_usd DESC NULLS LAST, model")
    report.tools = fetch(con, f"""
        SELECT tool, sum(results)::BIGINT AS results, sum(result_tokens)::BIGINT AS result_tokens,
               count(DISTINCT file_id) FILTER (WHERE results > 0) AS sessions, max(largest) AS largest,
               sum(used_calls)::BIGINT AS tool_calls, sum(cost_usd_of_calls) AS cost_usd_of_calls
        FROM tool_rollup WHERE {where} GROUP BY tool HAVING sum(results) > 0
        ORDER BY result_tokens DESC, tool LIMIT {int(top_tools)}""")
    for by in ATTRIBUTION_GROUPS:
        report.attribution += [{"kind": by, "name": r.pop(by), **r} for r in fetch(con, attribution_query(by, where))
                               if r.get(by) is not None]
    rows = fetch(con, f"SELECT {SUMS} FROM call_rollup WHERE {where}")
    report.total = rows[0] if rows else {}
    report.first_day, report.last_day = span(since, until, report.days())
    return report


__all__ = ["SESSION_COLUMNS", "TOP_TOOLS", "UsageReport", "last_days", "short_path", "span", "today_utc",
           "usage_report"]
