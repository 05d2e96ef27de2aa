from __future__ import annotations

from widgets.formatting import parse_arguments, pretty_arguments


def test_pretty_and_parse() -> None:
    assert pretty_arguments('{"path": "a"}') == '{\n  "path": "a"\n}'
    assert parse_arguments('{"path": "a"}') == {"path": "a"}


def test_hostile_arguments_come_back_as_text() -> None:
    deep = "[" * 100_000 + "]" * 100_000  # json.loads raises RecursionError on this
    assert pretty_arguments(deep) == deep
    assert parse_arguments(deep) is None
    assert pretty_arguments("not json {") == "not json {"
    assert parse_arguments("") is None
