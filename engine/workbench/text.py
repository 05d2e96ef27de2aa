"""Text helpers of the service and its faces (light: imports nothing of the engine)."""

from __future__ import annotations


def one_line(text: str) -> str:
    """``text`` with every run of whitespace (newlines too) made one space."""
    return " ".join(str(text).split())


__all__ = ["one_line"]
