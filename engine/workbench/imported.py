"""What an imported session's file said about the agent itself, for the window: the request's fixed
prefix (system prompt and tool definitions, as Claude Code's ``/context`` lists them) and the agent's
own cost.

:func:`import_facts` reads the session meta's ``import`` record (written by
:func:`engine.ingest.import_source`) into an :class:`ImportFacts`: plain data, grouped and totalled
here so the widgets only draw it. Tool definitions are grouped as ``/context`` groups them: the
agent's built-in tools first, then one group per MCP server (tools named ``mcp__<server>__<tool>``),
largest total first; in each group the tools largest first. Nothing is invented: a figure the import
did not record stays ``None`` (or the list stays empty).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

FROM_FILE = "file"
INFERRED = "inferred"
PREFIX_LABELS = {
    FROM_FILE: "from the file (as sent)",
    INFERRED: "inferred (the first call's prompt minus the messages' estimate)",
}


@dataclass(frozen=True)
class ToolDefinition:
    name: str
    tokens: int
    server: str = ""  # the MCP server, "" for the agent's built-in tools


@dataclass(frozen=True)
class ToolGroup:
    """The built-in tools (``server`` "") or one MCP server's tools, largest first."""

    server: str
    tools: tuple[ToolDefinition, ...]

    @property
    def label(self) -> str:
        return "Built-in tools" if not self.server else f"MCP server {self.server}"

    @property
    def tokens(self) -> int:
        return sum(t.tokens for t in self.tools)


@dataclass(frozen=True)
class ImportFacts:
    """The agent's own figures of an imported session (see the module docstring)."""

    agent: str = ""  # the source format ("claude-code", "codex", …)
    prefix_source: str = ""  # "file" | "inferred" | ""
    system_prompt_tokens: int | None = None
    groups: tuple[ToolGroup, ...] = ()
    inferred_prefix_tokens: int | None = None  # system prompt + tools together, when only inferred
    agent_cost_usd: float | None = None
    agent_cost_by_model: dict[str, float] = field(default_factory=dict)
    ignored: dict[str, int] = field(default_factory=dict)  # record type -> lines left out on purpose

    @property
    def prefix_label(self) -> str:
        """"from the file (as sent)", "inferred (…)", or "" when nothing is known."""
        return PREFIX_LABELS.get(self.prefix_source, "")

    @property
    def tools(self) -> list[ToolDefinition]:
        return [t for g in self.groups for t in g.tools]

    @property
    def tool_tokens(self) -> int:
        return sum(g.tokens for g in self.groups)

    @property
    def has_prefix(self) -> bool:
        return bool(self.groups) or self.system_prompt_tokens is not None or self.inferred_prefix_tokens is not None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def group_tools(definitions: Any) -> tuple[ToolGroup, ...]:
    """``[{"name", "tokens", "server"}]`` grouped: built-in tools first, then each MCP server by its
    total, largest first; the tools of a group largest first (ties by name)."""
    by_server: dict[str, list[ToolDefinition]] = {}
    for d in definitions if isinstance(definitions, list) else []:
        if not isinstance(d, dict):
            continue
        tokens = _int(d.get("tokens"))
        server = str(d.get("server") or "")
        by_server.setdefault(server, []).append(ToolDefinition(str(d.get("name") or "?"), tokens or 0, server))
    groups = [ToolGroup(s, tuple(sorted(tools, key=lambda t: (-t.tokens, t.name)))) for s, tools in by_server.items()]
    return tuple(sorted(groups, key=lambda g: (g.server != "", -g.tokens, g.server)))


def import_facts(meta: dict[str, Any]) -> ImportFacts | None:
    """The :class:`ImportFacts` of a session's meta; None for a session that was not imported."""
    imp = meta.get("import")
    if not isinstance(imp, dict):
        return None
    inferred = imp.get("inferred_prefix")
    by_model = imp.get("agent_cost_by_model")
    ignored = imp.get("ignored")
    prefix_source = str(imp.get("prefix_source") or "")
    return ImportFacts(
        agent=str(imp.get("format") or ""),
        prefix_source=prefix_source,
        system_prompt_tokens=_int(imp.get("system_prompt_tokens")),
        groups=group_tools(imp.get("tool_definitions")),
        inferred_prefix_tokens=_int(inferred.get("tokens")) if isinstance(inferred, dict)
        and prefix_source != FROM_FILE else None,
        agent_cost_usd=_float(imp.get("agent_cost_usd")),
        agent_cost_by_model={str(m): v for m, c in by_model.items() if (v := _float(c)) is not None}
        if isinstance(by_model, dict) else {},
        ignored={str(k): v for k, n in ignored.items() if (v := _int(n)) is not None} if isinstance(ignored, dict)
        else {},
    )


__all__ = [
    "FROM_FILE",
    "INFERRED",
    "ImportFacts",
    "ToolDefinition",
    "ToolGroup",
    "group_tools",
    "import_facts",
]
