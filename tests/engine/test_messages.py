from __future__ import annotations

from datetime import date

import pytest

from engine.model.messages import (
    MessageError,
    assistant,
    call_ids,
    content_text,
    media_count,
    message_date,
    new_message,
    preview,
    to_wire,
    tool_call,
    tool_result,
    validate_message,
)


def test_new_message_has_id_and_timestamp() -> None:
    a, b = new_message("user", "hi"), new_message("user", "hi")
    assert a["id"] != b["id"] and len(a["id"]) == 32
    assert a["ts"].endswith("+00:00")


def test_to_wire_strips_metadata_and_empty_fields() -> None:
    msg = assistant("x", [tool_call("c1", "ls", "{}")], pinned=True, usage={"prompt_tokens": 3})
    wire = to_wire(msg)
    assert set(wire) == {"role", "content", "tool_calls"}
    assert wire["tool_calls"][0] == {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    t = to_wire(tool_result("c1", "out", name="ls"))
    assert t == {"role": "tool", "content": "out", "tool_call_id": "c1", "name": "ls"}
    assert "tool_calls" not in to_wire(assistant("plain"))


def test_content_text_and_media() -> None:
    parts = [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "u"}}, "b"]
    assert content_text(parts) == "ab"
    assert media_count(parts) == 1
    assert content_text(None) == "" and media_count("text") == 0


def test_call_ids_and_preview() -> None:
    msg = assistant(None, [tool_call("c1", "read_file", '{"path": "a"}'), {"function": {"name": "x"}}])
    assert call_ids(msg) == ["c1", ""]
    assert preview(msg).startswith('read_file({"path": "a"})')
    assert preview({"role": "user", "content": "word " * 100}, limit=20).endswith("…")


def test_message_date_uses_timestamp_in_utc() -> None:
    assert message_date({"ts": "2025-03-04T23:30:00-02:00"}) == date(2025, 3, 5)
    assert isinstance(message_date({"ts": "garbage"}), date)


@pytest.mark.parametrize(
    ("obj", "fragment"),
    [
        ([], "expected a JSON object"),
        ({"role": "robot"}, "unknown role 'robot'"),
        ({"role": "user", "content": 5}, "'content' must be"),
        ({"role": "assistant", "tool_calls": {}}, "'tool_calls' must be a list"),
        ({"role": "assistant", "tool_calls": [{"function": {}}]}, "tool call 0 has no function name"),
        ({"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": {}}}]}, "arguments"),
        ({"role": "tool", "tool_call_id": 3}, "tool_call_id"),
        ({"role": "user", "id": 7}, "'id' must be a string"),
    ],
)
def test_validate_names_the_problem(obj: object, fragment: str) -> None:
    with pytest.raises(MessageError, match="line 4") as info:
        validate_message(obj, "line 4")
    assert fragment in str(info.value)


def test_validate_accepts_good_messages() -> None:
    validate_message({"role": "user", "content": [{"type": "text", "text": "x"}]})
    validate_message(tool_result("c", "x"))
