"""Dollar cost by tool (engine.usage.tool_costs): a small history whose figures are worked out here by
hand, and the real Claude Code sessions checked against the session's total."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest

from engine.context.attribution import attribute
from engine.context.diff import CallPoint, History, history_from_source
from engine.model.messages import Message
from engine.sources.readers import read_source
from engine.usage.costs import call_record, record_cost, session_cost
from engine.usage.prices import CallCost, PriceTable, load_table
from engine.usage.tool_costs import ToolCost, price_records, session_tool_costs, tool_costs
from tests.engine.context.test_diff import call, msg
from tests.engine.sources.conftest import BIG_CLAUDE, PERSISTED_CLAUDE

needs_shared = pytest.mark.skipif(not PERSISTED_CLAUDE.exists(), reason="the shared sessions are not on this machine")

# per token: uncached input 1, cache read 0.1, cache write 2, output 10 (round numbers for the hand sums)
TABLE = PriceTable({"m": {"input_cost_per_token": 1.0, "output_cost_per_token": 10.0,
                          "cache_read_input_token_cost": 0.1, "cache_creation_input_token_cost": 2.0}})


class FixedEstimator:
    """A message is ``msg["tokens"]`` tokens; a text (a tool call's id + "function" + name + arguments)
    one token a character."""

    name = "fixed"

    def message(self, msg: Message) -> int:
        return int(msg.get("tokens", 0))

    def tools(self, tools: Sequence[dict[str, Any]] | None) -> int:
        return 0

    def text(self, text: str) -> int:
        return len(text)

    def framing(self) -> int:
        return 0


def _messages() -> list[Message]:
    # argument tokens (FixedEstimator.text): "c1"+"function"+"read"+"a" = 15, "c2functiongrepb" = 15,
    # "c0functionreadz" = 15, "c3functionreadcc" = 16
    return [
        msg(0, "user", "go", tokens=10),
        msg(1, "assistant", "", tokens=30, tool_calls=[call("c1", "read", "a"), call("c2", "grep", "b"),
                                                       call("c0", "read", "z")]),
        msg(2, "tool", "r1", tool_call_id="c1", tokens=100),
        msg(3, "tool", "g1", tool_call_id="c2", tokens=20),
        msg(4, "assistant", "", tokens=40, tool_calls=[call("c3", "read", "cc")]),
        msg(5, "tool", "r3", tool_call_id="c3", tokens=50),
        msg(6, "assistant", "so far so good", tokens=4),
        msg(7, "user", "continue", tokens=5),  # after a compaction that kept message 5
        msg(8, "assistant", "done", tokens=3),
    ]


def _history() -> tuple[History, list[CallCost]]:
    calls = [CallPoint(1, 0, 1, None, 1000), CallPoint(2, 0, 4, None, 1200), CallPoint(3, 0, 6, None, 1500),
             CallPoint(4, 5, 8, 0, 500)]
    costs = [
        TABLE.cost("m", prompt=1000, completion=10),  # 1000×1 + 10×10 = 1100; input side 1000
        TABLE.cost("m", prompt=1200, completion=20, cache_read=1000, cache_write=100),  # 100+200+100 + 200 = 600
        TABLE.cost("m", prompt=1500, completion=30, cache_read=1400),  # 140+100 + 300 = 540; input side 240
        TABLE.cost("no-such-model", prompt=500, completion=5),  # no price
    ]
    return History(_messages(), calls, [], FixedEstimator()), costs


def test_costs_by_tool_worked_out_by_hand() -> None:
    history, costs = _history()
    assert [c.usd for c in costs[:3]] == pytest.approx([1100, 600, 540]) and costs[3].usd is None
    assert [c.prompt_usd for c in costs[:3]] == pytest.approx([1000, 400, 240]) and costs[3].prompt_usd is None
    tc = tool_costs(history, costs)
    read, grep = tc.get("read"), tc.get("grep")
    assert read is not None and grep is not None and [t.tool for t in tc.tools] == ["read", "grep"]
    # call 1's response called read twice and grep once: 1100 × 2/3 and × 1/3; call 2's called read: 600;
    # call 3's and call 4's called no tool
    assert read.calls_usd == pytest.approx(1100 * 2 / 3 + 600) and (read.responses, read.unpriced_responses) == (2, 0)
    assert grep.calls_usd == pytest.approx(1100 / 3) and grep.responses == 1
    assert tc.no_tool_usd == pytest.approx(540) and tc.no_tool_responses == 2
    # call 2 held messages 0–3 at 400/1200 a token: read 15+15+100, grep 15+20;
    # call 3 held 0–5 at 240/1500: read 15+15+100+16+50, grep 35; call 4 (no price) held read's message 5
    assert read.context_usd == pytest.approx(130 * 400 / 1200 + 196 * 240 / 1500)
    assert grep.context_usd == pytest.approx(35 * 400 / 1200 + 35 * 240 / 1500)
    assert (read.prompts, read.unpriced_prompts, grep.prompts, grep.unpriced_prompts) == (3, 1, 2, 0)
    assert tc.total.usd == pytest.approx(2240) and (tc.total.calls, tc.total.unpriced) == (4, 1)
    assert "no-such-model" in tc.total.problem
    assert tc.calls_usd == pytest.approx(1700) and tc.calls_usd + (tc.no_tool_usd or 0) == pytest.approx(2240)
    assert tc.prompt_usd == pytest.approx(1640) and tc.context_usd == pytest.approx(read.context_usd + grep.context_usd)
    assert tc.scaled_calls == 0
    doc = tc.to_json()
    assert doc["calls_cost_share"] == round(1700 / 2240, 4) and doc["total"]["unpriced_calls"] == 1
    assert doc["tools"][0]["tool"] == "read" and doc["tools"][0]["context_cost_share"] == round(
        read.context_usd / 2240, 4)


def test_a_compaction_stops_the_removed_messages_costing() -> None:
    history, costs = _history()
    priced = [*costs[:3], TABLE.cost("m", prompt=500, completion=5)]  # call 4: 500 + 50
    kept = tool_costs(History(history.messages, history.calls, [], FixedEstimator()), priced)
    everything = [*history.calls[:3], replace(history.calls[3], start=0)]  # as if nothing had been compacted
    uncompacted = tool_costs(History(history.messages, everything, [], FixedEstimator()), priced)
    read, grep, grep_all = kept.get("read"), kept.get("grep"), uncompacted.get("grep")
    assert read is not None and grep is not None and grep_all is not None
    assert read.context_usd == pytest.approx(130 / 3 + 196 * 0.16 + 50 * 500 / 500)  # call 4 held message 5
    assert grep.context_usd == pytest.approx(35 / 3 + 35 * 0.16)  # not messages 1 and 3 any more
    assert grep_all.context_usd == pytest.approx(35 / 3 + 35 * 0.16 + 35 * 500 / 500)


def test_tool_tokens_above_the_provider_prompt_are_scaled_to_it() -> None:
    history = History([msg(0, "assistant", "", tokens=5, tool_calls=[call("c1", "read", "a")]),
                       msg(1, "tool", "x", tool_call_id="c1", tokens=300), msg(2, "assistant", "ok", tokens=1)],
                      [CallPoint(1, 0, 0, None, 100), CallPoint(2, 0, 2, None, 100)], [], FixedEstimator())
    costs = [TABLE.cost("m", prompt=100, completion=1), TABLE.cost("m", prompt=100, completion=1)]
    tc = tool_costs(history, costs)
    read = tc.get("read")
    assert read is not None and read.context_usd == pytest.approx(100)  # all of call 2's input, no more
    assert tc.scaled_calls == 1 and read.calls_usd == pytest.approx(110)


def test_unknown_prices_are_none_never_zero() -> None:
    history, _ = _history()
    unknown = [CallCost(None, problem="no price")] * 4
    tc = tool_costs(history, unknown)
    assert all(t.calls_usd is None and t.context_usd is None for t in tc.tools)
    assert tc.total.usd is None and tc.calls_usd is None and tc.context_usd is None and tc.no_tool_usd is None
    read = tc.get("read")
    assert read is not None and (read.responses, read.unpriced_responses, read.unpriced_prompts) == (2, 2, 3)
    with pytest.raises(ValueError, match="3 call costs for 4 calls"):
        tool_costs(history, unknown[:3])


def test_a_session_from_its_calls_records() -> None:
    history, costs = _history()
    records = [{"model": "m", "provider_prompt_tokens": 1000, "completion_tokens": 10},
               {"model": "m", "provider_prompt_tokens": 1200, "completion_tokens": 20, "cache_read_tokens": 1000,
                "cache_write_tokens": 100},
               {"model": "m", "provider_prompt_tokens": 1500, "completion_tokens": 30, "cache_read_tokens": 1400},
               {"model": "no-such-model", "provider_prompt_tokens": 500, "completion_tokens": 5}]
    tc = session_tool_costs(history, records, TABLE)
    assert tc is not None and tc.to_json() == tool_costs(history, costs).to_json()
    assert session_tool_costs(history, [], TABLE) is None  # no call recorded: nothing to share out
    assert session_tool_costs(history, records[:3], TABLE) is None  # not one record per call
    # a tool no call touched costs a known nothing; one that is there is itself
    assert tc.of("read") is tc.get("read")
    assert tc.of("late") == ToolCost("late", 0.0, 0, 0, 0.0, 0, 0) and tc.get("late") is None


def test_the_input_side_of_a_call_from_the_price_tables_entry() -> None:
    table = load_table()
    entry = table.entries[table.lookup("claude-opus-4-6") or ""]
    cost = table.cost("claude-opus-4-6", prompt=1110, completion=5, cache_read=1000, cache_write=100)
    by_hand = (10 * entry["input_cost_per_token"] + 1000 * entry["cache_read_input_token_cost"]
               + 100 * entry["cache_creation_input_token_cost"])
    assert cost.prompt_usd == pytest.approx(by_hand) and cost.usd == pytest.approx(
        by_hand + 5 * entry["output_cost_per_token"])
    records = [{"model": "m", "provider_prompt_tokens": 10, "completion_tokens": 1}, {"model": "x"}]
    assert [c.usd for c in price_records(records, TABLE)] == [record_cost(r, TABLE).usd for r in records] == [20, None]


@needs_shared
@pytest.mark.parametrize("path", [PERSISTED_CLAUDE, BIG_CLAUDE], ids=["persisted", "big"])
def test_a_claude_code_session_adds_up_to_its_total(path: Any) -> None:
    src = read_source(path, "claude-code")
    history = history_from_source(src)
    costs = price_records(call_record(c, src.format) for c in src.calls)
    tc = tool_costs(history, costs)
    whole = session_cost(path)
    assert whole is not None
    total = whole.main  # the tools share out the main session's calls
    assert total.usd is not None and total.unpriced == 0
    assert tc.total.usd == pytest.approx(total.usd, rel=1e-12)
    assert tc.calls_usd is not None and tc.no_tool_usd is not None
    assert tc.calls_usd + tc.no_tool_usd == pytest.approx(total.usd, rel=1e-9)
    assert tc.calls_usd > 0.9 * total.usd  # a coding session: nearly every response calls a tool
    assert tc.prompt_usd is not None and tc.context_usd is not None and 0 < tc.context_usd <= tc.prompt_usd
    assert tc.prompt_usd < total.usd
    att = attribute(history)
    assert {t.tool for t in tc.tools} == {t.tool for t in att.tools}
    for tool in tc.tools:
        calls = next(t.calls for t in att.tools if t.tool == tool.tool)
        assert 0 < tool.responses <= calls and tool.calls_usd is not None and tool.calls_usd > 0
        assert tool.context_usd is not None and tool.context_usd <= tc.prompt_usd
        assert tool.prompts <= len(history.calls)
    # the compaction: a context without it (every call from message 0) would cost more
    whole = History(history.messages, [replace(c, start=0) for c in history.calls], [], history.estimator)
    assert (tool_costs(whole, costs).context_usd or 0) > tc.context_usd
