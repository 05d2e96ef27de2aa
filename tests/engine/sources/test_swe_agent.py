"""engine.sources.swe_agent: history → messages, exact step inputs, model_stats as the aggregate it is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.sources.swe_agent import read_swe_agent
from tests.engine.sources.conftest import SWE


def test_the_real_trajectories_are_there() -> None:
    assert len(list(SWE.glob("*.traj"))) == 3


@pytest.mark.parametrize("path", sorted(SWE.glob("*.traj")), ids=lambda p: p.name)
def test_history_becomes_messages_and_each_answer_a_call(path: Path) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    history = data["history"]
    src = read_swe_agent(path)
    assert src.system_prompt == history[0]["content"]
    assert [m["role"] for m in src.messages] == [h["role"] for h in history[1:]]
    assert len(src.calls) == sum(1 for h in history if h["role"] == "assistant")
    assert all(c.prompt_tokens is None for c in src.calls)  # no per-call usage in a .traj
    assert src.aggregate == (data.get("info") or {}).get("model_stats")
    raw_calls = [c["id"] for h in history for c in h.get("tool_calls") or []]
    assert [c["id"] for m in src.messages for c in m.get("tool_calls") or []] == raw_calls
    for msg, raw in zip(src.messages, history[1:], strict=True):
        if raw.get("tool_call_ids"):
            assert msg["tool_call_id"] == raw["tool_call_ids"][0]


def test_the_aggregate_is_not_spread_over_calls() -> None:
    src = read_swe_agent(SWE / "swe-agent__test-repo-i1.traj")
    assert src.aggregate is not None and src.aggregate["tokens_sent"] == 52861 and src.aggregate["api_calls"] == 5
    assert src.reported_calls == 0 and len(src.calls) == 5


def test_a_steps_query_is_the_exact_model_input(tmp_path: Path) -> None:
    data = json.loads((SWE / "swe-agent__test-repo-i1.traj").read_text(encoding="utf-8"))
    query = [{"role": "system", "content": "S"}, {"role": "user", "content": "only this"}]
    data["trajectory"][0]["messages"] = query
    path = tmp_path / "q.traj"
    path.write_text(json.dumps(data), encoding="utf-8")
    src = read_swe_agent(path)
    first = src.calls[0].input_messages
    assert first is not None and [m["content"] for m in first] == ["only this"]
    assert src.calls[1].input_messages is None
