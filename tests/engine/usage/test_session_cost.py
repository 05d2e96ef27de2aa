"""A session's cost, one definition (issue 27): main + subagents + compaction calls, computed once
(:class:`engine.usage.costs.SessionCost`) and the same in every view — the status bar (the window's
:class:`engine.workbench.views.SessionView`), the Tools tab and ``ctxbench tools``, the usage index (the Usage view
and ``ctxbench usage``), the JSON and Markdown exports — for every shared session, read from its file and from
its import."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from app.cli_tools import cmd_tools
from engine import export
from engine.context.conversation import Session
from engine.ingest import import_source
from engine.sources.detect import detect_format
from engine.sources.discovery import SourceEntry
from engine.sources.readers import read_source
from engine.usage.costs import (
    RecordsCost,
    SessionCost,
    add_costs,
    folder_cost,
    folder_records,
    price_table,
    session_cost,
    source_cost,
    usd_text,
)
from engine.usage.rows import rows_of
from engine.workbench.analysis import compute_tools
from tests.conftest import SHARED

SESSIONS_DIR = SHARED / "data" / "sessions"
SESSIONS = sorted([*(SESSIONS_DIR / "claude-code").glob("*.jsonl"), *(SESSIONS_DIR / "codex").glob("*.jsonl")])
needs_shared = pytest.mark.skipif(not SESSIONS, reason="the shared sessions are not on this machine")


def _same(a: dict[str, Any], b: dict[str, Any]) -> None:
    """Two costs' JSON: equal, dollar sums to 1e-12 (a sum of per-call costs rounded to 8 decimals is one view's)."""
    assert a.keys() == b.keys()
    for key, value in a.items():
        if isinstance(value, dict):
            _same(value, b[key])
        elif isinstance(value, float):
            assert value == pytest.approx(b[key], rel=1e-12, abs=1e-12), key
        else:
            assert value == b[key], key


def _usage_rows(path: Path) -> list[dict[str, Any]]:
    src = read_source(path, detect_format(path))
    entry = SourceEntry(agent=src.format, path=path, session_id=src.session_id, project="p", started="",
                        last_activity="", calls=0, last_prompt_tokens=None, window=None, percent_full=None)
    return rows_of(entry, src, price_table(), "f").calls


def _json_tools(path: Path) -> dict[str, Any]:
    out: list[dict[str, Any]] = []
    cmd_tools(argparse.Namespace(path=path, top=5, json=True), out.append, RuntimeError)
    return out[0]


@needs_shared
@pytest.mark.parametrize("path", SESSIONS, ids=lambda p: p.name[:24])
def test_every_view_shows_the_same_cost(path: Path, tmp_path: Path) -> None:
    src = read_source(path, detect_format(path))
    ours = source_cost(src)
    assert ours.total.calls and ours.usd is not None and ours.total.unpriced == 0
    # the usage index (Usage view, ctxbench usage): one row per call the session paid for, the same parts
    rows = _usage_rows(path)
    by_kind = {k: [r for r in rows if r["kind"] == k] for k in ("main", "task", "compaction")}
    assert len(rows) == ours.total.calls
    for part, kind in ((ours.main, "main"), (ours.subagents, "task"), (ours.compaction, "compaction")):
        assert part.calls == len(by_kind[kind])
        assert (part.usd or 0) == pytest.approx(sum(r["cost_usd"] for r in by_kind[kind]), rel=1e-12)
    # the import's folder (status bar, Tools tab, exports) gives the same figures, part by part
    folder = tmp_path / "s"
    import_source(path, session_dir=folder)
    theirs = folder_cost(folder)
    for a, b in ((ours.main, theirs.main), (ours.subagents, theirs.subagents), (ours.compaction, theirs.compaction)):
        assert (a.calls, a.unpriced) == (b.calls, b.unpriced) and (a.usd or 0) == pytest.approx(b.usd or 0, rel=1e-12)
    assert theirs.agent_usd == ours.agent_usd
    # the window's view of the folder (the status bar's figure: engine.workbench.views.session_view)
    session = Session.load(folder)
    try:
        view_cost = _view_cost(session)
    finally:
        session.close()
    _same(view_cost.to_json(), theirs.to_json())
    # the Tools tab (ToolsReady) and ctxbench tools, on the folder and on the file
    _, _, costs = compute_tools(folder)
    assert costs is not None and costs.session is not None
    _same(costs.session.to_json(), theirs.to_json())
    _same(costs.total.to_json(), theirs.main.to_json())  # what the tools share out
    _same(_json_tools(folder)["cost"], theirs.to_json())
    on_file = _json_tools(path)["cost"]
    assert on_file["calls"] == theirs.total.calls and on_file["cost_usd"] == pytest.approx(theirs.usd, rel=1e-12)
    # the exports
    data = export.read_session(folder)
    _same(json.loads(export.calls_json(data))["cost"], theirs.to_json())
    md = export.session_markdown(data)
    assert f"- **Cost:** {usd_text(theirs.usd or 0)} for {theirs.total.calls:,} calls at litellm's prices " \
           f"({theirs.breakdown()})" in md.splitlines()


def _view_cost(session: Session) -> SessionCost:
    from engine.workbench.views import read_timeline

    timeline, _ = read_timeline(session, [])
    return folder_cost(session.path, records=timeline)


@needs_shared
def test_258c7280_costs_its_subagents_and_its_compaction() -> None:
    path = SESSIONS_DIR / "claude-code" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"
    cost = session_cost(path)
    assert cost is not None
    assert (cost.main.calls, cost.subagents.calls, cost.compaction.calls) == (152, 3, 1)
    assert cost.subagents.usd and cost.compaction.usd and cost.main.usd
    assert cost.usd == pytest.approx(cost.main.usd + cost.subagents.usd + cost.compaction.usd)
    # the compaction call without its output (the file holds only a placeholder): a lower bound, marked +
    assert "main $11.85 (152 calls) · subagents $0.2634 (3 calls) · compaction $0.1083+ (1 call)" == cost.breakdown()


@needs_shared
def test_calls_only_progress_records_hold_are_a_subagents_cost(tmp_path: Path) -> None:
    path = SESSIONS_DIR / "claude-code" / "subagent.jsonl"  # its subagent file was not published
    cost = session_cost(path)
    assert cost is not None and cost.subagents.calls == 5 and cost.subagents.usd
    folder = tmp_path / "s"
    report = import_source(path, session_dir=folder)
    (sub,) = report.subagents  # a child session of its calls alone, linked from the Task call
    assert sub["calls"] == 5 and sub["messages"] == 0
    assert len(folder_records(folder / sub["session"])) == 5
    _same(folder_cost(folder).subagents.to_json(), cost.subagents.to_json())


def test_one_hour_cache_writes_are_priced_in_every_view() -> None:
    table = price_table()
    if table is None:
        pytest.skip("litellm is not installed")
    record = {"model": "claude-opus-4-6", "provider_prompt_tokens": 1000, "cache_write_tokens": 900,
              "cache_read_tokens": 0, "completion_tokens": 10}
    five = RecordsCost(None, 0, 0)
    hour = SessionCost(five).with_main([{**record, "cache_write_1h_tokens": 900}], table)
    plain = SessionCost(five).with_main([record], table)
    assert hour.usd is not None and plain.usd is not None and hour.usd > plain.usd


def test_parts_add_up_and_unknown_stays_unknown() -> None:
    assert add_costs().usd is None
    total = add_costs(RecordsCost(1.0, 2, 0), RecordsCost(None, 3, 3, "no price for 'x'"))
    assert (total.usd, total.calls, total.unpriced, total.problem) == (1.0, 5, 3, "no price for 'x'")
    cost = SessionCost(RecordsCost(1.0, 2, 0), RecordsCost(None, 3, 3, "no price for 'x'"), agent_usd=1.5)
    assert cost.breakdown() == "main $1.00 (2 calls) · subagents unknown (3 calls)"
    data = cost.to_json()
    assert data["cost_usd"] == 1.0 and data["unpriced_calls"] == 3 and data["agent_cost_usd"] == 1.5
    assert data["difference_usd"] == -0.5 and data["subagents"]["cost_usd"] is None


@needs_shared
@pytest.mark.parametrize("name", ["258c7280-ae70-4798-800f-63464d01a85d.jsonl",
                                  "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"])
def test_a_placeholder_output_is_no_figure(name: str, tmp_path: Path) -> None:
    """Claude Code 2.1.39's compaction call: its file holds one line whose ``output_tokens`` (6) is the streaming
    placeholder of a summary of thousands of tokens: the output is unknown, the call priced without it (a lower
    bound, said), in the reader, the import's record and every view's cost."""
    path = SESSIONS_DIR / "claude-code" / name
    src = read_source(path, "claude-code")
    (comp,) = src.compactions
    assert comp.cost is not None and comp.cost.completion_tokens is None and comp.cost.completion_placeholder == 6
    cost = source_cost(src)
    assert cost.compaction.partial == 1 and cost.total.lower_bound and cost.compaction.usd
    assert "compaction $" in cost.breakdown() and "+ (1 call)" in cost.breakdown()
    assert any("without their output" in line for line in cost.lines())
    folder = tmp_path / "s"
    import_source(path, session_dir=folder)
    (record,) = [e for e in export.read_session(folder).compactions]
    assert record.cost is not None
    assert record.cost["completion_tokens"] is None and record.cost["completion_placeholder"] == 6
    md = export.session_markdown(export.read_session(folder))
    assert "unknown (the file holds only a streaming placeholder, 6) completion tokens" in md
    assert "+ (without the output) at litellm's prices" in md
    # a main call's figures are not touched: only a compaction's call is checked against what it wrote
    assert all(c.completion_placeholder is None for c in src.calls)
