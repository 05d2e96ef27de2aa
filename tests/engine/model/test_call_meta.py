"""engine.model.call_meta: a call's attribution, the provider's cache-miss reason and ``usage.iterations`` parsed
from the shapes Claude Code 2.1.332 writes (its own code names them; the real file:
tests/agents/test_claude_code.py)."""

from __future__ import annotations

import pytest

from engine.model.call_meta import (
    ITERATION_TYPES,
    MISS_WORDS,
    CacheMiss,
    CallAttribution,
    UsageIteration,
    attribution_of,
    beside_of,
    cache_miss_of,
    iterations_of,
)


def test_attribution() -> None:
    assert attribution_of({"type": "assistant"}) is None
    assert attribution_of({"attributionSkill": ""}) is None
    att = attribution_of({"attributionSkill": "greet", "attributionMcpServer": "echo", "attributionMcpTool": "say",
                          "attributionAgent": 3})
    assert att == CallAttribution(skill="greet", mcp_server="echo", mcp_tool="say")
    assert att.to_json() == {"skill": "greet", "mcp_server": "echo", "mcp_tool": "say"}
    assert attribution_of({"attributionPlugin": "p\x1b[2J"}) == CallAttribution(plugin="p\\x1b[2J")  # escaped


@pytest.mark.parametrize(("message", "miss"), [
    ({}, None),
    ({"diagnostics": None}, None),
    ({"diagnostics": {"cache_miss_reason": {"type": "model_changed", "cache_missed_input_tokens": 900}}},
     CacheMiss("model_changed", 900)),
    ({"diagnostics": {"cache_miss_reason": {"type": "unavailable", "cache_missed_input_tokens": -1}}},
     CacheMiss("unavailable", None)),
    ({"diagnostics": {"cache_miss_reason": "messages_changed"}}, CacheMiss("messages_changed", None)),
])
def test_cache_miss(message: dict[str, object], miss: CacheMiss | None) -> None:
    assert cache_miss_of(message) == miss


def test_every_reason_has_words() -> None:
    for reason, words in MISS_WORDS.items():
        expected = f"Cache miss (the provider's reason): {words} (10 tokens missed the cache)"
        assert CacheMiss(reason, 10).text() == expected


def test_iterations_billed_beside_the_top_level() -> None:
    usage = {"iterations": [
        {"type": "message", "input_tokens": 3, "output_tokens": 9, "cache_read_input_tokens": 100,
         "cache_creation_input_tokens": 20},
        {"type": "compaction", "input_tokens": 5000, "output_tokens": 300},
        {"type": "advisor_message", "input_tokens": 40, "output_tokens": 4, "model": "claude-haiku-4-5"},
    ]}
    its = iterations_of(usage)
    assert [it.beside for it in its] == [False, True, True]
    assert its[1] == UsageIteration("compaction", 5000, 300, 0, 0)
    assert [b["type"] for b in beside_of(its)] == ["compaction", "advisor_message"]
    assert beside_of(its)[1]["model"] == "claude-haiku-4-5"
    assert {it.kind for it in its} <= set(ITERATION_TYPES)
    assert iterations_of({"iterations": "no"}) == () and iterations_of({}) == ()
