"""One session as Sources lists it (:class:`SourceEntry`), and the formats Sources lists (:data:`Agent`): the type the
light passes (:mod:`engine.sources.session_summary`, :mod:`engine.sources.opencode_summary`) make, the scan keeps in
its index and the format registry's ``summary`` returns."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

Agent = Literal["claude-code", "codex", "gemini-cli", "opencode", "pi", "proxy-capture", "copilot-cli", "cline",
                "qwen-code", "kilo"]


@dataclass
class SourceEntry:
    agent: Agent
    project: str
    session_id: str
    path: str
    started: str
    last_activity: str
    calls: int
    last_prompt_tokens: int | None
    window: int | None
    percent_full: float | None
    model: str = ""
    title: str = ""  # the first prompt (one line, cut), "" when none was found
    agent_cost_usd: float | None = None  # the agent's own cost (Claude Code's last cost-state), None: unknown
    subagents: int = 0  # child sessions counted with this one (OpenCode's task subagents, Codex's spawn_agent threads)
    parent_id: str = ""  # the session a subagent's file belongs to (Codex), counted with it when it is listed

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


__all__ = ["Agent", "SourceEntry"]
