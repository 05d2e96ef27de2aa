"""engine.model.text.printable and json_safe: what reaches a terminal never acts on it, and stays readable."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.model.text import json_safe, one_line, printable

# every character a terminal acts on, as printable must never leave it
UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff]")


@pytest.mark.parametrize(("raw", "shown"), [
    ("\x1b]52;c;aGk=\x07", "\\x1b]52;c;aGk=\\x07"),  # OSC 52: a clipboard write
    ("\x1b]0;title\x07", "\\x1b]0;title\\x07"),  # OSC 0: the window title
    ("\x1b[2J", "\\x1b[2J"),
    ("a\rb", "a\\rb"), ("a\tb", "a\\tb"), ("a\nb", "a\\nb"), ("\x00\x08", "\\x00\\x08"),
    ("\x7f", "\\x7f"), ("\x9b31m", "\\x9b31m"), ("\x85", "\\x85"),  # DEL, 8-bit CSI, NEL
    ("abc\u202egnp.exe", "abc\\u202egnp.exe"), ("\u2066x\u2069", "\\u2066x\\u2069"), ("\u200f", "\\u200f"),
    ("\u2028", "\\u2028"),
    ("caf\udce9", "caf\\xe9"),  # a byte of a name that is not UTF-8 (surrogateescape): the byte
    ("\ud800", "\\ud800"),  # any other lone surrogate
])
def test_each_control_is_shown_as_a_visible_escape(raw: str, shown: str) -> None:
    assert printable(raw) == shown
    assert printable(f"name {raw} end") == f"name {shown} end"


def test_text_without_controls_is_unchanged() -> None:
    for text in ("plain", "café → naïve — “quoted” 日本語 🙂", "C:\\path\\x1b", "", "100 %"):
        assert printable(text) == text
    assert printable(42) == "42" and printable(None) == "None"


def test_lines_keeps_newlines_and_tabs_only() -> None:
    assert printable("a\n\tb\x1b[2J\r\n", lines=True) == "a\n\tb\\x1b[2J\\r\n"


@given(st.text(alphabet=st.characters(codec=None, exclude_categories=())))
def test_no_control_survives_and_the_result_is_utf8(text: str) -> None:
    shown = printable(text)
    assert UNSAFE.search(shown) is None
    shown.encode("utf-8")  # a lone surrogate would raise here
    assert UNSAFE.search(printable(text, lines=True).replace("\n", "").replace("\t", "")) is None
    if UNSAFE.search(text) is None:
        assert shown == text


@given(st.text(alphabet=st.characters(codec=None)).filter(lambda t: UNSAFE.search(t) is None))
def test_safe_text_through_one_line_is_untouched(text: str) -> None:
    assert printable(one_line(text)) == one_line(text)


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(alphabet=st.characters(codec=None)),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
                    max_leaves=12))
def test_json_safe_is_the_same_json_value_with_no_raw_control(value: object) -> None:
    line = json_safe(json.dumps(value, ensure_ascii=False))
    assert json.loads(line) == value
    assert UNSAFE.search(line) is None
    line.encode("utf-8")
