"""Cache breakpoints per call of a capture (:func:`engine.sources.capture.cache_breakpoints`): where an Anthropic
request put ``cache_control`` (tools, system blocks, message blocks) and for how long; carried to the imported
session's context records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine.ingest import import_source
from engine.sources.capture import read_capture
from tests.engine.sources.test_capture import anthropic_answer, claude_capture, exchange, write


def test_each_call_says_where_its_request_marked_the_cache(tmp_path: Path) -> None:
    body: dict[str, Any] = {
        "model": "claude-x", "max_tokens": 100,
        "tools": [{"name": "Bash"}, {"name": "Read", "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
        "system": [{"type": "text", "text": "a"},
                   {"type": "text", "text": "b", "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": "plain"},
                     {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
                     {"role": "user", "content": [
                         {"type": "text", "text": "x"},
                         {"type": "text", "text": "y", "cache_control": {"type": "ephemeral"}}]}]}
    path = write(tmp_path / "c.jsonl", [exchange(1, "anthropic", "/v1/messages", body, *anthropic_answer(1, "done"))])
    (call,) = read_capture(path).calls
    assert call.cache_breakpoints == [
        {"in": "tools", "index": 1, "name": "Read", "ttl": "1h"},
        {"in": "system", "index": 1, "ttl": "5m"},
        {"in": "messages", "index": 2, "block": 1, "role": "user", "ttl": "5m"}]


def test_other_apis_have_no_breakpoints_and_the_import_keeps_them(tmp_path: Path) -> None:
    chat = {"model": "gpt-x", "messages": [{"role": "user", "content": "hi"}]}
    answer = {"id": "c1", "choices": [{"message": {"role": "assistant", "content": "yo"}}],
              "usage": {"prompt_tokens": 5, "completion_tokens": 1}}
    path = write(tmp_path / "o.jsonl", [exchange(1, "openai-chat", "/v1/chat/completions", chat, answer,
                                                 answer["usage"])])
    assert read_capture(path).calls[0].cache_breakpoints is None
    src = claude_capture(tmp_path)
    calls = read_capture(src).calls
    assert calls[0].cache_breakpoints == []  # the title request (it finished first) marks nothing
    assert calls[1].cache_breakpoints == [{"in": "tools", "index": 1, "name": "mcp__git__log", "ttl": "5m"},
                                          {"in": "system", "index": 1, "ttl": "5m"}]
    import_source(src, session_dir=tmp_path / "imported")
    records = [json.loads(line) for f in sorted((tmp_path / "imported").rglob("*.jsonl"))
               for line in f.read_text().splitlines() if '"cache_breakpoints"' in line]
    assert any(r.get("cache_breakpoints") == calls[1].cache_breakpoints for r in records)
