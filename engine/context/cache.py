"""The provider's prompt cache, call by call: what was read, what was written, what was not cached.

Pure functions over the ``context`` records of ``events.jsonl`` (dicts with
``provider_prompt_tokens``, ``cache_read_tokens``, ``cache_write_tokens`` — ``None`` where the
source has no such figure — and ``ts``).

``provider_prompt_tokens`` is the whole prompt as the provider counted it, cached part included, so

    uncached input = prompt − cache read − cache write        (cache write counted as 0 when unknown)

A call **re-wrote the cached prefix** when its cache write is far above the session's usual:
more than :data:`REWRITE_FACTOR` × the median non-zero cache write *and* more than
:data:`REWRITE_SHARE` of its prompt. Where the source reports no cache writes (Codex: the provider
caches what it processed, unasked), the uncached input is judged instead: more than 3× its median and
more than :data:`MISS_SHARE` of the prompt (a cache miss, not merely a large new tool result).

A call whose record carries the provider's own cache-miss reason (``cache_miss``: ``{"reason", "tokens"}``,
Claude Code's ``diagnostics.cache_miss_reason``, :class:`engine.model.call_meta.CacheMiss`) is a re-write by the
provider's word, and that reason is its cause (:func:`provider_miss`, :func:`cache_miss_line`).

Each such call gets the reason it cost more (the first call, the first after a compaction, a cache
that expired while the agent was idle, or a change early in the prompt) and its input cost in
token-equivalents at Anthropic's relative prices (:data:`WRITE_PRICE` × written, :data:`READ_PRICE`
× read, 1 × uncached).
"""

from __future__ import annotations

import statistics
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from engine.model.call_meta import CacheMiss
from engine.model.timeline import TimelineCall

REWRITE_FACTOR = 3.0  # a write more than 3× the median non-zero write …
REWRITE_SHARE = 0.10  # … and more than 10 % of the prompt is a re-write of the cached prefix
MISS_SHARE = 0.50  # without write figures: uncached input over half the prompt (and 3× the median)
WRITE_PRICE = 1.25  # a written token costs 1.25 input tokens (Anthropic, 5-minute cache)
READ_PRICE = 0.10  # a read token costs 0.1 input token
CACHE_TTL_S = 300.0  # the provider's default cache lifetime (5 minutes)


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value) if value >= 0 else None


def _ts(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


@dataclass(frozen=True)
class CallCache:
    """The cache figures of one provider call (``None``: the source has no such figure)."""

    index: int  # 0-based call index in the session
    prompt: int | None
    read: int | None
    write: int | None
    uncached: int | None
    hit_rate: float | None  # read / prompt
    cost: float | None  # input cost in token-equivalents: uncached + 1.25 × write + 0.1 × read
    rewrite: bool = False
    reason: str = ""  # why the call cost more (only for a re-write)

    def to_json(self) -> dict[str, Any]:
        return {"cache_read_tokens": self.read, "cache_write_tokens": self.write,
                "uncached_input_tokens": self.uncached, "cache_hit_rate": self.hit_rate,
                "input_cost_tokens": self.cost, "cache_rewrite": self.rewrite, "cache_rewrite_reason": self.reason}


@dataclass(frozen=True)
class CacheSummary:
    """Every call's cache figures and what is usual for the session."""

    calls: tuple[CallCache, ...]
    median_write: float | None  # the median non-zero cache write (uncached input, basis "uncached")
    basis: str = "write"  # what a re-write is judged on: "write", or "uncached" where writes are not reported

    @property
    def has_usage(self) -> bool:
        """At least one call with the provider's cache-read figure."""
        return any(c.read is not None for c in self.calls)

    @property
    def has_write(self) -> bool:
        """At least one call with a cache-write figure (Codex has none: writes are not reported)."""
        return any(c.write is not None for c in self.calls)

    @property
    def rewrites(self) -> list[int]:
        return [c.index for c in self.calls if c.rewrite]

    def hit_rate(self) -> float | None:
        """Cache read over prompt tokens, summed over the calls that report both."""
        pairs = [(c.read, c.prompt) for c in self.calls if c.read is not None and c.prompt]
        total = sum(p for _, p in pairs)
        return sum(r for r, _ in pairs) / total if total else None


def provider_miss(record: Mapping[str, Any]) -> CacheMiss | None:
    """The provider's own reason the cache missed on this call (a record's ``cache_miss``), or None."""
    miss = record.get("cache_miss")
    if not isinstance(miss, Mapping) or not isinstance(miss.get("reason"), str):
        return None
    return CacheMiss(miss["reason"], _int(miss.get("tokens")))


def cache_miss_line(record: Mapping[str, Any]) -> str:
    """The line a call's tooltip shows for the provider's cache-miss reason ("" without one)."""
    miss = provider_miss(record)
    return miss.text() if miss is not None else ""


def call_figures(record: Mapping[str, Any], index: int = 0) -> CallCache:
    """The cache figures of one ``context`` record (no re-write judgement)."""
    prompt = _int(record.get("provider_prompt_tokens"))
    read = _int(record.get("cache_read_tokens"))
    write = _int(record.get("cache_write_tokens"))
    uncached = rate = cost = None
    if prompt is not None and read is not None:
        uncached = max(0, prompt - read - (write or 0))
        rate = read / prompt if prompt else None
        cost = uncached + WRITE_PRICE * (write or 0) + READ_PRICE * read
    return CallCache(index, prompt, read, write, uncached, rate, cost)


def analyze(columns: Sequence[Mapping[str, Any] | TimelineCall],
            after_compaction: Collection[int] = ()) -> CacheSummary:
    """Cache figures of every call (its record's line, or a timeline column), re-writes marked with their reason.

    ``after_compaction``: indexes of the calls that are the first after a compaction (the records'
    ``segment`` field is used too, where the import wrote it).
    """
    records = [c.to_json() if isinstance(c, TimelineCall) else c for c in columns]
    calls = [call_figures(rec, i) for i, rec in enumerate(records)]
    basis = "write" if any(c.write is not None for c in calls) else "uncached"
    values = [(c.write if basis == "write" else c.uncached) or 0 for c in calls]
    nonzero = [v for v in values if v]
    median = float(statistics.median(nonzero)) if nonzero else None
    if median is None:
        return CacheSummary(tuple(calls), None, basis)
    out: list[CallCache] = []
    share = REWRITE_SHARE if basis == "write" else MISS_SHARE
    for i, call in enumerate(calls):
        v, p = values[i], call.prompt or 0
        if (v > REWRITE_FACTOR * median and p and v > share * p) or provider_miss(records[i]) is not None:
            reason = _reason(records, calls, i, (v, median, basis), i in after_compaction)
            call = CallCache(call.index, call.prompt, call.read, call.write, call.uncached, call.hit_rate,
                             call.cost, True, reason)
        out.append(call)
    return CacheSummary(tuple(out), median, basis)


def _cause(records: Sequence[Mapping[str, Any]], calls: Sequence[CallCache], i: int, compacted: bool) -> str:
    rec, prev_rec = records[i], records[i - 1] if i else None
    if prev_rec is None:
        return "the first call of the session: nothing was cached yet, the whole prefix was written."
    seg, prev_seg = rec.get("segment"), prev_rec.get("segment")
    if compacted or (isinstance(seg, int) and isinstance(prev_seg, int) and seg != prev_seg):
        return ("the first call after a compaction: the history was replaced by the summary, so the cached "
                "prefix no longer matched and the new one was written.")
    t, prev_t = _ts(rec.get("ts")), _ts(prev_rec.get("ts"))
    if t is not None and prev_t is not None and (t - prev_t).total_seconds() > CACHE_TTL_S:
        minutes = (t - prev_t).total_seconds() / 60
        return (f"{minutes:.0f} min after the previous call: the provider's cache (kept about 5 minutes "
                "without use) had expired, so the prefix was written again.")
    prev = calls[i - 1]
    read = calls[i].read or 0
    if prev.prompt and read < 0.9 * prev.prompt:
        return (f"only {read:,} tokens matched the cache although the previous call's prompt was "
                f"{prev.prompt:,}: something early in the prompt changed (system prompt, tools, an edited "
                "or removed message), so everything after it was written again.")
    grown = (calls[i].prompt or 0) - (prev.prompt or 0)
    return (f"the prompt grew by {grown:,} tokens since the previous call (new messages and tool results); "
            "the new part was written to the cache.")


def _reason(records: Sequence[Mapping[str, Any]], calls: Sequence[CallCache], i: int,
            judged: tuple[int, float, str], compacted: bool) -> str:
    call = calls[i]
    v, median, basis = judged
    p = call.prompt or 1
    if basis == "write":
        head = (f"Cache re-written: {v:,} tokens written ({v / median:.0f}× the session's median write of "
                f"{median:,.0f}; {v / p:.0%} of the prompt).")
    else:
        head = (f"Cache re-written: {v:,} tokens not read from the cache ({v / median:.0f}× the session's median "
                f"of {median:,.0f}; {v / p:.0%} of the prompt): processed and cached again (this source does "
                "not report cache writes).")
    miss = provider_miss(records[i])
    why = "Why: " + _cause(records, calls, i, compacted)
    lines = [head, miss.text() if miss is not None else why]
    prev = calls[i - 1] if i else None
    if call.cost is not None:
        written = f"written × {WRITE_PRICE:g}, " if basis == "write" else ""
        text = (f"Input cost ≈ {call.cost:,.0f} token-equivalents ({written}read × {READ_PRICE:g}, "
                "uncached × 1)")
        if prev is not None and prev.cost:
            text += f", {call.cost / prev.cost:.1f}× the previous call's {prev.cost:,.0f}"
        lines.append(text + ".")
    return "\n".join(lines)
