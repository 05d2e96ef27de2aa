"""What the window's Usage view shows, from the usage index (:mod:`engine.usage.index`) over a date range.

:func:`usage_report` runs every query of the view on one DuckDB connection (on the index's rollups, not its
call rows) and returns a
:class:`UsageReport` of plain data: cost and tokens per day and model (the stacked bars), the sessions
(cost, calls, peak fullness, compactions, cache hit rate, the agent's own cost, the file to open), per
project and per model totals, the tools whose results take the most context (with their tool calls and what
the responses that made them cost, each response's cost split evenly over its tool calls), and the range's
total.
Days are UTC (as the index files them); ``since`` and ``until`` are both included, None: open.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import date
from typing import Any

from engine.usage.index import _SUMS, UsageIndex, _fetch, _sql_str, session_query

TOP_TOOLS = 20
# a session row of the view: what its sessions table shows, and the file to open (10,000 rows of all the index's
# session columns take twice as long to fetch)
SESSION_COLUMNS = ("agent, project, session_id, title, path, last_call, models, calls, cost_usd, unpriced_calls, "
                   "agent_cost_usd, peak_fullness, compactions, "
                   "cache_read_tokens / nullif(prompt_tokens, 0) AS cache_hit_rate")


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
    total: dict[str, Any] = field(default_factory=dict)
    index: dict[str, Any] | None = None  # what the index update did (IndexReport.to_json), None: not updated
    problem: str = ""  # why the figures may be missing or old ("" when all went well)
    updating: bool = False  # the index is being brought up to date: newer figures follow
    # the session files the last update could not read: {"path", "reason"} each (paths shown escaped)
    unreadable: list[dict[str, str]] = field(default_factory=list)
    # what the figures are not: the index is read-only or another process is updating it, a damaged file rebuilt
    warnings: list[str] = field(default_factory=list)

    def days(self) -> list[str]:
        """The days with calls, in order."""
        return sorted({str(r["day"]) for r in self.by_day_model})

    def model_names(self) -> list[str]:
        """The models of the range, most expensive first (the bars' stacking order)."""
        return [str(m.get("model") or "") for m in self.models]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _where(since: date | None, until: date | None, column: str = "day") -> str:
    parts = ["TRUE"]
    if since is not None:
        parts.append(f"{column} >= DATE {_sql_str(since.isoformat())}")
    if until is not None:
        parts.append(f"{column} <= DATE {_sql_str(until.isoformat())}")
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
    report.by_day_model = _fetch(con, f"""
        SELECT day, model, coalesce(sum(calls), 0)::BIGINT AS calls, sum(cost_usd) AS cost_usd,
               coalesce(sum(unpriced_calls), 0)::BIGINT AS unpriced_calls,
               sum(prompt_tokens)::BIGINT AS prompt_tokens, sum(output_tokens)::BIGINT AS output_tokens,
               (coalesce(sum(prompt_tokens), 0) + coalesce(sum(output_tokens), 0))::BIGINT AS tokens
        FROM call_rollup WHERE {where} GROUP BY day, model ORDER BY day, model""")
    report.sessions = _fetch(con, session_query(since, until, "cost_usd DESC NULLS LAST, last_call DESC",
                                                SESSION_COLUMNS))
    report.projects = _fetch(con, f"SELECT project, {_SUMS} FROM call_rollup WHERE {where} GROUP BY project "
                                  "ORDER BY cost_usd DESC NULLS LAST, project")
    report.models = _fetch(con, f"SELECT model, any_value(price_key) AS price_key, {_SUMS} FROM call_rollup "
                                f"WHERE {where} GROUP BY model ORDER BY cost_usd DESC NULLS LAST, model")
    report.tools = _fetch(con, f"""
        SELECT tool, sum(results)::BIGINT AS results, sum(result_tokens)::BIGINT AS result_tokens,
               count(DISTINCT file_id) FILTER (WHERE results > 0) AS sessions, max(largest) AS largest,
               sum(used_calls)::BIGINT AS tool_calls, sum(cost_usd_of_calls) AS cost_usd_of_calls
        FROM tool_rollup WHERE {where} GROUP BY tool HAVING sum(results) > 0
        ORDER BY result_tokens DESC, tool LIMIT {int(top_tools)}""")
    rows = _fetch(con, f"SELECT {_SUMS} FROM call_rollup WHERE {where}")
    report.total = rows[0] if rows else {}
    return report


__all__ = ["SESSION_COLUMNS", "TOP_TOOLS", "UsageReport", "usage_report"]
