"""``ctxbench tools`` as a subprocess on a real Claude Code session, read in place and imported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.usage.costs import usd_text
from tests.app.test_cli import assert_one_line_error, ctxbench, events
from tests.engine.context.test_attribution import _raw_claude_tools
from tests.engine.sources.conftest import PERSISTED_CLAUDE, SWE

pytestmark = pytest.mark.skipif(not PERSISTED_CLAUDE.exists(), reason="the shared sessions are not on this machine")


def test_tools_json_matches_the_raw_lines() -> None:
    calls, results, args = _raw_claude_tools()
    proc = ctxbench("tools", str(PERSISTED_CLAUDE), "--top", "3", "--json")
    assert proc.returncode == 0, proc.stderr
    [doc] = events(proc)
    assert doc["type"] == "tools" and doc["session"] == PERSISTED_CLAUDE.name
    assert {t["tool"]: t["calls"] for t in doc["tools"]} == dict(calls)
    assert {t["tool"]: t["results"] for t in doc["tools"]} == dict(results)
    assert {t["tool"]: t["argument_tokens"] for t in doc["tools"]} == args
    assert doc["tool_tokens"] == sum(t["tokens"] for t in doc["tools"]) <= doc["history_tokens"]
    assert [t["tokens"] for t in doc["tools"]] == sorted((t["tokens"] for t in doc["tools"]), reverse=True)
    assert len(doc["largest"]) == 3 and doc["largest"][0]["tool"] == "Read"
    assert [r["tokens"] for r in doc["largest"]] == sorted((r["tokens"] for r in doc["largest"]), reverse=True)


def test_tools_text_and_links_into_an_imported_folder(tmp_path: Path) -> None:
    folder = tmp_path / "cc"
    assert ctxbench("import", str(PERSISTED_CLAUDE), "--session", str(folder), "--no-model-info").returncode == 0
    [doc] = events(ctxbench("tools", str(folder), "--json"))
    stored = [json.loads(x) for f in [folder / "history.jsonl", *sorted((folder / "dialog").glob("*.jsonl"))]
              for x in f.read_text(encoding="utf-8").splitlines() if x.strip()]
    by_id = {m["id"]: m for m in stored}
    assert len(doc["largest"]) == 10
    assert all(by_id[r["message_id"]]["role"] == "tool" for r in doc["largest"])
    from_file = events(ctxbench("tools", str(PERSISTED_CLAUDE), "--json"))[0]
    assert [(t["tool"], t["tokens"]) for t in doc["tools"]] == [(t["tool"], t["tokens"]) for t in from_file["tools"]]

    proc = ctxbench("tools", str(folder), "--top", "2")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    assert out[0].startswith(f"{folder.name}: {doc['tool_tokens']:,} of {doc['history_tokens']:,} history tokens")
    cost = doc["cost"]  # the session's cost at litellm's prices, the same from the folder and the file
    assert cost["calls"] > 0 and cost["cost_usd"] > 0 and cost["cost_usd"] == from_file["cost"]["cost_usd"]
    # the session's one cost (main + subagents + compaction calls) with its parts (engine.usage.costs.SessionCost)
    plus = "+" if cost["partial_calls"] else ""
    assert out[1].startswith(f"cost: {usd_text(cost['cost_usd'])}{plus} for {cost['calls']} calls at litellm's prices"
                             f" — main {usd_text(cost['main']['cost_usd'])}")
    assert out[2].split() == ["tool", "calls", "results", "arg", "tokens", "result", "tokens", "share", "calls", "$",
                              "context", "$"]
    assert out[3].split()[0] == doc["tools"][0]["tool"]
    for line, tool in zip(out[3:], doc["tools"], strict=False):  # the cost columns are the JSON's figures
        assert line.split()[0] == tool["tool"]
        assert line.split()[-2:] == [f"${tool['calls_cost_usd']:,.4f}", f"${tool['context_cost_usd']:,.4f}"]
    totals = doc["tool_costs"]
    row = 3 + len(doc["tools"])
    assert out[row].split()[:2] == ["(all", "tools)"]
    assert out[row].split()[-2:] == [f"${totals['calls_cost_usd']:,.4f}", f"${totals['context_cost_usd']:,.4f}"]
    assert out[row + 1].startswith(f"cost by tool: responses that called a tool ${totals['calls_cost_usd']:,.4f} "
                                   f"({totals['calls_cost_share']:.1%} of the main calls' "
                                   f"${cost['main']['cost_usd']:,.4f}; ")
    assert out[-3] == "largest tool results (2):" and doc["largest"][1]["message_id"] in out[-1]
    # the imported folder's calls are the file's: the same cost by tool
    assert doc["tools"] == from_file["tools"] and doc["tool_costs"] == from_file["tool_costs"]


def test_tools_json_costs_add_up_to_the_session_total() -> None:
    [doc] = events(ctxbench("tools", str(PERSISTED_CLAUDE), "--top", "0", "--json"))
    totals, total = doc["tool_costs"], doc["cost"]["main"]["cost_usd"]  # the tools share out the main calls
    assert doc["cost"]["cost_usd"] >= total
    assert totals["total"]["cost_usd"] == total > 0 and totals["total"]["unpriced_calls"] == 0
    calls = sum(t["calls_cost_usd"] for t in doc["tools"])
    assert calls == pytest.approx(totals["calls_cost_usd"], abs=1e-6)
    assert calls + totals["no_tool_cost_usd"] == pytest.approx(total, abs=1e-6)
    context = sum(t["context_cost_usd"] for t in doc["tools"])
    assert context == pytest.approx(totals["context_cost_usd"], abs=1e-6)
    assert 0 < context <= totals["prompt_cost_usd"] < total
    for tool in doc["tools"]:
        assert tool["calls_cost_share"] == round(tool["calls_cost_usd"] / total, 4)
        assert 0 < tool["responses"] <= tool["calls"] and tool["unpriced_responses"] == tool["unpriced_prompts"] == 0


def test_tools_without_usage_has_unknown_costs_not_zero() -> None:
    traj = SWE / "marshmallow-1867.function_calling.traj"  # SWE-agent: the calls' usage is not recorded
    [doc] = events(ctxbench("tools", str(traj), "--json"))
    assert doc["cost"]["cost_usd"] is None and doc["tool_costs"]["calls_cost_usd"] is None
    assert doc["tools"] and all(t["calls_cost_usd"] is None for t in doc["tools"])
    assert all(t["unpriced_responses"] == t["responses"] > 0 for t in doc["tools"] if t["calls"])
    out = ctxbench("tools", str(traj), "--top", "0").stdout.splitlines()
    assert out[-1].startswith("cost by tool: unknown (no call has a price: ")
    assert out[-2].split()[:2] == ["(all", "tools)"] and out[-2].split()[-2:] == ["?", "?"]


def test_tools_errors(tmp_path: Path) -> None:
    assert_one_line_error(ctxbench("tools", str(tmp_path / "none.jsonl")), "no session folder or file at")
    proc = ctxbench("tools", str(PERSISTED_CLAUDE), "--top", "-1")
    assert proc.returncode == 2 and "expected 0 or more" in proc.stderr
