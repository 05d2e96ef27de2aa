"""Where tools may look: the workspace and the session's offload folders, every path confined to them.

Every path argument is resolved (symlinks followed) and must land inside one of the roots:

- the workspace folder;
- the session's ``tool_results/`` and ``dialog/`` folders, so the model can follow the read-more hints
  (``read_file("tool_results/<hex>.txt", start_line=N)``) the offloader writes. A relative path that
  starts with ``tool_results/`` or ``dialog/`` resolves against the session folder (unless only the
  workspace has it); an absolute path inside those folders is accepted as well.

``..`` that climbs out of a root, absolute paths elsewhere, symlinks that leave the root, NUL bytes and
over-long paths are refused with a :class:`ToolError` that says why. Writing is allowed in the
workspace only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

SESSION_SUBDIRS = ("tool_results", "dialog")
MAX_PATH_CHARS = 1024
MAX_NAME_BYTES = 255
BINARY_SNIFF_BYTES = 8192


@dataclass(frozen=True)
class ToolResult:
    text: str
    ok: bool


class ToolError(Exception):
    """A failure the model should read: the message says what was wrong."""


def is_binary(sample: bytes) -> bool:
    return b"\0" in sample


class Workspace:
    """The roots one tool box may touch, and the rules that keep every path inside them."""

    def __init__(self, workspace: Path, session_dir: Path) -> None:
        self.workspace = Path(workspace).expanduser().resolve()
        self.session_dir = Path(session_dir).expanduser().resolve()

    def _session_roots(self) -> list[Path]:
        return [self.session_dir / sub for sub in SESSION_SUBDIRS]

    def display_path(self, path: Path) -> str:
        """How a resolved path is shown to the model: relative to its root."""
        for sub in SESSION_SUBDIRS:
            root = self.session_dir / sub
            if path == root or path.is_relative_to(root):
                return path.relative_to(self.session_dir).as_posix()
        if path.is_relative_to(self.workspace):
            rel = path.relative_to(self.workspace).as_posix()
            return rel or "."
        return str(path)

    def within_roots(self, path: Path) -> bool:
        for root in (self.workspace, *self._session_roots()):
            real = root.resolve()
            if path == real or path.is_relative_to(real):
                return True
        return False

    def resolve(self, raw: str, *, write: bool = False) -> Path:
        """Resolve ``raw`` to a real path inside a root, or raise ToolError saying why not."""
        candidate = _checked_candidate(raw)
        if candidate.is_absolute():
            base = candidate
        else:
            first = candidate.parts[0] if candidate.parts else ""
            use_session = (
                first in SESSION_SUBDIRS
                and not write
                and ((self.session_dir / first).is_dir() or not (self.workspace / first).exists())
            )
            base = (self.session_dir if use_session else self.workspace) / candidate
        roots = [self.workspace] if write else [self.workspace, *self._session_roots()]
        try:
            resolved = base.resolve(strict=False)
        except (OSError, RuntimeError) as exc:  # symlink loops, bad names
            raise ToolError(f"cannot resolve path {raw!r}: {exc}") from None
        for root in roots:
            real_root = root.resolve()
            if resolved == real_root or resolved.is_relative_to(real_root):
                return resolved
        where = "the workspace" if write else "the workspace or the session's tool_results/ and dialog/"
        lexical = Path(os.path.normpath(base))
        if any(lexical == r or lexical.is_relative_to(r) for r in roots):
            raise ToolError(f"path {raw!r} leads outside {where} through a symbolic link")
        if ".." in candidate.parts:
            raise ToolError(f"path {raw!r} climbs outside {where} with '..'")
        raise ToolError(f"path {raw!r} is outside {where}")


def _checked_candidate(raw: str) -> Path:
    """``raw`` as a path, refused when it holds a NUL byte, is empty or is too long."""
    if not isinstance(raw, str):
        raise ToolError("path must be a string")
    if "\0" in raw:
        raise ToolError("path contains a NUL byte")
    text = raw.strip()
    if not text:
        raise ToolError("path is empty")
    if len(text) > MAX_PATH_CHARS:
        raise ToolError(f"path is too long ({len(text)} characters; the limit is {MAX_PATH_CHARS})")
    candidate = Path(text).expanduser() if text.startswith("~") else Path(text)
    for part in candidate.parts:
        if len(part.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
            raise ToolError(f"path has a component longer than {MAX_NAME_BYTES} bytes")
    return candidate
