from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.context.turns import (
    clean_cut_points,
    cut_is_clean,
    find_safe_boundary,
    is_self_contained,
    parse_turn_boundaries,
)
from engine.model.messages import tool_call


def _h(roles: str) -> list[dict[str, Any]]:
    names = {"u": "user", "a": "assistant", "t": "tool"}
    return [{"role": names[c], "content": c} for c in roles]


def test_parse_turn_boundaries() -> None:
    assert parse_turn_boundaries([]) == []
    assert parse_turn_boundaries(_h("uatauau")) == [0, 4, 6]
    assert parse_turn_boundaries(_h("aat")) == []


def test_safe_boundary_empty_and_nonpositive() -> None:
    assert find_safe_boundary([], 5) == 0
    assert find_safe_boundary(_h("uaua"), 0) == 0
    assert find_safe_boundary(_h("uaua"), -3) == 0


def test_safe_boundary_at_or_past_end() -> None:
    assert find_safe_boundary(_h("uaua"), 4) == 4
    assert find_safe_boundary(_h("uaua"), 99) == 4


def test_safe_boundary_without_users_returns_target() -> None:
    assert find_safe_boundary(_h("atatat"), 3) == 3


def test_safe_boundary_last_user_at_or_before_target() -> None:
    h = _h("uatauatau")  # users at 0, 4, 8
    assert find_safe_boundary(h, 4) == 4  # equality
    assert find_safe_boundary(h, 6) == 4
    assert find_safe_boundary(h, 7) == 4
    assert find_safe_boundary(h, 8) == 8


def test_safe_boundary_falls_forward_when_only_index_zero_before() -> None:
    h = _h("uatauat")  # users at 0, 4
    assert find_safe_boundary(h, 2) == 4
    assert find_safe_boundary(h, 3) == 4


def test_safe_boundary_zero_when_no_user_after() -> None:
    h = _h("uatat")  # only user at 0
    assert find_safe_boundary(h, 3) == 0


def test_safe_boundary_user_not_at_start() -> None:
    h = _h("atuat")  # user at 2
    assert find_safe_boundary(h, 1) == 2
    assert find_safe_boundary(h, 3) == 2


def _with_calls() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [tool_call("c1", "ls", "{}"), tool_call("c2", "f", "{}")]},
        {"role": "tool", "tool_call_id": "c1", "content": "a"},
        {"role": "tool", "tool_call_id": "c2", "content": "b"},
        {"role": "assistant", "content": "done"},
    ]


def test_self_contained_and_clean_cuts() -> None:
    h = _with_calls()
    assert is_self_contained(h)
    assert not is_self_contained(h[:3])
    assert not is_self_contained(h[2:])
    assert [cut_is_clean(h, i) for i in range(6)] == [True, True, False, False, True, True]
    assert clean_cut_points(h) == [True, True, False, False, True, True]


def test_missing_result_does_not_block_cuts() -> None:
    h = _with_calls()[:3]  # c2 never answered (interrupted run)
    ok = clean_cut_points(h)
    assert ok[0] and ok[1] and not ok[2] and ok[3]


_roles = st.lists(st.sampled_from(["user", "assistant", "call", "tool"]), max_size=30)


def _build(kinds: list[str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    pending: list[str] = []
    for i, k in enumerate(kinds):
        if k == "call":
            cid = f"c{i}"
            pending.append(cid)
            out.append({"role": "assistant", "content": None, "tool_calls": [tool_call(cid, "f", "{}")]})
        elif k == "tool" and pending:
            out.append({"role": "tool", "tool_call_id": pending.pop(0), "content": "r"})
        elif k in ("user", "assistant"):
            out.append({"role": k, "content": k})
    return out


@settings(max_examples=300, deadline=None)
@given(_roles, st.integers(min_value=-5, max_value=40))
def test_safe_boundary_properties(kinds: list[str], target: int) -> None:
    h = _build(kinds)
    b = find_safe_boundary(h, target)
    assert 0 <= b <= len(h)
    users = parse_turn_boundaries(h)
    if 0 < target < len(h) and users:
        assert b == 0 or h[b]["role"] == "user"


@settings(max_examples=300, deadline=None)
@given(_roles)
def test_clean_cut_points_agree_with_slow_check(kinds: list[str]) -> None:
    h = _build(kinds)
    assert clean_cut_points(h) == [cut_is_clean(h, i) for i in range(len(h) + 1)]
