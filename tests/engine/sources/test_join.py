"""Joining an agent's own session with a capture (:mod:`engine.sources.join`): calls matched by response id, or
by identical usage with clocks that agree; all or nothing; the agent's own exact prefix never replaced."""

from __future__ import annotations

from pathlib import Path

from engine.sources.join import PREFIX, CaptureJoin, match_calls
from engine.sources.model import ProviderCall, RequestPrefix, SourceSession
from tests.engine.sources.test_capture import claude_capture


def call(i: int, prompt: int, out: int, ts: str, rid: str = "", model: str = "") -> ProviderCall:
    return ProviderCall(index=i, prompt_tokens=prompt, completion_tokens=out, cache_read_tokens=None,
                        cache_write_tokens=None, ts=ts, request_id=rid, model=model)


def test_usage_and_a_consistent_clock_match_a_shifted_agent() -> None:
    recorded = [call(0, 100, 5, "2026-11-26T10:00:00Z"), call(1, 50, 1, "2026-11-26T10:00:01Z"),
                call(2, 200, 7, "2026-11-26T10:00:10Z")]
    # the agent's clock is months behind, but the same for every call
    agent = [call(0, 100, 5, "2026-01-05T10:00:03Z"), call(1, 200, 7, "2026-01-05T10:00:12Z")]
    found = match_calls(agent, recorded)
    assert found == {0: recorded[0], 1: recorded[2]}


def test_the_same_usage_at_another_moment_is_no_match() -> None:
    recorded = [call(0, 100, 5, "2026-11-26T10:00:00Z"), call(1, 200, 7, "2026-11-26T10:00:10Z"),
                call(2, 300, 9, "2026-11-26T10:00:20Z")]
    agent = [call(0, 100, 5, "2026-11-26T10:00:02Z"), call(1, 200, 7, "2026-11-26T10:00:12Z"),
             call(2, 300, 9, "2026-11-26T15:00:00Z")]  # five hours later: another call with the same figures
    assert sorted(match_calls(agent, recorded)) == [0, 1]
    other_model = [call(0, 100, 5, "2026-11-26T10:00:02Z", model="gpt-x")]
    assert match_calls(other_model, [call(0, 100, 5, "2026-11-26T10:00:00Z", model="gemini-y")]) == {}


def test_a_response_id_matches_whatever_the_usage() -> None:
    recorded = [call(0, 1, 1, "", rid="msg_7")]
    assert match_calls([call(0, 999, 9, "", rid="msg_7")], recorded) == {0: recorded[0]}


def test_joined_only_when_every_reported_call_is_found(tmp_path: Path) -> None:
    folder = tmp_path / "captures"
    folder.mkdir()
    claude_capture(folder).rename(folder / "capture-20260101T000000Z-00000001.jsonl")
    # the capture's main-thread calls: msg_1 (3 + 10 + 100, 8 out) and msg_2 (3 + 20 + 200, 9 out)
    src = SourceSession(format="gemini-cli", path=tmp_path / "own.jsonl", session_id="s")
    src.calls = [call(0, 113, 8, "2026-01-01T00:00:02Z"), call(1, 223, 9, "2026-01-01T00:00:05Z")]
    src.prefix_label = "system prompt and tool definitions"
    result = CaptureJoin(folder).apply(src)
    assert (result.matched, result.reported) == (2, 2)
    assert all(c.prefix_key.startswith(PREFIX) for c in src.calls) and src.prefixes
    assert src.prefixes[src.calls[0].prefix_key].system == "You are a coding agent.\n\nBe brief."
    assert src.calls[0].max_tokens == 32000 and any("exact from the capture" in n for n in src.notes)

    partial = SourceSession(format="gemini-cli", path=tmp_path / "own.jsonl", session_id="s")
    partial.calls = [call(0, 113, 8, "2026-01-01T00:00:02Z"), call(1, 777, 9, "2026-01-01T00:00:05Z")]
    result = CaptureJoin(folder).apply(partial)
    assert result.matched == 1 and partial.prefixes == {} and "not joined" in result.note

    own = SourceSession(format="claude-code", path=tmp_path / "own.jsonl", session_id="s")
    own.calls = [call(0, 113, 8, "2026-01-01T00:00:02Z")]
    own.calls[0].prefix_key = "k"
    own.prefixes["k"] = RequestPrefix(key="k", system="the agent's own")
    assert CaptureJoin(folder).apply(own).matched == 0 and own.calls[0].prefix_key == "k"
