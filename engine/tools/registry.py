"""Built-in agent tools with OpenAI specs, confined to the workspace and the session's offload folders.

Tools: ``read_file``, ``list_dir``, ``search_text`` (always on), ``write_file`` and ``run_shell`` (off by
default; when enabled, every call needs the user's approval through the injected ``approve`` callback).

Paths. Every path argument is resolved (symlinks followed) and must land inside one of the roots:

- the workspace folder;
- the session's ``tool_results/`` and ``dialog/`` folders, so the model can follow the read-more hints
  (``read_file("tool_results/<hex>.txt", start_line=N)``) the offloader writes. A relative path that
  starts with ``tool_results/`` or ``dialog/`` resolves against the session folder (unless only the
  workspace has it); an absolute path inside those folders is accepted as well.

``..`` that climbs out of a root, absolute paths elsewhere, symlinks that leave the root, NUL bytes and
over-long paths are refused with a tool error that says why. Writing is allowed in the workspace only.

Errors never raise: bad JSON arguments, unknown tools, unknown parameters, I/O errors and exceptions
all become a :class:`ToolResult` with ``ok=False``. Only cancellation propagates.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import stat
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.model.text import format_bytes
from engine.store import textsearch
from engine.store.secrets import scrub_known

ApproveFn = Callable[[str, dict[str, Any]], Awaitable[bool]]

SESSION_SUBDIRS = ("tool_results", "dialog")
MAX_PATH_CHARS = 1024
MAX_NAME_BYTES = 255
READ_DEFAULT_LINES = 400
READ_MAX_LINES = 2000
READ_MAX_BYTES = 40_000
LIST_MAX_ENTRIES = 500
SEARCH_MAX_RESULTS = 200
SEARCH_DEFAULT_RESULTS = 50
SEARCH_MAX_FILE_BYTES = 5_000_000
SEARCH_MAX_LINE_CHARS = 300
SEARCH_SCAN_LINE_CHARS = 10_000
SEARCH_MAX_FILES = 20_000
SEARCH_SKIP_DIRS = frozenset({".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", ".mypy_cache"})
WRITE_MAX_BYTES = 5_000_000
SHELL_DEFAULT_TIMEOUT = 60.0
SHELL_MAX_TIMEOUT = 600.0
SHELL_MAX_OUTPUT_BYTES = 100_000
BINARY_SNIFF_BYTES = 8192


@dataclass(frozen=True)
class ToolResult:
    text: str
    ok: bool


class ToolError(Exception):
    """A failure the model should read: the message says what was wrong."""


def _spec(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": False,
            },
        },
    }


READ_FILE_SPEC = _spec(
    "read_file",
    "Read lines of a text file in the workspace, or an offloaded file of this session "
    "(tool_results/<id>.txt, dialog/<date>.jsonl). Use start_line to continue where a notice says.",
    {
        "path": {"type": "string", "description": "File path, relative to the workspace or absolute."},
        "start_line": {"type": "integer", "description": "First line to return (1-based).", "minimum": 1},
        "max_lines": {
            "type": "integer",
            "description": f"How many lines to return (default {READ_DEFAULT_LINES}, max {READ_MAX_LINES}).",
            "minimum": 1,
        },
    },
    ["path"],
)
LIST_DIR_SPEC = _spec(
    "list_dir",
    "List the entries of a folder in the workspace (or tool_results / dialog of this session).",
    {"path": {"type": "string", "description": "Folder path; '.' is the workspace root."}},
    [],
)
SEARCH_TEXT_SPEC = _spec(
    "search_text",
    "Search files for a regular expression (Python syntax); prints path:line: text for each match.",
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
    ["pattern"],
)
WRITE_FILE_SPEC = _spec(
    "write_file",
    "Create or overwrite a text file in the workspace (the user must approve each call).",
    {
        "path": {"type": "string", "description": "File path inside the workspace."},
        "content": {"type": "string", "description": "The full new content of the file."},
    },
    ["path", "content"],
)
RUN_SHELL_SPEC = _spec(
    "run_shell",
    "Run a shell command in the workspace folder (the user must approve each call). "
    "Returns the exit code and the combined output.",
    {
        "command": {"type": "string", "description": "The command line to run."},
        "timeout": {
            "type": "number",
            "description": f"Seconds before the command is killed (default {SHELL_DEFAULT_TIMEOUT:g}).",
        },
    },
    ["command"],
)

_PARAM_TYPES: dict[str, dict[str, type]] = {
    "read_file": {"path": str, "start_line": int, "max_lines": int},
    "list_dir": {"path": str},
    "search_text": {"pattern": str, "path": str, "glob": str, "ignore_case": bool, "max_results": int},
    "write_file": {"path": str, "content": str},
    "run_shell": {"command": str, "timeout": float},
}
_REQUIRED: dict[str, tuple[str, ...]] = {
    "read_file": ("path",),
    "list_dir": (),
    "search_text": ("pattern",),
    "write_file": ("path", "content"),
    "run_shell": ("command",),
}


def _coerce_arg(tool: str, key: str, value: Any, typ: type) -> Any:
    """Check one argument's type; accept the forms small models often send (numbers as strings)."""
    if typ is str:
        if isinstance(value, str):
            return value
    elif typ is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
    elif typ is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            return int(value.strip())
    elif typ is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
    raise ToolError(f"{tool}: argument {key!r} must be {typ.__name__}, got {json.dumps(value)[:80]}")


def parse_arguments(tool: str, arguments_json: str | dict[str, Any] | None) -> dict[str, Any]:
    """Decode and check a tool call's arguments; raise ToolError naming the problem."""
    if isinstance(arguments_json, dict):
        args: Any = arguments_json
    elif arguments_json is None or not str(arguments_json).strip():
        args = {}
    else:
        try:
            args = json.loads(arguments_json)
        except json.JSONDecodeError as exc:
            snippet = str(arguments_json)[:120]
            raise ToolError(
                f"{tool}: arguments are not valid JSON ({exc.msg} at position {exc.pos}): {snippet}"
            ) from None
        except RecursionError:
            raise ToolError(f"{tool}: arguments are not valid JSON (nested too deeply)") from None
    if not isinstance(args, dict):
        raise ToolError(f"{tool}: arguments must be a JSON object, got {type(args).__name__}")
    types = _PARAM_TYPES[tool]
    unknown = sorted(set(args) - set(types))
    if unknown:
        raise ToolError(
            f"{tool}: unknown argument(s) {', '.join(unknown)} (expected: {', '.join(types)})"
        )
    missing = [k for k in _REQUIRED[tool] if args.get(k) is None]
    if missing:
        raise ToolError(f"{tool}: missing required argument(s) {', '.join(missing)}")
    return {k: _coerce_arg(tool, k, v, types[k]) for k, v in args.items() if v is not None}


def _compile_pattern(pattern: str, ignore_case: bool) -> Any:
    return textsearch.compile_pattern(pattern, ignore_case=ignore_case)


def _search_line(pattern: Any, line: str) -> bool:
    """``pattern.search(line)``, given up after a second (a pattern that backtracks for ever)."""
    try:
        return textsearch.search(pattern, line) is not None
    except textsearch.PatternError as exc:
        raise ToolError(f"search_text: {exc}") from None


def _is_binary(sample: bytes) -> bool:
    return b"\0" in sample


class ToolBox:
    """The agent's built-in tools for one workspace and one session folder."""

    def __init__(
        self,
        workspace: Path,
        session_dir: Path,
        *,
        allow_write: bool = False,
        allow_shell: bool = False,
        approve: ApproveFn | None = None,
    ) -> None:
        self.workspace = Path(workspace).expanduser().resolve()
        self.session_dir = Path(session_dir).expanduser().resolve()
        self.allow_write = allow_write
        self.allow_shell = allow_shell
        self.approve = approve

    # ------------------------------------------------------------------ specs

    def names(self) -> list[str]:
        names = ["read_file", "list_dir", "search_text"]
        if self.allow_write:
            names.append("write_file")
        if self.allow_shell:
            names.append("run_shell")
        return names

    def specs(self) -> list[dict[str, Any]]:
        """OpenAI tool specs of the enabled tools (fresh copies: callers may mutate them)."""
        by_name = {
            "read_file": READ_FILE_SPEC,
            "list_dir": LIST_DIR_SPEC,
            "search_text": SEARCH_TEXT_SPEC,
            "write_file": WRITE_FILE_SPEC,
            "run_shell": RUN_SHELL_SPEC,
        }
        return [json.loads(json.dumps(by_name[n])) for n in self.names()]

    # ------------------------------------------------------------------ paths

    def _session_roots(self) -> list[Path]:
        return [self.session_dir / sub for sub in SESSION_SUBDIRS]

    def display_path(self, path: Path) -> str:
        """How a resolved path is shown to the model: relative to its root."""
        for sub in SESSION_SUBDIRS:
            root = self.session_dir / sub
            if path == root or path.is_relative_to(root):
                rel = path.relative_to(self.session_dir).as_posix()
                return rel
        if path.is_relative_to(self.workspace):
            rel = path.relative_to(self.workspace).as_posix()
            return rel or "."
        return str(path)

    def resolve(self, raw: str, *, write: bool = False) -> Path:
        """Resolve ``raw`` to a real path inside a root, or raise ToolError saying why not."""
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

    # ------------------------------------------------------------------ dispatch

    async def run(self, name: str, arguments_json: str | dict[str, Any] | None) -> ToolResult:
        """Run one tool call; every failure becomes a result with ``ok=False``."""
        try:
            if name not in _PARAM_TYPES:
                raise ToolError(f"unknown tool {name!r} (available: {', '.join(self.names())})")
            if name == "write_file" and not self.allow_write:
                raise ToolError("write_file is disabled (writing files is off; the user can enable it)")
            if name == "run_shell" and not self.allow_shell:
                raise ToolError("run_shell is disabled (shell commands are off; the user can enable it)")
            args = parse_arguments(name, arguments_json)
            if name in ("write_file", "run_shell"):
                await self._ask_approval(name, args)
            text = await getattr(self, f"_tool_{name}")(**args)
            return ToolResult(scrub_known(text), True)
        except asyncio.CancelledError:
            raise
        except ToolError as exc:
            return ToolResult(scrub_known(f"error: {exc}"), False)
        except Exception as exc:  # the tool failed: the model reads the reason, the turn goes on
            return ToolResult(scrub_known(f"error: {name} failed: {type(exc).__name__}: {exc}"), False)

    async def _ask_approval(self, name: str, args: dict[str, Any]) -> None:
        if self.approve is None:
            raise ToolError(f"{name} needs the user's approval, and no one can be asked here")
        try:
            ok = await self.approve(name, dict(args))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            raise ToolError(f"{name}: asking for approval failed ({exc})") from None
        if not ok:
            raise ToolError(f"the user did not approve this {name} call")

    # ------------------------------------------------------------------ read_file

    async def _tool_read_file(
        self, path: str, start_line: int = 1, max_lines: int = READ_DEFAULT_LINES
    ) -> str:
        if start_line < 1:
            raise ToolError(f"read_file: start_line must be 1 or more, got {start_line}")
        if max_lines < 1:
            raise ToolError(f"read_file: max_lines must be 1 or more, got {max_lines}")
        target = self.resolve(path)
        return await asyncio.to_thread(self._read_lines, target, start_line, min(max_lines, READ_MAX_LINES))

    def _read_lines(self, target: Path, start_line: int, max_lines: int) -> str:
        shown = self.display_path(target)
        if not target.exists():
            raise ToolError(f"read_file: no such file: {shown}")
        if target.is_dir():
            raise ToolError(f"read_file: {shown} is a folder (use list_dir)")
        # O_NONBLOCK: opening a FIFO must not wait for a writer (it would hang the turn for good)
        fd = os.open(target, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise ToolError(
                    f"read_file: {shown} is not a regular file (a pipe, socket or device); not read"
                )
            fh = os.fdopen(fd, "rb")
        except BaseException:
            os.close(fd)
            raise
        with fh:
            if _is_binary(fh.read(BINARY_SNIFF_BYTES)):
                size = target.stat().st_size
                raise ToolError(f"read_file: {shown} is a binary file ({format_bytes(size)}); not shown")
            fh.seek(0)
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

    # ------------------------------------------------------------------ list_dir

    async def _tool_list_dir(self, path: str = ".") -> str:
        target = self.resolve(path)
        return await asyncio.to_thread(self._list, target)

    def _list(self, target: Path) -> str:
        shown = self.display_path(target)
        if not target.exists():
            raise ToolError(f"list_dir: no such folder: {shown}")
        if not target.is_dir():
            raise ToolError(f"list_dir: {shown} is a file (use read_file)")
        entries = []
        with os.scandir(target) as it:
            for entry in it:
                entries.append(entry)
        entries.sort(key=lambda e: (not e.is_dir(follow_symlinks=False), e.name))
        lines = [f"{shown}/ ({len(entries)} entries)"]
        for entry in entries[:LIST_MAX_ENTRIES]:
            if entry.is_symlink():
                lines.append(f"{entry.name}@ -> {os.readlink(entry.path)}")
            elif entry.is_dir(follow_symlinks=False):
                lines.append(f"{entry.name}/")
            else:
                try:
                    size = entry.stat(follow_symlinks=False).st_size
                except OSError:
                    size = 0
                lines.append(f"{entry.name}  {format_bytes(size)}")
        if len(entries) > LIST_MAX_ENTRIES:
            lines.append(f"[… {len(entries) - LIST_MAX_ENTRIES} more entries not shown]")
        return "\n".join(lines)

    # ------------------------------------------------------------------ search_text

    async def _tool_search_text(
        self,
        pattern: str,
        path: str = ".",
        glob: str | None = None,
        ignore_case: bool = False,
        max_results: int = SEARCH_DEFAULT_RESULTS,
    ) -> str:
        try:
            regex = _compile_pattern(pattern, ignore_case)
        except textsearch.PatternError as exc:
            raise ToolError(f"search_text: invalid regular expression {pattern!r}: {exc}") from None
        if max_results < 1:
            raise ToolError(f"search_text: max_results must be 1 or more, got {max_results}")
        target = self.resolve(path)
        limit = min(max_results, SEARCH_MAX_RESULTS)
        return await asyncio.to_thread(self._search, regex, target, glob, limit)

    def _within_roots(self, path: Path) -> bool:
        for root in (self.workspace, *self._session_roots()):
            real = root.resolve()
            if path == real or path.is_relative_to(real):
                return True
        return False

    def _iter_files(self, target: Path) -> list[Path]:
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

    def _search(self, regex: Any, target: Path, glob: str | None, limit: int) -> str:
        shown_target = self.display_path(target)
        if not target.exists():
            raise ToolError(f"search_text: no such file or folder: {shown_target}")
        results: list[str] = []
        files_seen = 0
        truncated = False
        for file in self._iter_files(target):
            if glob and not file.match(glob):
                continue
            try:
                real = file.resolve()
            except (OSError, RuntimeError):  # a symlink loop: nothing to search there
                continue
            if not self._within_roots(real) or not real.is_file():
                continue  # a symlink that leaves the roots, or a socket / fifo
            try:
                if real.stat().st_size > SEARCH_MAX_FILE_BYTES:
                    continue
                with open(real, "rb") as fh:
                    if _is_binary(fh.read(BINARY_SNIFF_BYTES)):
                        continue
                    fh.seek(0)
                    files_seen += 1
                    for lineno, raw in enumerate(fh, start=1):
                        line = raw[:SEARCH_SCAN_LINE_CHARS].decode("utf-8", errors="replace").rstrip("\r\n")
                        if _search_line(regex, line):
                            if len(results) >= limit:
                                truncated = True
                                break
                            if len(line) > SEARCH_MAX_LINE_CHARS:
                                line = line[:SEARCH_MAX_LINE_CHARS] + "…"
                            results.append(f"{self.display_path(file.absolute())}:{lineno}: {line}")
            except OSError:
                continue
            if truncated:
                break
        if not results:
            return f"no matches for /{regex.pattern}/ in {shown_target} ({files_seen} files searched)"
        head = f"{len(results)} match(es) for /{regex.pattern}/ in {shown_target}"
        if truncated:
            head += f" (stopped at {limit}; narrow the pattern, path or glob for more)"
        return head + "\n" + "\n".join(results)

    # ------------------------------------------------------------------ write_file

    async def _tool_write_file(self, path: str, content: str) -> str:
        data = content.encode("utf-8", errors="surrogatepass")
        if len(data) > WRITE_MAX_BYTES:
            raise ToolError(f"write_file: content is {len(data)} bytes; the limit is {WRITE_MAX_BYTES}")
        target = self.resolve(path, write=True)
        if target.is_dir():
            raise ToolError(f"write_file: {self.display_path(target)} is a folder")
        from engine.store.fsutil import atomic_write_bytes

        existed = target.exists()
        await asyncio.to_thread(atomic_write_bytes, target, data)
        verb = "overwrote" if existed else "created"
        return f"{verb} {self.display_path(target)} ({len(data)} bytes)"

    # ------------------------------------------------------------------ run_shell

    async def _tool_run_shell(self, command: str, timeout: float = SHELL_DEFAULT_TIMEOUT) -> str:
        if not command.strip():
            raise ToolError("run_shell: command is empty")
        if "\0" in command:
            raise ToolError("run_shell: command contains a NUL byte")
        if not timeout > 0:
            raise ToolError(f"run_shell: timeout must be positive, got {timeout}")
        timeout = min(timeout, SHELL_MAX_TIMEOUT)
        proc = await asyncio.create_subprocess_shell(
            command,
            cwd=self.workspace,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        # keep only the head of the output and count the rest: ``yes`` for a minute is tens of GB,
        # which communicate() would hold in memory (what came before a timeout is kept too)
        head = bytearray()
        total = 0

        async def drain() -> None:
            nonlocal total
            assert proc.stdout is not None
            while chunk := await proc.stdout.read(1 << 16):
                total += len(chunk)
                room = SHELL_MAX_OUTPUT_BYTES - len(head)
                if room > 0:
                    head.extend(chunk[:room])
            await proc.wait()

        reader = asyncio.ensure_future(drain())
        timed_out = False
        try:
            await asyncio.wait_for(asyncio.shield(reader), timeout)
        except TimeoutError:
            timed_out = True
            _kill_group(proc)
            try:  # the pipe closes once the group is gone (a process that left it may hold it open)
                await asyncio.wait_for(asyncio.shield(reader), 5)
            except TimeoutError:
                reader.cancel()
                await asyncio.shield(proc.wait())
        except BaseException:  # cancelled: never leave the command running
            _kill_group(proc)
            reader.cancel()
            await asyncio.shield(proc.wait())
            raise
        text = bytes(head).decode("utf-8", errors="replace")
        if total > SHELL_MAX_OUTPUT_BYTES:
            text = bytes(head).decode("utf-8", errors="ignore")
            text += f"\n[… output cut: {total} bytes in total]"
        if timed_out:
            return f"killed after {timeout:g} s (timeout)\n{text}"
        return f"exit code {proc.returncode}\n{text}"


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            proc.kill()
        except ProcessLookupError:
            pass
