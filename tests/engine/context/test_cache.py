"""engine.context.cache: the provider's own cache-miss reason (Claude Code 2.1.332's ``diagnostics.cache_miss_reason``,
kept on the call's record as ``cache_miss``) is a re-write's cause."""

from __future__ import annotations

from typing import Any

from engine.context.cache import analyze, cache_miss_line, provider_miss
from engine.model.call_meta import CacheMiss


def _rec(prompt: int, read: int, write: int, **extra: Any) -> dict[str, Any]:
    return {"provider_prompt_tokens": prompt, "cache_read_tokens": read, "cache_write_tokens": write,
            "ts": "2026-11-27T03:58:24Z", **extra}


def test_the_providers_reason_is_the_cause_of_a_rewrite() -> None:
    miss = {"reason": "tools_changed", "tokens": 1234}
    records = [_rec(12_000, 0, 11_990), _rec(12_100, 11_990, 100), _rec(12_200, 12_090, 100),
               _rec(12_400, 11_000, 1_390, cache_miss=miss)]
    summary = analyze(records)
    # a write of 1,390 is not 3× the median: the heuristic alone would not mark it, the provider's word does
    assert summary.rewrites == [0, 3]
    reason = summary.calls[3].reason
    assert "Cache miss (the provider's reason): the tool definitions changed (1,234 tokens missed the cache)" in reason
    assert "Why:" not in reason  # the provider's cause, not a guess
    assert "Why:" in summary.calls[0].reason  # no provider reason: the rule's
    assert provider_miss(records[3]) == CacheMiss("tools_changed", 1234)
    assert cache_miss_line(records[3]) == CacheMiss("tools_changed", 1234).text()
    assert cache_miss_line(records[1]) == "" and provider_miss({"cache_miss": "x"}) is None


def test_a_reason_the_words_do_not_know_is_shown_as_given() -> None:
    assert CacheMiss("new_reason_2027", None).text() == "Cache miss (the provider's reason): new reason 2027"
