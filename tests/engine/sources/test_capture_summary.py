"""The light summary of a capture for Sources (:func:`engine.sources.capture.light_summary`): calls, last prompt,
model and title without building the conversation; a capture that grew is read from where the last pass stopped,
one rewritten is read whole again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.sources import capture as capture_mod
from engine.sources.capture import first_prompt, light_summary
from tests.engine.sources.test_capture import anthropic_answer, exchange, write


def _body(text: str) -> dict[str, object]:
    return {"model": "claude-x", "max_tokens": 100, "system": "s", "tools": [{"name": "Bash"}],
            "messages": [{"role": "user", "content": text}]}


def test_a_growing_capture_is_read_from_where_the_last_pass_stopped(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path / "capture-1.jsonl", [exchange(1, "anthropic", "/v1/messages", _body("first ask"),
                                                         *anthropic_answer(1, "ok"))])
    first = light_summary(path)
    assert (first.calls, first.last_prompt, first.model, first.title) == (1, 113, "claude-x", "first ask")
    parsed: list[bytes] = []
    real = capture_mod.json_lines
    monkeypatch.setattr(capture_mod, "json_lines", lambda lines, *a, **k: real(parsed.extend(lines) or lines, *a, **k))
    line = json.dumps(exchange(2, "anthropic", "/v1/messages", _body("first ask"), *anthropic_answer(2, "ok"))) + "\n"
    with path.open("a") as fh:
        fh.write(line + line[:30])  # and a line being written
    grown = light_summary(path)
    assert (grown.calls, grown.last_prompt, grown.title) == (2, 223, "first ask")
    assert parsed == [line.encode()]  # only the new complete line was read
    path.write_text(path.read_text()[: -len(line) - 30].replace("first ask", "other ask"))  # rewritten in place
    again = light_summary(path)
    assert (again.calls, again.title) == (1, "other ask")


def test_the_title_leaves_out_what_agents_wrap_around_the_prompt() -> None:
    wrapped = "<system-reminder>\nctx\n</system-reminder>\n  fix\nit "
    assert first_prompt([{"role": "user", "content": wrapped}]) == "fix it"
    assert first_prompt([{"role": "user", "content": "<session_context>x</session_context>", "id": "1"},
                         {"role": "user", "content": "hello", "attachment": "system"},
                         {"role": "user", "content": "the ask"}]) == "the ask"
    assert first_prompt([{"role": "assistant", "content": "hi"}]) == ""
