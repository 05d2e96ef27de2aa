"""Small text helpers every layer uses: one line of text, a size in bytes for people."""

from __future__ import annotations

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
