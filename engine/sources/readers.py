"""One reader per agent; :func:`read_source` picks it by format."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from engine.sources.claude_code import read_claude_code
from engine.sources.codex import read_codex
from engine.sources.gemini_cli import read_gemini_cli
from engine.sources.model import SourceError, SourceFormat, SourceSession
from engine.sources.opencode import read_opencode
from engine.sources.openhands import read_openhands
from engine.sources.swe_agent import read_swe_agent

READERS: dict[SourceFormat, Callable[[Path], SourceSession]] = {
    "claude-code": read_claude_code,
    "codex": read_codex,
    "gemini-cli": read_gemini_cli,
    "opencode": read_opencode,
    "openhands": read_openhands,
    "swe-agent": read_swe_agent,
}


def read_source(path: Path, fmt: SourceFormat, lines: Sequence[bytes] | None = None) -> SourceSession:
    """Read ``path`` as ``fmt``; SourceError when it cannot be read at all (bad lines are skipped and
    reported in the session's ``skipped`` list, never raised).

    ``lines``: a line-oriented file's complete lines already read by the caller: the file is not read again."""
    reader = READERS.get(fmt)
    if reader is None:
        raise SourceError(f"{fmt} logs are imported by engine.importer, not read as a source")
    try:
        if lines is not None and fmt == "claude-code":
            return read_claude_code(Path(path), lines=lines)
        if lines is not None and fmt == "codex":
            return read_codex(Path(path), lines=lines)
        if lines is not None and fmt == "gemini-cli":
            return read_gemini_cli(Path(path), lines=lines)
        return reader(Path(path))
    except OSError as exc:
        raise SourceError(f"{Path(path).name}: cannot read: {exc.strerror or exc}") from None
