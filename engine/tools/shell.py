"""``run_shell``: one command in the workspace folder (off by default; the user approves each call)."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Mapping
from typing import Any

from engine.tools.declare import ToolDecl, object_schema
from engine.tools.workspace import ToolError, Workspace

SHELL_DEFAULT_TIMEOUT = 60.0
SHELL_MAX_TIMEOUT = 600.0
SHELL_MAX_OUTPUT_BYTES = 100_000


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            proc.kill()
        except ProcessLookupError:
            pass


class _Drain:
    """Keep only the head of a command's output and count the rest: ``yes`` for a minute is tens
    of GB, which communicate() would hold in memory (what came before a timeout is kept too)."""

    def __init__(self) -> None:
        self.head = bytearray()
        self.total = 0

    async def __call__(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        while chunk := await proc.stdout.read(1 << 16):
            self.total += len(chunk)
            room = SHELL_MAX_OUTPUT_BYTES - len(self.head)
            if room > 0:
                self.head.extend(chunk[:room])
        await proc.wait()

    def text(self) -> str:
        if self.total > SHELL_MAX_OUTPUT_BYTES:
            text = bytes(self.head).decode("utf-8", errors="ignore")
            return text + f"\n[… output cut: {self.total} bytes in total]"
        return bytes(self.head).decode("utf-8", errors="replace")


async def _wait_or_kill(proc: asyncio.subprocess.Process, reader: asyncio.Future[None], timeout: float) -> bool:
    """Wait for the command; kill its process group on timeout or cancellation. True if it timed out."""
    try:
        await asyncio.wait_for(asyncio.shield(reader), timeout)
    except TimeoutError:
        _kill_group(proc)
        try:  # the pipe closes once the group is gone (a process that left it may hold it open)
            await asyncio.wait_for(asyncio.shield(reader), 5)
        except TimeoutError:
            reader.cancel()
            await asyncio.shield(proc.wait())
        return True
    except BaseException:  # cancelled: never leave the command running
        _kill_group(proc)
        reader.cancel()
        await asyncio.shield(proc.wait())
        raise
    return False


async def run_shell(ws: Workspace, command: str, timeout: float = SHELL_DEFAULT_TIMEOUT) -> str:
    if not command.strip():
        raise ToolError("run_shell: command is empty")
    if "\0" in command:
        raise ToolError("run_shell: command contains a NUL byte")
    if not timeout > 0:
        raise ToolError(f"run_shell: timeout must be positive, got {timeout}")
    timeout = min(timeout, SHELL_MAX_TIMEOUT)
    proc = await asyncio.create_subprocess_shell(
        command,
        cwd=ws.workspace,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    drain = _Drain()
    reader = asyncio.ensure_future(drain(proc))
    timed_out = await _wait_or_kill(proc, reader, timeout)
    if timed_out:
        return f"killed after {timeout:g} s (timeout)\n{drain.text()}"
    return f"exit code {proc.returncode}\n{drain.text()}"


def _shell_approval_text(args: Mapping[str, Any]) -> str:
    return "It runs a shell command in the workspace."


RUN_SHELL = ToolDecl(
    name="run_shell",
    description=(
        "Run a shell command in the workspace folder (the user must approve each call). "
        "Returns the exit code and the combined output."
    ),
    parameters=object_schema(
        {
            "command": {"type": "string", "description": "The command line to run."},
            "timeout": {
                "type": "number",
                "description": f"Seconds before the command is killed (default {SHELL_DEFAULT_TIMEOUT:g}).",
            },
        },
        ("command",),
    ),
    handler=run_shell,
    needs_approval=True,
    approval_text=_shell_approval_text,
    switch="shell",
    disabled_text="run_shell is disabled (shell commands are off; the user can enable it)",
)
