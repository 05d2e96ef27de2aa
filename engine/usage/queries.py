"""The usage index's queries, and the SQL of its rollups.

The queries (:func:`summarize`, :func:`totals`, :func:`engine.usage.report.usage_report`) read the rollups, not the
call rows: about 1 % of their rows. As every rollup row belongs to one session file, a write replaces the rows of the
files it read (the other rows kept, the new ones summed from the new call rows alone: no day file is read again;
:meth:`engine.usage.writer.IndexFiles.write_rows`). Rollups of another :data:`ROLLUP_VERSION` are built in memory
by a query (:func:`engine.usage.storage.database`) and written by the next update.

The rollups (one Parquet file each, named by the manifest: :mod:`engine.usage.storage`)::

    call_rollup     the calls summed per (day, agent, project, session file, model)
    tool_rollup     per (day, tool, session file): its results (count, tokens, largest) and the calls that used
                    it (count, cost: each call's cost split evenly over the tool calls of its response, the rule
                    ctxbench tools splits by, :func:`engine.usage.tool_costs.response_tools`)
    session_rollup  one row per session file over all its days (the sessions table's row joined): what the whole
                    range's session list reads

Each query runs on a connection of :meth:`engine.usage.index.UsageIndex.connect` (or inside
:meth:`engine.usage.index.UsageIndex.read`); :func:`fetch` gives its rows as plain dicts.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any, Literal

GroupBy = Literal["day", "project", "model", "session", "tool", "agent", "skill", "subagent", "mcp"]

GROUPS: tuple[str, ...] = ("day", "project", "model", "session", "tool", "agent", "skill", "subagent", "mcp")
# the attribution groups: the call rows' column each groups by (who the call worked for, as the agent said: Claude
# Code's attributionSkill, attributionAgent, attributionMcpServer; calls it did not attribute are one "(none)" group)
ATTRIBUTION_GROUPS = {"skill": "skill", "subagent": "subagent_type", "mcp": "mcp_server"}

ROLLUPS = ("call_rollup", "tool_rollup", "session_rollup")

# the rollups' version, in ROLLUP_MARKER: rollups of another version are built again from the rows
# (2: a call's cost split evenly over its tool calls in tool_rollup, as ``ctxbench tools`` splits it)
# 3: a session's cost in its parts (main, subagents, compaction); 4: per skill, subagent type and MCP server too
ROLLUP_VERSION = 4
# a call rollup row: (day, agent, project, session_id, file_id, model, skill, subagent type, MCP server) and the sums
# of its calls
CALL_ROLLUP = """
    SELECT CAST(day AS DATE) AS day, agent, project, session_id, file_id, model, skill, subagent_type, mcp_server,
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

# a tool rollup row: (day, tool, file_id), its results and the tool calls made (each call's cost split evenly over
# its tool calls: a response calling Read twice and Bash once gives Read 2/3, Bash 1/3; a call row's ``tools`` is
# its response's tool calls by the one rule, engine.usage.tool_costs.response_tools, that ctxbench tools splits by)
TOOL_ROLLUP = """
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
SESSION_ROLLUP = """
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


def sql_str(text: str) -> str:
    """``text`` as an SQL string literal (quotes doubled)."""
    return "'" + text.replace("'", "''") + "'"


# the figures of a group of ``call_rollup`` rows; sums as BIGINT, not DuckDB's HUGEINT, which turns into Python
# ints 4× slower (and into floats when fetched as NumPy arrays)
SUMS = """coalesce(sum(calls), 0)::BIGINT AS calls,
    sum(prompt_tokens)::BIGINT AS prompt_tokens, sum(input_tokens)::BIGINT AS input_tokens,
    sum(cache_read_tokens)::BIGINT AS cache_read_tokens, sum(cache_write_tokens)::BIGINT AS cache_write_tokens,
    sum(output_tokens)::BIGINT AS output_tokens, sum(reasoning_tokens)::BIGINT AS reasoning_tokens,
    sum(cost_usd) AS cost_usd, coalesce(sum(unpriced_calls), 0)::BIGINT AS unpriced_calls,
    sum(cache_read_tokens) / nullif(sum(prompt_tokens), 0) AS cache_hit_rate"""


def _since(since: date | None) -> str:
    return "TRUE" if since is None else f"day >= DATE {sql_str(since.isoformat())}"


_COLUMNAR = {"BIGINT", "INTEGER", "DOUBLE", "VARCHAR", "BOOLEAN", "DATE", "TIMESTAMP"}


def fetch(con: Any, sql: str) -> list[dict[str, Any]]:
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
        where.append(f"day >= DATE {sql_str(since.isoformat())}")
    if until is not None:
        where.append(f"day <= DATE {sql_str(until.isoformat())}")
    calls = f"(SELECT * FROM call_rollup WHERE {' AND '.join(where)})"
    return (f"SELECT {columns} FROM ({SESSION_ROLLUP.format(calls=calls, sessions='sessions')}) "
            f"ORDER BY {order}")


def attribution_query(by: str, where: str) -> str:
    """The SQL of the figures per skill, subagent type or MCP server (``by``: a key of :data:`ATTRIBUTION_GROUPS`)
    of the ``call_rollup`` rows matching ``where``; the calls attributed to none are one group, NULL, last."""
    column = ATTRIBUTION_GROUPS[by]
    return (f"SELECT {column} AS {by}, {SUMS} FROM call_rollup WHERE {where} GROUP BY {column} "
            f"ORDER BY {column} IS NULL, cost_usd DESC NULLS LAST, {column}")


def summarize(con: Any, by: str = "day", since: date | None = None) -> list[dict[str, Any]]:
    """Figures per group from a :meth:`engine.usage.index.UsageIndex.connect` connection: calls, tokens (prompt,
    uncached input, cache read / write, output, reasoning), cost (the sum of the known costs; ``unpriced_calls``
    counts those without), cache hit rate. Per session also peak fullness, compactions and the agent's own cost;
    per tool the tool results' estimated tokens and the calls that used it."""
    where = _since(since)
    if by == "day":
        return fetch(con, f"SELECT day, {SUMS} FROM call_rollup WHERE {where} GROUP BY day ORDER BY day")
    if by in ("project", "agent"):
        return fetch(con, f"SELECT {by}, {SUMS} FROM call_rollup WHERE {where} GROUP BY {by} "
                           f"ORDER BY cost_usd DESC NULLS LAST, {by}")
    if by == "model":
        return fetch(con, f"SELECT model, any_value(price_key) AS price_key, {SUMS} FROM call_rollup "
                           f"WHERE {where} GROUP BY model ORDER BY cost_usd DESC NULLS LAST, model")
    if by in ATTRIBUTION_GROUPS:
        return fetch(con, attribution_query(by, where))
    if by == "session":
        return fetch(con, session_query(since, None, "last_call NULLS FIRST"))
    if by == "tool":
        return fetch(con, f"""
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



def totals(con: Any, since: date | None = None) -> dict[str, Any]:
    """The figures of every call since ``since`` (None: all) as :func:`summarize` gives a group's: one dict, empty
    when the index holds no call."""
    rows = fetch(con, f"SELECT {SUMS} FROM call_rollup WHERE {_since(since)}")
    return rows[0] if rows else {}
