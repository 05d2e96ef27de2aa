from __future__ import annotations

import pytest

from engine.model.snapshot import ContextSnapshot
from engine.usage.costs import RecordsCost, SessionCost
from widgets.status_bar import ContextStatusBar
from widgets.theme import DARK


def snap(**kw) -> ContextSnapshot:
    data = dict(window=100_000, max_tokens=10_000, system=1_000, summary=0, history_user=10_000,
                history_assistant=10_000, history_tool=9_000, tools=0, threshold_tokens=80_000,
                estimator="heuristic", accuracy="calibrated", model="gpt-4o-mini")
    data.update(kw)
    return ContextSnapshot(**data)


@pytest.fixture
def bar(qtbot):
    w = ContextStatusBar()
    qtbot.addWidget(w)
    return w


def test_initial_texts(bar):
    t = bar.texts()
    assert t["model"] == "model: —"
    assert t["tokens"] == "— / — tokens"
    assert t["last_call"] == "last call: —"
    assert "idle" in t["state"]


def test_snapshot_shows_used_window_percent_and_accuracy(bar):
    bar.set_snapshot(snap())
    t = bar.texts()
    assert t["tokens"] == "40,000 / 100,000 tokens (40.0%) · calibrated"
    assert t["model"] == "model: gpt-4o-mini"
    assert bar.tokens_label.styleSheet() == ""
    bar.set_snapshot(snap(history_tool=50_000))  # over the threshold
    assert "81,000 / 100,000" in bar.texts()["tokens"]
    assert "font-weight: bold" in bar.tokens_label.styleSheet()
    bar.set_snapshot(snap(history_tool=95_000, accuracy="estimated"))
    assert "estimated" in bar.texts()["tokens"]
    assert "#b91c1c" in bar.tokens_label.styleSheet()  # over the window: error colour
    bar.set_palette(DARK)
    assert DARK.error in bar.tokens_label.styleSheet()
    bar.set_snapshot(None)
    assert bar.texts()["tokens"] == "— / — tokens"


def test_estimate_against_reported(bar):
    bar.set_last_call(10_100, 10_000)
    assert bar.texts()["last_call"] == "last call: est. 10,100 · reported 10,000 (+1.0%)"
    bar.set_last_call(9_000, None)
    assert bar.texts()["last_call"] == "last call: est. 9,000 · reported —"
    bar.set_last_call(None, None)
    assert bar.texts()["last_call"] == "last call: —"


@pytest.mark.parametrize(("state", "label"), [("idle", "idle"), ("streaming", "streaming…"),
                                               ("compacting", "compacting…"), ("tool", "running a tool…"),
                                               ("weird", "weird")])
def test_states(bar, state, label):
    bar.set_state(state)
    assert bar.texts()["state"].endswith(label)


def test_the_agents_own_cost(bar):
    assert bar.cost_label.isHidden() and bar.texts()["agent_cost"] == ""
    bar.set_agent_cost(0.0912, {"claude-opus-4-6": 0.08, "claude-haiku-4-5": 0.0112})
    assert bar.texts()["agent_cost"] == "agent's cost: $0.0912" and not bar.cost_label.isHidden()
    tip = bar.cost_label.toolTip().splitlines()
    assert tip == ["The agent's own cost, from its cost records: $0.0912", "  claude-opus-4-6: $0.0800",
                   "  claude-haiku-4-5: $0.0112"]
    bar.set_agent_cost(12.5)
    assert bar.texts()["agent_cost"] == "agent's cost: $12.50"
    bar.set_agent_cost(None)
    assert bar.cost_label.isHidden() and bar.texts()["agent_cost"] == ""


def test_the_sessions_cost_so_far_beside_the_agents_own(bar):
    assert bar.texts()["session_cost"] == "" and bar.session_cost_label.isHidden()
    bar.set_session_cost(SessionCost(RecordsCost(0.5, 3, 0)))
    bar.set_agent_cost(0.52)
    assert bar.texts()["session_cost"] == "cost: $0.5000" and not bar.session_cost_label.isHidden()
    assert bar.texts()["agent_cost"] == "agent's cost: $0.5200"
    bar.set_session_cost(SessionCost(RecordsCost(1.0, 3, 1, "no price for 'x'"), RecordsCost(0.2, 2, 0),
                                     RecordsCost(0.05, 1, 0), agent_usd=1.3))
    assert bar.texts()["session_cost"] == "cost: $1.25+" and "no price for 'x'" in bar.session_cost_label.toolTip()
    tip = bar.session_cost_label.toolTip()  # the parts and the agent's own cost, as every view says them
    assert "main $1.00+ (3 calls) · subagents $0.2000 (2 calls) · compaction $0.0500 (1 call)" in tip
    assert "The agent's own cost: $1.30 (ours −$0.0500)" in tip
    bar.set_session_cost(SessionCost(RecordsCost(None, 2, 2)))
    assert bar.texts()["session_cost"] == "cost: unknown"
    bar.set_session_cost(SessionCost(RecordsCost(None, 0, 0)))
    assert bar.session_cost_label.isHidden()
    bar.set_session_cost(SessionCost(RecordsCost(0.5, 3, 0)))
    bar.set_session_cost(None)
    assert bar.session_cost_label.isHidden()
