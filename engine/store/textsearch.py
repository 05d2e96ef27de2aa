"""Regular-expression search with a time limit, shared by the search tool and the archive search.

A pattern that backtracks for ever (``(a|aa)+$`` on a long line) must not freeze the app: matching
uses the ``regex`` module (same syntax as ``re``, version 0) with a per-call timeout, the GIL
released meanwhile.
"""

from __future__ import annotations

from typing import Any

import regex

SEARCH_SECONDS = 1.0


class PatternError(ValueError):
    """A pattern that does not compile, or takes too long on one text; the text says which."""


def compile_pattern(pattern: str, *, ignore_case: bool = False, literal: bool = False) -> Any:
    """Compile ``pattern`` (escaped first when ``literal``); PatternError names a bad one."""
    flags = regex.V0 | (regex.IGNORECASE if ignore_case else 0)
    try:
        return regex.compile(regex.escape(pattern) if literal else pattern, flags)
    except regex.error as exc:
        raise PatternError(f"bad regular expression {pattern!r}: {exc}") from exc


def search(pattern: Any, text: str, seconds: float = SEARCH_SECONDS) -> Any:
    """``pattern.search(text)``, given up after ``seconds`` with a PatternError."""
    try:
        return pattern.search(text, concurrent=True, timeout=seconds)
    except TimeoutError:
        raise PatternError(
            f"the pattern /{pattern.pattern}/ took more than {seconds:g} s on one text "
            "(it backtracks too much); simplify it"
        ) from None
