"""engine.sources.claude_code_build: Claude Code 2.1.332's user lines keep their ``rowSource`` on their messages
(lines shortened from the real file: tests.engine.sources.test_claude_code_calls)."""

from __future__ import annotations

import json
from pathlib import Path

from engine.sources.claude_code import read_claude_code
from engine.sources.claude_code_build import ROW_SOURCES
from tests.engine.sources.test_claude_code_calls import the_lines


def test_user_messages_keep_their_row_source(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in the_lines()))
    src = read_claude_code(path)
    sources = {m["content"]: m.get("row_source") for m in src.messages if m["role"] == "user"}
    assert sources["EXP go"] == "local" and sources["Launching skill: greet"] == "harness"
    assert sources["a task notification"] == "recorded"
    assert {s for s in sources.values() if s} <= set(ROW_SOURCES)
    # a tool result is no prompt of anyone: its message has no row source; a summary is no message at all
    assert not any("row_source" in m for m in src.messages if m["role"] != "user")
    assert "This session is being continued…" not in sources
