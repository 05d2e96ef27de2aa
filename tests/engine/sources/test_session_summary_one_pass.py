"""Issue 28, one pass per file: a Claude Code file's Sources summary made from the objects its reader decodes
(``summarize_read``, what a first index uses) is the light pass's summary (``summarize``), on every shared session and
real agents' shapes; both learn from a line by one definition (``_ClaudeScan.take``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.sources import session_summary
from engine.sources.readers import read_source
from tests.conftest import SHARED

CLAUDE = SHARED / "data" / "sessions" / "claude-code"
MAIN_FILES = sorted(p for p in CLAUDE.rglob("*.jsonl") if "subagents" not in p.parts)


@pytest.mark.parametrize("path", MAIN_FILES, ids=lambda p: p.name[:12])
def test_the_readers_pass_summarises_a_file_as_the_light_pass(path: Path) -> None:
    seen: list[dict[str, object]] = []
    entry, session = session_summary.summarize_read("claude-code", path, observe=seen.append)
    assert entry == session_summary.summarize("claude-code", path)
    alone = read_source(path, "claude-code")  # the same session as the reader alone (message ids are fresh)
    assert session.calls == alone.calls and session.compactions == alone.compactions
    assert _without_ids(session.messages) == _without_ids(alone.messages)
    assert [s.id for s in session.subagents] == [s.id for s in alone.subagents]
    lines = [raw for raw in path.read_bytes().splitlines() if raw.strip()]
    assert len(seen) == len(lines)  # every line's object handed on once (the main file's, not its subagents')
    assert entry.calls > 0


def _without_ids(messages: list[dict[str, object]]) -> list[dict[str, object]]:
    return [{k: v for k, v in m.items() if k != "id"} for m in messages]


def _line(**fields: object) -> str:
    return json.dumps({"sessionId": "s1", "cwd": "/home/u/proj", **fields}) + "\n"


def test_a_line_that_only_mentions_cost_state_is_read_as_any_other(tmp_path: Path) -> None:
    """The light pass once passed over every line whose bytes held ``"cost-state"`` (a prompt quoting it lost the
    session its title; an answer quoting it, its call); only a ``cost-state`` record is one now."""
    path = tmp_path / "s.jsonl"
    usage = {"input_tokens": 10, "cache_read_input_tokens": 90, "output_tokens": 5}
    path.write_text(
        _line(type="user", uuid="u1", timestamp="2026-11-01T10:00:00.000Z",
              message={"role": "user", "content": 'why is "cost-state" in my file?'})
        + _line(type="assistant", uuid="a1", requestId="r1", timestamp="2026-11-01T10:00:02.000Z",
                message={"id": "m1", "role": "assistant", "model": "claude-sonnet-4-5",
                         "content": [{"type": "text", "text": 'a "cost-state" line holds the cost'}], "usage": usage})
        + _line(type="cost-state", totalCostUSD=0.25, timestamp="2026-11-01T10:00:03.000Z"))
    entry = session_summary.summarize("claude-code", path)
    assert entry.title == 'why is "cost-state" in my file?'
    assert entry.calls == 1 and entry.last_prompt_tokens == 100 and entry.model == "claude-sonnet-4-5"
    assert entry.agent_cost_usd == 0.25
    assert session_summary.summarize_read("claude-code", path)[0] == entry


def test_another_format_is_summarised_by_its_light_pass(tmp_path: Path) -> None:
    rollout = next((SHARED / "data" / "sessions" / "codex").glob("rollout-*.jsonl"))
    seen: list[object] = []
    entry, session = session_summary.summarize_read("codex", rollout, observe=seen.append)
    assert entry == session_summary.summarize("codex", rollout)
    assert session.calls == read_source(rollout, "codex").calls
    assert not seen
