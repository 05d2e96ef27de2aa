"""engine.context.compaction: SPEC §4 plan, summary, emergency, the automatic paths, preview → apply → undo."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from engine.context.compaction import Compactor
from engine.context.conversation import Session
from engine.context.plan import CompactionError, StalePreviewError, emergency_split, force_compression, plan_compaction
from engine.context.request import summary_block
from engine.context.summary_call import (
    build_summary_request,
    check_summary,
    generate_summary,
    load_prompt,
    normalize_summary,
)
from engine.context.tokens import estimate_message_tokens
from engine.context.turns import call_result_pairs, clean_cut_points, parse_turn_boundaries
from engine.model.events import CompactionCancelled, CompactionEvent, CompactionStarted, Event
from engine.model.messages import Message, assistant, call_ids, tool_call, tool_result, user
from engine.model.snapshot import WindowInfo
from engine.store import archive
from engine.store.config import Settings

VALID = """## Goal
Fix the crash in src/app.py.

## Constraints & Preferences
- Python 3.11 only

## Progress
### Done
- found `load_config` raising FileNotFoundError
### In Progress
- patching
### Blocked
- none

## Key Decisions
- keep the public API

## Next Steps
1. run pytest

## Critical Context
- error: FileNotFoundError: [Errno 2] No such file or directory: 'cfg.toml'
"""


def _turn(i: int, size: int = 40) -> list[Message]:
    return [
        user(f"q{i} " + "u" * size),
        assistant(None, [tool_call(f"c{i}", "read_file", '{"path": "src/app.py"}')]),
        tool_result(f"c{i}", f"r{i} " + "t" * size),
        assistant(f"a{i} " + "a" * size),
    ]


def _history(turns: int, size: int = 40) -> list[Message]:
    out: list[Message] = []
    for i in range(turns):
        out += _turn(i, size)
    return out


def _plan(history: list[Message], counts: list[int] | None = None, **kw: Any) -> Any:
    counts = counts if counts is not None else [10] * len(history)
    args = dict(
        window=1000, system_tokens=0, summary_tokens=0, tools_tokens=0, max_tokens=0,
        threshold_ratio=0.5, reserve_tokens=30,
    )
    args.update(kw)
    return plan_compaction(history, counts, **args)


# --------------------------------------------------------------------------- the plan


def test_plan_empty_and_under_threshold() -> None:
    p = _plan([])
    assert not p.needed and p.compact == [] and p.keep == [] and "empty" in p.reason
    h = _history(2)
    p = _plan(h, window=1000, threshold_ratio=0.5)  # 80 tokens ≤ 500
    assert not p.needed and p.keep == h and p.tokens_before == p.tokens_after == 80


def test_plan_threshold_equality() -> None:
    h = _history(3)  # 12 × 10 = 120 tokens
    fixed = dict(system_tokens=5, summary_tokens=5, tools_tokens=5, max_tokens=5)  # request = 140
    assert not _plan(h, window=280, threshold_ratio=0.5, **fixed).needed  # 140 == threshold: stays
    p = _plan(h, window=278, threshold_ratio=0.5, **fixed)  # threshold 139
    assert p.needed and p.tokens_before == 140 and p.threshold_tokens == 139


def test_plan_keeps_longest_clean_suffix_within_reserve() -> None:
    h = _history(3)
    p = _plan(h, window=100, reserve_tokens=40)
    assert p.needed and p.keep == h[8:] and p.compact == h[:8]
    assert p.keep_tokens == 40 and p.compact_tokens == 80
    assert p.tokens_after == p.tokens_before - 80 and p.cut_index == 8
    # reserve 39: the last 3 (30 tokens) start at the call: clean
    assert _plan(h, window=100, reserve_tokens=39).keep == h[9:]
    # reserve 25: the suffix of 2 (20 tokens) would start at a tool result → move on to a clean cut
    p = _plan(h, window=100, reserve_tokens=25)
    assert p.keep == h[11:]  # [final assistant] — [tool, assistant] would orphan the result
    counts = [10] * 12
    counts[-1] = 100
    p = _plan(h, counts, window=100, reserve_tokens=99)
    assert p.keep == [] and p.compact == h and p.needed


def test_plan_threshold_zero_reserve_edges() -> None:
    h = _history(2)
    assert _plan(h, threshold_ratio=0.0).needed
    p = _plan(h, window=100, threshold_ratio=0.5, reserve_tokens=80)  # reserve ≥ everything
    assert not p.needed and "fits in the reserve" in p.reason
    p = _plan(h, window=100, reserve_tokens=0)
    assert p.keep == [] and len(p.compact) == 8
    p = _plan(h, window=100, reserve_tokens=-5)  # a negative budget cannot keep anything
    assert p.keep == []


def test_plan_force_compacts_under_threshold() -> None:
    h = _history(3)
    p = _plan(h, window=10_000, force=True, reserve_tokens=40)
    assert p.needed and p.keep == h[8:] and p.reason == "compaction requested"


def test_plan_pinned_messages_stay_with_their_pairs() -> None:
    h = _history(3)
    h[2]["pinned"] = True  # a tool result: its call stays too
    p = _plan(h, window=100, reserve_tokens=40)
    assert [m["id"] for m in p.keep] == [m["id"] for m in [h[1], h[2], *h[8:]]]
    assert p.pinned_kept == 2 and len(p.compact) == 6
    assert p.keep_tokens == 60 and p.compact_tokens == 60
    for i in range(8):
        h[i]["pinned"] = True
    p = _plan(h, window=100, reserve_tokens=40)
    assert not p.needed and "pinned" in p.reason


def test_plan_interrupted_call_and_empty_or_duplicate_ids() -> None:
    h = [user("a"), assistant(None, [tool_call("x", "f", "{}")]), user("b"), assistant("c")]  # x unanswered
    p = _plan(h, window=10, reserve_tokens=25)
    assert p.keep == h[2:]
    h = [
        user("a"), assistant(None, [tool_call("", "f", "{}")]), tool_result("", "r1"),
        user("b"), assistant(None, [tool_call("", "f", "{}")]), tool_result("", "r2"), assistant("end"),
    ]
    p = _plan(h, window=10, reserve_tokens=35)
    assert p.keep == h[4:]  # empty ids repeat each turn: each result pairs with the call just before it
    assert _no_orphans(h, p.keep) and _no_orphans(h, p.compact)
    new, _, n = force_compression(h, "")
    assert new == h[3:] and n == 3
    dup = [user("a"), assistant(None, [tool_call("call_0", "f", "{}")]), tool_result("call_0", "r1"),
           user("b"), assistant(None, [tool_call("call_0", "f", "{}")]), tool_result("call_0", "r2")]
    assert _plan(dup, window=10, reserve_tokens=30).keep == dup[3:]


def test_plan_counts_must_match() -> None:
    with pytest.raises(ValueError, match="token counts"):
        _plan(_history(1), [1, 2])


def _no_orphans(history: list[Message], part: list[Message]) -> bool:
    """Every call/result pair of ``history`` is either wholly inside ``part`` or wholly outside."""
    inside = {id(m) for m in part}
    return all((id(history[j]) in inside) == (id(history[i]) in inside) for i, j in call_result_pairs(history))


_kinds = st.lists(
    st.tuples(st.sampled_from(["user", "text", "call1", "call2", "lost", "pin"]), st.integers(0, 60)),
    max_size=40,
)


def _build(kinds: list[tuple[str, int]]) -> tuple[list[Message], list[int]]:
    h: list[Message] = []
    counts: list[int] = []
    for i, (k, c) in enumerate(kinds):
        if k in ("user", "pin"):
            h.append(user(f"u{i}", pinned=True if k == "pin" else None))
            counts.append(c)
        elif k == "text":
            h.append(assistant(f"t{i}"))
            counts.append(c)
        elif k in ("call1", "call2", "lost"):
            ids = [f"c{i}a"] + ([f"c{i}b"] if k == "call2" else [])
            h.append(assistant(None, [tool_call(x, "f", "{}") for x in ids]))
            counts.append(c)
            if k != "lost":  # "lost": an interrupted call with no result
                for x in ids:
                    h.append(tool_result(x, "r"))
                    counts.append(c // 2 + 1)
    return h, counts


@hsettings(max_examples=400, deadline=None)
@given(_kinds, st.integers(-5, 400), st.booleans())
def test_plan_invariants(kinds: list[tuple[str, int]], reserve: int, force: bool) -> None:
    h, counts = _build(kinds)
    p = _plan(h, counts, window=300, threshold_ratio=0.5, reserve_tokens=reserve, force=force)
    ids = [m["id"] for m in h]
    got = [m["id"] for m in p.compact] + [m["id"] for m in p.keep]
    # partition: every message in exactly one part
    assert sorted(got) == sorted(ids) and len(set(got)) == len(ids)
    # order kept within each part
    pos = {m["id"]: i for i, m in enumerate(h)}
    assert [pos[m["id"]] for m in p.compact] == sorted(pos[m["id"]] for m in p.compact)
    assert [pos[m["id"]] for m in p.keep] == sorted(pos[m["id"]] for m in p.keep)
    if not any(m.get("pinned") for m in h):
        assert p.compact + p.keep == h
    # token bookkeeping
    assert p.compact_tokens + p.keep_tokens == sum(counts)
    assert p.tokens_after == p.tokens_before - p.compact_tokens
    if p.needed:
        suffix = sum(counts[p.cut_index :])
        assert suffix <= max(reserve, 0) or p.cut_index == len(h)
        if not any(m.get("pinned") for m in h):
            assert p.keep_tokens <= max(reserve, 0) or not p.keep
        # the longest such suffix: any earlier clean cut would exceed the reserve
        from engine.context.turns import clean_cut_points

        ok = clean_cut_points(h)
        for j in range(p.cut_index):
            if ok[j]:
                assert sum(counts[j:]) > reserve
        assert p.compact
    else:
        assert p.keep == h and p.compact == []
    # no orphaned tool call or result in either part (ids are unique here: check by id too)
    assert _no_orphans(h, p.keep) and _no_orphans(h, p.compact)
    for part in (p.keep, p.compact):
        calls = {cid for m in part for cid in call_ids(m)}
        results = {m["tool_call_id"] for m in part if m["role"] == "tool"}
        answered = {m["tool_call_id"] for m in h if m["role"] == "tool"}
        assert results <= calls and calls & answered <= results


_dup_kinds = st.lists(st.sampled_from(["user", "text", "call", "result", "call_empty", "result_empty"]), max_size=30)


@hsettings(max_examples=300, deadline=None)
@given(_dup_kinds)
def test_clean_cuts_with_duplicate_ids_agree_with_the_slow_check(kinds: list[str]) -> None:
    """turns.call_result_pairs (fixed for repeated ids) keeps clean_cut_points == cut_is_clean."""
    from engine.context.turns import clean_cut_points, cut_is_clean

    h: list[Message] = []
    for k in kinds:
        if k == "user":
            h.append(user("u"))
        elif k == "text":
            h.append(assistant("t"))
        elif k.startswith("call"):
            h.append(assistant(None, [tool_call("" if k == "call_empty" else "call_0", "f", "{}")]))
        else:
            h.append(tool_result("" if k == "result_empty" else "call_0", "r"))
    assert clean_cut_points(h) == [cut_is_clean(h, i) for i in range(len(h) + 1)]
    for i, j in call_result_pairs(h):
        assert h[i]["role"] == "assistant" and h[j]["role"] == "tool"
        between = h[min(i, j) + 1 : max(i, j)]
        cid = h[j]["tool_call_id"]
        if i < j:  # the nearest earlier call with that id
            assert not any(cid in call_ids(m) for m in between)


def test_plan_of_10000_messages_keeps_a_clean_suffix() -> None:
    """Its time is a benchmark figure (``python -m benchmarks plan``), not a test."""
    h = _history(2500)
    counts = [7] * len(h)
    plan = _plan(h, counts, window=20_000, reserve_tokens=2000)
    assert plan.needed and plan.keep_tokens <= 2000 and clean_cut_points(h)[plan.cut_index]


# --------------------------------------------------------------------------- emergency


def test_force_compression_small_histories_unchanged() -> None:
    for h in ([], [user("a")], [user("a"), assistant("b")]):
        new, summary, n = force_compression(h, "S")
        assert new == h and summary == "S" and n == 0


def test_force_compression_many_turns_keeps_from_middle_turn() -> None:
    h = _history(4)  # turns at 0, 4, 8, 12 → keep from turns[2] = 8
    snapshot = [dict(m) for m in h]
    new, summary, n = force_compression(h, "")
    assert new == h[8:] and n == 8 and h == snapshot  # pure
    assert "8 older messages" in summary and "dialog" in summary
    assert all("Emergency" not in str(m.get("content")) for m in new)
    h3 = _history(3)  # turns 0, 4, 8 → turns[1] = 4
    new, summary, n = force_compression(h3, "## Goal\nprevious")
    assert new == h3[4:] and n == 4 and summary.startswith("## Goal\nprevious\n\n[Emergency")


def test_force_compression_one_turn() -> None:
    head = [assistant("leftover"), tool_result("zz", "orphan"), assistant("more")]
    h = head + _turn(0)  # one user at 3; len 7 → find_safe_boundary(h, 3) = 3
    new, _, n = force_compression(h, "")
    assert new == h[3:] and n == 3
    h = _turn(0) + [assistant(f"step {i}") for i in range(6)]  # one user at 0 → boundary 0
    new, summary, n = force_compression(h, "")
    assert new == [h[0]] and n == len(h) - 1 and f"{n} older" in summary


def test_single_turn_with_a_huge_tool_result() -> None:
    h = _turn(0)
    counts = [10, 10, 100_000, 10]
    p = _plan(h, counts, window=50_000, reserve_tokens=5_000)
    assert p.needed and p.keep == h[3:] and p.compact_tokens == 100_020  # call and result leave together
    new, _, n = force_compression(h, "")
    assert new == [h[0]] and n == 3  # one turn starting at 0: only the user message stays


def test_force_compression_without_users_never_orphans() -> None:
    h = [assistant("a"), assistant(None, [tool_call("k", "f", "{}")]), tool_result("k", "r"), assistant("b")]
    dropped, kept = emergency_split(h)  # len//2 = 2 would split k from its result → next clean cut
    assert kept == h[3:] and dropped == h[:3]


def test_force_compression_of_10000_messages() -> None:
    """Its time is a benchmark figure (``python -m benchmarks plan``), not a test."""
    h = _history(2500)
    new, _, n = force_compression(h, "s")
    assert n + len(new) == len(h) and parse_turn_boundaries(new)[0] == 0


# --------------------------------------------------------------------------- the summary


def test_check_summary() -> None:
    assert check_summary(VALID) == (True, "")
    assert check_summary("")[0] is False and "empty" in check_summary("  ")[1]
    ok, why = check_summary("Goal: fix it. Next: test.")
    assert not ok and "##" in why
    ok, why = check_summary(VALID.replace("## Key Decisions", "Key decisions"))
    assert not ok and "Key Decisions" in why
    assert not check_summary(VALID.replace("## ", "# "))[0]  # level-1 headings are not the sections
    assert check_summary(VALID.replace("## Constraints & Preferences", "## Constraints and preferences"))[0]


def test_normalize_summary() -> None:
    assert normalize_summary(f"<think>hmm</think>\n```markdown\n{VALID}\n```") == VALID.strip()
    assert normalize_summary("  plain  ") == "plain"


class FakeLLM:
    def __init__(self, *replies: Any) -> None:
        self.replies = list(replies)
        self.calls: list[tuple[list[dict[str, Any]], int]] = []
        self.gate: asyncio.Event | None = None

    async def __call__(self, messages: list[dict[str, Any]], max_tokens: int) -> str:
        self.calls.append((messages, max_tokens))
        if self.gate is not None:
            await self.gate.wait()
        reply = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        if isinstance(reply, BaseException):
            raise reply
        return str(reply)


@pytest.mark.asyncio
async def test_generate_summary_request_and_validity() -> None:
    llm = FakeLLM(VALID)
    msgs = _turn(0)
    res = await generate_summary(llm, msgs, "## Goal\nold goal", "keep the file paths", 512)
    assert res.valid and res.text == VALID.strip() and res.duration_ms >= 0
    (wire, max_tokens), = llm.calls
    assert max_tokens == 512
    assert wire[0] == {"role": "system", "content": load_prompt()}
    body = wire[1]["content"]
    assert "<previous-summary>\n## Goal\nold goal\n</previous-summary>" in body
    assert "keep the file paths" in body and 'read_file({"path": "src/app.py"})' in body
    assert "tool result for call c0" in body
    for heading in ("## Goal", "## Constraints & Preferences", "## Progress", "## Key Decisions",
                    "## Next Steps", "## Critical Context"):
        assert heading in load_prompt()


@pytest.mark.asyncio
async def test_generate_summary_failures() -> None:
    res = await generate_summary(FakeLLM(RuntimeError("503 overloaded")), _turn(0), "", None, 100)
    assert not res.valid and "RuntimeError: 503 overloaded" in res.reason
    res = await generate_summary(FakeLLM("just prose"), _turn(0), "", None, 100)
    assert not res.valid and "headings" in res.reason
    res = await generate_summary(FakeLLM(""), _turn(0), "", None, 100)
    assert not res.valid and "empty" in res.reason
    assert not (await generate_summary(FakeLLM(VALID), [], "", None, 100)).valid
    with pytest.raises(asyncio.CancelledError):
        await generate_summary(FakeLLM(asyncio.CancelledError()), _turn(0), "", None, 100)


def test_summary_request_fits_budget() -> None:
    msgs = _history(50, size=5_000)
    wire = build_summary_request(msgs, "", None, budget_chars=20_000)
    assert len(wire[1]["content"]) < 21_000
    assert "first compaction" in wire[1]["content"]


def test_summary_block_names_the_archive() -> None:
    block = summary_block("## Goal\nx", ["2025-01-01", "2025-01-02"])
    assert "dialog/2025-01-02.jsonl" in block and "## Goal" in block
    assert summary_block("  ") == ""


# --------------------------------------------------------------------------- the Compactor


def _settings(**kw: Any) -> Settings:
    # these tests drive the model's summary (summary_mode "model"); the digest has its own tests
    base: dict[str, Any] = dict(
        max_tokens=100, compact_threshold_ratio=0.5, reserve_ratio=0.2, summary_max_tokens=300, summary_mode="model"
    )
    base.update(kw)
    return Settings(**base)


def _session(tmp_path: Path, turns: int = 6, size: int = 400) -> Session:
    s = Session.create(tmp_path / "s", "t")
    s.extend(_history(turns, size))
    return s


def _compactor(s: Session, llm: Any, window: int = 2_000, **kw: Any) -> tuple[Compactor, list[Event]]:
    events: list[Event] = []
    c = Compactor(s, _settings(**kw), llm, window=WindowInfo(window, 100, "override"), emit=events.append)
    return c, events


def _disk(path: Path) -> dict[str, str]:
    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.rglob("*")) if p.is_file()
    }


def _archived(s: Session) -> list[Message]:
    return [m for d in archive.list_days(s.path) for m in archive.read_day(s.path, d)]


@pytest.mark.asyncio
async def test_auto_summarizes_archives_and_records(tmp_path: Path) -> None:
    s = _session(tmp_path)  # 24 messages × ~170 tokens ≫ 50% of 2,000
    llm = FakeLLM(VALID)
    c, events = _compactor(s, llm)
    plan = c.plan()
    assert plan.needed
    ev = await c.run_auto()
    assert isinstance(ev, CompactionEvent) and ev.trigger == "auto" and ev.result == "summarized"
    assert ev.tokens_after < ev.tokens_before and ev.messages_compacted == len(plan.compact)
    assert ev.messages_kept == len(s.messages) == len(plan.keep) and ev.duration_ms >= 0
    assert s.summary == VALID.strip()
    assert [m["id"] for m in _archived(s)] == plan.compact_ids
    assert [e["type"] for e in s.read_events()] == ["compaction"]
    assert isinstance(events[0], CompactionStarted) and events[-1] is ev
    again = Session.load(s.path)
    assert again.summary == VALID.strip() and [m["id"] for m in again.messages] == plan.keep_ids
    # the next summary updates this one
    s.extend(_history(6, 400))
    await c.run_auto()
    assert "<previous-summary>" in llm.calls[-1][0][1]["content"]


@pytest.mark.asyncio
async def test_auto_respects_the_setting(tmp_path: Path) -> None:
    s = _session(tmp_path)
    c, events = _compactor(s, FakeLLM(VALID), auto_compact=False)
    assert c.plan().needed and await c.run_auto() is None and events == []
    assert c.start_auto() is None


@pytest.mark.asyncio
async def test_auto_does_nothing_under_threshold(tmp_path: Path) -> None:
    s = _session(tmp_path, turns=1, size=10)
    c, events = _compactor(s, FakeLLM(VALID))
    before = _disk(s.path)
    assert await c.run_auto() is None and events == [] and _disk(s.path) == before


@pytest.mark.asyncio
@pytest.mark.parametrize("reply", ["no sections here", RuntimeError("provider down")])
async def test_auto_falls_back_to_archived_drop(tmp_path: Path, reply: Any) -> None:
    s = _session(tmp_path)
    s.set_summary("## Goal\nearlier summary")
    c, _ = _compactor(s, FakeLLM(reply))
    plan = c.plan()
    ev = await c.run_auto()
    assert ev is not None and ev.result == "dropped" and ev.reason
    assert s.summary.startswith("## Goal\nearlier summary\n\n[")  # previous summary stays, note added
    assert f"{len(plan.compact)} older messages" in s.summary
    assert [m["id"] for m in _archived(s)] == plan.compact_ids


@pytest.mark.asyncio
async def test_never_two_auto_compactions_at_once(tmp_path: Path) -> None:
    s = _session(tmp_path)
    llm = FakeLLM(VALID)
    llm.gate = asyncio.Event()
    c, _ = _compactor(s, llm)
    other, _ = _compactor(s, llm)  # a second Compactor on the same session shares the lock
    t1 = c.start_auto()
    assert t1 is not None
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert c.busy and c.start_auto() is None and await other.run_auto() is None
    llm.gate.set()
    ev = await t1
    assert ev is not None and len(llm.calls) == 1


@pytest.mark.asyncio
async def test_auto_cancelled_cleanly_when_session_closes(tmp_path: Path) -> None:
    s = _session(tmp_path)
    llm = FakeLLM(VALID)
    llm.gate = asyncio.Event()
    c, events = _compactor(s, llm)
    before = _disk(s.path)
    task = c.start_auto()
    assert task is not None
    while not llm.calls:
        await asyncio.sleep(0)
    s.close()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled() and not c.busy
    assert _disk(s.path) == before
    assert any(isinstance(e, CompactionCancelled) and e.reason == "cancelled" for e in events)
    again = Session.load(s.path)
    assert again.load_report.clean and len(again.messages) == 24 and again.summary == ""


@pytest.mark.asyncio
async def test_proactive_summarizes_when_over_budget(tmp_path: Path) -> None:
    s = _session(tmp_path, turns=3, size=100)
    c, _ = _compactor(s, FakeLLM(VALID), window=10_000)
    assert await c.proactive() is None  # fits: nothing happens
    s.extend(_history(20, 400))
    assert c.over_budget()
    ev = await c.proactive()
    assert ev is not None and ev.trigger == "proactive" and ev.result == "summarized"
    assert not c.over_budget()


@pytest.mark.asyncio
async def test_proactive_falls_back_to_emergency(tmp_path: Path) -> None:
    s = _session(tmp_path, turns=12, size=400)
    c, _ = _compactor(s, FakeLLM(RuntimeError("boom")), window=1_500)
    assert c.over_budget()
    ev = await c.proactive()
    assert ev is not None and ev.trigger == "proactive" and ev.result == "dropped"
    assert "boom" in ev.reason and not c.over_budget()
    assert "[Emergency compression" in s.summary
    assert len(_archived(s)) + len(s.messages) == 48


@pytest.mark.asyncio
async def test_proactive_uses_request_builder_when_uncalibrated(tmp_path: Path) -> None:
    s = _session(tmp_path, turns=2, size=40)
    c, _ = _compactor(s, FakeLLM(VALID), window=10_000)
    huge = [user("x" * 500_000)]
    assert c.over_budget(lambda: huge)
    assert not c.over_budget(lambda: s.messages)


@pytest.mark.asyncio
async def test_proactive_waits_for_running_auto(tmp_path: Path) -> None:
    s = _session(tmp_path, turns=12, size=400)
    llm = FakeLLM(VALID)
    llm.gate = asyncio.Event()
    c, _ = _compactor(s, llm, window=3_000)
    auto = c.start_auto()
    while not llm.calls:
        await asyncio.sleep(0)
    pro = asyncio.create_task(c.proactive())
    await asyncio.sleep(0.01)
    assert not pro.done()
    llm.gate.set()
    await auto
    await pro
    assert not c.over_budget()


@pytest.mark.asyncio
async def test_reactive_emergency(tmp_path: Path) -> None:
    s = _session(tmp_path, turns=4, size=40)
    ids = [m["id"] for m in s.messages]
    c, _ = _compactor(s, None)
    ev = await c.reactive()
    assert ev.trigger == "reactive" and ev.result == "dropped" and ev.messages_compacted == 8
    assert [m["id"] for m in s.messages] == ids[8:]
    assert [m["id"] for m in _archived(s)] == ids[:8]
    assert "8 older messages" in s.summary
    s2 = Session.create(tmp_path / "tiny", "t")
    s2.extend([user("hi"), assistant("hello")])
    c2, _ = _compactor(s2, None)
    ev2 = await c2.reactive()
    assert ev2.result == "failed" and "nothing left" in ev2.reason and len(s2.messages) == 2
    assert [e.result for e in s2.compaction_events()] == ["failed"]


@pytest.mark.asyncio
async def test_summary_larger_than_window_is_shortened(tmp_path: Path) -> None:
    s = _session(tmp_path, turns=1, size=10)
    big = "## Goal\n" + "g" * 20_000
    s.set_summary(big)
    c, _ = _compactor(s, FakeLLM(VALID), window=2_000)
    assert c.over_budget()
    ev = await c.proactive()
    assert ev is not None and "shortened" in ev.reason and not c.over_budget()
    assert len(s.messages) == 4  # the summary was the problem: no message had to go
    kept = [m for m in _archived(s) if m.get("kind") == "summary"]
    assert kept and kept[0]["content"] == big  # the full text is archived first
    assert s.summary.startswith("## Goal\ngg") and "shortened" in s.summary


# --------------------------------------------------------------------------- manual


@pytest.mark.asyncio
async def test_preview_changes_nothing_then_apply_and_undo(tmp_path: Path) -> None:
    s = _session(tmp_path)
    s.set_summary("## Goal\nolder")
    history_before = [dict(m) for m in s.messages]
    disk = _disk(s.path)
    llm = FakeLLM(VALID)
    c, _ = _compactor(s, llm, window=10_000)
    pv = await c.preview("focus on file paths")
    assert _disk(s.path) == disk  # nothing on disk changed
    assert pv.plan.needed and pv.summary.valid and "focus on file paths" in llm.calls[0][0][1]["content"]
    assert pv.before.history > pv.after.history and pv.after.summary > 0
    edited = VALID + "\n- edited by the user"
    ev = await c.apply(pv, edited)
    assert ev.trigger == "manual" and ev.result == "summarized" and s.summary == edited.strip()
    assert [m["id"] for m in s.messages] == pv.keep_ids
    assert [m["id"] for m in _archived(s)] == pv.compact_ids
    undo = await c.undo()
    assert undo.result == "undone" and undo.messages_compacted == len(pv.compact_ids)
    assert s.messages == history_before and s.summary == "## Goal\nolder"
    assert [m["id"] for m in _archived(s)] == pv.compact_ids  # the archive keeps its copy
    reloaded = Session.load(s.path)
    assert reloaded.messages == history_before and reloaded.summary == "## Goal\nolder"
    assert [e.result for e in s.compaction_events()] == ["summarized", "undone"]
    with pytest.raises(CompactionError, match="nothing to undo"):
        await c.undo()


@pytest.mark.asyncio
async def test_undo_keeps_messages_added_since(tmp_path: Path) -> None:
    s = _session(tmp_path)
    before = [m["id"] for m in s.messages]
    c, _ = _compactor(s, FakeLLM(VALID), window=10_000)
    await c.apply(await c.preview())
    later = s.append(user("after compaction"))
    await c.undo()
    assert [m["id"] for m in s.messages] == [*before, later["id"]]


@pytest.mark.asyncio
async def test_apply_after_an_unusable_model_reply_applies_the_digest(tmp_path: Path) -> None:
    s = _session(tmp_path)
    c, _ = _compactor(s, FakeLLM("nope"), window=10_000)
    pv = await c.preview()
    # issue 27: the model's unusable reply never replaces the digest in the preview (kept apart, said why)
    assert pv.summary.valid and getattr(pv.summary, "model_text", "") == "nope"
    assert getattr(pv.summary, "model_problem", "") and pv.summary.text != "nope"
    ev = await c.apply(pv)  # Apply uses the digest shown
    assert ev.result == "summarized" and s.summary == pv.summary.text and "nope" not in s.summary


@pytest.mark.asyncio
async def test_stale_or_empty_previews(tmp_path: Path) -> None:
    s = _session(tmp_path)
    c, _ = _compactor(s, FakeLLM(VALID), window=10_000)
    pv = await c.preview()
    s.append(user("new message after the preview"))  # still fine: it is kept
    s.set_summary("changed elsewhere")
    with pytest.raises(StalePreviewError, match="summary changed"):
        await c.apply(pv)
    s.set_summary("")
    pv = await c.preview()
    s.rewrite(s.messages[2:])
    with pytest.raises(StalePreviewError, match="no longer in the history"):
        await c.apply(pv)
    empty = Session.create(tmp_path / "empty", "e")
    ce, _ = _compactor(empty, FakeLLM(VALID))
    pv = await ce.preview()
    assert not pv.plan.needed and not pv.summary.valid
    with pytest.raises(CompactionError, match="nothing to compact"):
        await ce.apply(pv)


@pytest.mark.asyncio
async def test_apply_refuses_a_summary_that_cannot_fit(tmp_path: Path) -> None:
    s = _session(tmp_path)
    c, _ = _compactor(s, FakeLLM(VALID), window=5_000)
    pv = await c.preview()
    disk = _disk(s.path)
    with pytest.raises(CompactionError, match="does not fit"):
        await c.apply(pv, VALID + "x" * 50_000)
    assert _disk(s.path) == disk


@pytest.mark.asyncio
async def test_plan_uses_calibrated_tokens(tmp_path: Path) -> None:
    s = _session(tmp_path, turns=6, size=400)
    c, _ = _compactor(s, FakeLLM(VALID), window=6_000)
    raw = c.plan()
    assert raw.needed  # raw heuristic: 3,114 + 100 > 3,000
    s.calibrator.record(raw.tokens_before - 100, (raw.tokens_before - 100) // 4, [m["id"] for m in s.messages])
    calibrated = c.plan()
    assert not calibrated.needed and calibrated.tokens_before < raw.tokens_before


def test_keep_from_protects_the_turn_in_progress() -> None:
    from engine.model.messages import new_message

    history = []
    for i in range(6):
        history += [new_message("user", f"q{i} " * 50), new_message("assistant", f"a{i} " * 50)]
    history.append(new_message("user", "a long new question " * 150))  # larger than the reserve
    counts = [estimate_message_tokens(m) for m in history]
    kwargs = dict(window=sum(counts), system_tokens=10, summary_tokens=0, tools_tokens=0, max_tokens=10,
                  threshold_ratio=0.5, reserve_tokens=50)
    plain = plan_compaction(history, counts, **kwargs)
    assert plain.keep == []  # SPEC: the kept suffix is within the reserve
    kept = plan_compaction(history, counts, keep_from=len(history) - 1, **kwargs)
    assert kept.keep == [history[-1]] and kept.compact == history[:-1]
    assert kept.tokens_after == kept.tokens_before - sum(counts[:-1])


@pytest.mark.asyncio
async def test_summary_material_fits_the_summarizing_models_own_window(tmp_path: Path) -> None:
    # the session's model has a huge window; the summarizer (e.g. the offline model) a small one
    s = _session(tmp_path, turns=40, size=2_000)
    big = FakeLLM(VALID)
    small = FakeLLM(VALID)
    small.context_window = 3_000  # type: ignore[attr-defined]
    c_big, _ = _compactor(s, big, window=200_000)
    c_small, _ = _compactor(s, small, window=200_000)
    await c_big.preview()
    await c_small.preview()
    chars = [sum(len(m["content"]) for m in llm.calls[0][0]) for llm in (big, small)]
    assert chars[0] > 60_000  # nothing to shrink for a 200k window
    # 3,000 − 300 (summary) − 1,000 (prompt overhead) tokens ≈ 4,250 chars of material, plus the prompt
    assert chars[1] < 4_250 + 4_000


@pytest.mark.asyncio
async def test_the_preview_and_the_event_have_one_before_after(tmp_path: Path) -> None:
    """Issue 27: the preview's before → after and the recorded event's (the chat's marker, the Compactions tab) are
    one figure on one basis: the prompt as sent, without the output reserve."""
    from engine.model.compaction_change import compaction_change, event_change

    s = _session(tmp_path)
    c, _ = _compactor(s, FakeLLM(VALID), window=10_000)
    pv = await c.preview()
    ev = await c.apply(pv)
    shown = compaction_change(pv.before.prompt, pv.after.prompt)
    recorded = event_change(ev.to_json() if hasattr(ev, "to_json") else vars(ev))
    assert ev.tokens_basis == "prompt" and (recorded.before, recorded.after) == (shown.before, shown.after)
    assert recorded.text() == shown.text() and pv.before.used - pv.before.prompt == pv.before.reserve > 0
