from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.store.fsutil import (
    append_lines,
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    dumps_line,
    fast_json,
    fingerprint,
    typed_json,
    write_lines_atomic,
)


def test_atomic_write_replaces_and_leaves_no_temp(tmp_path: Path) -> None:
    p = tmp_path / "sub" / "f.json"
    atomic_write_json(p, {"a": 1})
    atomic_write_text(p, "second")
    assert p.read_text() == "second"
    assert [x.name for x in p.parent.iterdir()] == ["f.json"]


def test_append_lines_terminates_torn_line(tmp_path: Path) -> None:
    p = tmp_path / "h.jsonl"
    append_lines(p, [{"n": 1}])
    with open(p, "ab") as fh:
        fh.write(b'{"n": 2, "torn')  # crash mid-write
    append_lines(p, [{"n": 3}, {"n": 4}])
    lines = p.read_bytes().split(b"\n")
    assert json.loads(lines[0]) == {"n": 1}
    assert lines[1] == b'{"n": 2, "torn'
    assert [json.loads(x) for x in lines[2:4]] == [{"n": 3}, {"n": 4}]
    assert append_lines(p, []) == 0


def test_lines_are_single_line_utf8(tmp_path: Path) -> None:
    p = tmp_path / "h.jsonl"
    write_lines_atomic(p, [{"t": "a\nb é"}])
    data = p.read_bytes()
    assert data.count(b"\n") == 1 and "é".encode() in data


def test_count_file_lines(tmp_path: Path) -> None:
    from engine.store.fsutil import count_file_lines

    p = tmp_path / "f.txt"
    assert count_file_lines(p) == 0  # missing
    p.write_bytes(b"")
    assert count_file_lines(p) == 0
    p.write_bytes(b"a\nb\n")
    assert count_file_lines(p) == 2
    p.write_bytes(b"a\nb")  # last line without newline counts
    assert count_file_lines(p) == 2


def test_a_cache_write_is_atomic_without_fsync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd))[1])
    p = tmp_path / "cache.json"
    atomic_write_bytes(p, b"one", durable=False)
    assert p.read_bytes() == b"one" and synced == [] and [x.name for x in tmp_path.iterdir()] == ["cache.json"]
    atomic_write_bytes(p, b"two")
    assert p.read_bytes() == b"two" and len(synced) == 2  # the file, then its folder


def test_a_path_that_is_not_utf8_is_written_and_read_back_the_same(tmp_path: Path) -> None:
    from engine.store.fsutil import atomic_write_json, json_loads

    odd = {"source": os.fsdecode(b"/home/me/odd-\xff.jsonl"), "title": "caf\u00e9"}
    atomic_write_json(tmp_path / "x.json", odd)
    assert json_loads((tmp_path / "x.json").read_bytes()) == odd
    atomic_write_json(tmp_path / "y.json", {"title": "caf\u00e9"})
    assert (tmp_path / "y.json").read_bytes() == '{\n "title": "café"\n}\n'.encode()  # UTF-8 as before when it can be


def test_json_loads_gives_what_the_standard_module_gives() -> None:
    """orjson reads the store's files where it gives the very same value; everything else is the standard
    module's (NaN, integers past 64 bits kept exact, lone surrogate escapes), and what it refuses is refused."""
    import json
    import math

    import pytest

    from engine.store.fsutil import fast_json, json_loads

    for text in (b'{"a": 1, "b": [1.5, "x\\u00e9", null, true], "c": {"d": -0}}', b'{"n": 18446744073709551616}',
                 b'{"n": -123456789012345678901234567890}', b'{"s": "\\ud800"}', b'[1e308, 2.5e-320]',
                 '{"u": "é ✓ 𝄞"}'.encode(), b'{"a": 1, "a": 2}', b"  [ ]  "):
        assert json_loads(text) == json.loads(text), text
    assert math.isnan(json_loads(b'{"x": NaN}')["x"])
    assert fast_json(b'{"n": 12345678901234567890123}') == (True, {"n": 12345678901234567890123})  # exact
    for refused in (b'{"x": NaN}', b"[Infinity]", b"[1e400]", b'["\\ud800"]', b'["raw\ttab"]', b'["\xff"]',
                    b"[" + b"1" * 5000 + b"]", b"[" * 1200 + b"]" * 1200, b"", b"[1] x"):
        assert fast_json(refused) == (False, None), refused[:30]  # the standard module says what it makes of it
    for bad in (b'{"a": "raw\ttab"}', b"{", b'{"a": 1} x', b"[" * 100_000 + b"]" * 100_000):
        with pytest.raises(ValueError):
            json_loads(bad)


class _Inner(msgspec.Struct):
    n: Any = None


class _Line(msgspec.Struct):
    type: Any = None
    inner: _Inner | None = None


def test_typed_json_gives_the_standard_modules_values_or_nothing() -> None:
    """A typed decode (only the fields a Struct names) is taken where each field holds the standard module's value
    (integers past 64 bits exact, a repeated key's last value, any whitespace around); None — the caller reads the
    line as before — where the standard module would read the line otherwise or not at all: NaN and infinities, a
    number past a double, a raw control character (the readers take it; msgspec does not), a lone surrogate escape,
    bytes that are not UTF-8 in a field the Struct passes over, another top-level value, a field of another shape,
    nesting too deep."""
    decode = msgspec.json.Decoder(_Line).decode
    for text in (b'{"type": "a", "inner": {"n": 18446744073709551616}, "skip": [1, {"x": "\\u00e9"}]}',
                 b'{"type": -123456789012345678901234567890, "inner": null}', b'{"type": 1, "type": [2.5e-320]}',
                 b'{"inner": {"n": 1, "n": {"deep": [true, false]}}}', b' \t{"skipped": "\\u2028"}\r\n',
                 '{"type": "é ✓ 𝄞", "other": "ü"}'.encode()):
        line = typed_json(decode, text)
        whole = json.loads(text)
        assert line is not None, text
        assert line.type == whole.get("type") and (line.inner is None) == (whole.get("inner") is None), text
        assert line.inner is None or line.inner.n == whole["inner"].get("n"), text
    for bad in (b'{"type": NaN}', b'{"type": Infinity}', b'{"inner": {"n": 1e400}}', b'{"x": "raw\ttab"}',
                b'{"type": "\\ud800"}', b'{"x": "\\ud800"}', b'{"x": "\xff\xfe"}', b'{"type": "a", "x": "\xc3"}',
                b"[1]", b'"s"', b'{"inner": "a string"}', b'{"inner": [1]}', b'{"x": ' + b"[" * 100_000 + b"]" * 100_000
                + b"}", b"{", b'{"a": 1} x', b"\xef\xbb\xbf{}", b""):
        assert typed_json(decode, bad) is None, bad[:40]


def _stdlib_line(obj: object) -> bytes:
    return (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def test_dumps_line_writes_what_the_standard_module_writes() -> None:
    """orjson writes the line where it gives the standard module's value; NaN and infinities (orjson: null), keys
    that are not strings, integers past 64 bits and an enum's str are written by the standard module, as before."""
    import enum
    import math

    class Colour(enum.StrEnum):
        RED = "red"

    values = [{"a": 1, "b": "é\n\u2028\x1b\"", "c": [None, True, 1.5, -0.0], "d": {}},
              {"cost": float("nan"), "x": None}, [float("inf"), None], {"deep": [[{"v": -math.inf, "n": None}]]},
              {1: "int key", "s": None}, {"big": 2**70}, {"e": Colour.RED, "n": None}, "null", None, 0.1]
    for value in values:
        assert dumps_line(value) == _stdlib_line(value)
        assert json.loads(dumps_line(value)) == json.loads(_stdlib_line(value)) or value != value
    assert json.loads(dumps_line({"f": 1e-05})) == {"f": 1e-05}  # spelt 0.00001: the same number
    with pytest.raises(TypeError):
        dumps_line({"set": {1}})  # what the standard module cannot write still raises
    with pytest.raises(UnicodeEncodeError):
        dumps_line({"s": "\ud800"})


def test_fingerprint_tells_equal_values_from_different_ones() -> None:
    a = {"id": "m1", "role": "user", "content": [{"type": "text", "text": "hi"}], "n": None}
    assert fingerprint(a) == fingerprint(dict(reversed(list(a.items()))))  # key order does not matter
    assert fingerprint(a) != fingerprint({**a, "content": [{"type": "text", "text": "hi!"}]})
    assert fingerprint({"n": 2**70}) == fingerprint({"n": 2**70}) != fingerprint({"n": 2**70 + 1})
    assert len({fingerprint(v) for v in (1, 1.0, True, "1", [1], (1,), {"1": 1}, None, 0, False)}) == 9  # ((1,): [1])
    assert fingerprint({"x": float("nan")}) == fingerprint({"x": float("nan")})


def test_fingerprint_and_a_line_written_once_leave_the_strings_as_they_are() -> None:
    """orjson attaches a UTF-8 copy to every non-ASCII string it writes, for as long as the string lives: the
    fingerprint of a followed file's message and its history line do not (its text held once)."""
    import sys

    text = json.loads(json.dumps("réponse — " + "é" * 2000))
    size = sys.getsizeof(text)
    msg = {"role": "assistant", "content": text, "tool_calls": [{"function": {"arguments": text}}]}
    fingerprint(msg)
    assert dumps_line(msg, once=True) == _stdlib_line(msg)
    assert sys.getsizeof(text) == size


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**40), 10**40) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20)
_number_texts = st.from_regex(r"-?(0|[1-9][0-9]{0,30})(\.[0-9]{1,30})?([eE][+-]?[0-9]{1,3})?", fullmatch=True)


@settings(max_examples=400)
@given(_json_values, st.lists(_number_texts, min_size=1, max_size=5), st.sampled_from([(",", ":"), (", ", ": ")]),
       st.booleans())
def test_fast_json_reads_what_the_standard_module_reads(value: Any, numbers: list[str], separators: tuple[str, str],
                                                        ascii_only: bool) -> None:
    """Whatever JSON the fast decoder reads, its value is the standard module's, to the bit: floats (random doubles
    and number texts of up to 30 digits and any exponent), integers past 64 bits, any text (escaped or as UTF-8), a
    repeated key's last value; what it refuses the standard module reads (or refuses) itself."""
    for text in (json.dumps(value, separators=separators, ensure_ascii=ascii_only).encode("utf-8"),
                 ("[" + ",".join(numbers) + "]").encode(), b'{"k": 1, "k": %s}' % numbers[0].encode()):
        done, got = fast_json(text)
        try:
            expected = json.loads(text)
        except (ValueError, RecursionError):
            assert not done, text
            continue
        if done:
            assert repr(got) == repr(expected), text  # (repr: -0.0 and 0.0, 1 and 1.0 told apart)


def test_fingerprints_keep_the_last_few_and_count_them_all() -> None:
    """A followed view's fingerprints of its messages: the last ``keep`` only (one an item for as long as the list
    grew, before), each change among them found, the items counted."""
    from engine.store.fsutil import Fingerprints, fingerprint

    items: list[Any] = [{"n": i} for i in range(10)]
    prints = Fingerprints(items, 4)
    assert prints.count == 10 and len(prints) == 4
    prints.extend([{"n": 10}, {"n": 11}])
    assert prints.count == 12 and len(prints) == 4
    assert not prints.changed(11, {"n": 11}) and not prints.changed(8, {"n": 8})
    assert prints.changed(11, {"n": 11, "more": True}) and not prints.changed(11, {"more": True, "n": 11})
    assert list(prints._recent) == [fingerprint(x) for x in ({"n": 8}, {"n": 9}, {"n": 10}, {"n": 11, "more": True})]
    assert len(Fingerprints([], 4)) == 0 and len(Fingerprints(items, 0)) == 0
