"""File tools: ``read_file`` and ``list_dir`` (always on), ``write_file`` (off by default, approved per call)."""

from __future__ import annotations

import asyncio
import json
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO

from engine.model.text import format_bytes
from engine.tools.declare import ToolDecl, object_schema
from engine.tools.workspace import BINARY_SNIFF_BYTES, ToolError, Workspace, is_binary

READ_DEFAULT_LINES = 400
READ_MAX_LINES = 2000
READ_MAX_BYTES = 40_000
LIST_MAX_ENTRIES = 500
WRITE_MAX_BYTES = 5_000_000


# ---------------------------------------------------------------------- read_file


async def read_file(
    ws: Workspace, path: str, start_line: int = 1, max_lines: int = READ_DEFAULT_LINES
) -> str:
    if start_line < 1:
        raise ToolError(f"read_file: start_line must be 1 or more, got {start_line}")
    if max_lines < 1:
        raise ToolError(f"read_file: max_lines must be 1 or more, got {max_lines}")
    target = ws.resolve(path)
    return await asyncio.to_thread(read_lines, ws, target, start_line, min(max_lines, READ_MAX_LINES))


def _open_regular(target: Path, shown: str) -> BinaryIO:
    """Open ``target`` for reading, refusing a pipe, socket or device without blocking on it."""
    # O_NONBLOCK: opening a FIFO must not wait for a writer (it would hang the turn for good)
    fd = os.open(target, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ToolError(f"read_file: {shown} is not a regular file (a pipe, socket or device); not read")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _take_lines(fh: BinaryIO, start_line: int, max_lines: int) -> tuple[list[str], int, int]:
    """The lines from ``start_line`` on, bounded by count and bytes; also the last line taken and the total."""
    out: list[str] = []
    used = 0
    total = 0
    last = start_line - 1
    cut_by_bytes = False
    for total, raw in enumerate(fh, start=1):
        if total < start_line or cut_by_bytes or len(out) >= max_lines:
            continue
        line = raw.decode("utf-8", errors="replace")
        size = len(raw)
        if out and used + size > READ_MAX_BYTES:
            cut_by_bytes = True
            continue
        if size > READ_MAX_BYTES:  # one giant line: cut it, never split a character
            line = raw[:READ_MAX_BYTES].decode("utf-8", errors="ignore") + " […line cut]\n"
            size = READ_MAX_BYTES
        out.append(line)
        used += size
        last = total
    return out, last, total


def read_lines(ws: Workspace, target: Path, start_line: int, max_lines: int) -> str:
    shown = ws.display_path(target)
    if not target.exists():
        raise ToolError(f"read_file: no such file: {shown}")
    if target.is_dir():
        raise ToolError(f"read_file: {shown} is a folder (use list_dir)")
    with _open_regular(target, shown) as fh:
        if is_binary(fh.read(BINARY_SNIFF_BYTES)):
            size = target.stat().st_size
            raise ToolError(f"read_file: {shown} is a binary file ({format_bytes(size)}); not shown")
        fh.seek(0)
        out, last, total = _take_lines(fh, start_line, max_lines)
    if total == 0:
        return f"[{shown} is empty]"
    if start_line > total:
        raise ToolError(f"read_file: start_line {start_line} is past the end of {shown} ({total} lines)")
    text = "".join(out)
    if not text.endswith("\n"):
        text += "\n"
    if last < total:
        text += (
            f"[lines {start_line}-{last} of {total} in {shown}; more: "
            f"read_file(path={json.dumps(shown)}, start_line={last + 1})]"
        )
    else:
        text += f"[lines {start_line}-{last} of {total} in {shown}; end of file]"
    return text


# ---------------------------------------------------------------------- list_dir


async def list_dir(ws: Workspace, path: str = ".") -> str:
    target = ws.resolve(path)
    return await asyncio.to_thread(list_entries, ws, target)


def _entry_line(entry: os.DirEntry[str]) -> str:
    if entry.is_symlink():
        return f"{entry.name}@ -> {os.readlink(entry.path)}"
    if entry.is_dir(follow_symlinks=False):
        return f"{entry.name}/"
    try:
        size = entry.stat(follow_symlinks=False).st_size
    except OSError:
        size = 0
    return f"{entry.name}  {format_bytes(size)}"


def list_entries(ws: Workspace, target: Path) -> str:
    shown = ws.display_path(target)
    if not target.exists():
        raise ToolError(f"list_dir: no such folder: {shown}")
    if not target.is_dir():
        raise ToolError(f"list_dir: {shown} is a file (use read_file)")
    with os.scandir(target) as it:
        entries = list(it)
    entries.sort(key=lambda e: (not e.is_dir(follow_symlinks=False), e.name))
    lines = [f"{shown}/ ({len(entries)} entries)"]
    lines += [_entry_line(entry) for entry in entries[:LIST_MAX_ENTRIES]]
    if len(entries) > LIST_MAX_ENTRIES:
        lines.append(f"[… {len(entries) - LIST_MAX_ENTRIES} more entries not shown]")
    return "\n".join(lines)


# ---------------------------------------------------------------------- write_file


async def write_file(ws: Workspace, path: str, content: str) -> str:
    data = content.encode("utf-8", errors="surrogatepass")
    if len(data) > WRITE_MAX_BYTES:
        raise ToolError(f"write_file: content is {len(data)} bytes; the limit is {WRITE_MAX_BYTES}")
    target = ws.resolve(path, write=True)
    if target.is_dir():
        raise ToolError(f"write_file: {ws.display_path(target)} is a folder")
    from engine.store.fsutil import atomic_write_bytes

    existed = target.exists()
    await asyncio.to_thread(atomic_write_bytes, target, data)
    verb = "overwrote" if existed else "created"
    return f"{verb} {ws.display_path(target)} ({len(data)} bytes)"


def _write_approval_text(args: Mapping[str, Any]) -> str:
    return "It writes a file in the workspace."


# ---------------------------------------------------------------------- declarations

READ_FILE = ToolDecl(
    name="read_file",
    description=(
        "Read lines of a text file in the workspace, or an offloaded file of this session "
        "(tool_results/<id>.txt, dialog/<date>.jsonl). Use start_line to continue where a notice says."
    ),
    parameters=object_schema(
        {
            "path": {"type": "string", "description": "File path, relative to the workspace or absolute."},
            "start_line": {"type": "integer", "description": "First line to return (1-based).", "minimum": 1},
            "max_lines": {
                "type": "integer",
                "description": f"How many lines to return (default {READ_DEFAULT_LINES}, max {READ_MAX_LINES}).",
                "minimum": 1,
            },
        },
        ("path",),
    ),
    handler=read_file,
)
LIST_DIR = ToolDecl(
    name="list_dir",
    description="List the entries of a folder in the workspace (or tool_results / dialog of this session).",
    parameters=object_schema({"path": {"type": "string", "description": "Folder path; '.' is the workspace root."}}),
    handler=list_dir,
)
WRITE_FILE = ToolDecl(
    name="write_file",
    description="Create or overwrite a text file in the workspace (the user must approve each call).",
    parameters=object_schema(
        {
            "path": {"type": "string", "description": "File path inside the workspace."},
            "content": {"type": "string", "description": "The full new content of the file."},
        },
        ("path", "content"),
    ),
    handler=write_file,
    needs_approval=True,
    approval_text=_write_approval_text,
    switch="write",
    disabled_text="write_file is disabled (writing files is off; the user can enable it)",
)
