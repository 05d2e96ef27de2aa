"""``search_text``: a regular expression over the files of the workspace or the session's offload folders."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from engine.store import textsearch
from engine.tools.declare import ToolDecl, object_schema
from engine.tools.workspace import BINARY_SNIFF_BYTES, ToolError, Workspace, is_binary

SEARCH_MAX_RESULTS = 200
SEARCH_DEFAULT_RESULTS = 50
SEARCH_MAX_FILE_BYTES = 5_000_000
SEARCH_MAX_LINE_CHARS = 300
SEARCH_SCAN_LINE_CHARS = 10_000
SEARCH_MAX_FILES = 20_000
SEARCH_SKIP_DIRS = frozenset({".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", ".mypy_cache"})


def _search_line(pattern: Any, line: str) -> bool:
    """``pattern.search(line)``, given up after a second (a pattern that backtracks for ever)."""
    try:
        return textsearch.search(pattern, line) is not None
    except textsearch.PatternError as exc:
        raise ToolError(f"search_text: {exc}") from None


async def search_text(
    ws: Workspace,
    pattern: str,
    path: str = ".",
    glob: str | None = None,
    ignore_case: bool = False,
    max_results: int = SEARCH_DEFAULT_RESULTS,
) -> str:
    try:
        regex = textsearch.compile_pattern(pattern, ignore_case=ignore_case)
    except textsearch.PatternError as exc:
        raise ToolError(f"search_text: invalid regular expression {pattern!r}: {exc}") from None
    if max_results < 1:
        raise ToolError(f"search_text: max_results must be 1 or more, got {max_results}")
    target = ws.resolve(path)
    limit = min(max_results, SEARCH_MAX_RESULTS)
    return await asyncio.to_thread(search_files, ws, regex, target, glob, limit)


def _iter_files(target: Path) -> list[Path]:
    if target.is_file():
        return [target]
    files: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(target, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in SEARCH_SKIP_DIRS)
        for fname in sorted(filenames):
            files.append(Path(dirpath) / fname)
            if len(files) >= SEARCH_MAX_FILES:
                return files
    return files


def _readable(ws: Workspace, file: Path) -> Path | None:
    """The real path of ``file`` when it may be searched: inside the roots, regular, not too big."""
    try:
        real = file.resolve()
    except (OSError, RuntimeError):  # a symlink loop: nothing to search there
        return None
    if not ws.within_roots(real) or not real.is_file():
        return None  # a symlink that leaves the roots, or a socket / fifo
    if real.stat().st_size > SEARCH_MAX_FILE_BYTES:
        return None
    return real


def _search_file(ws: Workspace, regex: Any, file: Path, real: Path, results: list[str], limit: int) -> bool | None:
    """Append the matches of one file to ``results``; True when the limit stopped it, None if not searched."""
    with open(real, "rb") as fh:
        if is_binary(fh.read(BINARY_SNIFF_BYTES)):
            return None
        fh.seek(0)
        for lineno, raw in enumerate(fh, start=1):
            line = raw[:SEARCH_SCAN_LINE_CHARS].decode("utf-8", errors="replace").rstrip("\r\n")
            if _search_line(regex, line):
                if len(results) >= limit:
                    return True
                if len(line) > SEARCH_MAX_LINE_CHARS:
                    line = line[:SEARCH_MAX_LINE_CHARS] + "…"
                results.append(f"{ws.display_path(file.absolute())}:{lineno}: {line}")
    return False


def search_files(ws: Workspace, regex: Any, target: Path, glob: str | None, limit: int) -> str:
    shown_target = ws.display_path(target)
    if not target.exists():
        raise ToolError(f"search_text: no such file or folder: {shown_target}")
    results: list[str] = []
    files_seen = 0
    truncated = False
    for file in _iter_files(target):
        if glob and not file.match(glob):
            continue
        try:
            real = _readable(ws, file)
            if real is None:
                continue
            stopped = _search_file(ws, regex, file, real, results, limit)
        except OSError:
            continue
        if stopped is None:
            continue
        files_seen += 1
        if stopped:
            truncated = True
            break
    if not results:
        return f"no matches for /{regex.pattern}/ in {shown_target} ({files_seen} files searched)"
    head = f"{len(results)} match(es) for /{regex.pattern}/ in {shown_target}"
    if truncated:
        head += f" (stopped at {limit}; narrow the pattern, path or glob for more)"
    return head + "\n" + "\n".join(results)


SEARCH_TEXT = ToolDecl(
    name="search_text",
    description="Search files for a regular expression (Python syntax); prints path:line: text for each match.",
    parameters=object_schema(
        {
            "pattern": {"type": "string", "description": "Regular expression to search for."},
            "path": {"type": "string", "description": "File or folder to search in (default '.')."},
            "glob": {"type": "string", "description": "Only files whose name matches this glob, e.g. '*.py'."},
            "ignore_case": {"type": "boolean", "description": "Case-insensitive match."},
            "max_results": {
                "type": "integer",
                "description": (
                    f"Most matches to return (default {SEARCH_DEFAULT_RESULTS}, max {SEARCH_MAX_RESULTS})."
                ),
                "minimum": 1,
            },
        },
        ("pattern",),
    ),
    handler=search_text,
)
