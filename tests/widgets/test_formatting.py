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


def test_local_datetime() -> None:
    from widgets.formatting import local_datetime

    aware = local_datetime("2025-03-04T23:30:00+00:00")
    assert aware is not None and aware.tzinfo is not None and aware.utcoffset() is not None
    naive = local_datetime("2025-03-04T23:30:00")
    assert naive is not None and naive.hour == 23 and naive.tzinfo is None
    assert local_datetime("yesterday") is None and local_datetime(None) is None and local_datetime("") is None
