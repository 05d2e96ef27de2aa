"""The usage index's rollups: the queries read them, and their answers are the call rows' answers."""

from __future__ import annotations

import json
import math
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from engine.usage import queries, storage
from engine.usage.index import UsageIndex
from engine.usage.queries import fetch, summarize
from engine.usage.report import SESSION_COLUMNS, _where, usage_report
from tests.engine.usage.test_usage_index import _call, _result, _update, _user

# the queries as they were on the call rows (before the rollups): the reference
_RAW_SUMS = """count(*) AS calls,
    sum(prompt_tokens) AS prompt_tokens, sum(input_tokens) AS input_tokens,
    sum(cache_read_tokens) AS cache_read_tokens, sum(cache_write_tokens) AS cache_write_tokens,
    sum(output_tokens) AS output_tokens, sum(reasoning_tokens) AS reasoning_tokens,
    sum(cost_usd) AS cost_usd, count(*) FILTER (WHERE cost_usd IS NULL) AS unpriced_calls,
    sum(cache_read_tokens) / nullif(sum(prompt_tokens), 0) AS cache_hit_rate"""
_SESSION = """SELECT c.agent, c.project, c.session_id, c.file_id, min(c.ts) AS first_call, max(c.ts) AS last_call,
    string_agg(DISTINCT c.model, ',' ORDER BY c.model) AS models, {sums}, {extra}
    any_value(s.peak_fullness) AS peak_fullness, any_value(s.compactions) AS compactions,
    any_value(s.agent_cost_usd) AS agent_cost_usd, any_value(s.title) AS title, any_value(s.path) AS path,
    count(*) FILTER (WHERE c.kind = 'main') AS main_calls, count(*) FILTER (WHERE c.kind = 'task') AS subagent_calls,
    count(*) FILTER (WHERE c.kind = 'compaction') AS compaction_calls,
    sum(c.cost_usd) FILTER (WHERE c.kind = 'main') AS main_cost_usd,
    sum(c.cost_usd) FILTER (WHERE c.kind = 'task') AS subagents_cost_usd,
    sum(c.cost_usd) FILTER (WHERE c.kind = 'compaction') AS compaction_cost_usd,
    count(*) FILTER (WHERE c.kind = 'main' AND c.cost_usd IS NULL) AS main_unpriced,
    count(*) FILTER (WHERE c.kind = 'task' AND c.cost_usd IS NULL) AS subagents_unpriced,
    count(*) FILTER (WHERE c.kind = 'compaction' AND c.cost_usd IS NULL) AS compaction_unpriced
    FROM calls c LEFT JOIN sessions s USING (file_id) WHERE {where}
    GROUP BY c.agent, c.project, c.session_id, c.file_id ORDER BY {order}, c.file_id"""

_PEAK = "any_value(s.peak_prompt_tokens) AS peak_prompt_tokens, any_value(s.window) AS window,"


def _raw_summarize(con: Any, by: str, where: str) -> list[dict[str, Any]]:
    if by == "day":
        return fetch(con, f"SELECT day, {_RAW_SUMS} FROM calls WHERE {where} GROUP BY day ORDER BY day")
    if by in ("project", "agent"):
        return fetch(con, f"SELECT {by}, {_RAW_SUMS} FROM calls WHERE {where} GROUP BY {by} "
                           f"ORDER BY cost_usd DESC NULLS LAST, {by}")
    if by == "model":
        return fetch(con, f"SELECT model, any_value(price_key) AS price_key, {_RAW_SUMS} FROM calls WHERE {where} "
                           "GROUP BY model ORDER BY cost_usd DESC NULLS LAST, model")
    if by == "session":
        return fetch(con, _SESSION.format(
            sums=_RAW_SUMS.replace("sum(", "sum(c."), where=where.replace("day", "c.day"), order="last_call",
            extra=_PEAK))
    assert by == "tool"
    return fetch(con, f"""
        WITH results AS (
            SELECT tool, count(*) AS results, sum(tokens) AS result_tokens FROM tool_results
            WHERE {where} GROUP BY tool),
        used AS (
            SELECT tool, count(*) AS calls, sum(cost_usd / len(tools)) AS cost_usd_of_calls FROM (
                SELECT unnest(tools) AS tool, cost_usd, tools FROM calls WHERE {where}) GROUP BY tool)
        SELECT coalesce(r.tool, u.tool) AS tool, coalesce(u.calls, 0) AS calls,
               coalesce(r.results, 0) AS results, coalesce(r.result_tokens, 0) AS result_tokens,
               u.cost_usd_of_calls
        FROM results r FULL OUTER JOIN used u ON r.tool = u.tool ORDER BY result_tokens DESC, tool""")


def _raw_report(con: Any, since: date | None, until: date | None) -> dict[str, Any]:
    where = _where(since, until)
    return {
        "by_day_model": fetch(con, f"""
            SELECT day, model, count(*) AS calls, sum(cost_usd) AS cost_usd,
                   count(*) FILTER (WHERE cost_usd IS NULL) AS unpriced_calls,
                   sum(prompt_tokens) AS prompt_tokens, sum(output_tokens) AS output_tokens,
                   coalesce(sum(prompt_tokens), 0) + coalesce(sum(output_tokens), 0) AS tokens
            FROM calls WHERE {where} GROUP BY day, model ORDER BY day, model"""),
        "sessions": fetch(con, _SESSION.format(sums=_RAW_SUMS.replace("sum(", "sum(c."), extra=_PEAK,
                                                where=_where(since, until, "c.day"), order="cost_usd DESC NULLS LAST")),
        "projects": _raw_summarize(con, "project", where),
        "models": _raw_summarize(con, "model", where),
        "tools": fetch(con, f"""
            WITH r AS (SELECT tool, count(*) AS results, sum(tokens) AS result_tokens,
                              count(DISTINCT file_id) AS sessions, max(tokens) AS largest
                       FROM tool_results WHERE {where} GROUP BY tool),
                 u AS (SELECT tool, count(*) AS tool_calls, sum(share) AS cost_usd_of_calls FROM (
                           SELECT unnest(tools) AS tool, cost_usd / len(tools) AS share FROM calls WHERE {where})
                       GROUP BY tool)
            SELECT r.*, coalesce(u.tool_calls, 0) AS tool_calls, u.cost_usd_of_calls
            FROM r LEFT JOIN u USING (tool) ORDER BY result_tokens DESC, tool LIMIT 20"""),
        "total": fetch(con, f"SELECT {_RAW_SUMS} FROM calls WHERE {where}")[0],
    }


def _same(a: Any, b: Any) -> bool:
    """Equal, floats up to their summing order."""
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """Three sessions over three days, two projects, a model without a price, tools with and without results."""
    projects = tmp_path / "home" / ".claude" / "projects"
    _write(projects / "-home-u-proj" / "s1.jsonl",
           _user(1, "2026-03-01T10:00:00.000Z") + _call(2, "2026-03-01T10:00:05.000Z", tool="Bash")
           + _result(3, "2026-03-01T10:00:06.000Z", "tu2") + _call(4, "2026-03-01T10:00:09.000Z", tool="Read")
           + _result(5, "2026-03-02T00:00:01.000Z", "tu4") + _call(6, "2026-03-02T00:00:03.000Z", tool="Edit"))
    _write(projects / "-home-u-proj" / "s2.jsonl",
           _user(1, "2026-03-02T11:00:00.000Z") + _call(2, "2026-03-02T11:00:01.000Z", model="mystery-model-9")
           + _call(3, "2026-03-02T11:00:09.000Z", model="claude-sonnet-4-5", tool="Bash")
           + _result(4, "2026-03-02T11:00:10.000Z", "tu3"))
    _write(projects / "-home-u-other" / "s3.jsonl",
           _user(1, "2026-03-03T08:00:00.000Z") + _call(2, "2026-03-03T08:00:01.000Z", model="mystery-model-9"))
    return tmp_path / "home"


def _no_order_ties(rows: list[dict[str, Any]], key: str = "file_id") -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: str(r.get(key)))


def _check_against_raw(ix: UsageIndex) -> None:
    con = ix.connect()
    try:
        for since in (None, date(2026, 3, 2)):
            where = "TRUE" if since is None else f"day >= DATE '{since.isoformat()}'"
            for by in ("day", "project", "agent", "model", "session", "tool"):
                ours, raw = summarize(con, by, since), _raw_summarize(con, by, where)
                if by == "session":
                    ours, raw = _no_order_ties(ours), _no_order_ties(raw)
                assert ours and _same(ours, raw), (by, since, ours, raw)
            assert _same(ix.totals(since), fetch(con, f"SELECT {_RAW_SUMS} FROM calls WHERE {where}")[0])
        for since, until in ((None, None), (date(2026, 3, 2), date(2026, 3, 2)), (date(2027, 1, 1), None)):
            report = usage_report(ix, since, until)
            raw = _raw_report(con, since, until)
            for name, value in raw.items():
                ours = getattr(report, name)
                if name == "sessions":  # the view's columns of each session (report.SESSION_COLUMNS)
                    keys = list(ours[0]) if ours else []
                    assert len(keys) == SESSION_COLUMNS.count(", ") or not ours  # one comma is nullif's
                    value = [{k: v[k] for k in keys} for v in value]
                    ours, value = _no_order_ties(ours, "path"), _no_order_ties(value, "path")
                assert _same(ours, value), (name, since, until, ours, value)
    finally:
        con.close()


def test_rollup_answers_are_the_call_rows_answers(home: Path, tmp_path: Path) -> None:
    ix = UsageIndex(tmp_path / "usage")
    _update(ix, home)
    manifest = ix.manifest()
    assert manifest.rollups_current() and all((ix.root / manifest.single[n]).is_file() for n in queries.ROLLUPS)
    _check_against_raw(ix)
    # the session of two days has one rollup row a day (and one per model)
    con = ix.connect()
    assert con.execute("SELECT count(*) FROM call_rollup").fetchone()[0] == 5
    con.close()


def test_rollups_follow_incremental_updates(home: Path, tmp_path: Path) -> None:
    ix = UsageIndex(tmp_path / "usage")
    _update(ix, home)
    ix.totals()  # a cached connection: must see the rewritten files
    with open(home / ".claude" / "projects" / "-home-u-proj" / "s2.jsonl", "a") as fh:
        fh.write(_call(5, "2026-03-02T12:00:00.000Z", tool="Grep") + _result(6, "2026-03-04T00:00:01.000Z", "tu5")
                 + _call(7, "2026-03-04T00:00:05.000Z", model="claude-haiku-4-5"))
    report = _update(ix, home)
    assert report.read == 1 and report.days_rewritten == 2
    assert ix.totals()["calls"] == 8
    _check_against_raw(ix)
    con = ix.connect()
    incremental = con.execute("SELECT * FROM call_rollup ORDER BY ALL").fetchall()
    tools = con.execute("SELECT * FROM tool_rollup ORDER BY ALL").fetchall()
    sessions = con.execute("SELECT * FROM session_rollup ORDER BY ALL").fetchall()
    con.close()
    ix.rebuild_rollups()  # from scratch: the same rows
    con = ix.connect()
    assert con.execute("SELECT * FROM call_rollup ORDER BY ALL").fetchall() == incremental
    assert con.execute("SELECT * FROM tool_rollup ORDER BY ALL").fetchall() == tools
    assert con.execute("SELECT * FROM session_rollup ORDER BY ALL").fetchall() == sessions
    con.close()


def test_an_index_whose_rollups_went_gets_them_again(home: Path, tmp_path: Path) -> None:
    """Rollup files the manifest names but that are gone: a query rebuilds them from the day files (and says so);
    an update that meets a missing one rebuilds them all, not only the touched days' rows."""
    ix = UsageIndex(tmp_path / "usage")
    _update(ix, home)
    before, days = ix.query("session"), ix.query("day")
    manifest = ix.manifest()
    for name in ("call_rollup", "tool_rollup"):
        (ix.root / manifest.single[name]).unlink()
    again = UsageIndex(ix.root)
    assert again.query("day") == days
    assert _no_order_ties(again.query("session")) == _no_order_ties(before)
    assert any(manifest.single["call_rollup"] in n and "missing" in n for n in again.notices), again.notices
    rebuilt = ix.manifest()
    assert rebuilt.generation == manifest.generation + 1 and rebuilt.rollups_current()
    assert all((ix.root / rebuilt.single[n]).is_file() for n in queries.ROLLUPS)
    (ix.root / rebuilt.single["call_rollup"]).unlink()
    with open(home / ".claude" / "projects" / "-home-u-other" / "s3.jsonl", "a") as fh:
        fh.write(_call(3, "2026-03-03T08:00:09.000Z", model="mystery-model-9"))
    report = _update(ix, home)
    assert report.read == 1 and any("call_rollup" in w and "missing" in w for w in report.warnings), report.warnings
    _check_against_raw(ix)


def test_empty_index_totals(tmp_path: Path) -> None:
    ix = UsageIndex(tmp_path / "usage")
    assert ix.totals()["calls"] == 0 and ix.totals()["unpriced_calls"] == 0
    assert usage_report(ix).sessions == [] and usage_report(ix).tools == []


def test_a_calls_cost_is_split_over_its_tool_calls_and_older_rollups_are_built_again(
        home: Path, tmp_path: Path) -> None:
    """A response calling Read twice and Bash once: Read gets 2/3 of its cost, Bash 1/3 (as ``ctxbench tools``
    splits it), so the tools' costs add up to the calls' cost. Rollups written by an older version are built
    in memory by a query and written by the next update."""
    line = json.loads(_call(2, "2026-03-05T10:00:05.000Z", tool="Read"))
    use = line["message"]["content"][1]
    line["message"]["content"] += [dict(use, id="tu2b"), dict(use, id="tu2c", name="Bash")]
    folder = home / ".claude" / "projects" / "-home-u-three"
    folder.mkdir(parents=True)
    (folder / "s4.jsonl").write_text(_user(1, "2026-03-05T10:00:00.000Z") + json.dumps(line) + "\n")
    ix = UsageIndex(tmp_path / "usage")
    _update(ix, home)
    _check_against_raw(ix)
    con = ix.connect()
    try:
        cost = con.execute("SELECT cost_usd FROM calls WHERE day = DATE '2026-03-05'").fetchone()[0]
        split = dict(con.execute("SELECT tool, sum(cost_usd_of_calls) FROM tool_rollup WHERE day = DATE '2026-03-05' "
                                 "GROUP BY tool").fetchall())
        total_with_tools = con.execute("SELECT sum(cost_usd) FROM calls WHERE len(tools) > 0").fetchone()[0]
    finally:
        con.close()
    assert cost > 0 and split == pytest.approx({"Read": cost * 2 / 3, "Bash": cost / 3})
    assert sum(r["cost_usd_of_calls"] for r in ix.query("tool")) == pytest.approx(total_with_tools)
    manifest = ix.manifest()
    manifest.rollups = 1  # an older version's rollups
    (ix.root / storage.MANIFEST).write_bytes(manifest.to_bytes())
    again = UsageIndex(ix.root)
    assert sum(r["cost_usd_of_calls"] for r in again.query("tool")) == pytest.approx(total_with_tools)  # in memory
    _update(again, home)  # written by the next update
    assert again.manifest().rollups == queries.ROLLUP_VERSION
    assert sum(r["cost_usd_of_calls"] for r in again.query("tool")) == pytest.approx(total_with_tools)
