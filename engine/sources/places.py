"""Where each agent keeps its sessions, as the agent itself finds them: the folders (from its environment variables,
else the home folder) and which files under them are sessions. The format registry (:mod:`engine.sources.formats`)
names one :class:`Place` per listed format; the sources scan (:mod:`engine.sources.discovery`) only walks them.

No reader is imported here: finding the folders costs no import (``ctxbench sources`` with nothing changed reads no
session file and imports no reader).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from engine.capture.files import CAPTURE_DIR, captures_dir

Roots = Callable[[Mapping[str, str], Path], list[Path]]


@dataclass(frozen=True)
class Place:
    """Where one agent keeps its sessions.

    ``roots``: its folders, from the environment and the home folder (in the order the agent looks); ``shown``: how a
    person finds the usual one ("~/.claude/projects"); ``pattern``: its session files under a root (a glob);
    ``keep``: whether a file the pattern finds is a session of its own (not a rolled-over part, not a subagent's file
    read with its parent); ``anywhere``: the glob that finds its sessions in a folder of the ``source_dirs`` setting,
    with ``is_source`` checking each (None: found there by the first JSON line of each ``.jsonl`` file, when
    ``by_first_line``)."""

    roots: Roots
    shown: str
    pattern: str
    keep: Callable[[Path], bool] | None = None
    anywhere: str | None = None
    is_source: Callable[[Path], bool] | None = None
    by_first_line: bool = False


def _env_dir(env: Mapping[str, str], name: str) -> Path | None:
    value = (env.get(name) or "").strip()
    return Path(value).expanduser() if value else None


def claude_code_roots(env: Mapping[str, str], home: Path) -> list[Path]:
    """``~/.claude/projects``, ``~/.config/claude/projects`` and the ``projects`` folder of every folder named in
    ``$CLAUDE_CONFIG_DIR`` (comma-separated; the folder itself when it has none)."""
    roots = [home / ".claude" / "projects", home / ".config" / "claude" / "projects"]
    for item in (env.get("CLAUDE_CONFIG_DIR") or "").split(","):
        if item.strip():
            folder = Path(item.strip()).expanduser()
            roots.append(folder / "projects" if (folder / "projects").is_dir() else folder)
    return roots


def not_a_subagent_file(path: Path) -> bool:
    """A session file of its own: not a subagent's (``subagents/``, ``agent-*.jsonl``: read with its parent's) nor a
    Codex rollout met in another agent's folder."""
    return "subagents" not in path.parts and not path.name.startswith(("rollout-", "agent-"))


def codex_roots(env: Mapping[str, str], home: Path) -> list[Path]:
    return [(_env_dir(env, "CODEX_HOME") or home / ".codex") / "sessions"]


def gemini_cli_roots(env: Mapping[str, str], home: Path) -> list[Path]:
    return [(_env_dir(env, "GEMINI_CLI_HOME") or home) / ".gemini" / "tmp"]


def pi_roots(env: Mapping[str, str], home: Path) -> list[Path]:
    return [(_env_dir(env, "PI_CODING_AGENT_DIR") or home / ".pi" / "agent") / "sessions"]


def copilot_roots(env: Mapping[str, str], home: Path) -> list[Path]:
    return [(_env_dir(env, "COPILOT_HOME") or home / ".copilot") / "session-state"]


def cline_roots(env: Mapping[str, str], home: Path) -> list[Path]:
    """Cline's sessions folder, found as Cline 3.0.65 finds it (its environment variables, else ``~/.cline``)."""
    if folder := _env_dir(env, "CLINE_SESSION_DATA_DIR"):
        return [folder]
    if data := _env_dir(env, "CLINE_DATA_DIR"):
        return [data / "sessions"]
    return [(_env_dir(env, "CLINE_DIR") or home / ".cline") / "data" / "sessions"]


def qwen_code_roots(env: Mapping[str, str], home: Path) -> list[Path]:
    return [home / ".qwen" / "projects"]


def data_home_roots(name: str) -> Roots:
    """``${XDG_DATA_HOME:-~/.local/share}/<name>`` (OpenCode's and Kilo's databases)."""

    def roots(env: Mapping[str, str], home: Path) -> list[Path]:
        return [(_env_dir(env, "XDG_DATA_HOME") or home / ".local" / "share") / name]

    return roots


def capture_roots(env: Mapping[str, str], home: Path) -> list[Path]:
    """This app's own recordings (``ctxbench record`` / ``proxy``): ``<data dir>/captures``."""
    own_data = env.get("CTXBENCH_DATA_DIR")
    return [Path(own_data) / CAPTURE_DIR if own_data else captures_dir()]


def capture_part(path: Path) -> bool:
    """Whether ``path`` is a rolled-over part of a capture (``capture-….2.jsonl``: read with its first part)."""
    head, _, tail = path.stem.rpartition(".")
    return bool(head) and tail.isdigit()


def first_capture_part(path: Path) -> bool:
    return not capture_part(path)


def environment(env: Mapping[str, str] | None, home: Path | None) -> tuple[Mapping[str, str], Path]:
    """The environment and home folder a scan looks from (this process's by default)."""
    env = os.environ if env is None else env
    return env, Path(env.get("HOME") or Path.home()) if home is None else home


__all__ = ["Place", "Roots", "capture_part", "capture_roots", "claude_code_roots", "cline_roots", "codex_roots",
           "copilot_roots", "data_home_roots", "environment", "first_capture_part", "gemini_cli_roots",
           "not_a_subagent_file", "pi_roots", "qwen_code_roots"]
