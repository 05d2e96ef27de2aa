"""The compaction plan (pure): which messages leave the context and which stay; the emergency cut.

SPEC §4. :func:`plan_compaction` — over ``threshold_ratio × window`` (strictly greater than the
integer threshold, the same test as :attr:`ContextSnapshot.over_threshold`), keep the longest suffix
whose tokens are ≤ ``reserve_tokens`` and whose cut separates no tool call from its result; compact
the rest. **Pinned messages** are never compacted by the plan: a pinned message in the compacted
part stays in ``keep`` (in its place, before the kept suffix), together with the other half of its
tool call pairs. :func:`force_compression` — the emergency cut; it follows the SPEC exactly and
ignores pins (what it drops is archived and can be restored).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engine.context.turns import clean_cut_points, find_safe_boundary, parse_turn_boundaries
from engine.model.messages import Message, call_ids


class CompactionError(Exception):
    """A compaction that cannot be done as asked; the text says why. Nothing was changed."""


class StalePreviewError(CompactionError):
    """The session changed since the preview was made; make a new preview."""


# --------------------------------------------------------------------------- the plan


@dataclass
class CompactionPlan:
    compact: list[Message]
    keep: list[Message]
    tokens_before: int  # the full request: system + summary + history + tools + max_tokens
    tokens_after: int  # the same with only ``keep`` (and the current summary)
    compact_tokens: int
    keep_tokens: int
    needed: bool
    reason: str
    threshold_tokens: int = 0
    reserve_tokens: int = 0
    cut_index: int = 0  # where the kept suffix starts in the history
    pinned_kept: int = 0  # messages kept before the cut because of pins

    @property
    def compact_ids(self) -> list[str]:
        return [str(m.get("id")) for m in self.compact]

    @property
    def keep_ids(self) -> list[str]:
        return [str(m.get("id")) for m in self.keep]


def _pinned_closure(history: Sequence[Message], stop: int) -> set[int]:
    """Indexes < stop that stay because they are pinned or paired with a pinned message."""
    pinned = [i for i in range(stop) if history[i].get("pinned")]
    if not pinned:
        return set()
    owner: dict[str, int] = {}
    results: dict[str, list[int]] = {}
    for i in range(stop):
        m = history[i]
        if m.get("role") == "assistant":
            for cid in call_ids(m):
                owner.setdefault(cid, i)
        elif m.get("role") == "tool":
            results.setdefault(str(m.get("tool_call_id") or ""), []).append(i)
    keep: set[int] = set()
    todo = list(pinned)
    while todo:
        i = todo.pop()
        if i in keep:
            continue
        keep.add(i)
        m = history[i]
        if m.get("role") == "assistant":
            for cid in call_ids(m):
                todo.extend(results.get(cid, ()))
        elif m.get("role") == "tool":
            o = owner.get(str(m.get("tool_call_id") or ""))
            if o is not None:
                todo.append(o)
    return keep


def last_turn_start(history: Sequence[Message]) -> int | None:
    users = parse_turn_boundaries(history)
    return users[-1] if users else None


def _nothing(history: Sequence[Message], before: int, hist_tokens: int, threshold: int, reserve: int,
             reason: str) -> CompactionPlan:
    return CompactionPlan(
        compact=[],
        keep=list(history),
        tokens_before=before,
        tokens_after=before,
        compact_tokens=0,
        keep_tokens=hist_tokens,
        needed=False,
        reason=reason,
        threshold_tokens=threshold,
        reserve_tokens=reserve,
        cut_index=0,
    )


def _cut_index(history: Sequence[Message], counts: Sequence[int], reserve_tokens: int, keep_from: int | None) -> int:
    """Where the kept suffix starts: the longest suffix within the reserve, moved to a clean cut
    (and back to ``keep_from`` when that is earlier)."""
    n = len(history)
    ok = clean_cut_points(history)
    start = n
    suffix = 0
    for i in range(n - 1, -1, -1):
        if suffix + counts[i] > reserve_tokens:
            break
        suffix += counts[i]
        start = i
    cut = start
    while not ok[cut]:
        cut += 1
    if keep_from is not None and keep_from < cut:
        cut = max(0, keep_from)
        while cut > 0 and not ok[cut]:
            cut -= 1
    return cut


def plan_compaction(
    history: Sequence[Message],
    counts: Sequence[int],
    *,
    window: int,
    system_tokens: int,
    summary_tokens: int,
    tools_tokens: int,
    max_tokens: int,
    threshold_ratio: float,
    reserve_tokens: int,
    force: bool = False,
    keep_from: int | None = None,
) -> CompactionPlan:
    """What to compact and what to keep (SPEC §4 Plan); pure, O(n).

    ``force`` (the manual path) plans a compaction even when the request is under the threshold.
    ``keep_from`` (the pre-call path, mid-turn) keeps every message from that index on, whatever
    the reserve: the turn in progress must reach the model with its user message.
    ``needed`` is true only when something would actually be compacted.
    """
    n = len(history)
    if len(counts) != n:
        raise ValueError(f"plan_compaction: {len(counts)} token counts for {n} messages")
    hist_tokens = sum(counts)
    fixed = system_tokens + summary_tokens + tools_tokens + max_tokens
    before = fixed + hist_tokens
    threshold = int(threshold_ratio * window)

    def nothing(reason: str) -> CompactionPlan:
        return _nothing(history, before, hist_tokens, threshold, reserve_tokens, reason)

    if n == 0:
        return nothing("the history is empty")
    if not force and before <= threshold:
        return nothing(f"the request ({before} tokens) is within the threshold ({threshold} tokens)")
    cut = _cut_index(history, counts, reserve_tokens, keep_from)
    if cut == 0:
        return nothing(
            f"the whole history ({hist_tokens} tokens) fits in the reserve ({reserve_tokens} tokens)"
        )
    pinned = _pinned_closure(history, cut)
    compact_idx = [i for i in range(cut) if i not in pinned]
    if not compact_idx:
        return nothing("every message before the kept part is pinned")
    compact_tokens = sum(counts[i] for i in compact_idx)
    keep = [history[i] for i in sorted(pinned)] + list(history[cut:])
    keep_tokens = hist_tokens - compact_tokens
    if before > threshold:
        reason = f"the request ({before} tokens) is over the threshold ({threshold} tokens)"
    else:
        reason = "compaction requested"
    return CompactionPlan(
        compact=[history[i] for i in compact_idx],
        keep=keep,
        tokens_before=before,
        tokens_after=fixed + keep_tokens,
        compact_tokens=compact_tokens,
        keep_tokens=keep_tokens,
        needed=True,
        reason=reason,
        threshold_tokens=threshold,
        reserve_tokens=reserve_tokens,
        cut_index=cut,
        pinned_kept=len(pinned),
    )


# --------------------------------------------------------------------------- emergency


def emergency_split(history: Sequence[Message]) -> tuple[list[Message], list[Message]]:
    """(dropped, kept) for the emergency cut of SPEC §4; pure, O(n).

    ≤ 2 messages: nothing. ≥ 2 turns: keep from the turn at ``turns[len(turns)//2]``. One turn: keep
    from ``find_safe_boundary(history, len//2)``, and where that is 0 keep only the most recent user
    message. No user message at all: keep from ``len//2``. A cut that would separate a tool call from
    its result (only malformed logs have one at a turn start) moves forward to the next clean cut.
    """
    n = len(history)
    if n <= 2:
        return [], list(history)
    turns = parse_turn_boundaries(history)
    if len(turns) >= 2:
        k = turns[len(turns) // 2]
    else:
        k = find_safe_boundary(history, n // 2)
        if k == 0 and turns:
            u = turns[-1]
            return list(history[:u]) + list(history[u + 1 :]), [history[u]]
    ok = clean_cut_points(history)
    j = k
    while j < n and not ok[j]:
        j += 1
    if j == n:  # nothing clean after: take the nearest clean cut before instead
        j = k
        while j > 0 and not ok[j]:
            j -= 1
    return list(history[:j]), list(history[j:])


def emergency_note(dropped: int) -> str:
    return (
        f"[Emergency compression: {dropped} older message{'s' if dropped != 1 else ''} were dropped from "
        "the context to fit the window. They are kept in this session's dialog archive (dialog/).]"
    )


def force_compression(history: Sequence[Message], summary: str) -> tuple[list[Message], str, int]:
    """Emergency compression: (new history, new summary, count dropped); pure.

    The note about the dropped messages goes into the summary, never into the history. The caller
    archives the dropped messages (see :func:`emergency_split`).
    """
    dropped, kept = emergency_split(history)
    if not dropped:
        return list(history), summary, 0
    note = emergency_note(len(dropped))
    return kept, (f"{summary}\n\n{note}" if summary else note), len(dropped)
