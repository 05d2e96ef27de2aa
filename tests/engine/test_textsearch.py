from __future__ import annotations

import time

import pytest

from engine.store.textsearch import PatternError, compile_pattern, search


def test_literal_and_case() -> None:
    assert search(compile_pattern("a.b", literal=True), "xa.by") is not None
    assert search(compile_pattern("a.b", literal=True), "axb") is None
    assert search(compile_pattern("ERROR", ignore_case=True), "an error here") is not None


def test_bad_pattern_is_named() -> None:
    with pytest.raises(PatternError, match=r"bad regular expression '\(x'"):
        compile_pattern("(x")


def test_catastrophic_backtracking_is_cut_off() -> None:
    pattern = compile_pattern("(a|aa)+$")
    t0 = time.perf_counter()
    with pytest.raises(PatternError, match="backtracks"):
        search(pattern, "a" * 60 + "b", seconds=0.2)
    assert time.perf_counter() - t0 < 5
