"""Offloaded tool outputs on disk: where they are, which ones the session still points to, and
retention (SPEC §3: files older than the retention that nothing live names are deleted at start-up).

The cutting itself (what stays in the context) is :mod:`engine.context.offload`.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engine.model.messages import Message, content_text
from engine.store.fsutil import count_file_lines, json_loads

RESULTS_DIR = "tool_results"
INDEX_FILE = "index.jsonl"
PART_SUFFIX = ".part"
_FILE_RE = re.compile(r"[0-9a-f]{32}\.txt")


@dataclass
class OffloadedFile:
    path: str  # relative to the session folder, e.g. "tool_results/<hex>.txt"
    abs_path: Path
    size: int
    lines: int
    created: str  # ISO-8601 UTC
    tool_name: str
    message_id: str
    tool_call_id: str


def referenced_files(messages: Iterable[Message], summary: str = "") -> set[str]:
    """File names (``<hex>.txt``) that ``messages`` or ``summary`` still point to."""
    refs: set[str] = set()
    for m in messages:
        info = m.get("offload")
        if isinstance(info, dict) and info.get("path"):
            refs.add(Path(str(info["path"])).name)
        if m.get("role") == "tool" or "tool_results" in content_text(m.get("content")):
            refs.update(_FILE_RE.findall(content_text(m.get("content"))))
    if summary:
        refs.update(_FILE_RE.findall(summary))
    return refs


def cleanup_retention(
    session_dir: Path, live_refs: Iterable[str], days: int, *, now: float | None = None
) -> list[Path]:
    """Delete offloaded files older than ``days`` unless ``live_refs`` names them; return what went.

    ``live_refs`` holds file names or relative paths. Leftover ``.part`` files (a write cut short
    by a crash) older than a minute are removed too: nothing can refer to them.
    """
    folder = Path(session_dir) / RESULTS_DIR
    if not folder.is_dir():
        return []
    keep = {Path(r).name for r in live_refs}
    now = time.time() if now is None else now
    cutoff = now - days * 86400
    removed: list[Path] = []
    for path in folder.iterdir():
        try:
            mtime = path.stat().st_mtime
        except OSError:
            continue
        if path.name.endswith(PART_SUFFIX):
            doomed = mtime < now - 60
        elif path.suffix == ".txt" and path.name not in keep:
            doomed = mtime < cutoff
        else:
            doomed = False
        if doomed:
            try:
                path.unlink()
                removed.append(path)
            except OSError:
                pass
    return removed


def list_offloaded(session_dir: Path) -> list[OffloadedFile]:
    """The offloaded files present in ``session_dir``, newest first, with what the index knows."""
    session_dir = Path(session_dir)
    folder = session_dir / RESULTS_DIR
    if not folder.is_dir():
        return []
    index: dict[str, dict[str, Any]] = {}
    index_path = folder / INDEX_FILE
    if index_path.exists():
        for raw in index_path.read_bytes().splitlines():
            try:
                entry = json_loads(raw)
            except ValueError:
                continue  # a torn last line: the file itself is still listed below
            if isinstance(entry, dict) and entry.get("path"):
                index[Path(str(entry["path"])).name] = entry
    out: list[OffloadedFile] = []
    for path in folder.iterdir():
        if path.suffix != ".txt" or not path.is_file():
            continue
        entry = index.get(path.name, {})
        try:
            st = path.stat()
        except OSError:
            continue
        lines = entry.get("lines")
        out.append(
            OffloadedFile(
                path=f"{RESULTS_DIR}/{path.name}",
                abs_path=path,
                size=st.st_size,
                lines=int(lines) if isinstance(lines, int) else count_file_lines(path),
                created=str(
                    entry.get("created")
                    or datetime.fromtimestamp(st.st_mtime, UTC).isoformat(timespec="milliseconds")
                ),
                tool_name=str(entry.get("tool") or ""),
                message_id=str(entry.get("message_id") or ""),
                tool_call_id=str(entry.get("tool_call_id") or ""),
            )
        )
    out.sort(key=lambda f: f.created, reverse=True)
    return out
