"""Small text helpers every layer uses: one line of text, a size in bytes for people."""

from __future__ import annotations

import re

KIB = 1024


def one_line(text: object, limit: int | None = None) -> str:
    """``text`` on one line (runs of whitespace → one space), cut to ``limit`` characters with "…"."""
    line = " ".join(str(text).split())
    if limit is None or len(line) <= limit:
        return line
    return line[: limit - 1] + "…"


def format_bytes(n: int | None) -> str:
    """``812 B``, ``3.4 KB``, ``1.2 MB``, ``2.0 GB``; ``—`` when unknown."""
    if n is None:
        return "—"
    if n < KIB:
        return f"{n} B"
    if n < KIB**2:
        return f"{n / KIB:.1f} KB"
    if n < KIB**3:
        return f"{n / KIB**2:.1f} MB"
    return f"{n / KIB**3:.1f} GB"


# Characters a terminal acts on instead of showing: C0 (tab and newline included: inside a cell they break the
# table), DEL, C1 (U+0080–U+009F: 8-bit CSI / OSC / ST), the bidi marks, embeddings, overrides and isolates that
# reorder what follows them, the line and paragraph separators, and lone surrogates (a file name that is not UTF-8,
# read with ``surrogateescape``: they cannot even be written to a UTF-8 stream).
_OTHER_UNSAFE = r"\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff"
_UNSAFE_RE = re.compile(rf"[\x00-\x1f{_OTHER_UNSAFE}]")
_JSON_UNSAFE_RE = re.compile(rf"[{_OTHER_UNSAFE}]")  # json.dumps escapes C0 itself
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(char: str) -> str:
    code = ord(char)
    if char in _NAMED:
        return _NAMED[char]
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8, as surrogateescape keeps it: show the byte
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: object, *, lines: bool = False) -> str:
    """``text`` safe to print on a terminal: every control character shown as a visible escape, never acted on.

    C0 controls (tab, newline and CR as ``\\t``, ``\\n``, ``\\r``; ESC as ``\\x1b``), DEL and C1 controls as
    ``\\xNN``, bidi controls and line separators as ``\\uNNNN`` (``\\u202e``), a lone surrogate from a file name
    that is not UTF-8 as the byte it stands for (``\\xff``) or ``\\udNNN``. With ``lines``, newlines and tabs are
    kept (a multi-line text such as a Markdown export). Everything else, non-ASCII letters included, is unchanged.
    For each field of other agents' data printed as plain text; JSON output goes through :func:`json_safe`."""
    text = str(text)
    if _UNSAFE_RE.search(text) is None:
        return text
    return _UNSAFE_RE.sub(lambda m: m.group() if lines and m.group() in "\t\n" else _escape(m.group()), text)


def json_safe(line: str) -> str:
    """A JSON text (:func:`json.dumps` with ``ensure_ascii=False``) with what :func:`json.dumps` leaves raw and a
    terminal acts on — DEL, C1, bidi controls, line separators, lone surrogates — written as ``\\uNNNN`` escapes:
    the same JSON value (``json.loads`` reads it back unchanged), safe on a terminal and on a UTF-8 stream. Such
    characters only occur inside JSON strings, where ``\\uNNNN`` is their escape."""
    return _JSON_UNSAFE_RE.sub(lambda m: f"\\u{ord(m.group()):04x}", line)
