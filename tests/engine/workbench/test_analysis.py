"""The service's analyses of the open session: the context diff between two calls, tokens by tool,
the subagents on the parent's timeline — on a real Claude Code session imported through the service,
compared with what ``ctxbench diff`` / ``ctxbench tools`` compute on the same folder."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.context.diff import ContextDiff
from engine.workbench import events as ev
from tests.engine.workbench.test_workbench import Rig, rig, server, settings  # noqa: F401  (fixtures)

ROOT = Path(__file__).resolve().parents[3]
SHARED = ROOT.parent / "shared" / "data" / "sessions"
PARENT = SHARED / "claude-code" / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"


async def _imported(rig: Rig) -> Path:  # noqa: F811
    if not PARENT.exists():
        pytest.skip(f"{PARENT} is not here")
    await rig.wb.import_transcript(PARENT)
    await rig.until(lambda: bool(rig.of(ev.SessionLoaded)))
    assert rig.wb.session is not None
    return rig.wb.session.path


@pytest.mark.asyncio
async def test_diff_across_the_compaction(rig: Rig) -> None:  # noqa: F811
    await _imported(rig)
    rig.wb.diff_calls(71, 72)
    await rig.until(lambda: bool(rig.of(ev.DiffReady)))
    diff = rig.of(ev.DiffReady)[-1].diff
    assert isinstance(diff, ContextDiff)
    assert (diff.a, diff.b) == (71, 72)
    assert [i.kind for i in diff.entered][:1] == ["summary"]
    assert len(diff.left) == 158
    assert (diff.prompt_a, diff.prompt_b) == (167_094, 42_603)
    assert diff.compactions == (0,)


@pytest.mark.asyncio
async def test_a_call_out_of_range_is_a_notice(rig: Rig) -> None:  # noqa: F811
    await _imported(rig)
    rig.wb.diff_calls(1, 999)
    await rig.until(lambda: any("out of range" in n.text for n in rig.of(ev.Notice)))
    assert not rig.of(ev.DiffReady)


@pytest.mark.asyncio
async def test_tools_equal_the_cli(rig: Rig) -> None:  # noqa: F811
    folder = await _imported(rig)
    rig.wb.tool_attribution()
    await rig.until(lambda: bool(rig.of(ev.ToolsReady)))
    got = rig.of(ev.ToolsReady)[-1]
    out = subprocess.run([sys.executable, "-m", "app.cli", "tools", str(folder), "--json"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    cli = json.loads(out)
    mine = got.attribution.to_json()
    # the CLI adds each tool's cost (engine.usage.tool_costs) to the attribution's fields
    assert mine["tools"] == [{k: t[k] for k in mine["tools"][0]} for t in cli["tools"]]
    assert all("calls_cost_usd" in t and "context_cost_usd" in t for t in cli["tools"])
    # the cost by tool: the same figures as the CLI's JSON (engine.usage.tool_costs on the same folder)
    costs = got.costs
    assert costs is not None and costs.total.calls == 143 and costs.total.usd is not None
    assert {k: v for k, v in costs.to_json().items() if k != "tools"} == cli["tool_costs"]
    keys = [k for k in cli["tools"][0] if k not in mine["tools"][0]]
    assert "calls_cost_usd" in keys and "context_cost_share" in keys
    assert [costs.of(t["tool"]).to_json(costs.total.usd) for t in cli["tools"]] == \
        [{k: t[k] for k in ("tool", *keys)} for t in cli["tools"]]
    # the session's cost (main + subagents + compaction calls) is the CLI's, its main part what the tools share out
    assert costs.session is not None and cli["cost"] == costs.session.to_json()
    assert cli["cost"]["main"]["cost_usd"] == costs.total.usd and cli["tool_costs"]["calls_cost_usd"] > 0
    assert costs.session.subagents.calls == 13 and costs.session.compaction.calls == 1
    assert mine["history_tokens"] == cli["history_tokens"]
    assert [r["message_id"] for r in mine["largest"][:len(cli["largest"])]] == \
        [r["message_id"] for r in cli["largest"]][:len(mine["largest"])]
    assert set(got.locations) == {r.message_id for r in got.attribution.largest}
    assert set(got.locations.values()) <= {"live", *(p.stem for p in (folder / "dialog").glob("*.jsonl"))}
    assert "live" in got.locations.values() and len(set(got.locations.values())) > 1  # both kinds here


@pytest.mark.asyncio
async def test_subagents_in_the_view(rig: Rig) -> None:  # noqa: F811
    await _imported(rig)
    view = rig.of(ev.SessionLoaded)[-1].view
    assert len(view.subagents) == 1
    sub = view.subagents[0]
    assert sub.session == "subagents/a7be2f0"
    assert sub.model == "claude-haiku-4-5-20251001"
    assert sub.calls == 13 and sub.peak_prompt_tokens == 29_065 and sub.total_prompt_tokens == 313_135
    assert sub.call_index is not None
    rec = view.timeline[sub.call_index].record
    issuing = next(m for m in view.messages if m.get("id") == rec.message_id)
    assert any(c.get("id") == sub.parent_tool_call_id for c in issuing.get("tool_calls") or [])


@pytest.mark.asyncio
async def test_a_tool_result_has_one_size_in_the_tools_tab_the_archive_and_the_chat(
        rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """Issue 27: 258c7280's largest result (Write #61) was 10,283 tokens in the Tools tab and ``ctxbench tools``
    (the heuristic) but 9,810 in the Archive (the session counted with the offline model's tokenizer, the
    app's default): another agent's session is counted with the heuristic everywhere."""
    big = SHARED / "claude-code" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"
    if not big.exists():
        pytest.skip(f"{big} is not here")
    from engine.context.tokens import HeuristicEstimator, LocalEstimator

    rig.wb.core.settings = rig.wb.core.settings.replace(model="local/smollm2-135m-instruct", estimator="auto")
    assert isinstance(rig.wb.runtime.estimator(), LocalEstimator)  # what an own session would count with
    await rig.wb.open_source(big)
    await rig.until(lambda: bool(rig.of(ev.SessionLoaded)))
    session = rig.wb.session
    assert session is not None and isinstance(session.estimator, HeuristicEstimator)
    rig.wb.tool_attribution()
    await rig.until(lambda: bool(rig.of(ev.ToolsReady)))
    tools = rig.of(ev.ToolsReady)[-1]
    largest = tools.attribution.largest[0]
    assert (largest.tool, largest.index + 1, largest.tokens) == ("Write", 61, 10_283)
    day = tools.locations[largest.message_id]
    rig.wb.load_archive_day(day)
    await rig.until(lambda: bool(rig.of(ev.ArchiveMessages)))
    assert rig.of(ev.ArchiveMessages)[-1].tokens[largest.message_id] == largest.tokens
    view = rig.of(ev.SessionLoaded)[-1].view
    assert view.state.tokens.get(largest.message_id, largest.tokens) == largest.tokens  # the chat's count
    cli = json.loads(subprocess.run([sys.executable, "-m", "app.cli", "tools", str(big), "--json"], cwd=ROOT,
                                    capture_output=True, text=True, check=True).stdout)
    assert cli["largest"][0]["tokens"] == largest.tokens


@pytest.mark.asyncio
async def test_tool_attributions_asked_in_a_burst_are_coalesced(rig: Rig) -> None:  # noqa: F811
    """A followed file growing a call at a time asks for the Tools tab's figures each time: one worker thread at a
    time, the burst joined into one more attribution of the latest state (not one thread per call)."""
    await _imported(rig)
    part = rig.wb.analysis
    rig.wb.tool_attribution()
    await rig.until(lambda: bool(rig.of(ev.ToolsReady)))
    before, ready = part.tools_computed, len(rig.of(ev.ToolsReady))
    tasks = {rig.wb.tool_attribution() for _ in range(20)}
    assert len(tasks) == 1  # one task answers the whole burst
    await next(iter(tasks))
    assert part.tools_computed - before == 1 and len(rig.of(ev.ToolsReady)) == ready + 1
