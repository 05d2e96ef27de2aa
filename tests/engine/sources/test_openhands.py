"""engine.sources.openhands: events → messages with tool calls; one call per model_response.id."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.sources.openhands import read_openhands
from tests.engine.sources.conftest import OPENHANDS


def _raw_calls(path: Path) -> list[dict[str, int | None]]:
    calls: dict[str, dict[str, int | None]] = {}
    for ev in json.loads(path.read_text(encoding="utf-8")):
        resp = (ev.get("tool_call_metadata") or {}).get("model_response")
        if resp and "usage" in resp and resp["id"] not in calls:
            u = resp["usage"]
            calls[resp["id"]] = {"prompt": u["prompt_tokens"], "completion": u["completion_tokens"],
                                 "read": u.get("cache_read_input_tokens", (u.get("prompt_tokens_details") or {})
                                                .get("cached_tokens")),
                                 "write": u.get("cache_creation_input_tokens")}
    return list(calls.values())


def test_the_real_trajectories_are_there() -> None:
    assert sorted(p.name for p in OPENHANDS.glob("*.json")) == ["basic.json", "basic_interactions.json"]


@pytest.mark.parametrize("path", sorted(OPENHANDS.glob("*.json")), ids=lambda p: p.name)
def test_calls_equal_the_raw_usage(path: Path) -> None:
    raw = _raw_calls(path)
    src = read_openhands(path)
    assert len(src.calls) == len(raw) > 0
    assert [c.prompt_tokens for c in src.calls] == [r["prompt"] for r in raw]
    assert [c.completion_tokens for c in src.calls] == [r["completion"] for r in raw]
    assert [c.cache_read_tokens for c in src.calls] == [r["read"] for r in raw]
    assert [c.cache_write_tokens for c in src.calls] == [r["write"] for r in raw]
    assert src.skipped == []


def test_actions_and_observations_become_messages_with_tool_calls() -> None:
    src = read_openhands(OPENHANDS / "basic.json")
    assert [m["role"] for m in src.messages] == ["user", "assistant", "tool", "assistant"]
    call = src.messages[1]["tool_calls"][0]
    assert call["function"]["name"] == "str_replace_editor" and src.messages[2]["tool_call_id"] == call["id"]
    assert src.calls[1].message_index == 3 and src.calls[1].cache_write_tokens == 1158
    chat = read_openhands(OPENHANDS / "basic_interactions.json")
    assert [m["role"] for m in chat.messages] == ["user", "assistant"] * 3
    assert chat.calls[0].cache_write_tokens is None  # an OpenAI model: no cache-write figure


def test_condensation_is_a_compaction(tmp_path: Path) -> None:
    events = json.loads((OPENHANDS / "basic.json").read_text(encoding="utf-8"))
    cond = {"id": 9, "timestamp": "2025-01-27T22:45:20", "source": "agent", "action": "condensation",
            "args": {"forgotten_event_ids": [0, 3, 4], "summary": "the user wants a 2048 game"}}
    after = json.loads(json.dumps(events[3]))
    after["tool_call_metadata"]["model_response"]["id"] = "chatcmpl-after"
    after["tool_call_metadata"]["model_response"]["usage"]["prompt_tokens"] = 1200
    path = tmp_path / "condensed.json"
    path.write_text(json.dumps([*events[:3], cond, after]), encoding="utf-8")
    src = read_openhands(path)
    (comp,) = src.compactions
    assert comp.summary == "the user wants a 2048 game" and comp.trigger == "auto"
    assert (comp.tokens_before, comp.tokens_after) == (3486, 1200)
    assert src.live_start == 3 and len(src.calls) == 2
