"""Claude Code's per-call figures, for :mod:`engine.sources.claude_code`: a line's ``usage`` folded into its call
(:func:`merge_usage`: the token figures, the one-hour cache writes, ``usage.iterations``), the call's attribution
and the provider's cache-miss reason (:func:`merge_meta`, parsed by :mod:`engine.model.call_meta`), and what a
compaction cost, from the agent's ``cost-state`` running totals around its boundary (:func:`compaction_costs`).
"""

from __future__ import annotations

from typing import Any, Protocol

from engine.model.call_meta import attribution_of, cache_miss_of, iterations_of
from engine.sources.model import MAX_COUNT, ProviderCall, SourceSession, dict_at, int_or_none


class CostLines(Protocol):
    """What :func:`compaction_costs` reads of a file's scan."""

    costs: list[tuple[int, float, dict[str, Any]]]  # (line, total USD, per model) of each cost-state line
    boundary_lines: list[int]
    costed: set[int]  # boundaries worked out already
    calls: dict[tuple[str, str], ProviderCall]
    call_lines: dict[tuple[str, str], int]


SYNTHETIC_MODEL = "<synthetic>"  # the model of a line Claude Code made itself (no provider call)
PROMPT_FIELDS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


def usage_prompt(usage: dict[str, Any]) -> int | None:
    """The whole prompt of one line's ``usage`` (input + cache write + cache read; a field that is absent counts
    0); None when one of them is there but no count (NaN, infinite, negative, too large, not a number): a prompt
    of the others alone would be a wrong figure."""
    return prompt_of(*map(usage.get, PROMPT_FIELDS))


def prompt_of(*values: Any) -> int | None:
    """:func:`usage_prompt` of the values of :data:`PROMPT_FIELDS`, in its order (None: absent)."""
    total = 0
    for value in values:
        if value is None:
            continue
        count = int_or_none(value)
        if count is None:
            return None
        total += count
    return total if total <= MAX_COUNT else None


def merge_usage(call: ProviderCall, usage: dict[str, Any]) -> None:
    """Fold one line's ``usage`` into its call: every figure is the largest seen (also used by follow); a figure
    the line gives as no count (NaN, negative, …) is none."""
    write = int_or_none(usage.get("cache_creation_input_tokens"))
    read = int_or_none(usage.get("cache_read_input_tokens"))
    prompt = usage_prompt(usage)
    if prompt is not None:
        call.prompt_tokens = max(call.prompt_tokens or 0, prompt)
    out = int_or_none(usage.get("output_tokens"))
    if out is not None:
        call.completion_tokens = max(call.completion_tokens or 0, out)
    if write is not None:
        call.cache_write_tokens = max(call.cache_write_tokens or 0, write)
    if read is not None:
        call.cache_read_tokens = max(call.cache_read_tokens or 0, read)
    creation = usage.get("cache_creation")
    hour = int_or_none(creation.get("ephemeral_1h_input_tokens")) if isinstance(creation, dict) else None
    if hour is not None:
        call.cache_write_1h_tokens = max(call.cache_write_1h_tokens or 0, hour)
    iterations = iterations_of(usage)  # the lines of one response repeat it: the fullest kept
    if len(iterations) >= len(call.iterations):
        call.iterations = iterations


def merge_meta(call: ProviderCall, obj: dict[str, Any], message: dict[str, Any]) -> None:
    """Fold one ``assistant`` line's attribution and the provider's cache-miss reason into its call."""
    attribution = attribution_of(obj)
    if attribution is not None:
        call.attribution = attribution
    miss = cache_miss_of(message)
    if miss is not None:
        call.cache_miss = miss


def usage_total(usage: dict[str, Any], model: str) -> tuple[int, int, int, int]:
    """(input, output, cache read, cache write) of one model in a cost-state's ``modelUsage``."""
    entry = dict_at(usage, model)
    return tuple(int_or_none(entry.get(k)) or 0 for k in (  # type: ignore[return-value]
        "inputTokens", "outputTokens", "cacheReadInputTokens", "cacheCreationInputTokens"))


def compaction_costs(scan: CostLines, session: SourceSession) -> None:
    """What each compaction cost, from the agent's own ``cost-state`` lines around its boundary: the
    summarising request is not a line of the file (2.1.3xx), but the running totals before and after it
    differ by exactly that request plus the calls recorded between them."""
    if not scan.costs:
        return
    boundaries = scan.boundary_lines
    if len(boundaries) != len(session.compactions):
        return
    for comp, at in zip(session.compactions, boundaries, strict=True):
        if at in scan.costed:
            continue  # its cost-state lines are both there: worked out once
        before = next((c for c in reversed(scan.costs) if c[0] < at), None)
        after = next((c for c in scan.costs if c[0] > at), None)
        if after is None:
            continue
        scan.costed.add(at)
        lo = before[0] if before else 0
        between = [call for key, call in scan.calls.items() if lo < scan.call_lines.get(key, 0) < after[0]]
        if not between:
            spent = round(after[1] - (before[1] if before else 0.0), 10)
            comp.cost_usd = spent if spent >= 0 else None  # a running total that fell: no figure
        if comp.cost is not None:
            continue
        models = [m for m in after[2] if usage_total(after[2], m) != usage_total(before[2] if before else {}, m)]
        if len(models) != 1:
            continue
        model = models[0]
        now, then = usage_total(after[2], model), usage_total(before[2] if before else {}, model)
        mine = [c for c in between if c.model == model]
        inp = now[0] - then[0] - sum((c.prompt_tokens or 0) - (c.cache_read_tokens or 0) - (c.cache_write_tokens or 0)
                                     for c in mine)
        out = now[1] - then[1] - sum(c.completion_tokens or 0 for c in mine)
        read = now[2] - then[2] - sum(c.cache_read_tokens or 0 for c in mine)
        write = now[3] - then[3] - sum(c.cache_write_tokens or 0 for c in mine)
        if min(inp, out, read, write) < 0 or inp + read + write == 0:
            continue
        comp.cost = ProviderCall(-1, inp + read + write, out, read, write, model=model, ts=comp.ts,
                                 request_id="(from cost-state)")
