"""Turns: the unit of compression. Cuts never separate a tool call from its result."""

from __future__ import annotations

from collections.abc import Sequence

from engine.model.messages import Message, call_ids


def parse_turn_boundaries(history: Sequence[Message]) -> list[int]:
    """Index of every ``user`` message, ascending."""
    return [i for i, m in enumerate(history) if m.get("role") == "user"]


def find_safe_boundary(history: Sequence[Message], target_index: int) -> int:
    """A cut index at or near ``target_index`` that starts a turn.

    Empty history or target ≤ 0 → 0; target ≥ len → len; no user message → target; else the last
    user index ≤ target if it is > 0, else the first user index > target, else 0.
    """
    n = len(history)
    if n == 0 or target_index <= 0:
        return 0
    if target_index >= n:
        return n
    users = parse_turn_boundaries(history)
    if not users:
        return target_index
    last_before = -1
    for i in users:
        if i <= target_index:
            last_before = i
        else:
            break
    if last_before > 0:
        return last_before
    for i in users:
        if i > target_index:
            return i
    return 0


def is_self_contained(messages: Sequence[Message]) -> bool:
    """True when every tool result's call and every call's result are both inside ``messages``."""
    calls: set[str] = set()
    results: set[str] = set()
    for m in messages:
        if m.get("role") == "assistant":
            calls.update(call_ids(m))
        elif m.get("role") == "tool":
            results.add(str(m.get("tool_call_id") or ""))
    return calls == results


def call_result_pairs(history: Sequence[Message]) -> list[tuple[int, int]]:
    """(call index, result index) for every tool result whose call is in ``history``.

    A result answers the nearest call with its id made before it, so duplicate or empty call ids
    (some providers repeat them every turn) pair up turn by turn. A result with no such call before
    it pairs with the first call after it (only malformed logs have one); a result whose call is
    missing entirely (an interrupted run) pairs with nothing. One pass, O(n).
    """
    last_call: dict[str, int] = {}
    first_call: dict[str, int] = {}
    pairs: list[tuple[int, int]] = []
    early: list[tuple[str, int]] = []  # results seen before any call with their id
    for j, m in enumerate(history):
        role = m.get("role")
        if role == "assistant":
            calls = m.get("tool_calls")
            if calls:
                for c in calls:
                    if isinstance(c, dict):
                        cid = str(c.get("id") or "")
                        last_call[cid] = j
                        if cid not in first_call:
                            first_call[cid] = j
        elif role == "tool":
            cid = str(m.get("tool_call_id") or "")
            i = last_call.get(cid)
            if i is None:
                early.append((cid, j))
            elif i != j:
                pairs.append((i, j))
    for cid, j in early:
        i = first_call.get(cid)
        if i is not None:
            pairs.append((i, j))
    return pairs


def cut_is_clean(history: Sequence[Message], index: int) -> bool:
    """True when cutting ``history`` at ``index`` leaves no call and result on opposite sides."""
    if index <= 0 or index >= len(history):
        return True
    return not any(min(i, j) < index <= max(i, j) for i, j in call_result_pairs(history))


def clean_cut_points(history: Sequence[Message]) -> list[bool]:
    """``ok[i]`` is True when a cut at index ``i`` (0..len) separates no call from its result.

    O(n) for the whole history. A cut is unclean when a call made before it is answered after it,
    or a result before it answers a call made after it (which only malformed logs contain). Results
    are paired with calls by :func:`call_result_pairs`. Results whose call is missing entirely
    (interrupted runs) do not block a cut; neither do calls that are never answered.
    """
    n = len(history)
    # For each result at j answering a call at i != j, cuts strictly between min and max are bad.
    bad = [0] * (n + 2)
    for i, j in call_result_pairs(history):
        lo, hi = min(i, j), max(i, j)
        bad[lo + 1] += 1
        bad[hi + 1] -= 1
    ok = []
    running = 0
    for k in range(n + 1):
        running += bad[k]
        ok.append(running == 0)
    return ok
