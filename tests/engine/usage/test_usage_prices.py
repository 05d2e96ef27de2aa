"""Dollar cost per call from litellm's price table (engine.usage.prices)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from engine.sources.model import ProviderCall
from engine.usage.prices import PriceTable, compare_agent_cost, load_table, price_table_path

TABLE = PriceTable({
    "claude-x": {"input_cost_per_token": 5e-06, "output_cost_per_token": 2.5e-05,
                 "cache_read_input_token_cost": 5e-07, "cache_creation_input_token_cost": 6.25e-06,
                 "cache_creation_input_token_cost_above_1hr": 1e-05},
    "tiered": {"input_cost_per_token": 1e-06, "output_cost_per_token": 1e-05, "cache_read_input_token_cost": 1e-07,
               "input_cost_per_token_above_200k_tokens": 2e-06, "output_cost_per_token_above_200k_tokens": 2e-05,
               "cache_read_input_token_cost_above_200k_tokens": 2e-07},
    "thinker": {"input_cost_per_token": 1e-06, "output_cost_per_token": 1e-05,
                "output_cost_per_reasoning_token": 2e-05},
    "nocache": {"input_cost_per_token": 1e-06, "output_cost_per_token": 1e-05},
    "gemini/gem-1": {"input_cost_per_token": 1e-06, "output_cost_per_token": 1e-05},
    "embedding-only": {"input_cost_per_token": 1e-06},
})


def test_price_table_is_found_without_importing_litellm() -> None:
    path = price_table_path()
    assert path is not None and path.name == "model_prices_and_context_window_backup.json"
    started = time.perf_counter()
    table = PriceTable.load(path)
    assert time.perf_counter() - started < 2.0
    assert table.lookup("claude-opus-4-6") == "claude-opus-4-6"


@pytest.mark.parametrize(("name", "key"), [
    ("claude-opus-4-6", "claude-opus-4-6"),
    ("claude-opus-5-5", "claude-opus-5-5"),
    ("gpt-5.5", "gpt-5.5"),
    ("anthropic/claude-opus-4-6", "claude-opus-4-6"),
    ("claude-opus-4-6[1m]", "claude-opus-4-6"),
    ("models/gemini-2.5-pro", "gemini-2.5-pro"),
    ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5-20250929"),
])
def test_the_agents_model_names_are_found(name: str, key: str) -> None:
    assert load_table().lookup(name) == key


def test_names_are_stripped_and_prefixed() -> None:
    assert TABLE.lookup("openrouter/x/claude-x") == "claude-x"
    assert TABLE.lookup("claude-x-20250101") == "claude-x"
    assert TABLE.lookup("gem-1") == "gemini/gem-1"  # a provider prefix tried
    assert TABLE.lookup("CLAUDE-X") == "claude-x"
    assert TABLE.lookup("embedding-only") is None  # no output price: not a chat price
    assert TABLE.lookup("claude") is None  # no fuzzy match
    assert TABLE.lookup("") is None


def test_cost_parts() -> None:
    cost = TABLE.cost("claude-x", prompt=1000, completion=10, cache_read=500, cache_write=300, cache_write_1h=100)
    assert cost.input_usd == pytest.approx(200 * 5e-06)  # uncached = prompt - read - write
    assert cost.cache_read_usd == pytest.approx(500 * 5e-07)
    assert cost.cache_write_usd == pytest.approx(200 * 6.25e-06 + 100 * 1e-05)
    assert cost.output_usd == pytest.approx(10 * 2.5e-05)
    assert cost.usd == pytest.approx(cost.input_usd + cost.cache_read_usd + cost.cache_write_usd + cost.output_usd)
    assert cost.price_key == "claude-x" and cost.problem == "" and cost.tier == 0


def test_call_cost_uses_the_calls_own_figures() -> None:
    call = ProviderCall(0, 1000, 10, 500, 300, model="claude-x")
    assert TABLE.call_cost(call).usd == pytest.approx(200 * 5e-06 + 500 * 5e-07 + 300 * 6.25e-06 + 10 * 2.5e-05)


def test_long_context_tier_replaces_every_rate() -> None:
    below = TABLE.cost("tiered", prompt=200_000, completion=100, cache_read=100_000)
    above = TABLE.cost("tiered", prompt=200_001, completion=100, cache_read=100_000)
    assert below.tier == 0 and above.tier == 200_000
    assert above.input_usd == pytest.approx(100_001 * 2e-06)
    assert above.cache_read_usd == pytest.approx(100_000 * 2e-07)
    assert above.output_usd == pytest.approx(100 * 2e-05)


def test_real_tier_of_gpt_5_5() -> None:
    cost = load_table().cost("gpt-5.5", prompt=300_000, completion=1000)
    assert cost.tier == 272_000 and cost.input_usd == pytest.approx(300_000 * 1e-05)


def test_reasoning_inside_or_beside_the_output() -> None:
    inside = TABLE.cost("thinker", prompt=0, completion=100, reasoning=40)
    assert inside.output_usd == pytest.approx(60 * 1e-05) and inside.reasoning_usd == pytest.approx(40 * 2e-05)
    beside = TABLE.cost("thinker", prompt=0, completion=100, reasoning=40, reasoning_in_output=False)
    assert beside.output_usd == pytest.approx(100 * 1e-05) and beside.reasoning_usd == pytest.approx(40 * 2e-05)
    plain = TABLE.cost("nocache", prompt=0, completion=100, reasoning=40, reasoning_in_output=False)
    assert plain.reasoning_usd == pytest.approx(40 * 1e-05)  # at the output price


def test_missing_cache_prices_fall_back_to_the_input_price_and_say_so() -> None:
    cost = TABLE.cost("nocache", prompt=100, completion=0, cache_read=50, cache_write=10)
    assert cost.usd == pytest.approx(100 * 1e-06)
    assert len(cost.notes) == 2


def test_unknown_model_is_none_with_a_reason_never_zero() -> None:
    cost = TABLE.cost("mystery-9", prompt=100, completion=10)
    assert cost.usd is None and "mystery-9" in cost.problem
    assert TABLE.cost("claude-x", prompt=None, completion=None).usd is None


def test_more_cache_than_prompt_counts_no_uncached_input() -> None:
    cost = TABLE.cost("claude-x", prompt=100, completion=0, cache_read=80, cache_write=40)
    assert cost.input_usd == 0 and cost.notes


def test_agent_cost_side_by_side() -> None:
    assert compare_agent_cost(1.10, 1.00) == {"cost_usd": 1.10, "agent_cost_usd": 1.00,
                                              "difference_usd": pytest.approx(0.10), "difference_ratio": 0.1}
    assert compare_agent_cost(None, 1.0)["difference_usd"] is None


def test_load_a_table_file(tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"m": {"input_cost_per_token": 1e-06, "output_cost_per_token": 2e-06}}))
    assert PriceTable.load(path).cost("m", prompt=10, completion=10).usd == pytest.approx(3e-05)


def test_iterations_billed_beside_the_top_level_usage_are_counted_once() -> None:
    """Claude Code 2.1.332's ``usage.iterations``: the ``message`` iteration is the top-level usage (not counted
    again); the ``compaction`` one is billed beside it, priced as a call of its own and added."""
    from engine.model.call_meta import UsageIteration
    from engine.usage.costs import call_record, record_cost

    top = ProviderCall(0, 12289, 9, 9706, 2580, model="claude-x")
    plain = TABLE.call_cost(top).usd
    assert plain is not None
    top.iterations = (UsageIteration("message", 3, 9, 9706, 2580), UsageIteration("compaction", 5000, 300, 0, 0))
    cost = TABLE.call_cost(top)
    assert cost.usd == pytest.approx(plain + 5000 * 5e-06 + 300 * 2.5e-05)
    assert cost.input_usd == pytest.approx(3 * 5e-06 + 5000 * 5e-06)
    assert any("compaction iteration billed beside" in n for n in cost.notes)
    # a context record carries them (billed_beside) and is priced the same: the window and the usage rows agree
    record = call_record(top, "claude-code")
    assert [it["type"] for it in record["billed_beside"]] == ["compaction"]
    assert record_cost(record, TABLE).usd == pytest.approx(cost.usd)
    # an advisor iteration on a model without a price: the call's cost is unknown, never the top level alone
    top.iterations = (UsageIteration("advisor_message", 10, 10, 0, 0, model="unknown-advisor"),)
    unknown = TABLE.call_cost(top)
    assert unknown.usd is None and "advisor_message iteration" in unknown.problem
