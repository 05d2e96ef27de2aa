"""The per-call context records of an import are made from running totals (``engine.context.snapshots.RunningHistory``)
instead of walking every message of the context at each call (issue 28: opening a long session was quadratic).
They must be the records the full computation made: a recorder whose history is walked whole at each call (as
``build_snapshot`` walks it: each message's role, count and id; the calibrator given the id of every message) is
the reference, and both are run call by call on the shared sessions — read whole, and followed in
chunks with the messages the reader replaced cut back in both — and on random histories (hypothesis)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.context.calibration import SourceCalibrator
from engine.context.snapshots import RunningHistory, build_snapshot, snapshot_from_totals
from engine.context.tokens import HeuristicEstimator
from engine.ingest import ContextRecorder, _Ctx, _window
from engine.model.messages import Message
from engine.model.snapshot import WindowInfo
from engine.sources.claude_code import ClaudeCodeReader
from engine.sources.detect import detect_format
from engine.sources.model import SourceSession
from engine.sources.readers import read_source
from engine.store.config import Settings

SHARED = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "sessions"
FILES = sorted(p for p in SHARED.glob("*/*") if p.suffix in (".jsonl", ".json", ".traj")) if SHARED.exists() else []


class WalkedHistory(RunningHistory):
    """The history of a call as it was made before running totals: its stretch of the messages walked whole, each
    message's role and id read as the call is recorded (``build_snapshot``'s loop; the reference)."""

    def __init__(self, recorder: ContextRecorder) -> None:
        super().__init__()
        self.recorder = recorder

    def totals(self, start: int, end: int) -> tuple[int, int, int]:
        by_role = {"user": 0, "assistant": 0, "tool": 0}
        history = self.recorder.src.messages[start:end]
        for msg, tokens in zip(history, self.recorder.counts[start:end], strict=True):
            role = msg.get("role")
            by_role[role if role in by_role else "user"] += tokens
        return by_role["user"], by_role["assistant"], by_role["tool"]

    def ids_of(self, start: int, end: int) -> tuple[str, ...]:
        return tuple(str(m.get("id", "")) for m in self.recorder.src.messages[start:end])

    def named_ids(self, start: int, end: int, ids: tuple[str, ...] | None = None) -> tuple[str, ...]:
        return tuple(str(m.get("id")) for m in self.recorder.src.messages[start:end])


class FullRecorder(ContextRecorder):
    """The recorder with each call's history walked whole (the reference)."""

    def __init__(self, src: SourceSession, ctx: _Ctx) -> None:
        super().__init__(src, ctx)
        self.running = WalkedHistory(self)


def _ctx(src: SourceSession) -> _Ctx:
    settings, estimator = Settings(), HeuristicEstimator()
    return _Ctx(settings, estimator, _window(src, settings, None),
                estimator.text(src.system_prompt) if src.system_prompt else 0,
                estimator.tools(src.tools) if src.tools else 0)


@pytest.mark.skipif(not FILES, reason="the shared sessions are not here")
@pytest.mark.parametrize("path", FILES, ids=[f"{p.parent.name}/{p.name[:24]}" for p in FILES])
def test_every_call_record_is_the_full_computations(path: Path) -> None:
    fmt = detect_format(path)
    if fmt in ("mini-swe-agent", "openai"):
        pytest.skip("imported through engine.transcript (no context recorder)")
    src = read_source(path, fmt)
    ctx = _ctx(src)
    fast, full = ContextRecorder(src, ctx), FullRecorder(src, _ctx(src))
    records = [(fast.record(call), full.record(call)) for call in src.calls]
    assert records, "a shared session with provider calls"
    for call, (mine, reference) in zip(src.calls, records, strict=True):
        assert mine == reference, f"call {call.index}"
    assert fast.calibrator == full.calibrator


@pytest.mark.skipif(not FILES, reason="the shared sessions are not here")
@pytest.mark.parametrize("name", ["8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl", "subagent.jsonl"])
@pytest.mark.parametrize("chunk", [1, 7, 40])
def test_followed_in_chunks_call_by_call(name: str, chunk: int) -> None:
    """A followed file: the reader grows and replaces messages (a response written over several lines) and
    both recorders are cut back where it says; every call's record is the same, made when it arrived."""
    path = SHARED / "claude-code" / name
    lines = path.read_bytes().splitlines(keepends=True)
    reader = ClaudeCodeReader(path)
    fast = full = None
    done = 0
    replaced = 0
    for at in range(0, len(lines), chunk):
        changes = reader.feed(b"".join(lines[at:at + chunk]))
        src = reader.session
        if fast is None or full is None:
            if not src.calls:
                continue
            fast, full = ContextRecorder(src, _ctx(src)), FullRecorder(src, _ctx(src))
        for recorder in (fast, full):
            recorder.src = recorder.prefixes.src = src
        if changes.messages_from < len(fast.counts):
            replaced += 1
            fast.changed_from(changes.messages_from)
            full.changed_from(changes.messages_from)
        for call in src.calls[done:]:
            assert fast.record(call) == full.record(call), f"call {call.index} at line {at}"
        done = len(src.calls)
    assert done > 0 and fast is not None and full is not None
    assert fast.calibrator == full.calibrator
    if chunk == 1:
        assert replaced, "the follow cut messages back at least once"


# ----------------------------------------------------------------------------------------- random histories

ROLES = st.sampled_from(["user", "assistant", "tool", "system"])
MESSAGE = st.fixed_dictionaries({"role": ROLES}, optional={"id": st.sampled_from(["a", "b", "c", "d"]) | st.text(
    min_size=1, max_size=3) | st.none()})
OPS = st.lists(st.one_of(
    st.tuples(st.just("add"), st.lists(st.tuples(MESSAGE, st.integers(0, 500)), min_size=1, max_size=6)),
    st.tuples(st.just("cut"), st.integers(0, 30)),
    st.tuples(st.just("call"), st.integers(0, 30), st.integers(0, 30), st.integers(0, 3000))), max_size=40)


@settings(max_examples=200, deadline=None)
@given(OPS)
def test_running_totals_are_the_sums_of_the_stretch(ops: list[tuple[Any, ...]]) -> None:
    """RunningHistory's totals and ids of any stretch are those of walking it, through appends and cuts, and a
    snapshot made from them is build_snapshot's (the calibrator going on from the same calls)."""
    running = RunningHistory()
    messages: list[Message] = []
    counts: list[int] = []
    fast, full = SourceCalibrator(exact_prefix=300), SourceCalibrator(exact_prefix=300)
    win = WindowInfo(20_000, 1000, "model")
    for op in ops:
        if op[0] == "add":
            msgs = [dict(m) for m, _ in op[1]]
            running.extend(msgs, [n for _, n in op[1]])
            messages += msgs
            counts += [n for _, n in op[1]]
        elif op[0] == "cut":
            at = min(op[1], len(messages))
            running.truncate(at)
            del messages[at:], counts[at:]
        else:
            start, end = sorted((min(op[1], len(messages)), min(op[2], len(messages))))
            history = messages[start:end]
            assert len(running) == len(messages)
            by_role = {"user": 0, "assistant": 0, "tool": 0}
            for m, n in zip(history, counts[start:end], strict=True):
                by_role[m["role"] if m["role"] in by_role else "user"] += n
            assert running.totals(start, end) == (by_role["user"], by_role["assistant"], by_role["tool"])
            assert running.ids_of(start, end) == tuple(str(m.get("id", "")) for m in history)
            assert running.named_ids(start, end) == tuple(str(m.get("id")) for m in history)
            kwargs: dict[str, Any] = {"window": win, "system_tokens": 300, "summary_tokens": 20, "tools_tokens": 0,
                                      "estimator_name": "heuristic", "threshold_ratio": 0.8,
                                      "provider_prompt_tokens": op[3] or None, "exact_system": True}
            mine = snapshot_from_totals(history_tokens=running.totals(start, end),
                                        history_ids=running.ids_of(start, end), calibrator=fast, **kwargs)
            reference = build_snapshot(history=history, history_counts=counts[start:end], calibrator=full, **kwargs)
            assert mine.message_tokens == []
            mine.message_tokens = reference.message_tokens
            assert mine == reference
            if op[3]:
                fast.record(mine.raw_prompt_tokens, op[3], running.named_ids(start, end), (300, 20, 0))
                full.record(reference.raw_prompt_tokens, op[3], [str(m.get("id")) for m in history], (300, 20, 0))
            assert fast == full
