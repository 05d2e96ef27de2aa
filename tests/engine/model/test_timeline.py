"""engine.model.timeline: a timeline column typed — its record, its price, the import's figures the window shows."""

from __future__ import annotations

import pytest

from engine.model.records import ContextRecord, RecordError
from engine.model.snapshot import ContextSnapshot
from engine.model.timeline import Price, TimelineCall
from engine.usage.costs import priced_call, priced_record, records_cost


def _snapshot(**kw: object) -> ContextSnapshot:
    data: dict[str, object] = dict(
        window=200_000, max_tokens=8_000, system=1_200, summary=0, history_user=3_000, history_assistant=4_000,
        history_tool=500, tools=900, threshold_tokens=160_000, estimator="heuristic", accuracy="calibrated",
        provider_prompt_tokens=9_700, model="claude-sonnet-4-5", ts="2025-11-21T10:00:00+00:00")
    data.update(kw)
    return ContextSnapshot(**data)  # type: ignore[arg-type]


def _line(**extra: object) -> dict[str, object]:
    return {**ContextRecord.from_snapshot(_snapshot(), 4).to_json(), "completion_tokens": 120,
            "cache_read_tokens": 8_000, "cache_write_tokens": 600, "source_format": "claude-code", **extra}


def test_a_priced_call_carries_the_figures_priced_record_gives_its_line() -> None:
    record = ContextRecord.from_json(_line())
    call = priced_call(record)
    line = priced_record(record.to_json())
    assert call.record is record and call.price == Price(line["cost_usd"], line["cost_problem"])
    assert call.price.usd is not None and call.price.usd > 0
    assert call.to_json() == line  # the form the engine's analyses read: the line with its price
    assert records_cost([call]) == records_cost([line])


def test_a_call_of_an_unknown_model_says_why_it_has_no_price() -> None:
    call = priced_call(ContextRecord.from_json(_line(model="no-such-model-xyz")))
    assert call.price is not None and call.price.usd is None and call.price.problem


def test_the_line_of_a_priced_call_reads_back_the_same_call() -> None:
    call = priced_call(ContextRecord.from_json(_line(prefix_tokens=2_100, agent_cost_usd=0.25)))
    again = TimelineCall.from_json(call.to_json())
    assert again == call and again.to_json() == call.to_json()
    unpriced = TimelineCall.from_json(_line())
    assert unpriced.price is None and "cost_usd" not in unpriced.to_json()


def test_the_imports_figures_are_read_with_their_types() -> None:
    call = TimelineCall.from_json(_line(prefix_tokens=2_100, agent_cost_usd=0.25,
                                        prompt_unlike_file="the provider counted the skills listing"))
    assert (call.prefix_tokens, call.agent_cost_usd) == (2_100, 0.25)
    assert call.prompt_unlike_file == "the provider counted the skills listing"
    odd = TimelineCall.from_json(_line(prefix_tokens="many", agent_cost_usd=True, prompt_unlike_file=3))
    assert (odd.prefix_tokens, odd.agent_cost_usd, odd.prompt_unlike_file) == (None, None, "")
    assert call.snapshot.provider_prompt_tokens == 9_700 and call.record.cache_read_tokens == 8_000


def test_a_line_that_is_not_a_context_record_is_refused() -> None:
    with pytest.raises(RecordError, match="is missing"):
        TimelineCall.from_json({"type": "context", "max_tokens": 10, "cost_usd": 0.1})


def test_a_call_does_not_keep_its_line() -> None:
    """The line is made when asked (the cost of the last call, the cache analysis): a followed timeline's columns
    do not each hold a second copy of their record."""
    call = TimelineCall(ContextRecord.from_json(_line()), Price(0.25))
    first = call.to_json()
    assert first == call.to_json() and first is not call.to_json()
    assert first["cost_usd"] == 0.25 and "_json" not in getattr(call, "__dict__", {})  # (slots: nothing kept beside)
