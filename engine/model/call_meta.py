"""What an agent's file says about one provider call beyond its token figures: who the call worked for
(:class:`CallAttribution`), why the prompt cache missed (:class:`CacheMiss`) and the server-side work billed
beside the call's top-level usage (:class:`UsageIteration`).

Claude Code 2.1.3xx writes them on its ``assistant`` records:

- ``attributionSkill`` / ``attributionAgent`` / ``attributionPlugin`` / ``attributionMcpServer`` /
  ``attributionMcpTool``: the skill that was running, the subagent type (``general-purpose``…), the plugin the
  skill or agent came from, and the MCP server and tool whose result the call answered;
- ``message.diagnostics.cache_miss_reason``: the Anthropic API's own reason the prompt cache missed,
  ``{"type": "tools_changed" | "system_changed" | "model_changed" | "messages_changed" |
  "previous_message_not_found" | "unavailable", "cache_missed_input_tokens": n}``;
- ``message.usage.iterations``: one entry per sampling iteration of the request (``type`` ``message``,
  ``fallback_message``, ``compaction``, ``advisor_message``, each with its four token figures). The top-level
  usage is the sum of the ``message`` iterations (Anthropic's compaction documentation: "the top-level
  input_tokens and output_tokens do not include compaction iteration usage"), so the other iterations are
  billed *beside* it: a call's cost is its top-level usage plus theirs, each counted once
  (:attr:`UsageIteration.beside`). They are no part of the call's context (its prompt figure stays the
  top-level one).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.model.text import printable

# iterations whose tokens the top-level usage already holds; any other type is billed beside it
IN_TOP_LEVEL = frozenset({"message", "fallback_message"})
# the iteration types Claude Code 2.1.332 knows (its own cost code names them): the others are billed beside
ITERATION_TYPES: dict[str, str] = {
    "message": "the response's own sampling: the top-level usage",
    "fallback_message": "the response sampled again on a fallback: the top-level usage",
    "compaction": "a server-side compaction's summarising pass: billed beside",
    "advisor_message": "an advisor model's pass: billed beside",
}
# the API's cache-miss reasons, in words
MISS_WORDS: dict[str, str] = {
    "model_changed": "the model changed",
    "system_changed": "the system prompt changed",
    "tools_changed": "the tool definitions changed",
    "messages_changed": "an earlier message changed",
    "previous_message_not_found": "the previous request was not found in the cache",
    "unavailable": "the cache was unavailable",
}
ATTRIBUTION_KEYS = ("attributionSkill", "attributionAgent", "attributionPlugin", "attributionMcpServer",
                    "attributionMcpTool")


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value or value < 0:
        return None
    return int(value) if value < 2**53 else None


def _name(value: Any) -> str:
    return printable(value)[:200] if isinstance(value, str) else ""


@dataclass(frozen=True, slots=True)
class CallAttribution:
    """Who a call worked for, as the agent attributed it ("" where it named none)."""

    skill: str = ""
    agent: str = ""  # the subagent's type (Claude Code: general-purpose, Explore, a custom agent's name)
    plugin: str = ""
    mcp_server: str = ""
    mcp_tool: str = ""

    def to_json(self) -> dict[str, str]:
        return {k: v for k, v in (("skill", self.skill), ("agent", self.agent), ("plugin", self.plugin),
                                  ("mcp_server", self.mcp_server), ("mcp_tool", self.mcp_tool)) if v}


@dataclass(frozen=True, slots=True)
class CacheMiss:
    """Why the provider's prompt cache missed on a call, as the provider said it."""

    reason: str  # the API's word (``tools_changed``…)
    tokens: int | None  # the input tokens the miss cost (processed again instead of read)

    def text(self) -> str:
        """One line: the reason in words and the tokens it cost."""
        words = MISS_WORDS.get(self.reason, self.reason.replace("_", " ") or "no reason given")
        cost = f" ({self.tokens:,} tokens missed the cache)" if self.tokens is not None else ""
        return f"Cache miss (the provider's reason): {words}{cost}"

    def to_json(self) -> dict[str, Any]:
        return {"reason": self.reason, "tokens": self.tokens}


@dataclass(frozen=True, slots=True)
class UsageIteration:
    """One sampling iteration of a request (``usage.iterations``)."""

    kind: str
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    model: str = ""  # where the iteration ran on another model (an advisor)

    @property
    def beside(self) -> bool:
        """Billed beside the top-level usage (not part of it)."""
        return self.kind not in IN_TOP_LEVEL

    @property
    def prompt_tokens(self) -> int:
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.output_tokens

    def to_json(self) -> dict[str, Any]:
        return {"type": self.kind, "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "cache_read_tokens": self.cache_read_tokens, "cache_write_tokens": self.cache_write_tokens,
                "model": self.model}


def attribution_of(obj: Mapping[str, Any]) -> CallAttribution | None:
    """The attribution fields of a Claude Code ``assistant`` record; None when it has none."""
    for key in ATTRIBUTION_KEYS:  # (a loop, not any() over a generator: it runs for every assistant line)
        value = obj.get(key)
        if value and isinstance(value, str):
            break
    else:
        return None
    skill, agent, plugin, server, tool = (_name(obj.get(k)) for k in ATTRIBUTION_KEYS)
    return CallAttribution(skill, agent, plugin, server, tool)


def cache_miss_of(message: Mapping[str, Any]) -> CacheMiss | None:
    """``message.diagnostics.cache_miss_reason`` (an Anthropic response), or None."""
    diagnostics = message.get("diagnostics")
    miss = diagnostics.get("cache_miss_reason") if isinstance(diagnostics, Mapping) else None
    if isinstance(miss, str) and miss:  # a bare reason, without its tokens
        return CacheMiss(_name(miss), None)
    if not isinstance(miss, Mapping):
        return None
    return CacheMiss(_name(miss.get("type")), _count(miss.get("cache_missed_input_tokens")))


def iterations_of(usage: Mapping[str, Any]) -> tuple[UsageIteration, ...]:
    """``usage.iterations`` (an Anthropic response): the entries with their figures (an entry without a type or
    with a figure that is no count is left out; an absent figure counts 0)."""
    raw = usage.get("iterations")
    out: list[UsageIteration] = []
    for entry in raw if isinstance(raw, list) else ():
        if not isinstance(entry, Mapping) or not isinstance(entry.get("type"), str):
            continue
        figures = [entry.get(k) for k in ("input_tokens", "output_tokens", "cache_read_input_tokens",
                                          "cache_creation_input_tokens")]
        counts = [0 if v is None else _count(v) for v in figures]
        if any(c is None for c in counts):
            continue
        inp, out_, read, write = (int(c or 0) for c in counts)
        out.append(UsageIteration(_name(entry["type"]), inp, out_, read, write, _name(entry.get("model"))))
    return tuple(out)


def beside_of(iterations: tuple[UsageIteration, ...]) -> list[dict[str, Any]]:
    """The iterations billed beside the top-level usage, as a ``context`` record keeps them (``billed_beside``)."""
    return [it.to_json() for it in iterations if it.beside]


__all__ = ["ATTRIBUTION_KEYS", "IN_TOP_LEVEL", "ITERATION_TYPES", "MISS_WORDS", "CacheMiss", "CallAttribution",
           "UsageIteration", "attribution_of", "beside_of", "cache_miss_of", "iterations_of"]
