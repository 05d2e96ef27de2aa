"""The incremental readers: every shared session fed line by line and in random byte chunks ends in the same
state as read whole (messages, calls, compactions), and each feed's changes say what it changed."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engine.sources.claude_code import ClaudeCodeReader, read_claude_code
from engine.sources.codex import CodexReader, read_codex
from engine.sources.model import SourceChanges, SourceSession
from tests.engine.sources.conftest import CLAUDE, CODEX, claude_files


def _message(msg: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in msg.items() if k != "id"}


def state(src: SourceSession) -> dict[str, Any]:
    """What a view draws from a session, without the ids a read makes up."""
    return {
        "messages": [_message(m) for m in src.messages],
        "live_start": src.live_start, "off_chain": src.off_chain, "model": src.model, "window": src.window,
        "calls": [(c.index, c.prompt_tokens, c.completion_tokens, c.cache_read_tokens, c.cache_write_tokens,
                   c.model, c.message_index, c.window, c.max_tokens, c.prefix_key) for c in src.calls],
        "compactions": [(c.trigger, c.message_index, c.calls_before, c.tokens_before, c.tokens_after, c.summary,
                         c.messages_after, c.post_tokens, c.placed_by) for c in src.compactions],
        "skipped": [s.describe() for s in src.skipped], "ignored": src.ignored,
        "agent_cost_usd": src.agent_cost_usd, "lines": src.lines, "session_id": src.session_id,
    }


class Mirror:
    """A copy of the session kept up to date only through the changes each feed reports — what a view does."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.calls: list[tuple[Any, ...]] = []

    def apply(self, changes: SourceChanges, src: SourceSession) -> None:
        del self.messages[changes.messages_from:]
        self.messages.extend(_message(m) for m in src.messages[changes.messages_from:])
        call = lambda c: (c.index, c.prompt_tokens, c.completion_tokens, c.window)  # noqa: E731
        for i in changes.calls_updated:
            self.calls[i] = call(src.calls[i])
        del self.calls[changes.calls_from:]
        self.calls.extend(call(c) for c in src.calls[changes.calls_from:])


def feed_in_pieces(path: Path, pieces: Callable[[bytes], list[bytes]]) -> tuple[SourceSession, Mirror, int]:
    reader = ClaudeCodeReader(path)
    mirror = Mirror()
    for piece in pieces(path.read_bytes()):
        mirror.apply(reader.feed(piece), reader.session)
    return reader.finish(subagents=False), mirror, reader.rebuilds


def feed_codex_in_pieces(path: Path, pieces: Callable[[bytes], list[bytes]]) -> tuple[SourceSession, Mirror]:
    reader = CodexReader(path)
    mirror = Mirror()
    for piece in pieces(path.read_bytes()):
        mirror.apply(reader.feed(piece), reader.session)
    session = reader.finish()
    mirror.apply(SourceChanges(len(mirror.messages), len(mirror.calls)), session)  # reasoning left at the end
    return session, mirror


def by_line(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


def random_chunks(seed: int) -> Callable[[bytes], list[bytes]]:
    def split(data: bytes) -> list[bytes]:
        rng = random.Random(seed)
        out, at = [], 0
        while at < len(data):
            n = rng.choice((1, 7, 100, 1000, 20_000))
            out.append(data[at:at + n])
            at += n
        return out
    return split


@pytest.mark.parametrize("path", claude_files(), ids=lambda p: p.name[:12])
@pytest.mark.parametrize("how", ["lines", "chunks-1", "chunks-2"])
def test_claude_code_fed_in_pieces_equals_read_whole(path: Path, how: str) -> None:
    whole = read_claude_code(path, subagents=False)
    pieces = by_line if how == "lines" else random_chunks(int(how[-1]))
    fed, mirror, _ = feed_in_pieces(path, pieces)
    assert state(fed) == state(whole)
    assert mirror.messages == [_message(m) for m in whole.messages]
    assert mirror.calls == [(c.index, c.prompt_tokens, c.completion_tokens, c.window) for c in whole.calls]


def codex_files() -> list[Path]:
    return sorted(CODEX.glob("rollout-*.jsonl"))


@pytest.mark.parametrize("path", codex_files(), ids=lambda p: p.name[-14:-6])
@pytest.mark.parametrize("how", ["lines", "chunks-1", "chunks-2"])
def test_codex_fed_in_pieces_equals_read_whole(path: Path, how: str) -> None:
    whole = read_codex(path)
    pieces = by_line if how == "lines" else random_chunks(int(how[-1]))
    fed, mirror = feed_codex_in_pieces(path, pieces)
    assert state(fed) == state(whole)
    assert fed.system_prompt == whole.system_prompt
    assert mirror.calls == [(c.index, c.prompt_tokens, c.completion_tokens, c.window) for c in whole.calls]
    assert mirror.messages[:len(whole.messages) - 1] == [_message(m) for m in whole.messages][:-1]


def test_a_rewind_rebuilds_the_conversation_from_the_scanned_lines(tmp_path: Path) -> None:
    # every shared file is read through the fast path except where the conversation branches
    rebuilds = {p.name: feed_in_pieces(p, by_line)[2] for p in claude_files()}
    assert any(n == 0 for n in rebuilds.values()), rebuilds
    big = CLAUDE / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"
    whole = read_claude_code(big, subagents=False)
    if whole.off_chain:
        assert rebuilds[big.name] >= 1


def test_a_partial_last_line_waits_for_its_newline(tmp_path: Path) -> None:
    path = CLAUDE / "short.jsonl"
    data = path.read_bytes()
    reader = ClaudeCodeReader(path)
    cut = data.rfind(b"\n", 0, len(data) - 1) + 10  # in the middle of the last line
    reader.feed(data[:cut])
    assert reader.session.skipped == []
    changes = reader.feed(data[cut:])
    assert state(reader.finish(subagents=False)) == state(read_claude_code(path, subagents=False))
    assert changes.calls_from <= len(reader.session.calls)


def _line(kind: str, uid: str, parent: str | None, **extra: object) -> dict[str, object]:
    return {"type": kind, "uuid": uid, "parentUuid": parent, "sessionId": "s", "isSidechain": False,
            "timestamp": f"2026-11-25T10:00:{len(uid):02d}.000Z", **extra}


def _answer(uid: str, parent: str, msg_id: str, text: str) -> dict[str, object]:
    usage = {"input_tokens": 5, "cache_creation_input_tokens": 10, "cache_read_input_tokens": 1000, "output_tokens": 7}
    return _line("assistant", uid, parent, requestId=f"req-{msg_id}", message={
        "id": msg_id, "model": "claude-opus-5-5", "role": "assistant", "usage": usage,
        "content": [{"type": "text", "text": text}]})


def test_a_rewind_while_followed_is_rebuilt_and_equals_the_whole_read(tmp_path: Path) -> None:
    import json

    rows = [
        _line("user", "u1", None, message={"role": "user", "content": "first"}),
        _answer("a1", "u1", "m1", "one"),
        _line("user", "u2", "a1", message={"role": "user", "content": "second"}),
        _answer("a2", "u2", "m2", "two"),
        _line("user", "u3", "a1", message={"role": "user", "content": "second, asked again"}),  # the rewind
        _answer("a3", "u3", "m3", "three"),
    ]
    path = tmp_path / "rewind.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    whole = read_claude_code(path, subagents=False)
    assert [m["content"] for m in whole.messages] == ["first", "one", "second, asked again", "three"]
    assert whole.off_chain == 2 and len(whole.calls) == 3
    fed, mirror, rebuilds = feed_in_pieces(path, by_line)
    assert rebuilds == 1
    assert state(fed) == state(whole)
    assert mirror.messages == [_message(m) for m in whole.messages]
