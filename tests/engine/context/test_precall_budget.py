"""Compactor.over_budget (running totals) decides exactly as over_budget_full (build + re-estimate).

Random histories — well-formed turns, calls without results, results without calls, tool calls with
missing fields, reasoning where the wire drops it, images — go through appends, compactions, undo,
clear, replaced messages, summaries and provider reports; after every step both checks are asked at
the windows around the request's size (one token under, at, one over), before and after calibration.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from engine.context.compaction import Compactor
from engine.context.conversation import Session
from engine.context.request import SessionRequest, build_request
from engine.context.tokens import estimate_message_tokens, estimate_tool_defs_tokens
from engine.model.messages import Message, assistant, new_message, tool_call, tool_result, user
from engine.model.snapshot import WindowInfo
from engine.store.config import Settings

PARAMETERS = {"type": "object", "properties": {"path": {"type": "string"}}}
TOOLS = [{"type": "function",
          "function": {"name": "read_file", "description": "Read a file.", "parameters": PARAMETERS}}]
MAX_TOKENS = 512


def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(["alpha", "beta", "gamma", "δέλτα", "ε", "x" * rng.randint(1, 60)])
                    for _ in range(rng.randint(0, 40)))


def _messages(rng: random.Random) -> list[Message]:
    """One random piece of history, sometimes malformed the ways imported logs are."""
    kind = rng.randrange(8)
    cid = f"c{rng.randrange(10**9)}"
    if kind == 0:
        return [user(_text(rng))]
    if kind == 1:
        return [assistant(None, [tool_call(cid, "read_file", '{"path": "a"}')]), tool_result(cid, _text(rng))]
    if kind == 2:  # a call left without a result
        return [assistant(_text(rng), [tool_call(cid, "read_file", "{}")])]
    if kind == 3:  # a result without its call
        return [tool_result(f"lost{cid}", _text(rng))]
    if kind == 4:  # a call without "type" and "id" fields: the wire fills them in
        return [assistant(None, [{"function": {"name": "read_file", "arguments": "{}"}}]),
                tool_result("", _text(rng))]
    if kind == 5:  # reasoning on a user message: not sent
        return [new_message("user", _text(rng), reasoning_content=_text(rng))]
    if kind == 6:
        return [user([{"type": "text", "text": _text(rng)}, {"type": "image_url", "image_url": {"url": "x"}}])]
    return [assistant(_text(rng), reasoning_content=_text(rng))]


def _request_size(c: Compactor, request: SessionRequest) -> int:
    """What the full check compares with the window on the request path (uncalibrated heuristic)."""
    return sum(estimate_message_tokens(m) for m in request()) + estimate_tool_defs_tokens(c.tools) + MAX_TOKENS


def _check(c: Compactor, request: SessionRequest) -> int:
    """Both checks at the windows around each boundary; returns how many decisions were compared."""
    sizes = {_request_size(c, request)}
    c.window = WindowInfo(10**9, MAX_TOKENS, "override")
    sizes.add(c.snapshot().used)
    compared = 0
    for size in sizes:
        for window in (size - 1, size, size + 1):
            if window <= 0:
                continue
            c.window = WindowInfo(window, MAX_TOKENS, "override")
            for builder in (request, None):
                assert c.over_budget(builder) == c.over_budget_full(builder), (window, builder)
                compared += 1
    return compared


def _step(rng: random.Random, s: Session, c: Compactor) -> None:
    op = rng.randrange(10)
    if op <= 3 or len(s.messages) < 3:
        s.extend(_messages(rng))
    elif op == 4:  # a compaction: the older half leaves, with a summary (an undo point is kept)
        keep = s.messages[len(s.messages) // 2:]
        gone = [m for m in s.messages if m not in keep]
        point = {"id": f"u{rng.randrange(10**9)}", "trigger": "manual", "summary": s.summary,
                 "order": [m["id"] for m in s.messages], "removed": gone, "ts": "2026-01-01T00:00:00+00:00"}
        s.commit_compaction(keep, summary=_text(rng) or "a summary", undo_point=point)
    elif op == 5 and s.undo_stack():
        s.undo_last()
    elif op == 6 and rng.random() < 0.3:  # /clear
        s.commit_compaction([], summary="")
    elif op == 7:  # a message replaced (an offload cut, a final streamed text)
        msg = dict(rng.choice(s.messages))
        msg["content"] = _text(rng) if msg.get("role") != "assistant" or not msg.get("tool_calls") else None
        s.update_message(msg["id"], msg)
    elif op == 8:  # a provider report: the prefix the next request starts with, or not
        raw = c.snapshot()
        ids = [str(m.get("id")) for m in s.messages]
        if rng.random() < 0.3:
            ids = ids[1:]
        actual = max(1, round(raw.raw_prompt_tokens * rng.uniform(0.7, 1.4)))
        s.calibrator.record(raw.raw_prompt_tokens, actual, ids, (raw.system, raw.summary, raw.tools))
        s.extend(_messages(rng))  # the next request: the reported part plus what was added since
    else:
        s.set_summary(rng.choice(["", _text(rng)]))


@pytest.mark.parametrize("seed", range(6))
def test_fast_check_decides_as_the_full_re_estimate(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    s = Session.create(tmp_path / "s", "t")
    system = "You are a careful agent. " * rng.randint(0, 20)
    c = Compactor(s, Settings(), None, system_prompt=system, tools=TOOLS)
    request = SessionRequest(s, system)
    compared = 0
    calibrated_seen = False
    for _ in range(40):
        _step(rng, s, c)
        calibrated_seen |= s.calibrator.calibrated
        compared += _check(c, request)
    assert calibrated_seen and compared >= 40 * 6
    s.close()


def test_the_request_builder_is_the_agents(tmp_path: Path) -> None:
    s = Session.create(tmp_path / "s", "t")
    s.extend([user("hi"), assistant("hello")])
    s.set_summary("## Goal\nsay hi")
    request = SessionRequest(s, "system prompt")
    assert request() == build_request("system prompt", s.summary, s.messages, archive_days=s.archive_days())
    s.close()


def test_any_other_builder_is_estimated_in_full(tmp_path: Path) -> None:
    s = Session.create(tmp_path / "s", "t")
    s.extend([user("hi")])
    c = Compactor(s, Settings(), None, system_prompt="", tools=[], window=WindowInfo(10_000, 100, "override"))
    assert c.over_budget(lambda: [user("x" * 500_000)])
    assert not c.over_budget(lambda: s.messages)
    s.close()
