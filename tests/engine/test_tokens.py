from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.context.tokens import (
    HeuristicEstimator,
    TokenCache,
    TokenLedger,
    estimate_message_tokens,
    estimate_text_tokens,
    estimate_tool_defs_tokens,
    make_estimator,
    message_key,
)
from engine.model.messages import tool_call


def test_plain_user_message() -> None:
    # 10 chars + 12 overhead = 22 → 22*2//5 = 8
    assert estimate_message_tokens({"role": "user", "content": "a" * 10}) == 8


def test_empty_and_none_content_count_only_overhead() -> None:
    assert estimate_message_tokens({"role": "assistant", "content": None}) == 12 * 2 // 5
    assert estimate_message_tokens({"role": "assistant", "content": ""}) == 4


def test_code_points_not_bytes() -> None:
    # "é" is 2 bytes, "😀" 4 bytes: each counts as one character
    msg = {"role": "user", "content": "é😀" * 10}
    assert estimate_message_tokens(msg) == (20 + 12) * 2 // 5


def test_reasoning_tool_calls_and_tool_call_id_count() -> None:
    call = tool_call("call_1", "bash", '{"command": "ls"}')
    msg = {"role": "assistant", "content": "hi", "reasoning_content": "think", "tool_calls": [call]}
    chars = 2 + 5 + len("call_1") + len("function") + len("bash") + len('{"command": "ls"}') + 12
    assert estimate_message_tokens(msg) == chars * 2 // 5
    tool = {"role": "tool", "content": "out", "tool_call_id": "call_1"}
    assert estimate_message_tokens(tool) == (3 + 6 + 12) * 2 // 5


def test_content_parts_and_media() -> None:
    msg = {
        "role": "user",
        "content": [
            {"type": "text", "text": "abcde"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            {"type": "text", "text": "fghij"},
            {"type": "input_audio", "input_audio": {"data": "xx", "format": "wav"}},
        ],
    }
    assert estimate_message_tokens(msg) == (10 + 12) * 2 // 5 + 2 * 256


def test_metadata_is_not_counted() -> None:
    base = {"role": "user", "content": "hello"}
    with_meta = dict(base, id="x" * 32, ts="2026-01-01T00:00:00+00:00", pinned=True)
    assert estimate_message_tokens(base) == estimate_message_tokens(with_meta)


def test_malformed_tool_calls_do_not_crash() -> None:
    msg: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [{"id": None}, "junk", {}]}
    assert estimate_message_tokens(msg) == 4


def test_tool_defs_formula() -> None:
    params = {"type": "object", "properties": {"command": {"type": "string"}}}
    tools = [
        {"type": "function", "function": {"name": "bash", "description": "Run a command", "parameters": params}},
        {"type": "function", "function": {"name": "ls", "description": "", "parameters": {}}},
    ]
    expected = (4 + 13 + len(json.dumps(params)) + 20 + 2 + 0 + 2 + 20) * 2 // 5
    assert estimate_tool_defs_tokens(tools) == expected
    assert estimate_tool_defs_tokens([]) == 0
    assert estimate_tool_defs_tokens(None) == 0


def test_tool_defs_sum_before_rounding() -> None:
    # each alone rounds down to 8 (21*2//5); together 42*2//5 = 16 — the sum is taken first
    one = {"type": "function", "function": {"name": "a", "description": ""}}
    assert estimate_tool_defs_tokens([one]) == 8
    assert estimate_tool_defs_tokens([one, one]) == 16
    three = [one] * 3  # 63 chars → 25, not 24
    assert estimate_tool_defs_tokens(three) == 25


def test_text_tokens() -> None:
    assert estimate_text_tokens("") == 0
    assert estimate_text_tokens("x" * 100) == 40


def test_make_estimator_rejects_unknown() -> None:
    try:
        make_estimator("magic")
    except ValueError as exc:
        assert "magic" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("expected ValueError")


def test_cache_hits_on_unchanged_messages() -> None:
    cache = TokenCache(HeuristicEstimator())
    msgs = [{"role": "user", "content": f"message {i}"} for i in range(50)]
    cache.total(msgs)
    assert cache.misses == 50
    cache.total(msgs)
    assert cache.misses == 50 and cache.hits == 50


class _CountingEstimator(HeuristicEstimator):
    def __init__(self) -> None:
        self.calls = 0

    def message(self, msg: dict[str, Any]) -> int:
        self.calls += 1
        return super().message(msg)


def test_ledger_reestimates_only_changed_messages() -> None:
    est = _CountingEstimator()
    history = [{"role": "user", "content": f"m{i} " * (i + 1)} for i in range(100)]
    ledger = TokenLedger(TokenCache(est), history)
    assert est.calls == 100
    history[10] = {"role": "user", "content": "changed"}
    history[20]["content"] = "edited in place"
    history.append({"role": "assistant", "content": "new"})
    ledger.sync(history)
    assert est.calls == 103
    assert ledger.total == sum(estimate_message_tokens(m) for m in history)


def test_ledger_append_is_incremental() -> None:
    est = _CountingEstimator()
    ledger = TokenLedger(TokenCache(est))
    for i in range(10):
        ledger.append({"role": "user", "content": "x" * i})
    assert est.calls == 10
    assert ledger.total == sum(ledger.counts)


_content = st.one_of(
    st.none(),
    st.text(max_size=40),
    st.lists(
        st.one_of(
            st.builds(lambda t: {"type": "text", "text": t}, st.text(max_size=20)),
            st.just({"type": "image_url", "image_url": {"url": "http://x"}}),
        ),
        max_size=3,
    ),
)
_message = st.builds(
    lambda role, content, cid: {"role": role, "content": content, **({"tool_call_id": cid} if cid else {})},
    st.sampled_from(["user", "assistant", "tool"]),
    _content,
    st.one_of(st.none(), st.text(min_size=1, max_size=8)),
)
_edit = st.tuples(
    st.sampled_from(["append", "insert", "delete", "replace", "mutate", "truncate"]),
    _message,
    st.integers(min_value=0, max_value=1000),
    st.booleans(),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_message, max_size=20), st.lists(_edit, max_size=25))
def test_cached_totals_equal_fresh_recount_after_random_edits(initial: list[Any], edits: list[Any]) -> None:
    history = [dict(m) for m in initial]
    ledger = TokenLedger(TokenCache(HeuristicEstimator()), history)
    for op, msg, pos, sync_now in edits:
        msg = dict(msg)
        n = len(history)
        if op == "append":
            history.append(msg)
            ledger.append(msg)
        elif op == "insert":
            history.insert(pos % (n + 1), msg)
        elif op == "delete" and n:
            del history[pos % n]
        elif op == "replace" and n:
            history[pos % n] = msg
        elif op == "mutate" and n:
            history[pos % n]["content"] = msg["content"]
        elif op == "truncate":
            del history[pos % (n + 1):]
        if sync_now:
            ledger.sync(history)
    ledger.sync(history)
    fresh = [estimate_message_tokens(m) for m in history]
    assert ledger.counts == fresh
    assert ledger.total == sum(fresh)


def test_responses_namespaces_and_custom_tools_are_counted_with_what_they_hold() -> None:
    # Codex 0.171's code mode: namespaces of tools, and a custom tool whose grammar is its "parameters"
    from engine.context.tokens import estimate_tool_defs_tokens

    fmt = {"type": "grammar", "syntax": "lark", "definition": "start: SOURCE\nSOURCE: /[\\s\\S]+/"}
    custom = {"type": "custom", "name": "exec", "description": "Run JavaScript", "format": fmt}
    fn = {"type": "function", "name": "wait", "description": "Waits", "parameters": {"type": "object"}}
    namespace = {"type": "namespace", "name": "functions", "description": "", "tools": [custom, fn]}
    assert estimate_tool_defs_tokens([custom]) > estimate_tool_defs_tokens([{**custom, "format": None}])
    assert estimate_tool_defs_tokens([namespace]) >= estimate_tool_defs_tokens([custom]) + estimate_tool_defs_tokens(
        [fn])


def test_a_ledger_holds_one_key_a_message() -> None:
    """The key a ledger keeps for a message (a copy of its shape: tuples of its tool calls' and content parts'
    fields) is the one its cache's memo keeps: one object, not two equal ones."""
    msgs = [{"role": "assistant", "content": [{"type": "text", "text": f"part {i}"}],
             "tool_calls": [tool_call(f"c{i}", "read_file", json.dumps({"path": f"f{i}.py"}))]} for i in range(20)]
    ledger = TokenLedger(TokenCache(HeuristicEstimator()), msgs[:10])
    ledger.extend(msgs[10:])
    ledger.replace(3, {**msgs[3], "content": "changed"})
    memo = {id(k) for k in ledger.cache._memo}
    assert all(id(k) in memo for k in ledger._keys)


def _tuples(value: Any) -> int:
    return isinstance(value, tuple) + sum(_tuples(v) for v in value) if isinstance(value, tuple) else 0


def test_a_tool_call_s_key_is_one_flat_tuple_and_tells_every_field_apart() -> None:
    """A message's key is held for every message of a session (the ledger, the cache's memo): a tool call of the
    usual shape is one tuple of its four values, not eight of sorted pairs; a change of any of them, or a call of
    another shape, is another key."""
    call = {"id": "c1", "type": "function", "function": {"name": "Read", "arguments": '{"path": "a"}'}}
    msg = {"role": "assistant", "content": None, "tool_calls": [call, call]}
    assert _tuples(message_key(msg)) == 4  # the key, the calls, one a call
    changed = [json.loads(json.dumps(call)) for _ in range(4)]
    changed[0]["id"], changed[1]["type"] = "c2", "custom"
    changed[2]["function"]["name"], changed[3]["function"]["arguments"] = "Write", "{}"
    keys = {message_key({**msg, "tool_calls": [c]}) for c in [call, *changed]}
    assert len(keys) == 5
    odd = [{**call, "extra": 1}, {"id": "c1", "type": "function", "function": {"name": "Read"}}, ["c1", "Read"],
           {"id": "c1", "type": "function", "function": {"name": "Read", "arguments": {"path": "a"}}}]
    assert len({message_key({**msg, "tool_calls": [c]}) for c in [call, *odd]}) == 5
    cache = TokenCache(HeuristicEstimator())
    again = {**msg, "tool_calls": [json.loads(json.dumps(call))]}  # an equal call, other objects: the same key
    assert cache.count(again) == cache.count(msg | {"tool_calls": [call]})
    assert cache.hits == 1


def test_a_replaced_message_s_old_shape_leaves_the_memo() -> None:
    """A followed response grows line by line and is replaced each time: the memo drops the shape it replaced (each
    was kept for good, with the text it held); a count asked again is made again, the same."""
    cache = TokenCache(HeuristicEstimator())
    first = {"role": "assistant", "content": "one"}
    ledger = TokenLedger(cache, [first, {"role": "user", "content": "hi"}])
    grown = {"role": "assistant", "content": "one", "tool_calls": [tool_call("c1", "Read", '{"p": 1}')]}
    ledger.replace(0, grown)
    assert len(cache._memo) == 2 and message_key(first) not in cache._memo
    assert ledger.total == cache.count(grown) + cache.count({"role": "user", "content": "hi"})
    ledger.replace(0, dict(grown))  # an equal message: its shape stays
    assert message_key(grown) in cache._memo
    assert cache.count(first) == estimate_message_tokens(first)
    cache.bound(2)
    assert not cache._memo and cache.max_entries == 2


@settings(max_examples=100, deadline=None)
@given(st.lists(_message, min_size=1, max_size=20), st.lists(_edit, max_size=25))
def test_a_followed_view_s_ledger_keeps_no_key_a_message_and_counts_the_same(
        initial: list[Any], edits: list[Any]) -> None:
    """A followed view's ledger (:meth:`TokenLedger.follow`: its messages change as new dicts, never in place) holds
    no key of each message (a key a message and its memo entry were held for as long as the file grew: 0.4 MB in ten
    minutes of following) and at most the memo's bound of shapes; its counts are a fresh count's after any edits."""
    from engine.context.tokens import FOLLOW_MEMO

    history = [dict(m) for m in initial]
    ledger = TokenLedger(TokenCache(HeuristicEstimator()), history)
    ledger.follow(FOLLOW_MEMO)
    assert not ledger.cache._memo and ledger.cache.max_entries == FOLLOW_MEMO
    for op, msg, pos, _ in edits:
        msg = dict(msg)
        n = len(history)
        if op == "append":
            history.append(msg)
            ledger.append(msg)
        elif op == "insert":
            history.insert(pos % (n + 1), msg)
            ledger.reset(history)
        elif op == "delete" and n:
            del history[pos % n]
            ledger.delete(pos % n, pos % n + 1)
        elif op in ("replace", "mutate") and n:  # (a change comes as a new dict)
            history[pos % n] = msg
            ledger.replace(pos % n, msg)
        elif op == "truncate":
            del history[pos % (n + 1):]
            ledger.sync(history)
    fresh = [estimate_message_tokens(m) for m in history]
    assert ledger.counts == fresh and ledger.total == sum(fresh)
    assert not getattr(ledger, "_keys", None) and len(ledger.cache._memo) <= FOLLOW_MEMO


def test_a_followed_view_s_ledger_holds_far_less_than_an_object_a_message() -> None:
    """Measured: a ledger of 3,000 messages made to follow holds ~ a list slot and a count a message, not their keys
    (a tuple of each message's shape, and of each tool call's) and a memo entry each."""
    import tracemalloc

    from engine.context.tokens import FOLLOW_MEMO

    msgs = [{"role": "assistant", "content": f"answer {i}",
             "tool_calls": [tool_call(f"c{i}", "read_file", json.dumps({"path": f"f{i}"}))]} for i in range(3_000)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        ledger = TokenLedger(TokenCache(HeuristicEstimator()))
        ledger.follow(FOLLOW_MEMO)
        for m in msgs:
            ledger.append(m)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held < 100 * len(msgs), f"{held / len(msgs):.0f} bytes a message"
    assert ledger.total == sum(estimate_message_tokens(m) for m in msgs)
